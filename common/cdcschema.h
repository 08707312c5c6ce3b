/*
 * Table schema documents exchanged between cdc-capture and cdc-worker. The capture
 * registers one document per (table, version) on the compacted topic
 * `<prefix>._schemas` (key `<topic>/<version>`) before the first event that uses it;
 * each event names its version in its envelope (source.schema_version). The document lists the
 * source columns (PostgreSQL type oid/name/typmod, nullability, key position) and the
 * Iceberg type each maps to, so the worker converts values by schema and never by
 * guessing from JSON. The PostgreSQL -> Iceberg type mapping lives here too, so that
 * every process agrees on it. Format: docs/events.md.
 */
#ifndef CDC_CDCSCHEMA_H
#define CDC_CDCSCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/types.h"

#define CDC_SCHEMA_FORMAT 1

/* Built-in PostgreSQL type oids the mapping knows (pg_type.dat). */
enum {
    CDC_PG_BOOL = 16,
    CDC_PG_BYTEA = 17,
    CDC_PG_CHAR = 18, /* "char", one byte */
    CDC_PG_NAME = 19,
    CDC_PG_INT8 = 20,
    CDC_PG_INT2 = 21,
    CDC_PG_INT4 = 23,
    CDC_PG_TEXT = 25,
    CDC_PG_OID = 26,
    CDC_PG_JSON = 114,
    CDC_PG_XML = 142,
    CDC_PG_FLOAT4 = 700,
    CDC_PG_FLOAT8 = 701,
    CDC_PG_MONEY = 790,
    CDC_PG_BPCHAR = 1042,
    CDC_PG_VARCHAR = 1043,
    CDC_PG_DATE = 1082,
    CDC_PG_TIME = 1083,
    CDC_PG_TIMESTAMP = 1114,
    CDC_PG_TIMESTAMPTZ = 1184,
    CDC_PG_INTERVAL = 1186,
    CDC_PG_TIMETZ = 1266,
    CDC_PG_NUMERIC = 1700,
    CDC_PG_UUID = 2950,
    CDC_PG_JSONB = 3802,
};

/* How a column's value is written in the event JSON (docs/events.md, "values"). */
typedef enum cdc_value_enc {
    CDC_VENC_BOOL = 0,  /* JSON true/false */
    CDC_VENC_INT,       /* JSON integer */
    CDC_VENC_FLOAT,     /* JSON number, or the strings "NaN", "Infinity", "-Infinity" */
    CDC_VENC_DECIMAL,   /* JSON string holding the exact decimal text, e.g. "12.50" */
    CDC_VENC_STRING,    /* JSON string, the PostgreSQL text form */
    CDC_VENC_BYTES,     /* JSON string, standard base64 with padding */
    CDC_VENC_DATE,      /* JSON integer, days since 1970-01-01 */
    CDC_VENC_TIME,      /* JSON integer, microseconds since midnight */
    CDC_VENC_TIMESTAMP, /* JSON integer, microseconds since 1970-01-01 00:00:00 (no zone / UTC) */
    CDC_VENC_UUID,      /* JSON string, canonical 8-4-4-4-12 lower-case hex */
    CDC_VENC_ARRAY,     /* JSON string holding a JSON array text, e.g. "[1,2,null]" */
    CDC_VENC_RECORD,    /* JSON string, a composite's PostgreSQL text "(1,\"a b\",)" (a struct) */
    CDC_VENC__COUNT
} cdc_value_enc_t;

/* One column of a source table at one schema version. */
typedef struct cdc_schema_col {
    char *name;
    uint32_t pg_oid;
    char *pg_type; /* e.g. "int4", "numeric", "public.mood"; may be NULL on decode */
    int32_t typmod;
    bool nullable;
    int key; /* 1-based position in the primary key, 0 when not a key column */
    cdc_ice_type_t ice_type;
    int32_t precision; /* DECIMAL only */
    int32_t scale;     /* DECIMAL only */
    cdc_value_enc_t enc;
    uint32_t elem_oid; /* ARRAY only: element type oid, 0 when unknown */
    /* Column identity (docs/worker.md, "Schema changes"); 0 / NULL in documents of
     * captures before identity was tracked. */
    int32_t attnum;       /* pg_attribute.attnum: the source's identity of the column */
    int32_t field_id;     /* Iceberg field id of the column in both tables */
    char *field_name;     /* Iceberg column name when it is not `name` (only a name kept
                           * from before the source name held the current values, "n__v2");
                           * else NULL */
    int32_t type_version; /* 1, + 1 on each type change that is no Iceberg promotion */
    bool has_default;     /* the catalog has a default for it (not in the document) */
    /* LIST/STRUCT: the Iceberg JSON of the type with its nested field ids (the document's
     * "iceberg" is then that object, docs/events.md "Schema documents") */
    char *ice_nested;
} cdc_schema_col_t;

