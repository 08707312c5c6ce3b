/*
 * Pages of a column chunk, for the Parquet reader (see parquet_read_int.h): each
 * page is a Thrift page header followed by its body, compressed with the
 * chunk's codec (none, snappy, zstd). A chunk may start with a dictionary page
 * (PLAIN values); its data pages (v1 or v2) hold the definition levels of an
 * optional column in the RLE/bit-packed hybrid (behind a 4-byte length in v1,
 * uncompressed and unprefixed in v2), then the non-null values, PLAIN or as
 * dictionary indices (RLE_DICTIONARY, or the older PLAIN_DICTIONARY). Values are
 * decoded densely into the page's cells and then spread over the rows by the
 * levels. Every length and count is checked against the bytes present.
 */
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/iceberg/decimal.h"
#include "common/iceberg/parquet_read_int.h"
#include "common/iceberg/thrift.h"

/* The chunk being decoded. */
typedef struct ctx {
    cdc_pq_reader_t *r;
    size_t col, rg;
    const rcol_t *c;
    const cdc_ice_field_t *f;
    int32_t codec;
    bool has_dict;
    cdc_error_t *e;
} ctx_t;

/* A page header: its type and sizes, and the integers of its type's header struct. */
typedef struct page {
    int32_t type, usize, csize;
    int sub; /* field id of the type's header struct: 5 data, 7 dictionary, 8 data v2 */
    int64_t h[8];
    uint32_t seen; /* bits of h present */
} page_t;

static cdc_err_t corrupt(const ctx_t *x, const char *what)
{
    return cdc_error_set(x->e, CDC_ERR_CORRUPT, "parquet column \"%s\", row group %zu: %s",
                         x->f->name, x->rg, what);
}

static cdc_err_t unsupported(const ctx_t *x, const char *what, int value)
{
    return cdc_error_set(x->e, CDC_ERR_UNSUPPORTED,
                         "parquet column \"%s\", row group %zu: %s %d is not supported", x->f->name,
                         x->rg, what, value);
}

static bool read_page_header(cdc_thrift_reader_t *t, page_t *pg)
{
    int16_t last = 0, fid = 0;
    uint8_t type;
    uint32_t seen = 0;
    bool ok;

    memset(pg, 0, sizeof(*pg));
    for (;;) {
        if (!cdc_thrift_read_field_header(t, &last, &fid, &type))
            return false;
        if (type == CDC_THRIFT_STOP)
            break;
        if (fid >= 1 && fid <= 3 && type == CDC_THRIFT_I32) {
            int32_t *dst = fid == 1 ? &pg->type : fid == 2 ? &pg->usize : &pg->csize;
            ok = cdc_thrift_read_i32(t, dst);
            seen |= 1u << fid;
        } else if ((fid == 5 || fid == 7 || fid == 8) && type == CDC_THRIFT_STRUCT) {
            pg->sub = fid;
            ok = cdc_thrift_read_struct_ints(t, pg->h, &pg->seen, 8);
        } else {
            ok = cdc_thrift_skip(t, type);
        }
        if (!ok)
            return false;
    }
    return seen == 0xE && pg->usize >= 0 && pg->csize >= 0;
}

/* ---- decompression ------------------------------------------------------------ */

/*
 * The ulen uncompressed bytes of src[0..clen). Uncompressed bytes are the file's own;
 * others go to a block the column keeps (keep: byte-array cells will point into them) or
 * to the reader's scratch page.
 */
