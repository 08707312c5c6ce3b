/*
 * Hexadecimal digits: the one parser of hex text, for PostgreSQL's bytea output (\x...),
 * UUIDs, JSON's \uXXXX escapes and the checkpoint's hex-encoded bounds, and its writer
 * (digests, the worker's hashed columns). Inline, because the worker's JSON scanner calls
 * it per character.
 */
#ifndef CDC_COMMON_HEX_H
#define CDC_COMMON_HEX_H

#include <stddef.h>

/* The value (0..15) of hex digit c, either case, or -1 when c is not one. */
static inline int cdc_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte (0..255) written as the two hex digits p[0] p[1], or -1 when either is not a
 * hex digit. p[1] is only read when p[0] is a digit, so a string ending after p[0] is
 * safe to pass. */
static inline int cdc_hex_byte(const char *p)
{
    int hi = cdc_hex_digit(p[0]), lo;
    if (hi < 0 || (lo = cdc_hex_digit(p[1])) < 0)
        return -1;
    return hi << 4 | lo;
}

/* Writes the n bytes b as 2n lower-case hex digits and a NUL into out (2n + 1 bytes). */
static inline void cdc_hex_encode(const void *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = b;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

#endif
