/*
 * Dead-letter queue: records that can never be processed (bad JSON, no key, unknown
 * op, type mismatch, unknown schema version, oversized, unrepairable TOAST) go to
 * `<topic>.dlq` with headers naming the error class, the message, the origin
 * topic/partition/offset and the time; they are counted per class and the partition
 * keeps going. Transient failures (broker down, storage errors) are retried by the
 * caller and never classified here.
 */
#ifndef CDC_WORKER_DLQ_H
#define CDC_WORKER_DLQ_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum cdc_dlq_class {
    CDC_DLQ_MALFORMED_JSON = 0,
    CDC_DLQ_MISSING_KEY,
    CDC_DLQ_UNKNOWN_OP,
    CDC_DLQ_TYPE_MISMATCH,
    CDC_DLQ_UNKNOWN_SCHEMA,
    CDC_DLQ_OVERSIZED,
    CDC_DLQ_UNRESOLVED_TOAST,
    CDC_DLQ__COUNT
} cdc_dlq_class_t;

/* Stable lower-case name of a class, used in the `cdc.error.class` header and metrics. */
const char *cdc_dlq_class_name(cdc_dlq_class_t cls);

/* DLQ topic name for a source topic ("<topic>.dlq") into buf. */
void cdc_dlq_topic(const char *topic, char *buf, size_t size);

/* The headers attached to a dead letter, as name/value strings. */
#define CDC_DLQ_NHEADERS 6
typedef struct cdc_dlq_headers {
    const char *name[CDC_DLQ_NHEADERS];
    char value[CDC_DLQ_NHEADERS][300];
} cdc_dlq_headers_t;

/* Fills h: cdc.error.class, cdc.error.message, cdc.origin.topic, cdc.origin.partition,
 * cdc.origin.offset, cdc.error.time (RFC 3339 UTC, milliseconds). */
void cdc_dlq_headers(cdc_dlq_headers_t *h, cdc_dlq_class_t cls, const char *message,
                     const char *topic, int32_t partition, int64_t offset, int64_t now_ms);

#endif
