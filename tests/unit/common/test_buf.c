/* common/buf.h: arrays grow by doubling, keep their elements, and fail without harm. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"

typedef struct pair {
    int32_t a;
    int64_t b;
} pair_t;

/* From nothing to `min`, then doubling; the elements survive every move. */
static void test_reserve_doubles(void **state)
{
    (void)state;
    pair_t *arr = NULL;
    size_t cap = 0, n = 0;
    assert_int_equal(cdc_array_reserve(arr, cap, 1, 4), CDC_OK);
    assert_non_null(arr);
    assert_int_equal(cap, 4);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(cdc_array_reserve(arr, cap, n + 1, 4), CDC_OK);
        assert_true(cap >= n + 1);
        arr[n++] = (pair_t){i, -i};
    }
    assert_int_equal(cap, 128);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(arr[i].a, i);
        assert_int_equal(arr[i].b, -i);
    }
    /* a jump past twice the capacity doubles until it fits */
    assert_int_equal(cdc_array_reserve(arr, cap, 1000, 4), CDC_OK);
    assert_int_equal(cap, 1024);
    assert_int_equal(arr[99].a, 99);
    free(arr);
}

/* Enough room: nothing moves. min 0 starts at one element. */
static void test_reserve_in_place(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t cap = 0;
    assert_int_equal(cdc_array_reserve(buf, cap, 1, 0), CDC_OK);
    assert_int_equal(cap, 1);
    assert_int_equal(cdc_array_reserve(buf, cap, 3, 0), CDC_OK);
    assert_int_equal(cap, 4);
    char *before = buf;
    assert_int_equal(cdc_array_reserve(buf, cap, 4, 0), CDC_OK);
    assert_int_equal(cdc_array_reserve(buf, cap, 0, 0), CDC_OK);
    assert_ptr_equal(buf, before);
    assert_int_equal(cap, 4);
    free(buf);
}

/* A size that overflows is out of memory, and the array stays as it was. */
static void test_overflow_leaves_array(void **state)
{
    (void)state;
    pair_t *arr = NULL;
    size_t cap = 0;
    assert_int_equal(cdc_array_reserve(arr, cap, 2, 2), CDC_OK);
    assert_non_null(arr);
    arr[0] = (pair_t){7, 8};
    pair_t *before = arr;
    assert_int_equal(cdc_array_reserve(arr, cap, SIZE_MAX / 2, 2), CDC_ERR_NOMEM);
    assert_ptr_equal(arr, before);
    assert_int_equal(cap, 2);
    assert_int_equal(cdc_array_reserve(arr, cap, SIZE_MAX, 2), CDC_ERR_NOMEM);
    assert_int_equal(cap, 2);
    assert_int_equal(cdc_array_resize(arr, SIZE_MAX / sizeof(pair_t) + 1), CDC_ERR_NOMEM);
    assert_ptr_equal(arr, before);
    assert_int_equal(arr[0].a, 7);
    free(arr);
}

/* Exact resizing keeps the elements; zero elements still give an array. */
static void test_resize_exact(void **state)
{
    (void)state;
    int64_t *arr = NULL;
    for (size_t n = 0; n < 10; n++) {
        assert_int_equal(cdc_array_resize(arr, n + 1), CDC_OK);
        assert_non_null(arr);
        arr[n] = (int64_t)n * 3;
    }
    for (size_t n = 0; n < 10; n++)
        assert_int_equal(arr[n], (int64_t)n * 3);
    assert_int_equal(cdc_array_resize(arr, 0), CDC_OK);
    assert_non_null(arr);
    free(arr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_doubles),
        cmocka_unit_test(test_reserve_in_place),
        cmocka_unit_test(test_overflow_leaves_array),
        cmocka_unit_test(test_resize_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
