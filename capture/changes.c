/*
 * Change handling: each decoded pgoutput message of the stream (a transaction's begin
 * and commit, a Relation, a change) becomes Kafka events of the captured table, produced
 * through output.c. The session thread alone runs it.
 * A partition's Relation, changes and truncates go to partitions.c, which gives them
 * back as its root's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capture/stream_int.h"
#include "common/clock.h"
#include "common/evchunk.h"
#include "common/log.h"

/* How long a Relation message waits for its transaction to become visible. */
#define VISIBLE_WAIT_MS 30000

/*
 * Waits until the transaction being decoded is visible to the SQL connection's next
 * snapshot. PostgreSQL flushes a commit record, and the walsender may decode and send
 * the transaction, before the committing backend leaves the proc array; a catalog read
 * in between sees the catalog from before the transaction's DDL: a renamed column would
 * not be found under its new name and would get a new field id (its earlier files then
 * read as null under the new name). Heavy load widens that window
 * (test_capture_changes's test_rename_decoded_before_visible holds it open). Bounded: past
 * VISIBLE_WAIT_MS (a commit held by a synchronous standby that is away) the catalog is
 * read as it is, with a warning.
 */
static cdc_err_t await_visible(cdc_capture_t *cap, cdc_error_t *e)
{
    int64_t start, waited = 0;
    bool logged = false;

    uint32_t xid = cdc_capture_tx(cap)->xid;

    if (cdc_capture_tx(cap)->id == 0 || xid == 0 || cdc_capture_tx_visible(cap) ||
        cap->src.sql == NULL)
        return CDC_OK;
    start = cdc_clock_mono_ms();
    for (;;) {
        bool finished = false;
        cdc_err_t rc = cdc_source_xact_finished(&cap->src, xid, &finished, e);
        if (rc != CDC_OK)
            return rc;
        if (finished)
            break;
        waited = cdc_clock_mono_ms() - start;
        if (waited >= VISIBLE_WAIT_MS) {
            cdc_log_warn("transaction %u was decoded %lld ms ago and is still not visible to "
                         "other sessions (a synchronous standby away?): reading the catalog "
                         "as it is; a column it renamed may get a new field id",
                         xid, (long long)waited);
            break;
        }
        if (!logged && waited >= 1000) {
            cdc_log_info("transaction %u is decoded but its commit is still under way: waiting "
                         "for it to become visible before reading the catalog",
                         xid);
            logged = true;
        }
        if (*cap->stop)
            return cdc_error_set(e, CDC_ERR_CLOSED,
                                 "stopping while transaction %u was not "
                                 "yet visible",
                                 xid);
        if ((rc = cdc_capture_keepalive(cap, e)) != CDC_OK)
            return rc;
        usleep(waited < 100 ? 2000 : 20000);
    }
    if (logged)
        cdc_log_info("transaction %u visible after %lld ms", xid,
                     (long long)(cdc_clock_mono_ms() - start));
    cdc_capture_tx_mark_visible(cap);
    return CDC_OK;
}

/*
 * A Relation message: a mapped partition's, or any other (cdc_capture_on_relation). A table that
 * failed in the stream (e.g. it lost its key) gets another chance with its next
 * Relation message, which PostgreSQL sends after the table's definition changed.
 */
static cdc_err_t relation(cdc_capture_t *cap, const cdc_pgo_msg_t *m, cdc_error_t *e)
{
    const char *nsp = m->u.relation.nspname, *rel = m->u.relation.relname;
    cdc_capture_table_t *t;
    bool handled = false, retry = false;
    cdc_err_t rc = await_visible(cap, e);

    if (rc == CDC_OK)
        rc = cdc_capture_on_partition_relation(cap, m, &handled, e);
    if (rc != CDC_OK || handled)
        return rc;
    t = cdc_capture_table_by_name(cap, nsp, rel);
    if (t != NULL && t->failed && cdc_capture_is_wanted(cap, nsp, rel)) {
        t->captured = true;
        retry = true;
    }
    rc = cdc_capture_on_relation(cap, m, e);
    t = cdc_capture_table_by_name(cap, nsp, rel);
    if (rc == CDC_OK && retry && t != NULL && t->captured) {
        t->failed = false;
        cdc_metrics_gauge_set(t->m_error, 0);
        cdc_log_info("table %s.%s is captured again", t->schema, t->name);
    }
    return rc;
}

