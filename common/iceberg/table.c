/*
 * Iceberg tables (see table.h): locations, load and create in the Hadoop-catalog
 * layout, the optimistic, atomic metadata swap every change goes through
 * (commit_metadata(), with the metadata log: cdc_ice_table_commit_with_log()), reading
 * the manifests of a snapshot, and queries. Snapshot commits are in table_commit.c,
 * metadata-only changes (schema, layout, properties) in table_evolution.c, snapshot
 * expiry and the files a table references in table_maintenance.c; table_int.h holds
 * what they share.
 */
#include "common/clock.h"
#include "common/iceberg/table.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/buf.h"
#include "common/iceberg/manifest.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table_int.h"
#include "common/log.h"

#define DEFAULT_PREVIOUS_VERSIONS_MAX 100

static void random_bytes(void *p, size_t n)
{
    if (getrandom(p, n, 0) != (ssize_t)n) {
        uint8_t *b = p;
        for (size_t i = 0; i < n; i++)
            b[i] = (uint8_t)(rand() ^ (int)cdc_clock_wall_ms());
    }
}

void cdc_ice_uuid(char out[37])
{
    uint8_t b[16];
    random_bytes(b, sizeof(b));
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

int64_t cdc_ice_table_new_snapshot_id(const cdc_ice_metadata_t *md)
{
    for (;;) {
        uint64_t v;
        random_bytes(&v, sizeof(v));
        int64_t id = (int64_t)(v & INT64_MAX);
        if (id != 0 && !cdc_ice_metadata_snapshot(md, id))
            return id;
    }
}

char *cdc_ice_table_location(const char *warehouse, const char *ns, const char *name)
{
    size_t wl = strlen(warehouse);
    while (wl > 1 && warehouse[wl - 1] == '/')
        wl--;
    char *out;
    if (asprintf(&out, "%.*s/%s/%s", (int)wl, warehouse, ns, name) < 0)
        return NULL;
    return out;
}

char *cdc_ice_data_file_location(const char *table_location, const char *tag)
{
    char uuid[37], *out;
    cdc_ice_uuid(uuid);
    if (asprintf(&out, "%s/data/%s%s%s.parquet", table_location, tag ? tag : "", tag ? "-" : "",
                 uuid) < 0)
        return NULL;
    return out;
}

cdc_err_t cdc_ice_data_file_put(cdc_storage_t *storage, const char *table_location, const char *tag,
                                const void *data, size_t len, char **location, cdc_error_t *e)
{
    char *loc = cdc_ice_data_file_location(table_location, tag);
    if (!loc)
        return oom(e);
    cdc_err_t rc = cdc_storage_put(storage, loc, data, len, e);
    if (rc != CDC_OK) {
        free(loc);
        return rc;
    }
    *location = loc;
    return CDC_OK;
}

char *cdc_ice_table_metadata_path(const char *location, int64_t version)
{
    char *p;
    if (asprintf(&p, "%s/metadata/v%" PRId64 ".metadata.json", location, version) < 0)
        return NULL;
    return p;
}

char *cdc_ice_table_hint_path(const char *location)
{
    char *p;
    if (asprintf(&p, "%s/metadata/version-hint.text", location) < 0)
        return NULL;
    return p;
}

static char *normalize(const char *location)
{
    size_t l = strlen(location);
    while (l > 1 && location[l - 1] == '/')
        l--;
    return strndup(location, l);
}

/* ---- load / create ------------------------------------------------------------------ */

static cdc_err_t read_version(cdc_ice_table_t *t, int64_t version, cdc_ice_metadata_t *md,
                              cdc_error_t *e)
{
    char *path = cdc_ice_table_metadata_path(t->location, version);
    if (!path)
        return oom(e);
    uint8_t *buf;
    size_t len;
    cdc_err_t rc = cdc_storage_get(t->storage, path, &buf, &len, e);
    if (rc == CDC_OK) {
        rc = cdc_ice_metadata_parse((const char *)buf, len, md, e);
        if (rc != CDC_OK)
            cdc_error_prefix(e, "could not load \"%s\"", path);
        free(buf);
    }
    free(path);
    return rc;
}

static cdc_err_t version_exists(cdc_ice_table_t *t, int64_t version, bool *exists, cdc_error_t *e)
{
    char *path = cdc_ice_table_metadata_path(t->location, version);
    if (!path)
        return oom(e);
    cdc_err_t rc = cdc_storage_exists(t->storage, path, exists, e);
    free(path);
    return rc;
}

/*
 * The highest version among the metadata files listed under the table (0 when none): where
 * to start when the version hint is missing, garbled or names a removed file, since the
 * oldest versions are deleted once more than the table keeps exist (docs/iceberg.md).
 */
static cdc_err_t highest_listed(cdc_ice_table_t *t, int64_t *version, cdc_error_t *e)
{
    char *prefix = NULL, **locs = NULL;
    size_t n = 0;
    cdc_err_t rc;
    *version = 0;
    if (asprintf(&prefix, "%s/metadata/v", t->location) < 0)
        return oom(e);
    rc = cdc_storage_list(t->storage, prefix, &locs, &n, e);
    if (rc == CDC_ERR_NOT_FOUND)
        rc = CDC_OK;
    for (size_t i = 0; rc == CDC_OK && i < n; i++) {
        const char *name = locs[i] + strlen(prefix);
        char *end = NULL;
        long long v = strtoll(name, &end, 10);
        if (end != name && strcmp(end, ".metadata.json") == 0 && v > *version)
            *version = v;
    }
    cdc_storage_list_free(locs, n);
    free(prefix);
    return rc;
}

static cdc_err_t find_latest(cdc_ice_table_t *t, int64_t *version, cdc_error_t *e)
{
    char *hp = cdc_ice_table_hint_path(t->location);
    if (!hp)
        return oom(e);
    uint8_t *buf = NULL;
    size_t len = 0;
    int64_t v = 0;
    cdc_err_t rc = cdc_storage_get(t->storage, hp, &buf, &len, e);
    free(hp);
    if (rc == CDC_OK) {
        v = strtoll((const char *)buf, NULL, 10);
        free(buf);
        if (v < 1)
            v = 0;
    } else if (rc != CDC_ERR_NOT_FOUND) {
        return rc;
    }
    bool exists = false;
    if (v >= 1) {
        if ((rc = version_exists(t, v, &exists, e)) != CDC_OK)
            return rc;
        if (!exists)
            v = 0; /* hint points to a removed file: scan from the start */
    }
    int64_t hint = v; /* (a listed version is not trusted as the hint is: it may be torn) */
    if (v == 0 && (rc = highest_listed(t, &v, e)) != CDC_OK)
        return rc;
    /* the hint may lag behind the newest metadata file: probe forward */
    for (;;) {
        if ((rc = version_exists(t, v + 1, &exists, e)) != CDC_OK)
            return rc;
        if (!exists)
            break;
        v++;
    }
    /* A version past the hint that does not parse is torn: a committer crashed while it
     * wrote it on a file system without atomic rename, and nothing points at it. It is
     * ignored, and the next commit replaces it (commit_metadata; docs/operations.md,
     * "Disk faults"). */
    while (v > hint && v > 1) {
        cdc_ice_metadata_t md;
        cdc_error_t pe;
        if (read_version(t, v, &md, &pe) == CDC_OK) {
            cdc_ice_metadata_free(&md);
            break;
        }
        if (pe.code != CDC_ERR_CORRUPT)
            break;
        cdc_log_warn("table \"%s\": ignoring version %" PRId64 ", torn (%s)", t->location, v,
                     pe.msg);
        v--;
    }
    if (v == 0)
        return cdc_error_set(e, CDC_ERR_NOT_FOUND, "no iceberg table at \"%s\"", t->location);
    *version = v;
    return CDC_OK;
}

static cdc_err_t table_new(cdc_storage_t *storage, const char *location, cdc_ice_table_t **out,
                           cdc_error_t *e)
{
    cdc_ice_table_t *t = calloc(1, sizeof(*t));
    if (!t)
        return oom(e);
    t->storage = storage;
    if (!(t->location = normalize(location))) {
        free(t);
        return oom(e);
    }
    *out = t;
    return CDC_OK;
}

cdc_err_t cdc_ice_table_refresh(cdc_ice_table_t *t, cdc_error_t *e)
{
    int64_t v = 0;
    cdc_ice_metadata_t md;
    cdc_err_t rc = find_latest(t, &v, e);
    if (rc != CDC_OK)
        return rc;
    /* Metadata files are immutable (created once, never rewritten) and t->md is always
     * the content of t->version (commits replace both together): still the latest
     * version means nothing to re-read. Parsing the JSON, which grows by a snapshot per
     * commit until snapshots expire, was the largest part of a 1 s commit's CPU. */
    if (t->version > 0 && v == t->version)
        return CDC_OK;
    if ((rc = read_version(t, v, &md, e)) != CDC_OK)
        return rc;
    cdc_ice_metadata_free(&t->md);
    t->md = md;
    t->version = v;
    return CDC_OK;
}

cdc_err_t cdc_ice_table_load(cdc_storage_t *storage, const char *location, cdc_ice_table_t **out,
                             cdc_error_t *e)
{
    cdc_ice_table_t *t;
    cdc_err_t rc = table_new(storage, location, &t, e);
    if (rc != CDC_OK)
        return rc;
    if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK) {
        cdc_ice_table_close(t);
        return rc;
    }
    *out = t;
    return CDC_OK;
}

