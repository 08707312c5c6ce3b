/*
 * The source's connections and its slot (see source.h): opening and closing the normal
 * and the replication connection with the session settings the event encoder relies
 * on, the slot's state, creation and removal, the advisory lock that elects one capture
 * per slot (docs/capture.md, "Two captures"), and the small statements of a running
 * session (heartbeat, WAL position, retention). The setup checks are in setup.c, the
 * catalog queries in catalog.c and the stream in replication.c; libpq is behind pg.c.
 */
#include "capture/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>

#include "capture/event.h"
#include "common/log.h"

#define SESSION_OPTIONS                                                                            \
    "-c DateStyle=ISO,MDY -c TimeZone=UTC -c extra_float_digits=1 -c bytea_output=hex "            \
    "-c IntervalStyle=postgres -c client_encoding=UTF8"
#define APPLICATION_NAME "cdc-capture"

cdc_err_t cdc_source_connect_sql(cdc_source_t *src, const char *dsn, const char *password,
                                 cdc_error_t *e)
{
    src->sql = cdc_pg_connect(dsn, password, false, SESSION_OPTIONS, APPLICATION_NAME, e);
    if (src->sql == NULL)
        return e->code;
    snprintf(src->db, sizeof(src->db), "%s", cdc_pg_db(src->sql));
    return CDC_OK;
}

cdc_err_t cdc_source_connect_repl(cdc_source_t *src, const char *dsn, const char *password,
                                  cdc_error_t *e)
{
    src->repl = cdc_pg_connect(dsn, password, true, SESSION_OPTIONS, APPLICATION_NAME, e);
    return src->repl ? CDC_OK : e->code;
}

void cdc_source_close(cdc_source_t *src)
{
    cdc_pg_copy_free(src->copybuf);
    src->copybuf = NULL;
    cdc_pg_close(src->repl);
    cdc_pg_close(src->sql);
    src->repl = NULL;
    src->sql = NULL;
}

void cdc_source_tables_free(cdc_source_table_t *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        free(t[i].schema);
        free(t[i].name);
    }
    free(t);
}

cdc_err_t cdc_source_slot_info(cdc_source_t *src, const char *slot, bool *exists,
                               uint64_t *confirmed, bool *lost, int *active_pid, cdc_error_t *e)
{
    const char *p[1] = {slot};
    cdc_pg_result_t *r;
    cdc_err_t rc = CDC_OK;

    *exists = false;
    *confirmed = 0;
    *lost = false;
    *active_pid = 0;
    r = cdc_pg_query(src->sql,
                     "SELECT confirmed_flush_lsn, plugin, database, slot_type, "
                     "coalesce(wal_status, '') = 'lost', coalesce(active_pid, 0) "
                     "FROM pg_replication_slots WHERE slot_name = $1",
                     1, p, e);
    if (r == NULL)
        return e->code;
    if (cdc_pg_ntuples(r) == 1) {
        if (strcmp(cdc_pg_value(r, 0, 3), "logical") != 0 ||
            strcmp(cdc_pg_value(r, 0, 1), "pgoutput") != 0 ||
            strcmp(cdc_pg_value(r, 0, 2), src->db) != 0) {
            rc = cdc_error_set(e, CDC_ERR_CONFIG,
                               "replication slot \"%s\" exists but is not a pgoutput slot of "
                               "database \"%s\" (hint: choose another --slot, or drop it: "
                               "SELECT pg_drop_replication_slot('%s');)",
                               slot, src->db, slot);
        } else {
            *exists = true;
            *lost = cdc_pg_is_true(r, 0, 4);
            *active_pid = atoi(cdc_pg_value(r, 0, 5));
            if (!cdc_pg_isnull(r, 0, 0))
                cdc_lsn_parse(cdc_pg_value(r, 0, 0), confirmed);
        }
    }
    cdc_pg_clear(r);
    return rc;
}

