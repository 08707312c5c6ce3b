/*
 * The worker's link to the coordinator (docs/design.md, "The epoch protocol") and its main loop:
 * find the leader through etcd (`/cdc/<job>/leader`, JSON {"id","endpoint","admin"}; term = the
 * key's create revision) and redial when it changes, register with a stable id and a per-process
 * incarnation, heartbeat, and act on Assign (restore + seek), Barrier (snapshot + Ack, then keep
 * consuming), Abort (drop staged data, wait for the next assignment), Committed (drop old
 * checkpoints) and Reject. Messages of an older term or generation than the assignment we run are
 * ignored, so a stale leader can never make this worker ack into a generation it does not own. *
 * A call circle of three files (docs/development.md, "Call circles"): session.c runs the
 * main loop and hands it to consume.c for records and to barrier.c for Barrier and
 * Committed; the record loop polls the control link between batches (session.c) and
 * starts and waits for the finalizer (barrier.c); the finalizer pauses fetching while
 * staged bytes are over their budget (consume.c) and sends its Ack on the link
 * (session.c). Everything else in worker/ sits below these three.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/cluster.h"
#include "common/log.h"
#include "common/state.h"
#include "common/workerauth.h"
#include "worker/worker.h"

/* Longer than NNG's reconnect backoff cap (2 s): its dialer had its chances by then. */
#define LINK_RESET_MS 3000
/* Registered but no assignment for this long: our Register or the Assign got lost. */
#define REREGISTER_MS 5000

/* Set by the heartbeat thread when its sends keep failing on a link NNG calls up. */
static _Atomic bool reset_wanted;

/* Sends one envelope; the caller holds link_lock. */
static bool send_locked(cdc_worker_t *w, Cdc__Envelope *env)
{
    cdc_error_t e;
    if (w->msg == NULL)
        return false;
    if (cdc_msg_client_send(w->msg, env, &e) != CDC_OK) {
        cdc_log_debug("could not send %s to the coordinator: %s", cdc_msg_body_name(env), e.msg);
        return false;
    }
    return true;
}

static bool has_secret(const cdc_worker_t *w)
{
    return w->cfg.worker_secret != NULL && w->cfg.worker_secret[0] != '\0';
}

/* Sends a Register; with nonce (a Challenge's, nonce_len bytes), its proof of the worker
 * secret (common/workerauth.h). Caller holds link_lock. */
static void send_register(cdc_worker_t *w, const uint8_t *nonce, size_t nonce_len)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Register r = CDC__REGISTER__INIT;
    uint8_t proof[CDC_WORKERAUTH_PROOF_LEN];
    char admin[256];
    cdc_error_t e;

    snprintf(admin, sizeof(admin), "%s", w->cfg.http ? w->cfg.http : "");
    r.worker_id = w->cfg.id;
    r.incarnation = w->incarnation;
    r.admin_endpoint = admin;
    /* the coordinator gives partitions only to workers that can consume the job's tables; a
     * follower consumes whatever they are and offers what the schema topic registers */
    r.topics = cdc_worker_register_topics(w, &r.n_topics);
    r.follows_tables = w->follows_tables;
    if (nonce != NULL) {
        if (cdc_workerauth_proof(w->cfg.worker_secret, nonce, nonce_len, r.worker_id, r.incarnation,
                                 admin, proof, &e) != CDC_OK) {
            cdc_log_error("could not answer the coordinator's challenge: %s", e.msg);
            return; /* registered again later, and challenged again */
        }
        r.proof.data = proof;
        r.proof.len = sizeof(proof);
    }
    env.body_case = CDC__ENVELOPE__BODY_REGISTER;
    env.register_ = &r;
    send_locked(w, &env);
    memset(proof, 0, sizeof(proof));
    if (nonce != NULL) {
        w->proved = true;
        cdc_log_debug("answered the challenge of coordinator %s", w->leader_url);
        return;
    }
    cdc_log_info("registering with coordinator %s as \"%s\" (incarnation %" PRIu64 ")",
                 w->leader_url, w->cfg.id, w->incarnation);
}

