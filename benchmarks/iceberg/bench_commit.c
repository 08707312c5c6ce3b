/*
 * Iceberg commit benchmark (make bench-iceberg): the coordinator's steady state,
 * one row-delta snapshot (a data file and an equality-delete file) per commit on a
 * local warehouse, with snapshot expiry every 100 commits keeping the newest 300.
 * Measures commit latency (p50/p99), commit rate, the largest number of manifests
 * in a snapshot (bounded by merging) and the final metadata file size.
 * Usage: bench_commit [commits] [dir]. Prints BENCH lines (docs/design.md, "Contracts").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/iceberg/manifest.h"
#include "common/iceberg/storage.h"
#include "common/iceberg/table.h"

#include "benchmarks/timing.h"

static void fail(const char *what, const cdc_error_t *e)
{
    fprintf(stderr, "bench_commit: %s: %s\n", what, e->msg);
    exit(1);
}

int main(int argc, char **argv)
{
    int commits = argc > 1 ? atoi(argv[1]) : 1000;
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/cdc-bench-iceberg-XXXXXX",
             argc > 2 ? argv[2] : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp"));
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    cdc_error_t e;
    cdc_storage_t *st;
    if (cdc_storage_open(dir, NULL, &st, &e) != CDC_OK)
        fail("open storage", &e);
    cdc_ice_field_t fields[] = {
        {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
        {.id = 2, .name = "payload", .type = CDC_ICE_STRING},
    };
    int32_t ids[] = {1};
    cdc_ice_schema_t schema = {
        .schema_id = 0, .fields = fields, .nfields = 2, .identifier_ids = ids, .nidentifier = 1};
    char *loc = cdc_ice_table_location(dir, "db", "bench");
    cdc_ice_table_t *t;
    if (cdc_ice_table_create(st, loc, &schema, NULL, &t, &e) != CDC_OK)
        fail("create table", &e);
    double *lat = calloc((size_t)commits, sizeof(double));
    size_t max_manifests = 0;
    int32_t eq[] = {1};
    cdc_ice_col_stats_t stats[2] = {
        {.field_id = 1,
         .column_size = 800,
         .value_count = 100,
         .null_count = 0,
         .nan_count = -1,
         .has_bounds = true,
         .lower_len = 8,
         .upper_len = 8},
        {.field_id = 2, .column_size = 4000, .value_count = 100, .null_count = 3, .nan_count = -1},
    };
    double t0 = bench_now_ms();
    for (int i = 0; i < commits; i++) {
        cdc_ice_data_file_t d = {.content = CDC_ICE_CONTENT_DATA,
                                 .record_count = 100,
                                 .file_size_in_bytes = 5000,
                                 .stats = stats,
                                 .nstats = 2};
        cdc_ice_data_file_t del = {.content = CDC_ICE_CONTENT_EQUALITY_DELETES,
                                   .record_count = 10,
                                   .file_size_in_bytes = 900,
                                   .equality_ids = eq,
                                   .nequality_ids = 1,
                                   .stats = stats,
                                   .nstats = 1};
        d.path = cdc_ice_data_file_location(loc, "d");
        del.path = cdc_ice_data_file_location(loc, "eq");
        cdc_ice_props_t sum = {0};
        char cp[24];
        snprintf(cp, sizeof(cp), "%d", i);
        cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_JOB, "bench");
        cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_CHECKPOINT, cp);
        cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_OFFSETS,
                          "{\"orders\":[1,2,3,4,5,6,7,8,9,10,11,12]}");
        double s = bench_now_ms();
        if (cdc_ice_table_row_delta(t, &d, 1, &del, 1, &sum, NULL, &e) != CDC_OK)
            fail("commit", &e);
        lat[i] = bench_now_ms() - s;
        cdc_ice_props_free(&sum);
        free(d.path);
        free(del.path);
        if ((i + 1) % 100 == 0 &&
            cdc_ice_table_expire_snapshots(t, INT64_MAX, 300, NULL, &e) != CDC_OK)
            fail("expire snapshots", &e);
        if ((i + 1) % 50 == 0) {
            const cdc_ice_snapshot_t *sn =
                cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t));
            uint8_t *buf;
            size_t len;
            cdc_ice_manifest_file_t *mfs;
            size_t nmf;
            if (cdc_storage_get(st, sn->manifest_list, &buf, &len, &e) != CDC_OK ||
                cdc_ice_manifest_list_read(buf, len, &mfs, &nmf, &e) != CDC_OK)
                fail("read manifest list", &e);
            if (nmf > max_manifests)
                max_manifests = nmf;
            cdc_ice_manifest_files_free(mfs, nmf);
            free(buf);
        }
    }
    double total = bench_now_ms() - t0;
    qsort(lat, (size_t)commits, sizeof(double), bench_cmp_double);
    char mpath[600];
    snprintf(mpath, sizeof(mpath), "%s/metadata/v%" PRId64 ".metadata.json", loc,
             cdc_ice_table_version(t));
    int64_t msize = 0;
    cdc_storage_size(st, mpath, &msize, &e);
    printf("BENCH iceberg_commit_latency_p50 %.1f ms\n", lat[commits / 2]);
    printf("BENCH iceberg_commit_latency_p99 %.1f ms\n", lat[(commits * 99) / 100]);
    printf("BENCH iceberg_commit_rate %.1f commits/s\n", commits / (total / 1e3));
    printf("BENCH iceberg_manifests_per_snapshot_max %zu manifests\n", max_manifests);
    printf("BENCH iceberg_metadata_json_size %.1f KiB\n", (double)msize / 1024.0);
    cdc_ice_table_close(t);
    cdc_storage_close(st);
    free(loc);
    free(lat);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_commit: could not remove %s\n", dir);
    return 0;
}
