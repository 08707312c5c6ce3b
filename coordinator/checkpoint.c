/*
 * Checkpoint record: construction, offsets, schema memo and totals (see checkpoint.h).
 * Its JSON form is checkpoint_json.c.
 */
#include "coordinator/checkpoint.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/hex.h"
#include "common/iceberg/schema.h"
#include "coordinator/table_stats.h"

cdc_checkpoint_t *cdc_checkpoint_new(const char *job, uint64_t epoch, uint64_t term,
                                     uint64_t generation)
{
    cdc_checkpoint_t *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->job = strdup(job ? job : "");
    if (c->job == NULL) {
        free(c);
        return NULL;
    }
    c->epoch = epoch;
    c->term = term;
    c->generation = generation;
    return c;
}

static void free_file(cdc_staged_file_t *f)
{
    free(f->table);
    cdc_ice_data_file_clear(&f->file);
}

void cdc_checkpoint_free(cdc_checkpoint_t *c)
{
    if (c == NULL)
        return;
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        for (size_t i = 0; i < c->partitions[p].noffsets; i++)
            free(c->partitions[p].offsets[i].topic);
        free(c->partitions[p].offsets);
        cdc_strmap_free(&c->partitions[p].byname);
        free(c->partitions[p].state_handle);
    }
    for (size_t i = 0; i < c->nfiles; i++)
        free_file(&c->files[i]);
    free(c->files);
    for (size_t i = 0; i < c->nschemas; i++) {
        free(c->schemas[i].table);
        free(c->schemas[i].schema_json);
        free(c->schemas[i].mask_policy);
    }
    free(c->schemas);
    for (size_t i = 0; i < c->ntruncates; i++)
        free(c->truncates[i].table);
    free(c->truncates);
    for (size_t i = 0; i < c->nfloors; i++)
        free(c->floors[i].table);
    free(c->floors);
    free(c->files_path);
    free(c->offsets_base.path);
    free(c->job);
    free(c);
}

/* Index + 1 of topic in the slot's offsets, 0 when absent. The map's keys are the
 * entries' own topic strings, which stay put when the array grows. */
static size_t offset_index(const cdc_ckpt_partition_t *cp, const char *topic)
{
    return (size_t)(uintptr_t)cdc_strmap_get(&cp->byname, topic);
}

cdc_err_t cdc_checkpoint_set_offset(cdc_checkpoint_t *c, uint32_t p, const char *topic,
                                    int64_t next_offset)
{
    cdc_ckpt_partition_t *cp;
    cdc_topic_offset_t *to;
    size_t at;

    if (p >= CDC_PARTITIONS || topic == NULL)
        return CDC_ERR_INVALID;
    cp = &c->partitions[p];
    if ((at = offset_index(cp, topic)) > 0) {
        cp->offsets[at - 1].next_offset = next_offset;
        return CDC_OK;
    }
    if (cdc_array_reserve(cp->offsets, cp->cap, cp->noffsets + 1, 16) != CDC_OK)
        return CDC_ERR_NOMEM;
    to = &cp->offsets[cp->noffsets];
    if ((to->topic = strdup(topic)) == NULL)
        return CDC_ERR_NOMEM;
    if (cdc_strmap_put(&cp->byname, to->topic, (void *)(uintptr_t)(cp->noffsets + 1)) != CDC_OK) {
        free(to->topic);
        return CDC_ERR_NOMEM;
    }
    to->next_offset = next_offset;
    cp->noffsets++;
    return CDC_OK;
}

const cdc_topic_offset_t *cdc_checkpoint_find_offset(const cdc_checkpoint_t *c, uint32_t p,
                                                     const char *topic)
{
    size_t at;

    if (p >= CDC_PARTITIONS || topic == NULL)
        return NULL;
    at = offset_index(&c->partitions[p], topic);
    return at > 0 ? &c->partitions[p].offsets[at - 1] : NULL;
}

