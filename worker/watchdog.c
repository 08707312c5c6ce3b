/*
 * Fetch health of the worker's partition slots (docs/worker.md, "Progress watchdog"): the
 * restart of partitions whose fetching stopped on an error, the progress watchdog that
 * restarts a partition stalled for any other reason, and the lag and state gauges, with
 * /status rebuilt at the same pace (status.c), and the check that a topic has no more
 * partitions than the job reads. The record path that consumes them is consume.c; the
 * record thread runs all of this between batches.
 */
#include <inttypes.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/state.h"
#include "worker/worker.h"

/* How long a partition whose fetching stopped on an error waits before it is assigned
 * again from its next offset. */
#define RESTART_DELAY_MS 1000

/*
 * Logs the restart of a partition at next_offset. When the broker's log now starts past
 * it, the records in between were deleted before this job read them (retention; the
 * development broker keeps 5 MiB a partition): the partition cannot go on without skipping
 * them, and it does not skip them, so that is an error that names the cause (docs/worker.md,
 * "Records deleted before they were read"); its lag stays in /status. A logical offset
 * (the beginning of a partition with no checkpoint) cannot have been deleted.
 */
static void log_restart(cdc_worker_t *w, int p, size_t t, int64_t next_offset, int *queries)
{
    int64_t low = -1, high = -1;
    cdc_error_t e;
    const char *topic = cdc_worker_topic(w, t);
    bool deleted = false;

    if (next_offset >= 0) {
        /* the log start cached from the last fetch response, else one lookup (of at most
         * 200 ms, on this record thread) per pass: a partition not looked up this pass is
         * looked up at its next restart */
        bool cached =
            cdc_kafka_consumer_watermarks(w->consumer, topic, p, &low, &high, 0, &e) == CDC_OK &&
            low >= 0;
        if (!cached &&
            ((*queries)-- <= 0 ||
             cdc_kafka_consumer_watermarks(w->consumer, topic, p, &low, &high, 200, &e) != CDC_OK))
            low = -1;
        deleted = low > next_offset;
    }
    if (deleted)
        cdc_log_error("partition %d topic \"%s\": offset %" PRId64 " is not in Kafka any more "
                      "(the log starts at %" PRId64 "): the broker deleted records this job had "
                      "not read (retention; the development broker keeps 5 MiB a partition); "
                      "nothing is skipped, so the partition stays at offset %" PRId64
                      " (docs/worker.md, \"Records deleted before they were read\")",
                      p, topic, next_offset, low, next_offset);
    else
        cdc_log_warn("partition %d topic \"%s\": fetching had stopped; assigned again from offset "
                     "%" PRId64,
                     p, topic, next_offset);
}

/*
 * librdkafka stops fetching a partition after a non-retriable error, e.g. when the
 * lookup of a logical start offset (the beginning of a partition with no checkpoint)
 * failed on a broker that was busy or changing leaders, and this consumer does not let
 * it reset offsets on its own (auto.offset.reset=error); nor can it be seeked any more.
 * Such a partition is assigned again from its next offset after RESTART_DELAY_MS, as
 * often as it takes: a transient failure recovers, and a lasting one (a checkpointed
 * offset that retention deleted) keeps warning while the partition's lag shows in
 * /status, without skipping anything.
 */
void cdc_worker_restart_failed(cdc_worker_t *w)
{
    char topics[16][256];
    int32_t parts[16];
    int64_t now = cdc_clock_mono_ms();
    int queries = 1;
    size_t n;
    /* every partition reported, 16 at a time */
    while ((n = cdc_kafka_consumer_failed(w->consumer, topics, parts, 16)) > 0) {
        for (size_t i = 0; i < n; i++) {
            int ti = cdc_worker_topic_index(w, topics[i]);
            if (ti >= 0 && parts[i] >= 0 && parts[i] < CDC_WORKER_PARTITIONS &&
                w->slots[parts[i]].owned && w->slots[parts[i]].restart_at[ti] == 0)
                w->slots[parts[i]].restart_at[ti] = now + RESTART_DELAY_MS;
        }
    }
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        for (size_t t = 0; s->owned && t < w->topics.n; t++) {
            cdc_error_t e2;
            if (s->restart_at[t] == 0 || now < s->restart_at[t] || !cdc_worker_consumes(w, t))
                continue;
            s->restart_at[t] = 0;
            if (cdc_kafka_consumer_restart(w->consumer, cdc_worker_topic(w, t), p,
                                           s->next_offset[t], &e2) != CDC_OK) {
                s->restart_at[t] = now + RESTART_DELAY_MS;
                cdc_log_warn("partition %d topic \"%s\": could not assign it again: %s", p,
                             cdc_worker_topic(w, t), e2.msg);
            } else {
                /* (a partition paused by whatever stalled it fetches again; a pause for
                 * --max-staged-bytes is applied again by cdc_worker_set_paused at its next call) */
                if (!w->paused)
                    cdc_kafka_consumer_resume(w->consumer, cdc_worker_topic(w, t), p, &e2);
                cdc_metrics_counter_inc(w->m_fetch_restarts);
                log_restart(w, p, t, s->next_offset[t], &queries);
            }
        }
    }
}

/*
 * Progress watchdog of one topic partition (docs/worker.md, "Progress watchdog"): records
 * behind the high watermark and an offset that has not moved for --progress-timeout
 * (fetching not paused on purpose, no restart pending) is a stall, whatever its cause: it
 * is logged, counted, reported with the next ack (TopicOffset.stalled_ms, shown in the
 * coordinator's /status) and the partition is fetched again from its next offset (the
 * restart of cdc_worker_restart_failed()). Returns 1 while the partition is stalled.
 */
