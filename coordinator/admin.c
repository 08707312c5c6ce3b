/*
 * Admin API of the coordinator: /status (JSON), /readyz, /healthz, POST /compact (a
 * compaction now, maintenance.h), POST /tables (adds a table to the job's table set,
 * job_tables.c), plus /metrics from common/http.c. The main loop builds the status
 * document (it owns the state) and publishes it under a mutex; HTTP threads only copy the published
 * text. A standby answers /status with the leader's (fetched from the leader's admin address), so
 * whichever coordinator a Service picks, /status describes the running job; /readyz is
 * 200 for the leader RUNNING and for a standby alike, so rollouts and disruption budgets
 * count both (docs/deployment.md, "Health and readiness"). /healthz fails when the loop
 * stopped turning or the job FAILED (common/health.h).
 *
 * /status fields: job, id, state (RUNNING|RECOVERING|FAILED|STANDBY|STARTING), leader
 * (this process: id, endpoint, admin, term), term, generation, recovery_reason,
 * restart {failures_recent, failures_total, max_failures, interval_ms}, workers [{id,
 * incarnation, alive, last_heartbeat_ms_ago, partitions, topics, follows_tables, refused,
 * lost_reason}], table_set [{topic, slots (how many slots' newest checkpoint carries an
 * offset of it), topic_found (with --kafka: whether the brokers know the topic, else
 * null), state (streaming: all 12 and the topic found; starting: not yet)}],
 * tables_unconsumed [{topic, offered_by (live workers offering it), outside_ms (how long it
 * has been outside the set), unconsumed (outside for --unconsumed-after: logged as an error
 * and counted in cdc_coordinator_tables_unconsumed)}] (unconsumed.h), security
 * {staged_file_rejections {table_name, table_unknown, path, missing, size: Acks refused for a
 * staged file, staged_check.h}, last_event (or null)}, assignment
 * [{partition, owner, offsets {topic: next offset}, high_watermarks {topic: end offset the
 * owner last reported}, stalled_ms {topic: how long the owner's progress watchdog has seen
 * it behind without progress; only stalled topics}, no_progress_ms {topic: how long the
 * coordinator's progress check has seen the checkpointed offset stay put with records
 * behind it; only flagged topics}, missing_topic (a topic the other slots carry that the
 * owner does not consume, or null), lag (records from offsets to the high watermarks,
 * null until an owner reported one)}], epochs {open, next, last_recorded,
 * last_committed, pending_commits, committing (a commit round in flight), last_group (epochs
 * in the last round that committed), grouped (epochs that shared an earlier one's
 * snapshots, ever)}, checkpoints [{epoch, duration_ms, bytes, records,
 * data_files, delete_files, tables, completed_at_ms}], last_commit_error, disk
 * {warehouse {full, full_since_ms, full_errors, last_full_error}} (common/diskfull.h), worker_auth
 * {required (--worker-secret set), refused (all reasons), refused_by_reason {no_proof,
 * wrong_proof, unchallenged}, challenging (connections given a challenge and not answered
 * yet), last_refused {worker, pipe, reason, ms_ago} or null}, coordinators [{id, role
 * (leader|standby), admin, term, since_ms, alive}] (presence.h: read from etcd every 2 s,
 * the leader first). For the
 * dashboard (dashboard.c) also workers[].health and .dlq, assignment[].state, lag_source
 * (kafka: the ends from the brokers, watermarks.h; acks: as the owners report them), dlq
 * {total, classes}, tables [{table, rows, changes, changes_per_s, fresh_p50_ms,
 * fresh_p99_ms, fresh_max_ms, mirror {...}, changelog {...}}] (history.h, table_stats.h;
 * mirror and changelog: epoch, committed_at_ms, records, equality_deletes, data_files,
 * delete_files, bytes, snapshots, avg_file_bytes, compactions, last_compaction_ms,
 * bytes_rewritten, files_rewritten).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/hash.h"
#include "common/http.h"
#include "common/httpc.h"
#include "common/log.h"
#include "coordinator/coordinator.h"

/* A forwarded /status waits this long for the leader, then serves our own. */
#define FORWARD_TIMEOUT_MS 2000
/* POST /compact waits this long for the compaction unless its timeout= says otherwise. */
#define COMPACT_TIMEOUT_MS (10 * 60 * 1000)
/* POST /tables waits this long for the loop to take the table. */
#define TABLES_TIMEOUT_MS 10000

/* Main thread: where a standby's /status comes from (the leader's admin address), or ""
 * when this process answers itself (it leads, nobody does, or the key names us). */
static void set_forward(cdc_coord_t *c, json_t *leader)
{
    const char *admin = json_string_value(json_object_get(leader, "admin"));
    const char *id = json_string_value(json_object_get(leader, "id"));

    if (admin == NULL || id == NULL || strcmp(id, c->cfg.id) == 0)
        admin = "";
    pthread_mutex_lock(&c->forward_lock);
    snprintf(c->forward_to, sizeof(c->forward_to), "%s", admin);
    pthread_mutex_unlock(&c->forward_lock);
}

/* /status "worker_auth": whether workers must prove the secret, and the refusals. */
static json_t *worker_auth_json(const cdc_admission_t *a, int64_t now)
{
    json_t *o = json_object(), *by = json_object(), *last = json_null();

    for (int i = 0; i < CDC_ADMISSION_REASONS; i++)
        json_object_set_new(by, cdc_admission_reason_name((cdc_admission_reason_t)i),
                            json_integer((json_int_t)a->refused[i]));
    if (a->last.at_ms > 0) {
        last = json_object();
        json_object_set_new(last, "worker", json_string(a->last.worker));
        json_object_set_new(last, "pipe", json_integer(a->last.pipe));
        json_object_set_new(last, "reason", json_string(cdc_admission_reason_name(a->last.reason)));
        json_object_set_new(last, "ms_ago", json_integer(now - a->last.at_ms));
    }
    json_object_set_new(o, "required", json_boolean(cdc_admission_required(a)));
    json_object_set_new(o, "refused", json_integer((json_int_t)cdc_admission_refused_total(a)));
    json_object_set_new(o, "refused_by_reason", by);
    json_object_set_new(o, "challenging", json_integer(a->npending));
    json_object_set_new(o, "last_refused", last);
    return o;
}

