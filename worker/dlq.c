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
#include "common/log.h"
#include "worker/worker.h"

struct cdc_dlq_delivery {
    bool done;
    cdc_err_t err;
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
    d->done = true;
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

cdc_err_t cdc_worker_dlq_send(cdc_worker_t *w, const cdc_kafka_msg_t *m, cdc_dlq_class_t cls,
                              const char *message, cdc_error_t *e)
{
    char topic[300];
    cdc_dlq_headers_t h;
    cdc_kafka_header_t kh[CDC_DLQ_NHEADERS];
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
    cdc_log_warn("record %s[%d]@%" PRId64 " sent to dead-letter topic \"%s\": %s: %s", m->topic,
                 m->partition, m->offset, topic, cdc_dlq_class_name(cls), message);
    /* A dead letter must be durable before the record's offset moves past it: retry
     * transient failures with bounded backoff, forever unless the worker stops. */
    for (;;) {
        delivery_t d = {0};
        cdc_kafka_record_t rec = {topic,
                                  CDC_KAFKA_PARTITION_ANY,
                                  mkey != NULL ? mkey : m->key,
                                  mkey != NULL ? mkey_len : m->key_len,
                                  mvalue != NULL ? mvalue : m->value,
                                  mvalue != NULL ? mvalue_len : m->value_len,
                                  kh,
                                  CDC_DLQ_NHEADERS,
                                  0,
                                  &d};
        cdc_err_t rc = cdc_kafka_produce(w->dlq, &rec, e);
        if (rc == CDC_OK) {
            rc = cdc_kafka_producer_flush(w->dlq, 10000, e);
            if (rc == CDC_OK && !d.done)
                rc = cdc_error_set(e, CDC_ERR_TIMEOUT, "no delivery report");
            if (rc == CDC_OK && d.err != CDC_OK) {
                *e = d.detail;
                rc = d.err;
            }
        }
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
