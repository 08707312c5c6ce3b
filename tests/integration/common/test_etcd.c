/* Component tests of common/etcd.c against the harness's real etcd (CDC_TEST_ETCD):
 * KV, transactions on both branches, lease expiry and keep-alive, watch, unreachable
 * endpoints with failover, and leader election with fencing; and against an etcd of its
 * own with TLS, client certificates (CA and certificates made with openssl here) and
 * authentication (users, an expiring token), also through cdcctl's options. Waits use
 * deadlines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/etcd.h"
#include "common/http.h"
#include "tests/harness/harness.h"

static char prefix[128];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static cdc_etcd_t *client(void)
{
    const char *ep = getenv("CDC_TEST_ETCD");
    cdc_etcd_t *c = NULL;
    cdc_error_t e;
    if (ep == NULL || ep[0] == '\0')
        fail_msg("CDC_TEST_ETCD is not set: run under tests/run.sh integration");
    if (cdc_etcd_open(&c, ep, 2000, &e) != CDC_OK)
        fail_msg("%s", e.msg);
    return c;
}

static const char *k(const char *suffix)
{
    static char buf[4][256];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof(buf[i]), "%s%s", prefix, suffix);
    return buf[i];
}

#define OK(expr)                                                                                   \
    do {                                                                                           \
        cdc_err_t err_ = (expr);                                                                   \
        if (err_ != CDC_OK)                                                                        \
            fail_msg("%s: %s (%s)", #expr, e.msg, cdc_err_name(err_));                             \
    } while (0)

static void test_kv(void **state)
{
    (void)state;
    cdc_etcd_t *c = client();
    cdc_error_t e;
    cdc_etcd_kv_t kv;
    cdc_etcd_kvs_t kvs;
    int64_t rev1, rev2, deleted, rev;

    OK(cdc_etcd_put(c, k("kv/a"), "one", 3, 0, &rev1, &e));
    OK(cdc_etcd_put(c, k("kv/b"), "\0bin\xff", 5, 0, NULL, &e));
    OK(cdc_etcd_put(c, k("kv/a"), "two", 3, 0, &rev2, &e));
    assert_true(rev2 > rev1);
    OK(cdc_etcd_get(c, k("kv/a"), &kv, &rev, &e));
    assert_string_equal(kv.key, k("kv/a"));
    assert_string_equal(kv.value, "two");
    assert_int_equal(kv.value_len, 3);
    assert_int_equal(kv.create_revision, rev1);
    assert_int_equal(kv.mod_revision, rev2);
    assert_int_equal(kv.version, 2);
    assert_int_equal(kv.lease, 0);
    assert_true(rev >= rev2);
    cdc_etcd_kv_clear(&kv);

    OK(cdc_etcd_range_prefix(c, k("kv/"), 0, &kvs, &e));
    assert_int_equal(kvs.count, 2);
    assert_string_equal(kvs.kvs[0].key, k("kv/a"));
    assert_int_equal(kvs.kvs[1].value_len, 5);
    assert_memory_equal(kvs.kvs[1].value, "\0bin\xff", 5);
    cdc_etcd_kvs_clear(&kvs);
    OK(cdc_etcd_range_prefix(c, k("kv/"), 1, &kvs, &e));
    assert_int_equal(kvs.count, 1);
    assert_true(kvs.more);
    cdc_etcd_kvs_clear(&kvs);

    assert_int_equal(cdc_etcd_get(c, k("kv/missing"), &kv, NULL, &e), CDC_ERR_NOT_FOUND);
    assert_false(e.retriable);
    OK(cdc_etcd_delete(c, k("kv/a"), false, &deleted, &e));
    assert_int_equal(deleted, 1);
    OK(cdc_etcd_delete(c, k("kv/"), true, &deleted, &e));
    assert_int_equal(deleted, 1);
    OK(cdc_etcd_range_prefix(c, k("kv/"), 0, &kvs, &e));
    assert_int_equal(kvs.count, 0);
    cdc_etcd_kvs_clear(&kvs);
    cdc_etcd_close(c);
}

static void test_txn(void **state)
{
    (void)state;
    cdc_etcd_t *c = client();
    cdc_error_t e;
    cdc_etcd_txn_result_t r;
    const char *key = k("txn/x");

    /* create-if-absent: succeeds once */
    cdc_etcd_cmp_t absent = {
        .key = key, .target = CDC_ETCD_CMP_CREATE_REVISION, .result = CDC_ETCD_EQUAL, .number = 0};
    cdc_etcd_op_t put = {.type = CDC_ETCD_OP_PUT, .key = key, .value = "v1", .value_len = 2};
    cdc_etcd_op_t get = {.type = CDC_ETCD_OP_RANGE, .key = key};
    OK(cdc_etcd_txn(c, &absent, 1, &put, 1, &get, 1, &r, &e));
    assert_true(r.succeeded);
    assert_int_equal(r.count, 1);
    int64_t created = r.revision;
    cdc_etcd_txn_result_clear(&r);

    OK(cdc_etcd_txn(c, &absent, 1, &put, 1, &get, 1, &r, &e));
    assert_false(r.succeeded); /* failure branch ran: the range */
    assert_int_equal(r.count, 1);
    assert_int_equal(r.responses[0].count, 1);
    assert_string_equal(r.responses[0].kvs[0].value, "v1");
    assert_int_equal(r.responses[0].kvs[0].create_revision, created);
    cdc_etcd_txn_result_clear(&r);

    /* value / version / mod_revision compares, several ops per branch */
    cdc_etcd_cmp_t cmps[3] = {
        {.key = key,
         .target = CDC_ETCD_CMP_VALUE,
         .result = CDC_ETCD_EQUAL,
         .value = "v1",
         .value_len = 2},
        {.key = key, .target = CDC_ETCD_CMP_VERSION, .result = CDC_ETCD_LESS, .number = 2},
        {.key = key,
         .target = CDC_ETCD_CMP_MOD_REVISION,
         .result = CDC_ETCD_GREATER,
         .number = created - 1},
    };
    cdc_etcd_op_t ops[3] = {
        {.type = CDC_ETCD_OP_PUT, .key = key, .value = "v2", .value_len = 2},
        {.type = CDC_ETCD_OP_PUT, .key = k("txn/y"), .value = "y", .value_len = 1},
        {.type = CDC_ETCD_OP_RANGE, .key = k("txn/"), .prefix = true},
    };
    OK(cdc_etcd_txn(c, cmps, 3, ops, 3, NULL, 0, &r, &e));
    assert_true(r.succeeded);
    assert_int_equal(r.count, 3);
    assert_int_equal(r.responses[2].count, 2);
    assert_string_equal(r.responses[2].kvs[0].value, "v2");
    cdc_etcd_txn_result_clear(&r);
    /* same compares fail now (value is v2): failure branch deletes */
    cdc_etcd_op_t del = {.type = CDC_ETCD_OP_DELETE, .key = k("txn/"), .prefix = true};
    OK(cdc_etcd_txn(c, cmps, 3, ops, 3, &del, 1, &r, &e));
    assert_false(r.succeeded);
    cdc_etcd_txn_result_clear(&r);
    cdc_etcd_kv_t kv;
    assert_int_equal(cdc_etcd_get(c, key, &kv, NULL, &e), CDC_ERR_NOT_FOUND);

    /* range_end: [txn/r/0002, txn/r/0004) only (the coordinator's checkpoint pruning) */
    char keys[5][64];
    for (int i = 0; i < 5; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s", k(""));
        snprintf(keys[i] + strlen(keys[i]), sizeof(keys[i]) - strlen(keys[i]), "txn/r/%04d", i);
        OK(cdc_etcd_put(c, keys[i], "v", 1, 0, NULL, &e));
    }
    cdc_etcd_op_t rdel[2] = {
        {.type = CDC_ETCD_OP_DELETE, .key = keys[2], .range_end = keys[4]},
        {.type = CDC_ETCD_OP_RANGE, .key = k("txn/r/"), .prefix = true, .range_end = keys[2]},
    };
    OK(cdc_etcd_txn(c, NULL, 0, rdel, 2, NULL, 0, &r, &e));
    assert_true(r.succeeded);
    assert_int_equal(r.responses[1].count, 2); /* the range honours range_end over prefix */
    cdc_etcd_txn_result_clear(&r);
    cdc_etcd_kvs_t left;
    OK(cdc_etcd_range_prefix(c, k("txn/r/"), 0, &left, &e));
    assert_int_equal(left.count, 3);
    assert_string_equal(left.kvs[0].key, keys[0]);
    assert_string_equal(left.kvs[1].key, keys[1]);
    assert_string_equal(left.kvs[2].key, keys[4]);
    cdc_etcd_kvs_clear(&left);
    cdc_etcd_close(c);
}

