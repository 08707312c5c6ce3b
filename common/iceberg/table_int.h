/*
 * Internals shared by the pieces of the Iceberg table module (table.h): the handle,
 * small helpers, and what each piece offers the others. table.c loads, creates and
 * swaps metadata versions and reads manifests; table_commit.c adds snapshots;
 * table_evolution.c changes schemas, layouts and properties; table_maintenance.c
 * expires snapshots and lists referenced files. Not for use outside table*.c.
 */
#ifndef CDC_ICEBERG_TABLE_INT_H
#define CDC_ICEBERG_TABLE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/iceberg/manifest.h"
#include "common/iceberg/metadata.h"
#include "common/iceberg/table.h"

struct cdc_ice_table {
    cdc_storage_t *storage; /* borrowed */
    char *location;
    int64_t version;
    cdc_ice_metadata_t md;
};

/* Whether two files are in the same partition: spec and values. */
static inline bool cdc_ice_file_same_partition(const cdc_ice_data_file_t *a,
                                               const cdc_ice_data_file_t *b)
{
    if (a->spec_id != b->spec_id || a->npartition != b->npartition)
        return false;
    for (size_t i = 0; i < a->npartition; i++) {
        const cdc_ice_part_value_t *x = &a->partition[i], *y = &b->partition[i];
        if (x->null != y->null ||
            (!x->null && (x->len != y->len || memcmp(x->bytes, y->bytes, x->len) != 0)))
            return false;
    }
    return true;
}

/* The error of a failed allocation. */
static inline cdc_err_t oom(cdc_error_t *e)
{
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory in iceberg table");
}

/* Table property `key` as an integer or boolean; dflt when it is unset (or, for an
 * integer, not one). */
static inline int64_t prop_int(const cdc_ice_metadata_t *md, const char *key, int64_t dflt)
{
    const char *v = cdc_ice_props_get(&md->properties, key);
    if (!v || !*v)
        return dflt;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end ? dflt : (int64_t)x;
}

static inline bool prop_bool(const cdc_ice_metadata_t *md, const char *key, bool dflt)
{
    const char *v = cdc_ice_props_get(&md->properties, key);
    if (!v)
        return dflt;
    return strcmp(v, "true") == 0;
}

/* ---- table.c ------------------------------------------------------------------------ */

/* A random snapshot id, positive and not yet used in md. */
int64_t cdc_ice_table_new_snapshot_id(const cdc_ice_metadata_t *md);

/* "<location>/metadata/v<version>.metadata.json" and ".../version-hint.text"; malloc'ed,
 * NULL on allocation failure. */
char *cdc_ice_table_metadata_path(const char *location, int64_t version);
char *cdc_ice_table_hint_path(const char *location);

/*
 * Commits md as the table's next metadata version (the atomic swap), after appending
 * the replaced version to its metadata-log (trimmed to
 * write.metadata.previous-versions-max; the dropped files are deleted when
 * write.metadata.delete-after-commit.enabled). On success t takes md (md is zeroed);
 * on failure md stays with the caller.
 */
cdc_err_t cdc_ice_table_commit_with_log(cdc_ice_table_t *t, cdc_ice_metadata_t *md, cdc_error_t *e);

/* cdc_ice_table_commit_with_log() of a change made now: md's last-updated-ms is the
 * current time, or just after the table's when the clock is behind it. */
cdc_err_t cdc_ice_table_commit_change(cdc_ice_table_t *t, cdc_ice_metadata_t *md, cdc_error_t *e);

/* Reads the manifest list of snapshot s (none for NULL); the caller owns *files. */
cdc_err_t cdc_ice_table_read_manifest_list(cdc_ice_table_t *t, const cdc_ice_snapshot_t *s,
                                           cdc_ice_manifest_file_t **files, size_t *n,
                                           cdc_error_t *e);

/*
 * Result fields of a spec's partition fields (malloc'ed, caller frees the array; the
 * names stay the spec's), NULL for an unpartitioned spec or when a source field is not
 * in the schema history (*ok = false then).
 */
cdc_ice_field_t *cdc_ice_table_spec_fields(const cdc_ice_metadata_t *md,
                                           const cdc_ice_partition_spec_t *spec, bool *ok);

/* Reads manifest mf with its spec's partition types; the caller owns *entries. */
cdc_err_t cdc_ice_table_read_manifest(cdc_ice_table_t *t, const cdc_ice_manifest_file_t *mf,
                                      cdc_ice_manifest_entry_t **entries, size_t *n,
                                      cdc_error_t *e);

/* ---- table_maintenance.c: the referenced-files cache, fed by commits ----------------- */

/*
 * Caches the paths a manifest this process just wrote lists (its live entries), so orphan
 * scans and expiry never read it back. Best effort: on allocation failure nothing is cached.
 */
void cdc_ice_table_ref_cache_feed_manifest(const char *path, const cdc_ice_manifest_entry_t *v,
                                           size_t n);

/*
 * Caches a manifest list this process just wrote, but only when every manifest it names is
 * cached; otherwise a scan reads the list once.
 */
void cdc_ice_table_ref_cache_feed_list(const char *path, const cdc_ice_manifest_file_t *mfs,
                                       size_t n);

#endif
