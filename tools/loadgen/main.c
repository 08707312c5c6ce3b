/*
 * loadgen: drives a mixed, rate-controlled workload against the demo schema
 * (public.transactions, public.accounts; see schema.sql) for `make run`, the chaos suite
 * and docker compose. Every transaction is one round trip (BEGIN; ...; COMMIT) built
 * from a weighted mix: inserts of new keys, updates that leave the large note alone
 * (unchanged-TOAST in pgoutput) or rewrite it, deletes, re-inserts of deleted keys,
 * several changes to one row in one transaction, changes to the second table, and a
 * share of transactions that roll back. Values include NULLs, non-ASCII text and large
 * (> 8 kB, TOASTed) notes. What actually committed is recorded by the audit trigger in
 * the same transaction, not by this program: the verifier trusts only that record.
 *
 * Single connection, single thread. The key sets it tracks (live and deleted keys per
 * table) are a cache; after any error or reconnect they are reloaded from the database.
 */
#include "tools/loadgen/loadgen.h"

#include <libpq-fe.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/options.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"

typedef struct loadgen_config {
    char *pg_dsn;
    int64_t rate;
    int64_t duration_ms;
    int64_t max_transactions;
    int64_t tx_max_changes;
    char *mix;
    int64_t null_pct;
    int64_t toast_pct;
    int64_t rollback_pct;
    int64_t seed;
    int64_t initial_rows;
    bool create_schema;
    bool drop;
    bool setup_only;
    bool mark_snapshot;
    int64_t report_interval_ms;
    int64_t reconnect_timeout_ms;
    cdc_log_options_t log;
} loadgen_config_t;

#define OPT(name, type, field, def, lo, hi, help)                                                  \
    CDC_OPT_ROW(loadgen_config_t, name, type, field, def, lo, hi, help)

static const cdc_opt_t options[] = {
    OPT("pg-dsn", CDC_OPT_STRING, pg_dsn, "dbname=postgres", 0, 0,
        "PostgreSQL connection string (libpq conninfo or URI)"),
    OPT("rate", CDC_OPT_INT, rate, "500", 0, 1000000,
        "target changes per second (0 = as fast as PostgreSQL takes them)"),
    OPT("duration", CDC_OPT_DURATION, duration_ms, "0", 0, 0,
        "stop after this long (0 = until SIGINT/SIGTERM or max-transactions)"),
    OPT("max-transactions", CDC_OPT_INT, max_transactions, "0", 0, 0,
        "stop after this many transactions (0 = no limit)"),
    OPT("tx-max-changes", CDC_OPT_INT, tx_max_changes, "5", 1, 1000,
        "largest number of statements in one transaction (uniform 1..N)"),
    OPT("mix", CDC_OPT_STRING, mix, "insert=35,update=30,delete=10,reinsert=5,multi=10,second=10",
        0, 0,
        "relative weights of statement kinds: insert, update, delete, reinsert (of a deleted "
        "key), multi (several changes to one row in one transaction), second (accounts table)"),
    OPT("null-pct", CDC_OPT_INT, null_pct, "10", 0, 100,
        "percent of nullable values written as NULL"),
    OPT("toast-pct", CDC_OPT_INT, toast_pct, "5", 0, 100,
        "percent of notes written as large (> 8 kB, TOASTed) values"),
    OPT("rollback-pct", CDC_OPT_INT, rollback_pct, "2", 0, 100,
        "percent of transactions that roll back (must never appear downstream)"),
    OPT("seed", CDC_OPT_INT, seed, "0", 0, 0, "random seed (0 = from the clock; printed)"),
    OPT("initial-rows", CDC_OPT_INT, initial_rows, "0", 0, 100000000,
        "rows inserted into each table before the load (e.g. to exercise the snapshot)"),
    OPT("create-schema", CDC_OPT_BOOL, create_schema, "true", 0, 0,
        "create the demo schema and audit trigger if missing"),
    OPT("drop", CDC_OPT_BOOL, drop, "false", 0, 0,
        "drop the demo tables and the audit record first"),
    OPT("setup-only", CDC_OPT_BOOL, setup_only, "false", 0, 0,
        "create the schema and initial rows, then exit"),
    OPT("mark-snapshot", CDC_OPT_BOOL, mark_snapshot, "false", 0, 0,
        "after setup, replace the audit record with one snapshot entry (op r) per existing row: "
        "run it just before the capture starts with an initial snapshot"),
    OPT("report-interval", CDC_OPT_DURATION, report_interval_ms, "5s", 0, 0,
        "progress line interval on stderr (0 = none)"),
    OPT("reconnect-timeout", CDC_OPT_DURATION, reconnect_timeout_ms, "60s", 0, 0,
        "give up when PostgreSQL stays unreachable this long"),
    CDC_OPTS_LOG(loadgen_config_t, log),
    CDC_OPT_END,
};