/* /status "coordinators": the job's coordinators from their records in etcd (presence.h),
 * the leader (who holds the leader key, leader_id) first. */
static json_t *coordinators_json(const cdc_presence_t *p, const char *leader_id)
{
    const cdc_presence_entry_t **list = calloc(p->n > 0 ? (size_t)p->n : 1, sizeof(*list));
    int n = list != NULL ? cdc_presence_ordered(p, leader_id, list, p->n) : 0;
    json_t *a = json_array();

    for (int i = 0; i < n; i++) {
        json_t *k = json_object();
        json_object_set_new(k, "id", json_string(list[i]->rec.id));
        json_object_set_new(k, "role", json_string(cdc_presence_role(list[i], leader_id)));
        json_object_set_new(k, "admin", json_string(list[i]->rec.admin));
        json_object_set_new(k, "term", json_integer(list[i]->rec.term));
        json_object_set_new(k, "since_ms", json_integer(list[i]->rec.since_ms));
        json_object_set_new(k, "alive", json_boolean(list[i]->alive));
        json_array_append_new(a, k);
    }
    free(list);
    return a;
}

/* A worker silent for longer than this (a few heartbeat intervals) shows as "silent". */
#define SILENT_MS 1500

/* A word for the state of slot p: what an operator looks at first. */
static const char *slot_state(cdc_coord_t *c, int p, int64_t now)
{
    const cdc_progress_slot_t *ps = &c->progress.slot[p];
    const cdc_member_t *m;

    if (c->state == CDC_JOB_STANDBY)
        return "standby";
    if (c->owner[p][0] == '\0')
        return c->state == CDC_JOB_RUNNING ? "unassigned" : "recovering";
    m = cdc_members_by_id(&c->members, c->owner[p]);
    if (m == NULL || !m->alive)
        return "owner lost";
    if (now - m->last_heartbeat_ms > SILENT_MS)
        return "owner silent";
    for (int j = 0; j < ps->n; j++)
        if (ps->t[j].no_progress)
            return "no progress";
    for (int j = 0; j < ps->n; j++)
        if (ps->t[j].stalled_ms > 0)
            return "stalled";
    if (ps->missing[0])
        return "missing topic";
    return c->state == CDC_JOB_RUNNING ? "ok" : "recovering";
}

static const char *worker_health(cdc_coord_t *c, const cdc_member_t *m, int64_t now)
{
    if (!m->alive)
        return "lost";
    if (now - m->last_heartbeat_ms > SILENT_MS)
        return "silent";
    for (int p = 0; p < CDC_PARTITIONS; p++)
        if (strcmp(c->owner[p], m->id) == 0 && strcmp(slot_state(c, p, now), "ok") != 0 &&
            strcmp(slot_state(c, p, now), "recovering") != 0)
            return "degraded";
    return "ok";
}

static json_t *member_dlq_json(const cdc_member_t *m)
{
    json_t *o = json_object();
    for (int i = 0; i < m->ndlq; i++)
        json_object_set_new(o, m->dlq[i].error_class, json_integer((json_int_t)m->dlq[i].records));
    return o;
}

/* A table set as a JSON array of its topics. */
static json_t *tableset_json(const cdc_tableset_t *s)
{
    json_t *a = json_array();
    for (int i = 0; i < s->n; i++)
        json_array_append_new(a, json_string(cdc_tableset_name(s, i)));
    return a;
}

/* The job's table set with each topic's state: streaming once every slot's newest
 * checkpoint carries its offset and (with --kafka) the brokers know the topic, starting
 * before (just added, or its topic is missing: topic_found false; the slots'
 * no_progress_ms say more). */
static json_t *table_set_json(cdc_coord_t *c)
{
    json_t *a = json_array();
    /* slots[i]: the slots whose checkpoint carries topic i, in one pass over the
     * checkpoint (thousands of tables); last[i]: the last slot counted */
    int *slots = calloc(c->tables.n > 0 ? (size_t)c->tables.n : 1, sizeof(*slots));
    int *last = calloc(c->tables.n > 0 ? (size_t)c->tables.n : 1, sizeof(*last));

    if (slots == NULL || last == NULL) {
        free(slots);
        free(last);
        return a;
    }
    for (int i = 0; i < c->tables.n; i++)
        last[i] = -1;
    for (int p = 0; c->base != NULL && p < CDC_PARTITIONS; p++)
        for (size_t j = 0; j < c->base->partitions[p].noffsets; j++) {
            int i = cdc_tableset_index(&c->tables, c->base->partitions[p].offsets[j].topic);
            if (i >= 0 && last[i] != p) {
                slots[i]++;
                last[i] = p;
            }
        }
    for (int i = 0; i < c->tables.n; i++) {
        const char *topic = cdc_tableset_name(&c->tables, i);
        json_t *t = json_object();
        bool found = c->watermarks == NULL || cdc_watermarks_end(c->watermarks, topic, 0) >= 0;
        json_object_set_new(t, "topic", json_string(topic));
        json_object_set_new(t, "slots", json_integer(slots[i]));
        json_object_set_new(t, "topic_found",
                            c->watermarks != NULL ? json_boolean(found) : json_null());
        json_object_set_new(
            t, "state",
            json_string(slots[i] == CDC_PARTITIONS && found ? "streaming" : "starting"));
        json_array_append_new(a, t);
    }
    free(slots);
    free(last);
    return a;
}

