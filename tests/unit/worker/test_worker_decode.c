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

#include "tests/unit/worker/worker_fixtures.h"
#include "worker/decode.h"

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
    expect_dlq(cat, "{\"op\":\"c\",\"after\":{\"id\":1,\"amount\":\"1.234\"},\"source\":{}}", 1,
               CDC_DLQ_TYPE_MISMATCH); /* scale 2 cannot hold 1.234 */
    expect_dlq(cat, "{\"op\":\"c\",\"after\":{\"id\":1,\"created\":\"yesterday\"},\"source\":{}}",
               1, CDC_DLQ_TYPE_MISMATCH);
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
        cmocka_unit_test(test_row_image_roundtrip),
        cmocka_unit_test(test_schema_version_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
