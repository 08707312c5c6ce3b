/* coordinator/staged_check.h: the committer accepts a staged file only for a table of the
 * job, under that table's own data directory; every trick a forged Ack could try is refused
 * with its reason; the set's index follows the set as it grows, at thousands of tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/staged_check.h"

static cdc_staged_reason_t check(cdc_staged_index_t *x, const cdc_tableset_t *s, const char *wh,
                                 const char *table, const char *path)
{
    char why[600];
    cdc_staged_reason_t r = cdc_staged_check(x, s, wh, table, path, why, sizeof(why));
    if (r != CDC_STAGED_OK) /* the sentence names the file or the table */
        assert_true(strstr(why, path) != NULL || (table != NULL && strstr(why, table) != NULL));
    return r;
}

static void set_of(cdc_tableset_t *s, const char *const *topics, int n)
{
    cdc_error_t e;
    for (int i = 0; i < n; i++)
        assert_int_equal(cdc_tableset_add(s, topics[i], &e), CDC_OK);
}

static void test_allowed(void **state)
{
    const char *topics[] = {"cdc.public.orders", "cdc.sales.items"};
    cdc_tableset_t s = {0};
    cdc_staged_index_t x = {0};
    (void)state;

    set_of(&s, topics, 2);
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w/public/orders/data/a.parquet"),
                     CDC_STAGED_OK);
    assert_int_equal(check(&x, &s, "/w/", "public.orders_changelog",
                           "/w/public/orders_changelog/data/day=2026-12-06/a.parquet"),
                     CDC_STAGED_OK);
    assert_int_equal(check(&x, &s, "s3://bucket/wh", "sales.items",
                           "s3://bucket/wh/sales/items/data/x-1.parquet"),
                     CDC_STAGED_OK);
    cdc_staged_index_clear(&x);
    cdc_tableset_clear(&s);
}

static void test_forged_paths(void **state)
{
    const char *topics[] = {"cdc.public.orders", "cdc.public.items"};
    cdc_tableset_t s = {0};
    cdc_staged_index_t x = {0};
    (void)state;

    set_of(&s, topics, 2);
    /* outside the table, the warehouse, or the data directory */
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/etc/passwd"), CDC_STAGED_PATH);
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w/public/orders/metadata/v1.json"),
                     CDC_STAGED_PATH);
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w/public/orders/data/"),
                     CDC_STAGED_PATH);
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w2/public/orders/data/a.parquet"),
                     CDC_STAGED_PATH);
    /* ../ and friends */
    assert_int_equal(
        check(&x, &s, "/w", "public.orders", "/w/public/orders/data/../../items/data/a.parquet"),
        CDC_STAGED_PATH);
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w/public/orders/data/./a.parquet"),
                     CDC_STAGED_PATH);
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w/public/orders/data//a.parquet"),
                     CDC_STAGED_PATH);
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w/public/orders/data/a\\..\\b"),
                     CDC_STAGED_PATH);
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w/public/orders/data/a\nb"),
                     CDC_STAGED_PATH);
    /* another table's path */
    assert_int_equal(check(&x, &s, "/w", "public.orders", "/w/public/items/data/a.parquet"),
                     CDC_STAGED_PATH);
    assert_int_equal(
        check(&x, &s, "/w", "public.orders", "/w/public/orders_changelog/data/a.parquet"),
        CDC_STAGED_PATH);
    /* another bucket or scheme */
    assert_int_equal(check(&x, &s, "s3://bucket/wh", "public.orders",
                           "s3://other/wh/public/orders/data/a.parquet"),
                     CDC_STAGED_PATH);
    assert_int_equal(
        check(&x, &s, "s3://bucket/wh", "public.orders", "file:///wh/public/orders/data/a.parquet"),
        CDC_STAGED_PATH);
    assert_int_equal(check(&x, &s, "s3://bucket/wh", "public.orders",
                           "s3://bucket/wh-other/public/orders/data/a.parquet"),
                     CDC_STAGED_PATH);
    cdc_staged_index_clear(&x);
    cdc_tableset_clear(&s);
}

static void test_forged_tables(void **state)
{
    const char *topics[] = {"cdc.public.orders"};
    cdc_tableset_t s = {0};
    cdc_staged_index_t x = {0};
    (void)state;

    set_of(&s, topics, 1);
    assert_int_equal(check(&x, &s, "/w", "public.secrets", "/w/public/secrets/data/a.parquet"),
                     CDC_STAGED_TABLE_UNKNOWN);
    assert_int_equal(
        check(&x, &s, "/w", "public.orders_history", "/w/public/orders_history/data/a.parquet"),
        CDC_STAGED_TABLE_UNKNOWN);
    assert_int_equal(check(&x, &s, "/w", "orders", "/w/orders/data/a.parquet"),
                     CDC_STAGED_TABLE_NAME);
    assert_int_equal(check(&x, &s, "/w", "...", "/w/./data/a.parquet"), CDC_STAGED_TABLE_NAME);
    assert_int_equal(check(&x, &s, "/w", "public.a/../../orders", "/w/public/orders/data/a"),
                     CDC_STAGED_TABLE_NAME);
    assert_int_equal(check(&x, &s, "/w", "...orders", "/w/public/orders/data/a"),
                     CDC_STAGED_TABLE_NAME);
    assert_int_equal(check(&x, &s, "/w", NULL, "/w/public/orders/data/a"), CDC_STAGED_TABLE_NAME);
    assert_string_equal(cdc_staged_reason_name(CDC_STAGED_PATH), "path");
    assert_string_equal(cdc_staged_reason_name(CDC_STAGED_SIZE), "size");
    cdc_staged_index_clear(&x);
    cdc_tableset_clear(&s);
}

/* The index follows a growing set (thousands of tables), and is rebuilt after a clear. */
static void test_growing_set(void **state)
{
    cdc_tableset_t s = {0};
    cdc_staged_index_t x = {0};
    cdc_error_t e;
    char topic[64], table[64], path[128];
    (void)state;

    for (int i = 0; i < 3000; i++) {
        snprintf(topic, sizeof(topic), "cdc.s%d.t%d", i % 7, i);
        snprintf(table, sizeof(table), "s%d.t%d", i % 7, i);
        snprintf(path, sizeof(path), "/w/s%d/t%d/data/f.parquet", i % 7, i);
        assert_int_equal(check(&x, &s, "/w", table, path), CDC_STAGED_TABLE_UNKNOWN);
        assert_int_equal(cdc_tableset_add(&s, topic, &e), CDC_OK);
        assert_int_equal(check(&x, &s, "/w", table, path), CDC_STAGED_OK);
    }
    for (int i = 0; i < 3000; i += 97) {
        snprintf(table, sizeof(table), "s%d.t%d_changelog", i % 7, i);
        snprintf(path, sizeof(path), "/w/s%d/t%d_changelog/data/f.parquet", i % 7, i);
        assert_int_equal(check(&x, &s, "/w", table, path), CDC_STAGED_OK);
    }
    /* a new term's set: the index is cleared with it */
    cdc_tableset_clear(&s);
    cdc_staged_index_clear(&x);
    assert_int_equal(check(&x, &s, "/w", "s0.t0", "/w/s0/t0/data/f.parquet"),
                     CDC_STAGED_TABLE_UNKNOWN);
    cdc_staged_index_clear(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed),
        cmocka_unit_test(test_forged_paths),
        cmocka_unit_test(test_forged_tables),
        cmocka_unit_test(test_growing_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
