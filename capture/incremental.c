/*
 * Incremental snapshots (docs/capture.md, "Incremental snapshot"): a table's existing
 * rows read in chunks by primary key while the stream goes on, with the DBLog watermark
 * method. For each chunk the capture writes a low watermark into the WAL
 * (pg_logical_emit_message, not transactional), reads the chunk
 * (`WHERE (pk) > (last) ORDER BY pk LIMIT --snapshot-chunk`, on its SQL connection, no
 * lock beyond a reader's) and writes a high watermark. Back in the stream, each change
 * of the table between the two watermarks takes its key out of the chunk (chunk.c):
 * the stream's event is as new as the row read, or newer. At the high watermark the
 * rows left are emitted as op "r" at the watermark's position, after every change before
 * it and before every change after it; then the chunk's last key is recorded on
 * `<prefix>._capture` (registry.c) once Kafka acked the rows, so a capture that restarts
 * resumes at the next chunk. Other tables' changes flow between chunks.
 *
 * A snapshot starts when a table joins the capture set (tables.c: a table added to the
 * publication) or on request (POST /snapshot, request.c, answered here between stream
 * reads). One window is in flight at a time (cap->incremental.window): the chunks of up to
 * --snapshot-window-tables due tables, at most --snapshot-chunk rows in all, read between
 * one pair of watermarks, so that the window's round trip (two watermarks, a transaction,
 * the high watermark's way back through the stream) is paid once for many small tables.
 * Main thread.
 *
 * A call circle of two files (docs/development.md, "Call circles"): tables.c starts and
 * abandons a table's incremental snapshot (incremental.c) as the table joins or leaves,
 * and incremental.c hands a table that left or came back to tables.c. request.c, above
 * them, hands them the operator's requests (POST /snapshot, POST /tables); they answer in
 * a reply (reply.c) that request.c passes on. The rest of capture/ sits below these,
 * under the stream (stream.c) and the change dispatch (changes.c).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "capture/stream_int.h"
#include "common/clock.h"
#include "common/log.h"

/* How long a chunk waits when the catalog is ahead of the stream's schema version. */
#define RETRY_MS 1000
/* How often a chunk is read again because a change in its window left a TOASTed value
 * out of one of its rows (high_watermark); past it, the chunk is emitted without the row. */
#define TOAST_REREADS 3

static void part_free(cdc_capture_t *cap, cdc_capture_part_t *p)
{
    if (p->table < cap->ntables)
        cap->tables[p->table].isnap.part = 0;
    cdc_pg_clear(p->rows);
    free(p->after);
    free(p->sql);
    json_decref(p->from);
    cdc_chunk_free(&p->chunk);
    memset(p, 0, sizeof(*p));
}

void cdc_incremental_window_free(cdc_capture_t *cap)
{
    cdc_capture_window_t *w = &cap->incremental.window;
    for (size_t i = 0; i < w->nparts; i++)
        part_free(cap, &w->parts[i]);
    free(w->parts);
    w->parts = NULL;
    w->nparts = 0;
    cdc_chunk_snapshot_free(&w->snap);
    w->active = false;
    w->open = false;
    w->id[0] = '\0';
}

bool cdc_incremental_needed(const cdc_capture_t *cap, const cdc_capture_table_t *t)
{
    return strcmp(cap->cfg->snapshot_mode, "never") != 0 && !t->has_latest && !t->isnap.marked;
}

/* Forgets the chunk markers not written yet: of table idx, or of every table (SIZE_MAX). */
static void drop_marks(cdc_capture_t *cap, size_t idx)
{
    size_t k = 0;
    for (size_t i = 0; i < cap->incremental.nmarks; i++) {
        cdc_capture_mark_t *m = &cap->incremental.marks[i];
        if (idx == SIZE_MAX || m->table == idx) {
            cap->tables[m->table].isnap.pending_marks--;
            free(m->after);
        } else {
            cap->incremental.marks[k++] = *m;
        }
    }
    cap->incremental.nmarks = k;
}

void cdc_incremental_free(cdc_capture_t *cap)
{
    drop_marks(cap, SIZE_MAX);
    free(cap->incremental.marks);
    cap->incremental.marks = NULL;
    cdc_incremental_window_free(cap);
}

void cdc_incremental_init(cdc_capture_t *cap)
{
    cap->incremental.m_windows = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_snapshot_windows_total",
        "Watermark windows of incremental snapshots, each reading the chunks of up to "
        "--snapshot-window-tables tables (docs/capture.md, \"Incremental snapshot\").",
        NULL);
}

/*
 * Testing only: CDC_FAULT=snapshot-kill:<n> kills the capture (SIGKILL) when the n-th
 * chunk marker of the process is due: the chunk's rows are acked by Kafka, its marker is
 * not written, so the next capture reads the chunk again
 * (tests/integration/pipeline/snapshot_once.sh: without the workers' snapshot ids, the
 * chunk's keys get a second `r` row in the changelog).
 */
static void kill_before_mark(void)
{
#if CDC_FAULTS
    static long marks;
    const char *f = getenv("CDC_FAULT");
    if (f != NULL && strncmp(f, "snapshot-kill:", 14) == 0 && ++marks == atol(f + 14)) {
        cdc_log_warn("CDC_FAULT=%s: killing the capture before a chunk's marker", f);
        raise(SIGKILL);
    }
#endif
}

