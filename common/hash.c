/*
 * The string map of hash.h: linear probing over a power-of-two array of slots, rebuilt
 * at twice the size when it would pass half full (a fresh array: the slots are rehashed,
 * not copied, so common/buf.h's reallocation does not apply).
 */
#include "common/hash.h"

#include <stdlib.h>

static size_t slot_of(const cdc_strmap_slot_t *slots, size_t cap, const char *key)
{
    size_t i = (size_t)cdc_hash_bytes(key, strlen(key), 0) & (cap - 1);
    while (slots[i].key != NULL && strcmp(slots[i].key, key) != 0)
        i = (i + 1) & (cap - 1);
    return i;
}

void *cdc_strmap_get(const cdc_strmap_t *m, const char *key)
{
    if (m->cap == 0)
        return NULL;
    return m->slots[slot_of(m->slots, m->cap, key)].value;
}

cdc_err_t cdc_strmap_put(cdc_strmap_t *m, const char *key, void *value)
{
    size_t i;
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        cdc_strmap_slot_t *slots;
        if (cap < m->cap || (slots = calloc(cap, sizeof(*slots))) == NULL)
            return CDC_ERR_NOMEM;
        for (size_t k = 0; k < m->cap; k++)
            if (m->slots[k].key != NULL)
                slots[slot_of(slots, cap, m->slots[k].key)] = m->slots[k];
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    i = slot_of(m->slots, m->cap, key);
    if (m->slots[i].key == NULL) {
        m->slots[i].key = key;
        m->n++;
    }
    m->slots[i].value = value;
    return CDC_OK;
}

void cdc_strmap_free(cdc_strmap_t *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}
