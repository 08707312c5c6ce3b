/*
 * The capture's output (docs/capture.md): the Kafka producer with its backpressure and
 * delivery reports, events chunked past --chunk-bytes, snapshot and watermark markers,
 * and the standby status updates that confirm to PostgreSQL what Kafka acknowledged
 * (txtrack.c). Owns the producer, the event buffers (cap->key, cap->value) and the
 * confirmed position; the session thread alone calls it. Calls nothing else in capture/
 * but the table map (tablemap.c): the stream, the snapshots and the probes all produce
 * through it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "capture/stream_int.h"
#include "common/clock.h"
#include "common/evchunk.h"
#include "common/log.h"

#define QUEUE_FULL_WAIT_MS 200
/* The event buffer keeps its room between events up to this; a larger one is freed after
 * its event, so one large row does not hold its memory for the capture's life. */
#define CDC_CAPTURE_VALUE_KEEP ((size_t)8 << 20)

/* --chunk-bytes; a config built without it (tests) gets the option's default. */
static size_t chunk_bytes(const cdc_capture_t *cap)
{
    return cap->cfg->chunk_bytes > 0 ? (size_t)cap->cfg->chunk_bytes : CDC_EVCHUNK_BYTES;
}

static void on_delivery(void *opaque, cdc_err_t err, const cdc_error_t *detail, int32_t partition,
                        int64_t offset, void *cb_arg)
{
    cdc_capture_t *cap = cb_arg;
    (void)partition;
    (void)offset;
    if (opaque == CDC_CAPTURE_SCHEMA_OPAQUE) {
        cap->schema_ack_pending = false;
        cap->schema_ack_err = err;
    } else if (opaque == CDC_CAPTURE_MARKER_OPAQUE) {
        /* a chunk's marker, recorded (lost, the snapshot resumes from an earlier one) */
        if (err == CDC_OK)
            cdc_metrics_counter_inc(cap->m_snapshot_chunks);
    } else {
        cdc_txtrack_acked(&cap->track, (uint64_t)(uintptr_t)opaque, err == CDC_OK);
    }
    if (err != CDC_OK && err != CDC_ERR_CLOSED) {
        cdc_metrics_counter_inc(cap->m_delivery_errors);
        cdc_log_error("kafka delivery failed: %s", detail ? detail->msg : cdc_err_str(err));
    }
}

cdc_err_t cdc_capture_producer_open(cdc_capture_t *cap, cdc_error_t *e)
{
    cdc_kafka_producer_config_t pc = {
        .bootstrap = cap->cfg->kafka.bootstrap,
        .client_id = "cdc-capture",
        .compression = cap->cfg->kafka_compression,
        .linger_ms = (int)cap->cfg->kafka_linger_ms,
        .queue_max_messages = cap->cfg->max_inflight,
        .queue_max_kbytes = cap->cfg->max_inflight_bytes / 1024,
        /* the client's own limit lets a chunk with its key and header through (a larger
         * --chunk-bytes needs the brokers' message.max.bytes raised too) */
        .message_max_bytes =
            chunk_bytes(cap) + (64 << 10) > 1000000 ? (int64_t)chunk_bytes(cap) + (64 << 10) : 0,
        .delivery_timeout_ms = 0,
        .queue_full_timeout_ms = QUEUE_FULL_WAIT_MS,
        .properties = cap->cfg->kafka.properties,
        .on_delivery = on_delivery,
        .cb_arg = cap,
    };
    return cdc_kafka_producer_new(&pc, &cap->producer, e);
}

/* Sends a status update with what Kafka has acked so far. */
cdc_err_t cdc_capture_send_status(cdc_capture_t *cap, cdc_error_t *e)
{
    uint64_t c = cdc_txtrack_confirmable(&cap->track);
    cdc_err_t rc;
    if (c > cap->confirmed)
        cap->confirmed = c;
    rc = cdc_source_feedback(&cap->src, cap->confirmed, e);
    cap->last_status_ms = cdc_clock_mono_coarse_ms();
    cdc_metrics_gauge_set(cap->m_confirmed_lsn, (double)cap->confirmed);
    if (cap->src.server_wal_end > cap->confirmed)
        cdc_metrics_gauge_set(cap->m_lag_bytes, (double)(cap->src.server_wal_end - cap->confirmed));
    else
        cdc_metrics_gauge_set(cap->m_lag_bytes, 0);
    cdc_metrics_gauge_set(cap->m_inflight, (double)cap->track.inflight);
    return rc;
}

/* Hands one message to the producer, waiting (and confirming what Kafka acked) while its
 * queue is full: the queue drains by acks, so one event larger than --max-inflight-bytes
 * passes chunk by chunk and never waits for itself. */
static cdc_err_t produce_one(cdc_capture_t *cap, const cdc_kafka_record_t *rec, uint64_t tx,
                             cdc_error_t *e)
{
    cdc_err_t rc;
    for (;;) {
        rc = cdc_kafka_produce(cap->producer, rec, e);
        if (rc != CDC_ERR_TIMEOUT)
            break;
        /* producer queue full: backpressure. Keep the walsender happy meanwhile; the loop
         * is waiting for Kafka, not wedged. */
        cdc_health_beat(&cap->health);
        if (*cap->stop)
            return cdc_error_set(e, CDC_ERR_CLOSED, "stopping while the producer queue is full");
        if (cap->src.repl && cdc_capture_send_status(cap, e) != CDC_OK)
            return e->code;
        if (cap->track.failed)
            return cdc_error_set(e, CDC_ERR_KAFKA, "a Kafka delivery failed");
    }
    if (rc == CDC_OK)
        cdc_txtrack_add(&cap->track, tx);
    else if (strstr(e->msg, "MSG_SIZE_TOO_LARGE") != NULL)
        cdc_error_prefix(e,
                         "a message of %zu bytes (--chunk-bytes %" PRId64
                         " plus key and header; raise the Kafka client's message.max.bytes "
                         "with --kafka-properties, or lower --chunk-bytes)",
                         rec->value_len, (int64_t)chunk_bytes(cap));
    return rc;
}

