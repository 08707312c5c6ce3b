/*
 * Table schema documents (see cdcschema.h): the PostgreSQL -> Iceberg type mapping and
 * the JSON form registered on `<prefix>._schemas`. Encoding and decoding use jansson.
 */
#include "common/cdcschema.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/iceberg/schema.h"

static const struct {
    uint32_t oid;
    const char *name;
    uint32_t array_oid;
} builtin[] = {
    {CDC_PG_BOOL, "bool", 1000},
    {CDC_PG_BYTEA, "bytea", 1001},
    {CDC_PG_CHAR, "char", 1002},
    {CDC_PG_NAME, "name", 1003},
    {CDC_PG_INT8, "int8", 1016},
    {CDC_PG_INT2, "int2", 1005},
    {CDC_PG_INT4, "int4", 1007},
    {CDC_PG_TEXT, "text", 1009},
    {CDC_PG_OID, "oid", 1028},
    {CDC_PG_JSON, "json", 199},
    {CDC_PG_XML, "xml", 143},
    {CDC_PG_FLOAT4, "float4", 1021},
    {CDC_PG_FLOAT8, "float8", 1022},
    {CDC_PG_MONEY, "money", 791},
    {CDC_PG_BPCHAR, "bpchar", 1014},
    {CDC_PG_VARCHAR, "varchar", 1015},
    {CDC_PG_DATE, "date", 1182},
    {CDC_PG_TIME, "time", 1183},
    {CDC_PG_TIMESTAMP, "timestamp", 1115},
    {CDC_PG_TIMESTAMPTZ, "timestamptz", 1185},
    {CDC_PG_INTERVAL, "interval", 1187},
    {CDC_PG_TIMETZ, "timetz", 1270},
    {CDC_PG_NUMERIC, "numeric", 1231},
    {CDC_PG_UUID, "uuid", 2951},
    {CDC_PG_JSONB, "jsonb", 3807},
};
#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))

static const char *const venc_names[CDC_VENC__COUNT] = {
    [CDC_VENC_BOOL] = "bool",
    [CDC_VENC_INT] = "int",
    [CDC_VENC_FLOAT] = "float",
    [CDC_VENC_DECIMAL] = "decimal",
    [CDC_VENC_STRING] = "string",
    [CDC_VENC_BYTES] = "base64",
    [CDC_VENC_DATE] = "epoch_days",
    [CDC_VENC_TIME] = "micros_of_day",
    [CDC_VENC_TIMESTAMP] = "epoch_micros",
    [CDC_VENC_UUID] = "uuid",
    [CDC_VENC_ARRAY] = "json_array",
    [CDC_VENC_RECORD] = "record",
};

uint32_t cdc_schema_array_elem(uint32_t array_oid)
{
    for (size_t i = 0; i < NBUILTIN; i++)
        if (builtin[i].array_oid == array_oid)
            return builtin[i].oid;
    return 0;
}

const char *cdc_schema_pg_type_name(uint32_t oid)
{
    for (size_t i = 0; i < NBUILTIN; i++)
        if (builtin[i].oid == oid)
            return builtin[i].name;
    return NULL;
}