enum { K_INSERT, K_UPDATE, K_DELETE, K_REINSERT, K_MULTI, K_SECOND, K_COUNT };
static const char *kind_names[K_COUNT] = {"insert",   "update", "delete",
                                          "reinsert", "multi",  "second"};

/* A set of keys with O(1) random pick and removal by position. */
typedef struct keyset {
    int64_t *keys;
    size_t len, cap;
} keyset_t;

typedef struct table_keys {
    const char *name;
    const char *pk;
    keyset_t live, deleted;
    int64_t next_id;
} table_keys_t;

typedef struct stats {
    int64_t txns, rollbacks, changes, kinds[K_COUNT], errors, reconnects;
} stats_t;

static volatile sig_atomic_t stop_requested;
static uint64_t rng_state;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static uint64_t rnd(void)
{
    /* xorshift64*: reproducible from the printed seed */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static int64_t rnd_below(int64_t n)
{
    return n <= 0 ? 0 : (int64_t)(rnd() % (uint64_t)n);
}

static bool chance(int64_t pct)
{
    return rnd_below(100) < pct;
}

static void keyset_add(keyset_t *s, int64_t k)
{
    if (cdc_array_reserve(s->keys, s->cap, s->len + 1, 1024) != CDC_OK) {
        cdc_log_error("out of memory growing a key set to %zu keys", s->len + 1);
        exit(1);
    }
    s->keys[s->len++] = k;
}

/* Removes and returns a random key; the set must not be empty. */
static int64_t keyset_take(keyset_t *s)
{
    size_t i = (size_t)rnd_below((int64_t)s->len);
    int64_t k = s->keys[i];

    s->keys[i] = s->keys[--s->len];
    return k;
}

/* ---- SQL text ------------------------------------------------------------------------ */

/* The transaction's text is a cdc_buf_t (common/buf.h): exits when building it ran out of
 * memory. */
static void sql_check(const cdc_buf_t *b)
{
    if (b->oom) {
        cdc_log_error("out of memory building a transaction of %zu bytes", b->len);
        exit(1);
    }
}

/* Appends s as a quoted literal, or NULL. Characters in s are UTF-8 and contain no NUL. */
static void sql_literal(cdc_buf_t *b, PGconn *conn, const char *s)
{
    char *q;

    if (s == NULL) {
        cdc_buf_put(b, "NULL", 4);
        return;
    }
    q = PQescapeLiteral(conn, s, strlen(s));
    if (q == NULL) {
        cdc_log_error("could not quote a literal: %s", PQerrorMessage(conn));
        exit(1);
    }
    cdc_buf_put(b, q, strlen(q));
    PQfreemem(q);
}

/* ---- values -------------------------------------------------------------------------- */

static const char *accounts[] = {"ACC-0001", "ACC-0002", "Zürich-Konto", "東京-口座",
                                 "Δelta-λ",  "Ålesund",  "كراتشي",       "naïve café",
                                 "emoji-🚀",  "O'Brien",  "tab\there",    "line\nbreak"};
static const char *statuses[] = {"pending",  "settled", "failed",
                                 "reversed", "on-hold", "überprüft"};
static const char *owners[] = {"Ann", "Bjørn", "Chloé", "Dmitrij Иванов", "张伟", "Zoë O'Neil"};

static const char *pick(const char *const *list, size_t n, int64_t null_pct)
{
    if (chance(null_pct))
        return NULL;
    return list[rnd_below((int64_t)n)];
}

/* A note: usually short, sometimes large and poorly compressible so it is TOASTed out of
 * line. Returns a heap string the caller frees, or NULL for SQL NULL. */
static char *make_note(const loadgen_config_t *cfg)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ äöü€";
    size_t n;
    char *s;

    if (chance(cfg->null_pct))
        return NULL;
    if (chance(cfg->toast_pct)) {
        n = 9000 + (size_t)rnd_below(12000);
        s = malloc(n + 1);
        if (s == NULL)
            exit(1);
        /* ASCII only in the random part so no multi-byte character is cut */
        for (size_t i = 0; i < n; i++)
            s[i] = alphabet[rnd_below(64)];
        s[n] = '\0';
        memcpy(s, "BIG:", 4);
        return s;
    }
    if (asprintf(&s, "note %" PRId64 " – ünïcödé ✓", (int64_t)rnd_below(1000000)) < 0)
        exit(1);
    return s;
}

