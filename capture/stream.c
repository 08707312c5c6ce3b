/*
 * The capture's session loop: connect, check the setup, find or create the slot (with
 * the initial snapshot when needed), then stream pgoutput messages into Kafka events.
 * A transaction's commit LSN is confirmed to PostgreSQL only when every event of it
 * and of all earlier transactions was acknowledged by Kafka (txtrack.c). Any failure
 * of PostgreSQL or Kafka ends the session; the next one resumes from the slot's
 * confirmed position after a backoff, so nothing is skipped (duplicates are possible).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include <jansson.h>

#include "capture/capture.h"
#include "common/log.h"

#define READ_TIMEOUT_MS 100
#define POLL_EVERY 256
#define QUEUE_FULL_WAIT_MS 200
#define STATUS_MIN_GAP_MS 50

int64_t cdc_capture_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The coarse clocks are read without a timer access (tick resolution, a few ms): plenty
 * for status/heartbeat intervals and for the envelope's processing time, and called for
 * every change. */
static int64_t coarse_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

cdc_err_t cdc_capture_parse_tables(const char *list, cdc_source_table_t **t, size_t *n,
                                   cdc_error_t *e)
{
    char *copy, *save = NULL, *tok;
    size_t cap = 0;

    *t = NULL;
    *n = 0;
    if (list == NULL || *list == '\0')
        return CDC_OK;
    copy = strdup(list);
    if (copy == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        char *dot = strchr(tok, '.');
        if (*n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            cdc_source_table_t *nt = realloc(*t, ncap * sizeof(**t));
            if (nt == NULL) {
                free(copy);
                return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            }
            *t = nt;
            cap = ncap;
        }
        if (dot) {
            *dot = '\0';
            (*t)[*n].schema = strdup(tok);
            (*t)[*n].name = strdup(dot + 1);
        } else {
            (*t)[*n].schema = strdup("public");
            (*t)[*n].name = strdup(tok);
        }
        if ((*t)[*n].name[0] == '\0' || (*t)[*n].schema[0] == '\0') {
            (*n)++;
            free(copy);
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "invalid table name in --tables: expected schema.table");
        }
        (*n)++;
    }
    free(copy);
    return CDC_OK;
}

cdc_capture_table_t *cdc_capture_table_get(cdc_capture_t *cap, const char *schema, const char *name)
{
    char topic[512];
    cdc_capture_table_t *t, *nt;
    const char *labels[5];

    snprintf(topic, sizeof(topic), "%s.%s.%s", cap->cfg->topic_prefix, schema, name);
    for (size_t i = 0; i < cap->ntables; i++)
        if (strcmp(cap->tables[i].topic, topic) == 0)
            return &cap->tables[i];
    nt = realloc(cap->tables, (cap->ntables + 1) * sizeof(*nt));
    if (nt == NULL)
        return NULL;
    cap->tables = nt;
    t = &cap->tables[cap->ntables];
    memset(t, 0, sizeof(*t));
    t->topic = strdup(topic);
    t->schema = strdup(schema);
    t->name = strdup(name);
    if (t->topic == NULL || t->schema == NULL || t->name == NULL) {
        free(t->topic);
        free(t->schema);
        free(t->name);
        return NULL;
    }
    for (size_t i = 0; i < cap->nwanted; i++)
        if (strcmp(cap->wanted[i].schema, schema) == 0 && strcmp(cap->wanted[i].name, name) == 0)
            t->captured = true;
    snprintf(topic, sizeof(topic), "%s.%s", schema, name);
    labels[0] = "table";
    labels[1] = topic;
    labels[2] = NULL;
    t->m_events = cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_events_total",
                                      "Change events produced, per table.", labels);
    t->m_bytes = cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_bytes_total",
                                     "Bytes of event keys and values produced, per table.", labels);
    t->m_snapshot_rows =
        cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_snapshot_rows_total",
                            "Rows read by the initial snapshot, per table.", labels);
    t->m_error = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_table_errors",
                                   "1 while the table is not captured because of an error of "
                                   "its own (the log names it and the fix); the other tables "
                                   "are captured.",
                                   labels);
    t->m_skipped = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_skipped_changes_total",
        "Changes received for a table that were not produced: the table is in error, or a "
        "partition's change could not be mapped to its root.",
        labels);
    cap->ntables++;
    return t;
}

/* Table state by name, or NULL (never creates one). */
static cdc_capture_table_t *table_by_name(cdc_capture_t *cap, const char *schema, const char *name)
{
    for (size_t i = 0; i < cap->ntables; i++)
        if (strcmp(cap->tables[i].schema, schema) == 0 && strcmp(cap->tables[i].name, name) == 0)
            return &cap->tables[i];
    return NULL;
}

static bool is_wanted(const cdc_capture_t *cap, const char *schema, const char *name)
{
    for (size_t i = 0; i < cap->nwanted; i++)
        if (strcmp(cap->wanted[i].schema, schema) == 0 && strcmp(cap->wanted[i].name, name) == 0)
            return true;
    return false;
}

static void table_failed(cdc_capture_table_t *t, const char *msg)
{
    cdc_log_error("table %s.%s is not captured (the other tables are): %s", t->schema, t->name,
                  msg);
    t->failed = true;
    t->captured = false;
    cdc_metrics_gauge_set(t->m_error, 1);
}

cdc_err_t cdc_capture_table_fail(cdc_capture_t *cap, cdc_capture_table_t *t, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    (void)cap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    table_failed(t, msg);
    return CDC_OK;
}

/* setup->table_error of the session's setup check */
static void on_table_error(void *arg, const char *schema, const char *name, const cdc_error_t *err)
{
    cdc_capture_t *cap = arg;
    cdc_capture_table_t *t = cdc_capture_table_get(cap, schema, name);
    if (t == NULL)
        cdc_log_error("%s", err->msg);
    else
        table_failed(t, err->msg);
}

static cdc_capture_table_t *table_by_relid(cdc_capture_t *cap, uint32_t relid)
{
    for (size_t i = 0; i < cap->ntables; i++)
        if (cap->tables[i].relid == relid)
            return &cap->tables[i];
    return NULL;
}

void cdc_capture_fill_col(cdc_capture_t *cap, cdc_schema_col_t *col, uint32_t oid, int32_t typmod,
                          const char *type_name)
{
    const char *builtin = cdc_schema_pg_type_name(oid);
    uint32_t elem = cdc_schema_array_elem(oid);
    char buf[160];

    col->pg_oid = oid;
    col->typmod = typmod;
    cdc_schema_map_type(oid, typmod, &col->ice_type, &col->precision, &col->scale, &col->enc);
    col->elem_oid = elem;
    if (builtin == NULL && elem != 0) {
        snprintf(buf, sizeof(buf), "_%s", cdc_schema_pg_type_name(elem));
        builtin = buf;
    }
    if (builtin == NULL && type_name == NULL) {
        for (size_t i = 0; i < cap->ntypes; i++)
            if (cap->types[i].oid == oid)
                type_name = cap->types[i].name;
    }
    if (builtin == NULL && type_name != NULL) {
        const char *dot = strrchr(type_name, '.');
        const char *base = dot ? dot + 1 : type_name;
        if (base[0] == '_') /* an array of a user-defined type: elements as strings */
            col->enc = CDC_VENC_ARRAY;
    }
    free(col->pg_type);
    col->pg_type = strdup(builtin ? builtin : type_name ? type_name : "unknown");
}

