/* Unit tests for common/err.c: codes, names, retriable defaults, message helpers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"

static void test_every_code_has_text(void **state)
{
    (void)state;
    for (int c = 0; c < CDC_ERR__COUNT; c++) {
        assert_non_null(cdc_err_str((cdc_err_t)c));
        assert_string_not_equal(cdc_err_str((cdc_err_t)c), "unknown error");
        assert_true(strncmp(cdc_err_name((cdc_err_t)c), "CDC_", 4) == 0);
    }
    assert_string_equal(cdc_err_str((cdc_err_t)9999), "unknown error");
    assert_string_equal(cdc_err_str((cdc_err_t)-1), "unknown error");
    assert_string_equal(cdc_err_name(CDC_ERR_TIMEOUT), "CDC_ERR_TIMEOUT");
}

static void test_retriable_defaults(void **state)
{
    (void)state;
    assert_true(cdc_err_default_retriable(CDC_ERR_TIMEOUT));
    assert_true(cdc_err_default_retriable(CDC_ERR_UNAVAILABLE));
    assert_false(cdc_err_default_retriable(CDC_ERR_CONFIG));
    assert_false(cdc_err_default_retriable(CDC_ERR_FENCED));
    assert_false(cdc_err_default_retriable(CDC_OK));
}

static void test_set_and_prefix(void **state)
{
    cdc_error_t e;
    (void)state;
    cdc_error_clear(&e);
    assert_int_equal(e.code, CDC_OK);
    assert_int_equal(cdc_error_set(&e, CDC_ERR_UNAVAILABLE, "could not reach \"%s\"", "etcd"),
                     CDC_ERR_UNAVAILABLE);
    assert_true(e.retriable);
    assert_string_equal(e.msg, "could not reach \"etcd\"");
    cdc_error_prefix(&e, "checkpoint %d", 7);
    assert_string_equal(e.msg, "checkpoint 7: could not reach \"etcd\"");
    cdc_error_set_retriable(&e, CDC_ERR_IO, true, "disk");
    assert_true(e.retriable);
    assert_int_equal(cdc_error_set(NULL, CDC_ERR_IO, "x"), CDC_ERR_IO);
}

/* A full file system named in the message marks the error (docs/operations.md, "Disk
 * faults"); a prefix keeps the mark even when it pushes the cause out of the buffer. */
static void test_disk_full(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_error_set(&e, CDC_ERR_IO, "could not write \"%s\": %s", "/w/x", strerror(ENOSPC));
    assert_true(e.disk_full);
    for (int i = 0; i < 8; i++)
        cdc_error_prefix(&e, "%0100d", i);
    assert_null(strstr(e.msg, strerror(ENOSPC)));
    assert_true(e.disk_full);
    cdc_error_set(&e, CDC_ERR_STATE, "IO error: %s: While appending", strerror(EDQUOT));
    assert_true(e.disk_full);
    cdc_error_set(&e, CDC_ERR_IO, "could not write: %s", strerror(EIO));
    assert_false(e.disk_full);
    cdc_error_set(&e, CDC_ERR_IO, "%s", strerror(ENOSPC));
    cdc_error_clear(&e);
    assert_false(e.disk_full);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_has_text),
        cmocka_unit_test(test_retriable_defaults),
        cmocka_unit_test(test_set_and_prefix),
        cmocka_unit_test(test_disk_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
