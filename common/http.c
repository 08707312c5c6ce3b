/*
 * Admin HTTP endpoint on NNG's HTTP server (see http.h). Every route is an NNG handler
 * restricted to its method (GET, or POST for cdc_http_server_add_post), so NNG itself
 * answers 404 for unknown paths and 405 for other methods; the bearer token is checked in
 * the one handler function before a route runs. A POST handler may block for long (it runs
 * an action and waits for it), so it runs on a thread of its own, never on one of NNG's few
 * shared task threads, which also carry the process's other sockets. NNG shares
 * one server object per host:port, so "port 0" is resolved to a concrete free port before the
 * server is created; otherwise two endpoints in one process would silently share a server.
 */
#include "common/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/tls/tls.h>

#include "common/crypto.h"
#include "common/hex.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/buf.h"

#define MAX_ROUTES 32
/* POST handlers running at once; more are answered 503 */
#define MAX_ACTIONS 4

typedef enum route_kind { ROUTE_HEALTH, ROUTE_READY, ROUTE_METRICS, ROUTE_CUSTOM } route_kind_t;

typedef struct route {
    cdc_http_server_t *server;
    route_kind_t kind;
    const char *method; /* "GET" or "POST" (a POST runs on a thread of its own) */
    char path[128];
    cdc_http_handler_fn fn;
    void *arg;
} route_t;

struct cdc_http_server {
    char host[256];
    int port;
    bool started;
    nng_http_server *http;
    cdc_metrics_t *metrics;
    cdc_http_ready_fn ready_fn;
    void *ready_arg;
    cdc_http_ready_fn health_fn;
    void *health_arg;
    route_t routes[MAX_ROUTES];
    size_t nroutes;
    cdc_http_token_t *tokens; /* named bearer tokens (cdc_http_server_set_token); NULL = none */
    size_t ntokens;
    bool token_reads;       /* GET routes but the probes need a token too (default) */
    cdc_counter_t *refused; /* requests answered 401 */
    cdc_counter_t *audited; /* mutating requests audited, by outcome */
    pthread_mutex_t lock;   /* guards actions */
    pthread_cond_t idle;    /* actions dropped to 0 */
    int actions;            /* POST handlers running on their threads */
    cdc_tls_t *tls;         /* https with these certificates; NULL = plain http (borrowed) */
    bool tls_mutual;        /* clients must present a certificate of the CA */
};

/* Binds an ephemeral loopback/host port, reads it back and releases it. */
static int pick_free_port(const char *host)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int port = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = 0;
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* NNG knows reason phrases only for some codes and sends nothing for the others. */
static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
    }
}

