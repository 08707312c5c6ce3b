/*
 * Unit tests for worker/stage.c (per-epoch collapse) and worker/dlq.c (dead-letter
 * headers): several changes to one key collapse to one final image; new keys need no
 * equality delete; a delete writes only the delete; the changelog keeps every change;
 * a truncate drops the epoch's earlier mirror entries (changelog 't' row on partition 0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/worker_fixtures.h"
#include "worker/dlq.h"
#include "worker/stage.h"

static const char *TOPIC = "cdc.public.orders";

static void change(cdc_catalog_t *cat, cdc_change_t *c, char op, int id, const char *customer,
                   uint64_t lsn, int64_t offset)
{
    char v[512];
    cdc_decode_error_t de;
    if (op == 'd')
        snprintf(v, sizeof(v), "{\"op\":\"d\",\"before\":{\"id\":%d},\"source\":{\"lsn\":%llu}}",
                 id, (unsigned long long)lsn);
    else
        snprintf(
            v, sizeof(v),
            "{\"op\":\"%c\",\"after\":{\"id\":%d,\"customer\":\"%s\"},\"source\":{\"lsn\":%llu,"
            "\"txId\":9}}",
            op, id, customer, (unsigned long long)lsn);
    cdc_decode_input_t in = {TOPIC, 4, offset, NULL, 0, v, strlen(v), 1};
    assert_int_equal(cdc_decode(cat, NULL, &in, c, &de), CDC_OK);
}

static const cdc_stage_entry_t *entry(const cdc_stage_table_t *t, int id)
{
    for (size_t i = 0; i < t->nentries; i++)
        if (cdc_stage_entry_row(t, &t->entries[i])->vals[0].u.i == id)
            return &t->entries[i];
    return NULL;
}

static void test_collapse(void **state)
{
    (void)state;
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    size_t n;
    char *v1 = fixture("capture_schema_v1.json", &n);
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 1, v1, n, &e), CDC_OK);
    free(v1);

    cdc_stage_t s;
    cdc_stage_init(&s, 4, 7);
    struct {
        char op;
        int id;
        const char *cust;
        bool live_before;
    } seq[] = {
        {'c', 1, "a", false}, {'u', 1, "b", true},
        {'u', 1, "c", true},                            /* new key, 3 changes */
        {'u', 2, "x", true},  {'u', 2, "y", true},      /* existing key */
        {'d', 3, NULL, true},                           /* existing, deleted */
        {'c', 4, "n", false}, {'d', 4, NULL, true},     /* new then deleted */
        {'d', 5, NULL, true}, {'c', 5, "again", false}, /* deleted, re-inserted */
    };
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        cdc_change_t c;
        change(cat, &c, seq[i].op, seq[i].id, seq[i].cust, 100 + i, (int64_t)(1000 + i));
        assert_int_equal(cdc_stage_add(&s, &c, seq[i].live_before, &e), CDC_OK);
        cdc_change_clear(&c);
    }
    assert_int_equal(s.ntables, 1);
    const cdc_stage_table_t *t = &s.tables[0];
    assert_string_equal(t->ns, "public");
    assert_string_equal(t->table, "orders");
    assert_int_equal(t->nentries, 5);

    const cdc_stage_entry_t *en = entry(t, 1);
    assert_false(en->deleted);
    assert_false(en->needs_delete); /* known new: no equality delete */
    assert_memory_equal(cdc_stage_entry_row(t, en)->vals[1].bytes, "c", 1);
    en = entry(t, 2);
    assert_true(en->needs_delete);
    assert_memory_equal(cdc_stage_entry_row(t, en)->vals[1].bytes, "y", 1);
    en = entry(t, 3);
    assert_true(en->deleted);
    assert_true(en->needs_delete); /* delete writes only the equality delete */
    en = entry(t, 4);
    assert_true(en->deleted);
    assert_false(en->needs_delete); /* never reached the table: nothing at all */
    en = entry(t, 5);
    assert_false(en->deleted);
    assert_true(en->needs_delete);
    assert_memory_equal(cdc_stage_entry_row(t, en)->vals[1].bytes, "again", 5);

    size_t data, deletes;
    cdc_stage_table_counts(t, &data, &deletes);
    assert_int_equal(data, 3);    /* ids 1, 2, 5 */
    assert_int_equal(deletes, 3); /* ids 2, 3, 5 */

    /* Changelog: every change, in order, with its metadata. */
    assert_int_equal(t->nchangelog, 10);
    assert_int_equal(t->changelog[0].op, 'c');
    assert_int_equal(t->changelog[0].offset, 1000);
    assert_int_equal(t->changelog[0].partition, 4);
    assert_int_equal(t->changelog[0].lsn, 100);
    assert_int_equal(t->changelog[0].tx_id, 9);
    assert_int_equal(t->changelog[5].op, 'd');
    assert_int_equal(t->changelog[5].row.vals[0].u.i, 3); /* before image for deletes */
    assert_true(s.bytes > 0);

    /* Write the epoch's files into a local warehouse. */
    char wh[256];
    const char *tmpd = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(wh, sizeof(wh), "%s/test_stage.XXXXXX", tmpd);
    assert_non_null(mkdtemp(wh));
    cdc_storage_t *storage;
    assert_int_equal(cdc_storage_open(wh, NULL, &storage, &e), CDC_OK);
    cdc_stage_write_options_t wo = {.warehouse = wh, .job = "j1"};
    cdc_stage_file_t *files;
    size_t nfiles;
    assert_int_equal(cdc_stage_write(&s, storage, &wo, &files, &nfiles, &e), CDC_OK);
    assert_int_equal(nfiles, 3);
    assert_string_equal(files[0].table, "public.orders");
    assert_int_equal(files[0].df.content, CDC_ICE_CONTENT_DATA);
    assert_int_equal(files[0].df.record_count, 3);
    assert_string_equal(files[1].table, "public.orders");
    assert_int_equal(files[1].df.content, CDC_ICE_CONTENT_EQUALITY_DELETES);
    assert_int_equal(files[1].df.record_count, 3);
    assert_int_equal(files[1].df.nequality_ids, 1);
    assert_int_equal(files[1].df.equality_ids[0], 1);
    assert_string_equal(files[2].table, "public.orders_changelog");
    assert_int_equal(files[2].df.record_count, 10);
    for (size_t i = 0; i < nfiles; i++) {
        bool exists = false;
        assert_int_equal(cdc_storage_exists(storage, files[i].df.path, &exists, &e), CDC_OK);
        assert_true(exists);
        assert_non_null(strstr(files[i].df.path, "/data/j1-e7-p4-"));
        assert_true(files[i].df.file_size_in_bytes > 0);
        assert_non_null(files[i].schema_json);
    }
    assert_non_null(strstr(files[2].schema_json, "\"_kafka_offset\""));
    cdc_stage_files_free(files, nfiles);
    cdc_storage_close(storage);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", wh);
    assert_int_equal(system(cmd), 0);

    cdc_stage_reset(&s, 8);
    assert_int_equal(s.ntables, 0);
    assert_int_equal(s.bytes, 0);
    assert_int_equal(s.epoch, 8);
    cdc_stage_free(&s);
    cdc_catalog_free(cat);
}

