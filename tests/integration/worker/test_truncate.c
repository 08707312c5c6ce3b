/*
 * TRUNCATE end to end: PostgreSQL -> cdc-capture -> development Kafka broker -> two
 * cdc-worker processes -> cdc-coordinator -> local warehouse, all real processes on the
 * harness's servers. Tables are read back with icebird (tests/js/lib/read_table.mjs), an
 * independent reader.
 *   - rows from the initial snapshot and from streaming, then one transaction with an
 *     insert, TRUNCATE and inserts that reuse keys, then more changes: the mirror holds
 *     exactly the rows written after the truncate, the changelog every change once and
 *     the truncate once (`_op = 't'`)
 *   - a worker killed with kill -9 right after the truncate, replaced by one with an
 *     empty disk
 *   - a replay of the truncate (on every partition) and of a pre-truncate insert, as a
 *     restarted capture would send them: dropped, the tables do not change
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "common/kafka.h"
#include "tests/harness/harness.h"
#include "tests/harness/procs.h"

typedef struct it {
    const cdc_test_env_t *env;
    char name[64]; /* job, slot, publication, topic prefix */
    char *dir;
    char wh[512];
    cdc_test_job_t procs; /* what the capture, coordinator and workers share */
    pid_t capture, coord, workers[2];
    PGconn *pg;
} it_t;

static it_t T;

/* ---- PostgreSQL ------------------------------------------------------------------- */

static void sql(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sql(const char *fmt, ...)
{
    char q[4096];
    va_list ap;
    PGresult *r;
    va_start(ap, fmt);
    vsnprintf(q, sizeof(q), fmt, ap);
    va_end(ap);
    r = PQexec(T.pg, q);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("SQL failed: %s: %s", q, PQresultErrorMessage(r));
    PQclear(r);
}

/* ---- processes ------------------------------------------------------------------- */

/* The coordinator's options: short epochs, a worker declared lost after 1.5 s. */
static const char *const COORD_OPTS[] = {"--commit-interval=300ms", "--rebalance-grace=300ms",
                                         "--heartbeat-timeout=1500ms", NULL};

static pid_t start_capture(void)
{
    pid_t pid = cdc_test_start_capture(&T.procs, T.name, "public.trunc_t", NULL);
    assert_true(pid > 0);
    return pid;
}

static pid_t start_worker(const char *id)
{
    pid_t pid = cdc_test_start_worker(&T.procs, id, "public.trunc_t", NULL);
    assert_true(pid > 0);
    return pid;
}

/* Streaming (the snapshot is done): the capture logs it. */
static bool capture_streaming(void *arg)
{
    char path[700], buf[65536];
    size_t n = 0;
    (void)arg;
    cdc_test_log_path(&T.procs, "capture", T.name, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    if (strstr(buf, "msg=\"streaming slot") == NULL) {
        usleep(100 * 1000); /* pacing between log reads */
        return false;
    }
    return true;
}

/* ---- reading the tables ------------------------------------------------------------ */

static json_t *read_table(const char *name)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "node '%s/../tests/js/lib/read_table.mjs' '%s/public/%s' 2>/dev/null",
             T.env->build_dir, T.wh, name);
    FILE *p = popen(cmd, "r");
    json_t *j = p ? json_loadf(p, 0, NULL) : NULL;
    if (p != NULL)
        pclose(p);
    return j;
}

static long num(json_t *v)
{
    return json_is_string(v) ? atol(json_string_value(v)) : (long)json_integer_value(v);
}

/* Expected mirror content: id -> v; the table must hold exactly these rows. */
typedef struct expect {
    long ids[512];
    const char *vals[512];
    int n;
    char why[256];
} expect_t;

static void expect_add(expect_t *x, long id, const char *v)
{
    for (int i = 0; i < x->n; i++)
        if (x->ids[i] == id) {
            x->vals[i] = v;
            return;
        }
    x->ids[x->n] = id;
    x->vals[x->n++] = v;
}

