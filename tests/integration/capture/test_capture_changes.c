/*
 * Component tests of cdc-capture against the harness PostgreSQL and development Kafka
 * broker: the events it makes of the changes it decodes. Every listed type and operation
 * with the events' content, per-key order and partitioning checked; a schema change; a
 * burst read at once despite --read-coalesce; a partitioned table captured as one table
 * (through publish_via_partition_root, and mapped from its partitions when a publication
 * sends them), partitions attached and detached while running; a rename decoded while its
 * commit is not yet visible to other sessions keeping its field id. Each test uses its own
 * slot, publication and topic prefix, so they do not see each other's events
 * (capture_fixture.h).
 */
#include "tests/integration/capture/capture_fixture.h"

static void test_types_and_operations(void **state)
{
    PGconn *c = pg_as(NULL);
    evs_t s = {0};
    const ev_t *e;
    json_t *a;
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_types; DROP TYPE IF EXISTS ct_mood");
    sql(c, "CREATE TYPE ct_mood AS ENUM ('sad', 'ok', 'happy')");
    sql(c, "CREATE TABLE ct_types (id int PRIMARY KEY, b bool, i2 int2, i4 int4, i8 int8, "
           "f4 float4, f8 float8, n numeric(30,9), nn numeric, t text, vc varchar(10), "
           "ch char(3), by bytea, d date, tm time, ts timestamp, tz timestamptz, u uuid, "
           "j json, jb jsonb, mood ct_mood, ia int[], ta text[], big text)");
    pid = start_capture(N("ct_ops"), "public.ct_types", NULL);
    wait_streaming(c, N("ct_ops"));

    sql(c, "INSERT INTO ct_types VALUES (1, true, -32768, 2147483647, 9223372036854775807, "
           "1.5, 0.1, 123456789012345678901.123456789, 1e-20, 'h\"i\\\\', 'vc', 'ab', "
           "'\\x00ff10', '2024-02-29', '13:45:10.5', '2024-02-29 12:34:56.123456', "
           "'2024-02-29 14:34:56.123456+02', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
           "'{\"a\": [1, 2]}', '{\"b\": null}', 'happy', '{1,NULL,3}', '{x,\"y z\"}', 'small');"
           "INSERT INTO ct_types (id) VALUES (2)");
    /* one transaction: the same row twice, an insert and a delete */
    sql(c, "BEGIN; UPDATE ct_types SET t = 'a' WHERE id = 1; UPDATE ct_types SET t = 'b' WHERE "
           "id = 1; INSERT INTO ct_types (id, f8) VALUES (3, 'NaN'); DELETE FROM ct_types WHERE "
           "id = 2; COMMIT");
    /* an unchanged TOASTed value */
    sql(c, "UPDATE ct_types SET big = (SELECT string_agg(md5(g::text), '') FROM "
           "generate_series(1, 400) g) WHERE id = 3");
    sql(c, "UPDATE ct_types SET i4 = 5 WHERE id = 3");
    /* a key change */
    sql(c, "UPDATE ct_types SET id = 4 WHERE id = 3");
    sql(c, "TRUNCATE ct_types");
    /* schema change */
    sql(c, "ALTER TABLE ct_types ADD COLUMN extra int");
    sql(c, "INSERT INTO ct_types (id, extra) VALUES (10, 42)");

    consume(topic_of("ct_ops", "public.ct_types"), &s, 2 + 4 + 2 + 2 + 12 + 1, 30000);
    assert_int_equal(s.n, 23);
    check_key_order(&s, true);

    /* every type */
    e = find(&s, 'c', 1, 0);
    assert_non_null(e);
    a = after_of(e);
    assert_true(json_is_true(json_object_get(a, "b")));
    assert_int_equal(json_integer_value(json_object_get(a, "i2")), -32768);
    assert_int_equal(json_integer_value(json_object_get(a, "i4")), 2147483647);
    assert_true(json_integer_value(json_object_get(a, "i8")) == INT64_MAX);
    assert_true(json_real_value(json_object_get(a, "f4")) == 1.5);
    assert_true(json_real_value(json_object_get(a, "f8")) == 0.1);
    assert_string_equal(str_at(a, "n"), "123456789012345678901.123456789");
    assert_string_equal(str_at(a, "nn"), "0.00000000000000000001");
    assert_string_equal(str_at(a, "t"), "h\"i\\\\");
    assert_string_equal(str_at(a, "vc"), "vc");
    assert_string_equal(str_at(a, "ch"), "ab ");
    assert_string_equal(str_at(a, "by"), "AP8Q");
    assert_int_equal(json_integer_value(json_object_get(a, "d")), 19782);
    assert_true(json_integer_value(json_object_get(a, "tm")) == 49510500000LL);
    assert_true(json_integer_value(json_object_get(a, "ts")) == 1709210096123456LL);
    assert_true(json_integer_value(json_object_get(a, "tz")) == 1709210096123456LL);
    assert_string_equal(str_at(a, "u"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assert_string_equal(str_at(a, "j"), "{\"a\": [1, 2]}");
    assert_string_equal(str_at(a, "jb"), "{\"b\": null}");
    assert_string_equal(str_at(a, "mood"), "happy");
    assert_string_equal(str_at(a, "ia"), "[1,null,3]");
    assert_string_equal(str_at(a, "ta"), "[\"x\",\"y z\"]");
    assert_int_equal(e->schema_version, 1);
    assert_string_equal(e->key, "{\"id\":1}");
    assert_string_equal(str_at(json_object_get(e->value, "source"), "snapshot"), "false");
    assert_string_equal(str_at(json_object_get(e->value, "source"), "connector"), "cdc-capture");
    assert_string_equal(str_at(json_object_get(e->value, "source"), "table"), "ct_types");

    /* NULLs are present as null */
    e = find(&s, 'c', 2, 0);
    assert_non_null(e);
    assert_non_null(json_object_get(after_of(e), "f8"));
    assert_true(json_is_null(json_object_get(after_of(e), "f8")));

    /* the multi-statement transaction: same txId and commit, increasing lsn, in order */
    {
        const ev_t *u1 = find(&s, 'u', 1, 0), *u2 = find(&s, 'u', 1, 1);
        const ev_t *c3 = find(&s, 'c', 3, 0), *d2 = find(&s, 'd', 2, 0);
        json_int_t tx;
        assert_non_null(u1);
        assert_non_null(u2);
        assert_non_null(c3);
        assert_non_null(d2);
        assert_string_equal(str_at(after_of(u1), "t"), "a");
        assert_string_equal(str_at(after_of(u2), "t"), "b");
        assert_true(u1->offset < u2->offset);
        assert_true(u1->lsn < u2->lsn && u2->lsn < c3->lsn && c3->lsn < d2->lsn);
        assert_true(u1->commit_lsn == d2->commit_lsn && u1->commit_lsn == c3->commit_lsn);
        tx = json_integer_value(json_object_get(json_object_get(u1->value, "source"), "txId"));
        assert_true(tx == json_integer_value(
                              json_object_get(json_object_get(d2->value, "source"), "txId")));
        assert_true(json_is_null(json_object_get(u1->value, "before")));
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(d2->value, "before"), "id")), 2);
        assert_int_equal(json_object_size(json_object_get(d2->value, "before")), 1);
        assert_string_equal(str_at(after_of(c3), "f8"), "NaN");
    }
    /* unchanged TOAST: listed, and absent from after */
    {
        const ev_t *t1 = find(&s, 'u', 3, 0), *t2 = find(&s, 'u', 3, 1);
        json_t *list;
        assert_non_null(t1);
        assert_non_null(t2);
        assert_true(strlen(str_at(after_of(t1), "big")) == 12800);
        assert_null(json_object_get(t1->value, "unchanged_toast"));
        list = json_object_get(t2->value, "unchanged_toast");
        assert_int_equal(json_array_size(list), 1);
        assert_string_equal(json_string_value(json_array_get(list, 0)), "big");
        assert_null(json_object_get(after_of(t2), "big"));
        assert_int_equal(json_integer_value(json_object_get(after_of(t2), "i4")), 5);
    }
    /* key change: delete of the old key, insert of the new one */
    {
        const ev_t *d3 = find(&s, 'd', 3, 0), *c4 = find(&s, 'c', 4, 0);
        assert_non_null(d3);
        assert_non_null(c4);
        assert_true(d3->lsn == c4->lsn);
        assert_int_equal(json_integer_value(json_object_get(after_of(c4), "i4")), 5);
    }
    /* truncate: once per partition, no key */
    {
        int seen[12] = {0};
        for (size_t i = 0; i < s.n; i++) {
            if (s.v[i].op != 't')
                continue;
            assert_null(s.v[i].key);
            seen[s.v[i].partition]++;
        }
        for (int p = 0; p < 12; p++)
            assert_int_equal(seen[p], 1);
    }
    /* the schema change is a new version, registered on the schemas topic */
    e = find(&s, 'c', 10, 0);
    assert_non_null(e);
    assert_int_equal(e->schema_version, 2);
    assert_int_equal(json_integer_value(json_object_get(after_of(e), "extra")), 42);
    evs_free(&s);
    consume(topic_of("ct_ops", "_schemas"), &s, 2, 20000);
    assert_int_equal(s.n, 2);
    evs_free(&s);

    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_ops"));
    PQfinish(c);
}

