/*
 * Admin HTTP endpoint of every process, built on NNG's HTTP server. It serves
 * /healthz (200 "ok", or 503 from a health callback: common/health.h), /readyz (200 or
 * 503 from a ready callback), /metrics (the Prometheus text of a metrics registry) and GET
 * handlers that the process registers, such as the coordinator's /status (JSON), and POST
 * handlers, actions such as the coordinator's /compact. Unknown paths get 404, other
 * methods on known paths 405. With bearer tokens set, a POST (and, unless reads are left
 * open, /metrics and the GET handlers) answers 401 to a request without
 * "Authorization: Bearer <token>"; /healthz and /readyz stay open for probes; every POST is
 * audited (docs/security.md).
 *
 * Threads: GET handlers and the ready callback run on NNG's worker threads, possibly
 * concurrently; they must be thread-safe and should not block for long. A POST handler
 * runs on a thread of its own (at most 4 at once, more get 503) and may block while its
 * action runs; cdc_http_server_close() waits for it, so its owner must bound it.
 */
#ifndef CDC_HTTP_H
#define CDC_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "common/metrics.h"
#include "common/tls.h"

typedef struct cdc_http_server cdc_http_server_t;

/*
 * What a handler fills. The server pre-sets status 200 and content type
 * "text/plain; charset=utf-8". `body` must be a malloc()ed buffer (or NULL for an
 * empty body); the server takes ownership and frees it after sending.
 */
typedef struct cdc_http_response {
    int status;
    char content_type[96];
    char *body;
    size_t body_len;
    /* Content-Security-Policy header of a page (a static string, not freed; NULL = none):
     * what the browser may load and where the page may connect */
    const char *security_policy;
} cdc_http_response_t;

/*
 * A GET or POST handler. `path` is the request path without the query string, `query` the
 * part after '?' ("" when none). Both are valid only during the call.
 */
typedef void (*cdc_http_handler_fn)(void *arg, const char *path, const char *query,
                                    cdc_http_response_t *resp);

/*
 * Returns whether the process is ready (or, for /healthz, healthy); on false, `reason`
 * (size bytes) may say why: the answer is 503 "not ready: <reason>" ("unhealthy: ...").
 */
typedef bool (*cdc_http_ready_fn)(void *arg, char *reason, size_t size);

/*
 * Creates a server bound to `addr` ("host:port", port 0 = any free port; only the given
 * host) serving /healthz, /readyz and /metrics from `metrics` (NULL = the default
 * registry). Not yet listening: register handlers, then cdc_http_server_start().
 * On success *out is owned by the caller (cdc_http_server_close()).
 */
cdc_err_t cdc_http_server_open(cdc_http_server_t **out, const char *addr, cdc_metrics_t *metrics,
                               cdc_error_t *e);

/* Sets the /readyz callback (default: always ready). Call before start. */
void cdc_http_server_set_ready(cdc_http_server_t *s, cdc_http_ready_fn fn, void *arg);

/*
 * Sets the /healthz callback (default: always healthy, "ok" while the process answers;
 * cdc_health_check() with a cdc_health_t is the usual one). Call before start.
 */
void cdc_http_server_set_health(cdc_http_server_t *s, cdc_http_ready_fn fn, void *arg);

/* A named bearer token: the name goes into the audit lines. */
typedef struct cdc_http_token {
    char *name;
    char *token;
} cdc_http_token_t;

/*
 * Parses --http-token's value: one token a line, either "name:token" or a bare token,
 * which is named "admin"; blank lines and trailing blanks are ignored. CDC_ERR_CONFIG (the
 * line's number, never its text) for a line with a colon whose name is not 1 to 64 of
 * [A-Za-z0-9._@-] or whose token is empty. NULL or "" gives none. Free with
 * cdc_http_tokens_free().
 */
cdc_err_t cdc_http_tokens_parse(const char *text, cdc_http_token_t **out, size_t *n,
                                cdc_error_t *e);
void cdc_http_tokens_free(cdc_http_token_t *t, size_t n);