static bool mirror_matches(void *arg)
{
    expect_t *x = arg;
    json_t *t = read_table("trunc_t"), *rows = json_object_get(t, "rows");
    bool ok = json_array_size(rows) == (size_t)x->n;
    snprintf(x->why, sizeof(x->why), "%zu rows, want %d", json_array_size(rows), x->n);
    for (size_t i = 0; ok && i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        long id = num(json_object_get(r, "id"));
        const char *v = json_string_value(json_object_get(r, "v"));
        bool found = false;
        for (int k = 0; k < x->n && !found; k++)
            if (x->ids[k] == id) {
                found = true;
                if (v == NULL || strcmp(v, x->vals[k]) != 0) {
                    ok = false;
                    snprintf(x->why, sizeof(x->why), "id %ld has v=%s, want %s", id, v ? v : "null",
                             x->vals[k]);
                }
            }
        if (!found) {
            ok = false;
            snprintf(x->why, sizeof(x->why), "unexpected id %ld (v=%s)", id, v ? v : "null");
        }
    }
    json_decref(t);
    if (!ok)
        usleep(300 * 1000); /* pacing between reader runs, not a wait for a condition */
    return ok;
}

static void wait_mirror(expect_t *x, int timeout_ms)
{
    if (!cdc_test_wait_for(mirror_matches, x, timeout_ms))
        fail_msg("mirror table does not hold the expected rows within %d ms: %s (logs in %s)",
                 timeout_ms, x->why, T.dir);
}

/* Changelog checks: every (id, _lsn, _op) once; returns the row count and the number of
 * truncate rows, and copies the truncate row (caller decrefs). */
static size_t changelog(size_t *truncates, json_t **trow, json_t **by_key)
{
    json_t *t = read_table("trunc_t_changelog"), *rows = json_object_get(t, "rows");
    json_t *seen = json_object();
    size_t n = json_array_size(rows);
    *truncates = 0;
    if (trow)
        *trow = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rows, i);
        const char *op = json_string_value(json_object_get(r, "_op"));
        char k[160];
        json_t *id = json_object_get(r, "id"), *lsn = json_object_get(r, "_lsn");
        snprintf(k, sizeof(k), "%ld/%s/%s", json_is_null(id) ? -1 : num(id),
                 json_is_string(lsn) ? json_string_value(lsn) : "?", op ? op : "?");
        if (json_object_get(seen, k) != NULL)
            fail_msg("changelog holds change %s twice", k);
        json_object_set(seen, k, r);
        if (op != NULL && strcmp(op, "t") == 0) {
            (*truncates)++;
            assert_true(json_is_null(id)); /* no row image */
            if (trow && *trow == NULL)
                *trow = json_incref(r);
        }
    }
    if (by_key)
        *by_key = seen;
    else
        json_decref(seen);
    json_decref(t);
    return n;
}

typedef struct cl_want {
    size_t rows;
} cl_want_t;

static bool changelog_has(void *arg)
{
    cl_want_t *w = arg;
    size_t tr;
    size_t n = changelog(&tr, NULL, NULL);
    if (n < w->rows)
        usleep(300 * 1000);
    return n >= w->rows;
}

/* ---- re-producing events as a restarted capture would ------------------------------ */

static void produce_raw(cdc_kafka_producer_t *prod, int32_t partition, const char *key,
                        const char *value)
{
    char topic[256];
    cdc_error_t e;
    cdc_kafka_header_t h[2] = {{"cdc.schema", "1", 1}, {"cdc.op", "t", 1}};
    snprintf(topic, sizeof(topic), "%s.public.trunc_t", T.name);
    if (key != NULL)
        h[1].value = "c";
    cdc_kafka_record_t r = {topic, partition, key, key ? strlen(key) : 0, value, strlen(value), h,
                            2,     0,         NULL};
    assert_int_equal(cdc_kafka_produce(prod, &r, &e), CDC_OK);
}

