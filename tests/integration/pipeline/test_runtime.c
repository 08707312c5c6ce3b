/*
 * The distributed epoch runtime end to end, with real processes: cdc-coordinator (one or
 * two), real cdc-worker processes, real etcd and the development Kafka broker. Change
 * events in the capture's format (docs/events.md) are produced straight into Kafka by a
 * loader thread while failures are injected; each test then waits until the committed
 * offsets cover everything produced and checks the mirror and changelog tables with
 * icebird (tests/js/lib/verify_items.mjs): every change exactly once in the changelog,
 * every row exactly once with its final value in the mirror.
 *
 * Failures: kill -9 of a worker mid-epoch, SIGSTOP past the heartbeat timeout then
 * SIGCONT, kill -9 of the leader with a standby, etcd stopped and restarted under load,
 * a coordinator crash between the etcd record and the Iceberg commit, all Kafka brokers
 * down and back up; 1, 3 and 12 workers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "common/etcd.h"
#include "common/iceberg/table.h"
#include "common/kafka.h"
#include "tests/harness/harness.h"
#include "tests/harness/items_schema.h"
#include "tests/harness/procs.h"

#define UPDATE_EVERY 7

typedef struct rt {
    char job[64];
    char prefix[64];
    char topic[160];
    char *dir;
    char wh[1024];
    pid_t coords[2];
    pid_t workers[12];
    int nworkers;
    cdc_etcd_t *ec;
    cdc_test_job_t procs; /* what the coordinators and workers share */
    cdc_kafka_producer_t *prod;
    /* loader */
    pthread_t loader;
    bool loader_running;         /* started and not joined yet */
    int inserts;                 /* ids 1..inserts */
    int rate;                    /* inserts per second */
    _Atomic int produced_events; /* loader thread -> test thread */
    _Atomic bool loader_done;
    uint64_t lsn;
} rt_t;

/* ---- producing ----------------------------------------------------------------------- */

static void produce(rt_t *t, const char *key, const char *value)
{
    static const char ver[] = "1";
    cdc_kafka_header_t h[1] = {{"cdc.schema", ver, 1}};
    cdc_kafka_record_t r = {
        t->topic, CDC_KAFKA_PARTITION_ANY, key, strlen(key), value, strlen(value), h, 1, 0, NULL};
    cdc_error_t e;

    while (cdc_kafka_produce(t->prod, &r, &e) != CDC_OK)
        cdc_kafka_producer_poll(t->prod, 100);
}

static void produce_schema(rt_t *t)
{
    char key[300], doc[2048], stopic[128];
    cdc_error_t e;

    snprintf(key, sizeof(key), "%s/1", t->topic);
    snprintf(doc, sizeof(doc), CDC_TEST_ITEMS_SCHEMA_FMT, t->topic);
    snprintf(stopic, sizeof(stopic), "%s._schemas", t->prefix);
    cdc_kafka_record_t r = {stopic, 0, key, strlen(key), doc, strlen(doc), NULL, 0, 0, NULL};
    assert_int_equal(cdc_kafka_produce(t->prod, &r, &e), CDC_OK);
    assert_int_equal(cdc_kafka_producer_flush(t->prod, 20000, &e), CDC_OK);
}

static void produce_change(rt_t *t, char op, long id)
{
    char key[64], value[512];
    uint64_t lsn = ++t->lsn * 16;

    snprintf(key, sizeof(key), "{\"id\":%ld}", id);
    snprintf(value, sizeof(value),
             "{\"before\":null,\"after\":{\"id\":%ld,\"v\":\"%c%ld\"},\"source\":{"
             "\"schema\":\"public\",\"table\":\"items\",\"lsn\":%" PRIu64 ",\"txId\":%" PRIu64
             ",\"ts_ms\":1709287200000,\"sequence\":\"[\\\"%" PRIu64 "\\\",\\\"%" PRIu64
             "\\\"]\",\"snapshot\":\"false\"},\"op\":\"%c\",\"ts_ms\":1709287200001}",
             id, op == 'c' ? 'i' : 'u', id, lsn, lsn, lsn + 8, lsn, op);
    produce(t, key, value);
    t->produced_events++;
}

