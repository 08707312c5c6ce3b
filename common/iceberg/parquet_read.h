/*
 * Parquet reader for the files this project writes (parquet.h): table maintenance
 * (docs/iceberg.md, "Table maintenance") reads data and equality-delete files back to
 * rewrite them. Debian ships no C library that reads Parquet, so, like the writer, it is
 * built from the Apache Parquet format specification, and it reads what the writer
 * writes: every cdc_ice_type_t, required and optional columns, list and struct columns
 * (their values assembled into the nested value text of nested.h) in files with the
 * `iceberg.schema` key,
 * PLAIN and RLE_DICTIONARY (and PLAIN_DICTIONARY) encodings, data pages v1 and v2,
 * zstd/snappy/uncompressed pages. Anything else (maps, other encodings or
 * codecs) is refused with CDC_ERR_UNSUPPORTED naming what it found; a file that is cut or
 * malformed with CDC_ERR_CORRUPT. No input makes it read out of bounds.
 *
 * The file's Iceberg schema comes from the `iceberg.schema` footer key (the writer
 * always stores it); without one, columns are typed from their Parquet physical and
 * logical types and carry the field ids of the footer (field id 0 when absent).
 *
 * Columns are decoded whole, column by column: a file is small (one epoch's rows, or at
 * most a compaction's target size), and a rewrite reads every column anyway.
 *
 * Threads: a reader is used by one thread at a time; readers are independent.
 *
 * Implemented in parquet_read.c (framing, footer, typing the columns) and
 * parquet_read_column.c (pages, decompression, levels and values), which share
 * parquet_read_int.h; the Thrift compact decoding is in thrift.c.
 */
#ifndef CDC_ICEBERG_PARQUET_READ_H
#define CDC_ICEBERG_PARQUET_READ_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/types.h"
#include "common/iceberg/value.h"

typedef struct cdc_pq_reader cdc_pq_reader_t;

/*
 * Parses the footer of the file data[0..len) (borrowed: it must outlive the reader). On
 * success *out owns the reader (cdc_pq_reader_free).
 */
cdc_err_t cdc_pq_reader_open(const uint8_t *data, size_t len, cdc_pq_reader_t **out,
                             cdc_error_t *e);

/* The file's schema (owned by the reader): one field per column, in file order. */
const cdc_ice_schema_t *cdc_pq_reader_schema(const cdc_pq_reader_t *r);

/* Rows in the file (all row groups). */
int64_t cdc_pq_reader_rows(const cdc_pq_reader_t *r);

/*
 * Decodes column col (schema order) of every row group: on success *values points to
 * cdc_pq_reader_rows() cells, typed as the schema field says (value.h). The cells and the
 * bytes they point to are owned by the reader and stay valid until it is freed (a column
 * decoded once is kept and returned again).
 */
cdc_err_t cdc_pq_reader_column(cdc_pq_reader_t *r, size_t col, const cdc_ice_value_t **values,
                               cdc_error_t *e);

void cdc_pq_reader_free(cdc_pq_reader_t *r);

#endif