static void append_amount(cdc_buf_t *b, int64_t null_pct)
{
    if (chance(null_pct)) {
        cdc_buf_put(b, "NULL", 4);
        return;
    }
    int64_t cents = rnd_below(2000000000) - 100000000;
    int64_t abs_cents = cents < 0 ? -cents : cents;
    cdc_buf_printf(b, "%s%" PRId64 ".%02" PRId64, cents < 0 ? "-" : "", abs_cents / 100,
                   abs_cents % 100);
}

/* ---- statements ---------------------------------------------------------------------- */

static void stmt_insert_tx(cdc_buf_t *b, PGconn *conn, const loadgen_config_t *cfg, int64_t id)
{
    char *note = make_note(cfg);

    cdc_buf_printf(b, "INSERT INTO public.transactions VALUES (%" PRId64 ", ", id);
    sql_literal(b, conn, pick(accounts, sizeof(accounts) / sizeof(*accounts), cfg->null_pct));
    cdc_buf_put(b, ", ", 2);
    append_amount(b, cfg->null_pct);
    cdc_buf_put(b, ", ", 2);
    sql_literal(b, conn, pick(statuses, sizeof(statuses) / sizeof(*statuses), cfg->null_pct));
    cdc_buf_put(b, ", ", 2);
    sql_literal(b, conn, note);
    cdc_buf_printf(b, ", clock_timestamp());\n");
    free(note);
}

/* An update that leaves the note alone half of the time (unchanged TOAST downstream). */
static void stmt_update_tx(cdc_buf_t *b, PGconn *conn, const loadgen_config_t *cfg, int64_t id)
{
    cdc_buf_put(b, "UPDATE public.transactions SET amount = ", 40);
    append_amount(b, cfg->null_pct);
    cdc_buf_put(b, ", status = ", 11);
    sql_literal(b, conn, pick(statuses, sizeof(statuses) / sizeof(*statuses), cfg->null_pct));
    if (chance(50)) {
        char *note = make_note(cfg);

        cdc_buf_put(b, ", note = ", 9);
        sql_literal(b, conn, note);
        free(note);
    }
    cdc_buf_printf(b, ", updated_at = clock_timestamp() WHERE entity_id = %" PRId64 ";\n", id);
}

static void stmt_delete(cdc_buf_t *b, const table_keys_t *t, int64_t id)
{
    cdc_buf_printf(b, "DELETE FROM public.%s WHERE %s = %" PRId64 ";\n", t->name, t->pk, id);
}

