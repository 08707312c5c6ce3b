/*
 * Iceberg commits of recorded checkpoints (see commit.h), over common/iceberg/table.h.
 * StagedFile.table is "<namespace>.<table>" (split at the first dot); the table lives
 * at <warehouse>/<namespace>/<table>.
 *
 * The committer, the coordinator's only writer of the warehouse. Every part works on its
 * cache of loaded tables and the lock that guards it (commit_int.h): the parallel
 * per-table commit with its table layouts, the pending file lists of large checkpoints,
 * and the snapshot expiry and orphan removal that run between commits. A table's schema
 * evolution is commit_schema.c.
 */
#include "coordinator/commit_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/assert.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table.h"
#include "common/log.h"
#include "coordinator/layout.h"
#include "coordinator/offsets_base.h"

cdc_err_t cdc_committer_open(cdc_committer_t **out, const cdc_committer_options_t *opt,
                             cdc_error_t *e)
{
    cdc_committer_t *c = calloc(1, sizeof(*c));
    cdc_storage_config_t sc;
    cdc_err_t rc;

    *out = NULL;
    if (c == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    memset(&sc, 0, sizeof(sc));
    if (opt->s3 != NULL)
        sc = cdc_s3_options_storage(opt->s3);
    sc.timeout_ms = 10000;
    sc.max_retries = 2;
    pthread_mutex_init(&c->known_lock, NULL);
    cdc_table_stats_init(&c->stats);
    c->warehouse = strdup(opt->warehouse);
    c->job = strdup(opt->job);
    c->partition_by = opt->partition_by ? strdup(opt->partition_by) : NULL;
    c->sort_by = opt->sort_by ? strdup(opt->sort_by) : NULL;
    if (c->warehouse == NULL || c->job == NULL || (opt->partition_by && !c->partition_by) ||
        (opt->sort_by && !c->sort_by)) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((rc = cdc_storage_open(opt->warehouse, &sc, &c->storage, e)) != CDC_OK)
        goto fail;
    *out = c;
    return CDC_OK;
fail:
    cdc_committer_close(c);
    return rc;
}

void cdc_committer_close(cdc_committer_t *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->ntables; i++) {
        table_t *t = c->tables[i];
        cdc_ice_table_close(t->open);
        pthread_mutex_destroy(&t->mu);
        free(t->location);
        free(t->name);
        free(t);
    }
    free(c->tables);
    free(c->known);
    cdc_strmap_free(&c->by_location);
    cdc_storage_close(c->storage);
    for (size_t i = 0; i < c->nsuspects; i++)
        free(c->suspects[i].location);
    free(c->suspects);
    free(c->warehouse);
    free(c->job);
    free(c->partition_by);
    free(c->sort_by);
    for (size_t i = 0; i < c->nlayouts; i++) {
        free(c->layouts[i]->spec_json);
        free(c->layouts[i]->order_json);
        free(c->layouts[i]->partition_by);
        free(c->layouts[i]->sort_by);
        free(c->layouts[i]);
    }
    free(c->layouts);
    for (size_t i = 0; i < c->nstale; i++)
        free(c->stale[i]);
    free(c->stale);
    cdc_strmap_free(&c->layout_by_name);
    pthread_mutex_destroy(&c->known_lock);
    cdc_table_stats_destroy(&c->stats);
    free(c);
}

void cdc_committer_set_term(cdc_committer_t *c, uint64_t term)
{
    c->term = term;
}

/* The entry of the table at location, added on first use (under known_lock); NULL when
 * memory ran out. The entry stays where it is until the committer closes. */
