/*
 * Component tests of cdc-worker against the harness's development Kafka broker and
 * etcd, with the real cdc-coordinator committing to a local warehouse. Change events
 * are produced straight into Kafka in the capture's format (docs/events.md), so the
 * tests control duplicates, poison records and schema versions exactly. Tables are
 * read back with icebird (tests/js/lib/read_table.mjs), an independent reader.
 *   - duplicates (exact replays, out-of-order older events) appear once in the
 *     changelog and the mirror holds the right final rows
 *   - a TOASTed text (> 8 kB) updated through another column keeps its value
 *   - poison records land in <topic>.dlq with the right headers; good ones flow
 *   - ADD COLUMN mid-stream: new column committed, old rows read it as null
 *   - a partition's state restored on another worker keeps dropping replays
 *   - the progress watchdog finds a partition that stopped fetching silently
 *   - offsets the broker deleted before a partition was read from the beginning are logged
 *   - with --worker-secret, a worker that proves it commits and one without it is refused
 */
#include <dirent.h>
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

#include "common/kafka.h"
#include "tests/harness/harness.h"
#include "tests/harness/procs.h"

typedef struct it {
    const cdc_test_env_t *env;
    char job[64], prefix[64];
    char *dir;
    char wh[512];
    cdc_test_job_t procs; /* what the coordinator and the workers share */
    pid_t coord;
    pid_t workers[4];
    cdc_kafka_producer_t *prod;
    uint64_t lsn;
} it_t;

static it_t T;

static const char *root_dir(void)
{
    static char root[512];
    snprintf(root, sizeof(root), "%s/..", T.env->build_dir);
    return root;
}

/* ---- producing events ------------------------------------------------------------- */

static void produce_to(const char *table, int32_t partition, const char *key, const char *value,
                       int version)
{
    char topic[256], ver[16];
    cdc_error_t e;
    cdc_kafka_header_t h[1] = {{"cdc.schema", ver, 0}};
    snprintf(topic, sizeof(topic), "%s.public.%s", T.prefix, table);
    snprintf(ver, sizeof(ver), "%d", version);
    h[0].value_len = strlen(ver);
    cdc_kafka_record_t r = {topic,
                            partition,
                            key,
                            key ? strlen(key) : 0,
                            value,
                            value ? strlen(value) : 0,
                            version > 0 ? h : NULL,
                            version > 0 ? 1 : 0,
                            0,
                            NULL};
    assert_int_equal(cdc_kafka_produce(T.prod, &r, &e), CDC_OK);
}

static void produce(const char *table, const char *key, const char *value, int version)
{
    produce_to(table, CDC_KAFKA_PARTITION_ANY, key, value, version);
}

static void flush(void)
{
    cdc_error_t e;
    assert_int_equal(cdc_kafka_producer_flush(T.prod, 20000, &e), CDC_OK);
}

static void schema(const char *table, int version, bool with_status)
{
    char topic[256], key[300], doc[2048];
    cdc_error_t e;
    snprintf(topic, sizeof(topic), "%s.public.%s", T.prefix, table);
    snprintf(key, sizeof(key), "%s/%d", topic, version);
    snprintf(doc, sizeof(doc),
             "{\"format\":1,\"topic\":\"%s\",\"schema\":\"public\",\"table\":\"%s\","
             "\"version\":%d,\"relid\":1,\"replica_identity\":\"default\",\"key\":[\"id\"],"
             "\"columns\":["
             "{\"name\":\"id\",\"pg_oid\":20,\"pg_type\":\"int8\",\"typmod\":-1,"
             "\"nullable\":false,\"key\":1,\"iceberg\":\"long\",\"encoding\":\"int\"},"
             "{\"name\":\"customer\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,"
             "\"nullable\":true,\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"},"
             "{\"name\":\"note\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,"
             "\"nullable\":true,\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"}%s]}",
             topic, table, version,
             with_status ? ",{\"name\":\"status\",\"pg_oid\":25,\"pg_type\":\"text\","
                           "\"typmod\":-1,\"nullable\":true,\"key\":0,\"iceberg\":\"string\","
                           "\"encoding\":\"string\"}"
                         : "");
    char stopic[256];
    snprintf(stopic, sizeof(stopic), "%s._schemas", T.prefix);
    cdc_kafka_record_t r = {stopic, 0, key, strlen(key), doc, strlen(doc), NULL, 0, 0, NULL};
    assert_int_equal(cdc_kafka_produce(T.prod, &r, &e), CDC_OK);
    flush();
}

/* An event in the capture's format; after_cols is the JSON inside "after" without id. */
static char *event(char op, long id, const char *after_cols, uint64_t lsn, const char *extra)
{
    char *v;
    uint64_t commit = lsn + 5;
    if (op == 'd')
        assert_true(asprintf(&v,
                             "{\"before\":{\"id\":%ld},\"after\":null,\"source\":{\"schema\":"
                             "\"public\",\"lsn\":%llu,\"txId\":%llu,\"ts_ms\":1709287200000,"
                             "\"sequence\":\"[\\\"%llu\\\",\\\"%llu\\\"]\"},\"op\":\"d\","
                             "\"ts_ms\":1}",
                             id, (unsigned long long)lsn, (unsigned long long)lsn,
                             (unsigned long long)commit, (unsigned long long)lsn) > 0);
    else
        assert_true(asprintf(&v,
                             "{\"before\":null,\"after\":{\"id\":%ld%s%s},\"source\":{\"schema\":"
                             "\"public\",\"lsn\":%llu,\"txId\":%llu,\"ts_ms\":1709287200000,"
                             "\"sequence\":\"[\\\"%llu\\\",\\\"%llu\\\"]\"},\"op\":\"%c\","
                             "\"ts_ms\":1%s}",
                             id, after_cols && after_cols[0] ? "," : "",
                             after_cols ? after_cols : "", (unsigned long long)lsn,
                             (unsigned long long)lsn, (unsigned long long)commit,
                             (unsigned long long)lsn, op, extra ? extra : "") > 0);
    return v;
}

static void send_event(const char *table, char op, long id, const char *cols, uint64_t lsn,
                       const char *extra, int version)
{
    char key[64];
    char *v = event(op, id, cols, lsn, extra);
    snprintf(key, sizeof(key), "{\"id\":%ld}", id);
    produce(table, key, v, version);
    free(v);
}

/* ---- processes ----------------------------------------------------------------------- */

/* The coordinator's options: short epochs, a worker declared lost after 1.5 s. */
/* (the coordinator's progress check acts well after a worker watchdog of 2 s) */
static const char *const COORD_OPTS[] = {"--commit-interval=300ms", "--rebalance-grace=300ms",
                                         "--heartbeat-timeout=1500ms", "--progress-timeout=6s",
                                         NULL};

static pid_t start_worker(const char *id)
{
    static const char *const opts[] = {"--log-level=debug", NULL};
    pid_t pid =
        cdc_test_start_worker(&T.procs, id, "public.orders,public.poison,public.evolve", opts);
    assert_true(pid > 0);
    return pid;
}

/* ---- reading tables ---------------------------------------------------------------- */

/* Table public.<name> of warehouse wh (NULL: the tests' warehouse). */
static json_t *read_table_in(const char *wh, const char *name)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "node '%s/tests/js/lib/read_table.mjs' '%s/public/%s' 2>/dev/null",
             root_dir(), wh ? wh : T.wh, name);
    FILE *p = popen(cmd, "r");
    json_t *j = p ? json_loadf(p, 0, NULL) : NULL;
    if (p != NULL)
        pclose(p);
    return j;
}

