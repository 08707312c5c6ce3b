/*
 * Unit tests for common/iceberg/table.c on the local storage backend in a temp
 * directory: create/load, append and row-delta snapshots (summaries, sequence
 * numbers, refs, logs), schema change, the optimistic commit (two handles and two
 * racing threads: each version won exactly once, the loser gets CDC_ERR_CONFLICT),
 * bounded manifest growth over 200 commits, previous-versions-max, the hint
 * lagging behind the newest metadata file, the referenced-files listing, removing
 * files (overwrite/delete snapshots that drop one partition's files), and partition
 * specs and sort orders (set_layout, commits of partitioned files, merging per spec).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/iceberg/manifest.h"
#include "common/iceberg/storage.h"
#include "common/iceberg/table.h"

static cdc_ice_field_t FIELDS[] = {
    {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
    {.id = 2, .name = "v", .type = CDC_ICE_STRING},
};
static int32_t IDS[] = {1};
static cdc_ice_schema_t SCHEMA = {
    .schema_id = 0, .fields = FIELDS, .nfields = 2, .identifier_ids = IDS, .nidentifier = 1};

typedef struct fixture {
    char dir[256];
    char *loc;
    cdc_storage_t *st;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(f->dir, sizeof(f->dir), "%s/cdc-ice-XXXXXX", tmp);
    assert_non_null(mkdtemp(f->dir));
    char wh[300];
    snprintf(wh, sizeof(wh), "file://%s", f->dir);
    f->loc = cdc_ice_table_location(wh, "db", "t");
    cdc_error_t e;
    assert_int_equal(cdc_storage_open(wh, NULL, &f->st, &e), CDC_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", f->dir);
    cdc_storage_close(f->st);
    free(f->loc);
    free(f);
    return 0;
}

/* A fake data file descriptor (the table layer does not read data files). */
static void fake_file(cdc_ice_data_file_t *df, const char *loc, cdc_ice_content_t content,
                      int64_t rows)
{
    memset(df, 0, sizeof(*df));
    df->content = content;
    df->path = cdc_ice_data_file_location(loc, content == CDC_ICE_CONTENT_DATA ? "d" : "eq");
    df->record_count = rows;
    df->file_size_in_bytes = 1000 + rows;
    if (content == CDC_ICE_CONTENT_EQUALITY_DELETES) {
        df->equality_ids = malloc(sizeof(int32_t));
        df->equality_ids[0] = 1;
        df->nequality_ids = 1;
    }
}

static void test_create_load(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *t, *t2;
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t, &e), CDC_ERR_NOT_FOUND);
    cdc_ice_props_t props = {0};
    cdc_ice_props_set(&props, "owner", "cdc");
    assert_int_equal(cdc_ice_table_create(f->st, f->loc, &SCHEMA, &props, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_version(t), 1);
    assert_int_equal(cdc_ice_table_create(f->st, f->loc, &SCHEMA, &props, &t2, &e), CDC_ERR_EXISTS);
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t2, &e), CDC_OK);
    const cdc_ice_metadata_t *md = cdc_ice_table_metadata(t2);
    assert_int_equal(md->format_version, 2);
    assert_int_equal(md->last_column_id, 2);
    assert_string_equal(cdc_ice_props_get(&md->properties, "owner"), "cdc");
    assert_int_equal(cdc_ice_metadata_current_schema(md)->identifier_ids[0], 1);
    /* version-hint.text: bare integer, no newline */
    char hint[512];
    snprintf(hint, sizeof(hint), "%s/metadata/version-hint.text", f->loc);
    uint8_t *buf;
    size_t len;
    assert_int_equal(cdc_storage_get(f->st, hint, &buf, &len, &e), CDC_OK);
    assert_int_equal(len, 1);
    assert_memory_equal(buf, "1", 1);
    free(buf);
    cdc_ice_table_close(t2);
    cdc_ice_table_close(t);
    cdc_ice_props_free(&props);
}

