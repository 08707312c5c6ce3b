/*
 * Per-epoch collapse and buffering (see stage.h). Collapse keeps one entry per
 * entity in first-change order behind an open-addressing index; the changelog is a
 * plain append-only array. The second half writes the epoch's files: one encoder (an
 * in-memory Parquet writer) per table and kind, filled ahead while the epoch runs
 * (stage_encode_ahead) and finished at the barrier (write_kind).
 */
#include "worker/stage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/iceberg/parquet.h"

/* One table's file of one kind being encoded into memory (see stage.h). */
typedef struct cdc_stage_enc {
    const cdc_source_schema_t *src; /* the source schema the file is written with */
    cdc_stage_kind_t kind;
    int codec;
    cdc_ice_schema_t schema;
    int *colmap; /* per field: its column index in src, -1 for changelog metadata */
    cdc_ice_value_t *cells;
    cdc_pq_writer_t *w; /* buffer writer */
    size_t done;        /* changelog rows / entries [0, done) appended */
    size_t bytes;       /* counted in the stage's bytes */
} cdc_stage_enc_t;
static void enc_drop(cdc_stage_t *s, cdc_stage_enc_t **slot);
static void enc_free(cdc_stage_enc_t *en);
static void stage_encode_ahead(cdc_stage_t *s, cdc_stage_table_t *t);

void cdc_stage_init(cdc_stage_t *s, uint32_t partition, uint64_t epoch)
{
    memset(s, 0, sizeof(*s));
    s->partition = partition;
    s->epoch = epoch;
}

static void entry_clear(cdc_stage_entry_t *en)
{
    free(en->entity);
    free(en->part);
    free(en->old_part);
}

static void table_free(cdc_stage_table_t *t)
{
    enc_free(t->enc_cl);
    enc_free(t->enc_data);
    for (size_t i = 0; i < t->nentries; i++)
        entry_clear(&t->entries[i]);
    for (size_t i = 0; i < t->nchangelog; i++) {
        cdc_row_clear(&t->changelog[i].row);
        free(t->changelog[i].part);
    }
    free(t->entries);
    free(t->slots);
    free(t->changelog);
    cdc_ice_sort_order_free(&t->orders[0]);
    cdc_ice_sort_order_free(&t->orders[1]);
    free(t->ns);
    free(t->table);
}

void cdc_stage_set_encoding(cdc_stage_t *s, int codec, size_t rows)
{
    s->enc_codec = codec;
    s->enc_rows = rows;
}

void cdc_stage_reset(cdc_stage_t *s, uint64_t epoch)
{
    for (size_t i = 0; i < s->ntables; i++)
        table_free(&s->tables[i]);
    free(s->tables);
    s->tables = NULL;
    s->ntables = 0;
    s->bytes = 0;
    s->changes = 0;
    s->epoch = epoch;
}

void cdc_stage_free(cdc_stage_t *s)
{
    cdc_stage_reset(s, s->epoch);
}

static cdc_stage_table_t *table_for(cdc_stage_t *s, const cdc_source_schema_t *schema)
{
    cdc_stage_table_t *t;
    for (size_t i = 0; i < s->ntables; i++)
        if (strcmp(s->tables[i].ns, schema->ns) == 0 &&
            strcmp(s->tables[i].table, schema->table) == 0)
            return &s->tables[i];
    t = realloc(s->tables, (s->ntables + 1) * sizeof(*t));
    if (t == NULL)
        return NULL;
    s->tables = t;
    t = &s->tables[s->ntables];
    memset(t, 0, sizeof(*t));
    t->ns = strdup(schema->ns);
    t->table = strdup(schema->table);
    if (t->ns == NULL || t->table == NULL) {
        free(t->ns);
        free(t->table);
        return NULL;
    }
    s->ntables++;
    return t;
}

static uint64_t hash(const uint8_t *p, size_t n)
{
    return cdc_hash_bytes(p, n, 0);
}

static bool rehash(cdc_stage_table_t *t)
{
    size_t n = t->nslots ? t->nslots * 2 : 64;
    size_t *slots = calloc(n, sizeof(size_t));
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < t->nentries; i++) {
        size_t j = t->entries[i].hash & (n - 1);
        while (slots[j] != 0)
            j = (j + 1) & (n - 1);
        slots[j] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return true;
}