void cdc_schema_map_type(uint32_t oid, int32_t typmod, cdc_ice_type_t *ice, int32_t *precision,
                         int32_t *scale, cdc_value_enc_t *enc)
{
    *precision = 0;
    *scale = 0;
    *ice = CDC_ICE_STRING;
    *enc = CDC_VENC_STRING;
    switch (oid) {
    case CDC_PG_BOOL:
        *ice = CDC_ICE_BOOLEAN;
        *enc = CDC_VENC_BOOL;
        break;
    case CDC_PG_INT2:
    case CDC_PG_INT4:
        *ice = CDC_ICE_INT;
        *enc = CDC_VENC_INT;
        break;
    case CDC_PG_INT8:
    case CDC_PG_OID:
        *ice = CDC_ICE_LONG;
        *enc = CDC_VENC_INT;
        break;
    case CDC_PG_FLOAT4:
        *ice = CDC_ICE_FLOAT;
        *enc = CDC_VENC_FLOAT;
        break;
    case CDC_PG_FLOAT8:
        *ice = CDC_ICE_DOUBLE;
        *enc = CDC_VENC_FLOAT;
        break;
    case CDC_PG_NUMERIC:
        *enc = CDC_VENC_DECIMAL;
        /* typmod = ((precision << 16) | (scale & 0x7ff)) + VARHDRSZ; PG15 allows negative
         * or > precision scales, which Iceberg cannot represent: those stay strings. */
        if (typmod >= 4) {
            int32_t p = ((typmod - 4) >> 16) & 0xffff;
            int32_t s = (typmod - 4) & 0x7ff;
            if (s & 0x400)
                s -= 0x800;
            if (p >= 1 && p <= 38 && s >= 0 && s <= p) {
                *ice = CDC_ICE_DECIMAL;
                *precision = p;
                *scale = s;
            }
        }
        break;
    case CDC_PG_BYTEA:
        *ice = CDC_ICE_BINARY;
        *enc = CDC_VENC_BYTES;
        break;
    case CDC_PG_DATE:
        *ice = CDC_ICE_DATE;
        *enc = CDC_VENC_DATE;
        break;
    case CDC_PG_TIME:
        *ice = CDC_ICE_TIME;
        *enc = CDC_VENC_TIME;
        break;
    case CDC_PG_TIMESTAMP:
        *ice = CDC_ICE_TIMESTAMP;
        *enc = CDC_VENC_TIMESTAMP;
        break;
    case CDC_PG_TIMESTAMPTZ:
        *ice = CDC_ICE_TIMESTAMPTZ;
        *enc = CDC_VENC_TIMESTAMP;
        break;
    case CDC_PG_UUID:
        *ice = CDC_ICE_UUID;
        *enc = CDC_VENC_UUID;
        break;
    default:
        if (cdc_schema_array_elem(oid) != 0)
            *enc = CDC_VENC_ARRAY;
        break;
    }
}

bool cdc_schema_numeric_default_parse(const char *s, cdc_schema_mapping_t *m)
{
    cdc_ice_field_t f = {0};

    if (s == NULL || strcmp(s, "string") == 0) {
        m->numeric_precision = m->numeric_scale = 0;
        return true;
    }
    if (cdc_ice_type_parse(s, &f) != CDC_OK || f.type != CDC_ICE_DECIMAL)
        return false;
    m->numeric_precision = f.precision;
    m->numeric_scale = f.scale;
    return true;
}

/* Element types whose arrays become lists (docs/capture.md, "Types"): those whose
 * elements events carry in the nested value form (docs/events.md, "Values"): numbers,
 * booleans, strings that are the value; and those the worker converts from their
 * PostgreSQL text (dates, times, timestamps, bytea's hex; json as its text). */
static bool list_element(uint32_t oid)
{
    switch (oid) {
    case CDC_PG_DATE:
    case CDC_PG_TIME:
    case CDC_PG_TIMESTAMP:
    case CDC_PG_TIMESTAMPTZ:
    case CDC_PG_BYTEA:
    case CDC_PG_JSON:
    case CDC_PG_JSONB:
    case CDC_PG_BOOL:
    case CDC_PG_INT2:
    case CDC_PG_INT4:
    case CDC_PG_INT8:
    case CDC_PG_OID:
    case CDC_PG_FLOAT4:
    case CDC_PG_FLOAT8:
    case CDC_PG_NUMERIC:
    case CDC_PG_TEXT:
    case CDC_PG_VARCHAR:
    case CDC_PG_BPCHAR:
    case CDC_PG_NAME:
    case CDC_PG_UUID:
        return true;
    default:
        return false;
    }
}

