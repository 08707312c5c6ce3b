/*
 * Decoding of change events into typed rows (see decode.h for the accepted forms): the
 * envelopes (the capture's and Debezium's, with or without an embedded schema, and the
 * flattened form), through a jansson tree. The capture's own events take the direct
 * decoder first (decode_fast.c); this path defines the behaviour and every error.
 *
 * A call circle of two files, one decoder with two paths (docs/development.md, "Call
 * circles"): decode.c tries the direct path (decode_fast.c) first, and the direct path
 * uses decode.c's small helpers (placeholders, sequence text, the snapshot tag, clearing
 * a change).
 */
#include "worker/decode.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/hash.h"
#include "worker/decode_int.h"
#include "worker/jsonscan.h"

void cdc_change_clear(cdc_change_t *c)
{
    cdc_row_clear(&c->before);
    cdc_row_clear(&c->after);
    free(c->entity);
    memset(c, 0, sizeof(*c));
}

uint64_t cdc_decode_snapshot_tag(const char *id, size_t n)
{
    uint64_t h = cdc_hash_bytes(id, n, 0x736e6170u);
    return h != 0 ? h : 1;
}

static uint64_t json_u64(json_t *j)
{
    if (json_is_integer(j))
        return (uint64_t)json_integer_value(j);
    if (json_is_string(j))
        return strtoull(json_string_value(j), NULL, 10);
    return 0;
}

/* Debezium's source.sequence: "[\"<lastCommitLsn>\",\"<lsn>\"]" (the capture writes
 * [commit_lsn, lsn]). Only the first element is needed; parsed by hand because this runs
 * for every record. */
bool cdc_decode_sequence_text(const char *p, uint64_t *commit_lsn)
{
    char *end;
    while (*p == ' ' || *p == '[')
        p++;
    if (*p == '"')
        p++;
    if (*p < '0' || *p > '9')
        return false; /* null or garbage: no commit position */
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p)
        return false;
    *commit_lsn = (uint64_t)v;
    return true;
}

static bool sequence_commit_lsn(json_t *seq, uint64_t *commit_lsn)
{
    return json_is_string(seq) && cdc_decode_sequence_text(json_string_value(seq), commit_lsn);
}

static void fail(cdc_decode_error_t *de, cdc_dlq_class_t cls, const char *fmt, const char *arg)
{
    de->cls = cls;
    snprintf(de->msg, sizeof(de->msg), fmt, arg);
}

/* Key column names from the Kafka key (JSON object, or {"schema","payload"}). */
static json_t *key_names(const cdc_decode_input_t *in)
{
    json_t *k, *payload, *names;
    const char *name;
    json_t *v;
    if (in->key == NULL || in->key_len == 0)
        return NULL;
    k = cdc_json_load(in->key, in->key_len, NULL);
    if (k == NULL)
        return NULL;
    payload = json_object_get(k, "payload");
    if (json_is_object(payload) && json_object_get(k, "schema") != NULL)
        v = payload;
    else
        v = k;
    if (!json_is_object(v)) {
        json_decref(k);
        return NULL;
    }
    names = json_array();
    for (void *it = json_object_iter(v); it != NULL; it = json_object_iter_next(v, it)) {
        name = json_object_iter_key(it);
        json_array_append_new(names, json_string(name));
    }
    json_decref(k);
    return names;
}

const char *cdc_decode_placeholder(const cdc_decode_options_t *opts)
{
    return opts && opts->toast_placeholder ? opts->toast_placeholder
                                           : "__debezium_unavailable_value";
}

static size_t max_record_bytes(const cdc_decode_options_t *opts)
{
    return opts && opts->max_record_bytes ? opts->max_record_bytes : (size_t)16 << 20;
}

