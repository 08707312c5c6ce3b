/*
 * Compaction of one table, partition by partition (see compact.h for the plan and why it
 * is correct under concurrent epoch commits).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "coordinator/assign.h"
#include "coordinator/commit.h"
#include "coordinator/compact.h"

#define COMPACT_COMMIT_ATTEMPTS 8
/* A minor rewrite keeps a partition's largest file when it holds this many times the bytes
 * of the others (or is large by the target size itself). */
#define BASE_RATIO 4

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
    int64_t newest_ms;       /* commit time of the newest live file, data or delete */
    size_t nsmall;
    bool idle;             /* the idle rule holds: a major rewrite (policy_idle) */
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

/* The rewrites of one round of a table, committed together in one replace snapshot. */
typedef struct batch {
    inputs_t in; /* every input file (paths borrowed from the live files) */
    size_t capin;
    cdc_ice_data_file_t *out; /* every file written */
    size_t nout, capout;
    cdc_compact_result_t res; /* what committing it adds to the table's result */
} batch_t;

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

/* The idle rule: no file of the partition is younger than idle_ms and it still holds
 * deletes or two small files, so a quiet table ends in the layout a reader reads fastest
 * (one file per partition, no delete to apply) instead of the minor rounds' base, delta
 * and merged deletes. Once done it no longer holds: nothing to do until the next change. */
static bool policy_idle(const cdc_compact_policy_t *p, const part_plan_t *pp, int64_t now_ms)
{
    return p->idle_ms > 0 && (pp->ndels > 0 || pp->nsmall >= 2) && pp->newest_ms > 0 &&
           now_ms - pp->newest_ms > p->idle_ms;
}

static bool policy_wants(const cdc_compact_ctx_t *cx, const part_plan_t *pp, int64_t now_ms)
{
    const cdc_compact_policy_t *p = cx->policy;
    if (pp->idle)
        return true;
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
    /* the rewrite's data files first, its merged deletes after them */
    size_t ndata_out = 0;
    for (size_t i = 0; i < nout; i++)
        if (out[i].content == CDC_ICE_CONTENT_DATA) {
            cdc_ice_data_file_t tmp = out[ndata_out];
            out[ndata_out++] = out[i];
            out[i] = tmp;
        }
    cdc_ice_props_t summary = {0};
    cdc_err_t rc = CDC_OK;
    *committed = false;
    cdc_ice_props_set(&summary, "cdc.maintenance", "compaction");
    /* under the table's commit lock: the epoch commits wait for this one instead of the two
     * racing (at 100 ms epochs a rewrite's commit lost every race otherwise) */
    if (cx->committer != NULL)
        cdc_committer_table_lock(cx->committer, cdc_ice_table_get_location(t));
    for (int attempt = 0;; attempt++) {
        if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
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
        c.data_files = out; /* data files first, then the merged deletes (see below) */
        c.ndata_files = ndata_out;
        c.delete_files = out + ndata_out;
        c.ndelete_files = nout - ndata_out;
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
    if (cx->committer != NULL)
        cdc_committer_table_unlock(cx->committer, cdc_ice_table_get_location(t));
    cdc_ice_props_free(&summary);
    return rc;
}

/* order[0..n) (indices into data) sorted by file size, largest first (insertion sort:
 * a partition holds few files between rounds). */
static void order_by_size_desc(const cdc_ice_live_file_t *data, size_t *order, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        size_t v = order[i], j = i;
        for (;
             j > 0 && data[order[j - 1]].file.file_size_in_bytes < data[v].file.file_size_in_bytes;
             j--)
            order[j] = order[j - 1];
        order[j] = v;
    }
}

