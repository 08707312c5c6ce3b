/*
 * Partition specs and sort orders (see partition.h): their declaration text
 * ("bucket[16](id), day(ts)") parsed against a schema and printed back, comparison,
 * their JSON as table metadata holds it, copy and release, and a spec's result
 * fields. The transforms and partition values they use are in partition.c.
 */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/partition_int.h"
#include "common/iceberg/schema.h"

/* Suffix of a partition field's name per transform (identity: the column's name). */
static const char *const name_suffixes[] = {
    [CDC_ICE_TRANSFORM_IDENTITY] = "",       [CDC_ICE_TRANSFORM_BUCKET] = "_bucket",
    [CDC_ICE_TRANSFORM_TRUNCATE] = "_trunc", [CDC_ICE_TRANSFORM_YEAR] = "_year",
    [CDC_ICE_TRANSFORM_MONTH] = "_month",    [CDC_ICE_TRANSFORM_DAY] = "_day",
    [CDC_ICE_TRANSFORM_HOUR] = "_hour",      [CDC_ICE_TRANSFORM_VOID] = "_null",
};

/* ---- declaration text ---------------------------------------------------------------- */

/* Splits text at top-level commas (outside quotes, brackets and parentheses). */
static char **split_terms(const char *text, size_t *n)
{
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    int depth = 0;
    bool quoted = false;
    const char *start = text;

    for (const char *p = text;; p++) {
        if (*p == '"')
            quoted = !quoted;
        else if (!quoted && (*p == '(' || *p == '['))
            depth++;
        else if (!quoted && (*p == ')' || *p == ']'))
            depth--;
        if (*p != '\0' && (*p != ',' || quoted || depth > 0))
            continue;
        const char *s = start, *e = p;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (cdc_array_reserve(v, cap, cnt + 1, 8) != CDC_OK ||
            (v[cnt] = strndup(s, (size_t)(e - s))) == NULL) {
            for (size_t i = 0; i < cnt; i++)
                free(v[i]);
            free(v);
            return NULL;
        }
        cnt++;
        if (*p == '\0')
            break;
        start = p + 1;
    }
    *n = cnt;
    return v;
}

