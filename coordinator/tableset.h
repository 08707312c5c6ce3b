/*
 * The job's table set (docs/protocol.md, "The job's table set"): the source topics, one per
 * table, that every partition slot carries. Workers report the topics they consume when
 * they register (or offer, when they follow the job's tables); every worker consumes exactly
 * the set, given in its Assign, so two slots never differ in the tables they carry and no
 * slot silently skips a table. The set never narrows: it starts from the coordinator's record
 * in etcd (or the topics of the newest checkpoint) and widens by a topic that every live
 * worker offers, or by cdcctl. A worker that cannot consume a topic of the set (its --tables
 * or --topics lack it) is refused; one that could consume more just consumes the set.
 *
 * Pure logic over fixed-size sets, so that a member of the membership table can hold one;
 * one thread (the coordinator's loop).
 */
#ifndef CDC_COORDINATOR_TABLESET_H
#define CDC_COORDINATOR_TABLESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CDC_TABLESET_MAX 64     /* topics of a set: a worker's limit too */
#define CDC_TABLESET_BYTES 4096 /* their names together, each with its NUL */

typedef struct cdc_tableset {
    char names[CDC_TABLESET_BYTES]; /* the names one after the other, each NUL-terminated */
    uint16_t at[CDC_TABLESET_MAX];  /* offset of the i-th name in sorted order */
    int n;
    size_t used; /* bytes of names in use */
} cdc_tableset_t;

/* What a worker's topics mean for its partitions. */
typedef enum cdc_tableset_verdict {
    CDC_TABLESET_FITS = 0, /* it can consume every topic of the set: it may own partitions */
    CDC_TABLESET_MISSING,  /* it lacks a topic of the set */
    CDC_TABLESET_VERDICTS,
} cdc_tableset_verdict_t;

/* Metric label and /status value of a refusal: "missing_table" ("" = fits). */
const char *cdc_tableset_verdict_name(cdc_tableset_verdict_t v);

void cdc_tableset_clear(cdc_tableset_t *s);

/* The i-th topic in sorted order (0 <= i < s->n); points into s. */
const char *cdc_tableset_name(const cdc_tableset_t *s, int i);

bool cdc_tableset_has(const cdc_tableset_t *s, const char *topic);

bool cdc_tableset_equal(const cdc_tableset_t *a, const cdc_tableset_t *b);

/* Adds topic (a no-op when present). CDC_ERR_INVALID for an empty name or a full set. */
cdc_err_t cdc_tableset_add(cdc_tableset_t *s, const char *topic, cdc_error_t *e);

/*
 * Widens the job's set by every topic that each of the n workers' sets has (nothing when n is
 * 0). The names added are written to added as a list of quoted names ("" when none; may be
 * NULL). Returns how many were added; a topic that does not fit in the set is not added.
 */
int cdc_tableset_widen(cdc_tableset_t *job, const cdc_tableset_t *const *workers, int n,
                       char *added, size_t added_size);

/*
 * Judges the topics a worker can consume against the job's set: it fits when it has every
 * topic of the set (more does not matter: it consumes the set). Otherwise why gets the
 * reason naming the topics, e.g. `it does not consume "cdc.public.a" of the job's tables`
 * (lower case, no trailing period, for the log line and the worker's Assign).
 */
cdc_tableset_verdict_t cdc_tableset_judge(const cdc_tableset_t *job, const cdc_tableset_t *worker,
                                          char *why, size_t why_size);

/* The set as a JSON array of names, for etcd; the caller frees it (NULL: out of memory). */
char *cdc_tableset_json(const cdc_tableset_t *s);

/* Reads a JSON array of names into s (cleared first). CDC_ERR_CORRUPT when it is not one. */
cdc_err_t cdc_tableset_parse(cdc_tableset_t *s, const char *json, size_t len, cdc_error_t *e);

#endif
