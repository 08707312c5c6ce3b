/*
 * Thrift compact-protocol encoder and decoder (see thrift.h). Byte-level rules
 * from the Thrift compact protocol specification; used for Parquet metadata only.
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

/* ---- read side ------------------------------------------------------------------ */

void cdc_thrift_reader_init(cdc_thrift_reader_t *r, const void *data, size_t len)
{
    r->p = data;
    r->end = r->p + len;
    r->depth = 0;
}

bool cdc_thrift_read_varint(cdc_thrift_reader_t *r, uint64_t *v)
{
    uint64_t x = 0;

    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end)
            return false;
        uint8_t b = *r->p++;
        if (shift == 63 && b > 1) /* the tenth byte holds bit 63 only */
            return false;
        x |= (uint64_t)(b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
            *v = x;
            return true;
        }
    }
    return false;
}

bool cdc_thrift_read_i64(cdc_thrift_reader_t *r, int64_t *v)
{
    uint64_t u;

    if (!cdc_thrift_read_varint(r, &u))
        return false;
    *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return true;
}

bool cdc_thrift_read_i32(cdc_thrift_reader_t *r, int32_t *v)
{
    int64_t x;

    if (!cdc_thrift_read_i64(r, &x) || x < INT32_MIN || x > INT32_MAX)
        return false;
    *v = (int32_t)x;
    return true;
}

bool cdc_thrift_read_i16(cdc_thrift_reader_t *r, int16_t *v)
{
    int64_t x;

    if (!cdc_thrift_read_i64(r, &x) || x < INT16_MIN || x > INT16_MAX)
        return false;
    *v = (int16_t)x;
    return true;
}

bool cdc_thrift_read_binary(cdc_thrift_reader_t *r, const uint8_t **data, size_t *len)
{
    uint64_t n;

    if (!cdc_thrift_read_varint(r, &n) || n > cdc_thrift_reader_left(r))
        return false;
    *data = r->p;
    *len = (size_t)n;
    r->p += n;
    return true;
}

bool cdc_thrift_read_field_header(cdc_thrift_reader_t *r, int16_t *last_fid, int16_t *fid,
                                  uint8_t *type)
{
    uint8_t b, delta;

    if (r->p >= r->end)
        return false;
    b = *r->p++;
    *type = b & 0x0F;
    if (*type == CDC_THRIFT_STOP)
        return b == 0;
    delta = b >> 4;
    if (delta != 0) {
        if ((int)*last_fid + delta > INT16_MAX)
            return false;
        *fid = (int16_t)(*last_fid + delta);
    } else if (!cdc_thrift_read_i16(r, fid)) {
        return false;
    }
    *last_fid = *fid;
    return true;
}

bool cdc_thrift_read_list_header(cdc_thrift_reader_t *r, uint8_t *elem_type, size_t *n)
{
    uint64_t count;
    uint8_t b;

    if (r->p >= r->end)
        return false;
    b = *r->p++;
    *elem_type = b & 0x0F;
    count = b >> 4;
    if (count == 15 && !cdc_thrift_read_varint(r, &count))
        return false;
    if (count > cdc_thrift_reader_left(r))
        return false;
    *n = (size_t)count;
    return true;
}

static bool skip_bytes(cdc_thrift_reader_t *r, size_t n)
{
    if (n > cdc_thrift_reader_left(r))
        return false;
    r->p += n;
    return true;
}

/* Skips a list or set, or a map, after its field header. */
static bool skip_container(cdc_thrift_reader_t *r, uint8_t type)
{
    uint8_t elem, key = 0, val = 0;
    size_t n;
    uint64_t count;

    if (type != CDC_THRIFT_MAP) {
        if (!cdc_thrift_read_list_header(r, &elem, &n))
            return false;
        for (size_t i = 0; i < n; i++) {
            /* a bool element is one byte, not a field-header type */
            bool ok = elem == CDC_THRIFT_TRUE || elem == CDC_THRIFT_FALSE
                          ? skip_bytes(r, 1)
                          : cdc_thrift_skip(r, elem);
            if (!ok)
                return false;
        }
        return true;
    }
    if (!cdc_thrift_read_varint(r, &count) || count > cdc_thrift_reader_left(r))
        return false;
    if (count > 0) {
        if (r->p >= r->end)
            return false;
        key = *r->p >> 4;
        val = *r->p & 0x0F;
        r->p++;
    }
    for (uint64_t i = 0; i < count; i++) {
        for (int k = 0; k < 2; k++) {
            uint8_t t = k == 0 ? key : val;
            bool ok = t == CDC_THRIFT_TRUE || t == CDC_THRIFT_FALSE ? skip_bytes(r, 1)
                                                                    : cdc_thrift_skip(r, t);
            if (!ok)
                return false;
        }
    }
    return true;
}

bool cdc_thrift_skip(cdc_thrift_reader_t *r, uint8_t type)
{
    uint64_t u;
    const uint8_t *data;
    size_t len;
    int16_t last = 0, fid;
    uint8_t ft;
    bool ok = false;

    if (r->depth >= CDC_THRIFT_MAX_DEPTH)
        return false;
    r->depth++;
    switch (type) {
    case CDC_THRIFT_TRUE:
    case CDC_THRIFT_FALSE:
        ok = true; /* the value is in the field header */
        break;
    case CDC_THRIFT_BYTE:
        ok = skip_bytes(r, 1);
        break;
    case CDC_THRIFT_I16:
    case CDC_THRIFT_I32:
    case CDC_THRIFT_I64:
        ok = cdc_thrift_read_varint(r, &u);
        break;
    case CDC_THRIFT_DOUBLE:
        ok = skip_bytes(r, 8);
        break;
    case CDC_THRIFT_BINARY:
        ok = cdc_thrift_read_binary(r, &data, &len);
        break;
    case CDC_THRIFT_LIST:
    case CDC_THRIFT_SET:
    case CDC_THRIFT_MAP:
        ok = skip_container(r, type);
        break;
    case CDC_THRIFT_STRUCT:
        for (;;) {
            ok = cdc_thrift_read_field_header(r, &last, &fid, &ft);
            if (!ok || ft == CDC_THRIFT_STOP)
                break;
            ok = cdc_thrift_skip(r, ft);
            if (!ok)
                break;
        }
        break;
    default:
        break; /* not a compact-protocol type */
    }
    r->depth--;
    return ok;
}

bool cdc_thrift_read_struct_ints(cdc_thrift_reader_t *r, int64_t *v, uint32_t *seen, int n)
{
    int16_t last = 0, fid = 0;
    uint8_t type;

    *seen = 0;
    for (;;) {
        if (!cdc_thrift_read_field_header(r, &last, &fid, &type))
            return false;
        if (type == CDC_THRIFT_STOP)
            return true;
        bool is_int = type == CDC_THRIFT_I16 || type == CDC_THRIFT_I32 || type == CDC_THRIFT_I64;
        bool is_bool = type == CDC_THRIFT_TRUE || type == CDC_THRIFT_FALSE;
        if (fid >= 1 && fid <= n && n <= 32 && (is_int || is_bool)) {
            if (is_int && !cdc_thrift_read_i64(r, &v[fid - 1]))
                return false;
            if (is_bool)
                v[fid - 1] = type == CDC_THRIFT_TRUE;
            *seen |= 1u << (fid - 1);
        } else if (!cdc_thrift_skip(r, type)) {
            return false;
        }
    }
}
