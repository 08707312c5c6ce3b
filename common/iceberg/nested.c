/*
 * Nested types and the shredding of their values (see nested.h). The value text is
 * scanned here rather than through jansson so that decimals keep their exact digits.
 *
 * A call circle of two files (docs/development.md, "Call circles"): schema.c builds a
 * nested field's type tree with nested.c, and nested.c parses the types of elements and
 * members with schema.c's type parser.
 */
#include "common/iceberg/nested.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/iceberg/decimal.h"
#include "common/iceberg/schema.h"

/* ---- the type tree ------------------------------------------------------------------ */

static cdc_err_t node_from_type(const json_t *type, cdc_ice_node_t *n, cdc_error_t *e);

static cdc_err_t node_named(cdc_ice_node_t *n, int32_t id, const char *name, bool required,
                            const json_t *type, cdc_error_t *e)
{
    n->f.id = id;
    n->f.required = required;
    n->f.name = strdup(name);
    if (n->f.name == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (id <= 0)
        return cdc_error_set(e, CDC_ERR_INVALID, "nested field \"%s\" has no positive id", name);
    return node_from_type(type, n, e);
}

static cdc_err_t node_from_type(const json_t *type, cdc_ice_node_t *n, cdc_error_t *e)
{
    const char *kind;

    if (json_is_string(type)) {
        if (cdc_ice_type_parse(json_string_value(type), &n->f) != CDC_OK ||
            n->f.type == CDC_ICE_LIST || n->f.type == CDC_ICE_STRUCT)
            return cdc_error_set(e, CDC_ERR_INVALID, "unknown type \"%s\" in a nested type",
                                 json_string_value(type));
        return CDC_OK;
    }
    kind = json_string_value(json_object_get(type, "type"));
    if (kind != NULL && strcmp(kind, "list") == 0) {
        const json_t *id = json_object_get(type, "element-id");
        if (!json_is_integer(id) || json_object_get(type, "element") == NULL)
            return cdc_error_set(e, CDC_ERR_INVALID, "a list type needs element-id and element");
        n->f.type = CDC_ICE_LIST;
        n->kids = calloc(1, sizeof(*n->kids));
        if (n->kids == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        n->nkids = 1;
        return node_named(n->kids, (int32_t)json_integer_value(id), "element",
                          json_is_true(json_object_get(type, "element-required")),
                          json_object_get(type, "element"), e);
    }
    if (kind != NULL && strcmp(kind, "struct") == 0) {
        const json_t *fields = json_object_get(type, "fields");
        size_t nf = json_array_size(fields);
        if (!json_is_array(fields) || nf == 0)
            return cdc_error_set(e, CDC_ERR_INVALID, "a struct type needs fields");
        n->f.type = CDC_ICE_STRUCT;
        n->kids = calloc(nf, sizeof(*n->kids));
        if (n->kids == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        n->nkids = nf;
        for (size_t i = 0; i < nf; i++) {
            const json_t *fo = json_array_get(fields, i);
            const char *name = json_string_value(json_object_get(fo, "name"));
            if (name == NULL || !json_is_integer(json_object_get(fo, "id")))
                return cdc_error_set(e, CDC_ERR_INVALID, "a struct field needs id and name");
            cdc_err_t rc = node_named(
                &n->kids[i], (int32_t)json_integer_value(json_object_get(fo, "id")), name,
                json_is_true(json_object_get(fo, "required")), json_object_get(fo, "type"), e);
            if (rc != CDC_OK)
                return rc;
        }
        return CDC_OK;
    }
    if (kind != NULL && strcmp(kind, "map") == 0)
        return cdc_error_set(e, CDC_ERR_UNSUPPORTED, "map types are not supported");
    return cdc_error_set(e, CDC_ERR_INVALID, "not an Iceberg type");
}

void cdc_ice_node_free(cdc_ice_node_t *n)
{
    if (n == NULL)
        return;
    for (size_t i = 0; i < n->nkids; i++)
        cdc_ice_node_free(&n->kids[i]);
    free(n->kids);
    free(n->f.name);
    memset(n, 0, sizeof(*n));
}

static void assign_levels(cdc_ice_node_t *n, int parent_def, int parent_rep, int *leaves)
{
    n->def = parent_def + (n->f.required ? 0 : 1);
    if (n->f.type == CDC_ICE_LIST) {
        n->rep = parent_rep + 1;
        assign_levels(n->kids, n->def + 1, n->rep, leaves);
    } else if (n->f.type == CDC_ICE_STRUCT) {
        for (size_t i = 0; i < n->nkids; i++)
            assign_levels(&n->kids[i], n->def, parent_rep, leaves);
    } else {
        n->leaf = (*leaves)++;
        n->max_rep = parent_rep;
    }
}

cdc_err_t cdc_ice_nested_check_jansson(const json_t *type, cdc_error_t *e)
{
    cdc_ice_node_t n;
    cdc_err_t rc;

    memset(&n, 0, sizeof(n));
    rc = node_from_type(type, &n, e);
    if (rc == CDC_OK && n.f.type != CDC_ICE_LIST && n.f.type != CDC_ICE_STRUCT)
        rc = cdc_error_set(e, CDC_ERR_INVALID, "not a nested type");
    cdc_ice_node_free(&n);
    return rc;
}

cdc_err_t cdc_ice_node_build(const cdc_ice_field_t *field, cdc_ice_node_t *root, cdc_error_t *e)
{
    json_error_t jerr;
    json_t *type = field->nested ? json_loads(field->nested, 0, &jerr) : NULL;
    int leaves = 0;
    cdc_err_t rc;

    memset(root, 0, sizeof(*root));
    if (type == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID, "field \"%s\" has no nested type", field->name);
    rc = node_named(root, field->id, field->name, field->required, type, e);
    json_decref(type);
    if (rc == CDC_OK && root->f.type != field->type)
        rc = cdc_error_set(e, CDC_ERR_INVALID, "field \"%s\": nested type does not match",
                           field->name);
    if (rc != CDC_OK) {
        cdc_ice_node_free(root);
        return rc;
    }
    assign_levels(root, 0, 0, &leaves);
    return CDC_OK;
}

size_t cdc_ice_node_leaves(const cdc_ice_node_t *n)
{
    size_t k = 0;
    if (n->f.type != CDC_ICE_LIST && n->f.type != CDC_ICE_STRUCT)
        return 1;
    for (size_t i = 0; i < n->nkids; i++)
        k += cdc_ice_node_leaves(&n->kids[i]);
    return k;
}

const cdc_ice_node_t *cdc_ice_node_leaf(const cdc_ice_node_t *root, int leaf,
                                        const cdc_ice_node_t **path, size_t cap, size_t *depth)
{
    const cdc_ice_node_t *n = root;

    *depth = 0;
    for (;;) {
        if (*depth < cap)
            path[*depth] = n;
        (*depth)++;
        if (n->f.type != CDC_ICE_LIST && n->f.type != CDC_ICE_STRUCT)
            return n->leaf == leaf ? n : NULL;
        const cdc_ice_node_t *next = NULL;
        for (size_t i = 0; i < n->nkids && next == NULL; i++) {
            int first = -1;
            const cdc_ice_node_t *k = &n->kids[i];
            while (k->f.type == CDC_ICE_LIST || k->f.type == CDC_ICE_STRUCT)
                k = &k->kids[0];
            first = k->leaf;
            if (leaf >= first && (size_t)(leaf - first) < cdc_ice_node_leaves(&n->kids[i]))
                next = &n->kids[i];
        }
        if (next == NULL)
            return NULL;
        n = next;
    }
}

/* ---- scanning the value text --------------------------------------------------------- */

typedef struct scan {
    const char *p, *end;
    cdc_buf_t str; /* the last string, unescaped */
    cdc_buf_t raw; /* decoded binary */
    cdc_ice_entry_fn fn;
    void *ctx;
    char *why;
    size_t whylen;
    bool oom;
} scan_t;

static void ws(scan_t *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static bool fail(scan_t *s, const char *fmt, const char *name)
{
    if (s->why[0] == '\0')
        snprintf(s->why, s->whylen, fmt, name);
    return false;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static void put_utf8(cdc_buf_t *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    cdc_buf_put(b, u, n);
}

static bool hex4(scan_t *s, uint32_t *cp)
{
    *cp = 0;
    if (s->end - s->p < 4)
        return false;
    for (int i = 0; i < 4; i++) {
        int h = hexval(s->p[i]);
        if (h < 0)
            return false;
        *cp = *cp << 4 | (uint32_t)h;
    }
    s->p += 4;
    return true;
}

/* A JSON string at s->p (the opening quote) into s->str. */
static bool scan_string(scan_t *s)
{
    cdc_buf_reset(&s->str);
    s->p++;
    while (s->p < s->end && *s->p != '"') {
        char c = *s->p++;
        if (c != '\\') {
            cdc_buf_putc(&s->str, c);
            continue;
        }
        if (s->p >= s->end)
            return false;
        c = *s->p++;
        switch (c) {
        case 'b':
            cdc_buf_putc(&s->str, '\b');
            break;
        case 'f':
            cdc_buf_putc(&s->str, '\f');
            break;
        case 'n':
            cdc_buf_putc(&s->str, '\n');
            break;
        case 'r':
            cdc_buf_putc(&s->str, '\r');
            break;
        case 't':
            cdc_buf_putc(&s->str, '\t');
            break;
        case 'u': {
            uint32_t cp, lo;
            if (!hex4(s, &cp))
                return false;
            if (cp >= 0xD800 && cp < 0xDC00 && s->end - s->p >= 6 && s->p[0] == '\\' &&
                s->p[1] == 'u') {
                s->p += 2;
                if (!hex4(s, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return false;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(&s->str, cp);
            break;
        }
        default:
            cdc_buf_putc(&s->str, c);
            break;
        }
    }
    if (s->p >= s->end)
        return false;
    s->p++;
    if (s->str.oom)
        s->oom = true;
    return !s->oom;
}

/* Skips one JSON value of any kind. */
static bool skip_value(scan_t *s, int depth)
{
    ws(s);
    if (s->p >= s->end || depth > 64)
        return false;
    if (*s->p == '"')
        return scan_string(s);
    if (*s->p == '[' || *s->p == '{') {
        char close = *s->p == '[' ? ']' : '}';
        s->p++;
        ws(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return true;
        }
        for (;;) {
            if (close == '}') {
                ws(s);
                if (s->p >= s->end || *s->p != '"' || !scan_string(s))
                    return false;
                ws(s);
                if (s->p >= s->end || *s->p++ != ':')
                    return false;
            }
            if (!skip_value(s, depth + 1))
                return false;
            ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->end && *s->p == close) {
                s->p++;
                return true;
            }
            return false;
        }
    }
    while (s->p < s->end && *s->p != ',' && *s->p != ']' && *s->p != '}' && *s->p != ' ' &&
           *s->p != '\n' && *s->p != '\t' && *s->p != '\r')
        s->p++;
    return true;
}

static bool is_null_at(scan_t *s)
{
    ws(s);
    if (s->end - s->p >= 4 && memcmp(s->p, "null", 4) == 0) {
        s->p += 4;
        return true;
    }
    return false;
}

/* Empty entries for every leaf under n: the value ends above it at (rep, def). */
static bool emit_empty(scan_t *s, const cdc_ice_node_t *n, int rep, int def)
{
    if (n->f.type != CDC_ICE_LIST && n->f.type != CDC_ICE_STRUCT)
        return s->fn == NULL || s->fn(s->ctx, n, rep, def, NULL) || (s->oom = true, false);
    for (size_t i = 0; i < n->nkids; i++)
        if (!emit_empty(s, &n->kids[i], rep, def))
            return false;
    return true;
}

static bool parse_int(const char *t, size_t n, int64_t lo, int64_t hi, int64_t *out)
{
    char buf[32];
    char *endp;
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, t, n);
    buf[n] = '\0';
    errno = 0;
    long long v = strtoll(buf, &endp, 10);
    if (errno != 0 || *endp != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_uuid(const uint8_t *t, size_t n, uint8_t out[16])
{
    size_t k = 0;
    if (n != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (t[i] != '-')
                return false;
            continue;
        }
        int h = hexval((char)t[i]), l = i + 1 < 36 ? hexval((char)t[i + 1]) : -1;
        if (h < 0 || l < 0)
            return false;
        out[k++] = (uint8_t)(h << 4 | l);
        i++;
    }
    return k == 16;
}

/* A primitive leaf's value at s->p. */
static bool shred_leaf(scan_t *s, const cdc_ice_node_t *n, int rep, int def)
{
    cdc_ice_value_t v;
    const char *tok = s->p;
    bool str = s->p < s->end && *s->p == '"';
    const char *t;
    size_t len;
    int64_t i;

    memset(&v, 0, sizeof(v));
    if (str) {
        if (!scan_string(s))
            return s->oom ? false : fail(s, "a malformed string in \"%s\"", n->f.name);
        t = s->str.data ? s->str.data : "";
        len = s->str.len;
    } else {
        if (!skip_value(s, 0))
            return fail(s, "a malformed value in \"%s\"", n->f.name);
        t = tok;
        len = (size_t)(s->p - tok);
        if (len > 0 && (*t == '[' || *t == '{'))
            return fail(s, "a list or object where \"%s\" expects a single value", n->f.name);
    }
    switch (n->f.type) {
    case CDC_ICE_BOOLEAN:
        if (str ||
            !((len == 4 && memcmp(t, "true", 4) == 0) || (len == 5 && memcmp(t, "false", 5) == 0)))
            return fail(s, "\"%s\" expects true or false", n->f.name);
        v.v.b = len == 4;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        if (str || !parse_int(t, len, INT32_MIN, INT32_MAX, &i))
            return fail(s, "\"%s\" expects a 32-bit integer", n->f.name);
        v.v.i32 = (int32_t)i;
        break;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        if (str || !parse_int(t, len, INT64_MIN, INT64_MAX, &i))
            return fail(s, "\"%s\" expects a 64-bit integer", n->f.name);
        v.v.i64 = i;
        break;
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE: {
        char buf[64];
        char *endp;
        double d;
        if (len == 0 || len >= sizeof(buf))
            return fail(s, "\"%s\" expects a number", n->f.name);
        memcpy(buf, t, len);
        buf[len] = '\0';
        if (str && strcmp(buf, "NaN") == 0)
            d = NAN;
        else if (str && strcmp(buf, "Infinity") == 0)
            d = INFINITY;
        else if (str && strcmp(buf, "-Infinity") == 0)
            d = -INFINITY;
        else if (str || (d = strtod(buf, &endp), *endp != '\0'))
            return fail(s, "\"%s\" expects a number", n->f.name);
        if (n->f.type == CDC_ICE_FLOAT)
            v.v.f32 = (float)d;
        else
            v.v.f64 = d;
        break;
    }
    case CDC_ICE_DECIMAL:
        if (cdc_ice_decimal_parse(t, len, n->f.precision, n->f.scale, &v.v.dec) != CDC_OK)
            return fail(s, "\"%s\" expects a decimal that fits its precision and scale", n->f.name);
        break;
    case CDC_ICE_STRING:
        if (!str)
            return fail(s, "\"%s\" expects a string", n->f.name);
        v.v.bytes.ptr = (const uint8_t *)t;
        v.v.bytes.len = len;
        break;
    case CDC_ICE_UUID:
        if (!str || !parse_uuid((const uint8_t *)t, len, v.v.uuid))
            return fail(s, "\"%s\" expects a uuid", n->f.name);
        break;
    case CDC_ICE_BINARY: {
        size_t blen = 0;
        char *raw = str ? cdc_base64_decode(t, len, &blen) : NULL;
        if (raw == NULL)
            return fail(s, "\"%s\" expects base64", n->f.name);
        cdc_buf_reset(&s->raw);
        cdc_buf_put(&s->raw, raw, blen);
        free(raw);
        if (s->raw.oom)
            return s->oom = true, false;
        v.v.bytes.ptr = (const uint8_t *)(s->raw.data ? s->raw.data : "");
        v.v.bytes.len = blen;
        break;
    }
    default:
        return fail(s, "\"%s\" has an unsupported type", n->f.name);
    }
    if (s->fn != NULL && !s->fn(s->ctx, n, rep, def, &v))
        return s->oom = true, false;
    return true;
}

static bool shred(scan_t *s, const cdc_ice_node_t *n, int rep, int parent_def, int depth);

static bool shred_list(scan_t *s, const cdc_ice_node_t *n, int rep, int depth)
{
    size_t k = 0;
    s->p++; /* [ */
    ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return emit_empty(s, n->kids, rep, n->def);
    }
    for (;;) {
        if (!shred(s, n->kids, k == 0 ? rep : n->rep, n->def + 1, depth + 1))
            return false;
        k++;
        ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == ']') {
            s->p++;
            return true;
        }
        return fail(s, "a malformed list in \"%s\"", n->f.name);
    }
}

static bool shred_struct(scan_t *s, const cdc_ice_node_t *n, int rep, int depth)
{
    const char *start = s->p;
    /* each field in order: find its member (objects are small; members in any order) */
    for (size_t i = 0; i < n->nkids; i++) {
        const cdc_ice_node_t *k = &n->kids[i];
        bool found = false;
        s->p = start + 1;
        ws(s);
        if (s->p < s->end && *s->p == '}')
            s->p++;
        else
            for (;;) {
                ws(s);
                if (s->p >= s->end || *s->p != '"' || !scan_string(s))
                    return s->oom ? false : fail(s, "a malformed object in \"%s\"", n->f.name);
                bool match = s->str.len == strlen(k->f.name) &&
                             memcmp(s->str.data, k->f.name, s->str.len) == 0;
                ws(s);
                if (s->p >= s->end || *s->p++ != ':')
                    return fail(s, "a malformed object in \"%s\"", n->f.name);
                if (match && !found) {
                    found = true;
                    if (!shred(s, k, rep, n->def, depth + 1))
                        return false;
                } else if (!skip_value(s, depth + 1)) {
                    return fail(s, "a malformed object in \"%s\"", n->f.name);
                }
                ws(s);
                if (s->p < s->end && *s->p == ',') {
                    s->p++;
                    continue;
                }
                if (s->p < s->end && *s->p == '}') {
                    s->p++;
                    break;
                }
                return fail(s, "a malformed object in \"%s\"", n->f.name);
            }
        if (!found) {
            if (k->f.required)
                return fail(s, "required field \"%s\" is missing", k->f.name);
            if (!emit_empty(s, k, rep, n->def))
                return false;
        }
    }
    if (n->nkids == 0 && !skip_value(s, depth))
        return fail(s, "a malformed object in \"%s\"", n->f.name);
    return true;
}

static bool shred(scan_t *s, const cdc_ice_node_t *n, int rep, int parent_def, int depth)
{
    if (depth > 64)
        return fail(s, "\"%s\" nests too deep", n->f.name);
    if (is_null_at(s)) {
        if (n->f.required)
            return fail(s, "a null in required \"%s\"", n->f.name);
        return emit_empty(s, n, rep, parent_def);
    }
    if (s->p >= s->end)
        return fail(s, "a value of \"%s\" ends early", n->f.name);
    if (n->f.type == CDC_ICE_LIST) {
        if (*s->p != '[')
            return fail(s, "\"%s\" expects a list", n->f.name);
        return shred_list(s, n, rep, depth);
    }
    if (n->f.type == CDC_ICE_STRUCT) {
        if (*s->p != '{')
            return fail(s, "\"%s\" expects an object", n->f.name);
        return shred_struct(s, n, rep, depth);
    }
    return shred_leaf(s, n, rep, n->def);
}

cdc_err_t cdc_ice_nested_shred(const cdc_ice_node_t *root, const char *json, size_t len,
                               cdc_ice_entry_fn fn, void *ctx, char *why, size_t whylen)
{
    scan_t s;
    bool ok;

    memset(&s, 0, sizeof(s));
    s.fn = fn;
    s.ctx = ctx;
    s.why = why;
    s.whylen = whylen;
    if (whylen > 0)
        why[0] = '\0';
    if (json == NULL) {
        ok = !root->f.required ? emit_empty(&s, root, 0, 0)
                               : fail(&s, "a null in required \"%s\"", root->f.name);
    } else {
        s.p = json;
        s.end = json + len;
        ok = shred(&s, root, 0, 0, 0);
        ws(&s);
        if (ok && s.p != s.end)
            ok = fail(&s, "trailing text after the value of \"%s\"", root->f.name);
    }
    cdc_buf_free(&s.str);
    cdc_buf_free(&s.raw);
    if (s.oom)
        return CDC_ERR_NOMEM;
    return ok ? CDC_OK : CDC_ERR_INVALID;
}

json_t *cdc_ice_nested_leaf_json(const cdc_ice_field_t *f, const cdc_ice_value_t *v)
{
    char buf[64];
    double d;

    switch (f->type) {
    case CDC_ICE_BOOLEAN:
        return json_boolean(v->v.b);
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        return json_integer(v->v.i32);
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE:
        d = f->type == CDC_ICE_FLOAT ? (double)v->v.f32 : v->v.f64;
        if (isnan(d))
            return json_string("NaN");
        if (isinf(d))
            return json_string(d > 0 ? "Infinity" : "-Infinity");
        return json_real(d);
    case CDC_ICE_DECIMAL:
        cdc_ice_decimal_format(v->v.dec, f->scale, buf, sizeof(buf));
        return json_string(buf);
    case CDC_ICE_STRING:
        return json_stringn((const char *)v->v.bytes.ptr, v->v.bytes.len);
    case CDC_ICE_UUID:
        for (int i = 0, o = 0; i < 16; i++)
            o += snprintf(buf + o, sizeof(buf) - (size_t)o, "%s%02x",
                          i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", v->v.uuid[i]);
        return json_string(buf);
    case CDC_ICE_BINARY: {
        char *b = cdc_base64_encode(v->v.bytes.ptr, v->v.bytes.len);
        json_t *j = b ? json_string(b) : NULL;
        free(b);
        return j;
    }
    default: /* LONG, TIME, TIMESTAMP, TIMESTAMPTZ */
        return json_integer(v->v.i64);
    }
}
