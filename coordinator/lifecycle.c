/*
 * The coordinator process's life (docs/operations.md): open (the job's state and
 * metrics, the control socket, the admin server and its advertised address, etcd, the
 * committer) and close, in that order and back. Runs on the main thread before the loop
 * starts (job.c) and after it ends. Calls into the rest of coordinator/; nothing calls
 * back into it but main.c.
 */
#include "coordinator/job_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static void init_metrics(cdc_coord_t *c)
{
    cdc_metrics_t *r = c->metrics;

    c->m_committed = cdc_metrics_counter(r, "cdc_coordinator_epochs_committed_total",
                                         "Epochs committed to Iceberg.", NULL);
    c->m_grouped = cdc_metrics_counter(
        r, "cdc_coordinator_epochs_grouped_total",
        "Epochs committed in the same Iceberg snapshots as an earlier epoch (group commits).",
        NULL);
    c->m_failures = cdc_metrics_counter(r, "cdc_coordinator_failures_total",
                                        "Failures that triggered a recovery.", NULL);
    c->m_rejected =
        cdc_metrics_counter(r, "cdc_coordinator_acks_rejected_total",
                            "Acks rejected (stale term/generation, foreign slots).", NULL);
    c->m_aborted = cdc_metrics_counter(r, "cdc_coordinator_epochs_aborted_total",
                                       "Open epochs abandoned by recoveries.", NULL);
    c->m_etcd_errors = cdc_metrics_counter(r, "cdc_coordinator_etcd_errors_total",
                                           "Failed etcd operations.", NULL);
    c->m_commit_errors = cdc_metrics_counter(r, "cdc_coordinator_commit_errors_total",
                                             "Failed Iceberg commit attempts.", NULL);
    cdc_diskfull_init(&c->warehouse_disk, r, "cdc_coordinator", "warehouse",
                      "Iceberg commits stop and the epochs wait in Kafka");
    c->m_tables_widened = cdc_metrics_counter(
        r, "cdc_coordinator_table_set_widenings_total",
        "Times the job's table set grew while it ran and the owners took it without a "
        "recovery (every owner follows the job's tables).",
        NULL);
    c->m_unconsumed = cdc_metrics_gauge(
        r, "cdc_coordinator_tables_unconsumed",
        "Table topics a live worker offers (the capture registered them) that stayed outside "
        "the job's table set for --unconsumed-after: their changes are in Kafka and no slot "
        "reads them (/status tables_unconsumed names them).",
        NULL);
    for (int i = 0; i < CDC_ADMISSION_REASONS; i++) {
        const char *labels[] = {"reason", cdc_admission_reason_name((cdc_admission_reason_t)i),
                                NULL};
        c->m_refused[i] = cdc_metrics_counter(
            r, "cdc_coordinator_registrations_refused_total",
            "Worker registrations refused by --worker-secret (no_proof: no valid proof within "
            "the deadline; wrong_proof: the proof does not match; unchallenged: a proof for no "
            "challenge of its connection).",
            labels);
    }
    for (int v = CDC_STAGED_OK + 1; v < CDC_STAGED_REASONS; v++) {
        const char *labels[] = {"reason", cdc_staged_reason_name((cdc_staged_reason_t)v), NULL};
        c->m_security[v] = cdc_metrics_counter(
            r, "cdc_coordinator_security_rejections_total",
            "Acks refused because a staged file broke the committer's rules (docs/security.md): "
            "table_name, table_unknown (not a table of the job), path (outside the table's "
            "data directory), missing, size (not the acked size).",
            labels);
    }
    for (int v = CDC_TABLESET_FITS + 1; v < CDC_TABLESET_VERDICTS; v++) {
        const char *labels[] = {"reason", cdc_tableset_verdict_name((cdc_tableset_verdict_t)v),
                                NULL};
        c->m_table_refused[v] = cdc_metrics_counter(
            r, "cdc_coordinator_workers_refused_total",
            "Workers given no partitions because they cannot consume a table of the job's "
            "tables (missing_table: their --tables or --topics lack one).",
            labels);
    }
    {
        static const char *const np[] = {"kind", "no_progress", NULL};
        static const char *const mt[] = {"kind", "missing_topic", NULL};
        const char *help = "Partition slots found stalled by the progress check (no_progress: "
                           "records behind a checkpointed offset that stays put; missing_topic: "
                           "the owner does not consume a topic the other slots carry).";
        c->m_no_progress = cdc_metrics_counter(r, "cdc_coordinator_stalls_total", help, np);
        c->m_missing_topic = cdc_metrics_counter(r, "cdc_coordinator_stalls_total", help, mt);
        c->m_stalled_slots =
            cdc_metrics_gauge(r, "cdc_coordinator_stalled_partitions",
                              "Partition slots flagged by the progress check now.", NULL);
    }
    c->m_state =
        cdc_metrics_gauge(r, "cdc_coordinator_job_state",
                          "0 STANDBY, 1 STARTING, 2 RECOVERING, 3 RUNNING, 4 FAILED.", NULL);
    c->m_term = cdc_metrics_gauge(r, "cdc_coordinator_term", "Leader term (0 = standby).", NULL);
    c->m_generation = cdc_metrics_gauge(r, "cdc_coordinator_generation",
                                        "Assignment generation in the current term.", NULL);
    c->m_workers =
        cdc_metrics_gauge(r, "cdc_coordinator_workers_alive", "Registered live workers.", NULL);
    /* (constant: the alert CdcWorkerMissing compares the two) */
    cdc_metrics_gauge_set(cdc_metrics_gauge(r, "cdc_coordinator_workers_expected",
                                            "--expected-workers (0 = not set).", NULL),
                          (double)c->cfg.expected_workers);
    c->m_last_epoch = cdc_metrics_gauge(r, "cdc_coordinator_last_committed_epoch",
                                        "Newest epoch committed to Iceberg.", NULL);
    c->m_latency =
        cdc_metrics_histogram(r, "cdc_coordinator_commit_latency_seconds",
                              "From barrier to the epoch's snapshots being visible.",
                              cdc_metrics_latency_buckets, cdc_metrics_latency_nbuckets, NULL);
    c->m_record_latency =
        cdc_metrics_histogram(r, "cdc_coordinator_record_latency_seconds",
                              "From barrier to the checkpoint record being in etcd.",
                              cdc_metrics_latency_buckets, cdc_metrics_latency_nbuckets, NULL);
    c->m_stall = cdc_metrics_histogram(
        r, "cdc_coordinator_loop_stall_seconds", "Duration of each main-loop iteration as leader.",
        cdc_metrics_latency_buckets, cdc_metrics_latency_nbuckets, NULL);
    c->m_stall_max =
        cdc_metrics_gauge(r, "cdc_coordinator_loop_stall_max_seconds",
                          "Longest main-loop iteration as leader since the start.", NULL);
}

