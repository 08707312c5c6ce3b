/*
 * Parquet writer (see parquet.h), written from the Apache Parquet format
 * specification because Debian has no C library for it: the file's layout. The
 * file starts with "PAR1"; a row group is flushed when the buffered bytes
 * (parquet_column.c) reach the target: each column is cut into pages, each page
 * encoded and emitted to the output as it is made (parquet_encode.c); the
 * footer (FileMetaData, Thrift compact) is written on close, with the Iceberg
 * statistics of the file for its data-file descriptor.
 *
 * A call circle of three files, one concept split by part (docs/development.md, "Call
 * circles"): parquet.c drives row groups and pages over the columns (parquet_column.c)
 * and their encoding (parquet_encode.c); a column past its page budget has its row group
 * written (cdc_pq_write_row_group), and encoded pages go out through the file's sink in
 * parquet.c (cdc_pq__emit).
 */
#include "common/iceberg/parquet.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zstd.h>

#include "common/iceberg/parquet_int.h"
#include "common/iceberg/schema.h"

#ifndef CDC_VERSION
#define CDC_VERSION "dev"
#endif

/* ---- options ------------------------------------------------------------------ */

void cdc_pq_options_init(cdc_pq_options_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->codec = CDC_PQ_CODEC_ZSTD;
    opts->zstd_level = 1; /* as small as 3 on dictionary-encoded pages, faster (parquet.md) */
    opts->row_group_bytes = 64u << 20;
    opts->page_bytes = 1u << 20;
    opts->dictionary = true;
    opts->dict_max_bytes = 1u << 20;
    opts->dict_max_entries = 65536;
}

cdc_err_t cdc_pq_codec_parse(const char *name, cdc_pq_codec_t *out)
{
    if (name == NULL)
        return CDC_ERR_INVALID;
    if (strcasecmp(name, "zstd") == 0)
        *out = CDC_PQ_CODEC_ZSTD;
    else if (strcasecmp(name, "snappy") == 0)
        *out = CDC_PQ_CODEC_SNAPPY;
    else if (strcasecmp(name, "none") == 0 || strcasecmp(name, "uncompressed") == 0)
        *out = CDC_PQ_CODEC_NONE;
    else
        return CDC_ERR_INVALID;
    return CDC_OK;
}

const char *cdc_pq_codec_name(cdc_pq_codec_t codec)
{
    switch (codec) {
    case CDC_PQ_CODEC_ZSTD:
        return "zstd";
    case CDC_PQ_CODEC_SNAPPY:
        return "snappy";
    default:
        return "none";
    }
}

/* ---- writer setup ------------------------------------------------------------- */

/* The leaf columns of w's schema: one per primitive field, one per primitive leaf of a
 * list or struct field with that leaf's levels and path (docs/parquet.md, "Nested
 * columns"). */
static cdc_err_t writer_columns(cdc_pq_writer_t *w, cdc_error_t *err)
{
    size_t nf = w->schema.nfields, n = 0;

    w->fcol = calloc(nf, sizeof(*w->fcol));
    w->trees = calloc(nf, sizeof(*w->trees));
    if (w->fcol == NULL || w->trees == NULL)
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nf; i++) {
        w->fcol[i] = n;
        if (cdc_ice_type_is_nested(w->schema.fields[i].type)) {
            cdc_err_t rc = cdc_ice_node_build(&w->schema.fields[i], &w->trees[i], err);
            if (rc != CDC_OK)
                return rc;
            n += cdc_ice_node_leaves(&w->trees[i]);
        } else {
            n++;
        }
    }
    w->cols = calloc(n, sizeof(column_t));
    if (w->cols == NULL)
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nf; i++) {
        const cdc_ice_field_t *f = &w->schema.fields[i];
        if (!cdc_ice_type_is_nested(f->type)) {
            cdc_err_t rc = cdc_pq_column_init(&w->cols[w->ncols], f, &w->opts, err);
            w->ncols++;
            if (rc != CDC_OK)
                return rc;
            continue;
        }
        for (size_t k = 0; k < cdc_ice_node_leaves(&w->trees[i]); k++) {
            size_t depth = 0;
            /* the leaf's depth first, then its path: as deep as the type nests */
            const cdc_ice_node_t *leaf = cdc_ice_node_leaf(&w->trees[i], (int)k, NULL, 0, &depth);
            const cdc_ice_node_t **path = leaf != NULL ? calloc(depth, sizeof(*path)) : NULL;
            column_t *c = &w->cols[w->ncols];
            cdc_err_t rc;
            if (leaf == NULL)
                rc = cdc_error_set(err, CDC_ERR_INVALID, "bad nested type");
            else if (path == NULL)
                rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            else
                rc = cdc_pq_column_init(c, &leaf->f, &w->opts, err);
            w->ncols++;
            if (rc == CDC_OK) {
                cdc_ice_node_leaf(&w->trees[i], (int)k, path, depth, &depth);
                /* a list level names its node and its repeated group "list" */
                c->path = calloc(2 * depth, sizeof(*c->path));
                if (c->path == NULL) {
                    c->path = c->path1;
                    rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
                }
            }
            if (rc != CDC_OK) {
                free(path);
                return rc;
            }
            c->nested = true;
            c->max_def = leaf->def;
            c->max_rep = leaf->max_rep;
            c->optional = !leaf->f.required;
            c->npath = 0;
            for (size_t d = 0; d < depth; d++) {
                c->path[c->npath++] = path[d]->f.name;
                if (path[d]->f.type == CDC_ICE_LIST)
                    c->path[c->npath++] = "list";
            }
            free(path);
        }
    }
    return CDC_OK;
}