void cdc_ice_table_close(cdc_ice_table_t *t)
{
    if (!t)
        return;
    cdc_ice_metadata_free(&t->md);
    free(t->location);
    free(t);
}

const cdc_ice_metadata_t *cdc_ice_table_metadata(const cdc_ice_table_t *t)
{
    return &t->md;
}

int64_t cdc_ice_table_version(const cdc_ice_table_t *t)
{
    return t->version;
}

const char *cdc_ice_table_get_location(const cdc_ice_table_t *t)
{
    return t->location;
}

/*
 * Whether the existing version file (data, len) is torn: it does not parse. A committer
 * that crashed while writing it on a file system without atomic rename left it, nothing
 * points at it (the hint and readers stop before it, find_latest), so it is deleted for
 * the commit to take its number.
 */
static bool torn_version(cdc_ice_table_t *t, int64_t version, const char *path, const uint8_t *data,
                         size_t len)
{
    cdc_ice_metadata_t md;
    cdc_error_t pe, de;
    if (cdc_ice_metadata_parse((const char *)data, len, &md, &pe) == CDC_OK) {
        cdc_ice_metadata_free(&md);
        return false;
    }
    if (pe.code != CDC_ERR_CORRUPT)
        return false;
    if (cdc_storage_delete(t->storage, path, &de) != CDC_OK) {
        cdc_log_warn("table \"%s\": could not delete torn version %" PRId64 ": %s", t->location,
                     version, de.msg);
        return false;
    }
    cdc_log_warn("table \"%s\": deleted torn version %" PRId64 " (%zu bytes, %s): the commit "
                 "takes its number",
                 t->location, version, len, pe.msg);
    return true;
}

