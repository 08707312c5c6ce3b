/*
 * Parquet reader (see parquet_read.h): the file's framing and footer. The file
 * must end in a 4-byte footer length and "PAR1"; the footer is FileMetaData in
 * the Thrift compact protocol (thrift.h), of which the reader keeps the flat
 * schema (one SchemaElement per column under the root), each row group's row
 * count and the location and codec of its column chunks, and the `iceberg.schema`
 * key. Columns are typed by that Iceberg schema, checked against their Parquet
 * physical types with the writer's own mapping (cdc_pq_column_init), or, in a
 * file without it, from their physical and logical types. Pages are decoded by
 * parquet_read_column.c when a column is asked for.
 */
#include "common/iceberg/parquet_read.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include <jansson.h>

#include "common/iceberg/parquet_read_int.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/thrift.h"

/* What the footer parser carries besides the reader it fills. */
typedef struct footer {
    cdc_pq_reader_t *r;
    size_t end;       /* offset of the footer: chunks lie in [4, end) */
    const char *json; /* `iceberg.schema` value (in the footer, not NUL-terminated) */
    size_t json_len;
    bool has_json;
    bool has_schema;
    cdc_error_t *e;
} footer_t;

static cdc_err_t malformed(cdc_error_t *e, const char *what)
{
    return cdc_error_set(e, CDC_ERR_CORRUPT, "parquet footer is truncated or malformed (%s)", what);
}

/* ---- schema elements ---------------------------------------------------------- */

/* TIME and TIMESTAMP logical types: isAdjustedToUTC and the TimeUnit union. */
static bool read_time_type(cdc_thrift_reader_t *t, rcol_t *c)
{
    int16_t last = 0, fid = 0, ulast = 0, ufid = 0;
    uint8_t type, utype;

    for (;;) {
        if (!cdc_thrift_read_field_header(t, &last, &fid, &type))
            return false;
        if (type == CDC_THRIFT_STOP)
            return true;
        if (fid == 1 && (type == CDC_THRIFT_TRUE || type == CDC_THRIFT_FALSE)) {
            c->utc = type == CDC_THRIFT_TRUE;
        } else if (fid == 2 && type == CDC_THRIFT_STRUCT) {
            for (;;) { /* the union: one empty struct whose id is the unit */
                if (!cdc_thrift_read_field_header(t, &ulast, &ufid, &utype))
                    return false;
                if (utype == CDC_THRIFT_STOP)
                    break;
                c->unit = ufid;
                if (!cdc_thrift_skip(t, utype))
                    return false;
            }
        } else if (!cdc_thrift_skip(t, type)) {
            return false;
        }
    }
}

/* LogicalType union: which member, with DECIMAL's scale/precision and the time units. */
static bool read_logical_type(cdc_thrift_reader_t *t, rcol_t *c)
{
    int16_t last = 0, fid = 0;
    uint8_t type;
    int64_t v[2] = {0, 0};
    uint32_t seen;

    for (;;) {
        if (!cdc_thrift_read_field_header(t, &last, &fid, &type))
            return false;
        if (type == CDC_THRIFT_STOP)
            return true;
        if (type != CDC_THRIFT_STRUCT) {
            if (!cdc_thrift_skip(t, type))
                return false;
            continue;
        }
        c->logical = fid;
        if (fid == 5) { /* DECIMAL */
            if (!cdc_thrift_read_struct_ints(t, v, &seen, 2) || (seen & 3) != 3 || v[0] < 0 ||
                v[0] > 38 || v[1] < 1 || v[1] > 38)
                return false;
            c->scale = (int32_t)v[0];
            c->precision = (int32_t)v[1];
        } else if (fid == 7 || fid == 8) { /* TIME, TIMESTAMP */
            if (!read_time_type(t, c))
                return false;
        } else if (!cdc_thrift_skip(t, type)) {
            return false;
        }
    }
}

static bool get_i32(cdc_thrift_reader_t *t, uint8_t type, int32_t *v)
{
    return type == CDC_THRIFT_I32 && cdc_thrift_read_i32(t, v);
}

