/*
 * A disk that filled up (see diskfull.h; docs/operations.md, "Disk faults").
 */
#include "common/diskfull.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/log.h"

void cdc_diskfull_init(cdc_diskfull_t *d, cdc_metrics_t *reg, const char *prefix, const char *disk,
                       const char *effect)
{
    char name[96];
    const char *labels[] = {"disk", disk, NULL};

    memset(d, 0, sizeof(*d));
    pthread_mutex_init(&d->mu, NULL);
    d->disk = disk;
    d->effect = effect;
    if (reg == NULL)
        return;
    snprintf(name, sizeof(name), "%s_disk_full", prefix);
    d->g_full = cdc_metrics_gauge(reg, name,
                                  "1 while a disk the process writes is full (its writes fail "
                                  "with ENOSPC or EDQUOT).",
                                  labels);
    snprintf(name, sizeof(name), "%s_disk_full_errors_total", prefix);
    d->c_errors =
        cdc_metrics_counter(reg, name, "Writes that failed because their disk was full.", labels);
    cdc_metrics_gauge_set(d->g_full, 0);
}

void cdc_diskfull_destroy(cdc_diskfull_t *d)
{
    pthread_mutex_destroy(&d->mu);
}

bool cdc_diskfull_failed(cdc_diskfull_t *d, const cdc_error_t *e)
{
    if (e == NULL || !e->disk_full)
        return false;
    pthread_mutex_lock(&d->mu);
    bool first = !d->full;
    d->full = true;
    if (first)
        d->since_wall_ms = cdc_clock_wall_ms();
    d->errors++;
    snprintf(d->last_error, sizeof(d->last_error), "%s", e->msg);
    pthread_mutex_unlock(&d->mu);
    cdc_metrics_gauge_set(d->g_full, 1);
    cdc_metrics_counter_inc(d->c_errors);
    if (first)
        cdc_log_error("the %s disk is full: %s until space returns (retried on its own; "
                      "nothing is lost): %s",
                      d->disk, d->effect, e->msg);
    return true;
}

void cdc_diskfull_ok(cdc_diskfull_t *d)
{
    pthread_mutex_lock(&d->mu);
    bool was = d->full;
    int64_t since = d->since_wall_ms;
    d->full = false;
    d->since_wall_ms = 0;
    pthread_mutex_unlock(&d->mu);
    if (!was)
        return;
    cdc_metrics_gauge_set(d->g_full, 0);
    cdc_log_info("the %s disk has space again after %.1f s: resumed", d->disk,
                 (double)(cdc_clock_wall_ms() - since) / 1000.0);
}

char *cdc_diskfull_status_json(cdc_diskfull_t *const *ds, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; o != NULL && i < n; i++) {
        cdc_diskfull_t *d = ds[i];
        json_t *w = json_object();
        pthread_mutex_lock(&d->mu);
        json_object_set_new(w, "full", json_boolean(d->full));
        json_object_set_new(w, "full_since_ms", json_integer(d->since_wall_ms));
        json_object_set_new(w, "full_errors", json_integer((json_int_t)d->errors));
        json_object_set_new(w, "last_full_error",
                            d->last_error[0] ? json_string(d->last_error) : json_null());
        pthread_mutex_unlock(&d->mu);
        json_object_set_new(o, d->disk, w);
    }
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}
