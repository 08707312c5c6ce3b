/*
 * The checkpoint record's JSON form (see checkpoint.h): the record etcd keeps, its delta
 * against the offsets base, the base itself and the pending file lists of large
 * checkpoints, written and read back. Bounds of column statistics are binary; they
 * travel as lower-case hex strings. Pure: no state of its own.
 */
#include "coordinator/checkpoint.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/hex.h"
#include "common/iceberg/schema.h"
#include "coordinator/table_stats.h"

static json_t *hex_value(const uint8_t *b, size_t n)
{
    char buf[2 * 64 + 1];

    cdc_hex_encode(b, n > 64 ? 64 : n, buf);
    return json_string(buf);
}

static bool hex_parse(const char *s, uint8_t *out, size_t cap, size_t *len)
{
    size_t n = strlen(s);

    if (n % 2 != 0 || n / 2 > cap)
        return false;
    for (size_t i = 0; i < n / 2; i++) {
        int byte = cdc_hex_byte(s + 2 * i);
        if (byte < 0)
            return false;
        out[i] = (uint8_t)byte;
    }
    *len = n / 2;
    return true;
}

static json_t *file_json(const cdc_staged_file_t *f)
{
    json_t *o = json_object(), *eq = json_array(), *st = json_array(), *so = json_array();

    for (size_t i = 0; i < f->file.nequality_ids; i++)
        json_array_append_new(eq, json_integer(f->file.equality_ids[i]));
    for (size_t i = 0; i < f->file.nsplit_offsets; i++)
        json_array_append_new(so, json_integer(f->file.split_offsets[i]));
    for (size_t i = 0; i < f->file.nstats; i++) {
        const cdc_ice_col_stats_t *s = &f->file.stats[i];
        json_t *so1 = json_object();
        json_object_set_new(so1, "id", json_integer(s->field_id));
        json_object_set_new(so1, "size", json_integer(s->column_size));
        json_object_set_new(so1, "values", json_integer(s->value_count));
        json_object_set_new(so1, "nulls", json_integer(s->null_count));
        json_object_set_new(so1, "nans", json_integer(s->nan_count));
        if (s->has_bounds) {
            json_object_set_new(so1, "lower", hex_value(s->lower, s->lower_len));
            json_object_set_new(so1, "upper", hex_value(s->upper, s->upper_len));
        }
        json_array_append_new(st, so1);
    }
    json_object_set_new(o, "table", json_string(f->table));
    json_object_set_new(o, "p", json_integer(f->partition));
    json_object_set_new(o, "path", json_string(f->file.path));
    json_object_set_new(o, "content", json_integer(f->file.content));
    json_object_set_new(o, "records", json_integer(f->file.record_count));
    json_object_set_new(o, "size", json_integer(f->file.file_size_in_bytes));
    json_object_set_new(o, "schema_id", json_integer(f->file.schema_id));
    json_object_set_new(o, "eq", eq);
    json_object_set_new(o, "stats", st);
    json_object_set_new(o, "splits", so);
    if (f->file.sort_order_id != 0)
        json_object_set_new(o, "order", json_integer(f->file.sort_order_id));
    if (f->file.spec_id != 0) {
        json_t *pv = json_array();
        for (size_t i = 0; i < f->file.npartition; i++) {
            const cdc_ice_part_value_t *v = &f->file.partition[i];
            json_array_append_new(pv, v->null ? json_null() : hex_value(v->bytes, v->len));
        }
        json_object_set_new(o, "spec", json_integer(f->file.spec_id));
        json_object_set_new(o, "part", pv);
    }
    return o;
}

static json_t *files_array(const cdc_checkpoint_t *c)
{
    json_t *a = json_array();

    for (size_t i = 0; i < c->nfiles; i++)
        json_array_append_new(a, file_json(&c->files[i]));
    return a;
}

