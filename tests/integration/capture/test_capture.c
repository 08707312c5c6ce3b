/*
 * Component tests of cdc-capture against the harness PostgreSQL and development Kafka
 * broker: every listed type and operation with the events' content, per-key order and
 * partitioning checked; a schema change; kill -9 and restart with nothing missing;
 * heartbeats advancing confirmed_flush_lsn while tables are idle; a burst read at once
 * despite --read-coalesce; snapshot consistency
 * with concurrent writes; bad setups failing with a message and a fix; a partitioned table
 * captured as one table (through publish_via_partition_root, and mapped from its
 * partitions when a publication sends them), partitions attached and detached while
 * running; a misconfigured table next to good ones; a rename decoded while its commit is
 * not yet visible to other sessions keeping its field id; a change of a published table
 * outside --tables stopping the capture before its position is confirmed; topics created
 * without the development broker's control channel without a stall. Each test uses
 * its own slot, publication and topic prefix, so they do not see each other's events.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "common/kafka.h"
#include "tests/harness/harness.h"
#include "tests/harness/procs.h"

/* ---- PostgreSQL helpers ------------------------------------------------------------- */

static PGconn *pg_as(const char *extra)
{
    char conninfo[1024];
    PGconn *c;
    snprintf(conninfo, sizeof(conninfo), "%s %s", cdc_test_require("CDC_TEST_PG_DSN"),
             extra ? extra : "");
    c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("could not connect: %s", PQerrorMessage(c));
    return c;
}

static void sql(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sql(PGconn *c, const char *fmt, ...)
{
    char q[8192];
    va_list ap;
    PGresult *r;
    va_start(ap, fmt);
    vsnprintf(q, sizeof(q), fmt, ap);
    va_end(ap);
    r = PQexec(c, q);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("SQL failed: %s: %s", q, PQresultErrorMessage(r));
    PQclear(r);
}

/* First value of a query, malloc'ed ("" for NULL). */
static char *sql1(PGconn *c, const char *q)
{
    PGresult *r = PQexec(c, q);
    char *v;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1)
        fail_msg("SQL failed: %s: %s", q, PQresultErrorMessage(r));
    v = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static uint64_t lsn_of(const char *s)
{
    unsigned hi, lo;
    if (sscanf(s, "%X/%X", &hi, &lo) != 2)
        return 0;
    return ((uint64_t)hi << 32) | lo;
}

/* ---- capture process ---------------------------------------------------------------- */

static char log_path[1024];
static char tag[16];

/* "<base>_<tag>": slot, publication and topic prefix unique to this run. */
static const char *N(const char *base)
{
    static char bufs[8][96];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 96, "%s_%s", base, tag);
    return b;
}

/* more: one further option, or NULL. */
static pid_t start_capture(const char *name, const char *tables, const char *more)
{
    /* the log goes straight into the harness directory, where read_log() finds it */
    cdc_test_job_t job = {.dir = cdc_test_env()->tmp, .topic_prefix = name};
    const char *const extra[] = {more, NULL};
    pid_t pid;

    cdc_test_log_path(&job, "capture", name, log_path, sizeof(log_path));
    pid = cdc_test_start_capture(&job, name, tables, extra);
    assert_true(pid > 0);
    return pid;
}

static char *read_log(void);
static pid_t start_capture_opts(const char *name, const char *tables, const char *const *more);
static void wait_caught_up(PGconn *c, const char *table, const char *topic, int sentinel);
static double metric(const char *series);
static json_t *capture_status(void);

static const char *topic_of(const char *base, const char *rest)
{
    static char bufs[4][160];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, 160, "%s.%s", N(base), rest);
    return b;
}

/* Streaming (not just the slot held during the snapshot): the capture logs it. */
static bool log_says_streaming(void *arg)
{
    (void)arg;
    return strstr(read_log(), "msg=\"streaming slot") != NULL;
}

