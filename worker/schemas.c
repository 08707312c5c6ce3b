/*
 * The schema registry topic (docs/worker.md): the worker reads it to its end before it
 * decodes, and again when an event names a version it does not know, and registers each
 * schema document in its catalog. Owns the schema consumer's read position
 * (w->schemapos.parts, w->schemapos.next); the record thread alone calls it. Calls nothing else
 * in worker/ (a leaf below consume.c, session.c and tables.c).
 */
#include <inttypes.h>

#include "common/cdcschema.h"
#include "common/clock.h"
#include "common/log.h"
#include "worker/worker.h"

#define SCHEMA_READ_TIMEOUT_MS 10000

/* Schema-topic partitions whose fetching stopped on an error (as for the data topics,
 * cdc_worker_restart_failed() in watchdog.c) are assigned again from the next offset to
 * read, all of them. */
static void restart_failed_schemas(cdc_worker_t *w)
{
    char topics[16][256];
    int32_t parts[16];
    size_t n;
    while ((n = cdc_kafka_consumer_failed(w->schema_consumer, topics, parts, 16)) > 0)
        for (size_t i = 0; i < n; i++) {
            cdc_error_t e2;
            int32_t p = parts[i];
            if (p < 0 || p >= w->schemapos.parts)
                continue;
            if (cdc_kafka_consumer_restart(w->schema_consumer, w->schema_topic, p,
                                           w->schemapos.next[p], &e2) != CDC_OK) {
                cdc_log_warn("schema topic \"%s\" partition %d: could not assign it again: %s",
                             w->schema_topic, p, e2.msg);
                continue;
            }
            cdc_metrics_counter_inc(w->m_fetch_restarts);
            cdc_log_warn("schema topic \"%s\" partition %d: fetching had stopped on an error; "
                         "assigned again from offset %" PRId64,
                         w->schema_topic, p, w->schemapos.next[p]);
        }
}

/*
 * Reads the schema topic up to its end as of now: the high watermark of each partition,
 * asked from the broker, not "until a poll comes back empty", which says nothing while
 * the first fetch is still on its way. An event whose version is unknown after this
 * names a version that was never registered (the capture registers before producing).
 */
cdc_err_t cdc_worker_schemas_poll(cdc_worker_t *w, cdc_error_t *e)
{
    cdc_kafka_msg_t msgs[256];
    int64_t high[CDC_WORKER_SCHEMA_PARTITIONS];
    int64_t deadline = cdc_clock_mono_ms() + SCHEMA_READ_TIMEOUT_MS;
    size_t n;
    cdc_err_t rc;

    if (w->schemapos.parts == 0) {
        int32_t parts = 0;
        rc = cdc_kafka_consumer_partitions(w->schema_consumer, w->schema_topic, &parts, 2000, e);
        if (rc == CDC_ERR_NOT_FOUND || (rc == CDC_OK && parts <= 0))
            return CDC_OK; /* nothing registered yet */
        if (rc != CDC_OK)
            return rc;
        if (parts > CDC_WORKER_SCHEMA_PARTITIONS)
            parts = CDC_WORKER_SCHEMA_PARTITIONS;
        cdc_kafka_tp_t tps[CDC_WORKER_SCHEMA_PARTITIONS];
        for (int32_t i = 0; i < parts; i++) {
            tps[i] = (cdc_kafka_tp_t){w->schema_topic, i, CDC_KAFKA_OFFSET_BEGINNING};
            w->schemapos.next[i] = 0;
        }
        if ((rc = cdc_kafka_consumer_assign(w->schema_consumer, tps, (size_t)parts, e)) != CDC_OK)
            return rc;
        w->schemapos.parts = parts;
    }
    rc = cdc_kafka_consumer_end_offsets(w->schema_consumer, w->schema_topic, w->schemapos.parts,
                                        high, 2000, e);
    if (rc != CDC_OK)
        return rc;
    for (;;) {
        bool done = true;
        restart_failed_schemas(w);
        for (int32_t i = 0; i < w->schemapos.parts; i++)
            done = done && w->schemapos.next[i] >= high[i];
        if (done)
            return CDC_OK;
        int64_t left = deadline - cdc_clock_mono_ms();
        if (left <= 0)
            return cdc_error_set_retriable(e, CDC_ERR_TIMEOUT, true,
                                           "schema topic \"%s\" not read to its end within %d ms",
                                           w->schema_topic, SCHEMA_READ_TIMEOUT_MS);
        rc = cdc_kafka_consume_batch(w->schema_consumer, msgs, 256, &n,
                                     left < 100 ? (int)left : 100, e);
        for (size_t i = 0; i < n; i++) {
            char topic[256];
            int64_t version;
            cdc_error_t e2;
            if (msgs[i].partition >= 0 && msgs[i].partition < w->schemapos.parts &&
                msgs[i].offset + 1 > w->schemapos.next[msgs[i].partition])
                w->schemapos.next[msgs[i].partition] = msgs[i].offset + 1;
            if (msgs[i].value == NULL || msgs[i].key == NULL ||
                !cdc_schema_record_key_parse(msgs[i].key, msgs[i].key_len, topic, sizeof(topic),
                                             &version))
                continue;
            if (cdc_catalog_register_json(w->catalog, topic, version, msgs[i].value,
                                          msgs[i].value_len, &e2) != CDC_OK)
                cdc_log_warn("ignoring schema document \"%s/%" PRId64 "\": %s", topic, version,
                             e2.msg);
            else
                cdc_log_debug("registered schema \"%s\" version %" PRId64, topic, version);
        }
        cdc_kafka_msgs_release(msgs, n);
        if (rc != CDC_OK && rc != CDC_ERR_TIMEOUT)
            return rc;
    }
}