/*
 * The atomic swap: writes md as version t->version + 1 without overwrite, then the
 * hint. On success t takes md (md is zeroed); on failure md stays with the caller.
 */
static cdc_err_t commit_metadata(cdc_ice_table_t *t, cdc_ice_metadata_t *md, cdc_error_t *e)
{
    int64_t next = t->version + 1;
    char *path = cdc_ice_table_metadata_path(t->location, next), *json = NULL,
         *hp = cdc_ice_table_hint_path(t->location);
    cdc_err_t rc;
    if (!path || !hp) {
        rc = oom(e);
        goto done;
    }
    if ((rc = cdc_ice_metadata_write(md, &json, e)) != CDC_OK)
        goto done;
    rc = cdc_storage_put_if_absent(t->storage, path, json, strlen(json), e);
    if (rc == CDC_ERR_EXISTS) {
        /*
         * On S3 a retried PUT whose first attempt landed (answer lost to a timeout)
         * sees 412: if the existing version is byte for byte ours, we won.
         */
        uint8_t *cur = NULL;
        size_t curlen = 0;
        cdc_error_t ge;
        bool ours = cdc_storage_get(t->storage, path, &cur, &curlen, &ge) == CDC_OK &&
                    curlen == strlen(json) && memcmp(cur, json, curlen) == 0;
        if (!ours && cur != NULL && torn_version(t, next, path, cur, curlen)) {
            free(cur);
            rc = cdc_storage_put_if_absent(t->storage, path, json, strlen(json), e);
            if (rc == CDC_OK)
                goto won;
            cur = NULL;
        }
        free(cur);
        if (ours) {
            rc = CDC_OK;
            goto won;
        }
        rc = cdc_error_set_retriable(e, CDC_ERR_CONFLICT, true,
                                     "commit conflict on table \"%s\": version %" PRId64
                                     " was created by another committer",
                                     t->location, next);
        goto done;
    }
    if (rc != CDC_OK)
        goto done;
won:; /* a statement: C11 puts no declaration right after a label */
    /* The commit is durable now; the hint only speeds up loading (readers probe forward
     * from it), so its name is left to the next commit's directory fsync. */
    char num[24];
    int nl = snprintf(num, sizeof(num), "%" PRId64, next);
    cdc_error_t he;
    if (cdc_storage_put_deferred(t->storage, hp, num, (size_t)nl, &he) != CDC_OK)
        cdc_log_warn("could not update version hint of \"%s\": %s", t->location, he.msg);
    cdc_ice_metadata_free(&t->md);
    t->md = *md;
    memset(md, 0, sizeof(*md));
    t->version = next;
done:
    free(path);
    free(hp);
    free(json);
    return rc;
}

