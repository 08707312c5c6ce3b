/*
 * Direct decoder of the capture's own change events (capture/event.c writes them):
 *   {"before":{..}|null,"after":{..}|null,"source":{..,"lsn":..,"txId":..,"ts_ms":..,
 *    "sequence":"[\"c\",\"l\"]",..},"op":"c","ts_ms":..[,"unchanged_toast":[..]]}
 * It reads the document once, left to right, without building a jansson tree: row images
 * become a flat list of (key, scalar) members in a scratch buffer, and once the op and the
 * schema version are known they are converted straight into the change's rows with the
 * same converter the tree path uses (decode_int.h). Strings are unescaped into the scratch
 * buffer (one copy); nothing is allocated per token.
 *
 * Exactness rule: it succeeds only where the general decoder (cdc_decode_tree) would have
 * succeeded with the same result, and otherwise gives up (returns false) so that decoder
 * runs and produces the result or the error. It validates the whole document as jansson
 * would, and gives up on what it does not reproduce exactly: non-canonical shapes
 * (Connect envelopes, flattened events, truncates, a missing "op"), duplicate keys that
 * matter, \u0000 and unpaired surrogates, integers of more than 18 digits, reals that
 * overflow or underflow, deep nesting, objects or arrays as column values, and every
 * value the converter rejects (type mismatch, null in a required column, missing key).
 *
 * A call circle of two files, one decoder with two paths (docs/development.md, "Call
 * circles"): decode.c tries the direct path (decode_fast.c) first, and the direct path
 * uses decode.c's small helpers (placeholders, sequence text, the snapshot tag, clearing
 * a change).
 */
#include "worker/decode_int.h"

#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/hex.h"
#include "worker/jsonscan.h"

enum {
    FX_MAX_DEPTH = 32,       /* nesting beyond this: the tree path decides */
    FX_STACK_SCRATCH = 8192, /* events up to this size need no heap scratch */
    FX_STACK_MEMBERS = 96,   /* row members held on the stack */
    FX_STACK_COLS = 256,     /* columns whose "seen" flags fit on the stack */
    FX_MAX_INT_DIGITS = 18,  /* always within json_int_t: no overflow check needed */
};

/* A string at least this long is unescaped into a buffer of its own, which a string
 * column then takes as its value: a large row's text is not copied once more out of the
 * scratch buffer (docs/worker.md, "Large rows"). */
#define FX_BIG_STRING ((size_t)1 << 20)

#define ONES UINT64_C(0x0101010101010101)

typedef struct member {
    const char *key; /* in the scratch buffer, NUL-terminated */
    size_t klen;
    cdc_jv_t v;
} member_t;

/* Where a row image (or the unchanged_toast list) sits in the member list. */
typedef enum { SPAN_ABSENT = 0, SPAN_OTHER, SPAN_LIST } span_state_t;

typedef struct span {
    span_state_t state; /* SPAN_LIST: an object (rows) or array (unchanged_toast) */
    size_t first, n;
} span_t;

typedef struct fx {
    const char *p, *end;
    char *out; /* next free byte of the scratch buffer (never outgrows the input) */
    member_t *m;
    size_t nm, cap;
    bool m_heap;
    char **big; /* strings of FX_BIG_STRING bytes or more, each malloc'd (NULL: taken) */
    size_t nbig, bigcap;
} fx_t;

/* Byte classes inside a string: 0 = copy as is, 1 = needs a look. */
static const unsigned char str_special[256] = {
    [0 ... 0x1f] = 1, ['"'] = 1, ['\\'] = 1, [0x80 ... 0xff] = 1};

static inline void skip_ws(fx_t *f)
{
    if (f->p < f->end && (unsigned char)*f->p > ' ')
        return; /* the common case: no whitespace (every JSON blank is <= ' ') */
    while (f->p < f->end && (*f->p == ' ' || *f->p == '\n' || *f->p == '\r' || *f->p == '\t'))
        f->p++;
}

