/*
 * Writing manifests and manifest lists (see manifest.h; reading is in
 * manifest_read.c). The Avro schemas below are the Iceberg v2 spec's manifest_entry
 * and manifest_file schemas with their field ids; field order matters for the binary
 * encoding in encode_entry()/encode_file(). The partition record (r102) of a manifest
 * is generated from its spec's result types. Also the partition summaries of a
 * manifest-list entry and the entry's copy and release.
 */
#include "common/iceberg/manifest.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/iceberg/decimal.h"
#include "common/iceberg/manifest_int.h"

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

static void put_null_long(cdc_avro_buf_t *b, int64_t v)
{
    if (v < 0) {
        cdc_avro_put_long(b, 0);
    } else {
        cdc_avro_put_long(b, 1);
        cdc_avro_put_long(b, v);
    }
}

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

/* One optional partition value as its Avro union (part_avro_type() says which type). */
static bool put_part_value(cdc_avro_buf_t *b, const cdc_ice_field_t *f,
                           const cdc_ice_part_value_t *v)
{
    uint8_t fixed[16];
    int n;

    if (v->null) {
        cdc_avro_put_long(b, 0);
        return true;
    }
    if (!cdc_ice_part_value_valid(f, v))
        return false;
    cdc_avro_put_long(b, 1);
    if (cdc_ice_type_is_integer(f->type)) {
        cdc_avro_put_long(b, cdc_ice_part_value_int(v));
        return true;
    }
    switch (f->type) {
    case CDC_ICE_BOOLEAN:
        cdc_avro_put_bool(b, v->bytes[0] != 0);
        break;
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE: /* Avro's encoding is the single-value one: little-endian IEEE 754 */
    case CDC_ICE_UUID:   /* fixed(16) */
        cdc_avro_put_raw(b, v->bytes, v->len);
        break;
    case CDC_ICE_DECIMAL: /* fixed of the precision's size */
        n = cdc_ice_decimal_fixed_len(f->precision);
        if (v->len > (size_t)n)
            return false;
        cdc_ice_decimal_be_fixed(cdc_ice_part_value_decimal(v), fixed, n);
        cdc_avro_put_raw(b, fixed, (size_t)n);
        break;
    default: /* string, binary */
        cdc_avro_put_bytes(b, v->bytes, v->len);
        break;
    }
    return true;
}

static bool encode_entry(cdc_avro_buf_t *b, const cdc_ice_manifest_entry_t *en,
                         const cdc_ice_field_t *part_fields)
{
    const cdc_ice_data_file_t *f = &en->file;
    cdc_avro_put_long(b, en->status);
    put_null_long(b, en->snapshot_id);
    put_null_long(b, en->sequence_number);
    put_null_long(b, en->file_sequence_number);
    cdc_avro_put_long(b, f->content);
    cdc_avro_put_string(b, f->path);
    cdc_avro_put_string(b, "PARQUET");
    for (size_t i = 0; i < f->npartition; i++)
        if (!put_part_value(b, &part_fields[i], &f->partition[i]))
            return false;
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
    /* sort_order_id: set for data and equality deletes, null for position deletes */
    if (f->content == CDC_ICE_CONTENT_POSITION_DELETES) {
        cdc_avro_put_long(b, 0);
    } else {
        cdc_avro_put_long(b, 1);
        cdc_avro_put_long(b, f->sort_order_id);
    }
    cdc_avro_put_long(b, 0); /* referenced_data_file: null */
    return true;
}

/*
 * Avro name of a partition field as Iceberg Java sanitizes it: [A-Za-z_][A-Za-z0-9_]*,
 * a leading digit d becomes "_d", any other character "_x<HEX code point>".
 */
static char *avro_name(const char *name)
{
    size_t n = strlen(name);
    char *out = malloc(n * 10 + 2), *p = out;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (isalpha(c) || c == '_' || (i > 0 && isdigit(c))) {
            *p++ = (char)c;
        } else if (isdigit(c)) {
            p += sprintf(p, "_%c", c);
        } else {
            /* a UTF-8 sequence is one code point */
            uint32_t cp = c;
            int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
            cp &= more ? 0x3Fu >> more : 0xFFu;
            for (; more > 0 && i + 1 < n && ((unsigned char)name[i + 1] & 0xC0) == 0x80; more--)
                cp = cp << 6 | ((unsigned char)name[++i] & 0x3F);
            p += sprintf(p, "_x%X", (unsigned)cp);
        }
    }
    if (p == out)
        *p++ = '_';
    *p = '\0';
    return out;
}

