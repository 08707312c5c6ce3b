/*
 * Admin API of the coordinator: /status (JSON), /readyz, /healthz, plus /metrics from
 * common/http.c. The main loop builds the status document (it owns the state) and
 * publishes it under a mutex; HTTP threads only copy the published text. A standby
 * answers /status with the leader's (fetched from the leader's admin address), so
 * whichever coordinator a Service picks, /status describes the running job; /readyz is
 * 200 for the leader RUNNING and for a standby alike, so rollouts and disruption budgets
 * count both (docs/deployment.md, "Health and readiness"). /healthz fails when the loop
 * stopped turning or the job FAILED (common/health.h).
 *
 * /status fields: job, id, state (RUNNING|RECOVERING|FAILED|STANDBY|STARTING), leader
 * (this process: id, endpoint, admin, term), term, generation, recovery_reason,
 * restart {failures_recent, failures_total, max_failures, interval_ms}, workers [{id,
 * incarnation, alive, last_heartbeat_ms_ago, partitions, lost_reason}], assignment
 * [{partition, owner, offsets {topic: next offset}, high_watermarks {topic: end offset the
 * owner last reported}, stalled_ms {topic: how long the owner's progress watchdog has seen
 * it behind without progress; only stalled topics}, no_progress_ms {topic: how long the
 * coordinator's progress check has seen the checkpointed offset stay put with records
 * behind it; only flagged topics}, missing_topic (a topic the other slots carry that the
 * owner does not consume, or null), lag (records from offsets to the high watermarks,
 * null until an owner reported one)}], epochs {open, next, last_recorded,
 * last_committed, pending_commits}, checkpoints [{epoch, duration_ms, bytes, records,
 * data_files, delete_files, tables, completed_at_ms}], last_commit_error.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/httpc.h"
#include "common/log.h"
#include "coordinator/coordinator.h"

/* A forwarded /status waits this long for the leader, then serves our own. */
#define FORWARD_TIMEOUT_MS 2000

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
        if (!m->alive)
            json_object_set_new(w, "lost_reason", json_string(m->lost_reason));
        json_array_append_new(ws, w);
    }
    json_object_set_new(o, "workers", ws);

    for (int p = 0; p < CDC_PARTITIONS; p++) {
        json_t *a = json_object(), *offs = json_object(), *highs = json_object();
        int64_t lag = 0;
        if (c->base != NULL)
            for (size_t j = 0; j < c->base->partitions[p].noffsets; j++)
                json_object_set_new(offs, c->base->partitions[p].offsets[j].topic,
                                    json_integer(c->base->partitions[p].offsets[j].next_offset));
        /* lag: records between the newest checkpoint and the end of each topic partition */
        const cdc_progress_slot_t *ps = &c->progress.slot[p];
        json_t *stalled = json_object(), *still = json_object();
        bool known = false;
        for (int j = 0; j < ps->n; j++) {
            const cdc_progress_topic_t *h = &ps->t[j];
            int64_t at = 0;
            json_t *o = json_object_get(offs, h->topic);
            if (h->stalled_ms > 0)
                json_object_set_new(stalled, h->topic, json_integer(h->stalled_ms));
            if (h->no_progress)
                json_object_set_new(still, h->topic, json_integer(now - h->since_ms));
            if (h->high <= 0)
                continue;
            known = true;
            if (o != NULL && json_integer_value(o) > 0)
                at = json_integer_value(o);
            json_object_set_new(highs, h->topic, json_integer(h->high));
            if (h->high > at)
                lag += h->high - at;
        }
        json_object_set_new(a, "stalled_ms", stalled);
        json_object_set_new(a, "no_progress_ms", still);
        json_object_set_new(a, "missing_topic",
                            ps->missing[0] ? json_string(ps->missing) : json_null());
        json_object_set_new(a, "partition", json_integer(p));
        json_object_set_new(a, "owner", json_string(c->owner[p]));
        json_object_set_new(a, "offsets", offs);
        json_object_set_new(a, "high_watermarks", highs);
        json_object_set_new(a, "lag", known ? json_integer(lag) : json_null());
        json_array_append_new(as, a);
    }
    json_object_set_new(o, "assignment", as);

    json_object_set_new(ep, "open", json_integer(c->epochs.nopen));
    json_object_set_new(ep, "next", json_integer((json_int_t)c->epochs.next_epoch));
    json_object_set_new(ep, "last_recorded", json_integer((json_int_t)c->last_recorded));
    json_object_set_new(ep, "last_committed", json_integer((json_int_t)c->last_committed));
    json_object_set_new(ep, "pending_commits", json_integer(c->nqueue));
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
        cdc_table_layout_t *ls = calloc(CDC_COMMITTER_MAX_TABLES, sizeof(*ls));
        size_t nl = ls ? cdc_committer_layouts(c->committer, ls, CDC_COMMITTER_MAX_TABLES) : 0;
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

/* HTTP thread: the leader's /status (asked with local=1, so it never forwards again) into
 * resp; false when it did not answer 200 in time. */
static bool forward(const char *admin, cdc_http_response_t *resp)
{
    char url[320];
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_request_t req = {
        .url = url, .timeout_ms = FORWARD_TIMEOUT_MS, .connect_timeout_ms = FORWARD_TIMEOUT_MS / 4};
    cdc_httpc_response_t r;
    bool ok;

    if (h == NULL)
        return false;
    snprintf(url, sizeof(url), "http://%s/status?local=1", admin);
    ok = cdc_httpc_perform(h, &req, &r) == CDC_OK && r.status == 200 && r.body != NULL;
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
    if (to[0] != '\0' && strstr(query, "local=1") == NULL && forward(to, resp))
        return;
    cdc_http_doc_respond(&c->status, resp);
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

cdc_err_t cdc_admin_register(cdc_coord_t *c, cdc_error_t *e)
{
    cdc_http_server_set_ready(c->http, ready, c);
    cdc_http_server_set_health(c->http, cdc_health_check, &c->health);
    return cdc_http_server_add(c->http, "/status", status, c, e);
}
