/* Unit tests for coordinator/presence.c: a read of the coordinators' records into the
 * list /status shows, the role of each, the leader first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/presence.h"

/* A range read of n records (values: JSON, or anything for a broken one). */
typedef struct read {
    cdc_etcd_kv_t kv[8];
    char keys[8][64];
    char *values[8];
    cdc_etcd_kvs_t kvs;
} read_t;

static void add(read_t *r, const char *id, const char *role, int64_t term, const char *raw)
{
    size_t i = r->kvs.count;
    cdc_coordinator_record_t rec;

    memset(&rec, 0, sizeof(rec));
    snprintf(rec.id, sizeof(rec.id), "%s", id);
    snprintf(rec.admin, sizeof(rec.admin), "127.0.0.1:81%02zu", i);
    snprintf(rec.role, sizeof(rec.role), "%s", role);
    rec.term = term;
    rec.since_ms = 1000 + (int64_t)i;
    snprintf(r->keys[i], sizeof(r->keys[i]), "/cdc/j/coordinators/%s", id);
    r->values[i] = raw ? strdup(raw) : cdc_coordinator_record_json(&rec);
    assert_non_null(r->values[i]);
    memset(&r->kv[i], 0, sizeof(r->kv[i]));
    r->kv[i].key = r->keys[i];
    r->kv[i].value = r->values[i];
    r->kv[i].value_len = strlen(r->values[i]);
    r->kvs.kvs = r->kv;
    r->kvs.count = i + 1;
}

static void done(read_t *r)
{
    for (size_t i = 0; i < r->kvs.count; i++)
        free(r->values[i]);
    memset(r, 0, sizeof(*r));
}

/* One leader, two standbys and a broken value: the list holds the three sorted by id,
 * the leader first in the order for /status. */
static void test_read_into_list(void **state)
{
    cdc_presence_t p;
    read_t r;
    const cdc_presence_entry_t *o[8];
    (void)state;
    cdc_presence_init(&p, NULL, "j", "coord-1", "127.0.0.1:8101", 5);
    assert_string_equal(p.key, "/cdc/j/coordinators/coord-1");
    assert_string_equal(p.prefix, "/cdc/j/coordinators/");
    memset(&r, 0, sizeof(r));
    add(&r, "coord-0", "standby", 0, NULL);
    add(&r, "coord-1", "leader", 170, NULL);
    add(&r, "coord-2", "standby", 0, NULL);
    add(&r, "coord-x", "", 0, "not json");
    cdc_presence_merge(&p, &r.kvs, 10000);
    done(&r);
    assert_int_equal(p.n, 3);
    assert_string_equal(p.list[0].rec.id, "coord-0");
    assert_string_equal(p.list[1].rec.admin, "127.0.0.1:8101");
    assert_int_equal(p.list[1].rec.term, 170);
    assert_true(p.list[2].alive);
    assert_int_equal(cdc_presence_ordered(&p, "coord-1", o, 8), 3);
    assert_string_equal(o[0]->rec.id, "coord-1");
    assert_string_equal(cdc_presence_role(o[0], "coord-1"), "leader");
    assert_string_equal(o[1]->rec.id, "coord-0");
    assert_string_equal(cdc_presence_role(o[1], "coord-1"), "standby");
    assert_string_equal(o[2]->rec.id, "coord-2");
    /* max bounds the output */
    assert_int_equal(cdc_presence_ordered(&p, "coord-1", o, 2), 2);
    cdc_presence_close(&p);
}

/* The role follows who holds the leader key, whatever a record still claims (a leader
 * that lost the lease writes "standby" on its next turn); unknown leader: the claim. */
static void test_role(void **state)
{
    cdc_presence_entry_t en;
    (void)state;
    memset(&en, 0, sizeof(en));
    snprintf(en.rec.id, sizeof(en.rec.id), "coord-0");
    snprintf(en.rec.role, sizeof(en.rec.role), "leader");
    assert_string_equal(cdc_presence_role(&en, "coord-1"), "standby");
    assert_string_equal(cdc_presence_role(&en, "coord-0"), "leader");
    assert_string_equal(cdc_presence_role(&en, NULL), "leader");
    assert_string_equal(cdc_presence_role(&en, ""), "leader");
    snprintf(en.rec.role, sizeof(en.rec.role), "standby");
    assert_string_equal(cdc_presence_role(&en, NULL), "standby");
    assert_string_equal(cdc_presence_role(&en, "coord-0"), "leader");
    en.rec.role[0] = '\0';
    assert_string_equal(cdc_presence_role(&en, NULL), "standby");
}

