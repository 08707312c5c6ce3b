/*
 * Clocks: the one place that reads the time. Monotonic for deadlines, intervals and
 * timeouts (never jumps), wall-clock for what is stored or shown (snapshot timestamps,
 * change times, logs). The coarse variants cost no system call (vDSO, a few ms of
 * resolution) and suit hot paths that only need to know a second has passed.
 */
#ifndef CDC_COMMON_CLOCK_H
#define CDC_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t cdc_clock_ms_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds on the monotonic clock: for deadlines and elapsed time. */
static inline int64_t cdc_clock_mono_ms(void)
{
    return cdc_clock_ms_of(CLOCK_MONOTONIC);
}

/* Milliseconds since the Unix epoch: for timestamps that are stored or shown. */
static inline int64_t cdc_clock_wall_ms(void)
{
    return cdc_clock_ms_of(CLOCK_REALTIME);
}

static inline int64_t cdc_clock_mono_coarse_ms(void)
{
    return cdc_clock_ms_of(CLOCK_MONOTONIC_COARSE);
}

static inline int64_t cdc_clock_wall_coarse_ms(void)
{
    return cdc_clock_ms_of(CLOCK_REALTIME_COARSE);
}

/* The wall-clock time as a timespec: for formatted timestamps and unique ids. */
static inline struct timespec cdc_clock_wall_ts(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts;
}

/* Microseconds since the Unix epoch. */
static inline int64_t cdc_clock_wall_us(void)
{
    struct timespec ts = cdc_clock_wall_ts();
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Microseconds on the monotonic clock. */
static inline int64_t cdc_clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Seconds on the monotonic clock, with sub-microsecond resolution: for rates. */
static inline double cdc_clock_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The CLOCK_REALTIME time ms from now, for pthread_cond_timedwait(). */
static inline struct timespec cdc_clock_deadline(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
