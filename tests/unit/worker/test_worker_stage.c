/*
 * Unit tests for worker/stage.h (per-epoch collapse, encoding, files): several changes to one key
 * collapse to one final image; new keys need no equality delete; a delete writes only the delete;
 * the changelog keeps every change; a truncate drops the epoch's earlier mirror entries (changelog
 * 't' row on partition 0). Encoding ahead (row groups encoded while the epoch runs) gives files
 * with the same rows, counts and column statistics as encoding everything at the barrier, also
 * across a mid-epoch schema change, a change to an already encoded entry, a truncate
 * and a reset. A partitioned table gets one file per partition of each kind, equality
 * deletes in the partition the row had before the epoch. With CDC_STAGE_KEEP_DIR set, the compared
 * files are left in that directory (pairs "<case>-ahead" / "<case>-whole" warehouses) for
 * tests/js/stage_readback.test.mjs, which compares their rows with DuckDB.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "tests/unit/worker/worker_fixtures.h"
#include "common/cdcschema.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/parquet_read.h"
#include "worker/stage.h"
#include "tests/harness/harness.h"

static const char *TOPIC = "cdc.public.orders";

/* A catalog holding the test table's schema (version 1). */
static cdc_catalog_t *orders_catalog(void)
{
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    size_t n;
    char *v1 = fixture("capture_schema_v1.json", &n);
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 1, v1, n, &e), CDC_OK);
    free(v1);
    return cat;
}

/* A local warehouse in a new temporary directory. */
typedef struct wh {
    char dir[256];
    cdc_storage_t *storage;
} wh_t;

static void wh_open(wh_t *w, const char *tag)
{
    cdc_error_t e;
    const char *tmpd = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(w->dir, sizeof(w->dir), "%s/test_stage_%s.XXXXXX", tmpd, tag);
    assert_non_null(mkdtemp(w->dir));
    assert_int_equal(cdc_storage_open(w->dir, NULL, &w->storage, &e), CDC_OK);
}

static void wh_close(wh_t *w)
{
    char cmd[300];
    cdc_storage_close(w->storage);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", w->dir);
    assert_int_equal(system(cmd), 0);
}

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
    cdc_catalog_t *cat = orders_catalog();
    cdc_error_t e;

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
        assert_int_equal(cdc_stage_add(&s, &c, seq[i].live_before, NULL, &e), CDC_OK);
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
    wh_t wh = {{0}, NULL};
    wh_open(&wh, "c");
    cdc_storage_t *storage = wh.storage;
    cdc_stage_write_options_t wo = {.warehouse = wh.dir, .job = "j1"};
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
    wh_close(&wh);

    cdc_stage_reset(&s, 8);
    assert_int_equal(s.ntables, 0);
    assert_int_equal(s.bytes, 0);
    assert_int_equal(s.epoch, 8);
    cdc_stage_free(&s);
    cdc_catalog_free(cat);
}

/* Partition key of a row of the test table with this customer under spec. */
static void key_of(cdc_catalog_t *cat, const cdc_ice_partition_spec_t *spec, const char *customer,
                   uint8_t **key, size_t *len)
{
    cdc_change_t c;
    cdc_error_t e;
    change(cat, &c, 'c', 99, customer, 1, 1);
    assert_int_equal(cdc_stage_part_key(spec, &c.after, NULL, key, len, &e), CDC_OK);
    cdc_change_clear(&c);
}

/* The file of a kind whose partition value (one identity field) is v (NULL: spec 0). */
static const cdc_stage_file_t *file_in(const cdc_stage_file_t *files, size_t n,
                                       cdc_stage_kind_t kind, const char *v)
{
    for (size_t i = 0; i < n; i++) {
        const cdc_ice_data_file_t *df = &files[i].df;
        if (files[i].kind != kind)
            continue;
        if (v == NULL && df->spec_id == 0 && df->npartition == 0)
            return &files[i];
        if (v != NULL && df->npartition == 1 && !df->partition[0].null &&
            df->partition[0].len == strlen(v) && memcmp(df->partition[0].bytes, v, strlen(v)) == 0)
            return &files[i];
    }
    return NULL;
}

/* A partitioned table: one file per partition of each kind; a data row goes to the
 * partition of its final image, an equality delete to the partition the row had before
 * the epoch (from state), also when the row moved; a row whose state has no partition
 * key gets a delete in spec 0 (global); the changelog is partitioned by its own spec
 * (here identity(_op)). The keys decode to the files' spec ids and values. */
