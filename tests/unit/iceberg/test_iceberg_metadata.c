/*
 * Unit tests for common/iceberg/metadata.c: parsing the v5.metadata.json Iceberg
 * Java wrote for the golden "bunnies" table, and write -> parse round trips that
 * keep every required v2 field.
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

#include "common/iceberg/metadata.h"
#include "common/iceberg/schema.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

static void check_bunnies(const cdc_ice_metadata_t *md)
{
    assert_int_equal(md->format_version, 2);
    assert_string_equal(md->table_uuid, "eee3ca77-1713-442c-8c2f-ad98d8d36a9b");
    assert_string_equal(md->location, "s3a://hyperparam-iceberg/java/bunnies");
    assert_int_equal(md->last_sequence_number, 3);
    assert_int_equal(md->last_updated_ms, 1743410800565LL);
    assert_int_equal(md->last_column_id, 9);
    assert_int_equal(md->nschemas, 2);
    assert_int_equal(md->current_schema_id, 1);
    const cdc_ice_schema_t *s = cdc_ice_metadata_current_schema(md);
    assert_non_null(s);
    assert_int_equal(s->nfields, 9);
    assert_string_equal(s->fields[8].name, "__happy__");
    assert_int_equal(s->fields[8].type, CDC_ICE_BOOLEAN);
    assert_int_equal(s->fields[1].type, CDC_ICE_DOUBLE);
    assert_int_equal(md->last_partition_id, 999);
    assert_string_equal(cdc_ice_props_get(&md->properties, "write.parquet.compression-codec"),
                        "zstd");
    assert_true(md->current_snapshot_id == 9158179788527662767LL);
    assert_int_equal(md->nsnapshots, 3);
    const cdc_ice_snapshot_t *cur = cdc_ice_metadata_current_snapshot(md);
    assert_non_null(cur);
    assert_int_equal(cur->sequence_number, 3);
    assert_true(cur->parent_id == 6458828015811002920LL);
    assert_string_equal(cdc_ice_props_get(&cur->summary, "operation"), "overwrite");
    assert_string_equal(cdc_ice_props_get(&cur->summary, "total-equality-deletes"), "1");
    assert_int_equal(md->snapshots[0].parent_id, -1);
    assert_int_equal(md->nsnapshot_log, 3);
    assert_int_equal(md->nmetadata_log, 4);
    assert_string_equal(md->metadata_log[3].file,
                        "s3a://hyperparam-iceberg/java/bunnies/metadata/v4.metadata.json");
}

static void test_parse_java_metadata(void **state)
{
    (void)state;
    size_t len;
    char *json = slurp("tests/data/iceberg/bunnies/v5.metadata.json", &len);
    cdc_ice_metadata_t md;
    cdc_error_t e;
    assert_int_equal(cdc_ice_metadata_parse(json, len, &md, &e), CDC_OK);
    check_bunnies(&md);

    /* our writer keeps everything: write, parse again, compare */
    char *out;
    assert_int_equal(cdc_ice_metadata_write(&md, &out, &e), CDC_OK);
    cdc_ice_metadata_t md2;
    assert_int_equal(cdc_ice_metadata_parse(out, strlen(out), &md2, &e), CDC_OK);
    check_bunnies(&md2);

    /* every required v2 key is present */
    json_t *root = json_loads(out, 0, NULL);
    static const char *req[] = {"format-version",
                                "table-uuid",
                                "location",
                                "last-sequence-number",
                                "last-updated-ms",
                                "last-column-id",
                                "schemas",
                                "current-schema-id",
                                "partition-specs",
                                "default-spec-id",
                                "last-partition-id",
                                "sort-orders",
                                "default-sort-order-id",
                                "properties",
                                "current-snapshot-id",
                                "snapshots",
                                "snapshot-log",
                                "metadata-log",
                                "refs"};
    for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
        assert_non_null(json_object_get(root, req[i]));
    json_t *main_ref = json_object_get(json_object_get(root, "refs"), "main");
    assert_string_equal(json_string_value(json_object_get(main_ref, "type")), "branch");
    assert_true(json_integer_value(json_object_get(main_ref, "snapshot-id")) ==
                9158179788527662767LL);
    json_decref(root);
    free(out);
    cdc_ice_metadata_free(&md2);
    cdc_ice_metadata_free(&md);
    free(json);
}

