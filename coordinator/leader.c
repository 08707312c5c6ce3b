/*
 * Coordinator leader election over the etcd election helper (see leader.h).
 */
#include "coordinator/leader.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

#define CAMPAIGN_RETRY_MS 300

cdc_err_t cdc_leader_open(cdc_leader_t *l, cdc_etcd_t *etcd, const char *job, const char *value,
                          int64_t ttl_s, cdc_error_t *e)
{
    memset(l, 0, sizeof(*l));
    l->etcd = etcd;
    l->ttl_s = ttl_s < 1 ? 1 : ttl_s;
    snprintf(l->key, sizeof(l->key), "/cdc/%s/leader", job);
    return cdc_etcd_election_open(&l->el, etcd, l->key, value, l->ttl_s, e);
}

void cdc_leader_close(cdc_leader_t *l, bool resign)
{
    cdc_error_t e;

    if (l->el == NULL)
        return;
    if (resign && l->leading)
        cdc_etcd_election_resign(l->el, &e);
    cdc_etcd_election_close(l->el);
    l->el = NULL;
    l->leading = false;
}

void cdc_leader_step_down(cdc_leader_t *l, const char *reason)
{
    cdc_error_t e;

    if (!l->leading)
        return;
    cdc_log_warn("stepping down as leader of \"%s\" (term %" PRId64 "): %s", l->key, l->term,
                 reason);
    l->leading = false;
    l->term = 0;
    /* revoking makes room for a standby at once; harmless if the lease is gone */
    cdc_etcd_election_resign(l->el, &e);
}

cdc_leader_event_t cdc_leader_tick(cdc_leader_t *l, int64_t now_ms)
{
    cdc_error_t e;
    cdc_err_t rc;

    if (!l->leading) {
        bool won = false;
        int64_t term = 0;
        if (now_ms < l->next_try_ms)
            return CDC_LEADER_NONE;
        l->next_try_ms = now_ms + CAMPAIGN_RETRY_MS;
        cdc_error_clear(&e);
        rc = cdc_etcd_election_try(l->el, &won, &term, &e);
        if (rc != CDC_OK) {
            snprintf(l->last_error, sizeof(l->last_error), "%s", e.msg);
            return CDC_LEADER_NONE;
        }
        l->last_error[0] = '\0';
        if (!won)
            return CDC_LEADER_NONE;
        l->leading = true;
        l->term = term;
        l->last_renewed_ms = now_ms;
        l->next_renew_ms = now_ms + l->ttl_s * 1000 / 3;
        return CDC_LEADER_ELECTED;
    }
    if (now_ms < l->next_renew_ms)
        return CDC_LEADER_NONE;
    cdc_error_clear(&e);
    rc = cdc_etcd_election_keepalive(l->el, &e);
    if (rc == CDC_OK) {
        l->last_renewed_ms = now_ms;
        l->next_renew_ms = now_ms + l->ttl_s * 1000 / 3;
        l->last_error[0] = '\0';
        return CDC_LEADER_NONE;
    }
    snprintf(l->last_error, sizeof(l->last_error), "%s", e.msg);
    if (rc == CDC_ERR_FENCED || now_ms - l->last_renewed_ms >= l->ttl_s * 1000) {
        cdc_leader_step_down(l, rc == CDC_ERR_FENCED ? e.msg : "lease not renewed for a whole TTL");
        return CDC_LEADER_LOST;
    }
    l->next_renew_ms = now_ms + 250; /* etcd unreachable: retry soon */
    return CDC_LEADER_NONE;
}
