/*
 * Unit tests for coordinator/job.c, the leader's job state machine: who may register and
 * when (a standby rejects and later closes the pipe, a FAILED job rejects), when
 * RECOVERING turns into RUNNING (restart delay, rebalance grace, the expected workers of a
 * term's first assignment, epoch ids in hand) and what the Assign of each worker carries,
 * what makes a running job recover (a join without counting a failure, an owner's restart,
 * lost heartbeats, a lost pipe, a missed ack deadline) and when the restart strategy turns
 * it FAILED, stepping down, the loop's wait and the retry of a leader start etcd refused.
 *
 * The coordinator runs without etcd or a warehouse: its NNG server listens in-process
 * (inproc; over TCP, NNG 1.5.2's pipe reaper can get stuck when a pipe is closed while it
 * receives, common/msg.c, and every later close in the process would hang) and each worker
 * is a real NNG client, so every Assign, Abort and Reject is read as a worker reads it. "Nothing
 * was sent" is checked with a marker: the coordinator sends a Reject "marker" to the pipe, which
 * must then be the next message there (a pipe keeps its order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "coordinator/job_int.h"
#include "tests/harness/harness.h"

#define WAIT_MS 5000 /* deadline of every wait for a message or a pipe event */
#define TERM 7
#define GRACE_MS 2000
#define DELAY_MS 500
#define TOPIC "cdc.public.orders"

typedef struct peer {
    cdc_msg_client_t *cl;
    uint32_t pipe; /* the coordinator's pipe of this worker */
} peer_t;

#define NPEERS 14

static cdc_coord_t *C;
static peer_t P[NPEERS];
static char URL[64];
static int nurl;
static uint32_t removed[64]; /* pipes whose removal the server reported in this test */
static int nremoved;

static int setup(void **state)
{
    cdc_error_t e;
    (void)state;
    C = calloc(1, sizeof(*C));
    assert_non_null(C);
    C->cfg.id = "c1";
    C->cfg.job = "job-unit";
    C->cfg.commit_interval_ms = 1000;
    C->cfg.heartbeat_timeout_ms = 3000;
    C->cfg.ack_deadline_ms = 5000;
    C->cfg.rebalance_grace_ms = GRACE_MS;
    C->cfg.restart_max_failures = 2;
    C->cfg.restart_interval_ms = 60000;
    C->cfg.restart_delay_ms = DELAY_MS;
    C->metrics = cdc_metrics_new();
    cdc_job_init(C);
    snprintf(URL, sizeof(URL), "inproc://test_job_%d", ++nurl);
    if (cdc_msg_server_open(&C->msg, URL, NULL, &e) != CDC_OK)
        fail_msg("%s", e.msg);
    memset(P, 0, sizeof(P));
    nremoved = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NPEERS; i++)
        cdc_msg_client_close(P[i].cl);
    cdc_msg_server_close(C->msg);
    cdc_leader_close(&C->leader, false);
    cdc_etcd_close(C->etcd);
    cdc_epochs_clear(&C->epochs);
    cdc_job_clear_queue(C);
    cdc_checkpoint_free(C->base);
    cdc_members_free(&C->members);
    cdc_tableset_clear(&C->tables);
    cdc_tableset_clear(&C->tables_missing);
    cdc_progress_free(&C->progress);
    cdc_http_doc_free(&C->status);
    cdc_metrics_free(C->metrics);
    free(C);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------ */

/* What leader_start leaves behind in a new term: RECOVERING, epoch ids reserved, the
 * restart delay over. */
static void lead(int64_t now)
{
    C->term = TERM;
    cdc_epochs_reserve(&C->epochs, 1, 1001);
    C->restart_at_ms = now;
    C->grace_until_ms = now + GRACE_MS;
    C->state = CDC_JOB_RECOVERING;
}

static void send_from(peer_t *p, const Cdc__Envelope *env)
{
    cdc_error_t e;
    assert_int_equal(cdc_msg_client_send(p->cl, env, &e), CDC_OK);
}

/* Receives the next worker message at the coordinator (the caller frees it). */
static Cdc__Envelope *coord_recv(uint32_t *pipe)
{
    Cdc__Envelope *env = NULL;
    cdc_error_t e;
    assert_int_equal(cdc_msg_server_recv(C->msg, WAIT_MS, &env, pipe, &e), CDC_OK);
    return env;
}

/* Splits a comma-separated list into names (at most 8; list is the buffer); returns how
 * many. */
static size_t split(char *list, size_t size, const char *topics, char **names)
{
    char *save = NULL;
    size_t n = 0;
    snprintf(list, size, "%s", topics != NULL ? topics : "");
    for (char *t = strtok_r(list, ",", &save); t != NULL && n < 8; t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    return n;
}

static uint32_t register_as(peer_t *p, const char *id, uint64_t incarnation, const char *topics,
                            bool follows, int64_t now);

/* Worker p (dialing first if needed) sends Register{id, incarnation, topics} (topics: a
 * comma-separated list, NULL = none reported); the coordinator handles it at now. Returns
 * the pipe it came on. */
static uint32_t register_topics(peer_t *p, const char *id, uint64_t incarnation, const char *topics,
                                int64_t now)
{
    return register_as(p, id, incarnation, topics, false, now);
}

/* The same for a worker without --tables: it follows the job's tables and offers topics. */
static uint32_t register_follower(peer_t *p, const char *id, uint64_t incarnation,
                                  const char *offer, int64_t now)
{
    return register_as(p, id, incarnation, offer, true, now);
}

static uint32_t register_as(peer_t *p, const char *id, uint64_t incarnation, const char *topics,
                            bool follows, int64_t now)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
    Cdc__Register r = CDC__REGISTER__INIT;
    char list[512], *names[8];
    cdc_error_t e;
    uint32_t pipe = 0;

    if (p->cl == NULL)
        assert_int_equal(cdc_msg_client_open(&p->cl, URL, NULL, &e), CDC_OK);
    r.worker_id = (char *)id;
    r.incarnation = incarnation;
    r.admin_endpoint = "127.0.0.1:1";
    r.n_topics = split(list, sizeof(list), topics, names);
    r.topics = names;
    r.follows_tables = follows;
    env.body_case = CDC__ENVELOPE__BODY_REGISTER;
    env.register_ = &r;
    send_from(p, &env);
    in = coord_recv(&pipe);
    assert_int_equal(in->body_case, CDC__ENVELOPE__BODY_REGISTER);
    cdc_job_on_message(C, in, pipe, now);
    cdc_msg_free(in);
    p->pipe = pipe;
    return pipe;
}

static uint32_t do_register(peer_t *p, const char *id, uint64_t incarnation, int64_t now)
{
    return register_topics(p, id, incarnation, NULL, now);
}

/* Worker p heartbeats with its offer (a comma-separated list; NULL = none). */
static void heartbeat_offer(peer_t *p, const char *offer, int64_t now)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
    Cdc__Heartbeat h = CDC__HEARTBEAT__INIT;
    char list[512], *names[8];
    uint32_t pipe = 0;
    h.n_topics = split(list, sizeof(list), offer, names);
    h.topics = names;
    env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &h;
    send_from(p, &env);
    in = coord_recv(&pipe);
    assert_int_equal(pipe, p->pipe);
    cdc_job_on_message(C, in, pipe, now);
    cdc_msg_free(in);
}

