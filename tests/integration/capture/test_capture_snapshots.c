/*
 * Component tests of cdc-capture against the harness PostgreSQL and development Kafka
 * broker: its snapshots. Snapshot consistency with concurrent writes; a table added to a
 * running capture read by an incremental snapshot under a writer; a TOASTed value updated
 * in a chunk's window; an incremental snapshot resumed after a kill -9; re-snapshots on
 * demand (cdcctl snapshot); --snapshot-max-rate over every table; many small tables
 * sharing windows; --snapshot-mode=incremental; an `initial` snapshot killed, its slot
 * adopted. Each test uses its own slot, publication and topic prefix, so they do not see
 * each other's events (capture_fixture.h).
 */
#include "tests/integration/capture/capture_fixture.h"

static void test_snapshot_consistency(void **state)
{
    PGconn *c = pg_as(NULL);
    evs_t s = {0};
    PGresult *r;
    pid_t pid;
    int n = 30000, rows;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_snap");
    sql(c, "CREATE TABLE ct_snap (id int PRIMARY KEY, v int NOT NULL, pad text)");
    sql(c, "INSERT INTO ct_snap SELECT g, 0, repeat('p', 100) FROM generate_series(1, %d) g", n);
    pid = start_capture(N("ct_snap"), "public.ct_snap", "--snapshot-chunk=500");
    /* writes racing with slot creation and the snapshot */
    for (int i = 0; i < 20; i++) {
        sql(c, "UPDATE ct_snap SET v = v + 1 WHERE id %% 20 = %d", i);
        sql(c, "INSERT INTO ct_snap VALUES (%d, -1, 'new')", n + 1 + i);
        sql(c, "DELETE FROM ct_snap WHERE id = %d", 100 + i * 37);
    }
    wait_streaming(c, N("ct_snap"));
    r = PQexec(c, "SELECT id, v FROM ct_snap ORDER BY id");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    rows = PQntuples(r);
    /* at least one event per row; wait until the final state matches */
    consume(topic_of("ct_snap", "public.ct_snap"), &s, (size_t)rows, 60000);
    {
        int max_id = n + 100;
        int *val = calloc((size_t)max_id + 1, sizeof(int));
        bool *live = calloc((size_t)max_id + 1, 1);
        uint64_t *cl = calloc((size_t)max_id + 1, sizeof(uint64_t)),
                 *ll = calloc((size_t)max_id + 1, sizeof(uint64_t));
        size_t nr = 0, nlast = 0;
        long long deadline = cdc_test_now_ms() + 60000;
        bool ok = false;
        while (!ok && cdc_test_now_ms() < deadline) {
            memset(live, 0, (size_t)max_id + 1);
            memset(cl, 0, ((size_t)max_id + 1) * sizeof(uint64_t));
            memset(ll, 0, ((size_t)max_id + 1) * sizeof(uint64_t));
            nr = nlast = 0;
            for (size_t i = 0; i < s.n; i++) {
                const ev_t *e = &s.v[i];
                int id = key_id(e);
                if (id < 1 || id > max_id)
                    fail_msg("unexpected key %s", e->key ? e->key : "null");
                if (e->op == 'r') {
                    const char *snap = json_string_value(
                        json_object_get(json_object_get(e->value, "source"), "snapshot"));
                    nr++;
                    if (strcmp(snap, "last") == 0)
                        nlast++;
                }
                if (e->commit_lsn < cl[id] || (e->commit_lsn == cl[id] && e->lsn < ll[id]))
                    continue;
                cl[id] = e->commit_lsn;
                ll[id] = e->lsn;
                live[id] = e->op != 'd';
                if (live[id])
                    val[id] = (int)json_integer_value(json_object_get(after_of(e), "v"));
            }
            ok = true;
            for (int i = 0; i < rows && ok; i++) {
                int id = atoi(PQgetvalue(r, i, 0));
                if (!live[id] || val[id] != atoi(PQgetvalue(r, i, 1)))
                    ok = false;
            }
            {
                int nlive = 0;
                for (int id = 1; id <= max_id; id++)
                    nlive += live[id];
                if (nlive != rows)
                    ok = false;
            }
            if (!ok) {
                evs_free(&s);
                consume(topic_of("ct_snap", "public.ct_snap"), &s, (size_t)rows + 100, 5000);
            }
        }
        if (!ok)
            fail_msg("the rebuilt table does not match PostgreSQL");
        assert_true(nr > 0);
        assert_int_equal(nlast, 1);
        print_message("snapshot: %zu snapshot rows, %zu events, %d rows in the table\n", nr, s.n,
                      rows);
        free(val);
        free(live);
        free(cl);
        free(ll);
    }
    PQclear(r);
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_snap"));
    PQfinish(c);
}

