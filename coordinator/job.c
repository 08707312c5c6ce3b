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
 */
#include "coordinator/coordinator.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cluster.h"
#include "common/log.h"

#define EPOCH_BLOCK 1000
#define ETCD_RETRY_MS 300
#define COMMIT_RETRY_MS 300
#define MAX_OPEN_BEFORE_PAUSE 8
#define SLOW_MAINTENANCE_MS 1000
#define LOOP_WAIT_MAX_MS 50       /* longest message wait of a running leader's loop */
#define STANDBY_WAIT_MS 100       /* a standby's message wait */
#define REJECT_CLOSE_DELAY_MS 200 /* a standby closes a rejected worker's pipe after this */

const char *cdc_job_state_name(cdc_job_state_t s)
{
    switch (s) {
    case CDC_JOB_STANDBY:
        return "STANDBY";
    case CDC_JOB_STARTING:
        return "STARTING";
    case CDC_JOB_RECOVERING:
        return "RECOVERING";
    case CDC_JOB_RUNNING:
        return "RUNNING";
    case CDC_JOB_FAILED:
        return "FAILED";
    }
    return "UNKNOWN";
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Debug fault injection (--fault / CDC_FAULT): exits without cleanup at a named point. */
static void fault_point(cdc_coord_t *c, const char *name)
{
    if (c->cfg.fault != NULL && strcmp(c->cfg.fault, name) == 0) {
        cdc_log_error("fault injection: exiting at \"%s\"", name);
        _exit(86);
    }
}

/* Debug fault injection: stalls the main loop for ms at a named point (a slow scan). */
static void fault_stall(cdc_coord_t *c, const char *name, int64_t ms)
{
    if (c->cfg.fault != NULL && strcmp(c->cfg.fault, name) == 0) {
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        cdc_log_warn("fault injection: stalling %" PRId64 " ms at \"%s\"", ms, name);
        nanosleep(&ts, NULL);
    }
}

static void set_state(cdc_coord_t *c, cdc_job_state_t s)
{
    if (c->state != s)
        cdc_log_info("job \"%s\" state %s -> %s", c->cfg.job, cdc_job_state_name(c->state),
                     cdc_job_state_name(s));
    c->state = s;
    atomic_store(&c->state_seen, (int)s);
    cdc_metrics_gauge_set(c->m_state, (double)s);
}

/* ---- sending ----------------------------------------------------------------------- */

static void send_env(cdc_coord_t *c, uint32_t pipe, const Cdc__Envelope *env)
{
    cdc_error_t e;

    if (pipe == 0)
        return;
    if (cdc_msg_server_send(c->msg, pipe, env, &e) != CDC_OK)
        cdc_log_warn("could not send %s to pipe %u: %s", cdc_msg_body_name(env), pipe, e.msg);
}

static void send_reject(cdc_coord_t *c, uint32_t pipe, const char *reason)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Reject r = CDC__REJECT__INIT;

    r.reason = (char *)reason;
    r.term = c->term;
    r.generation = c->generation;
    env.body_case = CDC__ENVELOPE__BODY_REJECT;
    env.reject = &r;
    send_env(c, pipe, &env);
}

/*
 * A worker talks to us while we do not lead. A standby also closes the pipe: a worker
 * that dials a fixed address (a fault proxy, a Service) only finds the leader by
 * dialing again; one that follows the leader key redials on its own anyway. While
 * STARTING we lead already: the worker registers again once we are ready.
 */
static void reject_not_leader(cdc_coord_t *c, uint32_t pipe)
{
    send_reject(c, pipe, "not the leader");
    if (c->state != CDC_JOB_STANDBY)
        return;
    for (int i = 0; i < c->nclosing; i++)
        if (c->closing[i].pipe == pipe)
            return; /* already due */
    if (c->nclosing == CDC_CLOSING_MAX) {
        cdc_msg_server_close_pipe(c->msg, pipe); /* a flood of dialers: close at once */
        return;
    }
    c->closing[c->nclosing].pipe = pipe;
    c->closing[c->nclosing].due_ms = mono_ms() + REJECT_CLOSE_DELAY_MS;
    c->nclosing++;
}

/* Closes the rejected pipes whose delay has passed (forgets them if we lead meanwhile:
 * the worker registers again on the same pipe). */
static void close_rejected(cdc_coord_t *c, int64_t now)
{
    int kept = 0;
    for (int i = 0; i < c->nclosing; i++) {
        if (c->state != CDC_JOB_STANDBY)
            continue;
        if (now >= c->closing[i].due_ms)
            cdc_msg_server_close_pipe(c->msg, c->closing[i].pipe);
        else
            c->closing[kept++] = c->closing[i];
    }
    c->nclosing = kept;
}

static void broadcast(cdc_coord_t *c, const Cdc__Envelope *env)
{
    for (int i = 0; i < c->members.n; i++)
        if (c->members.m[i].alive)
            send_env(c, c->members.m[i].pipe, env);
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
    broadcast(c, &env);
}

static bool owns_any(const cdc_coord_t *c, const char *id)
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
        env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
        env.assign = &a;
        send_env(c, m->pipe, &env);
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
static void recover(cdc_coord_t *c, const char *reason, bool count_failure)
{
    int64_t now = mono_ms(), at = now + (count_failure ? 0 : 100); /* joins coalesce */
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
    bool owned = owns_any(c, m->id);

    cdc_log_warn("worker \"%s\" (incarnation %" PRIu64 ") lost: %s", m->id, m->incarnation, reason);
    cdc_members_lose(m, mono_ms(), reason);
    if (pipe)
        cdc_msg_server_close_pipe(c->msg, pipe);
    cdc_metrics_gauge_set(c->m_workers, (double)cdc_members_alive_count(&c->members));
    if (owned && (c->state == CDC_JOB_RUNNING || c->state == CDC_JOB_RECOVERING)) {
        char why[256];
        snprintf(why, sizeof(why), "worker \"%s\" lost: %s", m->id, reason);
        recover(c, why, true);
    }
}

