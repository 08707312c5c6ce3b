/*
 * Unit tests for common/iceberg/thrift.c: the Thrift compact-protocol encodings
 * used by the Parquet footer and page headers, checked against hand-computed
 * bytes from the Thrift compact protocol specification, and the decoder: what the
 * encoder writes reads back, and truncated or malformed input is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/iceberg/thrift.h"

#define EXPECT_BYTES(t, ...)                                                                       \
    do {                                                                                           \
        const uint8_t want_[] = {__VA_ARGS__};                                                     \
        assert_false((t)->oom);                                                                    \
        assert_int_equal((t)->len, sizeof(want_));                                                 \
        assert_memory_equal((t)->data, want_, sizeof(want_));                                      \
    } while (0)

static void test_varint(void **state)
{
    cdc_thrift_t t;
    (void)state;

    cdc_thrift_init(&t);
    cdc_thrift_varint(&t, 0);
    cdc_thrift_varint(&t, 1);
    cdc_thrift_varint(&t, 127);
    cdc_thrift_varint(&t, 128);
    cdc_thrift_varint(&t, 300);
    EXPECT_BYTES(&t, 0x00, 0x01, 0x7F, 0x80, 0x01, 0xAC, 0x02);
    cdc_thrift_reset(&t);
    cdc_thrift_varint(&t, UINT64_MAX);
    EXPECT_BYTES(&t, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01);
    cdc_thrift_free(&t);
}

static void test_zigzag(void **state)
{
    cdc_thrift_t t;
    (void)state;

    assert_int_equal(cdc_thrift_zigzag32(0), 0);
    assert_int_equal(cdc_thrift_zigzag32(-1), 1);
    assert_int_equal(cdc_thrift_zigzag32(1), 2);
    assert_int_equal(cdc_thrift_zigzag32(-2), 3);
    assert_int_equal(cdc_thrift_zigzag32(INT32_MAX), 0xFFFFFFFEu);
    assert_int_equal(cdc_thrift_zigzag32(INT32_MIN), 0xFFFFFFFFu);
    assert_true(cdc_thrift_zigzag64(INT64_MIN) == UINT64_MAX);
    assert_true(cdc_thrift_zigzag64(INT64_MAX) == UINT64_MAX - 1);
    assert_true(cdc_thrift_zigzag64(-3) == 5);

    cdc_thrift_init(&t);
    cdc_thrift_i32(&t, -1);
    cdc_thrift_i32(&t, 64); /* zigzag 128 -> two bytes */
    cdc_thrift_i64(&t, -65);
    EXPECT_BYTES(&t, 0x01, 0x80, 0x01, 0x81, 0x01);
    cdc_thrift_free(&t);
}

static void test_field_headers(void **state)
{
    cdc_thrift_t t;
    (void)state;

    cdc_thrift_init(&t);
    cdc_thrift_struct_begin(&t);
    cdc_thrift_field_i32(&t, 1, 5);   /* delta 1: 0x15 */
    cdc_thrift_field_i32(&t, 3, 1);   /* delta 2: 0x25 */
    cdc_thrift_field_i64(&t, 20, -1); /* delta 17: long form, type 6, zigzag(20)=40 */
    cdc_thrift_field_i32(&t, 5, 0);   /* going backwards: long form */
    cdc_thrift_field_bool(&t, 6, true);
    cdc_thrift_field_bool(&t, 7, false);
    cdc_thrift_struct_end(&t);
    EXPECT_BYTES(&t, 0x15, 0x0A, 0x25, 0x02, 0x06, 0x28, 0x01, 0x05, 0x0A, 0x00, 0x11, 0x12, 0x00);
    assert_int_equal(t.depth, 0);
    cdc_thrift_free(&t);
}

static void test_binary_and_lists(void **state)
{
    cdc_thrift_t t;
    (void)state;

    cdc_thrift_init(&t);
    cdc_thrift_struct_begin(&t);
    cdc_thrift_field_string(&t, 1, "ab");
    cdc_thrift_field_list_begin(&t, 2, CDC_THRIFT_I32, 3);
    cdc_thrift_i32(&t, 1);
    cdc_thrift_i32(&t, 2);
    cdc_thrift_i32(&t, 3);
    cdc_thrift_struct_end(&t);
    EXPECT_BYTES(&t, 0x18, 0x02, 'a', 'b', 0x19, 0x35, 0x02, 0x04, 0x06, 0x00);

    cdc_thrift_reset(&t);
    cdc_thrift_list_header(&t, CDC_THRIFT_STRUCT, 14);
    cdc_thrift_list_header(&t, CDC_THRIFT_STRUCT, 15);
    cdc_thrift_list_header(&t, CDC_THRIFT_BINARY, 300);
    EXPECT_BYTES(&t, 0xEC, 0xFC, 0x0F, 0xF8, 0xAC, 0x02);
    cdc_thrift_free(&t);
}

