/*
 * Unchanged-TOAST repair from the row image in state (see toast.h). The before image
 * is tried first when it carries the value (REPLICA IDENTITY FULL), then the state.
 */
#include "worker/toast.h"

#include <stdlib.h>
#include <string.h>

#include "worker/dedup.h"

bool cdc_toast_needed(const cdc_change_t *c)
{
    if (c->after.vals == NULL)
        return false;
    for (size_t i = 0; i < c->after.schema->ncols; i++)
        if (c->after.vals[i].kind == CDC_VAL_TOAST)
            return true;
    return false;
}

cdc_err_t cdc_toast_repair(cdc_change_t *c, const uint8_t *stored, size_t stored_len,
                           const char **column, unsigned *unknown)
{
    size_t img_len = 0;
    const uint8_t *img = stored ? cdc_dedup_image(stored, stored_len, &img_len) : NULL;

    if (c->after.vals == NULL)
        return CDC_OK;
    for (size_t i = 0; i < c->after.schema->ncols; i++) {
        cdc_val_t *v = &c->after.vals[i];
        const cdc_column_t *col = &c->after.schema->cols[i];
        if (v->kind != CDC_VAL_TOAST)
            continue;
        if (c->before.vals != NULL && c->before.vals[i].kind == CDC_VAL_SET) {
            cdc_val_t *b = &c->before.vals[i];
            cdc_val_t nv = *b;
            nv.bytes = NULL;
            if (b->bytes != NULL) {
                nv.bytes = malloc(b->len ? b->len : 1);
                if (nv.bytes == NULL)
                    return CDC_ERR_NOMEM;
                memcpy(nv.bytes, b->bytes, b->len);
            }
            *v = nv;
            continue;
        }
        if (stored == NULL && c->snapshot_pending && col->optional && !col->key) {
            v->kind = CDC_VAL_TOAST_UNKNOWN; /* older than the capture: the snapshot brings it */
            (*unknown)++;
            continue;
        }
        if (img == NULL || cdc_row_image_lookup(img, img_len, col->field_id, v) != 1) {
            *column = col->name;
            return CDC_ERR_NOT_FOUND;
        }
    }
    return CDC_OK;
}