/*
 * The admin address published in the leader key (cdcctl, a standby's /status): the
 * --http host with the bound port, or, when that host is a wildcard (0.0.0.0 in a
 * container), the host workers dial (--advertise), which other pods can reach.
 */
static void advertise_admin(cdc_coord_t *c)
{
    const char *colon = strrchr(c->cfg.http, ':');
    int hostlen = colon ? (int)(colon - c->cfg.http) : 0;
    const char *host = c->cfg.http;
    const char *ep = strstr(c->endpoint, "://");
    const char *epcolon = ep ? strrchr(ep + 3, ':') : NULL;

    static const char *const wildcards[] = {"", "0.0.0.0", "[::]", "::", NULL};
    bool wildcard = false;

    for (int i = 0; wildcards[i] != NULL; i++)
        wildcard |= (size_t)hostlen == strlen(wildcards[i]) &&
                    strncmp(host, wildcards[i], (size_t)hostlen) == 0;
    if (wildcard && epcolon != NULL && epcolon > ep + 3) {
        host = ep + 3;
        hostlen = (int)(epcolon - host);
    }
    snprintf(c->admin, sizeof(c->admin), "%.*s:%d", hostlen, host, cdc_http_server_port(c->http));
}

void cdc_job_init(cdc_coord_t *c)
{
    cdc_http_doc_init(&c->status);
    pthread_mutex_init(&c->forward_lock, NULL);
    pthread_mutex_init(&c->tables_lock, NULL);
    pthread_cond_init(&c->tables_cond, NULL);
    cdc_health_init(&c->health, c->cfg.liveness_timeout_ms);
    init_metrics(c);
    cdc_members_init(&c->members);
    cdc_admission_init(&c->admission, c->cfg.worker_secret);
    cdc_epochs_init(&c->epochs, c->cfg.job);
    cdc_progress_init(&c->progress, c->cfg.progress_timeout_ms, 3);
    cdc_restart_init(&c->restart, (int)c->cfg.restart_max_failures, c->cfg.restart_interval_ms,
                     c->cfg.restart_delay_ms);
}

