/*
 * Snapshot commits (see table.h): the new files' manifests, merged per content kind
 * and partition spec with the small manifests of the parent snapshot
 * (commit.manifest-merge.enabled, commit.manifest.min-count-to-merge,
 * commit.manifest.target-size-bytes), files an overwrite removes marked DELETED, the
 * manifest list, the snapshot summary, and the metadata swap (table.c). Files a failed
 * commit wrote are removed when the failure proves them unreferenced.
 * docs/iceberg.md, "Commit protocol".
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/iceberg/manifest.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table.h"
#include "common/iceberg/table_int.h"

#define DEFAULT_MIN_COUNT_TO_MERGE 8
#define DEFAULT_TARGET_SIZE (8 * 1024 * 1024)

static cdc_avro_codec_t manifest_codec(const cdc_ice_metadata_t *md)
{
    const char *v = cdc_ice_props_get(&md->properties, "write.avro.compression-codec");
    if (v && (strcmp(v, "uncompressed") == 0 || strcmp(v, "none") == 0 || strcmp(v, "null") == 0))
        return CDC_AVRO_CODEC_NULL;
    return CDC_AVRO_CODEC_DEFLATE;
}

/* Files this commit wrote, removed again when the commit fails. */
typedef struct written {
    char **v;
    size_t n, cap;
} written_t;

static bool written_add(written_t *w, const char *loc)
{
    if (cdc_array_reserve(w->v, w->cap, w->n + 1, 16) != CDC_OK)
        return false;
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
    w->n = w->cap = 0;
}

/* Entries being assembled into one new manifest. */
typedef struct entry_vec {
    cdc_ice_manifest_entry_t *v;
    size_t n, cap;
} entry_vec_t;

static bool entry_push(entry_vec_t *ev, const cdc_ice_manifest_entry_t *en)
{
    if (cdc_array_reserve(ev->v, ev->cap, ev->n + 1, 16) != CDC_OK)
        return false;
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
    /* its name is made durable by the metadata file's put (same directory) */
    rc = cdc_storage_put_deferred(cx->t->storage, mf->path, buf, len, e);
    free(buf);
    if (rc != CDC_OK)
        return rc;
    if (!written_add(&cx->written, mf->path))
        return oom(e);
    cdc_ice_table_ref_cache_feed_manifest(mf->path, ev->v,
                                          ev->n); /* an orphan scan need not read it */
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
    if (cdc_array_reserve(mv->v, mv->cap, mv->n + 1, 16) != CDC_OK)
        return false;
    if (!copy)
        mv->v[mv->n] = *mf;
    else if (cdc_ice_manifest_file_copy(&mv->v[mv->n], mf) != CDC_OK)
        return false;
    mv->n++;
    return true;
}

/*
 * The data sequence number an added file is written with: a rewrite's, the part of a
 * group commit it belongs to (seqs[i] of cx->c->seq_span), or -1 to inherit the
 * snapshot's (the last part of a group inherits it too).
 */
static int64_t file_sequence(const commit_ctx_t *cx, const int64_t *seqs, size_t i)
{
    const cdc_ice_commit_t *c = cx->c;
    if (c->data_sequence_number > 0)
        return c->data_sequence_number;
    if (c->seq_span > 1 && seqs != NULL && seqs[i] < c->seq_span)
        return cx->seq - c->seq_span + seqs[i];
    return -1;
}

/*
 * Builds the manifests of one content kind and one partition spec (cx->spec): the new
 * files' entries of that spec, merged with the spec's small existing manifests of that
 * content when there are enough of them (min-count-to-merge).
 */
