/*
 * Record decoding: turns one Kafka record (key, value, headers) into a typed change
 * (cdc_change_t) whose row images follow a known source schema. Accepts the capture's
 * events (Debezium-style envelope, schema referenced by source.schema_version or the
 * `cdc.schema` header and registered on `<prefix>._schemas`) and real Debezium JSON: the
 * JsonConverter envelope with schemas ({"schema":..,"payload":..}), without schemas (types then
 * come from the table's registered schema), and the ExtractNewRecordState flattened form (__op,
 * __lsn, __deleted, ...). Types always come from a schema, never from JSON values.
 *
 * The schemas come from the catalog (worker/catalog.h). The pieces: worker/decode.c (the
 * envelopes), worker/decode_fast.c (the direct decoder of the capture's events),
 * worker/convert.c (JSON values to typed values), worker/row.c (entity keys and row
 * images for state) and worker/catalog.c; their shared internals are in decode_int.h.
 */
#ifndef CDC_WORKER_DECODE_H
#define CDC_WORKER_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/types.h"
#include "worker/catalog.h"
#include "worker/dlq.h"

typedef enum cdc_val_kind {
    CDC_VAL_NULL = 0,
    CDC_VAL_SET,
    CDC_VAL_TOAST, /* unchanged TOAST value: not sent, must be repaired from state */
    /* numeric NaN, Infinity, -Infinity in a decimal column: no decimal holds them, so the
     * column is null in the files and the row's `_cdc_special` names the value
     * (docs/worker.md, "Values no Iceberg type holds") */
    CDC_VAL_NAN,
    CDC_VAL_POS_INF,
    CDC_VAL_NEG_INF,
    /* an unchanged TOAST value of a row older than the capture, whose value the worker
     * never had (the event's `snapshot_pending`, docs/worker.md, "Unchanged TOAST
     * values"): null in the files, named by the row's `_cdc_special` as
     * "unchanged-toast"; the snapshot read that follows brings the value */
    CDC_VAL_TOAST_UNKNOWN,
} cdc_val_kind_t;

/* A special value's kind (CDC_VAL_NAN ...), or false. */
static inline bool cdc_val_kind_special(cdc_val_kind_t k)
{
    return k == CDC_VAL_NAN || k == CDC_VAL_POS_INF || k == CDC_VAL_NEG_INF;
}

/* A kind the row's `_cdc_special` names: a numeric special value, or an unchanged TOAST
 * value unknown to the worker. */
static inline bool cdc_val_kind_noted(cdc_val_kind_t k)
{
    return cdc_val_kind_special(k) || k == CDC_VAL_TOAST_UNKNOWN;
}

/* A typed column value. Strings/binary/uuid point into `bytes` (owned by the row). */
typedef struct cdc_val {
    cdc_val_kind_t kind;
    union {
        bool b;
        int64_t i;    /* INT, LONG, DATE, TIME, TIMESTAMP(TZ) */
        double d;     /* FLOAT, DOUBLE */
        __int128 dec; /* DECIMAL unscaled, at the column's scale */
    } u;
    uint8_t *bytes; /* STRING, BINARY, UUID (16 bytes); malloc'd, owned by the value */
    size_t len;
} cdc_val_t;

/* A row image: one value per column of `schema`. */
typedef struct cdc_row {
    const cdc_source_schema_t *schema;
    cdc_val_t *vals; /* schema->ncols */
} cdc_row_t;

typedef enum cdc_op {
    CDC_OP_CREATE = 'c',
    CDC_OP_UPDATE = 'u',
    CDC_OP_DELETE = 'd',
    CDC_OP_READ = 'r',
    CDC_OP_TRUNCATE = 't', /* entity = table identity, no rows */
    CDC_OP_SCHEMA = 's',   /* a schema marker: the table follows its schema version from
                            * here (a DDL no change followed, docs/events.md); no rows */
} cdc_op_t;

/* A decoded change. Owns its rows and key (cdc_change_clear()). */
typedef struct cdc_change {
    cdc_op_t op;
    uint64_t lsn;
    uint64_t commit_lsn;
    int64_t tx_id;        /* -1 when unknown */
    int64_t source_ts_us; /* source commit time, microseconds since epoch */
    const cdc_source_schema_t *schema;
    cdc_row_t before; /* vals NULL when absent */
    cdc_row_t after;  /* vals NULL for deletes */
    uint8_t *entity;  /* canonical entity key: table identity + key values */
    size_t entity_len;
    const char *topic; /* borrowed from the input */
    int32_t partition;
    int64_t offset;
    bool tombstone; /* Kafka tombstone (null value): skipped, not an error */
    /* A row the capture re-read after a DDL rewrote the table, or the truncate before
     * such rows (docs/capture.md, "Backfill after DDL"): it updates the mirror, and is no
     * change of the source (no changelog row) */
    bool backfill;
    /* The snapshot a snapshot row (op r) belongs to: its source.snapshot_id hashed
     * (cdc_decode_snapshot_tag), 0 when it has none. For any other change the caller
     * carries its row's tag over from state (cdc_dedup_carry_snapshot), so that the
     * row keeps it (worker/dedup.h, "Snapshot reads"). */
    uint64_t snapshot_tag;
    /* A truncate written to one partition of the topic (Debezium's): the other partition
     * slots apply it by position, as a floor (docs/worker.md, "Debezium's truncate"). */
    bool floor;
    /* A change from before its table's floor that reached its slot after the slot applied
     * the floor: a change of the source (a changelog row), no longer of the mirror. Set by
     * the caller from the dedup verdict (worker/dedup.h), never by the decoder. */
    bool changelog_only;
    /* A record `cdcctl dlq replay` put back (it carries cdc.replay.count, common/dlq.h):
     * dedup remembers its (entity, lsn, op), and one not after its entity's position goes
     * to the changelog only (worker/dedup.h, "Replayed dead letters"). Set by the caller
     * from the record's headers, never by the decoder. */
    bool replayed;
    /* Columns whose value the column's type cannot hold (a type mismatch in a column that
     * is neither a key nor required): they are null in the row, which is kept, and the
     * record also goes to the DLQ, the first such column named in the decoder's *de
     * (docs/worker.md, "Values no Iceberg type holds"). */
    unsigned nulled;
    /* The event says `snapshot_pending` (docs/events.md): its table's first snapshot has
     * not finished, so a row it lists unchanged TOAST columns of may be older than the
     * capture, and no earlier image of it in state is no loss (worker/toast.h). */
    bool snapshot_pending;
} cdc_change_t;