/* A table's schema at one version. All strings and arrays are owned by the struct. */
typedef struct cdc_schema_doc {
    int format;  /* CDC_SCHEMA_FORMAT */
    char *topic; /* "<prefix>.<schema>.<table>" */
    char *pg_schema;
    char *pg_table;
    int64_t version; /* > 0, increasing per topic */
    uint32_t relid;
    char replica_identity; /* 'd' default, 'f' full, 'i' index, 'n' nothing */
    cdc_schema_col_t *cols;
    size_t ncols;
    /* Iceberg columns that hold values of an earlier type of a live column (a type
     * change that is no promotion): `name` is the Iceberg name, no source value maps to
     * them any more. Kept in the Iceberg schema while the source column lives. */
    cdc_schema_col_t *retired;
    size_t nretired;
    int32_t last_field_id; /* highest field id ever given in the table's documents */
    /* The change to this version rewrote rows without WAL changes (a column added with a
     * default, a changed type): the capture re-reads the table (docs/capture.md,
     * "Backfill after DDL") */
    bool backfill;
    /* Rows left the table without WAL changes (a partition detached): the backfill first
     * truncates the table's mirror, so that it holds exactly the rows re-read
     * (docs/capture.md, "Backfill after DDL"). Implies backfill. */
    bool resync;
    /* Leaf partitions of a partitioned table (oids, ascending) as the catalog listed them
     * (snapshot, schema probe); a Relation message does not carry them. An attached
     * partition's rows come without WAL changes: a version that adds one needs a backfill. */
    uint32_t *parts;
    size_t nparts;
    bool parts_known;
} cdc_schema_doc_t;

/*
 * Maps a PostgreSQL column type to its Iceberg type and event value encoding.
 * `oid` is the column's type oid, `typmod` its atttypmod, `elem_oid` the element type
 * for arrays (0 when the column is not a known array). Unknown or user-defined types
 * (enums, domains, composites) map to string/CDC_VENC_STRING. Numeric with a typmod
 * maps to decimal(p,s) when p <= 38, otherwise (and without typmod) to string holding
 * the exact decimal text.
 */
void cdc_schema_map_type(uint32_t oid, int32_t typmod, cdc_ice_type_t *ice, int32_t *precision,
                         int32_t *scale, cdc_value_enc_t *enc);

/*
 * How the capture maps types with more than one Iceberg form (docs/capture.md, "Types"):
 * arrays of the element types events carry natively as list<T> (list<list<T>> for a
 * column declared with two dimensions, ...) or as string holding JSON array text, and a
 * numeric without a typmod as decimal(P,S) or string. Applies to columns the table's
 * previous schema document does not have with the same PostgreSQL type: a registered
 * column keeps its Iceberg type (cdc_schema_doc_assign_ids()).
 */
typedef struct cdc_schema_mapping {
    bool nested;               /* arrays as lists, composites as structs */
    int32_t numeric_precision; /* 0: an unconstrained numeric stays string */
    int32_t numeric_scale;
} cdc_schema_mapping_t;

/* Parses --numeric-default: "string" or "decimal(P,S)". */
bool cdc_schema_numeric_default_parse(const char *s, cdc_schema_mapping_t *m);

/*
 * Fills col's pg_oid, typmod, Iceberg type, encoding, elem_oid and ice_nested for a column
 * of type oid/typmod declared with ndims array dimensions (pg_attribute.attndims), by
 * cdc_schema_map_type() and then m (NULL: the mapping before lists, numerics as string).
 * Nested field ids are 0 until cdc_schema_doc_assign_ids(). false when out of memory.
 */
bool cdc_schema_map_col(const cdc_schema_mapping_t *m, cdc_schema_col_t *col, uint32_t oid,
                        int32_t typmod, int ndims);

/* Element oid of a built-in array type oid (e.g. 1007 int4[] -> 23), 0 when not an array. */
uint32_t cdc_schema_array_elem(uint32_t array_oid);

/* Name of a built-in type oid ("int4"), or NULL when not built in. Static storage. */
const char *cdc_schema_pg_type_name(uint32_t oid);

/* Iceberg type as text: "int", "decimal(12,2)". Writes into buf; returns buf. */
const char *cdc_schema_ice_type_str(cdc_ice_type_t t, int32_t precision, int32_t scale, char *buf,
                                    size_t size);

/* Parses an Iceberg primitive type name ("long", "decimal(10,2)"). */
bool cdc_schema_ice_type_parse(const char *s, cdc_ice_type_t *t, int32_t *precision,
                               int32_t *scale);

const char *cdc_schema_venc_name(cdc_value_enc_t enc);
bool cdc_schema_venc_parse(const char *s, cdc_value_enc_t *out);

/*
 * Serializes doc to compact JSON. On success *out is a malloc'ed NUL-terminated string
 * owned by the caller (free()). The column order and keys are stable, so equal
 * documents (ignoring version) serialize equally: see cdc_schema_doc_same_shape().
 */
