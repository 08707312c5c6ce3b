/*
 * Iceberg table operations (see table.h): load/create in the Hadoop-catalog
 * layout, snapshot commits with manifest merging, schema changes, and the
 * optimistic, atomic metadata swap every change goes through (commit_metadata()).
 */
#include "common/iceberg/table.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/hash.h"
#include "common/iceberg/manifest.h"
#include "common/iceberg/schema.h"
#include "common/log.h"

#define DEFAULT_MIN_COUNT_TO_MERGE 8
#define DEFAULT_TARGET_SIZE (8 * 1024 * 1024)
#define DEFAULT_PREVIOUS_VERSIONS_MAX 100

struct cdc_ice_table {
    cdc_storage_t *storage; /* borrowed */
    char *location;
    int64_t version;
    cdc_ice_metadata_t md;
};

static cdc_err_t oom(cdc_error_t *e)
{
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory in iceberg table");
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void random_bytes(void *p, size_t n)
{
    if (getrandom(p, n, 0) != (ssize_t)n) {
        uint8_t *b = p;
        for (size_t i = 0; i < n; i++)
            b[i] = (uint8_t)(rand() ^ (int)now_ms());
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

static int64_t new_snapshot_id(const cdc_ice_metadata_t *md)
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

static char *metadata_path(const char *location, int64_t version)
{
    char *p;
    if (asprintf(&p, "%s/metadata/v%" PRId64 ".metadata.json", location, version) < 0)
        return NULL;
    return p;
}

static char *hint_path(const char *location)
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

static int64_t prop_int(const cdc_ice_metadata_t *md, const char *key, int64_t dflt)
{
    const char *v = cdc_ice_props_get(&md->properties, key);
    if (!v || !*v)
        return dflt;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end ? dflt : (int64_t)x;
}

static bool prop_bool(const cdc_ice_metadata_t *md, const char *key, bool dflt)
{
    const char *v = cdc_ice_props_get(&md->properties, key);
    if (!v)
        return dflt;
    return strcmp(v, "true") == 0;
}

static cdc_avro_codec_t manifest_codec(const cdc_ice_metadata_t *md)
{
    const char *v = cdc_ice_props_get(&md->properties, "write.avro.compression-codec");
    if (v && (strcmp(v, "uncompressed") == 0 || strcmp(v, "none") == 0 || strcmp(v, "null") == 0))
        return CDC_AVRO_CODEC_NULL;
    return CDC_AVRO_CODEC_DEFLATE;
}

/* ---- load / create ------------------------------------------------------------------ */

static cdc_err_t read_version(cdc_ice_table_t *t, int64_t version, cdc_ice_metadata_t *md,
                              cdc_error_t *e)
{
    char *path = metadata_path(t->location, version);
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
    char *path = metadata_path(t->location, version);
    if (!path)
        return oom(e);
    cdc_err_t rc = cdc_storage_exists(t->storage, path, exists, e);
    free(path);
    return rc;
}

static cdc_err_t find_latest(cdc_ice_table_t *t, int64_t *version, cdc_error_t *e)
{
    char *hp = hint_path(t->location);
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
    /* the hint may lag behind the newest metadata file: probe forward */
    for (;;) {
        if ((rc = version_exists(t, v + 1, &exists, e)) != CDC_OK)
            return rc;
        if (!exists)
            break;
        v++;
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
 * The atomic swap: writes md as version t->version + 1 without overwrite, then the
 * hint. On success t takes md (md is zeroed); on failure md stays with the caller.
 */
static cdc_err_t commit_metadata(cdc_ice_table_t *t, cdc_ice_metadata_t *md, cdc_error_t *e)
{
    int64_t next = t->version + 1;
    char *path = metadata_path(t->location, next), *json = NULL, *hp = hint_path(t->location);
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
won:
    /* The commit is durable now; the hint only speeds up loading (readers probe forward). */
    char num[24];
    int nl = snprintf(num, sizeof(num), "%" PRId64, next);
    cdc_error_t he;
    if (cdc_storage_put(t->storage, hp, num, (size_t)nl, &he) != CDC_OK)
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
    char *prev = metadata_path(t->location, t->version);
    cdc_ice_metadata_log_t *ml =
        realloc(md->metadata_log, (md->nmetadata_log + 1) * sizeof(*md->metadata_log));
    if (!prev || !ml) {
        free(prev);
        if (ml)
            md->metadata_log = ml;
        return oom(e);
    }
    md->metadata_log = ml;
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

static cdc_err_t commit_with_log(cdc_ice_table_t *t, cdc_ice_metadata_t *md, cdc_error_t *e)
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
        if (schema->fields[i].id > md.last_column_id)
            md.last_column_id = schema->fields[i].id;
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
    md.last_updated_ms = now_ms();
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

/* ---- snapshot commits --------------------------------------------------------------- */

/* Files this commit wrote, removed again when the commit fails. */
typedef struct written {
    char **v;
    size_t n;
} written_t;

static bool written_add(written_t *w, const char *loc)
{
    char **v = realloc(w->v, (w->n + 1) * sizeof(char *));
    if (!v)
        return false;
    w->v = v;
    if (!(w->v[w->n] = strdup(loc)))
        return false;
    w->n++;
    return true;
}

static void written_cleanup(cdc_ice_table_t *t, written_t *w, bool remove)
{
    for (size_t i = 0; i < w->n; i++) {
        cdc_error_t e;
        if (remove)
            (void)cdc_storage_delete(t->storage, w->v[i], &e);
        free(w->v[i]);
    }
    free(w->v);
    w->v = NULL;
    w->n = 0;
}

static cdc_err_t read_manifest_list(cdc_ice_table_t *t, const cdc_ice_snapshot_t *s,
                                    cdc_ice_manifest_file_t **files, size_t *n, cdc_error_t *e)
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
static cdc_ice_field_t *spec_fields(const cdc_ice_metadata_t *md,
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

static cdc_err_t read_manifest(cdc_ice_table_t *t, const cdc_ice_manifest_file_t *mf,
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
    cdc_ice_field_t *pf = spec_fields(&t->md, spec, &typed);
    rc = cdc_ice_manifest_read(buf, len, mf, pf, pf ? spec->nfields : 0, entries, n, e);
    free(pf);
    free(buf);
    if (rc != CDC_OK)
        cdc_error_prefix(e, "could not read manifest \"%s\"", mf->path);
    return rc;
}

/* Entries being assembled into one new manifest. */
typedef struct entry_vec {
    cdc_ice_manifest_entry_t *v;
    size_t n, cap;
} entry_vec_t;

static bool entry_push(entry_vec_t *ev, const cdc_ice_manifest_entry_t *en)
{
    if (ev->n == ev->cap) {
        size_t cap = ev->cap ? ev->cap * 2 : 16;
        cdc_ice_manifest_entry_t *v = realloc(ev->v, cap * sizeof(*v));
        if (!v)
            return false;
        ev->v = v;
        ev->cap = cap;
    }
    ev->v[ev->n] = *en;
    if (cdc_ice_data_file_copy(&ev->v[ev->n].file, &en->file) != CDC_OK)
        return false;
    ev->n++;
    return true;
}

static void entry_vec_free(entry_vec_t *ev)
{
    cdc_ice_manifest_entries_free(ev->v, ev->n);
    memset(ev, 0, sizeof(*ev));
}

typedef struct commit_ctx {
    cdc_ice_table_t *t;
    int64_t snapshot_id;
    int64_t seq;
    char *schema_json;
    int32_t schema_id;
    cdc_avro_codec_t codec;
    written_t written;
    const cdc_ice_commit_t *c; /* for the removal predicate */
    /* the spec whose manifests build_content() is building, its result fields */
    const cdc_ice_partition_spec_t *spec;
    const cdc_ice_field_t *part_fields;
    /* files removed by this commit (summary) */
    int64_t rm_data, rm_records, rm_size, rm_del, rm_eq_files, rm_eq, rm_pos;
} commit_ctx_t;

/* Whether the commit removes this live entry. */
static bool removes(const commit_ctx_t *cx, const cdc_ice_manifest_entry_t *en)
{
    return cx->c != NULL && cx->c->remove != NULL && en->status != CDC_ICE_ENTRY_DELETED &&
           cx->c->remove(&en->file, cx->c->remove_arg);
}

static void count_removed(commit_ctx_t *cx, const cdc_ice_data_file_t *f)
{
    cx->rm_size += f->file_size_in_bytes;
    if (f->content == CDC_ICE_CONTENT_DATA) {
        cx->rm_data++;
        cx->rm_records += f->record_count;
    } else {
        cx->rm_del++;
        if (f->content == CDC_ICE_CONTENT_EQUALITY_DELETES) {
            cx->rm_eq_files++;
            cx->rm_eq += f->record_count;
        } else {
            cx->rm_pos += f->record_count;
        }
    }
}

/* Feed the referenced-files cache with what a commit writes (defined below). */
static void ref_cache_feed_manifest(const char *path, const cdc_ice_manifest_entry_t *v, size_t n);
static void ref_cache_feed_list(const char *path, const cdc_ice_manifest_file_t *mfs, size_t n);

/* Writes entries as a manifest and describes it in *mf. */
static cdc_err_t write_manifest(commit_ctx_t *cx, const entry_vec_t *ev,
                                cdc_ice_manifest_content_t content, cdc_ice_manifest_file_t *mf,
                                cdc_error_t *e)
{
    uint8_t *buf;
    size_t len;
    char uuid[37];
    memset(mf, 0, sizeof(*mf));
    cdc_err_t rc = cdc_ice_manifest_write(ev->v, ev->n, cx->schema_json, cx->schema_id, cx->spec,
                                          cx->part_fields, content, cx->codec, &buf, &len, e);
    if (rc != CDC_OK)
        return rc;
    cdc_ice_uuid(uuid);
    if (asprintf(&mf->path, "%s/metadata/%s-m%d.avro", cx->t->location, uuid, (int)content) < 0) {
        mf->path = NULL;
        free(buf);
        return oom(e);
    }
    rc = cdc_storage_put(cx->t->storage, mf->path, buf, len, e);
    free(buf);
    if (rc != CDC_OK)
        return rc;
    if (!written_add(&cx->written, mf->path))
        return oom(e);
    ref_cache_feed_manifest(mf->path, ev->v, ev->n); /* an orphan scan need not read it */
    mf->length = (int64_t)len;
    mf->spec_id = cx->spec->spec_id;
    mf->content = content;
    if (cdc_ice_manifest_summarize(ev->v, ev->n, cx->part_fields, cx->spec->nfields, mf) != CDC_OK)
        return oom(e);
    mf->sequence_number = cx->seq;
    mf->min_sequence_number = cx->seq;
    mf->added_snapshot_id = cx->snapshot_id;
    for (size_t i = 0; i < ev->n; i++) {
        const cdc_ice_manifest_entry_t *en = &ev->v[i];
        int64_t s = en->sequence_number < 0 ? cx->seq : en->sequence_number;
        if (s < mf->min_sequence_number)
            mf->min_sequence_number = s;
        if (en->status == CDC_ICE_ENTRY_ADDED) {
            mf->added_files++;
            mf->added_rows += en->file.record_count;
        } else if (en->status == CDC_ICE_ENTRY_EXISTING) {
            mf->existing_files++;
            mf->existing_rows += en->file.record_count;
        } else {
            mf->deleted_files++;
            mf->deleted_rows += en->file.record_count;
        }
    }
    return CDC_OK;
}

typedef struct mf_vec {
    cdc_ice_manifest_file_t *v;
    size_t n, cap;
} mf_vec_t;

/* Appends *mf: a deep copy, or (copy false) taking what it owns. */
static bool mf_push(mf_vec_t *mv, const cdc_ice_manifest_file_t *mf, bool copy)
{
    if (mv->n == mv->cap) {
        size_t cap = mv->cap ? mv->cap * 2 : 16;
        cdc_ice_manifest_file_t *v = realloc(mv->v, cap * sizeof(*v));
        if (!v)
            return false;
        mv->v = v;
        mv->cap = cap;
    }
    if (!copy)
        mv->v[mv->n] = *mf;
    else if (cdc_ice_manifest_file_copy(&mv->v[mv->n], mf) != CDC_OK)
        return false;
    mv->n++;
    return true;
}

/*
 * Builds the manifests of one content kind and one partition spec (cx->spec): the new
 * files' entries of that spec, merged with the spec's small existing manifests of that
 * content when there are enough of them (min-count-to-merge).
 */
static cdc_err_t build_content(commit_ctx_t *cx, cdc_ice_manifest_content_t content,
                               const cdc_ice_data_file_t *files, size_t nfiles,
                               const cdc_ice_manifest_file_t *old, size_t nold, mf_vec_t *out,
                               cdc_error_t *e)
{
    int32_t spec_id = cx->spec->spec_id;
    size_t start = out->n, nnew = 0;
    const cdc_ice_metadata_t *md = &cx->t->md;
    bool merge = prop_bool(md, "commit.manifest-merge.enabled", true);
    int64_t min_count =
        prop_int(md, "commit.manifest.min-count-to-merge", DEFAULT_MIN_COUNT_TO_MERGE);
    int64_t target = prop_int(md, "commit.manifest.target-size-bytes", DEFAULT_TARGET_SIZE);
    size_t nsmall = 0;
    for (size_t i = 0; i < nold; i++)
        if (old[i].content == content && old[i].spec_id == spec_id && old[i].length < target)
            nsmall++;
    for (size_t i = 0; i < nfiles; i++)
        nnew += files[i].spec_id == spec_id;
    bool do_merge = merge && nsmall + (nnew > 0) >= (size_t)(min_count < 2 ? 2 : min_count);
    entry_vec_t ev = {0};
    cdc_err_t rc = CDC_OK;
    for (size_t i = 0; i < nfiles; i++) {
        if (files[i].spec_id != spec_id)
            continue;
        cdc_ice_manifest_entry_t en = {.status = CDC_ICE_ENTRY_ADDED,
                                       .snapshot_id = cx->snapshot_id,
                                       .sequence_number = -1,
                                       .file_sequence_number = -1,
                                       .file = files[i]};
        en.file.content =
            content == CDC_ICE_MANIFEST_DATA ? CDC_ICE_CONTENT_DATA : files[i].content;
        if (content == CDC_ICE_MANIFEST_DELETES && en.file.content == CDC_ICE_CONTENT_DATA)
            en.file.content = CDC_ICE_CONTENT_EQUALITY_DELETES;
        if (!entry_push(&ev, &en)) {
            rc = oom(e);
            goto done;
        }
    }
    for (size_t i = 0; i < nold; i++) {
        cdc_ice_manifest_entry_t *ents = NULL;
        size_t nents = 0;
        bool rewrite = do_merge && old[i].length < target;
        if (old[i].content != content || old[i].spec_id != spec_id)
            continue;
        if (!rewrite && cx->c != NULL && cx->c->remove != NULL) {
            /* a manifest that lists a file to remove is rewritten (merged) */
            if ((rc = read_manifest(cx->t, &old[i], &ents, &nents, e)) != CDC_OK)
                goto done;
            for (size_t j = 0; j < nents && !rewrite; j++)
                rewrite = removes(cx, &ents[j]);
        }
        if (!rewrite) {
            cdc_ice_manifest_entries_free(ents, nents);
            if (!mf_push(out, &old[i], true)) {
                rc = oom(e);
                goto done;
            }
            continue;
        }
        if (ents == NULL && (rc = read_manifest(cx->t, &old[i], &ents, &nents, e)) != CDC_OK)
            goto done;
        for (size_t j = 0; j < nents; j++) {
            if (ents[j].status == CDC_ICE_ENTRY_DELETED)
                continue; /* deleted entries are only kept by the snapshot that deleted them */
            if (removes(cx, &ents[j])) {
                /* removed by this snapshot: status DELETED, original sequence numbers */
                ents[j].status = CDC_ICE_ENTRY_DELETED;
                ents[j].snapshot_id = cx->snapshot_id;
                count_removed(cx, &ents[j].file);
            } else {
                ents[j].status = CDC_ICE_ENTRY_EXISTING;
            }
            if (!entry_push(&ev, &ents[j])) {
                cdc_ice_manifest_entries_free(ents, nents);
                rc = oom(e);
                goto done;
            }
        }
        cdc_ice_manifest_entries_free(ents, nents);
    }
    if (ev.n > 0) {
        cdc_ice_manifest_file_t mf;
        if ((rc = write_manifest(cx, &ev, content, &mf, e)) != CDC_OK) {
            cdc_ice_manifest_file_clear(&mf);
            goto done;
        }
        /* the new manifest goes first, as Iceberg writers do */
        if (!mf_push(out, &mf, false)) {
            cdc_ice_manifest_file_clear(&mf);
            rc = oom(e);
            goto done;
        }
        memmove(out->v + start + 1, out->v + start, (out->n - 1 - start) * sizeof(*out->v));
        out->v[start] = mf;
    }
done:
    entry_vec_free(&ev);
    return rc;
}

static int64_t summary_int(const cdc_ice_snapshot_t *s, const char *key)
{
    const char *v = s ? cdc_ice_props_get(&s->summary, key) : NULL;
    return v ? strtoll(v, NULL, 10) : 0;
}

static cdc_err_t set_int(cdc_ice_props_t *p, const char *key, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return cdc_ice_props_set(p, key, buf);
}

static bool same_partition(const cdc_ice_data_file_t *a, const cdc_ice_data_file_t *b)
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

/* Distinct (spec, partition) of the added files; removals count as one more when alone. */
static int64_t changed_partitions(const cdc_ice_commit_t *c, bool removed)
{
    size_t n = c->ndata_files + c->ndelete_files;
    int64_t count = 0;
#define NTH(i) ((i) < c->ndata_files ? &c->data_files[i] : &c->delete_files[(i)-c->ndata_files])
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = same_partition(NTH(i), NTH(j));
        count += !seen;
    }
#undef NTH
    return count > 0 ? count : removed ? 1 : 0;
}

static cdc_err_t build_summary(const cdc_ice_commit_t *c, const commit_ctx_t *cx,
                               const cdc_ice_snapshot_t *parent, cdc_ice_props_t *sum)
{
    int64_t add_data = (int64_t)c->ndata_files, add_del = (int64_t)c->ndelete_files;
    int64_t add_records = 0, add_size = 0, add_eq = 0, add_pos = 0, add_eq_files = 0;
    for (size_t i = 0; i < c->ndata_files; i++) {
        add_records += c->data_files[i].record_count;
        add_size += c->data_files[i].file_size_in_bytes;
    }
    for (size_t i = 0; i < c->ndelete_files; i++) {
        add_size += c->delete_files[i].file_size_in_bytes;
        if (c->delete_files[i].content == CDC_ICE_CONTENT_POSITION_DELETES) {
            add_pos += c->delete_files[i].record_count;
        } else {
            add_eq += c->delete_files[i].record_count;
            add_eq_files++;
        }
    }
    bool removed = cx->rm_data + cx->rm_del > 0;
    const char *op = add_del == 0 && !removed ? "append" : add_data == 0 ? "delete" : "overwrite";
    cdc_err_t rc = cdc_ice_props_set(sum, "operation", op);
    if (cx->rm_data > 0) {
        rc |= set_int(sum, "deleted-data-files", cx->rm_data);
        rc |= set_int(sum, "deleted-records", cx->rm_records);
    }
    if (cx->rm_del > 0) {
        rc |= set_int(sum, "removed-delete-files", cx->rm_del);
        if (cx->rm_eq_files > 0) {
            rc |= set_int(sum, "removed-equality-delete-files", cx->rm_eq_files);
            rc |= set_int(sum, "removed-equality-deletes", cx->rm_eq);
        }
        if (cx->rm_pos > 0) {
            rc |= set_int(sum, "removed-position-delete-files", cx->rm_del - cx->rm_eq_files);
            rc |= set_int(sum, "removed-position-deletes", cx->rm_pos);
        }
    }
    if (removed)
        rc |= set_int(sum, "removed-files-size", cx->rm_size);
    if (add_data > 0) {
        rc |= set_int(sum, "added-data-files", add_data);
        rc |= set_int(sum, "added-records", add_records);
    }
    if (add_del > 0) {
        rc |= set_int(sum, "added-delete-files", add_del);
        if (add_eq_files > 0) {
            rc |= set_int(sum, "added-equality-delete-files", add_eq_files);
            rc |= set_int(sum, "added-equality-deletes", add_eq);
        }
        if (add_pos > 0) {
            rc |= set_int(sum, "added-position-delete-files", add_del - add_eq_files);
            rc |= set_int(sum, "added-position-deletes", add_pos);
        }
    }
    rc |= set_int(sum, "added-files-size", add_size);
    rc |= set_int(sum, "changed-partition-count", changed_partitions(c, removed));
    rc |= set_int(sum, "total-records",
                  summary_int(parent, "total-records") + add_records - cx->rm_records);
    rc |= set_int(sum, "total-files-size",
                  summary_int(parent, "total-files-size") + add_size - cx->rm_size);
    rc |= set_int(sum, "total-data-files",
                  summary_int(parent, "total-data-files") + add_data - cx->rm_data);
    rc |= set_int(sum, "total-delete-files",
                  summary_int(parent, "total-delete-files") + add_del - cx->rm_del);
    rc |= set_int(sum, "total-position-deletes",
                  summary_int(parent, "total-position-deletes") + add_pos - cx->rm_pos);
    rc |= set_int(sum, "total-equality-deletes",
                  summary_int(parent, "total-equality-deletes") + add_eq - cx->rm_eq);
    for (size_t i = 0; c->summary && i < c->summary->n; i++)
        rc |= cdc_ice_props_set(sum, c->summary->keys[i], c->summary->values[i]);
    return rc == CDC_OK ? CDC_OK : CDC_ERR_NOMEM;
}

/*
 * A file to commit names one of the table's specs and orders and carries one
 * well-formed value per partition field of its spec.
 */
static cdc_err_t check_layout(const cdc_ice_table_t *t, const cdc_ice_data_file_t *f,
                              cdc_error_t *e)
{
    const cdc_ice_partition_spec_t *spec = cdc_ice_metadata_spec(&t->md, f->spec_id);
    cdc_ice_field_t *pf;
    bool ok;

    if (spec == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "file \"%s\" was written for partition spec %d, which table \"%s\" "
                             "does not have",
                             f->path, (int)f->spec_id, t->location);
    if (f->npartition != spec->nfields)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "file \"%s\" has %zu partition values, partition spec %d of table "
                             "\"%s\" has %zu fields",
                             f->path, f->npartition, (int)spec->spec_id, t->location,
                             spec->nfields);
    if (cdc_ice_metadata_sort_order(&t->md, f->sort_order_id) == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "file \"%s\" names sort order %d, which table \"%s\" does not have",
                             f->path, (int)f->sort_order_id, t->location);
    pf = spec_fields(&t->md, spec, &ok);
    if (!ok)
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "partition spec %d of table \"%s\" has a source field its schemas "
                             "do not have",
                             (int)spec->spec_id, t->location);
    for (size_t i = 0; i < spec->nfields; i++) {
        if (cdc_ice_part_value_valid(&pf[i], &f->partition[i]))
            continue;
        char ty[32];
        cdc_err_t rc =
            cdc_error_set(e, CDC_ERR_INVALID,
                          "file \"%s\": partition value %zu (\"%s\") is not a %s "
                          "value (%zu bytes)",
                          f->path, i + 1, spec->fields[i].name,
                          cdc_ice_type_string(&pf[i], ty, sizeof(ty)), f->partition[i].len);
        free(pf);
        return rc;
    }
    free(pf);
    return CDC_OK;
}

/*
 * The new manifest list's entries: per content kind (data, then deletes) and per
 * partition spec, the new files' manifest merged with that spec's existing ones
 * (build_content). Manifests of a spec the table does not list are kept as they are.
 */
static cdc_err_t build_manifests(commit_ctx_t *cx, const cdc_ice_manifest_file_t *old, size_t nold,
                                 mf_vec_t *list, cdc_error_t *e)
{
    const cdc_ice_metadata_t *md = &cx->t->md;
    const cdc_ice_commit_t *c = cx->c;
    cdc_err_t rc = CDC_OK;

    for (int k = 0; k < 2 && rc == CDC_OK; k++) {
        cdc_ice_manifest_content_t content =
            k == 0 ? CDC_ICE_MANIFEST_DATA : CDC_ICE_MANIFEST_DELETES;
        for (size_t i = 0; i < md->nspecs && rc == CDC_OK; i++) {
            bool ok;
            cdc_ice_field_t *pf = spec_fields(md, &md->specs[i], &ok);
            cx->spec = &md->specs[i];
            cx->part_fields = pf;
            if (!ok) {
                /* no new files (check_layout): keep the spec's manifests unread */
                for (size_t j = 0; j < nold && rc == CDC_OK; j++)
                    if (old[j].content == content && old[j].spec_id == md->specs[i].spec_id &&
                        !mf_push(list, &old[j], true))
                        rc = oom(e);
                continue;
            }
            rc = k == 0
                     ? build_content(cx, content, c->data_files, c->ndata_files, old, nold, list, e)
                     : build_content(cx, content, c->delete_files, c->ndelete_files, old, nold,
                                     list, e);
            free(pf);
        }
    }
    for (size_t j = 0; j < nold && rc == CDC_OK; j++)
        if (cdc_ice_metadata_spec(md, old[j].spec_id) == NULL && !mf_push(list, &old[j], true))
            rc = oom(e);
    cx->spec = NULL;
    cx->part_fields = NULL;
    return rc;
}

cdc_err_t cdc_ice_table_commit(cdc_ice_table_t *t, const cdc_ice_commit_t *c, int64_t *snapshot_id,
                               cdc_error_t *e)
{
    commit_ctx_t cx = {.t = t, .c = c};
    cdc_ice_manifest_file_t *old = NULL;
    size_t nold = 0;
    mf_vec_t list = {0};
    cdc_ice_metadata_t md;
    memset(&md, 0, sizeof(md));
    uint8_t *lbuf = NULL;
    size_t llen = 0;
    char *list_path = NULL;
    bool remove_files = true;
    cdc_err_t rc;
    const cdc_ice_snapshot_t *parent = cdc_ice_metadata_current_snapshot(&t->md);
    const cdc_ice_schema_t *schema = cdc_ice_metadata_current_schema(&t->md);

    for (size_t i = 0; i < c->ndelete_files; i++)
        if (c->delete_files[i].content == CDC_ICE_CONTENT_EQUALITY_DELETES &&
            c->delete_files[i].nequality_ids == 0)
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "equality delete file \"%s\" has no equality_ids",
                                 c->delete_files[i].path);
    for (size_t i = 0; i < c->ndata_files + c->ndelete_files; i++) {
        const cdc_ice_data_file_t *f =
            i < c->ndata_files ? &c->data_files[i] : &c->delete_files[i - c->ndata_files];
        if ((rc = check_layout(t, f, e)) != CDC_OK)
            return rc;
    }
    if (!schema)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table \"%s\" has no current schema", t->location);
    cx.snapshot_id = new_snapshot_id(&t->md);
    cx.seq = t->md.last_sequence_number + 1;
    cx.schema_id = schema->schema_id;
    cx.codec = manifest_codec(&t->md);
    if (!(cx.schema_json = cdc_ice_schema_to_json(schema))) {
        rc = oom(e);
        goto fail;
    }
    if ((rc = read_manifest_list(t, parent, &old, &nold, e)) != CDC_OK)
        goto fail;
    if ((rc = build_manifests(&cx, old, nold, &list, e)) != CDC_OK)
        goto fail;
    char uuid[37];
    cdc_ice_uuid(uuid);
    if (asprintf(&list_path, "%s/metadata/snap-%" PRId64 "-1-%s.avro", t->location, cx.snapshot_id,
                 uuid) < 0) {
        list_path = NULL;
        rc = oom(e);
        goto fail;
    }
    if ((rc = cdc_ice_manifest_list_write(list.v, list.n, cx.snapshot_id,
                                          parent ? parent->snapshot_id : -1, cx.seq, cx.codec,
                                          &lbuf, &llen, e)) != CDC_OK)
        goto fail;
    if ((rc = cdc_storage_put(t->storage, list_path, lbuf, llen, e)) != CDC_OK)
        goto fail;
    if (!written_add(&cx.written, list_path)) {
        rc = oom(e);
        goto fail;
    }
    ref_cache_feed_list(list_path, list.v, list.n);

    /* the new metadata: a copy of the current one plus the snapshot */
    if ((rc = cdc_ice_metadata_copy(&md, &t->md)) != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    int64_t ts = c->timestamp_ms > 0 ? c->timestamp_ms : now_ms();
    if (ts <= t->md.last_updated_ms)
        ts = t->md.last_updated_ms + 1; /* keep the logs monotonic under clock skew */
    cdc_ice_snapshot_t *sv = realloc(md.snapshots, (md.nsnapshots + 1) * sizeof(*sv));
    if (!sv) {
        rc = oom(e);
        goto fail;
    }
    md.snapshots = sv;
    cdc_ice_snapshot_t *sn = &md.snapshots[md.nsnapshots];
    memset(sn, 0, sizeof(*sn));
    md.nsnapshots++;
    sn->snapshot_id = cx.snapshot_id;
    sn->parent_id = parent ? parent->snapshot_id : -1;
    sn->sequence_number = cx.seq;
    sn->timestamp_ms = ts;
    sn->schema_id = schema->schema_id;
    if (!(sn->manifest_list = strdup(list_path)) ||
        build_summary(c, &cx, parent, &sn->summary) != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    cdc_ice_snapshot_log_t *sl = realloc(md.snapshot_log, (md.nsnapshot_log + 1) * sizeof(*sl));
    if (!sl) {
        rc = oom(e);
        goto fail;
    }
    md.snapshot_log = sl;
    sl[md.nsnapshot_log].timestamp_ms = ts;
    sl[md.nsnapshot_log].snapshot_id = cx.snapshot_id;
    md.nsnapshot_log++;
    md.last_sequence_number = cx.seq;
    md.current_snapshot_id = cx.snapshot_id;
    md.last_updated_ms = ts;
    if ((rc = commit_with_log(t, &md, e)) != CDC_OK) {
        /*
         * Only a definite conflict proves our files unreferenced. After any other
         * failure (an S3 PUT whose outcome is unknown) the new version may exist and
         * reference them: keep them; if unreferenced they are orphans for cleanup.
         */
        remove_files = rc == CDC_ERR_CONFLICT;
        goto fail;
    }
    if (snapshot_id)
        *snapshot_id = cx.snapshot_id;
    written_cleanup(t, &cx.written, false);
    goto done;
fail:
    cdc_ice_metadata_free(&md);
    written_cleanup(t, &cx.written, remove_files);
done:
    free(lbuf);
    free(list_path);
    free(cx.schema_json);
    cdc_ice_manifest_files_free(old, nold);
    cdc_ice_manifest_files_free(list.v, list.n);
    return rc;
}

cdc_err_t cdc_ice_table_append(cdc_ice_table_t *t, const cdc_ice_data_file_t *files, size_t n,
                               const cdc_ice_props_t *summary, int64_t *snapshot_id, cdc_error_t *e)
{
    cdc_ice_commit_t c = {.data_files = files, .ndata_files = n, .summary = summary};
    return cdc_ice_table_commit(t, &c, snapshot_id, e);
}

cdc_err_t cdc_ice_table_row_delta(cdc_ice_table_t *t, const cdc_ice_data_file_t *data, size_t ndata,
                                  const cdc_ice_data_file_t *deletes, size_t ndeletes,
                                  const cdc_ice_props_t *summary, int64_t *snapshot_id,
                                  cdc_error_t *e)
{
    cdc_ice_commit_t c = {.data_files = data,
                          .ndata_files = ndata,
                          .delete_files = deletes,
                          .ndelete_files = ndeletes,
                          .summary = summary};
    return cdc_ice_table_commit(t, &c, snapshot_id, e);
}

/* ---- metadata-only changes ------------------------------------------------------------ */

cdc_err_t cdc_ice_table_add_column(cdc_ice_table_t *t, const cdc_ice_field_t *field,
                                   int32_t *field_id, cdc_error_t *e)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(&t->md);
    if (!cur)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table \"%s\" has no current schema", t->location);
    if (field->required)
        return cdc_error_set(e, CDC_ERR_UNSUPPORTED,
                             "cannot add required column \"%s\" to table \"%s\"", field->name,
                             t->location);
    for (size_t i = 0; i < cur->nfields; i++)
        if (strcmp(cur->fields[i].name, field->name) == 0)
            return cdc_error_set(e, CDC_ERR_EXISTS, "column \"%s\" already exists in table \"%s\"",
                                 field->name, t->location);
    cdc_ice_metadata_t md;
    cdc_err_t rc = cdc_ice_metadata_copy(&md, &t->md);
    if (rc != CDC_OK)
        return oom(e);
    int32_t max_schema = 0;
    for (size_t i = 0; i < md.nschemas; i++)
        if (md.schemas[i].schema_id > max_schema)
            max_schema = md.schemas[i].schema_id;
    cdc_ice_schema_t *sv = realloc(md.schemas, (md.nschemas + 1) * sizeof(*sv));
    if (!sv) {
        rc = oom(e);
        goto fail;
    }
    md.schemas = sv;
    cdc_ice_schema_t *ns = &md.schemas[md.nschemas];
    if (cdc_ice_schema_copy(ns, cur) != CDC_OK) {
        rc = oom(e);
        goto fail;
    }
    md.nschemas++;
    cdc_ice_field_t *fv = realloc(ns->fields, (ns->nfields + 1) * sizeof(*fv));
    if (!fv) {
        rc = oom(e);
        goto fail;
    }
    ns->fields = fv;
    cdc_ice_field_t *f = &ns->fields[ns->nfields];
    *f = *field;
    f->id = md.last_column_id + 1;
    f->name = strdup(field->name);
    f->doc = field->doc ? strdup(field->doc) : NULL;
    ns->nfields++;
    if (!f->name || (field->doc && !f->doc)) {
        rc = oom(e);
        goto fail;
    }
    ns->schema_id = max_schema + 1;
    md.last_column_id = f->id;
    md.current_schema_id = ns->schema_id;
    int64_t ts = now_ms();
    md.last_updated_ms = ts > t->md.last_updated_ms ? ts : t->md.last_updated_ms + 1;
    int32_t new_id = f->id;
    if ((rc = commit_with_log(t, &md, e)) != CDC_OK)
        goto fail;
    if (field_id)
        *field_id = new_id;
    return CDC_OK;
fail:
    cdc_ice_metadata_free(&md);
    return rc;
}

static bool same_schema(const cdc_ice_schema_t *a, const cdc_ice_schema_t *b)
{
    if (a->nfields != b->nfields || a->nidentifier != b->nidentifier)
        return false;
    for (size_t i = 0; i < a->nfields; i++) {
        const cdc_ice_field_t *x = &a->fields[i], *y = &b->fields[i];
        if (x->id != y->id || strcmp(x->name, y->name) != 0 || x->type != y->type ||
            x->precision != y->precision || x->scale != y->scale || x->required != y->required)
            return false;
    }
    for (size_t i = 0; i < a->nidentifier; i++)
        if (a->identifier_ids[i] != b->identifier_ids[i])
            return false;
    return true;
}

static cdc_err_t type_mismatch(cdc_error_t *e, const cdc_ice_table_t *t, const cdc_ice_field_t *has,
                               const cdc_ice_field_t *want)
{
    char a[48], b[48];
    return cdc_error_set(e, CDC_ERR_INVALID,
                         "field id %d (\"%s\") of table \"%s\" is %s, the schema declares %s "
                         "(\"%s\"): not an Iceberg type promotion",
                         (int)has->id, has->name, t->location,
                         cdc_ice_type_string(has, a, sizeof(a)),
                         cdc_ice_type_string(want, b, sizeof(b)), want->name);
}

cdc_err_t cdc_ice_table_check_schema(const cdc_ice_table_t *t, const cdc_ice_schema_t *fs,
                                     cdc_error_t *e)
{
    for (size_t i = 0; i < fs->nfields; i++) {
        const cdc_ice_field_t *has = cdc_ice_metadata_history_field(&t->md, fs->fields[i].id);
        if (has == NULL)
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "field id %d (\"%s\") is not a field of table \"%s\": files "
                                 "written with it would not read",
                                 (int)fs->fields[i].id, fs->fields[i].name, t->location);
        if (!cdc_ice_type_promotable(&fs->fields[i], has))
            return type_mismatch(e, t, has, &fs->fields[i]);
    }
    return CDC_OK;
}

/* set_schema (current) and add_past_schema (!current). */
static cdc_err_t put_schema(cdc_ice_table_t *t, const cdc_ice_schema_t *want,
                            const cdc_ice_props_t *props, bool current, bool *changed,
                            cdc_error_t *e)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(&t->md);
    cdc_ice_schema_t ns;
    cdc_ice_metadata_t md;
    int32_t max_schema = 0, reuse = -1;
    cdc_err_t rc;

    if (changed)
        *changed = false;
    if (cur == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table \"%s\" has no current schema", t->location);
    if (cdc_ice_schema_copy(&ns, want) != CDC_OK)
        return oom(e);
    ns.nidentifier = 0;
    for (size_t i = 0; i < ns.nfields; i++) {
        cdc_ice_field_t *f = &ns.fields[i];
        const cdc_ice_field_t *has = cdc_ice_metadata_history_field(&t->md, f->id);
        /* a past schema's type promotes to the newest, the newest one's from it */
        if (has != NULL &&
            !(current ? cdc_ice_type_promotable(has, f) : cdc_ice_type_promotable(f, has))) {
            rc = type_mismatch(e, t, has, f);
            cdc_ice_schema_free(&ns);
            return rc;
        }
        /* required only where it was: a new or optional field stays optional */
        f->required =
            f->required && has != NULL && has->required && cdc_ice_schema_find(cur, f->id) >= 0;
    }
    for (size_t i = 0; i < want->nidentifier; i++) {
        int k = cdc_ice_schema_find(&ns, want->identifier_ids[i]);
        if (k >= 0 && ns.fields[k].required)
            ns.identifier_ids[ns.nidentifier++] = want->identifier_ids[i];
    }
    for (size_t i = 0; i < t->md.nschemas; i++) {
        if (t->md.schemas[i].schema_id > max_schema)
            max_schema = t->md.schemas[i].schema_id;
        ns.schema_id = t->md.schemas[i].schema_id;
        if (reuse < 0 && same_schema(&t->md.schemas[i], &ns))
            reuse = t->md.schemas[i].schema_id;
    }
    if ((current ? reuse == t->md.current_schema_id : reuse >= 0) &&
        (props == NULL || props->n == 0)) {
        cdc_ice_schema_free(&ns);
        return CDC_OK;
    }
    if ((rc = cdc_ice_metadata_copy(&md, &t->md)) != CDC_OK) {
        cdc_ice_schema_free(&ns);
        return oom(e);
    }
    if (reuse < 0) {
        cdc_ice_schema_t *sv = realloc(md.schemas, (md.nschemas + 1) * sizeof(*sv));
        if (sv == NULL) {
            cdc_ice_schema_free(&ns);
            rc = oom(e);
            goto fail;
        }
        md.schemas = sv;
        ns.schema_id = max_schema + 1;
        md.schemas[md.nschemas++] = ns; /* moved */
        for (size_t i = 0; i < ns.nfields; i++)
            if (ns.fields[i].id > md.last_column_id)
                md.last_column_id = ns.fields[i].id;
        reuse = ns.schema_id;
    } else {
        cdc_ice_schema_free(&ns);
    }
    bool schema_changed = current ? md.current_schema_id != reuse : md.nschemas != t->md.nschemas;
    if (current)
        md.current_schema_id = reuse;
    for (size_t i = 0; props != NULL && i < props->n; i++)
        if (cdc_ice_props_set(&md.properties, props->keys[i], props->values[i]) != CDC_OK) {
            rc = oom(e);
            goto fail;
        }
    int64_t ts = now_ms();
    md.last_updated_ms = ts > t->md.last_updated_ms ? ts : t->md.last_updated_ms + 1;
    if ((rc = commit_with_log(t, &md, e)) != CDC_OK)
        goto fail;
    if (changed)
        *changed = schema_changed;
    return CDC_OK;
fail:
    cdc_ice_metadata_free(&md);
    return rc;
}

