/*
 * Component tests of cdc-capture against the harness PostgreSQL and development Kafka
 * broker: the tables it captures. A misconfigured table next to good ones; a change of a
 * published table outside --tables stopping the capture before its position is confirmed;
 * --table-include/--table-exclude; tables added and removed through the capture (POST
 * /tables, cdcctl tables); a table removed from the publication of a running capture, and
 * added again (while running, across restarts, at once): its mirror truncated and read
 * again. Each test uses its own slot, publication and topic prefix, so they do not see
 * each other's events (capture_fixture.h).
 */
#include "tests/integration/capture/capture_fixture.h"

/*
 * One misconfigured table never stops the others: a missing table and a table without
 * a key next to a good one are logged and exposed (cdc_capture_table_errors) while the
 * good one streams, without a session restart; a table that loses its key while
 * running is skipped (counted) and captured again once it has an identity.
 */
static void test_table_errors_isolated(void **state)
{
    PGconn *c = pg_as(NULL);
    static const char *const opts[] = {"--http=127.0.0.1:0", NULL};
    wait_metric_t wm;
    evs_t s = {0};
    pid_t pid;
    const char *log;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_iso_good, ct_iso_nokey, ct_iso_lose");
    sql(c, "CREATE TABLE ct_iso_good (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_iso_nokey (a int)");
    sql(c, "CREATE TABLE ct_iso_lose (id int PRIMARY KEY, v int)");
    pid = start_capture_opts(
        N("ct_iso"),
        "public.ct_iso_good,public.ct_iso_missing,public.ct_iso_nokey,public.ct_iso_lose", opts);
    wait_streaming(c, N("ct_iso"));
    log = read_log();
    assert_non_null(strstr(log, "public.ct_iso_missing is not captured"));
    assert_non_null(strstr(log, "does not exist"));
    assert_non_null(strstr(log, "public.ct_iso_nokey is not captured"));
    assert_non_null(strstr(log, "REPLICA IDENTITY FULL"));
    assert_true(metric("cdc_capture_table_errors{table=\"public.ct_iso_missing\"}") == 1);
    assert_true(metric("cdc_capture_table_errors{table=\"public.ct_iso_nokey\"}") == 1);
    assert_true(metric("cdc_capture_table_errors{table=\"public.ct_iso_good\"}") == 0);

    sql(c, "INSERT INTO ct_iso_good VALUES (1, 1)");
    sql(c, "INSERT INTO ct_iso_lose VALUES (1, 1)");
    /* ct_iso_lose loses its key while running: skipped and counted, the others go on */
    sql(c, "ALTER TABLE ct_iso_lose DROP CONSTRAINT ct_iso_lose_pkey");
    sql(c, "INSERT INTO ct_iso_lose VALUES (2, 2)");
    sql(c, "INSERT INTO ct_iso_good VALUES (2, 2)");
    consume_q(topic_of("ct_iso", "public.ct_iso_good"), &s, 2, 30000, 0);
    assert_int_equal(s.n, 2);
    evs_free(&s);
    wm = (wait_metric_t){"cdc_capture_skipped_changes_total{table=\"public.ct_iso_lose\"}", 1};
    if (!cdc_test_wait_for(metric_reached, &wm, 20000))
        fail_msg("the change of the table without a key was not counted; log: %s", read_log());
    assert_true(metric("cdc_capture_table_errors{table=\"public.ct_iso_lose\"}") == 1);
    assert_non_null(strstr(read_log(), "public.ct_iso_lose is not captured"));
    /* with an identity again it is captured again (keyed by all columns) */
    sql(c, "ALTER TABLE ct_iso_lose REPLICA IDENTITY FULL");
    sql(c, "INSERT INTO ct_iso_lose VALUES (3, 3)");
    consume_q(topic_of("ct_iso", "public.ct_iso_lose"), &s, 2, 30000, 1000);
    assert_int_equal(s.n, 2);
    /* (the topic's partitions are read in no particular order) */
    assert_non_null(find(&s, 'c', 1, 0));
    assert_non_null(find(&s, 'c', 3, 0));
    assert_string_equal(find(&s, 'c', 1, 0)->key, "{\"id\":1}");
    assert_string_equal(find(&s, 'c', 3, 0)->key, "{\"id\":3,\"v\":3}");
    evs_free(&s);
    assert_true(metric("cdc_capture_table_errors{table=\"public.ct_iso_lose\"}") == 0);
    /* one session all along: no restart loop */
    assert_true(metric("cdc_capture_reconnects_total") == 0);
    assert_null(strstr(read_log(), "capture session ended"));
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_iso"));
    PQfinish(c);
}

