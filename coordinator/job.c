/*
 * The coordinator's main loop and job state machine (docs/design.md, "The epoch protocol"). One
 * thread:
 *
 *   STANDBY --won election--> STARTING --etcd read, previous commits done--> RECOVERING
 *   RECOVERING --restart delay passed, workers present (grace)--> RUNNING (Assign sent)
 *   RUNNING --member lost / ack deadline / rejoin--> RECOVERING (Abort sent)
 *   any leader state --restart strategy exhausted--> FAILED; --lease lost--> STANDBY
 *
 * Completed epochs go through a queue: record in etcd (fenced, the point of no return),
 * commit to Iceberg, move `committed`, tell the workers. Recorded epochs are never
 * dropped; unrecorded ones die with their generation only if the leader steps down.
 * This file holds the states, the workers' membership and assignments, and the loop;
 * the barriers, acks and the commit queue are the commit pipeline (pipeline.c), and which
 * workers may own slots by the job's table set is job_tables.c. One concept, the job
 * state machine, in one file of about 1,000 lines. *
 * A call circle of three files (docs/development.md, "Call circles"): job.c, job_tables.c
 * and pipeline.c are one concept, the job, split by part. The loop (job.c) drives the
 * table set and the commit pipeline; both fall back on the loop's own moves: a send to
 * a worker, a recovery (Abort, new generation) or a step down to standby. The rest of
 * coordinator/ sits below them: admin.c, dashboard.c and lag.c only read the job.
 */
#include "coordinator/job_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cluster.h"
#include "common/evchunk.h"
#include "common/log.h"

#define COMMIT_LOOK_MS 10         /* a running leader's wait while a commit round is in flight */
#define LOOP_WAIT_MAX_MS 50       /* longest message wait of a running leader's loop */
#define STANDBY_WAIT_MS 100       /* a standby's message wait */
#define REJECT_CLOSE_DELAY_MS 200 /* a standby closes a rejected worker's pipe after this */

static void set_state(cdc_coord_t *c, cdc_job_state_t s)
{
    if (c->state != s)
        cdc_log_info("job \"%s\" state %s -> %s", c->cfg.job, cdc_job_state_name(c->state),
                     cdc_job_state_name(s));
    c->state = s;
    atomic_store(&c->state_seen, (int)s);
    /* a FAILED leader holds the lease and commits nothing: /healthz fails so that a
     * liveness probe restarts it and a standby tries again (docs/operations.md) */
    cdc_health_set_fatal(&c->health, s == CDC_JOB_FAILED
                                         ? "job FAILED: the restart strategy gave up; a restart "
                                           "hands the lease to a standby"
                                         : NULL);
    cdc_metrics_gauge_set(c->m_state, (double)s);
}

/* ---- sending ----------------------------------------------------------------------- */

void cdc_job_send_env(cdc_coord_t *c, uint32_t pipe, const Cdc__Envelope *env)
{
    cdc_error_t e;

    if (pipe == 0)
        return;
    if (cdc_msg_server_send(c->msg, pipe, env, &e) != CDC_OK)
        cdc_log_warn("could not send %s to pipe %u: %s", cdc_msg_body_name(env), pipe, e.msg);
}

void cdc_job_send_reject(cdc_coord_t *c, uint32_t pipe, const char *reason)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Reject r = CDC__REJECT__INIT;

    r.reason = (char *)reason;
    r.term = c->term;
    r.generation = c->generation;
    env.body_case = CDC__ENVELOPE__BODY_REJECT;
    env.reject = &r;
    cdc_job_send_env(c, pipe, &env);
}

/*
 * A worker talks to us while we do not lead. A standby also closes the pipe: a worker
 * that dials a fixed address (a fault proxy, a Service) only finds the leader by
 * dialing again; one that follows the leader key redials on its own anyway. While
 * STARTING we lead already: the worker registers again once we are ready.
 */
/* Closes pipe REJECT_CLOSE_DELAY_MS from now, once the Reject sent on it had time to
 * leave; refused: whatever the state then (else only while a standby). */
static void close_later(cdc_coord_t *c, uint32_t pipe, bool refused)
{
    for (int i = 0; i < c->nclosing; i++)
        if (c->closing[i].pipe == pipe)
            return; /* already due */
    if (c->nclosing == CDC_CLOSING_MAX) {
        cdc_msg_server_close_pipe(c->msg, pipe); /* a flood of dialers: close at once */
        return;
    }
    c->closing[c->nclosing].pipe = pipe;
    c->closing[c->nclosing].due_ms = cdc_clock_mono_ms() + REJECT_CLOSE_DELAY_MS;
    c->closing[c->nclosing].refused = refused;
    c->nclosing++;
}

static void reject_not_leader(cdc_coord_t *c, uint32_t pipe)
{
    cdc_job_send_reject(c, pipe, "not the leader");
    if (c->state == CDC_JOB_STANDBY)
        close_later(c, pipe, false);
}

/* Closes the rejected pipes whose delay has passed (forgets them if we lead meanwhile:
 * the worker registers again on the same pipe). */
void cdc_job_close_rejected(cdc_coord_t *c, int64_t now)
{
    int kept = 0;
    for (int i = 0; i < c->nclosing; i++) {
        if (c->state != CDC_JOB_STANDBY && !c->closing[i].refused)
            continue;
        if (now >= c->closing[i].due_ms)
            cdc_msg_server_close_pipe(c->msg, c->closing[i].pipe);
        else
            c->closing[kept++] = c->closing[i];
    }
    c->nclosing = kept;
}