/*
 * --read-coalesce spaces out reads only while changes trickle in: a burst (one large
 * transaction) is read as fast as it arrives. At the longest interval (100 ms), reading
 * these ~3 MB one libpq buffer (8 to 16 KiB) per interval would take 20 s or more; the
 * deadline is 10 s, and the capture needs well under one.
 */
static void test_burst_not_coalesced(void **state)
{
    PGconn *c = pg_as(NULL);
    evs_t s = {0};
    pid_t pid;
    long long t0;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_burst");
    sql(c, "CREATE TABLE ct_burst (id int PRIMARY KEY, pad text)");
    pid = start_capture(N("ct_burst"), "public.ct_burst", "--read-coalesce=100ms");
    wait_streaming(c, N("ct_burst"));
    t0 = cdc_test_now_ms();
    sql(c, "INSERT INTO ct_burst SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g");
    consume_q(topic_of("ct_burst", "public.ct_burst"), &s, 20000, 10000, 0);
    if (s.n < 20000)
        fail_msg("only %zu of 20000 changes of one transaction within 10 s at "
                 "--read-coalesce=100ms: the burst was read in coalesced steps",
                 s.n);
    fprintf(stderr, "burst of 20000 changes in Kafka after %lld ms\n", cdc_test_now_ms() - t0);
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_burst"));
    PQfinish(c);
}

