/* Component tests of common/msg.c over real NNG TCP sockets on loopback: a server and
 * two clients exchange requests and responses; a raw pair1 peer sending junk gets its
 * pipe dropped while the others keep working; a restarted server is reconnected to;
 * a client redials a new server; a dropped client comes back and a reset client gets a
 * new socket. Every wait has a deadline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <nng/supplemental/util/platform.h>

#include "common/msg.h"

#define OK(expr)                                                                                   \
    do {                                                                                           \
        cdc_err_t err_ = (expr);                                                                   \
        if (err_ != CDC_OK)                                                                        \
            fail_msg("%s: %s (%s)", #expr, e.msg, cdc_err_name(err_));                             \
    } while (0)

static const cdc_msg_options_t opts = {
    .send_timeout_ms = 2000, .reconnect_min_ms = 20, .reconnect_max_ms = 200};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool wait_connected(cdc_msg_client_t *c, bool want, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    while (cdc_msg_client_connected(c) != want) {
        if (now_ms() > deadline)
            return false;
        nng_msleep(10);
    }
    return true;
}

static cdc_err_t send_register(cdc_msg_client_t *c, const char *id, cdc_error_t *e)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Register reg = CDC__REGISTER__INIT;
    reg.worker_id = (char *)id;
    reg.incarnation = 1;
    env.body_case = CDC__ENVELOPE__BODY_REGISTER;
    env.register_ = &reg;
    return cdc_msg_client_send(c, &env, e);
}

static cdc_err_t send_assign(cdc_msg_server_t *s, uint32_t pipe, uint64_t generation,
                             cdc_error_t *e)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Assign a = CDC__ASSIGN__INIT;
    a.term = 1;
    a.generation = generation;
    env.body_case = CDC__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;
    return cdc_msg_server_send(s, pipe, &env, e);
}

/* Counts queued events of a type (drains the queue). */
static int drain_events(cdc_msg_server_t *s, cdc_msg_event_type_t type)
{
    cdc_msg_event_t ev;
    int n = 0;
    while (cdc_msg_server_poll_event(s, &ev))
        n += ev.type == type;
    return n;
}