/* ---- tables added to a running capture, incremental snapshots ----------------------------- */

/*
 * A writer in a child process until `ms` passed: updates, deletes and upserts of t's rows
 * (ids 1..max_id + 1000) and inserts into other, one statement per transaction.
 */
static pid_t start_writer(const char *t, const char *other, int max_id, int ms)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        PGconn *c = PQconnectdb(cdc_test_require("CDC_TEST_PG_DSN"));
        long long end = cdc_test_now_ms() + ms;
        char q[512];
        srand((unsigned)getpid());
        for (int i = 0; cdc_test_now_ms() < end; i++) {
            int id = 1 + rand() % (max_id + 1000);
            switch (i % 4) {
            case 0:
                snprintf(q, sizeof(q), "UPDATE %s SET v = v + 1 WHERE id = %d", t, id);
                break;
            case 1:
                snprintf(q, sizeof(q), "DELETE FROM %s WHERE id = %d", t, id);
                break;
            case 2:
                snprintf(q, sizeof(q),
                         "INSERT INTO %s VALUES (%d, %d) ON CONFLICT (id) DO UPDATE SET v = "
                         "excluded.v",
                         t, id, i);
                break;
            default:
                snprintf(q, sizeof(q), "INSERT INTO %s (v) VALUES (%d)", other, i);
            }
            PQclear(PQexec(c, q));
        }
        PQfinish(c);
        _exit(0);
    }
    return pid;
}

/* True when the table arg has a row. */
static bool table_has_rows(void *arg)
{
    PGconn *c = pg_as(NULL);
    char q[256], *v;
    bool any;
    snprintf(q, sizeof(q), "SELECT count(*) > 0 FROM %s", (const char *)arg);
    v = sql1(c, q);
    any = strcmp(v, "t") == 0;
    free(v);
    PQfinish(c);
    return any;
}

/*
 * ALTER PUBLICATION ... ADD TABLE on a running capture whose capture set is the
 * publication, while a writer changes that table and another: the table joins without a
 * new session, its existing rows come by an incremental snapshot ("incremental" rows)
 * interleaved with the other table's changes, and its topic ends equal to the table.
 */
static void test_table_added_running(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=500",
                                "--schema-probe-interval=1s", NULL};
    wait_metric_t done = {"cdc_capture_snapshot_chunks_total", 1};
    evs_t s = {0}, o = {0};
    long long first = 0, last = 0;
    size_t between = 0, reads;
    int status;
    pid_t pid, writer;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_add_old, ct_add_new");
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_add"));
    sql(c, "CREATE TABLE ct_add_old (id serial PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_add_new (id int PRIMARY KEY, v int)");
    sql(c, "INSERT INTO ct_add_new SELECT g, g FROM generate_series(1, 20000) g");
    sql(c, "CREATE PUBLICATION %s FOR TABLE ct_add_old WITH (publish_via_partition_root = true)",
        N("ct_add"));
    /* each chunk's window held open 100 ms: changes of the table commit inside windows */
    setenv("CDC_FAULT", "chunk-window:100", 1);
    pid = start_capture_opts(N("ct_add"), "", more);
    unsetenv("CDC_FAULT");
    wait_streaming(c, N("ct_add"));

    writer = start_writer("ct_add_new", "ct_add_old", 20000, 8000);
    /* the writer is at work before the table joins */
    if (!cdc_test_wait_for(table_has_rows, "ct_add_old", 10000))
        fail_msg("the writer wrote nothing");
    sql(c, "ALTER PUBLICATION %s ADD TABLE ct_add_new", N("ct_add"));
    if (!cdc_test_wait_for(log_has, "msg=\"incremental snapshot", 60000))
        fail_msg("no incremental snapshot started; log: %s", read_log());
    assert_int_equal(waitpid(writer, &status, 0), writer);
    if (!cdc_test_wait_for(log_has, "of public.ct_add_new done: ", 120000))
        fail_msg("the incremental snapshot did not finish; log: %s", read_log());
    assert_true(metric_reached(&done));
    assert_non_null(strstr(read_log(), "joined publication"));
    /* one session throughout: the table joined without a restart */
    assert_null(strstr(read_log(), "capture session ended"));

    wait_caught_up(c, "ct_add_new", topic_of("ct_add", "public.ct_add_new"), 0);
    check_converged(c, "ct_add_new", topic_of("ct_add", "public.ct_add_new"), &s);
    reads = count_reads(&s, "incremental", &first, &last);
    print_message("%zu incremental rows from %lld to %lld ms\n", reads, first, last);
    assert_true(reads > 0);
    assert_true(reads <= 20000);

    /* the other table's changes flowed while the new one was read */
    consume_q(topic_of("ct_add", "public.ct_add_old"), &o,
              (size_t)topic_events(topic_of("ct_add", "public.ct_add_old")), 60000, 0);
    for (size_t i = 0; i < o.n; i++) {
        long long ts = (long long)json_integer_value(json_object_get(o.v[i].value, "ts_ms"));
        if (ts > first && ts < last)
            between++;
    }
    print_message("%zu changes of the other table during the snapshot\n", between);
    if (last - first > 200 && between == 0)
        fail_msg("no change of the other table was produced during the snapshot (%lld ms)",
                 last - first);
    evs_free(&o);
    evs_free(&s);

    /* /status: the table streams, its snapshot done */
    {
        json_t *st = capture_status(), *tables = json_object_get(st, "tables");
        bool seen = false;
        for (size_t i = 0; i < json_array_size(tables); i++) {
            json_t *x = json_array_get(tables, i);
            if (strcmp(json_string_value(json_object_get(x, "table")), "public.ct_add_new") != 0)
                continue;
            seen = true;
            assert_string_equal(json_string_value(json_object_get(x, "state")), "streaming");
            assert_true(json_is_true(json_object_get(json_object_get(x, "snapshot"), "done")));
        }
        assert_true(seen);
        json_decref(st);
    }

    /* a restart does not read the table again: its schema and snapshot are recorded */
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    pid = start_capture_opts(N("ct_add"), "", more);
    wait_streaming(c, N("ct_add"));
    wait_caught_up(c, "ct_add_new", topic_of("ct_add", "public.ct_add_new"), -1);
    consume_q(topic_of("ct_add", "public.ct_add_new"), &s,
              (size_t)topic_events(topic_of("ct_add", "public.ct_add_new")), 60000, 0);
    assert_int_equal(count_reads(&s, "incremental", NULL, NULL), reads);
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_add"));
    PQfinish(c);
}