static void test_nested_struct_keeps_field_ids(void **state)
{
    cdc_thrift_t t;
    (void)state;

    cdc_thrift_init(&t);
    cdc_thrift_struct_begin(&t);
    cdc_thrift_field_i32(&t, 1, 1);
    cdc_thrift_field_struct_begin(&t, 2); /* 0x2C */
    cdc_thrift_field_i32(&t, 1, 1);       /* inner ids restart at 0 */
    cdc_thrift_struct_end(&t);
    cdc_thrift_field_i32(&t, 3, 1); /* outer delta from 2 is 1 */
    cdc_thrift_struct_end(&t);
    EXPECT_BYTES(&t, 0x15, 0x02, 0x1C, 0x15, 0x02, 0x00, 0x15, 0x02, 0x00);
    cdc_thrift_free(&t);
}

/* A Parquet PageHeader as the writer emits it, encoded by hand. */
static void test_page_header(void **state)
{
    cdc_thrift_t t;
    (void)state;

    cdc_thrift_init(&t);
    cdc_thrift_struct_begin(&t);
    cdc_thrift_field_i32(&t, 1, 0);   /* DATA_PAGE */
    cdc_thrift_field_i32(&t, 2, 100); /* uncompressed_page_size */
    cdc_thrift_field_i32(&t, 3, 50);  /* compressed_page_size */
    cdc_thrift_field_struct_begin(&t, 5);
    cdc_thrift_field_i32(&t, 1, 10); /* num_values */
    cdc_thrift_field_i32(&t, 2, 0);  /* PLAIN */
    cdc_thrift_field_i32(&t, 3, 3);  /* RLE */
    cdc_thrift_field_i32(&t, 4, 3);  /* RLE */
    cdc_thrift_struct_end(&t);
    cdc_thrift_struct_end(&t);
    EXPECT_BYTES(&t, 0x15, 0x00, 0x15, 0xC8, 0x01, 0x15, 0x64, 0x2C, 0x15, 0x14, 0x15, 0x00, 0x15,
                 0x06, 0x15, 0x06, 0x00, 0x00);
    cdc_thrift_free(&t);
}

/* ---- read side ---------------------------------------------------------------- */

static void test_read_primitives(void **state)
{
    static const uint8_t b[] = {0x00, 0xAC, 0x02, 0x01, 0x80, 0x01, 0xFF, 0xFF, 0xFF, 0xFF,
                                0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x03, 'a',  'b',  'c'};
    cdc_thrift_reader_t r;
    uint64_t u;
    int32_t i32;
    int64_t i64;
    const uint8_t *p;
    size_t n;
    (void)state;

    cdc_thrift_reader_init(&r, b, sizeof(b));
    assert_true(cdc_thrift_read_varint(&r, &u) && u == 0);
    assert_true(cdc_thrift_read_varint(&r, &u) && u == 300);
    assert_true(cdc_thrift_read_i32(&r, &i32) && i32 == -1);
    assert_true(cdc_thrift_read_i32(&r, &i32) && i32 == 64);
    assert_true(cdc_thrift_read_i64(&r, &i64) && i64 == INT64_MIN);
    assert_true(cdc_thrift_read_binary(&r, &p, &n) && n == 3 && memcmp(p, "abc", 3) == 0);
    assert_int_equal(cdc_thrift_reader_left(&r), 0);
    assert_false(cdc_thrift_read_varint(&r, &u)); /* nothing left */

    static const uint8_t cut[] = {0x80, 0x80}; /* continuation without an end */
    static const uint8_t over[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                   0xFF, 0xFF, 0xFF, 0xFF, 0x02};  /* 65 bits */
    static const uint8_t big32[] = {0x80, 0x80, 0x80, 0x80, 0x20}; /* zigzag 2^33 */
    static const uint8_t longbin[] = {0x05, 'a', 'b'};
    cdc_thrift_reader_init(&r, cut, sizeof(cut));
    assert_false(cdc_thrift_read_varint(&r, &u));
    cdc_thrift_reader_init(&r, over, sizeof(over));
    assert_false(cdc_thrift_read_varint(&r, &u));
    cdc_thrift_reader_init(&r, big32, sizeof(big32));
    assert_false(cdc_thrift_read_i32(&r, &i32));
    cdc_thrift_reader_init(&r, longbin, sizeof(longbin));
    assert_false(cdc_thrift_read_binary(&r, &p, &n));
}

