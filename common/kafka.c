/*
 * librdkafka adapter (see kafka.h): producer with per-message delivery reports,
 * manually assigned consumer, topic admin, and the translation of librdkafka error
 * codes to cdc_err_t. Nothing outside this file, kafka_admin.c (topic admin) and their
 * kafka_rd.h (and tools/kafka-dev) sees rdkafka.h. The parts that need no librdkafka
 * live beside it: the key partitioner (kafka_partitioner.c) and the development
 * broker's control channel (kafka_dev.c).
 */
#include "common/kafka.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/kafka_int.h"
#include "common/kafka_rd.h"
#include "common/log.h"

/* ---- errors ------------------------------------------------------------------------- */

/* Our code and retriable flag for a librdkafka error. */
static cdc_err_t translate(rd_kafka_resp_err_t err, bool *retriable)
{
    *retriable = false;
    switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
        return CDC_OK;
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
        *retriable = true;
        return CDC_ERR_TIMEOUT;
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR__NODE_UPDATE:
    case RD_KAFKA_RESP_ERR__RETRY:
    case RD_KAFKA_RESP_ERR__OUTDATED:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS:
        *retriable = true;
        return CDC_ERR_UNAVAILABLE;
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
        return CDC_ERR_NOT_FOUND;
    case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS:
        return CDC_ERR_EXISTS;
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
        return CDC_ERR_INVALID;
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR__DESTROY:
        return CDC_ERR_CLOSED;
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION:
        return CDC_ERR_UNSUPPORTED;
    case RD_KAFKA_RESP_ERR__FENCED:
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
        return CDC_ERR_FENCED;
    default:
        return CDC_ERR_KAFKA;
    }
}

cdc_err_t cdc_kafka__kerr(cdc_error_t *e, rd_kafka_resp_err_t err, const char *fmt, ...)
{
    char what[384];
    va_list ap;
    bool retriable;
    cdc_err_t code = translate(err, &retriable);

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return cdc_error_set_retriable(e, code, retriable, "%s: %s (%s)", what, rd_kafka_err2str(err),
                                   rd_kafka_err2name(err));
}

/* Same as cdc_kafka__kerr() for an rd_kafka_error_t, which carries its own retriable flag; frees
 * it. */
static cdc_err_t kerror(cdc_error_t *e, rd_kafka_error_t *error, const char *what)
{
    bool retriable;
    cdc_err_t code = translate(rd_kafka_error_code(error), &retriable);

    if (rd_kafka_error_is_retriable(error))
        retriable = true;
    if (rd_kafka_error_is_fatal(error))
        retriable = false;
    cdc_error_set_retriable(e, code, retriable, "%s: %s", what, rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
    return code;
}

/* ---- configuration ---------------------------------------------------------------------- */

cdc_err_t cdc_kafka__conf_set(rd_kafka_conf_t *conf, const char *name, const char *value,
                              cdc_error_t *e)
{
    char errstr[512];
    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        return cdc_error_set(e, CDC_ERR_CONFIG, "invalid Kafka property \"%s=%s\": %s", name, value,
                             errstr);
    return CDC_OK;
}

static cdc_err_t conf_set_int(rd_kafka_conf_t *conf, const char *name, int64_t v, cdc_error_t *e)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    return cdc_kafka__conf_set(conf, name, buf, e);
}

/* Applies "k=v" entries separated by ';' or newlines (blank entries ignored; a file with
 * CRLF line ends reads the same). */