/* One SchemaElement; *children is its num_children (0 for a leaf). */
static bool read_schema_element(cdc_thrift_reader_t *t, rcol_t *c, int32_t *children)
{
    int16_t last = 0, fid = 0;
    uint8_t type;
    bool ok;

    memset(c, 0, sizeof(*c));
    c->ptype = -1;
    c->converted = -1;
    *children = 0;
    for (;;) {
        if (!cdc_thrift_read_field_header(t, &last, &fid, &type))
            return false;
        if (type == CDC_THRIFT_STOP)
            return true;
        switch (fid) {
        case 1:
            ok = get_i32(t, type, &c->ptype);
            break;
        case 2:
            ok = get_i32(t, type, &c->type_length);
            break;
        case 3:
            ok = get_i32(t, type, &c->repetition);
            break;
        case 4:
            ok = type == CDC_THRIFT_BINARY && cdc_thrift_read_binary(t, &c->name, &c->name_len);
            break;
        case 5:
            ok = get_i32(t, type, children);
            break;
        case 6:
            ok = get_i32(t, type, &c->converted);
            break;
        case 7:
            ok = get_i32(t, type, &c->scale);
            break;
        case 8:
            ok = get_i32(t, type, &c->precision);
            break;
        case 9:
            ok = get_i32(t, type, &c->field_id);
            c->has_field_id = true;
            break;
        case 10:
            ok = type == CDC_THRIFT_STRUCT && read_logical_type(t, c);
            break;
        default:
            ok = cdc_thrift_skip(t, type);
            break;
        }
        if (!ok)
            return false;
    }
}

/* One schema element and, for a group, its children: leaves are appended to r->cols
 * with their levels (docs/parquet.md, "Nested columns"). *left counts the elements. */
static cdc_err_t read_node(cdc_thrift_reader_t *t, footer_t *f, size_t top, int def, int rep,
                           int depth, size_t *left)
{
    cdc_pq_reader_t *r = f->r;
    int32_t children;
    rcol_t c;

    if (*left == 0 || !read_schema_element(t, &c, &children))
        return malformed(f->e, "schema element");
    (*left)--;
    if (c.repetition != REP_REQUIRED && c.repetition != REP_OPTIONAL &&
        (c.repetition != REP_REPEATED || depth == 0))
        return cdc_error_set(f->e, CDC_ERR_UNSUPPORTED,
                             "parquet column \"%.*s\" is repeated: not supported", (int)c.name_len,
                             (const char *)c.name);
    def += c.repetition != REP_REQUIRED;
    rep += c.repetition == REP_REPEATED;
    if (children > 0) {
        if (depth >= 64 || (size_t)children > *left)
            return malformed(f->e, "schema group");
        for (int32_t k = 0; k < children; k++) {
            cdc_err_t rc = read_node(t, f, top, def, rep, depth + 1, left);
            if (rc != CDC_OK)
                return rc;
        }
        return CDC_OK;
    }
    if (children < 0 || c.ptype < 0)
        return malformed(f->e, "schema element without a type");
    if (c.ptype == PT_FLBA && (c.type_length < 1 || c.type_length > (1 << 20)))
        return malformed(f->e, "fixed_len_byte_array length");
    c.top = top;
    c.max_def = def;
    c.max_rep = rep;
    r->cols[r->ncols++] = c;
    return CDC_OK;
}

/* FileMetaData.schema: the root, then its fields (a group per nested field). */
static cdc_err_t read_schema(cdc_thrift_reader_t *t, footer_t *f)
{
    cdc_pq_reader_t *r = f->r;
    uint8_t elem;
    size_t n, left;
    int32_t children;
    rcol_t root;

    if (f->has_schema || !cdc_thrift_read_list_header(t, &elem, &n) || elem != CDC_THRIFT_STRUCT ||
        n < 1 || !read_schema_element(t, &root, &children))
        return malformed(f->e, "schema");
    if (n == 1)
        return malformed(f->e, "schema without columns");
    if (children < 1 || (size_t)children > n - 1)
        return malformed(f->e, "schema root");
    r->cols = calloc(n - 1, sizeof(rcol_t));
    if (r->cols == NULL)
        return cdc_error_set(f->e, CDC_ERR_NOMEM, "out of memory");
    r->ntop = (size_t)children;
    left = n - 1;
    for (size_t i = 0; i < r->ntop; i++) {
        cdc_err_t rc = read_node(t, f, i, 0, 0, 0, &left);
        if (rc != CDC_OK)
            return rc;
    }
    if (left != 0)
        return malformed(f->e, "schema elements outside the root");
    f->has_schema = true;
    return CDC_OK;
}

/* ---- row groups --------------------------------------------------------------- */

