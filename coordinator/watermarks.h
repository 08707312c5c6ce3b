/*
 * The ends of the source topics' partitions, asked from Kafka on a thread of its own
 * when the coordinator has --kafka: with them the lag in /status and on the dashboard is
 * live, also while a slot's owner is paused or gone (its acks, the other source of high
 * watermarks, stop with it) and while the job recovers. Without --kafka the lag follows
 * the owners' acks only.
 *
 * Thread-safety: every function takes the module's lock; the main loop names the topics
 * and reads the ends, the module's thread asks the brokers.
 */
#ifndef CDC_COORDINATOR_WATERMARKS_H
#define CDC_COORDINATOR_WATERMARKS_H

#include <stdint.h>

#include "common/err.h"

typedef struct cdc_watermarks cdc_watermarks_t;

/*
 * Starts asking the brokers at bootstrap (librdkafka properties: "k=v;...", may be
 * NULL) every interval_ms for the ends of the topics watched. On success *out is owned
 * by the caller (cdc_watermarks_close()).
 */
cdc_err_t cdc_watermarks_open(cdc_watermarks_t **out, const char *bootstrap, const char *properties,
                              int64_t interval_ms, cdc_error_t *e);

/* Stops the thread (within one request's timeout) and frees w; NULL is a no-op. */
void cdc_watermarks_close(cdc_watermarks_t *w);

/* Watches topic from now on (copied; every topic, no cap). Out of memory is logged. */
void cdc_watermarks_watch(cdc_watermarks_t *w, const char *topic);

/* The newest end of partition p of topic the brokers answered, -1 when none yet. */
int64_t cdc_watermarks_end(cdc_watermarks_t *w, const char *topic, int partition);

#endif