static cdc_err_t decompress(ctx_t *x, const uint8_t *src, size_t clen, size_t ulen, bool keep,
                            const uint8_t **out)
{
    cdc_pq_reader_t *r = x->r;
    uint8_t *dst;
    size_t n;

    if (x->codec == PQ_CODEC_UNCOMPRESSED) {
        if (clen != ulen)
            return corrupt(x, "uncompressed page whose sizes differ");
        *out = src;
        return CDC_OK;
    }
    if (x->codec != PQ_CODEC_SNAPPY && x->codec != PQ_CODEC_ZSTD)
        return unsupported(x, "compression codec", x->codec);
    if (x->codec == PQ_CODEC_SNAPPY &&
        (snappy_uncompressed_length((const char *)src, clen, &n) != SNAPPY_OK || n != ulen))
        return corrupt(x, "snappy page whose length differs from its header's");
    if (x->codec == PQ_CODEC_ZSTD) {
        unsigned long long fsize = ZSTD_getFrameContentSize(src, clen);
        if (fsize == ZSTD_CONTENTSIZE_ERROR || (fsize != ZSTD_CONTENTSIZE_UNKNOWN && fsize > ulen))
            return corrupt(x, "zstd page that is not a frame of its header's length");
    }
    if (keep) {
        rblocks_t *b = &r->blocks[x->col];
        if (cdc_array_reserve(b->p, b->cap, b->n + 1, 16) != CDC_OK ||
            (dst = malloc(ulen ? ulen : 1)) == NULL)
            return cdc_error_set(x->e, CDC_ERR_NOMEM, "out of memory");
        b->p[b->n++] = dst;
    } else {
        r->page.len = 0;
        if (!buf_reserve(&r->page, ulen ? ulen : 1))
            return cdc_error_set(x->e, CDC_ERR_NOMEM, "out of memory");
        dst = r->page.p;
    }
    if (x->codec == PQ_CODEC_SNAPPY) {
        n = ulen;
        if (snappy_uncompress((const char *)src, clen, (char *)dst, &n) != SNAPPY_OK || n != ulen)
            return corrupt(x, "snappy page does not decompress");
    } else {
        if (r->zctx == NULL && (r->zctx = ZSTD_createDCtx()) == NULL)
            return cdc_error_set(x->e, CDC_ERR_NOMEM, "could not create zstd context");
        n = ZSTD_decompressDCtx(r->zctx, dst, ulen, src, clen);
        if (ZSTD_isError(n) || n != ulen)
            return corrupt(x, "zstd page does not decompress to its header's length");
    }
    *out = dst;
    return CDC_OK;
}

/* ---- RLE / bit-packed hybrid -------------------------------------------------- */

/*
 * Decodes n values of bit width bw (0..32) of the RLE/bit-packed hybrid in p[0..len) into
 * out. A last bit-packed run may stop at the last value needed.
 */
static bool hybrid_decode(const uint8_t *p, size_t len, int bw, uint32_t *out, size_t n)
{
    cdc_thrift_reader_t t; /* run headers are ULEB128, the Thrift varint */
    size_t got = 0, vbytes = ((size_t)bw + 7) / 8;
    uint64_t mask = ((uint64_t)1 << bw) - 1;

    if (bw == 0) {
        memset(out, 0, n * sizeof(uint32_t));
        return true;
    }
    cdc_thrift_reader_init(&t, p, len);
    while (got < n) {
        uint64_t h;
        if (!cdc_thrift_read_varint(&t, &h))
            return false;
        size_t left = cdc_thrift_reader_left(&t);
        if ((h & 1) == 0) { /* RLE run: count, then the value in vbytes little-endian */
            uint64_t v = 0;
            if (vbytes > left)
                return false;
            for (size_t k = 0; k < vbytes; k++)
                v |= (uint64_t)t.p[k] << (8 * k);
            t.p += vbytes;
            if (v > mask)
                return false;
            size_t take = (h >> 1) < n - got ? (size_t)(h >> 1) : n - got;
            for (size_t i = 0; i < take; i++)
                out[got++] = (uint32_t)v;
        } else { /* bit-packed groups of 8 values */
            uint64_t groups = h >> 1;
            size_t take = groups < (n - got + 7) / 8 ? (size_t)groups * 8 : n - got;
            size_t need = (take * (size_t)bw + 7) / 8;
            const uint8_t *q = t.p;
            uint64_t acc = 0;
            int nbits = 0;
            if (need > left)
                return false;
            for (size_t i = 0; i < take; i++) {
                while (nbits < bw) {
                    acc |= (uint64_t)*q++ << nbits;
                    nbits += 8;
                }
                out[got++] = (uint32_t)(acc & mask);
                acc >>= bw;
                nbits -= bw;
            }
            /* a group of 8 values takes bw bytes; the last groups may be cut (need fits) */
            t.p += groups <= left / (size_t)bw ? (size_t)groups * (size_t)bw : left;
        }
    }
    return true;
}

static bool reserve_u32(uint32_t **a, size_t *cap, size_t n)
{
    return cdc_array_reserve(*a, *cap, n ? n : 1, 256) == CDC_OK;
}

/* ---- values ------------------------------------------------------------------- */