static void test_partitioned(void **state)
{
    (void)state;
    cdc_catalog_t *cat = orders_catalog();
    cdc_error_t e;
    size_t n;
    cdc_ice_partition_field_t mf = {2, 1000, "customer", {CDC_ICE_TRANSFORM_IDENTITY, 0}};
    cdc_ice_partition_field_t cf = {CDC_CL_FIELD_OP, 1000, "_op", {CDC_ICE_TRANSFORM_IDENTITY, 0}};
    cdc_ice_partition_spec_t mspec = {3, &mf, 1}, cspec = {5, &cf, 1};
    cdc_ice_sort_field_t msf = {1, {CDC_ICE_TRANSFORM_IDENTITY, 0}, true, false};
    cdc_ice_sort_field_t csf = {
        CDC_CL_FIELD_KAFKA_OFFSET, {CDC_ICE_TRANSFORM_IDENTITY, 0}, false, true};
    cdc_ice_sort_order_t morder = {1, &msf, 1}, corder = {2, &csf, 1};
    uint8_t *ka, *kb;
    size_t la, lb;
    key_of(cat, &mspec, "a", &ka, &la);
    key_of(cat, &mspec, "b", &kb, &lb);

    cdc_stage_t s;
    cdc_stage_init(&s, 4, 7);
    cdc_stage_set_encoding(&s, 0, 64); /* encoding ahead must step aside */
    struct {
        char op;
        int id;
        const char *cust;
        const uint8_t *old; /* partition key in state before the change */
        size_t old_len;
        bool live_before;
    } seq[] = {
        {'c', 1, "a", NULL, 0, false}, /* new row in a */
        {'u', 2, "b", ka, la, true},   /* moves a -> b */
        {'u', 2, "c", kb, lb, true},   /* -> c within the epoch: the delete stays in a */
        {'d', 3, NULL, kb, lb, true},  /* deleted from b */
        {'u', 4, "a", NULL, 0, true},  /* state without a key: global delete */
    };
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        cdc_change_t c;
        uint8_t *mk = NULL;
        size_t ml = 0;
        change(cat, &c, seq[i].op, seq[i].id, seq[i].cust, 100 + i, (int64_t)(1000 + i));
        if (seq[i].op != 'd')
            assert_int_equal(cdc_stage_part_key(&mspec, &c.after, NULL, &mk, &ml, &e), CDC_OK);
        cdc_stage_parts_t parts = {mk, ml, seq[i].old, seq[i].old_len, &cspec, &morder, &corder};
        assert_int_equal(cdc_stage_add(&s, &c, seq[i].live_before, &parts, &e), CDC_OK);
        free(mk);
        cdc_change_clear(&c);
    }
    assert_true(s.tables[0].partitioned);
    assert_int_equal(cdc_stage_encoded(&s.tables[0], CDC_STAGE_CHANGELOG, NULL), 0);

    wh_t wh = {{0}, NULL};
    wh_open(&wh, "part");
    cdc_storage_t *storage = wh.storage;
    cdc_stage_write_options_t wo = {.warehouse = wh.dir, .job = "j1"};
    cdc_stage_file_t *files;
    size_t nfiles;
    assert_int_equal(cdc_stage_write(&s, storage, &wo, &files, &nfiles, &e), CDC_OK);
    /* data: a {1, 4}, c {2}; deletes: a {2}, b {3}, spec 0 {4}; changelog: c, u, d */
    assert_int_equal(nfiles, 8);
    const cdc_stage_file_t *f = file_in(files, nfiles, CDC_STAGE_MIRROR_DATA, "a");
    assert_non_null(f);
    assert_int_equal(f->df.spec_id, 3);
    assert_int_equal(f->df.record_count, 2);
    assert_int_equal(f->df.sort_order_id, 1); /* data files name the order they follow */
    assert_non_null(f = file_in(files, nfiles, CDC_STAGE_MIRROR_DATA, "c"));
    assert_int_equal(f->df.record_count, 1);
    assert_null(file_in(files, nfiles, CDC_STAGE_MIRROR_DATA, "b"));
    assert_non_null(f = file_in(files, nfiles, CDC_STAGE_MIRROR_DELETES, "a"));
    assert_int_equal(f->df.spec_id, 3);
    assert_int_equal(f->df.record_count, 1);
    assert_int_equal(f->df.content, CDC_ICE_CONTENT_EQUALITY_DELETES);
    assert_int_equal(f->df.sort_order_id, 0);
    assert_non_null(f = file_in(files, nfiles, CDC_STAGE_MIRROR_DELETES, "b"));
    assert_int_equal(f->df.record_count, 1);
    assert_non_null(f = file_in(files, nfiles, CDC_STAGE_MIRROR_DELETES, NULL));
    assert_int_equal(f->df.record_count, 1);
    assert_non_null(f = file_in(files, nfiles, CDC_STAGE_CHANGELOG, "u"));
    assert_int_equal(f->df.spec_id, 5);
    assert_int_equal(f->df.record_count, 3);
    assert_int_equal(f->df.sort_order_id, 2);
    assert_string_equal(f->table, "public.orders_changelog");
    assert_non_null(file_in(files, nfiles, CDC_STAGE_CHANGELOG, "c"));
    assert_non_null(file_in(files, nfiles, CDC_STAGE_CHANGELOG, "d"));
    cdc_stage_files_free(files, nfiles);
    wh_close(&wh);

    /* a key decodes to its spec id and values; NULL is spec 0 */
    int32_t sid;
    cdc_ice_part_value_t *vals;
    assert_true(cdc_stage_part_key_decode(kb, lb, &sid, &vals, &n));
    assert_int_equal(sid, 3);
    assert_int_equal(n, 1);
    assert_memory_equal(vals[0].bytes, "b", 1);
    cdc_ice_part_values_free(vals, n);
    assert_true(cdc_stage_part_key_decode(NULL, 0, &sid, &vals, &n));
    assert_int_equal(sid, 0);
    assert_int_equal(n, 0);
    assert_false(cdc_stage_part_key_decode(kb, 7, &sid, &vals, &n)); /* truncated */
    free(ka);
    free(kb);
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
    cdc_catalog_t *cat = orders_catalog();
    cdc_error_t e;
    wh_t wh = {{0}, NULL};
    wh_open(&wh, "t");
    cdc_storage_t *storage = wh.storage;
    cdc_stage_write_options_t wo = {.warehouse = wh.dir, .job = "j1"};

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
            assert_int_equal(cdc_stage_add(&s, &c, seq[i].live_before, NULL, &e), CDC_OK);
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
        assert_int_equal(cdc_stage_add(&s, &c, false, NULL, &e), CDC_OK);
        cdc_change_clear(&c);
        assert_true(s.tables[0].truncated);
        assert_int_equal(cdc_stage_write(&s, storage, &wo, &files, &nfiles, &e), CDC_OK);
        assert_int_equal(nfiles, p == 0 ? 1 : 0);
        cdc_stage_files_free(files, nfiles);
        cdc_stage_free(&s);
    }
    wh_close(&wh);
    cdc_catalog_free(cat);
}

/* A schema marker (op "s") for version v of the test table. */
static void marker(cdc_catalog_t *cat, cdc_change_t *c, int v)
{
    char json[256];
    cdc_decode_error_t de;
    snprintf(json, sizeof(json),
             "{\"op\":\"s\",\"before\":null,\"after\":null,\"source\":{\"lsn\":500,"
             "\"schema_version\":%d}}",
             v);
    cdc_decode_input_t in = {TOPIC, 4, 80, NULL, 0, json, strlen(json), -1};
    assert_int_equal(cdc_decode(cat, NULL, &in, c, &de), CDC_OK);
    assert_int_equal(c->op, CDC_OP_SCHEMA);
}

