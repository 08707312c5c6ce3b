/*
 * Iceberg v2 tables in a Hadoop-catalog layout: the API the coordinator (the only
 * committer) and the workers use. A table lives at <warehouse>/<namespace>/<table>
 * with data/ and metadata/; metadata/vN.metadata.json is created without overwrite
 * (link() locally, If-None-Match: * on S3) and metadata/version-hint.text then holds
 * N as a bare integer. Losing that race returns CDC_ERR_CONFLICT (retriable): call
 * cdc_ice_table_refresh() and commit again. Files a failed commit wrote are removed.
 *
 * Each commit adds one snapshot (append, row delta, overwrite with removed files) and
 * merges small manifests so
 * that the manifest count stays bounded when committing every second
 * (commit.manifest-merge.enabled, commit.manifest.min-count-to-merge,
 * commit.manifest.target-size-bytes). A handle is not thread-safe; use one per thread.
 */
#ifndef CDC_ICEBERG_TABLE_H
#define CDC_ICEBERG_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/metadata.h"
#include "common/iceberg/storage.h"
#include "common/iceberg/types.h"

/* Summary keys the pipeline stores in every snapshot it commits. */
#define CDC_ICE_SUMMARY_JOB "cdc.job"
#define CDC_ICE_SUMMARY_CHECKPOINT "cdc.checkpoint-id"
#define CDC_ICE_SUMMARY_OFFSETS "cdc.offsets"
#define CDC_ICE_SUMMARY_TERM "cdc.term" /* the leader term that committed it (fencing) */

typedef struct cdc_ice_table cdc_ice_table_t;

/*
 * "<warehouse>/<namespace>/<name>" without a doubled slash; newly allocated (caller
 * frees), NULL on allocation failure.
 */
char *cdc_ice_table_location(const char *warehouse, const char *ns, const char *name);

/*
 * Creates a table with format-version 2, the schema (with its identifier-field-ids;
 * schema id 0 is used, field ids as given) and properties (may be NULL), as
 * metadata/v1.metadata.json. CDC_ERR_EXISTS if the table already exists. The
 * storage handle is borrowed and must outlive the table. On success *out is owned
 * by the caller (cdc_ice_table_close).
 */
cdc_err_t cdc_ice_table_create(cdc_storage_t *storage, const char *location,
                               const cdc_ice_schema_t *schema, const cdc_ice_props_t *props,
                               cdc_ice_table_t **out, cdc_error_t *e);

/*
 * Loads the latest version: reads version-hint.text, then probes vN+1, vN+2, ...
 * (a committer may have died between the two writes). CDC_ERR_NOT_FOUND when there
 * is no table at location.
 */
cdc_err_t cdc_ice_table_load(cdc_storage_t *storage, const char *location, cdc_ice_table_t **out,
                             cdc_error_t *e);

/* Loads the table, creating it with schema/props when it does not exist yet. */
cdc_err_t cdc_ice_table_open(cdc_storage_t *storage, const char *location,
                             const cdc_ice_schema_t *schema, const cdc_ice_props_t *props,
                             cdc_ice_table_t **out, cdc_error_t *e);

/* Reloads the latest version (after CDC_ERR_CONFLICT); when the latest version is still
 * the loaded one, only checks that (no metadata file is parsed). */
cdc_err_t cdc_ice_table_refresh(cdc_ice_table_t *t, cdc_error_t *e);

void cdc_ice_table_close(cdc_ice_table_t *t);

/* The loaded metadata (owned by t, valid until the next refresh or commit). */
const cdc_ice_metadata_t *cdc_ice_table_metadata(const cdc_ice_table_t *t);
/* The loaded metadata version N (vN.metadata.json). */
int64_t cdc_ice_table_version(const cdc_ice_table_t *t);
/* The table location (owned by t). */
const char *cdc_ice_table_get_location(const cdc_ice_table_t *t);

