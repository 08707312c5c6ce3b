/*
 * Minimal Avro binary encoder and object-container writer for Iceberg manifests and
 * manifest lists. We encode records ourselves instead of through avro-c's value API
 * because avro-c drops unknown schema attributes when it serializes a schema, and
 * Iceberg readers need the "field-id", "element-id", "key-id" and "value-id"
 * attributes in the file header exactly as written. Reading goes through avro-c
 * (see manifest.c), which handles any writer's field order and codec.
 */
#ifndef CDC_ICEBERG_AVRO_H
#define CDC_ICEBERG_AVRO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Growable byte buffer; an allocation failure sets oom and makes later puts no-ops. */
typedef struct cdc_avro_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    bool oom;
} cdc_avro_buf_t;

void cdc_avro_buf_free(cdc_avro_buf_t *b);
void cdc_avro_put_raw(cdc_avro_buf_t *b, const void *p, size_t n);
/* Avro int and long: zigzag, then base-128 varint, least significant group first. */
void cdc_avro_put_long(cdc_avro_buf_t *b, int64_t v);
void cdc_avro_put_bool(cdc_avro_buf_t *b, bool v);
void cdc_avro_put_double(cdc_avro_buf_t *b, double v);
/* bytes and string: long length, then the bytes. */
void cdc_avro_put_bytes(cdc_avro_buf_t *b, const void *p, size_t n);
void cdc_avro_put_string(cdc_avro_buf_t *b, const char *s);

/* Encodes v as a zigzag varint into out (at least 10 bytes); returns the length. */
size_t cdc_avro_zigzag_encode(int64_t v, uint8_t *out);
/* Decodes one zigzag varint; returns bytes consumed, 0 on truncated or overlong input. */
size_t cdc_avro_zigzag_decode(const uint8_t *p, size_t n, int64_t *v);

typedef enum cdc_avro_codec {
    CDC_AVRO_CODEC_NULL = 0,
    CDC_AVRO_CODEC_DEFLATE,
} cdc_avro_codec_t;

/*
 * Object container writer: header (magic, metadata map with avro.schema and
 * avro.codec plus the caller's keys, random 16-byte sync marker), then blocks of
 * records. The caller encodes each record into w->record and calls
 * cdc_avro_writer_end_record(); blocks are flushed at about 64 KiB.
 */
typedef struct cdc_avro_writer {
    cdc_avro_buf_t out;    /* the file being built */
    cdc_avro_buf_t block;  /* encoded records of the open block */
    cdc_avro_buf_t record; /* the caller encodes one record here */
    int64_t block_count;
    cdc_avro_codec_t codec;
    uint8_t sync[16];
} cdc_avro_writer_t;

/*
 * Starts a container with the given schema JSON (written verbatim) and metadata
 * pairs meta[0..2*nmeta) = key, value, key, value... (values are strings).
 */
cdc_err_t cdc_avro_writer_init(cdc_avro_writer_t *w, const char *schema_json,
                               cdc_avro_codec_t codec, const char *const *meta, size_t nmeta,
                               cdc_error_t *e);
/* Moves w->record into the open block, flushing the block when it is large. */
cdc_err_t cdc_avro_writer_end_record(cdc_avro_writer_t *w, cdc_error_t *e);
/*
 * Flushes the last block and hands the finished file to the caller (*out, owned by
 * the caller, free()); w is reset either way.
 */
cdc_err_t cdc_avro_writer_finish(cdc_avro_writer_t *w, uint8_t **out, size_t *len, cdc_error_t *e);
/* Releases everything held by w (after an error). */
void cdc_avro_writer_discard(cdc_avro_writer_t *w);

#endif
