/*
 * A small recursive-descent JSON parser for the plain subset of JSON that change events
 * use (see jsonscan.h). It builds the same jansson tree json_loadb would and bails out on
 * anything it does not handle exactly like jansson, leaving that to json_loadb.
 */
#include "worker/jsonscan.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"

enum { SCAN_MAX_DEPTH = 64, SCAN_MAX_DIGITS = 18 };

typedef struct scan {
    const char *p, *end;
    char *tmp; /* unescape buffer, grown on demand */
    size_t tmp_cap;
} scan_t;

static json_t *scan_value(scan_t *s, int depth);

static void skip_ws(scan_t *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

/*
 * Scans a string body after its opening quote. On success *out and *len give its bytes
 * (in the input, or in s->tmp when it had escapes) and s->p is past the closing quote.
 */
static bool scan_string(scan_t *s, const char **out, size_t *len)
{
    const char *start = s->p;
    size_t n = 0;
    while (s->p < s->end) {
        unsigned char ch = (unsigned char)*s->p;
        if (ch == '"') {
            *out = start;
            *len = (size_t)(s->p - start);
            s->p++;
            return true;
        }
        if (ch == '\\')
            break;
        if (ch < 0x20 || ch >= 0x80)
            return false; /* control bytes are errors; non-ASCII needs UTF-8 checks */
        s->p++;
    }
    if (s->p >= s->end)
        return false;
    /* Escapes: copy into the scratch buffer. */
    n = (size_t)(s->p - start);
    size_t need = n + (size_t)(s->end - s->p);
    if (cdc_array_reserve(s->tmp, s->tmp_cap, need, need) != CDC_OK)
        return false;
    memcpy(s->tmp, start, n);
    while (s->p < s->end) {
        unsigned char ch = (unsigned char)*s->p++;
        if (ch == '"') {
            *out = s->tmp;
            *len = n;
            return true;
        }
        if (ch < 0x20 || ch >= 0x80)
            return false;
        if (ch != '\\') {
            s->tmp[n++] = (char)ch;
            continue;
        }
        if (s->p >= s->end)
            return false;
        int esc = cdc_json_unescape((unsigned char)*s->p++);
        if (esc < 0)
            return false; /* \uXXXX (surrogates, NUL) and invalid escapes: jansson decides */
        s->tmp[n++] = (char)esc;
    }
    return false;
}

static json_t *scan_number(scan_t *s)
{
    bool neg = false;
    int digits = 0;
    int64_t v = 0;
    if (*s->p == '-') {
        neg = true;
        s->p++;
    }
    if (s->p >= s->end || *s->p < '0' || *s->p > '9')
        return NULL;
    if (*s->p == '0' && s->p + 1 < s->end && s->p[1] >= '0' && s->p[1] <= '9')
        return NULL; /* leading zero: an error for jansson */
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
        if (++digits > SCAN_MAX_DIGITS)
            return NULL;
        v = v * 10 + (*s->p++ - '0');
    }
    if (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E'))
        return NULL; /* reals: left to jansson's strtod */
    return json_integer(neg ? -v : v);
}

static bool literal(scan_t *s, const char *word, size_t n)
{
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return false;
    s->p += n;
    return true;
}

/* What follows a member of an object or array: ',' (more), the closing bracket, or junk. */
typedef enum { SEP_MORE, SEP_CLOSED, SEP_BAD } sep_t;

static sep_t next_member(scan_t *s, char close)
{
    skip_ws(s);
    if (s->p >= s->end)
        return SEP_BAD;
    if (*s->p == ',' || *s->p == close)
        return *s->p++ == ',' ? SEP_MORE : SEP_CLOSED;
    return SEP_BAD;
}

/* One "key": value member of an object, added to obj; false on anything else. */
static bool scan_member(scan_t *s, json_t *obj, int depth)
{
    const char *key;
    size_t klen;
    json_t *v;
    char *k;
    bool ok;
    skip_ws(s);
    if (s->p >= s->end || *s->p != '"')
        return false;
    s->p++;
    if (!scan_string(s, &key, &klen))
        return false;
    /* The value's string may reuse the scratch buffer: keep the key apart. */
    k = key == s->tmp ? strndup(key, klen) : NULL;
    if (key == s->tmp && k == NULL)
        return false;
    skip_ws(s);
    if (s->p >= s->end || *s->p != ':') {
        free(k);
        return false;
    }
    s->p++;
    v = scan_value(s, depth + 1);
    /* (setn_new consumes v on failure) */
    ok = v != NULL && json_object_setn_new_nocheck(obj, k ? k : key, klen, v) == 0;
    free(k);
    return ok;
}

/* One element of an array, appended to arr. */
static bool scan_element(scan_t *s, json_t *arr, int depth)
{
    json_t *v = scan_value(s, depth + 1);
    return v != NULL && json_array_append_new(arr, v) == 0;
}

/* An object or an array (after its opening bracket). */
static json_t *scan_list(scan_t *s, int depth, bool object)
{
    json_t *list = object ? json_object() : json_array();
    char close = object ? '}' : ']';
    if (list == NULL)
        return NULL;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return list;
    }
    for (;;) {
        if (!(object ? scan_member(s, list, depth) : scan_element(s, list, depth)))
            goto fail;
        switch (next_member(s, close)) {
        case SEP_MORE:
            continue;
        case SEP_CLOSED:
            return list;
        default:
            goto fail;
        }
    }
fail:
    json_decref(list);
    return NULL;
}