static void free_terms(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static bool blank(const char *text)
{
    while (text != NULL && isspace((unsigned char)*text))
        text++;
    return text == NULL || *text == '\0';
}

/*
 * Reads a column name at *p: "quoted" ("" is a quote) or a bare run of characters up to
 * whitespace, a comma or a parenthesis. Advances *p; false when there is none.
 */
static bool read_name(const char **p, char *out, size_t cap)
{
    const char *s = *p;
    size_t n = 0;

    while (isspace((unsigned char)*s))
        s++;
    if (*s == '"') {
        for (s++;; s++) {
            if (*s == '\0')
                return false;
            if (*s == '"') {
                if (s[1] != '"')
                    break;
                s++;
            }
            if (n + 1 >= cap)
                return false;
            out[n++] = *s;
        }
        s++;
    } else {
        while (*s != '\0' && !isspace((unsigned char)*s) && *s != '(' && *s != ')' && *s != ',') {
            if (n + 1 >= cap)
                return false;
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
    *p = s;
    return n > 0;
}

/* Parsed "[transform(]column[)]" and what follows it. */
typedef struct term {
    cdc_ice_transform_t transform;
    const cdc_ice_field_t *column;
    const char *rest; /* after the expression */
} term_t;

static cdc_err_t parse_expr(const char *what, const char *text, const cdc_ice_schema_t *schema,
                            term_t *out, cdc_error_t *e)
{
    char name[256];
    const char *p = text, *open = NULL;
    bool quoted = false;

    for (const char *s = text; *s != '\0' && open == NULL; s++) {
        if (*s == '"')
            quoted = !quoted;
        else if (*s == '(' && !quoted)
            open = s;
    }
    out->transform = (cdc_ice_transform_t){CDC_ICE_TRANSFORM_IDENTITY, 0};
    if (open != NULL) {
        char *tname = strndup(text, (size_t)(open - text));
        cdc_err_t rc = tname ? cdc_ice_transform_parse(tname, &out->transform) : CDC_ERR_NOMEM;
        free(tname);
        if (rc == CDC_ERR_NOMEM)
            return cdc_error_set(e, rc, "out of memory");
        if (rc != CDC_OK)
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "%s term \"%s\": unknown transform \"%.*s\" (identity, "
                                 "bucket[N], truncate[W], year, month, day, hour, void)",
                                 what, text, (int)(open - text), text);
        p = open + 1;
    }
    if (!read_name(&p, name, sizeof(name)))
        return cdc_error_set(e, CDC_ERR_INVALID, "%s term \"%s\": no column name", what, text);
    if (open != NULL) {
        while (isspace((unsigned char)*p))
            p++;
        if (*p++ != ')')
            return cdc_error_set(e, CDC_ERR_INVALID, "%s term \"%s\": expected \")\" after \"%s\"",
                                 what, text, name);
    }
    int col = cdc_ice_schema_find_name(schema, name);
    out->column = col >= 0 ? &schema->fields[col] : NULL;
    if (out->column == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID, "%s term \"%s\": no column \"%s\" in the schema",
                             what, text, name);
    cdc_ice_field_t result;
    if (!cdc_ice_transform_result(out->transform, out->column, &result)) {
        char tb[32], ty[32];
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "%s term \"%s\": transform %s does not apply to column \"%s\" of "
                             "type %s",
                             what, text, cdc_ice_transform_string(out->transform, tb, sizeof(tb)),
                             name, cdc_ice_type_string(out->column, ty, sizeof(ty)));
    }
    while (isspace((unsigned char)*p))
        p++;
    out->rest = p;
    return CDC_OK;
}

/* Takes parsed term i (text `term`) of a declaration into fields[i]. */
typedef cdc_err_t (*term_fn)(const term_t *t, const char *term, void *fields, size_t i, void *arg,
                             cdc_error_t *e);

/*
 * Parses a declaration `text` (a `what`: "partition spec", "sort order") against schema:
 * *fields gets one element of elem_size bytes per term (NULL for a blank text), each
 * term parsed and handed to take(), which fills its element. On failure the caller
 * releases what take() filled.
 */
static cdc_err_t parse_declaration(const char *what, const char *text,
                                   const cdc_ice_schema_t *schema, size_t elem_size, term_fn take,
                                   void *arg, void **fields, cdc_error_t *e)
{
    size_t nterms = 0;
    char **terms;
    cdc_err_t rc = CDC_OK;

    if (blank(text))
        return CDC_OK;
    if ((terms = split_terms(text, &nterms)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if ((*fields = calloc(nterms, elem_size)) == NULL)
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nterms && rc == CDC_OK; i++) {
        term_t t;
        if (terms[i][0] == '\0')
            rc = cdc_error_set(e, CDC_ERR_INVALID, "%s \"%s\": empty term %zu", what, text, i + 1);
        else if ((rc = parse_expr(what, terms[i], schema, &t, e)) == CDC_OK)
            rc = take(&t, terms[i], *fields, i, arg, e);
    }
    free_terms(terms, nterms);
    return rc;
}

static bool same_transform(cdc_ice_transform_t a, cdc_ice_transform_t b)
{
    return a.kind == b.kind && a.param == b.param;
}

/* What spec_term() needs besides the term. */
typedef struct spec_args {
    cdc_ice_partition_spec_t *out;
    const cdc_ice_schema_t *schema;
    int32_t first_field_id;
} spec_args_t;

static cdc_err_t spec_term(const term_t *t, const char *term, void *fields, size_t i, void *arg,
                           cdc_error_t *e)
{
    spec_args_t *a = arg;
    const cdc_ice_schema_t *schema = a->schema;
    cdc_ice_partition_field_t *f = (cdc_ice_partition_field_t *)fields + i;

    if (*t->rest != '\0')
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "partition spec term \"%s\": unexpected \"%s\" after the column", term,
                             t->rest);
    f->source_id = t->column->id;
    f->field_id = a->first_field_id + (int32_t)i;
    f->transform = t->transform;
    if (asprintf(&f->name, "%s%s", t->column->name, name_suffixes[t->transform.kind]) < 0) {
        f->name = NULL;
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    a->out->nfields++;
    for (size_t k = 0; k < i; k++) {
        const cdc_ice_partition_field_t *g = (cdc_ice_partition_field_t *)fields + k;
        if (strcmp(g->name, f->name) == 0 ||
            (g->source_id == f->source_id && g->transform.kind == f->transform.kind))
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "partition spec term \"%s\": column \"%s\" is already "
                                 "partitioned by %s (term %zu)",
                                 term, t->column->name, cdc_ice_transform_name(g->transform.kind),
                                 k + 1);
    }
    /* a partition field may not take another column's name */
    for (size_t k = 0; k < schema->nfields; k++)
        if (schema->fields[k].id != f->source_id && strcmp(schema->fields[k].name, f->name) == 0)
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "partition spec term \"%s\": partition field name \"%s\" is "
                                 "the name of another column",
                                 term, f->name);
    return CDC_OK;
}