/* Whether an event lists `col` in unchanged_toast. */
static bool unchanged(const ev_t *e, const char *col)
{
    json_t *u = json_object_get(e->value, "unchanged_toast");
    for (size_t i = 0; i < json_array_size(u); i++)
        if (strcmp(json_string_value(json_array_get(u, i)), col) == 0)
            return true;
    return false;
}

/*
 * A table with TOASTed notes joins a running capture; while its incremental snapshot
 * runs, one row of each chunk in flight is updated without its note (pgoutput sends the
 * note as unchanged, docs/capture.md, "An existing slot"): such an update carries
 * "snapshot_pending", and the chunk is read again, so that the row comes with its note
 * after the update; without the reread the row was taken out of the chunk and no event
 * ever carried its note. Every row's note is in the topic at the end.
 */
static void test_toast_in_chunk_window(void **state)
{
    enum { ROWS = 2000, CHUNK = 500 };
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=500", NULL};
    log_count_t reread = {"reading the chunk again", 1};
    bool hit[ROWS / CHUNK + 2] = {false};
    bool *has_note = calloc(ROWS + 1000, sizeof(bool));
    size_t pending = 0;
    evs_t s = {0};
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_tw_old, ct_tw");
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_tw"));
    sql(c, "CREATE TABLE ct_tw_old (id serial PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_tw (id int PRIMARY KEY, v int, note text)");
    /* out of line and uncompressed: an update that leaves the note alone does not send it */
    sql(c, "ALTER TABLE ct_tw ALTER COLUMN note SET STORAGE EXTERNAL");
    sql(c, "INSERT INTO ct_tw SELECT g, g, repeat('n', 3000) || g FROM generate_series(1, %d) g",
        ROWS);
    sql(c, "CREATE PUBLICATION %s FOR TABLE ct_tw_old WITH (publish_via_partition_root = true)",
        N("ct_tw"));
    /* each chunk's window held open 2 s: the update below lands in it */
    setenv("CDC_FAULT", "chunk-window:2000", 1);
    pid = start_capture_opts(N("ct_tw"), "", more);
    unsetenv("CDC_FAULT");
    wait_streaming(c, N("ct_tw"));
    sql(c, "ALTER PUBLICATION %s ADD TABLE ct_tw", N("ct_tw"));
    if (!cdc_test_wait_for(log_has, "msg=\"incremental snapshot", 60000))
        fail_msg("no incremental snapshot started; log: %s", read_log());
    /* one update per chunk, of a row of the chunk read now (the rows produced so far tell
     * which), once: that chunk is read again once, and its second read is not disturbed */
    long long end = cdc_test_now_ms() + 120000;
    while (strstr(read_log(), "of public.ct_tw done: ") == NULL) {
        json_t *st = capture_status(), *tables = json_object_get(st, "tables");
        long long rows = -1;
        for (size_t i = 0; i < json_array_size(tables); i++) {
            json_t *x = json_array_get(tables, i);
            if (strcmp(json_string_value(json_object_get(x, "table")), "public.ct_tw") == 0)
                rows = (long long)json_integer_value(
                    json_object_get(json_object_get(x, "snapshot"), "rows"));
        }
        json_decref(st);
        /* /status is refreshed after a chunk's hold: it shows the rows up to the chunk
         * before, and the next chunk but one is read and held a moment later */
        long long next = rows / CHUNK + 1;
        if (rows >= 0 && next < ROWS / CHUNK && !hit[next]) {
            hit[next] = true;
            usleep(500 * 1000);
            sql(c, "UPDATE ct_tw SET v = v + 1 WHERE id = %lld", next * CHUNK + 7);
        }
        if (cdc_test_now_ms() > end)
            fail_msg("the incremental snapshot did not finish; log: %s", read_log());
        usleep(50 * 1000);
    }
    /* after the snapshot an update leaves the note out without the mark */
    sql(c, "UPDATE ct_tw SET v = v + 1 WHERE id = 3");

    wait_caught_up(c, "ct_tw", topic_of("ct_tw", "public.ct_tw"), 0);
    check_converged(c, "ct_tw", topic_of("ct_tw", "public.ct_tw"), &s);
    /* per key, in the topic's order: whether its last image holds the note */
    for (size_t i = 0; i < s.n; i++) {
        const ev_t *e = &s.v[i];
        int id = key_id(e);
        if (id < 0 || id >= ROWS + 1000)
            continue;
        if (json_is_true(json_object_get(e->value, "snapshot_pending"))) {
            assert_true(unchanged(e, "note"));
            pending++;
        }
        if (e->op == 'd')
            has_note[id] = false;
        else if (!unchanged(e, "note"))
            has_note[id] = json_is_string(json_object_get(after_of(e), "note"));
        else if (id == 3 && e->op == 'u' && !has_note[id])
            fail_msg("row 3's update after the snapshot came before its read");
    }
    print_message("%zu updates marked snapshot_pending\n", pending);

    assert_true(pending >= 1);
    {
        PGresult *r = PQexec(c, "SELECT id FROM ct_tw WHERE note IS NOT NULL");
        assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
        for (int i = 0; i < PQntuples(r); i++) {
            int id = atoi(PQgetvalue(r, i, 0));
            if (!has_note[id])
                fail_msg("row %d: no event of the topic carries its note", id);
        }
        PQclear(r);
    }
    for (size_t i = 0; i < s.n; i++)
        if (key_id(&s.v[i]) == 3 && s.v[i].op == 'u')
            assert_null(json_object_get(s.v[i].value, "snapshot_pending"));
    if (!log_has_count(&reread))
        fail_msg("no chunk was read again; log: %s", read_log());
    evs_free(&s);
    free(has_note);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_tw"));
    PQfinish(c);
}

