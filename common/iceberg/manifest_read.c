/*
 * Reading manifests and manifest lists (see manifest.h) through avro-c: fields are
 * looked up by name, so files written by other Iceberg implementations read too;
 * sequence numbers and snapshot ids are inherited from the manifest list, partition
 * tuples decoded into single-value encodings by their spec's result types. Also reads
 * single keys of an Avro container header.
 */
#include <avro.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/iceberg/bounds.h"
#include "common/iceberg/manifest.h"
#include "common/iceberg/manifest_int.h"

/* ---- container framing ------------------------------------------------------------- */

/*
 * Walks the header of the Avro container buf[0..len): the magic, then the metadata map,
 * whose every key and value must lie inside buf. With key, stops at that key (*v, *vl: its
 * value; CDC_ERR_NOT_FOUND when absent); without, *end is the offset just past the map.
 */
static cdc_err_t header_walk(const uint8_t *buf, size_t len, const char *key, const uint8_t **v,
                             size_t *vl_out, size_t *end, cdc_error_t *e)
{
    size_t p = 4, used;
    int64_t count, kl, vl;
    if (len < 4 || memcmp(buf, "Obj\x01", 4) != 0)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "not an avro container file");
    for (;;) {
        if (!(used = cdc_avro_zigzag_decode(buf + p, len - p, &count)))
            goto bad;
        p += used;
        if (count == 0)
            break;
        if (count < 0) {
            int64_t bytes;
            if (!(used = cdc_avro_zigzag_decode(buf + p, len - p, &bytes)) || count == INT64_MIN)
                goto bad;
            p += used;
            count = -count;
        }
        for (int64_t i = 0; i < count; i++) {
            if (!(used = cdc_avro_zigzag_decode(buf + p, len - p, &kl)) || kl < 0 ||
                (size_t)kl > len - p - used)
                goto bad;
            p += used;
            const uint8_t *k = buf + p;
            p += (size_t)kl;
            if (!(used = cdc_avro_zigzag_decode(buf + p, len - p, &vl)) || vl < 0 ||
                (size_t)vl > len - p - used)
                goto bad;
            p += used;
            if (key != NULL && (size_t)kl == strlen(key) && memcmp(k, key, (size_t)kl) == 0) {
                *v = buf + p;
                *vl_out = (size_t)vl;
                return CDC_OK;
            }
            p += (size_t)vl;
        }
    }
    if (key != NULL)
        return cdc_error_set(e, CDC_ERR_NOT_FOUND, "avro header has no key \"%s\"", key);
    *end = p;
    return CDC_OK;
bad:
    return cdc_error_set(e, CDC_ERR_CORRUPT, "truncated avro header");
}

/*
 * Checks the framing of the container buf[0..len) before avro-c reads it, which trusts
 * the lengths it reads (a negative or oversized one is an allocation of that size): the
 * header (header_walk) and its sync marker, then blocks of a positive record count and a
 * byte size inside buf, each followed by the sync marker.
 */
static cdc_err_t check_container(const uint8_t *buf, size_t len, const char *what, cdc_error_t *e)
{
    size_t p, used;
    cdc_error_t he;
    cdc_err_t rc = header_walk(buf, len, NULL, NULL, NULL, &p, &he);
    if (rc != CDC_OK)
        return cdc_error_set(e, rc, "%s: %s", what, he.msg);
    if (len - p < 16)
        goto bad;
    const uint8_t *sync = buf + p;
    p += 16;
    while (p < len) {
        int64_t count, size;
        if (!(used = cdc_avro_zigzag_decode(buf + p, len - p, &count)) || count <= 0)
            goto bad;
        p += used;
        if (!(used = cdc_avro_zigzag_decode(buf + p, len - p, &size)) || size < 0 ||
            (size_t)size > len - p - used || len - p - used - (size_t)size < 16)
            goto bad;
        p += used + (size_t)size;
        if (memcmp(buf + p, sync, 16) != 0)
            goto bad;
        p += 16;
    }
    return CDC_OK;
bad:
    return cdc_error_set(e, CDC_ERR_CORRUPT, "%s: malformed avro container framing", what);
}

