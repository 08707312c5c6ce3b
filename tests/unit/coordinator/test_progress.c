/* Unit tests for coordinator/progress.c: the coordinator's progress check, over a few topics
 * and over hundreds (no fixed cap: every topic of a slot is watched). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/progress.h"

/* A checkpoint where every slot carries topic "a" at offset a and, unless skip is the
 * slot, topic "b" at offset b. */
static cdc_checkpoint_t *ckpt(uint64_t epoch, int64_t a, int64_t b, int skip)
{
    cdc_checkpoint_t *ck = cdc_checkpoint_new("j", epoch, 1, 1);
    assert_non_null(ck);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        assert_int_equal(cdc_checkpoint_set_offset(ck, p, "a", a), CDC_OK);
        if ((int)p != skip)
            assert_int_equal(cdc_checkpoint_set_offset(ck, p, "b", b), CDC_OK);
    }
    return ck;
}

static int judge(cdc_progress_t *pr, uint64_t epoch, int64_t a, int64_t b, int skip, int64_t now,
                 const cdc_progress_finding_t **f)
{
    cdc_checkpoint_t *ck = ckpt(epoch, a, b, skip);
    int n = cdc_progress_checkpoint(pr, ck, now, f);
    cdc_checkpoint_free(ck);
    return n;
}

static void highs(cdc_progress_t *pr, int64_t a, int64_t b)
{
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        cdc_progress_note_high(pr, p, "a", a, 0);
        cdc_progress_note_high(pr, p, "b", b, 0);
    }
}

/* Offsets that move, or stand at the high watermark, are progress; one that stays put with
 * records behind it is flagged once after the timeout and at least min_epochs checkpoints. */
static void test_no_progress(void **state)
{
    cdc_progress_t pr;
    const cdc_progress_finding_t *f = NULL;
    (void)state;
    cdc_progress_init(&pr, 10000, 3);
    highs(&pr, 100, 50);
    assert_int_equal(judge(&pr, 1, 10, 50, -1, 0, &f), 0);
    /* "a" moves each time: never flagged, even long after */
    for (int i = 2; i < 10; i++)
        assert_int_equal(judge(&pr, (uint64_t)i, 10 + i, 50, -1, i * 20000, &f), 0);
    /* "b" stands at its end all along: nothing behind it, not flagged */
    assert_int_equal(cdc_progress_flagged(&pr), 0);
    /* now "a" stays at 25 with 75 behind: two checkpoints, then a third within the timeout */
    assert_int_equal(judge(&pr, 10, 25, 50, -1, 200000, &f), 0);
    assert_int_equal(judge(&pr, 11, 25, 50, -1, 201000, &f), 0);
    assert_int_equal(judge(&pr, 12, 25, 50, -1, 202000, &f), 0);
    assert_int_equal(judge(&pr, 12, 25, 50, -1, 203000, &f), 0);
    /* past the timeout: every slot, once each */
    assert_int_equal(judge(&pr, 13, 25, 50, -1, 230000, &f), CDC_PARTITIONS);
    for (int i = 0; i < CDC_PARTITIONS; i++) {
        assert_int_equal(f[i].kind, CDC_PROGRESS_NO_PROGRESS);
        assert_int_equal(f[i].partition, i);
    }
    assert_string_equal(f[0].topic, "a");
    assert_int_equal(f[0].offset, 25);
    assert_int_equal(f[0].behind, 75);
    assert_int_equal(f[0].for_ms, 30000);
    assert_int_equal(cdc_progress_flagged(&pr), CDC_PARTITIONS);
    /* reported once */
    assert_int_equal(judge(&pr, 14, 25, 50, -1, 240000, &f), 0);
    /* it moves again: the flag clears */
    assert_int_equal(judge(&pr, 15, 26, 50, -1, 250000, &f), 0);
    assert_int_equal(cdc_progress_flagged(&pr), 0);
    cdc_progress_free(&pr);
}