/* Decodes n PLAIN values from p[0..len) into the cells dst[0..n). */
static bool plain_decode(const ctx_t *x, const uint8_t *p, size_t len, size_t n,
                         cdc_ice_value_t *dst)
{
    cdc_ice_type_t type = x->f->type;
    size_t w;

    memset(dst, 0, n * sizeof(*dst));
    switch (x->c->ptype) {
    case PT_BOOLEAN:
        if ((n + 7) / 8 > len)
            return false;
        for (size_t i = 0; i < n; i++)
            dst[i].v.b = (p[i >> 3] >> (i & 7)) & 1;
        return true;
    case PT_BYTE_ARRAY:
        for (size_t i = 0; i < n; i++) {
            if (len < 4)
                return false;
            size_t l = get_le32(p);
            if (l > len - 4)
                return false;
            if (type == CDC_ICE_DECIMAL) {
                if (l < 1 || l > 16)
                    return false;
                dst[i].v.dec = cdc_ice_decimal_from_be(p + 4, l);
            } else {
                dst[i].v.bytes.ptr = p + 4;
                dst[i].v.bytes.len = l;
            }
            p += 4 + l;
            len -= 4 + l;
        }
        return true;
    case PT_INT32:
    case PT_FLOAT:
        w = 4;
        break;
    case PT_INT64:
    case PT_DOUBLE:
        w = 8;
        break;
    case PT_FLBA:
        w = (size_t)x->c->type_length;
        break;
    default:
        return false;
    }
    if (n > len / w)
        return false;
    for (size_t i = 0; i < n; i++, p += w) {
        uint32_t u32;
        uint64_t u64;
        switch (type) {
        case CDC_ICE_INT:
        case CDC_ICE_DATE:
            dst[i].v.i32 = (int32_t)get_le32(p);
            break;
        case CDC_ICE_LONG:
        case CDC_ICE_TIME:
        case CDC_ICE_TIMESTAMP:
        case CDC_ICE_TIMESTAMPTZ:
            dst[i].v.i64 = (int64_t)get_le64(p);
            break;
        case CDC_ICE_FLOAT:
            u32 = get_le32(p);
            memcpy(&dst[i].v.f32, &u32, 4);
            break;
        case CDC_ICE_DOUBLE:
            u64 = get_le64(p);
            memcpy(&dst[i].v.f64, &u64, 8);
            break;
        case CDC_ICE_DECIMAL:
            if (w == 4 && x->c->ptype == PT_INT32)
                dst[i].v.dec = (int32_t)get_le32(p);
            else if (w == 8 && x->c->ptype == PT_INT64)
                dst[i].v.dec = (int64_t)get_le64(p);
            else if (w <= 16)
                dst[i].v.dec = cdc_ice_decimal_from_be(p, w);
            else
                return false;
            break;
        case CDC_ICE_UUID:
            if (w != 16)
                return false;
            memcpy(dst[i].v.uuid, p, 16);
            break;
        default:
            return false;
        }
    }
    return true;
}

/* Dictionary indices (a bit-width byte, then the hybrid) of nn values into dst. */
static cdc_err_t dict_decode(ctx_t *x, const uint8_t *p, size_t len, size_t nn,
                             cdc_ice_value_t *dst)
{
    cdc_pq_reader_t *r = x->r;

    if (!x->has_dict)
        return corrupt(x, "dictionary-encoded page without a dictionary page");
    if (nn == 0)
        return CDC_OK;
    if (len < 1 || p[0] > 32)
        return corrupt(x, "dictionary index bit width is missing or above 32");
    if (!reserve_u32(&r->idx, &r->idx_cap, nn))
        return cdc_error_set(x->e, CDC_ERR_NOMEM, "out of memory");
    if (!hybrid_decode(p + 1, len - 1, p[0], r->idx, nn))
        return corrupt(x, "dictionary indices are truncated or malformed");
    for (size_t i = 0; i < nn; i++) {
        if (r->idx[i] >= r->ndict)
            return corrupt(x, "dictionary index past the dictionary");
        dst[i] = r->dict[r->idx[i]];
    }
    return CDC_OK;
}