/* ---- reading through avro-c --------------------------------------------------------- */

/*
 * avro-c allocates whatever size a length inside a record claims, before it finds that
 * the block holds fewer bytes: a corrupt manifest of a few KiB asked for 18 GB. While a
 * reader of ours decodes, its thread caps every single allocation of avro-c at what the
 * container could need: a datum never exceeds its decompressed block, and deflate, the
 * codec with the largest ratio, inflates at most 1032 bytes per input byte. A larger
 * request fails as malloc's failure does, and avro-c reports an error we return as
 * corrupt. Outside our readers (cap 0) avro-c allocates as it would by default.
 */
static _Thread_local size_t avro_alloc_cap;
static _Thread_local size_t avro_alloc_refused; /* the last size refused, for the error */
static pthread_once_t avro_alloc_once = PTHREAD_ONCE_INIT;

enum { AVRO_INFLATE_RATIO_MAX = 1032, AVRO_ALLOC_SLACK = 1 << 20 };

static void *capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    if (avro_alloc_cap != 0 && nsize > avro_alloc_cap) {
        avro_alloc_refused = nsize;
        return NULL;
    }
    return realloc(ptr, nsize);
}

static void install_capped_alloc(void)
{
    avro_set_allocator(capped_alloc, NULL);
}

/* The cap for a container of len bytes (see above); saturates instead of overflowing. */
static size_t alloc_cap_for(size_t len)
{
    if (len > (SIZE_MAX - AVRO_ALLOC_SLACK) / AVRO_INFLATE_RATIO_MAX)
        return SIZE_MAX;
    return len * AVRO_INFLATE_RATIO_MAX + AVRO_ALLOC_SLACK;
}

typedef struct reader {
    avro_file_reader_t file;
    avro_value_iface_t *iface;
    avro_value_t value;
    bool have_value;
} reader_t;

static cdc_err_t reader_open(reader_t *r, const uint8_t *buf, size_t len, const char *what,
                             cdc_error_t *e)
{
    memset(r, 0, sizeof(*r));
    if (len < 4 || memcmp(buf, "Obj\x01", 4) != 0)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "%s is not an avro container file", what);
    cdc_err_t rc = check_container(buf, len, what, e);
    if (rc != CDC_OK)
        return rc;
    pthread_once(&avro_alloc_once, install_capped_alloc);
    avro_alloc_cap = alloc_cap_for(len);
    avro_alloc_refused = 0;
    FILE *fp = fmemopen((void *)buf, len, "rb");
    if (!fp)
        return oom(e);
    if (avro_file_reader_fp(fp, what, 1, &r->file) != 0) {
        avro_alloc_cap = 0;
        return cdc_error_set(e, CDC_ERR_CORRUPT, "could not read avro header of %s: %s", what,
                             avro_strerror());
    }
    /* returns a new reference (avro-c >= 1.8); the class keeps its own */
    avro_schema_t ws = avro_file_reader_get_writer_schema(r->file);
    r->iface = avro_generic_class_from_schema(ws);
    avro_schema_decref(ws);
    if (!r->iface || avro_generic_value_new(r->iface, &r->value) != 0) {
        avro_file_reader_close(r->file);
        avro_alloc_cap = 0;
        return cdc_error_set(e, CDC_ERR_CORRUPT, "unsupported avro schema in %s: %s", what,
                             avro_strerror());
    }
    r->have_value = true;
    return CDC_OK;
}

static void reader_close(reader_t *r)
{
    if (r->have_value)
        avro_value_decref(&r->value);
    if (r->iface)
        avro_value_iface_decref(r->iface);
    if (r->file)
        avro_file_reader_close(r->file);
    avro_alloc_cap = 0;
}

/* Decodes one record into elem (zeroed); arg is the caller's. */
typedef cdc_err_t (*record_fn)(avro_value_t *rec, void *elem, const void *arg, cdc_error_t *e);

