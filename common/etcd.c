/*
 * etcd v3 client over the gRPC JSON gateway (see etcd.h). Every call is one HTTP POST of
 * a JSON request to /v3/<service>/<method> on the current endpoint, with keys and values
 * in base64 and int64 fields as strings, as the gateway's protobuf JSON mapping wants.
 * A transport failure moves on to the next endpoint; a gRPC error in the body is mapped
 * to a cdc_err_t by its status code. Streaming methods (watch, lease keep-alive) are read
 * as newline-separated JSON objects until the first useful one arrives; then the
 * transfer is cut. HTTP goes through common/httpc.h (one handle per client, so the
 * connection to a member is reused); leader election, built on this API, is in
 * etcd_election.c, and the JSON of its messages in etcd_json.c.
 */
#include "common/etcd.h"
#include "common/etcd_int.h"

#include "common/base64.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/httpc.h"
#include "common/log.h"

#define DEFAULT_TIMEOUT_MS 2000
#define MAX_ENDPOINTS 16

struct cdc_etcd {
    char *endpoints[MAX_ENDPOINTS];
    size_t nendpoints;
    size_t current;
    int timeout_ms;
    cdc_httpc_t *http;
    /* security (cdc_etcd_open_secure()); NULL = unused */
    char *ca_file, *cert_file, *key_file;
    char *user, *password;
    char *token;      /* etcd auth token; NULL = none (not asked yet, or auth is off) */
    size_t authed_ep; /* 1 + the endpoint the token is from (simple tokens are per member);
                         0 = authenticate before the next request */
};

/* gRPC status codes that appear in the gateway's error bodies */
enum {
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_NOT_FOUND = 5,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_OUT_OF_RANGE = 11,
    GRPC_UNAVAILABLE = 14,
    GRPC_UNAUTHENTICATED = 16,
};

/* ---- base64 and key helpers --------------------------------------------------------- */

/* ---- result types ------------------------------------------------------------------- */

/* ---- client and transport ------------------------------------------------------------ */

/* A copy of s, or NULL for NULL or ""; *oom set when the copy failed. */
static char *dup_set(const char *s, bool *oom)
{
    char *d;
    if (s == NULL || s[0] == '\0')
        return NULL;
    if ((d = strdup(s)) == NULL)
        *oom = true;
    return d;
}

cdc_err_t cdc_etcd_open_secure(cdc_etcd_t **out, const char *endpoints,
                               const cdc_etcd_security_t *sec, int timeout_ms, cdc_error_t *e)
{
    cdc_etcd_t *c = NULL;
    bool oom = false;
    cdc_err_t rc;

    if (sec != NULL && sec->user != NULL && sec->user[0] != '\0' &&
        (sec->password == NULL || sec->password[0] == '\0'))
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "etcd user \"%s\" has no password (hint: --etcd-password-file)",
                             sec->user);
    if (sec != NULL && sec->key_file != NULL && sec->key_file[0] != '\0' &&
        (sec->cert_file == NULL || sec->cert_file[0] == '\0'))
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "an etcd client key without its certificate (hint: --etcd-cert-file)");
    if ((rc = cdc_etcd_open(&c, endpoints, timeout_ms, e)) != CDC_OK)
        return rc;
    if (sec == NULL) {
        *out = c;
        return CDC_OK;
    }
    c->ca_file = dup_set(sec->ca_file, &oom);
    c->cert_file = dup_set(sec->cert_file, &oom);
    c->key_file = dup_set(sec->key_file, &oom);
    c->user = dup_set(sec->user, &oom);
    c->password = c->user ? dup_set(sec->password, &oom) : NULL;
    if (oom) {
        cdc_etcd_close(c);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    *out = c;
    return CDC_OK;
}

