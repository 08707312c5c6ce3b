/*
 * The librdkafka adapter: the only module (besides tools/kafka-dev) that includes
 * rdkafka.h. It gives the capture an idempotent, acks=all producer whose delivery
 * reports carry a per-message opaque (so LSNs are confirmed only after Kafka acked
 * them), the worker a consumer with manual assignment, seek, pause/resume and batch
 * reads (no consumer-group offset commits: offsets live in our checkpoints), and both
 * a few admin calls (ensure a topic with N partitions, count partitions, watermarks).
 * librdkafka error codes are translated to cdc_err_t here, with the retriable flag set
 * from librdkafka's own classification.
 *
 * Keys are partitioned Java-compatibly: murmur2 (seed 0x9747b28c), toPositive(h) % n,
 * the same as the Java client's default partitioner and librdkafka's murmur2 partitioner.
 *
 * Threads: librdkafka handles are thread-safe, and the adapter's only shared state (the
 * producer's cache of topic handles, so that producing does not look topics up by name)
 * is locked, so one thread may produce while another polls. Delivery callbacks run on whichever
 * thread calls cdc_kafka_producer_poll(), _flush() or cdc_kafka_produce() (the latter
 * polls while the queue is full), so a callback must lock what it shares. A consumer
 * handle is used by one thread at a time.
 */
#ifndef CDC_KAFKA_H
#define CDC_KAFKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Let the producer pick the partition from the key (murmur2, Java-compatible). */
#define CDC_KAFKA_PARTITION_ANY (-1)
/* Offsets for assignment and seek, besides absolute offsets >= 0. */
#define CDC_KAFKA_OFFSET_BEGINNING (-2)
#define CDC_KAFKA_OFFSET_END (-1)

typedef struct cdc_kafka_producer cdc_kafka_producer_t;
typedef struct cdc_kafka_consumer cdc_kafka_consumer_t;

/* One message header; the value may be NULL (a null header). */
typedef struct cdc_kafka_header {
    const char *name;
    const void *value;
    size_t value_len;
} cdc_kafka_header_t;

/* ---- partitioning ------------------------------------------------------------------ */

/* Kafka's murmur2 hash (seed 0x9747b28c) of key, as the Java client computes it. */
uint32_t cdc_kafka_murmur2(const void *key, size_t len);

/*
 * Partition of a key among npartitions (> 0), as the Java client's default partitioner
 * picks it for a non-null key: (murmur2(key) & 0x7fffffff) % npartitions.
 */
int32_t cdc_kafka_partition_for_key(const void *key, size_t len, int32_t npartitions);

/* ---- producer ------------------------------------------------------------------------ */

/*
 * Delivery report for one message, called exactly once per message accepted by
 * cdc_kafka_produce(), in the order Kafka acked them per partition. `opaque` is the
 * record's opaque. On success err is CDC_OK and offset is the message's offset; on
 * failure err/detail say why (detail->retriable: the caller may produce it again).
 * Runs on the thread that polls the producer.
 */
typedef void (*cdc_kafka_delivery_fn)(void *opaque, cdc_err_t err, const cdc_error_t *detail,
                                      int32_t partition, int64_t offset, void *cb_arg);

typedef struct cdc_kafka_producer_config {
    const char *bootstrap;             /* required: host:port[,host:port...] */
    const char *client_id;             /* NULL = "cdc" */
    const char *compression;           /* none|gzip|snappy|lz4|zstd; NULL = "lz4" */
    int linger_ms;                     /* batching delay; < 0 = default 5 */
    int64_t queue_max_messages;        /* local queue bound; 0 = default 100000 */
    int64_t queue_max_kbytes;          /* local queue bound; 0 = default 1048576 (1 GiB) */
    int64_t message_max_bytes;         /* 0 = librdkafka default (1000000) */
    int delivery_timeout_ms;           /* give up a message after this; 0 = default 300000 */
    int queue_full_timeout_ms;         /* how long produce() waits on a full queue; 0 = 30000 */
    const char *properties;            /* extra librdkafka "key=value" entries separated by ';'
                                        * or newlines, applied last (may override the above);
                                        * NULL = none */
    cdc_kafka_delivery_fn on_delivery; /* may be NULL */
    void *cb_arg;                      /* passed to on_delivery */
} cdc_kafka_producer_config_t;

/*
 * Creates an idempotent producer (enable.idempotence=true, acks=all, in-order
 * delivery per partition). Returns CDC_ERR_CONFIG for a bad property. On success
 * *out is owned by the caller (free with cdc_kafka_producer_free()).
 */
cdc_err_t cdc_kafka_producer_new(const cdc_kafka_producer_config_t *cfg, cdc_kafka_producer_t **out,
                                 cdc_error_t *e);

/*
 * Destroys the producer without waiting: messages not yet delivered are purged and get
 * a delivery report with CDC_ERR_CLOSED. Call cdc_kafka_producer_flush() first to
 * deliver them. NULL is allowed.
 */
void cdc_kafka_producer_free(cdc_kafka_producer_t *p);

