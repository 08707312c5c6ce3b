/*
 * Writing the epoch's files at the barrier (cdc_stage_write, stage.h): each table's files
 * of each kind finished in memory (after the row groups encoded ahead), one per
 * partition and sorted by the table's sort order for partitioned and sorted tables, then
 * stored together: local files created and written before the first fsync, so that
 * their I/O overlaps, or uploaded.
 */
#include "worker/stage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table.h"
#include "worker/stage_int.h"

void cdc_stage_files_free(cdc_stage_file_t *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(files[i].table);
        free(files[i].schema_json);
        cdc_ice_data_file_clear(&files[i].df);
    }
    free(files);
}

/* ---- storing a file ------------------------------------------------------------------- */

/* Creates a local file with data and starts its writeback; the caller fsyncs and
 * closes *fd (mkdir -p of its directory when missing). On failure nothing is left. */
static cdc_err_t local_begin(const char *path, const uint8_t *data, size_t len, int *fd,
                             cdc_error_t *e)
{
    const char *slash = strrchr(path, '/');
    if (slash != NULL && slash != path) { /* data/ may not exist yet */
        char dir[1024];
        struct stat sb;
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
        if (stat(dir, &sb) != 0) {
            for (char *p = dir + 1; *p; p++)
                if (*p == '/') {
                    *p = '\0';
                    mkdir(dir, 0755);
                    *p = '/';
                }
            mkdir(dir, 0755);
        }
    }
    *fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (*fd < 0)
        return cdc_error_set(e, errno == EEXIST ? CDC_ERR_EXISTS : CDC_ERR_IO,
                             "could not create file \"%s\": %s", path, strerror(errno));
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(*fd, data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int err = errno;
            close(*fd);
            *fd = -1;
            unlink(path);
            return cdc_error_set(e, CDC_ERR_IO, "could not write file \"%s\": %s", path,
                                 strerror(err));
        }
        done += (size_t)n;
    }
    /* start the writeback now: the fsyncs of the epoch's files then overlap */
    sync_file_range(*fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    return CDC_OK;
}

/* Location of the epoch's file of a kind for table t (caller frees), or NULL. */
static char *file_location(const cdc_stage_t *s, const cdc_stage_table_t *t, cdc_stage_kind_t kind,
                           const cdc_stage_write_options_t *o)
{
    static const char *const kind_tag[] = {"data", "eqdel", "cl"};
    char tag[256], name[300];
    char *table_loc, *loc;
    snprintf(name, sizeof(name), "%s%s", t->table, kind == CDC_STAGE_CHANGELOG ? "_changelog" : "");
    table_loc = cdc_ice_table_location(o->warehouse, t->ns, name);
    snprintf(tag, sizeof(tag), "%s-e%llu-p%u-%s", o->job, (unsigned long long)s->epoch,
             s->partition, kind_tag[kind]);
    loc = table_loc ? cdc_ice_data_file_location(table_loc, tag) : NULL;
    free(table_loc);
    return loc;
}

/* One encoded file waiting to be stored. */
typedef struct pending {
    uint8_t *data;
    size_t len;
    int fd; /* local file created, not yet fsynced; else -1 */
    bool stored;
} pending_t;

/* The rows of one partition of a kind: indices into changelog[] or entries[]. */
typedef struct group {
    const uint8_t *key; /* partition key (NULL = spec 0) */
    size_t key_len;
    const size_t *idx;
    size_t n;
    int32_t order_id; /* the rows are sorted by this order (0 = unsorted) */
} group_t;

/*
 * Finishes table t's file of a kind in memory (the rest of the rows and the footer,
 * after what was encoded ahead): *out describes it (path = its location), p holds its
 * bytes. *written = false when the kind has no rows.
 */