/* Finds the entry of an entity, or the empty slot where it belongs (*slot). */
static cdc_stage_entry_t *lookup(cdc_stage_table_t *t, const uint8_t *ent, size_t len, uint32_t h,
                                 size_t *slot)
{
    size_t j = h & (t->nslots - 1);
    while (t->slots[j] != 0) {
        cdc_stage_entry_t *en = &t->entries[t->slots[j] - 1];
        if (en->hash == h && en->entity_len == len && memcmp(en->entity, ent, len) == 0)
            return en;
        j = (j + 1) & (t->nslots - 1);
    }
    *slot = j;
    return NULL;
}

static size_t row_bytes(const cdc_row_t *r)
{
    size_t n = sizeof(cdc_row_t);
    if (r->vals == NULL)
        return n;
    n += r->schema->ncols * sizeof(cdc_val_t);
    for (size_t i = 0; i < r->schema->ncols; i++)
        n += r->vals[i].len;
    return n;
}

static bool changelog_reserve(cdc_stage_table_t *t)
{
    if (t->nchangelog == t->clcap) {
        size_t cap = t->clcap ? t->clcap * 2 : 64;
        cdc_changelog_row_t *n = realloc(t->changelog, cap * sizeof(*n));
        if (n == NULL)
            return false;
        t->changelog = n;
        t->clcap = cap;
    }
    return true;
}

static size_t row_bytes(const cdc_row_t *r);

/* Appends c's changelog row without values (room made by changelog_reserve). */
static cdc_changelog_row_t *changelog_push(cdc_stage_t *s, cdc_stage_table_t *t,
                                           const cdc_change_t *c)
{
    cdc_changelog_row_t *cl = &t->changelog[t->nchangelog++];
    memset(cl, 0, sizeof(*cl));
    cl->op = (char)c->op;
    cl->lsn = c->lsn;
    cl->commit_lsn = c->commit_lsn;
    cl->tx_id = c->tx_id;
    cl->source_ts_us = c->source_ts_us;
    cl->partition = c->partition;
    cl->offset = c->offset;
    s->bytes += sizeof(*cl);
    return cl;
}

/* Truncate: see cdc_stage_add in stage.h. */
static cdc_err_t stage_truncate(cdc_stage_t *s, const cdc_change_t *c, cdc_error_t *e)
{
    cdc_stage_table_t *t = table_for(s, c->schema);
    if (t == NULL || !changelog_reserve(t))
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory staging partition %u epoch %llu",
                             s->partition, (unsigned long long)s->epoch);
    t->schema = c->schema;
    enc_drop(s, &t->enc_data); /* its entries go */
    for (size_t i = 0; i < t->nentries; i++) {
        s->bytes -= sizeof(t->entries[i]) + t->entries[i].entity_len;
        entry_clear(&t->entries[i]);
    }
    t->nentries = 0;
    if (t->slots != NULL)
        memset(t->slots, 0, t->nslots * sizeof(*t->slots));
    t->truncated = true;
    if (c->floor) { /* reported to every other slot (TableFloor, docs/protocol.md) */
        t->floor = true;
        t->floor_commit_lsn = c->commit_lsn;
        t->floor_lsn = c->lsn;
    }
    /* (a backfill's truncate, before the rows of a resync, is the mirror's alone; a
     * floor is in one partition only) */
    if ((c->partition == 0 || c->floor) && !c->backfill)
        changelog_push(s, t, c)->row.schema = c->schema; /* no values: every column null */
    s->changes++;
    if (s->enc_rows > 0)
        stage_encode_ahead(s, t);
    return CDC_OK;
}

/* Copies a partition key into *dst (freeing the old one); false when out of memory. */
static bool set_key(uint8_t **dst, size_t *dst_len, const uint8_t *key, size_t len)
{
    uint8_t *k = NULL;
    if (key != NULL && (k = malloc(len ? len : 1)) == NULL)
        return false;
    if (key != NULL)
        memcpy(k, key, len);
    free(*dst);
    *dst = k;
    *dst_len = key ? len : 0;
    return true;
}

/* A table's first partitioned row: its files are written per partition at the barrier. */
static void set_partitioned(cdc_stage_t *s, cdc_stage_table_t *t)
{
    if (t->partitioned)
        return;
    t->partitioned = true;
    enc_drop(s, &t->enc_cl);
    enc_drop(s, &t->enc_data);
}

/* Takes a table's latest sort order of kind k (0 mirror, 1 changelog); a sorted table
 * is written at the barrier. False when out of memory. */