cdc_err_t cdc_etcd_open(cdc_etcd_t **out, const char *endpoints, int timeout_ms, cdc_error_t *e)
{
    cdc_etcd_t *c;
    char *copy, *save = NULL;

    if (endpoints == NULL || endpoints[0] == '\0')
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "no etcd endpoints given: expected e.g. http://127.0.0.1:2379");
    c = calloc(1, sizeof(*c));
    copy = strdup(endpoints);
    if (c == NULL || copy == NULL) {
        free(c);
        free(copy);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (char *tok = strtok_r(copy, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
        size_t n = strlen(tok);
        while (n > 0 && tok[n - 1] == '/')
            tok[--n] = '\0';
        if (strncmp(tok, "http://", 7) != 0 && strncmp(tok, "https://", 8) != 0) {
            cdc_error_set(e, CDC_ERR_CONFIG,
                          "invalid etcd endpoint \"%s\": expected http://host:port", tok);
            goto fail;
        }
        if (c->nendpoints == MAX_ENDPOINTS) {
            cdc_error_set(e, CDC_ERR_CONFIG, "too many etcd endpoints (at most %d)", MAX_ENDPOINTS);
            goto fail;
        }
        if ((c->endpoints[c->nendpoints] = strdup(tok)) == NULL) {
            cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        c->nendpoints++;
    }
    if (c->nendpoints == 0) {
        cdc_error_set(e, CDC_ERR_CONFIG, "no etcd endpoints in \"%s\"", endpoints);
        goto fail;
    }
    if ((c->http = cdc_httpc_open()) == NULL) {
        cdc_error_set(e, CDC_ERR_NOMEM, "could not create a curl handle");
        goto fail;
    }
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
    free(copy);
    *out = c;
    return CDC_OK;
fail:
    free(copy);
    cdc_etcd_close(c);
    return e ? e->code : CDC_ERR_CONFIG;
}

void cdc_etcd_close(cdc_etcd_t *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->nendpoints; i++)
        free(c->endpoints[i]);
    cdc_httpc_close(c->http);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->user);
    if (c->password != NULL)
        memset(c->password, 0, strlen(c->password));
    free(c->password);
    free(c->token);
    free(c);
}

void cdc_etcd_set_timeout(cdc_etcd_t *c, int timeout_ms)
{
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
}

/* A streaming answer: complete newline-separated JSON objects are fed to want() until
 * it accepts one (1 = done, keep the object; 0 = continue). */
typedef struct stream {
    size_t parsed; /* bytes already consumed as objects */
    int (*want)(json_t *obj, void *arg);
    void *want_arg;
    json_t *result; /* the object that ended the stream */
} stream_t;

/* The data callback of a streaming call: false (cut the transfer) once want() took an
 * object, since we have what we waited for. */
static bool stream_scan(const cdc_httpc_response_t *r, void *arg)
{
    stream_t *b = arg;
    for (;;) {
        size_t start = b->parsed;
        while (start < r->len &&
               (r->body[start] == '\n' || r->body[start] == '\r' || r->body[start] == ' '))
            start++;
        const char *nl = memchr(r->body + start, '\n', r->len - start);
        if (nl == NULL)
            return true;
        size_t n = (size_t)(nl - (r->body + start));
        json_error_t jerr;
        json_t *obj = json_loadb(r->body + start, n, 0, &jerr);
        b->parsed = start + n + 1;
        if (obj == NULL)
            continue;
        if (b->want(obj, b->want_arg)) {
            b->result = obj;
            return false;
        }
        json_decref(obj);
    }
}

/* A POST of the JSON body to url with c's TLS files; connecting may take a second at most
 * of timeout_ms, so that a member that does not answer leaves time for the next. */
static cdc_httpc_request_t post(const cdc_etcd_t *c, const char *url, const char *const *headers,
                                const char *body, int timeout_ms)
{
    cdc_httpc_request_t r = {.method = "POST",
                             .url = url,
                             .headers = headers,
                             .body = body,
                             .body_len = strlen(body),
                             .timeout_ms = timeout_ms,
                             .connect_timeout_ms = timeout_ms < 1000 ? timeout_ms : 1000,
                             .ca_file = c->ca_file,
                             .cert_file = c->cert_file,
                             .key_file = c->key_file};
    return r;
}

/*
 * Gets a token for c->user from endpoint idx (POST /v3/auth/authenticate). A member whose
 * authentication is off answers FAILED_PRECONDITION: then requests go without a token
 * (clients can get their user before etcd enables auth; once it does, the first refused
 * request authenticates again). A refused user or password is CDC_ERR_CONFIG.
 */
