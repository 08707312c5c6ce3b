/*
 * The capture engine: configuration, per-table state and the pieces that turn the
 * slot into Kafka events (stream.c: the session loop; changes.c, tables.c, partitions.c
 * and probe.c: the stream's messages, see stream_int.h; snapshot.c: the initial
 * snapshot and backfills; incremental.c: incremental snapshots of a table while the
 * stream runs; registry.c: schema versions and the capture's markers on Kafka; topics.c:
 * the tables' topics; source.h: PostgreSQL).
 * Everything here runs on the main thread, including Kafka delivery reports (served
 * by the producer polls this thread makes).
 */
#ifndef CDC_CAPTURE_CAPTURE_H
#define CDC_CAPTURE_CAPTURE_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "capture/chunk.h"
#include "capture/event.h"
#include "capture/filter.h"
#include "capture/pgoutput.h"
#include "capture/source.h"
#include "capture/txtrack.h"
#include "common/options.h"
#include "common/cdcschema.h"
#include "common/err.h"
#include "common/health.h"
#include "common/http.h"
#include "common/kafka.h"
#include "common/metrics.h"

typedef struct cdc_capture_config {
    char *pg_dsn;
    char *pg_password; /* NULL = the DSN's (or libpq's passfile, PGPASSWORD) */
    char *slot;
    char *publication;
    char *tables; /* "schema.table,..." (schema defaults to public); empty = the publication's */
    char *table_include; /* patterns narrowing the publication's tables (capture/filter.h) */
    char *table_exclude;
    bool create_publication;
    char *topic_prefix;
    int64_t partitions;
    char *snapshot_mode;   /* incremental | initial | never */
    char *slot_lost;       /* fail | resnapshot: when the slot this capture streamed is gone */
    char *slot_busy;       /* wait | fail: when another process streams the slot */
    char *nested_types;    /* native | string: arrays and composites of new columns
                            * (docs/capture.md, "Types") */
    char *numeric_default; /* decimal(P,S) | string: an unconstrained numeric of new columns */
    bool slot_recreate;    /* drop an existing slot without this capture's snapshot marker
                            * and create it again, instead of adopting it */
    int64_t snapshot_chunk;
    int64_t snapshot_max_rate;            /* incremental snapshot rows/s; 0 = unlimited */
    int64_t snapshot_window_tables;       /* most tables read in one watermark window */
    int64_t heartbeat_interval_ms;        /* 0 = off */
    int64_t schema_probe_interval_ms;     /* 0 = off */
    int64_t publication_poll_interval_ms; /* 0 = off */
    int64_t status_interval_ms;
    int64_t read_coalesce_ms; /* see cdc_source_t.coalesce_ms */
    cdc_kafka_options_t kafka;
    char *kafka_compression;
    int64_t kafka_linger_ms;
    int64_t max_inflight;       /* producer queue bound, messages */
    int64_t max_inflight_bytes; /* producer queue bound, bytes */
    int64_t chunk_bytes;        /* events larger are produced in chunks (common/evchunk.h) */
    int64_t reconnect_max_ms;
    int64_t drain_timeout_ms;
    char *http_addr;
    cdc_tls_options_t tls; /* --http-tls (common/tls.h) */
    int64_t liveness_timeout_ms;
    char *http_token;      /* bearer tokens of the admin API (http.h); NULL = none */
    bool http_token_reads; /* GET endpoints need the token too */
    bool insecure;         /* --insecure: missing secrets waived */
    cdc_log_options_t log;
} cdc_capture_config_t;

/*
 * A table's incremental snapshot (incremental.c; docs/capture.md, "Incremental
 * snapshot"): what its marker on `<prefix>._capture` says, updated once each chunk is
 * produced and acked.
 */
