/*
 * Unit tests for the incremental snapshot's chunk buffer and watermarks (capture/chunk.c):
 * keys removed by changes inside a chunk's window, the rows left to emit, a truncate,
 * growth past the first index size, reuse after a reset; watermark contents formatted and
 * parsed, and contents that are no watermark; the read's snapshot (pg_current_snapshot())
 * parsed, and which transactions it sees, across an epoch boundary too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capture/chunk.h"

static void add(cdc_chunk_t *c, const char *key)
{
    assert_int_equal(cdc_chunk_add(c, key, strlen(key)), CDC_OK);
}

static bool rm(cdc_chunk_t *c, const char *key)
{
    return cdc_chunk_remove(c, key, strlen(key));
}

static void test_remove_and_emit(void **state)
{
    cdc_chunk_t c = {0};
    (void)state;

    assert_false(rm(&c, "{\"id\":1}")); /* empty: nothing to remove */
    add(&c, "{\"id\":1}");
    add(&c, "{\"id\":2}");
    add(&c, "{\"id\":3}");
    assert_int_equal(c.nrows, 3);
    assert_int_equal(c.nlive, 3);
    assert_true(rm(&c, "{\"id\":2}"));
    assert_false(rm(&c, "{\"id\":2}")); /* changed twice in the window: removed once */
    assert_false(rm(&c, "{\"id\":4}")); /* a key the chunk does not hold */
    assert_false(rm(&c, "{\"id\":1"));  /* a prefix is another key */
    assert_int_equal(c.nlive, 2);
    assert_true(cdc_chunk_live(&c, 0));
    assert_false(cdc_chunk_live(&c, 1));
    assert_true(cdc_chunk_live(&c, 2));
    assert_false(cdc_chunk_live(&c, 3)); /* past the end */

    cdc_chunk_remove_all(&c);
    assert_int_equal(c.nlive, 0);
    for (size_t i = 0; i < c.nrows; i++)
        assert_false(cdc_chunk_live(&c, i));

    /* the next chunk starts empty, and a key of the last one is not in it */
    cdc_chunk_reset(&c);
    assert_int_equal(c.nrows, 0);
    assert_false(rm(&c, "{\"id\":1}"));
    add(&c, "{\"id\":9}");
    assert_false(rm(&c, "{\"id\":1}"));
    assert_true(rm(&c, "{\"id\":9}"));
    cdc_chunk_free(&c);
}

static void test_many_keys(void **state)
{
    cdc_chunk_t c = {0};
    char k[32];
    (void)state;

    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof(k), "{\"id\":%d}", i);
        add(&c, k);
    }
    assert_int_equal(c.nlive, 5000);
    for (int i = 0; i < 5000; i += 3) {
        snprintf(k, sizeof(k), "{\"id\":%d}", i);
        assert_true(rm(&c, k));
    }
    for (int i = 0; i < 5000; i++)
        assert_int_equal(cdc_chunk_live(&c, (size_t)i), i % 3 != 0);
    assert_int_equal(c.nlive, 5000 - 1667);
    cdc_chunk_free(&c);
}

