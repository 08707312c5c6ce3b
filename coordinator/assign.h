/*
 * Partition assignment: maps the 12 partition slots onto the live workers. Pure logic,
 * no I/O, so it is unit tested exhaustively. The result is balanced (every worker holds
 * floor(12/n) or ceil(12/n) slots) and sticky (a slot stays with its previous owner
 * whenever balance allows), so a rebalance moves as few slots, and so as little state,
 * as possible. The rebalance grace period (a lost worker's slots wait for it to come
 * back) is decided by the caller; this module only computes a placement.
 */
#ifndef CDC_COORDINATOR_ASSIGN_H
#define CDC_COORDINATOR_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

#include "common/cluster.h"
#include "common/err.h"

#define CDC_PARTITIONS CDC_CLUSTER_PARTITIONS
#define CDC_WORKER_ID_MAX 64

/* Bit set of partition slots, bit p = slot p. */
typedef uint16_t cdc_pset_t;
#define CDC_PSET_ALL ((cdc_pset_t)((1u << CDC_PARTITIONS) - 1))

/* Number of slots in a set. */
int cdc_pset_count(cdc_pset_t s);

/*
 * Computes owners for all slots. workers: n live worker ids (1 <= n <= CDC_PARTITIONS,
 * distinct, not NULL). previous[p]: id of the slot's previous owner or NULL/"" when
 * unknown; previous may be NULL. On success owner[p] is an index into workers for every p.
 * The result depends only on the inputs (workers are considered in id order), so two
 * coordinators compute the same placement. Returns CDC_ERR_INVALID for bad n.
 */
cdc_err_t cdc_assign_compute(const char *const *workers, size_t n, const char *const *previous,
                             int owner[CDC_PARTITIONS]);

/* Number of slots whose owner differs between two placements given as id arrays. */
int cdc_assign_moves(const char *const *before, const char *const *after);

#endif
