/*
 * The commit pipeline of the coordinator's job (docs/design.md, "The epoch protocol"):
 * barriers open epochs, the owners' acks complete them (with the progress check of each
 * completed checkpoint), and completed epochs go through a queue: record in etcd
 * (fenced, the point of no return), commit to Iceberg, move `committed`, tell the
 * workers. Warehouse maintenance (orphan files, snapshot expiry) runs between commits.
 * The job's state machine and loop that drive it are in job.c (job_int.h).
 *
 * Threads: everything here runs on the loop thread except the Iceberg commits, which a
 * commit round runs on a thread of its own (round_main). This file owns the round
 * (cdc_coord_t.round): the loop starts it over the recorded head of the queue, and
 * touches neither those records nor the round until `done`; the committer guards its own
 * state (commit_int.h). Clearing the queue waits for the round first.
 *
 * A call circle of three files (docs/development.md, "Call circles"): job.c, job_tables.c
 * and pipeline.c are one concept, the job, split by part. The loop (job.c) drives the
 * table set and the commit pipeline; both fall back on the loop's own moves: a send to
 * a worker, a recovery (Abort, new generation) or a step down to standby. The rest of
 * coordinator/ sits below them: admin.c, dashboard.c and lag.c only read the job.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"
#include "coordinator/job_int.h"

#define COMMIT_RETRY_MS 300
#define MAX_OPEN_BEFORE_PAUSE 8

/* Test-only fault injection (--fault / CDC_FAULT): exits without cleanup at a named point.
 * Compiled out of release builds (make FAULT_INJECTION=0), which refuse --fault at start. */
static void fault_point(cdc_coord_t *c, const char *name)
{
#if CDC_FAULTS
    if (c->cfg.fault != NULL && strcmp(c->cfg.fault, name) == 0) {
        cdc_log_error("fault injection: exiting at \"%s\"", name);
        _exit(86);
    }
#else
    (void)c;
    (void)name;
#endif
}

/* Test-only fault injection: stalls the main loop for ms at a named point (a slow scan). */
static void fault_stall(cdc_coord_t *c, const char *name, int64_t ms)
{
#if CDC_FAULTS
    if (c->cfg.fault != NULL && strcmp(c->cfg.fault, name) == 0) {
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        cdc_log_warn("fault injection: stalling %" PRId64 " ms at \"%s\"", ms, name);
        nanosleep(&ts, NULL);
    }
#else
    (void)c;
    (void)name;
    (void)ms;
#endif
}

/* ---- the commit round --------------------------------------------------------------- */

/* The commit thread: one group commit of the round's records (commit.h). */
static void *round_main(void *arg)
{
    cdc_commit_round_t *r = arg;
    int64_t t0 = cdc_clock_mono_ms();
    cdc_error_clear(&r->e);
    r->rc = cdc_committer_commit_group(r->committer, r->recs, (size_t)r->n, &r->res, &r->e);
    r->ms = cdc_clock_mono_ms() - t0;
    atomic_store(&r->done, true);
    return NULL;
}

/* Waits for the round in flight, if any, and leaves its outcome for finish_round. */
static void round_join(cdc_coord_t *c)
{
    if (!c->round.running)
        return;
    pthread_join(c->round.thread, NULL);
    c->round.running = false;
}

/*
 * Starts a round of the recorded epochs at the head of the queue (every recorded one,
 * so the commits of epochs that waited while the last round ran share their snapshots),
 * on the commit thread; on the loop thread itself when no thread can be started.
 */
static void start_round(cdc_coord_t *c)
{
    cdc_commit_round_t *r = &c->round;
    int n = 0;

    if (r->running || r->n > 0)
        return;
    while (n < c->nqueue && c->queue[n].recorded)
        n++;
    if (n == 0)
        return;
    for (int i = 0; i < n; i++)
        r->recs[i] = c->queue[i].rec;
    r->n = n;
    r->committer = c->committer;
    atomic_store(&r->done, false);
    if (pthread_create(&r->thread, NULL, round_main, r) == 0) {
        r->running = true;
        return;
    }
    cdc_log_warn("could not start the commit thread: committing on the loop thread");
    round_main(r);
}

