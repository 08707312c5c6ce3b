/*
 * Checkpoint records: what a completed epoch is, and how it is kept in etcd. A record
 * names, for every partition slot, the next offsets per source topic and the state
 * handle at the barrier, plus every file staged for the epoch and the schema updates
 * the workers reported, and the (table, slot) pairs that applied a TRUNCATE. It is
 * written once, in an etcd transaction fenced by the
 * leader's term, to /cdc/<job>/checkpoints/<epoch> and /cdc/<job>/latest; that write is
 * the point of no return. When the file list is large it goes into a pending JSON file
 * in the warehouse first and the record holds only its path (files_path).
 *
 * The offsets of a job of many tables (docs/protocol.md, "Offsets base"): the record in
 * memory always holds every slot's offset of every topic, but once they pass
 * --checkpoint-inline-offsets the stored record holds only those that differ from an
 * offsets base, a JSON file in the warehouse with every slot's offsets at an earlier
 * epoch, named by "offsets_base" with its SHA-256. The record's cost in etcd then follows
 * the topics that moved, not the tables in the job. A record decoded from such a form
 * holds only that delta (offsets_delta true) until cdc_checkpoint_merge_base gives it
 * the base's offsets (coordinator/offsets_base.h loads and checks the file).
 *
 * This file holds the record type and its JSON forms (pure, unit tested); the etcd I/O
 * lives in store.h, the warehouse I/O in commit.h (file lists) and offsets_base.h.
 */
#ifndef CDC_COORDINATOR_CHECKPOINT_H
#define CDC_COORDINATOR_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/hash.h"
#include "common/iceberg/types.h"
#include "coordinator/assign.h"

typedef struct cdc_topic_offset {
    char *topic;
    int64_t next_offset;
} cdc_topic_offset_t;

typedef struct cdc_ckpt_partition {
    cdc_topic_offset_t *offsets; /* next offset per source topic */
    size_t noffsets;
    size_t cap;          /* capacity of offsets (common/buf.h) */
    cdc_strmap_t byname; /* topic -> index + 1 in offsets: set and find are O(1) */
    char *state_handle;  /* "" or NULL = empty state */
    char owner[CDC_WORKER_ID_MAX];
} cdc_ckpt_partition_t;

typedef struct cdc_staged_file {
    char *table;        /* "<namespace>.<table>" */
    uint32_t partition; /* slot that produced it */
    cdc_ice_data_file_t file;
} cdc_staged_file_t;

typedef struct cdc_schema_update {
    char *table;
    char *schema_json; /* Iceberg schema JSON */
    int64_t version;   /* source schema version (SchemaUpdate.source_version), 0 = none */
    char *mask_policy; /* the worker's masking policy of the table (SchemaUpdate.mask_policy),
                        * "<version>:<digest>", NULL = none */
} cdc_schema_update_t;

/* Whether two schema updates say the same: version, schema and masking policy. */
bool cdc_schema_update_same(const cdc_schema_update_t *a, const cdc_schema_update_t *b);

/* A mirror table some slots truncated in the epoch (see cdc_checkpoint_add_truncate). */
typedef struct cdc_table_truncate {
    char *table;         /* mirror table "<namespace>.<table>" */
    uint32_t partitions; /* bit p set = slot p met a TRUNCATE in this epoch */
} cdc_table_truncate_t;

/* A truncate met in one partition slot, applied by the others by position (a floor;
 * TableFloor in docs/protocol.md): the latest per table, carried from record to record. */
typedef struct cdc_table_floor {
    char *table; /* mirror table "<namespace>.<table>" */
    uint64_t commit_lsn, lsn;
    uint32_t partition; /* the slot that met it */
} cdc_table_floor_t;

/* The offsets base a stored record is a delta against (see above). */
typedef struct cdc_offsets_ref {
    uint64_t epoch;  /* the epoch whose full offsets the base holds */
    char *path;      /* its location in the warehouse; NULL = offsets inline */
    char sha256[65]; /* lower-case hex SHA-256 of the file's bytes */
} cdc_offsets_ref_t;

