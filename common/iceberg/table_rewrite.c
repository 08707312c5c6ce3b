/*
 * Rewrites of data files (see table.h, cdc_ice_table_rewrite, and docs/iceberg.md "Table
 * maintenance"): the rows of the given data files, minus those an equality delete
 * applies to, written again into few files of a target size, converted to the table's
 * current schema. The equality deletes are read into one map from (scope, key) to the
 * highest data sequence number that deletes the key there; a row of a data file with
 * sequence number s is deleted when that number is above s, in the table-wide scope (a
 * delete of an unpartitioned spec) or in its own file's partition. The commit of the new
 * files (with the data sequence number of the snapshot the rewrite read) is the caller's.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/iceberg/parquet.h"
#include "common/iceberg/parquet_read.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table.h"
#include "common/iceberg/table_int.h"

/* ---- keys: (equality ids, scope, values) in one canonical byte string ------------------- */

/* Appends one value of type ty, canonical across Iceberg's promotions (int and long alike,
 * float and double alike), so that a key written before a promotion meets its deletes. */
static void key_value(cdc_buf_t *b, cdc_ice_type_t ty, const cdc_ice_value_t *v)
{
    uint8_t tag;
    if (v == NULL || v->is_null) {
        cdc_buf_putc(b, 0);
        return;
    }
    switch (ty) {
    case CDC_ICE_BOOLEAN:
        cdc_buf_putc(b, 1);
        cdc_buf_putc(b, v->v.b ? 1 : 0);
        return;
    case CDC_ICE_INT:
    case CDC_ICE_LONG: {
        int64_t x = ty == CDC_ICE_INT ? v->v.i32 : v->v.i64;
        cdc_buf_putc(b, 2);
        cdc_buf_put(b, &x, sizeof(x));
        return;
    }
    case CDC_ICE_DATE: {
        int64_t x = v->v.i32;
        cdc_buf_putc(b, 3);
        cdc_buf_put(b, &x, sizeof(x));
        return;
    }
    case CDC_ICE_TIME:
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        cdc_buf_putc(b, (char)(4 + (ty - CDC_ICE_TIME)));
        cdc_buf_put(b, &v->v.i64, sizeof(v->v.i64));
        return;
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE: {
        double x = ty == CDC_ICE_FLOAT ? (double)v->v.f32 : v->v.f64;
        cdc_buf_putc(b, 8);
        cdc_buf_put(b, &x, sizeof(x));
        return;
    }
    case CDC_ICE_DECIMAL:
        cdc_buf_putc(b, 9);
        cdc_buf_put(b, &v->v.dec, sizeof(v->v.dec));
        return;
    case CDC_ICE_UUID:
        cdc_buf_putc(b, 10);
        cdc_buf_put(b, v->v.uuid, 16);
        return;
    case CDC_ICE_STRING:
    case CDC_ICE_BINARY:
    default: {
        uint32_t n = (uint32_t)v->v.bytes.len;
        tag = ty == CDC_ICE_STRING ? 11 : 12;
        cdc_buf_putc(b, (char)tag);
        cdc_buf_put(b, &n, sizeof(n));
        cdc_buf_put(b, v->v.bytes.ptr, n);
        return;
    }
    }
}

/* The scope of a file's deletes or rows: empty (table-wide) for an unpartitioned spec,
 * else the spec id and the partition values. */
static void key_scope(cdc_buf_t *b, const cdc_ice_metadata_t *md, const cdc_ice_data_file_t *f,
                      bool table_wide)
{
    const cdc_ice_partition_spec_t *spec = cdc_ice_metadata_spec(md, f->spec_id);
    if (table_wide || spec == NULL || spec->nfields == 0) {
        cdc_buf_putc(b, 0);
        return;
    }
    cdc_buf_putc(b, 1);
    cdc_buf_put(b, &f->spec_id, sizeof(f->spec_id));
    for (size_t i = 0; i < f->npartition; i++) {
        uint32_t n = f->partition[i].null ? UINT32_MAX : (uint32_t)f->partition[i].len;
        cdc_buf_put(b, &n, sizeof(n));
        if (!f->partition[i].null)
            cdc_buf_put(b, f->partition[i].bytes, f->partition[i].len);
    }
}