/*
 * What the resume tests share, once table's incremental snapshot (rows rows, chunks of 2000)
 * has produced a few chunks: the capture (pid; slot N(base), --tables `tables`, options
 * more) is killed (SIGKILL) before the snapshot ends and started again; it must resume
 * after its last recorded chunk (a start from scratch reads the first chunks again, so at
 * most 3 chunks may be read twice), finish, and, once the writer is done, its topic must
 * equal the table. Stops the capture, drops the slot and closes c.
 */
static void kill_and_resume(PGconn *c, const char *base, const char *tables,
                            const char *const *more, const char *table, size_t rows, pid_t pid,
                            pid_t writer)
{
    char done[128], topic_table[128];
    evs_t s = {0};
    size_t reads;
    int status;

    snprintf(done, sizeof(done), "of public.%s done: ", table);
    snprintf(topic_table, sizeof(topic_table), "public.%s", table);
    if (strstr(read_log(), done) != NULL)
        fail_msg("the snapshot finished before the kill; make the table larger");
    cdc_test_kill(pid, SIGKILL, 10000);

    pid = start_capture_opts(N(base), tables, more);
    if (!cdc_test_wait_for(log_has, "resumes after key [", 30000)) {
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "grep -v 'level=debug' %s | tail -n 40 >&2", log_path);
        (void)system(cmd);
        fail_msg("the restarted capture did not resume the snapshot");
    }
    assert_int_equal(waitpid(writer, &status, 0), writer);
    if (!cdc_test_wait_for(log_has, done, 180000))
        fail_msg("the incremental snapshot did not finish; log: %s", read_log());
    wait_caught_up(c, table, topic_of(base, topic_table), 0);
    check_converged(c, table, topic_of(base, topic_table), &s);
    reads = count_reads(&s, "incremental", NULL, NULL);
    print_message("%zu incremental rows for %zu rows\n", reads, rows);
    /* it resumed after a key (above), not from the start; the rows read again are those
     * of the chunks read past the last recorded one, whose markers waited for their
     * acks: at most --max-inflight (50,000) events */
    if (reads >= rows + 50000 + 2000)
        fail_msg("%zu snapshot rows: more read again than were in flight", reads);
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N(base));
    PQfinish(c);
}

