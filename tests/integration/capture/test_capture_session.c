/*
 * Component tests of cdc-capture against the harness PostgreSQL and development Kafka
 * broker: its slot and its session. kill -9 and restart with nothing missing; heartbeats
 * advancing confirmed_flush_lsn while tables are idle; bad setups failing with a message
 * and a fix; a PostgreSQL restart survived; SIGTERM under a backlog exiting within its
 * bound with nothing lost; a slot dropped while the capture was down never silently
 * replaced; a second capture of a slot in use waiting as a standby and taking over;
 * topics created at the start without the development broker's control channel without
 * a stall. Each test uses its own slot, publication and topic prefix, so they do not see
 * each other's events (capture_fixture.h).
 */
#include "tests/integration/capture/capture_fixture.h"

/*
 * Reads the topic of table `t` (columns id, v) until it holds, at least once each, the
 * insert of every id in 1..total, the update to v = 1 of every id <= updated_upto with
 * id % 10 == 0, and the delete of every id % 7 == 0 (within 120 s); fails naming the
 * first change missing. Prints `what` with the event and duplicate counts.
 */
static void expect_changes(const char *t, int total, int updated_upto, const char *what)
{
    evs_t s = {0};
    size_t want = (size_t)total + (size_t)updated_upto / 10 + (size_t)total / 7;
    bool *ins = calloc((size_t)total + 1, 1), *upd = calloc((size_t)total + 1, 1),
         *del = calloc((size_t)total + 1, 1);
    long long t0 = cdc_test_now_ms(), deadline = t0 + 120000;
    char missing[128] = "", topic[256], rest[128];
    snprintf(rest, sizeof(rest), "public.%s", t);
    snprintf(topic, sizeof(topic), "%s", topic_of(t, rest));
    do {
        evs_free(&s);
        consume(topic, &s, want, 60000);
        memset(ins, 0, (size_t)total + 1);
        memset(upd, 0, (size_t)total + 1);
        memset(del, 0, (size_t)total + 1);
        for (size_t i = 0; i < s.n; i++) {
            int id = key_id(&s.v[i]);
            assert_true(id >= 1 && id <= total);
            if (s.v[i].op == 'c')
                ins[id] = true;
            else if (s.v[i].op == 'u' &&
                     json_integer_value(json_object_get(after_of(&s.v[i]), "v")) == 1)
                upd[id] = true;
            else if (s.v[i].op == 'd')
                del[id] = true;
        }
        missing[0] = '\0';
        for (int id = 1; id <= total && !missing[0]; id++) {
            if (!ins[id])
                snprintf(missing, sizeof(missing), "insert of id %d", id);
            else if (id <= updated_upto && id % 10 == 0 && !upd[id])
                snprintf(missing, sizeof(missing), "update of id %d", id);
            else if (id % 7 == 0 && !del[id])
                snprintf(missing, sizeof(missing), "delete of id %d", id);
        }
    } while (missing[0] && cdc_test_now_ms() < deadline);
    if (missing[0])
        fail_msg("%s: %s is missing (read %zu events)", what, missing, s.n);
    print_message("%s: %zu events for %zu changes (%zu duplicates), %lld ms\n", what, s.n, want,
                  s.n - want, cdc_test_now_ms() - t0);
    free(ins);
    free(upd);
    free(del);
    evs_free(&s);
}