static cdc_err_t writer_new(const cdc_ice_schema_t *schema, const cdc_pq_options_t *opts,
                            sink_kind_t sink_kind, cdc_pq_writer_t **out, cdc_error_t *err)
{
    cdc_pq_writer_t *w = calloc(1, sizeof(*w));
    cdc_err_t rc;

    if (w == NULL)
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    w->sink_kind = sink_kind;
    w->fd = -1;
    if (opts != NULL)
        w->opts = *opts;
    else
        cdc_pq_options_init(&w->opts);
    if (w->opts.page_bytes == 0)
        w->opts.page_bytes = 1u << 20;
    if (w->opts.row_group_bytes == 0)
        w->opts.row_group_bytes = 64u << 20;
    /* byte-array offsets are 32-bit: keep a row group's data well below 4 GiB */
    if (w->opts.row_group_bytes > PQ_MAX_ROW_GROUP)
        w->opts.row_group_bytes = PQ_MAX_ROW_GROUP;
    if (w->opts.dict_max_bytes > PQ_MAX_ROW_GROUP)
        w->opts.dict_max_bytes = PQ_MAX_ROW_GROUP;
    if (w->opts.page_bytes > PQ_MAX_VALUE)
        w->opts.page_bytes = PQ_MAX_VALUE;
    if (schema->nfields == 0) {
        rc = cdc_error_set(err, CDC_ERR_INVALID, "parquet schema has no columns");
        goto fail;
    }
    if (cdc_ice_schema_copy(&w->schema, schema) != CDC_OK) {
        rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    rc = writer_columns(w, err);
    if (rc != CDC_OK)
        goto fail;
    if (w->opts.codec == CDC_PQ_CODEC_ZSTD) {
        w->zctx = ZSTD_createCCtx();
        if (w->zctx == NULL) {
            rc = cdc_error_set(err, CDC_ERR_NOMEM, "could not create zstd context");
            goto fail;
        }
        ZSTD_CCtx_setParameter(w->zctx, ZSTD_c_compressionLevel, w->opts.zstd_level);
    }
    *out = w;
    return CDC_OK;
fail:
    cdc_pq_writer_free(w);
    return rc;
}

/* ---- output ------------------------------------------------------------------- */

#define FILE_BUF_BYTES (1u << 20)

/* Writes len bytes at p to the file, retrying short and interrupted writes. */
static cdc_err_t write_all(cdc_pq_writer_t *w, const uint8_t *p, size_t len, cdc_error_t *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(w->fd, p + done, len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return cdc_error_set(err, CDC_ERR_IO, "could not write file \"%s\": %s", w->path,
                                 strerror(errno));
        }
        done += (size_t)n;
    }
    return CDC_OK;
}

static cdc_err_t file_flush(cdc_pq_writer_t *w, cdc_error_t *err)
{
    cdc_err_t rc = write_all(w, w->out.p, w->out.len, err);

    if (rc == CDC_OK)
        w->out.len = 0;
    return rc;
}

