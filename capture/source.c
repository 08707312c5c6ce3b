/*
 * libpq adapter of the capture (see source.h): connections, setup checks with fixes,
 * slot management, the CopyBoth replication stream and standby status updates. The
 * stream handling follows pg_recvlogical: non-blocking PQgetCopyData, select() on the
 * socket with a timeout, replies to keepalives that request one.
 */
#include "capture/source.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>

#include <libpq-fe.h>

#include "capture/event.h"
#include "capture/pgoutput.h"
#include "common/log.h"

#define SESSION_OPTIONS                                                                            \
    "-c DateStyle=ISO,MDY -c TimeZone=UTC -c extra_float_digits=1 -c bytea_output=hex "            \
    "-c IntervalStyle=postgres -c client_encoding=UTF8"

/* libpq's messages end with a newline; drop it so ours stay one line. */
static const char *pqmsg(const PGconn *c)
{
    static __thread char buf[512];
    size_t n;
    snprintf(buf, sizeof(buf), "%s", c ? PQerrorMessage(c) : "no connection");
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return buf;
}

static const char *resmsg(const PGresult *r)
{
    static __thread char buf[512];
    size_t n;
    snprintf(buf, sizeof(buf), "%s", r ? PQresultErrorMessage(r) : "no result");
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return buf;
}

static PGconn *open_conn(const char *dsn, bool replication, cdc_error_t *e)
{
    const char *keys[] = {"dbname", "replication", "options", "application_name", NULL};
    const char *vals[] = {dsn, replication ? "database" : NULL, SESSION_OPTIONS, "cdc-capture",
                          NULL};
    PGconn *c;

    if (!replication) {
        keys[1] = "options";
        vals[1] = SESSION_OPTIONS;
        keys[2] = "application_name";
        vals[2] = "cdc-capture";
        keys[3] = NULL;
        vals[3] = NULL;
    }
    c = PQconnectdbParams(keys, vals, 1);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        const char *m = pqmsg(c);
        bool priv = strstr(m, "permission denied") != NULL ||
                    strstr(m, "must be superuser or replication role") != NULL ||
                    strstr(m, "no pg_hba.conf entry") != NULL;
        if (priv)
            cdc_error_set(e, CDC_ERR_CONFIG,
                          "could not open %s connection to PostgreSQL: %s "
                          "(hint: the capture's role needs LOGIN and REPLICATION: "
                          "ALTER ROLE <role> WITH LOGIN REPLICATION; and pg_hba.conf must "
                          "allow \"replication\" connections for it)",
                          replication ? "replication" : "a", m);
        else
            cdc_error_set(e, CDC_ERR_UNAVAILABLE, "could not connect to PostgreSQL: %s", m);
        PQfinish(c);
        return NULL;
    }
    return c;
}

cdc_err_t cdc_source_connect_sql(cdc_source_t *src, const char *dsn, cdc_error_t *e)
{
    src->sql = open_conn(dsn, false, e);
    if (src->sql == NULL)
        return e->code;
    snprintf(src->db, sizeof(src->db), "%s", PQdb(src->sql));
    return CDC_OK;
}

cdc_err_t cdc_source_connect_repl(cdc_source_t *src, const char *dsn, cdc_error_t *e)
{
    src->repl = open_conn(dsn, true, e);
    return src->repl ? CDC_OK : e->code;
}

void cdc_source_close(cdc_source_t *src)
{
    if (src->copybuf)
        PQfreemem(src->copybuf);
    src->copybuf = NULL;
    PQfinish(src->repl);
    PQfinish(src->sql);
    src->repl = NULL;
    src->sql = NULL;
}

