/*
 * NNG + protobuf-c messaging between coordinator and workers (see msg.h). One NNG
 * message = one packed Cdc__Envelope. The server is a pair1 socket in polyamorous mode:
 * every received message carries its pipe, and a reply is addressed by setting the pipe
 * on the outgoing message. Pipe add/remove notifications arrive on NNG threads and are
 * queued under a mutex for the server loop. Garbage (unpack failure or empty body)
 * closes the offending pipe only.
 */
#include "common/msg.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/tls.h"

#define DEFAULT_SEND_TIMEOUT_MS 1000
#define DEFAULT_RECV_MAX (64u * 1024 * 1024)
#define DEFAULT_RECONNECT_MIN_MS 100
#define DEFAULT_RECONNECT_MAX_MS 2000

static cdc_err_t nng_to_cdc(int rv)
{
    switch (rv) {
    case 0:
        return CDC_OK;
    case NNG_ETIMEDOUT:
        return CDC_ERR_TIMEOUT;
    case NNG_ECLOSED:
        return CDC_ERR_CLOSED;
    case NNG_ENOMEM:
        return CDC_ERR_NOMEM;
    case NNG_EINVAL:
    case NNG_EADDRINVAL:
    case NNG_ENOTSUP:
        return CDC_ERR_INVALID;
    case NNG_EPROTO:
        return CDC_ERR_PROTOCOL;
    default:
        return CDC_ERR_UNAVAILABLE;
    }
}

static cdc_err_t nng_fail(cdc_error_t *e, int rv, const char *what, const char *url)
{
    return cdc_error_set(e, nng_to_cdc(rv), "could not %s \"%s\": %s", what, url ? url : "",
                         nng_strerror(rv));
}

/* ---- encode/decode ---------------------------------------------------------------- */

cdc_err_t cdc_msg_encode(const Cdc__Envelope *env, uint8_t **buf, size_t *len, cdc_error_t *e)
{
    if (env == NULL || env->body_case == CDC__ENVELOPE__BODY__NOT_SET)
        return cdc_error_set(e, CDC_ERR_INVALID, "envelope has no body");
    size_t n = cdc__envelope__get_packed_size(env);
    uint8_t *out = malloc(n > 0 ? n : 1);
    if (out == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory packing a %zu byte envelope", n);
    cdc__envelope__pack(env, out);
    *buf = out;
    *len = n;
    return CDC_OK;
}

cdc_err_t cdc_msg_decode(const uint8_t *buf, size_t len, Cdc__Envelope **out, cdc_error_t *e)
{
    Cdc__Envelope *env = cdc__envelope__unpack(NULL, len, buf);
    if (env == NULL)
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "frame of %zu bytes is not a protocol envelope",
                             len);
    if (env->body_case == CDC__ENVELOPE__BODY__NOT_SET) {
        cdc__envelope__free_unpacked(env, NULL);
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "envelope of %zu bytes has no body", len);
    }
    *out = env;
    return CDC_OK;
}

void cdc_msg_free(Cdc__Envelope *env)
{
    if (env != NULL)
        cdc__envelope__free_unpacked(env, NULL);
}

const char *cdc_msg_body_name(const Cdc__Envelope *env)
{
    if (env == NULL)
        return "none";
    switch (env->body_case) {
    case CDC__ENVELOPE__BODY_REGISTER:
        return "register";
    case CDC__ENVELOPE__BODY_HEARTBEAT:
        return "heartbeat";
    case CDC__ENVELOPE__BODY_ASSIGN:
        return "assign";
    case CDC__ENVELOPE__BODY_BARRIER:
        return "barrier";
    case CDC__ENVELOPE__BODY_ACK:
        return "ack";
    case CDC__ENVELOPE__BODY_COMMITTED:
        return "committed";
    case CDC__ENVELOPE__BODY_ABORT:
        return "abort";
    case CDC__ENVELOPE__BODY_REJECT:
        return "reject";
    case CDC__ENVELOPE__BODY_CHALLENGE:
        return "challenge";
    case CDC__ENVELOPE__BODY_TABLES:
        return "tables";
    default:
        return "none";
    }
}

/* ---- shared socket helpers ---------------------------------------------------------- */

