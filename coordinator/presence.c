/* The job's coordinators in etcd: see presence.h. */
#include "coordinator/presence.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"

#define PRESENCE_READ_MS 2000           /* the list is at most this old */
#define PRESENCE_RETRY_MS 2000          /* after a failed etcd call */
#define PRESENCE_FORGET_MS (10 * 60000) /* a coordinator gone this long leaves the list */

void cdc_presence_init(cdc_presence_t *p, cdc_etcd_t *etcd, const char *job, const char *id,
                       const char *admin, int64_t ttl_s)
{
    memset(p, 0, sizeof(*p));
    p->etcd = etcd;
    p->ttl_s = ttl_s < 1 ? 1 : ttl_s;
    cdc_cluster_coordinator_key(p->key, sizeof(p->key), job, id);
    cdc_cluster_coordinator_key(p->prefix, sizeof(p->prefix), job, "");
    snprintf(p->rec.id, sizeof(p->rec.id), "%s", id);
    snprintf(p->rec.admin, sizeof(p->rec.admin), "%s", admin);
}

/* A failed call: logged when the calls start failing, retried after PRESENCE_RETRY_MS. */
static void failed(cdc_presence_t *p, const char *what, const cdc_error_t *e, int64_t now_ms)
{
    if (!p->failing)
        cdc_log_warn("coordinator record \"%s\": could not %s: %s (retrying every %d ms)", p->key,
                     what, e->msg, PRESENCE_RETRY_MS);
    p->failing = true;
    p->retry_ms = now_ms + PRESENCE_RETRY_MS;
}

/* Writes our record on our lease (granted first when there is none, and again when the
 * one we had expired meanwhile). */
static cdc_err_t write_record(cdc_presence_t *p, cdc_error_t *e)
{
    char *value = cdc_coordinator_record_json(&p->rec);
    cdc_err_t rc = CDC_ERR_FENCED;

    if (value == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (int attempt = 0; attempt < 2 && rc == CDC_ERR_FENCED; attempt++) {
        if (p->lease == 0 && (rc = cdc_etcd_lease_grant(p->etcd, p->ttl_s, &p->lease, e)) != CDC_OK)
            break;
        rc = cdc_etcd_put(p->etcd, p->key, value, strlen(value), p->lease, NULL, e);
        if (rc == CDC_ERR_FENCED)
            p->lease = 0;
    }
    free(value);
    return rc;
}

void cdc_presence_tick(cdc_presence_t *p, bool leading, int64_t term, int64_t now_ms)
{
    const char *role = leading ? "leader" : "standby";
    cdc_error_t e;
    cdc_err_t rc;

    if (p->etcd == NULL || now_ms < p->retry_ms)
        return;
    if (strcmp(p->rec.role, role) != 0 || p->rec.term != (leading ? term : 0)) {
        snprintf(p->rec.role, sizeof(p->rec.role), "%s", role);
        p->rec.term = leading ? term : 0;
        p->rec.since_ms = cdc_clock_wall_ms();
        p->written = false;
    }
    if (p->written && now_ms >= p->next_keepalive_ms) {
        cdc_error_clear(&e);
        rc = cdc_etcd_lease_keepalive(p->etcd, p->lease, NULL, &e);
        if (rc == CDC_ERR_FENCED) { /* expired (a long stall): the record is gone, write it */
            cdc_log_info("coordinator record \"%s\": its lease expired; writing it again", p->key);
            p->lease = 0;
            p->written = false;
        } else if (rc != CDC_OK) {
            failed(p, "renew its lease", &e, now_ms);
            return;
        } else {
            p->next_keepalive_ms = now_ms + p->ttl_s * 1000 / 3;
        }
    }
    if (!p->written) {
        cdc_error_clear(&e);
        if (write_record(p, &e) != CDC_OK) {
            failed(p, "write it", &e, now_ms);
            return;
        }
        p->written = true;
        p->next_keepalive_ms = now_ms + p->ttl_s * 1000 / 3;
        p->next_read_ms = now_ms; /* show the change at once */
    }
    if (now_ms >= p->next_read_ms) {
        cdc_etcd_kvs_t kvs;
        memset(&kvs, 0, sizeof(kvs));
        cdc_error_clear(&e);
        if (cdc_etcd_range_prefix(p->etcd, p->prefix, 0, &kvs, &e) != CDC_OK) {
            failed(p, "read the coordinators", &e, now_ms);
            return;
        }
        cdc_presence_merge(p, &kvs, now_ms);
        cdc_etcd_kvs_clear(&kvs);
        p->next_read_ms = now_ms + PRESENCE_READ_MS;
    }
    if (p->failing)
        cdc_log_info("coordinator record \"%s\": etcd answers again", p->key);
    p->failing = false;
}

void cdc_presence_close(cdc_presence_t *p)
{
    cdc_error_t e;

    if (p->etcd != NULL && p->lease != 0)
        cdc_etcd_lease_revoke(p->etcd, p->lease, &e);
    p->lease = 0;
    p->written = false;
    free(p->list);
    p->list = NULL;
    p->n = 0;
    p->cap = 0;
}

static int by_id(const void *a, const void *b)
{
    return strcmp(((const cdc_presence_entry_t *)a)->rec.id,
                  ((const cdc_presence_entry_t *)b)->rec.id);
}

void cdc_presence_merge(cdc_presence_t *p, const cdc_etcd_kvs_t *kvs, int64_t now_ms)
{
    int kept = 0;

    for (int i = 0; i < p->n; i++)
        p->list[i].alive = false;
    for (size_t k = 0; k < kvs->count; k++) {
        cdc_coordinator_record_t r;
        cdc_error_t e;
        int i = 0;
        if (cdc_coordinator_record_parse(kvs->kvs[k].value, &r, &e) != CDC_OK || r.id[0] == '\0')
            continue;
        while (i < p->n && strcmp(p->list[i].rec.id, r.id) != 0)
            i++;
        if (i == p->n) {
            if (cdc_array_reserve(p->list, p->cap, (size_t)p->n + 1, 4) != CDC_OK) {
                cdc_log_error("coordinator \"%s\" left out of the coordinators' list: out of "
                              "memory",
                              r.id);
                continue;
            }
            p->n++;
        }
        p->list[i].rec = r;
        p->list[i].alive = true;
        p->list[i].seen_ms = now_ms;
    }
    for (int i = 0; i < p->n; i++)
        if (p->list[i].alive || now_ms - p->list[i].seen_ms < PRESENCE_FORGET_MS)
            p->list[kept++] = p->list[i];
    p->n = kept;
    qsort(p->list, (size_t)p->n, sizeof(p->list[0]), by_id);
}

const char *cdc_presence_role(const cdc_presence_entry_t *en, const char *leader_id)
{
    if (leader_id != NULL && leader_id[0] != '\0')
        return strcmp(en->rec.id, leader_id) == 0 ? "leader" : "standby";
    return strcmp(en->rec.role, "leader") == 0 ? "leader" : "standby";
}

int cdc_presence_ordered(const cdc_presence_t *p, const char *leader_id,
                         const cdc_presence_entry_t **out, int max)
{
    int n = 0;

    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->n && n < max; i++)
            if ((strcmp(cdc_presence_role(&p->list[i], leader_id), "leader") == 0) == (pass == 0))
                out[n++] = &p->list[i];
    return n;
}