/*
 * One commit. data_files and delete_files are borrowed (only read). summary (may
 * be NULL) adds caller keys to the snapshot summary, e.g. cdc.job,
 * cdc.checkpoint-id, cdc.offsets. Files must already be in storage. Each file names
 * one of the table's partition specs (spec_id) with one value per field of it, and
 * one of its sort orders (CDC_ERR_INVALID otherwise); an equality delete file in the
 * unpartitioned spec 0 applies to the whole table, one in a partitioned spec only to
 * data files of the same spec and partition.
 */
typedef struct cdc_ice_commit {
    const cdc_ice_data_file_t *data_files;
    size_t ndata_files;
    const cdc_ice_data_file_t *delete_files; /* equality deletes (content 2) */
    size_t ndelete_files;
    const cdc_ice_props_t *summary;
    int64_t timestamp_ms; /* 0 = now */
    /*
     * Optional file removal (e.g. a TRUNCATE): every live data or delete file of the
     * parent snapshot for which remove(file, remove_arg) returns true is removed by this
     * snapshot (its manifest entry is rewritten with status DELETED). Evaluated again on
     * every attempt, against the snapshot the commit actually replaces. NULL = none.
     */
    bool (*remove)(const cdc_ice_data_file_t *file, void *remove_arg);
    void *remove_arg;
    /*
     * A rewrite (table maintenance, docs/iceberg.md "Table maintenance"): > 0 gives the
     * added files this data sequence number (the sequence number of the snapshot the
     * rewrite read) instead of the new snapshot's, so that equality deletes committed
     * since still apply to their rows; the operation is "replace". At most the table's
     * last-sequence-number (CDC_ERR_INVALID otherwise).
     */
    int64_t data_sequence_number;
    /* > 0: the commit fails with CDC_ERR_STALE (nothing written stays) unless remove()
     * matches exactly this many live files: a rewrite whose inputs changed meanwhile (a
     * TRUNCATE removed some) must not be committed. */
    size_t expect_removed;
    /* NULL-terminated summary keys copied from the parent snapshot when it has them and
     * summary does not set them (a rewrite keeps cdc.checkpoint-id, cdc.offsets, ...). */
    const char *const *keep_parent_keys;
    /*
     * Several commits in one snapshot (the coordinator's group commit of several epochs,
     * docs/iceberg.md "Group commits"): seq_span > 1 gives the snapshot the sequence
     * number last-sequence-number + seq_span, and each added file the data sequence
     * number last-sequence-number + its entry of data_seqs / delete_seqs (1..seq_span;
     * NULL: seq_span for every file). A later part's equality deletes then apply to an
     * earlier part's rows exactly as they would from snapshots of their own. 0 or 1:
     * one part (the arrays are ignored). Not with data_sequence_number.
     */
    int64_t seq_span;
    const int64_t *data_seqs, *delete_seqs;
} cdc_ice_commit_t;

/*
 * Commits one snapshot from c: "append" without deletes or removals, "overwrite" with
 * data and deletes (row delta) or data and removed files, "delete" with deletes or
 * removals only, "replace" for a rewrite (data_sequence_number > 0). Removed files are counted in
 * the summary (deleted-data-files, deleted-records, removed-delete-files, removed-equality-deletes,
 * removed-files-size) and subtracted from the totals. Data files get sequence number
 * last-sequence-number + 1 through inheritance, so this snapshot's equality deletes
 * apply to rows of earlier snapshots only. Returns CDC_ERR_CONFLICT when another
 * committer created the next version first (t is unchanged; refresh and retry).
 * On success t holds the new version and *snapshot_id (may be NULL) the new id.
 */
cdc_err_t cdc_ice_table_commit(cdc_ice_table_t *t, const cdc_ice_commit_t *c, int64_t *snapshot_id,
                               cdc_error_t *e);

/* Shorthands for cdc_ice_table_commit(). */
cdc_err_t cdc_ice_table_append(cdc_ice_table_t *t, const cdc_ice_data_file_t *files, size_t n,
                               const cdc_ice_props_t *summary, int64_t *snapshot_id,
                               cdc_error_t *e);
