/*
 * Coordinator leader election over the etcd election helper (see leader.h), with the
 * lease renewed on a thread of its own while this process leads.
 */
#include "coordinator/leader.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/cluster.h"
#include "common/log.h"

#define CAMPAIGN_RETRY_MS 300
#define RENEW_RETRY_MS 250

cdc_err_t cdc_leader_open(cdc_leader_t *l, cdc_etcd_t *etcd, const char *endpoints,
                          const cdc_etcd_security_t *sec, int timeout_ms, const char *job,
                          const char *value, int64_t ttl_s, cdc_error_t *e)
{
    cdc_err_t rc;

    memset(l, 0, sizeof(*l));
    l->etcd = etcd;
    l->ttl_s = ttl_s < 1 ? 1 : ttl_s;
    pthread_mutex_init(&l->renew_mu, NULL);
    cdc_cluster_key(l->key, sizeof(l->key), job, "leader");
    if ((rc = cdc_etcd_open_secure(&l->renew_etcd, endpoints, sec, timeout_ms, e)) != CDC_OK)
        return rc;
    return cdc_etcd_election_open(&l->el, etcd, l->key, value, l->ttl_s, e);
}

static void set_renew_error(cdc_leader_t *l, const char *msg)
{
    pthread_mutex_lock(&l->renew_mu);
    snprintf(l->renew_error, sizeof(l->renew_error), "%s", msg);
    pthread_mutex_unlock(&l->renew_mu);
}

/* One renewal: keep the lease alive and check that the key is still ours. */
static cdc_err_t renew_once(cdc_leader_t *l, cdc_error_t *e)
{
    cdc_etcd_kv_t kv;
    cdc_err_t rc = cdc_etcd_lease_keepalive(l->renew_etcd, l->renew_lease, NULL, e);

    if (rc == CDC_ERR_FENCED)
        return cdc_error_prefix(e, "lost leadership of \"%s\" (term %" PRId64 ")", l->key, l->term);
    if (rc != CDC_OK)
        return rc;
    memset(&kv, 0, sizeof(kv));
    rc = cdc_etcd_get(l->renew_etcd, l->key, &kv, NULL, e);
    if (rc == CDC_ERR_NOT_FOUND)
        return cdc_error_set(e, CDC_ERR_FENCED,
                             "lost leadership of \"%s\" (term %" PRId64 "): the key is gone",
                             l->key, l->term);
    if (rc != CDC_OK)
        return rc;
    if (kv.lease != l->renew_lease || kv.create_revision != l->term)
        rc = cdc_error_set(e, CDC_ERR_FENCED,
                           "lost leadership of \"%s\" (term %" PRId64 "): the key was replaced",
                           l->key, l->term);
    cdc_etcd_kv_clear(&kv);
    return rc;
}

/* The renewal thread: renews every ttl/3 (at once when it starts), reports a loss. */
static void *renew_main(void *arg)
{
    cdc_leader_t *l = arg;
    int64_t period = l->ttl_s * 1000 / 3, next = cdc_clock_mono_ms();

    while (!atomic_load(&l->renew_stop)) {
        int64_t now = cdc_clock_mono_ms();
        cdc_error_t e;
        cdc_err_t rc;

        if (now < next) {
            int64_t wait = next - now < 50 ? next - now : 50;
            struct timespec ts = {0, (long)wait * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        cdc_error_clear(&e);
        rc = renew_once(l, &e);
        now = cdc_clock_mono_ms();
        if (rc == CDC_OK) {
            atomic_store(&l->renewed_ms, now);
            set_renew_error(l, "");
            next = now + period;
            continue;
        }
        if (rc == CDC_ERR_FENCED) {
            set_renew_error(l, e.msg);
            atomic_store(&l->renew_lost, true);
            break;
        }
        if (now - atomic_load(&l->renewed_ms) >= l->ttl_s * 1000) {
            char msg[256];
            snprintf(msg, sizeof(msg), "lease not renewed for a whole TTL (%" PRId64 " s): %s",
                     l->ttl_s, e.msg);
            set_renew_error(l, msg);
            atomic_store(&l->renew_lost, true);
            break;
        }
        set_renew_error(l, e.msg); /* etcd unreachable: retry soon */
        next = now + RENEW_RETRY_MS;
    }
    return NULL;
}

static bool start_renewer(cdc_leader_t *l, int64_t now_ms)
{
    l->renew_lease = cdc_etcd_election_lease(l->el);
    atomic_store(&l->renew_stop, false);
    atomic_store(&l->renew_lost, false);
    atomic_store(&l->renewed_ms, now_ms);
    set_renew_error(l, "");
    l->renewer_running = pthread_create(&l->renewer, NULL, renew_main, l) == 0;
    return l->renewer_running;
}

static void stop_renewer(cdc_leader_t *l)
{
    if (!l->renewer_running)
        return;
    atomic_store(&l->renew_stop, true);
    pthread_join(l->renewer, NULL);
    l->renewer_running = false;
}

void cdc_leader_close(cdc_leader_t *l, bool resign)
{
    cdc_error_t e;

    if (l->key[0] == '\0')
        return; /* never opened */
    stop_renewer(l);
    if (l->el != NULL) {
        if (resign && l->leading)
            cdc_etcd_election_resign(l->el, &e);
        cdc_etcd_election_close(l->el);
        l->el = NULL;
    }
    cdc_etcd_close(l->renew_etcd);
    l->renew_etcd = NULL;
    l->leading = false;
    pthread_mutex_destroy(&l->renew_mu);
    l->key[0] = '\0';
}

void cdc_leader_step_down(cdc_leader_t *l, const char *reason)
{
    cdc_error_t e;

    if (!l->leading)
        return;
    cdc_log_warn("stepping down as leader of \"%s\" (term %" PRId64 "): %s", l->key, l->term,
                 reason);
    stop_renewer(l);
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
        if (!start_renewer(l, now_ms)) {
            cdc_leader_step_down(l, "could not start the lease renewal thread");
            return CDC_LEADER_NONE;
        }
        return CDC_LEADER_ELECTED;
    }
    /* the thread reports a loss; a thread stuck in a call is caught by the clock */
    if (atomic_load(&l->renew_lost) || now_ms - atomic_load(&l->renewed_ms) >= l->ttl_s * 1000) {
        char reason[256];
        pthread_mutex_lock(&l->renew_mu);
        if (atomic_load(&l->renew_lost))
            snprintf(reason, sizeof(reason), "%s", l->renew_error);
        else
            snprintf(reason, sizeof(reason), "lease not renewed for a whole TTL (%s)",
                     l->renew_error[0] ? l->renew_error : "the renewal did not answer");
        pthread_mutex_unlock(&l->renew_mu);
        snprintf(l->last_error, sizeof(l->last_error), "%s", reason);
        cdc_leader_step_down(l, reason);
        return CDC_LEADER_LOST;
    }
    return CDC_LEADER_NONE;
}
