/*
 * Unit tests for worker/session.c, the worker's link to the coordinator: dialing the
 * coordinator (and only again when it changed), registering when the link is up, again
 * after a Reject (not before its delay) and after waiting too long for an assignment, the
 * replacement of a link that stays down, which Assign, Abort and Barrier a worker acts on
 * (never one of an older term or generation than the assignment it runs), that an Ack
 * leaves only for the current generation, that polling the link stops at an
 * assignment change, and that a refused Assign (docs/worker.md, "The job's tables") leaves
 * the worker idle and waiting.
 *
 * The coordinator is a test-owned NNG server (inproc: see test_job.c for why not TCP),
 * the worker a real one on the in-process mock Kafka cluster of worker_mock.h, so an
 * accepted Barrier is answered by the finalizer's real Ack. "The worker sent nothing" is
 * checked with a marker: an Ack of the current generation sent through
 * cdc_worker_send_ack must be the next message the coordinator gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/worker/worker_mock.h"

#define WAIT_MS 10000
#define MARKER_EPOCH 424242

static mock_worker_t M;
static cdc_msg_server_t *S; /* the coordinator */
static char URL[64];
static uint32_t PIPE; /* the coordinator's pipe of the worker */

static int setup(void **state)
{
    static int nurl;
    cdc_error_t e;
    (void)state;
    mock_up(&M);
    snprintf(URL, sizeof(URL), "inproc://test_worker_session_%d", ++nurl);
    assert_int_equal(cdc_msg_server_open(&S, URL, NULL, &e), CDC_OK);
    M.w->cfg.coordinator = URL;
    PIPE = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mock_down(&M);
    cdc_msg_server_close(S);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------ */

static bool connected(void *arg)
{
    (void)arg;
    return cdc_msg_client_connected(M.w->msg);
}

/* Dials the coordinator and waits for the link. */
static void dial(void)
{
    cdc_worker_find_leader(M.w);
    assert_non_null(M.w->msg);
    assert_true(cdc_test_wait_for(connected, NULL, WAIT_MS));
}

/* The next message the coordinator gets from the worker; of kind body (caller frees). */
static Cdc__Envelope *coord_expect(Cdc__Envelope__BodyCase body)
{
    Cdc__Envelope *env = NULL;
    cdc_error_t e;
    assert_int_equal(cdc_msg_server_recv(S, WAIT_MS, &env, &PIPE, &e), CDC_OK);
    if (env->body_case != body)
        fail_msg("expected %d, got %s", (int)body, cdc_msg_body_name(env));
    return env;
}

static void coord_expect_register(void)
{
    Cdc__Envelope *env = coord_expect(CDC__ENVELOPE__BODY_REGISTER);
    assert_string_equal(env->register_->worker_id, "w1");
    assert_int_equal(env->register_->incarnation, 1);
    cdc_msg_free(env);
}

/* The worker sent nothing since the coordinator's last expected message. */
static void coord_expect_nothing(void)
{
    Cdc__Ack ack = CDC__ACK__INIT;
    Cdc__Envelope *env;
    pthread_mutex_lock(&M.w->link_lock);
    ack.term = M.w->term;
    ack.generation = M.w->generation;
    pthread_mutex_unlock(&M.w->link_lock);
    ack.epoch = MARKER_EPOCH;
    assert_true(cdc_worker_send_ack(M.w, &ack));
    env = coord_expect(CDC__ENVELOPE__BODY_ACK);
    assert_int_equal(env->ack->epoch, MARKER_EPOCH);
    cdc_msg_free(env);
}

static void watch(cdc_link_watch_t *lw, int64_t now)
{
    pthread_mutex_lock(&M.w->link_lock);
    cdc_worker_watch_link(M.w, lw, now);
    pthread_mutex_unlock(&M.w->link_lock);
}

/* The worker handles env (a coordinator message built by the test). */
static void handle_assign(uint64_t term, uint64_t generation, uint32_t slot)
{
    mock_assign_t b;
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
    env.assign = mock_assign(&b, M.topic, term, generation, &slot, NULL, 1);
    cdc_worker_handle(M.w, &env);
}

static void handle_abort(uint64_t term, uint64_t generation)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Abort a = CDC__ABORT__INIT;
    a.term = term;
    a.generation = generation;
    a.epoch = 1;
    a.reason = "test";
    env.body_case = CDC__ENVELOPE__BODY_ABORT;
    env.abort = &a;
    cdc_worker_handle(M.w, &env);
}

