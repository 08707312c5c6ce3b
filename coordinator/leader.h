/*
 * Leader election for coordinators (high availability). Every coordinator campaigns on
 * /cdc/<job>/leader with a lease; the winner's term is the key's create_revision, the
 * fencing token every etcd write and every Iceberg commit checks. Standbys retry the
 * campaign periodically. The leader renews its lease every ttl/3 on a thread of its
 * own with its own etcd client, so that a main loop busy with a long commit backlog or
 * table maintenance does not lose the lease and hand the job to a standby. Leadership
 * is lost when the lease expires or is revoked or the key was replaced
 * (CDC_ERR_FENCED), or when the lease could not be renewed for a whole TTL (then
 * another coordinator may already lead: step down before it can, fencing protects the
 * writes in between). The renewal thread only reports; every other call is for the
 * main thread.
 */
#ifndef CDC_COORDINATOR_LEADER_H
#define CDC_COORDINATOR_LEADER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/etcd.h"

typedef enum cdc_leader_event {
    CDC_LEADER_NONE = 0,
    CDC_LEADER_ELECTED, /* we just won; cdc_leader_term() is the new term */
    CDC_LEADER_LOST,    /* we were leader and are not any more */
} cdc_leader_event_t;

typedef struct cdc_leader {
    cdc_etcd_t *etcd;        /* borrowed: campaigning, resigning */
    cdc_etcd_t *renew_etcd;  /* owned: the renewal thread's client */
    cdc_etcd_election_t *el; /* owned */
    char key[256];
    int64_t ttl_s;
    bool leading;
    int64_t term;
    int64_t next_try_ms; /* standby: next campaign attempt */
    char last_error[256];

    /* the renewal thread (runs while leading) */
    pthread_t renewer;
    bool renewer_running;
    int64_t renew_lease; /* the lease and term it keeps, fixed for its life */
    atomic_bool renew_stop;
    atomic_bool renew_lost;         /* set by the thread: leadership is gone */
    atomic_int_fast64_t renewed_ms; /* last successful renewal (monotonic ms) */
    pthread_mutex_t renew_mu;       /* guards renew_error */
    char renew_error[256];
} cdc_leader_t;

/* value: what to publish while campaigning (JSON with id, endpoint, admin). endpoints, sec
 * (may be NULL) and timeout_ms: for the renewal thread's own etcd client (the same cluster
 * as etcd). */
cdc_err_t cdc_leader_open(cdc_leader_t *l, cdc_etcd_t *etcd, const char *endpoints,
                          const cdc_etcd_security_t *sec, int timeout_ms, const char *job,
                          const char *value, int64_t ttl_s, cdc_error_t *e);
void cdc_leader_close(cdc_leader_t *l, bool resign);

/* Drives the election at now_ms (monotonic); returns what changed. */
cdc_leader_event_t cdc_leader_tick(cdc_leader_t *l, int64_t now_ms);

/* Steps down at once (e.g. a fenced write failed): the lease is revoked best-effort. */
void cdc_leader_step_down(cdc_leader_t *l, const char *reason);

static inline bool cdc_leader_is_leader(const cdc_leader_t *l)
{
    return l->leading;
}

#endif
