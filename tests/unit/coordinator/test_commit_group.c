/*
 * Unit tests for the group commit of coordinator/commit.c (docs/iceberg.md, "Group
 * commits") on a local warehouse: several recorded epochs committed to a table as one
 * snapshot whose added files carry the data sequence number of their epoch's place, so
 * that a later epoch's equality deletes apply to an earlier epoch's rows exactly as from
 * snapshots of their own. A record after the first with a truncate, or with a schema
 * update the first does not carry, starts another snapshot; epochs a table already holds are left
 * out; a group committed again is skipped. Data files are descriptors only (the commit does not
 * read them).
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
    "true,\"type\":\"long\"}],\"identifier-field-ids\":[1]}"
#define SCHEMA2_JSON                                                                               \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\",\"required\":"     \
    "true,\"type\":\"long\"},{\"id\":2,\"name\":\"v\",\"required\":false,\"type\":\"string\"}],"   \
    "\"identifier-field-ids\":[1]}"

typedef struct fixture {
    char dir[256], wh[300];
    cdc_committer_t *cm;
    cdc_storage_t *st;
    char *loc;
} fixture_t;

static void add_file(cdc_checkpoint_t *c, const char *wh, char *table, uint64_t epoch,
                     cdc_ice_content_t content)
{
    static int32_t eq[] = {1};
    cdc_staged_file_t f;
    char path[512];
    memset(&f, 0, sizeof(f));
    snprintf(path, sizeof(path), "%s/ns/%s/data/job-e%llu-p0-%s-x.parquet", wh,
             strchr(table, '.') + 1, (unsigned long long)epoch,
             content == CDC_ICE_CONTENT_DATA ? "data" : "eqdel");
    f.table = table;
    f.file.path = path;
    f.file.content = content;
    f.file.record_count = 1;
    f.file.file_size_in_bytes = 100;
    if (content == CDC_ICE_CONTENT_EQUALITY_DELETES) {
        f.file.equality_ids = eq;
        f.file.nequality_ids = 1;
    }
    assert_int_equal(cdc_checkpoint_add_file(c, &f), CDC_OK);
}

/* Epoch's record for ns.t: a data file and an equality-delete file, and the schema
 * when schema is not NULL. */
static cdc_checkpoint_t *record(const fixture_t *fx, uint64_t epoch, const char *schema)
{
    cdc_checkpoint_t *c = cdc_checkpoint_new("job", epoch, 1, 1);
    assert_non_null(c);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.ns.t", (int64_t)epoch * 10), CDC_OK);
    if (schema != NULL)
        assert_int_equal(cdc_checkpoint_add_schema(c, "ns.t", schema, 0), CDC_OK);
    add_file(c, fx->wh, (char *)"ns.t", epoch, CDC_ICE_CONTENT_DATA);
    add_file(c, fx->wh, (char *)"ns.t", epoch, CDC_ICE_CONTENT_EQUALITY_DELETES);
    return c;
}

static int setup(void **state)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    fixture_t *fx = calloc(1, sizeof(*fx));
    cdc_error_t e;
    assert_non_null(fx);
    snprintf(fx->dir, sizeof(fx->dir), "%s/cdc-commit-group-XXXXXX", tmp);
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->wh, sizeof(fx->wh), "file://%s", fx->dir);
    cdc_committer_options_t o = {.warehouse = fx->wh, .job = "job"};
    assert_int_equal(cdc_committer_open(&fx->cm, &o, &e), CDC_OK);
    cdc_committer_set_term(fx->cm, 1);
    assert_int_equal(cdc_storage_open(fx->wh, NULL, &fx->st, &e), CDC_OK);
    fx->loc = cdc_ice_table_location(fx->wh, "ns", "t");
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    char cmd[320];
    cdc_committer_close(fx->cm);
    cdc_storage_close(fx->st);
    free(fx->loc);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
    free(fx);
    return 0;
}

/* The table's state: snapshots, last sequence number, the current snapshot's checkpoint
 * id, and the data sequence number of epoch's data and delete files (-1: not live). */
typedef struct table_view {
    size_t snapshots;
    int64_t last_seq, checkpoint;
    char offsets[256];
} table_view_t;

