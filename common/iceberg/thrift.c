/*
 * Thrift compact-protocol encoder (see thrift.h). Byte-level rules from the
 * Thrift compact protocol specification; used for Parquet metadata only.
 */
#include "common/iceberg/thrift.h"

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

void cdc_thrift_init(cdc_thrift_t *t)
{
    memset(t, 0, sizeof(*t));
}

void cdc_thrift_reset(cdc_thrift_t *t)
{
    t->len = 0;
    t->oom = false;
    t->depth = 0;
}

void cdc_thrift_free(cdc_thrift_t *t)
{
    free(t->data);
    memset(t, 0, sizeof(*t));
}

static bool reserve(cdc_thrift_t *t, size_t n)
{
    if (t->len + n <= t->cap)
        return true;
    if (t->oom || cdc_array_reserve(t->data, t->cap, t->len + n, 256) != CDC_OK) {
        t->oom = true;
        return false;
    }
    return true;
}

static void put_byte(cdc_thrift_t *t, uint8_t b)
{
    if (reserve(t, 1))
        t->data[t->len++] = b;
}

void cdc_thrift_varint(cdc_thrift_t *t, uint64_t v)
{
    if (!reserve(t, 10))
        return;
    while (v >= 0x80) {
        t->data[t->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t->data[t->len++] = (uint8_t)v;
}

void cdc_thrift_i32(cdc_thrift_t *t, int32_t v)
{
    cdc_thrift_varint(t, cdc_thrift_zigzag32(v));
}

void cdc_thrift_i64(cdc_thrift_t *t, int64_t v)
{
    cdc_thrift_varint(t, cdc_thrift_zigzag64(v));
}

void cdc_thrift_binary(cdc_thrift_t *t, const void *data, size_t len)
{
    cdc_thrift_varint(t, len);
    if (len > 0 && reserve(t, len)) {
        memcpy(t->data + t->len, data, len);
        t->len += len;
    }
}

void cdc_thrift_struct_begin(cdc_thrift_t *t)
{
    if (t->depth < CDC_THRIFT_MAX_DEPTH)
        t->last_fid[t->depth] = 0;
    t->depth++;
}

void cdc_thrift_struct_end(cdc_thrift_t *t)
{
    put_byte(t, 0); /* STOP */
    if (t->depth > 0)
        t->depth--;
}

void cdc_thrift_field_header(cdc_thrift_t *t, int16_t fid, uint8_t type)
{
    int slot = t->depth > 0 ? t->depth - 1 : 0;
    int16_t last = 0;
    int delta;

    if (slot >= CDC_THRIFT_MAX_DEPTH) { /* deeper than tracked: always long form */
        put_byte(t, type);
        cdc_thrift_i32(t, fid);
        return;
    }
    last = t->last_fid[slot];
    delta = (int)fid - (int)last;
    if (delta > 0 && delta <= 15) {
        put_byte(t, (uint8_t)((delta << 4) | type));
    } else {
        put_byte(t, type);
        cdc_thrift_i32(t, fid); /* i16 on the wire: zigzag varint */
    }
    t->last_fid[slot] = fid;
}

void cdc_thrift_field_bool(cdc_thrift_t *t, int16_t fid, bool v)
{
    cdc_thrift_field_header(t, fid, v ? CDC_THRIFT_TRUE : CDC_THRIFT_FALSE);
}

void cdc_thrift_field_i32(cdc_thrift_t *t, int16_t fid, int32_t v)
{
    cdc_thrift_field_header(t, fid, CDC_THRIFT_I32);
    cdc_thrift_i32(t, v);
}

void cdc_thrift_field_i64(cdc_thrift_t *t, int16_t fid, int64_t v)
{
    cdc_thrift_field_header(t, fid, CDC_THRIFT_I64);
    cdc_thrift_i64(t, v);
}

void cdc_thrift_field_binary(cdc_thrift_t *t, int16_t fid, const void *data, size_t len)
{
    cdc_thrift_field_header(t, fid, CDC_THRIFT_BINARY);
    cdc_thrift_binary(t, data, len);
}

void cdc_thrift_field_string(cdc_thrift_t *t, int16_t fid, const char *s)
{
    cdc_thrift_field_binary(t, fid, s, strlen(s));
}

void cdc_thrift_field_struct_begin(cdc_thrift_t *t, int16_t fid)
{
    cdc_thrift_field_header(t, fid, CDC_THRIFT_STRUCT);
    cdc_thrift_struct_begin(t);
}

void cdc_thrift_list_header(cdc_thrift_t *t, uint8_t elem_type, size_t n)
{
    if (n < 15) {
        put_byte(t, (uint8_t)((n << 4) | elem_type));
    } else {
        put_byte(t, (uint8_t)(0xF0 | elem_type));
        cdc_thrift_varint(t, n);
    }
}

void cdc_thrift_field_list_begin(cdc_thrift_t *t, int16_t fid, uint8_t elem_type, size_t n)
{
    cdc_thrift_field_header(t, fid, CDC_THRIFT_LIST);
    cdc_thrift_list_header(t, elem_type, n);
}
