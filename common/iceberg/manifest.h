/*
 * Iceberg v2 manifests and manifest lists as Avro object-container files.
 * Writing uses our encoder (avro.h) with the spec's Avro schemas, field ids
 * included; reading uses avro-c and looks fields up by name, so it also reads
 * manifests written by other Iceberg implementations. Only unpartitioned specs
 * (spec id 0, empty partition tuple) are written.
 */
#ifndef CDC_ICEBERG_MANIFEST_H
#define CDC_ICEBERG_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/avro.h"
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
} cdc_ice_manifest_file_t;

/*
 * Encodes a manifest. schema_json is the table schema as Iceberg JSON (stored in the
 * "schema" metadata key). On success *out (caller frees) holds the whole file and
 * *len its exact size, which is the manifest_length to put in the manifest list.
 */
cdc_err_t cdc_ice_manifest_write(const cdc_ice_manifest_entry_t *entries, size_t n,
                                 const char *schema_json, int32_t schema_id,
                                 cdc_ice_manifest_content_t content, cdc_avro_codec_t codec,
                                 uint8_t **out, size_t *len, cdc_error_t *e);

/*
 * Decodes a manifest. When mf is not NULL, null snapshot ids and sequence numbers of
 * ADDED entries are inherited from it (spec: sequence-number inheritance); otherwise
 * they stay -1. On success the caller owns *entries (cdc_ice_manifest_entries_free).
 */
cdc_err_t cdc_ice_manifest_read(const uint8_t *buf, size_t len, const cdc_ice_manifest_file_t *mf,
                                cdc_ice_manifest_entry_t **entries, size_t *n, cdc_error_t *e);
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