static void handle_barrier(uint64_t term, uint64_t generation, uint64_t epoch)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Barrier b = CDC__BARRIER__INIT;
    b.term = term;
    b.generation = generation;
    b.epoch = epoch;
    env.body_case = CDC__ENVELOPE__BODY_BARRIER;
    env.barrier = &b;
    cdc_worker_handle(M.w, &env);
}

static void handle_reject(void)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Reject r = CDC__REJECT__INIT;
    r.reason = "not the leader";
    env.body_case = CDC__ENVELOPE__BODY_REJECT;
    env.reject = &r;
    cdc_worker_handle(M.w, &env);
}

static double rejected(void)
{
    return cdc_metrics_value(M.w->m_rejected);
}

/* ---- finding and dialing the coordinator -------------------------------------------------- */

/* --coordinator is dialed once; a changed address is dialed afresh and registered with
 * again. */
static void test_find_leader_dials_once(void **state)
{
    (void)state;
    cdc_worker_find_leader(M.w);
    assert_non_null(M.w->msg);
    assert_string_equal(M.w->leader_url, URL);
    assert_false(M.w->registered);
    assert_int_equal(M.w->next_register_ms, 0);
    M.w->registered = true;
    M.w->next_register_ms = 77;
    cdc_worker_find_leader(M.w); /* same address: nothing happens */
    assert_true(M.w->registered);
    assert_int_equal(M.w->next_register_ms, 77);
    M.w->cfg.coordinator = "inproc://test_worker_session_elsewhere";
    cdc_worker_find_leader(M.w);
    assert_string_equal(M.w->leader_url, "inproc://test_worker_session_elsewhere");
    assert_false(M.w->registered);
    assert_int_equal(M.w->next_register_ms, 0);
}

/* ---- the link watch -------------------------------------------------------------------- */

/* Link up and not registered: Register. Registered without an assignment for 5 s: the
 * Register or the Assign got lost, Register again. */
static void test_register_and_register_again(void **state)
{
    cdc_link_watch_t lw = {0};
    int64_t t0 = 100000;
    (void)state;
    dial();
    watch(&lw, t0);
    assert_true(M.w->registered);
    assert_int_equal(lw.waiting_ms, t0);
    coord_expect_register();
    watch(&lw, t0 + 4999);
    coord_expect_nothing();
    watch(&lw, t0 + 5000);
    coord_expect_register();
    assert_int_equal(lw.waiting_ms, t0 + 5000);
    assert_true(M.w->registered);
}

/* A Reject: registered again, but not before its delay. */
static void test_reject_registers_after_delay(void **state)
{
    cdc_link_watch_t lw = {0};
    int64_t before, t;
    (void)state;
    dial();
    watch(&lw, cdc_clock_mono_ms());
    coord_expect_register();
    before = cdc_clock_mono_ms();
    handle_reject();
    assert_false(M.w->registered);
    t = M.w->next_register_ms;
    assert_true(t >= before + 100 && t <= cdc_clock_mono_ms() + 100);
    watch(&lw, t - 1);
    assert_false(M.w->registered);
    coord_expect_nothing();
    watch(&lw, t);
    assert_true(M.w->registered);
    coord_expect_register();
}

/* A link that stays down for 3 s is replaced (its clock starts over); a registration
 * does not survive a link that went down. */