static table_t *table_entry(cdc_committer_t *c, const char *location)
{
    table_t *t = cdc_strmap_get(&c->by_location, location);
    if (t != NULL)
        return t;
    if (cdc_array_reserve(c->tables, c->tables_cap, c->ntables + 1, 64) != CDC_OK ||
        (t = calloc(1, sizeof(*t))) == NULL)
        return NULL;
    if ((t->location = strdup(location)) == NULL ||
        cdc_strmap_put(&c->by_location, t->location, t) != CDC_OK) {
        free(t->location);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    c->tables[c->ntables++] = t;
    return t;
}

/* The lock of the table at location (created on first use); NULL when memory ran out
 * (the commit then simply runs unlocked: races stay correct). */
static pthread_mutex_t *table_mutex(cdc_committer_t *c, const char *location)
{
    pthread_mutex_lock(&c->known_lock);
    table_t *t = table_entry(c, location);
    pthread_mutex_unlock(&c->known_lock);
    return t != NULL ? &t->mu : NULL;
}

void cdc_committer_table_lock(cdc_committer_t *c, const char *location)
{
    pthread_mutex_t *mu = table_mutex(c, location);
    if (mu != NULL)
        pthread_mutex_lock(mu);
}

void cdc_committer_table_unlock(cdc_committer_t *c, const char *location)
{
    pthread_mutex_t *mu = table_mutex(c, location);
    if (mu != NULL)
        pthread_mutex_unlock(mu);
}

uint64_t cdc_committer_term(cdc_committer_t *c)
{
    return c->term;
}

cdc_storage_t *cdc_committer_storage(cdc_committer_t *c)
{
    return c->storage;
}

const char *cdc_committer_job(const cdc_committer_t *c)
{
    return c->job;
}

size_t cdc_committer_tables(cdc_committer_t *c, char ***names, char ***locations)
{
    size_t n = 0;
    *names = NULL;
    *locations = NULL;
    pthread_mutex_lock(&c->known_lock);
    char **nv = calloc(c->nknown + 1, sizeof(char *));
    char **lv = calloc(c->nknown + 1, sizeof(char *));
    for (size_t i = 0; nv && lv && i < c->nknown; i++) {
        if ((nv[n] = strdup(c->known[i]->name)) == NULL ||
            (lv[n] = strdup(c->known[i]->location)) == NULL) {
            free(nv[n]);
            break;
        }
        n++;
    }
    pthread_mutex_unlock(&c->known_lock);
    if (nv == NULL || lv == NULL) {
        free(nv);
        free(lv);
        return 0;
    }
    *names = nv;
    *locations = lv;
    return n;
}

void cdc_committer_note_compaction(cdc_committer_t *c, const char *table, const cdc_ice_table_t *t,
                                   int64_t bytes_rewritten, int64_t files_rewritten)
{
    cdc_table_stats_note_compaction(&c->stats, table, t, bytes_rewritten, files_rewritten);
}

/* Whether the table was added (false: known already, or memory ran out, logged: the
 * next commit to the table tries again). */
static bool remember_table(cdc_committer_t *c, const char *table, const char *location)
{
    bool added = false;
    pthread_mutex_lock(&c->known_lock);
    table_t *t = table_entry(c, location);
    if (t != NULL && t->name != NULL) {
        pthread_mutex_unlock(&c->known_lock);
        return false;
    }
    if (t != NULL && cdc_array_reserve(c->known, c->known_cap, c->nknown + 1, 64) == CDC_OK &&
        (t->name = strdup(table)) != NULL) {
        c->known[c->nknown++] = t;
        added = true;
    }
    pthread_mutex_unlock(&c->known_lock);
    if (!added)
        cdc_log_error("table \"%s\": out of memory: not yet among the tables maintained", table);
    return added;
}

cdc_err_t cdc_committer_discover(cdc_committer_t *c, size_t *found, cdc_error_t *e)
{
    static const char hint[] = "/metadata/version-hint.text";
    const size_t hlen = sizeof(hint) - 1;
    char **locs = NULL;
    size_t n = 0;
    cdc_err_t rc = cdc_storage_list(c->storage, c->warehouse, &locs, &n, e);

    *found = 0;
    for (size_t i = 0; rc == CDC_OK && i < n; i++) {
        size_t len = strlen(locs[i]);
        if (len <= hlen || strcmp(locs[i] + len - hlen, hint) != 0)
            continue;
        locs[i][len - hlen] = '\0'; /* the table's location */
        /* "<ns>.<table>" from the location's last two components */
        char *tab = strrchr(locs[i], '/');
        if (tab == NULL || tab == locs[i])
            continue;
        *tab = '\0';
        char *ns = strrchr(locs[i], '/');
        *tab = '/';
        if (ns == NULL)
            continue;
        char name[512];
        snprintf(name, sizeof(name), "%.*s.%s", (int)(tab - ns - 1), ns + 1, tab + 1);
        cdc_ice_table_t *t;
        cdc_error_t le;
        if (cdc_ice_table_load(c->storage, locs[i], &t, &le) != CDC_OK) {
            cdc_log_warn("maintenance: the table at %s could not be read: %s", locs[i], le.msg);
            continue;
        }
        const cdc_ice_snapshot_t *snap =
            cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t));
        const char *job = snap ? cdc_ice_props_get(&snap->summary, CDC_ICE_SUMMARY_JOB) : NULL;
        if (job != NULL && strcmp(job, c->job) == 0)
            *found += remember_table(c, name, locs[i]);
        cdc_ice_table_close(t);
    }
    cdc_storage_list_free(locs, n);
    return rc;
}

/* The kept table at location, taken out of the cache (NULL when none). */
static cdc_ice_table_t *take_table(cdc_committer_t *c, const char *location)
{
    cdc_ice_table_t *t = NULL;
    pthread_mutex_lock(&c->known_lock);
    table_t *k = cdc_strmap_get(&c->by_location, location);
    if (k != NULL) {
        t = k->open;
        k->open = NULL;
    }
    pthread_mutex_unlock(&c->known_lock);
    return t;
}

/* Keeps t (committed or validated just now, loaded by location) for the next commit;
 * takes ownership of t. */
static void keep_table(cdc_committer_t *c, const char *location, cdc_ice_table_t *t)
{
    cdc_ice_table_t *old = NULL;
    pthread_mutex_lock(&c->known_lock);
    table_t *k = table_entry(c, location);
    if (k != NULL) {
        old = k->open; /* NULL: the table's commits hold its lock */
        k->open = t;
        t = NULL;
    }
    pthread_mutex_unlock(&c->known_lock);
    cdc_ice_table_close(old);
    cdc_ice_table_close(t);
}

/* "<ns>.<table>" -> location; caller frees. */
static char *table_location(cdc_committer_t *c, const char *qualified)
{
    const char *dot = strchr(qualified, '.');
    char ns[256];
    size_t nlen;

    if (dot == NULL || dot == qualified || dot[1] == '\0')
        return NULL;
    nlen = (size_t)(dot - qualified);
    if (nlen >= sizeof(ns))
        return NULL;
    memcpy(ns, qualified, nlen);
    ns[nlen] = '\0';
    return cdc_ice_table_location(c->warehouse, ns, dot + 1);
}

/* Which live mirror files a commit removes: those of the truncating slots. */
typedef struct truncate_match {
    const char *job;
    uint32_t partitions; /* bit p = slot p truncated */
} truncate_match_t;

/*
 * Slot that wrote a staged file, from its name "<job>-e<epoch>-p<P>-<kind>-<uuid>.parquet"
 * (worker/stage_write.c), or -1 when the file is not one of this job's staged files.
 */
