/*
 * Thrift compact-protocol encoder, write side only, for the Parquet footer
 * (FileMetaData) and page headers. Parquet's metadata is defined in
 * parquet.thrift and always serialized with the compact protocol; there is no
 * Thrift C library in this build, so the few wire rules needed (ULEB128
 * varints, zigzag integers, field-id deltas in the field header, list headers,
 * STOP-terminated structs) are implemented here from the Thrift spec.
 *
 * Usage: cdc_thrift_init(); cdc_thrift_struct_begin(); field calls with
 * increasing or arbitrary field ids; cdc_thrift_struct_end(). Allocation
 * failures are sticky: check t->oom once at the end.
 */
#ifndef CDC_ICEBERG_THRIFT_H
#define CDC_ICEBERG_THRIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Compact-protocol element types (as used in field and list headers). */
enum {
    CDC_THRIFT_TRUE = 1,
    CDC_THRIFT_FALSE = 2,
    CDC_THRIFT_BYTE = 3,
    CDC_THRIFT_I16 = 4,
    CDC_THRIFT_I32 = 5,
    CDC_THRIFT_I64 = 6,
    CDC_THRIFT_DOUBLE = 7,
    CDC_THRIFT_BINARY = 8,
    CDC_THRIFT_LIST = 9,
    CDC_THRIFT_SET = 10,
    CDC_THRIFT_MAP = 11,
    CDC_THRIFT_STRUCT = 12,
};

#define CDC_THRIFT_MAX_DEPTH 16

typedef struct cdc_thrift {
    uint8_t *data; /* encoded bytes, owned */
    size_t len;
    size_t cap;
    bool oom; /* an allocation failed; the contents are incomplete */
    int depth;
    int16_t last_fid[CDC_THRIFT_MAX_DEPTH]; /* last field id per open struct */
} cdc_thrift_t;

void cdc_thrift_init(cdc_thrift_t *t);
/* Empties the buffer, keeping its memory. */
void cdc_thrift_reset(cdc_thrift_t *t);
void cdc_thrift_free(cdc_thrift_t *t);

/* Primitive encodings (no field header): ULEB128 varint, zigzag of signed values. */
void cdc_thrift_varint(cdc_thrift_t *t, uint64_t v);
void cdc_thrift_i32(cdc_thrift_t *t, int32_t v); /* zigzag varint */
void cdc_thrift_i64(cdc_thrift_t *t, int64_t v); /* zigzag varint */
void cdc_thrift_binary(cdc_thrift_t *t, const void *data, size_t len);
static inline uint64_t cdc_thrift_zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (v < 0 ? ~(uint64_t)0 : 0);
}
static inline uint32_t cdc_thrift_zigzag32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (v < 0 ? ~(uint32_t)0 : 0);
}

/* Opens a struct (a list element or the top level) / writes STOP and closes it. */
void cdc_thrift_struct_begin(cdc_thrift_t *t);
void cdc_thrift_struct_end(cdc_thrift_t *t);

/* Field header: short form (delta 1..15 from the previous id) or long form. */
void cdc_thrift_field_header(cdc_thrift_t *t, int16_t fid, uint8_t type);

void cdc_thrift_field_bool(cdc_thrift_t *t, int16_t fid, bool v);
void cdc_thrift_field_i32(cdc_thrift_t *t, int16_t fid, int32_t v);
void cdc_thrift_field_i64(cdc_thrift_t *t, int16_t fid, int64_t v);
void cdc_thrift_field_binary(cdc_thrift_t *t, int16_t fid, const void *data, size_t len);
void cdc_thrift_field_string(cdc_thrift_t *t, int16_t fid, const char *s);
/* Field header of a struct-typed field followed by cdc_thrift_struct_begin(). */
void cdc_thrift_field_struct_begin(cdc_thrift_t *t, int16_t fid);
/* Field header of a list-typed field followed by the list header. */
void cdc_thrift_field_list_begin(cdc_thrift_t *t, int16_t fid, uint8_t elem_type, size_t n);
/* List header alone: size < 15 in the high nibble, else 0xF and a varint. */
void cdc_thrift_list_header(cdc_thrift_t *t, uint8_t elem_type, size_t n);

#endif
