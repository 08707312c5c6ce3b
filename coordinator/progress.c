/* The coordinator's progress check: see progress.h. */
#include "coordinator/progress.h"

#include <stdio.h>
#include <string.h>

void cdc_progress_init(cdc_progress_t *p, int64_t timeout_ms, int min_epochs)
{
    memset(p, 0, sizeof(*p));
    p->timeout_ms = timeout_ms;
    p->min_epochs = min_epochs > 0 ? min_epochs : 1;
}

void cdc_progress_reset(cdc_progress_t *p)
{
    for (int part = 0; part < CDC_PARTITIONS; part++) {
        cdc_progress_slot_t *s = &p->slot[part];
        s->missing[0] = '\0';
        for (int j = 0; j < s->n; j++) {
            cdc_progress_topic_t *t = &s->t[j];
            t->high = 0;
            t->stalled_ms = 0;
            t->offset = -1;
            t->since_ms = 0;
            t->epochs = 0;
            t->no_progress = false;
        }
    }
}

void cdc_progress_recovering(cdc_progress_t *p, const cdc_progress_finding_t *f)
{
    cdc_progress_slot_t *s;
    if (f->partition >= CDC_PARTITIONS || f->kind != CDC_PROGRESS_NO_PROGRESS)
        return;
    s = &p->slot[f->partition];
    for (int j = 0; j < s->n; j++)
        if (strcmp(s->t[j].topic, f->topic) == 0)
            s->t[j].recovered_at = f->offset;
}

/* The slot's entry for topic, added when absent (NULL when the slot is full). */
static cdc_progress_topic_t *entry(cdc_progress_slot_t *s, const char *topic)
{
    for (int j = 0; j < s->n; j++)
        if (strcmp(s->t[j].topic, topic) == 0)
            return &s->t[j];
    if (s->n == CDC_PROGRESS_TOPICS_MAX || strlen(topic) >= sizeof(s->t[0].topic))
        return NULL;
    cdc_progress_topic_t *t = &s->t[s->n++];
    memset(t, 0, sizeof(*t));
    snprintf(t->topic, sizeof(t->topic), "%s", topic);
    t->offset = -1;
    t->recovered_at = -1;
    return t;
}

bool cdc_progress_note_high(cdc_progress_t *p, uint32_t partition, const char *topic, int64_t high,
                            int64_t stalled_ms)
{
    cdc_progress_topic_t *t;
    bool newly;
    if (partition >= CDC_PARTITIONS || topic == NULL ||
        (t = entry(&p->slot[partition], topic)) == NULL)
        return false;
    if (high > 0)
        t->high = high;
    newly = stalled_ms > 0 && t->stalled_ms == 0;
    t->stalled_ms = stalled_ms;
    return newly;
}

static bool in_checkpoint(const cdc_ckpt_partition_t *cp, const char *topic)
{
    for (size_t k = 0; k < cp->noffsets; k++)
        if (strcmp(cp->offsets[k].topic, topic) == 0)
            return true;
    return false;
}

int cdc_progress_checkpoint(cdc_progress_t *p, const cdc_checkpoint_t *ck, int64_t now_ms,
                            cdc_progress_finding_t *out, int max)
{
    int n = 0;

    for (uint32_t part = 0; part < CDC_PARTITIONS; part++) {
        const cdc_ckpt_partition_t *cp = &ck->partitions[part];
        cdc_progress_slot_t *s = &p->slot[part];
        for (size_t k = 0; k < cp->noffsets; k++) {
            cdc_progress_topic_t *t = entry(s, cp->offsets[k].topic);
            /* (a negative offset is a logical one: nothing consumed yet) */
            int64_t at = cp->offsets[k].next_offset > 0 ? cp->offsets[k].next_offset : 0;
            if (t == NULL)
                continue;
            if (at != t->offset || t->high <= at) {
                /* moved, or nothing behind it: the clock starts again */
                t->offset = at;
                t->since_ms = now_ms;
                t->epochs = 0;
                t->no_progress = false;
                continue;
            }
            t->epochs++;
            if (p->timeout_ms <= 0 || t->no_progress || t->epochs < (uint64_t)p->min_epochs ||
                now_ms - t->since_ms < p->timeout_ms)
                continue;
            t->no_progress = true;
            if (n < max)
                out[n++] = (cdc_progress_finding_t){CDC_PROGRESS_NO_PROGRESS,
                                                    part,
                                                    t->topic,
                                                    at,
                                                    t->high - at,
                                                    now_ms - t->since_ms,
                                                    t->recovered_at == at};
        }
    }

    /* Missing topics: carried by some slot, absent from this slot's checkpoint. */
    for (uint32_t part = 0; part < CDC_PARTITIONS; part++) {
        cdc_progress_slot_t *s = &p->slot[part];
        const char *missing = NULL;
        for (uint32_t q = 0; q < CDC_PARTITIONS && missing == NULL; q++)
            for (size_t k = 0; k < ck->partitions[q].noffsets && missing == NULL; k++)
                if (!in_checkpoint(&ck->partitions[part], ck->partitions[q].offsets[k].topic))
                    missing = ck->partitions[q].offsets[k].topic;
        if (missing == NULL) {
            s->missing[0] = '\0';
            continue;
        }
        if (strcmp(s->missing, missing) == 0)
            continue; /* reported already */
        snprintf(s->missing, sizeof(s->missing), "%s", missing);
        if (n < max)
            out[n++] = (cdc_progress_finding_t){
                CDC_PROGRESS_MISSING_TOPIC, part, s->missing, 0, 0, 0, false};
    }
    return n;
}

int cdc_progress_flagged(const cdc_progress_t *p)
{
    int n = 0;
    for (int part = 0; part < CDC_PARTITIONS; part++) {
        bool f = p->slot[part].missing[0] != '\0';
        for (int j = 0; j < p->slot[part].n && !f; j++)
            f = p->slot[part].t[j].no_progress;
        n += f;
    }
    return n;
}
