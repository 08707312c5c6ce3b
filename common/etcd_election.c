/*
 * Leader election on etcd (its API is in etcd.h, "leader election"): a campaign is a transaction
 * that creates the election key with this process's lease only when the key does not
 * exist, so the key's create_revision is the leader's term, strictly increasing across
 * leaders; a leader keeps its lease alive and fences its writes with a compare on that
 * term. Built only on the public client API of common/etcd.c (txn, leases, watch, get).
 */
#include "common/etcd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

struct cdc_etcd_election {
    cdc_etcd_t *client;
    char *key;
    char *value;
    int64_t ttl_s;
    int64_t lease;
    int64_t term;
    bool leader;
};

cdc_err_t cdc_etcd_election_open(cdc_etcd_election_t **out, cdc_etcd_t *c, const char *key,
                                 const char *value, int64_t ttl_s, cdc_error_t *e)
{
    cdc_etcd_election_t *el = calloc(1, sizeof(*el));
    if (el == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    el->client = c;
    el->key = strdup(key);
    el->value = strdup(value ? value : "");
    el->ttl_s = ttl_s > 0 ? ttl_s : 5;
    if (el->key == NULL || el->value == NULL) {
        cdc_etcd_election_close(el);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    *out = el;
    return CDC_OK;
}

void cdc_etcd_election_close(cdc_etcd_election_t *el)
{
    if (el == NULL)
        return;
    free(el->key);
    free(el->value);
    free(el);
}

static cdc_err_t try_once(cdc_etcd_election_t *el, bool *won, int64_t *term, int64_t *revision,
                          cdc_error_t *e)
{
    cdc_err_t err;
    cdc_etcd_txn_result_t r;

    /* a standby's lease is not renewed while it waits: refresh it first, so a win
     * starts with a full TTL instead of a lease about to run out */
    if (!el->leader && el->lease != 0) {
        err = cdc_etcd_lease_keepalive(el->client, el->lease, NULL, e);
        if (err == CDC_ERR_FENCED)
            el->lease = 0;
        else if (err != CDC_OK)
            return err;
    }
    if (el->lease == 0 &&
        (err = cdc_etcd_lease_grant(el->client, el->ttl_s, &el->lease, e)) != CDC_OK)
        return err;
    cdc_etcd_cmp_t cmp = {.key = el->key,
                          .target = CDC_ETCD_CMP_CREATE_REVISION,
                          .result = CDC_ETCD_EQUAL,
                          .number = 0};
    cdc_etcd_op_t put = {.type = CDC_ETCD_OP_PUT,
                         .key = el->key,
                         .value = el->value,
                         .value_len = strlen(el->value),
                         .lease = el->lease};
    cdc_etcd_op_t get = {.type = CDC_ETCD_OP_RANGE, .key = el->key};
    err = cdc_etcd_txn(el->client, &cmp, 1, &put, 1, &get, 1, &r, e);
    if (err != CDC_OK)
        return err;
    *revision = r.revision;
    if (r.succeeded) {
        el->leader = true;
        el->term = r.revision; /* the put's revision is the key's create_revision */
    } else if (r.count == 1 && r.responses[0].count == 1 &&
               r.responses[0].kvs[0].lease == el->lease) {
        el->leader = true; /* already ours */
        el->term = r.responses[0].kvs[0].create_revision;
    } else {
        el->leader = false;
        el->term = 0;
        if (term != NULL && r.count == 1 && r.responses[0].count == 1)
            *term = r.responses[0].kvs[0].create_revision;
    }
    cdc_etcd_txn_result_clear(&r);
    *won = el->leader;
    if (el->leader && term != NULL)
        *term = el->term;
    return CDC_OK;
}

cdc_err_t cdc_etcd_election_try(cdc_etcd_election_t *el, bool *won, int64_t *term, cdc_error_t *e)
{
    int64_t revision = 0;
    cdc_err_t err = try_once(el, won, term, &revision, e);
    if (err == CDC_ERR_FENCED || err == CDC_ERR_NOT_FOUND) {
        /* our lease expired between grant and put: start over with a fresh one */
        el->lease = 0;
        cdc_error_clear(e);
        err = try_once(el, won, term, &revision, e);
    }
    if (err != CDC_OK)
        cdc_error_prefix(e, "could not campaign for \"%s\"", el->key);
    return err;
}

cdc_err_t cdc_etcd_election_campaign(cdc_etcd_election_t *el, int timeout_ms, int64_t *term,
                                     cdc_error_t *e)
{
    int64_t deadline = cdc_clock_mono_ms() + timeout_ms;
    for (;;) {
        bool won = false;
        int64_t revision = 0, seen = 0;
        cdc_err_t err = try_once(el, &won, &seen, &revision, e);
        if (err == CDC_ERR_FENCED || err == CDC_ERR_NOT_FOUND) {
            el->lease = 0;
            continue;
        }
        if (err != CDC_OK)
            return cdc_error_prefix(e, "could not campaign for \"%s\"", el->key);
        if (won) {
            if (term != NULL)
                *term = el->term;
            return CDC_OK;
        }
        int64_t left = deadline - cdc_clock_mono_ms();
        if (left <= 0)
            return cdc_error_set(e, CDC_ERR_TIMEOUT,
                                 "still not leader of \"%s\" after %d ms (term %lld holds it)",
                                 el->key, timeout_ms, (long long)seen);
        int wait = left < el->ttl_s * 1000 / 3 ? (int)left : (int)(el->ttl_s * 1000 / 3);
        cdc_etcd_events_t ev;
        err = cdc_etcd_watch_wait(el->client, el->key, false, revision + 1, wait > 0 ? wait : 1,
                                  &ev, e);
        if (err == CDC_OK)
            cdc_etcd_events_clear(&ev);
        else if (err != CDC_ERR_STALE)
            return cdc_error_prefix(e, "could not campaign for \"%s\"", el->key);
    }
}

cdc_err_t cdc_etcd_election_keepalive(cdc_etcd_election_t *el, cdc_error_t *e)
{
    cdc_etcd_kv_t kv;
    cdc_err_t err;
    if (!el->leader)
        return cdc_error_set(e, CDC_ERR_FENCED, "not leader of \"%s\"", el->key);
    err = cdc_etcd_lease_keepalive(el->client, el->lease, NULL, e);
    if (err == CDC_ERR_FENCED) {
        el->leader = false;
        el->lease = 0;
        return cdc_error_prefix(e, "lost leadership of \"%s\" (term %lld)", el->key,
                                (long long)el->term);
    }
    if (err != CDC_OK)
        return err;
    err = cdc_etcd_get(el->client, el->key, &kv, NULL, e);
    if (err == CDC_ERR_NOT_FOUND ||
        (err == CDC_OK && (kv.lease != el->lease || kv.create_revision != el->term))) {
        if (err == CDC_OK)
            cdc_etcd_kv_clear(&kv);
        el->leader = false;
        return cdc_error_set(e, CDC_ERR_FENCED,
                             "lost leadership of \"%s\" (term %lld): the key was replaced", el->key,
                             (long long)el->term);
    }
    if (err != CDC_OK)
        return err;
    cdc_etcd_kv_clear(&kv);
    return CDC_OK;
}

cdc_err_t cdc_etcd_election_resign(cdc_etcd_election_t *el, cdc_error_t *e)
{
    cdc_err_t err = CDC_OK;
    if (el->lease != 0)
        err = cdc_etcd_lease_revoke(el->client, el->lease, e);
    if (err == CDC_OK) {
        el->lease = 0;
        el->leader = false;
        el->term = 0;
    }
    return err;
}

bool cdc_etcd_election_is_leader(const cdc_etcd_election_t *el)
{
    return el->leader;
}

int64_t cdc_etcd_election_term(const cdc_etcd_election_t *el)
{
    return el->leader ? el->term : 0;
}

int64_t cdc_etcd_election_lease(const cdc_etcd_election_t *el)
{
    return el->lease;
}

void cdc_etcd_election_fence(const cdc_etcd_election_t *el, cdc_etcd_cmp_t *cmp)
{
    memset(cmp, 0, sizeof(*cmp));
    cmp->key = el->key;
    cmp->target = CDC_ETCD_CMP_CREATE_REVISION;
    cmp->result = CDC_ETCD_EQUAL;
    /* Not leading (never won, resigned): no key has create_revision -1, so the fence never
     * holds. (The term of a resigned election is 0, which matches an absent key.) */
    cmp->number = el->leader ? el->term : -1;
}

cdc_err_t cdc_etcd_leader(cdc_etcd_t *c, const char *key, char **value, int64_t *term,
                          cdc_error_t *e)
{
    cdc_etcd_kv_t kv;
    cdc_err_t err = cdc_etcd_get(c, key, &kv, NULL, e);
    if (err == CDC_ERR_NOT_FOUND)
        return cdc_error_set(e, CDC_ERR_NOT_FOUND, "no leader holds \"%s\"", key);
    if (err != CDC_OK)
        return err;
    if (term != NULL)
        *term = kv.create_revision;
    if (value != NULL) {
        *value = kv.value;
        kv.value = NULL;
    }
    cdc_etcd_kv_clear(&kv);
    return CDC_OK;
}
