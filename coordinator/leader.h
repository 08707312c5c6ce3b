/*
 * Leader election for coordinators (high availability). Every coordinator campaigns on
 * /cdc/<job>/leader with a lease; the winner's term is the key's create_revision, the
 * fencing token every etcd write and every Iceberg commit checks. Standbys retry the
 * campaign periodically; the leader renews its lease every ttl/3. Leadership is lost
 * when the lease expires or is revoked (CDC_ERR_FENCED) or when the lease could not be
 * renewed for a whole TTL (then another coordinator may already lead: step down before
 * it can, fencing protects the writes in between). Main thread only.
 */
#ifndef CDC_COORDINATOR_LEADER_H
#define CDC_COORDINATOR_LEADER_H

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
    cdc_etcd_t *etcd;        /* borrowed */
    cdc_etcd_election_t *el; /* owned */
    char key[256];
    int64_t ttl_s;
    bool leading;
    int64_t term;
    int64_t next_try_ms;     /* standby: next campaign attempt */
    int64_t next_renew_ms;   /* leader: next keepalive */
    int64_t last_renewed_ms; /* leader: last successful keepalive */
    char last_error[256];
} cdc_leader_t;

/* value: what to publish while campaigning (JSON with id, endpoint, admin). */
cdc_err_t cdc_leader_open(cdc_leader_t *l, cdc_etcd_t *etcd, const char *job, const char *value,
                          int64_t ttl_s, cdc_error_t *e);
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
