/*
 * Metrics registry with Prometheus text exposition (format 0.0.4). Every process keeps
 * one registry (usually cdc_metrics_default()) and the HTTP endpoint renders it on
 * /metrics. A metric family has a name, a help text and a type; each series in a family
 * carries a small fixed set of label pairs (at most CDC_METRICS_MAX_LABELS). Looking a
 * series up returns a stable pointer that stays valid until the registry is freed, so
 * hot paths look up once and then update lock-free.
 *
 * Thread-safety: every function is thread-safe. Updates are atomic (no lock); lookups
 * and rendering take the registry mutex.
 */
#ifndef CDC_METRICS_H
#define CDC_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CDC_METRICS_MAX_LABELS 8
#define CDC_METRICS_MAX_BUCKETS 32

typedef struct cdc_metrics cdc_metrics_t;
typedef struct cdc_metric_series cdc_counter_t;
typedef struct cdc_metric_series cdc_gauge_t;
typedef struct cdc_metric_series cdc_histogram_t;

/* A new empty registry; NULL when out of memory. Free with cdc_metrics_free(). */
cdc_metrics_t *cdc_metrics_new(void);

/* Frees the registry and every series; series pointers become invalid. */
void cdc_metrics_free(cdc_metrics_t *reg);

/* The process-wide registry (created on first use, never freed). */
cdc_metrics_t *cdc_metrics_default(void);

/*
 * Series lookup/creation. `labels` is a NULL-terminated array of alternating names and
 * values, e.g. (const char *[]){"partition", "3", "table", "orders", NULL}, or NULL for
 * no labels. The first call for a name fixes the family's help text and type (and, for
 * histograms, the buckets: strictly increasing, without +Inf, which is implicit).
 * Later calls with the same name and labels return the same pointer. Returns NULL when
 * the name exists with another type, a name or label is invalid, there are too many
 * labels or buckets, or memory ran out (and logs the reason). Strings are copied.
 */
cdc_counter_t *cdc_metrics_counter(cdc_metrics_t *reg, const char *name, const char *help,
                                   const char *const *labels);
cdc_gauge_t *cdc_metrics_gauge(cdc_metrics_t *reg, const char *name, const char *help,
                               const char *const *labels);
cdc_histogram_t *cdc_metrics_histogram(cdc_metrics_t *reg, const char *name, const char *help,
                                       const double *buckets, size_t nbuckets,
                                       const char *const *labels);

/* Updates; all accept NULL (no-op) so a failed lookup never crashes a hot path. */
void cdc_metrics_counter_inc(cdc_counter_t *c);
void cdc_metrics_counter_add(cdc_counter_t *c, double v); /* v < 0 is ignored */
void cdc_metrics_gauge_set(cdc_gauge_t *g, double v);
void cdc_metrics_gauge_add(cdc_gauge_t *g, double v);
void cdc_metrics_histogram_observe(cdc_histogram_t *h, double v);

/* Current value of a counter or gauge (0 for NULL); for tests and /status. */
double cdc_metrics_value(const cdc_counter_t *c);

/*
 * Renders the registry in the Prometheus text format 0.0.4: families in registration
 * order, each with # HELP and # TYPE lines, then its series in creation order;
 * histograms as _bucket{...,le="..."} (cumulative, ending with le="+Inf"), _sum, _count.
 * Returns a NUL-terminated heap string owned by the caller (free()), length in *len when
 * len is not NULL; NULL when out of memory.
 */
char *cdc_metrics_render(cdc_metrics_t *reg, size_t *len);

/* Common bucket set for latencies in seconds: 1ms .. 10s. */
extern const double cdc_metrics_latency_buckets[];
extern const size_t cdc_metrics_latency_nbuckets;

#endif