/*
 * A table the publication streams but --tables leaves out (ALTER PUBLICATION ... ADD
 * TABLE while the capture runs): before, its change was ignored and its LSN confirmed, so
 * it was lost. Now the capture exits (status 1) with a message naming the table, the
 * slot's confirmed position stays before the change, and a capture restarted with the
 * table in --tables produces it.
 */
static void test_uncaptured_table_stops(void **state)
{
    PGconn *c = pg_as(NULL);
    evs_t s = {0};
    char q[512], *before, *confirmed;
    int status = 0;
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_unc_a, ct_unc_b");
    sql(c, "CREATE TABLE ct_unc_a (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_unc_b (id int PRIMARY KEY, v int)");
    pid = start_capture(N("ct_unc"), "public.ct_unc_a", NULL);
    wait_streaming(c, N("ct_unc"));
    sql(c, "INSERT INTO ct_unc_a VALUES (1, 1)");
    consume_q(topic_of("ct_unc", "public.ct_unc_a"), &s, 1, 30000, 0);
    assert_int_equal(s.n, 1);
    evs_free(&s);

    sql(c, "ALTER PUBLICATION %s ADD TABLE ct_unc_b", N("ct_unc"));
    before = sql1(c, "SELECT pg_current_wal_insert_lsn()::text");
    sql(c, "INSERT INTO ct_unc_b VALUES (1, 1)");
    sql(c, "INSERT INTO ct_unc_a VALUES (2, 2)");
    if (!cdc_test_wait_exit(pid, 30000, &status))
        fail_msg("the capture went on past a change of a table outside --tables; log: %s",
                 read_log());
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_non_null(strstr(read_log(), "public.ct_unc_b"));
    assert_non_null(strstr(read_log(), "which is in publication"));
    assert_non_null(strstr(read_log(), "add public.ct_unc_b to --tables"));
    snprintf(q, sizeof(q),
             "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '%s'",
             N("ct_unc"));
    confirmed = sql1(c, q);
    if (lsn_of(confirmed) > lsn_of(before))
        fail_msg("confirmed %s past the uncaptured change (WAL was at %s before it)", confirmed,
                 before);
    free(confirmed);
    free(before);

    /* with the table in --tables, its change arrives */
    pid = start_capture(N("ct_unc"), "public.ct_unc_a,public.ct_unc_b", NULL);
    wait_streaming(c, N("ct_unc"));
    consume_q(topic_of("ct_unc", "public.ct_unc_b"), &s, 1, 30000, 0);
    assert_int_equal(s.n, 1);
    assert_non_null(find(&s, 'c', 1, 0));
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_unc"));
    PQfinish(c);
}

/*
 * --table-include/--table-exclude narrow the publication (docs/capture.md, "Choosing the
 * tables"): an excluded table's changes are counted and not produced, the slot moves past
 * them in the same session, /status calls the table excluded; a table added to the
 * publication while the capture runs is captured or excluded by the same patterns; the
 * patterns with --tables, or a bad pattern, are configuration errors naming the option.
 */
static bool confirmed_past(void *arg)
{
    const char *const *a = arg; /* slot, lsn */
    PGconn *c = pg_as(NULL);
    char q[256], *confirmed;
    bool past;
    snprintf(q, sizeof(q),
             "SELECT coalesce(confirmed_flush_lsn::text, '0/0') FROM pg_replication_slots "
             "WHERE slot_name = '%s'",
             a[0]);
    confirmed = sql1(c, q);
    past = lsn_of(confirmed) > lsn_of(a[1]);
    free(confirmed);
    PQfinish(c);
    return past;
}

