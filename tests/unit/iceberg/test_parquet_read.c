/*
 * Unit tests for the Parquet reader (common/iceberg/parquet_read*.c): files of
 * the project's writer (parquet.h) read back cell by cell for every Iceberg
 * type, required and optional (all-null too), each codec, dictionary on, off and
 * falling back to PLAIN, many row groups and pages, no rows; the schema read back
 * from `iceberg.schema` and derived from the Parquet types when the key is absent;
 * and every truncation and hundreds of random byte flips of valid files, which
 * must be refused (CDC_ERR_CORRUPT or UNSUPPORTED) or read, never crash (run it
 * under `make asan` for the sanitizers' view).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "common/iceberg/parquet.h"
#include "common/iceberg/parquet_read.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/thrift.h"

/* ---- a schema of every type, required and optional ---------------------------- */

#define NTYPES 15
#define NCOLS (2 * NTYPES + 2) /* every type twice, then two all-null columns */

static const struct {
    cdc_ice_type_t type;
    int32_t precision, scale;
    const char *name;
} types[NTYPES] = {
    {CDC_ICE_BOOLEAN, 0, 0, "b"},        {CDC_ICE_INT, 0, 0, "i"},
    {CDC_ICE_LONG, 0, 0, "l"},           {CDC_ICE_FLOAT, 0, 0, "f"},
    {CDC_ICE_DOUBLE, 0, 0, "d"},         {CDC_ICE_DATE, 0, 0, "date"},
    {CDC_ICE_TIME, 0, 0, "time"},        {CDC_ICE_TIMESTAMP, 0, 0, "ts"},
    {CDC_ICE_TIMESTAMPTZ, 0, 0, "tstz"}, {CDC_ICE_STRING, 0, 0, "s"},
    {CDC_ICE_BINARY, 0, 0, "bin"},       {CDC_ICE_UUID, 0, 0, "uuid"},
    {CDC_ICE_DECIMAL, 9, 2, "dec9"},     {CDC_ICE_DECIMAL, 18, 4, "dec18"},
    {CDC_ICE_DECIMAL, 38, 10, "dec38"},
};

static cdc_ice_field_t fields[NCOLS];
static char names[NCOLS][32];
static const cdc_ice_schema_t schema = {.schema_id = 3, .fields = fields, .nfields = NCOLS};

static void schema_init(void)
{
    for (int i = 0; i < NCOLS; i++) {
        int t = i < 2 * NTYPES ? i % NTYPES : (i == 2 * NTYPES ? 9 : 2);
        bool req = i < NTYPES;
        snprintf(names[i], sizeof(names[i]), "%s_%s%s", types[t].name, req ? "req" : "opt",
                 i >= 2 * NTYPES ? "_null" : "");
        fields[i] = (cdc_ice_field_t){.id = 100 + i,
                                      .name = names[i],
                                      .type = types[t].type,
                                      .precision = types[t].precision,
                                      .scale = types[t].scale,
                                      .required = req};
    }
}

/* Distinct strings: row % card while row < switch_at, every row distinct after. */
static int str_card = 40, str_switch = 1 << 30;

static __int128 pow10_(int n)
{
    __int128 v = 1;
    while (n-- > 0)
        v *= 10;
    return v;
}

/* The cell of row r, column c; byte values are built in buf (64 bytes). */
static cdc_ice_value_t cell(int64_t r, int c, uint8_t *buf)
{
    cdc_ice_value_t v = {0};
    int t = c < 2 * NTYPES ? c % NTYPES : -1;
    uint64_t h = (uint64_t)r * 0x9E3779B97F4A7C15ull + (uint64_t)c * 0xC2B2AE3D27D4EB4Full;
    int64_t key = r < str_switch ? r % str_card : r;

    h ^= h >> 29;
    if (t < 0 || (c >= NTYPES && (r + c) % 5 == 0)) {
        v.is_null = true;
        return v;
    }
    switch (types[t].type) {
    case CDC_ICE_BOOLEAN:
        v.v.b = (h >> 7) & 1;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        v.v.i32 = r % 3 == 0 ? INT32_MIN + (int32_t)r : (int32_t)h;
        break;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        v.v.i64 = r % 4 == 0 ? -(int64_t)r : (int64_t)h;
        break;
    case CDC_ICE_FLOAT:
        v.v.f32 = r % 11 == 0 ? NAN : (float)((int64_t)h % 100000) / 7.0f;
        break;
    case CDC_ICE_DOUBLE:
        v.v.f64 = r % 13 == 0 ? NAN : r % 13 == 1 ? -0.0 : (double)(int64_t)h / 3.0;
        break;
    case CDC_ICE_STRING: {
        /* empty, multi-byte UTF-8, or ASCII */
        int n = key % 7 == 0 ? 0
                             : snprintf((char *)buf, 64, "k%lld-\xC3\xA9\xE2\x82\xAC-%s",
                                        (long long)key, key % 2 ? "\xF0\x9F\x98\x80" : "x");
        v.v.bytes.ptr = buf;
        v.v.bytes.len = (size_t)n;
        break;
    }
    case CDC_ICE_BINARY: {
        size_t n = (size_t)(key % 9);
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)(key * 31 + (int64_t)i * 7); /* zero bytes included */
        v.v.bytes.ptr = buf;
        v.v.bytes.len = n;
        break;
    }
    case CDC_ICE_UUID:
        for (int i = 0; i < 16; i++)
            v.v.uuid[i] = (uint8_t)(h >> (i * 4)) ^ (uint8_t)i;
        break;
    case CDC_ICE_DECIMAL: {
        __int128 lim = pow10_(types[t].precision) - 1;
        if (r % 17 == 0)
            v.v.dec = r % 2 ? -lim : lim;
        else
            v.v.dec = ((__int128)(int64_t)h * (int64_t)(h >> 3)) % (lim + 1);
        break;
    }
    default:
        break;
    }
    return v;
}