size_t cdc_checkpoint_offset_count(const cdc_checkpoint_t *c)
{
    size_t n = 0;
    for (int p = 0; p < CDC_PARTITIONS; p++)
        n += c->partitions[p].noffsets;
    return n;
}

long cdc_checkpoint_delta_count(const cdc_checkpoint_t *c, const cdc_checkpoint_t *base)
{
    long n = 0;

    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        const cdc_ckpt_partition_t *cp = &c->partitions[p];
        size_t shared = 0;
        for (size_t i = 0; i < cp->noffsets; i++) {
            const cdc_topic_offset_t *b = cdc_checkpoint_find_offset(base, p, cp->offsets[i].topic);
            if (b != NULL)
                shared++;
            if (b == NULL || b->next_offset != cp->offsets[i].next_offset)
                n++;
        }
        /* topics are unique per slot: fewer shared than base has = base has one c lacks */
        if (shared != base->partitions[p].noffsets)
            return -1;
    }
    return n;
}

cdc_err_t cdc_checkpoint_merge_base(cdc_checkpoint_t *c, const cdc_checkpoint_t *base,
                                    cdc_error_t *e)
{
    if (!c->offsets_delta)
        return CDC_OK;
    if (base->epoch != c->offsets_base.epoch)
        return cdc_error_set(e, CDC_ERR_CORRUPT,
                             "offsets base \"%s\" holds epoch %" PRIu64 ", checkpoint %" PRIu64
                             " names epoch %" PRIu64,
                             c->offsets_base.path ? c->offsets_base.path : "", base->epoch,
                             c->epoch, c->offsets_base.epoch);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        cdc_ckpt_partition_t delta = c->partitions[p], *cp = &c->partitions[p];
        const cdc_ckpt_partition_t *bp = &base->partitions[p];
        cdc_err_t rc = CDC_OK;

        /* rebuilt in base's order (the order the record had), the delta's new topics last */
        cp->offsets = NULL;
        cp->noffsets = cp->cap = 0;
        memset(&cp->byname, 0, sizeof(cp->byname));
        for (size_t i = 0; i < bp->noffsets && rc == CDC_OK; i++) {
            size_t at = offset_index(&delta, bp->offsets[i].topic);
            rc = cdc_checkpoint_set_offset(c, p, bp->offsets[i].topic,
                                           at > 0 ? delta.offsets[at - 1].next_offset
                                                  : bp->offsets[i].next_offset);
        }
        for (size_t i = 0; i < delta.noffsets && rc == CDC_OK; i++)
            if (offset_index(cp, delta.offsets[i].topic) == 0)
                rc = cdc_checkpoint_set_offset(c, p, delta.offsets[i].topic,
                                               delta.offsets[i].next_offset);
        for (size_t i = 0; i < delta.noffsets; i++)
            free(delta.offsets[i].topic);
        free(delta.offsets);
        cdc_strmap_free(&delta.byname);
        if (rc != CDC_OK)
            return cdc_error_set(e, rc, "out of memory");
    }
    c->offsets_delta = false;
    return CDC_OK;
}

/* ---- schema memo ---------------------------------------------------------------------- */

/* The last recorded update of a table, kept whole: compared exactly, never by a hash. */
typedef struct memo_entry {
    cdc_schema_update_t last; /* last.table is the map's key; schema_json NULL = none */
} memo_entry_t;

bool cdc_schema_update_same(const cdc_schema_update_t *a, const cdc_schema_update_t *b)
{
    return a->schema_json != NULL && b->schema_json != NULL && a->version == b->version &&
           strcmp(a->schema_json, b->schema_json) == 0 &&
           strcmp(a->mask_policy ? a->mask_policy : "", b->mask_policy ? b->mask_policy : "") == 0;
}

static void memo_entry_free(memo_entry_t *e)
{
    free(e->last.table);
    free(e->last.schema_json);
    free(e->last.mask_policy);
    free(e);
}

