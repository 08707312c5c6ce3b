/*
 * JSON Patch (RFC 6902) over JSON text: the operator-supplied transformation that
 * `cdcctl dlq replay --transform FILE` applies to a dead letter's payload before it goes
 * back into the pipeline (docs/operations.md, "Dead letters: inspection and replay").
 * Operations add, remove, replace, move, copy and test, with JSON Pointer (RFC 6901)
 * paths ("" is the whole document, "~1" a '/', "~0" a '~', "-" the end of an array). A
 * patch applies all or nothing. The result is compact JSON with the members in their
 * order; integers keep every digit (64-bit), reals are written with 17 significant
 * digits, which read back as the same double.
 */
#ifndef CDC_COMMON_JSONPATCH_H
#define CDC_COMMON_JSONPATCH_H

#include <stddef.h>

#include "common/err.h"

typedef struct cdc_jsonpatch cdc_jsonpatch_t;

/*
 * Parses a patch document: a JSON array of operation objects. A malformed patch (not
 * an array, an unknown op, a missing "path", "value" or "from", a path that is not a
 * JSON Pointer) is CDC_ERR_INVALID, the message naming the operation by its index. On
 * success *out is owned by the caller (cdc_jsonpatch_free()).
 */
cdc_err_t cdc_jsonpatch_parse(const char *text, size_t len, cdc_jsonpatch_t **out, cdc_error_t *e);

/* Number of operations of p. */
size_t cdc_jsonpatch_count(const cdc_jsonpatch_t *p);

/*
 * Applies p to the JSON text doc. On success *out (malloc'd, NUL-terminated, the caller
 * frees it) holds the patched document and *out_len its length. Failures leave *out NULL:
 * CDC_ERR_INVALID when doc is not JSON or an operation cannot apply (a path that does
 * not exist, an array index out of range, a move into its own child), CDC_ERR_CONFLICT
 * (not retriable) when a "test" operation finds another value: the document is not one
 * the patch is meant for. The message names the operation.
 */
cdc_err_t cdc_jsonpatch_apply(const cdc_jsonpatch_t *p, const char *doc, size_t len, char **out,
                              size_t *out_len, cdc_error_t *e);

/* NULL is allowed. */
void cdc_jsonpatch_free(cdc_jsonpatch_t *p);

#endif