static bool set_order(cdc_stage_t *s, cdc_stage_table_t *t, int k, const cdc_ice_sort_order_t *o)
{
    int32_t id = o != NULL ? o->order_id : 0;
    if (t->orders[k].order_id == id)
        return true;
    cdc_ice_sort_order_free(&t->orders[k]);
    memset(&t->orders[k], 0, sizeof(t->orders[k]));
    if (o != NULL && cdc_ice_sort_order_copy(&t->orders[k], o) != CDC_OK)
        return false;
    if (o != NULL)
        set_partitioned(s, t);
    return true;
}

cdc_err_t cdc_stage_add(cdc_stage_t *s, cdc_change_t *c, bool live_before,
                        const cdc_stage_parts_t *parts, cdc_error_t *e)
{
    if (c->op == CDC_OP_TRUNCATE)
        return stage_truncate(s, c, e);
    cdc_stage_table_t *t = table_for(s, c->schema);
    cdc_stage_entry_t *en;
    cdc_changelog_row_t *cl;
    cdc_row_t *img = c->op == CDC_OP_DELETE ? &c->before : &c->after;
    size_t slot = 0;
    uint32_t h;

    if (t == NULL)
        goto nomem;
    t->schema = c->schema;
    if (t->nslots == 0 || (t->nentries + 1) * 2 > t->nslots)
        if (!rehash(t))
            goto nomem;
    if (!changelog_reserve(t))
        goto nomem;

    if (c->changelog_only && c->backfill)
        return CDC_OK;       /* a re-read row from before a floor: nothing, in either table */
    if (c->changelog_only) { /* a change from before a floor: the changelog's alone */
        if (parts != NULL && !set_order(s, t, 1, parts->changelog_order))
            goto nomem;
    } else {
        h = (uint32_t)hash(c->entity, c->entity_len);
        en = lookup(t, c->entity, c->entity_len, h, &slot);
        if (en == NULL) {
            if (t->nentries == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 64;
                cdc_stage_entry_t *n = realloc(t->entries, cap * sizeof(*n));
                if (n == NULL)
                    goto nomem;
                t->entries = n;
                t->cap = cap;
            }
            en = &t->entries[t->nentries];
            memset(en, 0, sizeof(*en));
            en->entity = malloc(c->entity_len);
            if (en->entity == NULL)
                goto nomem;
            memcpy(en->entity, c->entity, c->entity_len);
            en->entity_len = c->entity_len;
            en->hash = h;
            en->needs_delete = live_before;
            if (live_before && parts != NULL &&
                !set_key(&en->old_part, &en->old_part_len, parts->old, parts->old_len)) {
                free(en->entity);
                goto nomem;
            }
            t->slots[slot] = ++t->nentries;
            s->bytes += sizeof(*en) + c->entity_len;
        } else if (t->enc_data != NULL && (size_t)(en - t->entries) < t->enc_data->done) {
            /* an entry already encoded ahead changed: the mirror file is encoded whole */
            enc_drop(s, &t->enc_data);
            t->enc_data_off = true;
        }
        en->deleted = c->op == CDC_OP_DELETE;
        if (parts != NULL && !set_key(&en->part, &en->part_len, parts->mirror, parts->mirror_len))
            goto nomem;
        if (en->part != NULL || en->old_part != NULL)
            set_partitioned(s, t);
        if (parts != NULL && (!set_order(s, t, 0, parts->mirror_order) ||
                              !set_order(s, t, 1, parts->changelog_order)))
            goto nomem;
        en->last = t->nchangelog; /* the row changelog_push appends next */
    }
    cl = changelog_push(s, t, c);
    cl->mirror_only = c->backfill;
    t->nmirror_only += c->backfill;
    cl->row = *img; /* moved */
    img->vals = NULL;
    if (parts != NULL && parts->changelog != NULL && !c->backfill) {
        cdc_err_t rc =
            cdc_stage_part_key(parts->changelog, &cl->row, cl, &cl->part, &cl->part_len, e);
        if (rc == CDC_ERR_NOMEM)
            return rc;    /* (the row stays staged, unpartitioned; the epoch fails) */
        if (rc != CDC_OK) /* a value the spec cannot take: spec 0 is as correct */
            cdc_log_warn("partition %u: %s; the changelog row is written unpartitioned",
                         s->partition, e->msg);
        set_partitioned(s, t);
    }
    s->bytes += row_bytes(&cl->row);
    t->row_bytes += row_bytes(&cl->row);
    s->changes++;
    if (s->enc_rows > 0)
        stage_encode_ahead(s, t);
    return CDC_OK;
nomem:
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory staging partition %u epoch %llu",
                         s->partition, (unsigned long long)s->epoch);
}

