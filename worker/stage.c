/*
 * Per-epoch staging (see stage.h): collapse keeps one entry per entity in first-change
 * order behind an open-addressing index; the changelog is a plain append-only array.
 * The epoch's files are encoded by stage_encode.c (ahead, while the epoch runs) and
 * written by stage_write.c at the barrier.
 */
#include "worker/stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/log.h"
#include "worker/stage_int.h"

void cdc_stage_init(cdc_stage_t *s, uint32_t partition, uint64_t epoch)
{
    memset(s, 0, sizeof(*s));
    s->partition = partition;
    s->epoch = epoch;
}

static void entry_clear(cdc_stage_entry_t *en)
{
    free(en->entity);
    free(en->part);
    free(en->old_part);
}

static void table_free(cdc_stage_table_t *t)
{
    cdc_stage_enc_free(t->enc_cl);
    cdc_stage_enc_free(t->enc_data);
    for (size_t i = 0; i < t->nentries; i++)
        entry_clear(&t->entries[i]);
    for (size_t i = 0; i < t->nchangelog; i++) {
        cdc_row_clear(&t->changelog[i].row);
        free(t->changelog[i].part);
    }
    free(t->entries);
    free(t->slots);
    free(t->changelog);
    cdc_ice_sort_order_free(&t->orders[0]);
    cdc_ice_sort_order_free(&t->orders[1]);
    free(t->key);
    free(t->ns);
    free(t->table);
}

void cdc_stage_set_encoding(cdc_stage_t *s, int codec, size_t rows)
{
    s->enc_codec = codec;
    s->enc_rows = rows;
}

void cdc_stage_reset(cdc_stage_t *s, uint64_t epoch)
{
    for (size_t i = 0; i < s->ntables; i++)
        table_free(&s->tables[i]);
    free(s->tables);
    cdc_strmap_free(&s->by_table);
    s->tables = NULL;
    s->ntables = s->tables_cap = 0;
    s->last_schema = NULL;
    s->bytes = 0;
    s->changes = 0;
    s->epoch = epoch;
}

void cdc_stage_free(cdc_stage_t *s)
{
    cdc_stage_reset(s, s->epoch);
}

/* The table of a change's schema, added on its first change of the epoch; NULL when out
 * of memory. */
static cdc_stage_table_t *table_for(cdc_stage_t *s, const cdc_source_schema_t *schema)
{
    char buf[256], *key = buf;
    cdc_stage_table_t *t = NULL;
    size_t i, nl = strlen(schema->ns);
    int len;

    /* The common case: a run of one table's changes (the names are compared too, in case
     * a caller's schema was freed and another took its address). */
    if (schema == s->last_schema && s->last_index < s->ntables &&
        strcmp(s->tables[s->last_index].table, schema->table) == 0 &&
        strcmp(s->tables[s->last_index].ns, schema->ns) == 0)
        return &s->tables[s->last_index];
    len = snprintf(buf, sizeof(buf), "%zu:%s.%s", nl, schema->ns, schema->table);
    if (len < 0 || ((size_t)len >= sizeof(buf) &&
                    asprintf(&key, "%zu:%s.%s", nl, schema->ns, schema->table) < 0))
        return NULL;
    if ((i = (size_t)(uintptr_t)cdc_strmap_get(&s->by_table, key)) > 0) {
        t = &s->tables[i - 1];
        goto done;
    }
    if (cdc_array_reserve(s->tables, s->tables_cap, s->ntables + 1, 8) != CDC_OK)
        goto done;
    t = memset(&s->tables[s->ntables], 0, sizeof(*t));
    if ((t->key = strdup(key)) == NULL || (t->ns = strdup(schema->ns)) == NULL ||
        (t->table = strdup(schema->table)) == NULL ||
        cdc_strmap_put(&s->by_table, t->key, (void *)(uintptr_t)(s->ntables + 1)) != CDC_OK) {
        free(t->key);
        free(t->ns);
        free(t->table);
        t = NULL;
        goto done;
    }
    s->ntables++;
done:
    if (t != NULL) {
        s->last_schema = schema;
        s->last_index = (size_t)(t - s->tables);
    }
    if (key != buf)
        free(key);
    return t;
}

static uint64_t hash(const uint8_t *p, size_t n)
{
    return cdc_hash_bytes(p, n, 0);
}

/* Finds the entry of an entity, or the empty slot where it belongs (*slot). */
static cdc_stage_entry_t *lookup(cdc_stage_table_t *t, const uint8_t *ent, size_t len, uint32_t h,
                                 size_t *slot)
{
    size_t j = h & (t->nslots - 1);
    while (t->slots[j] != 0) {
        cdc_stage_entry_t *en = &t->entries[t->slots[j] - 1];
        if (en->hash == h && en->entity_len == len && memcmp(en->entity, ent, len) == 0)
            return en;
        j = (j + 1) & (t->nslots - 1);
    }
    *slot = j;
    return NULL;
}