typedef struct cdc_capture_isnap {
    bool marked;      /* a marker of the table exists (read at start, or written since) */
    bool due;         /* a snapshot runs, or waits for its next chunk */
    char id[24];      /* the snapshot's id */
    char label[16];   /* source.snapshot of its rows: "incremental" or "backfill" */
    char *after;      /* JSON array of the key's text values of the last row produced and
                       * acked; NULL: from the table's first row */
    int64_t rows;     /* rows produced by this snapshot */
    int64_t estimate; /* pg_class.reltuples at its start (-1 unknown) */
    int64_t retry_ms; /* no chunk before this time (mono ms): it waits for the stream */
    bool truncate;    /* the table joined the publication again (docs/capture.md, "Removing
                       * a table"): its first chunk's low watermark truncates the mirror */
    bool abandoned;   /* stopped before its end: the table left the publication */
    /* Chunks produced whose marker waits for their rows' acks (cap->incremental.marks), and what
     * the last marker written says: a new session resumes from there, not from `after`. */
    int pending_marks;
    char *marked_after;
    int64_t marked_rows;
    bool marked_due;
    /* times the chunk in flight was read again for a window's toast_taken */
    int toast_rereads;
    size_t part; /* index + 1 of its chunk in cap->incremental.window.parts; 0: none in flight */
} cdc_capture_isnap_t;

/* A chunk's marker, written once Kafka acked every event up to the chunk's high
 * watermark (incremental.c). */
typedef struct cdc_capture_mark {
    size_t table; /* index in cap->tables */
    uint64_t lsn; /* the chunk's high watermark */
    char *after;  /* the position after the chunk (NULL: none) */
    int64_t rows;
    bool done; /* the table's last chunk */
} cdc_capture_mark_t;

/* One captured table. */
typedef struct cdc_capture_table {
    char *topic;
    char *schema;
    char *name;
    uint32_t relid;       /* 0 until a Relation message (or the snapshot) names it */
    bool captured;        /* in the configured table set */
    bool topic_ready;     /* topic ensured with the right partition count */
    int32_t partitions;   /* partition count of the topic */
    cdc_schema_doc_t doc; /* current schema (doc.version = version events name); may be empty */
    bool has_doc;
    cdc_schema_doc_t latest; /* latest registered version on Kafka (from the registry) */
    bool has_latest;
    int64_t backfilled_version; /* newest version whose backfill completed (marker), 0 none */
    int64_t probe_sent_ms;      /* a schema probe message is on its way (0: none) */
    bool backfill_pending;      /* a backfill of the table is due (docs/capture.md) */
    cdc_buf_t source_head;      /* cached constant head of the envelope's "source" */
    char **col_names;           /* cached `"col":` per column of doc */
    size_t *col_name_lens;
    cdc_counter_t *m_events;
    cdc_counter_t *m_bytes;
    cdc_counter_t *m_snapshot_rows;
    /* A table error of its own (cdc_capture_table_fail): the table is not captured, the
     * others are. Cleared when the next session (or, for an error found in the stream,
     * the table's next Relation message) finds the table usable. */
    bool failed;
    cdc_gauge_t *m_error;        /* cdc_capture_table_errors{table}: 1 while failed */
    cdc_counter_t *m_skipped;    /* cdc_capture_skipped_changes_total{table} */
    cdc_counter_t *m_uncaptured; /* cdc_capture_uncaptured_changes_total{table} */
    /* The last failure to create or find the table's topic (NULL: none since it was
     * ready), shown in /status; each failure counts in cdc_capture_topic_errors_total. */
    char *topic_error;
    cdc_counter_t *m_topic_errors;
    cdc_capture_isnap_t isnap;
    /* The table left the publication (docs/capture.md, "Removing a table"): recorded as
     * `removed/<topic>` on `<prefix>._capture` until it joins again. */
    bool removed;
    int64_t removed_ms;   /* when it was noticed (wall ms) */
    uint64_t removed_lsn; /* the server's WAL position then (the removal is before it) */
    uint32_t membership;  /* its pg_publication_rel row at the last look (0: none known) */
    /* In the publication, left out by --table-include/--table-exclude: its changes are
     * counted (cdc_capture_excluded_changes_total) and not produced. */
    bool excluded;
    cdc_counter_t *m_excluded;
} cdc_capture_table_t;

/*
 * A partition whose changes arrive under its own relation although its root is the
 * captured table (the publication does not publish through the root, e.g. WAL decoded
 * before publish_via_partition_root was set): its rows are mapped onto the root's
 * columns by name and produced as the root's.
 */
