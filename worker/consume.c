/*
 * The worker's data path: Kafka consumption of the owned partition slots, the record
 * path (decode -> dead letter | dedup -> TOAST repair -> stage), the schema registry
 * topic, assignment (state restore + seek), backpressure, and the barrier: the record
 * thread cuts the epoch (next offsets, stage, state store held at the record boundary)
 * and the finalizer thread writes the files, checkpoints the state and sends the Ack,
 * while the record thread keeps consuming the next epoch.
 */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/cdcschema.h"
#include "common/iceberg/parquet.h"
#include "common/iceberg/schema.h"
#include "common/log.h"
#include "common/state.h"
#include "worker/toast.h"
#include "worker/worker.h"

#define BATCH_MAX 2048
#define STORAGE_RETRIES 3
#define SCHEMA_READ_TIMEOUT_MS 10000

static char *join(const char *a, const char *b)
{
    char *out;
    return asprintf(&out, "%s/%s", a, b) < 0 ? NULL : out;
}

static int topic_index(const cdc_worker_t *w, const char *topic)
{
    for (size_t i = 0; i < w->ntopics; i++)
        if (strcmp(w->topics[i], topic) == 0)
            return (int)i;
    return -1;
}

static cdc_table_metrics_t *table_metrics_find(cdc_worker_t *w, const char *ns, const char *table)
{
    char name[256];
    snprintf(name, sizeof(name), "%s.%s", ns, table);
    for (size_t i = 0; i < w->ntmetrics; i++)
        if (strcmp(w->tmetrics[i].name, name) == 0)
            return &w->tmetrics[i];
    cdc_table_metrics_t *n = realloc(w->tmetrics, (w->ntmetrics + 1) * sizeof(*n));
    if (n == NULL)
        return NULL;
    w->tmetrics = n;
    n = &w->tmetrics[w->ntmetrics++];
    memset(n, 0, sizeof(*n));
    snprintf(n->name, sizeof(n->name), "%s", name);
    const char *labels[] = {"table", name, NULL};
    n->in = cdc_metrics_counter(w->metrics, "cdc_worker_records_in_total",
                                "Decoded change events per source table.", labels);
    n->out = cdc_metrics_counter(w->metrics, "cdc_worker_records_out_total",
                                 "Changes staged for Iceberg per source table.", labels);
    n->dups = cdc_metrics_counter(w->metrics, "cdc_worker_duplicates_dropped_total",
                                  "Replayed or out-of-order duplicate changes dropped.", labels);
    return n;
}

/* The series of a record's table: the same schema as the last record's in the common
 * case (no formatting and string compares per record). */
static cdc_table_metrics_t *table_metrics(cdc_worker_t *w, const cdc_source_schema_t *schema)
{
    if (schema == w->tm_schema && w->tm_index < w->ntmetrics)
        return &w->tmetrics[w->tm_index];
    cdc_table_metrics_t *tm = table_metrics_find(w, schema->ns, schema->table);
    if (tm != NULL) {
        w->tm_schema = schema;
        w->tm_index = (size_t)(tm - w->tmetrics);
    }
    return tm;
}

static void *finalizer_main(void *arg);
static void finalizer_stop(cdc_worker_t *w);

/* ---- open / close ------------------------------------------------------------------- */

static cdc_err_t split_topics(cdc_worker_t *w, cdc_error_t *e)
{
    const char *list = w->cfg.topics && w->cfg.topics[0] ? w->cfg.topics : w->cfg.tables;
    bool explicit_topics = w->cfg.topics && w->cfg.topics[0];
    char *copy, *save = NULL;
    if (list == NULL || list[0] == '\0')
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "option --tables (or --topics) is required: name the source tables, "
                             "e.g. --tables public.orders,public.items");
    copy = strdup(list);
    for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        if (w->ntopics == CDC_WORKER_MAX_TOPICS) {
            free(copy);
            return cdc_error_set(e, CDC_ERR_CONFIG, "option --tables: more than %d tables",
                                 CDC_WORKER_MAX_TOPICS);
        }
        if (explicit_topics)
            w->topics[w->ntopics] = strdup(tok);
        else if (asprintf(&w->topics[w->ntopics], "%s.%s%s", w->cfg.topic_prefix,
                          strchr(tok, '.') ? "" : "public.", tok) < 0)
            w->topics[w->ntopics] = NULL;
        if (w->topics[w->ntopics] == NULL) {
            free(copy);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        w->ntopics++;
    }
    free(copy);
    snprintf(w->schema_topic, sizeof(w->schema_topic), "%s._schemas", w->cfg.topic_prefix);
    return CDC_OK;
}