/* Doubles the index (64 slots at first) and puts every entry in it again. */
static bool rehash(cdc_stage_table_t *t)
{
    size_t n = t->nslots ? t->nslots * 2 : 64;
    size_t *slots = calloc(n, sizeof(size_t));
    if (slots == NULL)
        return false;
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    for (size_t i = 0; i < t->nentries; i++) {
        const cdc_stage_entry_t *en = &t->entries[i];
        size_t j = 0;
        lookup(t, en->entity, en->entity_len, en->hash, &j); /* entities are distinct: NULL */
        t->slots[j] = i + 1;
    }
    return true;
}

static size_t row_bytes(const cdc_row_t *r)
{
    size_t n = sizeof(cdc_row_t);
    if (r->vals == NULL)
        return n;
    n += r->schema->ncols * sizeof(cdc_val_t);
    for (size_t i = 0; i < r->schema->ncols; i++)
        n += r->vals[i].len;
    return n;
}

static bool changelog_reserve(cdc_stage_table_t *t)
{
    return cdc_array_reserve(t->changelog, t->clcap, t->nchangelog + 1, 64) == CDC_OK;
}

/* Appends c's changelog row without values (room made by changelog_reserve). */
static cdc_changelog_row_t *changelog_push(cdc_stage_t *s, cdc_stage_table_t *t,
                                           const cdc_change_t *c)
{
    cdc_changelog_row_t *cl = &t->changelog[t->nchangelog++];
    memset(cl, 0, sizeof(*cl));
    cl->op = (char)c->op;
    cl->lsn = c->lsn;
    cl->commit_lsn = c->commit_lsn;
    cl->tx_id = c->tx_id;
    cl->source_ts_us = c->source_ts_us;
    cl->partition = c->partition;
    cl->offset = c->offset;
    s->bytes += sizeof(*cl);
    return cl;
}

/* Truncate: see cdc_stage_add in stage.h. */
static cdc_err_t stage_truncate(cdc_stage_t *s, const cdc_change_t *c, cdc_error_t *e)
{
    cdc_stage_table_t *t = table_for(s, c->schema);
    if (t == NULL || !changelog_reserve(t))
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory staging partition %u epoch %llu",
                             s->partition, (unsigned long long)s->epoch);
    t->schema = c->schema;
    cdc_stage_enc_drop(s, &t->enc_data); /* its entries go */
    for (size_t i = 0; i < t->nentries; i++) {
        s->bytes -= sizeof(t->entries[i]) + t->entries[i].entity_len;
        entry_clear(&t->entries[i]);
    }
    t->nentries = 0;
    if (t->slots != NULL)
        memset(t->slots, 0, t->nslots * sizeof(*t->slots));
    t->truncated = true;
    if (c->floor) { /* reported to every other slot (TableFloor, docs/protocol.md) */
        t->floor = true;
        t->floor_commit_lsn = c->commit_lsn;
        t->floor_lsn = c->lsn;
    }
    /* (a backfill's truncate, before the rows of a resync, is the mirror's alone; a
     * floor is in one partition only) */
    if ((c->partition == 0 || c->floor) && !c->backfill)
        changelog_push(s, t, c)->row.schema = c->schema; /* no values: every column null */
    s->changes++;
    if (s->enc_rows > 0)
        cdc_stage_encode_ahead(s, t);
    return CDC_OK;
}

/* Copies a partition key into *dst (freeing the old one); false when out of memory. */
static bool set_key(uint8_t **dst, size_t *dst_len, const uint8_t *key, size_t len)
{
    uint8_t *k = NULL;
    if (key != NULL && (k = malloc(len ? len : 1)) == NULL)
        return false;
    if (key != NULL)
        memcpy(k, key, len);
    free(*dst);
    *dst = k;
    *dst_len = key ? len : 0;
    return true;
}

/* A table's first partitioned row: its files are written per partition at the barrier. */
static void set_partitioned(cdc_stage_t *s, cdc_stage_table_t *t)
{
    if (t->partitioned)
        return;
    t->partitioned = true;
    cdc_stage_enc_drop(s, &t->enc_cl);
    cdc_stage_enc_drop(s, &t->enc_data);
}

/* Takes a table's latest sort order of kind k (0 mirror, 1 changelog); a sorted table
 * is written at the barrier. False when out of memory. */
static bool set_order(cdc_stage_t *s, cdc_stage_table_t *t, int k, const cdc_ice_sort_order_t *o)
{
    int32_t id = o != NULL ? o->order_id : 0;
    if (t->orders[k].order_id == id)
        return true;
    cdc_ice_sort_order_free(&t->orders[k]);
    memset(&t->orders[k], 0, sizeof(t->orders[k]));
    if (o != NULL && cdc_ice_sort_order_copy(&t->orders[k], o) != CDC_OK)
        return false;
    if (o != NULL)
        set_partitioned(s, t);
    return true;
}

