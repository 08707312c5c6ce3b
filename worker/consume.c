/*
 * The worker's data path: Kafka consumption of the owned partition slots, the record
 * path (decode -> dead letter | dedup -> TOAST repair -> stage), assignment (state
 * restore + seek) and backpressure. The barrier, which cuts the epoch and finishes it on
 * the finalizer thread, is in barrier.c; the schema topic is read by schemas.c; restarts
 * of stopped fetches and the progress watchdog are in watchdog.c. *
 * A call circle of three files (docs/development.md, "Call circles"): session.c runs the
 * main loop and hands it to consume.c for records and to barrier.c for Barrier and
 * Committed; the record loop polls the control link between batches (session.c) and
 * starts and waits for the finalizer (barrier.c); the finalizer pauses fetching while
 * staged bytes are over their budget (consume.c) and sends its Ack on the link
 * (session.c). Everything else in worker/ sits below these three.
 */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/clock.h"
#include "common/buf.h"
#include "common/cdcschema.h"
#include "common/iceberg/parquet.h"
#include "common/log.h"
#include "common/state.h"
#include "worker/toast.h"
#include "worker/worker.h"

#define BATCH_MAX 2048

char *cdc_worker_join(const char *a, const char *b)
{
    char *out;
    return asprintf(&out, "%s/%s", a, b) < 0 ? NULL : out;
}

/* The series of table ns.table, made on first use; NULL when out of memory. Record
 * thread. */
static cdc_table_metrics_t *table_metrics_find(cdc_worker_t *w, const char *ns, const char *table)
{
    char buf[256], *name = buf;
    cdc_table_metrics_t *n = NULL;
    size_t i;
    int len = snprintf(buf, sizeof(buf), "%s.%s", ns, table);

    if (len < 0 || ((size_t)len >= sizeof(buf) && asprintf(&name, "%s.%s", ns, table) < 0))
        return NULL; /* (a longer name than buf is allocated: never cut short) */
    if ((i = (size_t)(uintptr_t)cdc_strmap_get(&w->records.by_name, name)) > 0) {
        n = &w->records.tables[i - 1];
        goto done;
    }
    if (cdc_array_reserve(w->records.tables, w->records.tables_cap, w->records.ntables + 1, 16) !=
        CDC_OK)
        goto done;
    n = memset(&w->records.tables[w->records.ntables], 0, sizeof(*n));
    if ((n->name = strdup(name)) == NULL ||
        cdc_strmap_put(&w->records.by_name, n->name, (void *)(uintptr_t)(w->records.ntables + 1)) !=
            CDC_OK) {
        free(n->name);
        n = NULL;
        goto done;
    }
    w->records.ntables++;
    const char *labels[] = {"table", name, NULL};
    n->in = cdc_metrics_counter(w->metrics, "cdc_worker_records_in_total",
                                "Decoded change events per source table.", labels);
    n->out = cdc_metrics_counter(w->metrics, "cdc_worker_records_out_total",
                                 "Changes staged for Iceberg per source table.", labels);
    n->dups = cdc_metrics_counter(w->metrics, "cdc_worker_duplicates_dropped_total",
                                  "Replayed or out-of-order duplicate changes dropped.", labels);
    n->nulled = cdc_metrics_counter(
        w->metrics, "cdc_worker_nulled_values_total",
        "Changes kept with a column null because its value does not fit the column's type "
        "(each record also dead-lettered).",
        labels);
    n->unknown_toast = cdc_metrics_counter(
        w->metrics, "cdc_worker_unknown_toast_values_total",
        "Unchanged TOAST values of rows older than the capture, never seen by this pipeline "
        "(null, named \"unchanged-toast\" by the row's _cdc_special, until the table's "
        "snapshot reads the row).",
        labels);
    n->special = cdc_metrics_counter(
        w->metrics, "cdc_worker_special_values_total",
        "numeric NaN, Infinity and -Infinity values of decimal columns (null in the column, "
        "named by the row's _cdc_special).",
        labels);
done:
    if (name != buf)
        free(name);
    return n;
}

cdc_table_metrics_t *cdc_worker_table_metrics(cdc_worker_t *w, const cdc_source_schema_t *schema)
{
    if (schema == w->records.last_schema && w->records.last_index < w->records.ntables)
        return &w->records.tables[w->records.last_index];
    cdc_table_metrics_t *tm = table_metrics_find(w, schema->ns, schema->table);
    if (tm != NULL) {
        w->records.last_schema = schema;
        w->records.last_index = (size_t)(tm - w->records.tables);
    }
    return tm;
}

