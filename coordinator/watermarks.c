/*
 * Topic ends from the brokers (see watermarks.h): one unassigned consumer, one
 * ListOffsets per topic and round on a thread that sleeps on a condition variable, so
 * that closing it does not wait out the interval.
 */
#include "coordinator/watermarks.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/kafka.h"
#include "common/log.h"
#include "coordinator/assign.h"

#define REQUEST_TIMEOUT_MS 2000

typedef struct topic_ends {
    int64_t end[CDC_PARTITIONS]; /* -1 = not answered yet */
    char name[];
} topic_ends_t;

struct cdc_watermarks {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool stop;
    int64_t interval_ms;
    cdc_kafka_consumer_t *consumer;
    /* Every topic watched, each allocated once (its name is the key of byname), in the
     * order they were first watched; no cap: a job of thousands of tables watches them all. */
    topic_ends_t **topics;
    size_t ntopics, cap;
    cdc_strmap_t byname; /* name -> its entry */
};

/* Waits up to ms or until closed; returns false when closed. Lock held. */
static bool nap(cdc_watermarks_t *w, int64_t ms)
{
    struct timespec ts = cdc_clock_deadline(ms);
    while (!w->stop && pthread_cond_timedwait(&w->wake, &w->lock, &ts) == 0)
        ;
    return !w->stop;
}

static void *run(void *arg)
{
    cdc_watermarks_t *w = arg;
    int64_t warned_ms = 0;

    pthread_mutex_lock(&w->lock);
    while (nap(w, w->interval_ms)) {
        size_t n = w->ntopics;
        for (size_t i = 0; i < n && !w->stop; i++) {
            /* an entry is never freed before close, and close joins this thread first */
            const char *topic = w->topics[i]->name;
            int64_t end[CDC_PARTITIONS];
            cdc_error_t e;
            cdc_err_t rc;
            pthread_mutex_unlock(&w->lock); /* a request may take its timeout */
            for (int p = 0; p < CDC_PARTITIONS; p++)
                end[p] = -1;
            rc = cdc_kafka_consumer_end_offsets(w->consumer, topic, CDC_PARTITIONS, end,
                                                REQUEST_TIMEOUT_MS, &e);
            if (rc != CDC_OK && cdc_clock_mono_ms() - warned_ms > 60000) {
                warned_ms = cdc_clock_mono_ms();
                cdc_log_warn("could not read the ends of topic \"%s\" for the lag: %s", topic,
                             e.msg);
            }
            pthread_mutex_lock(&w->lock);
            for (int p = 0; rc == CDC_OK && p < CDC_PARTITIONS; p++)
                if (end[p] >= 0)
                    w->topics[i]->end[p] = end[p];
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

cdc_err_t cdc_watermarks_open(cdc_watermarks_t **out, const char *bootstrap, const char *properties,
                              int64_t interval_ms, cdc_error_t *e)
{
    cdc_kafka_consumer_config_t cc = {0};
    cdc_watermarks_t *w = calloc(1, sizeof(*w));
    cdc_err_t rc;

    *out = NULL;
    if (w == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cc.bootstrap = bootstrap;
    cc.client_id = "cdc-coordinator";
    cc.group_id = "cdc-coordinator";
    cc.properties = properties;
    if ((rc = cdc_kafka_consumer_new(&cc, &w->consumer, e)) != CDC_OK)
        goto fail;
    w->interval_ms = interval_ms;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        rc = cdc_error_set(e, CDC_ERR_INTERNAL, "could not start the watermark thread");
        goto fail_thread;
    }
    *out = w;
    return CDC_OK;
fail_thread:
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    cdc_kafka_consumer_free(w->consumer);
fail:
    free(w);
    return rc;
}

void cdc_watermarks_watch(cdc_watermarks_t *w, const char *topic)
{
    size_t len = strlen(topic);
    topic_ends_t *t;

    pthread_mutex_lock(&w->lock);
    if (cdc_strmap_get(&w->byname, topic) != NULL) {
        pthread_mutex_unlock(&w->lock);
        return;
    }
    if (cdc_array_reserve(w->topics, w->cap, w->ntopics + 1, 64) != CDC_OK ||
        (t = malloc(sizeof(*t) + len + 1)) == NULL) {
        pthread_mutex_unlock(&w->lock);
        cdc_log_error("out of memory watching the ends of topic \"%s\": its lag is not live",
                      topic);
        return;
    }
    memcpy(t->name, topic, len + 1);
    for (int p = 0; p < CDC_PARTITIONS; p++)
        t->end[p] = -1;
    if (cdc_strmap_put(&w->byname, t->name, t) != CDC_OK) {
        pthread_mutex_unlock(&w->lock);
        free(t);
        cdc_log_error("out of memory watching the ends of topic \"%s\": its lag is not live",
                      topic);
        return;
    }
    w->topics[w->ntopics++] = t;
    pthread_mutex_unlock(&w->lock);
}

int64_t cdc_watermarks_end(cdc_watermarks_t *w, const char *topic, int partition)
{
    int64_t end = -1;
    const topic_ends_t *t;
    if (partition < 0 || partition >= CDC_PARTITIONS)
        return -1;
    pthread_mutex_lock(&w->lock);
    if ((t = cdc_strmap_get(&w->byname, topic)) != NULL)
        end = t->end[partition];
    pthread_mutex_unlock(&w->lock);
    return end;
}

void cdc_watermarks_close(cdc_watermarks_t *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    cdc_kafka_consumer_free(w->consumer);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    for (size_t i = 0; i < w->ntopics; i++)
        free(w->topics[i]);
    free(w->topics);
    cdc_strmap_free(&w->byname);
    free(w);
}