cdc_err_t cdc_ice_partition_spec_parse(const char *text, const cdc_ice_schema_t *schema,
                                       int32_t first_field_id, cdc_ice_partition_spec_t *out,
                                       cdc_error_t *e)
{
    spec_args_t a = {.out = out, .schema = schema, .first_field_id = first_field_id};
    void *fields = NULL;
    cdc_err_t rc;

    memset(out, 0, sizeof(*out));
    rc = parse_declaration("partition spec", text, schema, sizeof(*out->fields), spec_term, &a,
                           &fields, e);
    out->fields = fields;
    if (rc != CDC_OK)
        cdc_ice_partition_spec_free(out);
    return rc;
}

/* "asc"/"desc"/"nulls first"/"nulls last" after a sort term's expression. */
static cdc_err_t parse_direction(const char *term, const char *rest, cdc_ice_sort_field_t *f,
                                 cdc_error_t *e)
{
    char words[3][16];
    int n = 0;

    for (const char *p = rest; *p != '\0' && n < 3;) {
        size_t k = 0;
        while (*p != '\0' && !isspace((unsigned char)*p)) {
            if (k + 1 < sizeof(words[0]))
                words[n][k++] = (char)tolower((unsigned char)*p);
            p++;
        }
        words[n++][k] = '\0';
        while (isspace((unsigned char)*p))
            p++;
        if (*p != '\0' && n == 3)
            n = 4; /* too many words */
    }
    int i = 0;
    f->descending = false;
    if (i < n && (strcmp(words[i], "asc") == 0 || strcmp(words[i], "desc") == 0))
        f->descending = strcmp(words[i++], "desc") == 0;
    f->nulls_first = !f->descending;
    if (i + 1 < n && strcmp(words[i], "nulls") == 0 &&
        (strcmp(words[i + 1], "first") == 0 || strcmp(words[i + 1], "last") == 0)) {
        f->nulls_first = strcmp(words[i + 1], "first") == 0;
        i += 2;
    }
    if (i != n)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "sort order term \"%s\": expected [asc|desc] [nulls first|nulls "
                             "last] after the column, not \"%s\"",
                             term, rest);
    return CDC_OK;
}

static cdc_err_t order_term(const term_t *t, const char *term, void *fields, size_t i, void *arg,
                            cdc_error_t *e)
{
    cdc_ice_sort_order_t *out = arg;
    cdc_ice_sort_field_t *f = (cdc_ice_sort_field_t *)fields + i;
    cdc_err_t rc;

    f->source_id = t->column->id;
    f->transform = t->transform;
    if ((rc = parse_direction(term, t->rest, f, e)) != CDC_OK)
        return rc;
    out->nfields++;
    return CDC_OK;
}

cdc_err_t cdc_ice_sort_order_parse(const char *text, const cdc_ice_schema_t *schema,
                                   cdc_ice_sort_order_t *out, cdc_error_t *e)
{
    void *fields = NULL;
    cdc_err_t rc;

    memset(out, 0, sizeof(*out));
    rc = parse_declaration("sort order", text, schema, sizeof(*out->fields), order_term, out,
                           &fields, e);
    out->fields = fields;
    if (rc != CDC_OK)
        cdc_ice_sort_order_free(out);
    return rc;
}

/* Growable text for the canonical declarations. */
typedef struct text {
    char *s;
    size_t len, cap;
    bool oom;
} text_t;

