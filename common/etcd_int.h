/*
 * Internal to the etcd adapter (etcd.c, etcd_json.c): not for other modules.
 */
#ifndef CDC_ETCD_INT_H
#define CDC_ETCD_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/etcd.h"

struct json_t; /* jansson's, which the .c files include */

/* int64 fields come as strings ("123"); accept numbers too; absent = 0. */
int64_t cdc_etcd__jint(const struct json_t *obj, const char *name);

/* An int64 field's value: a string, as the gateway wants. */
struct json_t *cdc_etcd__jint_str(int64_t v);

/* obj.name = base64(data); 0, or -1 when out of memory. */
int cdc_etcd__jset_b64(struct json_t *obj, const char *name, const void *data, size_t len);

/* obj.key = base64(key), and with prefix obj.range_end = the end of key's prefix range. */
int cdc_etcd__jset_key(struct json_t *obj, const char *key, bool prefix);

/* Decodes a base64 field into a NUL-terminated heap buffer ("" when absent). */
int cdc_etcd__jbytes(const struct json_t *obj, const char *name, char **out, size_t *len);

/* One key-value pair of a response; 0, or -1 when malformed or out of memory. */
int cdc_etcd__decode_kv(const struct json_t *j, cdc_etcd_kv_t *kv);

/* A Range response's pairs; 0, or -1 when malformed or out of memory. */
int cdc_etcd__decode_range(const struct json_t *resp, cdc_etcd_kvs_t *out);

#endif
