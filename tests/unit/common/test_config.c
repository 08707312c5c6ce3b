/*
 * Unit tests for common/config.c: every error path of flag and environment parsing
 * (unknown option, missing value, wrong type per type, out of range, bad enum, missing
 * required, stray arguments, bad values from the environment), precedence (flag over
 * environment over default), duration/size/bool/int parsers, and --help,
 * --help-markdown and --version output, renamed options' former names (aliases), and
 * secret options read from files (--<name>-file, CDC_<NAME>_FILE).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h"

typedef struct tcfg {
    char *name;
    int64_t count;
    bool verbose;
    int64_t interval_ms;
    int64_t buffer;
    char *mode;
    char *required_s;
} tcfg_t;

static const cdc_opt_t opts[] = {
    {"name", CDC_OPT_STRING, offsetof(tcfg_t, name), "anon", false, 0, 0, NULL, "A name."},
    {"count", CDC_OPT_INT, offsetof(tcfg_t, count), "3", false, 1, 100, NULL, "A count."},
    {"verbose", CDC_OPT_BOOL, offsetof(tcfg_t, verbose), "false", false, 0, 0, NULL, "Talk."},
    {"interval", CDC_OPT_DURATION, offsetof(tcfg_t, interval_ms), "1s", false, 10, 3600000, NULL,
     "An interval."},
    {"buffer", CDC_OPT_SIZE, offsetof(tcfg_t, buffer), "64KiB", false, 1024, 1073741824, NULL,
     "A buffer."},
    {"mode", CDC_OPT_ENUM, offsetof(tcfg_t, mode), "fast", false, 0, 0, "fast|safe|off", "A mode."},
    {"dsn", CDC_OPT_STRING, offsetof(tcfg_t, required_s), NULL, true, 0, 0, NULL,
     "Required connection string.", "pg-dsn"},
    CDC_OPT_END,
};

/* Parses argv (NULL-terminated list after the program name) with env; returns result. */
static cdc_config_result_t parse(tcfg_t *c, char **env, cdc_error_t *e, FILE *out, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    char *a;

    argv[argc++] = "prog";
    va_start(ap, out);
    while ((a = va_arg(ap, char *)) != NULL && argc < 31)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    memset(c, 0, sizeof(*c));
    cdc_error_clear(e);
    return cdc_config_parse(opts, "prog", "Test program.", argc, argv, env, c, out ? out : stderr,
                            e);
}

static char *no_env[] = {NULL};

/* Terminates parse()'s argument list (a typed null pointer for the variadic call). */
#define END ((char *)NULL)

/* r is an error whose message holds needle1 (and needle2 unless NULL); frees *c of table. */
static void expect_error_of(const cdc_opt_t *table, cdc_config_result_t r, void *c,
                            const cdc_error_t *e, const char *needle1, const char *needle2)
{
    assert_int_equal(r, CDC_CONFIG_ERROR);
    assert_int_equal(e->code, CDC_ERR_CONFIG);
    if (strstr(e->msg, needle1) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", e->msg, needle1);
    if (needle2 && strstr(e->msg, needle2) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", e->msg, needle2);
    cdc_config_free(table, c);
}

static void expect_error(cdc_config_result_t r, tcfg_t *c, const cdc_error_t *e,
                         const char *needle1, const char *needle2)
{
    expect_error_of(opts, r, c, e, needle1, needle2);
}

static void test_defaults_and_flags(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    (void)state;

    assert_int_equal(parse(&c, no_env, &e, NULL, "--dsn=x", END), CDC_CONFIG_OK);
    assert_string_equal(c.name, "anon");
    assert_int_equal(c.count, 3);
    assert_false(c.verbose);
    assert_int_equal(c.interval_ms, 1000);
    assert_int_equal(c.buffer, 65536);
    assert_string_equal(c.mode, "fast");
    assert_string_equal(c.required_s, "x");
    cdc_config_free(opts, &c);
    assert_null(c.name);

    /* --name value form, bare bool, every type */
    assert_int_equal(parse(&c, no_env, &e, NULL, "--dsn", "host=a", "--name", "n1", "--verbose",
                           "--count=100", "--interval=250ms", "--buffer=16MiB", "--mode=safe", END),
                     CDC_CONFIG_OK);
    assert_string_equal(c.name, "n1");
    assert_string_equal(c.required_s, "host=a");
    assert_true(c.verbose);
    assert_int_equal(c.count, 100);
    assert_int_equal(c.interval_ms, 250);
    assert_int_equal(c.buffer, 16 * 1048576);
    assert_string_equal(c.mode, "safe");
    cdc_config_free(opts, &c);

    /* the last of a repeated flag wins; --verbose=false */
    assert_int_equal(
        parse(&c, no_env, &e, NULL, "--dsn=x", "--count=5", "--count=6", "--verbose=off", END),
        CDC_CONFIG_OK);
    assert_int_equal(c.count, 6);
    assert_false(c.verbose);
    cdc_config_free(opts, &c);
}

static void test_unknown_and_stray(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    (void)state;
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--colour=red", END), &c, &e,
                 "unknown option --colour", "--help");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "positional", END), &c, &e,
                 "unexpected argument \"positional\"", "--name=value");
    expect_error(parse(&c, no_env, &e, NULL, "-v", END), &c, &e, "unexpected argument \"-v\"",
                 NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--", END), &c, &e, "unexpected argument", NULL);
    /* A near miss names the option that was probably meant. */
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--intervall=2s", END), &c, &e,
                 "unknown option --intervall: did you mean --interval?", NULL);
}

