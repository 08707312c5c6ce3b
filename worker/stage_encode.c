/*
 * The encoders of the epoch's files (stage.h, "Encoding ahead"): the Iceberg schemas of
 * a table's three kinds of file (mirror data, equality deletes, changelog with its
 * metadata columns), staged values as the Parquet writer's cells, one in-memory Parquet
 * writer per table and kind, filled with row groups while the epoch runs
 * (cdc_stage_encode_ahead) and finished by stage_write.c at the barrier; and the
 * partition keys of rows, built from the same values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/schema.h"
#include "worker/stage_int.h"

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
                      int32_t precision, int32_t scale, bool required, const char *nested)
{
    cdc_ice_field_t *f = &o->fields[o->nfields];
    memset(f, 0, sizeof(*f));
    f->id = id;
    f->name = strdup(name);
    f->type = type;
    f->precision = precision;
    f->scale = scale;
    f->required = required;
    f->nested = nested != NULL ? strdup(nested) : NULL;
    if (f->name == NULL || (nested != NULL && f->nested == NULL)) {
        free(f->name);
        free(f->nested);
        return false;
    }
    o->nfields++;
    return true;
}

/* A type whose value the row's _cdc_special can name: a decimal's NaN or infinities, or
 * an unchanged TOAST value unknown to the worker (a type PostgreSQL can TOAST). */
static bool special_type(cdc_ice_type_t t)
{
    return t == CDC_ICE_DECIMAL || t == CDC_ICE_STRING || t == CDC_ICE_BINARY ||
           t == CDC_ICE_LIST || t == CDC_ICE_STRUCT;
}

bool cdc_stage_has_special(const cdc_source_schema_t *s)
{
    for (size_t i = 0; i < s->ncols; i++)
        if (special_type(s->cols[i].type))
            return true;
    for (size_t i = 0; i < s->nretired; i++)
        if (special_type(s->retired[i].type))
            return true;
    return false;
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
                       required, c->nested);
        if (c->key && kind != CDC_STAGE_CHANGELOG)
            out->identifier_ids[out->nidentifier++] = c->field_id;
    }
    /* earlier types of live columns: rows of older versions still carry them */
    for (size_t i = 0; i < s->nretired && ok && kind != CDC_STAGE_MIRROR_DELETES; i++) {
        const cdc_column_t *c = &s->retired[i];
        ok = add_field(out, c->field_id, cdc_column_field_name(c), c->type, c->precision, c->scale,
                       false, c->nested);
    }
    if (ok && kind != CDC_STAGE_MIRROR_DELETES && cdc_stage_has_special(s))
        ok = add_field(out, CDC_FIELD_SPECIAL, CDC_FIELD_SPECIAL_NAME, CDC_ICE_STRING, 0, 0, false,
                       NULL);
    for (size_t i = 0; kind == CDC_STAGE_CHANGELOG && i < CL_NCOLS && ok; i++)
        ok = add_field(out, cl_cols[i].id, cl_cols[i].name, cl_cols[i].type, 0, 0,
                       cl_cols[i].required, NULL);
    if (ok)
        return CDC_OK;
nomem:
    cdc_ice_schema_free(out);
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
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
    case CDC_ICE_LIST: /* the nested value form's JSON text (common/iceberg/nested.h) */
    case CDC_ICE_STRUCT:
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

void cdc_stage_enc_free(cdc_stage_enc_t *en)
{
    if (en == NULL)
        return;
    cdc_pq_writer_free(en->w);
    cdc_ice_schema_free(&en->schema);
    free(en->special);
    free(en->colmap);
    free(en->cells);
    free(en);
}

