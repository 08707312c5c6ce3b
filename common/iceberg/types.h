/*
 * Iceberg schema and data-file descriptors shared by the Parquet writer, the
 * manifest/metadata code, the worker (which stages files) and the coordinator
 * (which commits them). Top-level fields of primitive types, and list and struct
 * fields whose nested type travels as its Iceberg JSON text (docs/parquet.md, "Nested
 * columns").
 */
#ifndef CDC_ICEBERG_TYPES_H
#define CDC_ICEBERG_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cdc_ice_type {
    CDC_ICE_BOOLEAN = 0,
    CDC_ICE_INT,  /* int32 */
    CDC_ICE_LONG, /* int64 */
    CDC_ICE_FLOAT,
    CDC_ICE_DOUBLE,
    CDC_ICE_DECIMAL, /* decimal(precision, scale), unscaled two's complement */
    CDC_ICE_STRING,  /* UTF-8 */
    CDC_ICE_BINARY,
    CDC_ICE_DATE,        /* int32 days since 1970-01-01 */
    CDC_ICE_TIME,        /* int64 microseconds since midnight */
    CDC_ICE_TIMESTAMP,   /* int64 microseconds since epoch, no zone */
    CDC_ICE_TIMESTAMPTZ, /* int64 microseconds since epoch, UTC */
    CDC_ICE_UUID,        /* 16 bytes */
    /* Nested types (docs/parquet.md, "Nested columns"): the type with its nested field
     * ids is the field's `nested` text, Iceberg's JSON form of the type; a value is the
     * JSON text of the list or object in the nested value form. */
    CDC_ICE_LIST,
    CDC_ICE_STRUCT,
    CDC_ICE__TYPE_COUNT
} cdc_ice_type_t;

typedef struct cdc_ice_field {
    int32_t id; /* Iceberg field id, > 0, unique in the table's history */
    char *name;
    cdc_ice_type_t type;
    int32_t precision; /* DECIMAL only */
    int32_t scale;     /* DECIMAL only */
    bool required;
    char *doc; /* optional, may be NULL */
    /* LIST/STRUCT only: the Iceberg JSON of the type, ids of the nested fields included
     * ({"type":"list","element-id":7,"element":"int","element-required":false}) */
    char *nested;
} cdc_ice_field_t;

typedef struct cdc_ice_schema {
    int32_t schema_id;
    cdc_ice_field_t *fields;
    size_t nfields;
    int32_t *identifier_ids; /* identifier-field-ids (the primary key); may be empty */
    size_t nidentifier;
} cdc_ice_schema_t;

/* Statistics of one column in a written file, bounds in Iceberg single-value encoding. */
typedef struct cdc_ice_col_stats {
    int32_t field_id;
    int64_t column_size; /* compressed bytes of the column chunk(s) */
    int64_t value_count; /* including nulls */
    int64_t null_count;
    int64_t nan_count; /* float/double; -1 when not tracked */
    bool has_bounds;
    uint8_t lower[64]; /* strings/binary are truncated to 16 bytes (lower) / incremented (upper) */
    size_t lower_len;
    uint8_t upper[64];
    size_t upper_len;
} cdc_ice_col_stats_t;

typedef enum cdc_ice_content {
    CDC_ICE_CONTENT_DATA = 0,
    CDC_ICE_CONTENT_POSITION_DELETES = 1,
    CDC_ICE_CONTENT_EQUALITY_DELETES = 2,
} cdc_ice_content_t;

/*
 * One value of a file's partition tuple: the partition field's result in Iceberg's
 * single-value binary encoding (int/date little-endian 4 bytes, long/timestamp 8,
 * strings UTF-8, decimals big-endian two's complement, ...). bytes is owned.
 */
typedef struct cdc_ice_part_value {
    bool null;
    uint8_t *bytes;
    size_t len;
} cdc_ice_part_value_t;

/* A data or delete file ready to be added to a table. */
typedef struct cdc_ice_data_file {
    cdc_ice_content_t content;
    char *path; /* fully qualified location */
    int64_t record_count;
    int64_t file_size_in_bytes;
    int32_t schema_id;
    int32_t *equality_ids; /* EQUALITY_DELETES only */
    size_t nequality_ids;
    cdc_ice_col_stats_t *stats;
    size_t nstats;
    int64_t *split_offsets; /* row group offsets, may be NULL */
    size_t nsplit_offsets;
    /* Partition: the spec the file was written for (0 = the unpartitioned spec every
     * table of this project keeps; an equality delete file there applies to the whole
     * table) and one value per field of that spec, in spec order. */
    int32_t spec_id;
    cdc_ice_part_value_t *partition; /* npartition values, owned; NULL when 0 */
    size_t npartition;
    int32_t sort_order_id; /* order the rows are sorted by; 0 = unsorted */
} cdc_ice_data_file_t;

#endif
