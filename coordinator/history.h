/*
 * The dashboard's memory (docs/operations.md, "Dashboard"): what the leading coordinator
 * saw over the last hour and more, in rings of fixed size, so that the page plots a long
 * window without Prometheus and the coordinator's memory stays bounded whatever runs.
 *   - samples: one per second from the loop: every partition slot's lag, the live
 *     workers, the job state, the dead letters so far;
 *   - epochs: one per committed epoch: duration, records, bytes, commit time;
 *   - tables: per source table, one point per sample: changes committed per second,
 *     rows in the mirror, and the freshness (source commit to Iceberg visibility) p50
 *     and p99 over the last CDC_HISTORY_FRESH_WINDOW_MS of commits.
 * Freshness is estimated from what each commit tells: the source commit times of the
 * epoch's oldest and newest change of the table (the changelog files' _source_ts bounds)
 * and when the snapshot became visible. The epoch's changes are taken to be spread
 * evenly between the two, so each commit adds a uniform span of freshness values,
 * weighted by its changes; the quantiles are those of the mixture of the spans.
 *
 * Thread-safety: every function takes the history's own lock; the loop writes, the
 * HTTP threads read (cdc_history_json).
 */
#ifndef CDC_COORDINATOR_HISTORY_H
#define CDC_COORDINATOR_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "coordinator/assign.h"

#define CDC_HISTORY_SAMPLES 4096 /* at one a second, 68 minutes */
#define CDC_HISTORY_EPOCHS 4096  /* at one epoch a second, 68 minutes */
#define CDC_HISTORY_SPANS 1024   /* per table: commits kept for the freshness estimate */
/* Every source table has a series, however many. Their rings share two budgets, so that
 * the history's memory stays bounded (at most about 13 MiB of points and 16 MiB of spans,
 * or the floors' worth past tens of thousands of tables): each table keeps CDC_HISTORY_SAMPLES
 * points and CDC_HISTORY_SPANS spans while the budget allows, halved for every table as tables are
 * added, down to the floors (at 2,000 tables: 128 points, about two minutes of the per-table plot,
 * and 256 commits of freshness spans per table). */
#define CDC_HISTORY_POINTS_BUDGET ((size_t)1 << 18)
#define CDC_HISTORY_POINTS_MIN 120
#define CDC_HISTORY_SPANS_BUDGET ((size_t)1 << 19)
#define CDC_HISTORY_SPANS_MIN 32
#define CDC_HISTORY_FRESH_WINDOW_MS (5 * 60 * 1000)
#define CDC_HISTORY_RATE_WINDOW_MS (10 * 1000) /* throughput: changes over this window */

typedef struct cdc_history cdc_history_t;

/* A job-wide sample (wall-clock time). */
typedef struct cdc_history_sample {
    int64_t at_ms;
    int64_t lag[CDC_PARTITIONS]; /* records behind, -1 = unknown */
    int32_t workers_alive;
    int32_t state; /* cdc_job_state_t */
    int64_t dlq;   /* dead letters the workers reported so far, all classes */
} cdc_history_sample_t;

/* A committed epoch. */
typedef struct cdc_history_epoch {
    uint64_t epoch;
    int64_t at_ms;       /* wall clock when its snapshots were visible */
    int64_t duration_ms; /* barrier -> visible */
    int64_t commit_ms;   /* the Iceberg commit step alone */
    int64_t records;
    int64_t bytes;
    int32_t files;
} cdc_history_epoch_t;

/* A source table now, from its latest sample. */
typedef struct cdc_history_table {
    char table[256];      /* "<ns>.<table>" of the source (and the mirror) */
    int64_t changes;      /* changes committed to the changelog since this leader began */
    double changes_per_s; /* over the last CDC_HISTORY_RATE_WINDOW_MS */
    int64_t rows;         /* rows in the mirror, -1 = not committed to yet */
    int64_t fresh_p50_ms; /* -1 = no commit with changes in the window */
    int64_t fresh_p99_ms;
    int64_t fresh_max_ms;
} cdc_history_table_t;

/* A commit's freshness span: every value in [lo_ms, hi_ms] as likely, weight changes. */
typedef struct cdc_history_span {
    int64_t at_ms; /* when the commit became visible */
    int64_t lo_ms, hi_ms;
    int64_t weight;
} cdc_history_span_t;

/* A new, empty history; NULL when out of memory. Free with cdc_history_free(). */
cdc_history_t *cdc_history_new(void);
void cdc_history_free(cdc_history_t *h);

/* Forgets everything (a new leader term starts a new history). */
void cdc_history_clear(cdc_history_t *h);

/* Adds a job-wide sample; also closes one point of every table's series at s->at_ms. */
void cdc_history_sample(cdc_history_t *h, const cdc_history_sample_t *s);

/* Adds a committed epoch. */
void cdc_history_epoch(cdc_history_t *h, const cdc_history_epoch_t *ep);

/*
 * What one commit did to a source table (table: "<ns>.<table>"), visible at at_ms:
 * `changes` changes reached its changelog with source commit times from src_min_ms to
 * src_max_ms (0 when unknown); `rows` (-1 = not known from this commit) rows are in its
 * mirror now.
 */
void cdc_history_table_commit(cdc_history_t *h, const char *table, int64_t at_ms, int64_t changes,
                              int64_t src_min_ms, int64_t src_max_ms, int64_t rows);

/* Every table, in the order first seen, to *out (allocated, the caller frees it; NULL when
 * out of memory, with 0 returned); returns how many. */
size_t cdc_history_tables(cdc_history_t *h, cdc_history_table_t **out);

/*
 * The history from since_ms (wall clock, exclusive; 0 = all) as JSON text, columnar:
 * {"now_ms", "interval_ms", "samples": {"t": [...], "lag": [[12 lags], ...], "workers": [...],
 * "state": [...], "dlq": [...]}, "epochs": [{"epoch", "t", "duration_ms", "commit_ms",
 * "records", "bytes", "files"}], "tables": [{"table", "t": [...], "changes_per_s": [...],
 * "rows": [...], "fresh_p50_ms": [...], "fresh_p99_ms": [...]}]}; unknown values are null.
 * A heap string owned by the caller (free()), NULL when out of memory.
 */
char *cdc_history_json(cdc_history_t *h, int64_t since_ms, int64_t interval_ms);

/*
 * The q-quantile (0 < q < 1) of the mixture of spans[0..n) (each uniform over [lo_ms,
 * hi_ms], a point when they are equal, weighted by weight); -1 when the spans weigh
 * nothing. Pure function.
 */
int64_t cdc_history_quantile(const cdc_history_span_t *spans, size_t n, double q);

#endif
