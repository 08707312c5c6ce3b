/*
 * Unit tests for coordinator/tableset.c: the set stays sorted and unique, it holds thousands
 * of topics (no fixed cap), the widening adds only what every worker has and never removes,
 * the verdict names the missing topics (a long list summed up), copies own their names, and
 * the etcd JSON round-trips (a bad record is refused).
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
    cdc_tableset_t s = {0}, t = {0};
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
    /* a copy owns its names; a move leaves its source empty */
    assert_int_equal(cdc_tableset_copy(&t, &s, &e), CDC_OK);
    cdc_tableset_clear(&s);
    assert_int_equal(t.n, 3);
    assert_string_equal(cdc_tableset_name(&t, 2), "cdc.public.c");
    cdc_tableset_move(&s, &t);
    assert_int_equal(t.n, 0);
    assert_null(t.names);
    assert_true(cdc_tableset_has(&s, "cdc.public.a"));
    cdc_tableset_clear(&s);
    cdc_tableset_clear(&t);
}

#define MANY 5000

/* The name of topic i of MANY, zero-padded so that names sort as their numbers. */
static void many_name(char *buf, size_t size, int i)
{
    snprintf(buf, size, "cdc.public.t%05d", i);
}

/* Thousands of topics: no cap, sorted, each found, the JSON round-trips; added in an
 * order that is neither sorted nor reversed. */
static void test_thousands(void **state)
{
    cdc_tableset_t s = {0}, t = {0};
    char name[64], *json;
    cdc_error_t e;
    (void)state;
    for (int k = 0; k < MANY; k++) {
        many_name(name, sizeof(name), (k * 7919) % MANY); /* 7919 is prime: a permutation */
        assert_int_equal(cdc_tableset_add(&s, name, &e), CDC_OK);
    }
    assert_int_equal(s.n, MANY);
    assert_int_equal(cdc_tableset_add(&s, "cdc.public.t00007", &e), CDC_OK); /* present */
    assert_int_equal(s.n, MANY);
    for (int i = 0; i < MANY; i++) {
        many_name(name, sizeof(name), i);
        assert_string_equal(cdc_tableset_name(&s, i), name);
        assert_true(cdc_tableset_has(&s, name));
        assert_int_equal(cdc_tableset_index(&s, name), i);
    }
    assert_int_equal(cdc_tableset_index(&s, "cdc.public.t05000"), -1);
    assert_int_equal(cdc_tableset_index(&s, NULL), -1);
    assert_false(cdc_tableset_has(&s, "cdc.public.t05000"));
    assert_false(cdc_tableset_has(&s, "cdc.public.t"));
    json = cdc_tableset_json(&s);
    assert_non_null(json);
    assert_int_equal(cdc_tableset_parse(&t, json, strlen(json), &e), CDC_OK);
    free(json);
    assert_int_equal(t.n, MANY);
    assert_true(cdc_tableset_equal(&s, &t));
    cdc_tableset_clear(&s);
    cdc_tableset_clear(&t);
}

/* Widening by thousands: three workers offer 5,000 topics each, all but a few in common;
 * the job gains exactly the common ones, and the message sums them up. */
static void test_widen_thousands(void **state)
{
    cdc_tableset_t job = {0}, w[3] = {{0}};
    const cdc_tableset_t *ws[] = {&w[0], &w[1], &w[2]};
    char name[64], added[256];
    cdc_error_t e;
    (void)state;
    for (int i = 0; i < MANY; i++) {
        many_name(name, sizeof(name), i);
        if (i % 2 == 0) /* the job has the even ones already */
            assert_int_equal(cdc_tableset_add(&job, name, &e), CDC_OK);
        for (int k = 0; k < 3; k++)
            if (i != 10 + k) /* worker k lacks topic 10 + k */
                assert_int_equal(cdc_tableset_add(&w[k], name, &e), CDC_OK);
    }
    /* odd topics but 11: 2,499 added */
    assert_int_equal(cdc_tableset_widen(&job, ws, 3, added, sizeof(added)), MANY / 2 - 1);
    assert_int_equal(job.n, MANY - 1);
    assert_false(cdc_tableset_has(&job, "cdc.public.t00011"));
    assert_true(cdc_tableset_has(&job, "cdc.public.t00010")); /* the job had it */
    assert_true(cdc_tableset_has(&job, "cdc.public.t04999"));
    for (int i = 1; i < job.n; i++)
        assert_true(strcmp(cdc_tableset_name(&job, i - 1), cdc_tableset_name(&job, i)) < 0);
    assert_string_equal(added, "\"cdc.public.t00001\", \"cdc.public.t00003\", "
                               "\"cdc.public.t00005\", \"cdc.public.t00007\", "
                               "\"cdc.public.t00009\", \"cdc.public.t00013\", "
                               "\"cdc.public.t00015\", \"cdc.public.t00017\" and 2,491 more");
    assert_int_equal(cdc_tableset_widen(&job, ws, 3, added, sizeof(added)), 0);
    assert_string_equal(added, "");
    cdc_tableset_clear(&job);
    for (int k = 0; k < 3; k++)
        cdc_tableset_clear(&w[k]);
}

/* A list that does not fit lists what fits, whole names only, and counts the rest. */
static void test_list(void **state)
{
    const char *names[] = {"cdc.public.a", "cdc.public.b", "cdc.public.c"};
    char buf[64];
    (void)state;
    cdc_tableset_list(names, 3, buf, sizeof(buf));
    assert_string_equal(buf, "\"cdc.public.a\", \"cdc.public.b\", \"cdc.public.c\"");
    cdc_tableset_list(names, 3, buf, 50);
    assert_string_equal(buf, "\"cdc.public.a\" and 2 more");
    cdc_tableset_list(names, 3, buf, 12);
    assert_string_equal(buf, "3 topics");
    cdc_tableset_list(names, 0, buf, sizeof(buf));
    assert_string_equal(buf, "");
}

static void test_widen(void **state)
{
    cdc_tableset_t job = {0}, w1 = {0}, w2 = {0}, w3 = {0};
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
    cdc_tableset_clear(&job);
    cdc_tableset_clear(&w1);
    cdc_tableset_clear(&w2);
    cdc_tableset_clear(&w3);
}

static void test_judge(void **state)
{
    cdc_tableset_t job = {0}, w = {0};
    char why[512], name[64];
    cdc_error_t e;
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
    /* thousands missing: the reason names the first and counts the rest */
    cdc_tableset_clear(&job);
    cdc_tableset_clear(&w);
    for (int i = 0; i < MANY; i++) {
        many_name(name, sizeof(name), i);
        assert_int_equal(cdc_tableset_add(&job, name, &e), CDC_OK);
    }
    assert_int_equal(cdc_tableset_judge(&job, &w, why, 200), CDC_TABLESET_MISSING);
    assert_true(strlen(why) < 200);
    assert_non_null(strstr(why, "it does not consume \"cdc.public.t00000\", "));
    assert_non_null(strstr(why, " more of the job's tables"));
    assert_non_null(strstr(why, "4,99"));
    cdc_tableset_clear(&job);
    cdc_tableset_clear(&w);
}

static void test_json(void **state)
{
    cdc_tableset_t s = {0}, t = {0};
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
    cdc_tableset_clear(&s);
    cdc_tableset_clear(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_sorted_unique),
        cmocka_unit_test(test_thousands),
        cmocka_unit_test(test_widen_thousands),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_widen),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