void cdc_schema_memo_clear(cdc_schema_memo_t *m)
{
    for (size_t k = 0; k < m->by_table.cap; k++)
        if (m->by_table.slots[k].key != NULL)
            memo_entry_free(m->by_table.slots[k].value);
    cdc_strmap_free(&m->by_table);
}

/* Whether table has exactly one update in rec (tables with several, a schema change
 * inside the epoch, are always carried and not memoized: their order matters). */
static bool single_update(const cdc_strmap_t *count, const char *table)
{
    return (uintptr_t)cdc_strmap_get(count, table) == 1;
}

/* Counts each table's updates in rec into count (values are counts, not pointers). */
static cdc_err_t count_updates(const cdc_checkpoint_t *rec, cdc_strmap_t *count)
{
    for (size_t i = 0; i < rec->nschemas; i++) {
        uintptr_t n = (uintptr_t)cdc_strmap_get(count, rec->schemas[i].table);
        if (cdc_strmap_put(count, rec->schemas[i].table, (void *)(n + 1)) != CDC_OK)
            return CDC_ERR_NOMEM;
    }
    return CDC_OK;
}

size_t cdc_schema_memo_strip(const cdc_schema_memo_t *m, cdc_checkpoint_t *rec)
{
    cdc_strmap_t count = {0};
    size_t kept = 0, dropped = 0;
    if (m->by_table.n == 0 || count_updates(rec, &count) != CDC_OK) {
        cdc_strmap_free(&count);
        return 0; /* nothing known, or out of memory: carry them all */
    }
    /* decided for every update first: count's keys are the updates' own table names, so
     * none may be freed while count is still looked up */
    bool *drop = calloc(rec->nschemas, sizeof(*drop));
    if (drop == NULL) {
        cdc_strmap_free(&count);
        return 0;
    }
    for (size_t i = 0; i < rec->nschemas; i++) {
        const cdc_schema_update_t *u = &rec->schemas[i];
        const memo_entry_t *e = cdc_strmap_get(&m->by_table, u->table);
        drop[i] =
            e != NULL && single_update(&count, u->table) && cdc_schema_update_same(&e->last, u);
    }
    cdc_strmap_free(&count);
    for (size_t i = 0; i < rec->nschemas; i++) {
        cdc_schema_update_t *u = &rec->schemas[i];
        if (drop[i]) {
            free(u->table);
            free(u->schema_json);
            free(u->mask_policy);
            dropped++;
            continue;
        }
        rec->schemas[kept++] = *u;
    }
    rec->nschemas = kept;
    free(drop);
    return dropped;
}

cdc_err_t cdc_schema_memo_note(cdc_schema_memo_t *m, const cdc_checkpoint_t *rec)
{
    cdc_strmap_t count = {0};
    if (count_updates(rec, &count) != CDC_OK)
        goto nomem;
    for (size_t i = 0; i < rec->nschemas; i++) {
        const cdc_schema_update_t *u = &rec->schemas[i];
        memo_entry_t *e = cdc_strmap_get(&m->by_table, u->table);
        if (e == NULL) {
            if ((e = calloc(1, sizeof(*e))) == NULL || (e->last.table = strdup(u->table)) == NULL ||
                cdc_strmap_put(&m->by_table, e->last.table, e) != CDC_OK) {
                if (e != NULL)
                    memo_entry_free(e);
                goto nomem;
            }
        }
        free(e->last.schema_json);
        free(e->last.mask_policy);
        e->last.schema_json = e->last.mask_policy = NULL;
        /* a table with several updates in one record is not memoized (NULL matches none) */
        if (single_update(&count, u->table)) {
            e->last.version = u->version;
            if ((e->last.schema_json = strdup(u->schema_json)) == NULL ||
                (u->mask_policy != NULL && (e->last.mask_policy = strdup(u->mask_policy)) == NULL))
                goto nomem;
        }
    }
    cdc_strmap_free(&count);
    return CDC_OK;
nomem:
    cdc_strmap_free(&count);
    cdc_schema_memo_clear(m);
    return CDC_ERR_NOMEM;
}