static void test_append_row_delta_schema(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *t;
    assert_int_equal(cdc_ice_table_open(f->st, f->loc, &SCHEMA, NULL, &t, &e), CDC_OK);
    cdc_ice_data_file_t d1, d2, del;
    fake_file(&d1, f->loc, CDC_ICE_CONTENT_DATA, 10);
    fake_file(&d2, f->loc, CDC_ICE_CONTENT_DATA, 3);
    fake_file(&del, f->loc, CDC_ICE_CONTENT_EQUALITY_DELETES, 2);
    cdc_ice_props_t sum = {0};
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_JOB, "job1");
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_CHECKPOINT, "7");
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_OFFSETS, "{\"0\":5}");
    int64_t s1, s2;
    assert_int_equal(cdc_ice_table_append(t, &d1, 1, &sum, &s1, &e), CDC_OK);
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_CHECKPOINT, "8");
    assert_int_equal(cdc_ice_table_row_delta(t, &d2, 1, &del, 1, &sum, &s2, &e), CDC_OK);
    const cdc_ice_metadata_t *md = cdc_ice_table_metadata(t);
    assert_int_equal(md->last_sequence_number, 2);
    assert_true(md->current_snapshot_id == s2);
    const cdc_ice_snapshot_t *sn = cdc_ice_metadata_current_snapshot(md);
    assert_true(sn->parent_id == s1);
    assert_string_equal(cdc_ice_props_get(&sn->summary, "operation"), "overwrite");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "added-data-files"), "1");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "added-records"), "3");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "added-delete-files"), "1");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "added-equality-deletes"), "2");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-records"), "13");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-data-files"), "2");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-delete-files"), "1");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-equality-deletes"), "2");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-position-deletes"), "0");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-files-size"), "3015");
    assert_string_equal(cdc_ice_props_get(&sn->summary, CDC_ICE_SUMMARY_OFFSETS), "{\"0\":5}");
    assert_string_equal(cdc_ice_table_snapshot_property(t, s1, "operation"), "append");
    assert_true(cdc_ice_table_find_checkpoint(t, "job1", 7) == s1);
    assert_true(cdc_ice_table_find_checkpoint(t, "job1", 8) == s2);
    assert_int_equal(cdc_ice_table_find_checkpoint(t, "job1", 9), -1);
    assert_int_equal(cdc_ice_table_find_checkpoint(t, "job2", 7), -1);
    assert_int_equal(cdc_ice_table_last_checkpoint(t, "job1"), 8);
    assert_int_equal(md->nsnapshot_log, 2);
    assert_int_equal(md->nmetadata_log, 2); /* v1, v2 */

    /* live files with sequence numbers: deletes at seq 2 apply to d1 (seq 1) only */
    cdc_ice_live_file_t *lf;
    size_t nlf;
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 3);
    for (size_t i = 0; i < nlf; i++) {
        if (strcmp(lf[i].file.path, d1.path) == 0)
            assert_int_equal(lf[i].sequence_number, 1);
        else
            assert_int_equal(lf[i].sequence_number, 2);
        if (lf[i].file.content == CDC_ICE_CONTENT_EQUALITY_DELETES)
            assert_int_equal(lf[i].file.equality_ids[0], 1);
    }
    cdc_ice_live_files_free(lf, nlf);

    /* schema change */
    cdc_ice_field_t nf = {.name = "extra", .type = CDC_ICE_DOUBLE};
    int32_t fid;
    assert_int_equal(cdc_ice_table_add_column(t, &nf, &fid, &e), CDC_OK);
    assert_int_equal(fid, 3);
    assert_int_equal(cdc_ice_table_add_column(t, &nf, &fid, &e), CDC_ERR_EXISTS);
    cdc_ice_table_t *t2;
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t2, &e), CDC_OK);
    md = cdc_ice_table_metadata(t2);
    assert_int_equal(md->current_schema_id, 1);
    assert_int_equal(md->nschemas, 2);
    assert_int_equal(cdc_ice_metadata_current_schema(md)->nfields, 3);
    assert_int_equal(md->last_column_id, 3);
    assert_true(md->current_snapshot_id == s2);
    cdc_ice_table_close(t2);

    /* referenced files: everything the table holds, nothing else in metadata/ */
    char **refs;
    size_t nrefs;
    assert_int_equal(cdc_ice_table_referenced_files(t, &refs, &nrefs, &e), CDC_OK);
    char prefix[512];
    snprintf(prefix, sizeof(prefix), "%s/metadata/", f->loc);
    char **all;
    size_t nall;
    assert_int_equal(cdc_storage_list(f->st, prefix, &all, &nall, &e), CDC_OK);
    for (size_t i = 0; i < nall; i++) {
        bool found = false;
        for (size_t j = 0; j < nrefs && !found; j++)
            found = strcmp(all[i], refs[j]) == 0;
        if (!found)
            fail_msg("unreferenced file %s", all[i]);
    }
    bool has_d1 = false;
    for (size_t j = 0; j < nrefs; j++)
        has_d1 |= strcmp(refs[j], d1.path) == 0;
    assert_true(has_d1);
    cdc_storage_list_free(all, nall);
    cdc_storage_list_free(refs, nrefs);

    cdc_ice_data_file_clear(&d1);
    cdc_ice_data_file_clear(&d2);
    cdc_ice_data_file_clear(&del);
    cdc_ice_props_free(&sum);
    cdc_ice_table_close(t);
}

/*
 * A group commit (cdc_ice_commit_t.seq_span): one snapshot for three parts, each part's
 * files at its own data sequence number, the manifest list's minimum covering them; a
 * part outside 1..seq_span, or a group that is also a rewrite, is refused and leaves the
 * table as it was.
 */
static void test_group_commit_parts(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *t;
    cdc_ice_data_file_t d[3], x[2];
    assert_int_equal(cdc_ice_table_open(f->st, f->loc, &SCHEMA, NULL, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_append(t, &d[0], 0, NULL, NULL, &e), CDC_OK); /* seq 1 */
    for (int i = 0; i < 3; i++)
        fake_file(&d[i], f->loc, CDC_ICE_CONTENT_DATA, 10 + i);
    for (int i = 0; i < 2; i++)
        fake_file(&x[i], f->loc, CDC_ICE_CONTENT_EQUALITY_DELETES, 1);
    int64_t dseq[3] = {1, 2, 3}, xseq[2] = {2, 3}, bad[3] = {1, 4, 3};
    cdc_ice_commit_t c = {.data_files = d,
                          .ndata_files = 3,
                          .delete_files = x,
                          .ndelete_files = 2,
                          .seq_span = 3,
                          .data_seqs = dseq,
                          .delete_seqs = xseq};

    /* refused: a part past the span, a part 0, a group that is a rewrite */
    int version = cdc_ice_table_version(t);
    c.data_seqs = bad;
    assert_int_equal(cdc_ice_table_commit(t, &c, NULL, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "part 4 of a group of 3"));
    bad[1] = 0;
    assert_int_equal(cdc_ice_table_commit(t, &c, NULL, &e), CDC_ERR_INVALID);
    c.data_seqs = dseq;
    c.data_sequence_number = 1;
    assert_int_equal(cdc_ice_table_commit(t, &c, NULL, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "cannot be a rewrite"));
    c.data_sequence_number = 0;
    assert_int_equal(cdc_ice_table_version(t), version);

    /* committed: parts 1..3 at sequence numbers 2..4, the snapshot at 4 */
    assert_int_equal(cdc_ice_table_commit(t, &c, NULL, &e), CDC_OK);
    const cdc_ice_metadata_t *md = cdc_ice_table_metadata(t);
    assert_int_equal(md->last_sequence_number, 4);
    assert_int_equal(cdc_ice_metadata_current_snapshot(md)->sequence_number, 4);
    cdc_ice_live_file_t *lf;
    size_t nlf;
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 5);
    for (size_t i = 0; i < nlf; i++)
        for (int k = 0; k < 3; k++) {
            if (strcmp(lf[i].file.path, d[k].path) == 0)
                assert_int_equal(lf[i].sequence_number, 1 + dseq[k]);
            if (k < 2 && strcmp(lf[i].file.path, x[k].path) == 0)
                assert_int_equal(lf[i].sequence_number, 1 + xseq[k]);
        }
    cdc_ice_live_files_free(lf, nlf);
    cdc_ice_manifest_file_t *mfs;
    size_t nmf, len;
    uint8_t *buf;
    assert_int_equal(cdc_storage_get(f->st, cdc_ice_metadata_current_snapshot(md)->manifest_list,
                                     &buf, &len, &e),
                     CDC_OK);
    assert_int_equal(cdc_ice_manifest_list_read(buf, len, &mfs, &nmf, &e), CDC_OK);
    free(buf);
    assert_int_equal(nmf, 2);
    for (size_t i = 0; i < nmf; i++) {
        assert_int_equal(mfs[i].sequence_number, 4);
        assert_int_equal(mfs[i].min_sequence_number, mfs[i].content == 0 ? 2 : 3);
    }
    cdc_ice_manifest_files_free(mfs, nmf);
    for (int i = 0; i < 3; i++)
        cdc_ice_data_file_clear(&d[i]);
    for (int i = 0; i < 2; i++)
        cdc_ice_data_file_clear(&x[i]);
    cdc_ice_table_close(t);
}

