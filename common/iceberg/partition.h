/*
 * Iceberg partition specs, sort orders and their transforms (Iceberg table spec,
 * "Partitioning", "Partition Transforms", "Sorting", and appendix B's 32-bit
 * Murmur3 bucket hash). A table's layout is declared as text, per table:
 *
 *   partition spec:  "bucket[16](id), day(created_at)"
 *                    transforms: identity (a bare column name or identity(col)),
 *                    bucket[N](col), truncate[W](col), year(col), month(col),
 *                    day(col), hour(col)
 *   sort order:      "region, id desc nulls last, day(created_at)"
 *                    each term: [transform(]col[)] [asc|desc] [nulls first|nulls last]
 *                    (defaults: asc; nulls first for asc, nulls last for desc)
 *
 * Column names resolve against a table schema to field ids. Values go in and come out
 * in Iceberg's single-value binary encoding (types.h, cdc_ice_part_value_t), so the
 * worker (which computes partitions of rows) and the manifest code (which stores them)
 * share one representation.
 */
#ifndef CDC_ICEBERG_PARTITION_H
#define CDC_ICEBERG_PARTITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/types.h"

/* jansson's JSON value; the callers of the functions that take or return one include
 * <jansson.h>. */
typedef struct json_t json_t;

typedef enum cdc_ice_transform_kind {
    CDC_ICE_TRANSFORM_IDENTITY = 0,
    CDC_ICE_TRANSFORM_BUCKET,   /* param = N */
    CDC_ICE_TRANSFORM_TRUNCATE, /* param = W */
    CDC_ICE_TRANSFORM_YEAR,
    CDC_ICE_TRANSFORM_MONTH,
    CDC_ICE_TRANSFORM_DAY,
    CDC_ICE_TRANSFORM_HOUR,
    CDC_ICE_TRANSFORM_VOID,
} cdc_ice_transform_kind_t;

typedef struct cdc_ice_transform {
    cdc_ice_transform_kind_t kind;
    int32_t param;
} cdc_ice_transform_t;

/* "identity", "bucket[16]", "truncate[4]", "day", ...; CDC_ERR_INVALID otherwise. */
cdc_err_t cdc_ice_transform_parse(const char *text, cdc_ice_transform_t *out);
/* The spec's transform string into buf (24 bytes are enough); returns buf. */
const char *cdc_ice_transform_string(cdc_ice_transform_t t, char *buf, size_t cap);

/*
 * Result type of t applied to a source field (identity/truncate: the source type;
 * bucket, year, month, hour: int; day: date). False when t does not apply to that
 * source type (e.g. day of a string, truncate of a timestamp).
 */
bool cdc_ice_transform_result(cdc_ice_transform_t t, const cdc_ice_field_t *source,
                              cdc_ice_field_t *result);

/*
 * Applies t to one source value (single-value encoding of `source`'s type; null in =
 * null out). out receives the result's encoding, malloc'ed (out->bytes; caller frees).
 * CDC_ERR_INVALID for a malformed input, CDC_ERR_NOMEM.
 */
cdc_err_t cdc_ice_transform_apply(cdc_ice_transform_t t, const cdc_ice_field_t *source,
                                  const cdc_ice_part_value_t *in, cdc_ice_part_value_t *out);

/* Iceberg's 32-bit Murmur3 (x86, seed 0) of bytes: what bucket[N] hashes. */
int32_t cdc_ice_murmur3_32(const uint8_t *data, size_t len);

typedef struct cdc_ice_partition_field {
    int32_t source_id;
    int32_t field_id; /* >= 1000 */
    char *name;       /* identity: the column's name; else "<col>_bucket", "<col>_trunc",
                       * "<col>_year", "<col>_month", "<col>_day", "<col>_hour" */
    cdc_ice_transform_t transform;
} cdc_ice_partition_field_t;

typedef struct cdc_ice_partition_spec {
    int32_t spec_id;
    cdc_ice_partition_field_t *fields;
    size_t nfields; /* 0 = unpartitioned */
} cdc_ice_partition_spec_t;

typedef struct cdc_ice_sort_field {
    int32_t source_id;
    cdc_ice_transform_t transform;
    bool descending;
    bool nulls_first;
} cdc_ice_sort_field_t;

typedef struct cdc_ice_sort_order {
    int32_t order_id; /* 0 = unsorted (no fields) */
    cdc_ice_sort_field_t *fields;
    size_t nfields;
} cdc_ice_sort_order_t;

/*
 * Parses a declared partition spec against schema (column names -> field ids; each
 * transform must apply to its column's type). Partition field ids are first_field_id,
 * first_field_id + 1, ... (the table's last-partition-id + 1); spec_id is left 0. An
 * empty text is the unpartitioned spec. CDC_ERR_INVALID names the offending term.
 */
cdc_err_t cdc_ice_partition_spec_parse(const char *text, const cdc_ice_schema_t *schema,
                                       int32_t first_field_id, cdc_ice_partition_spec_t *out,
                                       cdc_error_t *e);