cdc_err_t cdc_ice_table_set_schema(cdc_ice_table_t *t, const cdc_ice_schema_t *want,
                                   const cdc_ice_props_t *props, bool *changed, cdc_error_t *e)
{
    return put_schema(t, want, props, true, changed, e);
}

cdc_err_t cdc_ice_table_add_past_schema(cdc_ice_table_t *t, const cdc_ice_schema_t *want,
                                        bool *added, cdc_error_t *e)
{
    return put_schema(t, want, NULL, false, added, e);
}

const cdc_ice_partition_spec_t *cdc_ice_table_default_spec(const cdc_ice_table_t *t)
{
    return cdc_ice_metadata_default_spec(&t->md);
}

const cdc_ice_sort_order_t *cdc_ice_table_default_sort_order(const cdc_ice_table_t *t)
{
    return cdc_ice_metadata_default_sort_order(&t->md);
}

cdc_err_t cdc_ice_table_set_layout(cdc_ice_table_t *t, const char *partition_by,
                                   const char *sort_by, bool *changed, cdc_error_t *e)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(&t->md);
    cdc_ice_partition_spec_t spec;
    cdc_ice_sort_order_t order;
    cdc_ice_metadata_t md;
    int32_t spec_id = -1, order_id = -1, max_spec = -1, max_order = 0;
    cdc_err_t rc;

    if (changed)
        *changed = false;
    if (cur == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table \"%s\" has no current schema", t->location);
    if ((rc = cdc_ice_partition_spec_parse(partition_by, cur, t->md.last_partition_id + 1, &spec,
                                           e)) != CDC_OK) {
        cdc_error_prefix(e, "table \"%s\"", t->location);
        return rc;
    }
    if ((rc = cdc_ice_sort_order_parse(sort_by, cur, &order, e)) != CDC_OK) {
        cdc_ice_partition_spec_free(&spec);
        cdc_error_prefix(e, "table \"%s\"", t->location);
        return rc;
    }
    /* an existing spec or order with the same fields is made the default again */
    for (size_t i = 0; i < t->md.nspecs; i++) {
        if (spec_id < 0 && cdc_ice_partition_spec_same(&t->md.specs[i], &spec))
            spec_id = t->md.specs[i].spec_id;
        if (t->md.specs[i].spec_id > max_spec)
            max_spec = t->md.specs[i].spec_id;
    }
    for (size_t i = 0; i < t->md.norders; i++) {
        if (order_id < 0 && cdc_ice_sort_order_same(&t->md.orders[i], &order))
            order_id = t->md.orders[i].order_id;
        if (t->md.orders[i].order_id > max_order)
            max_order = t->md.orders[i].order_id;
    }
    if (spec_id == t->md.default_spec_id && order_id == t->md.default_sort_order_id) {
        rc = CDC_OK;
        goto done;
    }
    if ((rc = cdc_ice_metadata_copy(&md, &t->md)) != CDC_OK) {
        rc = oom(e);
        goto done;
    }
    if (spec_id < 0) {
        cdc_ice_partition_spec_t *v = realloc(md.specs, (md.nspecs + 1) * sizeof(*v));
        if (v == NULL) {
            rc = oom(e);
            goto fail;
        }
        md.specs = v;
        spec.spec_id = spec_id = max_spec + 1;
        for (size_t i = 0; i < spec.nfields; i++)
            if (spec.fields[i].field_id > md.last_partition_id)
                md.last_partition_id = spec.fields[i].field_id;
        md.specs[md.nspecs++] = spec; /* moved */
        memset(&spec, 0, sizeof(spec));
    }
    if (order_id < 0) {
        cdc_ice_sort_order_t *v = realloc(md.orders, (md.norders + 1) * sizeof(*v));
        if (v == NULL) {
            rc = oom(e);
            goto fail;
        }
        md.orders = v;
        /* order id 0 is reserved for the unsorted order */
        order.order_id = order_id =
            order.nfields == 0 && !cdc_ice_metadata_sort_order(&md, 0) ? 0 : max_order + 1;
        md.orders[md.norders++] = order; /* moved */
        memset(&order, 0, sizeof(order));
    }
    md.default_spec_id = spec_id;
    md.default_sort_order_id = order_id;
    int64_t ts = now_ms();
    md.last_updated_ms = ts > t->md.last_updated_ms ? ts : t->md.last_updated_ms + 1;
    if ((rc = commit_with_log(t, &md, e)) != CDC_OK)
        goto fail;
    if (changed)
        *changed = true;
    goto done;
