/*
 * Manifests and manifest lists (see manifest.h). The Avro schemas below are the
 * Iceberg v2 spec's manifest_entry and manifest_file schemas with their field ids;
 * field order matters for the binary encoding in encode_entry()/encode_file().
 */
#include "common/iceberg/manifest.h"

#include <avro.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ENTRY_SCHEMA[] =
    "{\"type\":\"record\",\"name\":\"manifest_entry\",\"fields\":[{\"name\":\"status\",\"type\":"
    "\"int\",\"field-id"
    "\":0},{\"name\":\"snapshot_id\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":1},"
    "{\"name\":\"se"
    "quence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":3},{\"name\":"
    "\"file_sequence_"
    "number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":4},{\"name\":\"data_"
    "file\",\"type\":{\"t"
    "ype\":\"record\",\"name\":\"r2\",\"fields\":[{\"name\":\"content\",\"type\":\"int\",\"doc\":"
    "\"Contents of the "
    "file: 0=data, 1=position deletes, 2=equality "
    "deletes\",\"field-id\":134},{\"name\":\"file_path\","
    "\"type\":\"string\",\"doc\":\"Location URI with FS "
    "scheme\",\"field-id\":100},{\"name\":\"file_format\","
    "\"type\":\"string\",\"doc\":\"File format name: avro, orc, or "
    "parquet\",\"field-id\":101},{\"name\":\"p"
    "artition\",\"type\":{\"type\":\"record\",\"name\":\"r102\",\"fields\":[]},\"doc\":\"Partition "
    "data tuple, "
    "schema based on the partition "
    "spec\",\"field-id\":102},{\"name\":\"record_count\",\"type\":\"long\",\""
    "doc\":\"Number of records in the "
    "file\",\"field-id\":103},{\"name\":\"file_size_in_bytes\",\"type\":\""
    "long\",\"doc\":\"Total file size in "
    "bytes\",\"field-id\":104},{\"name\":\"column_sizes\",\"type\":[\"nul"
    "l\",{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"k117_v118\",\"fields\":[{"
    "\"name\":\"key\",\"ty"
    "pe\":\"int\",\"field-id\":117},{\"name\":\"value\",\"type\":\"long\",\"field-id\":118}]},"
    "\"logicalType\":\"m"
    "ap\"}],\"doc\":\"Map of column id to total size on "
    "disk\",\"default\":null,\"field-id\":108},{\"name"
    "\":\"value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\","
    "\"name\":\"k119_v120"
    "\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":119},{\"name\":\"value\","
    "\"type\":\"long\",\"fiel"
    "d-id\":120}]},\"logicalType\":\"map\"}],\"doc\":\"Map of column id to total count, including "
    "null "
    "and "
    "NaN\",\"default\":null,\"field-id\":109},{\"name\":\"null_value_counts\",\"type\":[\"null\",{"
    "\"type\""
    ":\"array\",\"items\":{\"type\":\"record\",\"name\":\"k121_v122\",\"fields\":[{\"name\":"
    "\"key\",\"type\":\"int\","
    "\"field-id\":121},{\"name\":\"value\",\"type\":\"long\",\"field-id\":122}]},\"logicalType\":"
    "\"map\"}],\"doc"
    "\":\"Map of column id to null value "
    "count\",\"default\":null,\"field-id\":110},{\"name\":\"nan_value"
    "_counts\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":"
    "\"k138_v139\",\"field"
    "s\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":138},{\"name\":\"value\",\"type\":"
    "\"long\",\"field-id\":13"
    "9}]},\"logicalType\":\"map\"}],\"doc\":\"Map of column id to number of NaN values in the "
    "column\","
    "\"default\":null,\"field-id\":137},{\"name\":\"lower_bounds\",\"type\":[\"null\",{\"type\":"
    "\"array\",\"item"
    "s\":{\"type\":\"record\",\"name\":\"k126_v127\",\"fields\":[{\"name\":\"key\",\"type\":"
    "\"int\",\"field-id\":126"
    "},{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":127}]},\"logicalType\":\"map\"}],"
    "\"doc\":\"Map of col"
    "umn id to lower "
    "bound\",\"default\":null,\"field-id\":125},{\"name\":\"upper_bounds\",\"type\":[\"null"
    "\",{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"k129_v130\",\"fields\":[{"
    "\"name\":\"key\",\"typ"
    "e\":\"int\",\"field-id\":129},{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":130}]},"
    "\"logicalType\":\"m"
    "ap\"}],\"doc\":\"Map of column id to upper "
    "bound\",\"default\":null,\"field-id\":128},{\"name\":\"key_"
    "metadata\",\"type\":[\"null\",\"bytes\"],\"doc\":\"Encryption key metadata "
    "blob\",\"default\":null,\"fie"
    "ld-id\":131},{\"name\":\"split_offsets\",\"type\":[\"null\",{\"type\":\"array\",\"items\":"
    "\"long\",\"element"
    "-id\":133}],\"doc\":\"Splittable "
    "offsets\",\"default\":null,\"field-id\":132},{\"name\":\"equality_ids"
    "\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"int\",\"element-id\":136}],\"doc\":"
    "\"Equality comparis"
    "on field "
    "IDs\",\"default\":null,\"field-id\":135},{\"name\":\"sort_order_id\",\"type\":[\"null\","
    "\"int\"]"
    ",\"doc\":\"Sort order "
    "ID\",\"default\":null,\"field-id\":140},{\"name\":\"referenced_data_file\",\"type"
    "\":[\"null\",\"string\"],\"doc\":\"Fully qualified location (URI with FS scheme) of a data "
    "file th"
    "at all deletes reference\",\"default\":null,\"field-id\":143}]},\"field-id\":2}]}";