void cdc_job_clear_queue(cdc_coord_t *c)
{
    /* a round in flight reads the records: it ends first (its commits are idempotent;
     * the next leader commits the recorded epochs again) */
    round_join(c);
    c->round.n = 0;
    for (int i = 0; i < c->nqueue; i++)
        cdc_checkpoint_free(c->queue[i].rec);
    c->nqueue = 0;
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
    h->completed_wall_ms = cdc_clock_wall_ms();
    h->duration_ms = duration_ms;
    h->tables = tables;
    cdc_checkpoint_totals(rec, &h->bytes, &h->records, &h->data_files, &h->delete_files);
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
    cdc_job_broadcast(c, &env);
}

/*
 * A step of the queue's head failed with rc: a fenced write makes this coordinator a
 * standby. Any other failure is counted in errors and kept for /status, the step is
 * retried at retry_at, and, when verb is not NULL, "could not <verb> checkpoint N
 * <where>" is logged at the first and every tenth attempt.
 */
static void step_failed(cdc_coord_t *c, cdc_pending_commit_t *q, cdc_err_t rc, const cdc_error_t *e,
                        cdc_counter_t *errors, const char *verb, const char *where,
                        int64_t retry_at)
{
    if (rc == CDC_ERR_FENCED) {
        cdc_leader_step_down(&c->leader, e->msg);
        cdc_job_become_standby(c, e->msg);
        return;
    }
    cdc_metrics_counter_inc(errors);
    if (errors == c->m_commit_errors)
        cdc_diskfull_failed(&c->warehouse_disk, e);
    if (verb != NULL && q->attempts++ % 10 == 0)
        cdc_log_warn("could not %s checkpoint %" PRIu64 " %s: %s", verb, q->rec->epoch, where,
                     e->msg);
    snprintf(c->last_commit_error, sizeof(c->last_commit_error), "%s", e->msg);
    c->commit_retry_ms = retry_at;
}

/* A staged file broke the committer's rules (staged_check.h): a security event, logged as
 * an error, counted and kept for /status; the job recovers (worker names who sent it, or
 * NULL when found later). */
static void security_event(cdc_coord_t *c, cdc_staged_reason_t reason, const char *worker,
                           uint64_t epoch, const char *why)
{
    c->security_rejections[reason]++;
    cdc_metrics_counter_inc(c->m_security[reason]);
    snprintf(c->last_security_event, sizeof(c->last_security_event),
             "epoch %" PRIu64 "%s%s%s: %s (%s)", epoch, worker ? " from worker \"" : "",
             worker ? worker : "", worker ? "\"" : "", why, cdc_staged_reason_name(reason));
    cdc_log_error("security: refused a staged file of epoch %" PRIu64 "%s%s%s: %s", epoch,
                  worker ? " from worker \"" : "", worker ? worker : "", worker ? "\"" : "", why);
}

/*
 * The outcome of the round that ended (when one did): a failure is retried with a new
 * round; a success moves `committed` to its last epoch in etcd, tells the workers, and
 * takes its epochs off the queue.
 */
