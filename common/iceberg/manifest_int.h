/*
 * Internals shared by the writing (manifest.c) and reading (manifest_read.c) halves
 * of the manifest module (manifest.h). Not for use outside manifest*.c.
 */
#ifndef CDC_ICEBERG_MANIFEST_INT_H
#define CDC_ICEBERG_MANIFEST_INT_H

#include "common/err.h"

/* The column-statistics maps of a data file (manifest fields 108-110, 137, 125, 128). */
typedef enum { MAP_SIZES, MAP_VALUES, MAP_NULLS, MAP_NANS, MAP_LOWER, MAP_UPPER } stat_map_t;

static inline cdc_err_t oom(cdc_error_t *e)
{
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory while encoding manifest");
}

#endif
