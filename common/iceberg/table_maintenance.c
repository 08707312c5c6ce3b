/*
 * Table maintenance (see table.h): the files a table references (for the orphan
 * scan), with a process-wide cache of what immutable manifest lists and manifests
 * list, and snapshot expiry, which deletes the files only expired snapshots
 * referenced. Commits feed the cache with the manifests they write
 * (table_commit.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/iceberg/manifest.h"
#include "common/iceberg/table.h"
#include "common/iceberg/table_int.h"
#include "common/log.h"

/* Open-addressing set of strings (borrowed pointers) for de-duplicating file lists. */
typedef struct strset {
    const char **slots;
    size_t cap, n;
} strset_t;

static uint64_t str_hash(const char *s)
{
    return cdc_hash_bytes(s, strlen(s), 0);
}

/* Adds s; returns 1 if added, 0 if present, -1 on allocation failure. */
static int strset_add(strset_t *set, const char *s)
{
    if (2 * (set->n + 1) > set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 256;
        const char **slots = calloc(cap, sizeof(char *));
        if (!slots)
            return -1;
        for (size_t i = 0; i < set->cap; i++) {
            if (!set->slots[i])
                continue;
            size_t j = str_hash(set->slots[i]) & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = set->slots[i];
        }
        free(set->slots);
        set->slots = slots;
        set->cap = cap;
    }
    size_t j = str_hash(s) & (set->cap - 1);
    while (set->slots[j]) {
        if (strcmp(set->slots[j], s) == 0)
            return 0;
        j = (j + 1) & (set->cap - 1);
    }
    set->slots[j] = s;
    set->n++;
    return 1;
}

