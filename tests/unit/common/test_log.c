/*
 * Unit tests for common/log.c: logfmt and JSON line formats (fields, escaping of quotes,
 * newlines and control characters), level filtering, level/format name parsing, and
 * that an over-long message still yields one terminated line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"

/* Runs fn with stderr redirected into buf (NUL-terminated). */
static void capture(void (*fn)(void), char *buf, size_t size)
{
    int fds[2], saved;
    ssize_t n;

    assert_int_equal(pipe(fds), 0);
    saved = dup(STDERR_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    n = read(fds[0], buf, size - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fds[0]);
}

static void emit_plain(void)
{
    cdc_log_info("assigned %d partitions", 4);
}

static void emit_tricky(void)
{
    cdc_log_warn("bad \"value\"\nnext\tline \\ end");
}

static void emit_filtered(void)
{
    cdc_log_debug("hidden");
    cdc_log_info("hidden too");
    cdc_log_error("shown");
}

static void emit_long(void)
{
    static char big[6000];
    memset(big, 'x', sizeof(big) - 1);
    cdc_log_info("%s", big);
}

static void test_logfmt(void **state)
{
    char out[8192];
    (void)state;
    cdc_log_init("cdc-test", "w1");
    cdc_log_set_format(CDC_LOG_LOGFMT);
    cdc_log_set_level(CDC_LOG_DEBUG);
    capture(emit_plain, out, sizeof(out));
    assert_true(strncmp(out, "ts=", 3) == 0);
    assert_non_null(
        strstr(out, "Z level=info proc=cdc-test id=w1 msg=\"assigned 4 partitions\"\n"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */

    capture(emit_tricky, out, sizeof(out));
    assert_non_null(strstr(out, "level=warn"));
    assert_non_null(strstr(out, "msg=\"bad \\\"value\\\"\\nnext\\tline \\\\ end\"\n"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
}

static void test_json(void **state)
{
    char out[8192];
    (void)state;
    cdc_log_init("cdc-test", NULL);
    cdc_log_set_format(CDC_LOG_JSON);
    cdc_log_set_level(CDC_LOG_DEBUG);
    capture(emit_plain, out, sizeof(out));
    assert_true(strncmp(out, "{\"ts\":\"", 7) == 0);
    assert_non_null(strstr(
        out, "\",\"level\":\"info\",\"proc\":\"cdc-test\",\"msg\":\"assigned 4 partitions\"}\n"));
    assert_null(strstr(out, "\"id\""));
    capture(emit_tricky, out, sizeof(out));
    assert_non_null(strstr(out, "\"msg\":\"bad \\\"value\\\"\\nnext\\tline \\\\ end\"}"));
    cdc_log_set_format(CDC_LOG_LOGFMT);
}

static void test_levels(void **state)
{
    char out[8192];
    cdc_log_level_t l;
    cdc_log_format_t f;
    (void)state;
    cdc_log_init("cdc-test", NULL);
    cdc_log_set_level(CDC_LOG_WARN);
    assert_false(cdc_log_enabled(CDC_LOG_INFO));
    assert_true(cdc_log_enabled(CDC_LOG_ERROR));
    capture(emit_filtered, out, sizeof(out));
    assert_null(strstr(out, "hidden"));
    assert_non_null(strstr(out, "level=error"));
    assert_non_null(strstr(out, "msg=\"shown\""));

    assert_true(cdc_log_parse_level("debug", &l) && l == CDC_LOG_DEBUG);
    assert_true(cdc_log_parse_level("error", &l) && l == CDC_LOG_ERROR);
    assert_false(cdc_log_parse_level("loud", &l));
    assert_true(cdc_log_parse_format("json", &f) && f == CDC_LOG_JSON);
    assert_true(cdc_log_parse_format("logfmt", &f) && f == CDC_LOG_LOGFMT);
    assert_false(cdc_log_parse_format("xml", &f));
    cdc_log_set_level(CDC_LOG_INFO);
}

static void test_long_message(void **state)
{
    static char out[16384];
    (void)state;
    cdc_log_init("cdc-test", NULL);
    cdc_log_set_level(CDC_LOG_INFO);
    capture(emit_long, out, sizeof(out));
    assert_true(strlen(out) > 100);
    assert_true(strlen(out) < 4096);
    assert_int_equal(out[strlen(out) - 1], '\n');
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logfmt),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_long_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
