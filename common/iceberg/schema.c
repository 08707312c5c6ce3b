/*
 * Iceberg schema <-> JSON mapping and schema/data-file memory helpers (see
 * schema.h). The JSON shape is the Iceberg table spec's schema object, used
 * verbatim in table metadata, manifests and the Parquet `iceberg.schema` key.
 *
 * A call circle of two files (docs/development.md, "Call circles"): schema.c builds a
 * nested field's type tree with nested.c, and nested.c parses the types of elements and
 * members with schema.c's type parser.
 */
#include "common/iceberg/schema.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/iceberg/nested.h"
#include "common/iceberg/partition.h"

static const char *const type_names[CDC_ICE__TYPE_COUNT] = {
    [CDC_ICE_BOOLEAN] = "boolean",     [CDC_ICE_INT] = "int",
    [CDC_ICE_LONG] = "long",           [CDC_ICE_FLOAT] = "float",
    [CDC_ICE_DOUBLE] = "double",       [CDC_ICE_DECIMAL] = "decimal",
    [CDC_ICE_STRING] = "string",       [CDC_ICE_BINARY] = "binary",
    [CDC_ICE_DATE] = "date",           [CDC_ICE_TIME] = "time",
    [CDC_ICE_TIMESTAMP] = "timestamp", [CDC_ICE_TIMESTAMPTZ] = "timestamptz",
    [CDC_ICE_UUID] = "uuid",           [CDC_ICE_LIST] = "list",
    [CDC_ICE_STRUCT] = "struct",
};

const char *cdc_ice_type_string(const cdc_ice_field_t *field, char *buf, size_t cap)
{
    if (cap == 0)
        return buf;
    if ((int)field->type < 0 || field->type >= CDC_ICE__TYPE_COUNT)
        snprintf(buf, cap, "unknown");
    else if (field->type == CDC_ICE_DECIMAL)
        snprintf(buf, cap, "decimal(%d,%d)", (int)field->precision, (int)field->scale);
    else
        snprintf(buf, cap, "%s", type_names[field->type]);
    return buf;
}

bool cdc_ice_type_is_nested(cdc_ice_type_t t)
{
    return t == CDC_ICE_LIST || t == CDC_ICE_STRUCT;
}

bool cdc_ice_type_equal(const cdc_ice_field_t *a, const cdc_ice_field_t *b)
{
    if (a->type != b->type)
        return false;
    if (cdc_ice_type_is_nested(a->type))
        return a->nested != NULL && b->nested != NULL && strcmp(a->nested, b->nested) == 0;
    return a->type != CDC_ICE_DECIMAL || (a->precision == b->precision && a->scale == b->scale);
}

json_t *cdc_ice_field_type_jansson(const cdc_ice_field_t *f, char *buf, size_t cap)
{
    if (cdc_ice_type_is_nested(f->type) && f->nested != NULL) {
        json_error_t jerr;
        return json_loads(f->nested, 0, &jerr);
    }
    return json_string(cdc_ice_type_string(f, buf, cap));
}

cdc_err_t cdc_ice_field_type_from_jansson(const json_t *type, cdc_ice_field_t *f, cdc_error_t *err)
{
    cdc_err_t rc;

    free(f->nested);
    f->nested = NULL;
    if (json_is_object(type)) {
        const char *kind = json_string_value(json_object_get(type, "type"));
        rc = cdc_ice_nested_check_jansson(type, err);
        if (rc != CDC_OK)
            return cdc_error_prefix(err, "field \"%s\"", f->name ? f->name : "?");
        f->type = strcmp(kind, "list") == 0 ? CDC_ICE_LIST : CDC_ICE_STRUCT;
        f->precision = f->scale = 0;
        f->nested = json_dumps(type, JSON_COMPACT | JSON_PRESERVE_ORDER);
        return f->nested ? CDC_OK : cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    }
    rc =
        json_is_string(type) ? cdc_ice_type_parse(json_string_value(type), f) : CDC_ERR_UNSUPPORTED;
    if (rc == CDC_OK && cdc_ice_type_is_nested(f->type))
        rc = CDC_ERR_INVALID; /* a nested type needs its element or fields */
    if (rc != CDC_OK)
        return cdc_error_set(err, rc, "iceberg schema field \"%s\" has unsupported type \"%s\"",
                             f->name ? f->name : "?",
                             json_is_string(type) ? json_string_value(type) : "?");
    return CDC_OK;
}

