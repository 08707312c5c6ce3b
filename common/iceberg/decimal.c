/*
 * Decimal conversions (see decimal.h): the literal parser, the byte length of a
 * precision, and the big-endian two's complement forms, fixed-length and minimal.
 */
#include "common/iceberg/decimal.h"

#include <stdbool.h>
#include <string.h>

__int128 cdc_ice_decimal_limit(int32_t precision)
{
    __int128 v = 1;
    for (int i = 0; i < precision; i++)
        v *= 10;
    return v;
}

int cdc_ice_decimal_fixed_len(int32_t precision)
{
    __int128 need = cdc_ice_decimal_limit(precision) - 1;
    for (int n = 1; n <= 16; n++) {
        __int128 max =
            n == 16 ? (__int128)(~(unsigned __int128)0 >> 1) : (((__int128)1) << (8 * n - 1)) - 1;
        if (max >= need)
            return n;
    }
    return 16;
}

cdc_err_t cdc_ice_decimal_parse(const char *text, size_t len, int32_t precision, int32_t scale,
                                __int128 *out)
{
    size_t i = 0;
    bool neg = false, dot = false, any = false;
    int frac = 0, digits = 0;
    unsigned __int128 v = 0;

    if (text == NULL || precision < 1 || precision > 38 || scale < 0 || scale > precision)
        return CDC_ERR_INVALID;
    if (i < len && (text[i] == '-' || text[i] == '+'))
        neg = text[i++] == '-';
    for (; i < len; i++) {
        char c = text[i];
        if (c == '.' && !dot) {
            dot = true;
            continue;
        }
        if (c < '0' || c > '9')
            return CDC_ERR_INVALID;
        any = true;
        if (dot) {
            if (frac == scale) {
                if (c != '0') /* would lose precision */
                    return CDC_ERR_INVALID;
                continue;
            }
            frac++;
        }
        if (v == 0 && c == '0' && !dot)
            continue; /* leading zero */
        if (++digits > precision)
            return CDC_ERR_INVALID;
        v = v * 10 + (unsigned)(c - '0');
    }
    if (!any)
        return CDC_ERR_INVALID;
    for (; frac < scale; frac++) {
        if (v != 0 && ++digits > precision)
            return CDC_ERR_INVALID;
        v *= 10;
    }
    *out = neg ? -(__int128)v : (__int128)v;
    return CDC_OK;
}

/* Minimal big-endian two's complement of v; returns the length (1..16). */
size_t cdc_ice_decimal_be_min(__int128 v, uint8_t *out)
{
    uint8_t full[16];
    size_t start = 0;

    for (int i = 15; i >= 0; i--) {
        full[i] = (uint8_t)v;
        v >>= 8;
    }
    /* drop redundant sign bytes */
    while (start < 15 && ((full[start] == 0x00 && !(full[start + 1] & 0x80)) ||
                          (full[start] == 0xFF && (full[start + 1] & 0x80))))
        start++;
    memcpy(out, full + start, 16 - start);
    return 16 - start;
}

void cdc_ice_decimal_be_fixed(__int128 v, uint8_t *out, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* Big-endian two's complement (1..16 bytes) -> value. */
__int128 cdc_ice_decimal_from_be(const uint8_t *p, size_t n)
{
    unsigned __int128 v = (p[0] & 0x80) ? ~(unsigned __int128)0 : 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return (__int128)v;
}

void cdc_ice_decimal_format(__int128 v, int32_t scale, char *out, size_t cap)
{
    char d[48];
    int n = 0;
    bool neg = v < 0;
    unsigned __int128 u = neg ? -(unsigned __int128)v : (unsigned __int128)v;
    size_t o = 0;

    if (cap == 0)
        return;
    do {
        d[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u > 0 && n < (int)sizeof(d) - 1);
    while (n <= scale && n < (int)sizeof(d))
        d[n++] = '0';
    if (neg && o + 1 < cap)
        out[o++] = '-';
    for (int i = n - 1; i >= 0 && o + 2 < cap; i--) {
        out[o++] = d[i];
        if (i == scale && scale > 0)
            out[o++] = '.';
    }
    out[o] = '\0';
}
