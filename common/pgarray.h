/*
 * PostgreSQL's array text ("{1,2,NULL}", "{{a,b},{c,d}}", "{\"x y\",z}", optionally
 * prefixed by bounds "[0:1]={...}") as JSON array text: elements of number and boolean
 * encodings as JSON numbers and booleans, every other element as a JSON string of its
 * text (unquoted, unescaped), NULL as null (docs/events.md, "Values").
 */
#ifndef CDC_COMMON_PGARRAY_H
#define CDC_COMMON_PGARRAY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/cdcschema.h"

/* Whether s[0..len) is a JSON number literal. */
bool cdc_json_is_number(const char *s, size_t len);

/* Appends the JSON array text of the array text s[0..len) to b, elements encoded by
 * elem_enc; false when s is no array text (or out of memory). */
bool cdc_pg_array_to_json(cdc_buf_t *b, cdc_value_enc_t elem_enc, const char *s, size_t len);

#endif
