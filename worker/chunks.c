/*
 * Chunked events on the worker (see worker.h and common/evchunk.h; docs/worker.md,
 * "Large rows"): each topic partition of a slot puts its chunks back together before the
 * event is decoded, discards sequences left unfinished, dead-letters the chunks of an
 * event above --max-record-bytes without buffering it, and tells a cut where to resume
 * so that a sequence is never read in part after a recovery.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/evchunk.h"
#include "common/log.h"
#include "worker/worker.h"

static cdc_evasm_t *slot_asm(cdc_slot_t *s, int ti, bool create)
{
    if (s->chunks == NULL)
        return NULL;
    if (s->chunks[ti] == NULL && create && (s->chunks[ti] = malloc(sizeof(cdc_evasm_t))) != NULL)
        cdc_evasm_init(s->chunks[ti]);
    return s->chunks[ti];
}

/* The worker works on a large event of bytes now (heartbeats report it). */
static void touch_large(cdc_worker_t *w, uint64_t bytes)
{
    int64_t now = cdc_clock_mono_ms();
    if (bytes < atomic_load(&w->chunking.large_bytes) &&
        now - atomic_load(&w->chunking.large_ms) <=
            10000 + cdc_evchunk_grace_ms(atomic_load(&w->chunking.large_bytes)))
        bytes =
            atomic_load(&w->chunking.large_bytes); /* the larger one is still in its grace time */
    atomic_store(&w->chunking.large_bytes, bytes);
    atomic_store(&w->chunking.large_ms, now);
}

static void torn(cdc_worker_t *w, const cdc_kafka_msg_t *m, const char *why)
{
    w->chunking.torn++;
    cdc_metrics_counter_inc(w->m_torn);
    cdc_log_warn("partition %d topic \"%s\": an unfinished chunked event discarded at offset "
                 "%" PRId64 " (%s); its capture sends it again whole",
                 m->partition, m->topic, m->offset, why);
}

cdc_worker_chunk_result_t cdc_worker_chunk(cdc_worker_t *w, cdc_slot_t *s, int ti,
                                           const cdc_kafka_msg_t *m, cdc_kafka_msg_t *whole,
                                           cdc_error_t *e)
{
    cdc_kafka_header_t h;
    cdc_evchunk_t c;
    cdc_evasm_t *a;
    cdc_evasm_result_t res;
    bool last, was_torn;

    if (!cdc_kafka_msg_header(m, CDC_EVCHUNK_HEADER, &h)) {
        a = slot_asm(s, ti, false);
        if (a != NULL && cdc_evasm_interrupt(a))
            torn(w, m, "a record that is no chunk follows it");
        return CDC_WORKER_NOT_CHUNK;
    }
    if (!cdc_evchunk_parse(h.value, h.value_len, &c)) {
        /* not a header this worker can read: the record as it is, to the dead letters */
        if (cdc_worker_dlq_send(w, m, CDC_DLQ_MALFORMED_JSON, "unreadable cdc.chunk header", e) !=
            CDC_OK)
            return CDC_WORKER_CHUNK_FAILED;
        cdc_metrics_counter_inc(w->m_dlq[CDC_DLQ_MALFORMED_JSON]);
        s->next_offset[ti] = m->offset + 1;
        return CDC_WORKER_CHUNK_TAKEN;
    }
    if ((a = slot_asm(s, ti, true)) == NULL) {
        cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        return CDC_WORKER_CHUNK_FAILED;
    }
    if (cdc_evasm_add(a, &c, m->offset, m->value, m->value ? m->value_len : 0,
                      (size_t)w->cfg.max_record_bytes, &res, &last, &was_torn) != CDC_OK) {
        cdc_error_set(e, CDC_ERR_NOMEM,
                      "out of memory for a chunked event of %" PRIu64 " bytes (--max-record-bytes "
                      "%" PRId64 ")",
                      c.total, w->cfg.max_record_bytes);
        return CDC_WORKER_CHUNK_FAILED;
    }
    if (was_torn)
        torn(w, m,
             res == CDC_EVASM_REJECTED ? "a chunk that does not continue it follows"
                                       : "a new sequence starts");
    if (res == CDC_EVASM_MORE || res == CDC_EVASM_COMPLETE)
        touch_large(w, c.total);
    switch (res) {
    case CDC_EVASM_MORE:
        break;
    case CDC_EVASM_REJECTED:
        w->chunking.rejected++;
        cdc_metrics_counter_inc(w->m_chunks_rejected);
        cdc_log_warn("partition %d topic \"%s\": chunk %" PRIu32 " of %" PRIu32
                     " at offset %" PRId64 " continues no sequence read here: dropped",
                     m->partition, m->topic, c.index, c.count, m->offset);
        break;
    case CDC_EVASM_OVERSIZED: {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "event of %" PRIu64 " bytes at LSN %" PRIu64 " is larger than --max-record-bytes "
                 "(%" PRId64 "): chunk %" PRIu32 " of %" PRIu32,
                 c.total, c.lsn, w->cfg.max_record_bytes, c.index + 1, c.count);
        if (cdc_worker_dlq_send(w, m, CDC_DLQ_OVERSIZED, msg, e) != CDC_OK)
            return CDC_WORKER_CHUNK_FAILED;
        if (last) {
            w->chunking.oversized++;
            cdc_metrics_counter_inc(w->m_dlq[CDC_DLQ_OVERSIZED]);
        }
        break;
    }
    case CDC_EVASM_COMPLETE:
        *whole = *m; /* the last chunk's headers (a replay count) serve the event */
        whole->value = cdc_evasm_take(a, &whole->value_len, &whole->offset, &(int64_t){0});
        w->chunking.reassembled++;
        if (whole->value_len > w->chunking.largest)
            w->chunking.largest = whole->value_len;
        cdc_metrics_counter_inc(w->m_chunked);
        return CDC_WORKER_CHUNK_WHOLE;
    }
    s->next_offset[ti] = m->offset + 1;
    return CDC_WORKER_CHUNK_TAKEN;
}

