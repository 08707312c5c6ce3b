/*
 * Iceberg partition transforms and partition values (see partition.h): the
 * transforms of the table spec on single-value encoded values, Murmur3 for bucket[N],
 * and the values' copy, comparison and integer/decimal views. The manifest code
 * (manifest.c) stores the results; the worker computes them per row. Specs and sort
 * orders, which name the transforms, are in partition_spec.c.
 */
#include "common/iceberg/partition.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/iceberg/bounds.h"
#include "common/iceberg/byteorder.h"
#include "common/iceberg/decimal.h"
#include "common/iceberg/partition_int.h"

#define MICROS_PER_HOUR 3600000000LL
#define MICROS_PER_DAY 86400000000LL

static const char *const transform_names[] = {
    [CDC_ICE_TRANSFORM_IDENTITY] = "identity", [CDC_ICE_TRANSFORM_BUCKET] = "bucket",
    [CDC_ICE_TRANSFORM_TRUNCATE] = "truncate", [CDC_ICE_TRANSFORM_YEAR] = "year",
    [CDC_ICE_TRANSFORM_MONTH] = "month",       [CDC_ICE_TRANSFORM_DAY] = "day",
    [CDC_ICE_TRANSFORM_HOUR] = "hour",         [CDC_ICE_TRANSFORM_VOID] = "void",
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

const char *cdc_ice_transform_name(cdc_ice_transform_kind_t kind)
{
    return (size_t)kind < NTRANSFORMS ? transform_names[kind] : "unknown";
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

bool cdc_ice_type_is_integer(cdc_ice_type_t t)
{
    return t == CDC_ICE_INT || t == CDC_ICE_DATE || t == CDC_ICE_LONG || t == CDC_ICE_TIME ||
           t == CDC_ICE_TIMESTAMP || t == CDC_ICE_TIMESTAMPTZ;
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

    if (kind == CDC_ICE_TRANSFORM_HOUR) {
        int64_t hours = floor_div(v, MICROS_PER_HOUR);
        /* beyond an int's hours (the infinities, value.h, and years past 245,000): no
         * partition value; the caller writes the row unpartitioned */
        if (hours > INT32_MAX || hours < INT32_MIN)
            return CDC_ERR_INVALID;
        return set_int(out, (int32_t)hours);
    }
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
    if (cdc_ice_type_is_integer(type->type))
        return CMP(cdc_ice_part_value_int(a), cdc_ice_part_value_int(b));
    switch (type->type) {
    case CDC_ICE_BOOLEAN:
        return CMP(a->bytes[0] != 0, b->bytes[0] != 0);
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