fail:
    cdc_ice_metadata_free(&md);
done:
    cdc_ice_partition_spec_free(&spec);
    cdc_ice_sort_order_free(&order);
    return rc;
}

cdc_err_t cdc_ice_table_set_properties(cdc_ice_table_t *t, const cdc_ice_props_t *props,
                                       cdc_error_t *e)
{
    cdc_ice_metadata_t md;
    cdc_err_t rc = cdc_ice_metadata_copy(&md, &t->md);
    if (rc != CDC_OK)
        return oom(e);
    for (size_t i = 0; i < props->n; i++) {
        if (cdc_ice_props_set(&md.properties, props->keys[i], props->values[i]) != CDC_OK) {
            cdc_ice_metadata_free(&md);
            return oom(e);
        }
    }
    int64_t ts = now_ms();
    md.last_updated_ms = ts > t->md.last_updated_ms ? ts : t->md.last_updated_ms + 1;
    if ((rc = commit_with_log(t, &md, e)) != CDC_OK)
        cdc_ice_metadata_free(&md);
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
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        char **nv = realloc(*v, nc * sizeof(char *));
        if (!nv)
            return false;
        *v = nv;
        *cap = nc;
    }
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
 * Caches the paths a manifest this process just wrote lists (its live entries), so orphan
 * scans and expiry never read it back. Best effort: on allocation failure nothing is cached.
 */
