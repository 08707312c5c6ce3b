/*
 * cdc-capture: PostgreSQL logical replication (pgoutput) to Kafka. This file holds the
 * option table, logging and HTTP setup and signal handling; the engine is in stream.c
 * (session loop, capture.h), snapshot.c, registry.c and source.h (PostgreSQL). See
 * docs/capture.md.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "common/cluster.h"
#include "common/config.h"
#include "common/http.h"
#include "common/log.h"

#define C(f) offsetof(cdc_capture_config_t, f)

static const cdc_opt_t options[] = {
    {"pg-dsn", CDC_OPT_STRING, C(pg_dsn), NULL, true, 0, 0, NULL,
     "libpq connection string of the source database (the role needs LOGIN and REPLICATION).",
     .secret = true},
    {"pg-password", CDC_OPT_STRING, C(pg_password), NULL, false, 0, 0, NULL,
     "Password of the source database's role; overrides one in --pg-dsn, so the DSN can stay "
     "in plain configuration and the password in --pg-password-file.",
     .secret = true},
    {"slot", CDC_OPT_STRING, C(slot), "cdc_slot", false, 0, 0, NULL,
     "Logical replication slot (pgoutput); created when missing."},
    {"publication", CDC_OPT_STRING, C(publication), "cdc_pub", false, 0, 0, NULL,
     "Publication the slot streams."},
    {"tables", CDC_OPT_STRING, C(tables), "", false, 0, 0, NULL,
     "Tables to capture, comma separated schema.table (default schema public); empty = every "
     "table of the publication. A partitioned table is one table (its partitions' rows are "
     "its own)."},
    {"table-include", CDC_OPT_STRING, C(table_include), "", false, 0, 0, NULL,
     "Without --tables: only the publication's tables whose schema.table matches one of these "
     "patterns (comma separated POSIX extended regular expressions, each matching the whole "
     "name, e.g. public\\.orders_.*) are captured; empty = all of them."},
    {"table-exclude", CDC_OPT_STRING, C(table_exclude), "", false, 0, 0, NULL,
     "Without --tables: the publication's tables whose schema.table matches one of these "
     "patterns are not captured (their changes are counted in "
     "cdc_capture_excluded_changes_total and skipped); applied after --table-include."},
    {"create-publication", CDC_OPT_BOOL, C(create_publication), "false", false, 0, 0, NULL,
     "Create the publication (FOR TABLE --tables WITH (publish_via_partition_root = true)), "
     "add missing tables to it, and set publish_via_partition_root when a partitioned table "
     "needs it."},
    {"topic-prefix", CDC_OPT_STRING, C(topic_prefix), "cdc", false, 0, 0, NULL,
     "Topic prefix: events go to <prefix>.<schema>.<table>, schemas to <prefix>._schemas."},
    {"partitions", CDC_OPT_INT, C(partitions), "12", false, 12, 12, NULL,
     "Partitions of table topics created by the capture; must be 12, the partition slots the "
     "coordinator assigns to the workers (a topic with more would have partitions no worker "
     "reads)."},
    {"snapshot-mode", CDC_OPT_ENUM, C(snapshot_mode), "incremental", false, 0, 0,
     "initial|incremental|never",
     "When the slot is created: incremental reads the existing rows (op r) by incremental "
     "snapshots that stream alongside and resume after a restart; initial reads them in the "
     "slot's exported snapshot before streaming (started over when the capture dies during "
     "it); never: stream only."},
    {"slot-busy", CDC_OPT_ENUM, C(slot_busy), "wait", false, 0, 0, "wait|fail",
     "When another process streams the slot: wait checks every second and takes the slot "
     "over when it is free (a standby capture); fail exits."},
    {"nested-types", CDC_OPT_ENUM, C(nested_types), "native", false, 0, 0, "native|string",
     "Iceberg types of new array and composite columns: native maps an array whose elements "
     "are booleans, integers, floats, numerics, text, uuids, dates, times, timestamps, bytea "
     "or json to list<T> (list<list<T>> for a column declared with two dimensions, int[][]) "
     "and a composite type to a struct (its array attributes to lists); "
     "string keeps both as text (JSON array text, the composite's PostgreSQL text). Columns "
     "already registered keep their type (docs/capture.md, \"Types\")."},
    {"numeric-default", CDC_OPT_STRING, C(numeric_default), "decimal(38,10)", false, 0, 0, NULL,
     "Iceberg type of a new numeric column without precision and scale: decimal(P,S) (a value "
     "with more fraction or integer digits is a type mismatch, dead-lettered) or string (the "
     "exact text). Columns already registered keep their type."},
    {"slot-lost", CDC_OPT_ENUM, C(slot_lost), "fail", false, 0, 0, "fail|resnapshot",
     "When the slot this capture streamed from was dropped or invalidated "
     "(max_slot_wal_keep_size): fail exits with status 3 and never starts from a new "
     "position; resnapshot creates the slot again and re-reads every table, its mirror "
     "truncated first (changes in between are missing from the changelog)."},
    {"slot-recreate", CDC_OPT_BOOL, C(slot_recreate), "false", false, 0, 0, NULL,
     "An existing slot without this capture's snapshot marker (created by an operator, or "
     "by a capture that died before its snapshot completed) is adopted by default: "
     "streamed from its position, the tables read by incremental snapshots. With this "
     "option it is dropped and created again instead, and the changes it held are lost to "
     "the pipeline (logged)."},
    {"snapshot-chunk", CDC_OPT_INT, C(snapshot_chunk), "10000", false, 1, 10000000, NULL,
     "Rows fetched per snapshot chunk."},
    {"snapshot-max-rate", CDC_OPT_INT, C(snapshot_max_rate), "25000", false, 0, 100000000, NULL,
     "Most rows per second the incremental snapshots read, all tables together (0 = as fast "
     "as it can), so that a backfill leaves the workers room for the other tables' changes "
     "(docs/benchmarks.md, \"Backfill of an added table\")."},
    {"snapshot-window-tables", CDC_OPT_INT, C(snapshot_window_tables), "64", false, 1, 1000000,
     NULL,
     "Most tables whose chunks one watermark window of the incremental snapshots reads "
     "(at most --snapshot-chunk rows in all): many small tables added at once share the "
     "window's round trip (docs/capture.md, \"Incremental snapshot\"). 1 reads one "
     "table's chunk per window."},
    {"heartbeat-interval", CDC_OPT_DURATION, C(heartbeat_interval_ms), "10s", false, 0, 86400000,
     NULL,
     "Interval of pg_logical_emit_message heartbeats that let the slot advance while tables "
     "are idle (0 = off)."},
    {"schema-probe-interval", CDC_OPT_DURATION, C(schema_probe_interval_ms), "5s", false, 0,
     86400000, NULL,
     "Interval of the catalog check that carries a DDL no change of the table followed into "
     "the stream (a pg_logical_emit_message), so a drop, a rename or a default reaches the "
     "tables without waiting for the next change (0 = off)."},
    {"publication-poll-interval", CDC_OPT_DURATION, C(publication_poll_interval_ms), "1s", false, 0,
     86400000, NULL,
     "Without --tables: interval of the look at the publication's tables (pg_publication_tables) "
     "that finds a table added to it before any change of the table arrives, and a table "
     "dropped from it (0 = off: a table joins at its first change)."},
    {"status-interval", CDC_OPT_DURATION, C(status_interval_ms), "1s", false, 10, 60000, NULL,
     "Interval of standby status updates (confirmed flush LSN) to PostgreSQL."},
    {"read-coalesce", CDC_OPT_DURATION, C(read_coalesce_ms), "2ms", false, 0, 100, NULL,
     "While changes trickle in, read the replication stream at most once per this interval "
     "(one wakeup per batch of transactions instead of one per transaction; adds at most this "
     "much latency; 0 = read each message as soon as it arrives)."},
    CDC_OPTS_KAFKA(cdc_capture_config_t, kafka),
    {"kafka-compression", CDC_OPT_ENUM, C(kafka_compression), "lz4", false, 0, 0,
     "none|gzip|snappy|lz4|zstd", "Compression of produced batches."},
    {"kafka-linger", CDC_OPT_DURATION, C(kafka_linger_ms), "50ms", false, 0, 5000, NULL,
     "How long the producer waits to fill a batch (librdkafka linger.ms). Fewer, larger "
     "batches cost the capture and the brokers much less CPU at a steady rate."},
    {"max-inflight", CDC_OPT_INT, C(max_inflight), "50000", false, 100, 10000000, NULL,
     "Events produced and not yet acknowledged before the capture stops reading (backpressure)."},
    {"max-inflight-bytes", CDC_OPT_SIZE, C(max_inflight_bytes), "64MiB", false, 1048576,
     INT64_C(4294967296), NULL, "Bytes of unacknowledged events before backpressure."},
    {"chunk-bytes", CDC_OPT_SIZE, C(chunk_bytes), "900KiB", false, 1024, INT64_C(268435456), NULL,
     "Events larger than this go to Kafka as consecutive chunks of this size in the event's "
     "partition, put back together by the workers (docs/events.md, \"Chunked events\"). "
     "Keep it below the brokers' message.max.bytes (1 MB by default); at most "
     "--max-inflight-bytes."},
    {"reconnect-max", CDC_OPT_DURATION, C(reconnect_max_ms), "30s", false, 100, 3600000, NULL,
     "Longest backoff between reconnect attempts."},
    {"drain-timeout", CDC_OPT_DURATION, C(drain_timeout_ms), "8s", false, 0, 3600000, NULL,
     "How long shutdown waits for Kafka to acknowledge in-flight events; with the stream's "
     "end (2 s at most) it bounds the exit after SIGTERM (10 s by default)."},
    {"http", CDC_OPT_STRING, C(http_addr), "127.0.0.1:9102", false, 0, 0, NULL,
     "Address of /metrics, /healthz and /readyz (empty = no HTTP server).", "http-addr"},
    CDC_OPTS_TLS(cdc_capture_config_t, tls),
    CDC_OPT_LIVENESS_TIMEOUT(cdc_capture_config_t, liveness_timeout_ms),
    CDC_OPT_HTTP_TOKEN(cdc_capture_config_t, http_token),
    CDC_OPT_HTTP_TOKEN_READS(cdc_capture_config_t, http_token_reads),
    CDC_OPT_INSECURE(cdc_capture_config_t, insecure),
    CDC_OPTS_LOG(cdc_capture_config_t, log),
    CDC_OPT_END,
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    if (sig == SIGHUP) {
        cdc_tls_request_reload();
        return;
    }
    stop_requested = 1;
}

static bool ready(void *arg, char *reason, size_t size)
{
    const cdc_capture_t *cap = arg;
    bool ok = atomic_load(&cap->ready); /* runs on an HTTP thread */
    if (!ok)
        snprintf(reason, size, "not streaming");
    return ok;
}

