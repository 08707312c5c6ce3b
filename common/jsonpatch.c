/*
 * JSON Patch (RFC 6902) on jansson trees (see jsonpatch.h). The document is parsed, the
 * operations run in order on the tree, and it is written back only when all of them
 * succeeded; a failed operation leaves nothing half applied.
 */
#include "common/jsonpatch.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

typedef enum op_kind { OP_ADD, OP_REMOVE, OP_REPLACE, OP_MOVE, OP_COPY, OP_TEST } op_kind_t;

static const char *const op_names[] = {"add", "remove", "replace", "move", "copy", "test"};

typedef struct op {
    op_kind_t kind;
    const char *path; /* borrowed from the patch tree */
    const char *from; /* move, copy */
    json_t *value;    /* add, replace, test (borrowed) */
} op_t;

struct cdc_jsonpatch {
    json_t *root; /* owns the strings and values the operations point to */
    op_t *ops;
    size_t nops;
};

/* Whether s is a JSON Pointer: "" or "/"-separated tokens whose "~" escapes are ~0/~1. */
static bool pointer_valid(const char *s)
{
    if (*s != '\0' && *s != '/')
        return false;
    for (; *s; s++)
        if (*s == '~' && s[1] != '0' && s[1] != '1')
            return false;
    return true;
}