/* Skips whitespace and consumes ch; false when something else comes. */
static bool expect(fx_t *f, char ch)
{
    skip_ws(f);
    if (f->p >= f->end || *f->p != ch)
        return false;
    f->p++;
    return true;
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Length of the strictly valid UTF-8 sequence at p (what jansson accepts), 0 if invalid. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned char lo = 0x80, hi = 0xBF;
    size_t n;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) {
        n = 2;
    } else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        n = 3;
        if (p[0] == 0xE0)
            lo = 0xA0; /* overlong */
        else if (p[0] == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        n = 4;
        if (p[0] == 0xF0)
            lo = 0x90; /* overlong */
        else if (p[0] == 0xF4)
            hi = 0x8F; /* beyond U+10FFFF */
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((p[k] & 0xC0) != 0x80)
            return 0;
    return n;
}

static bool hex4(const unsigned char *p, const unsigned char *end, uint32_t *out)
{
    uint32_t v = 0;
    if (end - p < 4)
        return false;
    for (int k = 0; k < 4; k++) {
        int d = cdc_hex_digit((char)p[k]);
        if (d < 0)
            return false;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return true;
}

static char *utf8_put(char *o, uint32_t u)
{
    if (u < 0x80) {
        *o++ = (char)u;
    } else if (u < 0x800) {
        *o++ = (char)(0xC0 | u >> 6);
        *o++ = (char)(0x80 | (u & 0x3F));
    } else if (u < 0x10000) {
        *o++ = (char)(0xE0 | u >> 12);
        *o++ = (char)(0x80 | (u >> 6 & 0x3F));
        *o++ = (char)(0x80 | (u & 0x3F));
    } else {
        *o++ = (char)(0xF0 | u >> 18);
        *o++ = (char)(0x80 | (u >> 12 & 0x3F));
        *o++ = (char)(0x80 | (u >> 6 & 0x3F));
        *o++ = (char)(0x80 | (u & 0x3F));
    }
    return o;
}

/*
 * A string body after its opening quote, unescaped into the scratch buffer and
 * NUL-terminated there. The output never outgrows the input it came from (the closing
 * quote pays for the NUL), so the scratch buffer needs no bounds checks.
 */
static bool scan_string(fx_t *f, const char **s, size_t *n)
{
    const unsigned char *p = (const unsigned char *)f->p, *end = (const unsigned char *)f->end;
    char *base = f->out, *o;
    bool big = false;
    if ((size_t)(end - p) > FX_BIG_STRING) {
        /* its closing quote: the first one not escaped */
        const unsigned char *q = p;
        while ((q = memchr(q, '"', (size_t)(end - q))) != NULL) {
            size_t bs = 0;
            while (q - bs > p && q[-1 - (ptrdiff_t)bs] == '\\')
                bs++;
            if (bs % 2 == 0)
                break;
            q++;
        }
        if (q != NULL && (size_t)(q - p) >= FX_BIG_STRING) {
            /* (8 bytes more: the loop below stores words before it checks them) */
            if (cdc_array_reserve(f->big, f->bigcap, f->nbig + 1, 4) != CDC_OK ||
                (base = malloc((size_t)(q - p) + 9)) == NULL)
                return false;
            f->big[f->nbig++] = base;
            big = true;
        }
    }
    o = base;
    for (;;) {
        /* Plain bytes eight at a time: each word is stored before it is checked, which
         * stays inside the scratch buffer (o never runs ahead of p, and p + 8 <= end). */
        while (end - p >= 8) {
            uint64_t x, hit;
            memcpy(&x, p, 8);
            memcpy(o, &x, 8);
            hit = ((x - ONES * 0x20) & ~x) |                          /* < 0x20 (or >= 0x80) */
                  (((x ^ ONES * '"') - ONES) & ~(x ^ ONES * '"')) |   /* '"' */
                  (((x ^ ONES * '\\') - ONES) & ~(x ^ ONES * '\\')) | /* '\\' */
                  x;                                                  /* >= 0x80 */
            hit &= ONES * 0x80;
            if (hit != 0) {
                /* the lowest flagged byte is exact (false positives only sit above) */
                size_t k = (size_t)__builtin_ctzll(hit) / 8;
                p += k;
                o += k;
                break;
            }
            p += 8;
            o += 8;
        }
        while (p < end && !str_special[*p])
            *o++ = (char)*p++;
        if (p >= end)
            return false;
        if (*p == '"') {
            p++;
            break;
        }
        if (*p >= 0x80) {
            size_t k = utf8_seq(p, end);
            if (k == 0)
                return false;
            memcpy(o, p, k);
            o += k;
            p += k;
            continue;
        }
        if (*p != '\\' || ++p >= end)
            return false; /* control characters are errors for jansson */
        if (*p != 'u') {
            int ch = cdc_json_unescape(*p++);
            if (ch < 0)
                return false;
            *o++ = (char)ch;
        } else {
            uint32_t u, lo;
            p++;
            if (!hex4(p, end, &u) || u == 0)
                return false; /* \u0000 is an error without JSON_ALLOW_NUL */
            p += 4;
            if (u >= 0xDC00 && u <= 0xDFFF)
                return false;
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return false;
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            o = utf8_put(o, u);
        }
    }
    *o = '\0';
    *s = base;
    *n = (size_t)(o - base);
    if (!big)
        f->out = o + 1;
    f->p = (const char *)p;
    return true;
}

/* A JSON number as jansson reads it: integers of up to 18 digits exactly, reals with
 * strtod (under a locale whose radix character is '.'). */
static bool scan_number(fx_t *f, cdc_jv_t *v)
{
    const char *p = f->p, *start = f->p, *end = f->end;
    int64_t x = 0;
    int nd = 0;
    bool neg = false;

    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    if (p >= end || !is_digit(*p))
        return false;
    if (*p == '0') {
        if (++p < end && is_digit(*p))
            return false; /* leading zero */
    } else {
        while (p < end && is_digit(*p)) {
            if (++nd > FX_MAX_INT_DIGITS)
                return false;
            x = x * 10 + (*p++ - '0');
        }
    }
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) {
        const struct lconv *lc;
        char *e;
        size_t n;
        if (*p == '.') {
            if (++p >= end || !is_digit(*p))
                return false;
            while (p < end && is_digit(*p))
                p++;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
            p++;
            if (p < end && (*p == '+' || *p == '-'))
                p++;
            if (p >= end || !is_digit(*p))
                return false;
            while (p < end && is_digit(*p))
                p++;
        }
        lc = localeconv();
        if (lc->decimal_point[0] != '.' || lc->decimal_point[1] != '\0')
            return false;
        /* The literal is followed by at least one byte of input (the document ends in
         * '}'), which pays for the NUL in the scratch buffer. */
        n = (size_t)(p - start);
        memcpy(f->out, start, n);
        f->out[n] = '\0';
        errno = 0;
        v->d = strtod(f->out, &e);
        if (e != f->out + n || errno == ERANGE)
            return false; /* overflow is an error for jansson; underflow: let it decide */
        v->t = CDC_JV_REAL;
    } else {
        v->t = CDC_JV_INT;
        v->i = neg ? -x : x;
    }
    f->p = p;
    return true;
}

