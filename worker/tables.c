/*
 * The worker's tables (docs/protocol.md, "The job's table set"; docs/worker.md, "The job's
 * tables"): which source topics it can consume and which it does. With --tables or --topics
 * it can consume those; without, it follows the job: it offers the tables registered on the
 * schema topic and consumes whatever set the coordinator's Assign names. Either way every
 * Assign carries the job's set and the worker consumes exactly that, so every slot of the
 * job carries the same tables. The topic list only grows (w->topics, published with a
 * release store of the count), so a topic keeps its index in the slots' per-topic arrays
 * and other threads read entries without a lock.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/log.h"
#include "worker/worker.h"

/* How often a follower looks for tables newly registered on the schema topic. */
#define OFFER_REFRESH_MS 2000

/* ---- the append-only topic list (worker.h: cdc_topic_list_t) --------------------------- */

static size_t name_slot(const char *name, size_t mask)
{
    return (size_t)cdc_hash_bytes(name, strlen(name), 0) & mask;
}

/* Entry i (already in the directory) goes into the hash index. */
static void index_put(cdc_topic_list_t *l, char **names, size_t i)
{
    size_t mask = l->index_cap - 1, h = name_slot(names[i], mask);
    while (l->index[h] != 0)
        h = (h + 1) & mask;
    l->index[h] = (uint32_t)(i + 1);
}

/* Room in the hash index for need entries (at most half full): a bigger index is built
 * from the current directory's first n entries. The index is the record thread's alone,
 * so it is simply replaced. */
static cdc_err_t index_reserve(cdc_topic_list_t *l, char **names, size_t n, size_t need)
{
    size_t cap = l->index_cap ? l->index_cap : 64;
    uint32_t *index = NULL;

    while (cap / 2 < need)
        cap *= 2;
    if (cap == l->index_cap)
        return CDC_OK;
    if (cdc_array_resize(index, cap) != CDC_OK)
        return CDC_ERR_NOMEM;
    memset(index, 0, cap * sizeof(*index));
    free(l->index);
    l->index = index;
    l->index_cap = cap;
    for (size_t i = 0; i < n; i++)
        index_put(l, names, i);
    return CDC_OK;
}

cdc_err_t cdc_topic_list_append(cdc_topic_list_t *l, char *name)
{
    size_t n = atomic_load_explicit(&l->n, memory_order_relaxed);
    char **names = atomic_load_explicit(&l->names, memory_order_relaxed);

    /* (an index is a uint32_t in the hash index and an int for callers: far beyond any
     * table count, so only out of memory can stop the list) */
    if (name == NULL || n >= INT32_MAX || index_reserve(l, names, n, n + 1) != CDC_OK)
        return CDC_ERR_NOMEM;
    if (n == l->cap) {
        /* A new directory, never realloc(): readers may hold the old one (worker.h). */
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **bigger = NULL;
        if (names != NULL &&
            cdc_array_reserve(l->retired, l->capretired, l->nretired + 1, 8) != CDC_OK)
            return CDC_ERR_NOMEM;
        if (cdc_array_resize(bigger, cap) != CDC_OK)
            return CDC_ERR_NOMEM;
        if (n > 0)
            memcpy(bigger, names, n * sizeof(*names));
        if (names != NULL)
            l->retired[l->nretired++] = names;
        atomic_store_explicit(&l->names, bigger, memory_order_release);
        names = bigger;
        l->cap = cap;
    }
    names[n] = name;
    atomic_store_explicit(&l->n, n + 1, memory_order_release);
    index_put(l, names, n);
    return CDC_OK;
}

int cdc_topic_list_find(const cdc_topic_list_t *l, const char *name)
{
    char **names = atomic_load_explicit(&l->names, memory_order_relaxed);
    size_t mask = l->index_cap - 1;

    if (l->index_cap == 0)
        return -1;
    for (size_t h = name_slot(name, mask); l->index[h] != 0; h = (h + 1) & mask)
        if (strcmp(names[l->index[h] - 1], name) == 0)
            return (int)(l->index[h] - 1);
    return -1;
}

void cdc_topic_list_free(cdc_topic_list_t *l)
{
    size_t n;
    char **names = cdc_topic_list_names(l, &n);

    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    for (size_t i = 0; i < l->nretired; i++)
        free(l->retired[i]);
    free(l->retired);
    free(l->index);
    atomic_store(&l->names, NULL);
    atomic_store(&l->n, 0);
    l->cap = 0;
    l->retired = NULL;
    l->nretired = l->capretired = 0;
    l->index = NULL;
    l->index_cap = 0;
}

