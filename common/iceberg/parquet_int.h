/*
 * Internals shared by the pieces of the Parquet writer (parquet.h): the writer and
 * its per-column row-group buffers, the small growable buffer they are made of, and
 * the functions each piece offers the others. parquet.c lays out the file
 * (row groups, footer) and sends it to its sink; parquet_column.c buffers appended
 * rows per column (dictionaries, statistics); parquet_encode.c turns a column's
 * buffered row group into pages. Not for use outside parquet*.c and their tests.
 *
 * Values are buffered per column for one row group in flat arrays (no per-value
 * allocation): fixed-width values in their PLAIN encoding, byte arrays as one data
 * buffer plus offsets, or as dictionary indices while a column's dictionary stays
 * small. Statistics are tracked on the fly, per row group for the Parquet metadata
 * and per file for Iceberg.
 */
#ifndef CDC_ICEBERG_PARQUET_INT_H
#define CDC_ICEBERG_PARQUET_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/buf.h"
#include "common/iceberg/byteorder.h"
#include "common/iceberg/nested.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/parquet.h"
#include "common/iceberg/thrift.h"

/* parquet.thrift enums (the writer's values, and those the reader, parquet_read.h, meets) */
enum {
    PT_BOOLEAN = 0,
    PT_INT32 = 1,
    PT_INT64 = 2,
    PT_INT96 = 3,
    PT_FLOAT = 4,
    PT_DOUBLE = 5,
    PT_BYTE_ARRAY = 6,
    PT_FLBA = 7
};
enum {
    ENC_PLAIN = 0,
    ENC_PLAIN_DICTIONARY = 2,
    ENC_RLE = 3,
    ENC_BIT_PACKED = 4,
    ENC_RLE_DICTIONARY = 8
};
enum { PAGE_DATA = 0, PAGE_INDEX = 1, PAGE_DICTIONARY = 2, PAGE_DATA_V2 = 3 };
enum {
    CT_UTF8 = 0,
    CT_DECIMAL = 5,
    CT_DATE = 6,
    CT_TIME_MILLIS = 7,
    CT_TIME_MICROS = 8,
    CT_TIMESTAMP_MILLIS = 9,
    CT_TIMESTAMP_MICROS = 10
};
enum { REP_REQUIRED = 0, REP_OPTIONAL = 1, REP_REPEATED = 2 };
/* CompressionCodec */
enum { PQ_CODEC_UNCOMPRESSED = 0, PQ_CODEC_SNAPPY = 1, PQ_CODEC_ZSTD = 6 };

/* Limits that keep 32-bit offsets and page sizes from overflowing. A value may be as large
 * as PostgreSQL's largest (1 GB, docs/worker.md, "Large rows"): its page stays below the
 * 2 GiB a page header can state. */
#define PQ_MAX_VALUE ((size_t)1 << 30)
#define PQ_MAX_ROW_GROUP ((size_t)1 << 30)
/* A data page whose values add up to this many bytes is compressed from the column's
 * buffer without being copied into a page first (docs/parquet.md, "Large values"), and
 * a row-group buffer grown above it is released after its row group. */
#define PQ_LARGE_PAGE ((size_t)4 << 20)

/* Max bytes of a min/max value kept in the Parquet column statistics. */
#define PQ_STAT_MAX 64
/* Bytes of a byte-array min/max the running statistics keep: a longer value is kept as
 * its first PQ_STAT_KEEP bytes, marked cut, so that a large value (docs/worker.md, "Large
 * rows") is not copied into them; every bound written (PQ_STAT_MAX bytes, Iceberg's 16
 * code points) is computed from that prefix alone. */
#define PQ_STAT_KEEP 256

typedef struct buf {
    uint8_t *p;
    size_t len;
    size_t cap;
} buf_t;

/* Typed running min/max. Fixed types in i (ints), d (floats) or dec; bytes in minb/maxb. */
typedef struct stats {
    bool has; /* at least one non-null, non-NaN value */
    int64_t nulls;
    int64_t nans;
    int64_t imin, imax;
    double dmin, dmax;
    __int128 decmin, decmax;
    buf_t minb, maxb;
    bool min_cut, max_cut; /* minb / maxb hold the first PQ_STAT_KEEP bytes of a longer value */
} stats_t;

/* Metadata of one written column chunk, kept for the footer. */
typedef struct chunk_meta {
    int64_t chunk_offset;
    int64_t data_page_offset;
    int64_t dict_page_offset; /* -1 when there is no dictionary page */
    int64_t num_values;
    int64_t uncompressed;
    int64_t compressed;
    bool plain_used, dict_used;
    int64_t null_count;
    bool has_minmax;
    bool min_exact, max_exact;
    uint8_t min[PQ_STAT_MAX], max[PQ_STAT_MAX];
    size_t min_len, max_len;
} chunk_meta_t;

