/*
 * Unit tests for coordinator/epoch.c: completion needs the SET of all 12 slots, stale
 * term/generation and foreign slots are rejected whole, deadlines, id reservation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/msg.h"
#include "coordinator/epoch.h"

/* a 3-worker ownership: w0 has 0..3, w1 4..7, w2 8..11 */
static const char *owners[CDC_PARTITIONS] = {"w0", "w0", "w0", "w0", "w1", "w1",
                                             "w1", "w1", "w2", "w2", "w2", "w2"};

typedef struct ack_buf {
    Cdc__Ack ack;
    Cdc__PartitionState ps[CDC_PARTITIONS], *psp[CDC_PARTITIONS];
    Cdc__TopicOffset to[CDC_PARTITIONS], *top[CDC_PARTITIONS];
    Cdc__StagedFile sf[CDC_PARTITIONS], *sfp[CDC_PARTITIONS];
    Cdc__PartitionValue pv[CDC_PARTITIONS], *pvp[CDC_PARTITIONS];
    char path[CDC_PARTITIONS][64];
} ack_buf_t;

static void make_ack(ack_buf_t *b, const char *worker, uint64_t term, uint64_t gen, uint64_t epoch,
                     const uint32_t *slots, size_t n)
{
    memset(b, 0, sizeof(*b));
    cdc__ack__init(&b->ack);
    b->ack.worker_id = (char *)worker;
    b->ack.term = term;
    b->ack.generation = gen;
    b->ack.epoch = epoch;
    for (size_t i = 0; i < n; i++) {
        cdc__partition_state__init(&b->ps[i]);
        cdc__topic_offset__init(&b->to[i]);
        cdc__staged_file__init(&b->sf[i]);
        b->to[i].topic = "cdc.public.t";
        b->to[i].next_offset = (int64_t)(epoch * 100 + slots[i]);
        b->top[i] = &b->to[i];
        b->ps[i].partition = slots[i];
        b->ps[i].n_offsets = 1;
        b->ps[i].offsets = &b->top[i];
        b->ps[i].state_handle = "";
        b->psp[i] = &b->ps[i];
        snprintf(b->path[i], sizeof(b->path[i]), "/wh/ns/t/data/e%llu-p%u.parquet",
                 (unsigned long long)epoch, slots[i]);
        b->sf[i].table = "ns.t";
        b->sf[i].path = b->path[i];
        b->sf[i].record_count = 10;
        b->sf[i].file_size_in_bytes = 1000;
        b->sf[i].partition = slots[i];
        /* a file of partition spec 3 whose one value is the slot's number */
        cdc__partition_value__init(&b->pv[i]);
        b->pv[i].value.data = (uint8_t *)&slots[i];
        b->pv[i].value.len = 4;
        b->pvp[i] = &b->pv[i];
        b->sf[i].spec_id = 3;
        b->sf[i].sort_order_id = 2;
        b->sf[i].n_partition_values = 1;
        b->sf[i].partition_values = &b->pvp[i];
        b->sfp[i] = &b->sf[i];
    }
    b->ack.n_partitions = n;
    b->ack.partitions = b->psp;
    b->ack.n_files = n;
    b->ack.files = b->sfp;
}

static void setup_tracker(cdc_epochs_t *t)
{
    cdc_epochs_init(t, "job");
    cdc_epochs_reset(t, 7, 3, owners);
    cdc_epochs_reserve(t, 100, 200);
}

static const uint32_t w0s[] = {0, 1, 2, 3}, w1s[] = {4, 5, 6, 7}, w2s[] = {8, 9, 10, 11};

static void test_complete_needs_set(void **state)
{
    cdc_epochs_t t;
    ack_buf_t b;
    uint64_t e;
    cdc_error_t err;
    (void)state;
    setup_tracker(&t);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_OK);
    assert_int_equal(e, 100);
    make_ack(&b, "w0", 7, 3, 100, w0s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_ACCEPTED);
    /* the same slots again: a count would say 8, the set says 4 */
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_DUPLICATE);
    make_ack(&b, "w1", 7, 3, 100, w1s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_ACCEPTED);
    assert_null(cdc_epochs_take_complete(&t));
    make_ack(&b, "w2", 7, 3, 100, w2s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 5, &err), CDC_ACK_COMPLETE);
    cdc_checkpoint_t *c = cdc_epochs_take_complete(&t);
    assert_non_null(c);
    assert_int_equal(c->epoch, 100);
    assert_int_equal(c->term, 7);
    assert_int_equal(c->nfiles, 12);
    assert_int_equal(c->completed_ms, 5);
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        assert_int_equal(c->partitions[p].noffsets, 1);
        assert_int_equal(c->partitions[p].offsets[0].next_offset, 100 * 100 + p);
        assert_string_equal(c->partitions[p].owner, owners[p]);
    }
    for (size_t i = 0; i < c->nfiles; i++) { /* the partition tuples are kept */
        uint32_t v;
        assert_int_equal(c->files[i].file.spec_id, 3);
        assert_int_equal(c->files[i].file.sort_order_id, 2);
        assert_int_equal(c->files[i].file.npartition, 1);
        assert_int_equal(c->files[i].file.partition[0].len, 4);
        memcpy(&v, c->files[i].file.partition[0].bytes, 4);
        assert_int_equal(v, c->files[i].partition);
    }
    cdc_checkpoint_free(c);
    assert_null(cdc_epochs_take_complete(&t));
    cdc_epochs_clear(&t);
}