static void stmt_insert_acc(cdc_buf_t *b, PGconn *conn, const loadgen_config_t *cfg, int64_t id)
{
    cdc_buf_printf(b, "INSERT INTO public.accounts VALUES (%" PRId64 ", ", id);
    sql_literal(b, conn, pick(owners, sizeof(owners) / sizeof(*owners), cfg->null_pct));
    cdc_buf_put(b, ", ", 2);
    append_amount(b, cfg->null_pct);
    cdc_buf_printf(b, ", %s, %s, %s, %s, clock_timestamp());\n",
                   chance(cfg->null_pct) ? "NULL" : (chance(50) ? "true" : "false"),
                   chance(cfg->null_pct) ? "NULL" : (chance(50) ? "0.5" : "-1234.125e-3"),
                   chance(cfg->null_pct) ? "NULL" : "42",
                   chance(cfg->null_pct) ? "NULL" : "'2024-02-29'");
}

static void stmt_update_acc(cdc_buf_t *b, const loadgen_config_t *cfg, int64_t id)
{
    cdc_buf_put(b, "UPDATE public.accounts SET balance = ", 37);
    append_amount(b, cfg->null_pct);
    cdc_buf_printf(b,
                   ", visits = coalesce(visits, 0) + 1, active = NOT coalesce(active, false), "
                   "updated_at = clock_timestamp() WHERE account_id = %" PRId64 ";\n",
                   id);
}

/* ---- key sets from the database ------------------------------------------------------ */

/* Adds the keys the query returns to *set, and moves t->next_id past them. */
static bool query_keys(PGconn *conn, table_keys_t *t, const char *sql, keyset_t *set,
                       const char *what)
{
    PGresult *res = PQexec(conn, sql);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        cdc_log_error("could not read %s of table \"%s\": %s", what, t->name, PQerrorMessage(conn));
        PQclear(res);
        return false;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        int64_t k = strtoll(PQgetvalue(res, i, 0), NULL, 10);

        keyset_add(set, k);
        if (k >= t->next_id)
            t->next_id = k + 1;
    }
    PQclear(res);
    return true;
}

static bool load_keys(PGconn *conn, table_keys_t *t)
{
    char sql[256];

    t->live.len = 0;
    snprintf(sql, sizeof(sql), "SELECT %s FROM public.%s", t->pk, t->name);
    if (!query_keys(conn, t, sql, &t->live, "keys"))
        return false;
    /* deleted keys: those the audit saw and the table no longer has (bounded sample) */
    t->deleted.len = 0;
    snprintf(sql, sizeof(sql),
             "SELECT DISTINCT a.pk FROM cdc_audit.changes a WHERE a.tbl = '%s' AND NOT EXISTS "
             "(SELECT 1 FROM public.%s s WHERE s.%s = a.pk) LIMIT 100000",
             t->name, t->name, t->pk);
    return query_keys(conn, t, sql, &t->deleted, "deleted keys");
}

static bool exec_ok(PGconn *conn, const char *sql, const char *what)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(res);
    bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

    if (!ok)
        cdc_log_error("could not %s: %s", what, PQerrorMessage(conn));
    PQclear(res);
    return ok;
}

static PGconn *connect_db(const loadgen_config_t *cfg, stats_t *st)
{
    double deadline = cdc_clock_mono_s() + (double)cfg->reconnect_timeout_ms / 1000.0;
    useconds_t backoff = 100000;

    for (;;) {
        PGconn *conn = PQconnectdb(cfg->pg_dsn);

        if (PQstatus(conn) == CONNECTION_OK) {
            PGresult *res = PQexec(conn, "SET client_min_messages = warning");
            PQclear(res);
            return conn;
        }
        cdc_log_warn("could not connect to PostgreSQL: %s", PQerrorMessage(conn));
        PQfinish(conn);
        if (stop_requested || cdc_clock_mono_s() > deadline)
            return NULL;
        st->reconnects++;
        usleep(backoff);
        if (backoff < 2000000)
            backoff *= 2;
    }
}

/* ---- transactions -------------------------------------------------------------------- */

