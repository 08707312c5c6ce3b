/*
 * Internal interface of the warehouse storage module (storage.h), shared by its two
 * pieces: storage.c (the handle, the public entry points and the local backend) and
 * storage_s3.c (the S3 backend). Not for use outside common/iceberg/storage*.c.
 */
#ifndef CDC_ICEBERG_STORAGE_INT_H
#define CDC_ICEBERG_STORAGE_INT_H

#include "common/iceberg/storage.h"

struct cdc_storage {
    bool s3;
    char *endpoint;
    char *region;
    char *access_key;
    char *secret_key;
    bool path_style;
    size_t multipart_threshold;
    size_t part_size;
    int max_retries;
    long timeout_ms;
};

/* "out of memory in storage" */
cdc_err_t cdc_storage_oom(cdc_error_t *e);

/* A growing list of heap strings (listings, ETags); free with cdc_storage_list_free(). */
typedef struct cdc_storage_strlist {
    char **v;
    size_t n, cap;
} cdc_storage_strlist_t;

/* Appends s (taking it); false when s is NULL or out of memory (then s is freed). */
bool cdc_storage_strlist_add(cdc_storage_strlist_t *l, char *s);

/* ---- the S3 backend (storage_s3.c); locations are "s3://bucket/key" ------------------ */

/* Fills the S3 fields of s from cfg (region, endpoint, credentials). */
cdc_err_t cdc_storage_s3_init(cdc_storage_t *s, const cdc_storage_config_t *cfg, cdc_error_t *e);

/* HEAD: *exists, and *size (may be NULL) when it does. */
cdc_err_t cdc_storage_s3_head(cdc_storage_t *s, const char *location, bool *exists, int64_t *size,
                              cdc_error_t *e);
cdc_err_t cdc_storage_s3_put(cdc_storage_t *s, const char *location, const void *data, size_t len,
                             bool if_absent, cdc_error_t *e);
/* Uploads size bytes of fd in parts of s->part_size. */
cdc_err_t cdc_storage_s3_multipart(cdc_storage_t *s, const char *location, int fd, size_t size,
                                   cdc_error_t *e);
cdc_err_t cdc_storage_s3_get(cdc_storage_t *s, const char *location, uint8_t **data, size_t *len,
                             cdc_error_t *e);
cdc_err_t cdc_storage_s3_delete(cdc_storage_t *s, const char *location, cdc_error_t *e);
cdc_err_t cdc_storage_s3_list(cdc_storage_t *s, const char *prefix, char ***locations, size_t *n,
                              cdc_error_t *e);

#endif