void cdc_source_stop(cdc_source_t *src)
{
    PGresult *r;
    if (src->repl == NULL || PQstatus(src->repl) != CONNECTION_OK)
        return;
    if (PQputCopyEnd(src->repl, NULL) > 0) {
        PQflush(src->repl);
        /* drain until the server ends COPY too; bounded by the results it sends */
        for (int i = 0; i < 1000; i++) {
            char *buf = NULL;
            int n = PQgetCopyData(src->repl, &buf, 0);
            if (buf)
                PQfreemem(buf);
            if (n < 0)
                break;
        }
        while ((r = PQgetResult(src->repl)) != NULL)
            PQclear(r);
    }
}

/* Runs a query expected to return tuples (or command OK); NULL + e on error. */
static PGresult *query(PGconn *c, cdc_error_t *e, const char *sql, int nparams,
                       const char *const *params)
{
    PGresult *r = PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        if (PQstatus(c) != CONNECTION_OK)
            cdc_error_set(e, CDC_ERR_UNAVAILABLE, "lost connection to PostgreSQL: %s", pqmsg(c));
        else
            cdc_error_set(e, CDC_ERR_SOURCE, "query failed: %s", resmsg(r));
        PQclear(r);
        return NULL;
    }
    return r;
}

static cdc_err_t show_int(PGconn *c, const char *name, long *out, cdc_error_t *e)
{
    char sql[128];
    PGresult *r;
    snprintf(sql, sizeof(sql), "SHOW %s", name);
    r = query(c, e, sql, 0, NULL);
    if (r == NULL)
        return e->code;
    *out = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return CDC_OK;
}

void cdc_source_tables_free(cdc_source_table_t *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        free(t[i].schema);
        free(t[i].name);
    }
    free(t);
}

static char *qualified(PGconn *c, const cdc_source_table_t *t)
{
    char *s = PQescapeIdentifier(c, t->schema, strlen(t->schema));
    char *n = PQescapeIdentifier(c, t->name, strlen(t->name));
    char *out = NULL;
    if (s && n && asprintf(&out, "%s.%s", s, n) < 0)
        out = NULL;
    PQfreemem(s);
    PQfreemem(n);
    return out;
}

/* Checks one table: exists, readable, has a key. */
static cdc_err_t check_table(PGconn *c, const cdc_source_table_t *t, cdc_error_t *e)
{
    const char *params[2] = {t->schema, t->name};
    PGresult *r;
    cdc_err_t rc = CDC_OK;

    r = query(c, e,
              "SELECT c.relreplident, "
              "  EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), "
              "  has_table_privilege(c.oid, 'SELECT'), c.relkind "
              "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
              "WHERE n.nspname = $1 AND c.relname = $2",
              2, params);
    if (r == NULL)
        return e->code;
    if (PQntuples(r) == 0) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "table \"%s.%s\" does not exist (hint: create it, or remove it "
                           "from --tables)",
                           t->schema, t->name);
        goto cleanup;
    }
    if (strcmp(PQgetvalue(r, 0, 2), "t") != 0) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "permission denied for table \"%s.%s\" (hint: GRANT SELECT ON "
                           "\"%s\".\"%s\" TO <capture role>;)",
                           t->schema, t->name, t->schema, t->name);
        goto cleanup;
    }
    {
        char ident = PQgetvalue(r, 0, 0)[0];
        bool pk = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
        if (ident == 'n' || (ident == 'd' && !pk)) {
            rc = cdc_error_set(e, CDC_ERR_CONFIG,
                               "table \"%s.%s\" has no primary key and no usable replica "
                               "identity, so its rows have no key (hint: add a primary key, "
                               "or ALTER TABLE \"%s\".\"%s\" REPLICA IDENTITY FULL; to key "
                               "events by all columns)",
                               t->schema, t->name, t->schema, t->name);
            goto cleanup;
        }
    }
cleanup:
    PQclear(r);
    return rc;
}