/* The coordinator wants a proof of the worker secret before it registers us. */
static void on_challenge(cdc_worker_t *w, const Cdc__Challenge *ch)
{
    if (!has_secret(w)) {
        if (!w->auth_warned)
            cdc_log_error("coordinator %s requires workers to prove a secret and this worker "
                          "has none: it refuses us (hint: set --worker-secret-file to the "
                          "coordinator's secret; docs/security.md)",
                          w->leader_url);
        w->auth_warned = true;
        return;
    }
    pthread_mutex_lock(&w->link_lock);
    send_register(w, ch->nonce.data, ch->nonce.len);
    pthread_mutex_unlock(&w->link_lock);
}

/* Caller holds link_lock. */
static bool send_heartbeat(cdc_worker_t *w)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Heartbeat h = CDC__HEARTBEAT__INIT;
    Cdc__DeadLetters dl[CDC_DLQ__COUNT], *dlp[CDC_DLQ__COUNT];
    for (int cls = 0; cls < CDC_DLQ__COUNT; cls++) {
        cdc__dead_letters__init(&dl[cls]);
        dl[cls].error_class = (char *)cdc_dlq_class_name((cdc_dlq_class_t)cls);
        dl[cls].records = (uint64_t)cdc_metrics_value(w->m_dlq[cls]);
        dlp[cls] = &dl[cls];
    }
    h.n_dead_letters = CDC_DLQ__COUNT;
    h.dead_letters = dlp;
    if (w->follows_tables) /* its offer: the set widens once every live worker offers a table */
        h.topics = cdc_worker_register_topics(w, &h.n_topics);
    h.worker_id = w->cfg.id;
    h.incarnation = w->incarnation;
    h.term = w->term;
    h.generation = w->generation;
    h.large_event_bytes = cdc_worker_large_event(w, cdc_clock_mono_ms());
    env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &h;
    return send_locked(w, &env);
}

