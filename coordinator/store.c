/*
 * The coordinator's etcd keys (see store.h). Numbers are stored as decimal text so an
 * operator can read them with etcdctl.
 */
#include "coordinator/store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cluster.h"

void cdc_store_init(cdc_store_t *st, cdc_etcd_t *etcd, cdc_etcd_election_t *el, const char *job)
{
    memset(st, 0, sizeof(*st));
    st->etcd = etcd;
    st->el = el;
    cdc_cluster_key(st->prefix, sizeof(st->prefix), job, "");
    snprintf(st->job, sizeof(st->job), "%s", job);
}

void cdc_store_key(const cdc_store_t *st, const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s", st->prefix, name);
}

static void checkpoint_key(const cdc_store_t *st, uint64_t epoch, char *buf, size_t size)
{
    cdc_cluster_checkpoint_key(buf, size, st->job, epoch);
}

/* The job's key name (its full name into key): kv->value NULL when it does not exist. */
static cdc_err_t get_optional(cdc_store_t *st, const char *name, char *key, size_t keysz,
                              cdc_etcd_kv_t *kv, cdc_error_t *e)
{
    cdc_err_t rc;

    cdc_store_key(st, name, key, keysz);
    memset(kv, 0, sizeof(*kv));
    rc = cdc_etcd_get(st->etcd, key, kv, NULL, e);
    if (rc == CDC_ERR_NOT_FOUND) {
        cdc_error_clear(e);
        memset(kv, 0, sizeof(*kv));
        return CDC_OK;
    }
    if (rc == CDC_OK && kv->value == NULL) /* no value: as good as absent */
        cdc_etcd_kv_clear(kv);
    return rc;
}

static cdc_err_t get_number(cdc_store_t *st, const char *name, uint64_t *out, int64_t *mod_rev,
                            cdc_error_t *e)
{
    char key[512];
    cdc_etcd_kv_t kv;
    cdc_err_t rc;

    *out = 0;
    if (mod_rev)
        *mod_rev = 0;
    if ((rc = get_optional(st, name, key, sizeof(key), &kv, e)) != CDC_OK || kv.value == NULL)
        return rc;
    *out = strtoull(kv.value, NULL, 10);
    if (mod_rev)
        *mod_rev = kv.mod_revision;
    cdc_etcd_kv_clear(&kv);
    return CDC_OK;
}

cdc_err_t cdc_store_read_heads(cdc_store_t *st, uint64_t *latest, uint64_t *committed,
                               cdc_error_t *e)
{
    cdc_err_t rc = get_number(st, "latest", latest, NULL, e);

    if (rc != CDC_OK)
        return rc;
    return get_number(st, "committed", committed, NULL, e);
}

/* Runs a txn of puts under the leader fence plus optional extra compares. */
static cdc_err_t fenced_txn(cdc_store_t *st, const cdc_etcd_cmp_t *extra, size_t nextra,
                            const cdc_etcd_op_t *ops, size_t nops, bool *succeeded, cdc_error_t *e)
{
    cdc_etcd_cmp_t cmps[4];
    size_t n = 0;
    cdc_etcd_txn_result_t res;
    cdc_err_t rc;

    if (st->el != NULL)
        cdc_etcd_election_fence(st->el, &cmps[n++]);
    for (size_t i = 0; i < nextra && n < 4; i++)
        cmps[n++] = extra[i];
    memset(&res, 0, sizeof(res));
    rc = cdc_etcd_txn(st->etcd, cmps, n, ops, nops, NULL, 0, &res, e);
    if (rc != CDC_OK)
        return rc;
    *succeeded = res.succeeded;
    cdc_etcd_txn_result_clear(&res);
    return CDC_OK;
}

cdc_err_t cdc_store_reserve_epochs(cdc_store_t *st, uint64_t min_next, uint64_t block,
                                   uint64_t *from, uint64_t *limit, cdc_error_t *e)
{
    char key[512], val[32];
    cdc_err_t rc;

    cdc_store_key(st, "epoch-counter", key, sizeof(key));
    for (int attempt = 0; attempt < 5; attempt++) {
        uint64_t counter;
        int64_t mod_rev;
        bool ok;
        if ((rc = get_number(st, "epoch-counter", &counter, &mod_rev, e)) != CDC_OK)
            return rc;
        uint64_t start = counter > min_next ? counter : min_next;
        if (start == 0)
            start = 1;
        snprintf(val, sizeof(val), "%" PRIu64, start + block);
        cdc_etcd_cmp_t cmp = {.key = key,
                              .target = CDC_ETCD_CMP_MOD_REVISION,
                              .result = CDC_ETCD_EQUAL,
                              .number = mod_rev};
        cdc_etcd_op_t op = {
            .type = CDC_ETCD_OP_PUT, .key = key, .value = val, .value_len = strlen(val)};
        if ((rc = fenced_txn(st, &cmp, 1, &op, 1, &ok, e)) != CDC_OK)
            return rc;
        if (ok) {
            *from = start;
            *limit = start + block;
            return CDC_OK;
        }
        /* either someone moved the counter (retry) or we lost the fence */
        if (st->el != NULL && !cdc_etcd_election_is_leader(st->el))
            break;
    }
    return cdc_error_set(e, CDC_ERR_FENCED,
                         "could not reserve epoch ids in \"%s\": leadership lost or key contended",
                         key);
}