/* Avro type of a partition field's values, from the spec's type table. */
static json_t *part_avro_type(const cdc_ice_field_t *f)
{
    static const char *const simple[CDC_ICE__TYPE_COUNT] = {
        [CDC_ICE_BOOLEAN] = "boolean", [CDC_ICE_INT] = "int",       [CDC_ICE_LONG] = "long",
        [CDC_ICE_FLOAT] = "float",     [CDC_ICE_DOUBLE] = "double", [CDC_ICE_STRING] = "string",
        [CDC_ICE_BINARY] = "bytes",
    };
    char name[48];

    switch (f->type) {
    case CDC_ICE_DATE:
        return json_pack("{s:s, s:s}", "type", "int", "logicalType", "date");
    case CDC_ICE_TIME:
        return json_pack("{s:s, s:s}", "type", "long", "logicalType", "time-micros");
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        return json_pack("{s:s, s:s, s:b}", "type", "long", "logicalType", "timestamp-micros",
                         "adjust-to-utc", f->type == CDC_ICE_TIMESTAMPTZ);
    case CDC_ICE_DECIMAL:
        snprintf(name, sizeof(name), "decimal_%d_%d_p%d", (int)f->precision, (int)f->scale,
                 (int)f->id);
        return json_pack("{s:s, s:s, s:i, s:s, s:i, s:i}", "type", "fixed", "name", name, "size",
                         cdc_ice_decimal_fixed_len(f->precision), "logicalType", "decimal",
                         "precision", (int)f->precision, "scale", (int)f->scale);
    case CDC_ICE_UUID:
        snprintf(name, sizeof(name), "uuid_fixed_p%d", (int)f->id);
        return json_pack("{s:s, s:s, s:i, s:s}", "type", "fixed", "name", name, "size", 16,
                         "logicalType", "uuid");
    default:
        return (int)f->type >= 0 && f->type < CDC_ICE__TYPE_COUNT && simple[f->type]
                   ? json_string(simple[f->type])
                   : NULL;
    }
}

/* ENTRY_SCHEMA with the partition record of these partition fields; caller frees. */
static char *entry_schema(const cdc_ice_field_t *part_fields, size_t npart)
{
    static const char empty[] = "{\"type\":\"record\",\"name\":\"r102\",\"fields\":[]}";
    const char *at = strstr(ENTRY_SCHEMA, empty);
    json_t *fields = json_array();
    char *rec = NULL, *out = NULL;

    for (size_t i = 0; fields != NULL && i < npart; i++) {
        char *name = avro_name(part_fields[i].name ? part_fields[i].name : "");
        json_t *type = part_avro_type(&part_fields[i]);
        json_t *fo = name && type
                         ? json_pack("{s:s, s:[s,o], s:n, s:i}", "name", name, "type", "null", type,
                                     "default", "field-id", (int)part_fields[i].id)
                         : NULL;
        if (fo == NULL && !(name && type))
            json_decref(type); /* json_pack() took it otherwise */
        free(name);
        if (fo == NULL || json_array_append_new(fields, fo) != 0) {
            json_decref(fields);
            return NULL;
        }
    }
    json_t *r =
        fields ? json_pack("{s:s, s:s, s:o}", "type", "record", "name", "r102", "fields", fields)
               : NULL;
    if (r != NULL)
        rec = json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(r);
    if (rec != NULL && at != NULL &&
        asprintf(&out, "%.*s%s%s", (int)(at - ENTRY_SCHEMA), ENTRY_SCHEMA, rec,
                 at + sizeof(empty) - 1) < 0)
        out = NULL;
    free(rec);
    return out;
}

