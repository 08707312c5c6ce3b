/*
 * The capture's session loop: connect, check the setup, find or create the slot (with
 * the initial snapshot when needed), then stream pgoutput messages into Kafka events.
 * A transaction's commit LSN is confirmed to PostgreSQL only when every event of it
 * and of all earlier transactions was acknowledged by Kafka (txtrack.c). Any failure
 * of PostgreSQL or Kafka ends the session; the next one resumes from the slot's
 * confirmed position after a backoff, so nothing is skipped (duplicates are possible).
 * Also the standby (docs/capture.md, "Two captures"), /status, and the capture's
 * lifetime. The messages themselves are handled in changes.c, tables.c, partitions.c
 * and probe.c (stream_int.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "capture/stream_int.h"
#include "common/clock.h"
#include "common/log.h"

#define READ_TIMEOUT_MS 100
#define POLL_EVERY 256
#define STATUS_MIN_GAP_MS 50

/* ---- session ----------------------------------------------------------------------- */

static void drain(cdc_capture_t *cap)
{
    int64_t deadline = cdc_clock_mono_coarse_ms() + cap->cfg->drain_timeout_ms;
    cdc_error_t ignored;

    while (cap->producer && cdc_kafka_producer_outstanding(cap->producer) > 0 &&
           cdc_clock_mono_coarse_ms() < deadline) {
        cdc_health_beat(&cap->health);
        cdc_kafka_producer_flush(cap->producer, 200, &ignored);
    }
    if (cap->src.repl && cdc_capture_send_status(cap, &ignored) == CDC_OK)
        cdc_log_info("confirmed %X/%X to PostgreSQL", (unsigned)(cap->confirmed >> 32),
                     (unsigned)cap->confirmed);
}

/*
 * Another process streams the slot (a capture that still runs, pg_recvlogical): only one
 * may. This one waits, as a standby: it takes the slot over as soon as the other lets go,
 * e.g. when it dies (docs/capture.md, "Two captures"). What the active capture wrote to
 * the registry meanwhile (schema versions, the snapshot marker) is read again at the
 * takeover: a standby that acted on what it read at its start would redo a snapshot the
 * other completed, or number schema versions twice.
 */
static cdc_err_t slot_in_use(cdc_capture_t *cap, int pid, cdc_error_t *e)
{
    cdc_metrics_gauge_set(cap->m_standby, 1);
    cap->standby = true;
    cap->registry_loaded = false;
    /* not retriable: CDC_ERR_CONFLICT would be by default, and the capture would retry
     * the session instead of exiting */
    if (strcmp(cap->cfg->slot_busy, "fail") == 0)
        return cdc_error_set_retriable(e, CDC_ERR_CONFLICT, false,
                                       "replication slot \"%s\" is in use by PID %d (another "
                                       "cdc-capture, or pg_recvlogical); --slot-busy=fail",
                                       cap->cfg->slot, pid);
    cap->slot_busy = true;
    return cdc_error_set_retriable(e, CDC_ERR_CONFLICT, true,
                                   "replication slot \"%s\" is in use by PID %d (another "
                                   "cdc-capture, or pg_recvlogical): waiting to take it over "
                                   "(stop that process, or SELECT pg_terminate_backend(%d))",
                                   cap->cfg->slot, pid, pid);
}

/*
 * Standby check before the session does anything: the capture that holds the slot's
 * advisory lock (cdc_source_lock_slot) owns the slot for the life of its session, its
 * snapshot included, during which the slot itself is not active; another one waits
 * (slot_in_use).
 */
static cdc_err_t check_slot_free(cdc_capture_t *cap, cdc_error_t *e)
{
    bool got;
    int holder;
    cdc_err_t rc = cdc_source_lock_slot(&cap->src, cap->cfg->slot, &got, &holder, e);
    if (rc != CDC_OK)
        return rc;
    if (!got)
        return slot_in_use(cap, holder, e);
    if (cap->standby) {
        cdc_metrics_gauge_set(cap->m_standby, 0);
        cap->standby = false;
        cdc_log_info("replication slot %s is free: taking it over", cap->cfg->slot);
    }
    return CDC_OK;
}