cdc_err_t cdc_source_check_setup(cdc_source_t *src, const cdc_source_setup_t *setup,
                                 cdc_source_table_t **out, size_t *nout, cdc_error_t *e)
{
    PGconn *c = src->sql;
    PGresult *r = NULL;
    cdc_source_table_t *tables = NULL;
    size_t ntables = 0;
    long slots, senders;
    cdc_err_t rc;
    const char *pubparam[1] = {setup->publication};
    const char *slotparam[1] = {setup->slot};

    *out = NULL;
    *nout = 0;
    /* wal_level */
    r = query(c, e, "SHOW wal_level", 0, NULL);
    if (r == NULL)
        return e->code;
    if (strcmp(PQgetvalue(r, 0, 0), "logical") != 0) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "logical decoding requires wal_level \"logical\", the server has "
                           "\"%s\" (hint: ALTER SYSTEM SET wal_level = logical; then restart "
                           "PostgreSQL)",
                           PQgetvalue(r, 0, 0));
        PQclear(r);
        return rc;
    }
    PQclear(r);
    /* slot and sender limits */
    if ((rc = show_int(c, "max_replication_slots", &slots, e)) != CDC_OK ||
        (rc = show_int(c, "max_wal_senders", &senders, e)) != CDC_OK)
        return rc;
    if (slots < 1 || senders < 1)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "max_replication_slots is %ld and max_wal_senders is %ld, both "
                             "must be at least 1 (hint: ALTER SYSTEM SET max_replication_slots "
                             "= 10; ALTER SYSTEM SET max_wal_senders = 10; then restart "
                             "PostgreSQL)",
                             slots, senders);
    r = query(c, e,
              "SELECT count(*), count(*) FILTER (WHERE slot_name = $1) FROM pg_replication_slots",
              1, slotparam);
    if (r == NULL)
        return e->code;
    if (atol(PQgetvalue(r, 0, 1)) == 0 && atol(PQgetvalue(r, 0, 0)) >= slots) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "all %ld replication slots are in use, cannot create slot \"%s\" "
                           "(hint: drop an unused slot with SELECT pg_drop_replication_slot("
                           "'<name>'); or raise max_replication_slots and restart)",
                           slots, setup->slot);
        PQclear(r);
        return rc;
    }
    PQclear(r);
    /* REPLICATION privilege */
    r = query(c, e,
              "SELECT rolreplication OR rolsuper, current_user FROM pg_roles "
              "WHERE rolname = current_user",
              0, NULL);
    if (r == NULL)
        return e->code;
    if (PQntuples(r) != 1 || strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "role \"%s\" lacks the REPLICATION attribute needed for logical "
                           "replication (hint: ALTER ROLE \"%s\" WITH REPLICATION;)",
                           PQntuples(r) ? PQgetvalue(r, 0, 1) : "?",
                           PQntuples(r) ? PQgetvalue(r, 0, 1) : "?");
        PQclear(r);
        return rc;
    }
    PQclear(r);
    /* tables */
    for (size_t i = 0; i < setup->ntables; i++)
        if ((rc = check_table(c, &setup->tables[i], e)) != CDC_OK)
            return rc;
    /* publication */
    r = query(c, e, "SELECT puballtables FROM pg_publication WHERE pubname = $1", 1, pubparam);
    if (r == NULL)
        return e->code;
    if (PQntuples(r) == 0) {
        PQclear(r);
        r = NULL;
        if (!setup->create_publication || setup->ntables == 0) {
            return cdc_error_set(
                e, CDC_ERR_CONFIG,
                "publication \"%s\" does not exist (hint: CREATE PUBLICATION \"%s\" FOR TABLE "
                "<tables>; or run with --create-publication and --tables)",
                setup->publication, setup->publication);
        }
        {
            cdc_buf_t sql = {0};
            char *pub = PQescapeIdentifier(c, setup->publication, strlen(setup->publication));
            cdc_buf_printf(&sql, "CREATE PUBLICATION %s FOR TABLE ", pub ? pub : "?");
            PQfreemem(pub);
            for (size_t i = 0; i < setup->ntables; i++) {
                char *q = qualified(c, &setup->tables[i]);
                cdc_buf_printf(&sql, "%s%s", i ? ", " : "", q ? q : "?");
                free(q);
            }
            r = query(c, e, sql.data, 0, NULL);
            if (r == NULL) {
                cdc_error_prefix(e,
                                 "could not create publication \"%s\" (hint: the role must "
                                 "own the tables, or an administrator runs: %s)",
                                 setup->publication, sql.data);
                e->code = CDC_ERR_CONFIG;
                e->retriable = false;
                cdc_buf_free(&sql);
                return CDC_ERR_CONFIG;
            }
            cdc_log_info("created publication %s", setup->publication);
            cdc_buf_free(&sql);
        }
    }
    PQclear(r);
    /* the publication must contain every configured table */
    for (size_t i = 0; i < setup->ntables; i++) {
        const char *p[3] = {setup->publication, setup->tables[i].schema, setup->tables[i].name};
        r = query(c, e,
                  "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 "
                  "AND tablename = $3",
                  3, p);
        if (r == NULL)
            return e->code;
        if (PQntuples(r) == 0) {
            char *q = qualified(c, &setup->tables[i]);
            char *pub = PQescapeIdentifier(c, setup->publication, strlen(setup->publication));
            char sql[512];
            PQclear(r);
            snprintf(sql, sizeof(sql), "ALTER PUBLICATION %s ADD TABLE %s", pub ? pub : "?",
                     q ? q : "?");
            free(q);
            PQfreemem(pub);
            if (!setup->create_publication)
                return cdc_error_set(
                    e, CDC_ERR_CONFIG, "table \"%s.%s\" is not in publication \"%s\" (hint: %s;)",
                    setup->tables[i].schema, setup->tables[i].name, setup->publication, sql);
            r = query(c, e, sql, 0, NULL);
            if (r == NULL) {
                cdc_error_prefix(e, "could not add \"%s.%s\" to publication \"%s\"",
                                 setup->tables[i].schema, setup->tables[i].name,
                                 setup->publication);
                e->code = CDC_ERR_CONFIG;
                return CDC_ERR_CONFIG;
            }
        }
        PQclear(r);
    }
    /* the capture set: configured tables, or everything the publication has */
    if (setup->ntables > 0) {
        tables = calloc(setup->ntables, sizeof(*tables));
        if (tables == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < setup->ntables; i++) {
            tables[i].schema = strdup(setup->tables[i].schema);
            tables[i].name = strdup(setup->tables[i].name);
        }
        ntables = setup->ntables;
    } else {
        r = query(c, e,
                  "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1 "
                  "ORDER BY 1, 2",
                  1, pubparam);
        if (r == NULL)
            return e->code;
        ntables = (size_t)PQntuples(r);
        tables = calloc(ntables ? ntables : 1, sizeof(*tables));
        if (tables == NULL) {
            PQclear(r);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < ntables; i++) {
            tables[i].schema = strdup(PQgetvalue(r, (int)i, 0));
            tables[i].name = strdup(PQgetvalue(r, (int)i, 1));
        }
        PQclear(r);
        for (size_t i = 0; i < ntables; i++) {
            if ((rc = check_table(c, &tables[i], e)) != CDC_OK) {
                cdc_source_tables_free(tables, ntables);
                return rc;
            }
        }
    }
    *out = tables;
    *nout = ntables;
    return CDC_OK;
}

