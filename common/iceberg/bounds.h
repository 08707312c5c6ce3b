/*
 * Iceberg's single-value binary encoding (Iceberg table spec, appendix D,
 * "Binary single-value serialization"): what a data file's lower and upper bounds
 * hold in manifests, what partition values are, and what the Parquet writer's
 * statistics reuse; with the truncation of string and binary bounds to a width.
 */
#ifndef CDC_ICEBERG_BOUNDS_H
#define CDC_ICEBERG_BOUNDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/iceberg/types.h"
#include "common/iceberg/value.h"

/*
 * Iceberg single-value binary encoding of one non-null value of `field`'s type
 * (little-endian int/long/float/double, int32 days, int64 micros, minimal
 * big-endian two's complement for decimals, raw bytes for string/binary/uuid).
 * Writes at most `cap` bytes to out, sets *out_len and returns true, or returns
 * false when it does not fit. Exposed for delete-file and manifest code and tests.
 */
bool cdc_ice_bound_encode(const cdc_ice_field_t *field, const cdc_ice_value_t *v, uint8_t *out,
                          size_t cap, size_t *out_len);

/*
 * Iceberg bound truncation for strings (UTF-8, by code points) and binary (by
 * bytes) to `width` units: lower bound = prefix; upper bound = prefix with the
 * last unit incremented (carrying leftwards). Sets *out_len (at most cap) and
 * returns true; returns false when the result does not fit or an upper bound
 * cannot be incremented (all units at their maximum: store no upper bound).
 * Values not longer than width are copied as is.
 */
bool cdc_ice_truncate_lower(bool is_string, const uint8_t *in, size_t len, size_t width,
                            uint8_t *out, size_t cap, size_t *out_len);
bool cdc_ice_truncate_upper(bool is_string, const uint8_t *in, size_t len, size_t width,
                            uint8_t *out, size_t cap, size_t *out_len);

#endif