static void *loader_main(void *arg)
{
    rt_t *t = arg;
    long long start = cdc_test_now_ms();
    cdc_error_t e;

    for (int id = 1; id <= t->inserts; id++) {
        produce_change(t, 'c', id);
        if (id % UPDATE_EVERY == 0)
            produce_change(t, 'u', id);
        if (id % 100 == 0) {
            /* keep the rate: sleep until this id is due */
            long long due = start + (long long)id * 1000 / t->rate;
            long long now = cdc_test_now_ms();
            cdc_kafka_producer_poll(t->prod, 0);
            if (due > now)
                usleep((useconds_t)(due - now) * 1000);
        }
    }
    cdc_kafka_producer_flush(t->prod, 60000, &e);
    t->loader_done = true;
    return NULL;
}

/* ---- processes -------------------------------------------------------------------------- */

static void start_coordinator(rt_t *t, int idx, const char *fault)
{
    char id[32], faultopt[96];

    snprintf(id, sizeof(id), "coord%d", idx);
    snprintf(faultopt, sizeof(faultopt), "--fault=%s", fault ? fault : "");
    const char *const opts[] = {"--commit-interval=500ms",
                                "--heartbeat-timeout=2s",
                                "--ack-deadline=8s",
                                "--rebalance-grace=500ms",
                                "--restart-delay=100ms",
                                "--lease-ttl=2s",
                                "--etcd-timeout=500ms",
                                "--orphan-interval=0",
                                fault ? faultopt : NULL, /* the end of the list without one */
                                NULL};
    t->coords[idx] = cdc_test_start_coordinator(&t->procs, id, opts);
    assert_true(t->coords[idx] > 0);
}

static void start_worker(rt_t *t, int idx)
{
    char id[32];

    snprintf(id, sizeof(id), "w%02d", idx);
    t->workers[idx] = cdc_test_start_worker(&t->procs, id, "public.items", NULL);
    assert_true(t->workers[idx] > 0);
    if (idx + 1 > t->nworkers)
        t->nworkers = idx + 1;
}

/* Workers w00 .. w<n-1>. */
static void start_workers(rt_t *t, int n)
{
    for (int i = 0; i < n; i++)
        start_worker(t, i);
}

static rt_t *open_rt; /* the running test's runtime, for teardown() */

static void rt_open(rt_t *t, const char *name, int inserts, int rate)
{
    const cdc_test_env_t *env = cdc_test_env();
    cdc_kafka_producer_config_t pc;
    cdc_error_t e;
    static int seq;

    memset(t, 0, sizeof(*t));
    open_rt = t;
    snprintf(t->job, sizeof(t->job), "%s-%d-%d", name, (int)getpid(), ++seq);
    snprintf(t->prefix, sizeof(t->prefix), "rt%d%s%d", (int)getpid(), name, seq);
    snprintf(t->topic, sizeof(t->topic), "%s.public.items", t->prefix);
    t->dir = cdc_test_mkdtemp(name);
    snprintf(t->wh, sizeof(t->wh), "%s/warehouse", t->dir);
    t->procs = (cdc_test_job_t){
        .dir = t->dir, .name = t->job, .warehouse = t->wh, .topic_prefix = t->prefix};
    t->inserts = inserts;
    t->rate = rate;
    assert_int_equal(cdc_etcd_open(&t->ec, env->etcd, 1000, &e), CDC_OK);
    memset(&pc, 0, sizeof(pc));
    pc.bootstrap = env->kafka;
    pc.linger_ms = 5;
    assert_int_equal(cdc_kafka_producer_new(&pc, &t->prod, &e), CDC_OK);
    produce_schema(t);
}

static void rt_start_load(rt_t *t)
{
    assert_int_equal(pthread_create(&t->loader, NULL, loader_main, t), 0);
    t->loader_running = true;
}

static void rt_close(rt_t *t)
{
    cdc_test_kill_all(t->workers, t->nworkers, SIGTERM, 5000);
    cdc_test_kill_all(t->coords, 2, SIGTERM, 5000);
    if (t->loader_running)
        pthread_join(t->loader, NULL); /* it ends on its own: a bounded load, then flush */
    cdc_kafka_producer_free(t->prod);
    cdc_etcd_close(t->ec);
    free(t->dir);
    memset(t, 0, sizeof(*t));
    if (open_rt == t)
        open_rt = NULL;
}

/* A failed assertion leaves the test early: stop its processes and free what it holds. */
static int teardown(void **state)
{
    (void)state;
    if (open_rt != NULL)
        rt_close(open_rt);
    return 0;
}

/* ---- observing progress -------------------------------------------------------------- */

