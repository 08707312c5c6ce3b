/*
 * The capture's /status document (docs/operations.md): the slot, its positions and WAL
 * retention, the producer's in-flight events, and each table's state and snapshot
 * progress. Built by the session thread at most once a second (or when forced), served
 * by the HTTP threads from cap->report.doc. It reads the capture's state and changes none
 * but cap->report.doc and the retention figures it measures.
 */
#include <stdio.h>

#include <jansson.h>

#include "capture/stream_int.h"
#include "common/clock.h"

static json_t *lsn_json(uint64_t lsn)
{
    char b[32];
    snprintf(b, sizeof(b), "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
    return json_string(b);
}

/* The incremental snapshots over every table (/status "snapshots"): how many tables are
 * being read (due: chunks still to read, or their last chunk's acks awaited), done, or
 * abandoned, and their rows read against the estimates (null while a running one's table
 * has no estimate yet), for a view of many tables added at once (docs/capture.md,
 * "Incremental snapshot"). */
static json_t *snapshots_json(const cdc_capture_t *cap)
{
    json_int_t running = 0, done = 0, abandoned = 0, rows = 0, estimate = 0;
    bool known = true; /* every running snapshot has its table's estimate */
    for (size_t i = 0; i < cap->ntables; i++) {
        const cdc_capture_isnap_t *s = &cap->tables[i].isnap;
        if (!s->marked)
            continue;
        if (s->abandoned)
            abandoned++;
        else if (s->due || s->pending_marks > 0) {
            running++;
            known = known && s->estimate > 0;
        } else
            done++;
        rows += s->rows;
        estimate += s->estimate > s->rows ? s->estimate : s->rows;
    }
    return json_pack("{s:I, s:I, s:I, s:I, s:o}", "running", running, "done", done, "abandoned",
                     abandoned, "rows", rows, "estimate",
                     known ? json_integer(estimate) : json_null());
}

void cdc_capture_status_publish(cdc_capture_t *cap, bool force)
{
    int64_t now = cdc_clock_mono_coarse_ms();
    json_t *o, *tables;
    char *js;
    if (!force && now < cap->report.next_ms)
        return;
    cap->report.next_ms = now + 1000;
    if (cap->src.sql != NULL && now >= cap->report.next_retention_ms) {
        cdc_error_t e;
        cap->report.next_retention_ms = now + 5000;
        if (cdc_source_slot_retention(&cap->src, cap->cfg->slot, &cap->report.retained_wal,
                                      &cap->report.safe_wal, &e) == CDC_OK)
            cdc_metrics_gauge_set(cap->report.m_retained_wal, (double)cap->report.retained_wal);
    }
    o = json_object();
    tables = json_array();
    json_object_set_new(o, "slot", json_string(cap->cfg->slot));
    json_object_set_new(o, "insecure", json_boolean(cap->cfg->insecure));
    json_object_set_new(o, "publication", json_string(cap->cfg->publication));
    json_object_set_new(o, "state",
                        json_string(cap->slot_lost ? "slot_lost"
                                    : cap->ready   ? "streaming"
                                    : cap->standby ? "standby"
                                                   : "starting"));
    json_object_set_new(o, "confirmed_lsn", lsn_json(cap->confirmed));
    json_object_set_new(o, "server_wal_end", lsn_json(cap->src.server_wal_end));
    json_object_set_new(o, "lag_bytes",
                        json_integer(cap->src.server_wal_end > cap->confirmed
                                         ? (json_int_t)(cap->src.server_wal_end - cap->confirmed)
                                         : 0));
    json_object_set_new(o, "retained_wal_bytes", json_integer(cap->report.retained_wal));
    json_object_set_new(o, "safe_wal_bytes",
                        cap->report.safe_wal >= 0 ? json_integer(cap->report.safe_wal)
                                                  : json_null());
    json_object_set_new(o, "inflight_events",
                        json_integer(cap->producer
                                         ? (json_int_t)cdc_kafka_producer_outstanding(cap->producer)
                                         : 0));
    json_object_set_new(o, "largest_event_bytes", json_integer((json_int_t)cap->largest_event));
    json_object_set_new(o, "chunk_bytes", json_integer((json_int_t)cap->cfg->chunk_bytes));
    for (size_t i = 0; i < cap->ntables; i++) {
        const cdc_capture_table_t *t = &cap->tables[i];
        json_t *x;
        if (!t->captured && !t->failed && !t->removed && !t->excluded)
            continue;
        x = json_object();
        json_object_set_new(x, "table", json_sprintf("%s.%s", t->schema, t->name));
        json_object_set_new(x, "schema_version", json_integer(t->has_doc ? t->doc.version : 0));
        json_object_set_new(x, "error", json_boolean(t->failed));
        json_object_set_new(x, "topic", json_string(t->topic_ready ? "ready" : "pending"));
        json_object_set_new(x, "topic_error",
                            t->topic_error ? json_string(t->topic_error) : json_null());
        json_object_set_new(x, "state", json_string(cdc_capture_table_state(t)));
        if (t->removed)
            json_object_set_new(x, "removed",
                                json_pack("{s:I, s:o}", "ts_ms", (json_int_t)t->removed_ms, "lsn",
                                          lsn_json(t->removed_lsn)));
        if (t->isnap.marked) {
            json_t *sn = json_object();
            json_object_set_new(sn, "id", json_string(t->isnap.id));
            json_object_set_new(sn, "source_snapshot", json_string(t->isnap.label));
            /* done once its last chunk's marker is written: every row acked */
            json_object_set_new(
                sn, "done",
                json_boolean(!t->isnap.due && !t->isnap.abandoned && t->isnap.pending_marks == 0));
            json_object_set_new(sn, "abandoned", json_boolean(t->isnap.abandoned));
            json_object_set_new(sn, "rows", json_integer(t->isnap.rows));
            json_object_set_new(sn, "estimate", json_integer(t->isnap.estimate));
            /* reltuples is an estimate: never past 99 % before the last chunk */
            json_object_set_new(
                sn, "percent",
                !t->isnap.due && !t->isnap.abandoned ? json_integer(100)
                : t->isnap.estimate > 0
                    ? json_real(t->isnap.rows >= t->isnap.estimate
                                    ? 99.0
                                    : (double)(100 * t->isnap.rows / t->isnap.estimate))
                    : json_null());
            json_object_set_new(x, "snapshot", sn);
        }
        json_array_append_new(tables, x);
    }
    json_object_set_new(o, "tables", tables);
    json_object_set_new(o, "snapshots", snapshots_json(cap));
    js = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    cdc_http_doc_set(&cap->report.doc, js);
}

void cdc_capture_status_init(cdc_capture_t *cap)
{
    cdc_http_doc_init(&cap->report.doc);
    cap->report.safe_wal = -1;
    cap->report.m_retained_wal = cdc_metrics_gauge(
        cdc_metrics_default(), "cdc_capture_slot_retained_wal_bytes",
        "WAL PostgreSQL keeps for the slot (current WAL minus restart_lsn).", NULL);
}

void cdc_capture_status_free(cdc_capture_t *cap)
{
    cdc_http_doc_free(&cap->report.doc);
}

cdc_http_doc_t *cdc_capture_status_doc(cdc_capture_t *cap)
{
    return &cap->report.doc;
}
