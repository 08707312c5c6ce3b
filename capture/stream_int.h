/*
 * Internal header of the capture's stream, shared by its pieces: stream.c (the session
 * loop), changes.c (messages into events, the producer, status updates), tables.c (table
 * state, Relation and Type messages, tables joining the publication), partitions.c
 * (partitions mapped to their root), probe.c (the schema probe, docs/capture.md,
 * "Backfill after DDL") and incremental.c (incremental snapshots, docs/capture.md,
 * "Incremental snapshot"). Not for use outside the capture.
 */
#ifndef CDC_CAPTURE_STREAM_INT_H
#define CDC_CAPTURE_STREAM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture/capture.h"

/* Prefix of the schema probe's logical messages. */
#define CDC_CAPTURE_PROBE_PREFIX "cdc.schema"

/* ---- stream.c ---- */

/* What a session does with its replication slot (cdc_capture_slot_plan). */
typedef struct cdc_capture_slot_plan {
    bool drop;    /* drop the existing slot first */
    bool create;  /* create the slot; else resume at its confirmed_flush_lsn */
    bool initial; /* create it with an exported snapshot and run the initial snapshot */
    bool adopt;   /* an existing slot without the snapshot marker: streamed from its
                   * position, the tables read by incremental snapshots */
} cdc_capture_slot_plan_t;

/*
 * Decides from the slot's state (cdc_source_slot_info: exists, lost, the PID of the
 * walsender streaming it) and the snapshot marker read from the registry what the
 * session does with the slot: resume it, create it (with the initial snapshot under
 * --snapshot-mode=initial), adopt it (an existing slot without the marker: made by an
 * operator, or by a capture that died before its snapshot completed), or drop and create
 * it again (such a slot under --slot-recreate; a lost slot under --slot-lost=resnapshot,
 * which sets cap->resnapshot).
 * Errors: CDC_ERR_CONFLICT when another process streams the slot (cap becomes a
 * standby; retriable unless --slot-busy=fail), CDC_ERR_STATE when the slot this
 * capture streamed from is lost (cap->slot_lost; docs/capture.md, "Slot lost").
 */
cdc_err_t cdc_capture_slot_plan(cdc_capture_t *cap, bool exists, bool lost, int active,
                                cdc_capture_slot_plan_t *plan, cdc_error_t *e);

/*
 * Whether the session loop sends a status update now (after a read at now, monotonic
 * ms): the server asked for one (reply), a status interval passed, or the read brought
 * no data and Kafka acked past the confirmed LSN at least 50 ms after the last update.
 * May drop acked transactions from cap->track (cdc_txtrack_confirmable).
 */
bool cdc_capture_status_due(cdc_capture_t *cap, bool data, bool reply, int64_t now);

/* First backoff between sessions, and the backoff after a session that streamed. */
#define CDC_CAPTURE_BACKOFF_MIN_MS 500

/* What cdc_capture_run does after a session ended. */
typedef enum cdc_capture_next {
    CDC_CAPTURE_NEXT_STOP,    /* a clean stop: the capture returns CDC_OK */
    CDC_CAPTURE_NEXT_FAIL,    /* an error no new session mends: the capture returns it */
    CDC_CAPTURE_NEXT_STANDBY, /* another process streams the slot: look again later */
    CDC_CAPTURE_NEXT_RETRY,   /* a new session after a backoff */
} cdc_capture_next_t;

/*
 * Classifies the end of a session (rc and its error err) and says how long to wait
 * before the next one (*wait_ms). *backoff_ms is the run's backoff: back to
 * CDC_CAPTURE_BACKOFF_MIN_MS after a session that streamed, doubled up to
 * --reconnect-max after each retry. Clears cap->streamed and cap->slot_busy.
 */
cdc_capture_next_t cdc_capture_session_ended(cdc_capture_t *cap, cdc_err_t rc,
                                             const cdc_error_t *err, int64_t *backoff_ms,
                                             int64_t *wait_ms);

/* ---- tablemap.c (with cdc_capture_table_get, _fail, _fill_col and
 * cdc_capture_parse_tables in capture.h) ---- */

/* Table state by name, or NULL (never creates one). */
cdc_capture_table_t *cdc_capture_table_by_name(cdc_capture_t *cap, const char *schema,
                                               const char *name);

/* Table state by relation id of the current stream, or NULL. */
cdc_capture_table_t *cdc_capture_table_by_relid(cdc_capture_t *cap, uint32_t relid);

/* Whether schema.name is in the capture set of this session. */
bool cdc_capture_is_wanted(const cdc_capture_t *cap, const char *schema, const char *name);

/* t's state as /status and POST /tables give it: streaming, snapshotting, error, excluded,
 * removed, or "absent" (not captured, NULL too). */
const char *cdc_capture_table_state(const cdc_capture_table_t *t);

/* ---- tables.c ---- */