/* RECOVERING -> RUNNING when the restart delay passed and the workers are there. */
static void try_assign(cdc_coord_t *c, int64_t now)
{
    const char *alive[CDC_MEMBERS_MAX], *prev[CDC_PARTITIONS], *owners[CDC_PARTITIONS];
    int n, owner_idx[CDC_PARTITIONS];
    bool all_back = true;

    if (now < c->restart_at_ms)
        return;
    n = cdc_members_alive_ids(&c->members, alive, CDC_MEMBERS_MAX);
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
    if (n > CDC_PARTITIONS)
        n = CDC_PARTITIONS; /* the rest stay idle: alive[] order is registration order */
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

static void clear_queue(cdc_coord_t *c)
{
    for (int i = 0; i < c->nqueue; i++)
        cdc_checkpoint_free(c->queue[i].rec);
    c->nqueue = 0;
}

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
    cdc_members_init(&c->members);
    cdc_metrics_gauge_set(c->m_workers, 0);
}

static void become_standby(cdc_coord_t *c, const char *reason)
{
    cdc_log_warn("job \"%s\": no longer leader: %s", c->cfg.job, reason);
    drop_workers(c);
    cdc_progress_reset(&c->progress);
    cdc_epochs_reset(&c->epochs, 0, 0, NULL);
    clear_queue(c);
    memset(c->owner, 0, sizeof(c->owner));
    c->term = 0;
    set_state(c, CDC_JOB_STANDBY);
    cdc_metrics_gauge_set(c->m_term, 0);
}

static void record_history(cdc_coord_t *c, const cdc_checkpoint_t *rec, int64_t duration_ms,
                           int tables)
{
    cdc_ckpt_summary_t *h;

    if (c->nhistory == CDC_HISTORY_MAX) {
        memmove(&c->history[0], &c->history[1], (CDC_HISTORY_MAX - 1) * sizeof(c->history[0]));
        c->nhistory--;
    }
    h = &c->history[c->nhistory++];
    memset(h, 0, sizeof(*h));
    h->epoch = rec->epoch;
    h->completed_wall_ms = wall_ms();
    h->duration_ms = duration_ms;
    h->tables = tables;
    cdc_checkpoint_totals(rec, &h->bytes, &h->records, &h->data_files, &h->delete_files);
}

/*
 * STARTING: read latest/committed, commit what the previous leader recorded but did
 * not commit (idempotent), reserve epoch ids, then wait for workers. Retried until etcd
 * and the warehouse answer.
 */
static void leader_start(cdc_coord_t *c, int64_t now)
{
    uint64_t latest = 0, committed = 0, from, limit;
    cdc_checkpoint_t *base = NULL;
    cdc_error_t e;
    cdc_err_t rc;
    char value[768];

    if (now < c->etcd_retry_ms)
        return;
    cdc_error_clear(&e);
    snprintf(value, sizeof(value),
             "{\"id\":\"%s\",\"endpoint\":\"%s\",\"admin\":\"%s\",\"term\":%" PRIu64 "}", c->cfg.id,
             c->endpoint, c->admin, c->term);
    if ((rc = cdc_store_put_leader(&c->store, value, cdc_etcd_election_lease(c->leader.el), &e)) !=
        CDC_OK)
        goto retry;
    if ((rc = cdc_store_read_heads(&c->store, &latest, &committed, &e)) != CDC_OK)
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
        for (size_t i = 0; i < nrecs && rc == CDC_OK; i++) {
            cdc_commit_result_t res;
            rc = cdc_committer_load_pending(c->committer, recs[i], &e);
            if (rc == CDC_OK)
                rc = cdc_committer_commit(c->committer, recs[i], &res, &e);
            if (rc == CDC_OK)
                cdc_log_info("leader start: checkpoint %" PRIu64 " of the previous term "
                             "committed (%d tables, %d already had it)",
                             recs[i]->epoch, res.tables_committed, res.tables_skipped);
        }
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
    cdc_checkpoint_free(c->base);
    c->base = base;
    base = NULL;
    c->last_recorded = latest;
    c->last_committed = committed;
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
    /* maintenance reads every table (slow at first): not while the term gets going */
    c->next_orphan_ms = now + c->cfg.orphan_interval_ms;
    c->next_expire_ms = now + c->cfg.orphan_interval_ms;
    c->restart_at_ms = now;
    c->grace_until_ms = now + c->cfg.rebalance_grace_ms;
    snprintf(c->recovery_reason, sizeof(c->recovery_reason), "new leader term %" PRIu64, c->term);
    cdc_log_info("leader of job \"%s\" in term %" PRIu64 ": latest checkpoint %" PRIu64
                 ", committed %" PRIu64 ", epoch ids from %" PRIu64,
                 c->cfg.job, c->term, latest, committed, from);
    set_state(c, CDC_JOB_RECOVERING);
    return;
retry:
    cdc_checkpoint_free(base);
    cdc_metrics_counter_inc(c->m_etcd_errors);
    if (rc == CDC_ERR_FENCED) {
        cdc_leader_step_down(&c->leader, e.msg);
        become_standby(c, e.msg);
        return;
    }
    cdc_log_warn("leader start of job \"%s\" delayed: %s", c->cfg.job, e.msg);
    c->etcd_retry_ms = now + ETCD_RETRY_MS;
}

/* ---- the commit pipeline ------------------------------------------------------------- */