/*
 * A capture killed (SIGKILL) in the middle of a table's incremental snapshot resumes it
 * from its last recorded chunk, not from the start, and the topic still ends equal to
 * the table.
 */
static void test_incremental_snapshot_resumes(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=2000",
                                "--schema-probe-interval=1s", NULL};
    wait_metric_t chunks = {"cdc_capture_snapshot_chunks_total", 5};
    pid_t pid, writer;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_res_old, ct_res_new");
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_res"));
    sql(c, "CREATE TABLE ct_res_old (id serial PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_res_new (id int PRIMARY KEY, v int)");
    sql(c, "INSERT INTO ct_res_new SELECT g, g FROM generate_series(1, 200000) g");
    sql(c, "ANALYZE ct_res_new");
    sql(c, "CREATE PUBLICATION %s FOR TABLE ct_res_old WITH (publish_via_partition_root = true)",
        N("ct_res"));
    pid = start_capture_opts(N("ct_res"), "", more);
    wait_streaming(c, N("ct_res"));
    writer = start_writer("ct_res_new", "ct_res_old", 200000, 6000);
    sql(c, "ALTER PUBLICATION %s ADD TABLE ct_res_new", N("ct_res"));
    if (!cdc_test_wait_for(metric_reached, &chunks, 60000))
        fail_msg("the incremental snapshot did not produce 5 chunks; log: %s", read_log());
    {
        /* snapshotting, with progress */
        json_t *st = capture_status(), *tables = json_object_get(st, "tables");
        for (size_t i = 0; i < json_array_size(tables); i++) {
            json_t *x = json_array_get(tables, i);
            if (strcmp(json_string_value(json_object_get(x, "table")), "public.ct_res_new") != 0)
                continue;
            print_message("status before the kill: %s\n", json_dumps(x, JSON_COMPACT));
            assert_string_equal(json_string_value(json_object_get(x, "state")), "snapshotting");
            assert_true(json_integer_value(
                            json_object_get(json_object_get(x, "snapshot"), "rows")) >= 10000);
            assert_true(json_is_number(json_object_get(json_object_get(x, "snapshot"), "percent")));
        }
        json_decref(st);
    }
    kill_and_resume(c, "ct_res", "", more, "ct_res_new", 200000, pid, writer);
}

/*
 * Re-snapshot on demand: `cdcctl snapshot` (POST /snapshot) re-reads a captured table as
 * "backfill" rows and waits until it is done; an unknown table is an error naming it.
 */
static void test_resnapshot_on_demand(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=300", NULL};
    char args[512], out[8192];
    evs_t s = {0};
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_resnap");
    sql(c, "CREATE TABLE ct_resnap (id int PRIMARY KEY, v int)");
    pid = start_capture_opts(N("ct_resnap"), "public.ct_resnap", more);
    wait_streaming(c, N("ct_resnap"));
    sql(c, "INSERT INTO ct_resnap SELECT g, g FROM generate_series(1, 3000) g");
    assert_true(capture_port() > 0);

    /* unknown table: an error naming it */
    snprintf(args, sizeof(args), "snapshot public.nope --capture=127.0.0.1:%d", capture_port());
    assert_int_not_equal(run_cdcctl(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "public.nope"));

    snprintf(args, sizeof(args), "snapshot public.ct_resnap --capture=127.0.0.1:%d --wait",
             capture_port());
    assert_int_equal(run_cdcctl(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "done"));

    wait_caught_up(c, "ct_resnap", topic_of("ct_resnap", "public.ct_resnap"), 0);
    check_converged(c, "ct_resnap", topic_of("ct_resnap", "public.ct_resnap"), &s);
    assert_int_equal(count_reads(&s, "backfill", NULL, NULL), 3000);
    assert_int_equal(count_reads(&s, "incremental", NULL, NULL), 0);
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);

    /* with --http-token, POST /snapshot takes the token /status takes */
    {
        const char *const tok[] = {"--http=127.0.0.1:0", "--snapshot-chunk=300",
                                   "--http-token=s3cret", NULL};
        pid = start_capture_opts(N("ct_resnap"), "public.ct_resnap", tok);
        if (!cdc_test_wait_for(log_has, "resuming slot", 60000))
            fail_msg("the capture did not resume its slot; log: %s", read_log());
        assert_non_null(strstr(capture_http("POST", "/snapshot?table=public.ct_resnap"), " 401 "));
        assert_true(capture_port() > 0);
        snprintf(args, sizeof(args),
                 "snapshot public.ct_resnap --capture=127.0.0.1:%d --http-token=s3cret",
                 capture_port());
        assert_int_equal(run_cdcctl(args, out, sizeof(out)), 0);
        assert_non_null(strstr(out, "started"));
        assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    }
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_resnap"));
    PQfinish(c);
}