cdc_err_t cdc_jsonpatch_parse(const char *text, size_t len, cdc_jsonpatch_t **out, cdc_error_t *e)
{
    json_error_t je;
    cdc_jsonpatch_t *p = calloc(1, sizeof(*p));
    cdc_err_t rc = CDC_OK;

    if (p == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    p->root = json_loadb(text, len, 0, &je);
    if (p->root == NULL) {
        rc = cdc_error_set(e, CDC_ERR_INVALID, "patch is not JSON: line %d column %d: %s", je.line,
                           je.column, je.text);
        goto fail;
    }
    if (!json_is_array(p->root)) {
        rc = cdc_error_set(e, CDC_ERR_INVALID, "patch is not a JSON array of operations");
        goto fail;
    }
    p->nops = json_array_size(p->root);
    if (p->nops > 0 && (p->ops = calloc(p->nops, sizeof(*p->ops))) == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < p->nops; i++) {
        json_t *o = json_array_get(p->root, i);
        const char *name = json_string_value(json_object_get(o, "op"));
        op_t *op = &p->ops[i];
        size_t k;

        for (k = 0; name != NULL && k < sizeof(op_names) / sizeof(op_names[0]); k++)
            if (strcmp(name, op_names[k]) == 0)
                break;
        if (!json_is_object(o) || name == NULL || k == sizeof(op_names) / sizeof(op_names[0])) {
            rc = cdc_error_set(e, CDC_ERR_INVALID,
                               "patch operation %zu: \"op\" is not one of add, remove, replace, "
                               "move, copy, test",
                               i);
            goto fail;
        }
        op->kind = (op_kind_t)k;
        op->path = json_string_value(json_object_get(o, "path"));
        op->from = json_string_value(json_object_get(o, "from"));
        op->value = json_object_get(o, "value");
        if (op->path == NULL || !pointer_valid(op->path)) {
            rc = cdc_error_set(e, CDC_ERR_INVALID,
                               "patch operation %zu (%s): \"path\" is missing or not a JSON "
                               "Pointer",
                               i, name);
            goto fail;
        }
        if ((op->kind == OP_MOVE || op->kind == OP_COPY) &&
            (op->from == NULL || !pointer_valid(op->from))) {
            rc = cdc_error_set(e, CDC_ERR_INVALID,
                               "patch operation %zu (%s): \"from\" is missing or not a JSON "
                               "Pointer",
                               i, name);
            goto fail;
        }
        if ((op->kind == OP_ADD || op->kind == OP_REPLACE || op->kind == OP_TEST) &&
            op->value == NULL) {
            rc = cdc_error_set(e, CDC_ERR_INVALID, "patch operation %zu (%s): \"value\" is missing",
                               i, name);
            goto fail;
        }
    }
    *out = p;
    return CDC_OK;
fail:
    cdc_jsonpatch_free(p);
    return rc;
}

size_t cdc_jsonpatch_count(const cdc_jsonpatch_t *p)
{
    return p->nops;
}

void cdc_jsonpatch_free(cdc_jsonpatch_t *p)
{
    if (p == NULL)
        return;
    json_decref(p->root);
    free(p->ops);
    free(p);
}

/* ---- JSON Pointer ------------------------------------------------------------------------ */

/* The next token of pointer *s (which is at a '/') unescaped into buf; advances *s. */
static bool next_token(const char **s, char *buf, size_t size)
{
    const char *t = *s + 1;
    size_t n = 0;
    for (; *t != '\0' && *t != '/'; t++) {
        char c = *t;
        if (c == '~') {
            c = t[1] == '1' ? '/' : '~';
            t++;
        }
        if (n + 1 >= size)
            return false;
        buf[n++] = c;
    }
    buf[n] = '\0';
    *s = t;
    return true;
}

/* An array index token: "0" or digits without a leading zero, below size (or <= size
 * when the end is allowed); "-" is the end when end is allowed. -1 otherwise. */
static long array_index(const char *tok, size_t size, bool end)
{
    char *stop;
    long v;
    if (end && strcmp(tok, "-") == 0)
        return (long)size;
    if (tok[0] < '0' || tok[0] > '9' || (tok[0] == '0' && tok[1] != '\0'))
        return -1;
    v = strtol(tok, &stop, 10);
    if (*stop != '\0' || (size_t)v > size || (!end && (size_t)v == size))
        return -1;
    return v;
}

/* A pointer resolved to its parent container and last token; parent NULL: the root. */
typedef struct target {
    json_t *parent;
    char token[1024];
} target_t;

/* Resolves every token of path but the last one in doc. */
static bool resolve_parent(json_t *doc, const char *path, target_t *t)
{
    const char *s = path;
    json_t *cur = doc;

    t->parent = NULL;
    t->token[0] = '\0';
    if (*s == '\0')
        return true;
    for (;;) {
        if (!next_token(&s, t->token, sizeof(t->token)))
            return false;
        if (*s == '\0') {
            t->parent = cur;
            return true;
        }
        if (json_is_object(cur)) {
            cur = json_object_get(cur, t->token);
        } else if (json_is_array(cur)) {
            long i = array_index(t->token, json_array_size(cur), false);
            cur = i >= 0 ? json_array_get(cur, (size_t)i) : NULL;
        } else {
            cur = NULL;
        }
        if (cur == NULL)
            return false;
    }
}

/* The value at path (borrowed), NULL when there is none. */
static json_t *get(json_t *doc, const char *path)
{
    target_t t;
    if (!resolve_parent(doc, path, &t))
        return NULL;
    if (t.parent == NULL)
        return doc;
    if (json_is_object(t.parent))
        return json_object_get(t.parent, t.token);
    if (json_is_array(t.parent)) {
        long i = array_index(t.token, json_array_size(t.parent), false);
        return i >= 0 ? json_array_get(t.parent, (size_t)i) : NULL;
    }
    return NULL;
}

/* ---- operations --------------------------------------------------------------------------- */

/* add (set in an object, insert into an array) or, with replace, replace the value that
 * is there: value (a new reference the call takes in every case) at path of *doc. */
static bool put(json_t **doc, const char *path, json_t *value, bool replace)
{
    target_t t;
    bool ok = false;
    if (!resolve_parent(*doc, path, &t)) {
        json_decref(value);
        return false;
    }
    if (t.parent == NULL) {
        json_decref(*doc);
        *doc = value;
        return true;
    }
    if (json_is_object(t.parent) && (!replace || json_object_get(t.parent, t.token) != NULL)) {
        ok = json_object_set_new(t.parent, t.token, value) == 0;
    } else if (json_is_array(t.parent)) {
        long i = array_index(t.token, json_array_size(t.parent), !replace);
        if (i >= 0) /* the _new calls take the reference also when they fail */
            ok = (replace ? json_array_set_new : json_array_insert_new)(t.parent, (size_t)i,
                                                                        value) == 0;
        else
            json_decref(value);
    } else {
        json_decref(value);
    }
    return ok;
}

/* remove: the value at path (not the root). */
static bool remove_at(json_t *doc, const char *path)
{
    target_t t;
    if (!resolve_parent(doc, path, &t) || t.parent == NULL)
        return false;
    if (json_is_object(t.parent))
        return json_object_del(t.parent, t.token) == 0;
    if (json_is_array(t.parent)) {
        long i = array_index(t.token, json_array_size(t.parent), false);
        return i >= 0 && json_array_remove(t.parent, (size_t)i) == 0;
    }
    return false;
}

/* Equality as RFC 6902's test defines it: numbers by value, whatever their notation. */
static bool equal(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b))
            return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b);
    }
    if (json_typeof(a) != json_typeof(b))
        return false;
    if (json_is_object(a)) {
        const char *k;
        json_t *v;
        if (json_object_size(a) != json_object_size(b))
            return false;
        json_object_foreach(a, k, v)
        {
            json_t *w = json_object_get(b, k);
            if (w == NULL || !equal(v, w))
                return false;
        }
        return true;
    }
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!equal(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    return json_equal(a, b);
}