/* Appends the replaced version to metadata-log and trims it; returns removed files. */
static cdc_err_t log_previous(const cdc_ice_table_t *t, cdc_ice_metadata_t *md, char ***dropped,
                              size_t *ndropped, cdc_error_t *e)
{
    *dropped = NULL;
    *ndropped = 0;
    if (t->version < 1)
        return CDC_OK;
    char *prev = cdc_ice_table_metadata_path(t->location, t->version);
    if (!prev || cdc_array_resize(md->metadata_log, md->nmetadata_log + 1) != CDC_OK) {
        free(prev);
        return oom(e);
    }
    cdc_ice_metadata_log_t *ml = md->metadata_log;
    ml[md->nmetadata_log].timestamp_ms = t->md.last_updated_ms;
    ml[md->nmetadata_log].file = prev;
    md->nmetadata_log++;
    int64_t max =
        prop_int(md, "write.metadata.previous-versions-max", DEFAULT_PREVIOUS_VERSIONS_MAX);
    if (max < 1)
        max = 1;
    if ((int64_t)md->nmetadata_log > max) {
        size_t drop = md->nmetadata_log - (size_t)max;
        *dropped = calloc(drop, sizeof(char *));
        if (!*dropped)
            return oom(e);
        for (size_t i = 0; i < drop; i++)
            (*dropped)[i] = md->metadata_log[i].file;
        memmove(md->metadata_log, md->metadata_log + drop, (size_t)max * sizeof(*ml));
        md->nmetadata_log = (size_t)max;
        *ndropped = drop;
    }
    return CDC_OK;
}

