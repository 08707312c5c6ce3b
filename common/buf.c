/*
 * Growable arrays (see buf.h): capacity doubling and exact resizing, overflow-checked.
 * The macros of buf.h pass the array as a void pointer and assign the result back, so
 * one function serves arrays of every element type.
 */
#include "common/buf.h"

#include <stdint.h>
#include <stdlib.h>

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
