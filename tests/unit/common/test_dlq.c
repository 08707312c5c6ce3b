/*
 * Unit tests for common/dlq.h, the dead-letter record format: the headers the worker
 * writes and cdcctl reads back (the same record both ways), record ids in both forms,
 * replay marks, and the selection of records by table, class, partition, offset range
 * and a file of ids, with the errors an operator sees for a bad value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/dlq.h"

static void test_headers(void **state)
{
    (void)state;
    cdc_dlq_headers_t h;
    char topic[64];
    cdc_dlq_topic("cdc.public.orders", topic, sizeof(topic));
    assert_string_equal(topic, "cdc.public.orders.dlq");
    cdc_dlq_replays_topic("cdc", topic, sizeof(topic));
    assert_string_equal(topic, "cdc._dlq_replays");
    cdc_dlq_headers(&h, CDC_DLQ_TYPE_MISMATCH, "column \"id\" expects long", "cdc.public.orders", 7,
                    12345, 1709287200123LL, 2);
    assert_string_equal(h.name[0], "cdc.error.class");
    assert_string_equal(h.value[0], "type_mismatch");
    assert_string_equal(h.value[1], "column \"id\" expects long");
    assert_string_equal(h.value[2], "cdc.public.orders");
    assert_string_equal(h.value[3], "7");
    assert_string_equal(h.value[4], "12345");
    assert_string_equal(h.name[5], "cdc.error.time");
    assert_string_equal(h.value[5], "2024-03-01T10:00:00.123Z");
    assert_string_equal(h.name[6], "cdc.replay.count");
    assert_string_equal(h.value[6], "2");
    for (int c = 0; c < CDC_DLQ__COUNT; c++) {
        assert_string_not_equal(cdc_dlq_class_name((cdc_dlq_class_t)c), "unknown");
        assert_int_equal(cdc_dlq_class_parse(cdc_dlq_class_name((cdc_dlq_class_t)c)), c);
    }
    assert_int_equal(cdc_dlq_class_parse("nope"), -1);
}

/* What the worker writes reads back as the same record. */
static void test_record_roundtrip(void **state)
{
    (void)state;
    cdc_dlq_headers_t h;
    cdc_kafka_header_t kh[CDC_DLQ_NHEADERS + 1];
    cdc_dlq_record_t r;

    cdc_dlq_headers(&h, CDC_DLQ_UNKNOWN_OP, "unknown op \"x\"", "cdc.public.orders", 3, 99,
                    1709287200123LL, 0);
    for (int i = 0; i < CDC_DLQ_NHEADERS; i++)
        kh[i] = (cdc_kafka_header_t){h.name[i], h.value[i], strlen(h.value[i])};
    assert_true(
        cdc_dlq_record_parse(&r, "cdc.public.orders.dlq", 5, 17, kh, CDC_DLQ_NHEADERS, "cdc"));
    assert_string_equal(r.id, "cdc.public.orders.dlq:5:17");
    assert_string_equal(r.table, "public.orders");
    assert_string_equal(r.cls, "unknown_op");
    assert_string_equal(r.message, "unknown op \"x\"");
    assert_string_equal(r.origin_topic, "cdc.public.orders");
    assert_int_equal(r.origin_partition, 3);
    assert_int_equal(r.origin_offset, 99);
    assert_string_equal(r.time, "2024-03-01T10:00:00.123Z");
    assert_int_equal(r.replay_count, 0);
    /* a later header of the same name wins; another prefix keeps the topic whole */
    kh[CDC_DLQ_NHEADERS] = (cdc_kafka_header_t){"cdc.replay.count", "4", 1};
    assert_true(cdc_dlq_record_parse(&r, "cdc.public.orders.dlq", 5, 17, kh, CDC_DLQ_NHEADERS + 1,
                                     "other"));
    assert_int_equal(r.replay_count, 4);
    assert_string_equal(r.table, "cdc.public.orders");
    /* not a dead letter: no class; the table then comes from the DLQ topic */
    assert_false(cdc_dlq_record_parse(&r, "cdc.public.items.dlq", 0, 0, NULL, 0, "cdc"));
    assert_string_equal(r.table, "public.items");
    assert_int_equal(r.origin_partition, -1);
    assert_int_equal(r.origin_offset, -1);
}

static void test_replay_count(void **state)
{
    (void)state;
    cdc_kafka_header_t h = {"cdc.replay.count", "12", 2};
    assert_int_equal(cdc_dlq_replay_count(&h), 12);
    h.value = "x1";
    assert_int_equal(cdc_dlq_replay_count(&h), 0);
    h.value = "-3";
    assert_int_equal(cdc_dlq_replay_count(&h), 0);
    h.value = NULL;
    assert_int_equal(cdc_dlq_replay_count(&h), 0);
    assert_int_equal(cdc_dlq_replay_count(NULL), 0);
}

