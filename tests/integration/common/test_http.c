/* Component tests of common/http.c: a real NNG HTTP server on loopback queried with
 * libcurl: /healthz (healthy, and unhealthy from a health callback), /readyz (ready and
 * not ready), /metrics from a registry, a custom JSON handler with a query string, 404 and
 * 405, two servers on port 0, the bearer token (401 without it on /metrics and
 * /status, probes open), and POST handlers (their own threads: a blocked one does not
 * hold up GETs; 405 for GET on a POST-only path; with the token too) and query parameters. */
#include <pthread.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "common/health.h"
#include "common/http.h"

typedef struct reply {
    long status;
    char body[8192];
    size_t len;
    char content_type[128];
} reply_t;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    reply_t *r = arg;
    size_t len = size * n;
    if (r->len + len >= sizeof(r->body))
        len = sizeof(r->body) - 1 - r->len;
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    return size * n;
}

/* GETs (or sends method to) path, with one extra header line when header is not NULL. */
static void request(int port, const char *path, const char *method, const char *header, reply_t *r)
{
    char url[256];
    char *ct = NULL;
    CURL *curl = curl_easy_init();
    struct curl_slist *hdrs = header ? curl_slist_append(NULL, header) : NULL;
    memset(r, 0, sizeof(*r));
    if (hdrs != NULL)
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    if (method != NULL) {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "x");
    }
    CURLcode rc = curl_easy_perform(curl);
    if (rc != CURLE_OK)
        fail_msg("GET %s: %s", url, curl_easy_strerror(rc));
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
    if (ct != NULL)
        snprintf(r->content_type, sizeof(r->content_type), "%s", ct);
    curl_easy_cleanup(curl);
    curl_slist_free_all(hdrs);
}

static void get(int port, const char *path, const char *method, reply_t *r)
{
    request(port, path, method, NULL, r);
}

static bool ready_flag;

static bool ready(void *arg, char *reason, size_t size)
{
    (void)arg;
    if (!ready_flag)
        snprintf(reason, size, "no leader elected yet");
    return ready_flag;
}

static void status_handler(void *arg, const char *path, const char *query,
                           cdc_http_response_t *resp)
{
    const char *job = arg;
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "{\"job\":\"%s\",\"path\":\"%s\",\"query\":\"%s\"}", job,
                     path, query);
    resp->body = strdup(buf);
    resp->body_len = (size_t)n;
    snprintf(resp->content_type, sizeof(resp->content_type), "application/json");
}

static void teapot_handler(void *arg, const char *path, const char *query,
                           cdc_http_response_t *resp)
{
    (void)arg;
    (void)path;
    (void)query;
    resp->status = 418; /* no body */
}