/* Table topics live workers offer outside the job's set (unconsumed.h). */
static json_t *unconsumed_json(const cdc_coord_t *c, int64_t now)
{
    json_t *a = json_array();
    for (size_t i = 0; i < c->unconsumed.n; i++) {
        const cdc_unconsumed_topic_t *u = &c->unconsumed.t[i];
        json_t *t = json_object();
        json_object_set_new(t, "topic", json_string(u->topic));
        json_object_set_new(t, "offered_by", json_integer(u->offered));
        json_object_set_new(t, "outside_ms", json_integer(now - u->since_ms));
        json_object_set_new(
            t, "unconsumed",
            json_boolean(cdc_unconsumed_late(&c->unconsumed, i, now, c->cfg.unconsumed_after_ms)));
        json_array_append_new(a, t);
    }
    return a;
}

/* Dead letters per class over the workers known (each since its process started). */
static json_t *dlq_json(cdc_coord_t *c)
{
    json_t *o = json_object(), *classes = json_object();
    json_int_t total = 0;
    for (int i = 0; i < c->members.n; i++) {
        const cdc_member_t *m = &c->members.m[i];
        for (int k = 0; k < m->ndlq; k++) {
            json_t *v = json_object_get(classes, m->dlq[k].error_class);
            json_int_t n = (json_int_t)m->dlq[k].records;
            json_object_set_new(classes, m->dlq[k].error_class,
                                json_integer(n + (v != NULL ? json_integer_value(v) : 0)));
            total += n;
        }
    }
    json_object_set_new(o, "total", json_integer(total));
    json_object_set_new(o, "classes", classes);
    return o;
}

/* The mean size of the live files of a table's current snapshot (0 without files). */
static int64_t avg_file_bytes(const cdc_table_stats_t *s)
{
    int64_t files = s->data_files + s->delete_files;
    return files > 0 ? s->files_bytes / files : 0;
}

/* One Iceberg table's health after its last commit by this process, and what compaction
 * did to it (maintenance.h) since this process leads. */
static json_t *table_health_json(const cdc_table_stats_t *s)
{
    static const char *const names[] = {"epoch",
                                        "committed_at_ms",
                                        "records",
                                        "equality_deletes",
                                        "data_files",
                                        "delete_files",
                                        "bytes",
                                        "snapshots",
                                        "avg_file_bytes",
                                        "compactions",
                                        "last_compaction_ms",
                                        "bytes_rewritten",
                                        "files_rewritten"};
    const int64_t values[] = {(int64_t)s->epoch,   s->committed_at_ms,    s->records,
                              s->equality_deletes, s->data_files,         s->delete_files,
                              s->files_bytes,      s->snapshots,          avg_file_bytes(s),
                              s->compactions,      s->last_compaction_ms, s->bytes_rewritten,
                              s->files_rewritten};
    json_t *o = json_object();
    json_object_set_new(o, "table", json_string(s->table));
    for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++)
        json_object_set_new(o, names[k], json_integer(values[k]));
    return o;
}

/* The Prometheus gauges and counters of one Iceberg table's health (docs/operations.md,
 * "Metrics"): refreshed whenever the status is published, so a compaction shows without
 * waiting for the table's next epoch commit. Main thread. */
static void table_metrics(cdc_coord_t *c, const cdc_table_stats_t *s)
{
    static const struct {
        const char *name, *help;
    } gauges[] =
        {
            {"cdc_coordinator_table_data_files",
             "Live data files of the table's current snapshot."},
            {"cdc_coordinator_table_delete_files",
             "Live delete files of the table's current snapshot."},
            {"cdc_coordinator_table_snapshots", "Snapshots the table's metadata keeps."},
            {"cdc_coordinator_table_rows", "Rows of the table: records less equality deletes."},
            {"cdc_coordinator_table_avg_file_bytes",
             "Mean size of the live data and delete files of the table's current snapshot."},
            {"cdc_coordinator_table_last_compaction_timestamp_seconds",
             "When a compaction of the table was last committed (unix time; 0 = not since this "
             "process leads)."},
        },
      counters[] = {
          {"cdc_coordinator_table_compactions_total",
           "Compactions committed to the table (one or more partition rewrites each)."},
          {"cdc_coordinator_table_rewritten_bytes_total",
           "Bytes of data and delete files the table's committed compactions read."},
          {"cdc_coordinator_table_rewritten_files_total",
           "Data and delete files the table's committed compactions removed."},
          {"cdc_coordinator_table_committed_bytes_total",
           "Bytes of data and delete files the table's epoch commits added (what compaction's "
           "written bytes compare with: write amplification)."},
      };
    const double gv[] = {(double)s->data_files,     (double)s->delete_files,
                         (double)s->snapshots,      (double)cdc_table_stats_rows(s),
                         (double)avg_file_bytes(s), (double)s->last_compaction_ms / 1000.0};
    const double cv[] = {(double)s->compactions, (double)s->bytes_rewritten,
                         (double)s->files_rewritten, (double)s->committed_bytes};
    const char *labels[] = {"table", s->table, NULL};

    for (size_t k = 0; k < sizeof(gv) / sizeof(gv[0]); k++)
        cdc_metrics_gauge_set(cdc_metrics_gauge(c->metrics, gauges[k].name, gauges[k].help, labels),
                              gv[k]);
    for (size_t k = 0; k < sizeof(cv) / sizeof(cv[0]); k++) {
        /* the stats hold totals: the counter takes what it has not counted yet */
        cdc_counter_t *ct =
            cdc_metrics_counter(c->metrics, counters[k].name, counters[k].help, labels);
        double seen = cdc_metrics_value(ct);
        if (cv[k] > seen)
            cdc_metrics_counter_add(ct, cv[k] - seen);
    }
}

/* The statistics of table in by_name (st's entries by their names), NULL when none. */
static const cdc_table_stats_t *stats_of(const cdc_strmap_t *by_name, const char *table)
{
    return cdc_strmap_get(by_name, table);
}

