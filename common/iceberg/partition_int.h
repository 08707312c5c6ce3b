/*
 * Internals shared by the two halves of the partition module (partition.h):
 * partition.c (transforms and partition values) and partition_spec.c (specs and sort
 * orders). Not for use outside partition*.c.
 */
#ifndef CDC_ICEBERG_PARTITION_INT_H
#define CDC_ICEBERG_PARTITION_INT_H

#include "common/iceberg/partition.h"

/* The spec's name of a transform kind without its parameter ("bucket", "day", ...);
 * "unknown" for a kind out of range. */
const char *cdc_ice_transform_name(cdc_ice_transform_kind_t kind);

#endif