/* ---- setup ------------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    char conninfo[1024];
    T.env = cdc_test_env();
    T.dir = cdc_test_mkdtemp("truncate-it");
    snprintf(T.name, sizeof(T.name), "trunc%d", (int)getpid());
    snprintf(T.wh, sizeof(T.wh), "%s/warehouse", T.dir);
    T.procs =
        (cdc_test_job_t){.dir = T.dir, .name = T.name, .warehouse = T.wh, .topic_prefix = T.name};
    snprintf(conninfo, sizeof(conninfo), "%s", cdc_test_require("CDC_TEST_PG_DSN"));
    T.pg = PQconnectdb(conninfo);
    if (PQstatus(T.pg) != CONNECTION_OK) {
        fprintf(stderr, "could not connect: %s\n", PQerrorMessage(T.pg));
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cdc_test_kill_all(T.workers, 2, SIGTERM, 5000);
    cdc_test_kill_all(&T.coord, 1, SIGTERM, 5000);
    cdc_test_kill_all(&T.capture, 1, SIGTERM, 5000);
    if (T.pg != NULL) {
        char q[256];
        snprintf(q, sizeof(q),
                 "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE "
                 "slot_name = '%s' AND NOT active",
                 T.name);
        PQclear(PQexec(T.pg, q));
        PQfinish(T.pg);
    }
    return 0;
}

/* ---- the test ---------------------------------------------------------------------- */