cdc_err_t cdc_ice_table_row_delta(cdc_ice_table_t *t, const cdc_ice_data_file_t *data, size_t ndata,
                                  const cdc_ice_data_file_t *deletes, size_t ndeletes,
                                  const cdc_ice_props_t *summary, int64_t *snapshot_id,
                                  cdc_error_t *e);

/*
 * Schema change: adds an optional column (field->id is ignored and assigned as
 * last-column-id + 1; field->required must be false). A new schema id becomes
 * current. *field_id (may be NULL) receives the new id. CDC_ERR_EXISTS if a column
 * of that name exists; CDC_ERR_CONFLICT as for commits.
 */
cdc_err_t cdc_ice_table_add_column(cdc_ice_table_t *t, const cdc_ice_field_t *field,
                                   int32_t *field_id, cdc_error_t *e);

/*
 * Schema change by field id: makes `want` (its fields, ids and names as given) the
 * current schema, and sets `props` (may be NULL) in the same commit. A field id the
 * table had before must keep its type or take an Iceberg promotion of its latest type
 * (cdc_ice_type_promotable()), else CDC_ERR_INVALID and nothing changes; a rename or a
 * drop is free (dropped fields stay in the older schemas). New fields are added as
 * optional, a required field may become optional and never the reverse, identifier
 * fields are those of `want` that are required. An equal schema of the table's history
 * is made current again instead of a new one. *changed (may be NULL) tells whether the
 * current schema changed. CDC_ERR_CONFLICT as for commits.
 */
cdc_err_t cdc_ice_table_set_schema(cdc_ice_table_t *t, const cdc_ice_schema_t *want,
                                   const cdc_ice_props_t *props, bool *changed, cdc_error_t *e);

/*
 * Adds an earlier schema to the table's history without making it current: the schema
 * of files written before a change the table skipped (a column added and dropped again
 * between two schemas the table took), so their fields are the table's. Each known field
 * id's type must promote to its newest type (CDC_ERR_INVALID otherwise); an equal schema
 * already there is not added again. *added (may be NULL) tells whether one was added.
 */
cdc_err_t cdc_ice_table_add_past_schema(cdc_ice_table_t *t, const cdc_ice_schema_t *want,
                                        bool *added, cdc_error_t *e);

/*
 * Checks that files written with `file_schema` read correctly in the table: each of its
 * field ids is a field of the table's history, and its type is that field's type in the
 * current schema or promotable to it (the field's latest type when it was dropped).
 * CDC_ERR_INVALID names the first field that does not fit.
 */
cdc_err_t cdc_ice_table_check_schema(const cdc_ice_table_t *t, const cdc_ice_schema_t *file_schema,
                                     cdc_error_t *e);

/*
 * Declares the table's layout (a metadata-only commit when it changes): partition_by
 * and sort_by are declarations as partition.h describes ("bucket[16](id), day(ts)";
 * "region, id desc"), parsed against the current schema; NULL or "" = unpartitioned /
 * unsorted, i.e. spec 0 / order 0 again. A spec (order) of the table with the same
 * fields becomes the default again; otherwise a new one is added with spec id max + 1
 * and partition field ids from last-partition-id + 1 (order id max + 1). Files written
 * for earlier specs stay where they are. *changed (may be NULL) tells whether a default
 * changed. CDC_ERR_INVALID names the bad term or column (nothing changes);
 * CDC_ERR_CONFLICT as for commits.
 */
cdc_err_t cdc_ice_table_set_layout(cdc_ice_table_t *t, const char *partition_by,
                                   const char *sort_by, bool *changed, cdc_error_t *e);

/* The default partition spec and sort order (owned by t, valid until the next refresh or
 * commit): what new files are written for. */