/* Warnings on out for env, as one string. */
static size_t check_env(char **env, const char *const *known, char *buf, size_t size)
{
    FILE *out = fmemopen(buf, size - 1, "w");
    size_t n;

    assert_non_null(out);
    memset(buf, 0, size);
    n = cdc_config_check_env(opts, "prog", env, known, out);
    fclose(out);
    return n;
}

static void test_takes_value(void **state)
{
    (void)state;
    assert_true(cdc_config_takes_value(opts, "--name"));
    assert_true(cdc_config_takes_value(opts, "--pg-dsn")); /* a former name */
    assert_false(cdc_config_takes_value(opts, "--name=x"));
    assert_false(cdc_config_takes_value(opts, "--verbose")); /* a bool */
    assert_false(cdc_config_takes_value(opts, "--nope"));
    assert_false(cdc_config_takes_value(opts, "status"));
    assert_false(cdc_config_takes_value(opts, NULL));
}

static void test_unknown_env(void **state)
{
    static const char *const known[] = {"CDC_WAREHOUSE", NULL};
    char *typo[] = {"CDC_INTERVALL=5s", "PATH=/bin", "CDC_COUNT=4", NULL};
    char *fine[] = {"CDC_NAME=x",
                    "CDC_PG_DSN=old",
                    "CDC_WAREHOUSE=s3://w/",
                    "CDC_TEST_PG_DSN=host=x",
                    "CDC_KAFKA_DEV_CONTROL=127.0.0.1:1",
                    "CDC_FAULT=",
                    "CDC=1",
                    "NOT_CDC_X=1",
                    NULL};
    char *far[] = {"CDC_ZZZZZZZZZZZZZZZZZZZZZZ=1", "CDC_WAREHOUSE=x", NULL};
    char buf[2048];

    (void)state;
    /* A typo: named, with the closest option of this program; known names are silent. */
    assert_int_equal(check_env(typo, known, buf, sizeof(buf)), 1);
    assert_non_null(strstr(buf, "prog: warning: environment variable CDC_INTERVALL is not an "
                                "option of any cdc program"));
    assert_non_null(strstr(buf, "CDC_INTERVAL (--interval)"));
    assert_null(strstr(buf, "CDC_COUNT"));
    /* Options, former names, other programs' options and reserved variables are silent. */
    assert_int_equal(check_env(fine, known, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    /* Without the other programs' list, their variables are reported too. */
    assert_int_equal(check_env(far, NULL, buf, sizeof(buf)), 2);
    assert_non_null(strstr(buf, "CDC_ZZZZZZZZZZZZZZZZZZZZZZ"));
    assert_non_null(strstr(buf, "CDC_WAREHOUSE"));
}

static void test_missing_value(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    (void)state;
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--count", END), &c, &e,
                 "option --count needs a value", "integer");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn", END), &c, &e, "option --dsn needs a value",
                 NULL);
}