static void delete_dropped(cdc_ice_table_t *t, char **dropped, size_t n)
{
    bool del = prop_bool(&t->md, "write.metadata.delete-after-commit.enabled", false);
    for (size_t i = 0; i < n; i++) {
        cdc_error_t e;
        if (del && cdc_storage_delete(t->storage, dropped[i], &e) != CDC_OK)
            cdc_log_warn("could not delete old metadata file: %s", e.msg);
        free(dropped[i]);
    }
    free(dropped);
}

/* Frees metadata-log entries that log_previous() dropped but that stay in t->md. */
static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

cdc_err_t cdc_ice_table_commit_with_log(cdc_ice_table_t *t, cdc_ice_metadata_t *md, cdc_error_t *e)
{
    char **dropped;
    size_t ndropped;
    cdc_err_t rc = log_previous(t, md, &dropped, &ndropped, e);
    if (rc != CDC_OK) {
        free_list(dropped, ndropped);
        return rc;
    }
    rc = commit_metadata(t, md, e);
    if (rc != CDC_OK) {
        free_list(dropped, ndropped);
        return rc;
    }
    delete_dropped(t, dropped, ndropped);
    return CDC_OK;
}

cdc_err_t cdc_ice_table_commit_change(cdc_ice_table_t *t, cdc_ice_metadata_t *md, cdc_error_t *e)
{
    int64_t ts = cdc_clock_wall_ms();
    md->last_updated_ms = ts > t->md.last_updated_ms ? ts : t->md.last_updated_ms + 1;
    return cdc_ice_table_commit_with_log(t, md, e);
}