/*
 * Decodes every record of the Avro container buf[0..len) (named `what` in errors) into
 * a new array of elements of elem_size bytes: on success *items and *n are the array
 * and its length; on failure the elements decoded so far, and the one that failed, are
 * released with release().
 */
static cdc_err_t read_records(const uint8_t *buf, size_t len, const char *what, size_t elem_size,
                              record_fn decode, const void *arg, void (*release)(void *, size_t),
                              void **items, size_t *n, cdc_error_t *e)
{
    reader_t r;
    uint8_t *v = NULL;
    size_t cnt = 0, cap = 0; /* cap in bytes: the element size is elem_size */
    cdc_err_t rc = reader_open(&r, buf, len, what, e);

    if (rc != CDC_OK)
        return rc;
    int arc;
    while ((arc = avro_file_reader_read_value(r.file, &r.value)) == 0) {
        if (cdc_array_reserve(v, cap, (cnt + 1) * elem_size, 16 * elem_size) != CDC_OK) {
            rc = oom(e);
            break;
        }
        memset(v + cnt * elem_size, 0, elem_size);
        rc = decode(&r.value, v + cnt * elem_size, arg, e);
        cnt++;
        if (rc != CDC_OK)
            break;
    }
    /* EOF ends the records; another failure is a record avro-c could not decode (a
     * length the allocation cap refused, a cut datum): corrupt, never a shorter list */
    if (rc == CDC_OK && arc != EOF && avro_alloc_refused != 0)
        rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                           "%s: a record claims a length of %zu bytes, more than a file of %zu "
                           "bytes can hold",
                           what, avro_alloc_refused, len);
    else if (rc == CDC_OK && arc != EOF)
        rc = cdc_error_set(e, CDC_ERR_CORRUPT, "%s: a record does not decode: %s", what,
                           avro_strerror());
    reader_close(&r);
    if (rc != CDC_OK) {
        release(v, cnt);
        return rc;
    }
    *items = v;
    *n = cnt;
    return CDC_OK;
}

/* Field lookup; unions are unwrapped, a null branch or a missing field gives false. */
static bool field(avro_value_t *rec, const char *name, avro_value_t *out)
{
    avro_value_t v;
    if (avro_value_get_by_name(rec, name, &v, NULL) != 0)
        return false;
    if (avro_value_get_type(&v) == AVRO_UNION) {
        avro_value_t br;
        if (avro_value_get_current_branch(&v, &br) != 0)
            return false;
        v = br;
    }
    if (avro_value_get_type(&v) == AVRO_NULL)
        return false;
    *out = v;
    return true;
}

static int64_t get_num(avro_value_t *rec, const char *name, int64_t dflt)
{
    avro_value_t v;
    if (!field(rec, name, &v))
        return dflt;
    if (avro_value_get_type(&v) == AVRO_INT32) {
        int32_t i;
        return avro_value_get_int(&v, &i) == 0 ? i : dflt;
    }
    int64_t l;
    return avro_value_get_long(&v, &l) == 0 ? l : dflt;
}

static char *get_str(avro_value_t *rec, const char *name)
{
    avro_value_t v;
    const char *s;
    size_t n;
    if (!field(rec, name, &v) || avro_value_get_string(&v, &s, &n) != 0)
        return NULL;
    return strdup(s);
}

static cdc_ice_col_stats_t *stats_for(cdc_ice_data_file_t *f, int32_t id)
{
    for (size_t i = 0; i < f->nstats; i++)
        if (f->stats[i].field_id == id)
            return &f->stats[i];
    if (cdc_array_resize(f->stats, f->nstats + 1) != CDC_OK)
        return NULL;
    cdc_ice_col_stats_t *s = &f->stats[f->nstats++];
    memset(s, 0, sizeof(*s));
    s->field_id = id;
    s->column_size = s->value_count = s->null_count = s->nan_count = -1;
    return s;
}