/* The record's JSON; with base (and ref), the delta form (checkpoint.h). */
static char *encode(const cdc_checkpoint_t *c, bool with_files, const cdc_checkpoint_t *base,
                    const cdc_offsets_ref_t *ref)
{
    json_t *o = json_object(), *parts = json_array(), *schemas = json_array();
    char *out;

    json_object_set_new(o, "job", json_string(c->job));
    json_object_set_new(o, "epoch", json_integer((json_int_t)c->epoch));
    json_object_set_new(o, "term", json_integer((json_int_t)c->term));
    json_object_set_new(o, "generation", json_integer((json_int_t)c->generation));
    json_object_set_new(o, "barrier_ms", json_integer(c->barrier_ms));
    json_object_set_new(o, "completed_ms", json_integer(c->completed_ms));
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        const cdc_ckpt_partition_t *cp = &c->partitions[p];
        json_t *po = json_object(), *offs = json_object();
        for (size_t i = 0; i < cp->noffsets; i++) {
            const cdc_topic_offset_t *b =
                base ? cdc_checkpoint_find_offset(base, (uint32_t)p, cp->offsets[i].topic) : NULL;
            if (b != NULL && b->next_offset == cp->offsets[i].next_offset)
                continue; /* the base has it */
            json_object_set_new(offs, cp->offsets[i].topic,
                                json_integer(cp->offsets[i].next_offset));
        }
        json_object_set_new(po, "p", json_integer(p));
        json_object_set_new(po, "offsets", offs);
        json_object_set_new(po, "state", json_string(cp->state_handle ? cp->state_handle : ""));
        json_object_set_new(po, "owner", json_string(cp->owner));
        json_array_append_new(parts, po);
    }
    json_object_set_new(o, "partitions", parts);
    for (size_t i = 0; i < c->nschemas; i++) {
        json_t *so = json_object();
        json_object_set_new(so, "table", json_string(c->schemas[i].table));
        json_object_set_new(so, "schema", json_string(c->schemas[i].schema_json));
        if (c->schemas[i].version > 0)
            json_object_set_new(so, "version", json_integer(c->schemas[i].version));
        if (c->schemas[i].mask_policy != NULL)
            json_object_set_new(so, "mask_policy", json_string(c->schemas[i].mask_policy));
        json_array_append_new(schemas, so);
    }
    json_object_set_new(o, "schemas", schemas);
    if (c->ntruncates > 0) {
        json_t *tr = json_array();
        for (size_t i = 0; i < c->ntruncates; i++) {
            json_t *to = json_object(), *ps = json_array();
            for (int p = 0; p < CDC_PARTITIONS; p++)
                if (c->truncates[i].partitions & (1u << p))
                    json_array_append_new(ps, json_integer(p));
            json_object_set_new(to, "table", json_string(c->truncates[i].table));
            json_object_set_new(to, "p", ps);
            json_array_append_new(tr, to);
        }
        json_object_set_new(o, "truncates", tr);
    }
    if (c->nfloors > 0) {
        json_t *fl = json_array();
        for (size_t i = 0; i < c->nfloors; i++)
            json_array_append_new(fl, json_pack("{s:s, s:I, s:I, s:i}", "table", c->floors[i].table,
                                                "commit_lsn", (json_int_t)c->floors[i].commit_lsn,
                                                "lsn", (json_int_t)c->floors[i].lsn, "p",
                                                (int)c->floors[i].partition));
        json_object_set_new(o, "floors", fl);
    }
    if (with_files)
        json_object_set_new(o, "files", files_array(c));
    if (c->files_path)
        json_object_set_new(o, "files_path", json_string(c->files_path));
    if (base != NULL)
        json_object_set_new(o, "offsets_base",
                            json_pack("{s:I, s:s, s:s}", "epoch", (json_int_t)ref->epoch, "path",
                                      ref->path, "sha256", ref->sha256));
    {
        int64_t bytes, records;
        size_t nd, ndel;
        cdc_checkpoint_totals(c, &bytes, &records, &nd, &ndel);
        json_object_set_new(o, "bytes", json_integer(bytes));
        json_object_set_new(o, "records", json_integer(records));
        json_object_set_new(o, "data_files", json_integer((json_int_t)nd));
        json_object_set_new(o, "delete_files", json_integer((json_int_t)ndel));
    }
    out = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return out;
}

