/*
 * Avro binary encoding and object-container framing (see avro.h for why we do not
 * encode through avro-c). Deflate blocks are raw DEFLATE streams (RFC 1951) as the
 * Avro specification requires, produced with zlib.
 */
#include "common/iceberg/avro.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <zlib.h>

#include "common/buf.h"

#define BLOCK_TARGET (64 * 1024)

static bool reserve(cdc_avro_buf_t *b, size_t n)
{
    if (b->oom)
        return false;
    if (cdc_array_reserve(b->data, b->cap, b->len + n, 256) != CDC_OK) {
        b->oom = true;
        return false;
    }
    return true;
}

void cdc_avro_buf_free(cdc_avro_buf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

void cdc_avro_put_raw(cdc_avro_buf_t *b, const void *p, size_t n)
{
    if (n == 0 || !reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

size_t cdc_avro_zigzag_encode(int64_t v, uint8_t *out)
{
    uint64_t u = (uint64_t)v;
    uint64_t z = (u << 1) ^ (0 - (u >> 63));
    size_t n = 0;
    while (z >= 0x80) {
        out[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    out[n++] = (uint8_t)z;
    return n;
}

size_t cdc_avro_zigzag_decode(const uint8_t *p, size_t n, int64_t *v)
{
    uint64_t z = 0;
    for (size_t i = 0; i < n && i < 10; i++) {
        z |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
            return i + 1;
        }
    }
    return 0;
}

void cdc_avro_put_long(cdc_avro_buf_t *b, int64_t v)
{
    uint8_t tmp[10];
    cdc_avro_put_raw(b, tmp, cdc_avro_zigzag_encode(v, tmp));
}

void cdc_avro_put_bool(cdc_avro_buf_t *b, bool v)
{
    uint8_t c = v ? 1 : 0;
    cdc_avro_put_raw(b, &c, 1);
}

void cdc_avro_put_double(cdc_avro_buf_t *b, double v)
{
    uint64_t bits;
    uint8_t le[8];
    memcpy(&bits, &v, 8);
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(bits >> (8 * i));
    cdc_avro_put_raw(b, le, 8);
}

void cdc_avro_put_bytes(cdc_avro_buf_t *b, const void *p, size_t n)
{
    cdc_avro_put_long(b, (int64_t)n);
    cdc_avro_put_raw(b, p, n);
}

void cdc_avro_put_string(cdc_avro_buf_t *b, const char *s)
{
    cdc_avro_put_bytes(b, s, strlen(s));
}

static cdc_err_t oom(cdc_error_t *e)
{
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory while encoding avro");
}

cdc_err_t cdc_avro_writer_init(cdc_avro_writer_t *w, const char *schema_json,
                               cdc_avro_codec_t codec, const char *const *meta, size_t nmeta,
                               cdc_error_t *e)
{
    memset(w, 0, sizeof(*w));
    w->codec = codec;
    if (getrandom(w->sync, sizeof(w->sync), 0) != (ssize_t)sizeof(w->sync)) {
        /* not fatal: the marker only needs to be unlikely inside the data */
        for (size_t i = 0; i < sizeof(w->sync); i++)
            w->sync[i] = (uint8_t)(rand() ^ (int)(i * 131));
    }
    cdc_avro_put_raw(&w->out, "Obj\x01", 4);
    cdc_avro_put_long(&w->out, (int64_t)(2 + nmeta));
    cdc_avro_put_string(&w->out, "avro.schema");
    cdc_avro_put_string(&w->out, schema_json);
    cdc_avro_put_string(&w->out, "avro.codec");
    cdc_avro_put_string(&w->out, codec == CDC_AVRO_CODEC_DEFLATE ? "deflate" : "null");
    for (size_t i = 0; i < nmeta; i++) {
        cdc_avro_put_string(&w->out, meta[2 * i]);
        cdc_avro_put_string(&w->out, meta[2 * i + 1]);
    }
    cdc_avro_put_long(&w->out, 0);
    cdc_avro_put_raw(&w->out, w->sync, sizeof(w->sync));
    if (w->out.oom) {
        cdc_avro_writer_discard(w);
        return oom(e);
    }
    return CDC_OK;
}

static cdc_err_t flush_block(cdc_avro_writer_t *w, cdc_error_t *e)
{
    if (w->block_count == 0)
        return CDC_OK;
    cdc_avro_put_long(&w->out, w->block_count);
    if (w->codec == CDC_AVRO_CODEC_DEFLATE) {
        z_stream zs;
        memset(&zs, 0, sizeof(zs));
        /* Level 1: manifests are rewritten whenever small ones are merged (every few
         * commits, with all the entries of the table's growing manifest); at level 6
         * deflate was ~10% of the coordinator's CPU at a 1 s commit interval. */
        if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return cdc_error_set(e, CDC_ERR_INTERNAL, "could not initialize deflate");
        uLong bound = deflateBound(&zs, (uLong)w->block.len);
        uint8_t *tmp = malloc(bound);
        if (!tmp) {
            deflateEnd(&zs);
            return oom(e);
        }
        zs.next_in = w->block.data;
        zs.avail_in = (uInt)w->block.len;
        zs.next_out = tmp;
        zs.avail_out = (uInt)bound;
        int rc = deflate(&zs, Z_FINISH);
        size_t clen = zs.total_out;
        deflateEnd(&zs);
        if (rc != Z_STREAM_END) {
            free(tmp);
            return cdc_error_set(e, CDC_ERR_INTERNAL, "deflate of avro block failed: %d", rc);
        }
        cdc_avro_put_bytes(&w->out, tmp, clen);
        free(tmp);
    } else {
        cdc_avro_put_bytes(&w->out, w->block.data, w->block.len);
    }
    cdc_avro_put_raw(&w->out, w->sync, sizeof(w->sync));
    w->block.len = 0;
    w->block_count = 0;
    return w->out.oom ? oom(e) : CDC_OK;
}

cdc_err_t cdc_avro_writer_end_record(cdc_avro_writer_t *w, cdc_error_t *e)
{
    if (w->record.oom)
        return oom(e);
    cdc_avro_put_raw(&w->block, w->record.data, w->record.len);
    w->record.len = 0;
    if (w->block.oom)
        return oom(e);
    w->block_count++;
    if (w->block.len >= BLOCK_TARGET)
        return flush_block(w, e);
    return CDC_OK;
}

cdc_err_t cdc_avro_writer_finish(cdc_avro_writer_t *w, uint8_t **out, size_t *len, cdc_error_t *e)
{
    cdc_err_t rc = flush_block(w, e);
    if (rc != CDC_OK) {
        cdc_avro_writer_discard(w);
        return rc;
    }
    *out = w->out.data;
    *len = w->out.len;
    w->out.data = NULL;
    cdc_avro_writer_discard(w);
    return CDC_OK;
}

void cdc_avro_writer_discard(cdc_avro_writer_t *w)
{
    cdc_avro_buf_free(&w->out);
    cdc_avro_buf_free(&w->block);
    cdc_avro_buf_free(&w->record);
    w->block_count = 0;
}