typedef struct cdc_capture_leaf {
    uint32_t relid;           /* the partition's relation id in this stream */
    uint32_t root_relid;      /* the captured root's */
    char *name;               /* "schema.partition", for logs */
    char *root_name;          /* "schema.root", for logs */
    bool warned;              /* its first change was logged */
    size_t ncols;             /* columns of the root's schema built from this partition */
    int *map;                 /* root column i = partition column map[i]; NULL: unmappable */
    cdc_counter_t *m_skipped; /* the root's cdc_capture_skipped_changes_total */
} cdc_capture_leaf_t;

/* Transactions committed in the stream that a chunk's read must see (a ring). */
#define CDC_CAPTURE_RECENT_XIDS 1024

/* Where the events being produced belong: a transaction of the stream, or one the
 * capture makes of its own (a snapshot's truncate). id 0: none. */
typedef struct cdc_capture_txpos {
    uint64_t id;          /* the transaction tracker's id (txtrack.h) */
    uint32_t xid;         /* PostgreSQL's, 0 for the capture's own */
    uint64_t commit_lsn;  /* its commit's LSN */
    int64_t commit_ts_ms; /* its commit time (wall ms) */
} cdc_capture_txpos_t;

/* The current transaction and the last ones committed in the stream: owned by txn.c, which
 * alone reaches into it (make lint checks); the main thread only. */
typedef struct cdc_capture_tx {
    cdc_capture_txpos_t pos;
    uint32_t visible_xid; /* the last xid seen visible to the SQL connection */
    /* The last transactions committed in the stream (a ring): a chunk is not read in a
     * snapshot that misses one of them (incremental.c, read_window). */
    uint32_t recent_xids[CDC_CAPTURE_RECENT_XIDS];
    size_t recent_next;
} cdc_capture_tx_t;

/* The partitions mapped to their captured root in this stream: owned by partitions.c,
 * which alone reaches into it (make lint checks); the main thread only. */
typedef struct cdc_capture_leafmap {
    cdc_capture_leaf_t *leaves;
    size_t nleaves;
    cdc_pgo_value_t *vals; /* scratch for the mapped rows (2 x the widest root) */
    size_t vals_cap;
    uint32_t *rels; /* scratch for a truncate's relations that are not mapped partitions */
    size_t rels_cap;
} cdc_capture_leafmap_t;

/* The capture's /status and the slot's WAL retention it shows: owned by status.c, which
 * alone reaches into it (make lint checks); the main thread builds it, HTTP threads serve
 * the document. */
typedef struct cdc_capture_report {
    cdc_http_doc_t doc; /* /status (cdc_capture_status_publish) */
    int64_t next_ms, next_retention_ms;
    int64_t retained_wal, safe_wal; /* last cdc_source_slot_retention(); safe -1 = no limit */
    cdc_gauge_t *m_retained_wal;
} cdc_capture_report_t;

/* Type names from Type messages (user-defined types). */
typedef struct cdc_capture_type {
    uint32_t oid;
    char *name; /* "schema.typname" */
    bool is_array;
} cdc_capture_type_t;

/*
 * The chunk of an incremental snapshot between its watermarks (at most one at a time):
 * written by the main thread, in the stream until its high watermark arrives.
 */

/* One table's chunk in a window. */
typedef struct cdc_capture_part {
    size_t table;               /* index in cap->tables */
    bool last;                  /* the table's last chunk (fewer rows than asked) */
    int64_t version;            /* the table's schema version the rows were read in */
    char *sql;                  /* its query, without the LIMIT */
    struct json_t *from;        /* JSON array of the key values it reads after (NULL: start) */
    cdc_chunk_t chunk;          /* its rows' keys, removed by changes in the window */
    struct cdc_pg_result *rows; /* its rows, as read; NULL: not read (the window was full) */
    char *after;                /* JSON array of its last row's key values */
    /* a change that left a TOASTed value out (the row maybe older than the capture) took
     * a key out: the chunk is read again, so that the read brings the value */
    bool toast_taken;
} cdc_capture_part_t;

/* Where the incremental snapshots' windows spent their time (mono us; incremental.c logs
 * it once they are done). */
