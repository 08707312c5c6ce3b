/* Unit tests for common/cdcschema.c: schema documents round trip, record keys, Iceberg types. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/cdcschema.h"

static void test_round_trip(void **state)
{
    cdc_schema_col_t cols[3] = {
        {.name = "id",
         .pg_oid = 20,
         .pg_type = "int8",
         .typmod = -1,
         .key = 1,
         .ice_type = CDC_ICE_LONG,
         .enc = CDC_VENC_INT},
        {.name = "amount",
         .pg_oid = 1700,
         .pg_type = "numeric",
         .typmod = ((12 << 16) | 2) + 4,
         .nullable = true,
         .ice_type = CDC_ICE_DECIMAL,
         .precision = 12,
         .scale = 2,
         .enc = CDC_VENC_DECIMAL},
        {.name = "tags",
         .pg_oid = 1009,
         .pg_type = "_text",
         .typmod = -1,
         .nullable = true,
         .ice_type = CDC_ICE_STRING,
         .enc = CDC_VENC_ARRAY,
         .elem_oid = 25},
    };
    cdc_schema_doc_t doc = {.topic = "cdc.public.orders",
                            .pg_schema = "public",
                            .pg_table = "orders",
                            .version = 3,
                            .relid = 16384,
                            .replica_identity = 'd',
                            .cols = cols,
                            .ncols = 3};
    cdc_schema_doc_t back, copy;
    cdc_ice_schema_t ice;
    cdc_error_t e;
    char *json;
    (void)state;
    assert_int_equal(cdc_schema_doc_encode(&doc, &json, &e), CDC_OK);
    assert_non_null(strstr(json, "\"iceberg\":\"decimal(12,2)\""));
    assert_non_null(strstr(json, "\"key\":[\"id\"]"));
    assert_int_equal(cdc_schema_doc_decode(json, strlen(json), &back, &e), CDC_OK);
    assert_true(cdc_schema_doc_same_shape(&doc, &back));
    assert_int_equal(back.version, 3);
    assert_int_equal(back.relid, 16384);
    assert_string_equal(back.cols[2].pg_type, "_text");
    assert_int_equal(back.cols[2].elem_oid, 25);
    assert_int_equal(back.cols[1].precision, 12);
    assert_int_equal(cdc_schema_doc_copy(&copy, &back), CDC_OK);
    assert_true(cdc_schema_doc_same_shape(&copy, &doc));
    copy.cols[1].typmod = -1;
    assert_false(cdc_schema_doc_same_shape(&copy, &doc));
    assert_int_equal(cdc_schema_doc_to_iceberg(&back, &ice, &e), CDC_OK);
    assert_int_equal(ice.nfields, 3);
    assert_int_equal(ice.fields[1].type, CDC_ICE_DECIMAL);
    assert_int_equal(ice.nidentifier, 1);
    assert_int_equal(ice.identifier_ids[0], 1);
    assert_true(ice.fields[0].required);
    cdc_schema_ice_free(&ice);
    cdc_schema_doc_free(&copy);
    cdc_schema_doc_free(&back);
    free(json);
}

static void test_bad_documents(void **state)
{
    cdc_schema_doc_t d;
    cdc_error_t e;
    const char *bad[] = {
        "not json",
        "[]",
        "{\"format\":2,\"topic\":\"t\",\"version\":1,\"columns\":[]}",
        "{\"format\":1,\"topic\":\"t\",\"version\":0,\"columns\":[]}",
        "{\"format\":1,\"topic\":\"t\",\"version\":1,\"columns\":[{\"name\":\"a\","
        "\"iceberg\":\"weird\",\"encoding\":\"int\"}]}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_not_equal(cdc_schema_doc_decode(bad[i], strlen(bad[i]), &d, &e), CDC_OK);
}

static void test_record_key_and_types(void **state)
{
    char buf[128], topic[64];
    int64_t v;
    cdc_ice_type_t t;
    int32_t p, s;
    (void)state;
    assert_string_equal(cdc_schema_record_key("cdc.public.t", 12, buf, sizeof(buf)),
                        "cdc.public.t/12");
    assert_true(cdc_schema_record_key_parse(buf, strlen(buf), topic, sizeof(topic), &v));
    assert_string_equal(topic, "cdc.public.t");
    assert_int_equal(v, 12);
    assert_false(cdc_schema_record_key_parse("x/", 2, topic, sizeof(topic), &v));
    assert_false(cdc_schema_record_key_parse("x/1a", 4, topic, sizeof(topic), &v));
    assert_true(cdc_schema_ice_type_parse("decimal(38,10)", &t, &p, &s));
    assert_int_equal(t, CDC_ICE_DECIMAL);
    assert_int_equal(s, 10);
    assert_true(cdc_schema_ice_type_parse("timestamptz", &t, &p, &s));
    assert_int_equal(t, CDC_ICE_TIMESTAMPTZ);
    assert_false(cdc_schema_ice_type_parse("decimal", &t, &p, &s));
    assert_int_equal(cdc_schema_array_elem(1231), CDC_PG_NUMERIC);
    assert_string_equal(cdc_schema_pg_type_name(CDC_PG_UUID), "uuid");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_documents),
        cmocka_unit_test(test_record_key_and_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
