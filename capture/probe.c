/*
 * The schema probe: a DDL that no change followed (docs/capture.md, "Backfill after
 * DDL"). Tables whose catalog columns differ from their current schema version get
 * their catalog's columns written into the WAL; decoded, the probe becomes the table's
 * schema at its position, with the backfill it calls for.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "capture/stream_int.h"
#include "common/clock.h"
#include "common/log.h"

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
 * table's exact shape at its position (cdc_capture_on_probe). A table with a probe on its way gets
 * no other until the message arrived (or a minute passed).
 */
cdc_err_t cdc_capture_probe_schemas(cdc_capture_t *cap, cdc_error_t *e)
{
    int64_t now = cdc_clock_mono_coarse_ms();
    for (size_t i = 0; i < cap->ntables; i++) {
        cdc_capture_table_t *t = &cap->tables[i];
        cdc_schema_doc_t cat;
        char *json = NULL;
        cdc_err_t rc;
        bool same;
        if (!t->captured || !t->has_doc || t->failed || t->removed || t->relid == 0 ||
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
        rc = cdc_source_schema_probe(&cap->src, t->schema, t->name, CDC_CAPTURE_PROBE_PREFIX, e);
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
cdc_err_t cdc_capture_on_probe(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                               cdc_error_t *e)
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
    t = cdc_capture_table_by_relid(cap, doc.relid);
    if (t == NULL || !t->captured || t->failed || cdc_capture_tx(cap)->id == 0) {
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
    int64_t was = t->has_doc ? t->doc.version : 0;
    if ((rc = cdc_capture_set_schema(cap, t, &doc, e)) != CDC_OK)
        return rc;
    if (t->doc.version == was) /* a Relation message registered it already */
        return CDC_OK;
    if (t->backfill_pending)
        return cdc_snapshot_backfill(cap, t, lsn, cdc_capture_keepalive, e);
    /* No row carries the new version (no change followed the DDL, and no backfill): a
     * schema marker does, so that a drop or a rename reaches the tables now. */
    return cdc_capture_emit_marker(cap, t, 's', lsn, "false", e);
}
