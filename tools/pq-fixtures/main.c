/*
 * pq-fixtures: writes Parquet test files with common/iceberg/parquet.c and,
 * next to each, a JSON file with the values that were written, so an
 * independent reader (DuckDB in tests/js/parquet_readback.test.mjs) can check
 * them. Usage: pq-fixtures <output-dir> (or --help, --version). Values are
 * deterministic functions of the row number; the JSON holds them in the text
 * form DuckDB prints (decimals with all scale digits, uuids in 8-4-4-4-12
 * form, binary as upper-case hex, dates/times/timestamps as integer
 * days/microseconds).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/iceberg/parquet.h"
#include "common/iceberg/schema.h"

#ifndef CDC_VERSION
#define CDC_VERSION "dev"
#endif

typedef struct kind {
    const char *name;
    cdc_ice_type_t type;
    int precision, scale;
} kind_t;

static const kind_t kinds[] = {
    {"boolean", CDC_ICE_BOOLEAN, 0, 0},     {"int", CDC_ICE_INT, 0, 0},
    {"long", CDC_ICE_LONG, 0, 0},           {"float", CDC_ICE_FLOAT, 0, 0},
    {"double", CDC_ICE_DOUBLE, 0, 0},       {"dec9", CDC_ICE_DECIMAL, 9, 2},
    {"dec18", CDC_ICE_DECIMAL, 18, 4},      {"dec38", CDC_ICE_DECIMAL, 38, 10},
    {"string", CDC_ICE_STRING, 0, 0},       {"binary", CDC_ICE_BINARY, 0, 0},
    {"date", CDC_ICE_DATE, 0, 0},           {"time", CDC_ICE_TIME, 0, 0},
    {"timestamp", CDC_ICE_TIMESTAMP, 0, 0}, {"timestamptz", CDC_ICE_TIMESTAMPTZ, 0, 0},
    {"uuid", CDC_ICE_UUID, 0, 0},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static const char *const statuses[] = {"active", "pending", "closed", "héllo wörld", ""};

/* Text of an unscaled decimal at `scale`, as DuckDB prints it. */
static void decimal_text(__int128 v, int scale, char *out, size_t cap)
{
    char digits[64];
    int n = 0;
    bool neg = v < 0;
    unsigned __int128 u = neg ? (unsigned __int128)(-v) : (unsigned __int128)v;
    size_t o = 0;

    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u > 0);
    while (n <= scale)
        digits[n++] = '0';
    if (neg && o + 1 < cap)
        out[o++] = '-';
    for (int i = n - 1; i >= 0 && o + 2 < cap; i--) {
        out[o++] = digits[i];
        if (i == scale && scale > 0)
            out[o++] = '.';
    }
    out[o] = '\0';
}

/* Value of kind k at row i (bufs give storage for bytes); returns its text in txt. */
static void make_value(const kind_t *k, int64_t i, cdc_ice_value_t *v, uint8_t *bytes, char *txt,
                       size_t cap)
{
    memset(v, 0, sizeof(*v));
    switch (k->type) {
    case CDC_ICE_BOOLEAN:
        v->v.b = i % 3 == 0;
        snprintf(txt, cap, "%s", v->v.b ? "true" : "false");
        break;
    case CDC_ICE_INT:
        v->v.i32 = i == 1 ? INT32_MIN : i == 2 ? INT32_MAX : (int32_t)((i * 7919) % 100000 - 50000);
        snprintf(txt, cap, "%" PRId32, v->v.i32);
        break;
    case CDC_ICE_LONG:
        v->v.i64 = i == 1 ? INT64_MIN : i == 2 ? INT64_MAX : i * 1000003 - 5000000000LL;
        snprintf(txt, cap, "%" PRId64, v->v.i64);
        break;
    case CDC_ICE_FLOAT:
        v->v.f32 = i % 50 == 7 ? NAN : (float)(i - 50) * 0.25f;
        snprintf(txt, cap, "%.9g", (double)v->v.f32);
        break;
    case CDC_ICE_DOUBLE:
        v->v.f64 = i % 50 == 8 ? NAN : (double)(i - 50) * 1.1;
        snprintf(txt, cap, "%.17g", v->v.f64);
        break;
    case CDC_ICE_DECIMAL: {
        __int128 lim = 1;
        for (int p = 0; p < k->precision; p++)
            lim *= 10;
        __int128 x = ((__int128)i * 1234567891 * 97 + 13) % lim;
        if (i % 2 == 1)
            x = -x;
        if (i == 1)
            x = lim - 1;
        if (i == 2)
            x = -(lim - 1);
        v->v.dec = x;
        decimal_text(x, k->scale, txt, cap);
        break;
    }
    case CDC_ICE_STRING: {
        int len = snprintf((char *)bytes, 64, "%s", i % 7 == 6 ? "x" : statuses[i % 5]);
        if (i % 11 == 10)
            len = snprintf((char *)bytes, 64, "unique-%" PRId64, i);
        v->v.bytes.ptr = bytes;
        v->v.bytes.len = (size_t)len;
        snprintf(txt, cap, "%s", (char *)bytes);
        break;
    }
    case CDC_ICE_BINARY: {
        size_t n = (size_t)(i % 5);
        size_t o = 0;
        for (size_t j = 0; j < n; j++) {
            bytes[j] = (uint8_t)((i * 31 + (int64_t)j * 77) & 0xFF);
            o += (size_t)snprintf(txt + o, cap - o, "%02X", bytes[j]);
        }
        txt[o] = '\0';
        v->v.bytes.ptr = bytes;
        v->v.bytes.len = n;
        break;
    }
    case CDC_ICE_DATE:
        v->v.i32 = (int32_t)(-1000 + i * 37);
        snprintf(txt, cap, "%" PRId32, v->v.i32);
        break;
    case CDC_ICE_TIME:
        v->v.i64 = (i * 1234567891LL) % 86400000000LL;
        snprintf(txt, cap, "%" PRId64, v->v.i64);
        break;
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        v->v.i64 = 1700000000000000LL + (i - 100) * 86400001234LL;
        snprintf(txt, cap, "%" PRId64, v->v.i64);
        break;
    case CDC_ICE_UUID: {
        for (int j = 0; j < 16; j++)
            v->v.uuid[j] = (uint8_t)((i * 131 + j * 17 + (i >> 3)) & 0xFF);
        size_t o = 0;
        for (int j = 0; j < 16; j++) {
            o += (size_t)snprintf(txt + o, cap - o, "%02x", v->v.uuid[j]);
            if (j == 3 || j == 5 || j == 7 || j == 9)
                txt[o++] = '-';
        }
        txt[o] = '\0';
        break;
    }
    default:
        txt[0] = '\0';
    }
}