char *cdc_checkpoint_to_json(const cdc_checkpoint_t *c, bool with_files)
{
    return encode(c, with_files, NULL, NULL);
}

char *cdc_checkpoint_to_json_delta(const cdc_checkpoint_t *c, bool with_files,
                                   const cdc_checkpoint_t *base, const cdc_offsets_ref_t *ref)
{
    if (base == NULL || ref == NULL || ref->path == NULL)
        return NULL;
    return encode(c, with_files, base, ref);
}

char *cdc_checkpoint_offsets_base_json(const cdc_checkpoint_t *c)
{
    json_t *o = json_object(), *parts = json_array();
    char *out;

    json_object_set_new(o, "job", json_string(c->job));
    json_object_set_new(o, "epoch", json_integer((json_int_t)c->epoch));
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        const cdc_ckpt_partition_t *cp = &c->partitions[p];
        json_t *offs = json_object();
        for (size_t i = 0; i < cp->noffsets; i++)
            json_object_set_new(offs, cp->offsets[i].topic,
                                json_integer(cp->offsets[i].next_offset));
        json_array_append_new(parts, json_pack("{s:i, s:o}", "p", p, "offsets", offs));
    }
    json_object_set_new(o, "partitions", parts);
    out = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return out;
}

char *cdc_checkpoint_files_to_json(const cdc_checkpoint_t *c)
{
    json_t *o = json_object();
    char *out;

    json_object_set_new(o, "job", json_string(c->job));
    json_object_set_new(o, "epoch", json_integer((json_int_t)c->epoch));
    json_object_set_new(o, "files", files_array(c));
    out = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return out;
}