cdc_err_t cdc_capture_slot_plan(cdc_capture_t *cap, bool exists, bool lost, int active,
                                cdc_capture_slot_plan_t *plan, cdc_error_t *e)
{
    bool initial = strcmp(cap->cfg->snapshot_mode, "initial") == 0;

    memset(plan, 0, sizeof(*plan));
    if (exists && active != 0)
        return slot_in_use(cap, active, e);
    /* The slot this capture streamed from is gone (dropped, or invalidated when its WAL
     * was removed): the changes since its confirmed position cannot be read any more.
     * Never start silently from a new position (docs/capture.md, "Slot lost"). */
    if (lost || (!exists && cap->snapshot_marked)) {
        cdc_metrics_gauge_set(cap->m_slot_lost, 1);
        if (strcmp(cap->cfg->slot_lost, "resnapshot") != 0) {
            cap->slot_lost = true;
            return cdc_error_set(
                e, CDC_ERR_STATE,
                "replication slot \"%s\" %s; the changes since its last confirmed position "
                "are lost to the pipeline, so the capture does not start from a new position "
                "(hint: --slot-lost=resnapshot re-reads every table into fresh mirrors, "
                "docs/capture.md \"Slot lost\")",
                cap->cfg->slot,
                lost ? "was invalidated: PostgreSQL removed WAL it needed "
                       "(max_slot_wal_keep_size)"
                     : "no longer exists, though this capture streamed from it");
        }
        cdc_log_error("replication slot %s %s: --slot-lost=resnapshot: creating it again and "
                      "re-reading every table, each mirror truncated first",
                      cap->cfg->slot, lost ? "was invalidated" : "no longer exists");
        plan->drop = lost;
        exists = false;
        initial = true;
        cap->resnapshot = true;
    }
    if (exists && !cap->snapshot_marked && cap->cfg->slot_recreate) {
        cdc_log_warn("slot %s exists without this capture's snapshot marker: --slot-recreate: "
                     "dropping it and creating it again (the changes it held are not captured)",
                     cap->cfg->slot);
        plan->drop = true;
        exists = false;
        initial = strcmp(cap->cfg->snapshot_mode, "never") != 0; /* tables it registered too */
    } else if (exists && !cap->snapshot_marked) {
        /* made by an operator (to pin WAL before the deployment, or because the capture's
         * role may not create slots), or by a capture that died before its snapshot
         * completed (an initial snapshot's exported snapshot is gone with its session):
         * the changes it holds are streamed, and the tables are read alongside by
         * incremental snapshots (docs/capture.md, "An existing slot") */
        plan->adopt = true;
    }
    plan->create = !exists;
    plan->initial = initial;
    return CDC_OK;
}