/* A change or truncate of the test table in Kafka partition p. */
static void change_in(cdc_catalog_t *cat, cdc_change_t *c, char op, int id, int32_t p, uint64_t lsn,
                      int64_t offset)
{
    char v[512];
    cdc_decode_error_t de;
    if (op == 't')
        snprintf(v, sizeof(v),
                 "{\"op\":\"t\",\"before\":null,\"after\":null,\"source\":{\"lsn\":%llu}}",
                 (unsigned long long)lsn);
    else
        snprintf(v, sizeof(v),
                 "{\"op\":\"%c\",\"after\":{\"id\":%d,\"customer\":\"c%d\"},\"source\":{"
                 "\"lsn\":%llu}}",
                 op, id, id, (unsigned long long)lsn);
    cdc_decode_input_t in = {TOPIC, p, offset, NULL, 0, v, strlen(v), 1};
    assert_int_equal(cdc_decode(cat, NULL, &in, c, &de), CDC_OK);
}

/* Truncate: the epoch's earlier mirror entries go, the changelog keeps them; only
 * partition 0 records the truncate in the changelog; the table is marked truncated. */
static void test_truncate(void **state)
{
    (void)state;
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    size_t n;
    char *v1 = fixture("capture_schema_v1.json", &n);
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 1, v1, n, &e), CDC_OK);
    free(v1);
    char wh[256];
    const char *tmpd = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(wh, sizeof(wh), "%s/test_stage_t.XXXXXX", tmpd);
    assert_non_null(mkdtemp(wh));
    cdc_storage_t *storage;
    assert_int_equal(cdc_storage_open(wh, NULL, &storage, &e), CDC_OK);
    cdc_stage_write_options_t wo = {.warehouse = wh, .job = "j1"};

    for (int32_t p = 0; p <= 4; p += 4) {
        cdc_stage_t s;
        cdc_stage_init(&s, (uint32_t)p, 9);
        struct {
            char op;
            int id;
            bool live_before;
        } seq[] = {
            {'c', 1, false}, {'u', 2, true}, {'t', 0, false}, {'c', 2, false}, {'c', 3, false}};
        size_t bytes_before_truncate = 0;
        for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
            cdc_change_t c;
            if (seq[i].op == 't')
                bytes_before_truncate = s.bytes;
            change_in(cat, &c, seq[i].op, seq[i].id, p, 100 + i, (int64_t)(50 + i));
            assert_int_equal(cdc_stage_add(&s, &c, seq[i].live_before, &e), CDC_OK);
            cdc_change_clear(&c);
            if (seq[i].op == 't')
                assert_true(s.bytes < bytes_before_truncate);
        }
        assert_int_equal(s.ntables, 1);
        const cdc_stage_table_t *t = &s.tables[0];
        assert_true(t->truncated);
        assert_int_equal(t->nentries, 2); /* 2 and 3, both new after the truncate */
        assert_null(entry(t, 1));
        assert_false(entry(t, 2)->needs_delete);
        assert_int_equal(t->nchangelog, p == 0 ? 5 : 4);
        if (p == 0) {
            assert_int_equal(t->changelog[2].op, 't');
            assert_null(t->changelog[2].row.vals);
            assert_int_equal(t->changelog[2].offset, 52);
        }
        cdc_stage_file_t *files;
        size_t nfiles;
        assert_int_equal(cdc_stage_write(&s, storage, &wo, &files, &nfiles, &e), CDC_OK);
        assert_int_equal(nfiles, 2); /* data (2 rows) + changelog; no deletes */
        assert_int_equal(files[0].df.content, CDC_ICE_CONTENT_DATA);
        assert_int_equal(files[0].df.record_count, 2);
        assert_string_equal(files[1].table, "public.orders_changelog");
        assert_int_equal(files[1].df.record_count, p == 0 ? 5 : 4);
        cdc_stage_files_free(files, nfiles);

        /* a truncate alone: no mirror file, still truncated */
        cdc_stage_reset(&s, 10);
        cdc_change_t c;
        change_in(cat, &c, 't', 0, p, 300, 70);
        assert_int_equal(cdc_stage_add(&s, &c, false, &e), CDC_OK);
        cdc_change_clear(&c);
        assert_true(s.tables[0].truncated);
        assert_int_equal(cdc_stage_write(&s, storage, &wo, &files, &nfiles, &e), CDC_OK);
        assert_int_equal(nfiles, p == 0 ? 1 : 0);
        cdc_stage_files_free(files, nfiles);
        cdc_stage_free(&s);
    }
    cdc_storage_close(storage);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", wh);
    assert_int_equal(system(cmd), 0);
    cdc_catalog_free(cat);
}