static const ev_t *find_kv(const evs_t *s, char op, int id, const char *region)
{
    for (size_t i = 0; i < s->n; i++) {
        const json_t *row;
        if (s->v[i].op != op || key_id(&s->v[i]) != id)
            continue;
        row = json_object_get(s->v[i].value, op == 'd' ? "before" : "after");
        if (region == NULL || strcmp(str_at(row, "region"), region) == 0)
            return &s->v[i];
    }
    return NULL;
}

static void create_partitioned(PGconn *c, const char *t)
{
    sql(c, "DROP TABLE IF EXISTS %s, %s_eu, %s_us, %s_ap CASCADE", t, t, t, t);
    sql(c,
        "CREATE TABLE %s (id int, region text, v int, PRIMARY KEY (id, region)) "
        "PARTITION BY LIST (region)",
        t);
    sql(c, "CREATE TABLE %s_eu PARTITION OF %s FOR VALUES IN ('eu')", t, t);
    /* a partition with its columns in another order: rows still map by name */
    sql(c, "CREATE TABLE %s_us (v int, region text NOT NULL, id int NOT NULL)", t);
    sql(c, "ALTER TABLE %s ATTACH PARTITION %s_us FOR VALUES IN ('us')", t, t);
}

/*
 * A PARTITION BY LIST table with two partitions is captured as one table: the snapshot
 * reads it once through the parent, streamed changes arrive under the parent's topic
 * (publication created WITH publish_via_partition_root), nothing on the partitions'
 * topics; a partition attached while running is streamed, and the rows it held before
 * come from a backfill (the schema probe sees the new partition); a detached one is not
 * streamed, and its rows leave the mirror: the backfill is then a resync (a truncate
 * before the re-read rows).
 */
