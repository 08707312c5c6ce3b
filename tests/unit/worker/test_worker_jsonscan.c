/*
 * Unit tests for worker/jsonscan.c: the fast path builds exactly jansson's tree (same
 * values, key order, duplicate-key rule), and everything outside its subset (non-ASCII,
 * \u escapes, reals, huge integers, syntax errors, scalars at top level) is refused so
 * that cdc_json_load falls back to json_loadb with jansson's own result or error.
 * cdc_json_load_scoped (arena-backed trees) gives the same trees, also when the arena
 * fills up, when the tree is changed after loading, and across many scopes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "worker/jsonscan.h"

/* Both parsers agree; fast says whether the fast path must take it. */
static void same(const char *doc, bool fast)
{
    json_error_t je;
    json_t *ref = json_loadb(doc, strlen(doc), 0, &je);
    json_t *got = cdc_json_scan(doc, strlen(doc));
    json_t *load = cdc_json_load(doc, strlen(doc), &je);
    if (fast)
        assert_non_null(got);
    else
        assert_null(got);
    if (ref == NULL) {
        assert_null(load);
    } else {
        assert_non_null(load);
        assert_true(json_equal(ref, load));
        if (got != NULL) {
            char *a = json_dumps(ref, JSON_COMPACT | JSON_PRESERVE_ORDER);
            char *b = json_dumps(got, JSON_COMPACT | JSON_PRESERVE_ORDER);
            assert_string_equal(a, b); /* also the key order */
            free(a);
            free(b);
        }
    }
    json_decref(ref);
    json_decref(got);
    json_decref(load);
}

static void test_fast_subset(void **state)
{
    (void)state;
    same("{}", true);
    same(" [ ] ", true);
    same("{\"before\":null,\"after\":{\"id\":42,\"v\":\"value-42\"},\"source\":{\"schema\":"
         "\"public\",\"lsn\":123456789012,\"sequence\":\"[\\\"1\\\",\\\"2\\\"]\"},"
         "\"op\":\"c\",\"ts_ms\":1709287200001}",
         true);
    same("{\"a\":[1,-2,0,-0,true,false,null,\"x\"],\"b\":{\"c\":{}}}", true);
    same("{\"esc\":\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t\",\"k\\n\":1}", true);
    same("{\"dup\":1,\"z\":2,\"dup\":3}", true);
    same("\t{\r\n\"a\" : 999999999999999999 }\n", true);
    same("{\"neg\":-999999999999999999}", true);
}

static void test_fallback(void **state)
{
    (void)state;
    same("{\"u\":\"caf\xc3\xa9\"}", false); /* non-ASCII: valid UTF-8 */
    same("{\"u\":\"\xff\"}", false);        /* invalid UTF-8: jansson error */
    same("{\"u\":\"\\u00e9\\ud83d\\ude00\"}", false);
    same("{\"nul\":\"a\\u0000b\"}", false);
    same("{\"r\":1.5,\"e\":1e3}", false);
    same("{\"big\":1234567890123456789}", false);
    same("{\"big\":99999999999999999999999}", false);
    same("{\"lz\":01}", false);
    same("{\"a\":1,}", false);
    same("{\"a\":1", false);
    same("{\"a\" 1}", false);
    same("{\"a\":tru}", false);
    same("{\"a\":truex}", false);
    same("{} x", false);
    same("[1 2]", false);
    same("[1,]", false);
    same("[1", false);
    same("{\"a\":[1}", false);
    same("[{\"a\":1]", false);
    same("[[],[1,[2]]]", true);
    same("42", false);
    same("\"s\"", false);
    same("", false);
    same("{\"ctl\":\"a\tb\"}", false);
    same("{\"bad\":\"\\x\"}", false);
    char deep[201];
    memset(deep, '[', 100); /* deeper than the fast path goes */
    memset(deep + 100, ']', 100);
    deep[200] = '\0';
    same(deep, false);
}

/* Scoped (arena) loads: same trees as json_loadb, many times over on one thread. */
static void test_scoped(void **state)
{
    (void)state;
    json_error_t je;
    const char *docs[] = {
        "{\"before\":null,\"after\":{\"id\":42,\"v\":\"value-42\"},\"source\":{\"lsn\":1},"
        "\"op\":\"c\"}",
        "{\"a\":[1,2,{\"b\":\"\\u00e9\"}]}", /* json_loadb fallback */
        "{\"x\":1.5}",                       /* fallback too */
        "[1,2,3]",
    };
    for (int round = 0; round < 2000; round++) {
        const char *doc = docs[round % 4];
        json_t *ref = json_loadb(doc, strlen(doc), 0, &je);
        json_t *got = cdc_json_load_scoped(doc, strlen(doc), &je);
        assert_non_null(got);
        assert_true(json_equal(ref, got));
        /* Changing the tree afterwards allocates outside the arena: freed normally. */
        if (json_is_object(got))
            assert_int_equal(json_object_set_new(got, "added", json_string("a string value")), 0);
        /* A tree loaded meanwhile without a scope is an ordinary one. */
        json_t *other = cdc_json_load(doc, strlen(doc), &je);
        assert_non_null(other);
        json_decref(got);
        cdc_json_scope_end();
        assert_true(json_equal(ref, other));
        json_decref(other);
        json_decref(ref);
    }
    /* A document whose tree does not fit in the arena: the rest comes from malloc. */
    size_t n = 40000, cap = n * 24 + 16, len = 0;
    char *big = malloc(cap);
    assert_non_null(big);
    big[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(big + len, cap - len, "%s\"k%zu\":\"v%zu\"", i ? "," : "", i, i);
    big[len++] = '}';
    json_t *ref = json_loadb(big, len, 0, &je);
    json_t *got = cdc_json_load_scoped(big, len, &je);
    assert_non_null(ref);
    assert_non_null(got);
    assert_true(json_equal(ref, got));
    json_decref(got);
    cdc_json_scope_end();
    json_decref(ref);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_subset),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_scoped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
