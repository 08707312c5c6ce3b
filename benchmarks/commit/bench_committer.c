/*
 * The coordinator's per-table commit cost (make bench-commit; issue 35): TABLES tables
 * x EPOCHS epochs, each epoch one checkpoint record holding for every table one small
 * data file and one equality-delete file, committed through the committer
 * (coordinator/commit.c) as the leader commits a recorded epoch. The tables keep their
 * snapshot history (no expiry within the run: --snapshot-retention is 30 minutes, far
 * longer than the run) and their metadata versions capped at 100 as the maintenance
 * thread caps them (--metadata-versions-max). The baseline, measured in the same run and
 * directory right after every epoch (the machine's disk is shared, so both see the same
 * load): writing the same bytes a commit writes (its metadata JSON, manifest list and
 * manifests, one file each) with plain write+fsync and one directory fsync, one table
 * after the other.
 * Usage: bench_committer [tables] [epochs] [dir]. Prints BENCH lines (docs/design.md,
 * "Contracts") and the ms per commit of the first and the last tenth of the epochs, so
 * that a cost growing with the snapshot history shows.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/iceberg/manifest.h"
#include "common/iceberg/metadata.h"
#include "common/iceberg/storage.h"
#include "common/iceberg/table.h"
#include "coordinator/commit.h"

#include "benchmarks/timing.h"

#define SCHEMA_JSON                                                                                \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\",\"required\":"     \
    "true,\"type\":\"long\"},{\"id\":2,\"name\":\"note\",\"required\":false,\"type\":"             \
    "\"string\"}],\"identifier-field-ids\":[1]}"

static void fail(const char *what, const cdc_error_t *e)
{
    fprintf(stderr, "bench_committer: %s: %s\n", what, e->msg);
    exit(1);
}

/* Epoch's record: every table's topic offsets, one data and one equality-delete file each
 * (and every table's schema in the first epoch, which creates the tables). */
static cdc_checkpoint_t *record(const char *wh, int ntables, uint64_t epoch)
{
    static int32_t eq[] = {1};
    cdc_checkpoint_t *c = cdc_checkpoint_new("bench", epoch, 1, 1);
    if (c == NULL)
        exit(1);
    for (int i = 0; i < ntables; i++) {
        char table[32], topic[48], path[600];
        snprintf(table, sizeof(table), "ns.t%05d", i);
        snprintf(topic, sizeof(topic), "cdc.ns.t%05d", i);
        for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
            if (cdc_checkpoint_set_offset(c, p, topic, (int64_t)(epoch * 10 + p)) != CDC_OK)
                exit(1);
        if (epoch == 1 && cdc_checkpoint_add_schema(c, table, SCHEMA_JSON, 1) != CDC_OK)
            exit(1);
        for (int kind = 0; kind < 2; kind++) {
            cdc_staged_file_t f;
            memset(&f, 0, sizeof(f));
            snprintf(path, sizeof(path), "%s/ns/t%05d/data/bench-e%" PRIu64 "-p%d-%s-%d.parquet",
                     wh, i, epoch, i % CDC_PARTITIONS, kind ? "eq" : "data", i);
            f.table = table;
            f.partition = (uint32_t)(i % CDC_PARTITIONS);
            f.file.path = path;
            f.file.content = kind ? CDC_ICE_CONTENT_EQUALITY_DELETES : CDC_ICE_CONTENT_DATA;
            f.file.record_count = kind ? 1 : 3;
            f.file.file_size_in_bytes = kind ? 600 : 1500;
            if (kind) {
                f.file.equality_ids = eq;
                f.file.nequality_ids = 1;
            }
            if (cdc_checkpoint_add_file(c, &f) != CDC_OK)
                exit(1);
        }
    }
    return c;
}

/* Bytes of a local file, 0 when it cannot be read. */
static int64_t file_size(cdc_storage_t *st, const char *loc)
{
    int64_t n = 0;
    cdc_error_t e;
    if (cdc_storage_size(st, loc, &n, &e) != CDC_OK)
        return 0;
    return n;
}

