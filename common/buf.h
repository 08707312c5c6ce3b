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
 * of uint8_t or char; text built by appending is a cdc_buf_t (below).
 */
#ifndef CDC_COMMON_BUF_H
#define CDC_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

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

/*
 * Text buffer: a growable array of char kept NUL-terminated. Appends never fail loudly:
 * they set `oom`, checked once at the end. A zeroed cdc_buf_t is empty; data is NULL
 * until the first append.
 */
typedef struct cdc_buf {
    char *data;
    size_t len;
    size_t cap;
    bool oom;
} cdc_buf_t;

void cdc_buf_reset(cdc_buf_t *b);
void cdc_buf_free(cdc_buf_t *b);

/* Makes room for `extra` more bytes plus the terminating NUL; false (and `oom` set) when
 * memory runs out. The inline appends below only call it when the room is not there. */
bool cdc_buf_grow(cdc_buf_t *b, size_t extra);

/* Appends n bytes; the buffer stays NUL-terminated. */
static inline void cdc_buf_put(cdc_buf_t *b, const void *p, size_t n)
{
    if (b->cap - b->len <= n && !cdc_buf_grow(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static inline void cdc_buf_putc(cdc_buf_t *b, char c)
{
    if (b->cap - b->len <= 1 && !cdc_buf_grow(b, 1))
        return;
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void cdc_buf_puts(cdc_buf_t *b, const char *s);
/* Appends a JSON string literal (quotes and escapes) of n bytes. */
void cdc_buf_json_str(cdc_buf_t *b, const char *s, size_t n);
void cdc_buf_printf(cdc_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Gives the heap's free memory back to the system (every malloc arena): after a burst of
 * large, short-lived allocations (a compaction's rewrite threads), so that the resident
 * size falls back instead of staying at the burst's peak. */
void cdc_mem_release(void);

#endif
