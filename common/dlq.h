/*
 * The dead-letter record format, defined once for the two programs that share it:
 * cdc-worker writes dead letters (worker/dlq.c), cdcctl lists, shows and replays them
 * (tools/cdcctl/dlq.c). A record that can never be processed goes to `<topic>.dlq` with
 * its original key and value and the headers below; a replayed record goes back to its
 * origin topic and partition with a replay count, and `cdcctl dlq replay` marks each dead
 * letter it replayed in `<prefix>._dlq_replays` (docs/operations.md, "Dead letters").
 * This module also holds the selection of dead letters by table, class, partition,
 * offset range and record id, so that its parsing is tested without a broker.
 */
#ifndef CDC_COMMON_DLQ_H
#define CDC_COMMON_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/kafka.h"

typedef enum cdc_dlq_class {
    CDC_DLQ_MALFORMED_JSON = 0,
    CDC_DLQ_MISSING_KEY,
    CDC_DLQ_UNKNOWN_OP,
    CDC_DLQ_TYPE_MISMATCH,
    CDC_DLQ_UNKNOWN_SCHEMA,
    CDC_DLQ_OVERSIZED,
    CDC_DLQ_UNRESOLVED_TOAST,
    CDC_DLQ__COUNT
} cdc_dlq_class_t;

/* Stable lower-case name of a class, used in the `cdc.error.class` header and metrics. */
const char *cdc_dlq_class_name(cdc_dlq_class_t cls);

/* The class called name, or -1. */
int cdc_dlq_class_parse(const char *name);

/* Header names of a dead letter. */
#define CDC_DLQ_H_CLASS "cdc.error.class"
#define CDC_DLQ_H_MESSAGE "cdc.error.message"
#define CDC_DLQ_H_TOPIC "cdc.origin.topic"
#define CDC_DLQ_H_PARTITION "cdc.origin.partition"
#define CDC_DLQ_H_OFFSET "cdc.origin.offset"
#define CDC_DLQ_H_TIME "cdc.error.time"
/* How many times the record was replayed before it failed (0: never). A replayed record
 * carries it too, counting its own replay; the worker copies it into the dead letter of
 * a replayed record that fails again. */
#define CDC_DLQ_H_REPLAY_COUNT "cdc.replay.count"
/* On a replayed record: the id of the dead letter it was made from. */
#define CDC_DLQ_H_REPLAY_OF "cdc.replay.of"

/* DLQ topic name for a source topic ("<topic>.dlq") into buf. */
#define CDC_DLQ_SUFFIX ".dlq"
void cdc_dlq_topic(const char *topic, char *buf, size_t size);

/* The topic of replay marks, "<prefix>._dlq_replays" (compacted, one partition). */
void cdc_dlq_replays_topic(const char *prefix, char *buf, size_t size);

/* The headers attached to a dead letter, as name/value strings. */
#define CDC_DLQ_NHEADERS 7
typedef struct cdc_dlq_headers {
    const char *name[CDC_DLQ_NHEADERS];
    char value[CDC_DLQ_NHEADERS][300];
} cdc_dlq_headers_t;

/* Fills h: cdc.error.class, cdc.error.message, cdc.origin.topic, cdc.origin.partition,
 * cdc.origin.offset, cdc.error.time (RFC 3339 UTC, milliseconds), cdc.replay.count. */
void cdc_dlq_headers(cdc_dlq_headers_t *h, cdc_dlq_class_t cls, const char *message,
                     const char *topic, int32_t partition, int64_t offset, int64_t now_ms,
                     int64_t replay_count);

/* The replay count a record carries in its cdc.replay.count header (0 when absent or
 * not a count). */
int64_t cdc_dlq_replay_count(const cdc_kafka_header_t *h);

/* ---- dead letters read back (cdcctl) ------------------------------------------------ */

/*
 * A record id names one dead letter: "<dlq-topic>:<partition>:<offset>", e.g.
 * "cdc.public.orders.dlq:3:17" (Kafka topic names never hold ':'). In a file of ids the
 * short form "<partition>:<offset>" names a record of the one table selected.
 */
#define CDC_DLQ_ID_MAX 300

void cdc_dlq_id_format(char *buf, size_t size, const char *dlq_topic, int32_t partition,
                       int64_t offset);

