/*
 * Unit tests for the capture's schema registry and markers (capture/registry.c),
 * without Kafka: reading `<prefix>._schemas` records (the newest version of each table
 * wins; records that are no document of this prefix are skipped), reading
 * `<prefix>._capture` markers (this slot's snapshot marker, set and removed; backfill
 * markers; a table's removal and re-add), numbering schema versions (the same shape keeps its
 * version, another shape is the next one, with backfill and resync from what the change did to the
 * rows and a backfill that never finished carried over), and installing a version that needs no
 * registration as a table's current schema.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture/capture.h"

#define TOPIC "pfx.public.orders"

typedef struct fixture {
    cdc_capture_config_t cfg;
    cdc_capture_t cap;
    volatile sig_atomic_t stop;
    int64_t offset; /* of the next record fed */
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->cfg.slot = "cdc_slot";
    f->cfg.topic_prefix = "pfx";
    f->cfg.partitions = 12;
    f->cap.cfg = &f->cfg;
    f->cap.stop = &f->stop;
    snprintf(f->cap.src.db, sizeof(f->cap.src.db), "shop");
    cdc_capture_status_init(&f->cap);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    cdc_capture_free(&f->cap);
    free(f);
    return 0;
}

/* One column of a test document. */
typedef struct colspec {
    const char *name;
    uint32_t oid;
    int32_t attnum;
    bool has_default;
} colspec_t;

/* A document of public.orders (topic TOPIC) with columns cols[0..n), cols[0] the key. */
static void make_doc(cdc_schema_doc_t *d, const colspec_t *cols, size_t n)
{
    memset(d, 0, sizeof(*d));
    d->format = CDC_SCHEMA_FORMAT;
    d->topic = strdup(TOPIC);
    d->pg_schema = strdup("public");
    d->pg_table = strdup("orders");
    d->replica_identity = 'd';
    d->cols = calloc(n, sizeof(*d->cols));
    d->ncols = n;
    assert_non_null(d->topic);
    assert_non_null(d->cols);
    for (size_t i = 0; i < n; i++) {
        cdc_schema_col_t *c = &d->cols[i];
        c->name = strdup(cols[i].name);
        c->pg_type = strdup(cdc_schema_pg_type_name(cols[i].oid));
        c->pg_oid = cols[i].oid;
        c->typmod = -1;
        c->key = i == 0 ? 1 : 0;
        c->nullable = i != 0;
        c->attnum = cols[i].attnum;
        c->has_default = cols[i].has_default;
        cdc_schema_map_type(c->pg_oid, c->typmod, &c->ice_type, &c->precision, &c->scale, &c->enc);
    }
}

static cdc_kafka_msg_t record(fixture_t *f, const char *key, const char *value)
{
    cdc_kafka_msg_t m = {.topic = "pfx._schemas",
                         .offset = f->offset++,
                         .key = key,
                         .key_len = key ? strlen(key) : 0,
                         .value = value,
                         .value_len = value ? strlen(value) : 0,
                         .timestamp_ms = -1};
    return m;
}

/* Feeds doc to the registry reader as the `<prefix>._schemas` record of its version. */
static void feed_schema(fixture_t *f, const cdc_schema_doc_t *doc)
{
    char key[256], *json = NULL;
    cdc_error_t e;
    cdc_kafka_msg_t m;

    assert_int_equal(cdc_schema_doc_encode(doc, &json, &e), CDC_OK);
    cdc_schema_record_key(doc->topic, doc->version, key, sizeof(key));
    m = record(f, key, json);
    cdc_registry_on_schema(&f->cap, &m);
    free(json);
}

/* A document with ids against t's latest, numbered by the registry (as
 * cdc_capture_set_schema does); returns whether it is a new version. */
static bool number(cdc_capture_table_t *t, cdc_schema_doc_t *doc)
{
    cdc_error_t e;
    assert_int_equal(cdc_schema_doc_assign_ids(t->has_latest ? &t->latest : NULL, doc, &e), CDC_OK);
    return cdc_registry_number(t, doc);
}