void cdc_stage_table_counts(const cdc_stage_table_t *t, size_t *data_rows, size_t *deletes)
{
    *data_rows = 0;
    *deletes = 0;
    for (size_t i = 0; i < t->nentries; i++) {
        *data_rows += !t->entries[i].deleted;
        *deletes += t->entries[i].needs_delete;
    }
}

/* ---- writing ---------------------------------------------------------------------- */

#include <stdio.h>

#include "common/iceberg/parquet.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table.h"

/* The changelog's metadata columns, in schema order. */
static const struct {
    int32_t id;
    const char *name;
    cdc_ice_type_t type;
    bool required;
} cl_cols[] = {
    {CDC_CL_FIELD_OP, "_op", CDC_ICE_STRING, true},
    {CDC_CL_FIELD_LSN, "_lsn", CDC_ICE_LONG, true},
    {CDC_CL_FIELD_COMMIT_LSN, "_commit_lsn", CDC_ICE_LONG, true},
    {CDC_CL_FIELD_TX_ID, "_tx_id", CDC_ICE_LONG, false},
    {CDC_CL_FIELD_SOURCE_TS, "_source_ts", CDC_ICE_TIMESTAMPTZ, false},
    {CDC_CL_FIELD_KAFKA_PARTITION, "_kafka_partition", CDC_ICE_INT, true},
    {CDC_CL_FIELD_KAFKA_OFFSET, "_kafka_offset", CDC_ICE_LONG, true},
};
#define CL_NCOLS (sizeof(cl_cols) / sizeof(cl_cols[0]))

static bool add_field(cdc_ice_schema_t *o, int32_t id, const char *name, cdc_ice_type_t type,
                      int32_t precision, int32_t scale, bool required)
{
    cdc_ice_field_t *f = &o->fields[o->nfields];
    memset(f, 0, sizeof(*f));
    f->id = id;
    f->name = strdup(name);
    f->type = type;
    f->precision = precision;
    f->scale = scale;
    f->required = required;
    if (f->name == NULL)
        return false;
    o->nfields++;
    return true;
}

cdc_err_t cdc_stage_ice_schema(const cdc_source_schema_t *s, cdc_stage_kind_t kind,
                               cdc_ice_schema_t *out, cdc_error_t *e)
{
    bool ok = true;
    memset(out, 0, sizeof(*out));
    out->schema_id = s->schema_id;
    out->fields = calloc(s->ncols + s->nretired + 8, sizeof(cdc_ice_field_t));
    out->identifier_ids = calloc(s->nkey ? s->nkey : 1, sizeof(int32_t));
    if (out->fields == NULL || out->identifier_ids == NULL)
        goto nomem;
    for (size_t i = 0; i < s->ncols && ok; i++) {
        const cdc_column_t *c = &s->cols[i];
        if (kind == CDC_STAGE_MIRROR_DELETES && !c->key)
            continue;
        /* Changelog deletes carry only the old key: other columns must be optional. */
        bool required = c->key && kind != CDC_STAGE_CHANGELOG;
        ok = add_field(out, c->field_id, cdc_column_field_name(c), c->type, c->precision, c->scale,
                       required);
        if (c->key && kind != CDC_STAGE_CHANGELOG)
            out->identifier_ids[out->nidentifier++] = c->field_id;
    }
    /* earlier types of live columns: rows of older versions still carry them */
    for (size_t i = 0; i < s->nretired && ok && kind != CDC_STAGE_MIRROR_DELETES; i++) {
        const cdc_column_t *c = &s->retired[i];
        ok = add_field(out, c->field_id, c->name, c->type, c->precision, c->scale, false);
    }
    for (size_t i = 0; kind == CDC_STAGE_CHANGELOG && i < CL_NCOLS && ok; i++)
        ok = add_field(out, cl_cols[i].id, cl_cols[i].name, cl_cols[i].type, 0, 0,
                       cl_cols[i].required);
    if (ok)
        return CDC_OK;
nomem:
    cdc_ice_schema_free(out);
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
}

void cdc_stage_files_free(cdc_stage_file_t *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(files[i].table);
        free(files[i].schema_json);
        cdc_ice_data_file_clear(&files[i].df);
    }
    free(files);
}