static void test_table_patterns(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--schema-probe-interval=1s",
                                "--table-include=public\\.ct_pat_.*",
                                "--table-exclude=public\\.ct_pat_skip.*", NULL};
    wait_metric_t skipped = {"cdc_capture_excluded_changes_total{table=\"public.ct_pat_skip\"}", 2};
    evs_t s = {0};
    char *after;
    const char *past[2];
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_pat_keep, ct_pat_skip, ct_pat_skip2, ct_pat_new, ct_other");
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_pat"));
    sql(c, "CREATE TABLE ct_pat_keep (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_pat_skip (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_pat_skip2 (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_pat_new (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_other (id int PRIMARY KEY, v int)");
    sql(c, "INSERT INTO ct_pat_new VALUES (1, 1)");
    sql(c, "CREATE PUBLICATION %s FOR TABLE ct_pat_keep, ct_pat_skip, ct_other", N("ct_pat"));
    pid = start_capture_opts(N("ct_pat"), "", more);
    wait_streaming(c, N("ct_pat"));

    sql(c, "INSERT INTO ct_pat_skip VALUES (1, 1)");
    sql(c, "INSERT INTO ct_other VALUES (1, 1)");
    sql(c, "UPDATE ct_pat_skip SET v = 2");
    sql(c, "INSERT INTO ct_pat_keep VALUES (1, 1)");
    after = sql1(c, "SELECT pg_current_wal_insert_lsn()::text");
    consume_q(topic_of("ct_pat", "public.ct_pat_keep"), &s, 1, 30000, 0);
    assert_int_equal(s.n, 1);
    evs_free(&s);
    if (!cdc_test_wait_for(metric_reached, &skipped, 10000))
        fail_msg("the excluded table's 2 changes were not counted; log: %s", read_log());
    assert_int_equal(topic_events(topic_of("ct_pat", "public.ct_pat_skip")), 0);
    assert_int_equal(topic_events(topic_of("ct_pat", "public.ct_other")), 0);
    assert_non_null(strstr(read_log(), "public.ct_pat_skip of publication"));
    assert_non_null(strstr(read_log(), "public.ct_other of publication"));
    /* the slot moves past them, in the same session */
    past[0] = N("ct_pat");
    past[1] = after;
    if (!cdc_test_wait_for(confirmed_past, past, 15000))
        fail_msg("the slot was not confirmed past the excluded changes; log: %s", read_log());
    free(after);

    /* tables added while it runs follow the same patterns */
    sql(c, "ALTER PUBLICATION %s ADD TABLE ct_pat_skip2, ct_pat_new", N("ct_pat"));
    sql(c, "INSERT INTO ct_pat_skip2 VALUES (1, 1)");
    sql(c, "INSERT INTO ct_pat_new VALUES (2, 2)");
    /* the row before (read by the table's snapshot) and the insert (streamed; the snapshot
     * may read it too) */
    wait_caught_up(c, "ct_pat_new", topic_of("ct_pat", "public.ct_pat_new"), 3);
    consume_q(topic_of("ct_pat", "public.ct_pat_new"), &s,
              (size_t)topic_events(topic_of("ct_pat", "public.ct_pat_new")), 30000, 0);
    assert_non_null(find(&s, 'r', 1, 0));
    assert_non_null(find(&s, 'c', 2, 0));
    evs_free(&s);
    assert_int_equal(topic_events(topic_of("ct_pat", "public.ct_pat_skip2")), 0);
    assert_null(strstr(read_log(), "capture session ended"));

    {
        json_t *st = capture_status(), *tables = json_object_get(st, "tables");
        int excluded = 0, streaming = 0;
        for (size_t i = 0; i < json_array_size(tables); i++) {
            json_t *x = json_array_get(tables, i);
            const char *name = json_string_value(json_object_get(x, "table"));
            const char *state = json_string_value(json_object_get(x, "state"));
            if (strncmp(name, "public.ct_pat_skip", 18) == 0 ||
                strcmp(name, "public.ct_other") == 0) {
                assert_string_equal(state, "excluded");
                excluded++;
            } else if (strcmp(name, "public.ct_pat_keep") == 0 ||
                       strcmp(name, "public.ct_pat_new") == 0) {
                assert_string_equal(state, "streaming");
                streaming++;
            }
        }
        assert_int_equal(excluded, 3);
        assert_int_equal(streaming, 2);
        json_decref(st);
    }
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);

    /* configuration errors name the option */
    assert_int_equal(run_to_exit(N("ct_pat"), "public.ct_pat_keep", "--table-include=public\\..*"),
                     2);
    assert_non_null(strstr(read_log(), "--table-include"));
    assert_non_null(strstr(read_log(), "--tables"));
    assert_int_equal(run_to_exit(N("ct_pat"), "", "--table-exclude=public\\.(x"), 2);
    assert_non_null(strstr(read_log(), "invalid pattern"));
    assert_non_null(strstr(read_log(), "--table-exclude"));
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_pat"));
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_pat"));
    PQfinish(c);
}