cdc_err_t cdc_ice_type_parse(const char *text, cdc_ice_field_t *field)
{
    int p, s, n = 0;

    if (text == NULL)
        return CDC_ERR_INVALID;
    if (sscanf(text, " decimal ( %d , %d ) %n", &p, &s, &n) == 2 && text[n] == '\0') {
        if (p < 1 || p > 38 || s < 0 || s > p)
            return CDC_ERR_INVALID;
        field->type = CDC_ICE_DECIMAL;
        field->precision = p;
        field->scale = s;
        return CDC_OK;
    }
    for (int t = 0; t < CDC_ICE__TYPE_COUNT; t++) {
        if (t != CDC_ICE_DECIMAL && strcmp(text, type_names[t]) == 0) {
            field->type = (cdc_ice_type_t)t;
            field->precision = 0;
            field->scale = 0;
            return CDC_OK;
        }
    }
    return CDC_ERR_UNSUPPORTED;
}

json_t *cdc_ice_schema_to_jansson(const cdc_ice_schema_t *schema)
{
    json_t *obj = json_object();
    json_t *fields = json_array();
    json_t *ids = json_array();
    char tbuf[40];

    if (obj == NULL || fields == NULL || ids == NULL)
        goto fail;
    if (json_object_set_new(obj, "type", json_string("struct")) != 0 ||
        json_object_set_new(obj, "schema-id", json_integer(schema->schema_id)) != 0)
        goto fail;
    for (size_t i = 0; i < schema->nfields; i++) {
        const cdc_ice_field_t *f = &schema->fields[i];
        json_t *fo = json_object();

        if (fo == NULL || json_array_append_new(fields, fo) != 0)
            goto fail;
        if (json_object_set_new(fo, "id", json_integer(f->id)) != 0 ||
            json_object_set_new(fo, "name", json_string(f->name ? f->name : "")) != 0 ||
            json_object_set_new(fo, "required", json_boolean(f->required)) != 0 ||
            json_object_set_new(fo, "type", cdc_ice_field_type_jansson(f, tbuf, sizeof(tbuf))) != 0)
            goto fail;
        if (f->doc != NULL && json_object_set_new(fo, "doc", json_string(f->doc)) != 0)
            goto fail;
    }
    json_object_set_new(obj, "fields", fields);
    fields = NULL;
    for (size_t i = 0; i < schema->nidentifier; i++) {
        if (json_array_append_new(ids, json_integer(schema->identifier_ids[i])) != 0)
            goto fail;
    }
    json_object_set_new(obj, "identifier-field-ids", ids);
    return obj;
fail:
    json_decref(obj);
    json_decref(fields);
    json_decref(ids);
    return NULL;
}

char *cdc_ice_schema_to_json(const cdc_ice_schema_t *schema)
{
    json_t *obj = cdc_ice_schema_to_jansson(schema);
    char *text;

    if (obj == NULL)
        return NULL;
    text = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    return text;
}