static void test_watermarks(void **state)
{
    char buf[128], id[CDC_WATERMARK_ID_MAX];
    cdc_watermark_kind_t kind;
    char longid[200];
    (void)state;

    assert_true(cdc_watermark_format(buf, sizeof(buf), "s1-0000000a", CDC_WATERMARK_LOW));
    assert_string_equal(buf, "s1-0000000a:low");
    assert_true(cdc_watermark_parse(buf, strlen(buf), id, sizeof(id), &kind));
    assert_string_equal(id, "s1-0000000a");
    assert_int_equal(kind, CDC_WATERMARK_LOW);
    assert_true(cdc_watermark_format(buf, sizeof(buf), "s1-0000000a", CDC_WATERMARK_HIGH));
    assert_string_equal(buf, "s1-0000000a:high");
    /* parsed from the message as pgoutput delivers it: not NUL-terminated */
    memcpy(buf, "abc:highXYZ", 11);
    assert_true(cdc_watermark_parse(buf, 8, id, sizeof(id), &kind));
    assert_string_equal(id, "abc");
    assert_int_equal(kind, CDC_WATERMARK_HIGH);

    /* no watermark */
    assert_false(cdc_watermark_parse("abc", 3, id, sizeof(id), &kind));
    assert_false(cdc_watermark_parse(":low", 4, id, sizeof(id), &kind));
    assert_false(cdc_watermark_parse("abc:", 4, id, sizeof(id), &kind));
    assert_false(cdc_watermark_parse("abc:mid", 7, id, sizeof(id), &kind));
    assert_false(cdc_watermark_parse("abc:lowx", 8, id, sizeof(id), &kind));
    assert_false(cdc_watermark_parse("abc:lo", 6, id, sizeof(id), &kind));
    assert_false(cdc_watermark_parse("a\0c:low", 7, id, sizeof(id), &kind));
    assert_false(cdc_watermark_parse(NULL, 0, id, sizeof(id), &kind));
    assert_false(cdc_watermark_parse("abcdef:low", 10, id, 4, &kind)); /* id does not fit */
    memset(longid, 'x', sizeof(longid));
    memcpy(longid + 150, ":low", 4);
    assert_false(cdc_watermark_parse(longid, 154, id, sizeof(id), &kind));

    /* ids that cannot be written */
    assert_false(cdc_watermark_format(buf, sizeof(buf), "", CDC_WATERMARK_LOW));
    assert_false(cdc_watermark_format(buf, sizeof(buf), "a:b", CDC_WATERMARK_LOW));
    assert_false(cdc_watermark_format(buf, 6, "abcdef", CDC_WATERMARK_LOW));
}

static void test_read_snapshot(void **state)
{
    cdc_chunk_snapshot_t s = {0};
    (void)state;

    assert_true(cdc_chunk_snapshot_parse(&s, "1000:1010:1003,1007"));
    assert_int_equal(s.nxip, 2);
    assert_true(cdc_chunk_snapshot_sees(&s, 999));   /* finished before xmin */
    assert_true(cdc_chunk_snapshot_sees(&s, 1002));  /* committed before it was taken */
    assert_false(cdc_chunk_snapshot_sees(&s, 1003)); /* in progress then (commit not visible) */
    assert_false(cdc_chunk_snapshot_sees(&s, 1007));
    assert_false(cdc_chunk_snapshot_sees(&s, 1010)); /* started after */
    assert_false(cdc_chunk_snapshot_sees(&s, 5000));

    assert_true(cdc_chunk_snapshot_parse(&s, "1000:1000:"));
    assert_int_equal(s.nxip, 0);
    assert_true(cdc_chunk_snapshot_sees(&s, 999));
    assert_false(cdc_chunk_snapshot_sees(&s, 1000));

    /* 64-bit ids across an epoch: 32-bit ids from pgoutput map below xmax */
    uint64_t epoch = (uint64_t)1 << 32;
    char text[96];
    snprintf(text, sizeof(text), "%llu:%llu:%llu", (unsigned long long)(epoch - 5),
             (unsigned long long)(epoch + 5), (unsigned long long)(epoch + 2));
    assert_true(cdc_chunk_snapshot_parse(&s, text));
    assert_true(cdc_chunk_snapshot_sees(&s, 0xfffffff0u)); /* epoch 0, before xmin */
    assert_true(cdc_chunk_snapshot_sees(&s, 0xfffffffeu)); /* epoch 0, committed */
    assert_true(cdc_chunk_snapshot_sees(&s, 1));           /* epoch 1, committed */
    assert_false(cdc_chunk_snapshot_sees(&s, 2));          /* epoch 1, in progress */
    assert_false(cdc_chunk_snapshot_sees(&s, 5));          /* epoch 1, xmax */
    cdc_chunk_snapshot_free(&s);

    assert_false(cdc_chunk_snapshot_parse(&s, "abc"));
    assert_false(cdc_chunk_snapshot_parse(&s, "10:5:"));
    assert_false(cdc_chunk_snapshot_parse(&s, "1:5:2,x"));
    assert_false(cdc_chunk_snapshot_parse(&s, NULL));
    cdc_chunk_snapshot_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_and_emit),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_watermarks),
        cmocka_unit_test(test_read_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