static void heartbeat(peer_t *p, int64_t now)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
    Cdc__Heartbeat h = CDC__HEARTBEAT__INIT;
    uint32_t pipe = 0;
    env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &h;
    send_from(p, &env);
    in = coord_recv(&pipe);
    assert_int_equal(pipe, p->pipe);
    cdc_job_on_message(C, in, pipe, now);
    cdc_msg_free(in);
}

/* The next message worker p gets; it must be of kind body (the caller frees it). */
static Cdc__Envelope *expect(peer_t *p, Cdc__Envelope__BodyCase body)
{
    Cdc__Envelope *env = NULL;
    cdc_error_t e;
    assert_int_equal(cdc_msg_client_recv(p->cl, WAIT_MS, &env, &e), CDC_OK);
    if (env->body_case != body)
        fail_msg("expected %d, got %s", (int)body, cdc_msg_body_name(env));
    return env;
}

static void expect_reject(peer_t *p, const char *reason)
{
    Cdc__Envelope *env = expect(p, CDC__ENVELOPE__BODY_REJECT);
    assert_string_equal(env->reject->reason, reason);
    cdc_msg_free(env);
}

/* Nothing was sent to p since its last expected message. */
static void expect_nothing(peer_t *p)
{
    cdc_job_send_reject(C, p->pipe, "marker");
    expect_reject(p, "marker");
}

static void expect_abort(peer_t *p, uint64_t generation, uint64_t epoch, const char *reason)
{
    Cdc__Envelope *env = expect(p, CDC__ENVELOPE__BODY_ABORT);
    assert_int_equal(env->abort->term, TERM);
    assert_int_equal(env->abort->generation, generation);
    assert_int_equal(env->abort->epoch, epoch);
    assert_string_equal(env->abort->reason, reason);
    cdc_msg_free(env);
}

/* The Assign p gets: of this term and the coordinator's generation; returns its number of
 * partitions. */
static size_t expect_assign(peer_t *p)
{
    Cdc__Envelope *env = expect(p, CDC__ENVELOPE__BODY_ASSIGN);
    size_t n = env->assign->n_partitions;
    assert_int_equal(env->assign->term, TERM);
    assert_int_equal(env->assign->generation, C->generation);
    assert_int_equal(env->assign->next_epoch, C->epochs.next_epoch);
    cdc_msg_free(env);
    return n;
}

static bool removed_seen(void *arg)
{
    uint32_t pipe = *(const uint32_t *)arg;
    cdc_msg_event_t ev;
    while (cdc_msg_server_poll_event(C->msg, &ev))
        if (ev.type == CDC_MSG_PIPE_REMOVED && nremoved < 64)
            removed[nremoved++] = ev.pipe;
    for (int i = 0; i < nremoved; i++)
        if (removed[i] == pipe)
            return true;
    return false;
}

/* The coordinator closed (or lost) pipe: its removal event arrives. */
static void expect_closed(uint32_t pipe)
{
    assert_true(cdc_test_wait_for(removed_seen, &pipe, WAIT_MS));
}

static int owned_by(const char *id)
{
    int n = 0;
    for (int p = 0; p < CDC_PARTITIONS; p++)
        n += strcmp(C->owner[p], id) == 0;
    return n;
}

static double counter(cdc_counter_t *c)
{
    return cdc_metrics_value(c);
}

