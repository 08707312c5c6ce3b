/*
 * Unit tests for common/iceberg/partition.c: Murmur3 and bucket[N] against the Iceberg
 * spec's appendix B vectors, truncate[W] and the time transforms (negative values floor),
 * which transform applies to which type, partition spec and sort order declarations
 * (parse, canonical text round trip, errors naming the term), JSON and copies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/iceberg/parquet.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/schema.h"

static cdc_ice_part_value_t enc(cdc_ice_type_t type, cdc_ice_value_t v, uint8_t *buf)
{
    cdc_ice_field_t f = {.type = type, .precision = 9, .scale = 2};
    size_t n = 0;
    if (type == CDC_ICE_STRING || type == CDC_ICE_BINARY) {
        memcpy(buf, v.v.bytes.ptr, v.v.bytes.len);
        n = v.v.bytes.len;
    } else {
        assert_true(cdc_ice_bound_encode(&f, &v, buf, 64, &n));
    }
    return (cdc_ice_part_value_t){.bytes = buf, .len = n};
}

static cdc_ice_part_value_t int_val(cdc_ice_type_t type, int64_t x, uint8_t *buf)
{
    cdc_ice_value_t v = {0};
    if (type == CDC_ICE_INT || type == CDC_ICE_DATE)
        v.v.i32 = (int32_t)x;
    else
        v.v.i64 = x;
    return enc(type, v, buf);
}

static cdc_ice_part_value_t str_val(const char *s, uint8_t *buf)
{
    cdc_ice_value_t v = {.v.bytes = {(const uint8_t *)s, strlen(s)}};
    return enc(CDC_ICE_STRING, v, buf);
}

/* Hash bucket[N] would use: bucket[INT32_MAX] of a value is (hash & INT32_MAX). */
static int32_t hash_of(cdc_ice_field_t *f, cdc_ice_part_value_t in)
{
    cdc_ice_part_value_t out;
    cdc_ice_transform_t t = {CDC_ICE_TRANSFORM_BUCKET, INT32_MAX};
    assert_int_equal(cdc_ice_transform_apply(t, f, &in, &out), CDC_OK);
    assert_int_equal(out.len, 4);
    int32_t v = (int32_t)cdc_ice_part_value_int(&out);
    free(out.bytes);
    return v;
}

static void test_murmur3_spec_vectors(void **state)
{
    (void)state;
    uint8_t b[64];
    cdc_ice_field_t f = {.id = 1, .name = "c"};
    /* appendix B: hash values; bucket[INT32_MAX] gives (hash & INT32_MAX) % INT32_MAX */
#define H(x) ((int32_t)(((x)&INT32_MAX) % INT32_MAX))
    f.type = CDC_ICE_INT;
    assert_int_equal(hash_of(&f, int_val(CDC_ICE_INT, 34, b)), H(2017239379));
    f.type = CDC_ICE_LONG;
    assert_int_equal(hash_of(&f, int_val(CDC_ICE_LONG, 34, b)), H(2017239379));
    f.type = CDC_ICE_DECIMAL;
    f.precision = 9;
    f.scale = 2;
    cdc_ice_value_t dv = {.v.dec = 1420};
    assert_int_equal(hash_of(&f, enc(CDC_ICE_DECIMAL, dv, b)), H(-500754589));
    f.type = CDC_ICE_DATE;
    assert_int_equal(hash_of(&f, int_val(CDC_ICE_DATE, 17486, b)), H(-653330422));
    f.type = CDC_ICE_TIME;
    assert_int_equal(hash_of(&f, int_val(CDC_ICE_TIME, 81068000000LL, b)), H(-662762989));
    f.type = CDC_ICE_TIMESTAMP;
    assert_int_equal(hash_of(&f, int_val(CDC_ICE_TIMESTAMP, 1510871468000000LL, b)),
                     H(-2047944441));
    f.type = CDC_ICE_TIMESTAMPTZ;
    assert_int_equal(hash_of(&f, int_val(CDC_ICE_TIMESTAMPTZ, 1510871468000000LL, b)),
                     H(-2047944441));
    f.type = CDC_ICE_STRING;
    assert_int_equal(hash_of(&f, str_val("iceberg", b)), H(1210000089));
    f.type = CDC_ICE_UUID;
    static const uint8_t uuid[16] = {0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd,
                                     0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7};
    cdc_ice_part_value_t uv = {.bytes = (uint8_t *)uuid, .len = 16};
    assert_int_equal(hash_of(&f, uv), H(1488055340));
    f.type = CDC_ICE_BINARY;
    static const uint8_t bin[4] = {0, 1, 2, 3};
    cdc_ice_part_value_t bv = {.bytes = (uint8_t *)bin, .len = 4};
    assert_int_equal(hash_of(&f, bv), H(-188683207));
#undef H
    /* the raw hash */
    assert_int_equal(cdc_ice_murmur3_32((const uint8_t *)"iceberg", 7), 1210000089);
    assert_int_equal(cdc_ice_murmur3_32(bin, 4), -188683207);

    /* bucket[16] of int 34: (2017239379 & INT32_MAX) % 16 */
    cdc_ice_transform_t t;
    cdc_ice_part_value_t out;
    assert_int_equal(cdc_ice_transform_parse("bucket[16]", &t), CDC_OK);
    f.type = CDC_ICE_INT;
    cdc_ice_part_value_t in = int_val(CDC_ICE_INT, 34, b);
    assert_int_equal(cdc_ice_transform_apply(t, &f, &in, &out), CDC_OK);
    assert_int_equal(cdc_ice_part_value_int(&out), 2017239379 % 16);
    free(out.bytes);
    /* null in, null out */
    cdc_ice_part_value_t nul = {.null = true};
    assert_int_equal(cdc_ice_transform_apply(t, &f, &nul, &out), CDC_OK);
    assert_true(out.null);
    /* a malformed input */
    cdc_ice_part_value_t bad = {.bytes = b, .len = 3};
    assert_int_equal(cdc_ice_transform_apply(t, &f, &bad, &out), CDC_ERR_INVALID);
}