/* A source table's entry of "tables": its mirror's and changelog's health, when known. */
static json_t *source_table_json(const char *table, const cdc_strmap_t *by_name)
{
    json_t *o = json_object();
    char changelog[300];
    const cdc_table_stats_t *m = stats_of(by_name, table), *cl;

    snprintf(changelog, sizeof(changelog), "%s%s", table, CDC_CHANGELOG_SUFFIX);
    cl = stats_of(by_name, changelog);
    json_object_set_new(o, "table", json_string(table));
    if (m != NULL)
        json_object_set_new(o, "mirror", table_health_json(m));
    if (cl != NULL)
        json_object_set_new(o, "changelog", table_health_json(cl));
    return o;
}

/* Per source table: freshness, throughput and rows (history.h), and the health of its
 * mirror and changelog (table_stats.h); sets every table's metrics on the way. Every
 * table the committer committed to is listed, however many: one the history has no
 * series of yet (a table this leader has not committed to) comes last, with its health
 * and rows and no freshness. */
static json_t *tables_json(cdc_coord_t *c)
{
    json_t *a = json_array();
    cdc_history_table_t *ht = NULL;
    cdc_table_stats_t *st = NULL;
    size_t nh = c->hist ? cdc_history_tables(c->hist, &ht) : 0;
    size_t ns = 0, sl = strlen(CDC_CHANGELOG_SUFFIX);
    cdc_strmap_t by_name = {0}, listed = {0}; /* keys borrowed from st and ht */
    bool oom = false;

    if (c->committer != NULL && cdc_committer_table_stats(c->committer, &st, &ns) != CDC_OK)
        oom = true;
    for (size_t k = 0; k < ns; k++) {
        table_metrics(c, &st[k]);
        if (cdc_strmap_put(&by_name, st[k].table, &st[k]) != CDC_OK)
            oom = true;
    }
    for (size_t i = 0; i < nh; i++) {
        json_t *o = source_table_json(ht[i].table, &by_name);
        if (cdc_strmap_put(&listed, ht[i].table, &ht[i]) != CDC_OK)
            oom = true;
        json_object_set_new(o, "rows", ht[i].rows >= 0 ? json_integer(ht[i].rows) : json_null());
        json_object_set_new(o, "changes", json_integer(ht[i].changes));
        json_object_set_new(o, "changes_per_s", json_real(ht[i].changes_per_s));
        json_object_set_new(o, "fresh_p50_ms",
                            ht[i].fresh_p50_ms >= 0 ? json_integer(ht[i].fresh_p50_ms)
                                                    : json_null());
        json_object_set_new(o, "fresh_p99_ms",
                            ht[i].fresh_p99_ms >= 0 ? json_integer(ht[i].fresh_p99_ms)
                                                    : json_null());
        json_object_set_new(o, "fresh_max_ms",
                            ht[i].fresh_max_ms >= 0 ? json_integer(ht[i].fresh_max_ms)
                                                    : json_null());
        json_array_append_new(a, o);
    }
    /* the tables the history does not keep: each source table once, listed by its mirror
     * (or by its changelog when it has no mirror yet) */
    for (size_t k = 0; k < ns && !oom; k++) {
        char source[256];
        size_t len = strlen(st[k].table);
        bool is_changelog = len > sl && strcmp(st[k].table + len - sl, CDC_CHANGELOG_SUFFIX) == 0;
        snprintf(source, sizeof(source), "%.*s", (int)(is_changelog ? len - sl : len), st[k].table);
        if (cdc_strmap_get(&listed, source) != NULL ||
            (is_changelog && stats_of(&by_name, source) != NULL))
            continue;
        json_t *o = source_table_json(source, &by_name);
        json_object_set_new(
            o, "rows", is_changelog ? json_null() : json_integer(cdc_table_stats_rows(&st[k])));
        json_object_set_new(o, "changes", json_null());
        json_object_set_new(o, "changes_per_s", json_null());
        json_object_set_new(o, "fresh_p50_ms", json_null());
        json_object_set_new(o, "fresh_p99_ms", json_null());
        json_object_set_new(o, "fresh_max_ms", json_null());
        json_array_append_new(a, o);
    }
    if (oom)
        cdc_log_error("status: out of memory for the statistics of the tables");
    cdc_strmap_free(&by_name);
    cdc_strmap_free(&listed);
    free(ht);
    free(st);
    return a;
}