static table_view_t view(const fixture_t *fx, uint64_t epoch, int64_t *data_seq, int64_t *del_seq)
{
    cdc_ice_table_t *t;
    cdc_ice_live_file_t *lf;
    size_t n;
    cdc_error_t e;
    table_view_t v;
    char want[64];
    assert_int_equal(cdc_ice_table_load(fx->st, fx->loc, &t, &e), CDC_OK);
    v.snapshots = cdc_ice_table_metadata(t)->nsnapshots;
    v.last_seq = cdc_ice_table_metadata(t)->last_sequence_number;
    v.checkpoint = cdc_ice_table_last_checkpoint(t, "job");
    const char *off = cdc_ice_table_snapshot_property(t, -1, "cdc.offsets");
    snprintf(v.offsets, sizeof(v.offsets), "%s", off ? off : "");
    *data_seq = *del_seq = -1;
    snprintf(want, sizeof(want), "/job-e%llu-p0-", (unsigned long long)epoch);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &n, &e), CDC_OK);
    for (size_t i = 0; i < n; i++) {
        if (strstr(lf[i].file.path, want) == NULL)
            continue;
        if (lf[i].file.content == CDC_ICE_CONTENT_DATA)
            *data_seq = lf[i].sequence_number;
        else
            *del_seq = lf[i].sequence_number;
    }
    cdc_ice_live_files_free(lf, n);
    cdc_ice_table_close(t);
    return v;
}