static void test_lease_expiry_and_keepalive(void **state)
{
    (void)state;
    cdc_etcd_t *c = client();
    cdc_error_t e;
    int64_t lease, lease2, ttl, rev;
    cdc_etcd_kv_t kv;

    /* expiry: the key disappears once the lease runs out; watch for its DELETE */
    OK(cdc_etcd_lease_grant(c, 2, &lease, &e));
    OK(cdc_etcd_put(c, k("lease/short"), "x", 1, lease, &rev, &e));
    OK(cdc_etcd_get(c, k("lease/short"), &kv, NULL, &e));
    assert_int_equal(kv.lease, lease);
    cdc_etcd_kv_clear(&kv);
    OK(cdc_etcd_lease_ttl(c, lease, &ttl, &e));
    assert_true(ttl >= 0 && ttl <= 2);

    /* keep-alive: a second lease renewed every 500 ms outlives the first one */
    OK(cdc_etcd_lease_grant(c, 2, &lease2, &e));
    OK(cdc_etcd_put(c, k("lease/kept"), "y", 1, lease2, NULL, &e));

    int64_t deadline = now_ms() + 15000, from = rev + 1;
    bool gone = false;
    while (!gone && now_ms() < deadline) {
        cdc_etcd_events_t ev;
        OK(cdc_etcd_lease_keepalive(c, lease2, &ttl, &e));
        assert_int_equal(ttl, 2);
        OK(cdc_etcd_watch_wait(c, k("lease/short"), false, from, 500, &ev, &e));
        for (size_t i = 0; i < ev.count; i++) {
            if (ev.events[i].type == CDC_ETCD_EVENT_DELETE)
                gone = true;
            from = ev.events[i].kv.mod_revision + 1;
        }
        cdc_etcd_events_clear(&ev);
    }
    assert_true(gone);
    assert_int_equal(cdc_etcd_get(c, k("lease/short"), &kv, NULL, &e), CDC_ERR_NOT_FOUND);
    assert_int_equal(cdc_etcd_lease_ttl(c, lease, &ttl, &e), CDC_ERR_FENCED);
    assert_int_equal(cdc_etcd_lease_keepalive(c, lease, &ttl, &e), CDC_ERR_FENCED);
    /* kept alive past the first lease's death */
    OK(cdc_etcd_get(c, k("lease/kept"), &kv, NULL, &e));
    cdc_etcd_kv_clear(&kv);
    /* revoke deletes its keys at once; revoking again is fine */
    OK(cdc_etcd_lease_revoke(c, lease2, &e));
    assert_int_equal(cdc_etcd_get(c, k("lease/kept"), &kv, NULL, &e), CDC_ERR_NOT_FOUND);
    OK(cdc_etcd_lease_revoke(c, lease2, &e));
    /* writing with a dead lease is fenced */
    assert_int_equal(cdc_etcd_put(c, k("lease/dead"), "z", 1, lease2, NULL, &e), CDC_ERR_FENCED);
    cdc_etcd_close(c);
}

