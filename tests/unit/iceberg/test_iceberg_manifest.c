/*
 * Unit tests for common/iceberg/manifest.c: manifests and manifest lists written by
 * us and read back through avro-c, the file metadata keys, sequence-number
 * inheritance, column statistics with the spec's single-value bound encodings, and
 * reading the manifests Iceberg Java wrote for the golden "bunnies" table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "common/iceberg/manifest.h"
#include "common/iceberg/parquet.h"
#include "common/iceberg/schema.h"

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* Spec (Appendix D) single-value serialization, checked byte for byte. */
static void test_bound_encodings(void **state)
{
    (void)state;
    uint8_t out[64];
    size_t n;
    cdc_ice_field_t f = {.id = 1, .name = "x"};
    cdc_ice_value_t v = {0};

    f.type = CDC_ICE_INT;
    v.v.i32 = -2;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 4);
    assert_memory_equal(out, "\xfe\xff\xff\xff", 4);

    f.type = CDC_ICE_LONG;
    v.v.i64 = 0x0102030405060708LL;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 8);
    assert_memory_equal(out, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);

    f.type = CDC_ICE_DOUBLE;
    v.v.f64 = 1.0;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 8);
    assert_memory_equal(out, "\x00\x00\x00\x00\x00\x00\xf0\x3f", 8);

    f.type = CDC_ICE_FLOAT;
    v.v.f32 = 1.0f;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 4);
    assert_memory_equal(out, "\x00\x00\x80\x3f", 4);

    f.type = CDC_ICE_BOOLEAN;
    v.v.b = true;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 1);

    f.type = CDC_ICE_DATE;
    v.v.i32 = 19000;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 4);
    assert_memory_equal(out, "\x38\x4a\x00\x00", 4);

    f.type = CDC_ICE_TIMESTAMPTZ;
    v.v.i64 = 1;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 8);
    assert_memory_equal(out, "\x01\x00\x00\x00\x00\x00\x00\x00", 8);

    /* decimal: minimal big-endian two's complement of the unscaled value */
    f.type = CDC_ICE_DECIMAL;
    f.precision = 10;
    f.scale = 2;
    v.v.dec = 1234; /* 12.34 */
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 2);
    assert_memory_equal(out, "\x04\xd2", 2);
    v.v.dec = -1;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 0xff);

    f.type = CDC_ICE_STRING;
    v.v.bytes.ptr = (const uint8_t *)"abc";
    v.v.bytes.len = 3;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 3);
    assert_memory_equal(out, "abc", 3);

    f.type = CDC_ICE_UUID;
    for (int i = 0; i < 16; i++)
        v.v.uuid[i] = (uint8_t)i;
    assert_true(cdc_ice_bound_encode(&f, &v, out, sizeof(out), &n));
    assert_int_equal(n, 16);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[15], 15);
}