static cdc_err_t prepare_slot(cdc_capture_t *cap, uint64_t *start, cdc_error_t *e)
{
    bool exists, lost;
    int active;
    uint64_t confirmed = 0, cp = 0;
    char snapname[64] = "";
    cdc_capture_slot_plan_t plan;
    cdc_err_t rc;

    cap->adopting = false;
    rc = cdc_source_slot_info(&cap->src, cap->cfg->slot, &exists, &confirmed, &lost, &active, e);
    if (rc == CDC_OK)
        rc = cdc_capture_slot_plan(cap, exists, lost, active, &plan, e);
    if (rc != CDC_OK)
        return rc;
    if (plan.drop && (rc = cdc_source_drop_slot(&cap->src, cap->cfg->slot, e)) != CDC_OK)
        return rc;
    if (!plan.create) {
        *start = 0; /* the server resumes at confirmed_flush_lsn */
        cap->confirmed = confirmed;
        if (!plan.adopt) {
            cdc_log_info("resuming slot %s at %X/%X", cap->cfg->slot, (unsigned)(confirmed >> 32),
                         (unsigned)confirmed);
            return CDC_OK;
        }
        if (strcmp(cap->cfg->snapshot_mode, "never") == 0) {
            cdc_log_warn("adopting existing slot %s at %X/%X (no snapshot marker of this "
                         "capture): streaming from its position, no snapshot "
                         "(--snapshot-mode=never)",
                         cap->cfg->slot, (unsigned)(confirmed >> 32), (unsigned)confirmed);
            return cdc_registry_mark_snapshot(cap, confirmed, "never", e);
        }
        /* the marker follows once every table's incremental snapshot is recorded
         * (cdc_incremental_session): a capture killed before that adopts again */
        cap->adopting = true;
        cap->adopt_lsn = confirmed;
        cdc_capture_snapshot_id(cap->adopt_id, sizeof(cap->adopt_id), confirmed);
        cdc_log_warn("adopting existing slot %s at %X/%X (no snapshot marker of this capture: "
                     "made by an operator, or by a capture that died before its snapshot "
                     "completed): streaming the changes it holds, every table read alongside "
                     "by an incremental snapshot (%s); --slot-recreate would drop it instead",
                     cap->cfg->slot, (unsigned)(confirmed >> 32), (unsigned)confirmed,
                     cap->adopt_id);
        return CDC_OK;
    }
    rc = cdc_source_create_slot(&cap->src, cap->cfg->slot, plan.initial, &cp, snapname, e);
    if (rc != CDC_OK)
        return rc;
    cdc_log_info("created slot %s at consistent point %X/%X", cap->cfg->slot, (unsigned)(cp >> 32),
                 (unsigned)cp);
    cap->confirmed = cp;
    cdc_txtrack_free(&cap->track);
    cdc_txtrack_init(&cap->track, cp);
    if (plan.initial) {
        rc = cdc_snapshot_run(cap, snapname, cp, e);
        if (rc != CDC_OK)
            return rc;
    }
    cap->resnapshot = false;
    cdc_metrics_gauge_set(cap->m_slot_lost, 0);
    /* --snapshot-mode=incremental: the marker comes first, so that a capture killed
     * during the tables' incremental snapshots keeps the slot and resumes them */
    rc = cdc_registry_mark_snapshot(cap, cp, plan.initial ? "initial" : cap->cfg->snapshot_mode, e);
    if (rc != CDC_OK)
        return rc;
    *start = cp;
    return CDC_OK;
}

bool cdc_capture_status_due(cdc_capture_t *cap, bool data, bool reply, int64_t now)
{
    /* Between messages (no data this round: the backlog is drained or the server is
     * quiet) confirm what Kafka acked without waiting a whole status interval, but
     * at most every STATUS_MIN_GAP_MS: each update also wakes the walsender. */
    return reply || now - cap->last_status_ms >= cap->cfg->status_interval_ms ||
           (!data && now - cap->last_status_ms >= STATUS_MIN_GAP_MS &&
            cdc_txtrack_confirmable(&cap->track) > cap->confirmed);
}