/* ---- the worker's topics ---------------------------------------------------------------- */

int cdc_worker_topic_index(const cdc_worker_t *w, const char *topic)
{
    return cdc_topic_list_find(&w->topics, topic);
}

/* Array arr (of w->topic_cap entries) made `to` entries long, the new ones zero. */
#define GROW(arr, to)                                                                              \
    (cdc_array_resize((arr), (to)) == CDC_OK                                                       \
         ? (memset((arr) + w->topic_cap, 0, ((to)-w->topic_cap) * sizeof(*(arr))), true)           \
         : false)

/*
 * Every per-topic array (the worker's and each slot's) made to hold need topics. These
 * are plain arrays that move when they grow: only the record thread reads them (the
 * finalizer gets copies in its cut, barrier.c; the heartbeat thread reads none). On
 * failure the arrays grown so far are larger than w->topic_cap says, which is harmless:
 * the next call grows them again from w->topic_cap.
 */
static bool topics_reserve(cdc_worker_t *w, size_t need)
{
    size_t cap = w->topic_cap ? w->topic_cap : 16;
    bool ok;

    if (need <= w->topic_cap)
        return true;
    while (cap < need)
        cap *= 2;
    ok = GROW(w->consumed, cap) && GROW(w->topic_parts, cap) && GROW(w->topic_parts_warned, cap);
    for (int p = 0; ok && p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        ok = GROW(s->next_offset, cap) && GROW(s->high, cap) && GROW(s->progress_offset, cap) &&
             GROW(s->progress_ms, cap) && GROW(s->stalled_since, cap) &&
             GROW(s->watchdog_gave_up, cap) && GROW(s->restart_at, cap) && GROW(s->chunks, cap);
    }
    if (ok)
        w->topic_cap = cap;
    return ok;
}

#undef GROW

