/* Chunked events: header format and reassembly (see evchunk.h). */
#include "common/evchunk.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t cdc_evchunk_format(const cdc_evchunk_t *c, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%016" PRIx64 "/%" PRIu32 "/%" PRIu32 "/%" PRIu64 "/%" PRIu64,
                     c->id, c->index, c->count, c->total, c->lsn);
    return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}

/* One unsigned field of base `base` ending at `end` ('/' or the value's end). */
static bool field(const char **p, const char *end, int base, uint64_t *out)
{
    char tmp[32];
    const char *q = *p;
    size_t n = 0;
    while (q < end && *q != '/' && n < sizeof(tmp) - 1)
        tmp[n++] = *q++;
    if (n == 0 || (q < end && *q != '/'))
        return false;
    tmp[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!(tmp[i] >= '0' && tmp[i] <= '9') &&
            !(base == 16 && ((tmp[i] >= 'a' && tmp[i] <= 'f') || (tmp[i] >= 'A' && tmp[i] <= 'F'))))
            return false;
    *out = strtoull(tmp, NULL, base);
    *p = q < end ? q + 1 : q;
    return true;
}

bool cdc_evchunk_parse(const void *value, size_t len, cdc_evchunk_t *out)
{
    const char *p = value, *end = p + len;
    uint64_t f[5];
    if (value == NULL || len == 0 || len >= CDC_EVCHUNK_HEADER_MAX)
        return false;
    for (int i = 0; i < 5; i++)
        if (!field(&p, end, i == 0 ? 16 : 10, &f[i]))
            return false;
    if (p != end || f[2] == 0 || f[1] >= f[2] || f[2] > UINT32_MAX)
        return false;
    *out = (cdc_evchunk_t){f[0], (uint32_t)f[1], (uint32_t)f[2], f[3], f[4]};
    return true;
}

uint32_t cdc_evchunk_count(uint64_t total, size_t chunk_bytes)
{
    uint64_t n = chunk_bytes ? (total + chunk_bytes - 1) / chunk_bytes : 1;
    return n == 0 ? 1 : n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

int64_t cdc_evchunk_grace_ms(uint64_t bytes)
{
    uint64_t ms = bytes / (CDC_EVCHUNK_GRACE_BYTES_PER_S / 1000);
    return ms > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ms;
}

void cdc_evasm_init(cdc_evasm_t *a)
{
    memset(a, 0, sizeof(*a));
    a->first_offset = a->last_offset = -1;
}

void cdc_evasm_reset(cdc_evasm_t *a)
{
    free(a->data);
    a->data = NULL;
    a->len = 0;
    a->open = a->oversized = false;
    a->next_index = 0;
    a->first_offset = a->last_offset = -1;
}

void cdc_evasm_free(cdc_evasm_t *a)
{
    cdc_evasm_reset(a);
}

bool cdc_evasm_interrupt(cdc_evasm_t *a)
{
    if (!a->open)
        return false;
    cdc_evasm_reset(a);
    a->torn++;
    return true;
}

/* Whether h continues the open sequence with len more bytes. */
static bool continues(const cdc_evasm_t *a, const cdc_evchunk_t *h, size_t len)
{
    return a->open && h->id == a->seq.id && h->index == a->next_index && h->count == a->seq.count &&
           h->total == a->seq.total && h->lsn == a->seq.lsn &&
           (uint64_t)len <= a->seq.total - (uint64_t)a->len &&
           (h->index + 1 < h->count || (uint64_t)(a->len + len) == a->seq.total);
}

cdc_err_t cdc_evasm_add(cdc_evasm_t *a, const cdc_evchunk_t *h, int64_t offset, const void *data,
                        size_t len, size_t max_total, cdc_evasm_result_t *res, bool *last,
                        bool *torn)
{
    *last = false;
    *torn = false;
    if (h->index == 0) {
        bool over = max_total > 0 && h->total > (uint64_t)max_total;
        uint8_t *buf = NULL;
        if ((uint64_t)len > h->total || (h->count == 1 && (uint64_t)len != h->total) ||
            h->total > SIZE_MAX) {
            *torn = cdc_evasm_interrupt(a);
            a->rejected++;
            *res = CDC_EVASM_REJECTED;
            return CDC_OK;
        }
        if (!over && (buf = malloc(h->total ? (size_t)h->total : 1)) == NULL)
            return CDC_ERR_NOMEM;
        *torn = cdc_evasm_interrupt(a);
        a->open = true;
        a->oversized = over;
        a->seq = *h;
        a->first_offset = offset;
        a->data = buf;
        a->len = 0;
        a->next_index = 0;
    } else if (!continues(a, h, len)) {
        *torn = cdc_evasm_interrupt(a);
        a->rejected++;
        *res = CDC_EVASM_REJECTED;
        return CDC_OK;
    }
    if (a->data != NULL && len > 0)
        memcpy(a->data + a->len, data, len);
    a->len += len;
    a->next_index++;
    a->last_offset = offset;
    if (a->next_index < a->seq.count) {
        *res = a->oversized ? CDC_EVASM_OVERSIZED : CDC_EVASM_MORE;
        return CDC_OK;
    }
    if (a->oversized) {
        *last = true;
        *res = CDC_EVASM_OVERSIZED;
        cdc_evasm_reset(a);
        return CDC_OK;
    }
    *res = CDC_EVASM_COMPLETE;
    return CDC_OK;
}

uint8_t *cdc_evasm_take(cdc_evasm_t *a, size_t *len, int64_t *first_offset, int64_t *last_offset)
{
    uint8_t *d = a->data;
    *len = a->len;
    *first_offset = a->first_offset;
    *last_offset = a->last_offset;
    a->data = NULL;
    cdc_evasm_reset(a);
    return d;
}

int64_t cdc_evasm_resume_offset(const cdc_evasm_t *a)
{
    return a->open ? a->first_offset : -1;
}
