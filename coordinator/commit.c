/*
 * Iceberg commits of recorded checkpoints (see commit.h), over common/iceberg/table.h.
 * StagedFile.table is "<namespace>.<table>" (split at the first dot); the table lives
 * at <warehouse>/<namespace>/<table>.
 *
 * One concept in one file of about 1,000 lines: the committer, the coordinator's only
 * writer of the warehouse. Every part works on its cache of loaded tables and the lock
 * that guards it: the parallel per-table commit with its schema evolution and table
 * layouts, the pending file lists of large checkpoints, and the snapshot expiry and
 * orphan removal that run between commits.
 */
#include "coordinator/commit.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table.h"
#include "common/log.h"
#include "coordinator/layout.h"
#include "coordinator/offsets_base.h"

#define COMMIT_ATTEMPTS 8

/* A file that looked orphaned, and since when (orphan age without object mtimes). */
typedef struct suspect {
    char *location;
    int64_t first_seen_ms;
} suspect_t;

/*
 * A table this process met, by location. There is no limit on their number (a job of
 * thousands of source tables commits to twice as many Iceberg tables), so the index
 * grows, and that is why every entry is allocated on its own and never moved or freed
 * before the committer closes: a commit thread holds `mu` of its table, and the
 * maintenance thread another's, while a third table's first use grows the index under
 * known_lock. Growing an array of mutexes would move a mutex that a thread holds (and
 * that another waits on); growing an array of pointers to them moves nothing they use.
 */
typedef struct table {
    char *location;
    /* One lock per table, held over a commit's refresh and swap: the epoch commits and
     * the maintenance thread's (maintenance.h) take turns instead of losing races. */
    pthread_mutex_t mu;
    char *name; /* "<ns>.<table>" once committed to or discovered, else NULL (known_lock) */
    /* Kept loaded between commits (under known_lock; a commit takes it out while it
     * works on the table, NULL meanwhile): the next commit only checks that the table's
     * latest version is still the loaded one instead of parsing its metadata again. */
    cdc_ice_table_t *open;
} table_t;

struct cdc_committer {
    cdc_storage_t *storage;
    char *warehouse;
    char *job;
    _Atomic uint64_t term;      /* read by the maintenance thread too */
    pthread_mutex_t known_lock; /* tables commit in parallel (cdc_committer_commit) */
    /* every table met (under known_lock): by location, and in the order met */
    cdc_strmap_t by_location;
    table_t **tables;
    size_t ntables, tables_cap;
    table_t **known; /* those committed to or discovered (name set), in that order */
    size_t nknown, known_cap;
    suspect_t *suspects;
    size_t nsuspects;
    cdc_schema_change_t changes[CDC_SCHEMA_CHANGES_KEPT]; /* ring, under known_lock */
    size_t nchanges;                                      /* ever recorded */
    char *partition_by, *sort_by;                         /* declarations (layout.h) */
    /* Layouts applied (under known_lock), by table name and in the order applied. Each is
     * allocated on its own like the tables: apply_layout fills its table's entry in two
     * steps around the table's commit, with known_lock released in between. */
    cdc_strmap_t layout_by_name;
    cdc_table_layout_t **layouts;
    size_t nlayouts, layouts_cap;
    cdc_table_stats_set_t stats; /* after each table's last commit */
    /* Strings of layouts applied again (a source name moved to another field): callers
     * of cdc_committer_layouts may still hold them, so they live until close. */
    char **stale;
    size_t nstale, stale_cap;
};

size_t cdc_committer_schema_changes(cdc_committer_t *c, cdc_schema_change_t *out, size_t max)
{
    size_t n, first;
    pthread_mutex_lock(&c->known_lock);
    n = c->nchanges < CDC_SCHEMA_CHANGES_KEPT ? c->nchanges : CDC_SCHEMA_CHANGES_KEPT;
    if (n > max)
        n = max;
    first = c->nchanges - n;
    for (size_t i = 0; i < n; i++)
        out[i] = c->changes[(first + i) % CDC_SCHEMA_CHANGES_KEPT];
    pthread_mutex_unlock(&c->known_lock);
    return n;
}

