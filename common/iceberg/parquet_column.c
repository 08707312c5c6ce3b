/*
 * Buffering a row group, column by column (see parquet_int.h): appending rows
 * (cdc_pq_writer_append), dictionaries of byte-array columns with their fallback to
 * PLAIN, running statistics per row group and per file, and their encodings as
 * Parquet column statistics and as Iceberg bounds.
 *
 * A call circle of three files, one concept split by part (docs/development.md, "Call
 * circles"): parquet.c drives row groups and pages over the columns (parquet_column.c)
 * and their encoding (parquet_encode.c); a column past its page budget has its row group
 * written (cdc_pq_write_row_group), and encoded pages go out through the file's sink in
 * parquet.c (cdc_pq__emit).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/iceberg/parquet_int.h"

/* ---- column setup ------------------------------------------------------------- */

cdc_err_t cdc_pq_column_init(column_t *c, const cdc_ice_field_t *f, const cdc_pq_options_t *opts,
                             cdc_error_t *err)
{
    memset(c, 0, sizeof(*c));
    c->field = f;
    c->optional = !f->required;
    c->max_def = c->optional ? 1 : 0;
    c->path = c->path1;
    c->path[0] = f->name;
    c->npath = 1;
    cdc_thrift_init(&c->hdr);
    switch (f->type) {
    case CDC_ICE_BOOLEAN:
        c->ptype = PT_BOOLEAN;
        c->width = 1;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        c->ptype = PT_INT32;
        c->width = 4;
        break;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        c->ptype = PT_INT64;
        c->width = 8;
        break;
    case CDC_ICE_FLOAT:
        c->ptype = PT_FLOAT;
        c->width = 4;
        break;
    case CDC_ICE_DOUBLE:
        c->ptype = PT_DOUBLE;
        c->width = 8;
        break;
    case CDC_ICE_DECIMAL:
        if (f->precision < 1 || f->precision > 38 || f->scale < 0 || f->scale > f->precision)
            return cdc_error_set(err, CDC_ERR_INVALID, "column \"%s\" has invalid decimal(%d,%d)",
                                 f->name, (int)f->precision, (int)f->scale);
        c->dec_limit = cdc_ice_decimal_limit(f->precision);
        if (f->precision <= 9) {
            c->ptype = PT_INT32;
            c->width = 4;
        } else if (f->precision <= 18) {
            c->ptype = PT_INT64;
            c->width = 8;
        } else {
            c->ptype = PT_FLBA;
            c->type_length = cdc_ice_decimal_fixed_len(f->precision);
            c->width = c->type_length;
        }
        break;
    case CDC_ICE_UUID:
        c->ptype = PT_FLBA;
        c->type_length = 16;
        c->width = 16;
        break;
    case CDC_ICE_STRING:
    case CDC_ICE_BINARY:
        c->ptype = PT_BYTE_ARRAY;
        c->is_bytes = true;
        c->dict_on = opts->dictionary;
        break;
    default:
        return cdc_error_set(err, CDC_ERR_UNSUPPORTED, "column \"%s\" has unsupported type %d",
                             f->name, (int)f->type);
    }
    return CDC_OK;
}

void cdc_pq_column_free(column_t *c)
{
    if (c->path != c->path1)
        free(c->path);
    c->path = c->path1;
    buf_free(&c->reps);
    buf_free(&c->defs);
    buf_free(&c->values);
    buf_free(&c->offs);
    buf_free(&c->dict_data);
    buf_free(&c->dict_offs);
    buf_free(&c->idx);
    free(c->slots);
    buf_free(&c->rg.minb);
    buf_free(&c->rg.maxb);
    buf_free(&c->file.minb);
    buf_free(&c->file.maxb);
    buf_free(&c->page);
    buf_free(&c->comp);
    buf_free(&c->levels);
    cdc_thrift_free(&c->hdr);
}

/* ---- dictionary --------------------------------------------------------------- */

