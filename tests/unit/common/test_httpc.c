/*
 * Unit tests for common/httpc.c against a tiny HTTP server on 127.0.0.1 that runs in a
 * thread of this test: it reads one request per connection, keeps it for the test to
 * inspect, and answers as the test said (a canned answer, a stream that stays open, or
 * nothing at all). Covers methods and bodies, headers both ways, statuses other than
 * 200, SigV4 signing, a data callback that ends a stream, a timeout with and without
 * part of an answer, a refused connection, and a handle used for several requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/httpc.h"
#include "tests/harness/harness.h"

typedef enum answer {
    ANSWER_CANNED, /* send `reply`, close */
    ANSWER_STREAM, /* send `reply`, then `more` after 50 ms, then wait for the client */
    ANSWER_NONE,   /* read the request, answer nothing, wait for the client */
} answer_t;

/* The server's state; mu guards what the test and the server thread both touch. */
typedef struct server {
    int fd, port;
    pthread_t thread;
    pthread_mutex_t mu;
    bool stop;
    answer_t answer;
    const char *reply, *more;
    char request[16384]; /* the last request: head and body */
    size_t request_len;
    int requests;
} server_t;

static server_t srv;

static bool stopping(void)
{
    pthread_mutex_lock(&srv.mu);
    bool stop = srv.stop;
    pthread_mutex_unlock(&srv.mu);
    return stop;
}

/* How the server answers the next requests. */
static void answer(answer_t a, const char *reply, const char *more)
{
    pthread_mutex_lock(&srv.mu);
    srv.answer = a;
    srv.reply = reply;
    srv.more = more;
    pthread_mutex_unlock(&srv.mu);
}