/* Appends "<sep><text>" to a summary, keeping it terminated when it is full. */
static void summary_add(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void summary_add(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    va_list ap;
    if (len + 3 >= size)
        return;
    if (len > 0) {
        memcpy(buf + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* True when a field named `was` is now `now` = "<was>__v<k>[...]": retired for a new
 * version of its column (common/cdcschema.h), not renamed by the source. */
static bool retired_name(const char *was, const char *now)
{
    size_t n = strlen(was);
    return strncmp(now, was, n) == 0 && strncmp(now + n, "__v", 3) == 0;
}

/* The field of `old` that had f's name and was retired for f (a type change Iceberg
 * cannot promote: the source name moved to the new field f), or NULL. */
static const cdc_ice_field_t *versioned_from(const cdc_ice_schema_t *old,
                                             const cdc_ice_schema_t *cur, const cdc_ice_field_t *f)
{
    int j = cdc_ice_schema_find_name(old, f->name);
    int r = j >= 0 && old->fields[j].id != f->id ? cdc_ice_schema_find(cur, old->fields[j].id) : -1;
    return r >= 0 && retired_name(f->name, cur->fields[r].name) ? &old->fields[j] : NULL;
}

/* Records (and logs) what changed from schema `old` to the table's current one. */
static void record_schema_change(cdc_committer_t *c, const char *table, int64_t version,
                                 const cdc_ice_schema_t *old, const cdc_ice_table_t *t)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
    cdc_schema_change_t ch;
    char a[48], b[48];

    memset(&ch, 0, sizeof(ch));
    snprintf(ch.table, sizeof(ch.table), "%s", table);
    ch.source_version = version;
    ch.schema_id = cdc_ice_table_metadata(t)->current_schema_id;
    ch.at_ms = cdc_clock_wall_ms();
    for (size_t i = 0; cur != NULL && i < cur->nfields; i++) {
        const cdc_ice_field_t *f = &cur->fields[i];
        int k = cdc_ice_schema_find(old, f->id);
        const char *v = strstr(f->name, "__v");
        const cdc_ice_field_t *was = versioned_from(old, cur, f);
        cdc_ice_type_string(f, b, sizeof(b));
        if (k < 0 && was != NULL) {
            /* the source name takes the new field, the old one is renamed (cdcschema.h) */
            int r = cdc_ice_schema_find(cur, was->id);
            ch.versioned = true;
            summary_add(ch.summary, sizeof(ch.summary),
                        "new version %s %s(%d): a type change Iceberg cannot promote, the "
                        "earlier values stay in %s(%d)",
                        f->name, b, (int)f->id, cur->fields[r].name, (int)was->id);
        } else if (k < 0 && v != NULL && v[3] >= '2' && v[3] <= '9') {
            /* named by a capture from before the source name held the current values */
            ch.versioned = true;
            summary_add(ch.summary, sizeof(ch.summary),
                        "new version %s %s(%d): a type change Iceberg cannot promote, the "
                        "earlier values stay in %.*s",
                        f->name, b, (int)f->id, (int)(v - f->name), f->name);
        } else if (k < 0) {
            summary_add(ch.summary, sizeof(ch.summary), "added %s %s(%d)", f->name, b, (int)f->id);
        } else {
            int took = cdc_ice_schema_find_name(cur, old->fields[k].name);
            /* (a field retired for a new version of its column is in that one's line) */
            bool moved = took >= 0 && cdc_ice_schema_find(old, cur->fields[took].id) < 0 &&
                         retired_name(old->fields[k].name, f->name);
            if (strcmp(old->fields[k].name, f->name) != 0 && !moved)
                summary_add(ch.summary, sizeof(ch.summary), "renamed %s -> %s(%d)",
                            old->fields[k].name, f->name, (int)f->id);
            cdc_ice_type_string(&old->fields[k], a, sizeof(a));
            if (strcmp(a, b) != 0)
                summary_add(ch.summary, sizeof(ch.summary), "promoted %s %s -> %s(%d)", f->name, a,
                            b, (int)f->id);
        }
    }
    for (size_t i = 0; old != NULL && i < old->nfields; i++)
        if (cur == NULL || cdc_ice_schema_find(cur, old->fields[i].id) < 0)
            summary_add(ch.summary, sizeof(ch.summary), "dropped %s(%d)", old->fields[i].name,
                        (int)old->fields[i].id);
    if (ch.summary[0] == '\0')
        return; /* only properties or requiredness */
    if (ch.versioned)
        cdc_log_warn("table \"%s\" follows source schema version %" PRId64 ": %s", table, version,
                     ch.summary);
    else
        cdc_log_info("table \"%s\" follows source schema version %" PRId64 ": %s", table, version,
                     ch.summary);
    pthread_mutex_lock(&c->known_lock);
    c->changes[c->nchanges++ % CDC_SCHEMA_CHANGES_KEPT] = ch;
    if (ch.versioned) {
        /* --partition-by/--sort-by name columns: a name that moved to a new field is
         * bound again at this commit (apply_layout) */
        cdc_table_layout_t *l = cdc_strmap_get(&c->layout_by_name, table);
        if (l != NULL)
            l->applied = false;
    }
    pthread_mutex_unlock(&c->known_lock);
}

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

/* Table property: the newest source schema version the table's schema follows. */
#define PROP_SOURCE_VERSION "cdc.source-schema-version"
/* Table property: the column masking policy of the table's schema ("<version>:<digest>",
 * SchemaUpdate.mask_policy; absent or "" = none). */
#define PROP_MASK_POLICY "cdc.mask-policy"

/* The version of a masking policy "<version>:<digest>", -1 for none. */
static int64_t mask_policy_version(const char *policy)
{
    return policy != NULL && policy[0] != '\0' ? strtoll(policy, NULL, 10) : -1;
}

static const char *table_mask_policy(const cdc_ice_table_t *t)
{
    const char *v = cdc_ice_props_get(&cdc_ice_table_metadata(t)->properties, PROP_MASK_POLICY);
    return v != NULL ? v : "";
}

/* Whether files written under policy `want` change the table's (an explicit change of the
 * policy, docs/worker.md "Column masking"): another one, unless both are policies and
 * want's version is older (a worker not restarted yet with the new one). */
static bool mask_policy_replaces(const char *want, const char *has)
{
    return strcmp(want, has) != 0 && !(want[0] != '\0' && has[0] != '\0' &&
                                       mask_policy_version(want) < mask_policy_version(has));
}

/* Logs a change of a table's masking policy (the property was just written). */
static void log_mask_policy(const char *table, const char *was, const char *now, uint64_t epoch)
{
    if (now[0] == '\0')
        cdc_log_warn("table \"%s\": column masking turned off with checkpoint %" PRIu64
                     " (was policy %s): files from now on hold the columns as the source has them",
                     table, epoch, was);
    else if (was[0] != '\0' && mask_policy_version(now) == mask_policy_version(was))
        cdc_log_warn("table \"%s\": column masking policy %s replaces %s with checkpoint %" PRIu64
                     " without a new policy version (give each change its own \"version\"); "
                     "files written before keep the values they were written with",
                     table, now, was[0] ? was : "(none)", epoch);
    else
        cdc_log_info("table \"%s\": column masking policy %s replaces %s with checkpoint %" PRIu64
                     "; files written before keep the values they were written with",
                     table, now, was[0] ? was : "(none)", epoch);
}

/* Field ids above this one, with names that start with '_', are the worker's metadata
 * columns (the changelog's `_op` ... from 100001, `_cdc_special` 100008: docs/worker.md),
 * never a source column's. */
#define METADATA_FIELD_IDS 100000

/*
 * Adds field f to the table's current schema with f's own id (*changed: whether it
 * did). The worker gives a Debezium column its id by name (worker/catalog.c: the next
 * after the table's source columns, never one of the metadata ids); the table's
 * last-column-id counts the metadata columns (100001 and up), so an id the table chose
 * would not be the one in the files.
 */
static cdc_err_t add_field_with_id(cdc_ice_table_t *t, const cdc_ice_field_t *f, bool *changed,
                                   cdc_error_t *e)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
    cdc_ice_schema_t want, one, src = {.fields = (cdc_ice_field_t *)f, .nfields = 1};
    cdc_err_t rc;

    if (cdc_ice_schema_copy(&want, cur) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (cdc_ice_schema_copy(&one, &src) != CDC_OK) {
        cdc_ice_schema_free(&want);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    if (cdc_array_resize(want.fields, want.nfields + 1) != CDC_OK) {
        cdc_ice_schema_free(&one);
        cdc_ice_schema_free(&want);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    want.fields[want.nfields++] = one.fields[0]; /* moved: one keeps only its array */
    one.nfields = 0;
    cdc_ice_schema_free(&one);
    rc = cdc_ice_table_set_schema(t, &want, NULL, changed, e);
    cdc_ice_schema_free(&want);
    return rc;
}

/*
 * Debezium schemas (no source version): adds the columns of `want` missing from the
 * table, by name, in field order. Their ids are the worker's, by name (worker/decode.h);
 * a column without one, or whose id the table already holds, gets the table's next id.
 */
static cdc_err_t evolve_by_name(cdc_ice_table_t *t, const cdc_ice_schema_t *want, int *changes,
                                cdc_error_t *e)
{
    for (int attempt = 0; attempt < COMMIT_ATTEMPTS; attempt++) {
        const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
        cdc_err_t rc = CDC_OK;
        bool conflict = false;

        for (size_t i = 0; cur != NULL && i < want->nfields; i++) {
            bool have = false;
            int32_t id = 0;
            cdc_ice_field_t f;
            for (size_t j = 0; j < cur->nfields; j++)
                if (strcmp(cur->fields[j].name, want->fields[i].name) == 0)
                    have = true;
            if (have)
                continue;
            f = want->fields[i];
            f.required = false;
            if (f.id > 0 && f.id < METADATA_FIELD_IDS && cdc_ice_schema_find(cur, f.id) < 0) {
                bool changed = false;
                id = f.id;
                rc = add_field_with_id(t, &f, &changed, e);
                if (rc == CDC_OK && !changed)
                    continue;
            } else {
                rc = cdc_ice_table_add_column(t, &f, &id, e);
            }
            if (rc == CDC_ERR_CONFLICT) {
                conflict = true;
                break;
            }
            if (rc == CDC_ERR_EXISTS)
                continue;
            if (rc != CDC_OK)
                return rc;
            (*changes)++;
            cdc_log_info("added column \"%s\" (field id %d) to table \"%s\"", f.name, id,
                         cdc_ice_table_get_location(t));
            cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
        }
        if (!conflict)
            return CDC_OK;
        if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
            return rc;
    }
    return cdc_error_set(e, CDC_ERR_CONFLICT, "schema change of table \"%s\" kept conflicting",
                         cdc_ice_table_get_location(t));
}

/* The table's source schema version (PROP_SOURCE_VERSION), 0 when none. */
static int64_t table_source_version(const cdc_ice_table_t *t)
{
    const char *v = cdc_ice_props_get(&cdc_ice_table_metadata(t)->properties, PROP_SOURCE_VERSION);
    return v != NULL ? strtoll(v, NULL, 10) : 0;
}

/*
 * The metadata columns the epoch's files of a table carry and the table's schema lacks
 * are added to it, with their ids, whatever the source version (`_cdc_special` appears
 * in an existing table's files when a worker that writes it first meets the table;
 * docs/worker.md, "Values no Iceberg type holds"). Existing rows read them as null.
 */
static cdc_err_t add_metadata_fields(cdc_ice_table_t *t, const cdc_checkpoint_t *rec,
                                     const char *table, int *changes, cdc_error_t *e)
{
    for (size_t i = 0; i < rec->nschemas; i++) {
        cdc_ice_schema_t fs;
        cdc_err_t rc;
        if (strcmp(rec->schemas[i].table, table) != 0)
            continue;
        if ((rc = cdc_ice_schema_from_json(rec->schemas[i].schema_json, &fs, e)) != CDC_OK)
            return rc;
        for (size_t f = 0; f < fs.nfields && rc == CDC_OK; f++) {
            const cdc_ice_field_t *field = &fs.fields[f];
            for (int attempt = 0;
                 field->id > METADATA_FIELD_IDS && field->name[0] == '_' && !field->required;
                 attempt++) {
                const cdc_ice_schema_t *cur =
                    cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
                cdc_ice_schema_t want;
                bool changed = false;
                if (cur == NULL || cdc_ice_schema_find(cur, field->id) >= 0)
                    break;
                if (attempt >= COMMIT_ATTEMPTS) {
                    rc = cdc_error_set(e, CDC_ERR_CONFLICT,
                                       "adding column \"%s\" to table \"%s\" kept conflicting",
                                       field->name, table);
                    break;
                }
                if (cdc_ice_schema_copy(&want, cur) != CDC_OK)
                    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                if (cdc_array_resize(want.fields, want.nfields + 1) != CDC_OK) {
                    cdc_ice_schema_free(&want);
                    rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                    break;
                }
                /* (a metadata column is of a primitive type) */
                want.fields[want.nfields] = (cdc_ice_field_t){field->id,    strdup(field->name),
                                                              field->type,  field->precision,
                                                              field->scale, false,
                                                              NULL};
                if (want.fields[want.nfields++].name == NULL) {
                    cdc_ice_schema_free(&want);
                    rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                    break;
                }
                rc = cdc_ice_table_set_schema(t, &want, NULL, &changed, e);
                cdc_ice_schema_free(&want);
                if (rc == CDC_ERR_CONFLICT) {
                    cdc_error_clear(e);
                    if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
                        break;
                    continue;
                }
                if (rc == CDC_OK && changed) {
                    (*changes)++;
                    cdc_log_info("table \"%s\": added metadata column \"%s\" (field id %d) with "
                                 "checkpoint %" PRIu64,
                                 table, field->name, (int)field->id, rec->epoch);
                }
                break;
            }
        }
        cdc_ice_schema_free(&fs);
        if (rc != CDC_OK)
            return rc;
    }
    return CDC_OK;
}

/*
 * Source schemas (field ids given by column identity, common/cdcschema.h): the schema
 * of a newer source version becomes the table's schema, by field id (renames, drops,
 * promotions, new fields); the field ids are never the table's to choose. Every
 * schema the epoch's files were written with must then read correctly in the table
 * (cdc_ice_table_check_schema): a mismatch stops this table's commit.
 */
static cdc_err_t evolve(cdc_committer_t *c, cdc_ice_table_t *t, const cdc_checkpoint_t *rec,
                        const char *table, const cdc_ice_schema_t *want, int64_t version,
                        const char *policy, int *changes, cdc_error_t *e)
{
    cdc_err_t rc = add_metadata_fields(t, rec, table, changes, e);

    if (rc != CDC_OK)
        return rc;
    if (version <= 0) {
        rc = evolve_by_name(t, want, changes, e);
        for (int attempt = 0; rc == CDC_OK && mask_policy_replaces(policy, table_mask_policy(t));
             attempt++) {
            cdc_ice_props_t props = {0};
            char *was = strdup(table_mask_policy(t));
            if (attempt >= COMMIT_ATTEMPTS || was == NULL ||
                cdc_ice_props_set(&props, PROP_MASK_POLICY, policy) != CDC_OK) {
                free(was);
                cdc_ice_props_free(&props);
                return cdc_error_set(e,
                                     attempt >= COMMIT_ATTEMPTS ? CDC_ERR_CONFLICT : CDC_ERR_NOMEM,
                                     "could not record the masking policy of table \"%s\"", table);
            }
            rc = cdc_ice_table_set_properties(t, &props, e);
            cdc_ice_props_free(&props);
            if (rc == CDC_OK)
                log_mask_policy(table, was, policy, rec->epoch);
            free(was);
            if (rc == CDC_ERR_CONFLICT) {
                cdc_error_clear(e);
                rc = cdc_ice_table_refresh(t, e);
            }
        }
        return rc;
    }
    /* a newer source version, or the same one under another masking policy (its schema
     * may lack a dropped column or have one the policy now names) */
    for (int attempt = 0;
         table_source_version(t) < version ||
         (table_source_version(t) == version && mask_policy_replaces(policy, table_mask_policy(t)));
         attempt++) {
        cdc_ice_props_t props = {0};
        char num[32];
        bool changed = false;
        char *was = strdup(table_mask_policy(t));
        if (attempt >= COMMIT_ATTEMPTS) {
            free(was);
            return cdc_error_set(e, CDC_ERR_CONFLICT,
                                 "schema change of table \"%s\" kept conflicting", table);
        }
        snprintf(num, sizeof(num), "%" PRId64, version);
        if (was == NULL || cdc_ice_props_set(&props, PROP_SOURCE_VERSION, num) != CDC_OK ||
            ((policy[0] != '\0' || was[0] != '\0') &&
             cdc_ice_props_set(&props, PROP_MASK_POLICY, policy) != CDC_OK)) {
            free(was);
            cdc_ice_props_free(&props);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        cdc_ice_schema_t old;
        const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
        if (cur == NULL || cdc_ice_schema_copy(&old, cur) != CDC_OK) {
            cdc_ice_props_free(&props);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        rc = cdc_ice_table_set_schema(t, want, &props, &changed, e);
        cdc_ice_props_free(&props);
        if (rc == CDC_OK && strcmp(was, policy) != 0)
            log_mask_policy(table, was, policy, rec->epoch);
        free(was);
        if (rc == CDC_OK && changed)
            record_schema_change(c, table, version, &old, t);
        cdc_ice_schema_free(&old);
        if (rc == CDC_ERR_CONFLICT) {
            cdc_error_clear(e);
            if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
                return rc;
            continue;
        }
        if (rc != CDC_OK)
            return cdc_error_prefix(e, "schema version %" PRId64 " of table \"%s\"", version,
                                    table);
        if (changed)
            (*changes)++;
    }
    for (size_t i = 0; i < rec->nschemas; i++) {
        cdc_ice_schema_t fs;
        bool added = false;
        if (strcmp(rec->schemas[i].table, table) != 0)
            continue;
        if ((rc = cdc_ice_schema_from_json(rec->schemas[i].schema_json, &fs, e)) != CDC_OK)
            return rc;
        rc = cdc_ice_table_check_schema(t, &fs, e);
        if (rc == CDC_ERR_INVALID && rec->schemas[i].version > 0 &&
            rec->schemas[i].version < table_source_version(t)) {
            /* An older version the table skipped (a column added and dropped between two
             * versions it took): its schema joins the history, so the files' fields are
             * the table's (readable through that schema), then they must read. */
            cdc_error_clear(e);
            for (int attempt = 0; attempt < COMMIT_ATTEMPTS; attempt++) {
                rc = cdc_ice_table_add_past_schema(t, &fs, &added, e);
                if (rc != CDC_ERR_CONFLICT)
                    break;
                cdc_error_clear(e);
                if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
                    break;
            }
            if (rc == CDC_OK && added)
                cdc_log_info("table \"%s\": schema of source version %" PRId64
                             " added to its history (files of checkpoint %" PRIu64
                             " were written with it)",
                             table, rec->schemas[i].version, rec->epoch);
            if (rc == CDC_OK)
                rc = cdc_ice_table_check_schema(t, &fs, e);
        }
        cdc_ice_schema_free(&fs);
        if (rc != CDC_OK)
            return cdc_error_prefix(
                e, "files of checkpoint %" PRIu64 " (source schema version %" PRId64 ")",
                rec->epoch, rec->schemas[i].version);
    }
    return CDC_OK;
}

/* The schema update of the newest source version the record carries for a table, of
 * the newest masking policy among those (workers restarting with a new policy), the last
 * one among equals; parsed, with its policy (borrowed from rec); *found false when none. */
static cdc_err_t schema_for(const cdc_checkpoint_t *rec, const char *table, cdc_ice_schema_t *out,
                            int64_t *version, const char **policy, bool *found, cdc_error_t *e)
{
    size_t best = 0;
    *found = false;
    *version = 0;
    *policy = "";
    for (size_t i = 0; i < rec->nschemas; i++) {
        const cdc_schema_update_t *u = &rec->schemas[i];
        if (strcmp(u->table, table) != 0)
            continue;
        if (!*found || u->version > *version ||
            (u->version == *version &&
             mask_policy_version(u->mask_policy) >= mask_policy_version(*policy))) {
            best = i;
            *version = u->version;
            *policy = u->mask_policy != NULL ? u->mask_policy : "";
        }
        *found = true;
    }
    if (*found && cdc_ice_schema_from_json(rec->schemas[best].schema_json, out, e) != CDC_OK)
        return cdc_error_prefix(e, "schema update for table \"%s\" in checkpoint %" PRIu64, table,
                                rec->epoch);
    return CDC_OK;
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

/* One table's files of a record: rec->files[files[0..nfiles)] (found once per commit,
 * not by a scan of every file per table). */
typedef struct table_files {
    size_t *files;
    size_t nfiles;
} table_files_t;

static cdc_err_t commit_table_locked(cdc_committer_t *c, const cdc_checkpoint_t *rec,
                                     const char *table, const table_files_t *tf,
                                     cdc_commit_result_t *res, cdc_error_t *e)
{
    char *location = table_location(c, table);
    cdc_ice_schema_t schema;
    bool have_schema = false;
    int64_t version = 0;
    const char *policy = "";
    cdc_ice_table_t *t = NULL;
    cdc_ice_data_file_t *data = NULL, *dels = NULL;
    size_t ndata = 0, ndels = 0;
    cdc_ice_props_t summary = {0};
    char num[32], *offsets = NULL;
    truncate_match_t trunc = {c->job, cdc_checkpoint_truncated(rec, table)};
    cdc_err_t rc;

    memset(&schema, 0, sizeof(schema));
    if (location == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "staged file names table \"%s\", expected \"<namespace>.<table>\"",
                             table);
    if ((rc = schema_for(rec, table, &schema, &version, &policy, &have_schema, e)) != CDC_OK)
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
    if (rc == CDC_ERR_NOT_FOUND) {
        bool has_files = tf->nfiles > 0;
        if (!have_schema && trunc.partitions != 0 && !has_files) {
            /* a truncate of a table nobody wrote yet: nothing to remove */
            cdc_error_clear(e);
            rc = CDC_OK;
            goto cleanup;
        }
        if (!have_schema) {
            rc = cdc_error_set(e, CDC_ERR_PROTOCOL,
                               "table \"%s\" does not exist and checkpoint %" PRIu64
                               " carries no schema for it",
                               table, rec->epoch);
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
    if (have_schema && (rc = evolve(c, t, rec, table, &schema, version, policy,
                                    &res->schema_changes, e)) != CDC_OK)
        goto cleanup;
    apply_layout(c, t, table);

    for (size_t k = 0; k < tf->nfiles; k++) {
        if (rec->files[tf->files[k]].file.content == CDC_ICE_CONTENT_DATA)
            ndata++;
        else
            ndels++;
    }
    if (ndata + ndels == 0 && trunc.partitions == 0) {
        rc = CDC_OK;
        goto cleanup;
    }
    data = calloc(ndata + 1, sizeof(*data));
    dels = calloc(ndels + 1, sizeof(*dels));
    if (data == NULL || dels == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    ndata = ndels = 0;
    for (size_t k = 0; k < tf->nfiles; k++) {
        const cdc_staged_file_t *f = &rec->files[tf->files[k]];
        if (f->file.content == CDC_ICE_CONTENT_DATA)
            data[ndata++] = f->file; /* shallow: borrowed for the commit */
        else
            dels[ndels++] = f->file;
    }
    offsets = cdc_checkpoint_offsets_json(rec, table);
    cdc_ice_props_set(&summary, CDC_ICE_SUMMARY_JOB, c->job);
    snprintf(num, sizeof(num), "%" PRIu64, rec->epoch);
    cdc_ice_props_set(&summary, CDC_ICE_SUMMARY_CHECKPOINT, num);
    cdc_ice_props_set(&summary, CDC_ICE_SUMMARY_OFFSETS, offsets ? offsets : "{}");
    snprintf(num, sizeof(num), "%" PRIu64, c->term);
    cdc_ice_props_set(&summary, CDC_ICE_SUMMARY_TERM, num);

    for (int attempt = 0;; attempt++) {
        const char *tv;
        cdc_ice_commit_t ic;
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
        if (cdc_ice_table_last_checkpoint(t, c->job) >= (int64_t)rec->epoch) {
            res->tables_skipped++;
            rc = CDC_OK;
            goto cleanup;
        }
        memset(&ic, 0, sizeof(ic));
        ic.data_files = data;
        ic.ndata_files = ndata;
        ic.delete_files = dels;
        ic.ndelete_files = ndels;
        ic.summary = &summary;
        if (trunc.partitions != 0) {
            /* TRUNCATE: the slots' earlier files go in the snapshot that adds their new ones */
            ic.remove = truncated_file;
            ic.remove_arg = &trunc;
        }
        rc = cdc_ice_table_commit(t, &ic, NULL, e);
        if (rc == CDC_OK) {
            res->tables_committed++;
            int64_t added = 0;
            for (size_t k = 0; k < ndata; k++)
                added += data[k].file_size_in_bytes;
            for (size_t k = 0; k < ndels; k++)
                added += dels[k].file_size_in_bytes;
            cdc_table_stats_note(&c->stats, table, t, rec->epoch, data, ndata, added);
            if (trunc.partitions != 0)
                cdc_log_info("checkpoint %" PRIu64 ": truncate of table \"%s\" applied for "
                             "partitions 0x%03x",
                             rec->epoch, table, trunc.partitions);
            goto cleanup;
        }
        if (rc != CDC_ERR_CONFLICT || attempt + 1 >= COMMIT_ATTEMPTS)
            goto cleanup;
        cdc_error_clear(e);
    }
cleanup:
    if (rc != CDC_OK && e && strstr(e->msg, table) == NULL)
        cdc_error_prefix(e, "commit of checkpoint %" PRIu64 " to table \"%s\"", rec->epoch, table);
    cdc_ice_props_free(&summary);
    free(offsets);
    free(data);
    free(dels);
    if (rc == CDC_OK && t != NULL)
        keep_table(c, location, t);
    else
        cdc_ice_table_close(t);
    cdc_ice_schema_free(&schema);
    free(location);
    return rc;
}

/* One table's commit under the table's lock (maintenance commits take turns with it). */
static cdc_err_t commit_table(cdc_committer_t *c, const cdc_checkpoint_t *rec, const char *table,
                              const table_files_t *tf, cdc_commit_result_t *res, cdc_error_t *e)
{
    char *location = table_location(c, table);
    if (location != NULL)
        cdc_committer_table_lock(c, location);
    cdc_err_t rc = commit_table_locked(c, rec, table, tf, res, e);
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

/* The tables of one cdc_committer_commit, taken in turn by COMMIT_PARALLEL threads. */
typedef struct table_queue {
    cdc_committer_t *c;
    const cdc_checkpoint_t *rec;
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
        j->rc = commit_table(q->c, q->rec, j->table, &j->tf, &j->res, &j->e);
    }
}

#ifndef COMMIT_PARALLEL
#define COMMIT_PARALLEL 8
#endif

cdc_err_t cdc_committer_commit(cdc_committer_t *c, const cdc_checkpoint_t *rec,
                               cdc_commit_result_t *res, cdc_error_t *e)
{
    const char **tables;
    size_t ntables = 0;
    cdc_err_t rc = CDC_OK;
    table_job_t *jobs;
    size_t *fidx;            /* the files' indexes in rec, grouped by table */
    cdc_strmap_t seen = {0}; /* name (borrowed from rec) -> its entry of tables[] */

    memset(res, 0, sizeof(*res));
    tables = calloc(rec->nfiles + rec->nschemas + rec->ntruncates + 1, sizeof(*tables));
    if (tables == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < rec->nschemas + rec->nfiles + rec->ntruncates; i++) {
        const char *t = i < rec->nschemas ? rec->schemas[i].table
                        : i < rec->nschemas + rec->nfiles
                            ? rec->files[i - rec->nschemas].table
                            : rec->truncates[i - rec->nschemas - rec->nfiles].table;
        if (cdc_strmap_get(&seen, t) != NULL)
            continue;
        if (cdc_strmap_put(&seen, t, &tables[ntables]) != CDC_OK) {
            cdc_strmap_free(&seen);
            free(tables);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        tables[ntables++] = t;
    }
    jobs = calloc(ntables + 1, sizeof(*jobs));
    fidx = calloc(rec->nfiles + 1, sizeof(*fidx));
    if (jobs == NULL || fidx == NULL) {
        cdc_strmap_free(&seen);
        free(tables);
        free(jobs);
        free(fidx);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
#define JOB_OF(name) (&jobs[(const char **)cdc_strmap_get(&seen, (name)) - tables])
    for (size_t i = 0; i < rec->nfiles; i++)
        JOB_OF(rec->files[i].table)->tf.nfiles++;
    for (size_t k = 0, at = 0; k < ntables; k++) {
        jobs[k].tf.files = fidx + at;
        at += jobs[k].tf.nfiles;
        jobs[k].tf.nfiles = 0;
    }
    for (size_t i = 0; i < rec->nfiles; i++) {
        table_job_t *j = JOB_OF(rec->files[i].table);
        j->tf.files[j->tf.nfiles++] = i;
    }
#undef JOB_OF
    cdc_strmap_free(&seen);
    /* Tables in parallel (their metadata writes and fsyncs overlap): COMMIT_PARALLEL
     * threads take the next table as soon as they are done with one, so that a slow table
     * holds up only its own thread. A failed table is retried with the whole checkpoint;
     * the tables that made it skip the epoch then (their snapshot already holds its
     * checkpoint id). */
    for (size_t k = 0; k < ntables; k++)
        jobs[k].table = tables[k];
    table_queue_t q = {.c = c, .rec = rec, .jobs = jobs, .njobs = ntables};
    pthread_t th[COMMIT_PARALLEL];
    size_t nth = 0;
    while (ntables > 1 && nth + 1 < COMMIT_PARALLEL && nth + 1 < ntables &&
           pthread_create(&th[nth], NULL, table_worker, &q) == 0)
        nth++;
    table_worker(&q); /* this thread takes tables too (all of them when none started) */
    for (size_t k = 0; k < nth; k++)
        pthread_join(th[k], NULL);
    for (size_t i = 0; i < ntables; i++) {
        res->tables_committed += jobs[i].res.tables_committed;
        res->tables_skipped += jobs[i].res.tables_skipped;
        res->schema_changes += jobs[i].res.schema_changes;
        /* the first failure, but fencing wins: the caller must step down */
        if (jobs[i].rc != CDC_OK &&
            (rc == CDC_OK || (jobs[i].rc == CDC_ERR_FENCED && rc != CDC_ERR_FENCED))) {
            rc = jobs[i].rc;
            if (e != NULL)
                *e = jobs[i].e;
        }
    }
    free(jobs);
    free(fidx);
    free(tables);
    return rc;
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
