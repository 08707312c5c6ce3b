/*
 * Compaction of one table (docs/iceberg.md, "Table maintenance"): the coordinator plans,
 * rewrites and commits it, on the maintenance thread (maintenance.h), never on the loop
 * that drives barriers and epoch commits.
 *
 * The unit of a rewrite is one Kafka partition of one table: every file a worker stages
 * is written for one partition (its name "<job>-e<E>-p<P>-..." says which), and a key
 * never leaves its partition, so the equality deletes of partition P only ever delete
 * rows of P's data files. For a partition the plan reads the current snapshot S (data
 * sequence number N) and takes:
 *   - the data files to rewrite: the small ones (below 3/4 of the target size) and every
 *     one an equality delete of P applies to (the delete's sequence number is higher);
 *   - every equality delete of P in S: once those data files are rewritten, none of them
 *     applies to a data file of S any more (the files left alone are newer than all of
 *     them), and new files committed since S are newer than N.
 * The rewrite (cdc_ice_table_rewrite) drops the deleted rows and writes the rest into
 * files of the target size. The commit is a "replace" snapshot that removes exactly the
 * planned inputs and adds the new files with data sequence number N, so an equality
 * delete an epoch committed after S (sequence number > N) still applies to the rewritten
 * rows: an update, a delete or a re-insert of a key while its row is being compacted
 * ends as the source says. A commit race (an epoch committed meanwhile) is retried on
 * fresh metadata; a rewrite whose inputs are no longer all live (a TRUNCATE removed some)
 * is dropped and its files deleted, never committed. A changelog (append only, no
 * deletes) is bin-packed the same way, its small files only.
 *
 * Most rewrites are minor: they keep the large files as they are and merge the
 * partition's equality deletes into one file, so the bytes rewritten stay close to what
 * the epochs added; a major one (past the delete ratio, asked for by cdcctl compact, or
 * when a delete is not newer than every large file) applies the deletes to the large
 * files for good. compact.c explains why the merged deletes are correct.
 */
#ifndef CDC_COORDINATOR_COMPACT_H
#define CDC_COORDINATOR_COMPACT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/table.h"
#include "coordinator/commit.h"

typedef struct cdc_compact_policy {
    int64_t min_files;        /* a partition with more live files than this is compacted */
    int64_t delete_ratio_pct; /* ... or with this many equality-delete rows per 100 data rows */
    int64_t max_age_ms;       /* ... or whose oldest small file is older (0 = no age rule) */
    int64_t idle_ms;      /* ... or none of whose files is younger, while it holds deletes or two
                           * small files: then a major rewrite (0 = no idle rule; compact.c) */
    int64_t target_bytes; /* size of the files written */
} cdc_compact_policy_t;

/* What one compaction of a table did. */
typedef struct cdc_compact_result {
    int partitions; /* rewrites committed */
    int minors;     /* of which minor: large files kept, deletes merged (compact.c) */
    int dropped;    /* rewrites dropped: their inputs changed meanwhile */
    int conflicts;  /* rewrites that lost every commit race (retried next round) */
    int64_t files_removed, files_added;
    int64_t bytes_read, bytes_written; /* input files read, files written */
    int64_t rows_deleted;              /* rows equality deletes removed for good */
} cdc_compact_result_t;

typedef struct cdc_compact_ctx {
    cdc_committer_t *committer; /* its table lock is held over each commit (may be NULL) */
    const char *job;
    uint64_t term; /* leader term: a table committed by a newer one is left alone (FENCED) */
    const cdc_compact_policy_t *policy;
    bool force; /* every partition with something to gain, whatever the policy says */
    /* after each input file read (rate limit); false cancels (CDC_ERR_CLOSED) */
    bool (*progress)(void *arg, int64_t bytes);
    void *progress_arg;
    const char *fault; /* test-only fault injection (--fault), may be NULL */
    /* > 0: the rewrites (reading and writing Parquet, the CPU-heavy part) run on a thread
     * of this nice value, the commit on the caller's thread. The commit holds the table's
     * commit lock, which the epoch commits wait for: run at a lower priority, it would
     * hold them up behind every busier thread of the machine (priority inversion). */
    int nice;
} cdc_compact_ctx_t;

/*
 * Compacts t (loaded; refreshed as needed) partition by partition as described above, one
 * replace snapshot per partition, adding to *res. CDC_ERR_FENCED when a newer leader
 * committed the table, CDC_ERR_CLOSED when cancelled; a rewrite dropped because its inputs
 * changed is counted in res->dropped and is no error.
 */
cdc_err_t cdc_compact_table(const cdc_compact_ctx_t *cx, cdc_ice_table_t *t,
                            cdc_compact_result_t *res, cdc_error_t *e);

#endif