static void wait_streaming(PGconn *c, const char *slot)
{
    (void)c;
    if (!cdc_test_wait_for(log_says_streaming, NULL, 60000)) {
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "tail -n 30 %s >&2", log_path);
        (void)system(cmd);
        fail_msg("capture did not start streaming slot %s", slot);
    }
}

static char *read_log(void)
{
    FILE *f = fopen(log_path, "r");
    static char buf[4 << 20];
    size_t n;
    if (f == NULL)
        return "";
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ---- events ------------------------------------------------------------------------- */

typedef struct ev {
    int32_t partition;
    int64_t offset;
    char *key;
    json_t *value;
    char op;
    int schema_version;
    uint64_t commit_lsn, lsn;
} ev_t;

typedef struct evs {
    ev_t *v;
    size_t n, cap;
} evs_t;

static void evs_free(evs_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        json_decref(s->v[i].value);
    }
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static void add_msg(evs_t *s, const cdc_kafka_msg_t *m)
{
    ev_t *e;
    json_error_t jerr;
    const char *seq;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
    }
    e = &s->v[s->n++];
    memset(e, 0, sizeof(*e));
    e->partition = m->partition;
    e->offset = m->offset;
    e->key = m->key ? strndup(m->key, m->key_len) : NULL;
    e->value = json_loadb(m->value, m->value_len, 0, &jerr);
    if (e->value == NULL)
        fail_msg("event is not JSON: %s", jerr.text);
    /* events carry no headers (docs/events.md): the schema version and the op are the
     * envelope's */
    if (cdc_kafka_msg_header_count(m) != 0)
        fail_msg("event has %zu headers, expected none", cdc_kafka_msg_header_count(m));
    e->schema_version = (int)json_integer_value(
        json_object_get(json_object_get(e->value, "source"), "schema_version"));
    {
        const char *op = json_string_value(json_object_get(e->value, "op"));
        if (op != NULL && strlen(op) == 1)
            e->op = op[0];
    }
    seq = json_string_value(json_object_get(json_object_get(e->value, "source"), "sequence"));
    if (seq) {
        json_t *a = json_loads(seq, 0, &jerr);
        e->commit_lsn = strtoull(json_string_value(json_array_get(a, 0)), NULL, 10);
        e->lsn = strtoull(json_string_value(json_array_get(a, 1)), NULL, 10);
        json_decref(a);
    }
}

/*
 * Reads every partition of topic from the beginning up to its high watermark, and on
 * until at least `want` events arrived (or timeout); quiet_ms > 0 keeps reading that long
 * after, so extra events (duplicates) are seen too.
 */
static void consume_q(const char *topic, evs_t *out, size_t want, int timeout_ms, int quiet_ms)
{
    cdc_kafka_consumer_config_t cc = {.bootstrap = cdc_test_require("CDC_TEST_KAFKA")};
    cdc_kafka_consumer_t *c;
    cdc_kafka_tp_t tps[64];
    cdc_kafka_msg_t msgs[512];
    int64_t high[64], next[64];
    cdc_error_t e;
    int32_t np = 0;
    long long deadline = cdc_test_now_ms() + timeout_ms, quiet_until = 0;
    bool refresh = true;

    assert_int_equal(cdc_kafka_consumer_new(&cc, &c, &e), CDC_OK);
    while (cdc_kafka_consumer_partitions(c, topic, &np, 5000, &e) != CDC_OK) {
        if (cdc_test_now_ms() > deadline)
            fail_msg("topic %s does not exist: %s", topic, e.msg);
        usleep(100000);
    }
    for (int32_t p = 0; p < np; p++) {
        tps[p] = (cdc_kafka_tp_t){topic, p, CDC_KAFKA_OFFSET_BEGINNING};
        next[p] = 0;
    }
    assert_int_equal(cdc_kafka_consumer_assign(c, tps, (size_t)np, &e), CDC_OK);
    for (;;) {
        size_t n = 0;
        bool at_end = true;
        long long now = cdc_test_now_ms();
        if (now > deadline)
            break;
        if (refresh) {
            for (int32_t p = 0; p < np; p++) {
                int64_t low = 0;
                high[p] = 0;
                cdc_kafka_consumer_watermarks(c, topic, p, &low, &high[p], 5000, &e);
            }
            refresh = false;
        }
        for (int32_t p = 0; p < np; p++)
            if (next[p] < high[p])
                at_end = false;
        if (at_end) {
            if (out->n >= want && quiet_until == 0)
                quiet_until = now + quiet_ms;
            if (out->n >= want && now >= quiet_until)
                break;
            refresh = true;
        }
        cdc_kafka_consume_batch(c, msgs, 512, &n, 100, &e);
        for (size_t i = 0; i < n; i++) {
            add_msg(out, &msgs[i]);
            if (msgs[i].partition < 64 && msgs[i].offset + 1 > next[msgs[i].partition])
                next[msgs[i].partition] = msgs[i].offset + 1;
        }
        cdc_kafka_msgs_release(msgs, n);
    }
    cdc_kafka_consumer_free(c);
}