static void send_committed(cdc_coord_t *c, uint64_t epoch)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Committed m = CDC__COMMITTED__INIT;

    m.term = c->term;
    m.epoch = epoch;
    env.body_case = CDC__ENVELOPE__BODY_COMMITTED;
    env.committed = &m;
    broadcast(c, &env);
}

static void process_queue(cdc_coord_t *c, int64_t now)
{
    while (c->nqueue > 0 && now >= c->commit_retry_ms) {
        cdc_pending_commit_t *q = &c->queue[0];
        cdc_error_t e;
        cdc_err_t rc;
        cdc_commit_result_t res;

        cdc_error_clear(&e);
        if (!q->recorded) {
            char *json = cdc_checkpoint_to_json(q->rec, true);
            if (json != NULL && (int64_t)q->rec->nfiles > c->cfg.inline_files_max &&
                q->rec->files_path == NULL) {
                free(json);
                json = NULL;
                if ((rc = cdc_committer_put_pending(c->committer, q->rec, &e)) != CDC_OK) {
                    cdc_log_warn("could not write pending file list of checkpoint %" PRIu64 ": %s",
                                 q->rec->epoch, e.msg);
                    snprintf(c->last_commit_error, sizeof(c->last_commit_error), "%s", e.msg);
                    c->commit_retry_ms = now + COMMIT_RETRY_MS;
                    return;
                }
            }
            if (json == NULL)
                json = cdc_checkpoint_to_json(q->rec, q->rec->files_path == NULL);
            if (json == NULL) {
                c->commit_retry_ms = now + COMMIT_RETRY_MS;
                return;
            }
            int64_t t_rec = mono_ms();
            rc = cdc_store_put_checkpoint(&c->store, q->rec->epoch, json, &e);
            q->record_ms = mono_ms() - t_rec;
            free(json);
            if (rc == CDC_ERR_FENCED) {
                cdc_leader_step_down(&c->leader, e.msg);
                become_standby(c, e.msg);
                return;
            }
            if (rc != CDC_OK) {
                /* etcd down: commits pause, nothing is lost, retried after */
                cdc_metrics_counter_inc(c->m_etcd_errors);
                if (q->attempts++ % 10 == 0)
                    cdc_log_warn("could not record checkpoint %" PRIu64 " in etcd: %s",
                                 q->rec->epoch, e.msg);
                snprintf(c->last_commit_error, sizeof(c->last_commit_error), "%s", e.msg);
                c->commit_retry_ms = now + ETCD_RETRY_MS;
                return;
            }
            q->recorded = true;
            q->attempts = 0;
            c->last_recorded = q->rec->epoch;
            cdc_metrics_histogram_observe(c->m_record_latency,
                                          (double)(mono_ms() - q->barrier_mono) / 1000.0);
            fault_point(c, "after-checkpoint-record");
        }
        {
            int64_t t_commit = mono_ms();
            rc = cdc_committer_commit(c->committer, q->rec, &res, &e);
            q->commit_ms = mono_ms() - t_commit;
        }
        if (rc == CDC_ERR_FENCED) {
            cdc_leader_step_down(&c->leader, e.msg);
            become_standby(c, e.msg);
            return;
        }
        if (rc != CDC_OK) {
            cdc_metrics_counter_inc(c->m_commit_errors);
            if (q->attempts++ % 10 == 0)
                cdc_log_warn("could not commit checkpoint %" PRIu64 " to Iceberg: %s",
                             q->rec->epoch, e.msg);
            snprintf(c->last_commit_error, sizeof(c->last_commit_error), "%s", e.msg);
            c->commit_retry_ms = now + COMMIT_RETRY_MS;
            return;
        }
        fault_point(c, "after-iceberg-commit");
        rc = cdc_store_put_committed(&c->store, q->rec->epoch, &e);
        if (rc == CDC_ERR_FENCED) {
            cdc_leader_step_down(&c->leader, e.msg);
            become_standby(c, e.msg);
            return;
        }
        if (rc != CDC_OK) {
            cdc_metrics_counter_inc(c->m_etcd_errors);
            snprintf(c->last_commit_error, sizeof(c->last_commit_error), "%s", e.msg);
            c->commit_retry_ms = now + ETCD_RETRY_MS; /* the commit is idempotent */
            return;
        }
        c->last_commit_error[0] = '\0';
        c->last_committed = q->rec->epoch;
        send_committed(c, q->rec->epoch);
        {
            int64_t dur = mono_ms() - q->barrier_mono;
            cdc_metrics_histogram_observe(c->m_latency, (double)dur / 1000.0);
            cdc_metrics_counter_inc(c->m_committed);
            cdc_metrics_gauge_set(c->m_last_epoch, (double)q->rec->epoch);
            record_history(c, q->rec, dur, res.tables_committed);
            cdc_log_debug("checkpoint %" PRIu64 " committed in %" PRId64 " ms (acks %" PRId64
                          " ms, etcd record %" PRId64 " ms, iceberg %" PRId64 " ms, %d tables)",
                          q->rec->epoch, dur, q->rec->completed_ms - q->rec->barrier_ms,
                          q->record_ms, q->commit_ms, res.tables_committed);
        }
        if (q->rec->epoch % 16 == 0 && c->cfg.checkpoints_retained > 0 &&
            q->rec->epoch > (uint64_t)c->cfg.checkpoints_retained) {
            uint64_t keep = q->rec->epoch - (uint64_t)c->cfg.checkpoints_retained;
            cdc_store_prune(&c->store, keep, &e);
            cdc_committer_prune_pending(c->committer, keep);
        }
        cdc_checkpoint_free(q->rec);
        memmove(&c->queue[0], &c->queue[1], (size_t)(c->nqueue - 1) * sizeof(c->queue[0]));
        c->nqueue--;
    }
}

/* ---- messages ------------------------------------------------------------------------ */

