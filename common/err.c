/*
 * Error codes and the error-detail helpers shared by every module.
 */
#include "common/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    const char *desc;
    bool retriable;
} table[CDC_ERR__COUNT] = {
    [CDC_OK] = {"CDC_OK", "success", false},
    [CDC_ERR_NOMEM] = {"CDC_ERR_NOMEM", "out of memory", false},
    [CDC_ERR_INVALID] = {"CDC_ERR_INVALID", "invalid argument", false},
    [CDC_ERR_CONFIG] = {"CDC_ERR_CONFIG", "invalid configuration", false},
    [CDC_ERR_IO] = {"CDC_ERR_IO", "i/o error", false},
    [CDC_ERR_TIMEOUT] = {"CDC_ERR_TIMEOUT", "timed out", true},
    [CDC_ERR_UNAVAILABLE] = {"CDC_ERR_UNAVAILABLE", "service unavailable", true},
    [CDC_ERR_CONFLICT] = {"CDC_ERR_CONFLICT", "conflicting concurrent update", true},
    [CDC_ERR_NOT_FOUND] = {"CDC_ERR_NOT_FOUND", "not found", false},
    [CDC_ERR_EXISTS] = {"CDC_ERR_EXISTS", "already exists", false},
    [CDC_ERR_PROTOCOL] = {"CDC_ERR_PROTOCOL", "protocol violation", false},
    [CDC_ERR_FENCED] = {"CDC_ERR_FENCED", "fenced by a newer term", false},
    [CDC_ERR_STALE] = {"CDC_ERR_STALE", "stale term or generation", false},
    [CDC_ERR_CORRUPT] = {"CDC_ERR_CORRUPT", "corrupt data", false},
    [CDC_ERR_UNSUPPORTED] = {"CDC_ERR_UNSUPPORTED", "not supported", false},
    [CDC_ERR_CLOSED] = {"CDC_ERR_CLOSED", "closed", false},
    [CDC_ERR_SOURCE] = {"CDC_ERR_SOURCE", "source database error", true},
    [CDC_ERR_KAFKA] = {"CDC_ERR_KAFKA", "kafka error", true},
    [CDC_ERR_STORAGE] = {"CDC_ERR_STORAGE", "storage error", true},
    [CDC_ERR_STATE] = {"CDC_ERR_STATE", "state store error", false},
    [CDC_ERR_INTERNAL] = {"CDC_ERR_INTERNAL", "internal error", false},
};

static int valid(cdc_err_t err)
{
    return (int)err >= 0 && err < CDC_ERR__COUNT && table[err].name != NULL;
}

const char *cdc_err_str(cdc_err_t err)
{
    return valid(err) ? table[err].desc : "unknown error";
}

const char *cdc_err_name(cdc_err_t err)
{
    return valid(err) ? table[err].name : "CDC_ERR_UNKNOWN";
}

bool cdc_err_default_retriable(cdc_err_t err)
{
    return valid(err) && table[err].retriable;
}

static cdc_err_t vset(cdc_error_t *e, cdc_err_t code, bool retriable, const char *fmt, va_list ap)
{
    if (e == NULL)
        return code;
    e->code = code;
    e->retriable = retriable;
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    /* the cause named in the message, before a prefix could push it out of the buffer */
    e->disk_full =
        strstr(e->msg, strerror(ENOSPC)) != NULL || strstr(e->msg, strerror(EDQUOT)) != NULL;
    return code;
}

cdc_err_t cdc_error_set(cdc_error_t *e, cdc_err_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, cdc_err_default_retriable(code), fmt, ap);
    va_end(ap);
    return code;
}

cdc_err_t cdc_error_set_retriable(cdc_error_t *e, cdc_err_t code, bool retriable, const char *fmt,
                                  ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, retriable, fmt, ap);
    va_end(ap);
    return code;
}

cdc_err_t cdc_error_prefix(cdc_error_t *e, const char *fmt, ...)
{
    char prefix[256];
    char old[sizeof(e->msg)];
    va_list ap;

    if (e == NULL)
        return CDC_OK;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof(old));
    snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
    return e->code;
}

void cdc_error_clear(cdc_error_t *e)
{
    if (e == NULL)
        return;
    e->code = CDC_OK;
    e->retriable = false;
    e->disk_full = false;
    e->msg[0] = '\0';
}
