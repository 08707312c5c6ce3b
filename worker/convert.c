/*
 * Value conversion (decode_int.h): one JSON value to a column's Iceberg type, by the
 * column's encoding (temporal integers and text, decimals as text or Kafka's base64
 * bytes, PostgreSQL's hex or base64 binary, UUIDs), shared by the tree path and the
 * direct decoder so that both produce the same values; and a JSON object of the tree
 * path to a row.
 *
 * A call circle of two files (docs/development.md, "Call circles"): row.c sets the values
 * of a row image it reads back with convert.c's setters, and convert.c clears a row it
 * could not finish with row.c's cdc_row_clear.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/hex.h"
#include "common/pgarray.h"
#include "common/iceberg/value.h"
#include "worker/decode_int.h"

/* The Iceberg type name of a column, for messages ("decimal(10, 2)" in buf). */
static const char *ice_type_name(const cdc_column_t *col, char *buf, size_t size)
{
    static const char *const names[CDC_ICE__TYPE_COUNT] = {
        "boolean", "int",  "long",      "float",       "double", "decimal", "string", "binary",
        "date",    "time", "timestamp", "timestamptz", "uuid",   "list",    "struct"};
    if (col->type == CDC_ICE_DECIMAL) {
        snprintf(buf, size, "decimal(%d, %d)", col->precision, col->scale);
        return buf;
    }
    return names[col->type];
}

/* ---- text and numbers to values ------------------------------------------------------ */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static bool parse_date(const char *s, int64_t *days, const char **rest)
{
    int y, m, d, n = 0;
    if (sscanf(s, "%d-%d-%d%n", &y, &m, &d, &n) != 3 || m < 1 || m > 12 || d < 1 || d > 31)
        return false;
    *days = days_from_civil(y, (unsigned)m, (unsigned)d);
    *rest = s + n;
    return true;
}

static bool parse_time(const char *s, int64_t *us, const char **rest)
{
    int h, mi, n = 0;
    double sec;
    if (sscanf(s, "%d:%d:%lf%n", &h, &mi, &sec, &n) != 3 || h < 0 || h > 24 || mi < 0 || mi > 59 ||
        sec < 0 || sec >= 61)
        return false;
    /* Integer part of seconds and fraction digits parsed exactly, not through double. */
    const char *p = s;
    while (*p && *p != ':')
        p++;
    p++;
    while (*p && *p != ':')
        p++;
    p++;
    int64_t whole = 0, frac = 0, scale = 1000000;
    while (isdigit((unsigned char)*p))
        whole = whole * 10 + (*p++ - '0');
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (scale > 1) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
            p++;
        }
    }
    *us = ((int64_t)h * 3600 + mi * 60 + whole) * 1000000 + frac;
    *rest = p;
    return true;
}

/* ISO timestamp; with_zone: accepts Z / +hh:mm / +hhmm / +hh and converts to UTC. */
static bool parse_timestamp(const char *s, bool with_zone, int64_t *us)
{
    int64_t days, t;
    const char *p;
    if (!parse_date(s, &days, &p))
        return false;
    if (*p == 'T' || *p == ' ') {
        if (!parse_time(p + 1, &t, &p))
            return false;
    } else {
        t = 0;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, hh = 0, mm = 0;
        p++;
        if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]))
            return false;
        hh = (p[0] - '0') * 10 + (p[1] - '0');
        p += 2;
        if (*p == ':')
            p++;
        if (isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1])) {
            mm = (p[0] - '0') * 10 + (p[1] - '0');
            p += 2;
        }
        off = sign * ((int64_t)hh * 3600 + mm * 60) * 1000000;
    }
    if (*p != '\0')
        return false;
    (void)with_zone;
    *us = days * 86400LL * 1000000 + t - off;
    return true;
}

/* Debezium's binary columns: base64 text of n characters (see common/base64.h). */
static bool base64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len)
{
    *out = (uint8_t *)cdc_base64_decode(s, n, out_len);
    return *out != NULL;
}

