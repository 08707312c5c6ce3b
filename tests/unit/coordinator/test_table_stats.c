/*
 * Unit tests for coordinator/table_stats.c: what a commit left in a table (a local
 * warehouse in a temp directory): the snapshot's totals, the snapshots kept, the epoch's
 * rows and the changelog files' _source_ts span; the set keeps one entry per table, for
 * as many tables as a job has (a thousand here, past the 256 it once held).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/iceberg/byteorder.h"
#include "common/iceberg/table.h"
#include "coordinator/table_stats.h"

static cdc_ice_field_t FIELDS[] = {
    {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
    {.id = 100005, .name = "_source_ts", .type = CDC_ICE_TIMESTAMPTZ},
};
static int32_t IDS[] = {1};
static cdc_ice_schema_t SCHEMA = {
    .schema_id = 0, .fields = FIELDS, .nfields = 2, .identifier_ids = IDS, .nidentifier = 1};

/* All the set's entries (the caller frees *out); returns how many. */
static size_t copy(cdc_table_stats_set_t *set, cdc_table_stats_t **out)
{
    size_t n = 0;
    free(*out);
    *out = NULL;
    assert_int_equal(cdc_table_stats_copy(set, out, &n), CDC_OK);
    assert_non_null(*out);
    return n;
}

/* A data file of rows whose _source_ts runs from lo_ms to hi_ms (only its descriptor). */
static void data_file(cdc_ice_data_file_t *df, cdc_ice_col_stats_t *cs, const char *loc,
                      int64_t rows, int64_t lo_ms, int64_t hi_ms)
{
    memset(df, 0, sizeof(*df));
    memset(cs, 0, sizeof(*cs));
    df->content = CDC_ICE_CONTENT_DATA;
    df->path = cdc_ice_data_file_location(loc, "d");
    df->record_count = rows;
    df->file_size_in_bytes = 1000;
    cs->field_id = 100005;
    cs->has_bounds = true;
    put_le64(cs->lower, (uint64_t)(lo_ms * 1000));
    put_le64(cs->upper, (uint64_t)(hi_ms * 1000));
    cs->lower_len = cs->upper_len = 8;
    df->stats = cs;
    df->nstats = 1;
}

