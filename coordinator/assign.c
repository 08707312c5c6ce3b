/*
 * Balanced, sticky placement of the 12 partition slots (see assign.h). Two passes:
 * first every slot stays with its previous owner while that owner is under its quota,
 * then the remaining slots go to the least loaded workers. Quotas: floor(12/n) each,
 * and the 12 % n extra slots go to the workers that already hold the most slots, so
 * that stickiness wins over arbitrary order.
 */
#include "coordinator/assign.h"

#include <stdlib.h>
#include <string.h>

int cdc_pset_count(cdc_pset_t s)
{
    return __builtin_popcount((unsigned)s);
}

struct sort_ctx {
    const char *const *ids;
    const int *keep;
};

static int by_id(const void *a, const void *b, void *arg)
{
    const struct sort_ctx *c = arg;
    return strcmp(c->ids[*(const int *)a], c->ids[*(const int *)b]);
}

static int by_keep_then_id(const void *a, const void *b, void *arg)
{
    const struct sort_ctx *c = arg;
    int ka = c->keep[*(const int *)a], kb = c->keep[*(const int *)b];

    if (ka != kb)
        return kb - ka;
    return by_id(a, b, arg);
}

cdc_err_t cdc_assign_compute(const char *const *workers, size_t n, const char *const *previous,
                             int owner[CDC_PARTITIONS])
{
    int order[CDC_PARTITIONS], keep[CDC_PARTITIONS] = {0}, cap[CDC_PARTITIONS],
                               load[CDC_PARTITIONS] = {0};
    int base, extra;

    if (workers == NULL || n < 1 || n > CDC_PARTITIONS)
        return CDC_ERR_INVALID;
    for (size_t i = 0; i < n; i++) {
        if (workers[i] == NULL)
            return CDC_ERR_INVALID;
        for (size_t j = 0; j < i; j++)
            if (strcmp(workers[i], workers[j]) == 0)
                return CDC_ERR_INVALID;
    }

    /* who previously held each slot, as an index into workers (-1 = nobody alive) */
    int prev_idx[CDC_PARTITIONS];
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        prev_idx[p] = -1;
        owner[p] = -1;
        if (previous == NULL || previous[p] == NULL || previous[p][0] == '\0')
            continue;
        for (size_t i = 0; i < n; i++)
            if (strcmp(previous[p], workers[i]) == 0) {
                prev_idx[p] = (int)i;
                keep[i]++;
                break;
            }
    }

    base = CDC_PARTITIONS / (int)n;
    extra = CDC_PARTITIONS % (int)n;
    for (size_t i = 0; i < n; i++)
        order[i] = (int)i;
    struct sort_ctx ctx = {workers, keep};
    qsort_r(order, n, sizeof(int), by_keep_then_id, &ctx);
    for (size_t r = 0; r < n; r++)
        cap[order[r]] = base + ((int)r < extra ? 1 : 0);

    /* pass 1: stickiness within quota, lowest slot ids first */
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        int k = prev_idx[p];
        if (k >= 0 && load[k] < cap[k]) {
            owner[p] = k;
            load[k]++;
        }
    }

    /* pass 2: the rest to the least loaded worker with room, ties by id */
    qsort_r(order, n, sizeof(int), by_id, &ctx);
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        int best = -1;
        if (owner[p] >= 0)
            continue;
        for (size_t r = 0; r < n; r++) {
            int k = order[r];
            if (load[k] >= cap[k])
                continue;
            if (best < 0 || load[k] < load[best])
                best = k;
        }
        if (best < 0)
            return CDC_ERR_INTERNAL; /* quotas sum to 12, cannot happen */
        owner[p] = best;
        load[best]++;
    }
    return CDC_OK;
}

int cdc_assign_moves(const char *const *before, const char *const *after)
{
    int moves = 0;

    for (int p = 0; p < CDC_PARTITIONS; p++) {
        const char *a = before[p] ? before[p] : "";
        const char *b = after[p] ? after[p] : "";
        if (strcmp(a, b) != 0)
            moves++;
    }
    return moves;
}
