/* Unit tests for coordinator/history.c: the dashboard's rings and freshness estimate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "coordinator/history.h"

static json_t *history_json(cdc_history_t *h, int64_t since)
{
    char *text = cdc_history_json(h, since, 1000);
    json_t *o;
    assert_non_null(text);
    o = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(o);
    return o;
}

static void sample(cdc_history_t *h, int64_t at, int64_t lag0)
{
    cdc_history_sample_t s;
    memset(&s, 0, sizeof(s));
    s.at_ms = at;
    for (int p = 0; p < CDC_PARTITIONS; p++)
        s.lag[p] = p == 1 ? -1 : lag0 + p;
    s.workers_alive = 3;
    s.state = 3;
    cdc_history_sample(h, &s);
}

/* Past its capacity the ring keeps the newest samples, oldest first; `since` reads only
 * what came after it; unknown lags are null. */
static void test_ring_wraps(void **state)
{
    cdc_history_t *h = cdc_history_new();
    json_t *o, *t;
    (void)state;
    assert_non_null(h);
    for (int64_t i = 1; i <= CDC_HISTORY_SAMPLES + 100; i++)
        sample(h, i * 1000, i);
    o = history_json(h, 0);
    t = json_object_get(json_object_get(o, "samples"), "t");
    assert_int_equal(json_array_size(t), CDC_HISTORY_SAMPLES);
    assert_int_equal(json_integer_value(json_array_get(t, 0)), 101 * 1000);
    for (size_t i = 1; i < json_array_size(t); i++)
        assert_true(json_integer_value(json_array_get(t, i)) >
                    json_integer_value(json_array_get(t, i - 1)));
    assert_int_equal(json_integer_value(json_object_get(o, "now_ms")),
                     (CDC_HISTORY_SAMPLES + 100) * 1000);
    json_t *last = json_array_get(json_object_get(json_object_get(o, "samples"), "lag"),
                                  CDC_HISTORY_SAMPLES - 1);
    assert_int_equal(json_array_size(last), CDC_PARTITIONS);
    assert_int_equal(json_integer_value(json_array_get(last, 0)), CDC_HISTORY_SAMPLES + 100);
    assert_true(json_is_null(json_array_get(last, 1)));
    json_decref(o);

    o = history_json(h, (CDC_HISTORY_SAMPLES + 97) * 1000);
    t = json_object_get(json_object_get(o, "samples"), "t");
    assert_int_equal(json_array_size(t), 3);
    json_decref(o);
    o = history_json(h, (CDC_HISTORY_SAMPLES + 100) * 1000);
    assert_int_equal(json_array_size(json_object_get(json_object_get(o, "samples"), "t")), 0);
    json_decref(o);

    cdc_history_clear(h);
    o = history_json(h, 0);
    assert_int_equal(json_array_size(json_object_get(json_object_get(o, "samples"), "t")), 0);
    json_decref(o);
    cdc_history_free(h);
}

/* Epochs keep their order and fields, and wrap like samples. */
static void test_epochs(void **state)
{
    cdc_history_t *h = cdc_history_new();
    json_t *o, *a;
    (void)state;
    for (uint64_t e = 1; e <= CDC_HISTORY_EPOCHS + 5; e++) {
        cdc_history_epoch_t ep = {.epoch = e,
                                  .at_ms = (int64_t)e * 1000,
                                  .duration_ms = 80,
                                  .commit_ms = 20,
                                  .records = (int64_t)e,
                                  .bytes = 1000,
                                  .files = 2};
        cdc_history_epoch(h, &ep);
    }
    o = history_json(h, 0);
    a = json_object_get(o, "epochs");
    assert_int_equal(json_array_size(a), CDC_HISTORY_EPOCHS);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 0), "epoch")), 6);
    json_t *last = json_array_get(a, CDC_HISTORY_EPOCHS - 1);
    assert_int_equal(json_integer_value(json_object_get(last, "records")), CDC_HISTORY_EPOCHS + 5);
    assert_int_equal(json_integer_value(json_object_get(last, "duration_ms")), 80);
    assert_int_equal(json_integer_value(json_object_get(last, "commit_ms")), 20);
    json_decref(o);
    cdc_history_free(h);
}