const cdc_ice_partition_spec_t *cdc_ice_table_default_spec(const cdc_ice_table_t *t);
const cdc_ice_sort_order_t *cdc_ice_table_default_sort_order(const cdc_ice_table_t *t);

/* Sets table properties (a metadata-only commit); CDC_ERR_CONFLICT as for commits. */
cdc_err_t cdc_ice_table_set_properties(cdc_ice_table_t *t, const cdc_ice_props_t *props,
                                       cdc_error_t *e);

/*
 * Summary value of a snapshot (-1 = current snapshot), or NULL. The pointer is owned
 * by t and valid until the next refresh or commit.
 */
const char *cdc_ice_table_snapshot_property(const cdc_ice_table_t *t, int64_t snapshot_id,
                                            const char *key);

/* Id of the snapshot committed for (job, checkpoint_id), or -1 if there is none. */
int64_t cdc_ice_table_find_checkpoint(const cdc_ice_table_t *t, const char *job,
                                      int64_t checkpoint_id);

/* Highest cdc.checkpoint-id committed by job, or -1. */
int64_t cdc_ice_table_last_checkpoint(const cdc_ice_table_t *t, const char *job);

/*
 * Every location the retained table state references: metadata files (current and
 * metadata-log), version-hint.text, manifest lists, manifests, data and delete files
 * of all retained snapshots. Anything else under <location>/ is an orphan. The
 * caller owns *locations (cdc_storage_list_free).
 */
cdc_err_t cdc_ice_table_referenced_files(cdc_ice_table_t *t, char ***locations, size_t *n,
                                         cdc_error_t *e);

/*
 * Expires snapshots: removes from the metadata every snapshot older than
 * older_than_ms (epoch ms; -1 = now - history.expire.max-snapshot-age-ms, default 5
 * days) except the current one and the min_keep newest (-1 =
 * history.expire.min-snapshots-to-keep, default 1), commits that (CDC_ERR_CONFLICT as
 * for commits), then deletes manifest lists, manifests and data files that no
 * retained snapshot references any more. *expired (may be NULL) receives the count.
 * Call it periodically when committing every second, or the metadata file grows
 * without bound. cdc_ice_table_last_checkpoint() stays correct across expiry;
 * cdc_ice_table_find_checkpoint() only sees retained snapshots.
 */
cdc_err_t cdc_ice_table_expire_snapshots(cdc_ice_table_t *t, int64_t older_than_ms,
                                         int64_t min_keep, size_t *expired, cdc_error_t *e);

/*
 * cdc_ice_table_expire_snapshots without the deletes: the files no retained snapshot
 * references any more are returned in *unreferenced (*nunreferenced; the caller frees them
 * with cdc_storage_list_free) for cdc_ice_table_delete_files, so that a caller holding a
 * lock over the expiry's commit deletes them after releasing it.
 */
cdc_err_t cdc_ice_table_expire_snapshots_deferred(cdc_ice_table_t *t, int64_t older_than_ms,
                                                  int64_t min_keep, size_t *expired,
                                                  char ***unreferenced, size_t *nunreferenced,
                                                  cdc_error_t *e);
/* Deletes files of t's storage (best effort: a failure is logged, orphan cleanup retries). */
void cdc_ice_table_delete_files(cdc_ice_table_t *t, char *const *locations, size_t n);

/*
 * Live data and delete files of the current snapshot (with inherited sequence
 * numbers in the entries); the caller owns *entries (cdc_ice_manifest_entries_free
 * from manifest.h, passed as void to keep this header small).
 */
typedef struct cdc_ice_live_file {
    cdc_ice_data_file_t file; /* owned */
    int64_t sequence_number;
    int64_t snapshot_id;
} cdc_ice_live_file_t;
cdc_err_t cdc_ice_table_live_files(cdc_ice_table_t *t, cdc_ice_live_file_t **files, size_t *n,
                                   cdc_error_t *e);
void cdc_ice_live_files_free(cdc_ice_live_file_t *files, size_t n);

/* ---- rewrites (table maintenance: docs/iceberg.md, "Table maintenance") ---------------- */

