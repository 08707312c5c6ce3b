/*
 * The job's coordinators, leader and standbys (docs/protocol.md, "etcd keys";
 * docs/operations.md, "Dashboard"). The election has one key, the leader's; so that the
 * leader knows its standbys, every coordinator also keeps a presence record under
 * /cdc/<job>/coordinators/<id> (common/cluster.h) on a lease of its own with the
 * election's TTL, renewed from the main loop every ttl/3: the record disappears when the
 * process dies (within the TTL) or closes (the lease is revoked). A loop stalled past the
 * TTL loses the record and writes it again on a new lease when it turns again.
 *
 * Every PRESENCE_READ_MS the loop reads the prefix into the list /status shows as
 * "coordinators" (never on a request). A coordinator no longer listed stays, alive =
 * false, for 10 minutes. Every etcd call is synchronous (the client's --etcd-timeout); after
 * a failed one the next waits PRESENCE_RETRY_MS, so an etcd outage costs the loop at most
 * one timed-out call per retry interval. Main thread only.
 */
#ifndef CDC_COORDINATOR_PRESENCE_H
#define CDC_COORDINATOR_PRESENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cluster.h"
#include "common/etcd.h"

/* One coordinator as the last reads saw it. */
typedef struct cdc_presence_entry {
    cdc_coordinator_record_t rec;
    bool alive;      /* its record was in the newest read */
    int64_t seen_ms; /* monotonic: the newest read that listed it */
} cdc_presence_entry_t;

typedef struct cdc_presence {
    cdc_etcd_t *etcd; /* borrowed: the main loop's client */
    char key[512];    /* ours */
    char prefix[300]; /* everyone's */
    int64_t ttl_s;
    int64_t lease;                /* 0 = none granted (or it expired) */
    cdc_coordinator_record_t rec; /* ours as last written */
    bool written;                 /* rec is in etcd under lease */
    int64_t next_keepalive_ms;
    int64_t next_read_ms;
    int64_t retry_ms; /* after a failure: no etcd call before this */
    bool failing;     /* the last call failed (logged once) */

    cdc_presence_entry_t *list; /* n entries sorted by id: every record read (common/buf.h) */
    int n;
    size_t cap;
} cdc_presence_t;

/* Prepares the record of coordinator id (admin: its admin address) of job; no etcd call
 * yet. */
void cdc_presence_init(cdc_presence_t *p, cdc_etcd_t *etcd, const char *job, const char *id,
                       const char *admin, int64_t ttl_s);

/* The loop's turn at now_ms (monotonic): writes our record when it is missing or our role
 * ("leader" with its term, "standby" with term 0) changed, renews the lease, reads the
 * list when due. */
void cdc_presence_tick(cdc_presence_t *p, bool leading, int64_t term, int64_t now_ms);

/* Revokes the lease (the record goes at once; best effort) and frees the list. */
void cdc_presence_close(cdc_presence_t *p);

/* Merges one read of the prefix into the list at now_ms (pure: the tick's read, tests):
 * records listed are alive, the others not, and those not listed for 10 minutes are
 * forgotten. Values that are no record are skipped. */
void cdc_presence_merge(cdc_presence_t *p, const cdc_etcd_kvs_t *kvs, int64_t now_ms);

/* The role of entry: "leader" when it is leader_id (who holds the leader key; NULL or ""
 * = unknown: then the role its record claims), else "standby". */
const char *cdc_presence_role(const cdc_presence_entry_t *en, const char *leader_id);

/* The list for /status into out (at most max; p->n holds them all): the leader first, then
 * by id. Returns the count. */
int cdc_presence_ordered(const cdc_presence_t *p, const char *leader_id,
                         const cdc_presence_entry_t **out, int max);

#endif
