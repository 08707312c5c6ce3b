/*
 * Component tests of common/kafka.c against the development broker (tools/kafka-dev)
 * started by the harness: 10,000 messages produced by one process and consumed by
 * another, in order per partition and on the partition the Java client would pick;
 * a broker taken down and up while producing (nothing lost, nothing duplicated);
 * injected request errors; compression codecs; seek, pause/resume and watermarks;
 * topic creation with a partition count, also without the broker's control channel.
 *
 * The binary also runs as the producer process: `test_kafka produce <topic> <n> <codec>`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "common/kafka.h"
#include "tests/harness/harness.h"

#define NPART 12

static void unique_topic(char *buf, size_t size, const char *prefix)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, size, "%s-%d-%ld", prefix, (int)getpid(), (long)(ts.tv_nsec / 1000));
}

/* ---- producer side -------------------------------------------------------------------- */

typedef struct acks {
    int ok;
    int failed;
    cdc_err_t last_err;
} acks_t;

static void on_delivery(void *opaque, cdc_err_t err, const cdc_error_t *detail, int32_t partition,
                        int64_t offset, void *cb_arg)
{
    acks_t *a = cb_arg;
    (void)opaque;
    (void)partition;
    (void)offset;
    if (err == CDC_OK) {
        a->ok++;
    } else {
        a->failed++;
        a->last_err = err;
        fprintf(stderr, "delivery failed: %s\n", detail->msg);
    }
}

static cdc_kafka_producer_t *new_producer(const char *codec, acks_t *acks)
{
    cdc_kafka_producer_config_t pc = {
        .bootstrap = cdc_test_require("CDC_TEST_KAFKA"),
        .compression = codec,
        .linger_ms = 5,
        .on_delivery = on_delivery,
        .cb_arg = acks,
    };
    cdc_kafka_producer_t *p = NULL;
    cdc_error_t e;
    if (cdc_kafka_producer_new(&pc, &p, &e) != CDC_OK) {
        fprintf(stderr, "producer: %s\n", e.msg);
        return NULL;
    }
    return p;
}

/* Produces n messages key-<i> -> "<i>" with a header seq=<i>, flushes; 0 when all acked. */
static int produce_range(cdc_kafka_producer_t *p, acks_t *acks, const char *topic, int from, int n)
{
    cdc_error_t e;
    for (int i = from; i < from + n; i++) {
        char key[32], val[32];
        int kl = snprintf(key, sizeof(key), "key-%d", i % 997);
        int vl = snprintf(val, sizeof(val), "%d", i);
        cdc_kafka_header_t h = {.name = "seq", .value = val, .value_len = (size_t)vl};
        cdc_kafka_record_t rec = {.topic = topic,
                                  .partition = CDC_KAFKA_PARTITION_ANY,
                                  .key = key,
                                  .key_len = (size_t)kl,
                                  .value = val,
                                  .value_len = (size_t)vl,
                                  .headers = &h,
                                  .header_count = 1,
                                  .opaque = (void *)(intptr_t)i};
        if (cdc_kafka_produce(p, &rec, &e) != CDC_OK) {
            fprintf(stderr, "produce: %s\n", e.msg);
            return 1;
        }
        cdc_kafka_producer_poll(p, 0);
    }
    (void)acks;
    return 0;
}

static int producer_main(const char *topic, int n, const char *codec)
{
    acks_t acks = {0};
    cdc_kafka_producer_t *p = new_producer(codec, &acks);
    cdc_error_t e;
    int rc = 1;

    if (p == NULL)
        return 1;
    if (produce_range(p, &acks, topic, 0, n) != 0)
        goto out;
    if (cdc_kafka_producer_flush(p, 60000, &e) != CDC_OK) {
        fprintf(stderr, "flush: %s\n", e.msg);
        goto out;
    }
    rc = (acks.ok == n && acks.failed == 0) ? 0 : 1;
    if (rc)
        fprintf(stderr, "acked %d of %d, %d failed\n", acks.ok, n, acks.failed);
out:
    cdc_kafka_producer_free(p);
    return rc;
}

/* ---- consumer side -------------------------------------------------------------------- */

static cdc_kafka_consumer_t *new_consumer(void)
{
    cdc_kafka_consumer_config_t cc = {.bootstrap = cdc_test_require("CDC_TEST_KAFKA")};
    cdc_kafka_consumer_t *c = NULL;
    cdc_error_t e;
    if (cdc_kafka_consumer_new(&cc, &c, &e) != CDC_OK)
        fail_msg("consumer: %s", e.msg);
    return c;
}