/* ColumnChunk: its ColumnMetaData, checked against the column and the file. */
static cdc_err_t read_column_chunk(cdc_thrift_reader_t *t, footer_t *f, size_t col, int64_t rows,
                                   rchunk_t *ch)
{
    const rcol_t *c = &f->r->cols[col];
    int16_t last = 0, fid = 0;
    uint8_t type;
    int64_t m[11];
    uint32_t seen = 0;
    bool has_meta = false;
    const uint8_t *path;
    size_t path_len;

    for (;;) {
        if (!cdc_thrift_read_field_header(t, &last, &fid, &type))
            return malformed(f->e, "column chunk");
        if (type == CDC_THRIFT_STOP)
            break;
        if (fid == 1 && type == CDC_THRIFT_BINARY) {
            if (!cdc_thrift_read_binary(t, &path, &path_len))
                return malformed(f->e, "column chunk");
            return cdc_error_set(f->e, CDC_ERR_UNSUPPORTED,
                                 "parquet column chunk is in another file: not supported");
        } else if (fid == 3 && type == CDC_THRIFT_STRUCT) {
            if (!cdc_thrift_read_struct_ints(t, m, &seen, 11))
                return malformed(f->e, "column metadata");
            has_meta = true;
        } else if (!cdc_thrift_skip(t, type)) {
            return malformed(f->e, "column chunk");
        }
    }
    /* type, codec, num_values, total_compressed_size, data_page_offset */
    if (!has_meta || (seen & 0x159) != 0x159)
        return malformed(f->e, "column metadata without its required fields");
    if (m[0] != c->ptype)
        return malformed(f->e, "column chunk type differs from its schema element");
    if (c->max_rep == 0 ? m[4] != rows : m[4] < rows)
        return malformed(f->e, "column chunk value count differs from its row group's rows");
    ch->values = m[4];
    int64_t start = m[8], size = m[6];
    if ((seen & (1u << 10)) && m[10] >= 4 && m[10] < start)
        start = m[10]; /* the dictionary page comes first */
    if (start < 4 || size < 0 || (uint64_t)start > f->end || (uint64_t)size > f->end - start)
        return cdc_error_set(f->e, CDC_ERR_CORRUPT,
                             "parquet column chunk at %lld (%lld bytes) lies outside the file's "
                             "data (%zu bytes)",
                             (long long)start, (long long)size, f->end);
    if (m[3] < 0 || m[3] > INT32_MAX)
        return malformed(f->e, "codec");
    ch->start = (size_t)start;
    ch->size = (size_t)size;
    ch->codec = (int32_t)m[3];
    return CDC_OK;
}

/* RowGroup: its rows and one chunk per column. */
static cdc_err_t read_row_group(cdc_thrift_reader_t *t, footer_t *f, size_t g)
{
    cdc_pq_reader_t *r = f->r;
    int16_t last = 0, fid = 0;
    uint8_t type, elem;
    size_t n;
    int64_t rows = -1;
    const uint8_t *columns = NULL;
    cdc_err_t rc;

    /* the chunks are checked against the row count, which may follow them: read the
     * row count first, then the chunks again */
    for (int pass = 0; pass < 2; pass++) {
        cdc_thrift_reader_t s = *t;
        last = 0;
        for (;;) {
            if (!cdc_thrift_read_field_header(&s, &last, &fid, &type))
                return malformed(f->e, "row group");
            if (type == CDC_THRIFT_STOP)
                break;
            if (pass == 0 && fid == 3 && type == CDC_THRIFT_I64) {
                if (!cdc_thrift_read_i64(&s, &rows))
                    return malformed(f->e, "row group");
            } else if (pass == 1 && fid == 1 && type == CDC_THRIFT_LIST) {
                columns = s.p;
                if (!cdc_thrift_read_list_header(&s, &elem, &n) || elem != CDC_THRIFT_STRUCT ||
                    n != r->ncols)
                    return malformed(f->e, "row group columns");
                for (size_t i = 0; i < n; i++) {
                    rc = read_column_chunk(&s, f, i, rows, &r->chunks[g * r->ncols + i]);
                    if (rc != CDC_OK)
                        return rc;
                }
            } else if (!cdc_thrift_skip(&s, type)) {
                return malformed(f->e, "row group");
            }
        }
        if (pass == 0 && rows < 0)
            return malformed(f->e, "row group without its row count");
        if (pass == 1)
            *t = s;
    }
    if (columns == NULL)
        return malformed(f->e, "row group without columns");
    r->rg_rows[g] = rows;
    return CDC_OK;
}

static cdc_err_t read_row_groups(cdc_thrift_reader_t *t, footer_t *f)
{
    cdc_pq_reader_t *r = f->r;
    uint8_t elem;
    size_t n;
    cdc_err_t rc;

    if (!f->has_schema)
        return malformed(f->e, "row groups before the schema");
    if (r->rg_rows != NULL || !cdc_thrift_read_list_header(t, &elem, &n) ||
        elem != CDC_THRIFT_STRUCT)
        return malformed(f->e, "row groups");
    r->rg_rows = calloc(n ? n : 1, sizeof(int64_t));
    r->chunks = calloc(n ? n * r->ncols : 1, sizeof(rchunk_t));
    if (r->rg_rows == NULL || r->chunks == NULL)
        return cdc_error_set(f->e, CDC_ERR_NOMEM, "out of memory");
    r->nrg = n;
    for (size_t g = 0; g < n; g++) {
        rc = read_row_group(t, f, g);
        if (rc != CDC_OK)
            return rc;
    }
    return CDC_OK;
}

