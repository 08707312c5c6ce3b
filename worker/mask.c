/*
 * Column masking (see mask.h; docs/worker.md, "Column masking"): the policy file, its
 * digests, the masked schema of each source schema version, the masking of decoded
 * changes on the record path and of dead letters' JSON. A step of the decoder: it builds
 * entity keys with the decoder's own function (decode_int.h), so a hashed key is an
 * entity like any other.
 */
#include "worker/mask.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/hex.h"
#include "common/iceberg/schema.h"
#include "common/log.h"
#include "worker/decode_int.h"

#define HASH_HEX_LEN (2 * CDC_SHA256_LEN)
#define MIN_SECRET_BYTES 16
#define DEFAULT_REDACTION "****"
#define WITHHELD "[withheld by the column masking policy]"

typedef struct rule {
    char *column; /* source column name */
    cdc_mask_action_t action;
    int64_t length; /* truncate: characters kept */
    char *value;    /* redact: the constant */
} rule_t;

typedef struct table_policy {
    char *name; /* "<ns>.<table>" */
    rule_t *rules;
    size_t nrules;
    char identity[96]; /* "<version>:<sha-256 hex>" (cdc_mask_table_policy) */
} table_policy_t;

/* A column held back in allow-list mode (per table and column, not per version). */
typedef struct held {
    char *table, *column;
    uint64_t values; /* row images that had a value for it */
    int64_t since_ms;
    cdc_counter_t *counter;
} held_t;

/* The masked schema of one source schema version. */
typedef struct masked {
    const cdc_source_schema_t *src;
    cdc_source_schema_t schema; /* cols, key_cols, retired owned; names borrowed from src */
    size_t *from;               /* schema.cols[j] is src->cols[from[j]] */
    const rule_t **rule;        /* schema.cols[j]'s rule, NULL = kept */
    size_t *held_col;           /* src columns held back, and their entries in m->held */
    size_t *held_at;
    size_t nheld;
    bool identity;   /* nothing to mask: changes keep the source schema */
    bool key_masked; /* a key column is hashed: the entity is rebuilt */
} masked_t;

struct cdc_mask {
    char *source; /* the policy file, or "(inline)" */
    int64_t version;
    bool allowlist;
    cdc_hmac_t *hmac; /* NULL when no rule hashes */
    char key_id[17];  /* identity of the secret: HMAC(secret, fixed text), 16 hex digits */
    table_policy_t *tables;
    size_t ntables, nrules;
    char digest[HASH_HEX_LEN + 1];
    char default_identity[96]; /* allow-list mode: of a table the policy does not name */
    masked_t **masked;
    size_t nmasked, cap;
    masked_t *last; /* the last one used: most records are of the same schema */
    held_t *held;
    size_t nheld;
    cdc_metrics_t *metrics;
};

static const char *const action_names[] = {
    [CDC_MASK_KEEP] = "keep",     [CDC_MASK_DROP] = "drop",         [CDC_MASK_HASH] = "hash",
    [CDC_MASK_REDACT] = "redact", [CDC_MASK_TRUNCATE] = "truncate", [CDC_MASK_NULL] = "null",
    [CDC_MASK_HOLD] = "held",
};

const char *cdc_mask_action_name(cdc_mask_action_t a)
{
    return (size_t)a < sizeof(action_names) / sizeof(action_names[0]) ? action_names[a] : "?";
}

/* ---- the policy ----------------------------------------------------------------------- */

static void table_policy_free(table_policy_t *t)
{
    for (size_t i = 0; i < t->nrules; i++) {
        free(t->rules[i].column);
        free(t->rules[i].value);
    }
    free(t->rules);
    free(t->name);
}

static void masked_free(masked_t *ms)
{
    if (ms == NULL)
        return;
    if (!ms->identity) {
        free(ms->schema.cols);
        free(ms->schema.key_cols);
        free(ms->schema.retired);
    }
    free(ms->from);
    free(ms->rule);
    free(ms->held_col);
    free(ms->held_at);
    free(ms);
}

void cdc_mask_free(cdc_mask_t *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->ntables; i++)
        table_policy_free(&m->tables[i]);
    free(m->tables);
    for (size_t i = 0; i < m->nmasked; i++)
        masked_free(m->masked[i]);
    free(m->masked);
    for (size_t i = 0; i < m->nheld; i++) {
        free(m->held[i].table);
        free(m->held[i].column);
    }
    free(m->held);
    cdc_hmac_free(m->hmac);
    free(m->source);
    free(m);
}

