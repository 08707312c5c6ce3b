/*
 * Unit tests for common/jsonpatch.h: the examples of RFC 6902's appendix A (every
 * operation, arrays, nested paths, "~" escapes, the root, errors), what a patch must
 * leave alone (64-bit integers, member order), and malformed patches with the messages
 * an operator sees.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/jsonpatch.h"

/* Applies patch to doc; returns the error code and the result in *out (or NULL). */
static cdc_err_t patch(const char *p, const char *doc, char **out, cdc_error_t *e)
{
    cdc_jsonpatch_t *jp = NULL;
    size_t n = 0;
    cdc_err_t rc = cdc_jsonpatch_parse(p, strlen(p), &jp, e);
    *out = NULL;
    if (rc != CDC_OK)
        return rc;
    rc = cdc_jsonpatch_apply(jp, doc, strlen(doc), out, &n, e);
    if (rc == CDC_OK)
        assert_int_equal(n, strlen(*out));
    else
        assert_null(*out);
    cdc_jsonpatch_free(jp);
    return rc;
}

static void expect(const char *p, const char *doc, const char *want)
{
    char *out;
    cdc_error_t e;
    cdc_err_t rc = patch(p, doc, &out, &e);
    if (rc != CDC_OK)
        fail_msg("patch %s on %s: %s", p, doc, e.msg);
    assert_string_equal(out, want);
    free(out);
}

static void expect_error(const char *p, const char *doc, cdc_err_t code, const char *in_msg)
{
    char *out;
    cdc_error_t e;
    assert_int_equal(patch(p, doc, &out, &e), code);
    if (strstr(e.msg, in_msg) == NULL)
        fail_msg("\"%s\" not in \"%s\"", in_msg, e.msg);
}

/* RFC 6902, A.1 to A.10 and A.16. */
static void test_rfc_examples(void **state)
{
    (void)state;
    expect("[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]", "{\"foo\":\"bar\"}",
           "{\"foo\":\"bar\",\"baz\":\"qux\"}");
    expect("[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
           "{\"foo\":[\"bar\",\"baz\"]}", "{\"foo\":[\"bar\",\"qux\",\"baz\"]}");
    expect("[{\"op\":\"remove\",\"path\":\"/baz\"}]", "{\"baz\":\"qux\",\"foo\":\"bar\"}",
           "{\"foo\":\"bar\"}");
    expect("[{\"op\":\"remove\",\"path\":\"/foo/1\"}]", "{\"foo\":[\"bar\",\"qux\",\"baz\"]}",
           "{\"foo\":[\"bar\",\"baz\"]}");
    expect("[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]",
           "{\"baz\":\"qux\",\"foo\":\"bar\"}", "{\"baz\":\"boo\",\"foo\":\"bar\"}");
    expect("[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
           "{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
           "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}");
    expect("[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]",
           "{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
           "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}");
    expect("[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},"
           "{\"op\":\"test\",\"path\":\"/foo/1\",\"value\":2}]",
           "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
           "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}");
    expect_error("[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]", "{\"baz\":\"qux\"}",
                 CDC_ERR_CONFLICT, "has another value");
    expect("[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
           "{\"foo\":\"bar\"}", "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}");
    expect("[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
           "{\"foo\":[\"bar\"]}", "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}");
    /* A.12: adding to a nonexistent target */
    expect_error("[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]", "{\"foo\":\"bar\"}",
                 CDC_ERR_INVALID, "\"/baz/bat\" does not exist");
    /* A.14: ~ escapes; A.15: comparing strings and numbers */
    expect("[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10},"
           "{\"op\":\"add\",\"path\":\"/a~1b\",\"value\":1}]",
           "{\"/\":9,\"~1\":10}", "{\"/\":9,\"~1\":10,\"a/b\":1}");
    expect_error("[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]", "{\"~1\":10}",
                 CDC_ERR_CONFLICT, "test");
}

