/* Unit tests for the coordinator/worker protocol (proto/cdc.proto through common/msg.c):
 * every Envelope body type survives pack/unpack with all fields equal, and the decode
 * layer rejects garbage and empty envelopes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/msg.h"

/* Packs env, unpacks it and checks the body case; returns the decoded copy. */
static Cdc__Envelope *round_trip(const Cdc__Envelope *env)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    cdc_error_t e;
    Cdc__Envelope *out = NULL;
    assert_int_equal(cdc_msg_encode(env, &buf, &len, &e), CDC_OK);
    assert_true(len > 0);
    assert_int_equal(cdc_msg_decode(buf, len, &out, &e), CDC_OK);
    free(buf);
    assert_int_equal(out->body_case, env->body_case);
    assert_string_equal(cdc_msg_body_name(out), cdc_msg_body_name(env));
    return out;
}

static void assert_partition_equal(const Cdc__PartitionState *a, const Cdc__PartitionState *b)
{
    assert_int_equal(a->partition, b->partition);
    assert_string_equal(a->state_handle, b->state_handle);
    assert_int_equal(a->n_offsets, b->n_offsets);
    for (size_t i = 0; i < a->n_offsets; i++) {
        assert_string_equal(a->offsets[i]->topic, b->offsets[i]->topic);
        assert_int_equal(a->offsets[i]->next_offset, b->offsets[i]->next_offset);
    }
}

/* Two partitions with two topics each; storage static so tests can reuse it. */
static Cdc__TopicOffset off[4];
static Cdc__TopicOffset *offp[2][2];
static Cdc__PartitionState parts[2];
static Cdc__PartitionState *partp[2];

static void make_partitions(void)
{
    for (int p = 0; p < 2; p++) {
        for (int t = 0; t < 2; t++) {
            Cdc__TopicOffset *o = &off[p * 2 + t];
            cdc__topic_offset__init(o);
            o->topic = t == 0 ? "cdc.public.orders" : "cdc.public.customers";
            o->next_offset = (int64_t)1 << 40 | (p * 10 + t);
            offp[p][t] = o;
        }
        cdc__partition_state__init(&parts[p]);
        parts[p].partition = (uint32_t)(p == 0 ? 0 : 11);
        parts[p].n_offsets = 2;
        parts[p].offsets = offp[p];
        parts[p].state_handle = p == 0 ? "" : "file:///state/p11/epoch-7";
        partp[p] = &parts[p];
    }
}

static void test_register_heartbeat(void **state)
{
    (void)state;
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Register reg = CDC__REGISTER__INIT;
    reg.worker_id = "worker-2";
    reg.incarnation = UINT64_MAX - 3;
    reg.admin_endpoint = "http://127.0.0.1:9100";
    env.body_case = CDC__ENVELOPE__BODY_REGISTER;
    env.register_ = &reg;
    Cdc__Envelope *out = round_trip(&env);
    assert_string_equal(out->register_->worker_id, "worker-2");
    assert_true(out->register_->incarnation == UINT64_MAX - 3);
    assert_string_equal(out->register_->admin_endpoint, "http://127.0.0.1:9100");
    cdc_msg_free(out);

    Cdc__Heartbeat hb = CDC__HEARTBEAT__INIT;
    hb.worker_id = "w";
    hb.incarnation = 9;
    hb.term = 42;
    hb.generation = 7;
    env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    out = round_trip(&env);
    assert_string_equal(out->heartbeat->worker_id, "w");
    assert_int_equal(out->heartbeat->incarnation, 9);
    assert_int_equal(out->heartbeat->term, 42);
    assert_int_equal(out->heartbeat->generation, 7);
    cdc_msg_free(out);
}

static void test_assign(void **state)
{
    (void)state;
    make_partitions();
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Assign a = CDC__ASSIGN__INIT;
    a.term = 5;
    a.generation = 3;
    a.checkpoint_epoch = 100;
    a.next_epoch = 101;
    a.n_partitions = 2;
    a.partitions = partp;
    env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;
    Cdc__Envelope *out = round_trip(&env);
    assert_int_equal(out->assign->term, 5);
    assert_int_equal(out->assign->generation, 3);
    assert_int_equal(out->assign->checkpoint_epoch, 100);
    assert_int_equal(out->assign->next_epoch, 101);
    assert_int_equal(out->assign->n_partitions, 2);
    for (size_t i = 0; i < 2; i++)
        assert_partition_equal(out->assign->partitions[i], partp[i]);
    cdc_msg_free(out);
}

