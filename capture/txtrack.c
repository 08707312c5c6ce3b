/*
 * Flush-LSN tracking (see txtrack.h): a ring of transaction entries indexed by id.
 */
#include "capture/txtrack.h"

#include <stdlib.h>
#include <string.h>

void cdc_txtrack_init(cdc_txtrack_t *t, uint64_t confirmed)
{
    memset(t, 0, sizeof(*t));
    t->head_id = 1;
    t->next_id = 1;
    t->confirmed = confirmed;
}

void cdc_txtrack_free(cdc_txtrack_t *t)
{
    free(t->ring);
    memset(t, 0, sizeof(*t));
}

static cdc_txtrack_entry_t *entry(cdc_txtrack_t *t, uint64_t id)
{
    if (id < t->head_id || id >= t->next_id)
        return NULL;
    return &t->ring[id & (t->cap - 1)];
}

uint64_t cdc_txtrack_begin(cdc_txtrack_t *t)
{
    size_t live = (size_t)(t->next_id - t->head_id);
    cdc_txtrack_entry_t *e;

    if (live + 1 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        cdc_txtrack_entry_t *n = calloc(ncap, sizeof(*n));
        if (n == NULL)
            return 0;
        for (uint64_t id = t->head_id; id < t->next_id; id++)
            n[id & (ncap - 1)] = t->ring[id & (t->cap - 1)];
        free(t->ring);
        t->ring = n;
        t->cap = ncap;
    }
    e = &t->ring[t->next_id & (t->cap - 1)];
    memset(e, 0, sizeof(*e));
    return t->next_id++;
}

void cdc_txtrack_add(cdc_txtrack_t *t, uint64_t id)
{
    cdc_txtrack_entry_t *e = entry(t, id);
    if (e == NULL) {
        t->failed = true; /* bug: never confirm past an untracked event */
        return;
    }
    e->pending++;
    t->inflight++;
}

void cdc_txtrack_acked(cdc_txtrack_t *t, uint64_t id, bool ok)
{
    cdc_txtrack_entry_t *e = entry(t, id);
    if (!ok || e == NULL || e->pending == 0) {
        t->failed = true;
        return;
    }
    e->pending--;
    t->inflight--;
}

void cdc_txtrack_commit(cdc_txtrack_t *t, uint64_t id, uint64_t end_lsn)
{
    cdc_txtrack_entry_t *e = entry(t, id);
    if (e == NULL) {
        t->failed = true;
        return;
    }
    e->committed = true;
    e->end_lsn = end_lsn;
}

uint64_t cdc_txtrack_confirmable(cdc_txtrack_t *t)
{
    if (t->failed)
        return t->confirmed;
    while (t->head_id < t->next_id) {
        cdc_txtrack_entry_t *e = &t->ring[t->head_id & (t->cap - 1)];
        if (!e->committed || e->pending > 0)
            break;
        if (e->end_lsn > t->confirmed)
            t->confirmed = e->end_lsn;
        t->head_id++;
    }
    return t->confirmed;
}

size_t cdc_txtrack_live(const cdc_txtrack_t *t)
{
    return (size_t)(t->next_id - t->head_id);
}