/* Plans and rewrites one partition, adding its inputs and files to the batch. */
static cdc_err_t compact_partition(const cdc_compact_ctx_t *cx, cdc_ice_table_t *t, int part,
                                   part_plan_t *pp, batch_t *b, cdc_error_t *e)
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
    /*
     * Minor or major. A minor rewrite leaves the large data files (the base: large by the
     * target size, or a tier below, see there) alone and
     * rewrites the others, and writes the partition's equality deletes again merged into one file
     * (per list of equality ids and Iceberg partition) with the same data sequence number
     * N: every delete is newer than every large file (checked here), and every data file
     * newer than the large ones is rewritten with the deletes applied (sequence number N:
     * no delete <= N applies to it), so the merged file deletes from exactly the files
     * each delete deleted from before. A major rewrite (asked for, past the delete ratio,
     * or a delete not newer than a large file) applies the deletes for good.
     */
    bool *base = calloc(pp->ndata + 1, sizeof(bool));
    size_t *order = calloc(pp->ndata + 1, sizeof(size_t));
    int64_t max_big = -1, rest = 0;
    size_t nbig = 0, nsmall = 0;
    bool newer = true;
    if (base == NULL || order == NULL) {
        free(base);
        free(order);
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < pp->ndata; i++) {
        base[i] = !is_small(&pp->data[i], target);
        if (!base[i]) {
            order[nsmall++] = i;
            rest += pp->data[i].file.file_size_in_bytes;
        }
    }
    /* Below the target size, tiers as in a log-structured merge: the small files from the
     * largest down, each kept while it holds BASE_RATIO times the bytes of all smaller ones
     * (and every larger one is kept); the others are merged. A merged file is kept until
     * the files after it add up to a BASE_RATIO-th of it, so a byte is rewritten about
     * log_(BASE_RATIO+1)(partition / round) times, not once per round (an append-only
     * changelog would otherwise be rewritten whole every round). */
    order_by_size_desc(pp->data, order, nsmall);
    for (size_t k = 0; pp->ndata > 1 && k < nsmall; k++) {
        int64_t sz = pp->data[order[k]].file.file_size_in_bytes;
        rest -= sz;
        if (sz < BASE_RATIO * rest)
            break;
        base[order[k]] = true;
    }
    free(order);
    for (size_t i = 0; i < pp->ndata; i++)
        if (base[i]) {
            nbig++;
            if (pp->data[i].sequence_number > max_big)
                max_big = pp->data[i].sequence_number;
        }
    for (size_t i = 0; i < pp->ndels; i++)
        newer &= pp->dels[i].sequence_number > max_big;
    bool heavy = cx->policy->delete_ratio_pct > 0 &&
                 pp->del_rows * 100 >=
                     cx->policy->delete_ratio_pct * (pp->data_rows > 0 ? pp->data_rows : 1);
    bool minor =
        nbig > 0 && newer && !heavy && !pp->idle && !cx->force; /* no deletes: bin-packing */
    for (size_t i = 0; i < pp->ndata; i++)
        if (minor ? !base[i] : is_small(&pp->data[i], target) || has_deletes(pp, &pp->data[i])) {
            rw[nrw++] = pp->data[i];
            in.paths[in.n++] = pp->data[i].file.path;
        }
    free(base);
    for (size_t i = 0; i < pp->ndels; i++)
        in.paths[in.n++] = pp->dels[i].file.path;
    /* nothing to gain: one file that stays as it is */
    if ((pp->ndels == 0 && nrw < 2) || (minor && nrw <= 1 && pp->ndels <= 1))
        goto done;
    minor = minor && pp->ndels > 0; /* merged deletes to write */
    int64_t last = cdc_ice_table_last_checkpoint(t, cx->job);
    snprintf(tag, sizeof(tag), "%s-e%" PRId64 "-p%d-compact", cx->job, last < 0 ? 0 : last, part);
    cdc_ice_rewrite_options_t ro = {.target_file_bytes = target,
                                    .tag = tag,
                                    .progress = cx->progress,
                                    .progress_arg = cx->progress_arg,
                                    .keep_deletes = minor};
    if ((rc = cdc_ice_table_rewrite(t, rw, nrw, pp->dels, pp->ndels, &ro, &out, &nout, &st, e)) !=
        CDC_OK)
        goto done;
    if (cdc_array_reserve(b->in.paths, b->capin, b->in.n + in.n, 64) != CDC_OK ||
        cdc_array_reserve(b->out, b->capout, b->nout + nout, 16) != CDC_OK) {
        cdc_ice_rewrite_discard(t, out, nout);
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    memcpy(b->in.paths + b->in.n, in.paths, in.n * sizeof(char *));
    b->in.n += in.n;
    memcpy(b->out + b->nout, out, nout * sizeof(*out));
    b->nout += nout;
    free(out); /* the files themselves moved to the batch */
    b->res.partitions++;
    b->res.files_removed += (int64_t)in.n;
    b->res.files_added += (int64_t)nout;
    b->res.bytes_read += st.bytes_read;
    b->res.bytes_written += st.bytes_written;
    b->res.rows_deleted += st.rows_deleted;
    b->res.minors += minor;
    cdc_log_debug("rewrote \"%s\" partition %d (%s): %zu data and %zu delete files (%" PRId64
                  " bytes) into %zu (%" PRId64 " bytes), %" PRId64 " deleted rows dropped",
                  cdc_ice_table_get_location(t), part, minor ? "minor" : "major", nrw, pp->ndels,
                  st.bytes_read, nout, st.bytes_written, st.rows_deleted);
done:
    free(rw);
    free(in.paths);
    return rc;
}

