/*
 * The Iceberg commit of a recorded checkpoint (docs/design.md, "The epoch protocol", step 4): for
 * every table the epoch touched, first the schema updates the workers reported (a table is created
 * on first use), then one snapshot holding the epoch's data and equality-delete files with the
 * summary properties cdc.job, cdc.checkpoint-id, cdc.offsets and cdc.term. Right before each atomic
 * swap the table is read again and the epoch is skipped when a snapshot of this job already carries
 * a checkpoint id >= it; a table that already carries a higher cdc.term belongs to a newer leader
 * and the commit is refused (CDC_ERR_FENCED). A lost race (CDC_ERR_CONFLICT) is retried on fresh
 * metadata. Commits are therefore idempotent: a new leader simply commits `latest` again.
 *
 * The committer also keeps the pending file lists of large checkpoints in the warehouse
 * (<warehouse>/_cdc/<job>/pending/<epoch>.json) and removes orphan files.
 * Commits run on the commit thread of the coordinator's pipeline (pipeline.c), the rest on
 * its main thread; the committer's state is guarded for both (commit_int.h).
 */
#ifndef CDC_COORDINATOR_COMMIT_H
#define CDC_COORDINATOR_COMMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/options.h"
#include "common/err.h"
#include "coordinator/checkpoint.h"
#include "coordinator/staged_check.h"
#include "coordinator/table_stats.h"

typedef struct cdc_committer cdc_committer_t;

typedef struct cdc_committer_options {
    const char *warehouse; /* local directory or s3://bucket/prefix */
    const char *job;
    const cdc_s3_options_t *s3;         /* the warehouse's object store (NULL: none) */
    const char *partition_by, *sort_by; /* declared layouts (layout.h), may be NULL */
} cdc_committer_options_t;

typedef struct cdc_commit_result {
    int tables_committed; /* snapshots created */
    int tables_skipped;   /* already held the epoch */
    int schema_changes;   /* schema commits (incl. table creation) */
    int epochs_grouped;   /* records that joined another's snapshot (group commits) */
} cdc_commit_result_t;

/* A schema change the committer made (for /status): newest last. */
#define CDC_SCHEMA_CHANGES_KEPT 16
typedef struct cdc_schema_change {
    char table[256];
    int64_t source_version;
    int32_t schema_id; /* the table's Iceberg schema id afterwards */
    int64_t at_ms;     /* wall clock */
    char summary[512]; /* "added x(7); renamed v -> w(2); promoted a int -> long(3); ..." */
    bool versioned;    /* a type change that is no promotion made a new field */
} cdc_schema_change_t;

/* Copies up to max of the latest schema changes, oldest first; returns how many. */
size_t cdc_committer_schema_changes(cdc_committer_t *c, cdc_schema_change_t *out, size_t max);

/* A table's layout as applied by this committer (for barriers and /status). */
typedef struct cdc_table_layout {
    char table[256];
    bool applied;
    int32_t spec_id;    /* default partition spec; 0 = unpartitioned */
    char *spec_json;    /* that spec as in table metadata (NULL when unpartitioned) */
    int32_t order_id;   /* default sort order; 0 = unsorted */
    char *order_json;   /* that order as in table metadata (NULL when unsorted) */
    char *partition_by; /* the declarations applied (NULL = none) */
    char *sort_by;
    char error[512]; /* why the declarations were not applied ("" = they were) */
} cdc_table_layout_t;

/*
 * The layouts of all the tables committed to so far (there is no limit on their number),
 * in *out[0..*n): the array is the caller's (free()), the strings it points to stay
 * owned by the committer and valid until it is closed (a table's layout is applied once
 * per process). CDC_ERR_NOMEM with *out NULL and *n 0 when memory ran out.
 */
cdc_err_t cdc_committer_layouts(cdc_committer_t *c, cdc_table_layout_t **out, size_t *n);

/*
 * The statistics of all the tables after their last commit by this process
 * (table_stats.h), in the order first committed: cdc_table_stats_copy().
 */
cdc_err_t cdc_committer_table_stats(cdc_committer_t *c, cdc_table_stats_t **out, size_t *n);

/* Opens the warehouse. On success *out is owned by the caller (cdc_committer_close). */
cdc_err_t cdc_committer_open(cdc_committer_t **out, const cdc_committer_options_t *opt,
                             cdc_error_t *e);
void cdc_committer_close(cdc_committer_t *c);

/* Sets the leader term written as cdc.term and checked against the table (fencing). */
void cdc_committer_set_term(cdc_committer_t *c, uint64_t term);

/*
 * Commits rec to every table it touches (see above). rec is not modified. For a table
 * with truncates (rec->truncates), the same snapshot removes every live file the
 * truncating slots wrote before (identified by cdc_committer_file_partition) and adds
 * the epoch's files: Iceberg operation "overwrite" (or "delete" without new files).
 */
cdc_err_t cdc_committer_commit(cdc_committer_t *c, const cdc_checkpoint_t *rec,
                               cdc_commit_result_t *res, cdc_error_t *e);

