/*
 * Unchanged-TOAST repair. PostgreSQL does not send a TOASTed value that an UPDATE did
 * not change; the capture lists such columns ("unchanged_toast") and Debezium puts a
 * placeholder there. Neither may reach Iceberg, so the worker fills them from the
 * row's last image kept in the partition state (dedup.h, "rows" family). The cost is
 * one stored copy of every live row's string/binary/decimal columns per partition.
 */
#ifndef CDC_WORKER_TOAST_H
#define CDC_WORKER_TOAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "worker/decode.h"

/* Whether c's after image holds unchanged-TOAST markers. */
bool cdc_toast_needed(const cdc_change_t *c);

/*
 * Fills every TOAST marker in c->after from the stored value (as returned by
 * cdc_dedup_check(); NULL when the entity is not in state). Returns CDC_OK, or
 * CDC_ERR_NOT_FOUND with *column naming the first column that could not be repaired
 * (the record then goes to the DLQ as unresolved_toast).
 *
 * A row older than the capture (docs/worker.md, "Unchanged TOAST values"): when the
 * entity was never seen (stored NULL) and the event says its table's first snapshot has
 * not finished (c->snapshot_pending), the row cannot be in state yet, and the value is
 * unknown rather than lost: an optional non-key column becomes CDC_VAL_TOAST_UNKNOWN
 * (null, named "unchanged-toast" in the row's _cdc_special), counted in *unknown. A key
 * never seen with no such mark (state lost, a Debezium topic) stays unresolved.
 */
cdc_err_t cdc_toast_repair(cdc_change_t *c, const uint8_t *stored, size_t stored_len,
                           const char **column, unsigned *unknown);

#endif
