/*
 * etcd v3 client over etcd's gRPC JSON gateway (etcd 3.4, POST /v3/...), built on
 * common/httpc.h (libcurl) and jansson; the only module that speaks to etcd (etcd.c: KV,
 * transactions, leases, watch; etcd_election.c: leader election). Callers see project types:
 * keys and values as byte strings (NUL-terminated for convenience), revisions and lease
 * ids as int64_t. Several endpoints may be given; a request that cannot reach one
 * endpoint moves on to the next (and remembers the one that worked).
 *
 * Errors: every transport failure (connection refused, timeout, HTTP 5xx, a gRPC error
 * in the JSON body, undecodable JSON) becomes a retriable CDC_ERR_UNAVAILABLE or
 * CDC_ERR_TIMEOUT with a message naming the endpoint and the request; never a crash.
 * A missing key is CDC_ERR_NOT_FOUND (not retriable); an expired lease or a lost
 * leadership is CDC_ERR_FENCED. A user and password etcd refuses is CDC_ERR_CONFIG.
 *
 * Security (optional, cdc_etcd_open_secure()): https:// endpoints verified against a CA
 * file, a client certificate for members started with --client-cert-auth, and etcd's
 * authentication: the client gets a token from /v3/auth/authenticate, sends it as the
 * Authorization header, and authenticates again when a member says the token is invalid
 * (expired, or issued by another member).
 *
 * Threads: a cdc_etcd_t is NOT thread-safe; use one client per thread (they are cheap).
 * An election object uses its client and shares its thread rule.
 */
#ifndef CDC_ETCD_H
#define CDC_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct cdc_etcd cdc_etcd_t;

/* One key-value with its metadata. key/value are heap buffers with a trailing NUL not
 * counted in the lengths; release with cdc_etcd_kv_clear(). */
typedef struct cdc_etcd_kv {
    char *key;
    size_t key_len;
    char *value;
    size_t value_len;
    int64_t create_revision;
    int64_t mod_revision;
    int64_t version;
    int64_t lease;
} cdc_etcd_kv_t;

/* A list of key-values (range result); release with cdc_etcd_kvs_clear(). */
typedef struct cdc_etcd_kvs {
    cdc_etcd_kv_t *kvs;
    size_t count;
    int64_t revision; /* store revision at the time of the read (header) */
    bool more;        /* a limit cut the result */
} cdc_etcd_kvs_t;

void cdc_etcd_kv_clear(cdc_etcd_kv_t *kv);
void cdc_etcd_kvs_clear(cdc_etcd_kvs_t *kvs);

/*
 * Creates a client. `endpoints` is a comma-separated list of base URLs
 * ("http://127.0.0.1:2379,http://127.0.0.1:22379"); timeout_ms bounds each HTTP request
 * (0 = default 2000). No connection is made yet. On success *out is owned by the caller
 * (cdc_etcd_close()).
 */
cdc_err_t cdc_etcd_open(cdc_etcd_t **out, const char *endpoints, int timeout_ms, cdc_error_t *e);

/* TLS files and etcd credentials of a client; every field may be NULL or "" (unused). */
typedef struct cdc_etcd_security {
    const char *ca_file;   /* PEM CAs of the members' certificates (default: the system's) */
    const char *cert_file; /* PEM client certificate (members with --client-cert-auth) */
    const char *key_file;  /* its PEM private key */
    const char *user;      /* etcd user (auth enabled); NULL = no authentication */
    const char *password;
} cdc_etcd_security_t;

/* cdc_etcd_open() with security settings (sec may be NULL = none; strings are copied).
 * CDC_ERR_CONFIG when a user has no password, or a key comes without its certificate. */
cdc_err_t cdc_etcd_open_secure(cdc_etcd_t **out, const char *endpoints,
                               const cdc_etcd_security_t *sec, int timeout_ms, cdc_error_t *e);
void cdc_etcd_close(cdc_etcd_t *c);
void cdc_etcd_set_timeout(cdc_etcd_t *c, int timeout_ms);

/* Reads one key. CDC_ERR_NOT_FOUND when absent. On CDC_OK *out is filled (caller
 * clears it); *revision (may be NULL) gets the store revision. */
cdc_err_t cdc_etcd_get(cdc_etcd_t *c, const char *key, cdc_etcd_kv_t *out, int64_t *revision,
                       cdc_error_t *e);

/* Reads every key starting with prefix, sorted by key, at most limit (0 = all). On
 * CDC_OK *out is filled (caller clears it), possibly with count 0. */