/* Equality ids of a delete file, as one group's identity. */
static void key_ids(cdc_buf_t *b, const int32_t *ids, size_t n)
{
    uint32_t k = (uint32_t)n;
    cdc_buf_put(b, &k, sizeof(k));
    cdc_buf_put(b, ids, n * sizeof(*ids));
}

/* ---- the delete map: key bytes -> highest deleting sequence number ----------------------- */

typedef struct del_slot {
    uint64_t hash;
    size_t off, len; /* in the arena; len 0 = empty slot */
    int64_t seq;
} del_slot_t;

typedef struct del_map {
    del_slot_t *slots;
    size_t cap, n;
    cdc_buf_t arena;
    /* the distinct equality-id lists (each a key_ids() string), for probing rows */
    int32_t **ids;
    size_t *nids;
    size_t ngroups;
} del_map_t;

static del_slot_t *del_find(del_map_t *m, const void *k, size_t len, uint64_t h)
{
    size_t j = h & (m->cap - 1);
    while (m->slots[j].len != 0) {
        del_slot_t *s = &m->slots[j];
        if (s->hash == h && s->len == len && memcmp(m->arena.data + s->off, k, len) == 0)
            return s;
        j = (j + 1) & (m->cap - 1);
    }
    return &m->slots[j];
}

static bool del_grow(del_map_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    del_slot_t *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].len == 0)
            continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].len != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

/* Notes key k deleted at seq: 1 when the key is new, 0 when known, -1 out of memory. */
static int del_put(del_map_t *m, const void *k, size_t len, int64_t seq)
{
    if (2 * (m->n + 1) > m->cap && !del_grow(m))
        return -1;
    uint64_t h = cdc_hash_bytes(k, len, 0);
    del_slot_t *s = del_find(m, k, len, h);
    if (s->len != 0) {
        if (seq > s->seq)
            s->seq = seq;
        return 0;
    }
    size_t off = m->arena.len;
    cdc_buf_put(&m->arena, k, len);
    if (m->arena.oom)
        return -1;
    *s = (del_slot_t){.hash = h, .off = off, .len = len, .seq = seq};
    m->n++;
    return 1;
}

static int64_t del_get(del_map_t *m, const void *k, size_t len)
{
    if (m->cap == 0)
        return -1;
    del_slot_t *s = del_find(m, k, len, cdc_hash_bytes(k, len, 0));
    return s->len != 0 ? s->seq : -1;
}

static bool del_add_group(del_map_t *m, const int32_t *ids, size_t n)
{
    for (size_t g = 0; g < m->ngroups; g++)
        if (m->nids[g] == n && memcmp(m->ids[g], ids, n * sizeof(*ids)) == 0)
            return true;
    if (cdc_array_resize(m->ids, m->ngroups + 1) != CDC_OK ||
        cdc_array_resize(m->nids, m->ngroups + 1) != CDC_OK)
        return false;
    if ((m->ids[m->ngroups] = malloc(n * sizeof(*ids) + 1)) == NULL)
        return false;
    memcpy(m->ids[m->ngroups], ids, n * sizeof(*ids));
    m->nids[m->ngroups++] = n;
    return true;
}

static void del_free(del_map_t *m)
{
    free(m->slots);
    cdc_buf_free(&m->arena);
    for (size_t g = 0; g < m->ngroups; g++)
        free(m->ids[g]);
    free(m->ids);
    free(m->nids);
}

/* ---- reading a file -------------------------------------------------------------------- */

typedef struct opened {
    uint8_t *buf;
    cdc_pq_reader_t *r;
    const cdc_ice_schema_t *schema;
    int64_t rows;
} opened_t;

static cdc_err_t open_file(cdc_ice_table_t *t, const cdc_ice_data_file_t *f, opened_t *o,
                           cdc_error_t *e)
{
    size_t len;
    memset(o, 0, sizeof(*o));
    cdc_err_t rc = cdc_storage_get(t->storage, f->path, &o->buf, &len, e);
    if (rc == CDC_OK)
        rc = cdc_pq_reader_open(o->buf, len, &o->r, e);
    if (rc != CDC_OK) {
        free(o->buf);
        o->buf = NULL;
        cdc_error_prefix(e, "rewrite: reading \"%s\"", f->path);
        return rc;
    }
    o->schema = cdc_pq_reader_schema(o->r);
    o->rows = cdc_pq_reader_rows(o->r);
    return CDC_OK;
}