static bool read_stat_map(avro_value_t *df, const char *name, stat_map_t m, cdc_ice_data_file_t *f)
{
    avro_value_t arr;
    size_t n = 0;
    if (!field(df, name, &arr))
        return true;
    avro_value_get_size(&arr, &n);
    for (size_t i = 0; i < n; i++) {
        avro_value_t kv, k, v;
        int32_t key;
        if (avro_value_get_by_index(&arr, i, &kv, NULL) != 0 ||
            avro_value_get_by_name(&kv, "key", &k, NULL) != 0 ||
            avro_value_get_by_name(&kv, "value", &v, NULL) != 0 ||
            avro_value_get_int(&k, &key) != 0)
            return false;
        cdc_ice_col_stats_t *s = stats_for(f, key);
        if (!s)
            return false;
        int64_t l = 0;
        const void *p;
        size_t bl;
        switch (m) {
        case MAP_SIZES:
        case MAP_VALUES:
        case MAP_NULLS:
        case MAP_NANS:
            avro_value_get_long(&v, &l);
            if (m == MAP_SIZES)
                s->column_size = l;
            else if (m == MAP_VALUES)
                s->value_count = l;
            else if (m == MAP_NULLS)
                s->null_count = l;
            else
                s->nan_count = l;
            break;
        case MAP_LOWER:
        case MAP_UPPER:
            if (avro_value_get_bytes(&v, &p, &bl) != 0)
                return false;
            if (bl > sizeof(s->lower))
                break; /* longer than we can carry: drop, bounds are optional */
            if (m == MAP_LOWER) {
                memcpy(s->lower, p, bl);
                s->lower_len = bl;
            } else {
                memcpy(s->upper, p, bl);
                s->upper_len = bl;
            }
            s->has_bounds = true;
            break;
        }
    }
    return true;
}

static bool read_long_list(avro_value_t *df, const char *name, int64_t **out, size_t *nout)
{
    avro_value_t arr;
    size_t n = 0;
    *out = NULL;
    *nout = 0;
    if (!field(df, name, &arr))
        return true;
    avro_value_get_size(&arr, &n);
    if (n == 0)
        return true;
    int64_t *v = calloc(n, sizeof(*v));
    if (!v)
        return false;
    for (size_t i = 0; i < n; i++) {
        avro_value_t el;
        if (avro_value_get_by_index(&arr, i, &el, NULL) != 0) {
            free(v);
            return false;
        }
        if (avro_value_get_type(&el) == AVRO_INT32) {
            int32_t x = 0;
            avro_value_get_int(&el, &x);
            v[i] = x;
        } else {
            avro_value_get_long(&el, &v[i]);
        }
    }
    *out = v;
    *nout = n;
    return true;
}

/* A union's current branch (the value itself when not a union); false for null. */
static bool unwrap(avro_value_t *v)
{
    avro_value_t br;
    if (avro_value_get_type(v) == AVRO_UNION) {
        if (avro_value_get_current_branch(v, &br) != 0)
            return false;
        *v = br;
    }
    return avro_value_get_type(v) != AVRO_NULL;
}

/*
 * One partition value into its single-value encoding. type (NULL = as the Avro type
 * says) gives the width of ints (a promoted int read as long) and marks decimals,
 * which are stored as fixed of their precision's size and kept minimal here.
 */