static void test_barrier_committed_abort_reject(void **state)
{
    (void)state;
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Barrier b = CDC__BARRIER__INIT;
    b.term = 1;
    b.generation = 2;
    b.epoch = 3;
    env.body_case = CDC__ENVELOPE__BODY_BARRIER;
    env.barrier = &b;
    Cdc__Envelope *out = round_trip(&env);
    assert_int_equal(out->barrier->term, 1);
    assert_int_equal(out->barrier->generation, 2);
    assert_int_equal(out->barrier->epoch, 3);
    cdc_msg_free(out);

    Cdc__Committed c = CDC__COMMITTED__INIT;
    c.term = 8;
    c.epoch = 1234567890123ull;
    env.body_case = CDC__ENVELOPE__BODY_COMMITTED;
    env.committed = &c;
    out = round_trip(&env);
    assert_int_equal(out->committed->term, 8);
    assert_true(out->committed->epoch == 1234567890123ull);
    cdc_msg_free(out);

    Cdc__Abort ab = CDC__ABORT__INIT;
    ab.term = 4;
    ab.generation = 6;
    ab.epoch = 77;
    ab.reason = "worker \"w1\" missed the ack deadline";
    env.body_case = CDC__ENVELOPE__BODY_ABORT;
    env.abort = &ab;
    out = round_trip(&env);
    assert_int_equal(out->abort->term, 4);
    assert_int_equal(out->abort->generation, 6);
    assert_int_equal(out->abort->epoch, 77);
    assert_string_equal(out->abort->reason, ab.reason);
    cdc_msg_free(out);

    Cdc__Reject r = CDC__REJECT__INIT;
    r.reason = "stale term";
    r.term = 9;
    r.generation = 10;
    env.body_case = CDC__ENVELOPE__BODY_REJECT;
    env.reject = &r;
    out = round_trip(&env);
    assert_string_equal(out->reject->reason, "stale term");
    assert_int_equal(out->reject->term, 9);
    assert_int_equal(out->reject->generation, 10);
    cdc_msg_free(out);
}

