/*
 * Base64 encoding and strict decoding; see base64.h.
 */
#include "common/base64.h"

#include <stdint.h>
#include <stdlib.h>

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *cdc_base64_encode(const void *data, size_t len)
{
    const unsigned char *in = data;
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    size_t o = 0;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = b64chars[(v >> 18) & 63];
        out[o++] = b64chars[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64chars[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64chars[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64val(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

ptrdiff_t cdc_base64_decode_into(const char *text, size_t n, char *out)
{
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    size_t pad = 0;

    for (size_t i = 0; i < n; i++) {
        if (text[i] == '=') {
            pad++;
            continue;
        }
        int v = b64val(text[i]);
        if (v < 0 || pad > 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) { /* (o < i: in place, the output stays behind the input) */
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    /* leftover bits must be zero padding and the total length a valid one */
    if (pad > 2 || bits >= 6 || (acc & ((1u << bits) - 1)) != 0 || (n > 0 && n % 4 != 0 && pad))
        return -1;
    out[o] = '\0';
    return (ptrdiff_t)o;
}

char *cdc_base64_decode(const char *text, size_t n, size_t *len)
{
    char *out = malloc(n / 4 * 3 + 4);
    ptrdiff_t o;

    if (out == NULL)
        return NULL;
    if ((o = cdc_base64_decode_into(text, n, out)) < 0) {
        free(out);
        return NULL;
    }
    if (len != NULL)
        *len = (size_t)o;
    return out;
}