static int64_t get_int(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static cdc_err_t parse_file(json_t *fo, cdc_staged_file_t *f, cdc_error_t *e)
{
    json_t *eq, *st, *so, *pv;
    size_t i;
    const char *table = json_string_value(json_object_get(fo, "table"));
    const char *path = json_string_value(json_object_get(fo, "path"));

    memset(f, 0, sizeof(*f));
    if (table == NULL || path == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "checkpoint file entry lacks table or path");
    f->table = (char *)table; /* borrowed; cdc_checkpoint_add_file copies */
    f->file.path = (char *)path;
    f->partition = (uint32_t)get_int(fo, "p");
    f->file.content = (cdc_ice_content_t)get_int(fo, "content");
    f->file.record_count = get_int(fo, "records");
    f->file.file_size_in_bytes = get_int(fo, "size");
    f->file.schema_id = (int32_t)get_int(fo, "schema_id");
    eq = json_object_get(fo, "eq");
    if (json_array_size(eq) > 0) {
        f->file.equality_ids = calloc(json_array_size(eq), sizeof(int32_t));
        if (f->file.equality_ids == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        for (i = 0; i < json_array_size(eq); i++)
            f->file.equality_ids[i] = (int32_t)json_integer_value(json_array_get(eq, i));
        f->file.nequality_ids = json_array_size(eq);
    }
    so = json_object_get(fo, "splits");
    if (json_array_size(so) > 0) {
        f->file.split_offsets = calloc(json_array_size(so), sizeof(int64_t));
        if (f->file.split_offsets == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        for (i = 0; i < json_array_size(so); i++)
            f->file.split_offsets[i] = (int64_t)json_integer_value(json_array_get(so, i));
        f->file.nsplit_offsets = json_array_size(so);
    }
    f->file.spec_id = (int32_t)get_int(fo, "spec");
    f->file.sort_order_id = (int32_t)get_int(fo, "order");
    pv = json_object_get(fo, "part");
    if (json_array_size(pv) > 0) {
        f->file.partition = calloc(json_array_size(pv), sizeof(cdc_ice_part_value_t));
        if (f->file.partition == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        f->file.npartition = json_array_size(pv);
        for (i = 0; i < json_array_size(pv); i++) {
            const char *hex = json_string_value(json_array_get(pv, i));
            cdc_ice_part_value_t *v = &f->file.partition[i];
            size_t cap = hex ? strlen(hex) / 2 + 1 : 0;
            v->null = hex == NULL;
            if (hex != NULL &&
                ((v->bytes = malloc(cap)) == NULL || !hex_parse(hex, v->bytes, cap, &v->len)))
                return cdc_error_set(e, CDC_ERR_CORRUPT,
                                     "checkpoint file \"%s\" has a bad partition value", path);
        }
    }
    st = json_object_get(fo, "stats");
    if (json_array_size(st) > 0) {
        f->file.stats = calloc(json_array_size(st), sizeof(cdc_ice_col_stats_t));
        if (f->file.stats == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        f->file.nstats = json_array_size(st);
        for (i = 0; i < json_array_size(st); i++) {
            json_t *v = json_array_get(st, i);
            cdc_ice_col_stats_t *s = &f->file.stats[i];
            const char *lo = json_string_value(json_object_get(v, "lower"));
            const char *hi = json_string_value(json_object_get(v, "upper"));
            s->field_id = (int32_t)get_int(v, "id");
            s->column_size = get_int(v, "size");
            s->value_count = get_int(v, "values");
            s->null_count = get_int(v, "nulls");
            s->nan_count = get_int(v, "nans");
            if (lo && hi) {
                if (!hex_parse(lo, s->lower, sizeof(s->lower), &s->lower_len) ||
                    !hex_parse(hi, s->upper, sizeof(s->upper), &s->upper_len))
                    return cdc_error_set(e, CDC_ERR_CORRUPT,
                                         "checkpoint file \"%s\" has bad column bounds", path);
                s->has_bounds = true;
            }
        }
    }
    return CDC_OK;
}

static cdc_err_t parse_files(cdc_checkpoint_t *c, json_t *files, cdc_error_t *e)
{
    size_t i;

    for (i = 0; i < json_array_size(files); i++) {
        json_t *fo = json_array_get(files, i);
        cdc_staged_file_t f;
        cdc_err_t rc = parse_file(fo, &f, e);
        if (rc == CDC_OK)
            rc = cdc_checkpoint_add_file(c, &f);
        f.file.path = NULL; /* borrowed from the JSON */
        cdc_ice_data_file_clear(&f.file);
        if (rc != CDC_OK)
            return e && e->code != CDC_OK ? rc : cdc_error_set(e, rc, "out of memory");
    }
    return CDC_OK;
}

/* "offsets_base" of a record in the delta form (absent: the offsets are inline). */
static cdc_err_t parse_offsets_base(cdc_checkpoint_t *c, json_t *ob, cdc_error_t *e)
{
    json_t *ep = json_object_get(ob, "epoch");
    const char *path = json_string_value(json_object_get(ob, "path"));
    const char *sha = json_string_value(json_object_get(ob, "sha256"));
    uint8_t digest[32];
    size_t n;

    if (ob == NULL)
        return CDC_OK;
    if (!json_is_integer(ep) || json_integer_value(ep) < 0 || path == NULL || path[0] == '\0' ||
        sha == NULL || strlen(sha) != 64 || !hex_parse(sha, digest, sizeof(digest), &n))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "checkpoint %" PRIu64 " has a bad offsets_base",
                             c->epoch);
    if ((c->offsets_base.path = strdup(path)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    c->offsets_base.epoch = (uint64_t)json_integer_value(ep);
    cdc_hex_encode(digest, sizeof(digest), c->offsets_base.sha256);
    c->offsets_delta = true;
    return CDC_OK;
}

cdc_err_t cdc_checkpoint_from_json(const char *json, size_t len, cdc_checkpoint_t **out,
                                   cdc_error_t *e)
{
    json_error_t je;
    json_t *o = json_loadb(json, len, 0, &je), *parts, *schemas, *files;
    cdc_checkpoint_t *c = NULL;
    cdc_err_t rc = CDC_OK;
    size_t i;

    *out = NULL;
    if (o == NULL || !json_is_object(o)) {
        rc = cdc_error_set(e, CDC_ERR_CORRUPT, "checkpoint record is not a JSON object: %s",
                           o ? "wrong type" : je.text);
        goto cleanup;
    }
    if (!json_is_integer(json_object_get(o, "epoch"))) {
        rc = cdc_error_set(e, CDC_ERR_CORRUPT, "checkpoint record lacks \"epoch\"");
        goto cleanup;
    }
    c = cdc_checkpoint_new(json_string_value(json_object_get(o, "job")),
                           (uint64_t)get_int(o, "epoch"), (uint64_t)get_int(o, "term"),
                           (uint64_t)get_int(o, "generation"));
    if (c == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    c->barrier_ms = get_int(o, "barrier_ms");
    c->completed_ms = get_int(o, "completed_ms");
    parts = json_object_get(o, "partitions");
    for (i = 0; i < json_array_size(parts); i++) {
        json_t *po = json_array_get(parts, i);
        int64_t p = get_int(po, "p");
        const char *topic, *owner = json_string_value(json_object_get(po, "owner"));
        json_t *off;
        if (p < 0 || p >= CDC_PARTITIONS) {
            rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                               "checkpoint %" PRIu64 " names partition %" PRId64, c->epoch, p);
            goto cleanup;
        }
        void *it = json_object_iter(json_object_get(po, "offsets"));
        for (; it != NULL; it = json_object_iter_next(json_object_get(po, "offsets"), it)) {
            topic = json_object_iter_key(it);
            off = json_object_iter_value(it);
            if ((rc = cdc_checkpoint_set_offset(c, (uint32_t)p, topic,
                                                (int64_t)json_integer_value(off))) != CDC_OK)
                goto nomem;
        }
        if ((rc = cdc_checkpoint_set_state(
                 c, (uint32_t)p, json_string_value(json_object_get(po, "state")))) != CDC_OK)
            goto nomem;
        if (owner)
            snprintf(c->partitions[p].owner, sizeof(c->partitions[p].owner), "%s", owner);
    }
    schemas = json_object_get(o, "schemas");
    for (i = 0; i < json_array_size(schemas); i++) {
        json_t *po = json_array_get(schemas, i);
        const char *t = json_string_value(json_object_get(po, "table"));
        const char *s = json_string_value(json_object_get(po, "schema"));
        if (t == NULL || s == NULL) {
            rc = cdc_error_set(e, CDC_ERR_CORRUPT, "checkpoint %" PRIu64 " has a bad schema entry",
                               c->epoch);
            goto cleanup;
        }
        if ((rc = cdc_checkpoint_add_masked_schema(
                 c, t, s, json_integer_value(json_object_get(po, "version")),
                 json_string_value(json_object_get(po, "mask_policy")))) != CDC_OK)
            goto nomem;
    }
    json_t *truncates = json_object_get(o, "truncates");
    for (i = 0; i < json_array_size(truncates); i++) {
        json_t *to = json_array_get(truncates, i), *ps = json_object_get(to, "p");
        const char *t = json_string_value(json_object_get(to, "table"));
        if (t == NULL || !json_is_array(ps)) {
            rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                               "checkpoint %" PRIu64 " has a bad truncate entry", c->epoch);
            goto cleanup;
        }
        for (size_t k = 0; k < json_array_size(ps); k++) {
            json_int_t p = json_integer_value(json_array_get(ps, k));
            if (p < 0 || p >= CDC_PARTITIONS) {
                rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                                   "checkpoint %" PRIu64 " truncates partition %lld", c->epoch,
                                   (long long)p);
                goto cleanup;
            }
            if ((rc = cdc_checkpoint_add_truncate(c, t, (uint32_t)p)) != CDC_OK)
                goto nomem;
        }
    }
    json_t *floors = json_object_get(o, "floors");
    for (i = 0; i < json_array_size(floors); i++) {
        json_t *fo = json_array_get(floors, i);
        const char *t = json_string_value(json_object_get(fo, "table"));
        json_t *cl = json_object_get(fo, "commit_lsn"), *l = json_object_get(fo, "lsn");
        json_int_t p = json_integer_value(json_object_get(fo, "p"));
        if (t == NULL || !json_is_integer(cl) || !json_is_integer(l) || p < 0 ||
            p >= CDC_PARTITIONS) {
            rc = cdc_error_set(e, CDC_ERR_CORRUPT, "checkpoint %" PRIu64 " has a bad floor entry",
                               c->epoch);
            goto cleanup;
        }
        if ((rc = cdc_checkpoint_add_floor(c, t, (uint64_t)json_integer_value(cl),
                                           (uint64_t)json_integer_value(l), (uint32_t)p)) != CDC_OK)
            goto nomem;
    }
    files = json_object_get(o, "files");
    if (files && (rc = parse_files(c, files, e)) != CDC_OK)
        goto cleanup;
    if (json_is_string(json_object_get(o, "files_path"))) {
        c->files_path = strdup(json_string_value(json_object_get(o, "files_path")));
        if (c->files_path == NULL) {
            rc = CDC_ERR_NOMEM;
            goto nomem;
        }
    }
    if ((rc = parse_offsets_base(c, json_object_get(o, "offsets_base"), e)) != CDC_OK)
        goto cleanup;
    *out = c;
    c = NULL;
    goto cleanup;
nomem:
    cdc_error_set(e, rc, "out of memory");
cleanup:
    cdc_checkpoint_free(c);
    json_decref(o);
    return rc;
}

cdc_err_t cdc_checkpoint_files_from_json(cdc_checkpoint_t *c, const char *json, size_t len,
                                         cdc_error_t *e)
{
    json_error_t je;
    json_t *o = json_loadb(json, len, 0, &je);
    cdc_err_t rc;

    if (o == NULL || !json_is_array(json_object_get(o, "files"))) {
        json_decref(o);
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "pending file list of checkpoint %" PRIu64 " is not valid", c->epoch);
    }
    rc = parse_files(c, json_object_get(o, "files"), e);
    json_decref(o);
    return rc;
}

/* Whether topic is the source topic of table: it ends with ".<ns>.<name>" of the table
 * itself or of its mirror (a changelog's name less CDC_CHANGELOG_SUFFIX). */
static bool topic_of_table(const char *topic, const char *table)
{
    size_t tl = strlen(topic), n = strlen(table), sl = strlen(CDC_CHANGELOG_SUFFIX);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (n <= sl || strcmp(table + n - sl, CDC_CHANGELOG_SUFFIX) != 0)
                break;
            n -= sl;
        }
        if (tl > n && topic[tl - n - 1] == '.' && strncmp(topic + tl - n, table, n) == 0)
            return true;
    }
    return false;
}

char *cdc_checkpoint_offsets_json(const cdc_checkpoint_t *c, const char *table)
{
    json_t *o = json_object();
    bool own = false;
    char *out;

    for (int p = 0; table != NULL && p < CDC_PARTITIONS && !own; p++)
        for (size_t i = 0; i < c->partitions[p].noffsets && !own; i++)
            own = topic_of_table(c->partitions[p].offsets[i].topic, table);
    for (int p = 0; p < CDC_PARTITIONS; p++)
        for (size_t i = 0; i < c->partitions[p].noffsets; i++) {
            const cdc_topic_offset_t *to = &c->partitions[p].offsets[i];
            json_t *arr;
            if (own && !topic_of_table(to->topic, table))
                continue;
            if ((arr = json_object_get(o, to->topic)) == NULL) {
                arr = json_array();
                for (int q = 0; q < CDC_PARTITIONS; q++)
                    json_array_append_new(arr, json_integer(-1));
                json_object_set_new(o, to->topic, arr);
            }
            json_array_set_new(arr, (size_t)p, json_integer(to->next_offset));
        }
    out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return out;
}