static cdc_ice_field_t FIELDS[] = {
    {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
    {.id = 2, .name = "name", .type = CDC_ICE_STRING},
    {.id = 3, .name = "score", .type = CDC_ICE_DOUBLE},
};
static int32_t IDS[] = {1};
static cdc_ice_schema_t SCHEMA = {
    .schema_id = 0, .fields = FIELDS, .nfields = 3, .identifier_ids = IDS, .nidentifier = 1};

static void fill_file(cdc_ice_data_file_t *f, cdc_ice_col_stats_t *st, const char *path,
                      cdc_ice_content_t content, int64_t lo, int64_t hi)
{
    memset(f, 0, sizeof(*f));
    f->content = content;
    f->path = (char *)path;
    f->record_count = 42;
    f->file_size_in_bytes = 4242;
    memset(st, 0, 3 * sizeof(*st));
    for (int i = 0; i < 3; i++) {
        st[i].field_id = i + 1;
        st[i].column_size = 100 + i;
        st[i].value_count = 42;
        st[i].null_count = i;
        st[i].nan_count = i == 2 ? 0 : -1;
    }
    cdc_ice_value_t v = {0};
    v.v.i64 = lo;
    assert_true(cdc_ice_bound_encode(&FIELDS[0], &v, st[0].lower, 64, &st[0].lower_len));
    v.v.i64 = hi;
    assert_true(cdc_ice_bound_encode(&FIELDS[0], &v, st[0].upper, 64, &st[0].upper_len));
    st[0].has_bounds = true;
    memcpy(st[1].lower, "apple", 5);
    st[1].lower_len = 5;
    memcpy(st[1].upper, "pear", 4);
    st[1].upper_len = 4;
    st[1].has_bounds = true;
    f->stats = st;
    f->nstats = 3;
}

static void test_manifest_roundtrip(void **state)
{
    (void)state;
    cdc_error_t e;
    for (int codec = 0; codec < 2; codec++) {
        cdc_ice_col_stats_t st[2][3];
        cdc_ice_manifest_entry_t en[2] = {0};
        int64_t split[] = {4, 1000};
        fill_file(&en[0].file, st[0], "file:///w/t/data/a.parquet", CDC_ICE_CONTENT_DATA, -5, 77);
        en[0].file.split_offsets = split;
        en[0].file.nsplit_offsets = 2;
        en[0].status = CDC_ICE_ENTRY_ADDED;
        en[0].snapshot_id = 99;
        en[0].sequence_number = -1; /* inherit */
        en[0].file_sequence_number = -1;
        fill_file(&en[1].file, st[1], "file:///w/t/data/b.parquet", CDC_ICE_CONTENT_DATA, 1, 2);
        en[1].status = CDC_ICE_ENTRY_EXISTING;
        en[1].snapshot_id = 7;
        en[1].sequence_number = 3;
        en[1].file_sequence_number = 3;
        char *sj = cdc_ice_schema_to_json(&SCHEMA);
        uint8_t *buf;
        size_t len;
        assert_int_equal(cdc_ice_manifest_write(en, 2, sj, 0, NULL, NULL, CDC_ICE_MANIFEST_DATA,
                                                (cdc_avro_codec_t)codec, &buf, &len, &e),
                         CDC_OK);
        static const char *keys[][2] = {{"schema-id", "0"},
                                        {"partition-spec", "[]"},
                                        {"partition-spec-id", "0"},
                                        {"format-version", "2"},
                                        {"content", "data"}};
        for (size_t k = 0; k < 5; k++) {
            char *v;
            assert_int_equal(cdc_avro_header_get(buf, len, keys[k][0], &v, &e), CDC_OK);
            assert_string_equal(v, keys[k][1]);
            free(v);
        }
        char *v;
        assert_int_equal(cdc_avro_header_get(buf, len, "schema", &v, &e), CDC_OK);
        assert_string_equal(v, sj);
        free(v);
        assert_int_equal(cdc_avro_header_get(buf, len, "avro.schema", &v, &e), CDC_OK);
        assert_non_null(strstr(v, "\"field-id\":134"));
        assert_non_null(strstr(v, "\"element-id\":136"));
        free(v);
        free(sj);

        cdc_ice_manifest_file_t mf = {
            .path = "m.avro", .sequence_number = 12, .added_snapshot_id = 99};
        cdc_ice_manifest_entry_t *out;
        size_t n;
        assert_int_equal(cdc_ice_manifest_read(buf, len, &mf, NULL, 0, &out, &n, &e), CDC_OK);
        assert_int_equal(n, 2);
        assert_int_equal(out[0].status, CDC_ICE_ENTRY_ADDED);
        assert_int_equal(out[0].sequence_number, 12); /* inherited */
        assert_int_equal(out[0].file_sequence_number, 12);
        assert_int_equal(out[1].sequence_number, 3); /* explicit */
        assert_string_equal(out[0].file.path, "file:///w/t/data/a.parquet");
        assert_int_equal(out[0].file.record_count, 42);
        assert_int_equal(out[0].file.file_size_in_bytes, 4242);
        assert_int_equal(out[0].file.nsplit_offsets, 2);
        assert_int_equal(out[0].file.split_offsets[1], 1000);
        assert_int_equal(out[0].file.nstats, 3);
        for (size_t i = 0; i < 3; i++) {
            const cdc_ice_col_stats_t *s = &out[0].file.stats[i];
            assert_int_equal(s->field_id, (int)i + 1);
            assert_int_equal(s->column_size, 100 + (int)i);
            assert_int_equal(s->value_count, 42);
            assert_int_equal(s->null_count, (int)i);
            assert_int_equal(s->nan_count, i == 2 ? 0 : -1);
            assert_int_equal(s->has_bounds, i < 2);
        }
        assert_int_equal(out[0].file.stats[0].lower_len, 8);
        assert_memory_equal(out[0].file.stats[0].lower, "\xfb\xff\xff\xff\xff\xff\xff\xff", 8);
        assert_memory_equal(out[0].file.stats[0].upper, "\x4d\x00\x00\x00\x00\x00\x00\x00", 8);
        assert_memory_equal(out[0].file.stats[1].lower, "apple", 5);
        assert_memory_equal(out[0].file.stats[1].upper, "pear", 4);
        cdc_ice_manifest_entries_free(out, n);

        /* without inheritance context, nulls stay -1 */
        assert_int_equal(cdc_ice_manifest_read(buf, len, NULL, NULL, 0, &out, &n, &e), CDC_OK);
        assert_int_equal(out[0].sequence_number, -1);
        cdc_ice_manifest_entries_free(out, n);
        free(buf);
    }
}

static void test_delete_manifest(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_ice_col_stats_t st[3];
    cdc_ice_manifest_entry_t en = {0};
    int32_t eq[] = {1};
    fill_file(&en.file, st, "s3://b/t/data/d.parquet", CDC_ICE_CONTENT_EQUALITY_DELETES, 1, 9);
    en.file.equality_ids = eq;
    en.file.nequality_ids = 1;
    en.status = CDC_ICE_ENTRY_ADDED;
    en.snapshot_id = 5;
    en.sequence_number = en.file_sequence_number = -1;
    uint8_t *buf;
    size_t len;
    assert_int_equal(cdc_ice_manifest_write(&en, 1, "{}", 3, NULL, NULL, CDC_ICE_MANIFEST_DELETES,
                                            CDC_AVRO_CODEC_DEFLATE, &buf, &len, &e),
                     CDC_OK);
    char *v;
    assert_int_equal(cdc_avro_header_get(buf, len, "content", &v, &e), CDC_OK);
    assert_string_equal(v, "deletes");
    free(v);
    cdc_ice_manifest_entry_t *out;
    size_t n;
    assert_int_equal(cdc_ice_manifest_read(buf, len, NULL, NULL, 0, &out, &n, &e), CDC_OK);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].file.content, CDC_ICE_CONTENT_EQUALITY_DELETES);
    assert_int_equal(out[0].file.nequality_ids, 1);
    assert_int_equal(out[0].file.equality_ids[0], 1);
    cdc_ice_manifest_entries_free(out, n);
    free(buf);
}