/* A schema marker stages its table with the marker's version, never an older one over a
 * newer, and adds no rows: alone it writes no file, yet the table (and so the Ack's
 * schema) is there. */
static void test_schema_marker(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_error_t e;
    wh_t wh = {{0}, NULL};
    wh_open(&wh, "s");
    cdc_stage_write_options_t wo = {.warehouse = wh.dir, .job = "j1"};
    cdc_stage_file_t *files;
    size_t nfiles;
    cdc_stage_t s;
    cdc_change_t c;

    cdc_stage_init(&s, 4, 9);
    marker(cat, &c, 2);
    assert_int_equal(cdc_stage_schema(&s, &c, &e), CDC_OK);
    cdc_change_clear(&c);
    assert_int_equal(s.ntables, 1);
    assert_int_equal(s.tables[0].schema->version, 2);
    assert_int_equal(s.tables[0].nentries, 0);
    assert_int_equal(s.tables[0].nchangelog, 0);
    marker(cat, &c, 1); /* an older version does not replace a newer one */
    assert_int_equal(cdc_stage_schema(&s, &c, &e), CDC_OK);
    cdc_change_clear(&c);
    assert_int_equal(s.tables[0].schema->version, 2);
    assert_int_equal(cdc_stage_write(&s, wh.storage, &wo, &files, &nfiles, &e), CDC_OK);
    assert_int_equal(nfiles, 0);
    cdc_stage_files_free(files, nfiles);
    cdc_stage_free(&s);
    wh_close(&wh);
    cdc_catalog_free(cat);
}

/* A floor (a truncate in partition 4 alone, marked floor): the slot writes its changelog
 * row and reports it (floor, floor_*). A change before a floor (changelog_only) adds a
 * changelog row and leaves the mirror entries alone; a backfill one adds nothing. A
 * sweep's delete (mirror-only) adds an equality delete and no changelog row. */
static void test_floor_and_changelog_only(void **state)
{
    (void)state;
    cdc_catalog_t *cat = orders_catalog();
    cdc_error_t e;
    wh_t wh = {{0}, NULL};
    wh_open(&wh, "f");
    cdc_stage_write_options_t wo = {.warehouse = wh.dir, .job = "j1"};
    cdc_stage_t s;
    cdc_change_t c;
    cdc_stage_init(&s, 4, 9);

    change_in(cat, &c, 'c', 1, 4, 100, 50);
    assert_int_equal(cdc_stage_add(&s, &c, false, NULL, &e), CDC_OK);
    cdc_change_clear(&c);
    change_in(cat, &c, 't', 0, 4, 200, 51);
    c.floor = true;
    assert_int_equal(cdc_stage_add(&s, &c, false, NULL, &e), CDC_OK);
    cdc_change_clear(&c);
    const cdc_stage_table_t *t = &s.tables[0];
    assert_true(t->truncated && t->floor);
    assert_int_equal(t->floor_lsn, 200);
    assert_int_equal(t->nchangelog, 2); /* the insert and the truncate, in partition 4 */
    assert_int_equal(t->changelog[1].op, 't');

    change_in(cat, &c, 'u', 2, 4, 150, 52); /* before the floor, reached late */
    c.changelog_only = true;
    assert_int_equal(cdc_stage_add(&s, &c, true, NULL, &e), CDC_OK);
    cdc_change_clear(&c);
    change_in(cat, &c, 'c', 3, 4, 160, 53);
    c.changelog_only = c.backfill = true;
    assert_int_equal(cdc_stage_add(&s, &c, false, NULL, &e), CDC_OK);
    cdc_change_clear(&c);
    assert_int_equal(t->nentries, 0);
    assert_int_equal(t->nchangelog, 3);
    assert_int_equal(t->changelog[2].op, 'u');

    { /* a sweep's delete of a row of an earlier epoch */
        const char *v = "{\"op\":\"d\",\"before\":{\"id\":5},\"source\":{\"lsn\":120}}";
        cdc_decode_input_t in = {TOPIC, 4, -1, NULL, 0, v, strlen(v), 1};
        cdc_decode_error_t de;
        assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), CDC_OK);
    }
    c.backfill = true;
    assert_int_equal(cdc_stage_add(&s, &c, true, NULL, &e), CDC_OK);
    cdc_change_clear(&c);
    assert_int_equal(t->nentries, 1);
    assert_true(entry(t, 5)->needs_delete && entry(t, 5)->deleted);

    cdc_stage_file_t *files;
    size_t nfiles, deletes = 0, changelog = 0;
    assert_int_equal(cdc_stage_write(&s, wh.storage, &wo, &files, &nfiles, &e), CDC_OK);
    for (size_t i = 0; i < nfiles; i++) {
        if (files[i].df.content == CDC_ICE_CONTENT_EQUALITY_DELETES)
            deletes += (size_t)files[i].df.record_count;
        else if (strcmp(files[i].table, "public.orders_changelog") == 0)
            changelog += (size_t)files[i].df.record_count;
        else
            fail_msg("unexpected mirror data file of %lld rows",
                     (long long)files[i].df.record_count);
    }
    assert_int_equal(deletes, 1);
    assert_int_equal(changelog, 3);
    cdc_stage_files_free(files, nfiles);
    cdc_stage_free(&s);
    wh_close(&wh);
    cdc_catalog_free(cat);
}