static void on_register(cdc_coord_t *c, const Cdc__Register *r, uint32_t pipe, int64_t now)
{
    uint32_t old_pipe = 0;
    cdc_register_result_t res;
    bool was_alive, owned;

    if (c->state == CDC_JOB_STANDBY || c->state == CDC_JOB_STARTING) {
        reject_not_leader(c, pipe);
        return;
    }
    was_alive = cdc_members_is_alive(&c->members, r->worker_id ? r->worker_id : "");
    owned = owns_any(c, r->worker_id ? r->worker_id : "");
    res = cdc_members_register(&c->members, r->worker_id, r->incarnation, pipe, r->admin_endpoint,
                               now, &old_pipe);
    switch (res) {
    case CDC_REGISTER_INVALID:
    case CDC_REGISTER_FULL:
        send_reject(c, pipe, res == CDC_REGISTER_FULL ? "too many workers" : "invalid worker id");
        cdc_msg_server_close_pipe(c->msg, pipe);
        return;
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
    cdc_log_info("worker \"%s\" registered (incarnation %" PRIu64 ", pipe %u%s)", r->worker_id,
                 r->incarnation, pipe, res == CDC_REGISTER_REPLACED ? ", replacing" : "");
    cdc_metrics_gauge_set(c->m_workers, (double)cdc_members_alive_count(&c->members));
    if (c->state == CDC_JOB_RUNNING) {
        char why[256];
        snprintf(why, sizeof(why), "worker \"%s\" %s", r->worker_id,
                 was_alive ? "restarted" : "joined");
        /* a restart of an owner is a failure; a join is a plain rebalance */
        recover(c, why, was_alive && owned);
        /* a joining worker needs no grace wait */
        c->grace_until_ms = now;
    } else if (c->state == CDC_JOB_FAILED) {
        send_reject(c, pipe, "job FAILED: restart strategy exhausted");
    }
}

/* Keeps the high watermarks an owner reports with its ack (for the lag in /status and
 * the progress check). */
static void note_high_watermarks(cdc_coord_t *c, const cdc_member_t *m, const Cdc__Ack *ack)
{
    for (size_t i = 0; i < ack->n_partitions; i++) {
        const Cdc__PartitionState *ps = ack->partitions[i];
        uint32_t p = ps->partition;
        if (p >= CDC_PARTITIONS || strcmp(c->owner[p], m->id) != 0)
            continue;
        for (size_t k = 0; k < ps->n_offsets; k++) {
            const Cdc__TopicOffset *to = ps->offsets[k];
            if (to->topic == NULL)
                continue;
            if (cdc_progress_note_high(&c->progress, p, to->topic, to->high_watermark,
                                       to->stalled_ms))
                cdc_log_warn("partition %u topic \"%s\": worker \"%s\" reports no progress for "
                             "%" PRId64 " ms with records behind",
                             p, to->topic, m->id, to->stalled_ms);
        }
    }
}

/*
 * The progress check of a completed checkpoint (progress.h): each new finding is logged
 * and counted; a slot that made no progress makes the job recover, so that every slot
 * is assigned again from its checkpoint. Returns true when it should.
 */
static bool check_progress(cdc_coord_t *c, const cdc_checkpoint_t *rec, char *why, size_t cap)
{
    cdc_progress_finding_t f[CDC_PROGRESS_FINDINGS_MAX];
    int n = cdc_progress_checkpoint(&c->progress, rec, mono_ms(), f, CDC_PROGRESS_FINDINGS_MAX);
    bool stalled = false;
    for (int i = 0; i < n; i++) {
        if (f[i].kind == CDC_PROGRESS_NO_PROGRESS) {
            cdc_metrics_counter_inc(c->m_no_progress);
            cdc_log_warn("partition %u topic \"%s\" (owner \"%s\"): no progress for %" PRId64
                         " ms over %d checkpoints, offset %" PRId64 " with %" PRId64
                         " records behind it%s",
                         f[i].partition, f[i].topic, c->owner[f[i].partition], f[i].for_ms,
                         c->progress.min_epochs, f[i].offset, f[i].behind,
                         f[i].again ? "; a recovery at this offset did not help: not recovering "
                                      "again (a transactional producer's last control record "
                                      "looks like this)"
                                    : "");
            if (f[i].again)
                continue;
            cdc_progress_recovering(&c->progress, &f[i]);
            if (!stalled)
                snprintf(why, cap, "partition %u topic \"%s\" made no progress for %" PRId64 " ms",
                         f[i].partition, f[i].topic, f[i].for_ms);
            stalled = true;
        } else {
            cdc_metrics_counter_inc(c->m_missing_topic);
            cdc_log_warn("partition %u: its owner \"%s\" does not consume topic \"%s\", which "
                         "the other partitions carry: its changes in this partition are not "
                         "being applied (a worker started with a different table set?)",
                         f[i].partition, c->owner[f[i].partition], f[i].topic);
        }
    }
    cdc_metrics_gauge_set(c->m_stalled_slots, cdc_progress_flagged(&c->progress));
    return stalled;
}

static void on_ack(cdc_coord_t *c, const Cdc__Ack *ack, uint32_t pipe)
{
    cdc_member_t *m = cdc_members_by_pipe(&c->members, pipe);
    cdc_error_t e;
    cdc_ack_result_t r;

    if (m == NULL || strcmp(m->id, ack->worker_id ? ack->worker_id : "") != 0) {
        cdc_metrics_counter_inc(c->m_rejected);
        cdc_log_warn("rejected ack of epoch %" PRIu64 " from unregistered pipe %u (\"%s\")",
                     ack->epoch, pipe, ack->worker_id ? ack->worker_id : "");
        send_reject(c, pipe, "not registered");
        return;
    }
    m->last_heartbeat_ms = mono_ms();
    if (c->state != CDC_JOB_RUNNING) {
        cdc_metrics_counter_inc(c->m_rejected);
        return; /* acks of an aborted generation */
    }
    if (ack->term == c->term && ack->generation == c->generation)
        note_high_watermarks(c, m, ack);
    cdc_error_clear(&e);
    r = cdc_epochs_ack(&c->epochs, ack, wall_ms(), &e);
    switch (r) {
    case CDC_ACK_ACCEPTED:
        return;
    case CDC_ACK_COMPLETE: {
        cdc_checkpoint_t *rec;
        char why[300] = "";
        bool stalled = false;
        while ((rec = cdc_epochs_take_complete(&c->epochs)) != NULL) {
            cdc_pending_commit_t *q;
            /* the floors so far go on in every record (before it is written) */
            if (cdc_checkpoint_carry_floors(rec, c->base) != CDC_OK) {
                cdc_checkpoint_free(rec);
                recover(c, "out of memory carrying the floors", true);
                return;
            }
            if (c->nqueue == CDC_COMMIT_QUEUE_MAX) {
                /* cannot happen: barriers pause long before; abort rather than lose */
                cdc_checkpoint_free(rec);
                recover(c, "commit queue full", true);
                return;
            }
            q = &c->queue[c->nqueue++];
            memset(q, 0, sizeof(*q));
            q->rec = rec;
            q->barrier_mono = mono_ms() - (rec->completed_ms - rec->barrier_ms);
            cdc_checkpoint_free(c->base);
            /* the base for a later reassignment: copy via JSON round trip */
            {
                char *js = cdc_checkpoint_to_json(rec, false);
                cdc_error_t e2;
                c->base = NULL;
                if (js)
                    cdc_checkpoint_from_json(js, strlen(js), &c->base, &e2);
                free(js);
            }
            if (check_progress(c, rec, why, sizeof(why)))
                stalled = true;
        }
        if (stalled)
            recover(c, why, true);
        return;
    }
    case CDC_ACK_STALE:
    case CDC_ACK_UNKNOWN_EPOCH:
        cdc_metrics_counter_inc(c->m_rejected);
        cdc_log_info("rejected ack: %s", e.msg);
        send_reject(c, pipe, e.msg);
        return;
    case CDC_ACK_NOT_OWNER:
    case CDC_ACK_DUPLICATE:
    case CDC_ACK_INVALID:
        cdc_metrics_counter_inc(c->m_rejected);
        cdc_log_warn("rejected ack: %s", e.msg);
        send_reject(c, pipe, e.msg);
        return;
    }
}

static void on_message(cdc_coord_t *c, Cdc__Envelope *env, uint32_t pipe, int64_t now)
{
    switch (env->body_case) {
    case CDC__ENVELOPE__BODY_REGISTER:
        on_register(c, env->register_, pipe, now);
        break;
    case CDC__ENVELOPE__BODY_HEARTBEAT:
        if (c->state == CDC_JOB_STANDBY || c->state == CDC_JOB_STARTING)
            reject_not_leader(c, pipe);
        else if (!cdc_members_heartbeat(&c->members, pipe, now))
            send_reject(c, pipe, "unknown worker: register first");
        break;
    case CDC__ENVELOPE__BODY_ACK:
        if (c->state == CDC_JOB_STANDBY)
            reject_not_leader(c, pipe);
        else
            on_ack(c, env->ack, pipe);
        break;
    default:
        cdc_log_warn("unexpected %s message from pipe %u", cdc_msg_body_name(env), pipe);
        break;
    }
}

static void drain(cdc_coord_t *c, int wait_ms)
{
    cdc_msg_event_t ev;

    for (int i = 0; i < 1024; i++) {
        Cdc__Envelope *env = NULL;
        uint32_t pipe = 0;
        cdc_error_t e;
        cdc_err_t rc = cdc_msg_server_recv(c->msg, i == 0 ? wait_ms : 0, &env, &pipe, &e);
        if (rc != CDC_OK)
            break;
        on_message(c, env, pipe, mono_ms());
        cdc_msg_free(env);
    }
    while (cdc_msg_server_poll_event(c->msg, &ev)) {
        cdc_member_t *m;
        if (ev.type != CDC_MSG_PIPE_REMOVED)
            continue;
        m = cdc_members_by_pipe(&c->members, ev.pipe);
        if (m != NULL)
            lose_worker(c, m, "connection lost");
    }
}

/* ---- timers ---------------------------------------------------------------------------- */

static void check_liveness(cdc_coord_t *c, int64_t now)
{
    for (int i = 0; i < c->members.n; i++) {
        cdc_member_t *m = &c->members.m[i];
        if (m->alive && now - m->last_heartbeat_ms > c->cfg.heartbeat_timeout_ms)
            lose_worker(c, m, "missed heartbeats");
    }
    if (c->state == CDC_JOB_RUNNING) {
        uint64_t epoch;
        cdc_pset_t missing;
        if (cdc_epochs_overdue(&c->epochs, now, c->cfg.ack_deadline_ms, &epoch, &missing)) {
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
            recover(c, why, true);
        }
    }
    cdc_members_forget(&c->members, now, 10 * 60 * 1000);
}

static void maybe_barrier(cdc_coord_t *c, int64_t now)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Barrier b = CDC__BARRIER__INIT;
    uint64_t epoch;
    cdc_err_t rc;

    if (c->state != CDC_JOB_RUNNING || now < c->next_barrier_ms)
        return;
    c->next_barrier_ms += c->cfg.commit_interval_ms;
    if (c->next_barrier_ms < now)
        c->next_barrier_ms = now + c->cfg.commit_interval_ms;
    if (c->epochs.nopen >= MAX_OPEN_BEFORE_PAUSE || c->nqueue >= CDC_COMMIT_QUEUE_MAX / 2)
        return; /* commits are behind (etcd or warehouse down): let workers accumulate */
    if (cdc_epochs_remaining(&c->epochs) < 10 && now >= c->etcd_retry_ms) {
        uint64_t from, limit;
        cdc_error_t e;
        if (cdc_store_reserve_epochs(&c->store, c->epochs.next_epoch, EPOCH_BLOCK, &from, &limit,
                                     &e) == CDC_OK)
            cdc_epochs_reserve(&c->epochs, from, limit);
        else
            c->etcd_retry_ms = now + ETCD_RETRY_MS;
    }
    rc = cdc_epochs_begin(&c->epochs, now, wall_ms(), &epoch);
    if (rc != CDC_OK)
        return;
    b.term = c->term;
    b.generation = c->generation;
    b.epoch = epoch;
    /* the partitioned or sorted tables' layouts: rows staged from this barrier use them */
    static cdc_table_layout_t ls[CDC_COMMITTER_MAX_TABLES];
    static Cdc__TableLayout tl[CDC_COMMITTER_MAX_TABLES];
    static Cdc__TableLayout *tlp[CDC_COMMITTER_MAX_TABLES];
    size_t nl =
        c->committer ? cdc_committer_layouts(c->committer, ls, CDC_COMMITTER_MAX_TABLES) : 0;
    for (size_t i = 0; i < nl; i++) {
        if (ls[i].spec_json == NULL && ls[i].order_json == NULL)
            continue;
        cdc__table_layout__init(&tl[b.n_layouts]);
        tl[b.n_layouts].table = ls[i].table;
        tl[b.n_layouts].spec_id = ls[i].spec_id;
        tl[b.n_layouts].spec_json = ls[i].spec_json ? ls[i].spec_json : "";
        tl[b.n_layouts].sort_order_id = ls[i].order_id;
        tl[b.n_layouts].sort_order_json = ls[i].order_json ? ls[i].order_json : "";
        tlp[b.n_layouts] = &tl[b.n_layouts];
        b.n_layouts++;
    }
    b.layouts = tlp;
    /* truncates met in one partition: every slot applies them (docs/worker.md) */
    static Cdc__TableFloor fl[CDC_COMMITTER_MAX_TABLES];
    static Cdc__TableFloor *flp[CDC_COMMITTER_MAX_TABLES];
    for (size_t i = 0; c->base != NULL && i < c->base->nfloors && i < CDC_COMMITTER_MAX_TABLES;
         i++) {
        cdc__table_floor__init(&fl[i]);
        fl[i].table = c->base->floors[i].table;
        fl[i].commit_lsn = c->base->floors[i].commit_lsn;
        fl[i].lsn = c->base->floors[i].lsn;
        fl[i].partition = c->base->floors[i].partition;
        flp[i] = &fl[i];
        b.n_floors = i + 1;
    }
    b.floors = flp;
    env.body_case = CDC__ENVELOPE__BODY_BARRIER;
    env.barrier = &b;
    for (int i = 0; i < c->members.n; i++)
        if (c->members.m[i].alive && owns_any(c, c->members.m[i].id))
            send_env(c, c->members.m[i].pipe, &env);
}