/* Parses an id; the short form takes default_topic (NULL: the short form is an error). */
bool cdc_dlq_id_parse(const char *s, const char *default_topic, char *topic, size_t topic_size,
                      int32_t *partition, int64_t *offset);

typedef struct cdc_dlq_record {
    char id[CDC_DLQ_ID_MAX];
    char dlq_topic[256];
    int32_t partition; /* in the DLQ topic */
    int64_t offset;
    char table[256]; /* the origin topic less "<prefix>." ("public.orders") */
    char cls[64];
    char message[300];
    char origin_topic[256];
    int32_t origin_partition; /* -1 when the header is missing */
    int64_t origin_offset;
    char time[40]; /* cdc.error.time */
    int64_t replay_count;
} cdc_dlq_record_t;

/*
 * Fills r from a dead letter's position and headers (hs[0..n), e.g. from
 * cdc_kafka_msg_header_at()). The table is the origin topic (or, without that header,
 * the DLQ topic less ".dlq") with "<prefix>." removed. False when the record has no
 * class header: not a dead letter.
 */
bool cdc_dlq_record_parse(cdc_dlq_record_t *r, const char *dlq_topic, int32_t partition,
                          int64_t offset, const cdc_kafka_header_t *hs, size_t n,
                          const char *prefix);

/* ---- replay marks ----------------------------------------------------------------------- */

/* What `cdcctl dlq replay` records, keyed by the dead letter's id, once the replayed
 * record was acknowledged at topic/partition/offset. */
typedef struct cdc_dlq_mark {
    char id[CDC_DLQ_ID_MAX];
    char time[40];   /* when it was replayed, RFC 3339 UTC */
    char topic[256]; /* where the replayed record went */
    int32_t partition;
    int64_t offset;
    int64_t replay_count; /* the replayed record's cdc.replay.count */
    char transform[300];  /* "patch <file>", "cmd <command>" or "" */
} cdc_dlq_mark_t;

/* JSON value of a mark (malloc'd, the caller frees), NULL when out of memory. */
char *cdc_dlq_mark_encode(const cdc_dlq_mark_t *m);

/* Parses a mark's JSON value; false when it is not one. */
bool cdc_dlq_mark_parse(const void *json, size_t len, cdc_dlq_mark_t *m);

/* ---- selection ---------------------------------------------------------------------------- */

/* Which dead letters a command takes: every condition given must hold. */
typedef struct cdc_dlq_select {
    char **tables; /* --table: table names ("public.orders"), NULL = any */
    size_t ntables;
    bool classes[CDC_DLQ__COUNT]; /* --class */
    bool any_class;
    int32_t partition;              /* --partition: DLQ partition, -1 = any */
    int64_t from_offset, to_offset; /* DLQ offsets, inclusive; -1 = open */
    char **ids;                     /* --ids-file: sorted record ids, NULL = any */
    size_t nids;
    bool skip_replayed; /* leave out records marked replayed */
} cdc_dlq_select_t;

/*
 * Initializes sel from the option values: tables and classes are comma-separated lists
 * (NULL or "" = any); partition, from_offset and to_offset -1 = any. A class that does
 * not exist or a range that ends before it starts is CDC_ERR_CONFIG, named in e. On
 * failure sel owns nothing.
 */
cdc_err_t cdc_dlq_select_init(cdc_dlq_select_t *sel, const char *tables, const char *classes,
                              int64_t partition, int64_t from_offset, int64_t to_offset,
                              bool skip_replayed, cdc_error_t *e);

/*
 * Adds the ids of text (a file's contents): one id per line, "#" comments and blank
 * lines ignored, the short form taking the topic of the only table selected (with
 * prefix). A line that is no id is CDC_ERR_CONFIG naming its line number. From then on
 * only those ids match (an empty file matches nothing).
 */
cdc_err_t cdc_dlq_select_ids(cdc_dlq_select_t *sel, const char *text, const char *prefix,
                             cdc_error_t *e);

/* Whether r is selected; replayed: r has a replay mark. */
bool cdc_dlq_select_match(const cdc_dlq_select_t *sel, const cdc_dlq_record_t *r, bool replayed);

void cdc_dlq_select_free(cdc_dlq_select_t *sel);

#endif