/*
 * Sends the markers of the chunks whose rows Kafka acked, oldest first: a chunk's marker
 * waits until every event up to its high watermark is acked (the confirmable position
 * is past it), so a marker never vouches for a row that a kill -9 could still lose, and
 * the stream and the next chunks go on meanwhile.
 */
static cdc_err_t write_marks(cdc_capture_t *cap, cdc_error_t *e)
{
    uint64_t acked;
    size_t done = 0;
    bool finished = false;
    cdc_err_t rc = CDC_OK;

    if (cap->incremental.nmarks == 0)
        return CDC_OK;
    acked = cdc_txtrack_confirmable(&cap->track);
    while (done < cap->incremental.nmarks && cap->incremental.marks[done].lsn <= acked &&
           rc == CDC_OK) {
        cdc_capture_mark_t *m = &cap->incremental.marks[done];
        cdc_capture_table_t *t = &cap->tables[m->table];
        kill_before_mark();
        rc = cdc_registry_mark_chunk(cap, t, m->after, m->rows, m->done, e);
        if (rc != CDC_OK)
            break;
        t->isnap.pending_marks--;
        if (m->done) {
            cdc_log_info("incremental snapshot %s of %s.%s done: %" PRId64 " rows", t->isnap.id,
                         t->schema, t->name, m->rows);
            finished = true;
        }
        free(m->after);
        done++;
    }
    if (done > 0) {
        memmove(cap->incremental.marks, cap->incremental.marks + done,
                (cap->incremental.nmarks - done) * sizeof(*cap->incremental.marks));
        cap->incremental.nmarks -= done;
    }
    /* a table whose snapshot ended shows as streaming now, not at the next refresh */
    if (finished)
        cdc_capture_status_publish(cap, true);
    return rc;
}

/* cdc_incremental_begin with the snapshot's id (NULL: a new one). */
static cdc_err_t begin_as(cdc_capture_t *cap, cdc_capture_table_t *t, const char *id,
                          const char *label, bool truncate, cdc_error_t *e)
{
    if (id != NULL)
        snprintf(t->isnap.id, sizeof(t->isnap.id), "%s", id);
    else
        snprintf(t->isnap.id, sizeof(t->isnap.id), "%" PRIx64 "%02" PRIx64,
                 (uint64_t)cdc_clock_wall_ms(), ++cap->incremental.seq & 0xff);
    snprintf(t->isnap.label, sizeof(t->isnap.label), "%s", label);
    free(t->isnap.after);
    t->isnap.after = NULL;
    t->isnap.rows = 0;
    t->isnap.estimate = -1;
    t->isnap.retry_ms = 0;
    t->isnap.truncate = truncate;
    t->isnap.abandoned = false;
    t->isnap.due = true;
    drop_marks(cap, (size_t)(t - cap->tables)); /* of an earlier snapshot: superseded */
    /* recorded before any row: a capture killed now resumes it, and a table it adopted
     * is not taken for one it captured all along */
    cdc_err_t rc = cdc_registry_mark_incremental(cap, t, e);
    if (rc != CDC_OK) {
        t->isnap.due = false;
        return rc;
    }
    cdc_log_info("incremental snapshot %s of %s.%s started (rows as source.snapshot \"%s\"%s)",
                 t->isnap.id, t->schema, t->name, t->isnap.label,
                 truncate ? ", after a truncate of the mirror" : "");
    return CDC_OK;
}

cdc_err_t cdc_incremental_begin(cdc_capture_t *cap, cdc_capture_table_t *t, const char *label,
                                bool truncate, cdc_error_t *e)
{
    return begin_as(cap, t, NULL, label, truncate, e);
}

/*
 * An adopted slot (cap->adopting, docs/capture.md, "An existing slot"): every captured
 * table that has no incremental snapshot of its own is read by one, all under the slot's
 * snapshot id, tables registered by a capture that died during its initial snapshot too;
 * then the slot's marker, once every snapshot is recorded, so that a capture killed before
 * it adopts the slot again and begins the snapshots still missing.
 */
static cdc_err_t adopt(cdc_capture_t *cap, cdc_error_t *e)
{
    cdc_err_t rc;
    for (size_t i = 0; i < cap->ntables; i++) {
        cdc_capture_table_t *t = &cap->tables[i];
        if (!t->captured || t->failed || t->removed || t->isnap.marked)
            continue;
        if ((rc = begin_as(cap, t, cap->adopt_id, "incremental", false, e)) != CDC_OK)
            return rc;
    }
    if ((rc = cdc_registry_mark_snapshot(cap, cap->adopt_lsn, "adopted", e)) != CDC_OK)
        return rc;
    cap->adopting = false;
    return CDC_OK;
}

cdc_err_t cdc_incremental_abandon(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    if (!t->isnap.due)
        return CDC_OK;
    if (t->isnap.part != 0) /* the window's other chunks are read again too */
        cdc_incremental_window_free(cap);
    t->isnap.due = false;
    t->isnap.abandoned = true;
    drop_marks(cap, (size_t)(t - cap->tables));
    cdc_log_info("incremental snapshot %s of %s.%s abandoned after %" PRId64
                 " rows: the table left the publication",
                 t->isnap.id, t->schema, t->name, t->isnap.rows);
    return cdc_registry_mark_incremental(cap, t, e);
}