static void maybe_orphans(cdc_coord_t *c, int64_t now)
{
    const cdc_checkpoint_t *keep[CDC_COMMIT_QUEUE_MAX];
    size_t nkeep = 0;
    int deleted = 0;
    cdc_error_t e;

    if (c->cfg.orphan_interval_ms <= 0 || now < c->next_orphan_ms)
        return;
    c->next_orphan_ms = now + c->cfg.orphan_interval_ms;
    fault_stall(c, "stall-orphan-scan", 3 * c->cfg.lease_ttl_ms);
    if (c->nqueue > 0 && c->queue[0].recorded)
        return; /* a recorded epoch waits for its commit: its files must stay */
    for (int i = 0; i < c->nqueue; i++)
        keep[nkeep++] = c->queue[i].rec;
    if (cdc_committer_remove_orphans(c->committer, keep, nkeep, c->cfg.orphan_age_ms, &deleted,
                                     &e) != CDC_OK)
        cdc_log_warn("orphan cleanup failed: %s", e.msg);
    else if (deleted > 0)
        cdc_log_info("orphan cleanup removed %d files", deleted);
    if (mono_ms() - now > SLOW_MAINTENANCE_MS)
        cdc_log_warn("orphan cleanup took %" PRId64 " ms (barriers wait meanwhile)",
                     mono_ms() - now);
    c->next_orphan_ms = mono_ms() + c->cfg.orphan_interval_ms; /* a pause between scans */
    cdc_metrics_counter_add(c->m_orphans, deleted);
}