int cdc_committer_file_partition(const char *path, const char *job)
{
    const char *base = strrchr(path, '/');
    size_t jl = strlen(job);
    char *end;
    long p;

    base = base ? base + 1 : path;
    if (strncmp(base, job, jl) != 0 || base[jl] != '-' || base[jl + 1] != 'e')
        return -1;
    base += jl + 2;
    if (*base < '0' || *base > '9')
        return -1;
    strtoull(base, &end, 10);
    if (end[0] != '-' || end[1] != 'p' || end[2] < '0' || end[2] > '9')
        return -1;
    p = strtol(end + 2, &end, 10);
    if (*end != '-' || p < 0 || p >= CDC_PARTITIONS)
        return -1;
    return (int)p;
}

static bool truncated_file(const cdc_ice_data_file_t *f, void *arg)
{
    const truncate_match_t *m = arg;
    int p = cdc_committer_file_partition(f->path, m->job);
    return p >= 0 && (m->partitions & (1u << p)) != 0;
}

cdc_err_t cdc_committer_table_stats(cdc_committer_t *c, cdc_table_stats_t **out, size_t *n)
{
    return cdc_table_stats_copy(&c->stats, out, n);
}

cdc_err_t cdc_committer_layouts(cdc_committer_t *c, cdc_table_layout_t **out, size_t *n)
{
    cdc_err_t rc = CDC_OK;
    pthread_mutex_lock(&c->known_lock);
    *out = malloc((c->nlayouts ? c->nlayouts : 1) * sizeof(**out));
    *n = *out != NULL ? c->nlayouts : 0;
    if (*out == NULL)
        rc = CDC_ERR_NOMEM;
    for (size_t i = 0; i < *n; i++)
        (*out)[i] = *c->layouts[i];
    pthread_mutex_unlock(&c->known_lock);
    return rc;
}

/* The layout entry of table (under known_lock), added when new; NULL when memory ran
 * out (the layout is then applied at the table's next commit). */
static cdc_table_layout_t *layout_slot(cdc_committer_t *c, const char *table)
{
    cdc_table_layout_t *l = cdc_strmap_get(&c->layout_by_name, table);
    if (l != NULL)
        return l;
    if (cdc_array_reserve(c->layouts, c->layouts_cap, c->nlayouts + 1, 64) != CDC_OK ||
        (l = calloc(1, sizeof(*l))) == NULL)
        return NULL;
    snprintf(l->table, sizeof(l->table), "%s", table);
    if (cdc_strmap_put(&c->layout_by_name, l->table, l) != CDC_OK) {
        free(l);
        return NULL;
    }
    c->layouts[c->nlayouts++] = l;
    return l;
}

/*
 * Makes the declared partition spec and sort order (--partition-by, --sort-by) the
 * table's defaults, once per table and process, and again after a type change moved a
 * source name to a new field (record_schema_change). A declaration that does not fit the
 * table (an unknown column, a transform its type does not take) is logged and shown in
 * /status; the table keeps its layout and commits go on: files always name the spec
 * they were written for, so any spec of the table's history stays correct.
 */
static void apply_layout(cdc_committer_t *c, cdc_ice_table_t *t, const char *table)
{
    cdc_table_layout_t *l;
    char *pb, *sb, *json = NULL, *ojson = NULL;
    const cdc_ice_partition_spec_t *spec;
    const cdc_ice_sort_order_t *order;
    bool changed = false;
    cdc_error_t e;
    cdc_err_t rc;

    pthread_mutex_lock(&c->known_lock);
    l = layout_slot(c, table);
    bool done = l == NULL || l->applied;
    pthread_mutex_unlock(&c->known_lock);
    if (done)
        return;
    pb = cdc_layout_lookup(c->partition_by, table);
    sb = cdc_layout_lookup(c->sort_by, table);
    cdc_error_clear(&e);
    for (int attempt = 0;; attempt++) {
        rc = cdc_ice_table_set_layout(t, pb, sb, &changed, &e);
        if (rc != CDC_ERR_CONFLICT || attempt + 1 >= COMMIT_ATTEMPTS)
            break;
        if ((rc = cdc_ice_table_refresh(t, &e)) != CDC_OK)
            break;
    }
    if (rc != CDC_OK && rc != CDC_ERR_INVALID && rc != CDC_ERR_UNSUPPORTED) {
        /* not applied: tried again at the table's next commit */
        cdc_log_warn("table \"%s\": could not apply its layout yet: %s", table, e.msg);
        free(pb);
        free(sb);
        return;
    }
    spec = cdc_ice_table_default_spec(t);
    order = cdc_ice_table_default_sort_order(t);
    if (rc == CDC_OK && spec != NULL && spec->nfields > 0) {
        json_t *j = cdc_ice_partition_spec_to_jansson(spec);
        json = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
    }
    if (rc == CDC_OK && order != NULL && order->nfields > 0) {
        json_t *j = cdc_ice_sort_order_to_jansson(order);
        ojson = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
    }
    if (rc != CDC_OK)
        cdc_log_error("table \"%s\": --partition-by/--sort-by not applied: %s; the table keeps "
                      "its current layout",
                      table, e.msg);
    else if (changed)
        cdc_log_info("table \"%s\": layout now partitioned by \"%s\", sorted by \"%s\"", table,
                     pb ? pb : "", sb ? sb : "");
    pthread_mutex_lock(&c->known_lock);
    /* applied again: the strings before stay until close (cdc_committer_layouts copies
     * the pointers) */
    char *old[] = {l->spec_json, l->order_json, l->partition_by, l->sort_by};
    for (size_t i = 0; i < 4; i++) {
        if (old[i] == NULL)
            continue;
        if (cdc_array_reserve(c->stale, c->stale_cap, c->nstale + 1, 16) == CDC_OK)
            c->stale[c->nstale++] = old[i];
        else
            cdc_log_error("out of memory keeping a table layout's strings"); /* (leaked) */
    }
    l->applied = true;
    l->error[0] = '\0';
    l->spec_id = json ? spec->spec_id : 0;
    l->spec_json = json;
    l->order_id = ojson ? order->order_id : 0;
    l->order_json = ojson;
    l->partition_by = pb;
    l->sort_by = sb;
    if (rc != CDC_OK)
        snprintf(l->error, sizeof(l->error), "%s", e.msg);
    pthread_mutex_unlock(&c->known_lock);
}

