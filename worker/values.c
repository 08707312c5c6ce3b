/*
 * The values no Iceberg type holds, counted for /status (docs/worker.md, "Values no
 * Iceberg type holds", "Unchanged TOAST values"): this file owns w->values. The record
 * thread (consume.c) counts; the thread that renders /status (status.c) reads a copy.
 * The counts are atomic, the last nulled column's text is under the part's lock. Calls
 * nothing of the worker.
 */
#include <stdio.h>
#include <string.h>

#include "worker/worker.h"

void cdc_worker_values_init(cdc_worker_t *w)
{
    pthread_mutex_init(&w->values.lock, NULL);
}

void cdc_worker_values_special(cdc_worker_t *w, uint64_t n)
{
    w->values.special_values += n;
}

uint64_t cdc_worker_values_unknown_toast(cdc_worker_t *w)
{
    return ++w->values.unknown_toast;
}

void cdc_worker_values_nulled(cdc_worker_t *w, const char *ns, const char *table, const char *why)
{
    w->values.nulled++;
    pthread_mutex_lock(&w->values.lock);
    snprintf(w->values.last_nulled, sizeof(w->values.last_nulled), "%s.%s: %s", ns, table, why);
    pthread_mutex_unlock(&w->values.lock);
}

void cdc_worker_values_read(cdc_worker_t *w, cdc_worker_values_copy_t *out)
{
    out->nulled = w->values.nulled;
    out->special_values = w->values.special_values;
    out->unknown_toast = w->values.unknown_toast;
    pthread_mutex_lock(&w->values.lock);
    memcpy(out->last_nulled, w->values.last_nulled, sizeof(out->last_nulled));
    pthread_mutex_unlock(&w->values.lock);
}
