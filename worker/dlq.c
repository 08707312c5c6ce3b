/*
 * The worker's dead-letter producer (see dlq.h): a record goes to `<topic>.dlq` with the
 * headers of common/dlq.h, through the Kafka adapter's producer, and is durable there
 * before the record's offset moves past it.
 */
#include "worker/dlq.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/evchunk.h"
#include "common/log.h"
#include "worker/worker.h"

struct cdc_dlq_delivery {
    uint32_t acked; /* delivery reports (one per chunk) */
    cdc_err_t err;  /* the first failure */
    cdc_error_t detail;
};
typedef struct cdc_dlq_delivery delivery_t;

void cdc_worker_dlq_delivery(void *opaque, cdc_err_t err, const cdc_error_t *detail,
                             int32_t partition, int64_t offset, void *cb_arg)
{
    delivery_t *d = opaque;
    (void)partition;
    (void)offset;
    (void)cb_arg;
    if (d == NULL)
        return;
    d->acked++;
    if (d->err != CDC_OK)
        return;
    d->err = err;
    if (detail != NULL)
        d->detail = *detail;
}

static void ensure_dlq_topic(cdc_worker_t *w, const char *topic)
{
    cdc_kafka_topic_spec_t spec = {topic, CDC_WORKER_PARTITIONS, -1, false};
    cdc_error_t e;
    char *name;
    if (cdc_strmap_get(&w->dlq_ensured, topic) != NULL)
        return;
    if (cdc_kafka_ensure_topic(w->cfg.kafka.bootstrap, w->cfg.kafka.properties, &spec, 5000, &e) !=
            CDC_OK &&
        e.code != CDC_ERR_CONFLICT) {
        cdc_log_warn("could not create dead-letter topic \"%s\": %s", topic, e.msg);
        return;
    }
    /* (out of memory: it is made sure of again next time, which is harmless) */
    if ((name = strdup(topic)) != NULL && cdc_strmap_put(&w->dlq_ensured, name, name) != CDC_OK)
        free(name);
}

void cdc_worker_dlq_close(cdc_worker_t *w)
{
    for (size_t i = 0; i < w->dlq_ensured.cap; i++)
        free(w->dlq_ensured.slots[i].value); /* the key itself */
    cdc_strmap_free(&w->dlq_ensured);
}

/*
 * Produces the dead letter (value[0..len) with headers kh[0..nh)) and waits for its acks.
 * A value above CDC_EVCHUNK_BYTES goes as chunks of it with a cdc.chunk header, so that a
 * chunked event that fails whole is kept whole (docs/worker.md, "Large rows"); kh has room
 * for that header at kh[nh].
 */
static cdc_err_t produce_dead_letter(cdc_worker_t *w, const char *topic, const void *key,
                                     size_t key_len, const char *value, size_t len,
                                     cdc_kafka_header_t *kh, size_t nh, delivery_t *d,
                                     uint32_t count, cdc_error_t *e)
{
    char hv[CDC_EVCHUNK_HEADER_MAX] = "";
    cdc_evchunk_t c = {.id = ((uint64_t)cdc_clock_wall_ms() << 16) ^ (uint64_t)(uintptr_t)d,
                       .count = count,
                       .total = len};
    cdc_err_t rc = CDC_OK;
    uint32_t queued = 0;
    for (c.index = 0; c.index < count && rc == CDC_OK; c.index++) {
        size_t off = (size_t)c.index * CDC_EVCHUNK_BYTES;
        size_t n = count == 1 ? len : len - off < CDC_EVCHUNK_BYTES ? len - off : CDC_EVCHUNK_BYTES;
        if (count > 1)
            kh[nh] = (cdc_kafka_header_t){CDC_EVCHUNK_HEADER, hv,
                                          cdc_evchunk_format(&c, hv, sizeof(hv))};
        cdc_kafka_record_t rec = {
            topic, CDC_KAFKA_PARTITION_ANY, key, key_len, value != NULL ? value + off : NULL, n,
            kh,    nh + (count > 1),        0,   d};
        if ((rc = cdc_kafka_produce(w->dlq, &rec, e)) == CDC_OK)
            queued++;
    }
    if (rc != CDC_OK && queued > 0) { /* the chunks queued before the failure: served */
        cdc_error_t e2;
        cdc_kafka_producer_flush(w->dlq, 10000, &e2);
    }
    if (rc == CDC_OK) {
        rc = cdc_kafka_producer_flush(w->dlq, 10000 + (int)(count / 10) * 1000, e);
        if (rc == CDC_OK && d->acked < count)
            rc = cdc_error_set(e, CDC_ERR_TIMEOUT, "no delivery report");
        if (rc == CDC_OK && d->err != CDC_OK) {
            *e = d->detail;
            rc = d->err;
        }
    }
    return rc;
}

