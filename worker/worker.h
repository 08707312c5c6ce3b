/*
 * cdc-worker process state shared by its subsystems: configuration, the coordinator
 * session (session.c), the partition slots it owns with their state stores, stages and
 * checkpoints (consume.c, barrier.c), the dead-letter producer (dlq.c) and metrics. One
 * thread runs the record path and the coordinator link (worker_run() in session.c):
 * records are processed between coordinator messages, so a barrier always falls on a
 * record boundary. At a barrier that thread only cuts the epoch (swaps each partition's
 * stage, holds its state store) and hands it to the finalizer thread (barrier.c), which
 * writes the files, checkpoints the state and sends the Ack while records of the next
 * epoch flow. A heartbeat thread keeps the link alive.
 */
#ifndef CDC_WORKER_WORKER_H
#define CDC_WORKER_WORKER_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/options.h"
#include "common/diskfull.h"
#include "common/err.h"
#include "common/etcd.h"
#include "common/hash.h"
#include "common/health.h"
#include "common/http.h"
#include "common/iceberg/storage.h"
#include "common/kafka.h"
#include "common/metrics.h"
#include "common/msg.h"
#include "worker/checkpoint.h"
#include "worker/decode.h"
#include "common/cluster.h"
#include "worker/dedup.h"
#include "worker/dlq.h"
#include "worker/layout.h"
#include "worker/mask.h"
#include "worker/stage.h"

#define CDC_WORKER_PARTITIONS CDC_CLUSTER_PARTITIONS
#define CDC_WORKER_SCHEMA_PARTITIONS 64 /* the schema topic has 1; more are read up to this */

/*
 * An append-only list of topic names that threads other than the record thread read
 * without a lock (tables.c): the worker's topics (the finalizer names them in its Acks)
 * and a follower's offer (the heartbeat thread sends it). There is no cap on its length
 * (docs/worker.md, "The job's tables"), so it grows, and growing must never move or free
 * memory a reader may hold:
 *
 * - a name is allocated once and never changes or moves until cdc_topic_list_free();
 * - the directory `names` (one contiguous array, as the protobuf messages want it) is
 *   never reallocated in place: when full, the record thread allocates one twice as big,
 *   copies the pointers, publishes it (release) and keeps the old one in `retired` until
 *   cdc_topic_list_free(), so a reader still holding it reads valid, unchanged entries;
 * - an entry is written before the count that covers it is published (release), and the
 *   directory holding it before that count too.
 *
 * A reader loads the count (acquire) first, then the directory (acquire): the directory
 * it sees is the one published with that count or a later one, and a later one holds
 * every earlier entry. Loading them the other way round could pair an old directory with
 * a newer count; cdc_topic_list_names() does it right. The retired directories cost less
 * than the current one (a geometric series). `index` is a hash index of the names for
 * lookups, which only the record thread makes.
 */
typedef struct cdc_topic_list {
    _Atomic(char **) names; /* the current directory: names[0..n) */
    _Atomic size_t n;
    size_t cap;      /* of the current directory (record thread) */
    char ***retired; /* directories replaced by bigger ones, kept until freed */
    size_t nretired, capretired;
    uint32_t *index;  /* open addressing: entry index + 1, 0 = empty (record thread) */
    size_t index_cap; /* a power of two, at least twice n; 0 = no index yet */
} cdc_topic_list_t;

/* The count of names, then the directory holding them: names[0..*n) stay valid and
 * unchanged until cdc_topic_list_free(). Any thread. */
static inline char **cdc_topic_list_names(const cdc_topic_list_t *l, size_t *n)
{
    *n = atomic_load_explicit(&l->n, memory_order_acquire);
    return atomic_load_explicit(&l->names, memory_order_acquire);
}

/* Name i, for i below a count the caller loaded (acquire) before. Any thread. */
static inline char *cdc_topic_list_at(const cdc_topic_list_t *l, size_t i)
{
    return atomic_load_explicit(&l->names, memory_order_acquire)[i];
}