static bool literal(fx_t *f, const char *word, size_t n)
{
    if ((size_t)(f->end - f->p) < n || memcmp(f->p, word, n) != 0)
        return false;
    f->p += n;
    return true;
}

static bool scan_value(fx_t *f, cdc_jv_t *v, int depth);

/* Validates and skips an object or array at f->p. */
static bool skip_container(fx_t *f, int depth)
{
    char close = *f->p == '{' ? '}' : ']';
    if (depth >= FX_MAX_DEPTH)
        return false;
    f->p++;
    skip_ws(f);
    if (f->p < f->end && *f->p == close) {
        f->p++;
        return true;
    }
    for (;;) {
        cdc_jv_t v;
        if (close == '}') {
            const char *k;
            size_t kn;
            if (!expect(f, '"') || !scan_string(f, &k, &kn) || !expect(f, ':'))
                return false;
        }
        if (!scan_value(f, &v, depth + 1))
            return false;
        skip_ws(f);
        if (f->p >= f->end)
            return false;
        if (*f->p++ == ',')
            continue;
        return f->p[-1] == close;
    }
}

/* Any value (after optional whitespace): scalars into v, containers validated and
 * reported as CDC_JV_OTHER. */
static bool scan_value(fx_t *f, cdc_jv_t *v, int depth)
{
    skip_ws(f);
    if (f->p >= f->end)
        return false;
    memset(v, 0, sizeof(*v));
    switch (*f->p) {
    case '"':
        f->p++;
        v->t = CDC_JV_STRING;
        return scan_string(f, &v->s, &v->n);
    case '{':
    case '[':
        v->t = CDC_JV_OTHER;
        return skip_container(f, depth);
    case 't':
        v->t = CDC_JV_TRUE;
        return literal(f, "true", 4);
    case 'f':
        v->t = CDC_JV_FALSE;
        return literal(f, "false", 5);
    case 'n':
        v->t = CDC_JV_NULL;
        return literal(f, "null", 4);
    default:
        return scan_number(f, v);
    }
}

