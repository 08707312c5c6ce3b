/*
 * Structured logging: one line per event on stderr, logfmt by default or JSON
 * lines, each carrying time, level, process name and instance id. Thread-safe:
 * every line is written with a single write(2).
 */
#ifndef CDC_LOG_H
#define CDC_LOG_H

#include <stdbool.h>

typedef enum cdc_log_level {
    CDC_LOG_DEBUG = 0,
    CDC_LOG_INFO,
    CDC_LOG_WARN,
    CDC_LOG_ERROR,
} cdc_log_level_t;

typedef enum cdc_log_format {
    CDC_LOG_LOGFMT = 0,
    CDC_LOG_JSON,
} cdc_log_format_t;

/* Sets process name (e.g. "cdc-worker") and instance id (may be NULL). Strings are copied. */
void cdc_log_init(const char *process, const char *instance);
void cdc_log_set_level(cdc_log_level_t level);
void cdc_log_set_format(cdc_log_format_t format);

/* Parses "debug|info|warn|error" and "logfmt|json"; return false on unknown names. */
bool cdc_log_parse_level(const char *name, cdc_log_level_t *out);
bool cdc_log_parse_format(const char *name, cdc_log_format_t *out);

bool cdc_log_enabled(cdc_log_level_t level);

void cdc_log(cdc_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define cdc_log_debug(...)                                                                         \
    do {                                                                                           \
        if (cdc_log_enabled(CDC_LOG_DEBUG))                                                        \
            cdc_log(CDC_LOG_DEBUG, __VA_ARGS__);                                                   \
    } while (0)
#define cdc_log_info(...) cdc_log(CDC_LOG_INFO, __VA_ARGS__)
#define cdc_log_warn(...) cdc_log(CDC_LOG_WARN, __VA_ARGS__)
#define cdc_log_error(...) cdc_log(CDC_LOG_ERROR, __VA_ARGS__)

#endif