static void test_exchange_garbage_restart(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_msg_server_t *s = NULL;
    cdc_msg_client_t *c1 = NULL, *c2 = NULL;
    char url[128];
    Cdc__Envelope *env = NULL;
    uint32_t pipe = 0, pipes[2] = {0, 0};

    OK(cdc_msg_server_open(&s, "tcp://127.0.0.1:0", &opts, &e));
    int port = cdc_msg_server_port(s);
    assert_true(port > 0);
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
    OK(cdc_msg_client_open(&c1, url, &opts, &e));
    OK(cdc_msg_client_open(&c2, url, &opts, &e));
    assert_true(wait_connected(c1, true, 5000));
    assert_true(wait_connected(c2, true, 5000));

    /* request/response: each worker registers, the server answers on its pipe */
    OK(send_register(c1, "w1", &e));
    OK(send_register(c2, "w2", &e));
    for (int i = 0; i < 2; i++) {
        OK(cdc_msg_server_recv(s, 5000, &env, &pipe, &e));
        assert_int_equal(env->body_case, CDC__ENVELOPE__BODY_REGISTER);
        int who = strcmp(env->register_->worker_id, "w1") == 0 ? 0 : 1;
        pipes[who] = pipe;
        cdc_msg_free(env);
    }
    assert_true(pipes[0] != 0 && pipes[1] != 0 && pipes[0] != pipes[1]);
    OK(send_assign(s, pipes[0], 101, &e));
    OK(send_assign(s, pipes[1], 202, &e));
    OK(cdc_msg_client_recv(c1, 5000, &env, &e));
    assert_int_equal(env->assign->generation, 101);
    cdc_msg_free(env);
    OK(cdc_msg_client_recv(c2, 5000, &env, &e));
    assert_int_equal(env->assign->generation, 202);
    cdc_msg_free(env);
    assert_int_equal(drain_events(s, CDC_MSG_PIPE_ADDED), 2);
    assert_int_equal(cdc_msg_client_recv(c1, 50, &env, &e), CDC_ERR_TIMEOUT);

    /* garbage: a raw pair1 peer sends junk; its pipe is dropped, the others still work */
    nng_socket raw;
    assert_int_equal(nng_pair1_open(&raw), 0);
    nng_socket_set_ms(raw, NNG_OPT_SENDTIMEO, 2000);
    assert_int_equal(nng_dial(raw, url, NULL, 0), 0);
    const char junk[] = "\xff\xff\xff\xff not a protobuf envelope \x13\x37";
    assert_int_equal(nng_send(raw, (void *)junk, sizeof(junk), 0), 0);
    int64_t deadline = now_ms() + 5000;
    while (cdc_msg_server_garbage_count(s) < 1 && now_ms() < deadline) {
        cdc_err_t err = cdc_msg_server_recv(s, 100, &env, &pipe, &e);
        assert_int_equal(err, CDC_ERR_TIMEOUT); /* junk is never handed out */
    }
    assert_int_equal(cdc_msg_server_garbage_count(s), 1);
    deadline = now_ms() + 5000;
    int removed = 0;
    while (removed == 0 && now_ms() < deadline) {
        removed += drain_events(s, CDC_MSG_PIPE_REMOVED);
        nng_msleep(10);
    }
    assert_true(removed >= 1);
    nng_close(raw);
    assert_true(cdc_msg_client_connected(c1));
    Cdc__Envelope hb_env = CDC__ENVELOPE__INIT;
    Cdc__Heartbeat hb = CDC__HEARTBEAT__INIT;
    hb.worker_id = "w1";
    hb.term = 1;
    hb_env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
    hb_env.heartbeat = &hb;
    OK(cdc_msg_client_send(c1, &hb_env, &e));
    OK(cdc_msg_server_recv(s, 5000, &env, &pipe, &e));
    assert_int_equal(env->body_case, CDC__ENVELOPE__BODY_HEARTBEAT);
    assert_int_equal(pipe, pipes[0]);
    cdc_msg_free(env);

    /* closing a pipe from the server: the worker sees the loss and reconnects */
    cdc_msg_server_close_pipe(s, pipes[1]);
    deadline = now_ms() + 5000;
    bool seen = false;
    while (!seen && now_ms() < deadline) {
        cdc_msg_event_t ev;
        while (cdc_msg_server_poll_event(s, &ev))
            seen |= ev.type == CDC_MSG_PIPE_REMOVED && ev.pipe == pipes[1];
        nng_msleep(10);
    }
    assert_true(seen);
    assert_true(wait_connected(c2, true, 5000));

    /* server restart on the same port: both clients reconnect and are heard */
    cdc_msg_server_close(s);
    assert_true(wait_connected(c1, false, 5000));
    OK(cdc_msg_server_open(&s, url, &opts, &e));
    assert_true(wait_connected(c1, true, 5000));
    assert_true(wait_connected(c2, true, 5000));
    OK(send_register(c1, "w1", &e));
    OK(cdc_msg_server_recv(s, 5000, &env, &pipe, &e));
    assert_string_equal(env->register_->worker_id, "w1");
    cdc_msg_free(env);
    OK(send_assign(s, pipe, 303, &e));
    OK(cdc_msg_client_recv(c1, 5000, &env, &e));
    assert_int_equal(env->assign->generation, 303);
    cdc_msg_free(env);

    /* leader change: c2 redials a second server */
    cdc_msg_server_t *s2 = NULL;
    char url2[128];
    OK(cdc_msg_server_open(&s2, "tcp://127.0.0.1:0", &opts, &e));
    snprintf(url2, sizeof(url2), "tcp://127.0.0.1:%d", cdc_msg_server_port(s2));
    OK(cdc_msg_client_redial(c2, url2, &e));
    assert_true(wait_connected(c2, true, 5000));
    OK(send_register(c2, "w2", &e));
    OK(cdc_msg_server_recv(s2, 5000, &env, &pipe, &e));
    assert_string_equal(env->register_->worker_id, "w2");
    cdc_msg_free(env);

    cdc_msg_client_close(c1);
    cdc_msg_client_close(c2);
    cdc_msg_server_close(s);
    cdc_msg_server_close(s2);
}

static void test_timeouts_and_limits(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_msg_client_t *c = NULL;
    cdc_msg_server_t *s = NULL;
    Cdc__Envelope *env = NULL;
    uint32_t pipe;
    cdc_msg_options_t small = opts;
    small.send_timeout_ms = 200;
    small.recv_max_bytes = 1024;

    /* nobody listening: send times out (retriable), recv times out */
    OK(cdc_msg_client_open(&c, "tcp://127.0.0.1:1", &small, &e));
    assert_false(cdc_msg_client_connected(c));
    Cdc__Envelope b = CDC__ENVELOPE__INIT;
    Cdc__Barrier bar = CDC__BARRIER__INIT;
    b.body_case = CDC__ENVELOPE__BODY_BARRIER;
    b.barrier = &bar;
    assert_int_equal(cdc_msg_client_send(c, &b, &e), CDC_ERR_TIMEOUT);
    assert_true(e.retriable);
    assert_int_equal(cdc_msg_client_recv(c, 50, &env, &e), CDC_ERR_TIMEOUT);
    cdc_msg_client_close(c);

    /* bad addresses are configuration errors */
    assert_int_equal(cdc_msg_server_open(&s, "nonsense://x", &small, &e), CDC_ERR_CONFIG);

    /* frames over recv_max_bytes drop the pipe at the NNG layer */
    char url[128];
    OK(cdc_msg_server_open(&s, "tcp://127.0.0.1:0", &small, &e));
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", cdc_msg_server_port(s));
    OK(cdc_msg_client_open(&c, url, &small, &e));
    assert_true(wait_connected(c, true, 5000));
    Cdc__Envelope big = CDC__ENVELOPE__INIT;
    Cdc__Abort ab = CDC__ABORT__INIT;
    char reason[4096];
    memset(reason, 'x', sizeof(reason) - 1);
    reason[sizeof(reason) - 1] = '\0';
    ab.reason = reason;
    big.body_case = CDC__ENVELOPE__BODY_ABORT;
    big.abort = &ab;
    OK(cdc_msg_client_send(c, &big, &e));
    assert_int_equal(cdc_msg_server_recv(s, 300, &env, &pipe, &e), CDC_ERR_TIMEOUT);
    /* the client reconnects and a normal frame gets through */
    assert_true(wait_connected(c, true, 5000));
    int64_t deadline = now_ms() + 5000;
    cdc_err_t err = CDC_ERR_TIMEOUT;
    while (err != CDC_OK && now_ms() < deadline) {
        if (cdc_msg_client_connected(c))
            cdc_msg_client_send(c, &b, &e);
        err = cdc_msg_server_recv(s, 200, &env, &pipe, &e);
    }
    assert_int_equal(err, CDC_OK);
    assert_int_equal(env->body_case, CDC__ENVELOPE__BODY_BARRIER);
    cdc_msg_free(env);
    cdc_msg_client_close(c);
    cdc_msg_server_close(s);
}