static member_t *add_member(fx_t *f)
{
    if (f->nm == f->cap && f->m_heap) {
        if (cdc_array_reserve(f->m, f->cap, f->cap * 2, 1) != CDC_OK)
            return NULL;
    } else if (f->nm == f->cap) { /* the first time: from the stack to the heap */
        member_t *m = malloc(f->cap * 2 * sizeof(*m));
        if (m == NULL)
            return NULL;
        memcpy(m, f->m, f->nm * sizeof(*m));
        f->m = m;
        f->cap *= 2;
        f->m_heap = true;
    }
    return &f->m[f->nm++];
}

/* After ',' or the closing bracket of a list: 1 = more, 0 = closed, -1 = junk. */
static int list_next(fx_t *f, char close)
{
    skip_ws(f);
    if (f->p >= f->end)
        return -1;
    if (*f->p == ',') {
        f->p++;
        return 1;
    }
    if (*f->p == close) {
        f->p++;
        return 0;
    }
    return -1;
}

/*
 * A row image or the unchanged_toast list. Objects become members (key, value); arrays
 * members without keys, and only of strings (anything else: the tree path decides). Any
 * other value is validated and recorded as SPAN_OTHER.
 */
static bool scan_list(fx_t *f, span_t *sp, bool object)
{
    skip_ws(f);
    if (f->p >= f->end)
        return false;
    if (*f->p != (object ? '{' : '[')) {
        cdc_jv_t v;
        sp->state = SPAN_OTHER;
        return scan_value(f, &v, 0);
    }
    f->p++;
    sp->state = SPAN_LIST;
    sp->first = f->nm;
    sp->n = 0;
    skip_ws(f);
    if (f->p < f->end && *f->p == (object ? '}' : ']')) {
        f->p++;
        return true;
    }
    for (;;) {
        member_t *m = add_member(f);
        int r;
        if (m == NULL)
            return false;
        m->key = NULL;
        m->klen = 0;
        if (object && (!expect(f, '"') || !scan_string(f, &m->key, &m->klen) || !expect(f, ':')))
            return false;
        if (!scan_value(f, &m->v, 1) || (!object && m->v.t != CDC_JV_STRING))
            return false;
        sp->n++;
        r = list_next(f, object ? '}' : ']');
        if (r < 0)
            return false;
        if (r == 0)
            return true;
    }
}

/* The members of "source" the decoder reads (indices into source_info.v). */
enum {
    SRC_LSN,
    SRC_TX,
    SRC_TS_MS,
    SRC_TS_US,
    SRC_COMMIT,
    SRC_SEQUENCE,
    SRC_VERSION,
    SRC_SNAPSHOT,
    SRC_SNAPSHOT_ID,
    SRC__COUNT,
};

/* What the envelope says about the position and the schema. */
typedef struct source_info {
    bool present;           /* "source" is an object */
    cdc_jv_t v[SRC__COUNT]; /* lsn, txId, ts_ms, ts_us, commit_lsn, sequence, ... */
    unsigned seen;          /* bit 1 << SRC_* for each member met */
} source_info_t;

/* k[0..n) (no NUL inside) equals the NUL-terminated word. Inlined: for a literal word
 * the length is a constant. */
static inline __attribute__((always_inline)) bool key_is(const char *k, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(k, word, n) == 0;
}

