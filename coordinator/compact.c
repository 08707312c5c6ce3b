/*
 * Compaction of one table, partition by partition (see compact.h for the plan and why it
 * is correct under concurrent epoch commits).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/assign.h"
#include "coordinator/commit.h"
#include "coordinator/compact.h"

#define COMPACT_COMMIT_ATTEMPTS 8

/* The summary keys a rewrite keeps from the snapshot it replaces: the epoch and the
 * offsets it holds do not change, and the term check of the next commit reads them. */
static const char *const kept_keys[] = {CDC_ICE_SUMMARY_JOB, CDC_ICE_SUMMARY_CHECKPOINT,
                                        CDC_ICE_SUMMARY_OFFSETS, CDC_ICE_SUMMARY_TERM, NULL};

/* One partition's live files (borrowed from the table's live-file list). */
typedef struct part_plan {
    cdc_ice_live_file_t *data, *dels; /* copies of the entries (shallow) */
    size_t ndata, ndels;
    int64_t data_rows, del_rows;
    int64_t oldest_small_ms; /* commit time of the oldest small data file (0 = none) */
    size_t nsmall;
    bool position_deletes; /* not ours to rewrite: left alone */
} part_plan_t;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The removal predicate of a rewrite: the input paths, sorted. */
typedef struct inputs {
    char **paths;
    size_t n;
} inputs_t;

static bool is_input(const cdc_ice_data_file_t *f, void *arg)
{
    const inputs_t *in = arg;
    const char *p = f->path;
    return bsearch(&p, in->paths, in->n, sizeof(char *), cmp_str) != NULL;
}

static bool is_small(const cdc_ice_live_file_t *f, int64_t target)
{
    return f->file.file_size_in_bytes < target / 4 * 3;
}

/* Whether an equality delete of the partition applies to data file d. */
static bool has_deletes(const part_plan_t *pp, const cdc_ice_live_file_t *d)
{
    for (size_t i = 0; i < pp->ndels; i++)
        if (pp->dels[i].sequence_number > d->sequence_number)
            return true;
    return false;
}

static bool policy_wants(const cdc_compact_ctx_t *cx, const part_plan_t *pp, int64_t now_ms)
{
    const cdc_compact_policy_t *p = cx->policy;
    if (pp->ndata + pp->ndels > (size_t)p->min_files)
        return true;
    if (pp->ndels > 0 && p->delete_ratio_pct > 0 &&
        pp->del_rows * 100 >= p->delete_ratio_pct * (pp->data_rows > 0 ? pp->data_rows : 1))
        return true;
    return p->max_age_ms > 0 && pp->nsmall + pp->ndels >= 2 && pp->oldest_small_ms > 0 &&
           now_ms - pp->oldest_small_ms > p->max_age_ms;
}