static void test_truncate_applied(void **state)
{
    (void)state;
    static expect_t x;

    sql("DROP TABLE IF EXISTS trunc_t");
    sql("CREATE TABLE trunc_t (id bigint PRIMARY KEY, v text NOT NULL)");
    /* 1..40 exist before the capture starts: they arrive as snapshot rows ('r') */
    sql("INSERT INTO trunc_t SELECT g, 'snap' FROM generate_series(1, 40) g");
    T.capture = start_capture();
    if (!cdc_test_wait_for(capture_streaming, NULL, 60000))
        fail_msg("capture did not start streaming (logs in %s)", T.dir);
    T.coord = cdc_test_start_coordinator(&T.procs, "c1", COORD_OPTS);
    assert_true(T.coord > 0);
    T.workers[0] = start_worker("w0");
    T.workers[1] = start_worker("w1");
    /* streamed changes before the truncate */
    sql("INSERT INTO trunc_t SELECT g, 'pre' FROM generate_series(41, 80) g");
    sql("UPDATE trunc_t SET v = 'pre-upd' WHERE id %% 10 = 0");
    sql("DELETE FROM trunc_t WHERE id %% 7 = 0");
    for (long id = 1; id <= 80; id++) {
        if (id % 7 == 0)
            continue;
        expect_add(&x, id, id % 10 == 0 ? "pre-upd" : id <= 40 ? "snap" : "pre");
    }
    wait_mirror(&x, 90000);

    /* one transaction: a row inserted before the truncate never shows; keys reused after */
    long long t0 = cdc_test_now_ms();
    sql("BEGIN");
    sql("INSERT INTO trunc_t VALUES (999, 'gone')");
    sql("UPDATE trunc_t SET v = 'gone' WHERE id = 1");
    sql("TRUNCATE trunc_t");
    sql("INSERT INTO trunc_t SELECT g, 'post' FROM generate_series(1, 30) g");
    sql("COMMIT");
    sql("INSERT INTO trunc_t SELECT g, 'late' FROM generate_series(1001, 1020) g");
    sql("UPDATE trunc_t SET v = 'post-upd' WHERE id <= 5");
    sql("DELETE FROM trunc_t WHERE id = 30");
    /* a worker dies around the truncate; a new one with an empty disk takes its slots
     * and restores their state (truncate marks included) from the warehouse */
    cdc_test_kill(T.workers[1], SIGKILL, 5000);
    T.workers[1] = start_worker("w2");
    x.n = 0;
    for (long id = 1; id <= 29; id++)
        expect_add(&x, id, id <= 5 ? "post-upd" : "post");
    for (long id = 1001; id <= 1020; id++)
        expect_add(&x, id, "late");
    wait_mirror(&x, 90000);
    printf("truncate: mirror exact %lld ms after BEGIN (incl. a worker replacement)\n",
           cdc_test_now_ms() - t0);

    /* changelog: every change once and the truncate once */
    size_t ntr;
    json_t *trow = NULL, *by_key = NULL;
    /* 40 snapshot + 40 inserts + 8 updates + 11 deletes, 1 + 1 (tx), 't', 30 + 20 + 5 + 1 */
    size_t want = 40 + 40 + 8 + 11 + 2 + 1 + 30 + 20 + 5 + 1;
    cl_want_t cw = {want};
    if (!cdc_test_wait_for(changelog_has, &cw, 60000)) {
        size_t tr;
        fail_msg("changelog does not reach %zu rows, has %zu (logs in %s)", want,
                 changelog(&tr, NULL, NULL), T.dir);
    }
    assert_int_equal(changelog(&ntr, &trow, &by_key), want);
    assert_int_equal(ntr, 1);
    assert_non_null(trow);
    assert_int_equal(num(json_object_get(trow, "_kafka_partition")), 0);

    /*
     * A restarted capture re-sends from its last confirmed position: the truncate again on
     * every partition, and an insert from before it (id 50, in its own partition). Then a
     * fresh row, so that we know the workers got past the replays.
     */
    const char *tlsn = json_string_value(json_object_get(trow, "_lsn"));
    const char *tclsn = json_string_value(json_object_get(trow, "_commit_lsn"));
    json_t *ins = NULL;
    {
        const char *k;
        json_t *r;
        json_object_foreach(by_key, k, r)
        {
            if (num(json_object_get(r, "id")) == 50 &&
                strcmp(json_string_value(json_object_get(r, "_op")), "c") == 0)
                ins = r;
        }
    }
    assert_non_null(ins);
    assert_non_null(tlsn);
    assert_non_null(tclsn);
    cdc_kafka_producer_t *prod;
    cdc_kafka_producer_config_t pc = {0};
    cdc_error_t e;
    pc.bootstrap = T.env->kafka;
    pc.linger_ms = 1;
    assert_int_equal(cdc_kafka_producer_new(&pc, &prod, &e), CDC_OK);
    char *val;
    assert_true(asprintf(&val,
                         "{\"before\":null,\"after\":{\"id\":50,\"v\":\"pre\"},\"source\":{"
                         "\"schema\":\"public\",\"table\":\"trunc_t\",\"lsn\":%s,\"txId\":1,"
                         "\"ts_ms\":1,\"sequence\":\"[\\\"%s\\\",\\\"%s\\\"]\"},\"op\":\"c\","
                         "\"ts_ms\":1}",
                         json_string_value(json_object_get(ins, "_lsn")),
                         json_string_value(json_object_get(ins, "_commit_lsn")),
                         json_string_value(json_object_get(ins, "_lsn"))) > 0);
    produce_raw(prod, (int32_t)num(json_object_get(ins, "_kafka_partition")), "{\"id\":50}", val);
    free(val);
    assert_true(asprintf(&val,
                         "{\"before\":null,\"after\":null,\"source\":{\"schema\":\"public\","
                         "\"table\":\"trunc_t\",\"lsn\":%s,\"txId\":1,\"ts_ms\":1,\"sequence\":"
                         "\"[\\\"%s\\\",\\\"%s\\\"]\"},\"op\":\"t\",\"ts_ms\":1}",
                         tlsn, tclsn, tlsn) > 0);
    for (int32_t p = 0; p < 12; p++)
        produce_raw(prod, p, NULL, val);
    free(val);
    assert_int_equal(cdc_kafka_producer_flush(prod, 20000, &e), CDC_OK);
    cdc_kafka_producer_free(prod);
    json_decref(trow);
    json_decref(by_key);

    /* 120 new keys: every partition gets rows after its replayed truncate (per-partition
     * order), so once they are all in, every replay was processed */
    sql("INSERT INTO trunc_t SELECT g, 'after-replay' FROM generate_series(2001, 2120) g");
    for (long id = 2001; id <= 2120; id++)
        expect_add(&x, id, "after-replay");
    wait_mirror(&x, 60000);
    /* the changelog got only the new inserts: the replays were dropped */
    cw.rows = want + 120;
    if (!cdc_test_wait_for(changelog_has, &cw, 30000))
        fail_msg("changelog does not reach %zu rows (logs in %s)", want + 120, T.dir);
    assert_int_equal(changelog(&ntr, NULL, NULL), want + 120);
    assert_int_equal(ntr, 1);
    /* and the mirror is still exact (id 50 did not come back) */
    assert_true(mirror_matches(&x));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_truncate_applied, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