/* Heartbeat thread: every interval while registered. Stops with the stop flag. */
static void *heartbeat_main(void *arg)
{
    cdc_worker_t *w = arg;
    int failed = 0; /* consecutive heartbeats NNG could not send */
    while (!*w->stop) {
        struct timespec ts = {w->cfg.heartbeat_interval_ms / 1000,
                              (w->cfg.heartbeat_interval_ms % 1000) * 1000000};
        int64_t t0 = cdc_clock_mono_ms();
        pthread_mutex_lock(&w->link_lock);
        int64_t t1 = cdc_clock_mono_ms();
        if (w->registered) {
            failed = send_heartbeat(w) ? 0 : failed + 1;
            if (failed >= 3) { /* each waited out the 1 s send timeout: a dead link */
                atomic_store(&reset_wanted, true);
                failed = 0;
            }
        } else {
            failed = 0;
        }
        pthread_mutex_unlock(&w->link_lock);
        int64_t t2 = cdc_clock_mono_ms();
        if (t2 - t0 > w->cfg.heartbeat_interval_ms)
            cdc_log_warn("heartbeat was late: %" PRId64 " ms waiting for the link, %" PRId64
                         " ms sending",
                         t1 - t0, t2 - t1);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Points the client at url (opening it the first time). */
static void dial(cdc_worker_t *w, const char *url)
{
    cdc_error_t e;
    cdc_err_t rc;
    if (strcmp(url, w->leader_url) == 0 && w->msg != NULL)
        return;
    pthread_mutex_lock(&w->link_lock);
    if (w->msg == NULL)
        rc = cdc_msg_client_open(&w->msg, url, &(cdc_msg_options_t){.tls = w->tls}, &e);
    else /* a new socket: nothing queued for the old leader goes to the new one */
        rc = cdc_msg_client_reset(w->msg, url, &e);
    w->registered = false;
    w->proved = false;
    pthread_mutex_unlock(&w->link_lock);
    if (rc != CDC_OK) {
        cdc_log_warn("could not dial coordinator %s: %s", url, e.msg);
        return;
    }
    cdc_log_info("dialing coordinator %s", url);
    snprintf(w->leader_url, sizeof(w->leader_url), "%s", url);
    w->next_register_ms = 0;
}

void cdc_worker_find_leader(cdc_worker_t *w)
{
    char key[300], *value = NULL;
    int64_t term = 0;
    cdc_error_t e;
    cdc_leader_record_t lr;

    if (w->cfg.coordinator != NULL && w->cfg.coordinator[0] != '\0') {
        dial(w, w->cfg.coordinator);
        return;
    }
    cdc_cluster_key(key, sizeof(key), w->cfg.job, "leader");
    if (cdc_etcd_leader(w->etcd, key, &value, &term, &e) != CDC_OK) {
        if (e.code != CDC_ERR_NOT_FOUND)
            cdc_log_debug("could not read leader key \"%s\": %s", key, e.msg);
        return;
    }
    if (cdc_leader_record_parse(value, &lr, &e) == CDC_OK && lr.endpoint[0] != '\0') {
        if (term != w->leader_term)
            cdc_log_info("leader of job \"%s\" is \"%s\" (term %" PRId64 ")", w->cfg.job, lr.id,
                         term);
        w->leader_term = term;
        dial(w, lr.endpoint);
    } else {
        cdc_log_warn("leader key \"%s\" has no endpoint: %s", key, value);
    }
    free(value);
}

static bool newer_or_same(uint64_t t1, uint64_t g1, uint64_t t2, uint64_t g2)
{
    return t1 > t2 || (t1 == t2 && g1 >= g2);
}

static void on_assign(cdc_worker_t *w, const Cdc__Assign *a)
{
    cdc_error_t e;

    if (has_secret(w) && !w->proved && !w->auth_warned) {
        cdc_log_warn("coordinator %s registered this worker without asking it to prove the "
                     "worker secret: it runs without --worker-secret, so any process that "
                     "reaches it can pose as a worker (docs/security.md)",
                     w->leader_url);
        w->auth_warned = true;
    }
    /* A new assignment must be newer than the one we run; after an Abort the next
     * Assign carries the Abort's generation. */
    bool accept = a->term > w->term ||
                  (a->term == w->term && (a->generation > w->generation ||
                                          (!w->assigned && a->generation == w->generation)));
    if (!accept) {
        cdc_metrics_counter_inc(w->m_rejected);
        cdc_log_warn("ignoring stale assignment (term %" PRIu64 " generation %" PRIu64
                     "; running term %" PRIu64 " generation %" PRIu64 ")",
                     a->term, a->generation, w->term, w->generation);
        return;
    }
    pthread_mutex_lock(&w->link_lock);
    w->term = a->term;
    w->generation = a->generation;
    pthread_mutex_unlock(&w->link_lock);
    w->assigned = false;
    if (cdc_worker_assign(w, a, &e) != CDC_OK) {
        cdc_log_error("could not take assignment (term %" PRIu64 " generation %" PRIu64 "): %s",
                      a->term, a->generation, e.msg);
        cdc_worker_disk_failed(w, &e);
        cdc_worker_suspend(w);
        w->assignment_seq++;
        return;
    }
    w->assigned = true;
    w->assignment_seq++;
    snprintf(w->refused, sizeof(w->refused), "%s", a->refused != NULL ? a->refused : "");
    if (w->refused[0] != '\0') {
        /* idle until an assignment gives us partitions: the other workers carry ours */
        cdc_log_error("coordinator %s gives this worker no partitions (term %" PRIu64
                      " generation %" PRIu64 "): %s (hint: give it the job's tables in --tables "
                      "or --topics, or neither, so that it follows job \"%s\"; docs/worker.md, "
                      "\"The job's tables\")",
                      w->leader_url, a->term, a->generation, a->refused, w->cfg.job);
        return;
    }
    cdc_log_info("assignment term %" PRIu64 " generation %" PRIu64 ": %zu partitions from "
                 "checkpoint %" PRIu64 ", %zu tables",
                 a->term, a->generation, a->n_partitions, a->checkpoint_epoch, a->n_tables);
}

static void on_barrier(cdc_worker_t *w, const Cdc__Barrier *b)
{
    cdc_error_t e;

    if (!w->assigned || b->term != w->term || b->generation != w->generation) {
        cdc_metrics_counter_inc(w->m_rejected);
        cdc_log_debug("ignoring barrier %" PRIu64 " of term %" PRIu64 " generation %" PRIu64,
                      b->epoch, b->term, b->generation);
        return;
    }
    /* Cut here (a record boundary); the finalizer thread acks, we keep consuming. */
    if (cdc_worker_barrier(w, b->term, b->generation, b->epoch, &e) != CDC_OK) {
        /* No ack: the coordinator aborts the epoch and reassigns; nothing is lost. */
        cdc_log_error("could not snapshot epoch %" PRIu64 ": %s", b->epoch, e.msg);
        cdc_worker_disk_failed(w, &e);
    } else /* truncates met in one partition: the next epoch's first record boundary */
        cdc_worker_apply_floors(w, b->floors, b->n_floors);
    /* the next epoch's rows are staged under the specs the coordinator has now */
    cdc_layouts_update(&w->layouts, b->layouts, b->n_layouts);
}

bool cdc_worker_send_ack(cdc_worker_t *w, Cdc__Ack *ack)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    bool sent = false;
    ack->worker_id = w->cfg.id;
    env.body_case = CDC__ENVELOPE__BODY_ACK;
    env.ack = ack;
    pthread_mutex_lock(&w->link_lock);
    if (ack->term == w->term && ack->generation == w->generation)
        sent = send_locked(w, &env);
    pthread_mutex_unlock(&w->link_lock);
    return sent;
}

static void on_abort(cdc_worker_t *w, const Cdc__Abort *a)
{
    if (!newer_or_same(a->term, a->generation, w->term, w->generation)) {
        cdc_metrics_counter_inc(w->m_rejected);
        return;
    }
    cdc_log_warn("epochs from %" PRIu64 " aborted (term %" PRIu64 " generation %" PRIu64
                 "): %s; dropping staged data, waiting for a new assignment",
                 a->epoch, a->term, a->generation, a->reason ? a->reason : "");
    cdc_metrics_counter_inc(w->m_aborts);
    cdc_worker_suspend(w);
    w->assignment_seq++;
    pthread_mutex_lock(&w->link_lock);
    w->term = a->term;
    w->generation = a->generation;
    pthread_mutex_unlock(&w->link_lock);
    w->assigned = false;
}

static void on_tables(cdc_worker_t *w, const Cdc__Tables *t)
{
    cdc_error_t e;

    if (!w->assigned || t->term != w->term || t->generation != w->generation) {
        /* of another assignment: the next Assign carries the set */
        cdc_log_debug("ignoring the table set of term %" PRIu64 " generation %" PRIu64, t->term,
                      t->generation);
        return;
    }
    if (cdc_worker_widen(w, t->tables, t->n_tables, &e) != CDC_OK) {
        /* its slots would miss the table: stop acking (the epoch's ack deadline recovers
         * the job) and take the set whole with the next assignment */
        cdc_log_error("could not take the job's wider table set (term %" PRIu64
                      " generation %" PRIu64 "): %s; waiting for a new assignment",
                      t->term, t->generation, e.msg);
        cdc_worker_suspend(w);
        w->assignment_seq++;
        w->assigned = false;
        return;
    }
    cdc_log_info("job's table set widened (term %" PRIu64 " generation %" PRIu64
                 "): %zu tables, no recovery",
                 t->term, t->generation, t->n_tables);
}

void cdc_worker_handle(cdc_worker_t *w, const Cdc__Envelope *env)
{
    switch (env->body_case) {
    case CDC__ENVELOPE__BODY_ASSIGN:
        on_assign(w, env->assign);
        break;
    case CDC__ENVELOPE__BODY_BARRIER:
        on_barrier(w, env->barrier);
        break;
    case CDC__ENVELOPE__BODY_ABORT:
        on_abort(w, env->abort);
        break;
    case CDC__ENVELOPE__BODY_TABLES:
        on_tables(w, env->tables);
        break;
    case CDC__ENVELOPE__BODY_COMMITTED:
        if (env->committed->term >= w->term)
            cdc_worker_committed(w, env->committed->epoch);
        break;
    case CDC__ENVELOPE__BODY_CHALLENGE:
        on_challenge(w, env->challenge);
        break;
    case CDC__ENVELOPE__BODY_REJECT:
        cdc_log_warn("coordinator rejected us: %s",
                     env->reject->reason ? env->reject->reason : "(no reason)");
        pthread_mutex_lock(&w->link_lock);
        w->registered = false;
        pthread_mutex_unlock(&w->link_lock);
        w->next_register_ms = cdc_clock_mono_ms() + 100;
        break;
    default:
        cdc_log_debug("ignoring %s from the coordinator", cdc_msg_body_name(env));
        break;
    }
}

bool cdc_worker_poll_control(cdc_worker_t *w)
{
    uint64_t seq = w->assignment_seq;
    Cdc__Envelope *env = NULL;
    cdc_error_t e;
    while (w->msg != NULL && !*w->stop && cdc_msg_client_recv(w->msg, 0, &env, &e) == CDC_OK) {
        cdc_worker_handle(w, env);
        cdc_msg_free(env);
        env = NULL;
        if (w->assignment_seq != seq)
            break; /* let the caller drop its batch before anything else happens */
    }
    return w->assignment_seq != seq;
}

/* Closes the client socket and dials the leader from a new one; registers afresh. Caller
 * holds link_lock. */
static void reset_link(cdc_worker_t *w, cdc_link_watch_t *lw, int64_t now, const char *why)
{
    cdc_error_t e;
    cdc_msg_client_stats_t st;

    cdc_msg_client_stats(w->msg, &st);
    cdc_log_warn("%s: reopening the connection to coordinator %s (pipe %u, %" PRIu64
                 " connections so far, %" PRIu64 " refused, %" PRIu64 " abandoned sockets)",
                 why, w->leader_url, st.pipe, st.pipes_added, st.pipes_refused, st.stuck_closes);
    if (cdc_msg_client_reset(w->msg, w->leader_url, &e) != CDC_OK)
        cdc_log_warn("could not reopen the connection to coordinator %s: %s", w->leader_url, e.msg);
    w->registered = false;
    w->proved = false;
    w->next_register_ms = 0;
    lw->down_since_ms = now;
}

/*
 * Keeps the session with the coordinator alive; runs every main loop iteration with
 * link_lock held. A worker the coordinator dropped (a pause past the heartbeat timeout,
 * a network cut) must come back on its own:
 * - link down for LINK_RESET_MS (longer than NNG's own redial backoff), or heartbeats
 *   failing on a link NNG still calls up: the whole client socket is replaced, so no
 *   pipe, dialer or queued message of the old link survives;
 * - link up and not registered: Register (again after a Reject);
 * - registered for REREGISTER_MS without an assignment: the Register or the Assign was
 *   lost (the coordinator drops messages for a pipe that does not read), so Register
 *   again; the coordinator answers a known worker with its current Assign.
 */
void cdc_worker_watch_link(cdc_worker_t *w, cdc_link_watch_t *lw, int64_t now)
{
    if (w->msg == NULL)
        return;
    if (atomic_exchange(&reset_wanted, false)) {
        reset_link(w, lw, now, "heartbeats keep failing");
        return;
    }
    if (!cdc_msg_client_connected(w->msg)) {
        w->registered = false;
        if (lw->down_since_ms == 0)
            lw->down_since_ms = now;
        else if (now - lw->down_since_ms >= LINK_RESET_MS)
            reset_link(w, lw, now, "no connection for 3 s");
        return;
    }
    lw->down_since_ms = 0;
    if (lw->was_assigned && !w->assigned)
        lw->waiting_ms = now; /* aborted: the coordinator reassigns */
    lw->was_assigned = w->assigned;
    if (w->registered && !w->assigned && now - lw->waiting_ms >= REREGISTER_MS) {
        cdc_log_info("no assignment for %" PRId64 " ms: registering again", now - lw->waiting_ms);
        w->registered = false;
    }
    if (!w->registered && now >= w->next_register_ms) {
        w->registered = true;
        lw->waiting_ms = now;
        send_register(w, NULL, 0);
    }
}

/*
 * This thread consumes and records; the finalizer and RocksDB's flush threads make an
 * epoch durable. Lowering this thread's priority (nice is per thread on Linux) gives a
 * barrier's work the CPU first when the worker is CPU-bound: the commit latency stays
 * low and consumption slows down only while an epoch is being finished. The worker's
 * share against other processes is unchanged where each process or container has its
 * own scheduling group (autogroup, cgroup). Threads inherit the nice of their creator,
 * so RocksDB's shared threads are started first; the others already run.
 */
static void lower_record_priority(cdc_worker_t *w)
{
    if (w->cfg.record_nice <= 0)
        return;
    cdc_state_env_init();
    errno = 0;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), (int)w->cfg.record_nice) != 0)
        cdc_log_warn("could not lower the record thread's priority (--record-nice): %s",
                     strerror(errno));
}