static cdc_err_t bad(cdc_error_t *e, const cdc_mask_t *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cdc_err_t bad(cdc_error_t *e, const cdc_mask_t *m, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return cdc_error_set(e, CDC_ERR_CONFIG, "option --mask-policy \"%s\": %s", m->source, what);
}

static bool parse_action(const char *name, cdc_mask_action_t *a)
{
    for (size_t i = 0; i < sizeof(action_names) / sizeof(action_names[0]); i++)
        if (i != CDC_MASK_HOLD && strcmp(name, action_names[i]) == 0) {
            *a = (cdc_mask_action_t)i;
            return true;
        }
    return false;
}

/* One column's rule: "action" or {"action": .., "length": N, "value": ".."}. */
static cdc_err_t parse_rule(cdc_mask_t *m, const char *table, const char *column, json_t *j,
                            rule_t *r, cdc_error_t *e)
{
    const char *name = json_string_value(json_is_object(j) ? json_object_get(j, "action") : j);
    const char *key;
    json_t *v;

    memset(r, 0, sizeof(*r));
    if (name == NULL)
        return bad(e, m,
                   "tables.\"%s\".\"%s\": expected an action (\"hash\") or an object with "
                   "\"action\"",
                   table, column);
    if (!parse_action(name, &r->action))
        return bad(e, m,
                   "tables.\"%s\".\"%s\": unknown action \"%s\" (keep, drop, hash, redact, "
                   "truncate, null)",
                   table, column, name);
    json_object_foreach(json_is_object(j) ? j : NULL, key, v)
    {
        if (strcmp(key, "action") == 0)
            continue;
        if (strcmp(key, "length") == 0 && r->action == CDC_MASK_TRUNCATE) {
            if (!json_is_integer(v) || json_integer_value(v) < 1)
                return bad(e, m,
                           "tables.\"%s\".\"%s\": \"length\" must be an integer of at least 1",
                           table, column);
            r->length = json_integer_value(v);
        } else if (strcmp(key, "value") == 0 && r->action == CDC_MASK_REDACT) {
            if (!json_is_string(v))
                return bad(e, m, "tables.\"%s\".\"%s\": \"value\" must be a string", table, column);
            r->value = strdup(json_string_value(v));
            if (r->value == NULL)
                return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        } else {
            return bad(e, m,
                       "tables.\"%s\".\"%s\": unknown member \"%s\" (action; length for "
                       "truncate, value for redact)",
                       table, column, key);
        }
    }
    if (r->action == CDC_MASK_TRUNCATE && r->length == 0)
        return bad(e, m, "tables.\"%s\".\"%s\": \"truncate\" needs \"length\" (characters kept)",
                   table, column);
    if (r->action == CDC_MASK_REDACT && r->value == NULL &&
        (r->value = strdup(DEFAULT_REDACTION)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if ((r->column = strdup(column)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    return CDC_OK;
}

static int rule_cmp(const void *a, const void *b)
{
    return strcmp(((const rule_t *)a)->column, ((const rule_t *)b)->column);
}

static int table_cmp(const void *a, const void *b)
{
    return strcmp(((const table_policy_t *)a)->name, ((const table_policy_t *)b)->name);
}

static cdc_err_t parse_tables(cdc_mask_t *m, json_t *tables, cdc_error_t *e)
{
    const char *name, *column;
    json_t *cols, *j;
    cdc_err_t rc;

    if (!json_is_object(tables))
        return bad(e, m, "\"tables\" must be an object of \"<schema>.<table>\": {columns}");
    m->tables = calloc(json_object_size(tables) + 1, sizeof(*m->tables));
    if (m->tables == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    json_object_foreach(tables, name, cols)
    {
        table_policy_t *t = &m->tables[m->ntables];
        const char *dot = strchr(name, '.');
        if (dot == NULL || dot == name || dot[1] == '\0')
            return bad(e, m, "tables.\"%s\": a table is named \"<schema>.<table>\"", name);
        if (!json_is_object(cols))
            return bad(e, m, "tables.\"%s\": expected an object of column rules", name);
        if ((t->name = strdup(name)) == NULL ||
            (t->rules = calloc(json_object_size(cols) + 1, sizeof(rule_t))) == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        m->ntables++;
        json_object_foreach(cols, column, j)
        {
            if ((rc = parse_rule(m, name, column, j, &t->rules[t->nrules], e)) != CDC_OK) {
                free(t->rules[t->nrules].column);
                free(t->rules[t->nrules].value);
                return rc;
            }
            t->nrules++;
            m->nrules++;
        }
        qsort(t->rules, t->nrules, sizeof(rule_t), rule_cmp);
    }
    qsort(m->tables, m->ntables, sizeof(*m->tables), table_cmp);
    return CDC_OK;
}

static const rule_t *first_hash(const cdc_mask_t *m, const table_policy_t **in)
{
    for (size_t i = 0; i < m->ntables; i++)
        for (size_t k = 0; k < m->tables[i].nrules; k++)
            if (m->tables[i].rules[k].action == CDC_MASK_HASH) {
                *in = &m->tables[i];
                return &m->tables[i].rules[k];
            }
    return NULL;
}

/* The secret: --mask-secret-file (one trailing newline dropped) or --mask-secret. */
static cdc_err_t load_secret(cdc_mask_t *m, const cdc_mask_config_t *cfg, cdc_error_t *e)
{
    const table_policy_t *t = NULL;
    const rule_t *r = first_hash(m, &t);
    bool have_file = cfg->secret_file != NULL && cfg->secret_file[0] != '\0';
    bool have_env = cfg->secret != NULL && cfg->secret[0] != '\0';
    char buf[4096];
    size_t n = 0;
    cdc_err_t rc;

    if (r == NULL)
        return CDC_OK; /* nothing hashes: no secret needed */
    if (have_file && have_env)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "options --mask-secret-file and --mask-secret (CDC_MASK_SECRET) are "
                             "both set: give the hashing secret once");
    if (have_file) {
        FILE *f = fopen(cfg->secret_file, "rb");
        if (f == NULL)
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "option --mask-secret-file: could not open \"%s\": %s",
                                 cfg->secret_file, strerror(errno));
        n = fread(buf, 1, sizeof(buf), f);
        bool big = n == sizeof(buf);
        fclose(f);
        if (big)
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "option --mask-secret-file: \"%s\" is larger than %zu bytes",
                                 cfg->secret_file, sizeof(buf) - 1);
        if (n > 0 && buf[n - 1] == '\n')
            n--;
        if (n > 0 && buf[n - 1] == '\r')
            n--;
    } else if (have_env) {
        n = strlen(cfg->secret);
        if (n >= sizeof(buf))
            n = sizeof(buf) - 1;
        memcpy(buf, cfg->secret, n);
    } else {
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "option --mask-policy \"%s\": column \"%s\" of \"%s\" is hashed, but "
                             "no secret is set: give --mask-secret-file (or CDC_MASK_SECRET)",
                             m->source, r->column, t->name);
    }
    if (n < MIN_SECRET_BYTES)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "option %s: the hashing secret has %zu bytes, at least %d are needed "
                             "(e.g. head -c 32 /dev/urandom | base64)",
                             have_file ? "--mask-secret-file" : "--mask-secret", n,
                             MIN_SECRET_BYTES);
    rc = cdc_hmac_new(buf, n, &m->hmac, e);
    memset(buf, 0, sizeof(buf));
    if (rc != CDC_OK)
        return rc;
    uint8_t id[CDC_SHA256_LEN];
    if (!cdc_hmac_sha256(m->hmac, "cdc column masking key id", 25, id))
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cdc_hex_encode(id, 8, m->key_id);
    return CDC_OK;
}

/* The canonical text of a table's rules (what its digest covers). */
static void put_table(FILE *f, const cdc_mask_t *m, const table_policy_t *t)
{
    bool hashes = false;
    fprintf(f, "table %s\n", t->name);
    for (size_t k = 0; k < t->nrules; k++) {
        const rule_t *r = &t->rules[k];
        fprintf(f, "rule %zu:%s %s", strlen(r->column), r->column, action_names[r->action]);
        if (r->action == CDC_MASK_TRUNCATE)
            fprintf(f, " %" PRId64, r->length);
        if (r->action == CDC_MASK_REDACT)
            fprintf(f, " %zu:%s", strlen(r->value), r->value);
        fputc('\n', f);
        hashes = hashes || r->action == CDC_MASK_HASH;
    }
    if (hashes)
        fprintf(f, "key %s\n", m->key_id);
}

/* "<version>:<sha-256 hex>" of the mode and t's rules (t NULL: a table without rules). */
static bool identity_of(const cdc_mask_t *m, const table_policy_t *t, bool whole, char *out,
                        size_t size)
{
    char *text = NULL;
    size_t len = 0;
    uint8_t d[CDC_SHA256_LEN];
    char hex[HASH_HEX_LEN + 1];
    FILE *f = open_memstream(&text, &len);

    if (f == NULL)
        return false;
    fprintf(f, "cdc column masking 1\nmode %s\n", m->allowlist ? "allowlist" : "denylist");
    if (whole)
        for (size_t i = 0; i < m->ntables; i++)
            put_table(f, m, &m->tables[i]);
    else if (t != NULL)
        put_table(f, m, t);
    if (fclose(f) != 0 || text == NULL) {
        free(text);
        return false;
    }
    cdc_sha256(text, len, d);
    free(text);
    cdc_hex_encode(d, sizeof(d), hex);
    if (whole)
        snprintf(out, size, "%s", hex);
    else
        snprintf(out, size, "%" PRId64 ":%s", m->version, hex);
    return true;
}

static cdc_err_t parse_policy(cdc_mask_t *m, json_t *root, cdc_error_t *e)
{
    const char *key;
    json_t *v;

    if (!json_is_object(root))
        return bad(e, m, "expected a JSON object {\"version\": N, \"tables\": {..}}");
    json_object_foreach(root, key, v)
    {
        cdc_err_t rc;
        if (strcmp(key, "version") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return bad(e, m, "\"version\" must be an integer of at least 0");
            m->version = json_integer_value(v);
        } else if (strcmp(key, "tables") == 0) {
            if ((rc = parse_tables(m, v, e)) != CDC_OK)
                return rc;
        } else {
            return bad(e, m, "unknown member \"%s\" (version, tables)", key);
        }
    }
    return CDC_OK;
}

cdc_err_t cdc_mask_open(const cdc_mask_config_t *cfg, cdc_metrics_t *metrics, cdc_mask_t **out,
                        cdc_error_t *e)
{
    bool have_policy = cfg->policy != NULL && cfg->policy[0] != '\0';
    bool inline_policy = have_policy && cfg->policy[strspn(cfg->policy, " \t\r\n")] == '{';
    bool allowlist = cfg->mode != NULL && strcmp(cfg->mode, "allowlist") == 0;
    json_error_t je;
    json_t *root;
    cdc_mask_t *m;
    cdc_err_t rc;

    *out = NULL;
    if (cfg->mode != NULL && cfg->mode[0] != '\0' && !allowlist &&
        strcmp(cfg->mode, "denylist") != 0)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "option --mask-mode: \"%s\" is not a mode (denylist, allowlist)",
                             cfg->mode);
    if (!have_policy) {
        if (allowlist)
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "option --mask-mode=allowlist needs --mask-policy: the columns "
                                 "that may reach the lake");
        return CDC_OK;
    }
    if ((m = calloc(1, sizeof(*m))) == NULL ||
        (m->source = strdup(inline_policy ? "(inline)" : cfg->policy)) == NULL) {
        cdc_mask_free(m);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    m->allowlist = allowlist;
    m->metrics = metrics;
    root = inline_policy ? json_loads(cfg->policy, JSON_REJECT_DUPLICATES, &je)
                         : json_load_file(cfg->policy, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        if (je.line <= 0) /* the file could not be read */
            rc = cdc_error_set(e, CDC_ERR_CONFIG, "option --mask-policy \"%s\": %s", m->source,
                               je.text);
        else
            rc = cdc_error_set(e, CDC_ERR_CONFIG,
                               "option --mask-policy \"%s\": line %d column %d: %s", m->source,
                               je.line, je.column, je.text);
        cdc_mask_free(m);
        return rc;
    }
    rc = parse_policy(m, root, e);
    json_decref(root);
    if (rc == CDC_OK)
        rc = load_secret(m, cfg, e);
    if (rc == CDC_OK) {
        bool ok = identity_of(m, NULL, true, m->digest, sizeof(m->digest)) &&
                  identity_of(m, NULL, false, m->default_identity, sizeof(m->default_identity));
        for (size_t i = 0; ok && i < m->ntables; i++)
            ok = identity_of(m, &m->tables[i], false, m->tables[i].identity,
                             sizeof(m->tables[i].identity));
        if (!ok)
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    if (rc != CDC_OK) {
        cdc_mask_free(m);
        return rc;
    }
    *out = m;
    return CDC_OK;
}

void cdc_mask_describe(const cdc_mask_t *m, char *buf, size_t size)
{
    snprintf(buf, size,
             "column masking policy %s version %" PRId64 ": mode %s, %zu tables, %zu rules, "
             "digest %s%s%s",
             m->source, m->version, m->allowlist ? "allowlist" : "denylist", m->ntables, m->nrules,
             m->digest, m->hmac != NULL ? ", hashing key id " : "",
             m->hmac != NULL ? m->key_id : "");
}

/* The table's policy, NULL when the file names no such table. */
static const table_policy_t *find_table(const cdc_mask_t *m, const char *ns, const char *table)
{
    size_t nl = strlen(ns);
    for (size_t i = 0; i < m->ntables; i++) {
        const char *n = m->tables[i].name;
        if (strncmp(n, ns, nl) == 0 && n[nl] == '.' && strcmp(n + nl + 1, table) == 0)
            return &m->tables[i];
    }
    return NULL;
}

static const rule_t *find_rule(const table_policy_t *t, const char *column)
{
    for (size_t k = 0; t != NULL && k < t->nrules; k++)
        if (strcmp(t->rules[k].column, column) == 0)
            return &t->rules[k];
    return NULL;
}

/* What happens to a column: its rule's action, else keep (deny-list) or hold (allow). */
static cdc_mask_action_t action_of(const cdc_mask_t *m, const rule_t *r)
{
    return r != NULL ? r->action : m->allowlist ? CDC_MASK_HOLD : CDC_MASK_KEEP;
}

const char *cdc_mask_table_policy(const cdc_mask_t *m, const char *ns, const char *table)
{
    const table_policy_t *t;
    if (m == NULL)
        return "";
    if ((t = find_table(m, ns, table)) != NULL)
        return t->identity;
    return m->allowlist ? m->default_identity : "";
}

/* ---- masked schemas ------------------------------------------------------------------- */

/* The entry of a held (table, column) in m->held, made (and logged) on first sight. */
static bool held_entry(cdc_mask_t *m, const cdc_source_schema_t *s, const char *column, size_t *at)
{
    char table[512];
    snprintf(table, sizeof(table), "%s.%s", s->ns, s->table);
    for (size_t i = 0; i < m->nheld; i++)
        if (strcmp(m->held[i].table, table) == 0 && strcmp(m->held[i].column, column) == 0) {
            *at = i;
            return true;
        }
    if (cdc_array_resize(m->held, m->nheld + 1) != CDC_OK)
        return false;
    held_t *h = &m->held[m->nheld];
    memset(h, 0, sizeof(*h));
    h->table = strdup(table);
    h->column = strdup(column);
    if (h->table == NULL || h->column == NULL) {
        free(h->table);
        free(h->column);
        return false;
    }
    h->since_ms = cdc_clock_wall_ms();
    if (m->metrics != NULL) {
        const char *labels[] = {"table", table, "column", column, NULL};
        h->counter = cdc_metrics_counter(
            m->metrics, "cdc_worker_mask_unclassified_values_total",
            "Allow-list masking: values of columns the policy does not name, held back (the "
            "column is absent from the lake until the policy names it).",
            labels);
    }
    *at = m->nheld++;
    cdc_log_warn("column \"%s\" of table \"%s\" is not named by the masking policy %s (allow-list "
                 "mode): held back, absent from the lake until the policy names it",
                 column, table, m->source);
    return true;
}

static cdc_err_t unfit(cdc_error_t *e, const cdc_mask_t *m, const cdc_source_schema_t *s,
                       const cdc_column_t *col, const char *why)
{
    return cdc_error_set(e, CDC_ERR_CONFIG,
                         "option --mask-policy \"%s\": column \"%s\" of table \"%s.%s\" "
                         "(schema version %" PRId64 "): %s",
                         m->source, col->name, s->ns, s->table, s->version, why);
}

/* Whether the policy can apply to column col of s: a key is kept or hashed, hash, redact
 * and truncate apply to strings. */
static cdc_err_t check_fit(const cdc_mask_t *m, const cdc_source_schema_t *s,
                           const cdc_column_t *col, cdc_mask_action_t a, cdc_error_t *e)
{
    char why[200], type[48];
    if (col->key && a == CDC_MASK_HOLD)
        return unfit(e, m, s, col,
                     "a key column the policy does not name (allow-list mode): name it \"keep\" "
                     "or \"hash\"");
    if (col->key && a != CDC_MASK_KEEP && a != CDC_MASK_HASH) {
        snprintf(why, sizeof(why),
                 "\"%s\" cannot apply to a key column (rows are found by it): keep or hash it",
                 action_names[a]);
        return unfit(e, m, s, col, why);
    }
    if ((a == CDC_MASK_HASH || a == CDC_MASK_REDACT || a == CDC_MASK_TRUNCATE) &&
        col->type != CDC_ICE_STRING) {
        cdc_ice_field_t f = {.type = col->type, .precision = col->precision, .scale = col->scale};
        snprintf(why, sizeof(why),
                 "\"%s\" applies to string columns only, this one is %s (drop or null it "
                 "instead)",
                 action_names[a], cdc_ice_type_string(&f, type, sizeof(type)));
        return unfit(e, m, s, col, why);
    }
    return CDC_OK;
}

static masked_t *build(cdc_mask_t *m, const cdc_source_schema_t *s, cdc_error_t *e)
{
    const table_policy_t *t = find_table(m, s->ns, s->table);
    masked_t *ms = calloc(1, sizeof(*ms));
    size_t n = s->ncols ? s->ncols : 1;
    bool changed = false;

    if (ms == NULL)
        goto nomem;
    ms->src = s;
    if (t == NULL && !m->allowlist) {
        ms->identity = true;
        return ms;
    }
    ms->schema = *s;
    ms->schema.cols = calloc(n, sizeof(cdc_column_t));
    ms->schema.key_cols = calloc(n, sizeof(size_t));
    ms->schema.retired = calloc(s->nretired ? s->nretired : 1, sizeof(cdc_column_t));
    ms->schema.ncols = ms->schema.nkey = ms->schema.nretired = 0;
    ms->from = calloc(n, sizeof(size_t));
    ms->rule = calloc(n, sizeof(rule_t *));
    ms->held_col = calloc(n, sizeof(size_t));
    ms->held_at = calloc(n, sizeof(size_t));
    if (ms->schema.cols == NULL || ms->schema.key_cols == NULL || ms->schema.retired == NULL ||
        ms->from == NULL || ms->rule == NULL || ms->held_col == NULL || ms->held_at == NULL)
        goto nomem;
    for (size_t i = 0; i < s->ncols; i++) {
        const cdc_column_t *col = &s->cols[i];
        const rule_t *r = find_rule(t, col->name);
        cdc_mask_action_t a = action_of(m, r);
        if (check_fit(m, s, col, a, e) != CDC_OK) {
            masked_free(ms);
            return NULL;
        }
        changed = changed || a != CDC_MASK_KEEP;
        if (a == CDC_MASK_DROP)
            continue;
        if (a == CDC_MASK_HOLD) {
            if (!held_entry(m, s, col->name, &ms->held_at[ms->nheld]))
                goto nomem;
            ms->held_col[ms->nheld++] = i;
            continue;
        }
        size_t j = ms->schema.ncols++;
        ms->schema.cols[j] = *col;
        ms->schema.cols[j].optional = col->optional || a == CDC_MASK_NULL;
        ms->from[j] = i;
        ms->rule[j] = a == CDC_MASK_KEEP ? NULL : r;
        if (col->key) {
            ms->schema.key_cols[ms->schema.nkey++] = j;
            ms->key_masked = ms->key_masked || a == CDC_MASK_HASH;
        }
    }
    /* earlier types of live columns: gone with their column, else as the rows of their
     * own (older) version fill them, masked by that version's schema */
    for (size_t i = 0; i < s->nretired; i++) {
        cdc_mask_action_t a = action_of(m, find_rule(t, s->retired[i].name));
        if (a == CDC_MASK_DROP || a == CDC_MASK_HOLD)
            changed = true;
        else
            ms->schema.retired[ms->schema.nretired++] = s->retired[i];
    }
    if (!changed) { /* every column kept: the source schema as it is */
        free(ms->schema.cols);
        free(ms->schema.key_cols);
        free(ms->schema.retired);
        memset(&ms->schema, 0, sizeof(ms->schema));
        ms->identity = true;
    }
    return ms;
nomem:
    masked_free(ms);
    cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    return NULL;
}

static masked_t *lookup(cdc_mask_t *m, const cdc_source_schema_t *s, cdc_error_t *e)
{
    masked_t *ms;
    if (m->last != NULL && m->last->src == s)
        return m->last;
    for (size_t i = 0; i < m->nmasked; i++)
        if (m->masked[i]->src == s)
            return m->last = m->masked[i];
    if ((ms = build(m, s, e)) == NULL)
        return NULL;
    if (cdc_array_reserve(m->masked, m->cap, m->nmasked + 1, 16) != CDC_OK) {
        masked_free(ms);
        cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    m->masked[m->nmasked++] = ms;
    return m->last = ms;
}

const cdc_source_schema_t *cdc_mask_schema(cdc_mask_t *m, const cdc_source_schema_t *s,
                                           cdc_error_t *e)
{
    masked_t *ms = lookup(m, s, e);
    return ms == NULL ? NULL : ms->identity ? s : &ms->schema;
}

/* ---- masking values --------------------------------------------------------------------- */

/* Bytes of the first n characters (UTF-8 code points) of p[0..len). */
static size_t utf8_prefix(const uint8_t *p, size_t len, int64_t n)
{
    size_t i = 0;
    for (int64_t k = 0; i < len; k++) {
        if (k == n)
            return i;
        i++;
        while (i < len && (p[i] & 0xc0) == 0x80)
            i++;
    }
    return len;
}

/* The masked text of a string value p[0..len) under rule r into a malloc'd buffer. */
static uint8_t *mask_text(const cdc_mask_t *m, const rule_t *r, const uint8_t *p, size_t len,
                          size_t *out_len)
{
    uint8_t d[CDC_SHA256_LEN], *out;
    switch (r->action) {
    case CDC_MASK_HASH:
        if ((out = malloc(HASH_HEX_LEN + 1)) == NULL || !cdc_hmac_sha256(m->hmac, p, len, d)) {
            free(out);
            return NULL;
        }
        cdc_hex_encode(d, sizeof(d), (char *)out);
        *out_len = HASH_HEX_LEN;
        return out;
    case CDC_MASK_REDACT:
        *out_len = strlen(r->value);
        return (uint8_t *)strdup(r->value);
    case CDC_MASK_TRUNCATE:
        *out_len = utf8_prefix(p, len, r->length);
        if ((out = malloc(*out_len + 1)) != NULL) {
            memcpy(out, p, *out_len);
            out[*out_len] = '\0';
        }
        return out;
    default:
        return NULL;
    }
}

/* Rebuilds row r on the masked schema: kept values move, masked ones are replaced. */
static bool mask_row(const cdc_mask_t *m, const masked_t *ms, cdc_row_t *r)
{
    const cdc_source_schema_t *s = &ms->schema;
    cdc_val_t *vals;

    if (r->vals == NULL) {
        r->schema = s;
        return true;
    }
    if ((vals = calloc(s->ncols ? s->ncols : 1, sizeof(cdc_val_t))) == NULL)
        return false;
    for (size_t j = 0; j < s->ncols; j++) {
        cdc_val_t *src = &r->vals[ms->from[j]], *v = &vals[j];
        const rule_t *rule = ms->rule[j];
        if (rule == NULL) {
            *v = *src;
            src->bytes = NULL; /* moved */
        } else if (rule->action == CDC_MASK_NULL) {
            v->kind = CDC_VAL_NULL;
        } else if (cdc_val_kind_special(src->kind)) {
            v->kind = CDC_VAL_NULL; /* a numeric NaN is a value too: never named in the row */
        } else if (src->kind != CDC_VAL_SET) {
            v->kind = src->kind; /* null stays null; TOAST is repaired from masked state */
        } else {
            v->kind = CDC_VAL_SET;
            if ((v->bytes = mask_text(m, rule, src->bytes, src->len, &v->len)) == NULL) {
                cdc_row_t tmp = {s, vals};
                cdc_row_clear(&tmp);
                return false;
            }
        }
    }
    cdc_row_clear(r); /* the clear values still there, on the source schema */
    r->schema = s;
    r->vals = vals;
    return true;
}

static void count_held(cdc_mask_t *m, const masked_t *ms, const cdc_change_t *c)
{
    for (size_t h = 0; h < ms->nheld; h++) {
        size_t i = ms->held_col[h];
        if ((c->after.vals != NULL && c->after.vals[i].kind == CDC_VAL_SET) ||
            (c->before.vals != NULL && c->before.vals[i].kind == CDC_VAL_SET)) {
            held_t *held = &m->held[ms->held_at[h]];
            held->values++;
            if (held->counter != NULL)
                cdc_metrics_counter_inc(held->counter);
        }
    }
}

cdc_err_t cdc_mask_change(cdc_mask_t *m, cdc_change_t *c, cdc_error_t *e)
{
    cdc_decode_error_t de;
    masked_t *ms;

    if (c->tombstone || c->schema == NULL)
        return CDC_OK;
    if ((ms = lookup(m, c->schema, e)) == NULL)
        return e->code;
    if (ms->identity)
        return CDC_OK;
    count_held(m, ms, c);
    c->schema = &ms->schema;
    if (!mask_row(m, ms, &c->before) || !mask_row(m, ms, &c->after))
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (ms->key_masked && c->entity != NULL && (c->after.vals != NULL || c->before.vals != NULL)) {
        free(c->entity);
        c->entity = NULL;
        c->entity_len = 0;
        if (!cdc_decode_entity(c->schema, c->after.vals ? &c->after : &c->before, c, &de))
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    return CDC_OK;
}

/* ---- dead letters ------------------------------------------------------------------------ */

/* The masked JSON of member value v under action a (rule r), or NULL to delete it. */
static json_t *mask_json_value(const cdc_mask_t *m, cdc_mask_action_t a, const rule_t *r, json_t *v)
{
    char *text;
    const char *p;
    size_t len, n = 0;
    uint8_t *out;
    json_t *res;

    if (a == CDC_MASK_DROP || a == CDC_MASK_HOLD)
        return NULL;
    if (a == CDC_MASK_NULL || json_is_null(v))
        return json_null();
    /* a string masks as in the lake; any other value (a type mismatch) as its JSON text */
    text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    p = text != NULL ? text : json_string_value(v);
    len = text != NULL ? strlen(text) : json_string_length(v);
    out = p != NULL ? mask_text(m, r, (const uint8_t *)p, len, &n) : NULL;
    res = out != NULL ? json_stringn((const char *)out, n) : json_string(WITHHELD);
    free(out);
    free(text);
    return res;
}

/* Masks the members of a row (or key) object that are columns. */
static bool mask_json_row(const cdc_mask_t *m, const table_policy_t *t, json_t *row)
{
    const char *k;
    json_t *v;
    void *tmp;

    if (!json_is_object(row))
        return true;
    json_object_foreach_safe(row, tmp, k, v)
    {
        const rule_t *r = find_rule(t, k);
        cdc_mask_action_t a = action_of(m, r);
        json_t *nv;
        if (a == CDC_MASK_KEEP || strncmp(k, "__", 2) == 0) /* flattened metadata */
            continue;
        nv = mask_json_value(m, a, r, v);
        if (nv == NULL)
            json_object_del(row, k);
        else if (json_object_set_new(row, k, nv) != 0)
            return false;
    }
    return true;
}

/* A record's envelope: Connect's payload, else the document itself. */
static json_t *envelope(json_t *root)
{
    json_t *p = json_object_get(root, "payload");
    return json_is_object(p) && json_object_get(root, "schema") != NULL ? p : root;
}

static char *withheld_doc(size_t *len)
{
    char *s = strdup("{\"cdc_masked\":\"" WITHHELD ": not a JSON object\"}");
    *len = s != NULL ? strlen(s) : 0;
    return s;
}

static bool dump(json_t *root, char **out, size_t *len)
{
    *out = json_dumps(root, JSON_COMPACT);
    *len = *out != NULL ? strlen(*out) : 0;
    return *out != NULL;
}

cdc_err_t cdc_mask_record(const cdc_mask_t *m, const char *topic, const void *key, size_t key_len,
                          const void *value, size_t value_len, char **out_key, size_t *out_key_len,
                          char **out_value, size_t *out_value_len)
{
    json_t *root = value != NULL ? json_loadb(value, value_len, 0, NULL) : NULL, *env, *k = NULL;
    const table_policy_t *t;
    char ns[128], table[128];
    bool ok = true;

    *out_key = *out_value = NULL;
    *out_key_len = *out_value_len = 0;
    env = json_is_object(root) ? envelope(root) : NULL;
    json_t *src = json_object_get(env, "source");
    if (cdc_json_str(src, "schema") != NULL && cdc_json_str(src, "table") != NULL) {
        cdc_copy_str(ns, sizeof(ns), cdc_json_str(src, "schema"));
        cdc_copy_str(table, sizeof(table), cdc_json_str(src, "table"));
    } else {
        cdc_catalog_names_from_topic(topic, ns, sizeof(ns), table, sizeof(table));
    }
    t = find_table(m, ns, table);
    if (t == NULL && !m->allowlist) {
        json_decref(root);
        return CDC_OK; /* a table the policy leaves alone */
    }
    if (value != NULL && env == NULL) {
        ok = (*out_value = withheld_doc(out_value_len)) != NULL;
    } else if (env != NULL) {
        json_t *b = json_object_get(env, "before"), *a = json_object_get(env, "after");
        if (b != NULL || a != NULL)
            ok = mask_json_row(m, t, b) && mask_json_row(m, t, a);
        else
            ok = mask_json_row(m, t, env); /* flattened: the columns at the top */
        ok = ok && dump(root, out_value, out_value_len);
    }
    json_decref(root);
    if (ok && key != NULL && key_len > 0) {
        k = json_loadb(key, key_len, 0, NULL);
        if (!json_is_object(k))
            ok = (*out_key = withheld_doc(out_key_len)) != NULL;
        else
            ok = mask_json_row(m, t, envelope(k)) && dump(k, out_key, out_key_len);
        json_decref(k);
    }
    if (!ok) {
        free(*out_key);
        free(*out_value);
        *out_key = *out_value = NULL;
        return CDC_ERR_NOMEM;
    }
    return CDC_OK;
}

void cdc_mask_error(const cdc_mask_t *m, cdc_decode_error_t *de)
{
    if (m == NULL || de->quote_at == 0 || de->quote_at >= strlen(de->msg))
        return;
    snprintf(de->msg + de->quote_at, sizeof(de->msg) - de->quote_at, "%s", WITHHELD);
}

/* ---- /status ------------------------------------------------------------------------------ */

char *cdc_mask_status_json(const cdc_mask_t *m)
{
    json_t *o = json_object(), *tables = json_object(), *held = json_array();
    char *s;

    json_object_set_new(o, "policy", json_string(m->source));
    json_object_set_new(o, "version", json_integer(m->version));
    json_object_set_new(o, "mode", json_string(m->allowlist ? "allowlist" : "denylist"));
    json_object_set_new(o, "digest", json_string(m->digest));
    if (m->hmac != NULL)
        json_object_set_new(o, "key_id", json_string(m->key_id));
    for (size_t i = 0; i < m->ntables; i++)
        json_object_set_new(tables, m->tables[i].name, json_string(m->tables[i].identity));
    json_object_set_new(o, "tables", tables);
    for (size_t i = 0; i < m->nheld; i++) {
        json_t *h = json_object();
        json_object_set_new(h, "table", json_string(m->held[i].table));
        json_object_set_new(h, "column", json_string(m->held[i].column));
        json_object_set_new(h, "values", json_integer((json_int_t)m->held[i].values));
        json_object_set_new(h, "since_ms", json_integer(m->held[i].since_ms));
        json_array_append_new(held, h);
    }
    json_object_set_new(o, "unclassified", held);
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}