static cdc_err_t session(cdc_capture_t *cap, cdc_error_t *e)
{
    cdc_source_setup_t setup = {.slot = cap->cfg->slot,
                                .publication = cap->cfg->publication,
                                .create_publication = cap->cfg->create_publication,
                                .filter = &cap->filter,
                                .table_error = cdc_capture_on_table_error,
                                .table_error_arg = cap};
    cdc_source_table_t *configured = NULL;
    size_t nconfigured = 0, since_poll = 0;
    uint64_t start = 0;
    cdc_err_t rc;

    rc = cdc_capture_parse_tables(cap->cfg->tables, &configured, &nconfigured, e);
    if (rc != CDC_OK)
        goto cleanup;
    setup.tables = configured;
    setup.ntables = nconfigured;
    rc = cdc_source_connect_sql(&cap->src, cap->cfg->pg_dsn, cap->cfg->pg_password, e);
    if (rc == CDC_OK)
        rc = check_slot_free(cap, e);
    if (rc != CDC_OK)
        goto cleanup;
    cdc_source_tables_free(cap->wanted, cap->nwanted);
    cap->wanted = NULL;
    cap->nwanted = 0;
    /* the capture set and table errors are found again by every session */
    for (size_t i = 0; i < cap->ntables; i++) {
        cap->tables[i].captured = false;
        if (cap->tables[i].failed) {
            cap->tables[i].failed = false;
            cdc_metrics_gauge_set(cap->tables[i].m_error, 0);
        }
    }
    cdc_capture_leaves_free(cap);
    rc = cdc_source_check_setup(&cap->src, &setup, &cap->wanted, &cap->nwanted, e);
    if (rc != CDC_OK)
        goto cleanup;
    for (size_t i = 0; i < cap->nwanted; i++) {
        cdc_capture_table_t *t =
            cdc_capture_table_get(cap, cap->wanted[i].schema, cap->wanted[i].name);
        if (t == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto cleanup;
        }
        t->captured = true;
    }
    if (cap->producer == NULL) {
        rc = cdc_capture_producer_open(cap, e);
        if (rc != CDC_OK)
            goto cleanup;
    }
    if (!cap->registry_loaded) {
        rc = cdc_registry_load(cap, e);
        if (rc != CDC_OK)
            goto cleanup;
    }
    cdc_capture_topics_ensure(cap);
    rc = cdc_source_connect_repl(&cap->src, cap->cfg->pg_dsn, cap->cfg->pg_password, e);
    if (rc != CDC_OK)
        goto cleanup;
    cdc_txtrack_free(&cap->track);
    cdc_txtrack_init(&cap->track, 0);
    rc = prepare_slot(cap, &start, e);
    if (rc != CDC_OK)
        goto cleanup;
    cdc_txtrack_free(&cap->track);
    cdc_txtrack_init(&cap->track, cap->confirmed);
    cdc_capture_tx_reset(cap);
    /* relation ids are re-announced by Relation messages in every new stream */
    for (size_t i = 0; i < cap->ntables; i++)
        cap->tables[i].relid = 0;
    rc = cdc_incremental_session(cap, e);
    if (rc != CDC_OK)
        goto cleanup;
    cap->src.coalesce_ms = (int)cap->cfg->read_coalesce_ms;
    cap->src.caught_up = false; /* until a fresh transaction shows it */
    cap->src.cycle_bytes = 0;
    rc = cdc_source_start(&cap->src, cap->cfg->slot, cap->cfg->publication, start, e);
    if (rc != CDC_OK)
        goto cleanup;
    cap->ready = true;
    cap->streamed = true;
    cap->last_status_ms = cdc_clock_mono_coarse_ms();
    cap->last_heartbeat_ms = cdc_clock_mono_coarse_ms();
    cdc_log_info("streaming slot %s (publication %s, %zu tables)", cap->cfg->slot,
                 cap->cfg->publication, cap->nwanted);
    cdc_capture_status_publish(cap, true);

    while (!*cap->stop) {
        cdc_source_event_t ev;
        const uint8_t *data = NULL;
        size_t len = 0;
        uint64_t lsn = 0;
        bool reply = false;
        int64_t now;

        cdc_health_beat(&cap->health);
        cdc_tls_check(cap->tls);
        rc = cdc_source_read(&cap->src, READ_TIMEOUT_MS, &ev, &data, &len, &lsn, &reply, e);
        if (rc != CDC_OK)
            goto cleanup;
        if (ev == CDC_SRC_DATA) {
            rc = cdc_capture_on_message(cap, data, len, lsn, e);
            if (rc != CDC_OK)
                goto cleanup;
            if (++since_poll >= POLL_EVERY) {
                cdc_kafka_producer_poll(cap->producer, 0);
                since_poll = 0;
            }
        } else {
            cdc_kafka_producer_poll(cap->producer, 0);
        }
        if (cap->track.failed) {
            rc = cdc_error_set_retriable(e, CDC_ERR_KAFKA, true,
                                         "a Kafka delivery failed; restarting from the last "
                                         "confirmed position");
            goto cleanup;
        }
        rc = cdc_kafka_producer_fatal(cap->producer, e);
        if (rc != CDC_OK) {
            e->retriable = true;
            goto cleanup;
        }
        now = cdc_clock_mono_coarse_ms();
        if (cdc_capture_status_due(cap, ev == CDC_SRC_DATA, reply, now)) {
            rc = cdc_capture_send_status(cap, e);
            if (rc != CDC_OK)
                goto cleanup;
        }
        if (cap->cfg->schema_probe_interval_ms > 0 &&
            now - cap->last_probe_ms >= cap->cfg->schema_probe_interval_ms) {
            cap->last_probe_ms = now;
            rc = cdc_capture_probe_schemas(cap, e);
            if (rc == CDC_ERR_UNAVAILABLE)
                goto cleanup;
            if (rc != CDC_OK)
                cdc_log_warn("schema probe failed: %s", e->msg);
        }
        if (cap->cfg->publication_poll_interval_ms > 0 &&
            now - cap->last_pub_poll_ms >= cap->cfg->publication_poll_interval_ms) {
            cap->last_pub_poll_ms = now;
            /* tables added to the publication that no change named yet, tables dropped */
            rc = cdc_capture_poll_publication(cap, e);
            if (rc == CDC_ERR_UNAVAILABLE || (rc != CDC_OK && e->retriable))
                goto cleanup;
            if (rc != CDC_OK)
                cdc_log_warn("could not read the tables of publication \"%s\": %s",
                             cap->cfg->publication, e->msg);
        }
        rc = cdc_capture_serve_request(cap, e);
        if (rc == CDC_OK)
            rc = cdc_incremental_tick(cap, e);
        if (rc != CDC_OK) {
            if (rc == CDC_ERR_SOURCE)
                e->retriable = true;
            goto cleanup;
        }
        cdc_capture_status_publish(cap, false);
        if (cap->cfg->heartbeat_interval_ms > 0 &&
            now - cap->last_heartbeat_ms >= cap->cfg->heartbeat_interval_ms) {
            cap->last_heartbeat_ms = now;
            rc = cdc_source_heartbeat(&cap->src, e);
            if (rc == CDC_ERR_UNAVAILABLE)
                goto cleanup;
            if (rc != CDC_OK)
                cdc_log_warn("heartbeat failed (the slot advances only with captured "
                             "changes): %s",
                             e->msg);
            else
                cdc_metrics_counter_inc(cap->m_heartbeats);
        }
    }
    rc = CDC_OK;
cleanup:
    cap->ready = false;
    if (rc == CDC_OK || rc == CDC_ERR_CLOSED) {
        drain(cap);
        rc = CDC_OK;
    } else if (cap->producer) {
        /* Let in-flight events finish against this session's tracker and confirm what
         * Kafka acked; a producer that cannot drain is replaced so that no late delivery
         * report reaches the next session's tracker. */
        cdc_error_t ignored;
        int64_t deadline = cdc_clock_mono_coarse_ms() + cap->cfg->drain_timeout_ms;
        while (cdc_kafka_producer_outstanding(cap->producer) > 0 &&
               cdc_clock_mono_coarse_ms() < deadline &&
               cdc_kafka_producer_fatal(cap->producer, &ignored) == CDC_OK) {
            cdc_health_beat(&cap->health);
            cdc_kafka_producer_flush(cap->producer, 200, &ignored);
        }
        if (cdc_kafka_producer_outstanding(cap->producer) > 0 ||
            cdc_kafka_producer_fatal(cap->producer, &ignored) != CDC_OK) {
            cdc_kafka_producer_free(cap->producer);
            cap->producer = NULL;
        }
        if (cap->src.repl)
            cdc_capture_send_status(cap, &ignored);
    }
    cdc_source_stop(&cap->src);
    cdc_source_close(&cap->src);
    cdc_source_tables_free(configured, nconfigured);
    return rc;
}