/* The event in value goes as chunks of --chunk-bytes to one partition, in order. */
static cdc_err_t produce_chunks(cdc_capture_t *cap, const cdc_capture_table_t *t,
                                const cdc_kafka_record_t *event, const cdc_buf_t *value,
                                uint64_t tx, uint64_t lsn, cdc_error_t *e)
{
    size_t chunk = chunk_bytes(cap);
    char hv[CDC_EVCHUNK_HEADER_MAX] = "";
    cdc_kafka_header_t h = {CDC_EVCHUNK_HEADER, hv, 0};
    cdc_kafka_record_t r = *event, *rec = &r;
    cdc_evchunk_t c = {.id = cap->chunk_seq++,
                       .count = cdc_evchunk_count(value->len, chunk),
                       .total = value->len,
                       .lsn = lsn};
    cdc_err_t rc;

    /* every chunk with the event's key: the key's partition, in produce order */
    rec->headers = &h;
    rec->header_count = 1;
    for (c.index = 0; c.index < c.count; c.index++) {
        size_t off = (size_t)c.index * chunk;
        rec->value = value->data + off;
        rec->value_len = value->len - off < chunk ? value->len - off : chunk;
        h.value_len = cdc_evchunk_format(&c, hv, sizeof(hv));
        if ((rc = produce_one(cap, rec, tx, e)) != CDC_OK) {
            if (c.index > 0) /* the slot is not confirmed past it: it comes again whole */
                cdc_log_warn("event of %s at LSN %" PRIu64 " (%zu bytes) cut after chunk %" PRIu32
                             " of %" PRIu32 ": %s",
                             t->topic, lsn, value->len, c.index, c.count, e->msg);
            return rc;
        }
        cdc_metrics_counter_inc(cap->m_chunks);
    }
    cdc_metrics_counter_inc(cap->m_chunked);
    return CDC_OK;
}

cdc_err_t cdc_capture_produce(cdc_capture_t *cap, cdc_capture_table_t *t, int32_t partition,
                              const cdc_buf_t *key, const cdc_buf_t *value, int64_t ts_ms,
                              uint64_t tx, uint64_t lsn, cdc_error_t *e)
{
    /* No headers: the schema version is the envelope's source.schema_version. librdkafka
     * allocates a header list per message on both ends (list, array and one block per
     * header), which was the largest per-event cost of the producer path and about 9 % of
     * the worker's record path. */
    cdc_kafka_record_t rec = {.topic = t->topic,
                              .partition = partition,
                              .key = key ? key->data : NULL,
                              .key_len = key ? key->len : 0,
                              .value = value->data,
                              .value_len = value->len,
                              .timestamp_ms = ts_ms,
                              .opaque = (void *)(uintptr_t)tx};
    cdc_err_t rc;

    if (value->oom || (key && key->oom))
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory encoding an event of %s", t->topic);
    if (value->len > chunk_bytes(cap))
        rc = produce_chunks(cap, t, &rec, value, tx, lsn, e);
    else
        rc = produce_one(cap, &rec, tx, e);
    if (value->len > cap->largest_event)
        cap->largest_event = value->len;
    if (value == &cap->value && value->len > CDC_CAPTURE_VALUE_KEEP)
        cdc_buf_free(&cap->value); /* a large event's buffer is not kept for the next one */
    if (rc != CDC_OK)
        return rc;
    cdc_metrics_counter_inc(t->m_events);
    cdc_metrics_counter_add(t->m_bytes, (double)(value->len + (key ? key->len : 0)));
    return CDC_OK;
}

cdc_err_t cdc_capture_keepalive(cdc_capture_t *cap, cdc_error_t *e)
{
    return cap->src.repl ? cdc_capture_send_status(cap, e) : CDC_OK;
}

cdc_err_t cdc_capture_emit_marker(cdc_capture_t *cap, cdc_capture_table_t *t, char op, uint64_t lsn,
                                  const char *snapshot, cdc_error_t *e)
{
    cdc_event_t ev = {.op = op,
                      .schema = &t->doc,
                      .lsn = lsn,
                      .commit_lsn = cdc_capture_tx(cap)->commit_lsn,
                      .xid = cdc_capture_tx(cap)->xid,
                      .source_ts_ms = cdc_capture_tx(cap)->commit_ts_ms,
                      .snapshot = snapshot,
                      .db = cap->src.db,
                      .name = cap->cfg->topic_prefix};
    cdc_err_t rc;

    ev.ts_ms = cdc_clock_wall_ms();
    cdc_buf_reset(&cap->value);
    cdc_event_encode_value(&cap->value, &ev);
    /* every partition sees the marker in order with its rows */
    for (int32_t p = 0; p < t->partitions; p++)
        if ((rc = cdc_capture_produce(cap, t, p, NULL, &cap->value, ev.ts_ms,
                                      cdc_capture_tx(cap)->id, lsn, e)) != CDC_OK)
            return rc;
    return CDC_OK;
}

void cdc_capture_event_init(cdc_event_t *ev, const cdc_capture_t *cap, const cdc_capture_table_t *t,
                            char op)
{
    *ev = (cdc_event_t){.op = op,
                        .schema = &t->doc,
                        .db = cap->src.db,
                        .name = cap->cfg->topic_prefix,
                        .source_head = t->source_head.data,
                        .source_head_len = t->source_head.len,
                        .col_names = (const char *const *)t->col_names,
                        .col_name_lens = t->col_name_lens};
}
