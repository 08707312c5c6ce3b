/*
 * The capture's tables: the --tables list, each table's state by topic, name and
 * relation id with its metrics, table errors (docs/capture.md, "Table errors"), and the
 * Relation and Type messages that give a table its schema version. Partitions whose
 * Relation arrives under their own name are in partitions.c.
 *
 * A call circle of two files (docs/development.md, "Call circles"): tables.c starts and
 * abandons a table's incremental snapshot (incremental.c) as the table joins or leaves,
 * and incremental.c hands a table that left or came back to tables.c. request.c, above
 * them, hands them the operator's requests (POST /snapshot, POST /tables); they answer in
 * a reply (reply.c) that request.c passes on. The rest of capture/ sits below these,
 * under the stream (stream.c) and the change dispatch (changes.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "capture/stream_int.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"

void cdc_capture_exclude(cdc_capture_t *cap, cdc_capture_table_t *t)
{
    if (t->excluded)
        return;
    t->excluded = true;
    cdc_log_info("table %s.%s of publication \"%s\" is left out by --table-include/"
                 "--table-exclude: its changes are not captured (counted in "
                 "cdc_capture_excluded_changes_total)",
                 t->schema, t->name, cap->cfg->publication);
}

cdc_err_t cdc_capture_uncaptured(cdc_capture_t *cap, cdc_capture_table_t *t, uint64_t lsn,
                                 cdc_error_t *e)
{
    bool fixed = cap->cfg->tables != NULL && cap->cfg->tables[0] != '\0';
    char at[32];

    cdc_lsn_str(lsn, at, sizeof(at));
    cdc_metrics_counter_inc(t->m_uncaptured);
    if (fixed)
        return cdc_error_set_retriable(
            e, CDC_ERR_CONFIG, false,
            "change at %s for table \"%s.%s\", which is in publication \"%s\" but not in "
            "--tables: stopping before its position is confirmed, so that nothing is lost "
            "(hint: add %s.%s to --tables and restart the capture, or remove the table from "
            "the publication)",
            at, t->schema, t->name, cap->cfg->publication, t->schema, t->name);
    /* the capture set is the publication: the next session reads it again */
    return cdc_error_set_retriable(e, CDC_ERR_CONFIG, true,
                                   "change at %s for table \"%s.%s\", which joined publication "
                                   "\"%s\" after this session read it: a new session captures it",
                                   at, t->schema, t->name, cap->cfg->publication);
}