static void test_manifest_list_roundtrip(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_ice_manifest_file_t mf[2] = {
        {.path = "file:///t/metadata/a-m0.avro",
         .length = 7000,
         .content = 0,
         .sequence_number = 4,
         .min_sequence_number = 1,
         .added_snapshot_id = 11,
         .added_files = 1,
         .existing_files = 3,
         .added_rows = 10,
         .existing_rows = 30},
        {.path = "file:///t/metadata/a-m1.avro",
         .length = 6000,
         .content = 1,
         .sequence_number = 4,
         .min_sequence_number = 4,
         .added_snapshot_id = 11,
         .added_files = 2,
         .added_rows = 5},
    };
    uint8_t *buf;
    size_t len;
    assert_int_equal(
        cdc_ice_manifest_list_write(mf, 2, 11, 10, 4, CDC_AVRO_CODEC_DEFLATE, &buf, &len, &e),
        CDC_OK);
    char *v;
    assert_int_equal(cdc_avro_header_get(buf, len, "snapshot-id", &v, &e), CDC_OK);
    assert_string_equal(v, "11");
    free(v);
    assert_int_equal(cdc_avro_header_get(buf, len, "parent-snapshot-id", &v, &e), CDC_OK);
    assert_string_equal(v, "10");
    free(v);
    assert_int_equal(cdc_avro_header_get(buf, len, "sequence-number", &v, &e), CDC_OK);
    assert_string_equal(v, "4");
    free(v);
    cdc_ice_manifest_file_t *out;
    size_t n;
    assert_int_equal(cdc_ice_manifest_list_read(buf, len, &out, &n, &e), CDC_OK);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].path, mf[0].path);
    assert_int_equal(out[0].length, 7000);
    assert_int_equal(out[0].min_sequence_number, 1);
    assert_int_equal(out[0].existing_files, 3);
    assert_int_equal(out[0].existing_rows, 30);
    assert_int_equal(out[1].content, 1);
    assert_int_equal(out[1].added_files, 2);
    cdc_ice_manifest_files_free(out, n);
    free(buf);

    /* no parent: the key is absent */
    assert_int_equal(
        cdc_ice_manifest_list_write(mf, 1, 11, -1, 1, CDC_AVRO_CODEC_NULL, &buf, &len, &e), CDC_OK);
    assert_int_equal(cdc_avro_header_get(buf, len, "parent-snapshot-id", &v, &e),
                     CDC_ERR_NOT_FOUND);

    /* Broken framing is refused before avro-c reads it (found by
     * tests/fuzz/iceberg_manifest.c): a negative key length in the header (byte 5 is the
     * first key's length, after the magic and the map's count), a block cut short. */
    assert_int_equal(buf[5], 22); /* zigzag 11: "avro.schema" */
    buf[5] = 1;                   /* zigzag -1 */
    assert_int_equal(cdc_ice_manifest_list_read(buf, len, &out, &n, &e), CDC_ERR_CORRUPT);
    buf[5] = 22;
    assert_int_equal(cdc_ice_manifest_list_read(buf, len, &out, &n, &e), CDC_OK);
    cdc_ice_manifest_files_free(out, n);
    assert_int_equal(cdc_ice_manifest_list_read(buf, len - 1, &out, &n, &e), CDC_ERR_CORRUPT);
    free(buf);
}

