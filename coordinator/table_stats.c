/*
 * Table statistics after a commit (see table_stats.h): the snapshot summary's totals and
 * the changelog files' _source_ts bounds (Iceberg's single-value encoding of a
 * timestamptz: microseconds, 8 bytes little-endian).
 */
#include "coordinator/table_stats.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/iceberg/byteorder.h"
#include "common/iceberg/schema.h"
#include "common/log.h"

static int64_t total(const cdc_ice_table_t *t, const char *key)
{
    const char *v = cdc_ice_table_snapshot_property(t, -1, key);
    return v != NULL ? strtoll(v, NULL, 10) : 0;
}

/* Field id of the changelog's source time column, -1 when the table has none. */
static int32_t source_ts_field(const cdc_ice_table_t *t)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
    for (size_t i = 0; cur != NULL && i < cur->nfields; i++)
        if (strcmp(cur->fields[i].name, CDC_CHANGELOG_SOURCE_TS) == 0 &&
            cur->fields[i].type == CDC_ICE_TIMESTAMPTZ)
            return cur->fields[i].id;
    return -1;
}

void cdc_table_stats_fill(cdc_table_stats_t *s, const char *table, const cdc_ice_table_t *t,
                          uint64_t epoch, int64_t at_ms, const cdc_ice_data_file_t *data,
                          size_t ndata)
{
    int32_t ts = source_ts_field(t);

    memset(s, 0, sizeof(*s));
    snprintf(s->table, sizeof(s->table), "%s", table);
    s->epoch = epoch;
    s->committed_at_ms = at_ms;
    for (size_t i = 0; i < ndata; i++) {
        s->added_records += data[i].record_count;
        for (size_t k = 0; ts >= 0 && k < data[i].nstats; k++) {
            const cdc_ice_col_stats_t *cs = &data[i].stats[k];
            int64_t lo, hi;
            if (cs->field_id != ts || !cs->has_bounds || cs->lower_len != 8 || cs->upper_len != 8)
                continue;
            lo = (int64_t)get_le64(cs->lower) / 1000;
            hi = (int64_t)get_le64(cs->upper) / 1000;
            if (lo <= 0)
                continue;
            if (s->source_min_ms == 0 || lo < s->source_min_ms)
                s->source_min_ms = lo;
            if (hi > s->source_max_ms)
                s->source_max_ms = hi;
        }
    }
    s->records = total(t, "total-records");
    s->equality_deletes = total(t, "total-equality-deletes");
    s->data_files = total(t, "total-data-files");
    s->delete_files = total(t, "total-delete-files");
    s->files_bytes = total(t, "total-files-size");
    s->snapshots = (int64_t)cdc_ice_table_metadata(t)->nsnapshots;
}

int64_t cdc_table_stats_rows(const cdc_table_stats_t *s)
{
    int64_t rows = s->records - s->equality_deletes;
    return rows > 0 ? rows : 0;
}

void cdc_table_stats_init(cdc_table_stats_set_t *set)
{
    memset(set, 0, sizeof(*set));
    pthread_mutex_init(&set->lock, NULL);
}

void cdc_table_stats_destroy(cdc_table_stats_set_t *set)
{
    for (size_t i = 0; i < set->n; i++)
        free(set->tables[i]);
    free(set->tables);
    cdc_strmap_free(&set->by_name);
    pthread_mutex_destroy(&set->lock);
}

/* table's entry (under the lock), added zeroed when new; NULL when memory ran out
 * (logged: the table is missing from /status until its next commit). */
static cdc_table_stats_t *entry(cdc_table_stats_set_t *set, const char *table, bool *added)
{
    cdc_table_stats_t *s = cdc_strmap_get(&set->by_name, table);
    *added = false;
    if (s != NULL)
        return s;
    if (cdc_array_reserve(set->tables, set->cap, set->n + 1, 64) == CDC_OK &&
        (s = calloc(1, sizeof(*s))) != NULL) {
        snprintf(s->table, sizeof(s->table), "%s", table);
        if (cdc_strmap_put(&set->by_name, s->table, s) == CDC_OK) {
            set->tables[set->n++] = s;
            *added = true;
            return s;
        }
        free(s);
    }
    cdc_log_error("table \"%s\": out of memory: its statistics are left out", table);
    return NULL;
}

void cdc_table_stats_note(cdc_table_stats_set_t *set, const char *table, const cdc_ice_table_t *t,
                          uint64_t epoch, const cdc_ice_data_file_t *data, size_t ndata,
                          int64_t added_bytes)
{
    cdc_table_stats_t s, *o;
    bool added;

    cdc_table_stats_fill(&s, table, t, epoch, cdc_clock_wall_ms(), data, ndata);
    pthread_mutex_lock(&set->lock);
    if ((o = entry(set, table, &added)) != NULL) {
        /* the maintenance counters go on (zero for a new entry) */
        s.compactions = o->compactions;
        s.last_compaction_ms = o->last_compaction_ms;
        s.bytes_rewritten = o->bytes_rewritten;
        s.files_rewritten = o->files_rewritten;
        s.committed_bytes = o->committed_bytes + added_bytes;
        *o = s;
    }
    pthread_mutex_unlock(&set->lock);
}

void cdc_table_stats_note_compaction(cdc_table_stats_set_t *set, const char *table,
                                     const cdc_ice_table_t *t, int64_t bytes_rewritten,
                                     int64_t files_rewritten)
{
    cdc_table_stats_t s, *o;
    bool added;

    cdc_table_stats_fill(&s, table, t, 0, 0, NULL, 0);
    pthread_mutex_lock(&set->lock);
    if ((o = entry(set, table, &added)) != NULL) {
        if (added) {
            *o = s;
        } else {
            o->records = s.records;
            o->equality_deletes = s.equality_deletes;
            o->data_files = s.data_files;
            o->delete_files = s.delete_files;
            o->files_bytes = s.files_bytes;
            o->snapshots = s.snapshots;
        }
        o->compactions++;
        o->last_compaction_ms = cdc_clock_wall_ms();
        o->bytes_rewritten += bytes_rewritten;
        o->files_rewritten += files_rewritten;
    }
    pthread_mutex_unlock(&set->lock);
}

cdc_err_t cdc_table_stats_copy(cdc_table_stats_set_t *set, cdc_table_stats_t **out, size_t *n)
{
    cdc_err_t rc = CDC_OK;
    pthread_mutex_lock(&set->lock);
    *out = malloc((set->n ? set->n : 1) * sizeof(**out));
    *n = *out != NULL ? set->n : 0;
    if (*out == NULL)
        rc = CDC_ERR_NOMEM;
    for (size_t i = 0; i < *n; i++)
        (*out)[i] = *set->tables[i];
    pthread_mutex_unlock(&set->lock);
    return rc;
}