/* RUNNING in generation 1 with w1 and w2 (six slots each), their Assigns read. */
static void run_two(int64_t now)
{
    lead(now);
    C->cfg.expected_workers = 2;
    do_register(&P[0], "w1", 1, now);
    do_register(&P[1], "w2", 1, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(expect_assign(&P[0]), 6);
    assert_int_equal(expect_assign(&P[1]), 6);
}

/* ---- states and names ------------------------------------------------------------------ */

static void test_state_names(void **state)
{
    (void)state;
    assert_string_equal(cdc_job_state_name(CDC_JOB_STANDBY), "STANDBY");
    assert_string_equal(cdc_job_state_name(CDC_JOB_STARTING), "STARTING");
    assert_string_equal(cdc_job_state_name(CDC_JOB_RECOVERING), "RECOVERING");
    assert_string_equal(cdc_job_state_name(CDC_JOB_RUNNING), "RUNNING");
    assert_string_equal(cdc_job_state_name(CDC_JOB_FAILED), "FAILED");
    assert_string_equal(cdc_job_state_name((cdc_job_state_t)42), "UNKNOWN");
}

/* ---- a coordinator that does not lead --------------------------------------------------- */

/* A worker id longer than CDC_WORKER_ID_MAX - 1 bytes is refused loudly: the Reject names
 * the option and the length, and the worker is not a member. */
static void test_too_long_id_refused(void **state)
{
    char id[CDC_WORKER_ID_MAX + 10];
    Cdc__Envelope *env;
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    memset(id, 'w', sizeof(id) - 1);
    id[sizeof(id) - 1] = '\0';
    lead(now);
    do_register(&P[0], id, 1, now);
    env = expect(&P[0], CDC__ENVELOPE__BODY_REJECT);
    assert_non_null(strstr(env->reject->reason, "(option --id)"));
    assert_non_null(strstr(env->reject->reason, "73 bytes long, at most 63"));
    cdc_msg_free(env);
    assert_int_equal(C->members.n, 0);
    /* its pipe is closed once the Reject had time to leave, although this one leads */
    assert_int_equal(C->nclosing, 1);
    assert_true(C->closing[0].refused);
    cdc_job_close_rejected(C, C->closing[0].due_ms);
    assert_int_equal(C->nclosing, 0);
}

/* A standby rejects a Register and closes the pipe REJECT_CLOSE_DELAY_MS later, once. */
static void test_standby_rejects_then_closes(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    uint32_t pipe;
    (void)state;
    pipe = do_register(&P[0], "w1", 1, now);
    expect_reject(&P[0], "not the leader");
    assert_int_equal(C->members.n, 0);
    assert_int_equal(C->nclosing, 1);
    assert_int_equal(C->closing[0].pipe, pipe);
    int64_t due = C->closing[0].due_ms;
    assert_true(due >= now + 200);
    /* a second message on the same pipe is rejected too but not scheduled twice */
    heartbeat(&P[0], now);
    expect_reject(&P[0], "not the leader");
    assert_int_equal(C->nclosing, 1);
    cdc_job_close_rejected(C, due - 1);
    assert_int_equal(C->nclosing, 1);
    expect_nothing(&P[0]); /* still open */
    cdc_job_close_rejected(C, due);
    assert_int_equal(C->nclosing, 0);
    expect_closed(pipe);
}

/* A standby that leads again before the delay passed forgets the pipes it meant to close:
 * the worker registers again on the same pipe. */
static void test_rejected_pipe_kept_when_leading(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    do_register(&P[0], "w1", 1, now);
    expect_reject(&P[0], "not the leader");
    assert_int_equal(C->nclosing, 1);
    lead(now);
    cdc_job_close_rejected(C, now + 10000);
    assert_int_equal(C->nclosing, 0);
    expect_nothing(&P[0]);
}

/* A flood of rejected dialers: past CDC_CLOSING_MAX due pipes, the next is closed at once. */
static void test_standby_closing_list_full(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    uint32_t pipe;
    (void)state;
    for (int i = 0; i < CDC_CLOSING_MAX; i++) {
        C->closing[i].pipe = 100000u + (uint32_t)i; /* no such pipes */
        C->closing[i].due_ms = now + 1000;
    }
    C->nclosing = CDC_CLOSING_MAX;
    pipe = do_register(&P[0], "w1", 1, now);
    expect_closed(pipe);
    assert_int_equal(C->nclosing, CDC_CLOSING_MAX);
}

/* STARTING leads already: a Register is rejected (the worker asks again) but the pipe stays. */
static void test_starting_rejects_without_closing(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    C->state = CDC_JOB_STARTING;
    C->term = TERM;
    do_register(&P[0], "w1", 1, now);
    expect_reject(&P[0], "not the leader");
    assert_int_equal(C->members.n, 0);
    assert_int_equal(C->nclosing, 0);
    heartbeat(&P[0], now);
    expect_reject(&P[0], "not the leader");
    expect_nothing(&P[0]);
}

/* ---- registration and heartbeats -------------------------------------------------------- */

static void test_register_invalid_id(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    uint32_t pipe;
    (void)state;
    lead(now);
    pipe = do_register(&P[0], "", 1, now);
    expect_reject(&P[0], "empty worker id (option --id)");
    assert_int_equal(C->nclosing, 1); /* closed once the Reject had time to leave */
    cdc_job_close_rejected(C, C->closing[0].due_ms);
    expect_closed(pipe);
    assert_int_equal(cdc_members_alive_count(&C->members), 0);
}

static void test_heartbeats(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    P[0].pipe = 0;
    assert_int_equal(cdc_msg_client_open(&P[0].cl, URL, NULL, &(cdc_error_t){0}), CDC_OK);
    /* a heartbeat from a pipe nobody registered on */
    {
        Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
        Cdc__Heartbeat h = CDC__HEARTBEAT__INIT;
        env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &h;
        send_from(&P[0], &env);
        in = coord_recv(&P[0].pipe);
        cdc_job_on_message(C, in, P[0].pipe, now);
        cdc_msg_free(in);
    }
    expect_reject(&P[0], "unknown worker: register first");
    do_register(&P[0], "w1", 1, now);
    heartbeat(&P[0], now + 1234);
    assert_int_equal(cdc_members_by_id(&C->members, "w1")->last_heartbeat_ms, now + 1234);
    expect_nothing(&P[0]);
}

/* Registering while RECOVERING changes nothing but the membership. */
static void test_register_while_recovering(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    do_register(&P[0], "w1", 1, now);
    assert_true(cdc_members_is_alive(&C->members, "w1"));
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_int_equal(C->generation, 0);
    expect_nothing(&P[0]);
}

/* ---- RECOVERING -> RUNNING ------------------------------------------------------------- */

/* The first assignment of a term waits for --expected-workers (within the grace). */
static void test_first_assign_waits_for_expected_workers(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    C->cfg.expected_workers = 2;
    do_register(&P[0], "w1", 1, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    expect_nothing(&P[0]);
    do_register(&P[1], "w2", 1, now + 10);
    cdc_job_try_assign(C, now + 10);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(C->generation, 1);
    assert_true(C->assigned_in_term);
    assert_int_equal(C->next_barrier_ms, now + 10 + 1000);
    assert_int_equal(owned_by("w1"), 6);
    assert_int_equal(owned_by("w2"), 6);
    assert_int_equal(expect_assign(&P[0]), 6);
    assert_int_equal(expect_assign(&P[1]), 6);
    /* the epochs of the new generation belong to the new owners */
    assert_int_equal(C->epochs.generation, 1);
    assert_int_equal(C->epochs.term, TERM);
    assert_string_equal(C->epochs.owner[0], C->owner[0]);
}

/* Without --expected-workers a job with no history waits out the grace; one worker then
 * gets all twelve slots. */
static void test_first_assign_without_history_waits_grace(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    do_register(&P[0], "w1", 1, now);
    cdc_job_try_assign(C, now + GRACE_MS - 1);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    cdc_job_try_assign(C, now + GRACE_MS);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(owned_by("w1"), CDC_PARTITIONS);
    assert_int_equal(expect_assign(&P[0]), CDC_PARTITIONS);
}

/* No worker, or the restart delay not over: nothing happens. */
static void test_assign_needs_workers_and_delay(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    cdc_job_try_assign(C, now + GRACE_MS);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    do_register(&P[0], "w1", 1, now);
    C->restart_at_ms = now + GRACE_MS + 500;
    cdc_job_try_assign(C, now + GRACE_MS + 499);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_int_equal(C->generation, 0);
    expect_nothing(&P[0]);
    cdc_job_try_assign(C, now + GRACE_MS + 500);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
}

/* A job with history: the previous owners' slots wait for them during the grace; each
 * Assign carries the checkpoint's offsets and state handles of the worker's slots. */
static void test_assign_from_checkpoint(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    Cdc__Envelope *env;
    (void)state;
    lead(now);
    C->base = cdc_checkpoint_new(C->cfg.job, 41, 3, 2);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        snprintf(C->prev_owner[p], sizeof(C->prev_owner[p]), "%s", p < 6 ? "w1" : "w2");
        assert_int_equal(cdc_checkpoint_set_offset(C->base, p, TOPIC, 100 + p), CDC_OK);
    }
    assert_int_equal(cdc_checkpoint_set_state(C->base, 2, "state/p2/41"), CDC_OK);
    do_register(&P[1], "w2", 1, now);
    cdc_job_try_assign(C, now + 100);
    assert_int_equal(C->state, CDC_JOB_RECOVERING); /* w1 is not back yet */
    do_register(&P[0], "w1", 1, now + 200);
    cdc_job_try_assign(C, now + 200);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    /* sticky: each gets its slots back */
    for (int p = 0; p < CDC_PARTITIONS; p++)
        assert_string_equal(C->owner[p], p < 6 ? "w1" : "w2");
    env = expect(&P[0], CDC__ENVELOPE__BODY_ASSIGN);
    assert_int_equal(env->assign->checkpoint_epoch, 41);
    assert_int_equal(env->assign->n_partitions, 6);
    for (size_t i = 0; i < env->assign->n_partitions; i++) {
        const Cdc__PartitionState *ps = env->assign->partitions[i];
        assert_true(ps->partition < 6);
        assert_string_equal(ps->state_handle, ps->partition == 2 ? "state/p2/41" : "");
        assert_int_equal(ps->n_offsets, 1);
        assert_string_equal(ps->offsets[0]->topic, TOPIC);
        assert_int_equal(ps->offsets[0]->next_offset, 100 + ps->partition);
    }
    cdc_msg_free(env);
    assert_int_equal(expect_assign(&P[1]), 6);
}

/* A previous owner that does not come back gets its slots moved after the grace. */
static void test_assign_after_grace_without_previous_owner(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    C->base = cdc_checkpoint_new(C->cfg.job, 41, 3, 2);
    for (int p = 0; p < CDC_PARTITIONS; p++)
        snprintf(C->prev_owner[p], sizeof(C->prev_owner[p]), "%s", p < 6 ? "w1" : "w2");
    do_register(&P[1], "w2", 1, now);
    cdc_job_try_assign(C, now + GRACE_MS - 1);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    cdc_job_try_assign(C, now + GRACE_MS);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(owned_by("w2"), CDC_PARTITIONS);
    assert_int_equal(expect_assign(&P[1]), CDC_PARTITIONS);
}

/* More workers than slots: the ones that registered last stay idle with an empty Assign. */
static void test_assign_more_workers_than_slots(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    char id[16];
    (void)state;
    lead(now);
    C->cfg.expected_workers = CDC_PARTITIONS + 1;
    for (int i = 0; i <= CDC_PARTITIONS; i++) {
        snprintf(id, sizeof(id), "w%02d", i);
        do_register(&P[i], id, 1, now);
    }
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    for (int i = 0; i < CDC_PARTITIONS; i++)
        assert_int_equal(expect_assign(&P[i]), 1);
    assert_int_equal(expect_assign(&P[CDC_PARTITIONS]), 0);
    snprintf(id, sizeof(id), "w%02d", CDC_PARTITIONS);
    assert_false(cdc_job_owns_any(C, id));
    assert_true(cdc_job_owns_any(C, "w00"));
}

/* ---- a running job ---------------------------------------------------------------------- */

/* A worker that joins a running job: a rebalance (Abort to everyone, new generation),
 * not a failure, and no grace wait. */
static void test_join_rebalances_without_failure(void **state)
{
    int64_t now = cdc_clock_mono_ms(), before, after;
    char prev[CDC_PARTITIONS][CDC_WORKER_ID_MAX];
    (void)state;
    run_two(now);
    memcpy(prev, C->owner, sizeof(prev));
    before = cdc_clock_mono_ms();
    do_register(&P[2], "w3", 1, now + 50);
    after = cdc_clock_mono_ms();
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_int_equal(C->generation, 2);
    assert_int_equal(C->restart.nfailures, 0);
    assert_int_equal(counter(C->m_failures), 0);
    assert_string_equal(C->recovery_reason, "worker \"w3\" joined");
    assert_int_equal(C->grace_until_ms, now + 50);
    assert_true(C->restart_at_ms >= before + 100 && C->restart_at_ms <= after + 100);
    assert_memory_equal(C->prev_owner, prev, sizeof(prev));
    /* no epoch was open: the abort starts at the next id */
    for (int i = 0; i < 3; i++)
        expect_abort(&P[i], 2, 1, "worker \"w3\" joined");
    cdc_job_try_assign(C, C->restart_at_ms);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(C->generation, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(expect_assign(&P[i]), 4);
    /* sticky: w1 and w2 each keep four of their slots */
    for (int p = 0, kept = 0; p < CDC_PARTITIONS; p++) {
        kept += strcmp(C->owner[p], prev[p]) == 0;
        if (p == CDC_PARTITIONS - 1)
            assert_int_equal(kept, 8);
    }
}

/* An owner that comes back with a new incarnation restarted: a failure, its old pipe
 * closed, the restart delay applies. */
static void test_owner_restart_is_failure(void **state)
{
    int64_t now = cdc_clock_mono_ms(), before, after;
    uint32_t old;
    (void)state;
    run_two(now);
    old = P[0].pipe;
    before = cdc_clock_mono_ms();
    do_register(&P[2], "w1", 2, now);
    after = cdc_clock_mono_ms();
    expect_closed(old);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_int_equal(C->restart.nfailures, 1);
    assert_int_equal(counter(C->m_failures), 1);
    assert_true(C->restart_at_ms >= before + DELAY_MS && C->restart_at_ms <= after + DELAY_MS);
    assert_string_equal(C->recovery_reason, "worker \"w1\" restarted");
    expect_abort(&P[2], 2, 1, "worker \"w1\" restarted");
    expect_abort(&P[1], 2, 1, "worker \"w1\" restarted");
}

/* A worker that lost our Assign registers again on the same pipe: it gets the current
 * Assign again, nothing else changes. */
static void test_duplicate_register_resends_assign(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    run_two(now);
    do_register(&P[0], "w1", 1, now + 5);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(C->generation, 1);
    assert_int_equal(expect_assign(&P[0]), 6);
    expect_nothing(&P[0]);
    expect_nothing(&P[1]);
}

/* ---- the job's table set ------------------------------------------------------------------ */

#define TABLES3 "cdc.public.transactions,cdc.public.accounts,cdc.public.acc_edge"
#define TABLES2 "cdc.public.transactions,cdc.public.accounts"

/* The Assign p gets must give it no partitions and say why, naming topic. */
static void expect_refusal(peer_t *p, const char *topic)
{
    Cdc__Envelope *env = expect(p, CDC__ENVELOPE__BODY_ASSIGN);
    char quoted[128];
    assert_int_equal(env->assign->generation, C->generation);
    assert_int_equal(env->assign->n_partitions, 0);
    snprintf(quoted, sizeof(quoted), "\"%s\"", topic);
    if (strstr(env->assign->refused, quoted) == NULL)
        fail_msg("refusal \"%s\" does not name %s", env->assign->refused, quoted);
    cdc_msg_free(env);
}

/* RUNNING with w1, w2, w3, each consuming topics (four slots each). */
static void run_three(const char *topics, int64_t now)
{
    lead(now);
    C->cfg.expected_workers = 3;
    register_topics(&P[0], "w1", 1, topics, now);
    register_topics(&P[1], "w2", 1, topics, now);
    register_topics(&P[2], "w3", 1, topics, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    for (int i = 0; i < 3; i++)
        assert_int_equal(expect_assign(&P[i]), 4);
}

/* The reproduction of issue 18: w1 comes back without acc_edge. It is refused, with the
 * table named in its Assign, the log and /status, and counted; its slots go to w2 and w3, so
 * no slot stops carrying acc_edge. */
static void test_narrower_worker_refused(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    cdc_member_t *m;
    (void)state;
    run_three(TABLES3, now);
    assert_int_equal(C->tables.n, 3);
    register_topics(&P[3], "w1", 2, TABLES2, now + 10); /* restarted: an owner's failure */
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    cdc_job_try_assign(C, C->restart_at_ms);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    expect_abort(&P[1], 2, 1, "worker \"w1\" restarted");
    expect_abort(&P[2], 2, 1, "worker \"w1\" restarted");
    expect_abort(&P[3], 2, 1, "worker \"w1\" restarted");
    expect_refusal(&P[3], "cdc.public.acc_edge");
    assert_int_equal(expect_assign(&P[1]), 6);
    assert_int_equal(expect_assign(&P[2]), 6);
    assert_int_equal(owned_by("w1"), 0);
    m = cdc_members_by_id(&C->members, "w1");
    assert_int_equal(m->verdict, CDC_TABLESET_MISSING);
    assert_non_null(strstr(m->refused, "\"cdc.public.acc_edge\""));
    assert_int_equal(counter(C->m_table_refused[CDC_TABLESET_MISSING]), 1);
    /* the set kept the table */
    assert_true(cdc_tableset_has(&C->tables, "cdc.public.acc_edge"));
    /* a later assignment refuses it again without counting it twice */
    cdc_job_recover(C, "test", false);
    cdc_job_try_assign(C, C->restart_at_ms);
    assert_int_equal(owned_by("w1"), 0);
    assert_int_equal(counter(C->m_table_refused[CDC_TABLESET_MISSING]), 1);
}

/* A worker that joins a running job without a table of the set is refused at once, and the
 * others are not rebalanced for it. */
static void test_narrower_join_changes_nothing(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    run_three(TABLES3, now);
    register_topics(&P[3], "w4", 1, TABLES2, now + 10);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(C->generation, 1);
    expect_refusal(&P[3], "cdc.public.acc_edge");
    expect_nothing(&P[0]);
    assert_int_equal(counter(C->m_table_refused[CDC_TABLESET_MISSING]), 1);
}

/* The Assign p gets must carry the job's table set, sorted, as the comma-separated
 * expected; returns its number of partitions. */
/* tables[0..n), ","-joined, are expected. */
static void assert_tables(char **tables, size_t n, const char *expected)
{
    char got[512] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "," : "", tables[i]);
    assert_string_equal(got, expected);
}

static size_t expect_tables(peer_t *p, const char *expected)
{
    Cdc__Envelope *env = expect(p, CDC__ENVELOPE__BODY_ASSIGN);
    size_t n = env->assign->n_partitions;
    assert_int_equal(env->assign->generation, C->generation);
    assert_tables(env->assign->tables, env->assign->n_tables, expected);
    cdc_msg_free(env);
    return n;
}

#define SORTED2 "cdc.public.accounts,cdc.public.transactions"
#define SORTED3 "cdc.public.acc_edge,cdc.public.accounts,cdc.public.transactions"

/* Every Assign carries the job's table set, a refused worker's too. */
static void test_assign_carries_tables(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    C->cfg.expected_workers = 2;
    register_topics(&P[0], "w1", 1, TABLES3, now);
    register_topics(&P[1], "w2", 1, TABLES3, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(expect_tables(&P[0], SORTED3), 6);
    assert_int_equal(expect_tables(&P[1], SORTED3), 6);
    register_topics(&P[2], "w3", 1, TABLES2, now + 10); /* refused at once */
    assert_int_equal(expect_tables(&P[2], SORTED3), 0);
}

/* A worker that can consume more than the set is not refused: it owns slots and consumes the
 * set. The table joins the set once every live worker offers it, at the assignment after the
 * last one came back with it. */
static void test_wider_worker_consumes_the_set(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    cdc_restart_init(&C->restart, 10, 60000, DELAY_MS); /* three restarts in a row */
    run_three(TABLES2, now);
    register_topics(&P[3], "w1", 2, TABLES3, now + 10);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    cdc_job_try_assign(C, C->restart_at_ms);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(owned_by("w1"), 4);
    assert_false(cdc_tableset_has(&C->tables, "cdc.public.acc_edge"));
    assert_int_equal(counter(C->m_table_refused[CDC_TABLESET_MISSING]), 0);
    assert_int_equal(cdc_members_by_id(&C->members, "w1")->verdict, CDC_TABLESET_FITS);
    expect_abort(&P[3], 2, 1, "worker \"w1\" restarted");
    assert_int_equal(expect_tables(&P[3], SORTED2), 4);
    /* the last two come back with the table too: it joins the set */
    register_topics(&P[4], "w2", 2, TABLES3, now + 20);
    cdc_job_try_assign(C, C->restart_at_ms);
    assert_false(cdc_tableset_has(&C->tables, "cdc.public.acc_edge")); /* w3 lacks it */
    register_topics(&P[5], "w3", 2, TABLES3, now + 30);
    cdc_job_try_assign(C, C->restart_at_ms);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_true(cdc_tableset_has(&C->tables, "cdc.public.acc_edge"));
    assert_true(C->tables_dirty);
    assert_int_equal(owned_by("w1"), 4);
    assert_int_equal(owned_by("w2"), 4);
    assert_int_equal(owned_by("w3"), 4);
    assert_int_equal(counter(C->m_table_refused[CDC_TABLESET_MISSING]), 0);
}

/* RUNNING with followers w1, w2, w3 offering offer; their Assigns read, carrying tables. */
static void run_followers(const char *offer, const char *tables, int64_t now)
{
    lead(now);
    C->cfg.expected_workers = 3;
    register_follower(&P[0], "w1", 1, offer, now);
    register_follower(&P[1], "w2", 1, offer, now);
    register_follower(&P[2], "w3", 1, offer, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    for (int i = 0; i < 3; i++)
        assert_int_equal(expect_tables(&P[i], tables), 4);
}

/* A Tables message of the current generation carrying expected (the whole set, in order). */
static void expect_table_set(peer_t *p, const char *expected)
{
    Cdc__Envelope *env = expect(p, CDC__ENVELOPE__BODY_TABLES);
    assert_int_equal(env->tables->term, C->term);
    assert_int_equal(env->tables->generation, C->generation);
    assert_tables(env->tables->tables, env->tables->n_tables, expected);
    cdc_msg_free(env);
}

/* Workers without --tables: the set widens by a table once every live worker offers it in
 * its heartbeats, and, every owner following the job, the running assignment takes it: a
 * Tables message to every worker, no recovery, the same generation and open epochs. */
static void test_follower_offer_widens(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    run_followers(TABLES2, SORTED2, now);
    assert_int_equal(C->generation, 1);
    heartbeat_offer(&P[0], TABLES3, now + 5);
    heartbeat_offer(&P[1], TABLES3, now + 5);
    heartbeat_offer(&P[1], NULL, now + 6); /* (no offer: unchanged) */
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(C->generation, 1);
    assert_false(cdc_tableset_has(&C->tables, "cdc.public.acc_edge"));
    heartbeat_offer(&P[2], TABLES3, now + 7); /* the last one: the set widens */
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(C->generation, 1);
    assert_true(cdc_tableset_has(&C->tables, "cdc.public.acc_edge"));
    assert_true(C->tables_dirty);
    assert_int_equal(counter(C->m_aborted), 0);
    assert_int_equal(counter(C->m_tables_widened), 1);
    for (int i = 0; i < 3; i++)
        expect_table_set(&P[i], SORTED3);
    /* the same offer again changes nothing */
    heartbeat_offer(&P[2], TABLES3, now + 8);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(counter(C->m_tables_widened), 1);
    for (int i = 0; i < 3; i++)
        expect_nothing(&P[i]);
}

/* An owner with --tables is judged when the set widens: a new assignment (Abort, Assign)
 * instead of Tables, even when the others follow. */
static void test_offer_widens_with_a_judged_owner(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    C->cfg.expected_workers = 2;
    register_follower(&P[0], "w1", 1, TABLES2, now);
    register_topics(&P[1], "w2", 1, TABLES3, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    for (int i = 0; i < 2; i++)
        assert_int_equal(expect_tables(&P[i], SORTED2), 6);
    heartbeat_offer(&P[0], TABLES3, now + 5); /* every live worker offers it now */
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_non_null(strstr(C->recovery_reason, "every live worker offers \"cdc.public.acc_edge\""));
    assert_int_equal(C->restart.nfailures, 0); /* not a failure */
    assert_int_equal(counter(C->m_tables_widened), 0);
    cdc_job_try_assign(C, C->restart_at_ms);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    for (int i = 0; i < 2; i++) {
        cdc_msg_free(expect(&P[i], CDC__ENVELOPE__BODY_ABORT));
        assert_int_equal(expect_tables(&P[i], SORTED3), 6); /* the same slots */
    }
}

/* A follower is never refused for a table: it consumes whatever the set is, even a table it
 * does not offer (yet); a worker with --tables that lacks it is. */
static void test_follower_never_refused(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    cdc_error_t e;
    (void)state;
    lead(now);
    C->cfg.expected_workers = 2;
    assert_int_equal(cdc_tableset_add(&C->tables, "cdc.public.acc_edge", &e), CDC_OK);
    register_follower(&P[0], "w1", 1, NULL, now); /* offers nothing yet */
    register_topics(&P[1], "w2", 1, TABLES2, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(owned_by("w1"), CDC_PARTITIONS);
    assert_int_equal(cdc_members_by_id(&C->members, "w1")->verdict, CDC_TABLESET_FITS);
    assert_true(cdc_members_by_id(&C->members, "w1")->follows);
    assert_int_equal(expect_tables(&P[0], "cdc.public.acc_edge"), CDC_PARTITIONS);
    expect_refusal(&P[1], "cdc.public.acc_edge");
    /* a follower that offers nothing holds back widening: the set keeps its one table */
    assert_int_equal(C->tables.n, 1);
}

/* The operator adds a table (POST /tables, cdcctl tables add): the set has it at once, etcd
 * gets it, and a new assignment hands it to every worker; a worker with --tables that lacks
 * it is refused then, naming it. */
static void test_add_table(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    bool added = false;
    cdc_error_t e;
    (void)state;
    lead(now);
    C->cfg.expected_workers = 3;
    register_follower(&P[0], "w1", 1, TABLES2, now);
    register_follower(&P[1], "w2", 1, TABLES2, now);
    register_topics(&P[2], "w3", 1, TABLES2, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    for (int i = 0; i < 3; i++)
        assert_int_equal(expect_tables(&P[i], SORTED2), 4);
    C->tables_dirty = false;
    assert_int_equal(cdc_job_add_table(C, "cdc.public.acc_edge", &added, &e), CDC_OK);
    assert_true(added);
    assert_true(C->tables_dirty);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    cdc_job_try_assign(C, C->restart_at_ms);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(owned_by("w1") + owned_by("w2"), CDC_PARTITIONS);
    assert_int_equal(owned_by("w3"), 0);
    for (int i = 0; i < 2; i++) {
        Cdc__Envelope *env = expect(&P[i], CDC__ENVELOPE__BODY_ABORT);
        cdc_msg_free(env);
        assert_int_equal(expect_tables(&P[i], SORTED3), 6);
    }
    cdc_msg_free(expect(&P[2], CDC__ENVELOPE__BODY_ABORT));
    expect_refusal(&P[2], "cdc.public.acc_edge");
    /* again: nothing new, no new assignment */
    assert_int_equal(cdc_job_add_table(C, "cdc.public.acc_edge", &added, &e), CDC_OK);
    assert_false(added);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(cdc_job_add_table(C, "", &added, &e), CDC_ERR_INVALID);
}

/* POST /tables hands its topic to the loop through the request mailbox: the loop adds it and
 * answers; a standby answers that it does not lead. */
static void test_table_requests(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    cdc_table_request_t *r = &C->table_requests[0];
    (void)state;
    run_three(TABLES2, now);
    snprintf(r->topic, sizeof(r->topic), "cdc.public.acc_edge");
    r->state = CDC_TABLE_REQUEST_ASKED;
    atomic_store(&C->table_requests_asked, 1);
    cdc_job_take_table_requests(C);
    assert_int_equal(r->state, CDC_TABLE_REQUEST_DONE);
    assert_int_equal(r->rc, CDC_OK);
    assert_true(r->added);
    assert_true(cdc_tableset_has(&C->tables, "cdc.public.acc_edge"));
    assert_int_equal(atomic_load(&C->table_requests_asked), 0);
    /* an abandoned request is freed by the loop */
    r->state = CDC_TABLE_REQUEST_ASKED;
    r->abandoned = true;
    atomic_store(&C->table_requests_asked, 1);
    cdc_job_take_table_requests(C);
    assert_int_equal(r->state, CDC_TABLE_REQUEST_FREE);
    C->state = CDC_JOB_STANDBY;
    r->state = CDC_TABLE_REQUEST_ASKED;
    r->abandoned = false;
    atomic_store(&C->table_requests_asked, 1);
    cdc_job_take_table_requests(C);
    assert_int_equal(r->rc, CDC_ERR_UNAVAILABLE);
    assert_non_null(strstr(r->msg, "does not lead"));
}

/* The set holds what the newest checkpoint's slots carry, whatever the workers say; a
 * worker that reports no topics is not judged. */
static void test_tables_from_checkpoint(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    lead(now);
    C->cfg.expected_workers = 2;
    C->base = cdc_checkpoint_new(C->cfg.job, 41, 3, 2);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
        assert_int_equal(cdc_checkpoint_set_offset(C->base, p, "cdc.public.acc_edge", 7), CDC_OK);
    register_topics(&P[0], "w1", 1, TABLES2, now);
    do_register(&P[1], "w2", 1, now);
    cdc_job_try_assign(C, now + GRACE_MS);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_true(cdc_tableset_has(&C->tables, "cdc.public.acc_edge"));
    assert_int_equal(owned_by("w1"), 0);
    assert_int_equal(owned_by("w2"), CDC_PARTITIONS);
    expect_refusal(&P[0], "cdc.public.acc_edge");
}

/* No worker fits: nothing is assigned, the job waits for one. */
static void test_no_worker_fits(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    cdc_error_t e;
    (void)state;
    lead(now);
    assert_int_equal(cdc_tableset_add(&C->tables, "cdc.public.acc_edge", &e), CDC_OK);
    register_topics(&P[0], "w1", 1, TABLES2, now);
    cdc_job_try_assign(C, now + GRACE_MS);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_true(C->tables_blocked);
    register_topics(&P[1], "w2", 1, TABLES3, now + 10);
    cdc_job_try_assign(C, now + GRACE_MS);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(owned_by("w2"), CDC_PARTITIONS);
}

/* A recovery abandons every open epoch: the Abort names the oldest. */
static void test_recover_aborts_oldest_open_epoch(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    uint64_t e1, e2;
    (void)state;
    run_two(now);
    assert_int_equal(cdc_epochs_begin(&C->epochs, now, 0, &e1), CDC_OK);
    assert_int_equal(cdc_epochs_begin(&C->epochs, now, 0, &e2), CDC_OK);
    assert_int_equal(e1, 1);
    assert_int_equal(e2, 2);
    cdc_job_recover(C, "test", true);
    assert_int_equal(C->epochs.nopen, 0);
    assert_int_equal(counter(C->m_aborted), 2);
    expect_abort(&P[0], 2, e1, "test");
    expect_abort(&P[1], 2, e1, "test");
    /* ids are never handed out again */
    assert_int_equal(C->epochs.next_epoch, 3);
}

/* Only a leader that has an assignment to lose recovers. */
static void test_recover_only_when_leading(void **state)
{
    static const cdc_job_state_t idle[] = {CDC_JOB_STANDBY, CDC_JOB_STARTING, CDC_JOB_FAILED};
    (void)state;
    for (size_t i = 0; i < sizeof(idle) / sizeof(idle[0]); i++) {
        C->state = idle[i];
        cdc_job_recover(C, "test", true);
        assert_int_equal(C->state, idle[i]);
        assert_int_equal(C->generation, 0);
        assert_int_equal(C->restart.total, 0);
    }
}

/* More failures than --restart-max-failures within the interval: FAILED for good, every
 * slot unowned, workers told; a worker registering then is rejected. */
static void test_restart_strategy_exhausted(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    run_two(now);
    cdc_job_recover(C, "first", true);
    expect_abort(&P[0], 2, 1, "first");
    C->state = CDC_JOB_RUNNING; /* as if reassigned */
    cdc_job_recover(C, "second", true);
    expect_abort(&P[0], 3, 1, "second");
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    C->state = CDC_JOB_RUNNING;
    cdc_job_recover(C, "third", true);
    assert_int_equal(C->state, CDC_JOB_FAILED);
    assert_int_equal(counter(C->m_failures), 3);
    expect_abort(&P[0], 4, 1, "third");
    expect_abort(&P[1], 2, 1, "first");
    expect_abort(&P[1], 3, 1, "second");
    expect_abort(&P[1], 4, 1, "third");
    assert_false(cdc_job_owns_any(C, "w1"));
    assert_false(cdc_job_owns_any(C, "w2"));
    do_register(&P[2], "w3", 1, now);
    expect_reject(&P[2], "job FAILED: restart strategy exhausted");
    assert_int_equal(C->state, CDC_JOB_FAILED);
}

/* An owner silent past --heartbeat-timeout is lost: its pipe closed and the job recovers. */
static void test_missed_heartbeats_lose_owner(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    run_two(now);
    heartbeat(&P[0], now + 2000);
    cdc_job_check_liveness(C, now + 3000); /* not past the timeout yet */
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    cdc_job_check_liveness(C, now + 3001);
    assert_false(cdc_members_is_alive(&C->members, "w2"));
    assert_true(cdc_members_is_alive(&C->members, "w1"));
    assert_string_equal(cdc_members_by_id(&C->members, "w2")->lost_reason, "missed heartbeats");
    assert_int_equal(counter((cdc_counter_t *)C->m_workers), 1);
    expect_closed(P[1].pipe);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_int_equal(C->restart.nfailures, 1);
    expect_abort(&P[0], 2, 1, "worker \"w2\" lost: missed heartbeats");
}

/* Losing a worker that owns nothing costs no recovery. */
static void test_lost_idle_worker_no_recovery(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    run_two(now);
    for (int p = 0; p < CDC_PARTITIONS; p++) /* w1 owns every slot now */
        snprintf(C->owner[p], sizeof(C->owner[p]), "w1");
    heartbeat(&P[0], now + 3000);
    cdc_job_check_liveness(C, now + 3001);
    assert_false(cdc_members_is_alive(&C->members, "w2"));
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    assert_int_equal(C->generation, 1);
    assert_int_equal(C->restart.total, 0);
    expect_nothing(&P[0]);
}

/* A pipe that goes away loses its worker (the pipe events of cdc_job_drain). */
static bool w1_lost(void *arg)
{
    (void)arg;
    cdc_job_drain(C, 0);
    return !cdc_members_is_alive(&C->members, "w1");
}

static void test_lost_pipe_loses_owner(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    run_two(now);
    cdc_msg_client_close(P[0].cl);
    P[0].cl = NULL;
    assert_true(cdc_test_wait_for(w1_lost, NULL, WAIT_MS));
    assert_string_equal(cdc_members_by_id(&C->members, "w1")->lost_reason, "connection lost");
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_int_equal(C->restart.nfailures, 1);
    expect_abort(&P[1], 2, 1, "worker \"w1\" lost: connection lost");
}

/* An epoch past --ack-deadline: the owners of the slots that did not ack are lost (the
 * one that acked stays), and the job recovers. */
static void test_ack_deadline_loses_missing_owners(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    uint64_t epoch;
    Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
    Cdc__Ack ack = CDC__ACK__INIT;
    Cdc__PartitionState ps[CDC_PARTITIONS], *psp[CDC_PARTITIONS];
    uint32_t pipe;
    (void)state;
    run_two(now);
    assert_int_equal(cdc_epochs_begin(&C->epochs, now, 0, &epoch), CDC_OK);
    ack.worker_id = "w1";
    ack.term = TERM;
    ack.generation = C->generation;
    ack.epoch = epoch;
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        if (strcmp(C->owner[p], "w1") != 0)
            continue;
        cdc__partition_state__init(&ps[ack.n_partitions]);
        ps[ack.n_partitions].partition = (uint32_t)p;
        psp[ack.n_partitions] = &ps[ack.n_partitions];
        ack.n_partitions++;
    }
    ack.partitions = psp;
    env.body_case = CDC__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    send_from(&P[0], &env);
    in = coord_recv(&pipe);
    cdc_job_on_message(C, in, pipe, now);
    cdc_msg_free(in);
    assert_int_equal(C->epochs.nopen, 1);
    assert_int_equal(cdc_pset_count(C->epochs.open[0].acked), 6);
    /* keep both alive by heartbeats: only the deadline decides */
    heartbeat(&P[0], now + 5001);
    heartbeat(&P[1], now + 5001);
    cdc_job_check_liveness(C, now + 5000);
    assert_int_equal(C->state, CDC_JOB_RUNNING);
    cdc_job_check_liveness(C, now + 5001);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_true(cdc_members_is_alive(&C->members, "w1"));
    assert_false(cdc_members_is_alive(&C->members, "w2"));
    assert_string_equal(cdc_members_by_id(&C->members, "w2")->lost_reason,
                        "missed the ack deadline");
    assert_int_equal(counter((cdc_counter_t *)C->m_workers), 1); /* the gauge follows */
    assert_non_null(strstr(C->recovery_reason, "missed the ack deadline"));
    expect_closed(P[1].pipe);
    assert_int_equal(C->restart.nfailures, 1);
    {
        Cdc__Envelope *a = expect(&P[0], CDC__ENVELOPE__BODY_ABORT);
        assert_int_equal(a->abort->epoch, epoch);
        cdc_msg_free(a);
    }
}

/* An Ack to a standby is rejected; one from a pipe nobody registered on too. */
static void test_ack_dispatch(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
    Cdc__Ack ack = CDC__ACK__INIT;
    uint32_t pipe;
    (void)state;
    assert_int_equal(cdc_msg_client_open(&P[0].cl, URL, NULL, &(cdc_error_t){0}), CDC_OK);
    ack.worker_id = "w1";
    env.body_case = CDC__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    send_from(&P[0], &env);
    in = coord_recv(&pipe);
    P[0].pipe = pipe;
    cdc_job_on_message(C, in, pipe, now);
    expect_reject(&P[0], "not the leader");
    lead(now);
    cdc_job_on_message(C, in, pipe, now);
    cdc_msg_free(in);
    expect_reject(&P[0], "not registered");
    assert_int_equal(counter(C->m_rejected), 1);
}

/* ---- stepping down ---------------------------------------------------------------------- */

static void test_become_standby_drops_everything(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    uint64_t epoch;
    uint32_t p1, p2;
    (void)state;
    run_two(now);
    p1 = P[0].pipe;
    p2 = P[1].pipe;
    assert_int_equal(cdc_epochs_begin(&C->epochs, now, 0, &epoch), CDC_OK);
    cdc_job_become_standby(C, "lease lost");
    assert_int_equal(C->state, CDC_JOB_STANDBY);
    assert_int_equal(C->term, 0);
    assert_int_equal(C->members.n, 0);
    assert_int_equal(C->epochs.nopen, 0);
    assert_false(cdc_job_owns_any(C, "w1"));
    assert_false(cdc_job_owns_any(C, "w2"));
    /* the generation never goes back: a (term, generation) pair must not repeat */
    assert_int_equal(C->generation, 1);
    expect_closed(p1);
    expect_closed(p2);
}

/* ---- the loop's timers ------------------------------------------------------------------ */

static void test_loop_wait(void **state)
{
    int64_t now = 1000000;
    (void)state;
    C->state = CDC_JOB_STANDBY;
    assert_int_equal(cdc_job_loop_wait_ms(C, now), 100);
    C->state = CDC_JOB_STARTING;
    assert_int_equal(cdc_job_loop_wait_ms(C, now), 20);
    C->state = CDC_JOB_RECOVERING;
    assert_int_equal(cdc_job_loop_wait_ms(C, now), 20);
    C->state = CDC_JOB_RUNNING;
    C->next_barrier_ms = now + 1000;
    assert_int_equal(cdc_job_loop_wait_ms(C, now), 50); /* the heartbeat checks' cap */
    C->next_barrier_ms = now + 30;
    assert_int_equal(cdc_job_loop_wait_ms(C, now), 30);
    C->next_barrier_ms = now - 5; /* overdue: do not wait */
    assert_int_equal(cdc_job_loop_wait_ms(C, now), 0);
    C->next_barrier_ms = now + 1000;
    C->commit_retry_ms = now + 10; /* a commit retry only counts with a queue */
    assert_int_equal(cdc_job_loop_wait_ms(C, now), 50);
    C->nqueue = 1;
    assert_int_equal(cdc_job_loop_wait_ms(C, now), 10);
    C->nqueue = 0;
}

/* ---- etcd refusing ----------------------------------------------------------------------- */

/* An etcd endpoint nobody listens on: a port that was free a moment ago. */
static void open_dead_etcd(void)
{
    struct sockaddr_in a = {0};
    socklen_t len = sizeof(a);
    char url[64];
    cdc_error_t e;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    assert_int_equal(cdc_etcd_open(&C->etcd, url, 2000, &e), CDC_OK);
    assert_int_equal(cdc_leader_open(&C->leader, C->etcd, url, NULL, 2000, C->cfg.job, "{}", 5, &e),
                     CDC_OK);
    cdc_store_init(&C->store, C->etcd, C->leader.el, C->cfg.job);
}

/* A leader start etcd does not answer stays STARTING and is retried after ETCD_RETRY_MS. */
static void test_leader_start_retries(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    open_dead_etcd();
    C->state = CDC_JOB_STARTING;
    C->term = TERM;
    cdc_job_leader_start(C, now);
    assert_int_equal(C->state, CDC_JOB_STARTING);
    assert_int_equal(C->etcd_retry_ms, now + ETCD_RETRY_MS);
    assert_int_equal(counter(C->m_etcd_errors), 1);
    cdc_job_leader_start(C, now + ETCD_RETRY_MS - 1); /* not yet */
    assert_int_equal(counter(C->m_etcd_errors), 1);
    cdc_job_leader_start(C, now + ETCD_RETRY_MS);
    assert_int_equal(counter(C->m_etcd_errors), 2);
    assert_int_equal(C->state, CDC_JOB_STARTING);
    assert_null(C->base);
}

/* Out of epoch ids and etcd does not answer: no assignment yet, retried later. */
static void test_assign_waits_for_epoch_ids(void **state)
{
    int64_t now = cdc_clock_mono_ms();
    (void)state;
    open_dead_etcd();
    C->term = TERM;
    C->state = CDC_JOB_RECOVERING;
    C->cfg.expected_workers = 1;
    cdc_epochs_reserve(&C->epochs, 1, 2); /* one id left */
    do_register(&P[0], "w1", 1, now);
    cdc_job_try_assign(C, now);
    assert_int_equal(C->state, CDC_JOB_RECOVERING);
    assert_int_equal(C->etcd_retry_ms, now + ETCD_RETRY_MS);
    assert_int_equal(counter(C->m_etcd_errors), 1);
    cdc_job_try_assign(C, now + 1); /* waits for the retry time */
    assert_int_equal(counter(C->m_etcd_errors), 1);
    expect_nothing(&P[0]);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_state_names),
        T(test_too_long_id_refused),
        T(test_standby_rejects_then_closes),
        T(test_rejected_pipe_kept_when_leading),
        T(test_standby_closing_list_full),
        T(test_starting_rejects_without_closing),
        T(test_register_invalid_id),
        T(test_heartbeats),
        T(test_register_while_recovering),
        T(test_first_assign_waits_for_expected_workers),
        T(test_first_assign_without_history_waits_grace),
        T(test_assign_needs_workers_and_delay),
        T(test_assign_from_checkpoint),
        T(test_assign_after_grace_without_previous_owner),
        T(test_assign_more_workers_than_slots),
        T(test_join_rebalances_without_failure),
        T(test_owner_restart_is_failure),
        T(test_duplicate_register_resends_assign),
        T(test_narrower_worker_refused),
        T(test_narrower_join_changes_nothing),
        T(test_wider_worker_consumes_the_set),
        T(test_assign_carries_tables),
        T(test_follower_offer_widens),
        T(test_offer_widens_with_a_judged_owner),
        T(test_follower_never_refused),
        T(test_add_table),
        T(test_table_requests),
        T(test_tables_from_checkpoint),
        T(test_no_worker_fits),
        T(test_recover_aborts_oldest_open_epoch),
        T(test_recover_only_when_leading),
        T(test_restart_strategy_exhausted),
        T(test_missed_heartbeats_lose_owner),
        T(test_lost_idle_worker_no_recovery),
        T(test_lost_pipe_loses_owner),
        T(test_ack_deadline_loses_missing_owners),
        T(test_ack_dispatch),
        T(test_become_standby_drops_everything),
        T(test_loop_wait),
        T(test_leader_start_retries),
        T(test_assign_waits_for_epoch_ids),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