cdc_checkpoint_t *cdc_checkpoint_copy_base(const cdc_checkpoint_t *c)
{
    cdc_checkpoint_t *d = cdc_checkpoint_new(c->job, c->epoch, c->term, c->generation);
    if (d == NULL)
        return NULL;
    d->barrier_ms = c->barrier_ms;
    d->completed_ms = c->completed_ms;
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        const cdc_ckpt_partition_t *cp = &c->partitions[p];
        for (size_t i = 0; i < cp->noffsets; i++)
            if (cdc_checkpoint_set_offset(d, p, cp->offsets[i].topic, cp->offsets[i].next_offset) !=
                CDC_OK)
                goto fail;
        if (cp->state_handle != NULL && cdc_checkpoint_set_state(d, p, cp->state_handle) != CDC_OK)
            goto fail;
        memcpy(d->partitions[p].owner, cp->owner, sizeof(cp->owner));
    }
    if (cdc_checkpoint_carry_floors(d, c) != CDC_OK)
        goto fail;
    return d;
fail:
    cdc_checkpoint_free(d);
    return NULL;
}

cdc_err_t cdc_checkpoint_set_state(cdc_checkpoint_t *c, uint32_t p, const char *handle)
{
    char *copy;

    if (p >= CDC_PARTITIONS)
        return CDC_ERR_INVALID;
    copy = strdup(handle ? handle : "");
    if (copy == NULL)
        return CDC_ERR_NOMEM;
    free(c->partitions[p].state_handle);
    c->partitions[p].state_handle = copy;
    return CDC_OK;
}

cdc_err_t cdc_checkpoint_add_file(cdc_checkpoint_t *c, const cdc_staged_file_t *f)
{
    cdc_staged_file_t *d;

    if (cdc_array_resize(c->files, c->nfiles + 1) != CDC_OK)
        return CDC_ERR_NOMEM;
    d = &c->files[c->nfiles];
    memset(d, 0, sizeof(*d));
    d->table = strdup(f->table ? f->table : "");
    d->partition = f->partition;
    if (d->table == NULL || f->file.path == NULL ||
        cdc_ice_data_file_copy(&d->file, &f->file) != CDC_OK) {
        free_file(d);
        return CDC_ERR_NOMEM;
    }
    c->nfiles++;
    return CDC_OK;
}

cdc_err_t cdc_checkpoint_add_schema(cdc_checkpoint_t *c, const char *table, const char *schema_json,
                                    int64_t version)
{
    return cdc_checkpoint_add_masked_schema(c, table, schema_json, version, NULL);
}

cdc_err_t cdc_checkpoint_add_masked_schema(cdc_checkpoint_t *c, const char *table,
                                           const char *schema_json, int64_t version,
                                           const char *mask_policy)
{
    cdc_schema_update_t *grown;
    const char *policy = mask_policy != NULL ? mask_policy : "";

    for (size_t i = 0; i < c->nschemas; i++)
        if (strcmp(c->schemas[i].table, table) == 0 && c->schemas[i].version == version &&
            strcmp(c->schemas[i].schema_json, schema_json) == 0 &&
            strcmp(c->schemas[i].mask_policy ? c->schemas[i].mask_policy : "", policy) == 0)
            return CDC_OK;
    if (cdc_array_resize(c->schemas, c->nschemas + 1) != CDC_OK)
        return CDC_ERR_NOMEM;
    grown = c->schemas;
    grown[c->nschemas].table = strdup(table);
    grown[c->nschemas].schema_json = strdup(schema_json);
    grown[c->nschemas].version = version;
    grown[c->nschemas].mask_policy = policy[0] != '\0' ? strdup(policy) : NULL;
    if (grown[c->nschemas].table == NULL || grown[c->nschemas].schema_json == NULL ||
        (policy[0] != '\0' && grown[c->nschemas].mask_policy == NULL)) {
        free(grown[c->nschemas].table);
        free(grown[c->nschemas].schema_json);
        free(grown[c->nschemas].mask_policy);
        return CDC_ERR_NOMEM;
    }
    c->nschemas++;
    return CDC_OK;
}

