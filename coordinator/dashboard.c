/*
 * The live dashboard (docs/operations.md, "Dashboard"): one self-contained page,
 * coordinator/ui/dashboard.html, embedded in the binary and served at / and /ui by every
 * coordinator (a standby's page says who leads), and /history, the rings of history.h,
 * which this file fills: a sample a second from the loop (each slot's lag, the live
 * workers, the job state, the dead letters so far) and, after each commit, the epoch and
 * what it left in its tables. The page polls /status and /history; it loads nothing
 * else. The per-slot metrics and the changelogs' change and freshness metrics the same
 * values give are exported here too (the tables' health metrics: admin.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/embed.h"
#include "common/log.h"
#include "coordinator/coordinator.h"

CDC_EMBED_FILE(cdc_dashboard_html, "coordinator/ui/dashboard.html");
extern const char cdc_dashboard_html[];

#define SAMPLE_INTERVAL_MS 1000

/* The page may run its own inline script and style and talk to this server only. */
static const char page_policy[] = "default-src 'none'; script-src 'unsafe-inline'; "
                                  "style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
                                  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/* HTTP thread: the page. */
static void page(void *arg, const char *path, const char *query, cdc_http_response_t *resp)
{
    (void)arg;
    (void)path;
    (void)query;
    resp->body = strdup(cdc_dashboard_html);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
    resp->status = resp->body ? 200 : 500;
    resp->security_policy = page_policy;
    snprintf(resp->content_type, sizeof(resp->content_type), "text/html; charset=utf-8");
}

/* HTTP thread: /history[?since=<ms>], what came after since (wall clock). */
static void history(void *arg, const char *path, const char *query, cdc_http_response_t *resp)
{
    cdc_coord_t *c = arg;
    const char *since = strstr(query, "since=");
    (void)path;
    resp->body =
        cdc_history_json(c->hist, since ? strtoll(since + 6, NULL, 10) : 0, SAMPLE_INTERVAL_MS);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
    resp->status = resp->body ? 200 : 500;
    snprintf(resp->content_type, sizeof(resp->content_type), "application/json");
}

cdc_err_t cdc_dashboard_register(cdc_coord_t *c, cdc_error_t *e)
{
    cdc_err_t rc;
    if ((rc = cdc_http_server_add(c->http, "/", page, c, e)) != CDC_OK ||
        (rc = cdc_http_server_add(c->http, "/ui", page, c, e)) != CDC_OK)
        return rc;
    return cdc_http_server_add(c->http, "/history", history, c, e);
}

/* Every topic the slots carry, and every topic of the job's table set (one its slots do
 * not carry yet may not exist: /status says so), is watched for its ends (--kafka). */
static void watch_topics(cdc_coord_t *c)
{
    for (int i = 0; i < c->tables.n; i++)
        cdc_watermarks_watch(c->watermarks, cdc_tableset_name(&c->tables, i));
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        for (int j = 0; j < c->progress.slot[p].n; j++)
            cdc_watermarks_watch(c->watermarks, c->progress.slot[p].t[j].topic);
        for (size_t k = 0; c->base != NULL && k < c->base->partitions[p].noffsets; k++)
            cdc_watermarks_watch(c->watermarks, c->base->partitions[p].offsets[k].topic);
    }
}

void cdc_dashboard_sample(cdc_coord_t *c, int64_t now)
{
    cdc_history_sample_t s;

    if (now < c->next_sample_ms || c->hist == NULL)
        return;
    c->next_sample_ms = now + SAMPLE_INTERVAL_MS;
    if (c->watermarks != NULL)
        watch_topics(c);
    memset(&s, 0, sizeof(s));
    s.at_ms = cdc_clock_wall_ms();
    s.state = (int32_t)c->state;
    s.workers_alive = cdc_members_alive_count(&c->members);
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        s.lag[p] = cdc_coord_lag(c, p, NULL);
        if (c->m_lag[p] == NULL) {
            char num[8];
            snprintf(num, sizeof(num), "%d", p);
            const char *labels[] = {"partition", num, NULL};
            c->m_lag[p] = cdc_metrics_gauge(
                c->metrics, "cdc_coordinator_partition_lag_records",
                "Records of the slot's topic partitions behind the newest checkpoint (from the "
                "brokers' ends with --kafka, else the owners' acks; -1 = unknown).",
                labels);
        }
        cdc_metrics_gauge_set(c->m_lag[p], (double)s.lag[p]);
    }
    for (int i = 0; i < c->members.n; i++)
        for (int k = 0; k < c->members.m[i].ndlq; k++)
            s.dlq += (int64_t)c->members.m[i].dlq[k].records;
    cdc_history_sample(c->hist, &s);
}

/* A changelog's commit: its changes and how fresh they were when visible. */
static void changelog_metrics(cdc_coord_t *c, const char *table, const cdc_table_stats_t *s)
{
    static const double fresh_buckets[] = {0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 300, 900};
    const char *labels[] = {"table", table, NULL};
    cdc_metrics_counter_add(cdc_metrics_counter(c->metrics, "cdc_coordinator_table_changes_total",
                                                "Changes committed to the table's changelog.",
                                                labels),
                            (double)s->added_records);
    if (s->source_min_ms > 0)
        cdc_metrics_histogram_observe(
            cdc_metrics_histogram(c->metrics, "cdc_coordinator_table_freshness_seconds",
                                  "Per commit: from the source commit of its oldest change of "
                                  "the table to the snapshot being visible.",
                                  fresh_buckets, sizeof(fresh_buckets) / sizeof(fresh_buckets[0]),
                                  labels),
            (double)(s->committed_at_ms - s->source_min_ms) / 1000.0);
}

void cdc_dashboard_committed(cdc_coord_t *c, const cdc_checkpoint_t *rec, int64_t duration_ms,
                             int64_t commit_ms)
{
    cdc_history_epoch_t ep;
    cdc_table_stats_t *st = NULL;
    size_t n = 0;
    size_t data_files, delete_files;
    size_t sl = strlen(CDC_CHANGELOG_SUFFIX);

    memset(&ep, 0, sizeof(ep));
    ep.epoch = rec->epoch;
    ep.at_ms = cdc_clock_wall_ms();
    ep.duration_ms = duration_ms;
    ep.commit_ms = commit_ms;
    cdc_checkpoint_totals(rec, &ep.bytes, &ep.records, &data_files, &delete_files);
    ep.files = (int32_t)(data_files + delete_files);
    if (c->hist != NULL)
        cdc_history_epoch(c->hist, &ep);
    if (cdc_committer_table_stats(c->committer, &st, &n) != CDC_OK)
        cdc_log_error("checkpoint %" PRIu64 ": out of memory for the statistics of the tables",
                      rec->epoch);
    for (size_t i = 0; i < n; i++) {
        const cdc_table_stats_t *s = &st[i];
        size_t len = strlen(s->table);
        if (s->epoch != rec->epoch)
            continue;
        if (len > sl && strcmp(s->table + len - sl, CDC_CHANGELOG_SUFFIX) == 0) {
            char source[256];
            snprintf(source, sizeof(source), "%.*s", (int)(len - sl), s->table);
            changelog_metrics(c, source, s);
            if (c->hist != NULL)
                cdc_history_table_commit(c->hist, source, s->committed_at_ms, s->added_records,
                                         s->source_min_ms, s->source_max_ms, -1);
        } else if (c->hist != NULL) {
            cdc_history_table_commit(c->hist, s->table, s->committed_at_ms, 0, 0, 0,
                                     cdc_table_stats_rows(s));
        }
    }
    free(st);
}
