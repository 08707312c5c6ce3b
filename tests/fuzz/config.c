/*
 * Fuzz target: configuration values (common/config.h): durations, sizes, booleans,
 * integers, each as a flag and as a CDC_ variable of an option table with every type and
 * bounds, and the comma-separated lists and id files of `cdcctl dlq` (common/dlq.h).
 * Input: NUL-separated strings, given as the arguments and as the environment.
 */
#include <stdio.h>

#include "common/config.h"
#include "common/dlq.h"
#include "tests/fuzz/fuzz.h"

#define MAX_ARGS 16

typedef struct fuzz_cfg {
    char *name;
    int64_t count;
    bool flag;
    int64_t interval;
    int64_t size;
    char *mode;
} fuzz_cfg_t;

static const cdc_opt_t opts[] = {
    CDC_OPT_ROW(fuzz_cfg_t, "name", CDC_OPT_STRING, name, "x", 0, 0, "A string."),
    CDC_OPT_ROW(fuzz_cfg_t, "count", CDC_OPT_INT, count, "1", 1, 1000, "An integer."),
    CDC_OPT_ROW(fuzz_cfg_t, "flag", CDC_OPT_BOOL, flag, "false", 0, 0, "A boolean."),
    CDC_OPT_ROW(fuzz_cfg_t, "interval", CDC_OPT_DURATION, interval, "1s", 1, 3600000,
                "A duration."),
    CDC_OPT_ROW(fuzz_cfg_t, "size", CDC_OPT_SIZE, size, "1MiB", 0, 0, "A size."),
    {"mode", CDC_OPT_ENUM, offsetof(fuzz_cfg_t, mode), "a", false, 0, 0, "a|b|c", "An enum.",
     "old-mode", false},
    CDC_OPT_END,
};

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    devnull = fopen("/dev/null", "w");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    char *args[MAX_ARGS + 2];
    int n = 0;
    cdc_error_t e;

    if (text == NULL || devnull == NULL) {
        free(text);
        return 0;
    }
    args[n++] = "fuzz";
    for (size_t at = 0; at <= size && n < MAX_ARGS + 1; at += strlen(text + at) + 1)
        args[n++] = text + at;
    args[n] = NULL;

    for (int i = 1; i < n; i++) {
        int64_t v;
        bool b;
        (void)cdc_parse_duration_ms(args[i], &v);
        (void)cdc_parse_size(args[i], &v);
        (void)cdc_parse_bool(args[i], &b);
        (void)cdc_parse_int(args[i], &v);
        (void)cdc_config_takes_value(opts, args[i]);
    }

    fuzz_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    /* the arguments as flags, and as the environment (KEY=VALUE strings) */
    (void)cdc_config_parse(opts, "fuzz", "Fuzzed.", n, args, args + 1, &cfg, devnull, &e);
    cdc_config_free(opts, &cfg);
    (void)cdc_config_check_env(opts, "fuzz", args + 1, NULL, devnull);

    cdc_dlq_select_t sel;
    if (n > 2 && cdc_dlq_select_init(&sel, args[1], args[2], -1, -1, -1, false, &e) == CDC_OK) {
        if (n > 3)
            (void)cdc_dlq_select_ids(&sel, args[3], "cdc", &e);
        cdc_dlq_select_free(&sel);
    }
    free(text);
    return 0;
}