/* The values of a data page (nn of them, encoding enc) into dst[0..nn). */
static cdc_err_t values_decode(ctx_t *x, int64_t enc, const uint8_t *p, size_t len, size_t nn,
                               cdc_ice_value_t *dst)
{
    cdc_pq_reader_t *r = x->r;

    switch (enc) {
    case ENC_PLAIN:
        if (!plain_decode(x, p, len, nn, dst))
            return corrupt(x, "PLAIN values are truncated or malformed");
        return CDC_OK;
    case ENC_PLAIN_DICTIONARY:
    case ENC_RLE_DICTIONARY:
        return dict_decode(x, p, len, nn, dst);
    case ENC_RLE:
        if (x->c->ptype != PT_BOOLEAN)
            break;
        /* booleans: a 4-byte length, then the hybrid of width 1 */
        if (!reserve_u32(&r->idx, &r->idx_cap, nn))
            return cdc_error_set(x->e, CDC_ERR_NOMEM, "out of memory");
        if (len < 4 || get_le32(p) > len - 4 || !hybrid_decode(p + 4, get_le32(p), 1, r->idx, nn))
            return corrupt(x, "RLE booleans are truncated or malformed");
        memset(dst, 0, nn * sizeof(*dst));
        for (size_t i = 0; i < nn; i++)
            dst[i].v.b = r->idx[i] != 0;
        return CDC_OK;
    default:
        break;
    }
    return unsupported(x, "value encoding", (int)enc);
}

/* ---- pages -------------------------------------------------------------------- */

static cdc_err_t dictionary_page(ctx_t *x, const page_t *pg, const uint8_t *body)
{
    cdc_pq_reader_t *r = x->r;
    const uint8_t *p;
    cdc_err_t rc;
    bool keep = x->c->ptype == PT_BYTE_ARRAY && x->f->type != CDC_ICE_DECIMAL;

    if (x->has_dict)
        return corrupt(x, "second dictionary page");
    if (pg->sub != 7 || (pg->seen & 1) == 0 || pg->h[0] < 0 ||
        (uint64_t)pg->h[0] > (uint64_t)pg->usize * 8)
        return corrupt(x, "dictionary page header is malformed");
    if ((pg->seen & 2) && pg->h[1] != ENC_PLAIN && pg->h[1] != ENC_PLAIN_DICTIONARY)
        return unsupported(x, "dictionary encoding", (int)pg->h[1]);
    rc = decompress(x, body, (size_t)pg->csize, (size_t)pg->usize, keep, &p);
    if (rc != CDC_OK)
        return rc;
    r->ndict = (size_t)pg->h[0];
    if (cdc_array_reserve(r->dict, r->dict_cap, r->ndict ? r->ndict : 1, 64) != CDC_OK)
        return cdc_error_set(x->e, CDC_ERR_NOMEM, "out of memory");
    if (!plain_decode(x, p, (size_t)pg->usize, r->ndict, r->dict))
        return corrupt(x, "dictionary page values are truncated or malformed");
    x->has_dict = true;
    return CDC_OK;
}

/* A data page (v1 or v2) of n rows into dst[0..n). */
static cdc_err_t data_page(ctx_t *x, const page_t *pg, const uint8_t *body, size_t n,
                           cdc_ice_value_t *dst)
{
    cdc_pq_reader_t *r = x->r;
    bool v2 = pg->sub == 8, optional = x->c->repetition == REP_OPTIONAL;
    int64_t enc = v2 ? pg->h[3] : pg->h[1];
    bool keep = x->c->ptype == PT_BYTE_ARRAY && x->f->type != CDC_ICE_DECIMAL && enc == ENC_PLAIN;
    const uint8_t *levels = NULL, *vals;
    size_t levels_len = 0, vlen, nn = n;
    cdc_err_t rc;

    if (v2) {
        /* levels uncompressed before the values; a flat column has no repetition levels */
        int64_t dl = pg->h[4], rl = pg->h[5];
        bool compressed = (pg->seen & (1u << 6)) == 0 || pg->h[6] != 0;
        if ((pg->seen & 0x3F) != 0x3F || dl < 0 || rl != 0 || dl > pg->csize || dl > pg->usize)
            return corrupt(x, "data page v2 header is malformed");
        levels = body;
        levels_len = (size_t)dl;
        if (!compressed && pg->csize != pg->usize)
            return corrupt(x, "uncompressed page whose sizes differ");
        if (compressed) {
            rc = decompress(x, body + dl, (size_t)(pg->csize - dl), (size_t)(pg->usize - dl), keep,
                            &vals);
            if (rc != CDC_OK)
                return rc;
        } else {
            vals = body + dl;
        }
        vlen = (size_t)(pg->usize - dl);
    } else {
        if ((pg->seen & 3) != 3)
            return corrupt(x, "data page header is malformed");
        if ((pg->seen & 4) && pg->h[2] != ENC_RLE && optional)
            return unsupported(x, "definition level encoding", (int)pg->h[2]);
        rc = decompress(x, body, (size_t)pg->csize, (size_t)pg->usize, keep, &vals);
        if (rc != CDC_OK)
            return rc;
        vlen = (size_t)pg->usize;
        if (optional) {
            if (vlen < 4 || get_le32(vals) > vlen - 4)
                return corrupt(x, "definition levels are truncated");
            levels = vals + 4;
            levels_len = get_le32(vals);
            vals += 4 + levels_len;
            vlen -= 4 + levels_len;
        }
    }
    if (optional) {
        if (!reserve_u32(&r->levels, &r->levels_cap, n))
            return cdc_error_set(x->e, CDC_ERR_NOMEM, "out of memory");
        if (!hybrid_decode(levels, levels_len, 1, r->levels, n))
            return corrupt(x, "definition levels are truncated or malformed");
        nn = 0;
        for (size_t i = 0; i < n; i++)
            nn += r->levels[i];
    }
    if (v2 && (int64_t)(n - nn) != pg->h[1])
        return corrupt(x, "data page v2 null count differs from its definition levels");
    rc = values_decode(x, enc, vals, vlen, nn, dst);
    if (rc != CDC_OK || !optional)
        return rc;
    /* spread the dense values over the rows, from the end (a value only moves right) */
    for (size_t i = n, k = nn; i-- > 0;) {
        if (r->levels[i])
            dst[i] = dst[--k];
        else
            dst[i] = (cdc_ice_value_t){.is_null = true};
    }
    return CDC_OK;
}