cdc_err_t cdc_source_slot_info(cdc_source_t *src, const char *slot, bool *exists,
                               uint64_t *confirmed, cdc_error_t *e)
{
    const char *p[1] = {slot};
    PGresult *r;
    cdc_err_t rc = CDC_OK;

    *exists = false;
    *confirmed = 0;
    r = query(src->sql, e,
              "SELECT confirmed_flush_lsn, plugin, database, slot_type FROM pg_replication_slots "
              "WHERE slot_name = $1",
              1, p);
    if (r == NULL)
        return e->code;
    if (PQntuples(r) == 1) {
        if (strcmp(PQgetvalue(r, 0, 3), "logical") != 0 ||
            strcmp(PQgetvalue(r, 0, 1), "pgoutput") != 0 ||
            strcmp(PQgetvalue(r, 0, 2), src->db) != 0) {
            rc = cdc_error_set(e, CDC_ERR_CONFIG,
                               "replication slot \"%s\" exists but is not a pgoutput slot of "
                               "database \"%s\" (hint: choose another --slot, or drop it: "
                               "SELECT pg_drop_replication_slot('%s');)",
                               slot, src->db, slot);
        } else {
            *exists = true;
            if (!PQgetisnull(r, 0, 0))
                cdc_lsn_parse(PQgetvalue(r, 0, 0), confirmed);
        }
    }
    PQclear(r);
    return rc;
}