/*
 * Tables added and removed through the capture (POST /tables, `cdcctl tables add|remove
 * --capture`; docs/capture.md, "Adding a table"): the capture alters its publication and
 * reads it at once, so an added table's rows arrive (incremental snapshot) without
 * waiting for the next probe; a second add changes nothing; an excluded table, or a
 * capture with --tables, is refused naming why; a removed table is "removed".
 */
static void test_tables_by_request(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=200",
                                "--publication-poll-interval=0",
                                "--table-exclude=public\\.ct_req_x", NULL};
    char args[512], out[8192], *r;
    evs_t s = {0};
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_req_a, ct_req_b, ct_req_x");
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_req"));
    sql(c, "CREATE TABLE ct_req_a (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_req_b (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_req_x (id int PRIMARY KEY, v int)");
    sql(c, "INSERT INTO ct_req_b SELECT g, g FROM generate_series(1, 1000) g");
    sql(c, "CREATE PUBLICATION %s FOR TABLE ct_req_a", N("ct_req"));
    pid = start_capture_opts(N("ct_req"), "", more);
    wait_streaming(c, N("ct_req"));

    /* the schema probe is off: only the request makes the table join */
    r = capture_http("POST", "/tables?add=public.ct_req_b");
    assert_non_null(strstr(r, " 200 "));
    assert_non_null(strstr(r, "\"changed\":true"));
    assert_non_null(strstr(r, "\"state\":\"snapshotting\""));
    if (!cdc_test_wait_for(log_has, "of public.ct_req_b done: ", 60000))
        fail_msg("the added table's snapshot did not finish; log: %s", read_log());
    wait_caught_up(c, "ct_req_b", topic_of("ct_req", "public.ct_req_b"), 0);
    check_converged(c, "ct_req_b", topic_of("ct_req", "public.ct_req_b"), &s);
    /* its 1,000 rows, and the sentinel row 0 when the snapshot read it too */
    assert_in_range(count_reads(&s, "incremental", NULL, NULL), 1000, 1001);
    evs_free(&s);
    r = capture_http("POST", "/tables?add=public.ct_req_b");
    assert_non_null(strstr(r, " 200 "));
    assert_non_null(strstr(r, "\"changed\":false"));
    assert_non_null(strstr(r, "\"state\":\"streaming\""));
    {
        char q[256];
        snprintf(q, sizeof(q),
                 "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM "
                 "pg_publication_tables WHERE pubname = '%s'",
                 N("ct_req"));
        r = sql1(c, q);
        assert_string_equal(r, "ct_req_a,ct_req_b");
        free(r);
    }

    /* refusals name why */
    r = capture_http("POST", "/tables?add=public.ct_req_x");
    assert_non_null(strstr(r, " 409 "));
    assert_non_null(strstr(r, "--table-exclude"));
    r = capture_http("POST", "/tables?add=public.ct_req_nope");
    assert_non_null(strstr(r, " 409 "));
    assert_non_null(strstr(r, "ct_req_nope"));
    r = capture_http("POST", "/tables?drop=public.ct_req_b");
    assert_non_null(strstr(r, " 400 "));

    /* cdcctl tables remove: out of the publication, "removed" */
    snprintf(args, sizeof(args), "tables remove public.ct_req_b --capture=127.0.0.1:%d",
             capture_port());
    assert_int_equal(run_cdcctl(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "dropped from publication"));
    assert_non_null(strstr(out, "removed"));
    assert_int_not_equal(run_cdcctl("tables remove public.ct_req_b", out, sizeof(out)), 0);
    assert_non_null(strstr(out, "--capture"));
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);

    /* with --tables the capture's tables are not the publication's */
    {
        const char *const fixed[] = {"--http=127.0.0.1:0", NULL};
        sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_req_fixed"));
        sql(c, "CREATE PUBLICATION %s FOR TABLE ct_req_a", N("ct_req_fixed"));
        pid = start_capture_opts(N("ct_req_fixed"), "public.ct_req_a", fixed);
        wait_streaming(c, N("ct_req_fixed"));
        r = capture_http("POST", "/tables?add=public.ct_req_b");
        assert_non_null(strstr(r, " 409 "));
        assert_non_null(strstr(r, "--tables"));
        assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    }
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_req"));
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_req_fixed"));
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_req"));
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_req_fixed"));
    PQfinish(c);
}

