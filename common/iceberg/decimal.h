/*
 * Decimals as the pipeline carries them: an unscaled __int128 (12.34 in
 * decimal(p,2) is 1234) parsed from its literal, and its byte forms: the
 * fixed-length big-endian two's complement of Parquet's FIXED_LEN_BYTE_ARRAY and
 * of manifests' Avro fixed, and the minimal one of Iceberg's single-value encoding
 * (bounds.h, partition values).
 */
#ifndef CDC_ICEBERG_DECIMAL_H
#define CDC_ICEBERG_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/*
 * Parses a decimal literal ("-12.3", "7", "1e3" is NOT accepted) into its
 * unscaled value at `scale`: "12.3" at scale 2 -> 1230. Fails with
 * CDC_ERR_INVALID when the text is not a decimal, has more fractional digits
 * than `scale` (would lose precision), or exceeds `precision` digits.
 */
cdc_err_t cdc_ice_decimal_parse(const char *text, size_t len, int32_t precision, int32_t scale,
                                __int128 *out);

/*
 * Smallest byte length whose signed range holds every number of `precision` digits:
 * the size of a decimal's FIXED_LEN_BYTE_ARRAY in Parquet and of its Avro fixed in
 * manifests (Iceberg's "minimum bytes required" for the precision).
 */
int cdc_ice_decimal_fixed_len(int32_t precision);
/* v as n bytes of big-endian two's complement (sign-extended or truncated to n). */
void cdc_ice_decimal_be_fixed(__int128 v, uint8_t *out, int n);

/* 10^precision: an unscaled value of decimal(precision, s) lies strictly between -limit
 * and limit. */
__int128 cdc_ice_decimal_limit(int32_t precision);

/* The text of unscaled value v at `scale` ("-12.30"), NUL-terminated in out (48 bytes are
 * always enough). */
void cdc_ice_decimal_format(__int128 v, int32_t scale, char *out, size_t cap);

/* Minimal big-endian two's complement of v into out (16 bytes of room); returns the
 * length (1..16). */
size_t cdc_ice_decimal_be_min(__int128 v, uint8_t *out);

/* Big-endian two's complement of 1..16 bytes -> value. */
__int128 cdc_ice_decimal_from_be(const uint8_t *p, size_t n);

#endif
