/*
 * Iceberg table metadata (format v2) as C structs, parsed from and written to the
 * vN.metadata.json document with jansson: schemas, partition specs and sort orders
 * (partition.h), properties, snapshots and the logs. Tables this project creates keep
 * spec 0 unpartitioned and order 0 unsorted. v1 documents and the ones Iceberg Java
 * writes parse too.
 */
#ifndef CDC_ICEBERG_METADATA_H
#define CDC_ICEBERG_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/types.h"

/* String map in insertion order (table properties, snapshot summaries). */
typedef struct cdc_ice_props {
    char **keys;
    char **values;
    size_t n;
} cdc_ice_props_t;

/* Value of key or NULL; the pointer stays owned by props. */
const char *cdc_ice_props_get(const cdc_ice_props_t *props, const char *key);
/* Inserts or replaces key (both strings are copied). */
cdc_err_t cdc_ice_props_set(cdc_ice_props_t *props, const char *key, const char *value);
cdc_err_t cdc_ice_props_copy(cdc_ice_props_t *dst, const cdc_ice_props_t *src);
void cdc_ice_props_free(cdc_ice_props_t *props);

typedef struct cdc_ice_snapshot {
    int64_t snapshot_id;
    int64_t parent_id; /* -1 = none */
    int64_t sequence_number;
    int64_t timestamp_ms;
    char *manifest_list;
    int32_t schema_id;       /* -1 = absent */
    cdc_ice_props_t summary; /* includes "operation" */
    /* Compact JSON of this snapshot, cached by cdc_ice_metadata_write() (NULL = not yet;
     * owned, copied and freed with the snapshot). A snapshot never changes once written,
     * and re-encoding the whole history on every commit dominated a commit's CPU. Code
     * that edits a snapshot's fields must free and clear it. */
    char *json;
} cdc_ice_snapshot_t;

typedef struct cdc_ice_snapshot_log {
    int64_t timestamp_ms;
    int64_t snapshot_id;
} cdc_ice_snapshot_log_t;

typedef struct cdc_ice_metadata_log {
    int64_t timestamp_ms;
    char *file;
} cdc_ice_metadata_log_t;

typedef struct cdc_ice_metadata {
    int format_version; /* 2 */
    char table_uuid[40];
    char *location;
    int64_t last_sequence_number;
    int64_t last_updated_ms;
    int32_t last_column_id;
    cdc_ice_schema_t *schemas;
    size_t nschemas;
    int32_t current_schema_id;
    cdc_ice_partition_spec_t *specs; /* partition-specs; at least spec 0 */
    size_t nspecs;
    int32_t default_spec_id;
    int32_t last_partition_id;    /* highest partition field id ever assigned; 999 = none */
    cdc_ice_sort_order_t *orders; /* sort-orders; at least order 0 (unsorted) */
    size_t norders;
    int32_t default_sort_order_id;
    cdc_ice_props_t properties;
    int64_t current_snapshot_id; /* -1 = none */
    cdc_ice_snapshot_t *snapshots;
    size_t nsnapshots;
    cdc_ice_snapshot_log_t *snapshot_log;
    size_t nsnapshot_log;
    cdc_ice_metadata_log_t *metadata_log;
    size_t nmetadata_log;
} cdc_ice_metadata_t;

/*
 * Parses a metadata JSON document into *out (contents overwritten). On success
 * *out owns everything (cdc_ice_metadata_free); on failure *out is zeroed.
 * Transforms this project does not know are rejected (CDC_ERR_UNSUPPORTED).
 */
cdc_err_t cdc_ice_metadata_parse(const char *json, size_t len, cdc_ice_metadata_t *out,
                                 cdc_error_t *e);

/* Serializes md as a metadata JSON document; *json (caller frees) is NUL-terminated. */
cdc_err_t cdc_ice_metadata_write(const cdc_ice_metadata_t *md, char **json, cdc_error_t *e);

/* Deep copy (contents of *dst overwritten; zeroed on failure). */
cdc_err_t cdc_ice_metadata_copy(cdc_ice_metadata_t *dst, const cdc_ice_metadata_t *src);

void cdc_ice_metadata_free(cdc_ice_metadata_t *md);

/* Lookups; the returned pointers stay owned by md. NULL when absent. */
const cdc_ice_schema_t *cdc_ice_metadata_schema(const cdc_ice_metadata_t *md, int32_t schema_id);
const cdc_ice_schema_t *cdc_ice_metadata_current_schema(const cdc_ice_metadata_t *md);
const cdc_ice_snapshot_t *cdc_ice_metadata_snapshot(const cdc_ice_metadata_t *md,
                                                    int64_t snapshot_id);
const cdc_ice_snapshot_t *cdc_ice_metadata_current_snapshot(const cdc_ice_metadata_t *md);
const cdc_ice_partition_spec_t *cdc_ice_metadata_spec(const cdc_ice_metadata_t *md,
                                                      int32_t spec_id);
const cdc_ice_partition_spec_t *cdc_ice_metadata_default_spec(const cdc_ice_metadata_t *md);
const cdc_ice_sort_order_t *cdc_ice_metadata_sort_order(const cdc_ice_metadata_t *md,
                                                        int32_t order_id);
const cdc_ice_sort_order_t *cdc_ice_metadata_default_sort_order(const cdc_ice_metadata_t *md);

/* The field of this id in the newest schema that has it (the current one first), or NULL:
 * the type a field had last, also after it was dropped. */
const cdc_ice_field_t *cdc_ice_metadata_history_field(const cdc_ice_metadata_t *md, int32_t id);

/*
 * Result field of each partition field of spec (partition.h), its source field taken
 * from the table's schema history (cdc_ice_metadata_history_field). False when a source
 * field is unknown or the transform does not apply to it.
 */
bool cdc_ice_metadata_spec_result_fields(const cdc_ice_metadata_t *md,
                                         const cdc_ice_partition_spec_t *spec,
                                         cdc_ice_field_t *results /* spec->nfields */);

#endif
