/*
 * Stage benchmark: the barrier cost of one partition's epoch in the drain benchmark's
 * shape (inserts of new ids into public.items (id long, v string)).
 *   bench_stage <rows> <dir> [epochs] [rows per row group encoded ahead, 0 = off] [buckets]
 * With buckets > 0 the mirror is partitioned by bucket[buckets](id) and the changelog by
 * the same spec, each row's key computed as the worker does (timed with "add").
 * Stages `rows` decoded changes per epoch (timed: "add", which includes the row groups
 * encoded ahead while the epoch runs) and then writes the epoch's files into a local
 * warehouse under dir (timed: "write", the barrier's files phase). Prints one line per
 * epoch and the medians: "rows=<n> add_ms=<median> write_ms=<median> bytes=<files>".
 * benchmarks/stage/run.sh (make bench-stage) compares encoding ahead with none.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmarks/timing.h"
#include "tests/harness/items_schema.h"
#include "worker/stage.h"

int main(int argc, char **argv)
{
    static const char *const topic = "bench.public.items";
    char doc[2048], value[512];
    cdc_error_t e;
    if (argc < 3) {
        fprintf(stderr, "usage: bench_stage <rows> <dir> [epochs] [encode-ahead rows]\n");
        return 2;
    }
    long rows = atol(argv[1]);
    int epochs = argc > 3 ? atoi(argv[3]) : 5;
    if (epochs < 1 || epochs > 100)
        epochs = 5;
    snprintf(doc, sizeof(doc), CDC_TEST_ITEMS_SCHEMA_FMT, topic);
    cdc_catalog_t *cat = cdc_catalog_new();
    if (cat == NULL || cdc_catalog_register_json(cat, topic, 1, doc, strlen(doc), &e) != CDC_OK) {
        fprintf(stderr, "bench_stage: schema: %s\n", e.msg);
        return 1;
    }
    cdc_storage_t *storage;
    if (cdc_storage_open(argv[2], NULL, &storage, &e) != CDC_OK) {
        fprintf(stderr, "bench_stage: %s\n", e.msg);
        return 1;
    }
    double *add = calloc((size_t)epochs, sizeof(double));
    double *wr = calloc((size_t)epochs, sizeof(double));
    int64_t bytes = 0;
    long id = 1;
    cdc_stage_t s;
    cdc_stage_init(&s, 3, 1);
    cdc_stage_set_encoding(&s, 2 /* zstd */,
                           argc > 4 ? (size_t)atol(argv[4]) : CDC_STAGE_ENCODE_ROWS);
    int buckets = argc > 5 ? atoi(argv[5]) : 0;
    cdc_ice_partition_field_t pf = {1, 1000, "id_bucket", {CDC_ICE_TRANSFORM_BUCKET, buckets}};
    cdc_ice_partition_spec_t spec = {1, &pf, 1};
    for (int ep = 0; ep < epochs; ep++) {
        cdc_stage_reset(&s, (uint64_t)ep + 1);
        double t0 = bench_now_ms();
        for (long i = 0; i < rows; i++, id++) {
            uint64_t lsn = (uint64_t)id * 16;
            int vlen = snprintf(value, sizeof(value),
                                "{\"before\":null,\"after\":{\"id\":%ld,\"v\":\"value-%ld\"},"
                                "\"source\":{\"schema\":\"public\",\"table\":\"items\","
                                "\"schema_version\":1,\"lsn\":%" PRIu64 ",\"txId\":%" PRIu64
                                ",\"ts_ms\":1709287200000},\"op\":\"c\",\"ts_ms\":1709287200001}",
                                id, id, lsn, lsn);
            cdc_decode_input_t in = {topic, 3, id, NULL, 0, value, (size_t)vlen, 1, NULL, NULL};
            cdc_decode_error_t de;
            cdc_change_t c;
            if (cdc_decode(cat, NULL, &in, &c, &de) != CDC_OK) {
                fprintf(stderr, "bench_stage: decode: %s\n", de.msg);
                return 1;
            }
            uint8_t *key = NULL;
            size_t klen = 0;
            cdc_stage_parts_t parts = {NULL, 0, NULL, 0, &spec, NULL, NULL};
            if (buckets > 0 &&
                cdc_stage_part_key(&spec, &c.after, NULL, &key, &klen, &e) != CDC_OK) {
                fprintf(stderr, "bench_stage: %s\n", e.msg);
                return 1;
            }
            parts.mirror = key;
            parts.mirror_len = klen;
            if (cdc_stage_add(&s, &c, false, buckets > 0 ? &parts : NULL, &e) != CDC_OK) {
                fprintf(stderr, "bench_stage: %s\n", e.msg);
                return 1;
            }
            free(key);
            cdc_change_clear(&c);
        }
        double t1 = bench_now_ms();
        cdc_stage_write_options_t wo = {argv[2], "bench", 2 /* zstd */};
        cdc_stage_file_t *files;
        size_t nfiles;
        if (cdc_stage_write(&s, storage, &wo, &files, &nfiles, &e) != CDC_OK) {
            fprintf(stderr, "bench_stage: %s\n", e.msg);
            return 1;
        }
        double t2 = bench_now_ms();
        bytes = 0;
        size_t groups = 0;
        for (size_t f = 0; f < nfiles; f++) {
            bytes += files[f].df.file_size_in_bytes;
            groups += files[f].df.nsplit_offsets;
        }
        cdc_stage_files_free(files, nfiles);
        add[ep] = t1 - t0;
        wr[ep] = t2 - t1;
        printf("epoch %d: add %.1f ms, write %.1f ms, %zu files, %zu row groups, %" PRId64
               " bytes\n",
               ep + 1, add[ep], wr[ep], nfiles, groups, bytes);
    }
    cdc_stage_free(&s);
    qsort(add, (size_t)epochs, sizeof(double), bench_cmp_double);
    qsort(wr, (size_t)epochs, sizeof(double), bench_cmp_double);
    printf("rows=%ld add_ms=%.1f write_ms=%.1f bytes=%" PRId64 "\n", rows, add[epochs / 2],
           wr[epochs / 2], bytes);
    free(add);
    free(wr);
    cdc_storage_close(storage);
    cdc_catalog_free(cat);
    return 0;
}
