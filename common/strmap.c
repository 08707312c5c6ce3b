/*
 * String -> index map (see strmap.h). The table is rebuilt into one twice the size when
 * it would pass half full, so a probe sequence stays short and always ends at an empty
 * slot.
 */
#include "common/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"

#define MIN_SLOTS 64

static size_t slot_of(const cdc_strmap_slot_t *slots, size_t cap, const char *key)
{
    size_t mask = cap - 1;
    size_t i = (size_t)cdc_hash_bytes(key, strlen(key), 0) & mask;
    while (slots[i].key != NULL && strcmp(slots[i].key, key) != 0)
        i = (i + 1) & mask;
    return i;
}

void cdc_strmap_free(cdc_strmap_t *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

bool cdc_strmap_get(const cdc_strmap_t *m, const char *key, size_t *value)
{
    size_t i;
    if (m->cap == 0 || key == NULL)
        return false;
    i = slot_of(m->slots, m->cap, key);
    if (m->slots[i].key == NULL)
        return false;
    if (value != NULL)
        *value = m->slots[i].value;
    return true;
}

/* Moves every key into a table of cap slots. */
static cdc_err_t rehash(cdc_strmap_t *m, size_t cap)
{
    cdc_strmap_slot_t *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return CDC_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key != NULL)
            slots[slot_of(slots, cap, m->slots[i].key)] = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return CDC_OK;
}

cdc_err_t cdc_strmap_put(cdc_strmap_t *m, const char *key, size_t value)
{
    size_t i;
    if (key == NULL)
        return CDC_ERR_INVALID;
    if ((m->n + 1) * 2 > m->cap) {
        if (m->cap > SIZE_MAX / 4 / sizeof(cdc_strmap_slot_t))
            return CDC_ERR_NOMEM;
        if (rehash(m, m->cap ? m->cap * 2 : MIN_SLOTS) != CDC_OK)
            return CDC_ERR_NOMEM;
    }
    i = slot_of(m->slots, m->cap, key);
    if (m->slots[i].key == NULL) {
        m->slots[i].key = key;
        m->n++;
    }
    m->slots[i].value = value;
    return CDC_OK;
}