static json_t *read_table(const char *name)
{
    return read_table_in(NULL, name);
}

static json_t *rows_of(json_t *t)
{
    return json_object_get(t, "rows");
}

static json_t *row_by_id(json_t *rows, long id)
{
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        json_t *v = json_object_get(r, "id");
        long x = json_is_string(v) ? atol(json_string_value(v)) : (long)json_integer_value(v);
        if (x == id)
            return r;
    }
    return NULL;
}

typedef struct want {
    const char *table;
    size_t rows;
    const char *wh; /* NULL: the tests' warehouse */
} want_t;

static bool have_rows(void *arg)
{
    want_t *w = arg;
    json_t *t = read_table_in(w->wh, w->table);
    size_t n = json_array_size(rows_of(t));
    json_decref(t);
    if (n < w->rows)
        usleep(300 * 1000); /* pacing between reader runs, not a wait for a condition */
    return n >= w->rows;
}

static void wait_rows(const char *table, size_t rows, int timeout_ms)
{
    want_t w = {table, rows, NULL};
    if (!cdc_test_wait_for(have_rows, &w, timeout_ms)) {
        json_t *t = read_table(table);
        fail_msg("table %s: expected %zu rows within %d ms, have %zu (logs in %s)", table, rows,
                 timeout_ms, json_array_size(rows_of(t)), T.dir);
    }
}

/* Changelog rows per (id, _lsn, _op): each must appear exactly once. */
static void assert_changelog_once(json_t *cl, size_t expected)
{
    size_t n = json_array_size(rows_of(cl));
    json_t *seen = json_object();
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rows_of(cl), i);
        char k[128];
        json_t *id = json_object_get(r, "id"), *lsn = json_object_get(r, "_lsn");
        snprintf(k, sizeof(k), "%s/%s/%s", json_is_string(id) ? json_string_value(id) : "?",
                 json_is_string(lsn) ? json_string_value(lsn) : "?",
                 json_string_value(json_object_get(r, "_op")));
        if (json_object_get(seen, k) != NULL)
            fail_msg("changelog holds change %s twice", k);
        json_object_set_new(seen, k, json_true());
    }
    json_decref(seen);
    assert_int_equal(n, expected);
}