void cdc_job_broadcast(cdc_coord_t *c, const Cdc__Envelope *env)
{
    for (int i = 0; i < c->members.n; i++)
        if (c->members.m[i].alive)
            cdc_job_send_env(c, c->members.m[i].pipe, env);
}

static void send_abort(cdc_coord_t *c, uint64_t from_epoch, const char *reason)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Abort a = CDC__ABORT__INIT;

    a.term = c->term;
    a.generation = c->generation;
    a.epoch = from_epoch;
    a.reason = (char *)reason;
    env.body_case = CDC__ENVELOPE__BODY_ABORT;
    env.abort = &a;
    cdc_job_broadcast(c, &env);
}

bool cdc_job_owns_any(const cdc_coord_t *c, const char *id)
{
    for (int p = 0; p < CDC_PARTITIONS; p++)
        if (strcmp(c->owner[p], id) == 0)
            return true;
    return false;
}

/*
 * Sends each alive worker its Assign of the current generation (empty when idle); only
 * to the worker on only_pipe when that is not 0.
 */
static void send_assignments(cdc_coord_t *c, uint32_t only_pipe)
{
    for (int i = 0; i < c->members.n; i++) {
        cdc_member_t *m = &c->members.m[i];
        Cdc__Envelope env = CDC__ENVELOPE__INIT;
        Cdc__Assign a = CDC__ASSIGN__INIT;
        Cdc__PartitionState ps[CDC_PARTITIONS], *psp[CDC_PARTITIONS];
        Cdc__TopicOffset *tos[CDC_PARTITIONS] = {0};
        Cdc__TopicOffset **topp[CDC_PARTITIONS] = {0};
        size_t n = 0;

        if (!m->alive || (only_pipe != 0 && m->pipe != only_pipe))
            continue;
        for (int p = 0; p < CDC_PARTITIONS; p++) {
            const cdc_ckpt_partition_t *bp = c->base ? &c->base->partitions[p] : NULL;
            if (strcmp(c->owner[p], m->id) != 0)
                continue;
            cdc__partition_state__init(&ps[n]);
            ps[n].partition = (uint32_t)p;
            ps[n].state_handle = (bp && bp->state_handle) ? bp->state_handle : "";
            if (bp && bp->noffsets > 0) {
                tos[n] = calloc(bp->noffsets, sizeof(Cdc__TopicOffset));
                topp[n] = calloc(bp->noffsets, sizeof(Cdc__TopicOffset *));
                if (tos[n] && topp[n]) {
                    for (size_t j = 0; j < bp->noffsets; j++) {
                        cdc__topic_offset__init(&tos[n][j]);
                        tos[n][j].topic = bp->offsets[j].topic;
                        tos[n][j].next_offset = bp->offsets[j].next_offset;
                        topp[n][j] = &tos[n][j];
                    }
                    ps[n].n_offsets = bp->noffsets;
                    ps[n].offsets = topp[n];
                }
            }
            psp[n] = &ps[n];
            n++;
        }
        a.term = c->term;
        a.generation = c->generation;
        a.checkpoint_epoch = c->base ? c->base->epoch : 0;
        a.next_epoch = c->epochs.next_epoch;
        a.n_partitions = n;
        a.partitions = psp;
        if (m->verdict != CDC_TABLESET_FITS)
            a.refused = m->refused;
        /* what every slot carries: the worker consumes exactly these (the set's own sorted
         * array, however long: the message is packed before the set can change) */
        a.n_tables = (size_t)c->tables.n;
        a.tables = c->tables.names;
        env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
        env.assign = &a;
        cdc_job_send_env(c, m->pipe, &env);
        cdc_log_info("assigned %zu partitions to worker \"%s\" (term %" PRIu64
                     " generation %" PRIu64 ", from checkpoint %" PRIu64 ")",
                     n, m->id, c->term, c->generation, a.checkpoint_epoch);
        for (size_t k = 0; k < n; k++) {
            free(tos[k]);
            free(topp[k]);
        }
    }
}

/* ---- recovery ----------------------------------------------------------------------- */

/*
 * Abandons every incomplete epoch for all partitions and schedules a reassignment.
 * count_failure: whether the restart strategy counts it (a worker joining does not).
 */