static void test_group_sequence_numbers(void **state)
{
    fixture_t *fx = *state;
    cdc_commit_result_t res;
    cdc_error_t e;
    int64_t ds, xs;
    table_view_t v;

    /* epoch 1 alone creates the table: sequence number 1 */
    cdc_checkpoint_t *r1 = record(fx, 1, SCHEMA_JSON);
    assert_int_equal(cdc_committer_commit(fx->cm, r1, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 1);
    assert_int_equal(res.epochs_grouped, 0);
    v = view(fx, 1, &ds, &xs);
    assert_int_equal(v.snapshots, 1);
    assert_int_equal(v.last_seq, 1);
    assert_int_equal(ds, 1);

    /* epochs 2, 3, 4 as one group: one snapshot, sequence numbers 2, 3, 4 */
    cdc_checkpoint_t *g[3] = {record(fx, 2, NULL), record(fx, 3, NULL), record(fx, 4, NULL)};
    assert_int_equal(cdc_committer_commit_group(fx->cm, g, 3, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 1);
    assert_int_equal(res.epochs_grouped, 2);
    for (uint64_t ep = 2; ep <= 4; ep++) {
        v = view(fx, ep, &ds, &xs);
        /* each epoch's deletes apply to the epochs before it, not to its own rows */
        assert_int_equal(ds, (int64_t)ep);
        assert_int_equal(xs, (int64_t)ep);
    }
    assert_int_equal(v.snapshots, 2);
    assert_int_equal(v.last_seq, 4);
    assert_int_equal(v.checkpoint, 4);
    assert_non_null(strstr(v.offsets, "40")); /* the last record's offsets */
    v = view(fx, 1, &ds, &xs);
    assert_int_equal(ds, 1);

    /* the same group again: every epoch is held, nothing is written */
    assert_int_equal(cdc_committer_commit_group(fx->cm, g, 3, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 0);
    assert_int_equal(res.tables_skipped, 1);
    assert_int_equal(view(fx, 4, &ds, &xs).snapshots, 2);
    for (int i = 0; i < 3; i++)
        cdc_checkpoint_free(g[i]);

    /* epoch 5 committed alone (a round that failed after this table), then 5..7: only 6
     * and 7 are added, as parts 1 and 2 of the snapshot */
    cdc_checkpoint_t *h[3] = {record(fx, 5, NULL), record(fx, 6, NULL), record(fx, 7, NULL)};
    assert_int_equal(cdc_committer_commit(fx->cm, h[0], &res, &e), CDC_OK);
    assert_int_equal(cdc_committer_commit_group(fx->cm, h, 3, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 1);
    assert_int_equal(res.epochs_grouped, 1);
    v = view(fx, 6, &ds, &xs);
    assert_int_equal(ds, 6);
    assert_int_equal(xs, 6);
    v = view(fx, 7, &ds, &xs);
    assert_int_equal(ds, 7);
    assert_int_equal(v.last_seq, 7);
    assert_int_equal(v.snapshots, 4);
    assert_int_equal(v.checkpoint, 7);
    for (int i = 0; i < 3; i++)
        cdc_checkpoint_free(h[i]);

    /* a schema update in the group's second record starts a second snapshot: the new
     * column is there before the files written with it */
    cdc_checkpoint_t *k[3] = {record(fx, 8, NULL), record(fx, 9, SCHEMA2_JSON),
                              record(fx, 10, NULL)};
    assert_int_equal(cdc_committer_commit_group(fx->cm, k, 3, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 2);
    assert_int_equal(res.epochs_grouped, 1);
    assert_true(res.schema_changes >= 1);
    v = view(fx, 8, &ds, &xs);
    assert_int_equal(ds, 8);
    v = view(fx, 9, &ds, &xs);
    assert_int_equal(ds, 9);
    v = view(fx, 10, &ds, &xs);
    assert_int_equal(ds, 10);
    assert_int_equal(v.last_seq, 10);
    assert_int_equal(v.snapshots, 6);
    for (int i = 0; i < 3; i++)
        cdc_checkpoint_free(k[i]);
    cdc_checkpoint_free(r1);
}

/* Tables a group touches in different records: each gets one snapshot with the parts it
 * has; a record that touches only one table leaves the other out. */
static void test_group_tables(void **state)
{
    fixture_t *fx = *state;
    cdc_commit_result_t res;
    cdc_error_t e;
    cdc_checkpoint_t *g[3];
    for (uint64_t ep = 1; ep <= 3; ep++) {
        g[ep - 1] = cdc_checkpoint_new("job", ep, 1, 1);
        assert_non_null(g[ep - 1]);
        assert_int_equal(cdc_checkpoint_add_schema(g[ep - 1], "ns.t", SCHEMA_JSON, 0), CDC_OK);
        assert_int_equal(cdc_checkpoint_add_schema(g[ep - 1], "ns.u", SCHEMA_JSON, 0), CDC_OK);
    }
    /* ns.t in epochs 1 and 3, ns.u in 2 only (schemas only in the first record count) */
    add_file(g[0], fx->wh, (char *)"ns.t", 1, CDC_ICE_CONTENT_DATA);
    add_file(g[1], fx->wh, (char *)"ns.u", 2, CDC_ICE_CONTENT_DATA);
    add_file(g[2], fx->wh, (char *)"ns.t", 3, CDC_ICE_CONTENT_DATA);
    add_file(g[2], fx->wh, (char *)"ns.t", 3, CDC_ICE_CONTENT_EQUALITY_DELETES);
    /* the same schema in every record (every owner of a slot reports it): one snapshot
     * a table, ns.t's of two parts */
    assert_int_equal(cdc_committer_commit_group(fx->cm, g, 3, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 2);
    assert_int_equal(res.epochs_grouped, 1);
    for (int i = 0; i < 3; i++)
        cdc_checkpoint_free(g[i]);

    /* without schemas: the same */
    for (uint64_t ep = 4; ep <= 6; ep++) {
        g[ep - 4] = cdc_checkpoint_new("job", ep, 1, 1);
        assert_non_null(g[ep - 4]);
    }
    add_file(g[0], fx->wh, (char *)"ns.t", 4, CDC_ICE_CONTENT_DATA);
    add_file(g[1], fx->wh, (char *)"ns.u", 5, CDC_ICE_CONTENT_DATA);
    add_file(g[2], fx->wh, (char *)"ns.t", 6, CDC_ICE_CONTENT_DATA);
    add_file(g[2], fx->wh, (char *)"ns.t", 6, CDC_ICE_CONTENT_EQUALITY_DELETES);
    assert_int_equal(cdc_committer_commit_group(fx->cm, g, 3, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 2);
    assert_int_equal(res.epochs_grouped, 1);
    int64_t ds, xs;
    table_view_t v = view(fx, 4, &ds, &xs);
    int64_t base = v.last_seq - 2; /* ns.t's last sequence number before the group */
    assert_int_equal(ds, base + 1);
    v = view(fx, 6, &ds, &xs);
    assert_int_equal(ds, base + 2);
    assert_int_equal(xs, base + 2);
    assert_int_equal(v.checkpoint, 6);
    for (int i = 0; i < 3; i++)
        cdc_checkpoint_free(g[i]);
}

/* A truncate in a later record starts its own snapshot, which removes only the files
 * before it: the group's earlier epoch is removed, its own files stay. */
static void test_group_truncate(void **state)
{
    fixture_t *fx = *state;
    cdc_commit_result_t res;
    cdc_error_t e;
    int64_t ds, xs;
    cdc_checkpoint_t *r1 = record(fx, 1, SCHEMA_JSON);
    assert_int_equal(cdc_committer_commit(fx->cm, r1, &res, &e), CDC_OK);
    cdc_checkpoint_t *g[2] = {record(fx, 2, NULL), record(fx, 3, NULL)};
    assert_int_equal(cdc_checkpoint_add_truncate(g[1], "ns.t", 0), CDC_OK);
    assert_int_equal(cdc_committer_commit_group(fx->cm, g, 2, &res, &e), CDC_OK);
    assert_int_equal(res.tables_committed, 2);
    assert_int_equal(res.epochs_grouped, 0);
    table_view_t v = view(fx, 2, &ds, &xs);
    assert_int_equal(ds, -1); /* removed by the truncate of slot 0 in epoch 3 */
    v = view(fx, 3, &ds, &xs);
    assert_int_equal(ds, 3);
    assert_int_equal(v.checkpoint, 3);
    cdc_checkpoint_free(g[0]);
    cdc_checkpoint_free(g[1]);
    cdc_checkpoint_free(r1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_group_sequence_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_truncate, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
