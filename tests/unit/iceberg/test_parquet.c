/*
 * Unit tests for the Parquet writer (common/iceberg/parquet*.c), bounds.c,
 * decimal.c and schema.c: the RLE/bit-packed
 * hybrid encoding, Iceberg single-value bound encodings for every type, string
 * and binary bound truncation, decimal parsing, the writer's file framing,
 * data-file statistics, row-group splitting, dictionary fallback and the
 * schema JSON mapping. Values read back by an independent reader are checked
 * in tests/js/parquet_readback.test.mjs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <math.h>

#include <cmocka.h>

#include "common/iceberg/parquet.h"
#include "common/iceberg/parquet_int.h" /* cdc_pq__hybrid_encode_u32 */
#include "common/iceberg/parquet_read.h"
#include "common/iceberg/schema.h"

#define ASSERT_BYTES(got, glen, ...)                                                               \
    do {                                                                                           \
        const uint8_t want_[] = {__VA_ARGS__};                                                     \
        assert_int_equal((glen), sizeof(want_));                                                   \
        assert_memory_equal((got), want_, sizeof(want_));                                          \
    } while (0)

/* ---- RLE / bit-packed hybrid -------------------------------------------------- */

static void test_hybrid_hand_computed(void **state)
{
    uint8_t out[256];
    size_t n;
    (void)state;

    uint32_t run[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    n = cdc_pq__hybrid_encode_u32(run, 10, 1, out, sizeof(out));
    ASSERT_BYTES(out, n, 0x14, 0x01); /* RLE: varint(10 << 1), value */

    uint32_t seq[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    n = cdc_pq__hybrid_encode_u32(seq, 8, 3, out, sizeof(out));
    ASSERT_BYTES(out, n, 0x03, 0x88, 0xC6, 0xFA); /* the spec's bit-packing example */

    /* three literals, then a run of ten: the run completes the group of 8 */
    uint32_t mixed[13] = {1, 2, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
    n = cdc_pq__hybrid_encode_u32(mixed, 13, 3, out, sizeof(out));
    ASSERT_BYTES(out, n, 0x03, 0xD1, 0xDA, 0xB6, 0x0A, 0x05);

    uint32_t tail[3] = {1, 0, 1}; /* last group zero-padded */
    n = cdc_pq__hybrid_encode_u32(tail, 3, 1, out, sizeof(out));
    ASSERT_BYTES(out, n, 0x03, 0x05);

    uint32_t wide[9] = {300, 300, 300, 300, 300, 300, 300, 300, 300};
    n = cdc_pq__hybrid_encode_u32(wide, 9, 9, out, sizeof(out)); /* value in 2 bytes LE */
    ASSERT_BYTES(out, n, 0x12, 0x2C, 0x01);
}

static uint64_t get_varint(const uint8_t **p)
{
    uint64_t v = 0;
    int shift = 0;
    while (**p & 0x80) {
        v |= (uint64_t)(**p & 0x7F) << shift;
        shift += 7;
        (*p)++;
    }
    v |= (uint64_t) * *p << shift;
    (*p)++;
    return v;
}

/* Reference decoder, written from the spec, for round trips. */
static size_t hybrid_decode(const uint8_t *p, const uint8_t *end, int bw, uint32_t *out, size_t n)
{
    size_t got = 0;
    while (p < end && got < n) {
        uint64_t h = get_varint(&p);
        if (h & 1) {
            size_t count = (size_t)(h >> 1) * 8;
            uint64_t acc = 0;
            int nbits = 0;
            for (size_t i = 0; i < count; i++) {
                while (nbits < bw) {
                    acc |= (uint64_t)*p++ << nbits;
                    nbits += 8;
                }
                if (got < n)
                    out[got++] = (uint32_t)(acc & ((1ull << bw) - 1));
                acc >>= bw;
                nbits -= bw;
            }
        } else {
            size_t count = (size_t)(h >> 1);
            uint32_t v = 0;
            for (int k = 0; k < (bw + 7) / 8; k++)
                v |= (uint32_t)*p++ << (8 * k);
            for (size_t i = 0; i < count && got < n; i++)
                out[got++] = v;
        }
    }
    return got;
}

static void test_hybrid_round_trip(void **state)
{
    enum { N = 5000 };
    uint32_t *in = malloc(N * sizeof(uint32_t)), *back = malloc(N * sizeof(uint32_t));
    uint8_t *enc = malloc(N * 8);
    uint64_t seed = 7;
    (void)state;

    for (int bw = 1; bw <= 20; bw++) {
        for (int i = 0; i < N; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t r = (uint32_t)(seed >> 33);
            /* alternate runs and noise */
            in[i] = (i / 37) % 2 ? (uint32_t)(i / 37) : r;
            in[i] &= (uint32_t)((1ull << bw) - 1);
        }
        size_t len = cdc_pq__hybrid_encode_u32(in, N, bw, enc, N * 8);
        assert_true(len > 0);
        assert_int_equal(hybrid_decode(enc, enc + len, bw, back, N), N);
        assert_memory_equal(in, back, N * sizeof(uint32_t));
    }
    free(in);
    free(back);
    free(enc);
}

/* ---- bounds ------------------------------------------------------------------- */

static size_t bound(cdc_ice_type_t type, const cdc_ice_value_t *v, uint8_t *out)
{
    cdc_ice_field_t f = {.id = 1, .name = "c", .type = type, .precision = 20, .scale = 2};
    size_t len = 0;
    assert_true(cdc_ice_bound_encode(&f, v, out, 64, &len));
    return len;
}

static void test_bound_encodings(void **state)
{
    uint8_t out[64];
    cdc_ice_value_t v;
    size_t n;
    (void)state;

    v = (cdc_ice_value_t){.v.b = true};
    n = bound(CDC_ICE_BOOLEAN, &v, out);
    ASSERT_BYTES(out, n, 0x01);
    v = (cdc_ice_value_t){.v.i32 = 1};
    n = bound(CDC_ICE_INT, &v, out);
    ASSERT_BYTES(out, n, 0x01, 0x00, 0x00, 0x00);
    v = (cdc_ice_value_t){.v.i32 = -2};
    n = bound(CDC_ICE_INT, &v, out);
    ASSERT_BYTES(out, n, 0xFE, 0xFF, 0xFF, 0xFF);
    v = (cdc_ice_value_t){.v.i32 = 19000}; /* days */
    n = bound(CDC_ICE_DATE, &v, out);
    ASSERT_BYTES(out, n, 0x38, 0x4A, 0x00, 0x00);
    v = (cdc_ice_value_t){.v.i64 = 0x0102030405060708LL};
    n = bound(CDC_ICE_LONG, &v, out);
    ASSERT_BYTES(out, n, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01);
    v = (cdc_ice_value_t){.v.i64 = 1000000}; /* micros */
    n = bound(CDC_ICE_TIME, &v, out);
    ASSERT_BYTES(out, n, 0x40, 0x42, 0x0F, 0x00, 0x00, 0x00, 0x00, 0x00);
    v = (cdc_ice_value_t){.v.i64 = -1};
    n = bound(CDC_ICE_TIMESTAMP, &v, out);
    ASSERT_BYTES(out, n, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF);
    v = (cdc_ice_value_t){.v.i64 = 256};
    n = bound(CDC_ICE_TIMESTAMPTZ, &v, out);
    ASSERT_BYTES(out, n, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00);
    v = (cdc_ice_value_t){.v.f32 = 1.5f};
    n = bound(CDC_ICE_FLOAT, &v, out);
    ASSERT_BYTES(out, n, 0x00, 0x00, 0xC0, 0x3F);
    v = (cdc_ice_value_t){.v.f64 = -2.0};
    n = bound(CDC_ICE_DOUBLE, &v, out);
    ASSERT_BYTES(out, n, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xC0);
    /* decimals: minimal big-endian two's complement of the unscaled value */
    v = (cdc_ice_value_t){.v.dec = 1234};
    n = bound(CDC_ICE_DECIMAL, &v, out);
    ASSERT_BYTES(out, n, 0x04, 0xD2);
    v = (cdc_ice_value_t){.v.dec = 0};
    n = bound(CDC_ICE_DECIMAL, &v, out);
    ASSERT_BYTES(out, n, 0x00);
    v = (cdc_ice_value_t){.v.dec = -1};
    n = bound(CDC_ICE_DECIMAL, &v, out);
    ASSERT_BYTES(out, n, 0xFF);
    v = (cdc_ice_value_t){.v.dec = 128};
    n = bound(CDC_ICE_DECIMAL, &v, out);
    ASSERT_BYTES(out, n, 0x00, 0x80);
    v = (cdc_ice_value_t){.v.dec = -129};
    n = bound(CDC_ICE_DECIMAL, &v, out);
    ASSERT_BYTES(out, n, 0xFF, 0x7F);
    v = (cdc_ice_value_t){.v.dec = -128};
    n = bound(CDC_ICE_DECIMAL, &v, out);
    ASSERT_BYTES(out, n, 0x80);
    v = (cdc_ice_value_t){.v.bytes = {(const uint8_t *)"héllo", 6}};
    n = bound(CDC_ICE_STRING, &v, out);
    ASSERT_BYTES(out, n, 'h', 0xC3, 0xA9, 'l', 'l', 'o');
    v = (cdc_ice_value_t){.v.bytes = {(const uint8_t *)"\x00\xFF", 2}};
    n = bound(CDC_ICE_BINARY, &v, out);
    ASSERT_BYTES(out, n, 0x00, 0xFF);
    for (int i = 0; i < 16; i++)
        v.v.uuid[i] = (uint8_t)i;
    n = bound(CDC_ICE_UUID, &v, out);
    ASSERT_BYTES(out, n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

static void test_truncation(void **state)
{
    uint8_t out[64];
    size_t n;
    const char *abc = "abcdefghijklmnopqrstuvwxyz";
    (void)state;

    assert_true(cdc_ice_truncate_lower(true, (const uint8_t *)abc, 26, 16, out, 64, &n));
    assert_int_equal(n, 16);
    assert_memory_equal(out, "abcdefghijklmnop", 16);
    assert_true(cdc_ice_truncate_upper(true, (const uint8_t *)abc, 26, 16, out, 64, &n));
    assert_int_equal(n, 16);
    assert_memory_equal(out, "abcdefghijklmnoq", 16);
    /* short values are exact bounds */
    assert_true(cdc_ice_truncate_upper(true, (const uint8_t *)"abc", 3, 16, out, 64, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(out, "abc", 3);
    assert_true(cdc_ice_truncate_upper(true, (const uint8_t *)"", 0, 16, out, 64, &n));
    assert_int_equal(n, 0);

    /* 17 x U+00E9: truncation counts code points, the increment gives U+00EA */
    char e17[64] = "";
    for (int i = 0; i < 17; i++)
        strcat(e17, "\xC3\xA9");
    assert_true(cdc_ice_truncate_lower(true, (const uint8_t *)e17, 34, 16, out, 64, &n));
    assert_int_equal(n, 32);
    assert_true(cdc_ice_truncate_upper(true, (const uint8_t *)e17, 34, 16, out, 64, &n));
    assert_int_equal(n, 32);
    assert_memory_equal(out, e17, 30);
    assert_memory_equal(out + 30, "\xC3\xAA", 2);

    /* the last code point cannot grow: carry into the previous one, drop the rest */
    char s[80] = "a";
    for (int i = 0; i < 15; i++)
        strcat(s, "\xF4\x8F\xBF\xBF"); /* U+10FFFF */
    strcat(s, "z");
    assert_true(cdc_ice_truncate_upper(true, (const uint8_t *)s, strlen(s), 16, out, 64, &n));
    ASSERT_BYTES(out, n, 'b');
    /* all maximal: no upper bound */
    char m[80] = "";
    for (int i = 0; i < 17; i++)
        strcat(m, "\xF4\x8F\xBF\xBF");
    assert_false(cdc_ice_truncate_upper(true, (const uint8_t *)m, strlen(m), 16, out, 64, &n));
    /* U+D7FF + 1 skips the surrogates */
    char d[80] = "";
    for (int i = 0; i < 17; i++)
        strcat(d, "\xED\x9F\xBF");
    assert_true(cdc_ice_truncate_upper(true, (const uint8_t *)d, strlen(d), 16, out, 64, &n));
    assert_int_equal(n, 48);
    assert_memory_equal(out + 45, "\xEE\x80\x80", 3);

    /* binary: bytes, carry over 0xFF */
    uint8_t b[20];
    memset(b, 0xFF, sizeof(b));
    b[0] = 0x01;
    assert_true(cdc_ice_truncate_lower(false, b, 20, 16, out, 64, &n));
    assert_int_equal(n, 16);
    assert_true(cdc_ice_truncate_upper(false, b, 20, 16, out, 64, &n));
    ASSERT_BYTES(out, n, 0x02);
    b[0] = 0xFF;
    assert_false(cdc_ice_truncate_upper(false, b, 20, 16, out, 64, &n));
    b[3] = 0x10;
    assert_true(cdc_ice_truncate_upper(false, b, 20, 16, out, 64, &n));
    ASSERT_BYTES(out, n, 0xFF, 0xFF, 0xFF, 0x11);
}

static void test_decimal_parse(void **state)
{
    __int128 v;
    (void)state;

    assert_int_equal(cdc_ice_decimal_parse("12.3", 4, 12, 2, &v), CDC_OK);
    assert_true(v == 1230);
    assert_int_equal(cdc_ice_decimal_parse("-0.05", 5, 12, 2, &v), CDC_OK);
    assert_true(v == -5);
    assert_int_equal(cdc_ice_decimal_parse("+7", 2, 12, 2, &v), CDC_OK);
    assert_true(v == 700);
    assert_int_equal(cdc_ice_decimal_parse("12.340", 6, 12, 2, &v), CDC_OK);
    assert_true(v == 1234);
    assert_int_equal(cdc_ice_decimal_parse("9999999999.99", 13, 12, 2, &v), CDC_OK);
    assert_true(v == 999999999999LL);
    assert_int_equal(cdc_ice_decimal_parse("12.345", 6, 12, 2, &v), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_decimal_parse("99999999999", 11, 12, 2, &v), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_decimal_parse("abc", 3, 12, 2, &v), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_decimal_parse("", 0, 12, 2, &v), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_decimal_parse("1e3", 3, 12, 2, &v), CDC_ERR_INVALID);
    assert_int_equal(
        cdc_ice_decimal_parse("-9999999999999999999999999999.9999999999", 40, 38, 10, &v), CDC_OK);
    assert_true(v < 0 && v % 10 == -9);
}

/* ---- writer ------------------------------------------------------------------- */

static cdc_ice_field_t fields3[] = {
    {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
    {.id = 2, .name = "name", .type = CDC_ICE_STRING, .required = false},
    {.id = 3, .name = "score", .type = CDC_ICE_DOUBLE, .required = false},
};
static const cdc_ice_schema_t schema3 = {.schema_id = 7, .fields = fields3, .nfields = 3};

static uint8_t *write_rows(const cdc_pq_options_t *opts, int rows, int distinct, size_t *len,
                           cdc_ice_data_file_t *df)
{
    cdc_pq_writer_t *w = NULL;
    cdc_error_t err;
    uint8_t *data = NULL;
    char name[64];

    assert_int_equal(cdc_pq_writer_open_buffer(&schema3, opts, &w, &err), CDC_OK);
    for (int i = 0; i < rows; i++) {
        cdc_ice_value_t v[3] = {{.v.i64 = 100 - i}};
        int n = snprintf(name, sizeof(name), "name-%03d-abcdefghijklmnopqrstuvwxyz", i % distinct);
        v[1].v.bytes.ptr = (const uint8_t *)name;
        v[1].v.bytes.len = (size_t)n;
        v[1].is_null = i % 10 == 3;
        v[2].v.f64 = i == 5 ? NAN : i * 0.5;
        v[2].is_null = i % 10 == 4;
        assert_int_equal(cdc_pq_writer_append(w, v, &err), CDC_OK);
    }
    assert_int_equal(cdc_pq_writer_rows(w), rows);
    assert_true(cdc_pq_writer_size(w) > 4);
    assert_int_equal(cdc_pq_writer_close(w, df, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_take_buffer(w, &data, len), CDC_OK);
    cdc_pq_writer_free(w);
    return data;
}

static void test_writer_framing_and_stats(void **state)
{
    cdc_pq_options_t opts;
    cdc_ice_data_file_t df;
    size_t len;
    uint8_t *data;
    uint32_t footer;
    (void)state;

    cdc_pq_options_init(&opts);
    data = write_rows(&opts, 100, 20, &len, &df);
    assert_memory_equal(data, "PAR1", 4);
    assert_memory_equal(data + len - 4, "PAR1", 4);
    memcpy(&footer, data + len - 8, 4);
    assert_true(footer > 0 && footer < len - 12);
    assert_int_equal(df.record_count, 100);
    assert_int_equal(df.file_size_in_bytes, (int64_t)len);
    assert_int_equal(df.schema_id, 7);
    assert_null(df.path);
    assert_int_equal(df.nsplit_offsets, 1);
    assert_int_equal(df.split_offsets[0], 4);
    assert_int_equal(df.nstats, 3);

    const cdc_ice_col_stats_t *id = &df.stats[0], *name = &df.stats[1], *score = &df.stats[2];
    assert_int_equal(id->field_id, 1);
    assert_int_equal(id->value_count, 100);
    assert_int_equal(id->null_count, 0);
    assert_int_equal(id->nan_count, -1);
    assert_true(id->column_size > 0);
    assert_true(id->has_bounds);
    ASSERT_BYTES(id->lower, id->lower_len, 1, 0, 0, 0, 0, 0, 0, 0);   /* 100 - 99 */
    ASSERT_BYTES(id->upper, id->upper_len, 100, 0, 0, 0, 0, 0, 0, 0); /* 100 - 0 */

    assert_int_equal(name->value_count, 100);
    assert_int_equal(name->null_count, 10);
    assert_true(name->has_bounds);
    assert_int_equal(name->lower_len, 16);
    assert_memory_equal(name->lower, "name-000-abcdefg", 16);
    assert_int_equal(name->upper_len, 16);
    assert_memory_equal(name->upper, "name-019-abcdefh", 16);

    assert_int_equal(score->null_count, 10);
    assert_int_equal(score->nan_count, 1);
    double lo, hi;
    memcpy(&lo, score->lower, 8);
    memcpy(&hi, score->upper, 8);
    assert_true(lo == 0.0 && hi == 99 * 0.5);

    cdc_ice_data_file_t copy;
    assert_int_equal(cdc_ice_data_file_copy(&copy, &df), CDC_OK);
    assert_memory_equal(copy.stats, df.stats, 3 * sizeof(cdc_ice_col_stats_t));
    cdc_ice_data_file_clear(&copy);
    cdc_ice_data_file_clear(&df);
    assert_null(df.stats);
    free(data);
}

static void test_writer_rejects_bad_rows(void **state)
{
    cdc_ice_field_t f[] = {
        {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
        {.id = 2, .name = "amount", .type = CDC_ICE_DECIMAL, .precision = 4, .scale = 2},
    };
    cdc_ice_schema_t s = {.fields = f, .nfields = 2};
    cdc_pq_writer_t *w = NULL;
    cdc_error_t err;
    cdc_ice_value_t v[2] = {{.is_null = true}, {.v.dec = 1}};
    (void)state;

    assert_int_equal(cdc_pq_writer_open_buffer(&s, NULL, &w, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_append(w, v, &err), CDC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "\"id\""));
    v[0] = (cdc_ice_value_t){.v.i64 = 1};
    v[1].v.dec = 10000; /* 100.00 does not fit decimal(4,2) */
    assert_int_equal(cdc_pq_writer_append(w, v, &err), CDC_ERR_INVALID);
    v[1].v.dec = -9999;
    assert_int_equal(cdc_pq_writer_append(w, v, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_rows(w), 1);
    cdc_pq_writer_free(w);

    f[1].precision = 40;
    assert_int_equal(cdc_pq_writer_open_buffer(&s, NULL, &w, &err), CDC_ERR_INVALID);

    /* a byte array past the 1 GiB value limit is refused before it is read */
    cdc_ice_field_t g[] = {{.id = 1, .name = "blob", .type = CDC_ICE_BINARY, .required = true}};
    cdc_ice_schema_t gs = {.fields = g, .nfields = 1};
    uint8_t one = 1;
    cdc_ice_value_t big = {.v.bytes = {&one, ((size_t)1 << 30) + 1}};
    assert_int_equal(cdc_pq_writer_open_buffer(&gs, NULL, &w, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_append(w, &big, &err), CDC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "\"blob\""));
    big.v.bytes.len = 1;
    assert_int_equal(cdc_pq_writer_append(w, &big, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_rows(w), 1);
    cdc_pq_writer_free(w);
}

/* Large values (docs/worker.md, "Large rows"): read back byte for byte, their statistics
 * kept as bounded prefixes (no copy of a value in them), the bounds still right: the
 * Parquet min/max truncated and inexact, Iceberg's 16-byte bounds those of the values. */
static void test_large_values(void **state)
{
    cdc_ice_field_t f[] = {{.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
                           {.id = 2, .name = "t", .type = CDC_ICE_STRING}};
    cdc_ice_schema_t s = {.fields = f, .nfields = 2};
    const size_t n = (size_t)3 << 20;
    char *v[3];
    cdc_pq_writer_t *w = NULL;
    cdc_ice_data_file_t df;
    cdc_pq_reader_t *rd = NULL;
    const cdc_ice_value_t *vals;
    cdc_error_t err;
    uint8_t *data;
    size_t len;
    (void)state;

    assert_int_equal(cdc_pq_writer_open_buffer(&s, NULL, &w, &err), CDC_OK);
    for (int i = 0; i < 3; i++) {
        /* "b...", "a..." and "b..." again but longer than the first one's prefix shows */
        v[i] = malloc(n);
        assert_non_null(v[i]);
        for (size_t k = 0; k < n; k++)
            v[i][k] = (char)('a' + (k * 7) % 26);
        v[i][0] = i == 1 ? 'a' : 'b';
        v[i][n - 1] = (char)('0' + i);
        cdc_ice_value_t row[2] = {{.v.i64 = i}, {.v.bytes = {(const uint8_t *)v[i], n}}};
        assert_int_equal(cdc_pq_writer_append(w, row, &err), CDC_OK);
    }
    assert_int_equal(cdc_pq_writer_close(w, &df, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_take_buffer(w, &data, &len), CDC_OK);
    cdc_pq_writer_free(w);

    const cdc_ice_col_stats_t *t = &df.stats[1];
    assert_true(t->has_bounds);
    assert_int_equal(t->lower_len, 16);
    assert_memory_equal(t->lower, v[1], 16);
    assert_int_equal(t->upper_len, 16);
    assert_memory_equal(t->upper, v[0], 15); /* the larger prefix, its 16th byte + 1 */
    assert_int_equal((uint8_t)t->upper[15], (uint8_t)v[0][15] + 1);

    assert_int_equal(cdc_pq_reader_open(data, len, &rd, &err), CDC_OK);
    assert_int_equal(cdc_pq_reader_rows(rd), 3);
    assert_int_equal(cdc_pq_reader_column(rd, 1, &vals, &err), CDC_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(vals[i].v.bytes.len, n);
        assert_memory_equal(vals[i].v.bytes.ptr, v[i], n);
        free(v[i]);
    }
    cdc_pq_reader_free(rd);
    cdc_ice_data_file_clear(&df);
    free(data);
}

/* A value above PQ_LARGE_PAGE among small ones, in every codec: its page is compressed
 * (or written) from the column's buffer without a page copy (docs/parquet.md, "Large
 * values"), and the file reads back the same, also in a second row group after the
 * writer released its large buffers. */
static void test_large_page_codecs(void **state)
{
    cdc_ice_field_t f[] = {{.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
                           {.id = 2, .name = "t", .type = CDC_ICE_STRING}};
    cdc_ice_schema_t s = {.fields = f, .nfields = 2};
    const size_t big = (size_t)9 << 20;
    const cdc_pq_codec_t codecs[] = {CDC_PQ_CODEC_ZSTD, CDC_PQ_CODEC_SNAPPY, CDC_PQ_CODEC_NONE};
    char *v = malloc(big);
    (void)state;

    assert_non_null(v);
    for (size_t k = 0; k < big; k++)
        v[k] = (char)('a' + (k * 7 + k / 4093) % 26);
    for (size_t ci = 0; ci < sizeof(codecs) / sizeof(codecs[0]); ci++) {
        cdc_pq_options_t opts;
        cdc_pq_writer_t *w = NULL;
        cdc_pq_reader_t *rd = NULL;
        cdc_ice_data_file_t df;
        const cdc_ice_value_t *vals;
        cdc_error_t err;
        uint8_t *data;
        size_t len;
        cdc_pq_options_init(&opts);
        opts.codec = codecs[ci];
        assert_int_equal(cdc_pq_writer_open_buffer(&s, &opts, &w, &err), CDC_OK);
        /* rows 0..9: small, big (row 5) among them; a row group; rows 10..12 again */
        for (int i = 0; i < 13; i++) {
            char small[16];
            snprintf(small, sizeof(small), "small %d", i);
            bool is_big = i == 5 || i == 11;
            cdc_ice_value_t row[2] = {
                {.v.i64 = i},
                {.v.bytes = {is_big ? (const uint8_t *)v : (const uint8_t *)small,
                             is_big ? big : strlen(small)}}};
            if (i == 7)
                row[1].is_null = true;
            assert_int_equal(cdc_pq_writer_append(w, row, &err), CDC_OK);
            if (i == 9)
                assert_int_equal(cdc_pq_writer_flush(w, &err), CDC_OK);
        }
        assert_int_equal(cdc_pq_writer_close(w, &df, &err), CDC_OK);
        assert_int_equal(cdc_pq_writer_take_buffer(w, &data, &len), CDC_OK);
        cdc_pq_writer_free(w);
        if (codecs[ci] != CDC_PQ_CODEC_NONE)
            assert_true(len < big); /* compressed */
        assert_int_equal(cdc_pq_reader_open(data, len, &rd, &err), CDC_OK);
        assert_int_equal(cdc_pq_reader_rows(rd), 13);
        assert_int_equal(cdc_pq_reader_column(rd, 1, &vals, &err), CDC_OK);
        for (int i = 0; i < 13; i++) {
            char small[16];
            snprintf(small, sizeof(small), "small %d", i);
            if (i == 7) {
                assert_true(vals[i].is_null);
            } else if (i == 5 || i == 11) {
                assert_int_equal(vals[i].v.bytes.len, big);
                assert_memory_equal(vals[i].v.bytes.ptr, v, big);
            } else {
                assert_int_equal(vals[i].v.bytes.len, strlen(small));
                assert_memory_equal(vals[i].v.bytes.ptr, small, strlen(small));
            }
        }
        cdc_pq_reader_free(rd);
        cdc_ice_data_file_clear(&df);
        free(data);
    }
    free(v);
}

static void test_row_groups_split(void **state)
{
    cdc_pq_options_t opts;
    cdc_ice_data_file_t df;
    size_t len;
    uint8_t *data;
    (void)state;

    cdc_pq_options_init(&opts);
    opts.row_group_bytes = 4096;
    opts.page_bytes = 512;
    data = write_rows(&opts, 3000, 50, &len, &df);
    assert_true(df.nsplit_offsets > 3);
    assert_int_equal(df.split_offsets[0], 4);
    for (size_t i = 1; i < df.nsplit_offsets; i++)
        assert_true(df.split_offsets[i] > df.split_offsets[i - 1]);
    assert_true(df.split_offsets[df.nsplit_offsets - 1] < (int64_t)len);
    assert_int_equal(df.stats[0].value_count, 3000);
    assert_int_equal(df.stats[1].null_count, 300);
    cdc_ice_data_file_clear(&df);
    free(data);
}

static void test_dictionary_and_fallback(void **state)
{
    cdc_pq_options_t opts;
    cdc_ice_data_file_t df;
    size_t plain_len, dict_len, fb_len;
    uint8_t *plain, *dict, *fb;
    (void)state;

    cdc_pq_options_init(&opts);
    opts.codec = CDC_PQ_CODEC_NONE;
    opts.dictionary = false;
    plain = write_rows(&opts, 2000, 30, &plain_len, &df);
    cdc_ice_data_file_clear(&df);
    opts.dictionary = true;
    dict = write_rows(&opts, 2000, 30, &dict_len, &df);
    cdc_ice_data_file_clear(&df);
    /* 30 distinct 39-byte strings: the dictionary is far smaller than plain */
    assert_true(dict_len * 2 < plain_len);
    /* a dictionary limit below the cardinality falls back to exactly the plain file */
    opts.dict_max_entries = 10;
    fb = write_rows(&opts, 2000, 30, &fb_len, &df);
    assert_int_equal(fb_len, plain_len);
    assert_memory_equal(fb, plain, plain_len);
    cdc_ice_data_file_clear(&df);
    opts.dict_max_entries = 65536;
    opts.dict_max_bytes = 100; /* the byte limit too */
    free(fb);
    fb = write_rows(&opts, 2000, 30, &fb_len, &df);
    assert_memory_equal(fb, plain, plain_len);
    cdc_ice_data_file_clear(&df);
    free(plain);
    free(dict);
    free(fb);
}

static cdc_err_t collect(void *ctx, const void *data, size_t len, cdc_error_t *err)
{
    FILE *f = ctx;
    (void)err;
    return fwrite(data, 1, len, f) == len ? CDC_OK : CDC_ERR_IO;
}

static void test_sink_and_file_match_buffer(void **state)
{
    cdc_pq_options_t opts;
    cdc_ice_data_file_t df;
    cdc_pq_writer_t *w = NULL;
    cdc_error_t err;
    size_t len, slen;
    char *sbuf = NULL;
    char path[] = "/tmp/test_parquet_XXXXXX";
    uint8_t *data, fbuf[1 << 16];
    (void)state;

    cdc_pq_options_init(&opts);
    opts.codec = CDC_PQ_CODEC_SNAPPY;
    data = write_rows(&opts, 50, 5, &len, &df);
    cdc_ice_data_file_clear(&df);

    FILE *mem = open_memstream(&sbuf, &slen);
    assert_int_equal(cdc_pq_writer_open_sink(&schema3, collect, mem, &opts, &w, &err), CDC_OK);
    for (int i = 0; i < 50; i++) {
        char name[64];
        int n = snprintf(name, sizeof(name), "name-%03d-abcdefghijklmnopqrstuvwxyz", i % 5);
        cdc_ice_value_t v[3] = {{.v.i64 = 100 - i}, {.v.bytes = {(uint8_t *)name, (size_t)n}}};
        v[1].is_null = i % 10 == 3;
        v[2].v.f64 = i == 5 ? NAN : i * 0.5;
        v[2].is_null = i % 10 == 4;
        assert_int_equal(cdc_pq_writer_append(w, v, &err), CDC_OK);
    }
    assert_int_equal(cdc_pq_writer_close(w, NULL, &err), CDC_OK);
    cdc_pq_writer_free(w);
    fclose(mem);
    assert_int_equal(slen, len);
    assert_memory_equal(sbuf, data, len);
    free(sbuf);

    /* a file writer refuses to overwrite */
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(cdc_pq_writer_open_file(&schema3, path, &opts, &w, &err), CDC_ERR_EXISTS);
    unlink(path);
    assert_int_equal(cdc_pq_writer_open_file(&schema3, path, &opts, &w, &err), CDC_OK);
    cdc_ice_value_t v[3] = {{.v.i64 = 1}, {.is_null = true}, {.is_null = true}};
    assert_int_equal(cdc_pq_writer_append(w, v, &err), CDC_OK);
    assert_int_equal(cdc_pq_writer_close(w, &df, &err), CDC_OK);
    cdc_pq_writer_free(w);
    assert_string_equal(df.path, path);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t flen = fread(fbuf, 1, sizeof(fbuf), f);
    fclose(f);
    assert_int_equal(flen, df.file_size_in_bytes);
    assert_false(df.stats[1].has_bounds); /* all null */
    assert_int_equal(df.stats[1].null_count, 1);
    cdc_ice_data_file_clear(&df);
    unlink(path);
    free(data);
}

/* ---- schema JSON -------------------------------------------------------------- */

static void test_schema_json(void **state)
{
    cdc_ice_field_t f[] = {
        {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
        {.id = 2, .name = "amount", .type = CDC_ICE_DECIMAL, .precision = 12, .scale = 2},
        {.id = 3, .name = "at", .type = CDC_ICE_TIMESTAMPTZ, .doc = "when"},
    };
    int32_t ids[] = {1};
    cdc_ice_schema_t s = {
        .schema_id = 4, .fields = f, .nfields = 3, .identifier_ids = ids, .nidentifier = 1};
    cdc_ice_schema_t back, copy;
    cdc_error_t err;
    char *json;
    (void)state;

    json = cdc_ice_schema_to_json(&s);
    assert_string_equal(
        json, "{\"type\":\"struct\",\"schema-id\":4,\"fields\":["
              "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"long\"},"
              "{\"id\":2,\"name\":\"amount\",\"required\":false,\"type\":\"decimal(12,2)\"},"
              "{\"id\":3,\"name\":\"at\",\"required\":false,\"type\":\"timestamptz\","
              "\"doc\":\"when\"}],\"identifier-field-ids\":[1]}");
    assert_int_equal(cdc_ice_schema_from_json(json, &back, &err), CDC_OK);
    free(json);
    assert_int_equal(back.schema_id, 4);
    assert_int_equal(back.nfields, 3);
    assert_int_equal(back.fields[1].type, CDC_ICE_DECIMAL);
    assert_int_equal(back.fields[1].precision, 12);
    assert_int_equal(back.fields[1].scale, 2);
    assert_true(back.fields[0].required);
    assert_string_equal(back.fields[2].doc, "when");
    assert_int_equal(back.nidentifier, 1);
    assert_int_equal(cdc_ice_schema_find(&back, 3), 2);
    assert_int_equal(cdc_ice_schema_find(&back, 9), -1);
    assert_int_equal(cdc_ice_schema_copy(&copy, &back), CDC_OK);
    cdc_ice_schema_free(&back);
    assert_string_equal(copy.fields[1].name, "amount");
    cdc_ice_schema_free(&copy);

    /* a list needs its element; a map is not supported */
    assert_int_equal(cdc_ice_schema_from_json("{\"type\":\"struct\",\"fields\":[{\"id\":1,"
                                              "\"name\":\"l\",\"required\":true,\"type\":"
                                              "{\"type\":\"list\"}}]}",
                                              &back, &err),
                     CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_schema_from_json("{\"type\":\"struct\",\"fields\":[{\"id\":1,"
                                              "\"name\":\"m\",\"required\":true,\"type\":"
                                              "{\"type\":\"map\",\"key-id\":2,\"key\":\"int\","
                                              "\"value-id\":3,\"value\":\"int\"}}]}",
                                              &back, &err),
                     CDC_ERR_UNSUPPORTED);
    /* nested types keep their JSON (ids included) through a round trip */
    {
        const char *nj =
            "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"l\","
            "\"required\":false,\"type\":{\"type\":\"list\",\"element-id\":3,\"element\":{"
            "\"type\":\"struct\",\"fields\":[{\"id\":4,\"name\":\"a\",\"required\":true,"
            "\"type\":\"decimal(38,10)\"}]},\"element-required\":false}}],"
            "\"identifier-field-ids\":[]}";
        char *again;
        assert_int_equal(cdc_ice_schema_from_json(nj, &back, &err), CDC_OK);
        assert_int_equal(back.fields[0].type, CDC_ICE_LIST);
        assert_int_equal(cdc_ice_field_max_id(&back.fields[0]), 4);
        again = cdc_ice_schema_to_json(&back);
        assert_string_equal(again, nj);
        free(again);
        cdc_ice_schema_free(&back);
    }
    assert_int_equal(cdc_ice_schema_from_json("{", &back, &err), CDC_ERR_INVALID);

    cdc_ice_field_t t = {0};
    char buf[40];
    for (int k = 0; k < CDC_ICE__TYPE_COUNT; k++) {
        cdc_ice_field_t g = {.type = (cdc_ice_type_t)k, .precision = 38, .scale = 10};
        assert_int_equal(cdc_ice_type_parse(cdc_ice_type_string(&g, buf, sizeof(buf)), &t), CDC_OK);
        assert_int_equal(t.type, k);
    }
    assert_int_equal(cdc_ice_type_parse("decimal(39,1)", &t), CDC_ERR_INVALID);
    assert_int_equal(cdc_ice_type_parse("varchar", &t), CDC_ERR_UNSUPPORTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_hand_computed),
        cmocka_unit_test(test_hybrid_round_trip),
        cmocka_unit_test(test_bound_encodings),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_decimal_parse),
        cmocka_unit_test(test_writer_framing_and_stats),
        cmocka_unit_test(test_writer_rejects_bad_rows),
        cmocka_unit_test(test_large_values),
        cmocka_unit_test(test_row_groups_split),
        cmocka_unit_test(test_dictionary_and_fallback),
        cmocka_unit_test(test_sink_and_file_match_buffer),
        cmocka_unit_test(test_schema_json),
        cmocka_unit_test(test_large_page_codecs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
