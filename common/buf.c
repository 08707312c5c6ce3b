/*
 * Growable arrays (see buf.h): capacity doubling and exact resizing, overflow-checked;
 * the text buffer cdc_buf_t on top of them.
 * The macros of buf.h pass the array as a void pointer and assign the result back, so
 * one function serves arrays of every element type.
 */
#include "common/buf.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* arr reallocated to n (> 0) elements of size bytes, or NULL. */
static void *array_realloc(void *arr, size_t n, size_t size)
{
    return n > SIZE_MAX / size ? NULL : realloc(arr, n * size);
}

void *cdc_array_grow_(void *arr, size_t *cap, size_t need, size_t size, size_t min)
{
    size_t n = *cap;
    void *p;
    if (n == 0)
        n = min ? min : 1;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    if ((p = array_realloc(arr, n, size)) != NULL)
        *cap = n;
    return p;
}

void *cdc_array_resize_(void *arr, size_t n, size_t size)
{
    return array_realloc(arr, n ? n : 1, size);
}

/* ---- text buffer ------------------------------------------------------------------- */

bool cdc_buf_grow(cdc_buf_t *b, size_t extra)
{
    if (b->oom)
        return false;
    if (cdc_array_reserve(b->data, b->cap, b->len + extra + 1, 256) != CDC_OK) {
        b->oom = true;
        return false;
    }
    return true;
}

void cdc_buf_reset(cdc_buf_t *b)
{
    b->len = 0;
    b->oom = false;
    if (b->data)
        b->data[0] = '\0';
}

void cdc_buf_free(cdc_buf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

void cdc_buf_puts(cdc_buf_t *b, const char *s)
{
    cdc_buf_put(b, s, strlen(s));
}

void cdc_buf_printf(cdc_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!cdc_buf_grow(b, 64))
        return;
    va_start(ap, fmt);
    n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (!cdc_buf_grow(b, (size_t)n))
            return;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* Bytes a JSON string cannot hold as they are: control characters, '"' and '\\'. */
static const unsigned char json_escape[256] = {1, 1, 1, 1, 1, 1, 1, 1, 1,         1,         1, 1,
                                               1, 1, 1, 1, 1, 1, 1, 1, 1,         1,         1, 1,
                                               1, 1, 1, 1, 1, 1, 1, 1, ['"'] = 1, ['\\'] = 1};

void cdc_buf_json_str(cdc_buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i, start = 0;

    if (!cdc_buf_grow(b, n + 2))
        return;
    /* the common case: nothing to escape, one copy */
    for (i = 0; i < n; i++)
        if (json_escape[(unsigned char)s[i]])
            break;
    if (i == n) {
        b->data[b->len] = '"';
        memcpy(b->data + b->len + 1, s, n);
        b->data[b->len + 1 + n] = '"';
        b->len += n + 2;
        b->data[b->len] = '\0';
        return;
    }
    b->data[b->len++] = '"';
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        if (!json_escape[c])
            continue;
        cdc_buf_put(b, s + start, i - start);
        start = i + 1;
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        default:
            u[0] = '\\';
            u[1] = 'u';
            u[2] = '0';
            u[3] = '0';
            u[4] = hex[c >> 4];
            u[5] = hex[c & 15];
            u[6] = '\0';
            esc = u;
        }
        cdc_buf_puts(b, esc);
    }
    cdc_buf_put(b, s + start, n - start);
    cdc_buf_putc(b, '"');
}

void cdc_mem_release(void)
{
    malloc_trim(0);
}