/* ---- setup ------------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    cdc_error_t e;
    cdc_kafka_producer_config_t pc = {0};
    T.env = cdc_test_env();
    T.dir = cdc_test_mkdtemp("worker-it");
    snprintf(T.job, sizeof(T.job), "wit%d", (int)getpid());
    snprintf(T.prefix, sizeof(T.prefix), "wit%d", (int)getpid());
    snprintf(T.wh, sizeof(T.wh), "%s/warehouse", T.dir);
    T.procs =
        (cdc_test_job_t){.dir = T.dir, .name = T.job, .warehouse = T.wh, .topic_prefix = T.prefix};
    pc.bootstrap = T.env->kafka;
    pc.linger_ms = 1;
    if (cdc_kafka_producer_new(&pc, &T.prod, &e) != CDC_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    const char *tables[] = {"orders", "poison", "evolve"};
    for (int i = 0; i < 3; i++) {
        char topic[256];
        snprintf(topic, sizeof(topic), "%s.public.%s", T.prefix, tables[i]);
        cdc_kafka_topic_spec_t spec = {topic, 12, -1, false};
        if (cdc_kafka_ensure_topic(T.env->kafka, NULL, &spec, 10000, &e) != CDC_OK) {
            fprintf(stderr, "%s\n", e.msg);
            return -1;
        }
    }
    char stopic[256];
    snprintf(stopic, sizeof(stopic), "%s._schemas", T.prefix);
    cdc_kafka_topic_spec_t spec = {stopic, 1, -1, true};
    if (cdc_kafka_ensure_topic(T.env->kafka, NULL, &spec, 10000, &e) != CDC_OK)
        return -1;
    T.lsn = 1000;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cdc_test_kill_all(T.workers, 4, SIGTERM, 5000);
    cdc_test_kill_all(&T.coord, 1, SIGTERM, 5000);
    cdc_kafka_producer_free(T.prod);
    return 0;
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_duplicates_toast_dlq_add_column(void **state)
{
    (void)state;
    char big[9100], cols[9300];
    memset(big, 'x', 9000);
    big[0] = 'A';
    big[9000] = '\0';

    schema("orders", 1, false);
    schema("poison", 1, false);
    schema("evolve", 1, false);
    T.coord = cdc_test_start_coordinator(&T.procs, "c1", COORD_OPTS);
    assert_true(T.coord > 0);
    T.workers[0] = start_worker("w1");

    /* orders: 30 inserts, 10 updates, 5 deletes, a TOASTed row and its TOAST update */
    for (long id = 1; id <= 30; id++)
        send_event("orders", 'c', id, "\"customer\":\"c\",\"note\":\"n\"", 1000 + (uint64_t)id,
                   NULL, 1);
    for (long id = 1; id <= 10; id++)
        send_event("orders", 'u', id, "\"customer\":\"u1\",\"note\":\"n\"", 2000 + (uint64_t)id,
                   NULL, 1);
    for (long id = 21; id <= 25; id++)
        send_event("orders", 'd', id, NULL, 3000 + (uint64_t)id, NULL, 1);
    snprintf(cols, sizeof(cols), "\"customer\":\"a\",\"note\":\"%s\"", big);
    send_event("orders", 'c', 100, cols, 4000, NULL, 1);
    flush();
    wait_rows("orders", 26, 60000);
    /* The TOAST update arrives in a later epoch (the row's image comes from state). */
    send_event("orders", 'u', 100, "\"customer\":\"b\"", 5000, ",\"unchanged_toast\":[\"note\"]",
               1);
    /* Duplicates: exact replays of inserts and of an update, an older insert after its
     * update (out of order), and a replayed delete. */
    for (long id = 1; id <= 10; id++)
        send_event("orders", 'c', id, "\"customer\":\"c\",\"note\":\"n\"", 1000 + (uint64_t)id,
                   NULL, 1);
    send_event("orders", 'u', 3, "\"customer\":\"u1\",\"note\":\"n\"", 2003, NULL, 1);
    send_event("orders", 'c', 5, "\"customer\":\"stale\",\"note\":\"n\"", 1500, NULL, 1);
    send_event("orders", 'd', 22, NULL, 3022, NULL, 1);
    /* A marker change that proves the duplicates before it were processed. */
    send_event("orders", 'c', 200, "\"customer\":\"end\",\"note\":\"n\"", 6000, NULL, 1);

    /* poison: good records around every class of bad record */
    send_event("poison", 'c', 1, "\"customer\":\"good1\"", 100, NULL, 1);
    produce("poison", "{\"id\":2}", "{\"op\":\"c\",\"after\":{\"id\":2,", 1); /* malformed */
    produce("poison", "{\"id\":3}",
            "{\"op\":\"c\",\"after\":{\"customer\":\"x\"},"
            "\"source\":{\"lsn\":5}}",
            1); /* no key */
    produce("poison", "{\"id\":4}",
            "{\"op\":\"z\",\"after\":{\"id\":4},"
            "\"source\":{\"lsn\":5}}",
            1); /* unknown op */
    produce("poison", "{\"id\":5}",
            "{\"op\":\"c\",\"after\":{\"id\":\"five\"},"
            "\"source\":{\"lsn\":5}}",
            1);                                                        /* mismatch */
    send_event("poison", 'c', 6, "\"customer\":\"x\"", 106, NULL, 99); /* version */
    send_event("poison", 'c', 7, "\"customer\":\"good7\"", 107, NULL, 1);

    /* evolve: rows under v1, then ADD COLUMN status (v2) and rows using it */
    for (long id = 1; id <= 5; id++)
        send_event("evolve", 'c', id, "\"customer\":\"v1\"", 100 + (uint64_t)id, NULL, 1);
    flush();
    wait_rows("evolve", 5, 60000);
    schema("evolve", 2, true);
    for (long id = 6; id <= 10; id++)
        send_event("evolve", 'c', id, "\"customer\":\"v2\",\"status\":\"new\"", 200 + (uint64_t)id,
                   NULL, 2);
    send_event("evolve", 'u', 1, "\"customer\":\"v2\",\"status\":\"upd\"", 300, NULL, 2);
    flush();

    /* ---- checks ---- */
    wait_rows("orders", 27, 60000); /* 26 + id 200 */
    wait_rows("poison", 2, 60000);
    wait_rows("evolve", 10, 60000);
    /* the changelog is committed with the mirror in the same epoch */
    json_t *m = read_table("orders");
    json_t *cl = read_table("orders_changelog");
    json_t *rows = rows_of(m);
    assert_int_equal(json_array_size(rows), 27);
    for (long id = 1; id <= 10; id++)
        assert_string_equal(json_string_value(json_object_get(row_by_id(rows, id), "customer")),
                            "u1");
    for (long id = 21; id <= 25; id++)
        assert_null(row_by_id(rows, id));
    json_t *r100 = row_by_id(rows, 100);
    assert_non_null(r100);
    assert_string_equal(json_string_value(json_object_get(r100, "customer")), "b");
    assert_int_equal(json_string_length(json_object_get(r100, "note")), 9000);
    assert_string_equal(json_string_value(json_object_get(r100, "note")), big);
    /* 30 + 10 + 5 + 1 + 1 (TOAST update) + 1 (id 200): every change once */
    assert_changelog_once(cl, 48);
    json_decref(m);
    json_decref(cl);

    /* poison: good rows only, and a dead letter per bad record with headers */
    m = read_table("poison");
    rows = rows_of(m);
    assert_int_equal(json_array_size(rows), 2);
    assert_non_null(row_by_id(rows, 1));
    assert_non_null(row_by_id(rows, 7));
    json_decref(m);
    {
        cdc_kafka_consumer_t *c;
        cdc_kafka_consumer_config_t cc = {0};
        cdc_error_t e;
        char dlq[256];
        const char *want[] = {"malformed_json", "missing_key", "unknown_op", "type_mismatch",
                              "unknown_schema"};
        int got[5] = {0};
        size_t total = 0;
        snprintf(dlq, sizeof(dlq), "%s.public.poison.dlq", T.prefix);
        cc.bootstrap = T.env->kafka;
        assert_int_equal(cdc_kafka_consumer_new(&cc, &c, &e), CDC_OK);
        int32_t parts = 0;
        assert_int_equal(cdc_kafka_consumer_partitions(c, dlq, &parts, 10000, &e), CDC_OK);
        cdc_kafka_tp_t tps[64];
        for (int32_t i = 0; i < parts && i < 64; i++)
            tps[i] = (cdc_kafka_tp_t){dlq, i, CDC_KAFKA_OFFSET_BEGINNING};
        assert_int_equal(cdc_kafka_consumer_assign(c, tps, (size_t)parts, &e), CDC_OK);
        long long deadline = cdc_test_now_ms() + 20000;
        /* Dead letters are at least once: an epoch replayed after an abort sends its
         * poison records again. Read until every class was seen. */
        while ((got[0] == 0 || got[1] == 0 || got[2] == 0 || got[3] == 0 || got[4] == 0) &&
               cdc_test_now_ms() < deadline) {
            cdc_kafka_msg_t msgs[16];
            size_t n = 0;
            cdc_kafka_consume_batch(c, msgs, 16, &n, 500, &e);
            for (size_t i = 0; i < n; i++) {
                cdc_kafka_header_t h;
                char cls[64] = "", topic[256] = "";
                assert_true(cdc_kafka_msg_header(&msgs[i], "cdc.error.class", &h));
                snprintf(cls, sizeof(cls), "%.*s", (int)h.value_len, (const char *)h.value);
                assert_true(cdc_kafka_msg_header(&msgs[i], "cdc.origin.topic", &h));
                snprintf(topic, sizeof(topic), "%.*s", (int)h.value_len, (const char *)h.value);
                assert_non_null(strstr(topic, ".public.poison"));
                assert_true(cdc_kafka_msg_header(&msgs[i], "cdc.origin.partition", &h));
                assert_true(cdc_kafka_msg_header(&msgs[i], "cdc.origin.offset", &h));
                assert_true(cdc_kafka_msg_header(&msgs[i], "cdc.error.message", &h));
                assert_true(h.value_len > 0);
                assert_true(cdc_kafka_msg_header(&msgs[i], "cdc.error.time", &h));
                for (int k = 0; k < 5; k++)
                    got[k] += strcmp(cls, want[k]) == 0;
                total++;
            }
            cdc_kafka_msgs_release(msgs, n);
        }
        cdc_kafka_consumer_free(c);
        int known = 0;
        for (int k = 0; k < 5; k++) {
            if (got[k] < 1)
                fail_msg("expected a dead letter of class %s", want[k]);
            known += got[k];
        }
        assert_int_equal((size_t)known, total); /* no other class */
    }

    /* evolve: the new column exists; v1 rows read it as null */
    m = read_table("evolve");
    rows = rows_of(m);
    assert_int_equal(json_array_size(rows), 10);
    json_t *st = json_object_get(row_by_id(rows, 2), "status");
    assert_true(st == NULL || json_is_null(st));
    assert_string_equal(json_string_value(json_object_get(row_by_id(rows, 7), "status")), "new");
    assert_string_equal(json_string_value(json_object_get(row_by_id(rows, 1), "status")), "upd");
    json_decref(m);
}

/* nice of thread tid of pid and its name (/proc/<pid>/task/<tid>/{stat,comm}). */
static int thread_nice(pid_t pid, const char *tid, char *name, size_t size)
{
    char path[128], buf[1024];
    FILE *f;
    int nice = -100;

    snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, tid);
    name[0] = '\0';
    if ((f = fopen(path, "r")) != NULL) {
        if (fgets(name, (int)size, f) != NULL)
            name[strcspn(name, "\n")] = '\0';
        fclose(f);
    }
    snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, tid);
    if ((f = fopen(path, "r")) == NULL)
        return nice;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* fields after the command name: state is 3rd */
    int field = 2;
    for (; p != NULL && *p; p++)
        if (*p == ' ' && ++field == 19)
            return atoi(p + 1);
    return nice;
}

/* The record thread runs at --record-nice (default 5); the threads that finish an
 * epoch (RocksDB's flushes, the finalizer) keep the normal priority. */