/* key_value_metadata: keeps `iceberg.schema`. */
static cdc_err_t read_key_values(cdc_thrift_reader_t *t, footer_t *f)
{
    uint8_t elem, type;
    size_t n;
    int16_t last, fid = 0;
    const uint8_t *key, *val;
    size_t klen, vlen;

    if (!cdc_thrift_read_list_header(t, &elem, &n) || elem != CDC_THRIFT_STRUCT)
        return malformed(f->e, "key-value metadata");
    for (size_t i = 0; i < n; i++) {
        bool has_key = false, has_val = false;
        last = 0;
        for (;;) {
            if (!cdc_thrift_read_field_header(t, &last, &fid, &type))
                return malformed(f->e, "key-value metadata");
            if (type == CDC_THRIFT_STOP)
                break;
            if (fid == 1 && type == CDC_THRIFT_BINARY) {
                if (!cdc_thrift_read_binary(t, &key, &klen))
                    return malformed(f->e, "key-value metadata");
                has_key = true;
            } else if (fid == 2 && type == CDC_THRIFT_BINARY) {
                if (!cdc_thrift_read_binary(t, &val, &vlen))
                    return malformed(f->e, "key-value metadata");
                has_val = true;
            } else if (!cdc_thrift_skip(t, type)) {
                return malformed(f->e, "key-value metadata");
            }
        }
        if (has_key && has_val && klen == 14 && memcmp(key, "iceberg.schema", 14) == 0) {
            f->json = (const char *)val;
            f->json_len = vlen;
            f->has_json = true;
        }
    }
    return CDC_OK;
}

static cdc_err_t read_footer(const uint8_t *p, size_t len, footer_t *f)
{
    cdc_thrift_reader_t t;
    int16_t last = 0, fid = 0;
    uint8_t type;
    cdc_err_t rc;
    bool has_rows = false;

    cdc_thrift_reader_init(&t, p, len);
    for (;;) {
        if (!cdc_thrift_read_field_header(&t, &last, &fid, &type))
            return malformed(f->e, "file metadata");
        if (type == CDC_THRIFT_STOP)
            break;
        rc = CDC_OK;
        if (fid == 2 && type == CDC_THRIFT_LIST) {
            rc = read_schema(&t, f);
        } else if (fid == 3 && type == CDC_THRIFT_I64) {
            if (!cdc_thrift_read_i64(&t, &f->r->rows) || f->r->rows < 0)
                return malformed(f->e, "row count");
            has_rows = true;
        } else if (fid == 4 && type == CDC_THRIFT_LIST) {
            rc = read_row_groups(&t, f);
        } else if (fid == 5 && type == CDC_THRIFT_LIST) {
            rc = read_key_values(&t, f);
        } else if (!cdc_thrift_skip(&t, type)) {
            return malformed(f->e, "file metadata");
        }
        if (rc != CDC_OK)
            return rc;
    }
    if (!f->has_schema || !has_rows || f->r->rg_rows == NULL)
        return malformed(f->e, "file metadata without schema, row count or row groups");
    int64_t sum = 0;
    for (size_t g = 0; g < f->r->nrg; g++) {
        if (f->r->rg_rows[g] > INT64_MAX - sum)
            return malformed(f->e, "row counts");
        sum += f->r->rg_rows[g];
    }
    if (sum != f->r->rows)
        return cdc_error_set(f->e, CDC_ERR_CORRUPT,
                             "parquet file has %lld rows but its row groups %lld",
                             (long long)f->r->rows, (long long)sum);
    if ((uint64_t)sum > SIZE_MAX / sizeof(cdc_ice_value_t) / 2)
        return malformed(f->e, "row count");
    return CDC_OK;
}

/* ---- typing the columns ------------------------------------------------------- */

/* The schema in the footer was refused (e says why): the file is corrupt. */
static cdc_err_t schema_corrupt(cdc_error_t *e, const char *what)
{
    if (e != NULL) {
        cdc_error_prefix(e, "%s", what);
        e->code = CDC_ERR_CORRUPT;
    }
    return CDC_ERR_CORRUPT;
}