/* Stops the capture (SIGTERM, exit 0) and starts it again, streaming; log_after() then
 * reads the new process's lines. */
static void restart_capture(pid_t *pid, const char *name, const char *const *more)
{
    assert_int_equal(WEXITSTATUS(cdc_test_kill(*pid, SIGTERM, 20000)), 0);
    log_mark = strlen(read_log());
    *pid = start_capture_opts(name, "", more);
    if (!cdc_test_wait_for(log_after, "msg=\"streaming slot", 60000))
        fail_msg("the restarted capture did not stream; log: %s", read_log() + log_mark);
}

/* The /status entry of table (a new reference; NULL when it is not listed). */
static json_t *table_status(const char *table)
{
    json_t *st = capture_status(), *tables = json_object_get(st, "tables"), *x = NULL;
    for (size_t i = 0; i < json_array_size(tables) && x == NULL; i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(tables, i), "table")), table) ==
            0)
            x = json_incref(json_array_get(tables, i));
    json_decref(st);
    return x;
}

static bool table_in_state(void *arg)
{
    const char *const *ts = arg;
    json_t *x = table_status(ts[0]);
    bool in = x != NULL && strcmp(json_string_value(json_object_get(x, "state")), ts[1]) == 0;
    json_decref(x);
    return in;
}

static void wait_table_state(const char *table, const char *state)
{
    const char *ts[2] = {table, state};
    if (!cdc_test_wait_for(table_in_state, ts, 20000))
        fail_msg("%s never in state %s; log: %s", table, state, read_log());
}

/* Creates keep (serial id, v) and t (id, v) with rows 1..rows (v = id), both published
 * by a new publication N(name). */
static void create_pair(PGconn *c, const char *name, const char *keep, const char *t, int rows)
{
    sql(c, "DROP TABLE IF EXISTS %s, %s", keep, t);
    sql(c, "DROP PUBLICATION IF EXISTS %s", N(name));
    sql(c, "CREATE TABLE %s (id serial PRIMARY KEY, v int)", keep);
    sql(c, "CREATE TABLE %s (id int PRIMARY KEY, v int)", t);
    sql(c, "INSERT INTO %s SELECT g, g FROM generate_series(1, %d) g", t, rows);
    sql(c, "CREATE PUBLICATION %s FOR TABLE %s, %s WITH (publish_via_partition_root = true)",
        N(name), keep, t);
}

/* While t is out of the publication: rows 1..100 updated, 901..1000 deleted, 2001..2100
 * inserted. */