char *cdc_coord_status_json(cdc_coord_t *c)
{
    json_t *o = json_object(), *ws = json_array(), *as = json_array(), *cs = json_array();
    json_t *leader = json_object(), *ep = json_object(), *rs = json_object();
    int64_t now = cdc_clock_mono_ms();
    char *out;

    json_object_set_new(o, "job", json_string(c->cfg.job));
    json_object_set_new(o, "id", json_string(c->cfg.id));
    json_object_set_new(o, "state", json_string(cdc_job_state_name(c->state)));
    json_object_set_new(o, "is_leader", json_boolean(c->state != CDC_JOB_STANDBY));
    json_object_set_new(o, "term", json_integer((json_int_t)c->term));
    json_object_set_new(o, "generation", json_integer((json_int_t)c->generation));
    json_object_set_new(o, "recovery_reason", json_string(c->recovery_reason));
    if (c->state != CDC_JOB_STANDBY) {
        json_object_set_new(leader, "id", json_string(c->cfg.id));
        json_object_set_new(leader, "endpoint", json_string(c->endpoint));
        json_object_set_new(leader, "admin", json_string(c->admin));
        json_object_set_new(leader, "term", json_integer((json_int_t)c->term));
    } else {
        char *value = NULL;
        int64_t term = 0;
        /* a standby shows who leads; a short read, the loop tolerates it */
        cdc_error_t e;
        if (cdc_etcd_leader(c->etcd, c->leader.key, &value, &term, &e) == CDC_OK) {
            json_t *v = json_loads(value, 0, NULL);
            if (v != NULL) {
                json_object_set_new(v, "term", json_integer(term));
                json_decref(leader);
                leader = v;
            }
            free(value);
        }
    }
    set_forward(c, c->state == CDC_JOB_STANDBY ? leader : NULL);
    json_object_set_new(
        o, "coordinators",
        coordinators_json(&c->presence, json_string_value(json_object_get(leader, "id"))));
    json_object_set_new(o, "leader", leader);

    json_object_set_new(rs, "failures_recent", json_integer(cdc_restart_recent(&c->restart, now)));
    json_object_set_new(rs, "failures_total", json_integer(c->restart.total));
    json_object_set_new(rs, "max_failures", json_integer(c->cfg.restart_max_failures));
    json_object_set_new(rs, "interval_ms", json_integer(c->cfg.restart_interval_ms));
    json_object_set_new(rs, "delay_ms", json_integer(c->cfg.restart_delay_ms));
    json_object_set_new(o, "restart", rs);

    for (int i = 0; i < c->members.n; i++) {
        const cdc_member_t *m = &c->members.m[i];
        json_t *w = json_object(), *ps = json_array();
        for (int p = 0; p < CDC_PARTITIONS; p++)
            if (strcmp(c->owner[p], m->id) == 0 && m->alive)
                json_array_append_new(ps, json_integer(p));
        json_object_set_new(w, "id", json_string(m->id));
        json_object_set_new(w, "incarnation", json_integer((json_int_t)m->incarnation));
        json_object_set_new(w, "alive", json_boolean(m->alive));
        json_object_set_new(w, "last_heartbeat_ms_ago", json_integer(now - m->last_heartbeat_ms));
        json_object_set_new(w, "admin", json_string(m->admin));
        json_object_set_new(w, "partitions", ps);
        json_object_set_new(w, "health", json_string(worker_health(c, m, now)));
        json_object_set_new(w, "dlq", member_dlq_json(m));
        json_object_set_new(w, "topics", m->topics_known ? tableset_json(&m->topics) : json_null());
        json_object_set_new(w, "follows_tables", json_boolean(m->follows));
        if (m->alive && m->verdict != CDC_TABLESET_FITS) {
            json_t *rf = json_object();
            json_object_set_new(rf, "reason", json_string(cdc_tableset_verdict_name(m->verdict)));
            json_object_set_new(rf, "message", json_string(m->refused));
            json_object_set_new(w, "refused", rf);
        }
        if (!m->alive)
            json_object_set_new(w, "lost_reason", json_string(m->lost_reason));
        json_array_append_new(ws, w);
    }
    json_object_set_new(o, "workers", ws);
    json_object_set_new(o, "table_set", table_set_json(c));
    json_object_set_new(o, "tables_unconsumed", unconsumed_json(c, now));
    {
        json_t *sec = json_object(), *rej = json_object();
        for (int r = CDC_STAGED_OK + 1; r < CDC_STAGED_REASONS; r++)
            json_object_set_new(rej, cdc_staged_reason_name((cdc_staged_reason_t)r),
                                json_integer(c->security_rejections[r]));
        json_object_set_new(sec, "staged_file_rejections", rej);
        json_object_set_new(sec, "last_event",
                            c->last_security_event[0] ? json_string(c->last_security_event)
                                                      : json_null());
        json_object_set_new(o, "security", sec);
    }

    for (int p = 0; p < CDC_PARTITIONS; p++) {
        json_t *a = json_object(), *offs = json_object(), *highs = json_object();
        const cdc_progress_slot_t *ps = &c->progress.slot[p];
        json_t *stalled = json_object(), *still = json_object();
        int64_t lag;
        if (c->base != NULL)
            for (size_t j = 0; j < c->base->partitions[p].noffsets; j++)
                json_object_set_new(offs, c->base->partitions[p].offsets[j].topic,
                                    json_integer(c->base->partitions[p].offsets[j].next_offset));
        for (int j = 0; j < ps->n; j++) {
            const cdc_progress_topic_t *h = &ps->t[j];
            if (h->stalled_ms > 0)
                json_object_set_new(stalled, h->topic, json_integer(h->stalled_ms));
            if (h->no_progress)
                json_object_set_new(still, h->topic, json_integer(now - h->since_ms));
        }
        lag = cdc_coord_lag(c, p, highs);
        json_object_set_new(a, "stalled_ms", stalled);
        json_object_set_new(a, "no_progress_ms", still);
        json_object_set_new(a, "missing_topic",
                            ps->missing[0] ? json_string(ps->missing) : json_null());
        json_object_set_new(a, "partition", json_integer(p));
        json_object_set_new(a, "owner", json_string(c->owner[p]));
        json_object_set_new(a, "state", json_string(slot_state(c, p, now)));
        json_object_set_new(a, "offsets", offs);
        json_object_set_new(a, "high_watermarks", highs);
        json_object_set_new(a, "lag", lag >= 0 ? json_integer(lag) : json_null());
        json_array_append_new(as, a);
    }
    json_object_set_new(o, "assignment", as);
    json_object_set_new(o, "lag_source", json_string(c->watermarks ? "kafka" : "acks"));
    json_object_set_new(o, "dlq", dlq_json(c));
    json_object_set_new(o, "tables", tables_json(c));

    json_object_set_new(ep, "open", json_integer(c->epochs.nopen));
    json_object_set_new(ep, "next", json_integer((json_int_t)c->epochs.next_epoch));
    json_object_set_new(ep, "last_recorded", json_integer((json_int_t)c->last_recorded));
    json_object_set_new(ep, "last_committed", json_integer((json_int_t)c->last_committed));
    json_object_set_new(ep, "pending_commits", json_integer(c->nqueue));
    {
        int last_group = 0;
        uint64_t grouped = cdc_job_commit_groups(c, &last_group);
        json_object_set_new(ep, "committing", json_boolean(cdc_job_commit_running(c)));
        json_object_set_new(ep, "last_group", json_integer(last_group));
        json_object_set_new(ep, "grouped", json_integer((json_int_t)grouped));
    }
    json_object_set_new(o, "epochs", ep);

    for (int i = c->nhistory - 1; i >= 0; i--) {
        const cdc_ckpt_summary_t *h = &c->history[i];
        json_t *k = json_object();
        json_object_set_new(k, "epoch", json_integer((json_int_t)h->epoch));
        json_object_set_new(k, "duration_ms", json_integer(h->duration_ms));
        json_object_set_new(k, "bytes", json_integer(h->bytes));
        json_object_set_new(k, "records", json_integer(h->records));
        json_object_set_new(k, "data_files", json_integer((json_int_t)h->data_files));
        json_object_set_new(k, "delete_files", json_integer((json_int_t)h->delete_files));
        json_object_set_new(k, "tables", json_integer(h->tables));
        json_object_set_new(k, "completed_at_ms", json_integer(h->completed_wall_ms));
        json_array_append_new(cs, k);
    }
    json_object_set_new(o, "checkpoints", cs);
    json_object_set_new(o, "last_commit_error", json_string(c->last_commit_error));
    {
        cdc_diskfull_t *disks[] = {&c->warehouse_disk};
        char *d = cdc_diskfull_status_json(disks, 1);
        json_t *dj = d != NULL ? json_loads(d, 0, NULL) : NULL;
        free(d);
        json_object_set_new(o, "disk", dj != NULL ? dj : json_null());
    }
    json_object_set_new(o, "worker_auth", worker_auth_json(&c->admission, now));
    json_object_set_new(o, "insecure", json_boolean(c->cfg.insecure));
    if (c->committer != NULL) {
        cdc_schema_change_t ch[CDC_SCHEMA_CHANGES_KEPT];
        size_t n = cdc_committer_schema_changes(c->committer, ch, CDC_SCHEMA_CHANGES_KEPT);
        json_t *sc = json_array();
        for (size_t i = n; i > 0; i--) { /* newest first, as "checkpoints" */
            json_t *k = json_object();
            json_object_set_new(k, "table", json_string(ch[i - 1].table));
            json_object_set_new(k, "source_version", json_integer(ch[i - 1].source_version));
            json_object_set_new(k, "schema_id", json_integer(ch[i - 1].schema_id));
            json_object_set_new(k, "at_ms", json_integer(ch[i - 1].at_ms));
            json_object_set_new(k, "versioned", json_boolean(ch[i - 1].versioned));
            json_object_set_new(k, "changes", json_string(ch[i - 1].summary));
            json_array_append_new(sc, k);
        }
        json_object_set_new(o, "schema_changes", sc);
        /* declared layouts (--partition-by, --sort-by) and whether they applied */
        cdc_table_layout_t *ls = NULL;
        size_t nl = 0;
        if (cdc_committer_layouts(c->committer, &ls, &nl) != CDC_OK)
            cdc_log_error("status: out of memory for the layouts of the tables");
        json_t *la = json_array();
        for (size_t i = 0; i < nl; i++) {
            json_t *k;
            if (ls[i].partition_by == NULL && ls[i].sort_by == NULL && ls[i].error[0] == '\0')
                continue;
            k = json_object();
            json_object_set_new(k, "table", json_string(ls[i].table));
            json_object_set_new(k, "partition_by",
                                json_string(ls[i].partition_by ? ls[i].partition_by : ""));
            json_object_set_new(k, "sort_by", json_string(ls[i].sort_by ? ls[i].sort_by : ""));
            json_object_set_new(k, "spec_id", json_integer(ls[i].spec_id));
            json_object_set_new(k, "sort_order_id", json_integer(ls[i].order_id));
            json_object_set_new(k, "error", json_string(ls[i].error));
            json_array_append_new(la, k);
        }
        json_object_set_new(o, "layouts", la);
        free(ls);
    }
    out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return out;
}