static cdc_err_t authenticate(cdc_etcd_t *c, size_t idx, int timeout_ms, cdc_error_t *e)
{
    static const char *const headers[] = {"Content-Type: application/json", NULL};
    const char *ep = c->endpoints[idx];
    json_t *req = json_pack("{s:s, s:s}", "name", c->user, "password", c->password), *j;
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL, url[1024];
    cdc_httpc_response_t r;
    cdc_err_t rc;
    json_error_t jerr;
    long http;

    json_decref(req);
    if (body == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory encoding an etcd request");
    snprintf(url, sizeof(url), "%s/v3/auth/authenticate", ep);
    cdc_httpc_request_t hr = post(c, url, headers, body, timeout_ms);
    rc = cdc_httpc_perform(c->http, &hr, &r);
    memset(body, 0, strlen(body)); /* it holds the password */
    free(body);
    if (rc != CDC_OK) {
        rc = cdc_error_set_retriable(e,
                                     rc == CDC_ERR_TIMEOUT ? CDC_ERR_TIMEOUT : CDC_ERR_UNAVAILABLE,
                                     true, "could not reach etcd at %s to authenticate: %s", ep,
                                     r.detail[0] ? r.detail : r.reason);
        cdc_httpc_response_free(&r);
        return rc;
    }
    http = r.status;
    j = json_loadb(r.body ? r.body : "", r.len, 0, &jerr);
    cdc_httpc_response_free(&r);
    free(c->token);
    c->token = NULL;
    if (json_is_string(json_object_get(j, "token"))) {
        c->token = strdup(json_string_value(json_object_get(j, "token")));
        rc = c->token ? CDC_OK : cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    } else if (cdc_etcd__jint(j, "code") == GRPC_FAILED_PRECONDITION) {
        rc = CDC_OK; /* authentication is off on this member */
    } else if (cdc_etcd__jint(j, "code") == GRPC_INVALID_ARGUMENT) {
        const char *msg = json_string_value(json_object_get(j, "message"));
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "etcd at %s refused user \"%s\": %s (hint: check --etcd-user and "
                           "--etcd-password-file)",
                           ep, c->user, msg ? msg : "no message");
    } else {
        rc = cdc_error_set_retriable(e, CDC_ERR_UNAVAILABLE, true,
                                     "could not authenticate to etcd at %s as user \"%s\" (HTTP "
                                     "%ld)",
                                     ep, c->user, http);
    }
    json_decref(j);
    if (rc == CDC_OK)
        c->authed_ep = idx + 1;
    return rc;
}

static cdc_err_t grpc_error(cdc_error_t *e, const json_t *body, long http, const char *ep,
                            const char *path)
{
    int64_t code = cdc_etcd__jint(body, "code");
    const char *msg = json_string_value(json_object_get(body, "message"));
    if (msg == NULL)
        msg = json_string_value(json_object_get(body, "error"));
    if (msg == NULL)
        msg = "no message";
    switch (code) {
    case GRPC_NOT_FOUND:
        return cdc_error_set(e, CDC_ERR_NOT_FOUND, "etcd %s%s: %s", ep, path, msg);
    case GRPC_INVALID_ARGUMENT:
        return cdc_error_set(e, CDC_ERR_INVALID, "etcd %s%s rejected the request: %s", ep, path,
                             msg);
    case GRPC_OUT_OF_RANGE:
        return cdc_error_set(e, CDC_ERR_STALE, "etcd %s%s: %s", ep, path, msg);
    case GRPC_DEADLINE_EXCEEDED:
        return cdc_error_set(e, CDC_ERR_TIMEOUT, "etcd %s%s timed out: %s", ep, path, msg);
    default:
        return cdc_error_set_retriable(e, CDC_ERR_UNAVAILABLE, true,
                                       "etcd %s%s failed (HTTP %ld, gRPC code %lld): %s", ep, path,
                                       http, (long long)code, msg);
    }
}

/*
 * POSTs req to path on the endpoints, starting with the one that last worked. On CDC_OK
 * *resp is the decoded JSON body (caller decrefs). With want != NULL the response is
 * read as a stream and *resp is the first object want() accepted; a stream that times
 * out before that gives CDC_ERR_TIMEOUT with *idle (may be NULL) set when the stream was
 * up and simply nothing arrived.
 */