typedef struct cdc_checkpoint {
    char *job;
    uint64_t epoch;
    uint64_t term;
    uint64_t generation;
    int64_t barrier_ms;   /* wall clock when the barrier was sent */
    int64_t completed_ms; /* wall clock when the last ack arrived */
    cdc_ckpt_partition_t partitions[CDC_PARTITIONS];
    cdc_staged_file_t *files;
    size_t nfiles;
    cdc_schema_update_t *schemas;
    size_t nschemas;
    char *files_path; /* pending file list in the warehouse, NULL when files are inline */
    cdc_table_truncate_t *truncates; /* always inline in the record ("truncates") */
    size_t ntruncates;
    cdc_table_floor_t *floors; /* every table's latest floor so far ("floors") */
    size_t nfloors;
    cdc_offsets_ref_t offsets_base; /* of a record decoded from the delta form */
    bool offsets_delta;             /* partitions hold only the delta against offsets_base so far */
} cdc_checkpoint_t;

/* Allocates an empty record; returns NULL on allocation failure. Free with cdc_checkpoint_free. */
cdc_checkpoint_t *cdc_checkpoint_new(const char *job, uint64_t epoch, uint64_t term,
                                     uint64_t generation);
void cdc_checkpoint_free(cdc_checkpoint_t *c);

/*
 * The schema updates a leader recorded, per table (schema, source version and masking
 * policy, kept whole and compared exactly): a record leaves out an update equal to the table's last
 * recorded one, so that epochs carry the schemas of the tables whose schema changed, not of every
 * table that changed (a schema JSON is about a kilobyte). Sound because a leader commits its
 * records in order, each after the one before (the table has the schema by then), also
 * when a new leader replays them; a new term starts with an empty memo, so its first
 * record carries every schema. Loop thread only.
 */
typedef struct cdc_schema_memo {
    cdc_strmap_t by_table; /* table -> its entry (allocated, keyed by its own name) */
} cdc_schema_memo_t;

/* Forgets everything (a zeroed memo is empty). */
void cdc_schema_memo_clear(cdc_schema_memo_t *m);
/* Drops from rec the updates equal to the table's last recorded one; returns how many. */
size_t cdc_schema_memo_strip(const cdc_schema_memo_t *m, cdc_checkpoint_t *rec);
/* Notes rec's updates as recorded (after its etcd write). CDC_ERR_NOMEM leaves the memo
 * cleared: the next record then carries every schema. */
cdc_err_t cdc_schema_memo_note(cdc_schema_memo_t *m, const cdc_checkpoint_t *rec);

/* A copy of what a later assignment and barrier need of c: the ids and times, every
 * slot's offsets, state handle and owner, and the floors (no files, schemas or
 * truncates); NULL when out of memory. Linear in the offsets, no encoding. */
cdc_checkpoint_t *cdc_checkpoint_copy_base(const cdc_checkpoint_t *c);

/* Sets the slot's next offset for topic (adds or replaces; O(1) amortized). Copies topic. */
cdc_err_t cdc_checkpoint_set_offset(cdc_checkpoint_t *c, uint32_t p, const char *topic,
                                    int64_t next_offset);
/* The slot's entry of topic, NULL when the slot has none (valid until the next set). */
const cdc_topic_offset_t *cdc_checkpoint_find_offset(const cdc_checkpoint_t *c, uint32_t p,
                                                     const char *topic);
/* The number of (slot, topic) offsets the record holds. */
size_t cdc_checkpoint_offset_count(const cdc_checkpoint_t *c);
/* Sets the state handle of slot p (copied). */
cdc_err_t cdc_checkpoint_set_state(cdc_checkpoint_t *c, uint32_t p, const char *handle);
/* Appends a file; copies everything in f. */
cdc_err_t cdc_checkpoint_add_file(cdc_checkpoint_t *c, const cdc_staged_file_t *f);
/* Appends a schema update unless an identical one for the table is there; copies. */
cdc_err_t cdc_checkpoint_add_schema(cdc_checkpoint_t *c, const char *table, const char *schema_json,
                                    int64_t version);
/* The same with the column masking policy the schema's rows were written under (NULL or
 * "" = none); updates that differ only in it are kept apart. */
cdc_err_t cdc_checkpoint_add_masked_schema(cdc_checkpoint_t *c, const char *table,
                                           const char *schema_json, int64_t version,
                                           const char *mask_policy);

