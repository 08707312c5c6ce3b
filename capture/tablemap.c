/*
 * The capture's table map (docs/capture.md): each table's entry by topic, name and
 * relation id, made on first sight with its metrics; the --tables list; a table put in
 * error (docs/capture.md, "Table errors") and a table's state in /status; the column
 * types of a Relation. Owns cap->tables and its entries' identity, metrics and error
 * flag; the session thread alone touches them. Calls nothing else in capture/: every
 * other file of the session may use it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/stream_int.h"
#include "common/buf.h"
#include "common/log.h"

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
        if (cdc_array_reserve(*t, cap, *n + 1, 8) != CDC_OK) {
            free(copy);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        if (dot) {
            *dot = '\0';
            (*t)[*n].schema = strdup(tok);
            (*t)[*n].name = strdup(dot + 1);
        } else {
            (*t)[*n].schema = strdup("public");
            (*t)[*n].name = strdup(tok);
        }
        if ((*t)[*n].name == NULL || (*t)[*n].schema == NULL) {
            (*n)++;
            free(copy);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
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
    cdc_capture_table_t *t;
    const char *labels[5];

    snprintf(topic, sizeof(topic), "%s.%s.%s", cap->cfg->topic_prefix, schema, name);
    for (size_t i = 0; i < cap->ntables; i++)
        if (strcmp(cap->tables[i].topic, topic) == 0)
            return &cap->tables[i];
    if (cdc_array_resize(cap->tables, cap->ntables + 1) != CDC_OK)
        return NULL;
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
                            "Rows read by snapshots (the initial one and incremental ones), per "
                            "table.",
                            labels);
    t->m_error = cdc_metrics_gauge(cdc_metrics_default(), "cdc_capture_table_errors",
                                   "1 while the table is not captured because of an error of "
                                   "its own (the log names it and the fix); the other tables "
                                   "are captured.",
                                   labels);
    t->m_uncaptured = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_uncaptured_changes_total",
        "Changes received for a table of the publication that is not in the capture set "
        "(--tables): the capture stopped before confirming them (docs/capture.md, \"Tables "
        "outside the capture set\").",
        labels);
    t->m_excluded = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_excluded_changes_total",
        "Changes received for a table of the publication that --table-include/--table-exclude "
        "leave out: not produced, by configuration (docs/capture.md, \"Choosing the "
        "tables\").",
        labels);
    t->m_topic_errors = cdc_metrics_counter(
        cdc_metrics_default(), "cdc_capture_topic_errors_total",
        "Failed attempts to create or find the table's topic (each is tried again; "
        "docs/capture.md, \"Topics\").",
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
cdc_capture_table_t *cdc_capture_table_by_name(cdc_capture_t *cap, const char *schema,
                                               const char *name)
{
    for (size_t i = 0; i < cap->ntables; i++)
        if (strcmp(cap->tables[i].schema, schema) == 0 && strcmp(cap->tables[i].name, name) == 0)
            return &cap->tables[i];
    return NULL;
}

bool cdc_capture_is_wanted(const cdc_capture_t *cap, const char *schema, const char *name)
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

cdc_capture_table_t *cdc_capture_table_by_relid(cdc_capture_t *cap, uint32_t relid)
{
    for (size_t i = 0; i < cap->ntables; i++)
        if (cap->tables[i].relid == relid)
            return &cap->tables[i];
    return NULL;
}

void cdc_capture_fill_col(cdc_capture_t *cap, cdc_schema_col_t *col, uint32_t oid, int32_t typmod,
                          int ndims, const char *type_name)
{
    const char *builtin = cdc_schema_pg_type_name(oid);
    uint32_t elem = cdc_schema_array_elem(oid);
    char buf[160];

    if (!cdc_schema_map_col(&cap->mapping, col, oid, typmod, ndims)) /* out of memory */
        cdc_schema_map_col(NULL, col, oid, typmod, ndims);
    if (builtin == NULL && elem == 0 && cap->mapping.nested && cap->src.sql != NULL) {
        /* a composite type: a struct of its attributes (docs/capture.md, "Types") */
        cdc_error_t e;
        char *st = NULL;
        if (cdc_source_composite(&cap->src, oid, &cap->mapping, &st, &e) != CDC_OK)
            cdc_log_warn("could not read the attributes of type %u, column \"%s\" stays "
                         "text: %s",
                         oid, col->name ? col->name : "?", e.msg);
        if (st != NULL) {
            col->ice_type = CDC_ICE_STRUCT;
            col->ice_nested = st;
            col->enc = CDC_VENC_RECORD;
        }
    }
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

const char *cdc_capture_table_state(const cdc_capture_table_t *t)
{
    if (t == NULL || (!t->captured && !t->failed && !t->removed && !t->excluded))
        return "absent";
    return t->removed     ? "removed"
           : t->excluded  ? "excluded"
           : t->failed    ? "error"
           : t->isnap.due ? "snapshotting"
                          : "streaming";
}
