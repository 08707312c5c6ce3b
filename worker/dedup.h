/*
 * Per-partition dedup state (docs/design.md, "Records and state"). One store per partition slot, in
 * RocksDB through common/state.h, with two families:
 *   "dedup" (TTL, default 24 h): 'S' + entity + lsn + op  -> ""   (deletes and replayed
 *                                                                 dead letters)
 *                                 'P' + entity              -> (commit_lsn, lsn) of a deleted row
 *   "rows"  (no TTL):             entity -> (commit_lsn, lsn) + last image of the
 *                                 TOAST-able columns (string, binary, decimal)
 * A change is a duplicate when its position (commit_lsn, lsn) is not after the entity's
 * last position (live: "rows"; deleted: 'P'): an exact replay (equal position) or a
 * replay that arrives out of order. The (entity, lsn, op) key is read only when a change
 * has a deleted row's position, so only deletes write it (docs/worker.md, "Dedup").
 * Live rows keep their position without expiry in "rows"; only positions of deleted
 * entities age out with the TTL.
 *
 * The "rows" family also says whether an entity exists in the mirror table as of the
 * last applied change, which lets the stager skip equality deletes for new keys, and
 * holds the old values used to repair unchanged TOAST columns (toast.c).
 *
 * Truncate (op 't', entity = the table identity "<ns>.<table>\0"): recording it deletes
 * every "rows" entry of the table (one range delete in the pending batch: the slot's rows
 * are gone, so keys are new again and no stale TOAST image survives; until the batch is
 * written, rows older than the truncate are ignored) and stores the truncate's position
 * under the table identity in "rows" (no TTL). From then on every change of the table
 * whose position is not after the truncate is a duplicate: replays of pre-truncate
 * changes and of the truncate itself are dropped however late they arrive.
 *
 * Floor (a truncate that reached another slot, cdc_dedup_floor; docs/worker.md,
 * "Debezium's truncate"): the table's rows are kept, the marker gets the floor's
 * position and a floor flag (a 17th byte, 1). A row whose position is not after the
 * marker is gone, as above; but a change not after it is checked against its entity's
 * own position, since this slot's stream had not reached the truncate: new ones are
 * CDC_DEDUP_BEFORE_FLOOR (changes of the source, no longer of the mirror), replays stay
 * duplicates.
 *
 * Replayed dead letters (cdc_change_t.replayed; docs/worker.md, "Replayed dead letters"):
 * a dead letter was never applied, so a replay of one is checked like any change by
 * position, and then:
 *   - after its entity's position: applied, like a new change;
 *   - not after it (the row changed since the record failed, or was truncated): the
 *     mirror keeps the newer state, never an older one, and the change goes to the
 *     changelog only (CDC_DEDUP_LATE_REPLAY), once: a replayed change writes its
 *     (entity, lsn, op) key whichever way it was taken, and a later replay of it that
 *     finds the key is a duplicate (for --dedup-ttl, like every such key).
 *
 * Snapshot reads (cdc_change_t.snapshot_tag; docs/worker.md, "Snapshot reads exactly
 * once"): a row's image also keeps the tag of the snapshot whose `r` row produced it, as
 * field CDC_DEDUP_SNAP_FIELD, carried over by every later change of the row
 * (cdc_dedup_carry_snapshot). A snapshot row whose tag is the one its live row keeps
 * comes from a chunk the capture read again after a crash: the row was read by this
 * snapshot already and every change of it since then is applied, so the row is in the
 * state the re-read shows (a chunk's rows are those no change touched between its
 * watermarks). It is a duplicate (CDC_DEDUP_SNAPSHOT_REREAD), for the mirror and the
 * changelog. Another snapshot (a re-snapshot on request, a table read again after it
 * rejoined the publication) has another id, and its rows land. A delete keeps the tag
 * next to its position ('P', 8 more bytes), so a row deleted and inserted again keeps
 * it too (for --dedup-ttl); a truncate forgets the tags with the rows.
 *
 * Backfill rows (cdc_change_t.backfill, op r; docs/worker.md, "Unchanged TOAST values"):
 * the capture reads them at the database's current state, which is ahead of their
 * position in the stream (the transaction at that position is always visible to the
 * read, later ones may be), and the changes between the two follow them. Those changes
 * must find, for an unchanged TOAST column, the value the stream left, not the one the
 * read saw (set by a change still to come: the first of several updates of a row in one
 * transaction would take the last one's note). So a backfill row's image keeps the
 * stored value of every column the live row's image has (same field id: the DDL did not
 * change it), and takes the read's value only for the others (a column the DDL added or
 * gave a new field). The mirror gets the read's row as it is.
 */
