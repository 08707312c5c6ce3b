/*
 * Component tests of cdc-coordinator against real etcd and the real Iceberg library, with
 * fake workers (coordinator_fixture.h): its security. With --worker-secret, registrations
 * without the secret's proof (none, a wrong one) are refused while the workers that know
 * it keep committing; with --http-token-file, /status and /metrics want the token
 * (cdcctl sends it, a standby forwards it); a registered worker that acks forged staged
 * files (outside the warehouse, another table or bucket, a wrong size, a missing file) is
 * refused, and nothing of them is committed.
 */
#include "tests/integration/coordinator/coordinator_fixture.h"

/* ---- worker authentication and the admin token ---- */

/* Writes text to <s->dir>/<name> and returns the path (static per name slot). */
static const char *write_secret(scenario_t *s, const char *name, const char *text, char *path,
                                size_t size)
{
    FILE *f;
    snprintf(path, size, "%s/%s", s->dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", text);
    fclose(f);
    return path;
}

/* The leader's record field (endpoint or admin) from etcd, into out. */
static void leader_field(scenario_t *s, const char *field, char *out, size_t size)
{
    char key[256], *value = NULL;
    int64_t term;
    cdc_error_t e;
    json_t *v;

    snprintf(key, sizeof(key), "/cdc/%s/leader", s->job);
    assert_int_equal(cdc_etcd_leader(s->ec, key, &value, &term, &e), CDC_OK);
    v = json_loads(value, 0, NULL);
    assert_non_null(v);
    snprintf(out, size, "%s", json_string_value(json_object_get(v, field)) ?: "");
    json_decref(v);
    free(value);
}

/* Waits up to ms for a message of kind on mc; true when one came. */
static bool await(cdc_msg_client_t *mc, int kind, int ms, Cdc__Envelope **got)
{
    long long deadline = cdc_test_now_ms() + ms;
    while (cdc_test_now_ms() < deadline) {
        Cdc__Envelope *env = NULL;
        cdc_error_t e;
        if (cdc_msg_client_recv(mc, 100, &env, &e) != CDC_OK)
            continue;
        if ((int)env->body_case == kind) {
            if (got != NULL)
                *got = env;
            else
                cdc_msg_free(env);
            return true;
        }
        cdc_msg_free(env);
    }
    return false;
}

/*
 * A process that reached the coordinator's port registers as worker id: it gets a
 * Challenge, then answers with the proof under secret (NULL: registers again without
 * one). Returns whether it was then registered (an Assign came within wait_ms). It keeps
 * its connection until then, and, with until, until that holds (at most 15 s more).
 */
static bool intrude(const char *endpoint, const char *id, const char *secret, int wait_ms,
                    bool (*until)(void *), void *until_arg)
{
    cdc_msg_client_t *mc = NULL;
    Cdc__Envelope *ch = NULL;
    cdc_error_t e;
    bool assigned;

    assert_int_equal(cdc_msg_client_open(&mc, endpoint, NULL, &e), CDC_OK);
    for (int i = 0; i < 100 && !cdc_msg_client_connected(mc); i++)
        usleep(20000);
    assert_true(cdc_msg_client_connected(mc));
    send_register(mc, id, 1, NULL, NULL);
    assert_true(await(mc, CDC__ENVELOPE__BODY_CHALLENGE, 3000, &ch));
    assert_int_equal(ch->challenge->nonce.len, CDC_WORKERAUTH_NONCE_LEN);
    send_register(mc, id, 1, secret, secret ? ch->challenge : NULL);
    cdc_msg_free(ch);
    assigned = await(mc, CDC__ENVELOPE__BODY_ASSIGN, wait_ms, NULL);
    if (until != NULL)
        cdc_test_wait_for(until, until_arg, 15000);
    cdc_msg_client_close(mc);
    return assigned;
}

/* Refusals of reason in the leader's /status ("worker_auth"); -1 when unreadable. */
static long long refused(scenario_t *s, const char *reason)
{
    char *js = status_json(s);
    json_t *o = js ? json_loads(js, 0, NULL) : NULL;
    json_t *by = json_object_get(json_object_get(o, "worker_auth"), "refused_by_reason");
    long long n = json_is_integer(json_object_get(by, reason))
                      ? (long long)json_integer_value(json_object_get(by, reason))
                      : -1;
    json_decref(o);
    free(js);
    return n;
}

typedef struct want_refused {
    scenario_t *s;
    const char *reason;
    long long n;
} want_refused_t;

static bool refused_reached(void *arg)
{
    want_refused_t *w = arg;
    return refused(w->s, w->reason) >= w->n;
}

/* GETs http://<admin><path> with the token (NULL = none); the status, the body in *body. */
static long http_get_at(const char *admin, const char *path, const char *token, char **body)
{
    char url[512], auth[256];
    const char *headers[] = {auth, NULL};
    cdc_httpc_t *h = cdc_httpc_open();
    cdc_httpc_request_t req = {.url = url, .timeout_ms = 5000};
    cdc_httpc_response_t r;
    long status;

    snprintf(url, sizeof(url), "http://%s%s", admin, path);
    if (token != NULL) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        req.headers = headers;
    }
    assert_int_equal(cdc_httpc_perform(h, &req, &r), CDC_OK);
    status = r.status;
    *body = r.body ? strdup(r.body) : strdup("");
    cdc_httpc_response_free(&r);
    cdc_httpc_close(h);
    return status;
}