static void text_add(text_t *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (cdc_array_reserve(t->s, t->cap, t->len + n + 1, 64) != CDC_OK) {
        t->oom = true;
        return;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void text_str(text_t *t, const char *s)
{
    text_add(t, s, strlen(s));
}

/* A column reference as read_name() reads it back; "#<id>" when not in the schema. */
static void text_column(text_t *t, const cdc_ice_schema_t *schema, int32_t id)
{
    int k = cdc_ice_schema_find(schema, id);
    char buf[24];

    if (k < 0) {
        snprintf(buf, sizeof(buf), "#%d", (int)id);
        text_str(t, buf);
        return;
    }
    const char *name = schema->fields[k].name;
    bool bare = *name != '\0' && *name != '"';
    for (const char *p = name; *p && bare; p++)
        bare = !isspace((unsigned char)*p) && *p != '(' && *p != ')' && *p != ',' && *p != '[' &&
               *p != ']';
    if (bare) {
        text_str(t, name);
        return;
    }
    text_str(t, "\"");
    for (const char *p = name; *p; p++) {
        text_add(t, p, 1);
        if (*p == '"') /* doubled inside quotes */
            text_add(t, p, 1);
    }
    text_str(t, "\"");
}

static void text_expr(text_t *t, const cdc_ice_schema_t *schema, int32_t id, cdc_ice_transform_t tr)
{
    char buf[32];

    if (tr.kind == CDC_ICE_TRANSFORM_IDENTITY) {
        text_column(t, schema, id);
        return;
    }
    text_str(t, cdc_ice_transform_string(tr, buf, sizeof(buf)));
    text_str(t, "(");
    text_column(t, schema, id);
    text_str(t, ")");
}

static char *text_done(text_t *t)
{
    if (t->s == NULL && !t->oom)
        text_add(t, "", 0);
    if (t->oom) {
        free(t->s);
        return NULL;
    }
    return t->s;
}

char *cdc_ice_partition_spec_text(const cdc_ice_partition_spec_t *spec,
                                  const cdc_ice_schema_t *schema)
{
    text_t t = {0};

    for (size_t i = 0; i < spec->nfields; i++) {
        if (i > 0)
            text_str(&t, ", ");
        text_expr(&t, schema, spec->fields[i].source_id, spec->fields[i].transform);
    }
    return text_done(&t);
}

char *cdc_ice_sort_order_text(const cdc_ice_sort_order_t *order, const cdc_ice_schema_t *schema)
{
    text_t t = {0};

    for (size_t i = 0; i < order->nfields; i++) {
        const cdc_ice_sort_field_t *f = &order->fields[i];
        if (i > 0)
            text_str(&t, ", ");
        text_expr(&t, schema, f->source_id, f->transform);
        if (f->descending)
            text_str(&t, " desc");
        if (f->nulls_first == f->descending) /* not the direction's default */
            text_str(&t, f->nulls_first ? " nulls first" : " nulls last");
    }
    return text_done(&t);
}

bool cdc_ice_partition_spec_same(const cdc_ice_partition_spec_t *a,
                                 const cdc_ice_partition_spec_t *b)
{
    if (a->nfields != b->nfields)
        return false;
    for (size_t i = 0; i < a->nfields; i++)
        if (a->fields[i].source_id != b->fields[i].source_id ||
            !same_transform(a->fields[i].transform, b->fields[i].transform))
            return false;
    return true;
}

bool cdc_ice_sort_order_same(const cdc_ice_sort_order_t *a, const cdc_ice_sort_order_t *b)
{
    if (a->nfields != b->nfields)
        return false;
    for (size_t i = 0; i < a->nfields; i++) {
        const cdc_ice_sort_field_t *x = &a->fields[i], *y = &b->fields[i];
        if (x->source_id != y->source_id || !same_transform(x->transform, y->transform) ||
            x->descending != y->descending || x->nulls_first != y->nulls_first)
            return false;
    }
    return true;
}

/* ---- JSON ---------------------------------------------------------------------------- */

json_t *cdc_ice_partition_spec_to_jansson(const cdc_ice_partition_spec_t *spec)
{
    json_t *fields = json_array();
    char buf[32];

    for (size_t i = 0; fields != NULL && i < spec->nfields; i++) {
        const cdc_ice_partition_field_t *f = &spec->fields[i];
        json_t *o = json_pack("{s:s, s:s, s:i, s:i}", "name", f->name ? f->name : "", "transform",
                              cdc_ice_transform_string(f->transform, buf, sizeof(buf)), "source-id",
                              (int)f->source_id, "field-id", (int)f->field_id);
        if (o == NULL || json_array_append_new(fields, o) != 0) {
            json_decref(fields);
            return NULL;
        }
    }
    return fields ? json_pack("{s:i, s:o}", "spec-id", (int)spec->spec_id, "fields", fields) : NULL;
}

json_t *cdc_ice_sort_order_to_jansson(const cdc_ice_sort_order_t *order)
{
    json_t *fields = json_array();
    char buf[32];

    for (size_t i = 0; fields != NULL && i < order->nfields; i++) {
        const cdc_ice_sort_field_t *f = &order->fields[i];
        json_t *o = json_pack("{s:s, s:i, s:s, s:s}", "transform",
                              cdc_ice_transform_string(f->transform, buf, sizeof(buf)), "source-id",
                              (int)f->source_id, "direction", f->descending ? "desc" : "asc",
                              "null-order", f->nulls_first ? "nulls-first" : "nulls-last");
        if (o == NULL || json_array_append_new(fields, o) != 0) {
            json_decref(fields);
            return NULL;
        }
    }
    return fields ? json_pack("{s:i, s:o}", "order-id", (int)order->order_id, "fields", fields)
                  : NULL;
}

/* One field's transform; unknown transforms of other writers are not supported. */
static cdc_err_t json_transform(const json_t *fo, const char *what, cdc_ice_transform_t *out,
                                cdc_error_t *e)
{
    const char *t = json_string_value(json_object_get(fo, "transform"));
    if (t == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "%s field has no \"transform\"", what);
    if (cdc_ice_transform_parse(t, out) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_UNSUPPORTED, "%s transform \"%s\" is not supported", what,
                             t);
    return CDC_OK;
}

/* Parses field i (JSON fo) of spec or order `id` into *elem. */
typedef cdc_err_t (*json_field_fn)(const json_t *fo, int32_t id, size_t i, void *elem,
                                   cdc_error_t *e);

/*
 * The id (integer member id_key) and "fields" of a spec or order object `what`: *array
 * gets one element of elem_size bytes per field, filled by parse; *n counts the fields
 * parsed, for the caller's release on failure.
 */
static cdc_err_t json_fields(const json_t *obj, const char *what, const char *id_key, int32_t *id,
                             void **array, size_t elem_size, size_t *n, json_field_fn parse,
                             cdc_error_t *e)
{
    const json_t *fields = json_object_get(obj, "fields"), *fo;
    size_t i;
    cdc_err_t rc;

    if (!json_is_object(obj) || !json_is_integer(json_object_get(obj, id_key)) ||
        !json_is_array(fields))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "%s needs an integer \"%s\" and \"fields\"", what,
                             id_key);
    *id = (int32_t)json_integer_value(json_object_get(obj, id_key));
    if (json_array_size(fields) > 0 &&
        (*array = calloc(json_array_size(fields), elem_size)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    json_array_foreach(fields, i, fo)
    {
        if ((rc = parse(fo, *id, i, (char *)*array + i * elem_size, e)) != CDC_OK)
            return rc;
        (*n)++;
    }
    return CDC_OK;
}

static cdc_err_t spec_field(const json_t *fo, int32_t spec_id, size_t i, void *elem, cdc_error_t *e)
{
    cdc_ice_partition_field_t *f = elem;
    const json_t *src = json_object_get(fo, "source-id"), *fid = json_object_get(fo, "field-id");
    const char *name = json_string_value(json_object_get(fo, "name"));
    cdc_err_t rc;

    if (!json_is_integer(src) || !json_is_integer(fid) || name == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "partition spec %d field %zu needs \"name\", \"source-id\" and "
                             "\"field-id\"",
                             (int)spec_id, i);
    if ((rc = json_transform(fo, "partition", &f->transform, e)) != CDC_OK)
        return rc;
    f->source_id = (int32_t)json_integer_value(src);
    f->field_id = (int32_t)json_integer_value(fid);
    if ((f->name = strdup(name)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    return CDC_OK;
}

cdc_err_t cdc_ice_partition_spec_from_jansson(const json_t *obj, cdc_ice_partition_spec_t *out,
                                              cdc_error_t *e)
{
    void *fields = NULL;
    cdc_err_t rc;

    memset(out, 0, sizeof(*out));
    rc = json_fields(obj, "partition spec", "spec-id", &out->spec_id, &fields, sizeof(*out->fields),
                     &out->nfields, spec_field, e);
    out->fields = fields;
    if (rc != CDC_OK)
        cdc_ice_partition_spec_free(out);
    return rc;
}

static cdc_err_t order_field(const json_t *fo, int32_t order_id, size_t i, void *elem,
                             cdc_error_t *e)
{
    cdc_ice_sort_field_t *f = elem;
    const json_t *src = json_object_get(fo, "source-id");
    const char *dir = json_string_value(json_object_get(fo, "direction"));
    const char *nulls = json_string_value(json_object_get(fo, "null-order"));
    cdc_err_t rc;

    if (!json_is_integer(src))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "sort order %d field %zu has no \"source-id\"",
                             (int)order_id, i);
    if ((rc = json_transform(fo, "sort order", &f->transform, e)) != CDC_OK)
        return rc;
    f->source_id = (int32_t)json_integer_value(src);
    f->descending = dir != NULL && strcasecmp(dir, "desc") == 0;
    f->nulls_first = nulls != NULL ? strcasecmp(nulls, "nulls-first") == 0 : !f->descending;
    return CDC_OK;
}

cdc_err_t cdc_ice_sort_order_from_jansson(const json_t *obj, cdc_ice_sort_order_t *out,
                                          cdc_error_t *e)
{
    void *fields = NULL;
    cdc_err_t rc;

    memset(out, 0, sizeof(*out));
    rc = json_fields(obj, "sort order", "order-id", &out->order_id, &fields, sizeof(*out->fields),
                     &out->nfields, order_field, e);
    out->fields = fields;
    if (rc != CDC_OK)
        cdc_ice_sort_order_free(out);
    return rc;
}

/* ---- memory -------------------------------------------------------------------------- */

cdc_err_t cdc_ice_partition_spec_copy(cdc_ice_partition_spec_t *dst,
                                      const cdc_ice_partition_spec_t *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->spec_id = src->spec_id;
    if (src->nfields == 0)
        return CDC_OK;
    if ((dst->fields = calloc(src->nfields, sizeof(*dst->fields))) == NULL)
        return CDC_ERR_NOMEM;
    for (size_t i = 0; i < src->nfields; i++) {
        dst->fields[i] = src->fields[i];
        dst->nfields++;
        if ((dst->fields[i].name = strdup(src->fields[i].name ? src->fields[i].name : "")) ==
            NULL) {
            cdc_ice_partition_spec_free(dst);
            return CDC_ERR_NOMEM;
        }
    }
    return CDC_OK;
}

cdc_err_t cdc_ice_sort_order_copy(cdc_ice_sort_order_t *dst, const cdc_ice_sort_order_t *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->order_id = src->order_id;
    if (src->nfields == 0)
        return CDC_OK;
    if ((dst->fields = malloc(src->nfields * sizeof(*dst->fields))) == NULL)
        return CDC_ERR_NOMEM;
    memcpy(dst->fields, src->fields, src->nfields * sizeof(*dst->fields));
    dst->nfields = src->nfields;
    return CDC_OK;
}

void cdc_ice_partition_spec_free(cdc_ice_partition_spec_t *spec)
{
    if (spec == NULL)
        return;
    for (size_t i = 0; spec->fields != NULL && i < spec->nfields; i++)
        free(spec->fields[i].name);
    free(spec->fields);
    memset(spec, 0, sizeof(*spec));
}

void cdc_ice_sort_order_free(cdc_ice_sort_order_t *order)
{
    if (order == NULL)
        return;
    free(order->fields);
    memset(order, 0, sizeof(*order));
}

bool cdc_ice_partition_spec_result_fields(const cdc_ice_partition_spec_t *spec,
                                          const cdc_ice_schema_t *schema, cdc_ice_field_t *results)
{
    for (size_t i = 0; i < spec->nfields; i++) {
        const cdc_ice_partition_field_t *f = &spec->fields[i];
        int k = cdc_ice_schema_find(schema, f->source_id);
        if (k < 0 || !cdc_ice_transform_result(f->transform, &schema->fields[k], &results[i]))
            return false;
        results[i].id = f->field_id;
        results[i].name = f->name;
    }
    return true;
}