static bool strset_has(const strset_t *set, const char *s)
{
    if (set->cap == 0)
        return false;
    size_t j = str_hash(s) & (set->cap - 1);
    while (set->slots[j]) {
        if (strcmp(set->slots[j], s) == 0)
            return true;
        j = (j + 1) & (set->cap - 1);
    }
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool list_add(char ***v, size_t *n, size_t *cap, const char *s)
{
    if (cdc_array_reserve(*v, *cap, *n + 1, 64) != CDC_OK)
        return false;
    if (!((*v)[*n] = strdup(s)))
        return false;
    (*n)++;
    return true;
}

/*
 * Paths listed by immutable Avro files (manifest list -> manifests, manifest -> data and
 * delete files), cached for the life of the process: a file of either kind is written
 * once under a unique name and never changes, and reading hundreds of them again on
 * every orphan scan stalled the coordinator for seconds. A manifest list is cached only
 * with all its manifests, so a cached list never needs the Avro file again. Guarded by
 * ref_cache_mu, held for a whole cdc_ice_table_referenced_files() call; emptied when it
 * grows past REF_CACHE_MAX_ITEMS (it only saves reads).
 */
#define REF_CACHE_MAX_ITEMS (4u * 1024 * 1024)

typedef struct ref_entry {
    char *path;
    char **items;
    size_t n;
} ref_entry_t;

static pthread_mutex_t ref_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static ref_entry_t *ref_slots;
static size_t ref_cap, ref_n, ref_items;

static void ref_cache_clear(void)
{
    for (size_t i = 0; i < ref_cap; i++) {
        if (ref_slots[i].path == NULL)
            continue;
        free(ref_slots[i].path);
        cdc_storage_list_free(ref_slots[i].items, ref_slots[i].n);
    }
    free(ref_slots);
    ref_slots = NULL;
    ref_cap = ref_n = ref_items = 0;
}

static const ref_entry_t *ref_cache_get(const char *path)
{
    if (ref_cap == 0)
        return NULL;
    for (size_t j = str_hash(path) & (ref_cap - 1); ref_slots[j].path; j = (j + 1) & (ref_cap - 1))
        if (strcmp(ref_slots[j].path, path) == 0)
            return &ref_slots[j];
    return NULL;
}

/* Takes items (n strings) on success; false on allocation failure (items untouched). */
static bool ref_cache_put(const char *path, char **items, size_t n)
{
    if (2 * (ref_n + 1) > ref_cap) {
        size_t cap = ref_cap ? ref_cap * 2 : 1024;
        ref_entry_t *slots = calloc(cap, sizeof(*slots));
        if (slots == NULL)
            return false;
        for (size_t i = 0; i < ref_cap; i++) {
            if (ref_slots[i].path == NULL)
                continue;
            size_t j = str_hash(ref_slots[i].path) & (cap - 1);
            while (slots[j].path)
                j = (j + 1) & (cap - 1);
            slots[j] = ref_slots[i];
        }
        free(ref_slots);
        ref_slots = slots;
        ref_cap = cap;
    }
    size_t j = str_hash(path) & (ref_cap - 1);
    while (ref_slots[j].path)
        j = (j + 1) & (ref_cap - 1);
    if ((ref_slots[j].path = strdup(path)) == NULL)
        return false;
    ref_slots[j].items = items;
    ref_slots[j].n = n;
    ref_n++;
    ref_items += n + 1;
    return true;
}

/*
 * Caches what path lists: name(items, i) for each i < n that is not NULL, when path is
 * not cached yet and, with names_cached, every name is cached itself. Best effort: on
 * allocation failure nothing is cached.
 */
static void ref_cache_feed(const char *path, const void *items, size_t n,
                           const char *(*name)(const void *items, size_t i), bool names_cached)
{
    char **names = NULL;
    size_t cnt = 0, cap = 0;
    bool ok = true;

    for (size_t i = 0; i < n && ok; i++) {
        const char *s = name(items, i);
        if (s != NULL)
            ok = list_add(&names, &cnt, &cap, s);
    }
    pthread_mutex_lock(&ref_cache_mu);
    for (size_t i = 0; i < cnt && ok && names_cached; i++)
        ok = ref_cache_get(names[i]) != NULL;
    if (ok && ref_cache_get(path) == NULL && ref_cache_put(path, names, cnt))
        names = NULL, cnt = 0;
    pthread_mutex_unlock(&ref_cache_mu);
    cdc_storage_list_free(names, cnt);
}

/* The path of entry i of a manifest when it is live, else NULL. */
static const char *live_file(const void *entries, size_t i)
{
    const cdc_ice_manifest_entry_t *en = (const cdc_ice_manifest_entry_t *)entries + i;
    return en->status != CDC_ICE_ENTRY_DELETED ? en->file.path : NULL;
}

/* The path of manifest i of a manifest list. */
static const char *manifest_path(const void *mfs, size_t i)
{
    return ((const cdc_ice_manifest_file_t *)mfs)[i].path;
}

/*
 * Caches the paths a manifest this process just wrote lists (its live entries), so orphan
 * scans and expiry never read it back. Best effort: on allocation failure nothing is cached.
 */
void cdc_ice_table_ref_cache_feed_manifest(const char *path, const cdc_ice_manifest_entry_t *v,
                                           size_t n)
{
    ref_cache_feed(path, v, n, live_file, false);
}

/*
 * Caches a manifest list this process just wrote, but only when every manifest it names is
 * cached (the invariant ref_cache_load keeps); otherwise a scan reads the list once.
 */
void cdc_ice_table_ref_cache_feed_list(const char *path, const cdc_ice_manifest_file_t *mfs,
                                       size_t n)
{
    ref_cache_feed(path, mfs, n, manifest_path, true);
}

/* Reads manifest list s (and the manifests it names that are not cached) into the cache. */
static cdc_err_t ref_cache_load(cdc_ice_table_t *t, const cdc_ice_snapshot_t *s,
                                const ref_entry_t **out, cdc_error_t *e)
{
    cdc_ice_manifest_file_t *mfs = NULL;
    size_t nmf = 0, cnt = 0, cap = 0;
    char **paths = NULL;
    cdc_err_t rc = cdc_ice_table_read_manifest_list(t, s, &mfs, &nmf, e);

    for (size_t j = 0; j < nmf && rc == CDC_OK; j++) {
        cdc_ice_manifest_entry_t *ents;
        size_t nents, fcnt = 0, fcap = 0;
        char **files = NULL;
        if (!list_add(&paths, &cnt, &cap, mfs[j].path)) {
            rc = oom(e);
            break;
        }
        if (ref_cache_get(mfs[j].path) != NULL)
            continue;
        if ((rc = cdc_ice_table_read_manifest(t, &mfs[j], &ents, &nents, e)) != CDC_OK)
            break;
        for (size_t k = 0; k < nents && rc == CDC_OK; k++) {
            /* a removed file is referenced by the snapshots where it is live */
            if (ents[k].status == CDC_ICE_ENTRY_DELETED)
                continue;
            if (!list_add(&files, &fcnt, &fcap, ents[k].file.path))
                rc = oom(e);
        }
        cdc_ice_manifest_entries_free(ents, nents);
        if (rc == CDC_OK && !ref_cache_put(mfs[j].path, files, fcnt))
            rc = oom(e);
        if (rc != CDC_OK)
            cdc_storage_list_free(files, fcnt);
    }
    cdc_ice_manifest_files_free(mfs, nmf);
    if (rc == CDC_OK && !ref_cache_put(s->manifest_list, paths, cnt))
        rc = oom(e);
    if (rc != CDC_OK) {
        cdc_storage_list_free(paths, cnt);
        return rc;
    }
    *out = ref_cache_get(s->manifest_list);
    return CDC_OK;
}

cdc_err_t cdc_ice_table_referenced_files(cdc_ice_table_t *t, char ***locations, size_t *n,
                                         cdc_error_t *e)
{
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    strset_t manifests = {0};
    cdc_err_t rc = CDC_OK;
    char *cur = cdc_ice_table_metadata_path(t->location, t->version),
         *hp = cdc_ice_table_hint_path(t->location);

    pthread_mutex_lock(&ref_cache_mu);
    if (ref_items > REF_CACHE_MAX_ITEMS)
        ref_cache_clear();
    if (!cur || !hp || !list_add(&v, &cnt, &cap, cur) || !list_add(&v, &cnt, &cap, hp)) {
        rc = oom(e);
        goto done;
    }
    for (size_t i = 0; i < t->md.nmetadata_log; i++)
        if (!list_add(&v, &cnt, &cap, t->md.metadata_log[i].file)) {
            rc = oom(e);
            goto done;
        }
    for (size_t i = 0; i < t->md.nsnapshots; i++) {
        const cdc_ice_snapshot_t *s = &t->md.snapshots[i];
        const ref_entry_t *ml;
        if (!list_add(&v, &cnt, &cap, s->manifest_list)) {
            rc = oom(e);
            goto done;
        }
        if ((ml = ref_cache_get(s->manifest_list)) == NULL &&
            (rc = ref_cache_load(t, s, &ml, e)) != CDC_OK)
            goto done;
        for (size_t j = 0; j < ml->n; j++) {
            const ref_entry_t *m;
            /* manifests are shared between snapshots: list each once */
            int added = strset_add(&manifests, ml->items[j]);
            if (added < 0) {
                rc = oom(e);
                goto done;
            }
            if (added == 0)
                continue;
            if (!list_add(&v, &cnt, &cap, ml->items[j])) {
                rc = oom(e);
                goto done;
            }
            m = ref_cache_get(ml->items[j]);
            for (size_t k = 0; m != NULL && k < m->n; k++)
                if (!list_add(&v, &cnt, &cap, m->items[k])) {
                    rc = oom(e);
                    goto done;
                }
        }
    }
    qsort(v, cnt, sizeof(char *), cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (u > 0 && strcmp(v[u - 1], v[i]) == 0) {
            free(v[i]);
            continue;
        }
        v[u++] = v[i];
    }
    cnt = u;
done:
    pthread_mutex_unlock(&ref_cache_mu);
    free(manifests.slots);
    free(cur);
    free(hp);
    if (rc != CDC_OK) {
        cdc_storage_list_free(v, cnt);
        return rc;
    }
    *locations = v;
    *n = cnt;
    return CDC_OK;
}

cdc_err_t cdc_ice_table_expire_snapshots(cdc_ice_table_t *t, int64_t older_than_ms,
                                         int64_t min_keep, size_t *expired, cdc_error_t *e)
{
    char **unref = NULL;
    size_t nunref = 0;
    cdc_err_t rc = cdc_ice_table_expire_snapshots_deferred(t, older_than_ms, min_keep, expired,
                                                           &unref, &nunref, e);
    cdc_ice_table_delete_files(t, unref, nunref);
    cdc_storage_list_free(unref, nunref);
    return rc;
}

void cdc_ice_table_delete_files(cdc_ice_table_t *t, char *const *locations, size_t n)
{
    cdc_error_t de;
    for (size_t i = 0; i < n; i++)
        if (cdc_storage_delete(t->storage, locations[i], &de) != CDC_OK)
            cdc_log_warn("could not delete expired file: %s", de.msg);
}

cdc_err_t cdc_ice_table_expire_snapshots_deferred(cdc_ice_table_t *t, int64_t older_than_ms,
                                                  int64_t min_keep, size_t *expired,
                                                  char ***unreferenced, size_t *nunreferenced,
                                                  cdc_error_t *e)
{
    char **unref = NULL;
    size_t nunref = 0, capunref = 0;
    *unreferenced = NULL;
    *nunreferenced = 0;
    if (older_than_ms < 0)
        older_than_ms = cdc_clock_wall_ms() - prop_int(&t->md, "history.expire.max-snapshot-age-ms",
                                                       5LL * 24 * 3600 * 1000);
    if (min_keep < 0)
        min_keep = prop_int(&t->md, "history.expire.min-snapshots-to-keep", 1);
    if (expired)
        *expired = 0;
    size_t keep_from =
        t->md.nsnapshots > (size_t)min_keep ? t->md.nsnapshots - (size_t)min_keep : 0;
    size_t nexp = 0;
    for (size_t i = 0; i < t->md.nsnapshots; i++)
        if (i < keep_from && t->md.snapshots[i].timestamp_ms < older_than_ms &&
            t->md.snapshots[i].snapshot_id != t->md.current_snapshot_id)
            nexp++;
    if (nexp == 0)
        return CDC_OK;

    char **before = NULL, **after = NULL;
    size_t nbefore = 0, nafter = 0;
    strset_t keep = {0};
    cdc_ice_metadata_t md;
    memset(&md, 0, sizeof(md));
    cdc_err_t rc = cdc_ice_table_referenced_files(t, &before, &nbefore, e);
    if (rc != CDC_OK)
        return rc;
    if ((rc = cdc_ice_metadata_copy(&md, &t->md)) != CDC_OK) {
        rc = oom(e);
        goto done;
    }
    size_t w = 0;
    for (size_t i = 0; i < md.nsnapshots; i++) {
        cdc_ice_snapshot_t *s = &md.snapshots[i];
        if (i < keep_from && s->timestamp_ms < older_than_ms &&
            s->snapshot_id != md.current_snapshot_id) {
            free(s->manifest_list);
            free(s->json);
            cdc_ice_props_free(&s->summary);
            continue;
        }
        md.snapshots[w++] = *s;
    }
    md.nsnapshots = w;
    w = 0;
    for (size_t i = 0; i < md.nsnapshot_log; i++)
        if (cdc_ice_metadata_snapshot(&md, md.snapshot_log[i].snapshot_id))
            md.snapshot_log[w++] = md.snapshot_log[i];
    md.nsnapshot_log = w;
    if ((rc = cdc_ice_table_commit_change(t, &md, e)) != CDC_OK)
        goto done;
    if (expired)
        *expired = nexp;
    /* the expiry is committed; deleting unreferenced files is best effort */
    cdc_error_t de;
    if (cdc_ice_table_referenced_files(t, &after, &nafter, &de) != CDC_OK) {
        cdc_log_warn("could not list files of \"%s\" after expiring snapshots: %s", t->location,
                     de.msg);
        goto done;
    }
    for (size_t i = 0; i < nafter; i++)
        if (strset_add(&keep, after[i]) < 0)
            goto done;
    for (size_t i = 0; i < nbefore; i++) {
        if (strset_has(&keep, before[i]) || strstr(before[i], ".metadata.json") ||
            strstr(before[i], "version-hint.text"))
            continue; /* metadata files follow write.metadata.previous-versions-max */
        if (!list_add(&unref, &nunref, &capunref, before[i]))
            break; /* out of memory: the rest are left to orphan cleanup */
    }
    *unreferenced = unref;
    *nunreferenced = nunref;
done:
    free(keep.slots);
    cdc_ice_metadata_free(&md);
    cdc_storage_list_free(before, nbefore);
    cdc_storage_list_free(after, nafter);
    return rc;
}
