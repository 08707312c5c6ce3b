/*
 * cdc-worker: consumes its assigned partition slots, decodes, dedups, stages mirror and
 * changelog files per epoch and checkpoints its state (docs/design.md, "Processes"). This
 * file holds the option table, process setup and signal handling; the loop is in
 * session.c, the record path in consume.c.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/clock.h"
#include "worker/worker.h"

#define OPT(name, type, field, def, help)                                                          \
    CDC_OPT_ROW(cdc_worker_config_t, name, type, field, def, 0, 0, help)
#define OPT_RANGE(name, type, field, def, lo, hi, help)                                            \
    CDC_OPT_ROW(cdc_worker_config_t, name, type, field, def, lo, hi, help)

static const cdc_opt_t options[] = {
    {"id", CDC_OPT_STRING, offsetof(cdc_worker_config_t, id), NULL, true, 0, 0, NULL,
     "Stable worker id (e.g. the StatefulSet pod name); the coordinator gives a restarting "
     "worker its partitions back by this id."},
    OPT("job", CDC_OPT_STRING, job, "cdc", "Job name; etcd keys live under /cdc/<job>/."),
    CDC_OPTS_ETCD(cdc_worker_config_t, etcd),
    OPT("coordinator", CDC_OPT_STRING, coordinator, NULL,
        "Coordinator NNG URL; when set, etcd is not used to find the leader (tests)."),
    CDC_OPTS_KAFKA(cdc_worker_config_t, kafka),
    OPT("topic-prefix", CDC_OPT_STRING, topic_prefix, "cdc",
        "Topic prefix of the capture: tables are read from <prefix>.<schema>.<table>, schema "
        "documents from <prefix>._schemas."),
    OPT("tables", CDC_OPT_STRING, tables, NULL,
        "Source tables this worker can consume, comma-separated <schema>.<table> (e.g. "
        "public.orders). Without it (and --topics) the worker consumes the job's tables as the "
        "coordinator gives them."),
    OPT("topics", CDC_OPT_STRING, topics, NULL,
        "Explicit topic names this worker can consume instead of --tables (e.g. Debezium "
        "topics)."),
    {"warehouse", CDC_OPT_STRING, offsetof(cdc_worker_config_t, warehouse), NULL, true, 0, 0, NULL,
     "Warehouse location: a local directory or s3://bucket/prefix."},
    OPT("state-dir", CDC_OPT_STRING, state_dir, "/var/lib/cdc-worker",
        "Local directory for the partitions' RocksDB state and checkpoint copies."),
    OPT("http", CDC_OPT_STRING, http, "127.0.0.1:7190",
        "Admin HTTP address host:port (/metrics, /healthz, /readyz, /status); port 0 = any."),
    CDC_OPTS_TLS(cdc_worker_config_t, tls),
    CDC_OPT_LIVENESS_TIMEOUT(cdc_worker_config_t, liveness_timeout_ms),
    CDC_OPT_HTTP_TOKEN(cdc_worker_config_t, http_token),
    CDC_OPT_HTTP_TOKEN_READS(cdc_worker_config_t, http_token_reads),
    CDC_OPT_INSECURE(cdc_worker_config_t, insecure),
    CDC_OPT_WORKER_SECRET(cdc_worker_config_t, worker_secret),
    CDC_OPTS_LOG(cdc_worker_config_t, log),
    CDC_OPTS_S3(cdc_worker_config_t, s3),
    OPT_RANGE("heartbeat-interval", CDC_OPT_DURATION, heartbeat_interval_ms, "500ms", 50, 60000,
              "Time between heartbeats to the coordinator."),
    OPT_RANGE("dedup-ttl", CDC_OPT_DURATION, dedup_ttl_ms, "24h", 1000, 31LL * 86400000,
              "How long dedup keys of deleted rows and replay keys are kept."),
    OPT_RANGE("max-record-bytes", CDC_OPT_SIZE, max_record_bytes, "1GiB", 1024, 1LL << 36,
              "Largest event put back together and decoded (a chunked event counts whole, "
              "docs/worker.md, \"Large rows\"); a larger one goes to the dead-letter topic as "
              "oversized, chunk by chunk, without being buffered."),
    OPT_RANGE("max-staged-bytes", CDC_OPT_SIZE, max_staged_bytes, "128MiB", 1 << 20, 1LL << 40,
              "Memory for one epoch's staged changes; past it fetching pauses until the next "
              "barrier."),
    OPT_RANGE("progress-timeout", CDC_OPT_DURATION, progress_timeout_ms, "30s", 0, 86400000,
              "Progress watchdog: a partition with records behind its high watermark whose "
              "offset does not move for this long is logged, counted, reported to the "
              "coordinator's /status and fetched again from its next offset (0 = off)."),
    OPT_RANGE("batch-size", CDC_OPT_INT, batch_size, "1000", 1, 2048,
              "Records read from Kafka per batch."),
    OPT("compression", CDC_OPT_ENUM, compression, "zstd", "Parquet compression codec."),
    OPT_RANGE("record-nice", CDC_OPT_INT, record_nice, "5", 0, 19,
              "Nice value of the record thread, relative to the worker's other threads: when "
              "the worker is short of CPU, a barrier's files and state checkpoint run first, "
              "which keeps the commit latency down (0 = same priority)."),
    OPT("toast-placeholder", CDC_OPT_STRING, toast_placeholder, "__debezium_unavailable_value",
        "Debezium's unavailable.value.placeholder (unchanged TOAST marker in Debezium input)."),
    OPT("mask-policy", CDC_OPT_STRING, mask_policy, NULL,
        "Column masking policy (docs/worker.md, \"Column masking\"): a JSON file, or the "
        "policy itself when the value starts with {; empty = no masking. Read at start: a "
        "change takes a restart, and the coordinator logs it per table."),
    OPT("mask-mode", CDC_OPT_ENUM, mask_mode, "denylist",
        "denylist: columns the policy does not name reach the lake as they are; allowlist: "
        "they are held back (absent from the tables, counted per table and column in /status "
        "and cdc_worker_mask_unclassified_values_total) until the policy names them."),
    OPT("mask-secret-file", CDC_OPT_STRING, mask_secret_file, NULL,
        "File holding the secret key of hashed columns (HMAC-SHA-256, at least 16 bytes; a "
        "trailing newline is not part of it). The same on every worker of the job."),
    OPT("mask-secret", CDC_OPT_STRING, mask_secret, NULL,
        "The secret key of hashed columns itself, instead of --mask-secret-file: set it as "
        "CDC_MASK_SECRET (a flag shows in the process list)."),
    CDC_OPT_END,
};

static volatile _Atomic sig_atomic_t stop_flag; /* read by other threads */