bool cdc_schema_map_col(const cdc_schema_mapping_t *m, cdc_schema_col_t *col, uint32_t oid,
                        int32_t typmod, int ndims)
{
    uint32_t elem = cdc_schema_array_elem(oid);

    col->pg_oid = oid;
    col->typmod = typmod;
    col->elem_oid = elem;
    free(col->ice_nested);
    col->ice_nested = NULL;
    cdc_schema_map_type(oid, typmod, &col->ice_type, &col->precision, &col->scale, &col->enc);
    if (m == NULL)
        return true;
    if (oid == CDC_PG_NUMERIC && typmod < 0 && m->numeric_precision > 0) {
        col->ice_type = CDC_ICE_DECIMAL;
        col->precision = m->numeric_precision;
        col->scale = m->numeric_scale;
        return true;
    }
    if (elem != 0 && m->nested && list_element(elem)) {
        cdc_ice_field_t ef = {0};
        cdc_value_enc_t ee;
        char tb[40];
        json_t *t;
        cdc_schema_map_type(elem, typmod, &ef.type, &ef.precision, &ef.scale, &ee);
        if (elem == CDC_PG_NUMERIC && ef.type != CDC_ICE_DECIMAL) {
            if (typmod >= 0 || m->numeric_precision == 0)
                return true; /* a numeric element Iceberg cannot hold: JSON array text */
            ef.type = CDC_ICE_DECIMAL;
            ef.precision = m->numeric_precision;
            ef.scale = m->numeric_scale;
        }
        t = json_string(cdc_ice_type_string(&ef, tb, sizeof(tb)));
        for (int d = 0; t != NULL && d < (ndims > 1 ? ndims : 1); d++)
            t = json_pack("{s:s, s:i, s:o, s:b}", "type", "list", "element-id", 0, "element", t,
                          "element-required", 0);
        col->ice_nested = t ? json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(t);
        if (col->ice_nested == NULL)
            return false;
        col->ice_type = CDC_ICE_LIST;
        col->precision = col->scale = 0;
    }
    return true;
}

/* The Iceberg type's text is the Iceberg module's (common/iceberg/schema.h): one table of
 * names for the schema registry and the table metadata. */
const char *cdc_schema_ice_type_str(cdc_ice_type_t t, int32_t precision, int32_t scale, char *buf,
                                    size_t size)
{
    cdc_ice_field_t f = {.type = t, .precision = precision, .scale = scale};

    return cdc_ice_type_string(&f, buf, size);
}

bool cdc_schema_ice_type_parse(const char *s, cdc_ice_type_t *t, int32_t *precision, int32_t *scale)
{
    cdc_ice_field_t f = {0};

    *precision = 0;
    *scale = 0;
    if (cdc_ice_type_parse(s, &f) != CDC_OK)
        return false;
    *t = f.type;
    *precision = f.precision;
    *scale = f.scale;
    return true;
}

const char *cdc_schema_venc_name(cdc_value_enc_t enc)
{
    if ((int)enc < 0 || enc >= CDC_VENC__COUNT)
        return "unknown";
    return venc_names[enc];
}

bool cdc_schema_venc_parse(const char *s, cdc_value_enc_t *out)
{
    for (int i = 0; i < CDC_VENC__COUNT; i++) {
        if (strcmp(s, venc_names[i]) == 0) {
            *out = (cdc_value_enc_t)i;
            return true;
        }
    }
    return false;
}

static char replident_char(const char *s)
{
    if (strcmp(s, "full") == 0)
        return 'f';
    if (strcmp(s, "index") == 0)
        return 'i';
    if (strcmp(s, "nothing") == 0)
        return 'n';
    return 'd';
}

static const char *replident_name(char c)
{
    switch (c) {
    case 'f':
        return "full";
    case 'i':
        return "index";
    case 'n':
        return "nothing";
    default:
        return "default";
    }
}

