/*
 * What the component tests of cdc-coordinator (tests/integration/coordinator/
 * test_coordinator_*.c, one binary each) share. They run it against real etcd and the real
 * Iceberg library, with "fake workers": processes (the test binary in fake-worker mode)
 * that speak the real protocol over NNG and stage real Parquet files, but read a synthetic
 * source instead of Kafka: record `off` of partition slot `p` is the row (id = p * 1e9 +
 * off, p, off). That makes exactly-once checkable without the worker's record path: every
 * test ends with tests/js/lib/verify_slots.mjs reading the table with icebird and
 * asserting that each slot's records [0, next offset in the newest snapshot) are there
 * exactly once (verify()). A scenario is one test's job: its coordinators and fake
 * workers, its etcd keys and its warehouse (teardown() stops them after a failed
 * assertion). Every helper is static inline, as each binary uses some of them only;
 * coordinator_main() is every binary's main().
 */
#ifndef CDC_TEST_COORDINATOR_FIXTURE_H
#define CDC_TEST_COORDINATOR_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/etcd.h"
#include "common/httpc.h"
#include "common/iceberg/parquet.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/table.h"
#include "common/log.h"
#include "common/msg.h"
#include "common/workerauth.h"
#include "coordinator/admission.h"
#include "coordinator/offsets_base.h"
#include "coordinator/store.h"
#include "tests/harness/harness.h"
#include "tests/harness/procs.h"

#define ROWS_PER_EPOCH 40
/* "statics" workers ack these topics too, at offsets that never move (STATIC_AT + i) */
#define STATIC_TOPICS 4
#define STATIC_AT 1000
#define MAX_PROCS 16

/* ---- fake worker ------------------------------------------------------------------- */

static const char *SCHEMA_JSON =
    "{\"type\":\"struct\",\"schema-id\":0,\"identifier-field-ids\":[1],\"fields\":["
    "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"long\"},"
    "{\"id\":2,\"name\":\"p\",\"required\":true,\"type\":\"int\"},"
    "{\"id\":3,\"name\":\"off\",\"required\":true,\"type\":\"long\"}]}";

typedef struct fake {
    const char *id, *etcd, *job, *warehouse;
    cdc_etcd_t *ec;
    cdc_msg_client_t *mc;
    char endpoint[256];
    uint64_t incarnation, term, generation;
    bool owned[12];
    int64_t next_off[12];
    bool registered;
    /* sticky: like a worker behind a proxy or a Service, it looks the leader up only
     * when its link drops or it is told "not the leader", never while connected */
    bool sticky, was_connected;
    bool statics;       /* acks STATIC_TOPICS more topics that never move (offsets bases) */
    const char *secret; /* FAKE_WORKER_SECRET, else the harness's CDC_WORKER_SECRET_FILE:
                         * answers the coordinator's challenges */
    const char *forge;  /* "forge-<kind>": acks files the committer must refuse */
    cdc_ice_schema_t schema;
} fake_t;

static inline int64_t now_ms(void)
{
    return (int64_t)cdc_test_now_ms();
}

static inline void fake_send(fake_t *f, Cdc__Envelope *env)
{
    cdc_error_t e;
    cdc_msg_client_send(f->mc, env, &e);
}

static inline void fake_find_leader(fake_t *f)
{
    char key[256], *value = NULL;
    int64_t term;
    cdc_error_t e;

    snprintf(key, sizeof(key), "/cdc/%s/leader", f->job);
    if (cdc_etcd_leader(f->ec, key, &value, &term, &e) != CDC_OK)
        return;
    json_t *v = json_loads(value, 0, NULL);
    const char *ep = v ? json_string_value(json_object_get(v, "endpoint")) : NULL;
    if (ep && strcmp(ep, f->endpoint) != 0) {
        snprintf(f->endpoint, sizeof(f->endpoint), "%s", ep);
        if (f->mc == NULL)
            cdc_msg_client_open(&f->mc, ep, NULL, &e);
        else
            cdc_msg_client_redial(f->mc, ep, &e);
        f->registered = false;
    }
    json_decref(v);
    free(value);
}

