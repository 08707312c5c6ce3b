/* Component tests of common/etcd.c against the harness's real etcd (CDC_TEST_ETCD):
 * KV, transactions on both branches, lease expiry and keep-alive, watch, unreachable
 * endpoints with failover, and leader election with fencing. Waits use deadlines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