static void test_many_keys(void **state)
{
    (void)state;
    cdc_catalog_t *cat = orders_catalog();
    cdc_error_t e;
    cdc_stage_t s;
    cdc_stage_init(&s, 0, 1);
    for (int round = 0; round < 3; round++)
        for (int id = 0; id < 5000; id++) {
            cdc_change_t c;
            change(cat, &c, round ? 'u' : 'c', id, round == 2 ? "last" : "x",
                   (uint64_t)(round * 10000 + id), id);
            assert_int_equal(cdc_stage_add(&s, &c, round > 0, NULL, &e), CDC_OK);
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

/* ---- encoding ahead ------------------------------------------------------------------ */

/* A change with every column of the schema version (v2 adds status), some nulls. */
static void change_full(cdc_catalog_t *cat, cdc_change_t *c, char op, int id, int version, int k,
                        int64_t offset)
{
    char v[1024];
    cdc_decode_error_t de;
    if (op == 'd') {
        snprintf(v, sizeof(v),
                 "{\"op\":\"d\",\"before\":{\"id\":%d},\"source\":{\"lsn\":%lld,\"txId\":%d,"
                 "\"ts_ms\":1709287200123}}",
                 id, (long long)(1000 + offset), k);
    } else {
        char status[64] = "";
        if (version >= 2)
            snprintf(status, sizeof(status), ",\"status\":\"s%d\"", k % 7);
        snprintf(v, sizeof(v),
                 "{\"op\":\"%c\",\"after\":{\"id\":%d,\"customer\":\"cust-%d\",\"amount\":"
                 "\"%d.%02d\",\"created\":%lld,\"note\":%s%s},\"source\":{\"lsn\":%lld,"
                 "\"txId\":%d,\"ts_ms\":1709287200123}}",
                 op, id, (id * 7 + k) % 1000, k % 5000, k % 100,
                 (long long)(1709287200000000LL + k * 1000LL), k % 3 ? "\"n\"" : "null", status,
                 (long long)(1000 + offset), k);
    }
    cdc_decode_input_t in = {TOPIC, 4, offset, NULL, 0, v, strlen(v), version, NULL, NULL};
    assert_int_equal(cdc_decode(cat, NULL, &in, c, &de), CDC_OK);
}

/* Two stages fed the same changes: whole (no encoding ahead) and ahead (zstd row groups
 * encoded while the epoch runs). k counts the changes added (their values and offsets). */
typedef struct pair {
    cdc_catalog_t *cat;
    cdc_stage_t whole, ahead;
    int k;
} pair_t;

/* Empty stages for partition; ahead encodes row groups of enc_rows rows (cat and k are
 * kept, so that a case can start again with the same catalog). */
static void pair_init(pair_t *p, uint32_t partition, size_t enc_rows)
{
    cdc_stage_init(&p->whole, partition, 1);
    cdc_stage_init(&p->ahead, partition, 1);
    cdc_stage_set_encoding(&p->ahead, 2, enc_rows);
}

static void pair_free(pair_t *p)
{
    cdc_stage_free(&p->whole);
    cdc_stage_free(&p->ahead);
}

/* Adds the same change (change_full(), or a truncate when op is 't') to both stages. */
static void pair_add(pair_t *p, char op, int id, int version, bool live_before)
{
    cdc_stage_t *s[2] = {&p->whole, &p->ahead};
    for (int i = 0; i < 2; i++) {
        cdc_error_t e;
        cdc_change_t c;
        if (op == 't')
            change_in(p->cat, &c, 't', 0, 0, 900000, 9000);
        else
            change_full(p->cat, &c, op, id, version, p->k, 5000 + p->k);
        assert_int_equal(cdc_stage_add(s[i], &c, live_before, NULL, &e), CDC_OK);
        cdc_change_clear(&c);
    }
    if (op != 't')
        p->k++;
}

/* Inserts ids from..to-1 (schema version 1) into both stages. */
static void pair_insert(pair_t *p, int from, int to)
{
    for (int id = from; id < to; id++)
        pair_add(p, 'c', id, 1, false);
}

static void assert_same_stats(const cdc_ice_data_file_t *x, const cdc_ice_data_file_t *y)
{
    assert_int_equal(x->content, y->content);
    assert_int_equal(x->record_count, y->record_count);
    assert_int_equal(x->schema_id, y->schema_id);
    assert_int_equal(x->nstats, y->nstats);
    for (size_t i = 0; i < x->nstats; i++) {
        const cdc_ice_col_stats_t *p = &x->stats[i], *q = &y->stats[i];
        assert_int_equal(p->field_id, q->field_id);
        assert_int_equal(p->value_count, q->value_count);
        assert_int_equal(p->null_count, q->null_count);
        assert_int_equal(p->has_bounds, q->has_bounds);
        if (p->has_bounds) {
            assert_int_equal(p->lower_len, q->lower_len);
            assert_memory_equal(p->lower, q->lower, p->lower_len);
            assert_int_equal(p->upper_len, q->upper_len);
            assert_memory_equal(p->upper, q->upper, p->upper_len);
        }
    }
    assert_int_equal(x->nequality_ids, y->nequality_ids);
}

/* A warehouse directory for one side of a case (kept under CDC_STAGE_KEEP_DIR). */
static void case_dir(char *out, size_t cap, const char *name, const char *side)
{
    const char *keep = getenv("CDC_STAGE_KEEP_DIR");
    if (keep != NULL) {
        snprintf(out, cap, "%s/%s-%s", keep, name, side);
        assert_int_equal(mkdir(out, 0755), 0);
        return;
    }
    const char *tmpd = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(out, cap, "%s/test_stage_%s_%s.XXXXXX", tmpd, name, side);
    assert_non_null(mkdtemp(out));
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    if (getenv("CDC_STAGE_KEEP_DIR") != NULL)
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Opens a storage on warehouse wh (*st, the caller closes it) and writes the stage's
 * files with codec compression; returns what cdc_stage_write() returned. */
static cdc_err_t write_stage(cdc_stage_t *s, const char *wh, int compression, cdc_storage_t **st,
                             cdc_stage_file_t **files, size_t *n, cdc_error_t *e)
{
    assert_int_equal(cdc_storage_open(wh, NULL, st, e), CDC_OK);
    cdc_stage_write_options_t o = {.warehouse = wh, .job = "j1", .compression = compression};
    return cdc_stage_write(s, *st, &o, files, n, e);
}

/* Writes both stages and compares their files: same tables, kinds, row counts and
 * statistics; the ahead files have more row groups when min_groups says so (per kind:
 * data, deletes, changelog). Then frees the stages (pair_free()). */
static void pair_compare(pair_t *p, const char *name, const size_t min_groups[3])
{
    cdc_stage_t *whole = &p->whole, *ahead = &p->ahead;
    char dw[512], da[512];
    cdc_error_t e;
    cdc_storage_t *sw, *sa;
    cdc_stage_file_t *fw, *fa;
    size_t nw, na;
    case_dir(dw, sizeof(dw), name, "whole");
    case_dir(da, sizeof(da), name, "ahead");
    whole->epoch = ahead->epoch = 3;
    assert_int_equal(write_stage(whole, dw, 2, &sw, &fw, &nw, &e), CDC_OK);
    size_t bytes_before = ahead->bytes;
    assert_int_equal(write_stage(ahead, da, 2, &sa, &fa, &na, &e), CDC_OK);
    assert_true(ahead->bytes <= bytes_before); /* the encoded row groups are used up */
    for (size_t i = 0; i < ahead->ntables; i++) {
        assert_null(ahead->tables[i].enc_cl);
        assert_null(ahead->tables[i].enc_data);
    }
    assert_int_equal(nw, na);
    for (size_t i = 0; i < nw; i++) {
        assert_string_equal(fw[i].table, fa[i].table);
        assert_int_equal(fw[i].kind, fa[i].kind);
        assert_string_equal(fw[i].schema_json, fa[i].schema_json);
        assert_same_stats(&fw[i].df, &fa[i].df);
        assert_int_equal(fw[i].df.nsplit_offsets, 1);
        assert_true(fa[i].df.nsplit_offsets >= min_groups[fa[i].kind]);
        for (size_t g = 1; g < fa[i].df.nsplit_offsets; g++)
            assert_true(fa[i].df.split_offsets[g] > fa[i].df.split_offsets[g - 1]);
        bool exists = false;
        assert_int_equal(cdc_storage_exists(sa, fa[i].df.path, &exists, &e), CDC_OK);
        assert_true(exists);
    }
    cdc_stage_files_free(fw, nw);
    cdc_stage_files_free(fa, na);
    cdc_storage_close(sw);
    cdc_storage_close(sa);
    remove_dir(dw);
    remove_dir(da);
    pair_free(p);
}

static const cdc_source_schema_t *encoded_schema(const cdc_stage_table_t *t)
{
    const cdc_source_schema_t *sch;
    cdc_stage_encoded(t, CDC_STAGE_CHANGELOG, &sch);
    return sch;
}

/* More rows than the row-group size: inserts, updates of recent (not yet encoded)
 * keys, deletes of keys that were live before; the files match. */
static void test_ahead_matches_whole(void **state)
{
    (void)state;
    pair_t p = {.cat = fixture_catalog(TOPIC, 2)};
    pair_init(&p, 4, 100);
    for (int id = 0; id < 1000; id++) {
        pair_add(&p, 'c', id, 1, false);
        if (id % 10 == 9) /* the key just before stays open (not encoded yet) */
            pair_add(&p, 'u', id - 1, 1, true);
        if (id % 50 == 0) /* keys live before the epoch: equality deletes */
            pair_add(&p, 'd', 100000 + id, 1, true);
    }
    const cdc_stage_table_t *t = &p.ahead.tables[0];
    assert_non_null(t->enc_cl);
    assert_non_null(t->enc_data);
    assert_false(t->enc_data_off);
    assert_true(cdc_stage_encoded(t, CDC_STAGE_CHANGELOG, NULL) >= 1000); /* in multiples of 100 */
    assert_int_equal(cdc_stage_encoded(t, CDC_STAGE_CHANGELOG, NULL) % 100, 0);
    assert_true(t->nchangelog - cdc_stage_encoded(t, CDC_STAGE_CHANGELOG, NULL) < 100);
    assert_true(t->nentries - cdc_stage_encoded(t, CDC_STAGE_MIRROR_DATA, NULL) < 125);
    assert_true(p.ahead.bytes > p.whole.bytes); /* the encoded row groups count */
    pair_compare(&p, "matches", (size_t[3]){9, 1, 11});
    cdc_catalog_free(p.cat);
}

/* A change to an entry that is already encoded stops the mirror encoding for the
 * epoch (the changelog goes on); a truncate drops it too; the files still match. */
static void test_ahead_changed_entry_and_truncate(void **state)
{
    (void)state;
    pair_t p = {.cat = fixture_catalog(TOPIC, 2)};
    pair_init(&p, 0, 64);
    pair_insert(&p, 0, 300);
    const cdc_stage_table_t *t = &p.ahead.tables[0];
    assert_non_null(t->enc_data);
    size_t bytes = p.ahead.bytes;
    pair_add(&p, 'u', 3, 1, true); /* encoded: id 3 */
    assert_null(t->enc_data);
    assert_true(t->enc_data_off);
    assert_true(p.ahead.bytes < bytes + 1000); /* its row groups no longer count */
    pair_insert(&p, 300, 600);
    assert_null(t->enc_data); /* not again this epoch */
    assert_non_null(t->enc_cl);
    assert_true(cdc_stage_encoded(t, CDC_STAGE_CHANGELOG, NULL) >= 576);
    pair_compare(&p, "changed", (size_t[3]){1, 1, 9});

    /* truncate (partition 0: a changelog row) after encoded mirror rows */
    pair_init(&p, 0, 64);
    pair_insert(&p, 0, 200);
    assert_non_null(p.ahead.tables[0].enc_data);
    pair_add(&p, 't', 0, 0, false);
    assert_null(p.ahead.tables[0].enc_data);
    assert_true(p.ahead.tables[0].truncated);
    pair_insert(&p, 1000, 1300); /* after the truncate: encoded ahead again */
    assert_non_null(p.ahead.tables[0].enc_data);
    pair_compare(&p, "truncate", (size_t[3]){3, 1, 7});
    cdc_catalog_free(p.cat);
}

/* A schema change mid-epoch: the row groups encoded with the old version are
 * dropped and the file (latest schema) is re-encoded from the staged rows. */
static void test_ahead_schema_change(void **state)
{
    (void)state;
    pair_t p = {.cat = fixture_catalog(TOPIC, 2)};
    pair_init(&p, 4, 64);
    pair_insert(&p, 0, 250);
    const cdc_stage_table_t *t = &p.ahead.tables[0];
    assert_non_null(t->enc_cl);
    const cdc_source_schema_t *v1 = t->schema;
    pair_add(&p, 'c', 250, 2, false);
    assert_ptr_not_equal(t->schema, v1);
    /* the next row group due re-encodes from row 0 with v2 */
    assert_non_null(t->enc_cl);
    assert_ptr_equal(encoded_schema(t), t->schema);
    for (int id = 251; id < 400; id++)
        pair_add(&p, 'u', id - 200, 2, true);
    assert_ptr_equal(encoded_schema(t), t->schema);
    assert_true(cdc_stage_encoded(t, CDC_STAGE_CHANGELOG, NULL) >= 384);
    pair_compare(&p, "schema", (size_t[3]){1, 1, 6});
    cdc_catalog_free(p.cat);
}

/* An abandoned epoch: reset drops the row groups encoded ahead; nothing was written
 * before the barrier; the setting survives the reset. A barrier with another codec
 * encodes the file whole (the ahead row groups are not used). */
static void test_ahead_reset_and_codec(void **state)
{
    (void)state;
    pair_t p = {.cat = fixture_catalog(TOPIC, 2)};
    pair_init(&p, 4, 50);
    pair_insert(&p, 0, 400);
    assert_non_null(p.ahead.tables[0].enc_cl);
    cdc_stage_reset(&p.ahead, 2);
    assert_int_equal(p.ahead.ntables, 0);
    assert_int_equal(p.ahead.bytes, 0);
    assert_int_equal(p.ahead.enc_rows, 50);
    cdc_stage_reset(&p.whole, 2);
    pair_insert(&p, 0, 120);
    assert_non_null(p.ahead.tables[0].enc_cl);
    assert_int_equal(cdc_stage_encoded(&p.ahead.tables[0], CDC_STAGE_CHANGELOG, NULL), 100);

    /* snappy at the barrier: zstd row groups are not used */
    char wh[512];
    cdc_error_t e;
    cdc_storage_t *st;
    cdc_stage_file_t *files;
    size_t n;
    case_dir(wh, sizeof(wh), "codec", "ahead");
    assert_int_equal(write_stage(&p.ahead, wh, 1, &st, &files, &n, &e), CDC_OK);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(files[i].df.nsplit_offsets, 1);
    assert_int_equal(files[1].df.record_count, 120);
    cdc_stage_files_free(files, n);
    cdc_storage_close(st);
    remove_dir(wh);
    pair_free(&p);
    cdc_catalog_free(p.cat);
}

/* A failed barrier write removes the files it stored and uses up the row groups
 * encoded ahead; the retry encodes everything and gives the same files. */
static void test_ahead_write_failure_and_retry(void **state)
{
    (void)state;
    pair_t p = {.cat = fixture_catalog(TOPIC, 2)};
    pair_init(&p, 4, 64);
    pair_insert(&p, 0, 500);
    assert_true(cdc_stage_encoded(&p.ahead.tables[0], CDC_STAGE_CHANGELOG, NULL) > 0);
    assert_true(cdc_stage_encoded(&p.ahead.tables[0], CDC_STAGE_MIRROR_DATA, NULL) > 0);

    /* a regular file where the changelog's data/ directory belongs: its file fails */
    char wh[512], path[700];
    cdc_error_t e;
    cdc_storage_t *st;
    case_dir(wh, sizeof(wh), "failure", "blocked");
    snprintf(path, sizeof(path), "%s/public/orders_changelog", wh);
    char cmd[800];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && touch '%s/data'", path, path);
    assert_int_equal(system(cmd), 0);
    cdc_stage_file_t *files;
    size_t n;
    assert_int_not_equal(write_stage(&p.ahead, wh, 2, &st, &files, &n, &e), CDC_OK);
    assert_non_null(strstr(e.msg, "could not create file"));
    assert_int_equal(cdc_test_count_files(wh, NULL, true, NULL),
                     1); /* only the blocking file: the mirror's is gone */
    assert_int_equal(cdc_stage_encoded(&p.ahead.tables[0], CDC_STAGE_CHANGELOG, NULL), 0);
    assert_int_equal(cdc_stage_encoded(&p.ahead.tables[0], CDC_STAGE_MIRROR_DATA, NULL), 0);
    cdc_storage_close(st);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", wh);
    assert_int_equal(system(cmd), 0);

    /* the retry */
    pair_compare(&p, "retry", (size_t[3]){1, 1, 1});
    cdc_catalog_free(p.cat);
}

/* Wide rows: fewer rows per row group encoded ahead (CDC_STAGE_ENCODE_BYTES). */
static void test_ahead_wide_rows(void **state)
{
    (void)state;
    cdc_catalog_t *cat = fixture_catalog(TOPIC, 2);
    cdc_stage_t s;
    cdc_error_t e;
    cdc_stage_init(&s, 4, 1);
    cdc_stage_set_encoding(&s, 2, CDC_STAGE_ENCODE_ROWS);
    size_t vcap = 40000;
    char *v = malloc(vcap), *note = malloc(20001);
    assert_non_null(v);
    assert_non_null(note);
    memset(note, 'x', 20000);
    note[20000] = '\0';
    for (int id = 0; id < 300; id++) {
        cdc_change_t c;
        cdc_decode_error_t de;
        note[id % 20000] = (char)('a' + id % 26);
        snprintf(v, vcap,
                 "{\"op\":\"c\",\"after\":{\"id\":%d,\"customer\":\"c\",\"note\":\"%s\"},"
                 "\"source\":{\"lsn\":%d}}",
                 id, note, 100 + id);
        cdc_decode_input_t in = {TOPIC, 4, id, NULL, 0, v, strlen(v), 1, NULL, NULL};
        assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), CDC_OK);
        assert_int_equal(cdc_stage_add(&s, &c, false, NULL, &e), CDC_OK);
        cdc_change_clear(&c);
    }
    /* ~20 kB rows: 2 MiB / 20 kB = ~100 rows per row group, not 4096 */
    size_t done = cdc_stage_encoded(&s.tables[0], CDC_STAGE_CHANGELOG, NULL);
    assert_true(done >= 200);
    assert_true(done < 300);
    free(v);
    free(note);
    cdc_stage_free(&s);
    cdc_catalog_free(cat);
}

/* Issue 35: changes of thousands of tables, interleaved, each staged in its own table (in
 * first-change order), two 300-character names alike in their first 296 apart. */
static void test_thousands_of_tables(void **state)
{
    enum { N = 2002 };
    cdc_catalog_t *cat = cdc_catalog_new();
    char **topics = calloc(N, sizeof(*topics));
    cdc_error_t e;
    cdc_stage_t s;
    size_t len;
    (void)state;
    assert_non_null(topics);
    char *fx = fixture("capture_schema_v1.json", &len);
    const char *at = strstr(fx, "\"table\":\"orders\"");
    assert_non_null(at);
    for (size_t i = 0; i < N; i++) {
        char name[301], doc[4096];
        if (i < N - 2)
            snprintf(name, sizeof(name), "t%04zu", i);
        else {
            memset(name, 'l', 296);
            snprintf(name + 296, 5, "_%03zu", i - (N - 2));
        }
        assert_true(asprintf(&topics[i], "cdc.public.%s", name) > 0);
        snprintf(doc, sizeof(doc), "%.*s\"table\":\"%s\"%s", (int)(at - fx), fx, name,
                 at + strlen("\"table\":\"orders\""));
        assert_int_equal(cdc_catalog_register_json(cat, topics[i], 1, doc, strlen(doc), &e),
                         CDC_OK);
    }
    free(fx);
    cdc_stage_init(&s, 4, 7);
    for (int round = 0; round < 2; round++)
        for (size_t k = 0; k < N; k++) {
            size_t i = (k * 7919) % N;
            char v[256];
            cdc_change_t c;
            cdc_decode_error_t de;
            snprintf(v, sizeof(v),
                     "{\"op\":\"c\",\"after\":{\"id\":%zu,\"customer\":\"x\"},"
                     "\"source\":{\"lsn\":%zu}}",
                     k + (size_t)round * N, k + (size_t)round * N + 1);
            cdc_decode_input_t in = {topics[i], 4, (int64_t)k, NULL, 0, v, strlen(v), 1};
            assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), CDC_OK);
            assert_int_equal(cdc_stage_add(&s, &c, false, NULL, &e), CDC_OK);
            cdc_change_clear(&c);
        }
    assert_int_equal(s.ntables, N);
    for (size_t k = 0; k < N; k++) {
        const cdc_stage_table_t *t = &s.tables[k];
        const cdc_source_schema_t *want = cdc_catalog_latest(cat, topics[(k * 7919) % N]);
        assert_string_equal(t->table, want->table);
        assert_int_equal(t->nchangelog, 2);
    }
    cdc_stage_free(&s);
    for (size_t i = 0; i < N; i++)
        free(topics[i]);
    free(topics);
    cdc_catalog_free(cat);
}

