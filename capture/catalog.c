/*
 * The source's catalog queries (see source.h): what the stream's Relation messages do
 * not carry. A table's columns as one JSON text (the form the snapshot, the backfill and
 * the schema probe read), the probe itself written into the WAL under a lock
 * (docs/capture.md, "Backfill after DDL"), column facts by name for a Relation, and a
 * partition's root with its columns (docs/capture.md, "Partitioned tables").
 */
#include "capture/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/*
 * The columns of one table as one JSON text, as pgoutput's Relation would list them
 * (live, not generated, in attnum order), with what a Relation does not carry: attnum,
 * nullability, defaults, key flags by replica identity, type names. $1 is the quoted
 * "schema"."name"; no row when there is no such table.
 */
#define CATALOG_SQL                                                                                \
    "SELECT json_build_object('relid', c.oid::bigint, 'replident', c.relreplident::text, 'cols', " \
    "  json_agg(json_build_object('name', a.attname, 'oid', a.atttypid::bigint, "                  \
    "    'typmod', a.atttypmod, 'notnull', a.attnotnull, 'attnum', a.attnum, "                     \
    "    'ndims', a.attndims, "                                                                    \
    "    'hasdef', a.atthasdef OR a.atthasmissing, "                                               \
    "    'type', tn.nspname || '.' || ty.typname, "                                                \
    "    'key', c.relreplident = 'f' OR EXISTS (SELECT 1 FROM pg_index i "                         \
    "      WHERE i.indrelid = c.oid AND a.attnum = ANY (i.indkey) AND "                            \
    "      ((c.relreplident = 'd' AND i.indisprimary) OR "                                         \
    "       (c.relreplident = 'i' AND i.indisreplident)))) ORDER BY a.attnum), "                   \
    "  'parts', (SELECT coalesce(json_agg(p.relid::bigint ORDER BY p.relid::bigint), '[]') "       \
    "    FROM pg_partition_tree(c.oid) p WHERE p.isleaf AND p.relid <> c.oid))::text "             \
    "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "                                   \
    "JOIN pg_type ty ON ty.oid = a.atttypid "                                                      \
    "JOIN pg_namespace tn ON tn.oid = ty.typnamespace "                                            \
    "WHERE c.oid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped "                       \
    "AND a.attgenerated = '' GROUP BY c.oid, c.relreplident"

