/*
 * Unit tests of compaction (coordinator/compact.c, common/iceberg/table_rewrite.c) on a
 * local warehouse, with real Parquet files committed through the committer as the workers
 * stage them: the rewrite applies the equality deletes and keeps every live row once; an
 * update, a delete and a re-insert committed while a partition is being rewritten end as
 * committed (the rewritten files keep the data sequence number of the snapshot the
 * rewrite read); a rewrite whose inputs a TRUNCATE removed meanwhile is dropped and its
 * files deleted; the policy picks partitions by file count; a changelog is bin-packed in
 * order. The table is read back here by a merge-on-read of its own (Iceberg's rule: an
 * equality delete applies to rows of data files with a lower data sequence number).
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

#include "common/clock.h"
#include "common/iceberg/parquet.h"
#include "common/iceberg/parquet_read.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/storage.h"
#include "common/iceberg/table.h"
#include "coordinator/commit.h"
#include "coordinator/compact.h"
#include "coordinator/maintenance.h"

#define SCHEMA_JSON                                                                                \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\",\"required\":"     \
    "true,\"type\":\"long\"},{\"id\":2,\"name\":\"v\",\"required\":false,\"type\":\"string\"}],"   \
    "\"identifier-field-ids\":[1]}"
#define KEY_JSON                                                                                   \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\",\"required\":"     \
    "true,\"type\":\"long\"}],\"identifier-field-ids\":[1]}"

typedef struct fixture {
    char dir[256], wh[300];
    char *loc, *cl_loc;
    cdc_committer_t *cm;
    cdc_storage_t *st;
    uint64_t epoch;
} fixture_t;

static fixture_t fx;

static int setup(void **state)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    cdc_error_t e;
    (void)state;
    memset(&fx, 0, sizeof(fx));
    snprintf(fx.dir, sizeof(fx.dir), "%s/cdc-compact-XXXXXX", tmp);
    assert_non_null(mkdtemp(fx.dir));
    snprintf(fx.wh, sizeof(fx.wh), "file://%s", fx.dir);
    cdc_committer_options_t o = {.warehouse = fx.wh, .job = "job"};
    assert_int_equal(cdc_committer_open(&fx.cm, &o, &e), CDC_OK);
    cdc_committer_set_term(fx.cm, 1);
    assert_int_equal(cdc_storage_open(fx.wh, NULL, &fx.st, &e), CDC_OK);
    fx.loc = cdc_ice_table_location(fx.wh, "ns", "t");
    fx.cl_loc = cdc_ice_table_location(fx.wh, "ns", "t_changelog");
    fx.epoch = 1;
    return 0;
}

static int teardown(void **state)
{
    char cmd[400];
    (void)state;
    cdc_committer_close(fx.cm);
    cdc_storage_close(fx.st);
    free(fx.loc);
    free(fx.cl_loc);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", fx.dir);
    return 0;
}

/* One staged file of slot p: keys (and values, NULL = a delete file) as a worker writes. */
static void stage(cdc_checkpoint_t *c, const char *table, const char *loc, uint32_t p,
                  const int64_t *keys, const char *const *vals, size_t n)
{
    cdc_ice_schema_t schema;
    cdc_pq_writer_t *w;
    cdc_ice_data_file_t df;
    cdc_error_t e;
    uint8_t *buf;
    size_t len;
    char tag[128], *where;
    bool del = vals == NULL;

    assert_int_equal(cdc_ice_schema_from_json(del ? KEY_JSON : SCHEMA_JSON, &schema, &e), CDC_OK);
    assert_int_equal(cdc_pq_writer_open_buffer(&schema, NULL, &w, &e), CDC_OK);
    for (size_t i = 0; i < n; i++) {
        cdc_ice_value_t row[2];
        memset(row, 0, sizeof(row));
        row[0].v.i64 = keys[i];
        if (!del) {
            row[1].v.bytes.ptr = (const uint8_t *)vals[i];
            row[1].v.bytes.len = strlen(vals[i]);
        }
        assert_int_equal(cdc_pq_writer_append(w, row, &e), CDC_OK);
    }
    memset(&df, 0, sizeof(df));
    assert_int_equal(cdc_pq_writer_close(w, &df, &e), CDC_OK);
    assert_int_equal(cdc_pq_writer_take_buffer(w, &buf, &len), CDC_OK);
    cdc_pq_writer_free(w);
    snprintf(tag, sizeof(tag), "job-e%llu-p%u-%s", (unsigned long long)fx.epoch, p,
             del                           ? "eqdel"
             : strstr(table, "_changelog") ? "cl"
                                           : "data");
    assert_int_equal(cdc_ice_data_file_put(fx.st, loc, tag, buf, len, &where, &e), CDC_OK);
    free(buf);
    df.path = where;
    if (del) {
        static int32_t ids[] = {1};
        df.content = CDC_ICE_CONTENT_EQUALITY_DELETES;
        df.equality_ids = malloc(sizeof(ids));
        memcpy(df.equality_ids, ids, sizeof(ids));
        df.nequality_ids = 1;
    }
    cdc_staged_file_t sf = {.table = (char *)table, .partition = p, .file = df};
    assert_int_equal(cdc_checkpoint_add_file(c, &sf), CDC_OK);
    cdc_ice_data_file_clear(&df);
    cdc_ice_schema_free(&schema);
}

