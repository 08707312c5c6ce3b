/*
 * Epoch bookkeeping for one generation (see epoch.h). Acks are validated completely
 * before any of their content is merged, so a rejected ack leaves no trace.
 */
#include "coordinator/epoch.h"

#include "common/msg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cdc_ack_result_str(cdc_ack_result_t r)
{
    switch (r) {
    case CDC_ACK_ACCEPTED:
        return "accepted";
    case CDC_ACK_COMPLETE:
        return "complete";
    case CDC_ACK_STALE:
        return "stale term or generation";
    case CDC_ACK_UNKNOWN_EPOCH:
        return "unknown epoch";
    case CDC_ACK_NOT_OWNER:
        return "partition not owned by sender";
    case CDC_ACK_DUPLICATE:
        return "partition already acked";
    case CDC_ACK_INVALID:
        return "invalid ack";
    }
    return "unknown";
}

void cdc_epochs_init(cdc_epochs_t *t, const char *job)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->job, sizeof(t->job), "%s", job ? job : "");
}

void cdc_epochs_clear(cdc_epochs_t *t)
{
    for (int i = 0; i < t->nopen; i++)
        cdc_checkpoint_free(t->open[i].rec);
    t->nopen = 0;
}

void cdc_epochs_reset(cdc_epochs_t *t, uint64_t term, uint64_t generation,
                      const char *const owner[CDC_PARTITIONS])
{
    cdc_epochs_clear(t);
    t->term = term;
    t->generation = generation;
    memset(t->slot_acked_ms, 0, sizeof(t->slot_acked_ms));
    for (int p = 0; p < CDC_PARTITIONS; p++)
        snprintf(t->owner[p], sizeof(t->owner[p]), "%s", owner && owner[p] ? owner[p] : "");
}

void cdc_epochs_reserve(cdc_epochs_t *t, uint64_t from, uint64_t limit)
{
    if (from < t->next_epoch)
        from = t->next_epoch;
    if (t->next_epoch >= t->limit || from > t->next_epoch)
        t->next_epoch = from;
    if (limit > t->limit)
        t->limit = limit;
}

uint64_t cdc_epochs_remaining(const cdc_epochs_t *t)
{
    return t->limit > t->next_epoch ? t->limit - t->next_epoch : 0;
}

cdc_err_t cdc_epochs_begin(cdc_epochs_t *t, int64_t now_ms, int64_t wall_ms, uint64_t *epoch)
{
    cdc_epoch_open_t *o;

    if (t->next_epoch >= t->limit || t->next_epoch == 0)
        return CDC_ERR_UNAVAILABLE;
    if (t->nopen >= CDC_EPOCH_MAX_INFLIGHT)
        return CDC_ERR_CONFLICT;
    o = &t->open[t->nopen];
    memset(o, 0, sizeof(*o));
    o->rec = cdc_checkpoint_new(t->job, t->next_epoch, t->term, t->generation);
    if (o->rec == NULL)
        return CDC_ERR_NOMEM;
    o->epoch = t->next_epoch++;
    o->barrier_ms = now_ms;
    o->barrier_wall = wall_ms;
    o->rec->barrier_ms = wall_ms;
    for (int p = 0; p < CDC_PARTITIONS; p++)
        snprintf(o->rec->partitions[p].owner, sizeof(o->rec->partitions[p].owner), "%s",
                 t->owner[p]);
    t->nopen++;
    *epoch = o->epoch;
    return CDC_OK;
}

