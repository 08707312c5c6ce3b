/*
 * Unit tests for the TRUNCATE part of coordinator/commit.c on a local warehouse: the slot
 * of a staged file comes from its name, a checkpoint record with truncates removes the
 * live mirror files of exactly those slots in the snapshot that adds the epoch's files,
 * a truncate of a table nobody wrote is a no-op, and committing the record again is
 * skipped (idempotent). Data files are descriptors only (the commit does not read them).
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

#define SCHEMA_JSON                                                                                \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\",\"required\":"     \
    "true,"                                                                                        \
    "\"type\":\"long\"}],\"identifier-field-ids\":[1]}"

static void test_file_partition(void **state)
{
    (void)state;
    assert_int_equal(
        cdc_committer_file_partition("file:///w/ns/t/data/cdc-e12-p7-data-1a2b.parquet", "cdc"), 7);
    assert_int_equal(
        cdc_committer_file_partition("s3://b/ns/t/data/cdc-e1-p11-eqdel-x.parquet", "cdc"), 11);
    /* another job, a job that is a prefix of ours, malformed names */
    assert_int_equal(cdc_committer_file_partition("/w/ns/t/data/other-e1-p3-data-x.parquet", "cdc"),
                     -1);
    assert_int_equal(cdc_committer_file_partition("/w/ns/t/data/cdc-x-e1-p3-data-x.parquet", "cdc"),
                     -1);
    assert_int_equal(cdc_committer_file_partition("/w/ns/t/data/cdc-e1-p12-data-x.parquet", "cdc"),
                     -1);
    assert_int_equal(cdc_committer_file_partition("/w/ns/t/data/cdc-e-p1-data-x.parquet", "cdc"),
                     -1);
    assert_int_equal(cdc_committer_file_partition("/w/ns/t/data/cdc-e1-p1.parquet", "cdc"), -1);
    /* a job name with dashes */
    assert_int_equal(
        cdc_committer_file_partition("/w/ns/t/data/my-job-e3-p0-cl-x.parquet", "my-job"), 0);
}

static void add_file(cdc_checkpoint_t *c, const char *wh, uint64_t epoch, uint32_t p,
                     cdc_ice_content_t content, int64_t rows)
{
    static int32_t eq[] = {1};
    cdc_staged_file_t f;
    char path[512];
    memset(&f, 0, sizeof(f));
    snprintf(path, sizeof(path), "%s/ns/t/data/job-e%llu-p%u-%s-%d.parquet", wh,
             (unsigned long long)epoch, p, content == CDC_ICE_CONTENT_DATA ? "data" : "eqdel",
             rand());
    f.table = "ns.t";
    f.partition = p;
    f.file.path = path;
    f.file.content = content;
    f.file.record_count = rows;
    f.file.file_size_in_bytes = 100;
    if (content == CDC_ICE_CONTENT_EQUALITY_DELETES) {
        f.file.equality_ids = eq;
        f.file.nequality_ids = 1;
    }
    assert_int_equal(cdc_checkpoint_add_file(c, &f), CDC_OK);
}

static cdc_checkpoint_t *record(uint64_t epoch)
{
    cdc_checkpoint_t *c = cdc_checkpoint_new("job", epoch, 1, 1);
    assert_non_null(c);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.ns.t", (int64_t)epoch), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(c, "ns.t", SCHEMA_JSON, 0), CDC_OK);
    return c;
}

/* Live files per slot of the table. */
static void live_per_slot(cdc_storage_t *st, const char *loc, int counts[CDC_PARTITIONS],
                          int64_t *records)
{
    cdc_ice_table_t *t;
    cdc_ice_live_file_t *lf;
    size_t n;
    cdc_error_t e;
    memset(counts, 0, CDC_PARTITIONS * sizeof(int));
    *records = 0;
    assert_int_equal(cdc_ice_table_load(st, loc, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &n, &e), CDC_OK);
    for (size_t i = 0; i < n; i++) {
        int p = cdc_committer_file_partition(lf[i].file.path, "job");
        assert_true(p >= 0);
        counts[p]++;
        if (lf[i].file.content == CDC_ICE_CONTENT_DATA)
            *records += lf[i].file.record_count;
    }
    cdc_ice_live_files_free(lf, n);
    cdc_ice_table_close(t);
}