void cdc_admin_publish(cdc_coord_t *c)
{
    char *js = cdc_coord_status_json(c);

    if (js == NULL)
        return;
    cdc_http_doc_set(&c->status, js);
}

/* Fills resp with the JSON document o (taken) and status. */
static void respond_json(cdc_http_response_t *resp, int status, json_t *o)
{
    resp->status = status;
    resp->body = json_dumps(o, JSON_COMPACT);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
    if (resp->body == NULL)
        resp->status = 500;
    snprintf(resp->content_type, sizeof(resp->content_type), "application/json");
    json_decref(o);
}

/* HTTP thread: the leader's /status (asked with local=1, so it never forwards again) into
 * resp, with the caller's authorization: the caller passed this server's token, which the
 * coordinators of a job share (--http-token-file). False when the leader did not answer
 * 200 in time, with why it did not. */
static bool forward(cdc_coord_t *c, const char *admin, cdc_http_response_t *resp, char *why,
                    size_t size)
{
    char url[320], auth[600];
    const char *headers[] = {auth, NULL};
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_request_t req = {
        .url = url, .timeout_ms = FORWARD_TIMEOUT_MS, .connect_timeout_ms = FORWARD_TIMEOUT_MS / 4};
    cdc_httpc_response_t r;
    cdc_err_t rc;
    bool ok;

    if (h == NULL) {
        snprintf(why, size, "out of memory");
        return false;
    }
    snprintf(url, sizeof(url), "%s://%s/status?local=1", cdc_tls_options_scheme(&c->cfg.tls),
             admin);
    if (cdc_tls_options_http(&c->cfg.tls)) { /* the leader's certificate, and ours for mutual */
        req.ca_file = c->cfg.tls.ca_file;
        req.cert_file = c->cfg.tls.cert_file;
        req.key_file = c->cfg.tls.key_file;
        req.tls_server_name = c->cfg.tls.server_name;
    }
    if (cdc_http_auth_header(c->cfg.http_token, auth, sizeof(auth)))
        req.headers = headers;
    memset(&r, 0, sizeof(r));
    rc = cdc_httpc_perform(h, &req, &r);
    ok = rc == CDC_OK && r.status == 200 && r.body != NULL;
    if (rc != CDC_OK)
        snprintf(why, size, "the leader at %s did not answer within %d ms", admin,
                 FORWARD_TIMEOUT_MS);
    else if (!ok)
        snprintf(why, size, "the leader at %s answered HTTP %ld%s", admin, (long)r.status,
                 r.status == 401 ? " (its --http-token-file differs from this coordinator's)" : "");
    if (ok) {
        resp->body = r.body; /* taken: malloc'ed, as the server wants it */
        resp->body_len = r.len;
        r.body = NULL;
        snprintf(resp->content_type, sizeof(resp->content_type), "application/json");
    }
    cdc_httpc_response_free(&r);
    cdc_httpc_close(h);
    return ok;
}