static uint8_t *write_file(const cdc_pq_options_t *opts, int64_t rows, size_t *len, size_t *nrg)
{
    cdc_pq_writer_t *w = NULL;
    cdc_ice_data_file_t df;
    cdc_error_t err;
    cdc_ice_value_t row[NCOLS];
    static uint8_t bufs[NCOLS][64];
    uint8_t *data = NULL;

    assert_int_equal(cdc_pq_writer_open_buffer(&schema, opts, &w, &err), CDC_OK);
    for (int64_t r = 0; r < rows; r++) {
        for (int c = 0; c < NCOLS; c++)
            row[c] = cell(r, c, bufs[c]);
        assert_int_equal(cdc_pq_writer_append(w, row, &err), CDC_OK);
    }
    assert_int_equal(cdc_pq_writer_close(w, &df, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_take_buffer(w, &data, len), CDC_OK);
    if (nrg != NULL)
        *nrg = df.nsplit_offsets;
    cdc_ice_data_file_clear(&df);
    cdc_pq_writer_free(w);
    return data;
}

static void assert_cell_equal(const cdc_ice_field_t *f, const cdc_ice_value_t *want,
                              const cdc_ice_value_t *got, int64_t r)
{
    if (want->is_null != got->is_null)
        fail_msg("column %s row %lld: null %d, read %d", f->name, (long long)r, want->is_null,
                 got->is_null);
    if (want->is_null)
        return;
    switch (f->type) {
    case CDC_ICE_BOOLEAN:
        assert_int_equal(want->v.b, got->v.b);
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        assert_int_equal(want->v.i32, got->v.i32);
        break;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        assert_true(want->v.i64 == got->v.i64);
        break;
    case CDC_ICE_FLOAT:
        if (isnan(want->v.f32))
            assert_true(isnan(got->v.f32));
        else
            assert_memory_equal(&want->v.f32, &got->v.f32, 4);
        break;
    case CDC_ICE_DOUBLE:
        if (isnan(want->v.f64))
            assert_true(isnan(got->v.f64));
        else
            assert_memory_equal(&want->v.f64, &got->v.f64, 8); /* -0.0 stays -0.0 */
        break;
    case CDC_ICE_STRING:
    case CDC_ICE_BINARY:
        if (want->v.bytes.len != got->v.bytes.len)
            fail_msg("column %s row %lld: length %zu, read %zu", f->name, (long long)r,
                     want->v.bytes.len, got->v.bytes.len);
        if (want->v.bytes.len > 0)
            assert_memory_equal(want->v.bytes.ptr, got->v.bytes.ptr, want->v.bytes.len);
        break;
    case CDC_ICE_UUID:
        assert_memory_equal(want->v.uuid, got->v.uuid, 16);
        break;
    case CDC_ICE_DECIMAL:
        if (want->v.dec != got->v.dec)
            fail_msg("column %s row %lld: decimal differs", f->name, (long long)r);
        break;
    default:
        fail();
    }
}

static void assert_schema_equal(const cdc_ice_schema_t *want, const cdc_ice_schema_t *got)
{
    assert_int_equal(got->nfields, want->nfields);
    for (size_t i = 0; i < want->nfields; i++) {
        const cdc_ice_field_t *a = &want->fields[i], *b = &got->fields[i];
        assert_int_equal(a->id, b->id);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->type, b->type);
        assert_int_equal(a->required, b->required);
        if (a->type == CDC_ICE_DECIMAL) {
            assert_int_equal(a->precision, b->precision);
            assert_int_equal(a->scale, b->scale);
        }
    }
}

