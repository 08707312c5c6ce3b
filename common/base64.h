/*
 * Base64 (RFC 4648) for the places that meet it on the wire: etcd's JSON gateway
 * (keys and values) and Debezium's encoding of binary columns.
 */
#ifndef CDC_BASE64_H
#define CDC_BASE64_H

#include <stddef.h>

/* Standard alphabet with padding. Returns a malloc()ed NUL-terminated string the caller
 * frees, or NULL when out of memory. */
char *cdc_base64_encode(const void *data, size_t len);

/*
 * Decodes n characters of text (padding required where the length needs it; the URL-safe
 * '-' and '_' are accepted too). Returns a malloc()ed buffer with a NUL after the *len
 * decoded bytes, which the caller frees, or NULL on invalid input or out of memory.
 */
char *cdc_base64_decode(const char *text, size_t n, size_t *len);

/* The same into out (room for n / 4 * 3 + 1 bytes; out may be text itself, which is then
 * decoded in place): the decoded length, or -1 on invalid input (out then holds junk). */
ptrdiff_t cdc_base64_decode_into(const char *text, size_t n, char *out);

#endif
