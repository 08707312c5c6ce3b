/*
 * One typed cell of a row (cdc_ice_value_t): what the Parquet writer appends
 * (parquet.h) and what Iceberg's single-value encoding (bounds.h) serializes.
 */
#ifndef CDC_ICEBERG_VALUE_H
#define CDC_ICEBERG_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One cell of a row. Which member is read depends on the column's type:
 *   BOOLEAN b; INT, DATE i32; LONG, TIME, TIMESTAMP, TIMESTAMPTZ i64; FLOAT f32;
 *   DOUBLE f64; STRING, BINARY bytes (UTF-8 for STRING, not NUL-terminated);
 *   DECIMAL dec (unscaled value, i.e. 12.34 in decimal(p,2) is 1234);
 *   UUID uuid (16 bytes, RFC 4122 byte order).
 * is_null must be false for required columns. Pointers are only borrowed for the
 * duration of cdc_pq_writer_append() (the writer copies the bytes).
 */
typedef struct cdc_ice_value {
    bool is_null;
    union {
        bool b;
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
        __int128 dec;
        uint8_t uuid[16];
        struct {
            const uint8_t *ptr;
            size_t len;
        } bytes;
    } v;
} cdc_ice_value_t;

/*
 * PostgreSQL's 'infinity' and '-infinity' of date, timestamp and timestamptz, as values
 * of the Iceberg types: the largest value and its negation, the representation DuckDB
 * uses for its own infinities, so that it shows them as `infinity` / `-infinity`, and
 * every other value sorts between them (docs/worker.md, "Values no Iceberg type holds").
 */
#define CDC_ICE_DATE_POS_INF INT32_MAX
#define CDC_ICE_DATE_NEG_INF (-INT32_MAX)
#define CDC_ICE_TS_POS_INF INT64_MAX
#define CDC_ICE_TS_NEG_INF (-INT64_MAX)

#endif
