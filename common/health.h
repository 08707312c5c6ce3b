/*
 * Liveness of a process: what its /healthz answers (docs/operations.md, "Health and
 * readiness"). The main loop stamps each turn with cdc_health_beat(); the HTTP threads
 * judge with cdc_health_check(). A process is unhealthy when its main loop has not
 * turned for the liveness timeout (--liveness-timeout: a deadlock, a call that never
 * returns), or when it declared a state that only a restart leaves (cdc_health_set_fatal:
 * a leading coordinator whose restart strategy gave up). A liveness probe on /healthz
 * then restarts it. Readiness (/readyz) stays each program's own rule.
 *
 * Threads: cdc_health_beat() and cdc_health_set_fatal() run on the owner's threads,
 * cdc_health_check() on any; none takes a lock.
 */
#ifndef CDC_HEALTH_H
#define CDC_HEALTH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cdc_health {
    _Atomic int64_t last_beat_ms; /* monotonic ms of the main loop's last turn */
    int64_t timeout_ms;           /* longest tolerated gap between turns; 0 = not watched */
    _Atomic(const char *) fatal;  /* why only a restart helps (static storage); NULL = none */
    const char *wedge_file;       /* testing only: CDC_FAULT=wedge-loop:<file> */
} cdc_health_t;

/*
 * Starts watching: the loop counts as having turned now. timeout_ms 0 turns the check of
 * the loop off. Reads CDC_FAULT once (testing only: "wedge-loop:<file>" makes every
 * cdc_health_beat() block while <file> exists, a wedged main loop on demand).
 */
void cdc_health_init(cdc_health_t *h, int64_t timeout_ms);

/* The main loop turned (main thread; cheap: a coarse clock read and an atomic store). */
void cdc_health_beat(cdc_health_t *h);

/*
 * Declares (why != NULL) or clears (NULL) a state that only a restart leaves; why must
 * have static storage duration (a string literal): the HTTP threads read it unlocked.
 */
void cdc_health_set_fatal(cdc_health_t *h, const char *why);

/*
 * The rule /healthz applies, with the time passed in: healthy unless fatal is set or the
 * loop last turned more than timeout_ms (> 0) before now_ms. On false, reason (size
 * bytes) says why, naming the option to tune.
 */
bool cdc_health_judge(int64_t last_beat_ms, int64_t now_ms, int64_t timeout_ms, const char *fatal,
                      char *reason, size_t size);

/* cdc_health_judge() of h (a cdc_health_t *) now: the shape of an HTTP probe callback. */
bool cdc_health_check(void *h, char *reason, size_t size);

#endif
