/*
 * The coordinator's keys in etcd, all under /cdc/<job>/:
 *   leader          {"id","endpoint","admin"} (common/cluster.h) held by the leader's lease
 *                   (term = the key's create_revision, the fencing token)
 *   epoch-counter   decimal: the first epoch id no leader has reserved yet
 *   checkpoints/<epoch, 20 digits>   checkpoint record JSON (checkpoint.h)
 *   latest          decimal: epoch of the newest checkpoint record
 *   committed       decimal: newest epoch committed to every Iceberg table
 *   tables          JSON array: the job's table set, its source topics (tableset.h)
 * Every write is a transaction fenced by the leader's term (the leader key still has
 * the create_revision we won with, so it still exists and our lease is alive): a
 * deposed leader cannot write. Runs on the coordinator's main thread only.
 */
#ifndef CDC_COORDINATOR_STORE_H
#define CDC_COORDINATOR_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/etcd.h"
#include "coordinator/checkpoint.h"
#include "coordinator/tableset.h"

typedef struct cdc_store {
    cdc_etcd_t *etcd;        /* borrowed */
    cdc_etcd_election_t *el; /* borrowed; NULL = unfenced (tools, tests) */
    char prefix[256];        /* "/cdc/<job>/" */
    char job[192];
} cdc_store_t;

void cdc_store_init(cdc_store_t *st, cdc_etcd_t *etcd, cdc_etcd_election_t *el, const char *job);

/* Key of a name under the job prefix, e.g. "latest" -> "/cdc/<job>/latest". */
void cdc_store_key(const cdc_store_t *st, const char *name, char *buf, size_t size);

/* Reads latest and committed (0 when absent). */
cdc_err_t cdc_store_read_heads(cdc_store_t *st, uint64_t *latest, uint64_t *committed,
                               cdc_error_t *e);

/*
 * Reserves `block` fresh epoch ids, none below min_next: [*from, *limit). Fenced;
 * CDC_ERR_FENCED when we are no longer the leader.
 */
cdc_err_t cdc_store_reserve_epochs(cdc_store_t *st, uint64_t min_next, uint64_t block,
                                   uint64_t *from, uint64_t *limit, cdc_error_t *e);

/*
 * Writes the record JSON for epoch and moves latest to it, atomically and fenced.
 * The point of no return of an epoch.
 */
cdc_err_t cdc_store_put_checkpoint(cdc_store_t *st, uint64_t epoch, const char *record_json,
                                   cdc_error_t *e);

/* Loads the record of an epoch. CDC_ERR_NOT_FOUND when absent. Caller frees *out. */
cdc_err_t cdc_store_get_checkpoint(cdc_store_t *st, uint64_t epoch, cdc_checkpoint_t **out,
                                   cdc_error_t *e);

/*
 * Loads every record with lo <= epoch <= hi in epoch order. On CDC_OK *out is a
 * malloc()ed array of *n records, all owned by the caller.
 */
cdc_err_t cdc_store_list_checkpoints(cdc_store_t *st, uint64_t lo, uint64_t hi,
                                     cdc_checkpoint_t ***out, size_t *n, cdc_error_t *e);

/* Loads the oldest record kept (*out NULL when there is none). Caller frees *out. */
cdc_err_t cdc_store_oldest_checkpoint(cdc_store_t *st, cdc_checkpoint_t **out, cdc_error_t *e);

/* Moves committed to epoch (fenced). */
cdc_err_t cdc_store_put_committed(cdc_store_t *st, uint64_t epoch, cdc_error_t *e);

/* Deletes checkpoint records below keep_from (one fenced range delete, best effort). */
cdc_err_t cdc_store_prune(cdc_store_t *st, uint64_t keep_from, cdc_error_t *e);

/* Reads the job's table set into s; *found false (s empty) when the key is absent. */
cdc_err_t cdc_store_get_tables(cdc_store_t *st, cdc_tableset_t *s, bool *found, cdc_error_t *e);

/* Writes the job's table set (fenced). */
cdc_err_t cdc_store_put_tables(cdc_store_t *st, const cdc_tableset_t *s, cdc_error_t *e);

/* Puts the leader key's value (keeping its lease), fenced. */
cdc_err_t cdc_store_put_leader(cdc_store_t *st, const char *value, int64_t lease, cdc_error_t *e);

#endif