static inline uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    size_t total = n;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t k;
        memcpy(&k, p, 8);
        h = (h ^ (k * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        /* whole-word loads only: a byte-wise tail copy stalls store forwarding */
        uint64_t k;
        if (total >= 8) {
            memcpy(&k, end - 8, 8);
        } else if (n >= 4) {
            uint32_t a, b;
            memcpy(&a, p, 4);
            memcpy(&b, end - 4, 4);
            k = a | ((uint64_t)b << 32);
        } else {
            k = p[0] | ((uint64_t)p[n / 2] << 8) | ((uint64_t)end[-1] << 16);
        }
        h = (h ^ (k * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
    }
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

/* Equality of two byte strings of length n, without a libc call for short keys. */
static inline bool bytes_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint64_t x, y, u, v;
    uint32_t p, q, r, t;

    if (n >= 8 && n <= 16) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        memcpy(&u, a + n - 8, 8);
        memcpy(&v, b + n - 8, 8);
        return x == y && u == v;
    }
    if (n >= 4 && n < 8) {
        memcpy(&p, a, 4);
        memcpy(&q, b, 4);
        memcpy(&r, a + n - 4, 4);
        memcpy(&t, b + n - 4, 4);
        return p == q && r == t;
    }
    if (n < 4) {
        for (size_t i = 0; i < n; i++)
            if (a[i] != b[i])
                return false;
        return true;
    }
    return memcmp(a, b, n) == 0;
}

static bool dict_grow(column_t *c)
{
    size_t n = c->nslots ? c->nslots * 2 : 1024;
    uint64_t *s = calloc(n, sizeof(uint64_t));

    if (s == NULL)
        return false;
    for (size_t i = 0; i < c->nslots; i++) {
        uint64_t e = c->slots[i];
        if (e == 0)
            continue;
        size_t j = (size_t)(e >> 32) & (n - 1);
        while (s[j] != 0)
            j = (j + 1) & (n - 1);
        s[j] = e;
    }
    free(c->slots);
    c->slots = s;
    c->nslots = n;
    return true;
}

static void dict_reset(column_t *c)
{
    if (c->slots != NULL && c->ndict > 0)
        memset(c->slots, 0, c->nslots * sizeof(uint64_t));
    c->ndict = 0;
    c->dict_data.len = 0;
    c->dict_offs.len = 0;
    c->idx.len = 0;
}

/* ---- statistics --------------------------------------------------------------- */

static inline void stats_int(stats_t *s, int64_t v)
{
    if (!s->has) {
        s->imin = s->imax = v;
        s->has = true;
        return;
    }
    if (v < s->imin)
        s->imin = v;
    if (v > s->imax)
        s->imax = v;
}

/* Total order with -0.0 < +0.0; NaN is counted, not compared. */
static inline bool dbl_lt(double a, double b)
{
    if (a == b && a == 0)
        return signbit(a) && !signbit(b);
    return a < b;
}

static inline void stats_dbl(stats_t *s, double v)
{
    if (isnan(v)) {
        s->nans++;
        return;
    }
    if (!s->has) {
        s->dmin = s->dmax = v;
        s->has = true;
        return;
    }
    if (dbl_lt(v, s->dmin))
        s->dmin = v;
    if (dbl_lt(s->dmax, v))
        s->dmax = v;
}

static inline void stats_dec(stats_t *s, __int128 v)
{
    if (!s->has) {
        s->decmin = s->decmax = v;
        s->has = true;
        return;
    }
    if (v < s->decmin)
        s->decmin = v;
    if (v > s->decmax)
        s->decmax = v;
}

/* Order of two values known by prefixes (a, cut_a: a is the first alen bytes of a longer
 * value): 0 when the prefixes cannot tell them apart (equal, or both cut alike). */
static int cut_cmp(const uint8_t *a, size_t alen, bool cut_a, const uint8_t *b, size_t blen,
                   bool cut_b)
{
    size_t n = alen < blen ? alen : blen;
    int r = n ? memcmp(a, b, n) : 0;
    if (r != 0)
        return r;
    if (alen != blen)
        return alen < blen ? -1 : 1;
    return cut_a == cut_b ? 0 : cut_a ? 1 : -1;
}

/* Adds a byte-array value (the first n bytes of a longer one when cut) to s. */
static bool stats_bytes_cut(stats_t *s, const uint8_t *p, size_t n, bool cut)
{
    if (n > PQ_STAT_KEEP) {
        n = PQ_STAT_KEEP;
        cut = true;
    }
    if (!s->has) {
        s->has = true;
        s->min_cut = s->max_cut = cut;
        return buf_set(&s->minb, p, n) && buf_set(&s->maxb, p, n);
    }
    if (cut_cmp(p, n, cut, s->minb.p, s->minb.len, s->min_cut) < 0) {
        if (!buf_set(&s->minb, p, n))
            return false;
        s->min_cut = cut;
    }
    if (cut_cmp(p, n, cut, s->maxb.p, s->maxb.len, s->max_cut) > 0) {
        if (!buf_set(&s->maxb, p, n))
            return false;
        s->max_cut = cut;
    }
    return true;
}

static inline bool stats_bytes(stats_t *s, const uint8_t *p, size_t n)
{
    return stats_bytes_cut(s, p, n, false);
}

static bool stats_merge(const column_t *c, stats_t *dst, const stats_t *src)
{
    dst->nulls += src->nulls;
    dst->nans += src->nans;
    if (!src->has)
        return true;
    if (c->is_bytes || c->field->type == CDC_ICE_UUID)
        return stats_bytes_cut(dst, src->minb.p, src->minb.len, src->min_cut) &&
               stats_bytes_cut(dst, src->maxb.p, src->maxb.len, src->max_cut);
    if (c->field->type == CDC_ICE_FLOAT || c->field->type == CDC_ICE_DOUBLE) {
        int64_t nans = dst->nans;
        stats_dbl(dst, src->dmin);
        stats_dbl(dst, src->dmax);
        dst->nans = nans;
    } else if (c->field->type == CDC_ICE_DECIMAL) {
        stats_dec(dst, src->decmin);
        stats_dec(dst, src->decmax);
    } else {
        stats_int(dst, src->imin);
        stats_int(dst, src->imax);
    }
    return true;
}

static void stats_clear(stats_t *s)
{
    s->has = false;
    s->nulls = 0;
    s->nans = 0;
    s->minb.len = 0;
    s->maxb.len = 0;
    s->min_cut = s->max_cut = false;
}

/* Fills a cdc_ice_value_t with the min (want_max false) or max of s. */
static void stats_value(const column_t *c, const stats_t *s, bool want_max, cdc_ice_value_t *v)
{
    memset(v, 0, sizeof(*v));
    switch (c->field->type) {
    case CDC_ICE_BOOLEAN:
        v->v.b = (want_max ? s->imax : s->imin) != 0;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        v->v.i32 = (int32_t)(want_max ? s->imax : s->imin);
        break;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        v->v.i64 = want_max ? s->imax : s->imin;
        break;
    case CDC_ICE_FLOAT:
        v->v.f32 = (float)(want_max ? s->dmax : s->dmin);
        break;
    case CDC_ICE_DOUBLE:
        v->v.f64 = want_max ? s->dmax : s->dmin;
        break;
    case CDC_ICE_DECIMAL:
        v->v.dec = want_max ? s->decmax : s->decmin;
        break;
    case CDC_ICE_UUID:
        memcpy(v->v.uuid, want_max ? s->maxb.p : s->minb.p, 16);
        break;
    default:
        v->v.bytes.ptr = want_max ? s->maxb.p : s->minb.p;
        v->v.bytes.len = want_max ? s->maxb.len : s->minb.len;
        break;
    }
}

/* Parquet PLAIN encoding of a statistics value (without length prefix). */
static void pq_stat_encode(const column_t *c, const stats_t *s, bool want_max, uint8_t *out,
                           size_t *len, bool *exact)
{
    cdc_ice_value_t v;

    *exact = true;
    stats_value(c, s, want_max, &v);
    switch (c->field->type) {
    case CDC_ICE_BOOLEAN:
        out[0] = v.v.b;
        *len = 1;
        return;
    case CDC_ICE_FLOAT:
        /* spec: a zero min is written as -0.0, a zero max as +0.0 */
        if (v.v.f32 == 0)
            v.v.f32 = want_max ? 0.0f : -0.0f;
        cdc_ice_bound_encode(c->field, &v, out, PQ_STAT_MAX, len);
        return;
    case CDC_ICE_DOUBLE:
        if (v.v.f64 == 0)
            v.v.f64 = want_max ? 0.0 : -0.0;
        cdc_ice_bound_encode(c->field, &v, out, PQ_STAT_MAX, len);
        return;
    case CDC_ICE_DECIMAL:
        if (c->ptype == PT_INT32) {
            put_le32(out, (uint32_t)(int32_t)v.v.dec);
            *len = 4;
        } else if (c->ptype == PT_INT64) {
            put_le64(out, (uint64_t)(int64_t)v.v.dec);
            *len = 8;
        } else {
            cdc_ice_decimal_be_fixed(v.v.dec, out, c->type_length);
            *len = (size_t)c->type_length;
        }
        return;
    case CDC_ICE_STRING:
    case CDC_ICE_BINARY:
        if (v.v.bytes.len <= PQ_STAT_MAX) {
            if (v.v.bytes.len > 0)
                memcpy(out, v.v.bytes.ptr, v.v.bytes.len);
            *len = v.v.bytes.len;
            return;
        }
        *exact = false;
        if (want_max) {
            if (!cdc_ice_truncate_upper(false, v.v.bytes.ptr, v.v.bytes.len, PQ_STAT_MAX, out,
                                        PQ_STAT_MAX, len))
                *len = SIZE_MAX; /* cannot bound: omit */
        } else {
            cdc_ice_truncate_lower(false, v.v.bytes.ptr, v.v.bytes.len, PQ_STAT_MAX, out,
                                   PQ_STAT_MAX, len);
        }
        return;
    default:
        cdc_ice_bound_encode(c->field, &v, out, PQ_STAT_MAX, len);
        return;
    }
}

void cdc_pq_column_chunk_stats(column_t *c)
{
    c->meta.null_count = c->rg.nulls;
    if (c->rg.has) {
        size_t len;
        bool exact;
        pq_stat_encode(c, &c->rg, false, c->meta.min, &len, &exact);
        c->meta.min_len = len;
        c->meta.min_exact = exact;
        pq_stat_encode(c, &c->rg, true, c->meta.max, &len, &exact);
        c->meta.has_minmax = len != SIZE_MAX;
        c->meta.max_len = len;
        c->meta.max_exact = exact;
    }
}

/* ---- append ------------------------------------------------------------------- */

/* Switches a column from dictionary to plain mode, materializing the values so far. */
static bool dict_fallback(column_t *c)
{
    const uint32_t *idx = (const uint32_t *)c->idx.p;
    size_t n = c->idx.len / 4;

    c->values.len = 0;
    c->offs.len = 0;
    if (!buf_reserve(&c->offs, n * 4) || !buf_reserve(&c->values, c->dict_data.len))
        return false;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const uint8_t *p = dict_entry(c, idx[i], &len);
        if (!buf_put(&c->values, p, len))
            return false;
        put_le32(c->offs.p + c->offs.len, (uint32_t)c->values.len);
        c->offs.len += 4;
    }
    c->dict_on = false;
    c->dict_failed = true;
    dict_reset(c);
    return true;
}

