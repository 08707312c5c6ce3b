/*
 * Per-epoch staging for one partition slot. Accepted changes (deduped, TOAST
 * repaired) are collapsed per entity for the mirror table and appended for the
 * changelog table; at a barrier the epoch's content is written as Parquet files under
 * each table's data/ directory and described for the Ack:
 *   mirror    (`<ns>.<table>`):  data rows = final image of every key whose last change
 *             is not a delete; equality deletes (on the key) = every key that was live
 *             in state before its first change of the epoch. A key known to be new
 *             gets no delete; a key whose last change is a delete gets only the delete.
 *   changelog (`<ns>.<table>_changelog`): every change once, in offset order, with
 *             _op, _lsn, _commit_lsn, _tx_id, _source_ts, _kafka_partition,
 *             _kafka_offset and the after image (the before image for deletes).
 * The stage tracks the bytes it holds so the consumer can pause fetching past a limit.
 *
 * Encoding ahead (cdc_stage_set_encoding()): so that a barrier does not have to encode
 * a whole epoch, the stage encodes Parquet row groups while the epoch runs, on the
 * thread that adds changes, into in-memory files (compressed, counted in `bytes`):
 *   changelog: every `rows` changelog rows become a row group (they never change;
 *             fewer for wide rows, see CDC_STAGE_ENCODE_BYTES);
 *   mirror data: once `rows` + `rows`/4 entries are past the last encoded one, the
 *             oldest `rows` of them become a row group (the newest stay open since
 *             they are the likeliest to change again). A later change to an encoded
 *             entry drops the table's mirror encoding for the rest of the epoch (its
 *             file is then encoded whole at the barrier), so the waste is bounded.
 * At the barrier cdc_stage_write() encodes only the rest, writes the footer and
 * stores the file. A file always uses the table's latest schema of the epoch: a
 * schema change drops what was encoded with the older one (re-encoded from the
 * staged rows, which stay in memory until the stage is reset). A truncate drops the
 * mirror encoding with the entries. cdc_stage_reset() drops everything (an abandoned
 * epoch leaves no file: nothing is written before the barrier). Equality delete
 * files are always encoded at the barrier. The files' contents, row counts and
 * column statistics are the same as without encoding ahead; only the row-group
 * boundaries differ.
 */
#ifndef CDC_WORKER_STAGE_H
#define CDC_WORKER_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/hash.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/types.h"
#include "worker/decode.h"

typedef struct cdc_stage_entry {
    uint8_t *entity;
    size_t entity_len;
    bool needs_delete; /* live in state before the epoch's first change to it */
    bool deleted;      /* last change is a delete */
    uint32_t hash;     /* of entity: a growing table rehashes without reading keys */
    size_t last;       /* changelog index of the last change: its row is the final after
                        * image, or the before image (key) for deletes */
    /* Partition keys (cdc_stage_part_key(); NULL = spec 0, unpartitioned): of the final
     * row (its data file), and of the row before the epoch (its equality delete). */
    uint8_t *part, *old_part;
    size_t part_len, old_part_len;
} cdc_stage_entry_t;

typedef struct cdc_changelog_row {
    cdc_row_t row;
    char op;
    uint64_t lsn, commit_lsn;
    int64_t tx_id;
    int64_t source_ts_us;
    int32_t partition;
    int64_t offset;
    bool mirror_only; /* a backfill row (cdc_change_t.backfill): no changelog row */
    uint8_t *part;    /* partition key in the changelog table (NULL = spec 0) */
    size_t part_len;
} cdc_changelog_row_t;

typedef struct cdc_stage_table {
    char *key; /* "<length of ns>:<ns>.<table>": its key in the stage's by_table */
    char *ns, *table;
    const cdc_source_schema_t *schema; /* latest schema seen this epoch: files use it */
    cdc_stage_entry_t *entries;        /* first-change order */
    size_t nentries, cap;
    size_t *slots; /* open-addressing index into entries (+1; 0 = empty) */
    size_t nslots;
    cdc_changelog_row_t *changelog;
    size_t nchangelog, clcap;
    size_t nmirror_only; /* changelog[] rows that are mirror_only */
    bool truncated;      /* a TRUNCATE was staged this epoch: entries are post-truncate only */
    bool floor;          /* the last one was a floor (cdc_change_t.floor), at this position: */
    uint64_t floor_commit_lsn, floor_lsn;
    bool partitioned; /* a row has a partition key or the table a sort order: files are
                       * written at the barrier (no encoding ahead), per partition and
                       * sorted */
    /* sort orders of the mirror's data files ([0]) and of the changelog's ([1]) as of
     * the latest change staged (order_id 0: unsorted); a sorted table is also written at
     * the barrier */
    cdc_ice_sort_order_t orders[2];
    /* encoding ahead (stage_encode.c; NULL = nothing encoded yet) */
    struct cdc_stage_enc *enc_cl;   /* changelog rows [0, enc_cl->done) */
    struct cdc_stage_enc *enc_data; /* mirror data of entries [0, enc_data->done) */
    bool enc_data_off;              /* an encoded entry changed: no more this epoch */
    size_t row_bytes;               /* staged bytes of the changelog's rows (row width) */
} cdc_stage_table_t;