static void assert_record_priority(pid_t pid)
{
    char path[64], name[64];
    DIR *d;
    struct dirent *de;
    int rocksdb = 0, normal = 0;

    snprintf(path, sizeof(path), "%d", (int)pid);
    assert_int_equal(thread_nice(pid, path, name, sizeof(name)), 5);
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    assert_non_null(d = opendir(path));
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || atoi(de->d_name) == (int)pid)
            continue;
        int nice = thread_nice(pid, de->d_name, name, sizeof(name));
        if (strncmp(name, "rocksdb:", 8) == 0) {
            rocksdb++;
            if (nice != 0)
                fail_msg("thread %s (%s) runs at nice %d, expected 0", de->d_name, name, nice);
        }
        normal += nice == 0;
    }
    closedir(d);
    assert_true(rocksdb >= 2);     /* flush and compaction pools */
    assert_true(normal > rocksdb); /* the finalizer, heartbeat and client threads too */
}

static void test_restore_on_other_worker(void **state)
{
    (void)state;
    /* w1 processed orders so far; kill it, start w2 with an empty disk: it restores every
     * partition from the shared checkpoint store. Replays of old events (new offsets)
     * must be dropped by the restored dedup state. */
    cdc_test_kill(T.workers[0], SIGKILL, 2000);
    T.workers[0] = 0;
    T.workers[1] = start_worker("w2");
    for (long id = 1; id <= 30; id++)
        send_event("orders", 'c', id, "\"customer\":\"c\",\"note\":\"n\"", 1000 + (uint64_t)id,
                   NULL, 1);
    send_event("orders", 'u', 100, "\"customer\":\"b\"", 5000, ",\"unchanged_toast\":[\"note\"]",
               1);
    send_event("orders", 'u', 100, "\"customer\":\"after-restore\"", 7000,
               ",\"unchanged_toast\":[\"note\"]", 1);
    send_event("orders", 'c', 201, "\"customer\":\"end2\",\"note\":\"n\"", 7100, NULL, 1);
    flush();
    wait_rows("orders", 28, 90000);
    assert_record_priority(T.workers[1]);
    json_t *m = read_table("orders");
    json_t *rows = rows_of(m);
    assert_int_equal(json_array_size(rows), 28);
    json_t *r100 = row_by_id(rows, 100);
    assert_string_equal(json_string_value(json_object_get(r100, "customer")), "after-restore");
    assert_int_equal(json_string_length(json_object_get(r100, "note")), 9000);
    for (long id = 1; id <= 10; id++)
        assert_string_equal(json_string_value(json_object_get(row_by_id(rows, id), "customer")),
                            "u1");
    json_decref(m);
    json_t *cl = read_table("orders_changelog");
    assert_changelog_once(cl, 50); /* 48 + TOAST update + id 201 */
    json_decref(cl);
}

/* Whether the log of `program`'s process `id` holds text. */
static bool log_has(const char *program, const char *id, const char *text)
{
    char path[1024], *buf;
    FILE *f;
    long n;
    bool found;
    cdc_test_log_path(&T.procs, program, id, path, sizeof(path));
    if ((f = fopen(path, "r")) == NULL)
        return false;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc((size_t)n + 1, 1);
    found = buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n && strstr(buf, text) != NULL;
    free(buf);
    fclose(f);
    return found;
}

static bool worker_log_has(const char *id, const char *text)
{
    return log_has("worker", id, text);
}

/* Whether worker arg (an id) was assigned all 12 partitions. */
static bool owns_all(void *arg)
{
    return worker_log_has(arg, ": 12 partitions from checkpoint");
}

static bool worker_log_has_w5(void *arg)
{
    return worker_log_has("w5", arg);
}

static bool coordinator_says(void *arg)
{
    return log_has("coordinator", "c1", arg);
}

/* Starts worker id (as T.workers[2]) with the test fault stall-fetch:2 and waits until
 * it owns all 12 partitions (no reassignment will restart the stalled partition behind
 * the progress checks' back). */
static void start_stalling_worker(const char *id, const char *const *opts)
{
    setenv("CDC_WORKER_FAULT", "stall-fetch:2", 1);
    T.workers[2] =
        cdc_test_start_worker(&T.procs, id, "public.orders,public.poison,public.evolve", opts);
    unsetenv("CDC_WORKER_FAULT");
    assert_true(T.workers[2] > 0);
    if (!cdc_test_wait_for(owns_all, (void *)id, 60000))
        fail_msg("%s was never assigned all 12 partitions", id);
}

/* Orders first..first+39 after `before` rows: one is committed, then the rest, the second
 * record stopping its partition's fetching with others behind it; all 40 must arrive. */
static void send_past_stall(long first, size_t before)
{
    send_event("orders", 'c', first, "\"customer\":\"st\",\"note\":\"n\"",
               9000 + (uint64_t)first * 10, NULL, 1);
    flush();
    wait_rows("orders", before + 1, 90000);
    for (long id = first + 1; id < first + 40; id++)
        send_event("orders", 'c', id, "\"customer\":\"st\",\"note\":\"n\"",
                   9000 + (uint64_t)id * 10, NULL, 1);
    flush();
    wait_rows("orders", before + 40, 90000);
}

/* The progress watchdog: a partition whose fetching stops silently (the test fault
 * stall-fetch:2 pauses it after the second record) with records behind is found within
 * --progress-timeout, logged, fetched again, and every row arrives. */
static void test_progress_watchdog(void **state)
{
    static const char *const opts[] = {"--log-level=debug", "--progress-timeout=2s", NULL};
    (void)state;
    cdc_test_kill(T.workers[1], SIGKILL, 2000);
    T.workers[1] = 0;
    start_stalling_worker("w3", opts);
    send_past_stall(299, 28);
    assert_true(worker_log_has("w3", "fault stall-fetch"));
    if (!worker_log_has("w3", "no progress for")) {
        char path[1024], cmd[1200];
        cdc_test_log_path(&T.procs, "worker", "w3", path, sizeof(path));
        snprintf(cmd, sizeof(cmd), "grep -v 'level=debug' '%s' | tail -n 30 >&2", path);
        (void)system(cmd);
        fail_msg("the watchdog did not report the stalled partition");
    }
    assert_true(worker_log_has("w3", "fetching had stopped; assigned again"));
    json_t *m = read_table("orders");
    assert_int_equal(json_array_size(rows_of(m)), 28 + 40);
    json_decref(m);
}

/*
 * The coordinator's progress check (docs/protocol.md): with the worker's own watchdog
 * off, a partition whose fetching stopped silently is found from the checkpoints (its
 * offset stays put with records behind it), logged, and the job recovers: every row
 * arrives. Then a worker started without one of the tables is refused partitions
 * (docs/protocol.md, "The job's table set"): the coordinator names it and the table, the
 * worker logs the refusal, and it never owns a partition.
 */
