/*
 * Iceberg bounds (see bounds.h): the single-value encoding of every type and the
 * truncation of string bounds by UTF-8 code points and of binary bounds by bytes.
 */
#include "common/iceberg/bounds.h"

#include <string.h>

#include "common/iceberg/byteorder.h"
#include "common/iceberg/decimal.h"

/* Length of the UTF-8 sequence starting with lead byte c (1 for invalid bytes). */
static inline size_t utf8_len(uint8_t c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        return 2;
    if ((c & 0xF0) == 0xE0)
        return 3;
    if ((c & 0xF8) == 0xF0)
        return 4;
    return 1;
}

/* Byte length of the first `width` code points of in (or len when shorter). */
static size_t utf8_prefix(const uint8_t *in, size_t len, size_t width, size_t *npoints)
{
    size_t i = 0, n = 0;
    while (i < len && n < width) {
        size_t l = utf8_len(in[i]);
        i = i + l > len ? len : i + l;
        n++;
    }
    if (npoints)
        *npoints = n;
    return i;
}

static size_t utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static uint32_t utf8_decode(const uint8_t *p, size_t l)
{
    switch (l) {
    case 2:
        return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    case 3:
        return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    case 4:
        return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
               ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    default:
        return p[0];
    }
}

bool cdc_ice_truncate_lower(bool is_string, const uint8_t *in, size_t len, size_t width,
                            uint8_t *out, size_t cap, size_t *out_len)
{
    size_t n = is_string ? utf8_prefix(in, len, width, NULL) : (len < width ? len : width);
    if (n > cap)
        return false;
    if (n > 0)
        memcpy(out, in, n);
    *out_len = n;
    return true;
}

bool cdc_ice_truncate_upper(bool is_string, const uint8_t *in, size_t len, size_t width,
                            uint8_t *out, size_t cap, size_t *out_len)
{
    if (!is_string) {
        if (len <= width) {
            if (len > cap)
                return false;
            if (len > 0)
                memcpy(out, in, len);
            *out_len = len;
            return true;
        }
        /* increment the last byte that is not 0xFF and drop what follows */
        for (size_t i = width; i-- > 0;) {
            if (in[i] != 0xFF) {
                if (i + 1 > cap)
                    return false;
                memcpy(out, in, i);
                out[i] = (uint8_t)(in[i] + 1);
                *out_len = i + 1;
                return true;
            }
        }
        return false;
    }
    size_t np, n = utf8_prefix(in, len, width, &np);
    if (n == len) {
        if (len > cap)
            return false;
        if (len > 0)
            memcpy(out, in, len);
        *out_len = len;
        return true;
    }
    /* collect the code point starts of the prefix, then increment from the last */
    size_t starts[64];
    size_t ns = 0;
    for (size_t i = 0; i < n && ns < 64;) {
        starts[ns++] = i;
        size_t l = utf8_len(in[i]);
        i = i + l > n ? n : i + l;
    }
    while (ns > 0) {
        size_t s = starts[--ns];
        size_t l = (ns + 1 < np && ns + 1 < 64) ? starts[ns + 1] - s : n - s;
        uint32_t cp = utf8_decode(in + s, l) + 1;
        if (cp >= 0xD800 && cp <= 0xDFFF)
            cp = 0xE000;
        if (cp > 0x10FFFF)
            continue;
        uint8_t enc[4];
        size_t el = utf8_encode(cp, enc);
        if (s + el > cap)
            return false;
        memcpy(out, in, s);
        memcpy(out + s, enc, el);
        *out_len = s + el;
        return true;
    }
    return false;
}

bool cdc_ice_bound_encode(const cdc_ice_field_t *field, const cdc_ice_value_t *v, uint8_t *out,
                          size_t cap, size_t *out_len)
{
    size_t n;

    switch (field->type) {
    case CDC_ICE_BOOLEAN:
        if (cap < 1)
            return false;
        out[0] = v->v.b ? 1 : 0;
        n = 1;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        if (cap < 4)
            return false;
        put_le32(out, (uint32_t)v->v.i32);
        n = 4;
        break;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        if (cap < 8)
            return false;
        put_le64(out, (uint64_t)v->v.i64);
        n = 8;
        break;
    case CDC_ICE_FLOAT: {
        uint32_t bits;
        if (cap < 4)
            return false;
        memcpy(&bits, &v->v.f32, 4);
        put_le32(out, bits);
        n = 4;
        break;
    }
    case CDC_ICE_DOUBLE: {
        uint64_t bits;
        if (cap < 8)
            return false;
        memcpy(&bits, &v->v.f64, 8);
        put_le64(out, bits);
        n = 8;
        break;
    }
    case CDC_ICE_DECIMAL: {
        uint8_t tmp[16];
        n = cdc_ice_decimal_be_min(v->v.dec, tmp);
        if (n > cap)
            return false;
        memcpy(out, tmp, n);
        break;
    }
    case CDC_ICE_UUID:
        if (cap < 16)
            return false;
        memcpy(out, v->v.uuid, 16);
        n = 16;
        break;
    case CDC_ICE_STRING:
    case CDC_ICE_BINARY:
        n = v->v.bytes.len;
        if (n > cap)
            return false;
        if (n > 0)
            memcpy(out, v->v.bytes.ptr, n);
        break;
    default:
        return false;
    }
    *out_len = n;
    return true;
}