/* Default target size of a rewrite's files. */
#define CDC_ICE_REWRITE_TARGET_DEFAULT (128LL * 1024 * 1024)

typedef struct cdc_pq_options cdc_pq_options_t;

typedef struct cdc_ice_rewrite_options {
    int64_t target_file_bytes;       /* a file is closed past this size; <= 0: the default */
    const cdc_pq_options_t *parquet; /* NULL: the writer's defaults */
    const char *tag;                 /* name tag of the new files (cdc_ice_data_file_location) */
    /* Called after each input file with its size (rate limit, cancel): false cancels the
     * rewrite (CDC_ERR_CLOSED). NULL = none. */
    bool (*progress)(void *arg, int64_t bytes);
    void *progress_arg;
    /* Also write the equality deletes again, merged: one file of distinct keys per list of
     * equality ids and partition (for data files the rewrite leaves alone; see
     * coordinator/compact.h for when that is correct). */
    bool keep_deletes;
} cdc_ice_rewrite_options_t;

typedef struct cdc_ice_rewrite_stats {
    int64_t files_read, bytes_read, rows_read, rows_deleted;
    int64_t files_written, bytes_written, rows_written;
    int64_t deletes_written; /* rows of merged delete files (keep_deletes) */
} cdc_ice_rewrite_stats_t;

/*
 * Reads the data files data[0..ndata) of the loaded snapshot, oldest first, drops every row
 * an equality delete of deletes[0..ndeletes) applies to (the delete's data sequence number
 * is above the data file's, and the delete is table-wide (an unpartitioned spec) or in the
 * data file's partition), and writes the other rows, in the table's current schema
 * (promoted types, null for columns a file lacks), into new files of one partition each,
 * unsorted, closed past the target size, stored under the tag (with keep_deletes, also the
 * merged deletes, content EQUALITY_DELETES, in *out). Nothing is committed: the
 * caller commits *out with data_sequence_number = the sequence number of the snapshot the
 * files were listed from, removing the inputs, so that deletes committed since still apply
 * (cdc_ice_table_commit). On success *out (n files) is the caller's: after a failed commit
 * cdc_ice_rewrite_discard() deletes and frees them, else cdc_ice_data_files_free(). On
 * failure the files written so far are deleted.
 */
cdc_err_t cdc_ice_table_rewrite(cdc_ice_table_t *t, const cdc_ice_live_file_t *data, size_t ndata,
                                const cdc_ice_live_file_t *deletes, size_t ndeletes,
                                const cdc_ice_rewrite_options_t *o, cdc_ice_data_file_t **out,
                                size_t *nout, cdc_ice_rewrite_stats_t *st, cdc_error_t *e);
/* Deletes the files of a rewrite from storage and frees them (best effort). */
void cdc_ice_rewrite_discard(cdc_ice_table_t *t, cdc_ice_data_file_t *files, size_t n);
/* Frees an array of data files. */
void cdc_ice_data_files_free(cdc_ice_data_file_t *files, size_t n);

/*
 * A new, unique location for a data or delete file of the table at
 * table_location: "<table_location>/data/<tag>-<uuid>.parquet" (tag may be NULL, e.g.
 * "w2-p7-e42"). Newly allocated (caller frees), NULL on allocation failure.
 */
char *cdc_ice_data_file_location(const char *table_location, const char *tag);

/*
 * Stores a finished data or delete file through storage at a new location from
 * cdc_ice_data_file_location() (readers never see a partial file). On success
 * *location (caller frees) is where it went: put it into cdc_ice_data_file_t.path.
 */
cdc_err_t cdc_ice_data_file_put(cdc_storage_t *storage, const char *table_location, const char *tag,
                                const void *data, size_t len, char **location, cdc_error_t *e);

/* A random RFC 4122 version-4 UUID in canonical text form (37 bytes with NUL). */
void cdc_ice_uuid(char out[37]);

#endif