static int parse_mix(const char *mix, int64_t weights[K_COUNT])
{
    char *copy = strdup(mix), *save = NULL;
    int64_t total = 0;

    memset(weights, 0, sizeof(int64_t) * K_COUNT);
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int k;

        if (eq == NULL)
            goto bad;
        *eq = '\0';
        for (k = 0; k < K_COUNT && strcmp(tok, kind_names[k]) != 0; k++)
            ;
        if (k == K_COUNT || !cdc_parse_int(eq + 1, &weights[k]) || weights[k] < 0)
            goto bad;
        total += weights[k];
    }
    free(copy);
    return total > 0 ? 0 : -1;
bad:
    free(copy);
    return -1;
}

static int pick_kind(const int64_t weights[K_COUNT], int64_t total)
{
    int64_t r = rnd_below(total);

    for (int k = 0; k < K_COUNT; k++) {
        if (r < weights[k])
            return k;
        r -= weights[k];
    }
    return K_INSERT;
}

/*
 * Builds one transaction into b and applies its key changes to the tables; returns the
 * number of row changes. A rolled-back transaction uses only inserts of new keys and
 * updates, so undoing it is truncating the live sets to their saved lengths.
 */
static int64_t build_tx(cdc_buf_t *b, PGconn *conn, const loadgen_config_t *cfg,
                        const int64_t weights[K_COUNT], int64_t total, table_keys_t *tx,
                        table_keys_t *acc, bool rollback, stats_t *st)
{
    int64_t n = 1 + rnd_below(cfg->tx_max_changes), changes = 0;

    cdc_buf_reset(b);
    cdc_buf_put(b, "BEGIN;\n", 7);
    for (int64_t i = 0; i < n; i++) {
        int kind = pick_kind(weights, total);
        int64_t id;

        if (rollback && kind != K_UPDATE && kind != K_SECOND)
            kind = K_INSERT;
        if ((kind == K_UPDATE || kind == K_DELETE || kind == K_MULTI) && tx->live.len == 0)
            kind = K_INSERT;
        if (kind == K_REINSERT && tx->deleted.len == 0)
            kind = K_INSERT;
        switch (kind) {
        case K_INSERT:
            id = tx->next_id++;
            stmt_insert_tx(b, conn, cfg, id);
            keyset_add(&tx->live, id);
            changes++;
            break;
        case K_UPDATE:
            id = tx->live.keys[rnd_below((int64_t)tx->live.len)];
            stmt_update_tx(b, conn, cfg, id);
            changes++;
            break;
        case K_DELETE:
            id = keyset_take(&tx->live);
            stmt_delete(b, tx, id);
            keyset_add(&tx->deleted, id);
            changes++;
            break;
        case K_REINSERT:
            id = keyset_take(&tx->deleted);
            stmt_insert_tx(b, conn, cfg, id);
            keyset_add(&tx->live, id);
            changes++;
            break;
        case K_MULTI: {
            /* 2..4 updates of one row, sometimes ending in its delete and re-insert */
            int64_t m = 2 + rnd_below(3);

            id = tx->live.keys[rnd_below((int64_t)tx->live.len)];
            for (int64_t j = 0; j < m; j++)
                stmt_update_tx(b, conn, cfg, id);
            changes += m;
            if (chance(30)) {
                stmt_delete(b, tx, id);
                stmt_insert_tx(b, conn, cfg, id);
                changes += 2;
            }
            break;
        }
        case K_SECOND:
            if (acc->live.len > 0 && !rollback && chance(15)) {
                id = keyset_take(&acc->live);
                stmt_delete(b, acc, id);
                keyset_add(&acc->deleted, id);
            } else if (acc->live.len > 0 && chance(60)) {
                id = acc->live.keys[rnd_below((int64_t)acc->live.len)];
                stmt_update_acc(b, cfg, id);
            } else {
                id = acc->next_id++;
                stmt_insert_acc(b, conn, cfg, id);
                keyset_add(&acc->live, id);
            }
            changes++;
            break;
        }
        st->kinds[kind]++;
    }
    cdc_buf_put(b, rollback ? "ROLLBACK;\n" : "COMMIT;\n", rollback ? 10 : 8);
    sql_check(b);
    return changes;
}