static void consume(const char *topic, evs_t *out, size_t want, int timeout_ms)
{
    consume_q(topic, out, want, timeout_ms, 500);
}

static json_t *after_of(const ev_t *e)
{
    return json_object_get(e->value, "after");
}

static int key_id(const ev_t *e)
{
    json_error_t jerr;
    json_t *k = e->key ? json_loads(e->key, 0, &jerr) : NULL;
    int id = k ? (int)json_integer_value(json_object_get(k, "id")) : -1;
    json_decref(k);
    return id;
}

/* Checks partitioning and that (commit_lsn, lsn) never goes backwards per key. */
static void check_key_order(const evs_t *s, bool strict)
{
    for (size_t i = 0; i < s->n; i++) {
        const ev_t *a = &s->v[i];
        if (a->key == NULL)
            continue;
        assert_int_equal(a->partition, cdc_kafka_partition_for_key(a->key, strlen(a->key), 12));
        for (size_t j = 0; j < s->n; j++) {
            const ev_t *b = &s->v[j];
            if (b->key == NULL || b->partition != a->partition || b->offset <= a->offset ||
                strcmp(a->key, b->key) != 0)
                continue;
            if (strict && !(b->commit_lsn > a->commit_lsn ||
                            (b->commit_lsn == a->commit_lsn && b->lsn > a->lsn))) {
                /* a key change emits d and c at the same lsn, but for different keys */
                fail_msg("key %s out of order at offsets %lld, %lld", a->key, (long long)a->offset,
                         (long long)b->offset);
            }
        }
    }
}

static const ev_t *find(const evs_t *s, char op, int id, size_t nth)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].op == op && key_id(&s->v[i]) == id && nth-- == 0)
            return &s->v[i];
    return NULL;
}

static const char *str_at(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    if (s == NULL)
        fail_msg("field %s is not a string", k);
    return s;
}

/* ---- tests ---------------------------------------------------------------------------- */

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

/* Occurrences of text in the capture log (two captures of one name share it). */
typedef struct log_count {
    const char *text;
    int want;
} log_count_t;