static void test_link_down_replaced(void **state)
{
    cdc_link_watch_t lw = {0};
    int64_t t0 = 100000;
    (void)state;
    M.w->cfg.coordinator = "inproc://test_worker_session_nobody";
    cdc_worker_find_leader(M.w);
    M.w->registered = true;
    watch(&lw, t0);
    assert_false(M.w->registered);
    assert_int_equal(lw.down_since_ms, t0);
    watch(&lw, t0 + 2999);
    assert_int_equal(lw.down_since_ms, t0);
    watch(&lw, t0 + 3000); /* reset_link(): a new socket, down since now */
    assert_int_equal(lw.down_since_ms, t0 + 3000);
    assert_false(M.w->registered);
    assert_int_equal(M.w->next_register_ms, 0);
    assert_non_null(M.w->msg);
}

/* After an Abort the wait for the next Assign starts at the Abort, not at the Register. */
static void test_abort_restarts_wait(void **state)
{
    cdc_link_watch_t lw = {0};
    int64_t t0 = 100000;
    (void)state;
    mock_worker_open(&M);
    dial();
    watch(&lw, t0);
    coord_expect_register();
    handle_assign(5, 1, 0);
    watch(&lw, t0 + 1000);
    assert_true(lw.was_assigned);
    handle_abort(5, 2);
    watch(&lw, t0 + 20000);
    assert_int_equal(lw.waiting_ms, t0 + 20000);
    watch(&lw, t0 + 24999);
    coord_expect_nothing();
    watch(&lw, t0 + 25000);
    coord_expect_register();
}

/* ---- coordinator messages ------------------------------------------------------------------ */

/* An Assign must be newer than the assignment the worker runs: a newer generation or term,
 * or the generation of the Abort that suspended it. */
static void test_assign_rules(void **state)
{
    (void)state;
    mock_worker_open(&M);
    handle_assign(5, 2, 0);
    assert_true(M.w->assigned);
    assert_int_equal(M.w->term, 5);
    assert_int_equal(M.w->generation, 2);
    assert_int_equal(M.w->assignment_seq, 1);
    assert_true(M.w->slots[0].owned);
    handle_assign(5, 1, 3); /* older generation */
    handle_assign(5, 2, 3); /* the one it runs */
    handle_assign(4, 9, 3); /* older term */
    assert_int_equal(rejected(), 3);
    assert_int_equal(M.w->generation, 2);
    assert_int_equal(M.w->assignment_seq, 1);
    assert_false(M.w->slots[3].owned);
    handle_assign(6, 1, 3); /* a new term, whatever its generation */
    assert_int_equal(M.w->term, 6);
    assert_int_equal(M.w->generation, 1);
    assert_int_equal(M.w->assignment_seq, 2);
    assert_true(M.w->slots[3].owned);
    assert_false(M.w->slots[0].owned);
}

/* The Register names the worker's topics; an Assign that refuses it (its topics are not
 * the job's tables) leaves it idle and registered, waiting for the next assignment without
 * registering again, and shows the refusal in /status until an Assign gives it slots. */
static void test_refused_assign(void **state)
{
    cdc_link_watch_t lw = {0};
    mock_assign_t b;
    Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
    int64_t t0 = 100000;
    (void)state;
    mock_worker_open(&M);
    dial();
    watch(&lw, t0);
    in = coord_expect(CDC__ENVELOPE__BODY_REGISTER);
    assert_int_equal(in->register_->n_topics, M.w->topics.n);
    assert_true(M.w->topics.n > 0);
    assert_string_equal(in->register_->topics[0], cdc_worker_topic(M.w, 0));
    cdc_msg_free(in);
    env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
    env.assign = mock_assign(&b, M.topic, 5, 2, NULL, NULL, 0);
    env.assign->refused = "it does not consume \"cdc.public.acc_edge\" of the job's tables";
    cdc_worker_handle(M.w, &env);
    assert_true(M.w->assigned);
    assert_string_equal(M.w->refused, env.assign->refused);
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        assert_false(M.w->slots[p].owned);
    watch(&lw, t0 + 60000); /* idle, not lost: no Register again */
    assert_true(M.w->registered);
    coord_expect_nothing();
    handle_assign(5, 3, 4);
    assert_string_equal(M.w->refused, "");
    assert_true(M.w->slots[4].owned);
}

