/*
 * Unit tests for the capture's table patterns (capture/filter.c): no pattern takes every
 * table; include and exclude lists, anchored to the whole schema.table; exclude wins; a
 * bad pattern is an error naming its option.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "capture/filter.h"

static void test_empty_takes_all(void **state)
{
    cdc_table_filter_t f;
    cdc_error_t e = {0};
    (void)state;
    assert_int_equal(cdc_table_filter_init(&f, NULL, "", &e), CDC_OK);
    assert_false(cdc_table_filter_active(&f));
    assert_true(cdc_table_filter_match(&f, "public", "anything"));
    cdc_table_filter_free(&f);
}

static void test_include_exclude(void **state)
{
    cdc_table_filter_t f;
    cdc_error_t e = {0};
    (void)state;
    assert_int_equal(cdc_table_filter_init(&f, "public\\.orders.*, sales\\..*",
                                           "public\\.orders_tmp,sales\\.audit.*", &e),
                     CDC_OK);
    assert_true(cdc_table_filter_active(&f));
    assert_true(cdc_table_filter_match(&f, "public", "orders"));
    assert_true(cdc_table_filter_match(&f, "public", "orders_2026"));
    assert_true(cdc_table_filter_match(&f, "sales", "items"));
    /* exclude wins over include */
    assert_false(cdc_table_filter_match(&f, "public", "orders_tmp"));
    assert_false(cdc_table_filter_match(&f, "sales", "audit_log"));
    /* anchored: a pattern matches the whole name, not a part of it */
    assert_false(cdc_table_filter_match(&f, "xpublic", "orders"));
    assert_false(cdc_table_filter_match(&f, "public", "customers"));
    assert_false(cdc_table_filter_match(&f, "archive", "sales"));
    cdc_table_filter_free(&f);

    /* exclude alone: everything else */
    assert_int_equal(cdc_table_filter_init(&f, "", "public\\.tmp_.*", &e), CDC_OK);
    assert_true(cdc_table_filter_match(&f, "public", "transactions"));
    assert_false(cdc_table_filter_match(&f, "public", "tmp_x"));
    assert_true(cdc_table_filter_match(&f, "public", "x_tmp_x"));
    cdc_table_filter_free(&f);
}

static void test_bad_pattern(void **state)
{
    cdc_table_filter_t f;
    cdc_error_t e = {0};
    (void)state;
    assert_int_equal(cdc_table_filter_init(&f, "public\\.ok", "public\\.(broken", &e),
                     CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--table-exclude"));
    assert_non_null(strstr(e.msg, "public\\.(broken"));
    assert_false(cdc_table_filter_active(&f));
    memset(&e, 0, sizeof(e));
    assert_int_equal(cdc_table_filter_init(&f, "[a-", NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--table-include"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_takes_all),
        cmocka_unit_test(test_include_exclude),
        cmocka_unit_test(test_bad_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