static void test_more(void **state)
{
    (void)state;
    /* copy, replace in an array, the root, numbers compared by value */
    expect("[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b\"}]", "{\"a\":{\"x\":[1]}}",
           "{\"a\":{\"x\":[1]},\"b\":{\"x\":[1]}}");
    expect("[{\"op\":\"replace\",\"path\":\"/a/0\",\"value\":9}]", "{\"a\":[1,2]}",
           "{\"a\":[9,2]}");
    expect("[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"new\":true}}]", "{\"old\":1}",
           "{\"new\":true}");
    expect("[{\"op\":\"test\",\"path\":\"/n\",\"value\":1.0}]", "{\"n\":1}", "{\"n\":1}");
    /* an empty patch writes the document compactly, every digit and the member order
     * kept */
    expect("[]",
           "{ \"z\" : 1,\n  \"lsn\": 9223372036854775807, \"a\": [ -9223372036854775808 ],"
           " \"f\": 0.1, \"s\": \"\\u00e9\\n\" }   ",
           "{\"z\":1,\"lsn\":9223372036854775807,\"a\":[-9223372036854775808],"
           "\"f\":0.10000000000000001,\"s\":\"\xc3\xa9\\n\"}");
    /* what a dead letter's fix looks like: restore a value and remove a stray member */
    expect("[{\"op\":\"test\",\"path\":\"/after/id\",\"value\":7},"
           "{\"op\":\"replace\",\"path\":\"/after/amount\",\"value\":70},"
           "{\"op\":\"remove\",\"path\":\"/after/junk\"}]",
           "{\"op\":\"u\",\"after\":{\"id\":7,\"amount\":\"7O\",\"junk\":1},\"source\":{}}",
           "{\"op\":\"u\",\"after\":{\"id\":7,\"amount\":70},\"source\":{}}");
    /* errors: replace or remove of nothing, out of range, a move into its own child */
    expect_error("[{\"op\":\"replace\",\"path\":\"/x\",\"value\":1}]", "{}", CDC_ERR_INVALID,
                 "operation 0 (replace): \"/x\" does not exist");
    expect_error(
        "[{\"op\":\"add\",\"path\":\"/a\",\"value\":1},{\"op\":\"remove\",\"path\":\"/b\"}]", "{}",
        CDC_ERR_INVALID, "operation 1 (remove)");
    expect_error("[{\"op\":\"add\",\"path\":\"/a/3\",\"value\":1}]", "{\"a\":[1]}", CDC_ERR_INVALID,
                 "does not exist");
    expect_error("[{\"op\":\"remove\",\"path\":\"/a/01\"}]", "{\"a\":[1,2]}", CDC_ERR_INVALID,
                 "does not exist");
    expect_error("[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b\"}]", "{\"a\":{}}",
                 CDC_ERR_INVALID, "own child");
    expect_error("[{\"op\":\"copy\",\"from\":\"/nope\",\"path\":\"/b\"}]", "{}", CDC_ERR_INVALID,
                 "\"/nope\" does not exist");
    expect_error("[]", "{\"op\":\"u\",", CDC_ERR_INVALID, "payload is not JSON");
}

static void test_malformed_patches(void **state)
{
    (void)state;
    expect_error("{\"op\":\"add\"}", "{}", CDC_ERR_INVALID, "not a JSON array");
    expect_error("[{\"op\":\"add\",\"path\":\"/a\"", "{}", CDC_ERR_INVALID, "patch is not JSON");
    expect_error("[{\"op\":\"frobnicate\",\"path\":\"/a\"}]", "{}", CDC_ERR_INVALID,
                 "operation 0: \"op\" is not one of");
    expect_error("[1]", "{}", CDC_ERR_INVALID, "operation 0");
    expect_error("[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]", "{}", CDC_ERR_INVALID,
                 "\"path\" is missing or not a JSON Pointer");
    expect_error("[{\"op\":\"add\",\"path\":\"/a~2\",\"value\":1}]", "{}", CDC_ERR_INVALID,
                 "JSON Pointer");
    expect_error("[{\"op\":\"remove\"}]", "{}", CDC_ERR_INVALID, "\"path\"");
    expect_error("[{\"op\":\"replace\",\"path\":\"/a\"}]", "{}", CDC_ERR_INVALID,
                 "(replace): \"value\" is missing");
    expect_error("[{\"op\":\"move\",\"path\":\"/a\"}]", "{}", CDC_ERR_INVALID,
                 "(move): \"from\" is missing");
    cdc_jsonpatch_t *p = NULL;
    cdc_error_t e;
    const char *one = "[{\"op\":\"remove\",\"path\":\"/a\"}]";
    assert_int_equal(cdc_jsonpatch_parse(one, strlen(one), &p, &e), CDC_OK);
    assert_int_equal(cdc_jsonpatch_count(p), 1);
    cdc_jsonpatch_free(p);
    cdc_jsonpatch_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_examples),
        cmocka_unit_test(test_more),
        cmocka_unit_test(test_malformed_patches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