static void test_kill9_restart(void **state)
{
    PGconn *c = pg_as(NULL);
    evs_t s = {0};
    pid_t pid;
    int total = 0;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_kill");
    sql(c, "CREATE TABLE ct_kill (id int PRIMARY KEY, v int NOT NULL)");
    pid = start_capture(N("ct_kill"), "public.ct_kill", NULL);
    wait_streaming(c, N("ct_kill"));
    /* 50 transactions of 200 inserts and one of 100,000, then a kill -9 as soon as the
     * first events arrive, while the capture works through the backlog */
    for (int t = 0; t < 50; t++, total += 200)
        sql(c, "INSERT INTO ct_kill SELECT g, 0 FROM generate_series(%d, %d) g", total + 1,
            total + 200);
    sql(c, "INSERT INTO ct_kill SELECT g, 0 FROM generate_series(%d, %d) g", total + 1,
        total + 100000);
    total += 100000;
    sql(c, "UPDATE ct_kill SET v = 1 WHERE id %% 10 = 0");
    consume_q(topic_of("ct_kill", "public.ct_kill"), &s, 1, 30000, 0);
    assert_true(s.n > 0);
    evs_free(&s);
    cdc_test_kill(pid, SIGKILL, 5000);
    /* more changes while the capture is down */
    sql(c, "INSERT INTO ct_kill SELECT g, 0 FROM generate_series(%d, %d) g", total + 1,
        total + 2000);
    total += 2000;
    sql(c, "DELETE FROM ct_kill WHERE id %% 7 = 0");
    pid = start_capture(N("ct_kill"), "public.ct_kill", NULL);
    wait_streaming(c, N("ct_kill"));
    expect_changes("ct_kill", total, total - 2000, "kill -9");
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_kill"));
    PQfinish(c);
}

/* The walsender of slot ct_term sent nothing for 300 ms (blocked on a full socket). */
static bool walsender_blocked(void *arg)
{
    PGconn *c = arg;
    char q[256], *a, *b;
    struct timespec ts = {0, 300 * 1000000};
    bool same;
    snprintf(q, sizeof(q),
             "SELECT coalesce((SELECT r.sent_lsn::text FROM pg_stat_replication r JOIN "
             "pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = '%s'), '')",
             N("ct_term"));
    a = sql1(c, q);
    nanosleep(&ts, NULL);
    b = sql1(c, q);
    same = a[0] != '\0' && strcmp(a, b) == 0;
    free(a);
    free(b);
    return same;
}

/*
 * SIGTERM while the capture streams one large transaction (300,000 rows, far more
 * messages in flight than a stop reads): the capture exits within the shutdown bound
 * (10 s) with status 0, and a restart delivers every change (what PostgreSQL was told is
 * only what Kafka acknowledged).
 */
