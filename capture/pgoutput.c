/*
 * pgoutput protocol version 1 decoder (see pgoutput.h). A bounds-checked cursor reads
 * network-order integers and NUL-terminated strings from the message; any overrun is
 * a protocol error, never a crash.
 */
#include "capture/pgoutput.h"

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

typedef struct cursor {
    const uint8_t *p;
    const uint8_t *end;
    bool bad;
} cursor_t;

static uint8_t get8(cursor_t *c)
{
    if (c->bad || c->end - c->p < 1) {
        c->bad = true;
        return 0;
    }
    return *c->p++;
}

static uint16_t get16(cursor_t *c)
{
    uint16_t v;
    if (c->bad || c->end - c->p < 2) {
        c->bad = true;
        return 0;
    }
    v = (uint16_t)((c->p[0] << 8) | c->p[1]);
    c->p += 2;
    return v;
}

static uint32_t get32(cursor_t *c)
{
    uint32_t v;
    if (c->bad || c->end - c->p < 4) {
        c->bad = true;
        return 0;
    }
    v = ((uint32_t)c->p[0] << 24) | ((uint32_t)c->p[1] << 16) | ((uint32_t)c->p[2] << 8) |
        (uint32_t)c->p[3];
    c->p += 4;
    return v;
}

static uint64_t get64(cursor_t *c)
{
    uint64_t hi = get32(c);
    uint64_t lo = get32(c);
    return (hi << 32) | lo;
}

static const char *getstr(cursor_t *c)
{
    const uint8_t *nul;
    const char *s;
    if (c->bad) {
        return "";
    }
    nul = memchr(c->p, '\0', (size_t)(c->end - c->p));
    if (nul == NULL) {
        c->bad = true;
        return "";
    }
    s = (const char *)c->p;
    c->p = nul + 1;
    return s;
}

static const uint8_t *getbytes(cursor_t *c, uint32_t n)
{
    const uint8_t *s;
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        return NULL;
    }
    s = c->p;
    c->p += n;
    return s;
}

/* Reads a TupleData; values are taken from scratch->vals starting at *used. */
static cdc_err_t get_tuple(cursor_t *c, cdc_pgo_scratch_t *s, size_t *used, cdc_pgo_tuple_t *t,
                           cdc_error_t *e)
{
    uint16_t n = get16(c);
    if (c->bad)
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "truncated pgoutput tuple");
    if (cdc_array_reserve(s->vals, s->vals_cap, *used + n, 16) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory decoding tuple");
    t->ncols = n;
    t->cols = n > 0 ? s->vals + *used : NULL; /* no columns: scratch may have no array yet */
    for (uint16_t i = 0; i < n; i++) {
        cdc_pgo_value_t *v = &t->cols[i];
        v->kind = (char)get8(c);
        v->data = NULL;
        v->len = 0;
        switch (v->kind) {
        case CDC_PGO_VAL_NULL:
        case CDC_PGO_VAL_UNCHANGED:
            break;
        case CDC_PGO_VAL_TEXT:
        case CDC_PGO_VAL_BINARY:
            v->len = get32(c);
            v->data = (const char *)getbytes(c, v->len);
            break;
        default:
            if (!c->bad)
                return cdc_error_set(e, CDC_ERR_PROTOCOL,
                                     "unknown pgoutput column kind 0x%02x in column %u",
                                     (unsigned)(uint8_t)v->kind, (unsigned)i);
        }
        if (c->bad)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "truncated pgoutput tuple column %u",
                                 (unsigned)i);
    }
    *used += n;
    return CDC_OK;
}

