/*
 * cdcctl: operator CLI over the coordinator's admin API, etcd and Kafka.
 *   cdcctl status        the leader's /status, for a person (--json: raw)
 *   cdcctl tables        the health of the Iceberg tables (files, snapshots, compactions)
 *                        and the job's table set with each table's state; with
 *                        --capture, the capture's tables too (streaming, snapshotting N%,
 *                        removed) with their snapshots' progress
 *   cdcctl tables add T  adds table T to the job's tables (POST /tables): the workers
 *                        consume it at once; with --capture, first adds
 *                        it to the capture's publication (the capture's POST /tables),
 *                        which captures it and reads its rows
 *   cdcctl tables remove T  drops table T from the capture's publication (--capture): no
 *                        longer captured, its Iceberg tables stay
 *   cdcctl compact T     compacts table T now on the leader (POST /compact) and waits
 *   cdcctl snapshot T    re-reads table T on the capture (POST /snapshot, --capture);
 *                        with --wait, follows its progress until it is done
 *   cdcctl leader        who leads the job (from etcd)
 *   cdcctl checkpoints   checkpoint records kept in etcd, newest first
 *   cdcctl checkpoint N  one record as JSON
 *   cdcctl dlq list | show | replay   dead letters (dlq.c)
 * The coordinator's admin address comes from --coordinator, or from the leader key in
 * etcd (--etcd, --job); the dead letters from Kafka (--kafka).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/options.h"
#include "common/cluster.h"
#include "common/config.h"
#include "common/etcd.h"
#include "common/http.h"
#include "common/httpc.h"
#include "common/clock.h"
#include "tools/cdcctl/cdcctl.h"

#define OPT(name, type, field, def, lo, hi, help)                                                  \
    CDC_OPT_ROW(ctl_config_t, name, type, field, def, lo, hi, help)

static const cdc_opt_t options[] = {
    {"coordinator", CDC_OPT_STRING, offsetof(ctl_config_t, coordinator), NULL, false, 0, 0, NULL,
     "Admin address host:port of a coordinator (default: the leader's, from etcd)."},
    CDC_OPT_SECRET(ctl_config_t, "http-token", http_token,
                   "Bearer token sent to the coordinator's admin API (its --http-token)."),
    CDC_OPTS_ETCD(ctl_config_t, etcd),
    CDC_OPTS_TLS(ctl_config_t, tls),
    {"job", CDC_OPT_STRING, offsetof(ctl_config_t, job), "cdc", false, 0, 0, NULL, "Job name."},
    {"json", CDC_OPT_BOOL, offsetof(ctl_config_t, json), "false", false, 0, 0, NULL,
     "Print raw JSON instead of the human form (tables: /status's tables; dlq: one JSON "
     "object per line)."},
    {"command", CDC_OPT_STRING, offsetof(ctl_config_t, command), "status", false, 0, 0, NULL,
     "status | tables | compact:<schema>.<table> | snapshot:<schema>.<table> | leader | "
     "checkpoints | checkpoint:<epoch> | dlq:list | dlq:show | dlq:replay (also given as the "
     "first arguments: \"checkpoint 42\", \"compact public.orders\", \"dlq list\")."},
    {"timeout", CDC_OPT_DURATION, offsetof(ctl_config_t, timeout_ms), "3s", false, 100, 600000,
     NULL, "Timeout of each request."},
    OPT("wait", CDC_OPT_DURATION, wait_ms, "10m", 1000, 86400000,
        "compact: how long the coordinator waits for the compaction before it answers (it "
        "goes on after that); snapshot: follow the snapshot's progress until it is done, at "
        "most this long (a bare --wait: 10m)."),
    OPT("capture", CDC_OPT_STRING, capture, NULL, 0, 0,
        "The capture's HTTP address host:port (its --http): snapshot asks it, tables also "
        "shows its tables' states and snapshots."),
    OPT("kafka", CDC_OPT_STRING, kafka, NULL, 0, 0,
        "dlq: Kafka bootstrap servers host:port[,host:port]."),
    OPT("kafka-properties", CDC_OPT_STRING, kafka_properties, "", 0, 0,
        "dlq: extra librdkafka properties, key=value separated by ';'."),
    OPT("topic-prefix", CDC_OPT_STRING, topic_prefix, "cdc", 0, 0,
        "dlq and tables add: topic prefix of the capture: a table is named without it "
        "(public.orders for cdc.public.orders), and replays are marked in "
        "<prefix>._dlq_replays."),
    OPT("table", CDC_OPT_STRING, table, NULL, 0, 0,
        "dlq: only records of these tables, comma separated (<schema>.<table>, or a topic)."),
    OPT("class", CDC_OPT_STRING, cls, NULL, 0, 0,
        "dlq: only records of these error classes, comma separated (malformed_json, "
        "missing_key, unknown_op, type_mismatch, unknown_schema, oversized, "
        "unresolved_toast)."),
    OPT("partition", CDC_OPT_INT, partition, "-1", -1, 1000000,
        "dlq: only records of this partition of the DLQ topics (-1 = all)."),
    OPT("from-offset", CDC_OPT_INT, from_offset, "-1", -1, INT64_MAX,
        "dlq: only records at this DLQ offset or after (-1 = from the start)."),
    OPT("to-offset", CDC_OPT_INT, to_offset, "-1", -1, INT64_MAX,
        "dlq: only records at this DLQ offset or before (-1 = to the end)."),
    OPT("ids-file", CDC_OPT_STRING, ids_file, NULL, 0, 0,
        "dlq: only the records whose ids the file lists, one a line: <dlq-topic>:<partition>:"
        "<offset>, or <partition>:<offset> with one --table (the ids show prints)."),
    OPT("limit", CDC_OPT_INT, limit, "0", 0, INT64_MAX,
        "dlq: at most this many records (0 = no limit)."),
    OPT("skip-replayed", CDC_OPT_BOOL, skip_replayed, "false", 0, 0,
        "dlq: leave out records already marked replayed."),
    OPT("transform", CDC_OPT_STRING, transform, NULL, 0, 0,
        "dlq replay: an RFC 6902 JSON Patch file applied to each payload before it goes back "
        "(a record whose patch's test fails is skipped)."),
    OPT("transform-cmd", CDC_OPT_STRING, transform_cmd, NULL, 0, 0,
        "dlq replay: a shell command run for each record with the payload on its standard "
        "input; its standard output is the new payload (DLQ_ID, DLQ_TABLE, DLQ_CLASS in its "
        "environment)."),
    OPT("dry-run", CDC_OPT_BOOL, dry_run, "false", 0, 0,
        "dlq replay: print what would be replayed, transformed, and produce nothing."),
    CDC_OPT_END,
};

/* Sends method (GET, POST without a body) to url, the answer into *out (the caller frees it
 * with cdc_httpc_response_free()), with the bearer token when one is set. Returns the HTTP
 * status, or -1 when no answer came (said on stderr). */