cdc_err_t cdc_incremental_session(cdc_capture_t *cap, cdc_error_t *e)
{
    bool fixed = cap->cfg->tables != NULL && cap->cfg->tables[0] != '\0';
    /* with --snapshot-mode=incremental, every table of the capture set never captured
     * before is read this way, the slot's first tables too */
    bool publication = !fixed || strcmp(cap->cfg->snapshot_mode, "incremental") == 0;

    /* a chunk of the last session never reached its high watermark: read it again; chunks
     * whose marker was not written (their rows maybe not acked) too, from the last one */
    cdc_incremental_window_free(cap);
    for (size_t i = 0; i < cap->ntables; i++) {
        cdc_capture_isnap_t *s = &cap->tables[i].isnap;
        if (s->pending_marks == 0)
            continue;
        free(s->after);
        s->after = s->marked_after ? strdup(s->marked_after) : NULL;
        s->rows = s->marked_rows;
        s->due = s->marked_due;
    }
    drop_marks(cap, SIZE_MAX);
    if (cap->adopting) {
        cdc_err_t rc = adopt(cap, e);
        if (rc != CDC_OK)
            return rc;
    }
    for (size_t i = 0; i < cap->ntables; i++) {
        cdc_capture_table_t *t = &cap->tables[i];
        cdc_err_t rc;
        /* publication mode: a table captured before (a registered schema) that is no
         * longer published left it while the capture was away */
        if (!fixed && !t->captured && !t->failed && !t->removed && t->has_latest &&
            (rc = cdc_capture_table_removed(cap, t, e)) != CDC_OK)
            return rc;
        if (!t->captured || t->failed)
            continue;
        /* published again since it left */
        if (!fixed && t->removed) {
            if ((rc = cdc_capture_rejoin(cap, t, e)) != CDC_OK)
                return rc;
            continue;
        }
        if (t->isnap.due) {
            t->isnap.retry_ms = 0;
            if (t->isnap.after == NULL && t->isnap.rows == 0)
                continue; /* begun, nothing read yet (an adopted slot's, just now) */
            cdc_log_info("incremental snapshot %s of %s.%s resumes after key %s (%" PRId64
                         " rows done)",
                         t->isnap.id, t->schema, t->name,
                         t->isnap.after ? t->isnap.after : "(none: from the start)", t->isnap.rows);
            continue;
        }
        /* a table that joined the publication while the capture was away (or, with
         * --snapshot-mode=incremental, any table not read yet) */
        if (publication && cdc_incremental_needed(cap, t) &&
            (rc = cdc_incremental_begin(cap, t, "incremental", false, e)) != CDC_OK)
            return rc;
    }
    return CDC_OK;
}

/*
 * Testing only: CDC_FAULT=chunk-window:<ms> holds each chunk's window open that long after
 * its read, before its high watermark, so that changes of the table commit inside it
 * (test_capture_snapshots's test_table_added_running: without the keys' removal, rows read before a
 * change would be emitted after it).
 */
static void hold_window(void)
{
#if CDC_FAULTS
    const char *f = getenv("CDC_FAULT");
    if (f != NULL && strncmp(f, "chunk-window:", 13) == 0)
        usleep((useconds_t)atoi(f + 13) * 1000);
#endif
}

/* The key columns of t's current schema, quoted, ", "-separated, into b; their count. */
static size_t key_list(cdc_capture_t *cap, const cdc_capture_table_t *t, cdc_buf_t *b)
{
    size_t n = 0;
    for (size_t i = 0; i < t->doc.ncols; i++) {
        char *q;
        if (t->doc.cols[i].key == 0)
            continue;
        q = cdc_pg_ident(cap->src.sql, t->doc.cols[i].name);
        cdc_buf_printf(b, "%s%s", n ? ", " : "", q ? q : "?");
        free(q);
        n++;
    }
    return n;
}

static cdc_err_t emit_watermark(cdc_capture_t *cap, cdc_watermark_kind_t kind, cdc_error_t *e)
{
    char content[CDC_WATERMARK_ID_MAX + 8];
    const char *p[1] = {content};
    cdc_pg_result_t *r;

    if (!cdc_watermark_format(content, sizeof(content), cap->incremental.window.id, kind))
        return cdc_error_set(e, CDC_ERR_INTERNAL, "bad watermark id \"%s\"",
                             cap->incremental.window.id);
    /* A message outside a transaction is written to the WAL but not flushed, and the
     * walsender sends only flushed WAL: the high watermark would wait for the WAL writer
     * (wal_writer_delay, 200 ms by default) or the next commit of the load, once per chunk.
     * Taking a transaction id makes this statement's commit flush the WAL up to its commit
     * record, past the message (synchronous_commit on, the default). */
    r = cdc_pg_query(cap->src.sql,
                     kind == CDC_WATERMARK_HIGH
                         ? "SELECT pg_logical_emit_message(false, '" CDC_WATERMARK_PREFIX
                           "', $1), pg_current_xact_id()"
                         : "SELECT pg_logical_emit_message(false, '" CDC_WATERMARK_PREFIX "', $1)",
                     1, p, e);
    if (r == NULL)
        return e->code;
    cdc_pg_clear(r);
    return CDC_OK;
}