static int64_t apply_int(const char *transform, cdc_ice_type_t type, int64_t x)
{
    cdc_ice_field_t f = {.id = 1, .name = "c", .type = type};
    cdc_ice_transform_t t;
    cdc_ice_part_value_t out;
    uint8_t b[16];
    cdc_ice_part_value_t in = int_val(type, x, b);
    assert_int_equal(cdc_ice_transform_parse(transform, &t), CDC_OK);
    assert_int_equal(cdc_ice_transform_apply(t, &f, &in, &out), CDC_OK);
    int64_t v = cdc_ice_part_value_int(&out);
    free(out.bytes);
    return v;
}

static void test_truncate(void **state)
{
    (void)state;
    assert_int_equal(apply_int("truncate[10]", CDC_ICE_INT, 1), 0);
    assert_int_equal(apply_int("truncate[10]", CDC_ICE_INT, -1), -10);
    assert_int_equal(apply_int("truncate[10]", CDC_ICE_INT, 10), 10);
    assert_int_equal(apply_int("truncate[10]", CDC_ICE_LONG, 1), 0);
    assert_int_equal(apply_int("truncate[10]", CDC_ICE_LONG, -1), -10);
    assert_int_equal(apply_int("truncate[10]", CDC_ICE_LONG, -10000000000LL), -10000000000LL);

    cdc_ice_field_t f = {.id = 1, .name = "c", .type = CDC_ICE_DECIMAL, .precision = 9, .scale = 2};
    cdc_ice_transform_t t = {CDC_ICE_TRANSFORM_TRUNCATE, 50};
    cdc_ice_part_value_t out;
    uint8_t b[64];
    cdc_ice_value_t dv = {.v.dec = 1065}; /* 10.65 -> 10.50 */
    cdc_ice_part_value_t in = enc(CDC_ICE_DECIMAL, dv, b);
    assert_int_equal(cdc_ice_transform_apply(t, &f, &in, &out), CDC_OK);
    assert_true(cdc_ice_part_value_decimal(&out) == 1050);
    assert_int_equal(out.len, 2); /* minimal bytes */
    free(out.bytes);
    dv.v.dec = -1; /* -0.01 -> -0.50 */
    in = enc(CDC_ICE_DECIMAL, dv, b);
    assert_int_equal(cdc_ice_transform_apply(t, &f, &in, &out), CDC_OK);
    assert_true(cdc_ice_part_value_decimal(&out) == -50);
    free(out.bytes);

    f.type = CDC_ICE_STRING;
    t.param = 3;
    in = str_val("iceberg", b);
    assert_int_equal(cdc_ice_transform_apply(t, &f, &in, &out), CDC_OK);
    assert_int_equal(out.len, 3);
    assert_memory_equal(out.bytes, "ice", 3);
    free(out.bytes);
    /* code points, not bytes */
    t.param = 2;
    in = str_val("\xc3\xbcn\xc3\xaf"
                 "code",
                 b);
    assert_int_equal(cdc_ice_transform_apply(t, &f, &in, &out), CDC_OK);
    assert_int_equal(out.len, 3);
    assert_memory_equal(out.bytes, "\xc3\xbcn", 3);
    free(out.bytes);
    t.param = 20; /* shorter than W: as is */
    assert_int_equal(cdc_ice_transform_apply(t, &f, &in, &out), CDC_OK);
    assert_int_equal(out.len, in.len);
    free(out.bytes);

    f.type = CDC_ICE_BINARY;
    t.param = 3;
    static const uint8_t bin[4] = {1, 2, 3, 4};
    cdc_ice_part_value_t bv = {.bytes = (uint8_t *)bin, .len = 4};
    assert_int_equal(cdc_ice_transform_apply(t, &f, &bv, &out), CDC_OK);
    assert_int_equal(out.len, 3);
    assert_memory_equal(out.bytes, bin, 3);
    free(out.bytes);
}