static void test_ids(void **state)
{
    (void)state;
    char topic[64], buf[CDC_DLQ_ID_MAX];
    int32_t p = -1;
    int64_t o = -1;

    cdc_dlq_id_format(buf, sizeof(buf), "cdc.public.orders.dlq", 11, 123456789012LL);
    assert_string_equal(buf, "cdc.public.orders.dlq:11:123456789012");
    assert_true(cdc_dlq_id_parse(buf, NULL, topic, sizeof(topic), &p, &o));
    assert_string_equal(topic, "cdc.public.orders.dlq");
    assert_int_equal(p, 11);
    assert_int_equal(o, 123456789012LL);
    assert_true(cdc_dlq_id_parse("3:7", "t.dlq", topic, sizeof(topic), &p, &o));
    assert_string_equal(topic, "t.dlq");
    assert_int_equal(p, 3);
    assert_int_equal(o, 7);
    assert_false(cdc_dlq_id_parse("3:7", NULL, topic, sizeof(topic), &p, &o));
    assert_false(cdc_dlq_id_parse("37", "t.dlq", topic, sizeof(topic), &p, &o));
    assert_false(cdc_dlq_id_parse("t.dlq:x:7", NULL, topic, sizeof(topic), &p, &o));
    assert_false(cdc_dlq_id_parse("t.dlq:1:7x", NULL, topic, sizeof(topic), &p, &o));
    assert_false(cdc_dlq_id_parse("t.dlq:-1:7", NULL, topic, sizeof(topic), &p, &o));
    assert_false(cdc_dlq_id_parse(":1:7", NULL, topic, sizeof(topic), &p, &o));
    assert_false(cdc_dlq_id_parse("t.dlq:1:", NULL, topic, sizeof(topic), &p, &o));
    assert_false(cdc_dlq_id_parse("t.dlq:99999999999:1", NULL, topic, sizeof(topic), &p, &o));
}

static void test_marks(void **state)
{
    (void)state;
    cdc_dlq_mark_t m = {.partition = 4, .offset = 1234, .replay_count = 2}, back;
    char *s;
    strcpy(m.id, "cdc.public.orders.dlq:4:9");
    strcpy(m.time, "2024-03-01T10:00:00.123Z");
    strcpy(m.topic, "cdc.public.orders");
    strcpy(m.transform, "patch \"fix.json\"");
    s = cdc_dlq_mark_encode(&m);
    assert_non_null(s);
    assert_true(cdc_dlq_mark_parse(s, strlen(s), &back));
    assert_string_equal(back.id, m.id);
    assert_string_equal(back.time, m.time);
    assert_string_equal(back.topic, m.topic);
    assert_string_equal(back.transform, m.transform);
    assert_int_equal(back.partition, 4);
    assert_int_equal(back.offset, 1234);
    assert_int_equal(back.replay_count, 2);
    free(s);
    assert_false(cdc_dlq_mark_parse("{\"time\":\"x\"}", 12, &back));
    assert_false(cdc_dlq_mark_parse("not json", 8, &back));
}

static cdc_dlq_record_t rec(const char *table, int32_t p, int64_t o, const char *cls)
{
    cdc_dlq_record_t r;
    memset(&r, 0, sizeof(r));
    snprintf(r.table, sizeof(r.table), "%s", table);
    snprintf(r.origin_topic, sizeof(r.origin_topic), "cdc.%s", table);
    snprintf(r.dlq_topic, sizeof(r.dlq_topic), "cdc.%s.dlq", table);
    snprintf(r.cls, sizeof(r.cls), "%s", cls);
    r.partition = p;
    r.offset = o;
    cdc_dlq_id_format(r.id, sizeof(r.id), r.dlq_topic, p, o);
    return r;
}