/* Appends name (malloc'd; the list owns it on success, the caller still on failure:
 * CDC_ERR_NOMEM) and publishes it. Record thread. */
cdc_err_t cdc_topic_list_append(cdc_topic_list_t *l, char *name);

/* The index of name in the list, or -1. Record thread. */
int cdc_topic_list_find(const cdc_topic_list_t *l, const char *name);

/* Frees the names and every directory; no other thread may read the list any more. */
void cdc_topic_list_free(cdc_topic_list_t *l);

typedef struct cdc_worker_config {
    char *id;
    char *job;
    cdc_etcd_options_t etcd;
    char *coordinator; /* NNG URL; skips etcd leader discovery (tests) */
    cdc_kafka_options_t kafka;
    char *topic_prefix;
    char *tables; /* "public.orders,public.items" */
    char *topics; /* explicit topic names, overrides tables */
    char *warehouse;
    char *state_dir;
    char *http;
    cdc_tls_options_t tls; /* tls+tcp:// coordinators and --http-tls (common/tls.h) */
    int64_t liveness_timeout_ms;
    char *http_token;      /* bearer tokens of the admin API (http.h); NULL = none */
    bool http_token_reads; /* GET endpoints need the token too */
    bool insecure;         /* --insecure: missing secrets waived */
    char *worker_secret;   /* proven to the coordinator at registration; NULL = none */
    cdc_log_options_t log;
    cdc_s3_options_t s3;
    int64_t heartbeat_interval_ms;
    int64_t dedup_ttl_ms;
    int64_t max_record_bytes;
    int64_t max_staged_bytes;
    int64_t progress_timeout_ms; /* progress watchdog; 0 = off */
    int64_t batch_size;
    int64_t record_nice; /* nice of the record thread (0 = unchanged) */
    char *compression;
    char *toast_placeholder;
    /* column masking (worker/mask.h) */
    char *mask_policy;
    char *mask_mode;
    char *mask_secret;
    char *mask_secret_file;
} cdc_worker_config_t;

/* Per-table metric series, looked up once per table. */
typedef struct cdc_table_metrics {
    char *name; /* "<ns>.<table>" (owned; the key of tmetrics_by_name), the label value */
    cdc_counter_t *in, *out, *dups;
    /* values no Iceberg type holds (docs/worker.md, "Values no Iceberg type holds"):
     * columns made null (their records dead-lettered too), numeric NaN/Infinity */
    cdc_counter_t *nulled, *special, *unknown_toast;
} cdc_table_metrics_t;

/* One owned partition slot. */
typedef struct cdc_slot {
    bool owned;
    uint32_t partition;
    cdc_dedup_t *dedup;
    char *db_dir;
    cdc_ckpt_t ckpt;
    bool ckpt_ready;
    cdc_stage_t stage;
    /* Per topic (index t of w->topics), w->topic_cap entries each, grown with the topic
     * list by the record thread (tables.c), the only thread that reads them: a barrier
     * copies what the finalizer needs into its cut (barrier.c). */
    int64_t *next_offset; /* next offset to read per topic */
    int64_t *high;        /* last known high watermark */
    /* Progress watchdog (cdc_worker_update_gauges): the offset last seen moving and when,
     * and since when the partition is stalled (0 = it is not). */
    int64_t *progress_offset;
    int64_t *progress_ms;
    int64_t *stalled_since;
    bool *watchdog_gave_up; /* fetched again once, still stuck */
    /* Chunked events being put back together (chunks.c), one per topic, allocated at a
     * topic's first chunk (NULL until then). */
    struct cdc_evasm **chunks;
    /* When fetching stopped on an error (e.g. the lookup of the start offset failed):
     * the monotonic time at which the partition is assigned again (0 = fetching). */
    int64_t *restart_at;
    bool dirty;        /* state changed since the last checkpoint */
    char *last_handle; /* latest checkpoint handle (copy, owned) */
    cdc_gauge_t *lag, *state_bytes;
} cdc_slot_t;

