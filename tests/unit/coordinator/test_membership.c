/* Unit tests for coordinator/membership.c: register, replace, heartbeats, expiry, the
 * topics a worker reports and a follower's offer, hundreds of workers (no fixed cap), and
 * the members' topics freed when they are forgotten (run it under ASan too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/membership.h"

static void test_register_and_replace(void **state)
{
    cdc_members_t ms;
    uint32_t old;
    const char *ids[8], *too_long = "w-0123456789012345678901234567890123456789012345678901234"
                                    "567890123456789";
    (void)state;
    cdc_members_init(&ms);
    assert_int_equal(cdc_members_register(&ms, "w0", 1, 10, "", 0, &old), CDC_REGISTER_NEW);
    assert_int_equal(cdc_members_register(&ms, "w1", 1, 11, "", 0, &old), CDC_REGISTER_NEW);
    assert_int_equal(cdc_members_register(&ms, "w0", 1, 10, "", 5, &old), CDC_REGISTER_SAME);
    /* restart of w0 on a new pipe before the old pipe's removal arrived */
    assert_int_equal(cdc_members_register(&ms, "w0", 2, 12, "", 6, &old), CDC_REGISTER_REPLACED);
    assert_int_equal(old, 10);
    assert_null(cdc_members_by_pipe(&ms, 10));
    assert_string_equal(cdc_members_by_pipe(&ms, 12)->id, "w0");
    assert_int_equal(cdc_members_alive_ids(&ms, ids, 8), 2);
    assert_int_equal(cdc_members_register(&ms, "", 1, 13, "", 0, &old), CDC_REGISTER_INVALID);
    assert_true(strlen(too_long) >= CDC_WORKER_ID_MAX);
    assert_int_equal(cdc_members_register(&ms, too_long, 1, 13, "", 0, &old), CDC_REGISTER_INVALID);
    /* a second id on the same pipe drops the first */
    assert_int_equal(cdc_members_register(&ms, "w9", 1, 11, "", 7, &old), CDC_REGISTER_NEW);
    assert_false(cdc_members_is_alive(&ms, "w1"));
    cdc_members_free(&ms);
}

/* Far more workers than the old fixed table of 64 held: every one registers, each with its
 * topics, is found by id and by pipe; losing and forgetting half of them compacts the table
 * without sharing a set between two members (ASan sees a double free or a leak). */
static void test_many_workers(void **state)
{
    enum { N = 500 };
    cdc_members_t ms;
    char id[32], topic[64];
    const char *topics[2];
    cdc_error_t e;
    (void)state;
    cdc_members_init(&ms);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "w%03d", i);
        snprintf(topic, sizeof(topic), "cdc.public.only_w%03d", i);
        topics[0] = "cdc.public.common";
        topics[1] = topic;
        assert_int_equal(cdc_members_register(&ms, id, 1, (uint32_t)(100 + i), "", 0, NULL),
                         CDC_REGISTER_NEW);
        assert_int_equal(cdc_members_note_topics(cdc_members_by_id(&ms, id), topics, 2, false, &e),
                         CDC_OK);
    }
    assert_int_equal(ms.n, N);
    assert_int_equal(cdc_members_alive_count(&ms), N);
    assert_string_equal(cdc_members_by_pipe(&ms, 100 + 321)->id, "w321");
    assert_true(cdc_tableset_has(&cdc_members_by_id(&ms, "w499")->topics, "cdc.public.only_w499"));
    for (int i = 0; i < N; i += 2)
        cdc_members_lose(cdc_members_by_pipe(&ms, (uint32_t)(100 + i)), 1000, "test");
    assert_int_equal(cdc_members_alive_count(&ms), N / 2);
    cdc_members_forget(&ms, 10000, 5000);
    assert_int_equal(ms.n, N / 2);
    for (int i = 0; i < N; i++) {
        const cdc_member_t *m;
        snprintf(id, sizeof(id), "w%03d", i);
        snprintf(topic, sizeof(topic), "cdc.public.only_w%03d", i);
        m = cdc_members_by_id(&ms, id);
        if (i % 2 == 0) {
            assert_null(m);
            continue;
        }
        assert_non_null(m);
        assert_int_equal(m->topics.n, 2);
        assert_true(cdc_tableset_has(&m->topics, topic));
    }
    /* the table still grows after compacting */
    assert_int_equal(cdc_members_register(&ms, "w-new", 1, 9999, "", 10000, NULL),
                     CDC_REGISTER_NEW);
    assert_int_equal(cdc_members_alive_count(&ms), N / 2 + 1);
    cdc_members_clear(&ms);
    assert_int_equal(ms.n, 0);
    cdc_members_free(&ms);
}

/* A worker with --tables reports the topics it can consume; a follower (no --tables) its
 * offer, which its heartbeats replace: a change is reported once, an empty offer changes
 * nothing, and a worker with --tables never takes one from a heartbeat. */
