/*
 * Failure-rate restart strategy (see restart.h): a sliding window of failure times.
 */
#include "coordinator/restart.h"

#include <string.h>

void cdc_restart_init(cdc_restart_t *r, int max_failures, int64_t interval_ms, int64_t delay_ms)
{
    memset(r, 0, sizeof(*r));
    if (max_failures < 1)
        max_failures = 1;
    if (max_failures > CDC_RESTART_MAX_TRACKED - 1)
        max_failures = CDC_RESTART_MAX_TRACKED - 1;
    r->max_failures = max_failures;
    r->interval_ms = interval_ms;
    r->delay_ms = delay_ms < 0 ? 0 : delay_ms;
}

static void expire(cdc_restart_t *r, int64_t now_ms)
{
    int keep = 0;

    for (int i = 0; i < r->nfailures; i++)
        if (now_ms - r->failures[i] < r->interval_ms)
            r->failures[keep++] = r->failures[i];
    r->nfailures = keep;
}

int cdc_restart_recent(cdc_restart_t *r, int64_t now_ms)
{
    expire(r, now_ms);
    return r->nfailures;
}

bool cdc_restart_on_failure(cdc_restart_t *r, int64_t now_ms, int64_t *restart_at_ms)
{
    r->total++;
    if (r->failed)
        return false;
    expire(r, now_ms);
    if (r->nfailures < CDC_RESTART_MAX_TRACKED)
        r->failures[r->nfailures++] = now_ms;
    if (r->nfailures > r->max_failures) {
        r->failed = true;
        return false;
    }
    if (restart_at_ms)
        *restart_at_ms = now_ms + r->delay_ms;
    return true;
}

void cdc_restart_reset(cdc_restart_t *r)
{
    r->failed = false;
    r->nfailures = 0;
}
