/*
 * The PostgreSQL side of the capture. It owns two connections, a normal one (setup
 * checks, catalog queries, snapshot reads, heartbeats) and a `replication=database` one
 * (slot creation with an exported snapshot, the pgoutput stream, standby status
 * updates). Both force the session settings the event encoder relies on (DateStyle=ISO,
 * TimeZone=UTC, bytea_output=hex, extra_float_digits=1). Its pieces: source.c
 * (connections and the slot), setup.c (setup checks), catalog.c (catalog queries) and
 * replication.c (the stream). libpq itself is behind capture/pg.h, the only header of
 * the capture that knows it.
 */
#ifndef CDC_CAPTURE_SOURCE_H
#define CDC_CAPTURE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture/filter.h"
#include "capture/pg.h"
#include "common/cdcschema.h"
#include "common/err.h"

typedef struct cdc_source_table {
    char *schema;
    char *name;
    /* cdc_source_publication_tables: the oid of the pg_publication_rel row that puts the
     * table (or its published ancestor) in the publication, new at every ADD TABLE; 0
     * when a schema or FOR ALL TABLES publishes it */
    uint32_t membership;
} cdc_source_table_t;

typedef struct cdc_source {
    cdc_pg_t *sql;
    cdc_pg_t *repl;
    char *copybuf;           /* last buffer from cdc_pg_copy_read (freed on the next read) */
    uint64_t last_received;  /* highest LSN seen in XLogData or keepalive */
    uint64_t server_wal_end; /* server's WAL end from the last message */
    /* Read coalescing (set by the caller; 0 = off): when the received data is used up,
     * the socket holds nothing more, and the last wakeup brought only a trickle
     * (< CDC_SOURCE_COALESCE_MAX_BYTES), the next read first lets coalesce_ms pass
     * since that wakeup, so that a steady stream of small transactions costs one wakeup
     * per interval instead of one per message. A burst (backlog) never waits. */
    int coalesce_ms;
    /* Set by the caller: the stream is at the server's present (the last transaction
     * committed less than CDC_SOURCE_FRESH_MS ago). Reading a backlog never coalesces,
     * however the walsender's output happens to arrive. */
    bool caught_up;
    int64_t wake_us;    /* monotonic time of the last wakeup with data (0 = none) */
    size_t cycle_bytes; /* bytes of messages returned since that wakeup */
    char db[128];
} cdc_source_t;

/* A wakeup that brought at least this much is a burst: the next read does not wait. */
#define CDC_SOURCE_COALESCE_MAX_BYTES (64u * 1024)
/* A transaction that committed longer ago than this is backlog (see caught_up). */
#define CDC_SOURCE_FRESH_MS 1000

/* What cdc_source_read() returned. */
typedef enum cdc_source_event {
    CDC_SRC_NONE = 0,  /* nothing within the timeout */
    CDC_SRC_DATA,      /* an XLogData payload */
    CDC_SRC_KEEPALIVE, /* a primary keepalive; reply_requested says whether to answer now */
} cdc_source_event_t;

/* Opens the normal connection; password (NULL = the DSN's) overrides the DSN's.
 * CDC_ERR_UNAVAILABLE (retriable) when it cannot connect. */
cdc_err_t cdc_source_connect_sql(cdc_source_t *src, const char *dsn, const char *password,
                                 cdc_error_t *e);

/* Opens the replication connection (replication=database). */
cdc_err_t cdc_source_connect_repl(cdc_source_t *src, const char *dsn, const char *password,
                                  cdc_error_t *e);

/* Closes both connections and frees buffers; the struct can be reused. */
void cdc_source_close(cdc_source_t *src);

/* Setup checks and the settings they need. */
typedef struct cdc_source_setup {
    const char *slot;
    const char *publication;
    const cdc_source_table_t *tables; /* configured tables; may be empty = the publication's */
    size_t ntables;
    bool create_publication;
    /* Without tables: the publication's tables this filter leaves (NULL = all). */
    const cdc_table_filter_t *filter;
    /* Called for each table that cannot be captured (see below); NULL = log it. */
    void (*table_error)(void *arg, const char *schema, const char *name, const cdc_error_t *err);
    void *table_error_arg;
} cdc_source_setup_t;

