/*
 * Iceberg partition specs, sort orders and transforms (see partition.h): the
 * transforms of the table spec on single-value encoded values, Murmur3 for bucket[N],
 * the declaration text ("bucket[16](id), day(ts)") <-> spec/order mapping against a
 * schema, and the JSON of both as table metadata holds them. The manifest code
 * (manifest.c) stores the results; the worker computes them per row.
 */
#include "common/iceberg/partition.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/iceberg/bounds.h"
#include "common/iceberg/byteorder.h"
#include "common/iceberg/decimal.h"
#include "common/iceberg/schema.h"

#define MICROS_PER_HOUR 3600000000LL
#define MICROS_PER_DAY 86400000000LL

static const char *const transform_names[] = {
    [CDC_ICE_TRANSFORM_IDENTITY] = "identity", [CDC_ICE_TRANSFORM_BUCKET] = "bucket",
    [CDC_ICE_TRANSFORM_TRUNCATE] = "truncate", [CDC_ICE_TRANSFORM_YEAR] = "year",
    [CDC_ICE_TRANSFORM_MONTH] = "month",       [CDC_ICE_TRANSFORM_DAY] = "day",
    [CDC_ICE_TRANSFORM_HOUR] = "hour",         [CDC_ICE_TRANSFORM_VOID] = "void",
};

/* Suffix of a partition field's name per transform (identity: the column's name). */
static const char *const name_suffixes[] = {
    [CDC_ICE_TRANSFORM_IDENTITY] = "",       [CDC_ICE_TRANSFORM_BUCKET] = "_bucket",
    [CDC_ICE_TRANSFORM_TRUNCATE] = "_trunc", [CDC_ICE_TRANSFORM_YEAR] = "_year",
    [CDC_ICE_TRANSFORM_MONTH] = "_month",    [CDC_ICE_TRANSFORM_DAY] = "_day",
    [CDC_ICE_TRANSFORM_HOUR] = "_hour",      [CDC_ICE_TRANSFORM_VOID] = "_null",
};

#define NTRANSFORMS (sizeof(transform_names) / sizeof(transform_names[0]))

/* ---- little helpers ------------------------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* Civil year and month (1..12) of a day count from 1970-01-01 (H. Hinnant's algorithm). */
static void civil_from_days(int64_t z, int64_t *year, int *month)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = yoe + era * 400 + (m <= 2);
    *month = m;
}

static size_t value_size(cdc_ice_type_t type)
{
    switch (type) {
    case CDC_ICE_BOOLEAN:
        return 1;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
    case CDC_ICE_FLOAT:
        return 4;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
    case CDC_ICE_DOUBLE:
        return 8;
    case CDC_ICE_UUID:
        return 16;
    default:
        return 0; /* variable */
    }
}

bool cdc_ice_part_value_valid(const cdc_ice_field_t *type, const cdc_ice_part_value_t *v)
{
    if (v->null)
        return true;
    if (v->len > 0 && v->bytes == NULL)
        return false;
    size_t want = value_size(type->type);
    if (want > 0)
        return v->len == want;
    if (type->type == CDC_ICE_DECIMAL)
        return v->len >= 1 && v->len <= 16;
    return type->type == CDC_ICE_STRING || type->type == CDC_ICE_BINARY;
}

/* ---- Murmur3 ------------------------------------------------------------------------- */

static uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