/* An Abort of an older generation is ignored; a current or newer one drops the staged
 * data and waits for the Assign of its generation. */
static void test_abort_rules(void **state)
{
    (void)state;
    mock_register_schema(&M);
    mock_produce_event(&M, 0, 'c', 1, "ada", 100);
    mock_worker_open(&M);
    handle_assign(5, 2, 0);
    mock_consume_to(&M, 0, 1);
    assert_int_equal(M.w->slots[0].stage.changes, 1);
    handle_abort(5, 1);
    assert_int_equal(rejected(), 1);
    assert_true(M.w->assigned);
    assert_int_equal(M.w->slots[0].stage.changes, 1);
    handle_abort(5, 3);
    assert_false(M.w->assigned);
    assert_int_equal(M.w->generation, 3);
    assert_int_equal(M.w->assignment_seq, 2);
    assert_int_equal(cdc_metrics_value(M.w->m_aborts), 1);
    assert_int_equal(M.w->slots[0].stage.changes, 0);
    handle_assign(5, 3, 0); /* the Abort's generation */
    assert_true(M.w->assigned);
    assert_int_equal(M.w->assignment_seq, 3);
    handle_assign(5, 3, 0); /* now it runs it */
    assert_int_equal(rejected(), 2);
}

/* A Barrier is cut only for the assignment the worker runs; the finalizer's Ack reaches the
 * coordinator with the slots' offsets. */
static void test_barrier_rules(void **state)
{
    cdc_link_watch_t lw = {0};
    Cdc__Envelope *env;
    (void)state;
    mock_register_schema(&M);
    mock_produce_event(&M, 0, 'c', 1, "ada", 100);
    mock_worker_open(&M);
    dial();
    watch(&lw, cdc_clock_mono_ms());
    coord_expect_register();
    handle_barrier(0, 0, 9); /* nothing assigned */
    assert_int_equal(rejected(), 1);
    handle_assign(5, 2, 0);
    mock_consume_to(&M, 0, 1);
    handle_barrier(5, 1, 10); /* older generation */
    handle_barrier(4, 2, 10); /* older term */
    assert_int_equal(rejected(), 3);
    coord_expect_nothing();
    handle_barrier(5, 2, 11);
    env = coord_expect(CDC__ENVELOPE__BODY_ACK);
    assert_string_equal(env->ack->worker_id, "w1");
    assert_int_equal(env->ack->term, 5);
    assert_int_equal(env->ack->generation, 2);
    assert_int_equal(env->ack->epoch, 11);
    assert_int_equal(env->ack->n_partitions, 1);
    assert_int_equal(env->ack->partitions[0]->partition, 0);
    assert_int_equal(env->ack->partitions[0]->n_offsets, 1);
    assert_string_equal(env->ack->partitions[0]->offsets[0]->topic, M.topic);
    assert_int_equal(env->ack->partitions[0]->offsets[0]->next_offset, 1);
    assert_true(env->ack->n_files > 0); /* the staged change */
    cdc_msg_free(env);
}

/* The Ack reports the offsets of the job's tables only: a worker whose --tables name one
 * more than the set its Assign gives does not read it, nor report it for the slot. */
static void test_ack_reports_the_set(void **state)
{
    cdc_link_watch_t lw = {0};
    mock_assign_t b;
    Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
    uint32_t slot = 0;
    char *set[1] = {M.topic};
    (void)state;
    M.w->cfg.tables = "public.orders,public.items";
    mock_register_schema(&M);
    mock_produce_event(&M, 0, 'c', 1, "ada", 100);
    mock_worker_open(&M);
    dial();
    watch(&lw, cdc_clock_mono_ms());
    in = coord_expect(CDC__ENVELOPE__BODY_REGISTER);
    assert_int_equal(in->register_->n_topics, 2); /* what it can consume */
    assert_false(in->register_->follows_tables);
    cdc_msg_free(in);
    env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
    env.assign = mock_assign(&b, M.topic, 5, 2, &slot, NULL, 1);
    env.assign->n_tables = 1;
    env.assign->tables = set;
    cdc_worker_handle(M.w, &env);
    assert_true(M.w->assigned);
    mock_consume_to(&M, 0, 1);
    handle_barrier(5, 2, 11);
    in = coord_expect(CDC__ENVELOPE__BODY_ACK);
    assert_int_equal(in->ack->partitions[0]->n_offsets, 1);
    assert_string_equal(in->ack->partitions[0]->offsets[0]->topic, M.topic);
    assert_int_equal(in->ack->partitions[0]->offsets[0]->next_offset, 1);
    cdc_msg_free(in);
}

