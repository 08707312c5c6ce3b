/* Unit tests for cdc_http_tokens_parse (common/http.h), the --http-token format, and
 * cdc_auth_check (common/options.h), authentication by default: named and bare tokens,
 * blank lines and trailing blanks, the malformed lines refused by number, and which
 * missing secret each program is refused for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/http.h"
#include "common/options.h"

static void test_named_and_bare(void **state)
{
    cdc_http_token_t *t = NULL;
    size_t n = 0;
    cdc_error_t e;
    (void)state;
    assert_int_equal(cdc_http_tokens_parse("ops:t1\n\nci:t:2 \r\nbareToken+/=\n", &t, &n, &e),
                     CDC_OK);
    assert_int_equal(n, 3);
    assert_string_equal(t[0].name, "ops");
    assert_string_equal(t[0].token, "t1");
    assert_string_equal(t[1].name, "ci");
    assert_string_equal(t[1].token, "t:2"); /* the first colon splits */
    assert_string_equal(t[2].name, "admin");
    assert_string_equal(t[2].token, "bareToken+/=");
    cdc_http_tokens_free(t, n);

    assert_int_equal(cdc_http_tokens_parse(NULL, &t, &n, &e), CDC_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cdc_http_tokens_parse("\n \n", &t, &n, &e), CDC_OK);
    assert_int_equal(n, 0);
    cdc_http_tokens_free(t, n);
}

static void test_malformed(void **state)
{
    static const char *const bad[] = {"ok:x\nbad name:secret-value", "ops:", ":secret-value",
                                      "a/b:secret-value"};
    cdc_http_token_t *t = NULL;
    size_t n = 0;
    cdc_error_t e;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(cdc_http_tokens_parse(bad[i], &t, &n, &e), CDC_ERR_CONFIG);
        assert_null(t);
        assert_null(strstr(e.msg, "secret-value")); /* the line's number, never its text */
    }
    assert_int_equal(cdc_http_tokens_parse("ok:x\nbad name:secret-value", &t, &n, &e),
                     CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "line 2"));
}

static void test_auth_header(void **state)
{
    char h[64];
    (void)state;
    assert_true(cdc_http_auth_header("ops:t1\nci:t2\n", h, sizeof(h)));
    assert_string_equal(h, "Authorization: Bearer t1");
    assert_true(cdc_http_auth_header("bare\n", h, sizeof(h)));
    assert_string_equal(h, "Authorization: Bearer bare");
    assert_false(cdc_http_auth_header(NULL, h, sizeof(h)));
    assert_string_equal(h, "");
    assert_false(cdc_http_auth_header("a-token-far-too-long-for-the-buffer-given-here-0123456789",
                                      h, sizeof(h)));
    assert_string_equal(h, "");
}

static void test_auth_check(void **state)
{
    cdc_error_t e;
    (void)state;
    cdc_auth_needs_t coord = {
        .program = "cdc-coordinator", .uses_worker_secret = true, .has_http = true};
    assert_int_equal(cdc_auth_check(&coord, NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--worker-secret-file and --http-token-file are not set"));
    assert_non_null(strstr(e.msg, "--insecure"));
    coord.worker_secret = "s";
    assert_int_equal(cdc_auth_check(&coord, NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--http-token-file is not set"));
    assert_null(strstr(e.msg, "--worker-secret-file"));
    coord.http_token = "\n"; /* no token in it */
    assert_int_equal(cdc_auth_check(&coord, NULL, &e), CDC_ERR_CONFIG);
    coord.http_token = "t";
    assert_int_equal(cdc_auth_check(&coord, NULL, &e), CDC_OK);
    coord.http_token = "bad name:t";
    assert_int_equal(cdc_auth_check(&coord, NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--http-token"));

    /* a capture without an admin server needs nothing; --insecure waives what is missing */
    cdc_auth_needs_t cap = {.program = "cdc-capture"};
    assert_int_equal(cdc_auth_check(&cap, NULL, &e), CDC_OK);
    cdc_auth_needs_t worker = {
        .program = "cdc-worker", .insecure = true, .uses_worker_secret = true, .has_http = true};
    assert_int_equal(cdc_auth_check(&worker, NULL, &e), CDC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_and_bare),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_auth_header),
        cmocka_unit_test(test_auth_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