/*
 * The captured table of a change at lsn; a backfill the table is due comes first.
 * NULL with *rc = CDC_OK: the change is not produced (its table is in error, see
 * "Table errors" in docs/capture.md). A change of a published table outside the capture
 * set is an error: it must never be confirmed unproduced (cdc_capture_uncaptured).
 */
static cdc_capture_table_t *captured(cdc_capture_t *cap, uint32_t relid, uint64_t lsn,
                                     cdc_error_t *e, cdc_err_t *rc)
{
    cdc_capture_table_t *t = cdc_capture_table_by_relid(cap, relid);
    *rc = CDC_OK;
    if (t != NULL && t->failed) {
        cdc_metrics_counter_inc(t->m_skipped);
        return NULL;
    }
    if (t == NULL) {
        *rc = cdc_error_set_retriable(e, CDC_ERR_PROTOCOL, true,
                                      "change at %" PRIu64 " for relation %u before its Relation "
                                      "message",
                                      lsn, relid);
        return NULL;
    }
    if (!t->captured && t->excluded) {
        cdc_metrics_counter_inc(t->m_excluded);
        return NULL;
    }
    if (!t->captured) {
        *rc = cdc_capture_uncaptured(cap, t, lsn, e);
        return NULL;
    }
    if (!t->has_doc) {
        *rc = cdc_error_set(e, CDC_ERR_PROTOCOL, "change for relation %u before its schema", relid);
        return NULL;
    }
    if (t->backfill_pending &&
        (*rc = cdc_snapshot_backfill(cap, t, lsn, cdc_capture_keepalive, e)) != CDC_OK)
        return NULL;
    return t;
}

/* Whether a row image holds pgoutput's unchanged-TOAST marker. */
static bool has_unchanged(const cdc_pgo_tuple_t *row)
{
    for (size_t i = 0; row != NULL && i < row->ncols; i++)
        if (row->cols[i].kind == CDC_PGO_VAL_UNCHANGED)
            return true;
    return false;
}

static cdc_err_t emit(cdc_capture_t *cap, cdc_capture_table_t *t, char op, uint64_t lsn,
                      const cdc_pgo_tuple_t *before, bool before_key_only,
                      const cdc_pgo_tuple_t *after, const cdc_pgo_tuple_t *keyrow,
                      const cdc_pgo_tuple_t *keyfallback, cdc_error_t *e)
{
    cdc_event_t ev;

    cdc_capture_event_init(&ev, cap, t, op);
    ev.before = before;
    ev.before_key_only = before_key_only;
    ev.after = after;
    ev.lsn = lsn;
    ev.commit_lsn = cdc_capture_tx(cap)->commit_lsn;
    ev.xid = cdc_capture_tx(cap)->xid;
    ev.source_ts_ms = cdc_capture_tx(cap)->commit_ts_ms;
    ev.ts_ms = cdc_clock_wall_coarse_ms();
    ev.snapshot = "false";
    /* the table's first read (an adopted slot's, a table that joined) is not done: a row
     * whose TOASTed value this change leaves out may predate the capture
     * (docs/capture.md, "An existing slot") */
    ev.snapshot_pending = t->isnap.due && strcmp(t->isnap.label, "incremental") == 0;
    cdc_buf_reset(&cap->key);
    cdc_buf_reset(&cap->value);
    if (!cdc_event_encode_key(&cap->key, &t->doc, keyrow, keyfallback))
        return cdc_error_set(e, CDC_ERR_PROTOCOL,
                             "change at %" PRIu64 " of %s.%s lacks a key column value", lsn,
                             t->schema, t->name);
    cdc_event_encode_value(&cap->value, &ev);
    cdc_incremental_on_key(cap, t, &cap->key, ev.snapshot_pending && has_unchanged(after));
    return cdc_capture_produce(cap, t, CDC_KAFKA_PARTITION_ANY, &cap->key, &cap->value, ev.ts_ms,
                               cdc_capture_tx(cap)->id, lsn, e);
}