/* Decimal text ("-12.50", "1e3") to an unscaled integer at `scale`. */
static bool parse_decimal_text(const char *s, int32_t precision, int32_t scale, __int128 *out)
{
    __int128 v = 0;
    int digits = 0, frac = 0, exp = 0;
    bool neg = false, dot = false, any = false;
    const char *p = s;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    for (; *p; p++) {
        if (isdigit((unsigned char)*p)) {
            any = true;
            if (v != 0 || *p != '0')
                digits++;
            if (digits > 38)
                return false;
            v = v * 10 + (*p - '0');
            if (dot)
                frac++;
        } else if (*p == '.' && !dot) {
            dot = true;
        } else if (*p == 'e' || *p == 'E') {
            char *end;
            long x = strtol(p + 1, &end, 10);
            if (*end != '\0' || x > 38 || x < -38)
                return false;
            exp = (int)x;
            break;
        } else {
            return false;
        }
    }
    if (!any)
        return false;
    int shift = scale - frac + exp;
    for (; shift > 0; shift--) {
        v *= 10;
        digits++;
    }
    for (; shift < 0; shift++) {
        if (v % 10 != 0)
            return false; /* would lose digits: not representable at this scale */
        v /= 10;
        digits--;
    }
    if (precision > 0 && digits > precision)
        return false;
    *out = neg ? -v : v;
    return true;
}

bool cdc_val_set_bytes(cdc_val_t *v, const void *p, size_t n)
{
    v->bytes = malloc(n ? n : 1);
    if (v->bytes == NULL)
        return false;
    memcpy(v->bytes, p, n);
    v->len = n;
    return true;
}

static bool parse_uuid(const char *s, uint8_t out[16])
{
    int n = 0;
    for (const char *p = s; *p; p++) {
        int byte;
        if (*p == '-')
            continue;
        if (n >= 16 || (byte = cdc_hex_byte(p)) < 0)
            return false;
        out[n++] = (uint8_t)byte;
        p++;
    }
    return n == 16;
}

static int64_t scale_temporal(int64_t x, cdc_enc_t enc)
{
    switch (enc) {
    case CDC_ENC_MILLIS:
        return x * 1000;
    case CDC_ENC_NANOS:
        return x / 1000;
    default:
        return x;
    }
}

/* PostgreSQL's text of a date's or timestamp's infinity: +1, -1, or 0 for any other. */
static int infinity_text(const char *s)
{
    if (s == NULL)
        return 0;
    return strcmp(s, "infinity") == 0 ? 1 : strcmp(s, "-infinity") == 0 ? -1 : 0;
}

/* A numeric's special value ("NaN", "Infinity", "-Infinity", PostgreSQL's text) as a
 * value kind, or CDC_VAL_NULL for any other text. */
static cdc_val_kind_t numeric_special(const char *s)
{
    if (s == NULL)
        return CDC_VAL_NULL;
    return strcmp(s, "NaN") == 0         ? CDC_VAL_NAN
           : strcmp(s, "Infinity") == 0  ? CDC_VAL_POS_INF
           : strcmp(s, "-Infinity") == 0 ? CDC_VAL_NEG_INF
                                         : CDC_VAL_NULL;
}

/*
 * Converts one JSON value (j, see decode_int.h) to the column's type. Shared by the tree
 * path and the direct decoder, so both produce the same values. Returns 1 when converted,
 * 0 on a type mismatch (v zeroed), -1 when out of memory; placeholder marks Debezium's
 * unchanged-TOAST placeholder.
 */
static int record_to_nested(const cdc_ice_node_t *st, const char *s, size_t n, char **out);
static int text_leaves_to_nested(const cdc_ice_node_t *root, const char *s, size_t n, char **out);
static bool text_leaves(const cdc_ice_node_t *n);

/* A nested value from the text form `to` turns into the nested value form, checked
 * against the type (cdc_ice_nested_shred) and set in v: 1, 0 on a mismatch, -1 out of
 * memory. */