cdc_err_t cdc_ice_table_create(cdc_storage_t *storage, const char *location,
                               const cdc_ice_schema_t *schema, const cdc_ice_props_t *props,
                               cdc_ice_table_t **out, cdc_error_t *e)
{
    cdc_ice_table_t *t;
    cdc_err_t rc = table_new(storage, location, &t, e);
    if (rc != CDC_OK)
        return rc;
    cdc_ice_metadata_t md;
    memset(&md, 0, sizeof(md));
    md.format_version = 2;
    cdc_ice_uuid(md.table_uuid);
    md.location = strdup(t->location);
    md.schemas = calloc(1, sizeof(cdc_ice_schema_t));
    if (!md.location || !md.schemas) {
        rc = oom(e);
        goto fail;
    }
    if ((rc = cdc_ice_schema_copy(&md.schemas[0], schema)) != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    md.nschemas = 1;
    md.schemas[0].schema_id = 0;
    for (size_t i = 0; i < schema->nfields; i++) {
        if (schema->fields[i].id <= 0) {
            rc = cdc_error_set(e, CDC_ERR_INVALID, "field \"%s\" has no positive field id",
                               schema->fields[i].name);
            goto fail;
        }
        if (cdc_ice_field_max_id(&schema->fields[i]) > md.last_column_id)
            md.last_column_id = cdc_ice_field_max_id(&schema->fields[i]);
    }
    /* spec 0 stays unpartitioned and order 0 unsorted for the life of the table: an
     * equality delete file written in spec 0 applies to the whole table */
    md.specs = calloc(1, sizeof(*md.specs));
    md.orders = calloc(1, sizeof(*md.orders));
    if (!md.specs || !md.orders) {
        rc = oom(e);
        goto fail;
    }
    md.nspecs = 1;
    md.norders = 1;
    md.last_partition_id = 999;
    md.current_snapshot_id = -1;
    md.last_updated_ms = cdc_clock_wall_ms();
    if (props && (rc = cdc_ice_props_copy(&md.properties, props)) != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    if (!cdc_ice_props_get(&md.properties, "write.parquet.compression-codec") &&
        cdc_ice_props_set(&md.properties, "write.parquet.compression-codec", "zstd") != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    t->version = 0;
    rc = commit_metadata(t, &md, e);
    if (rc == CDC_ERR_CONFLICT) {
        rc = cdc_error_set(e, CDC_ERR_EXISTS, "iceberg table \"%s\" already exists", t->location);
        goto fail;
    }
    if (rc != CDC_OK)
        goto fail;
    *out = t;
    return CDC_OK;
fail:
    cdc_ice_metadata_free(&md);
    cdc_ice_table_close(t);
    return rc;
}

cdc_err_t cdc_ice_table_open(cdc_storage_t *storage, const char *location,
                             const cdc_ice_schema_t *schema, const cdc_ice_props_t *props,
                             cdc_ice_table_t **out, cdc_error_t *e)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        cdc_err_t rc = cdc_ice_table_load(storage, location, out, e);
        if (rc != CDC_ERR_NOT_FOUND)
            return rc;
        rc = cdc_ice_table_create(storage, location, schema, props, out, e);
        if (rc != CDC_ERR_EXISTS)
            return rc;
    }
    return cdc_error_set(e, CDC_ERR_CONFLICT, "could not open or create table \"%s\"", location);
}
/* ---- reading manifests ------------------------------------------------------------- */

cdc_err_t cdc_ice_table_read_manifest_list(cdc_ice_table_t *t, const cdc_ice_snapshot_t *s,
                                           cdc_ice_manifest_file_t **files, size_t *n,
                                           cdc_error_t *e)
{
    *files = NULL;
    *n = 0;
    if (!s)
        return CDC_OK;
    uint8_t *buf;
    size_t len;
    cdc_err_t rc = cdc_storage_get(t->storage, s->manifest_list, &buf, &len, e);
    if (rc != CDC_OK)
        return rc;
    rc = cdc_ice_manifest_list_read(buf, len, files, n, e);
    free(buf);
    if (rc != CDC_OK)
        cdc_error_prefix(e, "could not read manifest list \"%s\"", s->manifest_list);
    return rc;
}

/*
 * Result fields of a spec's partition fields (malloc'ed, caller frees the array; the
 * names stay the spec's), NULL for an unpartitioned spec or when a source field is not
 * in the schema history (*ok = false then).
 */
cdc_ice_field_t *cdc_ice_table_spec_fields(const cdc_ice_metadata_t *md,
                                           const cdc_ice_partition_spec_t *spec, bool *ok)
{
    cdc_ice_field_t *v;
    *ok = true;
    if (spec == NULL || spec->nfields == 0)
        return NULL;
    if ((v = calloc(spec->nfields, sizeof(*v))) == NULL ||
        !cdc_ice_metadata_spec_result_fields(md, spec, v)) {
        free(v);
        *ok = false;
        return NULL;
    }
    return v;
}

cdc_err_t cdc_ice_table_read_manifest(cdc_ice_table_t *t, const cdc_ice_manifest_file_t *mf,
                                      cdc_ice_manifest_entry_t **entries, size_t *n, cdc_error_t *e)
{
    uint8_t *buf;
    size_t len;
    bool typed;
    const cdc_ice_partition_spec_t *spec = cdc_ice_metadata_spec(&t->md, mf->spec_id);
    cdc_err_t rc = cdc_storage_get(t->storage, mf->path, &buf, &len, e);
    if (rc != CDC_OK)
        return rc;
    /* the spec's result types read decimals and promoted ints right; without them
     * (unknown spec) the partition values are taken as the Avro types say */
    cdc_ice_field_t *pf = cdc_ice_table_spec_fields(&t->md, spec, &typed);
    rc = cdc_ice_manifest_read(buf, len, mf, pf, pf ? spec->nfields : 0, entries, n, e);
    free(pf);
    free(buf);
    if (rc != CDC_OK)
        cdc_error_prefix(e, "could not read manifest \"%s\"", mf->path);
    return rc;
}

/* ---- queries -------------------------------------------------------------------------- */

const char *cdc_ice_table_snapshot_property(const cdc_ice_table_t *t, int64_t snapshot_id,
                                            const char *key)
{
    const cdc_ice_snapshot_t *s = snapshot_id < 0 ? cdc_ice_metadata_current_snapshot(&t->md)
                                                  : cdc_ice_metadata_snapshot(&t->md, snapshot_id);
    return s ? cdc_ice_props_get(&s->summary, key) : NULL;
}

int64_t cdc_ice_table_find_checkpoint(const cdc_ice_table_t *t, const char *job,
                                      int64_t checkpoint_id)
{
    for (size_t i = t->md.nsnapshots; i-- > 0;) {
        const cdc_ice_snapshot_t *s = &t->md.snapshots[i];
        const char *j = cdc_ice_props_get(&s->summary, CDC_ICE_SUMMARY_JOB);
        const char *c = cdc_ice_props_get(&s->summary, CDC_ICE_SUMMARY_CHECKPOINT);
        if (j && c && strcmp(j, job) == 0 && strtoll(c, NULL, 10) == checkpoint_id)
            return s->snapshot_id;
    }
    return -1;
}

int64_t cdc_ice_table_last_checkpoint(const cdc_ice_table_t *t, const char *job)
{
    int64_t best = -1;
    for (size_t i = 0; i < t->md.nsnapshots; i++) {
        const cdc_ice_snapshot_t *s = &t->md.snapshots[i];
        const char *j = cdc_ice_props_get(&s->summary, CDC_ICE_SUMMARY_JOB);
        const char *c = cdc_ice_props_get(&s->summary, CDC_ICE_SUMMARY_CHECKPOINT);
        if (j && c && strcmp(j, job) == 0) {
            int64_t v = strtoll(c, NULL, 10);
            if (v > best)
                best = v;
        }
    }
    return best;
}

const cdc_ice_partition_spec_t *cdc_ice_table_default_spec(const cdc_ice_table_t *t)
{
    return cdc_ice_metadata_default_spec(&t->md);
}

const cdc_ice_sort_order_t *cdc_ice_table_default_sort_order(const cdc_ice_table_t *t)
{
    return cdc_ice_metadata_default_sort_order(&t->md);
}

cdc_err_t cdc_ice_table_live_files(cdc_ice_table_t *t, cdc_ice_live_file_t **files, size_t *n,
                                   cdc_error_t *e)
{
    cdc_ice_manifest_file_t *mfs;
    size_t nmf;
    *files = NULL;
    *n = 0;
    cdc_err_t rc = cdc_ice_table_read_manifest_list(t, cdc_ice_metadata_current_snapshot(&t->md),
                                                    &mfs, &nmf, e);
    if (rc != CDC_OK)
        return rc;
    cdc_ice_live_file_t *v = NULL;
    size_t cnt = 0, cap = 0;
    for (size_t i = 0; i < nmf && rc == CDC_OK; i++) {
        cdc_ice_manifest_entry_t *ents;
        size_t nents;
        if ((rc = cdc_ice_table_read_manifest(t, &mfs[i], &ents, &nents, e)) != CDC_OK)
            break;
        if (cdc_array_reserve(v, cap, cnt + nents + 1, 64) != CDC_OK) {
            cdc_ice_manifest_entries_free(ents, nents);
            rc = oom(e);
            break;
        }
        for (size_t k = 0; k < nents; k++) {
            if (ents[k].status == CDC_ICE_ENTRY_DELETED)
                continue;
            v[cnt].file = ents[k].file; /* take ownership */
            memset(&ents[k].file, 0, sizeof(ents[k].file));
            v[cnt].sequence_number = ents[k].sequence_number;
            v[cnt].snapshot_id = ents[k].snapshot_id;
            cnt++;
        }
        cdc_ice_manifest_entries_free(ents, nents);
    }
    cdc_ice_manifest_files_free(mfs, nmf);
    if (rc != CDC_OK) {
        cdc_ice_live_files_free(v, cnt);
        return rc;
    }
    *files = v;
    *n = cnt;
    return CDC_OK;
}

void cdc_ice_live_files_free(cdc_ice_live_file_t *files, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cdc_ice_data_file_clear(&files[i].file);
    free(files);
}