/*
 * --snapshot-max-rate is one pace over every table (docs/capture.md, "Incremental
 * snapshot"): two tables of 1,500 rows re-snapshotted at once at 1,000 rows/s in chunks
 * of 500 take at least the 2.5 s of the waits after the first five of their six chunks
 * (a pace per table took about 1 s), and both topics still end equal to their tables.
 */
static void test_snapshot_max_rate(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=500",
                                "--snapshot-max-rate=1000", NULL};
    log_count_t both_done = {"done: ", 2};
    char args[512], out[8192];
    long long start, took;
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_rate, ct_rate2");
    sql(c, "CREATE TABLE ct_rate (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_rate2 (id int PRIMARY KEY, v int)");
    pid = start_capture_opts(N("ct_rate"), "public.ct_rate,public.ct_rate2", more);
    wait_streaming(c, N("ct_rate"));
    sql(c, "INSERT INTO ct_rate SELECT g, g FROM generate_series(1, 1500) g");
    sql(c, "INSERT INTO ct_rate2 SELECT g, -g FROM generate_series(1, 1500) g");
    start = cdc_test_now_ms();
    snprintf(args, sizeof(args), "snapshot public.ct_rate --capture=127.0.0.1:%d", capture_port());
    assert_int_equal(run_cdcctl(args, out, sizeof(out)), 0);
    snprintf(args, sizeof(args), "snapshot public.ct_rate2 --capture=127.0.0.1:%d --wait",
             capture_port());
    assert_int_equal(run_cdcctl(args, out, sizeof(out)), 0);
    if (!cdc_test_wait_for(log_has_count, &both_done, 30000))
        fail_msg("the two snapshots did not both finish; log: %s", read_log());
    took = cdc_test_now_ms() - start;
    print_message("2 x 1500 rows at --snapshot-max-rate=1000 in %lld ms\n", took);
    if (took < 2500)
        fail_msg("the two snapshots took %lld ms: not paced at 1,000 rows/s over both", took);
    for (int i = 0; i < 2; i++) {
        const char *table = i == 0 ? "ct_rate" : "ct_rate2";
        char qualified[64];
        evs_t s = {0};
        snprintf(qualified, sizeof(qualified), "public.%s", table);
        wait_caught_up(c, table, topic_of("ct_rate", qualified), 0);
        check_converged(c, table, topic_of("ct_rate", qualified), &s);
        assert_int_equal(count_reads(&s, "backfill", NULL, NULL), 1500);
        evs_free(&s);
    }
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_rate"));
    PQfinish(c);
}

/*
 * Many small tables added in one ALTER PUBLICATION share watermark windows
 * (--snapshot-window-tables; docs/capture.md, "Incremental snapshot"): 24 tables of 40
 * rows and one of 1,200 join at once; with windows of at most 8 tables and 500 rows
 * (--snapshot-chunk), every table is read completely and exactly once (each key one `r`
 * row, the topic equal to the table), /status shows each snapshot done with its rows,
 * and the capture opened fewer windows than it read chunks (at least 25 chunks, at most
 * 8 a window: no more than 12 windows, not fewer than 4).
 */
