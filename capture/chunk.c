/*
 * The chunk buffer of an incremental snapshot and its watermark messages (chunk.h).
 * Keys are found through an open-addressing index of row numbers, so that removing the
 * key of each change in a chunk's window costs one lookup whatever the chunk size.
 */
#include "capture/chunk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/buf.h"

void cdc_chunk_reset(cdc_chunk_t *c)
{
    for (size_t i = 0; i < c->nrows; i++)
        free(c->keys[i]);
    c->nrows = 0;
    c->nlive = 0;
    if (c->slots != NULL)
        memset(c->slots, 0, c->nslots * sizeof(*c->slots));
}

void cdc_chunk_free(cdc_chunk_t *c)
{
    cdc_chunk_reset(c);
    free(c->keys);
    free(c->key_lens);
    free(c->live);
    free(c->slots);
    memset(c, 0, sizeof(*c));
}

static size_t slot_of(const cdc_chunk_t *c, const char *key, size_t len)
{
    return (size_t)cdc_hash_bytes(key, len, 0x9e3779b97f4a7c15ULL) & (c->nslots - 1);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t find(const cdc_chunk_t *c, const char *key, size_t len)
{
    size_t s = slot_of(c, key, len);
    while (c->slots[s] != 0) {
        size_t row = c->slots[s] - 1;
        if (c->key_lens[row] == len && memcmp(c->keys[row], key, len) == 0)
            return s;
        s = (s + 1) & (c->nslots - 1);
    }
    return s;
}

static cdc_err_t rehash(cdc_chunk_t *c, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof(*slots));
    if (slots == NULL)
        return CDC_ERR_NOMEM;
    free(c->slots);
    c->slots = slots;
    c->nslots = nslots;
    for (size_t i = 0; i < c->nrows; i++)
        c->slots[find(c, c->keys[i], c->key_lens[i])] = (uint32_t)(i + 1);
    return CDC_OK;
}

cdc_err_t cdc_chunk_add(cdc_chunk_t *c, const char *key, size_t len)
{
    size_t s;
    char *copy;

    if (c->nrows + 1 > c->cap) {
        /* three arrays of one capacity: each grown to the first one's new size */
        size_t cap = c->cap;
        if (cdc_array_reserve(c->keys, cap, c->nrows + 1, 64) != CDC_OK ||
            cdc_array_resize(c->key_lens, cap) != CDC_OK ||
            cdc_array_resize(c->live, cap) != CDC_OK)
            return CDC_ERR_NOMEM;
        c->cap = cap;
    }
    if ((c->nrows + 1) * 2 >= c->nslots && rehash(c, c->nslots ? c->nslots * 2 : 128) != CDC_OK)
        return CDC_ERR_NOMEM;
    copy = malloc(len + 1);
    if (copy == NULL)
        return CDC_ERR_NOMEM;
    memcpy(copy, key, len);
    copy[len] = '\0';
    s = find(c, key, len);
    if (c->slots[s] != 0) { /* the same key twice (never from one SELECT): the last wins */
        size_t row = c->slots[s] - 1;
        if (c->live[row])
            c->nlive--;
        c->live[row] = false;
    }
    c->keys[c->nrows] = copy;
    c->key_lens[c->nrows] = len;
    c->live[c->nrows] = true;
    c->slots[s] = (uint32_t)(c->nrows + 1);
    c->nrows++;
    c->nlive++;
    return CDC_OK;
}

bool cdc_chunk_remove(cdc_chunk_t *c, const char *key, size_t len)
{
    size_t s, row;
    if (c->nrows == 0)
        return false;
    s = find(c, key, len);
    if (c->slots[s] == 0)
        return false;
    row = c->slots[s] - 1;
    if (!c->live[row])
        return false;
    c->live[row] = false;
    c->nlive--;
    return true;
}

void cdc_chunk_remove_all(cdc_chunk_t *c)
{
    for (size_t i = 0; i < c->nrows; i++)
        c->live[i] = false;
    c->nlive = 0;
}

static const char *const kind_names[] = {"low", "high"};

bool cdc_watermark_format(char *buf, size_t size, const char *id, cdc_watermark_kind_t kind)
{
    int n;
    if (id == NULL || id[0] == '\0' || strchr(id, ':') != NULL ||
        strlen(id) >= CDC_WATERMARK_ID_MAX)
        return false;
    n = snprintf(buf, size, "%s:%s", id, kind_names[kind]);
    return n > 0 && (size_t)n < size;
}

bool cdc_watermark_parse(const char *content, size_t len, char *id, size_t size,
                         cdc_watermark_kind_t *kind)
{
    const char *colon = content ? memchr(content, ':', len) : NULL;
    size_t idlen, rest;

    if (colon == NULL)
        return false;
    idlen = (size_t)(colon - content);
    rest = len - idlen - 1;
    if (idlen == 0 || idlen >= size || idlen >= CDC_WATERMARK_ID_MAX ||
        memchr(content, '\0', idlen) != NULL)
        return false;
    if (rest == 3 && memcmp(colon + 1, "low", 3) == 0)
        *kind = CDC_WATERMARK_LOW;
    else if (rest == 4 && memcmp(colon + 1, "high", 4) == 0)
        *kind = CDC_WATERMARK_HIGH;
    else
        return false;
    memcpy(id, content, idlen);
    id[idlen] = '\0';
    return true;
}

/* ---- the read's snapshot ----------------------------------------------------------- */

void cdc_chunk_snapshot_free(cdc_chunk_snapshot_t *s)
{
    free(s->xip);
    memset(s, 0, sizeof(*s));
}

bool cdc_chunk_snapshot_parse(cdc_chunk_snapshot_t *s, const char *text)
{
    char *end;
    const char *p = text;
    size_t n = 1;

    cdc_chunk_snapshot_free(s);
    if (text == NULL)
        return false;
    for (const char *q = text; *q; q++)
        n += *q == ',';
    s->xmin = strtoull(p, &end, 10);
    if (end == p || *end != ':')
        return false;
    p = end + 1;
    s->xmax = strtoull(p, &end, 10);
    if (end == p || *end != ':' || s->xmax < s->xmin)
        return false;
    p = end + 1;
    if (*p == '\0')
        return true;
    if ((s->xip = calloc(n, sizeof(*s->xip))) == NULL)
        return false;
    for (;;) {
        uint64_t x = strtoull(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0')) {
            cdc_chunk_snapshot_free(s);
            return false;
        }
        s->xip[s->nxip++] = x;
        if (*end == '\0')
            return true;
        p = end + 1;
    }
}

bool cdc_chunk_snapshot_sees(const cdc_chunk_snapshot_t *s, uint32_t xid)
{
    uint64_t full = (s->xmax & ~(uint64_t)0xffffffff) | xid;
    if (full > s->xmax && full >= ((uint64_t)1 << 32))
        full -= (uint64_t)1 << 32;
    if (full < s->xmin)
        return true;
    if (full >= s->xmax)
        return false;
    for (size_t i = 0; i < s->nxip; i++)
        if (s->xip[i] == full)
            return false;
    return true;
}