/*
 * Commits the recorded checkpoints recs[0..nrecs) (in epoch order) together, as if each
 * were committed in turn by cdc_committer_commit, with one snapshot per table instead of
 * one per record and table (docs/iceberg.md, "Group commits"): each record's files get
 * the data sequence number of their place in the group, so its equality deletes apply to
 * the earlier records' rows. A table gets more than one snapshot only where a record
 * after the first carries a schema update or a truncate for it. The snapshot names the
 * last record it holds (cdc.checkpoint-id, cdc.offsets). Safe to repeat, like one
 * record's commit; recs are not modified. Called off the coordinator's loop thread
 * (pipeline.c), and by a new leader for the epochs its predecessor recorded.
 */
cdc_err_t cdc_committer_commit_group(cdc_committer_t *c, cdc_checkpoint_t *const *recs,
                                     size_t nrecs, cdc_commit_result_t *res, cdc_error_t *e);

/*
 * Slot that staged a data/delete file, from the worker's file name
 * "<job>-e<epoch>-p<P>-<kind>-<uuid>.parquet"; -1 when path is not a staged file of job.
 */
int cdc_committer_file_partition(const char *path, const char *job);

/*
 * Checks that every staged file of rec exists with the size its Ack gave, before the
 * checkpoint is recorded (docs/security.md, "The committer trusts no path"). On a file that
 * breaks it: CDC_ERR_PROTOCOL with *why CDC_STAGED_MISSING or CDC_STAGED_SIZE and a message
 * naming it; another error (storage unavailable) leaves *why CDC_STAGED_OK. One stat (local)
 * or HEAD (S3) per file.
 */
cdc_err_t cdc_committer_verify_files(cdc_committer_t *c, const cdc_checkpoint_t *rec,
                                     cdc_staged_reason_t *why, cdc_error_t *e);

/*
 * Writes rec's file list to its pending file and sets rec->files_path (owned by rec).
 * Use before recording a checkpoint whose record would be too large for etcd.
 */
cdc_err_t cdc_committer_put_pending(cdc_committer_t *c, cdc_checkpoint_t *rec, cdc_error_t *e);

/* Completes a record read from etcd: the offsets of its offsets base, when it names one
 * (offsets_base.h: a missing or altered base is CDC_ERR_CORRUPT), and the file list of
 * rec->files_path (none when files_path is NULL). Every record read back goes through it. */
cdc_err_t cdc_committer_load_pending(cdc_committer_t *c, cdc_checkpoint_t *rec, cdc_error_t *e);

/* Deletes pending files of epochs below keep_from (best effort). */
void cdc_committer_prune_pending(cdc_committer_t *c, uint64_t keep_from);

/*
 * Snapshot expiry for every table of this job: removes snapshots older than
 * now - retention_ms except the min_keep newest (the already-committed check reads the
 * highest cdc.checkpoint-id, which survives expiry) and deletes the files only expired
 * snapshots referenced. *expired gets the number of snapshots removed.
 */
cdc_err_t cdc_committer_expire(cdc_committer_t *c, int64_t retention_ms, int64_t min_keep,
                               size_t *expired, cdc_error_t *e);

/*
 * Orphan cleanup: deletes files under <table>/data/ of every table of this job that no
 * retained snapshot references, that are not in keep[0..nkeep) (sorted with strcmp: the
 * files of checkpoints not yet committed), and that are older than min_age_ms. *deleted
 * gets the count. Expiry and orphan cleanup run on the maintenance thread (maintenance.h)
 * while epochs commit: both take a copy of the table list.
 */
cdc_err_t cdc_committer_remove_orphans(cdc_committer_t *c, char *const *keep, size_t nkeep,
                                       int64_t min_age_ms, int *deleted, cdc_error_t *e);

/* For the maintenance thread (thread-safe): the leader term set last, the warehouse, the
 * job name, and copies of the names ("<ns>.<table>") and locations of the tables committed
 * to so far (both arrays freed with cdc_storage_list_free; returns how many). */
uint64_t cdc_committer_term(cdc_committer_t *c);
cdc_storage_t *cdc_committer_storage(cdc_committer_t *c);
const char *cdc_committer_job(const cdc_committer_t *c);
size_t cdc_committer_tables(cdc_committer_t *c, char ***names, char ***locations);

/*
 * Adds to the tables above those of the warehouse whose current snapshot this job
 * committed (summary cdc.job), so that a new leader maintains the job's tables from the
 * start, not only those an epoch commits to after it took over (a quiet table would
 * otherwise never be compacted or expired by it). Lists the warehouse: for the
 * maintenance thread, once per term. *found = tables added.
 */
cdc_err_t cdc_committer_discover(cdc_committer_t *c, size_t *found, cdc_error_t *e);

/* The lock of a table's commits (by location): held over a refresh and the swap, so that
 * the epoch commits and the maintenance thread's take turns instead of racing. */
void cdc_committer_table_lock(cdc_committer_t *c, const char *location);
void cdc_committer_table_unlock(cdc_committer_t *c, const char *location);

/* Notes a compaction of table (t holds the new version) in the table statistics. */
void cdc_committer_note_compaction(cdc_committer_t *c, const char *table, const cdc_ice_table_t *t,
                                   int64_t bytes_rewritten, int64_t files_rewritten);

#endif