/* The mirror row of entry en of t: the image of its last change (not a copy). */
static inline const cdc_row_t *cdc_stage_entry_row(const cdc_stage_table_t *t,
                                                   const cdc_stage_entry_t *en)
{
    return &t->changelog[en->last].row;
}

typedef struct cdc_stage {
    uint32_t partition;
    uint64_t epoch;
    cdc_stage_table_t *tables;
    size_t ntables, tables_cap;
    /* key -> index + 1 in tables: every change finds its table without a scan (a job may
     * have thousands). Moves with the stage to the finalizer at a cut (barrier.c), which
     * reads tables[] only; the slot's stage starts empty again. */
    cdc_strmap_t by_table;
    const cdc_source_schema_t *last_schema; /* the last change's schema and its table */
    size_t last_index;
    size_t bytes; /* approximate memory held (encoded row groups included) */
    uint64_t changes;
    size_t enc_rows; /* encoding ahead: rows per row group; 0 = all at the barrier */
    int enc_codec;   /* cdc_pq_codec_t of the row groups encoded ahead */
} cdc_stage_t;

/* Rows per row group encoded ahead by the worker (see above; bench: benchmarks/stage),
 * fewer (at least 64) for rows wider than CDC_STAGE_ENCODE_BYTES / CDC_STAGE_ENCODE_ROWS
 * staged bytes, so that a row group's buffers in the writer stay around that size. */
#define CDC_STAGE_ENCODE_ROWS 4096
#define CDC_STAGE_ENCODE_BYTES (2u << 20)

/* An empty stage; encoding ahead is off until cdc_stage_set_encoding(). */
void cdc_stage_init(cdc_stage_t *s, uint32_t partition, uint64_t epoch);
/*
 * Turns encoding ahead on (rows > 0: row groups of that many rows, compressed with
 * codec, a cdc_pq_codec_t) or off (0). The setting survives cdc_stage_reset(). The
 * barrier's cdc_stage_write() uses what was encoded ahead only when its compression
 * option is the same codec (else it encodes the whole file itself).
 */
void cdc_stage_set_encoding(cdc_stage_t *s, int codec, size_t rows);
/* Drops everything staged, including row groups encoded ahead (abandoned epoch or
 * after the files were written). */
void cdc_stage_reset(cdc_stage_t *s, uint64_t epoch);
void cdc_stage_free(cdc_stage_t *s);

/*
 * Adds an accepted change. live_before = the entity had a row in state before this
 * change (dedup's image != NULL). Moves c's row images into the stage on success
 * (c keeps its entity and must still be cleared by the caller).
 *
 * A truncate (op 't') drops the table's mirror entries staged so far this epoch (they
 * predate it; the changelog keeps its rows) and marks the table truncated, which the
 * Ack reports so that the coordinator removes the slot's earlier mirror files. Every
 * slot sees the capture's truncate; only partition 0 adds it to the changelog (one
 * `_op = 't'` row with null row columns), so the changelog holds it once. A floor
 * (Debezium's truncate, in one partition) is added by the slot that meets it, and marks
 * the table (floor, floor_*) for the Ack's TableFloor.
 *
 * A change with changelog_only set (before its table's floor, dedup.h) adds its
 * changelog row only: the mirror entries are untouched (nothing at all for a backfill
 * row).
 */
/*
 * Layout of a change (NULL: every file of the table unpartitioned and unsorted). A row's
 * partition is fixed when it is staged, under the spec its table had then (the worker
 * learns specs from barriers, layout.h), and recorded in state with the row, so that the
 * equality delete of a later change reaches the file the row went to, also when that
 * change moves the row to another partition (docs/worker.md, "Partitioned tables").
 */
typedef struct cdc_stage_parts {
    const uint8_t *mirror; /* key of the change's row in the mirror (NULL = spec 0) */
    size_t mirror_len;
    const uint8_t *old; /* key of the row before the change, from state (NULL = spec 0:
                         * the delete applies to the whole table) */
    size_t old_len;
    const cdc_ice_partition_spec_t *changelog; /* spec of the changelog table, or NULL */
    /* sort orders of the mirror and of the changelog (NULL: unsorted): each file of the
     * epoch is written sorted by the table's latest order and names it (sort_order_id) */
    const cdc_ice_sort_order_t *mirror_order, *changelog_order;
} cdc_stage_parts_t;