static int nested_from_text(const cdc_ice_node_t *tree, const char *str, size_t slen,
                            int (*to)(const cdc_ice_node_t *, const char *, size_t, char **),
                            cdc_val_t *v)
{
    char why[160], *text = NULL;
    cdc_err_t rc;
    int r = to(tree, str, slen, &text);
    if (r <= 0) {
        free(text);
        return r;
    }
    rc = cdc_ice_nested_shred(tree, text, strlen(text), NULL, NULL, why, sizeof(why));
    if (rc == CDC_OK && !cdc_val_set_bytes(v, text, strlen(text)))
        rc = CDC_ERR_NOMEM;
    free(text);
    return rc == CDC_OK ? 1 : rc == CDC_ERR_NOMEM ? -1 : 0;
}

int cdc_decode_convert(const cdc_column_t *col, const cdc_jv_t *j, const char *placeholder,
                       cdc_val_t *v)
{
    const char *str = j->t == CDC_JV_STRING ? j->s : NULL;
    size_t slen = str ? j->n : 0;

    memset(v, 0, sizeof(*v));
    if (j->t == CDC_JV_NULL) {
        v->kind = CDC_VAL_NULL;
        if (!col->optional)
            goto mismatch;
        return 1;
    }
    if (str != NULL && placeholder != NULL && strcmp(str, placeholder) == 0) {
        v->kind = CDC_VAL_TOAST;
        return 1;
    }
    v->kind = CDC_VAL_SET;
    switch (col->type) {
    case CDC_ICE_BOOLEAN:
        if (j->t != CDC_JV_TRUE && j->t != CDC_JV_FALSE)
            goto mismatch;
        v->u.b = j->t == CDC_JV_TRUE;
        return 1;
    case CDC_ICE_INT:
    case CDC_ICE_LONG:
        if (j->t != CDC_JV_INT)
            goto mismatch;
        v->u.i = j->i;
        if (col->type == CDC_ICE_INT && (v->u.i < INT32_MIN || v->u.i > INT32_MAX))
            goto mismatch;
        return 1;
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE:
        if (j->t == CDC_JV_INT || j->t == CDC_JV_REAL) {
            v->u.d = j->t == CDC_JV_INT ? (double)j->i : j->d;
            return 1;
        }
        if (str && strcmp(str, "NaN") == 0)
            v->u.d = NAN;
        else if (str && strcmp(str, "Infinity") == 0)
            v->u.d = INFINITY;
        else if (str && strcmp(str, "-Infinity") == 0)
            v->u.d = -INFINITY;
        else
            goto mismatch;
        return 1;
    case CDC_ICE_DECIMAL: {
        char buf[64];
        if (col->enc == CDC_ENC_BASE64) {
            uint8_t *raw;
            size_t rl;
            if (str == NULL || !base64_decode(str, slen, &raw, &rl))
                goto mismatch;
            if (rl == 0 || rl > 16) {
                free(raw);
                goto mismatch;
            }
            __int128 x = (raw[0] & 0x80) ? -1 : 0;
            for (size_t i = 0; i < rl; i++)
                x = (__int128)(((unsigned __int128)x << 8) | raw[i]);
            free(raw);
            v->u.dec = x;
            return 1;
        }
        if (j->t == CDC_JV_INT) {
            snprintf(buf, sizeof(buf), "%" PRId64, j->i);
            str = buf;
        } else if (j->t == CDC_JV_REAL) {
            snprintf(buf, sizeof(buf), "%.17g", j->d);
            str = buf;
        }
        if (str == NULL || !parse_decimal_text(str, col->precision, col->scale, &v->u.dec)) {
            /* NaN, +-Infinity: null in the column, named by the row's _cdc_special (a
             * key or required column cannot be null: a mismatch) */
            cdc_val_kind_t k = numeric_special(str);
            if (k == CDC_VAL_NULL || !col->optional || col->key)
                goto mismatch;
            memset(v, 0, sizeof(*v));
            v->kind = k;
        }
        return 1;
    }
    case CDC_ICE_STRING:
        if (str != NULL)
            return cdc_val_set_bytes(v, str, slen) ? 1 : -1;
        goto mismatch; /* json/jsonb sent as structure: the tree path dumps it */
    case CDC_ICE_BINARY:
        if (str == NULL)
            goto mismatch;
        if (slen >= 2 && str[0] == '\\' && str[1] == 'x') { /* PostgreSQL hex format */
            if ((slen - 2) % 2 != 0 || !cdc_val_set_bytes(v, "", 0))
                goto mismatch;
            free(v->bytes);
            v->bytes = malloc((slen - 2) / 2 + 1);
            if (v->bytes == NULL)
                return -1;
            for (size_t i = 2; i < slen; i += 2) {
                int byte = cdc_hex_byte(str + i);
                if (byte < 0) {
                    free(v->bytes);
                    v->bytes = NULL;
                    goto mismatch;
                }
                v->bytes[(i - 2) / 2] = (uint8_t)byte;
            }
            v->len = (slen - 2) / 2;
            return 1;
        }
        if (!base64_decode(str, slen, &v->bytes, &v->len))
            goto mismatch;
        if (placeholder != NULL && v->len == strlen(placeholder) &&
            memcmp(v->bytes, placeholder, v->len) == 0) {
            free(v->bytes);
            memset(v, 0, sizeof(*v));
            v->kind = CDC_VAL_TOAST;
        }
        return 1;
    case CDC_ICE_DATE: {
        const char *rest;
        if (j->t == CDC_JV_INT) {
            v->u.i = j->i;
            return 1;
        }
        if (infinity_text(str) != 0) {
            v->u.i = infinity_text(str) > 0 ? CDC_ICE_DATE_POS_INF : CDC_ICE_DATE_NEG_INF;
            return 1;
        }
        if (str == NULL || !parse_date(str, &v->u.i, &rest) || *rest != '\0')
            goto mismatch;
        return 1;
    }
    case CDC_ICE_TIME: {
        const char *rest;
        if (j->t == CDC_JV_INT) {
            v->u.i = scale_temporal(j->i, col->enc);
            return 1;
        }
        if (str == NULL || !parse_time(str, &v->u.i, &rest))
            goto mismatch;
        return 1;
    }
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        if (j->t == CDC_JV_INT) {
            v->u.i = scale_temporal(j->i, col->enc);
            return 1;
        }
        if (infinity_text(str) != 0) {
            v->u.i = infinity_text(str) > 0 ? CDC_ICE_TS_POS_INF : CDC_ICE_TS_NEG_INF;
            return 1;
        }
        if (str == NULL || !parse_timestamp(str, col->type == CDC_ICE_TIMESTAMPTZ, &v->u.i))
            goto mismatch;
        return 1;
    case CDC_ICE_UUID: {
        uint8_t u[16];
        if (str == NULL || !parse_uuid(str, u))
            goto mismatch;
        return cdc_val_set_bytes(v, u, 16) ? 1 : -1;
    }
    case CDC_ICE_LIST:
    case CDC_ICE_STRUCT: {
        /* the event's string holds the list's JSON array (object) text in the nested
         * value form (docs/events.md, "Values"), or a composite's text; checked against
         * the type here so that a value the Parquet writer would refuse is dead-lettered,
         * not staged */
        char why[160];
        cdc_err_t rc;
        if (str == NULL || col->tree == NULL)
            goto mismatch;
        if (col->enc == CDC_ENC_RECORD || text_leaves(col->tree)) {
            /* a composite's text, or a list of dates, times, timestamps or binary, whose
             * elements the capture sends as PostgreSQL text (docs/capture.md, "Types") */
            int r = nested_from_text(
                col->tree, str, slen,
                col->enc == CDC_ENC_RECORD ? record_to_nested : text_leaves_to_nested, v);
            if (r < 0)
                return -1;
            if (r == 0)
                goto mismatch;
            return 1;
        }
        rc = cdc_ice_nested_shred(col->tree, str, slen, NULL, NULL, why, sizeof(why));
        if (rc == CDC_ERR_NOMEM)
            return -1;
        if (rc != CDC_OK)
            goto mismatch;
        return cdc_val_set_bytes(v, str, slen) ? 1 : -1;
    }
    default:
        break;
    }
mismatch:
    memset(v, 0, sizeof(*v));
    return 0;
}