cdc_err_t cdc_ice_manifest_write(const cdc_ice_manifest_entry_t *entries, size_t n,
                                 const char *schema_json, int32_t schema_id,
                                 const cdc_ice_partition_spec_t *spec,
                                 const cdc_ice_field_t *part_fields,
                                 cdc_ice_manifest_content_t content, cdc_avro_codec_t codec,
                                 uint8_t **out, size_t *len, cdc_error_t *e)
{
    static const cdc_ice_partition_spec_t unpartitioned = {0};
    char sid[16], specid[16], *schema = NULL, *spec_json = NULL;
    json_t *sj = NULL;
    cdc_avro_writer_t w;
    cdc_err_t rc;

    if (spec == NULL)
        spec = &unpartitioned;
    snprintf(sid, sizeof(sid), "%d", schema_id);
    snprintf(specid, sizeof(specid), "%d", (int)spec->spec_id);
    /* "partition-spec" holds the spec's field list */
    if ((sj = cdc_ice_partition_spec_to_jansson(spec)) == NULL ||
        (spec_json = json_dumps(json_object_get(sj, "fields"),
                                JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL ||
        (schema = entry_schema(part_fields, spec->nfields)) == NULL) {
        rc = oom(e);
        goto done;
    }
    const char *meta[] = {
        "schema",
        schema_json,
        "schema-id",
        sid,
        "partition-spec",
        spec_json,
        "partition-spec-id",
        specid,
        "format-version",
        "2",
        "content",
        content == CDC_ICE_MANIFEST_DELETES ? "deletes" : "data",
    };
    if ((rc = cdc_avro_writer_init(&w, schema, codec, meta, 6, e)) != CDC_OK)
        goto done;
    for (size_t i = 0; i < n; i++) {
        const cdc_ice_data_file_t *f = &entries[i].file;
        if (!f->path) {
            cdc_avro_writer_discard(&w);
            rc = cdc_error_set(e, CDC_ERR_INVALID, "manifest entry %zu has no file path", i);
            goto done;
        }
        if (f->spec_id != spec->spec_id || f->npartition != spec->nfields ||
            !encode_entry(&w.record, &entries[i], part_fields)) {
            cdc_avro_writer_discard(&w);
            rc = cdc_error_set(e, CDC_ERR_INVALID,
                               "file \"%s\" does not carry a valid partition of spec %d (%zu "
                               "values for %zu fields)",
                               f->path, (int)spec->spec_id, f->npartition, spec->nfields);
            goto done;
        }
        if ((rc = cdc_avro_writer_end_record(&w, e)) != CDC_OK) {
            cdc_avro_writer_discard(&w);
            goto done;
        }
    }
    rc = cdc_avro_writer_finish(&w, out, len, e);
done:
    json_decref(sj);
    free(spec_json);
    free(schema);
    return rc;
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
    cdc_avro_put_long(b, 1); /* partitions: one field_summary per partition field */
    if (m->npartitions > 0) {
        cdc_avro_put_long(b, (int64_t)m->npartitions);
        for (size_t i = 0; i < m->npartitions; i++) {
            const cdc_ice_field_summary_t *ps = &m->partitions[i];
            cdc_avro_put_bool(b, ps->contains_null);
            cdc_avro_put_long(b, 1);
            cdc_avro_put_bool(b, ps->contains_nan);
            const cdc_ice_part_value_t *bounds[2] = {&ps->lower, &ps->upper};
            for (int k = 0; k < 2; k++) {
                cdc_avro_put_long(b, bounds[k]->null ? 0 : 1);
                if (!bounds[k]->null)
                    cdc_avro_put_bytes(b, bounds[k]->bytes, bounds[k]->len);
            }
        }
    }
    cdc_avro_put_long(b, 0);
    cdc_avro_put_long(b, 0); /* key_metadata: null */
}

cdc_err_t cdc_ice_manifest_summarize(const cdc_ice_manifest_entry_t *entries, size_t n,
                                     const cdc_ice_field_t *part_fields, size_t npart,
                                     cdc_ice_manifest_file_t *mf)
{
    cdc_ice_field_summary_t *v = npart ? calloc(npart, sizeof(*v)) : NULL;

    if (npart > 0 && v == NULL)
        return CDC_ERR_NOMEM;
    for (size_t i = 0; i < npart; i++) {
        const cdc_ice_part_value_t *lo = NULL, *hi = NULL;
        for (size_t j = 0; j < n; j++) {
            const cdc_ice_data_file_t *f = &entries[j].file;
            const cdc_ice_part_value_t *x = i < f->npartition ? &f->partition[i] : NULL;
            if (x == NULL || x->null) {
                v[i].contains_null = true;
            } else if (cdc_ice_part_value_is_nan(&part_fields[i], x)) {
                v[i].contains_nan = true;
            } else {
                if (lo == NULL || cdc_ice_part_value_compare(&part_fields[i], x, lo) < 0)
                    lo = x;
                if (hi == NULL || cdc_ice_part_value_compare(&part_fields[i], x, hi) > 0)
                    hi = x;
            }
        }
        static const cdc_ice_part_value_t none = {.null = true};
        if (cdc_ice_part_value_copy(&v[i].lower, lo ? lo : &none) != CDC_OK ||
            cdc_ice_part_value_copy(&v[i].upper, hi ? hi : &none) != CDC_OK) {
            mf->partitions = v;
            mf->npartitions = i + 1;
            return CDC_ERR_NOMEM;
        }
    }
    mf->partitions = v;
    mf->npartitions = npart;
    return CDC_OK;
}

cdc_err_t cdc_ice_manifest_file_copy(cdc_ice_manifest_file_t *dst,
                                     const cdc_ice_manifest_file_t *src)
{
    *dst = *src;
    dst->partitions = NULL;
    dst->npartitions = 0;
    if ((dst->path = strdup(src->path ? src->path : "")) == NULL)
        goto fail;
    if (src->npartitions > 0) {
        if ((dst->partitions = calloc(src->npartitions, sizeof(*dst->partitions))) == NULL)
            goto fail;
        for (size_t i = 0; i < src->npartitions; i++) {
            cdc_ice_field_summary_t *d = &dst->partitions[i];
            *d = src->partitions[i];
            d->lower.bytes = d->upper.bytes = NULL;
            dst->npartitions++;
            if (cdc_ice_part_value_copy(&d->lower, &src->partitions[i].lower) != CDC_OK ||
                cdc_ice_part_value_copy(&d->upper, &src->partitions[i].upper) != CDC_OK)
                goto fail;
        }
    }
    return CDC_OK;
fail:
    cdc_ice_manifest_file_clear(dst);
    return CDC_ERR_NOMEM;
}

void cdc_ice_manifest_file_clear(cdc_ice_manifest_file_t *mf)
{
    free(mf->path);
    for (size_t i = 0; i < mf->npartitions; i++) {
        free(mf->partitions[i].lower.bytes);
        free(mf->partitions[i].upper.bytes);
    }
    free(mf->partitions);
    memset(mf, 0, sizeof(*mf));
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
