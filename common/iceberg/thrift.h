/*
 * Thrift compact protocol, encoder and decoder, for the Parquet footer
 * (FileMetaData) and page headers. Parquet's metadata is defined in
 * parquet.thrift and always serialized with the compact protocol; there is no
 * Thrift C library in this build, so the few wire rules needed (ULEB128
 * varints, zigzag integers, field-id deltas in the field header, list headers,
 * STOP-terminated structs) are implemented here from the Thrift spec.
 *
 * Writing: cdc_thrift_init(); cdc_thrift_struct_begin(); field calls with
 * increasing or arbitrary field ids; cdc_thrift_struct_end(). Allocation
 * failures are sticky: check t->oom once at the end.
 *
 * Reading (the Parquet reader, parquet_read.h): a cursor over borrowed bytes;
 * every cdc_thrift_read_* function checks the bounds and returns false on a
 * truncated or malformed encoding, leaving the cursor somewhere inside the
 * input. A struct is read by calling cdc_thrift_read_field_header() until it
 * returns CDC_THRIFT_STOP, reading the fields it knows and cdc_thrift_skip()ing
 * the others.
 */
#ifndef CDC_ICEBERG_THRIFT_H
#define CDC_ICEBERG_THRIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Compact-protocol element types (as used in field and list headers). */
enum {
    CDC_THRIFT_STOP = 0, /* end of a struct (field headers only) */
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

/* ---- read side ------------------------------------------------------------------ */

typedef struct cdc_thrift_reader {
    const uint8_t *p;   /* next byte */
    const uint8_t *end; /* one past the last byte */
    int depth;          /* nesting of the value being skipped */
} cdc_thrift_reader_t;

void cdc_thrift_reader_init(cdc_thrift_reader_t *r, const void *data, size_t len);

/* Bytes left after the cursor. */
static inline size_t cdc_thrift_reader_left(const cdc_thrift_reader_t *r)
{
    return (size_t)(r->end - r->p);
}

/* Primitive decodings (no field header). Integers out of their type's range are refused. */
bool cdc_thrift_read_varint(cdc_thrift_reader_t *r, uint64_t *v);
bool cdc_thrift_read_i16(cdc_thrift_reader_t *r, int16_t *v); /* zigzag varint */
bool cdc_thrift_read_i32(cdc_thrift_reader_t *r, int32_t *v); /* zigzag varint */
bool cdc_thrift_read_i64(cdc_thrift_reader_t *r, int64_t *v); /* zigzag varint */
/* Length-prefixed bytes: *data points into the input (not NUL-terminated). */
bool cdc_thrift_read_binary(cdc_thrift_reader_t *r, const uint8_t **data, size_t *len);

/*
 * Field header of a struct: *type is CDC_THRIFT_STOP at the end of the struct, else the
 * field's type (CDC_THRIFT_TRUE/FALSE carry a bool field's value) and *fid its id.
 * *last_fid is the previous field id of this struct (start it at 0), updated.
 */
bool cdc_thrift_read_field_header(cdc_thrift_reader_t *r, int16_t *last_fid, int16_t *fid,
                                  uint8_t *type);

/*
 * List (or set) header: element type and count. A count larger than the bytes left is
 * refused (every element takes at least one byte), so it can size an allocation.
 */
bool cdc_thrift_read_list_header(cdc_thrift_reader_t *r, uint8_t *elem_type, size_t *n);

/*
 * Reads the rest of a struct (its fields up to STOP), keeping the integer and bool
 * fields with ids 1..n (n <= 32): v[id - 1] gets the value (a bool as 0 or 1) and bit
 * id - 1 of *seen is set. Other fields, and fields of other types, are skipped.
 */
bool cdc_thrift_read_struct_ints(cdc_thrift_reader_t *r, int64_t *v, uint32_t *seen, int n);

/* Skips one value of the given type (a field's, after its header), nested values
 * included, at most CDC_THRIFT_MAX_DEPTH deep. */
bool cdc_thrift_skip(cdc_thrift_reader_t *r, uint8_t type);

#endif
