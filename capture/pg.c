/*
 * The capture's libpq adapter (see pg.h): the only file of capture/ that includes
 * libpq-fe.h. The opaque types are libpq's own objects under the adapter's names, so a
 * call costs no allocation. libpq's messages end with a newline; the adapter drops it
 * so that the capture's messages stay one line.
 */
#include "capture/pg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>

#include <libpq-fe.h>

static PGconn *conn(const cdc_pg_t *c)
{
    return (PGconn *)c;
}

static PGresult *res(const cdc_pg_result_t *r)
{
    return (PGresult *)r;
}

/* Copies a libpq message into a thread's buffer without its trailing newline. */
static const char *one_line(char *buf, size_t size, const char *msg)
{
    size_t n;
    snprintf(buf, size, "%s", msg);
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return buf;
}

/* The connection's last error on one line. */
static const char *conn_message(const cdc_pg_t *c)
{
    static __thread char buf[512];
    return one_line(buf, sizeof(buf), c ? PQerrorMessage(conn(c)) : "no connection");
}

const char *cdc_pg_message(const cdc_pg_result_t *r)
{
    static __thread char buf[512];
    return one_line(buf, sizeof(buf), r ? PQresultErrorMessage(res(r)) : "no result");
}

cdc_pg_t *cdc_pg_connect(const char *dsn, const char *password, bool replication,
                         const char *options, const char *application_name, cdc_error_t *e)
{
    const char *keys[6], *vals[6];
    size_t n = 0;
    PGconn *c;

    /* the keywords after dbname override what its connection string says */
    keys[n] = "dbname";
    vals[n++] = dsn;
    if (replication) {
        keys[n] = "replication";
        vals[n++] = "database";
    }
    keys[n] = "options";
    vals[n++] = options;
    keys[n] = "application_name";
    vals[n++] = application_name;
    if (password != NULL && password[0] != '\0') {
        keys[n] = "password";
        vals[n++] = password;
    }
    keys[n] = NULL;
    vals[n] = NULL;
    c = PQconnectdbParams(keys, vals, 1);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        const char *m = conn_message((cdc_pg_t *)c);
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
    return (cdc_pg_t *)c;
}

void cdc_pg_close(cdc_pg_t *c)
{
    PQfinish(conn(c));
}

const char *cdc_pg_db(const cdc_pg_t *c)
{
    return PQdb(conn(c));
}

bool cdc_pg_connected(const cdc_pg_t *c)
{
    return c != NULL && PQstatus(conn(c)) == CONNECTION_OK;
}

cdc_err_t cdc_pg_error(const cdc_pg_t *c, const cdc_pg_result_t *r, cdc_err_t code, cdc_error_t *e,
                       const char *fmt, ...)
{
    char what[512];
    va_list ap;
    const char *msg =
        r != NULL && PQresultErrorMessage(res(r))[0] != '\0' ? cdc_pg_message(r) : conn_message(c);

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (!cdc_pg_connected(c))
        code = CDC_ERR_UNAVAILABLE;
    return cdc_error_set(e, code, "%s: %s", what, msg);
}

cdc_pg_result_t *cdc_pg_exec(cdc_pg_t *c, const char *sql)
{
    return (cdc_pg_result_t *)PQexec(conn(c), sql);
}

cdc_pg_result_t *cdc_pg_exec_params(cdc_pg_t *c, const char *sql, int nparams,
                                    const char *const *params)
{
    return (cdc_pg_result_t *)PQexecParams(conn(c), sql, nparams, NULL, params, NULL, NULL, 0);
}

cdc_pg_result_t *cdc_pg_query(cdc_pg_t *c, const char *sql, int nparams, const char *const *params,
                              cdc_error_t *e)
{
    cdc_pg_result_t *r = cdc_pg_exec_params(c, sql, nparams, params);
    cdc_pg_status_t st = cdc_pg_status(r);
    if (st != CDC_PG_TUPLES && st != CDC_PG_COMMAND) {
        if (!cdc_pg_connected(c))
            cdc_pg_error(c, NULL, CDC_ERR_UNAVAILABLE, e, "lost connection to PostgreSQL");
        else
            cdc_pg_error(c, r, CDC_ERR_SOURCE, e, "query failed");
        cdc_pg_clear(r);
        return NULL;
    }
    return r;
}

/* ---- results ---- */