static void test_time_transforms(void **state)
{
    (void)state;
    const int64_t ts = 1510871468000000LL; /* 2017-11-16T22:31:08 */
    for (int tz = 0; tz < 2; tz++) {
        cdc_ice_type_t type = tz ? CDC_ICE_TIMESTAMPTZ : CDC_ICE_TIMESTAMP;
        assert_int_equal(apply_int("year", type, ts), 47);
        assert_int_equal(apply_int("month", type, ts), 47 * 12 + 10);
        assert_int_equal(apply_int("day", type, ts), 17486);
        assert_int_equal(apply_int("hour", type, ts), 419686);
        /* 1969-12-31T23:59:59: floor, not towards zero */
        assert_int_equal(apply_int("year", type, -1000000), -1);
        assert_int_equal(apply_int("month", type, -1000000), -1);
        assert_int_equal(apply_int("day", type, -1000000), -1);
        assert_int_equal(apply_int("hour", type, -1000000), -1);
        assert_int_equal(apply_int("day", type, -86400000000LL), -1);
        assert_int_equal(apply_int("day", type, -86400000001LL), -2);
        assert_int_equal(apply_int("hour", type, 0), 0);
    }
    assert_int_equal(apply_int("year", CDC_ICE_DATE, 17486), 47);
    assert_int_equal(apply_int("month", CDC_ICE_DATE, 17486), 574);
    assert_int_equal(apply_int("day", CDC_ICE_DATE, 17486), 17486);
    assert_int_equal(apply_int("year", CDC_ICE_DATE, -365), -1); /* 1969-01-01 */
    assert_int_equal(apply_int("month", CDC_ICE_DATE, -365), -12);
    assert_int_equal(apply_int("year", CDC_ICE_DATE, -366), -2); /* 1968-12-31 */
    assert_int_equal(apply_int("month", CDC_ICE_DATE, -366), -13);
    assert_int_equal(apply_int("month", CDC_ICE_DATE, 31), 1); /* 1970-02-01 */
    assert_int_equal(apply_int("month", CDC_ICE_DATE, 30), 0);
    assert_int_equal(apply_int("year", CDC_ICE_DATE, 11016), 30); /* 2000-02-29 */
    assert_int_equal(apply_int("month", CDC_ICE_DATE, 11016), 30 * 12 + 1);

    /* the infinities (value.h): day, month and year keep their order; an hour past an
     * int's range is no partition value (the row is written unpartitioned) */
    const char *kinds[] = {"day", "month", "year"};
    for (int k = 0; k < 3; k++) {
        assert_true(apply_int(kinds[k], CDC_ICE_TIMESTAMP, CDC_ICE_TS_POS_INF) >
                    apply_int(kinds[k], CDC_ICE_TIMESTAMP, ts));
        assert_true(apply_int(kinds[k], CDC_ICE_TIMESTAMPTZ, CDC_ICE_TS_NEG_INF) <
                    apply_int(kinds[k], CDC_ICE_TIMESTAMPTZ, -1000000));
        assert_true(apply_int(kinds[k], CDC_ICE_DATE, CDC_ICE_DATE_POS_INF) >
                    apply_int(kinds[k], CDC_ICE_DATE, 17486));
        assert_true(apply_int(kinds[k], CDC_ICE_DATE, CDC_ICE_DATE_NEG_INF) <
                    apply_int(kinds[k], CDC_ICE_DATE, -366));
    }
    assert_int_equal(apply_int("day", CDC_ICE_TIMESTAMP, CDC_ICE_TS_POS_INF), 106751991);
    assert_int_equal(apply_int("day", CDC_ICE_DATE, CDC_ICE_DATE_NEG_INF), -INT32_MAX);
    const int64_t infinities[] = {CDC_ICE_TS_POS_INF, CDC_ICE_TS_NEG_INF};
    for (int i = 0; i < 2; i++) {
        cdc_ice_field_t f = {.id = 1, .name = "c", .type = CDC_ICE_TIMESTAMP};
        cdc_ice_transform_t t;
        cdc_ice_part_value_t out;
        uint8_t b[16];
        cdc_ice_part_value_t in = int_val(CDC_ICE_TIMESTAMP, infinities[i], b);
        assert_int_equal(cdc_ice_transform_parse("hour", &t), CDC_OK);
        assert_int_equal(cdc_ice_transform_apply(t, &f, &in, &out), CDC_ERR_INVALID);
    }
}