/* HTTP thread: /status; a standby forwards unless asked for its own (?local=1). */
static void status(void *arg, const char *path, const char *query, cdc_http_response_t *resp)
{
    cdc_coord_t *c = arg;
    char to[sizeof(c->forward_to)];

    (void)path;
    pthread_mutex_lock(&c->forward_lock);
    snprintf(to, sizeof(to), "%s", c->forward_to);
    pthread_mutex_unlock(&c->forward_lock);
    char why[400] = "";
    if (to[0] != '\0' && strstr(query, "local=1") == NULL) {
        if (forward(c, to, resp, why, sizeof(why)))
            return;
        cdc_log_warn("/status: could not forward to the leader: %s; serving this standby's own",
                     why);
    }
    cdc_http_doc_respond(&c->status, resp);
    if (why[0] != '\0' && resp->body != NULL) {
        /* never silently: the standby's own document says why it is not the leader's */
        json_t *o = json_loadb(resp->body, resp->body_len, 0, NULL);
        if (json_is_object(o)) {
            json_object_set_new(o, "forward_error", json_string(why));
            free(resp->body);
            resp->body = NULL;
            respond_json(resp, 200, o);
        } else {
            json_decref(o);
        }
    }
}

/* HTTP thread: ready = leader RUNNING, or a standby (which forwards /status). */
static bool ready(void *arg, char *reason, size_t size)
{
    cdc_coord_t *c = arg;
    cdc_job_state_t s = (cdc_job_state_t)atomic_load(&c->state_seen);

    if (s == CDC_JOB_RUNNING || s == CDC_JOB_STANDBY)
        return true;
    snprintf(reason, size, "job state %s", cdc_job_state_name(s));
    return false;
}

/* The HTTP status of a failed compaction: what the caller can do about it. */
/* Answers a failed POST /<what>: the error, the leader's admin address when this
 * coordinator does not lead (so that the client can go there), logged. Takes o. */
static void post_failed(cdc_coord_t *c, cdc_http_response_t *resp, json_t *o, const char *what,
                        const char *query, cdc_err_t rc, const cdc_error_t *e, int status)
{
    char to[sizeof(c->forward_to)];
    pthread_mutex_lock(&c->forward_lock);
    snprintf(to, sizeof(to), "%s", c->forward_to);
    pthread_mutex_unlock(&c->forward_lock);
    json_object_set_new(o, "error", json_string(e->msg));
    if (rc == CDC_ERR_UNAVAILABLE && to[0] != '\0')
        json_object_set_new(o, "leader", json_string(to));
    cdc_log_warn("POST /%s?%s: %s", what, query, e->msg);
    respond_json(resp, status, o);
}

static int compact_status(cdc_err_t rc)
{
    switch (rc) {
    case CDC_ERR_INVALID:
        return 400;
    case CDC_ERR_NOT_FOUND:
        return 404;
    case CDC_ERR_TIMEOUT:
        return 504;
    case CDC_ERR_UNAVAILABLE: /* a standby, or stepping down */
    case CDC_ERR_CLOSED:
    case CDC_ERR_FENCED:
        return 503;
    default:
        return 500;
    }
}

/*
 * HTTP thread (a POST's own): POST /compact?table=<ns>.<table>[&timeout=<duration>]
 * compacts the table (and its changelog) now and waits for it (maintenance.h), 10 min
 * unless timeout says otherwise. 200 {table, partitions, dropped, files_removed,
 * files_added, bytes_read, bytes_written, rows_deleted}; otherwise {table, error} with 400
 * (no table, bad timeout), 404 (a table the job has not committed to), 503 (this
 * coordinator does not lead: "leader" names the admin address of the one that does), 504
 * (still running when the timeout passed: it goes on), 500.
 */
static void compact(void *arg, const char *path, const char *query, cdc_http_response_t *resp)
{
    cdc_coord_t *c = arg;
    char table[256], timeout[64];
    int64_t timeout_ms = COMPACT_TIMEOUT_MS;
    cdc_compact_result_t res;
    cdc_error_t e;
    cdc_err_t rc;
    json_t *o = json_object();
    cdc_job_state_t js = (cdc_job_state_t)atomic_load(&c->state_seen);

    (void)path;
    memset(&res, 0, sizeof(res));
    if (!cdc_http_query_param(query, "table", table, sizeof(table)) || table[0] == '\0') {
        table[0] = '\0';
        rc = cdc_error_set(&e, CDC_ERR_INVALID,
                           "POST /compact needs the table: /compact?table=<schema>.<table>");
    } else if (cdc_http_query_param(query, "timeout", timeout, sizeof(timeout)) &&
               (!cdc_parse_duration_ms(timeout, &timeout_ms) || timeout_ms <= 0)) {
        rc = cdc_error_set(&e, CDC_ERR_INVALID,
                           "invalid timeout \"%s\" of POST /compact: a duration such as 90s",
                           timeout);
    } else if (js == CDC_JOB_STANDBY || js == CDC_JOB_STARTING) {
        /* (the maintenance is set up before any other state is published) */
        rc = cdc_error_set(&e, CDC_ERR_UNAVAILABLE, "coordinator \"%s\" does not lead the job (%s)",
                           c->cfg.id, cdc_job_state_name(js));
    } else {
        rc = cdc_maint_compact_now(c->maint, table, timeout_ms, &res, &e);
    }
    json_object_set_new(o, "table", json_string(table));
    if (rc != CDC_OK) {
        post_failed(c, resp, o, "compact", query, rc, &e, compact_status(rc));
        return;
    }
    json_object_set_new(o, "partitions", json_integer(res.partitions));
    json_object_set_new(o, "dropped", json_integer(res.dropped));
    json_object_set_new(o, "files_removed", json_integer(res.files_removed));
    json_object_set_new(o, "files_added", json_integer(res.files_added));
    json_object_set_new(o, "bytes_read", json_integer(res.bytes_read));
    json_object_set_new(o, "bytes_written", json_integer(res.bytes_written));
    json_object_set_new(o, "rows_deleted", json_integer(res.rows_deleted));
    cdc_log_info("POST /compact: \"%s\" compacted: %d partitions rewritten (%d dropped), %" PRId64
                 " files removed, %" PRId64 " added",
                 table, res.partitions, res.dropped, res.files_removed, res.files_added);
    respond_json(resp, 200, o);
}

