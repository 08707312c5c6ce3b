/*
 * Load generator for the demo schema: shared declarations between its option handling
 * (main.c), the workload (workload.c) and the embedded schema (schema.c).
 */
#ifndef CDC_LOADGEN_H
#define CDC_LOADGEN_H

#include <stdbool.h>
#include <stdint.h>

/* NUL-terminated contents of tools/loadgen/schema.sql, embedded at build time. */
extern const char cdc_loadgen_schema_sql[];

#endif
