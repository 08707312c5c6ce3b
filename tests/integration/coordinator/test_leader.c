/*
 * Component tests of coordinator/leader.c, the coordinators' leader election with its
 * lease renewal thread (docs/protocol.md, "Finding the leader"), against the harness's
 * real etcd (CDC_TEST_ETCD): of two candidates one leads and the other waits, the term is
 * the leader key's create_revision, the renewal thread keeps the lease past several TTLs,
 * the standby takes over after a resignation, a step-down or the end of the old lease,
 * and leadership is lost when the lease is revoked, the key is deleted or replaced, or
 * etcd does not answer for a whole TTL. Waits poll with a deadline.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/cluster.h"
#include "coordinator/leader.h"
#include "tests/harness/etcd_job.h"
#include "tests/harness/harness.h"

#define TTL_S 2 /* etcd's smallest lease TTL with its default heartbeat */
#define TIMEOUT_MS 2000
#define AWAIT_MS 10000

typedef struct fixture {
    char job[192];
    char key[256];
    cdc_etcd_t *etcd;    /* the test's own view of etcd */
    cdc_etcd_t *ca, *cb; /* the candidates' main-thread clients */
    cdc_leader_t a, b;
} fixture_t;

static int job_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    cdc_test_job_name(f->job, sizeof(f->job), "leader");
    cdc_cluster_key(f->key, sizeof(f->key), f->job, "leader");
    f->etcd = cdc_test_etcd_open(TIMEOUT_MS);
    f->ca = cdc_test_etcd_open(TIMEOUT_MS);
    f->cb = cdc_test_etcd_open(TIMEOUT_MS);
    *state = f;
    return 0;
}

static int job_teardown(void **state)
{
    fixture_t *f = *state;

    cdc_leader_close(&f->a, true); /* a no-op for one never opened or closed already */
    cdc_leader_close(&f->b, true);
    cdc_test_job_drop(f->job);
    cdc_etcd_close(f->etcd);
    cdc_etcd_close(f->ca);
    cdc_etcd_close(f->cb);
    free(f);
    return 0;
}

/* The leader record a candidate named id publishes (as the coordinator builds it). */
static void record(const char *id, char *buf, size_t size)
{
    cdc_leader_record_t r;
    char *json;

    memset(&r, 0, sizeof(r));
    snprintf(r.id, sizeof(r.id), "%s", id);
    snprintf(r.endpoint, sizeof(r.endpoint), "tcp://127.0.0.1:7100");
    snprintf(r.admin, sizeof(r.admin), "127.0.0.1:7180");
    json = cdc_leader_record_json(&r);
    assert_non_null(json);
    snprintf(buf, size, "%s", json);
    free(json);
}

static void open_candidate(fixture_t *f, cdc_leader_t *l, cdc_etcd_t *c, const char *id,
                           int timeout_ms)
{
    char value[512];
    cdc_error_t e;

    record(id, value, sizeof(value));
    CDC_TEST_OK(cdc_leader_open(l, c, cdc_test_require("CDC_TEST_ETCD"), NULL, timeout_ms, f->job,
                                value, TTL_S, &e),
                e);
}

typedef struct await {
    cdc_leader_t *l;
    cdc_leader_event_t want;
    cdc_leader_event_t other; /* an event other than want seen on the way */
} await_t;

static bool ticked_to(void *arg)
{
    await_t *w = arg;
    cdc_leader_event_t ev = cdc_leader_tick(w->l, cdc_clock_mono_ms());

    if (ev != CDC_LEADER_NONE && ev != w->want)
        w->other = ev;
    return ev == w->want;
}

/* Ticks l until it reports want (fails the test after AWAIT_MS or on another event). */
static void await_event(cdc_leader_t *l, cdc_leader_event_t want)
{
    await_t w = {.l = l, .want = want};

    if (!cdc_test_wait_for(ticked_to, &w, AWAIT_MS))
        fail_msg("no event %d from the candidate of \"%s\" within %d ms (last error: %s)", want,
                 l->key, AWAIT_MS, l->last_error);
    assert_int_equal(w.other, CDC_LEADER_NONE);
}

typedef struct hold {
    cdc_leader_t *l[2];
    cdc_leader_event_t ev;
} hold_t;

static bool any_event(void *arg)
{
    hold_t *h = arg;

    for (int i = 0; i < 2 && h->ev == CDC_LEADER_NONE; i++)
        h->ev = cdc_leader_tick(h->l[i], cdc_clock_mono_ms());
    return h->ev != CDC_LEADER_NONE;
}