/* A column's "iceberg": the type's string, or a nested type's object. */
static json_t *col_ice_json(const cdc_schema_col_t *c, char *buf, size_t cap)
{
    cdc_ice_field_t f = {
        .type = c->ice_type, .precision = c->precision, .scale = c->scale, .nested = c->ice_nested};
    return cdc_ice_field_type_jansson(&f, buf, cap);
}

/* Reads a column's "iceberg" (string or nested object); false when it is no type. */
static bool col_ice_parse(json_t *ice, cdc_schema_col_t *c)
{
    cdc_ice_field_t f = {0};
    cdc_error_t e;
    if (ice == NULL || cdc_ice_field_type_from_jansson(ice, &f, &e) != CDC_OK)
        return false;
    c->ice_type = f.type;
    c->precision = f.precision;
    c->scale = f.scale;
    free(c->ice_nested);
    c->ice_nested = f.nested;
    return true;
}

static void encode_identity(json_t *o, const cdc_schema_col_t *c)
{
    if (c->attnum > 0)
        json_object_set_new(o, "attnum", json_integer(c->attnum));
    if (c->field_id > 0)
        json_object_set_new(o, "field_id", json_integer(c->field_id));
    if (c->field_name != NULL)
        json_object_set_new(o, "field_name", json_string(c->field_name));
    if (c->type_version > 1)
        json_object_set_new(o, "type_version", json_integer(c->type_version));
}

static void decode_identity(json_t *o, cdc_schema_col_t *c, bool *ok)
{
    const char *fn = json_string_value(json_object_get(o, "field_name"));
    c->attnum = (int32_t)json_integer_value(json_object_get(o, "attnum"));
    c->field_id = (int32_t)json_integer_value(json_object_get(o, "field_id"));
    c->type_version = (int32_t)json_integer_value(json_object_get(o, "type_version"));
    if (c->type_version < 1)
        c->type_version = 1;
    if (fn != NULL && (c->field_name = strdup(fn)) == NULL)
        *ok = false;
    if (c->attnum < 0 || c->field_id < 0)
        *ok = false;
}

cdc_err_t cdc_schema_doc_set_parts(cdc_schema_doc_t *doc, const uint32_t *parts, size_t n)
{
    free(doc->parts);
    doc->parts = NULL;
    doc->nparts = 0;
    doc->parts_known = true;
    if (n == 0)
        return CDC_OK;
    if ((doc->parts = malloc(n * sizeof(*doc->parts))) == NULL)
        return CDC_ERR_NOMEM;
    memcpy(doc->parts, parts, n * sizeof(*parts));
    doc->nparts = n;
    return CDC_OK;
}

/* Partitions from a JSON array (not an array: unknown). */
static cdc_err_t parts_from_jansson(cdc_schema_doc_t *doc, const json_t *a)
{
    uint32_t *v;
    cdc_err_t rc;
    if (!json_is_array(a))
        return CDC_OK;
    if ((v = calloc(json_array_size(a) + 1, sizeof(*v))) == NULL)
        return CDC_ERR_NOMEM;
    for (size_t i = 0; i < json_array_size(a); i++)
        v[i] = (uint32_t)json_integer_value(json_array_get(a, i));
    rc = cdc_schema_doc_set_parts(doc, v, json_array_size(a));
    free(v);
    return rc;
}

cdc_err_t cdc_schema_doc_parts_from_json(cdc_schema_doc_t *doc, const char *json)
{
    json_error_t jerr;
    json_t *a = json ? json_loads(json, 0, &jerr) : NULL;
    cdc_err_t rc = parts_from_jansson(doc, a);
    json_decref(a);
    return rc;
}