static void test_wrong_type_per_type(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    (void)state;
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--count=ten", END), &c, &e,
                 "invalid value \"ten\" for option --count", "an integer");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--count=5x", END), &c, &e,
                 "--count (CDC_COUNT, from command line)", NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--count=", END), &c, &e,
                 "invalid value \"\"", NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--verbose=maybe", END), &c, &e,
                 "invalid value \"maybe\" for option --verbose", "true or false");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--interval=soon", END), &c, &e,
                 "--interval", "a duration such as");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--interval=5parsecs", END), &c, &e,
                 "--interval", NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--interval=-5s", END), &c, &e,
                 "--interval", NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--buffer=lots", END), &c, &e, "--buffer",
                 "a size such as");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--buffer=12QiB", END), &c, &e, "--buffer",
                 NULL);
}

static void test_out_of_range(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    (void)state;
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--count=0", END), &c, &e,
                 "value \"0\" for option --count", "out of range: expected 1 to 100");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--count=101", END), &c, &e, "out of range",
                 NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--interval=5ms", END), &c, &e,
                 "--interval", "milliseconds");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--interval=2h", END), &c, &e,
                 "out of range", NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--buffer=2GiB", END), &c, &e, "--buffer",
                 "bytes");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--buffer=100", END), &c, &e,
                 "out of range", NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--count=99999999999999999999", END), &c,
                 &e, "--count", NULL);
}

static void test_bad_enum(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    (void)state;
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--mode=turbo", END), &c, &e,
                 "invalid value \"turbo\" for option --mode", "expected one of fast|safe|off");
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--mode=Fast", END), &c, &e, "--mode",
                 NULL);
    expect_error(parse(&c, no_env, &e, NULL, "--dsn=x", "--mode=fas", END), &c, &e, "--mode", NULL);
}

static void test_missing_required(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    (void)state;
    expect_error(parse(&c, no_env, &e, NULL, END), &c, &e, "missing required option --dsn",
                 "CDC_DSN");
    /* the environment satisfies it */
    {
        char *env[] = {"CDC_DSN=from-env", NULL};
        assert_int_equal(parse(&c, env, &e, NULL, END), CDC_CONFIG_OK);
        assert_string_equal(c.required_s, "from-env");
        cdc_config_free(opts, &c);
    }
}

static void test_env_precedence(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    char *env[] = {"CDC_COUNT=7",  "CDC_NAME=envname", "CDC_DSN=envdsn", "CDC_VERBOSE=yes",
                   "CDC_MODE=off", "OTHER=1",          "CDC_COUNTX=9",   NULL};
    (void)state;

    /* environment over default */
    assert_int_equal(parse(&c, env, &e, NULL, END), CDC_CONFIG_OK);
    assert_int_equal(c.count, 7);
    assert_string_equal(c.name, "envname");
    assert_true(c.verbose);
    assert_string_equal(c.mode, "off");
    cdc_config_free(opts, &c);

    /* flag over environment */
    assert_int_equal(parse(&c, env, &e, NULL, "--count=8", "--name=flag", END), CDC_CONFIG_OK);
    assert_int_equal(c.count, 8);
    assert_string_equal(c.name, "flag");
    assert_string_equal(c.required_s, "envdsn");
    cdc_config_free(opts, &c);

    /* a flag hides a bad environment value */
    {
        char *bad[] = {"CDC_COUNT=lots", "CDC_DSN=x", NULL};
        assert_int_equal(parse(&c, bad, &e, NULL, "--count=9", END), CDC_CONFIG_OK);
        assert_int_equal(c.count, 9);
        cdc_config_free(opts, &c);
        expect_error(parse(&c, bad, &e, NULL, END), &c, &e,
                     "invalid value \"lots\" for option --count (CDC_COUNT, from environment)",
                     NULL);
    }
    {
        char *bad[] = {"CDC_INTERVAL=1ms", "CDC_DSN=x", NULL};
        expect_error(parse(&c, bad, &e, NULL, END), &c, &e, "from environment", "out of range");
    }
    {
        char *bad[] = {"CDC_MODE=fastest", "CDC_DSN=x", NULL};
        expect_error(parse(&c, bad, &e, NULL, END), &c, &e, "CDC_MODE", "one of");
    }
}