/* Ticks both candidates for ms and asserts that nothing changes meanwhile. */
static void assert_steady(fixture_t *f, int ms)
{
    hold_t h = {.l = {&f->a, &f->b}};

    assert_false(cdc_test_wait_for(any_event, &h, ms));
    assert_int_equal(h.ev, CDC_LEADER_NONE);
}

/* The leader key is held by l: its create_revision is l's term, its lease l's. */
static void assert_holds_key(fixture_t *f, cdc_leader_t *l, const char *id)
{
    cdc_etcd_kv_t kv;
    cdc_error_t e;
    char value[512];

    record(id, value, sizeof(value));
    CDC_TEST_OK(cdc_etcd_get(f->etcd, f->key, &kv, NULL, &e), e);
    assert_true(l->term > 0);
    assert_int_equal(kv.create_revision, l->term);
    assert_int_equal(kv.lease, cdc_etcd_election_lease(l->el));
    assert_string_equal(kv.value, value);
    cdc_etcd_kv_clear(&kv);
}

static void assert_no_key(fixture_t *f)
{
    cdc_etcd_kv_t kv;
    cdc_error_t e;

    assert_int_equal(cdc_etcd_get(f->etcd, f->key, &kv, NULL, &e), CDC_ERR_NOT_FOUND);
}

/* a wins (it campaigns first), b tries and stays standby. */
static void elect_a(fixture_t *f)
{
    open_candidate(f, &f->a, f->ca, "a", TIMEOUT_MS);
    open_candidate(f, &f->b, f->cb, "b", TIMEOUT_MS);
    await_event(&f->a, CDC_LEADER_ELECTED);
    assert_true(cdc_leader_is_leader(&f->a));
    assert_int_equal(cdc_leader_tick(&f->b, cdc_clock_mono_ms()), CDC_LEADER_NONE);
    assert_false(cdc_leader_is_leader(&f->b));
    assert_string_equal(f->b.last_error, ""); /* it campaigned and lost, no error */
    assert_int_equal(f->b.term, 0);
    assert_holds_key(f, &f->a, "a");
}

/* b, the standby, wins the key in a term after a's. */
static void assert_b_takes_over(fixture_t *f, int64_t term_a)
{
    await_event(&f->b, CDC_LEADER_ELECTED);
    assert_true(cdc_leader_is_leader(&f->b));
    assert_true(f->b.term > term_a);
    assert_holds_key(f, &f->b, "b");
}

/* The renewal thread keeps the lease for 2.5 TTLs while the main thread only ticks;
 * the standby never gets in. */
static void test_one_leader_one_standby(void **state)
{
    fixture_t *f = *state;
    int64_t term, ttl = 0;
    cdc_error_t e;

    elect_a(f);
    term = f->a.term;
    assert_steady(f, TTL_S * 2500);
    assert_true(cdc_leader_is_leader(&f->a));
    assert_false(cdc_leader_is_leader(&f->b));
    assert_int_equal(f->a.term, term);
    assert_holds_key(f, &f->a, "a");
    CDC_TEST_OK(cdc_etcd_lease_ttl(f->etcd, cdc_etcd_election_lease(f->a.el), &ttl, &e), e);
    assert_true(ttl > 0);
    assert_true(cdc_clock_mono_ms() - atomic_load(&f->a.renewed_ms) < TTL_S * 1000);
}

/* Closing with resign frees the key at once; the standby wins it in a later term. */
static void test_resign_hands_over(void **state)
{
    fixture_t *f = *state;
    int64_t term_a;

    elect_a(f);
    term_a = f->a.term;
    cdc_leader_close(&f->a, true);
    assert_false(cdc_leader_is_leader(&f->a));
    assert_no_key(f);
    assert_b_takes_over(f, term_a);
}

/* Closing without resigning (a crash) leaves the key to its lease: the standby wins only
 * once the lease has run out. */
static void test_close_without_resign(void **state)
{
    fixture_t *f = *state;
    cdc_etcd_kv_t kv;
    cdc_error_t e;
    int64_t term_a;

    elect_a(f);
    term_a = f->a.term;
    cdc_leader_close(&f->a, false);
    CDC_TEST_OK(cdc_etcd_get(f->etcd, f->key, &kv, NULL, &e), e);
    assert_int_equal(kv.create_revision, term_a);
    cdc_etcd_kv_clear(&kv);
    assert_b_takes_over(f, term_a);
}

/* Stepping down revokes the lease at once; the standby takes over and the one that
 * stepped down does not get the key back. */
