/*
 * A disk that filled up (docs/operations.md, "Disk faults"): one watch per disk a
 * process writes (the warehouse, a worker's state directory). A failed write whose
 * error names a full file system (cdc_error_t.disk_full) marks the disk full: logged as
 * an error at the first failure, every failure counted, the gauge set; the next write
 * that succeeds clears it and logs that space returned. Programs show the snapshot in
 * /status. Metrics, with <prefix> the program's ("cdc_worker", "cdc_coordinator"):
 *   <prefix>_disk_full{disk}            1 while the disk is full
 *   <prefix>_disk_full_errors_total{disk} writes that failed because it was full
 * Thread-safe: any thread may report; /status reads from the HTTP threads.
 */
#ifndef CDC_DISKFULL_H
#define CDC_DISKFULL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/metrics.h"

typedef struct cdc_diskfull {
    pthread_mutex_t mu;
    const char *disk;   /* "warehouse", "state" (static storage) */
    const char *effect; /* what stops while full, for the log (static storage) */
    bool full;
    int64_t since_wall_ms; /* when it filled up (wall clock ms); 0 when not full */
    uint64_t errors;       /* writes that failed because it was full, ever */
    char last_error[256];  /* the last such failure */
    cdc_gauge_t *g_full;
    cdc_counter_t *c_errors;
} cdc_diskfull_t;

/* disk and effect must have static storage (string literals). reg may be NULL. */
void cdc_diskfull_init(cdc_diskfull_t *d, cdc_metrics_t *reg, const char *prefix, const char *disk,
                       const char *effect);
void cdc_diskfull_destroy(cdc_diskfull_t *d);

/* A write to the disk failed with e: returns e->disk_full (then the disk is full). */
bool cdc_diskfull_failed(cdc_diskfull_t *d, const cdc_error_t *e);

/* A write to the disk succeeded: a full disk has space again. */
void cdc_diskfull_ok(cdc_diskfull_t *d);

/*
 * /status's "disk" object of n watches, as JSON text (caller frees; NULL when out of
 * memory): {"<disk>": {"full", "full_since_ms", "full_errors", "last_full_error"}, ...}.
 */
char *cdc_diskfull_status_json(cdc_diskfull_t *const *ds, size_t n);

#endif