cdc_pg_status_t cdc_pg_status(const cdc_pg_result_t *r)
{
    switch (PQresultStatus(res(r))) {
    case PGRES_TUPLES_OK:
        return CDC_PG_TUPLES;
    case PGRES_COMMAND_OK:
        return CDC_PG_COMMAND;
    case PGRES_COPY_OUT:
    case PGRES_COPY_IN:
        return CDC_PG_COPY;
    case PGRES_COPY_BOTH:
        return CDC_PG_COPY_BOTH;
    case PGRES_BAD_RESPONSE:
    case PGRES_NONFATAL_ERROR:
    case PGRES_FATAL_ERROR:
        return CDC_PG_FAILED;
    default:
        return CDC_PG_OTHER;
    }
}

int cdc_pg_ntuples(const cdc_pg_result_t *r)
{
    return PQntuples(res(r));
}

const char *cdc_pg_value(const cdc_pg_result_t *r, int row, int col)
{
    return PQgetvalue(res(r), row, col);
}

int cdc_pg_length(const cdc_pg_result_t *r, int row, int col)
{
    return PQgetlength(res(r), row, col);
}

bool cdc_pg_isnull(const cdc_pg_result_t *r, int row, int col)
{
    return PQgetisnull(res(r), row, col) != 0;
}

cdc_err_t cdc_pg_query_bool(cdc_pg_t *c, const char *sql, int nparams, const char *const *params,
                            bool *out, cdc_error_t *e)
{
    cdc_pg_result_t *r = cdc_pg_query(c, sql, nparams, params, e);
    if (r == NULL)
        return e->code;
    *out = cdc_pg_ntuples(r) >= 1 && cdc_pg_is_true(r, 0, 0);
    cdc_pg_clear(r);
    return CDC_OK;
}

cdc_err_t cdc_pg_query_int(cdc_pg_t *c, const char *sql, int nparams, const char *const *params,
                           int64_t *out, cdc_error_t *e)
{
    cdc_pg_result_t *r = cdc_pg_query(c, sql, nparams, params, e);
    if (r == NULL)
        return e->code;
    *out = cdc_pg_ntuples(r) >= 1 ? strtoll(cdc_pg_value(r, 0, 0), NULL, 10) : 0;
    cdc_pg_clear(r);
    return CDC_OK;
}

bool cdc_pg_is_true(const cdc_pg_result_t *r, int row, int col)
{
    return strcmp(PQgetvalue(res(r), row, col), "t") == 0;
}

const char *cdc_pg_sqlstate(const cdc_pg_result_t *r)
{
    return PQresultErrorField(res(r), PG_DIAG_SQLSTATE);
}

void cdc_pg_clear(cdc_pg_result_t *r)
{
    PQclear(res(r));
}

/* ---- identifiers ---- */

char *cdc_pg_ident(cdc_pg_t *c, const char *name)
{
    char *q = PQescapeIdentifier(conn(c), name, strlen(name));
    char *out = q ? strdup(q) : NULL;
    PQfreemem(q);
    return out;
}

char *cdc_pg_qualified(cdc_pg_t *c, const char *schema, const char *name)
{
    char *s = cdc_pg_ident(c, schema);
    char *n = cdc_pg_ident(c, name);
    char *out = NULL;
    if (s && n && asprintf(&out, "%s.%s", s, n) < 0)
        out = NULL;
    free(s);
    free(n);
    return out;
}

/* ---- the CopyBoth stream ---- */

int cdc_pg_copy_read(cdc_pg_t *c, char **buf)
{
    *buf = NULL;
    return PQgetCopyData(conn(c), buf, 1);
}

void cdc_pg_copy_free(char *buf)
{
    if (buf)
        PQfreemem(buf);
}

bool cdc_pg_consume(cdc_pg_t *c)
{
    return PQconsumeInput(conn(c)) != 0;
}

int cdc_pg_wait(cdc_pg_t *c, int64_t timeout_us)
{
    int sock = PQsocket(conn(c));
    fd_set rd;
    struct timeval tv = {timeout_us / 1000000, timeout_us % 1000000};
    if (sock < 0)
        return -1;
    FD_ZERO(&rd);
    FD_SET(sock, &rd);
    if (select(sock + 1, &rd, NULL, NULL, &tv) < 0 && errno != EINTR)
        return -2;
    return 0;
}

bool cdc_pg_copy_write(cdc_pg_t *c, const void *data, size_t len)
{
    return PQputCopyData(conn(c), data, (int)len) > 0 && PQflush(conn(c)) == 0;
}

bool cdc_pg_copy_end(cdc_pg_t *c)
{
    if (PQputCopyEnd(conn(c), NULL) <= 0)
        return false;
    PQflush(conn(c));
    return true;
}

cdc_pg_result_t *cdc_pg_next_result(cdc_pg_t *c)
{
    return (cdc_pg_result_t *)PQgetResult(conn(c));
}