static void finish_round(cdc_coord_t *c, int64_t now)
{
    cdc_commit_round_t *r = &c->round;
    cdc_pending_commit_t *q = &c->queue[0];
    cdc_error_t e;
    cdc_err_t rc;

    if (r->n == 0 || (r->running && !atomic_load(&r->done)))
        return;
    round_join(c);
    int n = r->n;
    r->n = 0;
    CDC_ASSERT(n <= c->nqueue && c->queue[n - 1].rec == r->recs[n - 1]);
    for (int i = 0; i < n; i++)
        c->queue[i].commit_ms = r->ms;
    if (r->rc != CDC_OK) {
        step_failed(c, q, r->rc, &r->e, c->m_commit_errors, "commit", "to Iceberg",
                    now + COMMIT_RETRY_MS);
        return;
    }
    if (r->res.tables_committed > 0) /* (an epoch without files wrote nothing) */
        cdc_diskfull_ok(&c->warehouse_disk);
    fault_point(c, "after-iceberg-commit");
    uint64_t last = c->queue[n - 1].rec->epoch;
    cdc_error_clear(&e);
    rc = cdc_store_put_committed(&c->store, last, &e);
    if (rc != CDC_OK) {
        /* the commit is idempotent: the next round commits the same epochs again */
        step_failed(c, q, rc, &e, c->m_etcd_errors, NULL, NULL, now + ETCD_RETRY_MS);
        return;
    }
    c->last_commit_error[0] = '\0';
    /* only a recorded epoch is committed (the point of no return comes first) */
    CDC_ASSERT(c->queue[n - 1].recorded && last <= c->last_recorded);
    c->last_committed = last;
    send_committed(c, last);
    r->last_size = n;
    r->grouped += (uint64_t)r->res.epochs_grouped;
    cdc_metrics_counter_add(c->m_grouped, (uint64_t)r->res.epochs_grouped);
    for (int i = 0; i < n; i++) {
        q = &c->queue[i];
        int64_t dur = cdc_clock_mono_ms() - q->barrier_mono;
        cdc_metrics_histogram_observe(c->m_latency, (double)dur / 1000.0);
        cdc_metrics_counter_inc(c->m_committed);
        cdc_metrics_gauge_set(c->m_last_epoch, (double)q->rec->epoch);
        record_history(c, q->rec, dur, r->res.tables_committed);
        cdc_dashboard_committed(c, q->rec, dur, q->commit_ms);
        cdc_log_debug("checkpoint %" PRIu64 " committed in %" PRId64 " ms (acks %" PRId64
                      " ms, etcd record %" PRId64 " ms, iceberg %" PRId64
                      " ms, %d tables, a group of %d)",
                      q->rec->epoch, dur, q->rec->completed_ms - q->rec->barrier_ms, q->record_ms,
                      q->commit_ms, r->res.tables_committed, n);
        if (q->rec->epoch % 16 == 0 && c->cfg.checkpoints_retained > 0 &&
            q->rec->epoch > (uint64_t)c->cfg.checkpoints_retained) {
            uint64_t keep = q->rec->epoch - (uint64_t)c->cfg.checkpoints_retained;
            cdc_checkpoint_t *oldest = NULL;
            cdc_store_prune(&c->store, keep, &e);
            cdc_committer_prune_pending(c->committer, keep);
            /* the offsets bases older than any a kept record may name; none on doubt */
            if (cdc_store_oldest_checkpoint(&c->store, &oldest, &e) == CDC_OK && oldest != NULL)
                cdc_offsets_base_prune(cdc_committer_storage(c->committer), c->cfg.warehouse,
                                       c->cfg.job, cdc_offsets_base_floor(oldest));
            cdc_checkpoint_free(oldest);
        }
        cdc_checkpoint_free(q->rec);
    }
    memmove(&c->queue[0], &c->queue[n], (size_t)(c->nqueue - n) * sizeof(c->queue[0]));
    c->nqueue -= n;
}

/* Records q (the oldest unrecorded epoch) in etcd; false when it could not (then it
 * is retried later, or the job stepped down or recovers). */
