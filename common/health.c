/*
 * Liveness of a process (see health.h): the main loop's last turn, stamped on the coarse
 * monotonic clock (no system call, a few ms of resolution: the timeout is seconds), and a
 * fatal reason that only a restart clears.
 */
#include "common/health.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#define WEDGE_FAULT "wedge-loop:"

void cdc_health_init(cdc_health_t *h, int64_t timeout_ms)
{
    atomic_store(&h->last_beat_ms, cdc_clock_mono_coarse_ms());
    h->timeout_ms = timeout_ms;
    atomic_store(&h->fatal, NULL);
    h->wedge_file = NULL;
#if CDC_FAULTS
    const char *fault = getenv("CDC_FAULT");
    if (fault != NULL && strncmp(fault, WEDGE_FAULT, strlen(WEDGE_FAULT)) == 0 &&
        fault[strlen(WEDGE_FAULT)] != '\0')
        h->wedge_file = fault + strlen(WEDGE_FAULT);
#endif
}

/* Testing only: the loop stops turning while the file exists (nothing else notices). */
static void wedge(const cdc_health_t *h)
{
    bool logged = false;

    while (access(h->wedge_file, F_OK) == 0) {
        struct timespec ts = {0, 50 * 1000000};
        if (!logged)
            cdc_log_warn("fault injection: main loop wedged while %s exists", h->wedge_file);
        logged = true;
        nanosleep(&ts, NULL);
    }
}

void cdc_health_beat(cdc_health_t *h)
{
    if (h->wedge_file != NULL)
        wedge(h);
    atomic_store_explicit(&h->last_beat_ms, cdc_clock_mono_coarse_ms(), memory_order_relaxed);
}

void cdc_health_set_fatal(cdc_health_t *h, const char *why)
{
    atomic_store(&h->fatal, why);
}

bool cdc_health_judge(int64_t last_beat_ms, int64_t now_ms, int64_t timeout_ms, const char *fatal,
                      char *reason, size_t size)
{
    if (fatal != NULL) {
        snprintf(reason, size, "%s", fatal);
        return false;
    }
    if (timeout_ms > 0 && now_ms - last_beat_ms > timeout_ms) {
        snprintf(reason, size,
                 "main loop has not turned for %" PRId64 " ms (--liveness-timeout %" PRId64 " ms)",
                 now_ms - last_beat_ms, timeout_ms);
        return false;
    }
    return true;
}

bool cdc_health_check(void *arg, char *reason, size_t size)
{
    cdc_health_t *h = arg;

    return cdc_health_judge(atomic_load_explicit(&h->last_beat_ms, memory_order_relaxed),
                            cdc_clock_mono_coarse_ms(), h->timeout_ms, atomic_load(&h->fatal),
                            reason, size);
}
