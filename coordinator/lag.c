/*
 * Records behind in each partition slot (docs/operations.md): the newest end known for
 * each of the slot's topics (from Kafka with --kafka, watermarks.c, else from the owner's
 * acks) less the newest checkpoint's offset. Reads the leader's progress, base checkpoint
 * and watermarks and changes nothing; the main thread calls it for /status (admin.c) and
 * the dashboard's samples (dashboard.c).
 */
#include <stdbool.h>
#include <stdlib.h>

#include <jansson.h>

#include "coordinator/coordinator.h"

/* One topic's part of slot p's lag: the newest end known less the checkpointed offset. */
static void topic_lag(cdc_coord_t *c, int p, const char *topic, int64_t reported, int64_t offset,
                      json_t *highs, int64_t *lag, bool *known)
{
    int64_t high = reported > 0 ? reported : -1;
    if (c->watermarks != NULL) {
        int64_t end = cdc_watermarks_end(c->watermarks, topic, p);
        if (end > high)
            high = end;
    }
    if (high < 0)
        return;
    *known = true;
    if (highs != NULL)
        json_object_set_new(highs, topic, json_integer(high));
    if (high > offset)
        *lag += high - offset;
}

int64_t cdc_coord_lag(cdc_coord_t *c, int p, json_t *highs)
{
    const cdc_progress_slot_t *ps = &c->progress.slot[p];
    const cdc_ckpt_partition_t *bp = c->base != NULL ? &c->base->partitions[p] : NULL;
    bool *checkpointed = calloc(ps->n > 0 ? (size_t)ps->n : 1, sizeof(*checkpointed));
    int64_t lag = 0;
    bool known = false;

    if (checkpointed == NULL)
        return -1;
    /* a binary search of the slot's sorted topics for each checkpointed one: thousands of
     * topics cost k log k, not k * k */
    for (size_t k = 0; bp != NULL && k < bp->noffsets; k++) {
        const cdc_progress_topic_t *t = cdc_progress_find(ps, bp->offsets[k].topic);
        int64_t at = bp->offsets[k].next_offset;
        if (t == NULL) {
            topic_lag(c, p, bp->offsets[k].topic, 0, at, highs, &lag, &known);
            continue;
        }
        checkpointed[t - ps->t] = true;
        topic_lag(c, p, t->topic, t->high, at > 0 ? at : 0, highs, &lag, &known);
    }
    for (int j = 0; j < ps->n; j++)
        if (!checkpointed[j])
            topic_lag(c, p, ps->t[j].topic, ps->t[j].high, 0, highs, &lag, &known);
    free(checkpointed);
    return known ? lag : -1;
}