/* Checks the Iceberg field of column c against its Parquet element (the writer's mapping). */
static cdc_err_t check_field(const cdc_ice_field_t *fld, const rcol_t *c, cdc_error_t *e)
{
    cdc_pq_options_t opts;
    column_t want;
    cdc_err_t rc;

    cdc_pq_options_init(&opts);
    rc = cdc_pq_column_init(&want, fld, &opts, e);
    cdc_pq_column_free(&want);
    if (rc != CDC_OK)
        return schema_corrupt(e, "parquet footer key iceberg.schema");
    if (want.ptype != c->ptype || (c->ptype == PT_FLBA && want.type_length != c->type_length))
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "parquet column \"%s\" has physical type %d (length %d), not the "
                             "type %d its Iceberg type gives",
                             fld->name, (int)c->ptype, (int)c->type_length, want.ptype);
    if (fld->required != (c->repetition == REP_REQUIRED))
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "parquet column \"%s\" is %s but its Iceberg field is %s", fld->name,
                             c->repetition == REP_REQUIRED ? "required" : "optional",
                             fld->required ? "required" : "optional");
    if (c->has_field_id && c->field_id != fld->id)
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "parquet column \"%s\" has field id %d but its Iceberg field %d",
                             fld->name, (int)c->field_id, (int)fld->id);
    bool timed = fld->type == CDC_ICE_TIME || fld->type == CDC_ICE_TIMESTAMP ||
                 fld->type == CDC_ICE_TIMESTAMPTZ;
    if (timed && ((c->logical == 7 || c->logical == 8)
                      ? c->unit != 2
                      : (c->converted == CT_TIME_MILLIS || c->converted == CT_TIMESTAMP_MILLIS)))
        return cdc_error_set(e, CDC_ERR_UNSUPPORTED,
                             "parquet column \"%s\" is not in microseconds: not supported",
                             fld->name);
    return CDC_OK;
}

/* Iceberg type of a column of a file without `iceberg.schema`, from its Parquet types. */
static cdc_err_t derive_type(const rcol_t *c, cdc_ice_field_t *fld, cdc_error_t *e)
{
    bool decimal = c->logical == 5 || (c->logical == 0 && c->converted == CT_DECIMAL);
    bool micros = c->unit == 2;

    if (decimal && c->ptype != PT_BOOLEAN && c->ptype != PT_FLOAT && c->ptype != PT_DOUBLE) {
        fld->type = CDC_ICE_DECIMAL;
        fld->precision = c->precision;
        fld->scale = c->scale;
        if (c->precision < 1 || c->precision > 38 || c->scale < 0 || c->scale > c->precision ||
            (c->ptype == PT_FLBA && c->type_length > 16) || c->ptype == PT_INT96)
            return cdc_error_set(e, CDC_ERR_UNSUPPORTED,
                                 "parquet column \"%s\" has an unsupported decimal(%d,%d)",
                                 fld->name, (int)c->precision, (int)c->scale);
        return CDC_OK;
    }
    switch (c->ptype) {
    case PT_BOOLEAN:
        fld->type = CDC_ICE_BOOLEAN;
        return CDC_OK;
    case PT_INT32:
        fld->type = (c->logical == 6 || c->converted == CT_DATE) ? CDC_ICE_DATE : CDC_ICE_INT;
        return CDC_OK;
    case PT_INT64:
        if ((c->logical == 7 && micros) || (c->logical == 0 && c->converted == CT_TIME_MICROS))
            fld->type = CDC_ICE_TIME;
        else if (c->logical == 8 && micros)
            fld->type = c->utc ? CDC_ICE_TIMESTAMPTZ : CDC_ICE_TIMESTAMP;
        else if (c->logical == 0 && c->converted == CT_TIMESTAMP_MICROS)
            fld->type = CDC_ICE_TIMESTAMPTZ;
        else if (c->logical == 7 || c->logical == 8 || c->converted == CT_TIME_MILLIS ||
                 c->converted == CT_TIMESTAMP_MILLIS)
            break; /* other units */
        else
            fld->type = CDC_ICE_LONG;
        return CDC_OK;
    case PT_FLOAT:
        fld->type = CDC_ICE_FLOAT;
        return CDC_OK;
    case PT_DOUBLE:
        fld->type = CDC_ICE_DOUBLE;
        return CDC_OK;
    case PT_BYTE_ARRAY:
        fld->type = (c->logical == 1 || c->converted == CT_UTF8) ? CDC_ICE_STRING : CDC_ICE_BINARY;
        return CDC_OK;
    case PT_FLBA:
        if (c->logical == 14 && c->type_length == 16) {
            fld->type = CDC_ICE_UUID;
            return CDC_OK;
        }
        break;
    default:
        break;
    }
    return cdc_error_set(e, CDC_ERR_UNSUPPORTED,
                         "parquet column \"%s\" has an unsupported type (physical %d, logical "
                         "%d, converted %d)",
                         fld->name, (int)c->ptype, c->logical, (int)c->converted);
}

/* Maps every schema field to its leaf columns and checks them: a primitive field one
 * column, a nested field the leaves of its tree, with their levels. */