/* The encoder's output read back: field ids (short and long form), bools, lists, skips. */
static void test_read_round_trip(void **state)
{
    cdc_thrift_t t;
    cdc_thrift_reader_t r;
    int16_t last = 0, fid = 0;
    uint8_t type, elem;
    size_t n;
    int32_t v;
    int64_t ints[4];
    uint32_t seen;
    (void)state;

    cdc_thrift_init(&t);
    cdc_thrift_struct_begin(&t);
    cdc_thrift_field_i32(&t, 1, -7);
    cdc_thrift_field_bool(&t, 2, true);
    cdc_thrift_field_i64(&t, 40, 1234567890123LL); /* long form */
    cdc_thrift_field_list_begin(&t, 41, CDC_THRIFT_STRUCT, 20);
    for (int i = 0; i < 20; i++) {
        cdc_thrift_struct_begin(&t);
        cdc_thrift_field_string(&t, 1, "x");
        cdc_thrift_struct_end(&t);
    }
    cdc_thrift_field_struct_begin(&t, 42);
    cdc_thrift_field_i32(&t, 1, 5);
    cdc_thrift_field_bool(&t, 3, false);
    cdc_thrift_field_string(&t, 4, "skipped");
    cdc_thrift_struct_end(&t);
    cdc_thrift_field_i32(&t, 43, 9);
    cdc_thrift_struct_end(&t);
    assert_false(t.oom);

    cdc_thrift_reader_init(&r, t.data, t.len);
    assert_true(cdc_thrift_read_field_header(&r, &last, &fid, &type));
    assert_true(fid == 1 && type == CDC_THRIFT_I32);
    assert_true(cdc_thrift_read_i32(&r, &v) && v == -7);
    assert_true(cdc_thrift_read_field_header(&r, &last, &fid, &type));
    assert_true(fid == 2 && type == CDC_THRIFT_TRUE);
    assert_true(cdc_thrift_read_field_header(&r, &last, &fid, &type));
    assert_true(fid == 40 && type == CDC_THRIFT_I64);
    assert_true(cdc_thrift_skip(&r, type));
    assert_true(cdc_thrift_read_field_header(&r, &last, &fid, &type));
    assert_true(fid == 41 && type == CDC_THRIFT_LIST);
    assert_true(cdc_thrift_read_list_header(&r, &elem, &n));
    assert_true(elem == CDC_THRIFT_STRUCT && n == 20);
    for (size_t i = 0; i < n; i++)
        assert_true(cdc_thrift_skip(&r, elem));
    assert_true(cdc_thrift_read_field_header(&r, &last, &fid, &type));
    assert_true(fid == 42 && type == CDC_THRIFT_STRUCT);
    assert_true(cdc_thrift_read_struct_ints(&r, ints, &seen, 4));
    assert_int_equal(seen, 0x5); /* ids 1 and 3; the string is skipped */
    assert_true(ints[0] == 5 && ints[2] == 0);
    assert_true(cdc_thrift_read_field_header(&r, &last, &fid, &type));
    assert_true(fid == 43 && type == CDC_THRIFT_I32); /* delta from 42 */
    assert_true(cdc_thrift_read_i32(&r, &v) && v == 9);
    assert_true(cdc_thrift_read_field_header(&r, &last, &fid, &type));
    assert_int_equal(type, CDC_THRIFT_STOP);
    assert_int_equal(cdc_thrift_reader_left(&r), 0);

    /* every truncation of the struct is refused by a skip of the whole */
    for (size_t cut = 0; cut < t.len; cut++) {
        cdc_thrift_reader_init(&r, t.data, cut);
        assert_false(cdc_thrift_skip(&r, CDC_THRIFT_STRUCT));
    }
    cdc_thrift_reader_init(&r, t.data, t.len);
    assert_true(cdc_thrift_skip(&r, CDC_THRIFT_STRUCT));
    cdc_thrift_free(&t);
}

static void test_read_refuses_malformed(void **state)
{
    cdc_thrift_reader_t r;
    int16_t last = 0, fid;
    uint8_t type, elem;
    size_t n;
    uint8_t deep[64];
    (void)state;

    static const uint8_t long_list[] = {0xFC, 0x90, 0x4E, 0x00}; /* 10000 structs in 1 byte */
    cdc_thrift_reader_init(&r, long_list, sizeof(long_list));
    assert_false(cdc_thrift_read_list_header(&r, &elem, &n));

    static const uint8_t bad_type[] = {0x1D}; /* type 13 is not a compact type */
    cdc_thrift_reader_init(&r, bad_type, sizeof(bad_type));
    assert_true(cdc_thrift_read_field_header(&r, &last, &fid, &type));
    assert_false(cdc_thrift_skip(&r, type));

    static const uint8_t bad_stop[] = {0xF0}; /* delta 15 with type 0 */
    cdc_thrift_reader_init(&r, bad_stop, sizeof(bad_stop));
    assert_false(cdc_thrift_read_field_header(&r, &last, &fid, &type));

    /* structs nested deeper than CDC_THRIFT_MAX_DEPTH */
    for (size_t i = 0; i < sizeof(deep); i++)
        deep[i] = i < sizeof(deep) / 2 ? 0x1C : 0x00;
    cdc_thrift_reader_init(&r, deep, sizeof(deep));
    assert_false(cdc_thrift_skip(&r, CDC_THRIFT_STRUCT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varint),
        cmocka_unit_test(test_zigzag),
        cmocka_unit_test(test_field_headers),
        cmocka_unit_test(test_binary_and_lists),
        cmocka_unit_test(test_nested_struct_keeps_field_ids),
        cmocka_unit_test(test_page_header),
        cmocka_unit_test(test_read_primitives),
        cmocka_unit_test(test_read_round_trip),
        cmocka_unit_test(test_read_refuses_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
