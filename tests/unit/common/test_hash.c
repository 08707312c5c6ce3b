/* common/hash.h: the in-memory table hash spreads similar keys and sees every byte; the
 * string map finds every one of thousands of keys after growing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"

/* Entity-like keys ("<ns>.<table>\0" + big-endian id) that differ in a few bytes fill
 * the masked low bits evenly: no bucket of 2^16 gets more than a handful of 2^16 keys. */
static void test_spreads_similar_keys(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    uint16_t *count = calloc(N, sizeof(*count));
    uint8_t key[32] = "public.transactions";
    size_t prefix = strlen("public.transactions") + 1, max = 0;
    assert_non_null(count);
    for (uint32_t id = 0; id < N; id++) {
        for (int i = 0; i < 8; i++)
            key[prefix + i] = (uint8_t)((uint64_t)id >> (56 - 8 * i));
        uint16_t b = (uint16_t)cdc_hash_bytes(key, prefix + 8, 0);
        if (++count[b] > max)
            max = count[b];
    }
    free(count);
    /* a uniform hash gives a maximum around 8 for 2^16 keys in 2^16 buckets */
    assert_true(max <= 12);
}

/* Every byte counts, trailing zero bytes and the seed included. */
static void test_sees_every_byte(void **state)
{
    (void)state;
    const uint8_t a[] = "abcdefghijklmnopq";
    uint8_t b[sizeof(a)];
    uint64_t h = cdc_hash_bytes(a, 17, 0);
    for (size_t i = 0; i < 17; i++) {
        memcpy(b, a, sizeof(a));
        b[i] ^= 1;
        assert_true(cdc_hash_bytes(b, 17, 0) != h);
    }
    assert_true(cdc_hash_bytes("abc", 3, 0) != cdc_hash_bytes("abc\0", 4, 0));
    assert_true(cdc_hash_bytes("", 0, 0) != cdc_hash_bytes("\0", 1, 0));
    assert_true(cdc_hash_bytes(a, 17, 0) != cdc_hash_bytes(a, 17, 1));
    assert_true(cdc_hash_bytes(a, 17, 0) == h);
}

/* 5,000 table names (keys borrowed from an array that does not move): each maps to its
 * own value after the map grew many times; a second put replaces the value only. */
static void test_strmap(void **state)
{
    enum { N = 5000 };
    static char names[N][32];
    cdc_strmap_t m = {0};
    (void)state;
    assert_null(cdc_strmap_get(&m, "public.t0"));
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "public.t%d%s", i / 2, i % 2 ? "_changelog" : "");
        assert_int_equal(cdc_strmap_put(&m, names[i], &names[i]), CDC_OK);
    }
    assert_int_equal(m.n, N);
    assert_true(m.cap >= 2 * N);
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof(key), "public.t%d%s", i / 2, i % 2 ? "_changelog" : ""); /* a copy */
        assert_ptr_equal(cdc_strmap_get(&m, key), &names[i]);
    }
    assert_null(cdc_strmap_get(&m, "public.t"));
    assert_null(cdc_strmap_get(&m, "public.t2500"));
    assert_int_equal(cdc_strmap_put(&m, "public.t7", &names[0]), CDC_OK);
    assert_int_equal(m.n, N);
    assert_ptr_equal(cdc_strmap_get(&m, names[14]), &names[0]);
    cdc_strmap_free(&m);
    assert_null(cdc_strmap_get(&m, names[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spreads_similar_keys),
        cmocka_unit_test(test_sees_every_byte),
        cmocka_unit_test(test_strmap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
