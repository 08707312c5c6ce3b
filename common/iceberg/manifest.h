/*
 * Iceberg v2 manifests and manifest lists as Avro object-container files.
 * Writing uses our encoder (avro.h) with the spec's Avro schemas, field ids
 * included; reading uses avro-c and looks fields up by name, so it also reads
 * manifests written by other Iceberg implementations. A manifest holds the files of
 * one partition spec: its `partition` record (field 102) has one optional field per
 * partition field, typed by the field's result type (partition.h).
 */
#ifndef CDC_ICEBERG_MANIFEST_H
#define CDC_ICEBERG_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/avro.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/types.h"

typedef enum cdc_ice_entry_status {
    CDC_ICE_ENTRY_EXISTING = 0,
    CDC_ICE_ENTRY_ADDED = 1,
    CDC_ICE_ENTRY_DELETED = 2,
} cdc_ice_entry_status_t;

/* One manifest entry. -1 in snapshot_id / sequence numbers means null (inherited). */
typedef struct cdc_ice_manifest_entry {
    cdc_ice_entry_status_t status;
    int64_t snapshot_id;
    int64_t sequence_number; /* data sequence number */
    int64_t file_sequence_number;
    cdc_ice_data_file_t file; /* owned by the entry */
} cdc_ice_manifest_entry_t;

/* Manifest content, as in the manifest list (0 data, 1 deletes). */
typedef enum cdc_ice_manifest_content {
    CDC_ICE_MANIFEST_DATA = 0,
    CDC_ICE_MANIFEST_DELETES = 1,
} cdc_ice_manifest_content_t;

/* Summary of one partition field over a manifest's files (manifest list field 507). */
typedef struct cdc_ice_field_summary {
    bool contains_null;
    bool contains_nan;
    cdc_ice_part_value_t lower; /* null = no bound (no non-null, non-NaN value) */
    cdc_ice_part_value_t upper;
} cdc_ice_field_summary_t;

/* One entry of a manifest list. */
typedef struct cdc_ice_manifest_file {
    char *path; /* owned */
    int64_t length;
    int32_t spec_id;
    cdc_ice_manifest_content_t content;
    int64_t sequence_number;
    int64_t min_sequence_number;
    int64_t added_snapshot_id;
    int32_t added_files;
    int32_t existing_files;
    int32_t deleted_files;
    int64_t added_rows;
    int64_t existing_rows;
    int64_t deleted_rows;
    cdc_ice_field_summary_t *partitions; /* one per partition field of the spec; owned */
    size_t npartitions;
} cdc_ice_manifest_file_t;

/*
 * Encodes a manifest of the files of one partition spec. schema_json is the table
 * schema as Iceberg JSON (stored in the "schema" metadata key); spec (NULL = the
 * unpartitioned spec 0) goes into "partition-spec" and "partition-spec-id", and
 * part_fields holds the result field of each of its fields
 * (cdc_ice_metadata_spec_result_fields()). Every entry must carry spec->nfields
 * well-formed partition values (CDC_ERR_INVALID otherwise). On success *out (caller
 * frees) holds the whole file and *len its exact size, which is the manifest_length to
 * put in the manifest list.
 */
cdc_err_t cdc_ice_manifest_write(const cdc_ice_manifest_entry_t *entries, size_t n,
                                 const char *schema_json, int32_t schema_id,
                                 const cdc_ice_partition_spec_t *spec,
                                 const cdc_ice_field_t *part_fields,
                                 cdc_ice_manifest_content_t content, cdc_avro_codec_t codec,
                                 uint8_t **out, size_t *len, cdc_error_t *e);

/*
 * Decodes a manifest. When mf is not NULL, null snapshot ids and sequence numbers of
 * ADDED entries are inherited from it (spec: sequence-number inheritance); otherwise
 * they stay -1. Each file's spec_id is mf's (else the "partition-spec-id" header key)
 * and its partition tuple is decoded into single-value encodings: part_fields (npart
 * result fields of that spec, may be NULL) tell decimals and the width of ints apart;
 * without them values are taken as the Avro types say (fixed and bytes as is). On
 * success the caller owns *entries (cdc_ice_manifest_entries_free).
 */
cdc_err_t cdc_ice_manifest_read(const uint8_t *buf, size_t len, const cdc_ice_manifest_file_t *mf,
                                const cdc_ice_field_t *part_fields, size_t npart,
                                cdc_ice_manifest_entry_t **entries, size_t *n, cdc_error_t *e);

/*
 * Sets mf->partitions to the summaries of the npart partition fields (result types
 * part_fields) over the entries, as manifest lists carry them for pruning.
 */
cdc_err_t cdc_ice_manifest_summarize(const cdc_ice_manifest_entry_t *entries, size_t n,
                                     const cdc_ice_field_t *part_fields, size_t npart,
                                     cdc_ice_manifest_file_t *mf);

/* Deep copy of a manifest-list entry (contents of *dst overwritten; zeroed on failure). */
cdc_err_t cdc_ice_manifest_file_copy(cdc_ice_manifest_file_t *dst,
                                     const cdc_ice_manifest_file_t *src);
/* Frees what one manifest-list entry owns (path, summaries) and zeroes it. */
void cdc_ice_manifest_file_clear(cdc_ice_manifest_file_t *mf);
void cdc_ice_manifest_entries_free(cdc_ice_manifest_entry_t *entries, size_t n);

/*
 * Encodes a manifest list for a snapshot (parent_id -1 = none). Manifest
 * sequence numbers are written as given (the committer assigns them).
 */
cdc_err_t cdc_ice_manifest_list_write(const cdc_ice_manifest_file_t *files, size_t n,
                                      int64_t snapshot_id, int64_t parent_id,
                                      int64_t sequence_number, cdc_avro_codec_t codec,
                                      uint8_t **out, size_t *len, cdc_error_t *e);
/* Decodes a manifest list; the caller owns *files (cdc_ice_manifest_files_free). */
cdc_err_t cdc_ice_manifest_list_read(const uint8_t *buf, size_t len,
                                     cdc_ice_manifest_file_t **files, size_t *n, cdc_error_t *e);
void cdc_ice_manifest_files_free(cdc_ice_manifest_file_t *files, size_t n);

/*
 * Reads the "key"=value pairs of an Avro container header into a newly allocated
 * string (value of key), for tests and tools. Returns CDC_ERR_NOT_FOUND if absent.
 */
cdc_err_t cdc_avro_header_get(const uint8_t *buf, size_t len, const char *key, char **value,
                              cdc_error_t *e);

#endif
