/* Unit tests for common/hex.h: every digit of either case, bytes, and what is rejected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/hex.h"

static void test_digits(void **state)
{
    (void)state;
    for (int i = 0; i < 10; i++)
        assert_int_equal(cdc_hex_digit((char)('0' + i)), i);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(cdc_hex_digit((char)('a' + i)), 10 + i);
        assert_int_equal(cdc_hex_digit((char)('A' + i)), 10 + i);
    }
}

static void test_non_digits(void **state)
{
    int n = 0;
    (void)state;
    assert_int_equal(cdc_hex_digit('g'), -1);
    assert_int_equal(cdc_hex_digit('G'), -1);
    assert_int_equal(cdc_hex_digit('/'), -1);
    assert_int_equal(cdc_hex_digit(':'), -1);
    assert_int_equal(cdc_hex_digit('\0'), -1);
    assert_int_equal(cdc_hex_digit((char)0xe9), -1);
    for (int c = -128; c < 128; c++)
        n += cdc_hex_digit((char)c) >= 0;
    assert_int_equal(n, 22);
}

static void test_bytes(void **state)
{
    (void)state;
    assert_int_equal(cdc_hex_byte("00"), 0x00);
    assert_int_equal(cdc_hex_byte("7f"), 0x7f);
    assert_int_equal(cdc_hex_byte("Ff"), 0xff);
    assert_int_equal(cdc_hex_byte("a5xyz"), 0xa5);
    assert_int_equal(cdc_hex_byte("g0"), -1);
    assert_int_equal(cdc_hex_byte("0g"), -1);
    assert_int_equal(cdc_hex_byte("-1"), -1);
    /* a lone digit is rejected (its terminating NUL is not a digit) */
    assert_int_equal(cdc_hex_byte("a"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digits),
        cmocka_unit_test(test_non_digits),
        cmocka_unit_test(test_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