/* Sum of the changelog's committed next offsets of our topic, and its snapshot count. */
static int64_t committed_offsets(rt_t *t, int *snapshots)
{
    char loc[1200];
    cdc_storage_t *st = NULL;
    cdc_ice_table_t *tb = NULL;
    cdc_error_t e;
    int64_t sum = 0;

    *snapshots = 0;
    snprintf(loc, sizeof(loc), "%s/public/items_changelog", t->wh);
    if (cdc_storage_open(t->wh, NULL, &st, &e) != CDC_OK)
        return 0;
    if (cdc_ice_table_load(st, loc, &tb, &e) == CDC_OK) {
        const char *offs = cdc_ice_table_snapshot_property(tb, -1, "cdc.offsets");
        json_t *o = offs ? json_loads(offs, 0, NULL) : NULL;
        json_t *arr = o ? json_object_get(o, t->topic) : NULL;
        for (size_t i = 0; i < json_array_size(arr); i++) {
            json_int_t v = json_integer_value(json_array_get(arr, i));
            if (v > 0)
                sum += v;
        }
        json_decref(o);
        *snapshots = (int)cdc_ice_table_metadata(tb)->nsnapshots;
        cdc_ice_table_close(tb);
    }
    cdc_storage_close(st);
    return sum;
}

/* Waits for `more` further changelog snapshots; returns the elapsed ms. */
/*
 * Waits until `more` further snapshots are committed, or until there is nothing left to
 * commit: the loader is done and every produced event is committed (empty epochs make no
 * snapshot, so once the load has drained no further snapshot can come; the test's final
 * wait_drained_and_verify() then checks the data exactly once).
 */
static long long wait_snapshots(rt_t *t, int more, int timeout_ms)
{
    int before, now;
    long long t0 = cdc_test_now_ms();

    committed_offsets(t, &before);
    while (cdc_test_now_ms() - t0 < timeout_ms) {
        int64_t sum = committed_offsets(t, &now);
        if (now >= before + more)
            return cdc_test_now_ms() - t0;
        if (t->loader_done && sum >= t->produced_events) {
            fprintf(stderr, "job %s: load drained after %d of %d further commits\n", t->job,
                    now - before, more);
            return cdc_test_now_ms() - t0;
        }
        usleep(20000);
    }
    fail_msg("job %s: no %d further commits within %d ms", t->job, more, timeout_ms);
    return -1;
}

/* Records in the test topic: the sum of its partitions' high watermarks. */
static int64_t topic_records(rt_t *t)
{
    cdc_kafka_consumer_config_t cc = {.bootstrap = cdc_test_env()->kafka};
    cdc_kafka_consumer_t *c = NULL;
    cdc_error_t e;
    int64_t total = 0;

    assert_int_equal(cdc_kafka_consumer_new(&cc, &c, &e), CDC_OK);
    for (int32_t p = 0; p < 12; p++) {
        int64_t low = 0, high = 0;
        if (cdc_kafka_consumer_watermarks(c, t->topic, p, &low, &high, 10000, &e) != CDC_OK) {
            cdc_kafka_consumer_free(c);
            fail_msg("watermarks of %s [%d]: %s", t->topic, p, e.msg);
        }
        total += high;
    }
    cdc_kafka_consumer_free(c);
    return total;
}

static void wait_drained_and_verify(rt_t *t, int timeout_ms)
{
    long long t0 = cdc_test_now_ms();
    int snaps = 0;
    int64_t sum = 0, records;
    char cmd[4096];

    while (!t->loader_done && cdc_test_now_ms() - t0 < timeout_ms)
        usleep(50000);
    assert_true(t->loader_done);
    pthread_join(t->loader, NULL);
    t->loader_running = false;
    /* The topic may hold more records than were produced: a producer retry across a broker
     * outage can write a batch twice. The workers must consume all of them (the
     * verification below proves the duplicates did not reach the tables). */
    records = topic_records(t);
    assert_true(records >= t->produced_events);
    while (cdc_test_now_ms() - t0 < timeout_ms) {
        sum = committed_offsets(t, &snaps);
        if (sum >= records)
            break;
        usleep(100000);
    }
    fprintf(stderr,
            "job %s: committed offsets %" PRId64 " of %" PRId64 " records (%d events produced), "
            "%d snapshots\n",
            t->job, sum, records, t->produced_events, snaps);
    assert_int_equal(sum, records);
    snprintf(cmd, sizeof(cmd),
             "cd '%s/../tests/js' && node lib/verify_items.mjs '%s' public items %d %d",
             cdc_test_env()->build_dir, t->wh, t->inserts, UPDATE_EVERY);
    assert_int_equal(system(cmd), 0);
}