cdc_err_t cdc_worker_dlq_send(cdc_worker_t *w, const cdc_kafka_msg_t *m, cdc_dlq_class_t cls,
                              const char *message, cdc_error_t *e)
{
    char topic[300];
    cdc_dlq_headers_t h;
    cdc_kafka_header_t kh[CDC_DLQ_NHEADERS + 1];
    cdc_kafka_header_t rh;
    int delay_ms = 100;
    /* a replayed record that fails again keeps its replay count (common/dlq.h) */
    int64_t replays =
        cdc_kafka_msg_header(m, CDC_DLQ_H_REPLAY_COUNT, &rh) ? cdc_dlq_replay_count(&rh) : 0;
    char *mkey = NULL, *mvalue = NULL; /* masked by the column masking policy */
    size_t mkey_len = 0, mvalue_len = 0;

    if (w->mask != NULL &&
        cdc_mask_record(w->mask, m->topic, m->key, m->key_len, m->value, m->value_len, &mkey,
                        &mkey_len, &mvalue, &mvalue_len) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory masking a dead letter");
    cdc_dlq_topic(m->topic, topic, sizeof(topic));
    ensure_dlq_topic(w, topic);
    cdc_dlq_headers(&h, cls, message, m->topic, m->partition, m->offset, cdc_clock_wall_ms(),
                    replays);
    for (int i = 0; i < CDC_DLQ_NHEADERS; i++)
        kh[i] = (cdc_kafka_header_t){h.name[i], h.value[i], strlen(h.value[i])};
    /* a chunk of an oversized event keeps its place in its sequence; an event put back
     * together (it carries its last chunk's headers) is chunked anew below */
    size_t nh = CDC_DLQ_NHEADERS;
    cdc_evchunk_t ch;
    if (cdc_kafka_msg_header(m, CDC_EVCHUNK_HEADER, &rh) &&
        !(cdc_evchunk_parse(rh.value, rh.value_len, &ch) && ch.count > 1 &&
          ch.total == (uint64_t)m->value_len))
        kh[nh++] = rh;
    const char *value = mvalue != NULL ? mvalue : m->value;
    size_t value_len = mvalue != NULL ? mvalue_len : m->value_len;
    uint32_t count = nh > CDC_DLQ_NHEADERS ? 1 : cdc_evchunk_count(value_len, CDC_EVCHUNK_BYTES);
    cdc_log_warn("record %s[%d]@%" PRId64 " sent to dead-letter topic \"%s\": %s: %s", m->topic,
                 m->partition, m->offset, topic, cdc_dlq_class_name(cls), message);
    /* A dead letter must be durable before the record's offset moves past it: retry
     * transient failures with bounded backoff, forever unless the worker stops. */
    for (;;) {
        /* on the heap: a report may still come after a failed or timed-out attempt, and
         * is then left a live target (a few bytes kept) */
        delivery_t *d = calloc(1, sizeof(*d));
        if (d == NULL) {
            free(mkey);
            free(mvalue);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        cdc_err_t rc = produce_dead_letter(w, topic, mkey != NULL ? mkey : m->key,
                                           mkey != NULL ? mkey_len : m->key_len, value, value_len,
                                           kh, nh, d, count, e);
        if (rc == CDC_OK || d->acked == count || cdc_kafka_producer_outstanding(w->dlq) == 0)
            free(d);
        if (rc == CDC_OK || (w->stop != NULL && *w->stop)) {
            free(mkey);
            free(mvalue);
            return rc == CDC_OK ? CDC_OK : cdc_error_set(e, CDC_ERR_CLOSED, "worker stopping");
        }
        cdc_log_warn("could not write dead letter to \"%s\" (retrying in %d ms): %s", topic,
                     delay_ms, e->msg);
        usleep((useconds_t)delay_ms * 1000);
        delay_ms = delay_ms * 2 > 5000 ? 5000 : delay_ms * 2;
    }
}
