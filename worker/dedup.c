/*
 * Dedup on top of the partition's state store (see dedup.h for the key layout).
 * Writes of accepted changes are collected in one write batch per consumed Kafka batch
 * (an in-memory overlay answers lookups until it is written) and go to the store with an
 * unsynced, buffered WAL; the store becomes durable only through a checkpoint at the
 * next barrier, together with the Kafka offsets it matches. The checkpoint copies the
 * WAL rather than flushing the memtables (no table file, flush or compaction per epoch
 * per partition), up to the size of the store's memtables; a held
 * store (cdc_dedup_cut .. cdc_dedup_checkpoint_cut) keeps new writes in the overlay while
 * another thread copies it.
 */
#include "worker/dedup.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/log.h"

void cdc_dedup_state_options(cdc_state_options_t *o, int ttl_seconds)
{
    memset(o, 0, sizeof(*o));
    o->nfamilies = 2;
    o->families[CDC_DEDUP_FAMILY] = "dedup";
    o->ttl_seconds[CDC_DEDUP_FAMILY] = ttl_seconds;
    o->families[CDC_ROWS_FAMILY] = "rows";
    o->ttl_seconds[CDC_ROWS_FAMILY] = 0;
    /* Small memtables: under load an epoch's writes reach table files in the background
     * while the epoch runs, so the checkpoint at the barrier flushes only the rest (drain
     * commit p99 about 350 ms instead of 500 to 590 ms with 4 MiB; docs/worker.md). */
    o->write_buffer_size = (size_t)1 << 20;
    /* A checkpoint copies the WAL instead of flushing while the WAL holds no more than
     * one memtable's worth (common/state.c): at a steady rate a partition flushes when
     * its memtables fill, not at every barrier, which was most of a worker's CPU per
     * epoch; and a checkpoint copies (uploads) at most 1 MiB of WAL per partition
     * (docs/worker.md). */
    o->wal_checkpoint_bytes = o->write_buffer_size;
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
    d->no_positions = !cdc_state_may_have_prefix(d->st, CDC_DEDUP_FAMILY, "P", 1);
    *out = d;
    return CDC_OK;
}

/* ---- pending writes: an overlay over the store until the next flush ---------------- */

typedef struct cdc_dedup_entry {
    size_t koff, klen, voff, vlen;
    uint32_t hash;
    uint8_t family;
    bool deleted;
} cdc_dedup_entry_t;

static uint32_t pending_hash(int family, const uint8_t *k, size_t n)
{
    return (uint32_t)cdc_hash_bytes(k, n, (uint64_t)family);
}

static cdc_dedup_entry_t *pending_find(cdc_dedup_pending_t *p, int family, const void *key,
                                       size_t klen, uint32_t h)
{
    if (p->nslots == 0)
        return NULL;
    for (size_t i = h & (p->nslots - 1);; i = (i + 1) & (p->nslots - 1)) {
        uint32_t s = p->slots[i];
        if (s == 0)
            return NULL;
        cdc_dedup_entry_t *en = &p->entries[s - 1];
        if (en->hash == h && en->family == family && en->klen == klen &&
            memcmp(p->arena + en->koff, key, klen) == 0)
            return en;
    }
}

static bool arena_add(cdc_dedup_pending_t *p, const void *data, size_t n, size_t *off)
{
    if (cdc_array_reserve(p->arena, p->arena_cap, p->arena_len + n, 65536) != CDC_OK)
        return false;
    if (n > 0 && data != NULL)
        memcpy(p->arena + p->arena_len, data, n);
    *off = p->arena_len;
    p->arena_len += n;
    return true;
}

static bool pending_rehash(cdc_dedup_pending_t *p, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof(*slots));
    if (slots == NULL)
        return false;
    for (size_t e = 0; e < p->nentries; e++) {
        size_t i = p->entries[e].hash & (nslots - 1);
        while (slots[i] != 0)
            i = (i + 1) & (nslots - 1);
        slots[i] = (uint32_t)(e + 1);
    }
    free(p->slots);
    p->slots = slots;
    p->nslots = nslots;
    return true;
}

/* Room for n more entries and bytes more arena bytes, so that pending_set cannot fail. */
static bool pending_reserve(cdc_dedup_pending_t *p, size_t n, size_t bytes)
{
    size_t off;
    if ((p->nentries + n) * 2 > p->nslots) {
        size_t ns = p->nslots ? p->nslots : 1024;
        while ((p->nentries + n) * 2 > ns)
            ns *= 2;
        if (!pending_rehash(p, ns))
            return false;
    }
    if (cdc_array_reserve(p->entries, p->entries_cap, p->nentries + n, 512) != CDC_OK)
        return false;
    if (!arena_add(p, NULL, bytes, &off))
        return false;
    p->arena_len -= bytes; /* only the capacity was wanted */
    return true;
}