/* Sends Register{id, incarnation, ""} on mc; with a Challenge's nonce, the proof of it
 * under secret (as cdc-worker does). */
/* The fake worker of this process runs in "statics" mode (its Register offers them). */
static bool fake_statics;

static inline void send_register(cdc_msg_client_t *mc, const char *id, uint64_t incarnation,
                                 const char *secret, const Cdc__Challenge *ch)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Register r = CDC__REGISTER__INIT;
    uint8_t proof[CDC_WORKERAUTH_PROOF_LEN];
    cdc_error_t e;

    /* its table (and the statics of that mode): staged files are accepted only for a table
     * of the job's set (coordinator/staged_check.h) */
    static char *topics[] = {"cdc.fk.items", "static.a", "static.b", "static.c", "static.d"};

    r.worker_id = (char *)id;
    r.incarnation = incarnation;
    r.admin_endpoint = "";
    r.topics = topics;
    r.n_topics = fake_statics ? 1 + STATIC_TOPICS : 1;
    if (ch != NULL && secret != NULL &&
        cdc_workerauth_proof(secret, ch->nonce.data, ch->nonce.len, id, incarnation, "", proof,
                             &e) == CDC_OK) {
        r.proof.data = proof;
        r.proof.len = sizeof(proof);
    }
    env.body_case = CDC__ENVELOPE__BODY_REGISTER;
    env.register_ = &r;
    cdc_msg_client_send(mc, &env, &e);
}

static inline void fake_register(fake_t *f)
{
    send_register(f->mc, f->id, f->incarnation, NULL, NULL);
    f->registered = true;
}

static inline void fake_heartbeat(fake_t *f)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Heartbeat h = CDC__HEARTBEAT__INIT;

    h.worker_id = (char *)f->id;
    h.incarnation = f->incarnation;
    h.term = f->term;
    h.generation = f->generation;
    env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &h;
    fake_send(f, &env);
}

/* Writes records [from, from+n) of slot p as a Parquet file; fills the StagedFile. */
static inline bool fake_stage(fake_t *f, int p, int64_t from, int n, uint64_t epoch,
                              Cdc__StagedFile *sf, cdc_ice_data_file_t *df, Cdc__ColumnStats *cs,
                              Cdc__ColumnStats **csp)
{
    char dir[1024], path[1200];
    cdc_pq_writer_t *w = NULL;
    cdc_error_t e;

    snprintf(dir, sizeof(dir), "%s/fk/items/data", f->warehouse);
    snprintf(path, sizeof(path), "mkdir -p '%s'", dir);
    if (system(path) != 0)
        return false;
    snprintf(path, sizeof(path), "%s/%s-p%d-e%" PRIu64 "-%" PRIu64 ".parquet", dir, f->id, p, epoch,
             f->incarnation);
    unlink(path); /* a re-sent epoch after a restart of the same incarnation cannot happen */
    if (cdc_pq_writer_open_file(&f->schema, path, NULL, &w, &e) != CDC_OK) {
        fprintf(stderr, "fake worker: %s\n", e.msg);
        return false;
    }
    for (int i = 0; i < n; i++) {
        cdc_ice_value_t v[3];
        memset(v, 0, sizeof(v));
        v[0].v.i64 = (int64_t)p * 1000000000LL + from + i;
        v[1].v.i32 = p;
        v[2].v.i64 = from + i;
        cdc_pq_writer_append(w, v, &e);
    }
    if (cdc_pq_writer_close(w, df, &e) != CDC_OK) {
        cdc_pq_writer_free(w);
        return false;
    }
    cdc_pq_writer_free(w);
    cdc__staged_file__init(sf);
    sf->table = "fk.items";
    sf->path = df->path;
    sf->content = 0;
    sf->record_count = df->record_count;
    sf->file_size_in_bytes = df->file_size_in_bytes;
    sf->schema_id = 0;
    sf->partition = (uint32_t)p;
    for (size_t i = 0; i < df->nstats && i < 3; i++) {
        cdc__column_stats__init(&cs[i]);
        cs[i].field_id = df->stats[i].field_id;
        cs[i].column_size = df->stats[i].column_size;
        cs[i].value_count = df->stats[i].value_count;
        cs[i].null_count = df->stats[i].null_count;
        cs[i].has_bounds = df->stats[i].has_bounds;
        cs[i].lower_bound.data = df->stats[i].lower;
        cs[i].lower_bound.len = df->stats[i].lower_len;
        cs[i].upper_bound.data = df->stats[i].upper;
        cs[i].upper_bound.len = df->stats[i].upper_len;
        csp[i] = &cs[i];
    }
    sf->n_stats = df->nstats < 3 ? df->nstats : 3;
    sf->stats = csp;
    return true;
}