static cdc_err_t encode_kind(cdc_stage_t *s, cdc_stage_table_t *t, cdc_stage_kind_t kind,
                             const group_t *g, const cdc_stage_write_options_t *o,
                             cdc_stage_file_t *out, pending_t *p, bool *written, cdc_error_t *e)
{
    cdc_stage_enc_t *en = NULL;
    cdc_err_t rc = CDC_OK;
    size_t rows = 0;
    *written = false;

    /* what was encoded ahead is used up here, whatever happens */
    if (kind == CDC_STAGE_CHANGELOG) {
        en = t->enc_cl;
        t->enc_cl = NULL;
    } else if (kind == CDC_STAGE_MIRROR_DATA) {
        en = t->enc_data;
        t->enc_data = NULL;
    }
    if (en != NULL) {
        s->bytes -= en->bytes;
        if (en->src != t->schema || en->codec != o->compression) {
            cdc_stage_enc_free(en);
            en = NULL;
        }
    }
    if (g != NULL) {
        rows = g->n; /* (nothing is encoded ahead for a partitioned table) */
    } else if (kind == CDC_STAGE_CHANGELOG) {
        rows = t->nchangelog - t->nmirror_only;
    } else {
        for (size_t i = 0; i < t->nentries; i++)
            rows += cdc_stage_entry_in(&t->entries[i], kind);
    }
    if (rows == 0)
        goto done;
    if (en == NULL && (rc = cdc_stage_enc_open(t->schema, kind, o->compression, &en, e)) != CDC_OK)
        goto done;
    if (g != NULL)
        for (size_t j = 0; j < g->n && rc == CDC_OK; j++)
            rc = cdc_stage_enc_row(en, t, g->idx[j], e);
    else
        rc = cdc_stage_enc_append(en, t, kind == CDC_STAGE_CHANGELOG ? t->nchangelog : t->nentries,
                                  e);
    if (rc == CDC_OK)
        rc = cdc_pq_writer_close(en->w, &out->df, e);
    if (rc == CDC_OK && g != NULL &&
        !cdc_stage_part_key_decode(g->key, g->key_len, &out->df.spec_id, &out->df.partition,
                                   &out->df.npartition))
        rc = cdc_error_set(e, CDC_ERR_INTERNAL, "bad partition key");
    if (g != NULL && kind != CDC_STAGE_MIRROR_DELETES)
        out->df.sort_order_id = g->order_id;
    if (rc != CDC_OK)
        goto done;
    if (cdc_pq_writer_take_buffer(en->w, &p->data, &p->len) != CDC_OK) {
        rc = cdc_error_set(e, CDC_ERR_INTERNAL, "parquet writer gave no buffer");
        goto done;
    }
    free(out->df.path);
    out->df.path = file_location(s, t, kind, o);
    out->df.schema_id = en->schema.schema_id;
    out->schema_json = cdc_ice_schema_to_json(&en->schema);
    char name[300];
    snprintf(name, sizeof(name), "%s.%s%s", t->ns, t->table,
             kind == CDC_STAGE_CHANGELOG ? "_changelog" : "");
    out->table = strdup(name);
    out->kind = kind;
    if (kind == CDC_STAGE_MIRROR_DELETES) {
        out->df.content = CDC_ICE_CONTENT_EQUALITY_DELETES;
        out->df.equality_ids = malloc(en->schema.nidentifier * sizeof(int32_t));
        if (out->df.equality_ids != NULL) {
            memcpy(out->df.equality_ids, en->schema.identifier_ids,
                   en->schema.nidentifier * sizeof(int32_t));
            out->df.nequality_ids = en->schema.nidentifier;
        }
    }
    if (out->df.path == NULL || out->schema_json == NULL || out->table == NULL ||
        (kind == CDC_STAGE_MIRROR_DELETES && out->df.equality_ids == NULL))
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    *written = true; /* (out is released by the caller, also on failure) */
done:
    if (rc != CDC_OK && !*written) {
        cdc_ice_data_file_clear(&out->df);
        free(p->data);
        p->data = NULL;
    }
    if (rc != CDC_OK)
        cdc_error_prefix(e,
                         "could not stage %s file for table \"%s.%s\" (partition %u, epoch %llu)",
                         kind == CDC_STAGE_MIRROR_DELETES ? "equality delete" : "data", t->ns,
                         t->table, s->partition, (unsigned long long)s->epoch);
    cdc_stage_enc_free(en);
    return rc;
}

/*
 * Stores the encoded files: local ones are all created and written (writeback started)
 * before the first fsync, so that their I/O overlaps; S3 ones are uploaded.
 */
static cdc_err_t store_all(cdc_storage_t *storage, cdc_stage_file_t *out, pending_t *p, size_t n,
                           cdc_error_t *e)
{
    cdc_err_t rc = CDC_OK;
    for (size_t i = 0; i < n && rc == CDC_OK; i++) {
        char *local = cdc_storage_local_path(storage, out[i].df.path);
        if (local != NULL)
            rc = local_begin(local, p[i].data, p[i].len, &p[i].fd, e);
        else
            rc = cdc_storage_put(storage, out[i].df.path, p[i].data, p[i].len, e);
        p[i].stored = rc == CDC_OK;
        free(local);
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i].fd < 0)
            continue;
        if (rc == CDC_OK && fsync(p[i].fd) != 0)
            rc = cdc_error_set(e, CDC_ERR_IO, "could not fsync file \"%s\": %s", out[i].df.path,
                               strerror(errno));
        if (close(p[i].fd) != 0 && rc == CDC_OK)
            rc = cdc_error_set(e, CDC_ERR_IO, "could not close file \"%s\": %s", out[i].df.path,
                               strerror(errno));
        p[i].fd = -1;
    }
    return rc;
}