/*
 * A change at lsn of t, a table the stream publishes but the capture set does not hold
 * (docs/capture.md, "Tables outside the capture set"): counts it and returns the error
 * that ends the session before the change's position can be confirmed. With --tables
 * the error names the table and the fix and is not retriable (the capture exits); when
 * the capture set is the publication it is retriable: the next session reads the
 * publication again and captures the table from this change on.
 */
cdc_err_t cdc_capture_uncaptured(cdc_capture_t *cap, cdc_capture_table_t *t, uint64_t lsn,
                                 cdc_error_t *e);

/* Marks t, a table of the publication that --table-include/--table-exclude leave out, as
 * excluded (logged once): its changes are counted and skipped, its state is "excluded". */
void cdc_capture_exclude(cdc_capture_t *cap, cdc_capture_table_t *t);

/*
 * Publication mode (no --tables): t, a table of the publication outside the capture set,
 * joins it from here on (docs/capture.md, "Adding a table"): its topic is made (a
 * failure ends the session, retriable, before any of its changes is confirmed) and an
 * incremental snapshot of its rows starts when cdc_incremental_needed.
 */
cdc_err_t cdc_capture_adopt(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e);

/* Publication mode: adopts the publication's tables outside the capture set (a table
 * added with no change yet), notices the tables that left it (cdc_capture_table_removed)
 * and those that joined it again (cdc_capture_rejoin), also between two looks (a new
 * pg_publication_rel row of the table). */
cdc_err_t cdc_capture_poll_publication(cdc_capture_t *cap, cdc_error_t *e);

/*
 * t left the publication (docs/capture.md, "Removing a table"): logged, counted in
 * cdc_capture_tables_removed_total, its incremental snapshot abandoned, and recorded as
 * `removed/<topic>` on `<prefix>._capture` with the server's WAL position now. t stays in
 * the session's capture set: changes of it the stream still brings (from before the
 * removal, when the stream is behind) are produced.
 */
cdc_err_t cdc_capture_table_removed(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e);

/*
 * t, recorded as removed, is in the publication again: it joins the capture set and gets
 * an incremental snapshot ("incremental" rows) whose first chunk truncates the mirror;
 * once that snapshot is recorded, the removed marker is cleared.
 */
cdc_err_t cdc_capture_rejoin(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e);

/* setup->table_error of the session's setup check (arg: the capture). */
void cdc_capture_on_table_error(void *arg, const char *schema, const char *name,
                                const cdc_error_t *err);

/* A captured table's Relation message: its schema document from the message and the
 * catalog, installed as the table's current version. */
cdc_err_t cdc_capture_on_relation(cdc_capture_t *cap, const cdc_pgo_msg_t *m, cdc_error_t *e);

/* A Type message: the name of a user-defined type. */
cdc_err_t cdc_capture_on_type(cdc_capture_t *cap, const cdc_pgo_msg_t *m, cdc_error_t *e);

/* ---- partitions.c ---- */

/* The mapped partition of a relation id, or NULL. */
cdc_capture_leaf_t *cdc_capture_leaf_by_relid(cdc_capture_t *cap, uint32_t relid);

/* Forgets every mapped partition (a new session maps them again), and frees the scratch. */
void cdc_capture_leaves_free(cdc_capture_t *cap);

/* True when a partition of this stream is mapped to its captured root. */
bool cdc_capture_leaves_any(const cdc_capture_t *cap);

/* A Relation message of a partition of a captured table; *handled = false when it is
 * not one. */
cdc_err_t cdc_capture_on_partition_relation(cdc_capture_t *cap, const cdc_pgo_msg_t *m,
                                            bool *handled, cdc_error_t *e);

/* A change of a mapped partition as the root's, in *out (its values in the map's scratch,
 * good until the next call); *produce false: skipped (not mappable: logged, counted). */
cdc_err_t cdc_capture_leaf_map(cdc_capture_t *cap, cdc_capture_leaf_t *leaf, const cdc_pgo_msg_t *m,
                               uint64_t lsn, cdc_pgo_msg_t *out, bool *produce, cdc_error_t *e);

/* A TRUNCATE that names mapped partitions: *out names its other relations (maybe none);
 * the partitions' truncates are skipped, logged and counted. */
cdc_err_t cdc_capture_truncate_unmapped(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                                        cdc_pgo_msg_t *out, cdc_error_t *e);

/* ---- output.c (with cdc_capture_produce, _event_init and _emit_marker in capture.h) ---- */

/* Creates the session's Kafka producer (cap->producer). */
cdc_err_t cdc_capture_producer_open(cdc_capture_t *cap, cdc_error_t *e);

/* Sends a status update with what Kafka has acked so far. */
cdc_err_t cdc_capture_send_status(cdc_capture_t *cap, cdc_error_t *e);

/* Keeps the replication connection alive during a long read (a backfill). */
cdc_err_t cdc_capture_keepalive(cdc_capture_t *cap, cdc_error_t *e);

/* ---- changes.c ---- */

/* An insert, update, delete or truncate of the current transaction. */
cdc_err_t cdc_capture_on_change(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                                cdc_error_t *e);