cdc_err_t cdc_source_create_slot(cdc_source_t *src, const char *slot, bool export_snapshot,
                                 uint64_t *consistent_lsn, char *snapshot, cdc_error_t *e)
{
    char sql[256];
    PGresult *r;

    snprintf(sql, sizeof(sql), "CREATE_REPLICATION_SLOT \"%s\" LOGICAL pgoutput (SNAPSHOT '%s')",
             slot, export_snapshot ? "export" : "nothing");
    r = PQexec(src->repl, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        cdc_err_t code =
            PQstatus(src->repl) != CONNECTION_OK ? CDC_ERR_UNAVAILABLE : CDC_ERR_SOURCE;
        cdc_error_set(e, code, "could not create replication slot \"%s\": %s", slot, resmsg(r));
        PQclear(r);
        return code;
    }
    cdc_lsn_parse(PQgetvalue(r, 0, 1), consistent_lsn);
    if (snapshot)
        snprintf(snapshot, 64, "%s", PQgetisnull(r, 0, 2) ? "" : PQgetvalue(r, 0, 2));
    PQclear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_drop_slot(cdc_source_t *src, const char *slot, cdc_error_t *e)
{
    const char *p[1] = {slot};
    PGresult *r;
    /* a killed capture's walsender may still hold the slot for a moment */
    r = query(src->sql, e,
              "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
              "WHERE slot_name = $1 AND active_pid IS NOT NULL",
              1, p);
    if (r == NULL)
        return e->code;
    PQclear(r);
    for (int i = 0; i < 100; i++) {
        r = PQexecParams(src->sql, "SELECT pg_drop_replication_slot($1)", 1, NULL, p, NULL, NULL,
                         0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
            PQclear(r);
            return CDC_OK;
        }
        if (strstr(resmsg(r), "is active") == NULL) {
            cdc_error_set(e, CDC_ERR_SOURCE, "could not drop replication slot \"%s\": %s", slot,
                          resmsg(r));
            PQclear(r);
            return CDC_ERR_SOURCE;
        }
        PQclear(r);
        struct timeval tv = {0, 100000};
        select(0, NULL, NULL, NULL, &tv);
    }
    return cdc_error_set(e, CDC_ERR_UNAVAILABLE,
                         "could not drop replication slot \"%s\": still active", slot);
}

cdc_err_t cdc_source_start(cdc_source_t *src, const char *slot, const char *publication,
                           uint64_t start_lsn, cdc_error_t *e)
{
    char sql[512];
    PGresult *r;

    snprintf(sql, sizeof(sql),
             "START_REPLICATION SLOT \"%s\" LOGICAL %X/%X (proto_version '1', "
             "publication_names '\"%s\"', messages 'true')",
             slot, (unsigned)(start_lsn >> 32), (unsigned)start_lsn, publication);
    r = PQexec(src->repl, sql);
    if (PQresultStatus(r) != PGRES_COPY_BOTH) {
        cdc_err_t code =
            PQstatus(src->repl) != CONNECTION_OK ? CDC_ERR_UNAVAILABLE : CDC_ERR_SOURCE;
        const char *m = resmsg(r);
        /* another capture (or a dying one) holds the slot: retry later */
        if (strstr(m, "is active for PID") != NULL)
            code = CDC_ERR_UNAVAILABLE;
        cdc_error_set_retriable(e, code, code == CDC_ERR_UNAVAILABLE,
                                "could not start replication from slot \"%s\": %s", slot, m);
        PQclear(r);
        return code;
    }
    PQclear(r);
    return CDC_OK;
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static int64_t pg_now_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec - CDC_PG_EPOCH_OFFSET_US;
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * The received data is used up. After a wakeup that brought a trickle of messages, waits
 * until coalesce_ms have passed since that wakeup and returns true: the caller then
 * takes whatever arrived meanwhile without waiting in select(). Otherwise (coalescing
 * off, a backlog, nothing since the last wakeup, or a burst that should be read at full
 * speed) returns false at once.
 */
static bool coalesce_wait(cdc_source_t *src)
{
    int64_t now, until;
    if (src->coalesce_ms <= 0 || !src->caught_up || src->cycle_bytes == 0 ||
        src->cycle_bytes >= CDC_SOURCE_COALESCE_MAX_BYTES)
        return false;
    now = mono_us();
    until = src->wake_us + (int64_t)src->coalesce_ms * 1000;
    if (until > now) {
        struct timespec ts = {(until - now) / 1000000, ((until - now) % 1000000) * 1000};
        nanosleep(&ts, NULL);
        now = mono_us();
    }
    src->wake_us = now;
    src->cycle_bytes = 0;
    return true;
}

cdc_err_t cdc_source_read(cdc_source_t *src, int timeout_ms, cdc_source_event_t *ev,
                          const uint8_t **data, size_t *len, uint64_t *lsn, bool *reply_requested,
                          cdc_error_t *e)
{
    char *buf = NULL;
    int n;

    *ev = CDC_SRC_NONE;
    *reply_requested = false;
    if (src->copybuf) {
        PQfreemem(src->copybuf);
        src->copybuf = NULL;
    }
    n = PQgetCopyData(src->repl, &buf, 1);
    if (n == 0 && src->coalesce_ms > 0) {
        /* libpq's buffer is used up: first take what the socket already holds (under a
         * backlog it always holds more, and no read may wait), then coalesce. */
        if (PQconsumeInput(src->repl) == 0)
            return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "replication connection lost: %s",
                                 pqmsg(src->repl));
        n = PQgetCopyData(src->repl, &buf, 1);
        if (n == 0 && coalesce_wait(src)) {
            if (PQconsumeInput(src->repl) == 0)
                return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "replication connection lost: %s",
                                     pqmsg(src->repl));
            n = PQgetCopyData(src->repl, &buf, 1);
        }
    }
    if (n == 0) {
        fd_set fds;
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        int sock = PQsocket(src->repl);
        if (sock < 0)
            return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "replication connection lost");
        FD_ZERO(&fds);
        FD_SET(sock, &fds);
        if (select(sock + 1, &fds, NULL, NULL, &tv) < 0 && errno != EINTR)
            return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "select failed: %s", strerror(errno));
        if (PQconsumeInput(src->repl) == 0)
            return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "replication connection lost: %s",
                                 pqmsg(src->repl));
        n = PQgetCopyData(src->repl, &buf, 1);
        src->wake_us = mono_us();
        src->cycle_bytes = 0;
        if (n == 0)
            return CDC_OK;
    }
    if (n > 0)
        src->cycle_bytes += (size_t)n;
    if (n == -1) {
        PGresult *r = PQgetResult(src->repl);
        cdc_error_set(e, CDC_ERR_UNAVAILABLE, "replication stream ended: %s",
                      r && PQresultErrorMessage(r)[0] ? resmsg(r) : pqmsg(src->repl));
        PQclear(r);
        return CDC_ERR_UNAVAILABLE;
    }
    if (n < 0)
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "could not read replication stream: %s",
                             pqmsg(src->repl));
    src->copybuf = buf;
    if (buf[0] == 'k') {
        if (n < 18)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "short keepalive message");
        src->server_wal_end = be64((const uint8_t *)buf + 1);
        if (src->server_wal_end > src->last_received)
            src->last_received = src->server_wal_end;
        *reply_requested = buf[17] != 0;
        *ev = CDC_SRC_KEEPALIVE;
        return CDC_OK;
    }
    if (buf[0] == 'w') {
        uint64_t start, end;
        if (n < 25)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "short XLogData message");
        start = be64((const uint8_t *)buf + 1);
        end = be64((const uint8_t *)buf + 9);
        if (end > src->server_wal_end)
            src->server_wal_end = end;
        if (start > src->last_received)
            src->last_received = start;
        *lsn = start;
        *data = (const uint8_t *)buf + 25;
        *len = (size_t)n - 25;
        *ev = CDC_SRC_DATA;
        return CDC_OK;
    }
    return cdc_error_set(e, CDC_ERR_PROTOCOL, "unexpected replication message type 0x%02x",
                         (unsigned)(uint8_t)buf[0]);
}