static cdc_err_t merge_file(cdc_checkpoint_t *rec, const Cdc__StagedFile *sf)
{
    cdc_staged_file_t f;
    cdc_ice_col_stats_t *stats = NULL;
    cdc_ice_part_value_t *parts = NULL;
    cdc_err_t rc;

    memset(&f, 0, sizeof(f));
    f.table = sf->table;
    f.partition = sf->partition;
    f.file.content = (cdc_ice_content_t)sf->content;
    f.file.path = sf->path;
    f.file.record_count = sf->record_count;
    f.file.file_size_in_bytes = sf->file_size_in_bytes;
    f.file.schema_id = sf->schema_id;
    f.file.equality_ids = sf->equality_ids;
    f.file.nequality_ids = sf->n_equality_ids;
    if (sf->n_stats > 0) {
        stats = calloc(sf->n_stats, sizeof(*stats));
        if (stats == NULL)
            return CDC_ERR_NOMEM;
        for (size_t i = 0; i < sf->n_stats; i++) {
            const Cdc__ColumnStats *cs = sf->stats[i];
            stats[i].field_id = cs->field_id;
            stats[i].column_size = cs->column_size;
            stats[i].value_count = cs->value_count;
            stats[i].null_count = cs->null_count;
            stats[i].nan_count = -1;
            if (cs->has_bounds && cs->lower_bound.len <= sizeof(stats[i].lower) &&
                cs->upper_bound.len <= sizeof(stats[i].upper)) {
                stats[i].has_bounds = true;
                if (cs->lower_bound.len)
                    memcpy(stats[i].lower, cs->lower_bound.data, cs->lower_bound.len);
                if (cs->upper_bound.len)
                    memcpy(stats[i].upper, cs->upper_bound.data, cs->upper_bound.len);
                stats[i].lower_len = cs->lower_bound.len;
                stats[i].upper_len = cs->upper_bound.len;
            }
        }
    }
    f.file.stats = stats;
    f.file.nstats = sf->n_stats;
    f.file.spec_id = sf->spec_id;
    f.file.sort_order_id = sf->sort_order_id;
    if (sf->n_partition_values > 0) {
        /* borrowed bytes: cdc_checkpoint_add_file copies */
        parts = calloc(sf->n_partition_values, sizeof(*parts));
        if (parts == NULL) {
            free(stats);
            return CDC_ERR_NOMEM;
        }
        for (size_t i = 0; i < sf->n_partition_values; i++) {
            parts[i].null = sf->partition_values[i]->is_null;
            parts[i].bytes = sf->partition_values[i]->value.data;
            parts[i].len = sf->partition_values[i]->value.len;
        }
    }
    f.file.partition = parts;
    f.file.npartition = sf->n_partition_values;
    rc = cdc_checkpoint_add_file(rec, &f);
    free(stats);
    free(parts);
    return rc;
}

cdc_ack_result_t cdc_epochs_ack(cdc_epochs_t *t, const Cdc__Ack *ack, int64_t wall_ms,
                                cdc_error_t *e)
{
    cdc_epoch_open_t *o = NULL;
    cdc_pset_t slots = 0;
    const char *wid = ack->worker_id ? ack->worker_id : "";

    if (ack->term != t->term || ack->generation != t->generation) {
        cdc_error_set(e, CDC_ERR_STALE,
                      "ack of epoch %" PRIu64 " from worker \"%s\" has term %" PRIu64
                      " generation %" PRIu64 ", current term %" PRIu64 " generation %" PRIu64,
                      ack->epoch, wid, ack->term, ack->generation, t->term, t->generation);
        return CDC_ACK_STALE;
    }
    for (int i = 0; i < t->nopen; i++)
        if (t->open[i].epoch == ack->epoch)
            o = &t->open[i];
    if (o == NULL) {
        cdc_error_set(e, CDC_ERR_STALE,
                      "ack from worker \"%s\" for epoch %" PRIu64 " that is not open", wid,
                      ack->epoch);
        return CDC_ACK_UNKNOWN_EPOCH;
    }
    for (size_t i = 0; i < ack->n_partitions; i++) {
        uint32_t p = ack->partitions[i]->partition;
        if (p >= CDC_PARTITIONS) {
            cdc_error_set(e, CDC_ERR_PROTOCOL, "ack from worker \"%s\" names partition %u", wid, p);
            return CDC_ACK_INVALID;
        }
        if (strcmp(t->owner[p], wid) != 0) {
            cdc_error_set(e, CDC_ERR_STALE,
                          "worker \"%s\" acked partition %u of epoch %" PRIu64
                          " which is owned by \"%s\"",
                          wid, p, ack->epoch, t->owner[p]);
            return CDC_ACK_NOT_OWNER;
        }
        if ((o->acked | slots) & (1u << p)) {
            cdc_error_set(e, CDC_ERR_PROTOCOL,
                          "worker \"%s\" acked partition %u of epoch %" PRIu64 " twice", wid, p,
                          ack->epoch);
            return CDC_ACK_DUPLICATE;
        }
        slots |= (cdc_pset_t)(1u << p);
    }
    for (size_t i = 0; i < ack->n_files; i++) {
        const Cdc__StagedFile *sf = ack->files[i];
        if (sf->partition >= CDC_PARTITIONS || !(slots & (1u << sf->partition)) ||
            sf->table == NULL || sf->table[0] == '\0' || sf->path == NULL || sf->path[0] == '\0') {
            cdc_error_set(e, CDC_ERR_PROTOCOL,
                          "worker \"%s\" sent file \"%s\" for partition %u outside its ack", wid,
                          sf->path ? sf->path : "", sf->partition);
            return CDC_ACK_INVALID;
        }
    }

    for (size_t i = 0; i < ack->n_truncates; i++) {
        const Cdc__TableTruncate *tt = ack->truncates[i];
        if (tt->partition >= CDC_PARTITIONS || !(slots & (1u << tt->partition)) ||
            tt->table == NULL || tt->table[0] == '\0') {
            cdc_error_set(e, CDC_ERR_PROTOCOL,
                          "worker \"%s\" sent a truncate of \"%s\" for partition %u outside its "
                          "ack",
                          wid, tt->table ? tt->table : "", tt->partition);
            return CDC_ACK_INVALID;
        }
    }

    for (size_t i = 0; i < ack->n_floors; i++) {
        const Cdc__TableFloor *tf = ack->floors[i];
        if (tf->partition >= CDC_PARTITIONS || !(slots & (1u << tf->partition)) ||
            tf->table == NULL || tf->table[0] == '\0') {
            cdc_error_set(e, CDC_ERR_PROTOCOL,
                          "worker \"%s\" sent a floor of \"%s\" for partition %u outside its ack",
                          wid, tf->table ? tf->table : "", tf->partition);
            return CDC_ACK_INVALID;
        }
    }

    /* valid: merge */
    for (size_t i = 0; i < ack->n_partitions; i++) {
        const Cdc__PartitionState *ps = ack->partitions[i];
        for (size_t j = 0; j < ps->n_offsets; j++)
            if (cdc_checkpoint_set_offset(o->rec, ps->partition, ps->offsets[j]->topic,
                                          ps->offsets[j]->next_offset) != CDC_OK)
                goto nomem;
        if (cdc_checkpoint_set_state(o->rec, ps->partition, ps->state_handle) != CDC_OK)
            goto nomem;
    }
    for (size_t i = 0; i < ack->n_files; i++)
        if (merge_file(o->rec, ack->files[i]) != CDC_OK)
            goto nomem;
    for (size_t i = 0; i < ack->n_schemas; i++)
        if (cdc_checkpoint_add_masked_schema(
                o->rec, ack->schemas[i]->table, ack->schemas[i]->schema_json,
                ack->schemas[i]->source_version, ack->schemas[i]->mask_policy) != CDC_OK)
            goto nomem;
    for (size_t i = 0; i < ack->n_truncates; i++)
        if (cdc_checkpoint_add_truncate(o->rec, ack->truncates[i]->table,
                                        ack->truncates[i]->partition) != CDC_OK)
            goto nomem;
    for (size_t i = 0; i < ack->n_floors; i++)
        if (cdc_checkpoint_add_floor(o->rec, ack->floors[i]->table, ack->floors[i]->commit_lsn,
                                     ack->floors[i]->lsn, ack->floors[i]->partition) != CDC_OK)
            goto nomem;
    o->acked |= slots;
    if (o->acked == CDC_PSET_ALL) {
        o->rec->completed_ms = wall_ms;
        return CDC_ACK_COMPLETE;
    }
    return CDC_ACK_ACCEPTED;
nomem:
    cdc_error_set(e, CDC_ERR_NOMEM, "out of memory merging ack of epoch %" PRIu64, ack->epoch);
    return CDC_ACK_INVALID;
}