static bool record_one(cdc_coord_t *c, int at, int64_t now)
{
    cdc_pending_commit_t *q = &c->queue[at];
    char *json = NULL;
    cdc_staged_reason_t why = CDC_STAGED_OK;
    cdc_error_t e;
    cdc_err_t rc;

    cdc_error_clear(&e);
    /* every file there with its acked size, before anything refers to it */
    if ((rc = cdc_committer_verify_files(c->committer, q->rec, &why, &e)) != CDC_OK) {
        if (why != CDC_STAGED_OK) {
            uint64_t epoch = q->rec->epoch;
            security_event(c, why, NULL, epoch, e.msg);
            /* this record and the later ones (built on its offsets) are dropped: the job
             * replays from the last recorded checkpoint; the recorded ones before it are
             * committed still */
            for (int i = at; i < c->nqueue; i++)
                cdc_checkpoint_free(c->queue[i].rec);
            c->nqueue = at;
            cdc_job_recover(c, e.msg, true);
            return false;
        }
        step_failed(c, q, rc, &e, c->m_commit_errors, "check the files of", "",
                    now + COMMIT_RETRY_MS);
        return false;
    }
    /* before it is encoded, so that the commit gets what a replay would */
    cdc_schema_memo_strip(&c->schema_memo, q->rec);
    if ((int64_t)q->rec->nfiles > c->cfg.inline_files_max && q->rec->files_path == NULL) {
        if ((rc = cdc_committer_put_pending(c->committer, q->rec, &e)) != CDC_OK) {
            cdc_log_warn("could not write pending file list of checkpoint %" PRIu64 ": %s",
                         q->rec->epoch, e.msg);
            cdc_diskfull_failed(&c->warehouse_disk, &e);
            snprintf(c->last_commit_error, sizeof(c->last_commit_error), "%s", e.msg);
            c->commit_retry_ms = now + COMMIT_RETRY_MS;
            return false;
        }
    }
    /* only the offsets that moved once there are many (offsets_base.h) */
    rc = cdc_offsets_base_record_json(&c->offsets_base, cdc_committer_storage(c->committer),
                                      c->cfg.warehouse, q->rec, q->rec->files_path == NULL,
                                      c->cfg.checkpoint_inline_offsets, &json, &e);
    if (rc != CDC_OK) {
        cdc_log_warn("could not encode checkpoint %" PRIu64 ": %s", q->rec->epoch, e.msg);
        snprintf(c->last_commit_error, sizeof(c->last_commit_error), "%s", e.msg);
        c->commit_retry_ms = now + COMMIT_RETRY_MS;
        return false;
    }
    int64_t t_rec = cdc_clock_mono_ms();
    rc = cdc_store_put_checkpoint(&c->store, q->rec->epoch, json, &e);
    q->record_ms = cdc_clock_mono_ms() - t_rec;
    free(json);
    if (rc != CDC_OK) {
        /* etcd down: commits pause, nothing is lost, retried after */
        step_failed(c, q, rc, &e, c->m_etcd_errors, "record", "in etcd", now + ETCD_RETRY_MS);
        return false;
    }
    q->recorded = true;
    q->attempts = 0;
    /* epochs are recorded in order, each once: ids are reserved and never reused */
    CDC_ASSERT(q->rec->epoch > c->last_recorded);
    c->last_recorded = q->rec->epoch;
    if (cdc_schema_memo_note(&c->schema_memo, q->rec) != CDC_OK)
        cdc_log_warn("out of memory noting the schemas of checkpoint %" PRIu64
                     ": the next records carry every schema",
                     q->rec->epoch);
    cdc_metrics_histogram_observe(c->m_record_latency,
                                  (double)(cdc_clock_mono_ms() - q->barrier_mono) / 1000.0);
    fault_point(c, "after-checkpoint-record");
    return true;
}

/*
 * The queue's steps (docs/design.md, "The epoch protocol"): the round that ended is
 * finished, the completed epochs are recorded in etcd in order, and the recorded ones
 * go to the commit thread as the next round once the last one is done. So the loop never
 * waits for Iceberg, and the epochs recorded while a round ran share the next round's
 * snapshots: a slow warehouse makes fewer, larger commits instead of a stalled loop.
 */
