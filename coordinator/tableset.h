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
 * Pure logic; one thread (the coordinator's loop). A set has no fixed size: a job of
 * thousands of tables holds them all (names sorted, looked up by binary search). A set owns
 * its names: a zeroed cdc_tableset_t (or cdc_tableset_init) is empty, cdc_tableset_clear
 * frees what it holds, and a set is never copied with `=` (cdc_tableset_copy,
 * cdc_tableset_move).
 */
#ifndef CDC_COORDINATOR_TABLESET_H
#define CDC_COORDINATOR_TABLESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct cdc_tableset {
    char **names; /* n names in sorted order, each owned by the set (common/buf.h array) */
    int n;
    size_t cap;
} cdc_tableset_t;

/* Names a list shows at most (a refusal, a widening): the rest are counted, "and 1,998 more". */
#define CDC_TABLESET_LIST_NAMES 8

/* What a worker's topics mean for its partitions. */
typedef enum cdc_tableset_verdict {
    CDC_TABLESET_FITS = 0, /* it can consume every topic of the set: it may own partitions */
    CDC_TABLESET_MISSING,  /* it lacks a topic of the set */
    CDC_TABLESET_VERDICTS,
} cdc_tableset_verdict_t;

/* Metric label and /status value of a refusal: "missing_table" ("" = fits). */
const char *cdc_tableset_verdict_name(cdc_tableset_verdict_t v);

/* An empty set (the same as a zeroed one). */
void cdc_tableset_init(cdc_tableset_t *s);

/* Frees every name and the array: s is empty again, ready for use. */
void cdc_tableset_clear(cdc_tableset_t *s);

/* Makes dst a copy of src (dst's names are freed first). CDC_ERR_NOMEM leaves dst empty. */
cdc_err_t cdc_tableset_copy(cdc_tableset_t *dst, const cdc_tableset_t *src, cdc_error_t *e);

/* Moves src's names to dst (dst's are freed first); src is left empty. Never fails. */
void cdc_tableset_move(cdc_tableset_t *dst, cdc_tableset_t *src);

/* The i-th topic in sorted order (0 <= i < s->n); points into s, valid until s changes. */
const char *cdc_tableset_name(const cdc_tableset_t *s, int i);

bool cdc_tableset_has(const cdc_tableset_t *s, const char *topic);

/* The index of topic in sorted order, -1 when absent (a binary search). */
int cdc_tableset_index(const cdc_tableset_t *s, const char *topic);

bool cdc_tableset_equal(const cdc_tableset_t *a, const cdc_tableset_t *b);

/* Adds topic (a no-op when present; s copies the name). CDC_ERR_INVALID for an empty name,
 * CDC_ERR_NOMEM when memory runs out (s unchanged). */
cdc_err_t cdc_tableset_add(cdc_tableset_t *s, const char *topic, cdc_error_t *e);

/*
 * Widens the job's set by every topic that each of the n workers' sets has (nothing when n is
 * 0), in O(k log k) per worker for sets of k topics. The names added are written to added as
 * a bounded list of quoted names (cdc_tableset_list; "" when none; may be NULL). Returns how
 * many were added, or -1 when memory ran out (job unchanged).
 */
int cdc_tableset_widen(cdc_tableset_t *job, const cdc_tableset_t *const *workers, int n,
                       char *added, size_t added_size);

/*
 * Judges the topics a worker can consume against the job's set: it fits when it has every
 * topic of the set (more does not matter: it consumes the set). Otherwise why gets the
 * reason naming the topics, e.g. `it does not consume "cdc.public.a" of the job's tables`
 * (lower case, no trailing period, for the log line and the worker's Assign; a long list is
 * summed up as cdc_tableset_list does).
 */
cdc_tableset_verdict_t cdc_tableset_judge(const cdc_tableset_t *job, const cdc_tableset_t *worker,
                                          char *why, size_t why_size);

/*
 * Writes n names as a list of quoted names that fits in buf (size > 0): at most
 * CDC_TABLESET_LIST_NAMES of them, as many as fit, then how many more there are, e.g.
 * `"cdc.public.a", "cdc.public.b" and 1,998 more`. A name is never cut.
 */
void cdc_tableset_list(const char *const *names, int n, char *buf, size_t size);

/* The set as a JSON array of names, for etcd; the caller frees it (NULL: out of memory). */
char *cdc_tableset_json(const cdc_tableset_t *s);

/* Reads a JSON array of names into s (cleared first). CDC_ERR_CORRUPT when it is not one. */
cdc_err_t cdc_tableset_parse(cdc_tableset_t *s, const char *json, size_t len, cdc_error_t *e);

#endif
