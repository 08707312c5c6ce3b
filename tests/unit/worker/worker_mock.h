/*
 * An in-process worker for the unit tests of worker/consume.c and worker/session.c, with
 * no server outside the test process: librdkafka's mock cluster (what tools/kafka-dev
 * wraps) runs in the test, a small thread answers the development broker's control
 * channel (common/kafka_dev.c: the mock has no CreateTopics, the dead-letter topic is
 * created through it), and each test gets a cdc_worker_t with a topic prefix of its own
 * (its table public.orders on <prefix>.public.orders, 12 partitions, and the schema topic
 * <prefix>._schemas), a local warehouse and a state directory in a temporary directory.
 * The cluster lives for the whole test binary (mock_cluster_up/down as the group's setup
 * and teardown: stopping librdkafka takes about a second), each worker for one test
 * (mock_up/mock_down). Events are produced in the capture's format (docs/events.md) with
 * the `cdc.schema` header.
 */
#ifndef CDC_TEST_WORKER_MOCK_H
#define CDC_TEST_WORKER_MOCK_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/cdcschema.h"
#include "common/clock.h"
#include "tests/harness/harness.h"
#include "tests/unit/worker/worker_fixtures.h"
#include "worker/worker.h"

#define MOCK_WAIT_MS 10000 /* deadline of every wait on Kafka */

/* The mock cluster, shared by the tests of a binary. */
typedef struct mock_cluster {
    rd_kafka_t *rk; /* owns the mock cluster */
    rd_kafka_mock_cluster_t *mc;
    int control_fd; /* the control channel's listener */
    pthread_t control;
    cdc_kafka_producer_t *prod; /* the tests' producer */
} mock_cluster_t;

static mock_cluster_t mock_kafka;

/* One test's worker and topics. */
typedef struct mock_worker {
    cdc_kafka_producer_t *prod; /* mock_kafka's */
    char prefix[32];
    char topic[64];        /* <prefix>.public.orders */
    char schema_topic[64]; /* <prefix>._schemas */
    char dir[256];
    char wh[300], state[300];
    cdc_metrics_t *metrics;
    volatile _Atomic sig_atomic_t stop;
    cdc_worker_t *w;
    uint64_t lsn; /* of the next event produced */
} mock_worker_t;

/* Answers "CREATE <topic> <partitions>" lines on the control channel until its listener
 * is shut down. */
static inline void *mock_control_main(void *arg)
{
    mock_cluster_t *m = arg;
    for (;;) {
        char line[512], topic[300];
        int parts = 0, fd = accept(m->control_fd, NULL, NULL);
        ssize_t n;
        if (fd < 0)
            return NULL;
        n = read(fd, line, sizeof(line) - 1);
        line[n > 0 ? n : 0] = '\0';
        if (sscanf(line, "CREATE %299s %d", topic, &parts) == 2 &&
            rd_kafka_mock_topic_create(m->mc, topic, parts, 1) == RD_KAFKA_RESP_ERR_NO_ERROR)
            (void)!write(fd, "OK\n", 3);
        else
            (void)!write(fd, "ERR\n", 4);
        close(fd);
    }
}

/* Group setup: starts the mock cluster, its control channel and the tests' producer. */
static inline int mock_cluster_up(void **state)
{
    char errstr[256], ctl[64];
    int port = 0;
    cdc_error_t e;
    mock_cluster_t *m = &mock_kafka;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    (void)state;
    rd_kafka_conf_set(conf, "log_level", "3", NULL, 0);
    m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    assert_non_null(m->rk);
    m->mc = rd_kafka_mock_cluster_new(m->rk, 1);
    assert_non_null(m->mc);
    m->control_fd = cdc_test_listen_loopback(&port);
    assert_int_equal(pthread_create(&m->control, NULL, mock_control_main, m), 0);
    snprintf(ctl, sizeof(ctl), "127.0.0.1:%d", port);
    setenv("CDC_KAFKA_DEV_CONTROL", ctl, 1);
    cdc_kafka_producer_config_t pc = {
        .bootstrap = rd_kafka_mock_cluster_bootstraps(m->mc), .client_id = "test", .linger_ms = 0};
    assert_int_equal(cdc_kafka_producer_new(&pc, &m->prod, &e), CDC_OK);
    return 0;
}

