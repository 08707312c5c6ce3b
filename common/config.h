/*
 * Declarative configuration. Each binary describes its options once, in a table of
 * cdc_opt_t; that table drives flag parsing (--name=value or --name value), the
 * CDC_<NAME> environment variables (flags win over environment, environment over
 * defaults), validation (type, bounds, choices, required), --help, and the generated
 * reference docs/configuration.md (--help-markdown).
 *
 * An option renamed for consistency keeps its former name as an alias: --<alias> and
 * CDC_<ALIAS> are still read (the new names win), and --help lists the alias.
 *
 * A secret option (a password, a key, a DSN) is also read from a file: --<name>-file=<path>
 * or CDC_<NAME>_FILE, e.g. a mounted Kubernetes Secret, so that the value is neither on
 * the command line nor in the environment (`docker inspect`, /proc/<pid>/environ). The
 * file's trailing newlines are dropped. Giving both the value and the file in the same
 * place (two flags, or two variables) is an error; a flag still wins over the
 * environment. A file that cannot be read, or is empty, is bad configuration naming the
 * option.
 *
 * Bad configuration is reported with the option's flag and environment names and the
 * expected form; cdc_config_load() callers exit with status 2 (CDC_CONFIG_EXIT).
 */
#ifndef CDC_CONFIG_H
#define CDC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

#define CDC_CONFIG_EXIT 2

typedef enum cdc_opt_type {
    CDC_OPT_STRING,   /* char * (heap copy, owned by the config struct) */
    CDC_OPT_INT,      /* int64_t */
    CDC_OPT_BOOL,     /* bool: true/false/1/0/yes/no/on/off; a bare flag means true */
    CDC_OPT_DURATION, /* int64_t milliseconds: "250ms", "1s", "5m", "2h", bare number = ms */
    CDC_OPT_SIZE,     /* int64_t bytes: "512", "64KiB", "16MiB", "1GiB", "1k", "1m" */
    CDC_OPT_ENUM,     /* char *, one of choices ("initial|never") */
} cdc_opt_type_t;

typedef struct cdc_opt {
    const char *name; /* flag without dashes, e.g. "commit-interval" */
    cdc_opt_type_t type;
    size_t offset;             /* offsetof(config struct, field) */
    const char *default_value; /* textual default, NULL = none */
    bool required;             /* must be set by flag or environment */
    int64_t min, max;          /* bounds for INT/DURATION/SIZE when min < max */
    const char *choices;       /* "a|b|c" for ENUM */
    const char *help;          /* one sentence for --help and the docs */
    const char *alias;         /* former name still accepted (flag and CDC_ variable), or NULL */
    bool secret; /* STRING only: also read from the file --<name>-file / CDC_<NAME>_FILE */
} cdc_opt_t;

/* One optional row of an option table over config struct T (a field of T, bounds lo..hi
 * when lo < hi). Programs wrap it in their own short OPT macros. */
#define CDC_OPT_ROW(T, name, type, field, def, lo, hi, help)                                       \
    {                                                                                              \
        name, type, offsetof(T, field), def, false, lo, hi, NULL, help                             \
    }

/* Terminates an option table. */
#define CDC_OPT_END                                                                                \
    {                                                                                              \
        NULL, CDC_OPT_STRING, 0, NULL, false, 0, 0, NULL, NULL, NULL, false                        \
    }

typedef enum cdc_config_result {
    CDC_CONFIG_OK = 0,
    CDC_CONFIG_HELP,     /* --help printed to out */
    CDC_CONFIG_MARKDOWN, /* --help-markdown printed to out */
    CDC_CONFIG_VERSION,  /* --version printed to out */
    CDC_CONFIG_ERROR,    /* error in e (code CDC_ERR_CONFIG), message names the option */
} cdc_config_result_t;

/*
 * Parses argv and the environment into *cfg according to opts. `environ_list` is a
 * NULL-terminated "KEY=VALUE" array (pass environ). Positional arguments are
 * rejected. Help text goes to out. On error *cfg may be partly filled: release it
 * with cdc_config_free().
 */
cdc_config_result_t cdc_config_parse(const cdc_opt_t *opts, const char *prog, const char *summary,
                                     int argc, char **argv, char **environ_list, void *cfg,
                                     FILE *out, cdc_error_t *e);

/*
 * The usual entry: parse argc/argv/environ; on --help/--version print and exit(0);
 * on error print "<prog>: <message>" to stderr and exit(CDC_CONFIG_EXIT).
 */
void cdc_config_load(const cdc_opt_t *opts, const char *prog, const char *summary, int argc,
                     char **argv, void *cfg);

/*
 * Warns on out ("<prog>: warning: ...") of each CDC_ variable in environ_list that is not
 * an option (or former name) of opts, nor in known (the CDC_ variables of the other cdc
 * programs, which a shared environment such as compose's may set), nor reserved (the test
 * harness's CDC_TEST_*, CDC_KAFKA_DEV_CONTROL, fault injection): a typo would otherwise go
 * unnoticed. Each warning names the closest option. Returns the number of warnings.
 * cdc_config_load() calls it after a successful parse.
 */
size_t cdc_config_check_env(const cdc_opt_t *opts, const char *prog, char **environ_list,
                            const char *const *known, FILE *out);

/* Whether arg is a flag of opts that takes its value from the next argument ("--name",
 * not "--name=value", of an option that is not a bool): for programs that take bare
 * words besides options (cdcctl's subcommands). */
bool cdc_config_takes_value(const cdc_opt_t *opts, const char *arg);

/*
 * Test-only fault injection (the coordinator's --fault, the worker's CDC_WORKER_FAULT) is
 * compiled in by `make FAULT_INJECTION=1`, the default for development and tests, and left
 * out of the image's release build (FAULT_INJECTION=0, docker/build-steps.sh). In a build
 * without it, a fault setting `what` (e.g. "option --fault (CDC_FAULT)") that is set (value neither
 * NULL nor "") is CDC_ERR_CONFIG saying so; otherwise CDC_OK.
 */
cdc_err_t cdc_config_fault_check(const char *what, const char *value, cdc_error_t *e);

/* Frees the strings owned by *cfg. */
void cdc_config_free(const cdc_opt_t *opts, void *cfg);

/* Largest secret file read (--<name>-file): a secret is a line, a DSN or a few properties. */
#define CDC_CONFIG_SECRET_FILE_MAX (64 * 1024)

/* Environment variable name of an option: CDC_ + upper-case name with '-' -> '_'. */
void cdc_config_env_name(const char *opt_name, char *buf, size_t size);

void cdc_config_print_help(const cdc_opt_t *opts, const char *prog, const char *summary, FILE *out);
void cdc_config_print_markdown(const cdc_opt_t *opts, const char *prog, const char *summary,
                               FILE *out);

/* Value parsers, exposed for tests and for other modules that read such values. */
bool cdc_parse_duration_ms(const char *s, int64_t *out);
bool cdc_parse_size(const char *s, int64_t *out);
bool cdc_parse_bool(const char *s, bool *out);
bool cdc_parse_int(const char *s, int64_t *out);

#endif