/* A type change Iceberg cannot promote (amount numeric(10,2) -> numeric(14,4)): the
 * files of the new version name the new field after the source column and the earlier
 * one amount__v1 (its field id kept, so older files read under it); the catalog names the
 * retired field by its source column, so a masking rule on amount covers both. */
static void test_versioned_column_names(void **state)
{
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_schema_doc_t d1, d2;
    cdc_error_t e;
    size_t len;
    char *j1, *j2;
    (void)state;
    char *fx = fixture("capture_schema_v1.json", &len);
    assert_int_equal(cdc_schema_doc_decode(fx, len, &d1, &e), CDC_OK);
    free(fx);
    for (size_t i = 0; i < d1.ncols; i++)
        d1.cols[i].attnum = (int32_t)i + 1;
    assert_int_equal(cdc_schema_doc_assign_ids(NULL, &d1, &e), CDC_OK);
    assert_int_equal(cdc_schema_doc_copy(&d2, &d1), CDC_OK);
    d2.version = 2;
    d2.cols[2].precision = 14;
    d2.cols[2].scale = 4;
    d2.cols[2].typmod = ((14 << 16) | 4) + 4; /* PostgreSQL's numeric(14,4) */
    assert_int_equal(cdc_schema_doc_assign_ids(&d1, &d2, &e), CDC_OK);
    assert_int_equal(cdc_schema_doc_encode(&d1, &j1, &e), CDC_OK);
    assert_int_equal(cdc_schema_doc_encode(&d2, &j2, &e), CDC_OK);
    assert_int_equal(cdc_catalog_register_json(cat, d1.topic, 1, j1, strlen(j1), &e), CDC_OK);
    assert_int_equal(cdc_catalog_register_json(cat, d2.topic, 2, j2, strlen(j2), &e), CDC_OK);

    const cdc_source_schema_t *s = cdc_catalog_get(cat, d2.topic, 2);
    assert_non_null(s);
    assert_int_equal(s->nretired, 1);
    assert_string_equal(s->retired[0].name, "amount");
    assert_string_equal(cdc_column_field_name(&s->retired[0]), "amount__v1");
    for (int kind = 0; kind < 2; kind++) {
        cdc_ice_schema_t ice;
        assert_int_equal(
            cdc_stage_ice_schema(s, kind ? CDC_STAGE_CHANGELOG : CDC_STAGE_MIRROR_DATA, &ice, &e),
            CDC_OK);
        int cur = cdc_ice_schema_find(&ice, 6), old = cdc_ice_schema_find(&ice, 3);
        assert_true(cur >= 0 && old >= 0);
        assert_string_equal(ice.fields[cur].name, "amount");
        assert_int_equal(ice.fields[cur].scale, 4);
        assert_string_equal(ice.fields[old].name, "amount__v1");
        assert_int_equal(ice.fields[old].scale, 2);
        cdc_schema_ice_free(&ice);
    }
    free(j1);
    free(j2);
    cdc_schema_doc_free(&d1);
    cdc_schema_doc_free(&d2);
    cdc_catalog_free(cat);
}

