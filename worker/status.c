/*
 * The worker's /status document (docs/operations.md): who it is, its link to the
 * coordinator, the partitions and tables it holds, masking, dead letters and nulled
 * values, chunked events and the disk-full state. Rebuilt by the record thread (with the
 * gauges, watchdog.c) and at start (main.c); served by the HTTP threads from w->status.
 * It reads the worker's state and changes none but w->status.
 */
#include <pthread.h>

#include <jansson.h>

#include "worker/mask.h"
#include "worker/worker.h"

void cdc_worker_publish_status(cdc_worker_t *w)
{
    json_t *o = json_object(), *parts = json_array(), *masking = NULL;
    char *m = w->mask != NULL ? cdc_mask_status_json(w->mask) : NULL;

    pthread_mutex_lock(&w->link_lock);
    json_object_set_new(o, "id", json_string(w->cfg.id));
    json_object_set_new(o, "insecure", json_boolean(w->cfg.insecure));
    json_object_set_new(o, "job", json_string(w->cfg.job));
    json_object_set_new(o, "registered", json_boolean(w->registered));
    json_object_set_new(o, "term", json_integer((json_int_t)w->term));
    json_object_set_new(o, "generation", json_integer((json_int_t)w->generation));
    pthread_mutex_unlock(&w->link_lock);
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        if (w->slots[p].owned)
            json_array_append_new(parts, json_integer(p));
    json_object_set_new(o, "partitions", parts);
    json_object_set_new(o, "refused", w->refused[0] ? json_string(w->refused) : json_null());
    {
        json_t *tables = json_array(), *offer = json_array();
        size_t noffer;
        char **offered = cdc_topic_list_names(&w->offer, &noffer);
        for (size_t t = 0; t < w->topics.n; t++)
            if (cdc_worker_consumes(w, t))
                json_array_append_new(tables, json_string(cdc_worker_topic(w, t)));
        for (size_t t = 0; t < noffer; t++)
            json_array_append_new(offer, json_string(offered[t]));
        json_object_set_new(o, "tables", tables); /* the job's, as its last Assign said */
        json_object_set_new(o, "follows_tables", json_boolean(w->follows_tables));
        json_object_set_new(o, "offer", offer);
    }
    if (m != NULL)
        masking = json_loads(m, 0, NULL);
    free(m);
    json_object_set_new(o, "masking", masking != NULL ? masking : json_null());
    json_object_set_new(o, "chunked_events", cdc_worker_chunk_status(w));
    {
        /* dead letters and the values no Iceberg type holds (docs/worker.md) */
        json_t *v = json_object(), *dl = json_object();
        for (int cls = 0; cls < CDC_DLQ__COUNT; cls++)
            json_object_set_new(dl, cdc_dlq_class_name((cdc_dlq_class_t)cls),
                                json_integer((json_int_t)cdc_metrics_value(w->m_dlq[cls])));
        json_object_set_new(o, "dead_letters", dl);
        cdc_worker_values_copy_t vals;
        cdc_worker_values_read(w, &vals);
        json_object_set_new(v, "nulled_records", json_integer((json_int_t)vals.nulled));
        json_object_set_new(v, "special_values", json_integer((json_int_t)vals.special_values));
        json_object_set_new(v, "unknown_toast", json_integer((json_int_t)vals.unknown_toast));
        json_object_set_new(v, "last_nulled",
                            vals.last_nulled[0] ? json_string(vals.last_nulled) : json_null());
        json_object_set_new(o, "values", v);
    }
    {
        cdc_diskfull_t *disks[] = {&w->disk_warehouse, &w->disk_state};
        char *d = cdc_diskfull_status_json(disks, 2);
        json_t *dj = d != NULL ? json_loads(d, 0, NULL) : NULL;
        free(d);
        json_object_set_new(o, "disk", dj != NULL ? dj : json_null());
    }
    cdc_http_doc_set(&w->status, json_dumps(o, JSON_COMPACT));
    json_decref(o);
}