static void test_conflict_two_handles(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *a, *b;
    assert_int_equal(cdc_ice_table_open(f->st, f->loc, &SCHEMA, NULL, &a, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &b, &e), CDC_OK);
    cdc_ice_data_file_t d;
    fake_file(&d, f->loc, CDC_ICE_CONTENT_DATA, 1);
    assert_int_equal(cdc_ice_table_append(a, &d, 1, NULL, NULL, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_append(b, &d, 1, NULL, NULL, &e), CDC_ERR_CONFLICT);
    assert_true(e.retriable);
    /* the loser's manifests and manifest list were removed */
    char prefix[512];
    snprintf(prefix, sizeof(prefix), "%s/metadata/", f->loc);
    char **all;
    size_t nall;
    assert_int_equal(cdc_storage_list(f->st, prefix, &all, &nall, &e), CDC_OK);
    assert_int_equal(nall, 5); /* v1, v2, hint, 1 manifest, 1 list */
    cdc_storage_list_free(all, nall);
    assert_int_equal(cdc_ice_table_refresh(b, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_append(b, &d, 1, NULL, NULL, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_version(b), 3);
    assert_string_equal(cdc_ice_table_snapshot_property(b, -1, "total-records"), "2");

    /* Refresh without a newer version keeps what is loaded (no re-parse: the snapshot
     * array stays the same allocation); a newer version is read. */
    const cdc_ice_snapshot_t *snaps = cdc_ice_table_metadata(b)->snapshots;
    assert_int_equal(cdc_ice_table_refresh(b, &e), CDC_OK);
    assert_ptr_equal(cdc_ice_table_metadata(b)->snapshots, snaps);
    assert_int_equal(cdc_ice_table_version(b), 3);
    assert_int_equal(cdc_ice_table_refresh(a, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_version(a), 3);
    assert_int_equal(cdc_ice_table_append(a, &d, 1, NULL, NULL, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_refresh(b, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_version(b), 4);
    assert_string_equal(cdc_ice_table_snapshot_property(b, -1, "total-records"), "3");
    cdc_ice_data_file_clear(&d);
    cdc_ice_table_close(a);
    cdc_ice_table_close(b);
}

typedef struct racer {
    fixture_t *f;
    const char *job;
    int commits;
    int conflicts;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    cdc_error_t e;
    cdc_ice_table_t *t;
    if (cdc_ice_table_load(r->f->st, r->f->loc, &t, &e) != CDC_OK)
        return (void *)1;
    for (int i = 0; i < r->commits; i++) {
        cdc_ice_data_file_t d;
        fake_file(&d, r->f->loc, CDC_ICE_CONTENT_DATA, 1);
        cdc_ice_props_t sum = {0};
        char cp[16];
        snprintf(cp, sizeof(cp), "%d", i);
        cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_JOB, r->job);
        cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_CHECKPOINT, cp);
        for (;;) {
            /* the coordinator's rule: re-check right before committing */
            if (cdc_ice_table_find_checkpoint(t, r->job, i) >= 0)
                break;
            cdc_err_t rc = cdc_ice_table_append(t, &d, 1, &sum, NULL, &e);
            if (rc == CDC_OK)
                break;
            if (rc != CDC_ERR_CONFLICT || !e.retriable)
                return (void *)2;
            r->conflicts++;
            if (cdc_ice_table_refresh(t, &e) != CDC_OK)
                return (void *)3;
        }
        cdc_ice_props_free(&sum);
        cdc_ice_data_file_clear(&d);
    }
    cdc_ice_table_close(t);
    return NULL;
}

static void test_racing_committers(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *t;
    assert_int_equal(cdc_ice_table_open(f->st, f->loc, &SCHEMA, NULL, &t, &e), CDC_OK);
    racer_t r[2] = {{f, "a", 25, 0}, {f, "b", 25, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, race, &r[i]);
    for (int i = 0; i < 2; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
    assert_int_equal(cdc_ice_table_refresh(t, &e), CDC_OK);
    const cdc_ice_metadata_t *md = cdc_ice_table_metadata(t);
    assert_int_equal(cdc_ice_table_version(t), 51);
    assert_int_equal(md->nsnapshots, 50);
    for (int i = 0; i < 25; i++) {
        /* each checkpoint exactly once per job */
        int seen_a = 0, seen_b = 0;
        for (size_t s = 0; s < md->nsnapshots; s++) {
            const char *j = cdc_ice_props_get(&md->snapshots[s].summary, CDC_ICE_SUMMARY_JOB);
            const char *c =
                cdc_ice_props_get(&md->snapshots[s].summary, CDC_ICE_SUMMARY_CHECKPOINT);
            if (atoi(c) != i)
                continue;
            seen_a += strcmp(j, "a") == 0;
            seen_b += strcmp(j, "b") == 0;
        }
        assert_int_equal(seen_a, 1);
        assert_int_equal(seen_b, 1);
    }
    /* the snapshot chain is linear */
    for (size_t s = 1; s < md->nsnapshots; s++)
        assert_true(md->snapshots[s].parent_id == md->snapshots[s - 1].snapshot_id);
    assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "total-records"), "50");
    fprintf(stderr, "racing committers: %d + %d conflicts\n", r[0].conflicts, r[1].conflicts);
    cdc_ice_table_close(t);
}

static void test_manifest_growth_bounded(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *t;
    cdc_ice_props_t props = {0};
    cdc_ice_props_set(&props, "write.metadata.previous-versions-max", "5");
    cdc_ice_props_set(&props, "write.metadata.delete-after-commit.enabled", "true");
    assert_int_equal(cdc_ice_table_create(f->st, f->loc, &SCHEMA, &props, &t, &e), CDC_OK);
    size_t max_manifests = 0;
    for (int i = 0; i < 200; i++) {
        cdc_ice_data_file_t d, del;
        fake_file(&d, f->loc, CDC_ICE_CONTENT_DATA, 2);
        fake_file(&del, f->loc, CDC_ICE_CONTENT_EQUALITY_DELETES, 1);
        assert_int_equal(cdc_ice_table_row_delta(t, &d, 1, &del, i % 2, NULL, NULL, &e), CDC_OK);
        cdc_ice_data_file_clear(&d);
        cdc_ice_data_file_clear(&del);
        const cdc_ice_snapshot_t *s = cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t));
        uint8_t *buf;
        size_t len;
        assert_int_equal(cdc_storage_get(f->st, s->manifest_list, &buf, &len, &e), CDC_OK);
        cdc_ice_manifest_file_t *mfs;
        size_t nmf;
        assert_int_equal(cdc_ice_manifest_list_read(buf, len, &mfs, &nmf, &e), CDC_OK);
        if (nmf > max_manifests)
            max_manifests = nmf;
        cdc_ice_manifest_files_free(mfs, nmf);
        free(buf);
    }
    fprintf(stderr, "manifest growth: at most %zu manifests over 200 commits\n", max_manifests);
    assert_true(max_manifests <= 2 * 8);
    const cdc_ice_metadata_t *md = cdc_ice_table_metadata(t);
    assert_int_equal(md->nsnapshots, 200);
    assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "total-records"), "400");
    assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "total-delete-files"), "100");
    /* live files survive merging: 200 data + 100 delete files */
    cdc_ice_live_file_t *lf;
    size_t nlf;
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 300);
    int64_t seqs = 0;
    for (size_t i = 0; i < nlf; i++)
        if (lf[i].file.content == CDC_ICE_CONTENT_DATA)
            seqs += lf[i].sequence_number;
    assert_int_equal(seqs, 200 * 201 / 2); /* every data file kept its own sequence number */
    cdc_ice_live_files_free(lf, nlf);
    /* previous-versions-max = 5 and delete-after-commit: old metadata files are gone */
    assert_int_equal(md->nmetadata_log, 5);
    char p[512];
    bool exists;
    snprintf(p, sizeof(p), "%s/metadata/v1.metadata.json", f->loc);
    assert_int_equal(cdc_storage_exists(f->st, p, &exists, &e), CDC_OK);
    assert_false(exists);
    snprintf(p, sizeof(p), "%s/metadata/v200.metadata.json", f->loc);
    assert_int_equal(cdc_storage_exists(f->st, p, &exists, &e), CDC_OK);
    assert_true(exists);

    /* expire all but the 10 newest snapshots: files of expired ones go, data stays */
    char prefix[512];
    snprintf(prefix, sizeof(prefix), "%s/metadata/", f->loc);
    char **all;
    size_t nall_before, nall_after, expired = 0;
    assert_int_equal(cdc_storage_list(f->st, prefix, &all, &nall_before, &e), CDC_OK);
    cdc_storage_list_free(all, nall_before);
    assert_int_equal(cdc_ice_table_expire_snapshots(t, INT64_MAX, 10, &expired, &e), CDC_OK);
    assert_int_equal(expired, 190);
    md = cdc_ice_table_metadata(t);
    assert_int_equal(md->nsnapshots, 10);
    assert_int_equal(md->nsnapshot_log, 10);
    assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "total-records"), "400");
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 300);
    cdc_ice_live_files_free(lf, nlf);
    assert_int_equal(cdc_storage_list(f->st, prefix, &all, &nall_after, &e), CDC_OK);
    fprintf(stderr, "expire: metadata/ had %zu files, now %zu\n", nall_before, nall_after);
    assert_true(nall_after < nall_before / 4);
    /* everything still referenced exists; nothing unreferenced is left in metadata/ */
    char **refs;
    size_t nrefs;
    assert_int_equal(cdc_ice_table_referenced_files(t, &refs, &nrefs, &e), CDC_OK);
    for (size_t i = 0; i < nrefs; i++) {
        if (strstr(refs[i], "/data/"))
            continue; /* fake data files were never written */
        bool ex = false;
        assert_int_equal(cdc_storage_exists(f->st, refs[i], &ex, &e), CDC_OK);
        if (!ex)
            fail_msg("referenced file %s is missing", refs[i]);
    }
    for (size_t i = 0; i < nall_after; i++) {
        bool found = false;
        for (size_t j = 0; j < nrefs && !found; j++)
            found = strcmp(all[i], refs[j]) == 0;
        if (!found)
            fail_msg("unreferenced file %s left behind", all[i]);
    }
    cdc_storage_list_free(refs, nrefs);
    cdc_storage_list_free(all, nall_after);
    cdc_ice_table_t *t2;
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t2, &e), CDC_OK);
    assert_int_equal(cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t2))->sequence_number,
                     200);
    cdc_ice_table_close(t2);
    cdc_ice_props_free(&props);
    cdc_ice_table_close(t);
}