#ifndef CDC_WORKER_DEDUP_H
#define CDC_WORKER_DEDUP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/state.h"
#include "worker/decode.h"

enum { CDC_DEDUP_FAMILY = 0, CDC_ROWS_FAMILY = 1 };

typedef enum cdc_dedup_verdict {
    CDC_DEDUP_NEW = 0,
    CDC_DEDUP_REPLAY,          /* exact (entity, lsn, op) seen before */
    CDC_DEDUP_STALE,           /* position not after the entity's last position */
    CDC_DEDUP_BEFORE_FLOOR,    /* new, but not after its table's floor: a changelog row only */
    CDC_DEDUP_LATE_REPLAY,     /* a replayed dead letter not after its entity's position and
                                * not replayed before: a changelog row only */
    CDC_DEDUP_SNAPSHOT_REREAD, /* a snapshot row of the snapshot that read its live row
                                * already (see "Snapshot reads" above): dropped */
} cdc_dedup_verdict_t;

/*
 * Writes of accepted changes are collected in one RocksDB write batch and written by
 * cdc_dedup_flush (once per consumed Kafka batch, and always before a checkpoint). Until
 * then an in-memory overlay (pending) answers lookups for the keys in that batch, so a
 * later change to the same entity sees the earlier one.
 */
typedef struct cdc_dedup_pending {
    uint8_t *arena; /* keys and values of the entries, back to back */
    size_t arena_len, arena_cap;
    struct cdc_dedup_entry *entries;
    size_t nentries, entries_cap;
    uint32_t *slots; /* open addressing: entry index + 1, 0 = empty */
    size_t nslots;   /* power of two */
} cdc_dedup_pending_t;

/* Cached truncate position of one table (see "Truncate" above). */
typedef struct cdc_dedup_marker {
    uint8_t *table; /* "<ns>.<table>\0", the entity prefix of the table */
    size_t len;
    bool set;   /* the table was truncated at (commit_lsn, lsn) */
    bool floor; /* by a floor (cdc_dedup_floor), not in this slot's stream */
    uint64_t commit_lsn, lsn;
} cdc_dedup_marker_t;

typedef struct cdc_dedup {
    cdc_state_t *st;
    cdc_state_batch_t *batch; /* pending writes, not yet in the store */
    cdc_dedup_pending_t pending;
    int ttl_seconds;
    cdc_dedup_marker_t *markers; /* per table, loaded on first use (record thread) */
    size_t nmarkers;
    uint8_t *kbuf; /* scratch for lookup keys (record thread) */
    size_t kbuf_cap;
    uint64_t store_lookups; /* point lookups that reached RocksDB (tests, profiling) */
    uint64_t deleted_tag;   /* snapshot tag kept with the deleted row the last check met */
    /* No deleted-row position exists (none in the store when opened, no delete recorded
     * since): a change of an entity that is not live is new without a lookup. */
    bool no_positions;
    /* Set by cdc_dedup_cut until cdc_dedup_checkpoint_cut has copied the store: while
     * set, cdc_dedup_flush keeps every write pending, so the store holds exactly the
     * state at the cut. */
    _Atomic bool held;
} cdc_dedup_t;

/* State store options used for a partition's store (families and TTLs). */
void cdc_dedup_state_options(cdc_state_options_t *o, int ttl_seconds);

/* Opens the partition store in dir. On success *out is owned by the caller. */
cdc_err_t cdc_dedup_open(const char *dir, int ttl_seconds, cdc_dedup_t **out, cdc_error_t *e);
void cdc_dedup_close(cdc_dedup_t *d);

/*
 * Checks change c. *image receives the entity's stored row value (position + image,
 * malloc'd, caller frees) or NULL when the entity is not live in state.
 */
cdc_err_t cdc_dedup_check(cdc_dedup_t *d, const cdc_change_t *c, cdc_dedup_verdict_t *verdict,
                          uint8_t **image, size_t *image_len, cdc_error_t *e);

/*
 * Records an accepted (and TOAST-repaired) change: seen key, position, row image. The
 * writes are pending (visible to cdc_dedup_check) until cdc_dedup_flush. part (may be
 * NULL) is the partition key of the file the row goes to (stage.h), kept in the image
 * as field CDC_DEDUP_PART_FIELD so that the row's next change deletes it there. prev
 * (may be NULL) is the row's stored value as cdc_dedup_check gave it: a backfill row
 * keeps its TOAST-able values in the new image (see "Backfill rows" above).
 */
cdc_err_t cdc_dedup_record(cdc_dedup_t *d, const cdc_change_t *c, const uint8_t *part,
                           size_t part_len, const uint8_t *prev, size_t prev_len, cdc_error_t *e);