/* ---- composites ------------------------------------------------------------------------ */

/* A converted leaf value in the nested value form (common/iceberg/nested.h). */
static json_t *leaf_json(const cdc_ice_field_t *f, const cdc_val_t *v)
{
    cdc_ice_value_t c;
    memset(&c, 0, sizeof(c));
    switch (f->type) {
    case CDC_ICE_BOOLEAN:
        c.v.b = v->u.b;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        c.v.i32 = (int32_t)v->u.i;
        break;
    case CDC_ICE_FLOAT:
        c.v.f32 = (float)v->u.d;
        break;
    case CDC_ICE_DOUBLE:
        c.v.f64 = v->u.d;
        break;
    case CDC_ICE_DECIMAL:
        c.v.dec = v->u.dec;
        break;
    case CDC_ICE_UUID:
        if (v->len != 16)
            return NULL;
        memcpy(c.v.uuid, v->bytes, 16);
        break;
    case CDC_ICE_STRING:
    case CDC_ICE_BINARY:
        c.v.bytes.ptr = v->bytes;
        c.v.bytes.len = v->len;
        break;
    default:
        c.v.i64 = v->u.i;
        break;
    }
    return cdc_ice_nested_leaf_json(f, &c);
}

/* One field of a composite's text at *p (quoted, unquoted or empty = NULL) into out;
 * *null when it is NULL. Moves *p past it. */
