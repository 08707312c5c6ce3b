/*
 * Warehouse storage: the few object operations the Iceberg writer and committer
 * need (put, put-if-absent, get, delete, exists, list by prefix), over a local
 * directory (default) or an S3-compatible object store (SigV4-signed HTTP through
 * common/httpc.h). Every path is a fully qualified location: "file:///abs/path" or
 * "/abs/path" for the local backend, "s3://bucket/key" for S3. This module is the only
 * one that talks to object storage: storage.c holds the handle, the entry points and the
 * local backend, storage_s3.c the S3 backend.
 */
#ifndef CDC_ICEBERG_STORAGE_H
#define CDC_ICEBERG_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct cdc_storage cdc_storage_t;

typedef struct cdc_storage_config {
    const char
        *endpoint;      /* S3: "http://127.0.0.1:9000"; NULL = https://s3.<region>.amazonaws.com */
    const char *region; /* S3: default "us-east-1" */
    const char *access_key;     /* S3 */
    const char *secret_key;     /* S3 */
    bool path_style;            /* S3: bucket in the path (MinIO, s3rver) instead of the host */
    size_t multipart_threshold; /* S3: files at least this big use multipart; 0 = 16 MiB */
    size_t part_size;           /* S3: multipart part size; 0 = 8 MiB (min 5 MiB) */
    int max_retries;            /* retries on 5xx, 429 and timeouts; 0 = 5; -1 = none */
    long timeout_ms;            /* per request; 0 = 30000 */
} cdc_storage_config_t;

/*
 * Opens storage for a warehouse location; the scheme picks the backend ("s3://" ->
 * S3, otherwise local). cfg may be NULL for local. On success the caller owns *out
 * (cdc_storage_close). Thread-safe: one handle may be used from several threads.
 */
cdc_err_t cdc_storage_open(const char *warehouse, const cdc_storage_config_t *cfg,
                           cdc_storage_t **out, cdc_error_t *e);
void cdc_storage_close(cdc_storage_t *s);

/* Whether the handle is the local backend (then cdc_storage_local_path works). */
bool cdc_storage_is_local(const cdc_storage_t *s);

/*
 * Local backend only: the filesystem path of a location (newly allocated, caller
 * frees), or NULL for S3 or a foreign scheme. Workers may write files there directly.
 */
char *cdc_storage_local_path(const cdc_storage_t *s, const char *location);

/*
 * Local paths: mkdir -p of dir that fsyncs the parent of every directory it creates
 * (cheap when dir exists: one mkdir() call), and fsync of a directory (its entries
 * durable). For callers that place files in the warehouse themselves (hard links).
 */
cdc_err_t cdc_storage_local_mkdirs(const char *dir, cdc_error_t *e);
cdc_err_t cdc_storage_local_fsync_dir(const char *dir, cdc_error_t *e);

/*
 * Writes an object atomically (readers see the old object or the whole new one,
 * never a part), replacing an existing one. Local: temp file, fsync, rename, fsync dir.
 */
cdc_err_t cdc_storage_put(cdc_storage_t *s, const char *location, const void *data, size_t len,
                          cdc_error_t *e);

/*
 * cdc_storage_put without the directory fsync (local; S3: the same as cdc_storage_put):
 * the object's bytes are durable when it returns, its name once its directory is fsynced
 * by a later cdc_storage_put or cdc_storage_put_if_absent in the same directory. For
 * objects that only a later object in the same directory makes reachable: an Iceberg
 * commit's manifests and manifest list, made durable by the metadata file's put
 * (docs/iceberg.md, "Commit protocol"); a crash before it leaves unreferenced files at
 * worst, which the orphan cleanup removes.
 */
cdc_err_t cdc_storage_put_deferred(cdc_storage_t *s, const char *location, const void *data,
                                   size_t len, cdc_error_t *e);

/*
 * Creates an object only if it does not exist: CDC_ERR_EXISTS when it does. Local:
 * temp file, fsync, link() (fails on an existing name), fsync dir. S3: PUT with
 * If-None-Match: * (412 -> CDC_ERR_EXISTS); for stores that ignore the header a HEAD
 * check precedes the PUT, which is only safe with a single fenced writer.
 */
cdc_err_t cdc_storage_put_if_absent(cdc_storage_t *s, const char *location, const void *data,
                                    size_t len, cdc_error_t *e);

/* Uploads a local file (multipart on S3 when large). */
cdc_err_t cdc_storage_put_file(cdc_storage_t *s, const char *location, const char *local_path,
                               cdc_error_t *e);

/* Reads a whole object; *data (caller frees) is NUL-terminated for convenience. */
cdc_err_t cdc_storage_get(cdc_storage_t *s, const char *location, uint8_t **data, size_t *len,
                          cdc_error_t *e);

/* Deletes an object; a missing object is not an error. */
cdc_err_t cdc_storage_delete(cdc_storage_t *s, const char *location, cdc_error_t *e);

cdc_err_t cdc_storage_exists(cdc_storage_t *s, const char *location, bool *exists, cdc_error_t *e);

/* Size in bytes of an object (CDC_ERR_NOT_FOUND if missing). */
cdc_err_t cdc_storage_size(cdc_storage_t *s, const char *location, int64_t *size, cdc_error_t *e);

/*
 * Lists every object whose location starts with prefix (recursively), as fully
 * qualified locations in the prefix's form. The caller owns *locations and each
 * string (cdc_storage_list_free).
 */
cdc_err_t cdc_storage_list(cdc_storage_t *s, const char *prefix, char ***locations, size_t *n,
                           cdc_error_t *e);
void cdc_storage_list_free(char **locations, size_t n);

#endif
