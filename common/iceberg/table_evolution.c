/*
 * Metadata-only changes of a table (see table.h): schema evolution (adding a column,
 * setting the current schema, recording a past one, checking a file schema against
 * the table's history), partition and sort-order evolution (set_layout), and
 * properties. Each is a new metadata version through the atomic swap (table.c); no
 * snapshot is added.
 */
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table.h"
#include "common/iceberg/table_int.h"

cdc_err_t cdc_ice_table_add_column(cdc_ice_table_t *t, const cdc_ice_field_t *field,
                                   int32_t *field_id, cdc_error_t *e)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(&t->md);
    if (!cur)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table \"%s\" has no current schema", t->location);
    if (field->required)
        return cdc_error_set(e, CDC_ERR_UNSUPPORTED,
                             "cannot add required column \"%s\" to table \"%s\"", field->name,
                             t->location);
    for (size_t i = 0; i < cur->nfields; i++)
        if (strcmp(cur->fields[i].name, field->name) == 0)
            return cdc_error_set(e, CDC_ERR_EXISTS, "column \"%s\" already exists in table \"%s\"",
                                 field->name, t->location);
    cdc_ice_metadata_t md;
    cdc_err_t rc = cdc_ice_metadata_copy(&md, &t->md);
    if (rc != CDC_OK)
        return oom(e);
    int32_t max_schema = 0;
    for (size_t i = 0; i < md.nschemas; i++)
        if (md.schemas[i].schema_id > max_schema)
            max_schema = md.schemas[i].schema_id;
    if (cdc_array_resize(md.schemas, md.nschemas + 1) != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    cdc_ice_schema_t *ns = &md.schemas[md.nschemas];
    if (cdc_ice_schema_copy(ns, cur) != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    md.nschemas++;
    if (cdc_array_resize(ns->fields, ns->nfields + 1) != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    cdc_ice_field_t *f = &ns->fields[ns->nfields];
    *f = *field;
    f->id = md.last_column_id + 1;
    f->name = strdup(field->name);
    f->doc = field->doc ? strdup(field->doc) : NULL;
    ns->nfields++;
    if (!f->name || (field->doc && !f->doc)) {
        rc = oom(e);
        goto fail;
    }
    ns->schema_id = max_schema + 1;
    md.last_column_id = f->id;
    md.current_schema_id = ns->schema_id;
    int32_t new_id = f->id;
    if ((rc = cdc_ice_table_commit_change(t, &md, e)) != CDC_OK)
        goto fail;
    if (field_id)
        *field_id = new_id;
    return CDC_OK;
fail:
    cdc_ice_metadata_free(&md);
    return rc;
}

static bool same_schema(const cdc_ice_schema_t *a, const cdc_ice_schema_t *b)
{
    if (a->nfields != b->nfields || a->nidentifier != b->nidentifier)
        return false;
    for (size_t i = 0; i < a->nfields; i++) {
        const cdc_ice_field_t *x = &a->fields[i], *y = &b->fields[i];
        if (x->id != y->id || strcmp(x->name, y->name) != 0 || !cdc_ice_type_equal(x, y) ||
            x->required != y->required)
            return false;
    }
    for (size_t i = 0; i < a->nidentifier; i++)
        if (a->identifier_ids[i] != b->identifier_ids[i])
            return false;
    return true;
}

static cdc_err_t type_mismatch(cdc_error_t *e, const cdc_ice_table_t *t, const cdc_ice_field_t *has,
                               const cdc_ice_field_t *want)
{
    char a[48], b[48];
    return cdc_error_set(e, CDC_ERR_INVALID,
                         "field id %d (\"%s\") of table \"%s\" is %s, the schema declares %s "
                         "(\"%s\"): not an Iceberg type promotion",
                         (int)has->id, has->name, t->location,
                         cdc_ice_type_string(has, a, sizeof(a)),
                         cdc_ice_type_string(want, b, sizeof(b)), want->name);
}

cdc_err_t cdc_ice_table_check_schema(const cdc_ice_table_t *t, const cdc_ice_schema_t *fs,
                                     cdc_error_t *e)
{
    for (size_t i = 0; i < fs->nfields; i++) {
        const cdc_ice_field_t *has = cdc_ice_metadata_history_field(&t->md, fs->fields[i].id);
        if (has == NULL)
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "field id %d (\"%s\") is not a field of table \"%s\": files "
                                 "written with it would not read",
                                 (int)fs->fields[i].id, fs->fields[i].name, t->location);
        if (!cdc_ice_type_promotable(&fs->fields[i], has))
            return type_mismatch(e, t, has, &fs->fields[i]);
    }
    return CDC_OK;
}

/* set_schema (current) and add_past_schema (!current). */
static cdc_err_t put_schema(cdc_ice_table_t *t, const cdc_ice_schema_t *want,
                            const cdc_ice_props_t *props, bool current, bool *changed,
                            cdc_error_t *e)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(&t->md);
    cdc_ice_schema_t ns;
    cdc_ice_metadata_t md;
    int32_t max_schema = 0, reuse = -1;
    cdc_err_t rc;

    if (changed)
        *changed = false;
    if (cur == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table \"%s\" has no current schema", t->location);
    if (cdc_ice_schema_copy(&ns, want) != CDC_OK)
        return oom(e);
    ns.nidentifier = 0;
    for (size_t i = 0; i < ns.nfields; i++) {
        cdc_ice_field_t *f = &ns.fields[i];
        const cdc_ice_field_t *has = cdc_ice_metadata_history_field(&t->md, f->id);
        /* a past schema's type promotes to the newest, the newest one's from it */
        if (has != NULL &&
            !(current ? cdc_ice_type_promotable(has, f) : cdc_ice_type_promotable(f, has))) {
            rc = type_mismatch(e, t, has, f);
            cdc_ice_schema_free(&ns);
            return rc;
        }
        /* required only where it was: a new or optional field stays optional */
        f->required =
            f->required && has != NULL && has->required && cdc_ice_schema_find(cur, f->id) >= 0;
    }
    for (size_t i = 0; i < want->nidentifier; i++) {
        int k = cdc_ice_schema_find(&ns, want->identifier_ids[i]);
        if (k >= 0 && ns.fields[k].required)
            ns.identifier_ids[ns.nidentifier++] = want->identifier_ids[i];
    }
    for (size_t i = 0; i < t->md.nschemas; i++) {
        if (t->md.schemas[i].schema_id > max_schema)
            max_schema = t->md.schemas[i].schema_id;
        ns.schema_id = t->md.schemas[i].schema_id;
        if (reuse < 0 && same_schema(&t->md.schemas[i], &ns))
            reuse = t->md.schemas[i].schema_id;
    }
    if ((current ? reuse == t->md.current_schema_id : reuse >= 0) &&
        (props == NULL || props->n == 0)) {
        cdc_ice_schema_free(&ns);
        return CDC_OK;
    }
    if ((rc = cdc_ice_metadata_copy(&md, &t->md)) != CDC_OK) {
        cdc_ice_schema_free(&ns);
        return oom(e);
    }
    if (reuse < 0) {
        if (cdc_array_resize(md.schemas, md.nschemas + 1) != CDC_OK) {
            cdc_ice_schema_free(&ns);
            rc = oom(e);
            goto fail;
        }
        ns.schema_id = max_schema + 1;
        md.schemas[md.nschemas++] = ns; /* moved */
        for (size_t i = 0; i < ns.nfields; i++)
            if (cdc_ice_field_max_id(&ns.fields[i]) > md.last_column_id)
                md.last_column_id = cdc_ice_field_max_id(&ns.fields[i]);
        reuse = ns.schema_id;
    } else {
        cdc_ice_schema_free(&ns);
    }
    bool schema_changed = current ? md.current_schema_id != reuse : md.nschemas != t->md.nschemas;
    if (current)
        md.current_schema_id = reuse;
    for (size_t i = 0; props != NULL && i < props->n; i++)
        if (cdc_ice_props_set(&md.properties, props->keys[i], props->values[i]) != CDC_OK) {
            rc = oom(e);
            goto fail;
        }
    if ((rc = cdc_ice_table_commit_change(t, &md, e)) != CDC_OK)
        goto fail;
    if (changed)
        *changed = schema_changed;
    return CDC_OK;
fail:
    cdc_ice_metadata_free(&md);
    return rc;
}