cdc_err_t cdc_store_put_checkpoint(cdc_store_t *st, uint64_t epoch, const char *record_json,
                                   cdc_error_t *e)
{
    char ckey[512], lkey[512], val[32];
    bool ok;
    cdc_err_t rc;

    checkpoint_key(st, epoch, ckey, sizeof(ckey));
    cdc_store_key(st, "latest", lkey, sizeof(lkey));
    snprintf(val, sizeof(val), "%" PRIu64, epoch);
    cdc_etcd_op_t ops[2] = {
        {.type = CDC_ETCD_OP_PUT,
         .key = ckey,
         .value = record_json,
         .value_len = strlen(record_json)},
        {.type = CDC_ETCD_OP_PUT, .key = lkey, .value = val, .value_len = strlen(val)},
    };
    if ((rc = fenced_txn(st, NULL, 0, ops, 2, &ok, e)) != CDC_OK)
        return rc;
    if (!ok)
        return cdc_error_set(e, CDC_ERR_FENCED,
                             "checkpoint %" PRIu64 " not recorded: this coordinator is no longer "
                             "the leader",
                             epoch);
    return CDC_OK;
}

cdc_err_t cdc_store_get_checkpoint(cdc_store_t *st, uint64_t epoch, cdc_checkpoint_t **out,
                                   cdc_error_t *e)
{
    char key[512];
    cdc_etcd_kv_t kv;
    cdc_err_t rc;

    checkpoint_key(st, epoch, key, sizeof(key));
    memset(&kv, 0, sizeof(kv));
    if ((rc = cdc_etcd_get(st->etcd, key, &kv, NULL, e)) != CDC_OK)
        return rc;
    rc = cdc_checkpoint_from_json(kv.value, kv.value_len, out, e);
    if (rc != CDC_OK)
        cdc_error_prefix(e, "etcd key \"%s\"", key);
    cdc_etcd_kv_clear(&kv);
    return rc;
}

cdc_err_t cdc_store_list_checkpoints(cdc_store_t *st, uint64_t lo, uint64_t hi,
                                     cdc_checkpoint_t ***out, size_t *n, cdc_error_t *e)
{
    char prefix[512];
    cdc_etcd_kvs_t kvs;
    cdc_checkpoint_t **recs = NULL;
    size_t count = 0;
    cdc_err_t rc;

    *out = NULL;
    *n = 0;
    snprintf(prefix, sizeof(prefix), "%scheckpoints/", st->prefix);
    memset(&kvs, 0, sizeof(kvs));
    if ((rc = cdc_etcd_range_prefix(st->etcd, prefix, 0, &kvs, e)) != CDC_OK)
        return rc;
    recs = calloc(kvs.count + 1, sizeof(*recs));
    if (recs == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < kvs.count; i++) {
        uint64_t ep = strtoull(kvs.kvs[i].key + strlen(prefix), NULL, 10);
        if (ep < lo || ep > hi)
            continue;
        rc = cdc_checkpoint_from_json(kvs.kvs[i].value, kvs.kvs[i].value_len, &recs[count], e);
        if (rc != CDC_OK) {
            cdc_error_prefix(e, "etcd key \"%s\"", kvs.kvs[i].key);
            goto cleanup;
        }
        count++;
    }
    *out = recs;
    *n = count;
    recs = NULL;
cleanup:
    if (recs != NULL) {
        for (size_t i = 0; i < count; i++)
            cdc_checkpoint_free(recs[i]);
        free(recs);
    }
    cdc_etcd_kvs_clear(&kvs);
    return rc;
}