static void test_select(void **state)
{
    (void)state;
    cdc_dlq_select_t sel;
    cdc_error_t e;
    cdc_dlq_record_t a = rec("public.orders", 2, 10, "type_mismatch");
    cdc_dlq_record_t b = rec("public.items", 2, 11, "oversized");

    /* nothing given: everything */
    assert_int_equal(cdc_dlq_select_init(&sel, NULL, "", -1, -1, -1, false, &e), CDC_OK);
    assert_true(cdc_dlq_select_match(&sel, &a, false));
    assert_true(cdc_dlq_select_match(&sel, &a, true));
    cdc_dlq_select_free(&sel);

    assert_int_equal(cdc_dlq_select_init(&sel, "public.orders,,cdc.public.x",
                                         "oversized,"
                                         "type_mismatch",
                                         2, 10, 10, true, &e),
                     CDC_OK);
    assert_int_equal(sel.ntables, 2);
    assert_true(cdc_dlq_select_match(&sel, &a, false));
    assert_false(cdc_dlq_select_match(&sel, &a, true));  /* skip replayed */
    assert_false(cdc_dlq_select_match(&sel, &b, false)); /* table */
    cdc_dlq_record_t x = rec("public.x", 2, 10, "oversized");
    assert_true(cdc_dlq_select_match(&sel, &x, false)); /* by origin topic */
    cdc_dlq_record_t c = a;
    strcpy(c.cls, "unknown_op");
    assert_false(cdc_dlq_select_match(&sel, &c, false));
    c = a;
    c.offset = 11;
    assert_false(cdc_dlq_select_match(&sel, &c, false));
    c.offset = 9;
    assert_false(cdc_dlq_select_match(&sel, &c, false));
    c = a;
    c.partition = 3;
    assert_false(cdc_dlq_select_match(&sel, &c, false));
    cdc_dlq_select_free(&sel);

    /* an open range */
    assert_int_equal(cdc_dlq_select_init(&sel, NULL, NULL, -1, 11, -1, false, &e), CDC_OK);
    assert_false(cdc_dlq_select_match(&sel, &a, false));
    assert_true(cdc_dlq_select_match(&sel, &b, false));
    cdc_dlq_select_free(&sel);

    assert_int_equal(cdc_dlq_select_init(&sel, NULL, "type_mismatch,bogus", -1, -1, -1, false, &e),
                     CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "\"bogus\""));
    assert_int_equal(cdc_dlq_select_init(&sel, NULL, NULL, -1, 5, 4, false, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--to-offset"));
}

static void test_select_ids(void **state)
{
    (void)state;
    cdc_dlq_select_t sel;
    cdc_error_t e;
    cdc_dlq_record_t a = rec("public.orders", 2, 10, "type_mismatch");
    cdc_dlq_record_t b = rec("public.orders", 2, 11, "type_mismatch");
    cdc_dlq_record_t c = rec("public.items", 0, 3, "oversized");

    /* the short form takes the one table's topic; full ids name any */
    assert_int_equal(cdc_dlq_select_init(&sel, "public.orders", NULL, -1, -1, -1, false, &e),
                     CDC_OK);
    assert_int_equal(cdc_dlq_select_ids(&sel,
                                        "# replay these\n"
                                        "  2:10  \r\n"
                                        "\n"
                                        "cdc.public.items.dlq:0:3",
                                        "cdc", &e),
                     CDC_OK);
    assert_int_equal(sel.nids, 2);
    assert_true(cdc_dlq_select_match(&sel, &a, false));
    assert_false(cdc_dlq_select_match(&sel, &b, false));
    assert_false(cdc_dlq_select_match(&sel, &c, false)); /* listed, but not of the table */
    cdc_dlq_select_free(&sel);

    assert_int_equal(cdc_dlq_select_init(&sel, NULL, NULL, -1, -1, -1, false, &e), CDC_OK);
    assert_int_equal(cdc_dlq_select_ids(&sel, "cdc.public.items.dlq:0:3\n", "cdc", &e), CDC_OK);
    assert_true(cdc_dlq_select_match(&sel, &c, false));
    assert_false(cdc_dlq_select_match(&sel, &a, false));
    /* the short form without one table: an error naming the line, with a hint */
    assert_int_equal(cdc_dlq_select_ids(&sel, "\n2:10\n", "cdc", &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "line 2"));
    assert_non_null(strstr(e.msg, "exactly one --table"));
    assert_int_equal(cdc_dlq_select_ids(&sel, "cdc.t.dlq:1:x\n", "cdc", &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "line 1"));
    cdc_dlq_select_free(&sel);

    /* an empty file selects nothing */
    assert_int_equal(cdc_dlq_select_init(&sel, NULL, NULL, -1, -1, -1, false, &e), CDC_OK);
    assert_int_equal(cdc_dlq_select_ids(&sel, "# none\n", "cdc", &e), CDC_OK);
    assert_false(cdc_dlq_select_match(&sel, &a, false));
    cdc_dlq_select_free(&sel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headers),      cmocka_unit_test(test_record_roundtrip),
        cmocka_unit_test(test_replay_count), cmocka_unit_test(test_ids),
        cmocka_unit_test(test_marks),        cmocka_unit_test(test_select),
        cmocka_unit_test(test_select_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