int32_t cdc_ice_murmur3_32(const uint8_t *data, size_t len)
{
    const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
    uint32_t h = 0, k;
    size_t nblocks = len / 4;

    for (size_t i = 0; i < nblocks; i++) {
        k = get_le32(data + 4 * i);
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64;
    }
    const uint8_t *tail = data + 4 * nblocks;
    k = 0;
    switch (len & 3) {
    case 3:
        k ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        k ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6b;
    h ^= h >> 13;
    h *= 0xc2b2ae35;
    h ^= h >> 16;
    return (int32_t)h;
}

/* ---- transforms ---------------------------------------------------------------------- */

cdc_err_t cdc_ice_transform_parse(const char *text, cdc_ice_transform_t *out)
{
    char name[16];
    size_t n = 0;
    long param = 0;

    if (text == NULL)
        return CDC_ERR_INVALID;
    while (isspace((unsigned char)*text))
        text++;
    while (n < sizeof(name) - 1 && isalpha((unsigned char)text[n])) {
        name[n] = (char)tolower((unsigned char)text[n]);
        n++;
    }
    name[n] = '\0';
    const char *rest = text + n;
    for (size_t k = 0; k < NTRANSFORMS; k++) {
        if (strcmp(name, transform_names[k]) != 0)
            continue;
        out->kind = (cdc_ice_transform_kind_t)k;
        out->param = 0;
        if (k == CDC_ICE_TRANSFORM_BUCKET || k == CDC_ICE_TRANSFORM_TRUNCATE) {
            char *end;
            while (isspace((unsigned char)*rest))
                rest++;
            if (*rest++ != '[')
                return CDC_ERR_INVALID;
            param = strtol(rest, &end, 10);
            if (end == rest || param < 1 || param > INT32_MAX)
                return CDC_ERR_INVALID;
            rest = end;
            while (isspace((unsigned char)*rest))
                rest++;
            if (*rest++ != ']')
                return CDC_ERR_INVALID;
            out->param = (int32_t)param;
        }
        while (isspace((unsigned char)*rest))
            rest++;
        return *rest == '\0' ? CDC_OK : CDC_ERR_INVALID;
    }
    return CDC_ERR_INVALID;
}

const char *cdc_ice_transform_string(cdc_ice_transform_t t, char *buf, size_t cap)
{
    if (cap == 0)
        return buf;
    if ((size_t)t.kind >= NTRANSFORMS)
        snprintf(buf, cap, "unknown");
    else if (t.kind == CDC_ICE_TRANSFORM_BUCKET || t.kind == CDC_ICE_TRANSFORM_TRUNCATE)
        snprintf(buf, cap, "%s[%d]", transform_names[t.kind], (int)t.param);
    else
        snprintf(buf, cap, "%s", transform_names[t.kind]);
    return buf;
}

bool cdc_ice_transform_result(cdc_ice_transform_t t, const cdc_ice_field_t *source,
                              cdc_ice_field_t *result)
{
    cdc_ice_type_t st = source->type;
    bool temporal = st == CDC_ICE_DATE || st == CDC_ICE_TIMESTAMP || st == CDC_ICE_TIMESTAMPTZ;
    bool ok;

    *result = *source; /* id and name borrowed from source; callers override */
    result->required = false;
    result->doc = NULL;
    switch (t.kind) {
    case CDC_ICE_TRANSFORM_IDENTITY:
    case CDC_ICE_TRANSFORM_VOID:
        return true;
    case CDC_ICE_TRANSFORM_BUCKET:
        ok = st != CDC_ICE_BOOLEAN && st != CDC_ICE_FLOAT && st != CDC_ICE_DOUBLE && t.param > 0;
        break;
    case CDC_ICE_TRANSFORM_TRUNCATE:
        return t.param > 0 && (st == CDC_ICE_INT || st == CDC_ICE_LONG || st == CDC_ICE_DECIMAL ||
                               st == CDC_ICE_STRING || st == CDC_ICE_BINARY);
    case CDC_ICE_TRANSFORM_YEAR:
    case CDC_ICE_TRANSFORM_MONTH:
        ok = temporal;
        break;
    case CDC_ICE_TRANSFORM_DAY:
        if (!temporal)
            return false;
        result->type = CDC_ICE_DATE;
        result->precision = result->scale = 0;
        return true;
    case CDC_ICE_TRANSFORM_HOUR:
        ok = st == CDC_ICE_TIMESTAMP || st == CDC_ICE_TIMESTAMPTZ;
        break;
    default:
        return false;
    }
    result->type = CDC_ICE_INT;
    result->precision = result->scale = 0;
    return ok;
}

static cdc_err_t set_out(cdc_ice_part_value_t *out, const void *p, size_t n)
{
    out->null = false;
    out->len = n;
    out->bytes = malloc(n ? n : 1);
    if (out->bytes == NULL)
        return CDC_ERR_NOMEM;
    if (n > 0)
        memcpy(out->bytes, p, n);
    return CDC_OK;
}

static cdc_err_t set_int(cdc_ice_part_value_t *out, int32_t v)
{
    uint8_t b[4];
    put_le32(b, (uint32_t)v);
    return set_out(out, b, 4);
}

int64_t cdc_ice_part_value_int(const cdc_ice_part_value_t *v)
{
    return v->len == 4 ? (int64_t)(int32_t)get_le32(v->bytes) : (int64_t)get_le64(v->bytes);
}

__int128 cdc_ice_part_value_decimal(const cdc_ice_part_value_t *v)
{
    return cdc_ice_decimal_from_be(v->bytes, v->len);
}

cdc_err_t cdc_ice_part_value_set_int(const cdc_ice_field_t *type, int64_t v,
                                     cdc_ice_part_value_t *out)
{
    uint8_t b[8];
    if (value_size(type->type) == 4) {
        put_le32(b, (uint32_t)v);
        return set_out(out, b, 4);
    }
    put_le64(b, (uint64_t)v);
    return set_out(out, b, 8);
}

cdc_err_t cdc_ice_part_value_set_decimal(__int128 unscaled, cdc_ice_part_value_t *out)
{
    static const cdc_ice_field_t dec = {.type = CDC_ICE_DECIMAL, .precision = 38};
    cdc_ice_value_t v = {.v.dec = unscaled};
    uint8_t b[16];
    size_t n;

    if (!cdc_ice_bound_encode(&dec, &v, b, sizeof(b), &n))
        return CDC_ERR_INVALID;
    return set_out(out, b, n);
}

static cdc_err_t apply_bucket(int32_t n, const cdc_ice_field_t *source,
                              const cdc_ice_part_value_t *in, cdc_ice_part_value_t *out)
{
    uint8_t tmp[16];
    const uint8_t *data = in->bytes;
    size_t len = in->len;

    switch (source->type) {
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        /* ints hash as their long value */
        put_le64(tmp, (uint64_t)(int64_t)(int32_t)get_le32(in->bytes));
        data = tmp;
        len = 8;
        break;
    case CDC_ICE_DECIMAL: {
        /* the unscaled value's minimal bytes, whatever width the input had */
        cdc_ice_value_t v = {.v.dec = cdc_ice_part_value_decimal(in)};
        if (!cdc_ice_bound_encode(source, &v, tmp, sizeof(tmp), &len))
            return CDC_ERR_INVALID;
        data = tmp;
        break;
    }
    default:
        break;
    }
    int32_t h = cdc_ice_murmur3_32(data, len);
    return set_int(out, (int32_t)((h & INT32_MAX) % n));
}

static cdc_err_t apply_truncate(int32_t w, const cdc_ice_field_t *source,
                                const cdc_ice_part_value_t *in, cdc_ice_part_value_t *out)
{
    size_t n;

    switch (source->type) {
    case CDC_ICE_INT:
    case CDC_ICE_LONG: {
        __int128 v = cdc_ice_part_value_int(in);
        return cdc_ice_part_value_set_int(source, (int64_t)(v - (((v % w) + w) % w)), out);
    }
    case CDC_ICE_DECIMAL: {
        __int128 v = cdc_ice_part_value_decimal(in);
        return cdc_ice_part_value_set_decimal(v - (((v % w) + w) % w), out);
    }
    case CDC_ICE_STRING: {
        /* the first w code points: stop at the lead byte of code point w + 1 */
        size_t cps = 0;
        for (n = 0; n < in->len; n++)
            if ((in->bytes[n] & 0xC0) != 0x80 && cps++ == (size_t)w)
                break;
        return set_out(out, in->bytes, n);
    }
    case CDC_ICE_BINARY:
        return set_out(out, in->bytes, in->len < (size_t)w ? in->len : (size_t)w);
    default:
        return CDC_ERR_INVALID;
    }
}

static cdc_err_t apply_time(cdc_ice_transform_kind_t kind, const cdc_ice_field_t *source,
                            const cdc_ice_part_value_t *in, cdc_ice_part_value_t *out)
{
    int64_t v = cdc_ice_part_value_int(in), days, year;
    int month;

    if (kind == CDC_ICE_TRANSFORM_HOUR)
        return set_int(out, (int32_t)floor_div(v, MICROS_PER_HOUR));
    days = source->type == CDC_ICE_DATE ? v : floor_div(v, MICROS_PER_DAY);
    if (kind == CDC_ICE_TRANSFORM_DAY)
        return set_int(out, (int32_t)days);
    civil_from_days(days, &year, &month);
    if (kind == CDC_ICE_TRANSFORM_YEAR)
        return set_int(out, (int32_t)(year - 1970));
    return set_int(out, (int32_t)((year - 1970) * 12 + month - 1));
}

cdc_err_t cdc_ice_transform_apply(cdc_ice_transform_t t, const cdc_ice_field_t *source,
                                  const cdc_ice_part_value_t *in, cdc_ice_part_value_t *out)
{
    cdc_ice_field_t result;

    memset(out, 0, sizeof(*out));
    out->null = true;
    if (!cdc_ice_transform_result(t, source, &result) || !cdc_ice_part_value_valid(source, in))
        return CDC_ERR_INVALID;
    if (in->null || t.kind == CDC_ICE_TRANSFORM_VOID)
        return CDC_OK;
    switch (t.kind) {
    case CDC_ICE_TRANSFORM_IDENTITY:
        return set_out(out, in->bytes, in->len);
    case CDC_ICE_TRANSFORM_BUCKET:
        return apply_bucket(t.param, source, in, out);
    case CDC_ICE_TRANSFORM_TRUNCATE:
        return apply_truncate(t.param, source, in, out);
    default:
        return apply_time(t.kind, source, in, out);
    }
}

/* ---- values -------------------------------------------------------------------------- */

void cdc_ice_part_values_free(cdc_ice_part_value_t *values, size_t n)
{
    for (size_t i = 0; values != NULL && i < n; i++)
        free(values[i].bytes);
    free(values);
}

cdc_err_t cdc_ice_part_value_copy(cdc_ice_part_value_t *dst, const cdc_ice_part_value_t *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->null = src->null;
    return src->null ? CDC_OK : set_out(dst, src->bytes, src->len);
}

cdc_err_t cdc_ice_part_values_copy(cdc_ice_part_value_t **dst, const cdc_ice_part_value_t *src,
                                   size_t n)
{
    *dst = NULL;
    if (n == 0)
        return CDC_OK;
    cdc_ice_part_value_t *v = calloc(n, sizeof(*v));
    if (v == NULL)
        return CDC_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (cdc_ice_part_value_copy(&v[i], &src[i]) != CDC_OK) {
            cdc_ice_part_values_free(v, n);
            return CDC_ERR_NOMEM;
        }
    }
    *dst = v;
    return CDC_OK;
}