static void test_transform_types(void **state)
{
    (void)state;
    cdc_ice_field_t src = {.id = 3, .name = "c"}, r;
    cdc_ice_transform_t t;
    char buf[32];

    assert_int_equal(cdc_ice_transform_parse("Bucket[ 8 ]", &t), CDC_OK);
    assert_string_equal(cdc_ice_transform_string(t, buf, sizeof(buf)), "bucket[8]");
    assert_int_equal(cdc_ice_transform_parse("bucket[0]", &t), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_transform_parse("bucket", &t), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_transform_parse("truncate[x]", &t), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_transform_parse("days", &t), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_transform_parse("void", &t), CDC_OK);

    src.type = CDC_ICE_TIMESTAMPTZ;
    assert_int_equal(cdc_ice_transform_parse("day", &t), CDC_OK);
    assert_true(cdc_ice_transform_result(t, &src, &r));
    assert_int_equal(r.type, CDC_ICE_DATE);
    assert_false(r.required);
    assert_int_equal(cdc_ice_transform_parse("hour", &t), CDC_OK);
    assert_true(cdc_ice_transform_result(t, &src, &r));
    assert_int_equal(r.type, CDC_ICE_INT);
    src.type = CDC_ICE_DATE;
    assert_false(cdc_ice_transform_result(t, &src, &r)); /* no hour of a date */
    src.type = CDC_ICE_STRING;
    assert_int_equal(cdc_ice_transform_parse("day", &t), CDC_OK);
    assert_false(cdc_ice_transform_result(t, &src, &r));
    assert_int_equal(cdc_ice_transform_parse("truncate[4]", &t), CDC_OK);
    assert_true(cdc_ice_transform_result(t, &src, &r));
    assert_int_equal(r.type, CDC_ICE_STRING);
    src.type = CDC_ICE_TIMESTAMP;
    assert_false(cdc_ice_transform_result(t, &src, &r)); /* no truncate of a timestamp */
    src.type = CDC_ICE_DOUBLE;
    assert_int_equal(cdc_ice_transform_parse("bucket[4]", &t), CDC_OK);
    assert_false(cdc_ice_transform_result(t, &src, &r));
    assert_int_equal(cdc_ice_transform_parse("identity", &t), CDC_OK);
    assert_true(cdc_ice_transform_result(t, &src, &r));
    assert_int_equal(r.type, CDC_ICE_DOUBLE);
    src.type = CDC_ICE_DECIMAL;
    src.precision = 10;
    src.scale = 2;
    assert_int_equal(cdc_ice_transform_parse("truncate[100]", &t), CDC_OK);
    assert_true(cdc_ice_transform_result(t, &src, &r));
    assert_int_equal(r.type, CDC_ICE_DECIMAL);
    assert_int_equal(r.precision, 10);
    assert_int_equal(r.scale, 2);
}