cdc_err_t cdc_schema_doc_encode(const cdc_schema_doc_t *doc, char **out, cdc_error_t *e)
{
    json_t *root = NULL, *cols = NULL, *key = NULL;
    char tbuf[64];
    cdc_err_t rc = CDC_ERR_NOMEM;

    *out = NULL;
    root = json_object();
    cols = json_array();
    key = json_array();
    if (root == NULL || cols == NULL || key == NULL)
        goto cleanup;
    json_object_set_new(root, "format", json_integer(CDC_SCHEMA_FORMAT));
    json_object_set_new(root, "topic", json_string(doc->topic ? doc->topic : ""));
    json_object_set_new(root, "schema", json_string(doc->pg_schema ? doc->pg_schema : ""));
    json_object_set_new(root, "table", json_string(doc->pg_table ? doc->pg_table : ""));
    json_object_set_new(root, "version", json_integer(doc->version));
    json_object_set_new(root, "relid", json_integer(doc->relid));
    json_object_set_new(root, "replica_identity",
                        json_string(replident_name(doc->replica_identity)));
    for (int pos = 1; pos <= (int)doc->ncols; pos++)
        for (size_t i = 0; i < doc->ncols; i++)
            if (doc->cols[i].key == pos)
                json_array_append_new(key, json_string(doc->cols[i].name));
    for (size_t i = 0; i < doc->ncols; i++) {
        const cdc_schema_col_t *c = &doc->cols[i];
        json_t *o = json_object();
        if (o == NULL)
            goto cleanup;
        json_object_set_new(o, "name", json_string(c->name));
        json_object_set_new(o, "pg_oid", json_integer(c->pg_oid));
        json_object_set_new(o, "pg_type", c->pg_type ? json_string(c->pg_type) : json_null());
        json_object_set_new(o, "typmod", json_integer(c->typmod));
        json_object_set_new(o, "nullable", json_boolean(c->nullable));
        json_object_set_new(o, "key", json_integer(c->key));
        json_object_set_new(o, "iceberg", col_ice_json(c, tbuf, sizeof(tbuf)));
        json_object_set_new(o, "encoding", json_string(cdc_schema_venc_name(c->enc)));
        if (c->enc == CDC_VENC_ARRAY)
            json_object_set_new(o, "elem_oid", json_integer(c->elem_oid));
        encode_identity(o, c);
        json_array_append_new(cols, o);
    }
    json_object_set(root, "key", key);
    json_object_set(root, "columns", cols);
    if (doc->last_field_id > 0)
        json_object_set_new(root, "last_field_id", json_integer(doc->last_field_id));
    if (doc->backfill)
        json_object_set_new(root, "backfill", json_true());
    if (doc->resync)
        json_object_set_new(root, "resync", json_true());
    if (doc->parts_known) {
        json_t *ps = json_array();
        for (size_t i = 0; ps != NULL && i < doc->nparts; i++)
            json_array_append_new(ps, json_integer(doc->parts[i]));
        json_object_set_new(root, "partitions", ps);
    }
    if (doc->nretired > 0) {
        json_t *ret = json_array();
        for (size_t i = 0; ret != NULL && i < doc->nretired; i++) {
            const cdc_schema_col_t *c = &doc->retired[i];
            json_t *o = json_object();
            json_object_set_new(o, "name", json_string(c->name));
            json_object_set_new(o, "iceberg", col_ice_json(c, tbuf, sizeof(tbuf)));
            encode_identity(o, c);
            json_array_append_new(ret, o);
        }
        json_object_set_new(root, "retired", ret);
    }
    *out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (*out == NULL)
        goto cleanup;
    rc = CDC_OK;
cleanup:
    if (rc != CDC_OK)
        cdc_error_set(e, rc, "could not encode schema of \"%s\"", doc->topic ? doc->topic : "?");
    json_decref(key);
    json_decref(cols);
    json_decref(root);
    return rc;
}

static char *dup_str(json_t *o, const char *name)
{
    const char *s = json_string_value(json_object_get(o, name));
    return s ? strdup(s) : NULL;
}

