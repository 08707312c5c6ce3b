/*
 * Internals shared by the two decoders of worker/decode.c (the general one, which walks a
 * jansson tree) and worker/decode_fast.c (the direct decoder of the capture's own event
 * format). Not for use outside worker/decode*.c and their tests: both decoders convert
 * values and build entity keys with the same functions, which is what keeps their
 * results identical.
 */
#ifndef CDC_WORKER_DECODE_INT_H
#define CDC_WORKER_DECODE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/decode.h"

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

/* Builds c->entity from row r (schema s). false with *de set (no key, null key), or false
 * with de->cls untouched when out of memory. */
bool cdc_decode_entity(const cdc_source_schema_t *s, const cdc_row_t *r, cdc_change_t *c,
                       cdc_decode_error_t *de);

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
