/*
 * The capture's table topics (docs/capture.md, "Topics"): each session makes the topics
 * of its captured tables before it streams, so that no change waits for a topic to be
 * created; a table whose topic could not be made tries again at its first schema in the
 * stream (cdc_capture_set_schema). Failures are logged, counted and shown in /status.
 * The Kafka side (CreateTopics, the development broker) is in common/kafka.c.
 */
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "common/log.h"

/* Notes a failure to create or find t's topic: log, metric, /status. */
static void topic_failed(cdc_capture_table_t *t, const cdc_error_t *e)
{
    cdc_metrics_counter_inc(t->m_topic_errors);
    cdc_log_warn("could not create topic %s of table %s.%s: %s (tried again at the table's "
                 "next change and by the next session)",
                 t->topic, t->schema, t->name, e->msg);
    free(t->topic_error);
    t->topic_error = strdup(e->msg);
}

cdc_err_t cdc_capture_topic_ensure(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    cdc_kafka_topic_spec_t spec = {.name = t->topic, .partitions = (int32_t)cap->cfg->partitions};
    cdc_err_t rc;
    int32_t n = 0;

    if (t->topic_ready)
        return CDC_OK;
    rc = cdc_kafka_ensure_topic(cap->cfg->kafka.bootstrap, cap->cfg->kafka.properties, &spec,
                                CDC_CAPTURE_ADMIN_TIMEOUT_MS, e);
    if (rc == CDC_ERR_CONFLICT) {
        /* an existing topic with another partition count: use it as it is */
        rc = cdc_kafka_topic_partitions(cap->cfg->kafka.bootstrap, cap->cfg->kafka.properties,
                                        t->topic, &n, CDC_CAPTURE_ADMIN_TIMEOUT_MS, e);
        if (rc == CDC_OK) {
            cdc_log_warn("topic %s has %d partitions, not %d; using it as it is", t->topic, (int)n,
                         (int)cap->cfg->partitions);
            t->partitions = n;
        }
    } else if (rc == CDC_OK) {
        t->partitions = (int32_t)cap->cfg->partitions;
    }
    if (rc != CDC_OK) {
        topic_failed(t, e);
        return rc;
    }
    free(t->topic_error);
    t->topic_error = NULL;
    t->topic_ready = true;
    return CDC_OK;
}

void cdc_capture_topics_ensure(cdc_capture_t *cap)
{
    for (size_t i = 0; i < cap->ntables && !*cap->stop; i++) {
        cdc_capture_table_t *t = &cap->tables[i];
        cdc_error_t e;
        cdc_err_t rc;
        if (!t->captured || t->failed)
            continue;
        /* a failure is noted and the table tries again; Kafka out of reach would fail
         * every table after a timeout each: the tables' own attempts come soon enough */
        rc = cdc_capture_topic_ensure(cap, t, &e);
        if (rc == CDC_ERR_UNAVAILABLE || rc == CDC_ERR_TIMEOUT)
            break;
    }
}
