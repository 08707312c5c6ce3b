/*
 * The maintenance scheduler (see maintenance.h): one thread, one task at a time. The
 * thread wakes up for whatever is due first (a policy check of every table, expiry, an
 * orphan scan the main loop handed over, a compaction asked for by cdcctl) and waits on
 * its condition variable otherwise. Loaded tables are kept between rounds (a refresh only
 * checks the version).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "coordinator/maintenance.h"

#define MAINT_NICE 10

/* A table kept loaded between rounds, allocated on its own (the index borrows its
 * location as the key). */
typedef struct kept {
    char *location;
    cdc_ice_table_t *table;
} kept_t;

/* An on-demand compaction, from an HTTP thread waiting for it. */
typedef struct request {
    char table[256];
    bool done;
    cdc_err_t rc;
    cdc_error_t e;
    cdc_compact_result_t res;
    bool abandoned; /* the waiter timed out: the thread frees it */
    struct request *next;
} request_t;

struct cdc_maint {
    cdc_committer_t *committer;
    cdc_maint_options_t o;
    char *job, *fault;

    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    pthread_t thread;
    bool running;  /* the thread exists (under lock) */
    bool stopping; /* asked to stop (under lock); the thread checks it between files */
    uint64_t term;
    request_t *requests; /* FIFO (under lock) */
    char **orphan_keep;  /* a handed-over scan (under lock), NULL = none */
    size_t norphan_keep;
    bool orphan_due;
    int64_t next_orphan_ms; /* main loop's clock */

    /* the thread's own */
    cdc_strmap_t open_by_location; /* location -> kept_t, as many as the job has tables */
    kept_t **open;
    size_t nopen, open_cap;
    int64_t rate_start_ms, rate_bytes;