static void test_topics_and_offer(void **state)
{
    cdc_members_t ms;
    cdc_member_t *m;
    cdc_error_t e;
    const char *two[] = {"cdc.public.b", "cdc.public.a"},
               *three[] = {"cdc.public.a", "cdc.public.c", "cdc.public.b"};
    (void)state;
    cdc_members_init(&ms);
    assert_int_equal(cdc_members_register(&ms, "w0", 1, 10, "", 0, NULL), CDC_REGISTER_NEW);
    m = cdc_members_by_id(&ms, "w0");
    assert_int_equal(cdc_members_note_topics(m, NULL, 0, false, &e), CDC_OK);
    assert_false(m->topics_known); /* an older worker: not judged */
    assert_int_equal(cdc_members_note_topics(m, two, 2, false, &e), CDC_OK);
    assert_true(m->topics_known);
    assert_false(m->follows);
    assert_false(cdc_members_note_offer(m, three, 3)); /* --tables: fixed */
    assert_int_equal(m->topics.n, 2);
    /* a follower with nothing to offer yet is known (it holds back widening) */
    assert_int_equal(cdc_members_note_topics(m, NULL, 0, true, &e), CDC_OK);
    assert_true(m->topics_known && m->follows);
    assert_int_equal(m->topics.n, 0);
    assert_true(cdc_members_note_offer(m, two, 2));
    assert_false(cdc_members_note_offer(m, two, 2));  /* the same again */
    assert_false(cdc_members_note_offer(m, NULL, 0)); /* empty: unchanged */
    assert_int_equal(m->topics.n, 2);
    assert_true(cdc_members_note_offer(m, three, 3));
    assert_true(cdc_tableset_has(&m->topics, "cdc.public.c"));
    cdc_members_free(&ms);
}

/* Dead letters: kept per class as last reported; a new incarnation starts from none. */
static void test_dead_letters(void **state)
{
    cdc_members_t ms;
    const char *classes[] = {"malformed_json", "oversized"};
    uint64_t records[] = {3, 1};
    cdc_member_t *m;
    (void)state;
    cdc_members_init(&ms);
    assert_int_equal(cdc_members_register(&ms, "w0", 1, 10, "", 0, NULL), CDC_REGISTER_NEW);
    m = cdc_members_by_id(&ms, "w0");
    cdc_members_note_dlq(m, classes, records, 2);
    assert_int_equal(m->ndlq, 2);
    assert_string_equal(m->dlq[1].error_class, "oversized");
    assert_int_equal(m->dlq[0].records, 3);
    records[0] = 5;
    cdc_members_note_dlq(m, classes, records, 1);
    assert_int_equal(m->ndlq, 1);
    assert_int_equal(m->dlq[0].records, 5);
    assert_int_equal(cdc_members_register(&ms, "w0", 1, 10, "", 1, NULL), CDC_REGISTER_SAME);
    assert_int_equal(m->ndlq, 1);
    assert_int_equal(cdc_members_register(&ms, "w0", 2, 11, "", 2, NULL), CDC_REGISTER_REPLACED);
    assert_int_equal(m->ndlq, 0);
    cdc_members_free(&ms);
}

static void test_heartbeat_expiry(void **state)
{
    cdc_members_t ms;
    uint32_t pipes[2];
    (void)state;
    cdc_members_init(&ms);
    cdc_members_register(&ms, "w0", 1, 10, "", 0, NULL);
    cdc_members_register(&ms, "w1", 1, 11, "", 0, NULL);
    assert_true(cdc_members_heartbeat(&ms, 10, 2500));
    assert_false(cdc_members_heartbeat(&ms, 99, 2500));
    assert_int_equal(cdc_members_expire(&ms, 3001, 3000, pipes), 1);
    assert_int_equal(pipes[0], 11);
    assert_false(cdc_members_is_alive(&ms, "w1"));
    assert_true(cdc_members_is_alive(&ms, "w0"));
    /* a lost member is remembered, then forgotten */
    assert_non_null(cdc_members_by_id(&ms, "w1"));
    assert_int_equal(cdc_members_by_id(&ms, "w1")->lost_ms, 3001);
    cdc_members_forget(&ms, 4000, 5000);
    assert_non_null(cdc_members_by_id(&ms, "w1"));
    cdc_members_forget(&ms, 9000, 5000);
    assert_null(cdc_members_by_id(&ms, "w1"));
    /* it can come back */
    assert_int_equal(cdc_members_register(&ms, "w1", 2, 14, "", 9500, NULL), CDC_REGISTER_NEW);
    cdc_members_free(&ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_and_replace), cmocka_unit_test(test_heartbeat_expiry),
        cmocka_unit_test(test_dead_letters),         cmocka_unit_test(test_topics_and_offer),
        cmocka_unit_test(test_many_workers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