static void close_file(opened_t *o)
{
    cdc_pq_reader_free(o->r);
    free(o->buf);
    memset(o, 0, sizeof(*o));
}

/* The column of field id in the opened file (its values and type), or none (NULL). */
static cdc_err_t column_of(opened_t *o, int32_t id, const cdc_ice_value_t **vals,
                           const cdc_ice_field_t **field, cdc_error_t *e)
{
    int i = cdc_ice_schema_find(o->schema, id);
    *vals = NULL;
    *field = NULL;
    if (i < 0)
        return CDC_OK;
    *field = &o->schema->fields[i];
    return cdc_pq_reader_column(o->r, (size_t)i, vals, e);
}

/* ---- writing --------------------------------------------------------------------------- */

/* Output files of one partition (spec and values of the first input file of it): data, or
 * the merged equality deletes of one list of equality ids (keep_deletes). */
typedef struct out_group {
    const cdc_ice_data_file_t *like; /* an input file of the partition (borrowed) */
    bool deletes;
    cdc_ice_schema_t schema; /* deletes: the schema of the first delete file (copied) */
    cdc_pq_writer_t *w;
} out_group_t;

typedef struct rewrite_ctx {
    cdc_ice_table_t *t;
    const cdc_ice_rewrite_options_t *o;
    const cdc_ice_schema_t *schema; /* current */
    cdc_pq_options_t pq;
    int64_t target;
    out_group_t *groups;
    size_t ngroups;
    cdc_ice_data_file_t *out;
    size_t nout, capout;
    cdc_ice_rewrite_stats_t *st;
} rewrite_ctx_t;

static bool same_group(const out_group_t *g, const cdc_ice_data_file_t *f, bool deletes)
{
    if (g->deletes != deletes || !cdc_ice_file_same_partition(g->like, f))
        return false;
    return !deletes || (g->like->nequality_ids == f->nequality_ids &&
                        memcmp(g->like->equality_ids, f->equality_ids,
                               f->nequality_ids * sizeof(int32_t)) == 0);
}

/* The output group of file f (an input data file, or a delete file whose keys are kept);
 * schema: a delete group's columns (its first file's). */
static out_group_t *group_of(rewrite_ctx_t *cx, const cdc_ice_data_file_t *f, bool deletes,
                             const cdc_ice_schema_t *schema)
{
    for (size_t i = 0; i < cx->ngroups; i++)
        if (same_group(&cx->groups[i], f, deletes))
            return &cx->groups[i];
    out_group_t *g;
    if (cdc_array_resize(cx->groups, cx->ngroups + 1) != CDC_OK)
        return NULL;
    g = &cx->groups[cx->ngroups];
    memset(g, 0, sizeof(*g));
    g->like = f;
    g->deletes = deletes;
    if (deletes && (schema == NULL || cdc_ice_schema_copy(&g->schema, schema) != CDC_OK))
        return NULL;
    cx->ngroups++;
    return g;
}

static void groups_free(rewrite_ctx_t *cx)
{
    for (size_t i = 0; i < cx->ngroups; i++) {
        cdc_pq_writer_free(cx->groups[i].w);
        cdc_ice_schema_free(&cx->groups[i].schema);
    }
    free(cx->groups);
    cx->groups = NULL;
    cx->ngroups = 0;
}