static inline int mock_cluster_down(void **state)
{
    mock_cluster_t *m = &mock_kafka;
    (void)state;
    cdc_kafka_producer_free(m->prod);
    shutdown(m->control_fd, SHUT_RDWR);
    pthread_join(m->control, NULL);
    close(m->control_fd);
    unsetenv("CDC_KAFKA_DEV_CONTROL");
    rd_kafka_mock_cluster_destroy(m->mc);
    rd_kafka_destroy(m->rk);
    return 0;
}

/* A test's worker on topics of its own; not opened yet (the test may change m->w->cfg
 * first, then calls mock_worker_open). */
static inline void mock_up(mock_worker_t *m)
{
    static int ntests;
    const char *tmpd = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

    memset(m, 0, sizeof(*m));
    m->prod = mock_kafka.prod;
    snprintf(m->prefix, sizeof(m->prefix), "t%d", ++ntests);
    snprintf(m->topic, sizeof(m->topic), "%s.public.orders", m->prefix);
    snprintf(m->schema_topic, sizeof(m->schema_topic), "%s._schemas", m->prefix);
    assert_int_equal(rd_kafka_mock_topic_create(mock_kafka.mc, m->topic, CDC_WORKER_PARTITIONS, 1),
                     0);
    assert_int_equal(rd_kafka_mock_topic_create(mock_kafka.mc, m->schema_topic, 1, 1), 0);

    snprintf(m->dir, sizeof(m->dir), "%s/test_worker_mock.XXXXXX", tmpd);
    assert_non_null(mkdtemp(m->dir));
    snprintf(m->wh, sizeof(m->wh), "%s/wh", m->dir);
    snprintf(m->state, sizeof(m->state), "%s/state", m->dir);

    m->w = calloc(1, sizeof(*m->w));
    assert_non_null(m->w);
    cdc_worker_t *w = m->w;
    w->cfg.id = "w1";
    w->cfg.job = "job-unit";
    w->cfg.kafka.bootstrap = (char *)rd_kafka_mock_cluster_bootstraps(mock_kafka.mc);
    w->cfg.topic_prefix = m->prefix;
    w->cfg.tables = "public.orders";
    w->cfg.warehouse = m->wh;
    w->cfg.state_dir = m->state;
    w->cfg.heartbeat_interval_ms = 500;
    w->cfg.dedup_ttl_ms = 86400000;
    w->cfg.max_record_bytes = 16 << 20;
    w->cfg.max_staged_bytes = 128 << 20;
    w->cfg.progress_timeout_ms = 30000;
    w->cfg.batch_size = 1000;
    w->cfg.toast_placeholder = "__debezium_unavailable_value";
    w->incarnation = 1;
    w->stop = &m->stop;
    pthread_mutex_init(&w->link_lock, NULL);
    cdc_http_doc_init(&w->status);
    m->metrics = w->metrics = cdc_metrics_new();
    /* the process-wide series the code under test counts in (named as in worker/main.c) */
    const struct {
        cdc_counter_t **c;
        const char *name;
    } counters[] = {
        {&w->m_tombstones, "cdc_worker_tombstones_total"},
        {&w->m_fetch_restarts, "cdc_worker_fetch_restarts_total"},
        {&w->m_stalls, "cdc_worker_stalls_total"},
        {&w->m_missing, "cdc_worker_missing_offsets_total"},
        {&w->m_before_floor, "cdc_worker_before_floor_total"},
        {&w->m_floor_rows, "cdc_worker_floor_rows_total"},
        {&w->m_ckpt_bytes, "cdc_worker_checkpoint_uploaded_bytes_total"},
        {&w->m_epochs, "cdc_worker_epochs_acked_total"},
        {&w->m_aborts, "cdc_worker_aborts_total"},
        {&w->m_rejected, "cdc_worker_stale_messages_total"},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
        *counters[i].c = cdc_metrics_counter(w->metrics, counters[i].name, "", NULL);
    w->m_floors_waiting = cdc_metrics_gauge(w->metrics, "cdc_worker_floors_waiting", "", NULL);
    w->m_stalled = cdc_metrics_gauge(w->metrics, "cdc_worker_stalled_partitions", "", NULL);
}

/* Opens the worker's Kafka clients, storage, catalog and finalizer (cdc_worker_data_open). */
static inline void mock_worker_open(mock_worker_t *m)
{
    cdc_error_t e;
    if (cdc_worker_data_open(m->w, &e) != CDC_OK)
        fail_msg("cdc_worker_data_open: %s", e.msg);
}

static inline void mock_down(mock_worker_t *m)
{
    char cmd[300];
    m->stop = 1; /* a dead letter being retried gives up */
    cdc_worker_data_close(m->w);
    cdc_msg_client_close(m->w->msg);
    pthread_mutex_destroy(&m->w->link_lock);
    cdc_http_doc_free(&m->w->status); /* /status, when a test's gauges published it */
    cdc_metrics_free(m->metrics);
    free(m->w);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", m->dir);
    assert_int_equal(system(cmd), 0);
}

static inline void mock_flush(mock_worker_t *m)
{
    cdc_error_t e;
    assert_int_equal(cdc_kafka_producer_flush(m->prod, MOCK_WAIT_MS, &e), CDC_OK);
}

/* Produces value (NULL: a tombstone) to the test topic's partition with the `cdc.schema`
 * header naming version (none when version is 0), and waits for Kafka's ack. */
static inline void mock_produce(mock_worker_t *m, int32_t partition, const char *value, int version)
{
    char ver[16];
    cdc_error_t e;
    snprintf(ver, sizeof(ver), "%d", version);
    cdc_kafka_header_t h = {"cdc.schema", ver, strlen(ver)};
    cdc_kafka_record_t r = {m->topic,
                            partition,
                            "k",
                            1,
                            value,
                            value ? strlen(value) : 0,
                            version > 0 ? &h : NULL,
                            version > 0 ? 1 : 0,
                            0,
                            NULL};
    assert_int_equal(cdc_kafka_produce(m->prod, &r, &e), CDC_OK);
    mock_flush(m);
}

/* Registers tests/unit/fixtures/worker/capture_schema_v1.json (its topic renamed to the
 * test's) as version 1 of the test topic on the test's schema topic. */
static inline void mock_register_schema(mock_worker_t *m)
{
    char key[300], doc[4096];
    size_t len;
    cdc_error_t e;
    char *fx = fixture("capture_schema_v1.json", &len);
    const char *at = strstr(fx, "cdc.public.orders");
    assert_non_null(at);
    snprintf(doc, sizeof(doc), "%.*s%s%s", (int)(at - fx), fx, m->topic,
             at + strlen("cdc.public.orders"));
    free(fx);
    cdc_schema_record_key(m->topic, 1, key, sizeof(key));
    cdc_kafka_record_t r = {m->schema_topic, 0,    key, strlen(key), doc,
                            strlen(doc),     NULL, 0,   0,           NULL};
    assert_int_equal(cdc_kafka_produce(m->prod, &r, &e), CDC_OK);
    mock_flush(m);
}

/* An event of the capture for row id of public.orders (op 'c', 'u' or 'd') at lsn;
 * the caller frees it. */
static inline char *mock_event(char op, int id, const char *customer, uint64_t lsn)
{
    char rows[160], *v = NULL;
    if (op == 'd')
        snprintf(rows, sizeof(rows), "\"before\":{\"id\":%d},\"after\":null", id);
    else
        snprintf(rows, sizeof(rows), "\"before\":null,\"after\":{\"id\":%d,\"customer\":\"%s\"}",
                 id, customer);
    assert_true(
        asprintf(&v,
                 "{%s,\"source\":{\"schema\":\"public\",\"table\":\"orders\",\"lsn\":%llu,"
                 "\"txId\":9,\"ts_ms\":1709287200000,\"sequence\":\"[\\\"%llu\\\",\\\"%llu\\\"]\"},"
                 "\"op\":\"%c\",\"ts_ms\":1}",
                 rows, (unsigned long long)lsn, (unsigned long long)lsn, (unsigned long long)lsn,
                 op) > 0);
    return v;
}

/* Produces the event of mock_event to partition (schema version 1). */
static inline void mock_produce_event(mock_worker_t *m, int32_t partition, char op, int id,
                                      const char *customer, uint64_t lsn)
{
    char *v = mock_event(op, id, customer, lsn);
    mock_produce(m, partition, v, 1);
    free(v);
}

/* An Assign of term/generation for the given slots, each from the beginning (offsets[i] < 0)
 * or from offsets[i] of topic, with no state. */
typedef struct mock_assign {
    Cdc__Assign a;
    Cdc__PartitionState ps[CDC_WORKER_PARTITIONS + 1], *psp[CDC_WORKER_PARTITIONS + 1];
    Cdc__TopicOffset to[CDC_WORKER_PARTITIONS + 1], *top[CDC_WORKER_PARTITIONS + 1];
} mock_assign_t;

static inline Cdc__Assign *mock_assign(mock_assign_t *b, const char *topic, uint64_t term,
                                       uint64_t generation, const uint32_t *slots,
                                       const int64_t *offsets, size_t n)
{
    memset(b, 0, sizeof(*b));
    cdc__assign__init(&b->a);
    b->a.term = term;
    b->a.generation = generation;
    for (size_t i = 0; i < n; i++) {
        cdc__partition_state__init(&b->ps[i]);
        b->ps[i].partition = slots[i];
        b->ps[i].state_handle = "";
        if (offsets != NULL && offsets[i] >= 0) {
            cdc__topic_offset__init(&b->to[i]);
            b->to[i].topic = (char *)topic;
            b->to[i].next_offset = offsets[i];
            b->top[i] = &b->to[i];
            b->ps[i].n_offsets = 1;
            b->ps[i].offsets = &b->top[i];
        }
        b->psp[i] = &b->ps[i];
    }
    b->a.n_partitions = n;
    b->a.partitions = b->psp;
    return &b->a;
}

typedef struct mock_offset_wait {
    mock_worker_t *m;
    uint32_t slot;
    int64_t offset;
} mock_offset_wait_t;

static inline bool mock_consumed_to(void *arg)
{
    mock_offset_wait_t *o = arg;
    cdc_error_t e;
    if (cdc_worker_consume(o->m->w, 50, &e) != CDC_OK)
        fail_msg("cdc_worker_consume: %s", e.msg);
    int t = cdc_worker_topic_index(o->m->w, o->m->topic);
    return t >= 0 && o->m->w->slots[o->slot].next_offset[t] >= o->offset;
}

/* Consumes until slot's next offset of the test topic (whatever its index among the
 * worker's topics) reached offset (within MOCK_WAIT_MS). */
static inline void mock_consume_to(mock_worker_t *m, uint32_t slot, int64_t offset)
{
    mock_offset_wait_t o = {m, slot, offset};
    if (!cdc_test_wait_for(mock_consumed_to, &o, MOCK_WAIT_MS)) {
        int t = cdc_worker_topic_index(m->w, m->topic);
        fail_msg("slot %u stayed at offset %lld, waited for %lld", slot,
                 t >= 0 ? (long long)m->w->slots[slot].next_offset[t] : -1LL, (long long)offset);
    }
}

#endif