typedef struct putter {
    volatile int stop;
    int puts;
} putter_t;

static void *put_loop(void *arg)
{
    putter_t *p = arg;
    cdc_etcd_t *c = client(); /* one client per thread */
    cdc_error_t e;
    char key[256];
    snprintf(key, sizeof(key), "%swatch/live", prefix); /* k() is not thread-safe */
    while (!p->stop) {
        char v[32];
        int n = snprintf(v, sizeof(v), "%d", p->puts++);
        cdc_etcd_put(c, key, v, (size_t)n, 0, NULL, &e);
        usleep(50 * 1000);
    }
    cdc_etcd_close(c);
    return NULL;
}

static void test_watch(void **state)
{
    (void)state;
    cdc_etcd_t *c = client();
    cdc_error_t e;
    cdc_etcd_events_t ev;
    int64_t rev;

    /* history: a watch from an older revision returns the put at once */
    OK(cdc_etcd_put(c, k("watch/a"), "1", 1, 0, &rev, &e));
    OK(cdc_etcd_delete(c, k("watch/a"), false, NULL, &e));
    OK(cdc_etcd_watch_wait(c, k("watch/"), true, rev, 2000, &ev, &e));
    assert_true(ev.count >= 1);
    assert_int_equal(ev.events[0].type, CDC_ETCD_EVENT_PUT);
    assert_string_equal(ev.events[0].kv.key, k("watch/a"));
    assert_string_equal(ev.events[0].kv.value, "1");
    assert_int_equal(ev.events[0].kv.mod_revision, rev);
    cdc_etcd_events_clear(&ev);

    /* nothing new: an empty answer after the timeout */
    int64_t t0 = now_ms();
    OK(cdc_etcd_watch_wait(c, k("watch/none"), false, 0, 300, &ev, &e));
    assert_int_equal(ev.count, 0);
    assert_true(now_ms() - t0 >= 250);
    cdc_etcd_events_clear(&ev);

    /* live: another thread keeps writing; the blocking watch sees a put */
    putter_t p = {0};
    pthread_t th;
    pthread_create(&th, NULL, put_loop, &p);
    OK(cdc_etcd_watch_wait(c, k("watch/live"), false, 0, 5000, &ev, &e));
    p.stop = 1;
    pthread_join(th, NULL);
    assert_true(ev.count >= 1);
    assert_int_equal(ev.events[0].type, CDC_ETCD_EVENT_PUT);
    cdc_etcd_events_clear(&ev);
    cdc_etcd_close(c);
}