/* A long pause between checkpoints alone is not enough: min_epochs count too. */
static void test_needs_epochs(void **state)
{
    cdc_progress_t pr;
    const cdc_progress_finding_t *f = NULL;
    (void)state;
    cdc_progress_init(&pr, 1000, 3);
    highs(&pr, 100, 0);
    assert_int_equal(judge(&pr, 1, 5, 0, -1, 0, &f), 0);
    assert_int_equal(judge(&pr, 2, 5, 0, -1, 100000, &f), 0);
    assert_int_equal(judge(&pr, 3, 5, 0, -1, 200000, &f), 0);
    assert_int_equal(judge(&pr, 4, 5, 0, -1, 300000, &f), CDC_PARTITIONS);
    /* reset (a recovery): the clocks start again */
    cdc_progress_reset(&pr);
    assert_int_equal(cdc_progress_flagged(&pr), 0);
    highs(&pr, 100, 0);
    assert_int_equal(judge(&pr, 5, 5, 0, -1, 400000, &f), 0);
    /* off: never flagged */
    cdc_progress_free(&pr);
    cdc_progress_init(&pr, 0, 3);
    highs(&pr, 100, 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(judge(&pr, (uint64_t)i, 5, 0, -1, i * 100000, &f), 0);
    cdc_progress_free(&pr);
}

/* A recovery that did not move the slot: the next finding at the same offset says so
 * (and the coordinator does not recover again); one at another offset does not. */
static void test_recovered_once_per_offset(void **state)
{
    cdc_progress_t pr;
    const cdc_progress_finding_t *f = NULL;
    (void)state;
    cdc_progress_init(&pr, 1000, 3);
    highs(&pr, 100, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(judge(&pr, (uint64_t)i, 99, 0, -1, i * 1000, &f), 0);
    assert_int_equal(judge(&pr, 3, 99, 0, -1, 3000, &f), CDC_PARTITIONS);
    assert_false(f[0].again);
    for (int i = 0; i < CDC_PARTITIONS; i++)
        cdc_progress_recovering(&pr, &f[i]);
    cdc_progress_reset(&pr); /* the recovery */
    highs(&pr, 100, 0);
    for (int i = 4; i < 7; i++)
        assert_int_equal(judge(&pr, (uint64_t)i, 99, 0, -1, i * 1000, &f), 0);
    assert_int_equal(judge(&pr, 7, 99, 0, -1, 7000, &f), CDC_PARTITIONS);
    assert_true(f[0].again);
    assert_int_equal(f[0].offset, 99);
    /* it moves, then stops elsewhere: a recovery is worth trying again */
    assert_int_equal(judge(&pr, 8, 50, 0, -1, 8000, &f), 0);
    highs(&pr, 100, 0);
    for (int i = 9; i < 11; i++)
        assert_int_equal(judge(&pr, (uint64_t)i, 50, 0, -1, i * 1000, &f), 0);
    assert_int_equal(judge(&pr, 11, 50, 0, -1, 11000, &f), CDC_PARTITIONS);
    assert_false(f[0].again);
    cdc_progress_free(&pr);
}

/* A slot whose owner does not consume a topic the others carry is reported once, and
 * cleared when it does again. */
static void test_missing_topic(void **state)
{
    cdc_progress_t pr;
    const cdc_progress_finding_t *f = NULL;
    (void)state;
    cdc_progress_init(&pr, 0, 3);
    assert_int_equal(judge(&pr, 1, 0, 0, -1, 0, &f), 0);
    assert_int_equal(judge(&pr, 2, 0, 0, 7, 0, &f), 1);
    assert_int_equal(f[0].kind, CDC_PROGRESS_MISSING_TOPIC);
    assert_int_equal(f[0].partition, 7);
    assert_string_equal(f[0].topic, "b");
    assert_int_equal(cdc_progress_flagged(&pr), 1);
    assert_string_equal(pr.slot[7].missing, "b");
    assert_int_equal(judge(&pr, 3, 0, 0, 7, 0, &f), 0); /* once */
    assert_int_equal(judge(&pr, 4, 0, 0, -1, 0, &f), 0);
    assert_int_equal(cdc_progress_flagged(&pr), 0);
    assert_string_equal(pr.slot[7].missing, "");
    cdc_progress_free(&pr);
}

/* Every slot with two stuck topics and a missing one at once: all findings fit and are
 * reported; note_high says when an owner's watchdog newly reports a stall. */
static void test_many_findings(void **state)
{
    cdc_progress_t pr;
    const cdc_progress_finding_t *f = NULL;
    (void)state;
    cdc_progress_init(&pr, 1000, 3);
    highs(&pr, 100, 100);
    assert_true(cdc_progress_note_high(&pr, 0, "a", 100, 5));
    assert_false(cdc_progress_note_high(&pr, 0, "a", 100, 7));
    assert_false(cdc_progress_note_high(&pr, 0, "a", 100, 0));
    for (int i = 0; i < 3; i++)
        assert_int_equal(judge(&pr, (uint64_t)i, 5, 5, -1, i * 1000, &f), 0);
    assert_int_equal(judge(&pr, 3, 5, 5, -1, 3000, &f), 2 * CDC_PARTITIONS);
    /* a topic only in slot 0's checkpoint: every other slot misses it */
    cdc_checkpoint_t *ck = ckpt(4, 5, 5, -1);
    assert_int_equal(cdc_checkpoint_set_offset(ck, 0, "c", 0), CDC_OK);
    assert_int_equal(cdc_progress_checkpoint(&pr, ck, 4000, &f), CDC_PARTITIONS - 1);
    cdc_checkpoint_free(ck);
    assert_int_equal(cdc_progress_flagged(&pr), CDC_PARTITIONS);
    cdc_progress_free(&pr);
}

/* Hundreds of topics per slot, far more than the 16 once watched: a stall in the 100th
 * topic (of slot 5) is found, and a topic only the other slots carry is found missing
 * although it sorts last. */
static void test_many_topics(void **state)
{
    enum { NT = 300 };
    cdc_progress_t pr;
    const cdc_progress_finding_t *f = NULL;
    char topic[64];
    (void)state;
    cdc_progress_init(&pr, 1000, 3);
    for (int e = 0; e < 5; e++) {
        cdc_checkpoint_t *ck = cdc_checkpoint_new("j", (uint64_t)e + 1, 1, 1);
        assert_non_null(ck);
        for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
            for (int t = NT - 1; t >= 0; t--) { /* not in sorted order */
                /* topic 99 of slot 5 stays at 10 with 90 behind; every other one moves */
                int64_t at = p == 5 && t == 99 ? 10 : 10 + e;
                snprintf(topic, sizeof(topic), "cdc.public.t%03d", t);
                cdc_progress_note_high(&pr, p, topic, 100, 0);
                if (!(t == NT - 1 && p == 2)) /* slot 2 lacks the last topic */
                    assert_int_equal(cdc_checkpoint_set_offset(ck, p, topic, at), CDC_OK);
            }
        int n = cdc_progress_checkpoint(&pr, ck, (int64_t)e * 1000, &f);
        cdc_checkpoint_free(ck);
        if (e == 0) {
            assert_int_equal(n, 1);
            assert_int_equal(f[0].kind, CDC_PROGRESS_MISSING_TOPIC);
            assert_int_equal(f[0].partition, 2);
            assert_string_equal(f[0].topic, "cdc.public.t299");
        } else if (e < 3) {
            assert_int_equal(n, 0);
        } else if (e == 3) {
            assert_int_equal(n, 1);
            assert_int_equal(f[0].kind, CDC_PROGRESS_NO_PROGRESS);
            assert_int_equal(f[0].partition, 5);
            assert_string_equal(f[0].topic, "cdc.public.t099");
            assert_int_equal(f[0].offset, 10);
            assert_int_equal(f[0].behind, 90);
            cdc_progress_recovering(&pr, &f[0]);
        } else {
            assert_int_equal(n, 0); /* reported once */
        }
    }
    assert_int_equal(pr.slot[5].n, NT);
    assert_int_equal(pr.slot[5].t[99].recovered_at, 10);
    assert_ptr_equal(cdc_progress_find(&pr.slot[5], "cdc.public.t099"), &pr.slot[5].t[99]);
    assert_null(cdc_progress_find(&pr.slot[5], "cdc.public.t300"));
    assert_true(pr.slot[5].t[99].no_progress);
    assert_int_equal(cdc_progress_flagged(&pr), 2);
    cdc_progress_free(&pr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_progress),
        cmocka_unit_test(test_needs_epochs),
        cmocka_unit_test(test_recovered_once_per_offset),
        cmocka_unit_test(test_missing_topic),
        cmocka_unit_test(test_many_findings),
        cmocka_unit_test(test_many_topics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