cdc_err_t cdc_decode(cdc_catalog_t *cat, const cdc_decode_options_t *opts,
                     const cdc_decode_input_t *in, cdc_change_t *c, cdc_decode_error_t *de)
{
    /* The capture's own events take the direct decoder; everything else, and every
     * event it is not sure about, the general one (which defines the behaviour). */
    cdc_decode_input_t copy = *in;
    if (in->value != NULL && in->value_len <= max_record_bytes(opts) &&
        cdc_decode_fast(cat, opts, &copy, c, de))
        return CDC_OK;
    return cdc_decode_tree(cat, opts, &copy, c, de);
}

cdc_err_t cdc_decode_tree(cdc_catalog_t *cat, const cdc_decode_options_t *opts,
                          const cdc_decode_input_t *in, cdc_change_t *c, cdc_decode_error_t *de)
{
    size_t max = max_record_bytes(opts);
    const char *placeholder = cdc_decode_placeholder(opts);
    json_error_t je;
    json_t *root = NULL, *payload, *schema, *source, *before, *after, *knames = NULL;
    const cdc_source_schema_t *s = NULL;
    const char *op;
    bool flattened;
    int64_t version;
    char ns[128], table[128];
    cdc_err_t rc = CDC_ERR_INVALID;

    memset(c, 0, sizeof(*c));
    memset(de, 0, sizeof(*de));
    de->schema_version = -1;
    c->topic = in->topic;
    c->partition = in->partition;
    c->offset = in->offset;
    c->tx_id = -1;
    if (in->value == NULL) {
        c->tombstone = true;
        return CDC_OK;
    }
    if (in->value_len > max) {
        de->cls = CDC_DLQ_OVERSIZED;
        snprintf(de->msg, sizeof(de->msg), "record of %zu bytes exceeds the limit of %zu bytes",
                 in->value_len, max);
        return CDC_ERR_INVALID;
    }
    memset(&je, 0, sizeof(je)); /* the fast path leaves it alone */
    root = cdc_json_load_scoped(in->value, in->value_len, &je);
    if (root == NULL || !json_is_object(root)) {
        de->cls = CDC_DLQ_MALFORMED_JSON;
        int n = snprintf(de->msg, sizeof(de->msg), "invalid JSON at line %d column %d: ", je.line,
                         je.column);
        if (root == NULL && n > 0 && (size_t)n < sizeof(de->msg))
            de->quote_at = (size_t)n; /* jansson's text shows the bytes near the error */
        snprintf(de->msg + n, sizeof(de->msg) - (size_t)n, "%s",
                 root ? "value is not an object" : je.text);
        goto done;
    }
    schema = json_object_get(root, "schema");
    payload = json_object_get(root, "payload");
    if (json_is_object(schema) && json_object_get(root, "payload") != NULL) {
        if (json_is_null(payload)) { /* tombstone-like payload */
            c->tombstone = true;
            rc = CDC_OK;
            goto done;
        }
        if (!json_is_object(payload)) {
            fail(de, CDC_DLQ_MALFORMED_JSON, "%s", "\"payload\" is not an object");
            goto done;
        }
    } else {
        schema = NULL;
        payload = root;
    }
    op = cdc_json_str(payload, "op");
    flattened = op == NULL && json_object_get(payload, "before") == NULL &&
                json_object_get(payload, "after") == NULL;
    if (flattened)
        op = cdc_json_str(payload, "__op");
    source = json_object_get(payload, "source");
    version = json_integer_value(json_object_get(source, "schema_version"));
    if (version <= 0)
        version = in->schema_version >= 0 || in->header_version == NULL
                      ? in->schema_version
                      : in->header_version(in->header_arg);
    de->schema_version = version;
    cdc_catalog_names_from_topic(in->topic, ns, sizeof(ns), table, sizeof(table));
    if (opts && opts->default_ns && strchr(in->topic, '.') == NULL)
        cdc_copy_str(ns, sizeof(ns), opts->default_ns);
    if (cdc_json_str(source, "schema"))
        cdc_copy_str(ns, sizeof(ns), cdc_json_str(source, "schema"));
    if (cdc_json_str(source, "table"))
        cdc_copy_str(table, sizeof(table), cdc_json_str(source, "table"));
    if (flattened && cdc_json_str(payload, "__table"))
        cdc_copy_str(table, sizeof(table), cdc_json_str(payload, "__table"));

    if (op == NULL) {
        if (flattened && json_object_get(payload, "__op") == NULL) {
            /* Flattened without add.fields=op: read as upsert, deletes via __deleted. */
            op = "u";
        } else {
            fail(de, CDC_DLQ_UNKNOWN_OP, "%s", "event has no \"op\"");
            goto done;
        }
    }
    /* cdc-capture writes a truncate to every partition (docs/events.md), in order with
     * each partition's rows. Debezium writes one event, without a key, to one partition:
     * the other partitions apply it by its position (docs/worker.md, "Debezium's
     * truncate"). */
    c->floor = strcmp(op, "t") == 0 && (flattened || version < 0);
    if (strlen(op) != 1 || strchr("curdts", op[0]) == NULL) {
        fail(de, CDC_DLQ_UNKNOWN_OP, "unknown op \"%.20s\"", op);
        goto done;
    }
    c->op = (cdc_op_t)op[0];
    if (flattened) {
        json_t *del = json_object_get(payload, "__deleted");
        if ((json_is_string(del) && strcmp(json_string_value(del), "true") == 0) ||
            json_is_true(del))
            c->op = CDC_OP_DELETE;
    }

    /* Schema: registered version (capture), embedded Connect schema, or the topic's latest. */
    if (version >= 0) {
        s = cdc_catalog_get(cat, in->topic, version);
        if (s == NULL) {
            de->cls = CDC_DLQ_UNKNOWN_SCHEMA;
            snprintf(de->msg, sizeof(de->msg),
                     "schema version %" PRId64 " of topic \"%s\" is unknown", version, in->topic);
            goto done;
        }
    } else if (schema != NULL) {
        json_t *fields = json_object_get(schema, "fields"), *rowfields = NULL;
        if (flattened) {
            rowfields = fields;
        } else {
            for (size_t i = 0; i < json_array_size(fields); i++) {
                json_t *f = json_array_get(fields, i);
                const char *fn = cdc_json_str(f, "field");
                if (fn && (strcmp(fn, "after") == 0 || strcmp(fn, "before") == 0) &&
                    json_is_array(json_object_get(f, "fields"))) {
                    rowfields = json_object_get(f, "fields");
                    if (strcmp(fn, "after") == 0)
                        break;
                }
            }
        }
        if (!json_is_array(rowfields)) {
            fail(de, CDC_DLQ_UNKNOWN_SCHEMA, "%s", "embedded schema has no row fields");
            goto done;
        }
        knames = key_names(in);
        s = cdc_catalog_connect_schema(cat, in->topic, ns, table, rowfields, knames, de);
        if (s == NULL)
            goto done;
    } else {
        s = cdc_catalog_latest(cat, in->topic);
        if (s == NULL) {
            fail(de, CDC_DLQ_UNKNOWN_SCHEMA,
                 "no schema is registered for topic \"%s\" and the event carries none", in->topic);
            goto done;
        }
    }
    c->schema = s;

    /* Position and transaction. */
    if (flattened) {
        c->lsn = json_u64(json_object_get(payload, "__lsn"));
        c->tx_id = json_is_integer(json_object_get(payload, "__txId"))
                       ? json_integer_value(json_object_get(payload, "__txId"))
                       : -1;
        c->source_ts_us =
            cdc_decode_ms_to_us(json_integer_value(json_object_get(payload, "__source_ts_ms")));
        if (!sequence_commit_lsn(json_object_get(payload, "__sequence"), &c->commit_lsn) &&
            !sequence_commit_lsn(json_object_get(payload, "__source_sequence"), &c->commit_lsn))
            c->commit_lsn = json_u64(json_object_get(payload, "__commit_lsn"));
    } else {
        json_t *tx = json_object_get(source, "txId");
        c->lsn = json_u64(json_object_get(source, "lsn"));
        c->tx_id = json_is_integer(tx) ? json_integer_value(tx) : -1;
        if (json_is_integer(json_object_get(source, "ts_us")))
            c->source_ts_us = json_integer_value(json_object_get(source, "ts_us"));
        else
            c->source_ts_us =
                cdc_decode_ms_to_us(json_integer_value(json_object_get(source, "ts_ms")));
        if (json_object_get(source, "commit_lsn") != NULL)
            c->commit_lsn = json_u64(json_object_get(source, "commit_lsn"));
        else if (!sequence_commit_lsn(json_object_get(source, "sequence"), &c->commit_lsn))
            c->commit_lsn = 0;
        c->backfill = (c->op == CDC_OP_READ || c->op == CDC_OP_TRUNCATE) &&
                      cdc_json_str(source, "snapshot") != NULL &&
                      strcmp(cdc_json_str(source, "snapshot"), "backfill") == 0;
        if (c->op == CDC_OP_READ && cdc_json_str(source, "snapshot_id") != NULL)
            c->snapshot_tag = cdc_decode_snapshot_tag(cdc_json_str(source, "snapshot_id"),
                                                      strlen(cdc_json_str(source, "snapshot_id")));
    }
    if (c->commit_lsn == 0)
        c->commit_lsn = c->lsn;

    if (c->op == CDC_OP_TRUNCATE || c->op == CDC_OP_SCHEMA) {
        /* No rows: the entity is the table identity "<ns>.<table>\0" (a prefix of every
         * entity of the table). */
        size_t n = strlen(s->ns) + strlen(s->table) + 2;
        c->entity = malloc(n);
        if (c->entity == NULL) {
            rc = CDC_ERR_NOMEM;
            goto done;
        }
        c->entity_len = (size_t)snprintf((char *)c->entity, n, "%s.%s", s->ns, s->table) + 1;
        rc = CDC_OK;
        goto done;
    }

    /* Row images. */
    if (flattened) {
        cdc_row_t *img = c->op == CDC_OP_DELETE ? &c->before : &c->after;
        if (!cdc_decode_row_json(s, payload, placeholder, img, &c->nulled, de))
            goto done;
    } else {
        before = json_object_get(payload, "before");
        after = json_object_get(payload, "after");
        if (json_is_object(before) &&
            !cdc_decode_row_json(s, before, placeholder, &c->before, &c->nulled, de))
            goto done;
        if (c->op != CDC_OP_DELETE) {
            if (!json_is_object(after)) {
                fail(de, CDC_DLQ_MALFORMED_JSON, "op \"%s\" event has no \"after\" image", op);
                goto done;
            }
            if (!cdc_decode_row_json(s, after, placeholder, &c->after, &c->nulled, de))
                goto done;
        } else if (c->before.vals == NULL) {
            fail(de, CDC_DLQ_MISSING_KEY, "%s", "delete event has no \"before\" image");
            goto done;
        }
        /* The capture lists unchanged TOAST columns explicitly. */
        json_t *ut = json_object_get(payload, "unchanged_toast");
        for (size_t i = 0; c->after.vals && i < json_array_size(ut); i++) {
            const char *col = json_string_value(json_array_get(ut, i));
            for (size_t k = 0; col && k < s->ncols; k++)
                if (strcmp(s->cols[k].name, col) == 0) {
                    free(c->after.vals[k].bytes);
                    memset(&c->after.vals[k], 0, sizeof(cdc_val_t));
                    c->after.vals[k].kind = CDC_VAL_TOAST;
                }
        }
        c->snapshot_pending = json_is_true(json_object_get(payload, "snapshot_pending"));
    }
    if (!cdc_decode_entity(s, c->after.vals ? &c->after : &c->before, c, de))
        goto done;
    rc = CDC_OK;
done:
    json_decref(knames);
    json_decref(root);
    cdc_json_scope_end(); /* nothing of root is used past this point */
    if (rc != CDC_OK) {
        const char *t = c->topic;
        cdc_change_clear(c);
        c->topic = t;
    }
    return rc;
}
