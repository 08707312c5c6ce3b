/*
 * Column identity of table schema documents (see cdcschema.h, docs/iceberg.md "Schema
 * evolution"): the Iceberg field id of each column is assigned by identity, not by
 * name or position, so that a rename keeps its id, a retyped column that Iceberg cannot
 * promote gets a new one, and a dropped column's id is never reused; nested fields get
 * ids of their own. Also which schema changes rewrite or drop rows. The document's type
 * mapping and JSON form are cdcschema.c.
 */
#include "common/cdcschema.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/iceberg/schema.h"

const char *cdc_schema_col_field_name(const cdc_schema_col_t *c)
{
    return c->field_name != NULL ? c->field_name : c->name;
}

static bool ice_promotable(const cdc_schema_col_t *from, const cdc_schema_col_t *to)
{
    cdc_ice_field_t a = {.type = from->ice_type,
                         .precision = from->precision,
                         .scale = from->scale,
                         .nested = from->ice_nested};
    cdc_ice_field_t b = {.type = to->ice_type,
                         .precision = to->precision,
                         .scale = to->scale,
                         .nested = to->ice_nested};
    return cdc_ice_type_promotable(&a, &b);
}

/* Sets every nested field id of type t (Iceberg JSON) to 0 (zero) or to ++*last. */
static void renumber(json_t *t, int32_t *last, bool zero)
{
    const char *kind = json_string_value(json_object_get(t, "type"));
    if (kind != NULL && strcmp(kind, "list") == 0) {
        json_object_set_new(t, "element-id", json_integer(zero ? 0 : ++*last));
        renumber(json_object_get(t, "element"), last, zero);
    } else if (kind != NULL && strcmp(kind, "struct") == 0) {
        json_t *fields = json_object_get(t, "fields");
        for (size_t i = 0; i < json_array_size(fields); i++) {
            json_t *fo = json_array_get(fields, i);
            json_object_set_new(fo, "id", json_integer(zero ? 0 : ++*last));
            renumber(json_object_get(fo, "type"), last, zero);
        }
    }
}

/* Nested JSON text with its ids renumbered (zeroed when zero); NULL when out of memory. */
static char *nested_ids(const char *text, int32_t *last, bool zero)
{
    json_error_t jerr;
    json_t *t = json_loads(text, 0, &jerr);
    char *out;
    if (t == NULL)
        return NULL;
    renumber(t, last, zero);
    out = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(t);
    return out;
}

/* Gives c's nested type its field ids: p's when p has the same nested shape, else new
 * ones after *last. False when out of memory. */
static bool nested_assign(const cdc_schema_col_t *p, cdc_schema_col_t *c, int32_t *last)
{
    char *mine, *theirs, *given;
    int32_t none = 0;
    bool same;
    if (c->ice_nested == NULL)
        return true;
    if (p != NULL && p->ice_nested != NULL) {
        mine = nested_ids(c->ice_nested, &none, true);
        theirs = nested_ids(p->ice_nested, &none, true);
        same = mine != NULL && theirs != NULL && strcmp(mine, theirs) == 0;
        free(mine);
        free(theirs);
        if (same) {
            free(c->ice_nested);
            c->ice_nested = strdup(p->ice_nested);
            return c->ice_nested != NULL;
        }
    }
    given = nested_ids(c->ice_nested, last, false);
    if (given == NULL)
        return false;
    free(c->ice_nested);
    c->ice_nested = given;
    return true;
}

/* A registered column keeps its Iceberg type while its PostgreSQL type is the same: the
 * mapping of lists and of the numeric default reaches new columns only. */
static bool keep_mapping(const cdc_schema_col_t *p, cdc_schema_col_t *c)
{
    if (p->pg_oid == 0 || p->pg_oid != c->pg_oid || p->typmod != c->typmod)
        return true;
    c->ice_type = p->ice_type;
    c->precision = p->precision;
    c->scale = p->scale;
    c->enc = p->enc;
    c->elem_oid = p->elem_oid;
    free(c->ice_nested);
    c->ice_nested = p->ice_nested != NULL ? strdup(p->ice_nested) : NULL;
    return p->ice_nested == NULL || c->ice_nested != NULL;
}

/* The previous document's column that is this column, or NULL (a new column). */
static const cdc_schema_col_t *match_prev(const cdc_schema_doc_t *prev, const cdc_schema_col_t *c,
                                          size_t *index)
{
    bool by_attnum = c->attnum > 0;
    for (size_t i = 0; by_attnum && i < prev->ncols; i++)
        by_attnum = prev->cols[i].attnum > 0;
    for (size_t i = 0; i < prev->ncols; i++) {
        if (by_attnum ? prev->cols[i].attnum == c->attnum
                      : strcmp(prev->cols[i].name, c->name) == 0) {
            *index = i;
            return &prev->cols[i];
        }
    }
    return NULL;
}