/* Numbers doc, registers it when new (read back as from `<prefix>._schemas`), frees it. */
static bool version(fixture_t *f, cdc_capture_table_t *t, cdc_schema_doc_t *doc)
{
    bool fresh = number(t, doc);
    if (fresh)
        feed_schema(f, doc);
    cdc_schema_doc_free(doc);
    return fresh;
}

static void feed_marker(fixture_t *f, const char *key, const char *value)
{
    cdc_kafka_msg_t m = record(f, key, value);
    m.topic = "pfx._capture";
    cdc_registry_on_marker(&f->cap, &m);
}

static const colspec_t V1[] = {{"id", CDC_PG_INT4, 1, false}};
static const colspec_t V2[] = {{"id", CDC_PG_INT4, 1, false}, {"note", CDC_PG_TEXT, 2, false}};
static const colspec_t V3[] = {
    {"id", CDC_PG_INT4, 1, false}, {"note", CDC_PG_TEXT, 2, false}, {"qty", CDC_PG_INT8, 3, false}};

/* ---- reading `<prefix>._schemas` --------------------------------------------------- */

static void test_schema_records_newest_wins(void **state)
{
    fixture_t *f = *state;
    cdc_schema_doc_t d;
    cdc_capture_table_t *t;

    make_doc(&d, V1, 1);
    d.version = 1;
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);
    t = cdc_capture_table_get(&f->cap, "public", "orders");
    assert_true(t->has_latest);
    assert_int_equal(t->latest.version, 1);

    /* a compacted topic gives no order between keys: an older version read later does
     * not replace a newer one */
    make_doc(&d, V3, 3);
    d.version = 3;
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);
    make_doc(&d, V2, 2);
    d.version = 2;
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);
    assert_int_equal(f->cap.ntables, 1);
    t = &f->cap.tables[0];
    assert_int_equal(t->latest.version, 3);
    assert_int_equal(t->latest.ncols, 3);
    assert_string_equal(t->latest.cols[2].name, "qty");
    /* the registry names the latest version; the current one comes from the stream */
    assert_false(t->has_doc);

    /* a version read again is not replaced (the worker's catalog keeps the first too) */
    make_doc(&d, V1, 1);
    d.version = 3;
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);
    assert_int_equal(f->cap.tables[0].latest.ncols, 3);
}

static void test_schema_records_skipped(void **state)
{
    fixture_t *f = *state;
    cdc_kafka_msg_t m;
    cdc_schema_doc_t d;
    char *json = NULL;
    cdc_error_t e;

    make_doc(&d, V1, 1);
    d.version = 1;
    assert_int_equal(cdc_schema_doc_encode(&d, &json, &e), CDC_OK);

    m = record(f, TOPIC "/1", NULL); /* a tombstone */
    cdc_registry_on_schema(&f->cap, &m);
    m = record(f, NULL, json); /* no key */
    cdc_registry_on_schema(&f->cap, &m);
    m = record(f, TOPIC "/1", "{\"format\":1,");
    cdc_registry_on_schema(&f->cap, &m);
    m = record(f, TOPIC "/1",
               "{\"format\":99,\"topic\":\"" TOPIC "\",\"version\":1,"
               "\"schema\":\"public\",\"table\":\"orders\",\"columns\":[]}");
    cdc_registry_on_schema(&f->cap, &m);
    /* a document that names no table */
    m = record(f, TOPIC "/1",
               "{\"format\":1,\"topic\":\"" TOPIC "\",\"version\":1,\"columns\":[]}");
    cdc_registry_on_schema(&f->cap, &m);
    assert_int_equal(f->cap.ntables, 0);

    /* another prefix's topic of the same table */
    free(d.topic);
    d.topic = strdup("other.public.orders");
    feed_schema(f, &d);
    for (size_t i = 0; i < f->cap.ntables; i++)
        assert_false(f->cap.tables[i].has_latest);

    cdc_schema_doc_free(&d);
    free(json);
}