/* One table's files of one record of a group: recs[rec]->files[files[0..nfiles)] (found
 * once per commit, not by a scan of every file per table). */
typedef struct table_epoch {
    size_t rec;
    size_t *files;
    size_t nfiles;
} table_epoch_t;

/* The records of a group that touch one table (files, a schema or a truncate), in order. */
typedef struct table_files {
    table_epoch_t *epochs;
    size_t nepochs, cap;
} table_files_t;

/*
 * Whether rec carries a schema update for table that first does not: then rec's files
 * may need a schema first's snapshot does not have. (Every owner of the table's slots
 * reports its schema, so most records carry the same updates as the one before.)
 */
static bool schema_moves(const cdc_checkpoint_t *first, const cdc_checkpoint_t *rec,
                         const char *table)
{
    for (size_t i = 0; i < rec->nschemas; i++) {
        bool known = false;
        if (strcmp(rec->schemas[i].table, table) != 0)
            continue;
        for (size_t j = 0; j < first->nschemas && !known; j++)
            known = strcmp(first->schemas[j].table, table) == 0 &&
                    cdc_schema_update_same(&first->schemas[j], &rec->schemas[i]);
        if (!known)
            return true;
    }
    return false;
}

/*
 * One snapshot of a table for the records ep[0..nep) of a group (docs/iceberg.md, "Group
 * commits"): only the first may carry a truncate for the table or a schema update the
 * others do not carry (see commit_table), so the schema is evolved once before any file
 * is added, and each record's files get the data sequence number of their place in the
 * group. Records the table already holds (its cdc.checkpoint-id) are left out;
 * cdc.checkpoint-id and cdc.offsets are the last record's.
 */
