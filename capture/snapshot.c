/*
 * Initial snapshot: reads every captured table inside the snapshot the slot exported
 * when it was created (SET TRANSACTION SNAPSHOT on the normal connection), so the rows
 * are exactly those committed before the slot's consistent point; streaming then starts
 * at that point, with no gap and no overlap. Each table is read through a cursor in
 * chunks of --snapshot-chunk rows (memory stays bounded) and emitted as op "r" events.
 * A capture killed during the snapshot never wrote the snapshot marker, so the next
 * start drops the slot and snapshots again (duplicates are possible, gaps are not).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "capture/capture.h"
#include "common/clock.h"
#include "common/log.h"

static cdc_err_t exec(cdc_pg_t *c, const char *sql, cdc_error_t *e)
{
    cdc_pg_result_t *r = cdc_pg_exec(c, sql);
    cdc_pg_status_t st = cdc_pg_status(r);
    if (st != CDC_PG_COMMAND && st != CDC_PG_TUPLES) {
        cdc_err_t code = cdc_pg_error(c, r, CDC_ERR_SOURCE, e, "snapshot query failed");
        e->retriable = true;
        cdc_pg_clear(r);
        return code;
    }
    cdc_pg_clear(r);
    return CDC_OK;
}

cdc_err_t cdc_capture_catalog_doc(cdc_capture_t *cap, const cdc_capture_table_t *t,
                                  const char *json, cdc_schema_doc_t *doc, cdc_error_t *e)
{
    json_error_t jerr;
    json_t *root = json ? json_loads(json, 0, &jerr) : NULL, *cols = json_object_get(root, "cols");
    const char *ri = json_string_value(json_object_get(root, "replident"));
    const char *schema = t ? t->schema : "?", *name = t ? t->name : "?";
    int key = 0;
    cdc_err_t rc;

    memset(doc, 0, sizeof(*doc));
    if (!json_is_array(cols) || ri == NULL) {
        json_decref(root);
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "no columns for %s.%s in the catalog", schema,
                             name);
    }
    doc->format = CDC_SCHEMA_FORMAT;
    doc->pg_schema = strdup(schema);
    doc->pg_table = strdup(name);
    doc->relid = (uint32_t)json_integer_value(json_object_get(root, "relid"));
    doc->replica_identity = ri[0];
    doc->cols = calloc(json_array_size(cols) ? json_array_size(cols) : 1, sizeof(*doc->cols));
    if (doc->cols == NULL || doc->pg_schema == NULL || doc->pg_table == NULL) {
        json_decref(root);
        cdc_schema_doc_free(doc);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < json_array_size(cols); i++) {
        json_t *o = json_array_get(cols, i);
        cdc_schema_col_t *c = &doc->cols[doc->ncols];
        const char *name = json_string_value(json_object_get(o, "name"));
        if (name == NULL || (c->name = strdup(name)) == NULL) {
            json_decref(root);
            cdc_schema_doc_free(doc);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        doc->ncols++;
        cdc_capture_fill_col(cap, c, (uint32_t)json_integer_value(json_object_get(o, "oid")),
                             (int32_t)json_integer_value(json_object_get(o, "typmod")),
                             (int)json_integer_value(json_object_get(o, "ndims")),
                             json_string_value(json_object_get(o, "type")));
        c->key = json_is_true(json_object_get(o, "key")) ? ++key : 0;
        c->attnum = (int32_t)json_integer_value(json_object_get(o, "attnum"));
        c->has_default = json_is_true(json_object_get(o, "hasdef"));
        c->nullable = c->key == 0 && !json_is_true(json_object_get(o, "notnull"));
    }
    char *parts = json_dumps(json_object_get(root, "parts"), JSON_COMPACT | JSON_ENCODE_ANY);
    rc = parts != NULL ? cdc_schema_doc_parts_from_json(doc, parts) : CDC_OK;
    free(parts);
    if (rc != CDC_OK) {
        json_decref(root);
        cdc_schema_doc_free(doc);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    json_decref(root);
    if (key == 0) {
        cdc_schema_doc_free(doc);
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "table \"%s.%s\" has no primary key and no usable replica identity "
                             "(hint: add a primary key, or ALTER TABLE \"%s\".\"%s\" REPLICA "
                             "IDENTITY FULL;)",
                             schema, name, schema, name);
    }
    return CDC_OK;
}

cdc_err_t cdc_capture_table_catalog(cdc_capture_t *cap, const cdc_capture_table_t *t, char **json,
                                    cdc_error_t *e)
{
    char *reg = cdc_pg_qualified(cap->src.sql, t->schema, t->name);
    cdc_err_t rc;

    *json = NULL;
    rc = reg == NULL ? cdc_error_set(e, CDC_ERR_NOMEM, "out of memory")
                     : cdc_source_catalog_json(&cap->src, reg, json, e);
    free(reg);
    return rc;
}

cdc_err_t cdc_snapshot_catalog_doc(cdc_capture_t *cap, cdc_capture_table_t *t,
                                   cdc_schema_doc_t *doc, cdc_buf_t *collist, cdc_error_t *e)
{
    char *json = NULL;
    cdc_err_t rc;

    memset(doc, 0, sizeof(*doc));
    rc = cdc_capture_table_catalog(cap, t, &json, e);
    if (rc == CDC_OK && json == NULL)
        rc = cdc_error_set(e, CDC_ERR_CONFIG, "table \"%s.%s\" does not exist", t->schema, t->name);
    if (rc == CDC_OK)
        rc = cdc_capture_catalog_doc(cap, t, json, doc, e);
    free(json);
    for (size_t i = 0; rc == CDC_OK && i < doc->ncols; i++) {
        char *q = cdc_pg_ident(cap->src.sql, doc->cols[i].name);
        cdc_buf_printf(collist, "%s%s", i ? ", " : "", q ? q : "?");
        free(q);
    }
    return rc;
}

cdc_err_t cdc_snapshot_emit_rows(cdc_capture_t *cap, cdc_capture_table_t *t,
                                 const cdc_pg_result_t *r, int from, int to,
                                 const cdc_chunk_t *live, bool last, const cdc_snapshot_pos_t *pos,
                                 cdc_pgo_value_t *vals, cdc_error_t *e)
{
    cdc_pgo_tuple_t row = {(uint16_t)t->doc.ncols, vals};
    uint64_t tx = pos->tx;
    cdc_event_t ev;
    cdc_err_t rc;

    cdc_capture_event_init(&ev, cap, t, 'r');
    ev.after = &row;
    ev.lsn = pos->lsn;
    ev.commit_lsn = pos->commit_lsn;
    ev.xid = pos->xid;
    ev.source_ts_ms = pos->ts;

    for (int i = from; i < to; i++) {
        if (live != NULL && !cdc_chunk_live(live, (size_t)i))
            continue;
        for (size_t c = 0; c < t->doc.ncols; c++) {
            if (cdc_pg_isnull(r, i, (int)c)) {
                vals[c] = (cdc_pgo_value_t){CDC_PGO_VAL_NULL, NULL, 0};
            } else {
                vals[c] = (cdc_pgo_value_t){CDC_PGO_VAL_TEXT, cdc_pg_value(r, i, (int)c),
                                            (uint32_t)cdc_pg_length(r, i, (int)c)};
            }
        }
        ev.snapshot = pos->label ? pos->label : (last && i == to - 1) ? "last" : "true";
        ev.snapshot_id = pos->id;
        ev.ts_ms = cdc_clock_wall_ms();
        cdc_buf_reset(&cap->key);
        cdc_buf_reset(&cap->value);
        if (!cdc_event_encode_key(&cap->key, &t->doc, &row, NULL))
            return cdc_error_set(e, CDC_ERR_INTERNAL, "snapshot row of %s.%s without key",
                                 t->schema, t->name);
        cdc_event_encode_value(&cap->value, &ev);
        rc = cdc_capture_produce(cap, t, CDC_KAFKA_PARTITION_ANY, &cap->key, &cap->value, ev.ts_ms,
                                 tx, ev.lsn, e);
        if (rc != CDC_OK)
            return rc;
        if (pos->count)
            cdc_metrics_counter_inc(t->m_snapshot_rows);
    }
    return CDC_OK;
}

/*
 * Declares the cursor `name` over t's columns (collist from catalog_doc) and allocates
 * *vals for one row; *fetch (size >= 64) gets the statement that reads a chunk.
 */