cdc_err_t cdc_ice_table_set_schema(cdc_ice_table_t *t, const cdc_ice_schema_t *want,
                                   const cdc_ice_props_t *props, bool *changed, cdc_error_t *e)
{
    return put_schema(t, want, props, true, changed, e);
}

cdc_err_t cdc_ice_table_add_past_schema(cdc_ice_table_t *t, const cdc_ice_schema_t *want,
                                        bool *added, cdc_error_t *e)
{
    return put_schema(t, want, NULL, false, added, e);
}

cdc_err_t cdc_ice_table_set_layout(cdc_ice_table_t *t, const char *partition_by,
                                   const char *sort_by, bool *changed, cdc_error_t *e)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(&t->md);
    cdc_ice_partition_spec_t spec;
    cdc_ice_sort_order_t order;
    cdc_ice_metadata_t md;
    int32_t spec_id = -1, order_id = -1, max_spec = -1, max_order = 0;
    cdc_err_t rc;

    if (changed)
        *changed = false;
    if (cur == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table \"%s\" has no current schema", t->location);
    if ((rc = cdc_ice_partition_spec_parse(partition_by, cur, t->md.last_partition_id + 1, &spec,
                                           e)) != CDC_OK) {
        cdc_error_prefix(e, "table \"%s\"", t->location);
        return rc;
    }
    if ((rc = cdc_ice_sort_order_parse(sort_by, cur, &order, e)) != CDC_OK) {
        cdc_ice_partition_spec_free(&spec);
        cdc_error_prefix(e, "table \"%s\"", t->location);
        return rc;
    }
    /* an existing spec or order with the same fields is made the default again */
    for (size_t i = 0; i < t->md.nspecs; i++) {
        if (spec_id < 0 && cdc_ice_partition_spec_same(&t->md.specs[i], &spec))
            spec_id = t->md.specs[i].spec_id;
        if (t->md.specs[i].spec_id > max_spec)
            max_spec = t->md.specs[i].spec_id;
    }
    for (size_t i = 0; i < t->md.norders; i++) {
        if (order_id < 0 && cdc_ice_sort_order_same(&t->md.orders[i], &order))
            order_id = t->md.orders[i].order_id;
        if (t->md.orders[i].order_id > max_order)
            max_order = t->md.orders[i].order_id;
    }
    if (spec_id == t->md.default_spec_id && order_id == t->md.default_sort_order_id) {
        rc = CDC_OK;
        goto done;
    }
    if ((rc = cdc_ice_metadata_copy(&md, &t->md)) != CDC_OK) {
        rc = oom(e);
        goto done;
    }
    if (spec_id < 0) {
        if (cdc_array_resize(md.specs, md.nspecs + 1) != CDC_OK) {
            rc = oom(e);
            goto fail;
        }
        spec.spec_id = spec_id = max_spec + 1;
        for (size_t i = 0; i < spec.nfields; i++)
            if (spec.fields[i].field_id > md.last_partition_id)
                md.last_partition_id = spec.fields[i].field_id;
        md.specs[md.nspecs++] = spec; /* moved */
        memset(&spec, 0, sizeof(spec));
    }
    if (order_id < 0) {
        if (cdc_array_resize(md.orders, md.norders + 1) != CDC_OK) {
            rc = oom(e);
            goto fail;
        }
        /* order id 0 is reserved for the unsorted order */
        order.order_id = order_id =
            order.nfields == 0 && !cdc_ice_metadata_sort_order(&md, 0) ? 0 : max_order + 1;
        md.orders[md.norders++] = order; /* moved */
        memset(&order, 0, sizeof(order));
    }
    md.default_spec_id = spec_id;
    md.default_sort_order_id = order_id;
    if ((rc = cdc_ice_table_commit_change(t, &md, e)) != CDC_OK)
        goto fail;
    if (changed)
        *changed = true;
    goto done;
fail:
    cdc_ice_metadata_free(&md);
done:
    cdc_ice_partition_spec_free(&spec);
    cdc_ice_sort_order_free(&order);
    return rc;
}

cdc_err_t cdc_ice_table_set_properties(cdc_ice_table_t *t, const cdc_ice_props_t *props,
                                       cdc_error_t *e)
{
    cdc_ice_metadata_t md;
    cdc_err_t rc = cdc_ice_metadata_copy(&md, &t->md);
    if (rc != CDC_OK)
        return oom(e);
    for (size_t i = 0; i < props->n; i++) {
        if (cdc_ice_props_set(&md.properties, props->keys[i], props->values[i]) != CDC_OK) {
            cdc_ice_metadata_free(&md);
            return oom(e);
        }
    }
    if ((rc = cdc_ice_table_commit_change(t, &md, e)) != CDC_OK)
        cdc_ice_metadata_free(&md);
    return rc;
}
