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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "worker/worker.h"

/* How often a follower looks for tables newly registered on the schema topic. */
#define OFFER_REFRESH_MS 2000

int cdc_worker_topic_index(const cdc_worker_t *w, const char *topic)
{
    size_t n = atomic_load_explicit(&w->ntopics, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (strcmp(w->topics[i], topic) == 0)
            return (int)i;
    return -1;
}

/* Appends name (taken: malloc'd) to list, whose count is *count; the count is published
 * after the entry is written. Record thread. On failure name is freed. */
static cdc_err_t append(char **list, _Atomic size_t *count, char *name, const char *what,
                        cdc_error_t *e)
{
    size_t n = atomic_load_explicit(count, memory_order_relaxed);

    if (name == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (n == CDC_WORKER_MAX_TOPICS) {
        cdc_error_set(e, CDC_ERR_CONFIG, "%s: more than %d tables (\"%s\")", what,
                      CDC_WORKER_MAX_TOPICS, name);
        free(name);
        return CDC_ERR_CONFIG;
    }
    list[n] = name;
    atomic_store_explicit(count, n + 1, memory_order_release);
    return CDC_OK;
}

cdc_err_t cdc_worker_tables_open(cdc_worker_t *w, cdc_error_t *e)
{
    bool explicit_topics = w->cfg.topics && w->cfg.topics[0];
    const char *list = explicit_topics ? w->cfg.topics : w->cfg.tables;
    char *copy, *save = NULL;
    cdc_err_t rc = CDC_OK;

    snprintf(w->schema_topic, sizeof(w->schema_topic), "%s._schemas", w->cfg.topic_prefix);
    w->consumed = 0;
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
        rc = append(w->topics, &w->ntopics, name,
                    explicit_topics ? "option --topics" : "option --tables", e);
    }
    free(copy);
    /* until an Assign names the job's set: all of them (an older coordinator names none) */
    for (size_t t = 0; t < w->ntopics; t++)
        w->consumed |= (uint64_t)1 << t;
    return rc;
}

void cdc_worker_tables_close(cdc_worker_t *w)
{
    for (size_t i = 0; i < w->ntopics; i++)
        free(w->topics[i]);
    for (size_t i = 0; i < w->noffer; i++)
        free(w->offer[i]);
    atomic_store(&w->ntopics, 0);
    atomic_store(&w->noffer, 0);
}

cdc_err_t cdc_worker_take_tables(cdc_worker_t *w, const Cdc__Assign *a, cdc_error_t *e)
{
    uint64_t consumed = 0;

    if (a->n_tables == 0) {
        /* an older coordinator: --tables/--topics as before, a follower has nothing */
        w->consumed = 0;
        for (size_t t = 0; !w->follows_tables && t < w->ntopics; t++)
            w->consumed |= (uint64_t)1 << t;
        return CDC_OK;
    }
    for (size_t i = 0; i < a->n_tables; i++) {
        const char *topic = a->tables[i];
        int t = topic != NULL && topic[0] != '\0' ? cdc_worker_topic_index(w, topic) : -2;
        cdc_err_t rc;
        if (t == -2)
            continue;
        if (t < 0 && !w->follows_tables) {
            /* the coordinator refuses us then (our Register named our topics); were it not
             * to, our slots would miss the table: said loudly */
            if (a->refused == NULL || a->refused[0] == '\0')
                cdc_log_error("the job's tables include \"%s\", which this worker's --tables "
                              "and --topics lack: it does not consume it",
                              topic);
            continue;
        }
        if (t < 0) {
            if ((rc = append(w->topics, &w->ntopics, strdup(topic), "the job's tables", e)) !=
                CDC_OK)
                return rc;
            t = (int)w->ntopics - 1;
            cdc_log_info("consuming topic \"%s\" from now on: the job's tables include it (a "
                         "partition slot whose checkpoint has no offset of it reads it from "
                         "the beginning)",
                         topic);
        }
        consumed |= (uint64_t)1 << t;
    }
    w->consumed = consumed;
    return CDC_OK;
}

void cdc_worker_offer_refresh(cdc_worker_t *w, int64_t now)
{
    const char *registered[CDC_WORKER_MAX_TOPICS];
    size_t n;
    cdc_error_t e;

    if (!w->follows_tables || now < w->next_offer_ms)
        return;
    w->next_offer_ms = now + OFFER_REFRESH_MS;
    if (cdc_worker_schemas_poll(w, &e) != CDC_OK)
        cdc_log_debug("schema topic \"%s\": %s", w->schema_topic, e.msg);
    n = cdc_catalog_topics(w->catalog, registered, CDC_WORKER_MAX_TOPICS);
    for (size_t i = 0; i < n; i++) {
        bool known = false;
        for (size_t k = 0; k < w->noffer && !known; k++)
            known = strcmp(w->offer[k], registered[i]) == 0;
        if (known)
            continue;
        if (append(w->offer, &w->noffer, strdup(registered[i]), "the schema topic", &e) != CDC_OK) {
            cdc_log_warn("not offering \"%s\" to the job: %s", registered[i], e.msg);
            continue;
        }
        cdc_log_info("offering table topic \"%s\" to the job: its schema is registered on "
                     "\"%s\"",
                     registered[i], w->schema_topic);
    }
}

char **cdc_worker_register_topics(cdc_worker_t *w, size_t *n)
{
    if (w->follows_tables) {
        *n = atomic_load_explicit(&w->noffer, memory_order_acquire);
        return w->offer;
    }
    *n = atomic_load_explicit(&w->ntopics, memory_order_acquire);
    return w->topics;
}