static void respond(nng_aio *aio, int status, const char *content_type, const char *policy,
                    const char *body, size_t len)
{
    nng_http_res *res = NULL;
    int rv;
    if ((rv = nng_http_res_alloc(&res)) != 0) {
        nng_aio_finish(aio, rv);
        return;
    }
    if (status == 401 &&
        (rv = nng_http_res_set_header(res, "WWW-Authenticate", "Bearer realm=\"cdc\"")) != 0) {
        nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    if ((rv = nng_http_res_set_status(res, (uint16_t)status)) != 0 ||
        (rv = nng_http_res_set_reason(res, reason_phrase(status))) != 0 ||
        (rv = nng_http_res_set_header(res, "Content-Type", content_type)) != 0 ||
        (policy != NULL &&
         (rv = nng_http_res_set_header(res, "Content-Security-Policy", policy)) != 0) ||
        (len > 0 && (rv = nng_http_res_copy_data(res, body, len)) != 0) ||
        (len == 0 && (rv = nng_http_res_set_header(res, "Content-Length", "0")) != 0)) {
        /* NNG cannot copy an empty body (it fails allocating 0 bytes) and then sends no
         * Content-Length, so an empty body is announced by hand */
        nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

/* /healthz and /readyz: 200 "<good>", or 503 "<bad>: <reason>" from fn (NULL = good). */
static void probe(nng_aio *aio, cdc_http_ready_fn fn, void *arg, const char *good, const char *bad)
{
    char reason[256] = "";
    char body[300];
    bool ok = fn == NULL || fn(arg, reason, sizeof(reason));
    int n =
        snprintf(body, sizeof(body), "%s%s%s\n", ok ? good : bad, reason[0] ? ": " : "", reason);
    respond(aio, ok ? 200 : 503, "text/plain; charset=utf-8", NULL, body,
            n > 0 && (size_t)n < sizeof(body) ? (size_t)n : strlen(body));
}

/* The name of the token req carries (RFC 6750: the scheme is case-blind), NULL when it
 * carries none of the server's. Every token is compared, so the time does not tell which
 * matched. */
static const char *token_name(const cdc_http_server_t *s, nng_http_req *req)
{
    const char *h = nng_http_req_get_header(req, "Authorization");
    const char *who = NULL;

    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    for (size_t i = 0; i < s->ntokens; i++) {
        if (cdc_crypto_secret_equal(h, strlen(h), s->tokens[i].token, strlen(s->tokens[i].token)) &&
            who == NULL)
            who = s->tokens[i].name;
    }
    return who;
}

/* Copies v into out (size > 1) for an audit line: printable ASCII but '"' and '\\', others
 * as '?', cut at size - 1. */
static void audit_value(char *out, size_t size, const char *v)
{
    size_t n = 0;
    for (; v != NULL && *v != '\0' && n + 1 < size; v++)
        out[n++] = (*v >= 0x20 && *v < 0x7f && *v != '"' && *v != '\\') ? *v : '?';
    out[n] = '\0';
}

/* The audit line of a mutating request (docs/security.md, "Audit trail"): who (the
 * token's name; "-" without a valid one, "insecure" on a server without tokens), what
 * (method, path, parameters) and the outcome (the status sent). */
static void audit(const cdc_http_server_t *s, const char *who, const char *method, const char *uri,
                  int status)
{
    const char *q = uri ? strchr(uri, '?') : NULL;
    char path[256], params[512];
    size_t plen = uri ? (q ? (size_t)(q - uri) : strlen(uri)) : 0;
    char pbuf[256];

    if (plen >= sizeof(pbuf))
        plen = sizeof(pbuf) - 1;
    if (plen > 0)
        memcpy(pbuf, uri, plen);
    pbuf[plen] = '\0';
    audit_value(path, sizeof(path), pbuf);
    audit_value(params, sizeof(params), q ? q + 1 : "");
    cdc_log(status < 400 ? CDC_LOG_INFO : CDC_LOG_WARN,
            "audit: who=\"%s\" method=%s path=\"%s\" params=\"%s\" status=%d", who ? who : "-",
            method, path, params, status);
    cdc_metrics_counter_inc(s->audited);
}

/* Runs a registered handler on the request for uri and answers; returns the status sent. */
static int run_route(nng_aio *aio, const route_t *r, const char *uri)
{
    const char *q = strchr(uri, '?');
    char path[512];
    size_t plen = q ? (size_t)(q - uri) : strlen(uri);
    if (plen >= sizeof(path))
        plen = sizeof(path) - 1;
    memcpy(path, uri, plen);
    path[plen] = '\0';

    cdc_http_response_t resp = {.status = 200};
    snprintf(resp.content_type, sizeof(resp.content_type), "text/plain; charset=utf-8");
    r->fn(r->arg, path, q ? q + 1 : "", &resp);
    if (resp.status < 100 || resp.status > 599)
        resp.status = 500;
    respond(aio, resp.status, resp.content_type, resp.security_policy, resp.body,
            resp.body ? resp.body_len : 0);
    free(resp.body);
    return resp.status;
}

/* A POST being handled on its own thread: the request's aio stays open until it answers. */
typedef struct action {
    nng_aio *aio;
    const route_t *route;
    char *uri;
    const char *who; /* the token's name (audit) */
} action_t;

static void *action_thread(void *arg)
{
    action_t *a = arg;
    cdc_http_server_t *s = a->route->server;

    int status = run_route(a->aio, a->route, a->uri);
    audit(s, a->who, a->route->method, a->uri, status);
    free(a->uri);
    free(a);
    pthread_mutex_lock(&s->lock);
    if (--s->actions == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Hands a POST to a detached thread of its own; 503 when MAX_ACTIONS already run. */
static void start_action(nng_aio *aio, const route_t *r, const char *uri, const char *who)
{
    cdc_http_server_t *s = r->server;
    action_t *a = calloc(1, sizeof(*a));
    pthread_attr_t attr;
    pthread_t t;
    bool started = false;

    if (a == NULL || (a->uri = strdup(uri)) == NULL) {
        free(a);
        respond(aio, 500, "text/plain; charset=utf-8", NULL, "out of memory\n", 14);
        return;
    }
    a->aio = aio;
    a->route = r;
    a->who = who;
    pthread_mutex_lock(&s->lock);
    if (s->actions < MAX_ACTIONS && pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&t, &attr, action_thread, a) == 0;
        pthread_attr_destroy(&attr);
        if (started)
            s->actions++;
    }
    pthread_mutex_unlock(&s->lock);
    if (!started) {
        static const char body[] = "busy: too many requests of this kind run; retry later\n";
        free(a->uri);
        free(a);
        audit(s, who, r->method, uri, 503); /* uri is req's: before the answer */
        respond(aio, 503, "text/plain; charset=utf-8", NULL, body, sizeof(body) - 1);
    }
}

static void handle(nng_aio *aio)
{
    nng_http_req *req = nng_aio_get_input(aio, 0);
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    route_t *r = nng_http_handler_get_data(h);
    cdc_http_server_t *s = r->server;

    bool mutating = strcmp(r->method, "GET") != 0;
    const char *who = s->ntokens == 0 ? "insecure" : token_name(s, req);

    /* probes carry no credentials: health and readiness stay open; other reads need the
     * token only with token_reads; an action always does */
    if (who == NULL && r->kind != ROUTE_HEALTH && r->kind != ROUTE_READY &&
        (mutating || s->token_reads)) {
        cdc_metrics_counter_inc(s->refused);
        static const char body[] = "unauthorized: a bearer token is required\n";
        /* before the answer, which releases req */
        if (mutating)
            audit(s, NULL, r->method, nng_http_req_get_uri(req), 401);
        respond(aio, 401, "text/plain; charset=utf-8", NULL, body, sizeof(body) - 1);
        return;
    }
    switch (r->kind) {
    case ROUTE_HEALTH:
        probe(aio, s->health_fn, s->health_arg, "ok", "unhealthy");
        return;
    case ROUTE_READY:
        probe(aio, s->ready_fn, s->ready_arg, "ready", "not ready");
        return;
    case ROUTE_METRICS: {
        size_t len = 0;
        char *text = cdc_metrics_render(s->metrics, &len);
        if (text == NULL) {
            respond(aio, 500, "text/plain; charset=utf-8", NULL, "out of memory\n", 14);
            return;
        }
        respond(aio, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, text, len);
        free(text);
        return;
    }
    case ROUTE_CUSTOM:
        break;
    }
    if (mutating)
        start_action(aio, r, nng_http_req_get_uri(req), who);
    else
        run_route(aio, r, nng_http_req_get_uri(req));
}

static cdc_err_t add_route(cdc_http_server_t *s, route_kind_t kind, const char *method,
                           const char *path, cdc_http_handler_fn fn, void *arg, cdc_error_t *e)
{
    if (s->started)
        return cdc_error_set(e, CDC_ERR_INVALID, "cannot add \"%s\": http server already started",
                             path);
    if (path == NULL || path[0] != '/' || strlen(path) >= sizeof(s->routes[0].path))
        return cdc_error_set(e, CDC_ERR_INVALID, "invalid http path \"%s\"", path ? path : "");
    for (size_t i = 0; i < s->nroutes; i++) {
        if (strcmp(s->routes[i].path, path) == 0 && strcmp(s->routes[i].method, method) == 0)
            return cdc_error_set(e, CDC_ERR_EXISTS, "http %s \"%s\" is already registered", method,
                                 path);
    }
    if (s->nroutes >= MAX_ROUTES)
        return cdc_error_set(e, CDC_ERR_INVALID, "too many http paths (at most %d)", MAX_ROUTES);
    route_t *r = &s->routes[s->nroutes++];
    r->server = s;
    r->kind = kind;
    r->method = method;
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->fn = fn;
    r->arg = arg;
    return CDC_OK;
}

cdc_err_t cdc_http_server_open(cdc_http_server_t **out, const char *addr, cdc_metrics_t *metrics,
                               cdc_error_t *e)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    char *end = NULL;
    long port;

    if (colon == NULL || colon == addr || (size_t)(colon - addr) >= 256)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "invalid http address \"%s\": expected host:port, e.g. "
                             "127.0.0.1:8080",
                             addr ? addr : "");
    port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || port < 0 || port > 65535)
        return cdc_error_set(e, CDC_ERR_CONFIG, "invalid port in http address \"%s\"", addr);

    cdc_http_server_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    memcpy(s->host, addr, (size_t)(colon - addr));
    s->port = (int)port;
    s->metrics = metrics ? metrics : cdc_metrics_default();
    s->token_reads = true;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    add_route(s, ROUTE_HEALTH, "GET", "/healthz", NULL, NULL, NULL);
    add_route(s, ROUTE_READY, "GET", "/readyz", NULL, NULL, NULL);
    add_route(s, ROUTE_METRICS, "GET", "/metrics", NULL, NULL, NULL);
    *out = s;
    return CDC_OK;
}

void cdc_http_server_set_ready(cdc_http_server_t *s, cdc_http_ready_fn fn, void *arg)
{
    s->ready_fn = fn;
    s->ready_arg = arg;
}

void cdc_http_server_set_health(cdc_http_server_t *s, cdc_http_ready_fn fn, void *arg)
{
    s->health_fn = fn;
    s->health_arg = arg;
}

cdc_err_t cdc_http_server_set_token(cdc_http_server_t *s, const char *token, cdc_error_t *e)
{
    cdc_http_token_t *tokens = NULL;
    size_t n = 0;
    cdc_err_t rc;

    if (s->started)
        return cdc_error_set(e, CDC_ERR_INVALID, "cannot set a token: http server already started");
    if ((rc = cdc_http_tokens_parse(token, &tokens, &n, e)) != CDC_OK)
        return rc;
    cdc_http_tokens_free(s->tokens, s->ntokens);
    s->tokens = tokens;
    s->ntokens = n;
    if (n > 0)
        s->refused = cdc_metrics_counter(s->metrics, "cdc_http_unauthorized_total",
                                         "Admin HTTP requests refused for a missing or wrong "
                                         "bearer token (--http-token).",
                                         NULL);
    return CDC_OK;
}

void cdc_http_server_set_token_reads(cdc_http_server_t *s, bool on)
{
    s->token_reads = on;
}

/* A token's name: 1 to 64 of [A-Za-z0-9._@-]. */
static bool token_name_ok(const char *p, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '@' || c == '-'))
            return false;
    }
    return true;
}