cdc_err_t cdc_capture_on_change(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                                cdc_error_t *e)
{
    cdc_capture_table_t *t;
    cdc_err_t rc;

    if (cdc_capture_tx(cap)->id == 0)
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
            cdc_incremental_on_truncate(cap, t);
            if ((rc = cdc_capture_emit_marker(cap, t, 't', lsn, "false", e)) != CDC_OK)
                return rc;
        }
        return CDC_OK;
    default:
        return CDC_OK;
    }
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

cdc_err_t cdc_capture_on_message(cdc_capture_t *cap, const uint8_t *data, size_t len, uint64_t lsn,
                                 cdc_error_t *e)
{
    cdc_pgo_msg_t m;
    cdc_err_t rc = cdc_pgo_decode(data, len, &cap->scratch, &m, e);

    if (rc != CDC_OK)
        return rc;
    switch (m.kind) {
    case CDC_PGO_BEGIN: {
        cdc_capture_txpos_t pos = {
            .id = cdc_txtrack_begin(&cap->track),
            .xid = m.u.begin.xid,
            .commit_lsn = m.u.begin.final_lsn,
            .commit_ts_ms = (m.u.begin.commit_ts + CDC_PG_EPOCH_OFFSET_US) / 1000,
        };
        if (pos.id == 0)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory tracking transactions");
        cdc_capture_tx_set(cap, &pos);
        cap->src.caught_up = cdc_clock_wall_coarse_ms() - pos.commit_ts_ms < CDC_SOURCE_FRESH_MS;
        return CDC_OK;
    }
    case CDC_PGO_COMMIT:
        if (cdc_capture_tx(cap)->id == 0)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "commit without begin");
        cdc_txtrack_commit(&cap->track, cdc_capture_tx(cap)->id, m.u.commit.end_lsn);
        cdc_capture_tx_end(cap);
        cdc_metrics_counter_inc(cap->m_transactions);
        return CDC_OK;
    case CDC_PGO_RELATION:
        return relation(cap, &m, e);
    case CDC_PGO_TYPE:
        return cdc_capture_on_type(cap, &m, e);
    case CDC_PGO_MESSAGE:
        if ((m.u.message.flags & 1) && strcmp(m.u.message.prefix, CDC_CAPTURE_PROBE_PREFIX) == 0)
            return cdc_capture_on_probe(cap, &m, lsn, e);
        if (!(m.u.message.flags & 1) && strcmp(m.u.message.prefix, CDC_WATERMARK_PREFIX) == 0)
            return cdc_incremental_on_watermark(cap, &m, lsn, e);
        return CDC_OK; /* heartbeats and foreign messages carry no row changes */
    case CDC_PGO_ORIGIN:
        return CDC_OK;
    case CDC_PGO_TRUNCATE:
        if (cdc_capture_leaves_any(cap)) {
            cdc_pgo_msg_t kept;
            if ((rc = cdc_capture_truncate_unmapped(cap, &m, lsn, &kept, e)) != CDC_OK)
                return rc;
            return kept.u.truncate.nrelids > 0 ? cdc_capture_on_change(cap, &kept, lsn, e) : CDC_OK;
        }
        return cdc_capture_on_change(cap, &m, lsn, e);
    default:
        if (cdc_capture_leaves_any(cap)) {
            cdc_capture_leaf_t *leaf = cdc_capture_leaf_by_relid(cap, change_relid(&m));
            if (leaf != NULL) {
                cdc_pgo_msg_t root;
                bool produce;
                if (cdc_capture_tx(cap)->id == 0)
                    return cdc_error_set(e, CDC_ERR_PROTOCOL, "change outside a transaction");
                if ((rc = cdc_capture_leaf_map(cap, leaf, &m, lsn, &root, &produce, e)) != CDC_OK)
                    return rc;
                return produce ? cdc_capture_on_change(cap, &root, lsn, e) : CDC_OK;
            }
        }
        return cdc_capture_on_change(cap, &m, lsn, e);
    }
}
