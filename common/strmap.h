/*
 * String -> index map for in-memory lookups by name (topics, tables), sized for thousands
 * of keys: open addressing with linear probing over cdc_hash_bytes, doubled at 1/2 load.
 * The map stores the caller's key pointers, not copies: each key must stay valid and
 * unchanged while it is in the map (typically a name owned by the entry the value
 * indexes). No removal: the users only ever add names. Not thread-safe: the owner's lock
 * or thread guards it.
 */
#ifndef CDC_COMMON_STRMAP_H
#define CDC_COMMON_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

typedef struct cdc_strmap_slot {
    const char *key; /* NULL = empty */
    size_t value;
} cdc_strmap_slot_t;

typedef struct cdc_strmap {
    cdc_strmap_slot_t *slots;
    size_t cap; /* a power of two, or 0 before the first put */
    size_t n;
} cdc_strmap_t;

/* A zeroed cdc_strmap_t is an empty map. */
void cdc_strmap_free(cdc_strmap_t *m);

/* Whether key is in the map; its value to *value (may be NULL). */
bool cdc_strmap_get(const cdc_strmap_t *m, const char *key, size_t *value);

/* Maps key to value (replacing an earlier value of an equal key, whose pointer stays in
 * the map). CDC_ERR_NOMEM leaves the map as it was. */
cdc_err_t cdc_strmap_put(cdc_strmap_t *m, const char *key, size_t value);

#endif
