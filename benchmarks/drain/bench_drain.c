/*
 * Helper of the drain and recovery benchmarks (benchmarks/drain/run.sh,
 * benchmarks/recovery/run.sh): produces capture-format change events into the
 * development broker and watches an Iceberg table's committed offsets.
 *   bench_drain produce <bootstrap> <prefix> <events> [rate/s, 0 = as fast as possible]
 *       schema document + inserts of ids 1..events into <prefix>.public.items
 *   bench_drain wait-offsets <warehouse> <topic> <events> <timeout ms>
 *       waits until the changelog's committed offsets of topic sum to events;
 *       prints "elapsed_ms=<n> snapshots=<n>"
 *   bench_drain wait-snapshots <warehouse> <more> <timeout ms>
 *       waits until the changelog has <more> further snapshots; prints "elapsed_ms=<n>"
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/iceberg/table.h"
#include "common/kafka.h"
#include "tests/harness/items_schema.h"

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int produce(const char *bootstrap, const char *prefix, long events, long rate)
{
    cdc_kafka_producer_config_t pc;
    cdc_kafka_producer_t *p = NULL;
    cdc_error_t e;
    char topic[256], stopic[256], key[320], doc[2048], value[512];
    long long t0;

    memset(&pc, 0, sizeof(pc));
    pc.bootstrap = bootstrap;
    pc.linger_ms = 20;
    pc.queue_max_messages = 500000;
    if (cdc_kafka_producer_new(&pc, &p, &e) != CDC_OK) {
        fprintf(stderr, "bench_drain: %s\n", e.msg);
        return 1;
    }
    snprintf(topic, sizeof(topic), "%s.public.items", prefix);
    snprintf(stopic, sizeof(stopic), "%s._schemas", prefix);
    snprintf(key, sizeof(key), "%s/1", topic);
    snprintf(doc, sizeof(doc), CDC_TEST_ITEMS_SCHEMA_FMT, topic);
    cdc_kafka_record_t sr = {stopic, 0, key, strlen(key), doc, strlen(doc), NULL, 0, 0, NULL};
    if (cdc_kafka_produce(p, &sr, &e) != CDC_OK ||
        cdc_kafka_producer_flush(p, 30000, &e) != CDC_OK) {
        fprintf(stderr, "bench_drain: could not produce the schema: %s\n", e.msg);
        return 1;
    }
    t0 = now_ms();
    for (long id = 1; id <= events; id++) {
        uint64_t lsn = (uint64_t)id * 16;
        int klen = snprintf(key, sizeof(key), "{\"id\":%ld}", id);
        int vlen = snprintf(value, sizeof(value),
                            "{\"before\":null,\"after\":{\"id\":%ld,\"v\":\"value-%ld\"},"
                            "\"source\":{\"version\":\"" CDC_VERSION "\",\"connector\":"
                            "\"cdc-capture\",\"name\":\"bench\",\"db\":\"bench\",\"schema\":"
                            "\"public\",\"table\":\"items\",\"schema_version\":1,\"lsn\":%" PRIu64
                            ",\"txId\":%" PRIu64 ",\"ts_ms\":1709287200000,\"sequence\":"
                            "\"[\\\"%" PRIu64 "\\\",\\\"%" PRIu64 "\\\"]\",\"snapshot\":\"false\"},"
                            "\"op\":\"c\",\"ts_ms\":1709287200001}",
                            id, id, lsn, lsn, lsn + 8, lsn);
        cdc_kafka_record_t r = {
            topic, CDC_KAFKA_PARTITION_ANY, key, (size_t)klen, value, (size_t)vlen, NULL, 0, 0,
            NULL};
        while (cdc_kafka_produce(p, &r, &e) != CDC_OK)
            cdc_kafka_producer_poll(p, 100);
        if (rate > 0 && id % 100 == 0) {
            long long due = t0 + id * 1000 / rate, now = now_ms();
            if (due > now)
                usleep((useconds_t)(due - now) * 1000);
        }
    }
    if (cdc_kafka_producer_flush(p, 300000, &e) != CDC_OK) {
        fprintf(stderr, "bench_drain: flush: %s\n", e.msg);
        return 1;
    }
    printf("produced=%ld seconds=%.3f\n", events, (double)(now_ms() - t0) / 1000.0);
    cdc_kafka_producer_free(p);
    return 0;
}

/* Sum of committed next offsets of topic in the changelog and its snapshot count. */
static int64_t committed(const char *wh, const char *topic, int *snapshots)
{
    char loc[2048];
    cdc_storage_t *st = NULL;
    cdc_ice_table_t *t = NULL;
    cdc_error_t e;
    int64_t sum = 0;

    *snapshots = 0;
    snprintf(loc, sizeof(loc), "%s/public/items_changelog", wh);
    if (cdc_storage_open(wh, NULL, &st, &e) != CDC_OK)
        return 0;
    if (cdc_ice_table_load(st, loc, &t, &e) == CDC_OK) {
        const char *offs = topic ? cdc_ice_table_snapshot_property(t, -1, "cdc.offsets") : NULL;
        json_t *o = offs ? json_loads(offs, 0, NULL) : NULL;
        json_t *arr = o ? json_object_get(o, topic) : NULL;
        for (size_t i = 0; i < json_array_size(arr); i++)
            if (json_integer_value(json_array_get(arr, i)) > 0)
                sum += json_integer_value(json_array_get(arr, i));
        json_decref(o);
        *snapshots = (int)cdc_ice_table_metadata(t)->nsnapshots;
        cdc_ice_table_close(t);
    }
    cdc_storage_close(st);
    return sum;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "produce") == 0)
        return produce(argv[2], argv[3], atol(argv[4]), argc > 5 ? atol(argv[5]) : 0);
    if (argc >= 6 && strcmp(argv[1], "wait-offsets") == 0) {
        long long t0 = now_ms(), timeout = atoll(argv[5]);
        int64_t want = atoll(argv[4]);
        int snaps = 0;
        while (now_ms() - t0 < timeout) {
            if (committed(argv[2], argv[3], &snaps) >= want) {
                printf("elapsed_ms=%lld snapshots=%d\n", now_ms() - t0, snaps);
                return 0;
            }
            usleep(20000);
        }
        fprintf(stderr, "bench_drain: not drained within %lld ms\n", timeout);
        return 1;
    }
    if (argc >= 5 && strcmp(argv[1], "wait-snapshots") == 0) {
        long long t0 = now_ms(), timeout = atoll(argv[4]);
        int before, now;
        committed(argv[2], NULL, &before);
        while (now_ms() - t0 < timeout) {
            committed(argv[2], NULL, &now);
            if (now >= before + atoi(argv[3])) {
                printf("elapsed_ms=%lld\n", now_ms() - t0);
                return 0;
            }
            usleep(10000);
        }
        fprintf(stderr, "bench_drain: no new snapshot within %lld ms\n", timeout);
        return 1;
    }
    fprintf(stderr, "usage: bench_drain produce|wait-offsets|wait-snapshots ...\n");
    return 2;
}