/* GETs the leader's admin path with the token (NULL = none); returns the status, body in
 * *body (caller frees). */
static long admin_get(scenario_t *s, const char *path, const char *token, char **body)
{
    char admin[256];
    leader_field(s, "admin", admin, sizeof(admin));
    return http_get_at(admin, path, token, body);
}

/* A staged-file rejection count of reason in the leader's /status; -1 when unreadable. */
static long long security_rejections(scenario_t *s, const char *reason)
{
    char *js = status_json(s);
    json_t *o = js ? json_loads(js, 0, NULL) : NULL;
    json_t *by = json_object_get(json_object_get(o, "security"), "staged_file_rejections");
    long long n = json_is_integer(json_object_get(by, reason))
                      ? (long long)json_integer_value(json_object_get(by, reason))
                      : -1;
    json_decref(o);
    free(js);
    return n;
}

typedef struct want_rejection {
    scenario_t *s;
    const char *reason;
} want_rejection_t;

static bool rejection_seen(void *arg)
{
    want_rejection_t *w = arg;
    return security_rejections(w->s, w->reason) >= 1;
}

/* Whether any file under dir holds the bytes of needle (metadata JSON, manifests). */
static bool tree_mentions(const char *dir, const char *needle)
{
    char cmd[2400];
    snprintf(cmd, sizeof(cmd), "grep -rqaF -- '%s' '%s' 2>/dev/null", needle, dir);
    return system(cmd) == 0;
}

/*
 * A registered worker (it may hold the worker secret: nothing here depends on it) that acks
 * forged staged files: a real file outside the warehouse, a ../ path back into another
 * table, another table's data directory, another bucket, a table outside the job, a wrong
 * size, a missing file. Each is refused with its reason in /status (a security event; the
 * job recovers), no checkpoint with it is recorded or committed, nothing in the warehouse's
 * metadata ever names it, and the planted file outside is never deleted.
 */
static void test_forged_acks(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    static const struct {
        const char *mode, *reason, *needle;
    } kinds[] = {
        {"forge-outside", "path", "outside-w00"},     {"forge-dotdot", "path", "/../"},
        {"forge-other", "path", "fk/other/"},         {"forge-bucket", "path", "foreign-bucket"},
        {"forge-unknown", "table_unknown", "secret"}, {"forge-size", "size", NULL},
        {"forge-missing", "missing", "missing-"},
    };
    (void)state;

    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        char outside[1300];
        want_rejection_t w = {&s, kinds[k].reason};
        scenario_open(&s, "forged");
        start_coordinator(&s, 0, NULL);
        start_worker_mode(&s, 0, kinds[k].mode);
        assert_true(cdc_test_wait_for(rejection_seen, &w, 30000));
        fprintf(stderr, "%s: refused as %s\n", kinds[k].mode, kinds[k].reason);
        /* nothing committed, nothing names the forged file */
        assert_int_equal(etcd_number(&s, "committed"), 0);
        if (kinds[k].needle != NULL)
            assert_false(tree_mentions(s.warehouse, kinds[k].needle));
        if (strcmp(kinds[k].mode, "forge-outside") == 0) {
            snprintf(outside, sizeof(outside), "%s/../outside-w00.parquet", s.warehouse);
            assert_int_equal(access(outside, F_OK), 0);
        }
        scenario_close(&s);
    }
}