static cdc_err_t call(cdc_etcd_t *c, const char *path, json_t *req, int timeout_ms,
                      int (*want)(json_t *, void *), void *want_arg, json_t **resp, bool *idle,
                      cdc_error_t *e)
{
    char auth[1024];
    const char *headers[] = {"Content-Type: application/json", NULL, NULL};
    char *body = json_dumps(req, JSON_COMPACT);
    cdc_err_t err = CDC_ERR_UNAVAILABLE;
    char url[1024];
    bool reauthed = false;

    if (idle != NULL)
        *idle = false;
    if (body == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory encoding an etcd request");
    for (size_t attempt = 0; attempt < c->nendpoints; attempt++) {
        size_t idx = (c->current + attempt) % c->nendpoints;
        const char *ep = c->endpoints[idx];
        stream_t b = {.want = want, .want_arg = want_arg};
        cdc_httpc_response_t r;
        int to = timeout_ms > 0 ? timeout_ms : c->timeout_ms;

        if (c->user != NULL && c->authed_ep != idx + 1) {
            cdc_err_t arc = authenticate(c, idx, to, e);
            if (arc == CDC_ERR_CONFIG || arc == CDC_ERR_NOMEM) {
                err = arc;
                goto done;
            }
            if (arc != CDC_OK) {
                err = arc;
                continue;
            }
        }
        headers[1] = NULL;
        if (c->token != NULL) {
            snprintf(auth, sizeof(auth), "Authorization: %s", c->token);
            headers[1] = auth;
        }
        snprintf(url, sizeof(url), "%s%s", ep, path);
        cdc_httpc_request_t hr = post(c, url, headers, body, to);
        hr.on_data = want != NULL ? stream_scan : NULL;
        hr.on_data_arg = &b;
        cdc_err_t rc = cdc_httpc_perform(c->http, &hr, &r);
        long http = r.status;

        if (rc == CDC_ERR_NOMEM) {
            cdc_httpc_response_free(&r);
            err = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory reading etcd %s%s", ep, path);
            goto done;
        }
        if (want != NULL && r.stopped) {
            cdc_httpc_response_free(&r);
            c->current = idx;
            *resp = b.result;
            err = CDC_OK;
            goto done;
        }
        if (rc != CDC_OK) {
            bool timeout = rc == CDC_ERR_TIMEOUT;
            bool got_data = r.len > 0 && http == 200;
            if (timeout && want != NULL && got_data) {
                /* the stream was up, simply nothing we wait for arrived */
                cdc_httpc_response_free(&r);
                c->current = idx;
                if (idle != NULL)
                    *idle = true;
                err = cdc_error_set(e, CDC_ERR_TIMEOUT, "etcd %s%s: nothing within %d ms", ep, path,
                                    to);
                goto done;
            }
            err = cdc_error_set_retriable(e, timeout ? CDC_ERR_TIMEOUT : CDC_ERR_UNAVAILABLE, true,
                                          "could not reach etcd at %s%s: %s", ep, path,
                                          r.detail[0] ? r.detail : r.reason);
            cdc_httpc_response_free(&r);
            cdc_log_debug("%s", e ? e->msg : "etcd request failed");
            continue;
        }
        json_error_t jerr;
        json_t *j = NULL;
        if (want != NULL) {
            /* stream ended without the object we wanted: look at what came */
            j = json_loadb(r.body ? r.body : "", r.len, JSON_DISABLE_EOF_CHECK, &jerr);
        } else {
            j = json_loadb(r.body ? r.body : "", r.len, 0, &jerr);
        }
        cdc_httpc_response_free(&r);
        if (j == NULL) {
            err = cdc_error_set_retriable(e, CDC_ERR_UNAVAILABLE, true,
                                          "etcd %s%s answered HTTP %ld with invalid JSON: %s", ep,
                                          path, http, jerr.text);
            continue;
        }
        const json_t *inner = json_object_get(j, "error");
        if (json_is_object(inner)) /* streams wrap errors as {"error":{...}} */
            ;
        else
            inner = j;
        if (http != 200 || json_object_get(inner, "code") != NULL) {
            int64_t code = cdc_etcd__jint(inner, "code");
            /* an expired token, or auth turned on since we asked: once more with a new one */
            if (c->user != NULL && !reauthed &&
                (code == GRPC_UNAUTHENTICATED ||
                 (code == GRPC_INVALID_ARGUMENT && c->token == NULL))) {
                json_decref(j);
                reauthed = true;
                c->authed_ep = 0;
                attempt--; /* the same endpoint again (wraps and comes back to 0 at most) */
                continue;
            }
            err = grpc_error(e, inner, http, ep, path);
            json_decref(j);
            if (err == CDC_ERR_UNAVAILABLE || err == CDC_ERR_TIMEOUT)
                continue;     /* this member cannot serve: try the next one */
            c->current = idx; /* a definite answer, e.g. not found */
            goto done;
        }
        if (want != NULL) {
            json_decref(j);
            err = cdc_error_set_retriable(e, CDC_ERR_UNAVAILABLE, true,
                                          "etcd %s%s closed the stream early", ep, path);
            continue;
        }
        c->current = idx;
        *resp = j;
        err = CDC_OK;
        goto done;
    }
done:
    free(body);
    return err;
}

/* ---- KV ------------------------------------------------------------------------------ */

cdc_err_t cdc_etcd_range_prefix(cdc_etcd_t *c, const char *prefix, int64_t limit,
                                cdc_etcd_kvs_t *out, cdc_error_t *e)
{
    json_t *req = json_object(), *resp = NULL;
    cdc_err_t err;
    if (req == NULL || cdc_etcd__jset_key(req, prefix, true) != 0) {
        json_decref(req);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    if (limit > 0)
        json_object_set_new(req, "limit", cdc_etcd__jint_str(limit));
    err = call(c, "/v3/kv/range", req, 0, NULL, NULL, &resp, NULL, e);
    json_decref(req);
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not read etcd prefix \"%s\"", prefix);
    if (cdc_etcd__decode_range(resp, out) != 0)
        err =
            cdc_error_set(e, CDC_ERR_UNAVAILABLE, "could not decode etcd range of \"%s\"", prefix);
    json_decref(resp);
    return err;
}

cdc_err_t cdc_etcd_get(cdc_etcd_t *c, const char *key, cdc_etcd_kv_t *out, int64_t *revision,
                       cdc_error_t *e)
{
    json_t *req = json_object(), *resp = NULL;
    cdc_etcd_kvs_t kvs;
    cdc_err_t err;
    if (req == NULL || cdc_etcd__jset_key(req, key, false) != 0) {
        json_decref(req);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    err = call(c, "/v3/kv/range", req, 0, NULL, NULL, &resp, NULL, e);
    json_decref(req);
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not read etcd key \"%s\"", key);
    if (cdc_etcd__decode_range(resp, &kvs) != 0) {
        json_decref(resp);
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "could not decode etcd key \"%s\"", key);
    }
    json_decref(resp);
    if (revision != NULL)
        *revision = kvs.revision;
    if (kvs.count == 0) {
        cdc_etcd_kvs_clear(&kvs);
        return cdc_error_set(e, CDC_ERR_NOT_FOUND, "etcd key \"%s\" does not exist", key);
    }
    *out = kvs.kvs[0];
    memset(&kvs.kvs[0], 0, sizeof(kvs.kvs[0]));
    cdc_etcd_kvs_clear(&kvs);
    return CDC_OK;
}