static json_t *scan_value(scan_t *s, int depth)
{
    const char *str;
    size_t len;
    if (depth > SCAN_MAX_DEPTH)
        return NULL;
    skip_ws(s);
    if (s->p >= s->end)
        return NULL;
    switch (*s->p) {
    case '{':
        s->p++;
        return scan_list(s, depth, true);
    case '[':
        s->p++;
        return scan_list(s, depth, false);
    case '"':
        s->p++;
        return scan_string(s, &str, &len) ? json_stringn_nocheck(str, len) : NULL;
    case 't':
        return literal(s, "true", 4) ? json_true() : NULL;
    case 'f':
        return literal(s, "false", 5) ? json_false() : NULL;
    case 'n':
        return literal(s, "null", 4) ? json_null() : NULL;
    default:
        return scan_number(s);
    }
}

json_t *cdc_json_scan(const char *buf, size_t len)
{
    scan_t s = {NULL, NULL, NULL, 0};
    json_t *root;
    if (buf == NULL)
        return NULL;
    s.p = buf;
    s.end = buf + len;
    skip_ws(&s);
    if (s.p >= s.end || (*s.p != '{' && *s.p != '['))
        return NULL; /* jansson without JSON_DECODE_ANY wants an object or array */
    root = scan_value(&s, 0);
    free(s.tmp);
    if (root == NULL)
        return NULL;
    skip_ws(&s);
    if (s.p != s.end) {
        json_decref(root);
        return NULL;
    }
    return root;
}

json_t *cdc_json_load(const char *buf, size_t len, json_error_t *err)
{
    json_t *root = cdc_json_scan(buf, len);
    return root != NULL ? root : json_loadb(buf, len, 0, err);
}

/* ---- per-thread arena for short-lived trees (cdc_json_load_scoped) ------------------ */

enum { ARENA_BYTES = 128 * 1024 };

typedef struct arena {
    uint8_t *base; /* ARENA_BYTES, allocated on first use, kept for the thread's life */
    size_t used;
    bool active; /* allocations go to the arena (only while the fast scanner runs) */
} arena_t;

static __thread arena_t tl_arena;

static void *arena_malloc(size_t n)
{
    arena_t *a = &tl_arena;
    if (a->active) {
        size_t need = (n + 15) & ~(size_t)15;
        if (need <= ARENA_BYTES - a->used) {
            void *p = a->base + a->used;
            a->used += need;
            return p;
        }
    }
    return malloc(n); /* inactive, or the arena is full */
}

static void arena_free(void *p)
{
    const arena_t *a = &tl_arena;
    uintptr_t u = (uintptr_t)p, b = (uintptr_t)a->base;
    if (a->base != NULL && u >= b && u < b + ARENA_BYTES)
        return; /* released all at once by cdc_json_scope_end */
    free(p);
}

/*
 * Installed before main (and before any thread starts): outside an active arena the
 * functions are exactly malloc and free, so values jansson allocated before (or in other
 * threads, or in other libraries using jansson) are unaffected.
 */
__attribute__((constructor)) static void arena_install(void)
{
    json_set_alloc_funcs(arena_malloc, arena_free);
}

json_t *cdc_json_load_scoped(const char *buf, size_t len, json_error_t *err)
{
    arena_t *a = &tl_arena;
    json_t *root;
    json_malloc_t fm;
    json_free_t ff;
    json_get_alloc_funcs(&fm, &ff);
    if (a->base == NULL && fm == arena_malloc)
        a->base = malloc(ARENA_BYTES);
    if (a->base != NULL) {
        a->used = 0;
        a->active = true;
    }
    root = cdc_json_scan(buf, len);
    a->active = false;
    return root != NULL ? root : json_loadb(buf, len, 0, err);
}

void cdc_json_scope_end(void)
{
    tl_arena.used = 0;
}
