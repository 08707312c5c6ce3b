/*
 * Coordinator <-> worker messaging: NNG pair1 sockets carrying one protobuf-c
 * Cdc__Envelope (proto/cdc.proto) per NNG message, no other framing. The coordinator
 * runs a server that listens in polyamorous mode, so it can address each worker's pipe;
 * a worker runs a client that dials the leader's URL and lets NNG reconnect with
 * backoff (redial when the leader changes). The server reports pipe add/remove events
 * through a queue its loop polls: a removed pipe means a lost worker.
 *
 * Bad input: a frame that does not unpack as an Envelope, or whose body is empty, is a
 * protocol violation; the server closes that pipe, logs a line and keeps serving the
 * others. The client drops its pipe (NNG redials) and reports CDC_ERR_PROTOCOL.
 *
 * Ownership: received envelopes are owned by the caller and freed with cdc_msg_free().
 * Envelopes passed to send functions stay owned by the caller (they are packed into
 * an NNG message that NNG frees).
 *
 * Threads: a server or client may be used by one receiving thread and one sending
 * thread at the same time (NNG sockets are thread-safe); open/close are not concurrent
 * with anything else on the same object.
 */
#ifndef CDC_MSG_H
#define CDC_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/tls.h"
#include "proto/cdc.pb-c.h"

typedef struct cdc_msg_options {
    int send_timeout_ms;   /* 0 = default 1000 */
    size_t recv_max_bytes; /* 0 = default 64 MiB; larger frames drop the pipe (NNG) */
    int reconnect_min_ms;  /* client: 0 = default 100 */
    int reconnect_max_ms;  /* client: 0 = default 2000 */
    int event_queue_size;  /* server: 0 = default 1024 pipe events */
    /* certificates of tls+tcp:// URLs (common/tls.h), required with them, borrowed: it must
     * outlive the server or client. Mutual TLS: the listener requires a client certificate
     * of the CA, the dialer verifies the server's certificate and its name (the URL's
     * host). New connections use the certificates of the latest reload. */
    cdc_tls_t *tls;
} cdc_msg_options_t;

/* ---- encode/decode (no sockets) ------------------------------------------------ */

/* Packs env into a malloc()ed buffer owned by the caller (free()). CDC_ERR_INVALID when
 * env has no body. */
cdc_err_t cdc_msg_encode(const Cdc__Envelope *env, uint8_t **buf, size_t *len, cdc_error_t *e);

/* Unpacks a frame. CDC_ERR_PROTOCOL when it is not an Envelope or has no body. On
 * success *out is owned by the caller (cdc_msg_free()). */
cdc_err_t cdc_msg_decode(const uint8_t *buf, size_t len, Cdc__Envelope **out, cdc_error_t *e);

/* Frees a received/decoded envelope (cdc__envelope__free_unpacked); NULL is a no-op. */
void cdc_msg_free(Cdc__Envelope *env);

/* Name of an envelope body case, e.g. "barrier"; "none" for an empty body. */
const char *cdc_msg_body_name(const Cdc__Envelope *env);

/* ---- server (coordinator side) --------------------------------------------------- */

typedef struct cdc_msg_server cdc_msg_server_t;

typedef enum cdc_msg_event_type {
    CDC_MSG_PIPE_ADDED = 1,
    CDC_MSG_PIPE_REMOVED = 2,
} cdc_msg_event_type_t;

typedef struct cdc_msg_event {
    cdc_msg_event_type_t type;
    uint32_t pipe;
} cdc_msg_event_t;

/*
 * Opens a pair1 polyamorous socket and listens on url ("tcp://127.0.0.1:0" picks a free
 * port, see cdc_msg_server_port(); "tls+tcp://..." with opts->tls). opts may be NULL.
 * CDC_ERR_UNAVAILABLE when the address cannot be bound. On success *out is owned by the caller.
 */
cdc_err_t cdc_msg_server_open(cdc_msg_server_t **out, const char *url,
                              const cdc_msg_options_t *opts, cdc_error_t *e);

/* Bound TCP port of the listener (0 when not TCP). */
int cdc_msg_server_port(const cdc_msg_server_t *s);

/*
 * Waits up to timeout_ms (< 0 = forever) for a valid envelope; garbage frames are
 * handled inside (pipe dropped, logged) and waiting continues. On CDC_OK *env is owned
 * by the caller and *pipe is the sender's pipe id. CDC_ERR_TIMEOUT when nothing came,
 * CDC_ERR_CLOSED after close.
 */
cdc_err_t cdc_msg_server_recv(cdc_msg_server_t *s, int timeout_ms, Cdc__Envelope **env,
                              uint32_t *pipe, cdc_error_t *e);