static double float_value(const cdc_ice_field_t *type, const cdc_ice_part_value_t *v)
{
    if (type->type == CDC_ICE_FLOAT) {
        uint32_t bits = get_le32(v->bytes);
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    uint64_t bits = get_le64(v->bytes);
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

bool cdc_ice_part_value_is_nan(const cdc_ice_field_t *type, const cdc_ice_part_value_t *v)
{
    return !v->null && (type->type == CDC_ICE_FLOAT || type->type == CDC_ICE_DOUBLE) &&
           cdc_ice_part_value_valid(type, v) && isnan(float_value(type, v));
}

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b) ? 1 : 0)

int cdc_ice_part_value_compare(const cdc_ice_field_t *type, const cdc_ice_part_value_t *a,
                               const cdc_ice_part_value_t *b)
{
    switch (type->type) {
    case CDC_ICE_BOOLEAN:
        return CMP(a->bytes[0] != 0, b->bytes[0] != 0);
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        return CMP(cdc_ice_part_value_int(a), cdc_ice_part_value_int(b));
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE: {
        double x = float_value(type, a), y = float_value(type, b);
        if (isnan(x) || isnan(y))
            return CMP(isnan(x), isnan(y));
        return CMP(x, y);
    }
    case CDC_ICE_DECIMAL:
        return CMP(cdc_ice_part_value_decimal(a), cdc_ice_part_value_decimal(b));
    default: {
        size_t n = a->len < b->len ? a->len : b->len;
        int c = n > 0 ? memcmp(a->bytes, b->bytes, n) : 0;
        return c != 0 ? (c < 0 ? -1 : 1) : CMP(a->len, b->len);
    }
    }
}