typedef struct cdc_kafka_record {
    const char *topic;
    int32_t partition; /* a partition, or CDC_KAFKA_PARTITION_ANY (murmur2 of the key) */
    const void *key;   /* may be NULL */
    size_t key_len;
    const void *value; /* may be NULL (a tombstone) */
    size_t value_len;
    const cdc_kafka_header_t *headers; /* may be NULL */
    size_t header_count;
    int64_t timestamp_ms; /* 0 = now */
    void *opaque;         /* handed back in the delivery report */
} cdc_kafka_record_t;

/*
 * Queues one message. Key, value and headers are copied: the caller keeps ownership.
 * When the local queue is full it polls (serving delivery reports) and retries for up
 * to queue_full_timeout_ms, then returns CDC_ERR_TIMEOUT (retriable). On error no
 * delivery report will come for this record.
 */
cdc_err_t cdc_kafka_produce(cdc_kafka_producer_t *p, const cdc_kafka_record_t *rec, cdc_error_t *e);

/* Serves delivery reports for up to timeout_ms (0 = do not block); returns how many. */
int cdc_kafka_producer_poll(cdc_kafka_producer_t *p, int timeout_ms);

/*
 * Waits until every queued message got its delivery report, or timeout_ms passes
 * (CDC_ERR_TIMEOUT, retriable). Delivery callbacks run inside.
 */
cdc_err_t cdc_kafka_producer_flush(cdc_kafka_producer_t *p, int timeout_ms, cdc_error_t *e);

/* Messages queued or in flight plus delivery reports and events not yet served (0 = all done). */
int cdc_kafka_producer_outstanding(cdc_kafka_producer_t *p);

/*
 * Returns CDC_OK while the producer is healthy, or the fatal error that made it unusable
 * (e.g. the idempotent producer lost its sequence): the caller must create a new one.
 */
cdc_err_t cdc_kafka_producer_fatal(cdc_kafka_producer_t *p, cdc_error_t *e);

/* Number of partitions of topic as the producer's metadata sees it. */
cdc_err_t cdc_kafka_producer_partitions(cdc_kafka_producer_t *p, const char *topic, int32_t *count,
                                        int timeout_ms, cdc_error_t *e);

/* ---- consumer ------------------------------------------------------------------------ */

typedef struct cdc_kafka_consumer_config {
    const char *bootstrap;   /* required */
    const char *client_id;   /* NULL = "cdc" */
    const char *group_id;    /* only names the client to brokers; never joins or commits.
                              * NULL = "cdc-unmanaged" */
    bool read_committed;     /* isolation.level=read_committed */
    int64_t fetch_max_bytes; /* 0 = librdkafka default */
    int fetch_wait_max_ms;   /* 0 = 100 */
    const char *properties;  /* extra "key=value" entries, ';' or newline separated */
} cdc_kafka_consumer_config_t;

/* A (topic, partition, offset) triple for assignment. */
typedef struct cdc_kafka_tp {
    const char *topic;
    int32_t partition;
    int64_t offset; /* next offset to read, or CDC_KAFKA_OFFSET_BEGINNING/_END */
} cdc_kafka_tp_t;

/* A consumed message. Pointers stay valid until cdc_kafka_msgs_release(). */
typedef struct cdc_kafka_msg {
    const char *topic;
    int32_t partition;
    int64_t offset;
    const void *key; /* NULL when the message has no key */
    size_t key_len;
    const void *value; /* NULL for a tombstone */
    size_t value_len;
    int64_t timestamp_ms; /* -1 when unknown */
    void *impl;           /* adapter's handle; do not touch */
} cdc_kafka_msg_t;

/* Creates a consumer with no assignment. *out is owned by the caller. */
cdc_err_t cdc_kafka_consumer_new(const cdc_kafka_consumer_config_t *cfg, cdc_kafka_consumer_t **out,
                                 cdc_error_t *e);

/* Closes and frees the consumer (no offset commits happen). NULL is allowed. */
void cdc_kafka_consumer_free(cdc_kafka_consumer_t *c);

/* Replaces the whole assignment with tps[0..n) (n = 0 unassigns everything); every
 * assigned partition fetches, also one paused before. */
cdc_err_t cdc_kafka_consumer_assign(cdc_kafka_consumer_t *c, const cdc_kafka_tp_t *tps, size_t n,
                                    cdc_error_t *e);

/* Adds tps[0..n) to the assignment, the partitions already assigned untouched (their
 * positions, prefetched records and pauses kept); each added partition fetches. */
cdc_err_t cdc_kafka_consumer_add(cdc_kafka_consumer_t *c, const cdc_kafka_tp_t *tps, size_t n,
                                 cdc_error_t *e);

/* Moves an assigned partition's read position to offset (also BEGINNING/END). */
cdc_err_t cdc_kafka_consumer_seek(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                                  int64_t offset, int timeout_ms, cdc_error_t *e);

/* Stops / restarts fetching one assigned partition; the position is kept. */
cdc_err_t cdc_kafka_consumer_pause(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                                   cdc_error_t *e);
cdc_err_t cdc_kafka_consumer_resume(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                                    cdc_error_t *e);