static void test_env_name(void **state)
{
    char buf[64];
    (void)state;
    cdc_config_env_name("commit-interval", buf, sizeof(buf));
    assert_string_equal(buf, "CDC_COMMIT_INTERVAL");
    cdc_config_env_name("kafka.bootstrap", buf, sizeof(buf));
    assert_string_equal(buf, "CDC_KAFKA_BOOTSTRAP");
    cdc_config_env_name("abcdefghij", buf, 8);
    assert_string_equal(buf, "CDC_ABC");
}

static void test_parsers(void **state)
{
    int64_t v;
    bool b;
    (void)state;
    assert_true(cdc_parse_duration_ms("250", &v) && v == 250);
    assert_true(cdc_parse_duration_ms("250ms", &v) && v == 250);
    assert_true(cdc_parse_duration_ms("1s", &v) && v == 1000);
    assert_true(cdc_parse_duration_ms("1.5s", &v) && v == 1500);
    assert_true(cdc_parse_duration_ms("5m", &v) && v == 300000);
    assert_true(cdc_parse_duration_ms("2h", &v) && v == 7200000);
    assert_true(cdc_parse_duration_ms("0", &v) && v == 0);
    assert_false(cdc_parse_duration_ms("", &v));
    assert_false(cdc_parse_duration_ms(" 1s", &v));
    assert_false(cdc_parse_duration_ms("-1s", &v));
    assert_false(cdc_parse_duration_ms("1d", &v));
    assert_false(cdc_parse_duration_ms("s", &v));
    assert_false(cdc_parse_duration_ms(NULL, &v));
    /* not a number (found by tests/fuzz/config.c: converting NaN to an integer is undefined) */
    assert_false(cdc_parse_duration_ms("nan", &v));
    assert_false(cdc_parse_duration_ms("NaNms", &v));
    assert_false(cdc_parse_duration_ms("infs", &v));
    assert_false(cdc_parse_size("nanKiB", &v));

    assert_true(cdc_parse_size("512", &v) && v == 512);
    assert_true(cdc_parse_size("64KiB", &v) && v == 65536);
    assert_true(cdc_parse_size("1k", &v) && v == 1024);
    assert_true(cdc_parse_size("16MiB", &v) && v == 16777216);
    assert_true(cdc_parse_size("1m", &v) && v == 1048576);
    assert_true(cdc_parse_size("1GiB", &v) && v == 1073741824);
    assert_true(cdc_parse_size("2gb", &v) && v == 2147483648LL);
    assert_false(cdc_parse_size("1TiB", &v));
    assert_false(cdc_parse_size("-1", &v));
    assert_false(cdc_parse_size("1e30GiB", &v));
    assert_false(cdc_parse_size("KiB", &v));

    assert_true(cdc_parse_bool("true", &b) && b);
    assert_true(cdc_parse_bool("YES", &b) && b);
    assert_true(cdc_parse_bool("on", &b) && b);
    assert_true(cdc_parse_bool("1", &b) && b);
    assert_true(cdc_parse_bool("false", &b) && !b);
    assert_true(cdc_parse_bool("No", &b) && !b);
    assert_true(cdc_parse_bool("off", &b) && !b);
    assert_true(cdc_parse_bool("0", &b) && !b);
    assert_false(cdc_parse_bool("2", &b));
    assert_false(cdc_parse_bool("", &b));

    assert_true(cdc_parse_int("-42", &v) && v == -42);
    assert_true(cdc_parse_int("9223372036854775807", &v) && v == INT64_MAX);
    assert_false(cdc_parse_int("9223372036854775808", &v));
    assert_false(cdc_parse_int("4 2", &v));
    assert_false(cdc_parse_int("0x10", &v));
    assert_false(cdc_parse_int("", &v));
    assert_false(cdc_parse_int(NULL, &v));
}

/* Runs parse with output captured into a heap string (caller frees). */
static char *captured(cdc_config_result_t *r, const char *flag)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tcfg_t c;
    cdc_error_t e;

    assert_non_null(f);
    *r = parse(&c, no_env, &e, f, flag, END);
    fclose(f);
    cdc_config_free(opts, &c);
    return buf;
}

