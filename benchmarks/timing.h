/*
 * Timing helpers shared by the benchmarks that report milliseconds and medians
 * (bench_commit, bench_stage, bench_state): a monotonic clock in milliseconds and a
 * qsort() comparator for doubles.
 */
#ifndef CDC_BENCHMARKS_TIMING_H
#define CDC_BENCHMARKS_TIMING_H

#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC (fractional). */
static inline double bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* qsort() comparator: doubles in ascending order. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