/*
 * Reads up to max messages, waiting up to timeout_ms for the first one. *n = how many
 * were stored in msgs (possibly 0 on timeout, which is CDC_OK). Transient broker errors
 * (connection loss, leader change) are retried inside librdkafka and not reported; an
 * error that needs the caller (offset out of range, unknown topic, fatal) is returned
 * after the messages already read (*n counts them). Release with cdc_kafka_msgs_release().
 */
cdc_err_t cdc_kafka_consume_batch(cdc_kafka_consumer_t *c, cdc_kafka_msg_t *msgs, size_t max,
                                  size_t *n, int timeout_ms, cdc_error_t *e);

/*
 * Partitions that reported a non-retriable error through cdc_kafka_consume_batch() since
 * the last call (a failed offset lookup, an offset out of range): librdkafka stops
 * fetching such a partition until it is assigned again (cdc_kafka_consumer_restart).
 * Copies up to max of them (topic names into topics[i], partitions into partitions[i]),
 * forgets those, returns how many; the others are returned by the next calls.
 */
size_t cdc_kafka_consumer_failed(cdc_kafka_consumer_t *c, char (*topics)[256], int32_t *partitions,
                                 size_t max);

/*
 * Takes topic/partition out of the assignment and puts it back at offset (also
 * BEGINNING): the way to resume a partition that cdc_kafka_consumer_failed() reported,
 * which librdkafka no longer lets one seek.
 */
cdc_err_t cdc_kafka_consumer_restart(cdc_kafka_consumer_t *c, const char *topic, int32_t partition,
                                     int64_t offset, cdc_error_t *e);

/* Releases messages returned by cdc_kafka_consume_batch(). */
void cdc_kafka_msgs_release(cdc_kafka_msg_t *msgs, size_t n);

/* Number of headers of m, and the idx-th one (pointers live as long as m). */
size_t cdc_kafka_msg_header_count(const cdc_kafka_msg_t *m);
bool cdc_kafka_msg_header_at(const cdc_kafka_msg_t *m, size_t idx, cdc_kafka_header_t *out);
/* The last header called name; false when there is none. */
bool cdc_kafka_msg_header(const cdc_kafka_msg_t *m, const char *name, cdc_kafka_header_t *out);

/* Low and high watermark of a partition, asked from the broker (lag = high - position).
 * timeout_ms 0 returns the values cached from the last fetch response without a request
 * (non-blocking; the low watermark may then be -1). */
cdc_err_t cdc_kafka_consumer_watermarks(cdc_kafka_consumer_t *c, const char *topic,
                                        int32_t partition, int64_t *low, int64_t *high,
                                        int timeout_ms, cdc_error_t *e);

/* High watermarks of partitions 0..n-1 of topic, in one request per leader broker. */
cdc_err_t cdc_kafka_consumer_end_offsets(cdc_kafka_consumer_t *c, const char *topic, int32_t n,
                                         int64_t *high, int timeout_ms, cdc_error_t *e);

/* Number of partitions of topic (CDC_ERR_NOT_FOUND when it does not exist). */
cdc_err_t cdc_kafka_consumer_partitions(cdc_kafka_consumer_t *c, const char *topic, int32_t *count,
                                        int timeout_ms, cdc_error_t *e);

/*
 * Names of the topics the cluster has whose name ends with suffix ("" = all), sorted.
 * On success *names (n strings) is owned by the caller: free with cdc_kafka_topics_free().
 */
cdc_err_t cdc_kafka_consumer_topics(cdc_kafka_consumer_t *c, const char *suffix, char ***names,
                                    size_t *n, int timeout_ms, cdc_error_t *e);
void cdc_kafka_topics_free(char **names, size_t n);

/* ---- admin ----------------------------------------------------------------------------- */

typedef struct cdc_kafka_topic_spec {
    const char *name;
    int32_t partitions;
    int16_t replication_factor; /* 0 or -1 = broker default */
    bool compact;               /* cleanup.policy=compact */
} cdc_kafka_topic_spec_t;

/*
 * Creates the topic when it does not exist (CreateTopics). An existing topic is fine when
 * it has spec->partitions partitions; a different count is CDC_ERR_CONFLICT (not
 * retriable). An existing topic costs one metadata request and no CreateTopics. The
 * development broker has no CreateTopics: when CDC_KAFKA_DEV_CONTROL (its control
 * address, set by the harness and `make run`) is in the environment the topic is created
 * through it; otherwise a cluster that names no controller among its brokers (the
 * development broker) or does not answer CreateTopics gets the topic created
 * automatically by a metadata request (its default partition count), at once and not
 * after timeout_ms, then the count is checked the same way.
 * `properties` as in the producer config (may be NULL).
 */
cdc_err_t cdc_kafka_ensure_topic(const char *bootstrap, const char *properties,
                                 const cdc_kafka_topic_spec_t *spec, int timeout_ms,
                                 cdc_error_t *e);

/* Number of partitions of topic (CDC_ERR_NOT_FOUND when it does not exist). */
cdc_err_t cdc_kafka_topic_partitions(const char *bootstrap, const char *properties,
                                     const char *topic, int32_t *count, int timeout_ms,
                                     cdc_error_t *e);

#endif