cdc_err_t cdc_pq_read_chunk(cdc_pq_reader_t *r, size_t col, size_t rg, cdc_ice_value_t *out,
                            cdc_error_t *e)
{
    const rchunk_t *ch = &r->chunks[rg * r->ncols + col];
    ctx_t x = {.r = r,
               .col = col,
               .rg = rg,
               .c = &r->cols[col],
               .f = r->cols[col].field,
               .codec = ch->codec,
               .e = e};
    size_t pos = ch->start, end = ch->start + ch->size, rows = (size_t)r->rg_rows[rg], got = 0;
    cdc_thrift_reader_t t;
    page_t pg;
    cdc_err_t rc;

    r->ndict = 0;
    while (got < rows) {
        if (pos >= end)
            return corrupt(&x, "column chunk ends before its row group's last row");
        cdc_thrift_reader_init(&t, r->data + pos, end - pos);
        if (!read_page_header(&t, &pg))
            return corrupt(&x, "page header is truncated or malformed");
        pos = (size_t)(t.p - r->data);
        if ((size_t)pg.csize > end - pos)
            return corrupt(&x, "page runs past the end of its column chunk");
        const uint8_t *body = r->data + pos;
        pos += (size_t)pg.csize;
        if (pg.type == PAGE_DICTIONARY) {
            rc = dictionary_page(&x, &pg, body);
        } else if (pg.type == PAGE_DATA || pg.type == PAGE_DATA_V2) {
            if (pg.sub != (pg.type == PAGE_DATA ? 5 : 8) || pg.h[0] < 0 ||
                (uint64_t)pg.h[0] > rows - got)
                return corrupt(&x, "data page header is malformed or holds more rows than its "
                                   "row group");
            rc = data_page(&x, &pg, body, (size_t)pg.h[0], out + got);
            got += (size_t)pg.h[0];
        } else {
            rc = CDC_OK; /* index pages and others carry no values */
        }
        if (rc != CDC_OK)
            return rc;
    }
    return CDC_OK;
}

/* ---- nested leaves ------------------------------------------------------------ */

static int level_width(int max)
{
    int bw = 0;
    while (max > 0) {
        bw++;
        max >>= 1;
    }
    return bw;
}

/* A length-prefixed hybrid of n levels of width bw at *p into out; moves *p past it. */
static bool levels_decode(ctx_t *x, const uint8_t **p, size_t *len, int bw, size_t n, uint8_t *out)
{
    cdc_pq_reader_t *r = x->r;
    size_t l;
    if (*len < 4 || (l = get_le32(*p)) > *len - 4 || !reserve_u32(&r->levels, &r->levels_cap, n) ||
        !hybrid_decode(*p + 4, l, bw, r->levels, n))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (r->levels[i] > 255)
            return false;
        out[i] = (uint8_t)r->levels[i];
    }
    *p += 4 + l;
    *len -= 4 + l;
    return true;
}