static cdc_err_t map_fields(footer_t *f)
{
    cdc_pq_reader_t *r = f->r;
    size_t k = 0;
    cdc_err_t rc;

    r->fcol = calloc(r->ntop, sizeof(*r->fcol));
    r->trees = calloc(r->ntop, sizeof(*r->trees));
    if (r->fcol == NULL || r->trees == NULL)
        return cdc_error_set(f->e, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < r->ntop; i++) {
        const cdc_ice_field_t *fld = &r->schema.fields[i];
        size_t n = 0;
        r->fcol[i] = k;
        while (k + n < r->ncols && r->cols[k + n].top == i)
            n++;
        if (!cdc_ice_type_is_nested(fld->type)) {
            if (n != 1 || r->cols[k].max_rep != 0 || r->cols[k].max_def > 1)
                return cdc_error_set(f->e, CDC_ERR_CORRUPT,
                                     "parquet column \"%s\" is not the primitive its Iceberg "
                                     "field is",
                                     fld->name);
            if ((rc = check_field(fld, &r->cols[k], f->e)) != CDC_OK)
                return rc;
            r->cols[k++].field = fld;
            continue;
        }
        if ((rc = cdc_ice_node_build(fld, &r->trees[i], f->e)) != CDC_OK)
            return rc == CDC_ERR_NOMEM ? rc
                                       : schema_corrupt(f->e, "parquet footer key iceberg.schema");
        if (n != cdc_ice_node_leaves(&r->trees[i]))
            return cdc_error_set(f->e, CDC_ERR_CORRUPT,
                                 "parquet field \"%s\" has %zu columns, its Iceberg type %zu",
                                 fld->name, n, cdc_ice_node_leaves(&r->trees[i]));
        for (size_t j = 0; j < n; j++, k++) {
            const cdc_ice_node_t *path[1];
            size_t depth;
            const cdc_ice_node_t *leaf = cdc_ice_node_leaf(&r->trees[i], (int)j, path, 1, &depth);
            if (leaf == NULL || r->cols[k].max_def != leaf->def ||
                r->cols[k].max_rep != leaf->max_rep)
                return cdc_error_set(f->e, CDC_ERR_CORRUPT,
                                     "parquet field \"%s\": column %zu has other levels than "
                                     "its Iceberg type gives",
                                     fld->name, j);
            if ((rc = check_field(&leaf->f, &r->cols[k], f->e)) != CDC_OK)
                return rc;
            r->cols[k].field = &leaf->f;
        }
    }
    return CDC_OK;
}

static cdc_err_t make_schema(footer_t *f)
{
    cdc_pq_reader_t *r = f->r;
    cdc_err_t rc;

    if (f->has_json) {
        char *text = strndup(f->json, f->json_len);
        if (text == NULL)
            return cdc_error_set(f->e, CDC_ERR_NOMEM, "out of memory");
        rc = cdc_ice_schema_from_json(text, &r->schema, f->e);
        free(text);
        if (rc != CDC_OK)
            return rc == CDC_ERR_NOMEM ? rc
                                       : schema_corrupt(f->e, "parquet footer key iceberg.schema");
        if (r->schema.nfields != r->ntop)
            return cdc_error_set(f->e, CDC_ERR_CORRUPT,
                                 "parquet file has %zu columns but its iceberg.schema %zu fields",
                                 r->ntop, r->schema.nfields);
        return map_fields(f);
    }
    if (r->ntop != r->ncols)
        return cdc_error_set(f->e, CDC_ERR_UNSUPPORTED,
                             "parquet file has nested columns but no iceberg.schema: not "
                             "supported");
    r->schema.fields = calloc(r->ncols, sizeof(cdc_ice_field_t));
    if (r->schema.fields == NULL)
        return cdc_error_set(f->e, CDC_ERR_NOMEM, "out of memory");
    r->schema.nfields = r->ncols;
    for (size_t i = 0; i < r->ncols; i++) {
        const rcol_t *c = &r->cols[i];
        cdc_ice_field_t *fld = &r->schema.fields[i];
        if (c->name == NULL) /* SchemaElement.name is required */
            return cdc_error_set(f->e, CDC_ERR_CORRUPT, "parquet column %zu has no name", i);
        fld->name = strndup((const char *)c->name, c->name_len);
        if (fld->name == NULL)
            return cdc_error_set(f->e, CDC_ERR_NOMEM, "out of memory");
        fld->id = c->has_field_id ? c->field_id : 0;
        fld->required = c->repetition == REP_REQUIRED;
        rc = derive_type(c, fld, f->e);
        if (rc != CDC_OK)
            return rc;
    }
    r->fcol = calloc(r->ncols, sizeof(*r->fcol));
    if (r->fcol == NULL)
        return cdc_error_set(f->e, CDC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < r->ncols; i++) {
        r->fcol[i] = i;
        r->cols[i].field = &r->schema.fields[i];
    }
    return CDC_OK;
}