cdc_err_t cdc_stage_enc_open(const cdc_source_schema_t *src, cdc_stage_kind_t kind, int codec,
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
        cdc_stage_enc_free(en);
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
        cdc_stage_enc_free(en);
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

/* The _cdc_special cell of row r (catalog.h): the JSON object of its special values, or
 * null (also when out of memory: the row is still written). */
static void special_cell(cdc_stage_enc_t *en, const cdc_row_t *r, cdc_ice_value_t *cell)
{
    static const char *const names[] = {[CDC_VAL_NAN] = "NaN",
                                        [CDC_VAL_POS_INF] = "Infinity",
                                        [CDC_VAL_NEG_INF] = "-Infinity",
                                        [CDC_VAL_TOAST_UNKNOWN] = "unchanged-toast"};
    json_t *o = NULL;

    memset(cell, 0, sizeof(*cell));
    cell->is_null = true;
    free(en->special);
    en->special = NULL;
    for (size_t i = 0; r->vals != NULL && i < r->schema->ncols; i++) {
        if (!cdc_val_kind_noted(r->vals[i].kind))
            continue;
        if (o == NULL && (o = json_object()) == NULL)
            return;
        json_object_set_new(o, cdc_column_field_name(&r->schema->cols[i]),
                            json_string(names[r->vals[i].kind]));
    }
    if (o == NULL)
        return;
    en->special = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (en->special != NULL) {
        cell->is_null = false;
        cell->v.bytes.ptr = (const uint8_t *)en->special;
        cell->v.bytes.len = strlen(en->special);
    }
}

/* Fills en->cells for a changelog row (cl != NULL) or a mirror row r. */
static void enc_cells(cdc_stage_enc_t *en, const cdc_row_t *r, const cdc_changelog_row_t *cl)
{
    /* rows of the file's schema map by index; older versions by field id */
    bool direct = r->schema == en->src && r->vals != NULL;
    for (size_t f = 0; f < en->schema.nfields; f++) {
        const cdc_ice_field_t *fld = &en->schema.fields[f];
        cdc_ice_value_t *cell = &en->cells[f];
        if (fld->id == CDC_FIELD_SPECIAL) {
            special_cell(en, r, cell);
            continue;
        }
        if (cl != NULL && fld->id >= CDC_CL_FIELD_OP) {
            cl_cell(cl, fld->id, cell);
            continue;
        }
        const cdc_val_t *v =
            direct && en->colmap[f] >= 0 ? &r->vals[en->colmap[f]] : row_field(r, fld->id);
        to_cell(fld, v, cell);
    }
}

/* Appends changelog row / entry i of t when it belongs in en's kind of file. */
cdc_err_t cdc_stage_enc_row(cdc_stage_enc_t *en, const cdc_stage_table_t *t, size_t i,
                            cdc_error_t *e)
{
    if (en->kind == CDC_STAGE_CHANGELOG) {
        if (t->changelog[i].mirror_only)
            return CDC_OK;
        enc_cells(en, &t->changelog[i].row, &t->changelog[i]);
    } else {
        const cdc_stage_entry_t *entry = &t->entries[i];
        if (!cdc_stage_entry_in(entry, en->kind))
            return CDC_OK;
        enc_cells(en, cdc_stage_entry_row(t, entry), NULL);
    }
    return cdc_pq_writer_append(en->w, en->cells, e);
}

/* Appends changelog rows / entries [en->done, end) of t. */
cdc_err_t cdc_stage_enc_append(cdc_stage_enc_t *en, const cdc_stage_table_t *t, size_t end,
                               cdc_error_t *e)
{
    cdc_err_t rc = CDC_OK;
    for (size_t i = en->done; i < end && rc == CDC_OK; i++)
        rc = cdc_stage_enc_row(en, t, i, e);
    if (rc == CDC_OK)
        en->done = end;
    return rc;
}

/* Drops a table's encoder of the changelog or the mirror data (NULL is fine). */
void cdc_stage_enc_drop(cdc_stage_t *s, cdc_stage_enc_t **slot)
{
    if (*slot == NULL)
        return;
    s->bytes -= (*slot)->bytes;
    cdc_stage_enc_free(*slot);
    *slot = NULL;
}

/* Appends [done, end) as one row group (on failure: no more encoding ahead of this
 * kind this epoch; the barrier encodes the file whole and reports any error). */
static void enc_ahead(cdc_stage_t *s, cdc_stage_table_t *t, cdc_stage_enc_t **slot,
                      cdc_stage_kind_t kind, size_t end)
{
    cdc_error_t e;
    if (*slot == NULL && cdc_stage_enc_open(t->schema, kind, s->enc_codec, slot, &e) != CDC_OK) {
        *slot = NULL;
        goto off;
    }
    cdc_stage_enc_t *en = *slot;
    if (cdc_stage_enc_append(en, t, end, &e) != CDC_OK || cdc_pq_writer_flush(en->w, &e) != CDC_OK)
        goto off;
    size_t bytes = (size_t)cdc_pq_writer_size(en->w);
    s->bytes += bytes - en->bytes;
    en->bytes = bytes;
    return;
off:
    cdc_stage_enc_drop(s, slot);
    if (kind == CDC_STAGE_MIRROR_DATA)
        t->enc_data_off = true;
    else
        s->enc_rows = 0; /* (a changelog row group that cannot be encoded now) */
}

/* After a change was added to t: encodes the row groups that are due. */
void cdc_stage_encode_ahead(cdc_stage_t *s, cdc_stage_table_t *t)
{
    size_t n = s->enc_rows;
    if (t->partitioned)
        return; /* files per partition, at the barrier */
    /* wide rows: fewer per row group, so that the writer's buffers stay small */
    size_t avg = t->nchangelog ? t->row_bytes / t->nchangelog + 1 : 1;
    if (n > CDC_STAGE_ENCODE_BYTES / avg)
        n = CDC_STAGE_ENCODE_BYTES / avg > 64 ? CDC_STAGE_ENCODE_BYTES / avg : 64;
    if (t->enc_cl != NULL && t->enc_cl->src != t->schema)
        cdc_stage_enc_drop(s,
                           &t->enc_cl); /* schema changed: the file is written with the new one */
    while (s->enc_rows > 0 && t->nchangelog - (t->enc_cl ? t->enc_cl->done : 0) >= n)
        enc_ahead(s, t, &t->enc_cl, CDC_STAGE_CHANGELOG, (t->enc_cl ? t->enc_cl->done : 0) + n);
    if (t->enc_data_off || s->enc_rows == 0)
        return;
    if (t->enc_data != NULL && t->enc_data->src != t->schema)
        cdc_stage_enc_drop(s, &t->enc_data);
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
bool cdc_stage_part_source(const cdc_row_t *r, const cdc_changelog_row_t *cl, int32_t id,
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
        if (!cdc_stage_part_source(r, cl, pf->source_id, &f, &in)) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            break;
        }
        if (!in.null && (rc = cdc_ice_transform_apply(pf->transform, &f, &in, &out)) != CDC_OK)
            cdc_error_set(e, rc,
                          "partition field \"%s\" of spec %d: cannot transform the "
                          "value of field %d",
                          pf->name, (int)spec->spec_id, (int)pf->source_id);
        free(in.bytes);
        if (rc == CDC_OK && cdc_array_reserve(k, cap, n + 5 + out.len, 64) != CDC_OK)
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
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
