/* Unit tests for common/metrics.c: exact Prometheus text output, escaping, histograms,
 * lookups and misuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/metrics.h"

static void test_counter_gauge_text(void **state)
{
    (void)state;
    cdc_metrics_t *reg = cdc_metrics_new();
    cdc_counter_t *c = cdc_metrics_counter(reg, "cdc_events_total", "Events seen.",
                                           (const char *[]){"table", "orders", NULL});
    cdc_counter_t *c2 = cdc_metrics_counter(reg, "cdc_events_total", "ignored",
                                            (const char *[]){"table", "a\"b\\c\nd", NULL});
    cdc_gauge_t *g = cdc_metrics_gauge(reg, "cdc_lag", "Lag with \\ and\nnewline.", NULL);
    assert_non_null(c);
    assert_non_null(c2);
    assert_non_null(g);
    assert_ptr_equal(c, cdc_metrics_counter(reg, "cdc_events_total", "x",
                                            (const char *[]){"table", "orders", NULL}));
    cdc_metrics_counter_inc(c);
    cdc_metrics_counter_add(c, 2.5);
    cdc_metrics_counter_add(c, -1); /* ignored */
    cdc_metrics_counter_add(c2, 7);
    cdc_metrics_gauge_set(g, 10);
    cdc_metrics_gauge_add(g, -12.25);
    assert_true(cdc_metrics_value(c) == 3.5);

    size_t len = 0;
    char *text = cdc_metrics_render(reg, &len);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    assert_string_equal(text, "# HELP cdc_events_total Events seen.\n"
                              "# TYPE cdc_events_total counter\n"
                              "cdc_events_total{table=\"orders\"} 3.5\n"
                              "cdc_events_total{table=\"a\\\"b\\\\c\\nd\"} 7\n"
                              "# HELP cdc_lag Lag with \\\\ and\\nnewline.\n"
                              "# TYPE cdc_lag gauge\n"
                              "cdc_lag -2.25\n");
    free(text);
    cdc_metrics_free(reg);
}

static void test_histogram_text(void **state)
{
    (void)state;
    cdc_metrics_t *reg = cdc_metrics_new();
    const double b[] = {0.1, 0.5, 1};
    cdc_histogram_t *h = cdc_metrics_histogram(reg, "cdc_commit_seconds", "Commit latency.", b, 3,
                                               (const char *[]){"job", "j1", "kind", "x", NULL});
    assert_non_null(h);
    cdc_metrics_histogram_observe(h, 0.05);
    cdc_metrics_histogram_observe(h, 0.1); /* le is inclusive */
    cdc_metrics_histogram_observe(h, 0.7);
    cdc_metrics_histogram_observe(h, 3);
    char *text = cdc_metrics_render(reg, NULL);
    assert_non_null(text);
    assert_string_equal(text, "# HELP cdc_commit_seconds Commit latency.\n"
                              "# TYPE cdc_commit_seconds histogram\n"
                              "cdc_commit_seconds_bucket{job=\"j1\",kind=\"x\",le=\"0.1\"} 2\n"
                              "cdc_commit_seconds_bucket{job=\"j1\",kind=\"x\",le=\"0.5\"} 2\n"
                              "cdc_commit_seconds_bucket{job=\"j1\",kind=\"x\",le=\"1\"} 3\n"
                              "cdc_commit_seconds_bucket{job=\"j1\",kind=\"x\",le=\"+Inf\"} 4\n"
                              "cdc_commit_seconds_sum{job=\"j1\",kind=\"x\"} 3.85\n"
                              "cdc_commit_seconds_count{job=\"j1\",kind=\"x\"} 4\n");
    free(text);

    /* no labels: le is the only label */
    cdc_metrics_t *reg2 = cdc_metrics_new();
    cdc_histogram_t *h2 = cdc_metrics_histogram(reg2, "h", "", b, 1, NULL);
    cdc_metrics_histogram_observe(h2, 2);
    text = cdc_metrics_render(reg2, NULL);
    assert_string_equal(text, "# HELP h \n# TYPE h histogram\nh_bucket{le=\"0.1\"} 0\n"
                              "h_bucket{le=\"+Inf\"} 1\nh_sum 2\nh_count 1\n");
    free(text);
    cdc_metrics_free(reg2);
    cdc_metrics_free(reg);
}

static void test_misuse(void **state)
{
    (void)state;
    cdc_metrics_t *reg = cdc_metrics_new();
    const double bad[] = {1, 0.5};
    assert_non_null(cdc_metrics_counter(reg, "x_total", "", NULL));
    assert_null(cdc_metrics_gauge(reg, "x_total", "", NULL)); /* type clash */
    assert_null(cdc_metrics_counter(reg, "1bad", "", NULL));  /* name */
    assert_null(cdc_metrics_counter(reg, "ok", "", (const char *[]){"bad-label", "v", NULL}));
    assert_null(cdc_metrics_histogram(reg, "h", "", bad, 2, NULL)); /* not increasing */
    assert_null(cdc_metrics_histogram(reg, "h2", "", NULL, 0,
                                      (const char *[]){"le", "1", NULL})); /* reserved */
    /* NULL series are no-ops */
    cdc_metrics_counter_inc(NULL);
    cdc_metrics_gauge_set(NULL, 1);
    cdc_metrics_histogram_observe(NULL, 1);
    assert_true(cdc_metrics_value(NULL) == 0);
    /* empty registry renders to "" */
    cdc_metrics_t *empty = cdc_metrics_new();
    char *text = cdc_metrics_render(empty, NULL);
    assert_string_equal(text, "");
    free(text);
    cdc_metrics_free(empty);
    cdc_metrics_free(reg);
    assert_ptr_equal(cdc_metrics_default(), cdc_metrics_default());
}

static void test_special_values(void **state)
{
    (void)state;
    cdc_metrics_t *reg = cdc_metrics_new();
    cdc_gauge_t *g = cdc_metrics_gauge(reg, "g", "h", NULL);
    cdc_metrics_gauge_set(g, 0.1);
    char *text = cdc_metrics_render(reg, NULL);
    assert_string_equal(text, "# HELP g h\n# TYPE g gauge\ng 0.1\n");
    free(text);
    cdc_metrics_gauge_set(g, 1.0 / 0.0);
    text = cdc_metrics_render(reg, NULL);
    assert_string_equal(text, "# HELP g h\n# TYPE g gauge\ng +Inf\n");
    free(text);
    cdc_metrics_gauge_set(g, 1234567);
    text = cdc_metrics_render(reg, NULL);
    assert_string_equal(text, "# HELP g h\n# TYPE g gauge\ng 1234567\n");
    free(text);
    cdc_metrics_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_gauge_text),
        cmocka_unit_test(test_histogram_text),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_special_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