/* Quantiles of points, of one even span, of spans of different weights. */
static void test_quantile(void **state)
{
    (void)state;
    assert_int_equal(cdc_history_quantile(NULL, 0, 0.5), -1);
    cdc_history_span_t pts[] = {
        {0, 100, 100, 1}, {0, 200, 200, 1}, {0, 300, 300, 1}, {0, 400, 400, 1}};
    assert_int_equal(cdc_history_quantile(pts, 4, 0.5), 200);
    assert_int_equal(cdc_history_quantile(pts, 4, 0.99), 400);
    cdc_history_span_t even[] = {{0, 1000, 1999, 10}};
    int64_t p50 = cdc_history_quantile(even, 1, 0.5), p99 = cdc_history_quantile(even, 1, 0.99);
    assert_true(p50 >= 1498 && p50 <= 1501);
    assert_true(p99 >= 1988 && p99 <= 1991);
    /* 99 changes about 100 ms old, one 10 s old: p50 stays low, p99 at the edge */
    cdc_history_span_t mixed[] = {{0, 90, 110, 99}, {0, 10000, 10000, 1}, {0, 5, 5, 0}};
    assert_in_range(cdc_history_quantile(mixed, 3, 0.5), 90, 110);
    assert_in_range(cdc_history_quantile(mixed, 3, 0.99), 90, 110);
    assert_int_equal(cdc_history_quantile(mixed, 3, 0.999), 10000);
}

/* A table's commits give its rows, its throughput over the rate window and its freshness
 * over the freshness window; changes without source times count but give no freshness. */
static void test_tables(void **state)
{
    cdc_history_t *h = cdc_history_new();
    cdc_history_table_t *t = NULL;
    json_t *o, *series;
    (void)state;
    /* 100 changes a second, each epoch's changes 300..1300 ms old when visible */
    for (int64_t s = 1; s <= 30; s++) {
        int64_t at = 1000000 + s * 1000;
        cdc_history_table_commit(h, "public.orders", at, 100, at - 1300, at - 300, 500 + s);
        cdc_history_table_commit(h, "public.items", at, 0, 0, 0, 7);
        sample(h, at, 0);
    }
    assert_int_equal(cdc_history_tables(h, &t), 2);
    assert_string_equal(t[0].table, "public.orders");
    assert_int_equal(t[0].changes, 3000);
    assert_int_equal(t[0].rows, 530);
    assert_true(t[0].changes_per_s > 99 && t[0].changes_per_s < 101);
    assert_in_range(t[0].fresh_p50_ms, 790, 810);
    assert_in_range(t[0].fresh_p99_ms, 1280, 1300);
    assert_int_equal(t[0].fresh_max_ms, 1300);
    assert_string_equal(t[1].table, "public.items");
    assert_int_equal(t[1].rows, 7);
    assert_int_equal(t[1].fresh_p50_ms, -1);
    assert_true(t[1].changes_per_s == 0);

    o = history_json(h, 0);
    series = json_array_get(json_object_get(o, "tables"), 0);
    assert_string_equal(json_string_value(json_object_get(series, "table")), "public.orders");
    assert_int_equal(json_array_size(json_object_get(series, "t")), 30);
    assert_int_equal(json_array_size(json_object_get(series, "fresh_p99_ms")), 30);
    assert_true(json_is_null(json_array_get(
        json_object_get(json_array_get(json_object_get(o, "tables"), 1), "fresh_p50_ms"), 0)));
    json_decref(o);

    /* commits older than the freshness window no longer count */
    sample(h, 1000000 + 30 * 1000 + CDC_HISTORY_FRESH_WINDOW_MS + 1, 0);
    free(t);
    assert_int_equal(cdc_history_tables(h, &t), 2);
    assert_int_equal(t[0].fresh_p50_ms, -1);
    assert_true(t[0].changes_per_s == 0);
    free(t);
    cdc_history_free(h);
}

/* Every table gets a series, past 2,000 tables, and the rings shrink to the budgets: the
 * newest points and spans are kept, and a table's numbers stay right. */
static void test_many_tables(void **state)
{
    enum { N = 2500 };
    cdc_history_t *h = cdc_history_new();
    cdc_history_table_t *t = NULL;
    char name[32];
    (void)state;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "public.t%d", i);
        cdc_history_table_commit(h, name, 1000, i + 1, 900, 900, i);
    }
    for (int64_t k = 0; k < 300; k++) { /* more samples than a shrunk ring holds */
        int64_t at = 2000 + k * 1000;
        cdc_history_table_commit(h, "public.t7", at, 2, at - 100, at - 50, -1);
        sample(h, at, 0);
    }
    assert_int_equal(cdc_history_tables(h, &t), N);
    assert_non_null(t);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "public.t%d", i);
        assert_string_equal(t[i].table, name);
        assert_int_equal(t[i].rows, i);
        assert_int_equal(t[i].changes, i == 7 ? 8 + 600 : i + 1);
    }
    /* t7 committed 2 changes a second, 50-100 ms fresh: the window's spans are the newest */
    assert_true(t[7].changes_per_s > 1.9 && t[7].changes_per_s < 2.1);
    assert_true(t[7].fresh_p99_ms >= 50 && t[7].fresh_p99_ms <= 100);
    assert_int_equal(t[8].fresh_p99_ms, -1); /* its one commit is out of the window */
    free(t);
    cdc_history_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_wraps),  cmocka_unit_test(test_epochs),
        cmocka_unit_test(test_quantile),    cmocka_unit_test(test_tables),
        cmocka_unit_test(test_many_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
