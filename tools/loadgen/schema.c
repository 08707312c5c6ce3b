/*
 * The demo schema (tools/loadgen/schema.sql) embedded in the loadgen binary, so the SQL
 * is written once and shared by the load generator, docker compose's PostgreSQL init
 * script and the chaos suite. The assembler includes the file at build time
 * (common/embed.h).
 */
#include "common/embed.h"
#include "tools/loadgen/loadgen.h"

CDC_EMBED_FILE(cdc_loadgen_schema_sql, "tools/loadgen/schema.sql");