/* Sets (or marks deleted) family/key in the overlay. Fails only without a reserve. */
static bool pending_set(cdc_dedup_pending_t *p, int family, const void *key, size_t klen,
                        const void *val, size_t vlen, bool deleted)
{
    uint32_t h = pending_hash(family, key, klen);
    cdc_dedup_entry_t *en = pending_find(p, family, key, klen, h);
    size_t voff;
    if (!arena_add(p, val, vlen, &voff))
        return false;
    if (en == NULL) {
        size_t koff;
        if ((p->nentries + 1) * 2 > p->nslots &&
            !pending_rehash(p, p->nslots ? p->nslots * 2 : 1024))
            return false;
        if (cdc_array_reserve(p->entries, p->entries_cap, p->nentries + 1, 512) != CDC_OK)
            return false;
        if (!arena_add(p, key, klen, &koff))
            return false;
        en = &p->entries[p->nentries++];
        en->koff = koff;
        en->klen = klen;
        en->hash = h;
        en->family = (uint8_t)family;
        size_t i = h & (p->nslots - 1);
        while (p->slots[i] != 0)
            i = (i + 1) & (p->nslots - 1);
        p->slots[i] = (uint32_t)p->nentries;
    }
    en->voff = voff;
    en->vlen = vlen;
    en->deleted = deleted;
    return true;
}

static void pending_clear(cdc_dedup_pending_t *p)
{
    if (p->nentries > 0 && p->slots != NULL)
        memset(p->slots, 0, p->nslots * sizeof(*p->slots));
    p->nentries = 0;
    p->arena_len = 0;
    if (p->arena_cap > CDC_STATE_LARGE_VALUE) { /* grown for a large row: given back */
        free(p->arena);
        p->arena = NULL;
        p->arena_cap = 0;
    }
}

static void pending_free(cdc_dedup_pending_t *p)
{
    free(p->arena);
    free(p->entries);
    free(p->slots);
    memset(p, 0, sizeof(*p));
}

/*
 * Looks key up in the overlay first, then in the store. Same contract as cdc_state_get
 * (a pending delete is CDC_ERR_NOT_FOUND).
 */