static void test_stats_after_commits(void **state)
{
    char dir[] = "/tmp/cdc-tstats-XXXXXX", wh[64], cmd[96];
    cdc_storage_t *st;
    cdc_ice_table_t *t;
    cdc_ice_data_file_t df[2], del;
    cdc_ice_col_stats_t cs[2];
    cdc_table_stats_set_t set;
    cdc_table_stats_t *out = NULL;
    cdc_error_t e;
    char *loc;
    (void)state;

    assert_non_null(mkdtemp(dir));
    snprintf(wh, sizeof(wh), "file://%s", dir);
    assert_int_equal(cdc_storage_open(wh, NULL, &st, &e), CDC_OK);
    loc = cdc_ice_table_location(wh, "public", "orders_changelog");
    assert_int_equal(cdc_ice_table_create(st, loc, &SCHEMA, NULL, &t, &e), CDC_OK);
    cdc_table_stats_init(&set);

    data_file(&df[0], &cs[0], loc, 10, 1700000001000, 1700000001500);
    data_file(&df[1], &cs[1], loc, 5, 1700000000800, 1700000001200);
    assert_int_equal(cdc_ice_table_append(t, df, 2, NULL, NULL, &e), CDC_OK);
    cdc_table_stats_note(&set, "public.orders_changelog", t, 7, df, 2, 300);
    assert_int_equal(copy(&set, &out), 1);
    assert_string_equal(out[0].table, "public.orders_changelog");
    assert_int_equal(out[0].epoch, 7);
    assert_int_equal(out[0].added_records, 15);
    assert_int_equal(out[0].source_min_ms, 1700000000800);
    assert_int_equal(out[0].source_max_ms, 1700000001500);
    assert_int_equal(out[0].records, 15);
    assert_int_equal(out[0].data_files, 2);
    assert_int_equal(out[0].snapshots, 1);
    assert_true(out[0].committed_at_ms > 0);
    assert_int_equal(out[0].committed_bytes, 300);

    /* an equality delete of 4 rows and 3 new ones: 14 rows, one entry still */
    memset(&del, 0, sizeof(del));
    del.content = CDC_ICE_CONTENT_EQUALITY_DELETES;
    del.path = cdc_ice_data_file_location(loc, "eq");
    del.record_count = 4;
    del.file_size_in_bytes = 100;
    del.equality_ids = IDS;
    del.nequality_ids = 1;
    free(df[0].path);
    data_file(&df[0], &cs[0], loc, 3, 1700000002000, 1700000002000);
    assert_int_equal(cdc_ice_table_row_delta(t, df, 1, &del, 1, NULL, NULL, &e), CDC_OK);
    cdc_table_stats_note(&set, "public.orders_changelog", t, 8, df, 1, 150);
    assert_int_equal(copy(&set, &out), 1);
    assert_int_equal(out[0].epoch, 8);
    assert_int_equal(out[0].added_records, 3);
    assert_int_equal(out[0].source_min_ms, 1700000002000);
    assert_int_equal(out[0].records, 18);
    assert_int_equal(out[0].equality_deletes, 4);
    assert_int_equal(cdc_table_stats_rows(&out[0]), 14);
    assert_int_equal(out[0].data_files, 3);
    assert_int_equal(out[0].delete_files, 1);
    assert_int_equal(out[0].snapshots, 2);
    assert_int_equal(out[0].committed_bytes, 450); /* summed over the epochs */

    /* another table is a second entry; a file without bounds gives no source span */
    df[0].nstats = 0;
    cdc_table_stats_note(&set, "public.orders", t, 8, df, 1, 0);
    assert_int_equal(copy(&set, &out), 2);
    assert_string_equal(out[1].table, "public.orders");
    assert_int_equal(out[1].source_min_ms, 0);
    free(out);

    cdc_table_stats_destroy(&set);
    free(df[0].path);
    free(df[1].path);
    free(del.path);
    cdc_ice_table_close(t);
    free(loc);
    cdc_storage_close(st);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A thousand tables (a job of 500 source tables) are all kept, each once, in the order
 * first noted, with their own counters; noting one again or compacting one adds none. */
static void test_thousand_tables(void **state)
{
    enum { N = 1000 };
    char dir[] = "/tmp/cdc-tstats-XXXXXX", wh[64], cmd[96], name[64];
    cdc_storage_t *st;
    cdc_ice_table_t *t;
    cdc_ice_data_file_t df;
    cdc_ice_col_stats_t cs;
    cdc_table_stats_set_t set;
    cdc_table_stats_t *out = NULL;
    cdc_error_t e;
    char *loc;
    (void)state;

    assert_non_null(mkdtemp(dir));
    snprintf(wh, sizeof(wh), "file://%s", dir);
    assert_int_equal(cdc_storage_open(wh, NULL, &st, &e), CDC_OK);
    loc = cdc_ice_table_location(wh, "public", "t");
    assert_int_equal(cdc_ice_table_create(st, loc, &SCHEMA, NULL, &t, &e), CDC_OK);
    data_file(&df, &cs, loc, 2, 1700000001000, 1700000001500);
    assert_int_equal(cdc_ice_table_append(t, &df, 1, NULL, NULL, &e), CDC_OK);
    cdc_table_stats_init(&set);

    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "public.t%04d%s", i / 2, i % 2 ? "_changelog" : "");
        cdc_table_stats_note(&set, name, t, (uint64_t)(10 + i), &df, 1, i);
    }
    /* again for one of them, and a compaction of another */
    cdc_table_stats_note(&set, "public.t0400", t, 5000, &df, 1, 7);
    cdc_table_stats_note_compaction(&set, "public.t0499_changelog", t, 123, 4);
    assert_int_equal(copy(&set, &out), N);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "public.t%04d%s", i / 2, i % 2 ? "_changelog" : "");
        assert_string_equal(out[i].table, name);
        if (i == 800) {
            assert_int_equal(out[i].epoch, 5000);
            assert_int_equal(out[i].committed_bytes, 800 + 7);
        } else {
            assert_int_equal(out[i].epoch, 10 + i);
            assert_int_equal(out[i].committed_bytes, i);
        }
        assert_int_equal(out[i].added_records, 2);
        assert_int_equal(out[i].compactions, i == N - 1 ? 1 : 0);
    }
    assert_int_equal(out[N - 1].bytes_rewritten, 123);
    assert_int_equal(out[N - 1].epoch, 10 + N - 1); /* the epoch fields stay */

    /* a table first met by a compaction is added too */
    cdc_table_stats_note_compaction(&set, "other.compacted", t, 1, 1);
    assert_int_equal(copy(&set, &out), N + 1);
    assert_string_equal(out[N].table, "other.compacted");
    assert_int_equal(out[N].compactions, 1);
    free(out);

    cdc_table_stats_destroy(&set);
    free(df.path);
    cdc_ice_table_close(t);
    free(loc);
    cdc_storage_close(st);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_stats_after_commits),
                                       cmocka_unit_test(test_thousand_tables)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