/* Closes the group's open file and stores it as a new file of the rewrite. */
static cdc_err_t finish_file(rewrite_ctx_t *cx, out_group_t *g, cdc_error_t *e)
{
    cdc_ice_data_file_t df;
    uint8_t *data = NULL;
    size_t len = 0;
    char *loc = NULL;
    cdc_err_t rc;

    if (g->w == NULL)
        return CDC_OK;
    memset(&df, 0, sizeof(df));
    rc = cdc_pq_writer_close(g->w, &df, e);
    if (rc == CDC_OK)
        rc = cdc_pq_writer_take_buffer(g->w, &data, &len);
    cdc_pq_writer_free(g->w);
    g->w = NULL;
    if (rc == CDC_OK && cdc_array_reserve(cx->out, cx->capout, cx->nout + 1, 8) != CDC_OK)
        rc = oom(e);
    if (rc == CDC_OK)
        rc = cdc_ice_data_file_put(cx->t->storage, cx->t->location, cx->o->tag, data, len, &loc, e);
    free(data);
    if (rc != CDC_OK) {
        cdc_ice_data_file_clear(&df);
        return rc;
    }
    df.path = loc;
    df.content = g->deletes ? CDC_ICE_CONTENT_EQUALITY_DELETES : CDC_ICE_CONTENT_DATA;
    df.schema_id = g->deletes ? g->like->schema_id : cx->schema->schema_id;
    df.spec_id = g->like->spec_id;
    if (g->deletes) {
        cx->out[cx->nout++] = df; /* from here on freed with the outputs */
        if ((cx->out[cx->nout - 1].equality_ids =
                 malloc(g->like->nequality_ids * sizeof(int32_t))) == NULL)
            return oom(e);
        memcpy(cx->out[cx->nout - 1].equality_ids, g->like->equality_ids,
               g->like->nequality_ids * sizeof(int32_t));
        cx->out[cx->nout - 1].nequality_ids = g->like->nequality_ids;
        df = cx->out[--cx->nout];
        cx->st->deletes_written += df.record_count;
    }
    df.sort_order_id = 0;
    if (g->like->npartition > 0) {
        df.partition = calloc(g->like->npartition, sizeof(*df.partition));
        if (df.partition == NULL) {
            cx->out[cx->nout++] = df; /* freed with the outputs */
            return oom(e);
        }
        df.npartition = g->like->npartition;
        for (size_t i = 0; i < df.npartition; i++) {
            const cdc_ice_part_value_t *v = &g->like->partition[i];
            df.partition[i].null = v->null;
            if (!v->null && v->len > 0) {
                if ((df.partition[i].bytes = malloc(v->len)) == NULL) {
                    cx->out[cx->nout++] = df;
                    return oom(e);
                }
                memcpy(df.partition[i].bytes, v->bytes, v->len);
                df.partition[i].len = v->len;
            }
        }
    }
    cx->out[cx->nout++] = df;
    cx->st->files_written++;
    cx->st->bytes_written += df.file_size_in_bytes;
    cx->st->rows_written += df.record_count;
    return CDC_OK;
}

/* A value of `from` converted to the current field `to` (an Iceberg promotion). */
static cdc_ice_value_t promote(const cdc_ice_field_t *from, const cdc_ice_field_t *to,
                               cdc_ice_value_t v)
{
    if (v.is_null || from->type == to->type)
        return v;
    if (from->type == CDC_ICE_INT && to->type == CDC_ICE_LONG)
        v.v.i64 = v.v.i32;
    else if (from->type == CDC_ICE_FLOAT && to->type == CDC_ICE_DOUBLE)
        v.v.f64 = v.v.f32;
    return v;
}

/* Appends row `row` of an opened delete file to its merged-deletes group (the group's
 * columns by field id, promoted where the types differ). */
static cdc_err_t keep_delete(rewrite_ctx_t *cx, const cdc_ice_data_file_t *f, opened_t *of,
                             int64_t row, cdc_error_t *e)
{
    out_group_t *g = group_of(cx, f, true, of->schema);
    if (g == NULL)
        return oom(e);
    const cdc_ice_schema_t *s = &g->schema;
    cdc_ice_value_t vals[64];
    if (s->nfields > 64)
        return cdc_error_set(e, CDC_ERR_UNSUPPORTED, "rewrite: delete file \"%s\" has %zu columns",
                             f->path, s->nfields);
    for (size_t i = 0; i < s->nfields; i++) {
        const cdc_ice_value_t *col;
        const cdc_ice_field_t *from;
        cdc_err_t rc = column_of(of, s->fields[i].id, &col, &from, e);
        if (rc != CDC_OK)
            return rc;
        if (col == NULL && s->fields[i].required)
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "rewrite: delete file \"%s\" lacks column %d (\"%s\")", f->path,
                                 s->fields[i].id, s->fields[i].name);
        vals[i] = col ? promote(from, &s->fields[i], col[row]) : (cdc_ice_value_t){.is_null = true};
    }
    cdc_err_t rc = CDC_OK;
    if (g->w == NULL && (rc = cdc_pq_writer_open_buffer(s, &cx->pq, &g->w, e)) != CDC_OK)
        return rc;
    if ((rc = cdc_pq_writer_append(g->w, vals, e)) != CDC_OK)
        return rc;
    if ((int64_t)cdc_pq_writer_size(g->w) >= cx->target)
        rc = finish_file(cx, g, e);
    return rc;
}