static cdc_ice_field_t FIELDS[] = {
    {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
    {.id = 2, .name = "name", .type = CDC_ICE_STRING},
    {.id = 3, .name = "created_at", .type = CDC_ICE_TIMESTAMPTZ},
    {.id = 4, .name = "amount", .type = CDC_ICE_DECIMAL, .precision = 9, .scale = 2},
    {.id = 5, .name = "region", .type = CDC_ICE_STRING},
    {.id = 6, .name = "odd \"col\"", .type = CDC_ICE_INT},
    {.id = 7, .name = "id_bucket", .type = CDC_ICE_INT},
};
static cdc_ice_schema_t SCHEMA = {.schema_id = 0, .fields = FIELDS, .nfields = 7};

static void test_spec_parse_text(void **state)
{
    (void)state;
    cdc_ice_partition_spec_t spec, again;
    cdc_error_t e;
    const char *decl = " truncate[4](name),day( created_at ) , region,bucket[16](amount)";
    assert_int_equal(cdc_ice_partition_spec_parse(decl, &SCHEMA, 1000, &spec, &e), CDC_OK);
    assert_int_equal(spec.spec_id, 0);
    assert_int_equal(spec.nfields, 4);
    assert_int_equal(spec.fields[0].source_id, 2);
    assert_int_equal(spec.fields[0].field_id, 1000);
    assert_string_equal(spec.fields[0].name, "name_trunc");
    assert_int_equal(spec.fields[0].transform.kind, CDC_ICE_TRANSFORM_TRUNCATE);
    assert_int_equal(spec.fields[0].transform.param, 4);
    assert_string_equal(spec.fields[1].name, "created_at_day");
    assert_int_equal(spec.fields[1].field_id, 1001);
    assert_string_equal(spec.fields[2].name, "region");
    assert_int_equal(spec.fields[2].transform.kind, CDC_ICE_TRANSFORM_IDENTITY);
    assert_string_equal(spec.fields[3].name, "amount_bucket");
    char *text = cdc_ice_partition_spec_text(&spec, &SCHEMA);
    assert_string_equal(text, "truncate[4](name), day(created_at), region, bucket[16](amount)");
    assert_int_equal(cdc_ice_partition_spec_parse(text, &SCHEMA, 2000, &again, &e), CDC_OK);
    assert_true(cdc_ice_partition_spec_same(&spec, &again)); /* ids and names ignored */
    assert_int_equal(again.fields[0].field_id, 2000);
    free(text);
    cdc_ice_partition_spec_free(&again);

    cdc_ice_field_t results[4];
    assert_true(cdc_ice_partition_spec_result_fields(&spec, &SCHEMA, results));
    assert_int_equal(results[0].type, CDC_ICE_STRING);
    assert_int_equal(results[1].type, CDC_ICE_DATE);
    assert_int_equal(results[1].id, 1001);
    assert_string_equal(results[1].name, "created_at_day");
    assert_int_equal(results[3].type, CDC_ICE_INT);

    /* JSON and copies */
    spec.spec_id = 3;
    json_t *j = cdc_ice_partition_spec_to_jansson(&spec);
    char *js = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(strstr(js, "{\"name\":\"name_trunc\",\"transform\":\"truncate[4]\","
                               "\"source-id\":2,\"field-id\":1000}"));
    assert_non_null(strstr(js, "\"spec-id\":3"));
    free(js);
    assert_int_equal(cdc_ice_partition_spec_from_jansson(j, &again, &e), CDC_OK);
    json_decref(j);
    assert_int_equal(again.spec_id, 3);
    assert_true(cdc_ice_partition_spec_same(&spec, &again));
    assert_string_equal(again.fields[3].name, "amount_bucket");
    assert_int_equal(again.fields[3].field_id, 1003);
    cdc_ice_partition_spec_free(&again);
    assert_int_equal(cdc_ice_partition_spec_copy(&again, &spec), CDC_OK);
    assert_true(cdc_ice_partition_spec_same(&spec, &again));
    assert_string_equal(again.fields[1].name, "created_at_day");
    cdc_ice_partition_spec_free(&again);
    cdc_ice_partition_spec_free(&spec);

    /* quoted names, identity(col), void; empty = unpartitioned */
    assert_int_equal(cdc_ice_partition_spec_parse("identity(\"odd \"\"col\"\"\"), void(id)",
                                                  &SCHEMA, 1000, &spec, &e),
                     CDC_OK);
    assert_int_equal(spec.nfields, 2);
    assert_int_equal(spec.fields[0].source_id, 6);
    assert_int_equal(spec.fields[1].transform.kind, CDC_ICE_TRANSFORM_VOID);
    text = cdc_ice_partition_spec_text(&spec, &SCHEMA);
    assert_string_equal(text, "\"odd \"\"col\"\"\", void(id)");
    assert_int_equal(cdc_ice_partition_spec_parse(text, &SCHEMA, 1000, &again, &e), CDC_OK);
    assert_true(cdc_ice_partition_spec_same(&spec, &again));
    free(text);
    cdc_ice_partition_spec_free(&again);
    cdc_ice_partition_spec_free(&spec);
    assert_int_equal(cdc_ice_partition_spec_parse("  ", &SCHEMA, 1000, &spec, &e), CDC_OK);
    assert_int_equal(spec.nfields, 0);
    assert_int_equal(cdc_ice_partition_spec_parse(NULL, &SCHEMA, 1000, &spec, &e), CDC_OK);
    text = cdc_ice_partition_spec_text(&spec, &SCHEMA);
    assert_string_equal(text, "");
    free(text);
}

static void expect_spec_error(const char *decl, const char *needle1, const char *needle2)
{
    cdc_ice_partition_spec_t spec;
    cdc_error_t e;
    assert_int_equal(cdc_ice_partition_spec_parse(decl, &SCHEMA, 1000, &spec, &e), CDC_ERR_INVALID);
    if (strstr(e.msg, needle1) == NULL || (needle2 && strstr(e.msg, needle2) == NULL))
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"/\"%s\"", decl, e.msg, needle1,
                 needle2 ? needle2 : "");
    assert_int_equal(spec.nfields, 0);
    assert_null(spec.fields);
}