cdc_err_t cdc_worker_run(cdc_worker_t *w, cdc_error_t *e)
{
    cdc_err_t rc;
    if (w->cfg.coordinator == NULL || w->cfg.coordinator[0] == '\0') {
        cdc_etcd_security_t sec = cdc_etcd_options_security(&w->cfg.etcd);
        rc = cdc_etcd_open_secure(&w->etcd, w->cfg.etcd.endpoints, &sec, 2000, e);
        if (rc != CDC_OK)
            return cdc_error_prefix(e, "option --etcd");
    }
    if (cdc_worker_schemas_poll(w, e) != CDC_OK)
        cdc_log_warn("schema topic not readable yet: %s", e->msg);
    rc = CDC_OK;
    if (pthread_create(&w->hb.thread, NULL, heartbeat_main, w) != 0)
        return cdc_error_set(e, CDC_ERR_INTERNAL, "could not start the heartbeat thread");
    w->hb.running = true;
    lower_record_priority(w);

    cdc_link_watch_t lw = {0};
    while (!*w->stop) {
        int64_t now = cdc_clock_mono_ms();
        Cdc__Envelope *env = NULL;

        cdc_health_beat(&w->health);
        cdc_tls_check(w->tls);
        cdc_worker_offer_refresh(w, now); /* a follower offers newly registered tables */

        if (now >= w->next_leader_check_ms) {
            cdc_worker_find_leader(w);
            /* every second while registered; faster while looking for a leader (start,
             * failover), so that a new leader's first assignment waits for nobody */
            w->next_leader_check_ms = now + (w->registered ? 1000 : 200);
        }
        pthread_mutex_lock(&w->link_lock);
        cdc_worker_watch_link(w, &lw, now);
        pthread_mutex_unlock(&w->link_lock);
        /* Coordinator messages first (the consume loop also polls between records). */
        while (cdc_worker_poll_control(w) && !*w->stop)
            ;
        if (w->assigned) {
            rc = cdc_worker_consume(w, 20, e);
            if (rc == CDC_ERR_CONFIG) {
                *w->stop = 1; /* retrying cannot help: stop (the heartbeat thread too) */
                break;
            }
            if (rc != CDC_OK)
                cdc_log_warn("%s", e->msg);
            cdc_worker_update_gauges(w, now);
        } else if (w->msg != NULL && cdc_msg_client_recv(w->msg, 50, &env, e) == CDC_OK) {
            cdc_worker_handle(w, env);
            cdc_msg_free(env);
        } else if (w->msg == NULL) {
            struct timespec ts = {0, 50 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    if (w->hb.running)
        pthread_join(w->hb.thread, NULL);
    cdc_worker_finalizer_wait(w, true); /* it sends on w->msg */
    cdc_msg_client_close(w->msg);
    w->msg = NULL;
    cdc_etcd_close(w->etcd);
    w->etcd = NULL;
    return rc == CDC_ERR_CONFIG ? rc : CDC_OK;
}