/* What a forging worker acks instead of its real files (coordinator/staged_check.h):
 * outside (a real file outside the warehouse), dotdot (../ back into another table), other
 * (another table's data directory), bucket (another bucket), unknown (a table outside the
 * job), size (its real file with another size), missing (no such file). */
static inline void fake_forge(fake_t *f, Cdc__StagedFile *sf, size_t n)
{
    static char paths[12][1400];
    const char *kind = f->forge + strlen("forge-");

    for (size_t i = 0; i < n; i++) {
        char *p = paths[i];
        if (strcmp(kind, "outside") == 0) {
            /* a copy of the real file next to the warehouse, as an attacker would plant */
            snprintf(p, sizeof(paths[i]), "%s/../outside-%s.parquet", f->warehouse, f->id);
            char cmd[3000];
            snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", sf[i].path, p);
            if (system(cmd) != 0)
                fprintf(stderr, "fake worker: %s failed\n", cmd);
        } else if (strcmp(kind, "dotdot") == 0) {
            snprintf(p, sizeof(paths[i]), "%s/fk/items/data/../../other/data/x.parquet",
                     f->warehouse);
        } else if (strcmp(kind, "other") == 0) {
            snprintf(p, sizeof(paths[i]), "%s/fk/other/data/x.parquet", f->warehouse);
        } else if (strcmp(kind, "bucket") == 0) {
            snprintf(p, sizeof(paths[i]), "s3://foreign-bucket/fk/items/data/x.parquet");
        } else if (strcmp(kind, "unknown") == 0) {
            snprintf(p, sizeof(paths[i]), "%s/fk/secret/data/x.parquet", f->warehouse);
            sf[i].table = "fk.secret";
        } else if (strcmp(kind, "size") == 0) {
            snprintf(p, sizeof(paths[i]), "%s", sf[i].path);
            sf[i].file_size_in_bytes += 1;
        } else { /* missing */
            snprintf(p, sizeof(paths[i]), "%s/fk/items/data/missing-%zu.parquet", f->warehouse, i);
        }
        sf[i].path = p;
    }
}

