/*
 * The capture's libpq adapter: capture/pg.c is the only file of capture/ that includes
 * libpq-fe.h. The rest of the capture sees an opaque connection (cdc_pg_t), results read
 * through small accessors (cdc_pg_result_t), the CopyBoth calls the replication stream
 * needs, and one translation of libpq's failures into the project's errors
 * (cdc_pg_error, common/err.h). What the capture asks PostgreSQL is in source.c,
 * setup.c, catalog.c, replication.c and snapshot.c; how it is asked is here.
 */
#ifndef CDC_CAPTURE_PG_H
#define CDC_CAPTURE_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* A connection to PostgreSQL (libpq's PGconn). */
typedef struct cdc_pg cdc_pg_t;
/* The result of one command (libpq's PGresult); free it with cdc_pg_clear(). */
typedef struct cdc_pg_result cdc_pg_result_t;

/* What a command's result holds. */
typedef enum cdc_pg_status {
    CDC_PG_FAILED = 0, /* an error (or no result at all) */
    CDC_PG_TUPLES,     /* rows (maybe none) */
    CDC_PG_COMMAND,    /* a command without rows completed */
    CDC_PG_COPY,       /* COPY OUT or COPY IN started */
    CDC_PG_COPY_BOTH,  /* CopyBoth started (START_REPLICATION) */
    CDC_PG_OTHER,      /* anything else libpq reports */
} cdc_pg_status_t;

/*
 * Connects with the libpq connection string dsn, session `options` (the server's
 * "-c name=value" settings) and application_name; replication opens a
 * `replication=database` connection. password (NULL = none) overrides the DSN's. Failures:
 * CDC_ERR_CONFIG (not retriable) when the role or pg_hba.conf refuses it, with the hint that fixes
 * it; CDC_ERR_UNAVAILABLE (retriable) otherwise.
 */
cdc_pg_t *cdc_pg_connect(const char *dsn, const char *password, bool replication,
                         const char *options, const char *application_name, cdc_error_t *e);

/* Closes the connection (NULL is fine). */
void cdc_pg_close(cdc_pg_t *c);

/* The connected database's name. */
const char *cdc_pg_db(const cdc_pg_t *c);

/* Whether the connection is still up. */
bool cdc_pg_connected(const cdc_pg_t *c);

/*
 * The one translation of a failed libpq call into the project's error: the code is
 * CDC_ERR_UNAVAILABLE when the connection is lost and `code` otherwise, with the code's
 * default retriable flag; the message is the printf-style text, ": " and libpq's message
 * on one line (the result's, or the connection's when r is NULL or has none). Returns
 * the code.
 */
cdc_err_t cdc_pg_error(const cdc_pg_t *c, const cdc_pg_result_t *r, cdc_err_t code, cdc_error_t *e,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * Runs a query (extended protocol, text parameters) expected to return rows or complete a
 * command. On failure returns NULL and e: CDC_ERR_UNAVAILABLE "lost connection to
 * PostgreSQL" when the connection is gone, CDC_ERR_SOURCE "query failed" otherwise.
 */
cdc_pg_result_t *cdc_pg_query(cdc_pg_t *c, const char *sql, int nparams, const char *const *params,
                              cdc_error_t *e);

/* A query of one value: whether its first row's first field is true (false with no
 * row), or that field as an integer (0 with no row, or NULL). The errors of cdc_pg_query. */
cdc_err_t cdc_pg_query_bool(cdc_pg_t *c, const char *sql, int nparams, const char *const *params,
                            bool *out, cdc_error_t *e);
cdc_err_t cdc_pg_query_int(cdc_pg_t *c, const char *sql, int nparams, const char *const *params,
                           int64_t *out, cdc_error_t *e);

/* Runs sql through the simple protocol (replication commands, cursors, several
 * statements) and returns whatever came back; the caller checks cdc_pg_status(). */
cdc_pg_result_t *cdc_pg_exec(cdc_pg_t *c, const char *sql);

/* Same with text parameters (extended protocol). */
cdc_pg_result_t *cdc_pg_exec_params(cdc_pg_t *c, const char *sql, int nparams,
                                    const char *const *params);

/* ---- results ---- */

cdc_pg_status_t cdc_pg_status(const cdc_pg_result_t *r);
int cdc_pg_ntuples(const cdc_pg_result_t *r);
/* A field as text ("" for NULL; valid until cdc_pg_clear). */
const char *cdc_pg_value(const cdc_pg_result_t *r, int row, int col);
int cdc_pg_length(const cdc_pg_result_t *r, int row, int col);
bool cdc_pg_isnull(const cdc_pg_result_t *r, int row, int col);
/* Whether a boolean field is true ("t"). */
bool cdc_pg_is_true(const cdc_pg_result_t *r, int row, int col);
/* The result's error message on one line ("no result" for NULL). */
const char *cdc_pg_message(const cdc_pg_result_t *r);
/* The result's SQLSTATE, or NULL. */
const char *cdc_pg_sqlstate(const cdc_pg_result_t *r);
void cdc_pg_clear(cdc_pg_result_t *r);

/* ---- identifiers ---- */

/* name quoted as an SQL identifier; malloc'ed (free()), NULL when out of memory. */
char *cdc_pg_ident(cdc_pg_t *c, const char *name);

/* "schema"."name", quoted; malloc'ed (free()), NULL when out of memory. */
char *cdc_pg_qualified(cdc_pg_t *c, const char *schema, const char *name);

/* ---- the CopyBoth stream (replication) ---- */

/*
 * Takes one CopyData message without waiting: > 0 its length (*buf holds it; free with
 * cdc_pg_copy_free), 0 none buffered yet, -1 the server ended COPY (its result follows
 * through cdc_pg_next_result), < -1 an error.
 */
int cdc_pg_copy_read(cdc_pg_t *c, char **buf);
void cdc_pg_copy_free(char *buf);

/* Reads what the socket holds into libpq's buffer; false when the connection failed. */
bool cdc_pg_consume(cdc_pg_t *c);

/* Waits up to timeout_us for the socket to become readable: 0 readable, timed out or
 * interrupted; -1 no socket; -2 select() failed (errno says why). */
int cdc_pg_wait(cdc_pg_t *c, int64_t timeout_us);

/* Sends one CopyData message and flushes it; false on failure. */
bool cdc_pg_copy_write(cdc_pg_t *c, const void *data, size_t len);

/* Sends CopyDone and flushes; false when it could not be queued. */
bool cdc_pg_copy_end(cdc_pg_t *c);

/* The next result of the command in progress, NULL when there is none. */
cdc_pg_result_t *cdc_pg_next_result(cdc_pg_t *c);

#endif