static void apply_options(const cdc_msg_options_t *opts, cdc_msg_options_t *o)
{
    memset(o, 0, sizeof(*o));
    if (opts != NULL)
        *o = *opts;
    if (o->send_timeout_ms <= 0)
        o->send_timeout_ms = DEFAULT_SEND_TIMEOUT_MS;
    if (o->recv_max_bytes == 0)
        o->recv_max_bytes = DEFAULT_RECV_MAX;
    if (o->reconnect_min_ms <= 0)
        o->reconnect_min_ms = DEFAULT_RECONNECT_MIN_MS;
    if (o->reconnect_max_ms <= 0)
        o->reconnect_max_ms = DEFAULT_RECONNECT_MAX_MS;
    if (o->reconnect_max_ms < o->reconnect_min_ms)
        o->reconnect_max_ms = o->reconnect_min_ms;
}

static int set_socket_options(nng_socket sock, const cdc_msg_options_t *o)
{
    int rv;
    if ((rv = nng_socket_set_ms(sock, NNG_OPT_SENDTIMEO, o->send_timeout_ms)) != 0 ||
        (rv = nng_socket_set_size(sock, NNG_OPT_RECVMAXSZ, o->recv_max_bytes)) != 0 ||
        (rv = nng_socket_set_ms(sock, NNG_OPT_RECONNMINT, o->reconnect_min_ms)) != 0 ||
        (rv = nng_socket_set_ms(sock, NNG_OPT_RECONNMAXT, o->reconnect_max_ms)) != 0)
        return rv;
    return 0;
}

/* A tls+tcp:// URL needs certificates (opts->tls). */
static cdc_err_t check_tls(const cdc_msg_options_t *o, const char *url, cdc_error_t *e)
{
    if (cdc_tls_url(url) && o->tls == NULL)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "\"%s\" is a TLS address but no certificates were given (hint: "
                             "--tls-ca-file, --tls-cert-file and --tls-key-file)",
                             url);
    return CDC_OK;
}

/* The host of "scheme://host:port" (brackets of an IPv6 address dropped) into out. */
static void url_host(const char *url, char *out, size_t size)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    const char *end = strrchr(h, ':');
    size_t n = end ? (size_t)(end - h) : strlen(h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    snprintf(out, size, "%.*s", (int)n, h);
}

static cdc_err_t send_env(nng_socket sock, const Cdc__Envelope *env, uint32_t pipe, cdc_error_t *e)
{
    nng_msg *msg = NULL;
    size_t n;
    int rv;

    if (env == NULL || env->body_case == CDC__ENVELOPE__BODY__NOT_SET)
        return cdc_error_set(e, CDC_ERR_INVALID, "envelope has no body");
    n = cdc__envelope__get_packed_size(env);
    if ((rv = nng_msg_alloc(&msg, n)) != 0)
        return cdc_error_set(e, CDC_ERR_NOMEM, "could not allocate a %zu byte message", n);
    cdc__envelope__pack(env, nng_msg_body(msg));
    if (pipe != 0) {
        nng_pipe p = NNG_PIPE_INITIALIZER;
        p.id = pipe;
        nng_msg_set_pipe(msg, p);
    }
    if ((rv = nng_sendmsg(sock, msg, 0)) != 0) {
        nng_msg_free(msg); /* ownership stays with us on failure */
        return cdc_error_set(e, nng_to_cdc(rv), "could not send %s message%s: %s",
                             cdc_msg_body_name(env), pipe ? " to worker pipe" : "",
                             nng_strerror(rv));
    }
    return CDC_OK;
}

/*
 * nng_recvmsg() within timeout_ms (< 0: forever). A timed receive is not left to NNG:
 * in NNG 1.5.2 the expiry thread spins on the clock for up to a millisecond before it
 * times an aio out (it expires only when the deadline is strictly in the past), so a
 * coordinator loop waiting 50 ms at a time burned ~1 % of a core in that thread. Instead
 * the socket's receive descriptor (NNG_OPT_RECVFD, readable while a message is waiting)
 * is polled and the message taken without blocking; sockets without one fall back to
 * NNG's timeout. *rfd caches the descriptor (-1: not asked yet); a poll without a message
 * (the worker checks every few ms between records) costs one poll() and no NNG aio.
 */