static void test_endpoints(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_http_server_t *s = NULL, *s2 = NULL;
    reply_t r;
    cdc_metrics_t *reg = cdc_metrics_new();
    cdc_counter_t *c = cdc_metrics_counter(reg, "cdc_test_requests_total", "Requests.",
                                           (const char *[]){"kind", "x", NULL});
    cdc_metrics_counter_add(c, 3);

    assert_int_equal(cdc_http_server_open(&s, "127.0.0.1:0", reg, &e), CDC_OK);
    cdc_http_server_set_ready(s, ready, NULL);
    assert_int_equal(cdc_http_server_add(s, "/status", status_handler, "j1", &e), CDC_OK);
    assert_int_equal(cdc_http_server_add(s, "/teapot", teapot_handler, NULL, &e), CDC_OK);
    assert_int_equal(cdc_http_server_add(s, "/status", status_handler, "j1", &e), CDC_ERR_EXISTS);
    assert_int_equal(cdc_http_server_port(s), 0);
    assert_int_equal(cdc_http_server_start(s, &e), CDC_OK);
    int port = cdc_http_server_port(s);
    assert_true(port > 0);
    assert_int_equal(cdc_http_server_add(s, "/late", status_handler, NULL, &e), CDC_ERR_INVALID);

    get(port, "/healthz", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");

    ready_flag = false;
    get(port, "/readyz", NULL, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: no leader elected yet\n");
    ready_flag = true;
    get(port, "/readyz", NULL, &r);
    assert_int_equal(r.status, 200);

    get(port, "/metrics", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.content_type, "version=0.0.4"));
    assert_string_equal(r.body, "# HELP cdc_test_requests_total Requests.\n"
                                "# TYPE cdc_test_requests_total counter\n"
                                "cdc_test_requests_total{kind=\"x\"} 3\n");
    cdc_metrics_counter_inc(c);
    get(port, "/metrics", NULL, &r);
    assert_non_null(strstr(r.body, "cdc_test_requests_total{kind=\"x\"} 4\n"));

    get(port, "/status?verbose=1", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "application/json");
    assert_string_equal(r.body, "{\"job\":\"j1\",\"path\":\"/status\",\"query\":\"verbose=1\"}");

    get(port, "/teapot", NULL, &r);
    assert_int_equal(r.status, 418);
    assert_int_equal(r.len, 0);

    get(port, "/nope", NULL, &r);
    assert_int_equal(r.status, 404);
    get(port, "/healthz", "POST", &r);
    assert_int_equal(r.status, 405);

    /* /healthz from a health callback: a fatal state answers 503 with the reason */
    cdc_http_server_t *s3 = NULL;
    cdc_health_t health;
    cdc_health_init(&health, 60000);
    assert_int_equal(cdc_http_server_open(&s3, "127.0.0.1:0", NULL, &e), CDC_OK);
    cdc_http_server_set_health(s3, cdc_health_check, &health);
    assert_int_equal(cdc_http_server_start(s3, &e), CDC_OK);
    get(cdc_http_server_port(s3), "/healthz", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    cdc_health_set_fatal(&health, "job FAILED");
    get(cdc_http_server_port(s3), "/healthz", NULL, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "unhealthy: job FAILED\n");
    cdc_http_server_close(s3);

    /* a second server on port 0 gets its own port (NNG would otherwise share one) */
    assert_int_equal(cdc_http_server_open(&s2, "127.0.0.1:0", NULL, &e), CDC_OK);
    assert_int_equal(cdc_http_server_start(s2, &e), CDC_OK);
    assert_true(cdc_http_server_port(s2) != port);
    get(cdc_http_server_port(s2), "/healthz", NULL, &r);
    assert_int_equal(r.status, 200);
    get(cdc_http_server_port(s2), "/status", NULL, &r);
    assert_int_equal(r.status, 404);
    cdc_http_server_close(s2);

    /* the same fixed port twice: the second cannot bind... */
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    cdc_http_server_close(s);
    /* ...but after close the port is free again */
    assert_int_equal(cdc_http_server_open(&s, addr, reg, &e), CDC_OK);
    assert_int_equal(cdc_http_server_start(s, &e), CDC_OK);
    assert_int_equal(cdc_http_server_port(s), port);
    get(port, "/healthz", NULL, &r);
    assert_int_equal(r.status, 200);
    cdc_http_server_close(s);

    assert_int_equal(cdc_http_server_open(&s, "no-port", reg, &e), CDC_ERR_CONFIG);
    assert_int_equal(cdc_http_server_open(&s, "127.0.0.1:99999", reg, &e), CDC_ERR_CONFIG);
    cdc_metrics_free(reg);
}

/* --http-token: /metrics and /status answer 401 without the token or with a wrong one
 * (a WWW-Authenticate challenge, counted), 200 with it; /healthz and /readyz stay open. */
static void test_bearer_token(void **state)
{
    cdc_error_t e;
    cdc_http_server_t *s = NULL;
    cdc_metrics_t *reg = cdc_metrics_new();
    reply_t r;
    int port;
    static const char *const refused[] = {
        NULL, /* no header */
        "Authorization: Bearer s3cret-tokem",
        "Authorization: Bearer s3cret-token-and-more",
        "Authorization: Bearer ",
        "Authorization: Basic czNjcmV0LXRva2Vu",
        "Authorization: s3cret-token",
    };
    (void)state;

    assert_int_equal(cdc_http_server_open(&s, "127.0.0.1:0", reg, &e), CDC_OK);
    assert_int_equal(cdc_http_server_set_token(s, "s3cret-token", &e), CDC_OK);
    assert_int_equal(cdc_http_server_add(s, "/status", status_handler, "j1", &e), CDC_OK);
    assert_int_equal(cdc_http_server_start(s, &e), CDC_OK);
    assert_int_equal(cdc_http_server_set_token(s, "later", &e), CDC_ERR_INVALID);
    port = cdc_http_server_port(s);

    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        request(port, "/metrics", NULL, refused[i], &r);
        assert_int_equal(r.status, 401);
        assert_non_null(strstr(r.body, "bearer token"));
        request(port, "/status", NULL, refused[i], &r);
        assert_int_equal(r.status, 401);
        assert_null(strstr(r.body, "j1"));
    }
    /* probes carry no credentials */
    get(port, "/healthz", NULL, &r);
    assert_int_equal(r.status, 200);
    get(port, "/readyz", NULL, &r);
    assert_int_equal(r.status, 200);

    request(port, "/status", NULL, "Authorization: Bearer s3cret-token", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"job\":\"j1\""));
    request(port, "/metrics", NULL, "authorization: bearer s3cret-token", &r); /* case-blind */
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "cdc_http_unauthorized_total 12\n"));
    cdc_http_server_close(s);

    /* an empty token is no token: everything open, as without the option */
    assert_int_equal(cdc_http_server_open(&s, "127.0.0.1:0", reg, &e), CDC_OK);
    assert_int_equal(cdc_http_server_set_token(s, "", &e), CDC_OK);
    assert_int_equal(cdc_http_server_start(s, &e), CDC_OK);
    get(cdc_http_server_port(s), "/metrics", NULL, &r);
    assert_int_equal(r.status, 200);
    cdc_http_server_close(s);
    cdc_metrics_free(reg);
}