/* What the record path counts (consume.c, which alone reaches into it: make lint checks). */
typedef struct cdc_worker_records {
    /* Per-table series, one per table seen, however many: found through by_name (name ->
     * index + 1) when a record's table is not the last one's. Record thread only: the
     * counters are updated lock-free and rendered under the registry's mutex
     * (common/metrics.h), so no other thread reads this array. */
    cdc_table_metrics_t *tables;
    size_t ntables, tables_cap;
    cdc_strmap_t by_name;
    const void *last_schema; /* schema of the last record's table and its series index */
    size_t last_index;
    /* rows a partition spec could not take, written unpartitioned (record thread) */
    uint64_t unpartitioned_rows;
} cdc_worker_records_t;

/* The values no Iceberg type holds (docs/worker.md), counted for /status: values.c's
 * alone (make lint checks). The record thread counts, any thread reads. */
typedef struct cdc_worker_values {
    _Atomic uint64_t nulled;         /* changes kept with a column made null */
    _Atomic uint64_t special_values; /* numeric special values */
    _Atomic uint64_t unknown_toast;  /* changes with unchanged TOAST values never seen */
    pthread_mutex_t lock;
    char last_nulled[320]; /* the last column made null ("<table>: <why>"), under lock */
} cdc_worker_values_t;

/* A copy of them (cdc_worker_values_read). */
typedef struct cdc_worker_values_copy {
    uint64_t nulled, special_values, unknown_toast;
    char last_nulled[320]; /* "" when none */
} cdc_worker_values_copy_t;

/* The finalizer thread (barrier.c, which alone reaches into it: make lint checks). While
 * job is set (or a GC runs), the finalizer owns the slots' checkpoint data (ckpt,
 * last_handle) and the cut stages; the record thread waits for it to be idle before the
 * next cut and before it reassigns, drops or closes slots. */
typedef struct cdc_worker_finalizer {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool running, stop, busy;
    struct cdc_snap_job *job; /* submitted and not finished yet */
    uint64_t gc_epoch;        /* Committed epoch whose checkpoint GC is pending */
    _Atomic bool cancel;      /* the assignment changed: do not ack the job */
} cdc_worker_finalizer_t;