/* Writes <dir>/<name>.parquet and <dir>/<name>.json. */
static int write_all_types(const char *dir, const char *name, cdc_pq_options_t *opts, int64_t nrows)
{
    cdc_ice_field_t fields[2 * NKINDS + 1];
    cdc_ice_schema_t schema = {.schema_id = 3, .fields = fields, .nfields = 2 * NKINDS + 1};
    int32_t ident[] = {1};
    char path[1024], names[2 * NKINDS + 1][48];
    cdc_pq_writer_t *w = NULL;
    cdc_error_t err;
    cdc_ice_data_file_t df;
    json_t *doc = json_object(), *rows = json_array(), *cols = json_array();
    int rc = 1;

    schema.identifier_ids = ident;
    schema.nidentifier = 1;
    for (size_t k = 0; k < NKINDS; k++) {
        for (int opt = 0; opt < 2; opt++) {
            size_t f = 2 * k + (size_t)opt;
            snprintf(names[f], sizeof(names[f]), "%s_%s", kinds[k].name, opt ? "opt" : "req");
            fields[f] = (cdc_ice_field_t){.id = (int32_t)(f + 1),
                                          .name = names[f],
                                          .type = kinds[k].type,
                                          .precision = kinds[k].precision,
                                          .scale = kinds[k].scale,
                                          .required = !opt};
        }
    }
    snprintf(names[2 * NKINDS], sizeof(names[0]), "all_null");
    fields[2 * NKINDS] =
        (cdc_ice_field_t){.id = 2 * NKINDS + 1, .name = names[2 * NKINDS], .type = CDC_ICE_STRING};
    for (size_t f = 0; f < schema.nfields; f++) {
        char tbuf[40];
        json_array_append_new(cols,
                              json_pack("{s:s, s:i, s:b, s:s}", "name", fields[f].name, "field_id",
                                        fields[f].id, "required", fields[f].required, "type",
                                        cdc_ice_type_string(&fields[f], tbuf, sizeof(tbuf))));
    }
    snprintf(path, sizeof(path), "%s/%s.parquet", dir, name);
    remove(path);
    if (cdc_pq_writer_open_file(&schema, path, opts, &w, &err) != CDC_OK) {
        fprintf(stderr, "pq-fixtures: %s\n", err.msg);
        goto done;
    }
    for (int64_t i = 0; i < nrows; i++) {
        cdc_ice_value_t vals[2 * NKINDS + 1];
        static uint8_t bytes[2 * NKINDS][64];
        json_t *row = json_array();
        char txt[128];

        for (size_t k = 0; k < NKINDS; k++) {
            make_value(&kinds[k], i, &vals[2 * k], bytes[2 * k], txt, sizeof(txt));
            json_array_append_new(row, json_string(txt));
            make_value(&kinds[k], i + 5, &vals[2 * k + 1], bytes[2 * k + 1], txt, sizeof(txt));
            vals[2 * k + 1].is_null = i % 4 == 1;
            json_array_append_new(row, vals[2 * k + 1].is_null ? json_null() : json_string(txt));
        }
        vals[2 * NKINDS] = (cdc_ice_value_t){.is_null = true};
        json_array_append_new(row, json_null());
        json_array_append_new(rows, row);
        if (cdc_pq_writer_append(w, vals, &err) != CDC_OK) {
            fprintf(stderr, "pq-fixtures: %s\n", err.msg);
            goto done;
        }
    }
    if (cdc_pq_writer_close(w, &df, &err) != CDC_OK) {
        fprintf(stderr, "pq-fixtures: %s\n", err.msg);
        goto done;
    }
    json_object_set_new(doc, "file", json_string(path));
    json_object_set_new(doc, "codec", json_string(cdc_pq_codec_name(opts->codec)));
    json_object_set_new(doc, "dictionary", json_boolean(opts->dictionary));
    json_object_set_new(doc, "row_groups", json_integer((json_int_t)df.nsplit_offsets));
    json_object_set_new(doc, "file_size", json_integer(df.file_size_in_bytes));
    json_object_set_new(doc, "columns", cols);
    cols = NULL;
    json_object_set_new(doc, "rows", rows);
    rows = NULL;
    cdc_ice_data_file_clear(&df);
    snprintf(path, sizeof(path), "%s/%s.json", dir, name);
    if (json_dump_file(doc, path, JSON_COMPACT) != 0) {
        fprintf(stderr, "pq-fixtures: could not write \"%s\"\n", path);
        goto done;
    }
    rc = 0;
done:
    cdc_pq_writer_free(w);
    json_decref(doc);
    json_decref(rows);
    json_decref(cols);
    return rc;
}