static void change_while_out(PGconn *c, const char *t)
{
    sql(c, "UPDATE %s SET v = v + 100000 WHERE id <= 100", t);
    sql(c, "DELETE FROM %s WHERE id > 900", t);
    sql(c, "INSERT INTO %s SELECT g, g FROM generate_series(2001, 2100) g", t);
}

static int rows_of(PGconn *c, const char *t)
{
    char q[128], *n;
    int rows;
    snprintf(q, sizeof(q), "SELECT count(*) FROM %s", t);
    n = sql1(c, q);
    rows = atoi(n);
    free(n);
    return rows;
}

/*
 * A table that left the publication and joined it again: its topic holds a truncate
 * (source.snapshot "backfill") on every partition, then "incremental" rows, and from the
 * truncate on it ends equal to the table: keys deleted while it was out are gone.
 */
static void check_readded(PGconn *c, const char *name, const char *t)
{
    char table[64], topic[160];
    evs_t s = {0};
    size_t truncates = 0;

    snprintf(table, sizeof(table), "public.%s", t);
    snprintf(topic, sizeof(topic), "%s", topic_of(name, table));
    wait_caught_up(c, t, topic, 0);
    converged(c, t, topic, &s, true);
    for (size_t i = 0; i < s.n; i++) {
        const char *l =
            json_string_value(json_object_get(json_object_get(s.v[i].value, "source"), "snapshot"));
        if (s.v[i].op != 't')
            continue;
        assert_string_equal(l, "backfill");
        truncates++;
        /* its position sorts after every event before it in its partition, and before
         * every event after it */
        for (size_t j = 0; j < s.n; j++) {
            const ev_t *a = &s.v[i], *b = &s.v[j];
            bool later = b->commit_lsn > a->commit_lsn ||
                         (b->commit_lsn == a->commit_lsn && b->lsn > a->lsn);
            if (b->partition != a->partition || b->op == 't' || b->offset == a->offset)
                continue;
            if ((b->offset > a->offset) != later)
                fail_msg("%s: event at offset %lld (op %c) sorts %s the truncate at offset %lld", t,
                         (long long)b->offset, b->op, later ? "after" : "before",
                         (long long)a->offset);
        }
    }
    print_message("%zu truncates, %zu incremental rows\n", truncates,
                  count_reads(&s, "incremental", NULL, NULL));
    assert_true(truncates >= 12);
    /* every row the table had when it joined again was read (the sentinel came later) */
    assert_true(count_reads(&s, "incremental", NULL, NULL) >= (size_t)rows_of(c, t) - 1);
    evs_free(&s);
}

/*
 * ALTER PUBLICATION ... DROP TABLE on a running capture whose capture set is the
 * publication: /status shows the table removed (with when), the metric counts it, the
 * marker `removed/<topic>` is on `<prefix>._capture`, the other table keeps flowing and
 * the removed table's later changes are not produced.
 */