static int wait_recv(nng_socket sock, int *rfd, int timeout_ms, nng_msg **msg)
{
    int rv;
    int64_t deadline;

    if (timeout_ms >= 0 && *rfd < 0 &&
        (nng_socket_get_int(sock, NNG_OPT_RECVFD, rfd) != 0 || *rfd < 0))
        *rfd = -1;
    if (timeout_ms < 0 || *rfd < 0) {
        nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO,
                          timeout_ms < 0 ? NNG_DURATION_INFINITE : timeout_ms);
        return nng_recvmsg(sock, msg, 0);
    }
    deadline = cdc_clock_mono_ms() + timeout_ms;
    for (int64_t left = timeout_ms;;) {
        struct pollfd pfd = {.fd = *rfd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)left);

        if (n < 0 && errno != EINTR)
            return NNG_ESYSERR;
        if (n > 0 && (rv = nng_recvmsg(sock, msg, NNG_FLAG_NONBLOCK)) != NNG_EAGAIN)
            return rv;
        left = deadline - cdc_clock_mono_ms();
        if (left <= 0 && n == 0)
            return NNG_ETIMEDOUT;
        if (left < 0)
            left = 0;
    }
}

/*
 * Receives one frame within the deadline. On success *env is decoded and *pipe set.
 * Garbage closes the pipe and yields CDC_ERR_PROTOCOL.
 */
static cdc_err_t recv_env(nng_socket sock, int *rfd, int timeout_ms, Cdc__Envelope **env,
                          uint32_t *pipe, cdc_error_t *e)
{
    nng_msg *msg = NULL;
    int rv = wait_recv(sock, rfd, timeout_ms, &msg);

    if (rv != 0) {
        if (rv == NNG_ETIMEDOUT || rv == NNG_EAGAIN)
            return cdc_error_set(e, CDC_ERR_TIMEOUT, "no message within %d ms", timeout_ms);
        return cdc_error_set(e, nng_to_cdc(rv), "could not receive a message: %s",
                             nng_strerror(rv));
    }
    nng_pipe p = nng_msg_get_pipe(msg);
    *pipe = nng_pipe_id(p);
    cdc_err_t err = cdc_msg_decode(nng_msg_body(msg), nng_msg_len(msg), env, e);
    if (err != CDC_OK) {
        cdc_log_warn("dropping connection on pipe %u: %s", nng_pipe_id(p), e ? e->msg : "garbage");
        nng_pipe_close(p);
    }
    nng_msg_free(msg);
    return err;
}

/*
 * Bounded socket close. In NNG 1.5.2 a pipe closed while its TCP receive completes can
 * leave the protocol's receive unfinished for good (nanomsg/nng#1636, fixed in 1.6.0): the
 * process-wide pipe reaper then waits forever on that pipe, so no pipe of the process is
 * removed again and nng_close() of its socket never returns. Seen on workers resumed after
 * a SIGSTOP: a send fails on the dead connection while the buffered messages are still
 * being read. Sockets are therefore closed on a helper thread with a bounded wait; a
 * socket that does not close is abandoned (its memory and the thread leak), and
 * nng_fini() is skipped at exit because it would wait for the reaper too.
 */
#define CLOSE_WAIT_MS 2000

typedef struct sock_closer {
    nng_socket sock;
    _Atomic bool done;
    _Atomic int refs;
} sock_closer_t;

static _Atomic bool reaper_stuck;

static void closer_release(sock_closer_t *k)
{
    if (atomic_fetch_sub(&k->refs, 1) == 1)
        free(k);
}

static void *closer_main(void *arg)
{
    sock_closer_t *k = arg;
    nng_close(k->sock);
    atomic_store(&k->done, true);
    closer_release(k);
    return NULL;
}

/* Closes sock; true when NNG finished within CLOSE_WAIT_MS (callbacks are over), false when
 * the close was abandoned (logged; the socket's callbacks may still run later). */