static cdc_err_t load_deletes(rewrite_ctx_t *cx, const cdc_ice_live_file_t *dels, size_t n,
                              del_map_t *m, cdc_error_t *e)
{
    cdc_ice_table_t *t = cx->t;
    const cdc_ice_rewrite_options_t *o = cx->o;
    cdc_buf_t key = {0};
    cdc_err_t rc = CDC_OK;
    for (size_t i = 0; i < n && rc == CDC_OK; i++) {
        const cdc_ice_data_file_t *f = &dels[i].file;
        opened_t of;
        if (f->content != CDC_ICE_CONTENT_EQUALITY_DELETES)
            return cdc_error_set(e, CDC_ERR_UNSUPPORTED,
                                 "rewrite: \"%s\" is a position delete file", f->path);
        if (f->nequality_ids == 0 || f->nequality_ids > 64)
            return cdc_error_set(e, CDC_ERR_INVALID,
                                 "rewrite: delete file \"%s\" has %zu equality ids", f->path,
                                 f->nequality_ids);
        if ((rc = open_file(t, f, &of, e)) != CDC_OK)
            break;
        const cdc_ice_value_t *cols[64];
        const cdc_ice_field_t *types[64];
        for (size_t k = 0; k < f->nequality_ids && rc == CDC_OK; k++)
            rc = column_of(&of, f->equality_ids[k], &cols[k], &types[k], e);
        if (rc == CDC_OK && !del_add_group(m, f->equality_ids, f->nequality_ids))
            rc = oom(e);
        for (int64_t row = 0; row < of.rows && rc == CDC_OK; row++) {
            cdc_buf_reset(&key);
            key_ids(&key, f->equality_ids, f->nequality_ids);
            key_scope(&key, &t->md, f, false);
            for (size_t k = 0; k < f->nequality_ids; k++)
                key_value(&key, types[k] ? types[k]->type : CDC_ICE_STRING,
                          cols[k] ? &cols[k][row] : NULL);
            int added = key.oom ? -1 : del_put(m, key.data, key.len, dels[i].sequence_number);
            if (added < 0)
                rc = oom(e);
            else if (added > 0 && o->keep_deletes)
                rc = keep_delete(cx, f, &of, row, e);
        }
        cx->st->files_read++;
        cx->st->bytes_read += f->file_size_in_bytes;
        close_file(&of);
        if (rc == CDC_OK && o->progress && !o->progress(o->progress_arg, f->file_size_in_bytes))
            rc = cdc_error_set(e, CDC_ERR_CLOSED, "rewrite cancelled");
    }
    cdc_buf_free(&key);
    return rc;
}

/* The key columns of a data file for each equality-id group of the map. */
typedef struct probe {
    const cdc_ice_value_t **vals; /* [group][k] flattened: group g starts at first[g] */
    const cdc_ice_field_t **types;
    size_t *first;
} probe_t;

static cdc_err_t probe_init(probe_t *p, del_map_t *m, opened_t *of, cdc_error_t *e)
{
    size_t total = 0;
    memset(p, 0, sizeof(*p));
    for (size_t g = 0; g < m->ngroups; g++)
        total += m->nids[g];
    p->vals = calloc(total + 1, sizeof(*p->vals));
    p->types = calloc(total + 1, sizeof(*p->types));
    p->first = calloc(m->ngroups + 1, sizeof(*p->first));
    if (p->vals == NULL || p->types == NULL || p->first == NULL)
        return oom(e);
    total = 0;
    for (size_t g = 0; g < m->ngroups; g++) {
        p->first[g] = total;
        for (size_t k = 0; k < m->nids[g]; k++, total++) {
            cdc_err_t rc = column_of(of, m->ids[g][k], &p->vals[total], &p->types[total], e);
            if (rc != CDC_OK)
                return rc;
        }
    }
    return CDC_OK;
}

