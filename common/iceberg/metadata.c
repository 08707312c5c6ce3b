/*
 * Table metadata JSON (see metadata.h). Field names and required keys follow the
 * Iceberg table spec, format version 2; schemas go through schema.c so the JSON
 * mapping of a schema exists once in the project.
 */
#include "common/iceberg/metadata.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/iceberg/schema.h"

static cdc_err_t oom(cdc_error_t *e)
{
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory in table metadata");
}

const char *cdc_ice_props_get(const cdc_ice_props_t *props, const char *key)
{
    for (size_t i = 0; i < props->n; i++)
        if (strcmp(props->keys[i], key) == 0)
            return props->values[i];
    return NULL;
}

cdc_err_t cdc_ice_props_set(cdc_ice_props_t *props, const char *key, const char *value)
{
    char *v = strdup(value);
    if (!v)
        return CDC_ERR_NOMEM;
    for (size_t i = 0; i < props->n; i++) {
        if (strcmp(props->keys[i], key) == 0) {
            free(props->values[i]);
            props->values[i] = v;
            return CDC_OK;
        }
    }
    char *k = strdup(key);
    if (!k || cdc_array_resize(props->keys, props->n + 1) != CDC_OK ||
        cdc_array_resize(props->values, props->n + 1) != CDC_OK) {
        free(k);
        free(v);
        return CDC_ERR_NOMEM;
    }
    props->keys[props->n] = k;
    props->values[props->n] = v;
    props->n++;
    return CDC_OK;
}

cdc_err_t cdc_ice_props_copy(cdc_ice_props_t *dst, const cdc_ice_props_t *src)
{
    /* src has unique keys: no lookups, two allocations for the arrays (every snapshot's
     * summary is copied on every commit) */
    memset(dst, 0, sizeof(*dst));
    if (src->n == 0)
        return CDC_OK;
    dst->keys = calloc(src->n, sizeof(char *));
    dst->values = calloc(src->n, sizeof(char *));
    if (dst->keys == NULL || dst->values == NULL) {
        cdc_ice_props_free(dst);
        return CDC_ERR_NOMEM;
    }
    for (size_t i = 0; i < src->n; i++) {
        dst->n = i + 1;
        if ((dst->keys[i] = strdup(src->keys[i])) == NULL ||
            (dst->values[i] = strdup(src->values[i])) == NULL) {
            cdc_ice_props_free(dst);
            return CDC_ERR_NOMEM;
        }
    }
    return CDC_OK;
}

void cdc_ice_props_free(cdc_ice_props_t *props)
{
    for (size_t i = 0; i < props->n; i++) {
        free(props->keys[i]);
        free(props->values[i]);
    }
    free(props->keys);
    free(props->values);
    memset(props, 0, sizeof(*props));
}

/* ---- parse ---------------------------------------------------------------------- */

static cdc_err_t req_int(json_t *root, const char *key, int64_t *out, cdc_error_t *e)
{
    json_t *v = json_object_get(root, key);
    if (!json_is_integer(v))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table metadata has no integer \"%s\"", key);
    *out = json_integer_value(v);
    return CDC_OK;
}