cdc_err_t cdc_http_tokens_parse(const char *text, cdc_http_token_t **out, size_t *n, cdc_error_t *e)
{
    cdc_http_token_t *t = NULL;
    size_t count = 0, cap = 0, lineno = 0;
    const char *p = text ? text : "";

    *out = NULL;
    *n = 0;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *colon;
        size_t namelen;
        lineno++;
        while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        colon = memchr(p, ':', len);
        namelen = colon ? (size_t)(colon - p) : 0;
        if (len > 0 && (colon != NULL && (!token_name_ok(p, namelen) || namelen + 1 == len))) {
            cdc_http_tokens_free(t, count);
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "http token line %zu is neither a token nor name:token (a "
                                 "name is 1 to 64 of A-Z a-z 0-9 . _ @ -, the token not empty)",
                                 lineno);
        }
        if (len > 0) {
            if (cdc_array_reserve(t, cap, count + 1, 4) != CDC_OK) {
                cdc_http_tokens_free(t, count);
                return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            }
            t[count].name = colon ? strndup(p, namelen) : strdup("admin");
            t[count].token = colon ? strndup(colon + 1, len - namelen - 1) : strndup(p, len);
            count++;
            if (t[count - 1].name == NULL || t[count - 1].token == NULL) {
                cdc_http_tokens_free(t, count);
                return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            }
        }
        p += nl ? (size_t)(nl - p) + 1 : strlen(p);
    }
    *out = t;
    *n = count;
    return CDC_OK;
}

