/* Unit tests for common/evchunk.h: the chunk header's format, and reassembly in order,
 * out of sequence, after a restarted sequence, across a cut, and above the cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/evchunk.h"

static void test_header_round_trip(void **state)
{
    char buf[CDC_EVCHUNK_HEADER_MAX];
    cdc_evchunk_t c = {0xfedcba9876543210ULL, 6, 7, 268435456ULL, 123456789ULL}, d;
    (void)state;
    size_t n = cdc_evchunk_format(&c, buf, sizeof(buf));
    assert_string_equal(buf, "fedcba9876543210/6/7/268435456/123456789");
    assert_int_equal(n, strlen(buf));
    assert_true(cdc_evchunk_parse(buf, n, &d));
    assert_memory_equal(&c, &d, sizeof(c));
}

static void test_header_rejects(void **state)
{
    cdc_evchunk_t d;
    static const char *const bad[] = {
        "",           "1/0/0/10/5",  "1/2/2/10/5", "1/0/1/10",    "1/0/1/10/5/6",
        "x/0/1/10/5", "1/-1/2/10/5", "1//2/10/5",  "1/0/2/10/5 ", "1/0/4294967296/10/5",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(cdc_evchunk_parse(bad[i], strlen(bad[i]), &d));
    assert_false(cdc_evchunk_parse(NULL, 0, &d));
    assert_true(cdc_evchunk_parse("AB/0/1/0/0", 10, &d));
    assert_int_equal(d.id, 0xab);
}

static void test_count(void **state)
{
    (void)state;
    assert_int_equal(cdc_evchunk_count(0, 100), 1);
    assert_int_equal(cdc_evchunk_count(100, 100), 1);
    assert_int_equal(cdc_evchunk_count(101, 100), 2);
    assert_int_equal(cdc_evchunk_count(256ULL << 20, 900 << 10), 292);
}

/* Splits value into chunks of `chunk` bytes as the capture does and adds chunks
 * [from, to) to a at offsets base + i; returns the result of the last one. */
static cdc_evasm_result_t feed(cdc_evasm_t *a, uint64_t id, const uint8_t *value, size_t total,
                               size_t chunk, uint32_t from, uint32_t to, int64_t base, size_t cap,
                               bool *torn_any)
{
    uint32_t count = cdc_evchunk_count(total, chunk);
    cdc_evasm_result_t res = CDC_EVASM_REJECTED;
    for (uint32_t i = from; i < to && i < count; i++) {
        cdc_evchunk_t h = {id, i, count, total, 42};
        size_t off = (size_t)i * chunk, len = total - off < chunk ? total - off : chunk;
        bool last, torn;
        assert_int_equal(cdc_evasm_add(a, &h, base + i, value + off, len, cap, &res, &last, &torn),
                         CDC_OK);
        if (torn_any != NULL)
            *torn_any |= torn;
    }
    return res;
}

static uint8_t *pattern(size_t n, uint8_t seed)
{
    uint8_t *v = malloc(n);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 31 + seed);
    return v;
}

static void test_in_order(void **state)
{
    cdc_evasm_t a;
    size_t len;
    int64_t first, last;
    uint8_t *v = pattern(1000, 1), *out;
    (void)state;
    cdc_evasm_init(&a);
    assert_int_equal(cdc_evasm_resume_offset(&a), -1);
    assert_int_equal(feed(&a, 7, v, 1000, 300, 0, 3, 10, 0, NULL), CDC_EVASM_MORE);
    /* a cut now must resume at chunk 0 */
    assert_int_equal(cdc_evasm_resume_offset(&a), 10);
    assert_int_equal(feed(&a, 7, v, 1000, 300, 3, 4, 10, 0, NULL), CDC_EVASM_COMPLETE);
    out = cdc_evasm_take(&a, &len, &first, &last);
    assert_int_equal(len, 1000);
    assert_int_equal(first, 10);
    assert_int_equal(last, 13);
    assert_memory_equal(out, v, 1000);
    assert_int_equal(cdc_evasm_resume_offset(&a), -1);
    assert_int_equal(a.torn, 0);
    assert_int_equal(a.rejected, 0);
    free(out);
    free(v);
    cdc_evasm_free(&a);
}