static inline void fake_on_barrier(fake_t *f, const Cdc__Barrier *b)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Ack ack = CDC__ACK__INIT;
    Cdc__PartitionState ps[12], *psp[12];
    Cdc__TopicOffset to[12], *top[12][1 + STATIC_TOPICS], st[STATIC_TOPICS];
    static const char *const static_names[STATIC_TOPICS] = {"static.a", "static.b", "static.c",
                                                            "static.d"};
    Cdc__StagedFile sf[12], *sfp[12];
    Cdc__ColumnStats cs[12][3], *csp[12][3];
    cdc_ice_data_file_t df[12];
    Cdc__SchemaUpdate su = CDC__SCHEMA_UPDATE__INIT, *sup = &su;
    size_t n = 0;

    if (b->term != f->term || b->generation != f->generation)
        return;
    memset(df, 0, sizeof(df));
    for (int p = 0; p < 12; p++) {
        if (!f->owned[p])
            continue;
        if (!fake_stage(f, p, f->next_off[p], ROWS_PER_EPOCH, b->epoch, &sf[n], &df[n], cs[n],
                        csp[n]))
            return; /* no ack: the coordinator's deadline takes over */
        cdc__partition_state__init(&ps[n]);
        cdc__topic_offset__init(&to[n]);
        to[n].topic = "cdc.fk.items";
        to[n].next_offset = f->next_off[p] + ROWS_PER_EPOCH;
        top[n][0] = &to[n];
        ps[n].partition = (uint32_t)p;
        ps[n].n_offsets = 1;
        for (int i = 0; f->statics && i < STATIC_TOPICS; i++) {
            cdc__topic_offset__init(&st[i]);
            st[i].topic = (char *)static_names[i];
            st[i].next_offset = STATIC_AT + i;
            top[n][ps[n].n_offsets++] = &st[i];
        }
        ps[n].offsets = top[n];
        ps[n].state_handle = "";
        psp[n] = &ps[n];
        sfp[n] = &sf[n];
        f->next_off[p] += ROWS_PER_EPOCH;
        n++;
    }
    if (f->forge != NULL)
        fake_forge(f, sf, n);
    su.table = "fk.items";
    su.schema_json = (char *)SCHEMA_JSON;
    ack.worker_id = (char *)f->id;
    ack.term = b->term;
    ack.generation = b->generation;
    ack.epoch = b->epoch;
    ack.n_partitions = n;
    ack.partitions = psp;
    ack.n_files = n;
    ack.files = sfp;
    ack.n_schemas = 1;
    ack.schemas = &sup;
    env.body_case = CDC__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    fake_send(f, &env);
    for (size_t i = 0; i < n; i++)
        cdc_ice_data_file_clear(&df[i]);
}

static inline void fake_on_assign(fake_t *f, const Cdc__Assign *a)
{
    if (a->term < f->term)
        return;
    f->term = a->term;
    f->generation = a->generation;
    memset(f->owned, 0, sizeof(f->owned));
    for (size_t i = 0; i < a->n_partitions; i++) {
        const Cdc__PartitionState *ps = a->partitions[i];
        if (ps->partition >= 12)
            continue;
        f->owned[ps->partition] = true;
        f->next_off[ps->partition] = 0;
        size_t statics = 0;
        for (size_t k = 0; k < ps->n_offsets; k++)
            if (strcmp(ps->offsets[k]->topic, "cdc.fk.items") == 0)
                f->next_off[ps->partition] = ps->offsets[k]->next_offset;
            else if (strncmp(ps->offsets[k]->topic, "static.", 7) == 0 &&
                     ps->offsets[k]->next_offset == STATIC_AT + (ps->offsets[k]->topic[7] - 'a'))
                statics++;
        /* a slot assigned from a checkpoint gets every topic's exact offset back */
        if (f->statics && ps->n_offsets > 0 && statics != STATIC_TOPICS) {
            fprintf(stderr, "fake worker %s: slot %u assigned with %zu of %d static topics\n",
                    f->id, ps->partition, statics, STATIC_TOPICS);
            exit(3);
        }
    }
}

