/*
 * Unit tests for common/iceberg/avro.c: zigzag varints against the Avro
 * specification's examples, and container files (header, sync marker, blocks,
 * null and deflate codecs) decoded by avro-c's reader, an implementation we did
 * not write.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <avro.h>
#include <cmocka.h>

#include "common/iceberg/avro.h"
#include "common/iceberg/manifest.h"

static void test_zigzag_spec_examples(void **state)
{
    (void)state;
    /* Avro spec: 0 -> 00, -1 -> 01, 1 -> 02, -2 -> 03, 2 -> 04, -64 -> 7f, 64 -> 80 01 */
    static const struct {
        int64_t v;
        uint8_t bytes[10];
        size_t n;
    } cases[] = {
        {0, {0x00}, 1},
        {-1, {0x01}, 1},
        {1, {0x02}, 1},
        {-2, {0x03}, 1},
        {2, {0x04}, 1},
        {-64, {0x7f}, 1},
        {64, {0x80, 0x01}, 2},
        {8192, {0x80, 0x80, 0x01}, 3},
        {INT64_MAX, {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
        {INT64_MIN, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t out[10];
        size_t n = cdc_avro_zigzag_encode(cases[i].v, out);
        assert_int_equal(n, cases[i].n);
        assert_memory_equal(out, cases[i].bytes, n);
        int64_t back = 0;
        assert_int_equal(cdc_avro_zigzag_decode(out, n, &back), n);
        assert_true(back == cases[i].v);
    }
    uint8_t trunc[2] = {0x80, 0x80};
    int64_t v;
    assert_int_equal(cdc_avro_zigzag_decode(trunc, 2, &v), 0);
}

static void test_zigzag_roundtrip_random(void **state)
{
    (void)state;
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int64_t v = (int64_t)(x >> (x & 63));
        if (x & 1)
            v = -v;
        uint8_t out[10];
        size_t n = cdc_avro_zigzag_encode(v, out);
        int64_t back;
        assert_int_equal(cdc_avro_zigzag_decode(out, n, &back), n);
        assert_true(back == v);
    }
}

static const char SCHEMA[] =
    "{\"type\":\"record\",\"name\":\"r\",\"fields\":["
    "{\"name\":\"id\",\"type\":\"long\",\"field-id\":1},"
    "{\"name\":\"name\",\"type\":\"string\",\"field-id\":2},"
    "{\"name\":\"opt\",\"type\":[\"null\",\"double\"],\"default\":null,\"field-id\":3},"
    "{\"name\":\"flag\",\"type\":\"boolean\",\"field-id\":4},"
    "{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":\"int\",\"element-id\":6},"
    "\"field-id\":5}]}";

static void write_and_read(cdc_avro_codec_t codec, int nrec)
{
    cdc_avro_writer_t w;
    cdc_error_t e;
    const char *meta[] = {"format-version", "2", "content", "data"};
    assert_int_equal(cdc_avro_writer_init(&w, SCHEMA, codec, meta, 2, &e), CDC_OK);
    char name[64];
    for (int i = 0; i < nrec; i++) {
        cdc_avro_put_long(&w.record, (int64_t)i * 1000003 - 5000);
        snprintf(name, sizeof(name), "row-%d", i);
        cdc_avro_put_string(&w.record, name);
        if (i % 3 == 0) {
            cdc_avro_put_long(&w.record, 0);
        } else {
            cdc_avro_put_long(&w.record, 1);
            cdc_avro_put_double(&w.record, i / 4.0);
        }
        cdc_avro_put_bool(&w.record, i % 2);
        cdc_avro_put_long(&w.record, 2);
        cdc_avro_put_long(&w.record, i);
        cdc_avro_put_long(&w.record, -i);
        cdc_avro_put_long(&w.record, 0);
        assert_int_equal(cdc_avro_writer_end_record(&w, &e), CDC_OK);
    }
    uint8_t *buf;
    size_t len;
    assert_int_equal(cdc_avro_writer_finish(&w, &buf, &len, &e), CDC_OK);

    /* header: magic, our metadata keys, schema text verbatim (field ids survive) */
    assert_memory_equal(buf, "Obj\x01", 4);
    char *v = NULL;
    assert_int_equal(cdc_avro_header_get(buf, len, "avro.schema", &v, &e), CDC_OK);
    assert_string_equal(v, SCHEMA);
    free(v);
    assert_int_equal(cdc_avro_header_get(buf, len, "avro.codec", &v, &e), CDC_OK);
    assert_string_equal(v, codec == CDC_AVRO_CODEC_DEFLATE ? "deflate" : "null");
    free(v);
    assert_int_equal(cdc_avro_header_get(buf, len, "content", &v, &e), CDC_OK);
    assert_string_equal(v, "data");
    free(v);
    assert_int_equal(cdc_avro_header_get(buf, len, "nope", &v, &e), CDC_ERR_NOT_FOUND);

    /* decode with avro-c */
    FILE *fp = fmemopen(buf, len, "rb");
    avro_file_reader_t r;
    assert_int_equal(avro_file_reader_fp(fp, "mem", 1, &r), 0);
    avro_schema_t ws = avro_file_reader_get_writer_schema(r);
    avro_value_iface_t *iface = avro_generic_class_from_schema(ws);
    avro_schema_decref(ws);
    avro_value_t val;
    avro_generic_value_new(iface, &val);
    int count = 0;
    while (avro_file_reader_read_value(r, &val) == 0) {
        avro_value_t f, br;
        int64_t l;
        const char *s;
        size_t sl;
        avro_value_get_by_name(&val, "id", &f, NULL);
        avro_value_get_long(&f, &l);
        assert_true(l == (int64_t)count * 1000003 - 5000);
        avro_value_get_by_name(&val, "name", &f, NULL);
        avro_value_get_string(&f, &s, &sl);
        snprintf(name, sizeof(name), "row-%d", count);
        assert_string_equal(s, name);
        avro_value_get_by_name(&val, "opt", &f, NULL);
        avro_value_get_current_branch(&f, &br);
        if (count % 3 == 0) {
            assert_int_equal(avro_value_get_type(&br), AVRO_NULL);
        } else {
            double d;
            avro_value_get_double(&br, &d);
            assert_true(d == count / 4.0);
        }
        int b;
        avro_value_get_by_name(&val, "flag", &f, NULL);
        avro_value_get_boolean(&f, &b);
        assert_int_equal(b, count % 2);
        size_t n;
        avro_value_get_by_name(&val, "tags", &f, NULL);
        avro_value_get_size(&f, &n);
        assert_int_equal(n, 2);
        count++;
    }
    assert_int_equal(count, nrec);
    avro_value_decref(&val);
    avro_value_iface_decref(iface);
    avro_file_reader_close(r);
    free(buf);
}

static void test_container_null_codec(void **state)
{
    (void)state;
    write_and_read(CDC_AVRO_CODEC_NULL, 10);
}

static void test_container_deflate_many_blocks(void **state)
{
    (void)state;
    /* ~20000 records exceed the 64 KiB block target several times */
    write_and_read(CDC_AVRO_CODEC_DEFLATE, 20000);
    write_and_read(CDC_AVRO_CODEC_NULL, 20000);
}

static void test_container_empty(void **state)
{
    (void)state;
    write_and_read(CDC_AVRO_CODEC_DEFLATE, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zigzag_spec_examples),
        cmocka_unit_test(test_zigzag_roundtrip_random),
        cmocka_unit_test(test_container_null_codec),
        cmocka_unit_test(test_container_deflate_many_blocks),
        cmocka_unit_test(test_container_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