void cdc_job_process_queue(cdc_coord_t *c, int64_t now)
{
    finish_round(c, now);
    if (c->state == CDC_JOB_STANDBY || now < c->commit_retry_ms)
        return;
    for (int i = 0; i < c->nqueue; i++)
        if (!c->queue[i].recorded && !record_one(c, i, now))
            break;
    if (c->state == CDC_JOB_STANDBY || now < c->commit_retry_ms)
        return;
    start_round(c);
    if (c->round.n > 0 && !c->round.running)
        finish_round(c, cdc_clock_mono_ms()); /* (committed on this thread) */
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
    const cdc_progress_finding_t *f;
    int n = cdc_progress_checkpoint(&c->progress, rec, cdc_clock_mono_ms(), &f);
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

/* Checks the table and location of every file of an Ack of the current generation before it
 * is merged; false (after the security event, a Reject and a recovery) on the first that
 * breaks a rule. */
static bool ack_files_allowed(cdc_coord_t *c, const Cdc__Ack *ack, uint32_t pipe)
{
    char why[600];
    for (size_t i = 0; i < ack->n_files; i++) {
        const Cdc__StagedFile *sf = ack->files[i];
        cdc_staged_reason_t r = cdc_staged_check(&c->staged_index, &c->tables, c->cfg.warehouse,
                                                 sf->table, sf->path, why, sizeof(why));
        if (r == CDC_STAGED_OK)
            continue;
        security_event(c, r, ack->worker_id, ack->epoch, why);
        cdc_metrics_counter_inc(c->m_rejected);
        cdc_job_send_reject(c, pipe, why);
        cdc_job_recover(c, why, true);
        return false;
    }
    return true;
}

void cdc_job_on_ack(cdc_coord_t *c, const Cdc__Ack *ack, uint32_t pipe)
{
    cdc_member_t *m = cdc_members_by_pipe(&c->members, pipe);
    cdc_error_t e;
    cdc_ack_result_t r;

    if (m == NULL || strcmp(m->id, ack->worker_id ? ack->worker_id : "") != 0) {
        cdc_metrics_counter_inc(c->m_rejected);
        cdc_log_warn("rejected ack of epoch %" PRIu64 " from unregistered pipe %u (\"%s\")",
                     ack->epoch, pipe, ack->worker_id ? ack->worker_id : "");
        cdc_job_send_reject(c, pipe, "not registered");
        return;
    }
    m->last_heartbeat_ms = cdc_clock_mono_ms();
    if (c->state != CDC_JOB_RUNNING) {
        cdc_metrics_counter_inc(c->m_rejected);
        return; /* acks of an aborted generation */
    }
    if (ack->term == c->term && ack->generation == c->generation) {
        if (!ack_files_allowed(c, ack, pipe))
            return;
        note_high_watermarks(c, m, ack);
    }
    cdc_error_clear(&e);
    r = cdc_epochs_ack(&c->epochs, ack, cdc_clock_wall_ms(), &e);
    if (r == CDC_ACK_ACCEPTED || r == CDC_ACK_COMPLETE) {
        cdc_pset_t slots = 0;
        for (size_t i = 0; i < ack->n_partitions; i++)
            if (ack->partitions[i]->partition < CDC_PARTITIONS)
                slots |= (cdc_pset_t)(1u << ack->partitions[i]->partition);
        cdc_epochs_note_acked(&c->epochs, slots, cdc_clock_mono_ms());
    }
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
                cdc_job_recover(c, "out of memory carrying the floors", true);
                return;
            }
            if (c->nqueue == CDC_COMMIT_QUEUE_MAX) {
                /* cannot happen: barriers pause long before; abort rather than lose */
                cdc_checkpoint_free(rec);
                cdc_job_recover(c, "commit queue full", true);
                return;
            }
            q = &c->queue[c->nqueue++];
            memset(q, 0, sizeof(*q));
            q->rec = rec;
            q->barrier_mono = cdc_clock_mono_ms() - (rec->completed_ms - rec->barrier_ms);
            cdc_checkpoint_free(c->base);
            /* the base for a later reassignment (a copy: rec goes to the commit queue) */
            if ((c->base = cdc_checkpoint_copy_base(rec)) == NULL) {
                cdc_job_recover(c, "out of memory copying the checkpoint", true);
                return;
            }
            if (check_progress(c, rec, why, sizeof(why)))
                stalled = true;
        }
        if (stalled)
            cdc_job_recover(c, why, true);
        return;
    }
    case CDC_ACK_STALE:
    case CDC_ACK_UNKNOWN_EPOCH:
        cdc_metrics_counter_inc(c->m_rejected);
        cdc_log_info("rejected ack: %s", e.msg);
        cdc_job_send_reject(c, pipe, e.msg);
        return;
    case CDC_ACK_NOT_OWNER:
    case CDC_ACK_DUPLICATE:
    case CDC_ACK_INVALID:
        cdc_metrics_counter_inc(c->m_rejected);
        cdc_log_warn("rejected ack: %s", e.msg);
        cdc_job_send_reject(c, pipe, e.msg);
        return;
    }
}

/* What a barrier carries per table, allocated for as many tables as the job has. */
typedef struct barrier_tables {
    cdc_table_layout_t *ls; /* the committer's layouts (strings borrowed from it) */
    Cdc__TableLayout *tl, **tlp;
    Cdc__TableFloor *fl, **flp;
} barrier_tables_t;

static void barrier_tables_free(barrier_tables_t *bt)
{
    free(bt->ls);
    free(bt->tl);
    free(bt->tlp);
    free(bt->fl);
    free(bt->flp);
}