/*
 * Checks wal_level, replication slot and sender limits, the REPLICATION privilege,
 * that each table exists, is readable and has a usable key, and that the publication
 * exists and contains the tables (creating it WITH (publish_via_partition_root = true),
 * or adding tables, when create_publication). A partitioned table is one table: it is
 * a member when the publication names it or publishes its partitions, and it needs the
 * publication's publish_via_partition_root (set when create_publication). Problems of
 * the whole capture fail with CDC_ERR_CONFIG (not retriable) and e->msg says what is
 * wrong and how to fix it. A problem of one table (missing, unreadable, no key, not in
 * the publication and not addable, partitioned without the option) is reported through
 * setup->table_error and the table is left out; only when no table is left is it an
 * error (the first table's). On success *out and *nout list the tables to capture
 * (caller frees with cdc_source_tables_free()).
 */
cdc_err_t cdc_source_check_setup(cdc_source_t *src, const cdc_source_setup_t *setup,
                                 cdc_source_table_t **out, size_t *nout, cdc_error_t *e);

void cdc_source_tables_free(cdc_source_table_t *t, size_t n);

/* ALTER PUBLICATION ... ADD TABLE (add) or DROP TABLE schema.name on the SQL connection;
 * *changed: false when the table already was (or was not) a member. A refusal (the role
 * does not own the publication or the table, no such table) is CDC_ERR_CONFIG with the
 * server's message; a lost connection CDC_ERR_UNAVAILABLE. */
cdc_err_t cdc_source_publication_alter(cdc_source_t *src, const char *publication, bool add,
                                       const char *schema, const char *name, bool *changed,
                                       cdc_error_t *e);

/* The publication's tables as the capture captures them (a partition as its published
 * root), on the SQL connection; *out for cdc_source_tables_free(), also on failure. */
cdc_err_t cdc_source_publication_tables(cdc_source_t *src, const char *publication,
                                        cdc_source_table_t **out, size_t *nout, cdc_error_t *e);

/* Whether the slot exists (in this database, with pgoutput), its confirmed_flush_lsn, and
 * whether it was invalidated (wal_status "lost": WAL it needs was removed, e.g. past
 * max_slot_wal_keep_size), and the PID of the walsender streaming it (0 = none). */
cdc_err_t cdc_source_slot_info(cdc_source_t *src, const char *slot, bool *exists,
                               uint64_t *confirmed, bool *lost, int *active_pid, cdc_error_t *e);

/*
 * Creates the logical slot on the replication connection. With export_snapshot the
 * snapshot name is written to snapshot (size >= 64) and stays usable until the next
 * command on the replication connection.
 */
cdc_err_t cdc_source_create_slot(cdc_source_t *src, const char *slot, bool export_snapshot,
                                 uint64_t *consistent_lsn, char *snapshot, cdc_error_t *e);

/* Drops the slot (waiting for a previous walsender to let go of it). */
cdc_err_t cdc_source_drop_slot(cdc_source_t *src, const char *slot, cdc_error_t *e);

/* START_REPLICATION with pgoutput proto_version 1, the publication and messages on. */
cdc_err_t cdc_source_start(cdc_source_t *src, const char *slot, const char *publication,
                           uint64_t start_lsn, cdc_error_t *e);

/*
 * Waits up to timeout_ms for one message of the stream (see coalesce_ms). DATA: *data and *len give
 * the pgoutput payload (valid until the next call) and *lsn the WAL position it came from.
 * KEEPALIVE: *reply_requested tells whether the server wants a status update now.
 * Errors: CDC_ERR_UNAVAILABLE (connection lost, retriable), CDC_ERR_PROTOCOL.
 */
cdc_err_t cdc_source_read(cdc_source_t *src, int timeout_ms, cdc_source_event_t *ev,
                          const uint8_t **data, size_t *len, uint64_t *lsn, bool *reply_requested,
                          cdc_error_t *e);

/* Sends a standby status update: written = received, flushed = applied = confirmed. */
cdc_err_t cdc_source_feedback(cdc_source_t *src, uint64_t confirmed, cdc_error_t *e);

/* Emits a transactional logical message (prefix "cdc.heartbeat") on the normal connection. */
cdc_err_t cdc_source_heartbeat(cdc_source_t *src, cdc_error_t *e);

/*
 * Leadership among captures of one slot: a session-level advisory lock on the normal
 * connection (key: hashtext('cdc-capture:' || slot)), held until that connection closes.
 * *got tells whether this connection holds it now; when not, *holder is the PostgreSQL
 * backend PID holding it (0 when unknown). Covers the whole session, the snapshot too,
 * while the slot itself is held only while it streams.
 */