cdc_err_t cdc_schema_doc_decode(const char *json, size_t len, cdc_schema_doc_t *doc, cdc_error_t *e)
{
    json_error_t jerr;
    json_t *root, *cols, *ret;
    const char *ri;
    bool ok = true;
    cdc_err_t rc = CDC_ERR_INVALID;

    memset(doc, 0, sizeof(*doc));
    root = json_loadb(json, len, 0, &jerr);
    if (root == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID, "invalid schema document: %s (line %d)", jerr.text,
                             jerr.line);
    if (!json_is_object(root)) {
        cdc_error_set(e, rc, "invalid schema document: not an object");
        goto cleanup;
    }
    doc->format = (int)json_integer_value(json_object_get(root, "format"));
    if (doc->format != CDC_SCHEMA_FORMAT) {
        cdc_error_set(e, CDC_ERR_UNSUPPORTED, "unsupported schema document format %d", doc->format);
        rc = CDC_ERR_UNSUPPORTED;
        goto cleanup;
    }
    doc->topic = dup_str(root, "topic");
    doc->pg_schema = dup_str(root, "schema");
    doc->pg_table = dup_str(root, "table");
    doc->version = json_integer_value(json_object_get(root, "version"));
    doc->relid = (uint32_t)json_integer_value(json_object_get(root, "relid"));
    ri = json_string_value(json_object_get(root, "replica_identity"));
    doc->replica_identity = replident_char(ri ? ri : "default");
    cols = json_object_get(root, "columns");
    if (doc->topic == NULL || doc->version <= 0 || !json_is_array(cols)) {
        cdc_error_set(e, rc, "invalid schema document: missing topic, version or columns");
        goto cleanup;
    }
    doc->ncols = json_array_size(cols);
    doc->cols = calloc(doc->ncols ? doc->ncols : 1, sizeof(*doc->cols));
    if (doc->cols == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < doc->ncols; i++) {
        json_t *o = json_array_get(cols, i);
        cdc_schema_col_t *c = &doc->cols[i];
        json_t *ice = json_object_get(o, "iceberg");
        const char *enc = json_string_value(json_object_get(o, "encoding"));
        c->name = dup_str(o, "name");
        c->pg_type = dup_str(o, "pg_type");
        c->pg_oid = (uint32_t)json_integer_value(json_object_get(o, "pg_oid"));
        c->typmod = (int32_t)json_integer_value(json_object_get(o, "typmod"));
        c->nullable = json_is_true(json_object_get(o, "nullable"));
        c->key = (int)json_integer_value(json_object_get(o, "key"));
        c->elem_oid = (uint32_t)json_integer_value(json_object_get(o, "elem_oid"));
        decode_identity(o, c, &ok);
        if (!ok || c->name == NULL || enc == NULL || !col_ice_parse(ice, c) ||
            !cdc_schema_venc_parse(enc, &c->enc)) {
            cdc_error_set(e, rc, "invalid schema document \"%s\": bad column %zu", doc->topic, i);
            goto cleanup;
        }
    }
    doc->last_field_id = (int32_t)json_integer_value(json_object_get(root, "last_field_id"));
    doc->backfill = json_is_true(json_object_get(root, "backfill"));
    doc->resync = json_is_true(json_object_get(root, "resync"));
    if (parts_from_jansson(doc, json_object_get(root, "partitions")) != CDC_OK) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    ret = json_object_get(root, "retired");
    if (json_is_array(ret) && json_array_size(ret) > 0) {
        doc->retired = calloc(json_array_size(ret), sizeof(*doc->retired));
        if (doc->retired == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto cleanup;
        }
        for (size_t i = 0; i < json_array_size(ret); i++) {
            json_t *o = json_array_get(ret, i);
            cdc_schema_col_t *c = &doc->retired[i];
            json_t *ice = json_object_get(o, "iceberg");
            doc->nretired++;
            c->name = dup_str(o, "name");
            c->nullable = true;
            decode_identity(o, c, &ok);
            if (!ok || c->name == NULL || c->field_id <= 0 || !col_ice_parse(ice, c)) {
                cdc_error_set(e, rc, "invalid schema document \"%s\": bad retired column %zu",
                              doc->topic, i);
                goto cleanup;
            }
        }
    }
    rc = CDC_OK;
cleanup:
    json_decref(root);
    if (rc != CDC_OK)
        cdc_schema_doc_free(doc);
    return rc;
}