/* True when name is used by another Iceberg column of doc than `self`. */
static bool name_taken(const cdc_schema_doc_t *doc, const char *name, const cdc_schema_col_t *self)
{
    for (size_t i = 0; i < doc->ncols; i++)
        if (&doc->cols[i] != self && strcmp(cdc_schema_col_field_name(&doc->cols[i]), name) == 0)
            return true;
    for (size_t i = 0; i < doc->nretired; i++)
        if (&doc->retired[i] != self && strcmp(doc->retired[i].name, name) == 0)
            return true;
    return false;
}

/* Sets *slot to "<base>__<tag><n>" (or base when n == 0). */
static bool set_name(char **slot, const char *base, const char *tag, int32_t n)
{
    char *s = NULL;
    free(*slot);
    *slot = NULL;
    if (n == 0)
        return true;
    if (asprintf(&s, "%s__%s%d", base, tag, (int)n) < 0)
        return false;
    *slot = s;
    return true;
}

/* Frees the first n retired columns' names and the array. */
static void free_retired(cdc_schema_col_t *retired, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(retired[k].name);
    free(retired);
}

/* The live column of doc with the given attnum, or NULL. */
static const cdc_schema_col_t *live_of(const cdc_schema_doc_t *doc, int32_t attnum)
{
    for (size_t i = 0; attnum > 0 && i < doc->ncols; i++)
        if (doc->cols[i].attnum == attnum)
            return &doc->cols[i];
    return NULL;
}

/*
 * Makes the Iceberg names of doc unique (docs/worker.md, "Schema changes", "Names"): a
 * source column's name always wins. A name kept from a table versioned before the source
 * name held the current values (a live "n__v2") yields to a source column of that name;
 * a retired field yields to any live column: the retired field of the same column that
 * still has its source name (such an older table's "n") becomes "<name>__v<k>", any other
 * takes its field id as a suffix ("n__v1__f4"), until no other column has its name.
 */
static bool unique_names(cdc_schema_doc_t *doc)
{
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < doc->ncols; i++) {
            cdc_schema_col_t *c = &doc->cols[i];
            if (c->field_name != NULL && name_taken(doc, c->field_name, c)) {
                free(c->field_name);
                c->field_name = NULL;
                again = true;
            }
        }
    }
    for (size_t i = 0; i < doc->nretired; i++) {
        cdc_schema_col_t *r = &doc->retired[i];
        while (name_taken(doc, r->name, r)) {
            const cdc_schema_col_t *own = live_of(doc, r->attnum);
            bool legacy = own != NULL && strcmp(cdc_schema_col_field_name(own), r->name) == 0;
            char *base = r->name;
            r->name = NULL;
            bool ok = set_name(&r->name, base, legacy ? "v" : "f",
                               legacy ? r->type_version : r->field_id);
            free(base);
            if (!ok)
                return false;
        }
    }
    return true;
}