/* Adds one byte-array value; returns false on allocation failure. */
static bool add_bytes(cdc_pq_writer_t *w, column_t *c, const uint8_t *p, size_t n)
{
    if (c->dict_on) {
        if (c->nslots == 0 && !dict_grow(c))
            return false;
        uint64_t h = hash_bytes(p, n);
        uint32_t h32 = (uint32_t)(h >> 32);
        size_t mask = c->nslots - 1, j = (size_t)h32 & mask;
        for (;;) {
            uint64_t e = c->slots[j];
            if (e == 0)
                break;
            if ((uint32_t)(e >> 32) == h32) {
                size_t len;
                uint32_t id = (uint32_t)e - 1;
                const uint8_t *q = dict_entry(c, id, &len);
                if (len == n && bytes_eq(p, q, n)) {
                    if (!buf_reserve(&c->idx, 4))
                        return false;
                    memcpy(c->idx.p + c->idx.len, &id, 4);
                    c->idx.len += 4;
                    w->rg_bytes += 4;
                    return true;
                }
            }
            j = (j + 1) & mask;
        }
        /* new entry */
        if (c->ndict + 1 > w->opts.dict_max_entries ||
            c->dict_data.len + n > w->opts.dict_max_bytes) {
            if (!dict_fallback(c))
                return false;
            return add_bytes(w, c, p, n);
        }
        uint32_t id = c->ndict;
        if (!buf_put(&c->dict_data, p, n) || !buf_reserve(&c->dict_offs, 4) ||
            !buf_reserve(&c->idx, 4))
            return false;
        put_le32(c->dict_offs.p + c->dict_offs.len, (uint32_t)c->dict_data.len);
        c->dict_offs.len += 4;
        memcpy(c->idx.p + c->idx.len, &id, 4);
        c->idx.len += 4;
        c->ndict++;
        c->slots[j] = ((uint64_t)h32 << 32) | (uint64_t)(id + 1);
        if (c->ndict * 2 > c->nslots && !dict_grow(c))
            return false;
        w->rg_bytes += 8 + n;
        return stats_bytes(&c->rg, p, n);
    }
    if (!buf_put(&c->values, p, n) || !buf_reserve(&c->offs, 4))
        return false;
    put_le32(c->offs.p + c->offs.len, (uint32_t)c->values.len);
    c->offs.len += 4;
    w->rg_bytes += 4 + n;
    return stats_bytes(&c->rg, p, n);
}

