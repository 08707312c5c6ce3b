/*
 * Declarative configuration: flag + environment parsing, validation, help and the
 * generated configuration reference. See config.h for the contract.
 */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef CDC_VERSION
#define CDC_VERSION "0.1.0"
#endif

extern char **environ;
/* Every cdc program's CDC_ variables (generated from docs/configuration.md). */
extern const char *const cdc_config_known_env[];

void cdc_config_env_name(const char *opt_name, char *buf, size_t size)
{
    size_t i = 0;
    const char *p;

    if (size == 0)
        return;
    for (p = "CDC_"; *p && i + 1 < size; p++)
        buf[i++] = *p;
    for (p = opt_name; *p && i + 1 < size; p++)
        buf[i++] = (*p == '-' || *p == '.') ? '_' : (char)toupper((unsigned char)*p);
    buf[i] = '\0';
}

bool cdc_parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (s == NULL || *s == '\0')
        return false;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

bool cdc_parse_bool(const char *s, bool *out)
{
    static const char *yes[] = {"true", "1", "yes", "on"};
    static const char *no[] = {"false", "0", "no", "off"};

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

/* Parses "<number><unit>" with a unit table; a bare number uses the unit of multiplier 1. */
static bool parse_scaled(const char *s, const char *const *units, const int64_t *mult, int64_t *out)
{
    char *end;
    double v;

    if (s == NULL || *s == '\0' || isspace((unsigned char)*s) || *s == '-')
        return false;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(v)) /* "nan", "inf" are no amount */
        return false;
    for (size_t i = 0; units[i]; i++) {
        if (strcasecmp(end, units[i]) == 0) {
            double r = v * (double)mult[i];
            if (r > 9.2e18)
                return false;
            *out = (int64_t)(r + 0.5);
            return true;
        }
    }
    return false;
}

bool cdc_parse_duration_ms(const char *s, int64_t *out)
{
    static const char *const units[] = {"", "ms", "s", "m", "h", NULL};
    static const int64_t mult[] = {1, 1, 1000, 60000, 3600000};
    return parse_scaled(s, units, mult, out);
}

bool cdc_parse_size(const char *s, int64_t *out)
{
    static const char *const units[] = {"",   "b",   "k", "kb", "kib", "m",
                                        "mb", "mib", "g", "gb", "gib", NULL};
    static const int64_t mult[] = {1,       1,       1024,       1024,       1024,      1048576,
                                   1048576, 1048576, 1073741824, 1073741824, 1073741824};
    return parse_scaled(s, units, mult, out);
}

static const char *type_form(const cdc_opt_t *o)
{
    switch (o->type) {
    case CDC_OPT_INT:
        return "an integer";
    case CDC_OPT_BOOL:
        return "true or false";
    case CDC_OPT_DURATION:
        return "a duration such as 250ms, 1s, 5m";
    case CDC_OPT_SIZE:
        return "a size such as 4096, 64KiB, 16MiB";
    case CDC_OPT_ENUM:
        return "one of the listed choices";
    case CDC_OPT_STRING:
    default:
        return "a string";
    }
}

static const char *type_name(const cdc_opt_t *o)
{
    switch (o->type) {
    case CDC_OPT_INT:
        return "int";
    case CDC_OPT_BOOL:
        return "bool";
    case CDC_OPT_DURATION:
        return "duration";
    case CDC_OPT_SIZE:
        return "size";
    case CDC_OPT_ENUM:
        return "enum";
    case CDC_OPT_STRING:
    default:
        return "string";
    }
}

static bool choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    const char *p = choices;

    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0)
            return true;
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

static void set_string(void *cfg, const cdc_opt_t *o, const char *v)
{
    char **slot = (char **)((char *)cfg + o->offset);
    free(*slot);
    *slot = v ? strdup(v) : NULL;
}