cdc_err_t cdc_schema_doc_assign_ids(const cdc_schema_doc_t *prev, cdc_schema_doc_t *doc,
                                    cdc_error_t *e)
{
    bool legacy = prev != NULL && prev->ncols > 0 && prev->cols[0].field_id <= 0;
    int32_t last = prev != NULL ? prev->last_field_id : 0;
    cdc_schema_col_t *retired;
    size_t nret = 0, cap;

    if (legacy && last < (int32_t)prev->ncols)
        last = (int32_t)prev->ncols;
    for (size_t i = 0; prev != NULL && i < prev->ncols; i++)
        if (prev->cols[i].field_id > last)
            last = prev->cols[i].field_id;
    cap = doc->ncols + (prev != NULL ? prev->nretired + prev->ncols : 0);
    retired = calloc(cap ? cap : 1, sizeof(*retired));
    if (retired == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < doc->ncols; i++) {
        cdc_schema_col_t *c = &doc->cols[i];
        size_t pi = 0;
        const cdc_schema_col_t *p = prev != NULL ? match_prev(prev, c, &pi) : NULL;
        int32_t pid = p == NULL ? 0 : legacy ? (int32_t)pi + 1 : p->field_id;
        const char *keep = NULL;
        bool ok = p == NULL || keep_mapping(p, c);

        if (c->key > 0 && c->ice_nested != NULL) {
            /* Iceberg identifier fields are primitive: a key array stays JSON text */
            free(c->ice_nested);
            c->ice_nested = NULL;
            c->ice_type = CDC_ICE_STRING;
        }
        if (ok && !nested_assign(p, c, &last))
            ok = false;
        if (p != NULL && ice_promotable(p, c)) {
            c->field_id = pid;
            c->type_version = p->type_version > 0 ? p->type_version : 1;
            /* a name given before the source name held the current values ("n__v2"):
             * kept while the column keeps its name and its type (no change in place) */
            if (p->field_name != NULL && strcmp(p->name, c->name) == 0)
                keep = p->field_name;
        } else if (p != NULL) {
            /* a type Iceberg cannot promote: a new field under the source name, the old
             * one retired as "<name>__v<k>", k its type version */
            cdc_schema_col_t *r = &retired[nret++];
            *r = *p;
            r->field_id = pid;
            r->pg_type = NULL;
            r->field_name = NULL;
            r->type_version = p->type_version > 0 ? p->type_version : 1;
            r->name = NULL;
            r->ice_nested = p->ice_nested != NULL ? strdup(p->ice_nested) : NULL;
            r->nullable = true;
            r->key = 0;
            if (!set_name(&r->name, p->name, "v", r->type_version) ||
                (p->ice_nested != NULL && r->ice_nested == NULL))
                ok = false;
            c->field_id = ++last;
            c->type_version = r->type_version + 1;
        } else {
            c->field_id = ++last;
            c->type_version = 1;
        }
        if (c->attnum <= 0 && p != NULL)
            c->attnum = p->attnum;
        free(c->field_name);
        c->field_name = NULL;
        if (!ok || (keep != NULL && (c->field_name = strdup(keep)) == NULL)) {
            free_retired(retired, nret);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
    }
    /* earlier retired fields stay while their source column lives */
    for (size_t i = 0; prev != NULL && i < prev->nretired; i++) {
        const cdc_schema_col_t *r = &prev->retired[i];
        if (live_of(doc, r->attnum) == NULL)
            continue;
        retired[nret] = *r;
        retired[nret].pg_type = NULL;
        retired[nret].field_name = NULL;
        retired[nret].ice_nested = r->ice_nested != NULL ? strdup(r->ice_nested) : NULL;
        retired[nret].name = strdup(r->name);
        if (retired[nret++].name == NULL) {
            free_retired(retired, nret);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t i = 0; i < doc->nretired; i++) {
        free(doc->retired[i].name);
        free(doc->retired[i].pg_type);
        free(doc->retired[i].field_name);
        free(doc->retired[i].ice_nested);
    }
    free(doc->retired);
    doc->retired = retired;
    doc->nretired = nret;
    doc->last_field_id = last;
    if (!unique_names(doc))
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    return CDC_OK;
}

/* Whether every partition b lists is in a (both lists ascending and known). */
static bool parts_within(const cdc_schema_doc_t *a, const cdc_schema_doc_t *b)
{
    size_t k = 0;
    for (size_t i = 0; i < b->nparts; i++) {
        while (k < a->nparts && a->parts[k] < b->parts[i])
            k++;
        if (k == a->nparts || a->parts[k] != b->parts[i])
            return false;
    }
    return true;
}

bool cdc_schema_doc_drops_rows(const cdc_schema_doc_t *prev, const cdc_schema_doc_t *doc)
{
    return prev != NULL && prev->parts_known && doc->parts_known && !parts_within(doc, prev);
}

bool cdc_schema_doc_rewrites_rows(const cdc_schema_doc_t *prev, const cdc_schema_doc_t *doc)
{
    /* an attached partition */
    if (prev != NULL && prev->parts_known && doc->parts_known && !parts_within(prev, doc))
        return true;
    for (size_t i = 0; i < doc->ncols; i++) {
        const cdc_schema_col_t *c = &doc->cols[i];
        size_t pi = 0;
        const cdc_schema_col_t *p = prev != NULL ? match_prev(prev, c, &pi) : NULL;
        if (p == NULL) {
            if (prev != NULL && c->has_default)
                return true;
            continue;
        }
        if (p->pg_oid != c->pg_oid || p->ice_type != c->ice_type || p->precision != c->precision ||
            p->scale != c->scale)
            return true;
        /* nested ids are given with the field ids; compare the shape without them */
        if ((p->ice_nested == NULL) != (c->ice_nested == NULL))
            return true;
        if (p->ice_nested != NULL) {
            int32_t none = 0;
            char *a = nested_ids(p->ice_nested, &none, true),
                 *b = nested_ids(c->ice_nested, &none, true);
            bool differ = a == NULL || b == NULL || strcmp(a, b) != 0;
            free(a);
            free(b);
            if (differ)
                return true;
        }
    }
    return false;
}