static void test_unreachable_and_failover(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_etcd_t *c = NULL;
    cdc_etcd_kv_t kv;
    char eps[512];

    OK(cdc_etcd_open(&c, "http://127.0.0.1:1", 500, &e));
    int64_t t0 = now_ms();
    assert_int_equal(cdc_etcd_put(c, k("x"), "v", 1, 0, NULL, &e), CDC_ERR_UNAVAILABLE);
    assert_true(e.retriable);
    assert_true(now_ms() - t0 < 2000);
    cdc_etcd_close(c);

    /* a dead first member: requests move on to the live one */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:1,%s", getenv("CDC_TEST_ETCD"));
    OK(cdc_etcd_open(&c, eps, 1000, &e));
    OK(cdc_etcd_put(c, k("failover"), "v", 1, 0, NULL, &e));
    OK(cdc_etcd_get(c, k("failover"), &kv, NULL, &e));
    cdc_etcd_kv_clear(&kv);
    cdc_etcd_close(c);

    /* an HTTP server that is not etcd (answers 405 with a non-JSON body): retriable */
    cdc_http_server_t *h = NULL;
    OK(cdc_http_server_open(&h, "127.0.0.1:0", NULL, &e));
    OK(cdc_http_server_start(h, &e));
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d", cdc_http_server_port(h));
    OK(cdc_etcd_open(&c, eps, 1000, &e));
    assert_int_equal(cdc_etcd_get(c, k("x"), &kv, NULL, &e), CDC_ERR_UNAVAILABLE);
    assert_true(e.retriable);
    cdc_etcd_close(c);
    /* ...and failover past it */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,%s", cdc_http_server_port(h),
             getenv("CDC_TEST_ETCD"));
    OK(cdc_etcd_open(&c, eps, 1000, &e));
    OK(cdc_etcd_get(c, k("failover"), &kv, NULL, &e));
    cdc_etcd_kv_clear(&kv);
    cdc_etcd_close(c);
    cdc_http_server_close(h);
}

/* The current etcd pid: read from the harness' pid file, because an earlier test may
 * have restarted etcd (CDC_TEST_ETCD_PID in the environment is only the pid at start). */
static pid_t etcd_pid(void)
{
    pid_t pid = cdc_test_server_pid("etcd");
    if (pid <= 0)
        fail_msg("no etcd pid in $CDC_TEST_TMP/etcd.pid: run under tests/run.sh integration");
    return pid;
}

/* etcd frozen (SIGSTOP) answers nothing: calls time out, retriable, and the same client
 * (with its now stale pooled connection) works again once etcd resumes. */