cdc_err_t cdc_kafka__conf_apply_properties(rd_kafka_conf_t *conf, const char *props, cdc_error_t *e)
{
    char *copy, *save = NULL;
    cdc_err_t rc = CDC_OK;

    if (props == NULL || props[0] == '\0')
        return CDC_OK;
    copy = strdup(props);
    if (copy == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (char *kv = strtok_r(copy, ";\r\n", &save); kv; kv = strtok_r(NULL, ";\r\n", &save)) {
        char *eq;
        while (*kv == ' ' || *kv == '\t')
            kv++;
        if (*kv == '\0')
            continue;
        eq = strchr(kv, '=');
        if (eq == NULL || eq == kv) {
            rc = cdc_error_set(e, CDC_ERR_CONFIG,
                               "invalid Kafka property \"%s\": expected key=value", kv);
            break;
        }
        *eq = '\0';
        rc = cdc_kafka__conf_set(conf, kv, eq + 1, e);
        if (rc != CDC_OK)
            break;
    }
    free(copy);
    return rc;
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    /* Connection failures (FAIL) are routine while brokers restart: warn only. */
    if (level <= 3 && strcmp(fac, "FAIL") != 0)
        cdc_log_error("kafka %s: %s", fac, buf);
    else if (level <= 4)
        cdc_log_warn("kafka %s: %s", fac, buf);
    else if (level <= 6)
        cdc_log_info("kafka %s: %s", fac, buf);
    else
        cdc_log_debug("kafka %s: %s", fac, buf);
}

rd_kafka_conf_t *cdc_kafka__conf_base(const char *bootstrap, const char *client_id, cdc_error_t *e)
{
    rd_kafka_conf_t *conf;

    if (bootstrap == NULL || bootstrap[0] == '\0') {
        cdc_error_set(e, CDC_ERR_CONFIG, "no Kafka bootstrap servers given");
        return NULL;
    }
    conf = rd_kafka_conf_new();
    if (cdc_kafka__conf_set(conf, "bootstrap.servers", bootstrap, e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "client.id", client_id ? client_id : "cdc", e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "log.connection.close", "false", e) != CDC_OK) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_log_cb(conf, log_cb);
    return conf;
}

/* ---- producer ----------------------------------------------------------------------------- */

struct cdc_kafka_producer {
    rd_kafka_t *rk;
    cdc_kafka_delivery_fn on_delivery;
    void *cb_arg;
    int queue_full_timeout_ms;
    /* Topic handles kept for the producer's life, so that a produce call neither looks
     * the topic up in librdkafka by name nor takes and drops a reference: one per topic,
     * however many (a job of thousands of tables produces to as many topics), indexed by
     * the name each handle holds. */
    pthread_mutex_t topics_mu; /* guards topics[] and by_name, which only grow */
    rd_kafka_topic_t **topics;
    size_t ntopics, topics_cap;
    cdc_strmap_t by_name;
    const char *last_name; /* fast path: the name and handle of the last produce call */
    rd_kafka_topic_t *last_rkt;
};

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    cdc_kafka_producer_t *p = opaque;
    cdc_error_t detail;
    cdc_err_t code = CDC_OK;

    (void)rk;
    cdc_error_clear(&detail);
    if (m->err)
        code = cdc_kafka__kerr(&detail, m->err,
                               "could not deliver message to topic \"%s\" partition %d",
                               rd_kafka_topic_name(m->rkt), (int)m->partition);
    if (p->on_delivery)
        p->on_delivery(m->_private, code, &detail, m->partition, m->offset, p->cb_arg);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char buf[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, buf, sizeof(buf));
        cdc_log_error("kafka fatal error: %s: %s", rd_kafka_err2name(orig), buf);
    } else if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__TRANSPORT) {
        cdc_log_debug("kafka: %s", reason);
    } else {
        cdc_log_warn("kafka error %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
    }
}

/* The client of `type` made from conf (taken: destroyed when the client cannot be made),
 * with the error callback every client logs through; `what` names it in the error. */
rd_kafka_t *cdc_kafka__client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, const char *what,
                                  cdc_error_t *e)
{
    char errstr[512];
    rd_kafka_t *rk;

    rd_kafka_conf_set_error_cb(conf, error_cb);
    rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        cdc_error_set(e, CDC_ERR_CONFIG, "could not create Kafka %s: %s", what, errstr);
    }
    return rk;
}