typedef struct cdc_capture_isnap_time {
    int64_t windows, tables;
    int64_t prepare_us, low_us, read_us, high_us, wait_us, emit_us, idle_us;
    int64_t since_us; /* when the last window's rows were out; 0: none since */
} cdc_capture_isnap_time_t;

typedef struct cdc_capture_window {
    bool active;                   /* a window in flight */
    char id[CDC_WATERMARK_ID_MAX]; /* the window's watermark id */
    bool open;                     /* its low watermark arrived */
    cdc_chunk_snapshot_t snap;     /* the snapshot its rows were read in */
    /* the chunks read in it, of up to --snapshot-window-tables tables, at most
     * --snapshot-chunk rows in all (docs/capture.md, "Incremental snapshot") */
    cdc_capture_part_t *parts;
    size_t nparts;
    int64_t high_us; /* when its high watermark was written (mono us) */
} cdc_capture_window_t;

/*
 * The incremental snapshots' windows and markers (docs/capture.md, "Incremental
 * snapshot"): owned by incremental.c, which alone reaches into it (make lint checks);
 * the main thread only. Other files call cdc_incremental_*().
 */
typedef struct cdc_capture_incremental {
    cdc_capture_window_t window;                     /* the window in flight */
    int64_t invisible_since_ms, invisible_logged_ms; /* a chunk read waits for a commit */
    cdc_capture_mark_t *marks; /* chunk markers waiting for acks, oldest first */
    size_t nmarks;
    uint64_t seq;         /* ids of snapshots and chunks of this process */
    size_t next;          /* where the next look for a due table starts (round robin) */
    int64_t pace_ms;      /* no window before this time (mono coarse ms): the one pace of
                           * --snapshot-max-rate over every table */
    int64_t last_tick_ms; /* last cdc_incremental_tick that looked (mono coarse) */
    cdc_counter_t *m_windows;
    /* where the windows' time went since the last summary in the log (mono us) */
    cdc_capture_isnap_time_t time;
} cdc_capture_incremental_t;

/*
 * A request over HTTP (request.c: POST /snapshot, POST /tables): the HTTP thread puts the
 * action and the table's name and waits; the main thread answers between stream reads.
 */
typedef struct cdc_capture_request {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool init;
    int64_t last_look_ms; /* main thread: the last cdc_capture_serve_request that looked */
    bool pending, answered;
    char table[256];
    char action[16]; /* snapshot | add | remove */
    int status;      /* HTTP status of the answer */
    char body[512];  /* its JSON */
} cdc_capture_request_t;