typedef struct cdc_worker {
    cdc_worker_config_t cfg;
    uint64_t incarnation;
    /* The source topics this process consumes or consumed (tables.c): with --tables or
     * --topics exactly those, else those the coordinator's Assigns named, as many as there
     * are. Append-only (cdc_topic_list_t): the finalizer thread may read topic t for t
     * below a count it loaded; only the record thread appends. A topic's index is the
     * index of the per-topic arrays below and in the slots. */
    cdc_topic_list_t topics;
    /* Capacity of every per-topic array (consumed, topic_parts, topic_parts_warned and the
     * slots' arrays): at least topics.n, grown before a topic is appended. Record thread. */
    size_t topic_cap;
    /* Which of them the current assignment consumes (consumed[t]: topic t): the job's table
     * set of the last Assign. Record thread; a barrier copies it into its cut. */
    bool *consumed;
    /* Started without --tables and --topics: it consumes the set its Assigns give and
     * offers the tables registered on the schema topic (offer, append-only like topics,
     * read by the heartbeat thread; next_offer_ms: when the record thread looks again). */
    bool follows_tables;
    cdc_topic_list_t offer;
    int64_t next_offer_ms;
    int32_t *topic_parts; /* partition counts, 0 until asked */
    bool *topic_parts_warned;
    char schema_topic[256];

    /* coordinator session */
    cdc_etcd_t *etcd;
    cdc_msg_client_t *msg;
    char leader_url[512];
    int64_t leader_term;
    uint64_t term, generation; /* of the assignment we run */
    bool assigned;             /* an assignment is active (false after Abort) */
    bool registered;
    bool proved;      /* a proof of the worker secret went out on the current link */
    bool auth_warned; /* warned of a coordinator that asks for no proof, or wants one */
    /* Why the coordinator gives us no partitions (Assign.refused: our topics are not the
     * job's tables), "" when it does not refuse us; main thread, for /status. */
    char refused[640];
    int64_t next_leader_check_ms, next_register_ms;
    /* Heartbeats come from their own thread so that long work on the main thread
     * (restores, uploads, dead-letter retries) does not look like a dead worker.
     * link_lock serializes every send and guards msg/registered/term/generation. */
    pthread_mutex_t link_lock;
    uint64_t assignment_seq; /* bumped on every Assign/Abort acted on */
    struct {
        pthread_t thread;
        bool running;
    } hb; /* the heartbeat thread: session.c's alone */

    /* data path */
    cdc_kafka_consumer_t *consumer;
    cdc_kafka_consumer_t *schema_consumer;
    struct {
        int32_t parts; /* partitions of the schema topic read; 0 = not assigned yet */
        int64_t next[CDC_WORKER_SCHEMA_PARTITIONS]; /* next offset read per partition */
    } schemapos; /* the schema topic's position: schemas.c's alone */
    cdc_kafka_producer_t *dlq;
    /* dead-letter topics made sure of (dlq.c), however many tables: name -> the same
     * name, owned (strdup). Record thread. */
    cdc_strmap_t dlq_ensured;
    cdc_storage_t *storage;
    cdc_layouts_t layouts; /* partition specs from the last barrier (record thread) */
    cdc_catalog_t *catalog;
    cdc_decode_options_t dopts;
    cdc_mask_t *mask; /* column masking policy, NULL = none (record thread, see mask.h) */
    cdc_slot_t slots[CDC_WORKER_PARTITIONS];
    bool paused;
    int64_t next_lag_ms;

    /* Finalizer thread (barrier.c): finishes one cut epoch at a time. While fin_job is
     * set (or a GC runs), the finalizer owns the slots' checkpoint data (ckpt,
     * last_handle) and the cut stages; the record thread waits for it to be idle before
     * the next cut and before it reassigns, drops or closes slots. */
    cdc_worker_finalizer_t fin; /* barrier.c's alone */

    /* metrics */
    cdc_http_server_t *http;
    cdc_tls_t *tls;        /* NULL = no certificates */
    cdc_health_t health;   /* /healthz: the main loop (session.c) beats it */
    cdc_http_doc_t status; /* /status, rebuilt by cdc_worker_update_gauges */
    cdc_metrics_t *metrics;
    cdc_worker_records_t records; /* consume.c's alone */
    cdc_worker_values_t values;   /* values.c's alone */
    cdc_counter_t *m_dlq[CDC_DLQ__COUNT];
    cdc_counter_t *m_unpartitioned;
    cdc_counter_t *m_replayed[3]; /* replayed dead letters: applied, changelog only, dups */
    cdc_counter_t *m_tombstones, *m_ckpt_bytes, *m_epochs, *m_aborts, *m_rejected;
    cdc_counter_t *m_fetch_restarts; /* partitions assigned again after fetching stopped */
    cdc_counter_t *m_stalls;         /* progress watchdog: stalls detected */
    cdc_counter_t *m_missing;        /* offsets below a partition's first record, from 0 */
    /* chunked events (chunks.c): reassembled, sequences discarded unfinished, chunks that
     * continued no sequence, and what /status shows of them */
    cdc_counter_t *m_chunked, *m_torn, *m_chunks_rejected;
    struct {
        /* the large event last worked on and when (mono ms), for the heartbeat thread */
        _Atomic uint64_t large_bytes;
        _Atomic int64_t large_ms;
        uint64_t reassembled, torn, rejected, oversized;
        uint64_t largest;              /* bytes of the largest event reassembled */
    } chunking;                        /* chunk reassembly's figures: chunks.c's alone */
    cdc_gauge_t *m_stalled;            /* progress watchdog: partitions stalled now */
    cdc_counter_t *m_floor_rows;       /* rows removed by floors (floor.c) */
    cdc_counter_t *m_before_floor;     /* changes before a floor that came after it */
    cdc_counter_t *m_snapshot_rereads; /* snapshot rows of a chunk read again (dedup.h) */
    cdc_gauge_t *m_floors_waiting;     /* (slot, floor) pairs not applied at the last barrier */
    int64_t floor_warned_ms;           /* last "not applied yet" warning */
    cdc_histogram_t *m_stage_seconds, *m_ckpt_seconds;
    /* the warehouse's and the state directory's file systems full (docs/operations.md,
     * "Disk faults"): reported by cdc_worker_disk_failed, cleared by an acked epoch */
    cdc_diskfull_t disk_warehouse, disk_state;

    /* Set by the signal handler, which may run on any thread; read by the heartbeat
     * thread too. Atomic (lock-free: allowed in a handler), so no data race. */
    volatile _Atomic sig_atomic_t *stop;
} cdc_worker_t;