static bool decode_part_value(avro_value_t *v, const cdc_ice_field_t *type,
                              cdc_ice_part_value_t *out)
{
    static const cdc_ice_field_t as_avro[] = {
        [AVRO_INT32] = {.type = CDC_ICE_INT},       [AVRO_INT64] = {.type = CDC_ICE_LONG},
        [AVRO_FLOAT] = {.type = CDC_ICE_FLOAT},     [AVRO_DOUBLE] = {.type = CDC_ICE_DOUBLE},
        [AVRO_BOOLEAN] = {.type = CDC_ICE_BOOLEAN},
    };
    cdc_ice_part_value_t raw = {0};
    cdc_ice_value_t val = {0};
    uint8_t buf[16];
    avro_type_t at = avro_value_get_type(v);
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
    int b;

    memset(out, 0, sizeof(*out));
    if (type == NULL && (at == AVRO_INT32 || at == AVRO_INT64 || at == AVRO_FLOAT ||
                         at == AVRO_DOUBLE || at == AVRO_BOOLEAN))
        type = &as_avro[at];
    switch (at) {
    case AVRO_INT32:
    case AVRO_INT64:
        if (at == AVRO_INT32 ? avro_value_get_int(v, &i32) : avro_value_get_long(v, &i64))
            return false;
        if (at == AVRO_INT32)
            i64 = i32;
        if (type->type == CDC_ICE_INT || type->type == CDC_ICE_DATE)
            val.v.i32 = (int32_t)i64;
        else
            val.v.i64 = i64;
        break;
    case AVRO_FLOAT:
    case AVRO_DOUBLE:
        if (at == AVRO_FLOAT ? avro_value_get_float(v, &f32) : avro_value_get_double(v, &f64))
            return false;
        if (at == AVRO_FLOAT)
            f64 = f32;
        if (type->type == CDC_ICE_FLOAT)
            val.v.f32 = (float)f64;
        else
            val.v.f64 = f64;
        break;
    case AVRO_BOOLEAN:
        if (avro_value_get_boolean(v, &b) != 0)
            return false;
        val.v.b = b != 0;
        break;
    case AVRO_STRING: {
        const char *p;
        if (avro_value_get_string(v, &p, &raw.len) != 0 || raw.len == 0)
            return false;
        raw.bytes = (uint8_t *)p;
        raw.len--; /* avro-c counts the terminating NUL */
        return cdc_ice_part_value_copy(out, &raw) == CDC_OK;
    }
    case AVRO_BYTES:
    case AVRO_FIXED: {
        const void *p;
        if ((at == AVRO_BYTES ? avro_value_get_bytes(v, &p, &raw.len)
                              : avro_value_get_fixed(v, &p, &raw.len)) != 0)
            return false;
        raw.bytes = (uint8_t *)p;
        if (type != NULL && type->type == CDC_ICE_DECIMAL)
            return raw.len >= 1 && raw.len <= 16 &&
                   cdc_ice_part_value_set_decimal(cdc_ice_part_value_decimal(&raw), out) == CDC_OK;
        return cdc_ice_part_value_copy(out, &raw) == CDC_OK;
    }
    default:
        return false;
    }
    if (!cdc_ice_bound_encode(type, &val, buf, sizeof(buf), &raw.len))
        return false;
    raw.bytes = buf;
    return cdc_ice_part_value_copy(out, &raw) == CDC_OK;
}

static bool decode_partition(avro_value_t *df, const cdc_ice_field_t *part_fields, size_t npart,
                             cdc_ice_data_file_t *f)
{
    avro_value_t rec;
    size_t n = 0;

    if (!field(df, "partition", &rec) || avro_value_get_size(&rec, &n) != 0 || n == 0)
        return true;
    if ((f->partition = calloc(n, sizeof(*f->partition))) == NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        avro_value_t v;
        f->npartition++;
        if (avro_value_get_by_index(&rec, i, &v, NULL) != 0)
            return false;
        if (!unwrap(&v)) {
            f->partition[i].null = true;
            continue;
        }
        if (!decode_part_value(&v, part_fields && i < npart ? &part_fields[i] : NULL,
                               &f->partition[i]))
            return false;
    }
    return true;
}