/* One pgoutput message of the stream, from the WAL position lsn. */
cdc_err_t cdc_capture_on_message(cdc_capture_t *cap, const uint8_t *data, size_t len, uint64_t lsn,
                                 cdc_error_t *e);

/* ---- probe.c ---- */

/* Writes a probe for each captured table whose catalog columns differ from its current
 * schema version. */
cdc_err_t cdc_capture_probe_schemas(cdc_capture_t *cap, cdc_error_t *e);

/* A probe decoded at lsn: its columns become the table's schema at this position. */
cdc_err_t cdc_capture_on_probe(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                               cdc_error_t *e);

/* ---- incremental.c ---- */

/* Whether t, a table that joins the capture set, needs an incremental snapshot of its
 * rows: no schema of it was ever registered (so no snapshot read it and no change of it
 * was produced) and no snapshot of it was recorded; never with --snapshot-mode=never. */
bool cdc_incremental_needed(const cdc_capture_t *cap, const cdc_capture_table_t *t);

/* Starts an incremental snapshot of t whose rows carry source.snapshot = label
 * ("incremental": the table's rows before it was captured, written to the changelog;
 * "backfill": a re-snapshot, applied to the mirror only); records it on
 * `<prefix>._capture` first. truncate: the mirror is truncated at the first chunk's low
 * watermark (a table that joined the publication again, docs/capture.md, "Removing a
 * table"). */
cdc_err_t cdc_incremental_begin(cdc_capture_t *cap, cdc_capture_table_t *t, const char *label,
                                bool truncate, cdc_error_t *e);

/* Stops t's incremental snapshot, if one runs (its chunk in flight is dropped), and
 * records it as abandoned: t left the publication. */
cdc_err_t cdc_incremental_abandon(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e);

/* At a session's start, before it streams: forgets the last session's chunk (its
 * snapshot resumes from its recorded position) and starts snapshots of tables that
 * joined the publication while the capture was away (publication mode; a table that
 * left it before gets a truncate first, cdc_capture_rejoin), or of every table not read
 * yet (--snapshot-mode=incremental). In publication mode, a table captured before that
 * is no longer published is recorded as removed (cdc_capture_table_removed). */
cdc_err_t cdc_incremental_session(cdc_capture_t *cap, cdc_error_t *e);

/* Between stream reads: writes the chunk markers that are due, and reads the next chunk
 * when none is in flight and a snapshot is due. */
cdc_err_t cdc_incremental_tick(cdc_capture_t *cap, cdc_error_t *e);

/* ---- requests over HTTP (request.c) ---- */

/* Serves the pending request, if any (main thread, between stream reads; at most once
 * a clock tick). An error ends the session. */
cdc_err_t cdc_capture_serve_request(cdc_capture_t *cap, cdc_error_t *e);

/* ---- the reply to a request (reply.c) ---- */

/* status and a body, a malloc'ed JSON text (NULL answers {}); status 0: none yet */
typedef struct cdc_capture_reply {
    int status;
    char *body;
} cdc_capture_reply_t;

/* Sets the reply to body (taken), or to {"error": <the message>}. */
void cdc_capture_reply_set(cdc_capture_reply_t *r, int status, char *body);
void cdc_capture_reply_error(cdc_capture_reply_t *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* POST /snapshot of schema.table: starts its re-snapshot ("backfill") and replies. */
cdc_err_t cdc_incremental_request(cdc_capture_t *cap, const char *schema, const char *table,
                                  cdc_capture_reply_t *reply, cdc_error_t *e);

/* POST /tables: adds schema.table to the publication (add) or drops it, reads the
 * publication at once (cdc_capture_poll_publication) and replies with the table's state. */
cdc_err_t cdc_capture_publication_request(cdc_capture_t *cap, bool add, const char *schema,
                                          const char *table, cdc_capture_reply_t *reply,
                                          cdc_error_t *e);

/* A watermark message (prefix CDC_WATERMARK_PREFIX) decoded at lsn. */
cdc_err_t cdc_incremental_on_watermark(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                                       cdc_error_t *e);

/* An event of t with this encoded key is produced from the stream: inside a chunk's
 * window its row is not emitted. toast: the event leaves a TOASTed value out of a row
 * maybe older than the capture (snapshot_pending): the chunk is read again. */
void cdc_incremental_on_key(cdc_capture_t *cap, cdc_capture_table_t *t, const cdc_buf_t *key,
                            bool toast);

/* A truncate of t from the stream: inside a chunk's window no row of the chunk is. */
void cdc_incremental_on_truncate(cdc_capture_t *cap, const cdc_capture_table_t *t);

/* Drops the chunk in flight. */
void cdc_incremental_window_free(cdc_capture_t *cap);

/* Registers the incremental snapshots' metrics (once, at the capture's start). */
void cdc_incremental_init(cdc_capture_t *cap);

/* Drops the window in flight, forgets the chunk markers not written yet and frees their
 * queue (cdc_capture_free). */
void cdc_incremental_free(cdc_capture_t *cap);

#endif