/* ---- consume.c ------------------------------------------------------------------------ */

/* Opens Kafka clients, storage and the catalog. */
cdc_err_t cdc_worker_data_open(cdc_worker_t *w, cdc_error_t *e);

/* ---- values.c: the values no Iceberg type holds, counted (docs/worker.md) ---- */
void cdc_worker_values_init(cdc_worker_t *w);
/* n numeric special values in a change; a change with an unchanged TOAST value never
 * seen (returns how many so far); a change kept with columns made null, and why. Record
 * thread. */
void cdc_worker_values_special(cdc_worker_t *w, uint64_t n);
uint64_t cdc_worker_values_unknown_toast(cdc_worker_t *w);
void cdc_worker_values_nulled(cdc_worker_t *w, const char *ns, const char *table, const char *why);
/* The counts as they are now (any thread: /status). */
void cdc_worker_values_read(cdc_worker_t *w, cdc_worker_values_copy_t *out);
void cdc_worker_data_close(cdc_worker_t *w);

/*
 * Makes the owned set exactly `parts` (from an Assign): every listed partition is reset
 * to its checkpoint (state restored, stage dropped) and sought to its offsets; other
 * partitions are released.
 */
cdc_err_t cdc_worker_assign(cdc_worker_t *w, const Cdc__Assign *a, cdc_error_t *e);

/*
 * The job's table set grew while the assignment runs (a Tables message): the topics of
 * tables[0..ntables) not consumed yet are taken (cdc_worker_take_tables) and added to every
 * owned slot, read from the beginning, without touching the slots' state, stages or other
 * topics. A set that lacks a topic the worker consumes is refused (CDC_ERR_PROTOCOL).
 */
cdc_err_t cdc_worker_widen(cdc_worker_t *w, char **tables, size_t ntables, cdc_error_t *e);

/* Drops staged data of every partition and stops fetching (after an Abort). */
void cdc_worker_suspend(cdc_worker_t *w);

/* The metric series of a record's table (schema's "<ns>.<table>", whole however long),
 * made on first use; NULL when out of memory. Owned by the worker. The same schema as the
 * last record's in the common case (no formatting), else one map lookup, however many
 * tables. Record thread. */
cdc_table_metrics_t *cdc_worker_table_metrics(cdc_worker_t *w, const cdc_source_schema_t *schema);

/* Consumes and processes one batch (up to timeout_ms waiting). */
cdc_err_t cdc_worker_consume(cdc_worker_t *w, int timeout_ms, cdc_error_t *e);

/* ---- tables.c ------------------------------------------------------------------------- */

/* The topics of --tables or --topics (cdc_worker_data_open), or none: the worker then
 * follows the job's tables (docs/worker.md, "The job's tables"). */
cdc_err_t cdc_worker_tables_open(cdc_worker_t *w, cdc_error_t *e);
void cdc_worker_tables_close(cdc_worker_t *w);

/* The index of topic in w->topics, or -1. Record thread. */
int cdc_worker_topic_index(const cdc_worker_t *w, const char *topic);

/* Appends topic name (malloc'd; taken on success only) to w->topics, every per-topic
 * array grown first so that its index is valid in all of them; CDC_ERR_NOMEM when memory
 * runs out, the only limit on the number of topics. Record thread. */