/* The column of field id in a file read back, or -1. */
static int pq_column(const cdc_pq_reader_t *r, int32_t id)
{
    const cdc_ice_schema_t *fs = cdc_pq_reader_schema(r);
    for (size_t i = 0; i < fs->nfields; i++)
        if (fs->fields[i].id == id)
            return (int)i;
    return -1;
}

/*
 * Values no Iceberg type holds (docs/worker.md): numeric NaN and +-Infinity are null in
 * their decimal column and named in `_cdc_special` of the mirror and the changelog row;
 * timestamp infinities are the largest value and its negation.
 */
static void test_special_values(void **state)
{
    (void)state;
    cdc_catalog_t *cat = orders_catalog();
    cdc_error_t e;
    cdc_stage_t s;
    const char *vals[][2] = {{"\"NaN\"", "\"infinity\""},
                             {"\"-Infinity\"", "\"-infinity\""},
                             {"\"Infinity\"", "null"},
                             {"\"1.50\"", "0"}};
    cdc_stage_init(&s, 0, 3);
    for (int i = 0; i < 4; i++) {
        char v[512];
        cdc_change_t c;
        cdc_decode_error_t de;
        snprintf(v, sizeof(v),
                 "{\"op\":\"c\",\"after\":{\"id\":%d,\"amount\":%s,\"created\":%s},\"source\":{"
                 "\"lsn\":%d}}",
                 i + 1, vals[i][0], vals[i][1], 10 + i);
        cdc_decode_input_t in = {TOPIC, 0, i, NULL, 0, v, strlen(v), 1};
        assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), CDC_OK);
        assert_int_equal(c.nulled, 0);
        assert_int_equal(cdc_stage_add(&s, &c, false, NULL, &e), CDC_OK);
        cdc_change_clear(&c);
    }
    wh_t wh = {{0}, NULL};
    wh_open(&wh, "special");
    cdc_stage_write_options_t wo = {.warehouse = wh.dir, .job = "j1"};
    cdc_stage_file_t *files;
    size_t nfiles;
    assert_int_equal(cdc_stage_write(&s, wh.storage, &wo, &files, &nfiles, &e), CDC_OK);
    assert_int_equal(nfiles, 2); /* mirror data, changelog: no key was live before */
    static const char *const want[] = {"{\"amount\":\"NaN\"}", "{\"amount\":\"-Infinity\"}",
                                       "{\"amount\":\"Infinity\"}", NULL};
    static const int64_t want_ts[] = {INT64_MAX, -INT64_MAX, 0, 0};
    for (size_t f = 0; f < nfiles; f++) {
        uint8_t *data;
        size_t len;
        cdc_pq_reader_t *r;
        const cdc_ice_value_t *ids, *amount, *special, *created;
        assert_non_null(strstr(files[f].schema_json, "\"_cdc_special\""));
        assert_int_equal(cdc_storage_get(wh.storage, files[f].df.path, &data, &len, &e), CDC_OK);
        assert_int_equal(cdc_pq_reader_open(data, len, &r, &e), CDC_OK);
        assert_int_equal(cdc_pq_reader_rows(r), 4);
        assert_int_equal(cdc_pq_reader_column(r, (size_t)pq_column(r, 1), &ids, &e), CDC_OK);
        assert_int_equal(cdc_pq_reader_column(r, (size_t)pq_column(r, 3), &amount, &e), CDC_OK);
        assert_int_equal(cdc_pq_reader_column(r, (size_t)pq_column(r, 4), &created, &e), CDC_OK);
        assert_true(pq_column(r, 100008) >= 0);
        assert_int_equal(cdc_pq_reader_column(r, (size_t)pq_column(r, 100008), &special, &e),
                         CDC_OK);
        for (int row = 0; row < 4; row++) {
            int id = (int)ids[row].v.i64;
            assert_true(id >= 1 && id <= 4);
            assert_int_equal(amount[row].is_null, id != 4);
            if (id == 4)
                assert_true(amount[row].v.dec == 150);
            if (want[id - 1] == NULL) {
                assert_true(special[row].is_null);
            } else {
                assert_false(special[row].is_null);
                assert_int_equal(special[row].v.bytes.len, strlen(want[id - 1]));
                assert_memory_equal(special[row].v.bytes.ptr, want[id - 1], strlen(want[id - 1]));
            }
            assert_int_equal(created[row].is_null, id == 3);
            if (id != 3)
                assert_true(created[row].v.i64 == want_ts[id - 1]);
        }
        cdc_pq_reader_free(r);
        free(data);
    }
    cdc_stage_files_free(files, nfiles);
    wh_close(&wh);
    cdc_stage_free(&s);
    cdc_catalog_free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ahead_wide_rows),
        cmocka_unit_test(test_ahead_write_failure_and_retry),
        cmocka_unit_test(test_ahead_matches_whole),
        cmocka_unit_test(test_ahead_changed_entry_and_truncate),
        cmocka_unit_test(test_floor_and_changelog_only),
        cmocka_unit_test(test_ahead_schema_change),
        cmocka_unit_test(test_ahead_reset_and_codec),
        cmocka_unit_test(test_collapse),
        cmocka_unit_test(test_partitioned),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_schema_marker),
        cmocka_unit_test(test_thousands_of_tables),
        cmocka_unit_test(test_versioned_column_names),
        cmocka_unit_test(test_special_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