/* ---- removing files (TRUNCATE of one partition's rows) ------------------------------ */

static void tagged_file(cdc_ice_data_file_t *df, const char *loc, cdc_ice_content_t content,
                        int64_t rows, const char *tag)
{
    fake_file(df, loc, content, rows);
    free(df->path);
    df->path = cdc_ice_data_file_location(loc, tag);
}

static bool remove_tagged(const cdc_ice_data_file_t *file, void *arg)
{
    const char *base = strrchr(file->path, '/');
    return base != NULL && strstr(base, (const char *)arg) != NULL;
}

static bool live_has(cdc_ice_live_file_t *lf, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(lf[i].file.path, path) == 0)
            return true;
    return false;
}

static void check_remove(fixture_t *f, const char *min_merge)
{
    cdc_error_t e;
    cdc_ice_table_t *t;
    cdc_ice_props_t props = {0};
    cdc_ice_props_set(&props, "commit.manifest.min-count-to-merge", min_merge);
    assert_int_equal(cdc_ice_table_open(f->st, f->loc, &SCHEMA, &props, &t, &e), CDC_OK);
    cdc_ice_data_file_t a, b, c, d, x, g;
    tagged_file(&a, f->loc, CDC_ICE_CONTENT_DATA, 10, "j-e1-p0-data");
    tagged_file(&b, f->loc, CDC_ICE_CONTENT_DATA, 5, "j-e1-p1-data");
    tagged_file(&c, f->loc, CDC_ICE_CONTENT_DATA, 3, "j-e2-p0-data");
    tagged_file(&d, f->loc, CDC_ICE_CONTENT_EQUALITY_DELETES, 2, "j-e2-p0-eqdel");
    tagged_file(&x, f->loc, CDC_ICE_CONTENT_DATA, 4, "j-e2-p1-data");
    tagged_file(&g, f->loc, CDC_ICE_CONTENT_DATA, 7, "j-e3-p0-data");
    cdc_ice_data_file_t ab[] = {a, b}, cx[] = {c, x};
    assert_int_equal(cdc_ice_table_append(t, ab, 2, NULL, NULL, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_row_delta(t, cx, 2, &d, 1, NULL, NULL, &e), CDC_OK);

    /* partition 0 truncated: its data and delete files go, g comes in the same snapshot */
    cdc_ice_commit_t ic = {
        .data_files = &g, .ndata_files = 1, .remove = remove_tagged, .remove_arg = (void *)"-p0-"};
    assert_int_equal(cdc_ice_table_commit(t, &ic, NULL, &e), CDC_OK);
    const cdc_ice_snapshot_t *sn = cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t));
    assert_string_equal(cdc_ice_props_get(&sn->summary, "operation"), "overwrite");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "added-data-files"), "1");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "deleted-data-files"), "2");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "deleted-records"), "13");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "removed-delete-files"), "1");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "removed-equality-deletes"), "2");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-records"), "16"); /* 5+4+7 */
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-data-files"), "3");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-delete-files"), "0");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-equality-deletes"), "0");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-files-size"), "3016");

    /* a second handle sees the same live files (b, x, g) */
    cdc_ice_table_t *t2;
    cdc_ice_live_file_t *lf;
    size_t nlf;
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t2, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t2, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 3);
    assert_true(live_has(lf, nlf, b.path) && live_has(lf, nlf, x.path) &&
                live_has(lf, nlf, g.path));
    for (size_t i = 0; i < nlf; i++)
        if (strcmp(lf[i].file.path, b.path) == 0)
            assert_int_equal(lf[i].sequence_number, 1); /* kept its sequence number */
    cdc_ice_live_files_free(lf, nlf);
    cdc_ice_table_close(t2);

    /* removal only (partition 1): operation "delete" */
    ic = (cdc_ice_commit_t){.remove = remove_tagged, .remove_arg = (void *)"-p1-"};
    assert_int_equal(cdc_ice_table_commit(t, &ic, NULL, &e), CDC_OK);
    sn = cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t));
    assert_string_equal(cdc_ice_props_get(&sn->summary, "operation"), "delete");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "deleted-data-files"), "2");
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-records"), "7");
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 1);
    assert_string_equal(lf[0].file.path, g.path);
    cdc_ice_live_files_free(lf, nlf);

    /* nothing matches: a plain commit, and later commits keep the state */
    cdc_ice_data_file_t h;
    tagged_file(&h, f->loc, CDC_ICE_CONTENT_DATA, 1, "j-e5-p2-data");
    ic = (cdc_ice_commit_t){
        .data_files = &h, .ndata_files = 1, .remove = remove_tagged, .remove_arg = (void *)"-p1-"};
    assert_int_equal(cdc_ice_table_commit(t, &ic, NULL, &e), CDC_OK);
    sn = cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t));
    assert_string_equal(cdc_ice_props_get(&sn->summary, "operation"), "append");
    assert_null(cdc_ice_props_get(&sn->summary, "deleted-data-files"));
    assert_string_equal(cdc_ice_props_get(&sn->summary, "total-records"), "8");
    for (int i = 0; i < 10; i++)
        assert_int_equal(cdc_ice_table_append(t, &h, 0, NULL, NULL, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 2);
    assert_true(live_has(lf, nlf, g.path) && live_has(lf, nlf, h.path));
    cdc_ice_live_files_free(lf, nlf);

    /* once the snapshots where they were live expire, removed files are unreferenced */
    char **refs;
    size_t nrefs;
    assert_int_equal(cdc_ice_table_expire_snapshots(t, INT64_MAX, 1, NULL, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_referenced_files(t, &refs, &nrefs, &e), CDC_OK);
    for (size_t i = 0; i < nrefs; i++) {
        assert_true(strcmp(refs[i], a.path) != 0 && strcmp(refs[i], d.path) != 0 &&
                    strcmp(refs[i], b.path) != 0);
    }
    bool has_g = false;
    for (size_t i = 0; i < nrefs; i++)
        has_g |= strcmp(refs[i], g.path) == 0;
    assert_true(has_g);
    cdc_storage_list_free(refs, nrefs);

    cdc_ice_data_file_t *all[] = {&a, &b, &c, &d, &x, &g, &h};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cdc_ice_data_file_clear(all[i]);
    cdc_ice_props_free(&props);
    cdc_ice_table_close(t);
}

/* Without manifest merging (the removing commit rewrites the manifests that list the
 * files) and with merging at every commit. */
static void test_remove_files(void **state)
{
    check_remove(*state, "100");
}

static void test_remove_files_merging(void **state)
{
    check_remove(*state, "2");
}

/*
 * The manifests and manifest lists a commit writes feed the referenced-files cache, so an
 * orphan scan after commits reads none of them back: with every Avro file gone from
 * metadata/, cdc_ice_table_referenced_files() still lists them and every live file.
 */
static void test_referenced_files_fed_by_commits(void **state)
{
    fixture_t *f = *state;
    cdc_ice_table_t *t;
    cdc_error_t e;
    char prefix[512], **all, **refs;
    size_t nall, nrefs, nlf;
    cdc_ice_live_file_t *lf;

    assert_int_equal(cdc_ice_table_create(f->st, f->loc, &SCHEMA, NULL, &t, &e), CDC_OK);
    for (int i = 0; i < 60; i++) {
        cdc_ice_data_file_t d, del;
        fake_file(&d, f->loc, CDC_ICE_CONTENT_DATA, 2);
        fake_file(&del, f->loc, CDC_ICE_CONTENT_EQUALITY_DELETES, 1);
        assert_int_equal(cdc_ice_table_row_delta(t, &d, 1, &del, i % 2, NULL, NULL, &e), CDC_OK);
        cdc_ice_data_file_clear(&d);
        cdc_ice_data_file_clear(&del);
    }
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 90);
    snprintf(prefix, sizeof(prefix), "%s/metadata/", f->loc);
    assert_int_equal(cdc_storage_list(f->st, prefix, &all, &nall, &e), CDC_OK);
    for (size_t i = 0; i < nall; i++)
        if (strstr(all[i], ".avro"))
            assert_int_equal(cdc_storage_delete(f->st, all[i], &e), CDC_OK);
    assert_int_equal(cdc_ice_table_referenced_files(t, &refs, &nrefs, &e), CDC_OK);
    for (size_t i = 0; i < nall + nlf; i++) {
        const char *want = i < nall ? all[i] : lf[i - nall].file.path;
        bool found = false;
        for (size_t j = 0; j < nrefs && !found; j++)
            found = strcmp(want, refs[j]) == 0;
        if (!found && strstr(want, ".metadata.json") == NULL)
            fail_msg("%s not referenced", want);
    }
    cdc_storage_list_free(refs, nrefs);
    cdc_storage_list_free(all, nall);
    cdc_ice_live_files_free(lf, nlf);
    cdc_ice_table_close(t);
}

