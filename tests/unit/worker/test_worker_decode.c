/*
 * Unit tests for worker/decode.h (decode.c, catalog.c, convert.c, row.c): the capture's events
 * (schema by registry version), Debezium JsonConverter envelopes with and without schemas, the
 * flattened ExtractNewRecordState form, type mapping, TOAST markers and DLQ classification.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/unit/worker/worker_fixtures.h"
#include "worker/decode.h"
#include "worker/decode_int.h"

static const char *TOPIC = "cdc.public.orders";

static int col(const cdc_source_schema_t *s, const char *name)
{
    for (size_t i = 0; i < s->ncols; i++)
        if (strcmp(s->cols[i].name, name) == 0)
            return (int)i;
    fail_msg("no column %s", name);
    return -1;
}

static cdc_err_t decode_str(cdc_catalog_t *cat, const char *topic, const char *key,
                            const char *value, int64_t version, cdc_change_t *c,
                            cdc_decode_error_t *de)
{
    cdc_decode_input_t in = {
        topic, 3, 100, key, key ? strlen(key) : 0, value, value ? strlen(value) : 0, version};
    return cdc_decode(cat, NULL, &in, c, de);
}

static cdc_err_t decode_fixture(cdc_catalog_t *cat, const char *topic, const char *key,
                                const char *name, int64_t version, cdc_change_t *c,
                                cdc_decode_error_t *de)
{
    char *v = fixture(name, NULL);
    cdc_err_t rc = decode_str(cat, topic, key, v, version, c, de);
    free(v);
    return rc;
}

/* A source time in milliseconds beyond the microsecond range saturates instead of
 * overflowing (found by tests/fuzz/decode.c), in the flattened form and the envelope. */