cdc_err_t cdc_worker_add_topic(cdc_worker_t *w, char *name, cdc_error_t *e);

/* Topic t of w->topics (t below a count loaded before). Any thread. */
static inline char *cdc_worker_topic(const cdc_worker_t *w, size_t t)
{
    return cdc_topic_list_at(&w->topics, t);
}

/* Whether the current assignment consumes topic t. Record thread. */
static inline bool cdc_worker_consumes(const cdc_worker_t *w, size_t t)
{
    return t < w->topic_cap && w->consumed[t];
}

/*
 * Takes the job's table set of an Assign (Assign.tables): the worker consumes exactly these
 * from now on, a topic it never consumed is appended to w->topics (before the slots are
 * restored, so a slot's checkpoint without its offset reads it from the beginning). Without
 * a set (an older coordinator) a worker with --tables or --topics consumes those, a follower
 * nothing. A worker with --tables or --topics never takes a topic they lack (the
 * coordinator refuses it then). Record thread, finalizer idle.
 */
cdc_err_t cdc_worker_take_tables(cdc_worker_t *w, const Cdc__Assign *a, cdc_error_t *e);

/* A follower's offer grows by the topics registered on the schema topic since the last
 * look (the record thread, every few seconds; the heartbeats carry it). */
void cdc_worker_offer_refresh(cdc_worker_t *w, int64_t now);

/* The topics to report in a Register: a follower's offer, else its --tables/--topics
 * (count in *n; entries stay valid for the life of the process). */
char **cdc_worker_register_topics(cdc_worker_t *w, size_t *n);

/* Assigns again, from its next offset, every partition whose fetching stopped on an
 * error (after a delay) or whose restart_at is due (watchdog.c). Record thread. */
void cdc_worker_restart_failed(cdc_worker_t *w);

/* A consumed topic with more partitions than the job's slots has partitions no worker
 * reads: said once per topic, loudly (the capture refuses to create such topics; others
 * may). Asks the broker for the partition counts not known yet, waiting budget_ms at most
 * in all: the topics left are asked at the next call (after an assignment, a widening,
 * and with the gauges). Record thread. */
void cdc_worker_check_partitions(cdc_worker_t *w, int budget_ms);

/* Updates lag and state-size gauges and /status (cheap; rate-limited inside). */
void cdc_worker_update_gauges(cdc_worker_t *w, int64_t now_ms);

/*
 * Progress watchdog of topic t of slot s at now (docs/worker.md, "Progress watchdog"):
 * records behind the high watermark and an offset that has not moved for
 * --progress-timeout is a stall; the partition is then fetched again (s->restart_at[t]),
 * once per offset. Returns 1 while the partition is stalled. Record thread.
 */
int cdc_worker_watchdog(cdc_worker_t *w, cdc_slot_t *s, size_t t, int64_t now);

/* Attempts at a storage operation (restore, upload, file writes) before giving up. */
#define CDC_WORKER_STORAGE_RETRIES 3

/* "<a>/<b>" (malloc'd), or NULL when out of memory. */
char *cdc_worker_join(const char *a, const char *b);

/* Pauses (past --max-staged-bytes) or resumes fetching of every owned partition. */
void cdc_worker_set_paused(cdc_worker_t *w, bool pause);

/* ---- barrier.c ------------------------------------------------------------------------ */

/* The cdc_pq_codec_t of the epoch's files (--compression; zstd by default). */
int cdc_worker_stage_codec(const cdc_worker_t *w);

/*
 * Barrier (term, generation, epoch): cuts every owned partition at the current record
 * boundary (its next offsets, its stage and its state store as of now) and hands the
 * epoch to the finalizer thread, which writes the files, checkpoints the state and
 * sends the Ack (cdc_worker_send_ack). Waits first for the previous epoch's finalizer
 * work; otherwise returns at once, and the caller keeps consuming. Fails (no Ack; the
 * coordinator aborts the epoch) only when the cut itself cannot be made.
 */