/* The sizes of the files the last commit to the table at loc wrote: its metadata JSON,
 * its manifest list, and its manifests added by that snapshot. Returns how many. */
static size_t commit_sizes(cdc_storage_t *st, const char *loc, int64_t *sizes, size_t max)
{
    cdc_error_t e;
    cdc_ice_table_t *t;
    size_t n = 0;
    if (cdc_ice_table_load(st, loc, &t, &e) != CDC_OK)
        fail("load table", &e);
    char mpath[700];
    snprintf(mpath, sizeof(mpath), "%s/metadata/v%" PRId64 ".metadata.json", loc,
             cdc_ice_table_version(t));
    sizes[n++] = file_size(st, mpath);
    const cdc_ice_snapshot_t *sn = cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(t));
    uint8_t *buf;
    size_t len;
    cdc_ice_manifest_file_t *mfs;
    size_t nmf;
    if (cdc_storage_get(st, sn->manifest_list, &buf, &len, &e) != CDC_OK ||
        cdc_ice_manifest_list_read(buf, len, &mfs, &nmf, &e) != CDC_OK)
        fail("read manifest list", &e);
    sizes[n++] = (int64_t)len;
    for (size_t i = 0; i < nmf && n < max; i++)
        if (mfs[i].added_snapshot_id == sn->snapshot_id)
            sizes[n++] = mfs[i].length;
    cdc_ice_manifest_files_free(mfs, nmf);
    free(buf);
    cdc_ice_table_close(t);
    return n;
}

/* The baseline: count "commits" of the given file sizes, each file written with
 * write+fsync, then one fsync of the directory. Returns ms per commit. */
static double baseline(const char *dir, const int64_t *sizes, size_t nsizes, int count)
{
    static long seq; /* new files every time, as a commit's */
    char d[600], p[700];
    snprintf(d, sizeof(d), "%s/baseline", dir);
    mkdir(d, 0755);
    int64_t most = 0;
    for (size_t i = 0; i < nsizes; i++)
        if (sizes[i] > most)
            most = sizes[i];
    char *buf = malloc((size_t)most + 1);
    memset(buf, 'x', (size_t)most + 1);
    double t0 = bench_now_ms();
    for (int k = 0; k < count; k++) {
        for (size_t i = 0; i < nsizes; i++) {
            snprintf(p, sizeof(p), "%s/f%ld-%zu", d, seq++, i);
            int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || write(fd, buf, (size_t)sizes[i]) != (ssize_t)sizes[i] || fsync(fd) != 0) {
                perror("baseline write");
                exit(1);
            }
            close(fd);
        }
        int dfd = open(d, O_RDONLY | O_DIRECTORY);
        if (dfd < 0 || fsync(dfd) != 0) {
            perror("baseline directory fsync");
            exit(1);
        }
        close(dfd);
    }
    double ms = (bench_now_ms() - t0) / count;
    free(buf);
    return ms;
}