/* Whether pid is stopped (state T in /proc/<pid>/stat). */
static bool process_stopped(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    size_t n;
    const char *p;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* after "pid (comm)" */
    return p != NULL && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

static void test_frozen_etcd(void **state)
{
    (void)state;
    cdc_etcd_t *c = client();
    cdc_error_t e;
    cdc_etcd_kv_t kv;
    pid_t pid = etcd_pid();

    OK(cdc_etcd_put(c, k("frozen"), "1", 1, 0, NULL, &e));
    cdc_etcd_set_timeout(c, 300);
    assert_int_equal(kill(pid, SIGSTOP), 0);
    /* the stop takes effect a little after kill() returns: wait until etcd is stopped */
    for (int i = 0; i < 200 && !process_stopped(pid); i++)
        usleep(5000);
    assert_true(process_stopped(pid));
    int64_t t0 = now_ms();
    cdc_err_t err = cdc_etcd_get(c, k("frozen"), &kv, NULL, &e);
    int64_t took = now_ms() - t0;
    kill(pid, SIGCONT);
    assert_int_equal(err, CDC_ERR_TIMEOUT);
    assert_true(e.retriable);
    assert_true(took < 2000);

    cdc_etcd_set_timeout(c, 2000);
    int64_t deadline = now_ms() + 10000;
    do {
        err = cdc_etcd_get(c, k("frozen"), &kv, NULL, &e);
    } while (err != CDC_OK && e.retriable && now_ms() < deadline);
    OK(err);
    assert_string_equal(kv.value, "1");
    cdc_etcd_kv_clear(&kv);
    cdc_etcd_close(c);
}

static int thaw(void **state)
{
    (void)state;
    pid_t pid = cdc_test_server_pid("etcd");
    if (pid > 0)
        kill(pid, SIGCONT); /* never leave etcd stopped for later tests */
    return 0;
}

typedef struct campaigner {
    cdc_etcd_election_t *el;
    cdc_err_t err;
    int64_t term;
    char msg[512];
} campaigner_t;

static void *campaign_thread(void *arg)
{
    campaigner_t *cp = arg;
    cdc_error_t e;
    cp->err = cdc_etcd_election_campaign(cp->el, 15000, &cp->term, &e);
    snprintf(cp->msg, sizeof(cp->msg), "%s", e.msg);
    return NULL;
}

static void test_election(void **state)
{
    (void)state;
    cdc_etcd_t *c1 = client(), *c2 = client(), *c3 = client();
    cdc_error_t e;
    cdc_etcd_election_t *a, *b;
    bool won;
    int64_t term1 = 0, term2 = 0, seen = 0;
    char *value = NULL;
    const char *key = k("leader");

    OK(cdc_etcd_election_open(&a, c1, key, "tcp://127.0.0.1:1111", 2, &e));
    OK(cdc_etcd_election_open(&b, c2, key, "tcp://127.0.0.1:2222", 2, &e));
    OK(cdc_etcd_election_try(a, &won, &term1, &e));
    assert_true(won);
    assert_true(cdc_etcd_election_is_leader(a));
    OK(cdc_etcd_election_try(b, &won, &seen, &e));
    assert_false(won);
    assert_int_equal(seen, term1);
    /* trying again while leading keeps the same term */
    OK(cdc_etcd_election_try(a, &won, &seen, &e));
    assert_true(won);
    assert_int_equal(seen, term1);
    OK(cdc_etcd_election_keepalive(a, &e));

    OK(cdc_etcd_leader(c3, key, &value, &seen, &e));
    assert_string_equal(value, "tcp://127.0.0.1:1111");
    assert_int_equal(seen, term1);
    free(value);

    /* b campaigns (blocking, own thread and client); a's lease is revoked */
    campaigner_t cp = {.el = b};
    pthread_t th;
    pthread_create(&th, NULL, campaign_thread, &cp);
    OK(cdc_etcd_election_keepalive(a, &e));
    cdc_etcd_cmp_t fence_a;
    cdc_etcd_election_fence(a, &fence_a);
    OK(cdc_etcd_lease_revoke(c1, cdc_etcd_election_lease(a), &e));
    pthread_join(th, NULL);
    if (cp.err != CDC_OK)
        fail_msg("campaign failed: %s", cp.msg);
    term2 = cp.term;
    assert_true(term2 > term1);
    assert_true(cdc_etcd_election_is_leader(b));
    assert_int_equal(cdc_etcd_election_term(b), term2);

    /* the deposed leader learns it is fenced, and its fenced writes fail */
    assert_int_equal(cdc_etcd_election_keepalive(a, &e), CDC_ERR_FENCED);
    assert_false(cdc_etcd_election_is_leader(a));
    cdc_etcd_txn_result_t r;
    cdc_etcd_op_t put = {.type = CDC_ETCD_OP_PUT, .key = k("latest"), .value = "a", .value_len = 1};
    OK(cdc_etcd_txn(c1, &fence_a, 1, &put, 1, NULL, 0, &r, &e));
    assert_false(r.succeeded);
    cdc_etcd_txn_result_clear(&r);
    cdc_etcd_cmp_t fence_b;
    cdc_etcd_election_fence(b, &fence_b);
    OK(cdc_etcd_txn(c2, &fence_b, 1, &put, 1, NULL, 0, &r, &e));
    assert_true(r.succeeded);
    cdc_etcd_txn_result_clear(&r);

    OK(cdc_etcd_leader(c3, key, &value, &seen, &e));
    assert_string_equal(value, "tcp://127.0.0.1:2222");
    assert_int_equal(seen, term2);
    free(value);

    /* resign frees the key; then nobody leads */
    OK(cdc_etcd_election_resign(b, &e));
    assert_int_equal(cdc_etcd_leader(c3, key, &value, &seen, &e), CDC_ERR_NOT_FOUND);
    /* campaign with a short timeout while someone else holds it */
    OK(cdc_etcd_election_try(a, &won, &term1, &e));
    assert_true(won);
    assert_true(term1 > term2);
    assert_int_equal(cdc_etcd_election_campaign(b, 300, &seen, &e), CDC_ERR_TIMEOUT);
    OK(cdc_etcd_election_resign(a, &e));
    OK(cdc_etcd_election_resign(b, &e));
    cdc_etcd_election_close(a);
    cdc_etcd_election_close(b);

    /* regression: a standby whose lease is about to run out must not win with it */
    OK(cdc_etcd_election_open(&a, c1, key, "A", 3, &e));
    OK(cdc_etcd_election_open(&b, c2, key, "B", 3, &e));
    OK(cdc_etcd_election_try(a, &won, &term1, &e));
    assert_true(won);
    OK(cdc_etcd_election_try(b, &won, &seen, &e));
    assert_false(won);
    int64_t ttl = 3, deadline = now_ms() + 10000;
    while (ttl > 1 && now_ms() < deadline) {
        OK(cdc_etcd_election_keepalive(a, &e));
        OK(cdc_etcd_lease_ttl(c3, cdc_etcd_election_lease(b), &ttl, &e));
        if (ttl > 1)
            OK(cdc_etcd_watch_wait(c3, k("never"), false, 0, 100, &(cdc_etcd_events_t){0}, &e));
    }
    assert_true(ttl <= 1);
    OK(cdc_etcd_election_resign(a, &e));
    OK(cdc_etcd_election_try(b, &won, &term2, &e));
    assert_true(won);
    OK(cdc_etcd_lease_ttl(c3, cdc_etcd_election_lease(b), &ttl, &e));
    assert_true(ttl >= 2);
    OK(cdc_etcd_election_resign(b, &e));
    cdc_etcd_election_close(a);
    cdc_etcd_election_close(b);
    cdc_etcd_close(c1);
    cdc_etcd_close(c2);
    cdc_etcd_close(c3);
}

static int setup(void **state)
{
    (void)state;
    snprintf(prefix, sizeof(prefix), "/cdc-test/etcd-%d-%lld/", (int)getpid(), (long long)now_ms());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cdc_etcd_t *c = client();
    cdc_error_t e;
    cdc_etcd_delete(c, prefix, true, NULL, &e);
    cdc_etcd_close(c);
    return 0;
}

/* ---- TLS and authentication --------------------------------------------------------- */

/* A CA, a server certificate for 127.0.0.1 (usable as a client too: etcd's gateway dials
 * its own gRPC server with it), a client certificate without a common name (etcd's
 * gateway refuses client certificates with one once authentication is on), and a CA
 * that signed neither. */
static const char *const MAKE_CERTS =
    "set -e; cd '%s'; exec 2>openssl.log\n"
    "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -subj /CN=test-ca "
    "-days 1\n"
    "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt "
    "-subj /CN=other-ca -days 1\n"
    "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=etcd\n"
    "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' >srv.ext\n"
    "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
    "-out server.crt -extfile srv.ext\n"
    "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /O=cdc\n"
    "printf 'extendedKeyUsage=clientAuth\\n' >cli.ext\n"
    "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
    "-out client.crt -extfile cli.ext\n";

typedef struct tls_etcd {
    char *dir;
    char url[64];
    char ca[512], other_ca[512], cert[512], key[512];
    pid_t pid;
} tls_etcd_t;

static tls_etcd_t tls;

static cdc_etcd_t *tls_client(const char *ca, const char *cert, const char *key, const char *user,
                              const char *password)
{
    cdc_etcd_security_t sec = {ca, cert, key, user, password};
    cdc_etcd_t *c = NULL;
    cdc_error_t e;
    if (cdc_etcd_open_secure(&c, tls.url, &sec, 2000, &e) != CDC_OK)
        fail_msg("%s", e.msg);
    return c;
}

static bool tls_etcd_up(void *arg)
{
    cdc_etcd_t *c = arg;
    cdc_etcd_kv_t kv = {0};
    cdc_error_t e;
    cdc_err_t rc = cdc_etcd_get(c, "/cdc-test/up", &kv, NULL, &e);
    cdc_etcd_kv_clear(&kv);
    return rc == CDC_OK || rc == CDC_ERR_NOT_FOUND;
}

/* etcdctl against the TLS etcd (before authentication is on). */
static void etcdctl(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "ETCDCTL_API=3 etcdctl --endpoints=%s --cacert='%s' --cert='%s' --key='%s' %s "
             ">>'%s/etcdctl.log' 2>&1",
             tls.url, tls.ca, tls.cert, tls.key, args, tls.dir);
    if (system(cmd) != 0)
        fail_msg("etcdctl %s failed (see %s/etcdctl.log)", args, tls.dir);
}

