/*
 * Growable arrays (see buf.h): capacity doubling and exact resizing, overflow-checked.
 * The macros of buf.h hand the array over in a void pointer and assign it back, so one
 * function serves arrays of every element type.
 */
#include "common/buf.h"

#include <stdint.h>
#include <stdlib.h>

/* Reallocates the array *arr to n (> 0) elements of size bytes. */
static cdc_err_t array_realloc(void **arr, size_t n, size_t size)
{
    void *p;
    if (n > SIZE_MAX / size)
        return CDC_ERR_NOMEM;
    p = realloc(*arr, n * size);
    if (p == NULL)
        return CDC_ERR_NOMEM;
    *arr = p;
    return CDC_OK;
}

cdc_err_t cdc_array_reserve_(void **arr, size_t *cap, size_t need, size_t size, size_t min)
{
    size_t n = *cap;
    cdc_err_t rc;
    if (need <= n)
        return CDC_OK;
    if (n == 0)
        n = min ? min : 1;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    if ((rc = array_realloc(arr, n, size)) != CDC_OK)
        return rc;
    *cap = n;
    return CDC_OK;
}

cdc_err_t cdc_array_resize_(void **arr, size_t n, size_t size)
{
    return array_realloc(arr, n ? n : 1, size);
}