/* ---- API ---------------------------------------------------------------------- */

cdc_err_t cdc_pq_reader_open(const uint8_t *data, size_t len, cdc_pq_reader_t **out, cdc_error_t *e)
{
    cdc_pq_reader_t *r;
    footer_t f;
    size_t flen;
    cdc_err_t rc;

    if (len < 12 || memcmp(data, "PAR1", 4) != 0 || memcmp(data + len - 4, "PAR1", 4) != 0)
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "not a parquet file (%zu bytes without the PAR1 magic at both ends)",
                             len);
    flen = get_le32(data + len - 8);
    if (flen > len - 12)
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "parquet footer length %zu exceeds the file (%zu bytes)", flen, len);
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    r->data = data;
    r->len = len;
    memset(&f, 0, sizeof(f));
    f.r = r;
    f.end = len - 8 - flen;
    f.e = e;
    rc = read_footer(data + f.end, flen, &f);
    if (rc == CDC_OK)
        rc = make_schema(&f);
    if (rc == CDC_OK) {
        r->cells = calloc(r->ncols, sizeof(*r->cells));
        r->blocks = calloc(r->ncols, sizeof(*r->blocks));
        if (r->cells == NULL || r->blocks == NULL)
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    if (rc != CDC_OK) {
        cdc_pq_reader_free(r);
        return rc;
    }
    *out = r;
    return CDC_OK;
}

const cdc_ice_schema_t *cdc_pq_reader_schema(const cdc_pq_reader_t *r)
{
    return &r->schema;
}

int64_t cdc_pq_reader_rows(const cdc_pq_reader_t *r)
{
    return r->rows;
}

static void blocks_free(rblocks_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->p[i]);
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* Keeps a malloc'ed block with leaf column col (freed with the reader). */
static bool block_keep(cdc_pq_reader_t *r, size_t col, void *p)
{
    rblocks_t *b = &r->blocks[col];
    if (p == NULL || cdc_array_reserve(b->p, b->cap, b->n + 1, 16) != CDC_OK) {
        free(p);
        return false;
    }
    b->p[b->n++] = p;
    return true;
}

/* The value of nested node n at the streams' positions (record assembly, the inverse of
 * cdc_ice_nested_shred()); *bad on streams that do not fit the type. */
typedef struct lstream {
    rlevels_t lv;
    size_t pos, vpos;
} lstream_t;

static const cdc_ice_node_t *first_leaf(const cdc_ice_node_t *n)
{
    while (cdc_ice_type_is_nested(n->f.type))
        n = &n->kids[0];
    return n;
}

/* Consumes one entry of every leaf under n (a null or empty value there). */
static void skip_entry(const cdc_ice_node_t *n, lstream_t *ls, bool *bad)
{
    if (!cdc_ice_type_is_nested(n->f.type)) {
        if (ls[n->leaf].pos >= ls[n->leaf].lv.n)
            *bad = true;
        else
            ls[n->leaf].pos++;
        return;
    }
    for (size_t i = 0; i < n->nkids; i++)
        skip_entry(&n->kids[i], ls, bad);
}

static json_t *assemble(const cdc_ice_node_t *n, lstream_t *ls, bool *bad)
{
    const lstream_t *fl = &ls[first_leaf(n)->leaf];
    int d;

    if (*bad || fl->pos >= fl->lv.n) {
        *bad = true;
        return NULL;
    }
    d = fl->lv.def[fl->pos];
    if (d < n->def) {
        skip_entry(n, ls, bad);
        return json_null();
    }
    if (n->f.type == CDC_ICE_STRUCT) {
        json_t *o = json_object();
        for (size_t i = 0; o != NULL && i < n->nkids && !*bad; i++)
            json_object_set_new(o, n->kids[i].f.name, assemble(&n->kids[i], ls, bad));
        return o;
    }
    if (n->f.type == CDC_ICE_LIST) {
        json_t *a = json_array();
        if (d == n->def) { /* an empty list */
            skip_entry(n, ls, bad);
            return a;
        }
        while (a != NULL && !*bad) {
            json_array_append_new(a, assemble(n->kids, ls, bad));
            if (fl->pos >= fl->lv.n || fl->lv.rep[fl->pos] != n->rep)
                break;
        }
        return a;
    }
    lstream_t *l = &ls[n->leaf];
    if (l->vpos >= l->lv.nv) {
        *bad = true;
        return NULL;
    }
    l->pos++;
    return cdc_ice_nested_leaf_json(&n->f, &l->lv.vals[l->vpos++]);
}