/* Reads the file back and compares every cell with the written one. */
static void check_file(const uint8_t *data, size_t len, int64_t rows)
{
    cdc_pq_reader_t *rd = NULL;
    cdc_error_t err;
    const cdc_ice_value_t *vals, *again;
    uint8_t buf[64];

    if (cdc_pq_reader_open(data, len, &rd, &err) != CDC_OK)
        fail_msg("open: %s", err.msg);
    assert_int_equal(cdc_pq_reader_rows(rd), rows);
    assert_schema_equal(&schema, cdc_pq_reader_schema(rd));
    assert_int_equal(cdc_pq_reader_schema(rd)->schema_id, 3);
    for (int c = 0; c < NCOLS; c++) {
        if (cdc_pq_reader_column(rd, (size_t)c, &vals, &err) != CDC_OK)
            fail_msg("column %d: %s", c, err.msg);
        assert_non_null(vals);
        for (int64_t r = 0; r < rows; r++) {
            cdc_ice_value_t want = cell(r, c, buf);
            assert_cell_equal(&fields[c], &want, &vals[r], r);
        }
        assert_int_equal(cdc_pq_reader_column(rd, (size_t)c, &again, &err), CDC_OK);
        assert_ptr_equal(vals, again); /* decoded once, kept */
    }
    assert_int_equal(cdc_pq_reader_column(rd, NCOLS, &vals, &err), CDC_ERR_INVALID);
    cdc_pq_reader_free(rd);
}

/* ---- round trips -------------------------------------------------------------- */

static void test_every_codec_and_dictionary(void **state)
{
    static const cdc_pq_codec_t codecs[] = {CDC_PQ_CODEC_NONE, CDC_PQ_CODEC_SNAPPY,
                                            CDC_PQ_CODEC_ZSTD};
    (void)state;

    for (size_t k = 0; k < 3; k++) {
        for (int dict = 0; dict < 2; dict++) {
            cdc_pq_options_t opts;
            size_t len;
            cdc_pq_options_init(&opts);
            opts.codec = codecs[k];
            opts.dictionary = dict;
            uint8_t *data = write_file(&opts, 300, &len, NULL);
            check_file(data, len, 300);
            free(data);
        }
    }
}

static void test_row_groups_and_pages(void **state)
{
    cdc_pq_options_t opts;
    size_t len, nrg;
    (void)state;

    cdc_pq_options_init(&opts);
    opts.row_group_bytes = 16384;
    opts.page_bytes = 300;
    uint8_t *data = write_file(&opts, 3000, &len, &nrg);
    assert_true(nrg > 3);
    check_file(data, len, 3000);
    free(data);

    opts.codec = CDC_PQ_CODEC_SNAPPY;
    opts.page_bytes = 1; /* a page per value */
    data = write_file(&opts, 200, &len, &nrg);
    check_file(data, len, 200);
    free(data);
}

static void test_dictionary_fallback(void **state)
{
    cdc_pq_options_t opts;
    size_t len, nrg;
    (void)state;

    /* the dictionary overflows in the middle of the first row group */
    cdc_pq_options_init(&opts);
    opts.dict_max_entries = 10;
    uint8_t *data = write_file(&opts, 500, &len, NULL);
    check_file(data, len, 500);
    free(data);

    /* dictionary row groups first, then one falls back and the rest stay PLAIN */
    opts.dict_max_entries = 100;
    opts.row_group_bytes = 16384;
    opts.page_bytes = 512;
    str_switch = 1500;
    data = write_file(&opts, 3000, &len, &nrg);
    assert_true(nrg > 3);
    check_file(data, len, 3000);
    free(data);
    str_switch = 1 << 30;
}

static void test_zero_rows(void **state)
{
    cdc_pq_options_t opts;
    cdc_pq_reader_t *rd = NULL;
    cdc_error_t err;
    const cdc_ice_value_t *vals = NULL;
    size_t len;
    (void)state;

    cdc_pq_options_init(&opts);
    uint8_t *data = write_file(&opts, 0, &len, NULL);
    assert_int_equal(cdc_pq_reader_open(data, len, &rd, &err), CDC_OK);
    assert_int_equal(cdc_pq_reader_rows(rd), 0);
    assert_schema_equal(&schema, cdc_pq_reader_schema(rd));
    assert_int_equal(cdc_pq_reader_column(rd, 0, &vals, &err), CDC_OK);
    assert_non_null(vals);
    cdc_pq_reader_free(rd);
    free(data);
}

/* Without the iceberg.schema key the columns are typed from their Parquet types. */
/*
 * Dictionary indices of bit width 4 as one bit-packed group of 8 values followed by a short
 * RLE run, fewer bytes than the width after the group: the reader once skipped that run
 * (the changelog files of the pipeline, seen by compaction). Every split of distinct
 * values and a run of repeats, with and without nulls, reads back exactly.
 */