/* Converts a staged value into the writer's cell for a field. */
static void to_cell(const cdc_ice_field_t *f, const cdc_val_t *v, cdc_ice_value_t *cell)
{
    memset(cell, 0, sizeof(*cell));
    if (v == NULL || v->kind != CDC_VAL_SET) {
        cell->is_null = true;
        return;
    }
    switch (f->type) {
    case CDC_ICE_BOOLEAN:
        cell->v.b = v->u.b;
        break;
    case CDC_ICE_INT:
    case CDC_ICE_DATE:
        cell->v.i32 = (int32_t)v->u.i;
        break;
    case CDC_ICE_FLOAT:
        cell->v.f32 = (float)v->u.d;
        break;
    case CDC_ICE_DOUBLE:
        cell->v.f64 = v->u.d;
        break;
    case CDC_ICE_DECIMAL:
        cell->v.dec = v->u.dec;
        break;
    case CDC_ICE_STRING:
    case CDC_ICE_BINARY:
        cell->v.bytes.ptr = v->bytes;
        cell->v.bytes.len = v->len;
        break;
    case CDC_ICE_UUID:
        if (v->len == 16)
            memcpy(cell->v.uuid, v->bytes, 16);
        else
            cell->is_null = true;
        break;
    default: /* LONG, TIME, TIMESTAMP, TIMESTAMPTZ */
        cell->v.i64 = v->u.i;
        break;
    }
}

/* Value of field id in a row (rows may use an older schema version), or NULL. */
static const cdc_val_t *row_field(const cdc_row_t *r, int32_t id)
{
    if (r->vals == NULL)
        return NULL; /* a truncate's changelog row */
    for (size_t i = 0; i < r->schema->ncols; i++)
        if (r->schema->cols[i].field_id == id)
            return &r->vals[i];
    return NULL;
}

/* ---- encoders: one in-memory Parquet file of one kind for one table ------------------ */

static void enc_free(cdc_stage_enc_t *en)
{
    if (en == NULL)
        return;
    cdc_pq_writer_free(en->w);
    cdc_ice_schema_free(&en->schema);
    free(en->colmap);
    free(en->cells);
    free(en);
}

