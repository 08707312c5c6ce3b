/*
 * Network adapter micro-benchmark: what the epoch runtime pays per message and per
 * etcd round trip.
 *   bench_net nng  [round_trips]   Barrier -> Ack round trips over loopback TCP between a
 *                                  cdc_msg server thread and a client (latency p50/p99),
 *                                  then one-way Heartbeat throughput.
 *   bench_net etcd <endpoints> [n] cdc_etcd_put latency and a checkpoint-shaped fenced txn
 *                                  (compare leader create_revision, put two keys) latency.
 * Prints BENCH lines (docs/design.md, "Contracts").
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/etcd.h"
#include "common/msg.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t pct(int64_t *v, size_t n, double p)
{
    qsort(v, n, sizeof(*v), cmp_i64);
    size_t i = (size_t)(p * (double)(n - 1));
    return v[i];
}

typedef struct echo {
    cdc_msg_server_t *s;
    atomic_int stop;
    atomic_long received;
} echo_t;

/* Server thread: answers each Barrier with an Ack for the same epoch; counts others. */
static void *echo_loop(void *arg)
{
    echo_t *ec = arg;
    cdc_error_t e;
    while (!atomic_load(&ec->stop)) {
        Cdc__Envelope *env = NULL;
        uint32_t pipe = 0;
        if (cdc_msg_server_recv(ec->s, 100, &env, &pipe, &e) != CDC_OK)
            continue;
        if (env->body_case == CDC__ENVELOPE__BODY_BARRIER) {
            Cdc__Envelope out = CDC__ENVELOPE__INIT;
            Cdc__Ack ack = CDC__ACK__INIT;
            ack.worker_id = "bench";
            ack.term = env->barrier->term;
            ack.epoch = env->barrier->epoch;
            out.body_case = CDC__ENVELOPE__BODY_ACK;
            out.ack = &ack;
            cdc_msg_server_send(ec->s, pipe, &out, &e);
        } else {
            atomic_fetch_add(&ec->received, 1);
        }
        cdc_msg_free(env);
    }
    return NULL;
}

static int bench_nng(long n)
{
    cdc_error_t e;
    echo_t ec = {0};
    cdc_msg_client_t *c = NULL;
    char url[64];
    pthread_t th;
    int64_t *lat = calloc((size_t)n, sizeof(int64_t));

    if (lat == NULL || cdc_msg_server_open(&ec.s, "tcp://127.0.0.1:0", NULL, &e) != CDC_OK) {
        fprintf(stderr, "bench_net: %s\n", e.msg);
        free(lat); /* process exits next; other handles die with it */
        return 1;
    }
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", cdc_msg_server_port(ec.s));
    if (cdc_msg_client_open(&c, url, NULL, &e) != CDC_OK) {
        fprintf(stderr, "bench_net: %s\n", e.msg);
        free(lat); /* process exits next; other handles die with it */
        return 1;
    }
    pthread_create(&th, NULL, echo_loop, &ec);

    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Barrier b = CDC__BARRIER__INIT;
    env.body_case = CDC__ENVELOPE__BODY_BARRIER;
    env.barrier = &b;
    b.term = 7;
    for (long i = -100; i < n; i++) { /* 100 warm-up round trips */
        Cdc__Envelope *reply = NULL;
        b.epoch = (uint64_t)(i + 100);
        int64_t t0 = now_ns();
        if (cdc_msg_client_send(c, &env, &e) != CDC_OK ||
            cdc_msg_client_recv(c, 5000, &reply, &e) != CDC_OK) {
            fprintf(stderr, "bench_net: round trip %ld: %s\n", i, e.msg);
            free(lat); /* process exits next; other handles die with it */
            return 1;
        }
        if (i >= 0)
            lat[i] = now_ns() - t0;
        cdc_msg_free(reply);
    }
    printf("BENCH nng_barrier_ack_rtt_p50_lower_is_better %.1f us\n",
           (double)pct(lat, (size_t)n, 0.50) / 1000.0);
    printf("BENCH nng_barrier_ack_rtt_p99_lower_is_better %.1f us\n",
           (double)pct(lat, (size_t)n, 0.99) / 1000.0);

    Cdc__Heartbeat hb = CDC__HEARTBEAT__INIT;
    hb.worker_id = "bench";
    env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    long one_way = n * 5;
    int64_t t0 = now_ns();
    for (long i = 0; i < one_way; i++) {
        hb.generation = (uint64_t)i;
        if (cdc_msg_client_send(c, &env, &e) != CDC_OK) {
            fprintf(stderr, "bench_net: send %ld: %s\n", i, e.msg);
            free(lat); /* process exits next; other handles die with it */
            return 1;
        }
    }
    while (atomic_load(&ec.received) < one_way && now_ns() - t0 < 60LL * 1000000000)
        ;
    double secs = (double)(now_ns() - t0) / 1e9;
    printf("BENCH nng_heartbeat_msgs_per_s %.0f msgs/s\n",
           (double)atomic_load(&ec.received) / secs);
    atomic_store(&ec.stop, 1);
    pthread_join(th, NULL);
    cdc_msg_client_close(c);
    cdc_msg_server_close(ec.s);
    free(lat);
    return 0;
}

