/* Unit tests for common/iceberg/nested.c: levels of nested types and the shredding of
 * nested values into leaf entries, against hand-computed levels (the Parquet format's
 * record shredding); values that do not fit their type. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/iceberg/nested.h"

typedef struct entries {
    char text[1024]; /* "leaf:rep/def=value " per entry */
    size_t len;
} entries_t;

static bool collect(void *ctx, const cdc_ice_node_t *leaf, int rep, int def,
                    const cdc_ice_value_t *v)
{
    entries_t *x = ctx;
    char val[64] = "-";
    if (v != NULL) {
        switch (leaf->f.type) {
        case CDC_ICE_INT:
            snprintf(val, sizeof(val), "%d", (int)v->v.i32);
            break;
        case CDC_ICE_STRING:
            snprintf(val, sizeof(val), "'%.*s'", (int)v->v.bytes.len, v->v.bytes.ptr);
            break;
        case CDC_ICE_DECIMAL:
            snprintf(val, sizeof(val), "%lld", (long long)v->v.dec);
            break;
        default:
            snprintf(val, sizeof(val), "?");
        }
    }
    x->len += (size_t)snprintf(x->text + x->len, sizeof(x->text) - x->len, "%d:%d/%d=%s ",
                               leaf->leaf, rep, def, val);
    return true;
}

static void build(const char *type, cdc_ice_type_t t, cdc_ice_node_t *root)
{
    cdc_ice_field_t f = {.id = 1, .name = "c", .type = t, .nested = (char *)type};
    cdc_error_t e;
    assert_int_equal(cdc_ice_node_build(&f, root, &e), CDC_OK);
}

static const char *shred(const cdc_ice_node_t *root, const char *json, entries_t *x)
{
    char why[160];
    memset(x, 0, sizeof(*x));
    assert_int_equal(
        cdc_ice_nested_shred(root, json, json ? strlen(json) : 0, collect, x, why, sizeof(why)),
        CDC_OK);
    return x->text;
}

static void test_list_of_lists(void **state)
{
    cdc_ice_node_t r;
    entries_t x;

    (void)state;
    build("{\"type\":\"list\",\"element-id\":2,\"element\":{\"type\":\"list\",\"element-id\":3,"
          "\"element\":\"int\",\"element-required\":false},\"element-required\":false}",
          CDC_ICE_LIST, &r);
    assert_int_equal(cdc_ice_node_leaves(&r), 1);
    /* optional list (1), repeated (2), optional inner list (3), repeated (4), optional int (5) */
    assert_int_equal(r.kids[0].kids[0].def, 5);
    assert_int_equal(r.kids[0].kids[0].max_rep, 2);
    assert_string_equal(shred(&r, "[[1,2],null,[],[null]]", &x),
                        "0:0/5=1 0:2/5=2 0:1/2=- 0:1/3=- 0:1/4=- ");
    assert_string_equal(shred(&r, NULL, &x), "0:0/0=- ");
    assert_string_equal(shred(&r, "[]", &x), "0:0/1=- ");
    assert_string_equal(shred(&r, " [ [ 7 ] , [ -8 , 9 ] ] ", &x), "0:0/5=7 0:1/5=-8 0:2/5=9 ");
    cdc_ice_node_free(&r);
}

static void test_struct_with_list(void **state)
{
    cdc_ice_node_t r;
    entries_t x;

    (void)state;
    build("{\"type\":\"struct\",\"fields\":[{\"id\":2,\"name\":\"a\",\"required\":true,\"type\":"
          "\"int\"},{\"id\":3,\"name\":\"b\",\"required\":false,\"type\":{\"type\":\"list\","
          "\"element-id\":4,\"element\":\"string\",\"element-required\":true}},{\"id\":5,"
          "\"name\":\"d\",\"required\":false,\"type\":\"decimal(5,2)\"}]}",
          CDC_ICE_STRUCT, &r);
    assert_int_equal(cdc_ice_node_leaves(&r), 3);
    /* members in any order, one missing (null), escapes in strings, decimals exact */
    assert_string_equal(shred(&r, "{\"b\":[\"x\\\"y\",\"\\u00e9\"],\"a\":1}", &x),
                        "0:0/1=1 1:0/3='x\"y' 1:1/3='\xc3\xa9' 2:0/1=- ");
    assert_string_equal(shred(&r, "{\"a\":2,\"b\":[],\"d\":\"-1.5\"}", &x),
                        "0:0/1=2 1:0/2=- 2:0/2=-150 ");
    assert_string_equal(shred(&r, "{\"a\":3,\"b\":null,\"d\":12.25}", &x),
                        "0:0/1=3 1:0/1=- 2:0/2=1225 ");
    assert_string_equal(shred(&r, NULL, &x), "0:0/0=- 1:0/0=- 2:0/0=- ");
    cdc_ice_node_free(&r);
}