/* ---- declaration text ---------------------------------------------------------------- */

/* Splits text at top-level commas (outside quotes, brackets and parentheses). */
static char **split_terms(const char *text, size_t *n)
{
    char **v = NULL;
    size_t cnt = 0;
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
        char **nv = realloc(v, (cnt + 1) * sizeof(char *));
        if (nv == NULL || (nv[cnt] = strndup(s, (size_t)(e - s))) == NULL) {
            v = nv ? nv : v;
            for (size_t i = 0; i < cnt; i++)
                free(v[i]);
            free(v);
            return NULL;
        }
        v = nv;
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
    out->column = NULL;
    for (size_t i = 0; i < schema->nfields && out->column == NULL; i++)
        if (strcmp(schema->fields[i].name, name) == 0)
            out->column = &schema->fields[i];
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

static bool same_transform(cdc_ice_transform_t a, cdc_ice_transform_t b)
{
    return a.kind == b.kind && a.param == b.param;
}

cdc_err_t cdc_ice_partition_spec_parse(const char *text, const cdc_ice_schema_t *schema,
                                       int32_t first_field_id, cdc_ice_partition_spec_t *out,
                                       cdc_error_t *e)
{
    size_t nterms = 0;
    char **terms;
    cdc_err_t rc = CDC_OK;

    memset(out, 0, sizeof(*out));
    if (blank(text))
        return CDC_OK;
    if ((terms = split_terms(text, &nterms)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if ((out->fields = calloc(nterms, sizeof(*out->fields))) == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nterms; i++) {
        term_t t;
        if (terms[i][0] == '\0') {
            rc = cdc_error_set(e, CDC_ERR_INVALID, "partition spec \"%s\": empty term %zu", text,
                               i + 1);
            goto done;
        }
        if ((rc = parse_expr("partition spec", terms[i], schema, &t, e)) != CDC_OK)
            goto done;
        if (*t.rest != '\0') {
            rc = cdc_error_set(e, CDC_ERR_INVALID,
                               "partition spec term \"%s\": unexpected \"%s\" after the column",
                               terms[i], t.rest);
            goto done;
        }
        cdc_ice_partition_field_t *f = &out->fields[i];
        f->source_id = t.column->id;
        f->field_id = first_field_id + (int32_t)i;
        f->transform = t.transform;
        if (asprintf(&f->name, "%s%s", t.column->name, name_suffixes[t.transform.kind]) < 0) {
            f->name = NULL;
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        out->nfields++;
        for (size_t k = 0; k < i; k++) {
            const cdc_ice_partition_field_t *g = &out->fields[k];
            if (strcmp(g->name, f->name) == 0 ||
                (g->source_id == f->source_id && g->transform.kind == f->transform.kind)) {
                rc = cdc_error_set(e, CDC_ERR_INVALID,
                                   "partition spec term \"%s\": column \"%s\" is already "
                                   "partitioned by %s (term %zu)",
                                   terms[i], t.column->name, transform_names[g->transform.kind],
                                   k + 1);
                goto done;
            }
        }
        /* a partition field may not take another column's name */
        for (size_t k = 0; k < schema->nfields; k++)
            if (schema->fields[k].id != f->source_id &&
                strcmp(schema->fields[k].name, f->name) == 0) {
                rc = cdc_error_set(e, CDC_ERR_INVALID,
                                   "partition spec term \"%s\": partition field name \"%s\" is "
                                   "the name of another column",
                                   terms[i], f->name);
                goto done;
            }
    }
done:
    free_terms(terms, nterms);
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

cdc_err_t cdc_ice_sort_order_parse(const char *text, const cdc_ice_schema_t *schema,
                                   cdc_ice_sort_order_t *out, cdc_error_t *e)
{
    size_t nterms = 0;
    char **terms;
    cdc_err_t rc = CDC_OK;

    memset(out, 0, sizeof(*out));
    if (blank(text))
        return CDC_OK;
    if ((terms = split_terms(text, &nterms)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if ((out->fields = calloc(nterms, sizeof(*out->fields))) == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nterms; i++) {
        term_t t;
        if (terms[i][0] == '\0') {
            rc =
                cdc_error_set(e, CDC_ERR_INVALID, "sort order \"%s\": empty term %zu", text, i + 1);
            goto done;
        }
        if ((rc = parse_expr("sort order", terms[i], schema, &t, e)) != CDC_OK)
            goto done;
        cdc_ice_sort_field_t *f = &out->fields[i];
        f->source_id = t.column->id;
        f->transform = t.transform;
        if ((rc = parse_direction(terms[i], t.rest, f, e)) != CDC_OK)
            goto done;
        out->nfields++;
    }
done:
    free_terms(terms, nterms);
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
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->s, cap);
        if (p == NULL) {
            t->oom = true;
            return;
        }
        t->s = p;
        t->cap = cap;
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

cdc_err_t cdc_ice_partition_spec_from_jansson(const json_t *obj, cdc_ice_partition_spec_t *out,
                                              cdc_error_t *e)
{
    const json_t *fields = json_object_get(obj, "fields"), *fo;
    size_t i;
    cdc_err_t rc;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj) || !json_is_integer(json_object_get(obj, "spec-id")) ||
        !json_is_array(fields))
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "partition spec needs an integer \"spec-id\" and \"fields\"");
    out->spec_id = (int32_t)json_integer_value(json_object_get(obj, "spec-id"));
    if (json_array_size(fields) > 0 &&
        (out->fields = calloc(json_array_size(fields), sizeof(*out->fields))) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    json_array_foreach(fields, i, fo)
    {
        cdc_ice_partition_field_t *f = &out->fields[i];
        const json_t *src = json_object_get(fo, "source-id"),
                     *fid = json_object_get(fo, "field-id");
        const char *name = json_string_value(json_object_get(fo, "name"));
        if (!json_is_integer(src) || !json_is_integer(fid) || name == NULL) {
            rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                               "partition spec %d field %zu needs \"name\", \"source-id\" and "
                               "\"field-id\"",
                               (int)out->spec_id, i);
            goto fail;
        }
        if ((rc = json_transform(fo, "partition", &f->transform, e)) != CDC_OK)
            goto fail;
        f->source_id = (int32_t)json_integer_value(src);
        f->field_id = (int32_t)json_integer_value(fid);
        if ((f->name = strdup(name)) == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        out->nfields++;
    }
    return CDC_OK;
fail:
    cdc_ice_partition_spec_free(out);
    return rc;
}

cdc_err_t cdc_ice_sort_order_from_jansson(const json_t *obj, cdc_ice_sort_order_t *out,
                                          cdc_error_t *e)
{
    const json_t *fields = json_object_get(obj, "fields"), *fo;
    size_t i;
    cdc_err_t rc;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj) || !json_is_integer(json_object_get(obj, "order-id")) ||
        !json_is_array(fields))
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "sort order needs an integer \"order-id\" and \"fields\"");
    out->order_id = (int32_t)json_integer_value(json_object_get(obj, "order-id"));
    if (json_array_size(fields) > 0 &&
        (out->fields = calloc(json_array_size(fields), sizeof(*out->fields))) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    json_array_foreach(fields, i, fo)
    {
        cdc_ice_sort_field_t *f = &out->fields[i];
        const json_t *src = json_object_get(fo, "source-id");
        const char *dir = json_string_value(json_object_get(fo, "direction"));
        const char *nulls = json_string_value(json_object_get(fo, "null-order"));
        if (!json_is_integer(src)) {
            rc = cdc_error_set(e, CDC_ERR_CORRUPT, "sort order %d field %zu has no \"source-id\"",
                               (int)out->order_id, i);
            goto fail;
        }
        if ((rc = json_transform(fo, "sort order", &f->transform, e)) != CDC_OK)
            goto fail;
        f->source_id = (int32_t)json_integer_value(src);
        f->descending = dir != NULL && strcasecmp(dir, "desc") == 0;
        f->nulls_first = nulls != NULL ? strcasecmp(nulls, "nulls-first") == 0 : !f->descending;
        out->nfields++;
    }
    return CDC_OK;
fail:
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