/* "Authorization: Bearer <token>" of the first token of an --http-token value (a client's:
 * cdcctl, a standby forwarding /status) into out (size bytes). False, out "", when the value
 * holds no token or the header does not fit. */
bool cdc_http_auth_header(const char *tokens, char *out, size_t size);

/*
 * Requires "Authorization: Bearer <token>", with one of the tokens of `token` (parsed by
 * cdc_http_tokens_parse; NULL or "" = no token, the default), on every POST and, unless
 * cdc_http_server_set_token_reads(s, false), on /metrics and the GET handlers too;
 * /healthz and /readyz stay open. The comparison takes the same time wherever a wrong
 * token differs. Refusals are counted in cdc_http_unauthorized_total of the server's
 * registry. Every POST, refused or not, is logged as one audit line ("audit: who=<token
 * name> method= path= params= status=", docs/security.md) and counted in
 * cdc_http_audited_requests_total. Call before start.
 */
cdc_err_t cdc_http_server_set_token(cdc_http_server_t *s, const char *token, cdc_error_t *e);

/* Whether GET routes other than the probes need the token too (default true). Call before
 * start. */
void cdc_http_server_set_token_reads(cdc_http_server_t *s, bool on);

/*
 * Serves https:// with the certificates of tls (borrowed: it must outlive the server;
 * reloads reach new connections, common/tls.h). mutual: a client must present a
 * certificate that chains to the CA of tls, or the handshake fails. Call before start.
 */
cdc_err_t cdc_http_server_set_tls(cdc_http_server_t *s, cdc_tls_t *tls, bool mutual,
                                  cdc_error_t *e);

/* Registers a GET handler for an exact path (e.g. "/status"). Call before start. */
cdc_err_t cdc_http_server_add(cdc_http_server_t *s, const char *path, cdc_http_handler_fn fn,
                              void *arg, cdc_error_t *e);

/*
 * Registers a POST handler for an exact path (e.g. "/compact"; the request body is not
 * read: arguments come in the query). It runs on a thread of its own and may block, see
 * above. A path may have a GET and a POST handler. Call before start.
 */
cdc_err_t cdc_http_server_add_post(cdc_http_server_t *s, const char *path, cdc_http_handler_fn fn,
                                   void *arg, cdc_error_t *e);

/*
 * The value of parameter name in query ("a=1&b=x%2Ey": b is "x.y", percent-decoded; '+'
 * is a space) into out (size bytes, NUL-terminated). False when the parameter is absent
 * or its value does not fit.
 */
bool cdc_http_query_param(const char *query, const char *name, char *out, size_t size);

/*
 * A JSON document its owner rebuilds (e.g. /status, on the owner's main thread) and the
 * server's threads serve as is: cdc_http_doc_set() swaps it under the lock.
 */
typedef struct cdc_http_doc {
    pthread_mutex_t lock;
    char *json; /* NULL = not yet published: served as {} */
} cdc_http_doc_t;

void cdc_http_doc_init(cdc_http_doc_t *d);
/* Publishes json (malloc'ed, taken; NULL is ignored). */
void cdc_http_doc_set(cdc_http_doc_t *d, char *json);
void cdc_http_doc_free(cdc_http_doc_t *d);
/* Fills resp with a copy of d's document (application/json): for handlers that serve a
 * document in some cases and something else in others. */
void cdc_http_doc_respond(cdc_http_doc_t *d, cdc_http_response_t *resp);
/* Serves d as application/json at path (GET). Call before start. */
cdc_err_t cdc_http_server_add_doc(cdc_http_server_t *s, const char *path, cdc_http_doc_t *d,
                                  cdc_error_t *e);

/* Starts listening. CDC_ERR_UNAVAILABLE when the address cannot be bound. */
cdc_err_t cdc_http_server_start(cdc_http_server_t *s, cdc_error_t *e);

/* The bound TCP port (useful with port 0); 0 when not started. */
int cdc_http_server_port(const cdc_http_server_t *s);

/* Stops and frees the server; NULL is a no-op. Waits for running handlers. */
void cdc_http_server_close(cdc_http_server_t *s);

#endif
