/*
 * Parquet writer (see parquet.h), written from the Apache Parquet format
 * specification because Debian has no C library for it. Values are buffered
 * per column for one row group in flat arrays (no per-value allocation):
 * fixed-width values in their PLAIN encoding, byte arrays as one data buffer
 * plus offsets, or as dictionary indices while a column's dictionary stays
 * small. A row group is flushed when the buffered bytes reach the target: each
 * column is cut into data pages (v1), encoded, compressed into its own chunk
 * buffer and appended to the output; the footer (FileMetaData, Thrift compact)
 * is written on close. Statistics are tracked on the fly, per row group for the
 * Parquet metadata and per file for Iceberg.
 */
#include "common/iceberg/parquet.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zstd.h>

#include "common/iceberg/schema.h"
#include "common/iceberg/thrift.h"

#ifndef CDC_VERSION
#define CDC_VERSION "dev"
#endif

/* parquet.thrift enums */
enum {
    PT_BOOLEAN = 0,
    PT_INT32 = 1,
    PT_INT64 = 2,
    PT_FLOAT = 4,
    PT_DOUBLE = 5,
    PT_BYTE_ARRAY = 6,
    PT_FLBA = 7
};
enum { ENC_PLAIN = 0, ENC_RLE = 3, ENC_RLE_DICTIONARY = 8 };
enum { PAGE_DATA = 0, PAGE_DICTIONARY = 2 };
enum { CT_UTF8 = 0, CT_DECIMAL = 5, CT_DATE = 6, CT_TIME_MICROS = 8, CT_TIMESTAMP_MICROS = 10 };
enum { REP_REQUIRED = 0, REP_OPTIONAL = 1 };

/* Limits that keep 32-bit offsets and page sizes from overflowing. */
#define PQ_MAX_VALUE ((size_t)256 << 20)
#define PQ_MAX_ROW_GROUP ((size_t)1 << 30)

/* Max bytes of a min/max value kept in the Parquet column statistics. */
#define PQ_STAT_MAX 64

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
    const cdc_ice_field_t *field;
    int ptype;
    int type_length; /* FIXED_LEN_BYTE_ARRAY length */
    int width;       /* bytes per buffered value for fixed types, 0 for byte arrays */
    bool optional;
    bool is_bytes;
    __int128 dec_limit; /* 10^precision for range checks */

    /* row group buffers */
    buf_t defs;   /* uint8 definition level per row (optional columns) */
    buf_t values; /* fixed: PLAIN values; bytes: concatenated value bytes */
    buf_t offs;   /* bytes, plain mode: uint32 end offset of each value in values */
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
    buf_t page, comp, chunk, levels;
    cdc_thrift_t hdr;
    chunk_meta_t meta;
} column_t;

typedef enum sink_kind { SINK_FILE, SINK_BUFFER, SINK_CALLBACK } sink_kind_t;