/* ---- reading `<prefix>._capture` --------------------------------------------------- */

static void test_snapshot_marker(void **state)
{
    fixture_t *f = *state;
    cdc_capture_t *cap = &f->cap;

    feed_marker(f, "snapshot/cdc_slot",
                "{\"slot\":\"cdc_slot\",\"consistent_lsn\":\"16/B374D848\",\"mode\":\"initial\","
                "\"ts_ms\":1}");
    assert_true(cap->snapshot_marked);
    assert_true(cap->marker_lsn == 0x16B374D848ULL);

    /* a marker removed (tombstone): the snapshot is done again */
    feed_marker(f, "snapshot/cdc_slot", NULL);
    assert_false(cap->snapshot_marked);

    /* other slots' markers, and records that are no marker, change nothing */
    feed_marker(f, "snapshot/cdc_slot2", "{\"consistent_lsn\":\"0/10\"}");
    feed_marker(f, "snapshot/cdc_slo", "{\"consistent_lsn\":\"0/10\"}");
    feed_marker(f, "snapshot/other", "{\"consistent_lsn\":\"0/10\"}");
    feed_marker(f, "snapshot/cdc_slot", "{\"consistent_lsn\":");
    feed_marker(f, "snapshot/cdc_slot", "{\"consistent_lsn\":\"not an lsn\"}");
    feed_marker(f, "snapshot/cdc_slot", "{\"mode\":\"never\"}");
    feed_marker(f, NULL, "{\"consistent_lsn\":\"0/10\"}");
    assert_false(cap->snapshot_marked);
    assert_int_equal(cap->ntables, 0);

    /* the last marker read is the slot's (a re-snapshot writes a new one) */
    feed_marker(f, "snapshot/cdc_slot", "{\"consistent_lsn\":\"0/100\",\"mode\":\"never\"}");
    feed_marker(f, "snapshot/cdc_slot", "{\"consistent_lsn\":\"1/0\",\"mode\":\"initial\"}");
    assert_true(cap->snapshot_marked);
    assert_true(cap->marker_lsn == 0x100000000ULL);
    /* an unreadable record does not take it back */
    feed_marker(f, "snapshot/cdc_slot", "garbage");
    assert_true(cap->snapshot_marked);
    assert_true(cap->marker_lsn == 0x100000000ULL);
}

static void test_backfill_marker(void **state)
{
    fixture_t *f = *state;
    cdc_capture_t *cap = &f->cap;
    cdc_capture_table_t *t;

    feed_marker(f, "backfill/" TOPIC, "{\"schema\":\"public\",\"table\":\"orders\",\"version\":4}");
    assert_int_equal(cap->ntables, 1);
    t = cdc_capture_table_get(cap, "public", "orders");
    assert_int_equal(t->backfilled_version, 4);
    assert_false(cap->snapshot_marked);

    /* no table named, a tombstone, a key that is only the prefix: skipped */
    feed_marker(f, "backfill/pfx.public.items", "{\"version\":9}");
    feed_marker(f, "backfill/" TOPIC, NULL);
    feed_marker(f, "backfill/", "{\"schema\":\"public\",\"table\":\"items\",\"version\":9}");
    assert_int_equal(cap->ntables, 1);
    assert_int_equal(cap->tables[0].backfilled_version, 4);

    /* one key per table: the record read last is the one compaction keeps */
    feed_marker(f, "backfill/" TOPIC, "{\"schema\":\"public\",\"table\":\"orders\",\"version\":6}");
    assert_int_equal(cap->tables[0].backfilled_version, 6);
}

/*
 * "removed/<topic>": the table left the publication (docs/capture.md, "Removing a
 * table"), with where and when; a tombstone: it joined again. A snapshot stopped by the
 * removal ("abandoned") is not resumed; a re-add's ("truncate") truncates first.
 */