static void test_stale_and_foreign_rejected(void **state)
{
    cdc_epochs_t t;
    ack_buf_t b;
    uint64_t e;
    cdc_error_t err;
    (void)state;
    setup_tracker(&t);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_OK);
    make_ack(&b, "w0", 7, 2, e, w0s, 4); /* old generation: a zombie */
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_STALE);
    assert_int_equal(err.code, CDC_ERR_STALE);
    make_ack(&b, "w0", 6, 3, e, w0s, 4); /* old term */
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_STALE);
    make_ack(&b, "w0", 7, 3, e + 1, w0s, 4); /* no such barrier */
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_UNKNOWN_EPOCH);
    make_ack(&b, "w0", 7, 3, e, w1s, 4); /* slots of w1 */
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_NOT_OWNER);
    uint32_t bad[] = {12};
    make_ack(&b, "w0", 7, 3, e, bad, 1);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_INVALID);
    /* a file for a slot not in the ack */
    make_ack(&b, "w0", 7, 3, e, w0s, 4);
    b.sf[0].partition = 5;
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_INVALID);
    /* nothing of the rejected acks stuck */
    assert_int_equal(t.open[0].acked, 0);
    assert_int_equal(t.open[0].rec->nfiles, 0);
    cdc_epochs_clear(&t);
}

/* Truncates of the ack's slots enter the record; one for a foreign slot rejects the ack. */
static void test_truncates(void **state)
{
    cdc_epochs_t t;
    ack_buf_t b;
    uint64_t e;
    cdc_error_t err;
    Cdc__TableTruncate tt, *ttp = &tt;
    (void)state;
    setup_tracker(&t);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_OK);
    cdc__table_truncate__init(&tt);
    tt.table = "ns.t";
    tt.partition = 5; /* not a slot of this ack */
    make_ack(&b, "w0", 7, 3, e, w0s, 4);
    b.ack.n_truncates = 1;
    b.ack.truncates = &ttp;
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_INVALID);
    assert_int_equal(t.open[0].rec->ntruncates, 0);
    tt.partition = 2;
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_ACCEPTED);
    make_ack(&b, "w1", 7, 3, e, w1s, 4);
    tt.partition = 4;
    b.ack.n_truncates = 1;
    b.ack.truncates = &ttp;
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_ACCEPTED);
    make_ack(&b, "w2", 7, 3, e, w2s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_COMPLETE);
    cdc_checkpoint_t *c = cdc_epochs_take_complete(&t);
    assert_non_null(c);
    assert_int_equal(cdc_checkpoint_truncated(c, "ns.t"), (1u << 2) | (1u << 4));
    cdc_checkpoint_free(c);
    cdc_epochs_clear(&t);
}

static void test_reset_aborts_open(void **state)
{
    cdc_epochs_t t;
    ack_buf_t b;
    uint64_t e1, e2, e3;
    cdc_error_t err;
    (void)state;
    setup_tracker(&t);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e1), CDC_OK);
    assert_int_equal(cdc_epochs_begin(&t, 10, 0, &e2), CDC_OK);
    make_ack(&b, "w0", 7, 3, e1, w0s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_ACCEPTED);
    cdc_epochs_reset(&t, 7, 4, owners);
    assert_int_equal(t.nopen, 0);
    /* epoch ids keep increasing after an abort */
    assert_int_equal(cdc_epochs_begin(&t, 20, 0, &e3), CDC_OK);
    assert_true(e3 > e2);
    make_ack(&b, "w1", 7, 3, e2, w1s, 4); /* late ack of the aborted generation */
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_STALE);
    cdc_epochs_clear(&t);
}

static void test_overdue(void **state)
{
    cdc_epochs_t t;
    ack_buf_t b;
    uint64_t e, oe;
    cdc_pset_t missing;
    cdc_error_t err;
    (void)state;
    setup_tracker(&t);
    assert_int_equal(cdc_epochs_begin(&t, 1000, 0, &e), CDC_OK);
    make_ack(&b, "w0", 7, 3, e, w0s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_ACCEPTED);
    assert_false(cdc_epochs_overdue(&t, 2000, 5000, &oe, &missing));
    assert_true(cdc_epochs_overdue(&t, 6001, 5000, &oe, &missing));
    assert_int_equal(oe, e);
    assert_int_equal(missing, 0x0ff0);
    cdc_epochs_clear(&t);
}