/* A POST action that blocks until released (or 5 s), then answers its query. */
static pthread_mutex_t action_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t action_cond = PTHREAD_COND_INITIALIZER;
static bool action_started, action_release;

static void action_handler(void *arg, const char *path, const char *query,
                           cdc_http_response_t *resp)
{
    char buf[256];
    (void)arg;
    pthread_mutex_lock(&action_lock);
    action_started = true;
    pthread_cond_broadcast(&action_cond);
    for (int i = 0; i < 50 && !action_release; i++) {
        pthread_mutex_unlock(&action_lock);
        usleep(100000);
        pthread_mutex_lock(&action_lock);
    }
    pthread_mutex_unlock(&action_lock);
    snprintf(buf, sizeof(buf), "{\"path\":\"%s\",\"query\":\"%s\"}", path, query);
    resp->body = strdup(buf);
    resp->body_len = strlen(buf);
    resp->status = 202;
    snprintf(resp->content_type, sizeof(resp->content_type), "application/json");
}

typedef struct post_call {
    int port;
    reply_t r;
} post_call_t;

static void *post_thread(void *arg)
{
    post_call_t *pc = arg;
    request(pc->port, "/act?table=a.b", "POST", "Authorization: Bearer tok", &pc->r);
    return NULL;
}

static void test_post(void **state)
{
    cdc_error_t e;
    cdc_http_server_t *s = NULL;
    reply_t r;
    post_call_t pc;
    pthread_t t;
    (void)state;

    assert_int_equal(cdc_http_server_open(&s, "127.0.0.1:0", NULL, &e), CDC_OK);
    assert_int_equal(cdc_http_server_set_token(s, "tok", &e), CDC_OK);
    assert_int_equal(cdc_http_server_add_post(s, "/act", action_handler, NULL, &e), CDC_OK);
    assert_int_equal(cdc_http_server_add_post(s, "/act", action_handler, NULL, &e), CDC_ERR_EXISTS);
    assert_int_equal(cdc_http_server_add(s, "/status", status_handler, "j1", &e), CDC_OK);
    assert_int_equal(cdc_http_server_add_post(s, "/status", action_handler, NULL, &e), CDC_OK);
    assert_int_equal(cdc_http_server_start(s, &e), CDC_OK);
    memset(&pc, 0, sizeof(pc));
    pc.port = cdc_http_server_port(s);

    request(pc.port, "/act", "POST", NULL, &r);
    assert_int_equal(r.status, 401);
    request(pc.port, "/act", NULL, "Authorization: Bearer tok", &r);
    assert_int_equal(r.status, 405);

    /* a blocked POST: GETs are still answered meanwhile */
    assert_int_equal(pthread_create(&t, NULL, post_thread, &pc), 0);
    pthread_mutex_lock(&action_lock);
    while (!action_started)
        pthread_cond_wait(&action_cond, &action_lock);
    pthread_mutex_unlock(&action_lock);
    for (int i = 0; i < 8; i++) {
        request(pc.port, "/status", NULL, "Authorization: Bearer tok", &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"job\":\"j1\""));
    }
    pthread_mutex_lock(&action_lock);
    action_release = true;
    pthread_mutex_unlock(&action_lock);
    pthread_join(t, NULL);
    assert_int_equal(pc.r.status, 202);
    assert_string_equal(pc.r.body, "{\"path\":\"/act\",\"query\":\"table=a.b\"}");
    assert_string_equal(pc.r.content_type, "application/json");
    cdc_http_server_close(s);

    /* the query parameters a handler reads */
    char v[8];
    assert_true(cdc_http_query_param("table=public.t&timeout=5s", "table", v, sizeof(v)) ==
                false); /* does not fit */
    assert_true(cdc_http_query_param("ta=1&table=a%2Eb+c&x", "table", v, sizeof(v)));
    assert_string_equal(v, "a.b c");
    assert_true(cdc_http_query_param("x&timeout=5s", "timeout", v, sizeof(v)));
    assert_string_equal(v, "5s");
    assert_true(cdc_http_query_param("timeout=", "timeout", v, sizeof(v)));
    assert_string_equal(v, "");
    assert_false(cdc_http_query_param("timeouts=1", "timeout", v, sizeof(v)));
    assert_false(cdc_http_query_param("", "timeout", v, sizeof(v)));
    assert_true(cdc_http_query_param("t=%zz%4", "t", v, sizeof(v))); /* not an escape: kept */
    assert_string_equal(v, "%zz%4");
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_bearer_token),
        cmocka_unit_test(test_post),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