cdc_err_t cdc_worker_add_topic(cdc_worker_t *w, char *name, cdc_error_t *e)
{
    if (name == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (!topics_reserve(w, w->topics.n + 1) || cdc_topic_list_append(&w->topics, name) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory adding topic \"%s\"", name);
    return CDC_OK;
}

/* The current assignment consumes every topic (all: true) or none. */
static void consume_all(cdc_worker_t *w, bool all)
{
    if (w->topic_cap > 0)
        memset(w->consumed, 0, w->topic_cap * sizeof(*w->consumed));
    for (size_t t = 0; all && t < w->topics.n; t++)
        w->consumed[t] = true;
}

cdc_err_t cdc_worker_tables_open(cdc_worker_t *w, cdc_error_t *e)
{
    bool explicit_topics = w->cfg.topics && w->cfg.topics[0];
    const char *list = explicit_topics ? w->cfg.topics : w->cfg.tables;
    char *copy, *save = NULL;
    cdc_err_t rc = CDC_OK;

    snprintf(w->schema_topic, sizeof(w->schema_topic), "%s._schemas", w->cfg.topic_prefix);
    consume_all(w, false);
    if (list == NULL || list[0] == '\0') {
        w->follows_tables = true; /* the coordinator's Assign says what to consume */
        return CDC_OK;
    }
    if ((copy = strdup(list)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (char *tok = strtok_r(copy, ", ", &save); tok && rc == CDC_OK;
         tok = strtok_r(NULL, ", ", &save)) {
        char *name = NULL;
        if (explicit_topics)
            name = strdup(tok);
        else if (asprintf(&name, "%s.%s%s", w->cfg.topic_prefix, strchr(tok, '.') ? "" : "public.",
                          tok) < 0)
            name = NULL;
        if (name != NULL && cdc_worker_topic_index(w, name) >= 0) {
            free(name); /* named twice */
            continue;
        }
        if ((rc = cdc_worker_add_topic(w, name, e)) != CDC_OK) {
            free(name);
            cdc_error_prefix(e, "%s", explicit_topics ? "option --topics" : "option --tables");
        }
    }
    free(copy);
    /* until an Assign names the job's set: all of them (an older coordinator names none) */
    consume_all(w, true);
    return rc;
}

void cdc_worker_tables_close(cdc_worker_t *w)
{
    cdc_topic_list_free(&w->topics);
    cdc_topic_list_free(&w->offer);
    free(w->consumed);
    free(w->topic_parts);
    free(w->topic_parts_warned);
    w->consumed = NULL;
    w->topic_parts = NULL;
    w->topic_parts_warned = NULL;
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++) {
        cdc_slot_t *s = &w->slots[p];
        free(s->next_offset);
        free(s->high);
        free(s->progress_offset);
        free(s->progress_ms);
        free(s->stalled_since);
        free(s->watchdog_gave_up);
        free(s->restart_at);
        cdc_worker_chunk_free(s, w->topic_cap);
        free(s->chunks);
        s->chunks = NULL;
        s->next_offset = s->high = s->progress_offset = s->progress_ms = s->stalled_since =
            s->restart_at = NULL;
        s->watchdog_gave_up = NULL;
    }
    w->topic_cap = 0;
}

cdc_err_t cdc_worker_take_tables(cdc_worker_t *w, const Cdc__Assign *a, cdc_error_t *e)
{
    if (a->n_tables == 0) {
        /* an older coordinator: --tables/--topics as before, a follower has nothing */
        consume_all(w, !w->follows_tables);
        return CDC_OK;
    }
    /* First the topics new to us (the consumed set unchanged if one cannot be added)... */
    for (size_t i = 0; w->follows_tables && i < a->n_tables; i++) {
        const char *topic = a->tables[i];
        char *name;
        cdc_err_t rc;
        if (topic == NULL || topic[0] == '\0' || cdc_worker_topic_index(w, topic) >= 0)
            continue;
        if ((rc = cdc_worker_add_topic(w, name = strdup(topic), e)) != CDC_OK) {
            free(name);
            return cdc_error_prefix(e, "the job's tables");
        }
        cdc_log_info("consuming topic \"%s\" from now on: the job's tables include it (a "
                     "partition slot whose checkpoint has no offset of it reads it from "
                     "the beginning)",
                     topic);
    }
    /* ...then exactly the set is consumed */
    consume_all(w, false);
    for (size_t i = 0; i < a->n_tables; i++) {
        const char *topic = a->tables[i];
        int t;
        if (topic == NULL || topic[0] == '\0')
            continue;
        if ((t = cdc_worker_topic_index(w, topic)) >= 0) {
            w->consumed[t] = true;
            continue;
        }
        /* the coordinator refuses us then (our Register named our topics); were it not to,
         * our slots would miss the table: said loudly */
        if (a->refused == NULL || a->refused[0] == '\0')
            cdc_log_error("the job's tables include \"%s\", which this worker's --tables "
                          "and --topics lack: it does not consume it",
                          topic);
    }
    return CDC_OK;
}

void cdc_worker_offer_refresh(cdc_worker_t *w, int64_t now)
{
    const char **registered = NULL;
    size_t n;
    cdc_error_t e;

    if (!w->follows_tables || now < w->next_offer_ms)
        return;
    w->next_offer_ms = now + OFFER_REFRESH_MS;
    if (cdc_worker_schemas_poll(w, &e) != CDC_OK)
        cdc_log_debug("schema topic \"%s\": %s", w->schema_topic, e.msg);
    /* all of them, however many: the count first */
    n = cdc_catalog_topics(w->catalog, NULL, 0);
    if (n == 0)
        return;
    if (cdc_array_resize(registered, n) != CDC_OK) {
        cdc_log_warn("not offering the tables registered on \"%s\": out of memory",
                     w->schema_topic);
        return;
    }
    if (cdc_catalog_topics(w->catalog, registered, n) < n) /* (never: nothing ran between) */
        n = cdc_catalog_topics(w->catalog, registered, n);
    for (size_t i = 0; i < n; i++) {
        char *name;
        if (cdc_topic_list_find(&w->offer, registered[i]) >= 0)
            continue;
        if ((name = strdup(registered[i])) == NULL ||
            cdc_topic_list_append(&w->offer, name) != CDC_OK) {
            free(name);
            cdc_log_warn("not offering \"%s\" to the job: out of memory", registered[i]);
            continue;
        }
        cdc_log_info("offering table topic \"%s\" to the job: its schema is registered on "
                     "\"%s\"",
                     registered[i], w->schema_topic);
    }
    free(registered);
}

char **cdc_worker_register_topics(cdc_worker_t *w, size_t *n)
{
    return cdc_topic_list_names(w->follows_tables ? &w->offer : &w->topics, n);
}