static int http_request(const char *method, const char *url, const ctl_config_t *cfg,
                        long timeout_ms, cdc_httpc_response_t *out)
{
    const char *token = cfg->http_token;
    cdc_httpc_t *h = cdc_httpc_open();
    char auth[1024];
    const char *headers[] = {auth, NULL};
    cdc_httpc_request_t req = {.method = method, .url = url, .timeout_ms = timeout_ms};
    cdc_err_t rc;

    memset(out, 0, sizeof(*out));
    if (h == NULL)
        return -1;
    if (cdc_http_auth_header(token, auth, sizeof(auth))) /* the first token of the file */
        req.headers = headers;
    if (cdc_tls_options_http(&cfg->tls)) { /* --http-tls: the server's CA, and our certificate */
        req.ca_file = cfg->tls.ca_file;
        req.cert_file = cfg->tls.cert_file;
        req.key_file = cfg->tls.key_file;
        req.tls_server_name = cfg->tls.server_name;
    }
    rc = cdc_httpc_perform(h, &req, out);
    memset(auth, 0, sizeof(auth));
    cdc_httpc_close(h);
    if (rc != CDC_OK) {
        fprintf(stderr, "cdcctl: could not %s \"%s\": %s%s%s\n",
                strcmp(method, "GET") == 0 ? "fetch" : method, url, out->reason,
                out->detail[0] ? ": " : "", out->detail);
        return -1;
    }
    return (int)out->status;
}

static cdc_err_t open_etcd(const ctl_config_t *cfg, cdc_etcd_t **ec, cdc_error_t *e)
{
    cdc_etcd_security_t sec = cdc_etcd_options_security(&cfg->etcd);
    return cdc_etcd_open_secure(ec, cfg->etcd.endpoints, &sec, (int)cfg->timeout_ms, e);
}