static void test_coordinator_progress_check(void **state)
{
    static const char *const off[] = {"--log-level=debug", "--progress-timeout=0", NULL};
    static const char *const dflt[] = {"--log-level=debug", NULL};
    char missing[512];
    (void)state;
    cdc_test_kill(T.workers[2], SIGKILL, 2000);
    T.workers[2] = 0;
    start_stalling_worker("w4", off);
    send_past_stall(399, 28 + 40);
    assert_true(worker_log_has("w4", "fault stall-fetch"));
    assert_false(worker_log_has("w4", "fetching it again")); /* its watchdog is off */
    assert_true(coordinator_says("made no progress for"));
    assert_true(coordinator_says("records behind it"));
    json_t *m = read_table("orders");
    assert_int_equal(json_array_size(rows_of(m)), 28 + 80);
    json_decref(m);

    /* a worker without public.evolve */
    T.workers[3] = cdc_test_start_worker(&T.procs, "w5", "public.orders,public.poison", dflt);
    assert_true(T.workers[3] > 0);
    /* (the log escapes the quotes around the worker and the topic) */
    snprintf(missing, sizeof(missing),
             "worker \\\"w5\\\" gets no partitions of job \\\"%s\\\": it does not consume "
             "\\\"%s.public.evolve\\\"",
             T.job, T.prefix);
    if (!cdc_test_wait_for(coordinator_says, missing, 60000))
        fail_msg("the coordinator did not refuse w5 (no public.evolve)");
    snprintf(missing, sizeof(missing), "gives this worker no partitions");
    if (!cdc_test_wait_for(worker_log_has_w5, missing, 30000))
        fail_msg("w5 did not log its refusal");
    assert_false(worker_log_has("w5", "partitions from checkpoint"));
    cdc_test_kill(T.workers[3], SIGTERM, 10000);
    T.workers[3] = 0;
}

/* Records the broker deleted before the job read them (kafka-dev, librdkafka's mock
 * cluster, keeps 5 MiB per partition: docs/worker.md, Known issues): a partition read
 * from the beginning starts at the log start without an error, and the worker logs which
 * offsets it never saw. 100 uncompressed records of 100 kB go to partition 0 of a new
 * topic before a new job (its own coordinator, worker and warehouse) starts. */
/* Produces inserts of ids from..from+n-1 of schema version 1 to partition 0 of topic,
 * each with a note of note_len bytes (the development broker keeps the last 5 MiB of a
 * partition, so large notes make it delete the oldest). */
static void produce_notes(const char *topic, long from, long n, size_t note_len)
{
    char ver[] = "1", *note = malloc(note_len + 1), *cols = malloc(note_len + 100);
    cdc_kafka_producer_config_t pc = {0};
    cdc_kafka_producer_t *p = NULL;
    cdc_kafka_header_t h[1] = {{"cdc.schema", ver, 1}};
    cdc_error_t e;

    assert_non_null(note);
    assert_non_null(cols);
    pc.bootstrap = T.env->kafka;
    pc.linger_ms = 1;
    pc.compression = "none";
    assert_int_equal(cdc_kafka_producer_new(&pc, &p, &e), CDC_OK);
    memset(note, 'x', note_len);
    note[note_len] = '\0';
    snprintf(cols, note_len + 100, "\"customer\":\"r\",\"note\":\"%s\"", note);
    for (long id = from; id < from + n; id++) {
        char key[64], *v = event('c', id, cols, 20000 + (uint64_t)id, NULL);
        snprintf(key, sizeof(key), "{\"id\":%ld}", id);
        cdc_kafka_record_t r = {topic, 0, key, strlen(key), v, strlen(v), h, 1, 0, NULL};
        assert_int_equal(cdc_kafka_produce(p, &r, &e), CDC_OK);
        free(v);
    }
    assert_int_equal(cdc_kafka_producer_flush(p, 20000, &e), CDC_OK);
    cdc_kafka_producer_free(p);
    free(note);
    free(cols);
}