void cdc_job_recover(cdc_coord_t *c, const char *reason, bool count_failure)
{
    int64_t now = cdc_clock_mono_ms(), at = now + (count_failure ? 0 : 100); /* joins coalesce */
    uint64_t first = cdc_epochs_oldest_open(&c->epochs);

    if (c->state == CDC_JOB_STANDBY || c->state == CDC_JOB_STARTING || c->state == CDC_JOB_FAILED)
        return;
    if (first == 0)
        first = c->epochs.next_epoch;
    if (c->epochs.nopen > 0)
        cdc_metrics_counter_add(c->m_aborted, c->epochs.nopen);
    cdc_epochs_reset(&c->epochs, c->term, c->generation, NULL);
    cdc_progress_reset(&c->progress); /* the owners' clocks start afresh */
    snprintf(c->recovery_reason, sizeof(c->recovery_reason), "%s", reason);
    if (count_failure) {
        cdc_metrics_counter_inc(c->m_failures);
        if (!cdc_restart_on_failure(&c->restart, now, &at)) {
            cdc_log_error("job \"%s\" FAILED: %d failures within %" PRId64
                          " ms exceed the restart strategy (last: %s)",
                          c->cfg.job, c->restart.nfailures, c->cfg.restart_interval_ms, reason);
            c->generation++;
            send_abort(c, first, reason);
            memset(c->owner, 0, sizeof(c->owner));
            set_state(c, CDC_JOB_FAILED);
            return;
        }
    }
    cdc_log_warn("recovering job \"%s\": %s; abandoning epochs from %" PRIu64, c->cfg.job, reason,
                 first);
    /* tell everyone now so that they stop staging data that can never commit */
    c->generation++;
    send_abort(c, first, reason);
    memcpy(c->prev_owner, c->owner, sizeof(c->owner));
    c->restart_at_ms = at;
    c->grace_until_ms = now + c->cfg.rebalance_grace_ms;
    set_state(c, CDC_JOB_RECOVERING);
}

static void lose_worker(cdc_coord_t *c, cdc_member_t *m, const char *reason)
{
    uint32_t pipe = m->pipe;
    bool owned = cdc_job_owns_any(c, m->id);

    cdc_log_warn("worker \"%s\" (incarnation %" PRIu64 ") lost: %s", m->id, m->incarnation, reason);
    cdc_members_lose(m, cdc_clock_mono_ms(), reason);
    if (pipe)
        cdc_msg_server_close_pipe(c->msg, pipe);
    cdc_metrics_gauge_set(c->m_workers, (double)cdc_members_alive_count(&c->members));
    if (owned && (c->state == CDC_JOB_RUNNING || c->state == CDC_JOB_RECOVERING)) {
        char why[256];
        snprintf(why, sizeof(why), "worker \"%s\" lost: %s", m->id, reason);
        cdc_job_recover(c, why, true);
    }
}

/* RECOVERING -> RUNNING when the restart delay passed and the workers are there. */
void cdc_job_try_assign(cdc_coord_t *c, int64_t now)
{
    const char *alive[CDC_PARTITIONS], *prev[CDC_PARTITIONS], *owners[CDC_PARTITIONS];
    int n, owner_idx[CDC_PARTITIONS];
    bool all_back = true;

    if (now < c->restart_at_ms)
        return;
    n = cdc_members_alive_count(&c->members);
    if (n == 0)
        return;
    for (int p = 0; p < CDC_PARTITIONS; p++)
        if (c->prev_owner[p][0] && !cdc_members_is_alive(&c->members, c->prev_owner[p]))
            all_back = false;
    if (!all_back && now < c->grace_until_ms)
        return;
    /* The first assignment of a term waits for the workers to gather: the expected number,
     * else (unknown) the grace when the job has no history. */
    if (!c->assigned_in_term && now < c->grace_until_ms &&
        (c->cfg.expected_workers > 0 ? n < c->cfg.expected_workers : c->base == NULL))
        return;
    if (cdc_epochs_remaining(&c->epochs) < 2) {
        uint64_t from, limit;
        cdc_error_t e;
        uint64_t min_next = c->epochs.next_epoch;
        if (c->last_recorded + 1 > min_next)
            min_next = c->last_recorded + 1;
        if (now < c->etcd_retry_ms)
            return;
        if (cdc_store_reserve_epochs(&c->store, min_next, EPOCH_BLOCK, &from, &limit, &e) !=
            CDC_OK) {
            cdc_metrics_counter_inc(c->m_etcd_errors);
            cdc_log_warn("could not reserve epoch ids: %s", e.msg);
            c->etcd_retry_ms = now + ETCD_RETRY_MS;
            return;
        }
        cdc_epochs_reserve(&c->epochs, from, limit);
    }
    /* only workers whose topics are the job's table set own slots (registration order; the
     * rest, beyond 12, stay idle); the others get an empty Assign that says why */
    cdc_job_note_base_tables(c);
    cdc_job_widen_tables(c);
    n = 0;
    for (int i = 0; i < c->members.n; i++) {
        cdc_member_t *m = &c->members.m[i];
        if (!m->alive)
            continue;
        cdc_job_judge(c, m);
        if (m->verdict == CDC_TABLESET_FITS && n < CDC_PARTITIONS)
            alive[n++] = m->id;
    }
    if (n == 0) {
        if (!c->tables_blocked)
            cdc_log_error("job \"%s\" has no worker that can consume its tables: no "
                          "partition is assigned until one registers (see the refusals above)",
                          c->cfg.job);
        c->tables_blocked = true;
        return;
    }
    c->tables_blocked = false;
    for (int p = 0; p < CDC_PARTITIONS; p++)
        prev[p] = c->prev_owner[p];
    if (cdc_assign_compute(alive, (size_t)n, prev, owner_idx) != CDC_OK) {
        cdc_log_error("could not compute an assignment for %d workers", n);
        return;
    }
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        owners[p] = alive[owner_idx[p]];
        snprintf(c->owner[p], sizeof(c->owner[p]), "%s", owners[p]);
    }
    c->generation++;
    cdc_epochs_reset(&c->epochs, c->term, c->generation, owners);
    cdc_metrics_gauge_set(c->m_generation, (double)c->generation);
    send_assignments(c, 0);
    c->assigned_in_term = true;
    c->next_barrier_ms = now + c->cfg.commit_interval_ms;
    set_state(c, CDC_JOB_RUNNING);
}