/* Expires old snapshots; runs on the orphan interval, only between commits. */
static void maybe_expire(cdc_coord_t *c, int64_t now)
{
    size_t expired = 0;
    cdc_error_t e;

    if (c->cfg.snapshot_retention_ms <= 0 || c->cfg.orphan_interval_ms <= 0 ||
        now < c->next_expire_ms || c->nqueue > 0)
        return;
    c->next_expire_ms = now + c->cfg.orphan_interval_ms;
    if (cdc_committer_expire(c->committer, c->cfg.snapshot_retention_ms, c->cfg.snapshot_min_keep,
                             &expired, &e) != CDC_OK)
        cdc_log_warn("snapshot expiry failed: %s", e.msg);
    else if (expired > 0)
        cdc_log_info("expired %zu snapshots", expired);
    if (mono_ms() - now > SLOW_MAINTENANCE_MS)
        cdc_log_warn("snapshot expiry took %" PRId64 " ms (barriers wait meanwhile)",
                     mono_ms() - now);
    c->next_expire_ms = mono_ms() + c->cfg.orphan_interval_ms;
    cdc_metrics_counter_add(c->m_expired, (int64_t)expired);
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
static int loop_wait_ms(const cdc_coord_t *c, int64_t now)
{
    int64_t w = LOOP_WAIT_MAX_MS;

    if (c->state == CDC_JOB_STANDBY)
        return STANDBY_WAIT_MS;
    if (c->state != CDC_JOB_RUNNING)
        return 20; /* starting or recovering: assignment and grace timers */
    if (c->nqueue > 0)
        w = c->commit_retry_ms - now < w ? c->commit_retry_ms - now : w;
    w = c->next_barrier_ms - now < w ? c->next_barrier_ms - now : w;
    return w < 0 ? 0 : (int)w;
}

void cdc_coord_run(cdc_coord_t *c)
{
    set_state(c, CDC_JOB_STANDBY);
    while (!*c->stop) {
        int64_t now = mono_ms(), began = now;
        cdc_leader_event_t ev = cdc_leader_tick(&c->leader, now);

        if (ev == CDC_LEADER_ELECTED) {
            c->term = (uint64_t)c->leader.term;
            cdc_committer_set_term(c->committer, c->term);
            cdc_metrics_gauge_set(c->m_term, (double)c->term);
            cdc_restart_init(&c->restart, (int)c->cfg.restart_max_failures,
                             c->cfg.restart_interval_ms, c->cfg.restart_delay_ms);
            c->etcd_retry_ms = 0;
            set_state(c, CDC_JOB_STARTING);
        } else if (ev == CDC_LEADER_LOST) {
            become_standby(c, c->leader.last_error);
        }
        if (c->state == CDC_JOB_STARTING)
            leader_start(c, now);

        drain(c, loop_wait_ms(c, now));
        now = mono_ms();
        if (c->state != CDC_JOB_STANDBY) {
            check_liveness(c, now);
            if (c->state == CDC_JOB_RECOVERING)
                try_assign(c, now);
            maybe_barrier(c, now);
            if (c->state != CDC_JOB_STANDBY && c->state != CDC_JOB_STARTING)
                process_queue(c, mono_ms());
            if (c->state == CDC_JOB_RUNNING || c->state == CDC_JOB_RECOVERING) {
                maybe_orphans(c, now);
                maybe_expire(c, mono_ms());
            }
        }
        if (c->nclosing > 0)
            close_rejected(c, now);
        if (c->state != CDC_JOB_STANDBY)
            observe_stall(c, mono_ms() - began);
        if (now >= c->next_status_ms) {
            cdc_admin_publish(c);
            /* a standby asks etcd who leads for its status: not that often */
            c->next_status_ms = now + (c->state == CDC_JOB_STANDBY ? 1000 : 200);
        }
    }
    cdc_log_info("coordinator \"%s\" stopping", c->cfg.id);
}

/* ---- setup ----------------------------------------------------------------------------- */

static void init_metrics(cdc_coord_t *c)
{
    cdc_metrics_t *r = c->metrics;

    c->m_committed = cdc_metrics_counter(r, "cdc_coordinator_epochs_committed_total",
                                         "Epochs committed to Iceberg.", NULL);
    c->m_failures = cdc_metrics_counter(r, "cdc_coordinator_failures_total",
                                        "Failures that triggered a recovery.", NULL);
    c->m_rejected =
        cdc_metrics_counter(r, "cdc_coordinator_acks_rejected_total",
                            "Acks rejected (stale term/generation, foreign slots).", NULL);
    c->m_aborted = cdc_metrics_counter(r, "cdc_coordinator_epochs_aborted_total",
                                       "Open epochs abandoned by recoveries.", NULL);
    c->m_etcd_errors = cdc_metrics_counter(r, "cdc_coordinator_etcd_errors_total",
                                           "Failed etcd operations.", NULL);
    c->m_commit_errors = cdc_metrics_counter(r, "cdc_coordinator_commit_errors_total",
                                             "Failed Iceberg commit attempts.", NULL);
    c->m_orphans = cdc_metrics_counter(r, "cdc_coordinator_orphans_removed_total",
                                       "Orphan data files deleted.", NULL);
    c->m_expired = cdc_metrics_counter(r, "cdc_coordinator_snapshots_expired_total",
                                       "Snapshots removed by expiry.", NULL);
    {
        static const char *const np[] = {"kind", "no_progress", NULL};
        static const char *const mt[] = {"kind", "missing_topic", NULL};
        const char *help = "Partition slots found stalled by the progress check (no_progress: "
                           "records behind a checkpointed offset that stays put; missing_topic: "
                           "the owner does not consume a topic the other slots carry).";
        c->m_no_progress = cdc_metrics_counter(r, "cdc_coordinator_stalls_total", help, np);
        c->m_missing_topic = cdc_metrics_counter(r, "cdc_coordinator_stalls_total", help, mt);
        c->m_stalled_slots =
            cdc_metrics_gauge(r, "cdc_coordinator_stalled_partitions",
                              "Partition slots flagged by the progress check now.", NULL);
    }
    c->m_state =
        cdc_metrics_gauge(r, "cdc_coordinator_job_state",
                          "0 STANDBY, 1 STARTING, 2 RECOVERING, 3 RUNNING, 4 FAILED.", NULL);
    c->m_term = cdc_metrics_gauge(r, "cdc_coordinator_term", "Leader term (0 = standby).", NULL);
    c->m_generation = cdc_metrics_gauge(r, "cdc_coordinator_generation",
                                        "Assignment generation in the current term.", NULL);
    c->m_workers =
        cdc_metrics_gauge(r, "cdc_coordinator_workers_alive", "Registered live workers.", NULL);
    c->m_last_epoch = cdc_metrics_gauge(r, "cdc_coordinator_last_committed_epoch",
                                        "Newest epoch committed to Iceberg.", NULL);
    c->m_latency =
        cdc_metrics_histogram(r, "cdc_coordinator_commit_latency_seconds",
                              "From barrier to the epoch's snapshots being visible.",
                              cdc_metrics_latency_buckets, cdc_metrics_latency_nbuckets, NULL);
    c->m_record_latency =
        cdc_metrics_histogram(r, "cdc_coordinator_record_latency_seconds",
                              "From barrier to the checkpoint record being in etcd.",
                              cdc_metrics_latency_buckets, cdc_metrics_latency_nbuckets, NULL);
    c->m_stall = cdc_metrics_histogram(
        r, "cdc_coordinator_loop_stall_seconds", "Duration of each main-loop iteration as leader.",
        cdc_metrics_latency_buckets, cdc_metrics_latency_nbuckets, NULL);
    c->m_stall_max =
        cdc_metrics_gauge(r, "cdc_coordinator_loop_stall_max_seconds",
                          "Longest main-loop iteration as leader since the start.", NULL);
}

cdc_err_t cdc_coord_open(cdc_coord_t *c, cdc_error_t *e)
{
    cdc_committer_options_t co;
    cdc_err_t rc;

    cdc_http_doc_init(&c->status);
    c->metrics = cdc_metrics_default();
    init_metrics(c);
    cdc_members_init(&c->members);
    cdc_epochs_init(&c->epochs, c->cfg.job);
    cdc_progress_init(&c->progress, c->cfg.progress_timeout_ms, 3);
    cdc_restart_init(&c->restart, (int)c->cfg.restart_max_failures, c->cfg.restart_interval_ms,
                     c->cfg.restart_delay_ms);

    if ((rc = cdc_etcd_open(&c->etcd, c->cfg.etcd, (int)c->cfg.etcd_timeout_ms, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --etcd");
    if ((rc = cdc_msg_server_open(&c->msg, c->cfg.listen, NULL, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --listen \"%s\"", c->cfg.listen);
    if (c->cfg.advertise && c->cfg.advertise[0]) {
        snprintf(c->endpoint, sizeof(c->endpoint), "%s", c->cfg.advertise);
    } else {
        /* a listen URL with port 0 is advertised with the bound port */
        const char *colon = strrchr(c->cfg.listen, ':');
        int port = cdc_msg_server_port(c->msg);
        if (colon && port > 0)
            snprintf(c->endpoint, sizeof(c->endpoint), "%.*s:%d", (int)(colon - c->cfg.listen),
                     c->cfg.listen, port);
        else
            snprintf(c->endpoint, sizeof(c->endpoint), "%s", c->cfg.listen);
    }
    if ((rc = cdc_http_server_open(&c->http, c->cfg.http, c->metrics, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --http \"%s\"", c->cfg.http);
    if ((rc = cdc_admin_register(c, e)) != CDC_OK)
        return rc;
    if ((rc = cdc_http_server_start(c->http, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --http \"%s\"", c->cfg.http);
    {
        const char *colon = strrchr(c->cfg.http, ':');
        snprintf(c->admin, sizeof(c->admin), "%.*s:%d", colon ? (int)(colon - c->cfg.http) : 0,
                 c->cfg.http, cdc_http_server_port(c->http));
    }
    memset(&co, 0, sizeof(co));
    co.warehouse = c->cfg.warehouse;
    co.job = c->cfg.job;
    co.s3_endpoint = c->cfg.s3_endpoint;
    co.s3_region = c->cfg.s3_region;
    co.s3_access_key = c->cfg.s3_access_key;
    co.s3_secret_key = c->cfg.s3_secret_key;
    co.s3_path_style = c->cfg.s3_path_style;
    co.partition_by = c->cfg.partition_by;
    co.sort_by = c->cfg.sort_by;
    if ((rc = cdc_committer_open(&c->committer, &co, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --warehouse \"%s\"", c->cfg.warehouse);
    {
        cdc_leader_record_t lr;
        char *value;
        snprintf(lr.id, sizeof(lr.id), "%s", c->cfg.id);
        snprintf(lr.endpoint, sizeof(lr.endpoint), "%s", c->endpoint);
        snprintf(lr.admin, sizeof(lr.admin), "%s", c->admin);
        if ((value = cdc_leader_record_json(&lr)) == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        rc = cdc_leader_open(&c->leader, c->etcd, c->cfg.etcd, (int)c->cfg.etcd_timeout_ms,
                             c->cfg.job, value, (c->cfg.lease_ttl_ms + 999) / 1000, e);
        free(value);
        if (rc != CDC_OK)
            return rc;
    }
    cdc_store_init(&c->store, c->etcd, c->leader.el, c->cfg.job);
    cdc_log_info("coordinator \"%s\" for job \"%s\": workers dial %s, admin http://%s", c->cfg.id,
                 c->cfg.job, c->endpoint, c->admin);
    cdc_admin_publish(c);
    return CDC_OK;
}

void cdc_coord_close(cdc_coord_t *c)
{
    /* resign so that a standby takes over at once */
    cdc_leader_close(&c->leader, true);
    cdc_http_server_close(c->http);
    c->http = NULL;
    cdc_msg_server_close(c->msg);
    c->msg = NULL;
    cdc_committer_close(c->committer);
    c->committer = NULL;
    cdc_etcd_close(c->etcd);
    c->etcd = NULL;
    cdc_epochs_clear(&c->epochs);
    clear_queue(c);
    cdc_checkpoint_free(c->base);
    c->base = NULL;
    cdc_http_doc_free(&c->status);
}