cdc_err_t cdc_coord_open(cdc_coord_t *c, cdc_error_t *e)
{
    cdc_committer_options_t co;
    cdc_err_t rc;

    if ((c->hist = cdc_history_new()) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    c->metrics = cdc_metrics_default();
    cdc_job_init(c);

    cdc_etcd_security_t sec = cdc_etcd_options_security(&c->cfg.etcd);
    if ((rc = cdc_etcd_open_secure(&c->etcd, c->cfg.etcd.endpoints, &sec,
                                   (int)c->cfg.etcd_timeout_ms, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --etcd");
    if ((rc = cdc_tls_options_open(&c->cfg.tls, c->metrics, &c->tls, e)) != CDC_OK)
        return rc;
    {
        cdc_msg_options_t mo = {.tls = c->tls};
        if ((rc = cdc_msg_server_open(&c->msg, c->cfg.listen, &mo, e)) != CDC_OK)
            return cdc_error_prefix(e, "option --listen \"%s\"", c->cfg.listen);
    }
    if (c->cfg.advertise && c->cfg.advertise[0]) {
        snprintf(c->endpoint, sizeof(c->endpoint), "%s", c->cfg.advertise);
    } else {
        /* a listen URL with port 0 is advertised with the bound port */
        const char *colon = strrchr(c->cfg.listen, ':');
        int port = cdc_msg_server_port(c->msg);
        if (colon && port > 0)
            snprintf(c->endpoint, sizeof(c->endpoint), "%.*s:%d", (int)(colon - c->cfg.listen),
                     c->cfg.listen, port);
        else
            snprintf(c->endpoint, sizeof(c->endpoint), "%s", c->cfg.listen);
    }
    if ((rc = cdc_http_server_open(&c->http, c->cfg.http, c->metrics, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --http \"%s\"", c->cfg.http);
    cdc_http_server_set_token_reads(c->http, c->cfg.http_token_reads);
    if (cdc_tls_options_http(&c->cfg.tls) &&
        (rc = cdc_http_server_set_tls(c->http, c->tls, strcmp(c->cfg.tls.http, "mutual") == 0,
                                      e)) != CDC_OK)
        return rc;
    if ((rc = cdc_http_server_set_token(c->http, c->cfg.http_token, e)) != CDC_OK ||
        (rc = cdc_admin_register(c, e)) != CDC_OK || (rc = cdc_dashboard_register(c, e)) != CDC_OK)
        return rc;
    if (c->cfg.kafka != NULL && c->cfg.kafka[0] != '\0' &&
        (rc = cdc_watermarks_open(&c->watermarks, c->cfg.kafka, c->cfg.kafka_properties, 1000,
                                  e)) != CDC_OK)
        return cdc_error_prefix(e, "option --kafka \"%s\"", c->cfg.kafka);
    if ((rc = cdc_http_server_start(c->http, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --http \"%s\"", c->cfg.http);
    advertise_admin(c);
    memset(&co, 0, sizeof(co));
    co.warehouse = c->cfg.warehouse;
    co.job = c->cfg.job;
    co.s3 = &c->cfg.s3;
    co.partition_by = c->cfg.partition_by;
    co.sort_by = c->cfg.sort_by;
    if ((rc = cdc_committer_open(&c->committer, &co, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --warehouse \"%s\"", c->cfg.warehouse);
    {
        cdc_maint_options_t mo = {
            .job = c->cfg.job,
            .fault = c->cfg.fault,
            .compact = c->cfg.compact,
            .compact_interval_ms = c->cfg.compact_interval_ms,
            .policy = {.min_files = c->cfg.compact_min_files,
                       .delete_ratio_pct = c->cfg.compact_delete_ratio,
                       .max_age_ms = c->cfg.compact_max_age_ms,
                       .idle_ms = c->cfg.compact_idle_ms,
                       .target_bytes = c->cfg.compact_target_size},
            .rate_bytes = c->cfg.compact_rate,
            .snapshot_retention_ms = c->cfg.snapshot_retention_ms,
            .snapshot_min_keep = c->cfg.snapshot_min_keep,
            .orphan_interval_ms = c->cfg.orphan_interval_ms,
            .orphan_age_ms = c->cfg.orphan_age_ms,
            .metadata_versions_max = c->cfg.metadata_versions_max,
        };
        if ((rc = cdc_maint_open(&c->maint, c->committer, &mo, c->metrics, e)) != CDC_OK)
            return rc;
    }
    {
        char *value = cdc_job_leader_value(c);
        if (value == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        rc = cdc_leader_open(&c->leader, c->etcd, c->cfg.etcd.endpoints, &sec,
                             (int)c->cfg.etcd_timeout_ms, c->cfg.job, value,
                             (c->cfg.lease_ttl_ms + 999) / 1000, e);
        free(value);
        if (rc != CDC_OK)
            return rc;
    }
    cdc_store_init(&c->store, c->etcd, c->leader.el, c->cfg.job);
    cdc_presence_init(&c->presence, c->etcd, c->cfg.job, c->cfg.id, c->admin,
                      (c->cfg.lease_ttl_ms + 999) / 1000);
    cdc_log_info("coordinator \"%s\" for job \"%s\": workers dial %s, admin %s://%s", c->cfg.id,
                 c->cfg.job, c->endpoint, cdc_tls_options_scheme(&c->cfg.tls), c->admin);
    if (!cdc_admission_required(&c->admission))
        cdc_log_warn("the control plane is unauthenticated: any process that reaches %s can "
                     "register as a worker (hint: give coordinators and workers the same "
                     "--worker-secret-file; docs/security.md)",
                     c->endpoint);
    if (!cdc_tls_url(c->cfg.listen))
        cdc_log_warn("the control plane is not encrypted: --listen \"%s\" is plain tcp (hint: "
                     "tls+tcp:// with --tls-ca-file, --tls-cert-file and --tls-key-file; "
                     "docs/security.md)",
                     c->cfg.listen);
    cdc_admin_publish(c);
    return CDC_OK;
}

void cdc_coord_close(cdc_coord_t *c)
{
    /* resign so that a standby takes over at once */
    cdc_leader_close(&c->leader, true);
    cdc_presence_close(&c->presence); /* the record goes with the lease */
    /* a running compaction is cancelled first: a POST /compact waiting for it answers
     * 503 at once, and the HTTP server waits for its handlers */
    cdc_maint_stop(c->maint);
    cdc_http_server_close(c->http);
    c->http = NULL;
    cdc_watermarks_close(c->watermarks);
    c->watermarks = NULL;
    cdc_msg_server_close(c->msg);
    c->msg = NULL;
    cdc_maint_close(c->maint); /* before the committer it uses */
    c->maint = NULL;
    cdc_job_clear_queue(c); /* the commit round in flight ends first: it uses the committer */
    cdc_committer_close(c->committer);
    c->committer = NULL;
    cdc_offsets_base_clear(&c->offsets_base);
    cdc_etcd_close(c->etcd);
    c->etcd = NULL;
    cdc_tls_close(c->tls); /* after the servers that use it */
    c->tls = NULL;
    cdc_epochs_clear(&c->epochs);
    cdc_checkpoint_free(c->base);
    c->base = NULL;
    cdc_members_free(&c->members);
    cdc_tableset_clear(&c->tables);
    cdc_staged_index_clear(&c->staged_index);
    cdc_tableset_clear(&c->tables_missing);
    cdc_progress_free(&c->progress);
    cdc_http_doc_free(&c->status);
    pthread_mutex_destroy(&c->forward_lock);
    pthread_cond_destroy(&c->tables_cond);
    pthread_mutex_destroy(&c->tables_lock);
    cdc_history_free(c->hist);
    c->hist = NULL;
    cdc_unconsumed_free(&c->unconsumed);
    cdc_schema_memo_clear(&c->schema_memo);
}