cdc_err_t cdc_etcd_range_prefix(cdc_etcd_t *c, const char *prefix, int64_t limit,
                                cdc_etcd_kvs_t *out, cdc_error_t *e);

/* Writes key = value (value_len bytes); lease 0 = none. *revision (may be NULL) gets the
 * revision of the write. */
cdc_err_t cdc_etcd_put(cdc_etcd_t *c, const char *key, const void *value, size_t value_len,
                       int64_t lease, int64_t *revision, cdc_error_t *e);

/* Deletes key (or every key under it when prefix is true). *deleted (may be NULL) gets
 * the count; deleting nothing is CDC_OK with 0. */
cdc_err_t cdc_etcd_delete(cdc_etcd_t *c, const char *key, bool prefix, int64_t *deleted,
                          cdc_error_t *e);

/* ---- transactions ----------------------------------------------------------------- */

typedef enum cdc_etcd_cmp_target {
    CDC_ETCD_CMP_VERSION,
    CDC_ETCD_CMP_CREATE_REVISION,
    CDC_ETCD_CMP_MOD_REVISION,
    CDC_ETCD_CMP_VALUE,
    CDC_ETCD_CMP_LEASE,
} cdc_etcd_cmp_target_t;

typedef enum cdc_etcd_cmp_result {
    CDC_ETCD_EQUAL,
    CDC_ETCD_GREATER,
    CDC_ETCD_LESS,
    CDC_ETCD_NOT_EQUAL,
} cdc_etcd_cmp_result_t;

/* key <target> <result> number (or value for CDC_ETCD_CMP_VALUE). A key that does not
 * exist has version, create_revision and mod_revision 0. */
typedef struct cdc_etcd_cmp {
    const char *key;
    cdc_etcd_cmp_target_t target;
    cdc_etcd_cmp_result_t result;
    int64_t number;
    const void *value;
    size_t value_len;
} cdc_etcd_cmp_t;

typedef enum cdc_etcd_op_type {
    CDC_ETCD_OP_PUT,
    CDC_ETCD_OP_DELETE,
    CDC_ETCD_OP_RANGE,
} cdc_etcd_op_type_t;

/* One operation of a transaction branch; prefix applies to DELETE and RANGE, and so does
 * range_end: when set, the op covers the keys in [key, range_end) (prefix is ignored). */
typedef struct cdc_etcd_op {
    cdc_etcd_op_type_t type;
    const char *key;
    const void *value;
    size_t value_len;
    int64_t lease;
    bool prefix;
    const char *range_end;
} cdc_etcd_op_t;

typedef struct cdc_etcd_txn_result {
    bool succeeded;            /* the compares held: the success branch ran */
    int64_t revision;          /* store revision after the txn */
    size_t count;              /* responses, one per op of the branch that ran */
    cdc_etcd_kvs_t *responses; /* RANGE: the kvs; PUT/DELETE: empty */
} cdc_etcd_txn_result_t;

/* Runs If(cmps) Then(success) Else(failure) atomically. A failed compare is CDC_OK with
 * succeeded = false. On CDC_OK *out is filled (caller frees with
 * cdc_etcd_txn_result_clear()). */
cdc_err_t cdc_etcd_txn(cdc_etcd_t *c, const cdc_etcd_cmp_t *cmps, size_t ncmps,
                       const cdc_etcd_op_t *success, size_t nsuccess, const cdc_etcd_op_t *failure,
                       size_t nfailure, cdc_etcd_txn_result_t *out, cdc_error_t *e);
void cdc_etcd_txn_result_clear(cdc_etcd_txn_result_t *r);

/* ---- leases ------------------------------------------------------------------------ */

/* Grants a lease of ttl_s seconds; *lease gets its id. */
cdc_err_t cdc_etcd_lease_grant(cdc_etcd_t *c, int64_t ttl_s, int64_t *lease, cdc_error_t *e);

/* One keep-alive round; *ttl_s (may be NULL) gets the renewed TTL. CDC_ERR_FENCED when
 * the lease has expired or was revoked. */
cdc_err_t cdc_etcd_lease_keepalive(cdc_etcd_t *c, int64_t lease, int64_t *ttl_s, cdc_error_t *e);

/* Revokes a lease (its keys are deleted). Revoking an unknown lease is CDC_OK. */
cdc_err_t cdc_etcd_lease_revoke(cdc_etcd_t *c, int64_t lease, cdc_error_t *e);

/* Remaining TTL in seconds; CDC_ERR_FENCED when the lease is gone. */
cdc_err_t cdc_etcd_lease_ttl(cdc_etcd_t *c, int64_t lease, int64_t *ttl_s, cdc_error_t *e);