static void sleep_ms(cdc_capture_t *cap, int64_t ms)
{
    int64_t end = cdc_clock_mono_coarse_ms() + ms;
    while (!*cap->stop && cdc_clock_mono_coarse_ms() < end) {
        struct timeval tv = {0, 50000};
        cdc_health_beat(&cap->health);
        cdc_tls_check(cap->tls);
        select(0, NULL, NULL, NULL, &tv);
    }
}

cdc_capture_next_t cdc_capture_session_ended(cdc_capture_t *cap, cdc_err_t rc,
                                             const cdc_error_t *err, int64_t *backoff_ms,
                                             int64_t *wait_ms)
{
    *wait_ms = 0;
    if (rc == CDC_OK)
        return CDC_CAPTURE_NEXT_STOP;
    if (cap->streamed)
        *backoff_ms = CDC_CAPTURE_BACKOFF_MIN_MS;
    cap->streamed = false;
    if (!err->retriable && rc != CDC_ERR_UNAVAILABLE && rc != CDC_ERR_TIMEOUT &&
        rc != CDC_ERR_KAFKA)
        return CDC_CAPTURE_NEXT_FAIL;
    if (cap->slot_busy) {
        /* a standby: checks the slot every second, says so every minute */
        cap->slot_busy = false;
        if (cdc_clock_mono_coarse_ms() - cap->standby_logged_ms >= 60000) {
            cap->standby_logged_ms = cdc_clock_mono_coarse_ms();
            cdc_log_warn("%s", err->msg);
        }
        *wait_ms = 1000;
        return CDC_CAPTURE_NEXT_STANDBY;
    }
    /* --reconnect-max may be shorter than the first backoff */
    *wait_ms = *backoff_ms > cap->cfg->reconnect_max_ms ? cap->cfg->reconnect_max_ms : *backoff_ms;
    *backoff_ms =
        *wait_ms * 2 > cap->cfg->reconnect_max_ms ? cap->cfg->reconnect_max_ms : *wait_ms * 2;
    cdc_log_warn("capture session ended: %s; retrying in %" PRId64 " ms", err->msg, *wait_ms);
    cdc_metrics_counter_inc(cap->m_reconnects);
    return CDC_CAPTURE_NEXT_RETRY;
}

