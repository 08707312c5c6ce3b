/*
 * The data of the etcd adapter: the end of a key prefix's range, and clearing etcd.h's
 * result types (see etcd.h); the JSON of the gateway's messages (see etcd_int.h): int64
 * fields as strings, keys and values in base64, key-value pairs and ranges decoded into
 * etcd.h's types. Pure helpers of etcd.c and its callers; no state, and no call back
 * into etcd.c.
 */
#include "common/etcd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/base64.h"

char *cdc_etcd_prefix_end(const char *prefix, size_t *len)
{
    size_t n = strlen(prefix);
    char *end = malloc(n + 1);
    if (end == NULL)
        return NULL;
    memcpy(end, prefix, n + 1);
    while (n > 0) {
        unsigned char ch = (unsigned char)end[n - 1];
        if (ch < 0xff) {
            end[n - 1] = (char)(ch + 1);
            end[n] = '\0';
            *len = n;
            return end;
        }
        n--;
    }
    /* empty prefix or all 0xff: "\0" means "to the end of the keyspace" */
    end[0] = '\0';
    *len = 1;
    return end;
}

void cdc_etcd_kv_clear(cdc_etcd_kv_t *kv)
{
    if (kv == NULL)
        return;
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof(*kv));
}

void cdc_etcd_kvs_clear(cdc_etcd_kvs_t *kvs)
{
    if (kvs == NULL)
        return;
    for (size_t i = 0; i < kvs->count; i++)
        cdc_etcd_kv_clear(&kvs->kvs[i]);
    free(kvs->kvs);
    memset(kvs, 0, sizeof(*kvs));
}

void cdc_etcd_txn_result_clear(cdc_etcd_txn_result_t *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->count; i++)
        cdc_etcd_kvs_clear(&r->responses[i]);
    free(r->responses);
    memset(r, 0, sizeof(*r));
}

void cdc_etcd_events_clear(cdc_etcd_events_t *ev)
{
    if (ev == NULL)
        return;
    for (size_t i = 0; i < ev->count; i++)
        cdc_etcd_kv_clear(&ev->events[i].kv);
    free(ev->events);
    memset(ev, 0, sizeof(*ev));
}

/* int64 fields come as strings ("123"); accept numbers too; absent = 0. */
int64_t cdc_etcd__jint(const json_t *obj, const char *name)
{
    const json_t *v = json_object_get(obj, name);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    return 0;
}

json_t *cdc_etcd__jint_str(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    return json_string(buf);
}

int cdc_etcd__jset_b64(json_t *obj, const char *name, const void *data, size_t len)
{
    char *b = cdc_base64_encode(data, len);
    if (b == NULL)
        return -1;
    int rv = json_object_set_new(obj, name, json_string(b));
    free(b);
    return rv;
}

int cdc_etcd__jset_key(json_t *obj, const char *key, bool prefix)
{
    if (cdc_etcd__jset_b64(obj, "key", key, strlen(key)) != 0)
        return -1;
    if (prefix) {
        size_t n;
        char *end = cdc_etcd_prefix_end(key, &n);
        if (end == NULL)
            return -1;
        int rv = cdc_etcd__jset_b64(obj, "range_end", end, n);
        free(end);
        return rv;
    }
    return 0;
}

/* Decodes a base64 field into a NUL-terminated heap buffer ("" when absent). */
int cdc_etcd__jbytes(const json_t *obj, const char *name, char **out, size_t *len)
{
    const char *s = json_string_value(json_object_get(obj, name));
    *out = cdc_base64_decode(s ? s : "", s ? strlen(s) : 0, len);
    return *out == NULL ? -1 : 0;
}

int cdc_etcd__decode_kv(const json_t *j, cdc_etcd_kv_t *kv)
{
    memset(kv, 0, sizeof(*kv));
    if (cdc_etcd__jbytes(j, "key", &kv->key, &kv->key_len) != 0 ||
        cdc_etcd__jbytes(j, "value", &kv->value, &kv->value_len) != 0) {
        cdc_etcd_kv_clear(kv);
        return -1;
    }
    kv->create_revision = cdc_etcd__jint(j, "create_revision");
    kv->mod_revision = cdc_etcd__jint(j, "mod_revision");
    kv->version = cdc_etcd__jint(j, "version");
    kv->lease = cdc_etcd__jint(j, "lease");
    return 0;
}

int cdc_etcd__decode_range(const json_t *resp, cdc_etcd_kvs_t *out)
{
    const json_t *kvs = json_object_get(resp, "kvs");
    memset(out, 0, sizeof(*out));
    out->revision = cdc_etcd__jint(json_object_get(resp, "header"), "revision");
    out->more = json_is_true(json_object_get(resp, "more"));
    size_t n = json_is_array(kvs) ? json_array_size(kvs) : 0;
    if (n == 0)
        return 0;
    out->kvs = calloc(n, sizeof(*out->kvs));
    if (out->kvs == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (cdc_etcd__decode_kv(json_array_get(kvs, i), &out->kvs[i]) != 0) {
            cdc_etcd_kvs_clear(out);
            return -1;
        }
        out->count = i + 1;
    }
    return 0;
}