static void test_spec_errors(void **state)
{
    (void)state;
    expect_spec_error("region, bucket[16](nope)", "bucket[16](nope)", "\"nope\"");
    expect_spec_error("day(name)", "day(name)", "string");
    expect_spec_error("hour(created_at), bucket[0](id)", "bucket[0](id)", "unknown transform");
    expect_spec_error("frob(id)", "frob(id)", "\"frob\"");
    expect_spec_error("region, region", "region", "already partitioned");
    expect_spec_error("day(created_at), hour(created_at), day(created_at)", "day(created_at)",
                      "already");
    expect_spec_error("region,,id", "empty term", NULL);
    expect_spec_error("bucket[4](id) x", "bucket[4](id) x", "unexpected");
    expect_spec_error("bucket[4](id", "bucket[4](id", NULL);
    expect_spec_error("truncate[2](created_at)", "truncate[2](created_at)", "timestamptz");
    /* bucket(id) would be named "id_bucket", the name of another column */
    expect_spec_error("bucket[4](id)", "id_bucket", "another column");
}

static void test_sort_order(void **state)
{
    (void)state;
    cdc_ice_sort_order_t order, again;
    cdc_error_t e;
    const char *decl = "region, id DESC nulls last, day(created_at) nulls last, name desc nulls "
                       "first, bucket[4](amount) asc";
    assert_int_equal(cdc_ice_sort_order_parse(decl, &SCHEMA, &order, &e), CDC_OK);
    assert_int_equal(order.nfields, 5);
    assert_int_equal(order.order_id, 0);
    assert_false(order.fields[0].descending);
    assert_true(order.fields[0].nulls_first);
    assert_true(order.fields[1].descending);
    assert_false(order.fields[1].nulls_first);
    assert_int_equal(order.fields[2].transform.kind, CDC_ICE_TRANSFORM_DAY);
    assert_false(order.fields[2].nulls_first);
    assert_true(order.fields[3].descending);
    assert_true(order.fields[3].nulls_first);
    char *text = cdc_ice_sort_order_text(&order, &SCHEMA);
    assert_string_equal(text, "region, id desc, day(created_at) nulls last, name desc nulls "
                              "first, bucket[4](amount)");
    assert_int_equal(cdc_ice_sort_order_parse(text, &SCHEMA, &again, &e), CDC_OK);
    assert_true(cdc_ice_sort_order_same(&order, &again));
    free(text);
    cdc_ice_sort_order_free(&again);
    order.order_id = 2;
    json_t *j = cdc_ice_sort_order_to_jansson(&order);
    char *js = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(strstr(js, "{\"transform\":\"identity\",\"source-id\":1,\"direction\":"
                               "\"desc\",\"null-order\":\"nulls-last\"}"));
    free(js);
    assert_int_equal(cdc_ice_sort_order_from_jansson(j, &again, &e), CDC_OK);
    json_decref(j);
    assert_int_equal(again.order_id, 2);
    assert_true(cdc_ice_sort_order_same(&order, &again));
    cdc_ice_sort_order_free(&again);
    assert_int_equal(cdc_ice_sort_order_copy(&again, &order), CDC_OK);
    assert_true(cdc_ice_sort_order_same(&order, &again));
    again.fields[0].descending = true;
    assert_false(cdc_ice_sort_order_same(&order, &again));
    cdc_ice_sort_order_free(&again);
    cdc_ice_sort_order_free(&order);

    assert_int_equal(cdc_ice_sort_order_parse("id sideways", &SCHEMA, &order, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "id sideways"));
    assert_int_equal(cdc_ice_sort_order_parse("id, missing desc", &SCHEMA, &order, &e),
                     CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "\"missing\""));
    assert_int_equal(cdc_ice_sort_order_parse("id nulls", &SCHEMA, &order, &e), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_sort_order_parse("", &SCHEMA, &order, &e), CDC_OK);
    assert_int_equal(order.nfields, 0);
}