cdc_err_t cdc_kafka_producer_new(const cdc_kafka_producer_config_t *cfg, cdc_kafka_producer_t **out,
                                 cdc_error_t *e)
{
    cdc_kafka_producer_t *p = calloc(1, sizeof(*p));
    rd_kafka_conf_t *conf;

    *out = NULL;
    if (p == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    p->on_delivery = cfg->on_delivery;
    p->cb_arg = cfg->cb_arg;
    p->queue_full_timeout_ms = cfg->queue_full_timeout_ms > 0 ? cfg->queue_full_timeout_ms : 30000;
    pthread_mutex_init(&p->topics_mu, NULL);

    conf = cdc_kafka__conf_base(cfg->bootstrap, cfg->client_id, e);
    if (conf == NULL)
        goto fail;
    if (cdc_kafka__conf_set(conf, "enable.idempotence", "true", e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "acks", "all", e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "partitioner", "murmur2_random", e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "compression.codec", cfg->compression ? cfg->compression : "lz4",
                            e) != CDC_OK ||
        conf_set_int(conf, "linger.ms", cfg->linger_ms >= 0 ? cfg->linger_ms : 5, e) != CDC_OK ||
        conf_set_int(conf, "queue.buffering.max.messages",
                     cfg->queue_max_messages > 0 ? cfg->queue_max_messages : 100000, e) != CDC_OK ||
        conf_set_int(conf, "queue.buffering.max.kbytes",
                     cfg->queue_max_kbytes > 0 ? cfg->queue_max_kbytes : 1048576, e) != CDC_OK ||
        conf_set_int(conf, "delivery.timeout.ms",
                     cfg->delivery_timeout_ms > 0 ? cfg->delivery_timeout_ms : 300000,
                     e) != CDC_OK ||
        (cfg->message_max_bytes > 0 &&
         conf_set_int(conf, "message.max.bytes", cfg->message_max_bytes, e) != CDC_OK) ||
        cdc_kafka__conf_apply_properties(conf, cfg->properties, e) != CDC_OK) {
        rd_kafka_conf_destroy(conf);
        goto fail;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
    rd_kafka_conf_set_opaque(conf, p);
    p->rk = cdc_kafka__client_new(RD_KAFKA_PRODUCER, conf, "producer", e);
    if (p->rk == NULL)
        goto fail;
    *out = p;
    return CDC_OK;
fail:
    pthread_mutex_destroy(&p->topics_mu);
    free(p);
    return e ? e->code : CDC_ERR_CONFIG;
}

void cdc_kafka_producer_free(cdc_kafka_producer_t *p)
{
    if (p == NULL)
        return;
    /* Purged messages get their delivery reports (CDC_ERR_CLOSED) from the flush. */
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(p->rk, 5000);
    for (size_t i = 0; i < p->ntopics; i++)
        rd_kafka_topic_destroy(p->topics[i]);
    free(p->topics);
    cdc_strmap_free(&p->by_name);
    rd_kafka_destroy(p->rk);
    pthread_mutex_destroy(&p->topics_mu);
    free(p);
}

/*
 * The cached handle of topic `name`, created on first use; NULL when memory ran out (the
 * caller then produces by name). The handle lives until the producer is freed.
 */
static rd_kafka_topic_t *topic_handle(cdc_kafka_producer_t *p, const char *name)
{
    rd_kafka_topic_t *rkt = NULL;

    pthread_mutex_lock(&p->topics_mu);
    if (p->last_name != NULL && strcmp(p->last_name, name) == 0) {
        rkt = p->last_rkt;
        goto out;
    }
    rkt = cdc_strmap_get(&p->by_name, name);
    if (rkt == NULL && cdc_array_reserve(p->topics, p->topics_cap, p->ntopics + 1, 16) == CDC_OK &&
        (rkt = rd_kafka_topic_new(p->rk, name, NULL)) != NULL) {
        /* keyed by the handle's own name, valid as long as the handle */
        if (cdc_strmap_put(&p->by_name, rd_kafka_topic_name(rkt), rkt) == CDC_OK) {
            p->topics[p->ntopics++] = rkt;
        } else {
            rd_kafka_topic_destroy(rkt);
            rkt = NULL;
        }
    }
    if (rkt != NULL) {
        p->last_name = rd_kafka_topic_name(rkt);
        p->last_rkt = rkt;
    }
out:
    pthread_mutex_unlock(&p->topics_mu);
    return rkt;
}

cdc_err_t cdc_kafka_produce(cdc_kafka_producer_t *p, const cdc_kafka_record_t *rec, cdc_error_t *e)
{
    rd_kafka_headers_t *hdrs = NULL;
    rd_kafka_topic_t *rkt;
    rd_kafka_resp_err_t err;
    int64_t deadline = 0;

    if (rec->topic == NULL || rec->topic[0] == '\0')
        return cdc_error_set(e, CDC_ERR_INVALID, "record without a topic");
    rkt = topic_handle(p, rec->topic);
    if (rec->header_count > 0) {
        hdrs = rd_kafka_headers_new(rec->header_count);
        for (size_t i = 0; i < rec->header_count; i++)
            rd_kafka_header_add(hdrs, rec->headers[i].name, -1, rec->headers[i].value,
                                rec->headers[i].value ? (ssize_t)rec->headers[i].value_len : 0);
    }
    for (;;) {
        if (rkt != NULL)
            err = rd_kafka_producev(
                p->rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(rec->partition),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_KEY((void *)(uintptr_t)rec->key, rec->key ? rec->key_len : 0),
                RD_KAFKA_V_VALUE((void *)(uintptr_t)rec->value, rec->value ? rec->value_len : 0),
                RD_KAFKA_V_TIMESTAMP(rec->timestamp_ms), RD_KAFKA_V_OPAQUE(rec->opaque),
                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        else
            err = rd_kafka_producev(
                p->rk, RD_KAFKA_V_TOPIC(rec->topic), RD_KAFKA_V_PARTITION(rec->partition),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_KEY((void *)(uintptr_t)rec->key, rec->key ? rec->key_len : 0),
                RD_KAFKA_V_VALUE((void *)(uintptr_t)rec->value, rec->value ? rec->value_len : 0),
                RD_KAFKA_V_TIMESTAMP(rec->timestamp_ms), RD_KAFKA_V_OPAQUE(rec->opaque),
                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return CDC_OK; /* headers now owned by the message */
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        /* Backpressure: serve delivery reports so the queue drains, bounded in time. */
        if (deadline == 0)
            deadline = cdc_clock_mono_ms() + p->queue_full_timeout_ms;
        else if (cdc_clock_mono_ms() >= deadline)
            break;
        rd_kafka_poll(p->rk, 20);
    }
    if (hdrs)
        rd_kafka_headers_destroy(hdrs);
    return cdc_kafka__kerr(e, err, "could not produce to topic \"%s\"", rec->topic);
}

int cdc_kafka_producer_poll(cdc_kafka_producer_t *p, int timeout_ms)
{
    return rd_kafka_poll(p->rk, timeout_ms);
}

cdc_err_t cdc_kafka_producer_flush(cdc_kafka_producer_t *p, int timeout_ms, cdc_error_t *e)
{
    rd_kafka_resp_err_t err = rd_kafka_flush(p->rk, timeout_ms);
    if (err)
        return cdc_kafka__kerr(e, err, "could not flush %d Kafka messages within %d ms",
                               rd_kafka_outq_len(p->rk), timeout_ms);
    return cdc_kafka_producer_fatal(p, e);
}

int cdc_kafka_producer_outstanding(cdc_kafka_producer_t *p)
{
    return rd_kafka_outq_len(p->rk);
}

cdc_err_t cdc_kafka_producer_fatal(cdc_kafka_producer_t *p, cdc_error_t *e)
{
    char buf[512];
    rd_kafka_resp_err_t err = rd_kafka_fatal_error(p->rk, buf, sizeof(buf));
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        return CDC_OK;
    return cdc_error_set_retriable(e, CDC_ERR_KAFKA, false, "Kafka producer failed: %s (%s)", buf,
                                   rd_kafka_err2name(err));
}

/*
 * Partition count of topic through handle rk. Asks for all topics' metadata (a request
 * naming the topic would create it on brokers that auto-create, whatever the client's
 * allow.auto.create.topics says), unless `create` asks for exactly that.
 */
cdc_err_t cdc_kafka__partitions_of(rd_kafka_t *rk, const char *topic, bool create, int32_t *count,
                                   int timeout_ms, cdc_error_t *e)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = NULL;
    rd_kafka_resp_err_t err;
    const struct rd_kafka_metadata_topic *t = NULL;
    cdc_err_t rc = CDC_OK;

    if (create) {
        rkt = rd_kafka_topic_new(rk, topic, NULL);
        if (rkt == NULL)
            return cdc_kafka__kerr(e, rd_kafka_last_error(), "invalid topic \"%s\"", topic);
    }
    err = rd_kafka_metadata(rk, create ? 0 : 1, rkt, &md, timeout_ms);
    if (err) {
        rc = cdc_kafka__kerr(e, err, "could not read metadata of topic \"%s\"", topic);
        goto out;
    }
    for (int i = 0; i < md->topic_cnt; i++)
        if (strcmp(md->topics[i].topic, topic) == 0)
            t = &md->topics[i];
    if (t == NULL || t->err || t->partition_cnt == 0)
        rc = cdc_kafka__kerr(e, t && t->err ? t->err : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
                             "topic \"%s\"", topic);
    else
        *count = t->partition_cnt;
out:
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    return rc;
}

cdc_err_t cdc_kafka_producer_partitions(cdc_kafka_producer_t *p, const char *topic, int32_t *count,
                                        int timeout_ms, cdc_error_t *e)
{
    return cdc_kafka__partitions_of(p->rk, topic, false, count, timeout_ms, e);
}

/* ---- consumer ------------------------------------------------------------------------------ */

/* A partition whose fetching stopped on an error (see cdc_kafka_consumer_failed). */
typedef struct failed_tp {
    char topic[256];
    int32_t partition;
} failed_tp_t;

struct cdc_kafka_consumer {
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    failed_tp_t *failed; /* not yet taken by cdc_kafka_consumer_failed; grows */
    size_t nfailed, capfailed;
};

/* Remembers topic/partition as failed (once). Never drops one: a partition left out
 * would stay stopped without a word. */
static void note_failed(cdc_kafka_consumer_t *c, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < c->nfailed; i++)
        if (c->failed[i].partition == partition && strcmp(c->failed[i].topic, topic) == 0)
            return;
    if (strlen(topic) >= sizeof(c->failed[0].topic)) {
        cdc_log_error("partition %d of topic \"%.64s...\" stopped on an error and cannot be "
                      "reported: topic name too long",
                      (int)partition, topic);
        return;
    }
    if (cdc_array_reserve(c->failed, c->capfailed, c->nfailed + 1, 16) != CDC_OK) {
        cdc_log_error("partition %d of topic \"%s\" stopped on an error and cannot be "
                      "reported: out of memory",
                      (int)partition, topic);
        return;
    }
    strcpy(c->failed[c->nfailed].topic, topic);
    c->failed[c->nfailed++].partition = partition;
}

size_t cdc_kafka_consumer_failed(cdc_kafka_consumer_t *c, char (*topics)[256], int32_t *partitions,
                                 size_t max)
{
    size_t n = c->nfailed < max ? c->nfailed : max;
    for (size_t i = 0; i < n; i++) {
        memcpy(topics[i], c->failed[i].topic, sizeof(topics[i]));
        partitions[i] = c->failed[i].partition;
    }
    /* the rest wait for the next call (none yet: c->failed may still be NULL, and a
     * memmove of NULL is undefined even for 0 bytes) */
    if (c->nfailed > n)
        memmove(c->failed, c->failed + n, (c->nfailed - n) * sizeof(*c->failed));
    c->nfailed -= n;
    return n;
}

cdc_err_t cdc_kafka_consumer_new(const cdc_kafka_consumer_config_t *cfg, cdc_kafka_consumer_t **out,
                                 cdc_error_t *e)
{
    cdc_kafka_consumer_t *c;
    rd_kafka_conf_t *conf;

    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    conf = cdc_kafka__conf_base(cfg->bootstrap, cfg->client_id, e);
    if (conf == NULL)
        goto fail;
    /* Offsets live in our checkpoints: never commit, never store, and fail instead of
     * silently resetting when a checkpointed offset is gone. */
    if (cdc_kafka__conf_set(conf, "group.id", cfg->group_id ? cfg->group_id : "cdc-unmanaged", e) !=
            CDC_OK ||
        cdc_kafka__conf_set(conf, "enable.auto.commit", "false", e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "enable.auto.offset.store", "false", e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "auto.offset.reset", "error", e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "enable.partition.eof", "false", e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "isolation.level",
                            cfg->read_committed ? "read_committed" : "read_uncommitted",
                            e) != CDC_OK ||
        conf_set_int(conf, "fetch.wait.max.ms",
                     cfg->fetch_wait_max_ms > 0 ? cfg->fetch_wait_max_ms : 100, e) != CDC_OK ||
        (cfg->fetch_max_bytes > 0 &&
         conf_set_int(conf, "fetch.max.bytes", cfg->fetch_max_bytes, e) != CDC_OK) ||
        cdc_kafka__conf_apply_properties(conf, cfg->properties, e) != CDC_OK) {
        rd_kafka_conf_destroy(conf);
        goto fail;
    }
    c->rk = cdc_kafka__client_new(RD_KAFKA_CONSUMER, conf, "consumer", e);
    if (c->rk == NULL)
        goto fail;
    rd_kafka_poll_set_consumer(c->rk);
    c->queue = rd_kafka_queue_get_consumer(c->rk);
    if (c->queue == NULL) {
        rd_kafka_destroy(c->rk);
        cdc_error_set(e, CDC_ERR_INTERNAL, "Kafka consumer has no consumer queue");
        goto fail;
    }
    *out = c;
    return CDC_OK;
fail:
    free(c);
    return e ? e->code : CDC_ERR_CONFIG;
}

void cdc_kafka_consumer_free(cdc_kafka_consumer_t *c)
{
    if (c == NULL)
        return;
    rd_kafka_assign(c->rk, NULL);
    rd_kafka_queue_destroy(c->queue);
    rd_kafka_consumer_close(c->rk);
    rd_kafka_destroy(c->rk);
    free(c->failed);
    free(c);
}

static rd_kafka_topic_partition_list_t *one_tp(const char *topic, int32_t partition, int64_t offset)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition)->offset = offset;
    return l;
}

