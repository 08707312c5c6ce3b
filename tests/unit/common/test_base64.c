/* Unit tests for common/base64.c: RFC 4648 vectors, binary data, strict decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/base64.h"

static void check(const char *plain, size_t len, const char *encoded)
{
    char *enc = cdc_base64_encode(plain, len);
    size_t n = 99;
    char *dec = cdc_base64_decode(encoded, strlen(encoded), &n);

    assert_string_equal(enc, encoded);
    assert_non_null(dec);
    assert_int_equal(n, len);
    assert_memory_equal(dec, plain, len);
    assert_int_equal(dec[n], '\0');
    free(enc);
    free(dec);
}

static void test_vectors(void **state)
{
    (void)state;
    check("", 0, "");
    check("f", 1, "Zg==");
    check("fo", 2, "Zm8=");
    check("foo", 3, "Zm9v");
    check("foob", 4, "Zm9vYg==");
    check("fooba", 5, "Zm9vYmE=");
    check("foobar", 6, "Zm9vYmFy");
    check("/cdc/job/leader", 15, "L2NkYy9qb2IvbGVhZGVy");
    check("\x00\xff\xfe", 3, "AP/+");
}

static void test_url_safe_and_length_bound(void **state)
{
    size_t n;
    char *dec;
    (void)state;
    dec = cdc_base64_decode("AP_-", 4, &n);
    assert_non_null(dec);
    assert_int_equal(n, 3);
    assert_memory_equal(dec, "\x00\xff\xfe", 3);
    free(dec);
    /* only the first n characters count: "Zm9vYmFy" cut after 4 is "foo" */
    dec = cdc_base64_decode("Zm9vYmFy", 4, &n);
    assert_non_null(dec);
    assert_int_equal(n, 3);
    assert_memory_equal(dec, "foo", 3);
    free(dec);
}

static void test_invalid(void **state)
{
    size_t n;
    (void)state;
    assert_null(cdc_base64_decode("Zm9v!", 5, &n));
    assert_null(cdc_base64_decode("Zg=a", 4, &n)); /* data after padding */
    assert_null(cdc_base64_decode("Zh==", 4, &n)); /* non-zero padding bits */
    assert_null(cdc_base64_decode("Z===", 4, &n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_url_safe_and_length_bound),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