static bool record_field(const char **p, const char *end, cdc_buf_t *out, bool *null)
{
    const char *s = *p;
    cdc_buf_reset(out);
    *null = s < end && (*s == ',' || *s == ')');
    if (*null)
        return true;
    if (s < end && *s == '"') {
        for (s++; s < end; s++) {
            if (*s == '"' && s + 1 < end && s[1] == '"')
                cdc_buf_putc(out, *++s);
            else if (*s == '\\' && s + 1 < end)
                cdc_buf_putc(out, *++s);
            else if (*s == '"')
                break;
            else
                cdc_buf_putc(out, *s);
        }
        if (s >= end)
            return false;
        s++;
    } else {
        for (; s < end && *s != ',' && *s != ')'; s++) {
            if (*s == '\\' && s + 1 < end)
                s++;
            cdc_buf_putc(out, *s);
        }
    }
    *p = s;
    return !out->oom;
}

/* A leaf's PostgreSQL text s[0..n) (NUL-terminated) in the nested value form; NULL on a
 * mismatch (*oom when out of memory). */
static json_t *leaf_text(const cdc_ice_field_t *f, const char *s, size_t n, bool *oom)
{
    cdc_column_t col = {.name = f->name,
                        .type = f->type,
                        .precision = f->precision,
                        .scale = f->scale,
                        .optional = true};
    cdc_jv_t jv = {.t = CDC_JV_STRING, .s = s, .n = n};
    cdc_val_t v;
    json_t *j = NULL;
    char *endp;

    if (f->type == CDC_ICE_BOOLEAN && n == 1)
        jv.t = s[0] == 't' ? CDC_JV_TRUE : CDC_JV_FALSE;
    else if (f->type == CDC_ICE_INT || f->type == CDC_ICE_LONG)
        jv = (cdc_jv_t){.t = CDC_JV_INT, .i = strtoll(s, &endp, 10)};
    else if ((f->type == CDC_ICE_FLOAT || f->type == CDC_ICE_DOUBLE) &&
             (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) && strcmp(s, "-Infinity") != 0)
        jv = (cdc_jv_t){.t = CDC_JV_REAL, .d = strtod(s, &endp)};
    int r = cdc_decode_convert(&col, &jv, NULL, &v);
    if (r < 0)
        *oom = true;
    if (r > 0 && (j = leaf_json(f, &v)) == NULL)
        *oom = true;
    free(v.bytes);
    return j;
}