static void test_help_outputs(void **state)
{
    cdc_config_result_t r;
    char *out;
    (void)state;

    out = captured(&r, "--help");
    assert_int_equal(r, CDC_CONFIG_HELP);
    assert_non_null(strstr(out, "Usage: prog"));
    assert_non_null(strstr(out, "Test program."));
    assert_non_null(strstr(out, "--count=<int>  [CDC_COUNT]"));
    assert_non_null(strstr(out, "(1..100)"));
    assert_non_null(strstr(out, "Default: 3."));
    assert_non_null(strstr(out, "(fast|safe|off)"));
    assert_non_null(strstr(out, "--dsn=<string>  [CDC_DSN]"));
    assert_non_null(strstr(out, "Required."));
    assert_non_null(strstr(out, "(10..3600000 ms)"));
    free(out);

    out = captured(&r, "-h");
    assert_int_equal(r, CDC_CONFIG_HELP);
    free(out);

    out = captured(&r, "--help-markdown");
    assert_int_equal(r, CDC_CONFIG_MARKDOWN);
    assert_non_null(strstr(out, "## `prog`"));
    assert_non_null(strstr(out, "| Flag | Environment | Type | Default | Allowed | Description |"));
    assert_non_null(strstr(out, "| `--count` | `CDC_COUNT` | int | `3` | 1..100 | A count. |"));
    assert_non_null(strstr(out, "| `--mode` | `CDC_MODE` | enum | `fast` | fast, safe, off |"));
    assert_non_null(strstr(out, "| `--dsn` | `CDC_DSN` | string | **required** |"));
    /* every option is a table row */
    for (const cdc_opt_t *o = opts; o->name; o++) {
        char row[64];
        snprintf(row, sizeof(row), "| `--%s` |", o->name);
        assert_non_null(strstr(out, row));
    }
    free(out);

    out = captured(&r, "--version");
    assert_int_equal(r, CDC_CONFIG_VERSION);
    assert_true(strncmp(out, "prog ", 5) == 0);
    free(out);
}

/* --help wins even when required options are missing and later flags are bad. */
static void test_help_before_errors(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    (void)state;
    assert_int_equal(parse(&c, no_env, &e, f, "--help", "--count=bad", END), CDC_CONFIG_HELP);
    fclose(f);
    free(buf);
    cdc_config_free(opts, &c);
}