static cdc_err_t decode_entry(avro_value_t *rec, const cdc_ice_manifest_file_t *mf, int32_t spec_id,
                              const cdc_ice_field_t *part_fields, size_t npart,
                              cdc_ice_manifest_entry_t *en, cdc_error_t *e)
{
    avro_value_t df;
    memset(en, 0, sizeof(*en));
    en->status = (cdc_ice_entry_status_t)get_num(rec, "status", 0);
    en->snapshot_id = get_num(rec, "snapshot_id", -1);
    en->sequence_number = get_num(rec, "sequence_number", -1);
    en->file_sequence_number = get_num(rec, "file_sequence_number", -1);
    if (mf) {
        if (en->snapshot_id < 0)
            en->snapshot_id = mf->added_snapshot_id;
        if (en->status == CDC_ICE_ENTRY_ADDED) {
            if (en->sequence_number < 0)
                en->sequence_number = mf->sequence_number;
            if (en->file_sequence_number < 0)
                en->file_sequence_number = mf->sequence_number;
        }
    }
    if (!field(rec, "data_file", &df))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "manifest entry has no data_file");
    cdc_ice_data_file_t *f = &en->file;
    f->content = (cdc_ice_content_t)get_num(&df, "content", 0);
    f->path = get_str(&df, "file_path");
    if (!f->path)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "manifest entry has no file_path");
    f->record_count = get_num(&df, "record_count", 0);
    f->file_size_in_bytes = get_num(&df, "file_size_in_bytes", 0);
    f->schema_id = -1;
    f->spec_id = spec_id;
    f->sort_order_id = (int32_t)get_num(&df, "sort_order_id", 0);
    if (!decode_partition(&df, part_fields, npart, f))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "could not decode the partition of \"%s\"",
                             f->path);
    int64_t *ids = NULL;
    size_t nids = 0;
    if (!read_stat_map(&df, "column_sizes", MAP_SIZES, f) ||
        !read_stat_map(&df, "value_counts", MAP_VALUES, f) ||
        !read_stat_map(&df, "null_value_counts", MAP_NULLS, f) ||
        !read_stat_map(&df, "nan_value_counts", MAP_NANS, f) ||
        !read_stat_map(&df, "lower_bounds", MAP_LOWER, f) ||
        !read_stat_map(&df, "upper_bounds", MAP_UPPER, f) ||
        !read_long_list(&df, "split_offsets", &f->split_offsets, &f->nsplit_offsets) ||
        !read_long_list(&df, "equality_ids", &ids, &nids))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "could not decode data_file of \"%s\"", f->path);
    if (nids > 0) {
        f->equality_ids = calloc(nids, sizeof(int32_t));
        if (!f->equality_ids) {
            free(ids);
            return oom(e);
        }
        for (size_t i = 0; i < nids; i++)
            f->equality_ids[i] = (int32_t)ids[i];
        f->nequality_ids = nids;
    }
    free(ids);
    return CDC_OK;
}

/* What decode_entry() needs besides the record. */
typedef struct entry_args {
    const cdc_ice_manifest_file_t *mf;
    int32_t spec_id;
    const cdc_ice_field_t *part_fields;
    size_t npart;
} entry_args_t;

static cdc_err_t entry_record(avro_value_t *rec, void *elem, const void *arg, cdc_error_t *e)
{
    const entry_args_t *a = arg;
    return decode_entry(rec, a->mf, a->spec_id, a->part_fields, a->npart, elem, e);
}

static void release_entries(void *v, size_t n)
{
    cdc_ice_manifest_entries_free(v, n);
}

cdc_err_t cdc_ice_manifest_read(const uint8_t *buf, size_t len, const cdc_ice_manifest_file_t *mf,
                                const cdc_ice_field_t *part_fields, size_t npart,
                                cdc_ice_manifest_entry_t **entries, size_t *n, cdc_error_t *e)
{
    entry_args_t a = {.mf = mf, .part_fields = part_fields, .npart = npart};
    char *hv = NULL;
    void *v;
    cdc_err_t rc;

    if (mf != NULL)
        a.spec_id = mf->spec_id;
    else if (cdc_avro_header_get(buf, len, "partition-spec-id", &hv, NULL) == CDC_OK)
        a.spec_id = (int32_t)strtol(hv, NULL, 10);
    free(hv);
    rc = read_records(buf, len, mf && mf->path ? mf->path : "manifest", sizeof(**entries),
                      entry_record, &a, release_entries, &v, n, e);
    if (rc == CDC_OK)
        *entries = v;
    return rc;
}

void cdc_ice_manifest_entries_free(cdc_ice_manifest_entry_t *entries, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cdc_ice_data_file_clear(&entries[i].file);
    free(entries);
}

static bool get_bool(avro_value_t *rec, const char *name)
{
    avro_value_t v;
    int b = 0;
    return field(rec, name, &v) && avro_value_get_boolean(&v, &b) == 0 && b != 0;
}