static bool close_bounded(nng_socket sock, const char *what)
{
    pthread_t t;
    pthread_attr_t attr;
    bool done;
    sock_closer_t *k = calloc(1, sizeof(*k));

    if (k == NULL) {
        nng_close(sock);
        return true;
    }
    k->sock = sock;
    atomic_init(&k->done, false);
    atomic_init(&k->refs, 2);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, closer_main, k) != 0) {
        pthread_attr_destroy(&attr);
        atomic_fetch_sub(&k->refs, 1);
        closer_main(k); /* no thread: close inline */
        return true;
    }
    pthread_attr_destroy(&attr);
    for (int waited = 0; !atomic_load(&k->done) && waited < CLOSE_WAIT_MS; waited += 5)
        nng_msleep(5);
    done = atomic_load(&k->done);
    closer_release(k);
    if (!done) {
        atomic_store(&reaper_stuck, true);
        cdc_log_warn("closing the %s did not finish within %d ms: NNG's pipe reaper is stuck "
                     "(NNG 1.5.2 bug nanomsg/nng#1636, fixed in 1.6.0); the socket is "
                     "abandoned, new connections still work but closed ones are no longer "
                     "freed in this process (hint: restart it when convenient, or use NNG "
                     "1.6.0 or later)",
                     what, CLOSE_WAIT_MS);
    }
    return done;
}

/* ---- server ------------------------------------------------------------------------ */

typedef struct event_node {
    cdc_msg_event_t ev;
    struct event_node *next;
} event_node_t;

struct cdc_msg_server {
    nng_socket sock;
    int rfd; /* sock's receive descriptor (see wait_recv) */
    nng_listener listener;
    bool listening;
    cdc_msg_options_t opts;
    pthread_mutex_t lock;
    event_node_t *head, *tail;
    size_t queued;
    _Atomic uint64_t garbage;
    bool open;
};

static void server_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    cdc_msg_server_t *s = arg;
    event_node_t *n = malloc(sizeof(*n));
    if (n == NULL) {
        cdc_log_error("out of memory queueing a pipe event for pipe %u", nng_pipe_id(p));
        return;
    }
    n->ev.type = ev == NNG_PIPE_EV_ADD_POST ? CDC_MSG_PIPE_ADDED : CDC_MSG_PIPE_REMOVED;
    n->ev.pipe = nng_pipe_id(p);
    n->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->queued >= (size_t)s->opts.event_queue_size && s->head != NULL) {
        /* keep the newest events; a consumer this far behind re-syncs from removals */
        event_node_t *old = s->head;
        s->head = old->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->queued--;
        cdc_log_warn("pipe event queue full, dropped event for pipe %u", old->ev.pipe);
        free(old);
    }
    if (s->tail != NULL)
        s->tail->next = n;
    else
        s->head = n;
    s->tail = n;
    s->queued++;
    pthread_mutex_unlock(&s->lock);
}

/* cdc_tls_t subscriber: the listener takes the reloaded certificates for new connections. */
static void server_tls_reload(void *arg)
{
    cdc_msg_server_t *s = arg;
    nng_tls_config *cfg = NULL;
    int rv = cdc_tls_nng_config(s->opts.tls, true, true, NULL, &cfg);
    if (rv == 0) {
        rv = nng_listener_set_ptr(s->listener, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg); /* the listener holds its own reference */
    }
    if (rv != 0)
        cdc_log_error("tls: the message listener keeps its previous certificates: %s",
                      nng_strerror(rv));
}

