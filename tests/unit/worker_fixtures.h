/* Fixture loading shared by the worker's unit tests (files under tests/unit/fixtures/worker). */
#ifndef CDC_TEST_WORKER_FIXTURES_H
#define CDC_TEST_WORKER_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads tests/unit/fixtures/worker/<name> (relative to the repo root, where the test
 * runner starts tests) into a malloc'd NUL-terminated buffer; aborts when missing. */
static inline char *fixture(const char *name, size_t *len)
{
    char path[512];
    const char *root = getenv("CDC_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/tests/unit/fixtures/worker/%s", root ? root : ".", name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "missing fixture %s\n", path);
        abort();
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n)
        abort();
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

#endif
