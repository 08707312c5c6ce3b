/*
 * Shared by the fuzz targets (tests/fuzz/<target>.c, docs/development.md, "Fuzzing"): each
 * defines LLVMFuzzerTestOneInput, which libFuzzer calls (`make fuzz`, clang) or
 * tests/fuzz/driver.c calls on the files of its corpus (the gcc replay, `make test`).
 * A target feeds its bytes to the public decode functions of one module, as they come from
 * outside the process, and checks nothing but that they return: a crash, a sanitizer report
 * or a leak is the failure.
 */
#ifndef CDC_TEST_FUZZ_H
#define CDC_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A NUL-terminated copy of data (malloc'd; NULL when out of memory). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s != NULL) {
        if (size > 0)
            memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

/* Splits data at its first byte equal to sep: *a_len bytes at data, the rest at *b
 * (b_len 0 when there is no sep). */
static inline void fuzz_split(const uint8_t *data, size_t size, uint8_t sep, size_t *a_len,
                              const uint8_t **b, size_t *b_len)
{
    const uint8_t *p = size > 0 ? memchr(data, sep, size) : NULL;
    *a_len = p ? (size_t)(p - data) : size;
    *b = p ? p + 1 : data + size;
    *b_len = p ? size - *a_len - 1 : 0;
}

#endif