cdc_err_t cdc_pgo_decode(const uint8_t *buf, size_t len, cdc_pgo_scratch_t *scratch,
                         cdc_pgo_msg_t *msg, cdc_error_t *e)
{
    cursor_t c = {buf, buf + len, false};
    size_t used = 0;
    cdc_err_t rc;
    uint8_t tag;

    memset(msg, 0, sizeof(*msg));
    tag = get8(&c);
    if (c.bad)
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "empty pgoutput message");
    msg->kind = (cdc_pgo_kind_t)tag;
    switch (tag) {
    case CDC_PGO_BEGIN:
        msg->u.begin.final_lsn = get64(&c);
        msg->u.begin.commit_ts = (int64_t)get64(&c);
        msg->u.begin.xid = get32(&c);
        break;
    case CDC_PGO_COMMIT:
        msg->u.commit.flags = get8(&c);
        msg->u.commit.commit_lsn = get64(&c);
        msg->u.commit.end_lsn = get64(&c);
        msg->u.commit.commit_ts = (int64_t)get64(&c);
        break;
    case CDC_PGO_ORIGIN:
        msg->u.origin.commit_lsn = get64(&c);
        msg->u.origin.name = getstr(&c);
        break;
    case CDC_PGO_RELATION: {
        uint16_t n;
        msg->u.relation.relid = get32(&c);
        msg->u.relation.nspname = getstr(&c);
        msg->u.relation.relname = getstr(&c);
        msg->u.relation.replident = (char)get8(&c);
        n = get16(&c);
        if (c.bad)
            break;
        if (cdc_array_reserve(scratch->cols, scratch->cols_cap, n, 16) != CDC_OK)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory decoding relation");
        msg->u.relation.ncols = n;
        msg->u.relation.cols = scratch->cols;
        for (uint16_t i = 0; i < n && !c.bad; i++) {
            cdc_pgo_column_t *col = &scratch->cols[i];
            col->key = (get8(&c) & 1) != 0;
            col->name = getstr(&c);
            col->type_oid = get32(&c);
            col->typmod = (int32_t)get32(&c);
        }
        break;
    }
    case CDC_PGO_TYPE:
        msg->u.type.oid = get32(&c);
        msg->u.type.nspname = getstr(&c);
        msg->u.type.typname = getstr(&c);
        break;
    case CDC_PGO_INSERT:
        msg->u.insert.relid = get32(&c);
        if (get8(&c) != 'N' && !c.bad)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "pgoutput insert without new tuple");
        if (c.bad)
            break;
        rc = get_tuple(&c, scratch, &used, &msg->u.insert.newtup, e);
        if (rc != CDC_OK)
            return rc;
        break;
    case CDC_PGO_UPDATE: {
        uint8_t sub;
        msg->u.update.relid = get32(&c);
        sub = get8(&c);
        if (c.bad)
            break;
        if (sub == 'K' || sub == 'O') {
            msg->u.update.old_kind = (char)sub;
            rc = get_tuple(&c, scratch, &used, &msg->u.update.oldtup, e);
            if (rc != CDC_OK)
                return rc;
            sub = get8(&c);
            if (c.bad)
                break;
        }
        if (sub != 'N')
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "pgoutput update without new tuple");
        rc = get_tuple(&c, scratch, &used, &msg->u.update.newtup, e);
        if (rc != CDC_OK)
            return rc;
        /* the second get_tuple() may have moved scratch->vals (a tuple of no columns has
         * none: the array may not exist) */
        if (msg->u.update.old_kind && msg->u.update.oldtup.ncols > 0)
            msg->u.update.oldtup.cols = scratch->vals;
        if (msg->u.update.newtup.ncols > 0)
            msg->u.update.newtup.cols = scratch->vals + msg->u.update.oldtup.ncols;
        break;
    }
    case CDC_PGO_DELETE: {
        uint8_t sub;
        msg->u.del.relid = get32(&c);
        sub = get8(&c);
        if (c.bad)
            break;
        if (sub != 'K' && sub != 'O')
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "pgoutput delete without old tuple");
        msg->u.del.old_kind = (char)sub;
        rc = get_tuple(&c, scratch, &used, &msg->u.del.oldtup, e);
        if (rc != CDC_OK)
            return rc;
        break;
    }
    case CDC_PGO_TRUNCATE: {
        uint32_t n = get32(&c);
        msg->u.truncate.options = get8(&c);
        if (c.bad)
            break;
        if ((size_t)(c.end - c.p) < (size_t)n * 4)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "truncated pgoutput truncate message");
        if (cdc_array_reserve(scratch->relids, scratch->relids_cap, n ? n : 1, 16) != CDC_OK)
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory decoding truncate");
        msg->u.truncate.nrelids = n;
        msg->u.truncate.relids = scratch->relids;
        for (uint32_t i = 0; i < n; i++)
            scratch->relids[i] = get32(&c);
        break;
    }
    case CDC_PGO_MESSAGE:
        msg->u.message.flags = get8(&c);
        msg->u.message.lsn = get64(&c);
        msg->u.message.prefix = getstr(&c);
        msg->u.message.len = get32(&c);
        msg->u.message.content = (const char *)getbytes(&c, msg->u.message.len);
        break;
    default:
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "unknown pgoutput message type 0x%02x",
                             (unsigned)tag);
    }
    if (c.bad)
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "truncated pgoutput message '%c'", (char)tag);
    return CDC_OK;
}

void cdc_pgo_scratch_free(cdc_pgo_scratch_t *scratch)
{
    if (scratch == NULL)
        return;
    free(scratch->vals);
    free(scratch->cols);
    free(scratch->relids);
    memset(scratch, 0, sizeof(*scratch));
}