/* Key of row i of a kind: the data file's, the equality delete's or the changelog's. */
static const uint8_t *row_key(const cdc_stage_table_t *t, cdc_stage_kind_t kind, size_t i,
                              size_t *len)
{
    if (kind == CDC_STAGE_CHANGELOG) {
        *len = t->changelog[i].part_len;
        return t->changelog[i].part;
    }
    *len = kind == CDC_STAGE_MIRROR_DATA ? t->entries[i].part_len : t->entries[i].old_part_len;
    return kind == CDC_STAGE_MIRROR_DATA ? t->entries[i].part : t->entries[i].old_part;
}

typedef struct keyed {
    const uint8_t *key;
    size_t len, idx;
} keyed_t;

static int keyed_cmp(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;
    int c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    if (x->len > 0 && (c = memcmp(x->key, y->key, x->len)) != 0)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx; /* rows keep their order in a file */
}

/* Room for one more file in the write's arrays. */
static bool files_reserve(cdc_stage_file_t **out, pending_t **p, size_t *cap, size_t n)
{
    if (n < *cap)
        return true;
    if (cdc_array_resize(*out, *cap * 2) != CDC_OK || cdc_array_resize(*p, *cap * 2) != CDC_OK)
        return false;
    memset(*out + *cap, 0, *cap * sizeof(**out));
    memset(*p + *cap, 0, *cap * sizeof(**p));
    for (size_t i = *cap; i < *cap * 2; i++)
        (*p)[i].fd = -1;
    *cap *= 2;
    return true;
}

/* ---- sort orders: each file's rows sorted by its table's order ---------------------- */

/* One sort field's transformed value of a row and its type. */
typedef struct skey {
    cdc_ice_part_value_t v;
    cdc_ice_field_t type;
} skey_t;

typedef struct srow {
    size_t idx;
    skey_t *keys; /* one per sort field */
} srow_t;

static int srow_cmp(const void *pa, const void *pb, void *arg)
{
    const srow_t *a = pa, *b = pb;
    const cdc_ice_sort_order_t *o = arg;
    for (size_t f = 0; f < o->nfields; f++) {
        const skey_t *x = &a->keys[f], *y = &b->keys[f];
        int c;
        if (x->v.null || y->v.null) {
            if (x->v.null && y->v.null)
                continue;
            /* null placement does not follow the direction */
            return x->v.null == o->fields[f].nulls_first ? -1 : 1;
        }
        if (x->type.type != y->type.type) /* rows of two schema versions (a promotion) */
            return x->type.type < y->type.type ? -1 : 1;
        if ((c = cdc_ice_part_value_compare(&x->type, &x->v, &y->v)) != 0)
            return o->fields[f].descending ? -c : c;
    }
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Sorts the rows idx[0..n) of a kind by order o (stable for equal keys). */
static cdc_err_t sort_rows(const cdc_stage_table_t *t, cdc_stage_kind_t kind,
                           const cdc_ice_sort_order_t *o, size_t *idx, size_t n, cdc_error_t *e)
{
    srow_t *rows = calloc(n ? n : 1, sizeof(*rows));
    skey_t *keys = calloc(n * o->nfields + 1, sizeof(*keys));
    cdc_err_t rc = CDC_OK;

    if (rows == NULL || keys == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t r = 0; r < n && rc == CDC_OK; r++) {
        const cdc_changelog_row_t *cl = kind == CDC_STAGE_CHANGELOG ? &t->changelog[idx[r]] : NULL;
        const cdc_row_t *row = cl ? &cl->row : cdc_stage_entry_row(t, &t->entries[idx[r]]);
        rows[r].idx = idx[r];
        rows[r].keys = &keys[r * o->nfields];
        for (size_t f = 0; f < o->nfields && rc == CDC_OK; f++) {
            const cdc_ice_sort_field_t *sf = &o->fields[f];
            cdc_ice_field_t src;
            cdc_ice_part_value_t in;
            skey_t *k = &rows[r].keys[f];
            k->v.null = true;
            if (!cdc_stage_part_source(row, cl, sf->source_id, &src, &in)) {
                rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                break;
            }
            /* (a value the order cannot take sorts as a null) */
            if (!in.null && cdc_ice_transform_result(sf->transform, &src, &k->type) &&
                cdc_ice_transform_apply(sf->transform, &src, &in, &k->v) != CDC_OK)
                k->v.null = true;
            free(in.bytes);
        }
    }
    if (rc == CDC_OK) {
        qsort_r(rows, n, sizeof(*rows), srow_cmp, (void *)o);
        for (size_t r = 0; r < n; r++)
            idx[r] = rows[r].idx;
    }
done:
    for (size_t i = 0; keys != NULL && i < n * o->nfields; i++)
        free(keys[i].v.bytes);
    free(keys);
    free(rows);
    return rc;
}

/* A partitioned or sorted table's files of a kind: one per partition key, rows sorted by
 * the table's order (in staged order without one). */
static cdc_err_t encode_groups(cdc_stage_t *s, cdc_stage_table_t *t, cdc_stage_kind_t kind,
                               const cdc_stage_write_options_t *o, cdc_stage_file_t **out,
                               pending_t **p, size_t *cap, size_t *n, cdc_error_t *e)
{
    size_t total = kind == CDC_STAGE_CHANGELOG ? t->nchangelog : t->nentries, nk = 0;
    const cdc_ice_sort_order_t *order = &t->orders[kind == CDC_STAGE_CHANGELOG];
    keyed_t *k = malloc((total ? total : 1) * sizeof(*k));
    size_t *idx = malloc((total ? total : 1) * sizeof(*idx));
    cdc_err_t rc = CDC_OK;

    if (k == NULL || idx == NULL) {
        free(k);
        free(idx);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < total; i++) {
        if (kind == CDC_STAGE_CHANGELOG ? t->changelog[i].mirror_only
                                        : !cdc_stage_entry_in(&t->entries[i], kind))
            continue;
        k[nk].key = row_key(t, kind, i, &k[nk].len);
        k[nk++].idx = i;
    }
    qsort(k, nk, sizeof(*k), keyed_cmp);
    for (size_t i = 0; i < nk; i++)
        idx[i] = k[i].idx;
    for (size_t a = 0, b; a < nk && rc == CDC_OK; a = b) {
        group_t g = {k[a].key, k[a].len, idx + a, 0, 0};
        bool written;
        for (b = a; b < nk && k[b].len == k[a].len &&
                    (k[a].len == 0 || memcmp(k[b].key, k[a].key, k[a].len) == 0);)
            b++;
        g.n = b - a;
        if (order->nfields > 0 && kind != CDC_STAGE_MIRROR_DELETES) {
            if ((rc = sort_rows(t, kind, order, idx + a, g.n, e)) != CDC_OK)
                break;
            g.order_id = order->order_id;
        }
        if (!files_reserve(out, p, cap, *n)) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            break;
        }
        rc = encode_kind(s, t, kind, &g, o, &(*out)[*n], &(*p)[*n], &written, e);
        *n += written;
    }
    free(k);
    free(idx);
    return rc;
}

