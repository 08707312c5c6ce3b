/*
 * Standalone reproducer of the "uncompressed backlog stall" (docs/worker.md, Known
 * issues): librdkafka's mock cluster, which tools/kafka-dev wraps, keeps at most 5 MiB
 * (or 100000 record batches) per partition and silently deletes the oldest batches on
 * every append beyond that (librdkafka 2.0.2 src/rdkafka_mock.c,
 * rd_kafka_mock_partition_init: max_size = 5 MiB, max_cnt = 100000;
 * rd_kafka_mock_msgset_new: "Remove old msgsets until within limits"). The log start
 * offset moves up; a consumer that starts at the logical BEGINNING (a worker partition
 * with no checkpoint yet) is told the new start by ListOffsets and never sees the
 * deleted records, without any error. Uncompressed change events hit the limit after
 * about 12,000 records per partition; lz4-compressed ones do not in a 1M backlog.
 *
 * Only librdkafka (no project code), with the pipeline's producer settings
 * (common/kafka.c: idempotent, acks=all, linger.ms=5, murmur2_random) and consumer
 * settings (assign(), auto.offset.reset=error, read_uncommitted, fetch.wait.max.ms=100,
 * no partition EOF). Builds on its own too:
 *     cc -o repro tests/unit/common/test_mock_retention.c -lrdkafka -lcmocka
 *
 * What it asserts is the known behaviour of the mock cluster, so that it stays green
 * while the bug exists and fails when a librdkafka upgrade changes it (then the Known
 * issues bullet and tools/kafka-dev/README.md must be updated):
 *   - every record is acknowledged with a distinct offset 0..N-1 (nothing is dropped at
 *     produce time: the mock's idempotence checks do not even run for a
 *     non-transactional producer) and the high watermark is N;
 *   - uncompressed: the low watermark is above 0; a consumer from BEGINNING gets exactly
 *     [low, N) and no error; a consumer from the explicit offset 0 gets
 *     _AUTO_OFFSET_RESET (offset out of range) and nothing else;
 *   - lz4, same records: low watermark 0 and all N records from BEGINNING.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define NRECORDS 20000 /* x ~520 bytes: ~10 MiB uncompressed, well past the 5 MiB */
#define TOPIC "cdc.public.transactions"

typedef struct {
    int acked, failed;
    int64_t max_offset;
} dr_count_t;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    dr_count_t *c = opaque;
    (void)rk;
    if (m->err) {
        c->failed++;
        return;
    }
    c->acked++;
    if (m->offset > c->max_offset)
        c->max_offset = m->offset;
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[256];
    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        fail_msg("%s=%s: %s", k, v, errstr);
}

/* A change event much like the capture's (JSON, ~520 bytes, compressible). */
static int event(char *buf, size_t size, int i)
{
    return snprintf(buf, size,
                    "{\"op\":\"u\",\"source\":{\"lsn\":%d,\"txid\":%d,\"table\":\"transactions\","
                    "\"schema\":\"public\"},\"before\":null,\"after\":{\"entity_id\":%d,"
                    "\"account\":\"acct-%d\",\"amount\":\"%d.%02d\",\"status\":\"update\","
                    "\"note\":\"backlog row %d\",\"updated_at\":\"2026-11-30T10:00:00.%06dZ\","
                    "\"padding\":\"........................................................\"},"
                    "\"ts_ms\":1764496800000,\"schema_version\":1,\"key\":{\"entity_id\":%d},"
                    "\"extra\":\"...........................................................\"}",
                    1000000 + i, 700 + i / 1000, i, i % 997, i % 1000, i % 100, i, i, i);
}