/* Buffers one non-null value of column c; false when out of memory. */
static bool put_value(cdc_pq_writer_t *w, column_t *c, const cdc_ice_value_t *v)
{
    uint8_t *dst;

    c->nvalues++;
    if (c->is_bytes)
        return add_bytes(w, c, v->v.bytes.ptr, v->v.bytes.len);
    if (!buf_reserve(&c->values, (size_t)c->width))
        return false;
    dst = c->values.p + c->values.len;
    c->values.len += (size_t)c->width;
    w->rg_bytes += (size_t)c->width;
    switch (c->field->type) {
    case CDC_ICE_BOOLEAN:
        dst[0] = v->v.b ? 1 : 0;
        stats_int(&c->rg, dst[0]);
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        memcpy(dst, &v->v.i32, 4);
        stats_int(&c->rg, v->v.i32);
        break;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        memcpy(dst, &v->v.i64, 8);
        stats_int(&c->rg, v->v.i64);
        break;
    case CDC_ICE_FLOAT:
        memcpy(dst, &v->v.f32, 4);
        stats_dbl(&c->rg, v->v.f32);
        break;
    case CDC_ICE_DOUBLE:
        memcpy(dst, &v->v.f64, 8);
        stats_dbl(&c->rg, v->v.f64);
        break;
    case CDC_ICE_DECIMAL:
        if (c->ptype == PT_INT32) {
            int32_t x = (int32_t)v->v.dec;
            memcpy(dst, &x, 4);
        } else if (c->ptype == PT_INT64) {
            int64_t x = (int64_t)v->v.dec;
            memcpy(dst, &x, 8);
        } else {
            cdc_ice_decimal_be_fixed(v->v.dec, dst, c->type_length);
        }
        stats_dec(&c->rg, v->v.dec);
        break;
    case CDC_ICE_UUID:
        memcpy(dst, v->v.uuid, 16);
        return stats_bytes(&c->rg, dst, 16);
    default:
        break;
    }
    return true;
}