typedef struct cdc_capture {
    const cdc_capture_config_t *cfg;
    cdc_schema_mapping_t mapping; /* from --nested-types and --numeric-default */
    volatile sig_atomic_t *stop;  /* set by the signal handler */

    cdc_source_t src;
    cdc_source_table_t *wanted; /* the configured (or published) tables */
    size_t nwanted;
    cdc_table_filter_t filter; /* --table-include/--table-exclude (empty: none) */

    cdc_kafka_producer_t *producer;
    cdc_txtrack_t track;
    bool schema_ack_pending;
    cdc_err_t schema_ack_err;

    cdc_capture_table_t *tables;
    size_t ntables;
    cdc_capture_type_t *types;
    size_t ntypes;
    cdc_capture_leafmap_t leafmap; /* partitions.c's alone */
    bool registry_loaded;
    bool snapshot_marked; /* the slot's snapshot marker was found on Kafka */
    uint64_t marker_lsn;

    cdc_capture_tx_t tx; /* the current transaction: txn.c's alone */

    cdc_pgo_scratch_t scratch;
    cdc_buf_t key;
    cdc_buf_t value;
    /* chunked events (docs/events.md, "Chunked events"): the next sequence id, and the
     * largest event produced (/status) */
    uint64_t chunk_seq;
    uint64_t largest_event;
    cdc_counter_t *m_chunked, *m_chunks;
    cdc_counter_t *m_snapshot_chunks; /* chunks whose marker Kafka acked */

    uint64_t confirmed;     /* last LSN sent to PostgreSQL as flushed */
    int64_t last_status_ms; /* when the last status update went out */
    int64_t last_heartbeat_ms;
    int64_t last_probe_ms;
    int64_t last_pub_poll_ms;
    _Atomic bool ready;  /* streaming; read by the HTTP thread (/readyz) */
    cdc_health_t health; /* /healthz: the loops beat it */
    cdc_tls_t *tls;      /* of the HTTP server; NULL = none. The stream loop reloads it */
    bool streamed;       /* the current session reached streaming */

    cdc_counter_t *m_transactions;
    cdc_counter_t *m_delivery_errors;
    cdc_gauge_t *m_confirmed_lsn;
    cdc_gauge_t *m_lag_bytes;
    cdc_gauge_t *m_inflight;
    cdc_gauge_t *m_snapshot_running;
    cdc_counter_t *m_backfills;
    cdc_gauge_t *m_snapshot_tables_done;
    cdc_gauge_t *m_snapshot_tables;
    cdc_counter_t *m_heartbeats;
    cdc_counter_t *m_reconnects;
    cdc_gauge_t *m_slot_lost;
    cdc_gauge_t *m_standby;
    bool standby;                /* waiting for the slot another process streams */
    int64_t standby_logged_ms;   /* last "slot in use" warning (one a minute) */
    bool slot_busy;              /* the session ended because another process streams the slot */
    cdc_capture_report_t report; /* /status: status.c's alone */
    /* The slot this capture streamed from was dropped or invalidated (docs/capture.md,
     * "Slot lost"): the process exits with CDC_CAPTURE_EXIT_SLOT_LOST, or re-snapshots
     * with --slot-lost=resnapshot (then resnapshot is set while the snapshot runs: each
     * table's mirror is truncated before its rows). */
    bool slot_lost, resnapshot;
    /* The session adopts an existing slot that has no snapshot marker of this capture
     * (docs/capture.md, "An existing slot"): streamed from its position, every captured
     * table without an incremental snapshot of its own gets one (id adopt_id), and the
     * marker is written once they are all recorded (cdc_incremental_session). */
    bool adopting;
    char adopt_id[24];
    uint64_t adopt_lsn;
    cdc_capture_incremental_t incremental; /* incremental.c's alone */
    cdc_capture_request_t request;
    cdc_counter_t *m_adopted;
    cdc_counter_t *m_removed;
} cdc_capture_t;

/* Rebuilds the JSON of the capture's /status (main thread; at most once a second unless
 * force) and refreshes the slot's WAL retention every 5 s while connected. */
void cdc_capture_status_publish(cdc_capture_t *cap, bool force);
/* Sets up the /status document and its metric (before the HTTP server serves it), and
 * frees them (cdc_capture_free). */
void cdc_capture_status_init(cdc_capture_t *cap);
void cdc_capture_status_free(cdc_capture_t *cap);
/* The /status document the HTTP server serves. */
cdc_http_doc_t *cdc_capture_status_doc(cdc_capture_t *cap);

/* POST /snapshot?table=<schema>.<table> (HTTP thread): asks the main thread for an
 * incremental snapshot of a captured table (docs/capture.md, "Re-snapshot on demand") and
 * answers with its id (202), or an error naming the table (404, 409), or 503 when the
 * capture does not answer (not streaming). cdc_capture_request_init() first. */
void cdc_capture_http_snapshot(void *arg, const char *path, const char *query,
                               cdc_http_response_t *resp);
/* POST /tables?add=<schema>.<table> or ?remove= (HTTP thread): asks the main thread to add
 * the table to the publication, or drop it from it (docs/capture.md, "Adding a table"),
 * then to read the publication: 200 with the table's state, or an error (400, 409, 503). */
void cdc_capture_http_tables(void *arg, const char *path, const char *query,
                             cdc_http_response_t *resp);
void cdc_capture_request_init(cdc_capture_t *cap);
void cdc_capture_request_free(cdc_capture_t *cap);

/* Exit status of a capture whose slot was lost (--slot-lost=fail). */
#define CDC_CAPTURE_EXIT_SLOT_LOST 3

/* Longest wait of the capture's Kafka admin requests (topics, the registry's reads). */
#define CDC_CAPTURE_ADMIN_TIMEOUT_MS 30000