/*
 * Records that slot p truncated table in this epoch: the commit removes every live
 * mirror file slot p wrote before this epoch, in the epoch's snapshot. Copies table.
 */
cdc_err_t cdc_checkpoint_add_truncate(cdc_checkpoint_t *c, const char *table, uint32_t p);
/* Slots that truncated table in this epoch (bit p), 0 when none. */
uint32_t cdc_checkpoint_truncated(const cdc_checkpoint_t *c, const char *table);

/* Records a floor of table (copied): kept unless the table has one at a later
 * (commit_lsn, lsn) already. */
cdc_err_t cdc_checkpoint_add_floor(cdc_checkpoint_t *c, const char *table, uint64_t commit_lsn,
                                   uint64_t lsn, uint32_t partition);
/* Adds every floor of from (may be NULL) to c: a record carries the floors of the
 * records before it, so that every slot gets them, also after a failover. */
cdc_err_t cdc_checkpoint_carry_floors(cdc_checkpoint_t *c, const cdc_checkpoint_t *from);

/* Total bytes and record count of data (content 0) files, and delete files. */
void cdc_checkpoint_totals(const cdc_checkpoint_t *c, int64_t *bytes, int64_t *records,
                           size_t *data_files, size_t *delete_files);

/*
 * JSON encoding. with_files=false leaves "files" out (they live in files_path).
 * Returns a malloc'd NUL-terminated string owned by the caller, or NULL on failure.
 */
char *cdc_checkpoint_to_json(const cdc_checkpoint_t *c, bool with_files);

/*
 * The delta form: like cdc_checkpoint_to_json, but with "offsets_base" = ref and, per
 * slot, only the offsets that differ from base's slot or that base lacks. Every topic of
 * every slot of base must be in c's slot (cdc_checkpoint_delta_count >= 0): a delta
 * cannot remove an offset. Caller frees the result.
 */
char *cdc_checkpoint_to_json_delta(const cdc_checkpoint_t *c, bool with_files,
                                   const cdc_checkpoint_t *base, const cdc_offsets_ref_t *ref);

/* The number of offsets of c the delta form against base would hold, or -1 when some
 * slot of base has a topic c's slot lacks (then a new base is needed). */
long cdc_checkpoint_delta_count(const cdc_checkpoint_t *c, const cdc_checkpoint_t *base);

/* The content of an offsets base file: {"job","epoch","partitions":[{"p","offsets"}]}
 * (cdc_checkpoint_from_json reads it back). Caller frees. */
char *cdc_checkpoint_offsets_base_json(const cdc_checkpoint_t *c);

/*
 * Completes a record decoded from the delta form: every offset of base's slots that c's
 * delta does not name is added, in base's order. base must be the record's
 * offsets_base, checked by the caller (offsets_base.h). No-op unless c->offsets_delta;
 * CDC_ERR_CORRUPT when base's epoch is not the one the record names.
 */
cdc_err_t cdc_checkpoint_merge_base(cdc_checkpoint_t *c, const cdc_checkpoint_t *base,
                                    cdc_error_t *e);

/* Encodes only the file list ({"files":[...]}) for the pending file. Caller frees. */
char *cdc_checkpoint_files_to_json(const cdc_checkpoint_t *c);

/*
 * Parses a record. On success *out is a new record owned by the caller. A record with
 * files_path and no files is valid; load the list with cdc_checkpoint_files_from_json.
 */
cdc_err_t cdc_checkpoint_from_json(const char *json, size_t len, cdc_checkpoint_t **out,
                                   cdc_error_t *e);
/* Parses a pending file list into c (appending). */
cdc_err_t cdc_checkpoint_files_from_json(cdc_checkpoint_t *c, const char *json, size_t len,
                                         cdc_error_t *e);

/*
 * Summary value of cdc.offsets of table's snapshot: {"<topic>":[next offset of slot 0, ...,
 * slot 11]} of the table's own source topic ("<prefix>.<ns>.<name>", the changelog's
 * being its mirror's), so that a snapshot's summary stays small in a job of thousands of
 * tables; every topic of the record when no topic is the table's (other topic names, or
 * table NULL). Caller frees.
 */
char *cdc_checkpoint_offsets_json(const cdc_checkpoint_t *c, const char *table);

#endif
