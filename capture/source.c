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

/* How long a stop reads what the walsender still sends before it gives up on a polite end
 * (docs/capture.md, "Shutdown"). */
#define CDC_SOURCE_STOP_MS 2000

static int64_t mono_us(void);

void cdc_source_stop(cdc_source_t *src)
{
    PGresult *r;
    int64_t deadline;
    if (src->repl == NULL || PQstatus(src->repl) != CONNECTION_OK)
        return;
    if (PQputCopyEnd(src->repl, NULL) <= 0)
        return;
    PQflush(src->repl);
    /* The walsender ends COPY only after the transaction it is sending, which may hold
     * millions of rows: read and drop what still comes, for CDC_SOURCE_STOP_MS at most.
     * Past that the caller just closes the connection: nothing is lost, the slot moved
     * only as far as we confirmed. */
    deadline = mono_us() + (int64_t)CDC_SOURCE_STOP_MS * 1000;
    for (;;) {
        char *buf = NULL;
        int n = PQgetCopyData(src->repl, &buf, 1);
        int64_t left = deadline - mono_us();
        if (buf)
            PQfreemem(buf);
        if (n == -1)
            break; /* the server ended COPY */
        if (n < -1 || left <= 0) {
            cdc_log_info("the server was still sending when the stream stopped: connection "
                         "closed (the slot keeps its confirmed position)");
            return;
        }
        if (n == 0) {
            int sock = PQsocket(src->repl);
            fd_set rd;
            struct timeval tv = {left / 1000000, left % 1000000};
            if (sock < 0)
                return;
            FD_ZERO(&rd);
            FD_SET(sock, &rd);
            if (select(sock + 1, &rd, NULL, NULL, &tv) < 0 && errno != EINTR)
                return;
            if (PQconsumeInput(src->repl) == 0)
                return;
        }
    }
    /* COPY ended: the results of the command (a COPY state again means it did not) */
    for (int i = 0; i < 16 && (r = PQgetResult(src->repl)) != NULL; i++) {
        ExecStatusType st = PQresultStatus(r);
        PQclear(r);
        if (st == PGRES_COPY_OUT || st == PGRES_COPY_IN || st == PGRES_COPY_BOTH)
            return;
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

/* What the catalog says about one candidate table (see check_table). */
typedef struct table_info {
    uint32_t oid;
    bool partitioned;   /* relkind 'p': captured as one table through its root */
    bool partition;     /* relispartition: a partition of another table */
    bool usable;        /* passed every check so far */
    bool needs_viaroot; /* published partitioned table: needs publish_via_partition_root */
} table_info_t;

/*
 * Checks one table: exists, readable, has a key. A problem of this table alone is
 * CDC_ERR_CONFIG (the caller leaves the table out and captures the others); anything
 * else (a failed query) is an error of the whole session.
 */
static cdc_err_t check_table(PGconn *c, const cdc_source_table_t *t, table_info_t *info,
                             cdc_error_t *e)
{
    const char *params[2] = {t->schema, t->name};
    PGresult *r;
    cdc_err_t rc = CDC_OK;

    memset(info, 0, sizeof(*info));
    r = query(c, e,
              "SELECT c.relreplident, "
              "  EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), "
              "  has_table_privilege(c.oid, 'SELECT'), c.relkind, c.oid, c.relispartition "
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
    info->oid = (uint32_t)strtoul(PQgetvalue(r, 0, 4), NULL, 10);
    info->partitioned = PQgetvalue(r, 0, 3)[0] == 'p';
    info->partition = strcmp(PQgetvalue(r, 0, 5), "t") == 0;
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
    info->usable = true;
cleanup:
    PQclear(r);
    return rc;
}

/* Per-table errors of one setup check: reported, and the first one kept. */
typedef struct table_errors {
    const cdc_source_setup_t *setup;
    cdc_error_t first;
    size_t n;
} table_errors_t;

static void table_error(table_errors_t *te, const cdc_source_table_t *t, table_info_t *info,
                        const cdc_error_t *err)
{
    info->usable = false;
    if (te->n++ == 0)
        te->first = *err;
    if (te->setup->table_error)
        te->setup->table_error(te->setup->table_error_arg, t->schema, t->name, err);
    else
        cdc_log_error("%s", err->msg);
}

/*
 * The publication's tables, as the capture captures them: a partition is replaced by
 * the top-most of its ancestors that the publication publishes (the relation pgoutput
 * sends its changes under with publish_via_partition_root), so a partitioned table
 * published without that option still counts once, as its root.
 */
static PGresult *publication_tables(PGconn *c, const char *publication, cdc_error_t *e)
{
    const char *p[1] = {publication};
    return query(
        c, e,
        "SELECT DISTINCT coalesce(tn.nspname, pt.schemaname), coalesce(tc.relname, pt.tablename) "
        "FROM pg_publication_tables pt "
        "JOIN pg_publication p ON p.pubname = pt.pubname "
        "JOIN pg_namespace n ON n.nspname = pt.schemaname "
        "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
        "LEFT JOIN LATERAL (SELECT a.relid FROM pg_partition_ancestors(c.oid) WITH ORDINALITY "
        "    AS a(relid, ord) JOIN pg_class ac ON ac.oid = a.relid "
        "  WHERE c.relispartition AND a.relid <> c.oid AND (p.puballtables "
        "    OR EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prpubid = p.oid "
        "               AND pr.prrelid = a.relid) "
        "    OR EXISTS (SELECT 1 FROM pg_publication_namespace pn WHERE pn.pnpubid = p.oid "
        "               AND pn.pnnspid = ac.relnamespace)) "
        "  ORDER BY a.ord DESC LIMIT 1) top ON true "
        "LEFT JOIN pg_class tc ON tc.oid = top.relid "
        "LEFT JOIN pg_namespace tn ON tn.oid = tc.relnamespace "
        "WHERE pt.pubname = $1 ORDER BY 1, 2",
        1, p);
}

/*
 * A partition whose ancestor is captured too is left out: its rows are the ancestor's
 * (the snapshot reads them through it, the stream sends them under it). Returns the
 * ancestor's index or -1.
 */
static cdc_err_t captured_ancestor(PGconn *c, const table_info_t *info, size_t n, uint32_t oid,
                                   long *found, cdc_error_t *e)
{
    char o[16];
    const char *p[1] = {o};
    PGresult *r;

    *found = -1;
    snprintf(o, sizeof(o), "%u", oid);
    r = query(c, e,
              "SELECT a.relid FROM pg_partition_ancestors($1::oid) a WHERE a.relid <> $1::oid", 1,
              p);
    if (r == NULL)
        return e->code;
    for (int row = 0; row < PQntuples(r) && *found < 0; row++) {
        uint32_t anc = (uint32_t)strtoul(PQgetvalue(r, row, 0), NULL, 10);
        for (size_t i = 0; i < n; i++)
            if (info[i].usable && info[i].oid == anc) {
                *found = (long)i;
                break;
            }
    }
    PQclear(r);
    return CDC_OK;
}

/*
 * Membership of one table in the publication (see cdc_source_check_setup): *direct = the
 * publication names it (ADD TABLE would say "already member"); *published = it names it,
 * its schema or all tables; *member = published, or pgoutput sends its rows (itself or,
 * for a partitioned table, its partitions are in pg_publication_tables).
 */
static cdc_err_t membership(PGconn *c, const char *publication, uint32_t oid, bool *direct,
                            bool *published, bool *member, cdc_error_t *e)
{
    char o[16];
    const char *p[2] = {publication, o};
    PGresult *r;

    snprintf(o, sizeof(o), "%u", oid);
    r = query(c, e,
              "SELECT EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prpubid = p.oid "
              "         AND pr.prrelid = $2::oid), "
              "  p.puballtables OR EXISTS (SELECT 1 FROM pg_publication_namespace pn "
              "    JOIN pg_class c ON c.relnamespace = pn.pnnspid "
              "    WHERE pn.pnpubid = p.oid AND c.oid = $2::oid), "
              "  EXISTS (SELECT 1 FROM pg_publication_tables pt "
              "    JOIN pg_namespace n ON n.nspname = pt.schemaname "
              "    JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
              "    WHERE pt.pubname = p.pubname AND (c.oid = $2::oid OR c.oid IN "
              "      (SELECT tr.relid FROM pg_partition_tree($2::oid) tr WHERE tr.isleaf))) "
              "FROM pg_publication p WHERE p.pubname = $1",
              2, p);
    if (r == NULL)
        return e->code;
    *direct = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    *published = *direct || (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 1), "t") == 0);
    *member = *published || (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 2), "t") == 0);
    PQclear(r);
    return CDC_OK;
}

