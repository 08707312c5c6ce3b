/*
 * The chunk buffer of an incremental snapshot (docs/capture.md, "Incremental snapshot"),
 * and the watermark messages that delimit a chunk in the stream. Pure: no PostgreSQL,
 * no Kafka. A chunk is the rows one `SELECT ... WHERE (pk) > (last) ORDER BY pk LIMIT n`
 * read, each known by its encoded event key; a change of the table that the stream
 * brings between the chunk's low and high watermarks removes its key (the stream's
 * event is as new as the row or newer), and the rows left when the high watermark
 * arrives are the ones emitted (the DBLog watermark method).
 */
#ifndef CDC_CAPTURE_CHUNK_H
#define CDC_CAPTURE_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/*
 * The snapshot the chunk was read in (pg_current_snapshot() of its REPEATABLE READ
 * transaction, full 64-bit transaction ids): which transactions its rows reflect.
 * PostgreSQL writes (and a walsender may send) a commit record before the transaction is
 * visible to other sessions (the backend leaves the proc array after the commit's WAL
 * flush, and after a synchronous standby's answer): a transaction whose commit precedes
 * the low watermark in the stream can still be invisible to the chunk's read. Its changes
 * take their keys out of the chunk like a change inside the window, or the chunk would
 * emit a row older than a change the stream already brought.
 */
typedef struct cdc_chunk_snapshot {
    uint64_t xmin, xmax; /* every id < xmin is finished, every id >= xmax unseen */
    uint64_t *xip;       /* ids in progress when it was taken (owned) */
    size_t nxip;
} cdc_chunk_snapshot_t;

/* Parses pg_current_snapshot()'s text "xmin:xmax:xip1,xip2,..." into s (freed first);
 * false when malformed or out of memory. */
bool cdc_chunk_snapshot_parse(cdc_chunk_snapshot_t *s, const char *text);
void cdc_chunk_snapshot_free(cdc_chunk_snapshot_t *s);

/* Whether the changes of transaction xid (32 bits, as a pgoutput Begin message gives it;
 * its epoch is taken as the one closest below s->xmax) are visible in s. */
bool cdc_chunk_snapshot_sees(const cdc_chunk_snapshot_t *s, uint32_t xid);

typedef struct cdc_chunk {
    char **keys;      /* row i's encoded key (owned) */
    size_t *key_lens; /* its length */
    bool *live;       /* row i is still to be emitted */
    size_t nrows, cap;
    uint32_t *slots; /* open addressing: row index + 1, 0 = empty */
    size_t nslots;   /* power of two, > 2 x nrows */
    size_t nlive;
} cdc_chunk_t;

/* Empties the chunk for the next one (memory is kept). A zeroed chunk is empty. */
void cdc_chunk_reset(cdc_chunk_t *c);
void cdc_chunk_free(cdc_chunk_t *c);

/* Adds the next row of the chunk, known by its key (copied); it is live. CDC_ERR_NOMEM. */
cdc_err_t cdc_chunk_add(cdc_chunk_t *c, const char *key, size_t len);

/* A change of the key came through the stream inside the chunk's window: its row, if
 * the chunk has one, is not emitted. Returns whether a live row was removed. */
bool cdc_chunk_remove(cdc_chunk_t *c, const char *key, size_t len);

/* A truncate inside the window: no row of the chunk is emitted. */
void cdc_chunk_remove_all(cdc_chunk_t *c);

/* Whether row i is still to be emitted. */
static inline bool cdc_chunk_live(const cdc_chunk_t *c, size_t i)
{
    return i < c->nrows && c->live[i];
}

/* ---- watermarks -------------------------------------------------------------------- */

/* Prefix of the watermark messages (pg_logical_emit_message(false, prefix, content)). */
#define CDC_WATERMARK_PREFIX "cdc.watermark"

typedef enum cdc_watermark_kind {
    CDC_WATERMARK_LOW,
    CDC_WATERMARK_HIGH,
} cdc_watermark_kind_t;

/* Longest watermark id, NUL included. */
#define CDC_WATERMARK_ID_MAX 96

/* The content of a watermark: "<id>:low" or "<id>:high" into buf (size bytes); false
 * when it does not fit or the id is empty or holds ':'. */
bool cdc_watermark_format(char *buf, size_t size, const char *id, cdc_watermark_kind_t kind);

/* Parses a watermark's content (len bytes, not NUL-terminated) into id (size bytes) and
 * kind; false when it is no watermark (malformed, too long, unknown kind). */
bool cdc_watermark_parse(const char *content, size_t len, char *id, size_t size,
                         cdc_watermark_kind_t *kind);

#endif