static void estimate(cdc_capture_t *cap, cdc_capture_table_t *t)
{
    char *rel = cdc_pg_qualified(cap->src.sql, t->schema, t->name);
    const char *p[1] = {rel};
    cdc_error_t e;
    int64_t n = -1;
    if (rel != NULL && cdc_pg_query_int(cap->src.sql,
                                        "SELECT greatest(reltuples, 0)::bigint FROM pg_class "
                                        "WHERE oid = $1::regclass",
                                        1, p, &n, &e) == CDC_OK)
        t->isnap.estimate = n;
    free(rel);
}

/*
 * Runs the window's chunk queries in one REPEATABLE READ transaction whose snapshot goes
 * to cap->incremental.window.snap, each part's rows to its rows, at most --snapshot-chunk rows in
 * all (each query's LIMIT is what the parts before it left; a part left nothing is not read, and
 * its table waits for the next window). PostgreSQL makes a commit visible to other sessions only
 * after its WAL record is written and flushed (and a synchronous standby answered), and the
 * walsender may send it before: a snapshot taken now can miss a transaction the stream already
 * brought, whose rows would then be read older than the changes already produced. So when one of
 * the last transactions the stream committed (cdc_capture_tx_recent_unseen) is not in the snapshot,
 * nothing is read: *retry, and the window is tried again a moment later. Transactions the snapshot
 * misses that the stream brings later take their keys out of the chunks (cdc_incremental_on_key).
 */
static cdc_err_t read_window(cdc_capture_t *cap, bool *retry, cdc_error_t *e)
{
    cdc_capture_window_t *w = &cap->incremental.window;
    cdc_pg_result_t *r;
    int64_t left = cap->cfg->snapshot_chunk;
    bool ok;

    *retry = false;
    r = cdc_pg_query(cap->src.sql, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, e);
    if (r == NULL)
        return e->code;
    cdc_pg_clear(r);
    r = cdc_pg_query(cap->src.sql, "SELECT pg_current_snapshot()::text", 0, NULL, e);
    ok = r != NULL && cdc_pg_ntuples(r) == 1 &&
         cdc_chunk_snapshot_parse(&w->snap, cdc_pg_value(r, 0, 0));
    if (r != NULL && !ok)
        cdc_error_set(e, CDC_ERR_INTERNAL, "unexpected pg_current_snapshot() \"%s\"",
                      cdc_pg_ntuples(r) == 1 ? cdc_pg_value(r, 0, 0) : "");
    cdc_pg_clear(r);
    uint32_t unseen = ok ? cdc_capture_tx_recent_unseen(cap, &w->snap) : 0;
    if (unseen != 0) {
        int64_t now = cdc_clock_mono_coarse_ms();
        if (cap->incremental.invisible_since_ms == 0)
            cap->incremental.invisible_since_ms = now;
        /* usually a few ms; long: a synchronous standby that does not answer */
        if (now - cap->incremental.invisible_since_ms >= 1000 &&
            now - cap->incremental.invisible_logged_ms >= 5000) {
            cap->incremental.invisible_logged_ms = now;
            cdc_log_warn("incremental snapshot waits: transaction %u is committed in the "
                         "stream but not visible to other sessions yet",
                         unseen);
        }
        *retry = true;
    }
    if (ok && !*retry)
        cap->incremental.invisible_since_ms = 0;
    for (size_t i = 0; ok && !*retry && i < w->nparts && left > 0; i++) {
        cdc_capture_part_t *p = &w->parts[i];
        cdc_capture_table_t *t = &cap->tables[p->table];
        size_t nkeys = p->from ? json_array_size(p->from) : 0;
        const char *params[nkeys ? nkeys : 1];
        char *sql = NULL;
        for (size_t k = 0; k < nkeys; k++)
            params[k] = json_string_value(json_array_get(p->from, k));
        if (asprintf(&sql, "%s LIMIT %" PRId64, p->sql, left) < 0) {
            ok = false;
            cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            break;
        }
        p->rows = cdc_pg_query(cap->src.sql, sql, (int)nkeys, params, e);
        free(sql);
        if (p->rows == NULL) {
            ok = false;
            cdc_error_prefix(e, "incremental snapshot of %s.%s", t->schema, t->name);
            break;
        }
        p->last = cdc_pg_ntuples(p->rows) < left;
        left -= cdc_pg_ntuples(p->rows);
    }
    r = cdc_pg_exec(cap->src.sql, ok && !*retry ? "COMMIT" : "ROLLBACK");
    cdc_pg_clear(r);
    return ok ? CDC_OK : e->code;
}

/*
 * Prepares t's next chunk as a part of the window being built: its query and position.
 * *skip: not this time: it waits (t->isnap.retry_ms) while the catalog's columns differ
 * from the stream's schema version (rows read now would not have the columns of the
 * events around them), or it failed (dropped, no key any more).
 */