static void test_bitpacked_then_short_run(void **state)
{
    static const cdc_ice_field_t f[] = {{.id = 1, .name = "s", .type = CDC_ICE_STRING}};
    const cdc_ice_schema_t one = {.schema_id = 0, .fields = (cdc_ice_field_t *)f, .nfields = 1};
    (void)state;
    for (int distinct = 8; distinct <= 24; distinct++)
        for (int run = 1; run <= 12; run++)
            for (int nulls = 0; nulls < 2; nulls++) {
                int n = distinct + run;
                char text[64][8];
                cdc_ice_value_t rows[64];
                cdc_pq_writer_t *w;
                cdc_error_t err;
                uint8_t *data;
                size_t len;
                memset(rows, 0, sizeof(rows));
                for (int i = 0; i < n; i++) {
                    snprintf(text[i], sizeof(text[i]), "v%d", i < distinct ? i % 12 : 99);
                    rows[i].is_null = nulls && i % 5 == 3;
                    rows[i].v.bytes.ptr = (const uint8_t *)text[i];
                    rows[i].v.bytes.len = strlen(text[i]);
                }
                assert_int_equal(cdc_pq_writer_open_buffer(&one, NULL, &w, &err), CDC_OK);
                for (int i = 0; i < n; i++)
                    assert_int_equal(cdc_pq_writer_append(w, &rows[i], &err), CDC_OK);
                assert_int_equal(cdc_pq_writer_close(w, NULL, &err), CDC_OK);
                assert_int_equal(cdc_pq_writer_take_buffer(w, &data, &len), CDC_OK);
                cdc_pq_writer_free(w);
                cdc_pq_reader_t *rd;
                const cdc_ice_value_t *vals;
                assert_int_equal(cdc_pq_reader_open(data, len, &rd, &err), CDC_OK);
                if (cdc_pq_reader_column(rd, 0, &vals, &err) != CDC_OK)
                    fail_msg("distinct %d run %d nulls %d: %s", distinct, run, nulls, err.msg);
                for (int i = 0; i < n; i++) {
                    assert_int_equal(vals[i].is_null, rows[i].is_null);
                    if (!rows[i].is_null)
                        assert_memory_equal(vals[i].v.bytes.ptr, text[i], strlen(text[i]));
                }
                cdc_pq_reader_free(rd);
                free(data);
            }
}

static void test_schema_from_parquet_types(void **state)
{
    cdc_pq_options_t opts;
    cdc_pq_reader_t *rd = NULL;
    cdc_error_t err;
    const cdc_ice_value_t *vals;
    size_t len;
    uint8_t buf[64];
    (void)state;

    cdc_pq_options_init(&opts);
    uint8_t *data = write_file(&opts, 50, &len, NULL);
    uint8_t *key = memmem(data, len, "iceberg.schema", 14);
    assert_non_null(key);
    key[13] = 'X'; /* same length: the file stays valid */
    assert_int_equal(cdc_pq_reader_open(data, len, &rd, &err), CDC_OK);
    assert_schema_equal(&schema, cdc_pq_reader_schema(rd));
    for (int c = 0; c < NCOLS; c++) {
        assert_int_equal(cdc_pq_reader_column(rd, (size_t)c, &vals, &err), CDC_OK);
        for (int64_t r = 0; r < 50; r++) {
            cdc_ice_value_t want = cell(r, c, buf);
            assert_cell_equal(&fields[c], &want, &vals[r], r);
        }
    }
    cdc_pq_reader_free(rd);
    free(data);
}

static void test_not_parquet(void **state)
{
    cdc_pq_reader_t *rd = NULL;
    cdc_error_t err;
    static const uint8_t junk[] = "PAR1\x00\x00\x00\x00\x00\x00\x00\x00PAR1";
    static const uint8_t big[] = "PAR1\x00\x00\x00\x00\xff\x00\x00\x00PAR1";
    (void)state;

    assert_int_equal(cdc_pq_reader_open((const uint8_t *)"PAR1", 4, &rd, &err), CDC_ERR_CORRUPT);
    assert_int_equal(cdc_pq_reader_open(junk, sizeof(junk) - 1, &rd, &err), CDC_ERR_CORRUPT);
    assert_int_equal(cdc_pq_reader_open(big, sizeof(big) - 1, &rd, &err), CDC_ERR_CORRUPT);
    assert_non_null(strstr(err.msg, "footer length"));
    assert_null(rd);
}

/* ---- damaged files ------------------------------------------------------------ */

/* Opens and reads every column of a copy of data[0..len) (exactly len bytes, so a
 * sanitizer sees any read past it); returns the first error or CDC_OK. */
static cdc_err_t read_all(const uint8_t *data, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    cdc_pq_reader_t *rd = NULL;
    cdc_error_t err;
    const cdc_ice_value_t *vals;
    cdc_err_t rc;

    memcpy(copy, data, len);
    rc = cdc_pq_reader_open(copy, len, &rd, &err);
    for (size_t c = 0; rc == CDC_OK && c < cdc_pq_reader_schema(rd)->nfields; c++) {
        rc = cdc_pq_reader_column(rd, c, &vals, &err);
        if (rc == CDC_OK) { /* touch every cell */
            volatile size_t sum = 0;
            for (int64_t r = 0; r < cdc_pq_reader_rows(rd); r++)
                if (!vals[r].is_null &&
                    (cdc_pq_reader_schema(rd)->fields[c].type == CDC_ICE_STRING ||
                     cdc_pq_reader_schema(rd)->fields[c].type == CDC_ICE_BINARY))
                    for (size_t i = 0; i < vals[r].v.bytes.len; i++)
                        sum += vals[r].v.bytes.ptr[i];
        }
    }
    if (rc != CDC_OK && rc != CDC_ERR_CORRUPT && rc != CDC_ERR_UNSUPPORTED)
        fail_msg("unexpected error %d: %s", rc, err.msg);
    if (rc != CDC_OK)
        assert_true(err.msg[0] != '\0');
    cdc_pq_reader_free(rd);
    free(copy);
    return rc;
}