cdc_err_t cdc_msg_server_open(cdc_msg_server_t **out, const char *url,
                              const cdc_msg_options_t *opts, cdc_error_t *e)
{
    int rv;
    nng_tls_config *cfg = NULL;
    cdc_msg_server_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    apply_options(opts, &s->opts);
    if (check_tls(&s->opts, url, e) != CDC_OK) {
        free(s);
        return CDC_ERR_CONFIG;
    }
    if (!cdc_tls_url(url))
        s->opts.tls = NULL; /* plain tcp:// */
    if (s->opts.event_queue_size <= 0)
        s->opts.event_queue_size = 1024;
    pthread_mutex_init(&s->lock, NULL);
    s->rfd = -1;
    if ((rv = nng_pair1_open_poly(&s->sock)) != 0) {
        nng_fail(e, rv, "open message socket for", url);
        goto fail;
    }
    s->open = true;
    if ((rv = set_socket_options(s->sock, &s->opts)) != 0) {
        nng_fail(e, rv, "set options on message socket for", url);
        goto fail;
    }
    /* a deep receive queue: while the server's owner is busy for a few seconds (a commit
     * backlog, a slow scan), clients' sends queue up here instead of timing out and
     * dropping acks and heartbeats (best effort: the default depth is tiny) */
    nng_socket_set_int(s->sock, NNG_OPT_RECVBUF, 8192);
    if ((rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_POST, server_pipe_cb, s)) != 0 ||
        (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, server_pipe_cb, s)) != 0) {
        nng_fail(e, rv, "register pipe notifications for", url);
        goto fail;
    }
    if ((rv = nng_listener_create(&s->listener, s->sock, url)) == 0) {
        s->listening = true;
        if (s->opts.tls != NULL &&
            ((rv = cdc_tls_nng_config(s->opts.tls, true, true, NULL, &cfg)) != 0 ||
             (rv = nng_listener_set_ptr(s->listener, NNG_OPT_TLS_CONFIG, cfg)) != 0)) {
            if (cfg != NULL)
                nng_tls_config_free(cfg);
            nng_fail(e, rv, "set the TLS certificates of", url);
            goto fail;
        }
        if (cfg != NULL)
            nng_tls_config_free(cfg);
        rv = nng_listener_start(s->listener, 0);
    }
    if (rv != 0) {
        nng_fail(e, rv, "listen on", url);
        if (rv == NNG_EADDRINVAL || rv == NNG_EINVAL || rv == NNG_ENOTSUP)
            cdc_error_set(e, CDC_ERR_CONFIG, "invalid listen address \"%s\": %s", url,
                          nng_strerror(rv));
        goto fail;
    }
    if (s->opts.tls != NULL && cdc_tls_subscribe(s->opts.tls, server_tls_reload, s, e) != CDC_OK)
        goto fail;
    *out = s;
    return CDC_OK;
fail:
    cdc_msg_server_close(s);
    return e ? e->code : CDC_ERR_UNAVAILABLE;
}

int cdc_msg_server_port(const cdc_msg_server_t *s)
{
    int port = 0;
    if (s == NULL || nng_listener_get_int(s->listener, NNG_OPT_TCP_BOUND_PORT, &port) != 0)
        return 0;
    return port;
}

cdc_err_t cdc_msg_server_recv(cdc_msg_server_t *s, int timeout_ms, Cdc__Envelope **env,
                              uint32_t *pipe, cdc_error_t *e)
{
    nng_time deadline = timeout_ms < 0 ? 0 : nng_clock() + (nng_time)timeout_ms;
    for (;;) {
        int wait = -1;
        if (timeout_ms >= 0) {
            nng_time now = nng_clock();
            wait = now >= deadline ? 0 : (int)(deadline - now);
        }
        cdc_err_t err = recv_env(s->sock, &s->rfd, wait, env, pipe, e);
        if (err != CDC_ERR_PROTOCOL) {
            if (err == CDC_ERR_TIMEOUT)
                cdc_error_set(e, CDC_ERR_TIMEOUT, "no message from workers within %d ms",
                              timeout_ms);
            return err;
        }
        atomic_fetch_add(&s->garbage, 1);
        if (timeout_ms >= 0 && nng_clock() >= deadline)
            return cdc_error_set(e, CDC_ERR_TIMEOUT, "no valid message from workers within %d ms",
                                 timeout_ms);
    }
}

cdc_err_t cdc_msg_server_send(cdc_msg_server_t *s, uint32_t pipe, const Cdc__Envelope *env,
                              cdc_error_t *e)
{
    if (pipe == 0)
        return cdc_error_set(e, CDC_ERR_INVALID, "server send needs a pipe id");
    return send_env(s->sock, env, pipe, e);
}

void cdc_msg_server_close_pipe(cdc_msg_server_t *s, uint32_t pipe)
{
    (void)s;
    nng_pipe p = NNG_PIPE_INITIALIZER;
    p.id = pipe;
    nng_pipe_close(p);
}