static void test_hint_lagging(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *t;
    assert_int_equal(cdc_ice_table_open(f->st, f->loc, &SCHEMA, NULL, &t, &e), CDC_OK);
    cdc_ice_data_file_t d;
    fake_file(&d, f->loc, CDC_ICE_CONTENT_DATA, 1);
    assert_int_equal(cdc_ice_table_append(t, &d, 1, NULL, NULL, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_append(t, &d, 1, NULL, NULL, &e), CDC_OK);
    /* a committer that died after creating v3 but before the hint */
    char hint[512];
    snprintf(hint, sizeof(hint), "%s/metadata/version-hint.text", f->loc);
    assert_int_equal(cdc_storage_put(f->st, hint, "1", 1, &e), CDC_OK);
    cdc_ice_table_t *t2;
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t2, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_version(t2), 3);
    /* no hint at all */
    assert_int_equal(cdc_storage_delete(f->st, hint, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_refresh(t2, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_version(t2), 3);
    /* the oldest versions deleted (as the table's limit on kept versions does), and the
     * hint missing, then garbled: the newest listed version is found, not "no table" */
    for (int v = 1; v <= 2; v++) {
        char old[600];
        snprintf(old, sizeof(old), "%s/metadata/v%d.metadata.json", f->loc, v);
        assert_int_equal(cdc_storage_delete(f->st, old, &e), CDC_OK);
    }
    cdc_ice_table_t *t3;
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t3, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_version(t3), 3);
    cdc_ice_table_close(t3);
    assert_int_equal(cdc_storage_put(f->st, hint, "x7", 2, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t3, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_version(t3), 3);
    cdc_ice_table_close(t3);
    cdc_ice_data_file_clear(&d);
    cdc_ice_table_close(t2);
    cdc_ice_table_close(t);
}

/* ---- partition specs and sort orders ------------------------------------------------ */

static cdc_ice_field_t PFIELDS[] = {
    {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
    {.id = 2, .name = "v", .type = CDC_ICE_STRING},
    {.id = 3, .name = "ts", .type = CDC_ICE_TIMESTAMPTZ},
};
static cdc_ice_schema_t PSCHEMA = {
    .schema_id = 0, .fields = PFIELDS, .nfields = 3, .identifier_ids = IDS, .nidentifier = 1};

/* A fake file of spec spec_id with int partition values (INT64_MIN = null). */
static void part_file(cdc_ice_data_file_t *df, const char *loc, cdc_ice_content_t content,
                      int32_t spec_id, const int64_t *vals, size_t n)
{
    static const cdc_ice_field_t int_type = {.type = CDC_ICE_INT};
    fake_file(df, loc, content, 3);
    df->spec_id = spec_id;
    df->npartition = n;
    df->partition = n ? calloc(n, sizeof(cdc_ice_part_value_t)) : NULL;
    for (size_t i = 0; i < n; i++) {
        if (vals[i] == INT64_MIN)
            df->partition[i].null = true;
        else
            assert_int_equal(cdc_ice_part_value_set_int(&int_type, vals[i], &df->partition[i]),
                             CDC_OK);
    }
}

static const cdc_ice_live_file_t *live_find(const cdc_ice_live_file_t *lf, size_t n,
                                            const char *path)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(lf[i].file.path, path) == 0)
            return &lf[i];
    fail_msg("%s is not live", path);
    return NULL;
}

static void read_list(fixture_t *f, cdc_ice_table_t *t, cdc_ice_manifest_file_t **mfs, size_t *n)
{
    cdc_error_t e;
    uint8_t *buf;
    size_t len;
    const cdc_ice_snapshot_t *s = cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t));
    assert_int_equal(cdc_storage_get(f->st, s->manifest_list, &buf, &len, &e), CDC_OK);
    assert_int_equal(cdc_ice_manifest_list_read(buf, len, mfs, n, &e), CDC_OK);
    free(buf);
}

