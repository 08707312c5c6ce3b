/*
 * The partition specs and sort orders of the tables, as the coordinator committed them:
 * every barrier carries those of the partitioned or sorted tables (TableLayout,
 * docs/protocol.md), and rows staged after it are written per partition of their
 * table's spec, each file sorted by its order (stage.h). A table without a spec here is
 * written unpartitioned (spec 0) and unsorted (order 0), which is always correct: a
 * file names the spec and the order it was written for.
 */
#ifndef CDC_WORKER_LAYOUT_H
#define CDC_WORKER_LAYOUT_H

#include <stddef.h>

#include "common/hash.h"
#include "common/iceberg/partition.h"

typedef struct cdc_layout {
    char *table;                   /* "<ns>.<table>" or "<ns>.<table>_changelog" */
    cdc_ice_partition_spec_t spec; /* spec_id 0: unpartitioned */
    cdc_ice_sort_order_t order;    /* order_id 0: unsorted */
} cdc_layout_t;

typedef struct cdc_layouts {
    cdc_layout_t *v;
    size_t n;
    /* table -> its layout in v, for the record path, which asks for every change: a scan
     * would grow with the partitioned tables. Record thread, like the whole set. */
    cdc_strmap_t by_table;
    char *sig; /* "<table>:<spec id>;..." of the barrier the set came from */
} cdc_layouts_t;

/*
 * Replaces the set with a barrier's layouts. A layout whose spec or order does not parse
 * is left out (its table is written unpartitioned and unsorted) and logged. Keeps the
 * old set when out of memory, and when the barrier's layouts are the ones held.
 */
/* The protocol's TableLayout (proto/cdc.proto; common/msg.h decodes it). */
struct Cdc__TableLayout;

void cdc_layouts_update(cdc_layouts_t *l, struct Cdc__TableLayout *const *layouts, size_t n);

/* The spec of table ns.table (changelog: of its changelog table), or NULL (unpartitioned). */
const cdc_ice_partition_spec_t *cdc_layouts_spec(const cdc_layouts_t *l, const char *ns,
                                                 const char *table, bool changelog);
/* Its sort order, or NULL (unsorted). */
const cdc_ice_sort_order_t *cdc_layouts_order(const cdc_layouts_t *l, const char *ns,
                                              const char *table, bool changelog);

void cdc_layouts_free(cdc_layouts_t *l);

#endif