static uint64_t etcd_number(rt_t *t, const char *name)
{
    return cdc_test_job_number(&t->procs, t->ec, name);
}

/* Lines of path that contain needle. */
static int count_in_file(const char *path, const char *needle)
{
    char line[4096];
    int n = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, needle) != NULL)
            n++;
    fclose(f);
    return n;
}

/* Waits until path has at least `want` lines containing needle. */
static bool wait_count(const char *path, const char *needle, int want, int timeout_ms)
{
    long long t0 = cdc_test_now_ms();
    while (count_in_file(path, needle) < want) {
        if (cdc_test_now_ms() - t0 >= timeout_ms)
            return false;
        usleep(20000);
    }
    return true;
}

/* ---- tests -------------------------------------------------------------------------------- */

/* As many workers as the test's initial state says (see main()), under a steady load. */
static void test_n_workers(void **state)
{
    static rt_t t; /* static: teardown() closes it after a failed assertion */
    int nworkers = *(int *)*state;
    char name[16];

    snprintf(name, sizeof(name), "plain%d", nworkers);
    rt_open(&t, name, 20000, 5000);
    start_coordinator(&t, 0, NULL);
    start_workers(&t, nworkers);
    rt_start_load(&t);
    wait_drained_and_verify(&t, 120000);
    rt_close(&t);
}

static void test_kill_worker(void **state)
{
    static rt_t t; /* static: teardown() closes it after a failed assertion */
    long long ms;
    (void)state;

    rt_open(&t, "kill", 30000, 3000);
    start_coordinator(&t, 0, NULL);
    start_workers(&t, 3);
    rt_start_load(&t);
    wait_snapshots(&t, 3, 60000);
    usleep(200000); /* mid-epoch */
    cdc_test_kill(t.workers[1], SIGKILL, 2000);
    t.workers[1] = 0;
    ms = wait_snapshots(&t, 1, 30000);
    fprintf(stderr, "BENCH-NOTE recovery_worker_kill_ms %lld\n", ms);
    wait_snapshots(&t, 3, 30000);
    start_worker(&t, 1);
    wait_drained_and_verify(&t, 180000);
    rt_close(&t);
}

static void test_pause_worker(void **state)
{
    static rt_t t; /* static: teardown() closes it after a failed assertion */
    (void)state;

    rt_open(&t, "pause", 90000, 3000); /* 30 s of load: three pause cycles */
    start_coordinator(&t, 0, NULL);
    start_workers(&t, 3);
    rt_start_load(&t);
    wait_snapshots(&t, 3, 60000);
    /* Several pauses, each caught at a different point of the worker's epoch cycle; after
     * each the worker must register again and take an assignment. */
    for (int cycle = 0; cycle < 3; cycle++) {
        char log[1200];
        int assigned, lost;
        cdc_test_log_path(&t.procs, "worker", "w02", log, sizeof(log));
        assigned = count_in_file(log, "msg=\"assignment term");
        cdc_test_log_path(&t.procs, "coordinator", "coord0", log, sizeof(log));
        lost = count_in_file(log, "w02\\\" (incarnation");
        wait_snapshots(&t, 1, 30000);
        usleep((useconds_t)cycle * 170000); /* 0, 170, 340 ms into the 500 ms epoch */
        kill(t.workers[2], SIGSTOP);
        /* declared lost after 2 s of missed heartbeats; the others go on */
        assert_true(wait_count(log, "w02\\\" (incarnation", lost + 1, 30000));
        wait_snapshots(&t, 1 + 2 * cycle, 30000); /* ever longer past being declared lost */
        kill(t.workers[2], SIGCONT);
        cdc_test_log_path(&t.procs, "worker", "w02", log, sizeof(log));
        /* it must notice it was dropped, register again and take an assignment */
        if (!wait_count(log, "msg=\"assignment term", assigned + 1, 30000))
            fail_msg("paused worker w02 did not rejoin (pause %d)", cycle + 1);
    }
    wait_snapshots(&t, 3, 30000);
    wait_drained_and_verify(&t, 180000);
    rt_close(&t);
}