cdc_err_t cdc_source_lock_slot(cdc_source_t *src, const char *slot, bool *got, int *holder,
                               cdc_error_t *e);

/* The slot's WAL retention: bytes from its restart_lsn to the current WAL position (what
 * PostgreSQL keeps for it) and safe_wal_size (bytes it may still fall behind before
 * max_slot_wal_keep_size invalidates it; -1 = no limit). CDC_ERR_NOT_FOUND without it. */
cdc_err_t cdc_source_slot_retention(cdc_source_t *src, const char *slot, int64_t *retained,
                                    int64_t *safe, cdc_error_t *e);

/* Ends the stream politely (CopyDone) so the walsender exits, reading what it still sends
 * for 2 s at most (a large transaction in flight); errors are ignored. Close the source
 * afterwards in any case. */
void cdc_source_stop(cdc_source_t *src);

/* The table's columns from the catalog as JSON (the form capture/snapshot.c reads);
 * *json is malloc'ed, NULL when there is no such table. quoted_name: "schema"."name". */
cdc_err_t cdc_source_catalog_json(cdc_source_t *src, const char *quoted_name, char **json,
                                  cdc_error_t *e);

/*
 * Writes the table's catalog columns (cdc_source_catalog_json's JSON) into the WAL as a
 * transactional logical message with `prefix`, under an ACCESS SHARE lock taken NOWAIT so
 * that no DDL of the table commits between the read and the message. CDC_ERR_CONFLICT
 * when the lock is held (a DDL runs): try again later.
 */
cdc_err_t cdc_source_schema_probe(cdc_source_t *src, const char *schema, const char *table,
                                  const char *prefix, cdc_error_t *e);

/*
 * Column facts the Relation message does not carry, from the current catalog by
 * attribute name, for the relation oid: nullability (attnotnull), identity (attnum) and
 * whether existing rows got a default (atthasdef, atthasmissing), and the declared array
 * dimensions (attndims). notnull, attnum, hasdef and ndims receive one entry per name in
 * names; attnum is 0 for a name the catalog no longer has (a later DDL renamed or
 * dropped it).
 */
/*
 * The Iceberg struct type of composite type `oid` as Iceberg's JSON text (nested field
 * ids 0, given by cdc_schema_doc_assign_ids()): a field per live attribute, in attnum
 * order, typed by m; a composite attribute a nested struct (up to 8 deep), an array
 * attribute a string (its PostgreSQL text). *json is NULL when oid is no composite type.
 */
cdc_err_t cdc_source_composite(cdc_source_t *src, uint32_t oid, const cdc_schema_mapping_t *m,
                               char **json, cdc_error_t *e);

cdc_err_t cdc_source_columns(cdc_source_t *src, uint32_t relid, const char *const *names, size_t n,
                             bool *notnull, int32_t *attnum, bool *hasdef, int *ndims,
                             cdc_error_t *e);

/*
 * Whether transaction xid (a decoded one) has finished in the sense that matters to a
 * catalog read: *finished when no backend holds its transaction lock any more, which it
 * releases only after it left the proc array, so every snapshot taken after sees its
 * commit. A commit record is flushed (and may be decoded and sent) before that: a
 * catalog read at a Relation message may otherwise see the catalog from before the
 * transaction's DDL (docs/capture.md, "Column identity").
 */
cdc_err_t cdc_source_xact_finished(cdc_source_t *src, uint32_t xid, bool *finished, cdc_error_t *e);

/*
 * For a partition: its top-most ancestor (pg_partition_root), as *root_oid, *schema and
 * *name, and that table's columns in their order (*cols, *ncols; generated columns left
 * out, as pgoutput leaves them out). *root_oid = 0 when relid is not a partition (or no
 * longer exists, or was detached). The caller frees the strings and the array.
 */
cdc_err_t cdc_source_partition_root(cdc_source_t *src, uint32_t relid, uint32_t *root_oid,
                                    char **schema, char **name, char ***cols, size_t *ncols,
                                    cdc_error_t *e);

/* Current WAL insert position (for lag metrics). */
cdc_err_t cdc_source_current_lsn(cdc_source_t *src, uint64_t *lsn, cdc_error_t *e);

#endif