static void test_partitioned_table(void **state)
{
    PGconn *c = pg_as(NULL);
    static const char *const opts[] = {"--http=127.0.0.1:0", "--schema-probe-interval=1s", NULL};
    wait_metric_t wm = {"cdc_capture_backfills_total", 1};
    evs_t s = {0};
    size_t streamed = 0;
    char *via;
    pid_t pid;
    (void)state;

    create_partitioned(c, "ct_part");
    sql(c, "INSERT INTO ct_part VALUES (1, 'eu', 10), (2, 'us', 20)");
    pid = start_capture_opts(N("ct_part"), "public.ct_part", opts);
    wait_streaming(c, N("ct_part"));
    {
        char q[256];
        snprintf(q, sizeof(q), "SELECT pubviaroot FROM pg_publication WHERE pubname = '%s'",
                 N("ct_part"));
        via = sql1(c, q);
        assert_string_equal(via, "t");
        free(via);
    }

    sql(c, "INSERT INTO ct_part VALUES (3, 'eu', 30), (4, 'us', 40)");
    sql(c, "UPDATE ct_part SET v = 11 WHERE id = 1");
    sql(c, "UPDATE ct_part SET region = 'us' WHERE id = 3"); /* moves to the other partition */
    sql(c, "DELETE FROM ct_part WHERE id = 2");
    /* attach: the row already in the table has no WAL change: a backfill brings it */
    sql(c, "CREATE TABLE ct_part_ap (id int NOT NULL, region text NOT NULL, v int)");
    sql(c, "INSERT INTO ct_part_ap VALUES (100, 'ap', 0)");
    sql(c, "ALTER TABLE ct_part ATTACH PARTITION ct_part_ap FOR VALUES IN ('ap')");
    sql(c, "INSERT INTO ct_part VALUES (101, 'ap', 1)");
    /* detach: the detached table is no longer part of the captured table */
    sql(c, "ALTER TABLE ct_part DETACH PARTITION ct_part_us");
    sql(c, "INSERT INTO ct_part_us (id, region, v) VALUES (200, 'us', 2)");
    sql(c, "UPDATE ct_part_us SET v = 41 WHERE id = 4");
    sql(c, "INSERT INTO ct_part VALUES (5, 'eu', 50)"); /* after everything above */

    if (!cdc_test_wait_for(metric_reached, &wm, 30000))
        fail_msg("no backfill after the partition was attached");
    /* 2 snapshot rows; c3, c4, u1, d3/c3 (move), d2, c101, c5; and the backfill's rows */
    consume_q(topic_of("ct_part", "public.ct_part"), &s, 10, 30000, 1500);
    for (size_t i = 0; i < s.n; i++)
        streamed +=
            strcmp(str_at(json_object_get(s.v[i].value, "source"), "snapshot"), "backfill") != 0;
    if (streamed != 10) {
        for (size_t i = 0; i < s.n; i++)
            fprintf(stderr, "event %zu: %c key %s\n", i, s.v[i].op, s.v[i].key);
        fail_msg("expected 10 streamed events on the parent's topic, got %zu", streamed);
    }
    check_key_order(&s, true);
    assert_non_null(find_kv(&s, 'r', 1, "eu"));
    assert_non_null(find_kv(&s, 'r', 2, "us"));
    /* the attached partition's earlier row, re-read with the table */
    const ev_t *back = find_kv(&s, 'r', 100, "ap");
    assert_non_null(back);
    assert_string_equal(str_at(json_object_get(back->value, "source"), "snapshot"), "backfill");
    /* the detached partition's rows left without WAL changes: the backfill is a resync, a
     * truncate (a backfill's, on every partition of the topic, just before the rows) and
     * the rows the table still has, none of the detached partition's */
    {
        size_t truncs = 0;
        for (size_t i = 0; i < s.n; i++) {
            const char *snap = str_at(json_object_get(s.v[i].value, "source"), "snapshot");
            if (s.v[i].op == 't' && strcmp(snap, "backfill") == 0) {
                truncs++;
                assert_true(s.v[i].lsn < back->lsn);
                assert_int_equal(s.v[i].commit_lsn, back->commit_lsn);
            }
            if (s.v[i].op == 'r' && strcmp(snap, "backfill") == 0)
                assert_string_not_equal(str_at(after_of(&s.v[i]), "region"), "us");
        }
        assert_true(truncs >= 1);
    }
    assert_non_null(find_kv(&s, 'c', 3, "eu"));
    assert_non_null(find_kv(&s, 'c', 4, "us"));
    assert_int_equal(json_integer_value(json_object_get(after_of(find_kv(&s, 'u', 1, "eu")), "v")),
                     11);
    assert_non_null(find_kv(&s, 'd', 3, "eu"));
    assert_non_null(find_kv(&s, 'c', 3, "us"));
    assert_non_null(find_kv(&s, 'd', 2, "us"));
    assert_non_null(find_kv(&s, 'c', 101, "ap"));
    assert_non_null(find_kv(&s, 'c', 5, "eu"));
    assert_null(find_kv(&s, 'c', 100, NULL));
    assert_null(find_kv(&s, 'c', 200, NULL));
    assert_null(find_kv(&s, 'u', 4, NULL));
    for (size_t i = 0; i < s.n; i++)
        assert_string_equal(str_at(json_object_get(s.v[i].value, "source"), "table"), "ct_part");
    assert_string_equal(find_kv(&s, 'c', 5, "eu")->key, "{\"id\":5,\"region\":\"eu\"}");
    evs_free(&s);
    /* the partitions are not tables of their own */
    assert_int_equal(topic_events(topic_of("ct_part", "public.ct_part_eu")), 0);
    assert_int_equal(topic_events(topic_of("ct_part", "public.ct_part_us")), 0);
    assert_int_equal(topic_events(topic_of("ct_part", "public.ct_part_ap")), 0);
    assert_true(metric("cdc_capture_snapshot_rows_total{table=\"public.ct_part\"}") == 2);
    /* the changes named the parent (publish_via_partition_root), not the partitions */
    assert_null(strstr(read_log(), "arrive under its own name"));
    assert_true(metric("cdc_capture_reconnects_total") == 0);

    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_part"));
    PQfinish(c);
}