cdc_err_t cdc_source_feedback(cdc_source_t *src, uint64_t confirmed, cdc_error_t *e)
{
    uint8_t msg[34];
    msg[0] = 'r';
    put64(msg + 1, src->last_received > confirmed ? src->last_received : confirmed);
    put64(msg + 9, confirmed);
    put64(msg + 17, confirmed);
    put64(msg + 25, (uint64_t)pg_now_us());
    msg[33] = 0;
    if (PQputCopyData(src->repl, (const char *)msg, sizeof(msg)) <= 0 || PQflush(src->repl) != 0)
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "could not send feedback: %s",
                             pqmsg(src->repl));
    return CDC_OK;
}

cdc_err_t cdc_source_heartbeat(cdc_source_t *src, cdc_error_t *e)
{
    PGresult *r = query(
        src->sql, e, "SELECT pg_logical_emit_message(true, 'cdc.heartbeat', now()::text)", 0, NULL);
    if (r == NULL)
        return e->code;
    PQclear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_columns(cdc_source_t *src, uint32_t relid, const char *const *names, size_t n,
                             bool *notnull, int32_t *attnum, bool *hasdef, cdc_error_t *e)
{
    char oid[16];
    const char *p[1] = {oid};
    PGresult *r;

    for (size_t i = 0; i < n; i++) {
        notnull[i] = false;
        attnum[i] = 0;
        hasdef[i] = false;
    }
    snprintf(oid, sizeof(oid), "%u", relid);
    r = query(src->sql, e,
              "SELECT attname, attnotnull, attnum, atthasdef OR atthasmissing FROM pg_attribute "
              "WHERE attrelid = $1::oid "
              "AND attnum > 0 AND NOT attisdropped",
              1, p);
    if (r == NULL)
        return e->code;
    for (int row = 0; row < PQntuples(r); row++)
        for (size_t i = 0; i < n; i++)
            if (strcmp(PQgetvalue(r, row, 0), names[i]) == 0) {
                notnull[i] = strcmp(PQgetvalue(r, row, 1), "t") == 0;
                attnum[i] = (int32_t)strtol(PQgetvalue(r, row, 2), NULL, 10);
                hasdef[i] = strcmp(PQgetvalue(r, row, 3), "t") == 0;
            }
    PQclear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_current_lsn(cdc_source_t *src, uint64_t *lsn, cdc_error_t *e)
{
    PGresult *r = query(src->sql, e, "SELECT pg_current_wal_lsn()", 0, NULL);
    if (r == NULL)
        return e->code;
    cdc_lsn_parse(PQgetvalue(r, 0, 0), lsn);
    PQclear(r);
    return CDC_OK;
}