static const char LIST_SCHEMA[] =
    "{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":[{\"name\":\"manifest_path\","
    "\"type\":\"string\","
    "\"doc\":\"Location URI with FS "
    "scheme\",\"field-id\":500},{\"name\":\"manifest_length\",\"type\":\"long"
    "\",\"doc\":\"Total file size in "
    "bytes\",\"field-id\":501},{\"name\":\"partition_spec_id\",\"type\":\"int"
    "\",\"doc\":\"Spec ID used to "
    "write\",\"field-id\":502},{\"name\":\"content\",\"type\":\"int\",\"doc\":\"Cont"
    "ents of the manifest: 0=data, "
    "1=deletes\",\"field-id\":517},{\"name\":\"sequence_number\",\"type\":"
    "\"long\",\"doc\":\"Sequence number when the manifest was "
    "added\",\"field-id\":515},{\"name\":\"min_se"
    "quence_number\",\"type\":\"long\",\"doc\":\"Lowest sequence number in the "
    "manifest\",\"field-id\":516"
    "},{\"name\":\"added_snapshot_id\",\"type\":\"long\",\"doc\":\"Snapshot ID that added the "
    "manifest\",\"f"
    "ield-id\":503},{\"name\":\"added_files_count\",\"type\":\"int\",\"doc\":\"Added entry "
    "count\",\"field-id"
    "\":504},{\"name\":\"existing_files_count\",\"type\":\"int\",\"doc\":\"Existing entry "
    "count\",\"field-id\""
    ":505},{\"name\":\"deleted_files_count\",\"type\":\"int\",\"doc\":\"Deleted entry "
    "count\",\"field-id\":50"
    "6},{\"name\":\"added_rows_count\",\"type\":\"long\",\"doc\":\"Added rows "
    "count\",\"field-id\":512},{\"nam"
    "e\":\"existing_rows_count\",\"type\":\"long\",\"doc\":\"Existing rows "
    "count\",\"field-id\":513},{\"name\""
    ":\"deleted_rows_count\",\"type\":\"long\",\"doc\":\"Deleted rows "
    "count\",\"field-id\":514},{\"name\":\"pa"
    "rtitions\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":"
    "\"r508\",\"fields\":["
    "{\"name\":\"contains_null\",\"type\":\"boolean\",\"doc\":\"True if any file has a null "
    "partition valu"
    "e\",\"field-id\":509},{\"name\":\"contains_nan\",\"type\":[\"null\",\"boolean\"],\"doc\":"
    "\"True if any fil"
    "e has a nan partition "
    "value\",\"default\":null,\"field-id\":518},{\"name\":\"lower_bound\",\"type\":["
    "\"null\",\"bytes\"],\"doc\":\"Partition lower bound for all "
    "files\",\"default\":null,\"field-id\":510}"
    ",{\"name\":\"upper_bound\",\"type\":[\"null\",\"bytes\"],\"doc\":\"Partition upper bound for "
    "all files\""
    ",\"default\":null,\"field-id\":511}]},\"element-id\":508}],\"doc\":\"Summary for each "
    "partition\",\"d"
    "efault\":null,\"field-id\":507},{\"name\":\"key_metadata\",\"type\":[\"null\",\"bytes\"],"
    "\"doc\":\"Encrypt"
    "ion key metadata blob\",\"default\":null,\"field-id\":519}]}";

static cdc_err_t oom(cdc_error_t *e)
{
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory while encoding manifest");
}

static void put_null_long(cdc_avro_buf_t *b, int64_t v)
{
    if (v < 0) {
        cdc_avro_put_long(b, 0);
    } else {
        cdc_avro_put_long(b, 1);
        cdc_avro_put_long(b, v);
    }
}

typedef enum { MAP_SIZES, MAP_VALUES, MAP_NULLS, MAP_NANS, MAP_LOWER, MAP_UPPER } stat_map_t;

static bool stat_present(const cdc_ice_col_stats_t *s, stat_map_t m)
{
    switch (m) {
    case MAP_SIZES:
        return s->column_size >= 0;
    case MAP_VALUES:
        return s->value_count >= 0;
    case MAP_NULLS:
        return s->null_count >= 0;
    case MAP_NANS:
        return s->nan_count >= 0;
    case MAP_LOWER:
    case MAP_UPPER:
        return s->has_bounds;
    }
    return false;
}

/* Writes one stats map as union branch 1 (array of key/value records) or null. */
static void put_stat_map(cdc_avro_buf_t *b, const cdc_ice_data_file_t *f, stat_map_t m)
{
    size_t count = 0;
    for (size_t i = 0; i < f->nstats; i++)
        count += stat_present(&f->stats[i], m);
    if (count == 0) {
        cdc_avro_put_long(b, 0); /* null */
        return;
    }
    cdc_avro_put_long(b, 1);
    cdc_avro_put_long(b, (int64_t)count);
    for (size_t i = 0; i < f->nstats; i++) {
        const cdc_ice_col_stats_t *s = &f->stats[i];
        if (!stat_present(s, m))
            continue;
        cdc_avro_put_long(b, s->field_id);
        switch (m) {
        case MAP_SIZES:
            cdc_avro_put_long(b, s->column_size);
            break;
        case MAP_VALUES:
            cdc_avro_put_long(b, s->value_count);
            break;
        case MAP_NULLS:
            cdc_avro_put_long(b, s->null_count);
            break;
        case MAP_NANS:
            cdc_avro_put_long(b, s->nan_count);
            break;
        case MAP_LOWER:
            cdc_avro_put_bytes(b, s->lower, s->lower_len);
            break;
        case MAP_UPPER:
            cdc_avro_put_bytes(b, s->upper, s->upper_len);
            break;
        }
    }
    cdc_avro_put_long(b, 0);
}

static void encode_entry(cdc_avro_buf_t *b, const cdc_ice_manifest_entry_t *en)
{
    const cdc_ice_data_file_t *f = &en->file;
    cdc_avro_put_long(b, en->status);
    put_null_long(b, en->snapshot_id);
    put_null_long(b, en->sequence_number);
    put_null_long(b, en->file_sequence_number);
    cdc_avro_put_long(b, f->content);
    cdc_avro_put_string(b, f->path);
    cdc_avro_put_string(b, "PARQUET");
    /* partition: empty record, zero bytes */
    cdc_avro_put_long(b, f->record_count);
    cdc_avro_put_long(b, f->file_size_in_bytes);
    put_stat_map(b, f, MAP_SIZES);
    put_stat_map(b, f, MAP_VALUES);
    put_stat_map(b, f, MAP_NULLS);
    put_stat_map(b, f, MAP_NANS);
    put_stat_map(b, f, MAP_LOWER);
    put_stat_map(b, f, MAP_UPPER);
    cdc_avro_put_long(b, 0); /* key_metadata: null */
    if (f->nsplit_offsets > 0) {
        cdc_avro_put_long(b, 1);
        cdc_avro_put_long(b, (int64_t)f->nsplit_offsets);
        for (size_t i = 0; i < f->nsplit_offsets; i++)
            cdc_avro_put_long(b, f->split_offsets[i]);
        cdc_avro_put_long(b, 0);
    } else {
        cdc_avro_put_long(b, 0);
    }
    if (f->content == CDC_ICE_CONTENT_EQUALITY_DELETES && f->nequality_ids > 0) {
        cdc_avro_put_long(b, 1);
        cdc_avro_put_long(b, (int64_t)f->nequality_ids);
        for (size_t i = 0; i < f->nequality_ids; i++)
            cdc_avro_put_long(b, f->equality_ids[i]);
        cdc_avro_put_long(b, 0);
    } else {
        cdc_avro_put_long(b, 0);
    }
    /* sort_order_id: 0 (unsorted) for data and equality deletes, null for position deletes */
    if (f->content == CDC_ICE_CONTENT_POSITION_DELETES) {
        cdc_avro_put_long(b, 0);
    } else {
        cdc_avro_put_long(b, 1);
        cdc_avro_put_long(b, 0);
    }
    cdc_avro_put_long(b, 0); /* referenced_data_file: null */
}

cdc_err_t cdc_ice_manifest_write(const cdc_ice_manifest_entry_t *entries, size_t n,
                                 const char *schema_json, int32_t schema_id,
                                 cdc_ice_manifest_content_t content, cdc_avro_codec_t codec,
                                 uint8_t **out, size_t *len, cdc_error_t *e)
{
    char sid[16];
    snprintf(sid, sizeof(sid), "%d", schema_id);
    const char *meta[] = {
        "schema",
        schema_json,
        "schema-id",
        sid,
        "partition-spec",
        "[]",
        "partition-spec-id",
        "0",
        "format-version",
        "2",
        "content",
        content == CDC_ICE_MANIFEST_DELETES ? "deletes" : "data",
    };
    cdc_avro_writer_t w;
    cdc_err_t rc = cdc_avro_writer_init(&w, ENTRY_SCHEMA, codec, meta, 6, e);
    if (rc != CDC_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (!entries[i].file.path) {
            cdc_avro_writer_discard(&w);
            return cdc_error_set(e, CDC_ERR_INVALID, "manifest entry %zu has no file path", i);
        }
        encode_entry(&w.record, &entries[i]);
        if ((rc = cdc_avro_writer_end_record(&w, e)) != CDC_OK) {
            cdc_avro_writer_discard(&w);
            return rc;
        }
    }
    return cdc_avro_writer_finish(&w, out, len, e);
}

static void encode_file(cdc_avro_buf_t *b, const cdc_ice_manifest_file_t *m)
{
    cdc_avro_put_string(b, m->path);
    cdc_avro_put_long(b, m->length);
    cdc_avro_put_long(b, m->spec_id);
    cdc_avro_put_long(b, m->content);
    cdc_avro_put_long(b, m->sequence_number);
    cdc_avro_put_long(b, m->min_sequence_number);
    cdc_avro_put_long(b, m->added_snapshot_id);
    cdc_avro_put_long(b, m->added_files);
    cdc_avro_put_long(b, m->existing_files);
    cdc_avro_put_long(b, m->deleted_files);
    cdc_avro_put_long(b, m->added_rows);
    cdc_avro_put_long(b, m->existing_rows);
    cdc_avro_put_long(b, m->deleted_rows);
    cdc_avro_put_long(b, 1); /* partitions: empty list (unpartitioned) */
    cdc_avro_put_long(b, 0);
    cdc_avro_put_long(b, 0); /* key_metadata: null */
}

cdc_err_t cdc_ice_manifest_list_write(const cdc_ice_manifest_file_t *files, size_t n,
                                      int64_t snapshot_id, int64_t parent_id,
                                      int64_t sequence_number, cdc_avro_codec_t codec,
                                      uint8_t **out, size_t *len, cdc_error_t *e)
{
    char sid[24], pid[24], seq[24];
    snprintf(sid, sizeof(sid), "%lld", (long long)snapshot_id);
    snprintf(pid, sizeof(pid), "%lld", (long long)parent_id);
    snprintf(seq, sizeof(seq), "%lld", (long long)sequence_number);
    const char *meta[] = {
        "snapshot-id",    sid, "sequence-number",    seq,
        "format-version", "2", "parent-snapshot-id", pid,
    };
    cdc_avro_writer_t w;
    cdc_err_t rc = cdc_avro_writer_init(&w, LIST_SCHEMA, codec, meta, parent_id >= 0 ? 4 : 3, e);
    if (rc != CDC_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        encode_file(&w.record, &files[i]);
        if ((rc = cdc_avro_writer_end_record(&w, e)) != CDC_OK) {
            cdc_avro_writer_discard(&w);
            return rc;
        }
    }
    return cdc_avro_writer_finish(&w, out, len, e);
}

/* ---- reading through avro-c --------------------------------------------------------- */

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
    FILE *fp = fmemopen((void *)buf, len, "rb");
    if (!fp)
        return oom(e);
    if (avro_file_reader_fp(fp, what, 1, &r->file) != 0)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "could not read avro header of %s: %s", what,
                             avro_strerror());
    /* returns a new reference (avro-c >= 1.8); the class keeps its own */
    avro_schema_t ws = avro_file_reader_get_writer_schema(r->file);
    r->iface = avro_generic_class_from_schema(ws);
    avro_schema_decref(ws);
    if (!r->iface || avro_generic_value_new(r->iface, &r->value) != 0) {
        avro_file_reader_close(r->file);
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
    cdc_ice_col_stats_t *s = realloc(f->stats, (f->nstats + 1) * sizeof(*s));
    if (!s)
        return NULL;
    f->stats = s;
    s = &f->stats[f->nstats++];
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

static cdc_err_t decode_entry(avro_value_t *rec, const cdc_ice_manifest_file_t *mf,
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

cdc_err_t cdc_ice_manifest_read(const uint8_t *buf, size_t len, const cdc_ice_manifest_file_t *mf,
                                cdc_ice_manifest_entry_t **entries, size_t *n, cdc_error_t *e)
{
    reader_t r;
    const char *what = mf && mf->path ? mf->path : "manifest";
    cdc_err_t rc = reader_open(&r, buf, len, what, e);
    if (rc != CDC_OK)
        return rc;
    cdc_ice_manifest_entry_t *v = NULL;
    size_t cnt = 0, cap = 0;
    while (avro_file_reader_read_value(r.file, &r.value) == 0) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            cdc_ice_manifest_entry_t *nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                rc = oom(e);
                goto fail;
            }
            v = nv;
        }
        rc = decode_entry(&r.value, mf, &v[cnt], e);
        cnt++;
        if (rc != CDC_OK)
            goto fail;
    }
    reader_close(&r);
    *entries = v;
    *n = cnt;
    return CDC_OK;
fail:
    cdc_ice_manifest_entries_free(v, cnt);
    reader_close(&r);
    return rc;
}