static void test_source_ts_ms_out_of_range(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    const char *flat = "{\"id\":7,\"__op\":\"d\",\"__lsn\":25000100,"
                       "\"__source_ts_ms\":12709287600600000,\"__deleted\":\"true\"}";
    assert_int_equal(decode_str(cat, TOPIC, "{\"id\":7}", flat, 1, &c, &de), CDC_OK);
    assert_true(c.source_ts_us == INT64_MAX);
    cdc_change_clear(&c);
    const char *env = "{\"before\":{\"id\":7},\"after\":null,\"source\":{\"lsn\":25000100,"
                      "\"ts_ms\":-12709287600600000},\"op\":\"d\"}";
    assert_int_equal(decode_str(cat, TOPIC, "{\"id\":7}", env, 1, &c, &de), CDC_OK);
    assert_true(c.source_ts_us == INT64_MIN);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

static void test_capture_insert(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    assert_int_equal(decode_fixture(cat, TOPIC, "{\"id\":42}", "capture_insert.json", 1, &c, &de),
                     CDC_OK);
    assert_int_equal(c.op, CDC_OP_CREATE);
    assert_int_equal(c.lsn, 24023928);
    assert_int_equal(c.commit_lsn, 24024000);
    assert_int_equal(c.tx_id, 771);
    assert_int_equal(c.source_ts_us, 1709287200123000LL);
    assert_int_equal(c.schema->version, 1);
    assert_string_equal(c.schema->ns, "public");
    assert_string_equal(c.schema->table, "orders");
    const cdc_source_schema_t *s = c.schema;
    assert_int_equal(s->nkey, 1);
    assert_int_equal(c.after.vals[col(s, "id")].u.i, 42);
    assert_memory_equal(c.after.vals[col(s, "customer")].bytes, "ada", 3);
    assert_true(c.after.vals[col(s, "amount")].u.dec == 1250);
    /* 2024-03-01T10:00:00.123456Z */
    assert_int_equal(c.after.vals[col(s, "created")].u.i, 1709287200123456LL);
    assert_int_equal(s->cols[col(s, "created")].type, CDC_ICE_TIMESTAMPTZ);
    assert_false(s->cols[col(s, "id")].optional);
    assert_null(c.before.vals);
    assert_non_null(c.entity);
    assert_int_equal(c.partition, 3);
    assert_int_equal(c.offset, 100);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

static void test_capture_toast_and_field_ids(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    assert_int_equal(
        decode_fixture(cat, TOPIC, "{\"id\":42}", "capture_update_toast.json", 2, &c, &de), CDC_OK);
    const cdc_source_schema_t *s = c.schema, *v1 = cdc_catalog_get(cat, TOPIC, 1);
    assert_int_equal(s->version, 2);
    assert_int_equal(c.after.vals[col(s, "note")].kind, CDC_VAL_TOAST);
    assert_int_equal(c.after.vals[col(s, "status")].kind, CDC_VAL_NULL);
    /* Field ids stable across versions; the added column gets a new id. */
    for (size_t i = 0; i < v1->ncols; i++)
        assert_int_equal(v1->cols[i].field_id, s->cols[col(s, v1->cols[i].name)].field_id);
    assert_int_equal(s->cols[col(s, "status")].field_id, 6);
    assert_int_not_equal(s->schema_id, v1->schema_id);
    assert_ptr_equal(cdc_catalog_latest(cat, TOPIC), s);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

static void test_debezium_with_schema(void **state)
{
    (void)state;
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_change_t c;
    cdc_decode_error_t de;
    char *key = fixture("debezium_key_with_schema.json", NULL);
    const char *topic = "dbserver1.inventory.customers";
    assert_int_equal(decode_fixture(cat, topic, key, "debezium_with_schema.json", -1, &c, &de),
                     CDC_OK);
    const cdc_source_schema_t *s = c.schema;
    assert_string_equal(s->ns, "inventory");
    assert_string_equal(s->table, "customers");
    assert_int_equal(s->nkey, 1);
    assert_string_equal(s->cols[s->key_cols[0]].name, "id");
    assert_int_equal(s->cols[col(s, "id")].type, CDC_ICE_INT);
    assert_int_equal(s->cols[col(s, "balance")].type, CDC_ICE_DECIMAL);
    assert_true(c.after.vals[col(s, "balance")].u.dec == 12345); /* "MDk=" = 0x3039 */
    assert_int_equal(s->cols[col(s, "updated")].type, CDC_ICE_TIMESTAMP);
    assert_int_equal(c.after.vals[col(s, "updated")].u.i, 1709287200123456LL);
    assert_int_equal(s->cols[col(s, "born")].type, CDC_ICE_DATE);
    assert_int_equal(c.after.vals[col(s, "born")].u.i, 19000);
    assert_int_equal(s->cols[col(s, "ref")].type, CDC_ICE_UUID);
    assert_int_equal(c.after.vals[col(s, "ref")].len, 16);
    assert_int_equal(c.after.vals[col(s, "ref")].bytes[0], 0xa0);
    assert_int_equal(c.commit_lsn, 24023800); /* from source.sequence */
    assert_int_equal(c.lsn, 24023928);
    assert_int_equal(c.tx_id, 555);
    cdc_change_clear(&c);
    /* The same embedded schema again resolves to the same catalog entry. */
    assert_int_equal(decode_fixture(cat, topic, key, "debezium_with_schema.json", -1, &c, &de),
                     CDC_OK);
    assert_ptr_equal(c.schema, s);
    cdc_change_clear(&c);
    free(key);
    cdc_catalog_free(cat);
}

static void test_debezium_without_schema(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    /* No header: the topic's latest registered schema gives the types. */
    assert_int_equal(
        decode_fixture(cat, TOPIC, "{\"id\":42}", "debezium_no_schema_delete.json", -1, &c, &de),
        CDC_OK);
    assert_int_equal(c.op, CDC_OP_DELETE);
    assert_null(c.after.vals);
    assert_int_equal(c.before.vals[col(c.schema, "id")].u.i, 42);
    assert_int_equal(c.commit_lsn, 24040000);
    assert_int_equal(c.lsn, 24040100);
    cdc_change_clear(&c);
    /* Without any registered schema the event cannot be typed. */
    assert_int_equal(decode_fixture(cat, "other.public.t", "{\"id\":1}",
                                    "debezium_no_schema_delete.json", -1, &c, &de),
                     CDC_ERR_INVALID);
    assert_int_equal(de.cls, CDC_DLQ_UNKNOWN_SCHEMA);
    cdc_catalog_free(cat);
}

static void test_flattened(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    assert_int_equal(decode_fixture(cat, "pg.public.orders", "{\"id\":7}",
                                    "debezium_flattened_with_schema.json", -1, &c, &de),
                     CDC_OK);
    assert_int_equal(c.op, CDC_OP_UPDATE);
    assert_int_equal(c.lsn, 25000000);
    assert_int_equal(c.commit_lsn, 25000000);
    assert_int_equal(c.source_ts_us, 1709287500000000LL);
    assert_int_equal(c.schema->ncols, 2); /* __ fields are metadata, not columns */
    assert_int_equal(c.after.vals[col(c.schema, "customer")].kind, CDC_VAL_TOAST);
    cdc_change_clear(&c);
    assert_int_equal(
        decode_fixture(cat, TOPIC, "{\"id\":7}", "debezium_flattened_delete.json", -1, &c, &de),
        CDC_OK);
    assert_int_equal(c.op, CDC_OP_DELETE);
    assert_int_equal(c.before.vals[col(c.schema, "id")].u.i, 7);
    assert_null(c.after.vals);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

static void test_generic_schema(void **state)
{
    (void)state;
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    cdc_change_t c;
    cdc_decode_error_t de;
    size_t n;
    char *g = fixture("generic_schema.json", &n);
    assert_int_equal(cdc_catalog_register_json(cat, "pg.inventory.items", 1, g, n, &e), CDC_OK);
    free(g);
    assert_int_equal(decode_str(cat, "pg.inventory.items", "{\"sku\":\"A-1\"}",
                                "{\"op\":\"r\",\"after\":{\"sku\":\"A-1\",\"qty\":3,"
                                "\"price\":\"1.5\",\"seen\":1709287200123},"
                                "\"source\":{\"lsn\":5}}",
                                -1, &c, &de),
                     CDC_OK);
    assert_int_equal(c.op, CDC_OP_READ);
    assert_string_equal(c.schema->ns, "inventory");
    assert_true(c.after.vals[2].u.dec == 1500);
    assert_int_equal(c.after.vals[3].u.i, 1709287200123000LL); /* millis -> micros */
    assert_int_equal(c.commit_lsn, 5);                         /* no sequence: lsn */
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

static void test_tombstone(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    assert_int_equal(decode_str(cat, TOPIC, "{\"id\":1}", NULL, -1, &c, &de), CDC_OK);
    assert_true(c.tombstone);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

static void expect_dlq(cdc_catalog_t *cat, const char *value, int64_t version, cdc_dlq_class_t cls)
{
    cdc_change_t c;
    cdc_decode_error_t de;
    assert_int_equal(decode_str(cat, TOPIC, "{\"id\":1}", value, version, &c, &de),
                     CDC_ERR_INVALID);
    if (de.cls != cls)
        fail_msg("expected %s, got %s (%s) for %s", cdc_dlq_class_name(cls),
                 cdc_dlq_class_name(de.cls), de.msg, value);
    assert_true(de.msg[0] != '\0');
    assert_null(c.entity);
}

/* Debezium's truncate (one event, no key, in one partition; no schema version) is a
 * floor: applied in its own partition, and by position in the others (docs/worker.md,
 * "Debezium's truncate"), whatever the topic's partition count. */
static void test_debezium_truncate(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    const char *v = "{\"before\":null,\"after\":null,\"op\":\"t\",\"ts_ms\":1700000000000,"
                    "\"source\":{\"connector\":\"postgresql\",\"schema\":\"public\","
                    "\"table\":\"orders\",\"lsn\":5000,\"txId\":9,\"ts_ms\":1700000000000}}";
    cdc_decode_input_t in = {TOPIC, 0, 7, NULL, 0, v, strlen(v), -1, NULL, NULL};
    cdc_change_t c;
    cdc_decode_error_t de;

    for (int32_t p = 0; p < 12; p += 5) {
        in.partition = p;
        assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), CDC_OK);
        assert_int_equal(c.op, CDC_OP_TRUNCATE);
        assert_true(c.floor);
        assert_false(c.changelog_only);
        assert_int_equal(c.partition, p);
        assert_int_equal(c.lsn, 5000);
        assert_int_equal(c.commit_lsn, 5000);
        assert_int_equal(c.tx_id, 9);
        assert_int_equal(c.entity_len, strlen("public.orders") + 1);
        assert_memory_equal(c.entity, "public.orders", c.entity_len);
        cdc_change_clear(&c);
    }
    cdc_catalog_free(cat);
}

/* The capture's schema marker (op "s", docs/events.md): no key, no rows, the version it
 * names; the entity is the table identity, and it is no floor. */
static void test_schema_marker(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    const char *v = "{\"before\":null,\"after\":null,\"op\":\"s\",\"ts_ms\":1700000000000,"
                    "\"source\":{\"connector\":\"cdc-capture\",\"schema\":\"public\","
                    "\"table\":\"orders\",\"schema_version\":2,\"lsn\":6000,\"txId\":10,"
                    "\"ts_ms\":1700000000000,\"sequence\":\"[\\\"6100\\\",\\\"6000\\\"]\","
                    "\"snapshot\":\"false\"}}";
    cdc_decode_input_t in = {TOPIC, 4, 9, NULL, 0, v, strlen(v), -1, NULL, NULL};
    cdc_change_t c;
    cdc_decode_error_t de;

    assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), CDC_OK);
    assert_int_equal(c.op, CDC_OP_SCHEMA);
    assert_int_equal(c.schema->version, 2);
    assert_false(c.floor);
    assert_false(c.backfill);
    assert_null(c.after.vals);
    assert_null(c.before.vals);
    assert_int_equal(c.lsn, 6000);
    assert_int_equal(c.commit_lsn, 6100);
    assert_int_equal(c.entity_len, strlen("public.orders") + 1);
    assert_memory_equal(c.entity, "public.orders", c.entity_len);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

/* An entity key read back as a row (floors sweep rows by their state key alone): every
 * key column, of the types a key has, with the others null; a key that is not the
 * schema's is refused. cdc_catalog_keyed finds the table's latest keyed schema. */
static void test_entity_row(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    cdc_error_t e;
    cdc_row_t row;
    char *doc = fixture("capture_schema_v2.json", NULL), *k = strstr(doc, "\"key\":[\"id\"]");
    assert_non_null(k);
    /* version 3: key (customer, id), customer a string */
    char v3[8192];
    snprintf(v3, sizeof(v3), "%.*s\"key\":[\"customer\",\"id\"]%s", (int)(k - doc), doc,
             k + strlen("\"key\":[\"id\"]"));
    char *ver = strstr(v3, "\"version\":2");
    assert_non_null(ver);
    ver[10] = '3';
    char *ck = strstr(v3, "\"customer\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,"
                          "\"nullable\":true,\"key\":0");
    assert_non_null(ck);
    static const char key2[] = "\"nullable\":false,\"key\":2"; /* one byte longer */
    char *nk = strstr(ck, "\"nullable\":true,\"key\":0");
    memmove(nk + 1, nk, strlen(nk) + 1);
    memcpy(nk, key2, strlen(key2));
    free(doc);
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 3, v3, strlen(v3), &e), CDC_OK);
    const cdc_source_schema_t *s3 = cdc_catalog_keyed(cat, "public.orders");
    assert_non_null(s3);
    assert_int_equal(s3->version, 3);
    assert_int_equal(s3->nkey, 2);
    assert_null(cdc_catalog_keyed(cat, "public.order"));
    assert_null(cdc_catalog_keyed(cat, "other.orders"));

    assert_int_equal(decode_str(cat, TOPIC, NULL,
                                "{\"op\":\"c\",\"after\":{\"id\":-42,\"customer\":\"acme\","
                                "\"note\":\"x\"},\"source\":{\"lsn\":1}}",
                                3, &c, &de),
                     CDC_OK);
    assert_true(cdc_decode_entity_row(s3, c.entity, c.entity_len, &row));
    for (size_t i = 0; i < s3->ncols; i++) {
        const cdc_val_t *v = &row.vals[i];
        if (strcmp(s3->cols[i].name, "id") == 0) {
            assert_int_equal(v->kind, CDC_VAL_SET);
            assert_int_equal(v->u.i, -42);
        } else if (strcmp(s3->cols[i].name, "customer") == 0) {
            assert_int_equal(v->kind, CDC_VAL_SET);
            assert_int_equal(v->len, 4);
            assert_memory_equal(v->bytes, "acme", 4);
        } else {
            assert_int_equal(v->kind, CDC_VAL_NULL);
        }
    }
    cdc_row_clear(&row);
    /* cut short, or read with another key (version 2: id alone) */
    assert_false(cdc_decode_entity_row(s3, c.entity, c.entity_len - 1, &row));
    assert_null(row.vals);
    assert_false(
        cdc_decode_entity_row(cdc_catalog_get(cat, TOPIC, 2), c.entity, c.entity_len, &row));
    assert_false(cdc_decode_entity_row(s3, (const uint8_t *)"public.orders", 13, &row));
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

/* Decodes value (an insert of id 1): kept, with `nulled` columns null, the first named
 * `first` in *de (class type_mismatch). */
static void expect_nulled(cdc_catalog_t *cat, const char *value, const char *first, unsigned nulled)
{
    cdc_change_t c;
    cdc_decode_error_t de;
    char quoted[64];
    assert_int_equal(decode_str(cat, TOPIC, "{\"id\":1}", value, 1, &c, &de), CDC_OK);
    assert_int_equal(c.nulled, nulled);
    assert_int_equal(de.cls, CDC_DLQ_TYPE_MISMATCH);
    snprintf(quoted, sizeof(quoted), "column \"%s\"", first);
    assert_non_null(strstr(de.msg, quoted));
    assert_non_null(c.entity);
    for (size_t i = 0; i < c.schema->ncols; i++)
        if (strcmp(c.schema->cols[i].name, "id") == 0)
            assert_int_equal(c.after.vals[i].kind, CDC_VAL_SET);
        else if (strcmp(c.schema->cols[i].name, first) == 0)
            assert_int_equal(c.after.vals[i].kind, CDC_VAL_NULL);
    cdc_change_clear(&c);
}

static void test_dlq_classes(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    expect_dlq(cat, "{\"op\":\"c\",\"after\":{\"id\":", 1, CDC_DLQ_MALFORMED_JSON);
    expect_dlq(cat, "[1,2]", 1, CDC_DLQ_MALFORMED_JSON);
    expect_dlq(cat, "{\"op\":\"c\",\"after\":{\"customer\":\"x\"},\"source\":{\"lsn\":1}}", 1,
               CDC_DLQ_MISSING_KEY);
    expect_dlq(cat, "{\"op\":\"c\",\"after\":{\"id\":null},\"source\":{\"lsn\":1}}", 1,
               CDC_DLQ_TYPE_MISMATCH); /* key declared not null */
    expect_dlq(cat, "{\"op\":\"x\",\"after\":{\"id\":1},\"source\":{\"lsn\":1}}", 1,
               CDC_DLQ_UNKNOWN_OP);
    {
        /* from the capture (header version): applied; entity = the table identity */
        cdc_change_t c;
        cdc_decode_error_t de;
        assert_int_equal(decode_str(cat, TOPIC, NULL,
                                    "{\"before\":null,\"after\":null,\"op\":\"t\",\"source\":{"
                                    "\"lsn\":7,\"sequence\":\"[\\\"9\\\",\\\"7\\\"]\"}}",
                                    1, &c, &de),
                         CDC_OK);
        assert_int_equal(c.op, CDC_OP_TRUNCATE);
        assert_int_equal(c.lsn, 7);
        assert_int_equal(c.commit_lsn, 9);
        assert_null(c.after.vals);
        assert_false(c.floor); /* in every partition: not a floor */
        assert_int_equal(c.entity_len, strlen("public.orders") + 1);
        assert_memory_equal(c.entity, "public.orders", c.entity_len);
        cdc_change_clear(&c);
    }
    expect_dlq(cat, "{\"op\":\"c\",\"after\":{\"id\":\"one\"},\"source\":{\"lsn\":1}}", 1,
               CDC_DLQ_TYPE_MISMATCH);
    /* a value a column that is neither key nor required cannot hold: the row is kept,
     * the column null, the first such column named for the dead letter */
    expect_nulled(cat, "{\"op\":\"c\",\"after\":{\"id\":1,\"amount\":\"1.234\"},\"source\":{}}",
                  "amount", 1); /* scale 2 cannot hold 1.234 */
    expect_nulled(cat,
                  "{\"op\":\"c\",\"after\":{\"id\":1,\"created\":\"yesterday\",\"amount\":\"x\"},"
                  "\"source\":{}}",
                  "amount", 2);
    expect_dlq(cat, "{\"op\":\"c\",\"after\":{\"id\":1},\"source\":{\"lsn\":1}}", 9,
               CDC_DLQ_UNKNOWN_SCHEMA);

    cdc_change_t c;
    cdc_decode_error_t de;
    cdc_decode_options_t o = {.max_record_bytes = 16};
    const char *v = "{\"op\":\"c\",\"after\":{\"id\":1},\"source\":{\"lsn\":1}}";
    cdc_decode_input_t in = {TOPIC, 0, 5, "{\"id\":1}", 8, v, strlen(v), 1};
    assert_int_equal(cdc_decode(cat, &o, &in, &c, &de), CDC_ERR_INVALID);
    assert_int_equal(de.cls, CDC_DLQ_OVERSIZED);
    cdc_catalog_free(cat);
}

/* Header lookups done by the decoder (header_version callback). */
static int header_calls;

static int64_t header_two(const void *arg)
{
    (void)arg;
    header_calls++;
    return 2;
}

static void test_schema_version_source(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    const char *with = "{\"before\":null,\"after\":{\"id\":1},\"source\":{\"schema\":\"public\","
                       "\"table\":\"orders\",\"schema_version\":1,\"lsn\":5},\"op\":\"c\"}";
    const char *without =
        "{\"before\":null,\"after\":{\"id\":1},\"source\":{\"lsn\":5},\"op\":\"c\"}";
    cdc_decode_input_t in = {TOPIC,        0,  1,          "{\"id\":1}", 8, with,
                             strlen(with), -1, header_two, NULL};

    /* the envelope's version wins, and the header is not looked up */
    header_calls = 0;
    assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), CDC_OK);
    assert_int_equal(c.schema->version, 1);
    assert_int_equal(header_calls, 0);
    cdc_change_clear(&c);
    /* without one, the header is read (once) */
    in.value = without;
    in.value_len = strlen(without);
    assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), CDC_OK);
    assert_int_equal(c.schema->version, 2);
    assert_int_equal(header_calls, 1);
    cdc_change_clear(&c);
    /* an unknown envelope version is reported with the version, for the worker's retry */
    expect_dlq(cat,
               "{\"op\":\"c\",\"after\":{\"id\":1},\"source\":{\"schema_version\":7,\"lsn\":1}}",
               -1, CDC_DLQ_UNKNOWN_SCHEMA);
    assert_int_equal(
        decode_str(cat, TOPIC, "{\"id\":1}",
                   "{\"op\":\"c\",\"after\":{\"id\":1},\"source\":{\"schema_version\":7}}", -1, &c,
                   &de),
        CDC_ERR_INVALID);
    assert_int_equal(de.schema_version, 7);
    /* a truncate that names its version comes from the capture: applied */
    assert_int_equal(
        decode_str(cat, TOPIC, NULL,
                   "{\"before\":null,\"after\":null,\"op\":\"t\",\"source\":{"
                   "\"schema_version\":1,\"lsn\":7,\"sequence\":\"[\\\"9\\\",\\\"7\\\"]\"}}",
                   -1, &c, &de),
        CDC_OK);
    assert_int_equal(c.op, CDC_OP_TRUNCATE);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