static int bench_etcd(const char *endpoints, long n)
{
    cdc_error_t e;
    cdc_etcd_t *c = NULL;
    cdc_etcd_election_t *el = NULL;
    int64_t term, *lat = calloc((size_t)n, sizeof(int64_t));
    char key[128], prefix[64];
    char value[512];

    memset(value, 'v', sizeof(value));
    snprintf(prefix, sizeof(prefix), "/cdc-bench/%ld/", (long)time(NULL));
    if (lat == NULL || cdc_etcd_open(&c, endpoints, 2000, &e) != CDC_OK) {
        fprintf(stderr, "bench_net: %s\n", e.msg);
        free(lat); /* process exits next; other handles die with it */
        return 1;
    }
    for (long i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%sput/%ld", prefix, i % 100);
        int64_t t0 = now_ns();
        if (cdc_etcd_put(c, key, value, sizeof(value), 0, NULL, &e) != CDC_OK) {
            fprintf(stderr, "bench_net: put: %s\n", e.msg);
            free(lat); /* process exits next; other handles die with it */
            return 1;
        }
        lat[i] = now_ns() - t0;
    }
    printf("BENCH etcd_put_p50_lower_is_better %.2f ms\n", (double)pct(lat, (size_t)n, 0.50) / 1e6);
    printf("BENCH etcd_put_p99_lower_is_better %.2f ms\n", (double)pct(lat, (size_t)n, 0.99) / 1e6);

    snprintf(key, sizeof(key), "%sleader", prefix);
    if (cdc_etcd_election_open(&el, c, key, "bench", 10, &e) != CDC_OK ||
        cdc_etcd_election_campaign(el, 5000, &term, &e) != CDC_OK) {
        fprintf(stderr, "bench_net: election: %s\n", e.msg);
        free(lat); /* process exits next; other handles die with it */
        return 1;
    }
    for (long i = 0; i < n; i++) {
        char ck[128], latest[128], epoch[32];
        cdc_etcd_cmp_t fence;
        cdc_etcd_txn_result_t r;
        cdc_etcd_election_fence(el, &fence);
        snprintf(ck, sizeof(ck), "%scheckpoints/%ld", prefix, i);
        snprintf(latest, sizeof(latest), "%slatest", prefix);
        int len = snprintf(epoch, sizeof(epoch), "%ld", i);
        cdc_etcd_op_t ops[2] = {
            {.type = CDC_ETCD_OP_PUT, .key = ck, .value = value, .value_len = sizeof(value)},
            {.type = CDC_ETCD_OP_PUT, .key = latest, .value = epoch, .value_len = (size_t)len},
        };
        int64_t t0 = now_ns();
        if (cdc_etcd_txn(c, &fence, 1, ops, 2, NULL, 0, &r, &e) != CDC_OK || !r.succeeded) {
            fprintf(stderr, "bench_net: txn: %s\n", e.msg);
            free(lat); /* process exits next; other handles die with it */
            return 1;
        }
        lat[i] = now_ns() - t0;
        cdc_etcd_txn_result_clear(&r);
    }
    printf("BENCH etcd_fenced_checkpoint_txn_p50_lower_is_better %.2f ms\n",
           (double)pct(lat, (size_t)n, 0.50) / 1e6);
    printf("BENCH etcd_fenced_checkpoint_txn_p99_lower_is_better %.2f ms\n",
           (double)pct(lat, (size_t)n, 0.99) / 1e6);
    cdc_etcd_election_resign(el, &e);
    cdc_etcd_election_close(el);
    cdc_etcd_delete(c, prefix, true, NULL, &e);
    cdc_etcd_close(c);
    free(lat);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "nng") == 0)
        return bench_nng(argc >= 3 ? atol(argv[2]) : 20000);
    if (argc >= 3 && strcmp(argv[1], "etcd") == 0)
        return bench_etcd(argv[2], argc >= 4 ? atol(argv[3]) : 2000);
    fprintf(stderr, "usage: bench_net nng [round_trips] | etcd <endpoints> [n]\n");
    return 2;
}