/* Appends one level entry to column c: its levels, and its value when it has one. */
static bool put_entry(cdc_pq_writer_t *w, column_t *c, int rep, int def, const cdc_ice_value_t *v)
{
    if (c->max_rep > 0) {
        if (!buf_reserve(&c->reps, 1))
            return false;
        c->reps.p[c->reps.len++] = (uint8_t)rep;
        w->rg_bytes++;
    }
    if (c->max_def > 0) {
        if (!buf_reserve(&c->defs, 1))
            return false;
        c->defs.p[c->defs.len++] = (uint8_t)def;
    }
    c->nentries++;
    if (v == NULL) {
        c->rg.nulls++;
        return true;
    }
    return put_value(w, c, v);
}

typedef struct shred_ctx {
    cdc_pq_writer_t *w;
    column_t *first; /* the field's first column */
} shred_ctx_t;

static bool shred_entry(void *ctx, const cdc_ice_node_t *leaf, int rep, int def,
                        const cdc_ice_value_t *v)
{
    shred_ctx_t *x = ctx;
    return put_entry(x->w, x->first + leaf->leaf, rep, def, v);
}

cdc_err_t cdc_pq_writer_append(cdc_pq_writer_t *w, const cdc_ice_value_t *values, cdc_error_t *err)
{
    char why[160];

    if (w->failed || w->closed)
        return cdc_error_set(err, CDC_ERR_CLOSED, "parquet writer is closed or failed");
    /* validate first so a rejected row leaves no partial state */
    for (size_t i = 0; i < w->schema.nfields; i++) {
        const column_t *c = &w->cols[w->fcol[i]];
        const cdc_ice_field_t *f = &w->schema.fields[i];
        const cdc_ice_value_t *v = &values[i];
        if (v->is_null) {
            if (f->required)
                return cdc_error_set(err, CDC_ERR_INVALID, "null value in required column \"%s\"",
                                     f->name);
            continue;
        }
        if (cdc_ice_type_is_nested(f->type)) {
            cdc_err_t rc = cdc_ice_nested_shred(&w->trees[i], (const char *)v->v.bytes.ptr,
                                                v->v.bytes.len, NULL, NULL, why, sizeof(why));
            if (rc != CDC_OK)
                return cdc_error_set(err, rc, "column \"%s\": %s", f->name,
                                     rc == CDC_ERR_NOMEM ? "out of memory" : why);
            continue;
        }
        if (c->field->type == CDC_ICE_DECIMAL &&
            (v->v.dec >= c->dec_limit || v->v.dec <= -c->dec_limit))
            return cdc_error_set(err, CDC_ERR_INVALID,
                                 "value out of range for decimal(%d,%d) column \"%s\"",
                                 (int)c->field->precision, (int)c->field->scale, c->field->name);
        if (c->is_bytes && v->v.bytes.len > PQ_MAX_VALUE)
            return cdc_error_set(err, CDC_ERR_INVALID,
                                 "value of %zu bytes too large for column \"%s\"", v->v.bytes.len,
                                 c->field->name);
    }
    for (size_t i = 0; i < w->schema.nfields; i++) {
        column_t *c = &w->cols[w->fcol[i]];
        const cdc_ice_value_t *v = &values[i];

        if (cdc_ice_type_is_nested(w->schema.fields[i].type)) {
            shred_ctx_t x = {w, c};
            if (cdc_ice_nested_shred(&w->trees[i], v->is_null ? NULL : (const char *)v->v.bytes.ptr,
                                     v->is_null ? 0 : v->v.bytes.len, shred_entry, &x, why,
                                     sizeof(why)) != CDC_OK)
                goto nomem;
            continue;
        }
        if (!put_entry(w, c, 0, v->is_null ? 0 : c->max_def, v->is_null ? NULL : v))
            goto nomem;
    }
    w->rows++;
    w->rg_rows++;
    if (w->rg_bytes >= w->opts.row_group_bytes)
        return cdc_pq_write_row_group(w, err);
    return CDC_OK;
nomem:
    w->failed = true;
    return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory while buffering a parquet row");
}