static int tls_teardown(void **state)
{
    (void)state;
    if (tls.pid > 0)
        cdc_test_kill(tls.pid, SIGTERM, 5000);
    tls.pid = 0;
    return 0;
}

static void test_tls_and_auth(void **state)
{
    char cmd[2048], log[600], data[600], pwfile[600];
    int cport, pport, fd;
    cdc_etcd_kv_t kv = {0};
    cdc_etcd_t *c;
    cdc_error_t e;
    FILE *f;
    (void)state;

    tls.dir = cdc_test_mkdtemp("etcd-tls");
    snprintf(cmd, sizeof(cmd), MAKE_CERTS, tls.dir);
    assert_int_equal(system(cmd), 0);
    snprintf(tls.ca, sizeof(tls.ca), "%s/ca.crt", tls.dir);
    snprintf(tls.other_ca, sizeof(tls.other_ca), "%s/other.crt", tls.dir);
    snprintf(tls.cert, sizeof(tls.cert), "%s/client.crt", tls.dir);
    snprintf(tls.key, sizeof(tls.key), "%s/client.key", tls.dir);
    fd = cdc_test_listen_loopback(&cport);
    close(fd);
    fd = cdc_test_listen_loopback(&pport);
    close(fd);
    snprintf(tls.url, sizeof(tls.url), "https://127.0.0.1:%d", cport);
    {
        char peer[64], cluster[96], srv_cert[600], srv_key[600], bin[512] = "";
        FILE *which = popen("command -v etcd", "r"); /* the harness's etcd, from PATH */
        assert_non_null(which);
        if (fgets(bin, sizeof(bin), which) != NULL)
            bin[strcspn(bin, "\n")] = '\0';
        pclose(which);
        snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", pport);
        snprintf(cluster, sizeof(cluster), "tls=%s", peer);
        snprintf(data, sizeof(data), "%s/data", tls.dir);
        snprintf(log, sizeof(log), "%s/etcd.log", tls.dir);
        snprintf(srv_cert, sizeof(srv_cert), "%s/server.crt", tls.dir);
        snprintf(srv_key, sizeof(srv_key), "%s/server.key", tls.dir);
        char *argv[] = {bin,
                        "--name",
                        "tls",
                        "--data-dir",
                        data,
                        "--listen-client-urls",
                        tls.url,
                        "--advertise-client-urls",
                        tls.url,
                        "--listen-peer-urls",
                        peer,
                        "--initial-advertise-peer-urls",
                        peer,
                        "--initial-cluster",
                        cluster,
                        "--cert-file",
                        srv_cert,
                        "--key-file",
                        srv_key,
                        "--client-cert-auth",
                        "--trusted-ca-file",
                        tls.ca,
                        "--auth-token-ttl",
                        "2",
                        "--logger",
                        "zap",
                        "--log-level",
                        "warn",
                        NULL};
        tls.pid = cdc_test_spawn(argv, log);
        assert_true(tls.pid > 0);
    }

    /* the CA, the client certificate: served */
    c = tls_client(tls.ca, tls.cert, tls.key, NULL, NULL);
    if (!cdc_test_wait_for(tls_etcd_up, c, 30000))
        fail_msg("the TLS etcd did not come up (log %s)", log);
    OK(cdc_etcd_put(c, "/cdc-test/tls/a", "1", 1, 0, NULL, &e));
    OK(cdc_etcd_get(c, "/cdc-test/tls/a", &kv, NULL, &e));
    assert_string_equal(kv.value, "1");
    cdc_etcd_kv_clear(&kv);
    cdc_etcd_close(c);
    /* the system's CAs, or a CA that did not sign the server's certificate: refused */
    const char *cas[] = {NULL, tls.other_ca};
    for (int i = 0; i < 2; i++) {
        c = tls_client(cas[i], tls.cert, tls.key, NULL, NULL);
        assert_int_equal(cdc_etcd_get(c, "/cdc-test/tls/a", &kv, NULL, &e), CDC_ERR_UNAVAILABLE);
        if (strstr(e.msg, "certificate") == NULL)
            fail_msg("no word of the certificate in \"%s\"", e.msg);
        cdc_etcd_close(c);
    }
    /* no client certificate for a member with --client-cert-auth: refused */
    c = tls_client(tls.ca, NULL, NULL, NULL, NULL);
    assert_int_not_equal(cdc_etcd_get(c, "/cdc-test/tls/a", &kv, NULL, &e), CDC_OK);
    cdc_etcd_close(c);
    /* a key without its certificate, a user without a password: bad configuration */
    {
        cdc_etcd_security_t half = {tls.ca, NULL, tls.key, NULL, NULL};
        cdc_etcd_security_t nopw = {tls.ca, tls.cert, tls.key, "cdc", ""};
        assert_int_equal(cdc_etcd_open_secure(&c, tls.url, &half, 2000, &e), CDC_ERR_CONFIG);
        assert_int_equal(cdc_etcd_open_secure(&c, tls.url, &nopw, 2000, &e), CDC_ERR_CONFIG);
    }

    /* a user that authenticates before etcd's authentication is on goes without a token,
     * and gets one once it is on (its first refused request authenticates again) */
    cdc_etcd_t *early = tls_client(tls.ca, tls.cert, tls.key, "cdc", "cdc-pw");
    OK(cdc_etcd_put(early, "/cdc-test/tls/early", "1", 1, 0, NULL, &e));

    /* authentication on: user cdc may read and write /cdc* */
    etcdctl("user add root:root-pw");
    etcdctl("user grant-role root root");
    etcdctl("role add cdc");
    etcdctl("role grant-permission cdc --prefix=true readwrite /cdc");
    etcdctl("user add cdc:cdc-pw");
    etcdctl("user grant-role cdc cdc");
    etcdctl("auth enable");

    c = tls_client(tls.ca, tls.cert, tls.key, NULL, NULL);
    assert_int_not_equal(cdc_etcd_put(c, "/cdc-test/tls/b", "2", 1, 0, NULL, &e), CDC_OK);
    cdc_etcd_close(c);
    c = tls_client(tls.ca, tls.cert, tls.key, "cdc", "wrong");
    assert_int_equal(cdc_etcd_get(c, "/cdc-test/tls/a", &kv, NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "refused user \"cdc\""));
    cdc_etcd_close(c);

    OK(cdc_etcd_put(early, "/cdc-test/tls/early", "2", 1, 0, NULL, &e));
    cdc_etcd_close(early);
    c = tls_client(tls.ca, tls.cert, tls.key, "cdc", "cdc-pw");
    {
        int64_t rev = 0, lease = 0;
        cdc_etcd_events_t ev = {0};
        OK(cdc_etcd_put(c, "/cdc-test/tls/b", "2", 1, 0, &rev, &e));
        OK(cdc_etcd_watch_wait(c, "/cdc-test/tls/", true, rev, 2000, &ev, &e));
        assert_int_equal(ev.count, 1);
        cdc_etcd_events_clear(&ev);
        OK(cdc_etcd_lease_grant(c, 5, &lease, &e));
        OK(cdc_etcd_lease_keepalive(c, lease, NULL, &e));
        /* the token expires after 2 s without use: the client authenticates again */
        usleep(3500 * 1000);
        OK(cdc_etcd_get(c, "/cdc-test/tls/b", &kv, NULL, &e));
        assert_string_equal(kv.value, "2");
        cdc_etcd_kv_clear(&kv);
        OK(cdc_etcd_lease_revoke(c, lease, &e));
        /* outside the role's keys: denied, not retried */
        assert_int_not_equal(cdc_etcd_put(c, "/other", "x", 1, 0, NULL, &e), CDC_OK);
        /* cdcctl's options: the leader record of job "tlsjob" read through all of it */
        OK(cdc_etcd_put(c, "/cdc/tlsjob/leader", "{\"id\":\"c-tls\"}", 14, 0, NULL, &e));
    }
    cdc_etcd_close(c);
    snprintf(pwfile, sizeof(pwfile), "%s/etcd-password", tls.dir);
    assert_non_null(f = fopen(pwfile, "w"));
    fputs("cdc-pw\n", f);
    fclose(f);
    {
        char out[512] = "";
        size_t n;
        FILE *p;
        snprintf(cmd, sizeof(cmd),
                 "'%s/cdcctl' --etcd=%s --etcd-ca-file='%s' --etcd-cert-file='%s' "
                 "--etcd-key-file='%s' --etcd-user=cdc --etcd-password-file='%s' --job=tlsjob "
                 "leader 2>&1",
                 cdc_test_env()->build_dir, tls.url, tls.ca, tls.cert, tls.key, pwfile);
        assert_non_null(p = popen(cmd, "r"));
        n = fread(out, 1, sizeof(out) - 1, p);
        out[n] = '\0';
        assert_int_equal(pclose(p), 0);
        if (strstr(out, "\"id\":\"c-tls\"") == NULL)
            fail_msg("cdcctl leader over TLS and auth printed \"%s\"", out);
    }
    tls_teardown(NULL);
    free(tls.dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv),
        cmocka_unit_test(test_txn),
        cmocka_unit_test(test_lease_expiry_and_keepalive),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_unreachable_and_failover),
        cmocka_unit_test_teardown(test_frozen_etcd, thaw),
        cmocka_unit_test(test_election),
        cmocka_unit_test_teardown(test_tls_and_auth, tls_teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