static void probe_free(probe_t *p)
{
    free(p->vals);
    free(p->types);
    free(p->first);
}

/* Whether row `row` of a data file (data sequence number seq) is deleted. */
static bool row_deleted(const cdc_ice_metadata_t *md, del_map_t *m, const probe_t *p,
                        const cdc_ice_data_file_t *f, int64_t seq, int64_t row, cdc_buf_t *key)
{
    for (size_t g = 0; g < m->ngroups; g++) {
        const cdc_ice_value_t **vals = p->vals + p->first[g];
        const cdc_ice_field_t **types = p->types + p->first[g];
        for (int wide = 0; wide < 2; wide++) {
            cdc_buf_reset(key);
            key_ids(key, m->ids[g], m->nids[g]);
            key_scope(key, md, f, wide == 0);
            for (size_t k = 0; k < m->nids[g]; k++)
                key_value(key, types[k] ? types[k]->type : CDC_ICE_STRING,
                          vals[k] ? &vals[k][row] : NULL);
            if (del_get(m, key->data, key->len) > seq)
                return true;
        }
    }
    return false;
}

static cdc_err_t rewrite_data_file(rewrite_ctx_t *cx, del_map_t *m, const cdc_ice_live_file_t *lf,
                                   cdc_error_t *e)
{
    const cdc_ice_data_file_t *f = &lf->file;
    const cdc_ice_schema_t *s = cx->schema;
    opened_t of;
    cdc_buf_t key = {0};
    cdc_err_t rc = open_file(cx->t, f, &of, e);
    if (rc != CDC_OK)
        return rc;
    const cdc_ice_value_t **cols = calloc(s->nfields + 1, sizeof(*cols));
    const cdc_ice_field_t **from = calloc(s->nfields + 1, sizeof(*from));
    cdc_ice_value_t *row = calloc(s->nfields + 1, sizeof(*row));
    out_group_t *g = group_of(cx, f, false, NULL);
    if (cols == NULL || from == NULL || row == NULL || g == NULL)
        rc = oom(e);
    for (size_t i = 0; i < s->nfields && rc == CDC_OK; i++) {
        rc = column_of(&of, s->fields[i].id, &cols[i], &from[i], e);
        if (rc == CDC_OK && from[i] != NULL && from[i]->type != s->fields[i].type &&
            !cdc_ice_type_promotable(from[i], &s->fields[i]))
            rc = cdc_error_set(e, CDC_ERR_INVALID,
                               "rewrite: column %d (\"%s\") of \"%s\" does not read as the "
                               "table's current type",
                               s->fields[i].id, s->fields[i].name, f->path);
        if (rc == CDC_OK && from[i] == NULL && s->fields[i].required)
            rc = cdc_error_set(e, CDC_ERR_INVALID,
                               "rewrite: \"%s\" lacks required column %d (\"%s\")", f->path,
                               s->fields[i].id, s->fields[i].name);
    }
    probe_t pr = {0};
    if (rc == CDC_OK)
        rc = probe_init(&pr, m, &of, e);
    for (int64_t r = 0; r < of.rows && rc == CDC_OK; r++) {
        cx->st->rows_read++;
        bool deleted = m->n > 0 && row_deleted(&cx->t->md, m, &pr, f, lf->sequence_number, r, &key);
        if (key.oom) {
            rc = oom(e);
            break;
        }
        if (deleted) {
            cx->st->rows_deleted++;
            continue;
        }
        for (size_t i = 0; i < s->nfields; i++)
            row[i] = cols[i] ? promote(from[i], &s->fields[i], cols[i][r])
                             : (cdc_ice_value_t){.is_null = true};
        if (g->w == NULL && (rc = cdc_pq_writer_open_buffer(s, &cx->pq, &g->w, e)) != CDC_OK)
            break;
        if ((rc = cdc_pq_writer_append(g->w, row, e)) != CDC_OK)
            break;
        if ((int64_t)cdc_pq_writer_size(g->w) >= cx->target)
            rc = finish_file(cx, g, e);
    }
    cx->st->files_read++;
    cx->st->bytes_read += f->file_size_in_bytes;
    probe_free(&pr);
    free(cols);
    free(from);
    free(row);
    cdc_buf_free(&key);
    close_file(&of);
    if (rc == CDC_OK && cx->o->progress &&
        !cx->o->progress(cx->o->progress_arg, f->file_size_in_bytes))
        rc = cdc_error_set(e, CDC_ERR_CLOSED, "rewrite cancelled");
    return rc;
}