/* The admin address of coordinator id from its presence record (a standby once it has
 * one), waiting up to ms. */
static bool standby_admin(scenario_t *s, const char *id, char *out, size_t size, int ms)
{
    char key[300];
    long long deadline = cdc_test_now_ms() + ms;
    snprintf(key, sizeof(key), "/cdc/%s/coordinators/%s", s->job, id);
    while (cdc_test_now_ms() < deadline) {
        cdc_etcd_kv_t kv;
        int64_t rev;
        cdc_error_t e;
        memset(&kv, 0, sizeof(kv));
        if (cdc_etcd_get(s->ec, key, &kv, &rev, &e) == CDC_OK && kv.value != NULL) {
            json_t *o = json_loadb(kv.value, kv.value_len, 0, NULL);
            const char *a = json_string_value(json_object_get(o, "admin"));
            const char *role = json_string_value(json_object_get(o, "role"));
            bool ok = a != NULL && a[0] != '\0' && role != NULL && strcmp(role, "standby") == 0;
            if (ok)
                snprintf(out, size, "%s", a);
            json_decref(o);
            cdc_etcd_kv_clear(&kv);
            if (ok)
                return true;
        }
        usleep(100000);
    }
    return false;
}

/*
 * --worker-secret-file: workers that prove the secret commit epochs; a registration
 * without a proof, and one with a proof under another secret, are refused (logged,
 * counted in /metrics, shown in /status) and never assigned, while the job keeps
 * committing exactly once; one with the right proof is assigned. --http-token-file:
 * /status and /metrics want the token, cdcctl sends it.
 */