static inline int fake_worker_main(int argc, char **argv)
{
    fake_t f;
    cdc_error_t e;
    int64_t next_hb = 0, next_leader = 0;
    volatile int forever = 1;

    if (argc < 6)
        return 2;
    memset(&f, 0, sizeof(f));
    f.id = argv[2];
    f.etcd = argv[3];
    f.job = argv[4];
    f.warehouse = argv[5];
    f.sticky = argc > 6 && strcmp(argv[6], "sticky") == 0;
    f.statics = argc > 6 && strcmp(argv[6], "statics") == 0;
    fake_statics = f.statics;
    f.forge = argc > 6 && strncmp(argv[6], "forge-", 6) == 0 ? argv[6] : NULL;
    f.secret = getenv("FAKE_WORKER_SECRET");
    if (f.secret == NULL)
        f.secret = cdc_test_secret("CDC_WORKER_SECRET_FILE"); /* lives as the process */
    f.incarnation = (uint64_t)time(NULL) * 1000 + (uint64_t)getpid() % 1000;
    cdc_log_init("fake-worker", f.id);
    if (cdc_ice_schema_from_json(SCHEMA_JSON, &f.schema, &e) != CDC_OK ||
        cdc_etcd_open(&f.ec, f.etcd, 500, &e) != CDC_OK)
        return 1;
    while (forever) {
        int64_t now = now_ms();
        Cdc__Envelope *env = NULL;
        bool connected = f.mc != NULL && cdc_msg_client_connected(f.mc);
        if (f.sticky ? (!connected && (f.was_connected || now >= next_leader))
                     : now >= next_leader) {
            fake_find_leader(&f);
            next_leader = now + 300;
        }
        f.was_connected = connected;
        if (f.mc == NULL) {
            usleep(50000);
            continue;
        }
        if (!connected) {
            if (f.sticky)
                f.registered = false; /* a new connection may reach another coordinator */
        } else if (!f.registered) {
            fake_register(&f);
        }
        if (now >= next_hb) {
            fake_heartbeat(&f);
            next_hb = now + 200;
        }
        if (cdc_msg_client_recv(f.mc, 50, &env, &e) != CDC_OK)
            continue;
        switch (env->body_case) {
        case CDC__ENVELOPE__BODY_ASSIGN:
            fake_on_assign(&f, env->assign);
            break;
        case CDC__ENVELOPE__BODY_BARRIER:
            fake_on_barrier(&f, env->barrier);
            break;
        case CDC__ENVELOPE__BODY_ABORT:
            if (env->abort->term >= f.term) {
                f.term = env->abort->term;
                f.generation = env->abort->generation;
                memset(f.owned, 0, sizeof(f.owned));
            }
            break;
        case CDC__ENVELOPE__BODY_CHALLENGE:
            send_register(f.mc, f.id, f.incarnation, f.secret, env->challenge);
            break;
        case CDC__ENVELOPE__BODY_REJECT:
            if (strstr(env->reject->reason, "regist") != NULL)
                f.registered = false;
            if (f.sticky && strstr(env->reject->reason, "not the leader") != NULL) {
                f.endpoint[0] = '\0'; /* dial whoever leads now, even the same address */
                fake_find_leader(&f);
            }
            break;
        default:
            break;
        }
        cdc_msg_free(env);
    }
    return 0;
}

/* ---- test scaffolding ------------------------------------------------------------------ */

typedef struct scenario {
    char job[64];
    char *dir;
    char warehouse[1024];
    pid_t coords[2];
    int ncoords;
    pid_t workers[MAX_PROCS];
    int nworkers;
    cdc_etcd_t *ec;
    cdc_test_job_t procs; /* job, dir and warehouse of the coordinators */
} scenario_t;

static const char *extra_opts[4]; /* extra coordinator options of the next start */
static char ctl_token_file[1200]; /* cdcctl's --http-token-file in status_json(), when set */
static scenario_t *open_scenario; /* the running test's scenario, for teardown() */

/* Options of every coordinator here: short epochs, failure detection and leases. */
static const char *const COORD_OPTS[] = {
    "--commit-interval=300ms", "--heartbeat-timeout=1500ms", "--ack-deadline=3s",
    "--rebalance-grace=500ms", "--restart-delay=100ms",      "--lease-ttl=2s",
    "--etcd-timeout=500ms",    "--orphan-interval=0",        NULL};