static cdc_err_t prepare_part(cdc_capture_t *cap, size_t idx, bool *skip, cdc_error_t *e)
{
    cdc_capture_table_t *t = &cap->tables[idx];
    cdc_capture_window_t *w = &cap->incremental.window;
    cdc_capture_part_t *p;
    cdc_schema_doc_t cat;
    cdc_buf_t cols = {0}, keys = {0}, sql = {0};
    json_t *after = NULL;
    json_error_t jerr;
    char *rel = NULL;
    size_t nkeys;
    cdc_err_t rc;

    *skip = true;
    rc = cdc_snapshot_catalog_doc(cap, t, &cat, &cols, e);
    if (rc == CDC_ERR_CONFIG) { /* dropped, or no key any more */
        cdc_buf_free(&cols);
        t->isnap.due = false;
        return cdc_capture_table_fail(cap, t, "incremental snapshot of %s.%s stopped: %s",
                                      t->schema, t->name, e->msg);
    }
    if (rc != CDC_OK)
        goto done;
    if (!t->has_doc) {
        /* a table no change named yet: its schema from the catalog (the stream's Relation
         * message, when it comes, finds the same version) */
        if ((rc = cdc_capture_set_schema(cap, t, &cat, e)) != CDC_OK)
            goto done;
    } else {
        bool same = cdc_snapshot_same_columns(&cat, &t->doc);
        cdc_schema_doc_free(&cat);
        if (!same) {
            cdc_log_debug("incremental snapshot of %s.%s waits: the catalog is ahead of schema "
                          "version %" PRId64,
                          t->schema, t->name, t->doc.version);
            t->isnap.retry_ms = cdc_clock_mono_coarse_ms() + RETRY_MS;
            goto done;
        }
    }
    if (t->isnap.estimate < 0)
        estimate(cap, t);
    rel = cdc_pg_qualified(cap->src.sql, t->schema, t->name);
    nkeys = key_list(cap, t, &keys);
    if (t->isnap.after != NULL && (after = json_loads(t->isnap.after, 0, &jerr)) == NULL) {
        rc = cdc_error_set(e, CDC_ERR_INTERNAL, "bad snapshot position of %s.%s", t->schema,
                           t->name);
        goto done;
    }
    if (rel == NULL || keys.oom) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    cdc_buf_printf(&sql, "SELECT %s FROM %s", cols.data ? cols.data : "", rel);
    if (after != NULL) {
        if (json_array_size(after) != nkeys) {
            /* the key changed since the position was recorded: start over */
            cdc_log_warn("incremental snapshot of %s.%s: its key changed, reading it again from "
                         "the start",
                         t->schema, t->name);
            json_decref(after);
            after = NULL;
        } else {
            cdc_buf_printf(&sql, " WHERE (%s) > (", keys.data);
            for (size_t i = 0; i < nkeys; i++)
                cdc_buf_printf(&sql, "%s$%zu", i ? ", " : "", i + 1);
            cdc_buf_puts(&sql, ")");
        }
    }
    cdc_buf_printf(&sql, " ORDER BY %s", keys.data);
    if (sql.oom || cdc_array_resize(w->parts, w->nparts + 1) != CDC_OK) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    p = &w->parts[w->nparts++];
    memset(p, 0, sizeof(*p));
    p->table = idx;
    p->version = t->doc.version;
    p->sql = sql.data;
    sql.data = NULL;
    p->from = after;
    after = NULL;
    t->isnap.part = w->nparts;
    *skip = false;
done:
    json_decref(after);
    free(rel);
    cdc_buf_free(&cols);
    cdc_buf_free(&keys);
    cdc_buf_free(&sql);
    return rc;
}

/* The keys of part p's rows, as the stream's events of the same rows encode them, and its
 * last row's key values (p->after). */
static cdc_err_t part_keys(cdc_capture_t *cap, cdc_capture_part_t *p, cdc_error_t *e)
{
    cdc_capture_table_t *t = &cap->tables[p->table];
    int n = cdc_pg_ntuples(p->rows);
    cdc_pgo_value_t *vals = calloc(t->doc.ncols ? t->doc.ncols : 1, sizeof(*vals));

    if (vals == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cdc_chunk_reset(&p->chunk);
    for (int i = 0; i < n; i++) {
        cdc_pgo_tuple_t row = {(uint16_t)t->doc.ncols, vals};
        for (size_t c = 0; c < t->doc.ncols; c++)
            vals[c] = cdc_pg_isnull(p->rows, i, (int)c)
                          ? (cdc_pgo_value_t){CDC_PGO_VAL_NULL, NULL, 0}
                          : (cdc_pgo_value_t){CDC_PGO_VAL_TEXT, cdc_pg_value(p->rows, i, (int)c),
                                              (uint32_t)cdc_pg_length(p->rows, i, (int)c)};
        cdc_buf_reset(&cap->key);
        if (!cdc_event_encode_key(&cap->key, &t->doc, &row, NULL) || cap->key.oom ||
            cdc_chunk_add(&p->chunk, cap->key.data, cap->key.len) != CDC_OK) {
            free(vals);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory reading a chunk of %s.%s",
                                 t->schema, t->name);
        }
    }
    free(vals);
    if (n > 0) {
        json_t *last = json_array();
        for (size_t c = 0; c < t->doc.ncols; c++)
            if (t->doc.cols[c].key > 0)
                json_array_append_new(last, json_string(cdc_pg_value(p->rows, n - 1, (int)c)));
        p->after = json_dumps(last, JSON_COMPACT);
        json_decref(last);
    }
    return CDC_OK;
}

/* Where the windows' time went since the last summary (docs/benchmarks.md, "Many
 * tables"): logged once no window is in flight and no chunk marker waits. */