/* ---- end of a row group ------------------------------------------------------- */

bool cdc_pq_column_end_row_group(const cdc_pq_writer_t *w, column_t *c)
{
    c->column_size += c->meta.compressed;
    c->file_values += c->nentries;
    if (!stats_merge(c, &c->file, &c->rg))
        return false;
    /* reset the column's row-group buffers, keeping their memory */
    stats_clear(&c->rg);
    c->nentries = 0;
    c->reps.len = 0;
    c->defs.len = 0;
    c->values.len = 0;
    c->offs.len = 0;
    c->nvalues = 0;
    if (c->is_bytes) {
        dict_reset(c);
        c->dict_on = w->opts.dictionary && !c->dict_failed;
    }
    /* release big buffers (a large value's) so that a writer does not pin them until
     * its file is closed (docs/parquet.md, "Large values") */
    buf_t *big[] = {&c->values,    &c->offs,      &c->defs, &c->reps, &c->idx,
                    &c->dict_data, &c->dict_offs, &c->page, &c->comp, &c->levels};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        if (big[i]->cap > PQ_LARGE_PAGE)
            buf_free(big[i]);
    return true;
}

/* ---- Iceberg statistics ------------------------------------------------------- */

/* Iceberg statistics of column c for the data-file descriptor. */
void cdc_pq_column_ice_stats(const column_t *c, cdc_ice_col_stats_t *s)
{
    cdc_ice_type_t type = c->field->type;
    cdc_ice_value_t v;
    bool ok;

    memset(s, 0, sizeof(*s));
    s->field_id = c->field->id;
    s->column_size = c->column_size;
    s->value_count = c->file_values;
    s->null_count = c->file.nulls;
    s->nan_count = (type == CDC_ICE_FLOAT || type == CDC_ICE_DOUBLE) ? c->file.nans : -1;
    if (!c->file.has)
        return;
    if (type == CDC_ICE_STRING || type == CDC_ICE_BINARY) {
        bool str = type == CDC_ICE_STRING;
        ok = cdc_ice_truncate_lower(str, c->file.minb.p, c->file.minb.len, 16, s->lower,
                                    sizeof(s->lower), &s->lower_len) &&
             cdc_ice_truncate_upper(str, c->file.maxb.p, c->file.maxb.len, 16, s->upper,
                                    sizeof(s->upper), &s->upper_len);
    } else {
        stats_value(c, &c->file, false, &v);
        ok = cdc_ice_bound_encode(c->field, &v, s->lower, sizeof(s->lower), &s->lower_len);
        stats_value(c, &c->file, true, &v);
        ok = ok && cdc_ice_bound_encode(c->field, &v, s->upper, sizeof(s->upper), &s->upper_len);
    }
    s->has_bounds = ok;
    if (!ok)
        s->lower_len = s->upper_len = 0;
}