cdc_err_t cdc_etcd_put(cdc_etcd_t *c, const char *key, const void *value, size_t value_len,
                       int64_t lease, int64_t *revision, cdc_error_t *e)
{
    json_t *req = json_object(), *resp = NULL;
    cdc_err_t err;
    if (req == NULL || cdc_etcd__jset_key(req, key, false) != 0 ||
        cdc_etcd__jset_b64(req, "value", value ? value : "", value ? value_len : 0) != 0) {
        json_decref(req);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    if (lease != 0)
        json_object_set_new(req, "lease", cdc_etcd__jint_str(lease));
    err = call(c, "/v3/kv/put", req, 0, NULL, NULL, &resp, NULL, e);
    json_decref(req);
    if (err == CDC_ERR_NOT_FOUND && lease != 0)
        return cdc_error_set(e, CDC_ERR_FENCED,
                             "could not write etcd key \"%s\": lease %lld "
                             "has expired",
                             key, (long long)lease);
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not write etcd key \"%s\"", key);
    if (revision != NULL)
        *revision = cdc_etcd__jint(json_object_get(resp, "header"), "revision");
    json_decref(resp);
    return CDC_OK;
}

cdc_err_t cdc_etcd_delete(cdc_etcd_t *c, const char *key, bool prefix, int64_t *deleted,
                          cdc_error_t *e)
{
    json_t *req = json_object(), *resp = NULL;
    cdc_err_t err;
    if (req == NULL || cdc_etcd__jset_key(req, key, prefix) != 0) {
        json_decref(req);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    err = call(c, "/v3/kv/deleterange", req, 0, NULL, NULL, &resp, NULL, e);
    json_decref(req);
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not delete etcd key \"%s\"", key);
    if (deleted != NULL)
        *deleted = cdc_etcd__jint(resp, "deleted");
    json_decref(resp);
    return CDC_OK;
}

