/*
 * Hash of a byte string for in-memory hash tables (the dedup overlay, the stage's
 * entity table, string sets). Not persisted anywhere: the function may change between
 * versions. Eight bytes per multiply, then a 64-bit finalizer that spreads every input
 * bit over the low bits the tables mask with. Below it, cdc_strmap_t: a table from
 * names to pointers for the lookups by table or topic name whose count grows with the
 * job (thousands of tables).
 */
#ifndef CDC_COMMON_HASH_H
#define CDC_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/err.h"

static inline uint64_t cdc_hash_fmix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t cdc_hash_bytes(const void *data, size_t n, uint64_t seed)
{
    const uint8_t *p = data;
    const uint64_t k = 0x9e3779b97f4a7c15ULL; /* 2^64 / golden ratio, odd */
    uint64_t h = seed ^ ((uint64_t)n * k), w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    if (n > 0) {
        w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    return cdc_hash_fmix(h);
}

/*
 * A hash table from NUL-terminated keys to pointers (common/hash.c). The keys are
 * borrowed: each must stay valid and unchanged while the map holds it, so a caller keys
 * each entry by a string the entry itself owns, and allocates entries one by one (they
 * never move when the map grows). Open addressing, at most half full; entries are not
 * removed. A zeroed cdc_strmap_t is an empty map. Not thread-safe: callers hold their lock.
 */
typedef struct cdc_strmap_slot {
    const char *key; /* NULL = free */
    void *value;
} cdc_strmap_slot_t;

typedef struct cdc_strmap {
    cdc_strmap_slot_t *slots;
    size_t cap; /* a power of two, or 0 */
    size_t n;
} cdc_strmap_t;

/* The value of key, NULL when the map does not hold it. */
void *cdc_strmap_get(const cdc_strmap_t *m, const char *key);

/* Maps key to value (replacing the value of a key held already): CDC_OK, or
 * CDC_ERR_NOMEM with the map unchanged. key is borrowed (see above). */
cdc_err_t cdc_strmap_put(cdc_strmap_t *m, const char *key, void *value);

/* Frees the slots (not the keys or values); the map is empty afterwards. */
void cdc_strmap_free(cdc_strmap_t *m);

#endif