/* The tag of a snapshot id (source.snapshot_id) of n bytes: a 64-bit hash, never 0. */
uint64_t cdc_decode_snapshot_tag(const char *id, size_t n);

/* Kafka record as seen by the decoder (all borrowed). */
typedef struct cdc_decode_input {
    const char *topic;
    int32_t partition;
    int64_t offset;
    const void *key;
    size_t key_len;
    const void *value; /* NULL = tombstone */
    size_t value_len;
    /* The schema version names a registered document: the envelope's source.schema_version
     * (the capture), else the `cdc.schema` header (events of earlier captures). The caller
     * either passes the header's value (-1 when absent) or -1 and header_version, which
     * the decoder calls only when the envelope names no version (a header lookup costs an
     * allocation per message in librdkafka). */
    int64_t schema_version;
    int64_t (*header_version)(const void *arg); /* optional; -1 when absent */
    const void *header_arg;
} cdc_decode_input_t;

typedef struct cdc_decode_options {
    size_t max_record_bytes;       /* larger values go to the DLQ as oversized; 0 = 16 MiB */
    const char *toast_placeholder; /* Debezium's unavailable.value.placeholder */
    const char *default_ns;        /* namespace when the event names none ("public") */
} cdc_decode_options_t;

/* Decode failure: class for the DLQ plus a message. */
typedef struct cdc_decode_error {
    cdc_dlq_class_t cls;
    char msg[256];
    int64_t schema_version; /* the version the event names (envelope or header), -1 if none */
    /* msg[quote_at..] quotes the record (a value, JSON near a syntax error); 0 = msg quotes
     * nothing. Column masking cuts it there (worker/mask.h, cdc_mask_error). */
    size_t quote_at;
} cdc_decode_error_t;

/*
 * The key values of an entity key (cdc_decode_entity's output) as a row of schema s: its
 * key columns set, every other column null (row->vals owned by the caller:
 * cdc_row_clear). False when the entity does not hold s's key (another table, other key
 * types) or out of memory.
 */
bool cdc_decode_entity_row(const cdc_source_schema_t *s, const uint8_t *entity, size_t len,
                           cdc_row_t *row);

/*
 * Decodes one record. On CDC_OK *out is filled (release with cdc_change_clear()); a
 * tombstone returns CDC_OK with out->tombstone set. On CDC_OK with out->nulled > 0, *de
 * names the first column made null (class type_mismatch), for the dead letter. On
 * CDC_ERR_INVALID *de says why (the record belongs in the DLQ) and *out holds nothing.
 * Other codes are internal failures (out of memory).
 */
cdc_err_t cdc_decode(cdc_catalog_t *cat, const cdc_decode_options_t *opts,
                     const cdc_decode_input_t *in, cdc_change_t *out, cdc_decode_error_t *de);

void cdc_change_clear(cdc_change_t *c);

/* Frees the values' bytes and the array (not the schema). */
void cdc_row_clear(cdc_row_t *r);

/*
 * Row image serialization for state (TOAST repair): values tagged by field id, so an
 * image written under one schema version reads under a later one.
 */
bool cdc_row_serialize(const cdc_row_t *r, uint8_t **out, size_t *out_len);
/*
 * The same image after `head` bytes the caller fills (*out_len counts them), without the
 * bytes of each value of `big` bytes or more: those are holes (where in *out, and the
 * value), at most one per column, which the caller writes from the row itself, so that a
 * large row's image is never copied (docs/worker.md, "Large rows").
 */
typedef struct cdc_row_hole {
    size_t at; /* the value's bytes belong before (*out)[at] */
    const uint8_t *p;
    size_t len;
} cdc_row_hole_t;
bool cdc_row_serialize_split(const cdc_row_t *r, size_t head, size_t big, uint8_t **out,
                             size_t *out_len, cdc_row_hole_t *holes, size_t *nholes);
/* Value of field_id in a serialized image: 1 = found (v filled, bytes malloc'd),
 * 0 = absent, -1 = corrupt. */
int cdc_row_image_lookup(const uint8_t *img, size_t len, int32_t field_id, cdc_val_t *v);

#endif