/* Same for a sort order (order_id left 0; an empty text is the unsorted order). */
cdc_err_t cdc_ice_sort_order_parse(const char *text, const cdc_ice_schema_t *schema,
                                   cdc_ice_sort_order_t *out, cdc_error_t *e);

/* Canonical declaration text of a spec / order against schema (caller frees). */
char *cdc_ice_partition_spec_text(const cdc_ice_partition_spec_t *spec,
                                  const cdc_ice_schema_t *schema);
char *cdc_ice_sort_order_text(const cdc_ice_sort_order_t *order, const cdc_ice_schema_t *schema);

/* Same partitioning: equal (source id, transform) lists, names and ids ignored. */
bool cdc_ice_partition_spec_same(const cdc_ice_partition_spec_t *a,
                                 const cdc_ice_partition_spec_t *b);
bool cdc_ice_sort_order_same(const cdc_ice_sort_order_t *a, const cdc_ice_sort_order_t *b);

/* JSON of the spec ({"spec-id":N,"fields":[{"name","transform","source-id","field-id"}]})
 * and of an order ({"order-id":N,"fields":[{"transform","source-id","direction",
 * "null-order"}]}), as in table metadata; new references, NULL on allocation failure. */
json_t *cdc_ice_partition_spec_to_jansson(const cdc_ice_partition_spec_t *spec);
json_t *cdc_ice_sort_order_to_jansson(const cdc_ice_sort_order_t *order);
cdc_err_t cdc_ice_partition_spec_from_jansson(const json_t *obj, cdc_ice_partition_spec_t *out,
                                              cdc_error_t *e);
cdc_err_t cdc_ice_sort_order_from_jansson(const json_t *obj, cdc_ice_sort_order_t *out,
                                          cdc_error_t *e);

cdc_err_t cdc_ice_partition_spec_copy(cdc_ice_partition_spec_t *dst,
                                      const cdc_ice_partition_spec_t *src);
cdc_err_t cdc_ice_sort_order_copy(cdc_ice_sort_order_t *dst, const cdc_ice_sort_order_t *src);
void cdc_ice_partition_spec_free(cdc_ice_partition_spec_t *spec);
void cdc_ice_sort_order_free(cdc_ice_sort_order_t *order);

/* Result field of each partition field (type of the partition tuple's values) for a
 * schema holding the source fields; false when a source field is missing. */
bool cdc_ice_partition_spec_result_fields(const cdc_ice_partition_spec_t *spec,
                                          const cdc_ice_schema_t *schema,
                                          cdc_ice_field_t *results /* nfields */);

/* Frees the bytes of n values and the array. */
void cdc_ice_part_values_free(cdc_ice_part_value_t *values, size_t n);

/* Deep copy of one value into *dst (contents overwritten); CDC_ERR_NOMEM. */
cdc_err_t cdc_ice_part_value_copy(cdc_ice_part_value_t *dst, const cdc_ice_part_value_t *src);

/* Deep copy of n values into a new array (*dst = NULL when n is 0); CDC_ERR_NOMEM. */
cdc_err_t cdc_ice_part_values_copy(cdc_ice_part_value_t **dst, const cdc_ice_part_value_t *src,
                                   size_t n);

/* Whether values of type t are integers (int, date, long, time, timestamp, timestamptz). */
bool cdc_ice_type_is_integer(cdc_ice_type_t t);
/* Integer held by a 4-byte (int, date) or 8-byte (long, time, timestamp) value. */
int64_t cdc_ice_part_value_int(const cdc_ice_part_value_t *v);
/* Unscaled value of a decimal value (big-endian two's complement of 1..16 bytes). */
__int128 cdc_ice_part_value_decimal(const cdc_ice_part_value_t *v);
/* *out = v encoded as `type` (int/date: 4 bytes, long/time/timestamp: 8), malloc'ed. */
cdc_err_t cdc_ice_part_value_set_int(const cdc_ice_field_t *type, int64_t v,
                                     cdc_ice_part_value_t *out);
/* *out = the minimal big-endian two's complement of an unscaled decimal, malloc'ed. */
cdc_err_t cdc_ice_part_value_set_decimal(__int128 unscaled, cdc_ice_part_value_t *out);

/* Whether v is null or a well-formed encoding of a value of `type` (length per type). */
bool cdc_ice_part_value_valid(const cdc_ice_field_t *type, const cdc_ice_part_value_t *v);

/*
 * Orders two non-null values of `type` as Iceberg does (signed numbers, decimals by
 * value, strings by UTF-8 bytes = code points, binary/uuid unsigned bytewise, false <
 * true); <0, 0, >0. NaN compares equal to itself and above every other number.
 */
int cdc_ice_part_value_compare(const cdc_ice_field_t *type, const cdc_ice_part_value_t *a,
                               const cdc_ice_part_value_t *b);

/* Whether a non-null float/double value is NaN (false for other types). */
bool cdc_ice_part_value_is_nan(const cdc_ice_field_t *type, const cdc_ice_part_value_t *v);

#endif