/* A partition whose topic has no metadata yet starts in librdkafka without a leader and
 * waits for the next periodic refresh (about a second) before its first offset query and
 * fetch. Asks for each topic's metadata first; the handles (*nrkt of them in rkts) are
 * dropped by the caller once the assignment holds the topics. */
static void prefetch_metadata(cdc_kafka_consumer_t *c, const cdc_kafka_tp_t *tps, size_t n,
                              rd_kafka_topic_t **rkts, size_t max, size_t *nrkt)
{
    *nrkt = 0;
    for (size_t i = 0; i < n && *nrkt < max; i++) {
        bool seen = false;
        for (size_t k = 0; k < *nrkt && !seen; k++)
            seen = strcmp(rd_kafka_topic_name(rkts[k]), tps[i].topic) == 0;
        if (seen || (rkts[*nrkt] = rd_kafka_topic_new(c->rk, tps[i].topic, NULL)) == NULL)
            continue;
        const struct rd_kafka_metadata *md = NULL;
        if (rd_kafka_metadata(c->rk, 0, rkts[*nrkt], &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR)
            rd_kafka_metadata_destroy(md); /* else: librdkafka's own refresh finds it later */
        (*nrkt)++;
    }
}

/* tps as a partition list, every partition resumed first: librdkafka keeps a partition's
 * pause (rd_kafka_pause_partitions) across assignments, so a partition paused before and
 * assigned again would never fetch, and nothing would say so (the silent backlog stall,
 * docs/worker.md). An assignment starts every partition fetching: the pause is lifted
 * before the partitions start (after, it would also restart an offset lookup in
 * progress). Partitions this consumer never knew answer "unknown partition" here, which
 * is fine. */
static rd_kafka_topic_partition_list_t *fetching_list(cdc_kafka_consumer_t *c,
                                                      const cdc_kafka_tp_t *tps, size_t n)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, tps[i].topic, tps[i].partition)->offset =
            tps[i].offset;
    rd_kafka_resume_partitions(c->rk, l);
    for (int i = 0; i < l->cnt; i++)
        l->elems[i].err = RD_KAFKA_RESP_ERR_NO_ERROR;
    return l;
}