/*
 * A publication that publishes the partitions (not the parent) sends changes under
 * the partitions' relations: they are mapped onto the parent and produced as its rows.
 * A publication that names the parent without publish_via_partition_root, not managed
 * by the capture (--create-publication=false), fails that table with the statement
 * that fixes it while the other table streams.
 */
static void test_partition_leaf_changes(void **state)
{
    PGconn *c = pg_as(NULL);
    static const char *const opts[] = {"--create-publication=false", "--http=127.0.0.1:0", NULL};
    evs_t s = {0};
    pid_t pid;
    char want[256];
    (void)state;

    create_partitioned(c, "ct_leaf");
    sql(c, "DROP TABLE IF EXISTS ct_leaf_good; CREATE TABLE ct_leaf_good (id int PRIMARY KEY)");
    sql(c, "INSERT INTO ct_leaf VALUES (1, 'eu', 10)");
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_leaf"));
    sql(c, "CREATE PUBLICATION %s FOR TABLE ct_leaf_eu, ct_leaf_us", N("ct_leaf"));
    pid = start_capture_opts(N("ct_leaf"), "public.ct_leaf", opts);
    wait_streaming(c, N("ct_leaf"));
    sql(c, "INSERT INTO ct_leaf VALUES (2, 'us', 20), (3, 'eu', 30)");
    sql(c, "UPDATE ct_leaf SET v = 21 WHERE id = 2");
    sql(c, "DELETE FROM ct_leaf WHERE id = 3");
    consume_q(topic_of("ct_leaf", "public.ct_leaf"), &s, 5, 30000, 1000);
    assert_int_equal(s.n, 5);
    check_key_order(&s, true);
    assert_non_null(find_kv(&s, 'r', 1, "eu"));
    assert_non_null(find_kv(&s, 'c', 2, "us"));
    /* ct_leaf_us has its columns in another order: the values follow the names */
    assert_int_equal(json_integer_value(json_object_get(after_of(find_kv(&s, 'c', 2, "us")), "v")),
                     20);
    assert_int_equal(json_integer_value(json_object_get(after_of(find_kv(&s, 'u', 2, "us")), "v")),
                     21);
    assert_non_null(find_kv(&s, 'd', 3, "eu"));
    assert_string_equal(find_kv(&s, 'c', 3, "eu")->key, "{\"id\":3,\"region\":\"eu\"}");
    evs_free(&s);
    assert_int_equal(topic_events(topic_of("ct_leaf", "public.ct_leaf_us")), 0);
    assert_non_null(strstr(read_log(), "changes of partition public.ct_leaf_us arrive under"));
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_leaf"));

    /* the parent in a publication without publish_via_partition_root, not managed */
    sql(c, "DROP PUBLICATION IF EXISTS %s", N("ct_leafb"));
    sql(c, "CREATE PUBLICATION %s FOR TABLE ct_leaf, ct_leaf_good", N("ct_leafb"));
    pid = start_capture_opts(N("ct_leafb"), "public.ct_leaf,public.ct_leaf_good", opts);
    wait_streaming(c, N("ct_leafb"));
    sql(c, "INSERT INTO ct_leaf_good VALUES (7)");
    consume_q(topic_of("ct_leafb", "public.ct_leaf_good"), &s, 1, 30000, 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(key_id(&s.v[0]), 7);
    evs_free(&s);
    snprintf(want, sizeof(want),
             "ALTER PUBLICATION \\\"%s\\\" SET (publish_via_partition_root = true)", N("ct_leafb"));
    /* the log escapes quotes (logfmt) */
    if (strstr(read_log(), "table \\\"public.ct_leaf\\\" is partitioned") == NULL)
        fail_msg("no error for the partitioned table; log: %s", read_log());
    if (strstr(read_log(), want) == NULL)
        fail_msg("no SQL hint %s in the log: %s", want, read_log());
    assert_true(metric("cdc_capture_table_errors{table=\"public.ct_leaf\"}") == 1);
    assert_true(metric("cdc_capture_table_errors{table=\"public.ct_leaf_good\"}") == 0);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_leafb"));

    /* the reproduction: the same publication (its tables list the partitions,
     * not the parent), now managed by the capture: no ADD TABLE of a member, the option
     * is set, and the parent streams */
    {
        char pubopt[160], q[256];
        const char *const opts2[] = {pubopt, NULL};
        char *via;
        snprintf(pubopt, sizeof(pubopt), "--publication=%s", N("ct_leafb"));
        pid = start_capture_opts(N("ct_leafc"), "public.ct_leaf,public.ct_leaf_good", opts2);
        wait_streaming(c, N("ct_leafc"));
        snprintf(q, sizeof(q), "SELECT pubviaroot FROM pg_publication WHERE pubname = '%s'",
                 N("ct_leafb"));
        via = sql1(c, q);
        assert_string_equal(via, "t");
        free(via);
        assert_null(strstr(read_log(), "is not captured"));
        assert_null(strstr(read_log(), "already member"));
        sql(c, "INSERT INTO ct_leaf VALUES (9, 'us', 90)");
        consume_q(topic_of("ct_leafc", "public.ct_leaf"), &s, 3, 30000, 1000);
        assert_int_equal(s.n, 3); /* the snapshot's (1, eu) and (2, us), and the insert */
        assert_non_null(find_kv(&s, 'r', 1, "eu"));
        assert_non_null(find_kv(&s, 'r', 2, "us"));
        assert_non_null(find_kv(&s, 'c', 9, "us"));
        evs_free(&s);
        assert_null(strstr(read_log(), "arrive under its own name"));
        assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
        sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_leafc"));
    }
    PQfinish(c);
}

/* True when the backend arg (a pid as text) waits for synchronous replication. */
static bool backend_in_syncrep(void *arg)
{
    PGconn *c = pg_as(NULL);
    char q[256], *v;
    bool in;
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event = 'SyncRep'",
             (const char *)arg);
    v = sql1(c, q);
    in = strcmp(v, "1") == 0;
    free(v);
    PQfinish(c);
    return in;
}

