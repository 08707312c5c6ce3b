/* Unit tests for coordinator/membership.c: register, replace, heartbeats, expiry, the
 * topics a worker reports and a follower's offer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "coordinator/membership.h"

static void test_register_and_replace(void **state)
{
    cdc_members_t ms;
    uint32_t old;
    const char *ids[CDC_MEMBERS_MAX];
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
    assert_int_equal(cdc_members_alive_ids(&ms, ids, CDC_MEMBERS_MAX), 2);
    assert_int_equal(cdc_members_register(&ms, "", 1, 13, "", 0, &old), CDC_REGISTER_INVALID);
    /* a second id on the same pipe drops the first */
    assert_int_equal(cdc_members_register(&ms, "w9", 1, 11, "", 7, &old), CDC_REGISTER_NEW);
    assert_false(cdc_members_is_alive(&ms, "w1"));
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
}

static void test_heartbeat_expiry(void **state)
{
    cdc_members_t ms;
    uint32_t pipes[CDC_MEMBERS_MAX];
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_and_replace),
        cmocka_unit_test(test_heartbeat_expiry),
        cmocka_unit_test(test_dead_letters),
        cmocka_unit_test(test_topics_and_offer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
