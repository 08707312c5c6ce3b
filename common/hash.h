/*
 * Hash of a byte string for in-memory hash tables (the dedup overlay, the stage's
 * entity table, string sets). Not persisted anywhere: the function may change between
 * versions. Eight bytes per multiply, then a 64-bit finalizer that spreads every input
 * bit over the low bits the tables mask with.
 */
#ifndef CDC_COMMON_HASH_H
#define CDC_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

#endif