/* Fills b's layouts and floors (pointing into bt, freed with barrier_tables_free once b
 * is sent): CDC_OK, or CDC_ERR_NOMEM. */
static cdc_err_t barrier_tables(cdc_coord_t *c, Cdc__Barrier *b, barrier_tables_t *bt)
{
    size_t nl = 0, nf = c->base != NULL ? c->base->nfloors : 0;

    memset(bt, 0, sizeof(*bt));
    if (c->committer != NULL && cdc_committer_layouts(c->committer, &bt->ls, &nl) != CDC_OK)
        return CDC_ERR_NOMEM;
    bt->tl = calloc(nl + 1, sizeof(*bt->tl));
    bt->tlp = calloc(nl + 1, sizeof(*bt->tlp));
    bt->fl = calloc(nf + 1, sizeof(*bt->fl));
    bt->flp = calloc(nf + 1, sizeof(*bt->flp));
    if (bt->tl == NULL || bt->tlp == NULL || bt->fl == NULL || bt->flp == NULL)
        return CDC_ERR_NOMEM;
    /* the partitioned or sorted tables' layouts: rows staged from this barrier use them */
    for (size_t i = 0; i < nl; i++) {
        const cdc_table_layout_t *l = &bt->ls[i];
        Cdc__TableLayout *t = &bt->tl[b->n_layouts];
        if (l->spec_json == NULL && l->order_json == NULL)
            continue;
        cdc__table_layout__init(t);
        t->table = (char *)l->table;
        t->spec_id = l->spec_id;
        t->spec_json = l->spec_json ? l->spec_json : "";
        t->sort_order_id = l->order_id;
        t->sort_order_json = l->order_json ? l->order_json : "";
        bt->tlp[b->n_layouts++] = t;
    }
    b->layouts = bt->tlp;
    /* truncates met in one partition: every slot applies them (docs/worker.md) */
    for (size_t i = 0; i < nf; i++) {
        cdc__table_floor__init(&bt->fl[i]);
        bt->fl[i].table = c->base->floors[i].table;
        bt->fl[i].commit_lsn = c->base->floors[i].commit_lsn;
        bt->fl[i].lsn = c->base->floors[i].lsn;
        bt->fl[i].partition = c->base->floors[i].partition;
        bt->flp[i] = &bt->fl[i];
    }
    b->n_floors = nf;
    b->floors = bt->flp;
    return CDC_OK;
}

void cdc_job_maybe_barrier(cdc_coord_t *c, int64_t now)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Barrier b = CDC__BARRIER__INIT;
    barrier_tables_t bt;
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
    /* built before the epoch begins: an epoch is not begun without its barrier */
    if (barrier_tables(c, &b, &bt) != CDC_OK) {
        cdc_log_error("no barrier this interval: out of memory for the tables' layouts and "
                      "floors");
        barrier_tables_free(&bt);
        return;
    }
    rc = cdc_epochs_begin(&c->epochs, now, cdc_clock_wall_ms(), &epoch);
    if (rc != CDC_OK) {
        barrier_tables_free(&bt);
        return;
    }
    b.term = c->term;
    b.generation = c->generation;
    b.epoch = epoch;
    env.body_case = CDC__ENVELOPE__BODY_BARRIER;
    env.barrier = &b;
    for (int i = 0; i < c->members.n; i++)
        if (c->members.m[i].alive && cdc_job_owns_any(c, c->members.m[i].id))
            cdc_job_send_env(c, c->members.m[i].pipe, &env);
    barrier_tables_free(&bt);
}

void cdc_job_maybe_orphans(cdc_coord_t *c, int64_t now)
{
    const cdc_checkpoint_t *keep[CDC_COMMIT_QUEUE_MAX];
    size_t nkeep = 0;

    for (int i = 0; i < c->nqueue; i++)
        keep[nkeep++] = c->queue[i].rec;
    /* a recorded epoch waits for a commit that failed (not for the round in flight, whose
     * files keep names like every queued record's): no scan until it committed */
    if (cdc_maint_tick(c->maint, now, keep, nkeep,
                       c->nqueue > 0 && c->queue[0].recorded && !c->round.running))
        fault_stall(c, "stall-orphan-scan", 3 * c->cfg.lease_ttl_ms);
}
