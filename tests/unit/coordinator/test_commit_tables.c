/*
 * Unit tests for coordinator/commit.c with many tables on a local warehouse: a job of
 * thousands of source tables commits to twice as many Iceberg tables, and the committer
 * keeps every one of them (the tables maintained, their layouts, their statistics, the
 * loaded tables reused by the next commit). 300 tables here, past the 256 it once held;
 * the last one declares a partition spec, applied like the first one's would be.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "common/iceberg/storage.h"
#include "common/iceberg/table.h"
#include "coordinator/commit.h"

#define NTABLES 300
#define SCHEMA_JSON                                                                                \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\",\"required\":"     \
    "true,\"type\":\"long\"}],\"identifier-field-ids\":[1]}"

static void table_name(char *buf, size_t size, int i)
{
    snprintf(buf, size, "ns.t%04d", i);
}

/* Epoch's record: the schema of every table and one data file each. */
static cdc_checkpoint_t *record(const char *wh, uint64_t epoch)
{
    cdc_checkpoint_t *c = cdc_checkpoint_new("job", epoch, 1, 1);
    assert_non_null(c);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.ns", (int64_t)epoch), CDC_OK);
    for (int i = 0; i < NTABLES; i++) {
        char table[32], path[512];
        cdc_staged_file_t f;
        table_name(table, sizeof(table), i);
        assert_int_equal(cdc_checkpoint_add_schema(c, table, SCHEMA_JSON, 0), CDC_OK);
        memset(&f, 0, sizeof(f));
        snprintf(path, sizeof(path), "%s/ns/t%04d/data/job-e%llu-p0-data-%d.parquet", wh, i,
                 (unsigned long long)epoch, i);
        f.table = table;
        f.file.path = path;
        f.file.content = CDC_ICE_CONTENT_DATA;
        f.file.record_count = i + 1;
        f.file.file_size_in_bytes = 100;
        assert_int_equal(cdc_checkpoint_add_file(c, &f), CDC_OK);
    }
    return c;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The committer's tables, sorted, are exactly ns.t0000..ns.t0299 at their locations. */
static void check_tables(cdc_committer_t *cm, const char *wh)
{
    char **names, **locs;
    size_t n = cdc_committer_tables(cm, &names, &locs);
    assert_int_equal(n, NTABLES);
    qsort(names, n, sizeof(char *), cmp_str);
    qsort(locs, n, sizeof(char *), cmp_str);
    for (int i = 0; i < NTABLES; i++) {
        char table[32], tab[16];
        table_name(table, sizeof(table), i);
        snprintf(tab, sizeof(tab), "t%04d", i);
        char *loc = cdc_ice_table_location(wh, "ns", tab);
        assert_string_equal(names[i], table);
        assert_string_equal(locs[i], loc);
        free(loc);
    }
    cdc_storage_list_free(names, n);
    cdc_storage_list_free(locs, n);
}

static void test_many_tables(void **state)
{
    char dir[256], wh[300], last[32];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    cdc_committer_t *cm;
    cdc_commit_result_t res;
    cdc_error_t e;
    cdc_table_layout_t *ls = NULL;
    cdc_table_stats_t *st = NULL;
    size_t n = 0;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/cdc-commit-tables-XXXXXX", tmp);
    assert_non_null(mkdtemp(dir));
    snprintf(wh, sizeof(wh), "file://%s", dir);
    table_name(last, sizeof(last), NTABLES - 1);
    cdc_committer_options_t o = {
        .warehouse = wh, .job = "job", .partition_by = "ns.t0299=bucket[4](id)"};
    assert_int_equal(cdc_committer_open(&cm, &o, &e), CDC_OK);
    cdc_committer_set_term(cm, 1);

    /* epoch 1 creates and commits to every table */
    cdc_checkpoint_t *c = record(wh, 1);
    assert_int_equal(cdc_committer_commit(cm, c, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, NTABLES);
    assert_int_equal(res.schema_changes, NTABLES);
    cdc_checkpoint_free(c);
    check_tables(cm, wh);

    /* every table's layout is recorded; the last one's declaration applied */
    assert_int_equal(cdc_committer_layouts(cm, &ls, &n), CDC_OK);
    assert_int_equal(n, NTABLES);
    for (size_t i = 0; i < n; i++) {
        assert_true(ls[i].applied);
        assert_string_equal(ls[i].error, "");
        if (strcmp(ls[i].table, last) == 0) {
            assert_non_null(ls[i].spec_json);
            assert_true(ls[i].spec_id > 0);
            assert_string_equal(ls[i].partition_by, "bucket[4](id)");
        } else {
            assert_null(ls[i].spec_json);
        }
    }
    free(ls);

    /* epoch 2 again to every table (the loaded tables are reused), each noted once */
    c = record(wh, 2);
    assert_int_equal(cdc_committer_commit(cm, c, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, NTABLES);
    assert_int_equal(res.schema_changes, 0);
    /* and once more: every table already holds it */
    assert_int_equal(cdc_committer_commit(cm, c, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 0);
    assert_int_equal(res.tables_skipped, NTABLES);
    cdc_checkpoint_free(c);
    check_tables(cm, wh);
    assert_int_equal(cdc_committer_table_stats(cm, &st, &n), CDC_OK);
    assert_int_equal(n, NTABLES);
    bool seen[NTABLES] = {false};
    for (size_t i = 0; i < n; i++) {
        int k = atoi(st[i].table + strlen("ns.t"));
        assert_true(k >= 0 && k < NTABLES);
        assert_false(seen[k]);
        seen[k] = true;
        assert_int_equal(st[i].epoch, 2);
        assert_int_equal(st[i].records, 2 * (k + 1));
        assert_int_equal(st[i].snapshots, 2);
        assert_int_equal(st[i].committed_bytes, 200);
    }
    free(st);

    /* the maintenance thread's table locks, for every table: 32 held at once, so that two
     * tables sharing a lock would deadlock here (ThreadSanitizer's deadlock detector
     * allows a thread 64 held locks) */
    char **names, **locs;
    n = cdc_committer_tables(cm, &names, &locs);
    for (size_t from = 0; from < n; from += 32) {
        size_t to = from + 32 < n ? from + 32 : n;
        for (size_t i = from; i < to; i++)
            cdc_committer_table_lock(cm, locs[i]);
        for (size_t i = from; i < to; i++)
            cdc_committer_table_unlock(cm, locs[i]);
    }
    cdc_storage_list_free(names, n);
    cdc_storage_list_free(locs, n);
    cdc_committer_close(cm);

    /* a new leader's committer finds every table of the job in the warehouse */
    assert_int_equal(cdc_committer_open(&cm, &o, &e), CDC_OK);
    size_t found = 0;
    assert_int_equal(cdc_committer_discover(cm, &found, &e), CDC_OK);
    assert_int_equal(found, NTABLES);
    check_tables(cm, wh);
    assert_int_equal(cdc_committer_discover(cm, &found, &e), CDC_OK);
    assert_int_equal(found, 0);
    cdc_committer_close(cm);

    char cmd[320];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_many_tables)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
