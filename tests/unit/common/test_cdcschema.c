/* Unit tests for common/cdcschema.c: schema documents round trip, record keys, Iceberg types. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/cdcschema.h"
#include "common/iceberg/schema.h"

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

/* ---- column identity (cdc_schema_doc_assign_ids) ------------------------------------- */

/* A column "name" of attnum a with Iceberg type t (decimal: p, s). */
static cdc_schema_col_t col(const char *name, int32_t a, cdc_ice_type_t t, int32_t p, int32_t s,
                            int key)
{
    cdc_schema_col_t c = {.name = strdup(name),
                          .attnum = a,
                          .ice_type = t,
                          .precision = p,
                          .scale = s,
                          .key = key,
                          .nullable = key == 0,
                          .enc = CDC_VENC_INT};
    return c;
}

static cdc_schema_doc_t doc_of(const cdc_schema_col_t *cols, size_t n)
{
    cdc_schema_doc_t d = {.format = CDC_SCHEMA_FORMAT,
                          .topic = strdup("cdc.public.t"),
                          .version = 1,
                          .replica_identity = 'd'};
    d.cols = calloc(n, sizeof(*d.cols));
    memcpy(d.cols, cols, n * sizeof(*cols));
    for (size_t i = 0; i < n; i++)
        d.cols[i].name = strdup(cols[i].name);
    d.ncols = n;
    return d;
}

/* The document next to prev after the given columns, ids assigned, round-tripped
 * through JSON (what a restarted capture and every worker read). */
static cdc_schema_doc_t next_doc(const cdc_schema_doc_t *prev, const cdc_schema_col_t *cols,
                                 size_t n)
{
    cdc_schema_doc_t d = doc_of(cols, n), back;
    cdc_error_t e;
    char *json;
    assert_int_equal(cdc_schema_doc_assign_ids(prev, &d, &e), CDC_OK);
    assert_int_equal(cdc_schema_doc_encode(&d, &json, &e), CDC_OK);
    assert_int_equal(cdc_schema_doc_decode(json, strlen(json), &back, &e), CDC_OK);
    if (!cdc_schema_doc_same_shape(&d, &back))
        fail_msg("not the same after a round trip: %s", json);
    free(json);
    cdc_schema_doc_free(&d);
    return back;
}