static void test_every_truncation(void **state)
{
    cdc_pq_options_t opts;
    size_t len;
    (void)state;

    cdc_pq_options_init(&opts);
    opts.codec = CDC_PQ_CODEC_NONE;
    opts.row_group_bytes = 2048;
    opts.page_bytes = 128;
    uint8_t *data = write_file(&opts, 60, &len, NULL);
    assert_int_equal(read_all(data, len), CDC_OK);
    for (size_t n = 0; n < len; n++)
        assert_int_not_equal(read_all(data, n), CDC_OK);
    /* the footer kept, the pages before it cut short: the chunks point past the data */
    uint32_t flen;
    memcpy(&flen, data + len - 8, 4);
    uint8_t *cut = malloc(len);
    for (size_t keep = 4; keep < len - 8 - flen; keep += 7) {
        memcpy(cut, data, keep);
        memcpy(cut + keep, data + len - 8 - flen, flen + 8);
        assert_int_not_equal(read_all(cut, keep + flen + 8), CDC_OK);
    }
    free(cut);
    free(data);
}

static void flip_bytes(const uint8_t *data, size_t len, int rounds, uint64_t seed, size_t *failed)
{
    uint8_t *copy = malloc(len);

    for (int i = 0; i < rounds; i++) {
        memcpy(copy, data, len);
        int flips = 1 + i % 3;
        for (int k = 0; k < flips; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(seed >> 33) % len;
            /* half the flips in the last 2 KiB: the footer and the last pages */
            if (i % 2 && len > 2048)
                at = len - 1 - at % 2048;
            copy[at] ^= (uint8_t)(1 + ((seed >> 20) % 255));
        }
        if (read_all(copy, len) != CDC_OK)
            (*failed)++;
    }
    free(copy);
}

static void test_random_flips(void **state)
{
    cdc_pq_options_t opts;
    size_t len, failed = 0;
    (void)state;

    cdc_pq_options_init(&opts);
    opts.row_group_bytes = 4096;
    opts.page_bytes = 256;
    opts.codec = CDC_PQ_CODEC_NONE;
    uint8_t *data = write_file(&opts, 120, &len, NULL);
    flip_bytes(data, len, 400, 1, &failed);
    free(data);
    opts.codec = CDC_PQ_CODEC_SNAPPY;
    data = write_file(&opts, 120, &len, NULL);
    flip_bytes(data, len, 150, 2, &failed);
    free(data);
    opts.codec = CDC_PQ_CODEC_ZSTD;
    opts.dictionary = false;
    data = write_file(&opts, 120, &len, NULL);
    flip_bytes(data, len, 150, 3, &failed);
    free(data);
    assert_true(failed > 0); /* damage is noticed, at least sometimes */
}

/*
 * A file the writer cannot produce, built by hand: a data page v2 (levels before the
 * values, uncompressed in a snappy chunk), no iceberg.schema key. Column x: optional
 * int with field id 5, rows 7, NULL, -9.
 */