cdc_err_t cdc_source_create_slot(cdc_source_t *src, const char *slot, bool export_snapshot,
                                 uint64_t *consistent_lsn, char *snapshot, cdc_error_t *e)
{
    char sql[256];
    cdc_pg_result_t *r;

    snprintf(sql, sizeof(sql), "CREATE_REPLICATION_SLOT \"%s\" LOGICAL pgoutput (SNAPSHOT '%s')",
             slot, export_snapshot ? "export" : "nothing");
    r = cdc_pg_exec(src->repl, sql);
    if (cdc_pg_status(r) != CDC_PG_TUPLES || cdc_pg_ntuples(r) != 1) {
        const char *state = cdc_pg_sqlstate(r);
        /* another capture created it first (two started together): the next session
         * finds it in use and waits as a standby */
        bool raced = state != NULL && strcmp(state, "42710") == 0;
        cdc_err_t code = cdc_pg_error(src->repl, r, raced ? CDC_ERR_CONFLICT : CDC_ERR_SOURCE, e,
                                      "could not create replication slot \"%s\"", slot);
        e->retriable = raced || code == CDC_ERR_UNAVAILABLE;
        cdc_pg_clear(r);
        return code;
    }
    cdc_lsn_parse(cdc_pg_value(r, 0, 1), consistent_lsn);
    if (snapshot)
        snprintf(snapshot, 64, "%s", cdc_pg_isnull(r, 0, 2) ? "" : cdc_pg_value(r, 0, 2));
    cdc_pg_clear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_drop_slot(cdc_source_t *src, const char *slot, cdc_error_t *e)
{
    const char *p[1] = {slot};
    cdc_pg_result_t *r;
    /* a killed capture's walsender may still hold the slot for a moment */
    r = cdc_pg_query(src->sql,
                     "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                     "WHERE slot_name = $1 AND active_pid IS NOT NULL",
                     1, p, e);
    if (r == NULL)
        return e->code;
    cdc_pg_clear(r);
    for (int i = 0; i < 100; i++) {
        r = cdc_pg_exec_params(src->sql, "SELECT pg_drop_replication_slot($1)", 1, p);
        if (cdc_pg_status(r) == CDC_PG_TUPLES) {
            cdc_pg_clear(r);
            return CDC_OK;
        }
        if (strstr(cdc_pg_message(r), "is active") == NULL) {
            cdc_err_t code = cdc_pg_error(src->sql, r, CDC_ERR_SOURCE, e,
                                          "could not drop replication slot \"%s\"", slot);
            cdc_pg_clear(r);
            return code;
        }
        cdc_pg_clear(r);
        struct timeval tv = {0, 100000};
        select(0, NULL, NULL, NULL, &tv);
    }
    return cdc_error_set(e, CDC_ERR_UNAVAILABLE,
                         "could not drop replication slot \"%s\": still active", slot);
}

cdc_err_t cdc_source_lock_slot(cdc_source_t *src, const char *slot, bool *got, int *holder,
                               cdc_error_t *e)
{
    char key[128];
    const char *p[1] = {key};
    int64_t pid = 0;
    cdc_err_t rc;

    *got = false;
    *holder = 0;
    snprintf(key, sizeof(key), "cdc-capture:%s", slot);
    rc = cdc_pg_query_bool(src->sql, "SELECT pg_try_advisory_lock(hashtext($1))", 1, p, got, e);
    if (rc != CDC_OK || *got)
        return rc;
    rc = cdc_pg_query_int(
        src->sql,
        "SELECT coalesce(min(pid), 0) FROM pg_locks WHERE locktype = 'advisory' AND "
        "granted AND objsubid = 1 AND objid = (hashtext($1)::bigint & 4294967295)::oid",
        1, p, &pid, e);
    *holder = (int)pid;
    return rc;
}

cdc_err_t cdc_source_slot_retention(cdc_source_t *src, const char *slot, int64_t *retained,
                                    int64_t *safe, cdc_error_t *e)
{
    const char *p[1] = {slot};
    cdc_pg_result_t *r =
        cdc_pg_query(src->sql,
                     "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)"
                     "::bigint, coalesce(safe_wal_size, -1) FROM pg_replication_slots "
                     "WHERE slot_name = $1",
                     1, p, e);
    cdc_err_t rc = CDC_OK;
    if (r == NULL)
        return e->code;
    if (cdc_pg_ntuples(r) != 1) {
        rc = cdc_error_set(e, CDC_ERR_NOT_FOUND, "no replication slot \"%s\"", slot);
    } else {
        *retained = strtoll(cdc_pg_value(r, 0, 0), NULL, 10);
        *safe = strtoll(cdc_pg_value(r, 0, 1), NULL, 10);
    }
    cdc_pg_clear(r);
    return rc;
}

cdc_err_t cdc_source_heartbeat(cdc_source_t *src, cdc_error_t *e)
{
    cdc_pg_result_t *r = cdc_pg_query(
        src->sql, "SELECT pg_logical_emit_message(true, 'cdc.heartbeat', now()::text)", 0, NULL, e);
    if (r == NULL)
        return e->code;
    cdc_pg_clear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_current_lsn(cdc_source_t *src, uint64_t *lsn, cdc_error_t *e)
{
    cdc_pg_result_t *r = cdc_pg_query(src->sql, "SELECT pg_current_wal_lsn()", 0, NULL, e);
    if (r == NULL)
        return e->code;
    cdc_lsn_parse(cdc_pg_value(r, 0, 0), lsn);
    cdc_pg_clear(r);
    return CDC_OK;
}
