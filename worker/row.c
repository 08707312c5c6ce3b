/*
 * Rows in binary form (decode.h): the entity key of a change (its table identity and
 * canonical key values, the key of every per-row record in state) and its inverse, and
 * the serialized row image kept in state for TOAST repair, whose values are tagged by
 * field id so that an image written under one schema version reads under a later one.
 *
 * A call circle of two files (docs/development.md, "Call circles"): row.c sets the values
 * of a row image it reads back with convert.c's setters, and convert.c clears a row it
 * could not finish with row.c's cdc_row_clear.
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/decode_int.h"

void cdc_row_clear(cdc_row_t *r)
{
    if (r->vals != NULL && r->schema != NULL)
        for (size_t i = 0; i < r->schema->ncols; i++)
            free(r->vals[i].bytes);
    free(r->vals);
    r->vals = NULL;
}

/* ---- binary values ------------------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Fixed-width payload of a non-byte value. */
static size_t fixed_payload(const cdc_column_t *col, const cdc_val_t *v, uint8_t out[16])
{
    switch (col->type) {
    case CDC_ICE_BOOLEAN:
        out[0] = v->u.b;
        return 1;
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE:
        memcpy(out, &v->u.d, 8);
        return 8;
    case CDC_ICE_DECIMAL:
        memcpy(out, &v->u.dec, 16);
        return 16;
    default: {
        uint64_t x = (uint64_t)v->u.i;
        for (int k = 0; k < 8; k++)
            out[k] = (uint8_t)(x >> (56 - 8 * k));
        return 8;
    }
    }
}

static bool is_bytes_type(cdc_ice_type_t t)
{
    return t == CDC_ICE_STRING || t == CDC_ICE_BINARY || t == CDC_ICE_UUID || t == CDC_ICE_LIST ||
           t == CDC_ICE_STRUCT;
}

/* ---- entity keys --------------------------------------------------------------------- */

/* Entity key: "<ns>.<table>\0" then per key column: type, length, canonical bytes. */
bool cdc_decode_entity(const cdc_source_schema_t *s, const cdc_row_t *r, cdc_change_t *c,
                       cdc_decode_error_t *de)
{
    size_t nsl = strlen(s->ns), tl = strlen(s->table), cap = nsl + tl + 2, n;
    uint8_t fixed[16];

    if (s->nkey == 0) {
        de->cls = CDC_DLQ_MISSING_KEY;
        snprintf(de->msg, sizeof(de->msg), "table \"%s.%s\" has no primary key", s->ns, s->table);
        return false;
    }
    for (size_t k = 0; k < s->nkey; k++) {
        const cdc_val_t *v = &r->vals[s->key_cols[k]];
        if (v->kind != CDC_VAL_SET) {
            de->cls = CDC_DLQ_MISSING_KEY;
            snprintf(de->msg, sizeof(de->msg), "key column \"%s\" is missing or null",
                     s->cols[s->key_cols[k]].name);
            return false;
        }
        cap += 5 + (is_bytes_type(s->cols[s->key_cols[k]].type) ? v->len : 16);
    }
    c->entity = malloc(cap);
    if (c->entity == NULL)
        return false;
    memcpy(c->entity, s->ns, nsl); /* "<ns>.<table>\0" */
    c->entity[nsl] = '.';
    memcpy(c->entity + nsl + 1, s->table, tl + 1);
    n = nsl + tl + 2;
    for (size_t k = 0; k < s->nkey; k++) {
        const cdc_column_t *col = &s->cols[s->key_cols[k]];
        const cdc_val_t *v = &r->vals[s->key_cols[k]];
        const uint8_t *p = fixed;
        size_t len;
        if (is_bytes_type(col->type)) {
            p = v->bytes;
            len = v->len;
        } else {
            cdc_column_t as_long = *col;
            if (col->type == CDC_ICE_INT)
                as_long.type = CDC_ICE_LONG; /* int -> long promotion keeps the key */
            len = fixed_payload(&as_long, v, fixed);
        }
        c->entity[n++] = col->type == CDC_ICE_INT ? CDC_ICE_LONG : (uint8_t)col->type;
        put_u32(c->entity + n, (uint32_t)len);
        n += 4;
        memcpy(c->entity + n, p, len);
        n += len;
    }
    c->entity_len = n;
    return true;
}

