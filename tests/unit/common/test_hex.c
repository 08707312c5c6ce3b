/* Unit tests for common/hex.h: every digit of either case, bytes, what is rejected, and
 * the encoder (round trip through the parser). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

static void test_encode(void **state)
{
    uint8_t all[256];
    char text[2 * 256 + 1];
    (void)state;
    cdc_hex_encode("\x00\x7f\xff", 3, text);
    assert_string_equal(text, "007fff");
    cdc_hex_encode("", 0, text);
    assert_string_equal(text, "");
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    cdc_hex_encode(all, sizeof(all), text);
    assert_int_equal(strlen(text), 512);
    for (int i = 0; i < 256; i++)
        assert_int_equal(cdc_hex_byte(text + 2 * i), i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digits),
        cmocka_unit_test(test_non_digits),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_encode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