static cdc_checkpoint_t *epoch_begin(void)
{
    cdc_checkpoint_t *c = cdc_checkpoint_new("job", fx.epoch, 1, 1);
    assert_non_null(c);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.ns.t", (int64_t)fx.epoch), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(c, "ns.t", SCHEMA_JSON, 0), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(c, "ns.t_changelog", SCHEMA_JSON, 0), CDC_OK);
    return c;
}

static void epoch_commit(cdc_checkpoint_t *c)
{
    cdc_commit_result_t res;
    cdc_error_t e;
    assert_int_equal(cdc_committer_commit(fx.cm, c, &res, &e), CDC_OK);
    cdc_checkpoint_free(c);
    fx.epoch++;
}

/* An upsert epoch of slot p: delete files for `dels`, data for `keys`/`vals`. */
static void upsert(uint32_t p, const int64_t *keys, const char *const *vals, size_t n,
                   const int64_t *dels, size_t nd)
{
    cdc_checkpoint_t *c = epoch_begin();
    if (n > 0)
        stage(c, "ns.t", fx.loc, p, keys, vals, n);
    if (nd > 0)
        stage(c, "ns.t", fx.loc, p, dels, NULL, nd);
    epoch_commit(c);
}

/* ---- reading the table back: merge on read ---------------------------------------------- */

#define MAXROWS 4096
typedef struct row {
    int64_t id;
    char v[40];
} row_t;

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_row(const void *a, const void *b)
{
    const row_t *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : strcmp(x->v, y->v);
}

/* The rows of file f (values NULL for a delete file: keys only). */
static size_t read_file(const cdc_ice_data_file_t *f, row_t *out, size_t max)
{
    uint8_t *buf;
    size_t len, n;
    cdc_pq_reader_t *r;
    cdc_error_t e;
    const cdc_ice_value_t *ids, *vals = NULL;
    assert_int_equal(cdc_storage_get(fx.st, f->path, &buf, &len, &e), CDC_OK);
    assert_int_equal(cdc_pq_reader_open(buf, len, &r, &e), CDC_OK);
    n = (size_t)cdc_pq_reader_rows(r);
    assert_true(n <= max);
    assert_int_equal(cdc_pq_reader_column(r, 0, &ids, &e), CDC_OK);
    if (cdc_pq_reader_schema(r)->nfields > 1)
        assert_int_equal(cdc_pq_reader_column(r, 1, &vals, &e), CDC_OK);
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i])); /* compared with memcmp */
        out[i].id = ids[i].v.i64;
        snprintf(out[i].v, sizeof(out[i].v), "%.*s", vals ? (int)vals[i].v.bytes.len : 0,
                 vals ? (const char *)vals[i].v.bytes.ptr : "");
    }
    cdc_pq_reader_free(r);
    free(buf);
    return n;
}

/* The table's live rows, sorted; also the number of live data and delete files. */
static size_t read_table(const char *loc, row_t *rows, size_t *ndata, size_t *ndel)
{
    cdc_ice_table_t *t;
    cdc_ice_live_file_t *lf;
    size_t n, nrows = 0;
    cdc_error_t e;
    static row_t tmp[MAXROWS];
    assert_int_equal(cdc_ice_table_load(fx.st, loc, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &n, &e), CDC_OK);
    *ndata = *ndel = 0;
    for (size_t i = 0; i < n; i++) {
        if (lf[i].file.content != CDC_ICE_CONTENT_DATA) {
            (*ndel)++;
            continue;
        }
        (*ndata)++;
        size_t k = read_file(&lf[i].file, tmp, MAXROWS);
        for (size_t r = 0; r < k; r++) {
            bool deleted = false;
            for (size_t j = 0; j < n && !deleted; j++) {
                if (lf[j].file.content == CDC_ICE_CONTENT_DATA ||
                    lf[j].sequence_number <= lf[i].sequence_number)
                    continue;
                static row_t keys[MAXROWS];
                size_t nk = read_file(&lf[j].file, keys, MAXROWS);
                for (size_t q = 0; q < nk && !deleted; q++)
                    deleted = keys[q].id == tmp[r].id;
            }
            if (!deleted) {
                assert_true(nrows < MAXROWS);
                rows[nrows++] = tmp[r];
            }
        }
    }
    cdc_ice_live_files_free(lf, n);
    cdc_ice_table_close(t);
    qsort(rows, nrows, sizeof(row_t), cmp_row);
    return nrows;
}