static void test_mismatches(void **state)
{
    cdc_ice_node_t l, s;
    char why[160];
    static const char *const bad_list[] = {
        "[1,\"a\"]", "[[1]]", "{\"a\":1}", "[1,", "[1] x", "[2147483648]", "[1.5]", "7", "",
    };
    static const char *const bad_struct[] = {
        "{\"b\":[\"x\"]}",            /* the required field missing */
        "{\"a\":null}",               /* null in the required field */
        "{\"a\":1,\"b\":[null]}",     /* a null element of required elements */
        "{\"a\":1,\"d\":\"1.234\"}",  /* more fraction digits than the scale */
        "{\"a\":1,\"d\":\"1234.5\"}", /* more digits than the precision */
        "[1]",
    };

    (void)state;
    build("{\"type\":\"list\",\"element-id\":2,\"element\":\"int\",\"element-required\":false}",
          CDC_ICE_LIST, &l);
    for (size_t i = 0; i < sizeof(bad_list) / sizeof(bad_list[0]); i++) {
        assert_int_equal(cdc_ice_nested_shred(&l, bad_list[i], strlen(bad_list[i]), NULL, NULL, why,
                                              sizeof(why)),
                         CDC_ERR_INVALID);
        assert_true(why[0] != '\0');
    }
    build("{\"type\":\"struct\",\"fields\":[{\"id\":2,\"name\":\"a\",\"required\":true,\"type\":"
          "\"int\"},{\"id\":3,\"name\":\"b\",\"required\":false,\"type\":{\"type\":\"list\","
          "\"element-id\":4,\"element\":\"string\",\"element-required\":true}},{\"id\":5,"
          "\"name\":\"d\",\"required\":false,\"type\":\"decimal(5,2)\"}]}",
          CDC_ICE_STRUCT, &s);
    for (size_t i = 0; i < sizeof(bad_struct) / sizeof(bad_struct[0]); i++)
        assert_int_equal(cdc_ice_nested_shred(&s, bad_struct[i], strlen(bad_struct[i]), NULL, NULL,
                                              why, sizeof(why)),
                         CDC_ERR_INVALID);
    cdc_ice_node_free(&l);
    cdc_ice_node_free(&s);
}

static void test_bad_types(void **state)
{
    cdc_ice_node_t r;
    cdc_error_t e;
    cdc_ice_field_t f = {.id = 1, .name = "c", .type = CDC_ICE_LIST};

    (void)state;
    f.nested = "{\"type\":\"list\",\"element-id\":0,\"element\":\"int\"}"; /* no id */
    assert_int_equal(cdc_ice_node_build(&f, &r, &e), CDC_ERR_INVALID);
    f.nested = "{\"type\":\"list\",\"element-id\":2,\"element\":\"varchar\"}";
    assert_int_equal(cdc_ice_node_build(&f, &r, &e), CDC_ERR_INVALID);
    f.nested = "{\"type\":\"map\",\"key-id\":2,\"key\":\"int\",\"value-id\":3,\"value\":\"int\"}";
    assert_int_equal(cdc_ice_node_build(&f, &r, &e), CDC_ERR_UNSUPPORTED);
    f.nested = "{\"type\":\"struct\",\"fields\":[{\"id\":2,\"name\":\"a\",\"type\":\"int\"}]}";
    assert_int_equal(cdc_ice_node_build(&f, &r, &e), CDC_ERR_INVALID); /* not a list */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_of_lists),
        cmocka_unit_test(test_struct_with_list),
        cmocka_unit_test(test_mismatches),
        cmocka_unit_test(test_bad_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