/* ---- Kafka ---------------------------------------------------------------------------- */

static void on_delivery(void *opaque, cdc_err_t err, const cdc_error_t *detail, int32_t partition,
                        int64_t offset, void *cb_arg)
{
    cdc_capture_t *cap = cb_arg;
    (void)partition;
    (void)offset;
    if (opaque == CDC_CAPTURE_SCHEMA_OPAQUE) {
        cap->schema_ack_pending = false;
        cap->schema_ack_err = err;
    } else {
        cdc_txtrack_acked(&cap->track, (uint64_t)(uintptr_t)opaque, err == CDC_OK);
    }
    if (err != CDC_OK && err != CDC_ERR_CLOSED) {
        cdc_metrics_counter_inc(cap->m_delivery_errors);
        cdc_log_error("kafka delivery failed: %s", detail ? detail->msg : cdc_err_str(err));
    }
}

static cdc_err_t producer_open(cdc_capture_t *cap, cdc_error_t *e)
{
    cdc_kafka_producer_config_t pc = {
        .bootstrap = cap->cfg->kafka_bootstrap,
        .client_id = "cdc-capture",
        .compression = cap->cfg->kafka_compression,
        .linger_ms = (int)cap->cfg->kafka_linger_ms,
        .queue_max_messages = cap->cfg->max_inflight,
        .queue_max_kbytes = cap->cfg->max_inflight_bytes / 1024,
        .delivery_timeout_ms = 0,
        .queue_full_timeout_ms = QUEUE_FULL_WAIT_MS,
        .properties = cap->cfg->kafka_properties,
        .on_delivery = on_delivery,
        .cb_arg = cap,
    };
    return cdc_kafka_producer_new(&pc, &cap->producer, e);
}

/* Sends a status update with what Kafka has acked so far. */
static cdc_err_t send_status(cdc_capture_t *cap, cdc_error_t *e)
{
    uint64_t c = cdc_txtrack_confirmable(&cap->track);
    cdc_err_t rc;
    if (c > cap->confirmed)
        cap->confirmed = c;
    rc = cdc_source_feedback(&cap->src, cap->confirmed, e);
    cap->last_status_ms = mono_ms();
    cdc_metrics_gauge_set(cap->m_confirmed_lsn, (double)cap->confirmed);
    if (cap->src.server_wal_end > cap->confirmed)
        cdc_metrics_gauge_set(cap->m_lag_bytes, (double)(cap->src.server_wal_end - cap->confirmed));
    else
        cdc_metrics_gauge_set(cap->m_lag_bytes, 0);
    cdc_metrics_gauge_set(cap->m_inflight, (double)cap->track.inflight);
    return rc;
}

cdc_err_t cdc_capture_produce(cdc_capture_t *cap, cdc_capture_table_t *t, int32_t partition,
                              const cdc_buf_t *key, const cdc_buf_t *value, int64_t ts_ms,
                              uint64_t tx, cdc_error_t *e)
{
    /* No headers: the schema version is the envelope's source.schema_version. librdkafka
     * allocates a header list per message on both ends (list, array and one block per
     * header), which was the largest per-event cost of the producer path and about 9 % of
     * the worker's record path. */
    cdc_kafka_record_t rec = {.topic = t->topic,
                              .partition = partition,
                              .key = key ? key->data : NULL,
                              .key_len = key ? key->len : 0,
                              .value = value->data,
                              .value_len = value->len,
                              .timestamp_ms = ts_ms,
                              .opaque = (void *)(uintptr_t)tx};
    cdc_err_t rc;

    if (value->oom || (key && key->oom))
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory encoding an event of %s", t->topic);
    for (;;) {
        rc = cdc_kafka_produce(cap->producer, &rec, e);
        if (rc != CDC_ERR_TIMEOUT)
            break;
        /* producer queue full: backpressure. Keep the walsender happy meanwhile. */
        if (*cap->stop)
            return cdc_error_set(e, CDC_ERR_CLOSED, "stopping while the producer queue is full");
        if (cap->src.repl && send_status(cap, e) != CDC_OK)
            return e->code;
        if (cap->track.failed)
            return cdc_error_set(e, CDC_ERR_KAFKA, "a Kafka delivery failed");
    }
    if (rc != CDC_OK)
        return rc;
    cdc_txtrack_add(&cap->track, tx);
    cdc_metrics_counter_inc(t->m_events);
    cdc_metrics_counter_add(t->m_bytes, (double)(value->len + (key ? key->len : 0)));
    return CDC_OK;
}

/* ---- change handling ---------------------------------------------------------------- */