static void test_missing_start_logged(void **state)
{
    char job[96], wh[600], topic[256], want[160];
    cdc_kafka_consumer_config_t cc = {0};
    cdc_kafka_consumer_t *c = NULL;
    int64_t low = -1, high = -1;
    cdc_error_t e;
    (void)state;

    snprintf(job, sizeof(job), "%s-r", T.job);
    snprintf(wh, sizeof(wh), "%s/warehouse-r", T.dir);
    cdc_test_job_t rj = {.dir = T.dir, .name = job, .warehouse = wh, .topic_prefix = T.prefix};
    snprintf(topic, sizeof(topic), "%s.public.retained", T.prefix);
    cdc_kafka_topic_spec_t spec = {topic, 12, -1, false};
    assert_int_equal(cdc_kafka_ensure_topic(T.env->kafka, NULL, &spec, 10000, &e), CDC_OK);
    schema("retained", 1, false);
    produce_notes(topic, 1, 100, 100000);
    /* the mock cluster kept the last 5 MiB: the log of partition 0 starts above 0 */
    cc.bootstrap = T.env->kafka;
    assert_int_equal(cdc_kafka_consumer_new(&cc, &c, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consumer_watermarks(c, topic, 0, &low, &high, 5000, &e), CDC_OK);
    cdc_kafka_consumer_free(c);
    assert_int_equal(high, 100);
    assert_true(low > 0 && low < 100);

    pid_t coord = cdc_test_start_coordinator(&rj, "cr", COORD_OPTS);
    assert_true(coord > 0);
    pid_t worker = cdc_test_start_worker(&rj, "r1", "public.retained", NULL);
    assert_true(worker > 0);
    want_t w = {"retained", (size_t)(100 - low), wh};
    bool arrived = cdc_test_wait_for(have_rows, &w, 90000);
    snprintf(want, sizeof(want),
             "read from the beginning, its first record is at offset %lld: offsets 0 to %lld "
             "are not in Kafka",
             (long long)low, (long long)(low - 1));
    bool logged = worker_log_has("r1", want);
    json_t *t = read_table_in(wh, "retained");
    size_t rows = json_array_size(rows_of(t));
    json_decref(t);
    cdc_test_kill(worker, SIGTERM, 5000);
    cdc_test_kill(coord, SIGTERM, 5000);
    if (!arrived)
        fail_msg("table retained: %zu rows, expected %lld (logs in %s)", rows,
                 (long long)(100 - low), T.dir);
    assert_int_equal(rows, (size_t)(100 - low));
    if (!logged)
        fail_msg("worker r1 did not log the missing offsets 0 to %lld (logs in %s)",
                 (long long)(low - 1), T.dir);
}

typedef struct log_want {
    const char *id, *text;
} log_want_t;

static bool worker_logged(void *arg)
{
    const log_want_t *l = arg;
    return worker_log_has(l->id, l->text);
}

/*
 * A checkpointed offset the broker deleted before the job read it (docs/worker.md,
 * "Records deleted before they were read"): 10 rows are committed, the worker stops, the
 * development broker deletes the partition's oldest records to keep its last 5 MiB, and
 * a worker assigned from the checkpoint says so as an error naming the offset and the log
 * start, and skips nothing (the table keeps its 10 rows).
 */
static void test_checkpoint_deleted_logged(void **state)
{
    char job[96], wh[600], topic[256], want[160];
    cdc_kafka_consumer_config_t cc = {0};
    cdc_kafka_consumer_t *c = NULL;
    int64_t low = -1, high = -1;
    cdc_error_t e;
    (void)state;

    snprintf(job, sizeof(job), "%s-k", T.job);
    snprintf(wh, sizeof(wh), "%s/warehouse-k", T.dir);
    cdc_test_job_t kj = {.dir = T.dir, .name = job, .warehouse = wh, .topic_prefix = T.prefix};
    snprintf(topic, sizeof(topic), "%s.public.deleted", T.prefix);
    cdc_kafka_topic_spec_t spec = {topic, 12, -1, false};
    assert_int_equal(cdc_kafka_ensure_topic(T.env->kafka, NULL, &spec, 10000, &e), CDC_OK);
    schema("deleted", 1, false);
    produce_notes(topic, 1, 10, 10);

    pid_t coord = cdc_test_start_coordinator(&kj, "ck", COORD_OPTS);
    assert_true(coord > 0);
    pid_t worker = cdc_test_start_worker(&kj, "k1", "public.deleted", NULL);
    assert_true(worker > 0);
    want_t w = {"deleted", 10, wh};
    if (!cdc_test_wait_for(have_rows, &w, 60000))
        fail_msg("table deleted: the first 10 rows did not arrive (logs in %s)", T.dir);
    cdc_test_kill(worker, SIGTERM, 5000);
    /* 70 records of 100 KB: the broker keeps the last 5 MiB, offsets 0 to 9 and more go */
    produce_notes(topic, 11, 70, 100000);
    cc.bootstrap = T.env->kafka;
    assert_int_equal(cdc_kafka_consumer_new(&cc, &c, &e), CDC_OK);
    assert_int_equal(cdc_kafka_consumer_watermarks(c, topic, 0, &low, &high, 5000, &e), CDC_OK);
    cdc_kafka_consumer_free(c);
    assert_true(low > 10);

    worker = cdc_test_start_worker(&kj, "k2", "public.deleted", NULL);
    assert_true(worker > 0);
    snprintf(want, sizeof(want), "offset 10 is not in Kafka any more (the log starts at %lld)",
             (long long)low);
    log_want_t lw = {"k2", want};
    bool logged = cdc_test_wait_for(worker_logged, &lw, 60000);
    json_t *t = read_table_in(wh, "deleted");
    size_t rows = json_array_size(rows_of(t));
    json_decref(t);
    cdc_test_kill(worker, SIGTERM, 5000);
    cdc_test_kill(coord, SIGTERM, 5000);
    if (!logged)
        fail_msg("worker k2 did not log \"%s\" (logs in %s)", want, T.dir);
    assert_int_equal(rows, 10);
}

/* Distinct subjects (the message up to text) of the lines of worker id's log holding
 * text, e.g. the partitions logged as "partition N topic \"T\": <text>". */
static int log_distinct(const char *id, const char *text)
{
    char path[1024], line[4096], seen[256][300];
    int n = 0;
    cdc_test_log_path(&T.procs, "worker", id, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL && n < 256) {
        char *m = strstr(line, "msg=\""), *end = strstr(line, text);
        if (m == NULL || end == NULL || end < m)
            continue;
        m += 5;
        int len = (int)(end - m) < 299 ? (int)(end - m) : 299;
        bool dup = false;
        for (int i = 0; i < n && !dup; i++)
            dup = strncmp(seen[i], m, (size_t)len) == 0 && seen[i][len] == '\0';
        if (!dup) {
            memcpy(seen[n], m, (size_t)len);
            seen[n++][len] = '\0';
        }
    }
    fclose(f);
    return n;
}

/* Prints the warnings and errors of worker id's log (at most max lines) to stderr: what a
 * failure in CI leaves to read once the test's directory is gone. */
static void print_log_warnings(const char *id, int max)
{
    char path[1024], line[4096];
    cdc_test_log_path(&T.procs, "worker", id, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    while (max > 0 && fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, "level=warn") != NULL || strstr(line, "level=error") != NULL) {
            fprintf(stderr, "  %s: %s", id, line);
            max--;
        }
    fclose(f);
}

/*
 * Every partition whose fetching stopped on an error is started again, however many
 * stop at once, data and schema topic alike: a new job (no checkpoint: every partition
 * is read from the beginning) starts while the development broker fails the next
 * ListOffsets requests, each of which covers many partitions; the worker must restart
 * well over 16 partitions and the job's tables must end up with every row.
 */
static void test_many_failed_partitions(void **state)
{
    char job[96], wh[600], reply[256];
    (void)state;
    snprintf(job, sizeof(job), "%s-f", T.job);
    snprintf(wh, sizeof(wh), "%s/warehouse-f", T.dir);
    cdc_test_job_t fj = {.dir = T.dir, .name = job, .warehouse = wh, .topic_prefix = T.prefix};
    json_t *src = read_table("orders");
    size_t want = json_array_size(rows_of(src));
    json_decref(src);
    assert_true(want > 0);

    pid_t coord = cdc_test_start_coordinator(&fj, "cf", COORD_OPTS);
    assert_true(coord > 0);
    /* (each lookup request covers the partitions led by one broker) */
    assert_true(cdc_test_kafka_ctl("ERRORS 2 40 UNKNOWN", reply, sizeof(reply)));
    pid_t worker =
        cdc_test_start_worker(&fj, "f1", "public.orders,public.poison,public.evolve", NULL);
    assert_true(worker > 0);
    want_t w = {"orders", want, wh};
    bool arrived = cdc_test_wait_for(have_rows, &w, 90000);
    int restarted = log_distinct("f1", ": fetching had stopped; assigned again");
    int schema = log_distinct("f1", ": fetching had stopped on an error; assigned again");
    cdc_test_kill(worker, SIGTERM, 5000);
    cdc_test_kill(coord, SIGTERM, 5000);
    assert_true(cdc_test_kafka_ctl("ERRORS CLEAR 2", reply, sizeof(reply)));
    if (!arrived) {
        /* Say whether the broker's log start moved (retention of the development broker)
         * or records were skipped: the low watermarks, and what the worker said. */
        char topic[256], lows[512] = "";
        size_t used = 0;
        cdc_kafka_consumer_config_t cc = {.bootstrap = T.env->kafka};
        cdc_kafka_consumer_t *kc = NULL;
        cdc_error_t e;
        snprintf(topic, sizeof(topic), "%s.public.orders", T.prefix);
        if (cdc_kafka_consumer_new(&cc, &kc, &e) == CDC_OK) {
            for (int32_t p = 0; p < 12 && used < sizeof(lows) - 32; p++) {
                int64_t low = -1, high = -1;
                cdc_kafka_consumer_watermarks(kc, topic, p, &low, &high, 5000, &e);
                used += (size_t)snprintf(lows + used, sizeof(lows) - used, " p%d=%lld..%lld",
                                         (int)p, (long long)low, (long long)high);
            }
            cdc_kafka_consumer_free(kc);
        }
        print_log_warnings("f1", 200);
        fail_msg("the new job's orders table did not reach %zu rows; %d partitions logged a "
                 "missing start; orders watermarks:%s (logs in %s)",
                 want, log_distinct("f1", ": offsets 0 to "), lows, T.dir);
    }
    if (restarted <= 16) {
        print_log_warnings("f1", 200);
        fail_msg("%d data partitions restarted after failed lookups, expected more than 16 "
                 "(logs in %s)",
                 restarted, T.dir);
    }
    if (schema < 1)
        fail_msg("the schema topic's failed partition was not restarted (logs in %s)", T.dir);
}

/* A Debezium change event (Connect envelope with its schema) of public.dbz. */
/* A Debezium event (Connect JSON envelope) of table public.<table> into a partition. */
static void dbz_event_to(const char *table, int32_t partition, char op, long id, const char *name,
                         uint64_t lsn)
{
    char v[2048], key[64];
    static const char *row = "{\"type\":\"struct\",\"optional\":true,\"field\":\"%s\",\"fields\":["
                             "{\"type\":\"int32\",\"optional\":false,\"field\":\"id\"},"
                             "{\"type\":\"string\",\"optional\":true,\"field\":\"name\"}]}";
    char before[400], after[400], img[200];
    snprintf(before, sizeof(before), row, "before");
    snprintf(after, sizeof(after), row, "after");
    if (op == 't')
        snprintf(img, sizeof(img), "\"before\":null,\"after\":null");
    else
        snprintf(img, sizeof(img), "\"before\":null,\"after\":{\"id\":%ld,\"name\":\"%s\"}", id,
                 name);
    snprintf(v, sizeof(v),
             "{\"schema\":{\"type\":\"struct\",\"optional\":false,\"fields\":[%s,%s,"
             "{\"type\":\"struct\",\"optional\":false,\"field\":\"source\",\"fields\":["
             "{\"type\":\"string\",\"optional\":false,\"field\":\"schema\"},"
             "{\"type\":\"string\",\"optional\":false,\"field\":\"table\"},"
             "{\"type\":\"int64\",\"optional\":true,\"field\":\"txId\"},"
             "{\"type\":\"int64\",\"optional\":true,\"field\":\"lsn\"}]},"
             "{\"type\":\"string\",\"optional\":false,\"field\":\"op\"}]},"
             "\"payload\":{%s,\"source\":{\"connector\":\"postgresql\",\"schema\":\"public\","
             "\"table\":\"%s\",\"txId\":%llu,\"lsn\":%llu,\"ts_ms\":1700000000000},"
             "\"op\":\"%c\",\"ts_ms\":1700000000000}}",
             before, after, img, table, (unsigned long long)lsn, (unsigned long long)lsn, op);
    snprintf(key, sizeof(key), "{\"id\":%ld}", id);
    produce_to(table, partition, op == 't' ? NULL : key, v, 0);
}

static void dbz_event(char op, long id, const char *name, uint64_t lsn)
{
    dbz_event_to("dbz", CDC_KAFKA_PARTITION_ANY, op, id, name, lsn);
}

/* A job of its own (name suffix, warehouse) for Debezium topic public.<table>, created
 * with the given partition count. job[96] and wh[600] receive the names. */
static cdc_test_job_t dbz_job(const char *suffix, const char *table, int partitions, char *job,
                              char *wh)
{
    char topic[256];
    cdc_error_t e;
    snprintf(job, 96, "%s-%s", T.job, suffix);
    snprintf(wh, 600, "%s/warehouse-%s", T.dir, suffix);
    snprintf(topic, sizeof(topic), "%s.public.%s", T.prefix, table);
    cdc_kafka_topic_spec_t spec = {topic, partitions, -1, false};
    assert_int_equal(cdc_kafka_ensure_topic(T.env->kafka, NULL, &spec, 10000, &e), CDC_OK);
    return (cdc_test_job_t){.dir = T.dir, .name = job, .warehouse = wh, .topic_prefix = T.prefix};
}

/*
 * Debezium's truncate (one event, no key, no schema version) on a topic of one partition,
 * as Debezium's topics usually are, is applied as a truncate: the rows before it leave the
 * mirror, the changelog keeps them and gets the truncate once, the rows after it stay.
 */
static void test_debezium_truncate(void **state)
{
    char job[96], wh[600];
    cdc_error_t e;
    (void)state;
    cdc_test_job_t dj = dbz_job("d", "dbz", 1, job, wh);
    for (long id = 1; id <= 5; id++)
        dbz_event('c', id, "before", 100 + (uint64_t)id);
    dbz_event('t', 0, NULL, 200);
    for (long id = 5; id <= 7; id++)
        dbz_event('c', id, "after", 300 + (uint64_t)id);
    flush();

    pid_t coord = cdc_test_start_coordinator(&dj, "cd", COORD_OPTS);
    assert_true(coord > 0);
    /* and a topic wider than the job's 12 slots: its extra partitions are named */
    char wide[256];
    snprintf(wide, sizeof(wide), "%s.public.wide", T.prefix);
    cdc_kafka_topic_spec_t wspec = {wide, 16, -1, false};
    assert_int_equal(cdc_kafka_ensure_topic(T.env->kafka, NULL, &wspec, 10000, &e), CDC_OK);
    pid_t worker = cdc_test_start_worker(&dj, "d1", "public.dbz,public.wide", NULL);
    assert_true(worker > 0);
    want_t w = {"dbz_changelog", 9, wh};
    bool arrived = cdc_test_wait_for(have_rows, &w, 90000);
    bool wide_named = worker_log_has(
        "d1", "has 16 partitions, but the job reads 12 (its partition slots): the changes in "
              "partitions 12 to 15 are never read");
    json_t *m = read_table_in(wh, "dbz"), *cl = read_table_in(wh, "dbz_changelog");
    cdc_test_kill(worker, SIGTERM, 5000);
    cdc_test_kill(coord, SIGTERM, 5000);
    if (!arrived)
        fail_msg("dbz_changelog: %zu rows, expected 9 (logs in %s)", json_array_size(rows_of(cl)),
                 T.dir);
    if (!wide_named)
        fail_msg("worker d1 did not name the partitions of the 16-partition topic it cannot read "
                 "(logs in %s)",
                 T.dir);
    /* the mirror: ids 5, 6, 7 of after the truncate */
    assert_int_equal(json_array_size(rows_of(m)), 3);
    for (long id = 5; id <= 7; id++) {
        json_t *r = row_by_id(rows_of(m), id);
        assert_non_null(r);
        assert_string_equal(json_string_value(json_object_get(r, "name")), "after");
    }
    /* the changelog: 5 inserts, the truncate once, 3 inserts */
    size_t truncates = 0;
    for (size_t i = 0; i < json_array_size(rows_of(cl)); i++) {
        const char *op = json_string_value(json_object_get(json_array_get(rows_of(cl), i), "_op"));
        truncates += op != NULL && strcmp(op, "t") == 0;
    }
    assert_int_equal(truncates, 1);
    assert_int_equal(json_array_size(rows_of(cl)), 9);
    json_decref(m);
    json_decref(cl);
}

typedef struct dbzm_want {
    const char *wh;
    size_t mirror, changelog;
} dbzm_want_t;

/* The mirror holds exactly w->mirror rows and the changelog w->changelog. */
static bool dbzm_has(void *arg)
{
    dbzm_want_t *w = arg;
    json_t *m = read_table_in(w->wh, "dbzm"), *cl = read_table_in(w->wh, "dbzm_changelog");
    bool ok = m != NULL && cl != NULL && json_array_size(rows_of(m)) == w->mirror &&
              json_array_size(rows_of(cl)) == w->changelog;
    json_decref(m);
    json_decref(cl);
    if (!ok)
        usleep(300 * 1000); /* pacing between reader runs, not a wait for a condition */
    return ok;
}

/* Rows of the changelog with _op = op (and id, when id >= 0). */
static size_t changelog_count(json_t *cl, const char *op, long id)
{
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(rows_of(cl)); i++) {
        json_t *r = json_array_get(rows_of(cl), i);
        const char *o = json_string_value(json_object_get(r, "_op"));
        n += o != NULL && strcmp(o, op) == 0 &&
             (id < 0 || json_integer_value(json_object_get(r, "id")) == id);
    }
    return n;
}