static void test_removed_marker(void **state)
{
    fixture_t *f = *state;
    cdc_capture_t *cap = &f->cap;
    cdc_capture_table_t *t;

    feed_marker(f, "removed/" TOPIC,
                "{\"schema\":\"public\",\"table\":\"orders\",\"lsn\":\"0/1A2B3C8\","
                "\"ts_ms\":1700000000000}");
    assert_int_equal(cap->ntables, 1);
    t = cdc_capture_table_get(cap, "public", "orders");
    assert_true(t->removed);
    assert_true(t->removed_lsn == 0x1A2B3C8ULL);
    assert_true(t->removed_ms == 1700000000000LL);

    /* another table's tombstone, or a key that is only the prefix: nothing */
    feed_marker(f, "removed/pfx.public.items", NULL);
    feed_marker(f, "removed/", NULL);
    feed_marker(f, "removed/pfx.public.order", NULL);
    assert_true(cap->tables[0].removed);
    /* its own tombstone: joined again */
    feed_marker(f, "removed/" TOPIC, NULL);
    assert_false(cap->tables[0].removed);

    /* an abandoned snapshot is no running one; a re-add's truncates first */
    feed_marker(f, "incremental/" TOPIC,
                "{\"schema\":\"public\",\"table\":\"orders\",\"id\":\"a1\",\"label\":"
                "\"incremental\",\"after\":[\"7\"],\"rows\":7,\"done\":false,"
                "\"abandoned\":true}");
    assert_true(cap->tables[0].isnap.marked);
    assert_false(cap->tables[0].isnap.due);
    assert_true(cap->tables[0].isnap.abandoned);
    feed_marker(f, "incremental/" TOPIC,
                "{\"schema\":\"public\",\"table\":\"orders\",\"id\":\"a2\",\"label\":"
                "\"incremental\",\"after\":null,\"rows\":0,\"done\":false,"
                "\"truncate\":true}");
    assert_true(cap->tables[0].isnap.due);
    assert_true(cap->tables[0].isnap.truncate);
    assert_false(cap->tables[0].isnap.abandoned);
    assert_null(cap->tables[0].isnap.after);
}

/* ---- numbering versions ------------------------------------------------------------ */

static void test_number_first_and_same(void **state)
{
    fixture_t *f = *state;
    cdc_capture_table_t *t = cdc_capture_table_get(&f->cap, "public", "orders");
    cdc_schema_doc_t d;

    make_doc(&d, V2, 2);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 1);
    assert_false(d.backfill); /* the first version: the snapshot reads the rows */
    assert_false(d.resync);
    assert_false(t->backfill_pending);
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);

    /* the same columns again (a new stream's Relation message): the same version */
    make_doc(&d, V2, 2);
    assert_false(number(t, &d));
    assert_int_equal(d.version, 1);
    cdc_schema_doc_free(&d);

    /* a restart reads the registry: the version is the same still */
    make_doc(&d, V2, 2);
    assert_false(version(f, t, &d));
    assert_int_equal(t->latest.version, 1);
}

static void test_number_next_versions(void **state)
{
    fixture_t *f = *state;
    cdc_capture_table_t *t = cdc_capture_table_get(&f->cap, "public", "orders");
    static const colspec_t with_default[] = {{"id", CDC_PG_INT4, 1, false},
                                             {"note", CDC_PG_TEXT, 2, false},
                                             {"qty", CDC_PG_INT8, 3, true}};
    static const colspec_t retyped[] = {{"id", CDC_PG_INT4, 1, false},
                                        {"note", CDC_PG_TEXT, 2, false},
                                        {"qty", CDC_PG_NUMERIC, 3, false}};
    static const colspec_t renamed[] = {{"id", CDC_PG_INT4, 1, false},
                                        {"remark", CDC_PG_TEXT, 2, false},
                                        {"qty", CDC_PG_NUMERIC, 3, false}};
    cdc_schema_doc_t d;

    make_doc(&d, V1, 1);
    assert_true(version(f, t, &d));

    /* a new column without a default: existing rows hold NULL, no backfill */
    make_doc(&d, V2, 2);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 2);
    assert_false(d.backfill);
    assert_false(t->backfill_pending);
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);

    /* a new column with a default rewrote every row without WAL changes */
    make_doc(&d, with_default, 3);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 3);
    assert_true(d.backfill);
    assert_false(d.resync);
    assert_true(t->backfill_pending);
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);
    t->backfilled_version = 3; /* its backfill completed */

    /* a changed type rewrote them too */
    make_doc(&d, retyped, 3);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 4);
    assert_true(d.backfill);
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);
    t->backfilled_version = 4;

    /* a rename keeps the values: a new version, no backfill */
    make_doc(&d, renamed, 3);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 5);
    assert_false(d.backfill);
    assert_false(t->backfill_pending);
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);
    assert_int_equal(t->latest.version, 5);

    /* a dropped column: a new version */
    make_doc(&d, V1, 1);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 6);
    assert_false(d.backfill);
    cdc_schema_doc_free(&d);
}

