/*
 * Requests to the capture over HTTP (docs/capture.md, "Re-snapshot on demand" and
 * "Adding a table"): POST /snapshot?table= and POST /tables?add=|remove=. The HTTP thread
 * puts the request and waits; the main thread, which owns the PostgreSQL connections and
 * the tables' state, answers between stream reads (cdc_capture_serve_request). One request
 * at a time; another waits for it.
 *
 * Above incremental.c and tables.c (docs/development.md, "Call circles"): it hands them
 * the operator's requests and passes their reply (reply.c) on to the HTTP thread; they
 * call nothing here.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "capture/stream_int.h"
#include "common/clock.h"

/* How long a request waits for the main thread's answer. */
#define REQUEST_WAIT_MS 15000

void cdc_capture_request_init(cdc_capture_t *cap)
{
    pthread_mutex_init(&cap->request.mu, NULL);
    pthread_cond_init(&cap->request.cond, NULL);
    cap->request.init = true;
}

void cdc_capture_request_free(cdc_capture_t *cap)
{
    if (!cap->request.init)
        return;
    pthread_mutex_destroy(&cap->request.mu);
    pthread_cond_destroy(&cap->request.cond);
    cap->request.init = false;
}

/* Answers the pending request with body (a malloc'ed JSON text, taken; NULL: {}). */
static void answer(cdc_capture_t *cap, int status, char *body)
{
    pthread_mutex_lock(&cap->request.mu);
    cap->request.status = status;
    snprintf(cap->request.body, sizeof(cap->request.body), "%s", body ? body : "{}");
    cap->request.answered = true;
    pthread_cond_broadcast(&cap->request.cond);
    pthread_mutex_unlock(&cap->request.mu);
    free(body);
}

cdc_err_t cdc_capture_serve_request(cdc_capture_t *cap, cdc_error_t *e)
{
    char name[256], action[16], *dot;
    const char *schema = "public", *table = name;
    cdc_capture_reply_t reply = {0};
    int64_t now = cdc_clock_mono_coarse_ms();
    cdc_err_t rc;

    /* the loop turns once per message: look at most once per clock tick */
    if (!cap->request.init || now == cap->request.last_look_ms)
        return CDC_OK;
    cap->request.last_look_ms = now;
    pthread_mutex_lock(&cap->request.mu);
    if (!cap->request.pending || cap->request.answered) {
        pthread_mutex_unlock(&cap->request.mu);
        return CDC_OK;
    }
    snprintf(name, sizeof(name), "%s", cap->request.table);
    snprintf(action, sizeof(action), "%s", cap->request.action);
    pthread_mutex_unlock(&cap->request.mu);
    if ((dot = strchr(name, '.')) != NULL) {
        *dot = '\0';
        schema = name;
        table = dot + 1;
    }
    if (strcmp(action, "snapshot") == 0)
        rc = cdc_incremental_request(cap, schema, table, &reply, e);
    else
        rc = cdc_capture_publication_request(cap, strcmp(action, "add") == 0, schema, table, &reply,
                                             e);
    if (reply.status == 0) /* (every path replies: a failure unanswered is a bug) */
        cdc_capture_reply_error(&reply, 500, "%s", rc != CDC_OK ? e->msg : "no answer");
    answer(cap, reply.status, reply.body);
    return rc;
}

/* Puts one request and waits for its answer (HTTP thread). */
static void ask(cdc_capture_t *cap, const char *action, const char *table,
                cdc_http_response_t *resp)
{
    struct timespec until = cdc_clock_deadline(REQUEST_WAIT_MS);
    bool answered = false;

    pthread_mutex_lock(&cap->request.mu);
    while (cap->request.pending &&
           pthread_cond_timedwait(&cap->request.cond, &cap->request.mu, &until) == 0)
        ;
    if (!cap->request.pending) {
        cap->request.pending = true;
        cap->request.answered = false;
        snprintf(cap->request.table, sizeof(cap->request.table), "%s", table);
        snprintf(cap->request.action, sizeof(cap->request.action), "%s", action);
        while (!cap->request.answered &&
               pthread_cond_timedwait(&cap->request.cond, &cap->request.mu, &until) == 0)
            ;
        answered = cap->request.answered;
        if (answered) {
            resp->status = cap->request.status;
            resp->body = strdup(cap->request.body);
        }
        cap->request.pending = false;
        cap->request.answered = false;
        pthread_cond_broadcast(&cap->request.cond);
    }
    pthread_mutex_unlock(&cap->request.mu);
    if (!answered) {
        resp->status = 503;
        resp->body = strdup("{\"error\":\"the capture is not streaming: try again later\"}");
    }
    resp->body_len = resp->body ? strlen(resp->body) : 0;
}

static void bad_request(cdc_http_response_t *resp, const char *usage)
{
    json_t *j = json_pack("{s:s}", "error", usage);
    resp->status = 400;
    resp->body = json_dumps(j, JSON_COMPACT);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
    json_decref(j);
}

void cdc_capture_http_snapshot(void *arg, const char *path, const char *query,
                               cdc_http_response_t *resp)
{
    char table[256];
    (void)path;

    snprintf(resp->content_type, sizeof(resp->content_type), "application/json");
    if (!cdc_http_query_param(query, "table", table, sizeof(table)) || table[0] == '\0')
        bad_request(resp, "POST /snapshot?table=<schema>.<table>");
    else
        ask(arg, "snapshot", table, resp);
}

void cdc_capture_http_tables(void *arg, const char *path, const char *query,
                             cdc_http_response_t *resp)
{
    char table[256];
    (void)path;

    snprintf(resp->content_type, sizeof(resp->content_type), "application/json");
    if (cdc_http_query_param(query, "add", table, sizeof(table)) && table[0] != '\0')
        ask(arg, "add", table, resp);
    else if (cdc_http_query_param(query, "remove", table, sizeof(table)) && table[0] != '\0')
        ask(arg, "remove", table, resp);
    else
        bad_request(resp, "POST /tables?add=<schema>.<table> or /tables?remove=<schema>.<table>");
}
