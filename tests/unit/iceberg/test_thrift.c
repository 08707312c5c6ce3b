/*
 * Unit tests for common/iceberg/thrift.c: the Thrift compact-protocol encodings
 * used by the Parquet footer and page headers, checked against hand-computed
 * bytes from the Thrift compact protocol specification.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varint),
        cmocka_unit_test(test_zigzag),
        cmocka_unit_test(test_field_headers),
        cmocka_unit_test(test_binary_and_lists),
        cmocka_unit_test(test_nested_struct_keeps_field_ids),
        cmocka_unit_test(test_page_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