static void test_number_unfinished_backfill(void **state)
{
    fixture_t *f = *state;
    cdc_capture_table_t *t = cdc_capture_table_get(&f->cap, "public", "orders");
    static const colspec_t with_default[] = {{"id", CDC_PG_INT4, 1, false},
                                             {"note", CDC_PG_TEXT, 2, true}};
    cdc_schema_doc_t d;

    make_doc(&d, V1, 1);
    assert_true(version(f, t, &d));
    make_doc(&d, with_default, 2);
    assert_true(version(f, t, &d));
    assert_true(t->latest.backfill);

    /* the capture died before the backfill of version 2 completed (no marker): the
     * same shape keeps the version, and the backfill is still due */
    t->backfill_pending = false;
    make_doc(&d, with_default, 2);
    assert_false(number(t, &d));
    assert_int_equal(d.version, 2);
    assert_true(t->backfill_pending);
    assert_false(d.resync);
    cdc_schema_doc_free(&d);

    /* a further change carries it into the next version */
    make_doc(&d, V3, 3);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 3);
    assert_true(d.backfill);
    assert_true(t->backfill_pending);
    cdc_schema_doc_free(&d);

    /* with its marker read, nothing is due */
    t->backfilled_version = 2;
    make_doc(&d, with_default, 2);
    assert_false(number(t, &d));
    assert_false(t->backfill_pending);
    cdc_schema_doc_free(&d);
    make_doc(&d, V3, 3);
    assert_true(number(t, &d));
    assert_false(d.backfill);
    cdc_schema_doc_free(&d);
}

static void test_number_partitions(void **state)
{
    fixture_t *f = *state;
    cdc_capture_table_t *t = cdc_capture_table_get(&f->cap, "public", "orders");
    static const uint32_t two[] = {16390, 16395}, one[] = {16390}, three[] = {16390, 16395, 16400};
    cdc_schema_doc_t d;

    make_doc(&d, V2, 2);
    assert_int_equal(cdc_schema_doc_set_parts(&d, two, 2), CDC_OK);
    assert_true(version(f, t, &d));
    assert_true(t->latest.parts_known);

    /* the same partitions: the same version */
    make_doc(&d, V2, 2);
    assert_int_equal(cdc_schema_doc_set_parts(&d, two, 2), CDC_OK);
    assert_false(number(t, &d));
    assert_int_equal(d.version, 1);
    cdc_schema_doc_free(&d);

    /* a partition attached: its rows came without WAL changes */
    make_doc(&d, V2, 2);
    assert_int_equal(cdc_schema_doc_set_parts(&d, three, 3), CDC_OK);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 2);
    assert_true(d.backfill);
    assert_false(d.resync);
    cdc_schema_doc_free(&d);

    /* a partition detached: its rows left, the mirror is truncated before the backfill */
    make_doc(&d, V2, 2);
    assert_int_equal(cdc_schema_doc_set_parts(&d, one, 1), CDC_OK);
    assert_true(number(t, &d));
    assert_int_equal(d.version, 2);
    assert_true(d.resync);
    assert_true(d.backfill);
    assert_true(t->backfill_pending);
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);

    /* that resync not done when the capture restarted: still due with the same shape */
    make_doc(&d, V2, 2);
    assert_int_equal(cdc_schema_doc_set_parts(&d, one, 1), CDC_OK);
    assert_false(number(t, &d));
    assert_int_equal(d.version, 2);
    assert_true(d.resync);
    assert_true(t->backfill_pending);
    cdc_schema_doc_free(&d);
}