/* ---- leader start / stop -------------------------------------------------------------- */

/*
 * Drops every worker: a standby must not keep their links, or workers that reach the
 * coordinators through a fixed address (a proxy, a Service) would stay attached to a
 * process that no longer leads, heartbeating into it while the new leader waits for
 * them. Closing the pipes makes them dial again and land on whoever leads now.
 */
static void drop_workers(cdc_coord_t *c)
{
    for (int i = 0; i < c->members.n; i++)
        if (c->members.m[i].alive && c->members.m[i].pipe != 0)
            cdc_msg_server_close_pipe(c->msg, c->members.m[i].pipe);
    cdc_members_clear(&c->members);
    cdc_metrics_gauge_set(c->m_workers, 0);
}

void cdc_job_become_standby(cdc_coord_t *c, const char *reason)
{
    cdc_log_warn("job \"%s\": no longer leader: %s", c->cfg.job, reason);
    drop_workers(c);
    cdc_progress_reset(&c->progress);
    cdc_epochs_reset(&c->epochs, 0, 0, NULL);
    cdc_job_clear_queue(c);
    cdc_maint_stop(c->maint); /* a running rewrite is cancelled, never committed */
    memset(c->owner, 0, sizeof(c->owner));
    cdc_tableset_clear(&c->tables); /* the next term reads it again */
    cdc_staged_index_clear(&c->staged_index);
    cdc_tableset_clear(&c->tables_missing);
    cdc_unconsumed_free(&c->unconsumed);
    cdc_metrics_gauge_set(c->m_unconsumed, 0);
    cdc_schema_memo_clear(&c->schema_memo);
    c->tables_dirty = false;
    c->term = 0;
    set_state(c, CDC_JOB_STANDBY);
    cdc_metrics_gauge_set(c->m_term, 0);
    for (int p = 0; p < CDC_PARTITIONS; p++)
        cdc_metrics_gauge_set(c->m_lag[p], -1); /* only the leader knows */
}

/* The value of the leader key (common/cluster.h, escaped through jansson); caller frees. */
char *cdc_job_leader_value(const cdc_coord_t *c)
{
    cdc_leader_record_t lr;
    snprintf(lr.id, sizeof(lr.id), "%s", c->cfg.id);
    snprintf(lr.endpoint, sizeof(lr.endpoint), "%s", c->endpoint);
    snprintf(lr.admin, sizeof(lr.admin), "%s", c->admin);
    return cdc_leader_record_json(&lr);
}

/*
 * STARTING: read latest/committed, commit what the previous leader recorded but did
 * not commit (idempotent), reserve epoch ids, then wait for workers. Retried until etcd
 * and the warehouse answer.
 */