/* cdc_config_load() exits 2 with "<prog>: <message>" on stderr; 0 on --help. */
static int load_in_child(char **argv, int argc, char *msg, size_t size)
{
    int fds[2], st;
    pid_t pid;
    ssize_t n;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tcfg_t c = {0};
        dup2(fds[1], 2);
        if (freopen("/dev/null", "w", stdout) == NULL)
            _exit(99);
        cdc_config_load(opts, "prog", "Test program.", argc, argv, &c);
        cdc_config_free(opts, &c);
        _exit(0);
    }
    close(fds[1]);
    n = read(fds[0], msg, size - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_load_exit_codes(void **state)
{
    char msg[512];
    char *bad[] = {"prog", "--dsn=x", "--count=zero", NULL};
    char *help[] = {"prog", "--help", NULL};
    char *ok[] = {"prog", "--dsn=x", NULL};
    (void)state;
    assert_int_equal(load_in_child(bad, 3, msg, sizeof(msg)), CDC_CONFIG_EXIT);
    assert_non_null(strstr(msg, "prog: invalid value \"zero\" for option --count"));
    assert_int_equal(load_in_child(help, 2, msg, sizeof(msg)), 0);
    assert_int_equal(load_in_child(ok, 2, msg, sizeof(msg)), 0);
}

/* A renamed option's former name is accepted as a flag and as CDC_<ALIAS>; new names win. */
static void test_alias(void **state)
{
    tcfg_t c;
    cdc_error_t e;
    char *old_env[] = {"CDC_PG_DSN=old", NULL};
    char *both_env[] = {"CDC_PG_DSN=old", "CDC_DSN=new", NULL};
    char buf[4096] = {0};
    FILE *out;

    (void)state;
    assert_int_equal(parse(&c, no_env, &e, NULL, "--pg-dsn=flag", END), CDC_CONFIG_OK);
    assert_string_equal(c.required_s, "flag");
    cdc_config_free(opts, &c);
    assert_int_equal(parse(&c, old_env, &e, NULL, END), CDC_CONFIG_OK);
    assert_string_equal(c.required_s, "old");
    cdc_config_free(opts, &c);
    assert_int_equal(parse(&c, both_env, &e, NULL, END), CDC_CONFIG_OK);
    assert_string_equal(c.required_s, "new");
    cdc_config_free(opts, &c);
    assert_int_equal(parse(&c, old_env, &e, NULL, "--dsn=flag", END), CDC_CONFIG_OK);
    assert_string_equal(c.required_s, "flag");
    cdc_config_free(opts, &c);

    out = fmemopen(buf, sizeof(buf) - 1, "w");
    assert_non_null(out);
    assert_int_equal(parse(&c, no_env, &e, out, "--help-markdown", END), CDC_CONFIG_MARKDOWN);
    fclose(out);
    cdc_config_free(opts, &c);
    assert_non_null(strstr(buf, "Formerly `--pg-dsn` / `CDC_PG_DSN`, still accepted."));
}

/* ---- secret options read from files ---- */

typedef struct scfg {
    char *password;
    char *dsn;
} scfg_t;

static const cdc_opt_t secret_opts[] = {
    {"password", CDC_OPT_STRING, offsetof(scfg_t, password), NULL, false, 0, 0, NULL, "A secret.",
     .secret = true},
    {"dsn", CDC_OPT_STRING, offsetof(scfg_t, dsn), NULL, true, 0, 0, NULL, "Required secret.",
     .secret = true},
    CDC_OPT_END,
};

/* Parses argv ("prog", the flags, NULL) with env into *c. */
static cdc_config_result_t parse_secret(scfg_t *c, char **env, cdc_error_t *e, char **argv)
{
    int argc = 0;

    while (argv[argc] != NULL)
        argc++;
    memset(c, 0, sizeof(*c));
    cdc_error_clear(e);
    return cdc_config_parse(secret_opts, "prog", "Test program.", argc, argv, env, c, stderr, e);
}

/* Writes text to a new file under dir; returns its path (static buffer per slot). */
static const char *write_file(const char *dir, const char *name, const char *text)
{
    static char paths[4][512];
    static int slot;
    char *path = paths[slot++ % 4];
    FILE *f;

    snprintf(path, 512, "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_secret_error(cdc_config_result_t r, scfg_t *c, const cdc_error_t *e,
                                const char *needle1, const char *needle2)
{
    expect_error_of(secret_opts, r, c, e, needle1, needle2);
}

/* --<name>-file and CDC_<NAME>_FILE read a secret option from a file (trailing newlines
 * dropped); a bad file, an empty one, or the value and its file given together are
 * errors naming the option; a flag still wins over the environment. */
static void test_secret_files(void **state)
{
    char dir[] = "/tmp/test_config.XXXXXX", arg[600], env1[600], env2[600];
    const char *pw, *dsn, *empty;
    scfg_t c;
    cdc_error_t e;

    (void)state;
    assert_non_null(mkdtemp(dir));
    pw = write_file(dir, "pw", "s3cr=t\n\n");
    dsn = write_file(dir, "dsn", "host=db password=x\r\n");
    empty = write_file(dir, "empty", "\n");

    /* flags: the file's content without its newlines; the required option is satisfied */
    snprintf(arg, sizeof(arg), "--password-file=%s", pw);
    snprintf(env1, sizeof(env1), "--dsn-file=%s", dsn);
    assert_int_equal(parse_secret(&c, no_env, &e, (char *[]){"prog", arg, env1, NULL}),
                     CDC_CONFIG_OK);
    assert_string_equal(c.password, "s3cr=t");
    assert_string_equal(c.dsn, "host=db password=x");
    cdc_config_free(secret_opts, &c);

    /* the environment, and a flag over it */
    snprintf(env1, sizeof(env1), "CDC_DSN_FILE=%s", dsn);
    snprintf(env2, sizeof(env2), "CDC_PASSWORD_FILE=%s", pw);
    assert_int_equal(parse_secret(&c, (char *[]){env1, env2, NULL}, &e, (char *[]){"prog", NULL}),
                     CDC_CONFIG_OK);
    assert_string_equal(c.password, "s3cr=t");
    assert_string_equal(c.dsn, "host=db password=x");
    cdc_config_free(secret_opts, &c);
    assert_int_equal(parse_secret(&c, (char *[]){env1, env2, NULL}, &e,
                                  (char *[]){"prog", "--password=flag", NULL}),
                     CDC_CONFIG_OK);
    assert_string_equal(c.password, "flag");
    cdc_config_free(secret_opts, &c);

    /* the value and its file together */
    snprintf(arg, sizeof(arg), "--password-file=%s", pw);
    expect_secret_error(
        parse_secret(&c, (char *[]){env1, NULL}, &e, (char *[]){"prog", "--password=x", arg, NULL}),
        &c, &e, "options --password and --password-file are both given", NULL);
    expect_secret_error(parse_secret(&c, (char *[]){env2, "CDC_PASSWORD=x", env1, NULL}, &e,
                                     (char *[]){"prog", NULL}),
                        &c, &e, "CDC_PASSWORD and CDC_PASSWORD_FILE are both set", NULL);

    /* a missing file, an empty one: named with the option */
    expect_secret_error(
        parse_secret(&c, no_env, &e, (char *[]){"prog", "--dsn-file=/nonexistent/dsn", NULL}), &c,
        &e, "could not read file \"/nonexistent/dsn\" of option --dsn-file", "No such file");
    snprintf(env2, sizeof(env2), "CDC_PASSWORD_FILE=%s", empty);
    expect_secret_error(
        parse_secret(&c, (char *[]){env1, env2, NULL}, &e, (char *[]){"prog", NULL}), &c, &e,
        "of option --password-file (CDC_PASSWORD_FILE, from environment)", "is empty");
    expect_secret_error(parse_secret(&c, no_env, &e, (char *[]){"prog", "--dsn-file", NULL}), &c,
                        &e, "option --dsn-file needs a value", NULL);

    /* required: the message names the file variant too */
    expect_secret_error(parse_secret(&c, no_env, &e, (char *[]){"prog", NULL}), &c, &e,
                        "missing required option --dsn", "--dsn-file");

    /* the file variants are options: known variables, values taken, in the help */
    {
        char buf[4096] = {0};
        FILE *out = fmemopen(buf, sizeof(buf) - 1, "w");
        scfg_t h;

        assert_non_null(out);
        assert_int_equal(cdc_config_check_env(secret_opts, "prog",
                                              (char *[]){"CDC_DSN_FILE=/x", NULL}, NULL, out),
                         0);
        assert_true(cdc_config_takes_value(secret_opts, "--dsn-file"));
        assert_false(cdc_config_takes_value(secret_opts, "--name-file"));
        memset(&h, 0, sizeof(h));
        assert_int_equal(cdc_config_parse(secret_opts, "prog", "Test.", 2,
                                          (char *[]){"prog", "--help-markdown", NULL}, no_env, &h,
                                          out, &e),
                         CDC_CONFIG_MARKDOWN);
        fclose(out);
        assert_non_null(strstr(buf, "| `--password-file` | `CDC_PASSWORD_FILE` | path |"));
        assert_non_null(strstr(buf, "Reads --dsn from this file"));
    }
    unlink(pw);
    unlink(dsn);
    unlink(empty);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_flags), cmocka_unit_test(test_unknown_and_stray),
        cmocka_unit_test(test_missing_value),      cmocka_unit_test(test_wrong_type_per_type),
        cmocka_unit_test(test_out_of_range),       cmocka_unit_test(test_bad_enum),
        cmocka_unit_test(test_missing_required),   cmocka_unit_test(test_env_precedence),
        cmocka_unit_test(test_env_name),           cmocka_unit_test(test_parsers),
        cmocka_unit_test(test_help_outputs),       cmocka_unit_test(test_help_before_errors),
        cmocka_unit_test(test_load_exit_codes),    cmocka_unit_test(test_alias),
        cmocka_unit_test(test_unknown_env),        cmocka_unit_test(test_takes_value),
        cmocka_unit_test(test_secret_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
