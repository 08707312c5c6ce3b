/*
 * Per-epoch collapse and buffering (see stage.h). Collapse keeps one entry per
 * entity in first-change order behind an open-addressing index; the changelog is a
 * plain append-only array. File writing lives in stage_files.c.
 */
#include "worker/stage.h"

#include <stdlib.h>
#include <string.h>

void cdc_stage_init(cdc_stage_t *s, uint32_t partition, uint64_t epoch)
{
    memset(s, 0, sizeof(*s));
    s->partition = partition;
    s->epoch = epoch;
}

static void table_free(cdc_stage_table_t *t)
{
    for (size_t i = 0; i < t->nentries; i++) {
        free(t->entries[i].entity);
        cdc_row_clear(&t->entries[i].row);
    }
    for (size_t i = 0; i < t->nchangelog; i++)
        cdc_row_clear(&t->changelog[i].row);
    free(t->entries);
    free(t->slots);
    free(t->changelog);
    free(t->ns);
    free(t->table);
}

void cdc_stage_reset(cdc_stage_t *s, uint64_t epoch)
{
    for (size_t i = 0; i < s->ntables; i++)
        table_free(&s->tables[i]);
    free(s->tables);
    s->tables = NULL;
    s->ntables = 0;
    s->bytes = 0;
    s->changes = 0;
    s->epoch = epoch;
}

void cdc_stage_free(cdc_stage_t *s)
{
    cdc_stage_reset(s, s->epoch);
}

static cdc_stage_table_t *table_for(cdc_stage_t *s, const cdc_source_schema_t *schema)
{
    cdc_stage_table_t *t;
    for (size_t i = 0; i < s->ntables; i++)
        if (strcmp(s->tables[i].ns, schema->ns) == 0 &&
            strcmp(s->tables[i].table, schema->table) == 0)
            return &s->tables[i];
    t = realloc(s->tables, (s->ntables + 1) * sizeof(*t));
    if (t == NULL)
        return NULL;
    s->tables = t;
    t = &s->tables[s->ntables];
    memset(t, 0, sizeof(*t));
    t->ns = strdup(schema->ns);
    t->table = strdup(schema->table);
    if (t->ns == NULL || t->table == NULL) {
        free(t->ns);
        free(t->table);
        return NULL;
    }
    s->ntables++;
    return t;
}

static uint64_t hash(const uint8_t *p, size_t n)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static bool rehash(cdc_stage_table_t *t)
{
    size_t n = t->nslots ? t->nslots * 2 : 64;
    size_t *slots = calloc(n, sizeof(size_t));
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < t->nentries; i++) {
        size_t j = hash(t->entries[i].entity, t->entries[i].entity_len) & (n - 1);
        while (slots[j] != 0)
            j = (j + 1) & (n - 1);
        slots[j] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return true;
}

/* Finds the entry of an entity, or the empty slot where it belongs (*slot). */
static cdc_stage_entry_t *lookup(cdc_stage_table_t *t, const uint8_t *ent, size_t len, size_t *slot)
{
    size_t j = hash(ent, len) & (t->nslots - 1);
    while (t->slots[j] != 0) {
        cdc_stage_entry_t *en = &t->entries[t->slots[j] - 1];
        if (en->entity_len == len && memcmp(en->entity, ent, len) == 0)
            return en;
        j = (j + 1) & (t->nslots - 1);
    }
    *slot = j;
    return NULL;
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

cdc_err_t cdc_stage_add(cdc_stage_t *s, cdc_change_t *c, bool live_before, cdc_error_t *e)
{
    cdc_stage_table_t *t = table_for(s, c->schema);
    cdc_stage_entry_t *en;
    cdc_changelog_row_t *cl;
    cdc_row_t *img = c->op == CDC_OP_DELETE ? &c->before : &c->after;
    cdc_row_t copy;
    size_t slot = 0;

    if (t == NULL)
        goto nomem;
    t->schema = c->schema;
    if (t->nslots == 0 || (t->nentries + 1) * 2 > t->nslots)
        if (!rehash(t))
            goto nomem;
    if (t->nchangelog == t->clcap) {
        size_t cap = t->clcap ? t->clcap * 2 : 64;
        cdc_changelog_row_t *n = realloc(t->changelog, cap * sizeof(*n));
        if (n == NULL)
            goto nomem;
        t->changelog = n;
        t->clcap = cap;
    }
    if (!cdc_row_copy(&copy, img))
        goto nomem;

    en = lookup(t, c->entity, c->entity_len, &slot);
    if (en == NULL) {
        if (t->nentries == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 64;
            cdc_stage_entry_t *n = realloc(t->entries, cap * sizeof(*n));
            if (n == NULL) {
                cdc_row_clear(&copy);
                goto nomem;
            }
            t->entries = n;
            t->cap = cap;
        }
        en = &t->entries[t->nentries];
        memset(en, 0, sizeof(*en));
        en->entity = malloc(c->entity_len);
        if (en->entity == NULL) {
            cdc_row_clear(&copy);
            goto nomem;
        }
        memcpy(en->entity, c->entity, c->entity_len);
        en->entity_len = c->entity_len;
        en->needs_delete = live_before;
        t->slots[slot] = ++t->nentries;
        s->bytes += sizeof(*en) + c->entity_len;
    } else {
        s->bytes -= row_bytes(&en->row);
        cdc_row_clear(&en->row);
    }
    en->deleted = c->op == CDC_OP_DELETE;
    en->row = copy;
    s->bytes += row_bytes(&en->row);

    cl = &t->changelog[t->nchangelog++];
    cl->row = *img; /* moved */
    img->vals = NULL;
    cl->op = (char)c->op;
    cl->lsn = c->lsn;
    cl->commit_lsn = c->commit_lsn;
    cl->tx_id = c->tx_id;
    cl->source_ts_us = c->source_ts_us;
    cl->partition = c->partition;
    cl->offset = c->offset;
    s->bytes += sizeof(*cl) + row_bytes(&cl->row);
    s->changes++;
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