static bool scan_source(fx_t *f, source_info_t *si)
{
    skip_ws(f);
    if (f->p >= f->end)
        return false;
    if (*f->p != '{') { /* not an object: the tree path reads nothing from it either */
        cdc_jv_t v;
        return scan_value(f, &v, 0);
    }
    si->present = true;
    f->p++;
    skip_ws(f);
    if (f->p < f->end && *f->p == '}') {
        f->p++;
        return true;
    }
    for (;;) {
        const char *k;
        size_t kn;
        cdc_jv_t v;
        int r, i;
        if (!expect(f, '"') || !scan_string(f, &k, &kn) || !expect(f, ':') || !scan_value(f, &v, 1))
            return false;
        i = key_is(k, kn, "lsn")              ? SRC_LSN
            : key_is(k, kn, "txId")           ? SRC_TX
            : key_is(k, kn, "ts_ms")          ? SRC_TS_MS
            : key_is(k, kn, "ts_us")          ? SRC_TS_US
            : key_is(k, kn, "commit_lsn")     ? SRC_COMMIT
            : key_is(k, kn, "sequence")       ? SRC_SEQUENCE
            : key_is(k, kn, "schema_version") ? SRC_VERSION
            : key_is(k, kn, "snapshot")       ? SRC_SNAPSHOT
            : key_is(k, kn, "snapshot_id")    ? SRC_SNAPSHOT_ID
                                              : -1;
        if (i >= 0) {
            if (si->seen & (1u << i))
                return false; /* duplicate: jansson keeps the last one */
            si->seen |= 1u << i;
            si->v[i] = v;
        }
        r = list_next(f, '}');
        if (r <= 0)
            return r == 0;
    }
}

/* json_u64() of the tree path. */
static uint64_t jv_u64(const cdc_jv_t *v)
{
    if (v->t == CDC_JV_INT)
        return (uint64_t)v->i;
    if (v->t == CDC_JV_STRING)
        return strtoull(v->s, NULL, 10);
    return 0;
}

/* The column named k[0..n), trying `guess` first (events list columns in schema order). */
static long find_col(const cdc_source_schema_t *s, const char *k, size_t n, size_t guess)
{
    if (guess < s->ncols && key_is(k, n, s->cols[guess].name))
        return (long)guess;
    for (size_t i = 0; i < s->ncols; i++)
        if (key_is(k, n, s->cols[i].name))
            return (long)i;
    return -1;
}

/* Takes string j as the value of a string column, or decodes it in place as a base64
 * binary column's, when it has a buffer of its own (f->big): 1 taken, 0 not (convert it),
 * -1 a binary column's invalid base64 (a mismatch: the buffer now holds junk). */
static int take_big(fx_t *f, const cdc_column_t *col, const cdc_jv_t *j, cdc_val_t *v)
{
    bool bin = col->type == CDC_ICE_BINARY;
    if ((col->type != CDC_ICE_STRING && !bin) || j->t != CDC_JV_STRING || j->n < FX_BIG_STRING ||
        (bin && j->s[0] == '\\' && j->s[1] == 'x'))
        return 0; /* (hex bytea: the converter's) */
    for (size_t i = 0; i < f->nbig; i++)
        if (f->big[i] == j->s) {
            char *p = f->big[i];
            ptrdiff_t n = (ptrdiff_t)j->n;
            if (bin && (n = cdc_base64_decode_into(p, j->n, p)) < 0)
                return -1;
            char *shrunk = bin ? realloc(p, (size_t)n + 1) : NULL;
            if (shrunk != NULL) /* (a shrink that failed: the larger buffer serves) */
                p = shrunk;
            memset(v, 0, sizeof(*v));
            v->kind = CDC_VAL_SET; /* (no placeholder is this long) */
            v->bytes = (uint8_t *)p;
            v->len = (size_t)n;
            f->big[i] = NULL;
            return 1;
        }
    return 0;
}

static bool decode_row(fx_t *f, const cdc_source_schema_t *s, const member_t *m, size_t n,
                       const char *placeholder, uint8_t *seen, cdc_row_t *r)
{
    size_t guess = 0;
    r->schema = s;
    r->vals = calloc(s->ncols ? s->ncols : 1, sizeof(cdc_val_t));
    if (r->vals == NULL)
        return false;
    memset(seen, 0, s->ncols);
    for (size_t i = 0; i < n; i++) {
        long c = find_col(s, m[i].key, m[i].klen, guess);
        int tk;
        if (c < 0)
            continue; /* not a column of this version: ignored, as by the tree path */
        if (seen[c] || m[i].v.t == CDC_JV_OTHER ||
            (tk = take_big(f, &s->cols[c], &m[i].v, &r->vals[c])) < 0 ||
            (tk == 0 && cdc_decode_convert(&s->cols[c], &m[i].v, placeholder, &r->vals[c]) != 1))
            goto fail; /* duplicate (last wins), structure, mismatch or out of memory */
        seen[c] = 1;
        guess = (size_t)c + 1;
    }
    return true;
fail:
    cdc_row_clear(r);
    return false;
}