uint64_t cdc_worker_large_event(cdc_worker_t *w, int64_t now_ms)
{
    uint64_t b = atomic_load(&w->chunking.large_bytes);
    return b > 0 && now_ms - atomic_load(&w->chunking.large_ms) <= 10000 + cdc_evchunk_grace_ms(b)
               ? b
               : 0;
}

void cdc_worker_chunk_done(cdc_worker_t *w, cdc_kafka_msg_t *whole)
{
    touch_large(w, whole->value_len); /* its grace time runs from here: stage, state, files */
    free((void *)(uintptr_t)whole->value);
    whole->value = NULL;
}

int64_t cdc_worker_chunk_resume(const cdc_slot_t *s, size_t ti, int64_t next)
{
    int64_t first =
        s->chunks != NULL && s->chunks[ti] != NULL ? cdc_evasm_resume_offset(s->chunks[ti]) : -1;
    return first >= 0 ? first : next;
}

void cdc_worker_chunk_reset(cdc_slot_t *s, size_t ti)
{
    if (s->chunks != NULL && s->chunks[ti] != NULL)
        cdc_evasm_reset(s->chunks[ti]);
}

void cdc_worker_chunk_free(cdc_slot_t *s, size_t topics)
{
    for (size_t t = 0; s->chunks != NULL && t < topics; t++) {
        if (s->chunks[t] != NULL)
            cdc_evasm_free(s->chunks[t]);
        free(s->chunks[t]);
        s->chunks[t] = NULL;
    }
}

json_t *cdc_worker_chunk_status(const cdc_worker_t *w)
{
    uint64_t open = 0, buffered = 0;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        for (size_t t = 0; w->slots[p].chunks != NULL && t < w->topic_cap; t++) {
            const cdc_evasm_t *a = w->slots[p].chunks[t];
            if (a != NULL && a->open) {
                open++;
                buffered += a->len;
            }
        }
    return json_pack("{sI sI sI sI sI sI sI}", "reassembled", (json_int_t)w->chunking.reassembled,
                     "torn", (json_int_t)w->chunking.torn, "rejected_chunks",
                     (json_int_t)w->chunking.rejected, "oversized",
                     (json_int_t)w->chunking.oversized, "largest_event_bytes",
                     (json_int_t)w->chunking.largest, "open", (json_int_t)open, "buffered_bytes",
                     (json_int_t)buffered);
}
