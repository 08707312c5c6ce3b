/* common/strmap.h: names map to their indexes past many growths, and only equal names match. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/strmap.h"

/* 20,000 topic names (far past every growth): each finds its own index, a name never put
 * finds nothing, and a put of an equal name (another pointer) replaces the value. */
static void test_many_names(void **state)
{
    (void)state;
    enum { N = 20000 };
    cdc_strmap_t m = {0};
    char(*names)[48] = calloc(N, sizeof(*names));
    size_t v;
    assert_non_null(names);
    for (size_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "cdc.public.table_%05zu", i);
        assert_int_equal(cdc_strmap_put(&m, names[i], i), CDC_OK);
    }
    assert_int_equal(m.n, N);
    assert_true(m.n * 2 <= m.cap);
    for (size_t i = 0; i < N; i++) {
        assert_true(cdc_strmap_get(&m, names[i], &v));
        assert_int_equal(v, i);
    }
    assert_false(cdc_strmap_get(&m, "cdc.public.table_20000", &v));
    assert_false(cdc_strmap_get(&m, "cdc.public.table_0000", NULL));
    assert_false(cdc_strmap_get(&m, "", NULL));
    char again[48];
    snprintf(again, sizeof(again), "%s", names[7]);
    assert_int_equal(cdc_strmap_put(&m, again, 99), CDC_OK);
    assert_int_equal(m.n, N);
    assert_true(cdc_strmap_get(&m, names[7], &v));
    assert_int_equal(v, 99);
    cdc_strmap_free(&m);
    assert_false(cdc_strmap_get(&m, names[0], NULL));
    free(names);
}

/* An empty (zeroed) map finds nothing and frees cleanly; a NULL key is refused. */
static void test_empty(void **state)
{
    (void)state;
    cdc_strmap_t m = {0};
    assert_false(cdc_strmap_get(&m, "a", NULL));
    assert_int_equal(cdc_strmap_put(&m, NULL, 1), CDC_ERR_INVALID);
    cdc_strmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_names),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
