/*
 * Restart strategy "failure-rate" (as Flink's): every recovery (member loss, ack
 * deadline, commit failure) counts as a failure. Up to max_failures failures within any
 * sliding interval are tolerated, each followed by a restart delay; one more and the job
 * goes to FAILED and stays there (visible in /status and /metrics) until an operator
 * resets it, instead of recovering in a loop. Pure logic; the caller passes the clock.
 */
#ifndef CDC_COORDINATOR_RESTART_H
#define CDC_COORDINATOR_RESTART_H

#include <stdbool.h>
#include <stdint.h>

#define CDC_RESTART_MAX_TRACKED 256

typedef struct cdc_restart {
    int max_failures;                          /* failures tolerated per interval, >= 1 */
    int64_t interval_ms;                       /* sliding window */
    int64_t delay_ms;                          /* wait before each restart */
    int64_t failures[CDC_RESTART_MAX_TRACKED]; /* times of failures inside the window */
    int nfailures;
    int64_t total; /* all failures since start, for metrics */
    bool failed;
} cdc_restart_t;

void cdc_restart_init(cdc_restart_t *r, int max_failures, int64_t interval_ms, int64_t delay_ms);

/*
 * Records a failure at now_ms. Returns true and sets *restart_at_ms when a restart is
 * allowed; returns false when the failure rate is exceeded (the strategy is now FAILED).
 */
bool cdc_restart_on_failure(cdc_restart_t *r, int64_t now_ms, int64_t *restart_at_ms);

/* Failures within the window ending at now_ms. */
int cdc_restart_recent(cdc_restart_t *r, int64_t now_ms);

/* Leaves FAILED and forgets the failure history (operator reset). */
void cdc_restart_reset(cdc_restart_t *r);

#endif
