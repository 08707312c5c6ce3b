/*
 * Per-epoch collapse and buffering (see stage.h). Collapse keeps one entry per
 * entity in first-change order behind an open-addressing index; the changelog is a
 * plain append-only array. File writing lives in stage_files.c.
 */
#include "worker/stage.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cdc_stage_init(cdc_stage_t *s, uint32_t partition, uint64_t epoch)
{
    memset(s, 0, sizeof(*s));
    s->partition = partition;
    s->epoch = epoch;
}

static void table_free(cdc_stage_table_t *t)
{
    for (size_t i = 0; i < t->nentries; i++)
        free(t->entries[i].entity);
    for (size_t i = 0; i < t->nchangelog; i++)
        cdc_row_clear(&t->changelog[i].row);
    free(t->entries);
    free(t->slots);
    free(t->changelog);
    free(t->ns);
    free(t->table);
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
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static bool rehash(cdc_stage_table_t *t)
{
    size_t n = t->nslots ? t->nslots * 2 : 64;
    size_t *slots = calloc(n, sizeof(size_t));
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < t->nentries; i++) {
        size_t j = hash(t->entries[i].entity, t->entries[i].entity_len) & (n - 1);
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
static cdc_stage_entry_t *lookup(cdc_stage_table_t *t, const uint8_t *ent, size_t len, size_t *slot)
{
    size_t j = hash(ent, len) & (t->nslots - 1);
    while (t->slots[j] != 0) {
        cdc_stage_entry_t *en = &t->entries[t->slots[j] - 1];
        if (en->entity_len == len && memcmp(en->entity, ent, len) == 0)
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
    for (size_t i = 0; i < t->nentries; i++) {
        s->bytes -= sizeof(t->entries[i]) + t->entries[i].entity_len;
        free(t->entries[i].entity);
    }
    t->nentries = 0;
    if (t->slots != NULL)
        memset(t->slots, 0, t->nslots * sizeof(*t->slots));
    t->truncated = true;
    if (c->partition == 0)
        changelog_push(s, t, c)->row.schema = c->schema; /* no values: every column null */
    s->changes++;
    return CDC_OK;
}

cdc_err_t cdc_stage_add(cdc_stage_t *s, cdc_change_t *c, bool live_before, cdc_error_t *e)
{
    if (c->op == CDC_OP_TRUNCATE)
        return stage_truncate(s, c, e);
    cdc_stage_table_t *t = table_for(s, c->schema);
    cdc_stage_entry_t *en;
    cdc_changelog_row_t *cl;
    cdc_row_t *img = c->op == CDC_OP_DELETE ? &c->before : &c->after;
    size_t slot = 0;

    if (t == NULL)
        goto nomem;
    t->schema = c->schema;
    if (t->nslots == 0 || (t->nentries + 1) * 2 > t->nslots)
        if (!rehash(t))
            goto nomem;
    if (!changelog_reserve(t))
        goto nomem;

    en = lookup(t, c->entity, c->entity_len, &slot);
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
        en->needs_delete = live_before;
        t->slots[slot] = ++t->nentries;
        s->bytes += sizeof(*en) + c->entity_len;
    }
    en->deleted = c->op == CDC_OP_DELETE;
    en->last = t->nchangelog; /* the row changelog_push appends next */

    cl = changelog_push(s, t, c);
    cl->row = *img; /* moved */
    img->vals = NULL;
    s->bytes += row_bytes(&cl->row);
    s->changes++;
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
    out->fields = calloc(s->ncols + 8, sizeof(cdc_ice_field_t));
    out->identifier_ids = calloc(s->nkey ? s->nkey : 1, sizeof(int32_t));
    if (out->fields == NULL || out->identifier_ids == NULL)
        goto nomem;
    for (size_t i = 0; i < s->ncols && ok; i++) {
        const cdc_column_t *c = &s->cols[i];
        if (kind == CDC_STAGE_MIRROR_DELETES && !c->key)
            continue;
        /* Changelog deletes carry only the old key: other columns must be optional. */
        bool required = c->key && kind != CDC_STAGE_CHANGELOG;
        ok = add_field(out, c->field_id, c->name, c->type, c->precision, c->scale, required);
        if (c->key && kind != CDC_STAGE_CHANGELOG)
            out->identifier_ids[out->nidentifier++] = c->field_id;
    }
    if (kind == CDC_STAGE_CHANGELOG)
        ok = ok && add_field(out, CDC_CL_FIELD_OP, "_op", CDC_ICE_STRING, 0, 0, true) &&
             add_field(out, CDC_CL_FIELD_LSN, "_lsn", CDC_ICE_LONG, 0, 0, true) &&
             add_field(out, CDC_CL_FIELD_COMMIT_LSN, "_commit_lsn", CDC_ICE_LONG, 0, 0, true) &&
             add_field(out, CDC_CL_FIELD_TX_ID, "_tx_id", CDC_ICE_LONG, 0, 0, false) &&
             add_field(out, CDC_CL_FIELD_SOURCE_TS, "_source_ts", CDC_ICE_TIMESTAMPTZ, 0, 0,
                       false) &&
             add_field(out, CDC_CL_FIELD_KAFKA_PARTITION, "_kafka_partition", CDC_ICE_INT, 0, 0,
                       true) &&
             add_field(out, CDC_CL_FIELD_KAFKA_OFFSET, "_kafka_offset", CDC_ICE_LONG, 0, 0, true);
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

typedef struct file_job {
    cdc_pq_writer_t *w;
    char *location;
    char *local; /* local path when writing directly, else NULL (buffer + put) */
    cdc_ice_schema_t schema;
    cdc_ice_value_t *cells;
} file_job_t;

static void job_abandon(file_job_t *j, cdc_storage_t *storage)
{
    cdc_error_t e;
    cdc_pq_writer_free(j->w);
    if (j->local != NULL)
        unlink(j->local);
    else if (j->location != NULL)
        cdc_storage_delete(storage, j->location, &e);
    free(j->local);
    free(j->location);
    free(j->cells);
    cdc_ice_schema_free(&j->schema);
    memset(j, 0, sizeof(*j));
}

static cdc_err_t job_open(file_job_t *j, cdc_storage_t *storage, const cdc_stage_t *s,
                          const cdc_stage_table_t *t, cdc_stage_kind_t kind,
                          const cdc_stage_write_options_t *o, cdc_error_t *e)
{
    static const char *const kind_tag[] = {"data", "eqdel", "cl"};
    char tag[256], name[300];
    char *table_loc;
    cdc_pq_options_t po;
    cdc_err_t rc;

    memset(j, 0, sizeof(*j));
    rc = cdc_stage_ice_schema(t->schema, kind, &j->schema, e);
    if (rc != CDC_OK)
        return rc;
    snprintf(name, sizeof(name), "%s%s", t->table, kind == CDC_STAGE_CHANGELOG ? "_changelog" : "");
    table_loc = cdc_ice_table_location(o->warehouse, t->ns, name);
    snprintf(tag, sizeof(tag), "%s-e%llu-p%u-%s", o->job, (unsigned long long)s->epoch,
             s->partition, kind_tag[kind]);
    j->location = table_loc ? cdc_ice_data_file_location(table_loc, tag) : NULL;
    free(table_loc);
    j->cells = calloc(j->schema.nfields ? j->schema.nfields : 1, sizeof(cdc_ice_value_t));
    if (j->location == NULL || j->cells == NULL) {
        job_abandon(j, storage);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    cdc_pq_options_init(&po);
    po.codec = (cdc_pq_codec_t)o->compression;
    j->local = cdc_storage_local_path(storage, j->location);
    if (j->local != NULL) {
        char *slash = strrchr(j->local, '/');
        if (slash != NULL) { /* data/ may not exist yet */
            char dir[1024];
            snprintf(dir, sizeof(dir), "%.*s", (int)(slash - j->local), j->local);
            struct stat sb;
            if (stat(dir, &sb) != 0) {
                /* mkdir -p without a shell */
                for (char *p = dir + 1; *p; p++)
                    if (*p == '/') {
                        *p = '\0';
                        mkdir(dir, 0755);
                        *p = '/';
                    }
                mkdir(dir, 0755);
            }
        }
        rc = cdc_pq_writer_open_file(&j->schema, j->local, &po, &j->w, e);
    } else {
        rc = cdc_pq_writer_open_buffer(&j->schema, &po, &j->w, e);
    }
    if (rc != CDC_OK) {
        free(j->local);
        j->local = NULL; /* nothing was created */
        job_abandon(j, storage);
    }
    return rc;
}

static cdc_err_t job_close(file_job_t *j, cdc_storage_t *storage, cdc_stage_file_t *out,
                           cdc_error_t *e)
{
    cdc_err_t rc = cdc_pq_writer_close(j->w, &out->df, e);
    if (rc != CDC_OK)
        return rc;
    if (j->local == NULL) {
        uint8_t *data;
        size_t len;
        rc = cdc_pq_writer_take_buffer(j->w, &data, &len);
        if (rc == CDC_OK) {
            rc = cdc_storage_put(storage, j->location, data, len, e);
            free(data);
        }
        if (rc != CDC_OK) {
            cdc_ice_data_file_clear(&out->df);
            return rc;
        }
    }
    free(out->df.path);
    out->df.path = strdup(j->location);
    out->df.schema_id = j->schema.schema_id;
    out->schema_json = cdc_ice_schema_to_json(&j->schema);
    if (out->df.path == NULL || out->schema_json == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    return CDC_OK;
}

static cdc_err_t write_kind(const cdc_stage_t *s, const cdc_stage_table_t *t, cdc_stage_kind_t kind,
                            cdc_storage_t *storage, const cdc_stage_write_options_t *o,
                            cdc_stage_file_t *out, bool *written, cdc_error_t *e)
{
    file_job_t j;
    cdc_err_t rc;
    size_t rows = 0;
    *written = false;
    if (kind == CDC_STAGE_CHANGELOG) {
        rows = t->nchangelog;
    } else {
        for (size_t i = 0; i < t->nentries; i++)
            rows +=
                kind == CDC_STAGE_MIRROR_DATA ? !t->entries[i].deleted : t->entries[i].needs_delete;
    }
    if (rows == 0)
        return CDC_OK;
    rc = job_open(&j, storage, s, t, kind, o, e);
    if (rc != CDC_OK)
        return rc;
    size_t n = kind == CDC_STAGE_CHANGELOG ? t->nchangelog : t->nentries;
    for (size_t i = 0; i < n && rc == CDC_OK; i++) {
        const cdc_row_t *r;
        const cdc_changelog_row_t *cl = NULL;
        if (kind == CDC_STAGE_CHANGELOG) {
            cl = &t->changelog[i];
            r = &cl->row;
        } else {
            const cdc_stage_entry_t *en = &t->entries[i];
            if (kind == CDC_STAGE_MIRROR_DATA ? en->deleted : !en->needs_delete)
                continue;
            r = cdc_stage_entry_row(t, en);
        }
        for (size_t f = 0; f < j.schema.nfields; f++) {
            const cdc_ice_field_t *fld = &j.schema.fields[f];
            cdc_ice_value_t *cell = &j.cells[f];
            if (cl != NULL && fld->id >= CDC_CL_FIELD_OP) {
                memset(cell, 0, sizeof(*cell));
                switch (fld->id) {
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
                continue;
            }
            to_cell(fld, row_field(r, fld->id), cell);
        }
        rc = cdc_pq_writer_append(j.w, j.cells, e);
    }
    if (rc == CDC_OK)
        rc = job_close(&j, storage, out, e);
    if (rc != CDC_OK) {
        cdc_error_prefix(e,
                         "could not stage %s file for table \"%s.%s\" (partition %u, epoch %llu)",
                         kind == CDC_STAGE_MIRROR_DELETES ? "equality delete" : "data", t->ns,
                         t->table, s->partition, (unsigned long long)s->epoch);
        cdc_ice_data_file_clear(&out->df);
        free(out->schema_json);
        out->schema_json = NULL;
        job_abandon(&j, storage);
        return rc;
    }
    if (kind == CDC_STAGE_MIRROR_DELETES) {
        out->df.content = CDC_ICE_CONTENT_EQUALITY_DELETES;
        out->df.equality_ids = malloc(j.schema.nidentifier * sizeof(int32_t));
        if (out->df.equality_ids != NULL) {
            memcpy(out->df.equality_ids, j.schema.identifier_ids,
                   j.schema.nidentifier * sizeof(int32_t));
            out->df.nequality_ids = j.schema.nidentifier;
        }
    }
    char name[300];
    snprintf(name, sizeof(name), "%s.%s%s", t->ns, t->table,
             kind == CDC_STAGE_CHANGELOG ? "_changelog" : "");
    out->table = strdup(name);
    out->kind = kind;
    free(j.local);
    j.local = NULL;
    free(j.location);
    j.location = NULL;
    job_abandon(&j, storage); /* frees the rest; the file stays */
    *written = true;
    return CDC_OK;
}

cdc_err_t cdc_stage_write(const cdc_stage_t *s, cdc_storage_t *storage,
                          const cdc_stage_write_options_t *o, cdc_stage_file_t **files,
                          size_t *nfiles, cdc_error_t *e)
{
    cdc_stage_file_t *out = calloc(s->ntables * 3 + 1, sizeof(*out));
    size_t n = 0;
    if (out == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->ntables; i++)
        for (int k = CDC_STAGE_MIRROR_DATA; k <= CDC_STAGE_CHANGELOG; k++) {
            bool written;
            cdc_err_t rc =
                write_kind(s, &s->tables[i], (cdc_stage_kind_t)k, storage, o, &out[n], &written, e);
            if (rc != CDC_OK) {
                for (size_t f = 0; f < n; f++) {
                    cdc_error_t e2;
                    cdc_storage_delete(storage, out[f].df.path, &e2);
                }
                cdc_stage_files_free(out, n);
                return rc;
            }
            n += written;
        }
    *files = out;
    *nfiles = n;
    return CDC_OK;
}