/* ---- txn ----------------------------------------------------------------------------- */

static json_t *encode_cmp(const cdc_etcd_cmp_t *cmp)
{
    static const char *const results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
    static const char *const targets[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
    static const char *const fields[] = {"version", "create_revision", "mod_revision", "value",
                                         "lease"};
    json_t *j = json_object();
    if (j == NULL || (unsigned)cmp->result > CDC_ETCD_NOT_EQUAL ||
        (unsigned)cmp->target > CDC_ETCD_CMP_LEASE || cdc_etcd__jset_key(j, cmp->key, false) != 0)
        goto fail;
    json_object_set_new(j, "result", json_string(results[cmp->result]));
    json_object_set_new(j, "target", json_string(targets[cmp->target]));
    if (cmp->target == CDC_ETCD_CMP_VALUE) {
        if (cdc_etcd__jset_b64(j, "value", cmp->value ? cmp->value : "",
                               cmp->value ? cmp->value_len : 0))
            goto fail;
    } else {
        json_object_set_new(j, fields[cmp->target], cdc_etcd__jint_str(cmp->number));
    }
    return j;
fail:
    json_decref(j);
    return NULL;
}

static json_t *encode_op(const cdc_etcd_op_t *op)
{
    json_t *inner = json_object(), *j = json_object();
    const char *name = NULL;
    if (inner == NULL || j == NULL)
        goto fail;
    switch (op->type) {
    case CDC_ETCD_OP_PUT:
        name = "request_put";
        if (cdc_etcd__jset_key(inner, op->key, false) != 0 ||
            cdc_etcd__jset_b64(inner, "value", op->value ? op->value : "",
                               op->value ? op->value_len : 0))
            goto fail;
        if (op->lease != 0)
            json_object_set_new(inner, "lease", cdc_etcd__jint_str(op->lease));
        break;
    case CDC_ETCD_OP_DELETE:
    case CDC_ETCD_OP_RANGE:
        name = op->type == CDC_ETCD_OP_DELETE ? "request_delete_range" : "request_range";
        if (cdc_etcd__jset_key(inner, op->key, op->prefix && op->range_end == NULL) != 0 ||
            (op->range_end != NULL &&
             cdc_etcd__jset_b64(inner, "range_end", op->range_end, strlen(op->range_end)) != 0))
            goto fail;
        break;
    default:
        goto fail;
    }
    json_object_set_new(j, name, inner);
    return j;
fail:
    json_decref(inner);
    json_decref(j);
    return NULL;
}

static int encode_ops(json_t *req, const char *name, const cdc_etcd_op_t *ops, size_t n)
{
    json_t *arr = json_array();
    if (arr == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        json_t *op = encode_op(&ops[i]);
        if (op == NULL) {
            json_decref(arr);
            return -1;
        }
        json_array_append_new(arr, op);
    }
    return json_object_set_new(req, name, arr);
}

cdc_err_t cdc_etcd_txn(cdc_etcd_t *c, const cdc_etcd_cmp_t *cmps, size_t ncmps,
                       const cdc_etcd_op_t *success, size_t nsuccess, const cdc_etcd_op_t *failure,
                       size_t nfailure, cdc_etcd_txn_result_t *out, cdc_error_t *e)
{
    json_t *req = json_object(), *resp = NULL, *arr = json_array();
    cdc_err_t err;

    memset(out, 0, sizeof(*out));
    if (req == NULL || arr == NULL) {
        json_decref(arr);
        goto oom;
    }
    json_object_set_new(req, "compare", arr);
    for (size_t i = 0; i < ncmps; i++) {
        json_t *cmp = encode_cmp(&cmps[i]);
        if (cmp == NULL)
            goto invalid;
        json_array_append_new(arr, cmp);
    }
    if (encode_ops(req, "success", success, nsuccess) != 0 ||
        encode_ops(req, "failure", failure, nfailure) != 0)
        goto invalid;
    err = call(c, "/v3/kv/txn", req, 0, NULL, NULL, &resp, NULL, e);
    json_decref(req);
    if (err != CDC_OK)
        return cdc_error_prefix(e, "etcd transaction failed");

    out->succeeded = json_is_true(json_object_get(resp, "succeeded"));
    out->revision = cdc_etcd__jint(json_object_get(resp, "header"), "revision");
    const json_t *rs = json_object_get(resp, "responses");
    size_t n = json_is_array(rs) ? json_array_size(rs) : 0;
    if (n > 0) {
        out->responses = calloc(n, sizeof(*out->responses));
        if (out->responses == NULL) {
            json_decref(resp);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
            const json_t *r = json_array_get(rs, i);
            const json_t *range = json_object_get(r, "response_range");
            out->count = i + 1;
            if (range != NULL && cdc_etcd__decode_range(range, &out->responses[i]) != 0) {
                json_decref(resp);
                cdc_etcd_txn_result_clear(out);
                return cdc_error_set(e, CDC_ERR_UNAVAILABLE,
                                     "could not decode etcd transaction response");
            }
        }
    }
    json_decref(resp);
    return CDC_OK;
invalid:
    json_decref(req);
    return cdc_error_set(e, CDC_ERR_INVALID, "invalid etcd transaction (bad compare or op)");
oom:
    json_decref(req);
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
}

/* ---- leases -------------------------------------------------------------------------- */

static json_t *lease_req(int64_t lease)
{
    json_t *req = json_object();
    if (req != NULL)
        json_object_set_new(req, "ID", cdc_etcd__jint_str(lease));
    return req;
}

cdc_err_t cdc_etcd_lease_grant(cdc_etcd_t *c, int64_t ttl_s, int64_t *lease, cdc_error_t *e)
{
    json_t *req = json_object(), *resp = NULL;
    cdc_err_t err;
    if (req == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    json_object_set_new(req, "TTL", cdc_etcd__jint_str(ttl_s));
    err = call(c, "/v3/lease/grant", req, 0, NULL, NULL, &resp, NULL, e);
    json_decref(req);
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not grant an etcd lease of %llds", (long long)ttl_s);
    *lease = cdc_etcd__jint(resp, "ID");
    json_decref(resp);
    if (*lease == 0)
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "etcd granted no lease id");
    return CDC_OK;
}

static int want_result(json_t *obj, void *arg)
{
    (void)arg;
    return json_object_get(obj, "result") != NULL || json_object_get(obj, "error") != NULL;
}

cdc_err_t cdc_etcd_lease_keepalive(cdc_etcd_t *c, int64_t lease, int64_t *ttl_s, cdc_error_t *e)
{
    json_t *req = lease_req(lease), *resp = NULL;
    cdc_err_t err;
    if (req == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    err = call(c, "/v3/lease/keepalive", req, 0, want_result, NULL, &resp, NULL, e);
    json_decref(req);
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not renew etcd lease %lld", (long long)lease);
    const json_t *err_obj = json_object_get(resp, "error");
    if (err_obj != NULL) {
        err = grpc_error(e, err_obj, 200, c->endpoints[c->current], "/v3/lease/keepalive");
        json_decref(resp);
        return err == CDC_ERR_NOT_FOUND
                   ? cdc_error_set(e, CDC_ERR_FENCED, "etcd lease %lld has expired",
                                   (long long)lease)
                   : err;
    }
    int64_t ttl = cdc_etcd__jint(json_object_get(resp, "result"), "TTL");
    json_decref(resp);
    if (ttl <= 0)
        return cdc_error_set(e, CDC_ERR_FENCED, "etcd lease %lld has expired or was revoked",
                             (long long)lease);
    if (ttl_s != NULL)
        *ttl_s = ttl;
    return CDC_OK;
}

cdc_err_t cdc_etcd_lease_revoke(cdc_etcd_t *c, int64_t lease, cdc_error_t *e)
{
    json_t *req = lease_req(lease), *resp = NULL;
    cdc_err_t err;
    if (req == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    err = call(c, "/v3/lease/revoke", req, 0, NULL, NULL, &resp, NULL, e);
    json_decref(req);
    json_decref(resp);
    if (err == CDC_ERR_NOT_FOUND) {
        cdc_error_clear(e);
        return CDC_OK;
    }
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not revoke etcd lease %lld", (long long)lease);
    return CDC_OK;
}

cdc_err_t cdc_etcd_lease_ttl(cdc_etcd_t *c, int64_t lease, int64_t *ttl_s, cdc_error_t *e)
{
    json_t *req = lease_req(lease), *resp = NULL;
    cdc_err_t err;
    if (req == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    err = call(c, "/v3/lease/timetolive", req, 0, NULL, NULL, &resp, NULL, e);
    json_decref(req);
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not read etcd lease %lld", (long long)lease);
    int64_t ttl = cdc_etcd__jint(resp, "TTL");
    json_decref(resp);
    if (ttl < 0)
        return cdc_error_set(e, CDC_ERR_FENCED, "etcd lease %lld has expired or was revoked",
                             (long long)lease);
    if (ttl_s != NULL)
        *ttl_s = ttl;
    return CDC_OK;
}

/* ---- watch --------------------------------------------------------------------------- */

static int want_events(json_t *obj, void *arg)
{
    (void)arg;
    const json_t *r = json_object_get(obj, "result");
    if (json_object_get(obj, "error") != NULL)
        return 1;
    if (r == NULL)
        return 0;
    if (json_is_true(json_object_get(r, "canceled")) || cdc_etcd__jint(r, "compact_revision") != 0)
        return 1;
    const json_t *evs = json_object_get(r, "events");
    return json_is_array(evs) && json_array_size(evs) > 0;
}

cdc_err_t cdc_etcd_watch_wait(cdc_etcd_t *c, const char *key, bool prefix, int64_t from_revision,
                              int timeout_ms, cdc_etcd_events_t *out, cdc_error_t *e)
{
    json_t *req = json_object(), *create = json_object(), *resp = NULL;
    cdc_err_t err;

    memset(out, 0, sizeof(*out));
    if (req == NULL || create == NULL || cdc_etcd__jset_key(create, key, prefix) != 0) {
        json_decref(req);
        json_decref(create);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    if (from_revision > 0)
        json_object_set_new(create, "start_revision", cdc_etcd__jint_str(from_revision));
    json_object_set_new(req, "create_request", create);
    bool idle = false;
    err = call(c, "/v3/watch", req, timeout_ms > 0 ? timeout_ms : 1, want_events, NULL, &resp,
               &idle, e);
    json_decref(req);
    if (err == CDC_ERR_TIMEOUT && idle) {
        /* the watch was established and no change came: an empty answer, not an error */
        cdc_error_clear(e);
        return CDC_OK;
    }
    if (err != CDC_OK)
        return cdc_error_prefix(e, "could not watch etcd key \"%s\"", key);

    const json_t *r = json_object_get(resp, "result");
    if (json_object_get(resp, "error") != NULL) {
        err = grpc_error(e, json_object_get(resp, "error"), 200, c->endpoints[c->current],
                         "/v3/watch");
        json_decref(resp);
        return err;
    }
    if (cdc_etcd__jint(r, "compact_revision") != 0 ||
        json_is_true(json_object_get(r, "canceled"))) {
        err = cdc_error_set(e, CDC_ERR_STALE,
                            "etcd watch of \"%s\" from revision %lld was cancelled (compacted "
                            "at %lld)",
                            key, (long long)from_revision,
                            (long long)cdc_etcd__jint(r, "compact_revision"));
        json_decref(resp);
        return err;
    }
    const json_t *evs = json_object_get(r, "events");
    size_t n = json_array_size(evs);
    out->revision = cdc_etcd__jint(json_object_get(r, "header"), "revision");
    out->events = calloc(n, sizeof(*out->events));
    if (out->events == NULL) {
        json_decref(resp);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *ev = json_array_get(evs, i);
        const char *type = json_string_value(json_object_get(ev, "type"));
        out->events[i].type = type != NULL && strcmp(type, "DELETE") == 0 ? CDC_ETCD_EVENT_DELETE
                                                                          : CDC_ETCD_EVENT_PUT;
        out->count = i + 1;
        if (cdc_etcd__decode_kv(json_object_get(ev, "kv"), &out->events[i].kv) != 0) {
            json_decref(resp);
            cdc_etcd_events_clear(out);
            return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "could not decode etcd watch event");
        }
    }
    json_decref(resp);
    return CDC_OK;
}