/* Produces NRECORDS to partition 0 of TOPIC with the capture's producer settings. */
static void produce(const char *bootstrap, const char *codec)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    dr_count_t c = {0, 0, -1};
    char errstr[256], buf[1024];
    rd_kafka_t *rk;

    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "enable.idempotence", "true");
    set(conf, "acks", "all");
    set(conf, "partitioner", "murmur2_random");
    set(conf, "compression.codec", codec);
    set(conf, "linger.ms", "5");
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, &c);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    assert_non_null(rk);
    for (int i = 0; i < NRECORDS; i++) {
        int n = event(buf, sizeof(buf), i);
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_PARTITION(0),
                                        RD_KAFKA_V_VALUE(buf, (size_t)n),
                                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                        RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 10);
        assert_int_equal(err, RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_poll(rk, 0);
    }
    assert_int_equal(rd_kafka_flush(rk, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
    /* every record stored, at offsets 0..N-1 */
    assert_int_equal(c.failed, 0);
    assert_int_equal(c.acked, NRECORDS);
    assert_int_equal(c.max_offset, NRECORDS - 1);
}

typedef struct {
    int64_t low, high; /* watermarks (ListOffsets) */
    int records;       /* consumed */
    int64_t first, last;
    rd_kafka_resp_err_t err; /* first consumer error, if any */
} consumed_t;

/* Consumes partition 0 from `offset` with the worker's consumer settings until the high
 * watermark is reached or nothing arrives for 3 s. */
static consumed_t consume(const char *bootstrap, int64_t offset)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    consumed_t r = {-1, -1, 0, -1, -1, RD_KAFKA_RESP_ERR_NO_ERROR};
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    char errstr[256];
    rd_kafka_t *rk;
    int idle = 0;

    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "group.id", "cdc-unmanaged");
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.auto.offset.store", "false");
    set(conf, "auto.offset.reset", "error");
    set(conf, "enable.partition.eof", "false");
    set(conf, "isolation.level", "read_uncommitted");
    set(conf, "fetch.wait.max.ms", "100");
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    assert_non_null(rk);
    rd_kafka_poll_set_consumer(rk);
    assert_int_equal(rd_kafka_query_watermark_offsets(rk, TOPIC, 0, &r.low, &r.high, 5000),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_add(l, TOPIC, 0)->offset = offset;
    assert_int_equal(rd_kafka_assign(rk, l), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(l);
    while (r.last < r.high - 1 && idle < 30) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m == NULL) {
            idle++;
            continue;
        }
        idle = 0;
        if (m->err) {
            if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR)
                r.err = m->err;
        } else {
            if (r.records++ == 0)
                r.first = m->offset;
            r.last = m->offset;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return r;
}

static rd_kafka_t *mock_handle;
static rd_kafka_mock_cluster_t *mock;

/* A fresh mock cluster of 3 brokers with TOPIC (1 partition), like kafka-dev. */
static int cluster_up(void **state)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[256];
    (void)state;
    rd_kafka_conf_set(conf, "log_level", "3", NULL, 0);
    mock_handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (mock_handle == NULL)
        return -1;
    mock = rd_kafka_mock_cluster_new(mock_handle, 3);
    if (mock == NULL || rd_kafka_mock_topic_create(mock, TOPIC, 1, 3) != 0)
        return -1;
    return 0;
}

static int cluster_down(void **state)
{
    (void)state;
    if (mock)
        rd_kafka_mock_cluster_destroy(mock);
    if (mock_handle)
        rd_kafka_destroy(mock_handle);
    mock = NULL;
    mock_handle = NULL;
    return 0;
}

static void test_uncompressed_prefix_deleted_silently(void **state)
{
    const char *bootstrap = rd_kafka_mock_cluster_bootstraps(mock);
    consumed_t b, z;
    (void)state;

    produce(bootstrap, "none");
    b = consume(bootstrap, RD_KAFKA_OFFSET_BEGINNING);
    printf("uncompressed: %d records acknowledged at offsets 0..%d; broker watermarks "
           "low=%lld high=%lld; from BEGINNING: %d records (%lld..%lld), error %s\n",
           NRECORDS, NRECORDS - 1, (long long)b.low, (long long)b.high, b.records,
           (long long)b.first, (long long)b.last, rd_kafka_err2name(b.err));
    assert_int_equal(b.high, NRECORDS);
    if (b.low == 0)
        fail_msg("the mock cluster kept all %d uncompressed records (%s): it no longer "
                 "deletes the oldest batches past 5 MiB per partition; update docs/worker.md "
                 "(Known issues) and tools/kafka-dev/README.md",
                 NRECORDS, rd_kafka_version_str());
    /* the silent part: no error, just the records from the new log start */
    assert_int_equal(b.err, RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(b.first, b.low);
    assert_int_equal(b.records, NRECORDS - b.low);

    /* an explicit offset below the log start is an error (what a checkpoint sees) */
    z = consume(bootstrap, 0);
    printf("uncompressed: from offset 0: %d records, error %s\n", z.records,
           rd_kafka_err2name(z.err));
    assert_int_equal(z.records, 0);
    assert_int_equal(z.err, RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET);
}

static void test_lz4_keeps_everything(void **state)
{
    const char *bootstrap = rd_kafka_mock_cluster_bootstraps(mock);
    consumed_t b;
    (void)state;

    produce(bootstrap, "lz4");
    b = consume(bootstrap, RD_KAFKA_OFFSET_BEGINNING);
    printf("lz4: watermarks low=%lld high=%lld; from BEGINNING: %d records, error %s\n",
           (long long)b.low, (long long)b.high, b.records, rd_kafka_err2name(b.err));
    assert_int_equal(b.low, 0);
    assert_int_equal(b.high, NRECORDS);
    assert_int_equal(b.records, NRECORDS);
    assert_int_equal(b.err, RD_KAFKA_RESP_ERR_NO_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_uncompressed_prefix_deleted_silently, cluster_up,
                                        cluster_down),
        cmocka_unit_test_setup_teardown(test_lz4_keeps_everything, cluster_up, cluster_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
