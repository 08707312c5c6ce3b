/*
 * Internal header of the coordinator's job, shared by its two pieces: job.c (the state
 * machine, membership and assignments, the loop) and pipeline.c (barriers, acks and the
 * commit queue; docs/design.md, "The epoch protocol"). Not for use outside them.
 */
#ifndef CDC_COORDINATOR_JOB_INT_H
#define CDC_COORDINATOR_JOB_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/coordinator.h"

#define EPOCH_BLOCK 1000         /* epoch ids reserved in etcd at a time */
#define ETCD_RETRY_MS 300        /* an etcd step that failed is retried after this */
#define SLOW_MAINTENANCE_MS 1000 /* a loop iteration or maintenance step this slow is logged */

/* ---- job.c ---- */

/* Monotonic milliseconds (the loop's timers). */

/* Sends one envelope to a worker's pipe. */
void cdc_job_send_env(cdc_coord_t *c, uint32_t pipe, const Cdc__Envelope *env);

/* Sends a Reject with reason to a worker's pipe. */
void cdc_job_send_reject(cdc_coord_t *c, uint32_t pipe, const char *reason);

/* Sends an envelope to every live worker. */
void cdc_job_broadcast(cdc_coord_t *c, const Cdc__Envelope *env);

/* Whether the worker id owns a partition in the current assignment. */
bool cdc_job_owns_any(const cdc_coord_t *c, const char *id);

/*
 * Abandons every incomplete epoch for all partitions and schedules a reassignment.
 * count_failure: whether the restart strategy counts it (a worker joining does not).
 */
void cdc_job_recover(cdc_coord_t *c, const char *reason, bool count_failure);

/* Steps down to STANDBY: drops the workers, the open epochs and the commit queue. */
void cdc_job_become_standby(cdc_coord_t *c, const char *reason);

/* ---- pipeline.c ---- */

/* Frees the commit queue. */
void cdc_job_clear_queue(cdc_coord_t *c);

/* Records and commits the queued epochs in order, as far as etcd and the warehouse let
 * it now; a failed step is retried later. */
void cdc_job_process_queue(cdc_coord_t *c, int64_t now);

/* An owner's Ack: completed epochs join the commit queue. */
void cdc_job_on_ack(cdc_coord_t *c, const Cdc__Ack *ack, uint32_t pipe);

/* Sends the next barrier when the commit interval passed (not while commits lag). */
void cdc_job_maybe_barrier(cdc_coord_t *c, int64_t now);

/* Removes orphan files on the orphan interval (not while a recorded epoch waits). */
void cdc_job_maybe_orphans(cdc_coord_t *c, int64_t now);

/* Expires old snapshots; runs on the orphan interval, only between commits. */
void cdc_job_maybe_expire(cdc_coord_t *c, int64_t now);

#endif