/* Sentinel opaque of schema-registry records (never a transaction id). */
#define CDC_CAPTURE_SCHEMA_OPAQUE ((void *)(uintptr_t)UINT64_MAX)
/* Delivery opaque of a chunk's marker (not waited for: a lost one only re-reads chunks). */
#define CDC_CAPTURE_MARKER_OPAQUE ((void *)(uintptr_t)(UINT64_MAX - 1))

/* Parses the --tables list into t/n (caller frees with cdc_source_tables_free()). */
cdc_err_t cdc_capture_parse_tables(const char *list, cdc_source_table_t **t, size_t *n,
                                   cdc_error_t *e);

/*
 * Runs the capture until *stop is set: sessions with reconnect and backoff. Returns
 * CDC_OK after a clean drain, or the non-retriable error (setup problem) that ended it.
 */
cdc_err_t cdc_capture_run(cdc_capture_t *cap, cdc_error_t *e);

void cdc_capture_free(cdc_capture_t *cap);

/* ---- shared between the stream's pieces, snapshot.c and registry.c ---- */

/* ---- txn.c: the current transaction ---- */

/* The transaction the events being produced belong to (id 0: none). */
const cdc_capture_txpos_t *cdc_capture_tx(const cdc_capture_t *cap);
/* Puts pos in place: the stream's Begin, or a transaction of the capture's own (save
 * cdc_capture_tx() before and put it back after). */
void cdc_capture_tx_set(cdc_capture_t *cap, const cdc_capture_txpos_t *pos);
/* The stream's transaction committed: remembered among the recent ones, none current. */
void cdc_capture_tx_end(cdc_capture_t *cap);
/* No transaction current (a new session). */
void cdc_capture_tx_reset(cdc_capture_t *cap);
/* Whether the current xid was seen visible to other sessions; it is now. */
bool cdc_capture_tx_visible(const cdc_capture_t *cap);
void cdc_capture_tx_mark_visible(cdc_capture_t *cap);
/* A transaction recently committed in the stream that snap does not see, or 0. */
uint32_t cdc_capture_tx_recent_unseen(const cdc_capture_t *cap, const cdc_chunk_snapshot_t *snap);

/* Table state by topic (created when missing); NULL on OOM. */
cdc_capture_table_t *cdc_capture_table_get(cdc_capture_t *cap, const char *schema,
                                           const char *name);

/*
 * Reports a table error of this table alone (printf-style message naming the table and
 * the fix): logs it, marks the table failed and not captured (its changes are counted
 * in cdc_capture_skipped_changes_total, not produced) and returns CDC_OK, so the
 * session goes on with the other tables.
 */