static inline pid_t start_coordinator(scenario_t *s, int idx, const char *fault)
{
    char id[64], faultopt[128];
    const char *opts[32];
    int n = 0;

    snprintf(id, sizeof(id), "coord%d", idx);
    for (int i = 0; COORD_OPTS[i] != NULL; i++)
        opts[n++] = COORD_OPTS[i];
    if (fault != NULL) {
        snprintf(faultopt, sizeof(faultopt), "--fault=%s", fault);
        opts[n++] = faultopt;
    }
    for (int i = 0; i < 4 && extra_opts[i] != NULL; i++)
        opts[n++] = extra_opts[i];
    opts[n] = NULL;
    pid_t pid = cdc_test_start_coordinator(&s->procs, id, opts);
    assert_true(pid > 0);
    s->coords[idx] = pid;
    if (idx + 1 > s->ncoords)
        s->ncoords = idx + 1;
    return pid;
}

/* mode: NULL (follows the leader key) or "sticky" (see fake_t). */
static inline pid_t start_worker_mode(scenario_t *s, int idx, const char *mode)
{
    const cdc_test_env_t *env = cdc_test_env();
    char id[32], log[1200];

    snprintf(id, sizeof(id), "w%02d", idx);
    snprintf(log, sizeof(log), "%s/%s.log", s->dir, id);
    char *argv[] = {(char *)cdc_test_self(),
                    "fake-worker",
                    id,
                    (char *)env->etcd,
                    s->job,
                    s->warehouse,
                    (char *)mode,
                    NULL};
    pid_t pid = cdc_test_spawn(argv, log);
    assert_true(pid > 0);
    s->workers[idx] = pid;
    if (idx + 1 > s->nworkers)
        s->nworkers = idx + 1;
    return pid;
}

/* Workers w00 .. w<n-1>. */
static inline void start_workers(scenario_t *s, int n)
{
    for (int i = 0; i < n; i++)
        start_worker_mode(s, i, NULL);
}

static inline void scenario_open(scenario_t *s, const char *name)
{
    const cdc_test_env_t *env = cdc_test_env();
    cdc_error_t e;

    memset(s, 0, sizeof(*s));
    open_scenario = s;
    snprintf(s->job, sizeof(s->job), "%s-%d-%lld", name, (int)getpid(), cdc_test_now_ms() % 100000);
    s->dir = cdc_test_mkdtemp(name);
    snprintf(s->warehouse, sizeof(s->warehouse), "%s/warehouse", s->dir);
    s->procs = (cdc_test_job_t){.dir = s->dir, .name = s->job, .warehouse = s->warehouse};
    assert_int_equal(cdc_etcd_open(&s->ec, env->etcd, 1000, &e), CDC_OK);
}

static inline void scenario_close(scenario_t *s)
{
    cdc_test_kill_all(s->workers, s->nworkers, SIGKILL, 2000);
    cdc_test_kill_all(s->coords, s->ncoords, SIGTERM, 5000);
    cdc_etcd_close(s->ec);
    free(s->dir);
    memset(s, 0, sizeof(*s));
    if (open_scenario == s)
        open_scenario = NULL;
}

/* A failed assertion leaves the test early: stop its processes and free what it holds. */
static inline int teardown(void **state)
{
    (void)state;
    memset(extra_opts, 0, sizeof(extra_opts));
    ctl_token_file[0] = '\0';
    if (open_scenario != NULL)
        scenario_close(open_scenario);
    return 0;
}

static inline uint64_t etcd_number(scenario_t *s, const char *name)
{
    return cdc_test_job_number(&s->procs, s->ec, name);
}