static void test_row_image_roundtrip(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    uint8_t *img;
    size_t len;
    cdc_val_t v;
    assert_int_equal(decode_fixture(cat, TOPIC, "{\"id\":42}", "capture_insert.json", 1, &c, &de),
                     CDC_OK);
    assert_true(cdc_row_serialize(&c.after, &img, &len));
    const cdc_source_schema_t *s = c.schema;
    assert_int_equal(cdc_row_image_lookup(img, len, s->cols[col(s, "note")].field_id, &v), 1);
    assert_int_equal(v.len, 5);
    assert_memory_equal(v.bytes, "hello", 5);
    free(v.bytes);
    assert_int_equal(cdc_row_image_lookup(img, len, s->cols[col(s, "amount")].field_id, &v), 1);
    assert_true(v.u.dec == 1250);
    assert_int_equal(cdc_row_image_lookup(img, len, 99, &v), 0);
    assert_int_equal(cdc_row_image_lookup(img, len - 3, 99, &v), -1);
    free(img);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
}

/*
 * List and struct columns (docs/events.md, "Values"): a list's JSON array text is kept as
 * the nested value; a composite's PostgreSQL text (quotes, NULL fields, a nested
 * composite, a date, a decimal) becomes the struct's nested value; values that do not
 * fit are type mismatches that say why.
 */
