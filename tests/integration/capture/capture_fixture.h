/*
 * What the component tests of cdc-capture (tests/integration/capture/test_capture_*.c, one
 * binary each) share, against the harness PostgreSQL and development Kafka broker: SQL
 * helpers; a capture started with its log in the harness directory, under a slot,
 * publication and topic prefix of its own (N() appends the test process's pid, so that
 * tests do not see each other's events); its topics read back as events (ev_t), with
 * per-key order and partitioning checked; its HTTP port (/status, /metrics, requests,
 * cdcctl); a table's topic checked against the table (converged()). Every helper is
 * static inline, as each binary uses some of them only. capture_main() is every binary's
 * main(): CDC_TEST_FILTER (a cmocka pattern, e.g. 'test_partition*') runs only the tests
 * it matches.
 */
#ifndef CDC_TEST_CAPTURE_FIXTURE_H
#define CDC_TEST_CAPTURE_FIXTURE_H

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

static inline PGconn *pg_as(const char *extra)
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

static inline void sql(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void sql(PGconn *c, const char *fmt, ...)
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
static inline char *sql1(PGconn *c, const char *q)
{
    PGresult *r = PQexec(c, q);
    char *v;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1)
        fail_msg("SQL failed: %s: %s", q, PQresultErrorMessage(r));
    v = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static inline uint64_t lsn_of(const char *s)
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
static inline const char *N(const char *base)
{
    static char bufs[8][96];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 96, "%s_%s", base, tag);
    return b;
}

static inline char *read_log(void)
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

/* more: one further option, or NULL. */
static inline pid_t start_capture(const char *name, const char *tables, const char *more)
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

/* Like start_capture() with several further options (NULL-terminated). */
static inline pid_t start_capture_opts(const char *name, const char *tables,
                                       const char *const *more)
{
    cdc_test_job_t job = {.dir = cdc_test_env()->tmp, .topic_prefix = name};
    pid_t pid;

    cdc_test_log_path(&job, "capture", name, log_path, sizeof(log_path));
    pid = cdc_test_start_capture(&job, name, tables, more);
    assert_true(pid > 0);
    return pid;
}

static inline const char *topic_of(const char *base, const char *rest)
{
    static char bufs[4][160];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, 160, "%s.%s", N(base), rest);
    return b;
}

/* Streaming (not just the slot held during the snapshot): the capture logs it. */
static inline bool log_says_streaming(void *arg)
{
    (void)arg;
    return strstr(read_log(), "msg=\"streaming slot") != NULL;
}

static inline void wait_streaming(PGconn *c, const char *slot)
{
    (void)c;
    if (!cdc_test_wait_for(log_says_streaming, NULL, 60000)) {
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "tail -n 30 %s >&2", log_path);
        (void)system(cmd);
        fail_msg("capture did not start streaming slot %s", slot);
    }
}

/* True when the capture's log holds the string arg. */
static inline bool log_has(void *arg)
{
    return strstr(read_log(), (const char *)arg) != NULL;
}

/* Occurrences of text in the capture log (two captures of one name share it). */
typedef struct log_count {
    const char *text;
    int want;
} log_count_t;

static inline bool log_has_count(void *arg)
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

static size_t log_mark; /* where log_after() starts reading the log */

static inline bool log_after(void *arg)
{
    const char *l = read_log();
    return strlen(l) >= log_mark && strstr(l + log_mark, (const char *)arg) != NULL;
}

