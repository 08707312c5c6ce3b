/*
 * Offsets bases: the warehouse files that let the checkpoint record of a job of
 * thousands of tables hold only the offsets that moved (docs/protocol.md, "Offsets
 * base"; the JSON forms are checkpoint.h's). Once a record's offsets pass
 * --checkpoint-inline-offsets, the leader writes a base,
 * <warehouse>/_cdc/<job>/offsets/<epoch, 20 digits>.json, with every slot's offsets of
 * the record being recorded; from then on records name it, with its SHA-256, and carry
 * only the offsets that differ from it. Loading a record merges the base back after
 * checking its digest; pruning deletes the bases no retained record names.
 *
 * A record only names a base that the leader of its own term wrote and keeps in memory
 * (a new leader writes its own with its first large record): the base a record needs
 * is never one this process would have to read, check and trust first, and the bases
 * named by successive records never go back in epoch (what pruning relies on).
 * Main thread only (the commit pipeline and the leader's start).
 */
#ifndef CDC_COORDINATOR_OFFSETS_BASE_H
#define CDC_COORDINATOR_OFFSETS_BASE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/storage.h"
#include "coordinator/checkpoint.h"

/* The leader's current base. A zeroed struct has none; free with cdc_offsets_base_clear. */
typedef struct cdc_offsets_base {
    cdc_checkpoint_t *offsets; /* every slot's offsets at ref.epoch; NULL = no base */
    cdc_offsets_ref_t ref;     /* its location and digest (ref.path owned) */
    uint64_t term;             /* the term that wrote it */
} cdc_offsets_base_t;

void cdc_offsets_base_clear(cdc_offsets_base_t *b);

/* Location of the base of epoch in the warehouse, into buf. */
void cdc_offsets_base_location(const char *warehouse, const char *job, uint64_t epoch, char *buf,
                               size_t size);

/*
 * The JSON to record for rec (with its file list unless with_files is false). With at
 * most inline_max offsets in all, today's inline form, and the base is dropped. Else the
 * delta form against b, after writing a new base from rec first when b is none, is of
 * another term, holds a topic some slot of rec lacks (a delta cannot remove one), or
 * when the delta would pass inline_max offsets. On CDC_OK *out is the caller's; on
 * failure (the base could not be written: retry) b is unchanged.
 */
cdc_err_t cdc_offsets_base_record_json(cdc_offsets_base_t *b, cdc_storage_t *s,
                                       const char *warehouse, const cdc_checkpoint_t *rec,
                                       bool with_files, int64_t inline_max, char **out,
                                       cdc_error_t *e);

/*
 * Completes a record decoded from the delta form (no-op for any other): reads its base,
 * checks the SHA-256 the record names and merges (cdc_checkpoint_merge_base). A missing
 * base or one whose digest or epoch differs is CDC_ERR_CORRUPT, logged as an error
 * naming the file: offsets are never guessed. Other storage errors are returned as they
 * are (retriable).
 */
cdc_err_t cdc_offsets_base_load(cdc_storage_t *s, cdc_checkpoint_t *rec, cdc_error_t *e);

/* The lowest epoch of a base that oldest, the oldest retained record, or any later one
 * can name: its base's, or its own epoch when its offsets are inline. */
uint64_t cdc_offsets_base_floor(const cdc_checkpoint_t *oldest);

/* Deletes the job's bases of epochs below floor (best effort); returns how many. */
size_t cdc_offsets_base_prune(cdc_storage_t *s, const char *warehouse, const char *job,
                              uint64_t floor);

#endif