static int64_t opt_int(json_t *root, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(root, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static cdc_err_t parse_props(json_t *obj, cdc_ice_props_t *out)
{
    const char *k;
    json_t *v;
    if (!json_is_object(obj))
        return CDC_OK;
    json_object_foreach(obj, k, v)
    {
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        char buf[32];
        if (!s && json_is_integer(v)) {
            snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
            s = buf;
        }
        if (s && cdc_ice_props_set(out, k, s) != CDC_OK)
            return CDC_ERR_NOMEM;
    }
    return CDC_OK;
}

/*
 * partition-specs (v1: the single "partition-spec" field list as spec 0) and
 * sort-orders, each with its default; a document without them has the unpartitioned
 * spec 0 and the unsorted order 0.
 */
static cdc_err_t parse_layout(json_t *root, cdc_ice_metadata_t *out, cdc_error_t *e)
{
    json_t *specs = json_object_get(root, "partition-specs"), *orders, *v1 = NULL, *o;
    size_t i, n;
    cdc_err_t rc;

    if (!json_is_array(specs) && json_is_array(json_object_get(root, "partition-spec"))) {
        v1 = json_pack("[{s:i, s:O}]", "spec-id", 0, "fields",
                       json_object_get(root, "partition-spec"));
        if (v1 == NULL)
            return oom(e);
        specs = v1;
    }
    n = json_array_size(specs);
    if ((out->specs = calloc(n ? n : 1, sizeof(*out->specs))) == NULL) {
        json_decref(v1);
        return oom(e);
    }
    out->nspecs = n ? 0 : 1; /* none listed: the unpartitioned spec 0 */
    json_array_foreach(specs, i, o)
    {
        rc = cdc_ice_partition_spec_from_jansson(o, &out->specs[i], e);
        if (rc != CDC_OK) {
            json_decref(v1);
            return rc;
        }
        out->nspecs++;
    }
    json_decref(v1);
    out->default_spec_id = (int32_t)opt_int(root, "default-spec-id", out->specs[0].spec_id);
    out->last_partition_id = (int32_t)opt_int(root, "last-partition-id", 999);
    for (i = 0; i < out->nspecs; i++)
        for (size_t k = 0; k < out->specs[i].nfields; k++)
            if (out->specs[i].fields[k].field_id > out->last_partition_id)
                out->last_partition_id = out->specs[i].fields[k].field_id;
    if (!cdc_ice_metadata_spec(out, out->default_spec_id))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table metadata has no partition spec %d",
                             (int)out->default_spec_id);

    orders = json_object_get(root, "sort-orders");
    n = json_array_size(orders);
    if ((out->orders = calloc(n ? n : 1, sizeof(*out->orders))) == NULL)
        return oom(e);
    out->norders = n ? 0 : 1; /* none listed: the unsorted order 0 */
    json_array_foreach(orders, i, o)
    {
        if ((rc = cdc_ice_sort_order_from_jansson(o, &out->orders[i], e)) != CDC_OK)
            return rc;
        out->norders++;
    }
    out->default_sort_order_id =
        (int32_t)opt_int(root, "default-sort-order-id", out->orders[0].order_id);
    if (!cdc_ice_metadata_sort_order(out, out->default_sort_order_id))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table metadata has no sort order %d",
                             (int)out->default_sort_order_id);
    return CDC_OK;
}