void cdc_job_leader_start(cdc_coord_t *c, int64_t now)
{
    uint64_t latest = 0, committed = 0, from, limit;
    cdc_tableset_t tables = {0};
    bool tables_found = false;
    cdc_checkpoint_t *base = NULL;
    cdc_error_t e;
    cdc_err_t rc;
    char *value;

    if (now < c->etcd_retry_ms)
        return;
    cdc_error_clear(&e);
    if ((value = cdc_job_leader_value(c)) == NULL) {
        rc = cdc_error_set(&e, CDC_ERR_NOMEM, "out of memory");
        goto retry;
    }
    rc = cdc_store_put_leader(&c->store, value, cdc_etcd_election_lease(c->leader.el), &e);
    free(value);
    if (rc != CDC_OK)
        goto retry;
    if ((rc = cdc_store_read_heads(&c->store, &latest, &committed, &e)) != CDC_OK)
        goto retry;
    if ((rc = cdc_store_get_tables(&c->store, &tables, &tables_found, &e)) != CDC_OK)
        goto retry;
    if (latest > 0) {
        if ((rc = cdc_store_get_checkpoint(&c->store, latest, &base, &e)) != CDC_OK)
            goto retry;
        if ((rc = cdc_committer_load_pending(c->committer, base, &e)) != CDC_OK)
            goto retry;
    }
    /* the previous leader may have recorded epochs (committed, latest] without committing */
    if (latest > committed) {
        cdc_checkpoint_t **recs = NULL;
        size_t nrecs = 0;
        if ((rc = cdc_store_list_checkpoints(&c->store, committed + 1, latest, &recs, &nrecs,
                                             &e)) != CDC_OK)
            goto retry;
        cdc_commit_result_t res;
        for (size_t i = 0; i < nrecs && rc == CDC_OK; i++)
            rc = cdc_committer_load_pending(c->committer, recs[i], &e);
        /* one group: a table gets one snapshot for all of them (commit.h) */
        if (rc == CDC_OK && nrecs > 0)
            rc = cdc_committer_commit_group(c->committer, recs, nrecs, &res, &e);
        if (rc == CDC_OK && nrecs > 0)
            cdc_log_info("leader start: checkpoints %" PRIu64 " to %" PRIu64
                         " of the previous term committed (%d snapshots, %d tables already "
                         "had them)",
                         recs[0]->epoch, recs[nrecs - 1]->epoch, res.tables_committed,
                         res.tables_skipped);
        for (size_t i = 0; i < nrecs; i++)
            cdc_checkpoint_free(recs[i]);
        free(recs);
        if (rc != CDC_OK)
            goto retry;
    }
    if (latest > committed) {
        if ((rc = cdc_store_put_committed(&c->store, latest, &e)) != CDC_OK)
            goto retry;
        committed = latest;
    }
    {
        uint64_t min_next = (latest > committed ? latest : committed) + 1;
        if ((rc = cdc_store_reserve_epochs(&c->store, min_next, EPOCH_BLOCK, &from, &limit, &e)) !=
            CDC_OK)
            goto retry;
    }
    cdc_schema_memo_clear(&c->schema_memo); /* this term's first record carries every schema */
    cdc_checkpoint_free(c->base);
    c->base = base;
    base = NULL;
    c->last_recorded = latest;
    c->last_committed = committed;
    cdc_tableset_move(&c->tables, &tables);
    cdc_staged_index_clear(&c->staged_index);
    c->tables_dirty = !tables_found;
    c->tables_blocked = false;
    cdc_job_note_base_tables(c); /* the job committed them, whatever the record says */
    cdc_epochs_init(&c->epochs, c->cfg.job);
    cdc_epochs_reserve(&c->epochs, from, limit);
    memset(c->prev_owner, 0, sizeof(c->prev_owner));
    if (c->base)
        for (int p = 0; p < CDC_PARTITIONS; p++)
            snprintf(c->prev_owner[p], sizeof(c->prev_owner[p]), "%s",
                     c->base->partitions[p].owner);
    memset(c->owner, 0, sizeof(c->owner));
    /*
     * generation is never reset: the same process can win the same term again (its
     * lease survived an etcd outage) and a (term, generation) pair must never repeat.
     */
    c->assigned_in_term = false;
    /* maintenance (its own thread) starts once the previous term's commits are done */
    cdc_maint_start(c->maint, c->term);
    c->restart_at_ms = now;
    c->grace_until_ms = now + c->cfg.rebalance_grace_ms;
    snprintf(c->recovery_reason, sizeof(c->recovery_reason), "new leader term %" PRIu64, c->term);
    cdc_log_info("leader of job \"%s\" in term %" PRIu64 ": latest checkpoint %" PRIu64
                 ", committed %" PRIu64 ", epoch ids from %" PRIu64 ", %d tables",
                 c->cfg.job, c->term, latest, committed, from, c->tables.n);
    set_state(c, CDC_JOB_RECOVERING);
    return;
retry:
    cdc_checkpoint_free(base);
    cdc_tableset_clear(&tables);
    cdc_metrics_counter_inc(c->m_etcd_errors);
    if (rc == CDC_ERR_FENCED) {
        cdc_leader_step_down(&c->leader, e.msg);
        cdc_job_become_standby(c, e.msg);
        return;
    }
    cdc_log_warn("leader start of job \"%s\" delayed: %s", c->cfg.job, e.msg);
    c->etcd_retry_ms = now + ETCD_RETRY_MS;
}

/* ---- messages ------------------------------------------------------------------------ */

/* Refuses a registration (admission.h): logged, counted, in /status; the pipe is dropped
 * (the Reject may not make it out first, the log line says why). */
static void refuse(cdc_coord_t *c, uint32_t pipe, const char *worker, cdc_admission_reason_t r)
{
    static const char *const why[CDC_ADMISSION_REASONS] = {
        [CDC_ADMISSION_NO_PROOF] = "it did not prove the worker secret within the deadline",
        [CDC_ADMISSION_WRONG_PROOF] = "its proof does not match the worker secret",
        [CDC_ADMISSION_UNCHALLENGED] = "its proof answers no challenge of its connection",
    };
    char reason[160];

    cdc_log_warn("refused the registration of worker \"%s\" on pipe %u: %s (hint: give every "
                 "worker the coordinator's --worker-secret-file; docs/security.md)",
                 worker, pipe, why[r]);
    cdc_metrics_counter_inc(c->m_refused[r]);
    snprintf(reason, sizeof(reason), "authentication failed: %s", why[r]);
    cdc_job_send_reject(c, pipe, reason);
    cdc_msg_server_close_pipe(c->msg, pipe);
}

/* Whether the Register may go on to membership: always without --worker-secret; with it,
 * only with a valid proof (a Register without one is answered with a Challenge). */
static bool admit(cdc_coord_t *c, const Cdc__Register *r, uint32_t pipe, int64_t now)
{
    uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN];
    cdc_admission_verdict_t verdict;
    cdc_admission_reason_t reason;
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Challenge ch = CDC__CHALLENGE__INIT;
    cdc_error_t e;
    const cdc_member_t *m = cdc_members_by_pipe(&c->members, pipe);

    /* a Register again on a connection that proved the secret (the worker answered two
     * challenges, or lost our Assign): the same worker asks again */
    if (m != NULL && m->alive && r->worker_id != NULL && strcmp(m->id, r->worker_id) == 0 &&
        m->incarnation == r->incarnation)
        return true;
    if (cdc_admission_check(&c->admission, pipe, r->worker_id, r->incarnation, r->admin_endpoint,
                            r->proof.data, r->proof.len, now, nonce, &verdict, &reason,
                            &e) != CDC_OK) {
        cdc_log_error("could not challenge worker \"%s\" on pipe %u: %s", r->worker_id, pipe,
                      e.msg);
        cdc_msg_server_close_pipe(c->msg, pipe);
        return false;
    }
    switch (verdict) {
    case CDC_ADMISSION_ADMIT:
        return true;
    case CDC_ADMISSION_CHALLENGE:
        ch.nonce.data = nonce;
        ch.nonce.len = sizeof(nonce);
        env.body_case = CDC__ENVELOPE__BODY_CHALLENGE;
        env.challenge = &ch;
        cdc_job_send_env(c, pipe, &env);
        return false;
    case CDC_ADMISSION_REFUSE:
        refuse(c, pipe, r->worker_id ? r->worker_id : "", reason);
        return false;
    }
    return false;
}

