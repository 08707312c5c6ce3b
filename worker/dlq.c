/*
 * Dead-letter classification and headers (see dlq.h). Sending goes through the
 * Kafka adapter's producer; this file only decides what a dead letter looks like, so
 * the format is unit-tested without a broker.
 */
#include "worker/dlq.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const class_names[CDC_DLQ__COUNT] = {
    [CDC_DLQ_MALFORMED_JSON] = "malformed_json",
    [CDC_DLQ_MISSING_KEY] = "missing_key",
    [CDC_DLQ_UNKNOWN_OP] = "unknown_op",
    [CDC_DLQ_TYPE_MISMATCH] = "type_mismatch",
    [CDC_DLQ_UNKNOWN_SCHEMA] = "unknown_schema",
    [CDC_DLQ_OVERSIZED] = "oversized",
    [CDC_DLQ_UNRESOLVED_TOAST] = "unresolved_toast",
};

const char *cdc_dlq_class_name(cdc_dlq_class_t cls)
{
    if ((int)cls < 0 || cls >= CDC_DLQ__COUNT)
        return "unknown";
    return class_names[cls];
}

void cdc_dlq_topic(const char *topic, char *buf, size_t size)
{
    snprintf(buf, size, "%s.dlq", topic);
}

void cdc_dlq_headers(cdc_dlq_headers_t *h, cdc_dlq_class_t cls, const char *message,
                     const char *topic, int32_t partition, int64_t offset, int64_t now_ms)
{
    time_t secs = (time_t)(now_ms / 1000);
    struct tm tm;
    char ts[32];

    gmtime_r(&secs, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    memset(h, 0, sizeof(*h));
    h->name[0] = "cdc.error.class";
    snprintf(h->value[0], sizeof(h->value[0]), "%s", cdc_dlq_class_name(cls));
    h->name[1] = "cdc.error.message";
    snprintf(h->value[1], sizeof(h->value[1]), "%s", message ? message : "");
    h->name[2] = "cdc.origin.topic";
    snprintf(h->value[2], sizeof(h->value[2]), "%s", topic);
    h->name[3] = "cdc.origin.partition";
    snprintf(h->value[3], sizeof(h->value[3]), "%" PRId32, partition);
    h->name[4] = "cdc.origin.offset";
    snprintf(h->value[4], sizeof(h->value[4]), "%" PRId64, offset);
    h->name[5] = "cdc.error.time";
    snprintf(h->value[5], sizeof(h->value[5]), "%s.%03dZ", ts, (int)(now_ms % 1000));
}