/*
 * A client whose server dropped it (a worker declared lost) comes back by itself, and a
 * reset replaces its socket: the server sees the old pipe go and a new one come, and the
 * link works both ways afterwards, also towards another server.
 */
static void test_dropped_and_reset(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_msg_server_t *s = NULL, *s2 = NULL;
    cdc_msg_client_t *c = NULL;
    char url[128], url2[128];
    Cdc__Envelope *env = NULL;
    uint32_t pipe = 0, first = 0;
    cdc_msg_client_stats_t st;

    OK(cdc_msg_server_open(&s, "tcp://127.0.0.1:0", &opts, &e));
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", cdc_msg_server_port(s));
    OK(cdc_msg_client_open(&c, url, &opts, &e));
    assert_true(wait_connected(c, true, 5000));
    OK(send_register(c, "w1", &e));
    OK(cdc_msg_server_recv(s, 5000, &env, &first, &e));
    cdc_msg_free(env);
    cdc_msg_client_stats(c, &st);
    assert_int_equal(st.pipes_added, 1);
    assert_true(st.pipe != 0);

    /* the server drops the pipe: NNG redials and a Register on the new pipe is heard */
    cdc_msg_server_close_pipe(s, first);
    int64_t deadline = now_ms() + 5000;
    do {
        cdc_msg_client_stats(c, &st);
        nng_msleep(10);
    } while ((st.pipes_added < 2 || st.pipe == 0) && now_ms() < deadline);
    assert_int_equal(st.pipes_added, 2);
    OK(send_register(c, "w1", &e));
    OK(cdc_msg_server_recv(s, 5000, &env, &pipe, &e));
    cdc_msg_free(env);
    assert_true(pipe != first);

    /* reset: a new socket, the old pipe is removed, the new one carries both ways */
    drain_events(s, CDC_MSG_PIPE_REMOVED);
    first = pipe;
    OK(cdc_msg_client_reset(c, url, &e));
    assert_true(wait_connected(c, true, 5000));
    deadline = now_ms() + 5000;
    bool removed = false;
    while (!removed && now_ms() < deadline) {
        cdc_msg_event_t ev;
        while (cdc_msg_server_poll_event(s, &ev))
            removed |= ev.type == CDC_MSG_PIPE_REMOVED && ev.pipe == first;
        nng_msleep(10);
    }
    assert_true(removed);
    OK(send_register(c, "w1", &e));
    OK(cdc_msg_server_recv(s, 5000, &env, &pipe, &e));
    cdc_msg_free(env);
    assert_true(pipe != first);
    OK(send_assign(s, pipe, 7, &e));
    OK(cdc_msg_client_recv(c, 5000, &env, &e));
    assert_int_equal(env->assign->generation, 7);
    cdc_msg_free(env);

    /* reset towards another server (leader change) */
    OK(cdc_msg_server_open(&s2, "tcp://127.0.0.1:0", &opts, &e));
    snprintf(url2, sizeof(url2), "tcp://127.0.0.1:%d", cdc_msg_server_port(s2));
    OK(cdc_msg_client_reset(c, url2, &e));
    assert_true(wait_connected(c, true, 5000));
    OK(send_register(c, "w2", &e));
    OK(cdc_msg_server_recv(s2, 5000, &env, &pipe, &e));
    assert_string_equal(env->register_->worker_id, "w2");
    cdc_msg_free(env);
    assert_int_equal(cdc_msg_server_recv(s, 100, &env, &pipe, &e), CDC_ERR_TIMEOUT);

    cdc_msg_client_stats(c, &st);
    assert_int_equal(st.stuck_closes, 0);
    cdc_msg_client_close(c);
    cdc_msg_server_close(s);
    cdc_msg_server_close(s2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange_garbage_restart),
        cmocka_unit_test(test_timeouts_and_limits),
        cmocka_unit_test(test_dropped_and_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