/*
 * Records a change taken as CDC_DEDUP_LATE_REPLAY: only its (entity, lsn, op) key, so
 * that it is taken once; the entity's position and image stay those of its newer state.
 * Pending like cdc_dedup_record.
 */
cdc_err_t cdc_dedup_record_replay(cdc_dedup_t *d, const cdc_change_t *c, cdc_error_t *e);

/*
 * Applies a floor of the table whose entity prefix is table ("<ns>.<table>\0", len
 * bytes): a truncate at (commit_lsn, lsn) that another slot met. Unless the table's
 * marker is already at or after it, calls fn(entity, entity_len, value, value_len, arg)
 * for every row of the table live in state whose position is not after the floor (the
 * value as from cdc_dedup_check), then sets the marker, as a floor, in the pending
 * batch: those rows are gone from then on (see "Floor" above). *applied says whether
 * it did. An error of fn ends the call with it (the marker is not set). Runs on the
 * record thread, also while the store is held: it reads the store and the overlay.
 */
typedef cdc_err_t (*cdc_dedup_row_fn)(const uint8_t *entity, size_t entity_len, const uint8_t *val,
                                      size_t val_len, void *arg, cdc_error_t *e);
cdc_err_t cdc_dedup_floor(cdc_dedup_t *d, const uint8_t *table, size_t len, uint64_t commit_lsn,
                          uint64_t lsn, cdc_dedup_row_fn fn, void *arg, bool *applied,
                          cdc_error_t *e);

/* Field id of the partition key in a stored image (no column has id 0). */
#define CDC_DEDUP_PART_FIELD 0
/* Field id of the snapshot tag in a stored image (a long; column ids are positive). */
#define CDC_DEDUP_SNAP_FIELD (-1)

/* The snapshot tag kept with a stored row value (as from cdc_dedup_check); 0: none. */
uint64_t cdc_dedup_image_snapshot(const uint8_t *val, size_t len);

/* A change that is no snapshot row of its own (no tag) takes its row's tag from the stored
 * row value (val, as from cdc_dedup_check; NULL: a row not live), or from the deleted
 * row's position the last cdc_dedup_check found, so that the row keeps the snapshot that
 * read it when cdc_dedup_record stores it. */
void cdc_dedup_carry_snapshot(const cdc_dedup_t *d, cdc_change_t *c, const uint8_t *val,
                              size_t len);

/*
 * The partition key kept with a stored row value (as from cdc_dedup_check), malloc'ed
 * into *part (caller frees); *part = NULL when the row has none (written unpartitioned,
 * or recorded before partitioning existed). False when out of memory or corrupt.
 */
bool cdc_dedup_image_part(const uint8_t *val, size_t len, uint8_t **part, size_t *part_len);

/* Writes the pending changes to the store in one write batch. On failure they stay
 * pending (a later flush retries). While the store is held (cdc_dedup_cut) it writes
 * nothing and returns CDC_OK: the writes stay pending (and visible) until released. */
cdc_err_t cdc_dedup_flush(cdc_dedup_t *d, cdc_error_t *e);

/* Flushes, then checkpoints the store into dir (cdc_state_checkpoint). */
cdc_err_t cdc_dedup_checkpoint(cdc_dedup_t *d, const char *dir, cdc_error_t *e);

/*
 * Checkpoints in two steps so that the record path keeps going while the store is
 * copied (docs/worker.md, "Barriers"):
 *   cdc_dedup_cut (record thread, at the barrier's record boundary): flushes the
 *     pending writes and holds the store: later changes are checked and recorded as
 *     usual but stay in the overlay, out of the store;
 *   cdc_dedup_checkpoint_cut (any one other thread): checkpoints the store into dir,
 *     which is therefore exactly the state at the cut, then releases the hold (also on
 *     failure; the next cdc_dedup_flush writes what accumulated).
 * Between the two, only cdc_dedup_check / cdc_dedup_record / cdc_dedup_flush may run
 * on the record thread (they read the store and write the overlay).
 */
cdc_err_t cdc_dedup_cut(cdc_dedup_t *d, cdc_error_t *e);
cdc_err_t cdc_dedup_checkpoint_cut(cdc_dedup_t *d, const char *dir, cdc_error_t *e);
/* Releases a hold without a checkpoint (the epoch was abandoned). */
void cdc_dedup_release(cdc_dedup_t *d);

/* Image part of a stored row value (skips the 16-byte position). */
static inline const uint8_t *cdc_dedup_image(const uint8_t *val, size_t len, size_t *img_len)
{
    *img_len = len >= 16 ? len - 16 : 0;
    return len >= 16 ? val + 16 : val;
}

#endif