static void log_times(cdc_capture_t *cap)
{
    cdc_capture_isnap_time_t *m = &cap->incremental.time;
    cdc_log_info("incremental snapshots: %" PRId64 " windows, %" PRId64
                 " chunks; ms in: preparing the chunks %" PRId64 ", low watermarks %" PRId64
                 ", reads %" PRId64 ", high watermarks %" PRId64
                 ", waiting for the high watermark in the stream %" PRId64
                 ", emitting the rows %" PRId64 ", between windows %" PRId64,
                 m->windows, m->tables, m->prepare_us / 1000, m->low_us / 1000, m->read_us / 1000,
                 m->high_us / 1000, m->wait_us / 1000, m->emit_us / 1000, m->idle_us / 1000);
    memset(m, 0, sizeof(*m));
}

/*
 * Opens a window: the next chunks of the due tables from cap->incremental.next on (round robin,
 * each table one chunk in turn), up to --snapshot-window-tables of them, read between one
 * low and one high watermark into cap->incremental.window.
 */
static cdc_err_t start_window(cdc_capture_t *cap, int64_t now, cdc_error_t *e)
{
    cdc_capture_window_t *w = &cap->incremental.window;
    int64_t t0 = cdc_clock_mono_us(), t1, t2, t3;
    size_t k;
    bool retry = false;
    cdc_err_t rc = CDC_OK;

    cdc_incremental_window_free(cap);
    if (now < cap->incremental.pace_ms) /* --snapshot-max-rate */
        return CDC_OK;
    /* the rows the tables prepared so far are expected to bring (their estimates): no more
     * tables are prepared than the window's --snapshot-chunk rows are likely to read */
    int64_t expected = 0;
    for (k = 0; k < cap->ntables && w->nparts < (size_t)cap->cfg->snapshot_window_tables &&
                expected < cap->cfg->snapshot_chunk;
         k++) {
        size_t i = (cap->incremental.next + k) % cap->ntables;
        cdc_capture_table_t *t = &cap->tables[i];
        bool skip;
        if (!t->captured || t->failed || !t->isnap.due || now < t->isnap.retry_ms)
            continue;
        if ((rc = prepare_part(cap, i, &skip, e)) != CDC_OK)
            goto done;
        if (!skip)
            expected += t->isnap.estimate > t->isnap.rows ? t->isnap.estimate - t->isnap.rows : 1;
    }
    if (w->nparts == 0)
        goto done;
    if (cap->incremental.time.since_us > 0) { /* since the last window's rows */
        cap->incremental.time.idle_us += t0 - cap->incremental.time.since_us;
        cap->incremental.time.since_us = 0;
    }
    snprintf(w->id, sizeof(w->id), "%s.%" PRIx64, cap->tables[w->parts[0].table].isnap.id,
             (uint64_t)cdc_clock_mono_us());
    t1 = cdc_clock_mono_us();
    if ((rc = emit_watermark(cap, CDC_WATERMARK_LOW, e)) != CDC_OK)
        goto done;
    t2 = cdc_clock_mono_us();
    if ((rc = read_window(cap, &retry, e)) != CDC_OK)
        goto done;
    if (retry) { /* (its low watermark is ignored: no window has its id) */
        for (size_t i = 0; i < w->nparts; i++)
            cap->tables[w->parts[i].table].isnap.retry_ms = cdc_clock_mono_coarse_ms() + 2;
        goto done;
    }
    t3 = cdc_clock_mono_us();
    hold_window();
    if ((rc = emit_watermark(cap, CDC_WATERMARK_HIGH, e)) != CDC_OK)
        goto done;
    w->high_us = cdc_clock_mono_us();
    /* parts the window had no rows left for wait for the next one */
    while (w->nparts > 0 && w->parts[w->nparts - 1].rows == NULL)
        part_free(cap, &w->parts[--w->nparts]);
    /* the next window begins with the first table this one did not read */
    cap->incremental.next = (w->parts[w->nparts - 1].table + 1) % cap->ntables;
    for (size_t i = 0; i < w->nparts; i++)
        if ((rc = part_keys(cap, &w->parts[i], e)) != CDC_OK)
            goto done;
    w->open = false;
    w->active = true;
    cdc_metrics_counter_inc(cap->incremental.m_windows);
    cap->incremental.time.windows++;
    cap->incremental.time.tables += (int64_t)w->nparts;
    cap->incremental.time.prepare_us += t1 - t0;
    cap->incremental.time.low_us += t2 - t1;
    cap->incremental.time.read_us += t3 - t2;
    cap->incremental.time.high_us += w->high_us - t3;
done:
    if (rc != CDC_OK || !w->active)
        cdc_incremental_window_free(cap);
    return rc;
}

/*
 * The low watermark of the first chunk of a table that joined the publication again
 * arrived at lsn: the mirror is truncated there (source.snapshot "backfill": the mirror's
 * alone, the source made no truncate), after every change decoded before (the removal,
 * and the table's changes before it) and before the chunk's rows at its high watermark.
 * Keys deleted while the table was out thus leave the mirror; the chunks read every row
 * it has now. A first chunk read again (a DDL in its window, a new session) truncates
 * again, before its rows too. In a transaction of its own for the confirmed LSN.
 */