static bool get_bound(avro_value_t *rec, const char *name, cdc_ice_part_value_t *out)
{
    avro_value_t v;
    cdc_ice_part_value_t raw = {.null = true};
    const void *p;
    if (field(rec, name, &v)) {
        if (avro_value_get_bytes(&v, &p, &raw.len) != 0)
            return false;
        raw.bytes = (uint8_t *)p;
        raw.null = false;
    }
    return cdc_ice_part_value_copy(out, &raw) == CDC_OK;
}

/* The manifest-list entry's field summaries (507), if any. */
static bool read_summaries(avro_value_t *rec, cdc_ice_manifest_file_t *m)
{
    avro_value_t arr;
    size_t n = 0;
    if (!field(rec, "partitions", &arr) || avro_value_get_size(&arr, &n) != 0 || n == 0)
        return true;
    if ((m->partitions = calloc(n, sizeof(*m->partitions))) == NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        avro_value_t fs;
        cdc_ice_field_summary_t *s = &m->partitions[i];
        m->npartitions++;
        if (avro_value_get_by_index(&arr, i, &fs, NULL) != 0)
            return false;
        s->contains_null = get_bool(&fs, "contains_null");
        s->contains_nan = get_bool(&fs, "contains_nan");
        if (!get_bound(&fs, "lower_bound", &s->lower) || !get_bound(&fs, "upper_bound", &s->upper))
            return false;
    }
    return true;
}

/* One manifest-list entry. */
static cdc_err_t list_record(avro_value_t *rec, void *elem, const void *arg, cdc_error_t *e)
{
    cdc_ice_manifest_file_t *m = elem;
    (void)arg;
    m->path = get_str(rec, "manifest_path");
    if (!m->path)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "manifest list entry has no manifest_path");
    m->length = get_num(rec, "manifest_length", 0);
    m->spec_id = (int32_t)get_num(rec, "partition_spec_id", 0);
    m->content = (cdc_ice_manifest_content_t)get_num(rec, "content", 0);
    m->sequence_number = get_num(rec, "sequence_number", 0);
    m->min_sequence_number = get_num(rec, "min_sequence_number", 0);
    m->added_snapshot_id = get_num(rec, "added_snapshot_id", -1);
    m->added_files = (int32_t)get_num(rec, "added_files_count", 0);
    m->existing_files = (int32_t)get_num(rec, "existing_files_count", 0);
    m->deleted_files = (int32_t)get_num(rec, "deleted_files_count", 0);
    m->added_rows = get_num(rec, "added_rows_count", 0);
    m->existing_rows = get_num(rec, "existing_rows_count", 0);
    m->deleted_rows = get_num(rec, "deleted_rows_count", 0);
    if (!read_summaries(rec, m))
        return cdc_error_set(e, CDC_ERR_CORRUPT, "could not decode partitions of \"%s\"", m->path);
    return CDC_OK;
}

static void release_files(void *v, size_t n)
{
    cdc_ice_manifest_files_free(v, n);
}

cdc_err_t cdc_ice_manifest_list_read(const uint8_t *buf, size_t len,
                                     cdc_ice_manifest_file_t **files, size_t *n, cdc_error_t *e)
{
    void *v;
    cdc_err_t rc = read_records(buf, len, "manifest list", sizeof(**files), list_record, NULL,
                                release_files, &v, n, e);
    if (rc == CDC_OK)
        *files = v;
    return rc;
}

void cdc_ice_manifest_files_free(cdc_ice_manifest_file_t *files, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cdc_ice_manifest_file_clear(&files[i]);
    free(files);
}

cdc_err_t cdc_avro_header_get(const uint8_t *buf, size_t len, const char *key, char **value,
                              cdc_error_t *e)
{
    const uint8_t *v;
    size_t vl;
    cdc_err_t rc = header_walk(buf, len, key, &v, &vl, NULL, e);
    if (rc != CDC_OK)
        return rc;
    *value = strndup((const char *)v, vl);
    return *value ? CDC_OK : oom(e);
}