static bool str_eq(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

static bool same_identity(const cdc_schema_col_t *x, const cdc_schema_col_t *y)
{
    int32_t xv = x->type_version > 1 ? x->type_version : 1;
    int32_t yv = y->type_version > 1 ? y->type_version : 1;
    return x->attnum == y->attnum && x->field_id == y->field_id &&
           str_eq(x->field_name, y->field_name) && xv == yv;
}

bool cdc_schema_doc_same_shape(const cdc_schema_doc_t *a, const cdc_schema_doc_t *b)
{
    if (a->ncols != b->ncols || !str_eq(a->topic, b->topic) ||
        a->replica_identity != b->replica_identity || a->nretired != b->nretired ||
        a->last_field_id != b->last_field_id || a->parts_known != b->parts_known ||
        a->nparts != b->nparts ||
        (a->nparts > 0 && memcmp(a->parts, b->parts, a->nparts * sizeof(*a->parts)) != 0))
        return false;
    for (size_t i = 0; i < a->ncols; i++) {
        const cdc_schema_col_t *x = &a->cols[i], *y = &b->cols[i];
        if (!str_eq(x->name, y->name) || x->pg_oid != y->pg_oid || x->typmod != y->typmod ||
            x->nullable != y->nullable || x->key != y->key || x->ice_type != y->ice_type ||
            x->precision != y->precision || x->scale != y->scale || x->enc != y->enc ||
            !str_eq(x->ice_nested, y->ice_nested) || !same_identity(x, y))
            return false;
    }
    for (size_t i = 0; i < a->nretired; i++) {
        const cdc_schema_col_t *x = &a->retired[i], *y = &b->retired[i];
        if (!str_eq(x->name, y->name) || x->ice_type != y->ice_type ||
            x->precision != y->precision || x->scale != y->scale ||
            !str_eq(x->ice_nested, y->ice_nested) || !same_identity(x, y))
            return false;
    }
    return true;
}

static void free_cols(cdc_schema_col_t *cols, size_t n)
{
    for (size_t i = 0; cols && i < n; i++) {
        free(cols[i].name);
        free(cols[i].pg_type);
        free(cols[i].field_name);
        free(cols[i].ice_nested);
    }
    free(cols);
}

void cdc_schema_doc_free(cdc_schema_doc_t *doc)
{
    if (doc == NULL)
        return;
    free_cols(doc->cols, doc->ncols);
    free_cols(doc->retired, doc->nretired);
    free(doc->parts);
    free(doc->topic);
    free(doc->pg_schema);
    free(doc->pg_table);
    memset(doc, 0, sizeof(*doc));
}

static char *xdup(const char *s, bool *ok)
{
    char *d;
    if (s == NULL)
        return NULL;
    d = strdup(s);
    if (d == NULL)
        *ok = false;
    return d;
}

static void copy_col(cdc_schema_col_t *d, const cdc_schema_col_t *s, bool *ok)
{
    *d = *s;
    d->name = xdup(s->name, ok);
    d->pg_type = xdup(s->pg_type, ok);
    d->field_name = xdup(s->field_name, ok);
    d->ice_nested = xdup(s->ice_nested, ok);
}

cdc_err_t cdc_schema_doc_copy(cdc_schema_doc_t *dst, const cdc_schema_doc_t *src)
{
    bool ok = true;

    *dst = *src;
    dst->topic = xdup(src->topic, &ok);
    dst->pg_schema = xdup(src->pg_schema, &ok);
    dst->pg_table = xdup(src->pg_table, &ok);
    dst->cols = calloc(src->ncols ? src->ncols : 1, sizeof(*dst->cols));
    if (dst->cols == NULL) {
        dst->ncols = 0;
        cdc_schema_doc_free(dst);
        return CDC_ERR_NOMEM;
    }
    for (size_t i = 0; i < src->ncols; i++)
        copy_col(&dst->cols[i], &src->cols[i], &ok);
    dst->retired = NULL;
    dst->nretired = 0;
    dst->parts = NULL;
    if (src->nparts > 0) {
        if ((dst->parts = malloc(src->nparts * sizeof(*dst->parts))) == NULL)
            ok = false;
        else
            memcpy(dst->parts, src->parts, src->nparts * sizeof(*dst->parts));
    }
    if (src->nretired > 0) {
        dst->retired = calloc(src->nretired, sizeof(*dst->retired));
        if (dst->retired == NULL)
            ok = false;
        for (size_t i = 0; dst->retired != NULL && i < src->nretired; i++) {
            copy_col(&dst->retired[i], &src->retired[i], &ok);
            dst->nretired++;
        }
    }
    if (!ok) {
        cdc_schema_doc_free(dst);
        return CDC_ERR_NOMEM;
    }
    return CDC_OK;
}

cdc_err_t cdc_schema_doc_to_iceberg(const cdc_schema_doc_t *doc, cdc_ice_schema_t *out,
                                    cdc_error_t *e)
{
    size_t n = doc->ncols + doc->nretired;
    memset(out, 0, sizeof(*out));
    out->fields = calloc(n ? n : 1, sizeof(*out->fields));
    out->identifier_ids = calloc(doc->ncols ? doc->ncols : 1, sizeof(*out->identifier_ids));
    if (out->fields == NULL || out->identifier_ids == NULL)
        goto nomem;
    out->schema_id = 0;
    for (size_t i = 0; i < n; i++) {
        bool live = i < doc->ncols;
        const cdc_schema_col_t *c = live ? &doc->cols[i] : &doc->retired[i - doc->ncols];
        cdc_ice_field_t *f = &out->fields[i];
        f->id = c->field_id > 0 ? c->field_id : (int32_t)(i + 1);
        f->name = strdup(live ? cdc_schema_col_field_name(c) : c->name);
        if (f->name == NULL)
            goto nomem;
        out->nfields = i + 1;
        f->type = c->ice_type;
        f->precision = c->precision;
        f->scale = c->scale;
        f->required = live && c->key > 0;
        if (c->ice_nested != NULL && (f->nested = strdup(c->ice_nested)) == NULL)
            goto nomem;
    }
    for (int pos = 1; pos <= (int)doc->ncols; pos++)
        for (size_t i = 0; i < doc->ncols; i++)
            if (doc->cols[i].key == pos)
                out->identifier_ids[out->nidentifier++] = out->fields[i].id;
    return CDC_OK;
nomem:
    cdc_schema_ice_free(out);
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
}

void cdc_schema_ice_free(cdc_ice_schema_t *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; s->fields && i < s->nfields; i++) {
        free(s->fields[i].name);
        free(s->fields[i].doc);
        free(s->fields[i].nested);
    }
    free(s->fields);
    free(s->identifier_ids);
    memset(s, 0, sizeof(*s));
}

const char *cdc_schema_record_key(const char *topic, int64_t version, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%" PRId64, topic, version);
    return buf;
}

bool cdc_schema_record_key_parse(const char *key, size_t len, char *topic, size_t size,
                                 int64_t *version)
{
    size_t slash = len;
    int64_t v = 0;

    for (size_t i = len; i > 0; i--) {
        if (key[i - 1] == '/') {
            slash = i - 1;
            break;
        }
    }
    if (slash == len || slash == 0 || slash + 1 == len || slash + 1 > size)
        return false;
    for (size_t i = slash + 1; i < len; i++) {
        if (key[i] < '0' || key[i] > '9' || v > INT64_MAX / 10)
            return false;
        v = v * 10 + (key[i] - '0');
    }
    memcpy(topic, key, slash);
    topic[slash] = '\0';
    *version = v;
    return v > 0;
}