static void test_table_removed_running(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--schema-probe-interval=1s", NULL};
    wait_metric_t removed = {"cdc_capture_tables_removed_total", 1};
    const char *gone_topic = topic_of("ct_rm", "public.ct_rm_gone");
    evs_t s = {0};
    json_t *x;
    bool marked = false;
    pid_t pid;
    (void)state;

    create_pair(c, "ct_rm", "ct_rm_keep", "ct_rm_gone", 100);
    pid = start_capture_opts(N("ct_rm"), "", more);
    wait_streaming(c, N("ct_rm"));
    wait_caught_up(c, "ct_rm_gone", gone_topic, 1000);

    sql(c, "ALTER PUBLICATION %s DROP TABLE ct_rm_gone", N("ct_rm"));
    if (!cdc_test_wait_for(metric_reached, &removed, 20000))
        fail_msg("the removal was not counted; log: %s", read_log());
    assert_non_null(strstr(read_log(), "table public.ct_rm_gone left publication"));
    x = table_status("public.ct_rm_gone");
    assert_non_null(x);
    print_message("status: %s\n", json_dumps(x, JSON_COMPACT));
    assert_string_equal(json_string_value(json_object_get(x, "state")), "removed");
    assert_true(json_integer_value(json_object_get(json_object_get(x, "removed"), "ts_ms")) > 0);
    json_decref(x);

    /* its changes now are not produced; the other table's are */
    sql(c, "INSERT INTO ct_rm_gone VALUES (2000, 2000)");
    sql(c, "UPDATE ct_rm_gone SET v = -1 WHERE id = 1");
    sql(c, "DELETE FROM ct_rm_gone WHERE id = 2");
    wait_caught_up(c, "ct_rm_keep", topic_of("ct_rm", "public.ct_rm_keep"), 100000);
    consume_q(gone_topic, &s, (size_t)topic_events(gone_topic), 30000, 500);
    assert_null(find(&s, 'c', 2000, 0));
    assert_null(find(&s, 'u', 1, 0));
    assert_null(find(&s, 'd', 2, 0));
    evs_free(&s);
    x = table_status("public.ct_rm_keep");
    assert_string_equal(json_string_value(json_object_get(x, "state")), "streaming");
    json_decref(x);

    /* recorded for a later capture */
    {
        char state_topic[160];
        snprintf(state_topic, sizeof(state_topic), "%s._capture", N("ct_rm"));
        consume_q(state_topic, &s, (size_t)topic_events(state_topic), 30000, 0);
        for (size_t i = 0; i < s.n; i++)
            if (s.v[i].key != NULL && strncmp(s.v[i].key, "removed/", 8) == 0 &&
                strcmp(s.v[i].key + 8, gone_topic) == 0)
                marked = json_string_value(json_object_get(s.v[i].value, "lsn")) != NULL;
        evs_free(&s);
        assert_true(marked);
    }
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_rm"));
    PQfinish(c);
}

/*
 * Removed, changed while out (updates, deletes, inserts), added again to the running
 * capture: the mirror's truncate comes first, then the rows read again; from the
 * truncate on the topic equals the table (the deleted keys are gone).
 */
static void test_table_readded_running(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--schema-probe-interval=1s",
                                "--snapshot-chunk=300", NULL};
    wait_metric_t removed = {"cdc_capture_tables_removed_total", 1};
    wait_metric_t added = {"cdc_capture_tables_added_total", 1};
    json_t *x;
    pid_t pid;
    (void)state;

    create_pair(c, "ct_ra", "ct_ra_keep", "ct_ra", 1000);
    pid = start_capture_opts(N("ct_ra"), "", more);
    wait_streaming(c, N("ct_ra"));
    sql(c, "ALTER PUBLICATION %s DROP TABLE ct_ra", N("ct_ra"));
    if (!cdc_test_wait_for(metric_reached, &removed, 20000))
        fail_msg("the removal was not counted; log: %s", read_log());
    change_while_out(c, "ct_ra");
    log_mark = strlen(read_log());
    sql(c, "ALTER PUBLICATION %s ADD TABLE ct_ra", N("ct_ra"));
    /* a change right after the add, maybe before the capture notices it */
    sql(c, "UPDATE ct_ra SET v = -5 WHERE id = 500");
    if (!cdc_test_wait_for(metric_reached, &added, 20000))
        fail_msg("the re-add was not noticed; log: %s", read_log());
    if (!cdc_test_wait_for(log_after, "of public.ct_ra done: ", 30000))
        fail_msg("the re-add's snapshot did not finish; log: %s", read_log() + log_mark);
    assert_true(log_after("mirror truncated before its first chunk"));
    wait_table_state("public.ct_ra", "streaming");
    x = table_status("public.ct_ra");
    assert_null(json_object_get(x, "removed"));
    json_decref(x);
    check_readded(c, "ct_ra", "ct_ra");
    assert_null(strstr(read_log(), "capture session ended"));
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_ra"));
    PQfinish(c);
}

/*
 * The same across restarts: the table leaves the publication while the capture is
 * stopped (the next start notices it and records it), is changed, and joins again while
 * the capture is stopped (the next start reads the marker and backfills it again).
 */