cdc_err_t cdc_pq__emit(cdc_pq_writer_t *w, const void *data, size_t len, cdc_error_t *err)
{
    cdc_err_t rc;

    switch (w->sink_kind) {
    case SINK_BUFFER:
        if (!buf_put(&w->out, data, len))
            return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        break;
    case SINK_CALLBACK:
        rc = w->sink(w->sink_ctx, data, len, err);
        if (rc != CDC_OK)
            return rc;
        break;
    case SINK_FILE:
        if (w->out.len + len > FILE_BUF_BYTES) {
            rc = file_flush(w, err);
            if (rc != CDC_OK)
                return rc;
        }
        if (len >= FILE_BUF_BYTES) {
            rc = write_all(w, data, len, err);
            if (rc != CDC_OK)
                return rc;
        } else if (!buf_put(&w->out, data, len)) {
            return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        }
        break;
    }
    w->offset += len;
    return CDC_OK;
}

/* Emits the leading magic; on success *out takes w, on failure w is freed. */
static cdc_err_t writer_start(cdc_pq_writer_t *w, cdc_pq_writer_t **out, cdc_error_t *err)
{
    cdc_err_t rc = cdc_pq__emit(w, "PAR1", 4, err);

    if (rc != CDC_OK) {
        cdc_pq_writer_free(w);
        return rc;
    }
    *out = w;
    return CDC_OK;
}

cdc_err_t cdc_pq_writer_open_file(const cdc_ice_schema_t *schema, const char *path,
                                  const cdc_pq_options_t *opts, cdc_pq_writer_t **out,
                                  cdc_error_t *err)
{
    cdc_pq_writer_t *w;
    cdc_err_t rc = writer_new(schema, opts, SINK_FILE, &w, err);

    if (rc != CDC_OK)
        return rc;
    w->path = strdup(path);
    if (w->path == NULL) {
        cdc_pq_writer_free(w);
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    }
    w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        rc = cdc_error_set(err, errno == EEXIST ? CDC_ERR_EXISTS : CDC_ERR_IO,
                           "could not create file \"%s\": %s", path, strerror(errno));
        cdc_pq_writer_free(w);
        return rc;
    }
    return writer_start(w, out, err);
}

cdc_err_t cdc_pq_writer_open_buffer(const cdc_ice_schema_t *schema, const cdc_pq_options_t *opts,
                                    cdc_pq_writer_t **out, cdc_error_t *err)
{
    cdc_pq_writer_t *w;
    cdc_err_t rc = writer_new(schema, opts, SINK_BUFFER, &w, err);

    return rc != CDC_OK ? rc : writer_start(w, out, err);
}

cdc_err_t cdc_pq_writer_open_sink(const cdc_ice_schema_t *schema, cdc_pq_sink_fn sink, void *ctx,
                                  const cdc_pq_options_t *opts, cdc_pq_writer_t **out,
                                  cdc_error_t *err)
{
    cdc_pq_writer_t *w;
    cdc_err_t rc = writer_new(schema, opts, SINK_CALLBACK, &w, err);

    if (rc != CDC_OK)
        return rc;
    w->sink = sink;
    w->sink_ctx = ctx;
    return writer_start(w, out, err);
}

void cdc_pq_writer_free(cdc_pq_writer_t *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; w->cols != NULL && i < w->ncols; i++)
        cdc_pq_column_free(&w->cols[i]);
    free(w->cols);
    for (size_t i = 0; w->trees != NULL && i < w->schema.nfields; i++)
        cdc_ice_node_free(&w->trees[i]);
    free(w->trees);
    free(w->fcol);
    if (w->fd >= 0)
        close(w->fd);
    free(w->path);
    buf_free(&w->out);
    free(w->metas);
    free(w->rg_rows_list);
    free(w->rg_offsets);
    free(w->rg_raw);
    free(w->rg_comp);
    ZSTD_freeCCtx(w->zctx);
    cdc_ice_schema_free(&w->schema);
    free(w);
}

/* ---- row groups --------------------------------------------------------------- */

cdc_err_t cdc_pq_writer_flush(cdc_pq_writer_t *w, cdc_error_t *err)
{
    if (w->failed || w->closed)
        return cdc_error_set(err, CDC_ERR_CLOSED, "parquet writer is closed or failed");
    return cdc_pq_write_row_group(w, err);
}