/* The HTTP status of a failed POST /tables. */
static int tables_status(cdc_err_t rc)
{
    return rc == CDC_ERR_INVALID       ? 400
           : rc == CDC_ERR_UNAVAILABLE ? 503
           : rc == CDC_ERR_TIMEOUT     ? 504
                                       : 500;
}

/* Hands topic to the loop and waits up to TABLES_TIMEOUT_MS for it (HTTP thread). */
static cdc_err_t ask_loop(cdc_coord_t *c, const char *topic, bool *added, cdc_error_t *e)
{
    cdc_table_request_t *r = NULL;
    struct timespec until;
    cdc_err_t rc;

    until = cdc_clock_deadline(TABLES_TIMEOUT_MS);
    pthread_mutex_lock(&c->tables_lock);
    for (int i = 0; i < CDC_TABLE_REQUESTS_MAX && r == NULL; i++)
        if (c->table_requests[i].state == CDC_TABLE_REQUEST_FREE)
            r = &c->table_requests[i];
    if (r == NULL) {
        pthread_mutex_unlock(&c->tables_lock);
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "too many POST /tables at once: try again");
    }
    snprintf(r->topic, sizeof(r->topic), "%s", topic);
    r->abandoned = false;
    r->state = CDC_TABLE_REQUEST_ASKED;
    atomic_fetch_add(&c->table_requests_asked, 1);
    while (r->state != CDC_TABLE_REQUEST_DONE)
        if (pthread_cond_timedwait(&c->tables_cond, &c->tables_lock, &until) != 0)
            break;
    if (r->state != CDC_TABLE_REQUEST_DONE) {
        /* the loop takes it later all the same, and frees it then */
        r->abandoned = true;
        pthread_mutex_unlock(&c->tables_lock);
        return cdc_error_set(e, CDC_ERR_TIMEOUT,
                             "the coordinator's loop did not take the table within %d s: it may "
                             "still add it (cdcctl tables shows the job's tables)",
                             TABLES_TIMEOUT_MS / 1000);
    }
    *added = r->added;
    rc = r->rc;
    if (rc != CDC_OK)
        cdc_error_set(e, rc, "%s", r->msg);
    r->state = CDC_TABLE_REQUEST_FREE;
    pthread_mutex_unlock(&c->tables_lock);
    return rc;
}

/*
 * HTTP thread (a POST's own): POST /tables?add=<topic> adds the source topic of a table to
 * the job's table set (docs/protocol.md, "The job's table set"); the loop records it in etcd
 * and gives it to every worker with a new assignment. 200 {topic, added (false: it was in
 * the set already)}; otherwise {topic, error} with 400 (no topic, or one that does not
 * fit), 503 (not the leader: "leader" names the one that is), 504 (the loop did not answer).
 */
static void tables(void *arg, const char *path, const char *query, cdc_http_response_t *resp)
{
    cdc_coord_t *c = arg;
    char topic[256];
    bool added = false;
    cdc_error_t e;
    cdc_err_t rc;
    json_t *o = json_object();
    cdc_job_state_t js = (cdc_job_state_t)atomic_load(&c->state_seen);

    (void)path;
    if (!cdc_http_query_param(query, "add", topic, sizeof(topic)) || topic[0] == '\0' ||
        strpbrk(topic, " ,\"") != NULL) {
        topic[0] = '\0';
        rc = cdc_error_set(&e, CDC_ERR_INVALID,
                           "POST /tables needs the topic of the table to add: "
                           "/tables?add=<prefix>.<schema>.<table>");
    } else if (js == CDC_JOB_STANDBY || js == CDC_JOB_STARTING) {
        rc = cdc_error_set(&e, CDC_ERR_UNAVAILABLE, "coordinator \"%s\" does not lead the job (%s)",
                           c->cfg.id, cdc_job_state_name(js));
    } else {
        rc = ask_loop(c, topic, &added, &e);
    }
    json_object_set_new(o, "topic", json_string(topic));
    if (rc != CDC_OK) {
        post_failed(c, resp, o, "tables", query, rc, &e, tables_status(rc));
        return;
    }
    json_object_set_new(o, "added", json_boolean(added));
    respond_json(resp, 200, o);
}

cdc_err_t cdc_admin_register(cdc_coord_t *c, cdc_error_t *e)
{
    cdc_err_t rc;
    cdc_http_server_set_ready(c->http, ready, c);
    cdc_http_server_set_health(c->http, cdc_health_check, &c->health);
    if ((rc = cdc_http_server_add(c->http, "/status", status, c, e)) != CDC_OK)
        return rc;
    if ((rc = cdc_http_server_add_post(c->http, "/tables", tables, c, e)) != CDC_OK)
        return rc;
    return cdc_http_server_add_post(c->http, "/compact", compact, c, e);
}