cdc_err_t cdc_capture_table_fail(cdc_capture_t *cap, cdc_capture_table_t *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills one column's mapping from its type. */
void cdc_capture_fill_col(cdc_capture_t *cap, cdc_schema_col_t *col, uint32_t oid, int32_t typmod,
                          int ndims, const char *type_name);

/*
 * Installs `doc` (moved in: the table owns it afterwards, on success and failure) as the
 * table's current schema: reuses the latest registered version when the shape is equal,
 * otherwise registers latest+1 on `<prefix>._schemas` and waits for Kafka's ack. Also
 * ensures the table's topic exists.
 */
cdc_err_t cdc_capture_set_schema(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_schema_doc_t *doc,
                                 cdc_error_t *e);

/* Frees the table's cached column names. */
void cdc_capture_table_free_names(cdc_capture_table_t *t);

/*
 * Ensures the topics of the session's captured tables (docs/capture.md, "Topics"), before
 * the session streams, so that no topic is created while changes of other tables wait.
 * A topic that cannot be created is logged, counted and shown in /status; it is tried
 * again at the table's first schema in the stream and by the next session (topics.c).
 */
void cdc_capture_topics_ensure(cdc_capture_t *cap);

/*
 * Ensures t's topic (--partitions partitions; an existing topic with another count is
 * used as it is) unless it is ready; a failure is noted (log, metric, /status) and
 * returned.
 */
cdc_err_t cdc_capture_topic_ensure(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e);

/* Reads `<prefix>._schemas` and `<prefix>._capture` (snapshot markers) from Kafka. */
cdc_err_t cdc_registry_load(cdc_capture_t *cap, cdc_error_t *e);

/* cdc_registry_load's reader of one `<prefix>._schemas` record: a table's document
 * becomes its latest version when newer than the one it has (records that are no
 * document of a table of this prefix are skipped). */
void cdc_registry_on_schema(cdc_capture_t *cap, const cdc_kafka_msg_t *m);

/* cdc_registry_load's reader of one `<prefix>._capture` record: this slot's snapshot
 * marker (set, or removed by a tombstone) and the tables' backfill markers; other
 * records are skipped. */
void cdc_registry_on_marker(cdc_capture_t *cap, const cdc_kafka_msg_t *m);

/*
 * Gives doc (its field ids assigned against t->latest) its version: t's latest
 * registered version when the shape is the same, else latest + 1 (1 for the first),
 * with backfill and resync from what the change did to the rows (cdc_schema_doc_rewrites_rows,
 * cdc_schema_doc_drops_rows) and from a backfill of the latest version that never
 * completed (it carries over). Sets t->backfill_pending. Returns true when doc is a new
 * version that must be registered.
 */
bool cdc_registry_number(cdc_capture_table_t *t, cdc_schema_doc_t *doc);

/* Records on `<prefix>._capture` that t's backfill of schema version `version` completed
 * (everything produced before is acked first); clears t->backfill_pending. */
cdc_err_t cdc_registry_mark_backfill(cdc_capture_t *cap, cdc_capture_table_t *t, int64_t version,
                                     cdc_error_t *e);

/* Records t's incremental snapshot as t->isnap says (progress, or done when not due) on
 * `<prefix>._capture`, once everything produced before is acked. */
cdc_err_t cdc_registry_mark_incremental(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e);

/* Sends the marker of one chunk of t's running snapshot (position after, rows done, done:
 * its last chunk) to `<prefix>._capture` without waiting: the caller sends it once the
 * chunk's rows, and everything before, are acked (incremental.c). */
cdc_err_t cdc_registry_mark_chunk(cdc_capture_t *cap, cdc_capture_table_t *t, const char *after,
                                  int64_t rows, bool done, cdc_error_t *e);

/* Records on `<prefix>._capture` that t left the publication (`removed/<topic>`, with
 * t->removed_lsn and t->removed_ms), acked. */
cdc_err_t cdc_registry_mark_removed(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e);

/* Removes t's `removed/<topic>` marker (a tombstone), acked: the table joined again and
 * the snapshot that re-reads it is recorded. */
cdc_err_t cdc_registry_clear_removed(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e);

/* Records that the slot's initial snapshot completed (or was skipped) at lsn. */
cdc_err_t cdc_registry_mark_snapshot(cdc_capture_t *cap, uint64_t lsn, const char *mode,
                                     cdc_error_t *e);

/*
 * Produces one event (copying key and value; no headers, the envelope names its schema), with
 * backpressure; ts_ms = the Kafka message timestamp (the envelope's ts_ms), tx = txtrack id,
 * lsn = the event's source.lsn. An event above --chunk-bytes goes as consecutive chunks of
 * its partition, each with the key and a `cdc.chunk` header (docs/events.md, "Chunked
 * events"), each tracked as one message for the confirmed LSN.
 */
cdc_err_t cdc_capture_produce(cdc_capture_t *cap, cdc_capture_table_t *t, int32_t partition,
                              const cdc_buf_t *key, const cdc_buf_t *value, int64_t ts_ms,
                              uint64_t tx, uint64_t lsn, cdc_error_t *e);

/*
 * The catalog's columns of t as JSON (*json malloc'ed; NULL when the table does not
 * exist), and the schema document they make (as a Relation message would, with attnum,
 * nullability, defaults and key flags; ids not assigned). The backfill and the schema
 * probe (docs/capture.md, "Backfill after DDL") use them.
 */
cdc_err_t cdc_capture_table_catalog(cdc_capture_t *cap, const cdc_capture_table_t *t, char **json,
                                    cdc_error_t *e);
/* t may be NULL (a probe names its table by relid: doc->relid): names are then "?". */
cdc_err_t cdc_capture_catalog_doc(cdc_capture_t *cap, const cdc_capture_table_t *t,
                                  const char *json, cdc_schema_doc_t *doc, cdc_error_t *e);

/*
 * Backfill after DDL (docs/capture.md): re-reads t's rows and emits them as op "r" with
 * source.snapshot "backfill" at position (current transaction's commit, lsn - 1), just
 * before the stream's change at `lsn`, under t's current schema version, then records
 * the marker. A version with `resync` (a partition detached) first emits a truncate with
 * source.snapshot "backfill" at lsn - 2, so that the mirror holds exactly the rows
 * re-read. Does nothing (t stays pending) while the catalog is ahead of that version.
 * keepalive (may be NULL) runs between chunks.
 */
cdc_err_t cdc_snapshot_backfill(cdc_capture_t *cap, cdc_capture_table_t *t, uint64_t lsn,
                                cdc_err_t (*keepalive)(cdc_capture_t *, cdc_error_t *),
                                cdc_error_t *e);

/* An event of t with op and what every event of the table carries (schema, database,
 * topic prefix, cached source head and column names); the caller fills in the rest. */
void cdc_capture_event_init(cdc_event_t *ev, const cdc_capture_t *cap, const cdc_capture_table_t *t,
                            char op);

/* Emits a keyless event of t without rows at position (current transaction's commit,
 * lsn) to every partition of its topic, in order with its rows: a truncate (op 't') or a
 * schema marker (op 's', docs/events.md); snapshot = source.snapshot. */
cdc_err_t cdc_capture_emit_marker(cdc_capture_t *cap, cdc_capture_table_t *t, char op, uint64_t lsn,
                                  const char *snapshot, cdc_error_t *e);

/* Builds t's schema document from the catalog, as pgoutput's Relation would (*doc: the
 * caller frees it on success), and appends the quoted column list to select to collist.
 * CDC_ERR_CONFIG when the table is gone or has no key. */
cdc_err_t cdc_snapshot_catalog_doc(cdc_capture_t *cap, cdc_capture_table_t *t,
                                   cdc_schema_doc_t *doc, cdc_buf_t *collist, cdc_error_t *e);

/* True when the catalog's columns (cdc_snapshot_catalog_doc) are doc's, in order. */
bool cdc_snapshot_same_columns(const cdc_schema_doc_t *cat, const cdc_schema_doc_t *doc);

/* Where and how read rows are emitted: the initial snapshot's, a backfill's, a chunk's. */
typedef struct cdc_snapshot_pos {
    uint64_t lsn, commit_lsn;
    uint32_t xid;
    int64_t ts;
    uint64_t tx;       /* txtrack transaction the events belong to */
    const char *label; /* source.snapshot; NULL: "true", and "last" for the last row */
    const char *id;    /* source.snapshot_id: the snapshot the rows belong to; NULL: none
                        * (a backfill after DDL) */
    bool count;        /* rows count in cdc_capture_snapshot_rows_total */
} cdc_snapshot_pos_t;

/*
 * Emits rows [from, to) of r (t's columns in t->doc's order) as op "r" events at pos;
 * with live, only the rows still live in that chunk buffer. `last` marks row to - 1 as
 * the table's last (snapshot "last", when pos has no label). vals: scratch for one row.
 */
cdc_err_t cdc_snapshot_emit_rows(cdc_capture_t *cap, cdc_capture_table_t *t,
                                 const cdc_pg_result_t *r, int from, int to,
                                 const cdc_chunk_t *live, bool last, const cdc_snapshot_pos_t *pos,
                                 cdc_pgo_value_t *vals, cdc_error_t *e);

/*
 * The id of the snapshot that first reads the tables of a slot whose consistent point (or,
 * for an adopted slot, whose confirmed position) is lsn, into buf: "s<lsn in hex>". An
 * initial snapshot that died with its session and the incremental snapshots that read its
 * tables again once the slot is adopted share it, so workers take the rows read twice as
 * one snapshot's (docs/worker.md, "Snapshot reads exactly once").
 */
void cdc_capture_snapshot_id(char *buf, size_t size, uint64_t lsn);

/* Runs the initial snapshot with the exported snapshot name at the consistent point. */
cdc_err_t cdc_snapshot_run(cdc_capture_t *cap, const char *snapshot_name, uint64_t consistent_lsn,
                           cdc_error_t *e);

#endif