/* Validates and stores one textual value; `source` is "--name" or "CDC_NAME" or "default". */
static cdc_err_t set_value(const cdc_opt_t *o, void *cfg, const char *v, const char *source,
                           cdc_error_t *e)
{
    char env[128];
    char *field = (char *)cfg + o->offset;
    int64_t num = 0;
    bool ok = true;

    cdc_config_env_name(o->name, env, sizeof(env));
    switch (o->type) {
    case CDC_OPT_STRING:
        set_string(cfg, o, v);
        return CDC_OK;
    case CDC_OPT_ENUM:
        if (!choice_ok(o->choices, v))
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "invalid value \"%s\" for option --%s (%s, from %s): expected "
                                 "one of %s",
                                 v, o->name, env, source, o->choices);
        set_string(cfg, o, v);
        return CDC_OK;
    case CDC_OPT_BOOL: {
        bool b;
        if (!cdc_parse_bool(v, &b))
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "invalid value \"%s\" for option --%s (%s, from %s): expected %s",
                                 v, o->name, env, source, type_form(o));
        *(bool *)field = b;
        return CDC_OK;
    }
    case CDC_OPT_INT:
        ok = cdc_parse_int(v, &num);
        break;
    case CDC_OPT_DURATION:
        ok = cdc_parse_duration_ms(v, &num);
        break;
    case CDC_OPT_SIZE:
        ok = cdc_parse_size(v, &num);
        break;
    }
    if (!ok)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "invalid value \"%s\" for option --%s (%s, from %s): expected %s", v,
                             o->name, env, source, type_form(o));
    if (o->min < o->max && (num < o->min || num > o->max))
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "value \"%s\" for option --%s (%s, from %s) is out of range: expected "
                             "%" PRId64 " to %" PRId64 "%s",
                             v, o->name, env, source, o->min, o->max,
                             o->type == CDC_OPT_DURATION ? " milliseconds"
                             : o->type == CDC_OPT_SIZE   ? " bytes"
                                                         : "");
    *(int64_t *)field = num;
    return CDC_OK;
}

/* The environment variable of a secret option's file variant: CDC_<NAME>_FILE. */
static void file_env_name(const cdc_opt_t *o, char *buf, size_t size)
{
    size_t n;

    cdc_config_env_name(o->name, buf, size);
    n = strlen(buf);
    snprintf(buf + n, size - n, "_FILE");
}

/*
 * Reads a secret option's value from the file at path (--<name>-file, from `source`) and
 * stores it. The file's trailing newlines are dropped (a secret written with echo, or
 * mounted from a Kubernetes Secret, may end in one); an empty file is an error, since a
 * secret that silently became "" would turn a check off.
 */
static cdc_err_t set_from_file(const cdc_opt_t *o, void *cfg, const char *path, const char *source,
                               cdc_error_t *e)
{
    char env[140], *buf;
    size_t n;
    FILE *f;
    cdc_err_t rc;

    file_env_name(o, env, sizeof(env));
    if ((f = fopen(path, "r")) == NULL)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "could not read file \"%s\" of option --%s-file (%s, from %s): %s",
                             path, o->name, env, source, strerror(errno));
    if ((buf = malloc(CDC_CONFIG_SECRET_FILE_MAX + 1)) == NULL) {
        fclose(f);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory reading option --%s-file", o->name);
    }
    n = fread(buf, 1, CDC_CONFIG_SECRET_FILE_MAX + 1, f);
    if (ferror(f)) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "could not read file \"%s\" of option --%s-file (%s, from %s): %s", path,
                           o->name, env, source, strerror(errno));
        goto done;
    }
    if (n > CDC_CONFIG_SECRET_FILE_MAX) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "file \"%s\" of option --%s-file (%s, from %s) is larger than %d bytes",
                           path, o->name, env, source, CDC_CONFIG_SECRET_FILE_MAX);
        goto done;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
    if (n == 0 || strlen(buf) != n) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "file \"%s\" of option --%s-file (%s, from %s) is %s: expected the "
                           "value of --%s",
                           path, o->name, env, source, n == 0 ? "empty" : "not text", o->name);
        goto done;
    }
    rc = set_value(o, cfg, buf, "a file", e);
done:
    memset(buf, 0, n); /* the secret lives on in cfg only */
    free(buf);
    fclose(f);
    return rc;
}

static const cdc_opt_t *find_opt(const cdc_opt_t *opts, const char *name, size_t len)
{
    for (const cdc_opt_t *o = opts; o->name; o++) {
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
        if (o->alias && strlen(o->alias) == len && strncmp(o->alias, name, len) == 0)
            return o;
    }
    return NULL;
}

