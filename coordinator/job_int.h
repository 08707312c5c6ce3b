/*
 * Internal header of the coordinator's job, shared by its pieces: job.c (the state
 * machine, membership and assignments, the loop), pipeline.c (barriers, acks and the
 * commit queue; docs/design.md, "The epoch protocol") and job_tables.c (which workers the
 * job's table set lets own slots). Not for use outside them.
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

/* The in-memory part of cdc_coord_open: the status document, the metric series (in
 * c->metrics, set by the caller), membership, epochs, progress check and restart strategy
 * from c->cfg. */
void cdc_job_init(cdc_coord_t *c);

/* The value of the leader key (common/cluster.h, escaped through jansson); caller frees. */
char *cdc_job_leader_value(const cdc_coord_t *c);

/* STARTING: reads etcd, commits what the previous leader recorded, reserves epoch ids and
 * moves to RECOVERING; a failed step is retried at c->etcd_retry_ms (fenced: STANDBY). */
void cdc_job_leader_start(cdc_coord_t *c, int64_t now);

/* One message from a worker's pipe (Register, Heartbeat, Ack); env stays the caller's. */
void cdc_job_on_message(cdc_coord_t *c, const Cdc__Envelope *env, uint32_t pipe, int64_t now);

/* Handles the messages waiting (the first receive waits up to wait_ms), then the pipe
 * events: a removed pipe loses its worker. */
void cdc_job_drain(cdc_coord_t *c, int wait_ms);

/* Loses the workers that missed their heartbeats and, while RUNNING, the owners of the
 * slots an overdue epoch misses (then recovers). */
void cdc_job_check_liveness(cdc_coord_t *c, int64_t now);

/* RECOVERING -> RUNNING (Assign sent) when the restart delay passed and the workers are
 * there (or the rebalance grace is over). */
void cdc_job_try_assign(cdc_coord_t *c, int64_t now);

/* A standby closes the pipes it rejected once their delay passed. */
void cdc_job_close_rejected(cdc_coord_t *c, int64_t now);

/* How long the loop may wait for a message before one of its timers is due. */
int cdc_job_loop_wait_ms(const cdc_coord_t *c, int64_t now);

/* ---- job_tables.c ---- */

/* Adds the topics the newest checkpoint's slots carry (c->base) to the job's table set. */
void cdc_job_note_base_tables(cdc_coord_t *c);

/* Widens the job's table set by every topic each live worker that reports its topics
 * offers; it never narrows. */
void cdc_job_widen_tables(cdc_coord_t *c);

/* A worker's offer changed (its heartbeat): while RUNNING, a set that every live worker's
 * offer now widens starts a new assignment, which carries the wider set to every worker. */
void cdc_job_offers_changed(cdc_coord_t *c);

/* Adds topic to the job's table set on the operator's word (POST /tables): logged, recorded
 * in etcd by the loop, and while RUNNING a new assignment gives it to every worker. *added
 * says whether it was new. CDC_ERR_INVALID for a name that does not fit. */
cdc_err_t cdc_job_add_table(cdc_coord_t *c, const char *topic, bool *added, cdc_error_t *e);

/* With --kafka, every 10 s: logs each topic of the set that the brokers did not know at
 * this look and the one before (a table added before its topic exists, or a typo). */
void cdc_job_check_table_topics(cdc_coord_t *c, int64_t now);

/* Every few seconds: the table topics live workers offer outside the job's set; one
 * outside it for --unconsumed-after is logged as an error once, and counted (unconsumed.h). */
void cdc_job_check_unconsumed(cdc_coord_t *c, int64_t now);

/* Applies the POST /tables requests waiting (main thread; cheap when there are none). */
void cdc_job_take_table_requests(cdc_coord_t *c);

/* Judges member m against the job's table set (m->verdict, m->refused); a new refusal is
 * logged and counted. */
void cdc_job_judge(cdc_coord_t *c, cdc_member_t *m);

/* Writes the job's table set to etcd when it changed (retried after ETCD_RETRY_MS). */
void cdc_job_persist_tables(cdc_coord_t *c, int64_t now);

/* ---- pipeline.c ---- */

/* Frees the commit queue, after the commit round in flight ended. */
void cdc_job_clear_queue(cdc_coord_t *c);

/* Records and commits the queued epochs in order, as far as etcd and the warehouse let
 * it now; a failed step is retried later. */
void cdc_job_process_queue(cdc_coord_t *c, int64_t now);

/* An owner's Ack: completed epochs join the commit queue. */
void cdc_job_on_ack(cdc_coord_t *c, const Cdc__Ack *ack, uint32_t pipe);

/* Sends the next barrier when the commit interval passed (not while commits lag). */
void cdc_job_maybe_barrier(cdc_coord_t *c, int64_t now);

/* Hands the maintenance thread its orphan scan on the orphan interval, with the files of
 * the checkpoints not yet committed (not while a recorded epoch waits). */
void cdc_job_maybe_orphans(cdc_coord_t *c, int64_t now);

#endif