static void on_register(cdc_coord_t *c, const Cdc__Register *r, uint32_t pipe, int64_t now)
{
    uint32_t old_pipe = 0;
    cdc_register_result_t res;
    bool was_alive, owned;
    cdc_member_t *m;
    cdc_error_t e;

    if (c->state == CDC_JOB_STANDBY || c->state == CDC_JOB_STARTING) {
        reject_not_leader(c, pipe);
        return;
    }
    if (!admit(c, r, pipe, now))
        return;
    was_alive = cdc_members_is_alive(&c->members, r->worker_id ? r->worker_id : "");
    owned = cdc_job_owns_any(c, r->worker_id ? r->worker_id : "");
    res = cdc_members_register(&c->members, r->worker_id, r->incarnation, pipe, r->admin_endpoint,
                               now, &old_pipe);
    switch (res) {
    case CDC_REGISTER_INVALID:
    case CDC_REGISTER_NOMEM: {
        char reason[200];
        if (res == CDC_REGISTER_NOMEM)
            snprintf(reason, sizeof(reason), "coordinator \"%s\" is out of memory", c->cfg.id);
        else if (r->worker_id == NULL || r->worker_id[0] == '\0')
            snprintf(reason, sizeof(reason), "empty worker id (option --id)");
        else
            snprintf(reason, sizeof(reason),
                     "worker id \"%.40s...\" is %zu bytes long, at most %d are allowed "
                     "(option --id)",
                     r->worker_id, strlen(r->worker_id), CDC_WORKER_ID_MAX - 1);
        cdc_log_error("refused the registration of worker \"%s\" on pipe %u: %s",
                      r->worker_id != NULL ? r->worker_id : "", pipe, reason);
        cdc_job_send_reject(c, pipe, reason);
        close_later(c, pipe, true); /* closing at once would drop the Reject */
        return;
    }
    case CDC_REGISTER_SAME:
        /* a worker that lost our Assign asks again */
        if (c->state == CDC_JOB_RUNNING)
            send_assignments(c, pipe);
        return;
    case CDC_REGISTER_NEW:
    case CDC_REGISTER_REPLACED:
        break;
    }
    if (old_pipe)
        cdc_msg_server_close_pipe(c->msg, old_pipe);
    cdc_log_info("worker \"%s\" registered (incarnation %" PRIu64 ", pipe %u%s, %zu topics)",
                 r->worker_id, r->incarnation, pipe,
                 res == CDC_REGISTER_REPLACED ? ", replacing" : "", r->n_topics);
    cdc_metrics_gauge_set(c->m_workers, (double)cdc_members_alive_count(&c->members));
    m = cdc_members_by_id(&c->members, r->worker_id);
    if (cdc_members_note_topics(m, (const char *const *)r->topics, r->n_topics, r->follows_tables,
                                &e) != CDC_OK)
        cdc_log_warn("worker \"%s\": %s", r->worker_id, e.msg);
    if (c->state == CDC_JOB_RUNNING && !(was_alive && owned)) {
        /* a worker the set refuses changes nothing for the others: no rebalance, its Assign
         * (empty) says why. The set widens at assignments only, and a joining worker cannot
         * widen it: the workers that own slots lack what it has more. */
        cdc_job_judge(c, m);
        if (m->verdict != CDC_TABLESET_FITS) {
            send_assignments(c, pipe);
            return;
        }
    }
    if (c->state == CDC_JOB_RUNNING) {
        char why[256];
        snprintf(why, sizeof(why), "worker \"%s\" %s", r->worker_id,
                 was_alive ? "restarted" : "joined");
        /* a restart of an owner is a failure; a join is a plain rebalance */
        cdc_job_recover(c, why, was_alive && owned);
        /* a joining worker needs no grace wait */
        c->grace_until_ms = now;
    } else if (c->state == CDC_JOB_FAILED) {
        cdc_job_send_reject(c, pipe, "job FAILED: restart strategy exhausted");
    }
}

/* The dead letters a heartbeat reports, kept with its member for /status. */
static void note_dead_letters(cdc_member_t *m, const Cdc__Heartbeat *hb)
{
    const char *classes[CDC_MEMBER_DLQ_CLASSES];
    uint64_t records[CDC_MEMBER_DLQ_CLASSES];
    size_t n = 0;

    for (size_t i = 0; m != NULL && i < hb->n_dead_letters && n < CDC_MEMBER_DLQ_CLASSES; i++) {
        classes[n] = hb->dead_letters[i]->error_class;
        records[n++] = hb->dead_letters[i]->records;
    }
    if (m != NULL && n > 0)
        cdc_members_note_dlq(m, classes, records, n);
}

/* What a heartbeat reports besides being alive: dead letters, and the offer of a worker
 * that follows the job's tables (a wider offer may widen the set). */