static char *leader_admin(const ctl_config_t *cfg, int64_t *term)
{
    cdc_etcd_t *ec = NULL;
    cdc_error_t e;
    char key[256], *value = NULL, *admin = NULL;

    if (open_etcd(cfg, &ec, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        return NULL;
    }
    cdc_cluster_key(key, sizeof(key), cfg->job, "leader");
    if (cdc_etcd_leader(ec, key, &value, term, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\nhint: is a coordinator of job \"%s\" running?\n", e.msg,
                cfg->job);
    } else {
        cdc_leader_record_t lr;
        if (cdc_leader_record_parse(value, &lr, &e) == CDC_OK && lr.admin[0] != '\0')
            admin = strdup(lr.admin);
    }
    free(value);
    cdc_etcd_close(ec);
    return admin;
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static long long num(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* /status "coordinators" (leader first); nothing from a coordinator without the list. */
static void print_coordinators(json_t *cs)
{
    if (json_array_size(cs) == 0)
        return;
    printf("\nCOORDINATOR     ROLE     PRESENT  TERM    ADMIN\n");
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *c = json_array_get(cs, i);
        printf("%-15s %-8s %-8s %-7lld %s\n", str(c, "id"), str(c, "role"),
               json_is_true(json_object_get(c, "alive")) ? "yes" : "gone", num(c, "term"),
               str(c, "admin"));
    }
}

static void print_status(json_t *st)
{
    json_t *ws = json_object_get(st, "workers"), *as = json_object_get(st, "assignment");
    json_t *ep = json_object_get(st, "epochs"), *cs = json_object_get(st, "checkpoints");
    json_t *leader = json_object_get(st, "leader"), *rs = json_object_get(st, "restart");
    size_t i;

    printf("job %s  state %s  term %lld  generation %lld\n", str(st, "job"), str(st, "state"),
           num(st, "term"), num(st, "generation"));
    printf("leader %s  endpoint %s  admin %s\n", str(leader, "id"), str(leader, "endpoint"),
           str(leader, "admin"));
    if (str(st, "recovery_reason")[0])
        printf("last recovery: %s\n", str(st, "recovery_reason"));
    printf("restarts: %lld in window (max %lld per %lld s), %lld total\n",
           num(rs, "failures_recent"), num(rs, "max_failures"), num(rs, "interval_ms") / 1000,
           num(rs, "failures_total"));
    printf("epochs: next %lld  open %lld  recorded %lld  committed %lld  pending commits %lld\n",
           num(ep, "next"), num(ep, "open"), num(ep, "last_recorded"), num(ep, "last_committed"),
           num(ep, "pending_commits"));
    if (str(st, "last_commit_error")[0])
        printf("last commit error: %s\n", str(st, "last_commit_error"));
    {
        json_t *wa = json_object_get(st, "worker_auth"),
               *last = json_object_get(wa, "last_refused");
        printf("worker auth: %s, %lld registrations refused",
               json_is_true(json_object_get(wa, "required")) ? "required" : "OFF (unauthenticated)",
               num(wa, "refused"));
        if (json_is_object(last))
            printf(" (last: worker \"%s\", %s, %lld s ago)", str(last, "worker"),
                   str(last, "reason"), num(last, "ms_ago") / 1000);
        printf("\n");
    }
    print_coordinators(json_object_get(st, "coordinators"));
    printf("\nWORKER          ALIVE  HEARTBEAT  PARTITIONS\n");
    for (i = 0; i < json_array_size(ws); i++) {
        json_t *w = json_array_get(ws, i), *ps = json_object_get(w, "partitions");
        char parts[128] = "";
        size_t off = 0;
        for (size_t j = 0; j < json_array_size(ps) && off < sizeof(parts) - 8; j++)
            off += (size_t)snprintf(parts + off, sizeof(parts) - off, "%s%lld", j ? "," : "",
                                    (long long)json_integer_value(json_array_get(ps, j)));
        printf("%-15s %-6s %7lldms  %s%s%s\n", str(w, "id"),
               json_is_true(json_object_get(w, "alive")) ? "yes" : "no",
               num(w, "last_heartbeat_ms_ago"), parts,
               json_is_true(json_object_get(w, "alive")) ? "" : "  lost: ",
               json_is_true(json_object_get(w, "alive")) ? "" : str(w, "lost_reason"));
    }
    printf("\nPARTITION  OWNER           OFFSETS (checkpoint)\n");
    for (i = 0; i < json_array_size(as); i++) {
        json_t *a = json_array_get(as, i), *offs = json_object_get(a, "offsets");
        char *o = json_dumps(offs, JSON_COMPACT | JSON_SORT_KEYS);
        printf("%9lld  %-15s %s\n", num(a, "partition"), str(a, "owner"), o ? o : "{}");
        free(o);
    }
    printf("\nEPOCH        DURATION  RECORDS    BYTES       DATA  DELETES  TABLES\n");
    for (i = 0; i < json_array_size(cs) && i < 10; i++) {
        json_t *k = json_array_get(cs, i);
        printf("%-12lld %6lldms  %-10lld %-11lld %-5lld %-8lld %lld\n", num(k, "epoch"),
               num(k, "duration_ms"), num(k, "records"), num(k, "bytes"), num(k, "data_files"),
               num(k, "delete_files"), num(k, "tables"));
    }
}

/*
 * Sends method path ("/status", "/compact?table=...") to the coordinator's admin API:
 * --coordinator, or the leader's admin address from etcd. The answer goes into *b (the
 * caller frees it) and the URL into url; returns the HTTP status, or -1 when there was no
 * answer or no address (said on stderr). A 401 is explained here.
 */
static int admin_request(const ctl_config_t *cfg, const char *method, const char *path,
                         long timeout_ms, cdc_httpc_response_t *b, char *url, size_t url_size)
{
    char *admin = cfg->coordinator ? strdup(cfg->coordinator) : NULL;
    int64_t term = 0;
    int code;

    memset(b, 0, sizeof(*b));
    snprintf(url, url_size, "(no coordinator)");
    if (admin == NULL && (admin = leader_admin(cfg, &term)) == NULL)
        return -1;
    snprintf(url, url_size, "%s://%s%s", cdc_tls_options_scheme(&cfg->tls), admin, path);
    free(admin);
    code = http_request(method, url, cfg, timeout_ms, b);
    if (code == 401)
        fprintf(stderr,
                "cdcctl: %s %s answered HTTP 401: the coordinator requires a bearer "
                "token%s\nhint: give cdcctl the coordinator's --http-token (--http-token-file "
                "or CDC_HTTP_TOKEN_FILE)\n",
                method, url, cfg->http_token ? " and refused this one" : "");
    return code;
}

/* The leader's /status: parsed into *st (NULL with raw: the text is printed). Returns 0,
 * or 1 (said on stderr). */
static int fetch_status(const ctl_config_t *cfg, bool raw, json_t **st)
{
    char url[512];
    cdc_httpc_response_t b;
    int code = admin_request(cfg, "GET", "/status", (long)cfg->timeout_ms, &b, url, sizeof(url));
    int status = 1;

    *st = NULL;
    if (code != 200) {
        if (code > 0 && code != 401)
            fprintf(stderr, "cdcctl: GET %s answered HTTP %d\n", url, code);
    } else if (raw) {
        printf("%s\n", b.body);
        status = 0;
    } else if ((*st = json_loads(b.body, 0, NULL)) == NULL) {
        fprintf(stderr, "cdcctl: %s did not return JSON\n", url);
    } else {
        status = 0;
    }
    cdc_httpc_response_free(&b);
    return status;
}

static int cmd_status(const ctl_config_t *cfg)
{
    json_t *st;
    int status = fetch_status(cfg, cfg->json, &st);
    if (st != NULL) {
        print_status(st);
        json_decref(st);
    }
    return status;
}

/* bytes as a person reads them: 812 B, 14.2 KiB, 3.0 MiB, 1.2 GiB */
static void human_bytes(char *out, size_t size, long long bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, size, "%lld B", bytes);
    else
        snprintf(out, size, "%.1f %s", v, units[u]);
}

/* how long ago wall-clock ms at_ms was: "42s", "7m", "3h", "2d", or "never" (0) */
static void human_age(char *out, size_t size, long long at_ms)
{
    long long s = (long long)((cdc_clock_wall_ms() - at_ms) / 1000);
    if (at_ms <= 0)
        snprintf(out, size, "never");
    else if (s < 120)
        snprintf(out, size, "%llds ago", s < 0 ? 0 : s);
    else if (s < 7200)
        snprintf(out, size, "%lldm ago", s / 60);
    else if (s < 172800)
        snprintf(out, size, "%lldh ago", s / 3600);
    else
        snprintf(out, size, "%lldd ago", s / 86400);
}

/* One Iceberg table's row of `cdcctl tables` (h: a mirror or changelog of /status). */
static void print_table_health(json_t *h)
{
    char avg[32], rewritten[32], last[32];
    if (!json_is_object(h))
        return;
    human_bytes(avg, sizeof(avg), num(h, "avg_file_bytes"));
    human_bytes(rewritten, sizeof(rewritten), num(h, "bytes_rewritten"));
    human_age(last, sizeof(last), num(h, "last_compaction_ms"));
    printf("%-36s %10lld %10lld %10s %9lld %12lld  %-11s %4lld %11s\n", str(h, "table"),
           num(h, "data_files"), num(h, "delete_files"), avg, num(h, "snapshots"),
           num(h, "records") - num(h, "equality_deletes"), last, num(h, "compactions"), rewritten);
}

/* The job's table set of /status (table_set): each source topic and its state. */
static void print_table_set(json_t *set)
{
    printf("\n%-48s %-10s %-6s %s\n", "JOB TABLE (TOPIC)", "STATE", "SLOTS", "NOTE");
    for (size_t i = 0; i < json_array_size(set); i++) {
        json_t *t = json_array_get(set, i);
        printf("%-48s %-10s %2lld/12  %s\n", str(t, "topic"), str(t, "state"), num(t, "slots"),
               json_is_false(json_object_get(t, "topic_found")) ? "no such topic in Kafka (yet)"
                                                                : "");
    }
    if (json_array_size(set) == 0)
        printf("(the job has no table yet)\n");
}

/* The capture's view of its tables (--capture): each table's state (streaming,
 * snapshotting N%, removed, error) and its last incremental snapshot's progress. */
static void print_capture_tables(const ctl_config_t *cfg)
{
    char url[512];
    cdc_httpc_response_t b;
    json_t *st = NULL, *tables, *sns;
    snprintf(url, sizeof(url), "%s://%s/status", cdc_tls_options_scheme(&cfg->tls), cfg->capture);
    int code = http_request("GET", url, cfg, (long)cfg->timeout_ms, &b);
    if (code == 200)
        st = json_loads(b.body, 0, NULL);
    cdc_httpc_response_free(&b);
    if (st == NULL) {
        fprintf(stderr, "cdcctl: GET %s: %s\n", url,
                code > 0 ? "no capture status" : "no answer (--capture: the capture's --http)");
        return;
    }
    tables = json_object_get(st, "tables");
    printf("\n%-40s %-14s %s\n", "CAPTURED TABLE", "STATE", "SNAPSHOT");
    for (size_t i = 0; i < json_array_size(tables); i++) {
        json_t *t = json_array_get(tables, i), *sn = json_object_get(t, "snapshot");
        json_t *pct = json_object_get(sn, "percent");
        char state[32], snap[160] = "";
        snprintf(state, sizeof(state), "%s", str(t, "state")[0] ? str(t, "state") : "-");
        if (strcmp(state, "snapshotting") == 0 && json_is_number(pct))
            snprintf(state, sizeof(state), "snapshotting %.0f%%", json_number_value(pct));
        if (sn != NULL)
            snprintf(snap, sizeof(snap), "%s %s: %lld rows%s", str(sn, "id"),
                     str(sn, "source_snapshot"), num(sn, "rows"),
                     json_is_true(json_object_get(sn, "done")) ? ", done" : "");
        printf("%-40s %-14s %s\n", str(t, "table"), state, snap);
    }
    if (json_array_size(tables) == 0)
        printf("(the capture has no table yet)\n");
    else if ((sns = json_object_get(st, "snapshots")) != NULL && num(sns, "running") > 0) {
        printf("snapshots: %lld running, %lld done, %lld abandoned; %lld rows read",
               num(sns, "running"), num(sns, "done"), num(sns, "abandoned"), num(sns, "rows"));
        if (num(sns, "estimate") > 0)
            printf(" of about %lld (%.0f%%)", num(sns, "estimate"),
                   100.0 * (double)num(sns, "rows") / (double)num(sns, "estimate"));
        printf("\n");
    }
    json_decref(st);
}

/* `cdcctl tables`: the health of every Iceberg table the leader committed to, then the job's
 * table set. */
static int cmd_tables(const ctl_config_t *cfg)
{
    json_t *st, *ts;
    int status = fetch_status(cfg, false, &st);

    if (st == NULL)
        return status;
    ts = json_object_get(st, "tables");
    if (cfg->json) {
        char *out = json_dumps(ts ? ts : json_array(), JSON_INDENT(2));
        printf("%s\n", out ? out : "[]");
        free(out);
    } else {
        printf("%-36s %10s %10s %10s %9s %12s  %-11s %4s %11s\n", "TABLE", "DATA FILES", "DELETES",
               "AVG FILE", "SNAPSHOTS", "ROWS", "COMPACTED", "RUNS", "REWRITTEN");
        for (size_t i = 0; i < json_array_size(ts); i++) {
            print_table_health(json_object_get(json_array_get(ts, i), "mirror"));
            print_table_health(json_object_get(json_array_get(ts, i), "changelog"));
        }
        if (json_array_size(ts) == 0)
            printf("(no table committed by this leader yet)\n");
        print_table_set(json_object_get(st, "table_set"));
        if (cfg->capture != NULL && cfg->capture[0] != '\0')
            print_capture_tables(cfg);
    }
    json_decref(st);
    return status;
}

/* Prints a refused POST to the leader's admin API (the error, and the leader's address when
 * the coordinator asked does not lead); whether that hint was printed. */
static bool post_refused(const char *url, int code, json_t *r, const cdc_httpc_response_t *b)
{
    fprintf(stderr, "cdcctl: POST %s answered HTTP %d: %s\n", url, code,
            r != NULL ? str(r, "error") : (b->body ? b->body : ""));
    if (code == 503 && r != NULL && str(r, "leader")[0]) {
        fprintf(stderr, "hint: the leader's admin address is %s (--coordinator)\n",
                str(r, "leader"));
        return true;
    }
    return false;
}

/* The topic of a table named on the command line: <prefix>.<schema>.<table>, schema public
 * when none (as the worker's --tables); "" when the name cannot be one. */
static void table_topic(const ctl_config_t *cfg, const char *table, char *topic, size_t size)
{
    topic[0] = '\0';
    if (table[0] == '\0' || table[0] == '.' || strpbrk(table, "&?#%, \"") != NULL)
        return;
    snprintf(topic, size, "%s.%s%s", cfg->topic_prefix, strchr(table, '.') ? "" : "public.", table);
}

/* Prints a POST to the capture that it refused (its error), with the token's hint on 401. */
static void capture_refused(const char *url, int code, json_t *j, const cdc_httpc_response_t *b)
{
    const char *msg = json_string_value(json_object_get(j, "error"));
    fprintf(stderr, "cdcctl: POST %s answered HTTP %d: %s\n", url, code,
            msg ? msg : (b->body ? b->body : ""));
    if (code == 401)
        fprintf(stderr, "hint: give cdcctl the capture's --http-token (--http-token-file or "
                        "CDC_HTTP_TOKEN_FILE)\n");
}

/*
 * POST /tables?add= or ?remove= on the capture (--capture): the capture alters its
 * publication and reads it at once. Returns 0 when it answered 200 (and prints what it
 * did), 1 otherwise (and prints why).
 */
static int capture_tables(const ctl_config_t *cfg, bool add, const char *table)
{
    char url[600];
    cdc_httpc_response_t b;
    json_t *j;
    int code, status = 1;

    snprintf(url, sizeof(url), "%s://%s/tables?%s=%s", cdc_tls_options_scheme(&cfg->tls),
             cfg->capture, add ? "add" : "remove", table);
    code =
        http_request("POST", url, cfg, cfg->timeout_ms > 20000 ? (long)cfg->timeout_ms : 20000, &b);
    if (code < 0)
        return 1;
    j = b.body ? json_loads(b.body, 0, NULL) : NULL;
    if (code == 200 && j != NULL) {
        const char *state = json_string_value(json_object_get(j, "state"));
        const char *pub = json_string_value(json_object_get(j, "publication"));
        bool changed = json_is_true(json_object_get(j, "changed"));
        if (add)
            printf("%s: %s publication \"%s\"; the capture says: %s\n", table,
                   changed ? "added to" : "already in", pub ? pub : "?", state ? state : "?");
        else
            printf("%s: %s publication \"%s\"; the capture says: %s (its Iceberg tables stay)\n",
                   table, changed ? "dropped from" : "not in", pub ? pub : "?",
                   state ? state : "?");
        status = 0;
    } else {
        capture_refused(url, code, j, &b);
    }
    json_decref(j);
    cdc_httpc_response_free(&b);
    return status;
}

/* `cdcctl tables remove <schema>.<table> --capture host:port`. */
static int cmd_tables_remove(const ctl_config_t *cfg, const char *table)
{
    if (cfg->capture == NULL || cfg->capture[0] == '\0') {
        fprintf(stderr,
                "cdcctl: tables remove drops the table from the capture's publication and needs "
                "the capture's address\nhint: cdcctl tables remove %s --capture=127.0.0.1:9102 "
                "(the capture's --http), or ALTER PUBLICATION <publication> DROP TABLE %s\n",
                table, table);
        return 2;
    }
    return capture_tables(cfg, false, table);
}

/* `cdcctl tables add <schema>.<table>`: with --capture, POST /tables on the capture (the
 * table joins its publication); then POST /tables on the leader, which adds the table's
 * topic to the job's tables and gives it to every worker. */
static int cmd_tables_add(const ctl_config_t *cfg, const char *table)
{
    char topic[300], path[400], url[1024];
    cdc_httpc_response_t b;
    json_t *r = NULL;
    int code, status = 1;

    table_topic(cfg, table, topic, sizeof(topic));
    if (topic[0] == '\0') {
        fprintf(stderr,
                "cdcctl: tables add needs a table <schema>.<table>, not \"%s\"\nhint: "
                "cdcctl tables add public.orders\n",
                table);
        return 2;
    }
    if (cfg->capture != NULL && cfg->capture[0] != '\0' && capture_tables(cfg, true, table) != 0)
        return 1;
    snprintf(path, sizeof(path), "/tables?add=%s", topic);
    code = admin_request(cfg, "POST", path, (long)(cfg->timeout_ms + 10000), &b, url, sizeof(url));
    if (code > 0 && b.body != NULL)
        r = json_loads(b.body, 0, NULL);
    if (code == 200 && r != NULL) {
        if (json_is_true(json_object_get(r, "added")))
            printf("%s: added to the job's tables (topic %s); every worker consumes it from "
                   "now on\n",
                   table, topic);
        else
            printf("%s: already one of the job's tables (topic %s)\n", table, topic);
        if (cfg->capture == NULL || cfg->capture[0] == '\0')
            printf("hint: the capture captures it once it is in its publication: ALTER "
                   "PUBLICATION ... ADD TABLE %s, or this command with --capture\n",
                   table);
        status = 0;
    } else if (code > 0 && code != 401) {
        post_refused(url, code, r, &b);
    }
    json_decref(r);
    cdc_httpc_response_free(&b);
    return status;
}

/* The entry of table in a capture's /status tables, or NULL (borrowed from st). */
static json_t *capture_table(json_t *st, const char *table)
{
    json_t *tables = json_object_get(st, "tables");
    const char *dot = strchr(table, '.');
    char full[300];
    snprintf(full, sizeof(full), "%s%s", dot ? "" : "public.", table);
    for (size_t i = 0; i < json_array_size(tables); i++) {
        json_t *x = json_array_get(tables, i);
        const char *name = json_string_value(json_object_get(x, "table"));
        if (name != NULL && strcmp(name, full) == 0)
            return x;
    }
    return NULL;
}

/*
 * `cdcctl snapshot <schema>.<table> --capture host:port [--wait]`: POST /snapshot on the
 * capture (docs/capture.md, "Re-snapshot on demand"); with --wait, polls its /status every
 * second and prints the progress until the snapshot is done.
 */
static int cmd_snapshot(const ctl_config_t *cfg, const char *table)
{
    char url[512], id[64], last[128] = "";
    cdc_httpc_response_t b;
    json_t *j;
    int code;
    long post_timeout = cfg->timeout_ms > 20000 ? (long)cfg->timeout_ms : 20000;
    int64_t start_ms;

    if (cfg->capture == NULL || cfg->capture[0] == '\0') {
        fprintf(stderr,
                "cdcctl: snapshot needs the capture's address\nhint: cdcctl snapshot "
                "%s --capture=127.0.0.1:9102 (the capture's --http)\n",
                table);
        return 2;
    }
    snprintf(url, sizeof(url), "%s://%s/snapshot?table=%s", cdc_tls_options_scheme(&cfg->tls),
             cfg->capture, table);
    code = http_request("POST", url, cfg, post_timeout, &b);
    if (code < 0)
        return 1;
    j = b.body ? json_loads(b.body, 0, NULL) : NULL;
    if (code != 202) {
        capture_refused(url, code, j, &b);
        json_decref(j);
        cdc_httpc_response_free(&b);
        return 1;
    }
    snprintf(id, sizeof(id), "%s",
             json_string_value(json_object_get(j, "snapshot_id"))
                 ? json_string_value(json_object_get(j, "snapshot_id"))
                 : "");
    printf("snapshot %s of %s started\n", id, table);
    fflush(stdout);
    json_decref(j);
    cdc_httpc_response_free(&b);
    if (!cfg->wait)
        return 0;
    snprintf(url, sizeof(url), "%s://%s/status", cdc_tls_options_scheme(&cfg->tls), cfg->capture);
    start_ms = cdc_clock_mono_ms();
    for (;;) {
        json_t *st = NULL, *t, *sn;
        code = http_request("GET", url, cfg, (long)cfg->timeout_ms, &b);
        if (code == 200)
            st = json_loads(b.body, 0, NULL);
        cdc_httpc_response_free(&b);
        t = st ? capture_table(st, table) : NULL;
        sn = json_object_get(t, "snapshot");
        if (sn != NULL && strcmp(json_string_value(json_object_get(sn, "id")) ?: "", id) == 0) {
            char line[128];
            json_t *pct = json_object_get(sn, "percent");
            if (json_is_true(json_object_get(sn, "done"))) {
                printf("snapshot %s of %s done: %" JSON_INTEGER_FORMAT " rows\n", id, table,
                       json_integer_value(json_object_get(sn, "rows")));
                json_decref(st);
                return 0;
            }
            if (json_is_number(pct))
                snprintf(line, sizeof(line), "%" JSON_INTEGER_FORMAT " rows (%.0f%%)",
                         json_integer_value(json_object_get(sn, "rows")), json_number_value(pct));
            else
                snprintf(line, sizeof(line), "%" JSON_INTEGER_FORMAT " rows",
                         json_integer_value(json_object_get(sn, "rows")));
            if (strcmp(line, last) != 0) {
                printf("snapshot %s of %s: %s\n", id, table, line);
                fflush(stdout);
                snprintf(last, sizeof(last), "%s", line);
            }
        }
        json_decref(st);
        if (cdc_clock_mono_ms() - start_ms >= cfg->wait_ms) {
            fprintf(stderr, "cdcctl: snapshot %s of %s not done after --wait; it goes on\n", id,
                    table);
            return 1;
        }
        nanosleep(&(struct timespec){1, 0}, NULL);
    }
}

/* `cdcctl compact <schema>.<table>`: POST /compact on the leader, waits for it (--wait). */
static int cmd_compact(const ctl_config_t *cfg, const char *table)
{
    char path[600], url[1024], in[32], out[32];
    cdc_httpc_response_t b;
    json_t *r = NULL;
    int code, status = 1;

    if (table[0] == '\0' || strchr(table, '.') == NULL || strpbrk(table, "&?#% ") != NULL) {
        fprintf(stderr,
                "cdcctl: compact needs a table <schema>.<table>, not \"%s\"\nhint: "
                "cdcctl compact public.orders (cdcctl tables lists them)\n",
                table);
        return 2;
    }
    snprintf(path, sizeof(path), "/compact?table=%s&timeout=%" PRId64 "ms", table, cfg->wait_ms);
    code = admin_request(cfg, "POST", path, (long)(cfg->wait_ms + cfg->timeout_ms), &b, url,
                         sizeof(url));
    if (code > 0 && b.body != NULL)
        r = json_loads(b.body, 0, NULL);
    if (code == 200 && r != NULL) {
        human_bytes(in, sizeof(in), num(r, "bytes_read"));
        human_bytes(out, sizeof(out), num(r, "bytes_written"));
        printf("%s: %lld partitions rewritten (%lld dropped), %lld files removed, %lld added, "
               "%s read, %s written, %lld deleted rows purged\n",
               table, num(r, "partitions"), num(r, "dropped"), num(r, "files_removed"),
               num(r, "files_added"), in, out, num(r, "rows_deleted"));
        status = 0;
    } else if (code > 0 && code != 401) {
        if (!post_refused(url, code, r, &b) && code == 504)
            fprintf(stderr, "hint: the compaction goes on; cdcctl tables shows when it "
                            "committed (or give --wait more time)\n");
    }
    json_decref(r);
    cdc_httpc_response_free(&b);
    return status;
}

static int cmd_etcd(const ctl_config_t *cfg, const char *what, const char *arg)
{
    cdc_etcd_t *ec = NULL;
    cdc_error_t e;
    char key[256];
    int status = 1;

    if (open_etcd(cfg, &ec, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        return 1;
    }
    if (strcmp(what, "leader") == 0) {
        char *value = NULL;
        int64_t term = 0;
        cdc_cluster_key(key, sizeof(key), cfg->job, "leader");
        if (cdc_etcd_leader(ec, key, &value, &term, &e) == CDC_OK) {
            printf("%s (term %" PRId64 ")\n", value, term);
            status = 0;
        } else {
            fprintf(stderr, "cdcctl: %s\n", e.msg);
        }
        free(value);
    } else if (strcmp(what, "checkpoint") == 0) {
        cdc_etcd_kv_t kv;
        cdc_cluster_checkpoint_key(key, sizeof(key), cfg->job, (uint64_t)strtoull(arg, NULL, 10));
        memset(&kv, 0, sizeof(kv));
        if (cdc_etcd_get(ec, key, &kv, NULL, &e) == CDC_OK) {
            printf("%s\n", kv.value);
            cdc_etcd_kv_clear(&kv);
            status = 0;
        } else {
            fprintf(stderr, "cdcctl: %s\n", e.msg);
        }
    } else {
        cdc_etcd_kvs_t kvs;
        cdc_cluster_key(key, sizeof(key), cfg->job, "checkpoints/");
        memset(&kvs, 0, sizeof(kvs));
        if (cdc_etcd_range_prefix(ec, key, 0, &kvs, &e) == CDC_OK) {
            printf("EPOCH        TERM   RECORDS    BYTES       FILES  BARRIER->COMPLETE\n");
            for (size_t i = kvs.count; i > 0; i--) {
                json_t *r = json_loads(kvs.kvs[i - 1].value, 0, NULL);
                if (r == NULL)
                    continue;
                printf("%-12lld %-6lld %-10lld %-11lld %-6lld %lldms\n", num(r, "epoch"),
                       num(r, "term"), num(r, "records"), num(r, "bytes"),
                       num(r, "data_files") + num(r, "delete_files"),
                       num(r, "completed_ms") - num(r, "barrier_ms"));
                json_decref(r);
            }
            cdc_etcd_kvs_clear(&kvs);
            status = 0;
        } else {
            fprintf(stderr, "cdcctl: %s\n", e.msg);
        }
    }
    cdc_etcd_close(ec);
    return status;
}

int main(int argc, char **argv)
{
    ctl_config_t cfg;
    const char *cmd;
    char **args = calloc((size_t)argc + 2, sizeof(char *));
    const char *words[3] = {NULL, NULL, NULL};
    int nargs = 0, nwords = 0, status;
    char cmdbuf[512];
    bool wait = false;

    if (args == NULL)
        return 1;
    /* bare words are the subcommand and its argument: "status", "checkpoint 42" */
    args[nargs++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--wait") == 0 && (i + 1 == argc || argv[i + 1][0] == '-')) {
            /* a bare --wait: its default */
            args[nargs++] = "--wait=10m";
            wait = true;
            continue;
        }
        if (strncmp(argv[i], "--wait=", 7) == 0)
            wait = true;
        if (argv[i][0] != '-' && !cdc_config_takes_value(options, argv[i - 1])) {
            if (nwords < 3)
                words[nwords++] = argv[i];
            continue;
        }
        args[nargs++] = argv[i];
    }
    if (words[0] != NULL) {
        snprintf(cmdbuf, sizeof(cmdbuf), "--command=%s%s%s%s%s", words[0], words[1] ? ":" : "",
                 words[1] ? words[1] : "", words[2] ? ":" : "", words[2] ? words[2] : "");
        args[nargs++] = cmdbuf;
    }
    memset(&cfg, 0, sizeof(cfg));
    cdc_config_load(options, "cdcctl",
                    "Operator CLI of the CDC pipeline: cdcctl [options] status | tables | "
                    "tables add <schema>.<table> | tables remove <schema>.<table> | compact "
                    "<schema>.<table> | snapshot <schema>.<table> | "
                    "leader | checkpoints | checkpoint <epoch> | dlq list | dlq show | dlq replay.",
                    nargs, args, &cfg);
    cfg.wait = wait;
    cmd = cfg.command;
    if (strncmp(cmd, "dlq:", 4) == 0)
        status = cdcctl_dlq(&cfg, cmd + 4);
    else if (strcmp(cmd, "dlq") == 0) {
        fprintf(stderr, "cdcctl: dlq needs a command\nhint: dlq list, dlq show, dlq replay\n");
        status = 2;
    } else if (strcmp(cmd, "status") == 0)
        status = cmd_status(&cfg);
    else if (strcmp(cmd, "tables") == 0)
        status = cmd_tables(&cfg);
    else if (strncmp(cmd, "tables:add:", 11) == 0)
        status = cmd_tables_add(&cfg, cmd + 11);
    else if (strncmp(cmd, "tables:remove:", 14) == 0)
        status = cmd_tables_remove(&cfg, cmd + 14);
    else if (strncmp(cmd, "tables:", 7) == 0) {
        fprintf(stderr,
                "cdcctl: tables %s: unknown\nhint: cdcctl tables add public.orders, cdcctl "
                "tables remove public.orders\n",
                cmd + 7);
        status = 2;
    } else if (strncmp(cmd, "compact:", 8) == 0)
        status = cmd_compact(&cfg, cmd + 8);
    else if (strncmp(cmd, "snapshot:", 9) == 0)
        status = cmd_snapshot(&cfg, cmd + 9);
    else if (strcmp(cmd, "snapshot") == 0) {
        fprintf(stderr, "cdcctl: snapshot needs a table\nhint: cdcctl snapshot public.orders "
                        "--capture=127.0.0.1:9102 --wait\n");
        status = 2;
    } else if (strcmp(cmd, "compact") == 0) {
        fprintf(stderr, "cdcctl: compact needs a table\nhint: cdcctl compact public.orders "
                        "(cdcctl tables lists them)\n");
        status = 2;
    } else if (strcmp(cmd, "leader") == 0 || strcmp(cmd, "checkpoints") == 0)
        status = cmd_etcd(&cfg, cmd, "");
    else if (strncmp(cmd, "checkpoint:", 11) == 0)
        status = cmd_etcd(&cfg, "checkpoint", cmd + 11);
    else {
        fprintf(stderr,
                "cdcctl: unknown command \"%s\"\nhint: status, tables, tables add <table>, "
                "tables remove <table>, "
                "compact <table>, snapshot <table>, leader, "
                "checkpoints, checkpoint <epoch>, dlq list, dlq show, dlq replay\n",
                cmd);
        status = 2;
    }
    cdc_config_free(options, &cfg);
    free(args);
    return status;
}
