/*
 * State benchmark (make bench-state): the worker's dedup state at scale. Runs N inserts
 * (default 1,000,000 distinct keys, a typical row: bigint key, two short texts, a
 * decimal) through the real record path minus Kafka (decode -> dedup check -> TOAST
 * image -> dedup record into RocksDB), then measures
 *   - the state size per million keys (live table files + memtables after a flush),
 *   - a full first checkpoint into a local warehouse (bytes uploaded, ms),
 *   - an incremental checkpoint after one more epoch of U updates (default 10,000):
 *     bytes uploaded and ms, which is what every barrier pays.
 * Usage: bench_state [keys] [updates]. Prints BENCH lines (docs/design.md, "Contracts").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/iceberg/storage.h"
#include "common/state.h"
#include "worker/checkpoint.h"
#include "worker/decode.h"
#include "worker/dedup.h"

#include "benchmarks/orders_schema.h"
#include "benchmarks/timing.h"

static const char *TOPIC = "bench.public.orders";
static const char *SCHEMA = BENCH_ORDERS_SCHEMA;

/* CPU time of this process (all threads, incl. RocksDB's), milliseconds. */
static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static void die(const char *what, const cdc_error_t *e)
{
    fprintf(stderr, "bench_state: %s: %s\n", what, e->msg);
    exit(1);
}

static void apply(cdc_catalog_t *cat, cdc_dedup_t *d, char op, long id, uint64_t lsn)
{
    char v[512];
    cdc_change_t c;
    cdc_decode_error_t de;
    cdc_error_t e;
    cdc_dedup_verdict_t verdict;
    uint8_t *img;
    size_t len;
    int n = snprintf(v, sizeof(v),
                     "{\"before\":null,\"after\":{\"id\":%ld,\"customer\":\"customer-%ld\","
                     "\"amount\":\"%ld.%02ld\",\"note\":\"note %c for row %ld\"},"
                     "\"source\":{\"schema\":\"public\",\"table\":\"orders\",\"lsn\":%" PRIu64
                     ",\"txId\":%" PRIu64 ",\"ts_ms\":1709287200000,\"sequence\":\"[\\\"%" PRIu64
                     "\\\",\\\"%" PRIu64 "\\\"]\"},\"op\":\"%c\",\"ts_ms\":1}",
                     id, id % 5000, id % 100000, id % 100, op, id, lsn, lsn / 10, lsn, lsn, op);
    cdc_decode_input_t in = {TOPIC, 0, (int64_t)lsn, NULL, 0, v, (size_t)n, 1};
    if (cdc_decode(cat, NULL, &in, &c, &de) != CDC_OK) {
        fprintf(stderr, "bench_state: decode: %s\n", de.msg);
        exit(1);
    }
    if (cdc_dedup_check(d, &c, &verdict, &img, &len, &e) != CDC_OK)
        die("dedup check", &e);
    if (verdict == CDC_DEDUP_NEW && cdc_dedup_record(d, &c, NULL, 0, NULL, 0, &e) != CDC_OK)
        die("dedup record", &e);
    /* The worker writes the state once per consumed batch (--batch-size 1000). */
    static long applied;
    if (++applied % 1000 == 0 && cdc_dedup_flush(d, &e) != CDC_OK)
        die("dedup flush", &e);
    free(img);
    cdc_change_clear(&c);
}

int main(int argc, char **argv)
{
    long keys = argc > 1 ? atol(argv[1]) : 1000000;
    long updates = argc > 2 ? atol(argv[2]) : 10000;
    char dir[256], db[300], wh[300], local[300], cp[320];
    cdc_error_t e;
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_dedup_t *d;
    cdc_storage_t *storage;
    cdc_ckpt_t ck;
    cdc_ckpt_stats_t s1, s2;
    const char *h;
    uint64_t lsn = 1000;

    snprintf(dir, sizeof(dir), "%s/bench_state.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(db, sizeof(db), "%s/db", dir);
    snprintf(wh, sizeof(wh), "%s/warehouse", dir);
    snprintf(local, sizeof(local), "%s/local", dir);
    if (cdc_catalog_register_json(cat, TOPIC, 1, SCHEMA, strlen(SCHEMA), &e) != CDC_OK)
        die("schema", &e);
    if (cdc_dedup_open(db, 86400, &d, &e) != CDC_OK)
        die("open", &e);
    if (cdc_storage_open(wh, NULL, &storage, &e) != CDC_OK ||
        cdc_ckpt_init(&ck, storage, wh, "bench", 0, local, &e) != CDC_OK)
        die("warehouse", &e);

    double t0 = bench_now_ms(), c0 = cpu_ms();
    for (long id = 1; id <= keys; id++)
        apply(cat, d, 'c', id, lsn += 10);
    double t_load = bench_now_ms() - t0, c_load = cpu_ms() - c0;

    snprintf(cp, sizeof(cp), "%s/ckpt-1", local);
    t0 = bench_now_ms();
    if (cdc_dedup_checkpoint(d, cp, &e) != CDC_OK ||
        cdc_ckpt_upload(&ck, 1, cp, &h, &s1, &e) != CDC_OK)
        die("checkpoint 1", &e);
    double t_full = bench_now_ms() - t0;
    uint64_t size = cdc_state_size(d->st);

    /* One epoch's worth of updates spread over the key space. */
    for (long i = 0; i < updates; i++)
        apply(cat, d, 'u', 1 + (long)(((uint64_t)i * 2654435761u) % (uint64_t)keys), lsn += 10);
    snprintf(cp, sizeof(cp), "%s/ckpt-2", local);
    t0 = bench_now_ms();
    if (cdc_dedup_checkpoint(d, cp, &e) != CDC_OK ||
        cdc_ckpt_upload(&ck, 2, cp, &h, &s2, &e) != CDC_OK)
        die("checkpoint 2", &e);
    double t_incr = bench_now_ms() - t0;

    double per_million = (double)size * 1e6 / (double)keys / (1024.0 * 1024.0);
    printf("BENCH state_dedup_path_rate %.0f records/s\n", (double)keys / (t_load / 1e3));
    printf("BENCH state_dedup_path_cpu_per_record %.1f us\n", c_load * 1e3 / (double)keys);
    printf("BENCH state_size_per_million_keys %.1f MiB\n", per_million);
    printf("BENCH state_checkpoint_full_uploaded %.1f MiB\n",
           (double)s1.bytes_uploaded / 1048576.0);
    printf("BENCH state_checkpoint_full_time %.0f ms\n", t_full);
    printf("BENCH state_checkpoint_incremental_uploaded %.2f MiB\n",
           (double)s2.bytes_uploaded / 1048576.0);
    printf("BENCH state_checkpoint_incremental_time %.0f ms\n", t_incr);
    printf("BENCH state_checkpoint_incremental_share %.2f %%\n",
           100.0 * (double)s2.bytes_uploaded / (double)(s2.bytes_total ? s2.bytes_total : 1));
    fprintf(stderr,
            "bench_state: %ld keys, %ld updates; store %.1f MiB; checkpoint 2 uploads %" PRIu64
            " of %" PRIu64 " files (%" PRIu64 " of %" PRIu64 " bytes)\n",
            keys, updates, (double)size / 1048576.0, s2.files_uploaded, s2.files_total,
            s2.bytes_uploaded, s2.bytes_total);

    cdc_ckpt_free(&ck);
    cdc_storage_close(storage);
    cdc_dedup_close(d);
    cdc_catalog_free(cat);
    cdc_state_destroy(dir, &e);
    return 0;
}