static cdc_err_t build_content(commit_ctx_t *cx, cdc_ice_manifest_content_t content,
                               const cdc_ice_data_file_t *files, const int64_t *seqs, size_t nfiles,
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
                                       .sequence_number = file_sequence(cx, seqs, i),
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
            if ((rc = cdc_ice_table_read_manifest(cx->t, &old[i], &ents, &nents, e)) != CDC_OK)
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
        if (ents == NULL &&
            (rc = cdc_ice_table_read_manifest(cx->t, &old[i], &ents, &nents, e)) != CDC_OK)
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

/* A "total-*" summary entry: the parent snapshot's total moved by delta. */
static cdc_err_t set_total(cdc_ice_props_t *p, const cdc_ice_snapshot_t *parent, const char *key,
                           int64_t delta)
{
    return set_int(p, key, summary_int(parent, key) + delta);
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
            seen = cdc_ice_file_same_partition(NTH(i), NTH(j));
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
    const char *op = c->data_sequence_number > 0 ? "replace"
                     : add_del == 0 && !removed  ? "append"
                     : add_data == 0             ? "delete"
                                                 : "overwrite";
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
    rc |= set_total(sum, parent, "total-records", add_records - cx->rm_records);
    rc |= set_total(sum, parent, "total-files-size", add_size - cx->rm_size);
    rc |= set_total(sum, parent, "total-data-files", add_data - cx->rm_data);
    rc |= set_total(sum, parent, "total-delete-files", add_del - cx->rm_del);
    rc |= set_total(sum, parent, "total-position-deletes", add_pos - cx->rm_pos);
    rc |= set_total(sum, parent, "total-equality-deletes", add_eq - cx->rm_eq);
    for (size_t i = 0; c->summary && i < c->summary->n; i++)
        rc |= cdc_ice_props_set(sum, c->summary->keys[i], c->summary->values[i]);
    for (size_t i = 0; parent && c->keep_parent_keys && c->keep_parent_keys[i]; i++) {
        const char *k = c->keep_parent_keys[i], *v = cdc_ice_props_get(&parent->summary, k);
        if (v != NULL && cdc_ice_props_get(sum, k) == NULL)
            rc |= cdc_ice_props_set(sum, k, v);
    }
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
    pf = cdc_ice_table_spec_fields(&t->md, spec, &ok);
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
            cdc_ice_field_t *pf = cdc_ice_table_spec_fields(md, &md->specs[i], &ok);
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
            rc = k == 0 ? build_content(cx, content, c->data_files, c->data_seqs, c->ndata_files,
                                        old, nold, list, e)
                        : build_content(cx, content, c->delete_files, c->delete_seqs,
                                        c->ndelete_files, old, nold, list, e);
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
    if (c->data_sequence_number > t->md.last_sequence_number)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "rewrite of table \"%s\": data sequence number %" PRId64
                             " is past the table's last one, %" PRId64,
                             t->location, c->data_sequence_number, t->md.last_sequence_number);
    if (c->seq_span > 1 && c->data_sequence_number > 0)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "commit to table \"%s\": a group commit cannot be a rewrite",
                             t->location);
    for (size_t i = 0; c->seq_span > 1 && i < c->ndata_files + c->ndelete_files; i++) {
        const int64_t *seqs = i < c->ndata_files ? c->data_seqs : c->delete_seqs;
        int64_t s = seqs == NULL ? c->seq_span : seqs[i < c->ndata_files ? i : i - c->ndata_files];
        if (s < 1 || s > c->seq_span)
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "commit to table \"%s\": part %" PRId64 " of a group of %" PRId64,
                                 t->location, s, c->seq_span);
    }
    cx.snapshot_id = cdc_ice_table_new_snapshot_id(&t->md);
    cx.seq = t->md.last_sequence_number + (c->seq_span > 1 ? c->seq_span : 1);
    cx.schema_id = schema->schema_id;
    cx.codec = manifest_codec(&t->md);
    if (!(cx.schema_json = cdc_ice_schema_to_json(schema))) {
        rc = oom(e);
        goto fail;
    }
    if ((rc = cdc_ice_table_read_manifest_list(t, parent, &old, &nold, e)) != CDC_OK)
        goto fail;
    if ((rc = build_manifests(&cx, old, nold, &list, e)) != CDC_OK)
        goto fail;
    if (c->expect_removed > 0 && (size_t)(cx.rm_data + cx.rm_del) != c->expect_removed) {
        rc = cdc_error_set(e, CDC_ERR_STALE,
                           "rewrite of table \"%s\": %" PRId64
                           " of its %zu input files are still live (the table changed)",
                           t->location, cx.rm_data + cx.rm_del, c->expect_removed);
        goto fail;
    }
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
    if ((rc = cdc_storage_put_deferred(t->storage, list_path, lbuf, llen, e)) != CDC_OK)
        goto fail;
    if (!written_add(&cx.written, list_path)) {
        rc = oom(e);
        goto fail;
    }
    cdc_ice_table_ref_cache_feed_list(list_path, list.v, list.n);

    /* The new snapshot, built while parent still points into t->md. */
    int64_t ts = c->timestamp_ms > 0 ? c->timestamp_ms : cdc_clock_wall_ms();
    if (ts <= t->md.last_updated_ms)
        ts = t->md.last_updated_ms + 1; /* keep the logs monotonic under clock skew */
    cdc_ice_snapshot_t sn;
    memset(&sn, 0, sizeof(sn));
    sn.snapshot_id = cx.snapshot_id;
    sn.parent_id = parent ? parent->snapshot_id : -1;
    sn.sequence_number = cx.seq;
    sn.timestamp_ms = ts;
    sn.schema_id = schema->schema_id;
    if (!(sn.manifest_list = strdup(list_path)) ||
        build_summary(c, &cx, parent, &sn.summary) != CDC_OK) {
        free(sn.manifest_list);
        cdc_ice_props_free(&sn.summary);
        rc = oom(e);
        goto fail;
    }
    parent = NULL; /* t->md.snapshots moves below */
    /*
     * The new metadata: a copy of the current one, except the snapshots, which move from
     * t->md to md (and back when the commit fails) with the new one appended. Copying the
     * whole history (every snapshot's summary and cached JSON) on every commit, and
     * freeing the old one, was a seventh of a commit's CPU (docs/benchmarks.md, "Commit
     * cost"). Nothing reads t->md's snapshots during the swap.
     */
    cdc_ice_snapshot_t *history = t->md.snapshots;
    size_t nhistory = t->md.nsnapshots;
    t->md.snapshots = NULL;
    t->md.nsnapshots = 0;
    rc = cdc_ice_metadata_copy(&md, &t->md);
    md.snapshots = history;
    md.nsnapshots = nhistory;
    if (rc != CDC_OK || cdc_array_resize(md.snapshots, md.nsnapshots + 1) != CDC_OK) {
        t->md.snapshots = md.snapshots;
        t->md.nsnapshots = md.nsnapshots;
        md.snapshots = NULL;
        md.nsnapshots = 0;
        free(sn.manifest_list);
        cdc_ice_props_free(&sn.summary);
        rc = oom(e);
        goto fail;
    }
    md.snapshots[md.nsnapshots++] = sn;
    if (cdc_array_resize(md.snapshot_log, md.nsnapshot_log + 1) != CDC_OK) {
        rc = oom(e);
        goto restore;
    }
    md.snapshot_log[md.nsnapshot_log].timestamp_ms = ts;
    md.snapshot_log[md.nsnapshot_log].snapshot_id = cx.snapshot_id;
    md.nsnapshot_log++;
    md.last_sequence_number = cx.seq;
    md.current_snapshot_id = cx.snapshot_id;
    md.last_updated_ms = ts;
    if ((rc = cdc_ice_table_commit_with_log(t, &md, e)) != CDC_OK) {
        /*
         * Only a definite conflict proves our files unreferenced. After any other
         * failure (an S3 PUT whose outcome is unknown) the new version may exist and
         * reference them: keep them; if unreferenced they are orphans for cleanup.
         */
        remove_files = rc == CDC_ERR_CONFLICT;
        goto restore;
    }
    if (snapshot_id)
        *snapshot_id = cx.snapshot_id;
    written_cleanup(t, &cx.written, false);
    goto done;
restore:
    /* the history goes back to t->md; the new snapshot is freed */
    {
        cdc_ice_snapshot_t *mine = &md.snapshots[md.nsnapshots - 1];
        free(mine->manifest_list);
        free(mine->json);
        cdc_ice_props_free(&mine->summary);
        t->md.snapshots = md.snapshots;
        t->md.nsnapshots = md.nsnapshots - 1;
        md.snapshots = NULL;
        md.nsnapshots = 0;
    }
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