/* ---- compaction -------------------------------------------------------------------------- */

typedef struct hook {
    void (*fn)(void);
    int calls;
} hook_t;

static bool on_progress(void *arg, int64_t bytes)
{
    hook_t *h = arg;
    (void)bytes;
    if (h->calls++ == 0 && h->fn != NULL)
        h->fn(); /* once, while the rewrite runs */
    return true;
}

static cdc_compact_policy_t policy = {.min_files = 1000, .target_bytes = 64 << 20};

static cdc_err_t compact(const char *loc, bool force, void (*during)(void),
                         cdc_compact_result_t *res)
{
    cdc_ice_table_t *t;
    cdc_error_t e;
    hook_t h = {during, 0};
    cdc_compact_ctx_t cx = {.committer = fx.cm,
                            .job = "job",
                            .term = 1,
                            .policy = &policy,
                            .force = force,
                            .progress = on_progress,
                            .progress_arg = &h,
                            .nice =
                                5}; /* the rewrites on their own thread, as the leader runs them */
    memset(res, 0, sizeof(*res));
    assert_int_equal(cdc_ice_table_load(fx.st, loc, &t, &e), CDC_OK);
    cdc_err_t rc = cdc_compact_table(&cx, t, res, &e);
    if (rc != CDC_OK)
        fprintf(stderr, "compaction: %s\n", e.msg);
    cdc_ice_table_close(t);
    return rc;
}

/* 40 keys in slot 0 and 40 in slot 1 over three epochs, then an update, a delete, a
 * re-insert of the deleted key and a delete in slot 1. */
static void history(void)
{
    int64_t k[40];
    const char *v[40];
    char text[40][16];
    for (uint32_t p = 0; p < 2; p++)
        for (int part = 0; part < 2; part++) {
            for (int i = 0; i < 20; i++) {
                k[i] = p * 1000 + part * 20 + i;
                snprintf(text[i], sizeof(text[i]), "a%lld", (long long)k[i]);
                v[i] = text[i];
            }
            upsert(p, k, v, 20, NULL, 0);
        }
    int64_t up[] = {5}, gone[] = {7}, again[] = {7}, gone1[] = {1003};
    const char *upv[] = {"b5"}, *againv[] = {"c7"};
    upsert(0, up, upv, 1, up, 1); /* update: delete + new image */
    upsert(0, NULL, NULL, 0, gone, 1);
    upsert(0, again, againv, 1, NULL, 0); /* re-insert of a deleted key: no delete */
    upsert(1, NULL, NULL, 0, gone1, 1);
}

static void test_compact_keeps_rows(void **state)
{
    static row_t before[MAXROWS], after[MAXROWS];
    size_t nd, ndel, n0, n1;
    cdc_compact_result_t res;
    cdc_error_t e;
    (void)state;

    history();
    n0 = read_table(fx.loc, before, &nd, &ndel);
    assert_int_equal(n0, 79); /* 80 keys, one deleted for good */
    assert_int_equal(nd, 6);
    assert_int_equal(ndel, 3);
    /* the policy (min 1000 files) leaves the table alone; forced, both slots go */
    assert_int_equal(compact(fx.loc, false, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 0);
    assert_int_equal(compact(fx.loc, true, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 2);
    assert_int_equal(res.dropped, 0);
    assert_int_equal(res.files_removed, 9);
    assert_int_equal(res.files_added, 2);
    assert_int_equal(res.rows_deleted, 3); /* old 5, old 7, old 1003 */
    n1 = read_table(fx.loc, after, &nd, &ndel);
    assert_int_equal(n1, n0);
    assert_memory_equal(before, after, n0 * sizeof(row_t));
    assert_int_equal(nd, 2);
    assert_int_equal(ndel, 0);

    /* the snapshot is a replace that keeps the epoch's summary */
    cdc_ice_table_t *t;
    assert_int_equal(cdc_ice_table_load(fx.st, fx.loc, &t, &e), CDC_OK);
    assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "operation"), "replace");
    assert_int_equal(cdc_ice_table_last_checkpoint(t, "job"), (int64_t)fx.epoch - 1);
    assert_non_null(cdc_ice_table_snapshot_property(t, -1, CDC_ICE_SUMMARY_OFFSETS));
    assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "total-delete-files"), "0");
    cdc_ice_table_close(t);

    /* again: nothing left to gain */
    assert_int_equal(compact(fx.loc, true, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 0);
}

/* Committed while slot 0 is being rewritten: an update of key 1 and of key 7 (re-inserted
 * before), a delete of key 2, then a new key and a re-insert of key 2. */
static void concurrent_epoch(void)
{
    int64_t up[] = {1, 7}, dels[] = {1, 2, 7}, fresh[] = {99, 2};
    const char *upv[] = {"new1", "new7"}, *freshv[] = {"f99", "back2"};
    upsert(0, up, upv, 2, dels, 3);
    upsert(0, fresh, freshv, 2, NULL, 0);
}