/* Sends env to one pipe. CDC_ERR_TIMEOUT when the pipe's queue stays full past the send
 * timeout. A pipe that is gone drops the message silently (its removal event tells). */
cdc_err_t cdc_msg_server_send(cdc_msg_server_t *s, uint32_t pipe, const Cdc__Envelope *env,
                              cdc_error_t *e);

/* Closes one pipe (e.g. a rejected or dead worker); its REMOVED event follows. */
void cdc_msg_server_close_pipe(cdc_msg_server_t *s, uint32_t pipe);

/* Pops the oldest pipe event; false when the queue is empty. Never blocks. */
bool cdc_msg_server_poll_event(cdc_msg_server_t *s, cdc_msg_event_t *ev);

/* Number of frames dropped as garbage so far (tests, metrics). */
uint64_t cdc_msg_server_garbage_count(const cdc_msg_server_t *s);

/* Closes the socket and frees the server; NULL is a no-op. Waits at most 2 s for NNG
 * (NNG 1.5.2 can fail to close a socket, see msg.c; the server is then left allocated). */
void cdc_msg_server_close(cdc_msg_server_t *s);

/*
 * Releases NNG's global state (nng_fini) at process exit, after every socket and NNG HTTP
 * server is closed. Messages handed to NNG for a peer that went away are freed by it
 * asynchronously; without this, exit races those frees and leak checkers (make asan)
 * report them. Nothing NNG-based may be used afterwards. Skipped (with a warning) when a
 * socket could not be closed: nng_fini() would wait forever for NNG's stuck reaper.
 */
void cdc_msg_shutdown(void);

/* ---- client (worker side) -------------------------------------------------------- */

typedef struct cdc_msg_client cdc_msg_client_t;

/*
 * Opens a pair1 socket and dials url in the background (NNG keeps redialling with
 * backoff between reconnect_min_ms and reconnect_max_ms); returns at once even when the
 * server is not up yet. opts may be NULL. On success *out is owned by the caller.
 */
cdc_err_t cdc_msg_client_open(cdc_msg_client_t **out, const char *url,
                              const cdc_msg_options_t *opts, cdc_error_t *e);

/* Closes the current dialer and dials a new url (leader changed). */
cdc_err_t cdc_msg_client_redial(cdc_msg_client_t *c, const char *url, cdc_error_t *e);

/*
 * Closes the whole socket (its pipes, dialer and any message queued in it) and dials url
 * from a new one: nothing of the old link survives. Not concurrent with send/recv on c.
 * On failure c stays usable for another reset (sends and receives fail meanwhile). The
 * old socket is closed on a helper thread; a close that does not finish within 2 s (NNG
 * 1.5.2 bug, see msg.c) is abandoned with a warning, and the new socket works anyway.
 */
cdc_err_t cdc_msg_client_reset(cdc_msg_client_t *c, const char *url, cdc_error_t *e);

/* Whether a pipe to the server is currently up (a pipe the socket accepted and that was
 * not removed since). */
bool cdc_msg_client_connected(const cdc_msg_client_t *c);

/* Link diagnostics (log lines, tests). */
typedef struct cdc_msg_client_stats {
    uint32_t pipe;          /* the current pipe, 0 = none */
    uint64_t pipes_added;   /* pipes accepted so far, over all sockets */
    uint64_t pipes_refused; /* connections the socket refused (NNG reports them removed) */
    uint64_t stuck_closes;  /* sockets whose close did not finish and were abandoned */
} cdc_msg_client_stats_t;

void cdc_msg_client_stats(const cdc_msg_client_t *c, cdc_msg_client_stats_t *st);

/* Sends env; CDC_ERR_TIMEOUT when no connection took it within the send timeout. */
cdc_err_t cdc_msg_client_send(cdc_msg_client_t *c, const Cdc__Envelope *env, cdc_error_t *e);

/* Waits up to timeout_ms (< 0 = forever). On CDC_OK *env is owned by the caller.
 * CDC_ERR_TIMEOUT when nothing came; CDC_ERR_PROTOCOL on a garbage frame (the pipe is
 * dropped and NNG redials). */
cdc_err_t cdc_msg_client_recv(cdc_msg_client_t *c, int timeout_ms, Cdc__Envelope **env,
                              cdc_error_t *e);

/* Closes the socket and frees the client; NULL is a no-op. Waits at most 2 s for NNG to
 * close the socket (then the client's memory is left to the abandoned socket). */
void cdc_msg_client_close(cdc_msg_client_t *c);

#endif