/* ---- installing a schema ----------------------------------------------------------- */

static void test_set_schema_known_version(void **state)
{
    fixture_t *f = *state;
    cdc_capture_table_t *t = cdc_capture_table_get(&f->cap, "public", "orders");
    cdc_schema_doc_t d;
    cdc_error_t e;
    char *head;

    make_doc(&d, V1, 1);
    assert_true(version(f, t, &d));
    make_doc(&d, V2, 2);
    assert_true(version(f, t, &d));

    /* the registered shape needs no record (so no Kafka: its topic is known too) */
    t->topic_ready = true;
    make_doc(&d, V2, 2);
    free(d.topic);
    d.topic = NULL; /* the table names it */
    assert_int_equal(cdc_capture_set_schema(&f->cap, t, &d, &e), CDC_OK);
    assert_null(d.cols); /* moved into the table */
    assert_true(t->has_doc);
    assert_int_equal(t->doc.version, 2);
    assert_string_equal(t->doc.topic, TOPIC);
    assert_int_equal(t->doc.cols[1].field_id, t->latest.cols[1].field_id);
    /* the encoder's caches follow the version */
    assert_non_null(t->col_names);
    assert_int_equal(t->col_name_lens[0], strlen("\"id\":"));
    assert_memory_equal(t->col_names[0], "\"id\":", t->col_name_lens[0]);
    assert_memory_equal(t->col_names[1], "\"note\":", t->col_name_lens[1]);
    head = strndup(t->source_head.data, t->source_head.len);
    assert_non_null(strstr(head, "\"db\":\"shop\""));
    assert_non_null(strstr(head, "\"table\":\"orders\""));
    assert_non_null(strstr(head, "\"schema_version\":2"));
    free(head);

    /* the registry was read again meanwhile (a takeover) with a newer version of the
     * same shape: the table follows the newest */
    make_doc(&d, V2, 2);
    d.version = 7;
    assert_int_equal(cdc_schema_doc_assign_ids(&t->latest, &d, &e), CDC_OK);
    feed_schema(f, &d);
    cdc_schema_doc_free(&d);
    make_doc(&d, V2, 2);
    assert_int_equal(cdc_capture_set_schema(&f->cap, t, &d, &e), CDC_OK);
    assert_int_equal(t->doc.version, 7);
    head = strndup(t->source_head.data, t->source_head.len);
    assert_non_null(strstr(head, "\"schema_version\":7"));
    assert_null(strstr(head, "\"schema_version\":2"));
    free(head);
}

static void test_set_schema_failure(void **state)
{
    fixture_t *f = *state;
    cdc_capture_table_t *t = cdc_capture_table_get(&f->cap, "public", "orders");
    cdc_schema_doc_t d;
    cdc_error_t e;

    /* the topic cannot be ensured: the document is freed, the table keeps what it had */
    f->cfg.kafka.bootstrap = "127.0.0.1:1";
    f->cfg.kafka.properties = "no.such.property=1";
    make_doc(&d, V1, 1);
    assert_int_equal(cdc_capture_set_schema(&f->cap, t, &d, &e), CDC_ERR_CONFIG);
    assert_null(d.cols);
    assert_null(d.topic);
    assert_false(t->has_doc);
    assert_false(t->has_latest);
    assert_false(t->topic_ready);
    assert_null(t->col_names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_schema_records_newest_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_records_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_marker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backfill_marker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removed_marker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_number_first_and_same, setup, teardown),
        cmocka_unit_test_setup_teardown(test_number_next_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_number_unfinished_backfill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_number_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_schema_known_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_schema_failure, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
