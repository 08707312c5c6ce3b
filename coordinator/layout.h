/*
 * Declared table layouts (docs/iceberg.md, "Partitioning and sort orders"): the
 * coordinator's --partition-by and --sort-by options, one declaration per Iceberg table,
 *   "<namespace>.<table>=<terms>;<namespace>.<table>=<terms>"
 * e.g. "public.orders=bucket[16](id),day(created_at);public.orders_changelog=day(_source_ts)".
 * The terms are checked here for their form (table names, transform names) so that a
 * typo stops the process at start; their columns resolve against a table's schema when
 * the committer applies them (cdc_ice_table_set_layout()).
 */
#ifndef CDC_COORDINATOR_LAYOUT_H
#define CDC_COORDINATOR_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/*
 * Checks a --partition-by (sort = false) or --sort-by (sort = true) value; NULL or ""
 * is valid. CDC_ERR_CONFIG with a message naming the declaration at fault.
 */
cdc_err_t cdc_layout_check(const char *decl, bool sort, cdc_error_t *e);

/*
 * The terms declared for table in decl (malloc'ed, caller frees), or NULL when decl
 * declares nothing for it (the table is then unpartitioned / unsorted).
 */
char *cdc_layout_lookup(const char *decl, const char *table);

#endif