/*
 * A file of nested columns (docs/parquet.md, "Nested columns"): list<string> with null
 * elements and empty lists, list<list<int>> (a 2-D array), a struct with a list inside,
 * list<decimal(10,2)>, each null in some rows. The JSON holds each row's values in the
 * nested value form the writer was given.
 */
static int write_nested(const char *dir, const char *name, const cdc_pq_options_t *opts, int n)
{
    static const char *const types[] = {
        "{\"type\":\"list\",\"element-id\":6,\"element\":\"string\",\"element-required\":false}",
        "{\"type\":\"list\",\"element-id\":7,\"element\":{\"type\":\"list\",\"element-id\":8,"
        "\"element\":\"int\",\"element-required\":false},\"element-required\":false}",
        "{\"type\":\"struct\",\"fields\":[{\"id\":9,\"name\":\"a\",\"required\":false,\"type\":"
        "\"int\"},{\"id\":10,\"name\":\"b\",\"required\":false,\"type\":\"string\"},{\"id\":11,"
        "\"name\":\"c\",\"required\":false,\"type\":{\"type\":\"list\",\"element-id\":12,"
        "\"element\":\"long\",\"element-required\":true}}]}",
        "{\"type\":\"list\",\"element-id\":13,\"element\":\"decimal(10,2)\",\"element-required\":"
        "false}"};
    static const char *const names[] = {"tags", "grid", "s", "d"};
    cdc_ice_field_t fields[5];
    cdc_ice_schema_t schema = {.schema_id = 0, .fields = fields, .nfields = 5};
    cdc_pq_writer_t *w = NULL;
    cdc_ice_data_file_t df;
    cdc_error_t err;
    char path[4096];
    json_t *rows = json_array(), *doc = json_object();
    int rc = 1;

    memset(fields, 0, sizeof(fields));
    fields[0] = (cdc_ice_field_t){.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true};
    for (int k = 0; k < 4; k++)
        fields[k + 1] = (cdc_ice_field_t){.id = 2 + k,
                                          .name = (char *)names[k],
                                          .type = k == 2 ? CDC_ICE_STRUCT : CDC_ICE_LIST,
                                          .nested = (char *)types[k]};
    snprintf(path, sizeof(path), "%s/%s.parquet", dir, name);
    if (cdc_pq_writer_open_file(&schema, path, opts, &w, &err) != CDC_OK) {
        fprintf(stderr, "pq-fixtures: %s\n", err.msg);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        char text[4][512];
        cdc_ice_value_t v[5];
        json_t *row = json_object();
        memset(v, 0, sizeof(v));
        v[0].v.i64 = i;
        /* tags: null every 7th row, empty every 5th, else i % 4 + 1 strings, a null one */
        if (i % 7 == 3)
            snprintf(text[0], sizeof(text[0]), "null");
        else if (i % 5 == 0)
            snprintf(text[0], sizeof(text[0]), "[]");
        else {
            int k = i % 4 + 1, o = snprintf(text[0], sizeof(text[0]), "[");
            for (int j = 0; j < k; j++)
                o += j == 1 ? snprintf(text[0] + o, sizeof(text[0]) - (size_t)o, "%snull",
                                       j ? "," : "")
                            : snprintf(text[0] + o, sizeof(text[0]) - (size_t)o,
                                       "%s\"t%d \\\"q\\\" \\u00e9%d\"", j ? "," : "", i, j);
            snprintf(text[0] + o, sizeof(text[0]) - (size_t)o, "]");
        }
        /* grid: 2 x (i % 3) ints, a null element, a null inner list every 11th row */
        if (i % 9 == 4)
            snprintf(text[1], sizeof(text[1]), "null");
        else if (i % 11 == 0)
            snprintf(text[1], sizeof(text[1]), "[null,[%d]]", i);
        else
            snprintf(text[1], sizeof(text[1]), "[[%d,%d,null],[%d]]", i, -i, i * 2);
        /* s: null every 6th row; b missing (null) every 4th */
        if (i % 6 == 1)
            snprintf(text[2], sizeof(text[2]), "null");
        else if (i % 4 == 0)
            snprintf(text[2], sizeof(text[2]), "{\"c\":[%d],\"a\":%d}", i, i);
        else
            snprintf(text[2], sizeof(text[2]), "{\"a\":%d,\"b\":\"s%d\",\"c\":[]}", i, i);
        snprintf(text[3], sizeof(text[3]), "[\"%d.%02d\",null,-%d.5]", i, i % 100, i);
        for (int k = 0; k < 4; k++) {
            json_error_t jerr;
            bool null = strcmp(text[k], "null") == 0;
            v[k + 1].is_null = null;
            v[k + 1].v.bytes.ptr = (const uint8_t *)text[k];
            v[k + 1].v.bytes.len = strlen(text[k]);
            json_object_set_new(row, names[k],
                                null ? json_null() : json_loads(text[k], JSON_DECODE_ANY, &jerr));
        }
        json_object_set_new(row, "id", json_integer(i));
        json_array_append_new(rows, row);
        if (cdc_pq_writer_append(w, v, &err) != CDC_OK) {
            fprintf(stderr, "pq-fixtures: row %d: %s\n", i, err.msg);
            goto done;
        }
    }
    if (cdc_pq_writer_close(w, &df, &err) != CDC_OK) {
        fprintf(stderr, "pq-fixtures: %s\n", err.msg);
        goto done;
    }
    cdc_ice_data_file_clear(&df);
    json_object_set_new(doc, "file", json_string(path));
    json_object_set_new(doc, "nested", json_true());
    json_object_set_new(doc, "rows", rows);
    rows = NULL;
    snprintf(path, sizeof(path), "%s/%s.json", dir, name);
    if (json_dump_file(doc, path, JSON_COMPACT) != 0)
        goto done;
    rc = 0;
done:
    cdc_pq_writer_free(w);
    json_decref(rows);
    json_decref(doc);
    return rc;
}