static void test_sigterm_under_backlog(void **state)
{
    PGconn *c = pg_as(NULL);
    evs_t s = {0};
    pid_t pid;
    int status = 0, total = 300000;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_term");
    sql(c, "CREATE TABLE ct_term (id int PRIMARY KEY, v int NOT NULL)");
    pid = start_capture(N("ct_term"), "public.ct_term", NULL);
    wait_streaming(c, N("ct_term"));
    sql(c, "INSERT INTO ct_term SELECT g, 0 FROM generate_series(1, %d) g", total);
    sql(c, "UPDATE ct_term SET v = 1 WHERE id %% 10 = 0 AND id <= 1000");
    consume_q(topic_of("ct_term", "public.ct_term"), &s, 1, 30000, 0);
    assert_true(s.n > 0);
    evs_free(&s);
    /* Stopped, the capture reads nothing: the walsender fills the socket buffers and
     * blocks (its sent_lsn stops moving), so that far more than a thousand messages are
     * in flight when the stop begins. */
    kill(pid, SIGSTOP);
    if (!cdc_test_wait_for(walsender_blocked, c, 30000))
        fail_msg("the walsender kept sending to a stopped capture");
    long long t0 = cdc_test_now_ms();
    kill(pid, SIGCONT);
    kill(pid, SIGTERM);
    bool exited = cdc_test_wait_exit(pid, 10000, &status);
    long long took = cdc_test_now_ms() - t0;
    if (!exited) {
        cdc_test_kill(pid, SIGKILL, 5000);
        fail_msg("the capture did not exit within 10 s of SIGTERM under a backlog");
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    print_message("SIGTERM under a backlog: exited in %lld ms\n", took);
    sql(c, "DELETE FROM ct_term WHERE id %% 7 = 0");
    pid = start_capture(N("ct_term"), "public.ct_term", NULL);
    wait_streaming(c, N("ct_term"));
    expect_changes("ct_term", total, 1000, "SIGTERM under a backlog");
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_term"));
    PQfinish(c);
}

/*
 * The slot this capture streamed from is dropped by hand while it is down: the next
 * start exits with status 3 and a message naming the slot and the way back, never
 * starting from a new position; with --slot-lost=resnapshot it creates the slot again
 * and re-reads the table, a truncate (a backfill's) before the rows so that the mirror
 * loses the rows deleted while no slot existed.
 */
static void test_slot_lost(void **state)
{
    PGconn *c = pg_as(NULL);
    evs_t s = {0};
    pid_t pid;
    int status = 0;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_lost");
    sql(c, "CREATE TABLE ct_lost (id int PRIMARY KEY, v int NOT NULL)");
    pid = start_capture(N("ct_lost"), "public.ct_lost", NULL);
    wait_streaming(c, N("ct_lost"));
    sql(c, "INSERT INTO ct_lost SELECT g, 0 FROM generate_series(1, 10) g");
    consume_q(topic_of("ct_lost", "public.ct_lost"), &s, 10, 30000, 0);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    evs_free(&s);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_lost"));
    /* changes no slot records */
    sql(c, "INSERT INTO ct_lost SELECT g, 0 FROM generate_series(11, 15) g");
    sql(c, "DELETE FROM ct_lost WHERE id IN (1, 2)");

    pid = start_capture(N("ct_lost"), "public.ct_lost", NULL);
    if (!cdc_test_wait_exit(pid, 30000, &status)) {
        cdc_test_kill(pid, SIGKILL, 5000);
        fail_msg("a capture whose slot was dropped kept running");
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);
    assert_non_null(strstr(read_log(), "no longer exists"));
    assert_non_null(strstr(read_log(), "--slot-lost=resnapshot"));
    {
        char q[256], *n;
        snprintf(q, sizeof(q), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
                 N("ct_lost"));
        n = sql1(c, q);
        assert_string_equal(n, "0"); /* no new slot was created */
        free(n);
    }

    pid = start_capture(N("ct_lost"), "public.ct_lost", "--slot-lost=resnapshot");
    wait_streaming(c, N("ct_lost"));
    consume_q(topic_of("ct_lost", "public.ct_lost"), &s, 10 + 13, 30000, 1000);
    {
        size_t truncs = 0, reread = 0;
        uint64_t trunc_lsn = 0, row_lsn = 0;
        for (size_t i = 0; i < s.n; i++) {
            const char *snap = str_at(json_object_get(s.v[i].value, "source"), "snapshot");
            if (s.v[i].op == 't') {
                assert_string_equal(snap, "backfill");
                truncs++;
                trunc_lsn = s.v[i].lsn;
            } else if (s.v[i].op == 'r') {
                reread++;
                row_lsn = s.v[i].lsn;
                assert_true(key_id(&s.v[i]) > 2); /* the deleted rows are not re-read */
            }
        }
        assert_true(truncs >= 1);
        assert_int_equal(reread, 13);
        assert_true(trunc_lsn < row_lsn);
    }
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_lost"));
    PQfinish(c);
}

/*
 * Two captures of one slot, the second started while the first snapshots 20,000 rows
 * (when the slot itself is not active: the captures' advisory lock tells): the second
 * finds the slot in use, says which PID holds it and waits as a standby (it keeps
 * running). When the first is killed (kill -9) the
 * standby takes the slot over within a few seconds, from the registry as the first left
 * it: no second snapshot (it read the registry before the snapshot's marker existed),
 * and every change arrives.
 */
static void test_standby_capture(void **state)
{
    PGconn *c = pg_as(NULL);
    pid_t a, b;
    int status;
    evs_t s = {0};
    size_t reads = 0;
    log_count_t busy = {"is in use by PID", 1}, streaming = {"msg=\"streaming slot", 2},
                snapshotting = {"snapshot of public.ct_sb started", 1};
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_sb");
    sql(c, "CREATE TABLE ct_sb (id int PRIMARY KEY, v int NOT NULL)");
    sql(c, "INSERT INTO ct_sb SELECT g, 0 FROM generate_series(1, 20000) g");
    a = start_capture(N("ct_sb"), "public.ct_sb", NULL);
    /* the second starts while the first snapshots (the slot is not active then) */
    if (!cdc_test_wait_for(log_has_count, &snapshotting, 30000))
        fail_msg("the first capture did not start its snapshot");
    b = start_capture(N("ct_sb"), "public.ct_sb", NULL);
    wait_streaming(c, N("ct_sb"));
    if (!cdc_test_wait_for(log_has_count, &busy, 30000)) {
        const char *l = read_log();
        fail_msg("the second capture did not report the slot in use: ...%s",
                 strlen(l) > 3000 ? l + strlen(l) - 3000 : l);
    }
    assert_false(cdc_test_wait_exit(b, 1500, &status)); /* a standby, not an exit */
    assert_false(cdc_test_wait_exit(a, 0, &status));
    sql(c, "INSERT INTO ct_sb SELECT g, 0 FROM generate_series(20001, 21000) g");
    cdc_test_kill(a, SIGKILL, 5000);
    long long t0 = cdc_test_now_ms();
    if (!cdc_test_wait_for(log_has_count, &streaming, 30000)) {
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "tail -n 40 '%s' >&2", log_path);
        (void)system(cmd);
        fail_msg("the standby capture did not take the slot over");
    }
    print_message("standby took the slot over %lld ms after the kill\n", cdc_test_now_ms() - t0);
    assert_true(cdc_test_now_ms() - t0 < 15000);
    sql(c, "INSERT INTO ct_sb SELECT g, 0 FROM generate_series(21001, 22000) g");
    sql(c, "DELETE FROM ct_sb WHERE id %% 7 = 0 AND id > 20000");
    consume_q(topic_of("ct_sb", "public.ct_sb"), &s, 20000 + 2000 + 2000 / 7, 60000, 2000);
    for (size_t i = 0; i < s.n; i++)
        reads += s.v[i].op == 'r';
    if (reads != 20000) {
        const char *l = read_log();
        fail_msg("%zu snapshot rows, expected 20000 (one snapshot): ...%s", reads,
                 strlen(l) > 6000 ? l + strlen(l) - 6000 : l);
    }
    {
        /* every insert after the snapshot and every delete arrived */
        static bool ins[22001], del[22001];
        for (size_t i = 0; i < s.n; i++) {
            int id = key_id(&s.v[i]);
            if (id > 20000 && id <= 22000 && s.v[i].op == 'c')
                ins[id] = true;
            if (id > 20000 && id <= 22000 && s.v[i].op == 'd')
                del[id] = true;
        }
        for (int id = 20001; id <= 22000; id++) {
            if (!ins[id])
                fail_msg("the insert of id %d is missing", id);
            if (id % 7 == 0 && !del[id])
                fail_msg("the delete of id %d is missing", id);
        }
        evs_free(&s);
    }
    assert_int_equal(WEXITSTATUS(cdc_test_kill(b, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_sb"));
    PQfinish(c);
}

typedef struct flush_wait {
    PGconn *c;
    uint64_t target;
} flush_wait_t;

static bool flushed_past(void *arg)
{
    flush_wait_t *w = arg;
    char q[256];
    char *v;
    snprintf(q, sizeof(q),
             "SELECT coalesce(confirmed_flush_lsn::text, '0/0') FROM pg_replication_slots "
             "WHERE slot_name = '%s'",
             N("ct_hb"));
    v = sql1(w->c, q);
    bool ok = lsn_of(v) >= w->target;
    free(v);
    return ok;
}

static void test_heartbeat_advances_slot(void **state)
{
    PGconn *c = pg_as(NULL);
    flush_wait_t w = {c, 0};
    char *v;
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_hb; DROP TABLE IF EXISTS ct_hb_other");
    sql(c, "CREATE TABLE ct_hb (id int PRIMARY KEY); CREATE TABLE ct_hb_other (id int)");
    static const char *const opts[] = {"--heartbeat-interval=200ms", "--http=127.0.0.1:0", NULL};
    pid = start_capture_opts(N("ct_hb"), "public.ct_hb", opts);
    wait_streaming(c, N("ct_hb"));
    /* WAL that the captured table never sees */
    sql(c, "INSERT INTO ct_hb_other SELECT generate_series(1, 10000)");
    v = sql1(c, "SELECT pg_current_wal_lsn()");
    w.target = lsn_of(v);
    free(v);
    if (!cdc_test_wait_for(flushed_past, &w, 20000))
        fail_msg("confirmed_flush_lsn did not advance past %llx while idle",
                 (unsigned long long)w.target);
    /* /status: streaming, with the slot's WAL retention (no max_slot_wal_keep_size here) */
    {
        json_t *st = capture_status();
        assert_string_equal(json_string_value(json_object_get(st, "state")), "streaming");
        assert_string_equal(json_string_value(json_object_get(st, "slot")), N("ct_hb"));
        assert_true(json_is_integer(json_object_get(st, "retained_wal_bytes")));
        assert_true(json_integer_value(json_object_get(st, "retained_wal_bytes")) >= 0);
        assert_true(json_is_null(json_object_get(st, "safe_wal_bytes")));
        assert_int_equal(json_array_size(json_object_get(st, "tables")), 1);
        json_decref(st);
        assert_true(metric("cdc_capture_slot_retained_wal_bytes") >= 0);
    }
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_hb"));
    PQfinish(c);
}

static void test_reconnect_after_pg_restart(void **state)
{
    PGconn *c = pg_as(NULL);
    evs_t s = {0};
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_rc");
    sql(c, "CREATE TABLE ct_rc (id int PRIMARY KEY)");
    pid = start_capture(N("ct_rc"), "public.ct_rc", "--reconnect-max=1s");
    wait_streaming(c, N("ct_rc"));
    sql(c, "INSERT INTO ct_rc SELECT generate_series(1, 100)");
    PQfinish(c);
    assert_true(cdc_test_harness("pg-stop"));
    assert_true(cdc_test_harness("pg-start"));
    c = pg_as(NULL);
    sql(c, "INSERT INTO ct_rc SELECT generate_series(101, 200)");
    consume(topic_of("ct_rc", "public.ct_rc"), &s, 200, 60000);
    {
        bool seen[201] = {false};
        for (size_t i = 0; i < s.n; i++) {
            int id = key_id(&s.v[i]);
            assert_true(id >= 1 && id <= 200);
            seen[id] = true;
        }
        for (int id = 1; id <= 200; id++)
            if (!seen[id])
                fail_msg("insert of id %d missing after the restart", id);
    }
    assert_non_null(strstr(read_log(), "retrying in"));
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_rc"));
    PQfinish(c);
}

static void test_bad_setup(void **state)
{
    PGconn *c = pg_as(NULL);
    char dsn[700];
    const char *log;
    (void)state;

    /* a missing table */
    assert_int_equal(run_to_exit(N("ct_bad1"), "public.ct_does_not_exist", NULL), 1);
    log = read_log();
    assert_non_null(strstr(log, "table \"public.ct_does_not_exist\" does not exist"));
    assert_non_null(strstr(log, "hint"));

    /* a table without a key */
    sql(c, "DROP TABLE IF EXISTS ct_nokey; CREATE TABLE ct_nokey (a int)");
    assert_int_equal(run_to_exit(N("ct_bad2"), "public.ct_nokey", NULL), 1);
    log = read_log();
    assert_non_null(strstr(log, "has no primary key"));
    assert_non_null(strstr(log, "REPLICA IDENTITY FULL"));

    /* a role without REPLICATION */
    sql(c, "CREATE ROLE ct_norepl_%s LOGIN", tag);
    sql(c, "GRANT SELECT ON ct_nokey TO ct_norepl_%s", tag);
    snprintf(dsn, sizeof(dsn), "--pg-dsn=%s user=ct_norepl_%s", cdc_test_require("CDC_TEST_PG_DSN"),
             tag);
    {
        pid_t pid = start_capture(N("ct_bad3"), "public.ct_nokey", dsn);
        int status = 0;
        assert_true(cdc_test_wait_exit(pid, 30000, &status));
        assert_int_equal(WEXITSTATUS(status), 1);
    }
    log = read_log();
    assert_non_null(strstr(log, "lacks the REPLICATION attribute"));
    assert_non_null(strstr(log, "ALTER ROLE"));

    /* a missing publication without --create-publication is reported with the SQL */
    sql(c, "DROP TABLE IF EXISTS ct_publess; CREATE TABLE ct_publess (id int PRIMARY KEY)");
    {
        char dsn2[700];
        pid_t pid;
        int status = 0;
        snprintf(dsn2, sizeof(dsn2), "--create-publication=false");
        pid = start_capture(N("ct_bad4"), "public.ct_publess", dsn2);
        assert_true(cdc_test_wait_exit(pid, 30000, &status));
        assert_int_equal(WEXITSTATUS(status), 1);
        log = read_log();
        snprintf(dsn2, sizeof(dsn2), "publication \"%s\" does not exist", N("ct_bad4"));
        assert_non_null(strstr(log, dsn2));
        assert_non_null(strstr(log, "CREATE PUBLICATION"));
    }
    PQfinish(c);
}

/*
 * Topics created without the development broker's control channel (a capture started by
 * hand next to `make run`, issue 18): before, every topic creation (the registry's two,
 * then each table's) waited 30 s for a controller the broker does not have, with the
 * stream stalled. Now the first event of a new table comes within seconds of the start,
 * and a table added to --tables gets its topic at the session's start, before streaming.
 */
static void test_topics_without_control(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *control = getenv("CDC_KAFKA_DEV_CONTROL");
    char saved[128], streaming[160];
    evs_t s = {0};
    long long start, took;
    pid_t pid;
    (void)state;

    snprintf(saved, sizeof(saved), "%s", control ? control : "");
    unsetenv("CDC_KAFKA_DEV_CONTROL");
    sql(c, "DROP TABLE IF EXISTS ct_top_a, ct_top_b");
    sql(c, "CREATE TABLE ct_top_a (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_top_b (id int PRIMARY KEY, v int)");
    sql(c, "INSERT INTO ct_top_a VALUES (1, 1)");
    start = cdc_test_now_ms();
    pid = start_capture(N("ct_top"), "public.ct_top_a", NULL);
    consume_q(topic_of("ct_top", "public.ct_top_a"), &s, 1, 120000, 0);
    took = cdc_test_now_ms() - start;
    assert_int_equal(s.n, 1);
    evs_free(&s);
    print_message("first event of a new table's topic %lld ms after the capture's start\n", took);
    if (took > 15000)
        fail_msg("the first event of a new topic came %lld ms after the start", took);
    wait_streaming(c, N("ct_top"));
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);

    /* ct_top_b joins --tables: its topic is made before the session streams */
    start = cdc_test_now_ms();
    pid = start_capture(N("ct_top"), "public.ct_top_a,public.ct_top_b", NULL);
    snprintf(streaming, sizeof(streaming), "(publication %s, 2 tables)", N("ct_top"));
    if (!cdc_test_wait_for(log_has, streaming, 60000))
        fail_msg("the capture did not stream both tables; log: %s", read_log());
    sql(c, "INSERT INTO ct_top_b VALUES (1, 1)");
    sql(c, "INSERT INTO ct_top_a VALUES (2, 2)");
    consume_q(topic_of("ct_top", "public.ct_top_b"), &s, 1, 120000, 0);
    assert_int_equal(s.n, 1);
    evs_free(&s);
    consume_q(topic_of("ct_top", "public.ct_top_a"), &s, 2, 120000, 0);
    took = cdc_test_now_ms() - start;
    assert_int_equal(s.n, 2);
    evs_free(&s);
    print_message("changes of the added table and the other %lld ms after the restart\n", took);
    if (took > 15000)
        fail_msg("the changes after adding a table came %lld ms after the restart", took);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    if (saved[0])
        setenv("CDC_KAFKA_DEV_CONTROL", saved, 1);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_top"));
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill9_restart),
        cmocka_unit_test(test_heartbeat_advances_slot),
        cmocka_unit_test(test_bad_setup),
        cmocka_unit_test(test_reconnect_after_pg_restart),
        cmocka_unit_test(test_sigterm_under_backlog),
        cmocka_unit_test(test_slot_lost),
        cmocka_unit_test(test_standby_capture),
        cmocka_unit_test(test_topics_without_control),
    };
    return capture_main(tests, sizeof(tests) / sizeof(tests[0]));
}