static void assign_all(cdc_kafka_consumer_t *c, const char *topic, int np)
{
    cdc_kafka_tp_t tps[64];
    cdc_error_t e;
    for (int i = 0; i < np; i++)
        tps[i] = (cdc_kafka_tp_t){topic, i, CDC_KAFKA_OFFSET_BEGINNING};
    assert_int_equal(cdc_kafka_consumer_assign(c, tps, (size_t)np, &e), CDC_OK);
}

/*
 * Assigns again, at the next offset it expects, every partition the consumer reports as
 * failed (what worker/consume.c does). A failure found before the errors were cleared can
 * still arrive after: a lookup sent earlier is answered late.
 */
static void resume_failed(cdc_kafka_consumer_t *c, const char *topic, const int64_t *next_offset)
{
    char failed_topics[64][256];
    int32_t failed[64];
    size_t nfailed = cdc_kafka_consumer_failed(c, failed_topics, failed, 64);
    cdc_error_t e;

    for (size_t i = 0; i < nfailed; i++) {
        assert_string_equal(failed_topics[i], topic);
        if (cdc_kafka_consumer_restart(c, topic, failed[i], next_offset[failed[i]], &e) != CDC_OK)
            fail_msg("restart of partition %d: %s", (int)failed[i], e.msg);
    }
}

/*
 * Consumes until `expect` messages arrived (or the deadline) and checks: each message's
 * partition is the Java partition of its key, offsets per partition are 0,1,2,..., values
 * per key increase (per-key order), the seq header equals the value, no value repeats.
 * With `resume_topic`, a partition that fails on the way is assigned again at its next
 * offset instead of failing the test; nothing may be skipped or repeated either way.
 */
static void consume_and_check_resuming(cdc_kafka_consumer_t *c, int expect, int np, int timeout_ms,
                                       const char *resume_topic)
{
    cdc_kafka_msg_t msgs[500];
    int64_t next_offset[64] = {0};
    int last_by_key[997];
    char *seen = calloc((size_t)expect, 1);
    int total = 0;
    long long deadline = cdc_test_now_ms() + timeout_ms;
    cdc_error_t e;

    assert_non_null(seen);
    for (int i = 0; i < 997; i++)
        last_by_key[i] = -1;
    while (total < expect && cdc_test_now_ms() < deadline) {
        size_t n = 0;
        cdc_err_t rc = cdc_kafka_consume_batch(c, msgs, 500, &n, 500, &e);
        if (rc != CDC_OK && resume_topic != NULL)
            resume_failed(c, resume_topic, next_offset);
        else if (rc != CDC_OK)
            fail_msg("consume: %s", e.msg);
        for (size_t i = 0; i < n; i++) {
            cdc_kafka_msg_t *m = &msgs[i];
            char buf[32];
            int v, k;
            cdc_kafka_header_t h;
            assert_true(m->partition >= 0 && m->partition < np);
            assert_int_equal(m->offset, next_offset[m->partition]);
            next_offset[m->partition]++;
            assert_true(m->value_len < sizeof(buf));
            memcpy(buf, m->value, m->value_len);
            buf[m->value_len] = '\0';
            v = atoi(buf);
            assert_true(v >= 0 && v < expect);
            assert_int_equal(seen[v], 0);
            seen[v] = 1;
            k = v % 997;
            assert_true(v > last_by_key[k]);
            last_by_key[k] = v;
            assert_int_equal(m->partition, cdc_kafka_partition_for_key(m->key, m->key_len, np));
            assert_true(cdc_kafka_msg_header(m, "seq", &h));
            assert_int_equal(h.value_len, m->value_len);
            assert_memory_equal(h.value, m->value, m->value_len);
            assert_int_equal(cdc_kafka_msg_header_count(m), 1);
            total++;
        }
        cdc_kafka_msgs_release(msgs, n);
    }
    free(seen);
    assert_int_equal(total, expect);
    /* nothing beyond */
    {
        size_t n = 0;
        assert_int_equal(cdc_kafka_consume_batch(c, msgs, 500, &n, 300, &e), CDC_OK);
        cdc_kafka_msgs_release(msgs, n);
        assert_int_equal(n, 0);
    }
}