/* t joins the session's capture set. */
static cdc_err_t want(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    cdc_source_table_t *w;

    if (t->captured)
        return CDC_OK;
    if (cdc_array_resize(cap->wanted, cap->nwanted + 1) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    w = &cap->wanted[cap->nwanted];
    w->schema = strdup(t->schema);
    w->name = strdup(t->name);
    if (w->schema == NULL || w->name == NULL) {
        free(w->schema);
        free(w->name);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    cap->nwanted++;
    t->captured = true;
    return CDC_OK;
}

cdc_err_t cdc_capture_adopt(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    cdc_err_t rc;

    if (t->captured)
        return CDC_OK;
    if (t->removed) {
        /* a Relation message of a table recorded as removed: the stream is still before
         * the removal (the publication no longer has it), its changes are produced; the
         * publication poll tells when it is in the publication again */
        cdc_log_debug("table %s.%s left the publication after this position: its changes up "
                      "to the removal are produced",
                      t->schema, t->name);
        return want(cap, t, e);
    }
    if ((rc = want(cap, t, e)) != CDC_OK)
        return rc;
    cdc_metrics_counter_inc(cap->m_adopted);
    cdc_log_info("table %s.%s joined publication \"%s\": captured from its first change on",
                 t->schema, t->name, cap->cfg->publication);
    rc = cdc_capture_topic_ensure(cap, t, e);
    if (rc != CDC_OK)
        /* nothing of the table is confirmed: the next session makes the topic again */
        return cdc_error_set_retriable(e, rc, true,
                                       "could not create topic %s of table %s.%s, which joined "
                                       "the publication: %s",
                                       t->topic, t->schema, t->name, e->msg);
    if (cdc_incremental_needed(cap, t))
        return cdc_incremental_begin(cap, t, "incremental", false, e);
    return CDC_OK;
}

cdc_err_t cdc_capture_table_removed(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    cdc_error_t le;
    cdc_err_t rc;

    /* the removal committed before this look: it is before the server's position now */
    if (cdc_source_current_lsn(&cap->src, &t->removed_lsn, &le) != CDC_OK)
        t->removed_lsn = 0;
    t->removed_ms = cdc_clock_wall_ms();
    t->removed = true;
    cdc_log_info("table %s.%s left publication \"%s\": no longer captured; its topic %s and "
                 "its Iceberg tables stay, readable (adding it again reads it again)",
                 t->schema, t->name, cap->cfg->publication, t->topic);
    if ((rc = cdc_incremental_abandon(cap, t, e)) != CDC_OK)
        return rc;
    rc = cdc_registry_mark_removed(cap, t, e);
    /* /status shows the removal before the metric counts it */
    cdc_capture_status_publish(cap, true);
    cdc_metrics_counter_inc(cap->m_removed);
    return rc;
}

cdc_err_t cdc_capture_rejoin(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    cdc_err_t rc;

    if ((rc = want(cap, t, e)) != CDC_OK)
        return rc;
    cdc_metrics_counter_inc(cap->m_adopted);
    cdc_log_info("table %s.%s joined publication \"%s\" again: its changes while it was out "
                 "are unknown, so its mirror is truncated and its rows read again",
                 t->schema, t->name, cap->cfg->publication);
    rc = cdc_capture_topic_ensure(cap, t, e);
    if (rc != CDC_OK)
        return cdc_error_set_retriable(e, rc, true,
                                       "could not create topic %s of table %s.%s, which joined "
                                       "the publication again: %s",
                                       t->topic, t->schema, t->name, e->msg);
    /* the snapshot's record carries the truncate: the removed marker may go */
    if ((rc = cdc_incremental_begin(cap, t, "incremental", true, e)) != CDC_OK)
        return rc;
    return cdc_registry_clear_removed(cap, t, e);
}

cdc_err_t cdc_capture_poll_publication(cdc_capture_t *cap, cdc_error_t *e)
{
    cdc_source_table_t *pub = NULL;
    size_t n = 0;
    cdc_err_t rc;

    if (cap->cfg->tables != NULL && cap->cfg->tables[0] != '\0')
        return CDC_OK;
    rc = cdc_source_publication_tables(&cap->src, cap->cfg->publication, &pub, &n, e);
    /* tables of the capture set that left the publication */
    for (size_t w = 0; rc == CDC_OK && w < cap->nwanted; w++) {
        cdc_capture_table_t *t =
            cdc_capture_table_by_name(cap, cap->wanted[w].schema, cap->wanted[w].name);
        bool published = false;
        for (size_t i = 0; i < n && !published; i++)
            published = strcmp(pub[i].schema, cap->wanted[w].schema) == 0 &&
                        strcmp(pub[i].name, cap->wanted[w].name) == 0;
        if (t != NULL && !published && !t->removed && !t->failed)
            rc = cdc_capture_table_removed(cap, t, e);
    }
    for (size_t i = 0; rc == CDC_OK && i < n; i++) {
        cdc_capture_table_t *t = cdc_capture_table_by_name(cap, pub[i].schema, pub[i].name);
        uint32_t was = t != NULL ? t->membership : 0;
        if (t != NULL)
            t->membership = pub[i].membership;
        /* another pg_publication_rel row: it left and came back between two looks */
        if (t != NULL && t->captured && !t->removed && !t->failed && was != 0 &&
            pub[i].membership != 0 && was != pub[i].membership)
            rc = cdc_capture_table_removed(cap, t, e);
        if (rc == CDC_OK && t != NULL && t->removed && !t->failed) {
            rc = cdc_capture_rejoin(cap, t, e);
            continue;
        }
        if (cdc_capture_is_wanted(cap, pub[i].schema, pub[i].name))
            continue;
        if (!cdc_table_filter_match(&cap->filter, pub[i].schema, pub[i].name)) {
            t = cdc_capture_table_get(cap, pub[i].schema, pub[i].name);
            if (t != NULL)
                cdc_capture_exclude(cap, t);
            continue;
        }
        t = cdc_capture_table_get(cap, pub[i].schema, pub[i].name);
        if (t == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        } else if (!t->failed) {
            /* no change of the table is waiting: a topic that cannot be made yet (logged,
             * counted, in /status) is tried again at the next look, the stream goes on */
            cdc_error_t te;
            if (cdc_capture_topic_ensure(cap, t, &te) == CDC_OK)
                rc = cdc_capture_adopt(cap, t, e);
        }
    }
    cdc_source_tables_free(pub, n);
    return rc;
}

/* setup->table_error of the session's setup check */
void cdc_capture_on_table_error(void *arg, const char *schema, const char *name,
                                const cdc_error_t *err)
{
    cdc_capture_t *cap = arg;
    cdc_capture_table_t *t = cdc_capture_table_get(cap, schema, name);
    if (t == NULL)
        cdc_log_error("%s", err->msg);
    else
        cdc_capture_table_fail(cap, t, "%s", err->msg);
}

cdc_err_t cdc_capture_on_relation(cdc_capture_t *cap, const cdc_pgo_msg_t *m, cdc_error_t *e)
{
    cdc_capture_table_t *t, *old;
    cdc_schema_doc_t doc = {0};
    const char **names = NULL;
    bool *notnull = NULL;
    int32_t *attnum = NULL;
    bool *hasdef = NULL;
    int *ndims = NULL;
    int key = 0;
    cdc_err_t rc = CDC_ERR_NOMEM;
    uint16_t n = m->u.relation.ncols;

    t = cdc_capture_table_get(cap, m->u.relation.nspname, m->u.relation.relname);
    if (t == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    old = cdc_capture_table_by_relid(cap, m->u.relation.relid);
    if (old && old != t)
        old->relid = 0; /* renamed: the oid now belongs to another name */
    t->relid = m->u.relation.relid;
    if (!t->captured && !t->failed && (cap->cfg->tables == NULL || cap->cfg->tables[0] == '\0') &&
        !cdc_table_filter_match(&cap->filter, t->schema, t->name)) {
        cdc_capture_exclude(cap, t);
    } else if (!t->captured && !t->failed &&
               (cap->cfg->tables == NULL || cap->cfg->tables[0] == '\0')) {
        /* the capture set is the publication, and the table joined it */
        cdc_err_t arc = cdc_capture_adopt(cap, t, e);
        if (arc != CDC_OK)
            return arc;
    }
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
    ndims = calloc(n ? n : 1, sizeof(*ndims));
    if (doc.cols == NULL || names == NULL || notnull == NULL || attnum == NULL || hasdef == NULL ||
        ndims == NULL || doc.pg_schema == NULL || doc.pg_table == NULL)
        goto fail;
    doc.ncols = n;
    for (uint16_t i = 0; i < n; i++) {
        const cdc_pgo_column_t *c = &m->u.relation.cols[i];
        doc.cols[i].name = strdup(c->name);
        if (doc.cols[i].name == NULL)
            goto fail;
        names[i] = doc.cols[i].name;
        doc.cols[i].key = c->key ? ++key : 0;
    }
    if (cdc_source_columns(&cap->src, doc.relid, names, n, notnull, attnum, hasdef, ndims, e) !=
        CDC_OK) {
        rc = e->code;
        goto fail;
    }
    for (uint16_t i = 0; i < n; i++) {
        const cdc_pgo_column_t *c = &m->u.relation.cols[i];
        cdc_capture_fill_col(cap, &doc.cols[i], c->type_oid, c->typmod, ndims[i], NULL);
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
    free(ndims);
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
    free(ndims);
    cdc_schema_doc_free(&doc);
    if (rc == CDC_ERR_NOMEM)
        cdc_error_set(e, rc, "out of memory");
    return rc;
}

cdc_err_t cdc_capture_on_type(cdc_capture_t *cap, const cdc_pgo_msg_t *m, cdc_error_t *e)
{
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
    if (cdc_array_resize(cap->types, cap->ntypes + 1) != CDC_OK) {
        free(name);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    cap->types[cap->ntypes].oid = m->u.type.oid;
    cap->types[cap->ntypes].name = name;
    cap->types[cap->ntypes].is_array = m->u.type.typname[0] == '_';
    cap->ntypes++;
    return CDC_OK;
}

cdc_err_t cdc_capture_publication_request(cdc_capture_t *cap, bool add, const char *schema,
                                          const char *table, cdc_capture_reply_t *reply,
                                          cdc_error_t *e)
{
    cdc_capture_table_t *t;
    bool changed = false;
    json_t *j;
    cdc_err_t rc;

    if (cap->cfg->tables != NULL && cap->cfg->tables[0] != '\0') {
        cdc_capture_reply_error(reply, 409,
                                "the capture's tables are --tables (%s): change the list and "
                                "restart the capture, or run it without --tables so that "
                                "publication \"%s\" is its table set",
                                cap->cfg->tables, cap->cfg->publication);
        return CDC_OK;
    }
    if (add && !cdc_table_filter_match(&cap->filter, schema, table)) {
        cdc_capture_reply_error(reply, 409,
                                "table \"%s.%s\" is left out by --table-include/--table-exclude",
                                schema, table);
        return CDC_OK;
    }
    rc = cdc_source_publication_alter(&cap->src, cap->cfg->publication, add, schema, table,
                                      &changed, e);
    if (rc != CDC_OK) {
        cdc_capture_reply_error(reply, rc == CDC_ERR_UNAVAILABLE ? 503 : 409, "%s", e->msg);
        return rc == CDC_ERR_UNAVAILABLE ? rc : CDC_OK;
    }
    if (changed)
        cdc_log_info("table %s.%s %s publication \"%s\" (POST /tables)", schema, table,
                     add ? "added to" : "dropped from", cap->cfg->publication);
    /* the change is committed: the publication's tables are read now, not at the next
     * probe, so the table joins (or leaves) before this answer */
    rc = cdc_capture_poll_publication(cap, e);
    if (rc != CDC_OK) {
        cdc_capture_reply_error(reply, 503, "%s", e->msg);
        return rc;
    }
    t = cdc_capture_table_by_name(cap, schema, table);
    j = json_pack("{s:o, s:s, s:b, s:s}", "table", json_sprintf("%s.%s", schema, table),
                  "publication", cap->cfg->publication, "changed", changed, "state",
                  cdc_capture_table_state(t));
    cdc_capture_reply_set(reply, 200, j ? json_dumps(j, JSON_COMPACT) : NULL);
    json_decref(j);
    return CDC_OK;
}
