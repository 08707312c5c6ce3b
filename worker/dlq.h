/*
 * Dead-letter queue: records that can never be processed (bad JSON, no key, unknown
 * op, type mismatch, unknown schema version, oversized, unrepairable TOAST) go to
 * `<topic>.dlq` with headers naming the error class, the message, the origin
 * topic/partition/offset, the time and the replay count; they are counted per class and
 * the partition keeps going. Transient failures (broker down, storage errors) are
 * retried by the caller and never classified here. The record format (classes, header
 * names, topics) is common/dlq.h, which cdcctl reads back; the producer is in worker.h.
 */
#ifndef CDC_WORKER_DLQ_H
#define CDC_WORKER_DLQ_H

#include "common/dlq.h"

#endif