/* The publication (exists, FOR ALL TABLES, publish_via_partition_root). */
static cdc_err_t publication_info(PGconn *c, const char *publication, bool *exists, bool *viaroot,
                                  cdc_error_t *e)
{
    const char *p[1] = {publication};
    PGresult *r = query(c, e, "SELECT pubviaroot FROM pg_publication WHERE pubname = $1", 1, p);
    if (r == NULL)
        return e->code;
    *exists = PQntuples(r) == 1;
    *viaroot = *exists && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_check_setup(cdc_source_t *src, const cdc_source_setup_t *setup,
                                 cdc_source_table_t **out, size_t *nout, cdc_error_t *e)
{
    PGconn *c = src->sql;
    PGresult *r = NULL;
    cdc_source_table_t *tables = NULL;
    table_info_t *info = NULL;
    table_errors_t te = {.setup = setup};
    size_t ntables = 0, nusable = 0, npartitioned = 0;
    long slots, senders;
    bool pub_exists = false, viaroot = false;
    cdc_err_t rc;
    const char *slotparam[1] = {setup->slot};
    char *pub = NULL;

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
    r = NULL;
    /* the publication: without --tables its tables are the capture set */
    if ((rc = publication_info(c, setup->publication, &pub_exists, &viaroot, e)) != CDC_OK)
        return rc;
    if (!pub_exists && (!setup->create_publication || setup->ntables == 0))
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "publication \"%s\" does not exist (hint: CREATE PUBLICATION \"%s\" "
                             "FOR TABLE <tables> WITH (publish_via_partition_root = true); or "
                             "run with --create-publication and --tables)",
                             setup->publication, setup->publication);
    pub = PQescapeIdentifier(c, setup->publication, strlen(setup->publication));
    if (pub == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (setup->ntables > 0) {
        ntables = setup->ntables;
        tables = calloc(ntables, sizeof(*tables));
        if (tables == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < ntables; i++) {
            tables[i].schema = strdup(setup->tables[i].schema);
            tables[i].name = strdup(setup->tables[i].name);
        }
    } else {
        r = publication_tables(c, setup->publication, e);
        if (r == NULL) {
            rc = e->code;
            goto done;
        }
        ntables = (size_t)PQntuples(r);
        tables = calloc(ntables ? ntables : 1, sizeof(*tables));
        if (tables == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < ntables; i++) {
            tables[i].schema = strdup(PQgetvalue(r, (int)i, 0));
            tables[i].name = strdup(PQgetvalue(r, (int)i, 1));
        }
        PQclear(r);
        r = NULL;
    }
    info = calloc(ntables ? ntables : 1, sizeof(*info));
    if (info == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ntables; i++) {
        if (tables[i].schema == NULL || tables[i].name == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    /* each table on its own: a problem of one table leaves it out, the others go on */
    for (size_t i = 0; i < ntables; i++) {
        cdc_error_t te_err;
        rc = check_table(c, &tables[i], &info[i], &te_err);
        if (rc == CDC_ERR_CONFIG)
            table_error(&te, &tables[i], &info[i], &te_err);
        else if (rc != CDC_OK) {
            *e = te_err;
            goto done;
        }
    }
    for (size_t i = 0; i < ntables; i++) {
        long anc;
        if (!info[i].usable || !info[i].partition)
            continue;
        rc = captured_ancestor(c, info, ntables, info[i].oid, &anc, e);
        if (rc != CDC_OK)
            goto done;
        if (anc >= 0) {
            cdc_log_warn("table %s.%s is a partition of %s.%s, which is captured too: its rows "
                         "are captured as %s.%s's, not as a table of their own",
                         tables[i].schema, tables[i].name, tables[anc].schema, tables[anc].name,
                         tables[anc].schema, tables[anc].name);
            info[i].usable = false;
            info[i].oid = 0;
        }
    }
    for (size_t i = 0; i < ntables; i++)
        nusable += info[i].usable;
    if (nusable == 0 && te.n > 0) {
        /* nothing left to capture: the whole capture is misconfigured */
        *e = te.first;
        rc = e->code;
        goto done;
    }
    if (!pub_exists) {
        cdc_buf_t sql = {0};
        size_t k = 0;
        /* through the root: a partitioned table's changes arrive as the table's own */
        cdc_buf_printf(&sql, "CREATE PUBLICATION %s FOR TABLE ", pub);
        for (size_t i = 0; i < ntables; i++) {
            char *q;
            if (!info[i].usable)
                continue;
            q = qualified(c, &tables[i]);
            cdc_buf_printf(&sql, "%s%s", k++ ? ", " : "", q ? q : "?");
            free(q);
        }
        cdc_buf_printf(&sql, " WITH (publish_via_partition_root = true)");
        r = query(c, e, sql.data, 0, NULL);
        if (r == NULL) {
            bool now_exists = false, via;
            cdc_error_t e2;
            /* another capture created it first (two started together): next session */
            if (publication_info(c, setup->publication, &now_exists, &via, &e2) == CDC_OK &&
                now_exists) {
                cdc_buf_free(&sql);
                rc = cdc_error_set_retriable(e, CDC_ERR_CONFLICT, true,
                                             "publication \"%s\" was created meanwhile",
                                             setup->publication);
                goto done;
            }
            cdc_error_prefix(e,
                             "could not create publication \"%s\" (hint: the role must "
                             "own the tables, or an administrator runs: %s)",
                             setup->publication, sql.data);
            e->code = CDC_ERR_CONFIG;
            e->retriable = false;
            cdc_buf_free(&sql);
            rc = CDC_ERR_CONFIG;
            goto done;
        }
        PQclear(r);
        r = NULL;
        cdc_log_info("created publication %s", setup->publication);
        cdc_buf_free(&sql);
        viaroot = true;
    }
    /*
     * Membership: a table is a member when the publication names it (or its schema, or
     * all tables), and a partitioned table also when its partitions are published. ADD
     * TABLE only for a table that is not a member; "already member" is no error.
     */
    for (size_t i = 0; i < ntables; i++) {
        bool direct = false, published = false, member = false;
        char *q;
        char sql[600];
        cdc_error_t add_err;
        if (!info[i].usable)
            continue;
        rc = membership(c, setup->publication, info[i].oid, &direct, &published, &member, e);
        if (rc != CDC_OK)
            goto done;
        /* only a published partitioned table depends on publish_via_partition_root: one
         * published through its partitions alone arrives as they do (mapped to it) */
        info[i].needs_viaroot = info[i].partitioned && published;
        if (member)
            continue;
        info[i].needs_viaroot = info[i].partitioned;
        q = qualified(c, &tables[i]);
        snprintf(sql, sizeof(sql), "ALTER PUBLICATION %s ADD TABLE %s", pub, q ? q : "?");
        free(q);
        if (!setup->create_publication) {
            cdc_error_set(&add_err, CDC_ERR_CONFIG,
                          "table \"%s.%s\" is not in publication \"%s\" (hint: %s;)",
                          tables[i].schema, tables[i].name, setup->publication, sql);
            table_error(&te, &tables[i], &info[i], &add_err);
            continue;
        }
        r = query(c, &add_err, sql, 0, NULL);
        if (r == NULL) {
            if (strstr(add_err.msg, "already member of publication") != NULL) {
                cdc_log_info("table %s.%s is already a member of publication %s", tables[i].schema,
                             tables[i].name, setup->publication);
                continue;
            }
            if (add_err.code == CDC_ERR_UNAVAILABLE) {
                *e = add_err;
                rc = e->code;
                goto done;
            }
            cdc_error_prefix(&add_err,
                             "could not add \"%s.%s\" to publication \"%s\" (hint: the role "
                             "must own the table, or an administrator runs: %s;)",
                             tables[i].schema, tables[i].name, setup->publication, sql);
            add_err.code = CDC_ERR_CONFIG;
            add_err.retriable = false;
            table_error(&te, &tables[i], &info[i], &add_err);
            continue;
        }
        PQclear(r);
        r = NULL;
        cdc_log_info("added %s.%s to publication %s", tables[i].schema, tables[i].name,
                     setup->publication);
    }
    /*
     * A partitioned table needs publish_via_partition_root: without it pgoutput sends
     * its changes under each partition's name and relation id. With
     * --create-publication the capture manages the publication and sets the option;
     * otherwise each partitioned table fails with the statement that fixes it.
     */
    for (size_t i = 0; i < ntables; i++)
        npartitioned += info[i].usable && info[i].needs_viaroot;
    if (npartitioned > 0 && !viaroot) {
        char sql[300];
        cdc_error_t set_err;
        bool set = false;
        snprintf(sql, sizeof(sql), "ALTER PUBLICATION %s SET (publish_via_partition_root = true)",
                 pub);
        if (setup->create_publication) {
            r = query(c, &set_err, sql, 0, NULL);
            if (r != NULL) {
                PQclear(r);
                r = NULL;
                set = true;
                cdc_log_warn("publication %s did not set publish_via_partition_root, which "
                             "partitioned tables need: set it (%s)",
                             setup->publication, sql);
            } else if (set_err.code == CDC_ERR_UNAVAILABLE) {
                *e = set_err;
                rc = e->code;
                goto done;
            }
        }
        for (size_t i = 0; !set && i < ntables; i++) {
            cdc_error_t pe;
            if (!info[i].usable || !info[i].needs_viaroot)
                continue;
            if (setup->create_publication)
                cdc_error_set(&pe, CDC_ERR_CONFIG,
                              "table \"%s.%s\" is partitioned and publication \"%s\" does not "
                              "set publish_via_partition_root, which could not be set: %s "
                              "(hint: an administrator runs: %s;)",
                              tables[i].schema, tables[i].name, setup->publication, set_err.msg,
                              sql);
            else
                cdc_error_set(&pe, CDC_ERR_CONFIG,
                              "table \"%s.%s\" is partitioned and publication \"%s\" does not "
                              "set publish_via_partition_root, so its changes would arrive "
                              "under its partitions' names (hint: %s; or run with "
                              "--create-publication)",
                              tables[i].schema, tables[i].name, setup->publication, sql);
            table_error(&te, &tables[i], &info[i], &pe);
        }
    }
    nusable = 0;
    for (size_t i = 0; i < ntables; i++)
        nusable += info[i].usable;
    if (nusable == 0 && te.n > 0) {
        *e = te.first;
        rc = e->code;
        goto done;
    }
    /* the capture set: the usable tables, in their order */
    {
        size_t k = 0;
        for (size_t i = 0; i < ntables; i++) {
            if (info[i].usable) {
                tables[k++] = tables[i];
            } else {
                free(tables[i].schema);
                free(tables[i].name);
            }
        }
        *out = tables;
        *nout = k;
        tables = NULL;
        ntables = 0;
    }
    rc = CDC_OK;
done:
    PQclear(r);
    PQfreemem(pub);
    free(info);
    cdc_source_tables_free(tables, ntables);
    return rc;
}

cdc_err_t cdc_source_slot_info(cdc_source_t *src, const char *slot, bool *exists,
                               uint64_t *confirmed, bool *lost, int *active_pid, cdc_error_t *e)
{
    const char *p[1] = {slot};
    PGresult *r;
    cdc_err_t rc = CDC_OK;

    *exists = false;
    *confirmed = 0;
    *lost = false;
    *active_pid = 0;
    r = query(src->sql, e,
              "SELECT confirmed_flush_lsn, plugin, database, slot_type, "
              "coalesce(wal_status, '') = 'lost', coalesce(active_pid, 0) "
              "FROM pg_replication_slots WHERE slot_name = $1",
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
            *lost = strcmp(PQgetvalue(r, 0, 4), "t") == 0;
            *active_pid = atoi(PQgetvalue(r, 0, 5));
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
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        /* another capture created it first (two started together): the next session
         * finds it in use and waits as a standby */
        bool raced = state != NULL && strcmp(state, "42710") == 0;
        cdc_err_t code = PQstatus(src->repl) != CONNECTION_OK ? CDC_ERR_UNAVAILABLE
                         : raced                              ? CDC_ERR_CONFLICT
                                                              : CDC_ERR_SOURCE;
        cdc_error_set_retriable(e, code, raced || code == CDC_ERR_UNAVAILABLE,
                                "could not create replication slot \"%s\": %s", slot, resmsg(r));
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
    PGresult *r = query(src->sql, e, CATALOG_SQL, 1, p);

    *json = NULL;
    if (r == NULL)
        return cdc_error_prefix(e, "could not read the columns of %s", quoted_name);
    if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) &&
        (*json = strdup(PQgetvalue(r, 0, 0))) == NULL) {
        PQclear(r);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    PQclear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_schema_probe(cdc_source_t *src, const char *schema, const char *table,
                                  const char *prefix, cdc_error_t *e)
{
    char *qs = PQescapeIdentifier(src->sql, schema, strlen(schema));
    char *qn = PQescapeIdentifier(src->sql, table, strlen(table));
    char *sql = NULL;
    const char *p[2] = {NULL, prefix};
    PGresult *r;
    cdc_err_t rc = CDC_OK;

    if (qs == NULL || qn == NULL || asprintf(&sql, "%s.%s", qs, qn) < 0) {
        PQfreemem(qs);
        PQfreemem(qn);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    PQfreemem(qs);
    PQfreemem(qn);
    p[0] = sql;
    r = query(src->sql, e, "BEGIN", 0, NULL);
    if (r == NULL) {
        free(sql);
        return e->code;
    }
    PQclear(r);
    /* the lock keeps DDL of the table out until the message is committed */
    {
        char *lock = NULL;
        if (asprintf(&lock, "LOCK TABLE %s IN ACCESS SHARE MODE NOWAIT", sql) < 0) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        } else {
            r = PQexec(src->sql, lock);
            if (PQresultStatus(r) != PGRES_COMMAND_OK)
                rc = cdc_error_set(e, CDC_ERR_CONFLICT, "could not lock %s: %s", sql,
                                   PQresultErrorMessage(r));
            PQclear(r);
        }
        free(lock);
    }
    if (rc == CDC_OK) {
        char *q = NULL;
        if (asprintf(&q, "SELECT pg_logical_emit_message(true, $2, (%s))", CATALOG_SQL) < 0) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        } else {
            r = query(src->sql, e, q, 2, p);
            if (r == NULL)
                rc = e->code;
            PQclear(r);
            free(q);
        }
    }
    r = PQexec(src->sql, rc == CDC_OK ? "COMMIT" : "ROLLBACK");
    PQclear(r);
    free(sql);
    return rc;
}

cdc_err_t cdc_source_lock_slot(cdc_source_t *src, const char *slot, bool *got, int *holder,
                               cdc_error_t *e)
{
    char key[128];
    const char *p[1] = {key};
    PGresult *r;

    *got = false;
    *holder = 0;
    snprintf(key, sizeof(key), "cdc-capture:%s", slot);
    r = query(src->sql, e, "SELECT pg_try_advisory_lock(hashtext($1))", 1, p);
    if (r == NULL)
        return e->code;
    *got = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (*got)
        return CDC_OK;
    r = query(src->sql, e,
              "SELECT coalesce(min(pid), 0) FROM pg_locks WHERE locktype = 'advisory' AND "
              "granted AND objsubid = 1 AND objid = (hashtext($1)::bigint & 4294967295)::oid",
              1, p);
    if (r == NULL)
        return e->code;
    *holder = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_slot_retention(cdc_source_t *src, const char *slot, int64_t *retained,
                                    int64_t *safe, cdc_error_t *e)
{
    const char *p[1] = {slot};
    PGresult *r = query(src->sql, e,
                        "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)"
                        "::bigint, coalesce(safe_wal_size, -1) FROM pg_replication_slots "
                        "WHERE slot_name = $1",
                        1, p);
    cdc_err_t rc = CDC_OK;
    if (r == NULL)
        return e->code;
    if (PQntuples(r) != 1) {
        rc = cdc_error_set(e, CDC_ERR_NOT_FOUND, "no replication slot \"%s\"", slot);
    } else {
        *retained = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        *safe = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    }
    PQclear(r);
    return rc;
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

cdc_err_t cdc_source_partition_root(cdc_source_t *src, uint32_t relid, uint32_t *root_oid,
                                    char **schema, char **name, char ***cols, size_t *ncols,
                                    cdc_error_t *e)
{
    char oid[16];
    const char *p[1] = {oid};
    PGresult *r;
    int n;

    *root_oid = 0;
    *schema = *name = NULL;
    *cols = NULL;
    *ncols = 0;
    snprintf(oid, sizeof(oid), "%u", relid);
    r = query(src->sql, e,
              "SELECT r.oid, rn.nspname, r.relname, a.attname FROM pg_class r "
              "JOIN pg_namespace rn ON rn.oid = r.relnamespace "
              "JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 "
              "  AND NOT a.attisdropped AND a.attgenerated = '' "
              "WHERE r.oid = pg_partition_root($1::oid) AND r.oid <> $1::oid ORDER BY a.attnum",
              1, p);
    if (r == NULL)
        return e->code;
    n = PQntuples(r);
    if (n > 0) {
        *cols = calloc((size_t)n, sizeof(**cols));
        *schema = strdup(PQgetvalue(r, 0, 1));
        *name = strdup(PQgetvalue(r, 0, 2));
        if (*cols == NULL || *schema == NULL || *name == NULL)
            goto nomem;
        for (int i = 0; i < n; i++) {
            (*cols)[i] = strdup(PQgetvalue(r, i, 3));
            if ((*cols)[i] == NULL)
                goto nomem;
            (*ncols)++;
        }
        *root_oid = (uint32_t)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
    }
    PQclear(r);
    return CDC_OK;
nomem:
    PQclear(r);
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