bool cdc_msg_server_poll_event(cdc_msg_server_t *s, cdc_msg_event_t *ev)
{
    bool got = false;
    pthread_mutex_lock(&s->lock);
    event_node_t *n = s->head;
    if (n != NULL) {
        s->head = n->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->queued--;
        *ev = n->ev;
        got = true;
    }
    pthread_mutex_unlock(&s->lock);
    free(n);
    return got;
}

uint64_t cdc_msg_server_garbage_count(const cdc_msg_server_t *s)
{
    return atomic_load(&((cdc_msg_server_t *)s)->garbage);
}

void cdc_msg_server_close(cdc_msg_server_t *s)
{
    if (s == NULL)
        return;
    cdc_tls_unsubscribe(s->opts.tls, server_tls_reload, s);
    /* waits for callbacks in progress; an abandoned socket may still call back: keep s */
    if (s->open && !close_bounded(s->sock, "coordinator message socket"))
        return;
    event_node_t *n = s->head;
    while (n != NULL) {
        event_node_t *next = n->next;
        free(n);
        n = next;
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* ---- client ------------------------------------------------------------------------ */

/*
 * Link state. NNG 1.5.2 reports REM_POST for every pipe that got ADD_PRE, including pipes
 * the pair1 protocol refused (a new connection while the previous pipe is closed but not
 * yet reaped is rejected as "already connected"); a counter of ADD_POST minus REM_POST
 * therefore drifts below the truth and the link could look down forever. We track the
 * one pipe pair1 accepted instead: set on ADD_POST, cleared only by that pipe's REM_POST.
 *
 * A reset closes the socket with close_bounded() and opens a new one; each socket gets
 * its own callback context (link) so that late events of an abandoned socket are ignored.
 * A link (and the client itself) is freed only once NNG is done with its socket.
 */
typedef struct client_link {
    cdc_msg_client_t *c;
    uint64_t gen; /* the client's socket generation this link belongs to */
} client_link_t;

struct cdc_msg_client {
    nng_socket sock;
    int rfd;             /* sock's receive descriptor (see wait_recv) */
    client_link_t *link; /* of sock; NULL = no socket */
    nng_dialer dialer;
    bool dialing;
    pthread_mutex_t dial_lock; /* guards dialer, dialing and host against TLS reloads */
    char host[256];            /* of the dialed URL: the name the server's certificate has */
    cdc_msg_options_t opts;
    pthread_mutex_t lock; /* guards gen, pipe and the counters below */
    uint64_t gen;         /* bumped per socket: events of older sockets are ignored */
    uint32_t pipe;        /* the accepted pipe, 0 = none */
    uint64_t pipes_added, pipes_refused, stuck_closes;
    char url[512];
};

static void client_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    client_link_t *l = arg;
    cdc_msg_client_t *c = l->c;
    uint32_t id = nng_pipe_id(p);
    bool refused = false;

    pthread_mutex_lock(&c->lock);
    if (l->gen != c->gen) {
        pthread_mutex_unlock(&c->lock);
        return; /* a socket we already replaced */
    }
    if (ev == NNG_PIPE_EV_ADD_POST) {
        c->pipe = id;
        c->pipes_added++;
    } else if (c->pipe == id) {
        c->pipe = 0;
    } else {
        refused = true; /* removed without having been the accepted pipe */
        c->pipes_refused++;
    }
    pthread_mutex_unlock(&c->lock);
    if (ev == NNG_PIPE_EV_ADD_POST)
        cdc_log_debug("connected to \"%s\" on pipe %u", c->url, id);
    else if (refused)
        cdc_log_debug("connection to \"%s\" on pipe %u was refused by the socket", c->url, id);
    else
        cdc_log_debug("lost connection to \"%s\" on pipe %u", c->url, id);
}

/* Sets the current certificates on c->dialer (c->dial_lock held). */
static int client_set_tls(cdc_msg_client_t *c)
{
    nng_tls_config *cfg = NULL;
    const char *name = cdc_tls_server_name(c->opts.tls);
    int rv = cdc_tls_nng_config(c->opts.tls, false, true, name ? name : c->host, &cfg);
    if (rv == 0) {
        rv = nng_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg); /* the dialer holds its own reference */
    }
    return rv;
}

