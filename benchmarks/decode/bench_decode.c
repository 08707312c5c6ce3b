/*
 * Decode benchmark: CPU per capture-format change event of the worker's decode step
 * (cdc_decode -> cdc_change_clear), through the direct decoder (worker/decode_fast.c,
 * what the worker runs) and through the general jansson-tree decoder alone
 * (cdc_decode_tree, the path before it), measured in the same run on the same events.
 * Three row shapes: the drain benchmark's (bigint + text), the state benchmark's (bigint,
 * two texts, a decimal) and a wide row of most column types. No servers needed.
 * Usage: bench_decode [events per shape, default 200000] [tree|direct|both] [shape 0-2]
 * (one path and one shape are for instruction counts:
 *  valgrind --tool=callgrind --toggle-collect=run bench_decode 20000 direct 0).
 * Prints BENCH lines (docs/design.md, "Contracts"): ns of thread CPU per event (direct, with the
 * tree path as baseline: ratio = direct / tree, lower is better) and the speedup.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/decode.h"
#include "worker/decode_int.h"

#include "benchmarks/orders_schema.h"

enum { RING = 1024 };

static const char *const TOPICS[] = {"bench.public.items", "bench.public.orders",
                                     "bench.public.wide"};

static const char *const SCHEMAS[] = {
    "{\"format\":1,\"topic\":\"bench.public.items\",\"schema\":\"public\",\"table\":\"items\","
    "\"version\":1,\"relid\":1,\"replica_identity\":\"default\",\"key\":[\"id\"],\"columns\":["
    "{\"name\":\"id\",\"pg_oid\":20,\"pg_type\":\"int8\",\"typmod\":-1,\"nullable\":false,"
    "\"key\":1,\"iceberg\":\"long\",\"encoding\":\"int\"},"
    "{\"name\":\"v\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"}]}",
    BENCH_ORDERS_SCHEMA,
    "{\"format\":1,\"topic\":\"bench.public.wide\",\"schema\":\"public\",\"table\":\"wide\","
    "\"version\":1,\"relid\":3,\"replica_identity\":\"default\",\"key\":[\"id\"],\"columns\":["
    "{\"name\":\"id\",\"pg_oid\":20,\"pg_type\":\"int8\",\"typmod\":-1,\"nullable\":false,"
    "\"key\":1,\"iceberg\":\"long\",\"encoding\":\"int\"},"
    "{\"name\":\"qty\",\"pg_oid\":23,\"pg_type\":\"int4\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"int\",\"encoding\":\"int\"},"
    "{\"name\":\"price\",\"pg_oid\":701,\"pg_type\":\"float8\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"double\",\"encoding\":\"float\"},"
    "{\"name\":\"total\",\"pg_oid\":1700,\"pg_type\":\"numeric\",\"typmod\":786438,"
    "\"nullable\":true,\"key\":0,\"iceberg\":\"decimal(12,2)\",\"encoding\":\"decimal\"},"
    "{\"name\":\"active\",\"pg_oid\":16,\"pg_type\":\"bool\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"boolean\",\"encoding\":\"bool\"},"
    "{\"name\":\"name\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"},"
    "{\"name\":\"created\",\"pg_oid\":1184,\"pg_type\":\"timestamptz\",\"typmod\":-1,"
    "\"nullable\":true,\"key\":0,\"iceberg\":\"timestamptz\",\"encoding\":\"epoch_micros\"},"
    "{\"name\":\"day\",\"pg_oid\":1082,\"pg_type\":\"date\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"date\",\"encoding\":\"epoch_days\"},"
    "{\"name\":\"ref\",\"pg_oid\":2950,\"pg_type\":\"uuid\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"uuid\",\"encoding\":\"uuid\"},"
    "{\"name\":\"blob\",\"pg_oid\":17,\"pg_type\":\"bytea\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"binary\",\"encoding\":\"base64\"},"
    "{\"name\":\"attrs\",\"pg_oid\":3802,\"pg_type\":\"jsonb\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"},"
    "{\"name\":\"comment\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,\"nullable\":true,"
    "\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"}]}",
};

#define SOURCE(table)                                                                              \
    "\"source\":{\"version\":\"dev\",\"connector\":\"cdc-capture\",\"name\":\"bench\",\"db\":"     \
    "\"app\",\"schema\":\"public\",\"table\":\"" table "\",\"schema_version\":1,\"lsn\":%" PRIu64  \
    ",\"txId\":%" PRIu64 ",\"ts_ms\":1709287200000,\"sequence\":\"[\\\"%" PRIu64                   \
    "\\\",\\\"%" PRIu64 "\\\"]\",\"snapshot\":\"false\"}"

static int make_event(int shape, long id, char *v, size_t size)
{
    uint64_t lsn = (uint64_t)id * 16 + 1000;
    switch (shape) {
    case 0:
        return snprintf(v, size,
                        "{\"before\":null,\"after\":{\"id\":%ld,\"v\":\"value-%ld\"}," SOURCE(
                            "items") ",\"op\":\"c\",\"ts_ms\":1709287200001}",
                        id, id, lsn, lsn, lsn + 8, lsn);
    case 1:
        return snprintf(v, size,
                        "{\"before\":null,\"after\":{\"id\":%ld,\"customer\":\"customer-%ld\","
                        "\"amount\":\"%ld.%02ld\",\"note\":\"note c for row %ld\"}," SOURCE(
                            "orders") ",\"op\":\"c\",\"ts_ms\":1}",
                        id, id % 5000, id % 100000, id % 100, id, lsn, lsn / 10, lsn, lsn);
    default:
        return snprintf(
            v, size,
            "{\"before\":null,\"after\":{\"id\":%ld,\"qty\":%ld,\"price\":%ld.25,\"total\":"
            "\"%ld.50\",\"active\":%s,\"name\":\"Widget \\\"%ld\\\" caf\xc3\xa9\",\"created\":"
            "%" PRId64 ",\"day\":%ld,\"ref\":\"a0eebc99-9c0b-4ef8-bb6d-%012ld\",\"blob\":"
            "\"3q2+7w==\",\"attrs\":\"{\\\"color\\\": \\\"red\\\", \\\"size\\\": %ld}\","
            "\"comment\":null}," SOURCE("wide") ",\"op\":\"u\",\"ts_ms\":1709287200002}",
            id, id % 100, id % 1000, id * 3, id % 2 ? "true" : "false", id,
            (int64_t)1709287200000000 + id, 19000 + id % 365, id, id % 7, lsn, lsn, lsn + 8, lsn);
    }
}

static double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Decodes n events of shape through one path; returns thread CPU ns per event. */
__attribute__((noinline)) static double run(cdc_catalog_t *cat, int shape, char **ring,
                                            const size_t *lens, long n, bool tree)
{
    double t0 = thread_cpu_ns();
    for (long i = 0; i < n; i++) {
        cdc_decode_input_t in = {TOPICS[shape],  0,  i,    NULL, 0, ring[i % RING],
                                 lens[i % RING], -1, NULL, NULL};
        cdc_change_t c;
        cdc_decode_error_t de;
        cdc_err_t rc =
            tree ? cdc_decode_tree(cat, NULL, &in, &c, &de) : cdc_decode(cat, NULL, &in, &c, &de);
        if (rc != CDC_OK) {
            fprintf(stderr, "bench_decode: decode failed: %s\n", de.msg);
            exit(1);
        }
        cdc_change_clear(&c);
    }
    return (thread_cpu_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"items", "orders", "wide"};
    long n = argc > 1 ? atol(argv[1]) : 200000;
    const char *mode = argc > 2 ? argv[2] : "both";
    int only = argc > 3 ? atoi(argv[3]) : -1;
    bool do_tree = strcmp(mode, "direct") != 0, do_direct = strcmp(mode, "tree") != 0;
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    double sum_tree = 0, sum_direct = 0;

    for (int s = 0; s < 3; s++)
        if (cdc_catalog_register_json(cat, TOPICS[s], 1, SCHEMAS[s], strlen(SCHEMAS[s]), &e) !=
            CDC_OK) {
            fprintf(stderr, "bench_decode: schema: %s\n", e.msg);
            return 1;
        }
    for (int s = 0; s < 3; s++) {
        if (only >= 0 && s != only)
            continue;
        char **ring = malloc(RING * sizeof(*ring));
        size_t *lens = malloc(RING * sizeof(*lens));
        double tree = 0, direct = 0;
        for (long i = 0; i < RING; i++) {
            char buf[2048];
            int len = make_event(s, i + 1, buf, sizeof(buf));
            ring[i] = strdup(buf);
            lens[i] = (size_t)len;
        }
        /* the direct path must really take these events */
        for (long i = 0; i < RING; i++) {
            cdc_decode_input_t in = {TOPICS[s], 0, i, NULL, 0, ring[i], lens[i], -1, NULL, NULL};
            cdc_change_t c;
            cdc_decode_error_t de;
            if (!cdc_decode_fast(cat, NULL, &in, &c, &de)) {
                fprintf(stderr, "bench_decode: the direct decoder refused: %s\n", ring[i]);
                return 1;
            }
            cdc_change_clear(&c);
        }
        if (do_tree)
            tree = run(cat, s, ring, lens, n, true);
        if (do_direct)
            direct = run(cat, s, ring, lens, n, false);
        /* times: lower is better, the name says what the baseline is */
        if (do_direct && do_tree)
            printf("BENCH decode_%s_cpu_ns_per_event_vs_tree %.0f ns baseline=%.0f ratio=%.3f\n",
                   names[s], direct, tree, direct / tree);
        else if (do_tree)
            printf("BENCH decode_%s_tree_cpu_ns_per_event %.0f ns\n", names[s], tree);
        else
            printf("BENCH decode_%s_cpu_ns_per_event %.0f ns\n", names[s], direct);
        sum_tree += tree;
        sum_direct += direct;
        for (long i = 0; i < RING; i++)
            free(ring[i]);
        free(ring);
        free(lens);
    }
    if (do_tree && do_direct)
        printf("BENCH decode_speedup_vs_tree %.2f x\n", sum_tree / sum_direct);
    cdc_catalog_free(cat);
    return 0;
}