static void test_data_page_v2(void **state)
{
    static const uint8_t body[] = {0x03, 0x05, /* levels 1,0,1: one bit-packed group */
                                   7,    0,    0, 0, 0xF7, 0xFF, 0xFF, 0xFF};
    cdc_thrift_t h, f;
    cdc_pq_reader_t *rd = NULL;
    cdc_error_t err;
    const cdc_ice_value_t *vals;
    uint8_t file[512];
    size_t len = 0;
    (void)state;

    cdc_thrift_init(&h);
    cdc_thrift_struct_begin(&h);
    cdc_thrift_field_i32(&h, 1, 3); /* DATA_PAGE_V2 */
    cdc_thrift_field_i32(&h, 2, sizeof(body));
    cdc_thrift_field_i32(&h, 3, sizeof(body));
    cdc_thrift_field_struct_begin(&h, 8);
    cdc_thrift_field_i32(&h, 1, 3); /* num_values */
    cdc_thrift_field_i32(&h, 2, 1); /* num_nulls */
    cdc_thrift_field_i32(&h, 3, 3); /* num_rows */
    cdc_thrift_field_i32(&h, 4, 0); /* PLAIN */
    cdc_thrift_field_i32(&h, 5, 2); /* definition_levels_byte_length */
    cdc_thrift_field_i32(&h, 6, 0);
    cdc_thrift_field_bool(&h, 7, false); /* is_compressed */
    cdc_thrift_struct_end(&h);
    cdc_thrift_struct_end(&h);
    int64_t chunk = (int64_t)(h.len + sizeof(body));

    cdc_thrift_init(&f);
    cdc_thrift_struct_begin(&f);
    cdc_thrift_field_i32(&f, 1, 2);
    cdc_thrift_field_list_begin(&f, 2, CDC_THRIFT_STRUCT, 2);
    cdc_thrift_struct_begin(&f);
    cdc_thrift_field_string(&f, 4, "schema");
    cdc_thrift_field_i32(&f, 5, 1);
    cdc_thrift_struct_end(&f);
    cdc_thrift_struct_begin(&f);
    cdc_thrift_field_i32(&f, 1, 1); /* INT32 */
    cdc_thrift_field_i32(&f, 3, 1); /* OPTIONAL */
    cdc_thrift_field_string(&f, 4, "x");
    cdc_thrift_field_i32(&f, 9, 5);
    cdc_thrift_struct_end(&f);
    cdc_thrift_field_i64(&f, 3, 3);
    cdc_thrift_field_list_begin(&f, 4, CDC_THRIFT_STRUCT, 1);
    cdc_thrift_struct_begin(&f);
    cdc_thrift_field_list_begin(&f, 1, CDC_THRIFT_STRUCT, 1);
    cdc_thrift_struct_begin(&f);
    cdc_thrift_field_i64(&f, 2, 4);
    cdc_thrift_field_struct_begin(&f, 3);
    cdc_thrift_field_i32(&f, 1, 1);
    cdc_thrift_field_list_begin(&f, 2, CDC_THRIFT_I32, 1);
    cdc_thrift_i32(&f, 0);
    cdc_thrift_field_list_begin(&f, 3, CDC_THRIFT_BINARY, 1);
    cdc_thrift_binary(&f, "x", 1);
    cdc_thrift_field_i32(&f, 4, 1); /* SNAPPY */
    cdc_thrift_field_i64(&f, 5, 3);
    cdc_thrift_field_i64(&f, 6, chunk);
    cdc_thrift_field_i64(&f, 7, chunk);
    cdc_thrift_field_i64(&f, 9, 4);
    cdc_thrift_struct_end(&f);
    cdc_thrift_struct_end(&f);
    cdc_thrift_field_i64(&f, 2, chunk);
    cdc_thrift_field_i64(&f, 3, 3);
    cdc_thrift_struct_end(&f);
    cdc_thrift_struct_end(&f);
    assert_false(h.oom || f.oom);
    assert_true(12 + h.len + sizeof(body) + f.len <= sizeof(file));

    memcpy(file, "PAR1", 4);
    len = 4;
    memcpy(file + len, h.data, h.len);
    len += h.len;
    memcpy(file + len, body, sizeof(body));
    len += sizeof(body);
    memcpy(file + len, f.data, f.len);
    len += f.len;
    uint32_t flen = (uint32_t)f.len;
    memcpy(file + len, &flen, 4);
    memcpy(file + len + 4, "PAR1", 4);
    len += 8;

    if (cdc_pq_reader_open(file, len, &rd, &err) != CDC_OK)
        fail_msg("open: %s", err.msg);
    const cdc_ice_schema_t *s = cdc_pq_reader_schema(rd);
    assert_int_equal(s->nfields, 1);
    assert_string_equal(s->fields[0].name, "x");
    assert_int_equal(s->fields[0].id, 5);
    assert_int_equal(s->fields[0].type, CDC_ICE_INT);
    assert_false(s->fields[0].required);
    if (cdc_pq_reader_column(rd, 0, &vals, &err) != CDC_OK)
        fail_msg("column: %s", err.msg);
    assert_false(vals[0].is_null);
    assert_int_equal(vals[0].v.i32, 7);
    assert_true(vals[1].is_null);
    assert_false(vals[2].is_null);
    assert_int_equal(vals[2].v.i32, -9);
    cdc_pq_reader_free(rd);
    for (size_t n = 0; n < len; n++)
        assert_int_not_equal(read_all(file, n), CDC_OK);
    cdc_thrift_free(&h);
    cdc_thrift_free(&f);
}

/*
 * Nested columns (docs/parquet.md, "Nested columns"): a file of list<string> with null
 * elements and empty lists, list<list<int>> and a struct holding a list, written in
 * small pages and row groups, reads back as the nested value text it was written with;
 * damaged copies fail cleanly.
 */
static const char *const nested_types[] = {
    "{\"type\":\"list\",\"element-id\":5,\"element\":\"string\",\"element-required\":false}",
    "{\"type\":\"list\",\"element-id\":6,\"element\":{\"type\":\"list\",\"element-id\":7,"
    "\"element\":\"int\",\"element-required\":false},\"element-required\":false}",
    "{\"type\":\"struct\",\"fields\":[{\"id\":8,\"name\":\"a\",\"required\":true,\"type\":"
    "\"long\"},{\"id\":9,\"name\":\"b\",\"required\":false,\"type\":{\"type\":\"list\","
    "\"element-id\":10,\"element\":\"string\",\"element-required\":true}},{\"id\":11,"
    "\"name\":\"d\",\"required\":false,\"type\":\"decimal(5,2)\"}]}",
};

