/*
 * Binary search over an array kept sorted by a string key (strcmp order): the table set's
 * names, the progress watch's topics. Each element holds its key as a `char *` at
 * key_offset; elements are stride bytes apart (sizeof the element).
 */
#ifndef CDC_COMMON_SORTED_H
#define CDC_COMMON_SORTED_H

#include <stddef.h>
#include <string.h>

/* The index of key among the n elements at base, or -(insertion point) - 1 when absent. */
static inline int cdc_sorted_find(const void *base, int n, size_t stride, size_t key_offset,
                                  const char *key)
{
    int lo = 0, hi = n;

    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const char *k = *(char *const *)((const char *)base + (size_t)mid * stride + key_offset);
        int c = strcmp(k, key);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

#endif