static void ref_cache_feed_manifest(const char *path, const cdc_ice_manifest_entry_t *v, size_t n)
{
    char **files = NULL;
    size_t cnt = 0, cap = 0;
    bool ok = true;

    for (size_t i = 0; i < n && ok; i++)
        if (v[i].status != CDC_ICE_ENTRY_DELETED)
            ok = list_add(&files, &cnt, &cap, v[i].file.path);
    pthread_mutex_lock(&ref_cache_mu);
    if (ok && ref_cache_get(path) == NULL && ref_cache_put(path, files, cnt))
        files = NULL, cnt = 0;
    pthread_mutex_unlock(&ref_cache_mu);
    cdc_storage_list_free(files, cnt);
}

/*
 * Caches a manifest list this process just wrote, but only when every manifest it names is
 * cached (the invariant ref_cache_load keeps); otherwise a scan reads the list once.
 */
static void ref_cache_feed_list(const char *path, const cdc_ice_manifest_file_t *mfs, size_t n)
{
    char **paths = NULL;
    size_t cnt = 0, cap = 0;
    bool ok = true;

    for (size_t i = 0; i < n && ok; i++)
        ok = list_add(&paths, &cnt, &cap, mfs[i].path);
    pthread_mutex_lock(&ref_cache_mu);
    for (size_t i = 0; i < cnt && ok; i++)
        ok = ref_cache_get(paths[i]) != NULL;
    if (ok && ref_cache_get(path) == NULL && ref_cache_put(path, paths, cnt))
        paths = NULL, cnt = 0;
    pthread_mutex_unlock(&ref_cache_mu);
    cdc_storage_list_free(paths, cnt);
}