/* The secret option whose file variant "<name>-file" is name[0..len), or NULL. */
static const cdc_opt_t *find_file_opt(const cdc_opt_t *opts, const char *name, size_t len)
{
    static const char suffix[] = "-file";
    const size_t sl = sizeof(suffix) - 1;

    if (len <= sl || strncmp(name + len - sl, suffix, sl) != 0)
        return NULL;
    for (const cdc_opt_t *o = opts; o->name; o++)
        if (o->secret && strlen(o->name) == len - sl && strncmp(o->name, name, len - sl) == 0)
            return o;
    return NULL;
}

static const char *env_lookup(char **env, const char *name)
{
    size_t n = strlen(name);
    for (; env && *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

/* Edit distance (insert, delete, substitute) between a and b, capped at 64 chars. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[65];

    if (la > 64 || lb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* The option of opts whose name (as a flag, or as CDC_ variable when env) is closest
 * to name. */
static const cdc_opt_t *closest_opt(const cdc_opt_t *opts, const char *name, bool env)
{
    const cdc_opt_t *best = NULL;
    size_t best_d = SIZE_MAX;

    for (const cdc_opt_t *o = opts; o->name; o++) {
        char buf[128];
        size_t d;

        if (env)
            cdc_config_env_name(o->name, buf, sizeof(buf));
        else
            snprintf(buf, sizeof(buf), "%s", o->name);
        d = edit_distance(name, buf);
        if (d < best_d) {
            best_d = d;
            best = o;
        }
    }
    return best;
}

/* CDC_ variables that are not options: read by the test harness, the development broker
 * and fault injection (docs/configuration.md). */
static bool reserved_env(const char *name)
{
    static const char *const prefixes[] = {"CDC_TEST_", "CDC_HARNESS_", NULL};
    static const char *const names[] = {"CDC_KAFKA_DEV_CONTROL", "CDC_FAULT",    "CDC_WORKER_FAULT",
                                        "CDC_BUILD_DIR",         "CDC_ICE_SEED", NULL};

    for (size_t i = 0; prefixes[i]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    for (size_t i = 0; names[i]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static bool listed(const char *const *list, const char *name)
{
    for (; list && *list; list++)
        if (strcmp(*list, name) == 0)
            return true;
    return false;
}

bool cdc_config_takes_value(const cdc_opt_t *opts, const char *arg)
{
    const cdc_opt_t *o;

    if (arg == NULL || strncmp(arg, "--", 2) != 0 || strchr(arg, '=') != NULL)
        return false;
    o = find_opt(opts, arg + 2, strlen(arg + 2));
    if (o == NULL)
        return find_file_opt(opts, arg + 2, strlen(arg + 2)) != NULL;
    return o->type != CDC_OPT_BOOL;
}

size_t cdc_config_check_env(const cdc_opt_t *opts, const char *prog, char **environ_list,
                            const char *const *known, FILE *out)
{
    size_t unknown = 0;

    for (char **env = environ_list; env && *env; env++) {
        const char *eq = strchr(*env, '=');
        char name[128];
        const cdc_opt_t *o, *near;

        if (strncmp(*env, "CDC_", 4) != 0 || eq == NULL || (size_t)(eq - *env) >= sizeof(name))
            continue;
        memcpy(name, *env, (size_t)(eq - *env));
        name[eq - *env] = '\0';
        if (reserved_env(name) || listed(known, name))
            continue;
        o = NULL;
        for (const cdc_opt_t *p = opts; p->name && o == NULL; p++) {
            char a[128], b[128] = "", f[140] = "";
            cdc_config_env_name(p->name, a, sizeof(a));
            if (p->alias)
                cdc_config_env_name(p->alias, b, sizeof(b));
            if (p->secret)
                file_env_name(p, f, sizeof(f));
            if (strcmp(a, name) == 0 || (p->alias && strcmp(b, name) == 0) ||
                (p->secret && strcmp(f, name) == 0))
                o = p;
        }
        if (o != NULL)
            continue;
        unknown++;
        near = closest_opt(opts, name, true);
        if (near != NULL) {
            char n[128];
            cdc_config_env_name(near->name, n, sizeof(n));
            fprintf(out,
                    "%s: warning: environment variable %s is not an option of any cdc program "
                    "and is ignored; the closest option of %s is %s (--%s)\n",
                    prog, name, prog, n, near->name);
        } else {
            fprintf(out,
                    "%s: warning: environment variable %s is not an option of any cdc program "
                    "and is ignored\n",
                    prog, name);
        }
    }
    return unknown;
}

/* How a flag gave an option (cdc_config_parse()'s `given`). */
enum { GIVEN_VALUE = 1, GIVEN_FILE = 2 };

/* The option's value, or its file for a secret option, from the environment. */
static cdc_err_t env_value(const cdc_opt_t *o, void *cfg, char **environ_list, bool *found,
                           cdc_error_t *e)
{
    char env[128], fenv[140];
    const char *v, *file = NULL;

    cdc_config_env_name(o->name, env, sizeof(env));
    v = env_lookup(environ_list, env);
    if (v == NULL && o->alias) {
        char old[128];
        cdc_config_env_name(o->alias, old, sizeof(old));
        v = env_lookup(environ_list, old);
    }
    if (o->secret) {
        file_env_name(o, fenv, sizeof(fenv));
        file = env_lookup(environ_list, fenv);
    }
    *found = v != NULL || file != NULL;
    if (v != NULL && file != NULL)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "environment variables %s and %s are both set: give the value of "
                             "option --%s or its file, not both",
                             env, fenv, o->name);
    if (file != NULL)
        return set_from_file(o, cfg, file, "environment", e);
    if (v != NULL)
        return set_value(o, cfg, v, "environment", e);
    return CDC_OK;
}

cdc_config_result_t cdc_config_parse(const cdc_opt_t *opts, const char *prog, const char *summary,
                                     int argc, char **argv, char **environ_list, void *cfg,
                                     FILE *out, cdc_error_t *e)
{
    size_t nopts = 0;
    unsigned char *given; /* per option: GIVEN_* of the flags that set it */
    cdc_config_result_t res = CDC_CONFIG_OK;

    for (const cdc_opt_t *o = opts; o->name; o++)
        nopts++;
    given = calloc(nopts + 1, 1);
    if (given == NULL) {
        cdc_error_set(e, CDC_ERR_NOMEM, "out of memory parsing configuration");
        return CDC_CONFIG_ERROR;
    }

    /* Defaults first, so flags and environment only override. */
    for (const cdc_opt_t *o = opts; o->name; o++) {
        if (o->default_value && set_value(o, cfg, o->default_value, "default", e) != CDC_OK) {
            res = CDC_CONFIG_ERROR; /* a bad default is a bug in the table; report it anyway */
            goto done;
        }
    }

    /* Flags. */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *name, *eq, *val;
        const cdc_opt_t *o;
        size_t len;
        int how = GIVEN_VALUE;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            cdc_config_print_help(opts, prog, summary, out);
            res = CDC_CONFIG_HELP;
            goto done;
        }
        if (strcmp(arg, "--help-markdown") == 0) {
            cdc_config_print_markdown(opts, prog, summary, out);
            res = CDC_CONFIG_MARKDOWN;
            goto done;
        }
        if (strcmp(arg, "--version") == 0) {
            fprintf(out, "%s %s\n", prog, CDC_VERSION);
            res = CDC_CONFIG_VERSION;
            goto done;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            cdc_error_set(e, CDC_ERR_CONFIG,
                          "unexpected argument \"%s\": options take the form --name=value (see "
                          "--help)",
                          arg);
            res = CDC_CONFIG_ERROR;
            goto done;
        }
        name = arg + 2;
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        o = find_opt(opts, name, len);
        if (o == NULL && (o = find_file_opt(opts, name, len)) != NULL)
            how = GIVEN_FILE;
        if (o == NULL) {
            const cdc_opt_t *near;
            char unknown[128];

            snprintf(unknown, sizeof(unknown), "%.*s", (int)len, name);
            near = closest_opt(opts, unknown, false);
            if (near != NULL && edit_distance(unknown, near->name) <= 3)
                cdc_error_set(e, CDC_ERR_CONFIG,
                              "unknown option --%s: did you mean --%s? (see --help)", unknown,
                              near->name);
            else
                cdc_error_set(e, CDC_ERR_CONFIG, "unknown option --%s (see --help)", unknown);
            res = CDC_CONFIG_ERROR;
            goto done;
        }
        if (eq) {
            val = eq + 1;
        } else if (o->type == CDC_OPT_BOOL) {
            val = "true";
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            cdc_error_set(e, CDC_ERR_CONFIG, "option --%s%s needs a value: expected %s", o->name,
                          how == GIVEN_FILE ? "-file" : "",
                          how == GIVEN_FILE ? "a file name" : type_form(o));
            res = CDC_CONFIG_ERROR;
            goto done;
        }
        given[o - opts] |= (unsigned char)how;
        if (given[o - opts] == (GIVEN_VALUE | GIVEN_FILE)) {
            cdc_error_set(e, CDC_ERR_CONFIG,
                          "options --%s and --%s-file are both given: give the value or its "
                          "file, not both",
                          o->name, o->name);
            res = CDC_CONFIG_ERROR;
            goto done;
        }
        if ((how == GIVEN_FILE ? set_from_file(o, cfg, val, "command line", e)
                               : set_value(o, cfg, val, "command line", e)) != CDC_OK) {
            res = CDC_CONFIG_ERROR;
            goto done;
        }
    }

    /* Environment, where no flag was given; then required checks. */
    for (const cdc_opt_t *o = opts; o->name; o++) {
        bool found = false;

        if (given[o - opts])
            continue;
        if (env_value(o, cfg, environ_list, &found, e) != CDC_OK) {
            res = CDC_CONFIG_ERROR;
            goto done;
        }
        if (!found && o->required) {
            char env[128];

            cdc_config_env_name(o->name, env, sizeof(env));
            cdc_error_set(e, CDC_ERR_CONFIG,
                          "missing required option --%s (or environment variable %s%s%s%s): "
                          "expected %s",
                          o->name, env, o->secret ? ", or its file --" : "",
                          o->secret ? o->name : "", o->secret ? "-file" : "", type_form(o));
            res = CDC_CONFIG_ERROR;
            goto done;
        }
    }
done:
    free(given);
    return res;
}

void cdc_config_load(const cdc_opt_t *opts, const char *prog, const char *summary, int argc,
                     char **argv, void *cfg)
{
    cdc_error_t e;
    cdc_config_result_t r;

    cdc_error_clear(&e);
    r = cdc_config_parse(opts, prog, summary, argc, argv, environ, cfg, stdout, &e);
    switch (r) {
    case CDC_CONFIG_OK:
        cdc_config_check_env(opts, prog, environ, cdc_config_known_env, stderr);
        return;
    case CDC_CONFIG_HELP:
    case CDC_CONFIG_MARKDOWN:
    case CDC_CONFIG_VERSION:
        cdc_config_free(opts, cfg);
        exit(0);
    case CDC_CONFIG_ERROR:
    default:
        fprintf(stderr, "%s: %s\n", prog, e.msg);
        cdc_config_free(opts, cfg);
        exit(CDC_CONFIG_EXIT);
    }
}

cdc_err_t cdc_config_fault_check(const char *what, const char *value, cdc_error_t *e)
{
#if CDC_FAULTS
    (void)what;
    (void)value;
    (void)e;
    return CDC_OK;
#else
    if (value == NULL || value[0] == '\0')
        return CDC_OK;
    return cdc_error_set(e, CDC_ERR_CONFIG,
                         "%s is set to \"%s\", but fault injection is for tests only and this "
                         "is a release build without it (hint: unset it; tests use a build "
                         "made with make FAULT_INJECTION=1)",
                         what, value);
#endif
}

void cdc_config_free(const cdc_opt_t *opts, void *cfg)
{
    for (const cdc_opt_t *o = opts; o->name; o++) {
        if (o->type == CDC_OPT_STRING || o->type == CDC_OPT_ENUM) {
            char **slot = (char **)((char *)cfg + o->offset);
            free(*slot);
            *slot = NULL;
        }
    }
}

/* What --help and the reference say of a secret option's file variant. */
#define FILE_HELP                                                                                  \
    "Reads --%s from this file (e.g. a mounted secret; trailing newlines are dropped), so "        \
    "that the value is neither on the command line nor in the environment."

/* Allowed values; `md` separates choices with ", " so they do not break a Markdown table. */
static void bounds_text(const cdc_opt_t *o, char *buf, size_t size, bool md)
{
    buf[0] = '\0';
    if (o->type == CDC_OPT_ENUM) {
        snprintf(buf, size, "%s", o->choices);
        if (md) {
            char tmp[96];
            size_t j = 0;
            for (const char *p = o->choices; *p && j + 3 < sizeof(tmp); p++) {
                if (*p == '|') {
                    tmp[j++] = ',';
                    tmp[j++] = ' ';
                } else {
                    tmp[j++] = *p;
                }
            }
            tmp[j] = '\0';
            snprintf(buf, size, "%s", tmp);
        }
    } else if (o->min < o->max)
        snprintf(buf, size, "%" PRId64 "..%" PRId64 "%s", o->min, o->max,
                 o->type == CDC_OPT_DURATION ? " ms"
                 : o->type == CDC_OPT_SIZE   ? " bytes"
                                             : "");
}

void cdc_config_print_help(const cdc_opt_t *opts, const char *prog, const char *summary, FILE *out)
{
    fprintf(out,
            "Usage: %s [--option=value ...]\n\n%s\n\nOptions (each also read from the "
            "environment variable shown; flags win):\n",
            prog, summary);
    for (const cdc_opt_t *o = opts; o->name; o++) {
        char env[128], bounds[128];
        cdc_config_env_name(o->name, env, sizeof(env));
        bounds_text(o, bounds, sizeof(bounds), false);
        fprintf(out, "  --%s=<%s>  [%s]\n      %s", o->name, type_name(o), env, o->help);
        if (bounds[0])
            fprintf(out, " (%s)", bounds);
        if (o->required)
            fprintf(out, " Required.");
        else if (o->default_value)
            fprintf(out, " Default: %s.", o->default_value[0] ? o->default_value : "\"\"");
        if (o->alias)
            fprintf(out, " Formerly --%s.", o->alias);
        fputc('\n', out);
        if (o->secret) {
            char fenv[140];
            file_env_name(o, fenv, sizeof(fenv));
            fprintf(out, "  --%s-file=<path>  [%s]\n      ", o->name, fenv);
            fprintf(out, FILE_HELP "\n", o->name);
        }
    }
    fprintf(out, "  --help, --help-markdown, --version\n");
}

void cdc_config_print_markdown(const cdc_opt_t *opts, const char *prog, const char *summary,
                               FILE *out)
{
    fprintf(out, "## `%s`\n\n%s\n\n", prog, summary);
    fprintf(out, "| Flag | Environment | Type | Default | Allowed | Description |\n");
    fprintf(out, "|---|---|---|---|---|---|\n");
    for (const cdc_opt_t *o = opts; o->name; o++) {
        char env[128], bounds[128];
        cdc_config_env_name(o->name, env, sizeof(env));
        bounds_text(o, bounds, sizeof(bounds), true);
        fprintf(out, "| `--%s` | `%s` | %s | %s%s%s | %s | %s", o->name, env, type_name(o),
                o->required ? "**required**" : (o->default_value ? "`" : "—"),
                o->required ? "" : (o->default_value ? o->default_value : ""),
                (!o->required && o->default_value) ? "`" : "", bounds[0] ? bounds : "", o->help);
        if (o->alias) {
            char old[128];
            cdc_config_env_name(o->alias, old, sizeof(old));
            fprintf(out, " Formerly `--%s` / `%s`, still accepted.", o->alias, old);
        }
        fprintf(out, " |\n");
        if (o->secret) {
            char fenv[140];
            file_env_name(o, fenv, sizeof(fenv));
            fprintf(out, "| `--%s-file` | `%s` | path | — |  | " FILE_HELP " |\n", o->name, fenv,
                    o->name);
        }
    }
    fputc('\n', out);
}