static void test_tables_share_windows(void **state)
{
    enum { SMALL = 24, ROWS = 40, BIG = 1200 };
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=500",
                                "--snapshot-window-tables=8", "--snapshot-max-rate=0", NULL};
    log_count_t all_done = {"done: ", SMALL + 1};
    char name[64], add[4096] = "";
    double windows, chunks;
    pid_t pid;
    (void)state;

    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_mw"));
    sql(c, "DROP TABLE IF EXISTS ct_mw_base, ct_mw_big");
    sql(c, "CREATE TABLE ct_mw_base (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_mw_big (id int PRIMARY KEY, v int)");
    sql(c, "INSERT INTO ct_mw_big SELECT g, g FROM generate_series(1, %d) g", BIG);
    snprintf(add, sizeof(add), "ct_mw_big");
    for (int i = 0; i < SMALL; i++) {
        snprintf(name, sizeof(name), "ct_mw_%02d", i);
        sql(c, "DROP TABLE IF EXISTS %s", name);
        sql(c, "CREATE TABLE %s (id int PRIMARY KEY, v int)", name);
        sql(c, "INSERT INTO %s SELECT g, g * %d FROM generate_series(1, %d) g", name, i + 1, ROWS);
        snprintf(add + strlen(add), sizeof(add) - strlen(add), ", %s", name);
    }
    sql(c, "CREATE PUBLICATION %s FOR TABLE ct_mw_base WITH (publish_via_partition_root = true)",
        N("ct_mw"));
    pid = start_capture_opts(N("ct_mw"), "", more);
    wait_streaming(c, N("ct_mw"));
    sql(c, "ALTER PUBLICATION %s ADD TABLE %s", N("ct_mw"), add);
    if (!cdc_test_wait_for(log_has_count, &all_done, 120000))
        fail_msg("not every snapshot finished; log: %s", read_log());

    /* each table complete, each key read once */
    for (int i = 0; i <= SMALL; i++) {
        evs_t s = {0};
        char topic[96];
        if (i < SMALL)
            snprintf(name, sizeof(name), "ct_mw_%02d", i);
        else
            snprintf(name, sizeof(name), "ct_mw_big");
        snprintf(topic, sizeof(topic), "public.%s", name);
        wait_caught_up(c, name, topic_of("ct_mw", topic), 0);
        check_converged(c, name, topic_of("ct_mw", topic), &s);
        assert_int_equal(count_reads(&s, "incremental", NULL, NULL), i < SMALL ? ROWS : BIG);
        evs_free(&s);
    }
    /* /status: every snapshot done with its rows */
    {
        json_t *st = capture_status(), *tables = json_object_get(st, "tables");
        int seen = 0;
        for (size_t i = 0; i < json_array_size(tables); i++) {
            json_t *x = json_array_get(tables, i), *snap = json_object_get(x, "snapshot");
            const char *t = json_string_value(json_object_get(x, "table"));
            if (strncmp(t, "public.ct_mw_", 13) != 0 || strcmp(t, "public.ct_mw_base") == 0)
                continue;
            seen++;
            assert_true(json_is_true(json_object_get(snap, "done")));
            assert_int_equal(json_integer_value(json_object_get(snap, "rows")),
                             strcmp(t, "public.ct_mw_big") == 0 ? BIG : ROWS);
        }
        assert_int_equal(seen, SMALL + 1);
        json_decref(st);
    }
    windows = metric("cdc_capture_snapshot_windows_total");
    chunks = metric("cdc_capture_snapshot_chunks_total");
    print_message("%.0f chunks in %.0f windows\n", chunks, windows);
    assert_true(chunks >= SMALL + 1);
    assert_true(windows >= 4 && windows <= 12);
    assert_non_null(strstr(read_log(), "msg=\"incremental snapshots: "));
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_mw"));
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_mw"));
    PQfinish(c);
}

/*
 * --snapshot-mode=incremental: the slot's first snapshot by incremental snapshots; a
 * capture killed (SIGKILL) during it keeps its slot and resumes from the last recorded
 * chunk instead of dropping the slot and starting over; the topic ends equal to the
 * table.
 */
static void test_initial_incremental_resumes(void **state)
{
    PGconn *c = pg_as(NULL);
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=2000",
                                "--snapshot-mode=incremental", NULL};
    wait_metric_t chunks = {"cdc_capture_snapshot_chunks_total", 5};
    pid_t pid, writer;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_ini, ct_ini_other");
    sql(c, "CREATE TABLE ct_ini (id int PRIMARY KEY, v int)");
    sql(c, "CREATE TABLE ct_ini_other (id serial PRIMARY KEY, v int)");
    sql(c, "INSERT INTO ct_ini SELECT g, g FROM generate_series(1, 100000) g");
    pid = start_capture_opts(N("ct_ini"), "public.ct_ini,public.ct_ini_other", more);
    wait_streaming(c, N("ct_ini"));
    writer = start_writer("ct_ini", "ct_ini_other", 100000, 5000);
    if (!cdc_test_wait_for(metric_reached, &chunks, 60000))
        fail_msg("the incremental snapshot did not produce 5 chunks; log: %s", read_log());
    kill_and_resume(c, "ct_ini", "public.ct_ini,public.ct_ini_other", more, "ct_ini", 100000, pid,
                    writer);
    assert_null(strstr(read_log(), "dropping the slot"));
}