int main(int argc, char **argv)
{
    static const cdc_pq_codec_t codecs[] = {CDC_PQ_CODEC_ZSTD, CDC_PQ_CODEC_SNAPPY,
                                            CDC_PQ_CODEC_NONE};
    cdc_pq_options_t opts;
    char name[64];

    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("pq-fixtures %s\n", CDC_VERSION);
        return 0;
    }
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: pq-fixtures <output-dir>\n"
               "Writes Parquet test files and, next to each, the values written as JSON.\n");
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: pq-fixtures <output-dir>\n");
        return 2;
    }
    for (size_t c = 0; c < 3; c++) {
        for (int dict = 0; dict < 2; dict++) {
            cdc_pq_options_init(&opts);
            opts.codec = codecs[c];
            opts.dictionary = dict;
            snprintf(name, sizeof(name), "types_%s_%s", cdc_pq_codec_name(codecs[c]),
                     dict ? "dict" : "plain");
            if (write_all_types(argv[1], name, &opts, 300) != 0)
                return 1;
        }
    }
    /* many small row groups and pages */
    cdc_pq_options_init(&opts);
    opts.row_group_bytes = 64 << 10;
    opts.page_bytes = 4 << 10;
    if (write_all_types(argv[1], "multi_rowgroup", &opts, 5000) != 0)
        return 1;
    /* dictionary that overflows in the middle of a row group */
    cdc_pq_options_init(&opts);
    opts.dict_max_entries = 40;
    opts.page_bytes = 2 << 10;
    if (write_all_types(argv[1], "dict_fallback", &opts, 2000) != 0)
        return 1;
    /* nested columns, in small pages and row groups */
    cdc_pq_options_init(&opts);
    opts.row_group_bytes = 32 << 10;
    opts.page_bytes = 1 << 10;
    if (write_nested(argv[1], "nested", &opts, 3000) != 0)
        return 1;
    return 0;
}