/* cdc_tls_t subscriber: the dialer takes the reloaded certificates for its next dial. */
static void client_tls_reload(void *arg)
{
    cdc_msg_client_t *c = arg;
    int rv = 0;
    pthread_mutex_lock(&c->dial_lock);
    if (c->dialing && cdc_tls_url(c->url))
        rv = client_set_tls(c);
    pthread_mutex_unlock(&c->dial_lock);
    if (rv != 0)
        cdc_log_error("tls: the dialer of \"%s\" keeps its previous certificates: %s", c->url,
                      nng_strerror(rv));
}

static cdc_err_t client_dial(cdc_msg_client_t *c, const char *url, cdc_error_t *e)
{
    int rv;
    if (check_tls(&c->opts, url, e) != CDC_OK)
        return CDC_ERR_CONFIG;
    pthread_mutex_lock(&c->dial_lock);
    snprintf(c->url, sizeof(c->url), "%s", url);
    url_host(url, c->host, sizeof(c->host));
    if ((rv = nng_dialer_create(&c->dialer, c->sock, url)) != 0) {
        pthread_mutex_unlock(&c->dial_lock);
        if (rv == NNG_EADDRINVAL || rv == NNG_EINVAL || rv == NNG_ENOTSUP)
            return cdc_error_set(e, CDC_ERR_CONFIG, "invalid coordinator address \"%s\": %s", url,
                                 nng_strerror(rv));
        return nng_fail(e, rv, "create dialer for", url);
    }
    nng_dialer_set_ms(c->dialer, NNG_OPT_RECONNMINT, c->opts.reconnect_min_ms);
    nng_dialer_set_ms(c->dialer, NNG_OPT_RECONNMAXT, c->opts.reconnect_max_ms);
    if (cdc_tls_url(url) && (rv = client_set_tls(c)) != 0) {
        nng_dialer_close(c->dialer);
        pthread_mutex_unlock(&c->dial_lock);
        return nng_fail(e, rv, "set the TLS certificates of", url);
    }
    /* non-blocking: a server that is not up yet is retried in the background */
    if ((rv = nng_dialer_start(c->dialer, NNG_FLAG_NONBLOCK)) != 0) {
        nng_dialer_close(c->dialer);
        pthread_mutex_unlock(&c->dial_lock);
        return nng_fail(e, rv, "dial", url);
    }
    c->dialing = true;
    pthread_mutex_unlock(&c->dial_lock);
    return CDC_OK;
}

/* Opens c->sock with the options and pipe notifications (no dialer yet). */
static cdc_err_t client_socket_open(cdc_msg_client_t *c, const char *url, cdc_error_t *e)
{
    int rv;
    client_link_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    c->rfd = -1;
    if ((rv = nng_pair1_open(&c->sock)) != 0) {
        free(l);
        return nng_fail(e, rv, "open message socket for", url);
    }
    pthread_mutex_lock(&c->lock);
    l->gen = ++c->gen;
    c->pipe = 0;
    pthread_mutex_unlock(&c->lock);
    l->c = c;
    c->link = l;
    if ((rv = set_socket_options(c->sock, &c->opts)) != 0 ||
        (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, client_pipe_cb, l)) != 0 ||
        (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, client_pipe_cb, l)) != 0)
        return nng_fail(e, rv, "set up message socket for", url);
    return CDC_OK;
}

/* Closes c->sock (if any; bounded, see close_bounded()). Afterwards c has no socket. */
static void client_socket_close(cdc_msg_client_t *c)
{
    client_link_t *l = c->link;

    if (l == NULL)
        return;
    c->link = NULL;
    pthread_mutex_lock(&c->dial_lock);
    c->dialing = false;
    pthread_mutex_unlock(&c->dial_lock);
    pthread_mutex_lock(&c->lock);
    c->gen++; /* from now on events of the old socket are ignored */
    c->pipe = 0;
    pthread_mutex_unlock(&c->lock);
    if (close_bounded(c->sock, "connection to the coordinator")) {
        free(l);
    } else {
        pthread_mutex_lock(&c->lock);
        c->stuck_closes++; /* l stays with the abandoned socket */
        pthread_mutex_unlock(&c->lock);
    }
}