void cdc_ice_manifest_entries_free(cdc_ice_manifest_entry_t *entries, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cdc_ice_data_file_clear(&entries[i].file);
    free(entries);
}

cdc_err_t cdc_ice_manifest_list_read(const uint8_t *buf, size_t len,
                                     cdc_ice_manifest_file_t **files, size_t *n, cdc_error_t *e)
{
    reader_t r;
    cdc_err_t rc = reader_open(&r, buf, len, "manifest list", e);
    if (rc != CDC_OK)
        return rc;
    cdc_ice_manifest_file_t *v = NULL;
    size_t cnt = 0, cap = 0;
    while (avro_file_reader_read_value(r.file, &r.value) == 0) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            cdc_ice_manifest_file_t *nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                rc = oom(e);
                goto fail;
            }
            v = nv;
        }
        cdc_ice_manifest_file_t *m = &v[cnt++];
        memset(m, 0, sizeof(*m));
        m->path = get_str(&r.value, "manifest_path");
        if (!m->path) {
            rc = cdc_error_set(e, CDC_ERR_CORRUPT, "manifest list entry has no manifest_path");
            goto fail;
        }
        m->length = get_num(&r.value, "manifest_length", 0);
        m->spec_id = (int32_t)get_num(&r.value, "partition_spec_id", 0);
        m->content = (cdc_ice_manifest_content_t)get_num(&r.value, "content", 0);
        m->sequence_number = get_num(&r.value, "sequence_number", 0);
        m->min_sequence_number = get_num(&r.value, "min_sequence_number", 0);
        m->added_snapshot_id = get_num(&r.value, "added_snapshot_id", -1);
        m->added_files = (int32_t)get_num(&r.value, "added_files_count", 0);
        m->existing_files = (int32_t)get_num(&r.value, "existing_files_count", 0);
        m->deleted_files = (int32_t)get_num(&r.value, "deleted_files_count", 0);
        m->added_rows = get_num(&r.value, "added_rows_count", 0);
        m->existing_rows = get_num(&r.value, "existing_rows_count", 0);
        m->deleted_rows = get_num(&r.value, "deleted_rows_count", 0);
    }
    reader_close(&r);
    *files = v;
    *n = cnt;
    return CDC_OK;
fail:
    cdc_ice_manifest_files_free(v, cnt);
    reader_close(&r);
    return rc;
}

void cdc_ice_manifest_files_free(cdc_ice_manifest_file_t *files, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(files[i].path);
    free(files);
}

cdc_err_t cdc_avro_header_get(const uint8_t *buf, size_t len, const char *key, char **value,
                              cdc_error_t *e)
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
            if (!(used = cdc_avro_zigzag_decode(buf + p, len - p, &bytes)))
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
            if ((size_t)kl == strlen(key) && memcmp(k, key, (size_t)kl) == 0) {
                *value = strndup((const char *)buf + p, (size_t)vl);
                return *value ? CDC_OK : oom(e);
            }
            p += (size_t)vl;
        }
    }
    return cdc_error_set(e, CDC_ERR_NOT_FOUND, "avro header has no key \"%s\"", key);
bad:
    return cdc_error_set(e, CDC_ERR_CORRUPT, "truncated avro header");
}