bool cdc_decode_entity_row(const cdc_source_schema_t *s, const uint8_t *entity, size_t len,
                           cdc_row_t *row)
{
    const uint8_t *z = memchr(entity, 0, len), *p, *end = entity + len;

    row->schema = s;
    row->vals = NULL;
    if (z == NULL || s->nkey == 0 ||
        (row->vals = calloc(s->ncols ? s->ncols : 1, sizeof(cdc_val_t))) == NULL)
        return false;
    for (size_t i = 0; i < s->ncols; i++)
        row->vals[i].kind = CDC_VAL_NULL;
    p = z + 1;
    for (size_t k = 0; k < s->nkey; k++) {
        const cdc_column_t *col = &s->cols[s->key_cols[k]];
        cdc_val_t *v = &row->vals[s->key_cols[k]];
        uint8_t type = col->type == CDC_ICE_INT ? CDC_ICE_LONG : (uint8_t)col->type;
        uint32_t n;
        if (end - p < 5 || p[0] != type)
            goto bad;
        n = get_u32(p + 1);
        p += 5;
        if ((size_t)(end - p) < n)
            goto bad;
        if (is_bytes_type(col->type)) {
            if ((v->bytes = malloc(n ? n : 1)) == NULL)
                goto bad;
            memcpy(v->bytes, p, n);
            v->len = n;
        } else if (col->type == CDC_ICE_BOOLEAN && n == 1) {
            v->u.b = p[0] != 0;
        } else if ((col->type == CDC_ICE_FLOAT || col->type == CDC_ICE_DOUBLE) && n == 8) {
            memcpy(&v->u.d, p, 8);
        } else if (col->type == CDC_ICE_DECIMAL && n == 16) {
            memcpy(&v->u.dec, p, 16);
        } else if (n == 8) {
            uint64_t x = 0;
            for (int b = 0; b < 8; b++)
                x = x << 8 | p[b];
            v->u.i = (int64_t)x;
        } else {
            goto bad;
        }
        v->kind = CDC_VAL_SET;
        p += n;
    }
    if (p == end)
        return true;
bad:
    cdc_row_clear(row);
    return false;
}

/* ---- row images ---------------------------------------------------------------------- */

bool cdc_row_serialize(const cdc_row_t *r, uint8_t **out, size_t *out_len)
{
    size_t nholes = 0;
    return cdc_row_serialize_split(r, 0, SIZE_MAX, out, out_len, NULL, &nholes);
}

bool cdc_row_serialize_split(const cdc_row_t *r, size_t head, size_t big, uint8_t **out,
                             size_t *out_len, cdc_row_hole_t *holes, size_t *nholes)
{
    const cdc_source_schema_t *s = r->schema;
    size_t cap = head + 1, n = head;
    uint8_t *buf;
    *nholes = 0;
    for (size_t i = 0; i < s->ncols; i++)
        cap += 10 + (r->vals[i].bytes && r->vals[i].len < big ? r->vals[i].len + 4 : 16);
    buf = malloc(cap);
    if (buf == NULL)
        return false;
    buf[n++] = 1; /* format version */
    for (size_t i = 0; i < s->ncols; i++) {
        const cdc_val_t *v = &r->vals[i];
        if (v->kind == CDC_VAL_TOAST)
            continue; /* never store a placeholder: absent = unknown */
        put_u32(buf + n, (uint32_t)s->cols[i].field_id);
        n += 4;
        buf[n++] = (uint8_t)s->cols[i].type;
        buf[n++] = (uint8_t)v->kind;
        if (v->kind != CDC_VAL_SET)
            continue;
        if (is_bytes_type(s->cols[i].type)) {
            put_u32(buf + n, (uint32_t)v->len);
            n += 4;
            if (v->len >= big) { /* left to the caller: a hole at n */
                holes[*nholes].at = n;
                holes[*nholes].p = v->bytes;
                holes[(*nholes)++].len = v->len;
                continue;
            }
            memcpy(buf + n, v->bytes, v->len);
            n += v->len;
        } else {
            n += fixed_payload(&s->cols[i], v, buf + n);
        }
    }
    *out = buf;
    *out_len = n;
    return true;
}

int cdc_row_image_lookup(const uint8_t *img, size_t len, int32_t field_id, cdc_val_t *v)
{
    size_t n = 1;
    if (len < 1 || img[0] != 1)
        return -1;
    while (n < len) {
        if (n + 6 > len)
            return -1;
        int32_t fid = (int32_t)get_u32(img + n);
        cdc_ice_type_t type = (cdc_ice_type_t)img[n + 4];
        cdc_val_kind_t kind = (cdc_val_kind_t)img[n + 5];
        size_t plen = 0, skip = 0;
        n += 6;
        if (kind == CDC_VAL_SET) {
            if (is_bytes_type(type)) {
                if (n + 4 > len)
                    return -1;
                plen = get_u32(img + n);
                skip = 4 + plen;
            } else {
                skip = type == CDC_ICE_BOOLEAN ? 1 : type == CDC_ICE_DECIMAL ? 16 : 8;
            }
            if (n + skip > len)
                return -1;
        }
        if (fid == field_id) {
            memset(v, 0, sizeof(*v));
            v->kind = kind;
            if (kind != CDC_VAL_SET)
                return 1;
            if (is_bytes_type(type)) {
                if (!cdc_val_set_bytes(v, img + n + 4, plen))
                    return -1;
            } else if (type == CDC_ICE_BOOLEAN) {
                v->u.b = img[n] != 0;
            } else if (type == CDC_ICE_FLOAT || type == CDC_ICE_DOUBLE) {
                memcpy(&v->u.d, img + n, 8);
            } else if (type == CDC_ICE_DECIMAL) {
                memcpy(&v->u.dec, img + n, 16);
            } else {
                uint64_t x = 0;
                for (int k = 0; k < 8; k++)
                    x = x << 8 | img[n + k];
                v->u.i = (int64_t)x;
            }
            return 1;
        }
        n += skip;
    }
    return 0;
}
