/*
 * The catalog (cdc_catalog_t): every known schema version of a source table, per topic,
 * and the Iceberg field ids of its columns. Field ids come from the capture's schema
 * documents (given once, by column identity: docs/worker.md, "Schema changes"); for
 * Debezium schemas, which carry none, the catalog assigns them by column name, stable
 * across versions, so ADD COLUMN gets a new id and old rows read it as null. Versions are
 * registered from the capture's registry topic (`<prefix>._schemas`) or, for Debezium
 * events that embed a Kafka Connect schema, by the decoder (worker/decode.h).
 */
#ifndef CDC_WORKER_CATALOG_H
#define CDC_WORKER_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/nested.h"
#include "common/iceberg/types.h"

/* How a column's JSON value is encoded when the type alone does not say it. */
typedef enum cdc_enc {
    CDC_ENC_DEFAULT = 0, /* temporal ints in micros (days for dates), decimals as text */
    CDC_ENC_MILLIS,      /* temporal int in milliseconds (io.debezium.time.Timestamp/Time) */
    CDC_ENC_MICROS,
    CDC_ENC_NANOS,
    CDC_ENC_BASE64, /* decimal: unscaled two's complement bytes in base64 (Kafka Decimal) */
    CDC_ENC_RECORD, /* struct: a composite's PostgreSQL text "(1,\"a b\",)" (the capture's
                     * "record" encoding, docs/events.md) */
} cdc_enc_t;

typedef struct cdc_column {
    char *name;       /* source column name (the event's member name) */
    char *field_name; /* Iceberg column name when it is not `name` (a retired field "n__v1",
                       * whose `name` is its source column's), else NULL */
    int32_t field_id;
    cdc_ice_type_t type;
    int32_t precision, scale; /* DECIMAL */
    cdc_enc_t enc;
    bool key;      /* part of the primary key (identifier field) */
    bool optional; /* nullable */
    /* LIST/STRUCT: the Iceberg JSON of the type (common/iceberg/nested.h) and its tree,
     * which checks each value before it is staged */
    char *nested;
    cdc_ice_node_t *tree;
} cdc_column_t;

/* One version of a source table's schema. Owned by the catalog. */
typedef struct cdc_source_schema {
    char *topic;
    char *ns;    /* source schema, e.g. "public" -> Iceberg namespace */
    char *table; /* source table name */
    int64_t version;
    cdc_column_t *cols;
    size_t ncols;
    size_t *key_cols; /* indices into cols, key order */
    size_t nkey;
    int32_t schema_id;    /* Iceberg schema id this version maps to */
    uint64_t fingerprint; /* hash of (name, type) list: equal = same Iceberg schema */
    /* Iceberg fields of earlier types of live columns (common/cdcschema.h): in the
     * tables' schema, never given a value by rows of this version */
    cdc_column_t *retired;
    size_t nretired;
    bool ids_given; /* field ids come from the schema document, not from the catalog */
} cdc_source_schema_t;

/* Iceberg name of a column. */
static inline const char *cdc_column_field_name(const cdc_column_t *c)
{
    return c->field_name != NULL ? c->field_name : c->name;
}

/* Field ids of the changelog's metadata columns (the catalog never gives them to a
 * source column). */
enum {
    CDC_CL_FIELD_OP = 100001,
    CDC_CL_FIELD_LSN,
    CDC_CL_FIELD_COMMIT_LSN,
    CDC_CL_FIELD_TX_ID,
    CDC_CL_FIELD_SOURCE_TS,
    CDC_CL_FIELD_KAFKA_PARTITION,
    CDC_CL_FIELD_KAFKA_OFFSET,
};

/* `_cdc_special` (string, optional), in the mirror and the changelog of a table with a
 * decimal or TOAST-able column: which of the row's decimal columns hold numeric NaN,
 * Infinity or -Infinity, and which hold an unchanged TOAST value of a row older than the
 * capture ("unchanged-toast"), all null in the column, as a JSON object
 * {"<column>":"NaN",...}; null when none does (docs/worker.md, "Values no Iceberg type
 * holds", "Unchanged TOAST values"). */
#define CDC_FIELD_SPECIAL 100008
#define CDC_FIELD_SPECIAL_NAME "_cdc_special"

typedef struct cdc_catalog cdc_catalog_t;

cdc_catalog_t *cdc_catalog_new(void);
void cdc_catalog_free(cdc_catalog_t *cat);

/*
 * Registers a schema version from the capture's registry (value of `<prefix>._schemas`
 * keyed `<topic>/<version>`). Idempotent. Versions must be registered in increasing
 * order per topic for deterministic field ids (the registry topic is read in order).
 */
cdc_err_t cdc_catalog_register_json(cdc_catalog_t *cat, const char *topic, int64_t version,
                                    const char *json, size_t len, cdc_error_t *e);

/* Seeds field ids for a table from an existing Iceberg schema (names -> ids). */
void cdc_catalog_seed_ids(cdc_catalog_t *cat, const char *ns, const char *table,
                          const cdc_ice_schema_t *schema);

/* Latest registered version for a topic, or NULL. Owned by the catalog. */
const cdc_source_schema_t *cdc_catalog_latest(cdc_catalog_t *cat, const char *topic);
const cdc_source_schema_t *cdc_catalog_get(cdc_catalog_t *cat, const char *topic, int64_t version);

/* The topics with a registered (or embedded) schema, in the order first seen: returns how
 * many there are, however many, and writes the first cap of them to topics (which may be
 * NULL when cap is 0: a count). The names are owned by the catalog. */
size_t cdc_catalog_topics(const cdc_catalog_t *cat, const char **topics, size_t cap);

/* The latest schema of table "<ns>.<table>" that has a key, from any topic and source
 * (registered or embedded in events seen so far), or NULL. Owned by the catalog. */
const cdc_source_schema_t *cdc_catalog_keyed(cdc_catalog_t *cat, const char *table);

#endif