bool cdc_http_auth_header(const char *tokens, char *out, size_t size)
{
    cdc_http_token_t *t = NULL;
    size_t n = 0;
    cdc_error_t e;
    bool ok = false;

    if (size > 0)
        out[0] = '\0';
    if (cdc_http_tokens_parse(tokens, &t, &n, &e) == CDC_OK && n > 0) {
        int len = snprintf(out, size, "Authorization: Bearer %s", t[0].token);
        ok = len > 0 && (size_t)len < size;
        if (!ok && size > 0)
            out[0] = '\0';
    }
    cdc_http_tokens_free(t, n);
    return ok;
}

void cdc_http_tokens_free(cdc_http_token_t *t, size_t n)
{
    for (size_t i = 0; t != NULL && i < n; i++) {
        free(t[i].name);
        free(t[i].token);
    }
    free(t);
}

/* A registered handler: a non-NULL one at a valid path (add_route checks the path). */
static cdc_err_t add_handler(cdc_http_server_t *s, const char *method, const char *path,
                             cdc_http_handler_fn fn, void *arg, cdc_error_t *e)
{
    if (fn == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID, "http handler for \"%s\" is NULL",
                             path ? path : "");
    return add_route(s, ROUTE_CUSTOM, method, path, fn, arg, e);
}