static void test_compact_concurrent_changes(void **state)
{
    static row_t rows[MAXROWS];
    size_t nd, ndel, n;
    cdc_compact_result_t res;
    (void)state;

    history();
    assert_int_equal(compact(fx.loc, true, concurrent_epoch, &res), CDC_OK);
    assert_int_equal(res.partitions, 2);
    n = read_table(fx.loc, rows, &nd, &ndel);
    for (size_t i = 0; getenv("TEST_DEBUG") && i < n; i++)
        fprintf(stderr, "row %lld %s\n", (long long)rows[i].id, rows[i].v);
    assert_int_equal(n, 80); /* 79 + key 99 */
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(i == 0 || rows[i].id != rows[i - 1].id); /* every key once */
        const char *want = rows[i].id == 1    ? "new1"
                           : rows[i].id == 2  ? "back2"
                           : rows[i].id == 7  ? "new7"
                           : rows[i].id == 5  ? "b5"
                           : rows[i].id == 99 ? "f99"
                                              : NULL;
        if (want != NULL) {
            assert_string_equal(rows[i].v, want);
            seen++;
        }
    }
    assert_int_equal(seen, 5);
    /* the concurrent epoch's delete file stays: it applies to the rewritten rows */
    assert_int_equal(ndel, 1);

    /* the next compaction resolves it too */
    assert_int_equal(compact(fx.loc, true, NULL, &res), CDC_OK);
    static row_t again[MAXROWS];
    assert_int_equal(read_table(fx.loc, again, &nd, &ndel), n);
    assert_memory_equal(rows, again, n * sizeof(row_t));
    assert_int_equal(ndel, 0);
}

static void truncate_slot0(void)
{
    cdc_checkpoint_t *c = epoch_begin();
    int64_t k[] = {500};
    const char *v[] = {"after-truncate"};
    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.t", 0), CDC_OK);
    stage(c, "ns.t", fx.loc, 0, k, v, 1);
    epoch_commit(c);
}

static size_t compacted_files_on_disk(void)
{
    char **files;
    size_t n, hits = 0;
    cdc_error_t e;
    char prefix[512];
    snprintf(prefix, sizeof(prefix), "%s/data/", fx.loc);
    assert_int_equal(cdc_storage_list(fx.st, prefix, &files, &n, &e), CDC_OK);
    for (size_t i = 0; i < n; i++) {
        hits += strstr(strrchr(files[i], '/'), "-compact-") != NULL;
        if (getenv("TEST_DEBUG"))
            fprintf(stderr, "file %s\n", files[i]);
    }
    cdc_storage_list_free(files, n);
    return hits;
}

static void test_compact_inputs_changed(void **state)
{
    static row_t rows[MAXROWS];
    size_t nd, ndel, n;
    cdc_compact_result_t res;
    (void)state;

    history();
    /* slot 0's files are removed by a TRUNCATE while the round runs: the round's one
     * commit (slots 0 and 1) is dropped and its files deleted */
    assert_int_equal(compact(fx.loc, true, truncate_slot0, &res), CDC_OK);
    assert_int_equal(res.dropped, 2);
    assert_int_equal(res.partitions, 0);
    assert_int_equal(compacted_files_on_disk(), 0);
    n = read_table(fx.loc, rows, &nd, &ndel);
    assert_int_equal(n, 39 + 1);
    for (size_t i = 0; i < n; i++)
        assert_true(rows[i].id >= 500);
    /* the next round plans from the truncated table and commits */
    assert_int_equal(compact(fx.loc, true, NULL, &res), CDC_OK);
    assert_int_equal(res.dropped, 0);
    assert_int_equal(res.partitions, 1); /* slot 1; slot 0 holds one file, nothing to gain */
    static row_t again[MAXROWS];
    assert_int_equal(read_table(fx.loc, again, &nd, &ndel), n);
    assert_memory_equal(rows, again, n * sizeof(row_t));
}

