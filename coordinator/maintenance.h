/*
 * Table maintenance of the leader (docs/iceberg.md, "Table maintenance"): one scheduler,
 * on a thread of its own (nice 10), runs every background task on the warehouse one at a
 * time, so that none of them blocks a barrier or an epoch commit:
 *   - compaction (compact.h) of every table the job commits to, checked every
 *     --compact-interval against the policy, rate-limited to --compact-rate bytes read
 *     per second, and on demand (cdcctl compact);
 *   - snapshot expiry (--snapshot-retention, --snapshot-min-keep) and the bound on
 *     metadata files (--metadata-versions-max: write.metadata.previous-versions-max with
 *     write.metadata.delete-after-commit.enabled), every --orphan-interval;
 *   - orphan-file cleanup, every --orphan-interval, with the file list the main loop hands
 *     over (the files of checkpoints not yet committed stay).
 * Its commits race the epoch commits like any other committer: a lost race is retried on
 * fresh metadata, and a table a newer leader committed is left alone (fenced). It runs
 * while this process leads (cdc_maint_start/stop on term changes).
 */
#ifndef CDC_COORDINATOR_MAINTENANCE_H
#define CDC_COORDINATOR_MAINTENANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/metrics.h"
#include "coordinator/checkpoint.h"
#include "coordinator/commit.h"
#include "coordinator/compact.h"

typedef struct cdc_maint cdc_maint_t;

typedef struct cdc_maint_options {
    const char *job;
    const char *fault; /* test-only fault injection (compact.h), may be NULL */
    bool compact;      /* policy-driven compaction (on-demand runs also when false) */
    int64_t compact_interval_ms;
    cdc_compact_policy_t policy;
    int64_t rate_bytes; /* input bytes read per second by compaction; 0 = unlimited */
    int64_t snapshot_retention_ms, snapshot_min_keep;
    int64_t orphan_interval_ms, orphan_age_ms;
    int64_t metadata_versions_max; /* 0 = leave the tables' property alone */
} cdc_maint_options_t;

/* Creates the scheduler (not running); o's strings are copied. metrics may be NULL. */
cdc_err_t cdc_maint_open(cdc_maint_t **out, cdc_committer_t *committer,
                         const cdc_maint_options_t *o, cdc_metrics_t *metrics, cdc_error_t *e);
void cdc_maint_close(cdc_maint_t *m);

/* Leader: starts the thread for this term (a running one is stopped first). */
void cdc_maint_start(cdc_maint_t *m, uint64_t term);
/* Stepping down: cancels the task that runs (its files are removed or left to orphan
 * cleanup, never committed) and joins the thread. */
void cdc_maint_stop(cdc_maint_t *m);

/*
 * Main loop, as leader: when the orphan scan is due, hands it the files to keep, those the
 * nkeep checkpoints not yet committed name (copied), unless skip (a recorded epoch waits
 * for its commit). Returns whether a scan was handed over.
 */
bool cdc_maint_tick(cdc_maint_t *m, int64_t now_mono, const cdc_checkpoint_t *const *keep,
                    size_t nkeep, bool skip);

/*
 * Compacts `table` ("<ns>.<table>", and its changelog when that is a table too) now,
 * whatever the policy says, and waits for it (timeout_ms): CDC_OK with *res filled;
 * CDC_ERR_NOT_FOUND for a table the job has not committed to, CDC_ERR_UNAVAILABLE when
 * this process does not lead, CDC_ERR_TIMEOUT (the run goes on). Thread-safe.
 */
cdc_err_t cdc_maint_compact_now(cdc_maint_t *m, const char *table, int64_t timeout_ms,
                                cdc_compact_result_t *res, cdc_error_t *e);

#endif
