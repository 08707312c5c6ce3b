/*
 * Project-wide error codes. Every fallible function returns a cdc_err_t (0 = OK)
 * and, where a human needs detail, fills a cdc_error_t. Adapters translate library
 * error codes (libpq, librdkafka, NNG, libcurl, RocksDB) to these codes at their
 * boundary; callers decide retries only from cdc_error_t.retriable, never from text.
 */
#ifndef CDC_ERR_H
#define CDC_ERR_H

#include <stdbool.h>
#include <stddef.h>

typedef enum cdc_err {
    CDC_OK = 0,
    CDC_ERR_NOMEM,       /* allocation failed */
    CDC_ERR_INVALID,     /* invalid argument or input */
    CDC_ERR_CONFIG,      /* bad configuration */
    CDC_ERR_IO,          /* local I/O failed */
    CDC_ERR_TIMEOUT,     /* deadline passed (retriable) */
    CDC_ERR_UNAVAILABLE, /* peer or service unreachable (retriable) */
    CDC_ERR_CONFLICT,    /* lost a race, e.g. commit conflict (retriable) */
    CDC_ERR_NOT_FOUND,   /* object does not exist */
    CDC_ERR_EXISTS,      /* object already exists */
    CDC_ERR_PROTOCOL,    /* peer violated the protocol or sent garbage */
    CDC_ERR_FENCED,      /* our term/lease is no longer valid */
    CDC_ERR_STALE,       /* message from an old term or generation */
    CDC_ERR_CORRUPT,     /* stored data failed validation */
    CDC_ERR_UNSUPPORTED, /* valid but not supported */
    CDC_ERR_CLOSED,      /* object was closed or is shutting down */
    CDC_ERR_SOURCE,      /* PostgreSQL reported an error */
    CDC_ERR_KAFKA,       /* Kafka reported an error */
    CDC_ERR_STORAGE,     /* warehouse or object store error */
    CDC_ERR_STATE,       /* state store (RocksDB) error */
    CDC_ERR_INTERNAL,    /* bug: invariant violated */
    CDC_ERR__COUNT
} cdc_err_t;

/* Short, stable, lower-case description of an error code; never NULL. */
const char *cdc_err_str(cdc_err_t err);

/* Symbolic name of an error code, e.g. "CDC_ERR_TIMEOUT"; never NULL. */
const char *cdc_err_name(cdc_err_t err);

/* Whether an error of this code is worth retrying by default. */
bool cdc_err_default_retriable(cdc_err_t err);

/* Error detail for humans and for retry decisions. */
typedef struct cdc_error {
    cdc_err_t code;
    bool retriable;
    /* the failure was a full file system (ENOSPC or EDQUOT named in the message, as
     * strerror and RocksDB's errors word it), set by cdc_error_set and kept by
     * cdc_error_prefix (docs/operations.md, "Disk faults") */
    bool disk_full;
    char msg[512];
} cdc_error_t;

/*
 * Fills *e (when e is not NULL) with code, the default retriable flag and a
 * printf-style message, and returns code so callers can write
 * `return cdc_error_set(e, CDC_ERR_IO, "could not open \"%s\": %s", path, strerror(errno));`
 */
cdc_err_t cdc_error_set(cdc_error_t *e, cdc_err_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same as cdc_error_set() with an explicit retriable flag. */
cdc_err_t cdc_error_set_retriable(cdc_error_t *e, cdc_err_t code, bool retriable, const char *fmt,
                                  ...) __attribute__((format(printf, 4, 5)));

/* Prefixes the existing message: "<prefix>: <old message>". Returns e->code. */
cdc_err_t cdc_error_prefix(cdc_error_t *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Resets *e to CDC_OK with an empty message. */
void cdc_error_clear(cdc_error_t *e);

#endif