cdc_err_t cdc_ice_metadata_parse(const char *json, size_t len, cdc_ice_metadata_t *out,
                                 cdc_error_t *e)
{
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    cdc_err_t rc = CDC_OK;
    int64_t v = 0;
    if (!root || !json_is_object(root)) {
        rc = cdc_error_set(e, CDC_ERR_CORRUPT, "could not parse table metadata: %s (line %d)",
                           root ? "not an object" : je.text, je.line);
        goto done;
    }
    if ((rc = req_int(root, "format-version", &v, e)) != CDC_OK)
        goto done;
    out->format_version = (int)v;
    if (v != 2 && v != 1) {
        rc = cdc_error_set(e, CDC_ERR_UNSUPPORTED, "table format version %lld is not supported",
                           (long long)v);
        goto done;
    }
    const char *uuid = json_string_value(json_object_get(root, "table-uuid"));
    const char *loc = json_string_value(json_object_get(root, "location"));
    if (!loc) {
        rc = cdc_error_set(e, CDC_ERR_CORRUPT, "table metadata has no \"location\"");
        goto done;
    }
    snprintf(out->table_uuid, sizeof(out->table_uuid), "%s", uuid ? uuid : "");
    if (!(out->location = strdup(loc))) {
        rc = oom(e);
        goto done;
    }
    out->last_sequence_number = opt_int(root, "last-sequence-number", 0);
    if ((rc = req_int(root, "last-updated-ms", &out->last_updated_ms, e)) != CDC_OK ||
        (rc = req_int(root, "last-column-id", &v, e)) != CDC_OK)
        goto done;
    out->last_column_id = (int32_t)v;

    json_t *schemas = json_object_get(root, "schemas");
    if (!json_is_array(schemas)) {
        json_t *one = json_object_get(root, "schema"); /* v1 */
        if (!json_is_object(one)) {
            rc = cdc_error_set(e, CDC_ERR_CORRUPT, "table metadata has no \"schemas\"");
            goto done;
        }
        out->schemas = calloc(1, sizeof(cdc_ice_schema_t));
        if (!out->schemas) {
            rc = oom(e);
            goto done;
        }
        if ((rc = cdc_ice_schema_from_jansson(one, &out->schemas[0], e)) != CDC_OK)
            goto done;
        out->nschemas = 1;
    } else {
        size_t n = json_array_size(schemas);
        out->schemas = calloc(n ? n : 1, sizeof(cdc_ice_schema_t));
        if (!out->schemas) {
            rc = oom(e);
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            if ((rc = cdc_ice_schema_from_jansson(json_array_get(schemas, i), &out->schemas[i],
                                                  e)) != CDC_OK)
                goto done;
            out->nschemas++;
        }
    }
    out->current_schema_id =
        (int32_t)opt_int(root, "current-schema-id", out->nschemas ? out->schemas[0].schema_id : 0);

    if ((rc = parse_layout(root, out, e)) != CDC_OK)
        goto done;
    size_t i;
    if ((rc = parse_props(json_object_get(root, "properties"), &out->properties)) != CDC_OK) {
        rc = oom(e);
        goto done;
    }
    json_t *cur = json_object_get(root, "current-snapshot-id");
    out->current_snapshot_id = json_is_integer(cur) ? json_integer_value(cur) : -1;

    json_t *snaps = json_object_get(root, "snapshots"), *s;
    if (json_array_size(snaps) > 0) {
        out->snapshots = calloc(json_array_size(snaps), sizeof(cdc_ice_snapshot_t));
        if (!out->snapshots) {
            rc = oom(e);
            goto done;
        }
    }
    json_array_foreach(snaps, i, s)
    {
        cdc_ice_snapshot_t *sn = &out->snapshots[out->nsnapshots++];
        sn->parent_id = -1;
        sn->schema_id = -1;
        const char *ml = json_string_value(json_object_get(s, "manifest-list"));
        if ((rc = req_int(s, "snapshot-id", &sn->snapshot_id, e)) != CDC_OK ||
            (rc = req_int(s, "timestamp-ms", &sn->timestamp_ms, e)) != CDC_OK)
            goto done;
        if (!ml) {
            rc = cdc_error_set(e, CDC_ERR_UNSUPPORTED, "snapshot %lld has no manifest-list",
                               (long long)sn->snapshot_id);
            goto done;
        }
        sn->parent_id = opt_int(s, "parent-snapshot-id", -1);
        sn->sequence_number = opt_int(s, "sequence-number", 0);
        sn->schema_id = (int32_t)opt_int(s, "schema-id", -1);
        if (!(sn->manifest_list = strdup(ml)) ||
            parse_props(json_object_get(s, "summary"), &sn->summary) != CDC_OK) {
            rc = oom(e);
            goto done;
        }
    }
    json_t *slog = json_object_get(root, "snapshot-log"), *le;
    if (json_array_size(slog) > 0) {
        out->snapshot_log = calloc(json_array_size(slog), sizeof(cdc_ice_snapshot_log_t));
        if (!out->snapshot_log) {
            rc = oom(e);
            goto done;
        }
    }
    json_array_foreach(slog, i, le)
    {
        out->snapshot_log[out->nsnapshot_log].timestamp_ms = opt_int(le, "timestamp-ms", 0);
        out->snapshot_log[out->nsnapshot_log].snapshot_id = opt_int(le, "snapshot-id", -1);
        out->nsnapshot_log++;
    }
    json_t *mlog = json_object_get(root, "metadata-log");
    if (json_array_size(mlog) > 0) {
        out->metadata_log = calloc(json_array_size(mlog), sizeof(cdc_ice_metadata_log_t));
        if (!out->metadata_log) {
            rc = oom(e);
            goto done;
        }
    }
    json_array_foreach(mlog, i, le)
    {
        const char *f = json_string_value(json_object_get(le, "metadata-file"));
        if (!f)
            continue;
        cdc_ice_metadata_log_t *m = &out->metadata_log[out->nmetadata_log];
        m->timestamp_ms = opt_int(le, "timestamp-ms", 0);
        if (!(m->file = strdup(f))) {
            rc = oom(e);
            goto done;
        }
        out->nmetadata_log++;
    }
done:
    json_decref(root);
    if (rc != CDC_OK)
        cdc_ice_metadata_free(out);
    return rc;
}

