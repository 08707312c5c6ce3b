/*
 * Growable arrays: the one place where memory grows by reallocation. An array is a
 * pointer to its first element, a count kept by the caller, and (for arrays that double)
 * a capacity:
 *
 *     if (cdc_array_reserve(t->entries, t->cap, t->nentries + 1, 64) != CDC_OK)
 *         return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
 *     t->entries[t->nentries++] = entry;
 *
 * cdc_array_reserve() doubles the capacity (from `min` elements when it is 0) until it
 * holds `need` elements; cdc_array_resize() makes an array without a capacity (protobuf's
 * repeated fields, arrays that rarely grow) exactly n elements long. Both check the size
 * for overflow, and on failure (CDC_ERR_NOMEM) leave the array and its capacity as they
 * were: the caller's elements stay valid and are freed as usual. Byte buffers are arrays
 * of uint8_t or char.
 */
#ifndef CDC_COMMON_BUF_H
#define CDC_COMMON_BUF_H

#include <stddef.h>

#include "common/err.h"

/* The functions behind the macros (common/buf.c): the array reallocated (arr is then no
 * longer valid), or NULL with arr untouched; `size` is the size of one element. */
void *cdc_array_grow_(void *arr, size_t *cap, size_t need, size_t size, size_t min);
void *cdc_array_resize_(void *arr, size_t n, size_t size);

/* Room for `need` elements in array `arr` of capacity `cap` (a size_t lvalue, updated):
 * CDC_OK, or CDC_ERR_NOMEM with arr and cap unchanged. The check for room is inline. */
#define cdc_array_reserve(arr, cap, need, min)                                                     \
    __extension__({                                                                                \
        size_t cdc_need_ = (need);                                                                 \
        cdc_err_t cdc_rc_ = CDC_OK;                                                                \
        if (cdc_need_ > (cap)) {                                                                   \
            void *cdc_p_ = cdc_array_grow_((arr), &(cap), cdc_need_, sizeof(*(arr)), (min));       \
            if (cdc_p_ != NULL)                                                                    \
                (arr) = cdc_p_;                                                                    \
            else                                                                                   \
                cdc_rc_ = CDC_ERR_NOMEM;                                                           \
        }                                                                                          \
        cdc_rc_;                                                                                   \
    })

/* Reallocates array `arr` to exactly n elements (at least one is allocated): CDC_OK, or
 * CDC_ERR_NOMEM with arr unchanged. */
#define cdc_array_resize(arr, n)                                                                   \
    __extension__({                                                                                \
        void *cdc_p_ = cdc_array_resize_((arr), (n), sizeof(*(arr)));                              \
        if (cdc_p_ != NULL)                                                                        \
            (arr) = cdc_p_;                                                                        \
        cdc_p_ != NULL ? CDC_OK : CDC_ERR_NOMEM;                                                   \
    })

#endif