static void test_set_layout(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *t, *t2;
    bool changed = true;
    assert_int_equal(cdc_ice_table_create(f->st, f->loc, &PSCHEMA, NULL, &t, &e), CDC_OK);
    const cdc_ice_partition_spec_t *spec = cdc_ice_table_default_spec(t);
    assert_int_equal(spec->spec_id, 0);
    assert_int_equal(spec->nfields, 0);
    assert_int_equal(cdc_ice_table_default_sort_order(t)->order_id, 0);
    assert_int_equal(cdc_ice_table_metadata(t)->last_partition_id, 999);

    /* bad declarations change nothing and name the term */
    assert_int_equal(cdc_ice_table_set_layout(t, "day(ts), hour(v)", NULL, &changed, &e),
                     CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "hour(v)"));
    assert_false(changed);
    assert_int_equal(cdc_ice_table_set_layout(t, NULL, "id up", &changed, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "id up"));
    assert_int_equal(cdc_ice_table_set_layout(t, "bucket[4](nope)", NULL, &changed, &e),
                     CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "\"nope\""));
    assert_int_equal(cdc_ice_table_version(t), 1);
    /* unpartitioned and unsorted already: nothing to commit */
    assert_int_equal(cdc_ice_table_set_layout(t, "", NULL, &changed, &e), CDC_OK);
    assert_false(changed);
    assert_int_equal(cdc_ice_table_version(t), 1);

    assert_int_equal(cdc_ice_table_set_layout(t, "day(ts), bucket[4](id)", "id desc", &changed, &e),
                     CDC_OK);
    assert_true(changed);
    assert_int_equal(cdc_ice_table_version(t), 2);
    spec = cdc_ice_table_default_spec(t);
    assert_int_equal(spec->spec_id, 1);
    assert_int_equal(spec->nfields, 2);
    assert_int_equal(spec->fields[0].field_id, 1000);
    assert_int_equal(spec->fields[1].field_id, 1001);
    assert_string_equal(spec->fields[0].name, "ts_day");
    assert_int_equal(cdc_ice_table_metadata(t)->last_partition_id, 1001);
    assert_int_equal(cdc_ice_table_default_sort_order(t)->order_id, 1);
    assert_true(cdc_ice_table_default_sort_order(t)->fields[0].descending);
    /* the same again: no commit */
    assert_int_equal(cdc_ice_table_set_layout(t, "day(ts),bucket[4](id)", "id DESC", &changed, &e),
                     CDC_OK);
    assert_false(changed);
    assert_int_equal(cdc_ice_table_version(t), 2);
    /* back to unpartitioned and unsorted: spec 0 and order 0 again, nothing added */
    assert_int_equal(cdc_ice_table_set_layout(t, NULL, "", &changed, &e), CDC_OK);
    assert_true(changed);
    assert_int_equal(cdc_ice_table_default_spec(t)->spec_id, 0);
    assert_int_equal(cdc_ice_table_default_sort_order(t)->order_id, 0);
    assert_int_equal(cdc_ice_table_metadata(t)->nspecs, 2);
    /* a different field order is a different spec; the first one is reused */
    assert_int_equal(cdc_ice_table_set_layout(t, "bucket[4](id), day(ts)", NULL, &changed, &e),
                     CDC_OK);
    assert_int_equal(cdc_ice_table_default_spec(t)->spec_id, 2);
    assert_int_equal(cdc_ice_table_default_spec(t)->fields[0].field_id, 1002);
    assert_int_equal(cdc_ice_table_metadata(t)->last_partition_id, 1003);
    assert_int_equal(cdc_ice_table_set_layout(t, "day(ts), bucket[4](id)", "id desc", &changed, &e),
                     CDC_OK);
    assert_true(changed);
    assert_int_equal(cdc_ice_table_default_spec(t)->spec_id, 1);
    assert_int_equal(cdc_ice_table_default_sort_order(t)->order_id, 1);
    assert_int_equal(cdc_ice_table_metadata(t)->nspecs, 3);
    assert_int_equal(cdc_ice_table_metadata(t)->norders, 2);

    /* another handle loads the same layout; its stale copy conflicts */
    assert_int_equal(cdc_ice_table_load(f->st, f->loc, &t2, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_default_spec(t2)->spec_id, 1);
    assert_int_equal(cdc_ice_metadata_spec(cdc_ice_table_metadata(t2), 2)->fields[1].source_id, 3);
    assert_int_equal(cdc_ice_table_set_layout(t, "v", NULL, &changed, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_set_layout(t2, "truncate[2](v)", NULL, &changed, &e),
                     CDC_ERR_CONFLICT);
    assert_int_equal(cdc_ice_table_refresh(t2, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_default_spec(t2)->spec_id, 3);
    assert_string_equal(cdc_ice_table_default_spec(t2)->fields[0].name, "v");
    cdc_ice_table_close(t2);
    cdc_ice_table_close(t);
}

/*
 * Partitioned data and equality deletes in spec 0 (global) and spec 1: one manifest per
 * content and spec with the spec's id and summaries, live files with their partition
 * values, invalid layouts rejected, and merging only within a spec.
 */
static void test_partitioned_commits(void **state)
{
    fixture_t *f = *state;
    cdc_error_t e;
    cdc_ice_table_t *t;
    cdc_ice_props_t props = {0};
    cdc_ice_props_set(&props, "commit.manifest.min-count-to-merge", "3");
    assert_int_equal(cdc_ice_table_create(f->st, f->loc, &PSCHEMA, &props, &t, &e), CDC_OK);
    assert_int_equal(cdc_ice_table_set_layout(t, "day(ts), bucket[4](id)", "id", NULL, &e), CDC_OK);
    cdc_ice_data_file_t d[3], del[2];
    part_file(&d[0], f->loc, CDC_ICE_CONTENT_DATA, 1, (int64_t[]){17486, 2}, 2);
    part_file(&d[1], f->loc, CDC_ICE_CONTENT_DATA, 1, (int64_t[]){INT64_MIN, 3}, 2);
    part_file(&d[2], f->loc, CDC_ICE_CONTENT_DATA, 0, NULL, 0);
    d[0].sort_order_id = d[1].sort_order_id = 1;
    part_file(&del[0], f->loc, CDC_ICE_CONTENT_EQUALITY_DELETES, 0, NULL, 0);
    part_file(&del[1], f->loc, CDC_ICE_CONTENT_EQUALITY_DELETES, 1, (int64_t[]){17490, 0}, 2);
    assert_int_equal(cdc_ice_table_row_delta(t, d, 3, del, 2, NULL, NULL, &e), CDC_OK);
    assert_string_equal(cdc_ice_table_snapshot_property(t, -1, "changed-partition-count"), "4");

    cdc_ice_manifest_file_t *mfs;
    size_t nmf;
    read_list(f, t, &mfs, &nmf);
    assert_int_equal(nmf, 4); /* data spec 0, data spec 1, deletes spec 0, deletes spec 1 */
    for (size_t i = 0; i < nmf; i++) {
        assert_int_equal(mfs[i].content, i < 2 ? CDC_ICE_MANIFEST_DATA : CDC_ICE_MANIFEST_DELETES);
        assert_int_equal(mfs[i].spec_id, (int)(i % 2));
        assert_int_equal(mfs[i].npartitions, i % 2 ? 2 : 0);
        assert_int_equal(mfs[i].added_files, i == 1 ? 2 : 1);
    }
    const cdc_ice_field_summary_t *ps = mfs[1].partitions;
    assert_true(ps[0].contains_null);
    assert_int_equal(cdc_ice_part_value_int(&ps[0].lower), 17486);
    assert_int_equal(cdc_ice_part_value_int(&ps[0].upper), 17486);
    assert_false(ps[1].contains_null);
    assert_int_equal(cdc_ice_part_value_int(&ps[1].lower), 2);
    assert_int_equal(cdc_ice_part_value_int(&ps[1].upper), 3);
    /* the spec-1 data manifest: header keys and the partition record */
    uint8_t *buf;
    size_t len;
    char *v;
    assert_int_equal(cdc_storage_get(f->st, mfs[1].path, &buf, &len, &e), CDC_OK);
    assert_int_equal(cdc_avro_header_get(buf, len, "partition-spec-id", &v, &e), CDC_OK);
    assert_string_equal(v, "1");
    free(v);
    assert_int_equal(cdc_avro_header_get(buf, len, "partition-spec", &v, &e), CDC_OK);
    assert_string_equal(v, "[{\"name\":\"ts_day\",\"transform\":\"day\",\"source-id\":3,"
                           "\"field-id\":1000},{\"name\":\"id_bucket\",\"transform\":"
                           "\"bucket[4]\",\"source-id\":1,\"field-id\":1001}]");
    free(v);
    free(buf);
    cdc_ice_manifest_files_free(mfs, nmf);

    cdc_ice_live_file_t *lf;
    size_t nlf;
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 5);
    const cdc_ice_live_file_t *x = live_find(lf, nlf, d[0].path);
    assert_int_equal(x->file.spec_id, 1);
    assert_int_equal(x->file.sort_order_id, 1);
    assert_int_equal(x->file.npartition, 2);
    assert_int_equal(x->file.partition[0].len, 4);
    assert_int_equal(cdc_ice_part_value_int(&x->file.partition[0]), 17486);
    assert_int_equal(cdc_ice_part_value_int(&x->file.partition[1]), 2);
    x = live_find(lf, nlf, d[1].path);
    assert_true(x->file.partition[0].null);
    x = live_find(lf, nlf, del[0].path);
    assert_int_equal(x->file.spec_id, 0);
    assert_int_equal(x->file.npartition, 0);
    x = live_find(lf, nlf, del[1].path);
    assert_int_equal(x->file.content, CDC_ICE_CONTENT_EQUALITY_DELETES);
    assert_int_equal(cdc_ice_part_value_int(&x->file.partition[0]), 17490);
    cdc_ice_live_files_free(lf, nlf);

    /* invalid layouts: unknown spec, wrong value count, a value of the wrong width,
     * an unknown sort order; nothing is committed */
    int64_t version = cdc_ice_table_version(t);
    cdc_ice_data_file_t bad;
    part_file(&bad, f->loc, CDC_ICE_CONTENT_DATA, 7, NULL, 0);
    assert_int_equal(cdc_ice_table_append(t, &bad, 1, NULL, NULL, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "partition spec 7"));
    cdc_ice_data_file_clear(&bad);
    part_file(&bad, f->loc, CDC_ICE_CONTENT_DATA, 1, (int64_t[]){1}, 1);
    assert_int_equal(cdc_ice_table_append(t, &bad, 1, NULL, NULL, &e), CDC_ERR_INVALID);
    cdc_ice_data_file_clear(&bad);
    part_file(&bad, f->loc, CDC_ICE_CONTENT_DATA, 0, (int64_t[]){1}, 1);
    assert_int_equal(cdc_ice_table_append(t, &bad, 1, NULL, NULL, &e), CDC_ERR_INVALID);
    cdc_ice_data_file_clear(&bad);
    part_file(&bad, f->loc, CDC_ICE_CONTENT_DATA, 1, (int64_t[]){1, 2}, 2);
    bad.partition[1].len = 8;
    bad.partition[1].bytes = realloc(bad.partition[1].bytes, 8);
    assert_int_equal(cdc_ice_table_append(t, &bad, 1, NULL, NULL, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "id_bucket"));
    bad.partition[1].len = 4;
    bad.sort_order_id = 5;
    assert_int_equal(cdc_ice_table_append(t, &bad, 1, NULL, NULL, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "sort order 5"));
    cdc_ice_data_file_clear(&bad);
    assert_int_equal(cdc_ice_table_version(t), version);

    /* more commits in both specs: manifests merge within (content, spec) only */
    for (int i = 0; i < 6; i++) {
        cdc_ice_data_file_t a, b, q;
        part_file(&a, f->loc, CDC_ICE_CONTENT_DATA, 1, (int64_t[]){17486 + i, i % 4}, 2);
        part_file(&b, f->loc, CDC_ICE_CONTENT_DATA, 0, NULL, 0);
        part_file(&q, f->loc, CDC_ICE_CONTENT_EQUALITY_DELETES, i % 2, (int64_t[]){17486, 1},
                  i % 2 ? 2 : 0);
        cdc_ice_data_file_t both[2] = {a, b};
        assert_int_equal(cdc_ice_table_row_delta(t, both, 2, &q, 1, NULL, NULL, &e), CDC_OK);
        cdc_ice_data_file_clear(&a);
        cdc_ice_data_file_clear(&b);
        cdc_ice_data_file_clear(&q);
    }
    read_list(f, t, &mfs, &nmf);
    assert_true(nmf <= 4 * 3);
    size_t merged = 0;
    for (size_t i = 0; i < nmf; i++) {
        if (mfs[i].existing_files > 0)
            merged++;
        /* every entry of a manifest is of the manifest's spec */
        cdc_ice_manifest_entry_t *ents;
        size_t nents;
        assert_int_equal(cdc_storage_get(f->st, mfs[i].path, &buf, &len, &e), CDC_OK);
        assert_int_equal(cdc_ice_manifest_read(buf, len, &mfs[i], NULL, 0, &ents, &nents, &e),
                         CDC_OK);
        for (size_t k = 0; k < nents; k++) {
            assert_int_equal(ents[k].file.spec_id, mfs[i].spec_id);
            assert_int_equal(ents[k].file.npartition, mfs[i].spec_id == 1 ? 2 : 0);
        }
        cdc_ice_manifest_entries_free(ents, nents);
        free(buf);
    }
    assert_true(merged > 0);
    cdc_ice_manifest_files_free(mfs, nmf);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 5 + 6 * 3);
    int64_t day_sum = 0;
    for (size_t i = 0; i < nlf; i++)
        if (lf[i].file.spec_id == 1 && lf[i].file.content == CDC_ICE_CONTENT_DATA &&
            !lf[i].file.partition[0].null)
            day_sum += cdc_ice_part_value_int(&lf[i].file.partition[0]) - 17486;
    assert_int_equal(day_sum, 0 + (0 + 1 + 2 + 3 + 4 + 5)); /* kept through merging */
    cdc_ice_live_files_free(lf, nlf);

    /* removing spec-1 files rewrites their manifests with the values kept */
    assert_int_equal(
        cdc_ice_table_commit(
            t, &(cdc_ice_commit_t){.remove = remove_tagged, .remove_arg = (void *)"eq-"}, NULL, &e),
        CDC_OK);
    assert_int_equal(cdc_ice_table_live_files(t, &lf, &nlf, &e), CDC_OK);
    assert_int_equal(nlf, 3 + 6 * 2);
    cdc_ice_live_files_free(lf, nlf);
    for (int i = 0; i < 3; i++)
        cdc_ice_data_file_clear(&d[i]);
    for (int i = 0; i < 2; i++)
        cdc_ice_data_file_clear(&del[i]);
    cdc_ice_props_free(&props);
    cdc_ice_table_close(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_row_delta_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit_parts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conflict_two_handles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_racing_committers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_growth_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hint_lagging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_referenced_files_fed_by_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_files_merging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partitioned_commits, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
