/*
 * Chunked events (docs/events.md, "Chunked events"): an event larger than the capture's
 * --chunk-bytes goes to Kafka as consecutive messages of its partition, each with the
 * event's key and a `cdc.chunk` header naming the sequence, and the worker puts them
 * back together before it decodes the event. This module is the header's format and the
 * reassembly of one topic partition's sequences; pure (no Kafka), so that the rules are
 * unit tested (tests/unit/common/test_evchunk.c).
 *
 * Rules of reassembly (docs/worker.md, "Large rows"):
 * - chunk 0 starts a sequence; one left unfinished (a capture killed mid-produce, which
 *   produces the event again from chunk 0) is discarded, never emitted torn;
 * - a chunk that does not continue the open sequence (another id, index, count or size,
 *   or no sequence open) is rejected, and an open sequence it breaks is discarded;
 * - a record that is no chunk discards an open sequence too (chunks are contiguous);
 * - a sequence whose size is above the caller's cap is not buffered: its chunks are
 *   handed back one by one (oversized), for the dead-letter topic;
 * - while a sequence is open its first offset is where a cut must resume reading.
 */
#ifndef CDC_COMMON_EVCHUNK_H
#define CDC_COMMON_EVCHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CDC_EVCHUNK_HEADER "cdc.chunk"
/* The capture's --chunk-bytes default, and the chunk size of the worker's dead letters:
 * below the 1,000,000 bytes a Kafka broker takes by default (message.max.bytes), with
 * room for a key and headers. */
#define CDC_EVCHUNK_BYTES ((size_t)900 << 10)
/*
 * The extra time a large event may take a worker beyond the coordinator's --ack-deadline
 * (reassembly, decoding, the state store, the Parquet files): 1 s per 4 MiB. A worker
 * reports the event in its heartbeats for that long plus 10 s after it last touched it,
 * and the coordinator extends the ack deadline of its slots' epochs by as much.
 */
#define CDC_EVCHUNK_GRACE_BYTES_PER_S ((uint64_t)4 << 20)
int64_t cdc_evchunk_grace_ms(uint64_t bytes);

/* Room for a formatted header value: five decimal/hex fields. */
#define CDC_EVCHUNK_HEADER_MAX 96

typedef struct cdc_evchunk {
    uint64_t id;    /* the sequence: unique per produced sequence (a re-send gets another) */
    uint32_t index; /* 0-based position of this chunk */
    uint32_t count; /* chunks in the sequence, >= 1 */
    uint64_t total; /* bytes of the whole event value */
    uint64_t lsn;   /* the event's source.lsn (0 when unknown) */
} cdc_evchunk_t;

/* "<id hex>/<index>/<count>/<total>/<lsn>" into buf (NUL-terminated); its length. */
size_t cdc_evchunk_format(const cdc_evchunk_t *c, char *buf, size_t size);

/* Parses a header value; false when it is not one (index >= count, count 0, junk). */
bool cdc_evchunk_parse(const void *value, size_t len, cdc_evchunk_t *out);

/* Number of chunks of chunk_bytes (> 0) an event of total bytes needs (>= 1). */
uint32_t cdc_evchunk_count(uint64_t total, size_t chunk_bytes);

/* What cdc_evasm_add() made of a chunk. */
typedef enum cdc_evasm_result {
    CDC_EVASM_MORE = 0,  /* taken; the sequence needs more chunks */
    CDC_EVASM_COMPLETE,  /* taken; the event is whole: cdc_evasm_take() it */
    CDC_EVASM_OVERSIZED, /* a chunk of a sequence above the cap: the caller dead-letters it
                          * (last: this was its last chunk) */
    CDC_EVASM_REJECTED,  /* does not continue the open sequence: dropped */
} cdc_evasm_result_t;

/* Reassembly state of one topic partition. A zeroed struct is empty (cdc_evasm_init). */
typedef struct cdc_evasm {
    bool open;
    bool oversized;       /* open and above the cap: chunks are passed through */
    cdc_evchunk_t seq;    /* header of the open sequence's chunk 0 */
    int64_t first_offset; /* offset of its chunk 0 */
    uint32_t next_index;
    uint8_t *data; /* seq.total bytes (NULL when oversized) */
    size_t len;    /* filled so far */
    int64_t last_offset;
    /* counters, only ever growing */
    uint64_t torn;     /* sequences discarded unfinished */
    uint64_t rejected; /* chunks that continued no sequence */
} cdc_evasm_t;

void cdc_evasm_init(cdc_evasm_t *a);
/* Drops an open sequence without counting it (a seek or reassignment re-reads it). */
void cdc_evasm_reset(cdc_evasm_t *a);
void cdc_evasm_free(cdc_evasm_t *a);

/*
 * Adds the chunk h (data[0..len)) read at offset. max_total: the largest event buffered
 * (0 = no cap); a sequence above it is passed through (CDC_EVASM_OVERSIZED, *last set on
 * its last chunk). Returns CDC_ERR_NOMEM when the event's buffer cannot be allocated
 * (nothing changed: retry later), else CDC_OK with *res set. *torn is set when an
 * open sequence was discarded by this chunk.
 */
cdc_err_t cdc_evasm_add(cdc_evasm_t *a, const cdc_evchunk_t *h, int64_t offset, const void *data,
                        size_t len, size_t max_total, cdc_evasm_result_t *res, bool *last,
                        bool *torn);

/* A record that is no chunk was read: an open sequence is discarded. True when one was. */
bool cdc_evasm_interrupt(cdc_evasm_t *a);

/* After CDC_EVASM_COMPLETE: the whole value (owned by the caller, free()), its length,
 * and the offsets of its first and last chunks. The state is empty again. */
uint8_t *cdc_evasm_take(cdc_evasm_t *a, size_t *len, int64_t *first_offset, int64_t *last_offset);

/* Offset a cut must resume from while a sequence is open (its chunk 0), else -1. */
int64_t cdc_evasm_resume_offset(const cdc_evasm_t *a);

#endif