cdc_err_t cdc_http_server_add(cdc_http_server_t *s, const char *path, cdc_http_handler_fn fn,
                              void *arg, cdc_error_t *e)
{
    return add_handler(s, "GET", path, fn, arg, e);
}

cdc_err_t cdc_http_server_add_post(cdc_http_server_t *s, const char *path, cdc_http_handler_fn fn,
                                   void *arg, cdc_error_t *e)
{
    if (s->audited == NULL && !s->started) /* a server with actions audits them */
        s->audited = cdc_metrics_counter(s->metrics, "cdc_http_audited_requests_total",
                                         "Mutating admin HTTP requests (POST) written to the "
                                         "audit log, refused ones included.",
                                         NULL);
    return add_handler(s, "POST", path, fn, arg, e);
}

cdc_err_t cdc_http_server_set_tls(cdc_http_server_t *s, cdc_tls_t *tls, bool mutual, cdc_error_t *e)
{
    if (s->started)
        return cdc_error_set(e, CDC_ERR_INVALID, "cannot set TLS: http server already started");
    s->tls = tls;
    s->tls_mutual = mutual;
    return CDC_OK;
}

/* Sets the current certificates of s->tls on the server (for its new connections). */
static int set_tls(cdc_http_server_t *s)
{
    nng_tls_config *cfg = NULL;
    int rv = cdc_tls_nng_config(s->tls, true, s->tls_mutual, NULL, &cfg);
    if (rv == 0) {
        rv = nng_http_server_set_tls(s->http, cfg);
        nng_tls_config_free(cfg); /* the server holds its own reference */
    }
    return rv;
}

/* cdc_tls_t subscriber. */
static void tls_reload(void *arg)
{
    cdc_http_server_t *s = arg;
    int rv = set_tls(s);
    if (rv != 0)
        cdc_log_error("tls: the http server on %s:%d keeps its previous certificates: %s", s->host,
                      s->port, nng_strerror(rv));
}

static int try_start(cdc_http_server_t *s, int port)
{
    char urlbuf[300];
    nng_url *url = NULL;
    int rv;

    snprintf(urlbuf, sizeof(urlbuf), "%s://%s:%d", s->tls ? "https" : "http", s->host, port);
    if ((rv = nng_url_parse(&url, urlbuf)) != 0)
        return rv;
    rv = nng_http_server_hold(&s->http, url);
    nng_url_free(url);
    if (rv != 0)
        return rv;
    if (s->tls != NULL && (rv = set_tls(s)) != 0)
        goto fail;
    for (size_t i = 0; i < s->nroutes; i++) {
        nng_http_handler *h = NULL;
        if ((rv = nng_http_handler_alloc(&h, s->routes[i].path, handle)) != 0)
            goto fail;
        if ((rv = nng_http_handler_set_method(h, s->routes[i].method)) != 0 ||
            (rv = nng_http_handler_set_data(h, &s->routes[i], NULL)) != 0 ||
            (rv = nng_http_server_add_handler(s->http, h)) != 0) {
            nng_http_handler_free(h);
            goto fail;
        }
    }
    if ((rv = nng_http_server_start(s->http)) != 0)
        goto fail;
    s->port = port;
    return 0;
fail:
    nng_http_server_release(s->http);
    s->http = NULL;
    return rv;
}