/* Whether a leaf under n is a type the capture sends as PostgreSQL text inside an array
 * (dates, times, timestamps, binary as bytea's hex; docs/capture.md, "Types"). */
static bool text_leaves(const cdc_ice_node_t *n)
{
    if (n->f.type != CDC_ICE_LIST && n->f.type != CDC_ICE_STRUCT)
        return n->f.type == CDC_ICE_DATE || n->f.type == CDC_ICE_TIME ||
               n->f.type == CDC_ICE_TIMESTAMP || n->f.type == CDC_ICE_TIMESTAMPTZ ||
               n->f.type == CDC_ICE_BINARY;
    for (size_t i = 0; i < n->nkids; i++)
        if (text_leaves(&n->kids[i]))
            return true;
    return false;
}

/* j, a value of node n whose text leaves (text_leaves()) may be PostgreSQL text strings,
 * in the nested value form: a new reference, NULL on a mismatch (*oom when out of
 * memory). Other leaves are taken as they are (the shredding checks them). */
static json_t *leaves_json(const cdc_ice_node_t *n, json_t *j, int depth, bool *oom)
{
    json_t *out;
    if (json_is_null(j))
        return json_null();
    if (depth > 32)
        return NULL;
    if (n->f.type == CDC_ICE_LIST) {
        size_t i;
        json_t *x;
        if (!json_is_array(j) || n->nkids != 1 || (out = json_array()) == NULL)
            return NULL;
        json_array_foreach(j, i, x)
        {
            json_t *y = leaves_json(&n->kids[0], x, depth + 1, oom);
            if (y == NULL || json_array_append_new(out, y) != 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    if (n->f.type == CDC_ICE_STRUCT) {
        if (!json_is_object(j) || (out = json_object()) == NULL)
            return NULL;
        for (size_t i = 0; i < n->nkids; i++) {
            json_t *x = json_object_get(j, n->kids[i].f.name), *y;
            if (x == NULL)
                continue;
            if ((y = leaves_json(&n->kids[i], x, depth + 1, oom)) == NULL ||
                json_object_set_new(out, n->kids[i].f.name, y) != 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    if (!json_is_string(j) || !text_leaves(n))
        return json_incref(j);
    return leaf_text(&n->f, json_string_value(j), json_string_length(j), oom);
}

/* The list value s[0..n) of root whose text leaves are PostgreSQL text as the nested
 * value form (*out malloc'd): 1 done, 0 a mismatch, -1 out of memory. */
static int text_leaves_to_nested(const cdc_ice_node_t *root, const char *s, size_t n, char **out)
{
    bool oom = false;
    json_t *in = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    json_t *o = in != NULL ? leaves_json(root, in, 0, &oom) : NULL;
    json_decref(in);
    *out = o ? json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    if (oom || (o != NULL && *out == NULL))
        return -1;
    return *out != NULL ? 1 : 0;
}

/* An array attribute of a composite, its PostgreSQL array text s[0..n), as the nested
 * value form of list node k; NULL on a mismatch. */
static json_t *array_json(const cdc_ice_node_t *k, const char *s, size_t n, bool *oom)
{
    const cdc_ice_node_t *leaf = k;
    cdc_value_enc_t enc = CDC_VENC_STRING;
    cdc_buf_t b = {0};
    json_t *in, *j = NULL;

    while (leaf->f.type == CDC_ICE_LIST && leaf->nkids == 1)
        leaf = &leaf->kids[0];
    switch (leaf->f.type) {
    case CDC_ICE_BOOLEAN:
        enc = CDC_VENC_BOOL;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_LONG:
        enc = CDC_VENC_INT;
        break;
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE:
        enc = CDC_VENC_FLOAT;
        break;
    case CDC_ICE_DECIMAL:
        enc = CDC_VENC_DECIMAL;
        break;
    default:
        break;
    }
    if (!cdc_pg_array_to_json(&b, enc, s, n)) {
        *oom = *oom || b.oom;
        cdc_buf_free(&b);
        return NULL;
    }
    if ((in = json_loadb(b.data, b.len, 0, NULL)) != NULL)
        j = leaves_json(k, in, 0, oom);
    json_decref(in);
    cdc_buf_free(&b);
    return j;
}

/* A composite's text as a JSON object of struct st's fields; NULL on a mismatch. */
static json_t *record_json(const cdc_ice_node_t *st, const char *s, size_t n, int depth, bool *oom)
{
    const char *p = s, *end = s + n;
    json_t *o;
    cdc_buf_t t = {0};

    if (n < 2 || *p != '(' || end[-1] != ')' || depth > 8 || (o = json_object()) == NULL)
        return NULL;
    p++;
    for (size_t i = 0; i < st->nkids; i++) {
        const cdc_ice_node_t *k = &st->kids[i];
        bool null;
        json_t *j = NULL;
        if ((i > 0 && (p >= end || *p++ != ',')) || !record_field(&p, end, &t, &null))
            goto mismatch;
        if (null) {
            j = json_null();
        } else if (k->f.type == CDC_ICE_STRUCT) {
            j = record_json(k, t.data ? t.data : "", t.len, depth + 1, oom);
        } else if (k->f.type == CDC_ICE_LIST) {
            j = array_json(k, t.data ? t.data : "", t.len, oom);
        } else {
            j = leaf_text(&k->f, t.data ? t.data : "", t.len, oom);
        }
        if (j == NULL || json_object_set_new(o, k->f.name, j) != 0)
            goto mismatch;
    }
    if (p != end - 1)
        goto mismatch;
    cdc_buf_free(&t);
    return o;
mismatch:
    cdc_buf_free(&t);
    json_decref(o);
    return NULL;
}

/* A composite's text s[0..n) as the nested value form of struct st (*out malloc'd):
 * 1 done, 0 a mismatch, -1 out of memory. */
static int record_to_nested(const cdc_ice_node_t *st, const char *s, size_t n, char **out)
{
    bool oom = false;
    json_t *o = record_json(st, s, n, 0, &oom);
    *out = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    if (oom || (o != NULL && *out == NULL))
        return -1;
    return *out != NULL ? 1 : 0;
}

/* ---- the tree path ------------------------------------------------------------------- */

/* The tree's value as the converter sees it (strings stay in the tree). */
static void jv_from_json(json_t *j, cdc_jv_t *jv)
{
    memset(jv, 0, sizeof(*jv));
    switch (j == NULL ? JSON_NULL : json_typeof(j)) {
    case JSON_TRUE:
        jv->t = CDC_JV_TRUE;
        break;
    case JSON_FALSE:
        jv->t = CDC_JV_FALSE;
        break;
    case JSON_INTEGER:
        jv->t = CDC_JV_INT;
        jv->i = json_integer_value(j);
        break;
    case JSON_REAL:
        jv->t = CDC_JV_REAL;
        jv->d = json_real_value(j);
        break;
    case JSON_STRING:
        jv->t = CDC_JV_STRING;
        jv->s = json_string_value(j);
        jv->n = json_string_length(j);
        break;
    case JSON_OBJECT:
    case JSON_ARRAY:
        jv->t = CDC_JV_OTHER;
        break;
    default:
        jv->t = CDC_JV_NULL;
        break;
    }
}

/*
 * Converts JSON j to the column's type. Returns false with de set on a type mismatch
 * (nothing set when out of memory).
 */
static bool convert(const cdc_column_t *col, json_t *j, const char *placeholder, cdc_val_t *v,
                    cdc_decode_error_t *de)
{
    cdc_jv_t jv;
    int r;

    jv_from_json(j, &jv);
    if (jv.t == CDC_JV_OTHER && col->type == CDC_ICE_STRING) { /* json/jsonb as structure */
        char *d = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        bool ok;
        memset(v, 0, sizeof(*v));
        v->kind = CDC_VAL_SET;
        ok = d != NULL && cdc_val_set_bytes(v, d, strlen(d));
        free(d);
        return ok;
    }
    if (jv.t == CDC_JV_OTHER && col->tree != NULL) { /* a list or struct sent natively */
        char *d = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
        if (d == NULL)
            return false;
        jv.t = CDC_JV_STRING;
        jv.s = d;
        jv.n = strlen(d);
        r = cdc_decode_convert(col, &jv, NULL, v);
        free(d);
        if (r < 0)
            return false;
        jv.t = CDC_JV_OTHER;
    } else {
        r = cdc_decode_convert(col, &jv, placeholder, v);
    }
    if (r > 0)
        return true;
    if (r < 0)
        return false;
    de->cls = CDC_DLQ_TYPE_MISMATCH;
    {
        char tb[32], why[160] = "";
        char *shown = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        int n;
        /* a list's reason (names of its type's fields only, never a value) */
        if (col->tree != NULL && col->enc != CDC_ENC_RECORD && jv.t == CDC_JV_STRING &&
            cdc_ice_nested_shred(col->tree, jv.s, jv.n, NULL, NULL, why + 2, sizeof(why) - 4) ==
                CDC_ERR_INVALID) {
            why[0] = ' ';
            why[1] = '(';
            strcat(why, ")");
        }
        n = snprintf(de->msg, sizeof(de->msg), "column \"%s\" expects %s%s, got ", col->name,
                     ice_type_name(col, tb, sizeof(tb)), why);
        if (n > 0 && (size_t)n < sizeof(de->msg)) {
            de->quote_at = (size_t)n;
            snprintf(de->msg + n, sizeof(de->msg) - (size_t)n, "%.80s", shown ? shown : "null");
        }
        free(shown);
    }
    memset(v, 0, sizeof(*v));
    return false;
}

/* de's class and message from src (de's schema version stays). */
static void set_error(cdc_decode_error_t *de, const cdc_decode_error_t *src)
{
    de->cls = src->cls;
    memcpy(de->msg, src->msg, sizeof(de->msg));
    de->quote_at = src->quote_at;
}

/* Decodes a JSON object into a row of schema s. Missing columns read as null. */
bool cdc_decode_row_json(const cdc_source_schema_t *s, json_t *obj, const char *placeholder,
                         cdc_row_t *r, unsigned *nulled, cdc_decode_error_t *de)
{
    r->schema = s;
    r->vals = calloc(s->ncols ? s->ncols : 1, sizeof(cdc_val_t));
    if (r->vals == NULL) {
        de->cls = CDC_DLQ_MALFORMED_JSON;
        snprintf(de->msg, sizeof(de->msg), "out of memory");
        return false;
    }
    for (size_t i = 0; i < s->ncols; i++) {
        json_t *j = json_object_get(obj, s->cols[i].name);
        if (j == NULL) { /* column not in the event (e.g. before image): null, never guessed */
            r->vals[i].kind = CDC_VAL_NULL;
            continue;
        }
        cdc_decode_error_t ce = {.cls = CDC_DLQ__COUNT}; /* (unset: out of memory) */
        if (convert(&s->cols[i], j, placeholder, &r->vals[i], &ce))
            continue;
        if (ce.cls == CDC_DLQ_TYPE_MISMATCH && nulled != NULL && s->cols[i].optional &&
            !s->cols[i].key) {
            /* One value the column cannot hold: the row is kept with the column null, the
             * record goes to the DLQ too, named after the first such column. */
            r->vals[i].kind = CDC_VAL_NULL;
            if ((*nulled)++ == 0)
                set_error(de, &ce);
            continue;
        }
        if (ce.cls != CDC_DLQ__COUNT)
            set_error(de, &ce);
        cdc_row_clear(r);
        return false;
    }
    return true;
}
