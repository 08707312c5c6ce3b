/*
 * Structured logging to stderr. Lines look like
 *   ts=2026-11-29T22:30:01.123Z level=info proc=cdc-worker id=0 msg="assigned 4 partitions"
 * or, with the JSON format, {"ts":"...","level":"info","proc":"cdc-worker","id":"0","msg":"..."}.
 */
#include "common/log.h"
#include "common/assert.h"
#include "common/clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char proc_name[64] = "cdc";
static char instance_id[64] = "";
static volatile cdc_log_level_t min_level = CDC_LOG_INFO;
static volatile cdc_log_format_t out_format = CDC_LOG_LOGFMT;

static const char *level_names[] = {"debug", "info", "warn", "error"};

void cdc_log_init(const char *process, const char *instance)
{
    snprintf(proc_name, sizeof(proc_name), "%s", process ? process : "cdc");
    snprintf(instance_id, sizeof(instance_id), "%s", instance ? instance : "");
}

void cdc_log_set_level(cdc_log_level_t level)
{
    min_level = level;
}

void cdc_log_set_format(cdc_log_format_t format)
{
    out_format = format;
}

bool cdc_log_parse_level(const char *name, cdc_log_level_t *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (cdc_log_level_t)i;
            return true;
        }
    }
    return false;
}

bool cdc_log_parse_format(const char *name, cdc_log_format_t *out)
{
    if (strcmp(name, "logfmt") == 0)
        *out = CDC_LOG_LOGFMT;
    else if (strcmp(name, "json") == 0)
        *out = CDC_LOG_JSON;
    else
        return false;
    return true;
}

bool cdc_log_enabled(cdc_log_level_t level)
{
    return level >= min_level;
}

/* Appends s to buf at *pos with quote and backslash escaping; control chars become \n, \t, \uXXXX.
 */
static void append_escaped(char *buf, size_t cap, size_t *pos, const char *s)
{
    for (; *s && *pos + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[(*pos)++] = '\\';
            buf[(*pos)++] = (char)c;
        } else if (c == '\n') {
            buf[(*pos)++] = '\\';
            buf[(*pos)++] = 'n';
        } else if (c == '\t') {
            buf[(*pos)++] = '\\';
            buf[(*pos)++] = 't';
        } else if (c < 0x20) {
            *pos += (size_t)snprintf(buf + *pos, cap - *pos, "\\u%04x", c);
        } else {
            buf[(*pos)++] = (char)c;
        }
    }
}

static void append(char *buf, size_t cap, size_t *pos, const char *s)
{
    size_t n = strlen(s);
    if (*pos + n >= cap)
        n = cap - *pos - 1;
    memcpy(buf + *pos, s, n);
    *pos += n;
}

void cdc_log(cdc_log_level_t level, const char *fmt, ...)
{
    char msg[2048];
    char line[4096];
    char ts[40];
    size_t pos = 0;
    struct timespec now;
    struct tm tm;
    va_list ap;

    if (level < min_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    now = cdc_clock_wall_ts();
    gmtime_r(&now.tv_sec, &tm);
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);

    if (out_format == CDC_LOG_JSON) {
        append(line, sizeof(line), &pos, "{\"ts\":\"");
        append(line, sizeof(line), &pos, ts);
        append(line, sizeof(line), &pos, "\",\"level\":\"");
        append(line, sizeof(line), &pos, level_names[level]);
        append(line, sizeof(line), &pos, "\",\"proc\":\"");
        append_escaped(line, sizeof(line), &pos, proc_name);
        if (instance_id[0]) {
            append(line, sizeof(line), &pos, "\",\"id\":\"");
            append_escaped(line, sizeof(line), &pos, instance_id);
        }
        append(line, sizeof(line), &pos, "\",\"msg\":\"");
        append_escaped(line, sizeof(line), &pos, msg);
        append(line, sizeof(line), &pos, "\"}\n");
    } else {
        append(line, sizeof(line), &pos, "ts=");
        append(line, sizeof(line), &pos, ts);
        append(line, sizeof(line), &pos, " level=");
        append(line, sizeof(line), &pos, level_names[level]);
        append(line, sizeof(line), &pos, " proc=");
        append(line, sizeof(line), &pos, proc_name);
        if (instance_id[0]) {
            append(line, sizeof(line), &pos, " id=");
            append(line, sizeof(line), &pos, instance_id);
        }
        append(line, sizeof(line), &pos, " msg=\"");
        append_escaped(line, sizeof(line), &pos, msg);
        append(line, sizeof(line), &pos, "\"\n");
    }
    if (pos >= sizeof(line) - 1) { /* truncated: keep the line terminated */
        pos = sizeof(line) - 1;
        line[pos - 1] = '\n';
    }
    if (write(STDERR_FILENO, line, pos) < 0) {
        /* nowhere left to report a failed log write */
    }
}

void cdc_assert_fail(const char *what, const char *file, int line, const char *func)
{
    cdc_log(CDC_LOG_ERROR, "invariant violated: %s (%s:%d, %s): stopping", what, file, line, func);
    abort();
}
