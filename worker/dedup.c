/*
 * Dedup on top of the partition's state store (see dedup.h for the key layout).
 * Writes go to the store directly (no WAL); the store becomes durable only through a
 * checkpoint at the next barrier, together with the Kafka offsets it matches.
 */
#include "worker/dedup.h"

#include <stdlib.h>
#include <string.h>

void cdc_dedup_state_options(cdc_state_options_t *o, int ttl_seconds)
{
    memset(o, 0, sizeof(*o));
    o->nfamilies = 2;
    o->families[CDC_DEDUP_FAMILY] = "dedup";
    o->ttl_seconds[CDC_DEDUP_FAMILY] = ttl_seconds;
    o->families[CDC_ROWS_FAMILY] = "rows";
    o->ttl_seconds[CDC_ROWS_FAMILY] = 0;
}

cdc_err_t cdc_dedup_open(const char *dir, int ttl_seconds, cdc_dedup_t **out, cdc_error_t *e)
{
    cdc_state_options_t o;
    cdc_dedup_t *d = calloc(1, sizeof(*d));
    cdc_err_t rc;
    if (d == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cdc_dedup_state_options(&o, ttl_seconds);
    rc = cdc_state_open(dir, &o, &d->st, e);
    if (rc != CDC_OK) {
        free(d);
        return rc;
    }
    d->batch = cdc_state_batch_new(d->st);
    d->ttl_seconds = ttl_seconds;
    *out = d;
    return CDC_OK;
}

void cdc_dedup_close(cdc_dedup_t *d)
{
    if (d == NULL)
        return;
    cdc_state_batch_free(d->batch);
    cdc_state_close(d->st);
    free(d);
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* 'S' + entity + lsn + op into a malloc'd buffer. */
static uint8_t *seen_key(const cdc_change_t *c, size_t *len)
{
    uint8_t *k = malloc(c->entity_len + 10);
    if (k == NULL)
        return NULL;
    k[0] = 'S';
    memcpy(k + 1, c->entity, c->entity_len);
    put_u64(k + 1 + c->entity_len, c->lsn);
    k[9 + c->entity_len] = (uint8_t)c->op;
    *len = c->entity_len + 10;
    return k;
}

static uint8_t *pos_key(const cdc_change_t *c, size_t *len)
{
    uint8_t *k = malloc(c->entity_len + 1);
    if (k == NULL)
        return NULL;
    k[0] = 'P';
    memcpy(k + 1, c->entity, c->entity_len);
    *len = c->entity_len + 1;
    return k;
}

/* (a1, b1) <= (a2, b2) */
static bool pos_le(uint64_t c1, uint64_t l1, uint64_t c2, uint64_t l2)
{
    return c1 < c2 || (c1 == c2 && l1 <= l2);
}

cdc_err_t cdc_dedup_check(cdc_dedup_t *d, const cdc_change_t *c, cdc_dedup_verdict_t *verdict,
                          uint8_t **image, size_t *image_len, cdc_error_t *e)
{
    size_t klen, vlen;
    void *val = NULL;
    uint8_t *key;
    cdc_err_t rc;

    *image = NULL;
    *image_len = 0;
    *verdict = CDC_DEDUP_NEW;
    /* A live entity's position decides alone: an exact replay has the same position,
     * so it is "not after" the last one. The (entity, lsn, op) key is consulted when
     * the entity is not live (deleted, expired, or never seen). */
    rc = cdc_state_get(d->st, CDC_ROWS_FAMILY, c->entity, c->entity_len, &val, &vlen, e);
    if (rc == CDC_OK && vlen >= 16) {
        uint64_t lc = get_u64(val), ll = get_u64((uint8_t *)val + 8);
        if (pos_le(c->commit_lsn, c->lsn, lc, ll)) {
            *verdict = c->commit_lsn == lc && c->lsn == ll ? CDC_DEDUP_REPLAY : CDC_DEDUP_STALE;
            free(val);
            return CDC_OK;
        }
        *image = val;
        *image_len = vlen;
        return CDC_OK;
    }
    free(val);
    if (rc != CDC_OK && rc != CDC_ERR_NOT_FOUND)
        return rc;

    key = seen_key(c, &klen);
    if (key == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    rc = cdc_state_get(d->st, CDC_DEDUP_FAMILY, key, klen, &val, &vlen, e);
    free(key);
    if (rc == CDC_OK) {
        free(val);
        *verdict = CDC_DEDUP_REPLAY;
        return CDC_OK;
    }
    if (rc != CDC_ERR_NOT_FOUND)
        return rc;
    /* Not live: a deleted entity may still have a (TTL-bounded) position. */
    key = pos_key(c, &klen);
    if (key == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    rc = cdc_state_get(d->st, CDC_DEDUP_FAMILY, key, klen, &val, &vlen, e);
    free(key);
    if (rc == CDC_OK) {
        if (vlen >= 16 && pos_le(c->commit_lsn, c->lsn, get_u64(val), get_u64((uint8_t *)val + 8)))
            *verdict = CDC_DEDUP_STALE;
        free(val);
        return CDC_OK;
    }
    return rc == CDC_ERR_NOT_FOUND ? CDC_OK : rc;
}

/* Only the columns that PostgreSQL can TOAST are kept for repair. */
static bool toastable(cdc_ice_type_t t)
{
    return t == CDC_ICE_STRING || t == CDC_ICE_BINARY || t == CDC_ICE_DECIMAL;
}

cdc_err_t cdc_dedup_record(cdc_dedup_t *d, const cdc_change_t *c, cdc_error_t *e)
{
    size_t sklen, pklen;
    uint8_t *sk = seen_key(c, &sklen), *pk = pos_key(c, &pklen), pos[16];
    cdc_err_t rc = CDC_OK;

    if (sk == NULL || pk == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    put_u64(pos, c->commit_lsn);
    put_u64(pos + 8, c->lsn);
    cdc_state_batch_clear(d->batch);
    cdc_state_batch_put(d->batch, CDC_DEDUP_FAMILY, sk, sklen, "", 0);
    if (c->op == CDC_OP_DELETE) {
        /* A live row keeps its position in "rows"; a deleted one keeps it here. */
        cdc_state_batch_put(d->batch, CDC_DEDUP_FAMILY, pk, pklen, pos, 16);
        cdc_state_batch_delete(d->batch, CDC_ROWS_FAMILY, c->entity, c->entity_len);
    } else {
        /* Image of the toastable columns only, tagged by field id. */
        const cdc_source_schema_t *s = c->after.schema;
        cdc_source_schema_t sub = *s;
        cdc_column_t cols[s->ncols ? s->ncols : 1];
        cdc_val_t vals[s->ncols ? s->ncols : 1];
        cdc_row_t img = {&sub, vals};
        uint8_t *buf = NULL, *full;
        size_t blen = 0;
        sub.ncols = 0;
        sub.cols = cols;
        for (size_t i = 0; i < s->ncols; i++)
            if (toastable(s->cols[i].type)) {
                cols[sub.ncols] = s->cols[i];
                vals[sub.ncols++] = c->after.vals[i];
            }
        if (!cdc_row_serialize(&img, &buf, &blen) || (full = malloc(blen + 16)) == NULL) {
            free(buf);
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        memcpy(full, pos, 16);
        memcpy(full + 16, buf, blen);
        cdc_state_batch_put(d->batch, CDC_ROWS_FAMILY, c->entity, c->entity_len, full, blen + 16);
        free(buf);
        free(full);
    }
    rc = cdc_state_write(d->st, d->batch, e);
done:
    free(sk);
    free(pk);
    return rc;
}