typedef struct column {
    const cdc_ice_field_t *field; /* the top-level field, or a nested leaf's node field */
    int ptype;
    int type_length; /* FIXED_LEN_BYTE_ARRAY length */
    int width;       /* bytes per buffered value for fixed types, 0 for byte arrays */
    bool optional;
    bool is_bytes;
    __int128 dec_limit; /* 10^precision for range checks */

    /* levels: a flat column has max_def 1 when optional, else 0, and max_rep 0; a leaf of
     * a nested field has the levels of its node (nested.h) */
    int max_def, max_rep;
    bool nested;       /* a leaf of a list or struct field: no Iceberg statistics */
    const char **path; /* path_in_schema: path1 for a flat column, else allocated */
    const char *path1[1];
    size_t npath;

    /* row group buffers */
    int64_t nentries; /* level entries (rows for a flat column) */
    buf_t reps;       /* uint8 repetition level per entry (max_rep > 0) */
    buf_t defs;       /* uint8 definition level per entry (max_def > 0) */
    buf_t values;     /* fixed: PLAIN values; bytes: concatenated value bytes */
    buf_t offs;       /* bytes, plain mode: uint32 end offset of each value in values */
    int64_t nvalues;

    /* dictionary (byte arrays) */
    bool dict_on;     /* current row group is dictionary-encoded */
    bool dict_failed; /* fell back once in this file: stay plain */
    buf_t dict_data;  /* concatenated entry bytes */
    buf_t dict_offs;  /* uint32 end offset per entry */
    uint64_t *slots;  /* open addressing: (hash32 << 32) | (index + 1); 0 = empty */
    size_t nslots;
    uint32_t ndict;
    buf_t idx; /* uint32 dictionary index per non-null value */

    stats_t rg;   /* current row group */
    stats_t file; /* whole file */
    int64_t file_values;
    int64_t column_size;

    /* encoding scratch */
    buf_t page, comp, levels;
    cdc_thrift_t hdr;
    chunk_meta_t meta;
} column_t;

typedef enum sink_kind { SINK_FILE, SINK_BUFFER, SINK_CALLBACK } sink_kind_t;

struct cdc_pq_writer {
    cdc_ice_schema_t schema;
    cdc_pq_options_t opts;
    column_t *cols; /* the leaf columns, in schema order */
    size_t ncols;
    size_t *fcol;          /* per top-level field: index of its first column */
    cdc_ice_node_t *trees; /* per top-level field: its tree when nested, else zeroed */

    sink_kind_t sink_kind;
    int fd;
    char *path;
    buf_t out; /* buffer sink contents, or the file write buffer */
    cdc_pq_sink_fn sink;
    void *sink_ctx;
    uint64_t offset; /* bytes emitted so far */

    int64_t rows;
    int64_t rg_rows;
    size_t rg_bytes;
    uint64_t raw_total, comp_total; /* for the compression ratio estimate */

    chunk_meta_t *metas; /* nrg * ncols */
    int64_t *rg_rows_list, *rg_offsets, *rg_raw, *rg_comp;
    size_t nrg, rg_cap;

    ZSTD_CCtx *zctx;
    bool failed, closed;
};

/* ---- small buffers ------------------------------------------------------------ */

static inline bool buf_reserve(buf_t *b, size_t n)
{
    return cdc_array_reserve(b->p, b->cap, b->len + n, 64) == CDC_OK;
}

static inline bool buf_put(buf_t *b, const void *data, size_t n)
{
    if (!buf_reserve(b, n))
        return false;
    if (n > 0)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    return true;
}

static inline bool buf_set(buf_t *b, const void *data, size_t n)
{
    b->len = 0;
    return buf_put(b, data, n);
}

static inline void buf_free(buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static inline const uint8_t *dict_entry(const column_t *c, uint32_t i, size_t *len)
{
    const uint32_t *ends = (const uint32_t *)c->dict_offs.p;
    uint32_t start = i == 0 ? 0 : ends[i - 1];
    *len = ends[i] - start;
    return c->dict_data.p + start;
}

/* ---- parquet_column.c: buffering rows --------------------------------------------- */

/* Sets up column c for field f (physical type, width, dictionary mode); flat levels. */
cdc_err_t cdc_pq_column_init(column_t *c, const cdc_ice_field_t *f, const cdc_pq_options_t *opts,
                             cdc_error_t *err);
void cdc_pq_column_free(column_t *c);

/* Fills c->meta's statistics (null count, min/max) from the row group's. */
void cdc_pq_column_chunk_stats(column_t *c);

/*
 * After c's row group was written: adds its statistics and counts to the file's and
 * empties its buffers for the next row group (keeping their memory, except big
 * scratch buffers). False when out of memory.
 */
bool cdc_pq_column_end_row_group(const cdc_pq_writer_t *w, column_t *c);

/* Iceberg statistics of column c for the data-file descriptor. */
void cdc_pq_column_ice_stats(const column_t *c, cdc_ice_col_stats_t *s);

/* ---- parquet_encode.c: pages ------------------------------------------------------- */

/* Encodes the whole buffered row group of column c and emits its pages (offsets in
 * c->meta relative to the column chunk's start). */
cdc_err_t cdc_pq_encode_column(cdc_pq_writer_t *w, column_t *c, int64_t nrows, cdc_error_t *err);

/* The RLE/bit-packed hybrid encoding of n values of width bw into out; returns the
 * length, 0 when it does not fit in cap. Exposed to the unit tests. */
size_t cdc_pq__hybrid_encode_u32(const uint32_t *vals, size_t n, int bw, uint8_t *out, size_t cap);

/* ---- parquet.c: the file ---------------------------------------------------------- */

/* Appends len bytes to the writer's output (file, buffer or callback). */
cdc_err_t cdc_pq__emit(cdc_pq_writer_t *w, const void *data, size_t len, cdc_error_t *err);

/* Encodes, compresses and emits the buffered row group (a no-op without rows). */
cdc_err_t cdc_pq_write_row_group(cdc_pq_writer_t *w, cdc_error_t *err);

#endif
