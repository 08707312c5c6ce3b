/*
 * Files embedded in a binary at build time: the assembler includes the file's bytes and
 * a terminating NUL as a read-only symbol, so a text the project keeps as a real file (a
 * SQL script, an HTML page) ships inside the program that serves it. make runs the
 * compiler from the repository root, which is what the relative path assumes; the
 * Makefile names the file as a prerequisite of the object (gcc's -MMD cannot see it).
 *
 *     CDC_EMBED_FILE(cdc_loadgen_schema_sql, "tools/loadgen/schema.sql");
 *     extern const char cdc_loadgen_schema_sql[];
 */
#ifndef CDC_COMMON_EMBED_H
#define CDC_COMMON_EMBED_H

#define CDC_EMBED_FILE(symbol, path)                                                               \
    __asm__(".section .rodata\n"                                                                   \
            ".global " #symbol "\n"                                                                \
            ".type " #symbol ", @object\n" #symbol ":\n"                                           \
            ".incbin \"" path "\"\n"                                                               \
            ".byte 0\n"                                                                            \
            ".previous\n")

#endif