cdc_err_t cdc_worker_barrier(cdc_worker_t *w, uint64_t term, uint64_t generation, uint64_t epoch,
                             cdc_error_t *e);
void cdc_worker_ack_free(Cdc__Ack *ack);

/* Waits until the finalizer has nothing left to do (cancel: its Ack is not sent). */
void cdc_worker_finalizer_wait(cdc_worker_t *w, bool cancel);

/* Committed{epoch}: drops checkpoints no longer needed (on the finalizer thread). */
void cdc_worker_committed(cdc_worker_t *w, uint64_t epoch);

/*
 * A write failed with e: when a full file system caused it, the disk it names (the state
 * directory when e names a path under --state-dir, else the warehouse) is reported full
 * (common/diskfull.h; docs/operations.md, "Disk faults"). Any thread.
 */
void cdc_worker_disk_failed(cdc_worker_t *w, const cdc_error_t *e);

/* Sets up the finalizer's lock and condition; starts the finalizer thread (both from
 * cdc_worker_data_open); stops it, cancelling what it has not finished
 * (cdc_worker_data_close). */
void cdc_worker_finalizer_init(cdc_worker_t *w);
cdc_err_t cdc_worker_finalizer_start(cdc_worker_t *w, cdc_error_t *e);
void cdc_worker_finalizer_stop(cdc_worker_t *w);

/* ---- floor.c -------------------------------------------------------------------------- */

/*
 * Applies the barrier's floors (truncates met in one partition, TableFloor) in every
 * owned slot that has not yet: right after cdc_worker_barrier, so at the new epoch's
 * first record boundary. A floor that cannot be applied yet is logged, counted in
 * cdc_worker_floors_waiting and tried again at the next barrier.
 */
void cdc_worker_apply_floors(cdc_worker_t *w, Cdc__TableFloor *const *floors, size_t n);

/* ---- chunks.c ------------------------------------------------------------------------- */

/* What cdc_worker_chunk() made of a record. */
typedef enum cdc_worker_chunk_result {
    CDC_WORKER_NOT_CHUNK = 0, /* an ordinary record: process it */
    CDC_WORKER_CHUNK_TAKEN,   /* a chunk taken, dropped or dead-lettered: nothing more to do
                               * (the partition's next offset is past it) */
    CDC_WORKER_CHUNK_WHOLE,   /* the last chunk: *whole is the event (offset: its first
                               * chunk's; value malloc'ed, cdc_worker_chunk_done() after) */
    CDC_WORKER_CHUNK_FAILED,  /* a transient failure (out of memory, the dead-letter
                               * topic): read again from cdc_worker_chunk_resume() */
} cdc_worker_chunk_result_t;

/*
 * Chunked events (docs/worker.md, "Large rows"): a record with a `cdc.chunk` header is
 * added to its topic partition's sequence (common/evchunk.h); a record without one
 * discards an unfinished sequence (counted, logged). A sequence above --max-record-bytes
 * is not buffered: each chunk goes to the dead-letter topic as oversized. Record thread.
 */
cdc_worker_chunk_result_t cdc_worker_chunk(cdc_worker_t *w, cdc_slot_t *s, int ti,
                                           const cdc_kafka_msg_t *m, cdc_kafka_msg_t *whole,
                                           cdc_error_t *e);
/* Frees a whole event's value (after CDC_WORKER_CHUNK_WHOLE), the event processed. */
void cdc_worker_chunk_done(cdc_worker_t *w, cdc_kafka_msg_t *whole);
/* What the heartbeat reports of a large event worked on (Heartbeat.large_event_bytes):
 * its size while the worker touched it within its grace time plus 10 s, else 0. */
uint64_t cdc_worker_large_event(cdc_worker_t *w, int64_t now_ms);
/* Where topic ti of s must be read again from so that no sequence is read in part: the
 * open sequence's first chunk, else next (a cut, a retry). */