/*
 * A rename decoded before its transaction is visible to other sessions: PostgreSQL
 * flushes the commit record (which the walsender may then decode and send) before the
 * committing backend leaves the proc array, a window that heavy load widens
 * (schema_evolution.sh once saw it: the changelog's renamed column got a new field id,
 * earlier files read it as null). The capture reads the columns' attnum from the
 * catalog at the Relation message: read too early, the old catalog has no column of the
 * new name, and the renamed column would get a new field id. Here the window is held
 * open: synchronous_standby_names names a standby that never comes, so the committing
 * backend waits in SyncRep after its commit record is flushed and before its commit is
 * visible; it is released after the capture received the transaction. The renamed
 * column must keep its field id (and attnum) in the new schema version.
 */
static void test_rename_decoded_before_visible(void **state)
{
    PGconn *c = pg_as(NULL), *h = pg_as(NULL);
    evs_t s = {0};
    const ev_t *ev;
    char pidbuf[32], *v;
    const char *regd = "registered schema ";
    char want[256];
    json_t *doc = NULL;
    int64_t v_id = -1, w_id = -1;
    pid_t pid;
    (void)state;

    sql(c, "DROP TABLE IF EXISTS ct_ren");
    sql(c, "CREATE TABLE ct_ren (id int PRIMARY KEY, v text)");
    sql(c, "INSERT INTO ct_ren VALUES (1, 'one')");
    pid = start_capture(N("ct_ren"), "public.ct_ren", NULL);
    wait_streaming(c, N("ct_ren"));
    sql(c, "INSERT INTO ct_ren VALUES (2, 'two')");
    consume_q(topic_of("ct_ren", "public.ct_ren"), &s, 2, 30000, 0);
    assert_int_equal(s.n, 2);
    evs_free(&s);

    /* every other session commits locally; h waits for the standby that never comes */
    sql(c, "ALTER SYSTEM SET synchronous_commit = 'local'");
    sql(c, "ALTER SYSTEM SET synchronous_standby_names = 'ct_ren_never_%s'", tag);
    sql(c, "SELECT pg_reload_conf()");
    usleep(1000000); /* the checkpointer publishes sync_standbys_defined on reload */
    sql(h, "SET synchronous_commit = on");
    v = sql1(h, "SHOW synchronous_standby_names");
    assert_true(strstr(v, "ct_ren_never_") != NULL);
    free(v);
    v = sql1(h, "SELECT pg_backend_pid()");
    snprintf(pidbuf, sizeof(pidbuf), "%s", v);
    free(v);
    assert_int_equal(PQsendQuery(h, "BEGIN; ALTER TABLE ct_ren RENAME COLUMN v TO w; "
                                    "INSERT INTO ct_ren VALUES (3, 'three'); COMMIT"),
                     1);
    if (!cdc_test_wait_for(backend_in_syncrep, pidbuf, 20000)) {
        sql(c, "ALTER SYSTEM RESET synchronous_standby_names");
        sql(c, "ALTER SYSTEM RESET synchronous_commit");
        sql(c, "SELECT pg_reload_conf()");
        fail_msg("the committing backend never waited for synchronous replication");
    }
    /* the commit record is flushed, the commit not visible: the capture decodes it now.
     * Either it registers the next version (at once), or it waits for the commit. */
    snprintf(want, sizeof(want), "%s%s version 2", regd, topic_of("ct_ren", "public.ct_ren"));
    if (!cdc_test_wait_for(log_has, want, 3000))
        (void)cdc_test_wait_for(log_has, "waiting for it to become visible", 5000);
    sql(c, "ALTER SYSTEM RESET synchronous_standby_names");
    sql(c, "ALTER SYSTEM RESET synchronous_commit");
    sql(c, "SELECT pg_reload_conf()");
    {
        PGresult *r;
        while ((r = PQgetResult(h)) != NULL) {
            if (PQresultStatus(r) != PGRES_COMMAND_OK)
                fail_msg("the held transaction failed: %s", PQresultErrorMessage(r));
            PQclear(r);
        }
    }
    consume_q(topic_of("ct_ren", "public.ct_ren"), &s, 3, 30000, 0);
    ev = find(&s, 'c', 3, 0);
    assert_non_null(ev);
    assert_string_equal(json_string_value(json_object_get(after_of(ev), "w")), "three");
    assert_int_equal(ev->schema_version, 2);
    evs_free(&s);
    consume(topic_of("ct_ren", "_schemas"), &s, 2, 20000);
    for (size_t i = 0; i < s.n; i++) {
        json_t *cols = json_object_get(s.v[i].value, "columns");
        size_t k;
        json_t *col;
        int64_t ver = json_integer_value(json_object_get(s.v[i].value, "version"));
        json_array_foreach(cols, k, col)
        {
            const char *name = json_string_value(json_object_get(col, "name"));
            int64_t id = json_integer_value(json_object_get(col, "field_id"));
            if (ver == 1 && name && strcmp(name, "v") == 0)
                v_id = id;
            if (ver == 2 && name && strcmp(name, "w") == 0) {
                w_id = id;
                doc = s.v[i].value;
            }
        }
    }
    if (v_id <= 0 || w_id <= 0)
        fail_msg("schema versions 1 and 2 not found with columns v and w (%zu records)", s.n);
    if (v_id != w_id)
        fail_msg("the renamed column got field id %lld, v had %lld (read the catalog before the "
                 "rename was visible): %s",
                 (long long)w_id, (long long)v_id, json_dumps(doc, JSON_COMPACT));
    /* and the window was open while the capture had the transaction */
    assert_non_null(strstr(read_log(), "waiting for it to become visible"));
    evs_free(&s);
    assert_int_equal(WEXITSTATUS(cdc_test_kill(pid, SIGTERM, 20000)), 0);
    sql(c, "SELECT pg_drop_replication_slot('%s')", N("ct_ren"));
    PQfinish(h);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types_and_operations),
        cmocka_unit_test(test_burst_not_coalesced),
        cmocka_unit_test(test_partitioned_table),
        cmocka_unit_test(test_partition_leaf_changes),
        cmocka_unit_test(test_rename_decoded_before_visible),
    };
    return capture_main(tests, sizeof(tests) / sizeof(tests[0]));
}