static bool setup(PGconn *conn, const loadgen_config_t *cfg, table_keys_t *tx, table_keys_t *acc,
                  stats_t *st)
{
    if (cfg->drop &&
        !exec_ok(conn,
                 "DROP TABLE IF EXISTS public.transactions, public.accounts, cdc_audit.changes, "
                 "cdc_audit.columns",
                 "drop the demo tables"))
        return false;
    if (cfg->create_schema && !exec_ok(conn, cdc_loadgen_schema_sql, "create the demo schema"))
        return false;
    if (!load_keys(conn, tx) || !load_keys(conn, acc))
        return false;
    if (cfg->initial_rows > 0) {
        cdc_buf_t b = {0};

        for (int64_t done = 0; done < cfg->initial_rows;) {
            int64_t batch = cfg->initial_rows - done < 500 ? cfg->initial_rows - done : 500;

            cdc_buf_reset(&b);
            cdc_buf_put(&b, "BEGIN;\n", 7);
            for (int64_t i = 0; i < batch; i++) {
                int64_t id = tx->next_id++;

                stmt_insert_tx(&b, conn, cfg, id);
                keyset_add(&tx->live, id);
                id = acc->next_id++;
                stmt_insert_acc(&b, conn, cfg, id);
                keyset_add(&acc->live, id);
            }
            cdc_buf_put(&b, "COMMIT;\n", 8);
            sql_check(&b);
            if (!exec_ok(conn, b.data, "insert the initial rows")) {
                cdc_buf_free(&b);
                return false;
            }
            done += batch;
            st->changes += 2 * batch;
        }
        cdc_buf_free(&b);
        cdc_log_info("inserted %" PRId64 " initial rows into each table", cfg->initial_rows);
    }
    return true;
}

static void report(const stats_t *st, double elapsed, const char *prefix)
{
    fprintf(stderr,
            "%s txns=%" PRId64 " changes=%" PRId64 " rate=%.0f/s rollbacks=%" PRId64
            " errors=%" PRId64 " reconnects=%" PRId64 " insert=%" PRId64 " update=%" PRId64
            " delete=%" PRId64 " reinsert=%" PRId64 " multi=%" PRId64 " second=%" PRId64 "\n",
            prefix, st->txns, st->changes, elapsed > 0 ? (double)st->changes / elapsed : 0.0,
            st->rollbacks, st->errors, st->reconnects, st->kinds[K_INSERT], st->kinds[K_UPDATE],
            st->kinds[K_DELETE], st->kinds[K_REINSERT], st->kinds[K_MULTI], st->kinds[K_SECOND]);
}