static cdc_err_t on_relation(cdc_capture_t *cap, const cdc_pgo_msg_t *m, cdc_error_t *e)
{
    cdc_capture_table_t *t, *old;
    cdc_schema_doc_t doc = {0};
    const char **names = NULL;
    bool *notnull = NULL;
    int32_t *attnum = NULL;
    bool *hasdef = NULL;
    int key = 0;
    cdc_err_t rc = CDC_ERR_NOMEM;
    uint16_t n = m->u.relation.ncols;

    t = cdc_capture_table_get(cap, m->u.relation.nspname, m->u.relation.relname);
    if (t == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    old = table_by_relid(cap, m->u.relation.relid);
    if (old && old != t)
        old->relid = 0; /* renamed: the oid now belongs to another name */
    t->relid = m->u.relation.relid;
    if (!t->captured) {
        cdc_log_debug("ignoring relation %s.%s (not in --tables)", t->schema, t->name);
        return CDC_OK;
    }
    doc.format = CDC_SCHEMA_FORMAT;
    doc.pg_schema = strdup(t->schema);
    doc.pg_table = strdup(t->name);
    doc.relid = m->u.relation.relid;
    doc.replica_identity = m->u.relation.replident;
    doc.cols = calloc(n ? n : 1, sizeof(*doc.cols));
    names = calloc(n ? n : 1, sizeof(*names));
    notnull = calloc(n ? n : 1, sizeof(*notnull));
    attnum = calloc(n ? n : 1, sizeof(*attnum));
    hasdef = calloc(n ? n : 1, sizeof(*hasdef));
    if (doc.cols == NULL || names == NULL || notnull == NULL || attnum == NULL || hasdef == NULL ||
        doc.pg_schema == NULL || doc.pg_table == NULL)
        goto fail;
    doc.ncols = n;
    for (uint16_t i = 0; i < n; i++) {
        const cdc_pgo_column_t *c = &m->u.relation.cols[i];
        doc.cols[i].name = strdup(c->name);
        if (doc.cols[i].name == NULL)
            goto fail;
        names[i] = doc.cols[i].name;
        cdc_capture_fill_col(cap, &doc.cols[i], c->type_oid, c->typmod, NULL);
        doc.cols[i].key = c->key ? ++key : 0;
    }
    if (cdc_source_columns(&cap->src, doc.relid, names, n, notnull, attnum, hasdef, e) != CDC_OK) {
        rc = e->code;
        goto fail;
    }
    for (uint16_t i = 0; i < n; i++) {
        doc.cols[i].nullable = doc.cols[i].key == 0 && !notnull[i];
        doc.cols[i].attnum = attnum[i];
        doc.cols[i].has_default = hasdef[i];
        if (attnum[i] == 0)
            cdc_log_warn("column \"%s\" of %s.%s is no longer in the catalog (a later DDL "
                         "renamed or dropped it): its identity follows its name",
                         doc.cols[i].name, t->schema, t->name);
    }
    free(names);
    free(notnull);
    free(attnum);
    free(hasdef);
    if (key == 0) {
        cdc_schema_doc_free(&doc);
        return cdc_capture_table_fail(
            cap, t,
            "table \"%s.%s\" has no primary key and no usable replica identity "
            "(hint: add a primary key, or ALTER TABLE \"%s\".\"%s\" REPLICA "
            "IDENTITY FULL;)",
            t->schema, t->name, t->schema, t->name);
    }
    /* a Relation lists no partitions: they stay what the table's last version said */
    if (t->has_latest && t->latest.parts_known &&
        (rc = cdc_schema_doc_set_parts(&doc, t->latest.parts, t->latest.nparts)) != CDC_OK)
        goto fail;
    return cdc_capture_set_schema(cap, t, &doc, e);
fail:
    free(names);
    free(notnull);
    free(attnum);
    free(hasdef);
    cdc_schema_doc_free(&doc);
    if (rc == CDC_ERR_NOMEM)
        cdc_error_set(e, rc, "out of memory");
    return rc;
}

static cdc_err_t on_type(cdc_capture_t *cap, const cdc_pgo_msg_t *m, cdc_error_t *e)
{
    cdc_capture_type_t *nt;
    char *name = NULL;

    if (asprintf(&name, "%s.%s", m->u.type.nspname, m->u.type.typname) < 0)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < cap->ntypes; i++) {
        if (cap->types[i].oid == m->u.type.oid) {
            free(cap->types[i].name);
            cap->types[i].name = name;
            return CDC_OK;
        }
    }
    nt = realloc(cap->types, (cap->ntypes + 1) * sizeof(*nt));
    if (nt == NULL) {
        free(name);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    cap->types = nt;
    cap->types[cap->ntypes].oid = m->u.type.oid;
    cap->types[cap->ntypes].name = name;
    cap->types[cap->ntypes].is_array = m->u.type.typname[0] == '_';
    cap->ntypes++;
    return CDC_OK;
}

static cdc_err_t keepalive(cdc_capture_t *cap, cdc_error_t *e)
{
    return cap->src.repl ? send_status(cap, e) : CDC_OK;
}

/* The captured table of a change at lsn; a backfill the table is due comes first. */
static cdc_capture_table_t *captured(cdc_capture_t *cap, uint32_t relid, uint64_t lsn,
                                     cdc_error_t *e, cdc_err_t *rc)
{
    cdc_capture_table_t *t = table_by_relid(cap, relid);
    *rc = CDC_OK;
    if (t != NULL && t->failed) {
        cdc_metrics_counter_inc(t->m_skipped);
        return NULL;
    }
    if (t == NULL || !t->captured)
        return NULL;
    if (!t->has_doc) {
        *rc = cdc_error_set(e, CDC_ERR_PROTOCOL, "change for relation %u before its schema", relid);
        return NULL;
    }
    if (t->backfill_pending && (*rc = cdc_snapshot_backfill(cap, t, lsn, keepalive, e)) != CDC_OK)
        return NULL;
    return t;
}

cdc_err_t cdc_capture_emit_truncate(cdc_capture_t *cap, cdc_capture_table_t *t, uint64_t lsn,
                                    const char *snapshot, cdc_error_t *e)
{
    cdc_event_t ev = {.op = 't',
                      .schema = &t->doc,
                      .lsn = lsn,
                      .commit_lsn = cap->commit_lsn,
                      .xid = cap->xid,
                      .source_ts_ms = cap->commit_ts_ms,
                      .snapshot = snapshot,
                      .db = cap->src.db,
                      .name = cap->cfg->topic_prefix};
    cdc_err_t rc;

    ev.ts_ms = cdc_capture_now_ms();
    cdc_buf_reset(&cap->value);
    cdc_event_encode_value(&cap->value, &ev);
    /* every partition sees the truncate in order with its rows */
    for (int32_t p = 0; p < t->partitions; p++)
        if ((rc = cdc_capture_produce(cap, t, p, NULL, &cap->value, ev.ts_ms, cap->tx_id, e)) !=
            CDC_OK)
            return rc;
    return CDC_OK;
}

static cdc_err_t emit(cdc_capture_t *cap, cdc_capture_table_t *t, char op, uint64_t lsn,
                      const cdc_pgo_tuple_t *before, bool before_key_only,
                      const cdc_pgo_tuple_t *after, const cdc_pgo_tuple_t *keyrow,
                      const cdc_pgo_tuple_t *keyfallback, cdc_error_t *e)
{
    cdc_event_t ev = {.op = op,
                      .schema = &t->doc,
                      .before = before,
                      .before_key_only = before_key_only,
                      .after = after,
                      .lsn = lsn,
                      .commit_lsn = cap->commit_lsn,
                      .xid = cap->xid,
                      .source_ts_ms = cap->commit_ts_ms,
                      .ts_ms = coarse_now_ms(),
                      .snapshot = "false",
                      .db = cap->src.db,
                      .name = cap->cfg->topic_prefix,
                      .source_head = t->source_head.data,
                      .source_head_len = t->source_head.len,
                      .col_names = (const char *const *)t->col_names,
                      .col_name_lens = t->col_name_lens};

    cdc_buf_reset(&cap->key);
    cdc_buf_reset(&cap->value);
    if (!cdc_event_encode_key(&cap->key, &t->doc, keyrow, keyfallback))
        return cdc_error_set(e, CDC_ERR_PROTOCOL,
                             "change at %" PRIu64 " of %s.%s lacks a key column value", lsn,
                             t->schema, t->name);
    cdc_event_encode_value(&cap->value, &ev);
    return cdc_capture_produce(cap, t, CDC_KAFKA_PARTITION_ANY, &cap->key, &cap->value, ev.ts_ms,
                               cap->tx_id, e);
}

static cdc_err_t on_change(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn, cdc_error_t *e)
{
    cdc_capture_table_t *t;
    cdc_err_t rc;

    if (cap->tx_id == 0)
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "change outside a transaction");
    switch (m->kind) {
    case CDC_PGO_INSERT:
        t = captured(cap, m->u.insert.relid, lsn, e, &rc);
        if (t == NULL)
            return rc;
        return emit(cap, t, 'c', lsn, NULL, false, &m->u.insert.newtup, &m->u.insert.newtup, NULL,
                    e);
    case CDC_PGO_UPDATE: {
        const cdc_pgo_tuple_t *old = m->u.update.old_kind ? &m->u.update.oldtup : NULL;
        const cdc_pgo_tuple_t *nw = &m->u.update.newtup;
        t = captured(cap, m->u.update.relid, lsn, e, &rc);
        if (t == NULL)
            return rc;
        if (old && !cdc_event_same_key(&t->doc, old, nw)) {
            /* the key changed: a delete of the old key and an insert of the new one */
            rc = emit(cap, t, 'd', lsn, old, m->u.update.old_kind == 'K', NULL, old, NULL, e);
            if (rc != CDC_OK)
                return rc;
            return emit(cap, t, 'c', lsn, NULL, false, nw, nw, old, e);
        }
        return emit(cap, t, 'u', lsn, m->u.update.old_kind == 'O' ? old : NULL, false, nw, nw, old,
                    e);
    }
    case CDC_PGO_DELETE:
        t = captured(cap, m->u.del.relid, lsn, e, &rc);
        if (t == NULL)
            return rc;
        return emit(cap, t, 'd', lsn, &m->u.del.oldtup, m->u.del.old_kind == 'K', NULL,
                    &m->u.del.oldtup, NULL, e);
    case CDC_PGO_TRUNCATE:
        for (uint32_t i = 0; i < m->u.truncate.nrelids; i++) {
            t = captured(cap, m->u.truncate.relids[i], lsn, e, &rc);
            if (t == NULL) {
                if (rc != CDC_OK)
                    return rc;
                continue;
            }
            if ((rc = cdc_capture_emit_truncate(cap, t, lsn, "false", e)) != CDC_OK)
                return rc;
        }
        return CDC_OK;
    default:
        return CDC_OK;
    }
}