/* A data page v1 of n entries of a nested leaf, appended to out. */
static cdc_err_t nested_page(ctx_t *x, const page_t *pg, const uint8_t *body, size_t n,
                             rlevels_t *out)
{
    int64_t enc = pg->h[1];
    bool keep = x->c->ptype == PT_BYTE_ARRAY && x->f->type != CDC_ICE_DECIMAL && enc == ENC_PLAIN;
    const uint8_t *vals;
    size_t vlen, nn = 0;
    cdc_err_t rc;

    if ((pg->seen & 3) != 3)
        return corrupt(x, "data page header is malformed");
    rc = decompress(x, body, (size_t)pg->csize, (size_t)pg->usize, keep, &vals);
    if (rc != CDC_OK)
        return rc;
    vlen = (size_t)pg->usize;
    if (x->c->max_rep > 0 &&
        !levels_decode(x, &vals, &vlen, level_width(x->c->max_rep), n, out->rep + out->n))
        return corrupt(x, "repetition levels are truncated or malformed");
    if (x->c->max_rep == 0)
        memset(out->rep + out->n, 0, n);
    if (x->c->max_def > 0 &&
        !levels_decode(x, &vals, &vlen, level_width(x->c->max_def), n, out->def + out->n))
        return corrupt(x, "definition levels are truncated or malformed");
    if (x->c->max_def == 0)
        memset(out->def + out->n, 0, n);
    for (size_t i = 0; i < n; i++) {
        if (out->def[out->n + i] > x->c->max_def || out->rep[out->n + i] > x->c->max_rep)
            return corrupt(x, "a level above its column's maximum");
        nn += out->def[out->n + i] == x->c->max_def;
    }
    if (out->n == 0 && n > 0 && out->rep[0] != 0)
        return corrupt(x, "a column chunk that does not start a row");
    rc = values_decode(x, enc, vals, vlen, nn, out->vals + out->nv);
    if (rc != CDC_OK)
        return rc;
    out->n += n;
    out->nv += nn;
    return CDC_OK;
}

cdc_err_t cdc_pq_read_levels(cdc_pq_reader_t *r, size_t col, size_t rg, rlevels_t *out,
                             cdc_error_t *e)
{
    const rchunk_t *ch = &r->chunks[rg * r->ncols + col];
    ctx_t x = {.r = r,
               .col = col,
               .rg = rg,
               .c = &r->cols[col],
               .f = r->cols[col].field,
               .codec = ch->codec,
               .e = e};
    size_t pos = ch->start, end = ch->start + ch->size, total = (size_t)ch->values;
    cdc_thrift_reader_t t;
    page_t pg;
    cdc_err_t rc = CDC_OK;

    memset(out, 0, sizeof(*out));
    out->rep = malloc(total ? total : 1);
    out->def = malloc(total ? total : 1);
    out->vals = calloc(total ? total : 1, sizeof(*out->vals));
    if (out->rep == NULL || out->def == NULL || out->vals == NULL)
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    r->ndict = 0;
    while (rc == CDC_OK && out->n < total) {
        if (pos >= end) {
            rc = corrupt(&x, "column chunk ends before its last value");
            break;
        }
        cdc_thrift_reader_init(&t, r->data + pos, end - pos);
        if (!read_page_header(&t, &pg)) {
            rc = corrupt(&x, "page header is truncated or malformed");
            break;
        }
        pos = (size_t)(t.p - r->data);
        if ((size_t)pg.csize > end - pos) {
            rc = corrupt(&x, "page runs past the end of its column chunk");
            break;
        }
        const uint8_t *body = r->data + pos;
        pos += (size_t)pg.csize;
        if (pg.type == PAGE_DICTIONARY)
            rc = dictionary_page(&x, &pg, body);
        else if (pg.type == PAGE_DATA_V2)
            rc = unsupported(&x, "data page v2 in a nested column", 0);
        else if (pg.type == PAGE_DATA)
            rc = pg.sub != 5 || pg.h[0] < 0 || (uint64_t)pg.h[0] > total - out->n
                     ? corrupt(&x, "data page header is malformed or holds more values than its "
                                   "column chunk")
                     : nested_page(&x, &pg, body, (size_t)pg.h[0], out);
    }
    if (rc != CDC_OK) {
        free(out->rep);
        free(out->def);
        free(out->vals);
        memset(out, 0, sizeof(*out));
    }
    return rc;
}