static void test_leader_kill(void **state)
{
    static rt_t t; /* static: teardown() closes it after a failed assertion */
    (void)state;

    rt_open(&t, "leader", 30000, 3000);
    start_coordinator(&t, 0, NULL);
    start_workers(&t, 3);
    rt_start_load(&t);
    wait_snapshots(&t, 2, 60000);
    start_coordinator(&t, 1, NULL);
    wait_snapshots(&t, 2, 30000);
    cdc_test_kill(t.coords[0], SIGKILL, 2000);
    t.coords[0] = 0;
    fprintf(stderr, "leader failover to next commit: %lld ms\n", wait_snapshots(&t, 1, 30000));
    wait_drained_and_verify(&t, 180000);
    rt_close(&t);
}

static void test_etcd_restart(void **state)
{
    static rt_t t; /* static: teardown() closes it after a failed assertion */
    (void)state;

    rt_open(&t, "etcd", 30000, 3000);
    start_coordinator(&t, 0, NULL);
    start_workers(&t, 3);
    rt_start_load(&t);
    wait_snapshots(&t, 3, 60000);
    assert_true(cdc_test_harness("etcd-stop"));
    usleep(3000000);
    assert_true(cdc_test_harness("etcd-start"));
    wait_snapshots(&t, 2, 60000);
    wait_drained_and_verify(&t, 180000);
    rt_close(&t);
}

static void test_crash_after_record(void **state)
{
    static rt_t t; /* static: teardown() closes it after a failed assertion */
    int status = 0;
    uint64_t latest, committed;
    (void)state;

    rt_open(&t, "fault", 30000, 3000);
    start_coordinator(&t, 0, "after-checkpoint-record");
    start_workers(&t, 3);
    rt_start_load(&t);
    assert_true(cdc_test_wait_exit(t.coords[0], 60000, &status));
    t.coords[0] = 0;
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 86);
    latest = etcd_number(&t, "latest");
    committed = etcd_number(&t, "committed");
    assert_true(latest > committed);
    start_coordinator(&t, 1, NULL);
    wait_snapshots(&t, 2, 60000);
    /* The table shows a commit before etcd's committed key does (the coordinator records
     * it after the snapshot): wait for the key, with a deadline. */
    long long t0 = cdc_test_now_ms();
    while ((committed = etcd_number(&t, "committed")) <= latest && cdc_test_now_ms() - t0 < 10000)
        usleep(20000);
    assert_true(committed > latest);
    wait_drained_and_verify(&t, 180000);
    rt_close(&t);
}

/* Kafka brokers down and back up under load (the development broker's control channel). */
static void test_kafka_down(void **state)
{
    static rt_t t; /* static: teardown() closes it after a failed assertion */
    char reply[256];
    (void)state;

    rt_open(&t, "kafka", 30000, 3000);
    start_coordinator(&t, 0, NULL);
    start_workers(&t, 3);
    rt_start_load(&t);
    wait_snapshots(&t, 3, 60000);
    for (int b = 1; b <= 3; b++) {
        char cmd[32];
        snprintf(cmd, sizeof(cmd), "BROKER DOWN %d", b);
        assert_true(cdc_test_kafka_ctl(cmd, reply, sizeof(reply)));
    }
    usleep(3000000);
    for (int b = 1; b <= 3; b++) {
        char cmd[32];
        snprintf(cmd, sizeof(cmd), "BROKER UP %d", b);
        assert_true(cdc_test_kafka_ctl(cmd, reply, sizeof(reply)));
    }
    wait_snapshots(&t, 2, 60000);
    wait_drained_and_verify(&t, 180000);
    rt_close(&t);
}

int main(int argc, char **argv)
{
    static int one = 1, three = 3, twelve = 12;
    const struct CMUnitTest tests[] = {
        {"test_three_workers", test_n_workers, NULL, teardown, &three},
        cmocka_unit_test_teardown(test_kill_worker, teardown),
        cmocka_unit_test_teardown(test_pause_worker, teardown),
        cmocka_unit_test_teardown(test_leader_kill, teardown),
        cmocka_unit_test_teardown(test_etcd_restart, teardown),
        cmocka_unit_test_teardown(test_crash_after_record, teardown),
        {"test_one_worker", test_n_workers, NULL, teardown, &one},
        {"test_twelve_workers", test_n_workers, NULL, teardown, &twelve},
        cmocka_unit_test_teardown(test_kafka_down, teardown),
    };
    if (argc > 2 && strcmp(argv[1], "--only") == 0) {
        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
            if (strcmp(tests[i].name, argv[2]) == 0)
                return _cmocka_run_group_tests("runtime", &tests[i], 1, NULL, NULL);
        return 2;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
