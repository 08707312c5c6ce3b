/*
 * The demo schema (tools/loadgen/schema.sql) embedded in the loadgen binary, so the SQL
 * is written once and shared by the load generator, docker compose's PostgreSQL init
 * script and the chaos suite. The assembler includes the file at build time; make runs
 * the compiler from the repository root, which is what the relative path assumes.
 */
#include "tools/loadgen/loadgen.h"

__asm__(".section .rodata\n"
        ".global cdc_loadgen_schema_sql\n"
        ".type cdc_loadgen_schema_sql, @object\n"
        "cdc_loadgen_schema_sql:\n"
        ".incbin \"tools/loadgen/schema.sql\"\n"
        ".byte 0\n"
        ".previous\n");