/* Runs the capture to its exit; returns the exit status and leaves the log readable. */
static inline int run_to_exit(const char *name, const char *tables, const char *more)
{
    pid_t pid = start_capture(name, tables, more);
    int status = 0;
    if (!cdc_test_wait_exit(pid, 30000, &status)) {
        cdc_test_kill(pid, SIGKILL, 1000);
        fail_msg("capture did not exit on a bad setup; log: %s", read_log());
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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

static inline void evs_free(evs_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        json_decref(s->v[i].value);
    }
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static inline void add_msg(evs_t *s, const cdc_kafka_msg_t *m)
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
static inline void consume_q(const char *topic, evs_t *out, size_t want, int timeout_ms,
                             int quiet_ms)
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

static inline void consume(const char *topic, evs_t *out, size_t want, int timeout_ms)
{
    consume_q(topic, out, want, timeout_ms, 500);
}

static inline json_t *after_of(const ev_t *e)
{
    return json_object_get(e->value, "after");
}

static inline int key_id(const ev_t *e)
{
    json_error_t jerr;
    json_t *k = e->key ? json_loads(e->key, 0, &jerr) : NULL;
    int id = k ? (int)json_integer_value(json_object_get(k, "id")) : -1;
    json_decref(k);
    return id;
}

/* Checks partitioning and that (commit_lsn, lsn) never goes backwards per key. */
static inline void check_key_order(const evs_t *s, bool strict)
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

static inline const ev_t *find(const evs_t *s, char op, int id, size_t nth)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].op == op && key_id(&s->v[i]) == id && nth-- == 0)
            return &s->v[i];
    return NULL;
}

static inline const char *str_at(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    if (s == NULL)
        fail_msg("field %s is not a string", k);
    return s;
}

/* Events on a topic: the sum of its partitions' high watermarks (0 when it does not exist). */
static inline int64_t topic_events(const char *topic)
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

/* ---- the capture's HTTP port -------------------------------------------------------- */

/* method path of the capture whose log is log_path (its --http=127.0.0.1:0 port; the
 * last one logged): the whole response, headers included. */
static inline char *capture_http(const char *method, const char *path)
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

static inline char *capture_get(const char *path)
{
    return capture_http("GET", path);
}

static inline char *capture_metrics(void)
{
    return capture_get("/metrics");
}

/* The capture's /status as JSON (caller decrefs). */
static inline json_t *capture_status(void)
{
    const char *body = strstr(capture_get("/status"), "\r\n\r\n");
    json_t *j = body ? json_loads(body + 4, 0, NULL) : NULL;
    if (j == NULL)
        fail_msg("the capture's /status is not JSON");
    return j;
}

/* The value of one metric series (name{labels}), or -1 when absent. */
static inline double metric(const char *series)
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

static inline bool metric_reached(void *arg)
{
    const wait_metric_t *w = arg;
    return metric(w->series) >= w->at_least;
}

/* The capture's HTTP port, from its log (0 when it logged none). */
static inline int capture_port(void)
{
    const char *l = NULL, *p = read_log();
    while ((p = strstr(p, "http server listening on http://127.0.0.1:")) != NULL)
        l = p++;
    return l ? atoi(l + strlen("http server listening on http://127.0.0.1:")) : 0;
}

/* Runs `cdcctl <args>` (stderr too) into out; returns its exit status. */
static inline int run_cdcctl(const char *args, char *out, size_t size)
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

/* ---- a table's topic against the table ---------------------------------------------- */

/* Waits for a row written now into table (id, v) = (sentinel id, 0) to reach its topic:
 * everything written before is produced. */
static inline void wait_caught_up(PGconn *c, const char *table, const char *topic, int sentinel)
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
static inline void converged(PGconn *c, const char *table, const char *topic, evs_t *s,
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

static inline void check_converged(PGconn *c, const char *table, const char *topic, evs_t *s)
{
    converged(c, table, topic, s, false);
}

/* Events of op 'r' with source.snapshot = label. */
static inline size_t count_reads(const evs_t *s, const char *label, long long *first_ts,
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

/* Every capture test binary's main(): the run's tag (N()), then the tests, or only those
 * CDC_TEST_FILTER matches (e.g. CDC_TEST_FILTER='test_partition*'). */
static inline int capture_main(const struct CMUnitTest *tests, size_t n)
{
    cdc_test_env();
    snprintf(tag, sizeof(tag), "%ld", (long)getpid());
    if (getenv("CDC_TEST_FILTER")) /* e.g. CDC_TEST_FILTER='test_partition*' */
        cmocka_set_test_filter(getenv("CDC_TEST_FILTER"));
    return _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
}

#endif