int64_t cdc_worker_chunk_resume(const cdc_slot_t *s, size_t ti, int64_t next);
/* Forgets topic ti's open sequence: it is read again from its start (not counted). */
void cdc_worker_chunk_reset(cdc_slot_t *s, size_t ti);
/* Frees every topic's reassembly state of s (topics: how many the arrays hold). */
void cdc_worker_chunk_free(cdc_slot_t *s, size_t topics);
/* The chunk figures of /status (a JSON object, new reference). */
struct json_t *cdc_worker_chunk_status(const cdc_worker_t *w);

/* ---- dlq.c ---------------------------------------------------------------------------- */

/*
 * Sends a dead letter for message (topic, partition, offset, key, value) with the error
 * class and message; blocks with bounded backoff until Kafka acked it (a dead letter is
 * never lost, and the record's offset is only passed after that).
 */
cdc_err_t cdc_worker_dlq_send(cdc_worker_t *w, const cdc_kafka_msg_t *m, cdc_dlq_class_t cls,
                              const char *message, cdc_error_t *e);

/* Forgets the dead-letter topics made sure of (cdc_worker_data_close). */
void cdc_worker_dlq_close(cdc_worker_t *w);

/* Delivery callback of the dead-letter producer (opaque = the pending send). */
void cdc_worker_dlq_delivery(void *opaque, cdc_err_t err, const cdc_error_t *detail,
                             int32_t partition, int64_t offset, void *cb_arg);

/* ---- schemas.c ------------------------------------------------------------------------ */

/* Reads new schema documents from the registry topic (up to its end). */
cdc_err_t cdc_worker_schemas_poll(cdc_worker_t *w, cdc_error_t *e);

/* ---- session.c ------------------------------------------------------------------------ */

/*
 * Handles every coordinator message already received, without waiting. Called between
 * records by the consume loop so that a barrier is served promptly at a record boundary.
 * Returns true when the assignment changed (Assign or Abort): the caller must drop the
 * rest of its batch.
 */
bool cdc_worker_poll_control(cdc_worker_t *w);

/*
 * Sends an Ack built by the finalizer thread (ack->term/generation set by the caller),
 * unless the worker runs another term or generation by now. Thread-safe.
 */
bool cdc_worker_send_ack(cdc_worker_t *w, Cdc__Ack *ack);

/*
 * Acts on one coordinator message: Assign (restore + seek), Barrier (cut the epoch),
 * Abort (drop staged data), Committed, Reject (register again). Messages of an older
 * term or generation than the assignment we run are ignored and counted. Record thread.
 */
void cdc_worker_handle(cdc_worker_t *w, const Cdc__Envelope *env);

/* Finds the leader (--coordinator, else the leader key in etcd) and dials it when it
 * changed (then registers afresh). */
void cdc_worker_find_leader(cdc_worker_t *w);

/* What the main loop remembers about the coordinator link between iterations. */
typedef struct cdc_link_watch {
    int64_t down_since_ms; /* when the link went down, 0 = up */
    int64_t waiting_ms;    /* since when we wait for an Assign (Register sent, or Abort) */
    bool was_assigned;
} cdc_link_watch_t;

/*
 * Keeps the session with the coordinator alive at now (every main loop iteration, with
 * link_lock held): replaces a link that stayed down or whose heartbeats keep failing,
 * registers when not registered, and again after waiting too long for an assignment.
 */
void cdc_worker_watch_link(cdc_worker_t *w, cdc_link_watch_t *lw, int64_t now);

/* ---- status.c ------------------------------------------------------------------------- */

/* Rebuilds /status: the worker's link, its partitions and its column masking (record
 * thread). */
void cdc_worker_publish_status(cdc_worker_t *w);

/* ---- session.c: the main loop --------------------------------------------------------- */

/* Runs the worker until *stop is set. Returns CDC_OK on a clean stop, CDC_ERR_CONFIG
 * when a record met a configuration that cannot apply to it (a masking policy that
 * does not fit its table's schema: the worker stops rather than write it wrong). */
cdc_err_t cdc_worker_run(cdc_worker_t *w, cdc_error_t *e);

#endif
