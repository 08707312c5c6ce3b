/*
 * What the leader accepts from a worker as a staged file (docs/security.md, "The committer
 * trusts no path"). A worker's Ack names, per file, the Iceberg table ("<ns>.<name>") and the
 * file's full location; the committer later adds that location to the table's metadata, and
 * expiry and orphan cleanup delete what a table lists. So before an Ack is merged:
 * - the table name is two safe path segments: no '/', '\\', control character, "." or "..";
 * - the table is one of the job's: its source topic ("<prefix>.<ns>.<name>", the
 *   changelog's being its mirror's) is in the job's table set;
 * - the location lies under that table's own data directory, "<warehouse>/<ns>/<name>/data/",
 *   every segment after it safe as above (no "..", no empty segment): no other scheme, bucket,
 *   table or directory.
 * And before a completed checkpoint is recorded, each file exists with the size the Ack gave
 * (cdc_committer_verify_files, coordinator/commit.h). A violation is a security event: the
 * Ack is rejected, logged as an error, counted in
 * cdc_coordinator_security_rejections_total{reason}, shown in /status and the job recovers.
 * Pure logic, one thread (the coordinator's loop).
 */
#ifndef CDC_COORDINATOR_STAGED_CHECK_H
#define CDC_COORDINATOR_STAGED_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "common/hash.h"
#include "coordinator/tableset.h"

typedef enum cdc_staged_reason {
    CDC_STAGED_OK = 0,
    CDC_STAGED_TABLE_NAME,    /* the table name is not two safe segments */
    CDC_STAGED_TABLE_UNKNOWN, /* no topic of the job's set is the table's */
    CDC_STAGED_PATH,          /* the location is outside the table's data directory */
    CDC_STAGED_MISSING,       /* no file at the location */
    CDC_STAGED_SIZE,          /* the file's size is not the acked one */
    CDC_STAGED_REASONS,
} cdc_staged_reason_t;

/* Metric label and /status key: "table_name", "table_unknown", "path", "missing", "size". */
const char *cdc_staged_reason_name(cdc_staged_reason_t r);

/* The tables of a job's set, by "<ns>.<name>": every dotted suffix of every topic. Rebuilt
 * when the set's size changes (a set never narrows; cdc_staged_index_clear when the set is
 * replaced). A zeroed index is empty. */
typedef struct cdc_staged_index {
    cdc_strmap_t names; /* suffix -> (void *)1, keys in keys[] */
    char **keys;
    size_t nkeys, cap;
    int indexed; /* set->n when built */
} cdc_staged_index_t;

void cdc_staged_index_clear(cdc_staged_index_t *x);

/*
 * Checks one staged file's table and location (not its existence). On a violation returns
 * its reason and writes a sentence naming table and location into why.
 * CDC_STAGED_TABLE_UNKNOWN is also returned when the index cannot be built (out of memory).
 */
cdc_staged_reason_t cdc_staged_check(cdc_staged_index_t *x, const cdc_tableset_t *set,
                                     const char *warehouse, const char *table, const char *path,
                                     char *why, size_t size);

#endif