static void test_identity_follows_attnum(void **state)
{
    (void)state;
    cdc_schema_col_t v1[] = {
        col("id", 1, CDC_ICE_INT, 0, 0, 1), col("v", 2, CDC_ICE_STRING, 0, 0, 0),
        col("a", 3, CDC_ICE_INT, 0, 0, 0), col("n", 4, CDC_ICE_DECIMAL, 10, 2, 0)};
    cdc_schema_doc_t d1 = next_doc(NULL, v1, 4);
    assert_int_equal(d1.cols[0].field_id, 1);
    assert_int_equal(d1.cols[3].field_id, 4);
    assert_int_equal(d1.last_field_id, 4);
    assert_null(d1.cols[1].field_name);

    /* ADD COLUMN added, RENAME v TO v_renamed: the rename keeps id 2, the new column 5 */
    cdc_schema_col_t v2[] = {
        col("id", 1, CDC_ICE_INT, 0, 0, 1), col("v_renamed", 2, CDC_ICE_STRING, 0, 0, 0),
        col("a", 3, CDC_ICE_INT, 0, 0, 0), col("n", 4, CDC_ICE_DECIMAL, 10, 2, 0),
        col("added", 5, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t d2 = next_doc(&d1, v2, 5);
    assert_int_equal(d2.cols[1].field_id, 2);
    assert_int_equal(d2.cols[4].field_id, 5);
    assert_int_equal(d2.nretired, 0);

    /* a int -> bigint (promotion: same id), n numeric(10,2) -> numeric(14,4) (scale: a new
     * field under the source name n, the old one retired as n__v1), n widened at the same
     * scale later */
    cdc_schema_col_t v3[] = {
        col("id", 1, CDC_ICE_INT, 0, 0, 1), col("v_renamed", 2, CDC_ICE_STRING, 0, 0, 0),
        col("a", 3, CDC_ICE_LONG, 0, 0, 0), col("n", 4, CDC_ICE_DECIMAL, 14, 4, 0),
        col("added", 5, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t d3 = next_doc(&d2, v3, 5);
    assert_int_equal(d3.cols[2].field_id, 3);
    assert_int_equal(d3.cols[3].field_id, 6);
    assert_null(d3.cols[3].field_name);
    assert_string_equal(cdc_schema_col_field_name(&d3.cols[3]), "n");
    assert_int_equal(d3.cols[3].type_version, 2);
    assert_int_equal(d3.nretired, 1);
    assert_string_equal(d3.retired[0].name, "n__v1");
    assert_int_equal(d3.retired[0].type_version, 1);
    assert_int_equal(d3.retired[0].attnum, 4);
    assert_int_equal(d3.retired[0].field_id, 4);
    assert_int_equal(d3.retired[0].precision, 10);
    assert_int_equal(d3.retired[0].scale, 2);

    cdc_ice_schema_t ice;
    cdc_error_t e;
    assert_int_equal(cdc_schema_doc_to_iceberg(&d3, &ice, &e), CDC_OK);
    assert_int_equal(ice.nfields, 6);
    assert_string_equal(ice.fields[3].name, "n");
    assert_int_equal(ice.fields[3].id, 6);
    assert_string_equal(ice.fields[5].name, "n__v1");
    assert_int_equal(ice.fields[5].id, 4);
    assert_false(ice.fields[5].required);
    cdc_schema_ice_free(&ice);

    /* DROP COLUMN added; ADD COLUMN added again (a new attnum: a new field, never id 5);
     * n widened at its new scale keeps 6 and the retired field stays */
    cdc_schema_col_t v4[] = {
        col("id", 1, CDC_ICE_INT, 0, 0, 1), col("v_renamed", 2, CDC_ICE_STRING, 0, 0, 0),
        col("a", 3, CDC_ICE_LONG, 0, 0, 0), col("n", 4, CDC_ICE_DECIMAL, 18, 4, 0),
        col("added", 6, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t d4 = next_doc(&d3, v4, 5);
    assert_int_equal(d4.cols[3].field_id, 6);
    assert_int_equal(d4.cols[4].field_id, 7);
    assert_int_equal(d4.nretired, 1);
    assert_int_equal(d4.last_field_id, 7);
    assert_false(cdc_schema_doc_same_shape(&d3, &d4));
    cdc_schema_doc_t again = next_doc(&d4, v4, 5); /* no change: the same document */
    assert_true(cdc_schema_doc_same_shape(&d4, &again));

    /* DROP COLUMN n: its retired field goes with it */
    cdc_schema_col_t v5[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("v_renamed", 2, CDC_ICE_STRING, 0, 0, 0),
                             col("a", 3, CDC_ICE_LONG, 0, 0, 0)};
    cdc_schema_doc_t d5 = next_doc(&d4, v5, 3);
    assert_int_equal(d5.nretired, 0);
    assert_int_equal(d5.last_field_id, 7);

    /* text -> int -> date of the same column: the source name always holds the newest
     * type; the middle one is retired as __v2, the first as __v1 */
    cdc_schema_col_t v6[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("v_renamed", 2, CDC_ICE_INT, 0, 0, 0),
                             col("a", 3, CDC_ICE_LONG, 0, 0, 0)};
    cdc_schema_doc_t d6 = next_doc(&d5, v6, 3);
    cdc_schema_col_t v7[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("v_renamed", 2, CDC_ICE_DATE, 0, 0, 0),
                             col("a", 3, CDC_ICE_LONG, 0, 0, 0)};
    cdc_schema_doc_t d7 = next_doc(&d6, v7, 3);
    assert_string_equal(cdc_schema_col_field_name(&d6.cols[1]), "v_renamed");
    assert_int_equal(d6.nretired, 1);
    assert_string_equal(d6.retired[0].name, "v_renamed__v1");
    assert_int_equal(d6.retired[0].field_id, 2);
    assert_string_equal(cdc_schema_col_field_name(&d7.cols[1]), "v_renamed");
    assert_int_equal(d7.cols[1].field_id, 9);
    assert_int_equal(d7.cols[1].type_version, 3);
    assert_int_equal(d7.nretired, 2);
    assert_string_equal(d7.retired[0].name, "v_renamed__v2"); /* the int field, id 8 */
    assert_int_equal(d7.retired[0].field_id, 8);
    assert_int_equal(d7.retired[0].ice_type, CDC_ICE_INT);
    assert_string_equal(d7.retired[1].name, "v_renamed__v1"); /* the text field, id 2 */
    assert_int_equal(d7.retired[1].field_id, 2);

    for (size_t i = 0; i < 4; i++)
        free(v1[i].name);
    for (size_t i = 0; i < 5; i++) {
        free(v2[i].name);
        free(v3[i].name);
        free(v4[i].name);
    }
    for (size_t i = 0; i < 3; i++) {
        free(v5[i].name);
        free(v6[i].name);
        free(v7[i].name);
    }
    cdc_schema_doc_t *all[] = {&d1, &d2, &d3, &d4, &again, &d5, &d6, &d7};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cdc_schema_doc_free(all[i]);
}

/* Source names always win: a retired field that a source column's name takes is
 * suffixed with its field id, whether the source column came first or later. */
static void test_identity_source_names_win(void **state)
{
    (void)state;
    cdc_schema_col_t v1[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("n", 2, CDC_ICE_DECIMAL, 10, 2, 0),
                             col("n__v1", 3, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t d1 = next_doc(NULL, v1, 3);
    cdc_schema_col_t v2[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("n", 2, CDC_ICE_DECIMAL, 14, 4, 0),
                             col("n__v1", 3, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t d2 = next_doc(&d1, v2, 3);
    assert_string_equal(cdc_schema_col_field_name(&d2.cols[1]), "n");
    assert_int_equal(d2.cols[1].field_id, 4);
    assert_string_equal(cdc_schema_col_field_name(&d2.cols[2]), "n__v1");
    assert_int_equal(d2.cols[2].field_id, 3);
    assert_int_equal(d2.nretired, 1);
    assert_string_equal(d2.retired[0].name, "n__v1__f2");

    /* m's retired m__v1 exists first; then a source column m__v1 is added */
    cdc_schema_col_t w1[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("m", 2, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t e1 = next_doc(NULL, w1, 2);
    cdc_schema_col_t w2[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1), col("m", 2, CDC_ICE_INT, 0, 0, 0)};
    cdc_schema_doc_t e2 = next_doc(&e1, w2, 2);
    assert_string_equal(e2.retired[0].name, "m__v1");
    cdc_schema_col_t w3[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1), col("m", 2, CDC_ICE_INT, 0, 0, 0),
                             col("m__v1", 3, CDC_ICE_DATE, 0, 0, 0)};
    cdc_schema_doc_t e3 = next_doc(&e2, w3, 3);
    assert_string_equal(cdc_schema_col_field_name(&e3.cols[2]), "m__v1");
    assert_int_equal(e3.cols[2].field_id, 4);
    assert_string_equal(e3.retired[0].name, "m__v1__f2");
    assert_int_equal(e3.retired[0].field_id, 2);

    cdc_ice_schema_t ice;
    cdc_error_t e;
    assert_int_equal(cdc_schema_doc_to_iceberg(&e3, &ice, &e), CDC_OK);
    for (size_t i = 0; i < ice.nfields; i++)
        for (size_t k = i + 1; k < ice.nfields; k++)
            assert_string_not_equal(ice.fields[i].name, ice.fields[k].name);
    cdc_schema_ice_free(&ice);

    cdc_schema_col_t *cols[] = {v1, v2, w1, w2, w3};
    size_t ncols[] = {3, 3, 2, 2, 3};
    for (size_t i = 0; i < 5; i++)
        for (size_t k = 0; k < ncols[i]; k++)
            free(cols[i][k].name);
    cdc_schema_doc_t *all[] = {&d1, &d2, &e1, &e2, &e3};
    for (size_t i = 0; i < 5; i++)
        cdc_schema_doc_free(all[i]);
}

/* A document versioned before the source name held the current values: the live column
 * is "n__v2" (field 3), its earlier type the retired "n" (field 2). Its names stay while
 * the column keeps its name and promotes; at its next type change Iceberg cannot promote
 * the source name takes the new field and the earlier ones become n__v2 and n__v1; a
 * rename gives the source name at once. */
static cdc_schema_doc_t older_versioned_doc(void)
{
    cdc_schema_col_t v[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                            col("n", 2, CDC_ICE_DECIMAL, 14, 4, 0)};
    cdc_schema_doc_t d = doc_of(v, 2);
    free(v[0].name);
    free(v[1].name);
    d.cols[0].field_id = 1;
    d.cols[0].type_version = 1;
    d.cols[1].field_id = 3;
    d.cols[1].type_version = 2;
    d.cols[1].field_name = strdup("n__v2");
    d.retired = calloc(1, sizeof(*d.retired));
    d.retired[0] = col("n", 2, CDC_ICE_DECIMAL, 10, 2, 0);
    d.retired[0].field_id = 2;
    d.retired[0].type_version = 1;
    d.nretired = 1;
    d.last_field_id = 3;
    return d;
}

static void test_identity_older_versioned_names(void **state)
{
    (void)state;
    cdc_schema_doc_t d0 = older_versioned_doc();

    /* unchanged and promoted: the names stay */
    cdc_schema_col_t v1[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("n", 2, CDC_ICE_DECIMAL, 16, 4, 0)};
    cdc_schema_doc_t d1 = next_doc(&d0, v1, 2);
    assert_int_equal(d1.cols[1].field_id, 3);
    assert_string_equal(cdc_schema_col_field_name(&d1.cols[1]), "n__v2");
    assert_int_equal(d1.nretired, 1);
    assert_string_equal(d1.retired[0].name, "n");
    cdc_schema_doc_t same = next_doc(&d1, v1, 2);
    assert_true(cdc_schema_doc_same_shape(&d1, &same));

    /* the next type change Iceberg cannot promote: n, n__v2, n__v1 */
    cdc_schema_col_t v2[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("n", 2, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t d2 = next_doc(&d1, v2, 2);
    assert_int_equal(d2.cols[1].field_id, 4);
    assert_int_equal(d2.cols[1].type_version, 3);
    assert_string_equal(cdc_schema_col_field_name(&d2.cols[1]), "n");
    assert_int_equal(d2.nretired, 2);
    assert_string_equal(d2.retired[0].name, "n__v2");
    assert_int_equal(d2.retired[0].field_id, 3);
    assert_string_equal(d2.retired[1].name, "n__v1");
    assert_int_equal(d2.retired[1].field_id, 2);

    /* a rename: the source name; the retired "n" keeps its name (no clash) */
    cdc_schema_col_t v3[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1),
                             col("m", 2, CDC_ICE_DECIMAL, 14, 4, 0)};
    cdc_schema_doc_t d3 = next_doc(&d0, v3, 2);
    assert_int_equal(d3.cols[1].field_id, 3);
    assert_string_equal(cdc_schema_col_field_name(&d3.cols[1]), "m");
    assert_string_equal(d3.retired[0].name, "n");

    for (size_t i = 0; i < 2; i++) {
        free(v1[i].name);
        free(v2[i].name);
        free(v3[i].name);
    }
    cdc_schema_doc_t *all[] = {&d0, &d1, &same, &d2, &d3};
    for (size_t i = 0; i < 5; i++)
        cdc_schema_doc_free(all[i]);
}

/* A previous document of an earlier capture (no ids, no attnums): ids 1..n by position,
 * then names match. A name clash with a versioned column takes the id as suffix. */
static void test_identity_legacy_and_clash(void **state)
{
    (void)state;
    cdc_schema_col_t v1[] = {col("id", 0, CDC_ICE_INT, 0, 0, 1),
                             col("x", 0, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t d1 = doc_of(v1, 2);
    cdc_schema_col_t v2[] = {col("id", 1, CDC_ICE_INT, 0, 0, 1), col("x", 2, CDC_ICE_INT, 0, 0, 0),
                             col("x__v2", 3, CDC_ICE_STRING, 0, 0, 0)};
    cdc_schema_doc_t d2 = next_doc(&d1, v2, 3);
    assert_int_equal(d2.cols[0].field_id, 1);
    assert_int_equal(d2.cols[1].field_id, 3); /* string -> int: a new field */
    assert_int_equal(d2.cols[2].field_id, 4);
    assert_int_equal(d2.retired[0].field_id, 2);
    /* the source names win: x holds the new type, x__v2 is the source column */
    assert_string_equal(cdc_schema_col_field_name(&d2.cols[1]), "x");
    assert_string_equal(cdc_schema_col_field_name(&d2.cols[2]), "x__v2");
    assert_string_equal(d2.retired[0].name, "x__v1");
    for (size_t i = 0; i < 3; i++)
        free(v2[i].name);
    for (size_t i = 0; i < 2; i++)
        free(v1[i].name);
    cdc_schema_doc_free(&d1);
    cdc_schema_doc_free(&d2);
}

/* A document of one key column and the columns mapped from (oid, typmod, ndims). */
static void mapped_doc(cdc_schema_doc_t *d, const cdc_schema_mapping_t *m, const uint32_t *oids,
                       const int32_t *typmods, const int *ndims, size_t n)
{
    memset(d, 0, sizeof(*d));
    d->format = CDC_SCHEMA_FORMAT;
    d->topic = strdup("cdc.public.t");
    d->version = 1;
    d->replica_identity = 'd';
    d->cols = calloc(n + 1, sizeof(*d->cols));
    d->ncols = n + 1;
    d->cols[0].name = strdup("id");
    d->cols[0].key = 1;
    d->cols[0].attnum = 1;
    assert_true(cdc_schema_map_col(m, &d->cols[0], 23, -1, 0));
    for (size_t i = 0; i < n; i++) {
        char name[8];
        snprintf(name, sizeof(name), "c%zu", i);
        d->cols[i + 1].name = strdup(name);
        d->cols[i + 1].nullable = true;
        d->cols[i + 1].attnum = (int32_t)i + 2;
        assert_true(cdc_schema_map_col(m, &d->cols[i + 1], oids[i], typmods[i], ndims[i]));
    }
}

/* Arrays as lists (a declared 2-D array a list of lists), numerics by the default, nested
 * ids given from last_field_id and kept while the shape stays; a registered column keeps
 * its type; a list's "iceberg" is Iceberg's JSON object (docs/events.md). */
static void test_native_mapping(void **state)
{
    /* int[], text[], int[][], numeric, numeric[], numeric(10,2)[], date[], interval,
     * timestamp[], timestamptz[], bytea[], jsonb[], json[], time[] */
    static const uint32_t oids[] = {1007, 1009, 1007, 1700, 1231, 1231, 1182,
                                    1186, 1115, 1185, 1001, 3807, 199,  1183};
    static const int32_t typmods[] = {-1, -1, -1, -1, -1, ((10 << 16) | 2) + 4, -1, -1, -1,
                                      -1, -1, -1, -1, -1};
    static const int ndims[] = {1, 1, 2, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    enum { NCOLS = sizeof(oids) / sizeof(oids[0]) };
    cdc_schema_mapping_t native = {.nested = true}, off = {.nested = false};
    cdc_schema_doc_t d, d2, back, old;
    cdc_error_t e;
    char *json = NULL;

    (void)state;
    assert_true(cdc_schema_numeric_default_parse("decimal(38,10)", &native));
    assert_true(cdc_schema_numeric_default_parse("string", &off));
    assert_false(cdc_schema_numeric_default_parse("decimal(39,1)", &off));
    assert_false(cdc_schema_numeric_default_parse("double", &off));

    mapped_doc(&d, &native, oids, typmods, ndims, NCOLS);
    assert_int_equal(cdc_schema_doc_assign_ids(NULL, &d, &e), CDC_OK);
    /* int[] */
    assert_int_equal(d.cols[1].ice_type, CDC_ICE_LIST);
    assert_int_equal(d.cols[1].enc, CDC_VENC_ARRAY);
    /* int[][]: the nested ids follow their column's id (given in column order) */
    assert_int_equal(d.cols[3].ice_type, CDC_ICE_LIST);
    assert_non_null(strstr(d.cols[3].ice_nested, "\"element\":{\"type\":\"list\""));
    /* numeric: the default; numeric[] too; numeric(10,2)[] its own */
    assert_int_equal(d.cols[4].ice_type, CDC_ICE_DECIMAL);
    assert_int_equal(d.cols[4].precision, 38);
    assert_int_equal(d.cols[4].scale, 10);
    assert_non_null(strstr(d.cols[5].ice_nested, "\"decimal(38,10)\""));
    assert_non_null(strstr(d.cols[6].ice_nested, "\"decimal(10,2)\""));
    /* arrays of date, timestamp, timestamptz, bytea, jsonb, json, time: lists of their
     * element's Iceberg type (the events keep the elements' PostgreSQL text) */
    {
        static const struct {
            int col;
            const char *element;
        } lists[] = {{7, "\"element\":\"date\""},         {9, "\"element\":\"timestamp\""},
                     {10, "\"element\":\"timestamptz\""}, {11, "\"element\":\"binary\""},
                     {12, "\"element\":\"string\""},      {13, "\"element\":\"string\""},
                     {14, "\"element\":\"time\""}};
        for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
            assert_int_equal(d.cols[lists[i].col].ice_type, CDC_ICE_LIST);
            assert_int_equal(d.cols[lists[i].col].enc, CDC_VENC_ARRAY);
            assert_non_null(strstr(d.cols[lists[i].col].ice_nested, lists[i].element));
        }
    }
    assert_int_equal(d.cols[8].ice_type, CDC_ICE_STRING); /* interval: its text */
    /* every id, nested ones included, once, none above last_field_id */
    {
        cdc_ice_schema_t is;
        int seen[64] = {0};
        assert_int_equal(cdc_schema_doc_to_iceberg(&d, &is, &e), CDC_OK);
        for (size_t i = 0; i < is.nfields; i++) {
            int32_t top = cdc_ice_field_max_id(&is.fields[i]);
            assert_true(top <= d.last_field_id);
            seen[is.fields[i].id]++;
        }
        assert_int_equal(d.last_field_id, 15 + 13); /* 15 columns, 13 list elements */
        for (int i = 1; i <= 15; i++)
            assert_true(seen[i] <= 1);
        cdc_schema_ice_free(&is);
    }

    /* the document round trip keeps the nested types with their ids */
    assert_int_equal(cdc_schema_doc_encode(&d, &json, &e), CDC_OK);
    assert_non_null(strstr(json, "\"iceberg\":{\"type\":\"list\",\"element-id\":"));
    assert_int_equal(cdc_schema_doc_decode(json, strlen(json), &back, &e), CDC_OK);
    assert_true(cdc_schema_doc_same_shape(&d, &back));
    assert_string_equal(back.cols[3].ice_nested, d.cols[3].ice_nested);
    free(json);

    /* the next version: the same columns keep field and nested ids, a new list gets new
     * ones after last_field_id */
    mapped_doc(&d2, &native, oids, typmods, ndims, NCOLS);
    assert_int_equal(cdc_schema_doc_assign_ids(&back, &d2, &e), CDC_OK);
    for (size_t i = 0; i < d.ncols; i++) {
        assert_int_equal(d2.cols[i].field_id, d.cols[i].field_id);
        if (d.cols[i].ice_nested != NULL)
            assert_string_equal(d2.cols[i].ice_nested, d.cols[i].ice_nested);
    }
    assert_int_equal(d2.last_field_id, d.last_field_id);
    assert_false(cdc_schema_doc_rewrites_rows(&back, &d2));

    /* a table registered before lists and the numeric default keeps text for its columns */
    mapped_doc(&old, NULL, oids, typmods, ndims, NCOLS);
    assert_int_equal(cdc_schema_doc_assign_ids(NULL, &old, &e), CDC_OK);
    cdc_schema_doc_free(&d2);
    mapped_doc(&d2, &native, oids, typmods, ndims, NCOLS);
    assert_int_equal(cdc_schema_doc_assign_ids(&old, &d2, &e), CDC_OK);
    for (size_t i = 0; i < d2.ncols; i++) {
        assert_int_equal(d2.cols[i].ice_type, old.cols[i].ice_type);
        assert_null(d2.cols[i].ice_nested);
        assert_int_equal(d2.cols[i].field_id, old.cols[i].field_id);
    }
    assert_int_equal(d2.nretired, 0);
    assert_false(cdc_schema_doc_rewrites_rows(&old, &d2));

    /* --nested-types=string: arrays stay JSON array text */
    cdc_schema_doc_free(&d2);
    mapped_doc(&d2, &off, oids, typmods, ndims, NCOLS);
    assert_int_equal(d2.cols[1].ice_type, CDC_ICE_STRING);
    assert_int_equal(d2.cols[4].ice_type, CDC_ICE_STRING); /* numeric default: string */
    assert_int_equal(d2.cols[7].ice_type, CDC_ICE_STRING); /* date[]: JSON array text */
    cdc_schema_doc_free(&d2);
    cdc_schema_doc_free(&old);
    cdc_schema_doc_free(&back);
    cdc_schema_doc_free(&d);
}

/* A key array stays text: identifier fields are primitive in Iceberg. */
static void test_key_array_stays_text(void **state)
{
    cdc_schema_mapping_t native = {.nested = true};
    cdc_schema_doc_t d;
    cdc_error_t e;
    static const uint32_t oids[] = {1009};
    static const int32_t typmods[] = {-1};
    static const int ndims[] = {1};

    (void)state;
    mapped_doc(&d, &native, oids, typmods, ndims, 1);
    d.cols[1].key = 2;
    assert_int_equal(cdc_schema_doc_assign_ids(NULL, &d, &e), CDC_OK);
    assert_int_equal(d.cols[1].ice_type, CDC_ICE_STRING);
    assert_null(d.cols[1].ice_nested);
    cdc_schema_doc_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_native_mapping),
        cmocka_unit_test(test_key_array_stays_text),
        cmocka_unit_test(test_bad_documents),
        cmocka_unit_test(test_record_key_and_types),
        cmocka_unit_test(test_identity_follows_attnum),
        cmocka_unit_test(test_identity_legacy_and_clash),
        cmocka_unit_test(test_identity_source_names_win),
        cmocka_unit_test(test_identity_older_versioned_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