int cdc_worker_watchdog(cdc_worker_t *w, cdc_slot_t *s, size_t t, int64_t now)
{
    int64_t pos = s->next_offset[t] >= 0 ? s->next_offset[t] : 0;
    if (s->progress_ms[t] == 0 || s->progress_offset[t] != pos || s->high[t] <= pos || w->paused ||
        s->restart_at[t] != 0) {
        if (s->stalled_since[t] != 0 && (s->progress_offset[t] != pos || s->high[t] <= pos))
            cdc_log_info("partition %u topic \"%s\": progressing again at offset %" PRId64,
                         s->partition, cdc_worker_topic(w, t), pos);
        if (s->progress_offset[t] != pos || s->high[t] <= pos || s->progress_ms[t] == 0) {
            s->stalled_since[t] = 0;
            s->watchdog_gave_up[t] = false;
            s->progress_offset[t] = pos;
            s->progress_ms[t] = now;
        }
        return s->stalled_since[t] != 0;
    }
    if (w->cfg.progress_timeout_ms <= 0 || now - s->progress_ms[t] < w->cfg.progress_timeout_ms)
        return s->stalled_since[t] != 0;
    if (s->stalled_since[t] != 0) {
        /* Fetched again at this offset already and still stuck: once is enough (a topic of
         * a transactional producer ends in a control record no consumer returns, which
         * looks just like this); the partition stays reported as stalled. */
        if (!s->watchdog_gave_up[t]) {
            s->watchdog_gave_up[t] = true;
            cdc_log_warn("partition %u topic \"%s\": still no progress at offset %" PRId64
                         " after fetching it again (%" PRId64 " behind the high watermark): not "
                         "fetching it again; a control record at the end of a transactional "
                         "producer's partition looks like this",
                         s->partition, cdc_worker_topic(w, t), pos, s->high[t] - pos);
        }
        s->progress_ms[t] = now;
        return 1;
    }
    s->stalled_since[t] = s->progress_ms[t];
    cdc_metrics_counter_inc(w->m_stalls);
    cdc_log_warn("partition %u topic \"%s\": no progress for %" PRId64 " ms at offset %" PRId64
                 " with %" PRId64 " records behind the high watermark: fetching it again",
                 s->partition, cdc_worker_topic(w, t), now - s->stalled_since[t], pos,
                 s->high[t] - pos);
    s->restart_at[t] = now;  /* cdc_worker_restart_failed() assigns it again from next_offset */
    s->progress_ms[t] = now; /* the next verdict after another timeout */
    return 1;
}

void cdc_worker_update_gauges(cdc_worker_t *w, int64_t now_ms)
{
    if (now_ms < w->next_lag_ms)
        return;
    w->next_lag_ms = now_ms + 2000;
    cdc_worker_check_partitions(w, 50); /* topics an assignment's check had no time for */
    double stalled = 0;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        double lag = 0;
        if (!s->owned)
            continue;
        for (size_t t = 0; t < w->topics.n; t++) {
            int64_t low = 0, high = 0;
            cdc_error_t e;
            if (!cdc_worker_consumes(w, t))
                continue;
            /* cached by librdkafka from fetch responses: no broker round trip here */
            if (cdc_kafka_consumer_watermarks(w->consumer, cdc_worker_topic(w, t), p, &low, &high,
                                              0, &e) == CDC_OK &&
                high >= 0)
                s->high[t] = high;
            int64_t pos = s->next_offset[t] >= 0 ? s->next_offset[t] : 0;
            if (s->high[t] > pos)
                lag += (double)(s->high[t] - pos);
            stalled += cdc_worker_watchdog(w, s, t, now_ms);
        }
        cdc_metrics_gauge_set(s->lag, lag);
        if (s->dedup != NULL)
            cdc_metrics_gauge_set(s->state_bytes, (double)cdc_state_size(s->dedup->st));
    }
    cdc_metrics_gauge_set(w->m_stalled, stalled);
    cdc_worker_publish_status(w);
}

/* The partition count of topic ti, asked from the broker (waiting up to wait_ms) until it
 * answered once; 0 when unknown. */
static int32_t topic_partitions_wait(cdc_worker_t *w, int ti, int wait_ms)
{
    int32_t n = 0;
    cdc_error_t e;
    if (ti < 0 || (size_t)ti >= w->topics.n)
        return 0;
    if (w->topic_parts[ti] > 0)
        return w->topic_parts[ti];
    if (cdc_kafka_consumer_partitions(w->consumer, cdc_worker_topic(w, (size_t)ti), &n, wait_ms,
                                      &e) != CDC_OK)
        return 0;
    w->topic_parts[ti] = n;
    return n;
}

void cdc_worker_check_partitions(cdc_worker_t *w, int budget_ms)
{
    int64_t deadline = cdc_clock_mono_ms() + budget_ms;
    for (size_t t = 0; t < w->topics.n; t++) {
        if (!cdc_worker_consumes(w, t) || w->topic_parts_warned[t])
            continue;
        /* (briefly: a topic the capture has not created yet is asked again next time; with
         * thousands of them, 200 ms each would hold the record thread for minutes) */
        int64_t left = deadline - cdc_clock_mono_ms();
        if (w->topic_parts[t] == 0 && left <= 0)
            return;
        int32_t n = topic_partitions_wait(w, (int)t, left < 200 ? (int)left : 200);
        if (n > CDC_WORKER_PARTITIONS) {
            w->topic_parts_warned[t] = true;
            cdc_log_error("topic \"%s\" has %d partitions, but the job reads %d (its partition "
                          "slots): the changes in partitions %d to %d are never read",
                          cdc_worker_topic(w, t), (int)n, CDC_WORKER_PARTITIONS,
                          CDC_WORKER_PARTITIONS, (int)n - 1);
        }
    }
}
