/*
 * The reply to an operator's request (docs/capture.md, "Re-snapshot on demand" and
 * "Adding a table"): built by the file that serves it (incremental.c, tables.c), passed
 * on by request.c to the HTTP thread that waits. Calls nothing of the capture.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "capture/stream_int.h"

void cdc_capture_reply_set(cdc_capture_reply_t *r, int status, char *body)
{
    free(r->body);
    r->status = status;
    r->body = body;
}

void cdc_capture_reply_error(cdc_capture_reply_t *r, int status, const char *fmt, ...)
{
    char msg[400];
    json_t *j;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    j = json_pack("{s:s}", "error", msg);
    cdc_capture_reply_set(r, status, j ? json_dumps(j, JSON_COMPACT) : NULL);
    json_decref(j);
}