cdc_err_t cdc_checkpoint_add_truncate(cdc_checkpoint_t *c, const char *table, uint32_t p)
{
    cdc_table_truncate_t *grown;

    if (p >= CDC_PARTITIONS)
        return CDC_ERR_INVALID;
    for (size_t i = 0; i < c->ntruncates; i++)
        if (strcmp(c->truncates[i].table, table) == 0) {
            c->truncates[i].partitions |= 1u << p;
            return CDC_OK;
        }
    if (cdc_array_resize(c->truncates, c->ntruncates + 1) != CDC_OK)
        return CDC_ERR_NOMEM;
    grown = c->truncates;
    grown[c->ntruncates].table = strdup(table);
    grown[c->ntruncates].partitions = 1u << p;
    if (grown[c->ntruncates].table == NULL)
        return CDC_ERR_NOMEM;
    c->ntruncates++;
    return CDC_OK;
}

uint32_t cdc_checkpoint_truncated(const cdc_checkpoint_t *c, const char *table)
{
    for (size_t i = 0; i < c->ntruncates; i++)
        if (strcmp(c->truncates[i].table, table) == 0)
            return c->truncates[i].partitions;
    return 0;
}

cdc_err_t cdc_checkpoint_add_floor(cdc_checkpoint_t *c, const char *table, uint64_t commit_lsn,
                                   uint64_t lsn, uint32_t partition)
{
    cdc_table_floor_t *f = NULL;

    if (partition >= CDC_PARTITIONS)
        return CDC_ERR_INVALID;
    for (size_t i = 0; i < c->nfloors && f == NULL; i++)
        if (strcmp(c->floors[i].table, table) == 0)
            f = &c->floors[i];
    if (f != NULL) {
        if (commit_lsn < f->commit_lsn || (commit_lsn == f->commit_lsn && lsn <= f->lsn))
            return CDC_OK; /* this one, or a later one, is there */
    } else {
        if (cdc_array_resize(c->floors, c->nfloors + 1) != CDC_OK)
            return CDC_ERR_NOMEM;
        f = &c->floors[c->nfloors];
        if ((f->table = strdup(table)) == NULL)
            return CDC_ERR_NOMEM;
        c->nfloors++;
    }
    f->commit_lsn = commit_lsn;
    f->lsn = lsn;
    f->partition = partition;
    return CDC_OK;
}

cdc_err_t cdc_checkpoint_carry_floors(cdc_checkpoint_t *c, const cdc_checkpoint_t *from)
{
    cdc_err_t rc = CDC_OK;
    for (size_t i = 0; from != NULL && rc == CDC_OK && i < from->nfloors; i++)
        rc = cdc_checkpoint_add_floor(c, from->floors[i].table, from->floors[i].commit_lsn,
                                      from->floors[i].lsn, from->floors[i].partition);
    return rc;
}

void cdc_checkpoint_totals(const cdc_checkpoint_t *c, int64_t *bytes, int64_t *records,
                           size_t *data_files, size_t *delete_files)
{
    int64_t b = 0, r = 0;
    size_t nd = 0, ndel = 0;

    for (size_t i = 0; i < c->nfiles; i++) {
        b += c->files[i].file.file_size_in_bytes;
        if (c->files[i].file.content == CDC_ICE_CONTENT_DATA) {
            r += c->files[i].file.record_count;
            nd++;
        } else {
            ndel++;
        }
    }
    if (bytes)
        *bytes = b;
    if (records)
        *records = r;
    if (data_files)
        *data_files = nd;
    if (delete_files)
        *delete_files = ndel;
}