static void test_roundtrip_built(void **state)
{
    (void)state;
    cdc_ice_field_t fields[] = {
        {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
        {.id = 2, .name = "amount", .type = CDC_ICE_DECIMAL, .precision = 12, .scale = 3},
        {.id = 3, .name = "ts", .type = CDC_ICE_TIMESTAMPTZ},
    };
    int32_t ids[] = {1};
    cdc_ice_schema_t schema = {
        .schema_id = 0, .fields = fields, .nfields = 3, .identifier_ids = ids, .nidentifier = 1};
    cdc_ice_metadata_t md;
    memset(&md, 0, sizeof(md));
    md.format_version = 2;
    strcpy(md.table_uuid, "0b7f4a4e-1c35-4b6c-9e83-2b1a4c8e2f10");
    md.location = strdup("file:///w/db/t");
    md.last_updated_ms = 1700000000000LL;
    md.last_column_id = 3;
    md.schemas = calloc(1, sizeof(cdc_ice_schema_t));
    assert_int_equal(cdc_ice_schema_copy(&md.schemas[0], &schema), CDC_OK);
    md.nschemas = 1;
    md.last_partition_id = 999;
    md.current_snapshot_id = -1;
    assert_int_equal(cdc_ice_props_set(&md.properties, "a", "1"), CDC_OK);
    assert_int_equal(cdc_ice_props_set(&md.properties, "a", "2"), CDC_OK);
    assert_int_equal(md.properties.n, 1);
    char *out;
    cdc_error_t e;
    assert_int_equal(cdc_ice_metadata_write(&md, &out, &e), CDC_OK);
    cdc_ice_metadata_t back;
    assert_int_equal(cdc_ice_metadata_parse(out, strlen(out), &back, &e), CDC_OK);
    assert_int_equal(back.current_snapshot_id, -1);
    assert_int_equal(back.nsnapshots, 0);
    assert_string_equal(back.location, "file:///w/db/t");
    assert_string_equal(cdc_ice_props_get(&back.properties, "a"), "2");
    const cdc_ice_schema_t *s = cdc_ice_metadata_current_schema(&back);
    assert_int_equal(s->nidentifier, 1);
    assert_int_equal(s->identifier_ids[0], 1);
    assert_int_equal(s->fields[1].type, CDC_ICE_DECIMAL);
    assert_int_equal(s->fields[1].precision, 12);
    assert_int_equal(s->fields[1].scale, 3);
    assert_true(s->fields[0].required);
    free(out);
    cdc_ice_metadata_free(&back);
    cdc_ice_metadata_free(&md);
}

/* Snapshots are written from their cached JSON after the first write: the same document
 * as a fresh encoding, through copies, with a property that mimics the splice marker. */
static void test_snapshot_json_cache(void **state)
{
    (void)state;
    cdc_ice_metadata_t md, cp, back;
    cdc_error_t e;
    char *first, *second, *third, *fresh;
    memset(&md, 0, sizeof(md));
    md.format_version = 2;
    strcpy(md.table_uuid, "0b7f4a4e-1c35-4b6c-9e83-2b1a4c8e2f10");
    md.location = strdup("file:///w/db/t");
    md.last_updated_ms = 1700000000000LL;
    md.current_snapshot_id = 12;
    assert_int_equal(cdc_ice_props_set(&md.properties, "x", "\"snapshots\":[]"), CDC_OK);
    md.snapshots = calloc(2, sizeof(cdc_ice_snapshot_t));
    for (int i = 0; i < 2; i++) {
        cdc_ice_snapshot_t *s = &md.snapshots[md.nsnapshots++];
        s->snapshot_id = 11 + i;
        s->parent_id = i ? 11 : -1;
        s->sequence_number = 1 + i;
        s->timestamp_ms = 1700000000000LL + i;
        s->schema_id = 0;
        s->manifest_list = strdup(i ? "file:///w/db/t/metadata/snap-12.avro"
                                    : "file:///w/db/t/metadata/snap-11.avro");
        assert_int_equal(cdc_ice_props_set(&s->summary, "operation", "append"), CDC_OK);
    }
    assert_int_equal(cdc_ice_metadata_write(&md, &first, &e), CDC_OK);
    assert_non_null(md.snapshots[0].json);
    assert_int_equal(cdc_ice_metadata_write(&md, &second, &e), CDC_OK);
    assert_string_equal(first, second);
    assert_int_equal(cdc_ice_metadata_copy(&cp, &md), CDC_OK);
    assert_int_equal(cdc_ice_metadata_write(&cp, &third, &e), CDC_OK);
    assert_string_equal(first, third);
    assert_int_equal(cdc_ice_metadata_parse(first, strlen(first), &back, &e), CDC_OK);
    assert_null(back.snapshots[1].json);
    assert_int_equal(back.nsnapshots, 2);
    assert_int_equal(back.snapshots[1].parent_id, 11);
    assert_string_equal(back.snapshots[1].manifest_list, "file:///w/db/t/metadata/snap-12.avro");
    assert_string_equal(cdc_ice_props_get(&back.properties, "x"), "\"snapshots\":[]");
    assert_int_equal(cdc_ice_metadata_write(&back, &fresh, &e), CDC_OK);
    assert_string_equal(first, fresh);
    free(first);
    free(second);
    free(third);
    free(fresh);
    cdc_ice_metadata_free(&md);
    cdc_ice_metadata_free(&cp);
    cdc_ice_metadata_free(&back);
}

/* Partition specs and sort orders survive write -> parse; a v1 "partition-spec" is spec 0. */
static void test_layout_roundtrip(void **state)
{
    (void)state;
    cdc_error_t e;
    const char *doc =
        "{\"format-version\":2,\"table-uuid\":\"u\",\"location\":\"file:///w/t\","
        "\"last-updated-ms\":1,\"last-column-id\":3,\"current-schema-id\":0,\"schemas\":[{"
        "\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\","
        "\"required\":true,\"type\":\"long\"},{\"id\":3,\"name\":\"ts\",\"required\":false,"
        "\"type\":\"timestamptz\"}]}],\"default-spec-id\":2,\"partition-specs\":[{\"spec-id\":"
        "0,\"fields\":[]},{\"spec-id\":2,\"fields\":[{\"name\":\"ts_day\",\"transform\":"
        "\"day\",\"source-id\":3,\"field-id\":1000},{\"name\":\"id_bucket\",\"transform\":"
        "\"bucket[16]\",\"source-id\":1,\"field-id\":1001}]}],\"last-partition-id\":1001,"
        "\"default-sort-order-id\":1,\"sort-orders\":[{\"order-id\":0,\"fields\":[]},{"
        "\"order-id\":1,\"fields\":[{\"transform\":\"identity\",\"source-id\":1,"
        "\"direction\":\"desc\",\"null-order\":\"nulls-last\"}]}],\"properties\":{},"
        "\"current-snapshot-id\":-1,\"snapshots\":[]}";
    cdc_ice_metadata_t md, back, cp;
    char *out, *again;
    assert_int_equal(cdc_ice_metadata_parse(doc, strlen(doc), &md, &e), CDC_OK);
    assert_int_equal(md.nspecs, 2);
    assert_int_equal(md.norders, 2);
    assert_int_equal(md.last_partition_id, 1001);
    const cdc_ice_partition_spec_t *spec = cdc_ice_metadata_default_spec(&md);
    assert_int_equal(spec->spec_id, 2);
    assert_int_equal(spec->fields[1].transform.kind, CDC_ICE_TRANSFORM_BUCKET);
    assert_int_equal(spec->fields[1].transform.param, 16);
    assert_null(cdc_ice_metadata_spec(&md, 1));
    assert_int_equal(cdc_ice_metadata_spec(&md, 0)->nfields, 0);
    assert_true(cdc_ice_metadata_default_sort_order(&md)->fields[0].descending);
    cdc_ice_field_t rf[2];
    assert_true(cdc_ice_metadata_spec_result_fields(&md, spec, rf));
    assert_int_equal(rf[0].type, CDC_ICE_DATE);
    assert_int_equal(rf[1].type, CDC_ICE_INT);
    assert_int_equal(cdc_ice_metadata_copy(&cp, &md), CDC_OK);
    assert_int_equal(cdc_ice_metadata_write(&cp, &out, &e), CDC_OK);
    assert_non_null(
        strstr(out, "\"partition-specs\":[{\"spec-id\":0,\"fields\":[]},{\"spec-id\":2"));
    assert_int_equal(cdc_ice_metadata_parse(out, strlen(out), &back, &e), CDC_OK);
    assert_int_equal(cdc_ice_metadata_write(&back, &again, &e), CDC_OK);
    assert_string_equal(out, again);
    assert_true(cdc_ice_partition_spec_same(cdc_ice_metadata_spec(&back, 2), spec));
    assert_string_equal(cdc_ice_metadata_spec(&back, 2)->fields[0].name, "ts_day");
    assert_true(cdc_ice_sort_order_same(cdc_ice_metadata_sort_order(&back, 1),
                                        cdc_ice_metadata_sort_order(&md, 1)));
    free(out);
    free(again);
    cdc_ice_metadata_free(&back);
    cdc_ice_metadata_free(&cp);
    cdc_ice_metadata_free(&md);

    const char *v1 =
        "{\"format-version\":1,\"location\":\"x\",\"last-updated-ms\":1,"
        "\"last-column-id\":1,\"schema\":{\"type\":\"struct\",\"fields\":[{\"id\":1,"
        "\"name\":\"a\",\"required\":false,\"type\":\"int\"}]},\"partition-spec\":[{"
        "\"name\":\"a\",\"transform\":\"identity\",\"source-id\":1,\"field-id\":1000}]}";
    assert_int_equal(cdc_ice_metadata_parse(v1, strlen(v1), &md, &e), CDC_OK);
    assert_int_equal(md.nspecs, 1);
    assert_int_equal(cdc_ice_metadata_default_spec(&md)->nfields, 1);
    assert_int_equal(md.last_partition_id, 1000);
    assert_int_equal(cdc_ice_metadata_default_sort_order(&md)->nfields, 0);
    cdc_ice_metadata_free(&md);
}

static void test_rejects_garbage(void **state)
{
    (void)state;
    cdc_ice_metadata_t md;
    cdc_error_t e;
    assert_int_equal(cdc_ice_metadata_parse("{", 1, &md, &e), CDC_ERR_CORRUPT);
    const char *v3 = "{\"format-version\":3,\"location\":\"x\"}";
    assert_int_equal(cdc_ice_metadata_parse(v3, strlen(v3), &md, &e), CDC_ERR_UNSUPPORTED);
    const char *part = "{\"format-version\":2,\"location\":\"x\",\"last-updated-ms\":1,"
                       "\"last-column-id\":1,\"schemas\":[],\"partition-specs\":[{\"spec-id\":0,"
                       "\"fields\":[{\"source-id\":1}]}]}";
    assert_int_equal(cdc_ice_metadata_parse(part, strlen(part), &md, &e), CDC_ERR_CORRUPT);
    /* a transform this project does not know */
    const char *zorder = "{\"format-version\":2,\"location\":\"x\",\"last-updated-ms\":1,"
                         "\"last-column-id\":1,\"schemas\":[],\"partition-specs\":[{\"spec-id\":"
                         "0,\"fields\":[{\"name\":\"z\",\"transform\":\"zorder\",\"source-id\":1,"
                         "\"field-id\":1000}]}]}";
    assert_int_equal(cdc_ice_metadata_parse(zorder, strlen(zorder), &md, &e), CDC_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "zorder"));
    /* a default spec the document does not list */
    const char *nodefault = "{\"format-version\":2,\"location\":\"x\",\"last-updated-ms\":1,"
                            "\"last-column-id\":1,\"schemas\":[],\"default-spec-id\":3,"
                            "\"partition-specs\":[{\"spec-id\":0,\"fields\":[]}]}";
    assert_int_equal(cdc_ice_metadata_parse(nodefault, strlen(nodefault), &md, &e),
                     CDC_ERR_CORRUPT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_java_metadata), cmocka_unit_test(test_roundtrip_built),
        cmocka_unit_test(test_snapshot_json_cache), cmocka_unit_test(test_layout_roundtrip),
        cmocka_unit_test(test_rejects_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