static void test_lists_and_structs(void **state)
{
    static const char doc[] =
        "{\"format\":1,\"topic\":\"cdc.public.nt\",\"schema\":\"public\",\"table\":\"nt\","
        "\"version\":1,\"relid\":1,\"replica_identity\":\"default\",\"key\":[\"id\"],"
        "\"columns\":[{\"name\":\"id\",\"pg_oid\":23,\"pg_type\":\"int4\",\"typmod\":-1,"
        "\"nullable\":false,\"key\":1,\"iceberg\":\"int\",\"encoding\":\"int\",\"attnum\":1,"
        "\"field_id\":1},{\"name\":\"grid\",\"pg_oid\":1007,\"pg_type\":\"_int4\",\"typmod\":"
        "-1,\"nullable\":true,\"key\":0,\"iceberg\":{\"type\":\"list\",\"element-id\":4,"
        "\"element\":{\"type\":\"list\",\"element-id\":5,\"element\":\"int\","
        "\"element-required\":false},\"element-required\":false},\"encoding\":\"json_array\","
        "\"elem_oid\":23,\"attnum\":2,\"field_id\":2},{\"name\":\"p\",\"pg_oid\":16400,"
        "\"pg_type\":\"public.place\",\"typmod\":-1,\"nullable\":true,\"key\":0,\"iceberg\":{"
        "\"type\":\"struct\",\"fields\":[{\"id\":6,\"name\":\"s\",\"required\":false,"
        "\"type\":\"string\"},{\"id\":7,\"name\":\"n\",\"required\":false,\"type\":\"int\"},"
        "{\"id\":8,\"name\":\"g\",\"required\":false,\"type\":{\"type\":\"struct\",\"fields\":"
        "[{\"id\":9,\"name\":\"ok\",\"required\":false,\"type\":\"boolean\"}]}},{\"id\":10,"
        "\"name\":\"d\",\"required\":false,\"type\":\"date\"},{\"id\":11,\"name\":\"m\","
        "\"required\":false,\"type\":\"decimal(6,2)\"}]},\"encoding\":\"record\",\"attnum\":3,"
        "\"field_id\":3}],\"last_field_id\":11}";
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    cdc_error_t e;

    (void)state;
    if (cdc_catalog_register_json(cat, "cdc.public.nt", 1, doc, strlen(doc), &e) != CDC_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(
        decode_str(cat, "cdc.public.nt", "{\"id\":1}",
                   "{\"op\":\"c\",\"after\":{\"id\":1,\"grid\":\"[[1,null],[2,3]]\",\"p\":"
                   "\"(\\\"a "
                   "\\\"\\\"b\\\"\\\"\\\",7,\\\"(t)\\\",2024-02-29,-1.5)\"},\"source\":{\"lsn\":1,"
                   "\"schema_version\":1}}",
                   1, &c, &de),
        CDC_OK);
    const cdc_source_schema_t *s = c.schema;
    const cdc_val_t *g = &c.after.vals[col(s, "grid")], *p = &c.after.vals[col(s, "p")];
    assert_int_equal(s->cols[col(s, "grid")].type, CDC_ICE_LIST);
    assert_memory_equal(g->bytes, "[[1,null],[2,3]]", g->len);
    static const char want[] =
        "{\"s\":\"a \\\"b\\\"\",\"n\":7,\"g\":{\"ok\":true},\"d\":19782,\"m\":\"-1.50\"}";
    assert_int_equal(p->len, strlen(want));
    assert_memory_equal(p->bytes, want, p->len);
    cdc_change_clear(&c);

    /* NULL fields, an empty string, a null struct */
    assert_int_equal(decode_str(cat, "cdc.public.nt", "{\"id\":2}",
                                "{\"op\":\"c\",\"after\":{\"id\":2,\"grid\":null,\"p\":"
                                "\"(\\\"\\\",,,,)\"},\"source\":{\"lsn\":2,\"schema_version\":1}}",
                                1, &c, &de),
                     CDC_OK);
    p = &c.after.vals[col(c.schema, "p")];
    assert_memory_equal(p->bytes, "{\"s\":\"\",\"n\":null,\"g\":null,\"d\":null,\"m\":null}",
                        p->len);
    assert_int_equal(c.after.vals[col(c.schema, "grid")].kind, CDC_VAL_NULL);
    cdc_change_clear(&c);

    /* a 1-D value in the 2-D column; a decimal with too many digits; a struct's text
     * with a field too many: each a value its column cannot hold, so the row is kept with
     * that column null and the reason names it (docs/worker.md, "Values no Iceberg type
     * holds") */
    static const struct {
        const char *id, *col, *value, *why;
    } bad[] = {
        {"3", "grid", "\"grid\":\"[1,2]\"", "expects list (\"element\" expects a list)"},
        {"4", "p", "\"p\":\"(,,,,1.234)\"", NULL},
        {"5", "p", "\"p\":\"(,,,,,)\"", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char key[32], value[256];
        snprintf(key, sizeof(key), "{\"id\":%s}", bad[i].id);
        snprintf(value, sizeof(value),
                 "{\"op\":\"c\",\"after\":{\"id\":%s,%s},\"source\":{\"lsn\":%s,"
                 "\"schema_version\":1}}",
                 bad[i].id, bad[i].value, bad[i].id);
        assert_int_equal(decode_str(cat, "cdc.public.nt", key, value, 1, &c, &de), CDC_OK);
        assert_int_equal(c.nulled, 1);
        assert_int_equal(de.cls, CDC_DLQ_TYPE_MISMATCH);
        if (bad[i].why != NULL)
            assert_non_null(strstr(de.msg, bad[i].why));
        assert_int_equal(c.after.vals[col(c.schema, bad[i].col)].kind, CDC_VAL_NULL);
        cdc_change_clear(&c);
    }
    cdc_catalog_free(cat);
}

/* A list of a type the capture sends as PostgreSQL text in an array's elements (date,
 * time, timestamp, timestamptz, bytea; json as its text) and lists in a composite: the
 * worker converts them to the nested value form, infinities to the sentinels, NULL
 * elements and nested lists kept (docs/capture.md, "Types"). */
static void test_lists_of_text_elements(void **state)
{
    static const char *const cols[][2] = {
        {"ds",
         "{\"type\":\"list\",\"element-id\":20,\"element\":\"date\",\"element-required\":false}"},
        {"ts", "{\"type\":\"list\",\"element-id\":21,\"element\":\"timestamp\",\"element-"
               "required\":false}"},
        {"tz", "{\"type\":\"list\",\"element-id\":22,\"element\":\"timestamptz\",\"element-"
               "required\":false}"},
        {"bs",
         "{\"type\":\"list\",\"element-id\":23,\"element\":\"binary\",\"element-required\":false}"},
        {"js",
         "{\"type\":\"list\",\"element-id\":24,\"element\":\"string\",\"element-required\":false}"},
        {"dd",
         "{\"type\":\"list\",\"element-id\":25,\"element\":{\"type\":\"list\",\"element-id\":26,"
         "\"element\":\"date\",\"element-required\":false},\"element-required\":false}"},
        {"p",
         "{\"type\":\"struct\",\"fields\":[{\"id\":27,\"name\":\"xs\",\"required\":false,\"type\":"
         "{\"type\":\"list\",\"element-id\":28,\"element\":\"int\",\"element-required\":false}},"
         "{\"id\":29,\"name\":\"when\",\"required\":false,\"type\":{\"type\":\"list\","
         "\"element-id\":30,\"element\":\"timestamp\",\"element-required\":false}}]}"},
    };
    /* each column's value in the event (PostgreSQL's text of the elements) and in the
     * nested value form after decoding */
    static const char *const vals[][2] = {
        {"[\"2024-02-29\",null,\"infinity\",\"-infinity\"]", "[19782,null,2147483647,-2147483647]"},
        {"[\"2024-02-29 10:00:00.5\",\"infinity\"]", "[1709200800500000,9223372036854775807]"},
        {"[\"2024-02-29 10:00:00+02\",null]", "[1709193600000000,null]"},
        {"[\"\\\\x0102ff\",null,\"\\\\x\"]", "[\"AQL/\",null,\"\"]"},
        {"[\"{\\\"a\\\": 1}\",null]", "[\"{\\\"a\\\": 1}\",null]"},
        {"[[\"2024-02-29\",null],[]]", "[[19782,null],[]]"},
        {"(\"{1,2,NULL}\",\"{\"\"2024-02-29 10:00:00.5\"\",-infinity}\")",
         "{\"xs\":[1,2,null],\"when\":[1709200800500000,-9223372036854775807]}"},
    };
    json_t *doc = json_pack(
        "{s:i, s:s, s:s, s:s, s:i, s:i, s:s, s:[s], s:[{s:s, s:i, s:s, s:i, s:b, s:i, s:s, "
        "s:s, s:i, s:i}], s:i}",
        "format", 1, "topic", "cdc.public.lt", "schema", "public", "table", "lt", "version", 1,
        "relid", 1, "replica_identity", "default", "key", "id", "columns", "name", "id", "pg_oid",
        23, "pg_type", "int4", "typmod", -1, "nullable", 0, "key", 1, "iceberg", "int", "encoding",
        "int", "attnum", 1, "field_id", 1, "last_field_id", 30);
    json_t *after = json_pack("{s:i}", "id", 1);
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_change_t c;
    cdc_decode_error_t de;
    cdc_error_t e;

    (void)state;
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
        json_t *col = json_pack(
            "{s:s, s:i, s:s, s:i, s:b, s:i, s:o, s:s, s:i, s:i}", "name", cols[i][0], "pg_oid",
            i == 6 ? 16400 : 1182, "pg_type", i == 6 ? "public.pt" : "_date", "typmod", -1,
            "nullable", 1, "key", 0, "iceberg", json_loads(cols[i][1], 0, NULL), "encoding",
            i == 6 ? "record" : "json_array", "attnum", (int)i + 2, "field_id", (int)i + 2);
        assert_non_null(col);
        json_array_append_new(json_object_get(doc, "columns"), col);
        json_object_set_new(after, cols[i][0], json_string(vals[i][0]));
    }
    char *text = json_dumps(doc, JSON_COMPACT);
    if (cdc_catalog_register_json(cat, "cdc.public.lt", 1, text, strlen(text), &e) != CDC_OK)
        fail_msg("%s", e.msg);
    free(text);
    json_t *ev = json_pack("{s:s, s:o, s:{s:i, s:i}}", "op", "c", "after", after, "source", "lsn",
                           1, "schema_version", 1);
    text = json_dumps(ev, JSON_COMPACT);
    assert_int_equal(decode_str(cat, "cdc.public.lt", "{\"id\":1}", text, 1, &c, &de), CDC_OK);
    assert_int_equal(c.nulled, 0);
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
        const cdc_val_t *v = &c.after.vals[col(c.schema, cols[i][0])];
        assert_int_equal(v->kind, CDC_VAL_SET);
        if (v->len != strlen(vals[i][1]) || memcmp(v->bytes, vals[i][1], v->len) != 0)
            fail_msg("%s: %.*s, want %s", cols[i][0], (int)v->len, (const char *)v->bytes,
                     vals[i][1]);
    }
    cdc_change_clear(&c);
    free(text);
    json_decref(ev);

    /* a date element that is no date: the row is kept with that column null (and the
     * record dead-lettered, docs/worker.md, "Values no Iceberg type holds") */
    assert_int_equal(decode_str(cat, "cdc.public.lt", "{\"id\":2}",
                                "{\"op\":\"c\",\"after\":{\"id\":2,\"ds\":\"[\\\"soon\\\"]\"},"
                                "\"source\":{\"lsn\":2,\"schema_version\":1}}",
                                1, &c, &de),
                     CDC_OK);
    assert_int_equal(c.nulled, 1);
    assert_int_equal(c.after.vals[col(c.schema, "ds")].kind, CDC_VAL_NULL);
    cdc_change_clear(&c);
    json_decref(doc);
    cdc_catalog_free(cat);
}

