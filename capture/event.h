/*
 * Change-event encoding: PostgreSQL text-format column values to JSON by the column's
 * value encoding (common/cdcschema.h), the Kafka key (JSON object of the key columns)
 * and the Debezium-style envelope. This is the capture's hot path, so it writes JSON
 * directly into a reusable byte buffer instead of building a jansson tree; the output
 * is plain JSON that any parser reads (the unit tests parse it back with jansson).
 * Format reference: docs/events.md.
 */
#ifndef CDC_CAPTURE_EVENT_H
#define CDC_CAPTURE_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "capture/pgoutput.h"
#include "common/buf.h"
#include "common/cdcschema.h"
#include "common/err.h"

/* The text buffer cdc_buf_t and cdc_buf_json_str() are common/buf.h's. */

/*
 * Appends one column value (PostgreSQL text output, `len` bytes) as JSON according to
 * `enc` (and `elem_oid` for arrays). A value that does not parse as its encoding
 * expects (e.g. date 'infinity', numeric 'NaN' in a float column) is written as a JSON
 * string of the original text, so nothing is lost; docs/events.md lists these cases.
 */
void cdc_event_put_value(cdc_buf_t *b, cdc_value_enc_t enc, uint32_t elem_oid, const char *text,
                         size_t len);

/* Conversions exposed for tests. Return false when the text does not parse. */
bool cdc_event_parse_date(const char *s, size_t len, int64_t *days);
bool cdc_event_parse_time(const char *s, size_t len, int64_t *micros);
bool cdc_event_parse_timestamp(const char *s, size_t len, int64_t *micros);
void cdc_event_put_base64_of_hex(cdc_buf_t *b, const char *s, size_t len);
/* (arrays: cdc_pg_array_to_json(), common/pgarray.h) */

/* What one change event says, besides the row images. */
typedef struct cdc_event {
    char op; /* 'c', 'u', 'd', 'r', 't' */
    const cdc_schema_doc_t *schema;
    const cdc_pgo_tuple_t *before; /* NULL = JSON null */
    bool before_key_only;          /* `before` is a replica-identity key tuple: key columns only */
    const cdc_pgo_tuple_t *after;  /* NULL = JSON null */
    uint64_t lsn;
    uint64_t commit_lsn;
    uint32_t xid;
    int64_t source_ts_ms; /* commit time */
    int64_t ts_ms;        /* time the capture processed the change */
    const char *snapshot; /* "true", "last" or "false" */
    /* source.snapshot_id of a snapshot row: the snapshot it belongs to (docs/events.md);
     * NULL: the member is left out */
    const char *snapshot_id;
    /* written as "snapshot_pending":true next to "unchanged_toast" (when it is there):
     * the table's first snapshot has not finished, so the row may be older than the
     * capture and no consumer may have its earlier image (docs/events.md) */
    bool snapshot_pending;
    const char *db;
    const char *name; /* topic prefix */
    /* Optional caches (NULL = computed each time): the source object's constant head from
     * cdc_event_source_head(), and per column the JSON member name `"col":`. */
    const char *source_head;
    size_t source_head_len;
    const char *const *col_names;
    const size_t *col_name_lens;
} cdc_event_t;

/* Writes the constant head of "source" (version .. table, schema_version) into b
 * (appending). schema_version <= 0 leaves the member out. */
void cdc_event_source_head(cdc_buf_t *b, const char *name, const char *db, const char *schema,
                           const char *table, int64_t schema_version);

/* Appends a decimal integer. */
void cdc_buf_put_i64(cdc_buf_t *b, int64_t v);
void cdc_buf_put_u64(cdc_buf_t *b, uint64_t v);

/*
 * Writes the envelope of ev into b (appending). Unchanged-TOAST columns of `after` are
 * left out of it and listed in "unchanged_toast".
 */
void cdc_event_encode_value(cdc_buf_t *b, const cdc_event_t *ev);

/*
 * Writes the key of a row into b (appending): a JSON object of the key columns in
 * table column order. Values come from `row`; a key column missing there (unchanged
 * TOAST or absent) is taken from `fallback` when given. Returns false when the schema
 * has no key column or a key value is unavailable.
 */
bool cdc_event_encode_key(cdc_buf_t *b, const cdc_schema_doc_t *schema, const cdc_pgo_tuple_t *row,
                          const cdc_pgo_tuple_t *fallback);

/* True when the key columns of a and b hold the same bytes. */
bool cdc_event_same_key(const cdc_schema_doc_t *schema, const cdc_pgo_tuple_t *a,
                        const cdc_pgo_tuple_t *b);

/* Formats an LSN as PostgreSQL does ("16/B374D848") into buf (>= 18 bytes). */
const char *cdc_lsn_str(uint64_t lsn, char *buf, size_t size);
/* Parses "16/B374D848". */
bool cdc_lsn_parse(const char *s, uint64_t *lsn);

#endif