/* A record gone from etcd (its process died, the lease expired) stays as not alive,
 * comes back alive with its new record, and is forgotten after 10 minutes. */
static void test_gone_and_back(void **state)
{
    cdc_presence_t p;
    read_t r;
    const cdc_presence_entry_t *o[8];
    (void)state;
    cdc_presence_init(&p, NULL, "j", "coord-1", "", 5);
    memset(&r, 0, sizeof(r));
    add(&r, "coord-0", "leader", 7, NULL);
    add(&r, "coord-1", "standby", 0, NULL);
    cdc_presence_merge(&p, &r.kvs, 1000);
    done(&r);
    /* coord-0 died; coord-1 leads now */
    add(&r, "coord-1", "leader", 9, NULL);
    cdc_presence_merge(&p, &r.kvs, 3000);
    assert_int_equal(p.n, 2);
    assert_false(p.list[0].alive);
    assert_int_equal(p.list[0].seen_ms, 1000);
    assert_true(p.list[1].alive);
    assert_int_equal(cdc_presence_ordered(&p, "coord-1", o, 8), 2);
    assert_string_equal(o[0]->rec.id, "coord-1");
    assert_int_equal(o[0]->rec.term, 9);
    assert_string_equal(cdc_presence_role(o[1], "coord-1"), "standby");
    assert_false(o[1]->alive);
    /* still listed just before 10 minutes, gone after */
    cdc_presence_merge(&p, &r.kvs, 1000 + 10 * 60000 - 1);
    assert_int_equal(p.n, 2);
    cdc_presence_merge(&p, &r.kvs, 1000 + 10 * 60000);
    assert_int_equal(p.n, 1);
    assert_string_equal(p.list[0].rec.id, "coord-1");
    done(&r);
    /* back (restarted): alive again */
    add(&r, "coord-0", "standby", 0, NULL);
    add(&r, "coord-1", "leader", 9, NULL);
    cdc_presence_merge(&p, &r.kvs, 700000);
    done(&r);
    assert_int_equal(p.n, 2);
    assert_true(p.list[0].alive && p.list[1].alive);
    /* an empty read: nobody alive (etcd lost every record), nobody forgotten yet */
    cdc_presence_merge(&p, &r.kvs, 701000);
    assert_int_equal(p.n, 2);
    assert_false(p.list[0].alive || p.list[1].alive);
    cdc_presence_close(&p);
}

/* More records than the 16 the list once held: every one is kept (no silent cap), in
 * order of id. */
static void test_many(void **state)
{
    enum { N = 40 };
    cdc_presence_t p;
    cdc_etcd_kv_t kv[N];
    char *values[N];
    cdc_etcd_kvs_t kvs = {kv, N, 0, false};
    (void)state;
    cdc_presence_init(&p, NULL, "j", "c00", "", 5);
    for (int i = 0; i < N; i++) {
        cdc_coordinator_record_t rec;
        memset(&rec, 0, sizeof(rec));
        snprintf(rec.id, sizeof(rec.id), "c%02d", N - 1 - i);
        snprintf(rec.role, sizeof(rec.role), "standby");
        values[i] = cdc_coordinator_record_json(&rec);
        memset(&kv[i], 0, sizeof(kv[i]));
        kv[i].value = values[i];
        kv[i].value_len = strlen(values[i]);
    }
    cdc_presence_merge(&p, &kvs, 1);
    assert_int_equal(p.n, N);
    assert_string_equal(p.list[0].rec.id, "c00");
    assert_string_equal(p.list[N - 1].rec.id, "c39");
    for (int i = 0; i < N; i++)
        free(values[i]);
    cdc_presence_close(&p);
    assert_int_equal(p.n, 0);
}

/* Without an etcd client the tick does nothing (a coordinator that never opened). */
static void test_tick_without_etcd(void **state)
{
    cdc_presence_t p;
    (void)state;
    memset(&p, 0, sizeof(p));
    cdc_presence_tick(&p, true, 3, 1000);
    cdc_presence_close(&p);
    assert_int_equal(p.n, 0);
    assert_false(p.written);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_into_list),    cmocka_unit_test(test_role),
        cmocka_unit_test(test_gone_and_back),     cmocka_unit_test(test_many),
        cmocka_unit_test(test_tick_without_etcd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