static void test_many_keys(void **state)
{
    (void)state;
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    size_t n;
    char *v1 = fixture("capture_schema_v1.json", &n);
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 1, v1, n, &e), CDC_OK);
    free(v1);
    cdc_stage_t s;
    cdc_stage_init(&s, 0, 1);
    for (int round = 0; round < 3; round++)
        for (int id = 0; id < 5000; id++) {
            cdc_change_t c;
            change(cat, &c, round ? 'u' : 'c', id, round == 2 ? "last" : "x",
                   (uint64_t)(round * 10000 + id), id);
            assert_int_equal(cdc_stage_add(&s, &c, round > 0, &e), CDC_OK);
            cdc_change_clear(&c);
        }
    assert_int_equal(s.tables[0].nentries, 5000);
    assert_int_equal(s.tables[0].nchangelog, 15000);
    for (size_t i = 0; i < 5000; i++) {
        const cdc_row_t *r = cdc_stage_entry_row(&s.tables[0], &s.tables[0].entries[i]);
        assert_int_equal(r->vals[0].u.i, (int64_t)i);
        assert_memory_equal(r->vals[1].bytes, "last", 4);
        assert_false(s.tables[0].entries[i].needs_delete);
    }
    cdc_stage_free(&s);
    cdc_catalog_free(cat);
}

static void test_dlq_headers(void **state)
{
    (void)state;
    cdc_dlq_headers_t h;
    char topic[64];
    cdc_dlq_topic("cdc.public.orders", topic, sizeof(topic));
    assert_string_equal(topic, "cdc.public.orders.dlq");
    cdc_dlq_headers(&h, CDC_DLQ_TYPE_MISMATCH, "column \"id\" expects long", "cdc.public.orders", 7,
                    12345, 1709287200123LL);
    assert_string_equal(h.name[0], "cdc.error.class");
    assert_string_equal(h.value[0], "type_mismatch");
    assert_string_equal(h.value[1], "column \"id\" expects long");
    assert_string_equal(h.value[2], "cdc.public.orders");
    assert_string_equal(h.value[3], "7");
    assert_string_equal(h.value[4], "12345");
    assert_string_equal(h.name[5], "cdc.error.time");
    assert_string_equal(h.value[5], "2024-03-01T10:00:00.123Z");
    for (int c = 0; c < CDC_DLQ__COUNT; c++)
        assert_string_not_equal(cdc_dlq_class_name((cdc_dlq_class_t)c), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collapse),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_dlq_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