/* Epochs queued at a slow slot: a slot's time on an epoch counts from its ack of the
 * epoch before when that came after the barrier, so only the slots that are late on
 * their own work are missing. */
static void test_overdue_queued(void **state)
{
    cdc_epochs_t t;
    ack_buf_t b;
    uint64_t e1, e2, oe;
    cdc_pset_t missing;
    cdc_error_t err;
    (void)state;
    setup_tracker(&t);
    assert_int_equal(cdc_epochs_begin(&t, 1000, 0, &e1), CDC_OK);
    assert_int_equal(cdc_epochs_begin(&t, 2000, 0, &e2), CDC_OK);
    make_ack(&b, "w0", 7, 3, e1, w0s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_ACCEPTED);
    cdc_epochs_note_acked(&t, 0x000f, 1500);
    make_ack(&b, "w1", 7, 3, e1, w1s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_ACCEPTED);
    make_ack(&b, "w2", 7, 3, e1, w2s, 4);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_COMPLETE);
    cdc_epochs_note_acked(&t, 0x0ff0, 9000);
    cdc_checkpoint_free(cdc_epochs_take_complete(&t));
    /* e2's barrier was at 2000: w0's slots are on it since then, w1's since 9000 */
    assert_false(cdc_epochs_overdue(&t, 6900, 5000, &oe, &missing));
    assert_true(cdc_epochs_overdue(&t, 7001, 5000, &oe, &missing));
    assert_int_equal(oe, e2);
    assert_int_equal(missing, 0x000f);
    assert_true(cdc_epochs_overdue(&t, 14000, 5000, &oe, &missing));
    assert_int_equal(missing, 0x000f);
    assert_true(cdc_epochs_overdue(&t, 14001, 5000, &oe, &missing));
    assert_int_equal(missing, 0x0fff);
    /* a new generation forgets the acks */
    cdc_epochs_reset(&t, 7, 4, NULL);
    assert_int_equal(t.slot_acked_ms[5], 0);
    cdc_epochs_clear(&t);
}

static void test_reservation(void **state)
{
    cdc_epochs_t t;
    uint64_t e;
    (void)state;
    cdc_epochs_init(&t, "job");
    cdc_epochs_reset(&t, 1, 1, owners);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_ERR_UNAVAILABLE);
    cdc_epochs_reserve(&t, 5, 7);
    assert_int_equal(cdc_epochs_remaining(&t), 2);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_OK);
    assert_int_equal(e, 5);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_OK);
    assert_int_equal(e, 6);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_ERR_UNAVAILABLE);
    /* a later reservation never goes backwards */
    cdc_epochs_reserve(&t, 3, 10);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_OK);
    assert_int_equal(e, 7);
    cdc_epochs_clear(&t);
    /* too many open epochs */
    cdc_epochs_reserve(&t, 100, 1000);
    for (int i = 0; i < CDC_EPOCH_MAX_INFLIGHT; i++)
        assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_OK);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e), CDC_ERR_CONFLICT);
    cdc_epochs_clear(&t);
}

static void test_completion_in_order(void **state)
{
    cdc_epochs_t t;
    ack_buf_t b;
    uint64_t e1, e2;
    cdc_error_t err;
    static const uint32_t all[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    static const char *one[CDC_PARTITIONS] = {"w", "w", "w", "w", "w", "w",
                                              "w", "w", "w", "w", "w", "w"};
    (void)state;
    cdc_epochs_init(&t, "job");
    cdc_epochs_reset(&t, 1, 1, one);
    cdc_epochs_reserve(&t, 1, 100);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e1), CDC_OK);
    assert_int_equal(cdc_epochs_begin(&t, 0, 0, &e2), CDC_OK);
    make_ack(&b, "w", 1, 1, e2, all, 12);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_COMPLETE);
    assert_null(cdc_epochs_take_complete(&t)); /* e1 first */
    make_ack(&b, "w", 1, 1, e1, all, 12);
    assert_int_equal(cdc_epochs_ack(&t, &b.ack, 1, &err), CDC_ACK_COMPLETE);
    cdc_checkpoint_t *c1 = cdc_epochs_take_complete(&t), *c2 = cdc_epochs_take_complete(&t);
    assert_int_equal(c1->epoch, e1);
    assert_int_equal(c2->epoch, e2);
    cdc_checkpoint_free(c1);
    cdc_checkpoint_free(c2);
    cdc_epochs_clear(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_needs_set),
        cmocka_unit_test(test_stale_and_foreign_rejected),
        cmocka_unit_test(test_truncates),
        cmocka_unit_test(test_reset_aborts_open),
        cmocka_unit_test(test_overdue),
        cmocka_unit_test(test_overdue_queued),
        cmocka_unit_test(test_reservation),
        cmocka_unit_test(test_completion_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