cdc_err_t cdc_http_server_start(cdc_http_server_t *s, cdc_error_t *e)
{
    int rv = NNG_EADDRINUSE;
    if (s->started)
        return CDC_OK;
    if (s->port != 0) {
        rv = try_start(s, s->port);
    } else {
        /* a port picked from the kernel may be taken before we bind it: retry a few */
        for (int attempt = 0; attempt < 5 && rv == NNG_EADDRINUSE; attempt++) {
            int port = pick_free_port(s->host);
            rv = port ? try_start(s, port) : NNG_EADDRINUSE;
        }
    }
    if (rv != 0)
        return cdc_error_set(e, rv == NNG_EADDRINVAL ? CDC_ERR_CONFIG : CDC_ERR_UNAVAILABLE,
                             "could not start http server on \"%s:%d\": %s", s->host, s->port,
                             nng_strerror(rv));
    if (s->tls != NULL && cdc_tls_subscribe(s->tls, tls_reload, s, e) != CDC_OK)
        return e ? e->code : CDC_ERR_NOMEM;
    s->started = true;
    cdc_log_info("http server listening on %s://%s:%d%s", s->tls ? "https" : "http", s->host,
                 s->port, s->tls_mutual ? " (clients need a certificate of --tls-ca-file)" : "");
    return CDC_OK;
}

int cdc_http_server_port(const cdc_http_server_t *s)
{
    return s && s->started ? s->port : 0;
}

bool cdc_http_query_param(const char *query, const char *name, char *out, size_t size)
{
    size_t nlen = strlen(name);
    const char *p = query;

    if (size == 0)
        return false;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            size_t n = 0;
            for (size_t i = nlen + 1; i < len; i++) {
                char c = p[i];
                if (c == '+')
                    c = ' ';
                else if (c == '%' && i + 2 < len && cdc_hex_byte(p + i + 1) >= 0) {
                    c = (char)cdc_hex_byte(p + i + 1);
                    i += 2;
                }
                if (n + 1 >= size)
                    return false;
                out[n++] = c;
            }
            out[n] = '\0';
            return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

void cdc_http_doc_init(cdc_http_doc_t *d)
{
    pthread_mutex_init(&d->lock, NULL);
    d->json = NULL;
}

void cdc_http_doc_set(cdc_http_doc_t *d, char *json)
{
    if (json == NULL)
        return;
    pthread_mutex_lock(&d->lock);
    free(d->json);
    d->json = json;
    pthread_mutex_unlock(&d->lock);
}

void cdc_http_doc_free(cdc_http_doc_t *d)
{
    free(d->json);
    d->json = NULL;
    pthread_mutex_destroy(&d->lock);
}

static void doc_handler(void *arg, const char *path, const char *query, cdc_http_response_t *resp)
{
    (void)path;
    (void)query;
    cdc_http_doc_respond(arg, resp);
}

void cdc_http_doc_respond(cdc_http_doc_t *d, cdc_http_response_t *resp)
{
    pthread_mutex_lock(&d->lock);
    resp->body = strdup(d->json ? d->json : "{}");
    pthread_mutex_unlock(&d->lock);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
    snprintf(resp->content_type, sizeof(resp->content_type), "application/json");
}

cdc_err_t cdc_http_server_add_doc(cdc_http_server_t *s, const char *path, cdc_http_doc_t *d,
                                  cdc_error_t *e)
{
    return cdc_http_server_add(s, path, doc_handler, d, e);
}

void cdc_http_server_close(cdc_http_server_t *s)
{
    if (s == NULL)
        return;
    /* POST handlers still running answer on the server's connections and use the routes:
     * wait for them while the server is up (their owners bound how long they take) */
    pthread_mutex_lock(&s->lock);
    while (s->actions > 0)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (s->started)
        cdc_tls_unsubscribe(s->tls, tls_reload, s);
    if (s->http != NULL) {
        nng_http_server_stop(s->http);
        nng_http_server_release(s->http);
    }
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    cdc_http_tokens_free(s->tokens, s->ntokens);
    free(s);
}