    cdc_counter_t *m_compactions, *m_dropped, *m_bytes_read, *m_bytes_written, *m_failures,
        *m_orphans, *m_expired;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool stopping(cdc_maint_t *m)
{
    pthread_mutex_lock(&m->lock);
    bool s = m->stopping;
    pthread_mutex_unlock(&m->lock);
    return s;
}

/* Sleeps up to ms, waking early when asked to stop; false when stopping. */
static bool nap(cdc_maint_t *m, int64_t ms)
{
    struct timespec ts = cdc_clock_deadline(ms);
    pthread_mutex_lock(&m->lock);
    while (!m->stopping && pthread_cond_timedwait(&m->wake, &m->lock, &ts) == 0)
        ;
    bool ok = !m->stopping;
    pthread_mutex_unlock(&m->lock);
    return ok;
}

/* Progress of a rewrite: keeps the bytes read per second under --compact-rate. */
static bool throttle(void *arg, int64_t bytes)
{
    cdc_maint_t *m = arg;
    if (m->o.rate_bytes <= 0)
        return !stopping(m);
    m->rate_bytes += bytes;
    int64_t due = m->rate_start_ms + m->rate_bytes * 1000 / m->o.rate_bytes;
    int64_t now = cdc_clock_mono_ms();
    if (due > now)
        return nap(m, due - now);
    if (now - due > 1000) { /* idle time does not build up a burst */
        m->rate_start_ms = now;
        m->rate_bytes = 0;
    }
    return !stopping(m);
}

/* The kept table at location, loaded on first use and refreshed. */
static cdc_err_t table_at(cdc_maint_t *m, const char *location, cdc_ice_table_t **out,
                          cdc_error_t *e)
{
    kept_t *k = cdc_strmap_get(&m->open_by_location, location);
    if (k != NULL) {
        *out = k->table;
        return cdc_ice_table_refresh(k->table, e);
    }
    cdc_storage_t *st = cdc_committer_storage(m->committer);
    cdc_err_t rc = cdc_ice_table_load(st, location, out, e);
    if (rc != CDC_OK)
        return rc;
    if (cdc_array_reserve(m->open, m->open_cap, m->nopen + 1, 64) == CDC_OK &&
        (k = calloc(1, sizeof(*k))) != NULL) {
        k->table = *out;
        if ((k->location = strdup(location)) != NULL &&
            cdc_strmap_put(&m->open_by_location, k->location, k) == CDC_OK) {
            m->open[m->nopen++] = k;
            return CDC_OK;
        }
        free(k->location);
        free(k);
    }
    cdc_ice_table_close(*out);
    *out = NULL;
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
}

static void close_tables(cdc_maint_t *m)
{
    for (size_t i = 0; i < m->nopen; i++) {
        cdc_ice_table_close(m->open[i]->table);
        free(m->open[i]->location);
        free(m->open[i]);
    }
    free(m->open);
    m->open = NULL;
    m->nopen = m->open_cap = 0;
    cdc_strmap_free(&m->open_by_location);
}

/* The metadata-file bound: previous-versions-max with delete-after-commit, once set. */
static void bound_metadata(cdc_maint_t *m, cdc_ice_table_t *t)
{
    char want[32];
    cdc_error_t e;
    if (m->o.metadata_versions_max <= 0)
        return;
    snprintf(want, sizeof(want), "%" PRId64, m->o.metadata_versions_max);
    const cdc_ice_props_t *p = &cdc_ice_table_metadata(t)->properties;
    const char *have = cdc_ice_props_get(p, "write.metadata.previous-versions-max");
    const char *del = cdc_ice_props_get(p, "write.metadata.delete-after-commit.enabled");
    if (have != NULL && strcmp(have, want) == 0 && del != NULL && strcmp(del, "true") == 0)
        return;
    cdc_ice_props_t set = {0};
    cdc_ice_props_set(&set, "write.metadata.previous-versions-max", want);
    cdc_ice_props_set(&set, "write.metadata.delete-after-commit.enabled", "true");
    /* under the table's commit lock, on fresh metadata: no race with the epoch commits */
    cdc_committer_table_lock(m->committer, cdc_ice_table_get_location(t));
    cdc_err_t rc = cdc_ice_table_refresh(t, &e);
    if (rc == CDC_OK)
        rc = cdc_ice_table_set_properties(t, &set, &e);
    cdc_committer_table_unlock(m->committer, cdc_ice_table_get_location(t));
    if (rc != CDC_OK)
        cdc_log_warn("maintenance: could not bound the metadata files of \"%s\": %s",
                     cdc_ice_table_get_location(t), e.msg);
    cdc_ice_props_free(&set);
}

/* Compacts one table; counts and logs. */
static cdc_err_t compact_one(cdc_maint_t *m, const char *name, const char *location, bool force,
                             cdc_compact_result_t *res, cdc_error_t *e)
{
    cdc_ice_table_t *t;
    cdc_err_t rc = table_at(m, location, &t, e);
    if (rc != CDC_OK)
        return rc;
    cdc_compact_ctx_t cx = {.committer = m->committer,
                            .job = m->job,
                            .term = m->term,
                            .policy = &m->o.policy,
                            .force = force,
                            .progress = throttle,
                            .progress_arg = m,
                            .fault = m->fault,
                            .nice = MAINT_NICE};
    cdc_compact_result_t r;
    memset(&r, 0, sizeof(r));
    m->rate_start_ms = cdc_clock_mono_ms();
    m->rate_bytes = 0;
    rc = cdc_compact_table(&cx, t, &r, e);
    if (r.partitions > 0) {
        cdc_committer_note_compaction(m->committer, name, t, r.bytes_read, r.files_removed);
        cdc_log_info("compacted \"%s\"%s: %d partitions (%d minor), %" PRId64 " files (%" PRId64
                     " bytes) into %" PRId64 " (%" PRId64 " bytes), %" PRId64
                     " deleted rows dropped",
                     name, force ? " on request" : "", r.partitions, r.minors, r.files_removed,
                     r.bytes_read, r.files_added, r.bytes_written, r.rows_deleted);
    }
    if (r.partitions > 0)
        cdc_mem_release(); /* the rewrite threads' buffers (buf.h) */
    cdc_metrics_counter_add(m->m_compactions, r.partitions);
    cdc_metrics_counter_add(m->m_dropped, r.dropped);
    cdc_metrics_counter_add(m->m_bytes_read, r.bytes_read);
    cdc_metrics_counter_add(m->m_bytes_written, r.bytes_written);
    if (res != NULL) {
        res->partitions += r.partitions;
        res->minors += r.minors;
        res->dropped += r.dropped;
        res->files_removed += r.files_removed;
        res->files_added += r.files_added;
        res->bytes_read += r.bytes_read;
        res->bytes_written += r.bytes_written;
        res->rows_deleted += r.rows_deleted;
    }
    return rc;
}

/* A policy round over every table the job commits to. */
static void compact_round(cdc_maint_t *m)
{
    char **names, **locs;
    size_t n = cdc_committer_tables(m->committer, &names, &locs);
    for (size_t i = 0; i < n && !stopping(m); i++) {
        cdc_error_t e;
        cdc_err_t rc = compact_one(m, names[i], locs[i], false, NULL, &e);
        if (rc == CDC_ERR_CLOSED || rc == CDC_ERR_FENCED)
            break;
        if (rc != CDC_OK) {
            cdc_metrics_counter_add(m->m_failures, 1);
            cdc_log_warn("compaction of \"%s\" failed (retried next round): %s", names[i], e.msg);
        }
    }
    cdc_storage_list_free(names, n);
    cdc_storage_list_free(locs, n);
}

static void run_request(cdc_maint_t *m, request_t *r)
{
    char **names, **locs, changelog[300];
    size_t n = cdc_committer_tables(m->committer, &names, &locs);
    bool found = false;
    snprintf(changelog, sizeof(changelog), "%s%s", r->table, CDC_CHANGELOG_SUFFIX);
    cdc_error_clear(&r->e);
    r->rc = CDC_OK;
    for (size_t i = 0; i < n && r->rc == CDC_OK; i++) {
        if (strcmp(names[i], r->table) != 0 && strcmp(names[i], changelog) != 0)
            continue;
        found = true;
        r->rc = compact_one(m, names[i], locs[i], true, &r->res, &r->e);
    }
    if (!found && r->rc == CDC_OK)
        r->rc = cdc_error_set(&r->e, CDC_ERR_NOT_FOUND,
                              "table \"%s\" is not one this job has committed to", r->table);
    cdc_storage_list_free(names, n);
    cdc_storage_list_free(locs, n);
}

static void expire_round(cdc_maint_t *m)
{
    size_t expired = 0;
    cdc_error_t e;
    char **names, **locs;
    size_t n = cdc_committer_tables(m->committer, &names, &locs);
    for (size_t i = 0; i < n && !stopping(m); i++) {
        cdc_ice_table_t *t;
        if (table_at(m, locs[i], &t, &e) == CDC_OK)
            bound_metadata(m, t);
    }
    cdc_storage_list_free(names, n);
    cdc_storage_list_free(locs, n);
    if (m->o.snapshot_retention_ms <= 0)
        return;
    if (cdc_committer_expire(m->committer, m->o.snapshot_retention_ms, m->o.snapshot_min_keep,
                             &expired, &e) != CDC_OK)
        cdc_log_warn("snapshot expiry failed: %s", e.msg);
    else if (expired > 0)
        cdc_log_info("expired %zu snapshots", expired);
    cdc_metrics_counter_add(m->m_expired, (int64_t)expired);
}

static void orphan_round(cdc_maint_t *m, char **keep, size_t nkeep)
{
    int deleted = 0;
    cdc_error_t e;
    if (cdc_committer_remove_orphans(m->committer, keep, nkeep, m->o.orphan_age_ms, &deleted, &e) !=
        CDC_OK)
        cdc_log_warn("orphan cleanup failed: %s", e.msg);
    else if (deleted > 0)
        cdc_log_info("orphan cleanup removed %d files", deleted);
    cdc_metrics_counter_add(m->m_orphans, deleted);
}

static void *maint_thread(void *arg)
{
    cdc_maint_t *m = arg;
    int64_t next_compact = cdc_clock_mono_ms() + m->o.compact_interval_ms;
    int64_t next_expire = cdc_clock_mono_ms() + m->o.orphan_interval_ms;
    size_t found = 0;
    cdc_error_t de;

    /* the job's tables in the warehouse, also those no epoch commits to now */
    if (cdc_committer_discover(m->committer, &found, &de) != CDC_OK)
        cdc_log_warn("maintenance: listing the warehouse for the job's tables failed (the "
                     "tables epochs commit to are maintained): %s",
                     de.msg);
    else if (found > 0)
        cdc_log_info("maintenance: %zu tables of the job found in the warehouse", found);

    for (;;) {
        request_t *req = NULL;
        char **keep = NULL;
        size_t nkeep = 0;
        bool orphans = false;

        pthread_mutex_lock(&m->lock);
        for (;;) {
            int64_t now = cdc_clock_mono_ms();
            if (m->stopping || m->requests != NULL || m->orphan_due ||
                (m->o.compact && m->o.compact_interval_ms > 0 && now >= next_compact) ||
                (m->o.orphan_interval_ms > 0 && now >= next_expire))
                break;
            int64_t wait = 60000;
            if (m->o.compact && m->o.compact_interval_ms > 0 && next_compact - now < wait)
                wait = next_compact - now;
            if (m->o.orphan_interval_ms > 0 && next_expire - now < wait)
                wait = next_expire - now;
            struct timespec ts = cdc_clock_deadline(wait);
            pthread_cond_timedwait(&m->wake, &m->lock, &ts);
        }
        if (m->stopping) {
            pthread_mutex_unlock(&m->lock);
            break;
        }
        if ((req = m->requests) != NULL)
            m->requests = req->next;
        else if (m->orphan_due) {
            orphans = true;
            keep = m->orphan_keep;
            nkeep = m->norphan_keep;
            m->orphan_keep = NULL;
            m->norphan_keep = 0;
            m->orphan_due = false;
        }
        pthread_mutex_unlock(&m->lock);

        int64_t started = cdc_clock_mono_ms();
        const char *what = "compaction";
        if (req != NULL) {
            what = "requested compaction";
            run_request(m, req);
            pthread_mutex_lock(&m->lock);
            req->done = true;
            bool abandoned = req->abandoned;
            pthread_cond_broadcast(&m->done);
            pthread_mutex_unlock(&m->lock);
            if (abandoned)
                free(req);
        } else if (orphans) {
            what = "orphan cleanup";
            orphan_round(m, keep, nkeep);
            cdc_storage_list_free(keep, nkeep);
        } else if (m->o.orphan_interval_ms > 0 && started >= next_expire) {
            what = "snapshot expiry";
            expire_round(m);
            next_expire = cdc_clock_mono_ms() + m->o.orphan_interval_ms;
        } else {
            compact_round(m);
            next_compact = cdc_clock_mono_ms() + m->o.compact_interval_ms;
        }
        int64_t took = cdc_clock_mono_ms() - started;
        if (took > 10000)
            cdc_log_info("maintenance: %s took %" PRId64 " ms (in the background)", what, took);
    }
    close_tables(m);
    return NULL;
}

cdc_err_t cdc_maint_open(cdc_maint_t **out, cdc_committer_t *committer,
                         const cdc_maint_options_t *o, cdc_metrics_t *metrics, cdc_error_t *e)
{
    cdc_maint_t *m = calloc(1, sizeof(*m));
    *out = NULL;
    if (m == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    m->committer = committer;
    m->o = *o;
    m->job = strdup(o->job);
    m->fault = o->fault ? strdup(o->fault) : NULL;
    if (m->job == NULL || (o->fault && m->fault == NULL)) {
        free(m->job);
        free(m->fault);
        free(m);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    m->o.job = m->job;
    m->o.fault = m->fault;
    if (m->o.policy.target_bytes <= 0)
        m->o.policy.target_bytes = CDC_ICE_REWRITE_TARGET_DEFAULT;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, NULL);
    pthread_cond_init(&m->done, NULL);
    if (metrics != NULL) {
        m->m_compactions = cdc_metrics_counter(
            metrics, "cdc_coordinator_compactions_total",
            "Partition rewrites (compactions) committed to Iceberg tables.", NULL);
        m->m_dropped = cdc_metrics_counter(
            metrics, "cdc_coordinator_compactions_dropped_total",
            "Partition rewrites dropped because their input files changed meanwhile.", NULL);
        m->m_failures = cdc_metrics_counter(
            metrics, "cdc_coordinator_compaction_failures_total",
            "Compactions of a table that failed (retried at the next round).", NULL);
        m->m_bytes_read = cdc_metrics_counter(
            metrics, "cdc_coordinator_compaction_read_bytes_total",
            "Bytes of data and delete files read by committed and dropped rewrites.", NULL);
        m->m_bytes_written =
            cdc_metrics_counter(metrics, "cdc_coordinator_compaction_written_bytes_total",
                                "Bytes of data files written by compaction.", NULL);
        m->m_orphans = cdc_metrics_counter(metrics, "cdc_coordinator_orphans_removed_total",
                                           "Orphan data files deleted from the warehouse.", NULL);
        m->m_expired = cdc_metrics_counter(metrics, "cdc_coordinator_snapshots_expired_total",
                                           "Iceberg snapshots expired.", NULL);
    }
    *out = m;
    return CDC_OK;
}

void cdc_maint_stop(cdc_maint_t *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    bool running = m->running;
    m->stopping = true;
    pthread_cond_broadcast(&m->wake);
    pthread_mutex_unlock(&m->lock);
    if (running) {
        int64_t t0 = cdc_clock_mono_ms();
        pthread_join(m->thread, NULL);
        int64_t took = cdc_clock_mono_ms() - t0;
        if (took > 1000)
            cdc_log_warn("maintenance: stopping its thread took %" PRId64
                         " ms (the task that ran was cancelled)",
                         took);
        else
            cdc_log_info("maintenance: stopped");
    }
    pthread_mutex_lock(&m->lock);
    m->running = false;
    /* requests nobody will run: their waiters learn it */
    while (m->requests != NULL) {
        request_t *r = m->requests;
        m->requests = r->next;
        r->rc = cdc_error_set(&r->e, CDC_ERR_UNAVAILABLE, "this coordinator stopped leading");
        r->done = true;
        if (r->abandoned)
            free(r);
    }
    pthread_cond_broadcast(&m->done);
    cdc_storage_list_free(m->orphan_keep, m->norphan_keep);
    m->orphan_keep = NULL;
    m->norphan_keep = 0;
    m->orphan_due = false;
    pthread_mutex_unlock(&m->lock);
}

void cdc_maint_start(cdc_maint_t *m, uint64_t term)
{
    cdc_maint_stop(m);
    pthread_mutex_lock(&m->lock);
    m->stopping = false;
    m->term = term;
    m->next_orphan_ms = cdc_clock_mono_ms() + m->o.orphan_interval_ms;
    m->running = pthread_create(&m->thread, NULL, maint_thread, m) == 0;
    if (!m->running)
        cdc_log_error("maintenance: could not start its thread: no compaction, expiry or "
                      "orphan cleanup in this term");
    pthread_mutex_unlock(&m->lock);
}

void cdc_maint_close(cdc_maint_t *m)
{
    if (m == NULL)
        return;
    cdc_maint_stop(m);
    pthread_cond_destroy(&m->wake);
    pthread_cond_destroy(&m->done);
    pthread_mutex_destroy(&m->lock);
    free(m->job);
    free(m->fault);
    free(m);
}

bool cdc_maint_tick(cdc_maint_t *m, int64_t now_mono, const cdc_checkpoint_t *const *keep,
                    size_t nkeep, bool skip)
{
    if (m->o.orphan_interval_ms <= 0 || now_mono < m->next_orphan_ms)
        return false;
    m->next_orphan_ms = now_mono + m->o.orphan_interval_ms;
    if (skip)
        return false;
    size_t n = 0, cap = 1;
    for (size_t k = 0; k < nkeep; k++)
        cap += keep[k]->nfiles;
    char **v = calloc(cap, sizeof(char *));
    if (v == NULL)
        return false;
    for (size_t k = 0; k < nkeep; k++)
        for (size_t i = 0; i < keep[k]->nfiles; i++)
            if ((v[n] = strdup(keep[k]->files[i].file.path)) != NULL)
                n++;
    qsort(v, n, sizeof(char *), cmp_str);
    pthread_mutex_lock(&m->lock);
    bool handed = m->running && !m->orphan_due;
    if (handed) {
        m->orphan_keep = v;
        m->norphan_keep = n;
        m->orphan_due = true;
        pthread_cond_broadcast(&m->wake);
        v = NULL; /* the thread's now */
        n = 0;
    }
    pthread_mutex_unlock(&m->lock);
    cdc_storage_list_free(v, n);
    return handed;
}

cdc_err_t cdc_maint_compact_now(cdc_maint_t *m, const char *table, int64_t timeout_ms,
                                cdc_compact_result_t *res, cdc_error_t *e)
{
    request_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    snprintf(r->table, sizeof(r->table), "%s", table);
    int64_t deadline = cdc_clock_mono_ms() + timeout_ms;
    pthread_mutex_lock(&m->lock);
    if (!m->running || m->stopping) {
        pthread_mutex_unlock(&m->lock);
        free(r);
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "this coordinator does not lead the job");
    }
    request_t **tail = &m->requests;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = r;
    pthread_cond_broadcast(&m->wake);
    while (!r->done) {
        int64_t left = deadline - cdc_clock_mono_ms();
        if (left <= 0)
            break;
        struct timespec ts = cdc_clock_deadline(left);
        pthread_cond_timedwait(&m->done, &m->lock, &ts);
    }
    cdc_err_t rc;
    if (!r->done) {
        r->abandoned = true; /* the thread frees it */
        pthread_mutex_unlock(&m->lock);
        return cdc_error_set(e, CDC_ERR_TIMEOUT,
                             "compaction of \"%s\" still runs after %" PRId64 " ms", table,
                             timeout_ms);
    }
    pthread_mutex_unlock(&m->lock);
    rc = r->rc;
    if (rc != CDC_OK && e != NULL)
        *e = r->e;
    if (res != NULL)
        *res = r->res;
    free(r);
    return rc;
}