cdc_err_t cdc_source_catalog_json(cdc_source_t *src, const char *quoted_name, char **json,
                                  cdc_error_t *e)
{
    const char *p[1] = {quoted_name};
    cdc_pg_result_t *r = cdc_pg_query(src->sql, CATALOG_SQL, 1, p, e);

    *json = NULL;
    if (r == NULL)
        return cdc_error_prefix(e, "could not read the columns of %s", quoted_name);
    if (cdc_pg_ntuples(r) == 1 && !cdc_pg_isnull(r, 0, 0) &&
        (*json = strdup(cdc_pg_value(r, 0, 0))) == NULL) {
        cdc_pg_clear(r);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    cdc_pg_clear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_schema_probe(cdc_source_t *src, const char *schema, const char *table,
                                  const char *prefix, cdc_error_t *e)
{
    char *sql = cdc_pg_qualified(src->sql, schema, table);
    const char *p[2] = {sql, prefix};
    cdc_pg_result_t *r;
    cdc_err_t rc = CDC_OK;

    if (sql == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    r = cdc_pg_query(src->sql, "BEGIN", 0, NULL, e);
    if (r == NULL) {
        free(sql);
        return e->code;
    }
    cdc_pg_clear(r);
    /* the lock keeps DDL of the table out until the message is committed */
    {
        char *lock = NULL;
        if (asprintf(&lock, "LOCK TABLE %s IN ACCESS SHARE MODE NOWAIT", sql) < 0) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        } else {
            r = cdc_pg_exec(src->sql, lock);
            if (cdc_pg_status(r) != CDC_PG_COMMAND)
                rc = cdc_error_set(e, CDC_ERR_CONFLICT, "could not lock %s: %s", sql,
                                   cdc_pg_message(r));
            cdc_pg_clear(r);
        }
        free(lock);
    }
    if (rc == CDC_OK) {
        char *q = NULL;
        if (asprintf(&q, "SELECT pg_logical_emit_message(true, $2, (%s))", CATALOG_SQL) < 0) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        } else {
            r = cdc_pg_query(src->sql, q, 2, p, e);
            if (r == NULL)
                rc = e->code;
            cdc_pg_clear(r);
            free(q);
        }
    }
    r = cdc_pg_exec(src->sql, rc == CDC_OK ? "COMMIT" : "ROLLBACK");
    cdc_pg_clear(r);
    free(sql);
    return rc;
}

cdc_err_t cdc_source_columns(cdc_source_t *src, uint32_t relid, const char *const *names, size_t n,
                             bool *notnull, int32_t *attnum, bool *hasdef, int *ndims,
                             cdc_error_t *e)
{
    char oid[16];
    const char *p[1] = {oid};
    cdc_pg_result_t *r;

    for (size_t i = 0; i < n; i++) {
        notnull[i] = false;
        attnum[i] = 0;
        hasdef[i] = false;
        ndims[i] = 0;
    }
    snprintf(oid, sizeof(oid), "%u", relid);
    r = cdc_pg_query(src->sql,
                     "SELECT attname, attnotnull, attnum, atthasdef OR atthasmissing, attndims "
                     "FROM pg_attribute "
                     "WHERE attrelid = $1::oid "
                     "AND attnum > 0 AND NOT attisdropped",
                     1, p, e);
    if (r == NULL)
        return e->code;
    for (int row = 0; row < cdc_pg_ntuples(r); row++)
        for (size_t i = 0; i < n; i++)
            if (strcmp(cdc_pg_value(r, row, 0), names[i]) == 0) {
                notnull[i] = cdc_pg_is_true(r, row, 1);
                attnum[i] = (int32_t)strtol(cdc_pg_value(r, row, 2), NULL, 10);
                hasdef[i] = cdc_pg_is_true(r, row, 3);
                ndims[i] = (int)strtol(cdc_pg_value(r, row, 4), NULL, 10);
            }
    cdc_pg_clear(r);
    return CDC_OK;
}

/* The struct type of composite `oid` (a jansson object), NULL when it is none. */
static json_t *composite_type(cdc_source_t *src, uint32_t oid, const cdc_schema_mapping_t *m,
                              int depth, cdc_error_t *e, bool *failed)
{
    char o[16];
    const char *p[1] = {o};
    cdc_pg_result_t *r;
    json_t *fields, *type = NULL;

    snprintf(o, sizeof(o), "%u", oid);
    r = cdc_pg_query(src->sql,
                     "SELECT a.attname, a.atttypid, a.atttypmod, a.attndims, t.typtype "
                     "FROM pg_type ct JOIN pg_attribute a ON a.attrelid = ct.typrelid "
                     "JOIN pg_type t ON t.oid = a.atttypid WHERE ct.oid = $1::oid AND "
                     "ct.typtype = 'c' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                     1, p, e);
    if (r == NULL) {
        *failed = true;
        return NULL;
    }
    if (cdc_pg_ntuples(r) == 0 || (fields = json_array()) == NULL) {
        cdc_pg_clear(r);
        return NULL;
    }
    for (int i = 0; i < cdc_pg_ntuples(r) && !*failed; i++) {
        uint32_t aoid = (uint32_t)strtoul(cdc_pg_value(r, i, 1), NULL, 10);
        json_t *ft = NULL;
        if (strcmp(cdc_pg_value(r, i, 4), "c") == 0 && depth < 8)
            ft = composite_type(src, aoid, m, depth + 1, e, failed);
        if (ft == NULL && !*failed) {
            cdc_schema_col_t c;
            char tb[40];
            memset(&c, 0, sizeof(c));
            cdc_schema_map_col(m, &c, aoid, (int32_t)strtol(cdc_pg_value(r, i, 2), NULL, 10),
                               (int)strtol(cdc_pg_value(r, i, 3), NULL, 10));
            /* an array attribute: its list type (the worker reads the attribute's array
             * text, worker/convert.c) */
            if (c.ice_type == CDC_ICE_LIST && c.ice_nested != NULL)
                ft = json_loads(c.ice_nested, 0, NULL);
            else
                ft = json_string(
                    cdc_schema_ice_type_str(c.ice_type, c.precision, c.scale, tb, sizeof(tb)));
            free(c.ice_nested);
        }
        json_array_append_new(fields, json_pack("{s:i, s:s, s:b, s:o*}", "id", 0, "name",
                                                cdc_pg_value(r, i, 0), "required", 0, "type", ft));
    }
    cdc_pg_clear(r);
    if (!*failed)
        type = json_pack("{s:s, s:o}", "type", "struct", "fields", fields);
    else
        json_decref(fields);
    return type;
}

cdc_err_t cdc_source_composite(cdc_source_t *src, uint32_t oid, const cdc_schema_mapping_t *m,
                               char **json, cdc_error_t *e)
{
    bool failed = false;
    json_t *t = composite_type(src, oid, m, 0, e, &failed);

    *json = NULL;
    if (failed)
        return e->code;
    if (t == NULL)
        return CDC_OK;
    *json = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(t);
    return *json != NULL ? CDC_OK : cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
}

cdc_err_t cdc_source_xact_finished(cdc_source_t *src, uint32_t xid, bool *finished, cdc_error_t *e)
{
    char x[16];
    const char *p[1] = {x};

    snprintf(x, sizeof(x), "%u", xid);
    return cdc_pg_query_bool(src->sql,
                             "SELECT NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = "
                             "'transactionid' AND transactionid = $1::xid)",
                             1, p, finished, e);
}

cdc_err_t cdc_source_partition_root(cdc_source_t *src, uint32_t relid, uint32_t *root_oid,
                                    char **schema, char **name, char ***cols, size_t *ncols,
                                    cdc_error_t *e)
{
    char oid[16];
    const char *p[1] = {oid};
    cdc_pg_result_t *r;
    int n;

    *root_oid = 0;
    *schema = *name = NULL;
    *cols = NULL;
    *ncols = 0;
    snprintf(oid, sizeof(oid), "%u", relid);
    r = cdc_pg_query(
        src->sql,
        "SELECT r.oid, rn.nspname, r.relname, a.attname FROM pg_class r "
        "JOIN pg_namespace rn ON rn.oid = r.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 "
        "  AND NOT a.attisdropped AND a.attgenerated = '' "
        "WHERE r.oid = pg_partition_root($1::oid) AND r.oid <> $1::oid ORDER BY a.attnum",
        1, p, e);
    if (r == NULL)
        return e->code;
    n = cdc_pg_ntuples(r);
    if (n > 0) {
        *cols = calloc((size_t)n, sizeof(**cols));
        *schema = strdup(cdc_pg_value(r, 0, 1));
        *name = strdup(cdc_pg_value(r, 0, 2));
        if (*cols == NULL || *schema == NULL || *name == NULL)
            goto nomem;
        for (int i = 0; i < n; i++) {
            (*cols)[i] = strdup(cdc_pg_value(r, i, 3));
            if ((*cols)[i] == NULL)
                goto nomem;
            (*ncols)++;
        }
        *root_oid = (uint32_t)strtoul(cdc_pg_value(r, 0, 0), NULL, 10);
    }
    cdc_pg_clear(r);
    return CDC_OK;
nomem:
    cdc_pg_clear(r);
    for (size_t i = 0; *cols && i < *ncols; i++)
        free((*cols)[i]);
    free(*cols);
    free(*schema);
    free(*name);
    *cols = NULL;
    *schema = *name = NULL;
    *ncols = 0;
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
}