cdc_checkpoint_t *cdc_epochs_take_complete(cdc_epochs_t *t)
{
    cdc_checkpoint_t *rec;

    if (t->nopen == 0 || t->open[0].acked != CDC_PSET_ALL)
        return NULL;
    rec = t->open[0].rec;
    t->last_completed = t->open[0].epoch;
    memmove(&t->open[0], &t->open[1], (size_t)(t->nopen - 1) * sizeof(t->open[0]));
    t->nopen--;
    return rec;
}

bool cdc_epochs_overdue(const cdc_epochs_t *t, int64_t now_ms, int64_t deadline_ms, uint64_t *epoch,
                        cdc_pset_t *missing)
{
    cdc_pset_t late = 0;

    if (t->nopen == 0 || t->open[0].acked == CDC_PSET_ALL)
        return false;
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        int64_t since = t->open[0].barrier_ms;
        if (t->open[0].acked & (1u << p))
            continue;
        if (t->slot_acked_ms[p] > since)
            since = t->slot_acked_ms[p];
        if (now_ms - since > deadline_ms)
            late |= (cdc_pset_t)(1u << p);
    }
    if (late == 0)
        return false;
    if (epoch)
        *epoch = t->open[0].epoch;
    if (missing)
        *missing = late;
    return true;
}

void cdc_epochs_note_acked(cdc_epochs_t *t, cdc_pset_t slots, int64_t now_ms)
{
    for (int p = 0; p < CDC_PARTITIONS; p++)
        if (slots & (1u << p))
            t->slot_acked_ms[p] = now_ms;
}

uint64_t cdc_epochs_oldest_open(const cdc_epochs_t *t)
{
    return t->nopen > 0 ? t->open[0].epoch : 0;
}