static void test_ack(void **state)
{
    (void)state;
    make_partitions();
    uint8_t lower[] = {0x00, 0x01, 0xff}, upper[] = {0x7f, 0x00};
    Cdc__ColumnStats cs[2];
    Cdc__ColumnStats *csp[2] = {&cs[0], &cs[1]};
    for (int i = 0; i < 2; i++) {
        cdc__column_stats__init(&cs[i]);
        cs[i].field_id = i + 1;
        cs[i].column_size = 1000 + i;
        cs[i].value_count = 50;
        cs[i].null_count = i;
        cs[i].has_bounds = i == 0;
        if (i == 0) {
            cs[i].lower_bound.data = lower;
            cs[i].lower_bound.len = sizeof(lower);
            cs[i].upper_bound.data = upper;
            cs[i].upper_bound.len = sizeof(upper);
        }
    }
    int32_t eq_ids[] = {1, 3};
    Cdc__StagedFile f = CDC__STAGED_FILE__INIT;
    Cdc__StagedFile *fp[1] = {&f};
    f.table = "db.orders";
    f.path = "s3://wh/db/orders/data/e5-p0-0.parquet";
    f.content = 2;
    f.record_count = 50;
    f.file_size_in_bytes = 4096;
    f.schema_id = 1;
    f.n_equality_ids = 2;
    f.equality_ids = eq_ids;
    f.n_stats = 2;
    f.stats = csp;
    f.partition = 11;
    Cdc__SchemaUpdate su = CDC__SCHEMA_UPDATE__INIT;
    Cdc__SchemaUpdate *sup[1] = {&su};
    su.table = "db.orders";
    su.schema_json = "{\"type\":\"struct\",\"schema-id\":2,\"fields\":[]}";

    Cdc__Ack a = CDC__ACK__INIT;
    a.worker_id = "worker-0";
    a.term = 2;
    a.generation = 4;
    a.epoch = 99;
    a.n_partitions = 2;
    a.partitions = partp;
    a.n_files = 1;
    a.files = fp;
    a.n_schemas = 1;
    a.schemas = sup;
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    env.body_case = CDC__ENVELOPE__BODY_ACK;
    env.ack = &a;

    Cdc__Envelope *out = round_trip(&env);
    const Cdc__Ack *o = out->ack;
    assert_string_equal(o->worker_id, "worker-0");
    assert_int_equal(o->term, 2);
    assert_int_equal(o->generation, 4);
    assert_int_equal(o->epoch, 99);
    assert_int_equal(o->n_partitions, 2);
    for (size_t i = 0; i < 2; i++)
        assert_partition_equal(o->partitions[i], partp[i]);
    assert_int_equal(o->n_files, 1);
    const Cdc__StagedFile *of = o->files[0];
    assert_string_equal(of->table, f.table);
    assert_string_equal(of->path, f.path);
    assert_int_equal(of->content, 2);
    assert_int_equal(of->record_count, 50);
    assert_int_equal(of->file_size_in_bytes, 4096);
    assert_int_equal(of->schema_id, 1);
    assert_int_equal(of->n_equality_ids, 2);
    assert_int_equal(of->equality_ids[0], 1);
    assert_int_equal(of->equality_ids[1], 3);
    assert_int_equal(of->partition, 11);
    assert_int_equal(of->n_stats, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(of->stats[i]->field_id, cs[i].field_id);
        assert_int_equal(of->stats[i]->column_size, cs[i].column_size);
        assert_int_equal(of->stats[i]->value_count, cs[i].value_count);
        assert_int_equal(of->stats[i]->null_count, cs[i].null_count);
        assert_int_equal(of->stats[i]->has_bounds, cs[i].has_bounds);
        assert_int_equal(of->stats[i]->lower_bound.len, cs[i].lower_bound.len);
        assert_int_equal(of->stats[i]->upper_bound.len, cs[i].upper_bound.len);
    }
    assert_memory_equal(of->stats[0]->lower_bound.data, lower, sizeof(lower));
    assert_memory_equal(of->stats[0]->upper_bound.data, upper, sizeof(upper));
    assert_int_equal(o->n_schemas, 1);
    assert_string_equal(o->schemas[0]->table, su.table);
    assert_string_equal(o->schemas[0]->schema_json, su.schema_json);
    cdc_msg_free(out);
}

static void test_garbage_rejected(void **state)
{
    (void)state;
    cdc_error_t e;
    Cdc__Envelope *out = NULL;
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x13, 0x37, 0x00, 0x42};
    assert_int_equal(cdc_msg_decode(junk, sizeof(junk), &out, &e), CDC_ERR_PROTOCOL);
    assert_null(out);
    assert_false(e.retriable);
    /* an empty frame unpacks as an envelope without body: also rejected */
    assert_int_equal(cdc_msg_decode((const uint8_t *)"", 0, &out, &e), CDC_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "no body"));
    /* a truncated valid frame */
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Abort ab = CDC__ABORT__INIT;
    ab.reason = "a reason long enough to be cut";
    env.body_case = CDC__ENVELOPE__BODY_ABORT;
    env.abort = &ab;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(cdc_msg_encode(&env, &buf, &len, &e), CDC_OK);
    assert_int_equal(cdc_msg_decode(buf, len - 5, &out, &e), CDC_ERR_PROTOCOL);
    free(buf);
    /* encoding an envelope without body is refused */
    Cdc__Envelope empty = CDC__ENVELOPE__INIT;
    assert_int_equal(cdc_msg_encode(&empty, &buf, &len, &e), CDC_ERR_INVALID);
    assert_string_equal(cdc_msg_body_name(&empty), "none");
    cdc_msg_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_heartbeat),
        cmocka_unit_test(test_assign),
        cmocka_unit_test(test_barrier_committed_abort_reject),
        cmocka_unit_test(test_ack),
        cmocka_unit_test(test_garbage_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
