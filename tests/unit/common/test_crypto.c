/*
 * Unit tests for common/crypto.c: HMAC-SHA256 against RFC 4231's test vectors, random
 * bytes, and the constant-time comparisons (equal and unequal inputs, different lengths).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/crypto.h"
#include "common/hex.h"

/* Asserts that the digest equals the 64 hex digits of want. */
static void assert_digest(const uint8_t *got, const char *want)
{
    for (size_t i = 0; i < CDC_CRYPTO_SHA256_LEN; i++)
        assert_int_equal(got[i], cdc_hex_byte(want + 2 * i));
}

static void test_hmac_rfc4231(void **state)
{
    uint8_t key1[20], out[CDC_CRYPTO_SHA256_LEN];
    cdc_error_t e;
    (void)state;

    /* test case 1 */
    memset(key1, 0x0b, sizeof(key1));
    assert_int_equal(cdc_crypto_hmac_sha256(key1, sizeof(key1), "Hi There", 8, out, &e), CDC_OK);
    assert_digest(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    /* test case 2: a key shorter than the block */
    assert_int_equal(cdc_crypto_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, out, &e),
                     CDC_OK);
    assert_digest(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void test_random(void **state)
{
    uint8_t a[32], b[32], zero[32] = {0};
    cdc_error_t e;
    (void)state;

    assert_int_equal(cdc_crypto_random(a, sizeof(a), &e), CDC_OK);
    assert_int_equal(cdc_crypto_random(b, sizeof(b), &e), CDC_OK);
    assert_memory_not_equal(a, b, sizeof(a));
    assert_memory_not_equal(a, zero, sizeof(a));
}

static void test_compare(void **state)
{
    (void)state;
    assert_true(cdc_crypto_equal("abcdef", "abcdef", 6));
    assert_false(cdc_crypto_equal("abcdef", "abcdeg", 6));
    assert_false(cdc_crypto_equal("xbcdef", "abcdef", 6));
    assert_true(cdc_crypto_secret_equal("token", 5, "token", 5));
    assert_false(cdc_crypto_secret_equal("token", 5, "tokens", 6));
    assert_false(cdc_crypto_secret_equal("tokem", 5, "token", 5));
    assert_false(cdc_crypto_secret_equal("", 0, "token", 5));
    assert_true(cdc_crypto_secret_equal("", 0, "", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
