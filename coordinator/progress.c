/* The coordinator's progress check: see progress.h. */
#include "coordinator/progress.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/sorted.h"

void cdc_progress_init(cdc_progress_t *p, int64_t timeout_ms, int min_epochs)
{
    memset(p, 0, sizeof(*p));
    p->timeout_ms = timeout_ms;
    p->min_epochs = min_epochs > 0 ? min_epochs : 1;
}

void cdc_progress_free(cdc_progress_t *p)
{
    for (int part = 0; part < CDC_PARTITIONS; part++) {
        cdc_progress_slot_t *s = &p->slot[part];
        for (int j = 0; j < s->n; j++)
            free(s->t[j].topic);
        free(s->t);
    }
    free(p->found);
    memset(p, 0, sizeof(*p));
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

/* The index of topic in the slot, or -(insertion point) - 1 when absent. */
static int find(const cdc_progress_slot_t *s, const char *topic)
{
    return cdc_sorted_find(s->t, s->n, sizeof(s->t[0]), offsetof(cdc_progress_topic_t, topic),
                           topic);
}

const cdc_progress_topic_t *cdc_progress_find(const cdc_progress_slot_t *s, const char *topic)
{
    int j = topic != NULL ? find(s, topic) : -1;
    return j >= 0 ? &s->t[j] : NULL;
}

void cdc_progress_recovering(cdc_progress_t *p, const cdc_progress_finding_t *f)
{
    int j;

    if (f->partition >= CDC_PARTITIONS || f->kind != CDC_PROGRESS_NO_PROGRESS)
        return;
    if ((j = find(&p->slot[f->partition], f->topic)) >= 0)
        p->slot[f->partition].t[j].recovered_at = f->offset;
}

/* The slot's entry for topic, added when absent (NULL only when memory runs out). */
static cdc_progress_topic_t *entry(cdc_progress_slot_t *s, const char *topic)
{
    cdc_progress_topic_t *t;
    char *copy;
    int j = find(s, topic);

    if (j >= 0)
        return &s->t[j];
    j = -j - 1;
    if (cdc_array_reserve(s->t, s->cap, (size_t)s->n + 1, 16) != CDC_OK ||
        (copy = strdup(topic)) == NULL)
        return NULL;
    memmove(&s->t[j + 1], &s->t[j], (size_t)(s->n - j) * sizeof(s->t[0]));
    s->n++;
    t = &s->t[j];
    memset(t, 0, sizeof(*t));
    t->topic = copy;
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

/* Room for one more finding in p->found (n held now). */
static bool room(cdc_progress_t *p, int n)
{
    return cdc_array_reserve(p->found, p->found_cap, (size_t)n + 1, 16) == CDC_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The topics of every slot of ck, each slot's sorted, one after the other: slot part's are
 * sorted[at[part]] .. sorted[at[part + 1] - 1]. The caller frees the array; NULL when memory
 * runs out (the check then searches the checkpoint itself).
 */
static const char **sorted_topics(const cdc_checkpoint_t *ck, size_t at[CDC_PARTITIONS + 1])
{
    const char **sorted;
    size_t total = 0;

    for (int part = 0; part < CDC_PARTITIONS; part++) {
        at[part] = total;
        total += ck->partitions[part].noffsets;
    }
    at[CDC_PARTITIONS] = total;
    if ((sorted = calloc(total > 0 ? total : 1, sizeof(*sorted))) == NULL)
        return NULL;
    for (int part = 0; part < CDC_PARTITIONS; part++) {
        const cdc_ckpt_partition_t *cp = &ck->partitions[part];
        for (size_t k = 0; k < cp->noffsets; k++)
            sorted[at[part] + k] = cp->offsets[k].topic;
        qsort(&sorted[at[part]], cp->noffsets, sizeof(*sorted), by_name);
    }
    return sorted;
}

/* Whether slot part of ck carries topic: a binary search of sorted (sorted_topics), or a
 * scan of the checkpoint when there is none. */
static bool in_checkpoint(const cdc_checkpoint_t *ck, uint32_t part, const char **sorted,
                          const size_t *at, const char *topic)
{
    const cdc_ckpt_partition_t *cp = &ck->partitions[part];

    if (sorted != NULL)
        return bsearch(&topic, &sorted[at[part]], cp->noffsets, sizeof(*sorted), by_name) != NULL;
    for (size_t k = 0; k < cp->noffsets; k++)
        if (strcmp(cp->offsets[k].topic, topic) == 0)
            return true;
    return false;
}

int cdc_progress_checkpoint(cdc_progress_t *p, const cdc_checkpoint_t *ck, int64_t now_ms,
                            const cdc_progress_finding_t **out)
{
    size_t at[CDC_PARTITIONS + 1];
    const char **sorted;
    int n = 0;

    for (uint32_t part = 0; part < CDC_PARTITIONS; part++) {
        const cdc_ckpt_partition_t *cp = &ck->partitions[part];
        cdc_progress_slot_t *s = &p->slot[part];
        for (size_t k = 0; k < cp->noffsets; k++) {
            cdc_progress_topic_t *t = entry(s, cp->offsets[k].topic);
            /* (a negative offset is a logical one: nothing consumed yet) */
            int64_t offset = cp->offsets[k].next_offset > 0 ? cp->offsets[k].next_offset : 0;
            if (t == NULL)
                continue;
            if (offset != t->offset || t->high <= offset) {
                /* moved, or nothing behind it: the clock starts again */
                t->offset = offset;
                t->since_ms = now_ms;
                t->epochs = 0;
                t->no_progress = false;
                continue;
            }
            t->epochs++;
            if (p->timeout_ms <= 0 || t->no_progress || t->epochs < (uint64_t)p->min_epochs ||
                now_ms - t->since_ms < p->timeout_ms || !room(p, n))
                continue;
            t->no_progress = true;
            p->found[n++] = (cdc_progress_finding_t){CDC_PROGRESS_NO_PROGRESS,
                                                     part,
                                                     t->topic,
                                                     offset,
                                                     t->high - offset,
                                                     now_ms - t->since_ms,
                                                     t->recovered_at == offset};
        }
    }

    /* Missing topics: carried by some slot, absent from this slot's checkpoint. With
     * thousands of topics each slot's are sorted once and searched. */
    sorted = sorted_topics(ck, at);
    for (uint32_t part = 0; part < CDC_PARTITIONS; part++) {
        cdc_progress_slot_t *s = &p->slot[part];
        const char *missing = NULL;
        for (uint32_t q = 0; q < CDC_PARTITIONS && missing == NULL; q++)
            for (size_t k = 0; q != part && k < ck->partitions[q].noffsets && missing == NULL; k++)
                if (!in_checkpoint(ck, part, sorted, at, ck->partitions[q].offsets[k].topic))
                    missing = ck->partitions[q].offsets[k].topic;
        if (missing == NULL) {
            s->missing[0] = '\0';
            continue;
        }
        if (strcmp(s->missing, missing) == 0 || !room(p, n))
            continue; /* reported already (or memory ran out: found again next time) */
        snprintf(s->missing, sizeof(s->missing), "%s", missing);
        p->found[n++] =
            (cdc_progress_finding_t){CDC_PROGRESS_MISSING_TOPIC, part, s->missing, 0, 0, 0, false};
    }
    free(sorted);
    *out = p->found;
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