cdc_err_t cdc_stage_write(cdc_stage_t *s, cdc_storage_t *storage,
                          const cdc_stage_write_options_t *o, cdc_stage_file_t **files,
                          size_t *nfiles, cdc_error_t *e)
{
    size_t cap = s->ntables * 3 + 1, n = 0;
    cdc_stage_file_t *out = calloc(cap, sizeof(*out));
    pending_t *p = calloc(cap, sizeof(*p));
    cdc_err_t rc = CDC_OK;
    if (out == NULL || p == NULL) {
        free(out);
        free(p);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < cap; i++)
        p[i].fd = -1;
    /* encode every file first (CPU), then store them together (I/O) */
    for (size_t i = 0; i < s->ntables && rc == CDC_OK; i++)
        for (int k = CDC_STAGE_MIRROR_DATA; k <= CDC_STAGE_CHANGELOG && rc == CDC_OK; k++) {
            bool written;
            if (s->tables[i].partitioned) {
                rc = encode_groups(s, &s->tables[i], (cdc_stage_kind_t)k, o, &out, &p, &cap, &n, e);
                continue;
            }
            if (!files_reserve(&out, &p, &cap, n)) {
                rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                break;
            }
            rc = encode_kind(s, &s->tables[i], (cdc_stage_kind_t)k, NULL, o, &out[n], &p[n],
                             &written, e);
            n += written;
        }
    if (rc == CDC_OK)
        rc = store_all(storage, out, p, n, e);
    for (size_t i = 0; i < n; i++)
        free(p[i].data);
    if (rc != CDC_OK) {
        for (size_t i = 0; i < n; i++)
            if (p[i].stored) {
                cdc_error_t e2;
                cdc_storage_delete(storage, out[i].df.path, &e2);
            }
        free(p);
        cdc_stage_files_free(out, n);
        for (size_t t = 0; t < s->ntables; t++) { /* a retry encodes everything */
            cdc_stage_enc_drop(s, &s->tables[t].enc_cl);
            cdc_stage_enc_drop(s, &s->tables[t].enc_data);
        }
        return rc;
    }
    free(p);
    *files = out;
    *nfiles = n;
    return CDC_OK;
}