/* The cells of nested field `fld`: each row's value as its nested value text. */
static cdc_err_t read_nested(cdc_pq_reader_t *r, size_t fld, cdc_ice_value_t *cells, cdc_error_t *e)
{
    const cdc_ice_node_t *root = &r->trees[fld];
    size_t nl = cdc_ice_node_leaves(root), first = r->fcol[fld], at = 0;
    lstream_t *ls = calloc(nl, sizeof(*ls));
    cdc_err_t rc = ls == NULL ? cdc_error_set(e, CDC_ERR_NOMEM, "out of memory") : CDC_OK;

    for (size_t g = 0; g < r->nrg && rc == CDC_OK; g++) {
        for (size_t k = 0; k < nl && rc == CDC_OK; k++) {
            memset(&ls[k], 0, sizeof(ls[k]));
            rc = cdc_pq_read_levels(r, first + k, g, &ls[k].lv, e);
        }
        for (int64_t row = 0; row < r->rg_rows[g] && rc == CDC_OK; row++, at++) {
            bool bad = false;
            json_t *v = assemble(root, ls, &bad);
            char *text = NULL;
            for (size_t k = 0; k < nl && !bad; k++) /* every leaf is at the next row */
                bad = ls[k].pos < ls[k].lv.n && ls[k].lv.rep[ls[k].pos] != 0;
            if (bad || v == NULL)
                rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                                   "parquet field \"%s\": its columns' levels do not fit its "
                                   "type (row %zu)",
                                   root->f.name, at);
            else if (json_is_null(v))
                cells[at].is_null = true;
            else if (!block_keep(r, first,
                                 text = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER |
                                                          JSON_REAL_PRECISION(17))))
                rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            else {
                cells[at].v.bytes.ptr = (const uint8_t *)text;
                cells[at].v.bytes.len = strlen(text);
            }
            json_decref(v);
        }
        for (size_t k = 0; k < nl; k++) {
            if (rc == CDC_OK && ls[k].pos != ls[k].lv.n)
                rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                                   "parquet field \"%s\": a column holds more entries than its "
                                   "rows",
                                   root->f.name);
            free(ls[k].lv.rep);
            free(ls[k].lv.def);
            free(ls[k].lv.vals);
            memset(&ls[k], 0, sizeof(ls[k]));
        }
    }
    free(ls);
    return rc;
}

cdc_err_t cdc_pq_reader_column(cdc_pq_reader_t *r, size_t field, const cdc_ice_value_t **values,
                               cdc_error_t *e)
{
    cdc_ice_value_t *cells;
    size_t at = 0, col;
    cdc_err_t rc;

    if (field >= r->schema.nfields)
        return cdc_error_set(e, CDC_ERR_INVALID, "parquet file has no column %zu (%zu columns)",
                             field, r->schema.nfields);
    col = r->fcol[field];
    if (r->cells[col] != NULL) {
        *values = r->cells[col];
        return CDC_OK;
    }
    cells = calloc(r->rows > 0 ? (size_t)r->rows : 1, sizeof(cdc_ice_value_t));
    if (cells == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory for %lld parquet cells",
                             (long long)r->rows);
    if (cdc_ice_type_is_nested(r->schema.fields[field].type)) {
        rc = read_nested(r, field, cells, e);
        if (rc != CDC_OK) {
            free(cells);
            for (size_t k = 0; k < cdc_ice_node_leaves(&r->trees[field]); k++)
                blocks_free(&r->blocks[col + k]);
            return rc;
        }
        r->cells[col] = cells;
        *values = cells;
        return CDC_OK;
    }
    for (size_t g = 0; g < r->nrg; g++) {
        rc = cdc_pq_read_chunk(r, col, g, cells + at, e);
        if (rc != CDC_OK) {
            free(cells);
            blocks_free(&r->blocks[col]);
            return rc;
        }
        at += (size_t)r->rg_rows[g];
    }
    r->cells[col] = cells;
    *values = cells;
    return CDC_OK;
}

void cdc_pq_reader_free(cdc_pq_reader_t *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->ncols && r->cells != NULL; i++)
        free(r->cells[i]);
    for (size_t i = 0; i < r->ncols && r->blocks != NULL; i++)
        blocks_free(&r->blocks[i]);
    free(r->cells);
    free(r->blocks);
    for (size_t i = 0; r->trees != NULL && i < r->ntop; i++)
        cdc_ice_node_free(&r->trees[i]);
    free(r->trees);
    free(r->fcol);
    cdc_ice_schema_free(&r->schema);
    free(r->cols);
    free(r->rg_rows);
    free(r->chunks);
    buf_free(&r->page);
    free(r->levels);
    free(r->idx);
    free(r->dict);
    ZSTD_freeDCtx(r->zctx);
    free(r);
}