static cdc_err_t truncate_mirror(cdc_capture_t *cap, cdc_capture_table_t *t, uint64_t lsn,
                                 cdc_error_t *e)
{
    cdc_capture_txpos_t stream = *cdc_capture_tx(cap);
    cdc_capture_txpos_t own = {.id = cdc_txtrack_begin(&cap->track),
                               .xid = 0,
                               .commit_lsn = lsn,
                               .commit_ts_ms = cdc_clock_wall_ms()};
    cdc_err_t rc;

    if (own.id == 0)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cdc_capture_tx_set(cap, &own);
    rc = cdc_capture_emit_marker(cap, t, 't', lsn, "backfill", e);
    cdc_capture_tx_set(cap, &stream);
    cdc_txtrack_commit(&cap->track, own.id, lsn);
    if (rc == CDC_OK)
        cdc_log_info("incremental snapshot %s of %s.%s: mirror truncated before its first chunk",
                     t->isnap.id, t->schema, t->name);
    return rc;
}

/* Part p's high watermark arrived at lsn: its rows left are emitted there, in transaction
 * tx, and its marker waits for their acks. */
static cdc_err_t part_high(cdc_capture_t *cap, cdc_capture_part_t *p, uint64_t lsn, uint64_t tx,
                           cdc_error_t *e)
{
    cdc_capture_table_t *t = &cap->tables[p->table];
    cdc_pgo_value_t *vals = calloc(t->doc.ncols ? t->doc.ncols : 1, sizeof(*vals));
    cdc_snapshot_pos_t pos = {.lsn = lsn,
                              .commit_lsn = lsn,
                              .ts = cdc_clock_wall_ms(),
                              .tx = tx,
                              .label = t->isnap.label,
                              .id = t->isnap.id,
                              .count = true};
    int64_t emitted = (int64_t)p->chunk.nlive;
    cdc_err_t rc;

    if (vals == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    /* the rows read are in t->doc's columns unless a DDL came in the window: then the
     * chunk is read again (a Relation message of the table installed another version) */
    if (p->toast_taken && t->isnap.toast_rereads < TOAST_REREADS) {
        /* a row the change left a TOASTed value out of would miss its read, and no
         * consumer has that value yet (docs/capture.md, "An existing slot") */
        t->isnap.toast_rereads++;
        cdc_log_info("incremental snapshot %s of %s.%s: a change in the chunk's window left a "
                     "TOASTed value out of a row not read yet: reading the chunk again (%d of "
                     "at most %d times)",
                     t->isnap.id, t->schema, t->name, t->isnap.toast_rereads, TOAST_REREADS);
        emitted = -1;
        rc = CDC_OK;
    } else if (t->captured && !t->failed && t->has_doc && t->doc.version == p->version) {
        t->isnap.toast_rereads = 0;
        rc = cdc_snapshot_emit_rows(cap, t, p->rows, 0, cdc_pg_ntuples(p->rows), &p->chunk, false,
                                    &pos, vals, e);
    } else {
        emitted = -1;
        rc = CDC_OK;
    }
    free(vals);
    if (rc != CDC_OK || emitted < 0)
        return rc;
    t->isnap.rows += emitted;
    /* --snapshot-max-rate, one pace over every table: the next window waits until the rows
     * read so far, of whichever tables, are due */
    if (cap->cfg->snapshot_max_rate > 0) {
        int64_t now = cdc_clock_mono_coarse_ms();
        cap->incremental.pace_ms =
            (cap->incremental.pace_ms > now ? cap->incremental.pace_ms : now) +
            (int64_t)p->chunk.nrows * 1000 / cap->cfg->snapshot_max_rate;
    }
    if (p->last) {
        t->isnap.due = false;
    } else if (p->after != NULL) {
        free(t->isnap.after);
        t->isnap.after = p->after;
        p->after = NULL;
    }
    /* its marker once Kafka acked the rows (and everything before): the position recorded
     * is one whose rows are durable (write_marks) */
    if (cdc_array_resize(cap->incremental.marks, cap->incremental.nmarks + 1) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cap->incremental.marks[cap->incremental.nmarks++] =
        (cdc_capture_mark_t){.table = p->table,
                             .lsn = lsn,
                             .after = t->isnap.after ? strdup(t->isnap.after) : NULL,
                             .rows = t->isnap.rows,
                             .done = !t->isnap.due};
    t->isnap.pending_marks++;
    return CDC_OK;
}

/* The window's high watermark arrived at lsn: every chunk's rows left are emitted there,
 * in one transaction of their own (for the confirmed LSN). */
static cdc_err_t high_watermark(cdc_capture_t *cap, uint64_t lsn, cdc_error_t *e)
{
    cdc_capture_window_t *w = &cap->incremental.window;
    int64_t t0 = cdc_clock_mono_us();
    uint64_t tx = cdc_txtrack_begin(&cap->track);
    cdc_err_t rc = CDC_OK;

    if (tx == 0)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < w->nparts && rc == CDC_OK; i++)
        rc = part_high(cap, &w->parts[i], lsn, tx, e);
    /* confirmable once its rows are acked, in order with the transactions around it */
    cdc_txtrack_commit(&cap->track, tx, lsn);
    cap->incremental.time.wait_us += t0 - w->high_us;
    cap->incremental.time.emit_us += cdc_clock_mono_us() - t0;
    cap->incremental.time.since_us = cdc_clock_mono_us();
    cdc_incremental_window_free(cap);
    /* the next window starts at this turn of the loop, not at the next message or read
     * timeout (100 ms on an idle stream) when the clock has not ticked since the last
     * look: 87 ms of the 123 ms a small table took when each window read one table
     * (docs/benchmarks.md, "Many tables") */
    cap->incremental.last_tick_ms = -1;
    return rc;
}

cdc_err_t cdc_incremental_on_watermark(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                                       cdc_error_t *e)
{
    char id[CDC_WATERMARK_ID_MAX];
    cdc_watermark_kind_t kind;
    cdc_capture_window_t *w = &cap->incremental.window;

    if (!cdc_watermark_parse(m->u.message.content, m->u.message.len, id, sizeof(id), &kind))
        return CDC_OK;
    /* a watermark of an earlier window or session (the stream replays from the confirmed
     * position) is no window of this one */
    if (!w->active || strcmp(id, w->id) != 0)
        return CDC_OK;
    if (kind == CDC_WATERMARK_LOW) {
        w->open = true;
        for (size_t i = 0; i < w->nparts; i++) {
            cdc_capture_table_t *t = &cap->tables[w->parts[i].table];
            cdc_err_t rc;
            if (t->isnap.truncate && t->isnap.after == NULL && t->has_doc &&
                t->doc.version == w->parts[i].version &&
                (rc = truncate_mirror(cap, t, lsn, e)) != CDC_OK)
                return rc;
        }
        return CDC_OK;
    }
    return high_watermark(cap, lsn, e);
}

/* t's chunk in the window when a change of t in the transaction being decoded takes keys
 * out of it: the change comes inside the window, or before it from a transaction the
 * window's read did not see (chunk.h, cdc_chunk_snapshot_t); else NULL. */
static cdc_capture_part_t *in_window(cdc_capture_t *cap, const cdc_capture_table_t *t)
{
    cdc_capture_window_t *w = &cap->incremental.window;
    if (!w->active || t->isnap.part == 0 || t->isnap.part > w->nparts)
        return NULL;
    if (!w->open && cdc_chunk_snapshot_sees(&w->snap, cdc_capture_tx(cap)->xid))
        return NULL;
    return &w->parts[t->isnap.part - 1];
}

void cdc_incremental_on_key(cdc_capture_t *cap, cdc_capture_table_t *t, const cdc_buf_t *key,
                            bool toast)
{
    cdc_capture_part_t *p = in_window(cap, t);
    if (p != NULL && cdc_chunk_remove(&p->chunk, key->data, key->len) && toast)
        p->toast_taken = true;
}

void cdc_incremental_on_truncate(cdc_capture_t *cap, const cdc_capture_table_t *t)
{
    cdc_capture_part_t *p = in_window(cap, t);
    if (p != NULL)
        cdc_chunk_remove_all(&p->chunk);
}

/* ---- re-snapshot on request (POST /snapshot, capture/request.c) --------------------- */

cdc_err_t cdc_incremental_request(cdc_capture_t *cap, const char *schema, const char *table,
                                  cdc_capture_reply_t *reply, cdc_error_t *e)
{
    cdc_capture_table_t *t = cdc_capture_table_by_name(cap, schema, table);
    json_t *j;
    cdc_err_t rc;

    if (t == NULL || !t->captured || t->failed) {
        cdc_capture_reply_error(reply, 404,
                                "table \"%s.%s\" is not captured (see the capture's /status "
                                "for its tables)",
                                schema, table);
        return CDC_OK;
    }
    if (t->removed) {
        cdc_capture_reply_error(reply, 404,
                                "table \"%s.%s\" left publication \"%s\": it is not captured "
                                "(add it again to read it again)",
                                schema, table, cap->cfg->publication);
        return CDC_OK;
    }
    if (t->isnap.due) {
        cdc_capture_reply_error(reply, 409, "a snapshot of \"%s.%s\" is already running (%s)",
                                schema, table, t->isnap.id);
        return CDC_OK;
    }
    rc = cdc_incremental_begin(cap, t, "backfill", false, e);
    if (rc != CDC_OK) {
        cdc_capture_reply_error(reply, 503, "%s", e->msg);
        return rc;
    }
    j = json_pack("{s:o, s:s, s:s}", "table", json_sprintf("%s.%s", schema, table), "snapshot_id",
                  t->isnap.id, "label", t->isnap.label);
    cdc_capture_reply_set(reply, 202, j ? json_dumps(j, JSON_COMPACT) : NULL);
    json_decref(j);
    return CDC_OK;
}

cdc_err_t cdc_incremental_tick(cdc_capture_t *cap, cdc_error_t *e)
{
    int64_t now = cdc_clock_mono_coarse_ms();
    cdc_err_t rc;

    /* the loop turns once per message: look at most once per clock tick */
    if (now == cap->incremental.last_tick_ms)
        return CDC_OK;
    cap->incremental.last_tick_ms = now;
    rc = write_marks(cap, e);
    if (rc != CDC_OK || cap->incremental.window.active)
        return rc;
    /* round robin over the due tables, one chunk each in turn, many in one window, all
     * under the one pace of --snapshot-max-rate: a thousand tables added at once all make
     * progress, and a large one does not hold back the small ones behind it */
    rc = start_window(cap, now, e);
    if (rc == CDC_OK && !cap->incremental.window.active && cap->incremental.time.windows > 0 &&
        cap->incremental.nmarks == 0)
        log_times(cap);
    return rc;
}