int64_t cdc_pq_writer_rows(const cdc_pq_writer_t *w)
{
    return w->rows;
}

uint64_t cdc_pq_writer_size(const cdc_pq_writer_t *w)
{
    double ratio = 1.0;
    if (w->raw_total > 0)
        ratio = (double)w->comp_total / (double)w->raw_total;
    return w->offset + (uint64_t)((double)w->rg_bytes * ratio) + 64 * w->ncols * (w->nrg + 1) + 256;
}

cdc_err_t cdc_pq_write_row_group(cdc_pq_writer_t *w, cdc_error_t *err)
{
    cdc_err_t rc = CDC_OK;
    int64_t rg_offset = (int64_t)w->offset, raw = 0, comp = 0;

    if (w->rg_rows == 0)
        return CDC_OK;
    if (w->nrg == w->rg_cap) {
        /* five arrays share one capacity (metas holds ncols per row group) */
        size_t cap = w->rg_cap ? w->rg_cap * 2 : 8;
        if (cdc_array_resize(w->metas, cap * w->ncols) != CDC_OK ||
            cdc_array_resize(w->rg_rows_list, cap) != CDC_OK ||
            cdc_array_resize(w->rg_offsets, cap) != CDC_OK ||
            cdc_array_resize(w->rg_raw, cap) != CDC_OK ||
            cdc_array_resize(w->rg_comp, cap) != CDC_OK) {
            rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        w->rg_cap = cap;
    }
    for (size_t i = 0; i < w->ncols; i++) {
        column_t *c = &w->cols[i];
        int64_t base = (int64_t)w->offset;

        rc = cdc_pq_encode_column(w, c, w->rg_rows, err);
        if (rc != CDC_OK)
            goto fail;
        c->meta.chunk_offset = base;
        c->meta.data_page_offset += base;
        if (c->meta.dict_page_offset >= 0)
            c->meta.dict_page_offset += base;
        w->metas[w->nrg * w->ncols + i] = c->meta;
        raw += c->meta.uncompressed;
        comp += c->meta.compressed;
        if (!cdc_pq_column_end_row_group(w, c)) {
            rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    w->rg_rows_list[w->nrg] = w->rg_rows;
    w->rg_offsets[w->nrg] = rg_offset;
    w->rg_raw[w->nrg] = raw;
    w->rg_comp[w->nrg] = comp;
    w->nrg++;
    w->raw_total += (uint64_t)raw;
    w->comp_total += (uint64_t)comp;
    w->rg_rows = 0;
    w->rg_bytes = 0;
    return CDC_OK;
fail:
    w->failed = true;
    return rc;
}

/* ---- footer ------------------------------------------------------------------- */

static void put_schema_element(cdc_thrift_t *t, const column_t *c)
{
    const cdc_ice_field_t *f = c->field;

    cdc_thrift_struct_begin(t);
    cdc_thrift_field_i32(t, 1, c->ptype);
    if (c->ptype == PT_FLBA)
        cdc_thrift_field_i32(t, 2, c->type_length);
    cdc_thrift_field_i32(t, 3, f->required ? REP_REQUIRED : REP_OPTIONAL);
    cdc_thrift_field_string(t, 4, f->name);
    switch (f->type) {
    case CDC_ICE_STRING:
        cdc_thrift_field_i32(t, 6, CT_UTF8);
        break;
    case CDC_ICE_DECIMAL:
        cdc_thrift_field_i32(t, 6, CT_DECIMAL);
        cdc_thrift_field_i32(t, 7, f->scale);
        cdc_thrift_field_i32(t, 8, f->precision);
        break;
    case CDC_ICE_DATE:
        cdc_thrift_field_i32(t, 6, CT_DATE);
        break;
    case CDC_ICE_TIMESTAMPTZ:
        /* the legacy annotation means UTC-adjusted; only set it for timestamptz */
        cdc_thrift_field_i32(t, 6, CT_TIMESTAMP_MICROS);
        break;
    default:
        break;
    }
    cdc_thrift_field_i32(t, 9, f->id);
    /* LogicalType union */
    switch (f->type) {
    case CDC_ICE_STRING:
        cdc_thrift_field_struct_begin(t, 10);
        cdc_thrift_field_struct_begin(t, 1);
        cdc_thrift_struct_end(t);
        cdc_thrift_struct_end(t);
        break;
    case CDC_ICE_DECIMAL:
        cdc_thrift_field_struct_begin(t, 10);
        cdc_thrift_field_struct_begin(t, 5);
        cdc_thrift_field_i32(t, 1, f->scale);
        cdc_thrift_field_i32(t, 2, f->precision);
        cdc_thrift_struct_end(t);
        cdc_thrift_struct_end(t);
        break;
    case CDC_ICE_DATE:
        cdc_thrift_field_struct_begin(t, 10);
        cdc_thrift_field_struct_begin(t, 6);
        cdc_thrift_struct_end(t);
        cdc_thrift_struct_end(t);
        break;
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        cdc_thrift_field_struct_begin(t, 10);
        cdc_thrift_field_struct_begin(t, f->type == CDC_ICE_TIME ? 7 : 8);
        cdc_thrift_field_bool(t, 1, f->type == CDC_ICE_TIMESTAMPTZ);
        cdc_thrift_field_struct_begin(t, 2); /* TimeUnit */
        cdc_thrift_field_struct_begin(t, 2); /* MICROS */
        cdc_thrift_struct_end(t);
        cdc_thrift_struct_end(t);
        cdc_thrift_struct_end(t);
        cdc_thrift_struct_end(t);
        break;
    case CDC_ICE_UUID:
        cdc_thrift_field_struct_begin(t, 10);
        cdc_thrift_field_struct_begin(t, 14);
        cdc_thrift_struct_end(t);
        cdc_thrift_struct_end(t);
        break;
    default:
        break;
    }
    cdc_thrift_struct_end(t);
}

/* A group element: name, repetition, children, an optional LIST annotation (converted
 * type 3, logical type LIST = union member 3) and a field id (0: none). */
static void put_group(cdc_thrift_t *t, const char *name, int repetition, size_t nkids, bool list,
                      int32_t id)
{
    cdc_thrift_struct_begin(t);
    cdc_thrift_field_i32(t, 3, repetition);
    cdc_thrift_field_string(t, 4, name);
    cdc_thrift_field_i32(t, 5, (int32_t)nkids);
    if (list)
        cdc_thrift_field_i32(t, 6, 3);
    if (id > 0)
        cdc_thrift_field_i32(t, 9, id);
    if (list) {
        cdc_thrift_field_struct_begin(t, 10);
        cdc_thrift_field_struct_begin(t, 3);
        cdc_thrift_struct_end(t);
        cdc_thrift_struct_end(t);
    }
    cdc_thrift_struct_end(t);
}

/* Schema elements of node n in depth-first order; *col walks the leaf columns. A list
 * is the 3-level form `<name> (LIST) { repeated group list { element } }`. */
static void put_node(cdc_thrift_t *t, const cdc_pq_writer_t *w, const cdc_ice_node_t *n,
                     size_t *col)
{
    int rep = n->f.required ? REP_REQUIRED : REP_OPTIONAL;

    if (n->f.type == CDC_ICE_LIST) {
        put_group(t, n->f.name, rep, 1, true, n->f.id);
        put_group(t, "list", REP_REPEATED, 1, false, 0);
        put_node(t, w, n->kids, col);
    } else if (n->f.type == CDC_ICE_STRUCT) {
        put_group(t, n->f.name, rep, n->nkids, false, n->f.id);
        for (size_t i = 0; i < n->nkids; i++)
            put_node(t, w, &n->kids[i], col);
    } else {
        put_schema_element(t, &w->cols[(*col)++]);
    }
}

/* Number of schema elements of node n. */
static size_t node_elements(const cdc_ice_node_t *n)
{
    size_t k = n->f.type == CDC_ICE_LIST ? 2 : 1;
    for (size_t i = 0; i < n->nkids; i++)
        k += node_elements(&n->kids[i]);
    return k;
}

static int codec_id(cdc_pq_codec_t codec)
{
    switch (codec) {
    case CDC_PQ_CODEC_SNAPPY:
        return PQ_CODEC_SNAPPY;
    case CDC_PQ_CODEC_ZSTD:
        return PQ_CODEC_ZSTD;
    default:
        return PQ_CODEC_UNCOMPRESSED;
    }
}

static void put_column_chunk(cdc_thrift_t *t, const cdc_pq_writer_t *w, const column_t *c,
                             const chunk_meta_t *m)
{
    /* a chunk is either all PLAIN or a PLAIN dictionary page + RLE_DICTIONARY pages */
    cdc_thrift_struct_begin(t);
    cdc_thrift_field_i64(t, 2, m->chunk_offset);
    cdc_thrift_field_struct_begin(t, 3); /* ColumnMetaData */
    cdc_thrift_field_i32(t, 1, c->ptype);
    cdc_thrift_field_list_begin(t, 2, CDC_THRIFT_I32, m->dict_used ? 3 : 2);
    cdc_thrift_i32(t, ENC_RLE);
    cdc_thrift_i32(t, ENC_PLAIN);
    if (m->dict_used)
        cdc_thrift_i32(t, ENC_RLE_DICTIONARY);
    cdc_thrift_field_list_begin(t, 3, CDC_THRIFT_BINARY, (int32_t)c->npath);
    for (size_t i = 0; i < c->npath; i++)
        cdc_thrift_binary(t, c->path[i], strlen(c->path[i]));
    cdc_thrift_field_i32(t, 4, codec_id(w->opts.codec));
    cdc_thrift_field_i64(t, 5, m->num_values);
    cdc_thrift_field_i64(t, 6, m->uncompressed);
    cdc_thrift_field_i64(t, 7, m->compressed);
    cdc_thrift_field_i64(t, 9, m->data_page_offset);
    if (m->dict_page_offset >= 0)
        cdc_thrift_field_i64(t, 11, m->dict_page_offset);
    cdc_thrift_field_struct_begin(t, 12); /* Statistics */
    cdc_thrift_field_i64(t, 3, m->null_count);
    if (m->has_minmax) {
        cdc_thrift_field_binary(t, 5, m->max, m->max_len);
        cdc_thrift_field_binary(t, 6, m->min, m->min_len);
        cdc_thrift_field_bool(t, 7, m->max_exact);
        cdc_thrift_field_bool(t, 8, m->min_exact);
    }
    cdc_thrift_struct_end(t);
    cdc_thrift_struct_end(t); /* ColumnMetaData */
    cdc_thrift_struct_end(t); /* ColumnChunk */
}

static cdc_err_t write_footer(cdc_pq_writer_t *w, cdc_error_t *err)
{
    cdc_thrift_t t;
    char *schema_json = cdc_ice_schema_to_json(&w->schema);
    uint8_t tail[8];
    cdc_err_t rc;

    if (schema_json == NULL)
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    cdc_thrift_init(&t);
    cdc_thrift_struct_begin(&t);
    cdc_thrift_field_i32(&t, 1, 1); /* version */
    size_t nel = 1, col = 0;
    for (size_t i = 0; i < w->schema.nfields; i++)
        nel += cdc_ice_type_is_nested(w->schema.fields[i].type) ? node_elements(&w->trees[i]) : 1;
    cdc_thrift_field_list_begin(&t, 2, CDC_THRIFT_STRUCT, nel);
    cdc_thrift_struct_begin(&t); /* root */
    cdc_thrift_field_string(&t, 4, "table");
    cdc_thrift_field_i32(&t, 5, (int32_t)w->schema.nfields);
    cdc_thrift_struct_end(&t);
    for (size_t i = 0; i < w->schema.nfields; i++) {
        if (cdc_ice_type_is_nested(w->schema.fields[i].type))
            put_node(&t, w, &w->trees[i], &col);
        else
            put_schema_element(&t, &w->cols[col++]);
    }
    cdc_thrift_field_i64(&t, 3, w->rows);
    cdc_thrift_field_list_begin(&t, 4, CDC_THRIFT_STRUCT, w->nrg);
    for (size_t g = 0; g < w->nrg; g++) {
        cdc_thrift_struct_begin(&t);
        cdc_thrift_field_list_begin(&t, 1, CDC_THRIFT_STRUCT, w->ncols);
        for (size_t i = 0; i < w->ncols; i++)
            put_column_chunk(&t, w, &w->cols[i], &w->metas[g * w->ncols + i]);
        cdc_thrift_field_i64(&t, 2, w->rg_raw[g]);
        cdc_thrift_field_i64(&t, 3, w->rg_rows_list[g]);
        cdc_thrift_field_i64(&t, 5, w->rg_offsets[g]);
        cdc_thrift_field_i64(&t, 6, w->rg_comp[g]);
        cdc_thrift_field_header(&t, 7, CDC_THRIFT_I16);
        cdc_thrift_i32(&t, (int32_t)g);
        cdc_thrift_struct_end(&t);
    }
    cdc_thrift_field_list_begin(&t, 5, CDC_THRIFT_STRUCT, 1);
    cdc_thrift_struct_begin(&t);
    cdc_thrift_field_string(&t, 1, "iceberg.schema");
    cdc_thrift_field_string(&t, 2, schema_json);
    cdc_thrift_struct_end(&t);
    cdc_thrift_field_string(&t, 6, "cdc-pipeline version " CDC_VERSION);
    cdc_thrift_field_list_begin(&t, 7, CDC_THRIFT_STRUCT, w->ncols);
    for (size_t i = 0; i < w->ncols; i++) {
        cdc_thrift_struct_begin(&t);          /* ColumnOrder union */
        cdc_thrift_field_struct_begin(&t, 1); /* TYPE_ORDER */
        cdc_thrift_struct_end(&t);
        cdc_thrift_struct_end(&t);
    }
    cdc_thrift_struct_end(&t);
    free(schema_json);
    if (t.oom) {
        cdc_thrift_free(&t);
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    }
    put_le32(tail, (uint32_t)t.len);
    memcpy(tail + 4, "PAR1", 4);
    rc = cdc_pq__emit(w, t.data, t.len, err);
    if (rc == CDC_OK)
        rc = cdc_pq__emit(w, tail, 8, err);
    cdc_thrift_free(&t);
    return rc;
}

cdc_err_t cdc_pq_writer_close(cdc_pq_writer_t *w, cdc_ice_data_file_t *df, cdc_error_t *err)
{
    cdc_err_t rc;

    if (w->failed || w->closed)
        return cdc_error_set(err, CDC_ERR_CLOSED, "parquet writer is closed or failed");
    rc = cdc_pq_write_row_group(w, err);
    if (rc == CDC_OK)
        rc = write_footer(w, err);
    if (rc == CDC_OK && w->sink_kind == SINK_FILE) {
        rc = file_flush(w, err);
        if (rc == CDC_OK && fsync(w->fd) != 0)
            rc = cdc_error_set(err, CDC_ERR_IO, "could not fsync file \"%s\": %s", w->path,
                               strerror(errno));
        if (close(w->fd) != 0 && rc == CDC_OK)
            rc = cdc_error_set(err, CDC_ERR_IO, "could not close file \"%s\": %s", w->path,
                               strerror(errno));
        w->fd = -1;
    }
    if (rc != CDC_OK) {
        w->failed = true;
        return rc;
    }
    w->closed = true;
    if (df == NULL)
        return CDC_OK;
    memset(df, 0, sizeof(*df));
    df->content = CDC_ICE_CONTENT_DATA;
    df->record_count = w->rows;
    df->file_size_in_bytes = (int64_t)w->offset;
    df->schema_id = w->schema.schema_id;
    df->stats = calloc(w->ncols, sizeof(cdc_ice_col_stats_t));
    df->split_offsets = calloc(w->nrg ? w->nrg : 1, sizeof(int64_t));
    df->path = w->path ? strdup(w->path) : NULL;
    if (df->stats == NULL || df->split_offsets == NULL || (w->path && df->path == NULL)) {
        cdc_ice_data_file_clear(df);
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    }
    /* nested fields carry no statistics: optional in the Iceberg spec, and their leaves'
     * counts are entries, not rows (docs/parquet.md, "Nested columns") */
    for (size_t i = 0; i < w->ncols; i++)
        if (!w->cols[i].nested)
            cdc_pq_column_ice_stats(&w->cols[i], &df->stats[df->nstats++]);
    df->nsplit_offsets = w->nrg;
    if (w->nrg > 0)
        memcpy(df->split_offsets, w->rg_offsets, w->nrg * sizeof(int64_t));
    return CDC_OK;
}

cdc_err_t cdc_pq_writer_take_buffer(cdc_pq_writer_t *w, uint8_t **data, size_t *len)
{
    if (w->sink_kind != SINK_BUFFER || !w->closed)
        return CDC_ERR_INVALID;
    *data = w->out.p;
    *len = w->out.len;
    memset(&w->out, 0, sizeof(w->out));
    return CDC_OK;
}