cdc_err_t cdc_stage_schema(cdc_stage_t *s, const cdc_change_t *c, cdc_error_t *e)
{
    cdc_stage_table_t *t = table_for(s, c->schema);
    if (t == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory staging partition %u epoch %llu",
                             s->partition, (unsigned long long)s->epoch);
    if (t->schema == NULL || t->schema->version <= c->schema->version)
        t->schema = c->schema;
    return CDC_OK;
}

cdc_err_t cdc_stage_add(cdc_stage_t *s, cdc_change_t *c, bool live_before,
                        const cdc_stage_parts_t *parts, cdc_error_t *e)
{
    if (c->op == CDC_OP_TRUNCATE)
        return stage_truncate(s, c, e);
    cdc_stage_table_t *t = table_for(s, c->schema);
    cdc_stage_entry_t *en;
    cdc_changelog_row_t *cl;
    cdc_row_t *img = c->op == CDC_OP_DELETE ? &c->before : &c->after;
    size_t slot = 0;
    uint32_t h;

    if (t == NULL)
        goto nomem;
    t->schema = c->schema;
    if (t->nslots == 0 || (t->nentries + 1) * 2 > t->nslots)
        if (!rehash(t))
            goto nomem;
    if (!changelog_reserve(t))
        goto nomem;

    if (c->changelog_only && c->backfill)
        return CDC_OK;       /* a re-read row from before a floor: nothing, in either table */
    if (c->changelog_only) { /* a change from before a floor: the changelog's alone */
        if (parts != NULL && !set_order(s, t, 1, parts->changelog_order))
            goto nomem;
    } else {
        h = (uint32_t)hash(c->entity, c->entity_len);
        en = lookup(t, c->entity, c->entity_len, h, &slot);
        if (en == NULL) {
            if (cdc_array_reserve(t->entries, t->cap, t->nentries + 1, 64) != CDC_OK)
                goto nomem;
            en = &t->entries[t->nentries];
            memset(en, 0, sizeof(*en));
            en->entity = malloc(c->entity_len);
            if (en->entity == NULL)
                goto nomem;
            memcpy(en->entity, c->entity, c->entity_len);
            en->entity_len = c->entity_len;
            en->hash = h;
            en->needs_delete = live_before;
            if (live_before && parts != NULL &&
                !set_key(&en->old_part, &en->old_part_len, parts->old, parts->old_len)) {
                free(en->entity);
                goto nomem;
            }
            t->slots[slot] = ++t->nentries;
            s->bytes += sizeof(*en) + c->entity_len;
        } else if (t->enc_data != NULL && (size_t)(en - t->entries) < t->enc_data->done) {
            /* an entry already encoded ahead changed: the mirror file is encoded whole */
            cdc_stage_enc_drop(s, &t->enc_data);
            t->enc_data_off = true;
        }
        en->deleted = c->op == CDC_OP_DELETE;
        if (parts != NULL && !set_key(&en->part, &en->part_len, parts->mirror, parts->mirror_len))
            goto nomem;
        if (en->part != NULL || en->old_part != NULL)
            set_partitioned(s, t);
        if (parts != NULL && (!set_order(s, t, 0, parts->mirror_order) ||
                              !set_order(s, t, 1, parts->changelog_order)))
            goto nomem;
        en->last = t->nchangelog; /* the row changelog_push appends next */
    }
    cl = changelog_push(s, t, c);
    cl->mirror_only = c->backfill;
    t->nmirror_only += c->backfill;
    cl->row = *img; /* moved */
    img->vals = NULL;
    if (parts != NULL && parts->changelog != NULL && !c->backfill) {
        cdc_err_t rc =
            cdc_stage_part_key(parts->changelog, &cl->row, cl, &cl->part, &cl->part_len, e);
        if (rc == CDC_ERR_NOMEM)
            return rc;    /* (the row stays staged, unpartitioned; the epoch fails) */
        if (rc != CDC_OK) /* a value the spec cannot take: spec 0 is as correct */
            cdc_log_warn("partition %u: %s; the changelog row is written unpartitioned",
                         s->partition, e->msg);
        set_partitioned(s, t);
    }
    s->bytes += row_bytes(&cl->row);
    t->row_bytes += row_bytes(&cl->row);
    s->changes++;
    if (s->enc_rows > 0)
        cdc_stage_encode_ahead(s, t);
    return CDC_OK;
nomem:
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory staging partition %u epoch %llu",
                         s->partition, (unsigned long long)s->epoch);
}

void cdc_stage_table_counts(const cdc_stage_table_t *t, size_t *data_rows, size_t *deletes)
{
    *data_rows = 0;
    *deletes = 0;
    for (size_t i = 0; i < t->nentries; i++) {
        *data_rows += !t->entries[i].deleted;
        *deletes += t->entries[i].needs_delete;
    }
}