/*
 * Debezium's truncate on a topic of 12 partitions (docs/worker.md, "Debezium's truncate"):
 * it sits in partition 5 only. Every slot applies it by position (a floor): its rows from
 * before the truncate leave the mirror; a row after it that a slot consumed before it
 * learned of the truncate (id 15, ahead) stays; changes from before the truncate that
 * reach a slot after it applied the floor (ids 33 and 9 in partition 9, late) go to the
 * changelog only, and a replay of one of them is still a duplicate, also on another worker
 * that restored the slots from their checkpoints.
 */
static void test_debezium_truncate_partitions(void **state)
{
    char job[96], wh[600];
    (void)state;
    cdc_test_job_t dj = dbz_job("m", "dbzm", 12, job, wh);
    for (long id = 1; id <= 24; id++)
        dbz_event_to("dbzm", (int32_t)(id % 12), 'c', id, "before", 100 + (uint64_t)id);
    dbz_event_to("dbzm", 3, 'u', 15, "after", 700); /* slot 3 is past the truncate */
    dbz_event_to("dbzm", 5, 't', 0, NULL, 500);
    for (long id = 1; id <= 6; id++)
        dbz_event_to("dbzm", (int32_t)(id % 12), 'u', id, "after", 600 + (uint64_t)id);
    flush();

    pid_t coord = cdc_test_start_coordinator(&dj, "cm", COORD_OPTS);
    assert_true(coord > 0);
    pid_t worker = cdc_test_start_worker(&dj, "m1", "public.dbzm", NULL);
    assert_true(worker > 0);
    /* mirror: ids 1-6 and 15, "after"; changelog: 24 + 1 + 1 + 6 */
    dbzm_want_t w = {wh, 7, 32};
    bool settled = cdc_test_wait_for(dbzm_has, &w, 90000);
    json_t *m = read_table_in(wh, "dbzm");
    if (!settled) {
        json_t *cl = read_table_in(wh, "dbzm_changelog");
        cdc_test_kill(worker, SIGTERM, 5000);
        cdc_test_kill(coord, SIGTERM, 5000);
        fail_msg("dbzm: mirror %zu rows (expected 7), changelog %zu (expected 32); logs in %s",
                 json_array_size(rows_of(m)), json_array_size(rows_of(cl)), T.dir);
    }
    for (long id = 1; id <= 24; id++) {
        json_t *r = row_by_id(rows_of(m), id);
        if (id <= 6 || id == 15) {
            assert_non_null(r);
            assert_string_equal(json_string_value(json_object_get(r, "name")), "after");
        } else if (r != NULL) {
            fail_msg("dbzm: row %ld from before the truncate is in the mirror", id);
        }
    }
    json_decref(m);
    bool applied = worker_log_has("m1", "applied by position");

    /* another worker, with an empty disk, restores the slots: their floors are in state */
    cdc_test_kill(worker, SIGKILL, 2000);
    worker = cdc_test_start_worker(&dj, "m2", "public.dbzm", NULL);
    assert_true(worker > 0);

    /* late: changes from before the truncate reach slot 9 after its floor */
    dbz_event_to("dbzm", 9, 'c', 33, "late", 450);
    dbz_event_to("dbzm", 9, 'u', 9, "late", 460);
    dbz_event_to("dbzm", 9, 'c', 33, "late", 450); /* a replay */
    dbz_event_to("dbzm", 9, 'c', 21, "after", 800);
    flush();
    w.mirror = 8;
    w.changelog = 35;
    settled = cdc_test_wait_for(dbzm_has, &w, 60000);
    m = read_table_in(wh, "dbzm");
    json_t *cl = read_table_in(wh, "dbzm_changelog");
    cdc_test_kill(worker, SIGTERM, 5000);
    cdc_test_kill(coord, SIGTERM, 5000);
    if (!applied)
        fail_msg("worker m1 did not log the truncate applied by position (logs in %s)", T.dir);
    if (!settled)
        fail_msg("dbzm after the late changes: mirror %zu rows (expected 8), changelog %zu "
                 "(expected 35); logs in %s",
                 json_array_size(rows_of(m)), json_array_size(rows_of(cl)), T.dir);
    assert_null(row_by_id(rows_of(m), 33));
    assert_null(row_by_id(rows_of(m), 9));
    assert_non_null(row_by_id(rows_of(m), 21));
    assert_int_equal(changelog_count(cl, "t", -1), 1);
    assert_int_equal(changelog_count(cl, "c", 33), 1);
    assert_int_equal(changelog_count(cl, "u", 9), 1);
    assert_int_equal(changelog_count(cl, "u", 15), 1);
    json_decref(m);
    json_decref(cl);
}

