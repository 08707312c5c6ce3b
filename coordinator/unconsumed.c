/*
 * Unconsumed tables (see unconsumed.h): the entries are rebuilt at each look from the
 * offers, carrying over what the previous look knew of each topic.
 */
#include "coordinator/unconsumed.h"

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"

void cdc_unconsumed_free(cdc_unconsumed_t *u)
{
    for (size_t i = 0; i < u->n; i++)
        free(u->t[i].topic);
    free(u->t);
    memset(u, 0, sizeof(*u));
}

cdc_err_t cdc_unconsumed_look(cdc_unconsumed_t *u, const char *const *topics, size_t n,
                              int64_t now_ms)
{
    cdc_unconsumed_t next = {0};
    cdc_strmap_t old = {0}, seen = {0};
    cdc_err_t rc = CDC_OK;

    /* room for every offer up front: the entries never move while seen points at them */
    if (n > 0 && cdc_array_reserve(next.t, next.cap, n, 16) != CDC_OK)
        return CDC_ERR_NOMEM;
    for (size_t i = 0; i < u->n && rc == CDC_OK; i++)
        rc = cdc_strmap_put(&old, u->t[i].topic, &u->t[i]);
    for (size_t i = 0; i < n && rc == CDC_OK; i++) {
        cdc_unconsumed_topic_t *e = cdc_strmap_get(&seen, topics[i]);
        const cdc_unconsumed_topic_t *was;
        if (e != NULL) {
            e->offered++;
            continue;
        }
        e = &next.t[next.n];
        memset(e, 0, sizeof(*e));
        e->offered = 1;
        e->since_ms = now_ms;
        if ((was = cdc_strmap_get(&old, topics[i])) != NULL) {
            e->since_ms = was->since_ms;
            e->reported = was->reported;
        }
        if ((e->topic = strdup(topics[i])) == NULL) {
            rc = CDC_ERR_NOMEM;
            break;
        }
        next.n++;
        rc = cdc_strmap_put(&seen, e->topic, e);
    }
    cdc_strmap_free(&old);
    cdc_strmap_free(&seen);
    if (rc != CDC_OK) {
        cdc_unconsumed_free(&next);
        return rc; /* u as it was: the next look tries again */
    }
    cdc_unconsumed_free(u);
    *u = next;
    return CDC_OK;
}