cdc_err_t cdc_msg_client_open(cdc_msg_client_t **out, const char *url,
                              const cdc_msg_options_t *opts, cdc_error_t *e)
{
    cdc_err_t err;
    cdc_msg_client_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    apply_options(opts, &c->opts);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->dial_lock, NULL);
    snprintf(c->url, sizeof(c->url), "%s", url);
    if ((err = client_socket_open(c, url, e)) != CDC_OK ||
        (err = client_dial(c, url, e)) != CDC_OK ||
        (c->opts.tls != NULL &&
         (err = cdc_tls_subscribe(c->opts.tls, client_tls_reload, c, e)) != CDC_OK)) {
        cdc_msg_client_close(c);
        return err;
    }
    *out = c;
    return CDC_OK;
}

cdc_err_t cdc_msg_client_redial(cdc_msg_client_t *c, const char *url, cdc_error_t *e)
{
    if (c->link == NULL)
        return cdc_error_set(e, CDC_ERR_CLOSED, "coordinator \"%s\": message socket is closed",
                             c->url);
    if (c->dialing) {
        pthread_mutex_lock(&c->dial_lock);
        nng_dialer_close(c->dialer); /* also closes its pipe */
        c->dialing = false;
        pthread_mutex_unlock(&c->dial_lock);
        /* the pipe's removal is reported asynchronously: wait for it (bounded) so that
         * "connected" afterwards means connected to the new url */
        for (int waited = 0; cdc_msg_client_connected(c) && waited < 1000; waited += 5)
            nng_msleep(5);
    }
    return client_dial(c, url, e);
}

cdc_err_t cdc_msg_client_reset(cdc_msg_client_t *c, const char *url, cdc_error_t *e)
{
    cdc_err_t err;
    client_socket_close(c);
    if ((err = client_socket_open(c, url, e)) != CDC_OK) {
        client_socket_close(c);
        return err;
    }
    return client_dial(c, url, e);
}

bool cdc_msg_client_connected(const cdc_msg_client_t *c)
{
    cdc_msg_client_t *m = (cdc_msg_client_t *)c;
    pthread_mutex_lock(&m->lock);
    bool up = m->pipe != 0;
    pthread_mutex_unlock(&m->lock);
    return up;
}

void cdc_msg_client_stats(const cdc_msg_client_t *c, cdc_msg_client_stats_t *st)
{
    cdc_msg_client_t *m = (cdc_msg_client_t *)c;
    pthread_mutex_lock(&m->lock);
    st->pipe = m->pipe;
    st->pipes_added = m->pipes_added;
    st->pipes_refused = m->pipes_refused;
    st->stuck_closes = m->stuck_closes;
    pthread_mutex_unlock(&m->lock);
}

cdc_err_t cdc_msg_client_send(cdc_msg_client_t *c, const Cdc__Envelope *env, cdc_error_t *e)
{
    if (c->link == NULL)
        return cdc_error_set(e, CDC_ERR_CLOSED, "coordinator \"%s\": message socket is closed",
                             c->url);
    cdc_err_t err = send_env(c->sock, env, 0, e);
    if (err != CDC_OK)
        cdc_error_prefix(e, "coordinator \"%s\"", c->url);
    return err;
}

cdc_err_t cdc_msg_client_recv(cdc_msg_client_t *c, int timeout_ms, Cdc__Envelope **env,
                              cdc_error_t *e)
{
    uint32_t pipe = 0;
    if (c->link == NULL)
        return cdc_error_set(e, CDC_ERR_CLOSED, "coordinator \"%s\": message socket is closed",
                             c->url);
    return recv_env(c->sock, &c->rfd, timeout_ms, env, &pipe, e);
}

void cdc_msg_client_close(cdc_msg_client_t *c)
{
    if (c == NULL)
        return;
    cdc_tls_unsubscribe(c->opts.tls, client_tls_reload, c);
    client_socket_close(c);
    if (c->stuck_closes > 0)
        return; /* an abandoned socket may still call back into c: keep it */
    pthread_mutex_destroy(&c->dial_lock);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void cdc_msg_shutdown(void)
{
    if (atomic_load(&reaper_stuck)) {
        cdc_log_warn("skipping NNG's shutdown: its pipe reaper is stuck (see earlier warning)");
        return;
    }
    nng_fini();
}