static void test_table_readded_after_restart(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--schema-probe-interval=1s",
                                "--snapshot-chunk=300", NULL};
    pid_t pid;
    (void)state;

    create_pair(c, "ct_rr", "ct_rr_keep", "ct_rr", 1000);
    pid = start_capture_opts(N("ct_rr"), "", more);
    wait_streaming(c, N("ct_rr"));

    /* left while the capture was stopped: the next start records it */
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "ALTER PUBLICATION %s DROP TABLE ct_rr", N("ct_rr"));
    change_while_out(c, "ct_rr");
    log_mark = strlen(read_log());
    pid = start_capture_opts(N("ct_rr"), "", more);
    if (!cdc_test_wait_for(log_after, "msg=\"streaming slot", 60000))
        fail_msg("the capture did not stream; log: %s", read_log() + log_mark);
    wait_table_state("public.ct_rr", "removed");
    assert_true(log_after("table public.ct_rr left publication"));
    assert_true(metric("cdc_capture_tables_removed_total") == 1);
    sql(c, "DELETE FROM ct_rr WHERE id = 3");

    /* joined again while the capture was stopped: the next start reads the marker */
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "ALTER PUBLICATION %s ADD TABLE ct_rr", N("ct_rr"));
    log_mark = strlen(read_log());
    pid = start_capture_opts(N("ct_rr"), "", more);
    if (!cdc_test_wait_for(log_after, "of public.ct_rr done: ", 60000))
        fail_msg("the re-add's snapshot did not finish; log: %s", read_log() + log_mark);
    assert_true(log_after("its mirror is truncated and its rows read again"));
    assert_true(log_after("mirror truncated before its first chunk"));
    wait_table_state("public.ct_rr", "streaming");
    check_readded(c, "ct_rr", "ct_rr");

    /* the marker is cleared: one more start reads nothing again */
    restart_capture(&pid, N("ct_rr"), more);
    wait_table_state("public.ct_rr", "streaming");
    assert_false(log_after("incremental snapshot"));
    assert_false(log_after("left publication"));
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_rr"));
    PQfinish(c);
}

/*
 * Removed and added back at once (within one look at the publication, which alone would
 * not see it out): its pg_publication_rel row is a new one, so the capture still takes
 * it for a re-add and the mirror ends equal to the table.
 */
static void test_table_readded_quickly(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--schema-probe-interval=1s",
                                "--snapshot-chunk=300", NULL};
    wait_metric_t added = {"cdc_capture_tables_added_total", 1};
    pid_t pid;
    (void)state;

    create_pair(c, "ct_rq", "ct_rq_keep", "ct_rq", 1000);
    pid = start_capture_opts(N("ct_rq"), "", more);
    wait_streaming(c, N("ct_rq"));
    /* the stream turned: the capture looked at the publication once */
    wait_caught_up(c, "ct_rq_keep", topic_of("ct_rq", "public.ct_rq_keep"), 100000);
    log_mark = strlen(read_log());
    sql(c, "ALTER PUBLICATION %s DROP TABLE ct_rq", N("ct_rq"));
    change_while_out(c, "ct_rq");
    sql(c, "ALTER PUBLICATION %s ADD TABLE ct_rq", N("ct_rq"));
    if (!cdc_test_wait_for(metric_reached, &added, 20000))
        fail_msg("the re-add was not noticed; log: %s", read_log() + log_mark);
    if (!cdc_test_wait_for(log_after, "of public.ct_rq done: ", 30000))
        fail_msg("the re-add's snapshot did not finish; log: %s", read_log() + log_mark);
    assert_true(metric("cdc_capture_tables_removed_total") == 1);
    check_readded(c, "ct_rq", "ct_rq");
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_rq"));
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_errors_isolated),
        cmocka_unit_test(test_uncaptured_table_stops),
        cmocka_unit_test(test_table_patterns),
        cmocka_unit_test(test_tables_by_request),
        cmocka_unit_test(test_table_removed_running),
        cmocka_unit_test(test_table_readded_running),
        cmocka_unit_test(test_table_readded_after_restart),
        cmocka_unit_test(test_table_readded_quickly),
    };
    return capture_main(tests, sizeof(tests) / sizeof(tests[0]));
}
