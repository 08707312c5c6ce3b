/*
 * Internals shared by the two pieces of the Parquet reader (parquet_read.h):
 * parquet_read.c parses the footer (FileMetaData) into the structures below and
 * types the columns; parquet_read_column.c decodes one column chunk's pages
 * (decompression, definition levels, PLAIN and dictionary values) into cells.
 * Not for use outside parquet_read*.c.
 *
 * Everything the footer says about where data lies is checked when the file is
 * opened: a chunk's bytes lie between the leading magic and the footer, and the
 * row counts of the file, its row groups and their chunks agree. The number of
 * cells a column allocates is the footer's row count, so no page can make the
 * reader allocate more than the file claims to hold.
 */
#ifndef CDC_ICEBERG_PARQUET_READ_INT_H
#define CDC_ICEBERG_PARQUET_READ_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "common/iceberg/parquet_int.h"
#include "common/iceberg/parquet_read.h"

/* One leaf column of the file's Parquet schema (a SchemaElement). */
typedef struct rcol {
    int32_t ptype;
    int32_t type_length; /* FIXED_LEN_BYTE_ARRAY length, else 0 */
    int32_t repetition;  /* REP_REQUIRED or REP_OPTIONAL */
    int32_t converted;   /* ConvertedType, -1 when absent */
    int32_t scale, precision;
    int32_t field_id;
    bool has_field_id;
    int logical; /* LogicalType union member id, 0 when absent */
    int unit;    /* TIME/TIMESTAMP logical types: 1 millis, 2 micros, 3 nanos */
    bool utc;    /* TIME/TIMESTAMP isAdjustedToUTC */
    const uint8_t *name;
    size_t name_len;
    /* its place in the schema: the top-level field it belongs to, its levels (a flat
     * column: max_def 1 when optional, max_rep 0), and its Iceberg field (the top-level
     * field, or a nested leaf's node; set with the schema) */
    size_t top;
    int max_def, max_rep;
    const cdc_ice_field_t *field;
} rcol_t;

/* Where a column chunk's pages lie (checked against the file). */
typedef struct rchunk {
    size_t start; /* its first page: the dictionary page, or the first data page */
    size_t size;  /* total_compressed_size: every page header and body */
    int32_t codec;
    int64_t values; /* num_values: level entries (the rows of a flat column) */
} rchunk_t;

/* Buffers owned by a decoded column: decompressed pages its byte-array cells point into. */
typedef struct rblocks {
    uint8_t **p;
    size_t n, cap;
} rblocks_t;

struct cdc_pq_reader {
    const uint8_t *data; /* the file, borrowed */
    size_t len;
    cdc_ice_schema_t schema;
    rcol_t *cols; /* the leaf columns: one per primitive field, one per leaf of a nested one */
    size_t ncols;
    size_t ntop;           /* top-level fields of the Parquet schema */
    size_t *fcol;          /* per schema field: its first leaf column */
    cdc_ice_node_t *trees; /* per schema field: its tree when nested (nested.h) */
    int64_t rows;
    int64_t *rg_rows; /* rows per row group */
    size_t nrg;
    rchunk_t *chunks; /* nrg * ncols, row group major */

    cdc_ice_value_t **cells; /* per leaf column: the cells of its field, or NULL */
    rblocks_t *blocks;       /* per leaf column */

    /* decoding scratch, reused from page to page */
    buf_t page;        /* a decompressed page whose bytes are not kept */
    uint32_t *levels;  /* definition levels of a page */
    size_t levels_cap; /* in elements */
    uint32_t *idx;     /* dictionary indices (or RLE booleans) of a page */
    size_t idx_cap;
    cdc_ice_value_t *dict;  /* the current chunk's dictionary */
    size_t ndict, dict_cap; /* entries, capacity */
    ZSTD_DCtx *zctx;        /* created on the first zstd page */
};

/*
 * Decodes the chunk of column col in row group rg into out (rg_rows[rg] cells). Byte-array
 * pages the cells point into are added to r->blocks[col].
 */
cdc_err_t cdc_pq_read_chunk(cdc_pq_reader_t *r, size_t col, size_t rg, cdc_ice_value_t *out,
                            cdc_error_t *e);

/* The level entries of a nested leaf's chunk: repetition and definition levels per entry,
 * the values of the entries that hold one, densely. */
typedef struct rlevels {
    uint8_t *rep, *def;
    cdc_ice_value_t *vals;
    size_t n, nv;
} rlevels_t;

/* Decodes the chunk of nested leaf column col in row group rg (data pages v1) into out
 * (arrays malloc'ed; release with free()). */
cdc_err_t cdc_pq_read_levels(cdc_pq_reader_t *r, size_t col, size_t rg, rlevels_t *out,
                             cdc_error_t *e);

#endif