/* Reads manifest list s (and the manifests it names that are not cached) into the cache. */
static cdc_err_t ref_cache_load(cdc_ice_table_t *t, const cdc_ice_snapshot_t *s,
                                const ref_entry_t **out, cdc_error_t *e)
{
    cdc_ice_manifest_file_t *mfs = NULL;
    size_t nmf = 0, cnt = 0, cap = 0;
    char **paths = NULL;
    cdc_err_t rc = read_manifest_list(t, s, &mfs, &nmf, e);

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
        if ((rc = read_manifest(t, &mfs[j], &ents, &nents, e)) != CDC_OK)
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
    char *cur = metadata_path(t->location, t->version), *hp = hint_path(t->location);

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
    if (older_than_ms < 0)
        older_than_ms = now_ms() - prop_int(&t->md, "history.expire.max-snapshot-age-ms",
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
    int64_t ts = now_ms();
    md.last_updated_ms = ts > t->md.last_updated_ms ? ts : t->md.last_updated_ms + 1;
    if ((rc = commit_with_log(t, &md, e)) != CDC_OK)
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
        if (cdc_storage_delete(t->storage, before[i], &de) != CDC_OK)
            cdc_log_warn("could not delete expired file: %s", de.msg);
    }
done:
    free(keep.slots);
    cdc_ice_metadata_free(&md);
    cdc_storage_list_free(before, nbefore);
    cdc_storage_list_free(after, nafter);
    return rc;
}

cdc_err_t cdc_ice_table_live_files(cdc_ice_table_t *t, cdc_ice_live_file_t **files, size_t *n,
                                   cdc_error_t *e)
{
    cdc_ice_manifest_file_t *mfs;
    size_t nmf;
    *files = NULL;
    *n = 0;
    cdc_err_t rc = read_manifest_list(t, cdc_ice_metadata_current_snapshot(&t->md), &mfs, &nmf, e);
    if (rc != CDC_OK)
        return rc;
    cdc_ice_live_file_t *v = NULL;
    size_t cnt = 0;
    for (size_t i = 0; i < nmf && rc == CDC_OK; i++) {
        cdc_ice_manifest_entry_t *ents;
        size_t nents;
        if ((rc = read_manifest(t, &mfs[i], &ents, &nents, e)) != CDC_OK)
            break;
        cdc_ice_live_file_t *nv = realloc(v, (cnt + nents + 1) * sizeof(*nv));
        if (!nv) {
            cdc_ice_manifest_entries_free(ents, nents);
            rc = oom(e);
            break;
        }
        v = nv;
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