/* A job of hundreds of tables (no cap on a worker's topics): the barrier's cut holds every
 * topic, and the Ack reports each one's offset apart, the table with records far past
 * index 64 included, while the finalizer reads the names the record thread published. */
static void test_ack_reports_hundreds(void **state)
{
    enum { MANY = 300, AT = 250 };
    cdc_link_watch_t lw = {0};
    mock_assign_t b;
    Cdc__Envelope env = CDC__ENVELOPE__INIT, *in;
    Cdc__TopicOffset to[MANY], *top[MANY];
    char *tables[MANY];
    uint32_t slot = 0;
    (void)state;
    M.w->cfg.tables = NULL;
    for (int i = 0; i < MANY; i++) {
        if (i == AT)
            tables[i] = strdup(M.topic);
        else
            assert_true(asprintf(&tables[i], "%s.public.t%03d", M.prefix, i) > 0);
    }
    mock_register_schema(&M);
    mock_produce_event(&M, 0, 'c', 1, "ada", 100);
    mock_worker_open(&M);
    dial();
    watch(&lw, cdc_clock_mono_ms());
    coord_expect_register();
    env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
    env.assign = mock_assign(&b, M.topic, 5, 2, &slot, NULL, 1);
    b.ps[0].offsets = top;
    for (int i = 0; i < MANY; i++) { /* the empty topics at their end, ours from the start */
        if (i == AT)
            continue;
        cdc__topic_offset__init(&to[i]);
        to[i].topic = tables[i];
        top[b.ps[0].n_offsets++] = &to[i];
    }
    env.assign->n_tables = MANY;
    env.assign->tables = tables;
    cdc_worker_handle(M.w, &env);
    assert_true(M.w->assigned);
    assert_int_equal(M.w->topics.n, MANY);
    mock_consume_to(&M, 0, 1);
    handle_barrier(5, 2, 11);
    in = coord_expect(CDC__ENVELOPE__BODY_ACK);
    assert_int_equal(in->ack->n_partitions, 1);
    assert_int_equal(in->ack->partitions[0]->n_offsets, MANY);
    for (int i = 0; i < MANY; i++) {
        const Cdc__TopicOffset *o = in->ack->partitions[0]->offsets[i];
        assert_string_equal(o->topic, tables[i]);
        assert_int_equal(o->next_offset, i == AT ? 1 : 0);
    }
    assert_true(in->ack->n_files > 0); /* the staged change */
    cdc_msg_free(in);
    for (int i = 0; i < MANY; i++)
        free(tables[i]);
}

/* A worker without --tables registers as a follower with its offer: the tables registered
 * on the schema topic. */
static void test_follower_registers_offer(void **state)
{
    cdc_link_watch_t lw = {0};
    Cdc__Envelope *in;
    (void)state;
    M.w->cfg.tables = NULL;
    mock_register_schema(&M);
    mock_worker_open(&M);
    cdc_worker_offer_refresh(M.w, cdc_clock_mono_ms());
    dial();
    watch(&lw, cdc_clock_mono_ms());
    in = coord_expect(CDC__ENVELOPE__BODY_REGISTER);
    assert_true(in->register_->follows_tables);
    assert_int_equal(in->register_->n_topics, 1);
    assert_string_equal(in->register_->topics[0], M.topic);
    cdc_msg_free(in);
}

