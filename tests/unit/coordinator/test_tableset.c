/*
 * Unit tests for coordinator/tableset.c: the set stays sorted and unique, a full set refuses
 * more, the widening adds only what every worker has and never removes, the verdict names the
 * missing and the extra topics, and the etcd JSON round-trips (a bad record is refused).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/tableset.h"

/* A set of the comma-separated topics. */
static void make(cdc_tableset_t *s, const char *list)
{
    char copy[1024], *save = NULL;
    cdc_error_t e;

    cdc_tableset_clear(s);
    snprintf(copy, sizeof(copy), "%s", list);
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
        assert_int_equal(cdc_tableset_add(s, t, &e), CDC_OK);
}

static void test_add_sorted_unique(void **state)
{
    cdc_tableset_t s, t;
    cdc_error_t e;
    (void)state;
    make(&s, "cdc.public.c,cdc.public.a,cdc.public.b,cdc.public.a");
    assert_int_equal(s.n, 3);
    assert_string_equal(cdc_tableset_name(&s, 0), "cdc.public.a");
    assert_string_equal(cdc_tableset_name(&s, 1), "cdc.public.b");
    assert_string_equal(cdc_tableset_name(&s, 2), "cdc.public.c");
    assert_true(cdc_tableset_has(&s, "cdc.public.b"));
    assert_false(cdc_tableset_has(&s, "cdc.public.d"));
    assert_false(cdc_tableset_has(&s, NULL));
    assert_int_equal(cdc_tableset_add(&s, "", &e), CDC_ERR_INVALID);
    make(&t, "cdc.public.b,cdc.public.c,cdc.public.a");
    assert_true(cdc_tableset_equal(&s, &t));
    make(&t, "cdc.public.b,cdc.public.c");
    assert_false(cdc_tableset_equal(&s, &t));
}

static void test_full(void **state)
{
    cdc_tableset_t s;
    char name[64];
    cdc_error_t e;
    (void)state;
    cdc_tableset_clear(&s);
    for (int i = 0; i < CDC_TABLESET_MAX; i++) {
        snprintf(name, sizeof(name), "cdc.public.t%03d", i);
        assert_int_equal(cdc_tableset_add(&s, name, &e), CDC_OK);
    }
    assert_int_equal(cdc_tableset_add(&s, "cdc.public.more", &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "\"cdc.public.more\""));
    assert_int_equal(cdc_tableset_add(&s, "cdc.public.t007", &e), CDC_OK); /* present */
    assert_int_equal(s.n, CDC_TABLESET_MAX);
}

static void test_widen(void **state)
{
    cdc_tableset_t job, w1, w2, w3;
    const cdc_tableset_t *ws[] = {&w1, &w2, &w3};
    char added[256];
    (void)state;
    make(&job, "cdc.public.old");
    make(&w1, "cdc.public.a,cdc.public.b,cdc.public.c");
    make(&w2, "cdc.public.a,cdc.public.c");
    make(&w3, "cdc.public.c,cdc.public.a,cdc.public.d");
    assert_int_equal(cdc_tableset_widen(&job, ws, 3, added, sizeof(added)), 2);
    assert_string_equal(added, "\"cdc.public.a\", \"cdc.public.c\"");
    /* never narrows: old stays although no worker has it */
    assert_int_equal(job.n, 3);
    assert_true(cdc_tableset_has(&job, "cdc.public.old"));
    assert_false(cdc_tableset_has(&job, "cdc.public.b"));
    assert_int_equal(cdc_tableset_widen(&job, ws, 3, added, sizeof(added)), 0);
    assert_string_equal(added, "");
    assert_int_equal(cdc_tableset_widen(&job, ws, 0, NULL, 0), 0);
    /* one worker alone widens by all it has */
    assert_int_equal(cdc_tableset_widen(&job, ws, 1, NULL, 0), 1);
    assert_true(cdc_tableset_has(&job, "cdc.public.b"));
}

static void test_judge(void **state)
{
    cdc_tableset_t job, w;
    char why[512];
    (void)state;
    make(&job, "cdc.public.transactions,cdc.public.accounts,cdc.public.acc_edge");
    make(&w, "cdc.public.accounts,cdc.public.acc_edge,cdc.public.transactions");
    assert_int_equal(cdc_tableset_judge(&job, &w, why, sizeof(why)), CDC_TABLESET_FITS);
    assert_string_equal(why, "");
    make(&w, "cdc.public.transactions,cdc.public.accounts");
    assert_int_equal(cdc_tableset_judge(&job, &w, why, sizeof(why)), CDC_TABLESET_MISSING);
    assert_string_equal(why, "it does not consume \"cdc.public.acc_edge\" of the job's tables");
    /* more than the set fits: the worker consumes the set */
    make(&w, "cdc.public.transactions,cdc.public.accounts,cdc.public.acc_edge,cdc.public.new");
    assert_int_equal(cdc_tableset_judge(&job, &w, why, sizeof(why)), CDC_TABLESET_FITS);
    assert_string_equal(why, "");
    make(&w, "cdc.public.transactions,cdc.public.new");
    assert_int_equal(cdc_tableset_judge(&job, &w, why, sizeof(why)), CDC_TABLESET_MISSING);
    assert_string_equal(why, "it does not consume \"cdc.public.acc_edge\", \"cdc.public.accounts\" "
                             "of the job's tables");
    assert_string_equal(cdc_tableset_verdict_name(CDC_TABLESET_MISSING), "missing_table");
    assert_string_equal(cdc_tableset_verdict_name(CDC_TABLESET_FITS), "");
}

static void test_json(void **state)
{
    cdc_tableset_t s, t;
    cdc_error_t e;
    char *json;
    (void)state;
    make(&s, "cdc.public.b,cdc.public.a");
    json = cdc_tableset_json(&s);
    assert_string_equal(json, "[\"cdc.public.a\",\"cdc.public.b\"]");
    assert_int_equal(cdc_tableset_parse(&t, json, strlen(json), &e), CDC_OK);
    assert_true(cdc_tableset_equal(&s, &t));
    free(json);
    assert_int_equal(cdc_tableset_parse(&t, "[]", 2, &e), CDC_OK);
    assert_int_equal(t.n, 0);
    assert_int_equal(cdc_tableset_parse(&t, "{\"a\":1}", 7, &e), CDC_ERR_CORRUPT);
    assert_int_equal(cdc_tableset_parse(&t, "[1]", 3, &e), CDC_ERR_CORRUPT);
    assert_int_equal(cdc_tableset_parse(&t, "[\"\"]", 4, &e), CDC_ERR_CORRUPT);
    assert_int_equal(t.n, 0);
    assert_int_equal(cdc_tableset_parse(&t, "[", 1, &e), CDC_ERR_CORRUPT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_sorted_unique),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_widen),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