/* Commits one partition's rewrite; *committed false when it was dropped (inputs gone). */
static cdc_err_t commit_rewrite(const cdc_compact_ctx_t *cx, cdc_ice_table_t *t, int64_t seq,
                                inputs_t *in, cdc_ice_data_file_t *out, size_t nout,
                                bool *committed, cdc_error_t *e)
{
    cdc_ice_props_t summary = {0};
    cdc_err_t rc = CDC_OK;
    *committed = false;
    cdc_ice_props_set(&summary, "cdc.maintenance", "compaction");
    for (int attempt = 0;; attempt++) {
        if (attempt > 0 && (rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
            break;
        const char *tv = cdc_ice_table_snapshot_property(t, -1, CDC_ICE_SUMMARY_TERM);
        if (tv != NULL && strtoull(tv, NULL, 10) > cx->term) {
            rc = cdc_error_set(e, CDC_ERR_FENCED,
                               "table \"%s\" was committed by leader term %s, ours is %" PRIu64,
                               cdc_ice_table_get_location(t), tv, cx->term);
            break;
        }
        cdc_ice_commit_t c;
        memset(&c, 0, sizeof(c));
        c.data_files = out;
        c.ndata_files = nout;
        c.summary = &summary;
        c.remove = is_input;
        c.remove_arg = in;
        c.data_sequence_number = seq;
        c.expect_removed = in->n;
        c.keep_parent_keys = kept_keys;
        rc = cdc_ice_table_commit(t, &c, NULL, e);
        if (rc == CDC_OK)
            *committed = true;
        if (rc != CDC_ERR_CONFLICT || attempt + 1 >= COMPACT_COMMIT_ATTEMPTS)
            break;
        cdc_error_clear(e);
    }
    cdc_ice_props_free(&summary);
    return rc;
}

static cdc_err_t compact_partition(const cdc_compact_ctx_t *cx, cdc_ice_table_t *t, int part,
                                   part_plan_t *pp, int64_t seq, cdc_compact_result_t *res,
                                   cdc_error_t *e)
{
    const int64_t target = cx->policy->target_bytes;
    cdc_ice_live_file_t *rw = calloc(pp->ndata + 1, sizeof(*rw));
    inputs_t in = {calloc(pp->ndata + pp->ndels + 1, sizeof(char *)), 0};
    cdc_ice_data_file_t *out = NULL;
    size_t nrw = 0, nout = 0;
    cdc_ice_rewrite_stats_t st;
    char tag[256];
    cdc_err_t rc = CDC_OK;

    memset(&st, 0, sizeof(st));
    if (rw == NULL || in.paths == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < pp->ndata; i++)
        if (is_small(&pp->data[i], target) || has_deletes(pp, &pp->data[i])) {
            rw[nrw++] = pp->data[i];
            in.paths[in.n++] = pp->data[i].file.path;
        }
    for (size_t i = 0; i < pp->ndels; i++)
        in.paths[in.n++] = pp->dels[i].file.path;
    /* nothing to gain: one file that stays as it is */
    if (pp->ndels == 0 && nrw < 2)
        goto done;
    qsort(in.paths, in.n, sizeof(char *), cmp_str);
    snprintf(tag, sizeof(tag), "%s-e%" PRId64 "-p%d-compact", cx->job,
             cdc_ice_table_last_checkpoint(t, cx->job) < 0
                 ? (int64_t)0
                 : cdc_ice_table_last_checkpoint(t, cx->job),
             part);
    cdc_ice_rewrite_options_t ro = {.target_file_bytes = target,
                                    .tag = tag,
                                    .progress = cx->progress,
                                    .progress_arg = cx->progress_arg};
    if ((rc = cdc_ice_table_rewrite(t, rw, nrw, pp->dels, pp->ndels, &ro, &out, &nout, &st, e)) !=
        CDC_OK)
        goto done;
#if CDC_FAULTS
    if (cx->fault != NULL && strcmp(cx->fault, "exit-mid-compaction") == 0) {
        cdc_log_error("fault injection: exiting at \"exit-mid-compaction\" (%zu files written)",
                      nout);
        _exit(86);
    }
#endif
    bool committed;
    rc = commit_rewrite(cx, t, seq, &in, out, nout, &committed, e);
    if (rc == CDC_ERR_STALE) {
        cdc_log_warn("compaction of \"%s\" partition %d dropped: %s", cdc_ice_table_get_location(t),
                     part, e->msg);
        cdc_error_clear(e);
        res->dropped++;
        rc = CDC_OK;
    }
    if (!committed) {
        /* a definite refusal (or a dropped rewrite) leaves the files unreferenced; after an
         * unknown outcome they may be referenced: orphan cleanup decides then */
        if (rc == CDC_OK || rc == CDC_ERR_CONFLICT || rc == CDC_ERR_FENCED)
            cdc_ice_rewrite_discard(t, out, nout);
        else
            cdc_ice_data_files_free(out, nout);
        goto done;
    }
    res->partitions++;
    res->files_removed += (int64_t)in.n;
    res->files_added += (int64_t)nout;
    res->bytes_read += st.bytes_read;
    res->bytes_written += st.bytes_written;
    res->rows_deleted += st.rows_deleted;
    cdc_log_debug("compacted \"%s\" partition %d: %zu data and %zu delete files (%" PRId64
                  " bytes) into %zu (%" PRId64 " bytes), %" PRId64 " deleted rows dropped",
                  cdc_ice_table_get_location(t), part, nrw, pp->ndels, st.bytes_read, nout,
                  st.bytes_written, st.rows_deleted);
    cdc_ice_data_files_free(out, nout);
done:
    free(rw);
    free(in.paths);
    return rc;
}

cdc_err_t cdc_compact_table(const cdc_compact_ctx_t *cx, cdc_ice_table_t *t,
                            cdc_compact_result_t *res, cdc_error_t *e)
{
    cdc_ice_live_file_t *files = NULL;
    size_t nfiles = 0;
    part_plan_t plan[CDC_PARTITIONS];
    int64_t now = cdc_clock_wall_ms();
    cdc_err_t rc;

    memset(plan, 0, sizeof(plan));
    if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
        return rc;
    const cdc_ice_metadata_t *md = cdc_ice_table_metadata(t);
    const cdc_ice_snapshot_t *snap = cdc_ice_metadata_current_snapshot(md);
    if (snap == NULL)
        return CDC_OK;
    int64_t seq = snap->sequence_number;
    if ((rc = cdc_ice_table_live_files(t, &files, &nfiles, e)) != CDC_OK)
        return rc;
    for (size_t i = 0; i < nfiles && rc == CDC_OK; i++) {
        int p = cdc_committer_file_partition(files[i].file.path, cx->job);
        if (p < 0)
            continue; /* not staged by this job's workers: not ours to rewrite */
        part_plan_t *pp = &plan[p];
        cdc_ice_live_file_t **arr =
            files[i].file.content == CDC_ICE_CONTENT_DATA ? &pp->data : &pp->dels;
        size_t *n = files[i].file.content == CDC_ICE_CONTENT_DATA ? &pp->ndata : &pp->ndels;
        if (files[i].file.content == CDC_ICE_CONTENT_POSITION_DELETES)
            pp->position_deletes = true;
        cdc_ice_live_file_t *v = realloc(*arr, (*n + 1) * sizeof(*v));
        if (v == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            break;
        }
        *arr = v;
        v[(*n)++] = files[i]; /* shallow: files owns the strings */
        if (files[i].file.content == CDC_ICE_CONTENT_DATA) {
            pp->data_rows += files[i].file.record_count;
            if (is_small(&files[i], cx->policy->target_bytes)) {
                const cdc_ice_snapshot_t *s = cdc_ice_metadata_snapshot(md, files[i].snapshot_id);
                int64_t at = s ? s->timestamp_ms : 1; /* expired snapshot: old */
                pp->nsmall++;
                if (pp->oldest_small_ms == 0 || at < pp->oldest_small_ms)
                    pp->oldest_small_ms = at;
            }
        } else {
            pp->del_rows += files[i].file.record_count;
        }
    }
    for (int p = 0; p < CDC_PARTITIONS && rc == CDC_OK; p++) {
        part_plan_t *pp = &plan[p];
        if (pp->position_deletes || pp->ndata + pp->ndels == 0)
            continue;
        if (!cx->force && !policy_wants(cx, pp, now))
            continue;
        rc = compact_partition(cx, t, p, pp, seq, res, e);
    }
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        free(plan[p].data);
        free(plan[p].dels);
    }
    cdc_ice_live_files_free(files, nfiles);
    return rc;
}