static void test_step_down(void **state)
{
    fixture_t *f = *state;
    int64_t term_a;

    elect_a(f);
    term_a = f->a.term;
    cdc_leader_step_down(&f->a, "test");
    assert_false(cdc_leader_is_leader(&f->a));
    assert_int_equal(f->a.term, 0);
    assert_no_key(f);
    assert_b_takes_over(f, term_a);
    assert_steady(f, 1000); /* a keeps campaigning, and losing */
    assert_false(cdc_leader_is_leader(&f->a));
}

/* A lease revoked behind the leader's back: the renewal thread reports it and the next
 * tick says CDC_LEADER_LOST, once; campaigning again wins a later term. */
static void test_lease_revoked(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    int64_t term_a;

    open_candidate(f, &f->a, f->ca, "a", TIMEOUT_MS);
    await_event(&f->a, CDC_LEADER_ELECTED);
    term_a = f->a.term;
    CDC_TEST_OK(cdc_etcd_lease_revoke(f->etcd, cdc_etcd_election_lease(f->a.el), &e), e);
    await_event(&f->a, CDC_LEADER_LOST);
    assert_false(cdc_leader_is_leader(&f->a));
    assert_int_equal(f->a.term, 0);
    assert_non_null(strstr(f->a.last_error, "lost leadership"));
    await_event(&f->a, CDC_LEADER_ELECTED);
    assert_true(f->a.term > term_a);
    assert_holds_key(f, &f->a, "a");
}

/* The leader key deleted, or overwritten by someone else, while the lease lives on:
 * lost either way, each with its reason. */
static void test_key_deleted_or_replaced(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;

    open_candidate(f, &f->a, f->ca, "a", TIMEOUT_MS);
    await_event(&f->a, CDC_LEADER_ELECTED);
    CDC_TEST_OK(cdc_etcd_delete(f->etcd, f->key, false, NULL, &e), e);
    await_event(&f->a, CDC_LEADER_LOST);
    assert_non_null(strstr(f->a.last_error, "the key is gone"));

    await_event(&f->a, CDC_LEADER_ELECTED);
    CDC_TEST_OK(cdc_etcd_put(f->etcd, f->key, "{\"id\":\"x\"}", 10, 0, NULL, &e), e);
    await_event(&f->a, CDC_LEADER_LOST);
    assert_false(cdc_leader_is_leader(&f->a));
    assert_non_null(strstr(f->a.last_error, "the key was replaced"));
}

static int thaw(void **state)
{
    pid_t pid = cdc_test_server_pid("etcd");

    if (pid > 0)
        kill(pid, SIGCONT); /* never leave etcd stopped for later tests */
    return job_teardown(state);
}

/* etcd frozen: no renewal succeeds, and after a whole TTL without one the leader steps
 * down (another coordinator may lead by then); once etcd answers again it wins again. */
static void test_frozen_etcd(void **state)
{
    fixture_t *f = *state;
    pid_t pid = cdc_test_server_pid("etcd");
    int64_t lost_at;

    if (pid <= 0)
        fail_msg("no etcd pid in $CDC_TEST_TMP/etcd.pid: run under tests/run.sh integration");
    cdc_etcd_set_timeout(f->ca, 500); /* step_down's resign while etcd is frozen */
    open_candidate(f, &f->a, f->ca, "a", 500);
    await_event(&f->a, CDC_LEADER_ELECTED);
    assert_int_equal(kill(pid, SIGSTOP), 0);
    await_event(&f->a, CDC_LEADER_LOST);
    lost_at = cdc_clock_mono_ms();
    kill(pid, SIGCONT);
    assert_non_null(strstr(f->a.last_error, "lease not renewed for a whole TTL"));
    assert_true(lost_at - atomic_load(&f->a.renewed_ms) >= TTL_S * 1000);
    assert_false(cdc_leader_is_leader(&f->a));
    await_event(&f->a, CDC_LEADER_ELECTED);
    assert_true(cdc_leader_is_leader(&f->a));
}

#define JOB_TEST(t) cmocka_unit_test_setup_teardown(t, job_setup, job_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        JOB_TEST(test_one_leader_one_standby),
        JOB_TEST(test_resign_hands_over),
        JOB_TEST(test_close_without_resign),
        JOB_TEST(test_step_down),
        JOB_TEST(test_lease_revoked),
        JOB_TEST(test_key_deleted_or_replaced),
        cmocka_unit_test_setup_teardown(test_frozen_etcd, job_setup, thaw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
