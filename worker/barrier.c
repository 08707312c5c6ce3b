/*
 * The barrier (docs/design.md, "The epoch protocol"; docs/worker.md): the record thread
 * cuts the epoch at a record boundary (each owned partition's next offsets, its stage
 * and its state store held as of now) and hands it to the finalizer thread, which writes
 * the epoch's files, checkpoints the state (each partition in parallel), builds the Ack
 * (files, schemas, truncates, floors, partition states) and sends it, while the record
 * thread keeps consuming the next epoch. Committed{epoch} drops the checkpoints no longer
 * needed, on the same thread. *
 * A call circle of three files (docs/development.md, "Call circles"): session.c runs the
 * main loop and hands it to consume.c for records and to barrier.c for Barrier and
 * Committed; the record loop polls the control link between batches (session.c) and
 * starts and waits for the finalizer (barrier.c); the finalizer pauses fetching while
 * staged bytes are over their budget (consume.c) and sends its Ack on the link
 * (session.c). Everything else in worker/ sits below these three.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/assert.h"
#include "common/clock.h"
#include "common/iceberg/parquet.h"
#include "common/buf.h"
#include "common/iceberg/schema.h"
#include "common/log.h"
#include "common/state.h"
#include "worker/worker.h"

/* ---- the Ack ------------------------------------------------------------------------- */

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