/* ---- watch (simple blocking form) -------------------------------------------------- */

typedef enum cdc_etcd_event_type {
    CDC_ETCD_EVENT_PUT,
    CDC_ETCD_EVENT_DELETE,
} cdc_etcd_event_type_t;

typedef struct cdc_etcd_event {
    cdc_etcd_event_type_t type;
    cdc_etcd_kv_t kv; /* for DELETE only key and mod_revision are set */
} cdc_etcd_event_t;

typedef struct cdc_etcd_events {
    cdc_etcd_event_t *events;
    size_t count;
    int64_t revision; /* header revision of the response that carried the events */
} cdc_etcd_events_t;

void cdc_etcd_events_clear(cdc_etcd_events_t *ev);

/*
 * Waits up to timeout_ms for changes of key (or of every key under it when prefix is
 * true) at revisions >= from_revision (0 = only changes after the call starts). Returns
 * CDC_OK with the first batch of events, or CDC_OK with count 0 when the timeout passed
 * without changes. Resume with from_revision = last event's mod_revision + 1.
 * CDC_ERR_STALE when from_revision was compacted (re-read and restart). The caller
 * clears *out.
 */
cdc_err_t cdc_etcd_watch_wait(cdc_etcd_t *c, const char *key, bool prefix, int64_t from_revision,
                              int timeout_ms, cdc_etcd_events_t *out, cdc_error_t *e);

/* ---- leader election --------------------------------------------------------------- */

typedef struct cdc_etcd_election cdc_etcd_election_t;

/*
 * An election on `key` (e.g. "/cdc/<job>/leader") where this process offers `value`
 * (e.g. its NNG endpoint). The lease has ttl_s seconds. The election keeps a pointer
 * to c (which must outlive it); key and value are copied.
 */
cdc_err_t cdc_etcd_election_open(cdc_etcd_election_t **out, cdc_etcd_t *c, const char *key,
                                 const char *value, int64_t ttl_s, cdc_error_t *e);

/*
 * One campaign attempt, not blocking on others: renews its lease (or grants a new one
 * when it has none or it expired), then txn(create_revision(key) == 0 -> put key=value
 * with lease), so a standby that wins starts with a full TTL. *won tells whether we
 * are (or already were) the leader; then *term is the key's create_revision (strictly
 * increasing across leaders).
 */
cdc_err_t cdc_etcd_election_try(cdc_etcd_election_t *el, bool *won, int64_t *term, cdc_error_t *e);

/* Campaigns until won or timeout_ms passes (watches the key for deletion between
 * attempts). CDC_ERR_TIMEOUT when still not leader. */
cdc_err_t cdc_etcd_election_campaign(cdc_etcd_election_t *el, int timeout_ms, int64_t *term,
                                     cdc_error_t *e);

/* Renews the leader's lease once (call every ttl/3). CDC_ERR_FENCED when leadership is
 * lost (lease expired, or the key is gone or belongs to another lease). */
cdc_err_t cdc_etcd_election_keepalive(cdc_etcd_election_t *el, cdc_error_t *e);

/* Gives up leadership: revokes the lease (deleting the key). */
cdc_err_t cdc_etcd_election_resign(cdc_etcd_election_t *el, cdc_error_t *e);

/* Whether this election object currently believes it leads, and its term (0 if not). */
bool cdc_etcd_election_is_leader(const cdc_etcd_election_t *el);
int64_t cdc_etcd_election_term(const cdc_etcd_election_t *el);
int64_t cdc_etcd_election_lease(const cdc_etcd_election_t *el);

/* Fills a compare that holds only while we still lead in our term (key's
 * create_revision == term). Put it in every fenced txn. */
void cdc_etcd_election_fence(const cdc_etcd_election_t *el, cdc_etcd_cmp_t *cmp);

/* Frees the election without resigning (the lease expires on its own). */
void cdc_etcd_election_close(cdc_etcd_election_t *el);

/* Observes the current leader of key: *value (malloc()ed, caller frees) and *term.
 * CDC_ERR_NOT_FOUND when there is no leader. */
cdc_err_t cdc_etcd_leader(cdc_etcd_t *c, const char *key, char **value, int64_t *term,
                          cdc_error_t *e);

/* ---- helpers exposed for tests ------------------------------------------------------- */

/* Smallest key greater than every key with this prefix ("" ->"\0" = all keys): the
 * range_end of a prefix range. Malloc()ed; length in *len. */
char *cdc_etcd_prefix_end(const char *prefix, size_t *len);

#endif