static cdc_err_t enc_open(const cdc_source_schema_t *src, cdc_stage_kind_t kind, int codec,
                          cdc_stage_enc_t **out, cdc_error_t *e)
{
    cdc_stage_enc_t *en = calloc(1, sizeof(*en));
    cdc_pq_options_t po;
    cdc_err_t rc;

    if (en == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    en->src = src;
    en->kind = kind;
    en->codec = codec;
    rc = cdc_stage_ice_schema(src, kind, &en->schema, e);
    if (rc != CDC_OK) {
        free(en);
        return rc;
    }
    size_t nf = en->schema.nfields ? en->schema.nfields : 1;
    en->colmap = malloc(nf * sizeof(int));
    en->cells = calloc(nf, sizeof(cdc_ice_value_t));
    if (en->colmap == NULL || en->cells == NULL) {
        enc_free(en);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t f = 0; f < en->schema.nfields; f++) {
        en->colmap[f] = -1;
        for (size_t c = 0; c < src->ncols; c++)
            if (src->cols[c].field_id == en->schema.fields[f].id) {
                en->colmap[f] = (int)c;
                break;
            }
    }
    cdc_pq_options_init(&po);
    po.codec = (cdc_pq_codec_t)codec;
    rc = cdc_pq_writer_open_buffer(&en->schema, &po, &en->w, e);
    if (rc != CDC_OK) {
        enc_free(en);
        return rc;
    }
    *out = en;
    return CDC_OK;
}

/* The cell of a changelog metadata column (field id >= CDC_CL_FIELD_OP) of row cl. */
static void cl_cell(const cdc_changelog_row_t *cl, int32_t id, cdc_ice_value_t *cell)
{
    memset(cell, 0, sizeof(*cell));
    switch (id) {
    case CDC_CL_FIELD_OP:
        cell->v.bytes.ptr = (const uint8_t *)(cl->op == 'c'   ? "c"
                                              : cl->op == 'u' ? "u"
                                              : cl->op == 'd' ? "d"
                                              : cl->op == 't' ? "t"
                                                              : "r");
        cell->v.bytes.len = 1;
        break;
    case CDC_CL_FIELD_LSN:
        cell->v.i64 = (int64_t)cl->lsn;
        break;
    case CDC_CL_FIELD_COMMIT_LSN:
        cell->v.i64 = (int64_t)cl->commit_lsn;
        break;
    case CDC_CL_FIELD_TX_ID:
        cell->is_null = cl->tx_id < 0;
        cell->v.i64 = cl->tx_id;
        break;
    case CDC_CL_FIELD_SOURCE_TS:
        cell->is_null = cl->source_ts_us <= 0;
        cell->v.i64 = cl->source_ts_us;
        break;
    case CDC_CL_FIELD_KAFKA_PARTITION:
        cell->v.i32 = cl->partition;
        break;
    default:
        cell->v.i64 = cl->offset;
        break;
    }
}

/* ---- partition keys: [spec id u32][n u16] then per value [set u8][len u32][bytes] ---- */

static void put_u32le(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The source value of partition field source id `id` as a field and its single-value
 * encoding in *in (bytes malloc'ed; null when the row lacks it). */
static bool part_source(const cdc_row_t *r, const cdc_changelog_row_t *cl, int32_t id,
                        cdc_ice_field_t *f, cdc_ice_part_value_t *in)
{
    cdc_ice_value_t cell;
    size_t cap;
    memset(f, 0, sizeof(*f));
    memset(in, 0, sizeof(*in));
    in->null = true;
    if (cl != NULL && id >= CDC_CL_FIELD_OP) {
        for (size_t i = 0; i < CL_NCOLS; i++)
            if (cl_cols[i].id == id)
                f->type = cl_cols[i].type;
        f->id = id;
        cl_cell(cl, id, &cell);
    } else {
        const cdc_val_t *v = row_field(r, id);
        const cdc_column_t *col = NULL;
        for (size_t i = 0; r->vals != NULL && i < r->schema->ncols; i++)
            if (r->schema->cols[i].field_id == id)
                col = &r->schema->cols[i];
        if (col == NULL)
            return true; /* not in this row's schema: null */
        f->id = id;
        f->type = col->type;
        f->precision = col->precision;
        f->scale = col->scale;
        to_cell(f, v, &cell);
    }
    if (cell.is_null)
        return true;
    cap = f->type == CDC_ICE_STRING || f->type == CDC_ICE_BINARY ? cell.v.bytes.len + 1 : 16;
    if ((in->bytes = malloc(cap)) == NULL)
        return false;
    in->null = !cdc_ice_bound_encode(f, &cell, in->bytes, cap, &in->len);
    return true;
}

cdc_err_t cdc_stage_part_key(const cdc_ice_partition_spec_t *spec, const cdc_row_t *r,
                             const cdc_changelog_row_t *cl, uint8_t **key, size_t *len,
                             cdc_error_t *e)
{
    size_t cap = 64, n = 6;
    uint8_t *k = malloc(cap);
    cdc_err_t rc = CDC_OK;

    *key = NULL;
    *len = 0;
    if (k == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    put_u32le(k, (uint32_t)spec->spec_id);
    k[4] = (uint8_t)spec->nfields;
    k[5] = (uint8_t)(spec->nfields >> 8);
    for (size_t i = 0; i < spec->nfields && rc == CDC_OK; i++) {
        const cdc_ice_partition_field_t *pf = &spec->fields[i];
        cdc_ice_field_t f;
        cdc_ice_part_value_t in, out = {true, NULL, 0};
        if (!part_source(r, cl, pf->source_id, &f, &in)) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            break;
        }
        if (!in.null && (rc = cdc_ice_transform_apply(pf->transform, &f, &in, &out)) != CDC_OK)
            cdc_error_set(e, rc,
                          "partition field \"%s\" of spec %d: cannot transform the "
                          "value of field %d",
                          pf->name, (int)spec->spec_id, (int)pf->source_id);
        free(in.bytes);
        if (rc == CDC_OK && n + 5 + out.len > cap) {
            uint8_t *g;
            cap = (n + 5 + out.len) * 2;
            if ((g = realloc(k, cap)) == NULL)
                rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            else
                k = g;
        }
        if (rc == CDC_OK) {
            k[n] = !out.null;
            put_u32le(k + n + 1, out.null ? 0 : (uint32_t)out.len);
            if (!out.null && out.len)
                memcpy(k + n + 5, out.bytes, out.len);
            n += 5 + (out.null ? 0 : out.len);
        }
        free(out.bytes);
    }
    if (rc != CDC_OK) {
        free(k);
        return rc;
    }
    *key = k;
    *len = n;
    return CDC_OK;
}

bool cdc_stage_part_key_decode(const uint8_t *key, size_t len, int32_t *spec_id,
                               cdc_ice_part_value_t **values, size_t *n)
{
    size_t nf, off = 6;
    cdc_ice_part_value_t *v;
    *values = NULL;
    *n = 0;
    *spec_id = 0;
    if (key == NULL)
        return true; /* spec 0 */
    if (len < 6)
        return false;
    nf = (size_t)key[4] | (size_t)key[5] << 8;
    if ((v = calloc(nf ? nf : 1, sizeof(*v))) == NULL)
        return false;
    for (size_t i = 0; i < nf; i++) {
        size_t l;
        if (off + 5 > len || off + 5 + (l = get_u32le(key + off + 1)) > len)
            goto bad;
        v[i].null = key[off] == 0;
        if (!v[i].null) {
            if ((v[i].bytes = malloc(l ? l : 1)) == NULL)
                goto bad;
            memcpy(v[i].bytes, key + off + 5, l);
            v[i].len = l;
        }
        off += 5 + l;
    }
    *spec_id = (int32_t)get_u32le(key);
    *values = v;
    *n = nf;
    return true;
bad:
    cdc_ice_part_values_free(v, nf);
    return false;
}

/* Fills en->cells for a changelog row (cl != NULL) or a mirror row r. */
static void enc_cells(cdc_stage_enc_t *en, const cdc_row_t *r, const cdc_changelog_row_t *cl)
{
    /* rows of the file's schema map by index; older versions by field id */
    bool direct = r->schema == en->src && r->vals != NULL;
    for (size_t f = 0; f < en->schema.nfields; f++) {
        const cdc_ice_field_t *fld = &en->schema.fields[f];
        cdc_ice_value_t *cell = &en->cells[f];
        if (cl != NULL && fld->id >= CDC_CL_FIELD_OP) {
            cl_cell(cl, fld->id, cell);
            continue;
        }
        const cdc_val_t *v =
            direct && en->colmap[f] >= 0 ? &r->vals[en->colmap[f]] : row_field(r, fld->id);
        to_cell(fld, v, cell);
    }
}

/* Whether entry en has a row in a file of kind (mirror data or deletes). */
static inline bool entry_in(const cdc_stage_entry_t *en, cdc_stage_kind_t kind)
{
    return kind == CDC_STAGE_MIRROR_DATA ? !en->deleted : en->needs_delete;
}

/* Appends changelog row / entry i of t when it belongs in en's kind of file. */
static cdc_err_t enc_row(cdc_stage_enc_t *en, const cdc_stage_table_t *t, size_t i, cdc_error_t *e)
{
    if (en->kind == CDC_STAGE_CHANGELOG) {
        if (t->changelog[i].mirror_only)
            return CDC_OK;
        enc_cells(en, &t->changelog[i].row, &t->changelog[i]);
    } else {
        const cdc_stage_entry_t *entry = &t->entries[i];
        if (!entry_in(entry, en->kind))
            return CDC_OK;
        enc_cells(en, cdc_stage_entry_row(t, entry), NULL);
    }
    return cdc_pq_writer_append(en->w, en->cells, e);
}

/* Appends changelog rows / entries [en->done, end) of t. */
static cdc_err_t enc_append(cdc_stage_enc_t *en, const cdc_stage_table_t *t, size_t end,
                            cdc_error_t *e)
{
    cdc_err_t rc = CDC_OK;
    for (size_t i = en->done; i < end && rc == CDC_OK; i++)
        rc = enc_row(en, t, i, e);
    if (rc == CDC_OK)
        en->done = end;
    return rc;
}

/* Drops a table's encoder of the changelog or the mirror data (NULL is fine). */
static void enc_drop(cdc_stage_t *s, cdc_stage_enc_t **slot)
{
    if (*slot == NULL)
        return;
    s->bytes -= (*slot)->bytes;
    enc_free(*slot);
    *slot = NULL;
}

/* Appends [done, end) as one row group (on failure: no more encoding ahead of this
 * kind this epoch; the barrier encodes the file whole and reports any error). */
static void enc_ahead(cdc_stage_t *s, cdc_stage_table_t *t, cdc_stage_enc_t **slot,
                      cdc_stage_kind_t kind, size_t end)
{
    cdc_error_t e;
    if (*slot == NULL && enc_open(t->schema, kind, s->enc_codec, slot, &e) != CDC_OK) {
        *slot = NULL;
        goto off;
    }
    cdc_stage_enc_t *en = *slot;
    if (enc_append(en, t, end, &e) != CDC_OK || cdc_pq_writer_flush(en->w, &e) != CDC_OK)
        goto off;
    size_t bytes = (size_t)cdc_pq_writer_size(en->w);
    s->bytes += bytes - en->bytes;
    en->bytes = bytes;
    return;
off:
    enc_drop(s, slot);
    if (kind == CDC_STAGE_MIRROR_DATA)
        t->enc_data_off = true;
    else
        s->enc_rows = 0; /* (a changelog row group that cannot be encoded now) */
}

/* After a change was added to t: encodes the row groups that are due. */
static void stage_encode_ahead(cdc_stage_t *s, cdc_stage_table_t *t)
{
    size_t n = s->enc_rows;
    if (t->partitioned)
        return; /* files per partition, at the barrier */
    /* wide rows: fewer per row group, so that the writer's buffers stay small */
    size_t avg = t->nchangelog ? t->row_bytes / t->nchangelog + 1 : 1;
    if (n > CDC_STAGE_ENCODE_BYTES / avg)
        n = CDC_STAGE_ENCODE_BYTES / avg > 64 ? CDC_STAGE_ENCODE_BYTES / avg : 64;
    if (t->enc_cl != NULL && t->enc_cl->src != t->schema)
        enc_drop(s, &t->enc_cl); /* schema changed: the file is written with the new one */
    while (s->enc_rows > 0 && t->nchangelog - (t->enc_cl ? t->enc_cl->done : 0) >= n)
        enc_ahead(s, t, &t->enc_cl, CDC_STAGE_CHANGELOG, (t->enc_cl ? t->enc_cl->done : 0) + n);
    if (t->enc_data_off || s->enc_rows == 0)
        return;
    if (t->enc_data != NULL && t->enc_data->src != t->schema)
        enc_drop(s, &t->enc_data);
    while (!t->enc_data_off && t->nentries - (t->enc_data ? t->enc_data->done : 0) >= n + n / 4)
        enc_ahead(s, t, &t->enc_data, CDC_STAGE_MIRROR_DATA,
                  (t->enc_data ? t->enc_data->done : 0) + n);
}

size_t cdc_stage_encoded(const cdc_stage_table_t *t, cdc_stage_kind_t kind,
                         const cdc_source_schema_t **schema)
{
    const cdc_stage_enc_t *en = kind == CDC_STAGE_CHANGELOG     ? t->enc_cl
                                : kind == CDC_STAGE_MIRROR_DATA ? t->enc_data
                                                                : NULL;
    if (schema != NULL)
        *schema = en ? en->src : NULL;
    return en ? en->done : 0;
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

/*
 * Finishes table t's file of a kind in memory (the rest of the rows and the footer,
 * after what was encoded ahead): *out describes it (path = its location), p holds its
 * bytes. *written = false when the kind has no rows.
 */
/* The rows of one partition of a kind: indices into changelog[] or entries[]. */
typedef struct group {
    const uint8_t *key; /* partition key (NULL = spec 0) */
    size_t key_len;
    const size_t *idx;
    size_t n;
    int32_t order_id; /* the rows are sorted by this order (0 = unsorted) */
} group_t;

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
            enc_free(en);
            en = NULL;
        }
    }
    if (g != NULL) {
        rows = g->n; /* (nothing is encoded ahead for a partitioned table) */
    } else if (kind == CDC_STAGE_CHANGELOG) {
        rows = t->nchangelog - t->nmirror_only;
    } else {
        for (size_t i = 0; i < t->nentries; i++)
            rows += entry_in(&t->entries[i], kind);
    }
    if (rows == 0)
        goto done;
    if (en == NULL && (rc = enc_open(t->schema, kind, o->compression, &en, e)) != CDC_OK)
        goto done;
    if (g != NULL)
        for (size_t j = 0; j < g->n && rc == CDC_OK; j++)
            rc = enc_row(en, t, g->idx[j], e);
    else
        rc = enc_append(en, t, kind == CDC_STAGE_CHANGELOG ? t->nchangelog : t->nentries, e);
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
    enc_free(en);
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
    cdc_stage_file_t *no;
    pending_t *np;
    if (n < *cap)
        return true;
    if ((no = realloc(*out, *cap * 2 * sizeof(*no))) == NULL)
        return false;
    *out = no;
    if ((np = realloc(*p, *cap * 2 * sizeof(*np))) == NULL)
        return false;
    *p = np;
    memset(no + *cap, 0, *cap * sizeof(*no));
    memset(np + *cap, 0, *cap * sizeof(*np));
    for (size_t i = *cap; i < *cap * 2; i++)
        np[i].fd = -1;
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
            if (!part_source(row, cl, sf->source_id, &src, &in)) {
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
                                        : !entry_in(&t->entries[i], kind))
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
            enc_drop(s, &s->tables[t].enc_cl);
            enc_drop(s, &s->tables[t].enc_data);
        }
        return rc;
    }
    free(p);
    *files = out;
    *nfiles = n;
    return CDC_OK;
}