static void note_heartbeat(cdc_coord_t *c, cdc_member_t *m, const Cdc__Heartbeat *hb)
{
    note_dead_letters(m, hb);
    if (m != NULL)
        m->large_event_bytes = hb->large_event_bytes;
    if (m != NULL && cdc_members_note_offer(m, (const char *const *)hb->topics, hb->n_topics))
        cdc_job_offers_changed(c);
}

void cdc_job_on_message(cdc_coord_t *c, const Cdc__Envelope *env, uint32_t pipe, int64_t now)
{
    switch (env->body_case) {
    case CDC__ENVELOPE__BODY_REGISTER:
        on_register(c, env->register_, pipe, now);
        break;
    case CDC__ENVELOPE__BODY_HEARTBEAT:
        if (c->state == CDC_JOB_STANDBY || c->state == CDC_JOB_STARTING)
            reject_not_leader(c, pipe);
        else if (!cdc_members_heartbeat(&c->members, pipe, now) &&
                 !cdc_admission_pending(&c->admission, pipe)) /* it is answering a challenge */
            cdc_job_send_reject(c, pipe, "unknown worker: register first");
        else
            note_heartbeat(c, cdc_members_by_pipe(&c->members, pipe), env->heartbeat);
        break;
    case CDC__ENVELOPE__BODY_ACK:
        if (c->state == CDC_JOB_STANDBY)
            reject_not_leader(c, pipe);
        else
            cdc_job_on_ack(c, env->ack, pipe);
        break;
    default:
        cdc_log_warn("unexpected %s message from pipe %u", cdc_msg_body_name(env), pipe);
        break;
    }
}

void cdc_job_drain(cdc_coord_t *c, int wait_ms)
{
    cdc_msg_event_t ev;

    for (int i = 0; i < 1024; i++) {
        Cdc__Envelope *env = NULL;
        uint32_t pipe = 0;
        cdc_error_t e;
        cdc_err_t rc = cdc_msg_server_recv(c->msg, i == 0 ? wait_ms : 0, &env, &pipe, &e);
        if (rc != CDC_OK)
            break;
        cdc_job_on_message(c, env, pipe, cdc_clock_mono_ms());
        cdc_msg_free(env);
    }
    while (cdc_msg_server_poll_event(c->msg, &ev)) {
        cdc_member_t *m;
        if (ev.type != CDC_MSG_PIPE_REMOVED)
            continue;
        cdc_admission_forget(&c->admission, ev.pipe);
        m = cdc_members_by_pipe(&c->members, ev.pipe);
        if (m != NULL)
            lose_worker(c, m, "connection lost");
    }
}

/* ---- timers ---------------------------------------------------------------------------- */

/* The longest grace time the live owners of the missing slots ask for with a large
 * event in their last heartbeat (0: none); logged once per epoch. */
static int64_t large_event_grace(cdc_coord_t *c, cdc_pset_t missing, uint64_t epoch)
{
    static uint64_t logged_epoch;
    int64_t grace = 0;
    const cdc_member_t *who = NULL;
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        const cdc_member_t *m;
        if (!(missing & (1u << p)))
            continue;
        m = cdc_members_by_id(&c->members, c->owner[p]);
        if (m != NULL && m->alive && cdc_evchunk_grace_ms(m->large_event_bytes) > grace) {
            grace = cdc_evchunk_grace_ms(m->large_event_bytes);
            who = m;
        }
    }
    if (who != NULL && logged_epoch != epoch) {
        logged_epoch = epoch;
        cdc_log_info("epoch %" PRIu64 ": worker \"%s\" works on a large event of %" PRIu64
                     " bytes: its ack deadline is %" PRId64 " ms longer",
                     epoch, who->id, who->large_event_bytes, grace);
    }
    return grace;
}

void cdc_job_check_liveness(cdc_coord_t *c, int64_t now)
{
    for (int i = 0; i < c->members.n; i++) {
        cdc_member_t *m = &c->members.m[i];
        if (m->alive && now - m->last_heartbeat_ms > c->cfg.heartbeat_timeout_ms)
            lose_worker(c, m, "missed heartbeats");
    }
    if (c->state == CDC_JOB_RUNNING) {
        uint64_t epoch;
        cdc_pset_t missing;
        int64_t grace = 0;
        /* owners of the missing slots working on a large event get its grace time
         * (docs/worker.md, "Large rows"); their heartbeats say so */
        if (cdc_epochs_overdue(&c->epochs, now, c->cfg.ack_deadline_ms, &epoch, &missing))
            grace = large_event_grace(c, missing, epoch);
        if (cdc_epochs_overdue(&c->epochs, now, c->cfg.ack_deadline_ms + grace, &epoch, &missing)) {
            char why[256];
            snprintf(why, sizeof(why),
                     "epoch %" PRIu64 " missed the ack deadline (%" PRId64
                     " ms, partitions 0x%03x missing)",
                     epoch, c->cfg.ack_deadline_ms, missing);
            for (int p = 0; p < CDC_PARTITIONS; p++) {
                cdc_member_t *m;
                if (!(missing & (1u << p)))
                    continue;
                m = cdc_members_by_id(&c->members, c->owner[p]);
                if (m && m->alive) {
                    cdc_members_lose(m, now, "missed the ack deadline");
                    cdc_msg_server_close_pipe(c->msg, m->pipe);
                }
            }
            cdc_metrics_gauge_set(c->m_workers, (double)cdc_members_alive_count(&c->members));
            cdc_job_recover(c, why, true);
        }
    }
    cdc_members_forget(&c->members, now, 10 * 60 * 1000);
}