static void consume_and_check(cdc_kafka_consumer_t *c, int expect, int np, int timeout_ms)
{
    consume_and_check_resuming(c, expect, np, timeout_ms, NULL);
}

static void ensure(const char *topic, int np)
{
    cdc_error_t e;
    cdc_kafka_topic_spec_t spec = {.name = topic, .partitions = np};
    if (cdc_kafka_ensure_topic(cdc_test_require("CDC_TEST_KAFKA"), NULL, &spec, 10000, &e) !=
        CDC_OK)
        fail_msg("ensure topic: %s", e.msg);
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_two_processes_10k(void **state)
{
    char topic[128];
    char *argv[6];
    pid_t pid;
    int st;
    cdc_kafka_consumer_t *c;
    (void)state;

    unique_topic(topic, sizeof(topic), "t10k");
    ensure(topic, NPART);
    c = new_consumer();
    assign_all(c, topic, NPART);
    argv[0] = (char *)cdc_test_self();
    argv[1] = "produce";
    argv[2] = topic;
    argv[3] = "10000";
    argv[4] = "zstd";
    argv[5] = NULL;
    pid = cdc_test_spawn(argv, NULL);
    assert_true(pid > 0);
    consume_and_check(c, 10000, NPART, 60000);
    assert_true(cdc_test_wait_exit(pid, 60000, &st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    cdc_kafka_consumer_free(c);
}

typedef struct progress {
    cdc_kafka_producer_t *p;
    acks_t *acks;
    int target;
} progress_t;

static bool acked_at_least(void *arg)
{
    progress_t *pr = arg;
    cdc_kafka_producer_poll(pr->p, 10);
    return pr->acks->ok >= pr->target;
}

static void test_broker_down_up(void **state)
{
    char topic[128], reply[256];
    acks_t acks = {0};
    cdc_kafka_producer_t *p;
    cdc_kafka_consumer_t *c;
    cdc_error_t e;
    progress_t pr;
    (void)state;

    unique_topic(topic, sizeof(topic), "tdown");
    ensure(topic, NPART);
    p = new_producer("lz4", &acks);
    assert_non_null(p);
    assert_int_equal(produce_range(p, &acks, topic, 0, 1000), 0);
    assert_int_equal(cdc_kafka_producer_flush(p, 30000, &e), CDC_OK);
    assert_int_equal(acks.ok, 1000);

    assert_true(cdc_test_kafka_ctl("BROKER DOWN 2", reply, sizeof(reply)));
    assert_int_equal(produce_range(p, &acks, topic, 1000, 1000), 0);
    /* Partitions led by the other brokers keep going while broker 2 is down. */
    pr = (progress_t){p, &acks, 1100};
    assert_true(cdc_test_wait_for(acked_at_least, &pr, 30000));
    assert_true(cdc_test_kafka_ctl("BROKER UP 2", reply, sizeof(reply)));
    assert_int_equal(cdc_kafka_producer_flush(p, 60000, &e), CDC_OK);
    assert_int_equal(acks.ok, 2000);
    assert_int_equal(acks.failed, 0);
    cdc_kafka_producer_free(p);

    c = new_consumer();
    assign_all(c, topic, NPART);
    consume_and_check(c, 2000, NPART, 60000);
    cdc_kafka_consumer_free(c);
}

static void test_injected_errors(void **state)
{
    char topic[128], reply[256];
    acks_t acks = {0};
    cdc_kafka_producer_t *p;
    cdc_kafka_consumer_t *c;
    cdc_error_t e;
    (void)state;

    unique_topic(topic, sizeof(topic), "terr");
    ensure(topic, NPART);
    /* Produce (api key 0) fails 5 times with retriable errors: the idempotent producer
     * retries and nothing is lost or duplicated. */
    assert_true(cdc_test_kafka_ctl("ERRORS 0 5 NOT_LEADER_FOR_PARTITION", reply, sizeof(reply)));
    p = new_producer("snappy", &acks);
    assert_non_null(p);
    assert_int_equal(produce_range(p, &acks, topic, 0, 500), 0);
    assert_int_equal(cdc_kafka_producer_flush(p, 60000, &e), CDC_OK);
    assert_int_equal(acks.ok, 500);
    cdc_kafka_producer_free(p);
    c = new_consumer();
    assign_all(c, topic, NPART);
    consume_and_check(c, 500, NPART, 30000);
    cdc_kafka_consumer_free(c);
    /* garbage on the control channel is answered with ERR and the channel keeps working */
    assert_false(cdc_test_kafka_ctl("\x01\x02 garbage", reply, sizeof(reply)));
    assert_true(strncmp(reply, "ERR", 3) == 0);
    assert_true(cdc_test_kafka_ctl("PING", reply, sizeof(reply)));
}

/*
 * A new topic `prefix`-... holding 300 messages, and a consumer assigned to all its
 * partitions while the development broker fails the ListOffsets (api key 2) lookups of
 * their beginnings: their fetching stops (the caller clears the errors with
 * "ERRORS CLEAR 2").
 */
static cdc_kafka_consumer_t *failing_lookups(char *topic, size_t size, const char *prefix)
{
    char reply[256], cmd[96];
    acks_t acks = {0};
    cdc_kafka_producer_t *p;
    cdc_kafka_consumer_t *c;
    cdc_error_t e;

    unique_topic(topic, size, prefix);
    ensure(topic, NPART);
    p = new_producer("lz4", &acks);
    assert_non_null(p);
    assert_int_equal(produce_range(p, &acks, topic, 0, 300), 0);
    assert_int_equal(cdc_kafka_producer_flush(p, 60000, &e), CDC_OK);
    cdc_kafka_producer_free(p);
    snprintf(cmd, sizeof(cmd), "ERRORS 2 %d UNKNOWN", NPART);
    assert_true(cdc_test_kafka_ctl(cmd, reply, sizeof(reply)));
    c = new_consumer();
    assign_all(c, topic, NPART);
    return c;
}

/*
 * A partition whose fetching stopped on a non-retriable error (here the lookup of its
 * start offset fails, as on a busy broker or during a leader change) is reported by
 * cdc_kafka_consumer_failed() and resumes once assigned again; the worker does that on
 * its own (worker/consume.c). Nothing is skipped or repeated.
 */
static void test_failed_partition_resumes(void **state)
{
    char topic[128], reply[256], cmd[96], failed_topics[64][256];
    int32_t failed[64];
    cdc_kafka_consumer_t *c;
    cdc_error_t e;
    size_t nfailed = 0, n;
    long long deadline;
    (void)state;

    c = failing_lookups(topic, sizeof(topic), "tfail");
    deadline = cdc_test_now_ms() + 10000;
    while (nfailed == 0 && cdc_test_now_ms() < deadline) {
        cdc_kafka_msg_t msgs[64];
        cdc_kafka_consume_batch(c, msgs, 64, &n, 200, &e);
        cdc_kafka_msgs_release(msgs, n);
        nfailed = cdc_kafka_consumer_failed(c, failed_topics, failed, 64);
    }
    assert_true(nfailed > 0);
    for (size_t i = 0; i < nfailed; i++) {
        assert_string_equal(failed_topics[i], topic);
        if (cdc_kafka_consumer_restart(c, topic, failed[i], CDC_KAFKA_OFFSET_BEGINNING, &e) !=
            CDC_OK)
            fail_msg("restart of partition %d: %s", (int)failed[i], e.msg);
    }
    snprintf(cmd, sizeof(cmd), "ERRORS CLEAR 2");
    assert_true(cdc_test_kafka_ctl(cmd, reply, sizeof(reply)));
    consume_and_check_resuming(c, 300, NPART, 30000, topic);
    assert_int_equal(cdc_kafka_consumer_failed(c, failed_topics, failed, 64), 0);
    cdc_kafka_consumer_free(c);
}

/*
 * The failed partitions are all reported even when they are taken one at a time:
 * taking some leaves the others for the next call (earlier, taking 16 forgot the rest,
 * and those partitions never fetched again, without a word).
 */
static void test_failed_partitions_taken_one_by_one(void **state)
{
    char topic[128], reply[256], cmd[96], failed_topics[1][256];
    int32_t failed[1];
    cdc_kafka_consumer_t *c;
    cdc_error_t e;
    size_t n, restarted = 0;
    long long deadline;
    (void)state;

    c = failing_lookups(topic, sizeof(topic), "tfail1");
    /* let the lookups fail, then take the failed partitions one per call */
    deadline = cdc_test_now_ms() + 3000;
    while (cdc_test_now_ms() < deadline) {
        cdc_kafka_msg_t msgs[64];
        cdc_kafka_consume_batch(c, msgs, 64, &n, 200, &e);
        cdc_kafka_msgs_release(msgs, n);
    }
    snprintf(cmd, sizeof(cmd), "ERRORS CLEAR 2");
    assert_true(cdc_test_kafka_ctl(cmd, reply, sizeof(reply)));
    while (cdc_kafka_consumer_failed(c, failed_topics, failed, 1) == 1) {
        if (cdc_kafka_consumer_restart(c, topic, failed[0], CDC_KAFKA_OFFSET_BEGINNING, &e) !=
            CDC_OK)
            fail_msg("restart of partition %d: %s", (int)failed[0], e.msg);
        restarted++;
    }
    if (restarted < 2)
        fail_msg("%zu failed partition(s) reported, expected every partition whose lookup "
                 "failed (at least two)",
                 restarted);
    consume_and_check_resuming(c, 300, NPART, 30000, topic);
    cdc_kafka_consumer_free(c);
}

/* A full local queue makes produce() poll and retry, then give up with a retriable
 * timeout after queue_full_timeout_ms; nothing queued is lost. */
static void test_backpressure(void **state)
{
    char topic[128], reply[256], key[8], cmd[32];
    acks_t acks = {0};
    cdc_kafka_producer_config_t pc = {
        .bootstrap = cdc_test_require("CDC_TEST_KAFKA"),
        .linger_ms = 0,
        .queue_max_messages = 5,
        .queue_full_timeout_ms = 300,
        .on_delivery = on_delivery,
        .cb_arg = &acks,
    };
    cdc_kafka_producer_t *p = NULL;
    cdc_kafka_consumer_t *c;
    cdc_kafka_record_t rec;
    cdc_error_t e;
    long long t0;
    (void)state;

    unique_topic(topic, sizeof(topic), "tbp");
    ensure(topic, 3);
    for (int b = 1; b <= 3; b++) {
        snprintf(cmd, sizeof(cmd), "BROKER DOWN %d", b);
        assert_true(cdc_test_kafka_ctl(cmd, reply, sizeof(reply)));
    }
    assert_int_equal(cdc_kafka_producer_new(&pc, &p, &e), CDC_OK);
    assert_int_equal(produce_range(p, &acks, topic, 0, 5), 0);
    snprintf(key, sizeof(key), "k");
    rec = (cdc_kafka_record_t){.topic = topic,
                               .partition = CDC_KAFKA_PARTITION_ANY,
                               .key = key,
                               .key_len = 1,
                               .value = "5",
                               .value_len = 1};
    t0 = cdc_test_now_ms();
    assert_int_equal(cdc_kafka_produce(p, &rec, &e), CDC_ERR_TIMEOUT);
    assert_true(e.retriable);
    assert_true(cdc_test_now_ms() - t0 >= 250);
    for (int b = 1; b <= 3; b++) {
        snprintf(cmd, sizeof(cmd), "BROKER UP %d", b);
        assert_true(cdc_test_kafka_ctl(cmd, reply, sizeof(reply)));
    }
    assert_int_equal(cdc_kafka_producer_flush(p, 60000, &e), CDC_OK);
    assert_int_equal(acks.ok, 5);
    assert_int_equal(acks.failed, 0);
    cdc_kafka_producer_free(p);
    c = new_consumer();
    assign_all(c, topic, 3);
    consume_and_check(c, 5, 3, 30000);
    cdc_kafka_consumer_free(c);
}

static void test_codecs(void **state)
{
    static const char *codecs[] = {"none", "gzip", "snappy", "lz4", "zstd"};
    (void)state;
    for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++) {
        char topic[128];
        acks_t acks = {0};
        cdc_kafka_producer_t *p;
        cdc_kafka_consumer_t *c;
        cdc_error_t e;
        unique_topic(topic, sizeof(topic), codecs[i]);
        ensure(topic, 3);
        p = new_producer(codecs[i], &acks);
        assert_non_null(p);
        assert_int_equal(produce_range(p, &acks, topic, 0, 300), 0);
        assert_int_equal(cdc_kafka_producer_flush(p, 30000, &e), CDC_OK);
        assert_int_equal(acks.ok, 300);
        cdc_kafka_producer_free(p);
        c = new_consumer();
        assign_all(c, topic, 3);
        consume_and_check(c, 300, 3, 30000);
        cdc_kafka_consumer_free(c);
    }
}

static void test_seek_pause_watermarks(void **state)
{
    char topic[128];
    acks_t acks = {0};
    cdc_kafka_producer_t *p;
    cdc_kafka_consumer_t *c;
    cdc_kafka_msg_t msgs[100];
    cdc_error_t e;
    int64_t lo = -5, hi = -5;
    size_t n = 0;
    int32_t count = 0;
    cdc_kafka_tp_t tp;
    (void)state;

    unique_topic(topic, sizeof(topic), "tseek");
    ensure(topic, 1);
    p = new_producer(NULL, &acks);
    assert_non_null(p);
    assert_int_equal(produce_range(p, &acks, topic, 0, 50), 0);
    assert_int_equal(cdc_kafka_producer_flush(p, 30000, &e), CDC_OK);
    assert_int_equal(cdc_kafka_producer_partitions(p, topic, &count, 5000, &e), CDC_OK);
    assert_int_equal(count, 1);
    cdc_kafka_producer_free(p);

    c = new_consumer();
    assert_int_equal(cdc_kafka_consumer_watermarks(c, topic, 0, &lo, &hi, 5000, &e), CDC_OK);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 50);
    {
        int64_t ends[2] = {-5, -5};
        assert_int_equal(cdc_kafka_consumer_end_offsets(c, topic, 1, ends, 5000, &e), CDC_OK);
        assert_int_equal(ends[0], 50);
        assert_int_equal(ends[1], -5); /* only the partitions asked for */
        assert_int_not_equal(cdc_kafka_consumer_end_offsets(c, topic, 2, ends, 5000, &e), CDC_OK);
    }
    assert_int_equal(cdc_kafka_consumer_partitions(c, topic, &count, 5000, &e), CDC_OK);
    assert_int_equal(count, 1);
    assert_int_equal(cdc_kafka_consumer_partitions(c, "no-such-topic-xyz", &count, 5000, &e),
                     CDC_ERR_NOT_FOUND);

    tp = (cdc_kafka_tp_t){topic, 0, 40};
    assert_int_equal(cdc_kafka_consumer_assign(c, &tp, 1, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consume_batch(c, msgs, 100, &n, 10000, &e), CDC_OK);
    assert_true(n > 0);
    assert_int_equal(msgs[0].offset, 40);
    cdc_kafka_msgs_release(msgs, n);

    /* seek back and read from there */
    assert_int_equal(cdc_kafka_consumer_seek(c, topic, 0, 5, 5000, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consume_batch(c, msgs, 1, &n, 10000, &e), CDC_OK);
    assert_int_equal(n, 1);
    assert_int_equal(msgs[0].offset, 5);
    cdc_kafka_msgs_release(msgs, n);

    /* paused: nothing arrives; resumed: the next offset arrives */
    assert_int_equal(cdc_kafka_consumer_seek(c, topic, 0, 10, 5000, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consumer_pause(c, topic, 0, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consume_batch(c, msgs, 100, &n, 500, &e), CDC_OK);
    cdc_kafka_msgs_release(msgs, n);
    assert_int_equal(n, 0);
    assert_int_equal(cdc_kafka_consumer_resume(c, topic, 0, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consume_batch(c, msgs, 1, &n, 10000, &e), CDC_OK);
    assert_int_equal(n, 1);
    assert_int_equal(msgs[0].offset, 10);
    cdc_kafka_msgs_release(msgs, n);

    /* an offset past the end is an error, not a silent reset */
    tp.offset = 1000;
    assert_int_equal(cdc_kafka_consumer_assign(c, &tp, 1, &e), CDC_OK);
    {
        cdc_err_t rc = CDC_OK;
        long long deadline = cdc_test_now_ms() + 15000;
        while (rc == CDC_OK && cdc_test_now_ms() < deadline) {
            rc = cdc_kafka_consume_batch(c, msgs, 100, &n, 500, &e);
            cdc_kafka_msgs_release(msgs, n);
        }
        assert_int_not_equal(rc, CDC_OK);
        assert_false(e.retriable);
    }
    assert_int_equal(cdc_kafka_consumer_assign(c, NULL, 0, &e), CDC_OK);
    cdc_kafka_consumer_free(c);
}

/*
 * A partition paused before an assignment fetches after it: librdkafka keeps a pause
 * across rd_kafka_assign() (a worker paused by --max-staged-bytes and assigned again
 * would stall silently, docs/worker.md); cdc_kafka_consumer_assign lifts it.
 */
static void test_assign_lifts_pause(void **state)
{
    char topic[128];
    acks_t acks = {0};
    cdc_kafka_producer_t *p;
    cdc_kafka_consumer_t *c;
    cdc_kafka_msg_t msgs[100];
    cdc_kafka_tp_t tp;
    cdc_error_t e;
    size_t n = 0;
    int got = 0;
    long long deadline;
    (void)state;

    unique_topic(topic, sizeof(topic), "tpause");
    ensure(topic, 1);
    p = new_producer("none", &acks);
    assert_non_null(p);
    assert_int_equal(produce_range(p, &acks, topic, 0, 20), 0);
    assert_int_equal(cdc_kafka_producer_flush(p, 30000, &e), CDC_OK);

    c = new_consumer();
    tp = (cdc_kafka_tp_t){topic, 0, 0};
    assert_int_equal(cdc_kafka_consumer_assign(c, &tp, 1, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consumer_pause(c, topic, 0, &e), CDC_OK);
    /* paused: nothing (the prefetched batch may still come, so drain it first) */
    deadline = cdc_test_now_ms() + 1500;
    while (cdc_test_now_ms() < deadline) {
        assert_int_equal(cdc_kafka_consume_batch(c, msgs, 100, &n, 200, &e), CDC_OK);
        cdc_kafka_msgs_release(msgs, n);
    }
    /* unassigned and assigned again from offset 0, as a worker's new assignment does */
    assert_int_equal(cdc_kafka_consumer_assign(c, NULL, 0, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consumer_assign(c, &tp, 1, &e), CDC_OK);
    deadline = cdc_test_now_ms() + 10000;
    while (got < 20 && cdc_test_now_ms() < deadline) {
        assert_int_equal(cdc_kafka_consume_batch(c, msgs, 100, &n, 200, &e), CDC_OK);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(msgs[i].offset, got++);
        cdc_kafka_msgs_release(msgs, n);
    }
    if (got != 20)
        fail_msg("a partition paused before its assignment fetched %d of 20 records after it", got);
    cdc_kafka_consumer_free(c);
    cdc_kafka_producer_free(p);
}

/* The control channel named by host (the compose stack's kafka-1:9099): resolved, and a name
 * that does not resolve is a retriable error naming the address. */
static void test_ensure_topic_control_by_name(void **state)
{
    const char *bs = cdc_test_require("CDC_TEST_KAFKA");
    const char *control = cdc_test_require("CDC_KAFKA_DEV_CONTROL");
    const char *colon = strrchr(control, ':');
    char saved[128], by_name[128], topic[128];
    cdc_kafka_topic_spec_t spec;
    cdc_error_t e;
    int32_t n = 0;
    (void)state;

    assert_non_null(colon);
    snprintf(saved, sizeof(saved), "%s", control);
    snprintf(by_name, sizeof(by_name), "localhost%s", colon);
    setenv("CDC_KAFKA_DEV_CONTROL", by_name, 1);
    unique_topic(topic, sizeof(topic), "tname");
    spec = (cdc_kafka_topic_spec_t){.name = topic, .partitions = 6};
    assert_int_equal(cdc_kafka_ensure_topic(bs, NULL, &spec, 10000, &e), CDC_OK);
    assert_int_equal(cdc_kafka_topic_partitions(bs, NULL, topic, &n, 5000, &e), CDC_OK);
    assert_int_equal(n, 6);

    setenv("CDC_KAFKA_DEV_CONTROL", "no-such-host.invalid:9099", 1);
    unique_topic(topic, sizeof(topic), "tname");
    spec = (cdc_kafka_topic_spec_t){.name = topic, .partitions = 6};
    assert_int_equal(cdc_kafka_ensure_topic(bs, NULL, &spec, 10000, &e), CDC_ERR_UNAVAILABLE);
    assert_true(e.retriable);
    assert_non_null(strstr(e.msg, "no-such-host.invalid:9099"));
    setenv("CDC_KAFKA_DEV_CONTROL", saved, 1);
}

static void test_ensure_topic(void **state)
{
    const char *bs = cdc_test_require("CDC_TEST_KAFKA");
    char topic[128];
    cdc_kafka_topic_spec_t spec;
    cdc_error_t e;
    int32_t n = 0;
    acks_t acks = {0};
    cdc_kafka_producer_t *p;
    cdc_kafka_record_t rec;
    (void)state;

    unique_topic(topic, sizeof(topic), "tens");
    spec = (cdc_kafka_topic_spec_t){.name = topic, .partitions = 5, .compact = true};
    assert_int_equal(cdc_kafka_ensure_topic(bs, NULL, &spec, 10000, &e), CDC_OK);
    assert_int_equal(cdc_kafka_topic_partitions(bs, NULL, topic, &n, 5000, &e), CDC_OK);
    assert_int_equal(n, 5);
    /* idempotent */
    assert_int_equal(cdc_kafka_ensure_topic(bs, NULL, &spec, 10000, &e), CDC_OK);
    /* a different count is a conflict */
    spec.partitions = 7;
    assert_int_equal(cdc_kafka_ensure_topic(bs, NULL, &spec, 10000, &e), CDC_ERR_CONFLICT);
    assert_non_null(strstr(e.msg, "has 5 partitions"));
    assert_int_equal(cdc_kafka_topic_partitions(bs, NULL, "never-created-topic", &n, 5000, &e),
                     CDC_ERR_NOT_FOUND);

    /* a topic created on first use gets the broker's default (kafka-dev: 12) */
    unique_topic(topic, sizeof(topic), "tauto");
    p = new_producer(NULL, &acks);
    assert_non_null(p);
    rec = (cdc_kafka_record_t){
        .topic = topic, .partition = CDC_KAFKA_PARTITION_ANY, .value = "x", .value_len = 1};
    assert_int_equal(cdc_kafka_produce(p, &rec, &e), CDC_OK);
    assert_int_equal(cdc_kafka_producer_flush(p, 30000, &e), CDC_OK);
    assert_int_equal(acks.ok, 1);
    cdc_kafka_producer_free(p);
    assert_int_equal(cdc_kafka_topic_partitions(bs, NULL, topic, &n, 5000, &e), CDC_OK);
    assert_int_equal(n, 12);
}

/*
 * Without CDC_KAFKA_DEV_CONTROL (a process started by hand next to `make run`), a new
 * topic on the development broker is created through a metadata request at once: the
 * mock cluster names no controller among its brokers, and a CreateTopics waited for one
 * until it timed out (30 s in the capture, issue 18). An existing topic is found the same
 * way. The broker's default count (12) is what such a topic gets.
 */
static void test_ensure_topic_without_control(void **state)
{
    const char *bs = cdc_test_require("CDC_TEST_KAFKA");
    const char *control = getenv("CDC_KAFKA_DEV_CONTROL");
    char saved[128], topic[128];
    cdc_kafka_topic_spec_t spec;
    cdc_error_t e;
    int32_t n = 0;
    long long start, took;
    (void)state;

    snprintf(saved, sizeof(saved), "%s", control ? control : "");
    unsetenv("CDC_KAFKA_DEV_CONTROL");
    unique_topic(topic, sizeof(topic), "tnoctl");
    spec = (cdc_kafka_topic_spec_t){.name = topic, .partitions = NPART};
    start = cdc_test_now_ms();
    assert_int_equal(cdc_kafka_ensure_topic(bs, NULL, &spec, 30000, &e), CDC_OK);
    took = cdc_test_now_ms() - start;
    if (took > 5000)
        fail_msg("creating topic %s took %lld ms (waited for a controller?)", topic, took);
    assert_int_equal(cdc_kafka_topic_partitions(bs, NULL, topic, &n, 5000, &e), CDC_OK);
    assert_int_equal(n, NPART);
    start = cdc_test_now_ms();
    assert_int_equal(cdc_kafka_ensure_topic(bs, NULL, &spec, 30000, &e), CDC_OK);
    assert_true(cdc_test_now_ms() - start < 5000);
    if (saved[0])
        setenv("CDC_KAFKA_DEV_CONTROL", saved, 1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_processes_10k),
        cmocka_unit_test(test_broker_down_up),
        cmocka_unit_test(test_injected_errors),
        cmocka_unit_test(test_failed_partition_resumes),
        cmocka_unit_test(test_failed_partitions_taken_one_by_one),
        cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_codecs),
        cmocka_unit_test(test_seek_pause_watermarks),
        cmocka_unit_test(test_assign_lifts_pause),
        cmocka_unit_test(test_ensure_topic),
        cmocka_unit_test(test_ensure_topic_control_by_name),
        cmocka_unit_test(test_ensure_topic_without_control),
    };
    if (argc == 5 && strcmp(argv[1], "produce") == 0)
        return producer_main(argv[2], atoi(argv[3]), argv[4]);
    cdc_test_require("CDC_TEST_KAFKA");
    cdc_test_require("CDC_TEST_KAFKA_CTL");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