static bool valid_name(const char *s)
{
    if (s == NULL || *s == '\0' || strlen(s) > 63)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

int main(int argc, char **argv)
{
    cdc_capture_config_t cfg = {0};
    cdc_capture_t cap = {0};
    cdc_http_server_t *http = NULL;
    struct sigaction sa;
    cdc_error_t err;
    cdc_err_t rc;
    int status = 0;

    cdc_config_load(options, "cdc-capture", "PostgreSQL logical replication to Kafka.", argc, argv,
                    &cfg);
    if (!valid_name(cfg.slot)) {
        fprintf(stderr,
                "cdc-capture: invalid --slot (CDC_SLOT) \"%s\": expected lower-case "
                "letters, digits and _ (at most 63)\n",
                cfg.slot);
        return CDC_CONFIG_EXIT;
    }
    if (cfg.partitions != CDC_CLUSTER_PARTITIONS) {
        fprintf(stderr,
                "cdc-capture: invalid --partitions (CDC_PARTITIONS) %" PRId64 ": the job's "
                "workers and coordinator read %d partitions per topic (their partition slots); "
                "topics with another count would leave changes unread or slots empty\n",
                cfg.partitions, CDC_CLUSTER_PARTITIONS);
        return CDC_CONFIG_EXIT;
    }
    if (cfg.chunk_bytes > cfg.max_inflight_bytes) {
        fprintf(stderr,
                "cdc-capture: invalid --chunk-bytes (CDC_CHUNK_BYTES) %" PRId64
                ": larger than --max-inflight-bytes (CDC_MAX_INFLIGHT_BYTES) %" PRId64
                ", so one chunk could never be queued\n",
                cfg.chunk_bytes, cfg.max_inflight_bytes);
        return CDC_CONFIG_EXIT;
    }
    if (strchr(cfg.publication, '"') != NULL || cfg.publication[0] == '\0') {
        fprintf(stderr, "cdc-capture: invalid --publication (CDC_PUBLICATION) \"%s\"\n",
                cfg.publication);
        return CDC_CONFIG_EXIT;
    }
    if (cfg.tables[0] != '\0' && (cfg.table_include[0] != '\0' || cfg.table_exclude[0] != '\0')) {
        fprintf(stderr, "cdc-capture: --table-include (CDC_TABLE_INCLUDE) and --table-exclude "
                        "(CDC_TABLE_EXCLUDE) narrow the publication's tables: they cannot be "
                        "combined with --tables (CDC_TABLES), which names the tables itself\n");
        return CDC_CONFIG_EXIT;
    }
    cap.mapping.nested = strcmp(cfg.nested_types, "native") == 0;
    if (!cdc_schema_numeric_default_parse(cfg.numeric_default, &cap.mapping)) {
        fprintf(stderr,
                "cdc-capture: invalid --numeric-default (CDC_NUMERIC_DEFAULT) \"%s\": expected "
                "decimal(P,S) with 1 <= P <= 38 and 0 <= S <= P, or string\n",
                cfg.numeric_default);
        return CDC_CONFIG_EXIT;
    }
    if (cdc_table_filter_init(&cap.filter, cfg.table_include, cfg.table_exclude, &err) != CDC_OK) {
        fprintf(stderr, "cdc-capture: %s\n", err.msg);
        return CDC_CONFIG_EXIT;
    }
    cdc_log_options_apply(&cfg.log, "cdc-capture", cfg.slot);
    if (cdc_auth_check(&(cdc_auth_needs_t){.program = "cdc-capture",
                                           .insecure = cfg.insecure,
                                           .has_http = cfg.http_addr && cfg.http_addr[0],
                                           .http_token = cfg.http_token},
                       NULL, &err) != CDC_OK) {
        fprintf(stderr, "cdc-capture: %s\n", err.msg);
        return CDC_CONFIG_EXIT;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    cap.cfg = &cfg;
    cap.stop = &stop_requested;
    cdc_capture_status_init(&cap);
    cdc_capture_request_init(&cap);
    cdc_health_init(&cap.health, cfg.liveness_timeout_ms);
    if (cdc_tls_options_open(&cfg.tls, NULL, &cap.tls, &err) != CDC_OK) {
        fprintf(stderr, "cdc-capture: %s\n", err.msg);
        status = CDC_CONFIG_EXIT;
        goto done;
    }
    if (cfg.http_addr && cfg.http_addr[0]) {
        if (cdc_http_server_open(&http, cfg.http_addr, NULL, &err) != CDC_OK) {
            cdc_log_error("could not open HTTP server on %s: %s", cfg.http_addr, err.msg);
            status = 1;
            goto done;
        }
        cdc_http_server_set_ready(http, ready, &cap);
        cdc_http_server_set_health(http, cdc_health_check, &cap.health);
        cdc_http_server_set_token_reads(http, cfg.http_token_reads);
        if ((cdc_tls_options_http(&cfg.tls) &&
             cdc_http_server_set_tls(http, cap.tls, strcmp(cfg.tls.http, "mutual") == 0, &err) !=
                 CDC_OK) ||
            cdc_http_server_set_token(http, cfg.http_token, &err) != CDC_OK ||
            cdc_http_server_add_doc(http, "/status", cdc_capture_status_doc(&cap), &err) !=
                CDC_OK ||
            cdc_http_server_add_post(http, "/snapshot", cdc_capture_http_snapshot, &cap, &err) !=
                CDC_OK ||
            cdc_http_server_add_post(http, "/tables", cdc_capture_http_tables, &cap, &err) !=
                CDC_OK) {
            cdc_log_error("could not serve /status: %s", err.msg);
            status = 1;
            goto done;
        }
        if (cdc_http_server_start(http, &err) != CDC_OK) {
            cdc_log_error("could not start HTTP server on %s: %s", cfg.http_addr, err.msg);
            status = 1;
            goto done;
        }
    }
    cdc_log_info("cdc-capture starting: slot %s, publication %s, kafka %s", cfg.slot,
                 cfg.publication, cfg.kafka.bootstrap);
    cdc_error_clear(&err);
    rc = cdc_capture_run(&cap, &err);
    if (rc != CDC_OK) {
        cdc_log_error("%s", err.msg);
        fprintf(stderr, "cdc-capture: %s\n", err.msg);
        status = cap.slot_lost ? CDC_CAPTURE_EXIT_SLOT_LOST : 1;
    } else {
        cdc_log_info("cdc-capture stopped");
    }
done:
    cdc_http_server_close(http);
    cdc_tls_close(cap.tls);
    cdc_capture_free(&cap);
    cdc_capture_request_free(&cap);
    cdc_table_filter_free(&cap.filter);
    cdc_config_free(options, &cfg);
    return status;
}