/*
 * Lengths inside records (found by tests/fuzz/iceberg_manifest.c: avro-c asked for 18 GB
 * for a corrupt manifest of a few KiB): a record whose string claims 16 GiB is refused as
 * corrupt, naming the claim, without avro-c allocating it; and a corrupt record after a
 * good one fails the read instead of ending the list early.
 */
static void test_record_lengths_bounded(void **state)
{
    (void)state;
    static const char schema[] = "{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":["
                                 "{\"name\":\"manifest_path\",\"type\":\"string\"}]}";
    cdc_avro_writer_t w;
    cdc_error_t e;
    uint8_t *buf;
    size_t len, n;
    cdc_ice_manifest_file_t *out;

    /* one record: a string of 16 GiB, of which the file holds 8 bytes */
    assert_int_equal(cdc_avro_writer_init(&w, schema, CDC_AVRO_CODEC_NULL, NULL, 0, &e), CDC_OK);
    cdc_avro_put_long(&w.record, INT64_C(1) << 34);
    cdc_avro_put_raw(&w.record, "abcdefgh", 8);
    assert_int_equal(cdc_avro_writer_end_record(&w, &e), CDC_OK);
    assert_int_equal(cdc_avro_writer_finish(&w, &buf, &len, &e), CDC_OK);
    assert_int_equal(cdc_ice_manifest_list_read(buf, len, &out, &n, &e), CDC_ERR_CORRUPT);
    assert_non_null(strstr(e.msg, "claims a length of 17179869185 bytes"));
    free(buf);

    /* a good record, then one whose string is cut: refused, not a list of one */
    assert_int_equal(cdc_avro_writer_init(&w, schema, CDC_AVRO_CODEC_NULL, NULL, 0, &e), CDC_OK);
    cdc_avro_put_string(&w.record, "file:///t/metadata/m0.avro");
    assert_int_equal(cdc_avro_writer_end_record(&w, &e), CDC_OK);
    cdc_avro_put_long(&w.record, 40);
    cdc_avro_put_raw(&w.record, "file:///", 8);
    assert_int_equal(cdc_avro_writer_end_record(&w, &e), CDC_OK);
    assert_int_equal(cdc_avro_writer_finish(&w, &buf, &len, &e), CDC_OK);
    assert_int_equal(cdc_ice_manifest_list_read(buf, len, &out, &n, &e), CDC_ERR_CORRUPT);
    free(buf);
}

/* Value of a partition field in single-value encoding, from a parquet-style cell. */
static cdc_ice_part_value_t pv(const cdc_ice_field_t *f, cdc_ice_value_t v)
{
    cdc_ice_part_value_t out = {0};
    uint8_t b[64];
    if (v.is_null) {
        out.null = true;
        return out;
    }
    if (f->type == CDC_ICE_STRING || f->type == CDC_ICE_BINARY) {
        cdc_ice_part_value_t raw = {.bytes = (uint8_t *)v.v.bytes.ptr, .len = v.v.bytes.len};
        assert_int_equal(cdc_ice_part_value_copy(&out, &raw), CDC_OK);
        return out;
    }
    cdc_ice_part_value_t raw = {.bytes = b};
    assert_true(cdc_ice_bound_encode(f, &v, b, sizeof(b), &raw.len));
    assert_int_equal(cdc_ice_part_value_copy(&out, &raw), CDC_OK);
    return out;
}

/*
 * A manifest of a partitioned spec with a field of each result type: the header keys, the
 * partition record's Avro types and field ids, values back byte for byte (decimals kept
 * minimal), and the manifest list's field summaries.
 */
static void test_partitioned_manifest(void **state)
{
    (void)state;
    cdc_error_t e;
    /* spec 3: identity of each column of this schema */
    cdc_ice_field_t cols[] = {
        {.id = 1, .name = "i", .type = CDC_ICE_INT},
        {.id = 2, .name = "s-x", .type = CDC_ICE_STRING},
        {.id = 3, .name = "d", .type = CDC_ICE_DATE},
        {.id = 4, .name = "dec", .type = CDC_ICE_DECIMAL, .precision = 9, .scale = 2},
        {.id = 5, .name = "u", .type = CDC_ICE_UUID},
        {.id = 6, .name = "ts", .type = CDC_ICE_TIMESTAMPTZ},
        {.id = 7, .name = "b", .type = CDC_ICE_BOOLEAN},
        {.id = 8, .name = "f", .type = CDC_ICE_DOUBLE},
        {.id = 9, .name = "bin", .type = CDC_ICE_BINARY},
        {.id = 10, .name = "l", .type = CDC_ICE_LONG},
    };
    enum { NC = 10 };
    cdc_ice_schema_t schema = {.schema_id = 2, .fields = cols, .nfields = NC};
    cdc_ice_partition_spec_t spec;
    assert_int_equal(cdc_ice_partition_spec_parse("i, \"s-x\", d, dec, u, ts, b, f, bin, l",
                                                  &schema, 1000, &spec, &e),
                     CDC_OK);
    spec.spec_id = 3;
    cdc_ice_field_t pf[NC];
    assert_true(cdc_ice_partition_spec_result_fields(&spec, &schema, pf));
    cdc_ice_manifest_entry_t en[3];
    cdc_ice_col_stats_t st[3][3];
    for (int k = 0; k < 3; k++) {
        memset(&en[k], 0, sizeof(en[k]));
        fill_file(&en[k].file, st[k], k ? "file:///t/data/b.parquet" : "file:///t/data/a.parquet",
                  CDC_ICE_CONTENT_DATA, 1, 2);
        en[k].status = CDC_ICE_ENTRY_ADDED;
        en[k].snapshot_id = 9;
        en[k].sequence_number = en[k].file_sequence_number = -1;
        en[k].file.spec_id = 3;
        en[k].file.sort_order_id = 2;
        en[k].file.npartition = NC;
        en[k].file.partition = calloc(NC, sizeof(cdc_ice_part_value_t));
        cdc_ice_value_t v[NC];
        memset(v, 0, sizeof(v));
        v[0].v.i32 = k == 0 ? -7 : 40 + k;
        v[1].v.bytes.ptr = (const uint8_t *)(k == 1 ? "z\xc3\xa4" : "abc");
        v[1].v.bytes.len = strlen((const char *)v[1].v.bytes.ptr);
        v[2].v.i32 = 17486 + k;
        v[3].v.dec = k == 2 ? -1 : 1420 * (k + 1);
        for (int b = 0; b < 16; b++)
            v[4].v.uuid[b] = (uint8_t)(b * 17 + k);
        v[5].v.i64 = 1510871468000000LL + k;
        v[6].v.b = k == 1;
        v[7].v.f64 = k == 2 ? NAN : 1.5 * k;
        v[8].v.bytes.ptr = (const uint8_t *)"\x00\x01";
        v[8].v.bytes.len = 2;
        v[9].v.i64 = -((int64_t)1 << 40) * k;
        if (k == 1)
            v[2].is_null = v[3].is_null = true; /* nulls in the summaries */
        for (int c = 0; c < NC; c++)
            en[k].file.partition[c] = pv(&pf[c], v[c]);
    }
    char *sj = cdc_ice_schema_to_json(&schema);
    uint8_t *buf;
    size_t len;
    assert_int_equal(cdc_ice_manifest_write(en, 3, sj, 2, &spec, pf, CDC_ICE_MANIFEST_DATA,
                                            CDC_AVRO_CODEC_DEFLATE, &buf, &len, &e),
                     CDC_OK);
    char *v;
    assert_int_equal(cdc_avro_header_get(buf, len, "partition-spec-id", &v, &e), CDC_OK);
    assert_string_equal(v, "3");
    free(v);
    assert_int_equal(cdc_avro_header_get(buf, len, "partition-spec", &v, &e), CDC_OK);
    assert_non_null(strstr(v, "[{\"name\":\"i\",\"transform\":\"identity\",\"source-id\":1,"
                              "\"field-id\":1000},"));
    free(v);
    assert_int_equal(cdc_avro_header_get(buf, len, "avro.schema", &v, &e), CDC_OK);
    assert_non_null(strstr(v, "{\"name\":\"i\",\"type\":[\"null\",\"int\"],\"default\":null,"
                              "\"field-id\":1000}"));
    assert_non_null(strstr(v, "\"name\":\"s_x2Dx\"")); /* Avro-safe name */
    assert_non_null(strstr(v, "{\"type\":\"int\",\"logicalType\":\"date\"}"));
    assert_non_null(strstr(v, "\"type\":\"fixed\",\"name\":\"decimal_9_2_p1003\",\"size\":4,"
                              "\"logicalType\":\"decimal\",\"precision\":9,\"scale\":2"));
    assert_non_null(strstr(v, "\"size\":16,\"logicalType\":\"uuid\""));
    assert_non_null(strstr(v, "\"logicalType\":\"timestamp-micros\",\"adjust-to-utc\":true"));
    free(v);

    cdc_ice_manifest_entry_t *out;
    size_t n;
    cdc_ice_manifest_file_t mf = {.path = "m.avro", .spec_id = 3, .sequence_number = 4};
    assert_int_equal(cdc_ice_manifest_read(buf, len, &mf, pf, NC, &out, &n, &e), CDC_OK);
    assert_int_equal(n, 3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(out[k].file.spec_id, 3);
        assert_int_equal(out[k].file.sort_order_id, 2);
        assert_int_equal(out[k].file.npartition, NC);
        for (int c = 0; c < NC; c++) {
            const cdc_ice_part_value_t *a = &en[k].file.partition[c],
                                       *b = &out[k].file.partition[c];
            assert_int_equal(a->null, b->null);
            assert_int_equal(a->len, b->len);
            if (!a->null)
                assert_memory_equal(a->bytes, b->bytes, a->len);
        }
        /* copies keep the values */
        cdc_ice_data_file_t cp;
        assert_int_equal(cdc_ice_data_file_copy(&cp, &out[k].file), CDC_OK);
        assert_int_equal(cp.npartition, NC);
        assert_memory_equal(cp.partition[1].bytes, out[k].file.partition[1].bytes,
                            cp.partition[1].len);
        cdc_ice_data_file_clear(&cp);
    }
    assert_true(cdc_ice_part_value_decimal(&out[2].file.partition[3]) == -1);
    assert_int_equal(out[2].file.partition[3].len, 1);
    cdc_ice_manifest_entries_free(out, n);
    /* without the spec's types: the spec id from the header, values as Avro has them */
    assert_int_equal(cdc_ice_manifest_read(buf, len, NULL, NULL, 0, &out, &n, &e), CDC_OK);
    assert_int_equal(out[0].file.spec_id, 3);
    assert_int_equal(out[0].file.partition[0].len, 4);
    assert_int_equal(cdc_ice_part_value_int(&out[0].file.partition[0]), -7);
    assert_int_equal(out[0].file.partition[3].len, 4); /* fixed(4) as stored */
    assert_int_equal(cdc_ice_part_value_int(&out[2].file.partition[9]), -((int64_t)1 << 41));
    cdc_ice_manifest_entries_free(out, n);

    /* a file of another spec or with too few values does not go in */
    en[1].file.spec_id = 0;
    uint8_t *bad;
    assert_int_equal(cdc_ice_manifest_write(en, 3, sj, 2, &spec, pf, CDC_ICE_MANIFEST_DATA,
                                            CDC_AVRO_CODEC_DEFLATE, &bad, &len, &e),
                     CDC_ERR_INVALID);
    en[1].file.spec_id = 3;
    en[1].file.partition[0].len = 3; /* not an int */
    assert_int_equal(cdc_ice_manifest_write(en, 3, sj, 2, &spec, pf, CDC_ICE_MANIFEST_DATA,
                                            CDC_AVRO_CODEC_DEFLATE, &bad, &len, &e),
                     CDC_ERR_INVALID);
    en[1].file.partition[0].len = 4;

    /* field summaries through the manifest list */
    mf.path = strdup("file:///t/metadata/m.avro");
    assert_int_equal(cdc_ice_manifest_summarize(en, 3, pf, NC, &mf), CDC_OK);
    assert_int_equal(mf.npartitions, NC);
    uint8_t *lbuf;
    size_t llen;
    assert_int_equal(
        cdc_ice_manifest_list_write(&mf, 1, 9, -1, 4, CDC_AVRO_CODEC_NULL, &lbuf, &llen, &e),
        CDC_OK);
    cdc_ice_manifest_file_t *mfs;
    size_t nmf;
    assert_int_equal(cdc_ice_manifest_list_read(lbuf, llen, &mfs, &nmf, &e), CDC_OK);
    assert_int_equal(nmf, 1);
    assert_int_equal(mfs[0].spec_id, 3);
    assert_int_equal(mfs[0].npartitions, NC);
    const cdc_ice_field_summary_t *ps = mfs[0].partitions;
    assert_false(ps[0].contains_null);
    assert_int_equal(cdc_ice_part_value_int(&ps[0].lower), -7);
    assert_int_equal(cdc_ice_part_value_int(&ps[0].upper), 42);
    assert_memory_equal(ps[1].lower.bytes, "abc", 3);
    assert_memory_equal(ps[1].upper.bytes, "z\xc3\xa4", 3);
    assert_true(ps[2].contains_null);
    assert_int_equal(cdc_ice_part_value_int(&ps[2].lower), 17486);
    assert_int_equal(cdc_ice_part_value_int(&ps[2].upper), 17488);
    assert_true(cdc_ice_part_value_decimal(&ps[3].lower) == -1);
    assert_true(cdc_ice_part_value_decimal(&ps[3].upper) == 1420);
    assert_false(ps[6].contains_null);
    assert_int_equal(ps[6].lower.bytes[0], 0);
    assert_int_equal(ps[6].upper.bytes[0], 1);
    assert_true(ps[7].contains_nan);
    assert_false(ps[7].lower.null);
    cdc_ice_manifest_file_t cp;
    assert_int_equal(cdc_ice_manifest_file_copy(&cp, &mfs[0]), CDC_OK);
    assert_int_equal(cp.npartitions, NC);
    assert_memory_equal(cp.partitions[1].upper.bytes, "z\xc3\xa4", 3);
    cdc_ice_manifest_file_clear(&cp);
    cdc_ice_manifest_files_free(mfs, nmf);
    cdc_ice_manifest_file_clear(&mf);
    free(lbuf);
    free(buf);
    free(sj);
    for (int k = 0; k < 3; k++)
        cdc_ice_part_values_free(en[k].file.partition, en[k].file.npartition);
    cdc_ice_partition_spec_free(&spec);
}

static void test_read_java_manifests(void **state)
{
    (void)state;
    cdc_error_t e;
    size_t len;
    uint8_t *buf = slurp("tests/data/iceberg/bunnies/"
                         "snap-9158179788527662767-1-a01399a1-e864-4562-b921-c8cb56e6e4a9.avro",
                         &len);
    cdc_ice_manifest_file_t *mfs;
    size_t nmf;
    assert_int_equal(cdc_ice_manifest_list_read(buf, len, &mfs, &nmf, &e), CDC_OK);
    free(buf);
    assert_int_equal(nmf, 4);
    assert_int_equal(mfs[2].content, 1);
    assert_int_equal(mfs[2].length, 7494);
    assert_int_equal(mfs[2].sequence_number, 3);
    buf = slurp("tests/data/iceberg/bunnies/a01399a1-e864-4562-b921-c8cb56e6e4a9-m1.avro", &len);
    assert_int_equal((int64_t)len, mfs[2].length);
    cdc_ice_manifest_entry_t *en;
    size_t n;
    assert_int_equal(cdc_ice_manifest_read(buf, len, &mfs[2], NULL, 0, &en, &n, &e), CDC_OK);
    assert_int_equal(n, 1);
    assert_int_equal(en[0].file.content, CDC_ICE_CONTENT_EQUALITY_DELETES);
    assert_int_equal(en[0].sequence_number, 3);
    assert_int_equal(en[0].file.nequality_ids, 1);
    assert_int_equal(en[0].file.file_size_in_bytes, 2529);
    assert_int_equal(en[0].file.nstats, 9);
    assert_int_equal(en[0].file.stats[0].lower_len, 11);
    assert_memory_equal(en[0].file.stats[0].lower, "New Zealand", 11);
    cdc_ice_manifest_entries_free(en, n);
    free(buf);
    cdc_ice_manifest_files_free(mfs, nmf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_encodings),
        cmocka_unit_test(test_manifest_roundtrip),
        cmocka_unit_test(test_delete_manifest),
        cmocka_unit_test(test_manifest_list_roundtrip),
        cmocka_unit_test(test_record_lengths_bounded),
        cmocka_unit_test(test_read_java_manifests),
        cmocka_unit_test(test_partitioned_manifest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