static void test_compact_policy(void **state)
{
    cdc_compact_result_t res;
    int64_t k[1];
    const char *v[] = {"x"};
    (void)state;

    /* slot 0: 6 one-row files, slot 1: 2 */
    for (int i = 0; i < 8; i++) {
        k[0] = i < 6 ? i : 1000 + i;
        upsert(i < 6 ? 0 : 1, k, v, 1, NULL, 0);
    }
    cdc_compact_policy_t saved = policy;
    policy.min_files = 4;
    assert_int_equal(compact(fx.loc, false, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 1);
    assert_int_equal(res.files_removed, 6);
    /* the delete-ratio rule: 1 delete row per 2 data rows in slot 1 */
    int64_t d[] = {1006};
    upsert(1, NULL, NULL, 0, d, 1);
    policy.delete_ratio_pct = 50;
    assert_int_equal(compact(fx.loc, false, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 1);
    assert_int_equal(res.rows_deleted, 1);
    policy = saved;
}

/* The idle rule: a partition no commit touched for idle_ms that holds deletes gets a major
 * rewrite, whatever the other rules say, and then none until it changes again. */
static void test_compact_idle(void **state)
{
    static row_t before[MAXROWS], after[MAXROWS];
    size_t nd, ndel, n0;
    cdc_compact_result_t res;
    int64_t k[40];
    const char *v[40];
    char text[40][16];
    (void)state;

    for (int i = 0; i < 40; i++) {
        k[i] = i;
        snprintf(text[i], sizeof(text[i]), "v%d", i);
        v[i] = text[i];
    }
    upsert(0, k, v, 40, NULL, 0);
    int64_t up[] = {3}, gone[] = {9};
    const char *upv[] = {"u3"};
    upsert(0, up, upv, 1, up, 1);
    upsert(0, NULL, NULL, 0, gone, 1);
    n0 = read_table(fx.loc, before, &nd, &ndel);
    assert_int_equal(n0, 39);
    assert_true(ndel > 0);

    cdc_compact_policy_t saved = policy; /* min_files 1000, no ratio, no age rule */
    assert_int_equal(compact(fx.loc, false, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 0);
    policy.idle_ms = 1;
    /* the newest file is older than 1 ms once the wall clock moved on by 2 */
    int64_t t0 = cdc_clock_wall_ms();
    while (cdc_clock_wall_ms() < t0 + 2)
        ;
    assert_int_equal(compact(fx.loc, false, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 1);
    assert_int_equal(res.minors, 0);
    assert_int_equal(read_table(fx.loc, after, &nd, &ndel), n0);
    assert_memory_equal(before, after, n0 * sizeof(row_t));
    assert_int_equal(nd, 1);
    assert_int_equal(ndel, 0);
    /* done: the rule no longer holds (one file, no deletes) */
    t0 = cdc_clock_wall_ms();
    while (cdc_clock_wall_ms() < t0 + 2)
        ;
    assert_int_equal(compact(fx.loc, false, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 0);
    policy = saved;
}

/* The live file paths of the table, sorted, as one string (for comparisons). */
static void live_paths(const char *loc, char *out, size_t size)
{
    cdc_ice_table_t *t;
    cdc_ice_live_file_t *lf;
    size_t n;
    cdc_error_t e;
    char *v[256] = {0};
    assert_int_equal(cdc_ice_table_load(fx.st, loc, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &n, &e), CDC_OK);
    assert_true(n < 256);
    for (size_t i = 0; i < n; i++)
        v[i] = lf[i].file.path;
    qsort(v, n, sizeof(char *), cmp_path);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s%s\n",
                 lf[i].file.content == CDC_ICE_CONTENT_DATA ? "" : "", v[i]);
    cdc_ice_live_files_free(lf, n);
    cdc_ice_table_close(t);
}

/* Committed during the second minor rewrite: an update of key 1 and of key 7, a delete of
 * key 2, then a new key 500 and a re-insert of key 2. */
static void concurrent_minor(void)
{
    int64_t up[] = {1, 7}, dels[] = {1, 2, 7}, fresh[] = {500, 2};
    const char *upv[] = {"new1", "new7"}, *freshv[] = {"f500", "back2"};
    upsert(0, up, upv, 2, dels, 3);
    upsert(0, fresh, freshv, 2, NULL, 0);
}

/* Minor rewrites keep the large file and merge the deletes; a major one applies them. */
static void test_compact_minor(void **state)
{
    static row_t before[MAXROWS], after[MAXROWS];
    static char paths[16384];
    size_t nd, ndel, n0;
    cdc_compact_result_t res;
    int64_t k[300];
    const char *v[300];
    char text[300][40];
    (void)state;

    /* one large file of 300 rows, then updates and deletes of its keys in small epochs */
    for (int i = 0; i < 300; i++) {
        k[i] = i;
        uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL; /* not compressible */
        snprintf(text[i], sizeof(text[i]), "%016llx%016llx", (unsigned long long)h,
                 (unsigned long long)(h * 0xBF58476D1CE4E5B9ULL));
        v[i] = text[i];
    }
    upsert(0, k, v, 300, NULL, 0);
    cdc_compact_policy_t saved = policy;
    policy.target_bytes = 4096; /* the 300-row file is large, one-row files small */
    policy.min_files = 3;
    policy.delete_ratio_pct = 50;
    for (int i = 0; i < 4; i++) {
        int64_t up[] = {10 + i}, gone[] = {100 + i};
        const char *upv[] = {"updated"};
        upsert(0, up, upv, 1, up, 1);
        upsert(0, NULL, NULL, 0, gone, 1);
    }
    n0 = read_table(fx.loc, before, &nd, &ndel);
    assert_int_equal(n0, 296);
    live_paths(fx.loc, paths, sizeof(paths));
    char large[512];
    snprintf(large, sizeof(large), "%.*s", (int)(strchr(paths, '\n') - paths), paths);
    assert_non_null(strstr(large, "-e1-p0-data-"));

    assert_int_equal(compact(fx.loc, false, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 1);
    assert_int_equal(res.minors, 1);
    assert_int_equal(read_table(fx.loc, after, &nd, &ndel), n0);
    assert_memory_equal(before, after, n0 * sizeof(row_t));
    assert_int_equal(nd, 2);   /* the large file, untouched, and the small ones merged */
    assert_int_equal(ndel, 1); /* eight delete files merged into one */
    live_paths(fx.loc, paths, sizeof(paths));
    assert_non_null(strstr(paths, large));

    /* more changes, one of them to a key the merged file deletes (re-insert), then a
     * second minor rewrite while an update and a delete commit */
    int64_t again[] = {100}, up2[] = {11};
    const char *againv[] = {"back"}, *up2v[] = {"twice"};
    upsert(0, again, againv, 1, NULL, 0);
    upsert(0, up2, up2v, 1, up2, 1);
    upsert(0, up2, up2v, 1, up2, 1);
    n0 = read_table(fx.loc, before, &nd, &ndel);
    assert_int_equal(n0, 297);
    assert_int_equal(compact(fx.loc, false, concurrent_minor, &res), CDC_OK);
    assert_int_equal(res.minors, 1);
    n0 = read_table(fx.loc, after, &nd, &ndel);
    for (size_t i = 0; i < n0 && getenv("TEST_DEBUG"); i++)
        if ((i > 0 && after[i].id == after[i - 1].id) ||
            (i + 1 < n0 && after[i].id == after[i + 1].id))
            fprintf(stderr, "dup %lld %s\n", (long long)after[i].id, after[i].v);
    if (getenv("TEST_DEBUG")) {
        live_paths(fx.loc, paths, sizeof(paths));
        fprintf(stderr, "%s", paths);
    }
    for (size_t i = 0; i < n0; i++) {
        assert_true(i == 0 || after[i].id != after[i - 1].id);
        if (after[i].id == 100)
            assert_string_equal(after[i].v, "back");
        if (after[i].id == 11)
            assert_string_equal(after[i].v, "twice");
        if (after[i].id == 1)
            assert_string_equal(after[i].v, "new1");
        if (after[i].id == 2)
            assert_string_equal(after[i].v, "back2");
    }
    assert_int_equal(n0, 298); /* + key 500 */

    /* a forced (major) rewrite applies every delete for good */
    assert_int_equal(compact(fx.loc, true, NULL, &res), CDC_OK);
    assert_int_equal(res.minors, 0);
    assert_int_equal(read_table(fx.loc, before, &nd, &ndel), n0);
    assert_memory_equal(before, after, n0 * sizeof(row_t));
    assert_int_equal(ndel, 0);
    assert_true(nd <= 4); /* ~10 KB of rows in files of the 4 KB target */
    policy = saved;
}

static void test_changelog_binpack(void **state)
{
    static row_t rows[MAXROWS];
    size_t nd, ndel, n;
    cdc_compact_result_t res;
    (void)state;

    for (int e = 0; e < 5; e++) {
        cdc_checkpoint_t *c = epoch_begin();
        int64_t k[3] = {e * 3, e * 3 + 1, e * 3 + 2};
        const char *v[3] = {"i", "u", "d"};
        stage(c, "ns.t_changelog", fx.cl_loc, 3, k, v, 3);
        epoch_commit(c);
    }
    assert_int_equal(compact(fx.cl_loc, true, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 1);
    assert_int_equal(res.files_removed, 5);
    n = read_table(fx.cl_loc, rows, &nd, &ndel);
    assert_int_equal(n, 15);
    assert_int_equal(nd, 1);
    /* the file keeps the epochs' order */
    cdc_ice_table_t *t;
    cdc_ice_live_file_t *lf;
    size_t nf;
    cdc_error_t e;
    assert_int_equal(cdc_ice_table_load(fx.st, fx.cl_loc, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nf, &e), CDC_OK);
    assert_int_equal(nf, 1);
    n = read_file(&lf[0].file, rows, MAXROWS);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(rows[i].id, (int64_t)i);
    cdc_ice_live_files_free(lf, nf);
    cdc_ice_table_close(t);
}

/* One changelog epoch of n rows with incompressible values, keys from k0, in slot 3. */
static void changelog_epoch(int64_t k0, size_t n)
{
    static int64_t k[MAXROWS];
    static char text[MAXROWS][36];
    static const char *v[MAXROWS];
    static uint64_t x = 88172645463325252ull;
    cdc_checkpoint_t *c = epoch_begin();
    for (size_t i = 0; i < n; i++) {
        k[i] = k0 + (int64_t)i;
        for (int j = 0; j < 32; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            text[i][j] = "0123456789abcdef"[x & 15];
        }
        text[i][32] = 0;
        v[i] = text[i];
    }
    stage(c, "ns.t_changelog", fx.cl_loc, 3, k, v, n);
    epoch_commit(c);
}

/* Below the target size files are merged in tiers (compact.c): each file, from the largest
 * down, is kept while it holds BASE_RATIO (4) times the bytes of all smaller ones; only
 * the rest is rewritten, so an append-only changelog is not rewritten whole every round. */
static void test_changelog_tiers(void **state)
{
    static row_t rows[MAXROWS];
    cdc_ice_table_t *t;
    cdc_ice_live_file_t *lf;
    size_t nf, nd, ndel;
    cdc_compact_result_t res;
    cdc_error_t e;
    char *big = NULL, *mid = NULL;
    int64_t sz[4];
    (void)state;

    changelog_epoch(0, 3500);    /* B */
    changelog_epoch(10000, 500); /* C */
    changelog_epoch(20000, 1);
    changelog_epoch(30000, 1);
    assert_int_equal(cdc_ice_table_load(fx.st, fx.cl_loc, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nf, &e), CDC_OK);
    assert_int_equal(nf, 4);
    for (size_t i = 0; i < nf; i++) {
        sz[i] = lf[i].file.file_size_in_bytes;
        if (lf[i].file.record_count == 3500)
            big = strdup(lf[i].file.path);
        if (lf[i].file.record_count == 500)
            mid = strdup(lf[i].file.path);
    }
    int64_t sb = 0, sc = 0, ss = 0;
    for (size_t i = 0; i < nf; i++) {
        if (lf[i].file.record_count == 3500)
            sb = sz[i];
        else if (lf[i].file.record_count == 500)
            sc = sz[i];
        else
            ss += sz[i];
    }
    /* the sizes this test is about: B and C are tiers, and a rule keeping the largest
     * file only would rewrite C */
    assert_true(sb >= 4 * (sc + ss));
    assert_true(sc >= 4 * ss);
    cdc_ice_live_files_free(lf, nf);
    cdc_ice_table_close(t);

    cdc_compact_policy_t saved = policy;
    policy.min_files = 2;
    assert_int_equal(compact(fx.cl_loc, false, NULL, &res), CDC_OK);
    assert_int_equal(res.partitions, 1);
    assert_int_equal(res.files_removed, 2); /* the two small files, into one */
    assert_int_equal(res.files_added, 1);
    assert_int_equal(cdc_ice_table_load(fx.st, fx.cl_loc, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nf, &e), CDC_OK);
    assert_int_equal(nf, 3);
    bool kept_big = false, kept_mid = false;
    for (size_t i = 0; i < nf; i++) {
        kept_big |= strcmp(lf[i].file.path, big) == 0;
        kept_mid |= strcmp(lf[i].file.path, mid) == 0;
    }
    assert_true(kept_big);
    assert_true(kept_mid);
    cdc_ice_live_files_free(lf, nf);
    cdc_ice_table_close(t);
    assert_int_equal(read_table(fx.cl_loc, rows, &nd, &ndel), 4002);

    /* forced (cdcctl compact): everything small is merged, whatever the tiers */
    assert_int_equal(compact(fx.cl_loc, true, NULL, &res), CDC_OK);
    assert_int_equal(res.files_removed, 3);
    assert_int_equal(read_table(fx.cl_loc, rows, &nd, &ndel), 4002);
    assert_int_equal(nd, 1);
    policy = saved;
    free(big);
    free(mid);
}

/* The maintenance scheduler: an orphan scan handed over with a keep list (the files of
 * checkpoints not yet committed) deletes an orphan but not a kept file, cdcctl's compaction
 * runs and reports, an unknown table is NOT_FOUND, a stopped scheduler UNAVAILABLE. */
static void test_maintenance_scheduler(void **state)
{
    cdc_maint_t *m;
    cdc_error_t e;
    cdc_compact_result_t res;
    char orphan[600], kept[600];
    (void)state;

    history();
    snprintf(orphan, sizeof(orphan), "%s/ns/t/data/job-e99-p0-data-orphan.parquet", fx.dir);
    snprintf(kept, sizeof(kept), "%s/ns/t/data/job-e99-p1-data-kept.parquet", fx.dir);
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(i ? kept : orphan, "w");
        assert_non_null(f);
        fputs("x", f);
        fclose(f);
    }
    cdc_checkpoint_t *c = cdc_checkpoint_new("job", 99, 1, 1);
    char kept_loc[700];
    snprintf(kept_loc, sizeof(kept_loc), "file://%s", kept);
    cdc_staged_file_t sf = {.table = "ns.t", .partition = 1};
    sf.file.path = kept_loc;
    sf.file.content = CDC_ICE_CONTENT_DATA;
    assert_int_equal(cdc_checkpoint_add_file(c, &sf), CDC_OK);
    const cdc_checkpoint_t *keep[] = {c};

    cdc_maint_options_t o = {.job = "job",
                             .compact = false,
                             .compact_interval_ms = 3600000,
                             .policy = policy,
                             .orphan_interval_ms = 1,
                             .orphan_age_ms = 0,
                             .snapshot_retention_ms = 1,
                             .snapshot_min_keep = 3};
    assert_int_equal(cdc_maint_open(&m, fx.cm, &o, NULL, &e), CDC_OK);
    assert_int_equal(cdc_maint_compact_now(m, "ns.t", 1000, &res, &e), CDC_ERR_UNAVAILABLE);
    cdc_maint_start(m, 1);
    /* two scans: the first one sees the orphan, the second one deletes it */
    for (int scans = 0; scans < 2;) {
        usleep(2000);
        scans += cdc_maint_tick(m, cdc_clock_mono_ms(), keep, 1, false);
    }
    for (int i = 0; i < 2000 && access(orphan, F_OK) == 0; i++) {
        usleep(5000);
        cdc_maint_tick(m, cdc_clock_mono_ms(), keep, 1, false);
    }
    assert_int_not_equal(access(orphan, F_OK), 0);
    assert_int_equal(access(kept, F_OK), 0);
    /* expiry on the same thread keeps the 3 newest snapshots */
    size_t nsnap = 0;
    for (int i = 0; i < 2000; i++) {
        cdc_ice_table_t *t;
        assert_int_equal(cdc_ice_table_load(fx.st, fx.loc, &t, &e), CDC_OK);
        nsnap = cdc_ice_table_metadata(t)->nsnapshots;
        cdc_ice_table_close(t);
        if (nsnap <= 3)
            break;
        usleep(5000);
    }
    assert_int_equal(nsnap, 3);

    assert_int_equal(cdc_maint_compact_now(m, "ns.t", 60000, &res, &e), CDC_OK);
    assert_int_equal(res.partitions, 2);
    assert_int_equal(cdc_maint_compact_now(m, "ns.nope", 60000, &res, &e), CDC_ERR_NOT_FOUND);
    assert_non_null(strstr(e.msg, "ns.nope"));
    cdc_maint_stop(m);
    assert_int_equal(cdc_maint_compact_now(m, "ns.t", 1000, &res, &e), CDC_ERR_UNAVAILABLE);
    cdc_maint_close(m);
    cdc_checkpoint_free(c);
}

/* A new leader (a committer that committed nothing yet) maintains the job's tables from
 * the start: its maintenance thread finds them in the warehouse, and not another job's. */
static void test_maintenance_finds_tables(void **state)
{
    cdc_maint_t *m;
    cdc_committer_t *fresh, *other;
    cdc_error_t e;
    cdc_compact_result_t res;
    size_t found;
    (void)state;

    history(); /* ns.t and ns.t_changelog, committed by job "job" */
    cdc_committer_options_t o = {.warehouse = fx.wh, .job = "job"};
    assert_int_equal(cdc_committer_open(&fresh, &o, &e), CDC_OK);
    cdc_committer_set_term(fresh, 2);
    cdc_committer_options_t oo = {.warehouse = fx.wh, .job = "other"};
    assert_int_equal(cdc_committer_open(&other, &oo, &e), CDC_OK);
    assert_int_equal(cdc_committer_discover(other, &found, &e), CDC_OK);
    assert_int_equal(found, 0);
    cdc_committer_close(other);

    cdc_maint_options_t mo = {
        .job = "job", .compact = false, .compact_interval_ms = 3600000, .policy = policy};
    assert_int_equal(cdc_maint_open(&m, fresh, &mo, NULL, &e), CDC_OK);
    cdc_maint_start(m, 2);
    /* the request is served after the thread's discovery, on the same thread */
    assert_int_equal(cdc_maint_compact_now(m, "ns.t", 60000, &res, &e), CDC_OK);
    assert_int_equal(res.partitions, 2);
    char **names, **locs;
    size_t n = cdc_committer_tables(fresh, &names, &locs);
    assert_int_equal(n, 1); /* history() commits the mirror only */
    assert_string_equal(names[0], "ns.t");
    assert_string_equal(locs[0], fx.loc);
    cdc_storage_list_free(names, n);
    cdc_storage_list_free(locs, n);
    assert_int_equal(cdc_committer_discover(fresh, &found, &e), CDC_OK);
    assert_int_equal(found, 0); /* known already */
    cdc_maint_stop(m);
    cdc_maint_close(m);
    cdc_committer_close(fresh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_compact_keeps_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_concurrent_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_inputs_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_minor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changelog_binpack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changelog_tiers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maintenance_scheduler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maintenance_finds_tables, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