struct cdc_pq_writer {
    cdc_ice_schema_t schema;
    cdc_pq_options_t opts;
    column_t *cols;
    size_t ncols;

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

static bool buf_reserve(buf_t *b, size_t n)
{
    size_t cap;
    uint8_t *p;

    if (b->len + n <= b->cap)
        return true;
    cap = b->cap ? b->cap : 64;
    while (cap < b->len + n)
        cap *= 2;
    p = realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
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

static bool buf_set(buf_t *b, const void *data, size_t n)
{
    b->len = 0;
    return buf_put(b, data, n);
}

static void buf_free(buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

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

/* ---- decimals ----------------------------------------------------------------- */

static __int128 pow10_128(int p)
{
    __int128 v = 1;
    for (int i = 0; i < p; i++)
        v *= 10;
    return v;
}

int cdc_ice_decimal_fixed_len(int32_t precision)
{
    __int128 need = pow10_128(precision) - 1;
    for (int n = 1; n <= 16; n++) {
        __int128 max =
            n == 16 ? (__int128)(~(unsigned __int128)0 >> 1) : (((__int128)1) << (8 * n - 1)) - 1;
        if (max >= need)
            return n;
    }
    return 16;
}

cdc_err_t cdc_ice_decimal_parse(const char *text, size_t len, int32_t precision, int32_t scale,
                                __int128 *out)
{
    size_t i = 0;
    bool neg = false, dot = false, any = false;
    int frac = 0, digits = 0;
    unsigned __int128 v = 0;

    if (text == NULL || precision < 1 || precision > 38 || scale < 0 || scale > precision)
        return CDC_ERR_INVALID;
    if (i < len && (text[i] == '-' || text[i] == '+'))
        neg = text[i++] == '-';
    for (; i < len; i++) {
        char c = text[i];
        if (c == '.' && !dot) {
            dot = true;
            continue;
        }
        if (c < '0' || c > '9')
            return CDC_ERR_INVALID;
        any = true;
        if (dot) {
            if (frac == scale) {
                if (c != '0') /* would lose precision */
                    return CDC_ERR_INVALID;
                continue;
            }
            frac++;
        }
        if (v == 0 && c == '0' && !dot)
            continue; /* leading zero */
        if (++digits > precision)
            return CDC_ERR_INVALID;
        v = v * 10 + (unsigned)(c - '0');
    }
    if (!any)
        return CDC_ERR_INVALID;
    for (; frac < scale; frac++) {
        if (v != 0 && ++digits > precision)
            return CDC_ERR_INVALID;
        v *= 10;
    }
    *out = neg ? -(__int128)v : (__int128)v;
    return CDC_OK;
}

/* Minimal big-endian two's complement of v; returns the length (1..16). */
static size_t decimal_min_be(__int128 v, uint8_t *out)
{
    uint8_t full[16];
    size_t start = 0;

    for (int i = 15; i >= 0; i--) {
        full[i] = (uint8_t)v;
        v >>= 8;
    }
    /* drop redundant sign bytes */
    while (start < 15 && ((full[start] == 0x00 && !(full[start + 1] & 0x80)) ||
                          (full[start] == 0xFF && (full[start + 1] & 0x80))))
        start++;
    memcpy(out, full + start, 16 - start);
    return 16 - start;
}

void cdc_ice_decimal_be_fixed(__int128 v, uint8_t *out, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* ---- Iceberg bounds ----------------------------------------------------------- */

/* Length of the UTF-8 sequence starting with lead byte c (1 for invalid bytes). */
static inline size_t utf8_len(uint8_t c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        return 2;
    if ((c & 0xF0) == 0xE0)
        return 3;
    if ((c & 0xF8) == 0xF0)
        return 4;
    return 1;
}

/* Byte length of the first `width` code points of in (or len when shorter). */
static size_t utf8_prefix(const uint8_t *in, size_t len, size_t width, size_t *npoints)
{
    size_t i = 0, n = 0;
    while (i < len && n < width) {
        size_t l = utf8_len(in[i]);
        i = i + l > len ? len : i + l;
        n++;
    }
    if (npoints)
        *npoints = n;
    return i;
}

static size_t utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static uint32_t utf8_decode(const uint8_t *p, size_t l)
{
    switch (l) {
    case 2:
        return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    case 3:
        return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    case 4:
        return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
               ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    default:
        return p[0];
    }
}

bool cdc_ice_truncate_lower(bool is_string, const uint8_t *in, size_t len, size_t width,
                            uint8_t *out, size_t cap, size_t *out_len)
{
    size_t n = is_string ? utf8_prefix(in, len, width, NULL) : (len < width ? len : width);
    if (n > cap)
        return false;
    if (n > 0)
        memcpy(out, in, n);
    *out_len = n;
    return true;
}

bool cdc_ice_truncate_upper(bool is_string, const uint8_t *in, size_t len, size_t width,
                            uint8_t *out, size_t cap, size_t *out_len)
{
    if (!is_string) {
        if (len <= width) {
            if (len > cap)
                return false;
            if (len > 0)
                memcpy(out, in, len);
            *out_len = len;
            return true;
        }
        /* increment the last byte that is not 0xFF and drop what follows */
        for (size_t i = width; i-- > 0;) {
            if (in[i] != 0xFF) {
                if (i + 1 > cap)
                    return false;
                memcpy(out, in, i);
                out[i] = (uint8_t)(in[i] + 1);
                *out_len = i + 1;
                return true;
            }
        }
        return false;
    }
    size_t np, n = utf8_prefix(in, len, width, &np);
    if (n == len) {
        if (len > cap)
            return false;
        if (len > 0)
            memcpy(out, in, len);
        *out_len = len;
        return true;
    }
    /* collect the code point starts of the prefix, then increment from the last */
    size_t starts[64];
    size_t ns = 0;
    for (size_t i = 0; i < n && ns < 64;) {
        starts[ns++] = i;
        size_t l = utf8_len(in[i]);
        i = i + l > n ? n : i + l;
    }
    while (ns > 0) {
        size_t s = starts[--ns];
        size_t l = (ns + 1 < np && ns + 1 < 64) ? starts[ns + 1] - s : n - s;
        uint32_t cp = utf8_decode(in + s, l) + 1;
        if (cp >= 0xD800 && cp <= 0xDFFF)
            cp = 0xE000;
        if (cp > 0x10FFFF)
            continue;
        uint8_t enc[4];
        size_t el = utf8_encode(cp, enc);
        if (s + el > cap)
            return false;
        memcpy(out, in, s);
        memcpy(out + s, enc, el);
        *out_len = s + el;
        return true;
    }
    return false;
}

bool cdc_ice_bound_encode(const cdc_ice_field_t *field, const cdc_ice_value_t *v, uint8_t *out,
                          size_t cap, size_t *out_len)
{
    size_t n;

    switch (field->type) {
    case CDC_ICE_BOOLEAN:
        if (cap < 1)
            return false;
        out[0] = v->v.b ? 1 : 0;
        n = 1;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        if (cap < 4)
            return false;
        put_le32(out, (uint32_t)v->v.i32);
        n = 4;
        break;
    case CDC_ICE_LONG:
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        if (cap < 8)
            return false;
        put_le64(out, (uint64_t)v->v.i64);
        n = 8;
        break;
    case CDC_ICE_FLOAT: {
        uint32_t bits;
        if (cap < 4)
            return false;
        memcpy(&bits, &v->v.f32, 4);
        put_le32(out, bits);
        n = 4;
        break;
    }
    case CDC_ICE_DOUBLE: {
        uint64_t bits;
        if (cap < 8)
            return false;
        memcpy(&bits, &v->v.f64, 8);
        put_le64(out, bits);
        n = 8;
        break;
    }
    case CDC_ICE_DECIMAL: {
        uint8_t tmp[16];
        n = decimal_min_be(v->v.dec, tmp);
        if (n > cap)
            return false;
        memcpy(out, tmp, n);
        break;
    }
    case CDC_ICE_UUID:
        if (cap < 16)
            return false;
        memcpy(out, v->v.uuid, 16);
        n = 16;
        break;
    case CDC_ICE_STRING:
    case CDC_ICE_BINARY:
        n = v->v.bytes.len;
        if (n > cap)
            return false;
        if (n > 0)
            memcpy(out, v->v.bytes.ptr, n);
        break;
    default:
        return false;
    }
    *out_len = n;
    return true;
}

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

/* Exposed to the unit tests through a weak-free internal name. */
size_t cdc_pq__hybrid_encode_u32(const uint32_t *vals, size_t n, int bw, uint8_t *out, size_t cap);
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

static inline const uint8_t *dict_entry(const column_t *c, uint32_t i, size_t *len)
{
    const uint32_t *ends = (const uint32_t *)c->dict_offs.p;
    uint32_t start = i == 0 ? 0 : ends[i - 1];
    *len = ends[i] - start;
    return c->dict_data.p + start;
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

static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int r = n ? memcmp(a, b, n) : 0;
    if (r != 0)
        return r;
    return alen < blen ? -1 : alen > blen;
}

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

static inline bool stats_bytes(stats_t *s, const uint8_t *p, size_t n)
{
    if (!s->has) {
        s->has = true;
        return buf_set(&s->minb, p, n) && buf_set(&s->maxb, p, n);
    }
    if (bytes_cmp(p, n, s->minb.p, s->minb.len) < 0 && !buf_set(&s->minb, p, n))
        return false;
    if (bytes_cmp(p, n, s->maxb.p, s->maxb.len) > 0 && !buf_set(&s->maxb, p, n))
        return false;
    return true;
}

static bool stats_merge(const column_t *c, stats_t *dst, const stats_t *src)
{
    dst->nulls += src->nulls;
    dst->nans += src->nans;
    if (!src->has)
        return true;
    if (c->is_bytes || c->field->type == CDC_ICE_UUID)
        return stats_bytes(dst, src->minb.p, src->minb.len) &&
               stats_bytes(dst, src->maxb.p, src->maxb.len);
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

/* ---- writer setup ------------------------------------------------------------- */

static cdc_err_t column_init(column_t *c, const cdc_ice_field_t *f, const cdc_pq_options_t *opts,
                             cdc_error_t *err)
{
    memset(c, 0, sizeof(*c));
    c->field = f;
    c->optional = !f->required;
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
        c->dec_limit = pow10_128(f->precision);
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

static void column_free(column_t *c)
{
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
    buf_free(&c->chunk);
    buf_free(&c->levels);
    cdc_thrift_free(&c->hdr);
}

static cdc_err_t writer_new(const cdc_ice_schema_t *schema, const cdc_pq_options_t *opts,
                            cdc_pq_writer_t **out, cdc_error_t *err)
{
    cdc_pq_writer_t *w = calloc(1, sizeof(*w));
    cdc_err_t rc;

    if (w == NULL)
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
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
    w->ncols = w->schema.nfields;
    w->cols = calloc(w->ncols, sizeof(column_t));
    if (w->cols == NULL) {
        rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < w->ncols; i++) {
        rc = column_init(&w->cols[i], &w->schema.fields[i], &w->opts, err);
        if (rc != CDC_OK)
            goto fail;
    }
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

static cdc_err_t file_flush(cdc_pq_writer_t *w, cdc_error_t *err)
{
    size_t done = 0;
    while (done < w->out.len) {
        ssize_t n = write(w->fd, w->out.p + done, w->out.len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return cdc_error_set(err, CDC_ERR_IO, "could not write file \"%s\": %s", w->path,
                                 strerror(errno));
        }
        done += (size_t)n;
    }
    w->out.len = 0;
    return CDC_OK;
}

static cdc_err_t emit(cdc_pq_writer_t *w, const void *data, size_t len, cdc_error_t *err)
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
            size_t done = 0;
            while (done < len) {
                ssize_t n = write(w->fd, (const uint8_t *)data + done, len - done);
                if (n < 0) {
                    if (errno == EINTR)
                        continue;
                    return cdc_error_set(err, CDC_ERR_IO, "could not write file \"%s\": %s",
                                         w->path, strerror(errno));
                }
                done += (size_t)n;
            }
        } else if (!buf_put(&w->out, data, len)) {
            return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
        }
        break;
    }
    w->offset += len;
    return CDC_OK;
}

cdc_err_t cdc_pq_writer_open_file(const cdc_ice_schema_t *schema, const char *path,
                                  const cdc_pq_options_t *opts, cdc_pq_writer_t **out,
                                  cdc_error_t *err)
{
    cdc_pq_writer_t *w;
    cdc_err_t rc = writer_new(schema, opts, &w, err);

    if (rc != CDC_OK)
        return rc;
    w->sink_kind = SINK_FILE;
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
    rc = emit(w, "PAR1", 4, err);
    if (rc != CDC_OK) {
        cdc_pq_writer_free(w);
        return rc;
    }
    *out = w;
    return CDC_OK;
}

cdc_err_t cdc_pq_writer_open_buffer(const cdc_ice_schema_t *schema, const cdc_pq_options_t *opts,
                                    cdc_pq_writer_t **out, cdc_error_t *err)
{
    cdc_pq_writer_t *w;
    cdc_err_t rc = writer_new(schema, opts, &w, err);

    if (rc != CDC_OK)
        return rc;
    w->sink_kind = SINK_BUFFER;
    rc = emit(w, "PAR1", 4, err);
    if (rc != CDC_OK) {
        cdc_pq_writer_free(w);
        return rc;
    }
    *out = w;
    return CDC_OK;
}

cdc_err_t cdc_pq_writer_open_sink(const cdc_ice_schema_t *schema, cdc_pq_sink_fn sink, void *ctx,
                                  const cdc_pq_options_t *opts, cdc_pq_writer_t **out,
                                  cdc_error_t *err)
{
    cdc_pq_writer_t *w;
    cdc_err_t rc = writer_new(schema, opts, &w, err);

    if (rc != CDC_OK)
        return rc;
    w->sink_kind = SINK_CALLBACK;
    w->sink = sink;
    w->sink_ctx = ctx;
    rc = emit(w, "PAR1", 4, err);
    if (rc != CDC_OK) {
        cdc_pq_writer_free(w);
        return rc;
    }
    *out = w;
    return CDC_OK;
}

void cdc_pq_writer_free(cdc_pq_writer_t *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; w->cols != NULL && i < w->ncols; i++)
        column_free(&w->cols[i]);
    free(w->cols);
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

/* ---- append ------------------------------------------------------------------- */

static cdc_err_t flush_row_group(cdc_pq_writer_t *w, cdc_error_t *err);

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

cdc_err_t cdc_pq_writer_append(cdc_pq_writer_t *w, const cdc_ice_value_t *values, cdc_error_t *err)
{
    if (w->failed || w->closed)
        return cdc_error_set(err, CDC_ERR_CLOSED, "parquet writer is closed or failed");
    /* validate first so a rejected row leaves no partial state */
    for (size_t i = 0; i < w->ncols; i++) {
        const column_t *c = &w->cols[i];
        const cdc_ice_value_t *v = &values[i];
        if (v->is_null) {
            if (!c->optional)
                return cdc_error_set(err, CDC_ERR_INVALID, "null value in required column \"%s\"",
                                     c->field->name);
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
    for (size_t i = 0; i < w->ncols; i++) {
        column_t *c = &w->cols[i];
        const cdc_ice_value_t *v = &values[i];
        uint8_t *dst;

        if (c->optional) {
            if (!buf_reserve(&c->defs, 1))
                goto nomem;
            c->defs.p[c->defs.len++] = v->is_null ? 0 : 1;
            if (v->is_null) {
                c->rg.nulls++;
                continue;
            }
        }
        c->nvalues++;
        if (c->is_bytes) {
            if (!add_bytes(w, c, v->v.bytes.ptr, v->v.bytes.len))
                goto nomem;
            continue;
        }
        if (!buf_reserve(&c->values, (size_t)c->width))
            goto nomem;
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
            if (!stats_bytes(&c->rg, dst, 16))
                goto nomem;
            break;
        default:
            break;
        }
    }
    w->rows++;
    w->rg_rows++;
    if (w->rg_bytes >= w->opts.row_group_bytes)
        return flush_row_group(w, err);
    return CDC_OK;
nomem:
    w->failed = true;
    return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory while buffering a parquet row");
}

cdc_err_t cdc_pq_writer_flush(cdc_pq_writer_t *w, cdc_error_t *err)
{
    if (w->failed || w->closed)
        return cdc_error_set(err, CDC_ERR_CLOSED, "parquet writer is closed or failed");
    return flush_row_group(w, err);
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

/* Compresses c->page and appends header + body to c->chunk. */
static cdc_err_t put_page(cdc_pq_writer_t *w, column_t *c, int page_type, int32_t num_values,
                          int encoding, cdc_error_t *err)
{
    const uint8_t *body = NULL;
    size_t blen = 0;
    cdc_err_t rc = compress_page(w, c, &body, &blen, err);

    if (rc != CDC_OK)
        return rc;
    if (c->page.len > INT32_MAX || blen > INT32_MAX)
        return cdc_error_set(err, CDC_ERR_INVALID, "parquet page of column \"%s\" is too large",
                             c->field->name);
    cdc_thrift_reset(&c->hdr);
    cdc_thrift_struct_begin(&c->hdr);
    cdc_thrift_field_i32(&c->hdr, 1, page_type);
    cdc_thrift_field_i32(&c->hdr, 2, (int32_t)c->page.len);
    cdc_thrift_field_i32(&c->hdr, 3, (int32_t)blen);
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
    if (c->hdr.oom || !buf_put(&c->chunk, c->hdr.data, c->hdr.len) ||
        !buf_put(&c->chunk, body, blen))
        return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
    c->meta.uncompressed += (int64_t)(c->hdr.len + c->page.len);
    c->meta.compressed += (int64_t)(c->hdr.len + blen);
    return CDC_OK;
}

static inline uint32_t value_end(const column_t *c, size_t i)
{
    uint32_t e;
    memcpy(&e, c->offs.p + 4 * i, 4);
    return e;
}

/* Encodes the whole buffered row group of column c into c->chunk (offsets relative). */
static cdc_err_t encode_column(cdc_pq_writer_t *w, column_t *c, int64_t nrows, cdc_error_t *err)
{
    const uint8_t *defs = c->optional ? c->defs.p : NULL;
    bool dict = c->is_bytes && c->dict_on && c->ndict > 0;
    int bw = dict ? bit_width(c->ndict - 1) : 0;
    size_t page_bytes = w->opts.page_bytes;
    size_t r = 0, v = 0;
    cdc_err_t rc;

    if (bw == 0)
        bw = 1;
    c->chunk.len = 0;
    memset(&c->meta, 0, sizeof(c->meta));
    c->meta.dict_page_offset = -1;
    c->meta.num_values = nrows;
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
    c->meta.data_page_offset = (int64_t)c->chunk.len;
    while (r < (size_t)nrows) {
        size_t r1 = r, v1 = v, bytes = 0;
        /* pick the rows of this page */
        if (defs == NULL && !c->is_bytes) {
            size_t per = page_bytes / (size_t)c->width;
            if (per == 0)
                per = 1;
            r1 = r + per < (size_t)nrows ? r + per : (size_t)nrows;
            v1 = r1;
        } else {
            while (r1 < (size_t)nrows && bytes < page_bytes) {
                if (defs == NULL || defs[r1]) {
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
        if (defs != NULL) {
            if (!buf_reserve(&c->page, 4 + hybrid_bound(nr, 1)))
                return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            c->page.len = 4;
            hybrid_u8(&c->page, defs + r, nr, 1);
            put_le32(c->page.p, (uint32_t)(c->page.len - 4));
        }
        if (dict) {
            if (!buf_reserve(&c->page, 1 + hybrid_bound(nv, bw)))
                return cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            c->page.p[c->page.len++] = (uint8_t)bw;
            hybrid_u32(&c->page, (const uint32_t *)c->idx.p + v, nv, bw);
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
    return CDC_OK;
}

static cdc_err_t flush_row_group(cdc_pq_writer_t *w, cdc_error_t *err)
{
    cdc_err_t rc = CDC_OK;
    int64_t rg_offset = (int64_t)w->offset, raw = 0, comp = 0;

    if (w->rg_rows == 0)
        return CDC_OK;
    if (w->nrg == w->rg_cap) {
        size_t cap = w->rg_cap ? w->rg_cap * 2 : 8;
        chunk_meta_t *m = realloc(w->metas, cap * w->ncols * sizeof(chunk_meta_t));
        if (m != NULL)
            w->metas = m;
        int64_t *a = realloc(w->rg_rows_list, cap * sizeof(int64_t));
        if (a != NULL)
            w->rg_rows_list = a;
        int64_t *b = realloc(w->rg_offsets, cap * sizeof(int64_t));
        if (b != NULL)
            w->rg_offsets = b;
        int64_t *d = realloc(w->rg_raw, cap * sizeof(int64_t));
        if (d != NULL)
            w->rg_raw = d;
        int64_t *e = realloc(w->rg_comp, cap * sizeof(int64_t));
        if (e != NULL)
            w->rg_comp = e;
        if (m == NULL || a == NULL || b == NULL || d == NULL || e == NULL) {
            rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        w->rg_cap = cap;
    }
    for (size_t i = 0; i < w->ncols; i++) {
        column_t *c = &w->cols[i];
        int64_t base = (int64_t)w->offset;

        rc = encode_column(w, c, w->rg_rows, err);
        if (rc != CDC_OK)
            goto fail;
        rc = emit(w, c->chunk.p, c->chunk.len, err);
        if (rc != CDC_OK)
            goto fail;
        c->meta.chunk_offset = base;
        c->meta.data_page_offset += base;
        if (c->meta.dict_page_offset >= 0)
            c->meta.dict_page_offset += base;
        w->metas[w->nrg * w->ncols + i] = c->meta;
        raw += c->meta.uncompressed;
        comp += c->meta.compressed;
        c->column_size += c->meta.compressed;
        c->file_values += w->rg_rows;
        if (!stats_merge(c, &c->file, &c->rg)) {
            rc = cdc_error_set(err, CDC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        /* reset the column's row-group buffers, keeping their memory */
        stats_clear(&c->rg);
        c->defs.len = 0;
        c->values.len = 0;
        c->offs.len = 0;
        c->nvalues = 0;
        if (c->is_bytes) {
            dict_reset(c);
            c->dict_on = w->opts.dictionary && !c->dict_failed;
        }
        /* release big scratch chunks so an idle writer does not pin memory */
        if (c->chunk.cap > (8u << 20)) {
            buf_free(&c->chunk);
            buf_free(&c->comp);
            buf_free(&c->page);
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
    cdc_thrift_field_i32(t, 3, c->optional ? REP_OPTIONAL : REP_REQUIRED);
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

static int codec_id(cdc_pq_codec_t codec)
{
    switch (codec) {
    case CDC_PQ_CODEC_SNAPPY:
        return 1;
    case CDC_PQ_CODEC_ZSTD:
        return 6;
    default:
        return 0;
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
    cdc_thrift_field_list_begin(t, 3, CDC_THRIFT_BINARY, 1);
    cdc_thrift_binary(t, c->field->name, strlen(c->field->name));
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
    cdc_thrift_field_list_begin(&t, 2, CDC_THRIFT_STRUCT, w->ncols + 1);
    cdc_thrift_struct_begin(&t); /* root */
    cdc_thrift_field_string(&t, 4, "table");
    cdc_thrift_field_i32(&t, 5, (int32_t)w->ncols);
    cdc_thrift_struct_end(&t);
    for (size_t i = 0; i < w->ncols; i++)
        put_schema_element(&t, &w->cols[i]);
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
    rc = emit(w, t.data, t.len, err);
    if (rc == CDC_OK)
        rc = emit(w, tail, 8, err);
    cdc_thrift_free(&t);
    return rc;
}

/* Iceberg statistics of column c for the data-file descriptor. */
static void ice_stats(const column_t *c, cdc_ice_col_stats_t *s)
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

cdc_err_t cdc_pq_writer_close(cdc_pq_writer_t *w, cdc_ice_data_file_t *df, cdc_error_t *err)
{
    cdc_err_t rc;

    if (w->failed || w->closed)
        return cdc_error_set(err, CDC_ERR_CLOSED, "parquet writer is closed or failed");
    rc = flush_row_group(w, err);
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
    df->nstats = w->ncols;
    for (size_t i = 0; i < w->ncols; i++)
        ice_stats(&w->cols[i], &df->stats[i]);
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