cdc_err_t cdc_ice_schema_from_jansson(const json_t *obj, cdc_ice_schema_t *out, cdc_error_t *err)
{
    const json_t *fields, *ids, *sid;
    cdc_err_t rc;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj))
        return cdc_error_set(err, CDC_ERR_INVALID, "iceberg schema is not a JSON object");
    sid = json_object_get(obj, "schema-id");
    out->schema_id = json_is_integer(sid) ? (int32_t)json_integer_value(sid) : 0;
    fields = json_object_get(obj, "fields");
    if (!json_is_array(fields))
        return cdc_error_set(err, CDC_ERR_INVALID, "iceberg schema has no \"fields\" array");
    out->nfields = json_array_size(fields);
    out->fields = calloc(out->nfields ? out->nfields : 1, sizeof(*out->fields));
    if (out->fields == NULL) {
        rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < out->nfields; i++) {
        const json_t *fo = json_array_get(fields, i);
        const json_t *id = json_object_get(fo, "id"), *name = json_object_get(fo, "name");
        const json_t *req = json_object_get(fo, "required"), *type = json_object_get(fo, "type");
        const json_t *doc = json_object_get(fo, "doc");
        cdc_ice_field_t *f = &out->fields[i];

        if (!json_is_integer(id) || !json_is_string(name)) {
            rc = cdc_error_set(err, CDC_ERR_INVALID,
                               "iceberg schema field %zu has no integer \"id\" or string \"name\"",
                               i);
            goto fail;
        }
        f->id = (int32_t)json_integer_value(id);
        f->required = json_is_true(req);
        f->name = strdup(json_string_value(name));
        f->doc = json_is_string(doc) ? strdup(json_string_value(doc)) : NULL;
        if (f->name == NULL || (json_is_string(doc) && f->doc == NULL)) {
            rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        rc = cdc_ice_field_type_from_jansson(type, f, err);
        if (rc != CDC_OK)
            goto fail;
    }
    ids = json_object_get(obj, "identifier-field-ids");
    if (json_is_array(ids) && json_array_size(ids) > 0) {
        out->nidentifier = json_array_size(ids);
        out->identifier_ids = calloc(out->nidentifier, sizeof(int32_t));
        if (out->identifier_ids == NULL) {
            rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        for (size_t i = 0; i < out->nidentifier; i++)
            out->identifier_ids[i] = (int32_t)json_integer_value(json_array_get(ids, i));
    }
    return CDC_OK;
fail:
    cdc_ice_schema_free(out);
    return rc;
}

cdc_err_t cdc_ice_schema_from_json(const char *text, cdc_ice_schema_t *out, cdc_error_t *err)
{
    json_error_t jerr;
    json_t *obj = json_loads(text, 0, &jerr);
    cdc_err_t rc;

    if (obj == NULL) {
        memset(out, 0, sizeof(*out));
        return cdc_error_set(err, CDC_ERR_INVALID, "could not parse iceberg schema JSON: %s",
                             jerr.text);
    }
    rc = cdc_ice_schema_from_jansson(obj, out, err);
    json_decref(obj);
    return rc;
}

cdc_err_t cdc_ice_schema_copy(cdc_ice_schema_t *dst, const cdc_ice_schema_t *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->schema_id = src->schema_id;
    dst->fields = calloc(src->nfields ? src->nfields : 1, sizeof(*dst->fields));
    if (dst->fields == NULL)
        goto fail;
    dst->nfields = src->nfields;
    for (size_t i = 0; i < src->nfields; i++) {
        dst->fields[i] = src->fields[i];
        dst->fields[i].name = strdup(src->fields[i].name ? src->fields[i].name : "");
        dst->fields[i].doc = src->fields[i].doc ? strdup(src->fields[i].doc) : NULL;
        dst->fields[i].nested = src->fields[i].nested ? strdup(src->fields[i].nested) : NULL;
        if (dst->fields[i].name == NULL || (src->fields[i].doc && dst->fields[i].doc == NULL) ||
            (src->fields[i].nested && dst->fields[i].nested == NULL))
            goto fail;
    }
    if (src->nidentifier > 0) {
        dst->identifier_ids = malloc(src->nidentifier * sizeof(int32_t));
        if (dst->identifier_ids == NULL)
            goto fail;
        memcpy(dst->identifier_ids, src->identifier_ids, src->nidentifier * sizeof(int32_t));
        dst->nidentifier = src->nidentifier;
    }
    return CDC_OK;
fail:
    cdc_ice_schema_free(dst);
    return CDC_ERR_NOMEM;
}

void cdc_ice_schema_free(cdc_ice_schema_t *schema)
{
    if (schema == NULL)
        return;
    for (size_t i = 0; schema->fields != NULL && i < schema->nfields; i++) {
        free(schema->fields[i].name);
        free(schema->fields[i].doc);
        free(schema->fields[i].nested);
    }
    free(schema->fields);
    free(schema->identifier_ids);
    memset(schema, 0, sizeof(*schema));
}

bool cdc_ice_type_promotable(const cdc_ice_field_t *from, const cdc_ice_field_t *to)
{
    if (cdc_ice_type_is_nested(from->type) || cdc_ice_type_is_nested(to->type))
        return cdc_ice_type_equal(from, to);
    if (from->type == to->type)
        return from->type != CDC_ICE_DECIMAL ||
               (from->scale == to->scale && to->precision >= from->precision);
    return (from->type == CDC_ICE_INT && to->type == CDC_ICE_LONG) ||
           (from->type == CDC_ICE_FLOAT && to->type == CDC_ICE_DOUBLE);
}

static int32_t node_max_id(const cdc_ice_node_t *n)
{
    int32_t m = n->f.id;
    for (size_t i = 0; i < n->nkids; i++) {
        int32_t k = node_max_id(&n->kids[i]);
        if (k > m)
            m = k;
    }
    return m;
}

int32_t cdc_ice_field_max_id(const cdc_ice_field_t *f)
{
    cdc_ice_node_t n;
    cdc_error_t e;
    int32_t m = f->id;

    if (!cdc_ice_type_is_nested(f->type) || cdc_ice_node_build(f, &n, &e) != CDC_OK)
        return m;
    m = node_max_id(&n);
    cdc_ice_node_free(&n);
    return m;
}

int cdc_ice_schema_find(const cdc_ice_schema_t *schema, int32_t field_id)
{
    for (size_t i = 0; i < schema->nfields; i++) {
        if (schema->fields[i].id == field_id)
            return (int)i;
    }
    return -1;
}

int cdc_ice_schema_find_name(const cdc_ice_schema_t *schema, const char *name)
{
    for (size_t i = 0; schema != NULL && i < schema->nfields; i++)
        if (strcmp(schema->fields[i].name, name) == 0)
            return (int)i;
    return -1;
}

static void *dup_array(const void *src, size_t n, size_t size, bool *ok)
{
    void *p;

    if (src == NULL || n == 0)
        return NULL;
    p = malloc(n * size);
    if (p == NULL) {
        *ok = false;
        return NULL;
    }
    memcpy(p, src, n * size);
    return p;
}

cdc_err_t cdc_ice_data_file_copy(cdc_ice_data_file_t *dst, const cdc_ice_data_file_t *src)
{
    bool ok = true;

    *dst = *src;
    dst->path = NULL;
    dst->equality_ids = dup_array(src->equality_ids, src->nequality_ids, sizeof(int32_t), &ok);
    dst->stats = dup_array(src->stats, src->nstats, sizeof(cdc_ice_col_stats_t), &ok);
    dst->split_offsets = dup_array(src->split_offsets, src->nsplit_offsets, sizeof(int64_t), &ok);
    dst->partition = NULL;
    if (cdc_ice_part_values_copy(&dst->partition, src->partition, src->npartition) != CDC_OK)
        ok = false;
    if (src->path != NULL) {
        dst->path = strdup(src->path);
        ok = ok && dst->path != NULL;
    }
    if (!ok) {
        cdc_ice_data_file_clear(dst);
        return CDC_ERR_NOMEM;
    }
    return CDC_OK;
}

void cdc_ice_data_file_clear(cdc_ice_data_file_t *df)
{
    if (df == NULL)
        return;
    free(df->path);
    free(df->equality_ids);
    free(df->stats);
    free(df->split_offsets);
    cdc_ice_part_values_free(df->partition, df->npartition);
    memset(df, 0, sizeof(*df));
}