bool cdc_decode_fast(cdc_catalog_t *cat, const cdc_decode_options_t *opts, cdc_decode_input_t *in,
                     cdc_change_t *c, cdc_decode_error_t *de_out)
{
    char stack_scratch[FX_STACK_SCRATCH];
    member_t stack_members[FX_STACK_MEMBERS];
    uint8_t stack_seen[FX_STACK_COLS], *seen = stack_seen;
    const char *placeholder = cdc_decode_placeholder(opts);
    const cdc_source_schema_t *s;
    cdc_decode_error_t de;
    source_info_t si;
    span_t before = {SPAN_ABSENT, 0, 0}, after = {SPAN_ABSENT, 0, 0}, toast = {SPAN_ABSENT, 0, 0};
    cdc_jv_t op = {CDC_JV_NULL, 0, 0, NULL, 0};
    bool have_op = false, have_source = false, ok = false, pending = false;
    char *scratch = stack_scratch;
    int64_t version;
    fx_t f;

    memset(c, 0, sizeof(*c));
    memset(&si, 0, sizeof(si));
    if (in->value_len + 16 > sizeof(stack_scratch) &&
        (scratch = malloc(in->value_len + 16)) == NULL)
        return false;
    f.p = in->value;
    f.end = f.p + in->value_len;
    f.out = scratch;
    f.m = stack_members;
    f.nm = 0;
    f.cap = FX_STACK_MEMBERS;
    f.m_heap = false;
    f.big = NULL;
    f.nbig = f.bigcap = 0;

    /* One pass over the envelope; rows wait for the op and the schema version. */
    if (!expect(&f, '{'))
        goto done;
    skip_ws(&f);
    if (f.p < f.end && *f.p == '}')
        goto done; /* no "op" */
    for (;;) {
        const char *k;
        size_t kn;
        int r;
        if (!expect(&f, '"') || !scan_string(&f, &k, &kn) || !expect(&f, ':'))
            goto done;
        if (key_is(k, kn, "before")) {
            if (before.state != SPAN_ABSENT || !scan_list(&f, &before, true))
                goto done;
        } else if (key_is(k, kn, "after")) {
            if (after.state != SPAN_ABSENT || !scan_list(&f, &after, true))
                goto done;
        } else if (key_is(k, kn, "source")) {
            if (have_source || !scan_source(&f, &si))
                goto done;
            have_source = true;
        } else if (key_is(k, kn, "op")) {
            if (have_op || !scan_value(&f, &op, 0))
                goto done;
            have_op = true;
        } else if (key_is(k, kn, "unchanged_toast")) {
            skip_ws(&f);
            if (toast.state != SPAN_ABSENT)
                goto done;
            if (f.p < f.end && *f.p == 'n') { /* null: no list, as json_array_size(null) */
                if (!literal(&f, "null", 4))
                    goto done;
                toast.state = SPAN_OTHER;
            } else if (!scan_list(&f, &toast, false) || toast.state != SPAN_LIST) {
                goto done;
            }
        } else if (key_is(k, kn, "snapshot_pending")) {
            cdc_jv_t v;
            if (!scan_value(&f, &v, 0))
                goto done;
            pending = v.t == CDC_JV_TRUE;
        } else if (key_is(k, kn, "schema") || key_is(k, kn, "payload")) {
            goto done; /* maybe a Kafka Connect envelope */
        } else {
            cdc_jv_t v;
            if (!scan_value(&f, &v, 0))
                goto done;
        }
        r = list_next(&f, '}');
        if (r < 0)
            goto done;
        if (r == 0)
            break;
    }
    skip_ws(&f);
    if (f.p != f.end)
        goto done;

    /* The op: c, u, d or r (truncates and the rest: the tree path). */
    if (!have_op || op.t != CDC_JV_STRING || op.n != 1 || strchr("curd", op.s[0]) == NULL)
        goto done;
    c->op = (cdc_op_t)op.s[0];

    /* The schema version: the envelope's, else the caller's header (looked up once: the
     * result replaces the lookup in *in for the tree path). */
    version = si.v[SRC_VERSION].t == CDC_JV_INT ? si.v[SRC_VERSION].i : 0;
    if (version <= 0) {
        if (in->schema_version < 0 && in->header_version != NULL) {
            in->schema_version = in->header_version(in->header_arg);
            in->header_version = NULL;
        }
        version = in->schema_version;
    }
    if (version >= 0)
        s = cdc_catalog_get(cat, in->topic, version);
    else
        s = cdc_catalog_latest(cat, in->topic);
    if (s == NULL)
        goto done;
    c->schema = s;
    c->topic = in->topic;
    c->partition = in->partition;
    c->offset = in->offset;

    /* Position and transaction, as the tree path reads them. */
    const cdc_jv_t *tx = &si.v[SRC_TX], *ts_us = &si.v[SRC_TS_US], *ts_ms = &si.v[SRC_TS_MS];
    const cdc_jv_t *seq = &si.v[SRC_SEQUENCE], *snapshot = &si.v[SRC_SNAPSHOT];
    c->lsn = jv_u64(&si.v[SRC_LSN]);
    c->tx_id = tx->t == CDC_JV_INT ? tx->i : -1;
    if (ts_us->t == CDC_JV_INT)
        c->source_ts_us = ts_us->i;
    else
        c->source_ts_us = cdc_decode_ms_to_us(ts_ms->t == CDC_JV_INT ? ts_ms->i : 0);
    if (si.seen & (1u << SRC_COMMIT))
        c->commit_lsn = jv_u64(&si.v[SRC_COMMIT]);
    else if (seq->t != CDC_JV_STRING || !cdc_decode_sequence_text(seq->s, &c->commit_lsn))
        c->commit_lsn = 0;
    if (c->commit_lsn == 0)
        c->commit_lsn = c->lsn;
    c->backfill = (c->op == CDC_OP_READ || c->op == CDC_OP_TRUNCATE) &&
                  snapshot->t == CDC_JV_STRING && snapshot->n == 8 &&
                  memcmp(snapshot->s, "backfill", 8) == 0;
    if (c->op == CDC_OP_READ && si.v[SRC_SNAPSHOT_ID].t == CDC_JV_STRING)
        c->snapshot_tag = cdc_decode_snapshot_tag(si.v[SRC_SNAPSHOT_ID].s, si.v[SRC_SNAPSHOT_ID].n);

    /* Rows. */
    if (s->ncols > sizeof(stack_seen) && (seen = malloc(s->ncols)) == NULL)
        goto done;
    if (before.state == SPAN_LIST &&
        !decode_row(&f, s, f.m + before.first, before.n, placeholder, seen, &c->before))
        goto done;
    if (c->op != CDC_OP_DELETE) {
        if (after.state != SPAN_LIST ||
            !decode_row(&f, s, f.m + after.first, after.n, placeholder, seen, &c->after))
            goto done;
    } else if (c->before.vals == NULL) {
        goto done;
    }
    if (c->after.vals != NULL && toast.state == SPAN_LIST)
        for (size_t i = 0; i < toast.n; i++) {
            const member_t *m = &f.m[toast.first + i];
            for (size_t k = 0; k < s->ncols; k++)
                if (key_is(m->v.s, m->v.n, s->cols[k].name)) {
                    free(c->after.vals[k].bytes);
                    memset(&c->after.vals[k], 0, sizeof(cdc_val_t));
                    c->after.vals[k].kind = CDC_VAL_TOAST;
                }
        }
    c->snapshot_pending = pending;
    memset(&de, 0, sizeof(de));
    ok = cdc_decode_entity(s, c->after.vals ? &c->after : &c->before, c, &de);
    if (ok) {
        memset(de_out, 0, sizeof(*de_out));
        de_out->schema_version = version;
    }
done:
    if (!ok)
        cdc_change_clear(c);
    if (seen != stack_seen)
        free(seen);
    if (f.m_heap)
        free(f.m);
    for (size_t i = 0; i < f.nbig; i++)
        free(f.big[i]);
    free(f.big);
    if (scratch != stack_scratch)
        free(scratch);
    return ok;
}