cdc_err_t cdc_store_oldest_checkpoint(cdc_store_t *st, cdc_checkpoint_t **out, cdc_error_t *e)
{
    char prefix[512];
    cdc_etcd_kvs_t kvs;
    cdc_err_t rc;

    *out = NULL;
    snprintf(prefix, sizeof(prefix), "%scheckpoints/", st->prefix);
    memset(&kvs, 0, sizeof(kvs));
    if ((rc = cdc_etcd_range_prefix(st->etcd, prefix, 1, &kvs, e)) != CDC_OK)
        return rc;
    if (kvs.count > 0) {
        rc = cdc_checkpoint_from_json(kvs.kvs[0].value, kvs.kvs[0].value_len, out, e);
        if (rc != CDC_OK)
            cdc_error_prefix(e, "etcd key \"%s\"", kvs.kvs[0].key);
    }
    cdc_etcd_kvs_clear(&kvs);
    return rc;
}

cdc_err_t cdc_store_put_committed(cdc_store_t *st, uint64_t epoch, cdc_error_t *e)
{
    char key[512], val[32];
    bool ok;
    cdc_err_t rc;

    cdc_store_key(st, "committed", key, sizeof(key));
    snprintf(val, sizeof(val), "%" PRIu64, epoch);
    cdc_etcd_op_t op = {
        .type = CDC_ETCD_OP_PUT, .key = key, .value = val, .value_len = strlen(val)};
    if ((rc = fenced_txn(st, NULL, 0, &op, 1, &ok, e)) != CDC_OK)
        return rc;
    if (!ok)
        return cdc_error_set(e, CDC_ERR_FENCED,
                             "committed epoch %" PRIu64 " not recorded: no longer the leader",
                             epoch);
    return CDC_OK;
}

cdc_err_t cdc_store_prune(cdc_store_t *st, uint64_t keep_from, cdc_error_t *e)
{
    char prefix[512], end[512];
    bool ok;

    /* One fenced range delete: the keys' zero-padded epochs sort like the numbers. (It
     * used to read up to 64 whole records back from etcd first, which cost the
     * coordinator more CPU than a commit.) */
    snprintf(prefix, sizeof(prefix), "%scheckpoints/", st->prefix);
    checkpoint_key(st, keep_from, end, sizeof(end));
    cdc_etcd_op_t op = {.type = CDC_ETCD_OP_DELETE, .key = prefix, .range_end = end};
    cdc_err_t rc = fenced_txn(st, NULL, 0, &op, 1, &ok, e);
    if (rc == CDC_OK && !ok)
        return cdc_error_set(
            e, CDC_ERR_FENCED,
            "checkpoint records below %" PRIu64 " not pruned: no longer the leader", keep_from);
    return rc;
}

cdc_err_t cdc_store_get_tables(cdc_store_t *st, cdc_tableset_t *s, bool *found, cdc_error_t *e)
{
    char key[512];
    cdc_etcd_kv_t kv;
    cdc_err_t rc;

    *found = false;
    cdc_tableset_clear(s);
    if ((rc = get_optional(st, "tables", key, sizeof(key), &kv, e)) != CDC_OK || kv.value == NULL)
        return rc;
    rc = cdc_tableset_parse(s, kv.value, kv.value_len, e);
    if (rc != CDC_OK)
        cdc_error_prefix(e, "etcd key \"%s\"", key);
    else
        *found = true;
    cdc_etcd_kv_clear(&kv);
    return rc;
}

cdc_err_t cdc_store_put_tables(cdc_store_t *st, const cdc_tableset_t *s, cdc_error_t *e)
{
    char key[512], *value = cdc_tableset_json(s);
    bool ok;
    cdc_err_t rc;

    if (value == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cdc_store_key(st, "tables", key, sizeof(key));
    cdc_etcd_op_t op = {
        .type = CDC_ETCD_OP_PUT, .key = key, .value = value, .value_len = strlen(value)};
    rc = fenced_txn(st, NULL, 0, &op, 1, &ok, e);
    free(value);
    if (rc == CDC_OK && !ok)
        return cdc_error_set(e, CDC_ERR_FENCED, "table set not recorded: no longer the leader");
    return rc;
}

cdc_err_t cdc_store_put_leader(cdc_store_t *st, const char *value, int64_t lease, cdc_error_t *e)
{
    char key[512];
    bool ok;
    cdc_err_t rc;

    cdc_store_key(st, "leader", key, sizeof(key));
    cdc_etcd_op_t op = {.type = CDC_ETCD_OP_PUT,
                        .key = key,
                        .value = value,
                        .value_len = strlen(value),
                        .lease = lease};
    if ((rc = fenced_txn(st, NULL, 0, &op, 1, &ok, e)) != CDC_OK)
        return rc;
    if (!ok)
        return cdc_error_set(e, CDC_ERR_FENCED, "leader key \"%s\" is no longer ours", key);
    return CDC_OK;
}
