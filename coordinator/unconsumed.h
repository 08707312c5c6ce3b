/*
 * Tables the capture registered that the job does not consume (docs/operations.md,
 * "Unconsumed tables"). A live worker offers (or, with --tables, reports) the table
 * topics it could consume; a topic some worker offers that stays outside the job's table
 * set for longer than --unconsumed-after is a table whose changes the capture confirms to
 * PostgreSQL but no slot reads: the coordinator logs an error naming it once, counts it
 * in cdc_coordinator_tables_unconsumed, and lists it in /status ("tables_unconsumed"),
 * until it joins the set or no worker offers it any more.
 *
 * Pure bookkeeping over topic names, no cap: one entry per topic outside the set. One
 * thread (the coordinator's loop).
 */
#ifndef CDC_COORDINATOR_UNCONSUMED_H
#define CDC_COORDINATOR_UNCONSUMED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct cdc_unconsumed_topic {
    char *topic;
    int64_t since_ms; /* first seen outside the set (monotonic) */
    int32_t offered;  /* live workers offering it at the last look */
    bool reported;    /* its error was logged */
} cdc_unconsumed_topic_t;

typedef struct cdc_unconsumed {
    cdc_unconsumed_topic_t *t;
    size_t n, cap;
} cdc_unconsumed_t;

/* A zeroed cdc_unconsumed_t is empty. */
void cdc_unconsumed_free(cdc_unconsumed_t *u);

/*
 * Takes one look: topics[0..n) are the topics live workers offer outside the job's set,
 * one entry per offering worker (a topic may repeat). A topic seen before keeps its
 * since_ms, a new one starts at now_ms, one no longer offered is forgotten.
 */
cdc_err_t cdc_unconsumed_look(cdc_unconsumed_t *u, const char *const *topics, size_t n,
                              int64_t now_ms);

/* Whether entry i has been outside the set for at least after_ms at now_ms. */
static inline bool cdc_unconsumed_late(const cdc_unconsumed_t *u, size_t i, int64_t now_ms,
                                       int64_t after_ms)
{
    return now_ms - u->t[i].since_ms >= after_ms;
}

#endif
