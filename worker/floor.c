/*
 * Floors (docs/worker.md, "Debezium's truncate"): a truncate that reached one partition
 * of its table's topic only. The slot that met it applied it in its stream like any
 * truncate and reported it (TableFloor in its Ack); the coordinator sends it with every
 * barrier after that checkpoint. Here every other slot applies it by position, at the
 * barrier's record boundary: its rows of the table whose last change is not after the
 * truncate get a mirror-only delete in the new epoch's stage (an equality delete in the
 * mirror, no changelog row), and its dedup marker becomes the floor (worker/dedup.h,
 * "Floor"), so the changes from before it that reach the slot later go to the changelog
 * only. Idempotent: a slot whose marker is at or after the floor does nothing.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "worker/worker.h"

/* One slot's sweep of one table. */
typedef struct sweep {
    cdc_worker_t *w;
    cdc_slot_t *s;
    const cdc_source_schema_t *schema; /* with the table's key, or NULL (none seen yet) */
    const char *table;
    size_t rows; /* rows removed */
    size_t bad;  /* rows whose key does not decode with the schema */
} sweep_t;

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* cdc_dedup_floor callback: a row the floor takes, staged as a mirror-only delete. */
static cdc_err_t sweep_row(const uint8_t *entity, size_t len, const uint8_t *val, size_t vlen,
                           void *arg, cdc_error_t *e)
{
    sweep_t *sw = arg;
    const cdc_source_schema_t *sc = sw->schema;
    cdc_change_t c;
    uint8_t *old = NULL;
    size_t old_len = 0;
    cdc_err_t rc;

    if (sc == NULL)
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE,
                             "this worker has seen no event of \"%s\" yet, so it does not know "
                             "the table's key columns",
                             sw->table);
    memset(&c, 0, sizeof(c));
    if (!cdc_decode_entity_row(sc, entity, len, &c.before)) {
        sw->bad++; /* another key than the table's latest: left, and said below */
        return CDC_OK;
    }
    if (!cdc_dedup_image_part(val, vlen, &old, &old_len)) {
        cdc_row_clear(&c.before);
        return cdc_error_set(e, CDC_ERR_CORRUPT, "corrupt row image in state of \"%s\"", sw->table);
    }
    c.op = CDC_OP_DELETE;
    c.commit_lsn = be64(val);
    c.lsn = be64(val + 8);
    c.tx_id = -1;
    c.schema = sc;
    c.entity = (uint8_t *)entity; /* (copied by the stage; not freed here) */
    c.entity_len = len;
    c.partition = (int32_t)sw->s->partition;
    c.offset = -1;
    c.backfill = true; /* the mirror's alone: the changelog has the truncate */
    cdc_stage_parts_t parts = {
        NULL,
        0,
        old,
        old_len,
        cdc_layouts_spec(&sw->w->layouts, sc->ns, sc->table, true),
        cdc_layouts_order(&sw->w->layouts, sc->ns, sc->table, false),
        cdc_layouts_order(&sw->w->layouts, sc->ns, sc->table, true),
    };
    rc = cdc_stage_add(&sw->s->stage, &c, true, &parts, e);
    cdc_row_clear(&c.before);
    free(old);
    if (rc == CDC_OK)
        sw->rows++;
    return rc;
}

/* Applies floor f in slot s; the error, if any, is logged by the caller. */
static cdc_err_t apply(cdc_worker_t *w, cdc_slot_t *s, const Cdc__TableFloor *f, cdc_error_t *e)
{
    sweep_t sw = {w, s, cdc_catalog_keyed(w->catalog, f->table), f->table, 0, 0};
    size_t len = strlen(f->table) + 1; /* the entity prefix "<ns>.<table>\0" */
    bool applied = false;
    cdc_err_t rc;
    /* entities in state hold the masked key (a hashed key column): read them so */
    if (sw.schema != NULL && w->mask != NULL &&
        (sw.schema = cdc_mask_schema(w->mask, sw.schema, e)) == NULL)
        return e->code;
    rc = cdc_dedup_floor(s->dedup, (const uint8_t *)f->table, len, f->commit_lsn, f->lsn, sweep_row,
                         &sw, &applied, e);
    if (rc != CDC_OK || !applied)
        return rc;
    s->dirty = true;
    cdc_metrics_counter_add(w->m_floor_rows, (double)sw.rows);
    cdc_log_info("partition %u: truncate of \"%s\" at %" PRIu64 "/%" PRIu64
                 " (met in partition %u) applied by position: %zu rows removed",
                 s->partition, f->table, f->commit_lsn, f->lsn, f->partition, sw.rows);
    if (sw.bad > 0)
        cdc_log_error("partition %u: truncate of \"%s\": %zu rows have another key than the "
                      "table's latest schema and stay in the mirror; resnapshot the table",
                      s->partition, f->table, sw.bad);
    return CDC_OK;
}

void cdc_worker_apply_floors(cdc_worker_t *w, Cdc__TableFloor *const *floors, size_t n)
{
    int64_t now = cdc_clock_mono_ms();
    size_t waiting = 0;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        for (size_t i = 0; s->owned && i < n; i++) {
            cdc_error_t e;
            if (floors[i]->table == NULL || floors[i]->table[0] == '\0')
                continue;
            cdc_error_clear(&e);
            if (apply(w, s, floors[i], &e) == CDC_OK)
                continue;
            /* not applied: tried again at the next barrier */
            waiting++;
            if (now - w->floor_warned_ms >= 60000) {
                w->floor_warned_ms = now;
                cdc_log_warn("partition %u: truncate of \"%s\" (met in partition %u) not "
                             "applied yet, tried again at each barrier: %s",
                             s->partition, floors[i]->table, floors[i]->partition, e.msg);
            }
        }
    }
    cdc_metrics_gauge_set(w->m_floors_waiting, (double)waiting);
}