static void test_truncate_commit(void **state)
{
    char dir[256], wh[300];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    cdc_committer_t *cm;
    cdc_commit_result_t res;
    cdc_error_t e;
    cdc_storage_t *st;
    int counts[CDC_PARTITIONS];
    int64_t records;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/cdc-commit-trunc-XXXXXX", tmp);
    assert_non_null(mkdtemp(dir));
    snprintf(wh, sizeof(wh), "file://%s", dir);
    cdc_committer_options_t o = {.warehouse = wh, .job = "job"};
    assert_int_equal(cdc_committer_open(&cm, &o, &e), CDC_OK);
    cdc_committer_set_term(cm, 1);
    assert_int_equal(cdc_storage_open(wh, NULL, &st, &e), CDC_OK);
    char *loc = cdc_ice_table_location(wh, "ns", "t");

    /* a truncate of a table that does not exist yet: nothing to do */
    cdc_checkpoint_t *c = cdc_checkpoint_new("job", 1, 1, 1);
    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.t", 0), CDC_OK);
    assert_int_equal(cdc_committer_commit(cm, c, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 0);
    cdc_checkpoint_free(c);

    /* epochs 2 and 3: every slot writes data, slot 0 and 1 also deletes */
    for (uint64_t ep = 2; ep <= 3; ep++) {
        c = record(ep);
        for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
            add_file(c, wh, ep, p, CDC_ICE_CONTENT_DATA, 10);
        add_file(c, wh, ep, 0, CDC_ICE_CONTENT_EQUALITY_DELETES, 1);
        add_file(c, wh, ep, 1, CDC_ICE_CONTENT_EQUALITY_DELETES, 1);
        assert_int_equal(cdc_committer_commit(cm, c, &res, &e), CDC_OK);
        assert_int_equal(res.tables_committed, 1);
        cdc_checkpoint_free(c);
    }
    live_per_slot(st, loc, counts, &records);
    assert_int_equal(counts[0], 4);
    assert_int_equal(counts[5], 2);
    assert_int_equal(records, 240);

    /* epoch 4: slots 0 and 5 truncated; slot 0 writes post-truncate rows, slot 7 too */
    c = record(4);
    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.t", 0), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.t", 5), CDC_OK);
    add_file(c, wh, 4, 0, CDC_ICE_CONTENT_DATA, 3);
    add_file(c, wh, 4, 7, CDC_ICE_CONTENT_DATA, 4);
    assert_int_equal(cdc_committer_commit(cm, c, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 1);
    live_per_slot(st, loc, counts, &records);
    assert_int_equal(counts[0], 1); /* only the post-truncate file */
    assert_int_equal(counts[5], 0);
    assert_int_equal(counts[1], 4);
    assert_int_equal(counts[7], 3);
    assert_int_equal(records, 240 - 40 + 3 + 4);
    {
        cdc_ice_table_t *t;
        assert_int_equal(cdc_ice_table_load(st, loc, &t, &e), CDC_OK);
        assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "operation"), "overwrite");
        assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "deleted-data-files"), "4");
        assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "removed-delete-files"), "2");
        assert_string_equal(cdc_ice_table_snapshot_property(t, -1, CDC_ICE_SUMMARY_CHECKPOINT),
                            "4");
        cdc_ice_table_close(t);
    }
    /* the same record again (a new leader re-commits latest): skipped */
    assert_int_equal(cdc_committer_commit(cm, c, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 0);
    assert_int_equal(res.tables_skipped, 1);
    cdc_checkpoint_free(c);

    /* epoch 5: a truncate without any new file still commits (operation "delete") */
    c = cdc_checkpoint_new("job", 5, 1, 1);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.ns.t", 5), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.t", 1), CDC_OK);
    assert_int_equal(cdc_committer_commit(cm, c, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 1);
    live_per_slot(st, loc, counts, &records);
    assert_int_equal(counts[1], 0);
    assert_int_equal(counts[0], 1);
    {
        cdc_ice_table_t *t;
        assert_int_equal(cdc_ice_table_load(st, loc, &t, &e), CDC_OK);
        assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "operation"), "delete");
        assert_string_equal(cdc_ice_table_snapshot_property(t, -1, CDC_ICE_SUMMARY_CHECKPOINT),
                            "5");
        cdc_ice_table_close(t);
    }
    cdc_checkpoint_free(c);

    free(loc);
    cdc_storage_close(st);
    cdc_committer_close(cm);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_partition),
        cmocka_unit_test(test_truncate_commit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