static void test_worker_auth(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    char secret_opt[1300], token_opt[1300], path[1200], endpoint[256], *body = NULL;
    const cdc_test_env_t *env = cdc_test_env();
    (void)state;

    scenario_open(&s, "auth");
    snprintf(secret_opt, sizeof(secret_opt), "--worker-secret-file=%s",
             write_secret(&s, "worker-secret", "correct horse battery staple", path, sizeof(path)));
    snprintf(token_opt, sizeof(token_opt), "--http-token-file=%s",
             write_secret(&s, "http-token", "admin-t0ken", ctl_token_file, sizeof(ctl_token_file)));
    extra_opts[0] = secret_opt;
    extra_opts[1] = token_opt;
    extra_opts[2] = "--http-token-reads"; /* /status and /metrics want it too */
    start_coordinator(&s, 0, NULL);
    memset(extra_opts, 0, sizeof(extra_opts));
    setenv("FAKE_WORKER_SECRET", "correct horse battery staple", 1);
    start_workers(&s, 3);
    unsetenv("FAKE_WORKER_SECRET");
    wait_more_commits(&s, 3, 30000);
    leader_field(&s, "endpoint", endpoint, sizeof(endpoint));

    /* no proof: challenged, then refused at the deadline; another secret: refused at once */
    want_refused_t no_proof = {&s, "no_proof", 1}, wrong = {&s, "wrong_proof", 1};
    long long t0 = cdc_test_now_ms();
    assert_false(intrude(endpoint, "intruder-a", NULL, 1000, refused_reached, &no_proof));
    assert_true(refused_reached(&no_proof));
    assert_true(cdc_test_now_ms() - t0 >= CDC_ADMISSION_DEADLINE_MS - 500);
    assert_false(intrude(endpoint, "intruder-b", "guessed secret", 2000, refused_reached, &wrong));
    assert_true(refused_reached(&wrong));
    assert_int_equal(refused(&s, "unchallenged"), 0);
    {
        char *js = status_json(&s);
        assert_non_null(js);
        assert_non_null(strstr(js, "\"required\": true"));
        assert_null(strstr(js, "\"id\": \"intruder"));
        free(js);
    }
    assert_int_equal(admin_get(&s, "/metrics", "admin-t0ken", &body), 200);
    assert_non_null(
        strstr(body, "cdc_coordinator_registrations_refused_total{reason=\"no_proof\"} 1\n"));
    assert_non_null(
        strstr(body, "cdc_coordinator_registrations_refused_total{reason=\"wrong_proof\"} 1\n"));
    free(body);
    {
        char log[1200], cmd[2600];
        cdc_test_log_path(&s.procs, "coordinator", "coord0", log, sizeof(log));
        snprintf(cmd, sizeof(cmd),
                 "grep -q 'refused the registration of worker .*intruder-b.* on pipe [0-9]*: its "
                 "proof does not match the worker secret' '%s'",
                 log);
        assert_int_equal(system(cmd), 0);
    }
    /* the job went on committing through all that */
    wait_more_commits(&s, 3, 30000);

    /* the right proof: registered and assigned (a fourth worker joins, then leaves) */
    assert_true(intrude(endpoint, "w-proven", "correct horse battery staple", 15000, NULL, NULL));

    /* the admin token: 401 without it (also for cdcctl), probes open */
    assert_int_equal(admin_get(&s, "/status", NULL, &body), 401);
    free(body);
    assert_int_equal(admin_get(&s, "/healthz", NULL, &body), 200);
    free(body);
    {
        char cmd[2048];
        snprintf(cmd, sizeof(cmd),
                 "'%s/cdcctl' --etcd='%s' --job='%s' status 2>&1 | grep -q 'HTTP 401: the "
                 "coordinator requires a bearer token'",
                 env->build_dir, env->etcd, s.job);
        assert_int_equal(system(cmd), 0);
    }
    /* a standby (same secret and token) forwards /status with the caller's authorization:
     * the leader's document */
    extra_opts[0] = secret_opt;
    extra_opts[1] = token_opt;
    extra_opts[2] = "--http-token-reads";
    start_coordinator(&s, 1, NULL);
    memset(extra_opts, 0, sizeof(extra_opts));
    {
        char admin[256] = "";
        assert_true(standby_admin(&s, "coord1", admin, sizeof(admin), 15000));
        /* until the standby has seen who leads (its own document first), then forwarded:
         * the leader's, or its own saying why not */
        for (int i = 0; i < 100; i++) {
            assert_int_equal(http_get_at(admin, "/status", "admin-t0ken", &body), 200);
            if (strstr(body, "\"state\": \"RUNNING\"") != NULL ||
                strstr(body, "forward_error") != NULL)
                break;
            free(body);
            body = NULL;
            usleep(100000);
        }
        assert_non_null(body);
        if (strstr(body, "\"state\": \"RUNNING\"") == NULL) { /* pretty-printed: the leader's */
            char log[1200], cmd[1400];
            fprintf(stderr, "standby %s /status: %.2000s\n", admin, body);
            cdc_test_log_path(&s.procs, "coordinator", "coord1", log, sizeof(log));
            snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' >&2", log);
            if (system(cmd) != 0)
                fprintf(stderr, "no log %s\n", log);
        }
        assert_non_null(strstr(body, "\"state\": \"RUNNING\""));
        assert_null(strstr(body, "forward_error"));
        free(body);
        assert_int_equal(http_get_at(admin, "/status", NULL, &body), 401);
        free(body);
    }
    wait_more_commits(&s, 3, 30000);
    quiesce_and_verify(&s);
    ctl_token_file[0] = '\0';
    scenario_close(&s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_worker_auth, teardown),
        cmocka_unit_test_teardown(test_forged_acks, teardown),
    };
    return coordinator_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