static void test_values(void **state)
{
    (void)state;
    uint8_t a[16], b[16];
    cdc_ice_field_t f = {.type = CDC_ICE_INT};
    cdc_ice_part_value_t x = int_val(CDC_ICE_INT, -5, a), y = int_val(CDC_ICE_INT, 3, b);
    assert_true(cdc_ice_part_value_compare(&f, &x, &y) < 0);
    assert_true(cdc_ice_part_value_valid(&f, &x));
    f.type = CDC_ICE_LONG;
    assert_false(cdc_ice_part_value_valid(&f, &x)); /* 4 bytes are no long */
    f.type = CDC_ICE_STRING;
    x = str_val("ab", a);
    y = str_val("\xc3\xa4", b); /* a-umlaut sorts after ASCII */
    assert_true(cdc_ice_part_value_compare(&f, &x, &y) < 0);
    f.type = CDC_ICE_DECIMAL;
    cdc_ice_value_t d1 = {.v.dec = -200}, d2 = {.v.dec = 1};
    x = enc(CDC_ICE_DECIMAL, d1, a);
    y = enc(CDC_ICE_DECIMAL, d2, b);
    assert_true(cdc_ice_part_value_compare(&f, &x, &y) < 0);

    cdc_ice_part_value_t v[2] = {{.null = true}, str_val("xyz", a)}, *c;
    assert_int_equal(cdc_ice_part_values_copy(&c, v, 2), CDC_OK);
    assert_true(c[0].null);
    assert_int_equal(c[1].len, 3);
    assert_memory_equal(c[1].bytes, "xyz", 3);
    assert_ptr_not_equal(c[1].bytes, a);
    cdc_ice_part_values_free(c, 2);
    assert_int_equal(cdc_ice_part_values_copy(&c, v, 0), CDC_OK);
    assert_null(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_murmur3_spec_vectors), cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_time_transforms),      cmocka_unit_test(test_transform_types),
        cmocka_unit_test(test_spec_parse_text),      cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_sort_order),           cmocka_unit_test(test_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