/* ---- open / close ------------------------------------------------------------------- */

/* The dead-letter counters, one per class, made before any thread reads them (the
 * heartbeat thread reports them to the coordinator) and shown from the start at 0. */
static void dlq_metrics(cdc_worker_t *w)
{
    w->m_unpartitioned = cdc_metrics_counter(
        w->metrics, "cdc_worker_unpartitioned_rows_total",
        "Rows a value of which the table's partition spec cannot take, written unpartitioned.",
        NULL);
    for (int cls = 0; cls < CDC_DLQ__COUNT; cls++) {
        const char *labels[] = {"class", cdc_dlq_class_name((cdc_dlq_class_t)cls), NULL};
        w->m_dlq[cls] =
            cdc_metrics_counter(w->metrics, "cdc_worker_dlq_records_total",
                                "Records sent to the dead-letter topic, by class.", labels);
    }
}

cdc_err_t cdc_worker_data_open(cdc_worker_t *w, cdc_error_t *e)
{
    cdc_err_t rc;
    cdc_storage_config_t sc = {0};
    cdc_kafka_consumer_config_t cc = {0};
    cdc_kafka_producer_config_t pc = {0};
    char client[300];

    cdc_worker_finalizer_init(w);
    cdc_worker_values_init(w);
    dlq_metrics(w);
    if ((rc = cdc_worker_tables_open(w, e)) != CDC_OK)
        return rc;
    if (mkdir(w->cfg.state_dir, 0755) != 0 && errno != EEXIST)
        return cdc_error_set(e, CDC_ERR_CONFIG, "option --state-dir: could not create \"%s\": %s",
                             w->cfg.state_dir, strerror(errno));
    sc = cdc_s3_options_storage(&w->cfg.s3);
    if ((rc = cdc_storage_open(w->cfg.warehouse, &sc, &w->storage, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --warehouse \"%s\"", w->cfg.warehouse);
    w->catalog = cdc_catalog_new();
    if (w->catalog == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    w->dopts.max_record_bytes = (size_t)w->cfg.max_record_bytes;
    w->dopts.toast_placeholder = w->cfg.toast_placeholder;
    w->dopts.default_ns = "public";
    cdc_mask_config_t mc = {w->cfg.mask_policy, w->cfg.mask_mode, w->cfg.mask_secret,
                            w->cfg.mask_secret_file};
    if ((rc = cdc_mask_open(&mc, w->metrics, &w->mask, e)) != CDC_OK)
        return rc;
    if (w->mask != NULL) {
        char line[512];
        cdc_mask_describe(w->mask, line, sizeof(line));
        cdc_log_info("%s", line);
    }

    snprintf(client, sizeof(client), "cdc-worker-%s", w->cfg.id);
    cc.bootstrap = w->cfg.kafka.bootstrap;
    cc.client_id = client;
    cc.group_id = client;
    cc.properties = w->cfg.kafka.properties;
    if ((rc = cdc_kafka_consumer_new(&cc, &w->consumer, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --kafka");
    if ((rc = cdc_kafka_consumer_new(&cc, &w->schema_consumer, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --kafka");
    pc.bootstrap = w->cfg.kafka.bootstrap;
    pc.client_id = client;
    pc.properties = w->cfg.kafka.properties;
    pc.linger_ms = 0;
    pc.on_delivery = cdc_worker_dlq_delivery;
    if ((rc = cdc_kafka_producer_new(&pc, &w->dlq, e)) != CDC_OK)
        return cdc_error_prefix(e, "option --kafka");
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        w->slots[p].partition = (uint32_t)p;
    return cdc_worker_finalizer_start(w, e);
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
    cdc_worker_chunk_free(s, w->topic_cap);
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
}

void cdc_worker_data_close(cdc_worker_t *w)
{
    cdc_worker_finalizer_stop(w);
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
    cdc_worker_dlq_close(w);
    cdc_kafka_consumer_free(w->consumer);
    cdc_kafka_consumer_free(w->schema_consumer);
    cdc_catalog_free(w->catalog);
    cdc_mask_free(w->mask);
    w->mask = NULL;
    cdc_storage_close(w->storage);
    cdc_layouts_free(&w->layouts);
    cdc_worker_tables_close(w);
    for (size_t i = 0; i < w->records.ntables; i++)
        free(w->records.tables[i].name);
    free(w->records.tables);
    cdc_strmap_free(&w->records.by_name);
    w->records.tables = NULL;
    w->records.ntables = w->records.tables_cap = 0;
    w->records.last_schema = NULL;
}

/* ---- assignment ---------------------------------------------------------------------- */

/* Topic t of slot s reads from next on, the progress watchdog starting over. */
static void slot_topic_start(cdc_slot_t *s, size_t t, int64_t next)
{
    s->next_offset[t] = next;
    s->restart_at[t] = 0;
    s->progress_ms[t] = 0;
    s->stalled_since[t] = 0;
    s->watchdog_gave_up[t] = false;
    cdc_worker_chunk_reset(s, t); /* read again from its first chunk */
}

static cdc_err_t slot_open(cdc_worker_t *w, cdc_slot_t *s, const Cdc__PartitionState *ps,
                           cdc_error_t *e)
{
    char name[64], rnd[32];
    char *root;
    cdc_err_t rc;
    bool reused = false;

    snprintf(name, sizeof(name), "p%u", s->partition);
    root = cdc_worker_join(w->cfg.state_dir, name);
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
    cdc_stage_set_encoding(&s->stage, cdc_worker_stage_codec(w), CDC_STAGE_ENCODE_ROWS);
    if (!s->ckpt_ready) {
        /* Whatever an earlier process left here is not trusted (a crash, a full disk, a
         * corrupt or deleted file): start clean from the assigned checkpoint, and say so
         * (docs/operations.md, "Disk faults"). */
        struct stat sb;
        if (stat(root, &sb) == 0) {
            cdc_log_warn("partition %u: discarding the state an earlier process left in \"%s\" "
                         "(never trusted: restored from the checkpoint of the assignment)",
                         s->partition, root);
            cdc_metrics_counter_inc(cdc_metrics_counter(
                w->metrics, "cdc_worker_state_discarded_total",
                "Partition state directories an earlier process left, discarded at start.", NULL));
        }
        cdc_state_destroy(root, e);
        rc = cdc_ckpt_init(&s->ckpt, w->storage, w->cfg.warehouse, w->cfg.job, s->partition, root,
                           e);
        if (rc != CDC_OK) {
            free(root);
            return rc;
        }
        s->ckpt_ready = true;
    }
    snprintf(rnd, sizeof(rnd), "db-%" PRIu64 "-%ld", w->generation,
             (long)(cdc_clock_wall_ms() / 1000));
    s->db_dir = cdc_worker_join(root, rnd);
    free(root);
    if (s->db_dir == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cdc_state_destroy(s->db_dir, e);
    free(s->last_handle);
    s->last_handle = NULL;
    if (ps->state_handle != NULL && ps->state_handle[0] != '\0') {
        for (int attempt = 0;; attempt++) {
            rc = cdc_ckpt_restore(&s->ckpt, ps->state_handle, s->db_dir, &reused, e);
            if (rc == CDC_OK || attempt >= CDC_WORKER_STORAGE_RETRIES || !e->retriable)
                break;
            cdc_state_destroy(s->db_dir, e);
        }
        if (rc != CDC_OK)
            return cdc_error_prefix(e, "could not restore partition %u", s->partition);
        s->last_handle = strdup(ps->state_handle);
        cdc_log_info("partition %u: state restored from %s checkpoint %s", s->partition,
                     reused ? "the local copy of" : "shared", ps->state_handle);
        cdc_metrics_counter_inc(
            cdc_metrics_counter(w->metrics, "cdc_worker_state_restores_total",
                                "Partition stores restored from a checkpoint, by its source.",
                                (const char *[]){"from", reused ? "local" : "shared", NULL}));
    } else {
        /* No checkpoint yet: an empty store; forget what this worker had. */
        cdc_ckpt_drop_after(&s->ckpt, 0);
        cdc_ckpt_new_lineage(&s->ckpt);
    }
    rc = cdc_dedup_open(s->db_dir, (int)(w->cfg.dedup_ttl_ms / 1000), &s->dedup, e);
    if (rc != CDC_OK)
        return rc;
    /* every topic from its checkpointed offset, else the beginning (through the topic
     * index: linear in the topics, however many) */
    for (size_t t = 0; t < w->topics.n; t++)
        slot_topic_start(s, t, CDC_KAFKA_OFFSET_BEGINNING);
    for (size_t k = 0; k < ps->n_offsets; k++) {
        int t = ps->offsets[k]->topic ? cdc_worker_topic_index(w, ps->offsets[k]->topic) : -1;
        if (t >= 0)
            slot_topic_start(s, (size_t)t, ps->offsets[k]->next_offset);
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
    /* the job's tables first: a topic new to us gets its slots' offsets from the checkpoint */
    if ((rc = cdc_worker_take_tables(w, a, e)) != CDC_OK)
        return rc;
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
    tps = calloc(CDC_WORKER_PARTITIONS * w->topics.n + 1, sizeof(*tps));
    if (tps == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        for (size_t t = 0; w->slots[p].owned && t < w->topics.n; t++)
            if (cdc_worker_consumes(w, t))
                tps[ntp++] =
                    (cdc_kafka_tp_t){cdc_worker_topic(w, t), p, w->slots[p].next_offset[t]};
    rc = cdc_kafka_consumer_assign(w->consumer, tps, ntp, e);
    free(tps);
    if (rc == CDC_OK)
        cdc_worker_check_partitions(w, 1000);
    return rc;
}

cdc_err_t cdc_worker_widen(cdc_worker_t *w, char **tables, size_t ntables, cdc_error_t *e)
{
    Cdc__Assign a = CDC__ASSIGN__INIT;
    size_t before = w->topics.n; /* a topic added to the set is one appended now */
    cdc_kafka_tp_t *tps;
    size_t ntp = 0;
    cdc_err_t rc;

    /* was[t]: the worker consumed topic t before (the others of the set are added);
     * listed[t]: the set names it. Marked through the topic index: linear in the set. */
    bool *was = calloc(before + 1, sizeof(*was)), *listed = calloc(before + 1, sizeof(*listed));
    bool added = false;
    if (was == NULL || listed == NULL) {
        free(was);
        free(listed);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < ntables; i++) {
        int t = tables[i] != NULL ? cdc_worker_topic_index(w, tables[i]) : -1;
        if (t >= 0)
            listed[t] = true;
    }
    /* a set that drops a topic we consume is no widening: only an Assign narrows */
    for (size_t t = 0; t < before; t++) {
        was[t] = cdc_worker_consumes(w, t);
        if (was[t] && !listed[t]) {
            cdc_error_set(e, CDC_ERR_PROTOCOL,
                          "the job's new table set lacks topic \"%s\", which this worker "
                          "consumes: not a widening",
                          cdc_worker_topic(w, t));
            free(was);
            free(listed);
            return CDC_ERR_PROTOCOL;
        }
    }
    free(listed);
    a.n_tables = ntables;
    a.tables = tables;
    if ((rc = cdc_worker_take_tables(w, &a, e)) != CDC_OK) {
        free(was);
        return rc;
    }
    for (size_t t = 0; t < w->topics.n && !added; t++)
        added = cdc_worker_consumes(w, t) && !(t < before && was[t]);
    if (!added) {
        free(was);
        return CDC_OK;
    }
    tps = calloc(CDC_WORKER_PARTITIONS * w->topics.n + 1, sizeof(*tps));
    if (tps == NULL) {
        free(was);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    /* each slot reads a topic new to the set from its beginning, as a slot restored from a
     * checkpoint without its offset does (cdc_worker_assign) */
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        for (size_t t = 0; s->owned && t < w->topics.n; t++) {
            if (!cdc_worker_consumes(w, t) || (t < before && was[t]))
                continue;
            slot_topic_start(s, t, CDC_KAFKA_OFFSET_BEGINNING);
            s->high[t] = 0;
            tps[ntp++] = (cdc_kafka_tp_t){cdc_worker_topic(w, t), p, CDC_KAFKA_OFFSET_BEGINNING};
        }
    }
    free(was);
    rc = cdc_kafka_consumer_add(w->consumer, tps, ntp, e);
    /* fetching paused by --max-staged-bytes until the next barrier: the new ones too */
    for (size_t i = 0; rc == CDC_OK && w->paused && i < ntp; i++) {
        cdc_error_t e2;
        cdc_kafka_consumer_pause(w->consumer, tps[i].topic, tps[i].partition, &e2);
    }
    free(tps);
    if (rc == CDC_OK)
        cdc_worker_check_partitions(w, 1000);
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
    cdc_metrics_counter_inc(w->m_dlq[cls]);
}

/* Counts the numeric special values of a change's rows (CDC_VAL_NAN ...). */
static void count_special(cdc_worker_t *w, cdc_table_metrics_t *tm, const cdc_change_t *c)
{
    uint64_t n = 0;
    for (size_t i = 0; c->after.vals != NULL && i < c->schema->ncols; i++)
        n += cdc_val_kind_special(c->after.vals[i].kind);
    if (n == 0)
        return;
    cdc_worker_values_special(w, n);
    for (uint64_t k = 0; tm != NULL && k < n; k++)
        cdc_metrics_counter_inc(tm->special);
}

/*
 * An update of a row older than the capture that left a TOASTed value out: the value is
 * unknown until the snapshot reads the row (toast.h). Counted, logged for the 1st, 10th,
 * 100th ... such change, shown in /status (docs/worker.md, "Unchanged TOAST values").
 */
static void count_unknown_toast(cdc_worker_t *w, cdc_table_metrics_t *tm, const cdc_kafka_msg_t *m,
                                const cdc_change_t *c, unsigned n)
{
    uint64_t k = cdc_worker_values_unknown_toast(w);
    bool power_of_ten = true;
    if (tm != NULL)
        cdc_metrics_counter_add(tm->unknown_toast, (double)n);
    for (uint64_t x = k; x > 1 && power_of_ten; x /= 10)
        power_of_ten = x % 10 == 0;
    if (power_of_ten)
        cdc_log_info("%s[%d]@%" PRId64 ": an update of a row of %s.%s older than the capture "
                     "leaves %u TOASTed value%s unchanged that this pipeline never had: written "
                     "null, named \"unchanged-toast\" in _cdc_special, until the table's "
                     "snapshot reads the row (%" PRIu64 " such changes so far)",
                     m->topic, m->partition, m->offset, c->schema->ns, c->schema->table, n,
                     n == 1 ? "" : "s", k);
}

/*
 * A change kept with columns made null (decode.h, `nulled`): the record goes to the DLQ
 * too, so the value is not lost, with the first column named (docs/worker.md, "Values
 * no Iceberg type holds").
 */
static cdc_err_t dead_letter_nulled(cdc_worker_t *w, cdc_table_metrics_t *tm,
                                    const cdc_kafka_msg_t *m, const cdc_change_t *c,
                                    cdc_decode_error_t *de, cdc_error_t *e)
{
    char msg[400];
    cdc_err_t rc;

    cdc_mask_error(w->mask, de);
    snprintf(msg, sizeof(msg), "%s (the row was kept with %u column%s null)", de->msg, c->nulled,
             c->nulled == 1 ? "" : "s");
    if ((rc = cdc_worker_dlq_send(w, m, de->cls, msg, e)) != CDC_OK)
        return rc;
    count_dlq(w, de->cls);
    if (tm != NULL)
        cdc_metrics_counter_inc(tm->nulled);
    cdc_worker_values_nulled(w, c->schema->ns, c->schema->table, msg);
    return CDC_OK;
}

/* A replayed dead letter (docs/worker.md, "Replayed dead letters"), by what dedup made of
 * it: 0 applied, 1 changelog only, 2 duplicate. */
static void count_replayed(cdc_worker_t *w, int result)
{
    static const char *const results[] = {"applied", "changelog_only", "duplicate"};
    if (w->m_replayed[result] == NULL) {
        const char *labels[] = {"result", results[result], NULL};
        w->m_replayed[result] = cdc_metrics_counter(
            w->metrics, "cdc_worker_replayed_records_total",
            "Records put back by cdcctl dlq replay, by what dedup made of them.", labels);
    }
    cdc_metrics_counter_inc(w->m_replayed[result]);
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

/* Processes one message; CDC_OK unless an internal/transient failure stops the batch, or
 * CDC_ERR_CONFIG when the masking policy cannot apply to the record's schema. whole: m is
 * a chunked event put back together (chunks.c), whose value is freed as soon as it is
 * decoded and no dead letter can need it (its values are copies), so that a large event
 * is not held twice through the state store and the stage. */
static cdc_err_t process(cdc_worker_t *w, cdc_slot_t *s, int ti, const cdc_kafka_msg_t *m,
                         cdc_kafka_msg_t *whole, cdc_error_t *e)
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
    cdc_kafka_header_t rh;

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
    if (rc == CDC_OK && w->mask != NULL && (rc = cdc_mask_change(w->mask, &c, e)) != CDC_OK) {
        cdc_change_clear(&c);
        return rc; /* CDC_ERR_CONFIG stops the worker; out of memory is retried */
    }
    if (rc == CDC_ERR_INVALID) {
        cdc_mask_error(w->mask, &de); /* a message quoting a value would carry it clear */
        rc = cdc_worker_dlq_send(w, m, de.cls, de.msg, e);
        if (rc != CDC_OK)
            return rc;
        count_dlq(w, de.cls);
        goto advance;
    }
    if (rc != CDC_OK)
        return cdc_error_set(e, rc, "could not decode record %s[%d]@%" PRId64, m->topic,
                             m->partition, m->offset);
    if (whole != NULL && !cdc_toast_needed(&c))
        cdc_worker_chunk_done(w, whole); /* only a TOAST repair that fails sends it on */
    if (c.tombstone) {
        cdc_metrics_counter_inc(w->m_tombstones);
        cdc_change_clear(&c);
        goto advance;
    }
    if (c.op == CDC_OP_SCHEMA) { /* no rows, nothing in state: a replay stages it again */
        rc = cdc_stage_schema(&s->stage, &c, e);
        cdc_change_clear(&c);
        if (rc != CDC_OK)
            return rc;
        s->dirty = true;
        goto advance;
    }
    cdc_table_metrics_t *tm = cdc_worker_table_metrics(w, c.schema);
    if (tm != NULL)
        cdc_metrics_counter_inc(tm->in);
    /* put back by cdcctl dlq replay: dedup keeps per-row order (dedup.h) */
    c.replayed = cdc_kafka_msg_header(m, CDC_DLQ_H_REPLAY_COUNT, &rh);
    rc = cdc_dedup_check(s->dedup, &c, &verdict, &img, &img_len, e);
    if (rc != CDC_OK)
        goto fail;
    if (verdict == CDC_DEDUP_BEFORE_FLOOR) {
        /* before its table's floor, reached late: the changelog's alone (dedup.h) */
        c.changelog_only = true;
        cdc_metrics_counter_inc(w->m_before_floor);
    } else if (verdict == CDC_DEDUP_LATE_REPLAY) {
        /* a dead letter older than its row's state: the changelog's alone (dedup.h) */
        c.changelog_only = true;
    } else if (verdict != CDC_DEDUP_NEW) {
        if (tm != NULL)
            cdc_metrics_counter_inc(tm->dups);
        if (verdict == CDC_DEDUP_SNAPSHOT_REREAD)
            cdc_metrics_counter_inc(w->m_snapshot_rereads);
        if (c.replayed)
            count_replayed(w, 2);
        free(img);
        cdc_change_clear(&c);
        goto advance;
    }
    cdc_dedup_carry_snapshot(s->dedup, &c, img, img_len);
    /* a column made null: the original record to the DLQ first (durable before the
     * offset moves past it), then the row goes on */
    if (c.nulled > 0 && (rc = dead_letter_nulled(w, tm, m, &c, &de, e)) != CDC_OK) {
        free(img);
        goto fail;
    }
    count_special(w, tm, &c);
    unsigned unknown = 0;
    if (cdc_toast_needed(&c) && cdc_toast_repair(&c, img, img_len, &bad_col, &unknown) != CDC_OK) {
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
    if (unknown > 0)
        count_unknown_toast(w, tm, m, &c, unknown);
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
        /* a value the spec cannot take: the row goes unpartitioned (spec 0), as correct.
         * Logged for the 1st, 10th, 100th ... such row: a table partitioned by the hour of
         * a 'valid until' timestamp has one for every row holding 'infinity' (docs/worker.md,
         * "Values no Iceberg type holds") */
        uint64_t n = ++w->records.unpartitioned_rows;
        cdc_metrics_counter_inc(w->m_unpartitioned);
        bool power_of_ten = true;
        for (uint64_t k = n; k > 1 && power_of_ten; k /= 10)
            power_of_ten = k % 10 == 0;
        if (power_of_ten)
            cdc_log_warn("%s[%d]@%" PRId64 ": %s; the row is written unpartitioned (%" PRIu64
                         " such rows so far)",
                         m->topic, m->partition, m->offset, e->msg, n);
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
    if (rc == CDC_OK && verdict == CDC_DEDUP_LATE_REPLAY)
        rc = cdc_dedup_record_replay(s->dedup, &c, e);
    else if (rc == CDC_OK)
        rc = cdc_dedup_record(s->dedup, &c, mkey, mlen, img, img_len, e);
    if (rc == CDC_OK)
        rc = cdc_stage_add(&s->stage, &c, img != NULL && !c.changelog_only, &parts, e);
    free(mkey);
    free(okey);
    free(img);
    if (rc != CDC_OK)
        goto fail;
    if (tm != NULL)
        cdc_metrics_counter_inc(tm->out);
    if (c.replayed)
        count_replayed(w, verdict == CDC_DEDUP_LATE_REPLAY ? 1 : 0);
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

void cdc_worker_set_paused(cdc_worker_t *w, bool pause)
{
    cdc_error_t e;
    if (w->paused == pause)
        return;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        for (size_t t = 0; w->slots[p].owned && t < w->topics.n; t++) {
            if (!cdc_worker_consumes(w, t))
                continue;
            if (pause)
                cdc_kafka_consumer_pause(w->consumer, cdc_worker_topic(w, t), p, &e);
            else
                cdc_kafka_consumer_resume(w->consumer, cdc_worker_topic(w, t), p, &e);
        }
    w->paused = pause;
    if (pause)
        cdc_log_info("staged data passed --max-staged-bytes (%" PRId64
                     "): fetching paused until the next barrier",
                     w->cfg.max_staged_bytes);
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
 * The first record of a partition read from the beginning is past offset 0. Either the
 * broker deleted offsets 0 to first-1 before this job read them (note_missing_start), or
 * the fetch began past records that are still in Kafka, which must never pass unseen: the
 * log start offset the broker reports (cached from the fetch response, else asked) tells
 * the two apart. In the second case the record is not processed: the partition is fetched
 * again from that log start (cdc_worker_restart_failed(), at the end of this batch) and false is
 * returned. Only an explicit log start below the record counts: with the log start
 * unknown, or a compacted log whose first record lies past it and is fetched again from
 * there (the next offset is then explicit), the record is taken as the start.
 */
static bool start_checked(cdc_worker_t *w, cdc_slot_t *s, int ti, const cdc_kafka_msg_t *m)
{
    int64_t low = -1, high = -1;
    cdc_error_t e;
    if (cdc_kafka_consumer_watermarks(w->consumer, m->topic, m->partition, &low, &high, 0, &e) !=
            CDC_OK ||
        low < 0)
        if (cdc_kafka_consumer_watermarks(w->consumer, m->topic, m->partition, &low, &high, 1000,
                                          &e) != CDC_OK)
            low = -1;
    if (low < 0 || low >= m->offset) {
        note_missing_start(w, m);
        return true;
    }
    cdc_log_warn("partition %d topic \"%s\": read from the beginning, the first record fetched "
                 "is at offset %" PRId64 " but the log starts at %" PRId64
                 ": fetching it again from %" PRId64,
                 m->partition, m->topic, m->offset, low, low);
    s->next_offset[ti] = low;
    s->restart_at[ti] = cdc_clock_mono_ms();
    return false;
}

/*
 * Testing only: with CDC_WORKER_FAULT=stall-fetch[:N] in the environment, the partition
 * of the N-th record processed (default 1; or the first after it with more records of its
 * partition in the batch) stops fetching after it, silently, once, the rest of the batch
 * of that partition dropped: a stall only the progress watchdog can see
 * (tests/integration/worker/test_worker.c). True when it just did. Compiled out of release
 * builds (make FAULT_INJECTION=0), which refuse CDC_WORKER_FAULT at start (worker/main.c).
 */
static bool fault_stall(cdc_worker_t *w, const cdc_kafka_msg_t *msgs, size_t i, size_t n)
{
#if !CDC_FAULTS
    (void)w;
    (void)msgs;
    (void)i;
    (void)n;
    return false;
#else
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
#endif
}

/* The records of msgs[i]'s topic partition after it in the batch are skipped. */
static void skip_partition(cdc_kafka_msg_t *msgs, size_t i, size_t n)
{
    for (size_t k = i + 1; k < n; k++)
        if (msgs[k].partition == msgs[i].partition && strcmp(msgs[k].topic, msgs[i].topic) == 0)
            msgs[k].partition = -1;
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
    int64_t next_poll = cdc_clock_mono_ms() + 5;
    for (size_t i = 0; i < n; i++) {
        const cdc_kafka_msg_t *m = &msgs[i];
        int ti = cdc_worker_topic_index(w, m->topic);
        cdc_slot_t *s;
        /* Serve barriers between records, not only between batches. */
        if ((i & 31) == 0 && cdc_clock_mono_ms() >= next_poll) {
            if (cdc_worker_poll_control(w) || !w->assigned)
                break; /* reassigned or aborted: the rest of the batch is void */
            next_poll = cdc_clock_mono_ms() + 5;
        }
        if (ti < 0 || !cdc_worker_consumes(w, (size_t)ti) || m->partition < 0 ||
            m->partition >= CDC_WORKER_PARTITIONS)
            continue;
        s = &w->slots[m->partition];
        if (!s->owned || (s->next_offset[ti] >= 0 && m->offset < s->next_offset[ti]))
            continue; /* stale fetch from before a seek */
        if (s->next_offset[ti] == CDC_KAFKA_OFFSET_BEGINNING && m->offset > 0 &&
            !start_checked(w, s, ti, m)) {
            skip_partition(msgs, i, n); /* fetched again from the log start */
            continue;
        }
        /* a chunk of a large event is put back together first (chunks.c) */
        cdc_kafka_msg_t whole;
        const cdc_kafka_msg_t *pm = m;
        cdc_worker_chunk_result_t ck = cdc_worker_chunk(w, s, ti, m, &whole, e);
        if (ck == CDC_WORKER_CHUNK_TAKEN)
            continue;
        if (ck == CDC_WORKER_CHUNK_FAILED) {
            prc = e->code != CDC_OK ? e->code : CDC_ERR_INTERNAL;
        } else {
            if (ck == CDC_WORKER_CHUNK_WHOLE)
                pm = &whole;
            prc = process(w, s, ti, pm, ck == CDC_WORKER_CHUNK_WHOLE ? &whole : NULL, e);
            if (ck == CDC_WORKER_CHUNK_WHOLE) {
                cdc_worker_chunk_done(w, &whole);
                if (prc == CDC_OK)
                    s->next_offset[ti] = m->offset + 1; /* past its last chunk */
            }
        }
        if (prc == CDC_ERR_CONFIG)
            break; /* a masking policy that cannot apply: the worker stops (session.c) */
        if (prc == CDC_OK && fault_stall(w, msgs, i, n)) {
            skip_partition(msgs, i, n); /* dropped, like a fetch that stopped */
            continue;
        }
        if (prc != CDC_OK) {
            /* Transient failure: rewind this partition to the failed record and retry. The
             * record is the next to process; a seek that failed (a partition librdkafka no
             * longer fetches) becomes an assignment again from it. */
            cdc_error_t e2;
            /* a chunked event: from its first chunk */
            int64_t at = cdc_worker_chunk_resume(s, (size_t)ti, pm->offset);
            cdc_worker_chunk_reset(s, (size_t)ti);
            s->next_offset[ti] = at;
            if (cdc_kafka_consumer_seek(w->consumer, m->topic, m->partition, at, 1000, &e2) !=
                CDC_OK) {
                cdc_log_warn("partition %d topic \"%s\": %s; assigning it again from offset "
                             "%" PRId64,
                             m->partition, m->topic, e2.msg, at);
                s->restart_at[ti] = cdc_clock_mono_ms();
            }
            skip_partition(msgs, i, n);
            cdc_log_warn("partition %d: %s; retrying", m->partition, e->msg);
        }
    }
    cdc_kafka_msgs_release(msgs, n);
    /* One state write per partition and batch (dedup keeps them pending until here). */
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_error_t e2;
        if (w->slots[p].owned && w->slots[p].dedup != NULL &&
            cdc_dedup_flush(w->slots[p].dedup, &e2) != CDC_OK) {
            cdc_log_warn("partition %d: %s; retrying at the next batch", p, e2.msg);
            cdc_worker_disk_failed(w, &e2);
        }
    }
    if (!w->paused && w->cfg.max_staged_bytes > 0 &&
        staged_bytes(w) > (size_t)w->cfg.max_staged_bytes)
        cdc_worker_set_paused(w, true);
    cdc_worker_restart_failed(w);
    if (prc == CDC_ERR_CONFIG)
        return prc;
    if (rc != CDC_OK && rc != CDC_ERR_TIMEOUT) {
        int64_t now = cdc_clock_mono_ms();
        if (now - last_err_log > 5000) {
            cdc_log_warn("kafka consumer: %s", e->msg);
            last_err_log = now;
        }
        return CDC_OK; /* unknown topics etc.: keep going; the capture creates them */
    }
    return prc == CDC_OK ? CDC_OK : prc;
}