/* ---- write ---------------------------------------------------------------------- */

static json_t *props_json(const cdc_ice_props_t *p)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < p->n; i++) {
        if (json_object_set_new(o, p->keys[i], json_string(p->values[i])) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* json_object_set_new that records failure in *ok. */
static void put(json_t *o, const char *k, json_t *v, bool *ok)
{
    if (!v || json_object_set_new(o, k, v) != 0)
        *ok = false;
}

static void append(json_t *a, json_t *v, bool *ok)
{
    if (!v || json_array_append_new(a, v) != 0)
        *ok = false;
}

cdc_err_t cdc_ice_metadata_write(const cdc_ice_metadata_t *md, char **json, cdc_error_t *e)
{
    bool ok = true;
    json_t *root = json_object();
    if (!root)
        return oom(e);
    put(root, "format-version", json_integer(md->format_version ? md->format_version : 2), &ok);
    put(root, "table-uuid", json_string(md->table_uuid), &ok);
    put(root, "location", json_string(md->location), &ok);
    put(root, "last-sequence-number", json_integer(md->last_sequence_number), &ok);
    put(root, "last-updated-ms", json_integer(md->last_updated_ms), &ok);
    put(root, "last-column-id", json_integer(md->last_column_id), &ok);
    put(root, "current-schema-id", json_integer(md->current_schema_id), &ok);
    json_t *schemas = json_array();
    for (size_t i = 0; schemas && i < md->nschemas; i++)
        append(schemas, cdc_ice_schema_to_jansson(&md->schemas[i]), &ok);
    put(root, "schemas", schemas, &ok);
    put(root, "default-spec-id", json_integer(md->default_spec_id), &ok);
    /* metadata built without specs or orders has the unpartitioned / unsorted default */
    cdc_ice_partition_spec_t unpartitioned = {.spec_id = md->default_spec_id};
    cdc_ice_sort_order_t unsorted = {.order_id = md->default_sort_order_id};
    json_t *specs = json_array();
    for (size_t i = 0; specs && i < (md->nspecs ? md->nspecs : 1); i++)
        append(specs,
               cdc_ice_partition_spec_to_jansson(md->nspecs ? &md->specs[i] : &unpartitioned), &ok);
    put(root, "partition-specs", specs, &ok);
    put(root, "last-partition-id", json_integer(md->last_partition_id), &ok);
    put(root, "default-sort-order-id", json_integer(md->default_sort_order_id), &ok);
    json_t *orders = json_array();
    for (size_t i = 0; orders && i < (md->norders ? md->norders : 1); i++)
        append(orders, cdc_ice_sort_order_to_jansson(md->norders ? &md->orders[i] : &unsorted),
               &ok);
    put(root, "sort-orders", orders, &ok);
    put(root, "properties", props_json(&md->properties), &ok);
    put(root, "current-snapshot-id", json_integer(md->current_snapshot_id), &ok);
    json_t *refs = json_object();
    if (refs && md->current_snapshot_id >= 0)
        put(refs, "main",
            json_pack("{s:I, s:s}", "snapshot-id", (json_int_t)md->current_snapshot_id, "type",
                      "branch"),
            &ok);
    put(root, "refs", refs, &ok);
    /* The snapshots go in as "[]" and are spliced in below from their cached JSON. */
    json_t *snaps = json_array();
    size_t snaps_len = 2;
    for (size_t i = 0; snaps && i < md->nsnapshots; i++) {
        cdc_ice_snapshot_t *s = (cdc_ice_snapshot_t *)&md->snapshots[i]; /* (the cache) */
        if (s->json != NULL) {
            snaps_len += strlen(s->json) + 1;
            continue;
        }
        json_t *o = json_object();
        if (!o) {
            ok = false;
            break;
        }
        put(o, "sequence-number", json_integer(s->sequence_number), &ok);
        put(o, "snapshot-id", json_integer(s->snapshot_id), &ok);
        if (s->parent_id >= 0)
            put(o, "parent-snapshot-id", json_integer(s->parent_id), &ok);
        put(o, "timestamp-ms", json_integer(s->timestamp_ms), &ok);
        put(o, "summary", props_json(&s->summary), &ok);
        put(o, "manifest-list", json_string(s->manifest_list), &ok);
        if (s->schema_id >= 0)
            put(o, "schema-id", json_integer(s->schema_id), &ok);
        if (ok && (s->json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL)
            ok = false;
        json_decref(o);
        if (ok)
            snaps_len += strlen(s->json) + 1;
    }
    put(root, "snapshots", snaps, &ok);
    put(root, "statistics", json_array(), &ok);
    put(root, "partition-statistics", json_array(), &ok);
    json_t *slog = json_array();
    for (size_t i = 0; slog && i < md->nsnapshot_log; i++)
        append(slog,
               json_pack("{s:I, s:I}", "timestamp-ms", (json_int_t)md->snapshot_log[i].timestamp_ms,
                         "snapshot-id", (json_int_t)md->snapshot_log[i].snapshot_id),
               &ok);
    put(root, "snapshot-log", slog, &ok);
    json_t *mlog = json_array();
    for (size_t i = 0; mlog && i < md->nmetadata_log; i++)
        append(mlog,
               json_pack("{s:I, s:s}", "timestamp-ms", (json_int_t)md->metadata_log[i].timestamp_ms,
                         "metadata-file", md->metadata_log[i].file),
               &ok);
    put(root, "metadata-log", mlog, &ok);
    char *doc = ok ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!doc)
        return oom(e);
    /* Only the top-level key can appear unescaped like this (keys and strings inside
     * values have their quotes escaped, and no other "snapshots" key has an array). */
    static const char marker[] = "\"snapshots\":[]";
    char *at = strstr(doc, marker), *out, *p;
    if (at == NULL) {
        free(doc);
        return cdc_error_set(e, CDC_ERR_INTERNAL, "table metadata lost its snapshot list");
    }
    size_t head = (size_t)(at - doc) + sizeof(marker) - 2; /* up to and including '[' */
    size_t tail = strlen(at + sizeof(marker) - 2);         /* from ']' on */
    if ((out = malloc(head + snaps_len + tail + 1)) == NULL) {
        free(doc);
        return oom(e);
    }
    memcpy(out, doc, head);
    p = out + head;
    for (size_t i = 0; i < md->nsnapshots; i++) {
        size_t n = strlen(md->snapshots[i].json);
        if (i > 0)
            *p++ = ',';
        memcpy(p, md->snapshots[i].json, n);
        p += n;
    }
    memcpy(p, at + sizeof(marker) - 2, tail + 1);
    free(doc);
    *json = out;
    return CDC_OK;
}

cdc_err_t cdc_ice_metadata_copy(cdc_ice_metadata_t *dst, const cdc_ice_metadata_t *src)
{
    /* field by field: this runs on every commit, on metadata that grows with history */
    *dst = *src;
    dst->location = NULL;
    dst->schemas = NULL;
    dst->nschemas = 0;
    dst->specs = NULL;
    dst->nspecs = 0;
    dst->orders = NULL;
    dst->norders = 0;
    memset(&dst->properties, 0, sizeof(dst->properties));
    dst->snapshots = NULL;
    dst->nsnapshots = 0;
    dst->snapshot_log = NULL;
    dst->nsnapshot_log = 0;
    dst->metadata_log = NULL;
    dst->nmetadata_log = 0;
    if (!(dst->location = strdup(src->location ? src->location : "")))
        goto fail;
    if (src->nschemas) {
        if (!(dst->schemas = calloc(src->nschemas, sizeof(cdc_ice_schema_t))))
            goto fail;
        for (size_t i = 0; i < src->nschemas; i++) {
            if (cdc_ice_schema_copy(&dst->schemas[i], &src->schemas[i]) != CDC_OK)
                goto fail;
            dst->nschemas++;
        }
    }
    if (src->nspecs) {
        if (!(dst->specs = calloc(src->nspecs, sizeof(*dst->specs))))
            goto fail;
        for (size_t i = 0; i < src->nspecs; i++) {
            if (cdc_ice_partition_spec_copy(&dst->specs[i], &src->specs[i]) != CDC_OK)
                goto fail;
            dst->nspecs++;
        }
    }
    if (src->norders) {
        if (!(dst->orders = calloc(src->norders, sizeof(*dst->orders))))
            goto fail;
        for (size_t i = 0; i < src->norders; i++) {
            if (cdc_ice_sort_order_copy(&dst->orders[i], &src->orders[i]) != CDC_OK)
                goto fail;
            dst->norders++;
        }
    }
    if (cdc_ice_props_copy(&dst->properties, &src->properties) != CDC_OK)
        goto fail;
    if (src->nsnapshots) {
        if (!(dst->snapshots = calloc(src->nsnapshots, sizeof(cdc_ice_snapshot_t))))
            goto fail;
        for (size_t i = 0; i < src->nsnapshots; i++) {
            cdc_ice_snapshot_t *d = &dst->snapshots[i];
            const cdc_ice_snapshot_t *s = &src->snapshots[i];
            *d = *s;
            d->manifest_list = NULL;
            d->json = NULL;
            memset(&d->summary, 0, sizeof(d->summary));
            dst->nsnapshots++;
            if (!(d->manifest_list = strdup(s->manifest_list)) ||
                cdc_ice_props_copy(&d->summary, &s->summary) != CDC_OK ||
                (s->json != NULL && !(d->json = strdup(s->json))))
                goto fail;
        }
    }
    if (src->nsnapshot_log) {
        dst->snapshot_log = malloc(src->nsnapshot_log * sizeof(cdc_ice_snapshot_log_t));
        if (!dst->snapshot_log)
            goto fail;
        memcpy(dst->snapshot_log, src->snapshot_log,
               src->nsnapshot_log * sizeof(cdc_ice_snapshot_log_t));
        dst->nsnapshot_log = src->nsnapshot_log;
    }
    if (src->nmetadata_log) {
        if (!(dst->metadata_log = calloc(src->nmetadata_log, sizeof(cdc_ice_metadata_log_t))))
            goto fail;
        for (size_t i = 0; i < src->nmetadata_log; i++) {
            dst->metadata_log[i].timestamp_ms = src->metadata_log[i].timestamp_ms;
            if (!(dst->metadata_log[i].file = strdup(src->metadata_log[i].file)))
                goto fail;
            dst->nmetadata_log++;
        }
    }
    return CDC_OK;
fail:
    cdc_ice_metadata_free(dst);
    return CDC_ERR_NOMEM;
}

void cdc_ice_metadata_free(cdc_ice_metadata_t *md)
{
    free(md->location);
    for (size_t i = 0; i < md->nschemas; i++)
        cdc_ice_schema_free(&md->schemas[i]);
    free(md->schemas);
    for (size_t i = 0; i < md->nspecs; i++)
        cdc_ice_partition_spec_free(&md->specs[i]);
    free(md->specs);
    for (size_t i = 0; i < md->norders; i++)
        cdc_ice_sort_order_free(&md->orders[i]);
    free(md->orders);
    cdc_ice_props_free(&md->properties);
    for (size_t i = 0; i < md->nsnapshots; i++) {
        free(md->snapshots[i].manifest_list);
        free(md->snapshots[i].json);
        cdc_ice_props_free(&md->snapshots[i].summary);
    }
    free(md->snapshots);
    free(md->snapshot_log);
    for (size_t i = 0; i < md->nmetadata_log; i++)
        free(md->metadata_log[i].file);
    free(md->metadata_log);
    memset(md, 0, sizeof(*md));
}

const cdc_ice_schema_t *cdc_ice_metadata_schema(const cdc_ice_metadata_t *md, int32_t schema_id)
{
    for (size_t i = 0; i < md->nschemas; i++)
        if (md->schemas[i].schema_id == schema_id)
            return &md->schemas[i];
    return NULL;
}

const cdc_ice_schema_t *cdc_ice_metadata_current_schema(const cdc_ice_metadata_t *md)
{
    return cdc_ice_metadata_schema(md, md->current_schema_id);
}

const cdc_ice_snapshot_t *cdc_ice_metadata_snapshot(const cdc_ice_metadata_t *md,
                                                    int64_t snapshot_id)
{
    for (size_t i = 0; i < md->nsnapshots; i++)
        if (md->snapshots[i].snapshot_id == snapshot_id)
            return &md->snapshots[i];
    return NULL;
}

const cdc_ice_snapshot_t *cdc_ice_metadata_current_snapshot(const cdc_ice_metadata_t *md)
{
    return md->current_snapshot_id < 0 ? NULL
                                       : cdc_ice_metadata_snapshot(md, md->current_snapshot_id);
}

const cdc_ice_partition_spec_t *cdc_ice_metadata_spec(const cdc_ice_metadata_t *md, int32_t spec_id)
{
    for (size_t i = 0; i < md->nspecs; i++)
        if (md->specs[i].spec_id == spec_id)
            return &md->specs[i];
    return NULL;
}

const cdc_ice_partition_spec_t *cdc_ice_metadata_default_spec(const cdc_ice_metadata_t *md)
{
    return cdc_ice_metadata_spec(md, md->default_spec_id);
}

const cdc_ice_sort_order_t *cdc_ice_metadata_sort_order(const cdc_ice_metadata_t *md,
                                                        int32_t order_id)
{
    for (size_t i = 0; i < md->norders; i++)
        if (md->orders[i].order_id == order_id)
            return &md->orders[i];
    return NULL;
}

const cdc_ice_sort_order_t *cdc_ice_metadata_default_sort_order(const cdc_ice_metadata_t *md)
{
    return cdc_ice_metadata_sort_order(md, md->default_sort_order_id);
}

const cdc_ice_field_t *cdc_ice_metadata_history_field(const cdc_ice_metadata_t *md, int32_t id)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(md);
    const cdc_ice_field_t *best = NULL;
    int32_t best_schema = -1;
    int k;

    if (cur != NULL && (k = cdc_ice_schema_find(cur, id)) >= 0)
        return &cur->fields[k];
    for (size_t i = 0; i < md->nschemas; i++)
        if (md->schemas[i].schema_id > best_schema &&
            (k = cdc_ice_schema_find(&md->schemas[i], id)) >= 0) {
            best = &md->schemas[i].fields[k];
            best_schema = md->schemas[i].schema_id;
        }
    return best;
}

bool cdc_ice_metadata_spec_result_fields(const cdc_ice_metadata_t *md,
                                         const cdc_ice_partition_spec_t *spec,
                                         cdc_ice_field_t *results)
{
    for (size_t i = 0; i < spec->nfields; i++) {
        const cdc_ice_partition_field_t *f = &spec->fields[i];
        const cdc_ice_field_t *src = cdc_ice_metadata_history_field(md, f->source_id);
        if (src == NULL || !cdc_ice_transform_result(f->transform, src, &results[i]))
            return false;
        results[i].id = f->field_id;
        results[i].name = f->name;
    }
    return true;
}
