/*
 * Internals shared by the pieces of the decoder (worker/decode.h): the two decoders,
 * worker/decode.c (the general one, which walks a jansson tree) and worker/decode_fast.c
 * (the direct decoder of the capture's own event format), and what they share: value
 * conversion (worker/convert.c), entity keys (worker/row.c) and the catalog's schemas of
 * Kafka Connect envelopes (worker/catalog.c). Not for use outside these files and their
 * tests: both decoders convert values and build entity keys with the same functions,
 * which is what keeps their results identical.
 */
#ifndef CDC_WORKER_DECODE_INT_H
#define CDC_WORKER_DECODE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "worker/decode.h"

typedef struct json_t json_t; /* jansson's, for the tree path */

/* A JSON scalar as the value converter sees it. */
typedef enum cdc_jv_type {
    CDC_JV_NULL = 0,
    CDC_JV_TRUE,
    CDC_JV_FALSE,
    CDC_JV_INT,    /* i (jansson's json_int_t range) */
    CDC_JV_REAL,   /* d (strtod of the literal, as jansson does) */
    CDC_JV_STRING, /* s[0..n), NUL-terminated at s[n], no NUL inside (borrowed) */
    CDC_JV_OTHER,  /* object or array */
} cdc_jv_type_t;

typedef struct cdc_jv {
    cdc_jv_type_t t;
    int64_t i;
    double d;
    const char *s;
    size_t n;
} cdc_jv_t;

/*
 * Converts j to col's type into v (bytes malloc'd, owned by v). Returns 1 when done, 0 on
 * a type mismatch (v zeroed; the caller reports it), -1 when out of memory. An object or
 * array (CDC_JV_OTHER) is always a mismatch here; the tree path serializes it for string
 * columns itself.
 */
int cdc_decode_convert(const cdc_column_t *col, const cdc_jv_t *j, const char *placeholder,
                       cdc_val_t *v);

/* Copies bytes p[0..n) into v->bytes (malloc'd); false when out of memory. */
bool cdc_val_set_bytes(cdc_val_t *v, const void *p, size_t n);

/*
 * Decodes a JSON object into a row of schema s (convert.c): every column converted as by
 * cdc_decode_convert, missing columns null. false with *de set on a type mismatch (or out
 * of memory); r then holds nothing. With nulled, a type mismatch in a column that is
 * neither a key nor required makes that column null instead and counts it in *nulled;
 * the first one counted sets *de's class and message (cdc_change_t, `nulled`).
 */
bool cdc_decode_row_json(const cdc_source_schema_t *s, json_t *obj, const char *placeholder,
                         cdc_row_t *r, unsigned *nulled, cdc_decode_error_t *de);

/* Builds c->entity from row r (schema s). false with *de set (no key, null key), or false
 * with de->cls untouched when out of memory. */
bool cdc_decode_entity(const cdc_source_schema_t *s, const cdc_row_t *r, cdc_change_t *c,
                       cdc_decode_error_t *de);

/*
 * The schema of an event from a Kafka Connect struct schema (`fields` of the row struct)
 * and the key field names (catalog.c): found among the topic's embedded schemas, or
 * registered as a new one. NULL with *de set on failure.
 */
const cdc_source_schema_t *cdc_catalog_connect_schema(cdc_catalog_t *c, const char *topic,
                                                      const char *ns, const char *table,
                                                      json_t *fields, json_t *keynames,
                                                      cdc_decode_error_t *de);

/* Splits "<prefix>.<schema>.<table>" into ns and table (the last two parts; "public" and
 * the topic when it has no dot). */
void cdc_catalog_names_from_topic(const char *topic, char *ns, size_t nsz, char *table, size_t tsz);

/* The string member k of JSON object o, or NULL. */
const char *cdc_json_str(json_t *o, const char *k);

/* snprintf(dst, size, "%.*s", n, src) for a src without NUL in its first n bytes, minus
 * the cost of the formatting machinery (it runs several times per event). */
static inline void cdc_copy_name(char *dst, size_t size, const char *src, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* snprintf(dst, size, "%s", src) */
static inline void cdc_copy_str(char *dst, size_t size, const char *src)
{
    cdc_copy_name(dst, size, src, strlen(src));
}

/* Milliseconds (a source's ts_ms) as microseconds, saturated at the int64 range: an
 * out-of-range ts_ms of a foreign event must not overflow (found by tests/fuzz/decode.c). */
static inline int64_t cdc_decode_ms_to_us(int64_t ms)
{
    if (ms > INT64_MAX / 1000)
        return INT64_MAX;
    if (ms < INT64_MIN / 1000)
        return INT64_MIN;
    return ms * 1000;
}
/* Commit LSN from Debezium's source.sequence text "[\"<commit>\",\"<lsn>\"]". */
bool cdc_decode_sequence_text(const char *seq, uint64_t *commit_lsn);

/* The placeholder for unavailable values in effect for opts. */
const char *cdc_decode_placeholder(const cdc_decode_options_t *opts);

/*
 * The general decoder alone (cdc_decode without the direct path): every accepted form,
 * every error and DLQ class. cdc_decode's behaviour is defined by this function.
 */
cdc_err_t cdc_decode_tree(cdc_catalog_t *cat, const cdc_decode_options_t *opts,
                          const cdc_decode_input_t *in, cdc_change_t *out, cdc_decode_error_t *de);

/*
 * The direct decoder of capture events (decode_fast.c). Returns true when it decoded the
 * record into *out and *de exactly as cdc_decode_tree would have (*out released with
 * cdc_change_clear). Returns false, with *out cleared and *de untouched, for anything it
 * does not handle exactly: the caller then runs cdc_decode_tree with the same *in, which
 * also produces every error. When it called in->header_version it stores the result in
 * in->schema_version and clears the callback (same meaning, one lookup). Expects a
 * non-NULL value within the size limit.
 */
bool cdc_decode_fast(cdc_catalog_t *cat, const cdc_decode_options_t *opts, cdc_decode_input_t *in,
                     cdc_change_t *out, cdc_decode_error_t *de);

#endif