cdc_err_t cdc_schema_doc_encode(const cdc_schema_doc_t *doc, char **out, cdc_error_t *e);

/*
 * Parses a document. On success *doc is filled (caller frees with
 * cdc_schema_doc_free()); on failure *doc is left empty. Unknown fields are ignored.
 */
cdc_err_t cdc_schema_doc_decode(const char *json, size_t len, cdc_schema_doc_t *doc,
                                cdc_error_t *e);

/* Sets doc's partitions (n oids, ascending; copied) and parts_known. CDC_ERR_NOMEM. */
cdc_err_t cdc_schema_doc_set_parts(cdc_schema_doc_t *doc, const uint32_t *parts, size_t n);

/* Sets doc's partitions from a JSON text array of oids ("[16390,16395]"); a text that is
 * not an array leaves them unknown. CDC_ERR_NOMEM. */
cdc_err_t cdc_schema_doc_parts_from_json(cdc_schema_doc_t *doc, const char *json);

/* Iceberg name of a column: field_name, else name. */
const char *cdc_schema_col_field_name(const cdc_schema_col_t *c);

/*
 * Gives doc's columns their identity against prev, the table's previous document (NULL
 * for the first). The one place field ids are given (docs/worker.md, "Schema changes"):
 * - a column matches the previous column of the same attnum (by name when either
 *   document has no attnums);
 * - a matched column keeps its field id when its Iceberg type is the same or an Iceberg
 *   promotion of the old one (int -> long, float -> double, decimal precision widened
 *   at the same scale); a rename keeps the id;
 * - any other type change gives a new field id under the column's source name, and the
 *   old field is kept as a retired column renamed "<name>__v<k>", k the type version
 *   whose values it holds (1 for the first type): `n` reads the current values, `n__v1`
 *   the history;
 * - names are unique, a source column's name always wins: a retired field whose name a
 *   source column takes (or already has) is suffixed with its field id ("n__v1__f4");
 *   a live column versioned before this scheme ("n__v2" with a retired "n") keeps its
 *   names until its next rename or type change that Iceberg cannot promote;
 * - a new column gets last_field_id + 1; a dropped column's id is never given again;
 * - a column with the previous column's PostgreSQL type keeps its Iceberg type and
 *   encoding (a table registered before lists or the numeric default keeps strings);
 * - the nested field ids of a list or struct column are kept from the previous column of
 *   the same nested shape, else given from last_field_id + 1 as well.
 * A prev of an earlier capture (no field ids) is read as ids 1..n in column order, the
 * numbering workers gave such tables.
 */
cdc_err_t cdc_schema_doc_assign_ids(const cdc_schema_doc_t *prev, cdc_schema_doc_t *doc,
                                    cdc_error_t *e);

/*
 * True when the change from prev to doc changed values of existing rows without a WAL
 * change per row: a new column with a default (has_default), or a column whose
 * PostgreSQL type or Iceberg type changed (ALTER COLUMN TYPE rewrites the table, maybe
 * through USING), or a leaf partition attached (both documents list partitions). Such a
 * version needs a backfill.
 */
bool cdc_schema_doc_rewrites_rows(const cdc_schema_doc_t *prev, const cdc_schema_doc_t *doc);

/*
 * True when the change from prev to doc removed rows without a WAL change per row: a
 * leaf partition detached (both documents list partitions). Such a version needs a
 * resync: a truncate of the mirror, then a backfill.
 */
bool cdc_schema_doc_drops_rows(const cdc_schema_doc_t *prev, const cdc_schema_doc_t *doc);

/* True when a and b describe the same columns (names, types, key, nullability, identity). */
bool cdc_schema_doc_same_shape(const cdc_schema_doc_t *a, const cdc_schema_doc_t *b);

/* Deep copy; dst owns its copies. */
cdc_err_t cdc_schema_doc_copy(cdc_schema_doc_t *dst, const cdc_schema_doc_t *src);

/* Frees everything doc owns and zeroes it. NULL-safe. */
void cdc_schema_doc_free(cdc_schema_doc_t *doc);

/*
 * Builds an Iceberg schema from a document: the columns' field ids and Iceberg names
 * (ids 1..n in column order for a document without ids), then the retired columns
 * (optional), identifier fields = key columns.
 * On success *out owns its strings; free with cdc_schema_ice_free().
 */
cdc_err_t cdc_schema_doc_to_iceberg(const cdc_schema_doc_t *doc, cdc_ice_schema_t *out,
                                    cdc_error_t *e);
void cdc_schema_ice_free(cdc_ice_schema_t *s);

/* Kafka key of a schema record: "<topic>/<version>". Writes into buf; returns buf. */
const char *cdc_schema_record_key(const char *topic, int64_t version, char *buf, size_t size);

/* Splits a schema record key; topic is copied into buf. */
bool cdc_schema_record_key_parse(const char *key, size_t len, char *topic, size_t size,
                                 int64_t *version);

#endif