static int cmp_seq(const void *a, const void *b)
{
    const cdc_ice_live_file_t *x = *(cdc_ice_live_file_t *const *)a;
    const cdc_ice_live_file_t *y = *(cdc_ice_live_file_t *const *)b;
    if (x->sequence_number != y->sequence_number)
        return x->sequence_number < y->sequence_number ? -1 : 1;
    return strcmp(x->file.path, y->file.path);
}

void cdc_ice_data_files_free(cdc_ice_data_file_t *files, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cdc_ice_data_file_clear(&files[i]);
    free(files);
}

void cdc_ice_rewrite_discard(cdc_ice_table_t *t, cdc_ice_data_file_t *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cdc_error_t de;
        if (files[i].path != NULL)
            (void)cdc_storage_delete(t->storage, files[i].path, &de);
        cdc_ice_data_file_clear(&files[i]);
    }
    free(files);
}

cdc_err_t cdc_ice_table_rewrite(cdc_ice_table_t *t, const cdc_ice_live_file_t *data, size_t ndata,
                                const cdc_ice_live_file_t *deletes, size_t ndeletes,
                                const cdc_ice_rewrite_options_t *o, cdc_ice_data_file_t **out,
                                size_t *nout, cdc_ice_rewrite_stats_t *st, cdc_error_t *e)
{
    del_map_t m;
    rewrite_ctx_t cx;
    const cdc_ice_live_file_t **order = NULL;
    cdc_err_t rc = CDC_OK;

    *out = NULL;
    *nout = 0;
    memset(st, 0, sizeof(*st));
    memset(&m, 0, sizeof(m));
    memset(&cx, 0, sizeof(cx));
    cx.t = t;
    cx.o = o;
    cx.st = st;
    cx.schema = cdc_ice_metadata_current_schema(&t->md);
    cx.target = o->target_file_bytes > 0 ? o->target_file_bytes : CDC_ICE_REWRITE_TARGET_DEFAULT;
    if (o->parquet)
        cx.pq = *o->parquet;
    else
        cdc_pq_options_init(&cx.pq);
    if (cx.schema == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table \"%s\" has no current schema", t->location);
    for (size_t i = 0; i < ndata; i++)
        if (data[i].file.content != CDC_ICE_CONTENT_DATA)
            return cdc_error_set(e, CDC_ERR_INVALID, "rewrite: \"%s\" is not a data file",
                                 data[i].file.path);
    /* oldest first: a bin-packed changelog keeps its files' order */
    if ((order = calloc(ndata + 1, sizeof(*order))) == NULL)
        return oom(e);
    for (size_t i = 0; i < ndata; i++)
        order[i] = &data[i];
    qsort(order, ndata, sizeof(*order), cmp_seq);

    rc = load_deletes(&cx, deletes, ndeletes, &m, e);
    for (size_t i = 0; i < ndata && rc == CDC_OK; i++)
        rc = rewrite_data_file(&cx, &m, order[i], e);
    for (size_t i = 0; i < cx.ngroups && rc == CDC_OK; i++)
        rc = finish_file(&cx, &cx.groups[i], e);
    groups_free(&cx);
    free(order);
    del_free(&m);
    if (rc != CDC_OK) {
        cdc_ice_rewrite_discard(t, cx.out, cx.nout);
        return rc;
    }
    *out = cx.out;
    *nout = cx.nout;
    return CDC_OK;
}