static cdc_err_t commit_table_locked(cdc_committer_t *c, cdc_checkpoint_t *const *recs,
                                     const char *table, const table_epoch_t *ep, size_t nep,
                                     cdc_commit_result_t *res, cdc_error_t *e)
{
    const cdc_checkpoint_t *first = recs[ep[0].rec], *last = recs[ep[nep - 1].rec];
    char *location = table_location(c, table);
    cdc_ice_schema_t schema;
    bool have_schema = false;
    int64_t version = 0;
    const char *policy = "";
    cdc_ice_table_t *t = NULL;
    cdc_ice_data_file_t *data = NULL, *dels = NULL;
    int64_t *data_seqs = NULL, *del_seqs = NULL;
    size_t ndata = 0, ndels = 0;
    cdc_ice_props_t summary = {0};
    char num[32], *offsets = NULL;
    truncate_match_t trunc = {c->job, cdc_checkpoint_truncated(first, table)};
    cdc_err_t rc;

    memset(&schema, 0, sizeof(schema));
    if (location == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "staged file names table \"%s\", expected \"<namespace>.<table>\"",
                             table);
    if ((rc = cdc_commit_schema_for(first, table, &schema, &version, &policy, &have_schema, e)) !=
        CDC_OK)
        goto cleanup;
    /* A kept table is refreshed: the same validation as a load (the latest version),
     * without parsing its metadata again when nobody else committed meanwhile. */
    if ((t = take_table(c, location)) != NULL) {
        rc = cdc_ice_table_refresh(t, e);
        if (rc != CDC_OK) {
            cdc_ice_table_close(t);
            t = NULL;
        }
    }
    if (t == NULL)
        rc = cdc_ice_table_load(c->storage, location, &t, e);
    size_t nfiles = 0;
    for (size_t k = 0; k < nep; k++)
        nfiles += ep[k].nfiles;
    if (rc == CDC_ERR_NOT_FOUND) {
        if (!have_schema && trunc.partitions != 0 && nfiles == 0) {
            /* a truncate of a table nobody wrote yet: nothing to remove */
            cdc_error_clear(e);
            rc = CDC_OK;
            goto cleanup;
        }
        if (!have_schema) {
            rc = cdc_error_set(e, CDC_ERR_PROTOCOL,
                               "table \"%s\" does not exist and checkpoint %" PRIu64
                               " carries no schema for it",
                               table, first->epoch);
            goto cleanup;
        }
        cdc_error_clear(e);
        rc = cdc_ice_table_open(c->storage, location, &schema, NULL, &t, e);
        if (rc == CDC_OK) {
            res->schema_changes++;
            cdc_log_info("created table \"%s\" at %s", table, location);
        }
    }
    if (rc != CDC_OK)
        goto cleanup;
    remember_table(c, table, location);
    if (have_schema && (rc = cdc_commit_evolve(c, t, first, table, &schema, version, policy,
                                               &res->schema_changes, e)) != CDC_OK)
        goto cleanup;
    apply_layout(c, t, table);

    if (nfiles == 0 && trunc.partitions == 0) {
        rc = CDC_OK;
        goto cleanup;
    }
    data = calloc(nfiles + 1, sizeof(*data));
    dels = calloc(nfiles + 1, sizeof(*dels));
    data_seqs = calloc(nfiles + 1, sizeof(*data_seqs));
    del_seqs = calloc(nfiles + 1, sizeof(*del_seqs));
    if (data == NULL || dels == NULL || data_seqs == NULL || del_seqs == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    offsets = cdc_checkpoint_offsets_json(last, table);
    cdc_ice_props_set(&summary, CDC_ICE_SUMMARY_JOB, c->job);
    snprintf(num, sizeof(num), "%" PRIu64, last->epoch);
    cdc_ice_props_set(&summary, CDC_ICE_SUMMARY_CHECKPOINT, num);
    cdc_ice_props_set(&summary, CDC_ICE_SUMMARY_OFFSETS, offsets ? offsets : "{}");
    snprintf(num, sizeof(num), "%" PRIu64, c->term);
    cdc_ice_props_set(&summary, CDC_ICE_SUMMARY_TERM, num);

    for (int attempt = 0;; attempt++) {
        const char *tv;
        cdc_ice_commit_t ic;
        int64_t held, parts = 0;
        bool truncates = false;
        /* validate at commit time: read the table again right before the swap */
        if (attempt > 0 && (rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
            goto cleanup;
        tv = cdc_ice_table_snapshot_property(t, -1, CDC_ICE_SUMMARY_TERM);
        if (tv != NULL && strtoull(tv, NULL, 10) > c->term) {
            rc = cdc_error_set(e, CDC_ERR_FENCED,
                               "table \"%s\" was committed by leader term %s, ours is %" PRIu64,
                               table, tv, c->term);
            goto cleanup;
        }
        /* the records the table does not hold yet, each its own part of the snapshot */
        held = cdc_ice_table_last_checkpoint(t, c->job);
        ndata = ndels = 0;
        for (size_t k = 0; k < nep; k++) {
            const cdc_checkpoint_t *rec = recs[ep[k].rec];
            if ((int64_t)rec->epoch <= held)
                continue;
            truncates = truncates || (k == 0 && trunc.partitions != 0);
            if (ep[k].nfiles == 0)
                continue;
            parts++;
            for (size_t f = 0; f < ep[k].nfiles; f++) {
                const cdc_staged_file_t *sf = &rec->files[ep[k].files[f]];
                if (sf->file.content == CDC_ICE_CONTENT_DATA) {
                    data_seqs[ndata] = parts;
                    data[ndata++] = sf->file; /* shallow: borrowed for the commit */
                } else {
                    del_seqs[ndels] = parts;
                    dels[ndels++] = sf->file;
                }
            }
        }
        if (ndata + ndels == 0 && !truncates) {
            res->tables_skipped++;
            rc = CDC_OK;
            goto cleanup;
        }
        memset(&ic, 0, sizeof(ic));
        ic.data_files = data;
        ic.ndata_files = ndata;
        ic.delete_files = dels;
        ic.ndelete_files = ndels;
        ic.seq_span = parts;
        ic.data_seqs = data_seqs;
        ic.delete_seqs = del_seqs;
        ic.summary = &summary;
        if (truncates) {
            /* TRUNCATE: the slots' earlier files go in the snapshot that adds their new ones */
            ic.remove = truncated_file;
            ic.remove_arg = &trunc;
        }
        rc = cdc_ice_table_commit(t, &ic, NULL, e);
        if (rc == CDC_OK) {
            res->tables_committed++;
            if (parts > 1)
                res->epochs_grouped += parts - 1;
            int64_t added = 0;
            for (size_t k = 0; k < ndata; k++)
                added += data[k].file_size_in_bytes;
            for (size_t k = 0; k < ndels; k++)
                added += dels[k].file_size_in_bytes;
            cdc_table_stats_note(&c->stats, table, t, last->epoch, data, ndata, added);
            if (truncates)
                cdc_log_info("checkpoint %" PRIu64 ": truncate of table \"%s\" applied for "
                             "partitions 0x%03x",
                             first->epoch, table, trunc.partitions);
            goto cleanup;
        }
        if (rc != CDC_ERR_CONFLICT || attempt + 1 >= COMMIT_ATTEMPTS)
            goto cleanup;
        cdc_error_clear(e);
    }
cleanup:
    if (rc != CDC_OK && e && strstr(e->msg, table) == NULL)
        cdc_error_prefix(e, "commit of checkpoint %" PRIu64 " to table \"%s\"", last->epoch, table);
    cdc_ice_props_free(&summary);
    free(offsets);
    free(data);
    free(dels);
    free(data_seqs);
    free(del_seqs);
    if (rc == CDC_OK && t != NULL)
        keep_table(c, location, t);
    else
        cdc_ice_table_close(t);
    cdc_ice_schema_free(&schema);
    free(location);
    return rc;
}

/*
 * One table's commits of a group under the table's lock (maintenance commits take turns
 * with it): one snapshot for each run of records that starts at a record with a truncate
 * for the table or a schema update the run's first record does not carry (or at the
 * group's first), so a schema is in place before the files written with it, and a
 * truncate removes only what came before it.
 */
static cdc_err_t commit_table(cdc_committer_t *c, cdc_checkpoint_t *const *recs, const char *table,
                              const table_files_t *tf, cdc_commit_result_t *res, cdc_error_t *e)
{
    char *location = table_location(c, table);
    cdc_err_t rc = CDC_OK;
    if (location != NULL)
        cdc_committer_table_lock(c, location);
    for (size_t a = 0, b; a < tf->nepochs && rc == CDC_OK; a = b) {
        for (b = a + 1; b < tf->nepochs; b++) {
            const cdc_checkpoint_t *rec = recs[tf->epochs[b].rec];
            if (cdc_checkpoint_truncated(rec, table) != 0 ||
                schema_moves(recs[tf->epochs[a].rec], rec, table))
                break;
        }
        rc = commit_table_locked(c, recs, table, tf->epochs + a, b - a, res, e);
    }
    if (location != NULL)
        cdc_committer_table_unlock(c, location);
    free(location);
    return rc;
}

/* One table's commit (tables are independent: each one's snapshot carries the epoch and
 * is validated against that table alone). */
typedef struct table_job {
    const char *table;
    table_files_t tf;
    cdc_commit_result_t res;
    cdc_err_t rc;
    cdc_error_t e;
} table_job_t;

/* The tables of one cdc_committer_commit_group, taken in turn by COMMIT_PARALLEL threads. */
typedef struct table_queue {
    cdc_committer_t *c;
    cdc_checkpoint_t *const *recs;
    table_job_t *jobs;
    size_t njobs;
    size_t next; /* the next job to take (atomic) */
} table_queue_t;

static void *table_worker(void *arg)
{
    table_queue_t *q = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&q->next, 1, __ATOMIC_RELAXED);
        if (i >= q->njobs)
            return NULL;
        table_job_t *j = &q->jobs[i];
        cdc_error_clear(&j->e);
        j->rc = commit_table(q->c, q->recs, j->table, &j->tf, &j->res, &j->e);
    }
}

#ifndef COMMIT_PARALLEL
#define COMMIT_PARALLEL 8
#endif

/* The table a record's i-th touch names: its schemas, then its files, then its truncates. */
static const char *touched_table(const cdc_checkpoint_t *rec, size_t i)
{
    if (i < rec->nschemas)
        return rec->schemas[i].table;
    i -= rec->nschemas;
    if (i < rec->nfiles)
        return rec->files[i].table;
    return rec->truncates[i - rec->nfiles].table;
}

/*
 * The tables the records touch, each with its records in order and their files there:
 * jobs[0..*njobs), the file indexes in *fidx (both the caller's to free).
 */
static cdc_err_t group_by_table(cdc_checkpoint_t *const *recs, size_t nrecs, table_job_t **jobs_out,
                                size_t *njobs, size_t **fidx_out, cdc_error_t *e)
{
    cdc_strmap_t seen = {0}; /* name (borrowed from the records) -> 1 + its job's index */
    table_job_t *jobs = NULL;
    size_t n = 0, cap = 0, nfiles = 0, *fidx = NULL, at = 0;
    cdc_err_t rc = CDC_OK;

    for (size_t r = 0; r < nrecs; r++)
        nfiles += recs[r]->nfiles;
    if ((fidx = calloc(nfiles + 1, sizeof(*fidx))) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (size_t r = 0; r < nrecs && rc == CDC_OK; r++) {
        const cdc_checkpoint_t *rec = recs[r];
        size_t touches = rec->nschemas + rec->nfiles + rec->ntruncates;
        /* this record's files, counted per table first (they go to fidx in one block per
         * table and record) */
        for (size_t i = 0; i < touches && rc == CDC_OK; i++) {
            const char *name = touched_table(rec, i);
            uintptr_t k = (uintptr_t)cdc_strmap_get(&seen, name);
            table_job_t *j;
            if (k == 0) {
                if (cdc_array_reserve(jobs, cap, n + 1, 64) != CDC_OK ||
                    cdc_strmap_put(&seen, name, (void *)(uintptr_t)(n + 1)) != CDC_OK) {
                    rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                    break;
                }
                memset(&jobs[n], 0, sizeof(jobs[n]));
                jobs[n].table = name;
                k = ++n;
            }
            j = &jobs[k - 1];
            if (j->tf.nepochs == 0 || j->tf.epochs[j->tf.nepochs - 1].rec != r) {
                if (cdc_array_reserve(j->tf.epochs, j->tf.cap, j->tf.nepochs + 1, 4) != CDC_OK) {
                    rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                    break;
                }
                j->tf.epochs[j->tf.nepochs++] = (table_epoch_t){.rec = r};
            }
            if (i >= rec->nschemas && i < rec->nschemas + rec->nfiles)
                j->tf.epochs[j->tf.nepochs - 1].nfiles++;
        }
        /* place each table's block of this record's files, then fill it */
        for (size_t k = 0; k < n && rc == CDC_OK; k++) {
            table_files_t *tf = &jobs[k].tf;
            table_epoch_t *te = tf->nepochs > 0 ? &tf->epochs[tf->nepochs - 1] : NULL;
            if (te == NULL || te->rec != r || te->files != NULL)
                continue;
            te->files = fidx + at;
            at += te->nfiles;
            te->nfiles = 0;
        }
        for (size_t i = 0; i < rec->nfiles && rc == CDC_OK; i++) {
            table_job_t *j = &jobs[(uintptr_t)cdc_strmap_get(&seen, rec->files[i].table) - 1];
            table_epoch_t *te = &j->tf.epochs[j->tf.nepochs - 1];
            te->files[te->nfiles++] = i;
        }
    }
    cdc_strmap_free(&seen);
    if (rc != CDC_OK) {
        for (size_t k = 0; k < n; k++)
            free(jobs[k].tf.epochs);
        free(jobs);
        free(fidx);
        return rc;
    }
    *jobs_out = jobs;
    *njobs = n;
    *fidx_out = fidx;
    return CDC_OK;
}

cdc_err_t cdc_committer_commit_group(cdc_committer_t *c, cdc_checkpoint_t *const *recs,
                                     size_t nrecs, cdc_commit_result_t *res, cdc_error_t *e)
{
    cdc_err_t rc = CDC_OK;
    table_job_t *jobs = NULL;
    size_t njobs = 0, *fidx = NULL;

    memset(res, 0, sizeof(*res));
    for (size_t r = 1; r < nrecs; r++)
        CDC_ASSERT(recs[r]->epoch > recs[r - 1]->epoch); /* a group is in epoch order */
    if (nrecs == 0)
        return CDC_OK;
    if ((rc = group_by_table(recs, nrecs, &jobs, &njobs, &fidx, e)) != CDC_OK)
        return rc;
    /* Tables in parallel (their metadata writes and fsyncs overlap): COMMIT_PARALLEL
     * threads take the next table as soon as they are done with one, so that a slow table
     * holds up only its own thread. A failed table is retried with the whole group; the
     * tables that made it skip the records they hold then (their snapshot already carries
     * the group's last checkpoint id). */
    table_queue_t q = {.c = c, .recs = recs, .jobs = jobs, .njobs = njobs};
    pthread_t th[COMMIT_PARALLEL];
    size_t nth = 0;
    while (njobs > 1 && nth + 1 < COMMIT_PARALLEL && nth + 1 < njobs &&
           pthread_create(&th[nth], NULL, table_worker, &q) == 0)
        nth++;
    table_worker(&q); /* this thread takes tables too (all of them when none started) */
    for (size_t k = 0; k < nth; k++)
        pthread_join(th[k], NULL);
    for (size_t i = 0; i < njobs; i++) {
        res->tables_committed += jobs[i].res.tables_committed;
        res->tables_skipped += jobs[i].res.tables_skipped;
        res->schema_changes += jobs[i].res.schema_changes;
        res->epochs_grouped += jobs[i].res.epochs_grouped;
        /* the first failure, but fencing wins: the caller must step down */
        if (jobs[i].rc != CDC_OK &&
            (rc == CDC_OK || (jobs[i].rc == CDC_ERR_FENCED && rc != CDC_ERR_FENCED))) {
            rc = jobs[i].rc;
            if (e != NULL)
                *e = jobs[i].e;
        }
        free(jobs[i].tf.epochs);
    }
    free(jobs);
    free(fidx);
    return rc;
}

cdc_err_t cdc_committer_commit(cdc_committer_t *c, const cdc_checkpoint_t *rec,
                               cdc_commit_result_t *res, cdc_error_t *e)
{
    cdc_checkpoint_t *one = (cdc_checkpoint_t *)rec; /* (read only) */
    return cdc_committer_commit_group(c, &one, 1, res, e);
}

cdc_err_t cdc_committer_verify_files(cdc_committer_t *c, const cdc_checkpoint_t *rec,
                                     cdc_staged_reason_t *why, cdc_error_t *e)
{
    *why = CDC_STAGED_OK;
    for (size_t i = 0; i < rec->nfiles; i++) {
        const cdc_ice_data_file_t *f = &rec->files[i].file;
        int64_t size = -1;
        cdc_err_t rc = cdc_storage_size(c->storage, f->path, &size, e);
        if (rc == CDC_ERR_NOT_FOUND) {
            *why = CDC_STAGED_MISSING;
            return cdc_error_set(e, CDC_ERR_PROTOCOL,
                                 "staged file %.300s of table \"%.200s\" does not exist", f->path,
                                 rec->files[i].table);
        }
        if (rc != CDC_OK)
            return rc;
        if (size != f->file_size_in_bytes) {
            *why = CDC_STAGED_SIZE;
            return cdc_error_set(e, CDC_ERR_PROTOCOL,
                                 "staged file %.300s of table \"%.200s\" has %" PRId64
                                 " bytes, its ack says %" PRId64,
                                 f->path, rec->files[i].table, size, f->file_size_in_bytes);
        }
    }
    return CDC_OK;
}

static void pending_location(cdc_committer_t *c, uint64_t epoch, char *buf, size_t size)
{
    size_t n = strlen(c->warehouse);
    snprintf(buf, size, "%s%s_cdc/%s/pending/%020" PRIu64 ".json", c->warehouse,
             n > 0 && c->warehouse[n - 1] == '/' ? "" : "/", c->job, epoch);
}

cdc_err_t cdc_committer_put_pending(cdc_committer_t *c, cdc_checkpoint_t *rec, cdc_error_t *e)
{
    char loc[1024];
    char *json = cdc_checkpoint_files_to_json(rec);
    cdc_err_t rc;

    if (json == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    pending_location(c, rec->epoch, loc, sizeof(loc));
    rc = cdc_storage_put(c->storage, loc, json, strlen(json), e);
    free(json);
    if (rc != CDC_OK)
        return rc;
    free(rec->files_path);
    rec->files_path = strdup(loc);
    return rec->files_path ? CDC_OK : cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
}

cdc_err_t cdc_committer_load_pending(cdc_committer_t *c, cdc_checkpoint_t *rec, cdc_error_t *e)
{
    uint8_t *data = NULL;
    size_t len = 0;
    cdc_err_t rc;

    if (rec == NULL)
        return CDC_OK;
    if ((rc = cdc_offsets_base_load(c->storage, rec, e)) != CDC_OK)
        return rc;
    if (rec->files_path == NULL || rec->nfiles > 0)
        return CDC_OK;
    if ((rc = cdc_storage_get(c->storage, rec->files_path, &data, &len, e)) != CDC_OK)
        return rc;
    rc = cdc_checkpoint_files_from_json(rec, (const char *)data, len, e);
    free(data);
    return rc;
}

void cdc_committer_prune_pending(cdc_committer_t *c, uint64_t keep_from)
{
    char prefix[1024], **locs = NULL;
    size_t n = 0;
    cdc_error_t e;

    pending_location(c, 0, prefix, sizeof(prefix));
    *strrchr(prefix, '/') = '\0';
    if (cdc_storage_list(c->storage, prefix, &locs, &n, &e) != CDC_OK)
        return;
    for (size_t i = 0; i < n; i++) {
        const char *base = strrchr(locs[i], '/');
        if (base && strtoull(base + 1, NULL, 10) < keep_from)
            cdc_storage_delete(c->storage, locs[i], &e);
    }
    cdc_storage_list_free(locs, n);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_suspect(const void *a, const void *b)
{
    return strcmp(((const suspect_t *)a)->location, ((const suspect_t *)b)->location);
}

/* c->suspects is sorted by location (see cdc_committer_remove_orphans). */
static suspect_t *find_suspect(cdc_committer_t *c, const char *loc)
{
    suspect_t key = {(char *)loc, 0};
    if (c->nsuspects == 0)
        return NULL;
    return bsearch(&key, c->suspects, c->nsuspects, sizeof(suspect_t), cmp_suspect);
}

cdc_err_t cdc_committer_expire(cdc_committer_t *c, int64_t retention_ms, int64_t min_keep,
                               size_t *expired, cdc_error_t *e)
{
    int64_t older_than;
    cdc_err_t rc = CDC_OK;
    char **names, **locs;
    size_t nt = cdc_committer_tables(c, &names, &locs);

    /* snapshot timestamps are wall-clock ms */
    older_than = cdc_clock_wall_ms() - retention_ms;
    *expired = 0;
    for (size_t ti = 0; ti < nt && rc == CDC_OK; ti++) {
        cdc_ice_table_t *t = NULL;
        size_t n = 0;

        /* under the table's commit lock: expiry runs on the maintenance thread while the
         * epochs commit, and would lose the swap to them */
        char **unref = NULL;
        size_t nunref = 0;
        cdc_committer_table_lock(c, locs[ti]);
        rc = cdc_ice_table_load(c->storage, locs[ti], &t, e);
        if (rc == CDC_OK)
            rc = cdc_ice_table_expire_snapshots_deferred(t, older_than, min_keep, &n, &unref,
                                                         &nunref, e);
        cdc_committer_table_unlock(c, locs[ti]);
        /* the files the expired snapshots alone referenced, deleted with the lock released:
         * thousands of them after a compaction held the epoch commits for seconds */
        if (t != NULL)
            cdc_ice_table_delete_files(t, unref, nunref);
        cdc_storage_list_free(unref, nunref);
        cdc_ice_table_close(t);
        *expired += n;
    }
    cdc_storage_list_free(names, nt);
    cdc_storage_list_free(locs, nt);
    return rc;
}

cdc_err_t cdc_committer_remove_orphans(cdc_committer_t *c, char *const *keep, size_t nkeep,
                                       int64_t min_age_ms, int *deleted, cdc_error_t *e)
{
    char **names, **locs;
    size_t nt = cdc_committer_tables(c, &names, &locs);
    int64_t now = cdc_clock_mono_ms();
    cdc_err_t rc = CDC_OK;
    suspect_t *still = NULL; /* as many as there are files without a reference */
    size_t nstill = 0, still_cap = 0;

    *deleted = 0;
    for (size_t ti = 0; ti < nt && rc == CDC_OK; ti++) {
        cdc_ice_table_t *t = NULL;
        char **refs = NULL, **files = NULL, prefix[1024];
        size_t nrefs = 0, nfiles = 0;

        if ((rc = cdc_ice_table_load(c->storage, locs[ti], &t, e)) != CDC_OK)
            break;
        rc = cdc_ice_table_referenced_files(t, &refs, &nrefs, e);
        snprintf(prefix, sizeof(prefix), "%s/data/", locs[ti]);
        if (rc == CDC_OK)
            rc = cdc_storage_list(c->storage, prefix, &files, &nfiles, e);
        if (rc == CDC_OK) {
            qsort(refs, nrefs, sizeof(char *), cmp_str);
            for (size_t i = 0; i < nfiles; i++) {
                suspect_t *s;
                if (bsearch(&files[i], refs, nrefs, sizeof(char *), cmp_str) ||
                    bsearch(&files[i], keep, nkeep, sizeof(char *), cmp_str))
                    continue;
                s = find_suspect(c, files[i]);
                if (s != NULL && now - s->first_seen_ms >= min_age_ms) {
                    cdc_error_t de;
                    if (cdc_storage_delete(c->storage, files[i], &de) == CDC_OK) {
                        (*deleted)++;
                        cdc_log_info("removed orphan file \"%s\"", files[i]);
                    }
                    continue;
                }
                /* on a failed allocation the file is only seen anew by the next scan */
                if (cdc_array_reserve(still, still_cap, nstill + 1, 256) == CDC_OK &&
                    (still[nstill].location = strdup(files[i])) != NULL) {
                    still[nstill].first_seen_ms = s ? s->first_seen_ms : now;
                    nstill++;
                }
            }
        }
        cdc_storage_list_free(refs, nrefs);
        cdc_storage_list_free(files, nfiles);
        cdc_ice_table_close(t);
    }
    for (size_t i = 0; i < c->nsuspects; i++)
        free(c->suspects[i].location);
    free(c->suspects);
    if (nstill > 1)
        qsort(still, nstill, sizeof(suspect_t), cmp_suspect); /* for find_suspect() */
    c->suspects = still;
    c->nsuspects = nstill;
    cdc_storage_list_free(names, nt);
    cdc_storage_list_free(locs, nt);
    return rc;
}