cdc_err_t cdc_capture_run(cdc_capture_t *cap, cdc_error_t *e)
{
    int64_t backoff = CDC_CAPTURE_BACKOFF_MIN_MS;

    cap->m_transactions =
        cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_transactions_total",
                            "Transactions decoded from the slot.", NULL);
    cap->m_delivery_errors =
        cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_delivery_errors_total",
                            "Kafka deliveries that failed (the session restarts).", NULL);
    cap->m_confirmed_lsn =
        cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_confirmed_lsn",
                          "Flush LSN confirmed to PostgreSQL (every event before it acked).", NULL);
    cap->m_lag_bytes = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_slot_lag_bytes",
                                         "Server WAL end minus the confirmed LSN, in bytes.", NULL);
    cap->m_inflight = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_inflight_events",
                                        "Events produced and not yet acknowledged by Kafka.", NULL);
    cap->m_snapshot_running =
        cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_snapshot_running",
                          "1 while the initial snapshot runs.", NULL);
    cap->m_backfills =
        cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_backfills_total",
                            "Tables re-read after a DDL that rewrote their rows without WAL "
                            "changes (a column added with a default, a changed type).",
                            NULL);
    cap->m_snapshot_tables_done =
        cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_snapshot_tables_done",
                          "Tables the running or last snapshot has finished.", NULL);
    cap->m_snapshot_tables = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_snapshot_tables",
                                               "Tables the running or last snapshot reads.", NULL);
    cap->m_heartbeats = cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_heartbeats_total",
                                            "Heartbeat messages emitted.", NULL);
    cap->m_reconnects = cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_reconnects_total",
                                            "Sessions restarted after an error.", NULL);
    cap->m_standby = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_standby",
                                       "1 while another process streams the slot and this "
                                       "capture waits to take it over.",
                                       NULL);
    cap->m_slot_lost = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_slot_lost",
                                         "1 when the slot this capture streamed from was dropped "
                                         "or invalidated (docs/capture.md, \"Slot lost\").",
                                         NULL);
    cap->m_snapshot_chunks = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_snapshot_chunks_total",
        "Chunks of incremental snapshots produced and recorded (docs/capture.md, "
        "\"Incremental snapshot\").",
        NULL);
    cdc_incremental_init(cap);
    cap->m_adopted = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_tables_added_total",
        "Tables that joined the publication while the capture ran and were added to its "
        "capture set (docs/capture.md, \"Adding a table\").",
        NULL);
    cap->m_removed = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_tables_removed_total",
        "Tables that left the publication (docs/capture.md, \"Removing a table\"); their "
        "topics and Iceberg tables stay.",
        NULL);
    cap->m_chunked = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_chunked_events_total",
        "Events larger than --chunk-bytes produced as chunks (docs/events.md, \"Chunked "
        "events\").",
        NULL);
    cap->m_chunks = cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_event_chunks_total",
                                        "Chunks of chunked events produced.", NULL);
    /* sequence ids differ between processes and runs (a re-sent event gets a new one) */
    cap->chunk_seq = ((uint64_t)cdc_clock_wall_ms() << 16) ^ ((uint64_t)getpid() << 48);
    cdc_txtrack_init(&cap->track, 0);
    while (!*cap->stop) {
        cdc_error_t err;
        cdc_err_t rc;
        int64_t wait_ms = 0;
        cdc_error_clear(&err);
        cdc_health_beat(&cap->health);
        cdc_capture_status_publish(cap, true);
        rc = session(cap, &err);
        cdc_capture_status_publish(cap, true);
        switch (cdc_capture_session_ended(cap, rc, &err, &backoff, &wait_ms)) {
        case CDC_CAPTURE_NEXT_STOP:
            return CDC_OK;
        case CDC_CAPTURE_NEXT_FAIL:
            *e = err;
            return rc;
        case CDC_CAPTURE_NEXT_STANDBY:
        case CDC_CAPTURE_NEXT_RETRY:
            sleep_ms(cap, wait_ms);
            break;
        }
    }
    return CDC_OK;
}