static bool coordinator_cs_refused(void *arg)
{
    (void)arg;
    return log_has("coordinator", "cs", "refused the registration of worker") &&
           log_has("coordinator", "cs", "it did not prove the worker secret within the deadline");
}

/*
 * --worker-secret-file on the coordinator and on worker s1: s1 answers the coordinator's
 * challenge and its rows are committed. Worker s2 has no secret: it says what it lacks,
 * the coordinator refuses it (logged) and it never owns a slot, while s1 goes on.
 */
static void test_worker_secret(void **state)
{
    char job[96], wh[600], path[700], opt[800];
    FILE *f;
    (void)state;
    cdc_test_job_t dj = dbz_job("s", "dbs", 12, job, wh);
    snprintf(path, sizeof(path), "%s/worker-secret", T.dir);
    assert_non_null(f = fopen(path, "w"));
    fputs("s3cret shared by the job\n", f);
    fclose(f);
    snprintf(opt, sizeof(opt), "--worker-secret-file=%s", path);
    const char *copts[] = {"--commit-interval=300ms", "--rebalance-grace=300ms",
                           "--heartbeat-timeout=1500ms", opt, NULL};
    const char *wopts[] = {opt, NULL};

    pid_t coord = cdc_test_start_coordinator(&dj, "cs", copts);
    pid_t s1 = cdc_test_start_worker(&dj, "s1", "public.dbs", wopts);
    /* without a secret, explicitly (the harness gives every process its own) */
    const char *nosecret[] = {"--insecure", "--worker-secret=", NULL};
    pid_t s2 = cdc_test_start_worker(&dj, "s2", "public.dbs", nosecret);
    assert_true(coord > 0 && s1 > 0 && s2 > 0);
    for (long id = 1; id <= 6; id++)
        dbz_event_to("dbs", CDC_KAFKA_PARTITION_ANY, 'c', id, "n", 100 + (uint64_t)id);
    flush();
    want_t w = {"dbs_changelog", 6, wh};
    bool arrived = cdc_test_wait_for(have_rows, &w, 90000);
    bool refused = cdc_test_wait_for(coordinator_cs_refused, NULL, 20000);
    bool told = worker_log_has("s2", "requires workers to prove a secret and this worker has none");
    bool s2_assigned = worker_log_has("s2", "partitions from checkpoint");
    bool s1_warned = worker_log_has("s1", "control plane is unauthenticated");
    cdc_test_kill(s2, SIGTERM, 5000);
    cdc_test_kill(s1, SIGTERM, 5000);
    cdc_test_kill(coord, SIGTERM, 5000);
    if (!arrived)
        fail_msg("dbs_changelog: the rows of the worker that proved the secret did not arrive "
                 "(logs in %s)",
                 T.dir);
    assert_true(refused);
    assert_true(told);
    assert_false(s2_assigned);
    assert_false(s1_warned);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duplicates_toast_dlq_add_column),
        cmocka_unit_test(test_restore_on_other_worker),
        cmocka_unit_test(test_progress_watchdog),
        cmocka_unit_test(test_coordinator_progress_check),
        cmocka_unit_test(test_missing_start_logged),
        cmocka_unit_test(test_checkpoint_deleted_logged),
        cmocka_unit_test(test_many_failed_partitions),
        cmocka_unit_test(test_debezium_truncate),
        cmocka_unit_test(test_debezium_truncate_partitions),
        cmocka_unit_test(test_worker_secret),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