static void on_signal(int sig)
{
    if (sig == SIGHUP) {
        cdc_tls_request_reload();
        return;
    }
    stop_flag = 1;
}

static bool ready(void *arg, char *reason, size_t size)
{
    cdc_worker_t *w = arg;
    bool registered;

    pthread_mutex_lock(&w->link_lock); /* we are on an HTTP thread */
    registered = w->registered;
    pthread_mutex_unlock(&w->link_lock);
    if (!registered) {
        snprintf(reason, size, "not registered with a coordinator");
        return false;
    }
    return true;
}

/* Fixes up the enum choices (the table above keeps the macro short). */
static cdc_opt_t *option_table(void)
{
    static cdc_opt_t opts[sizeof(options) / sizeof(options[0])];
    memcpy(opts, options, sizeof(options));
    for (size_t i = 0; opts[i].name != NULL; i++) {
        if (strcmp(opts[i].name, "compression") == 0)
            opts[i].choices = "zstd|snappy|none";
        if (strcmp(opts[i].name, "mask-mode") == 0)
            opts[i].choices = "denylist|allowlist";
    }
    return opts;
}

int main(int argc, char **argv)
{
    static cdc_worker_t w;
    const cdc_opt_t *opts = option_table();
    cdc_error_t e;
    struct sigaction sa;
    struct timespec ts;
    int status = 0;

    cdc_config_load(opts, "cdc-worker",
                    "Consumes change events, dedups them and stages Iceberg files per epoch.", argc,
                    argv, &w.cfg);
    if (cdc_config_fault_check("environment variable CDC_WORKER_FAULT", getenv("CDC_WORKER_FAULT"),
                               &e) != CDC_OK) {
        fprintf(stderr, "cdc-worker: %s\n", e.msg);
        cdc_config_free(opts, &w.cfg);
        return CDC_CONFIG_EXIT;
    }
    cdc_log_options_apply(&w.cfg.log, "cdc-worker", w.cfg.id);
    if (cdc_auth_check(&(cdc_auth_needs_t){.program = "cdc-worker",
                                           .insecure = w.cfg.insecure,
                                           .uses_worker_secret = true,
                                           .worker_secret = w.cfg.worker_secret,
                                           .has_http = true,
                                           .http_token = w.cfg.http_token},
                       NULL, &e) != CDC_OK) {
        fprintf(stderr, "cdc-worker: %s\n", e.msg);
        cdc_config_free(opts, &w.cfg);
        return CDC_CONFIG_EXIT;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    ts = cdc_clock_wall_ts();
    w.incarnation = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    w.stop = &stop_flag;
    pthread_mutex_init(&w.link_lock, NULL);
    w.metrics = cdc_metrics_default();
    /* The process-wide series, in the order /metrics lists them. */
    const struct {
        cdc_counter_t **counter; /* or */
        cdc_gauge_t **gauge;
        const char *name, *help;
    } series[] = {
        {&w.m_tombstones, NULL, "cdc_worker_tombstones_total", "Kafka tombstones skipped."},
        {&w.m_fetch_restarts, NULL, "cdc_worker_fetch_restarts_total",
         "Partitions assigned again after their fetching stopped on an error."},
        {&w.m_stalls, NULL, "cdc_worker_stalls_total",
         "Progress watchdog: partitions found behind their high watermark without progress "
         "for --progress-timeout (each then fetched again)."},
        {&w.m_missing, NULL, "cdc_worker_missing_offsets_total",
         "Offsets not in Kafka below the first record of a partition read from the beginning "
         "(deleted by retention or compaction before they were read), added at each such "
         "start."},
        {&w.m_chunked, NULL, "cdc_worker_chunked_events_total",
         "Events that came as chunks and were put back together (docs/worker.md, \"Large "
         "rows\")."},
        {&w.m_torn, NULL, "cdc_worker_torn_chunk_sequences_total",
         "Chunked events discarded unfinished (a capture killed mid-produce sends them again "
         "whole); never emitted."},
        {&w.m_chunks_rejected, NULL, "cdc_worker_rejected_chunks_total",
         "Chunks that continued no sequence read here (dropped)."},
        {&w.m_floor_rows, NULL, "cdc_worker_floor_rows_total",
         "Rows removed from the mirror by truncates met in another partition (floors)."},
        {&w.m_before_floor, NULL, "cdc_worker_before_floor_total",
         "Changes from before their table's floor that reached their slot after it: written "
         "to the changelog only."},
        {&w.m_snapshot_rereads, NULL, "cdc_worker_snapshot_rereads_total",
         "Snapshot rows dropped because the same snapshot had read the row already (a chunk "
         "the capture read again after a crash; docs/worker.md, \"Snapshot reads exactly "
         "once\")."},
        {NULL, &w.m_floors_waiting, "cdc_worker_floors_waiting",
         "Floors a slot could not apply at the last barrier (tried again at the next)."},
        {NULL, &w.m_stalled, "cdc_worker_stalled_partitions",
         "Progress watchdog: topic partitions stalled now."},
        {&w.m_ckpt_bytes, NULL, "cdc_worker_checkpoint_uploaded_bytes_total",
         "State checkpoint bytes uploaded (incremental)."},
        {&w.m_epochs, NULL, "cdc_worker_epochs_acked_total", "Epochs snapshotted and acked."},
        {&w.m_aborts, NULL, "cdc_worker_aborts_total", "Abort messages acted on."},
        {&w.m_rejected, NULL, "cdc_worker_stale_messages_total",
         "Coordinator messages ignored for an old term/generation."},
    };
    for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++) {
        if (series[i].counter != NULL)
            *series[i].counter =
                cdc_metrics_counter(w.metrics, series[i].name, series[i].help, NULL);
        else
            *series[i].gauge = cdc_metrics_gauge(w.metrics, series[i].name, series[i].help, NULL);
    }
    w.m_stage_seconds =
        cdc_metrics_histogram(w.metrics, "cdc_worker_epoch_staging_seconds",
                              "Time to write one partition's files at a barrier.",
                              cdc_metrics_latency_buckets, cdc_metrics_latency_nbuckets, NULL);
    w.m_ckpt_seconds =
        cdc_metrics_histogram(w.metrics, "cdc_worker_checkpoint_seconds",
                              "Time to checkpoint and upload one partition's state.",
                              cdc_metrics_latency_buckets, cdc_metrics_latency_nbuckets, NULL);
    cdc_diskfull_init(&w.disk_warehouse, w.metrics, "cdc_worker", "warehouse",
                      "epochs are not acked (the coordinator replays them)");
    cdc_diskfull_init(&w.disk_state, w.metrics, "cdc_worker", "state",
                      "epochs are not acked and the state is restored from its checkpoint");

    if (cdc_worker_data_open(&w, &e) != CDC_OK) {
        fprintf(stderr, "cdc-worker: %s\n", e.msg);
        cdc_worker_data_close(&w);
        return e.code == CDC_ERR_CONFIG ? CDC_CONFIG_EXIT : 1;
    }
    cdc_health_init(&w.health, w.cfg.liveness_timeout_ms);
    cdc_http_doc_init(&w.status);
    cdc_worker_publish_status(&w);
    if (cdc_tls_options_open(&w.cfg.tls, w.metrics, &w.tls, &e) != CDC_OK) {
        fprintf(stderr, "cdc-worker: %s\n", e.msg);
        cdc_http_doc_free(&w.status);
        cdc_worker_data_close(&w);
        return CDC_CONFIG_EXIT;
    }
    if (cdc_http_server_open(&w.http, w.cfg.http, w.metrics, &e) != CDC_OK ||
        (cdc_tls_options_http(&w.cfg.tls) &&
         cdc_http_server_set_tls(w.http, w.tls, strcmp(w.cfg.tls.http, "mutual") == 0, &e) !=
             CDC_OK) ||
        (cdc_http_server_set_token_reads(w.http, w.cfg.http_token_reads),
         cdc_http_server_set_token(w.http, w.cfg.http_token, &e)) != CDC_OK ||
        cdc_http_server_add_doc(w.http, "/status", &w.status, &e) != CDC_OK ||
        (cdc_http_server_set_ready(w.http, ready, &w),
         cdc_http_server_set_health(w.http, cdc_health_check, &w.health),
         cdc_http_server_start(w.http, &e)) != CDC_OK) {
        fprintf(stderr, "cdc-worker: option --http \"%s\": %s\n", w.cfg.http, e.msg);
        cdc_http_server_close(w.http);
        cdc_http_doc_free(&w.status);
        cdc_worker_data_close(&w);
        cdc_tls_close(w.tls);
        return CDC_CONFIG_EXIT;
    }
    if (w.follows_tables)
        cdc_log_info("worker \"%s\" job \"%s\": the job's tables (no --tables), warehouse %s, "
                     "metrics on port %d",
                     w.cfg.id, w.cfg.job, w.cfg.warehouse, cdc_http_server_port(w.http));
    else
        cdc_log_info("worker \"%s\" job \"%s\": %zu topics, warehouse %s, metrics on port %d",
                     w.cfg.id, w.cfg.job, (size_t)w.topics.n, w.cfg.warehouse,
                     cdc_http_server_port(w.http));
    if (w.cfg.worker_secret == NULL || w.cfg.worker_secret[0] == '\0')
        cdc_log_warn("the control plane is unauthenticated: this worker registers without "
                     "proving a secret (hint: give coordinators and workers the same "
                     "--worker-secret-file; docs/security.md)");
    if (cdc_worker_run(&w, &e) != CDC_OK) {
        cdc_log_error("%s", e.msg);
        status = e.code == CDC_ERR_CONFIG ? CDC_CONFIG_EXIT : 1;
    }
    cdc_log_info("worker \"%s\" stopping", w.cfg.id);
    cdc_http_server_close(w.http);
    cdc_http_doc_free(&w.status);
    cdc_worker_data_close(&w);
    cdc_tls_close(w.tls); /* after the session's client and the http server that use it */
    if (status == 0)
        cdc_log_info("cdc-worker stopped");
    cdc_config_free(opts, &w.cfg);
    return status;
}
