/*
 * Nested Iceberg types (list, struct) and their values (docs/parquet.md, "Nested
 * columns"). A nested field's type travels as Iceberg's JSON form of the type
 * (cdc_ice_field_t.nested); this module parses it into a tree of nodes with the
 * Parquet definition and repetition levels of each, and shreds one value, the JSON text
 * of the list or object in the nested value form, into entries of the leaf columns
 * (the record shredding of the Parquet format: a repetition and a definition level per
 * entry, a value where the leaf is defined). The writer (parquet_column.c) appends the
 * entries; the worker checks a value with the same code before it stages it.
 *
 * The nested value form: a list is a JSON array, a struct a JSON object keyed by field
 * name (a missing member is null); leaves are boolean true/false, int/long/date as JSON
 * integers (days for date), time/timestamp/timestamptz as integer microseconds, float
 * and double as numbers or "NaN"/"Infinity"/"-Infinity", decimals as numbers or strings
 * of their exact text (never more fraction digits than the scale), strings as strings,
 * uuid as the 8-4-4-4-12 hex string, binary as standard base64.
 */
#ifndef CDC_ICEBERG_NESTED_H
#define CDC_ICEBERG_NESTED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/types.h"
#include "common/iceberg/value.h"

typedef struct json_t json_t;

typedef struct cdc_ice_node {
    cdc_ice_field_t f;         /* id, name ("element" for a list's element), type, required */
    struct cdc_ice_node *kids; /* LIST: the element; STRUCT: the fields */
    size_t nkids;
    int def;     /* definition level of an entry where this node holds a value */
    int rep;     /* LIST: repetition level of its second and later elements */
    int leaf;    /* primitive: index among the root's leaves (Parquet columns) */
    int max_rep; /* primitive: the leaf column's maximum repetition level */
} cdc_ice_node_t;

/*
 * Parses Iceberg's JSON of a nested type (an object with "type" "list" or "struct")
 * and checks it: ids positive, element and fields present, primitives known, "map"
 * unsupported (CDC_ERR_UNSUPPORTED). CDC_ERR_INVALID with a message otherwise.
 */
cdc_err_t cdc_ice_nested_check_jansson(const json_t *type, cdc_error_t *e);

/*
 * The tree of a top-level field of type LIST or STRUCT (its `nested` text), levels
 * and leaf indices filled in. Free with cdc_ice_node_free().
 */
cdc_err_t cdc_ice_node_build(const cdc_ice_field_t *field, cdc_ice_node_t *root, cdc_error_t *e);
void cdc_ice_node_free(cdc_ice_node_t *n);

/* Number of primitive leaves under n (the Parquet columns of a top-level field). */
size_t cdc_ice_node_leaves(const cdc_ice_node_t *n);

/* The leaf node of index `leaf` under root, and its path of names from root (the
 * node names, `path` gets up to `cap` pointers into the tree; returns the depth). */
const cdc_ice_node_t *cdc_ice_node_leaf(const cdc_ice_node_t *root, int leaf,
                                        const cdc_ice_node_t **path, size_t cap, size_t *depth);

/* A leaf value as its nested value form (a new jansson reference; NULL when out of
 * memory): the inverse of the shredding's conversion. */
json_t *cdc_ice_nested_leaf_json(const cdc_ice_field_t *f, const cdc_ice_value_t *v);

/* One entry of a leaf column: v is NULL where the leaf holds no value (def < its
 * node's def). v's bytes are valid during the call only. false stops the shredding
 * (out of memory). */
typedef bool (*cdc_ice_entry_fn)(void *ctx, const cdc_ice_node_t *leaf, int rep, int def,
                                 const cdc_ice_value_t *v);

/*
 * Shreds one value of root's field: json/len the nested value form, or json NULL for a
 * null value. fn may be NULL (check only). Returns CDC_OK, CDC_ERR_INVALID with why set
 * (the value does not fit the type: wrong shape, a null in a required place, a leaf
 * that does not convert), or CDC_ERR_NOMEM when fn failed.
 */
cdc_err_t cdc_ice_nested_shred(const cdc_ice_node_t *root, const char *json, size_t len,
                               cdc_ice_entry_fn fn, void *ctx, char *why, size_t whylen);

#endif