int main(int argc, char **argv)
{
    loadgen_config_t cfg = {0};
    table_keys_t tx = {.name = "transactions", .pk = "entity_id", .next_id = 1};
    table_keys_t acc = {.name = "accounts", .pk = "account_id", .next_id = 1};
    int64_t weights[K_COUNT], total = 0;
    stats_t st = {0};
    cdc_buf_t b = {0};
    PGconn *conn = NULL;
    double start, next_report, end;
    int rc = 1;

    cdc_config_load(options, "loadgen", "mixed, rate-controlled load on the demo schema", argc,
                    argv, &cfg);
    cdc_log_options_apply(&cfg.log, "loadgen", NULL);
    if (parse_mix(cfg.mix, weights) != 0) {
        fprintf(stderr,
                "loadgen: invalid value \"%s\" for --mix (CDC_MIX): expected kind=weight,... "
                "with kinds insert, update, delete, reinsert, multi, second\n",
                cfg.mix);
        cdc_config_free(options, &cfg);
        return CDC_CONFIG_EXIT;
    }
    for (int k = 0; k < K_COUNT; k++)
        total += weights[k];
    if (cfg.seed == 0)
        cfg.seed = cdc_clock_wall_ms() ^ ((int64_t)getpid() << 16);
    rng_state = (uint64_t)cfg.seed | 1;
    fprintf(stderr, "loadgen: seed=%" PRId64 " rate=%" PRId64 "/s mix=%s\n", cfg.seed, cfg.rate,
            cfg.mix);

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);

    conn = connect_db(&cfg, &st);
    if (conn == NULL)
        goto cleanup;
    if (!setup(conn, &cfg, &tx, &acc, &st))
        goto cleanup;
    if (cfg.mark_snapshot &&
        !exec_ok(conn,
                 "BEGIN; DELETE FROM cdc_audit.changes;"
                 " INSERT INTO cdc_audit.changes (tbl, op, pk, txid, row_image)"
                 " SELECT 'transactions', 'r', entity_id, txid_current(), to_jsonb(t)"
                 " FROM public.transactions t ORDER BY entity_id;"
                 " INSERT INTO cdc_audit.changes (tbl, op, pk, txid, row_image)"
                 " SELECT 'accounts', 'r', account_id, txid_current(), to_jsonb(a)"
                 " FROM public.accounts a ORDER BY account_id; COMMIT",
                 "mark the snapshot in the audit record"))
        goto cleanup;
    if (cfg.setup_only) {
        rc = 0;
        goto cleanup;
    }

    start = cdc_clock_mono_s();
    next_report = start + (double)cfg.report_interval_ms / 1000.0;
    end = cfg.duration_ms > 0 ? start + (double)cfg.duration_ms / 1000.0 : 0;
    while (!stop_requested) {
        double now = cdc_clock_mono_s();
        bool rollback = chance(cfg.rollback_pct);
        size_t tx_live = tx.live.len, acc_live = acc.live.len;
        int64_t changes;
        PGresult *res;

        if ((end > 0 && now >= end) ||
            (cfg.max_transactions > 0 && st.txns + st.rollbacks >= cfg.max_transactions))
            break;
        if (cfg.report_interval_ms > 0 && now >= next_report) {
            report(&st, now - start, "loadgen: progress");
            next_report = now + (double)cfg.report_interval_ms / 1000.0;
        }
        changes = build_tx(&b, conn, &cfg, weights, total, &tx, &acc, rollback, &st);
        res = PQexec(conn, b.data);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            /* unknown outcome: the audit record decides; resynchronise our key sets */
            st.errors++;
            cdc_log_warn("transaction failed: %s", PQerrorMessage(conn));
            PQclear(res);
            if (PQstatus(conn) != CONNECTION_OK) {
                PQfinish(conn);
                conn = connect_db(&cfg, &st);
                if (conn == NULL)
                    goto cleanup;
            } else {
                PQclear(PQexec(conn, "ROLLBACK"));
            }
            if (!load_keys(conn, &tx) || !load_keys(conn, &acc))
                goto cleanup;
            continue;
        }
        PQclear(res);
        if (rollback) {
            tx.live.len = tx_live;
            acc.live.len = acc_live;
            st.rollbacks++;
        } else {
            st.txns++;
            st.changes += changes;
        }
        if (cfg.rate > 0) {
            /* pace by changes issued so far, so the average rate holds over time */
            double due = start + (double)(st.changes + st.rollbacks) / (double)cfg.rate;
            double wait = due - cdc_clock_mono_s();

            if (wait > 0)
                usleep((useconds_t)(wait * 1e6));
        }
    }
    report(&st, cdc_clock_mono_s() - start, "loadgen: done");
    rc = 0;

cleanup:
    if (conn != NULL)
        PQfinish(conn);
    cdc_buf_free(&b);
    free(tx.live.keys);
    free(tx.deleted.keys);
    free(acc.live.keys);
    free(acc.deleted.keys);
    cdc_config_free(options, &cfg);
    return rc;
}
