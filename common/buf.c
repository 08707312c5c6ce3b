/*
 * Growable arrays (see buf.h): capacity doubling and exact resizing, overflow-checked;
 * the text buffer cdc_buf_t on top of them.
 * The macros of buf.h pass the array as a void pointer and assign the result back, so
 * one function serves arrays of every element type.
 */
#include "common/buf.h"

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
