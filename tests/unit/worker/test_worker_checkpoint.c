/*
 * Unit tests for worker/checkpoint.c over the local warehouse backend: incremental
 * upload (a second checkpoint uploads only new table files), restore on "another
 * worker" (a second checkpoint object without local copies), local reuse, and GC of
 * files no retained checkpoint refers to.
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

#include "common/state.h"
#include "worker/checkpoint.h"
#include "tests/harness/harness.h"

static char tmp[256];

static cdc_state_t *open_store(const char *dir)
{
    cdc_state_options_t o = {.nfamilies = 1, .families = {"kv"}, .ttl_seconds = {0}};
    cdc_state_t *st;
    cdc_error_t e;
    assert_int_equal(cdc_state_open(dir, &o, &st, &e), CDC_OK);
    return st;
}

static void fill(cdc_state_t *st, int from, int to)
{
    cdc_error_t e;
    char k[32], v[100];
    for (int i = from; i < to; i++) {
        snprintf(k, sizeof(k), "key-%08d", i);
        snprintf(v, sizeof(v), "value-%d-%0*d", i, 60, i);
        assert_int_equal(cdc_state_put(st, 0, k, strlen(k), v, strlen(v), &e), CDC_OK);
    }
}

static bool has(cdc_state_t *st, int i)
{
    cdc_error_t e;
    char k[32];
    void *v;
    size_t n;
    snprintf(k, sizeof(k), "key-%08d", i);
    cdc_err_t rc = cdc_state_get(st, 0, k, strlen(k), &v, &n, &e);
    if (rc == CDC_OK)
        free(v);
    return rc == CDC_OK;
}

static void test_incremental_restore_gc(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_storage_t *storage;
    cdc_ckpt_t a, b;
    cdc_ckpt_stats_t s1, s2, s3;
    const char *h1, *h2, *h3;
    char wh[300], la[300], lb[300], dba[300], cp[300], dbb[300], area[400];
    bool reused;

    snprintf(wh, sizeof(wh), "%s/warehouse", tmp);
    snprintf(la, sizeof(la), "%s/wa", tmp);
    snprintf(lb, sizeof(lb), "%s/wb", tmp);
    snprintf(dba, sizeof(dba), "%s/wa/db", tmp);
    snprintf(area, sizeof(area), "%s/_checkpoints/job1/p3", wh);
    assert_int_equal(cdc_storage_open(wh, NULL, &storage, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_init(&a, storage, wh, "job1", 3, la, &e), CDC_OK);

    cdc_state_t *st = open_store(dba);
    fill(st, 0, 20000);
    snprintf(cp, sizeof(cp), "%s/ckpt-1", la);
    assert_int_equal(cdc_state_checkpoint(st, cp, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_upload(&a, 1, cp, &h1, &s1, &e), CDC_OK);
    assert_true(s1.files_uploaded >= 2);
    assert_non_null(strstr(h1, "/_checkpoints/job1/p3/m-"));

    fill(st, 20000, 21000);
    snprintf(cp, sizeof(cp), "%s/ckpt-2", la);
    assert_int_equal(cdc_state_checkpoint(st, cp, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_upload(&a, 2, cp, &h2, &s2, &e), CDC_OK);
    /* Incremental: the first table file is not uploaded again. */
    assert_true(s2.bytes_uploaded < s1.bytes_uploaded);
    assert_true(s2.bytes_total > s2.bytes_uploaded);
    fprintf(stderr, "checkpoint 1: %llu bytes uploaded; checkpoint 2: %llu of %llu bytes\n",
            (unsigned long long)s1.bytes_uploaded, (unsigned long long)s2.bytes_uploaded,
            (unsigned long long)s2.bytes_total);

    /* Another worker restores checkpoint 2 from the shared store. */
    assert_int_equal(cdc_ckpt_init(&b, storage, wh, "job1", 3, lb, &e), CDC_OK);
    snprintf(dbb, sizeof(dbb), "%s/db", lb);
    assert_int_equal(cdc_ckpt_restore(&b, h2, dbb, &reused, &e), CDC_OK);
    assert_false(reused);
    cdc_state_t *st2 = open_store(dbb);
    assert_true(has(st2, 0));
    assert_true(has(st2, 20999));
    assert_false(has(st2, 21000));
    /* It continues and checkpoints incrementally on top of the restored files. */
    fill(st2, 21000, 21100);
    snprintf(cp, sizeof(cp), "%s/ckpt-3", lb);
    assert_int_equal(cdc_state_checkpoint(st2, cp, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_upload(&b, 3, cp, &h3, &s3, &e), CDC_OK);
    assert_true(s3.bytes_uploaded < s1.bytes_uploaded);
    cdc_state_close(st2);

    /* The first worker restores its own checkpoint 2 (the latest complete one in this
     * story) from its local copy: hard links, no download. */
    char dba2[300];
    snprintf(dba2, sizeof(dba2), "%s/db-again", la);
    cdc_state_close(st);
    assert_int_equal(cdc_ckpt_restore(&a, h2, dba2, &reused, &e), CDC_OK);
    assert_true(reused);
    st = open_store(dba2);
    assert_true(has(st, 20999));
    assert_false(has(st, 21000));
    cdc_state_close(st);
    (void)h1;

    /* GC on b after epoch 3 committed: checkpoint 2's manifest and meta files go; the
     * shared table files checkpoint 3 still lists stay. */
    size_t before = cdc_test_count_files(area, NULL, true, NULL);
    cdc_ckpt_gc(&b, 3);
    size_t after = cdc_test_count_files(area, NULL, true, NULL);
    assert_true(after < before);
    char dbc[300];
    snprintf(dbc, sizeof(dbc), "%s/db-c", lb);
    cdc_ckpt_t c;
    char lc[300];
    snprintf(lc, sizeof(lc), "%s/wc", tmp);
    assert_int_equal(cdc_ckpt_init(&c, storage, wh, "job1", 3, lc, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_restore(&c, h3, dbc, &reused, &e), CDC_OK);
    st = open_store(dbc);
    assert_true(has(st, 21099));
    assert_true(has(st, 0));
    cdc_state_close(st);

    cdc_ckpt_free(&a);
    cdc_ckpt_free(&b);
    cdc_ckpt_free(&c);
    cdc_storage_close(storage);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/*
 * Descriptor files go flat into meta/ (no directory per checkpoint); a checkpoint area
 * removed behind the worker's back is created again (directories are only made when a
 * link says they are missing); GC removes the per-checkpoint directories of the
 * earlier layout once their files are gone.
 */
static void test_layout_missing_dirs_legacy(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_storage_t *storage;
    cdc_ckpt_t a, b, r;
    const char *h1, *h2, *h3;
    char wh[300], la[300], lb[300], lr[300], db[300], cp[300], area[400], meta[450], cmd[700];
    bool reused;

    snprintf(wh, sizeof(wh), "%s/warehouse", tmp);
    snprintf(la, sizeof(la), "%s/la", tmp);
    snprintf(lb, sizeof(lb), "%s/lb", tmp);
    snprintf(lr, sizeof(lr), "%s/lr", tmp);
    snprintf(area, sizeof(area), "%s/_checkpoints/job2/p1", wh);
    snprintf(meta, sizeof(meta), "%s/meta", area);
    assert_int_equal(cdc_storage_open(wh, NULL, &storage, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_init(&a, storage, wh, "job2", 1, la, &e), CDC_OK);
    snprintf(db, sizeof(db), "%s/db", la);
    cdc_state_t *st = open_store(db);
    fill(st, 0, 1000);
    snprintf(cp, sizeof(cp), "%s/ckpt-1", la);
    assert_int_equal(cdc_state_checkpoint(st, cp, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_upload(&a, 1, cp, &h1, NULL, &e), CDC_OK);
    assert_true(cdc_test_count_files(meta, NULL, true, NULL) >= 1);
    assert_int_equal(cdc_test_count_dirs(meta), 0);

    /* The whole area disappears; a worker without history uploads everything again. */
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", area);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(cdc_ckpt_init(&b, storage, wh, "job2", 1, lb, &e), CDC_OK);
    fill(st, 1000, 1100);
    snprintf(cp, sizeof(cp), "%s/ckpt-2", lb);
    assert_int_equal(cdc_state_checkpoint(st, cp, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_upload(&b, 2, cp, &h2, NULL, &e), CDC_OK);
    cdc_state_close(st);
    assert_int_equal(cdc_ckpt_init(&r, storage, wh, "job2", 1, lr, &e), CDC_OK);
    snprintf(db, sizeof(db), "%s/db", lr);
    assert_int_equal(cdc_ckpt_restore(&r, h2, db, &reused, &e), CDC_OK);
    assert_false(reused);
    st = open_store(db);
    assert_true(has(st, 1099));
    cdc_state_close(st);
    cdc_ckpt_free(&r);

    /* A checkpoint of the earlier layout (meta/<epoch>-<rand>/<name>), restored, then
     * superseded and collected: its directory goes with its files. */
    char legacy[500], file[600], man[600], json[1400];
    snprintf(legacy, sizeof(legacy), "%s/meta/7-0123abcd", area);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", legacy);
    assert_int_equal(system(cmd), 0);
    snprintf(file, sizeof(file), "%s/NOTES", legacy);
    write_text(file, "legacy");
    snprintf(man, sizeof(man), "%s/m-00000000000000000007-0123abcd.json", area);
    snprintf(json, sizeof(json),
             "{\"format\":1,\"partition\":1,\"epoch\":7,\"lineage\":\"x\",\"files\":"
             "[{\"name\":\"NOTES\",\"location\":\"%s\",\"size\":6}]}",
             file);
    write_text(man, json);
    assert_int_equal(cdc_ckpt_init(&r, storage, wh, "job2", 1, lr, &e), CDC_OK);
    snprintf(db, sizeof(db), "%s/legacy-db", lr);
    assert_int_equal(cdc_ckpt_restore(&r, man, db, &reused, &e), CDC_OK);
    st = open_store(db); /* (a directory with only NOTES: an empty store) */
    fill(st, 0, 10);
    snprintf(cp, sizeof(cp), "%s/ckpt-8", lr);
    assert_int_equal(cdc_state_checkpoint(st, cp, &e), CDC_OK);
    assert_int_equal(cdc_ckpt_upload(&r, 8, cp, &h3, NULL, &e), CDC_OK);
    cdc_state_close(st);
    cdc_ckpt_gc(&r, 8);
    struct stat sb;
    assert_int_not_equal(stat(legacy, &sb), 0);
    assert_int_equal(cdc_test_count_dirs(meta), 0);

    cdc_ckpt_free(&a);
    cdc_ckpt_free(&b);
    cdc_ckpt_free(&r);
    cdc_storage_close(storage);
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp, sizeof(tmp), "%s/test_ckpt.XXXXXX", t);
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_state_destroy(tmp, &e);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_incremental_restore_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_missing_dirs_legacy, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
