/*
 * cdc-coordinator: leader election, membership, partition assignment, epoch barriers,
 * checkpoint records in etcd and the only Iceberg committer (docs/design.md, "Processes").
 * This file holds the option table, process setup and signal handling; the loop is in
 * job.c and pipeline.c.
 */
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/msg.h"
#include "coordinator/coordinator.h"
#include "coordinator/layout.h"

#define OPT(name, type, field, def, help)                                                          \
    CDC_OPT_ROW(cdc_coord_config_t, name, type, field, def, 0, 0, help)
#define OPT_RANGE(name, type, field, def, lo, hi, help)                                            \
    CDC_OPT_ROW(cdc_coord_config_t, name, type, field, def, lo, hi, help)

const cdc_opt_t cdc_coord_options[] = {
    OPT("id", CDC_OPT_STRING, id, NULL,
        "Identity of this coordinator in leader election (default: host name and pid)."),
    OPT("job", CDC_OPT_STRING, job, "cdc", "Job name; etcd keys live under /cdc/<job>/."),
    CDC_OPTS_ETCD(cdc_coord_config_t, etcd),
    OPT("listen", CDC_OPT_STRING, listen, "tcp://127.0.0.1:7100",
        "NNG URL the coordinator listens on for workers; tls+tcp://host:port = mutual TLS with "
        "--tls-ca-file, --tls-cert-file and --tls-key-file."),
    OPT("advertise", CDC_OPT_STRING, advertise, NULL,
        "NNG URL workers dial, published in /cdc/<job>/leader (default: the listen URL)."),
    OPT("http", CDC_OPT_STRING, http, "127.0.0.1:7180",
        "Admin HTTP address host:port (/status, /metrics, /healthz, /readyz)."),
    CDC_OPTS_TLS(cdc_coord_config_t, tls),
    CDC_OPT_LIVENESS_TIMEOUT(cdc_coord_config_t, liveness_timeout_ms),
    CDC_OPT_HTTP_TOKEN(cdc_coord_config_t, http_token),
    CDC_OPT_HTTP_TOKEN_READS(cdc_coord_config_t, http_token_reads),
    CDC_OPT_INSECURE(cdc_coord_config_t, insecure),
    OPT("kafka", CDC_OPT_STRING, kafka, NULL,
        "Kafka bootstrap servers of the source topics: the lag in /status and on the dashboard "
        "then comes from the brokers' partition ends, live also while a worker is paused "
        "(empty = from the owners' acks only)."),
    OPT("kafka-properties", CDC_OPT_STRING, kafka_properties, "",
        "Extra librdkafka properties of that client, key=value separated by ';'."),
    {"warehouse", CDC_OPT_STRING, offsetof(cdc_coord_config_t, warehouse), NULL, true, 0, 0, NULL,
     "Warehouse location: a local directory or s3://bucket/prefix."},
    CDC_OPTS_S3(cdc_coord_config_t, s3),
    OPT_RANGE("commit-interval", CDC_OPT_DURATION, commit_interval_ms, "1s", 100, 3600000,
              "Time between barriers: one epoch, one snapshot per table."),
    OPT_RANGE("heartbeat-timeout", CDC_OPT_DURATION, heartbeat_timeout_ms, "3s", 500, 600000,
              "A worker silent for longer is declared dead."),
    OPT_RANGE("ack-deadline", CDC_OPT_DURATION, ack_deadline_ms, "10s", 500, 3600000,
              "An epoch not acked by all partitions within this time is aborted."),
    OPT_RANGE("rebalance-grace", CDC_OPT_DURATION, rebalance_grace_ms, "2s", 0, 600000,
              "How long a lost worker's partitions wait for it to come back, and how long a "
              "new leader waits for workers to gather before its first assignment."),
    OPT_RANGE("expected-workers", CDC_OPT_INT, expected_workers, "0", 0, 1000,
              "Workers the job normally runs with (e.g. the StatefulSet's replicas): a new "
              "leader assigns as soon as that many are registered instead of waiting "
              "--rebalance-grace (0 = unknown)."),
    OPT_RANGE("restart-max-failures", CDC_OPT_INT, restart_max_failures, "10", 1, 255,
              "Failure-rate restart strategy: failures tolerated per interval."),
    OPT_RANGE("restart-interval", CDC_OPT_DURATION, restart_interval_ms, "5m", 1000, 86400000,
              "Failure-rate restart strategy: the measuring interval."),
    OPT_RANGE("restart-delay", CDC_OPT_DURATION, restart_delay_ms, "500ms", 0, 3600000,
              "Failure-rate restart strategy: delay before each recovery."),
    OPT_RANGE("lease-ttl", CDC_OPT_DURATION, lease_ttl_ms, "5s", 1000, 600000,
              "TTL of the leader lease; a standby takes over this long after a crash."),
    OPT_RANGE("etcd-timeout", CDC_OPT_DURATION, etcd_timeout_ms, "1s", 100, 60000,
              "Timeout of one etcd request."),
    OPT_RANGE("inline-files-max", CDC_OPT_INT, inline_files_max, "200", 0, 100000,
              "Checkpoints with more staged files keep the list in a pending file in the "
              "warehouse, and etcd only its path."),
    OPT_RANGE("checkpoint-inline-offsets", CDC_OPT_INT, checkpoint_inline_offsets, "1000", 0,
              100000000,
              "Checkpoint records with more (partition, topic) offsets keep them in an "
              "offsets base in the warehouse, and etcd only those that differ from it."),
    OPT_RANGE("checkpoints-retained", CDC_OPT_INT, checkpoints_retained, "20", 1, 100000,
              "Checkpoint records kept in etcd."),
    OPT_RANGE("orphan-age", CDC_OPT_DURATION, orphan_age_ms, "10m", 0, 604800000,
              "Unreferenced data files are deleted only after being seen this long."),
    OPT_RANGE("orphan-interval", CDC_OPT_DURATION, orphan_interval_ms, "1m", 0, 86400000,
              "Time between orphan scans (0 = never)."),
    OPT_RANGE("snapshot-retention", CDC_OPT_DURATION, snapshot_retention_ms, "30m", 0, 31536000000,
              "Snapshots older than this are expired (with their unreferenced files) once per "
              "orphan interval, on the maintenance thread, so table metadata stays small when "
              "committing every second "
              "(0 = never expire)."),
    OPT_RANGE("snapshot-min-keep", CDC_OPT_INT, snapshot_min_keep, "10", 1, 1000000,
              "Newest snapshots always kept by expiry, whatever their age."),
    OPT("compact", CDC_OPT_BOOL, compact, "true",
        "Compact the Iceberg tables in the background: rewrite each Kafka partition's small "
        "files and equality deletes into files of --compact-target-size when the policy says "
        "so (docs/iceberg.md, \"Table maintenance\"). cdcctl compact works either way."),
    OPT_RANGE("compact-interval", CDC_OPT_DURATION, compact_interval_ms, "30s", 1000, 86400000,
              "Time between compaction policy checks of every table."),
    OPT_RANGE("compact-min-files", CDC_OPT_INT, compact_min_files, "24", 1, 1000000,
              "A Kafka partition of a table with more live data and delete files than this "
              "is compacted."),
    OPT_RANGE("compact-delete-ratio", CDC_OPT_INT, compact_delete_ratio, "20", 0, 1000000,
              "... or with at least this many equality-delete rows per 100 data rows "
              "(percent; 0 = no ratio rule)."),
    OPT_RANGE("compact-max-age", CDC_OPT_DURATION, compact_max_age_ms, "15m", 0, 31536000000,
              "... or whose oldest small file is older than this (0 = no age rule)."),
    OPT_RANGE("compact-idle", CDC_OPT_DURATION, compact_idle_ms, "2m", 0, 31536000000,
              "A Kafka partition of a table to which no commit added a file for this long, "
              "and that still holds equality deletes or two small files, gets a major "
              "rewrite: a quiet table ends with one file per partition and no deletes "
              "(0 = no idle rule)."),
    OPT_RANGE("compact-target-size", CDC_OPT_SIZE, compact_target_size, "128MiB", 1048576,
              17179869184, "Size of the files compaction writes; smaller files are rewritten."),
    OPT_RANGE("compact-rate", CDC_OPT_SIZE, compact_rate, "64MiB", 0, 17179869184,
              "Bytes of table files compaction reads per second at most (0 = unlimited), so "
              "that the streaming commits keep their freshness while it runs."),
    OPT_RANGE("metadata-versions-max", CDC_OPT_INT, metadata_versions_max, "100", 0, 1000000,
              "Metadata files kept per table (write.metadata.previous-versions-max, older ones "
              "deleted after each commit; 0 = leave the tables' setting alone)."),
    OPT_RANGE("progress-timeout", CDC_OPT_DURATION, progress_timeout_ms, "90s", 0, 86400000,
              "A partition slot whose checkpointed offset of a topic stays put with records "
              "behind it for this long (and at least 3 checkpoints) is logged, counted and "
              "shown in /status, and the job recovers: every slot is assigned again from its "
              "checkpoint (0 = off; the workers' own --progress-timeout acts first)."),
    OPT_RANGE("unconsumed-after", CDC_OPT_DURATION, unconsumed_after_ms, "60s", 1000, 86400000,
              "A table topic that a live worker offers (the capture registered it) but that "
              "stays outside the job's table set this long is unconsumed: its changes reach "
              "Kafka and no slot reads them. It is logged as an error naming the table, counted "
              "in cdc_coordinator_tables_unconsumed and listed in /status (tables_unconsumed)."),
    OPT("partition-by", CDC_OPT_STRING, partition_by, NULL,
        "Iceberg partition specs of the target tables, \"<ns>.<table>=<terms>;...\", terms "
        "being columns (identity) or bucket[N](col), truncate[W](col), year/month/day/hour(col), "
        "e.g. \"public.orders=bucket[16](id);public.orders_changelog=day(_source_ts)\". A table "
        "not named is unpartitioned; a change applies from the next start (docs/iceberg.md)."),
    OPT("sort-by", CDC_OPT_STRING, sort_by, NULL,
        "Iceberg sort orders of the target tables, \"<ns>.<table>=<terms>;...\", each term "
        "[transform(]col[)] [asc|desc] [nulls first|nulls last], e.g. "
        "\"public.orders=customer_id,id desc\". A table not named is unsorted."),
    CDC_OPT_WORKER_SECRET(cdc_coord_config_t, worker_secret),
    OPT("fault", CDC_OPT_STRING, fault, NULL,
        "Testing only, in builds with fault injection (make FAULT_INJECTION=1; the image's "
        "release build refuses it): exit at a named point (after-checkpoint-record, "
        "after-iceberg-commit, exit-mid-compaction: after a rewrite's files are written, "
        "before its commit), stall the main loop for 3 lease TTLs at each orphan scan "
        "(stall-orphan-scan), or block it while a file exists (wedge-loop:<file>, read from "
        "CDC_FAULT by every program)."),
    CDC_OPTS_LOG(cdc_coord_config_t, log),
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

int main(int argc, char **argv)
{
    static cdc_coord_t coord;
    cdc_coord_t *c = &coord;
    cdc_error_t e;
    struct sigaction sa;
    int status = 1;

    memset(c, 0, sizeof(*c));
    cdc_config_load(cdc_coord_options, "cdc-coordinator",
                    "Coordinates workers and commits epochs to Iceberg.", argc, argv, &c->cfg);
    if (c->cfg.id == NULL) {
        char host[HOST_NAME_MAX + 1] = "host", id[HOST_NAME_MAX + 32];
        gethostname(host, sizeof(host));
        snprintf(id, sizeof(id), "%s-%d", host, (int)getpid());
        c->cfg.id = strdup(id);
    }
    cdc_error_clear(&e);
    if (cdc_layout_check(c->cfg.partition_by, false, &e) != CDC_OK ||
        cdc_layout_check(c->cfg.sort_by, true, &e) != CDC_OK) {
        fprintf(stderr, "cdc-coordinator: %s\n", e.msg);
        cdc_config_free(cdc_coord_options, &c->cfg);
        return CDC_CONFIG_EXIT;
    }
    if (cdc_config_fault_check("option --fault (CDC_FAULT)", c->cfg.fault, &e) != CDC_OK) {
        fprintf(stderr, "cdc-coordinator: %s\n", e.msg);
        cdc_config_free(cdc_coord_options, &c->cfg);
        return CDC_CONFIG_EXIT;
    }
    cdc_log_options_apply(&c->cfg.log, "cdc-coordinator", c->cfg.id);
    if (cdc_auth_check(&(cdc_auth_needs_t){.program = "cdc-coordinator",
                                           .insecure = c->cfg.insecure,
                                           .uses_worker_secret = true,
                                           .worker_secret = c->cfg.worker_secret,
                                           .has_http = true,
                                           .http_token = c->cfg.http_token},
                       NULL, &e) != CDC_OK) {
        fprintf(stderr, "cdc-coordinator: %s\n", e.msg);
        cdc_config_free(cdc_coord_options, &c->cfg);
        return CDC_CONFIG_EXIT;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    c->stop = &stop_flag;

    cdc_error_clear(&e);
    if (cdc_coord_open(c, &e) != CDC_OK) {
        cdc_log_error("could not start the coordinator: %s", e.msg);
        goto done;
    }
    cdc_coord_run(c);
    status = 0;
done:
    cdc_coord_close(c);
    cdc_msg_shutdown();
    if (status == 0)
        cdc_log_info("cdc-coordinator stopped");
    cdc_config_free(cdc_coord_options, &c->cfg);
    return status;
}