/* Reads one request (head, then Content-Length bytes of body) into srv.request. */
static void read_request(int c)
{
    char buf[16384];
    size_t len = 0, want = 0;
    char *end = NULL;

    while (len < sizeof(buf) - 1) {
        struct pollfd p = {.fd = c, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0)
            break;
        ssize_t n = recv(c, buf + len, sizeof(buf) - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        if (end == NULL && (end = strstr(buf, "\r\n\r\n")) != NULL) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            want =
                (size_t)(end + 4 - buf) + (cl != NULL && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
        }
        if (end != NULL && len >= want)
            break;
    }
    pthread_mutex_lock(&srv.mu);
    memcpy(srv.request, buf, len);
    srv.request[len] = '\0';
    srv.request_len = len;
    srv.requests++;
    pthread_mutex_unlock(&srv.mu);
}

/* Waits until the client closes the connection (or the test stops the server). */
static void wait_close(int c)
{
    char buf[256];
    while (!stopping()) {
        struct pollfd p = {.fd = c, .events = POLLIN};
        if (poll(&p, 1, 50) > 0 && recv(c, buf, sizeof(buf), 0) <= 0)
            return;
    }
}

static void send_all(int c, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = send(c, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void *serve(void *arg)
{
    (void)arg;
    while (!stopping()) {
        struct pollfd p = {.fd = srv.fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int c = accept(srv.fd, NULL, NULL);
        if (c < 0)
            continue;
        read_request(c);
        pthread_mutex_lock(&srv.mu);
        answer_t a = srv.answer;
        const char *reply = srv.reply, *more = srv.more;
        pthread_mutex_unlock(&srv.mu);
        if (a != ANSWER_NONE)
            send_all(c, reply);
        if (a == ANSWER_STREAM) {
            usleep(50000);
            send_all(c, more);
        }
        if (a != ANSWER_CANNED)
            wait_close(c);
        close(c);
    }
    return NULL;
}

static int setup(void **state)
{
    (void)state;
    memset(&srv, 0, sizeof(srv));
    pthread_mutex_init(&srv.mu, NULL);
    srv.fd = cdc_test_listen_loopback(&srv.port);
    return pthread_create(&srv.thread, NULL, serve, NULL);
}

static int teardown(void **state)
{
    (void)state;
    pthread_mutex_lock(&srv.mu);
    srv.stop = true;
    pthread_mutex_unlock(&srv.mu);
    pthread_join(srv.thread, NULL);
    close(srv.fd);
    pthread_mutex_destroy(&srv.mu);
    return 0;
}

static void url(char *buf, size_t size, const char *path)
{
    snprintf(buf, size, "http://127.0.0.1:%d%s", srv.port, path);
}

/* The request the server saw last (a copy). */
static const char *seen(void)
{
    static char copy[sizeof(srv.request)];
    pthread_mutex_lock(&srv.mu);
    memcpy(copy, srv.request, srv.request_len + 1);
    pthread_mutex_unlock(&srv.mu);
    return copy;
}

static long long elapsed_ms(long long since)
{
    return cdc_test_now_ms() - since;
}

static void test_get_reads_status_body_and_headers(void **state)
{
    (void)state;
    char u[128];
    static const char *const hdrs[] = {"X-Test: one", "Accept: text/plain", NULL};
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_response_t r;

    assert_non_null(h);
    answer(
        ANSWER_CANNED,
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"abc\"\r\nConnection: close\r\n\r\nhello",
        NULL);
    url(u, sizeof(u), "/status?x=1");
    cdc_httpc_request_t req = {.url = u, .headers = hdrs, .timeout_ms = 2000};
    assert_int_equal(cdc_httpc_perform(h, &req, &r), CDC_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 5);
    assert_string_equal(r.body, "hello");
    assert_int_equal(r.content_length, 5);
    assert_string_equal(r.etag, "\"abc\"");
    assert_false(r.stopped);
    const char *q = seen();
    assert_true(strncmp(q, "GET /status?x=1 HTTP/1.1\r\n", 26) == 0);
    assert_non_null(strstr(q, "\r\nX-Test: one\r\n"));
    assert_non_null(strstr(q, "\r\nAccept: text/plain\r\n"));
    cdc_httpc_response_free(&r);
    assert_null(r.body);
    assert_int_equal(r.status, 0);

    /* the same handle again: another status is an answer, not a failure */
    answer(ANSWER_CANNED,
           "HTTP/1.1 404 Not Found\r\nContent-Length: 7\r\nConnection: close\r\n\r\nmissing", NULL);
    assert_int_equal(cdc_httpc_perform(h, &req, &r), CDC_OK);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "missing");
    assert_string_equal(r.etag, "");
    cdc_httpc_response_free(&r);
    cdc_httpc_close(h);
}

static void test_methods_and_bodies(void **state)
{
    (void)state;
    char u[128];
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_response_t r;

    answer(ANSWER_CANNED, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
           NULL);
    url(u, sizeof(u), "/v3/kv/put");
    cdc_httpc_request_t post = {
        .method = "POST", .url = u, .body = "{\"key\":\"a\"}", .body_len = 11, .timeout_ms = 2000};
    assert_int_equal(cdc_httpc_perform(h, &post, &r), CDC_OK);
    const char *q = seen();
    assert_true(strncmp(q, "POST /v3/kv/put HTTP/1.1\r\n", 26) == 0);
    assert_non_null(strstr(q, "\r\nContent-Length: 11\r\n"));
    assert_non_null(strstr(q, "\r\n\r\n{\"key\":\"a\"}"));
    cdc_httpc_response_free(&r);

    /* PUT without a body sends an empty one */
    cdc_httpc_request_t put = {.method = "PUT", .url = u, .timeout_ms = 2000};
    assert_int_equal(cdc_httpc_perform(h, &put, &r), CDC_OK);
    q = seen();
    assert_true(strncmp(q, "PUT /v3/kv/put HTTP/1.1\r\n", 25) == 0);
    assert_non_null(strstr(q, "\r\nContent-Length: 0\r\n"));
    cdc_httpc_response_free(&r);

    /* DELETE sends no body even when one is given */
    cdc_httpc_request_t del = {
        .method = "DELETE", .url = u, .body = "x", .body_len = 1, .timeout_ms = 2000};
    assert_int_equal(cdc_httpc_perform(h, &del, &r), CDC_OK);
    q = seen();
    assert_true(strncmp(q, "DELETE /v3/kv/put HTTP/1.1\r\n", 28) == 0);
    assert_null(strcasestr(q, "Content-Length"));
    cdc_httpc_response_free(&r);

    /* HEAD: the headers, no body */
    answer(ANSWER_CANNED, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nConnection: close\r\n\r\n",
           NULL);
    cdc_httpc_request_t head = {.method = "HEAD", .url = u, .timeout_ms = 2000};
    assert_int_equal(cdc_httpc_perform(h, &head, &r), CDC_OK);
    assert_true(strncmp(seen(), "HEAD /v3/kv/put HTTP/1.1\r\n", 26) == 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.content_length, 1234);
    assert_int_equal(r.len, 0);
    cdc_httpc_response_free(&r);
    cdc_httpc_close(h);
}

static void test_sigv4_signs(void **state)
{
    (void)state;
    char u[128];
    static const char *const hdrs[] = {"x-amz-content-sha256: UNSIGNED-PAYLOAD", NULL};
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_response_t r;

    answer(ANSWER_CANNED, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
           NULL);
    url(u, sizeof(u), "/bucket/key");
    cdc_httpc_request_t req = {.method = "PUT",
                               .url = u,
                               .headers = hdrs,
                               .body = "data",
                               .body_len = 4,
                               .timeout_ms = 2000,
                               .aws_sigv4 = "aws:amz:us-east-1:s3",
                               .userpwd = "AKID:secret"};
    assert_int_equal(cdc_httpc_perform(h, &req, &r), CDC_OK);
    const char *q = seen();
    assert_non_null(strstr(q, "\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKID/"));
    assert_non_null(strstr(q, "/us-east-1/s3/aws4_request"));
    assert_non_null(strcasestr(q, "\r\nx-amz-date: "));
    cdc_httpc_response_free(&r);
    cdc_httpc_close(h);
}

typedef struct want_line {
    const char *line;
    int calls;
} want_line_t;

static bool until_line(const cdc_httpc_response_t *r, void *arg)
{
    want_line_t *w = arg;
    w->calls++;
    return strstr(r->body, w->line) == NULL;
}

static void test_data_callback_ends_a_stream(void **state)
{
    (void)state;
    char u[128];
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_response_t r;
    want_line_t w = {.line = "{\"b\":2}\n"};

    /* the server keeps the connection open after both lines: only the callback ends it */
    answer(ANSWER_STREAM, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}\n",
           "{\"b\":2}\n");
    url(u, sizeof(u), "/v3/watch");
    cdc_httpc_request_t req = {.method = "POST",
                               .url = u,
                               .body = "{}",
                               .body_len = 2,
                               .timeout_ms = 5000,
                               .on_data = until_line,
                               .on_data_arg = &w};
    long long t0 = cdc_test_now_ms();
    assert_int_equal(cdc_httpc_perform(h, &req, &r), CDC_OK);
    assert_true(elapsed_ms(t0) < 3000);
    assert_true(r.stopped);
    assert_int_equal(r.status, 200);
    assert_true(w.calls >= 2);
    assert_string_equal(r.body, "{\"a\":1}\n{\"b\":2}\n");
    cdc_httpc_response_free(&r);
    cdc_httpc_close(h);
}

static void test_timeouts(void **state)
{
    (void)state;
    char u[128];
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_response_t r;

    /* no answer at all */
    answer(ANSWER_NONE, NULL, NULL);
    url(u, sizeof(u), "/slow");
    cdc_httpc_request_t req = {.url = u, .timeout_ms = 300, .connect_timeout_ms = 300};
    long long t0 = cdc_test_now_ms();
    assert_int_equal(cdc_httpc_perform(h, &req, &r), CDC_ERR_TIMEOUT);
    long long ms = elapsed_ms(t0);
    assert_true(ms >= 250 && ms < 3000);
    assert_int_equal(r.status, 0);
    assert_non_null(r.reason);
    assert_true(r.detail[0] != '\0');
    cdc_httpc_response_free(&r);

    /* part of an answer, then silence: the status and the part are kept */
    answer(ANSWER_STREAM,
           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"created\":true}\n", "");
    assert_int_equal(cdc_httpc_perform(h, &req, &r), CDC_ERR_TIMEOUT);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"created\":true}\n");
    cdc_httpc_response_free(&r);
    cdc_httpc_close(h);
}

static void test_refused_is_unavailable(void **state)
{
    (void)state;
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_response_t r;
    /* port 1 on loopback: connection refused at once */
    cdc_httpc_request_t req = {.url = "http://127.0.0.1:1/x", .timeout_ms = 2000};

    assert_int_equal(cdc_httpc_perform(h, &req, &r), CDC_ERR_UNAVAILABLE);
    assert_int_equal(r.status, 0);
    assert_non_null(r.reason);
    assert_null(r.body);
    cdc_httpc_response_free(&r);
    cdc_httpc_response_free(NULL);
    cdc_httpc_close(h);
    cdc_httpc_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_reads_status_body_and_headers),
        cmocka_unit_test(test_methods_and_bodies),
        cmocka_unit_test(test_sigv4_signs),
        cmocka_unit_test(test_data_callback_ends_a_stream),
        cmocka_unit_test(test_timeouts),
        cmocka_unit_test(test_refused_is_unavailable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
