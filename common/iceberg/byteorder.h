/*
 * Little-endian stores and loads of 32- and 64-bit integers, byte by byte (no alignment
 * needed): the byte order of Parquet's PLAIN values and lengths and of Iceberg's
 * single-value encoding (bounds, partition values). Shared by the Parquet writer,
 * bounds.c and partition.c.
 */
#ifndef CDC_ICEBERG_BYTEORDER_H
#define CDC_ICEBERG_BYTEORDER_H

#include <stdint.h>

static inline void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get_le64(const uint8_t *p)
{
    return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

#endif
