/*
 * Iceberg schema helpers shared by the Parquet writer (the `iceberg.schema`
 * footer key), table metadata (the `schemas` list) and manifests (the `schema`
 * Avro metadata key): type names, the schema <-> JSON mapping of the Iceberg
 * spec ({"type":"struct","schema-id":N,"fields":[{"id","name","required",
 * "type"}],"identifier-field-ids":[...]}), deep copy and release, and release
 * of data-file descriptors. JSON goes through jansson.
 */
#ifndef CDC_ICEBERG_SCHEMA_H
#define CDC_ICEBERG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "common/iceberg/types.h"

/* jansson's JSON value; the callers of the functions that take or return one include
 * <jansson.h>. */
typedef struct json_t json_t;

/*
 * Iceberg type string of a field: "boolean", "int", "long", "float", "double",
 * "decimal(P,S)", "string", "binary", "date", "time", "timestamp",
 * "timestamptz", "uuid". Writes into buf (32 bytes are always enough) and returns buf.
 */
const char *cdc_ice_type_string(const cdc_ice_field_t *field, char *buf, size_t cap);

/* Parses an Iceberg primitive type string into field->type/precision/scale ("list" and
 * "struct" give the nested types without their element or fields). */
cdc_err_t cdc_ice_type_parse(const char *text, cdc_ice_field_t *field);

/* LIST or STRUCT. */
bool cdc_ice_type_is_nested(cdc_ice_type_t t);

/* Same type: primitive type (decimal precision and scale), or the same nested JSON. */
bool cdc_ice_type_equal(const cdc_ice_field_t *a, const cdc_ice_field_t *b);

/* New reference: the field's type as Iceberg JSON (a string, or the nested type's
 * object); buf (32 bytes) is scratch. NULL on allocation failure. */
json_t *cdc_ice_field_type_jansson(const cdc_ice_field_t *f, char *buf, size_t cap);

/* Sets f's type (and nested text) from Iceberg's JSON of a type: a primitive's string or
 * a list/struct object (checked, docs/parquet.md "Nested columns"). */
cdc_err_t cdc_ice_field_type_from_jansson(const json_t *type, cdc_ice_field_t *f, cdc_error_t *err);

/* New reference to the schema's JSON object; NULL on allocation failure. Caller decrefs. */
json_t *cdc_ice_schema_to_jansson(const cdc_ice_schema_t *schema);

/* Compact JSON text of the schema; malloc'ed, caller frees. NULL on allocation failure. */
char *cdc_ice_schema_to_json(const cdc_ice_schema_t *schema);

/*
 * Fills *out (caller-provided, contents overwritten) from a schema JSON object.
 * Fields of primitive types and of list and struct types (map: CDC_ERR_UNSUPPORTED). On success
 * *out owns its arrays (release with cdc_ice_schema_free()); on failure *out is zeroed.
 */
cdc_err_t cdc_ice_schema_from_jansson(const json_t *obj, cdc_ice_schema_t *out, cdc_error_t *err);

/* Same as cdc_ice_schema_from_jansson() from JSON text. */
cdc_err_t cdc_ice_schema_from_json(const char *text, cdc_ice_schema_t *out, cdc_error_t *err);

/* Deep copy into *dst (contents overwritten). On failure *dst is zeroed. */
cdc_err_t cdc_ice_schema_copy(cdc_ice_schema_t *dst, const cdc_ice_schema_t *src);

/* Frees the arrays and strings inside *schema (not schema itself) and zeroes it. */
void cdc_ice_schema_free(cdc_ice_schema_t *schema);

/*
 * True when a column of type `from` may be read as `to` under the same field id: the
 * types are equal (nested types: the same JSON), or `to` is one of the Iceberg spec's promotions
 * (int -> long, float -> double, decimal(P,S) -> decimal(P',S) with P' >= P). Anything else needs a
 * new field id (docs/worker.md, "Schema changes").
 */
bool cdc_ice_type_promotable(const cdc_ice_field_t *from, const cdc_ice_field_t *to);

/* The highest field id of a field: its own, or one of its nested fields'. */
int32_t cdc_ice_field_max_id(const cdc_ice_field_t *f);

/* Index of the field with this id, or -1. */
int cdc_ice_schema_find(const cdc_ice_schema_t *schema, int32_t field_id);

/* Index of the field with this name, or -1 (NULL-safe). */
int cdc_ice_schema_find_name(const cdc_ice_schema_t *schema, const char *name);

/*
 * Deep copy of a data-file descriptor into *dst (contents overwritten). On
 * failure *dst is zeroed.
 */
cdc_err_t cdc_ice_data_file_copy(cdc_ice_data_file_t *dst, const cdc_ice_data_file_t *src);

/* Frees path, equality_ids, stats, split_offsets and partition inside *df and zeroes it. */
void cdc_ice_data_file_clear(cdc_ice_data_file_t *df);

#endif
