/* Fixture loading shared by the worker's unit tests (files under tests/unit/fixtures/worker):
 * a file's bytes, and a catalog with the capture's schema versions registered. */
#ifndef CDC_TEST_WORKER_FIXTURES_H
#define CDC_TEST_WORKER_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker/decode.h"

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

/* A new catalog with capture_schema_v1.json .. capture_schema_v<versions>.json registered
 * for topic (as registry versions 1..versions); the caller frees it. */
static inline cdc_catalog_t *fixture_catalog(const char *topic, int versions)
{
    cdc_catalog_t *cat = cdc_catalog_new();
    for (int v = 1; v <= versions; v++) {
        char name[64];
        size_t n;
        cdc_error_t e;
        snprintf(name, sizeof(name), "capture_schema_v%d.json", v);
        char *json = fixture(name, &n);
        assert_int_equal(cdc_catalog_register_json(cat, topic, v, json, n, &e), CDC_OK);
        free(json);
    }
    return cat;
}

#endif