/* ---- the loop ------------------------------------------------------------------------- */

/*
 * One loop iteration as leader took ms: everything in it (commits, orphan scans, expiry)
 * delays barriers and acks, so the longest one is exported and a slow one logged.
 */
static void observe_stall(cdc_coord_t *c, int64_t ms)
{
    cdc_metrics_histogram_observe(c->m_stall, (double)ms / 1000.0);
    if (ms > c->stall_max_ms) {
        c->stall_max_ms = ms;
        cdc_metrics_gauge_set(c->m_stall_max, (double)ms / 1000.0);
    }
    if (ms > SLOW_MAINTENANCE_MS)
        cdc_log_warn("coordinator loop stalled for %" PRId64 " ms (barriers waited)", ms);
}

/*
 * How long the loop may wait for a message before its timers need it: until the next
 * barrier or commit retry, at most LOOP_WAIT_MAX_MS (heartbeat checks, status); a
 * standby only watches the election. Every timed receive costs NNG 1.5.2 a busy wait on
 * the clock, so waking 200 times a second kept an idle coordinator at 16% of a core.
 */
int cdc_job_loop_wait_ms(const cdc_coord_t *c, int64_t now)
{
    int64_t w = LOOP_WAIT_MAX_MS;

    if (c->state == CDC_JOB_STANDBY)
        return STANDBY_WAIT_MS;
    if (c->state != CDC_JOB_RUNNING)
        return 20; /* starting or recovering: assignment and grace timers */
    if (c->nqueue > 0)
        w = c->commit_retry_ms - now < w ? c->commit_retry_ms - now : w;
    if (cdc_job_commit_running(c) && w > COMMIT_LOOK_MS)
        w = COMMIT_LOOK_MS; /* the round's end is seen within COMMIT_LOOK_MS */
    w = c->next_barrier_ms - now < w ? c->next_barrier_ms - now : w;
    return w < 0 ? 0 : (int)w;
}

void cdc_coord_run(cdc_coord_t *c)
{
    set_state(c, CDC_JOB_STANDBY);
    while (!*c->stop) {
        int64_t now = cdc_clock_mono_ms(), began = now;
        cdc_leader_event_t ev;

        cdc_health_beat(&c->health);
        cdc_tls_check(c->tls);
        ev = cdc_leader_tick(&c->leader, now);

        if (ev == CDC_LEADER_ELECTED) {
            c->term = (uint64_t)c->leader.term;
            cdc_committer_set_term(c->committer, c->term);
            cdc_metrics_gauge_set(c->m_term, (double)c->term);
            cdc_restart_init(&c->restart, (int)c->cfg.restart_max_failures,
                             c->cfg.restart_interval_ms, c->cfg.restart_delay_ms);
            c->etcd_retry_ms = 0;
            set_state(c, CDC_JOB_STARTING);
        } else if (ev == CDC_LEADER_LOST) {
            cdc_job_become_standby(c, c->leader.last_error);
        }
        if (c->state == CDC_JOB_STARTING)
            cdc_job_leader_start(c, now);
        cdc_presence_tick(&c->presence, c->state != CDC_JOB_STANDBY, (int64_t)c->term, now);

        cdc_job_drain(c, cdc_job_loop_wait_ms(c, now));
        now = cdc_clock_mono_ms();
        if (c->admission.npending > 0) {
            cdc_admission_pending_t late[16];
            int n = cdc_admission_expire(&c->admission, now, late, 16);
            for (int i = 0; i < n; i++)
                refuse(c, late[i].pipe, late[i].worker, CDC_ADMISSION_NO_PROOF);
        }
        if (c->state != CDC_JOB_STANDBY) {
            cdc_job_check_liveness(c, now);
            if (c->state == CDC_JOB_RECOVERING)
                cdc_job_try_assign(c, now);
            cdc_job_maybe_barrier(c, now);
            if (c->state != CDC_JOB_STANDBY && c->state != CDC_JOB_STARTING)
                cdc_job_process_queue(c, cdc_clock_mono_ms());
            cdc_job_check_table_topics(c, now);
            cdc_job_check_unconsumed(c, now);
            if (c->state == CDC_JOB_RUNNING || c->state == CDC_JOB_RECOVERING)
                cdc_job_persist_tables(c, now);
            if (c->state == CDC_JOB_RUNNING || c->state == CDC_JOB_RECOVERING)
                cdc_job_maybe_orphans(c, now);
        }
        cdc_job_take_table_requests(c); /* (a standby answers that it does not lead) */
        if (c->nclosing > 0)
            cdc_job_close_rejected(c, now);
        if (c->state != CDC_JOB_STANDBY)
            cdc_dashboard_sample(c, now);
        if (c->state != CDC_JOB_STANDBY)
            observe_stall(c, cdc_clock_mono_ms() - began);
        if (now >= c->next_status_ms) {
            cdc_admin_publish(c);
            /* a standby asks etcd who leads for its status: not that often */
            c->next_status_ms = now + (c->state == CDC_JOB_STANDBY ? 1000 : 200);
        }
    }
    cdc_log_info("coordinator \"%s\" stopping", c->cfg.id);
}