/* ---- partitions whose changes arrive under their own relation ------------------------ */

static cdc_capture_leaf_t *leaf_by_relid(cdc_capture_t *cap, uint32_t relid)
{
    for (size_t i = 0; i < cap->nleaves; i++)
        if (cap->leaves[i].relid == relid)
            return &cap->leaves[i];
    return NULL;
}

static void leaves_free(cdc_capture_t *cap)
{
    for (size_t i = 0; i < cap->nleaves; i++) {
        free(cap->leaves[i].name);
        free(cap->leaves[i].root_name);
        free(cap->leaves[i].map);
    }
    free(cap->leaves);
    cap->leaves = NULL;
    cap->nleaves = 0;
}

/*
 * A Relation message for a relation that is not a captured table: when it is a
 * partition of a captured table (pgoutput sends a partition under its own name when
 * the publication does not publish through the root), its changes are mapped to the
 * root: the root's Relation is built from the partition's columns in the root's column
 * order and handled as if the root had sent it, and the partition's relid is mapped.
 * *handled = false: not such a partition (the caller goes on as for any relation).
 */
static cdc_err_t on_partition_relation(cdc_capture_t *cap, const cdc_pgo_msg_t *m, bool *handled,
                                       cdc_error_t *e)
{
    const char *nsp = m->u.relation.nspname, *rel = m->u.relation.relname;
    cdc_capture_table_t *t = table_by_name(cap, nsp, rel), *root;
    cdc_capture_leaf_t *leaf;
    cdc_pgo_column_t *cols = NULL;
    cdc_pgo_msg_t synth;
    char *rs = NULL, *rn = NULL, **rcols = NULL;
    size_t nrcols = 0, k = 0;
    uint32_t root_oid = 0;
    int *map = NULL;
    bool key = false;
    cdc_err_t rc;

    *handled = false;
    if ((t != NULL && (t->captured || t->failed)) || is_wanted(cap, nsp, rel))
        return CDC_OK;
    rc = cdc_source_partition_root(&cap->src, m->u.relation.relid, &root_oid, &rs, &rn, &rcols,
                                   &nrcols, e);
    if (rc != CDC_OK)
        return rc;
    root = root_oid ? table_by_name(cap, rs, rn) : NULL;
    if (root == NULL || !root->captured)
        goto cleanup; /* not a partition of a captured table */
    *handled = true;
    leaf = leaf_by_relid(cap, m->u.relation.relid);
    if (leaf == NULL) {
        cdc_capture_leaf_t *nl = realloc(cap->leaves, (cap->nleaves + 1) * sizeof(*nl));
        if (nl == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto cleanup;
        }
        cap->leaves = nl;
        leaf = &cap->leaves[cap->nleaves++];
        memset(leaf, 0, sizeof(*leaf));
        leaf->relid = m->u.relation.relid;
        if (asprintf(&leaf->name, "%s.%s", nsp, rel) < 0)
            leaf->name = NULL;
        if (asprintf(&leaf->root_name, "%s.%s", rs, rn) < 0)
            leaf->root_name = NULL;
    }
    free(leaf->map);
    leaf->map = NULL;
    leaf->ncols = 0;
    leaf->root_relid = root_oid;
    leaf->m_skipped = root->m_skipped;
    cols = calloc(nrcols ? nrcols : 1, sizeof(*cols));
    map = calloc(nrcols ? nrcols : 1, sizeof(*map));
    if (cols == NULL || map == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    /* the root's columns, in its order, as the partition describes them */
    for (size_t i = 0; i < nrcols; i++) {
        for (uint16_t j = 0; j < m->u.relation.ncols; j++) {
            if (strcmp(m->u.relation.cols[j].name, rcols[i]) == 0) {
                cols[k] = m->u.relation.cols[j];
                key = key || cols[k].key;
                map[k++] = j;
                break;
            }
        }
    }
    if (k == 0 || !key) {
        cdc_log_error("partition %s.%s of %s.%s: its columns cannot be mapped to the root's "
                      "(no key column in common); its changes are skipped and counted",
                      nsp, rel, rs, rn);
        goto cleanup;
    }
    /* With publish_via_partition_root pgoutput sends the root's Relation and then the
     * partition's own (its changes then name the root): nothing to do for that one. */
    if (root->relid == root_oid && root->has_doc && root->doc.ncols == k) {
        bool same = true;
        for (size_t i = 0; i < k && same; i++)
            same = strcmp(root->doc.cols[i].name, cols[i].name) == 0;
        if (same)
            goto mapped;
    }
    memset(&synth, 0, sizeof(synth));
    synth.kind = CDC_PGO_RELATION;
    synth.u.relation.relid = root_oid;
    synth.u.relation.nspname = rs;
    synth.u.relation.relname = rn;
    synth.u.relation.replident = m->u.relation.replident;
    synth.u.relation.ncols = (uint16_t)k;
    synth.u.relation.cols = cols;
    rc = on_relation(cap, &synth, e);
    if (rc != CDC_OK)
        goto cleanup;
mapped:
    leaf = leaf_by_relid(cap, m->u.relation.relid);
    leaf->map = map;
    leaf->ncols = k;
    map = NULL;
cleanup:
    free(cols);
    free(map);
    for (size_t i = 0; i < nrcols; i++)
        free(rcols[i]);
    free(rcols);
    free(rs);
    free(rn);
    return rc;
}

/* The partition's row in the root's column order (vals: leaf->ncols values). */
static bool leaf_row(const cdc_capture_leaf_t *leaf, const cdc_pgo_tuple_t *in,
                     cdc_pgo_value_t *vals, cdc_pgo_tuple_t *out)
{
    for (size_t i = 0; i < leaf->ncols; i++) {
        if (leaf->map[i] >= in->ncols)
            return false;
        vals[i] = in->cols[leaf->map[i]];
    }
    out->ncols = (uint16_t)leaf->ncols;
    out->cols = vals;
    return true;
}

/* A change of a mapped partition, produced as the root's. */
static cdc_err_t on_leaf_change(cdc_capture_t *cap, cdc_capture_leaf_t *leaf,
                                const cdc_pgo_msg_t *m, uint64_t lsn, cdc_error_t *e)
{
    cdc_pgo_msg_t m2 = *m;
    cdc_pgo_value_t *v0, *v1;
    bool ok = leaf->map != NULL;

    if (ok && cap->leafvals_cap < 2 * leaf->ncols) {
        cdc_pgo_value_t *nv = realloc(cap->leafvals, 2 * leaf->ncols * sizeof(*nv));
        if (nv == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        cap->leafvals = nv;
        cap->leafvals_cap = 2 * leaf->ncols;
    }
    v0 = cap->leafvals;
    v1 = ok ? cap->leafvals + leaf->ncols : NULL;
    switch (m->kind) {
    case CDC_PGO_INSERT:
        m2.u.insert.relid = leaf->root_relid;
        ok = ok && leaf_row(leaf, &m->u.insert.newtup, v0, &m2.u.insert.newtup);
        break;
    case CDC_PGO_UPDATE:
        m2.u.update.relid = leaf->root_relid;
        ok = ok && leaf_row(leaf, &m->u.update.newtup, v0, &m2.u.update.newtup);
        if (m->u.update.old_kind)
            ok = ok && leaf_row(leaf, &m->u.update.oldtup, v1, &m2.u.update.oldtup);
        break;
    case CDC_PGO_DELETE:
        m2.u.del.relid = leaf->root_relid;
        ok = ok && leaf_row(leaf, &m->u.del.oldtup, v0, &m2.u.del.oldtup);
        break;
    default:
        return CDC_OK;
    }
    if (!leaf->warned) {
        leaf->warned = true;
        cdc_log_warn("changes of partition %s arrive under its own name (the publication "
                     "does not publish through the root, or did not when they were written): "
                     "producing them as %s's",
                     leaf->name ? leaf->name : "?", leaf->root_name ? leaf->root_name : "?");
    }
    if (!ok) {
        cdc_metrics_counter_inc(leaf->m_skipped);
        cdc_log_warn("change at %X/%X of partition %s could not be mapped to its root: skipped",
                     (unsigned)(lsn >> 32), (unsigned)lsn, leaf->name ? leaf->name : "?");
        return CDC_OK;
    }
    return on_change(cap, &m2, lsn, e);
}

/*
 * A TRUNCATE naming mapped partitions: a partition's truncate cannot be expressed as
 * the root's (that would empty the whole table), so it is skipped, logged and counted;
 * the other relations are handled as usual.
 */
static cdc_err_t on_truncate_leaves(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                                    cdc_error_t *e)
{
    cdc_pgo_msg_t m2 = *m;
    uint32_t *rel = calloc(m->u.truncate.nrelids ? m->u.truncate.nrelids : 1, sizeof(*rel));
    uint32_t n = 0;
    cdc_err_t rc = CDC_OK;

    if (rel == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < m->u.truncate.nrelids; i++) {
        const cdc_capture_leaf_t *leaf = leaf_by_relid(cap, m->u.truncate.relids[i]);
        if (leaf == NULL) {
            rel[n++] = m->u.truncate.relids[i];
            continue;
        }
        cdc_metrics_counter_inc(leaf->m_skipped);
        cdc_log_warn("truncate of partition %s at %X/%X skipped: it arrived under the "
                     "partition's name, and a truncate of the root would remove every "
                     "partition's rows",
                     leaf->name ? leaf->name : "?", (unsigned)(lsn >> 32), (unsigned)lsn);
    }
    m2.u.truncate.nrelids = n;
    m2.u.truncate.relids = rel;
    if (n > 0)
        rc = on_change(cap, &m2, lsn, e);
    free(rel);
    return rc;
}

static uint32_t change_relid(const cdc_pgo_msg_t *m)
{
    switch (m->kind) {
    case CDC_PGO_INSERT:
        return m->u.insert.relid;
    case CDC_PGO_UPDATE:
        return m->u.update.relid;
    case CDC_PGO_DELETE:
        return m->u.del.relid;
    default:
        return 0;
    }
}

/*
 * A Relation message: a mapped partition's, or any other (on_relation). A table that
 * failed in the stream (e.g. it lost its key) gets another chance with its next
 * Relation message, which PostgreSQL sends after the table's definition changed.
 */
static cdc_err_t relation(cdc_capture_t *cap, const cdc_pgo_msg_t *m, cdc_error_t *e)
{
    const char *nsp = m->u.relation.nspname, *rel = m->u.relation.relname;
    cdc_capture_table_t *t;
    bool handled = false, retry = false;
    cdc_err_t rc = on_partition_relation(cap, m, &handled, e);

    if (rc != CDC_OK || handled)
        return rc;
    t = table_by_name(cap, nsp, rel);
    if (t != NULL && t->failed && is_wanted(cap, nsp, rel)) {
        t->captured = true;
        retry = true;
    }
    rc = on_relation(cap, m, e);
    t = table_by_name(cap, nsp, rel);
    if (rc == CDC_OK && retry && t != NULL && t->captured) {
        t->failed = false;
        cdc_metrics_gauge_set(t->m_error, 0);
        cdc_log_info("table %s.%s is captured again", t->schema, t->name);
    }
    return rc;
}

/* ---- schema probe: a DDL no change followed (docs/capture.md, "Backfill after DDL") --- */

#define PROBE_PREFIX "cdc.schema"

/* True when the catalog's document has the columns of t's current one (ids aside). */
static bool same_catalog_columns(const cdc_schema_doc_t *cat, const cdc_schema_doc_t *doc)
{
    if (cat->ncols != doc->ncols || cat->replica_identity != doc->replica_identity)
        return false;
    for (size_t i = 0; i < cat->ncols; i++) {
        const cdc_schema_col_t *x = &cat->cols[i], *y = &doc->cols[i];
        if (strcmp(x->name, y->name) != 0 || x->pg_oid != y->pg_oid || x->typmod != y->typmod ||
            x->key != y->key || x->nullable != y->nullable ||
            (y->attnum > 0 && x->attnum != y->attnum))
            return false;
    }
    /* partitions attached or detached (when the current version lists them) */
    return !doc->parts_known ||
           (cat->nparts == doc->nparts &&
            (cat->nparts == 0 ||
             memcmp(cat->parts, doc->parts, cat->nparts * sizeof(*cat->parts)) == 0));
}

/*
 * For each captured table whose catalog columns differ from its current schema version,
 * writes the catalog's columns into the WAL as a transactional logical message, under a
 * lock that keeps DDL of the table out until it commits: decoded, the message is the
 * table's exact shape at its position (on_probe). A table with a probe on its way gets
 * no other until the message arrived (or a minute passed).
 */
static cdc_err_t probe_schemas(cdc_capture_t *cap, cdc_error_t *e)
{
    int64_t now = mono_ms();
    for (size_t i = 0; i < cap->ntables; i++) {
        cdc_capture_table_t *t = &cap->tables[i];
        cdc_schema_doc_t cat;
        char *json = NULL;
        cdc_err_t rc;
        bool same;
        if (!t->captured || !t->has_doc || t->failed || t->relid == 0 ||
            (t->probe_sent_ms != 0 && now - t->probe_sent_ms < 60000))
            continue;
        if ((rc = cdc_capture_table_catalog(cap, t, &json, e)) != CDC_OK)
            return rc;
        if (json == NULL)
            continue; /* dropped: nothing to describe */
        rc = cdc_capture_catalog_doc(cap, t, json, &cat, e);
        if (rc == CDC_OK && cat.relid != t->relid) {
            cdc_schema_doc_free(&cat);
            continue; /* another table of that name now: its Relation tells */
        }
        free(json);
        if (rc != CDC_OK) {
            cdc_error_clear(e);
            continue; /* no key now: its next Relation reports it */
        }
        same = same_catalog_columns(&cat, &t->doc);
        cdc_schema_doc_free(&cat);
        if (same)
            continue;
        rc = cdc_source_schema_probe(&cap->src, t->schema, t->name, PROBE_PREFIX, e);
        if (rc == CDC_ERR_CONFLICT) { /* DDL holds the table: next round */
            cdc_error_clear(e);
            continue;
        }
        if (rc != CDC_OK)
            return rc;
        t->probe_sent_ms = now;
        cdc_log_info("%s.%s: the catalog's columns differ from schema version %" PRId64
                     " and no change followed: probe written to the stream",
                     t->schema, t->name, t->doc.version);
    }
    return CDC_OK;
}

/* A probe decoded: its columns become the table's schema at this position. */
static cdc_err_t on_probe(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn, cdc_error_t *e)
{
    char *text = strndup(m->u.message.content, m->u.message.len);
    cdc_capture_table_t *t;
    cdc_schema_doc_t doc;
    cdc_err_t rc;

    if (text == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    rc = cdc_capture_catalog_doc(cap, NULL, text, &doc, e);
    free(text);
    if (rc != CDC_OK) {
        /* no key (reported by the table's next Relation) or not ours: nothing to apply */
        cdc_log_debug("schema probe at %" PRIu64 " ignored: %s", lsn, e->msg);
        cdc_error_clear(e);
        return CDC_OK;
    }
    t = table_by_relid(cap, doc.relid);
    if (t == NULL || !t->captured || t->failed || cap->tx_id == 0) {
        cdc_schema_doc_free(&doc);
        return CDC_OK;
    }
    t->probe_sent_ms = 0;
    free(doc.pg_schema);
    free(doc.pg_table);
    doc.pg_schema = strdup(t->schema);
    doc.pg_table = strdup(t->name);
    if (doc.pg_schema == NULL || doc.pg_table == NULL) {
        cdc_schema_doc_free(&doc);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    if ((rc = cdc_capture_set_schema(cap, t, &doc, e)) != CDC_OK)
        return rc;
    if (t->backfill_pending)
        return cdc_snapshot_backfill(cap, t, lsn, keepalive, e);
    return CDC_OK;
}

static cdc_err_t on_message(cdc_capture_t *cap, const uint8_t *data, size_t len, uint64_t lsn,
                            cdc_error_t *e)
{
    cdc_pgo_msg_t m;
    cdc_err_t rc = cdc_pgo_decode(data, len, &cap->scratch, &m, e);

    if (rc != CDC_OK)
        return rc;
    switch (m.kind) {
    case CDC_PGO_BEGIN:
        cap->tx_id = cdc_txtrack_begin(&cap->track);
        if (cap->tx_id == 0)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory tracking transactions");
        cap->xid = m.u.begin.xid;
        cap->commit_lsn = m.u.begin.final_lsn;
        cap->commit_ts_ms = (m.u.begin.commit_ts + CDC_PG_EPOCH_OFFSET_US) / 1000;
        cap->src.caught_up = coarse_now_ms() - cap->commit_ts_ms < CDC_SOURCE_FRESH_MS;
        return CDC_OK;
    case CDC_PGO_COMMIT:
        if (cap->tx_id == 0)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "commit without begin");
        cdc_txtrack_commit(&cap->track, cap->tx_id, m.u.commit.end_lsn);
        cap->tx_id = 0;
        cdc_metrics_counter_inc(cap->m_transactions);
        return CDC_OK;
    case CDC_PGO_RELATION:
        return relation(cap, &m, e);
    case CDC_PGO_TYPE:
        return on_type(cap, &m, e);
    case CDC_PGO_MESSAGE:
        if ((m.u.message.flags & 1) && strcmp(m.u.message.prefix, PROBE_PREFIX) == 0)
            return on_probe(cap, &m, lsn, e);
        return CDC_OK; /* heartbeats and foreign messages carry no row changes */
    case CDC_PGO_ORIGIN:
        return CDC_OK;
    case CDC_PGO_TRUNCATE:
        if (cap->nleaves > 0)
            return on_truncate_leaves(cap, &m, lsn, e);
        return on_change(cap, &m, lsn, e);
    default:
        if (cap->nleaves > 0) {
            cdc_capture_leaf_t *leaf = leaf_by_relid(cap, change_relid(&m));
            if (leaf != NULL) {
                if (cap->tx_id == 0)
                    return cdc_error_set(e, CDC_ERR_PROTOCOL, "change outside a transaction");
                return on_leaf_change(cap, leaf, &m, lsn, e);
            }
        }
        return on_change(cap, &m, lsn, e);
    }
}

/* ---- session ----------------------------------------------------------------------- */

static cdc_err_t drain(cdc_capture_t *cap, cdc_error_t *e)
{
    int64_t deadline = mono_ms() + cap->cfg->drain_timeout_ms;
    cdc_error_t ignored;

    (void)e;
    while (cap->producer && cdc_kafka_producer_outstanding(cap->producer) > 0 &&
           mono_ms() < deadline)
        cdc_kafka_producer_flush(cap->producer, 200, &ignored);
    if (cap->src.repl && send_status(cap, &ignored) == CDC_OK)
        cdc_log_info("confirmed %X/%X to PostgreSQL", (unsigned)(cap->confirmed >> 32),
                     (unsigned)cap->confirmed);
    return CDC_OK;
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
    if (strcmp(cap->cfg->slot_busy, "fail") == 0)
        return cdc_error_set(e, CDC_ERR_CONFLICT,
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

static cdc_err_t prepare_slot(cdc_capture_t *cap, uint64_t *start, cdc_error_t *e)
{
    bool exists, lost, initial = strcmp(cap->cfg->snapshot_mode, "initial") == 0;
    int active;
    uint64_t confirmed = 0, cp = 0;
    char snapname[64] = "";
    cdc_err_t rc;

    rc = cdc_source_slot_info(&cap->src, cap->cfg->slot, &exists, &confirmed, &lost, &active, e);
    if (rc == CDC_OK && exists && active != 0)
        rc = slot_in_use(cap, active, e);
    if (rc != CDC_OK)
        return rc;
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
        if (lost && (rc = cdc_source_drop_slot(&cap->src, cap->cfg->slot, e)) != CDC_OK)
            return rc;
        exists = false;
        initial = true;
        cap->resnapshot = true;
    }
    if (exists && initial && !cap->snapshot_marked) {
        cdc_log_warn("slot %s exists but its initial snapshot never completed: dropping the "
                     "slot and redoing the snapshot",
                     cap->cfg->slot);
        rc = cdc_source_drop_slot(&cap->src, cap->cfg->slot, e);
        if (rc != CDC_OK)
            return rc;
        exists = false;
    }
    if (exists) {
        *start = 0; /* the server resumes at confirmed_flush_lsn */
        cap->confirmed = confirmed;
        cdc_log_info("resuming slot %s at %X/%X", cap->cfg->slot, (unsigned)(confirmed >> 32),
                     (unsigned)confirmed);
        return CDC_OK;
    }
    rc = cdc_source_create_slot(&cap->src, cap->cfg->slot, initial, &cp, snapname, e);
    if (rc != CDC_OK)
        return rc;
    cdc_log_info("created slot %s at consistent point %X/%X", cap->cfg->slot, (unsigned)(cp >> 32),
                 (unsigned)cp);
    cap->confirmed = cp;
    cdc_txtrack_free(&cap->track);
    cdc_txtrack_init(&cap->track, cp);
    if (initial) {
        rc = cdc_snapshot_run(cap, snapname, cp, e);
        if (rc != CDC_OK)
            return rc;
    }
    cap->resnapshot = false;
    cdc_metrics_gauge_set(cap->m_slot_lost, 0);
    rc = cdc_registry_mark_snapshot(cap, cp, initial ? "initial" : "never", e);
    if (rc != CDC_OK)
        return rc;
    *start = cp;
    return CDC_OK;
}

static cdc_err_t session(cdc_capture_t *cap, cdc_error_t *e)
{
    cdc_source_setup_t setup = {.slot = cap->cfg->slot,
                                .publication = cap->cfg->publication,
                                .create_publication = cap->cfg->create_publication,
                                .table_error = on_table_error,
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
    rc = cdc_source_connect_sql(&cap->src, cap->cfg->pg_dsn, e);
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
    leaves_free(cap);
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
        rc = producer_open(cap, e);
        if (rc != CDC_OK)
            goto cleanup;
    }
    if (!cap->registry_loaded) {
        rc = cdc_registry_load(cap, e);
        if (rc != CDC_OK)
            goto cleanup;
    }
    rc = cdc_source_connect_repl(&cap->src, cap->cfg->pg_dsn, e);
    if (rc != CDC_OK)
        goto cleanup;
    cdc_txtrack_free(&cap->track);
    cdc_txtrack_init(&cap->track, 0);
    rc = prepare_slot(cap, &start, e);
    if (rc != CDC_OK)
        goto cleanup;
    cdc_txtrack_free(&cap->track);
    cdc_txtrack_init(&cap->track, cap->confirmed);
    cap->tx_id = 0;
    /* relation ids are re-announced by Relation messages in every new stream */
    for (size_t i = 0; i < cap->ntables; i++)
        cap->tables[i].relid = 0;
    cap->src.coalesce_ms = (int)cap->cfg->read_coalesce_ms;
    cap->src.caught_up = false; /* until a fresh transaction shows it */
    cap->src.cycle_bytes = 0;
    rc = cdc_source_start(&cap->src, cap->cfg->slot, cap->cfg->publication, start, e);
    if (rc != CDC_OK)
        goto cleanup;
    cap->ready = true;
    cap->streamed = true;
    cap->last_status_ms = mono_ms();
    cap->last_heartbeat_ms = mono_ms();
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

        rc = cdc_source_read(&cap->src, READ_TIMEOUT_MS, &ev, &data, &len, &lsn, &reply, e);
        if (rc != CDC_OK)
            goto cleanup;
        if (ev == CDC_SRC_DATA) {
            rc = on_message(cap, data, len, lsn, e);
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
        now = mono_ms();
        /* Between messages (no data this round: the backlog is drained or the server is
         * quiet) confirm what Kafka acked without waiting a whole status interval, but
         * at most every STATUS_MIN_GAP_MS: each update also wakes the walsender. */
        if (reply || now - cap->last_status_ms >= cap->cfg->status_interval_ms ||
            (ev != CDC_SRC_DATA && now - cap->last_status_ms >= STATUS_MIN_GAP_MS &&
             cdc_txtrack_confirmable(&cap->track) > cap->confirmed)) {
            rc = send_status(cap, e);
            if (rc != CDC_OK)
                goto cleanup;
        }
        if (cap->cfg->schema_probe_interval_ms > 0 &&
            now - cap->last_probe_ms >= cap->cfg->schema_probe_interval_ms) {
            cap->last_probe_ms = now;
            rc = probe_schemas(cap, e);
            if (rc == CDC_ERR_UNAVAILABLE)
                goto cleanup;
            if (rc != CDC_OK)
                cdc_log_warn("schema probe failed: %s", e->msg);
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
        drain(cap, e);
        rc = CDC_OK;
    } else if (cap->producer) {
        /* Let in-flight events finish against this session's tracker and confirm what
         * Kafka acked; a producer that cannot drain is replaced so that no late delivery
         * report reaches the next session's tracker. */
        cdc_error_t ignored;
        int64_t deadline = mono_ms() + cap->cfg->drain_timeout_ms;
        while (cdc_kafka_producer_outstanding(cap->producer) > 0 && mono_ms() < deadline &&
               cdc_kafka_producer_fatal(cap->producer, &ignored) == CDC_OK)
            cdc_kafka_producer_flush(cap->producer, 200, &ignored);
        if (cdc_kafka_producer_outstanding(cap->producer) > 0 ||
            cdc_kafka_producer_fatal(cap->producer, &ignored) != CDC_OK) {
            cdc_kafka_producer_free(cap->producer);
            cap->producer = NULL;
        }
        if (cap->src.repl)
            send_status(cap, &ignored);
    }
    cdc_source_stop(&cap->src);
    cdc_source_close(&cap->src);
    cdc_source_tables_free(configured, nconfigured);
    return rc;
}

static void sleep_ms(cdc_capture_t *cap, int64_t ms)
{
    int64_t end = mono_ms() + ms;
    while (!*cap->stop && mono_ms() < end) {
        struct timeval tv = {0, 50000};
        select(0, NULL, NULL, NULL, &tv);
    }
}

static json_t *lsn_json(uint64_t lsn)
{
    char b[32];
    snprintf(b, sizeof(b), "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
    return json_string(b);
}

void cdc_capture_status_publish(cdc_capture_t *cap, bool force)
{
    int64_t now = mono_ms();
    json_t *o, *tables;
    char *js;
    if (!force && now < cap->next_status_ms)
        return;
    cap->next_status_ms = now + 1000;
    if (cap->src.sql != NULL && now >= cap->next_retention_ms) {
        cdc_error_t e;
        cap->next_retention_ms = now + 5000;
        if (cdc_source_slot_retention(&cap->src, cap->cfg->slot, &cap->retained_wal, &cap->safe_wal,
                                      &e) == CDC_OK)
            cdc_metrics_gauge_set(cap->m_retained_wal, (double)cap->retained_wal);
    }
    o = json_object();
    tables = json_array();
    json_object_set_new(o, "slot", json_string(cap->cfg->slot));
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
    json_object_set_new(o, "retained_wal_bytes", json_integer(cap->retained_wal));
    json_object_set_new(o, "safe_wal_bytes",
                        cap->safe_wal >= 0 ? json_integer(cap->safe_wal) : json_null());
    json_object_set_new(o, "inflight_events",
                        json_integer(cap->producer
                                         ? (json_int_t)cdc_kafka_producer_outstanding(cap->producer)
                                         : 0));
    for (size_t i = 0; i < cap->ntables; i++) {
        const cdc_capture_table_t *t = &cap->tables[i];
        json_t *x;
        if (!t->captured && !t->failed)
            continue;
        x = json_object();
        json_object_set_new(x, "table", json_sprintf("%s.%s", t->schema, t->name));
        json_object_set_new(x, "schema_version", json_integer(t->has_doc ? t->doc.version : 0));
        json_object_set_new(x, "error", json_boolean(t->failed));
        json_array_append_new(tables, x);
    }
    json_object_set_new(o, "tables", tables);
    js = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    cdc_http_doc_set(&cap->status, js);
}

cdc_err_t cdc_capture_run(cdc_capture_t *cap, cdc_error_t *e)
{
    int64_t backoff = 500;
    const char *lbl[] = {NULL};
    (void)lbl;

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
    cap->m_snapshot_tables_total =
        cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_snapshot_tables_total",
                          "Tables the running or last snapshot reads.", NULL);
    cap->m_heartbeats = cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_heartbeats_total",
                                            "Heartbeat messages emitted.", NULL);
    cap->m_reconnects = cdc_metrics_counter(cdc_metrics_default(), "cdc_capture_reconnects_total",
                                            "Sessions restarted after an error.", NULL);
    cap->m_standby = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_standby",
                                       "1 while another process streams the slot and this "
                                       "capture waits to take it over.",
                                       NULL);
    cap->m_retained_wal = cdc_metrics_gauge(
        cdc_metrics_default(), "cdc_capture_slot_retained_wal_bytes",
        "WAL PostgreSQL keeps for the slot (current WAL minus restart_lsn).", NULL);
    cap->m_slot_lost = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_slot_lost",
                                         "1 when the slot this capture streamed from was dropped "
                                         "or invalidated (docs/capture.md, \"Slot lost\").",
                                         NULL);
    cdc_txtrack_init(&cap->track, 0);
    while (!*cap->stop) {
        cdc_error_t err;
        cdc_err_t rc;
        cdc_error_clear(&err);
        cdc_capture_status_publish(cap, true);
        rc = session(cap, &err);
        cdc_capture_status_publish(cap, true);
        if (rc == CDC_OK)
            break;
        if (cap->streamed)
            backoff = 500;
        cap->streamed = false;
        if (!err.retriable && rc != CDC_ERR_UNAVAILABLE && rc != CDC_ERR_TIMEOUT &&
            rc != CDC_ERR_KAFKA) {
            *e = err;
            return rc;
        }
        if (cap->slot_busy) {
            /* a standby: checks the slot every second, says so every minute */
            cap->slot_busy = false;
            if (mono_ms() - cap->standby_logged_ms >= 60000) {
                cap->standby_logged_ms = mono_ms();
                cdc_log_warn("%s", err.msg);
            }
            sleep_ms(cap, 1000);
            continue;
        }
        cdc_log_warn("capture session ended: %s; retrying in %" PRId64 " ms", err.msg, backoff);
        cdc_metrics_counter_inc(cap->m_reconnects);
        sleep_ms(cap, backoff);
        backoff =
            backoff * 2 > cap->cfg->reconnect_max_ms ? cap->cfg->reconnect_max_ms : backoff * 2;
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
    leaves_free(cap);
    free(cap->leafvals);
    for (size_t i = 0; i < cap->ntables; i++) {
        cdc_capture_table_t *t = &cap->tables[i];
        free(t->topic);
        free(t->schema);
        free(t->name);
        cdc_capture_table_free_names(t);
        cdc_buf_free(&t->source_head);
        cdc_schema_doc_free(&t->doc);
        cdc_schema_doc_free(&t->latest);
    }
    free(cap->tables);
    cdc_http_doc_free(&cap->status);
    for (size_t i = 0; i < cap->ntypes; i++)
        free(cap->types[i].name);
    free(cap->types);
    cdc_txtrack_free(&cap->track);
    cdc_pgo_scratch_free(&cap->scratch);
    cdc_buf_free(&cap->key);
    cdc_buf_free(&cap->value);
}