static void test_out_of_sequence(void **state)
{
    cdc_evasm_t a;
    uint8_t *v = pattern(1000, 2);
    bool torn = false;
    (void)state;
    cdc_evasm_init(&a);
    /* a chunk without its start (read from the middle of a sequence) */
    assert_int_equal(feed(&a, 7, v, 1000, 300, 2, 3, 0, 0, &torn), CDC_EVASM_REJECTED);
    assert_false(torn);
    assert_int_equal(a.rejected, 1);
    /* a gap: chunk 2 after chunk 0 discards the sequence, never completes it */
    assert_int_equal(feed(&a, 7, v, 1000, 300, 0, 1, 0, 0, NULL), CDC_EVASM_MORE);
    assert_int_equal(feed(&a, 7, v, 1000, 300, 2, 4, 0, 0, &torn), CDC_EVASM_REJECTED);
    assert_true(torn);
    assert_int_equal(a.torn, 1);
    assert_int_equal(a.rejected, 3);
    assert_int_equal(cdc_evasm_resume_offset(&a), -1);
    /* a chunk of another sequence in the middle */
    torn = false;
    assert_int_equal(feed(&a, 7, v, 1000, 300, 0, 2, 0, 0, NULL), CDC_EVASM_MORE);
    assert_int_equal(feed(&a, 8, v, 1000, 300, 2, 3, 0, 0, &torn), CDC_EVASM_REJECTED);
    assert_true(torn);
    /* a record that is no chunk in the middle */
    assert_int_equal(feed(&a, 9, v, 1000, 300, 0, 1, 0, 0, NULL), CDC_EVASM_MORE);
    assert_true(cdc_evasm_interrupt(&a));
    assert_false(cdc_evasm_interrupt(&a));
    assert_int_equal(a.torn, 3);
    /* a last chunk whose bytes do not add up to the size */
    {
        cdc_evchunk_t h0 = {5, 0, 2, 10, 1}, h1 = {5, 1, 2, 10, 1};
        cdc_evasm_result_t res;
        bool last;
        assert_int_equal(cdc_evasm_add(&a, &h0, 0, v, 6, 0, &res, &last, &torn), CDC_OK);
        assert_int_equal(res, CDC_EVASM_MORE);
        assert_int_equal(cdc_evasm_add(&a, &h1, 1, v, 3, 0, &res, &last, &torn), CDC_OK);
        assert_int_equal(res, CDC_EVASM_REJECTED);
        assert_true(torn);
    }
    free(v);
    cdc_evasm_free(&a);
}

/* A capture killed mid-produce sends the event again as a new sequence from chunk 0: the
 * unfinished one is discarded and the new one completes, intact. */
static void test_restarted_sequence(void **state)
{
    cdc_evasm_t a;
    size_t len;
    int64_t first, last;
    uint8_t *v = pattern(5000, 3), *out;
    bool torn = false;
    (void)state;
    cdc_evasm_init(&a);
    assert_int_equal(feed(&a, 100, v, 5000, 1000, 0, 3, 0, 0, &torn), CDC_EVASM_MORE);
    assert_int_equal(cdc_evasm_resume_offset(&a), 0);
    assert_int_equal(feed(&a, 101, v, 5000, 1000, 0, 5, 3, 0, &torn), CDC_EVASM_COMPLETE);
    assert_true(torn);
    assert_int_equal(a.torn, 1);
    out = cdc_evasm_take(&a, &len, &first, &last);
    assert_int_equal(first, 3);
    assert_int_equal(last, 7);
    assert_int_equal(len, 5000);
    assert_memory_equal(out, v, 5000);
    free(out);
    free(v);
    cdc_evasm_free(&a);
}

/* A cut mid-sequence resumes at chunk 0: reading again from there (after a reset, as a
 * reassignment does) gives the whole event once. */
static void test_cut_mid_sequence(void **state)
{
    cdc_evasm_t a;
    size_t len;
    int64_t first, last, resume;
    uint8_t *v = pattern(4000, 4), *out;
    (void)state;
    cdc_evasm_init(&a);
    assert_int_equal(feed(&a, 1, v, 4000, 1000, 0, 2, 50, 0, NULL), CDC_EVASM_MORE);
    resume = cdc_evasm_resume_offset(&a);
    assert_int_equal(resume, 50);
    cdc_evasm_reset(&a); /* the slot is reassigned from the cut */
    assert_int_equal(a.torn, 0);
    assert_int_equal(feed(&a, 1, v, 4000, 1000, (uint32_t)(resume - 50), 4, 50, 0, NULL),
                     CDC_EVASM_COMPLETE);
    out = cdc_evasm_take(&a, &len, &first, &last);
    assert_int_equal(len, 4000);
    assert_int_equal(first, 50);
    assert_memory_equal(out, v, 4000);
    free(out);
    free(v);
    cdc_evasm_free(&a);
}

/* Above the cap nothing is buffered: every chunk is handed back, the last one marked. */
static void test_hard_cap(void **state)
{
    cdc_evasm_t a;
    uint8_t *v = pattern(3000, 5);
    (void)state;
    cdc_evasm_init(&a);
    for (uint32_t i = 0; i < 3; i++) {
        cdc_evchunk_t h = {9, i, 3, 3000, 77};
        cdc_evasm_result_t res;
        bool last, torn;
        assert_int_equal(cdc_evasm_add(&a, &h, i, v + i * 1000, 1000, 2999, &res, &last, &torn),
                         CDC_OK);
        assert_int_equal(res, CDC_EVASM_OVERSIZED);
        assert_int_equal(last, i == 2);
        assert_null(a.data);
        assert_int_equal(cdc_evasm_resume_offset(&a), i == 2 ? -1 : 0);
    }
    /* at the cap exactly it is buffered */
    assert_int_equal(feed(&a, 10, v, 3000, 1000, 0, 3, 0, 3000, NULL), CDC_EVASM_COMPLETE);
    free(v);
    cdc_evasm_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_round_trip),
        cmocka_unit_test(test_header_rejects),
        cmocka_unit_test(test_count),
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_out_of_sequence),
        cmocka_unit_test(test_restarted_sequence),
        cmocka_unit_test(test_cut_mid_sequence),
        cmocka_unit_test(test_hard_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