/* Commits a round's rewrites in one replace snapshot (or drops them all, inputs changed). */
static cdc_err_t commit_batch(const cdc_compact_ctx_t *cx, cdc_ice_table_t *t, int64_t seq,
                              batch_t *b, cdc_compact_result_t *res, cdc_error_t *e)
{
    bool committed = false;
#if CDC_FAULTS
    if (cx->fault != NULL && strcmp(cx->fault, "exit-mid-compaction") == 0) {
        cdc_log_error("fault injection: exiting at \"exit-mid-compaction\" (%zu files written)",
                      b->nout);
        _exit(86);
    }
#endif
    qsort(b->in.paths, b->in.n, sizeof(char *), cmp_str);
    cdc_err_t rc = commit_rewrite(cx, t, seq, &b->in, b->out, b->nout, &committed, e);
    if (rc == CDC_ERR_STALE) {
        cdc_log_warn("compaction of \"%s\" dropped (%d partitions): %s",
                     cdc_ice_table_get_location(t), b->res.partitions, e->msg);
        cdc_error_clear(e);
        res->dropped += b->res.partitions;
        rc = CDC_OK;
    } else if (rc == CDC_ERR_CONFLICT) {
        res->conflicts += b->res.partitions;
    }
    if (!committed) {
        /* a definite refusal (or a dropped rewrite) leaves the files unreferenced; after an
         * unknown outcome they may be referenced: orphan cleanup decides then */
        if (rc == CDC_OK || rc == CDC_ERR_CONFLICT || rc == CDC_ERR_FENCED)
            cdc_ice_rewrite_discard(t, b->out, b->nout);
        else
            cdc_ice_data_files_free(b->out, b->nout);
        return rc;
    }
    cdc_ice_data_files_free(b->out, b->nout);
    res->partitions += b->res.partitions;
    res->minors += b->res.minors;
    res->files_removed += b->res.files_removed;
    res->files_added += b->res.files_added;
    res->bytes_read += b->res.bytes_read;
    res->bytes_written += b->res.bytes_written;
    res->rows_deleted += b->res.rows_deleted;
    return CDC_OK;
}

/* The rewrites of a round: every partition the policy (or force) picks, into the batch. */
typedef struct rewrite_job {
    const cdc_compact_ctx_t *cx;
    cdc_ice_table_t *t;
    part_plan_t *plan;
    batch_t *b;
    int64_t now;
    cdc_error_t *e;
    cdc_err_t rc;
} rewrite_job_t;

static void rewrite_partitions(rewrite_job_t *j)
{
    for (int p = 0; p < CDC_PARTITIONS && j->rc == CDC_OK; p++) {
        part_plan_t *pp = &j->plan[p];
        if (pp->position_deletes || pp->ndata + pp->ndels == 0)
            continue;
        if (!j->cx->force && !policy_wants(j->cx, pp, j->now))
            continue;
        j->rc = compact_partition(j->cx, j->t, p, pp, j->b, j->e);
    }
}

/* The rewrites at cx->nice (compact.h); the caller waits for them (the table is not
 * touched by it meanwhile). */
static void *rewrite_thread(void *arg)
{
    rewrite_job_t *j = arg;
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), j->cx->nice);
    rewrite_partitions(j);
    return NULL;
}

cdc_err_t cdc_compact_table(const cdc_compact_ctx_t *cx, cdc_ice_table_t *t,
                            cdc_compact_result_t *res, cdc_error_t *e)
{
    cdc_ice_live_file_t *files = NULL;
    size_t nfiles = 0;
    part_plan_t plan[CDC_PARTITIONS];
    int64_t now = cdc_clock_wall_ms();
    batch_t b;
    cdc_err_t rc;

    memset(&b, 0, sizeof(b));
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
        if (cdc_array_resize(*arr, *n + 1) != CDC_OK) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            break;
        }
        (*arr)[(*n)++] = files[i]; /* shallow: files owns the strings */
        const cdc_ice_snapshot_t *s = cdc_ice_metadata_snapshot(md, files[i].snapshot_id);
        int64_t at = s ? s->timestamp_ms : 1; /* expired snapshot: old */
        if (at > pp->newest_ms)
            pp->newest_ms = at;
        if (files[i].file.content == CDC_ICE_CONTENT_DATA) {
            pp->data_rows += files[i].file.record_count;
            if (is_small(&files[i], cx->policy->target_bytes)) {
                pp->nsmall++;
                if (pp->oldest_small_ms == 0 || at < pp->oldest_small_ms)
                    pp->oldest_small_ms = at;
            }
        } else {
            pp->del_rows += files[i].file.record_count;
        }
    }
    for (int p = 0; p < CDC_PARTITIONS; p++)
        plan[p].idle = policy_idle(cx->policy, &plan[p], now);
    if (rc == CDC_OK) {
        rewrite_job_t job = {cx, t, plan, &b, now, e, CDC_OK};
        pthread_t th;
        if (cx->nice > 0 && pthread_create(&th, NULL, rewrite_thread, &job) == 0)
            pthread_join(th, NULL);
        else
            rewrite_partitions(&job);
        rc = job.rc;
    }
    if (rc == CDC_OK && b.nout + b.in.n > 0)
        rc = commit_batch(cx, t, seq, &b, res, e);
    else
        cdc_ice_rewrite_discard(t, b.out, b.nout);
    free(b.in.paths);
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        free(plan[p].data);
        free(plan[p].dels);
    }
    cdc_ice_live_files_free(files, nfiles);
    return rc;
}
