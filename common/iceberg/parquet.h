/*
 * Parquet writer for Iceberg data and delete files. Debian ships no C library
 * that writes Parquet (Arrow's is C++ and not packaged for this build), so this
 * module implements the subset the pipeline needs directly from the Apache
 * Parquet format specification: flat schemas of every cdc_ice_type_t, required
 * and optional columns (definition levels, RLE/bit-packed hybrid), PLAIN and
 * dictionary (RLE_DICTIONARY) encodings, data page v1, zstd/snappy/no
 * compression, column-chunk statistics, Iceberg field ids on every column and
 * the `iceberg.schema` footer key. The Thrift compact encoding of the footer
 * and page headers lives in common/iceberg/thrift.c.
 *
 * The API is row-oriented: open a writer for a schema, append rows of typed
 * values, close. Values are buffered per column for one row group and encoded
 * in tight loops when the row group is flushed (at opts.row_group_bytes of
 * buffered data, or when the caller asks: cdc_pq_writer_flush()). The writer does NOT roll files:
 * the caller watches cdc_pq_writer_size() and closes the file and opens the next when it passes its
 * target file size. On close the writer fills a cdc_ice_data_file_t with record count, file size,
 * split offsets and per-column Iceberg statistics (bounds in Iceberg single-value encoding).
 *
 * Threads: a writer is used by one thread at a time; writers are independent.
 *
 * Implemented in parquet.c (file layout, row groups, footer), parquet_column.c
 * (buffering rows column by column, dictionaries, statistics) and parquet_encode.c
 * (pages, RLE/bit-packing, compression), which share parquet_int.h. The cell type
 * (value.h), decimals (decimal.h) and Iceberg bounds (bounds.h) have their own
 * modules; this header includes them for its callers.
 */
#ifndef CDC_ICEBERG_PARQUET_H
#define CDC_ICEBERG_PARQUET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/bounds.h"
#include "common/iceberg/decimal.h"
#include "common/iceberg/types.h"
#include "common/iceberg/value.h"

/* Compression codec of data and dictionary pages. */
typedef enum cdc_pq_codec {
    CDC_PQ_CODEC_NONE = 0,
    CDC_PQ_CODEC_SNAPPY,
    CDC_PQ_CODEC_ZSTD,
} cdc_pq_codec_t;

typedef struct cdc_pq_options {
    cdc_pq_codec_t codec;    /* default ZSTD */
    int zstd_level;          /* default 1 */
    size_t row_group_bytes;  /* flush a row group at this many buffered bytes; default 64 MiB */
    size_t page_bytes;       /* target uncompressed data page size; default 1 MiB */
    bool dictionary;         /* dictionary-encode string/binary columns; default true */
    size_t dict_max_bytes;   /* fall back to PLAIN past this dictionary size; default 1 MiB */
    size_t dict_max_entries; /* ... or past this many distinct values; default 65536 */
} cdc_pq_options_t;

/* Fills *opts with the defaults above. */
void cdc_pq_options_init(cdc_pq_options_t *opts);

/* Parses "zstd", "snappy", "none"/"uncompressed" (case-insensitive). */
cdc_err_t cdc_pq_codec_parse(const char *name, cdc_pq_codec_t *out);
const char *cdc_pq_codec_name(cdc_pq_codec_t codec);

/* Output sink: called with consecutive file bytes. Return CDC_OK or fill err. */
typedef cdc_err_t (*cdc_pq_sink_fn)(void *ctx, const void *data, size_t len, cdc_error_t *err);

typedef struct cdc_pq_writer cdc_pq_writer_t;

/*
 * Opens a writer that creates (O_EXCL) and writes a local file at `path`.
 * The schema is copied; opts may be NULL for defaults. On success *out owns the
 * writer (free with cdc_pq_writer_free()); on failure *out is untouched.
 */
cdc_err_t cdc_pq_writer_open_file(const cdc_ice_schema_t *schema, const char *path,
                                  const cdc_pq_options_t *opts, cdc_pq_writer_t **out,
                                  cdc_error_t *err);

/* Opens a writer that accumulates the file in memory; see cdc_pq_writer_take_buffer(). */
cdc_err_t cdc_pq_writer_open_buffer(const cdc_ice_schema_t *schema, const cdc_pq_options_t *opts,
                                    cdc_pq_writer_t **out, cdc_error_t *err);

/* Opens a writer that hands bytes to `sink` (ctx is borrowed until the writer is freed). */
cdc_err_t cdc_pq_writer_open_sink(const cdc_ice_schema_t *schema, cdc_pq_sink_fn sink, void *ctx,
                                  const cdc_pq_options_t *opts, cdc_pq_writer_t **out,
                                  cdc_error_t *err);

/*
 * Appends one row: values[i] is the cell of schema field i (schema order). On
 * failure (a NULL in a required column, CDC_ERR_INVALID; an I/O error while
 * flushing a row group) the row is not added; after an I/O error the writer
 * is unusable except for cdc_pq_writer_free().
 */
cdc_err_t cdc_pq_writer_append(cdc_pq_writer_t *w, const cdc_ice_value_t *values, cdc_error_t *err);

/*
 * Ends the current row group now (encodes, compresses and emits it) instead of when
 * opts.row_group_bytes of data are buffered; a no-op when no row is buffered. Lets a
 * caller encode a file's row groups ahead of time (e.g. while an epoch runs) so that
 * closing it only encodes the tail and writes the footer. Statistics and split
 * offsets cover every row group. After a failure the writer is unusable except for
 * cdc_pq_writer_free().
 */
cdc_err_t cdc_pq_writer_flush(cdc_pq_writer_t *w, cdc_error_t *err);

/* Rows appended so far. */
int64_t cdc_pq_writer_rows(const cdc_pq_writer_t *w);

/*
 * Estimated file size if closed now: bytes already written plus an estimate of
 * the buffered row group after encoding. The caller rolls to a new file when
 * this passes its target.
 */
uint64_t cdc_pq_writer_size(const cdc_pq_writer_t *w);

/*
 * Flushes the last row group and writes the footer (and, for a file, fsyncs
 * it). Fills *df (when not NULL): content DATA, path (strdup of the file path,
 * NULL for buffer/sink writers: the caller sets it), record_count,
 * file_size_in_bytes, schema_id, stats (one per field, schema order),
 * split_offsets. *df's arrays are owned by the caller afterwards: release them
 * with cdc_ice_data_file_clear() (common/iceberg/schema.h). A closed writer
 * must still be freed.
 */
cdc_err_t cdc_pq_writer_close(cdc_pq_writer_t *w, cdc_ice_data_file_t *df, cdc_error_t *err);

/*
 * Buffer writers only, after a successful close: moves the file bytes to the
 * caller (*data is malloc'ed, free with free()). Returns CDC_ERR_INVALID otherwise.
 */
cdc_err_t cdc_pq_writer_take_buffer(cdc_pq_writer_t *w, uint8_t **data, size_t *len);

/* Frees the writer. A file writer that was not closed leaves a partial file behind
 * (the caller removes it); NULL is ignored. */
void cdc_pq_writer_free(cdc_pq_writer_t *w);

#endif