/* Row i's value of nested column k, in the reader's (canonical) text; NULL for null. */
static const char *nested_value(int k, int i, char *buf, size_t cap)
{
    switch (k) {
    case 0:
        if (i % 7 == 3)
            return NULL;
        if (i % 5 == 0)
            return "[]";
        snprintf(buf, cap, "[\"t%d\",null,\"q\\\"%d\"]", i, i);
        return buf;
    case 1:
        if (i % 9 == 4)
            return NULL;
        snprintf(buf, cap, i % 11 == 0 ? "[null,[%d],[]]" : "[[%d,null,-%d],[%d]]", i, i, i);
        return buf;
    default:
        if (i % 6 == 1)
            return NULL;
        if (i % 4 == 0)
            snprintf(buf, cap, "{\"a\":%d,\"b\":null,\"d\":null}", i);
        else
            snprintf(buf, cap, "{\"a\":%d,\"b\":[\"x%d\"],\"d\":\"%d.%02d\"}", i, i, i % 900,
                     i % 100);
        return buf;
    }
}

static uint8_t *write_nested(const cdc_pq_options_t *opts, int rows, size_t *len)
{
    cdc_ice_field_t f[4] = {
        {.id = 1, .name = "id", .type = CDC_ICE_INT, .required = true},
        {.id = 2, .name = "tags", .type = CDC_ICE_LIST, .nested = (char *)nested_types[0]},
        {.id = 3, .name = "grid", .type = CDC_ICE_LIST, .nested = (char *)nested_types[1]},
        {.id = 4, .name = "s", .type = CDC_ICE_STRUCT, .nested = (char *)nested_types[2]},
    };
    cdc_ice_schema_t sch = {.schema_id = 1, .fields = f, .nfields = 4};
    cdc_pq_writer_t *w;
    cdc_error_t err;
    uint8_t *data;

    assert_int_equal(cdc_pq_writer_open_buffer(&sch, opts, &w, &err), CDC_OK);
    for (int i = 0; i < rows; i++) {
        char b[3][256];
        cdc_ice_value_t v[4];
        memset(v, 0, sizeof(v));
        v[0].v.i32 = i;
        for (int k = 0; k < 3; k++) {
            const char *t = nested_value(k, i, b[k], sizeof(b[k]));
            v[k + 1].is_null = t == NULL;
            v[k + 1].v.bytes.ptr = (const uint8_t *)t;
            v[k + 1].v.bytes.len = t ? strlen(t) : 0;
        }
        assert_int_equal(cdc_pq_writer_append(w, v, &err), CDC_OK);
    }
    assert_int_equal(cdc_pq_writer_close(w, NULL, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_take_buffer(w, &data, len), CDC_OK);
    cdc_pq_writer_free(w);
    return data;
}

static void test_nested_round_trip(void **state)
{
    static const cdc_pq_codec_t codecs[] = {CDC_PQ_CODEC_NONE, CDC_PQ_CODEC_SNAPPY,
                                            CDC_PQ_CODEC_ZSTD};
    (void)state;
    for (int c = 0; c < 3; c++) {
        cdc_pq_options_t opts;
        cdc_pq_reader_t *rd;
        cdc_error_t err;
        const cdc_ice_value_t *vals;
        size_t len, failed = 0;
        const int rows = 700;

        cdc_pq_options_init(&opts);
        opts.codec = codecs[c];
        opts.dictionary = c != 1;
        opts.row_group_bytes = 4096;
        opts.page_bytes = 300;
        uint8_t *data = write_nested(&opts, rows, &len);
        assert_int_equal(cdc_pq_reader_open(data, len, &rd, &err), CDC_OK);
        assert_int_equal(cdc_pq_reader_rows(rd), rows);
        assert_int_equal(cdc_pq_reader_schema(rd)->nfields, 4);
        assert_int_equal(cdc_pq_reader_schema(rd)->fields[3].type, CDC_ICE_STRUCT);
        assert_int_equal(cdc_pq_reader_column(rd, 0, &vals, &err), CDC_OK);
        for (int i = 0; i < rows; i++)
            assert_int_equal(vals[i].v.i32, i);
        for (int k = 0; k < 3; k++) {
            assert_int_equal(cdc_pq_reader_column(rd, (size_t)k + 1, &vals, &err), CDC_OK);
            for (int i = 0; i < rows; i++) {
                char b[256];
                const char *want = nested_value(k, i, b, sizeof(b));
                if (want == NULL) {
                    assert_true(vals[i].is_null);
                    continue;
                }
                assert_false(vals[i].is_null);
                assert_int_equal(vals[i].v.bytes.len, strlen(want));
                assert_memory_equal(vals[i].v.bytes.ptr, want, strlen(want));
            }
        }
        cdc_pq_reader_free(rd);
        /* damage: a clean error or a read, never a crash */
        if (c == 0) {
            for (size_t n = 0; n < len; n += 5)
                assert_int_not_equal(read_all(data, n), CDC_OK);
            flip_bytes(data, len, 300, 7, &failed);
            assert_true(failed > 0);
        }
        free(data);
    }
}

/* A list nested 20 levels deep (a leaf path of 40 names) and a struct of 30 levels:
 * column paths as deep as the type nests (they were capped at 32 names) written, read
 * back as written. */
static void test_deep_nesting(void **state)
{
    enum { LISTS = 20, STRUCTS = 30 };
    char ltype[2048] = "\"int\"", stype[4096] = "\"long\"", tmp[4096];
    char lval[256] = "", sval[1024] = "", t2[1024];
    (void)state;
    for (int d = 0; d < LISTS; d++) {
        snprintf(tmp, sizeof(tmp),
                 "{\"type\":\"list\",\"element-id\":%d,\"element\":%s,\"element-required\":false}",
                 100 + d, ltype);
        strcpy(ltype, tmp);
    }
    for (int d = 0; d < STRUCTS; d++) {
        snprintf(tmp, sizeof(tmp),
                 "{\"type\":\"struct\",\"fields\":[{\"id\":%d,\"name\":\"f%d\",\"required\":false,"
                 "\"type\":%s}]}",
                 200 + d, d, stype);
        strcpy(stype, tmp);
    }
    for (int d = 0; d < LISTS; d++)
        strcat(lval, "[");
    strcat(lval, "7,null");
    for (int d = 0; d < LISTS; d++)
        strcat(lval, "]");
    snprintf(sval, sizeof(sval), "42");
    for (int d = 0; d < STRUCTS; d++) {
        snprintf(t2, sizeof(t2), "{\"f%d\":%s}", d, sval);
        strcpy(sval, t2);
    }
    cdc_ice_field_t f[3] = {
        {.id = 1, .name = "id", .type = CDC_ICE_INT, .required = true},
        {.id = 2, .name = "deep", .type = CDC_ICE_LIST, .nested = ltype},
        {.id = 3, .name = "nest", .type = CDC_ICE_STRUCT, .nested = stype},
    };
    cdc_ice_schema_t sch = {.schema_id = 1, .fields = f, .nfields = 3};
    cdc_pq_options_t opts;
    cdc_pq_writer_t *w;
    cdc_pq_reader_t *rd;
    const cdc_ice_value_t *vals;
    cdc_error_t err;
    uint8_t *data;
    size_t len;

    cdc_pq_options_init(&opts);
    assert_int_equal(cdc_pq_writer_open_buffer(&sch, &opts, &w, &err), CDC_OK);
    for (int i = 0; i < 3; i++) {
        cdc_ice_value_t v[3];
        memset(v, 0, sizeof(v));
        v[0].v.i32 = i;
        v[1].is_null = i == 1;
        v[1].v.bytes.ptr = (const uint8_t *)lval;
        v[1].v.bytes.len = i == 1 ? 0 : strlen(lval);
        v[2].is_null = i == 2;
        v[2].v.bytes.ptr = (const uint8_t *)sval;
        v[2].v.bytes.len = i == 2 ? 0 : strlen(sval);
        assert_int_equal(cdc_pq_writer_append(w, v, &err), CDC_OK);
    }
    assert_int_equal(cdc_pq_writer_close(w, NULL, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_take_buffer(w, &data, &len), CDC_OK);
    cdc_pq_writer_free(w);

    assert_int_equal(cdc_pq_reader_open(data, len, &rd, &err), CDC_OK);
    assert_int_equal(cdc_pq_reader_rows(rd), 3);
    assert_int_equal(cdc_pq_reader_column(rd, 1, &vals, &err), CDC_OK);
    assert_string_equal((const char *)vals[0].v.bytes.ptr, lval);
    assert_true(vals[1].is_null);
    assert_int_equal(cdc_pq_reader_column(rd, 2, &vals, &err), CDC_OK);
    assert_int_equal(vals[0].v.bytes.len, strlen(sval));
    assert_memory_equal(vals[0].v.bytes.ptr, sval, strlen(sval));
    assert_true(vals[2].is_null);
    cdc_pq_reader_free(rd);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_codec_and_dictionary),
        cmocka_unit_test(test_row_groups_and_pages),
        cmocka_unit_test(test_dictionary_fallback),
        cmocka_unit_test(test_zero_rows),
        cmocka_unit_test(test_bitpacked_then_short_run),
        cmocka_unit_test(test_schema_from_parquet_types),
        cmocka_unit_test(test_not_parquet),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_random_flips),
        cmocka_unit_test(test_data_page_v2),
        cmocka_unit_test(test_nested_round_trip),
        cmocka_unit_test(test_deep_nesting),
    };
    schema_init();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