/* An Ack built for another generation than the worker runs by now is not sent. */
static void test_ack_only_current_generation(void **state)
{
    Cdc__Ack ack = CDC__ACK__INIT;
    cdc_link_watch_t lw = {0};
    (void)state;
    dial();
    watch(&lw, cdc_clock_mono_ms());
    coord_expect_register();
    M.w->term = 5;
    M.w->generation = 2;
    ack.term = 5;
    ack.generation = 1;
    ack.epoch = 3;
    assert_false(cdc_worker_send_ack(M.w, &ack));
    ack.term = 4;
    ack.generation = 2;
    assert_false(cdc_worker_send_ack(M.w, &ack));
    coord_expect_nothing();
    ack.term = 5;
    assert_true(cdc_worker_send_ack(M.w, &ack));
    Cdc__Envelope *env = coord_expect(CDC__ENVELOPE__BODY_ACK);
    assert_int_equal(env->ack->epoch, 3);
    assert_string_equal(env->ack->worker_id, "w1");
    cdc_msg_free(env);
}

/* ---- polling the link ------------------------------------------------------------------- */

static void coord_send(const Cdc__Envelope *env)
{
    cdc_error_t e;
    assert_int_equal(cdc_msg_server_send(S, PIPE, env, &e), CDC_OK);
}

static bool assignment_changed(void *arg)
{
    (void)arg;
    return cdc_worker_poll_control(M.w);
}

typedef struct ack_wait {
    bool changed; /* a poll reported an assignment change */
    Cdc__Envelope *ack;
} ack_wait_t;

static bool acked(void *arg)
{
    ack_wait_t *a = arg;
    cdc_error_t e;
    a->changed = a->changed || cdc_worker_poll_control(M.w);
    if (cdc_msg_server_recv(S, 0, &a->ack, &PIPE, &e) != CDC_OK)
        a->ack = NULL;
    return a->ack != NULL;
}

/* Messages received over the link are handled in order; a poll that acted on an Assign says
 * so (the caller drops its batch), one that served a Barrier does not. */
static void test_poll_control(void **state)
{
    cdc_link_watch_t lw = {0};
    mock_assign_t b;
    uint32_t slot = 4;
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Barrier bar = CDC__BARRIER__INIT;
    ack_wait_t a = {false, NULL};
    (void)state;
    mock_worker_open(&M);
    dial();
    watch(&lw, cdc_clock_mono_ms());
    coord_expect_register();
    assert_false(cdc_worker_poll_control(M.w)); /* nothing there */
    env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
    env.assign = mock_assign(&b, M.topic, 3, 1, &slot, NULL, 1);
    coord_send(&env);
    assert_true(cdc_test_wait_for(assignment_changed, NULL, WAIT_MS));
    assert_true(M.w->assigned);
    assert_true(M.w->slots[4].owned);
    bar.term = 3;
    bar.generation = 1;
    bar.epoch = 8;
    env.body_case = CDC__ENVELOPE__BODY_BARRIER;
    env.barrier = &bar;
    coord_send(&env);
    assert_true(cdc_test_wait_for(acked, &a, WAIT_MS));
    assert_false(a.changed);
    assert_int_equal(a.ack->body_case, CDC__ENVELOPE__BODY_ACK);
    assert_int_equal(a.ack->ack->epoch, 8);
    cdc_msg_free(a.ack);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_find_leader_dials_once),
        T(test_register_and_register_again),
        T(test_reject_registers_after_delay),
        T(test_link_down_replaced),
        T(test_abort_restarts_wait),
        T(test_assign_rules),
        T(test_refused_assign),
        T(test_abort_rules),
        T(test_barrier_rules),
        T(test_ack_only_current_generation),
        T(test_ack_reports_the_set),
        T(test_ack_reports_hundreds),
        T(test_follower_registers_offer),
        T(test_poll_control),
    };
#undef T
    return cmocka_run_group_tests(tests, mock_cluster_up, mock_cluster_down);
}
