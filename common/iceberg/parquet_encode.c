/*
 * Pages of a column chunk (see parquet_int.h): a column's buffered row group cut
 * into data pages (v1) with definition levels and values in the RLE/bit-packed
 * hybrid, PLAIN or RLE_DICTIONARY encoding, preceded by its dictionary page, each
 * page compressed (zstd, snappy or none) behind its Thrift page header.
 *
 * A call circle of three files, one concept split by part (docs/development.md, "Call
 * circles"): parquet.c drives row groups and pages over the columns (parquet_column.c)
 * and their encoding (parquet_encode.c); a column past its page budget has its row group
 * written (cdc_pq_write_row_group), and encoded pages go out through the file's sink in
 * parquet.c (cdc_pq__emit).
 */
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/iceberg/parquet_int.h"

/* ---- RLE / bit-packed hybrid -------------------------------------------------- */

static inline void put_varint(buf_t *b, uint64_t v)
{
    while (v >= 0x80) {
        b->p[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (uint8_t)v;
}

/*
 * Encodes n values of bit width bw (1..32) into b (which has room reserved by
 * the caller: see hybrid_bound). Runs of 8 or more equal values become RLE runs,
 * the rest bit-packed groups of 8 (the last group zero-padded; readers stop at
 * the page's value count).
 */
#define HYBRID_ENCODE(NAME, T)                                                                     \
    static void NAME(buf_t *b, const T *vals, size_t n, int bw)                                    \
    {                                                                                              \
        size_t i = 0, pend = 0;                                                                    \
        size_t vbytes = ((size_t)bw + 7) / 8;                                                      \
        while (i <= n) {                                                                           \
            size_t run = 0;                                                                        \
            if (i < n) {                                                                           \
                T x = vals[i];                                                                     \
                run = 1;                                                                           \
                while (i + run < n && vals[i + run] == x)                                          \
                    run++;                                                                         \
                if (run < 8) {                                                                     \
                    i += run;                                                                      \
                    continue;                                                                      \
                }                                                                                  \
                size_t rem = (i - pend) % 8;                                                       \
                if (rem != 0) { /* complete the pending group from the run */                      \
                    size_t take = 8 - rem;                                                         \
                    i += take;                                                                     \
                    run -= take;                                                                   \
                }                                                                                  \
            }                                                                                      \
            size_t stop = i < n ? i : n;                                                           \
            if (stop > pend) { /* bit-packed groups for [pend, stop) */                            \
                size_t groups = (stop - pend + 7) / 8;                                             \
                put_varint(b, (groups << 1) | 1);                                                  \
                uint64_t acc = 0;                                                                  \
                int nbits = 0;                                                                     \
                for (size_t k = pend; k < pend + groups * 8; k++) {                                \
                    uint64_t v = k < stop ? (uint64_t)vals[k] : 0;                                 \
                    acc |= v << nbits;                                                             \
                    nbits += bw;                                                                   \
                    while (nbits >= 8) {                                                           \
                        b->p[b->len++] = (uint8_t)acc;                                             \
                        acc >>= 8;                                                                 \
                        nbits -= 8;                                                                \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            if (i >= n)                                                                            \
                break;                                                                             \
            if (run > 0) {                                                                         \
                uint64_t v = (uint64_t)vals[i];                                                    \
                put_varint(b, (uint64_t)run << 1);                                                 \
                for (size_t k = 0; k < vbytes; k++)                                                \
                    b->p[b->len++] = (uint8_t)(v >> (8 * k));                                      \
                i += run;                                                                          \
            }                                                                                      \
            pend = i;                                                                              \
        }                                                                                          \
    }

HYBRID_ENCODE(hybrid_u8, uint8_t)
HYBRID_ENCODE(hybrid_u32, uint32_t)

/* Upper bound of the hybrid encoding of n values of width bw. */
static size_t hybrid_bound(size_t n, int bw)
{
    /* worst case: everything bit-packed, plus headers and padding */
    return (n + 8) * (size_t)bw / 8 + 16 * (n / 8 + 2) + 16;
}

static int bit_width(uint32_t max)
{
    int bw = 0;
    while (max > 0) {
        bw++;
        max >>= 1;
    }
    return bw;
}

size_t cdc_pq__hybrid_encode_u32(const uint32_t *vals, size_t n, int bw, uint8_t *out, size_t cap)
{
    buf_t b = {0};
    size_t len = 0;

    if (!buf_reserve(&b, hybrid_bound(n, bw)))
        return 0;
    hybrid_u32(&b, vals, n, bw);
    if (b.len <= cap) {
        memcpy(out, b.p, b.len);
        len = b.len;
    }
    buf_free(&b);
    return len;
}

/* ---- encoding a row group ----------------------------------------------------- */

static cdc_err_t compress_page(cdc_pq_writer_t *w, column_t *c, const uint8_t **data, size_t *len,
                               cdc_error_t *err)
{
    size_t bound, n;

    switch (w->opts.codec) {
    case CDC_PQ_CODEC_ZSTD:
        bound = ZSTD_compressBound(c->page.len);
        c->comp.len = 0;
        if (!buf_reserve(&c->comp, bound))
            return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        n = ZSTD_compress2(w->zctx, c->comp.p, bound, c->page.p, c->page.len);
        if (ZSTD_isError(n))
            return cdc_error_set(err, CDC_ERR_INTERNAL, "zstd compression failed: %s",
                                 ZSTD_getErrorName(n));
        *data = c->comp.p;
        *len = n;
        return CDC_OK;
    case CDC_PQ_CODEC_SNAPPY:
        bound = snappy_max_compressed_length(c->page.len);
        c->comp.len = 0;
        if (!buf_reserve(&c->comp, bound))
            return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        n = bound;
        if (snappy_compress((const char *)c->page.p, c->page.len, (char *)c->comp.p, &n) !=
            SNAPPY_OK)
            return cdc_error_set(err, CDC_ERR_INTERNAL, "snappy compression failed");
        *data = c->comp.p;
        *len = n;
        return CDC_OK;
    default:
        *data = c->page.p;
        *len = c->page.len;
        return CDC_OK;
    }
}

/* Emits a page's Thrift header (raw: its uncompressed length, body: its stored one). */
static cdc_err_t put_header(cdc_pq_writer_t *w, column_t *c, int page_type, int32_t num_values,
                            int encoding, size_t raw, size_t body, cdc_error_t *err)
{
    if (raw > INT32_MAX || body > INT32_MAX)
        return cdc_error_set(err, CDC_ERR_INVALID, "parquet page of column \"%s\" is too large",
                             c->field->name);
    cdc_thrift_reset(&c->hdr);
    cdc_thrift_struct_begin(&c->hdr);
    cdc_thrift_field_i32(&c->hdr, 1, page_type);
    cdc_thrift_field_i32(&c->hdr, 2, (int32_t)raw);
    cdc_thrift_field_i32(&c->hdr, 3, (int32_t)body);
    if (page_type == PAGE_DATA) {
        cdc_thrift_field_struct_begin(&c->hdr, 5);
        cdc_thrift_field_i32(&c->hdr, 1, num_values);
        cdc_thrift_field_i32(&c->hdr, 2, encoding);
        cdc_thrift_field_i32(&c->hdr, 3, ENC_RLE);
        cdc_thrift_field_i32(&c->hdr, 4, ENC_RLE);
        cdc_thrift_struct_end(&c->hdr);
    } else {
        cdc_thrift_field_struct_begin(&c->hdr, 7);
        cdc_thrift_field_i32(&c->hdr, 1, num_values);
        cdc_thrift_field_i32(&c->hdr, 2, ENC_PLAIN);
        cdc_thrift_struct_end(&c->hdr);
    }
    cdc_thrift_struct_end(&c->hdr);
    if (c->hdr.oom)
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    c->meta.uncompressed += (int64_t)(c->hdr.len + raw);
    c->meta.compressed += (int64_t)(c->hdr.len + body);
    return cdc_pq__emit(w, c->hdr.data, c->hdr.len, err);
}

/* Compresses c->page and emits header + body. */
static cdc_err_t put_page(cdc_pq_writer_t *w, column_t *c, int page_type, int32_t num_values,
                          int encoding, cdc_error_t *err)
{
    const uint8_t *body = NULL;
    size_t blen = 0;
    cdc_err_t rc = compress_page(w, c, &body, &blen, err);

    if (rc == CDC_OK)
        rc = put_header(w, c, page_type, num_values, encoding, c->page.len, blen, err);
    return rc == CDC_OK ? cdc_pq__emit(w, body, blen, err) : rc;
}

static inline uint32_t value_end(const column_t *c, size_t i);

/* zstd's streaming compression of n bytes at p into c->comp (reserved by the caller). */
static cdc_err_t zstd_feed(cdc_pq_writer_t *w, column_t *c, const void *p, size_t n,
                           ZSTD_EndDirective end, cdc_error_t *err)
{
    ZSTD_inBuffer in = {p, n, 0};
    ZSTD_outBuffer out = {c->comp.p, c->comp.cap, c->comp.len};
    size_t left;

    do {
        left = ZSTD_compressStream2(w->zctx, &out, &in, end);
        if (ZSTD_isError(left))
            return cdc_error_set(err, CDC_ERR_INTERNAL, "zstd compression failed: %s",
                                 ZSTD_getErrorName(left));
        if (out.pos == out.size && (in.pos < in.size || left > 0))
            return cdc_error_set(err, CDC_ERR_INTERNAL, "zstd output above its bound");
    } while (in.pos < in.size || (end == ZSTD_e_end && left > 0));
    c->comp.len = out.pos;
    return CDC_OK;
}

/*
 * A PLAIN byte-array data page of values [v, v1) holding a large value (docs/parquet.md,
 * "Large values"): c->page holds only its levels; the values are compressed (zstd) or
 * emitted (none) from the column's buffer as they are, so that the page is not copied
 * once more before compression. Snappy has no streaming form: its page is put together.
 */
static cdc_err_t put_large_page(cdc_pq_writer_t *w, column_t *c, int32_t num_rows, size_t v,
                                size_t v1, cdc_error_t *err)
{
    uint32_t start = v ? value_end(c, v - 1) : 0, end = value_end(c, v1 - 1), prev = start;
    size_t raw = c->page.len + 4 * (v1 - v) + (end - start);
    uint8_t len[4];
    cdc_err_t rc;

    if (w->opts.codec == CDC_PQ_CODEC_ZSTD) {
        c->comp.len = 0;
        if (!buf_reserve(&c->comp, ZSTD_compressBound(raw)))
            return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        ZSTD_CCtx_reset(w->zctx, ZSTD_reset_session_only);
        ZSTD_CCtx_setPledgedSrcSize(w->zctx, raw);
        rc = zstd_feed(w, c, c->page.p, c->page.len, ZSTD_e_continue, err);
        for (size_t i = v; i < v1 && rc == CDC_OK; i++) {
            uint32_t e = value_end(c, i);
            put_le32(len, e - prev);
            rc = zstd_feed(w, c, len, 4, ZSTD_e_continue, err);
            if (rc == CDC_OK)
                rc = zstd_feed(w, c, c->values.p + prev, e - prev, ZSTD_e_continue, err);
            prev = e;
        }
        if (rc == CDC_OK)
            rc = zstd_feed(w, c, NULL, 0, ZSTD_e_end, err);
        if (rc == CDC_OK)
            rc = put_header(w, c, PAGE_DATA, num_rows, ENC_PLAIN, raw, c->comp.len, err);
        return rc == CDC_OK ? cdc_pq__emit(w, c->comp.p, c->comp.len, err) : rc;
    }
    if (w->opts.codec == CDC_PQ_CODEC_NONE) {
        rc = put_header(w, c, PAGE_DATA, num_rows, ENC_PLAIN, raw, raw, err);
        if (rc == CDC_OK)
            rc = cdc_pq__emit(w, c->page.p, c->page.len, err);
        for (size_t i = v; i < v1 && rc == CDC_OK; i++) {
            uint32_t e = value_end(c, i);
            put_le32(len, e - prev);
            rc = cdc_pq__emit(w, len, 4, err);
            if (rc == CDC_OK)
                rc = cdc_pq__emit(w, c->values.p + prev, e - prev, err);
            prev = e;
        }
        return rc;
    }
    if (!buf_reserve(&c->page, 4 * (v1 - v) + (end - start)))
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = v; i < v1; i++) {
        uint32_t e = value_end(c, i);
        put_le32(c->page.p + c->page.len, e - prev);
        memcpy(c->page.p + c->page.len + 4, c->values.p + prev, e - prev);
        c->page.len += 4 + (e - prev);
        prev = e;
    }
    return put_page(w, c, PAGE_DATA, num_rows, ENC_PLAIN, err);
}

static inline uint32_t value_end(const column_t *c, size_t i)
{
    uint32_t e;
    memcpy(&e, c->offs.p + 4 * i, 4);
    return e;
}

/* Encodes the whole buffered row group of column c and emits its pages (offsets in
 * c->meta relative to the column chunk's start). */
cdc_err_t cdc_pq_encode_column(cdc_pq_writer_t *w, column_t *c, int64_t nrows, cdc_error_t *err)
{
    const uint8_t *defs = c->max_def > 0 ? c->defs.p : NULL;
    const uint8_t *reps = c->max_rep > 0 ? c->reps.p : NULL;
    int dbw = bit_width((uint32_t)c->max_def), rbw = bit_width((uint32_t)c->max_rep);
    uint8_t full = (uint8_t)c->max_def;
    size_t nent = (size_t)c->nentries;
    bool dict = c->is_bytes && c->dict_on && c->ndict > 0;
    int bw = dict ? bit_width(c->ndict - 1) : 0;
    size_t page_bytes = w->opts.page_bytes;
    size_t r = 0, v = 0;
    uint64_t base = w->offset;
    cdc_err_t rc;

    if (bw == 0)
        bw = 1;
    memset(&c->meta, 0, sizeof(c->meta));
    c->meta.dict_page_offset = -1;
    c->meta.num_values = c->nentries;
    (void)nrows;
    if (dict) {
        /* dictionary page: PLAIN byte arrays */
        c->page.len = 0;
        if (!buf_reserve(&c->page, c->dict_data.len + 4 * (size_t)c->ndict))
            return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < c->ndict; i++) {
            size_t len;
            const uint8_t *p = dict_entry(c, i, &len);
            put_le32(c->page.p + c->page.len, (uint32_t)len);
            memcpy(c->page.p + c->page.len + 4, p, len);
            c->page.len += 4 + len;
        }
        c->meta.dict_page_offset = 0;
        rc = put_page(w, c, PAGE_DICTIONARY, (int32_t)c->ndict, ENC_PLAIN, err);
        if (rc != CDC_OK)
            return rc;
        c->meta.dict_used = true;
    } else {
        c->meta.plain_used = true;
    }
    c->meta.data_page_offset = (int64_t)(w->offset - base);
    while (r < nent) {
        size_t r1 = r, v1 = v, bytes = 0;
        /* pick the entries of this page; a page starts at a row (repetition level 0) */
        if (defs == NULL && !c->is_bytes) {
            size_t per = page_bytes / (size_t)c->width;
            if (per == 0)
                per = 1;
            r1 = r + per < nent ? r + per : nent;
            v1 = r1;
        } else {
            while (r1 < nent && (bytes < page_bytes || (reps != NULL && reps[r1] != 0))) {
                if (defs == NULL || defs[r1] == full) {
                    if (dict)
                        bytes += 4;
                    else if (c->is_bytes)
                        bytes += 4 + value_end(c, v1) - (v1 ? value_end(c, v1 - 1) : 0);
                    else
                        bytes += (size_t)c->width;
                    v1++;
                }
                r1++;
            }
        }
        size_t nv = v1 - v, nr = r1 - r;
        c->page.len = 0;
        if (reps != NULL) {
            if (!buf_reserve(&c->page, 4 + hybrid_bound(nr, rbw)))
                return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            c->page.len = 4;
            hybrid_u8(&c->page, reps + r, nr, rbw);
            put_le32(c->page.p, (uint32_t)(c->page.len - 4));
        }
        if (defs != NULL) {
            size_t at = c->page.len;
            if (!buf_reserve(&c->page, 4 + hybrid_bound(nr, dbw)))
                return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            c->page.len += 4;
            hybrid_u8(&c->page, defs + r, nr, dbw);
            put_le32(c->page.p + at, (uint32_t)(c->page.len - at - 4));
        }
        if (dict) {
            if (!buf_reserve(&c->page, 1 + hybrid_bound(nv, bw)))
                return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            c->page.p[c->page.len++] = (uint8_t)bw;
            hybrid_u32(&c->page, (const uint32_t *)c->idx.p + v, nv, bw);
        } else if (c->is_bytes && nv > 0 &&
                   value_end(c, v1 - 1) - (v ? value_end(c, v - 1) : 0) >= PQ_LARGE_PAGE) {
            rc = put_large_page(w, c, (int32_t)nr, v, v1, err);
            if (rc != CDC_OK)
                return rc;
            r = r1;
            v = v1;
            continue;
        } else if (c->is_bytes) {
            uint32_t start = v ? value_end(c, v - 1) : 0, end = nv ? value_end(c, v1 - 1) : start;
            if (!buf_reserve(&c->page, 4 * nv + (end - start)))
                return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            uint8_t *o = c->page.p + c->page.len;
            uint32_t prev = start;
            for (size_t i = v; i < v1; i++) {
                uint32_t e = value_end(c, i);
                put_le32(o, e - prev);
                memcpy(o + 4, c->values.p + prev, e - prev);
                o += 4 + (e - prev);
                prev = e;
            }
            c->page.len = (size_t)(o - c->page.p);
        } else if (c->ptype == PT_BOOLEAN) {
            if (!buf_reserve(&c->page, nv / 8 + 1))
                return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            uint8_t *o = c->page.p + c->page.len;
            const uint8_t *src = c->values.p + v;
            size_t nb = (nv + 7) / 8;
            memset(o, 0, nb);
            for (size_t i = 0; i < nv; i++)
                o[i >> 3] |= (uint8_t)(src[i] << (i & 7));
            c->page.len += nb;
        } else {
            if (!buf_put(&c->page, c->values.p + v * (size_t)c->width, nv * (size_t)c->width))
                return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        }
        rc = put_page(w, c, PAGE_DATA, (int32_t)nr, dict ? ENC_RLE_DICTIONARY : ENC_PLAIN, err);
        if (rc != CDC_OK)
            return rc;
        r = r1;
        v = v1;
    }
    /* statistics for the footer */
    cdc_pq_column_chunk_stats(c);
    return CDC_OK;
}