/*
 * A capture killed (SIGKILL) during its `initial` snapshot (its exported snapshot dies with
 * it) leaves the slot without the marker: the next one adopts the slot, never drops it
 * (docs/capture.md, "An existing slot"), and reads the table by an incremental snapshot
 * under the dead snapshot's id, so that a worker takes the rows read twice as one
 * snapshot's (docs/worker.md, "Snapshot reads exactly once"): every snapshot row of both
 * captures carries the one id `s<consistent point>`, every row is read, and some were
 * read twice (the killed snapshot got to them).
 */
static void test_initial_snapshot_killed_adopts(void **state)
{
    PGconn *c = pg_as(NULL);
    /* (--max-inflight: the snapshot waits for Kafka's acks as it goes, so that the rows
     * counted before the kill are in Kafka) */
    const char *const more[] = {"--http=127.0.0.1:0", "--snapshot-chunk=500", "--max-inflight=1000",
                                NULL};
    wait_metric_t rows = {"cdc_capture_snapshot_rows_total{table=\"public.ct_iad\"}", 20000};
    const char *topic = topic_of("ct_iad", "public.ct_iad");
    const int n = 100000;
    evs_t s = {0};
    char *seen = calloc((size_t)n + 1, 1), id[64] = "";
    size_t reads = 0, twice = 0;
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_iad");
    sql(c, "CREATE TABLE ct_iad (id int PRIMARY KEY, v int)");
    sql(c, "INSERT INTO ct_iad SELECT g, g FROM generate_series(1, %d) g", n);
    pid = start_capture_opts(N("ct_iad"), "public.ct_iad", more);
    if (!cdc_test_wait_for(log_has, "http server listening on", 20000) ||
        !cdc_test_wait_for(metric_reached, &rows, 60000))
        fail_msg("the initial snapshot produced no rows; log: %s", read_log());
    cdc_test_kill(pid, SIGKILL, 5000);
    if (strstr(read_log(), "msg=\"streaming slot") != NULL)
        fail_msg("the initial snapshot of %d rows completed before the kill", n);
    log_mark = strlen(read_log());
    pid = start_capture_opts(N("ct_iad"), "public.ct_iad", more);
    if (!cdc_test_wait_for(log_after, "of public.ct_iad done", 120000))
        fail_msg("the adopted slot's snapshot did not complete; log: %s", read_log() + log_mark);
    if (!log_after("adopting existing slot"))
        fail_msg("the restarted capture did not adopt the slot; log: %s", read_log() + log_mark);
    assert_null(strstr(read_log(), "dropping"));
    consume(topic, &s, (size_t)n, 60000);
    for (size_t i = 0; i < s.n; i++) {
        const json_t *src = json_object_get(s.v[i].value, "source");
        const char *sid = json_string_value(json_object_get(src, "snapshot_id"));
        int k = key_id(&s.v[i]);
        if (s.v[i].op != 'r')
            continue;
        if (sid == NULL || sid[0] != 's')
            fail_msg("snapshot row of key %d without the slot's snapshot id", k);
        if (id[0] == '\0')
            snprintf(id, sizeof(id), "%s", sid);
        else if (strcmp(id, sid) != 0)
            fail_msg("snapshot rows under two ids: %s and %s", id, sid);
        assert_true(k >= 1 && k <= n);
        twice += seen[k];
        seen[k] = 1;
        reads++;
    }
    for (int k = 1; k <= n; k++)
        if (!seen[k])
            fail_msg("row %d was never read", k);
    print_message("%zu snapshot rows under %s, %zu keys read twice\n", reads, id, twice);
    assert_true(twice > 0); /* the killed snapshot's rows were read again */
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    free(seen);
    evs_free(&s);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_iad"));
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_consistency),
        cmocka_unit_test(test_table_added_running),
        cmocka_unit_test(test_toast_in_chunk_window),
        cmocka_unit_test(test_incremental_snapshot_resumes),
        cmocka_unit_test(test_resnapshot_on_demand),
        cmocka_unit_test(test_snapshot_max_rate),
        cmocka_unit_test(test_tables_share_windows),
        cmocka_unit_test(test_initial_incremental_resumes),
        cmocka_unit_test(test_initial_snapshot_killed_adopts),
    };
    return capture_main(tests, sizeof(tests) / sizeof(tests[0]));
}