static cdc_err_t open_cursor(cdc_capture_t *cap, const cdc_capture_table_t *t, const char *name,
                             const cdc_buf_t *collist, cdc_pgo_value_t **vals, char *fetch,
                             cdc_error_t *e)
{
    char *rel = cdc_pg_qualified(cap->src.sql, t->schema, t->name);
    cdc_buf_t sql = {0};
    cdc_err_t rc;

    *vals = calloc(t->doc.ncols ? t->doc.ncols : 1, sizeof(**vals));
    if (*vals == NULL || rel == NULL) {
        free(rel);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    cdc_buf_printf(&sql, "DECLARE %s NO SCROLL CURSOR FOR SELECT %s FROM %s", name,
                   collist->data ? collist->data : "", rel);
    rc = exec(cap->src.sql, sql.data, e);
    snprintf(fetch, 64, "FETCH %" PRId64 " FROM %s", cap->cfg->snapshot_chunk, name);
    free(rel);
    cdc_buf_free(&sql);
    return rc;
}

/* Reads the cursor's next chunk; NULL and e (retriable) when that fails. what names the
 * read ("snapshot", "backfill"). */
static cdc_pg_result_t *fetch_chunk(cdc_capture_t *cap, const cdc_capture_table_t *t,
                                    const char *fetch, const char *what, cdc_error_t *e)
{
    cdc_pg_result_t *r = cdc_pg_exec(cap->src.sql, fetch);
    if (cdc_pg_status(r) != CDC_PG_TUPLES) {
        cdc_pg_error(cap->src.sql, r, CDC_ERR_SOURCE, e, "%s of %s.%s failed", what, t->schema,
                     t->name);
        e->retriable = true;
        cdc_pg_clear(r);
        return NULL;
    }
    return r;
}

static cdc_err_t snapshot_table(cdc_capture_t *cap, cdc_capture_table_t *t, uint64_t cp, int64_t ts,
                                uint64_t tx, cdc_error_t *e)
{
    cdc_schema_doc_t doc;
    cdc_buf_t cols = {0};
    cdc_pgo_value_t *vals = NULL;
    cdc_pg_result_t *prev = NULL, *cur = NULL;
    char fetch[64];
    int64_t rows = 0;
    cdc_err_t rc;

    rc = cdc_snapshot_catalog_doc(cap, t, &doc, &cols, e);
    if (rc != CDC_OK)
        goto cleanup;
    rc = cdc_capture_set_schema(cap, t, &doc, e);
    if (rc != CDC_OK)
        goto cleanup;
    if (cap->resnapshot) {
        /* the slot was lost (--slot-lost=resnapshot): the mirror starts over from these
         * rows, after a truncate (a backfill's: no changelog row) just before them */
        cdc_capture_txpos_t stream = *cdc_capture_tx(cap), own = stream;
        own.commit_lsn = cp;
        own.id = tx;
        cdc_capture_tx_set(cap, &own);
        rc = cdc_capture_emit_marker(cap, t, 't', cp - 1, "backfill", e);
        cdc_capture_tx_set(cap, &stream);
        if (rc != CDC_OK)
            goto cleanup;
    }
    rc = open_cursor(cap, t, "cdc_snapshot", &cols, &vals, fetch, e);
    if (rc != CDC_OK)
        goto cleanup;
    cdc_log_info("snapshot of %s.%s started", t->schema, t->name);
    /* one chunk is held back so the table's last row can say snapshot="last" */
    for (;;) {
        int n;
        cdc_health_beat(&cap->health);
        cur = fetch_chunk(cap, t, fetch, "snapshot", e);
        if (cur == NULL) {
            rc = e->code;
            goto cleanup;
        }
        n = cdc_pg_ntuples(cur);
        if (prev) {
            char id[24];
            cdc_capture_snapshot_id(id, sizeof(id), cp);
            cdc_snapshot_pos_t pos = {
                .lsn = cp, .commit_lsn = cp, .ts = ts, .tx = tx, .id = id, .count = true};
            rc = cdc_snapshot_emit_rows(cap, t, prev, 0, cdc_pg_ntuples(prev), NULL, n == 0, &pos,
                                        vals, e);
            if (rc != CDC_OK)
                goto cleanup;
            rows += cdc_pg_ntuples(prev);
            cdc_pg_clear(prev);
            prev = NULL;
        }
        if (n == 0)
            break;
        prev = cur;
        cur = NULL;
        if (*cap->stop) {
            rc = cdc_error_set(e, CDC_ERR_CLOSED, "stopped during the snapshot of %s.%s", t->schema,
                               t->name);
            goto cleanup;
        }
        cdc_kafka_producer_poll(cap->producer, 0);
        if (cap->track.failed) {
            rc = cdc_error_set_retriable(e, CDC_ERR_KAFKA, true,
                                         "a Kafka delivery failed during the snapshot");
            goto cleanup;
        }
    }
    rc = exec(cap->src.sql, "CLOSE cdc_snapshot", e);
    if (rc == CDC_OK)
        cdc_log_info("snapshot of %s.%s done: %" PRId64 " rows", t->schema, t->name, rows);
cleanup:
    cdc_pg_clear(prev);
    cdc_pg_clear(cur);
    free(vals);
    cdc_buf_free(&cols);
    return rc;
}

void cdc_capture_snapshot_id(char *buf, size_t size, uint64_t lsn)
{
    snprintf(buf, size, "s%" PRIx64, lsn);
}

cdc_err_t cdc_snapshot_run(cdc_capture_t *cap, const char *snapshot_name, uint64_t consistent_lsn,
                           cdc_error_t *e)
{
    char sql[160];
    int64_t ts = cdc_clock_wall_ms();
    uint64_t tx;
    cdc_err_t rc;

    cdc_metrics_gauge_set(cap->m_snapshot_running, 1);
    cdc_metrics_gauge_set(cap->m_snapshot_tables, (double)cap->nwanted);
    cdc_metrics_gauge_set(cap->m_snapshot_tables_done, 0);
    rc = exec(cap->src.sql, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", e);
    if (rc != CDC_OK)
        goto done;
    snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT '%s'", snapshot_name);
    rc = exec(cap->src.sql, sql, e);
    if (rc != CDC_OK)
        goto done;
    tx = cdc_txtrack_begin(&cap->track);
    for (size_t i = 0; i < cap->nwanted && rc == CDC_OK; i++) {
        cdc_capture_table_t *t =
            cdc_capture_table_get(cap, cap->wanted[i].schema, cap->wanted[i].name);
        if (t == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            break;
        }
        rc = snapshot_table(cap, t, consistent_lsn, ts, tx, e);
        if (rc == CDC_ERR_CONFIG) /* this table alone (it lost its key since the check) */
            rc = cdc_capture_table_fail(cap, t, "%s", e->msg);
        if (rc == CDC_OK)
            cdc_metrics_gauge_set(cap->m_snapshot_tables_done, (double)(i + 1));
    }
    if (rc != CDC_OK)
        goto done;
    cdc_txtrack_commit(&cap->track, tx, consistent_lsn);
    rc = exec(cap->src.sql, "COMMIT", e);
    if (rc != CDC_OK)
        goto done;
    /* every snapshot event must be acked before the marker says the snapshot is complete */
    while (cdc_kafka_producer_outstanding(cap->producer) > 0 && !cap->track.failed) {
        cdc_health_beat(&cap->health);
        rc = cdc_kafka_producer_flush(cap->producer, 1000, e);
        if (rc != CDC_OK && rc != CDC_ERR_TIMEOUT)
            goto done;
        rc = CDC_OK;
        if (*cap->stop) {
            rc = cdc_error_set(e, CDC_ERR_CLOSED, "stopped before the snapshot was acked");
            goto done;
        }
    }
    if (cap->track.failed)
        rc = cdc_error_set_retriable(e, CDC_ERR_KAFKA, true,
                                     "a Kafka delivery failed during the snapshot");
done:
    if (rc != CDC_OK)
        exec(cap->src.sql, "ROLLBACK", &(cdc_error_t){0});
    cdc_metrics_gauge_set(cap->m_snapshot_running, 0);
    return rc;
}

/* ---- backfill after DDL ------------------------------------------------------------- */

bool cdc_snapshot_same_columns(const cdc_schema_doc_t *cat, const cdc_schema_doc_t *doc)
{
    if (cat->ncols != doc->ncols)
        return false;
    for (size_t i = 0; i < cat->ncols; i++)
        if (strcmp(cat->cols[i].name, doc->cols[i].name) != 0 ||
            cat->cols[i].pg_oid != doc->cols[i].pg_oid ||
            cat->cols[i].typmod != doc->cols[i].typmod)
            return false;
    return true;
}

cdc_err_t cdc_snapshot_backfill(cdc_capture_t *cap, cdc_capture_table_t *t, uint64_t lsn,
                                cdc_err_t (*keepalive)(cdc_capture_t *, cdc_error_t *),
                                cdc_error_t *e)
{
    cdc_schema_doc_t cat;
    cdc_buf_t cols = {0};
    cdc_pgo_value_t *vals = NULL;
    char fetch[64];
    cdc_snapshot_pos_t pos = {.lsn = lsn - 1,
                              .commit_lsn = cdc_capture_tx(cap)->commit_lsn,
                              .xid = cdc_capture_tx(cap)->xid,
                              .ts = cdc_capture_tx(cap)->commit_ts_ms,
                              .tx = cdc_capture_tx(cap)->id,
                              .label = "backfill"};
    int64_t rows = 0;
    bool committed = false;
    cdc_err_t rc;

    rc = exec(cap->src.sql, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", e);
    if (rc != CDC_OK)
        return rc;
    rc = cdc_snapshot_catalog_doc(cap, t, &cat, &cols, e);
    if (rc != CDC_OK)
        goto done;
    if (!cdc_snapshot_same_columns(&cat, &t->doc)) {
        /* The catalog is ahead of the stream (more DDL since): rows read now would not
         * follow this version. A later Relation message of the table brings it. */
        cdc_log_info("backfill of %s.%s waits: the catalog is ahead of schema version %" PRId64,
                     t->schema, t->name, t->doc.version);
        cdc_schema_doc_free(&cat);
        goto done;
    }
    cdc_schema_doc_free(&cat);
    if ((rc = open_cursor(cap, t, "cdc_backfill", &cols, &vals, fetch, e)) != CDC_OK)
        goto done;
    /* rows left the table (a partition detached): the mirror starts over from the rows
     * read here, after a truncate just before them (docs/capture.md) */
    if (t->doc.resync &&
        (rc = cdc_capture_emit_marker(cap, t, 't', lsn - 2, "backfill", e)) != CDC_OK)
        goto done;
    cdc_log_info("backfill of %s.%s (schema version %" PRId64 ") started%s", t->schema, t->name,
                 t->doc.version, t->doc.resync ? ", after a truncate of its mirror" : "");
    for (;;) {
        cdc_pg_result_t *r;
        int n;
        cdc_health_beat(&cap->health);
        r = fetch_chunk(cap, t, fetch, "backfill", e);
        if (r == NULL) {
            rc = e->code;
            goto done;
        }
        n = cdc_pg_ntuples(r);
        rc = cdc_snapshot_emit_rows(cap, t, r, 0, n, NULL, false, &pos, vals, e);
        cdc_pg_clear(r);
        rows += n;
        if (rc != CDC_OK || n == 0)
            break;
        cdc_kafka_producer_poll(cap->producer, 0);
        if (*cap->stop) {
            rc = cdc_error_set(e, CDC_ERR_CLOSED, "stopped during the backfill of %s.%s", t->schema,
                               t->name);
            break;
        }
        /* the replication connection stays alive while the table is read */
        if (keepalive != NULL && (rc = keepalive(cap, e)) != CDC_OK)
            break;
    }
    if (rc == CDC_OK && (rc = exec(cap->src.sql, "COMMIT", e)) == CDC_OK) {
        committed = true;
        rc = cdc_registry_mark_backfill(cap, t, t->doc.version, e);
    }
    if (rc == CDC_OK) {
        cdc_metrics_counter_inc(cap->m_backfills);
        cdc_log_info("backfill of %s.%s done: %" PRId64 " rows", t->schema, t->name, rows);
    }
done:
    if (!committed)
        exec(cap->src.sql, "ROLLBACK", &(cdc_error_t){0});
    free(vals);
    cdc_buf_free(&cols);
    return rc;
}
