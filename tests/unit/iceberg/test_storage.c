/*
 * Unit tests for the local backend of common/iceberg/storage.c: puts create missing
 * directories (only probed when the temp file cannot be created) also after the
 * directories were removed behind the writer's back, put-if-absent keeps its
 * create-once semantics there, and the local mkdir -p / directory fsync helpers. The S3
 * backend without a server: locations it cannot serve and an unreachable endpoint are
 * errors (the S3 backend's requests themselves are tested against s3rver in
 * tests/js/iceberg_readback.test.mjs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "common/iceberg/storage.h"
#include "tests/harness/harness.h"

static char tmp[256];

static void rm_rf(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

static void expect_content(cdc_storage_t *s, const char *loc, const char *want)
{
    cdc_error_t e;
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal(cdc_storage_get(s, loc, &data, &len, &e), CDC_OK);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(data, want, len);
    free(data);
}

static void test_put_creates_missing_dirs(void **state)
{
    (void)state;
    cdc_storage_t *s;
    cdc_error_t e;
    char wh[300], loc[400], loc2[400], top[350], leaf[400];

    snprintf(wh, sizeof(wh), "%s/wh", tmp);
    snprintf(top, sizeof(top), "%s/a", wh);
    snprintf(leaf, sizeof(leaf), "%s/a/b/c", wh);
    snprintf(loc, sizeof(loc), "%s/a/b/c/one.json", wh);
    snprintf(loc2, sizeof(loc2), "file://%s/a/b/c/two.json", wh);
    assert_int_equal(cdc_storage_open(wh, NULL, &s, &e), CDC_OK);

    /* nothing exists yet: every level is created */
    assert_int_equal(cdc_storage_put(s, loc, "1", 1, &e), CDC_OK);
    expect_content(s, loc, "1");
    /* the directory exists: replaced in place, no temp file left behind */
    assert_int_equal(cdc_storage_put(s, loc, "22", 2, &e), CDC_OK);
    expect_content(s, loc, "22");
    assert_int_equal(cdc_test_count_files(leaf, NULL, false, NULL), 1);

    /* removed behind our back: created again */
    rm_rf(top);
    assert_int_equal(cdc_storage_put(s, loc, "333", 3, &e), CDC_OK);
    expect_content(s, loc, "333");
    rm_rf(leaf);
    assert_int_equal(cdc_storage_put_if_absent(s, loc2, "x", 1, &e), CDC_OK);
    assert_int_equal(cdc_storage_put_if_absent(s, loc2, "y", 1, &e), CDC_ERR_EXISTS);
    expect_content(s, loc2, "x");
    assert_int_equal(cdc_test_count_files(leaf, NULL, false, NULL), 1);

    /* a file where a directory should be: an error, not a crash or a loop */
    char bad[450];
    snprintf(bad, sizeof(bad), "%s/a/b/c/two.json/three.json", wh);
    assert_int_not_equal(cdc_storage_put(s, bad, "z", 1, &e), CDC_OK);
    cdc_storage_close(s);
}

static void test_local_helpers(void **state)
{
    (void)state;
    cdc_error_t e;
    char dir[400];
    struct stat sb;

    snprintf(dir, sizeof(dir), "%s/x/y/z", tmp);
    assert_int_equal(cdc_storage_local_mkdirs(dir, &e), CDC_OK);
    assert_int_equal(stat(dir, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(cdc_storage_local_mkdirs(dir, &e), CDC_OK); /* exists: fine */
    assert_int_equal(cdc_storage_local_fsync_dir(dir, &e), CDC_OK);
    rm_rf(dir);
    assert_int_equal(cdc_storage_local_fsync_dir(dir, &e), CDC_ERR_IO);
    assert_non_null(strstr(e.msg, "z"));
}

static void test_s3_without_a_server(void **state)
{
    (void)state;
    cdc_storage_t *s;
    cdc_error_t e;
    uint8_t *data = NULL;
    size_t len = 0;
    bool exists = true;
    int64_t size = 0;
    /* port 1 on loopback: connection refused at once; no retries */
    cdc_storage_config_t cfg = {.endpoint = "http://127.0.0.1:1/",
                                .access_key = "a",
                                .secret_key = "s",
                                .path_style = true,
                                .max_retries = -1,
                                .timeout_ms = 2000};

    assert_int_equal(cdc_storage_open("s3://bucket/wh", &cfg, &s, &e), CDC_OK);
    assert_false(cdc_storage_is_local(s));
    assert_null(cdc_storage_local_path(s, "s3://bucket/wh/x"));

    /* another scheme is refused before any request (the response it would have freed was
     * never initialised) */
    assert_int_equal(cdc_storage_get(s, "gs://bucket/wh/x", &data, &len, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "is not an s3:// location"));
    assert_int_equal(cdc_storage_put(s, "gs://bucket/wh/x", "1", 1, &e), CDC_ERR_INVALID);
    assert_int_equal(cdc_storage_put_if_absent(s, "gs://bucket/wh/x", "1", 1, &e), CDC_ERR_INVALID);
    assert_int_equal(cdc_storage_delete(s, "gs://bucket/wh/x", &e), CDC_ERR_INVALID);
    assert_int_equal(cdc_storage_exists(s, "gs://bucket/wh/x", &exists, &e), CDC_ERR_INVALID);
    assert_int_equal(cdc_storage_size(s, "gs://bucket/wh/x", &size, &e), CDC_ERR_INVALID);
    assert_int_equal(cdc_storage_get(s, "/local/x", &data, &len, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "does not belong to this s3 warehouse"));

    /* the endpoint refuses: retriable, and the message names the request */
    assert_int_equal(cdc_storage_get(s, "s3://bucket/wh/x", &data, &len, &e), CDC_ERR_UNAVAILABLE);
    assert_true(e.retriable);
    assert_non_null(strstr(e.msg, "s3 GET http://127.0.0.1:1/bucket/wh/x failed: "));
    assert_int_equal(cdc_storage_exists(s, "s3://bucket/wh/x", &exists, &e), CDC_ERR_UNAVAILABLE);
    assert_non_null(strstr(e.msg, "s3 HEAD "));
    cdc_storage_close(s);
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp, sizeof(tmp), "%s/test_storage.XXXXXX", t);
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rm_rf(tmp);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_creates_missing_dirs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_helpers, setup, teardown),
        cmocka_unit_test(test_s3_without_a_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