/* Assigns tps[0..n): the whole assignment (add false) or added to it (add true). */
static cdc_err_t assign_partitions(cdc_kafka_consumer_t *c, const cdc_kafka_tp_t *tps, size_t n,
                                   bool add, cdc_error_t *e)
{
    rd_kafka_topic_partition_list_t *l;
    rd_kafka_topic_t *rkts[16];
    size_t nrkt;
    cdc_err_t rc = CDC_OK;

    prefetch_metadata(c, tps, n, rkts, sizeof(rkts) / sizeof(rkts[0]), &nrkt);
    l = fetching_list(c, tps, n);
    if (add) {
        rd_kafka_error_t *error = rd_kafka_incremental_assign(c->rk, l);
        if (error != NULL)
            rc = kerror(e, error, "could not add partitions to the Kafka assignment");
    } else {
        rd_kafka_resp_err_t err = rd_kafka_assign(c->rk, l);
        if (err)
            rc = cdc_kafka__kerr(e, err, "could not assign %zu Kafka partitions", n);
    }
    for (size_t k = 0; k < nrkt; k++)
        rd_kafka_topic_destroy(rkts[k]);
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

cdc_err_t cdc_kafka_consumer_assign(cdc_kafka_consumer_t *c, const cdc_kafka_tp_t *tps, size_t n,
                                    cdc_error_t *e)
{
    if (n == 0) {
        rd_kafka_resp_err_t err = rd_kafka_assign(c->rk, NULL);
        return err ? cdc_kafka__kerr(e, err, "could not clear the Kafka assignment") : CDC_OK;
    }
    return assign_partitions(c, tps, n, false, e);
}

cdc_err_t cdc_kafka_consumer_add(cdc_kafka_consumer_t *c, const cdc_kafka_tp_t *tps, size_t n,
                                 cdc_error_t *e)
{
    return n == 0 ? CDC_OK : assign_partitions(c, tps, n, true, e);
}

cdc_err_t cdc_kafka_consumer_seek(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                                  int64_t offset, int timeout_ms, cdc_error_t *e)
{
    rd_kafka_topic_partition_list_t *l = one_tp(topic, partition, offset);
    rd_kafka_error_t *error = rd_kafka_seek_partitions(c->rk, l, timeout_ms);
    rd_kafka_resp_err_t perr = l->elems[0].err;
    cdc_err_t rc = CDC_OK;

    if (error)
        rc = kerror(e, error, "could not seek");
    else if (perr)
        rc = cdc_kafka__kerr(e, perr, "could not seek topic \"%s\" partition %d to offset %lld",
                             topic, (int)partition, (long long)offset);
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

cdc_err_t cdc_kafka_consumer_restart(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                                     int64_t offset, cdc_error_t *e)
{
    rd_kafka_topic_partition_list_t *l = one_tp(topic, partition, offset);
    rd_kafka_error_t *error = rd_kafka_incremental_unassign(c->rk, l);
    cdc_err_t rc = CDC_OK;

    if (error == NULL)
        error = rd_kafka_incremental_assign(c->rk, l);
    if (error != NULL)
        rc = kerror(e, error, "could not assign the partition again");
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

static cdc_err_t pause_resume(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                              bool pause, cdc_error_t *e)
{
    rd_kafka_topic_partition_list_t *l = one_tp(topic, partition, RD_KAFKA_OFFSET_INVALID);
    rd_kafka_resp_err_t err =
        pause ? rd_kafka_pause_partitions(c->rk, l) : rd_kafka_resume_partitions(c->rk, l);
    cdc_err_t rc = CDC_OK;

    if (!err)
        err = l->elems[0].err;
    if (err)
        rc = cdc_kafka__kerr(e, err, "could not %s topic \"%s\" partition %d",
                             pause ? "pause" : "resume", topic, (int)partition);
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

cdc_err_t cdc_kafka_consumer_pause(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                                   cdc_error_t *e)
{
    return pause_resume(c, topic, partition, true, e);
}

cdc_err_t cdc_kafka_consumer_resume(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                                    cdc_error_t *e)
{
    return pause_resume(c, topic, partition, false, e);
}

cdc_err_t cdc_kafka_consume_batch(cdc_kafka_consumer_t *c, cdc_kafka_msg_t *msgs, size_t max,
                                  size_t *n, int timeout_ms, cdc_error_t *e)
{
    rd_kafka_message_t *raw[256];
    int64_t deadline = cdc_clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    cdc_err_t rc = CDC_OK;

    *n = 0;
    while (*n < max && rc == CDC_OK) {
        size_t want = max - *n < 256 ? max - *n : 256;
        int wait = 0;
        ssize_t got;

        if (*n == 0) {
            int64_t left = deadline - cdc_clock_mono_ms();
            wait = left > 0 ? (int)left : 0;
        }
        got = rd_kafka_consume_batch_queue(c->queue, wait, raw, want);
        if (got < 0)
            return cdc_kafka__kerr(e, rd_kafka_last_error(), "could not consume from Kafka");
        if (got == 0) {
            if (*n > 0 || cdc_clock_mono_ms() >= deadline)
                break;
            continue;
        }
        for (ssize_t i = 0; i < got; i++) {
            rd_kafka_message_t *m = raw[i];
            bool retriable;
            if (m->err) {
                translate(m->err, &retriable);
                if (!retriable && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && m->rkt)
                    note_failed(c, rd_kafka_topic_name(m->rkt), m->partition);
                if (rc == CDC_OK && !retriable && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                    if (m->rkt)
                        rc = cdc_kafka__kerr(e, m->err,
                                             "could not consume topic \"%s\" partition %d",
                                             rd_kafka_topic_name(m->rkt), (int)m->partition);
                    else
                        rc = cdc_kafka__kerr(e, m->err, "could not consume: %s",
                                             rd_kafka_message_errstr(m));
                } else if (retriable) {
                    cdc_log_debug("kafka consumer: %s", rd_kafka_message_errstr(m));
                }
                rd_kafka_message_destroy(m);
                continue;
            }
            if (rc != CDC_OK) {
                /* Keep what came before the error; later messages are refetched by the
                 * caller after it handled the error (it seeks anyway). */
                rd_kafka_message_destroy(m);
                continue;
            }
            cdc_kafka_msg_t *out = &msgs[(*n)++];
            out->topic = rd_kafka_topic_name(m->rkt);
            out->partition = m->partition;
            out->offset = m->offset;
            out->key = m->key;
            out->key_len = m->key ? m->key_len : 0;
            out->value = m->payload;
            out->value_len = m->payload ? m->len : 0;
            out->timestamp_ms = rd_kafka_message_timestamp(m, NULL);
            out->impl = m;
        }
    }
    return rc;
}

void cdc_kafka_msgs_release(cdc_kafka_msg_t *msgs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].impl)
            rd_kafka_message_destroy(msgs[i].impl);
        msgs[i].impl = NULL;
    }
}

static rd_kafka_headers_t *msg_headers(const cdc_kafka_msg_t *m)
{
    rd_kafka_headers_t *h = NULL;
    if (m->impl == NULL || rd_kafka_message_headers(m->impl, &h) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return NULL;
    return h;
}

size_t cdc_kafka_msg_header_count(const cdc_kafka_msg_t *m)
{
    rd_kafka_headers_t *h = msg_headers(m);
    return h ? rd_kafka_header_cnt(h) : 0;
}

bool cdc_kafka_msg_header_at(const cdc_kafka_msg_t *m, size_t idx, cdc_kafka_header_t *out)
{
    rd_kafka_headers_t *h = msg_headers(m);
    const char *name;
    const void *val;
    size_t len;

    if (h == NULL || rd_kafka_header_get_all(h, idx, &name, &val, &len))
        return false;
    out->name = name;
    out->value = val;
    out->value_len = val ? len : 0;
    return true;
}

bool cdc_kafka_msg_header(const cdc_kafka_msg_t *m, const char *name, cdc_kafka_header_t *out)
{
    rd_kafka_headers_t *h = msg_headers(m);
    const void *val;
    size_t len;

    if (h == NULL || rd_kafka_header_get_last(h, name, &val, &len))
        return false;
    out->name = name;
    out->value = val;
    out->value_len = val ? len : 0;
    return true;
}

cdc_err_t cdc_kafka_consumer_watermarks(cdc_kafka_consumer_t *c, const char *topic,
                                        int32_t partition, int64_t *low, int64_t *high,
                                        int timeout_ms, cdc_error_t *e)
{
    /* timeout 0: the values cached from the last fetch response, without a request */
    rd_kafka_resp_err_t err =
        timeout_ms == 0
            ? rd_kafka_get_watermark_offsets(c->rk, topic, partition, low, high)
            : rd_kafka_query_watermark_offsets(c->rk, topic, partition, low, high, timeout_ms);
    if (err)
        return cdc_kafka__kerr(e, err, "could not read watermarks of topic \"%s\" partition %d",
                               topic, (int)partition);
    return CDC_OK;
}

cdc_err_t cdc_kafka_consumer_end_offsets(cdc_kafka_consumer_t *c, const char *topic, int32_t n,
                                         int64_t *high, int timeout_ms, cdc_error_t *e)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n > 0 ? n : 1);
    rd_kafka_resp_err_t err;
    cdc_err_t rc = CDC_OK;

    /* a ListOffsets for "latest" (timestamp -1) answers each partition's high watermark */
    for (int32_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, topic, i)->offset = RD_KAFKA_OFFSET_END;
    err = rd_kafka_offsets_for_times(c->rk, l, timeout_ms);
    for (int i = 0; !err && i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &l->elems[i];
        if (tp->err)
            err = tp->err;
        else if (tp->partition >= 0 && tp->partition < n)
            high[tp->partition] = tp->offset;
    }
    if (err)
        rc = cdc_kafka__kerr(e, err, "could not read the end offsets of topic \"%s\"", topic);
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

cdc_err_t cdc_kafka_consumer_partitions(cdc_kafka_consumer_t *c, const char *topic, int32_t *count,
                                        int timeout_ms, cdc_error_t *e)
{
    return cdc_kafka__partitions_of(c->rk, topic, false, count, timeout_ms, e);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

cdc_err_t cdc_kafka_consumer_topics(cdc_kafka_consumer_t *c, const char *suffix, char ***names,
                                    size_t *n, int timeout_ms, cdc_error_t *e)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(c->rk, 1, NULL, &md, timeout_ms);
    size_t sl = strlen(suffix), cnt = 0;
    char **l;

    *names = NULL;
    *n = 0;
    if (err)
        return cdc_kafka__kerr(e, err, "could not read the cluster's topics");
    l = calloc((size_t)md->topic_cnt + 1, sizeof(*l));
    for (int i = 0; l != NULL && i < md->topic_cnt; i++) {
        const char *t = md->topics[i].topic;
        size_t tl = strlen(t);
        if (md->topics[i].err || tl < sl || strcmp(t + tl - sl, suffix) != 0)
            continue;
        if ((l[cnt] = strdup(t)) == NULL) {
            cdc_kafka_topics_free(l, cnt);
            l = NULL;
            break;
        }
        cnt++;
    }
    rd_kafka_metadata_destroy(md);
    if (l == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    qsort(l, cnt, sizeof(*l), cmp_name);
    *names = l;
    *n = cnt;
    return CDC_OK;
}

void cdc_kafka_topics_free(char **names, size_t n)
{
    for (size_t i = 0; names != NULL && i < n; i++)
        free(names[i]);
    free(names);
}