static bool log_has_count(void *arg)
{
    const log_count_t *lc = arg;
    const char *p = read_log();
    int n = 0;
    while ((p = strstr(p, lc->text)) != NULL) {
        n++;
        p += strlen(lc->text);
    }
    return n >= lc->want;
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

/* Runs the capture to its exit; returns the exit status and leaves the log readable. */
static int run_to_exit(const char *name, const char *tables, const char *more)
{
    pid_t pid = start_capture(name, tables, more);
    int status = 0;
    if (!cdc_test_wait_exit(pid, 30000, &status)) {
        cdc_test_kill(pid, SIGKILL, 1000);
        fail_msg("capture did not exit on a bad setup; log: %s", read_log());
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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

/* ---- partitioned tables and per-table errors ------------------------------------------ */

/* Like start_capture() with several further options (NULL-terminated). */
static pid_t start_capture_opts(const char *name, const char *tables, const char *const *more)
{
    cdc_test_job_t job = {.dir = cdc_test_env()->tmp, .topic_prefix = name};
    pid_t pid;

    cdc_test_log_path(&job, "capture", name, log_path, sizeof(log_path));
    pid = cdc_test_start_capture(&job, name, tables, more);
    assert_true(pid > 0);
    return pid;
}

/* Events on a topic: the sum of its partitions' high watermarks (0 when it does not exist). */
static int64_t topic_events(const char *topic)
{
    cdc_kafka_consumer_config_t cc = {.bootstrap = cdc_test_require("CDC_TEST_KAFKA")};
    cdc_kafka_consumer_t *c;
    cdc_error_t e;
    int32_t np = 0;
    int64_t sum = 0;

    assert_int_equal(cdc_kafka_consumer_new(&cc, &c, &e), CDC_OK);
    if (cdc_kafka_consumer_partitions(c, topic, &np, 5000, &e) == CDC_OK) {
        for (int32_t p = 0; p < np; p++) {
            int64_t low = 0, high = 0;
            assert_int_equal(cdc_kafka_consumer_watermarks(c, topic, p, &low, &high, 5000, &e),
                             CDC_OK);
            sum += high;
        }
    }
    cdc_kafka_consumer_free(c);
    return sum;
}

/* method path of the capture whose log is log_path (its --http=127.0.0.1:0 port; the
 * last one logged): the whole response, headers included. */
static char *capture_http(const char *method, const char *path)
{
    static char buf[262144];
    const char *l = NULL, *p = read_log();
    struct sockaddr_in a = {.sin_family = AF_INET};
    char req[1400];
    char *token;
    size_t n = 0;
    ssize_t r;
    int fd;

    while ((p = strstr(p, "http server listening on http://127.0.0.1:")) != NULL)
        l = p++;
    if (l == NULL) {
        fail_msg("the capture did not log its HTTP port: %s", read_log());
        return buf;
    }
    token = cdc_test_secret("CDC_HTTP_TOKEN_FILE"); /* the harness's, as cdcctl reads it */
    snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s%s%s\r\n", method, path,
             token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
    free(token);
    a.sin_port = htons((uint16_t)atoi(l + strlen("http server listening on http://127.0.0.1:")));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        fail_msg("could not connect to the capture's HTTP port");
    assert_true(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fd);
    return buf;
}

static char *capture_get(const char *path)
{
    return capture_http("GET", path);
}

static char *capture_metrics(void)
{
    return capture_get("/metrics");
}

/* The capture's /status as JSON (caller decrefs). */
static json_t *capture_status(void)
{
    const char *body = strstr(capture_get("/status"), "\r\n\r\n");
    json_t *j = body ? json_loads(body + 4, 0, NULL) : NULL;
    if (j == NULL)
        fail_msg("the capture's /status is not JSON");
    return j;
}

/* The value of one metric series (name{labels}), or -1 when absent. */
static double metric(const char *series)
{
    const char *m = capture_metrics(), *p = m;
    size_t n = strlen(series);
    while ((p = strstr(p, series)) != NULL) {
        if ((p == m || p[-1] == '\n') && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p += n;
    }
    return -1;
}

typedef struct wait_metric {
    const char *series;
    double at_least;
} wait_metric_t;

static bool metric_reached(void *arg)
{
    const wait_metric_t *w = arg;
    return metric(w->series) >= w->at_least;
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

    /* the issue's reproduction: the same publication (its tables list the partitions,
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

/* True when the capture's log holds the string arg. */
static bool log_has(void *arg)
{
    return strstr(read_log(), (const char *)arg) != NULL;
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

/* Waits for a row written now into table (id, v) = (sentinel id, 0) to reach its topic:
 * everything written before is produced. */
static void wait_caught_up(PGconn *c, const char *table, const char *topic, int sentinel)
{
    evs_t s = {0};
    long long deadline = cdc_test_now_ms() + 60000;
    sql(c, "INSERT INTO %s VALUES (%d, 0)", table, sentinel);
    for (;;) {
        consume_q(topic, &s, (size_t)topic_events(topic), 30000, 0);
        bool found = find(&s, 'c', sentinel, 0) != NULL;
        evs_free(&s);
        if (found)
            break;
        if (cdc_test_now_ms() > deadline)
            fail_msg("the capture did not produce %s's row %d; log: %s", table, sentinel,
                     read_log());
        usleep(200000);
    }
}

/*
 * The table's topic, read whole, ends equal to the table: the last event of every row's
 * key carries the row (op c, u or r), and every key whose last event is no delete is a
 * row. Returns the events (the caller frees them).
 */
static void converged(PGconn *c, const char *table, const char *topic, evs_t *s,
                      bool since_truncate)
{
    enum { MAX_ID = 400000 };
    const ev_t **last = calloc(MAX_ID, sizeof(*last));
    int64_t from[64] = {0};
    char q[256];
    PGresult *r;
    int live = 0, rows;

    consume_q(topic, s, (size_t)topic_events(topic), 120000, 0);
    /* since_truncate: each partition from its last truncate on */
    for (size_t i = 0; since_truncate && i < s->n; i++)
        if (s->v[i].op == 't' && s->v[i].partition < 64 && s->v[i].offset > from[s->v[i].partition])
            from[s->v[i].partition] = s->v[i].offset;
    for (size_t i = 0; i < s->n; i++) {
        int id = key_id(&s->v[i]);
        if (id < 0 || id >= MAX_ID || s->v[i].offset < from[s->v[i].partition % 64])
            continue;
        if (last[id] == NULL || last[id]->offset < s->v[i].offset)
            last[id] = &s->v[i];
    }
    snprintf(q, sizeof(q), "SELECT id, v FROM %s", table);
    r = PQexec(c, q);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    rows = PQntuples(r);
    for (int i = 0; i < rows; i++) {
        int id = atoi(PQgetvalue(r, i, 0)), v = atoi(PQgetvalue(r, i, 1));
        const ev_t *e = id >= 0 && id < MAX_ID ? last[id] : NULL;
        if (e == NULL) {
            size_t inr = 0, r5 = 0;
            for (size_t k = 0; k < s->n; k++) {
                int kid = key_id(&s->v[k]);
                if (kid > id - 10 && kid < id + 2000) {
                    inr++;
                    if (s->v[k].op == 'r')
                        r5++;
                }
            }
            fail_msg(
                "%s: row %d (v %d) never reached the topic (%zu events, %zu events near, %zu r)",
                table, id, v, s->n, inr, r5);
        }
        if (e->op == 'd')
            fail_msg("%s: row %d (v %d) ends deleted in the topic", table, id, v);
        if (json_integer_value(json_object_get(after_of(e), "v")) != v)
            fail_msg("%s: row %d has v %d, its last event (op %c) v %lld", table, id, v, e->op,
                     (long long)json_integer_value(json_object_get(after_of(e), "v")));
    }
    for (int id = 0; id < MAX_ID; id++)
        if (last[id] != NULL && last[id]->op != 'd')
            live++;
    PQclear(r);
    free(last);
    if (live != rows)
        fail_msg("%s: %d keys live in the topic, %d rows in the table", table, live, rows);
}

static void check_converged(PGconn *c, const char *table, const char *topic, evs_t *s)
{
    converged(c, table, topic, s, false);
}

/* Events of op 'r' with source.snapshot = label. */
static size_t count_reads(const evs_t *s, const char *label, long long *first_ts,
                          long long *last_ts)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const char *l = json_string_value(
            json_object_get(json_object_get(s->v[i].value, "source"), "snapshot"));
        long long ts = (long long)json_integer_value(json_object_get(s->v[i].value, "ts_ms"));
        if (s->v[i].op != 'r' || l == NULL || strcmp(l, label) != 0)
            continue;
        if (first_ts && (n == 0 || ts < *first_ts))
            *first_ts = ts;
        if (last_ts && (n == 0 || ts > *last_ts))
            *last_ts = ts;
        n++;
    }
    return n;
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

/* The capture's HTTP port, from its log (0 when it logged none). */
static int capture_port(void)
{
    const char *l = NULL, *p = read_log();
    while ((p = strstr(p, "http server listening on http://127.0.0.1:")) != NULL)
        l = p++;
    return l ? atoi(l + strlen("http server listening on http://127.0.0.1:")) : 0;
}

/* Runs `cdcctl <args>` (stderr too) into out; returns its exit status. */
static int run_cdcctl(const char *args, char *out, size_t size)
{
    char cmd[1024];
    FILE *f;
    size_t n;
    snprintf(cmd, sizeof(cmd), "%s/cdcctl %s 2>&1", cdc_test_env()->build_dir, args);
    f = popen(cmd, "r");
    assert_non_null(f);
    n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    print_message("cdcctl %s:\n%s", args, out);
    return WEXITSTATUS(pclose(f));
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

static size_t log_mark;
static bool log_after(void *arg);

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

static size_t log_mark; /* where log_after() starts reading the log */

static bool log_after(void *arg)
{
    const char *l = read_log();
    return strlen(l) >= log_mark && strstr(l + log_mark, (const char *)arg) != NULL;
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
        cmocka_unit_test(test_kill9_restart),
        cmocka_unit_test(test_types_and_operations),
        cmocka_unit_test(test_heartbeat_advances_slot),
        cmocka_unit_test(test_snapshot_consistency),
        cmocka_unit_test(test_bad_setup),
        cmocka_unit_test(test_reconnect_after_pg_restart),
        cmocka_unit_test(test_burst_not_coalesced),
        cmocka_unit_test(test_partitioned_table),
        cmocka_unit_test(test_partition_leaf_changes),
        cmocka_unit_test(test_sigterm_under_backlog),
        cmocka_unit_test(test_slot_lost),
        cmocka_unit_test(test_standby_capture),
        cmocka_unit_test(test_table_errors_isolated),
        cmocka_unit_test(test_rename_decoded_before_visible),
        cmocka_unit_test(test_uncaptured_table_stops),
        cmocka_unit_test(test_table_patterns),
        cmocka_unit_test(test_topics_without_control),
        cmocka_unit_test(test_table_added_running),
        cmocka_unit_test(test_toast_in_chunk_window),
        cmocka_unit_test(test_incremental_snapshot_resumes),
        cmocka_unit_test(test_resnapshot_on_demand),
        cmocka_unit_test(test_tables_by_request),
        cmocka_unit_test(test_snapshot_max_rate),
        cmocka_unit_test(test_tables_share_windows),
        cmocka_unit_test(test_initial_incremental_resumes),
        cmocka_unit_test(test_initial_snapshot_killed_adopts),
        cmocka_unit_test(test_table_removed_running),
        cmocka_unit_test(test_table_readded_running),
        cmocka_unit_test(test_table_readded_after_restart),
        cmocka_unit_test(test_table_readded_quickly),
    };
    cdc_test_env();
    snprintf(tag, sizeof(tag), "%ld", (long)getpid());
    if (getenv("CDC_TEST_FILTER")) /* e.g. CDC_TEST_FILTER='test_partition*' */
        cmocka_set_test_filter(getenv("CDC_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
