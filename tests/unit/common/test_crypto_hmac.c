/* Unit tests for common/crypto.c: SHA-256 (FIPS 180-2 examples) and HMAC-SHA-256 (the
 * test cases of RFC 4231, including a key longer than the block and empty inputs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/crypto.h"
#include "common/hex.h"

static void hex_of(const uint8_t d[CDC_SHA256_LEN], char out[2 * CDC_SHA256_LEN + 1])
{
    cdc_hex_encode(d, CDC_SHA256_LEN, out);
}

static void test_sha256(void **state)
{
    uint8_t d[CDC_SHA256_LEN];
    char h[2 * CDC_SHA256_LEN + 1];
    (void)state;
    cdc_sha256("abc", 3, d);
    hex_of(d, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    cdc_sha256("", 0, d);
    hex_of(d, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* HMAC of data under key, through a keyed object made for this one message. */
static void hmac(const void *key, size_t key_len, const void *data, size_t n,
                 uint8_t d[CDC_SHA256_LEN])
{
    cdc_hmac_t *h;
    cdc_error_t e;
    assert_int_equal(cdc_hmac_new(key, key_len, &h, &e), CDC_OK);
    assert_true(cdc_hmac_sha256(h, data, n, d));
    cdc_hmac_free(h);
}

static void test_hmac_rfc4231(void **state)
{
    uint8_t key[131], data[50], d[CDC_SHA256_LEN];
    char h[2 * CDC_SHA256_LEN + 1];
    (void)state;
    /* test case 1 */
    memset(key, 0x0b, 20);
    hmac(key, 20, "Hi There", 8, d);
    hex_of(d, h);
    assert_string_equal(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    /* test case 2: a key shorter than the digest */
    hmac("Jefe", 4, "what do ya want for nothing?", 28, d);
    hex_of(d, h);
    assert_string_equal(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* test case 3 */
    memset(key, 0xaa, 20);
    memset(data, 0xdd, 50);
    hmac(key, 20, data, 50, d);
    hex_of(d, h);
    assert_string_equal(h, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    /* test case 6: a key longer than the block is hashed first */
    memset(key, 0xaa, 131);
    hmac(key, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54, d);
    hex_of(d, h);
    assert_string_equal(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static void test_hmac_empty(void **state)
{
    uint8_t d[CDC_SHA256_LEN], again[CDC_SHA256_LEN];
    char h[2 * CDC_SHA256_LEN + 1];
    (void)state;
    /* HMAC(key="", "") is a known constant; an empty message under a key is not that */
    hmac("", 0, "", 0, d);
    hex_of(d, h);
    assert_string_equal(h, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
    hmac("k", 1, NULL, 0, again);
    assert_memory_not_equal(d, again, CDC_SHA256_LEN);
}

/* One keyed object, many messages: each digest is the one-message digest (the state of
 * the previous message never leaks into the next). */
static void test_hmac_reuse(void **state)
{
    cdc_hmac_t *h;
    cdc_error_t e;
    uint8_t d[CDC_SHA256_LEN], one[CDC_SHA256_LEN];
    char text[32], hex[2 * CDC_SHA256_LEN + 1];
    (void)state;
    assert_int_equal(cdc_hmac_new("Jefe", 4, &h, &e), CDC_OK);
    for (int i = 0; i < 100; i++) {
        int n = snprintf(text, sizeof(text), "message %d", i % 7);
        assert_true(cdc_hmac_sha256(h, text, (size_t)n, d));
        hmac("Jefe", 4, text, (size_t)n, one);
        assert_memory_equal(d, one, CDC_SHA256_LEN);
    }
    assert_true(cdc_hmac_sha256(h, "what do ya want for nothing?", 28, d));
    hex_of(d, hex);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    cdc_hmac_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_hmac_empty),
        cmocka_unit_test(test_hmac_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