static cdc_err_t lookup(cdc_dedup_t *d, int family, const void *key, size_t klen, void **val,
                        size_t *vlen, cdc_error_t *e)
{
    cdc_dedup_pending_t *p = &d->pending;
    cdc_dedup_entry_t *en =
        p->nentries ? pending_find(p, family, key, klen, pending_hash(family, key, klen)) : NULL;
    *val = NULL;
    *vlen = 0;
    if (en == NULL) {
        d->store_lookups++;
        return cdc_state_get(d->st, family, key, klen, val, vlen, e);
    }
    if (en->deleted)
        return CDC_ERR_NOT_FOUND;
    *val = malloc(en->vlen ? en->vlen : 1);
    if (*val == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    memcpy(*val, p->arena + en->voff, en->vlen);
    *vlen = en->vlen;
    return CDC_OK;
}

cdc_err_t cdc_dedup_flush(cdc_dedup_t *d, cdc_error_t *e)
{
    cdc_err_t rc;
    if (d == NULL || cdc_state_batch_count(d->batch) == 0 || atomic_load(&d->held))
        return CDC_OK;
    rc = cdc_state_write(d->st, d->batch, e);
    if (rc != CDC_OK)
        return rc;
    cdc_state_batch_clear(d->batch);
    pending_clear(&d->pending);
    return CDC_OK;
}

cdc_err_t cdc_dedup_checkpoint(cdc_dedup_t *d, const char *dir, cdc_error_t *e)
{
    cdc_err_t rc = cdc_dedup_flush(d, e);
    return rc == CDC_OK ? cdc_state_checkpoint(d->st, dir, e) : rc;
}

cdc_err_t cdc_dedup_cut(cdc_dedup_t *d, cdc_error_t *e)
{
    cdc_err_t rc;
    if (atomic_load(&d->held))
        return cdc_error_set(e, CDC_ERR_INTERNAL,
                             "state store is still held by the previous checkpoint");
    rc = cdc_dedup_flush(d, e);
    if (rc == CDC_OK)
        atomic_store(&d->held, true);
    return rc;
}

cdc_err_t cdc_dedup_checkpoint_cut(cdc_dedup_t *d, const char *dir, cdc_error_t *e)
{
    /* The record thread only reads the store meanwhile: RocksDB allows that. */
    cdc_err_t rc = cdc_state_checkpoint(d->st, dir, e);
    atomic_store(&d->held, false);
    return rc;
}

void cdc_dedup_release(cdc_dedup_t *d)
{
    if (d != NULL)
        atomic_store(&d->held, false);
}

void cdc_dedup_close(cdc_dedup_t *d)
{
    cdc_error_t e;
    if (d == NULL)
        return;
    atomic_store(&d->held, false);
    if (cdc_dedup_flush(d, &e) != CDC_OK)
        cdc_log_warn("could not write pending dedup state: %s", e.msg);
    cdc_state_batch_free(d->batch);
    pending_free(&d->pending);
    for (size_t i = 0; i < d->nmarkers; i++)
        free(d->markers[i].table);
    free(d->markers);
    free(d->kbuf);
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

/* 'S' + entity + lsn + op into k (entity_len + 10 bytes); returns the length. */
static size_t seen_key_into(const cdc_change_t *c, uint8_t *k)
{
    k[0] = 'S';
    memcpy(k + 1, c->entity, c->entity_len);
    put_u64(k + 1 + c->entity_len, c->lsn);
    k[9 + c->entity_len] = (uint8_t)c->op;
    return c->entity_len + 10;
}

/* 'P' + entity into k (entity_len + 1 bytes); returns the length. */
static size_t pos_key_into(const cdc_change_t *c, uint8_t *k)
{
    k[0] = 'P';
    memcpy(k + 1, c->entity, c->entity_len);
    return c->entity_len + 1;
}

/* 'S' + entity + lsn + op into a malloc'd buffer. */
static uint8_t *seen_key(const cdc_change_t *c, size_t *len)
{
    uint8_t *k = malloc(c->entity_len + 10);
    if (k != NULL)
        *len = seen_key_into(c, k);
    return k;
}

static uint8_t *pos_key(const cdc_change_t *c, size_t *len)
{
    uint8_t *k = malloc(c->entity_len + 1);
    if (k != NULL)
        *len = pos_key_into(c, k);
    return k;
}

/* A scratch buffer of at least n bytes for lookup keys, owned by d (record thread). */
static uint8_t *key_buf(cdc_dedup_t *d, size_t n)
{
    if (cdc_array_reserve(d->kbuf, d->kbuf_cap, n, n) != CDC_OK)
        return NULL;
    return d->kbuf;
}

/* (a1, b1) <= (a2, b2) */
static bool pos_le(uint64_t c1, uint64_t l1, uint64_t c2, uint64_t l2)
{
    return c1 < c2 || (c1 == c2 && l1 <= l2);
}

/* Length of the table identity "<ns>.<table>\0" that starts every entity. */
static size_t table_prefix_len(const cdc_change_t *c)
{
    const uint8_t *z = memchr(c->entity, 0, c->entity_len);
    return z ? (size_t)(z - c->entity) + 1 : c->entity_len;
}

/* The table's truncate marker, loaded from "rows" on first use and cached. */
static cdc_err_t table_marker(cdc_dedup_t *d, const uint8_t *table, size_t len,
                              cdc_dedup_marker_t **out, cdc_error_t *e)
{
    size_t vlen = 0;
    void *val = NULL;
    cdc_dedup_marker_t *m;
    cdc_err_t rc;

    for (size_t i = 0; i < d->nmarkers; i++)
        if (d->markers[i].len == len && memcmp(d->markers[i].table, table, len) == 0) {
            *out = &d->markers[i];
            return CDC_OK;
        }
    rc = lookup(d, CDC_ROWS_FAMILY, table, len, &val, &vlen, e);
    if (rc != CDC_OK && rc != CDC_ERR_NOT_FOUND)
        return rc;
    if (cdc_array_resize(d->markers, d->nmarkers + 1) != CDC_OK) {
        free(val);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    m = &d->markers[d->nmarkers];
    memset(m, 0, sizeof(*m));
    m->table = malloc(len);
    if (m->table == NULL) {
        free(val);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    memcpy(m->table, table, len);
    m->len = len;
    if (rc == CDC_OK && vlen >= 16) {
        m->set = true;
        m->commit_lsn = get_u64(val);
        m->lsn = get_u64((uint8_t *)val + 8);
        m->floor = vlen >= 17 && ((uint8_t *)val)[16] == 1;
    }
    free(val);
    d->nmarkers++;
    *out = m;
    return CDC_OK;
}

/* cdc_dedup_check of a row change against its entity's state; before: the change is not
 * after the table's floor (then a row from before the floor still decides). */
static cdc_err_t check_entity(cdc_dedup_t *d, const cdc_change_t *c, const cdc_dedup_marker_t *mk,
                              bool before, cdc_dedup_verdict_t *verdict, uint8_t **image,
                              size_t *image_len, cdc_error_t *e)
{
    size_t klen, vlen;
    void *val = NULL;
    uint8_t *kbuf;
    cdc_err_t rc;

    /* A live entity's position decides alone: an exact replay has the same position,
     * so it is "not after" the last one. The (entity, lsn, op) key is consulted when
     * the entity is not live (deleted, expired, or never seen). */
    rc = lookup(d, CDC_ROWS_FAMILY, c->entity, c->entity_len, &val, &vlen, e);
    if (rc == CDC_OK && vlen >= 16 && mk->set && !before &&
        pos_le(get_u64(val), get_u64((uint8_t *)val + 8), mk->commit_lsn, mk->lsn))
        rc = CDC_ERR_NOT_FOUND; /* a row from before the truncate: gone */
    if (rc == CDC_OK && vlen >= 16) {
        uint64_t lc = get_u64(val), ll = get_u64((uint8_t *)val + 8);
        if (pos_le(c->commit_lsn, c->lsn, lc, ll)) {
            *verdict = c->commit_lsn == lc && c->lsn == ll ? CDC_DEDUP_REPLAY : CDC_DEDUP_STALE;
            free(val);
            return CDC_OK;
        }
        /* a chunk read again: this snapshot read the row before (dedup.h, "Snapshot
         * reads") */
        if (c->op == CDC_OP_READ && c->snapshot_tag != 0 && !before &&
            cdc_dedup_image_snapshot(val, vlen) == c->snapshot_tag) {
            *verdict = CDC_DEDUP_SNAPSHOT_REREAD;
            free(val);
            return CDC_OK;
        }
        *image = val;
        *image_len = vlen;
        return CDC_OK;
    }
    free(val);
    val = NULL;
    if (rc != CDC_OK && rc != CDC_ERR_NOT_FOUND)
        return rc;

    /*
     * Not live: a deleted entity keeps its last position under 'P' (TTL-bounded).
     * Only deletes write an (entity, lsn, op) key, in the same batch as their 'P'
     * position (so with the same write time: both expire together). Hence:
     *   - a position exists and the change is after it: new (no key lookup);
     *   - the change is before it: a stale replay (no key lookup);
     *   - equal: a replay either way; the key only tells an exact replay of the delete
     *     from a stale change (an insert or update at the delete's position cannot have
     *     been accepted: the delete would not have been after it);
     *   - no position (never seen, or the position expired): new; a replay older than
     *     the TTL is no longer recognized.
     * The decision to drop never depends on the key, only the verdict's kind.
     * A partition that has no position at all (no delete in the store or since it was
     * opened: a snapshot load, an insert-only table) skips the lookup.
     */
    if (d->no_positions)
        return CDC_OK;
    if ((kbuf = key_buf(d, c->entity_len + 10)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    klen = pos_key_into(c, kbuf);
    rc = lookup(d, CDC_DEDUP_FAMILY, kbuf, klen, &val, &vlen, e);
    if (rc == CDC_ERR_NOT_FOUND)
        return CDC_OK;
    if (rc != CDC_OK)
        return rc;
    if (vlen >= 16) {
        uint64_t lc = get_u64(val), ll = get_u64((uint8_t *)val + 8);
        if (vlen >= 24) /* the snapshot that read the row before its delete */
            d->deleted_tag = get_u64((uint8_t *)val + 16);
        if (pos_le(c->commit_lsn, c->lsn, lc, ll))
            *verdict = CDC_DEDUP_STALE;
        if (c->commit_lsn == lc && c->lsn == ll) {
            void *sv = NULL;
            size_t svlen = 0;
            klen = seen_key_into(c, kbuf);
            rc = lookup(d, CDC_DEDUP_FAMILY, kbuf, klen, &sv, &svlen, e);
            free(sv);
            if (rc == CDC_OK)
                *verdict = CDC_DEDUP_REPLAY;
            else if (rc != CDC_ERR_NOT_FOUND) {
                free(val);
                return rc;
            }
        }
    }
    free(val);
    return CDC_OK;
}

/* A replayed dead letter found not after its entity's position (dedup.h, "Replayed dead
 * letters"): a duplicate when a replay took it already (its (entity, lsn, op) key), else
 * a changelog row only. */
static cdc_err_t check_late_replay(cdc_dedup_t *d, const cdc_change_t *c,
                                   cdc_dedup_verdict_t *verdict, cdc_error_t *e)
{
    void *sv = NULL;
    size_t svlen = 0, klen;
    uint8_t *kbuf = key_buf(d, c->entity_len + 10);
    cdc_err_t rc;

    if (kbuf == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    klen = seen_key_into(c, kbuf);
    rc = lookup(d, CDC_DEDUP_FAMILY, kbuf, klen, &sv, &svlen, e);
    free(sv);
    if (rc == CDC_OK)
        *verdict = CDC_DEDUP_REPLAY;
    else if (rc == CDC_ERR_NOT_FOUND)
        *verdict = CDC_DEDUP_LATE_REPLAY;
    else
        return rc;
    return CDC_OK;
}

cdc_err_t cdc_dedup_check(cdc_dedup_t *d, const cdc_change_t *c, cdc_dedup_verdict_t *verdict,
                          uint8_t **image, size_t *image_len, cdc_error_t *e)
{
    cdc_dedup_marker_t *mk = NULL;
    cdc_err_t rc;

    *image = NULL;
    *image_len = 0;
    *verdict = CDC_DEDUP_NEW;
    d->deleted_tag = 0;
    /* Nothing at or before the table's last truncate is applied again; before a floor,
     * the entity's own position decides whether it is new (dedup.h, "Floor"). */
    if ((rc = table_marker(d, c->entity, table_prefix_len(c), &mk, e)) != CDC_OK)
        return rc;
    bool before = mk->set && pos_le(c->commit_lsn, c->lsn, mk->commit_lsn, mk->lsn);
    if (before && (!mk->floor || c->op == CDC_OP_TRUNCATE)) {
        *verdict = c->op == CDC_OP_TRUNCATE && c->commit_lsn == mk->commit_lsn && c->lsn == mk->lsn
                       ? CDC_DEDUP_REPLAY
                       : CDC_DEDUP_STALE;
        return c->replayed && *verdict == CDC_DEDUP_STALE && c->op != CDC_OP_TRUNCATE
                   ? check_late_replay(d, c, verdict, e)
                   : CDC_OK;
    }
    if (c->op == CDC_OP_TRUNCATE)
        return CDC_OK; /* a newer truncate */
    rc = check_entity(d, c, mk, before, verdict, image, image_len, e);
    if (rc == CDC_OK && before && *verdict == CDC_DEDUP_NEW)
        *verdict = CDC_DEDUP_BEFORE_FLOOR; /* (its image still repairs its TOAST columns) */
    if (rc == CDC_OK && c->replayed && *verdict == CDC_DEDUP_STALE)
        rc = check_late_replay(d, c, verdict, e);
    return rc;
}

/* Only the columns that PostgreSQL can TOAST are kept for repair. */
static bool toastable(cdc_ice_type_t t)
{
    return t == CDC_ICE_STRING || t == CDC_ICE_BINARY || t == CDC_ICE_DECIMAL ||
           t == CDC_ICE_LIST || t == CDC_ICE_STRUCT;
}

/*
 * Records a truncate like any change, through the pending batch: after the table's
 * earlier pending writes, one range delete of every "rows" entry of the table, then the
 * truncate's position under the table identity. The batch applies them in that order at
 * the next flush (also when the store is held by a checkpoint cut). Until then, lookups
 * that still find a row from before the truncate (in the overlay or the store) ignore
 * it: its position is not after the marker (cdc_dedup_check).
 */
static cdc_err_t record_truncate(cdc_dedup_t *d, const cdc_change_t *c, cdc_error_t *e)
{
    size_t len = table_prefix_len(c), sklen;
    uint8_t *sk = seen_key(c, &sklen), *lo = malloc(len + 1), *hi = malloc(len), pos[16];
    cdc_dedup_marker_t *mk = NULL;
    cdc_err_t rc;

    if (sk == NULL || lo == NULL || hi == NULL ||
        !pending_reserve(&d->pending, 2, sklen + len + 16 + 32)) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = table_marker(d, c->entity, len, &mk, e)) != CDC_OK)
        goto done;
    /* entities of the table: "<ns>.<table>\0" + key parts, i.e. [prefix "\0", prefix "\1") */
    memcpy(lo, c->entity, len);
    lo[len] = 0;
    memcpy(hi, c->entity, len);
    hi[len - 1] = 1;
    put_u64(pos, c->commit_lsn);
    put_u64(pos + 8, c->lsn);
    cdc_state_batch_delete_range(d->batch, CDC_ROWS_FAMILY, lo, len + 1, hi, len);
    cdc_state_batch_put(d->batch, CDC_ROWS_FAMILY, c->entity, len, pos, 16);
    cdc_state_batch_put(d->batch, CDC_DEDUP_FAMILY, sk, sklen, "", 0);
    pending_set(&d->pending, CDC_ROWS_FAMILY, c->entity, len, pos, 16, false);
    pending_set(&d->pending, CDC_DEDUP_FAMILY, sk, sklen, "", 0, false);
    mk->set = true;
    mk->floor = false;
    mk->commit_lsn = c->commit_lsn;
    mk->lsn = c->lsn;
done:
    free(sk);
    free(lo);
    free(hi);
    return rc;
}

typedef struct floor_scan {
    cdc_dedup_t *d;
    const cdc_dedup_marker_t *mk;
    uint64_t commit_lsn, lsn; /* the floor */
    cdc_dedup_row_fn fn;
    void *arg;
    cdc_error_t *e;
    cdc_err_t rc; /* fn's first error */
} floor_scan_t;

/* A row of the table, live in state (val: its value): passed on when the floor takes it. */
static bool floor_row(floor_scan_t *f, const uint8_t *entity, size_t len, const uint8_t *val,
                      size_t vlen)
{
    uint64_t c, l;
    if (vlen < 16)
        return true;
    c = get_u64(val);
    l = get_u64(val + 8);
    if (!pos_le(c, l, f->commit_lsn, f->lsn) ||
        (f->mk->set && pos_le(c, l, f->mk->commit_lsn, f->mk->lsn)))
        return true; /* after the floor, or gone already */
    f->rc = f->fn(entity, len, val, vlen, f->arg, f->e);
    return f->rc == CDC_OK;
}

/* cdc_state_scan callback: store rows, unless the overlay has a newer word on them. */
static bool floor_store_row(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    floor_scan_t *f = arg;
    cdc_dedup_pending_t *p = &f->d->pending;
    if (p->nentries > 0 &&
        pending_find(p, CDC_ROWS_FAMILY, key, klen, pending_hash(CDC_ROWS_FAMILY, key, klen)))
        return true;
    return floor_row(f, key, klen, val, vlen);
}

cdc_err_t cdc_dedup_floor(cdc_dedup_t *d, const uint8_t *table, size_t len, uint64_t commit_lsn,
                          uint64_t lsn, cdc_dedup_row_fn fn, void *arg, bool *applied,
                          cdc_error_t *e)
{
    floor_scan_t f = {d, NULL, commit_lsn, lsn, fn, arg, e, CDC_OK};
    cdc_dedup_marker_t *mk = NULL;
    uint8_t *lo = malloc(len + 1), *hi = malloc(len), pos[17];
    cdc_err_t rc;

    *applied = false;
    if (lo == NULL || hi == NULL || !pending_reserve(&d->pending, 1, len + 17 + 16)) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = table_marker(d, table, len, &mk, e)) != CDC_OK)
        goto done;
    if (mk->set && pos_le(commit_lsn, lsn, mk->commit_lsn, mk->lsn))
        goto done; /* this truncate, or a later one, is in place */
    f.mk = mk;
    /* the table's rows: [prefix "\0", prefix "\1"), as in record_truncate */
    memcpy(lo, table, len);
    lo[len] = 0;
    memcpy(hi, table, len);
    hi[len - 1] = 1;
    rc = cdc_state_scan(d->st, CDC_ROWS_FAMILY, lo, len + 1, hi, len, floor_store_row, &f, e);
    for (size_t i = 0; rc == CDC_OK && f.rc == CDC_OK && i < d->pending.nentries; i++) {
        const cdc_dedup_entry_t *en = &d->pending.entries[i];
        const uint8_t *k = d->pending.arena + en->koff;
        if (en->family != CDC_ROWS_FAMILY || en->deleted || en->klen <= len ||
            memcmp(k, table, len) != 0)
            continue;
        floor_row(&f, k, en->klen, d->pending.arena + en->voff, en->vlen);
    }
    if (rc == CDC_OK)
        rc = f.rc;
    if (rc != CDC_OK)
        goto done;
    put_u64(pos, commit_lsn);
    put_u64(pos + 8, lsn);
    pos[16] = 1;
    cdc_state_batch_put(d->batch, CDC_ROWS_FAMILY, table, len, pos, sizeof(pos));
    pending_set(&d->pending, CDC_ROWS_FAMILY, table, len, pos, sizeof(pos), false);
    mk->set = mk->floor = true;
    mk->commit_lsn = commit_lsn;
    mk->lsn = lsn;
    *applied = true;
done:
    free(lo);
    free(hi);
    return rc;
}

uint64_t cdc_dedup_image_snapshot(const uint8_t *val, size_t len)
{
    size_t il;
    const uint8_t *img = cdc_dedup_image(val, len, &il);
    cdc_val_t v;
    if (val == NULL || cdc_row_image_lookup(img, il, CDC_DEDUP_SNAP_FIELD, &v) != 1)
        return 0;
    free(v.bytes);
    return v.kind == CDC_VAL_SET ? (uint64_t)v.u.i : 0;
}

void cdc_dedup_carry_snapshot(const cdc_dedup_t *d, cdc_change_t *c, const uint8_t *val, size_t len)
{
    if (c->snapshot_tag == 0)
        c->snapshot_tag = val != NULL ? cdc_dedup_image_snapshot(val, len) : d->deleted_tag;
}

bool cdc_dedup_image_part(const uint8_t *val, size_t len, uint8_t **part, size_t *part_len)
{
    size_t il;
    const uint8_t *img = cdc_dedup_image(val, len, &il);
    cdc_val_t v;
    int r = cdc_row_image_lookup(img, il, CDC_DEDUP_PART_FIELD, &v);
    *part = NULL;
    *part_len = 0;
    if (r < 0)
        return false;
    if (r == 1 && v.kind == CDC_VAL_SET) {
        *part = v.bytes;
        *part_len = v.len;
    } else if (r == 1) {
        free(v.bytes);
    }
    return true;
}

cdc_err_t cdc_dedup_record(cdc_dedup_t *d, const cdc_change_t *c, const uint8_t *part,
                           size_t part_len, const uint8_t *prev, size_t prev_len, cdc_error_t *e)
{
    size_t sklen = 0, pklen = 0, blen = 0, buflen = 0, nkept = 0;
    uint8_t *sk = NULL, *pk = NULL, pos[24];
    uint8_t *full = NULL;
    cdc_row_hole_t holes[c->after.schema != NULL ? c->after.schema->ncols + 2 : 1];
    size_t nholes = 0;
    cdc_val_t *kept = NULL; /* values taken from prev (their bytes freed at the end) */
    cdc_err_t rc = CDC_OK;
    size_t prev_img_len = 0;
    /* a backfill row keeps the stream's values of the columns its row had (dedup.h,
     * "Backfill rows") */
    const uint8_t *prev_img = c->backfill && c->op == CDC_OP_READ && prev != NULL
                                  ? cdc_dedup_image(prev, prev_len, &prev_img_len)
                                  : NULL;

    if (c->op == CDC_OP_TRUNCATE)
        return record_truncate(d, c, e);
    /* Only a delete, a replayed dead letter and a change whose record was dead-lettered
     * with a column made null (so that a replay of that dead letter is a duplicate: the
     * change was applied; docs/worker.md, "Values no Iceberg type holds") write keys
     * besides the row (see cdc_dedup_check). */
    if ((c->op == CDC_OP_DELETE || c->replayed || c->nulled > 0) &&
        (sk = seen_key(c, &sklen)) == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (c->op == CDC_OP_DELETE && (pk = pos_key(c, &pklen)) == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (c->op == CDC_OP_DELETE)
        d->no_positions = false; /* before its position can be looked up */
    put_u64(pos, c->commit_lsn);
    put_u64(pos + 8, c->lsn);
    put_u64(pos + 16, c->snapshot_tag); /* a deleted row's, after its position */
    if (c->op != CDC_OP_DELETE) {
        /* Image of the toastable columns only, tagged by field id. */
        const cdc_source_schema_t *s = c->after.schema;
        cdc_source_schema_t sub = *s;
        cdc_column_t cols[s->ncols + 2];
        cdc_val_t vals[s->ncols + 2];
        cdc_row_t img = {&sub, vals};
        sub.ncols = 0;
        sub.cols = cols;
        if (prev_img != NULL && (kept = calloc(s->ncols ? s->ncols : 1, sizeof(*kept))) == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < s->ncols; i++) {
            if (!toastable(s->cols[i].type))
                continue;
            cols[sub.ncols] = s->cols[i];
            vals[sub.ncols] = c->after.vals[i];
            if (prev_img != NULL) {
                int r =
                    cdc_row_image_lookup(prev_img, prev_img_len, s->cols[i].field_id, &kept[nkept]);
                if (r < 0) {
                    rc = cdc_error_set(e, CDC_ERR_CORRUPT, "corrupt row image in state");
                    goto done;
                }
                if (r == 1)
                    vals[sub.ncols] = kept[nkept++];
            }
            sub.ncols++;
        }
        if (part != NULL) { /* where the row's file is (partition key) */
            memset(&cols[sub.ncols], 0, sizeof(cols[0]));
            memset(&vals[sub.ncols], 0, sizeof(vals[0]));
            cols[sub.ncols].name = "";
            cols[sub.ncols].field_id = CDC_DEDUP_PART_FIELD;
            cols[sub.ncols].type = CDC_ICE_BINARY;
            vals[sub.ncols].kind = CDC_VAL_SET;
            vals[sub.ncols].bytes = (uint8_t *)part;
            vals[sub.ncols++].len = part_len;
        }
        if (c->snapshot_tag != 0) { /* the snapshot that read the row (dedup.h) */
            memset(&cols[sub.ncols], 0, sizeof(cols[0]));
            memset(&vals[sub.ncols], 0, sizeof(vals[0]));
            cols[sub.ncols].name = "";
            cols[sub.ncols].field_id = CDC_DEDUP_SNAP_FIELD;
            cols[sub.ncols].type = CDC_ICE_LONG;
            vals[sub.ncols].kind = CDC_VAL_SET;
            vals[sub.ncols++].u.i = (int64_t)c->snapshot_tag;
        }
        /* A large value is left out of the image buffer (a hole) and goes from the row
         * into the batch; not while a checkpoint holds the store (it stays pending then). */
        size_t big = atomic_load(&d->held) ? SIZE_MAX : CDC_STATE_LARGE_VALUE;
        if (!cdc_row_serialize_split(&img, 16, big, &full, &blen, holes, &nholes)) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        memcpy(full, pos, 16);
        buflen = blen; /* the buffer's part; blen: the image's (holes included) */
        for (size_t i = 0; i < nholes; i++)
            blen += holes[i].len;
        blen -= 16;
    }
    /* Reserve first so that the change goes into the overlay whole or not at all. */
    if (!pending_reserve(&d->pending, 3, sklen + pklen + c->entity_len * 2 + blen + 32)) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (sk != NULL) {
        /* The (entity, lsn, op) key is read only for a change at a deleted row's position
         * (cdc_dedup_check), i.e. a replay of this delete, and for a replayed dead letter
         * not after its entity's position: only those write it. */
        pending_set(&d->pending, CDC_DEDUP_FAMILY, sk, sklen, "", 0, false);
        cdc_state_batch_put(d->batch, CDC_DEDUP_FAMILY, sk, sklen, "", 0);
    }
    if (c->op == CDC_OP_DELETE) {
        /* A live row keeps its position in "rows"; a deleted one keeps it here. */
        size_t plen = c->snapshot_tag != 0 ? 24 : 16;
        pending_set(&d->pending, CDC_DEDUP_FAMILY, pk, pklen, pos, plen, false);
        pending_set(&d->pending, CDC_ROWS_FAMILY, c->entity, c->entity_len, NULL, 0, true);
        cdc_state_batch_put(d->batch, CDC_DEDUP_FAMILY, pk, pklen, pos, plen);
        cdc_state_batch_delete(d->batch, CDC_ROWS_FAMILY, c->entity, c->entity_len);
    } else if (nholes == 0) {
        cdc_state_batch_put(d->batch, CDC_ROWS_FAMILY, c->entity, c->entity_len, full, blen + 16);
        pending_set(&d->pending, CDC_ROWS_FAMILY, c->entity, c->entity_len, full, blen + 16, false);
    } else {
        /* A large row's image: its parts into the batch, and the batch to the store at
         * once, so that the overlay never holds a copy of it (docs/worker.md, "Large
         * rows"). If that write fails, the image is put together for the overlay. */
        const void *parts[2 * nholes + 1];
        size_t lens[2 * nholes + 1], np = 0, at = 0;
        bool put;
        cdc_error_t e2;
        for (size_t i = 0; i < nholes; i++) {
            parts[np] = full + at;
            lens[np++] = holes[i].at - at;
            parts[np] = holes[i].p;
            lens[np++] = holes[i].len;
            at = holes[i].at;
        }
        parts[np] = full + at;
        lens[np++] = buflen - at;
        put = cdc_state_batch_putv(d->batch, CDC_ROWS_FAMILY, c->entity, c->entity_len, np, parts,
                                   lens);
        if (put && !atomic_load(&d->held) && cdc_dedup_flush(d, &e2) == CDC_OK &&
            cdc_state_batch_count(d->batch) == 0) {
            /* and on to a blob file now, not with the barrier's files */
            cdc_state_flush_start(d->st, CDC_ROWS_FAMILY);
        } else {
            uint8_t *joined = malloc(blen + 16);
            if (joined == NULL) {
                rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                goto done;
            }
            for (size_t i = 0, o = 0; i < np; o += lens[i], i++)
                memcpy(joined + o, parts[i], lens[i]);
            if (!put) /* (no memory for the part list: the joined image goes instead) */
                cdc_state_batch_put(d->batch, CDC_ROWS_FAMILY, c->entity, c->entity_len, joined,
                                    blen + 16);
            pending_set(&d->pending, CDC_ROWS_FAMILY, c->entity, c->entity_len, joined, blen + 16,
                        false);
            free(joined);
        }
    }
done:
    for (size_t i = 0; i < nkept; i++)
        free(kept[i].bytes);
    free(kept);
    free(full);
    free(sk);
    free(pk);
    return rc;
}

cdc_err_t cdc_dedup_record_replay(cdc_dedup_t *d, const cdc_change_t *c, cdc_error_t *e)
{
    size_t sklen = 0;
    uint8_t *sk = seen_key(c, &sklen);

    if (sk == NULL || !pending_reserve(&d->pending, 1, sklen + 16)) {
        free(sk);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    pending_set(&d->pending, CDC_DEDUP_FAMILY, sk, sklen, "", 0, false);
    cdc_state_batch_put(d->batch, CDC_DEDUP_FAMILY, sk, sklen, "", 0);
    free(sk);
    return CDC_OK;
}