/* Whether pointer a is a proper prefix of pointer b (b is inside a). */
static bool inside(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && b[n] == '/';
}

/* Runs op on *doc; CDC_OK, or the error with e filled. */
static cdc_err_t run(json_t **doc, const op_t *op, size_t i, cdc_error_t *e)
{
    json_t *v;
    bool ok = false;

    switch (op->kind) {
    case OP_ADD:
        ok = put(doc, op->path, json_deep_copy(op->value), false);
        break;
    case OP_REMOVE:
        ok = remove_at(*doc, op->path);
        break;
    case OP_REPLACE:
        ok = put(doc, op->path, json_deep_copy(op->value), true);
        break;
    case OP_MOVE:
        if (strcmp(op->from, op->path) == 0) {
            ok = get(*doc, op->from) != NULL;
            break;
        }
        if (inside(op->from, op->path))
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "patch operation %zu (move): \"%s\" cannot move into its own "
                                 "child \"%s\"",
                                 i, op->from, op->path);
        v = get(*doc, op->from);
        if (v == NULL)
            break;
        json_incref(v);
        ok = remove_at(*doc, op->from) && put(doc, op->path, json_incref(v), false);
        json_decref(v);
        break;
    case OP_COPY:
        v = get(*doc, op->from);
        ok = v != NULL && put(doc, op->path, json_deep_copy(v), false);
        break;
    case OP_TEST:
        v = get(*doc, op->path);
        if (v != NULL && equal(v, op->value))
            return CDC_OK;
        return cdc_error_set_retriable(e, CDC_ERR_CONFLICT, false,
                                       "patch operation %zu (test): \"%s\" %s", i, op->path,
                                       v == NULL ? "does not exist" : "has another value");
    }
    if (!ok)
        return cdc_error_set(e, CDC_ERR_INVALID, "patch operation %zu (%s): \"%s\" does not exist",
                             i, op_names[op->kind],
                             op->kind == OP_MOVE || op->kind == OP_COPY ? op->from : op->path);
    return CDC_OK;
}

cdc_err_t cdc_jsonpatch_apply(const cdc_jsonpatch_t *p, const char *doc, size_t len, char **out,
                              size_t *out_len, cdc_error_t *e)
{
    json_error_t je;
    json_t *root = json_loadb(doc, len, JSON_DECODE_ANY, &je);
    cdc_err_t rc = CDC_OK;

    *out = NULL;
    *out_len = 0;
    if (root == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID, "payload is not JSON: line %d column %d: %s",
                             je.line, je.column, je.text);
    for (size_t i = 0; i < p->nops && rc == CDC_OK; i++)
        rc = run(&root, &p->ops[i], i, e);
    if (rc == CDC_OK) {
        *out = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        if (*out == NULL)
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        else
            *out_len = strlen(*out);
    }
    json_decref(root);
    return rc;
}