/* One JSON string through the value converter for a column of type t. */
static int convert_str(cdc_ice_type_t t, bool optional, bool key, const char *str, cdc_val_t *v)
{
    cdc_column_t col = {.name = "c", .type = t, .precision = 10, .scale = 2};
    cdc_jv_t j = {.t = CDC_JV_STRING, .s = str, .n = strlen(str)};
    col.optional = optional;
    col.key = key;
    return cdc_decode_convert(&col, &j, NULL, v);
}

/*
 * Values no Iceberg type holds (docs/worker.md, "Values no Iceberg type holds"): date and
 * timestamp infinities map to the largest value and its negation (DuckDB's own), numeric
 * NaN and +-Infinity to a special kind (null in the column, named by _cdc_special), never
 * in a key or required column; both decoders agree; a row image keeps them.
 */
static void test_special_values(void **state)
{
    cdc_val_t v;
    (void)state;
    assert_int_equal(convert_str(CDC_ICE_DATE, true, false, "infinity", &v), 1);
    assert_int_equal(v.kind, CDC_VAL_SET);
    assert_int_equal(v.u.i, INT32_MAX);
    assert_int_equal(convert_str(CDC_ICE_DATE, false, true, "-infinity", &v), 1);
    assert_int_equal(v.u.i, -INT32_MAX);
    static const cdc_ice_type_t ts[] = {CDC_ICE_TIMESTAMP, CDC_ICE_TIMESTAMPTZ};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(convert_str(ts[i], true, false, "infinity", &v), 1);
        assert_true(v.u.i == INT64_MAX);
        assert_int_equal(convert_str(ts[i], false, true, "-infinity", &v), 1);
        assert_true(v.u.i == -INT64_MAX);
        assert_int_equal(convert_str(ts[i], true, false, "Infinity", &v), 0); /* not PG's */
    }
    assert_int_equal(convert_str(CDC_ICE_DECIMAL, true, false, "NaN", &v), 1);
    assert_int_equal(v.kind, CDC_VAL_NAN);
    assert_int_equal(convert_str(CDC_ICE_DECIMAL, true, false, "Infinity", &v), 1);
    assert_int_equal(v.kind, CDC_VAL_POS_INF);
    assert_int_equal(convert_str(CDC_ICE_DECIMAL, true, false, "-Infinity", &v), 1);
    assert_int_equal(v.kind, CDC_VAL_NEG_INF);
    assert_int_equal(convert_str(CDC_ICE_DECIMAL, false, false, "NaN", &v), 0); /* required */
    assert_int_equal(convert_str(CDC_ICE_DECIMAL, true, true, "NaN", &v), 0);   /* key */
    assert_int_equal(convert_str(CDC_ICE_DECIMAL, true, false, "nan", &v), 0);
    assert_int_equal(convert_str(CDC_ICE_DECIMAL, true, false, "12.5", &v), 1);
    assert_int_equal(v.kind, CDC_VAL_SET);
    assert_true(v.u.dec == 1250);

    /* an event with them: the direct decoder and the tree path give the same row */
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 1);
    const char *ev = "{\"before\":null,\"after\":{\"id\":7,\"customer\":\"a\",\"amount\":\"NaN\","
                     "\"created\":\"-infinity\",\"note\":null},\"source\":{\"schema_version\":1,"
                     "\"lsn\":5},\"op\":\"c\"}";
    cdc_decode_input_t in = {TOPIC, 0, 1, "{\"id\":7}", 8, ev, strlen(ev), -1};
    cdc_change_t a, b;
    cdc_decode_error_t de;
    assert_int_equal(cdc_decode(cat, NULL, &in, &a, &de), CDC_OK);
    assert_int_equal(cdc_decode_tree(cat, NULL, &in, &b, &de), CDC_OK);
    const cdc_source_schema_t *s = a.schema;
    assert_int_equal(a.nulled, 0);
    assert_int_equal(b.nulled, 0);
    assert_int_equal(a.after.vals[col(s, "amount")].kind, CDC_VAL_NAN);
    assert_int_equal(b.after.vals[col(s, "amount")].kind, CDC_VAL_NAN);
    assert_true(a.after.vals[col(s, "created")].u.i == -INT64_MAX);
    assert_true(b.after.vals[col(s, "created")].u.i == -INT64_MAX);

    /* the row image kept in state (TOAST repair) keeps the special kind */
    uint8_t *img;
    size_t len;
    assert_true(cdc_row_serialize(&a.after, &img, &len));
    assert_int_equal(cdc_row_image_lookup(img, len, s->cols[col(s, "amount")].field_id, &v), 1);
    assert_int_equal(v.kind, CDC_VAL_NAN);
    free(img);
    cdc_change_clear(&a);
    cdc_change_clear(&b);
    cdc_catalog_free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_insert),
        cmocka_unit_test(test_capture_toast_and_field_ids),
        cmocka_unit_test(test_debezium_with_schema),
        cmocka_unit_test(test_debezium_without_schema),
        cmocka_unit_test(test_flattened),
        cmocka_unit_test(test_generic_schema),
        cmocka_unit_test(test_source_ts_ms_out_of_range),
        cmocka_unit_test(test_tombstone),
        cmocka_unit_test(test_dlq_classes),
        cmocka_unit_test(test_debezium_truncate),
        cmocka_unit_test(test_schema_marker),
        cmocka_unit_test(test_entity_row),
        cmocka_unit_test(test_lists_and_structs),
        cmocka_unit_test(test_lists_of_text_elements),
        cmocka_unit_test(test_row_image_roundtrip),
        cmocka_unit_test(test_schema_version_source),
        cmocka_unit_test(test_special_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