/* A SchemaUpdate built by add_schema (every string malloc'd). */
static void free_schema_update(Cdc__SchemaUpdate *su)
{
    free(su->table);
    free(su->schema_json);
    free(su->mask_policy);
    free(su);
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
    for (size_t i = 0; i < ack->n_schemas; i++)
        free_schema_update(ack->schemas[i]);
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
    Cdc__TableFloor *f;
    if (cdc_array_resize(ack->floors, ack->n_floors + 1) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
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
        Cdc__TableTruncate *tt;
        char name[300];
        cdc_err_t rc;
        if (!t->truncated)
            continue;
        if (cdc_array_resize(ack->truncates, ack->n_truncates + 1) != CDC_OK)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
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

/* b = a copy of p[0..n) (data NULL when out of memory). */
static void copy_binary(ProtobufCBinaryData *b, const uint8_t *p, size_t n)
{
    b->data = malloc(n ? n : 1);
    if (b->data != NULL && n)
        memcpy(b->data, p, n);
    b->len = n;
}

static Cdc__ColumnStats *stats_to_proto(const cdc_ice_col_stats_t *st)
{
    Cdc__ColumnStats *cs = calloc(1, sizeof(*cs));
    if (cs == NULL)
        return NULL;
    cdc__column_stats__init(cs);
    cs->field_id = st->field_id;
    cs->column_size = st->column_size;
    cs->value_count = st->value_count;
    cs->null_count = st->null_count;
    cs->has_bounds = st->has_bounds;
    if (st->has_bounds) {
        copy_binary(&cs->lower_bound, st->lower, st->lower_len);
        copy_binary(&cs->upper_bound, st->upper, st->upper_len);
    }
    return cs;
}

static Cdc__PartitionValue *part_value_to_proto(const cdc_ice_part_value_t *v)
{
    Cdc__PartitionValue *pv = calloc(1, sizeof(*pv));
    if (pv != NULL) {
        cdc__partition_value__init(pv);
        pv->is_null = v->null;
        if (!v->null)
            copy_binary(&pv->value, v->bytes, v->len);
    }
    return pv;
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
    f->spec_id = sf->df.spec_id;
    f->sort_order_id = sf->df.sort_order_id;
    f->stats = calloc(sf->df.nstats + 1, sizeof(*f->stats));
    for (size_t i = 0; f->stats != NULL && i < sf->df.nstats; i++) {
        if ((f->stats[f->n_stats] = stats_to_proto(&sf->df.stats[i])) == NULL)
            break;
        f->n_stats++;
    }
    f->partition_values = calloc(sf->df.npartition + 1, sizeof(*f->partition_values));
    for (size_t i = 0; f->partition_values != NULL && i < sf->df.npartition; i++) {
        if ((f->partition_values[f->n_partition_values] =
                 part_value_to_proto(&sf->df.partition[i])) == NULL)
            break;
        f->n_partition_values++;
    }
    /* all or nothing: a file described in part (no equality ids, stats or partition
     * values) would be committed wrong */
    if (f->table == NULL || f->path == NULL ||
        (sf->df.nequality_ids > 0 && f->equality_ids == NULL) || f->stats == NULL ||
        f->n_stats != sf->df.nstats || f->partition_values == NULL ||
        f->n_partition_values != sf->df.npartition) {
        free_staged(f);
        return NULL;
    }
    return f;
}

static bool add_schema(Cdc__Ack *ack, const char *table, char *json, int64_t version,
                       const char *mask_policy)
{
    for (size_t i = 0; i < ack->n_schemas; i++)
        if (strcmp(ack->schemas[i]->table, table) == 0) {
            free(json);
            return true;
        }
    bool grown = cdc_array_resize(ack->schemas, ack->n_schemas + 1) == CDC_OK;
    Cdc__SchemaUpdate *su = calloc(1, sizeof(*su));
    if (!grown || su == NULL || json == NULL) {
        free(su);
        free(json);
        return false;
    }
    cdc__schema_update__init(su);
    su->table = strdup(table);
    su->schema_json = json;
    su->source_version = version;
    su->mask_policy = strdup(mask_policy); /* always malloc'd: free_schema_update */
    ack->schemas[ack->n_schemas++] = su;
    return su->table != NULL && su->mask_policy != NULL;
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

/* ---- barrier: cut on the record thread, finish on the finalizer thread ------------- */

/* One topic of a partition at the cut. */
typedef struct cut_topic {
    int64_t next_offset; /* at the cut */
    int64_t high;        /* last known high watermark at the cut */
    int64_t stalled_ms;  /* progress watchdog at the cut (0 = fine) */
    bool consumed;       /* one of the job's tables at the cut */
} cut_topic_t;

/* One partition's share of a cut epoch. */
typedef struct snap_part {
    cdc_worker_t *w;
    cdc_slot_t *s; /* its ckpt and last_handle belong to the finalizer until done */
    uint64_t epoch;
    cdc_stage_t stage; /* the epoch's stage (owned) */
    /* Per topic of w->topics at the cut (ntopics of them, index t of w->topics), copied
     * from the slot: the slot's own arrays belong to the record thread, which goes on
     * and may grow them. Allocated with the cut, freed with the job (job_free). */
    cut_topic_t *topics;
    size_t ntopics;
    bool checkpoint; /* state changed: store held at the cut */
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
    double c0 = cdc_clock_mono_s();

    snprintf(name, sizeof(name), "ckpt-%" PRIu64 "-%" PRIu64, epoch, w->incarnation);
    dir = cdc_worker_join(s->ckpt.local_root, name);
    if (dir == NULL) {
        cdc_dedup_release(s->dedup);
        j->ckpt_rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    cdc_state_destroy(dir, e);
    int64_t t0 = cdc_clock_mono_ms();
    rc = cdc_dedup_checkpoint_cut(s->dedup, dir, e);
    for (int attempt = 0; rc == CDC_OK; attempt++) {
        if (atomic_load(&w->fin.cancel)) {
            rc = cdc_error_set(e, CDC_ERR_UNAVAILABLE, "epoch abandoned");
            break;
        }
        rc = cdc_ckpt_upload(&s->ckpt, epoch, dir, &handle, &st, e);
        if (rc == CDC_OK || attempt >= CDC_WORKER_STORAGE_RETRIES || !e->retriable)
            break;
    }
    free(dir);
    free(s->last_handle);
    s->last_handle = NULL; /* the next cut checkpoints again when this one failed */
    if (rc == CDC_OK) {
        cdc_metrics_counter_add(w->m_ckpt_bytes, (double)st.bytes_uploaded);
        cdc_metrics_histogram_observe(w->m_ckpt_seconds, cdc_clock_mono_s() - c0);
        s->last_handle = strdup(handle);
        if (s->last_handle == NULL)
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    } else {
        cdc_error_prefix(e, "could not checkpoint partition %u for epoch %" PRIu64, s->partition,
                         epoch);
    }
    j->ckpt_rc = rc;
    j->ckpt_ms = cdc_clock_mono_ms() - t0;
    return NULL;
}

/* Writes the partition's files of the cut epoch (durable: fsynced or uploaded). */
static cdc_err_t write_files(snap_part_t *j, cdc_stage_file_t **files, size_t *nfiles)
{
    cdc_worker_t *w = j->w;
    cdc_stage_write_options_t wo = {w->cfg.warehouse, w->cfg.job, cdc_worker_stage_codec(w)};
    cdc_err_t rc;
    double t0 = cdc_clock_mono_s();

    *files = NULL;
    *nfiles = 0;
    for (int attempt = 0;; attempt++) {
        if (atomic_load(&w->fin.cancel))
            return cdc_error_set(&j->e, CDC_ERR_UNAVAILABLE, "epoch abandoned");
        rc = cdc_stage_write(&j->stage, w->storage, &wo, files, nfiles, &j->e);
        if (rc == CDC_OK || attempt >= CDC_WORKER_STORAGE_RETRIES || !j->e.retriable)
            break;
    }
    if (rc == CDC_OK)
        cdc_metrics_histogram_observe(w->m_stage_seconds, cdc_clock_mono_s() - t0);
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
    int64_t t0 = cdc_clock_mono_ms();
    rc = write_files(j, &files, &nfiles);
    j->files_ms = cdc_clock_mono_ms() - t0;
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
        /* the policy the rows were masked with (worker/mask.h), recorded by the committer */
        const char *policy = cdc_mask_table_policy(j->w->mask, t->ns, t->table);
        bool ok = add_schema(ack, name, table_schema_json(t->schema, CDC_STAGE_MIRROR_DATA),
                             version, policy);
        snprintf(name, sizeof(name), "%s.%s_changelog", t->ns, t->table);
        ok = ok && add_schema(ack, name, table_schema_json(t->schema, CDC_STAGE_CHANGELOG), version,
                              policy);
        if (!ok) { /* an Ack without the schema would commit files the table cannot read */
            cdc_stage_files_free(files, nfiles);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory building the Ack's schemas");
        }
    }
    if (cdc_array_resize(ack->files, ack->n_files + nfiles + 1) != CDC_OK) {
        cdc_stage_files_free(files, nfiles);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < nfiles; i++) {
        Cdc__StagedFile *f = to_proto(&files[i], s->partition);
        if (f == NULL) { /* a file left out of the Ack would never be committed: fail */
            cdc_stage_files_free(files, nfiles);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory building the Ack's files");
        }
        ack->files[ack->n_files++] = f;
    }
    cdc_stage_files_free(files, nfiles);
    if ((rc = add_truncates(ack, &j->stage, e)) != CDC_OK)
        return rc;

    Cdc__PartitionState *ps = calloc(1, sizeof(*ps));
    if (ps == NULL || cdc_array_resize(ack->partitions, ack->n_partitions + 1) != CDC_OK) {
        free(ps);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    cdc__partition_state__init(ps);
    ps->partition = s->partition;
    ps->state_handle = strdup(s->last_handle ? s->last_handle : "");
    ps->offsets = calloc(j->ntopics + 1, sizeof(*ps->offsets));
    for (size_t t = 0; ps->offsets != NULL && t < j->ntopics; t++) {
        Cdc__TopicOffset *to;
        const cut_topic_t *ct = &j->topics[t];
        if (!ct->consumed)
            continue; /* not one of the job's tables now */
        if ((to = calloc(1, sizeof(*to))) == NULL)
            break;
        cdc__topic_offset__init(to);
        /* borrowed: not freed by cdc_worker_ack_free; t is below the count loaded at the
         * cut, so the name is there for the life of the process (worker.h) */
        to->topic = cdc_worker_topic(w, t);
        to->next_offset = ct->next_offset;
        to->high_watermark = ct->high > 0 ? ct->high : 0; /* for the leader's /status */
        to->stalled_ms = ct->stalled_ms;
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
                free_schema_update(p->schemas[k]);
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

/* Frees a cut epoch (its stages already freed or moved). */
static void job_free(cdc_snap_job_t *job)
{
    for (int i = 0; job != NULL && i < job->n; i++)
        free(job->parts[i].topics);
    free(job);
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
        if (!atomic_load(&w->fin.cancel)) {
            cdc_log_error("could not snapshot epoch %" PRIu64 ": %s", job->epoch, e.msg);
            cdc_worker_disk_failed(w, &e);
        }
        cdc_worker_ack_free(&ack);
        free_stages(job);
        return;
    }
    ack.term = job->term;
    ack.generation = job->generation;
    ack.epoch = job->epoch;
    if (!atomic_load(&w->fin.cancel) && cdc_worker_send_ack(w, &ack)) {
        int64_t files_ms = 0, ckpt_ms = 0;
        for (int i = 0; i < n; i++) {
            files_ms = job->parts[i].files_ms > files_ms ? job->parts[i].files_ms : files_ms;
            ckpt_ms = job->parts[i].ckpt_ms > ckpt_ms ? job->parts[i].ckpt_ms : ckpt_ms;
        }
        cdc_metrics_counter_inc(w->m_epochs);
        /* files or state checkpoints written: their disks have room again (an epoch that
         * wrote nothing proves nothing) */
        bool checkpointed = false;
        for (int i = 0; i < n; i++)
            checkpointed = checkpointed || job->parts[i].checkpoint;
        if (checkpointed)
            cdc_diskfull_ok(&w->disk_state);
        if (checkpointed || ack.n_files > 0)
            cdc_diskfull_ok(&w->disk_warehouse);
        cdc_log_debug("acked epoch %" PRIu64 " (%zu partitions, %zu files) %" PRId64
                      " ms after the cut (slowest partition: files %" PRId64
                      " ms, state checkpoint %" PRId64 " ms)",
                      job->epoch, ack.n_partitions, ack.n_files, cdc_clock_mono_ms() - job->cut_ms,
                      files_ms, ckpt_ms);
    }
    cdc_worker_ack_free(&ack);
    free_stages(job);
}

static void *finalizer_main(void *arg)
{
    cdc_worker_t *w = arg;
    pthread_mutex_lock(&w->fin.lock);
    for (;;) {
        while (!w->fin.stop && w->fin.job == NULL && w->fin.gc_epoch == 0)
            pthread_cond_wait(&w->fin.cond, &w->fin.lock);
        if (w->fin.job == NULL && w->fin.gc_epoch == 0)
            break; /* stopping, nothing left */
        cdc_snap_job_t *job = w->fin.job;
        uint64_t gc = w->fin.gc_epoch;
        w->fin.gc_epoch = 0;
        w->fin.busy = true;
        pthread_mutex_unlock(&w->fin.lock);
        if (job != NULL)
            finish_job(w, job);
        if (gc != 0) {
            /* Committed{gc}: checkpoints older than the one of gc are not needed. */
            for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
                if (w->slots[p].owned && w->slots[p].ckpt_ready)
                    cdc_ckpt_gc(&w->slots[p].ckpt, gc);
        }
        pthread_mutex_lock(&w->fin.lock);
        if (job != NULL && w->fin.job == job)
            w->fin.job = NULL;
        job_free(job);
        w->fin.busy = false;
        pthread_cond_broadcast(&w->fin.cond);
    }
    pthread_mutex_unlock(&w->fin.lock);
    return NULL;
}

void cdc_worker_finalizer_wait(cdc_worker_t *w, bool cancel)
{
    if (!w->fin.running)
        return;
    pthread_mutex_lock(&w->fin.lock);
    if (cancel) {
        atomic_store(&w->fin.cancel, true);
        w->fin.gc_epoch = 0;
    }
    while (w->fin.job != NULL || w->fin.busy || w->fin.gc_epoch != 0)
        pthread_cond_wait(&w->fin.cond, &w->fin.lock);
    atomic_store(&w->fin.cancel, false);
    pthread_mutex_unlock(&w->fin.lock);
}

void cdc_worker_finalizer_init(cdc_worker_t *w)
{
    pthread_mutex_init(&w->fin.lock, NULL);
    pthread_cond_init(&w->fin.cond, NULL);
}

cdc_err_t cdc_worker_finalizer_start(cdc_worker_t *w, cdc_error_t *e)
{
    if (pthread_create(&w->fin.thread, NULL, finalizer_main, w) != 0)
        return cdc_error_set(e, CDC_ERR_INTERNAL, "could not start the finalizer thread");
    w->fin.running = true;
    return CDC_OK;
}

void cdc_worker_finalizer_stop(cdc_worker_t *w)
{
    if (!w->fin.running)
        return;
    cdc_worker_finalizer_wait(w, true);
    pthread_mutex_lock(&w->fin.lock);
    w->fin.stop = true;
    pthread_cond_broadcast(&w->fin.cond);
    pthread_mutex_unlock(&w->fin.lock);
    pthread_join(w->fin.thread, NULL);
    w->fin.running = false;
}

void cdc_worker_disk_failed(cdc_worker_t *w, const cdc_error_t *e)
{
    const char *dir = w->cfg.state_dir;
    bool state = dir != NULL && dir[0] != '\0' && strstr(e->msg, dir) != NULL;
    cdc_diskfull_failed(state ? &w->disk_state : &w->disk_warehouse, e);
}

cdc_err_t cdc_worker_barrier(cdc_worker_t *w, uint64_t term, uint64_t generation, uint64_t epoch,
                             cdc_error_t *e)
{
    int64_t t0 = cdc_clock_mono_ms();
    cdc_snap_job_t *job;
    uint32_t failed;

    if (!w->fin.running)
        return cdc_error_set(e, CDC_ERR_INTERNAL, "the finalizer thread is not running");
    /* One epoch in the finalizer at a time: it owns the checkpoint chain. */
    cdc_worker_finalizer_wait(w, false);
    int64_t waited = cdc_clock_mono_ms() - t0;
    if (waited > 50)
        cdc_log_debug("barrier %" PRIu64 ": waited %" PRId64 " ms for the previous epoch's files",
                      epoch, waited);
    job = calloc(1, sizeof(*job));
    if (job == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    job->term = term;
    job->generation = generation;
    job->epoch = epoch;
    job->cut_ms = cdc_clock_mono_ms();
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        snap_part_t *j;
        if (!s->owned)
            continue;
        CDC_ASSERT(s->partition == (uint32_t)p);
        j = &job->parts[job->n];
        j->w = w;
        j->s = s;
        j->epoch = epoch;
        j->checkpoint = s->dirty || s->last_handle == NULL;
        /* sized to the topics at the cut (however many; at least one entry allocated) */
        j->ntopics = atomic_load_explicit(&w->topics.n, memory_order_acquire);
        if (cdc_array_resize(j->topics, j->ntopics) != CDC_OK) {
            cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            j->checkpoint = false;
            goto fail;
        }
        /* The store as of this record boundary: the accepted changes are written, later
         * ones stay in the dedup overlay until the checkpoint has copied the store. */
        if (j->checkpoint && cdc_dedup_cut(s->dedup, e) != CDC_OK) {
            j->checkpoint = false;
            goto fail;
        }
        for (size_t t = 0; t < j->ntopics; t++)
            j->topics[t] = (cut_topic_t){
                /* a chunked event cut in the middle is read again whole (chunks.c) */
                .next_offset = cdc_worker_chunk_resume(s, t, s->next_offset[t]),
                .high = s->high[t],
                .stalled_ms =
                    s->stalled_since[t] != 0 ? cdc_clock_mono_ms() - s->stalled_since[t] : 0,
                .consumed = cdc_worker_consumes(w, t),
            };
        j->stage = s->stage; /* moved */
        j->stage.epoch = epoch;
        cdc_stage_init(&s->stage, s->partition, epoch + 1);
        cdc_stage_set_encoding(&s->stage, cdc_worker_stage_codec(w), CDC_STAGE_ENCODE_ROWS);
        cdc__ack__init(&j->part);
        s->dirty = false;
        job->n++;
    }
    pthread_mutex_lock(&w->fin.lock);
    /* one epoch in the finalizer at a time (the wait above): it owns the checkpoint chain */
    CDC_ASSERT(w->fin.job == NULL);
    w->fin.job = job;
    pthread_cond_broadcast(&w->fin.cond);
    pthread_mutex_unlock(&w->fin.lock);
    cdc_worker_set_paused(w, false);
    return CDC_OK;
fail:
    /* the partition job->n failed: nothing of its own held but its topics */
    failed = job->parts[job->n].s->partition;
    free(job->parts[job->n].topics);
    for (int i = 0; i < job->n; i++)
        if (job->parts[i].checkpoint)
            cdc_dedup_release(job->parts[i].s->dedup);
    /* the stages moved so far are lost with the epoch: the abort replays */
    for (int i = 0; i < job->n; i++)
        cdc_stage_free(&job->parts[i].stage);
    job_free(job);
    return cdc_error_prefix(e, "partition %u", failed);
}

void cdc_worker_committed(cdc_worker_t *w, uint64_t epoch)
{
    if (!w->fin.running)
        return;
    pthread_mutex_lock(&w->fin.lock);
    if (epoch > w->fin.gc_epoch)
        w->fin.gc_epoch = epoch;
    pthread_cond_broadcast(&w->fin.cond);
    pthread_mutex_unlock(&w->fin.lock);
}

/* The Parquet codec of the epoch's files (--compression; zstd by default). */
int cdc_worker_stage_codec(const cdc_worker_t *w)
{
    cdc_pq_codec_t codec = CDC_PQ_CODEC_ZSTD;
    if (w->cfg.compression != NULL)
        cdc_pq_codec_parse(w->cfg.compression, &codec);
    return (int)codec;
}