cdc_err_t cdc_worker_data_open(cdc_worker_t *w, cdc_error_t *e)
{
    cdc_err_t rc;
    cdc_storage_config_t sc = {0};
    cdc_kafka_consumer_config_t cc = {0};
    cdc_kafka_producer_config_t pc = {0};
    char client[300];

    pthread_mutex_init(&w->fin_lock, NULL);
    pthread_cond_init(&w->fin_cond, NULL);
    if ((rc = split_topics(w, e)) != CDC_OK)
        return rc;
    if (mkdir(w->cfg.state_dir, 0755) != 0 && errno != EEXIST)
        return cdc_error_set(e, CDC_ERR_CONFIG, "option --state-dir: could not create \"%s\": %s",
                             w->cfg.state_dir, strerror(errno));
    sc.endpoint = w->cfg.s3_endpoint;
    sc.region = w->cfg.s3_region;
    sc.access_key = w->cfg.s3_access_key;
    sc.secret_key = w->cfg.s3_secret_key;
    sc.path_style = w->cfg.s3_path_style;
    if ((rc = cdc_storage_open(w->cfg.warehouse, &sc, &w->storage, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --warehouse \"%s\"", w->cfg.warehouse);
    w->catalog = cdc_catalog_new();
    if (w->catalog == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    w->dopts.max_record_bytes = (size_t)w->cfg.max_record_bytes;
    w->dopts.toast_placeholder = w->cfg.toast_placeholder;
    w->dopts.default_ns = "public";

    snprintf(client, sizeof(client), "cdc-worker-%s", w->cfg.id);
    cc.bootstrap = w->cfg.kafka;
    cc.client_id = client;
    cc.group_id = client;
    cc.properties = w->cfg.kafka_properties;
    if ((rc = cdc_kafka_consumer_new(&cc, &w->consumer, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --kafka");
    if ((rc = cdc_kafka_consumer_new(&cc, &w->schema_consumer, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --kafka");
    pc.bootstrap = w->cfg.kafka;
    pc.client_id = client;
    pc.properties = w->cfg.kafka_properties;
    pc.linger_ms = 0;
    pc.on_delivery = cdc_worker_dlq_delivery;
    if ((rc = cdc_kafka_producer_new(&pc, &w->dlq, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --kafka");
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        w->slots[p].partition = (uint32_t)p;
    if (pthread_create(&w->fin_thread, NULL, finalizer_main, w) != 0)
        return cdc_error_set(e, CDC_ERR_INTERNAL, "could not start the finalizer thread");
    w->fin_running = true;
    return CDC_OK;
}

static void slot_release(cdc_worker_t *w, cdc_slot_t *s, bool remove_local)
{
    cdc_error_t e;
    cdc_dedup_close(s->dedup);
    s->dedup = NULL;
    if (remove_local && s->db_dir != NULL)
        cdc_state_destroy(s->db_dir, &e);
    free(s->db_dir);
    s->db_dir = NULL;
    cdc_stage_free(&s->stage);
    if (remove_local && s->ckpt_ready) {
        /* Forget local copies; the shared store keeps what checkpoints need. */
        for (size_t i = 0; i < s->ckpt.nentries; i++)
            if (s->ckpt.entries[i].local_dir != NULL)
                cdc_state_destroy(s->ckpt.entries[i].local_dir, &e);
        cdc_ckpt_free(&s->ckpt);
        s->ckpt_ready = false;
    }
    s->owned = false;
    free(s->last_handle);
    s->last_handle = NULL;
    (void)w;
}

void cdc_worker_data_close(cdc_worker_t *w)
{
    finalizer_stop(w);
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        slot_release(w, &w->slots[p], false);
        if (w->slots[p].ckpt_ready)
            cdc_ckpt_free(&w->slots[p].ckpt);
    }
    if (w->dlq != NULL) {
        cdc_error_t e;
        cdc_kafka_producer_flush(w->dlq, 5000, &e);
    }
    cdc_kafka_producer_free(w->dlq);
    cdc_kafka_consumer_free(w->consumer);
    cdc_kafka_consumer_free(w->schema_consumer);
    cdc_catalog_free(w->catalog);
    cdc_storage_close(w->storage);
    cdc_layouts_free(&w->layouts);
    for (size_t i = 0; i < w->ntopics; i++)
        free(w->topics[i]);
    free(w->tmetrics);
}

/* ---- schema registry topic ---------------------------------------------------------- */

/* Schema-topic partitions whose fetching stopped on an error (as for the data topics,
 * restart_failed() below) are assigned again from the next offset to read, all of them. */
static void restart_failed_schemas(cdc_worker_t *w)
{
    char topics[16][256];
    int32_t parts[16];
    size_t n;
    while ((n = cdc_kafka_consumer_failed(w->schema_consumer, topics, parts, 16)) > 0)
        for (size_t i = 0; i < n; i++) {
            cdc_error_t e2;
            int32_t p = parts[i];
            if (p < 0 || p >= w->schema_parts)
                continue;
            if (cdc_kafka_consumer_restart(w->schema_consumer, w->schema_topic, p,
                                           w->schema_next[p], &e2) != CDC_OK) {
                cdc_log_warn("schema topic \"%s\" partition %d: could not assign it again: %s",
                             w->schema_topic, p, e2.msg);
                continue;
            }
            cdc_metrics_counter_inc(w->m_fetch_restarts);
            cdc_log_warn("schema topic \"%s\" partition %d: fetching had stopped on an error; "
                         "assigned again from offset %" PRId64,
                         w->schema_topic, p, w->schema_next[p]);
        }
}

/*
 * Reads the schema topic up to its end as of now: the high watermark of each partition,
 * asked from the broker, not "until a poll comes back empty", which says nothing while
 * the first fetch is still on its way. An event whose version is unknown after this
 * names a version that was never registered (the capture registers before producing).
 */
cdc_err_t cdc_worker_schemas_poll(cdc_worker_t *w, cdc_error_t *e)
{
    cdc_kafka_msg_t msgs[256];
    int64_t high[CDC_WORKER_SCHEMA_PARTITIONS];
    int64_t deadline = cdc_worker_mono_ms() + SCHEMA_READ_TIMEOUT_MS;
    size_t n;
    cdc_err_t rc;

    if (w->schema_parts == 0) {
        int32_t parts = 0;
        rc = cdc_kafka_consumer_partitions(w->schema_consumer, w->schema_topic, &parts, 2000, e);
        if (rc == CDC_ERR_NOT_FOUND || (rc == CDC_OK && parts <= 0))
            return CDC_OK; /* nothing registered yet */
        if (rc != CDC_OK)
            return rc;
        if (parts > CDC_WORKER_SCHEMA_PARTITIONS)
            parts = CDC_WORKER_SCHEMA_PARTITIONS;
        cdc_kafka_tp_t tps[CDC_WORKER_SCHEMA_PARTITIONS];
        for (int32_t i = 0; i < parts; i++) {
            tps[i] = (cdc_kafka_tp_t){w->schema_topic, i, CDC_KAFKA_OFFSET_BEGINNING};
            w->schema_next[i] = 0;
        }
        if ((rc = cdc_kafka_consumer_assign(w->schema_consumer, tps, (size_t)parts, e)) != CDC_OK)
            return rc;
        w->schema_parts = parts;
    }
    rc = cdc_kafka_consumer_end_offsets(w->schema_consumer, w->schema_topic, w->schema_parts, high,
                                        2000, e);
    if (rc != CDC_OK)
        return rc;
    for (;;) {
        bool done = true;
        restart_failed_schemas(w);
        for (int32_t i = 0; i < w->schema_parts; i++)
            done = done && w->schema_next[i] >= high[i];
        if (done)
            return CDC_OK;
        int64_t left = deadline - cdc_worker_mono_ms();
        if (left <= 0)
            return cdc_error_set_retriable(e, CDC_ERR_TIMEOUT, true,
                                           "schema topic \"%s\" not read to its end within %d ms",
                                           w->schema_topic, SCHEMA_READ_TIMEOUT_MS);
        rc = cdc_kafka_consume_batch(w->schema_consumer, msgs, 256, &n,
                                     left < 100 ? (int)left : 100, e);
        for (size_t i = 0; i < n; i++) {
            char topic[256];
            int64_t version;
            cdc_error_t e2;
            if (msgs[i].partition >= 0 && msgs[i].partition < w->schema_parts &&
                msgs[i].offset + 1 > w->schema_next[msgs[i].partition])
                w->schema_next[msgs[i].partition] = msgs[i].offset + 1;
            if (msgs[i].value == NULL || msgs[i].key == NULL ||
                !cdc_schema_record_key_parse(msgs[i].key, msgs[i].key_len, topic, sizeof(topic),
                                             &version))
                continue;
            if (cdc_catalog_register_json(w->catalog, topic, version, msgs[i].value,
                                          msgs[i].value_len, &e2) != CDC_OK)
                cdc_log_warn("ignoring schema document \"%s/%" PRId64 "\": %s", topic, version,
                             e2.msg);
            else
                cdc_log_debug("registered schema \"%s\" version %" PRId64, topic, version);
        }
        cdc_kafka_msgs_release(msgs, n);
        if (rc != CDC_OK && rc != CDC_ERR_TIMEOUT)
            return rc;
    }
}

/* ---- assignment ---------------------------------------------------------------------- */

/* The Parquet codec of the epoch's files (--compression; zstd by default). */
static int stage_codec(const cdc_worker_t *w)
{
    cdc_pq_codec_t codec = CDC_PQ_CODEC_ZSTD;
    if (w->cfg.compression != NULL)
        cdc_pq_codec_parse(w->cfg.compression, &codec);
    return (int)codec;
}

static cdc_err_t slot_open(cdc_worker_t *w, cdc_slot_t *s, const Cdc__PartitionState *ps,
                           cdc_error_t *e)
{
    char name[64], rnd[32];
    char *root;
    cdc_err_t rc;
    bool reused = false;

    snprintf(name, sizeof(name), "p%u", s->partition);
    root = join(w->cfg.state_dir, name);
    if (root == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    /* The store restarts from the checkpoint: drop the old one and the stage. */
    cdc_dedup_close(s->dedup);
    s->dedup = NULL;
    if (s->db_dir != NULL) {
        cdc_state_destroy(s->db_dir, e);
        free(s->db_dir);
        s->db_dir = NULL;
    }
    cdc_stage_free(&s->stage);
    cdc_stage_init(&s->stage, s->partition, 0);
    cdc_stage_set_encoding(&s->stage, stage_codec(w), CDC_STAGE_ENCODE_ROWS);
    if (!s->ckpt_ready) {
        /* Whatever an earlier process left here is not trusted: start clean. */
        cdc_state_destroy(root, e);
        rc = cdc_ckpt_init(&s->ckpt, w->storage, w->cfg.warehouse, w->cfg.job, s->partition, root,
                           e);
        if (rc != CDC_OK) {
            free(root);
            return rc;
        }
        s->ckpt_ready = true;
    }
    snprintf(rnd, sizeof(rnd), "db-%" PRIu64 "-%ld", w->generation, (long)time(NULL));
    s->db_dir = join(root, rnd);
    free(root);
    if (s->db_dir == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cdc_state_destroy(s->db_dir, e);
    free(s->last_handle);
    s->last_handle = NULL;
    if (ps->state_handle != NULL && ps->state_handle[0] != '\0') {
        for (int attempt = 0;; attempt++) {
            rc = cdc_ckpt_restore(&s->ckpt, ps->state_handle, s->db_dir, &reused, e);
            if (rc == CDC_OK || attempt >= STORAGE_RETRIES || !e->retriable)
                break;
            cdc_state_destroy(s->db_dir, e);
        }
        if (rc != CDC_OK)
            return cdc_error_prefix(e, "could not restore partition %u", s->partition);
        s->last_handle = strdup(ps->state_handle);
        cdc_log_info("partition %u: state restored from %s checkpoint %s", s->partition,
                     reused ? "the local copy of" : "shared", ps->state_handle);
    } else {
        /* No checkpoint yet: an empty store; forget what this worker had. */
        cdc_ckpt_drop_after(&s->ckpt, 0);
        cdc_ckpt_new_lineage(&s->ckpt);
    }
    rc = cdc_dedup_open(s->db_dir, (int)(w->cfg.dedup_ttl_ms / 1000), &s->dedup, e);
    if (rc != CDC_OK)
        return rc;
    for (size_t t = 0; t < w->ntopics; t++) {
        s->restart_at[t] = 0;
        s->progress_ms[t] = 0; /* the watchdog starts over */
        s->stalled_since[t] = 0;
        s->watchdog_gave_up[t] = false;
        s->next_offset[t] = CDC_KAFKA_OFFSET_BEGINNING;
        for (size_t k = 0; k < ps->n_offsets; k++)
            if (ps->offsets[k]->topic && strcmp(ps->offsets[k]->topic, w->topics[t]) == 0)
                s->next_offset[t] = ps->offsets[k]->next_offset;
    }
    s->owned = true;
    s->dirty = false;
    if (s->lag == NULL) {
        const char *labels[] = {"partition", name, NULL};
        s->lag =
            cdc_metrics_gauge(w->metrics, "cdc_worker_partition_lag_records",
                              "Records behind the high watermark, per partition slot.", labels);
        s->state_bytes =
            cdc_metrics_gauge(w->metrics, "cdc_worker_state_bytes",
                              "Size of the partition's state store (disk + memory).", labels);
    }
    return CDC_OK;
}

/* The partition count of topic ti, asked from the broker (waiting up to wait_ms) until it
 * answered once; 0 when unknown. */
static int32_t topic_partitions_wait(cdc_worker_t *w, int ti, int wait_ms)
{
    int32_t n = 0;
    cdc_error_t e;
    if (ti < 0 || (size_t)ti >= w->ntopics)
        return 0;
    if (w->topic_parts[ti] > 0)
        return w->topic_parts[ti];
    if (cdc_kafka_consumer_partitions(w->consumer, w->topics[ti], &n, wait_ms, &e) != CDC_OK)
        return 0;
    w->topic_parts[ti] = n;
    return n;
}

/* A topic with more partitions than the job's slots has partitions no worker reads: said
 * once per topic, loudly (the capture refuses to create such topics; others may). */
static void check_topic_partitions(cdc_worker_t *w)
{
    for (size_t t = 0; t < w->ntopics; t++) {
        /* (briefly: a topic the capture has not created yet is asked again next time) */
        int32_t n = topic_partitions_wait(w, (int)t, 200);
        if (n > CDC_WORKER_PARTITIONS && !w->topic_parts_warned[t]) {
            w->topic_parts_warned[t] = true;
            cdc_log_error("topic \"%s\" has %d partitions, but the job reads %d (its partition "
                          "slots): the changes in partitions %d to %d are never read",
                          w->topics[t], (int)n, CDC_WORKER_PARTITIONS, CDC_WORKER_PARTITIONS,
                          (int)n - 1);
        }
    }
}

cdc_err_t cdc_worker_assign(cdc_worker_t *w, const Cdc__Assign *a, cdc_error_t *e)
{
    bool want[CDC_WORKER_PARTITIONS] = {false};
    cdc_kafka_tp_t *tps;
    size_t ntp = 0;
    cdc_err_t rc;

    for (size_t i = 0; i < a->n_partitions; i++)
        if (a->partitions[i]->partition < CDC_WORKER_PARTITIONS)
            want[a->partitions[i]->partition] = true;
    /* Stop fetching before touching the stores; an epoch still being finished belongs
     * to the old assignment: drop it. */
    cdc_kafka_consumer_assign(w->consumer, NULL, 0, e);
    cdc_worker_finalizer_wait(w, true);
    w->paused = false;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        if (w->slots[p].owned && !want[p])
            slot_release(w, &w->slots[p], true);
    for (size_t i = 0; i < a->n_partitions; i++) {
        const Cdc__PartitionState *ps = a->partitions[i];
        if (ps->partition >= CDC_WORKER_PARTITIONS)
            continue;
        rc = slot_open(w, &w->slots[ps->partition], ps, e);
        if (rc != CDC_OK)
            return rc;
    }
    tps = calloc(CDC_WORKER_PARTITIONS * w->ntopics + 1, sizeof(*tps));
    if (tps == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        for (size_t t = 0; w->slots[p].owned && t < w->ntopics; t++)
            tps[ntp++] = (cdc_kafka_tp_t){w->topics[t], p, w->slots[p].next_offset[t]};
    rc = cdc_kafka_consumer_assign(w->consumer, tps, ntp, e);
    free(tps);
    if (rc == CDC_OK)
        check_topic_partitions(w);
    return rc;
}

void cdc_worker_suspend(cdc_worker_t *w)
{
    cdc_error_t e;
    cdc_kafka_consumer_assign(w->consumer, NULL, 0, &e);
    cdc_worker_finalizer_wait(w, true);
    w->paused = false;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        if (w->slots[p].owned)
            cdc_stage_reset(&w->slots[p].stage, 0);
}

/* ---- the record path ----------------------------------------------------------------- */

static void count_dlq(cdc_worker_t *w, cdc_dlq_class_t cls)
{
    if (w->m_dlq[cls] == NULL) {
        const char *labels[] = {"class", cdc_dlq_class_name(cls), NULL};
        w->m_dlq[cls] =
            cdc_metrics_counter(w->metrics, "cdc_worker_dlq_records_total",
                                "Records sent to the dead-letter topic, by class.", labels);
    }
    cdc_metrics_counter_inc(w->m_dlq[cls]);
}

static int64_t header_version(const void *arg)
{
    const cdc_kafka_msg_t *m = arg;
    cdc_kafka_header_t h;
    char buf[32];
    if (!cdc_kafka_msg_header(m, "cdc.schema", &h) || h.value == NULL || h.value_len == 0 ||
        h.value_len >= sizeof(buf))
        return -1;
    memcpy(buf, h.value, h.value_len);
    buf[h.value_len] = '\0';
    char *end;
    long long v = strtoll(buf, &end, 10);
    return *end == '\0' && v > 0 ? v : -1;
}

/* Processes one message; CDC_OK unless an internal/transient failure stops the batch. */
static cdc_err_t process(cdc_worker_t *w, cdc_slot_t *s, int ti, const cdc_kafka_msg_t *m,
                         cdc_error_t *e)
{
    cdc_decode_input_t in = {m->topic, m->partition, m->offset, m->key,         m->key_len,
                             m->value, m->value_len, -1,        header_version, m};
    cdc_change_t c;
    cdc_decode_error_t de;
    cdc_err_t rc;
    cdc_dedup_verdict_t verdict;
    uint8_t *img = NULL;
    size_t img_len = 0;
    const char *bad_col = NULL;

    rc = cdc_decode(w->catalog, &w->dopts, &in, &c, &de);
    if (rc == CDC_ERR_INVALID && de.cls == CDC_DLQ_UNKNOWN_SCHEMA && de.schema_version > 0) {
        /* The capture registers a version before using it: catch up and retry once. */
        cdc_error_t e2;
        if (cdc_worker_schemas_poll(w, &e2) != CDC_OK)
            return cdc_error_set_retriable(e, CDC_ERR_UNAVAILABLE, true,
                                           "could not read schema topic \"%s\": %s",
                                           w->schema_topic, e2.msg);
        rc = cdc_decode(w->catalog, &w->dopts, &in, &c, &de);
    }
    if (rc == CDC_ERR_INVALID) {
        rc = cdc_worker_dlq_send(w, m, de.cls, de.msg, e);
        if (rc != CDC_OK)
            return rc;
        count_dlq(w, de.cls);
        goto advance;
    }
    if (rc != CDC_OK)
        return cdc_error_set(e, rc, "could not decode record %s[%d]@%" PRId64, m->topic,
                             m->partition, m->offset);
    if (c.tombstone) {
        cdc_metrics_counter_inc(w->m_tombstones);
        cdc_change_clear(&c);
        goto advance;
    }
    cdc_table_metrics_t *tm = table_metrics(w, c.schema);
    if (tm != NULL)
        cdc_metrics_counter_inc(tm->in);
    rc = cdc_dedup_check(s->dedup, &c, &verdict, &img, &img_len, e);
    if (rc != CDC_OK)
        goto fail;
    if (verdict == CDC_DEDUP_BEFORE_FLOOR) {
        /* before its table's floor, reached late: the changelog's alone (dedup.h) */
        c.changelog_only = true;
        cdc_metrics_counter_inc(w->m_before_floor);
    } else if (verdict != CDC_DEDUP_NEW) {
        if (tm != NULL)
            cdc_metrics_counter_inc(tm->dups);
        free(img);
        cdc_change_clear(&c);
        goto advance;
    }
    if (cdc_toast_needed(&c) && cdc_toast_repair(&c, img, img_len, &bad_col) != CDC_OK) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "unchanged TOAST column \"%s\" has no earlier value in state for this row",
                 bad_col ? bad_col : "?");
        free(img);
        cdc_change_clear(&c);
        rc = cdc_worker_dlq_send(w, m, CDC_DLQ_UNRESOLVED_TOAST, msg, e);
        if (rc != CDC_OK)
            return rc;
        count_dlq(w, CDC_DLQ_UNRESOLVED_TOAST);
        goto advance;
    }
    /* Partitioned and sorted tables (layout.h): the row's partition is fixed now, and kept
     * in state with the row; the partition the row had before is read from state. */
    const cdc_ice_partition_spec_t *ms =
        cdc_layouts_spec(&w->layouts, c.schema->ns, c.schema->table, false);
    cdc_stage_parts_t parts = {
        NULL,
        0,
        NULL,
        0,
        cdc_layouts_spec(&w->layouts, c.schema->ns, c.schema->table, true),
        cdc_layouts_order(&w->layouts, c.schema->ns, c.schema->table, false),
        cdc_layouts_order(&w->layouts, c.schema->ns, c.schema->table, true),
    };
    uint8_t *mkey = NULL, *okey = NULL;
    size_t mlen = 0, olen = 0;
    rc = CDC_OK;
    if (ms != NULL && c.op != CDC_OP_DELETE &&
        (rc = cdc_stage_part_key(ms, &c.after, NULL, &mkey, &mlen, e)) == CDC_ERR_INVALID) {
        /* a value the spec cannot take: the row goes unpartitioned (spec 0), as correct */
        cdc_log_warn("%s[%d]@%" PRId64 ": %s; the row is written unpartitioned", m->topic,
                     m->partition, m->offset, e->msg);
        rc = CDC_OK;
    }
    if (rc == CDC_OK && img != NULL && !cdc_dedup_image_part(img, img_len, &okey, &olen))
        rc = cdc_error_set(e, CDC_ERR_CORRUPT, "corrupt row image in state for %s[%d]@%" PRId64,
                           m->topic, m->partition, m->offset);
    parts.mirror = mkey;
    parts.mirror_len = mlen;
    parts.old = okey;
    parts.old_len = olen;
    /* Record in state first: the stage moves the row images out of c. */
    if (rc == CDC_OK)
        rc = cdc_dedup_record(s->dedup, &c, mkey, mlen, e);
    if (rc == CDC_OK)
        rc = cdc_stage_add(&s->stage, &c, img != NULL && !c.changelog_only, &parts, e);
    free(mkey);
    free(okey);
    free(img);
    if (rc != CDC_OK)
        goto fail;
    if (tm != NULL)
        cdc_metrics_counter_inc(tm->out);
    cdc_change_clear(&c);
    s->dirty = true;
advance:
    s->next_offset[ti] = m->offset + 1;
    return CDC_OK;
fail:
    cdc_change_clear(&c);
    return rc;
}

static size_t staged_bytes(const cdc_worker_t *w)
{
    size_t n = 0;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        if (w->slots[p].owned)
            n += w->slots[p].stage.bytes;
    return n;
}

static void set_paused(cdc_worker_t *w, bool pause)
{
    cdc_error_t e;
    if (w->paused == pause)
        return;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        for (size_t t = 0; w->slots[p].owned && t < w->ntopics; t++) {
            if (pause)
                cdc_kafka_consumer_pause(w->consumer, w->topics[t], p, &e);
            else
                cdc_kafka_consumer_resume(w->consumer, w->topics[t], p, &e);
        }
    w->paused = pause;
    if (pause)
        cdc_log_info("staged data passed --max-staged-bytes (%" PRId64
                     "): fetching paused until the next barrier",
                     w->cfg.max_staged_bytes);
}

/* How long a partition whose fetching stopped on an error waits before it is assigned
 * again from its next offset. */
#define RESTART_DELAY_MS 1000

/*
 * librdkafka stops fetching a partition after a non-retriable error, e.g. when the
 * lookup of a logical start offset (the beginning of a partition with no checkpoint)
 * failed on a broker that was busy or changing leaders, and this consumer does not let
 * it reset offsets on its own (auto.offset.reset=error); nor can it be seeked any more.
 * Such a partition is assigned again from its next offset after RESTART_DELAY_MS, as
 * often as it takes: a transient failure recovers, and a lasting one (a checkpointed
 * offset that retention deleted) keeps warning while the partition's lag shows in
 * /status, without skipping anything.
 */
static void restart_failed(cdc_worker_t *w)
{
    char topics[16][256];
    int32_t parts[16];
    int64_t now = cdc_worker_mono_ms();
    size_t n;
    /* every partition reported, 16 at a time */
    while ((n = cdc_kafka_consumer_failed(w->consumer, topics, parts, 16)) > 0) {
        for (size_t i = 0; i < n; i++) {
            int ti = topic_index(w, topics[i]);
            if (ti >= 0 && parts[i] >= 0 && parts[i] < CDC_WORKER_PARTITIONS &&
                w->slots[parts[i]].owned && w->slots[parts[i]].restart_at[ti] == 0)
                w->slots[parts[i]].restart_at[ti] = now + RESTART_DELAY_MS;
        }
    }
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        for (size_t t = 0; s->owned && t < w->ntopics; t++) {
            cdc_error_t e2;
            if (s->restart_at[t] == 0 || now < s->restart_at[t])
                continue;
            s->restart_at[t] = 0;
            if (cdc_kafka_consumer_restart(w->consumer, w->topics[t], p, s->next_offset[t], &e2) !=
                CDC_OK) {
                s->restart_at[t] = now + RESTART_DELAY_MS;
                cdc_log_warn("partition %d topic \"%s\": could not assign it again: %s", p,
                             w->topics[t], e2.msg);
            } else {
                /* (a partition paused by whatever stalled it fetches again; a pause for
                 * --max-staged-bytes is applied again by set_paused at its next call) */
                if (!w->paused)
                    cdc_kafka_consumer_resume(w->consumer, w->topics[t], p, &e2);
                cdc_metrics_counter_inc(w->m_fetch_restarts);
                cdc_log_warn("partition %d topic \"%s\": fetching had stopped; assigned again "
                             "from offset %" PRId64,
                             p, w->topics[t], s->next_offset[t]);
            }
        }
    }
}

/*
 * The first record of a partition read from the beginning (nothing of it checkpointed
 * yet) is past offset 0: offsets 0 to first-1 are not in Kafka any more. The broker
 * deleted them before this job read them (retention; the development broker keeps only
 * 5 MiB per partition, see docs/worker.md, Known issues) or compaction did. A logical
 * start offset follows the log start without an error, and neither the lag nor the
 * progress watchdog can see records below it: this is their only trace.
 */
static void note_missing_start(cdc_worker_t *w, const cdc_kafka_msg_t *m)
{
    cdc_metrics_counter_add(w->m_missing, (double)m->offset);
    cdc_log_warn("partition %d topic \"%s\": read from the beginning, its first record is at "
                 "offset %" PRId64 ": offsets 0 to %" PRId64
                 " are not in Kafka (deleted before they were read)",
                 m->partition, m->topic, m->offset, m->offset - 1);
}

/*
 * Testing only: with CDC_WORKER_FAULT=stall-fetch[:N] in the environment, the partition
 * of the N-th record processed (default 1; or the first after it with more records of its
 * partition in the batch) stops fetching after it, silently, once, the rest of the batch
 * of that partition dropped: a stall only the progress watchdog can see
 * (tests/integration/test_worker.c). True when it just did.
 */
static bool fault_stall(cdc_worker_t *w, const cdc_kafka_msg_t *msgs, size_t i, size_t n)
{
    const cdc_kafka_msg_t *m = &msgs[i];
    bool behind = false;
    static long at = -1; /* the record it stalls after; 0 = no fault (read once) */
    static long seen;
    cdc_error_t e;
    if (at == 0)
        return false;
    if (at < 0) {
        const char *f = getenv("CDC_WORKER_FAULT");
        at = f == NULL || strncmp(f, "stall-fetch", 11) != 0 ? 0 : f[11] == ':' ? atol(f + 12) : 1;
        if (at <= 0) {
            at = 0;
            return false;
        }
    }
    for (size_t k = i + 1; k < n && !behind; k++) /* records left behind it in this batch */
        behind = msgs[k].partition == m->partition && strcmp(msgs[k].topic, m->topic) == 0;
    if (++seen < at || !behind)
        return false;
    at = 0; /* once */
    cdc_kafka_consumer_pause(w->consumer, m->topic, m->partition, &e);
    cdc_log_info(
        "fault stall-fetch: partition %d topic \"%s\" stops fetching after offset %" PRId64,
        m->partition, m->topic, m->offset);
    return true;
}

cdc_err_t cdc_worker_consume(cdc_worker_t *w, int timeout_ms, cdc_error_t *e)
{
    static cdc_kafka_msg_t msgs[BATCH_MAX];
    size_t n = 0, max = (size_t)w->cfg.batch_size;
    cdc_err_t rc, prc = CDC_OK;
    static int64_t last_err_log;

    if (max == 0 || max > BATCH_MAX)
        max = BATCH_MAX;
    rc = cdc_kafka_consume_batch(w->consumer, msgs, max, &n, timeout_ms, e);
    int64_t next_poll = cdc_worker_mono_ms() + 5;
    for (size_t i = 0; i < n; i++) {
        const cdc_kafka_msg_t *m = &msgs[i];
        int ti = topic_index(w, m->topic);
        cdc_slot_t *s;
        /* Serve barriers between records, not only between batches. */
        if ((i & 31) == 0 && cdc_worker_mono_ms() >= next_poll) {
            if (cdc_worker_poll_control(w) || !w->assigned)
                break; /* reassigned or aborted: the rest of the batch is void */
            next_poll = cdc_worker_mono_ms() + 5;
        }
        if (ti < 0 || m->partition < 0 || m->partition >= CDC_WORKER_PARTITIONS)
            continue;
        s = &w->slots[m->partition];
        if (!s->owned || (s->next_offset[ti] >= 0 && m->offset < s->next_offset[ti]))
            continue; /* stale fetch from before a seek */
        if (s->next_offset[ti] == CDC_KAFKA_OFFSET_BEGINNING && m->offset > 0)
            note_missing_start(w, m);
        prc = process(w, s, ti, m, e);
        if (prc == CDC_OK && fault_stall(w, msgs, i, n)) {
            for (size_t k = i + 1; k < n; k++) /* dropped, like a fetch that stopped */
                if (msgs[k].partition == m->partition && strcmp(msgs[k].topic, m->topic) == 0)
                    msgs[k].partition = -1;
            continue;
        }
        if (prc != CDC_OK) {
            /* Transient failure: rewind this partition to the failed record and retry. */
            cdc_error_t e2;
            cdc_kafka_consumer_seek(w->consumer, m->topic, m->partition, m->offset, 1000, &e2);
            for (size_t k = i + 1; k < n; k++)
                if (msgs[k].partition == m->partition && strcmp(msgs[k].topic, m->topic) == 0)
                    msgs[k].partition = -1; /* skip the rest of it in this batch */
            cdc_log_warn("partition %d: %s; retrying", m->partition, e->msg);
        }
    }
    cdc_kafka_msgs_release(msgs, n);
    /* One state write per partition and batch (dedup keeps them pending until here). */
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_error_t e2;
        if (w->slots[p].owned && w->slots[p].dedup != NULL &&
            cdc_dedup_flush(w->slots[p].dedup, &e2) != CDC_OK)
            cdc_log_warn("partition %d: %s; retrying at the next batch", p, e2.msg);
    }
    if (!w->paused && w->cfg.max_staged_bytes > 0 &&
        staged_bytes(w) > (size_t)w->cfg.max_staged_bytes)
        set_paused(w, true);
    restart_failed(w);
    if (rc != CDC_OK && rc != CDC_ERR_TIMEOUT) {
        int64_t now = cdc_worker_mono_ms();
        if (now - last_err_log > 5000) {
            cdc_log_warn("kafka consumer: %s", e->msg);
            last_err_log = now;
        }
        return CDC_OK; /* unknown topics etc.: keep going; the capture creates them */
    }
    return prc == CDC_OK ? CDC_OK : prc;
}

/* ---- snapshot ---------------------------------------------------------------------- */

static void free_staged(Cdc__StagedFile *f)
{
    if (f == NULL)
        return;
    free(f->table);
    free(f->path);
    free(f->equality_ids);
    for (size_t i = 0; i < f->n_stats; i++) {
        free(f->stats[i]->lower_bound.data);
        free(f->stats[i]->upper_bound.data);
        free(f->stats[i]);
    }
    free(f->stats);
    for (size_t i = 0; i < f->n_partition_values; i++) {
        free(f->partition_values[i]->value.data);
        free(f->partition_values[i]);
    }
    free(f->partition_values);
    free(f);
}

void cdc_worker_ack_free(Cdc__Ack *ack)
{
    for (size_t i = 0; i < ack->n_partitions; i++) {
        Cdc__PartitionState *ps = ack->partitions[i];
        for (size_t k = 0; k < ps->n_offsets; k++)
            free(ps->offsets[k]);
        free(ps->offsets);
        free(ps->state_handle);
        free(ps);
    }
    free(ack->partitions);
    for (size_t i = 0; i < ack->n_files; i++)
        free_staged(ack->files[i]);
    free(ack->files);
    for (size_t i = 0; i < ack->n_schemas; i++) {
        free(ack->schemas[i]->table);
        free(ack->schemas[i]->schema_json);
        free(ack->schemas[i]);
    }
    free(ack->schemas);
    for (size_t i = 0; i < ack->n_truncates; i++) {
        free(ack->truncates[i]->table);
        free(ack->truncates[i]);
    }
    free(ack->truncates);
    for (size_t i = 0; i < ack->n_floors; i++) {
        free(ack->floors[i]->table);
        free(ack->floors[i]);
    }
    free(ack->floors);
    ack->partitions = NULL;
    ack->files = NULL;
    ack->schemas = NULL;
    ack->truncates = NULL;
    ack->floors = NULL;
    ack->n_partitions = ack->n_files = ack->n_schemas = ack->n_truncates = ack->n_floors = 0;
}

/* Reports a floor the slot met (TableFloor, docs/protocol.md). */
static cdc_err_t add_floor(Cdc__Ack *ack, const char *table, const cdc_stage_table_t *t,
                           uint32_t partition, cdc_error_t *e)
{
    Cdc__TableFloor **n = realloc(ack->floors, (ack->n_floors + 1) * sizeof(*n)), *f;
    if (n == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    ack->floors = n;
    f = calloc(1, sizeof(*f));
    if (f == NULL || (cdc__table_floor__init(f), f->table = strdup(table)) == NULL) {
        free(f);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    f->commit_lsn = t->floor_commit_lsn;
    f->lsn = t->floor_lsn;
    f->partition = partition;
    ack->floors[ack->n_floors++] = f;
    return CDC_OK;
}

/* Reports the slot's truncated tables in the ack (TableTruncate, TableFloor,
 * docs/protocol.md). */
static cdc_err_t add_truncates(Cdc__Ack *ack, const cdc_stage_t *stage, cdc_error_t *e)
{
    for (size_t i = 0; i < stage->ntables; i++) {
        const cdc_stage_table_t *t = &stage->tables[i];
        Cdc__TableTruncate **n, *tt;
        char name[300];
        cdc_err_t rc;
        if (!t->truncated)
            continue;
        n = realloc(ack->truncates, (ack->n_truncates + 1) * sizeof(*n));
        if (n == NULL)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        ack->truncates = n;
        tt = calloc(1, sizeof(*tt));
        snprintf(name, sizeof(name), "%s.%s", t->ns, t->table);
        if (tt == NULL || (cdc__table_truncate__init(tt), tt->table = strdup(name)) == NULL) {
            free(tt);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        tt->partition = stage->partition;
        ack->truncates[ack->n_truncates++] = tt;
        if (t->floor && (rc = add_floor(ack, name, t, stage->partition, e)) != CDC_OK)
            return rc;
        cdc_log_info("partition %u: truncate of \"%s\" in epoch %llu", stage->partition, name,
                     (unsigned long long)stage->epoch);
    }
    return CDC_OK;
}

static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *d = malloc(n ? n : 1);
    if (d != NULL && n)
        memcpy(d, p, n);
    return d;
}

static Cdc__StagedFile *to_proto(const cdc_stage_file_t *sf, uint32_t partition)
{
    Cdc__StagedFile *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    cdc__staged_file__init(f);
    f->table = strdup(sf->table);
    f->path = strdup(sf->df.path);
    f->content = (uint32_t)sf->df.content;
    f->record_count = sf->df.record_count;
    f->file_size_in_bytes = sf->df.file_size_in_bytes;
    f->schema_id = sf->df.schema_id;
    f->partition = partition;
    if (sf->df.nequality_ids > 0) {
        f->equality_ids = malloc(sf->df.nequality_ids * sizeof(int32_t));
        if (f->equality_ids != NULL) {
            memcpy(f->equality_ids, sf->df.equality_ids, sf->df.nequality_ids * sizeof(int32_t));
            f->n_equality_ids = sf->df.nequality_ids;
        }
    }
    f->stats = calloc(sf->df.nstats + 1, sizeof(*f->stats));
    for (size_t i = 0; f->stats != NULL && i < sf->df.nstats; i++) {
        const cdc_ice_col_stats_t *st = &sf->df.stats[i];
        Cdc__ColumnStats *cs = calloc(1, sizeof(*cs));
        if (cs == NULL)
            break;
        cdc__column_stats__init(cs);
        cs->field_id = st->field_id;
        cs->column_size = st->column_size;
        cs->value_count = st->value_count;
        cs->null_count = st->null_count;
        cs->has_bounds = st->has_bounds;
        if (st->has_bounds) {
            cs->lower_bound.data = dup_bytes(st->lower, st->lower_len);
            cs->lower_bound.len = st->lower_len;
            cs->upper_bound.data = dup_bytes(st->upper, st->upper_len);
            cs->upper_bound.len = st->upper_len;
        }
        f->stats[f->n_stats++] = cs;
    }
    f->spec_id = sf->df.spec_id;
    f->sort_order_id = sf->df.sort_order_id;
    f->partition_values = calloc(sf->df.npartition + 1, sizeof(*f->partition_values));
    for (size_t i = 0; f->partition_values != NULL && i < sf->df.npartition; i++) {
        const cdc_ice_part_value_t *v = &sf->df.partition[i];
        Cdc__PartitionValue *pv = calloc(1, sizeof(*pv));
        if (pv == NULL)
            break;
        cdc__partition_value__init(pv);
        pv->is_null = v->null;
        if (!v->null) {
            pv->value.data = dup_bytes(v->bytes, v->len);
            pv->value.len = v->len;
        }
        f->partition_values[f->n_partition_values++] = pv;
    }
    return f;
}

static bool add_schema(Cdc__Ack *ack, const char *table, char *json, int64_t version)
{
    for (size_t i = 0; i < ack->n_schemas; i++)
        if (strcmp(ack->schemas[i]->table, table) == 0) {
            free(json);
            return true;
        }
    Cdc__SchemaUpdate **n = realloc(ack->schemas, (ack->n_schemas + 1) * sizeof(*n));
    Cdc__SchemaUpdate *su = calloc(1, sizeof(*su));
    if (n == NULL || su == NULL || json == NULL) {
        if (n != NULL)
            ack->schemas = n;
        free(su);
        free(json);
        return false;
    }
    ack->schemas = n;
    cdc__schema_update__init(su);
    su->table = strdup(table);
    su->schema_json = json;
    su->source_version = version;
    ack->schemas[ack->n_schemas++] = su;
    return true;
}

static char *table_schema_json(const cdc_source_schema_t *s, cdc_stage_kind_t kind)
{
    cdc_ice_schema_t is;
    cdc_error_t e;
    char *json;
    if (cdc_stage_ice_schema(s, kind, &is, &e) != CDC_OK)
        return NULL;
    json = cdc_ice_schema_to_json(&is);
    cdc_ice_schema_free(&is);
    return json;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- barrier: cut on the record thread, finish on the finalizer thread ------------- */

/* One partition's share of a cut epoch. */
typedef struct snap_part {
    cdc_worker_t *w;
    cdc_slot_t *s; /* its ckpt and last_handle belong to the finalizer until done */
    uint64_t epoch;
    cdc_stage_t stage;                          /* the epoch's stage (owned) */
    int64_t next_offset[CDC_WORKER_MAX_TOPICS]; /* at the cut */
    int64_t high[CDC_WORKER_MAX_TOPICS];        /* last known high watermarks at the cut */
    int64_t stalled_ms[CDC_WORKER_MAX_TOPICS];  /* progress watchdog at the cut (0 = fine) */
    bool checkpoint;                            /* state changed: store held at the cut */
    Cdc__Ack part;
    cdc_err_t rc;
    cdc_error_t e;
    cdc_err_t ckpt_rc; /* of the state checkpoint, which runs beside the file writing */
    cdc_error_t ckpt_e;
    int64_t files_ms, ckpt_ms; /* durations, for the debug log of the ack */
} snap_part_t;

/* One cut epoch handed to the finalizer. */
typedef struct cdc_snap_job {
    uint64_t term, generation, epoch;
    int64_t cut_ms;
    int n;
    snap_part_t parts[CDC_WORKER_PARTITIONS];
} cdc_snap_job_t;

/* The state checkpoint of one partition (when its store changed since the last one; a
 * clean store reuses its last handle: nothing new to upload). Runs on its own thread,
 * beside the file writing of the same partition. */
static void *checkpoint_thread(void *arg)
{
    snap_part_t *j = arg;
    cdc_worker_t *w = j->w;
    cdc_slot_t *s = j->s;
    uint64_t epoch = j->epoch;
    cdc_error_t *e = &j->ckpt_e;
    cdc_err_t rc;
    char name[64];
    char *dir;
    const char *handle = NULL;
    cdc_ckpt_stats_t st;
    double c0 = now_s();

    snprintf(name, sizeof(name), "ckpt-%" PRIu64 "-%" PRIu64, epoch, w->incarnation);
    dir = join(s->ckpt.local_root, name);
    if (dir == NULL) {
        cdc_dedup_release(s->dedup);
        j->ckpt_rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    cdc_state_destroy(dir, e);
    int64_t t0 = cdc_worker_mono_ms();
    rc = cdc_dedup_checkpoint_cut(s->dedup, dir, e);
    for (int attempt = 0; rc == CDC_OK; attempt++) {
        if (atomic_load(&w->fin_cancel)) {
            rc = cdc_error_set(e, CDC_ERR_UNAVAILABLE, "epoch abandoned");
            break;
        }
        rc = cdc_ckpt_upload(&s->ckpt, epoch, dir, &handle, &st, e);
        if (rc == CDC_OK || attempt >= STORAGE_RETRIES || !e->retriable)
            break;
    }
    free(dir);
    free(s->last_handle);
    s->last_handle = NULL; /* the next cut checkpoints again when this one failed */
    if (rc == CDC_OK) {
        cdc_metrics_counter_add(w->m_ckpt_bytes, (double)st.bytes_uploaded);
        cdc_metrics_histogram_observe(w->m_ckpt_seconds, now_s() - c0);
        s->last_handle = strdup(handle);
        if (s->last_handle == NULL)
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    } else {
        cdc_error_prefix(e, "could not checkpoint partition %u for epoch %" PRIu64, s->partition,
                         epoch);
    }
    j->ckpt_rc = rc;
    j->ckpt_ms = cdc_worker_mono_ms() - t0;
    return NULL;
}

/* Writes the partition's files of the cut epoch (durable: fsynced or uploaded). */
static cdc_err_t write_files(snap_part_t *j, cdc_stage_file_t **files, size_t *nfiles)
{
    cdc_worker_t *w = j->w;
    cdc_stage_write_options_t wo = {w->cfg.warehouse, w->cfg.job, stage_codec(w)};
    cdc_err_t rc;
    double t0 = now_s();

    *files = NULL;
    *nfiles = 0;
    for (int attempt = 0;; attempt++) {
        if (atomic_load(&w->fin_cancel))
            return cdc_error_set(&j->e, CDC_ERR_UNAVAILABLE, "epoch abandoned");
        rc = cdc_stage_write(&j->stage, w->storage, &wo, files, nfiles, &j->e);
        if (rc == CDC_OK || attempt >= STORAGE_RETRIES || !j->e.retriable)
            break;
    }
    if (rc == CDC_OK)
        cdc_metrics_histogram_observe(w->m_stage_seconds, now_s() - t0);
    return rc;
}

/*
 * Finishes one partition of a cut epoch (finalizer side; runs on its own thread so that
 * fsync and upload latency overlap): the state checkpoint on a thread of its own (it
 * releases the store's hold as soon as RocksDB copied it), the epoch's Parquet files
 * here, then the Ack part once both are durable.
 */
static cdc_err_t snapshot_slot(snap_part_t *j)
{
    cdc_worker_t *w = j->w;
    cdc_slot_t *s = j->s;
    Cdc__Ack *ack = &j->part;
    cdc_error_t *e = &j->e;
    cdc_stage_file_t *files = NULL;
    size_t nfiles = 0;
    cdc_err_t rc = CDC_OK;
    pthread_t ckpt;
    bool ckpt_started = false;

    j->ckpt_rc = CDC_OK;
    if (j->checkpoint) {
        ckpt_started = pthread_create(&ckpt, NULL, checkpoint_thread, j) == 0;
        if (!ckpt_started)
            checkpoint_thread(j);
    }
    int64_t t0 = cdc_worker_mono_ms();
    rc = write_files(j, &files, &nfiles);
    j->files_ms = cdc_worker_mono_ms() - t0;
    if (ckpt_started)
        pthread_join(ckpt, NULL);
    if (rc == CDC_OK && j->ckpt_rc != CDC_OK) {
        *e = j->ckpt_e;
        rc = j->ckpt_rc;
    }
    if (rc != CDC_OK) {
        cdc_stage_files_free(files, nfiles); /* (the coordinator never sees them: orphans) */
        return rc;
    }

    /* Schemas first (the coordinator creates/evolves tables before adding files). */
    for (size_t i = 0; i < j->stage.ntables; i++) {
        const cdc_stage_table_t *t = &j->stage.tables[i];
        char name[300];
        snprintf(name, sizeof(name), "%s.%s", t->ns, t->table);
        /* a version only for ids given by column identity (Debezium schemas: 0) */
        int64_t version = t->schema->ids_given ? t->schema->version : 0;
        add_schema(ack, name, table_schema_json(t->schema, CDC_STAGE_MIRROR_DATA), version);
        snprintf(name, sizeof(name), "%s.%s_changelog", t->ns, t->table);
        add_schema(ack, name, table_schema_json(t->schema, CDC_STAGE_CHANGELOG), version);
    }
    Cdc__StagedFile **nf = realloc(ack->files, (ack->n_files + nfiles + 1) * sizeof(*nf));
    if (nf == NULL) {
        cdc_stage_files_free(files, nfiles);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    ack->files = nf;
    for (size_t i = 0; i < nfiles; i++) {
        Cdc__StagedFile *f = to_proto(&files[i], s->partition);
        if (f != NULL)
            ack->files[ack->n_files++] = f;
    }
    cdc_stage_files_free(files, nfiles);
    if ((rc = add_truncates(ack, &j->stage, e)) != CDC_OK)
        return rc;

    Cdc__PartitionState *ps = calloc(1, sizeof(*ps));
    Cdc__PartitionState **np = realloc(ack->partitions, (ack->n_partitions + 1) * sizeof(*np));
    if (ps == NULL || np == NULL) {
        free(ps);
        if (np != NULL)
            ack->partitions = np;
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    ack->partitions = np;
    cdc__partition_state__init(ps);
    ps->partition = s->partition;
    ps->state_handle = strdup(s->last_handle ? s->last_handle : "");
    ps->offsets = calloc(w->ntopics + 1, sizeof(*ps->offsets));
    for (size_t t = 0; ps->offsets != NULL && t < w->ntopics; t++) {
        Cdc__TopicOffset *to = calloc(1, sizeof(*to));
        if (to == NULL)
            break;
        cdc__topic_offset__init(to);
        to->topic = w->topics[t]; /* borrowed: not freed by cdc_worker_ack_free */
        to->next_offset = j->next_offset[t];
        to->high_watermark = j->high[t] > 0 ? j->high[t] : 0; /* for the leader's /status */
        to->stalled_ms = j->stalled_ms[t];
        ps->offsets[ps->n_offsets++] = to;
    }
    ack->partitions[ack->n_partitions++] = ps;
    return CDC_OK;
}

static void *snap_thread(void *arg)
{
    snap_part_t *j = arg;
    j->rc = snapshot_slot(j);
    if (j->checkpoint)
        cdc_dedup_release(j->s->dedup); /* normally done by the checkpoint already */
    return NULL;                        /* the stage is freed after the Ack is sent (finish_job) */
}

/* Moves the parts' arrays into ack (schemas deduplicated by table). */
static cdc_err_t merge_parts(Cdc__Ack *ack, snap_part_t *jobs, int n, cdc_error_t *e)
{
    size_t np = 0, nf = 0, ns = 0, nt = 0, nfl = 0;
    for (int i = 0; i < n; i++) {
        np += jobs[i].part.n_partitions;
        nf += jobs[i].part.n_files;
        ns += jobs[i].part.n_schemas;
        nt += jobs[i].part.n_truncates;
        nfl += jobs[i].part.n_floors;
    }
    ack->partitions = calloc(np + 1, sizeof(*ack->partitions));
    ack->files = calloc(nf + 1, sizeof(*ack->files));
    ack->schemas = calloc(ns + 1, sizeof(*ack->schemas));
    ack->truncates = calloc(nt + 1, sizeof(*ack->truncates));
    ack->floors = calloc(nfl + 1, sizeof(*ack->floors));
    if (ack->partitions == NULL || ack->files == NULL || ack->schemas == NULL ||
        ack->truncates == NULL || ack->floors == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        Cdc__Ack *p = &jobs[i].part;
        for (size_t k = 0; k < p->n_floors; k++)
            ack->floors[ack->n_floors++] = p->floors[k];
        free(p->floors);
        p->floors = NULL;
        p->n_floors = 0;
        for (size_t k = 0; k < p->n_truncates; k++)
            ack->truncates[ack->n_truncates++] = p->truncates[k];
        free(p->truncates);
        p->truncates = NULL;
        p->n_truncates = 0;
        for (size_t k = 0; k < p->n_partitions; k++)
            ack->partitions[ack->n_partitions++] = p->partitions[k];
        for (size_t k = 0; k < p->n_files; k++)
            ack->files[ack->n_files++] = p->files[k];
        for (size_t k = 0; k < p->n_schemas; k++) {
            bool dup = false;
            for (size_t m = 0; m < ack->n_schemas && !dup; m++)
                dup = strcmp(ack->schemas[m]->table, p->schemas[k]->table) == 0;
            if (dup) {
                free(p->schemas[k]->table);
                free(p->schemas[k]->schema_json);
                free(p->schemas[k]);
            } else {
                ack->schemas[ack->n_schemas++] = p->schemas[k];
            }
        }
        free(p->partitions);
        free(p->files);
        free(p->schemas);
        p->partitions = NULL;
        p->files = NULL;
        p->schemas = NULL;
        p->n_partitions = p->n_files = p->n_schemas = 0;
    }
    return CDC_OK;
}

/* Frees the epoch's stages: after the Ack, since freeing a large epoch's rows (one
 * allocation per string value) takes a good part of the finalizer's time. */
static void free_stages(cdc_snap_job_t *job)
{
    for (int i = 0; i < job->n; i++)
        cdc_stage_free(&job->parts[i].stage);
}

/* Finalizer side of one cut epoch: every partition in parallel, then one Ack. */
static void finish_job(cdc_worker_t *w, cdc_snap_job_t *job)
{
    pthread_t th[CDC_WORKER_PARTITIONS];
    bool started[CDC_WORKER_PARTITIONS] = {false};
    Cdc__Ack ack = CDC__ACK__INIT;
    cdc_error_t e;
    cdc_err_t rc = CDC_OK;
    int n = job->n;

    /* Partitions in parallel: the work is mostly fsync and upload latency. */
    for (int i = 0; i < n; i++)
        started[i] = pthread_create(&th[i], NULL, snap_thread, &job->parts[i]) == 0;
    for (int i = 0; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            snap_thread(&job->parts[i]);
    }
    for (int i = 0; i < n && rc == CDC_OK; i++)
        if (job->parts[i].rc != CDC_OK) {
            e = job->parts[i].e;
            rc = job->parts[i].rc;
        }
    if (rc == CDC_OK)
        rc = merge_parts(&ack, job->parts, n, &e);
    for (int i = 0; i < n; i++)
        cdc_worker_ack_free(&job->parts[i].part);
    if (rc != CDC_OK) {
        /* No ack: the coordinator aborts the epoch and reassigns; nothing is lost. */
        if (!atomic_load(&w->fin_cancel))
            cdc_log_error("could not snapshot epoch %" PRIu64 ": %s", job->epoch, e.msg);
        cdc_worker_ack_free(&ack);
        free_stages(job);
        return;
    }
    ack.term = job->term;
    ack.generation = job->generation;
    ack.epoch = job->epoch;
    if (!atomic_load(&w->fin_cancel) && cdc_worker_send_ack(w, &ack)) {
        int64_t files_ms = 0, ckpt_ms = 0;
        for (int i = 0; i < n; i++) {
            files_ms = job->parts[i].files_ms > files_ms ? job->parts[i].files_ms : files_ms;
            ckpt_ms = job->parts[i].ckpt_ms > ckpt_ms ? job->parts[i].ckpt_ms : ckpt_ms;
        }
        cdc_metrics_counter_inc(w->m_epochs);
        cdc_log_debug("acked epoch %" PRIu64 " (%zu partitions, %zu files) %" PRId64
                      " ms after the cut (slowest partition: files %" PRId64
                      " ms, state checkpoint %" PRId64 " ms)",
                      job->epoch, ack.n_partitions, ack.n_files, cdc_worker_mono_ms() - job->cut_ms,
                      files_ms, ckpt_ms);
    }
    cdc_worker_ack_free(&ack);
    free_stages(job);
}

static void *finalizer_main(void *arg)
{
    cdc_worker_t *w = arg;
    pthread_mutex_lock(&w->fin_lock);
    for (;;) {
        while (!w->fin_stop && w->fin_job == NULL && w->fin_gc_epoch == 0)
            pthread_cond_wait(&w->fin_cond, &w->fin_lock);
        if (w->fin_job == NULL && w->fin_gc_epoch == 0)
            break; /* stopping, nothing left */
        cdc_snap_job_t *job = w->fin_job;
        uint64_t gc = w->fin_gc_epoch;
        w->fin_gc_epoch = 0;
        w->fin_busy = true;
        pthread_mutex_unlock(&w->fin_lock);
        if (job != NULL)
            finish_job(w, job);
        if (gc != 0) {
            /* Committed{gc}: checkpoints older than the one of gc are not needed. */
            cdc_error_t e;
            for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
                if (w->slots[p].owned && w->slots[p].ckpt_ready)
                    cdc_ckpt_gc(&w->slots[p].ckpt, gc, &e);
        }
        pthread_mutex_lock(&w->fin_lock);
        if (job != NULL && w->fin_job == job)
            w->fin_job = NULL;
        free(job);
        w->fin_busy = false;
        pthread_cond_broadcast(&w->fin_cond);
    }
    pthread_mutex_unlock(&w->fin_lock);
    return NULL;
}

void cdc_worker_finalizer_wait(cdc_worker_t *w, bool cancel)
{
    if (!w->fin_running)
        return;
    pthread_mutex_lock(&w->fin_lock);
    if (cancel) {
        atomic_store(&w->fin_cancel, true);
        w->fin_gc_epoch = 0;
    }
    while (w->fin_job != NULL || w->fin_busy || w->fin_gc_epoch != 0)
        pthread_cond_wait(&w->fin_cond, &w->fin_lock);
    atomic_store(&w->fin_cancel, false);
    pthread_mutex_unlock(&w->fin_lock);
}

static void finalizer_stop(cdc_worker_t *w)
{
    if (!w->fin_running)
        return;
    cdc_worker_finalizer_wait(w, true);
    pthread_mutex_lock(&w->fin_lock);
    w->fin_stop = true;
    pthread_cond_broadcast(&w->fin_cond);
    pthread_mutex_unlock(&w->fin_lock);
    pthread_join(w->fin_thread, NULL);
    w->fin_running = false;
}

cdc_err_t cdc_worker_barrier(cdc_worker_t *w, uint64_t term, uint64_t generation, uint64_t epoch,
                             cdc_error_t *e)
{
    int64_t t0 = cdc_worker_mono_ms();
    cdc_snap_job_t *job;

    if (!w->fin_running)
        return cdc_error_set(e, CDC_ERR_INTERNAL, "the finalizer thread is not running");
    /* One epoch in the finalizer at a time: it owns the checkpoint chain. */
    cdc_worker_finalizer_wait(w, false);
    int64_t waited = cdc_worker_mono_ms() - t0;
    if (waited > 50)
        cdc_log_debug("barrier %" PRIu64 ": waited %" PRId64 " ms for the previous epoch's files",
                      epoch, waited);
    job = calloc(1, sizeof(*job));
    if (job == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    job->term = term;
    job->generation = generation;
    job->epoch = epoch;
    job->cut_ms = cdc_worker_mono_ms();
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        snap_part_t *j;
        if (!s->owned)
            continue;
        j = &job->parts[job->n];
        j->w = w;
        j->s = s;
        j->epoch = epoch;
        j->checkpoint = s->dirty || s->last_handle == NULL;
        /* The store as of this record boundary: the accepted changes are written, later
         * ones stay in the dedup overlay until the checkpoint has copied the store. */
        if (j->checkpoint) {
            cdc_err_t rc = cdc_dedup_cut(s->dedup, e);
            if (rc != CDC_OK) {
                for (int i = 0; i < job->n; i++)
                    if (job->parts[i].checkpoint)
                        cdc_dedup_release(job->parts[i].s->dedup);
                /* the stages moved so far are lost with the epoch: the abort replays */
                for (int i = 0; i < job->n; i++)
                    cdc_stage_free(&job->parts[i].stage);
                free(job);
                return cdc_error_prefix(e, "partition %u", s->partition);
            }
        }
        memcpy(j->next_offset, s->next_offset, sizeof(j->next_offset));
        memcpy(j->high, s->high, sizeof(j->high));
        for (size_t t = 0; t < w->ntopics; t++)
            j->stalled_ms[t] =
                s->stalled_since[t] != 0 ? cdc_worker_mono_ms() - s->stalled_since[t] : 0;
        j->stage = s->stage; /* moved */
        j->stage.epoch = epoch;
        cdc_stage_init(&s->stage, s->partition, epoch + 1);
        cdc_stage_set_encoding(&s->stage, stage_codec(w), CDC_STAGE_ENCODE_ROWS);
        cdc__ack__init(&j->part);
        s->dirty = false;
        job->n++;
    }
    pthread_mutex_lock(&w->fin_lock);
    w->fin_job = job;
    pthread_cond_broadcast(&w->fin_cond);
    pthread_mutex_unlock(&w->fin_lock);
    set_paused(w, false);
    return CDC_OK;
}

void cdc_worker_committed(cdc_worker_t *w, uint64_t epoch)
{
    if (!w->fin_running)
        return;
    pthread_mutex_lock(&w->fin_lock);
    if (epoch > w->fin_gc_epoch)
        w->fin_gc_epoch = epoch;
    pthread_cond_broadcast(&w->fin_cond);
    pthread_mutex_unlock(&w->fin_lock);
}

/*
 * Progress watchdog of one topic partition (docs/worker.md, "Progress watchdog"): records
 * behind the high watermark and an offset that has not moved for --progress-timeout
 * (fetching not paused on purpose, no restart pending) is a stall, whatever its cause: it
 * is logged, counted, reported with the next ack (TopicOffset.stalled_ms, shown in the
 * coordinator's /status) and the partition is fetched again from its next offset (the
 * restart of restart_failed()). Returns 1 while the partition is stalled.
 */
static int watchdog(cdc_worker_t *w, cdc_slot_t *s, size_t t, int64_t now)
{
    int64_t pos = s->next_offset[t] >= 0 ? s->next_offset[t] : 0;
    if (s->progress_ms[t] == 0 || s->progress_offset[t] != pos || s->high[t] <= pos || w->paused ||
        s->restart_at[t] != 0) {
        if (s->stalled_since[t] != 0 && (s->progress_offset[t] != pos || s->high[t] <= pos))
            cdc_log_info("partition %u topic \"%s\": progressing again at offset %" PRId64,
                         s->partition, w->topics[t], pos);
        if (s->progress_offset[t] != pos || s->high[t] <= pos || s->progress_ms[t] == 0) {
            s->stalled_since[t] = 0;
            s->watchdog_gave_up[t] = false;
            s->progress_offset[t] = pos;
            s->progress_ms[t] = now;
        }
        return s->stalled_since[t] != 0;
    }
    if (w->cfg.progress_timeout_ms <= 0 || now - s->progress_ms[t] < w->cfg.progress_timeout_ms)
        return s->stalled_since[t] != 0;
    if (s->stalled_since[t] != 0) {
        /* Fetched again at this offset already and still stuck: once is enough (a topic of
         * a transactional producer ends in a control record no consumer returns, which
         * looks just like this); the partition stays reported as stalled. */
        if (!s->watchdog_gave_up[t]) {
            s->watchdog_gave_up[t] = true;
            cdc_log_warn("partition %u topic \"%s\": still no progress at offset %" PRId64
                         " after fetching it again (%" PRId64 " behind the high watermark): not "
                         "fetching it again; a control record at the end of a transactional "
                         "producer's partition looks like this",
                         s->partition, w->topics[t], pos, s->high[t] - pos);
        }
        s->progress_ms[t] = now;
        return 1;
    }
    s->stalled_since[t] = s->progress_ms[t];
    cdc_metrics_counter_inc(w->m_stalls);
    cdc_log_warn("partition %u topic \"%s\": no progress for %" PRId64 " ms at offset %" PRId64
                 " with %" PRId64 " records behind the high watermark: fetching it again",
                 s->partition, w->topics[t], now - s->stalled_since[t], pos, s->high[t] - pos);
    s->restart_at[t] = now;  /* restart_failed() assigns it again from next_offset */
    s->progress_ms[t] = now; /* the next verdict after another timeout */
    return 1;
}

void cdc_worker_update_gauges(cdc_worker_t *w, int64_t now_ms)
{
    if (now_ms < w->next_lag_ms)
        return;
    w->next_lag_ms = now_ms + 2000;
    double stalled = 0;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        double lag = 0;
        if (!s->owned)
            continue;
        for (size_t t = 0; t < w->ntopics; t++) {
            int64_t low = 0, high = 0;
            cdc_error_t e;
            /* cached by librdkafka from fetch responses: no broker round trip here */
            if (cdc_kafka_consumer_watermarks(w->consumer, w->topics[t], p, &low, &high, 0, &e) ==
                    CDC_OK &&
                high >= 0)
                s->high[t] = high;
            int64_t pos = s->next_offset[t] >= 0 ? s->next_offset[t] : 0;
            if (s->high[t] > pos)
                lag += (double)(s->high[t] - pos);
            stalled += watchdog(w, s, t, now_ms);
        }
        cdc_metrics_gauge_set(s->lag, lag);
        if (s->dedup != NULL)
            cdc_metrics_gauge_set(s->state_bytes, (double)cdc_state_size(s->dedup->st));
    }
    cdc_metrics_gauge_set(w->m_stalled, stalled);
}