/* Number of snapshots committed to the table so far (0 when it does not exist). */
static inline int committed_snapshots(scenario_t *s)
{
    char loc[1200];
    cdc_storage_t *st = NULL;
    cdc_ice_table_t *t = NULL;
    cdc_error_t e;
    int n = 0;

    snprintf(loc, sizeof(loc), "%s/fk/items", s->warehouse);
    if (cdc_storage_open(s->warehouse, NULL, &st, &e) != CDC_OK)
        return 0;
    if (cdc_ice_table_load(st, loc, &t, &e) == CDC_OK) {
        n = (int)cdc_ice_table_metadata(t)->nsnapshots;
        cdc_ice_table_close(t);
    }
    cdc_storage_close(st);
    return n;
}

typedef struct wait_committed {
    scenario_t *s;
    uint64_t target;
} wait_committed_t;

static inline bool committed_reached(void *arg)
{
    wait_committed_t *w = arg;
    return etcd_number(w->s, "committed") >= w->target;
}

/* Waits until `more` further epochs are committed; returns the committed epoch. */
static inline uint64_t wait_more_commits(scenario_t *s, int more, int timeout_ms)
{
    int before = committed_snapshots(s);
    long long deadline = cdc_test_now_ms() + timeout_ms;

    while (cdc_test_now_ms() < deadline) {
        if (committed_snapshots(s) >= before + more)
            return etcd_number(s, "committed");
        usleep(50000);
    }
    fail_msg("job %s: fewer than %d further snapshots within %d ms (had %d, now %d)", s->job, more,
             timeout_ms, before, committed_snapshots(s));
    return 0;
}

static inline void verify(scenario_t *s)
{
    char cmd[4096];
    const cdc_test_env_t *env = cdc_test_env();
    char root[1024];
    int rc;

    /* the build dir is <root>/build: the verifier lives in <root>/tests/js/lib */
    snprintf(root, sizeof(root), "%s/..", env->build_dir);
    snprintf(cmd, sizeof(cmd), "cd '%s/tests/js' && node lib/verify_slots.mjs '%s/fk/items' '%s'",
             root, s->warehouse, s->job);
    rc = system(cmd);
    assert_int_equal(rc, 0);
}

/* Stops everything but one coordinator, lets it commit what it has, then verifies. */
static inline void quiesce_and_verify(scenario_t *s)
{
    cdc_test_kill_all(s->workers, s->nworkers, SIGKILL, 2000);
    /* in-flight epochs abort; recorded ones get committed; give the commit a moment */
    wait_committed_t w = {s, etcd_number(s, "latest")};
    assert_true(cdc_test_wait_for(committed_reached, &w, 10000));
    verify(s);
}

static inline char *status_json(scenario_t *s)
{
    const cdc_test_env_t *env = cdc_test_env();
    char cmd[4096], buf[65536];
    size_t n;
    FILE *p;

    snprintf(cmd, sizeof(cmd), "'%s/cdcctl' --etcd='%s' --job='%s' --json%s%s%s status",
             env->build_dir, env->etcd, s->job, ctl_token_file[0] ? " --http-token-file='" : "",
             ctl_token_file, ctl_token_file[0] ? "'" : "");
    p = popen(cmd, "r");
    if (p == NULL)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, p);
    pclose(p);
    buf[n] = '\0';
    return strdup(buf);
}

/* Every coordinator test binary's main(): argv[1] "fake-worker" runs this binary as a fake
 * worker (fake_worker_main()); `--only <test>` runs that test; else the tests, or only
 * those CDC_TEST_FILTER matches (a cmocka pattern, e.g. CDC_TEST_FILTER='test_*_workers'). */
static inline int coordinator_main(int argc, char **argv, const struct CMUnitTest *tests, size_t n)
{
    if (argc > 1 && strcmp(argv[1], "fake-worker") == 0)
        return fake_worker_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--only") == 0 && argc > 2) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(tests[i].name, argv[2]) == 0)
                return _cmocka_run_group_tests("coordinator", &tests[i], 1, NULL, NULL);
        return 2;
    }
    if (getenv("CDC_TEST_FILTER"))
        cmocka_set_test_filter(getenv("CDC_TEST_FILTER"));
    return _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
}

#endif