cdc_err_t cdc_stage_add(cdc_stage_t *s, cdc_change_t *c, bool live_before,
                        const cdc_stage_parts_t *parts, cdc_error_t *e);

/* A schema marker (CDC_OP_SCHEMA): the table is staged with c's schema, if newer than the
 * one it has, and no rows, so that the epoch's Ack carries the schema (a DDL that no change
 * followed still reaches the tables). */
cdc_err_t cdc_stage_schema(cdc_stage_t *s, const cdc_change_t *c, cdc_error_t *e);

/*
 * Partition key of a row under spec: the spec id and the tuple of transformed values
 * (cl: the changelog row, whose metadata columns _op, _lsn, _source_ts, ... a changelog
 * spec may name; NULL for the mirror). A source column the row lacks is null. *key is
 * malloc'ed (caller frees). cdc_stage_part_key_decode() turns a key into a data file's
 * spec_id and partition values (caller frees with cdc_ice_part_values_free()).
 */
cdc_err_t cdc_stage_part_key(const cdc_ice_partition_spec_t *spec, const cdc_row_t *r,
                             const cdc_changelog_row_t *cl, uint8_t **key, size_t *len,
                             cdc_error_t *e);
bool cdc_stage_part_key_decode(const uint8_t *key, size_t len, int32_t *spec_id,
                               cdc_ice_part_value_t **values, size_t *n);

/* Number of mirror data rows / equality deletes a table will produce. */
void cdc_stage_table_counts(const cdc_stage_table_t *t, size_t *data_rows, size_t *deletes);

/* ---- writing the epoch's files ------------------------------------------------------ */

#include "common/iceberg/storage.h"

typedef enum cdc_stage_kind {
    CDC_STAGE_MIRROR_DATA = 0,
    CDC_STAGE_MIRROR_DELETES,
    CDC_STAGE_CHANGELOG,
} cdc_stage_kind_t;

/* Encoding-ahead progress of table t for kind (CHANGELOG: changelog rows; MIRROR_DATA:
 * entries; 0 when nothing is encoded) and, when schema is not NULL, the source schema
 * it was encoded with (NULL when none). For tests and debugging. */
size_t cdc_stage_encoded(const cdc_stage_table_t *t, cdc_stage_kind_t kind,
                         const cdc_source_schema_t **schema);

/* One written file: Iceberg table name ("<ns>.<table>" or "<ns>.<table>_changelog") and
 * its descriptor (owned; release with cdc_stage_files_free()). */
typedef struct cdc_stage_file {
    char *table;
    cdc_stage_kind_t kind;
    cdc_ice_data_file_t df;
    char *schema_json; /* the table's Iceberg schema this file was written with */
} cdc_stage_file_t;

typedef struct cdc_stage_write_options {
    const char *warehouse;
    const char *job;
    int compression; /* cdc_pq_codec_t; 0 = none */
} cdc_stage_write_options_t;

/*
 * Writes the epoch's files (mirror data, mirror equality deletes, changelog) for every
 * table, durably (fsync'd locally, or uploaded), under each table's data/ directory with
 * names carrying the job, epoch and partition. Each file is assembled in memory (the
 * row groups encoded ahead, then the rest and the footer); then all are written (local
 * files: created, written and their writeback started before the first fsync, so
 * that the fsyncs overlap) or uploaded.
 * On success *files (caller frees with cdc_stage_files_free()) lists them; on failure
 * files already written are removed and nothing is returned. The staged rows stay
 * (the stage is not reset) but the row groups encoded ahead are used up either way: a
 * retry encodes everything.
 */
cdc_err_t cdc_stage_write(cdc_stage_t *s, cdc_storage_t *storage,
                          const cdc_stage_write_options_t *o, cdc_stage_file_t **files,
                          size_t *nfiles, cdc_error_t *e);
void cdc_stage_files_free(cdc_stage_file_t *files, size_t n);

/* Iceberg schema of a table kind for a source schema (caller frees with
 * cdc_ice_schema_free(); deletes: key columns only). Mirror data and changelog of a
 * table with a decimal or TOAST-able column also have `_cdc_special` (catalog.h). */
cdc_err_t cdc_stage_ice_schema(const cdc_source_schema_t *s, cdc_stage_kind_t kind,
                               cdc_ice_schema_t *out, cdc_error_t *e);
/* Whether s has a column (live or retired) whose value `_cdc_special` can name: a decimal
 * (NaN, infinities) or a type PostgreSQL can TOAST (an unchanged value of a row older than
 * the capture); its tables have `_cdc_special`. */
bool cdc_stage_has_special(const cdc_source_schema_t *s);
#endif
