/*
 * Unit tests for common/kafka.c that need no broker: the Java-compatible murmur2 hash
 * and partitioner (vectors from the Java client's own tests), configuration errors
 * (bad properties, missing bootstrap) reported as CDC_ERR_CONFIG, and a consumer's list of
 * stopped partitions while it is empty.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/kafka.h"

static void test_murmur2_java_vectors(void **state)
{
    static const struct {
        const char *key;
        int32_t java; /* Utils.murmur2 as the Java client returns it (signed) */
    } cases[] = {
        {"21", -973932308},
        {"foobar", -790332482},
        {"a-little-bit-long-string", -985981536},
        {"a-little-bit-longer-string", -1486304829},
        {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
        {"abc", 479470107},
    };
    static const unsigned char bin[] = {12, 42, 56, 24, 109, 111};
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(cdc_kafka_murmur2(cases[i].key, strlen(cases[i].key)),
                         (uint32_t)cases[i].java);
    assert_int_equal(cdc_kafka_murmur2(bin, sizeof(bin)), 274204207u);
}

static void test_partition_for_key(void **state)
{
    (void)state;
    /* toPositive(h) % n, i.e. (h & 0x7fffffff) % n */
    assert_int_equal(cdc_kafka_partition_for_key("21", 2, 12), (1173551340 % 12));
    assert_int_equal(cdc_kafka_partition_for_key("foobar", 6, 12), (1357151166 % 12));
    assert_int_equal(cdc_kafka_partition_for_key("abc", 3, 7), (479470107 % 7));
    assert_int_equal(cdc_kafka_partition_for_key("abc", 3, 1), 0);
    assert_int_equal(cdc_kafka_partition_for_key("abc", 3, 0), -1);
    for (int i = 0; i < 1000; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "key-%d", i);
        int32_t p = cdc_kafka_partition_for_key(k, (size_t)n, 12);
        assert_true(p >= 0 && p < 12);
    }
}

static void test_bad_config(void **state)
{
    cdc_kafka_producer_t *p = NULL;
    cdc_kafka_consumer_t *c = NULL;
    cdc_error_t e;
    cdc_kafka_producer_config_t pc = {.bootstrap = "127.0.0.1:1", .linger_ms = -1};
    cdc_kafka_consumer_config_t cc = {.bootstrap = NULL};
    (void)state;

    pc.properties = "no.such.property=1";
    assert_int_equal(cdc_kafka_producer_new(&pc, &p, &e), CDC_ERR_CONFIG);
    assert_null(p);
    assert_non_null(strstr(e.msg, "no.such.property"));

    pc.properties = "novalue";
    assert_int_equal(cdc_kafka_producer_new(&pc, &p, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "expected key=value"));

    pc.properties = NULL;
    pc.compression = "brotli";
    assert_int_equal(cdc_kafka_producer_new(&pc, &p, &e), CDC_ERR_CONFIG);

    pc.compression = "zstd";
    pc.properties = "batch.num.messages=1000; statistics.interval.ms=0\n";
    assert_int_equal(cdc_kafka_producer_new(&pc, &p, &e), CDC_OK);
    assert_true(cdc_kafka_producer_outstanding(p) >= 0); /* may count pending error events */
    assert_int_equal(cdc_kafka_producer_fatal(p, &e), CDC_OK);
    cdc_kafka_producer_free(p);

    assert_int_equal(cdc_kafka_consumer_new(&cc, &c, &e), CDC_ERR_CONFIG);
    assert_null(c);
    assert_non_null(strstr(e.msg, "bootstrap"));
}

/* A consumer none of whose partitions stopped reports none, also before anything ever
 * failed (its list is not allocated yet: under UBSan, a memmove of that NULL aborted). */
static void test_no_failed_partitions(void **state)
{
    cdc_kafka_consumer_t *c = NULL;
    cdc_kafka_consumer_config_t cc = {.bootstrap = "127.0.0.1:1"};
    char topics[4][256];
    int32_t parts[4];
    cdc_error_t e;
    (void)state;
    assert_int_equal(cdc_kafka_consumer_new(&cc, &c, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consumer_failed(c, topics, parts, 4), 0);
    assert_int_equal(cdc_kafka_consumer_failed(c, topics, parts, 4), 0);
    cdc_kafka_consumer_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_murmur2_java_vectors),
        cmocka_unit_test(test_partition_for_key),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_no_failed_partitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