int main(int argc, char **argv)
{
    int ntables = argc > 1 ? atoi(argv[1]) : 200;
    int epochs = argc > 2 ? atoi(argv[2]) : 30;
    char dir[512], wh[600];
    if (ntables < 1 || epochs < 2) {
        fprintf(stderr, "usage: bench_committer [tables >= 1] [epochs >= 2] [dir]\n");
        return 2;
    }
    snprintf(dir, sizeof(dir), "%s/cdc-bench-commit-XXXXXX",
             argc > 3 ? argv[3] : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp"));
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(wh, sizeof(wh), "file://%s", dir);
    cdc_log_set_level(CDC_LOG_WARN); /* not a line per table created */
    cdc_error_t e;
    cdc_committer_t *cm;
    cdc_commit_result_t res;
    cdc_committer_options_t o = {.warehouse = wh, .job = "bench"};
    if (cdc_committer_open(&cm, &o, &e) != CDC_OK)
        fail("open committer", &e);
    cdc_committer_set_term(cm, 1);
    cdc_storage_t *st = cdc_committer_storage(cm);

    /* epoch 1 creates the tables; then the metadata cap the maintenance thread sets */
    cdc_checkpoint_t *rec = record(wh, ntables, 1);
    if (cdc_committer_commit(cm, rec, &res, &e) != CDC_OK)
        fail("commit epoch 1", &e);
    cdc_checkpoint_free(rec);
    char **names, **locs;
    size_t n = cdc_committer_tables(cm, &names, &locs);
    cdc_ice_props_t cap = {0};
    cdc_ice_props_set(&cap, "write.metadata.previous-versions-max", "100");
    cdc_ice_props_set(&cap, "write.metadata.delete-after-commit.enabled", "true");
    for (size_t i = 0; i < n; i++) {
        cdc_ice_table_t *t;
        cdc_committer_table_lock(cm, locs[i]);
        if (cdc_ice_table_load(st, locs[i], &t, &e) != CDC_OK ||
            cdc_ice_table_set_properties(t, &cap, &e) != CDC_OK)
            fail("set the metadata cap", &e);
        cdc_ice_table_close(t);
        cdc_committer_table_unlock(cm, locs[i]);
    }
    cdc_ice_props_free(&cap);

    double *per = calloc((size_t)epochs, sizeof(double)); /* ms per commit, by epoch */
    double total = 0, base_total = 0;
    long commits = 0, base_count = 0;
    int64_t sizes[8] = {0};
    size_t nsizes = 0;
    int per_epoch = ntables < 20 ? ntables : 20; /* baseline commits after each epoch */
    for (int ep = 2; ep <= epochs; ep++) {
        rec = record(wh, ntables, (uint64_t)ep);
        double s = bench_now_ms();
        if (cdc_committer_commit(cm, rec, &res, &e) != CDC_OK)
            fail("commit", &e);
        double ms = bench_now_ms() - s;
        cdc_checkpoint_free(rec);
        if (res.tables_committed != ntables) {
            fprintf(stderr, "bench_committer: epoch %d committed %d of %d tables\n", ep,
                    res.tables_committed, ntables);
            return 1;
        }
        per[ep - 2] = ms / ntables;
        total += ms;
        commits += res.tables_committed;
        nsizes = commit_sizes(st, locs[0], sizes, 8);
        base_total += baseline(dir, sizes, nsizes, per_epoch) * per_epoch;
        base_count += per_epoch;
    }
    int m = epochs - 1, tenth = m / 10 > 0 ? m / 10 : 1;
    double first = 0, last = 0;
    for (int i = 0; i < tenth; i++) {
        first += per[i];
        last += per[m - 1 - i];
    }
    first /= tenth;
    last /= tenth;

    int64_t bytes = 0;
    for (size_t i = 0; i < nsizes; i++)
        bytes += sizes[i];
    double base = base_total / (double)base_count;
    double avg = total / (double)commits;

    printf("bench_committer: %d tables x %d epochs, %ld commits in %.1f s; a commit writes %zu "
           "files, %" PRId64 " bytes (metadata JSON %" PRId64 ")\n",
           ntables, epochs - 1, commits, total / 1e3, nsizes, bytes, sizes[0]);
    printf("BENCH commit_ms_per_table %.3f ms baseline=%.3f ratio=%.2f\n", avg, base, avg / base);
    printf("BENCH commit_rate %.1f commits/s baseline=%.1f ratio=%.2f\n", 1e3 / avg, 1e3 / base,
           base / avg);
    printf("BENCH commit_ms_first_tenth %.3f ms\n", first);
    printf("BENCH commit_ms_last_tenth %.3f ms\n", last);
    printf("BENCH commit_epoch_ms %.1f ms\n", total / (epochs - 1));
    printf("BENCH commit_bytes_per_commit %" PRId64 " bytes\n", bytes);
    cdc_storage_list_free(names, n);
    cdc_storage_list_free(locs, n);
    cdc_committer_close(cm);
    free(per);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_committer: could not remove %s\n", dir);
    return 0;
}