void cdc_capture_free(cdc_capture_t *cap)
{
    cdc_error_t ignored;
    if (cap->producer) {
        cdc_kafka_producer_flush(cap->producer, 1000, &ignored);
        cdc_kafka_producer_free(cap->producer);
    }
    cap->producer = NULL;
    cdc_source_close(&cap->src);
    cdc_source_tables_free(cap->wanted, cap->nwanted);
    cdc_capture_leaves_free(cap);
    for (size_t i = 0; i < cap->ntables; i++) {
        cdc_capture_table_t *t = &cap->tables[i];
        free(t->topic);
        free(t->schema);
        free(t->name);
        free(t->topic_error);
        cdc_capture_table_free_names(t);
        cdc_buf_free(&t->source_head);
        cdc_schema_doc_free(&t->doc);
        cdc_schema_doc_free(&t->latest);
        free(t->isnap.after);
        free(t->isnap.marked_after);
    }
    cdc_incremental_free(cap);
    free(cap->tables);
    cdc_capture_status_free(cap);
    for (size_t i = 0; i < cap->ntypes; i++)
        free(cap->types[i].name);
    free(cap->types);
    cdc_txtrack_free(&cap->track);
    cdc_pgo_scratch_free(&cap->scratch);
    cdc_buf_free(&cap->key);
    cdc_buf_free(&cap->value);
}
