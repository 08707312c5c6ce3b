/*
 * Component tests of cdc-coordinator against real etcd and the real Iceberg library,
 * with "fake workers": processes (this binary in fake-worker mode) that speak the real
 * protocol over NNG and stage real Parquet files, but read a synthetic source instead
 * of Kafka: record `off` of partition slot `p` is the row (id = p * 1e9 + off, p, off).
 * That makes exactly-once checkable without the worker's record path: every test ends
 * with tests/js/lib/verify_slots.mjs reading the table with icebird and asserting that
 * each slot's records [0, next offset in the newest snapshot) are there exactly once.
 *
 * Failures exercised: kill -9 of a worker mid-epoch, SIGSTOP past the heartbeat timeout
 * then SIGCONT (its late acks are rejected), kill -9 of the leader with a standby (which
 * the leader's /status lists, from its record in etcd, until it leads and lists the dead
 * one as gone), etcd stopped and restarted, a crash between the etcd record and the
 * Iceberg commit, and 1, 3 and 12 workers. With --worker-secret, registrations without the secret's
 * proof (none, a wrong one) are refused while the workers that know it keep committing.
 */
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

static int64_t now_ms(void)
{
    return (int64_t)cdc_test_now_ms();
}

static void fake_send(fake_t *f, Cdc__Envelope *env)
{
    cdc_error_t e;
    cdc_msg_client_send(f->mc, env, &e);
}

static void fake_find_leader(fake_t *f)
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

static void send_register(cdc_msg_client_t *mc, const char *id, uint64_t incarnation,
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

static void fake_register(fake_t *f)
{
    send_register(f->mc, f->id, f->incarnation, NULL, NULL);
    f->registered = true;
}

static void fake_heartbeat(fake_t *f)
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
static bool fake_stage(fake_t *f, int p, int64_t from, int n, uint64_t epoch, Cdc__StagedFile *sf,
                       cdc_ice_data_file_t *df, Cdc__ColumnStats *cs, Cdc__ColumnStats **csp)
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
static void fake_forge(fake_t *f, Cdc__StagedFile *sf, size_t n)
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

static void fake_on_barrier(fake_t *f, const Cdc__Barrier *b)
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

static void fake_on_assign(fake_t *f, const Cdc__Assign *a)
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

static int fake_worker_main(int argc, char **argv)
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

typedef struct want_state {
    scenario_t *s;
    const char *state;
} want_state_t;
static bool coordinators_are(void *arg);

static const char *extra_opts[4]; /* extra coordinator options of the next start */
static char ctl_token_file[1200]; /* cdcctl's --http-token-file in status_json(), when set */
static scenario_t *open_scenario; /* the running test's scenario, for teardown() */

/* Options of every coordinator here: short epochs, failure detection and leases. */
static const char *const COORD_OPTS[] = {
    "--commit-interval=300ms", "--heartbeat-timeout=1500ms", "--ack-deadline=3s",
    "--rebalance-grace=500ms", "--restart-delay=100ms",      "--lease-ttl=2s",
    "--etcd-timeout=500ms",    "--orphan-interval=0",        NULL};

static pid_t start_coordinator(scenario_t *s, int idx, const char *fault)
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
static pid_t start_worker_mode(scenario_t *s, int idx, const char *mode)
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

static pid_t start_worker(scenario_t *s, int idx)
{
    return start_worker_mode(s, idx, NULL);
}

/* Workers w00 .. w<n-1>. */
static void start_workers(scenario_t *s, int n)
{
    for (int i = 0; i < n; i++)
        start_worker_mode(s, i, NULL);
}

static void scenario_open(scenario_t *s, const char *name)
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

static void scenario_close(scenario_t *s)
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
static int teardown(void **state)
{
    (void)state;
    memset(extra_opts, 0, sizeof(extra_opts));
    ctl_token_file[0] = '\0';
    if (open_scenario != NULL)
        scenario_close(open_scenario);
    return 0;
}

static uint64_t etcd_number(scenario_t *s, const char *name)
{
    return cdc_test_job_number(&s->procs, s->ec, name);
}

static int64_t leader_term(scenario_t *s)
{
    char key[256];
    int64_t term = 0;
    cdc_error_t e;

    snprintf(key, sizeof(key), "/cdc/%s/leader", s->job);
    if (cdc_etcd_leader(s->ec, key, NULL, &term, &e) != CDC_OK)
        return 0;
    return term;
}

/* Number of snapshots committed to the table so far (0 when it does not exist). */
static int committed_snapshots(scenario_t *s)
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

static bool committed_reached(void *arg)
{
    wait_committed_t *w = arg;
    return etcd_number(w->s, "committed") >= w->target;
}

/* Waits until `more` further epochs are committed; returns the committed epoch. */
static uint64_t wait_more_commits(scenario_t *s, int more, int timeout_ms)
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

static void verify(scenario_t *s)
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
static void quiesce_and_verify(scenario_t *s)
{
    cdc_test_kill_all(s->workers, s->nworkers, SIGKILL, 2000);
    /* in-flight epochs abort; recorded ones get committed; give the commit a moment */
    wait_committed_t w = {s, etcd_number(s, "latest")};
    assert_true(cdc_test_wait_for(committed_reached, &w, 10000));
    verify(s);
}

/* ---- tests ------------------------------------------------------------------------------ */

/* As many workers as the test's initial state says (see main()). */
static void test_n_workers(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    int n = *(int *)*state;
    char name[32];

    snprintf(name, sizeof(name), "n%d", n);
    scenario_open(&s, name);
    start_coordinator(&s, 0, NULL);
    start_workers(&s, n);
    wait_more_commits(&s, 8, 30000);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

static void test_kill_worker(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    long long t0;
    (void)state;

    scenario_open(&s, "killw");
    start_coordinator(&s, 0, NULL);
    start_workers(&s, 3);
    wait_more_commits(&s, 5, 30000);
    t0 = cdc_test_now_ms();
    cdc_test_kill(s.workers[1], SIGKILL, 2000);
    s.workers[1] = 0;
    wait_more_commits(&s, 1, 15000);
    fprintf(stderr, "recovery: kill -9 of a worker to the next committed epoch: %lld ms\n",
            cdc_test_now_ms() - t0);
    wait_more_commits(&s, 4, 15000);
    /* the worker comes back and gets partitions again */
    start_worker(&s, 1);
    wait_more_commits(&s, 5, 20000);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

static void test_pause_worker(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    (void)state;

    scenario_open(&s, "pausew");
    start_coordinator(&s, 0, NULL);
    start_workers(&s, 3);
    wait_more_commits(&s, 5, 30000);
    kill(s.workers[2], SIGSTOP);
    /* past the heartbeat timeout: the others take over its partitions */
    wait_more_commits(&s, 4, 20000);
    kill(s.workers[2], SIGCONT);
    wait_more_commits(&s, 6, 20000);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

static void test_leader_failover(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    int64_t term1, term2;
    want_state_t coords;
    long long t0;
    (void)state;

    scenario_open(&s, "failover");
    start_coordinator(&s, 0, NULL);
    start_workers(&s, 3);
    wait_more_commits(&s, 4, 30000);
    start_coordinator(&s, 1, NULL); /* standby */
    wait_more_commits(&s, 2, 10000);
    term1 = leader_term(&s);
    assert_true(term1 > 0);
    /* the leader lists its standby from the standby's record in etcd */
    coords.s = &s;
    coords.state = "coord0 leader 1,coord1 standby 1";
    assert_true(cdc_test_wait_for(coordinators_are, &coords, 10000));
    t0 = cdc_test_now_ms();
    cdc_test_kill(s.coords[0], SIGKILL, 2000);
    s.coords[0] = 0;
    wait_more_commits(&s, 3, 30000);
    term2 = leader_term(&s);
    fprintf(stderr,
            "failover: leader kill -9 to 3 more commits: %lld ms, term %" PRId64 " -> %" PRId64
            "\n",
            cdc_test_now_ms() - t0, term1, term2);
    assert_true(term2 > term1);
    /* the new leader first, the dead one's record gone with its lease */
    coords.state = "coord1 leader 1,coord0 standby 0";
    assert_true(cdc_test_wait_for(coordinators_are, &coords, 10000));
    quiesce_and_verify(&s);
    scenario_close(&s);
}

typedef struct term_after {
    scenario_t *s;
    int64_t term;
} term_after_t;

static bool term_moved(void *arg)
{
    term_after_t *t = arg;
    int64_t now = leader_term(t->s);
    return now > 0 && now != t->term;
}

/*
 * A leader that loses its lease while its workers reach it through a fixed address (a
 * proxy, a Service: the chaos suite's setup) must let go of them, or they keep
 * heartbeating into a standby while the new leader waits for them forever. The lease
 * is revoked while the leader is frozen, so that the standby surely wins.
 */
static void test_deposed_leader_drops_workers(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    char key[256];
    cdc_etcd_kv_t kv;
    cdc_error_t e;
    term_after_t moved;
    (void)state;

    scenario_open(&s, "deposed");
    start_coordinator(&s, 0, NULL);
    for (int i = 0; i < 3; i++)
        start_worker_mode(&s, i, "sticky");
    wait_more_commits(&s, 4, 30000);
    start_coordinator(&s, 1, NULL); /* standby */
    wait_more_commits(&s, 2, 10000);
    moved.s = &s;
    moved.term = leader_term(&s);
    assert_true(moved.term > 0);
    snprintf(key, sizeof(key), "/cdc/%s/leader", s.job);
    memset(&kv, 0, sizeof(kv));
    assert_int_equal(kill(s.coords[0], SIGSTOP), 0);
    assert_int_equal(cdc_etcd_get(s.ec, key, &kv, NULL, &e), CDC_OK);
    assert_int_equal(cdc_etcd_lease_revoke(s.ec, kv.lease, &e), CDC_OK);
    cdc_etcd_kv_clear(&kv);
    assert_true(cdc_test_wait_for(term_moved, &moved, 10000));
    assert_int_equal(kill(s.coords[0], SIGCONT), 0);
    /* the workers find the new leader and it commits with them */
    wait_more_commits(&s, 4, 30000);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

/*
 * A leader whose main loop is busy for longer than the lease TTL (a cold orphan scan of
 * a big warehouse, a commit backlog after an etcd outage) keeps its lease: the renewal
 * does not wait for the loop. Before, the lease ran out, the standby took over and the
 * old leader's workers were stranded (chaos: leadership flipped every orphan interval).
 */
static void test_leader_survives_stall(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    int64_t term;
    (void)state;

    scenario_open(&s, "stall");
    extra_opts[0] = "--orphan-interval=2s"; /* each scan stalls 3 x the 2 s lease TTL */
    start_coordinator(&s, 0, "stall-orphan-scan");
    memset(extra_opts, 0, sizeof(extra_opts));
    start_workers(&s, 3);
    wait_more_commits(&s, 3, 30000);
    term = leader_term(&s);
    assert_true(term > 0);
    start_coordinator(&s, 1, NULL); /* a standby ready to take over */
    /* two stalls of 6 s each, commits in between: the leader and its term stay */
    wait_more_commits(&s, 3, 30000);
    wait_more_commits(&s, 3, 30000);
    assert_true(leader_term(&s) == term);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

static void test_crash_after_record(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    int status = 0;
    uint64_t latest, committed;
    (void)state;

    scenario_open(&s, "fault");
    /* 12 files per epoch > 5: file lists go through pending files in the warehouse */
    extra_opts[0] = "--inline-files-max=5";
    start_coordinator(&s, 0, NULL);
    start_workers(&s, 3);
    wait_more_commits(&s, 3, 30000);
    /* replace the leader by one that dies between the etcd record and the commit */
    cdc_test_kill(s.coords[0], SIGTERM, 5000);
    start_coordinator(&s, 0, "after-checkpoint-record");
    assert_true(cdc_test_wait_exit(s.coords[0], 30000, &status));
    s.coords[0] = 0;
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 86);
    latest = etcd_number(&s, "latest");
    committed = etcd_number(&s, "committed");
    fprintf(stderr, "fault: latest %" PRIu64 " committed %" PRIu64 "\n", latest, committed);
    assert_true(latest > committed);
    /* a normal coordinator commits the recorded epoch once and goes on */
    start_coordinator(&s, 1, NULL);
    extra_opts[0] = NULL;
    wait_more_commits(&s, 4, 30000);
    assert_true(etcd_number(&s, "committed") > latest);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

/* The offsets of every slot's topics in the latest record, read back as a new leader
 * reads it (etcd, then the offsets base in the warehouse); asserts the statics' exact
 * offsets and returns the record (caller frees). */
static cdc_checkpoint_t *latest_record(scenario_t *s, bool *delta)
{
    cdc_store_t st;
    cdc_storage_t *wh;
    cdc_checkpoint_t *rec = NULL;
    cdc_error_t e;

    cdc_store_init(&st, s->ec, NULL, s->job);
    assert_int_equal(cdc_storage_open(s->warehouse, NULL, &wh, &e), CDC_OK);
    assert_int_equal(cdc_store_get_checkpoint(&st, etcd_number(s, "latest"), &rec, &e), CDC_OK);
    *delta = rec->offsets_delta;
    if (rec->offsets_delta)
        assert_true(cdc_checkpoint_offset_count(rec) <= 12); /* only "cdc.fk.items" moved */
    assert_int_equal(cdc_offsets_base_load(wh, rec, &e), CDC_OK);
    for (uint32_t p = 0; p < 12; p++) {
        assert_int_equal(rec->partitions[p].noffsets, 1 + STATIC_TOPICS);
        assert_non_null(cdc_checkpoint_find_offset(rec, p, "cdc.fk.items"));
        for (int i = 0; i < STATIC_TOPICS; i++) {
            char topic[32];
            snprintf(topic, sizeof(topic), "static.%c", 'a' + i);
            const cdc_topic_offset_t *to = cdc_checkpoint_find_offset(rec, p, topic);
            assert_non_null(to);
            assert_int_equal(to->next_offset, STATIC_AT + i);
        }
    }
    cdc_storage_close(wh);
    return rec;
}

/* Offsets bases (docs/protocol.md, "Offsets base"): with more offsets than
 * --checkpoint-inline-offsets the records hold only the topics that moved; a leader
 * that dies between the record and the commit is replaced by one that completes that
 * record from its base, commits it and assigns the slots from it. */
static void test_offsets_base(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    char dir[1200], **locs = NULL;
    cdc_storage_t *wh;
    cdc_checkpoint_t *rec;
    cdc_error_t e;
    size_t nbases = 0;
    uint64_t latest;
    int status = 0;
    bool delta;
    (void)state;

    scenario_open(&s, "offbase");
    /* 12 slots x 5 topics = 60 offsets > 20; "cdc.fk.items" moves, 12 per record */
    extra_opts[0] = "--checkpoint-inline-offsets=20";
    start_coordinator(&s, 0, NULL);
    for (int i = 0; i < 3; i++)
        start_worker_mode(&s, i, "statics");
    wait_more_commits(&s, 3, 30000);
    rec = latest_record(&s, &delta);
    assert_true(delta);
    cdc_checkpoint_free(rec);
    /* replace the leader by one that dies between the etcd record and the commit */
    cdc_test_kill(s.coords[0], SIGTERM, 5000);
    start_coordinator(&s, 0, "after-checkpoint-record");
    assert_true(cdc_test_wait_exit(s.coords[0], 30000, &status));
    s.coords[0] = 0;
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 86);
    latest = etcd_number(&s, "latest");
    assert_true(latest > etcd_number(&s, "committed"));
    rec = latest_record(&s, &delta); /* the record the next leader must complete */
    assert_true(delta);
    cdc_checkpoint_free(rec);
    start_coordinator(&s, 1, NULL);
    wait_more_commits(&s, 4, 30000);
    assert_true(etcd_number(&s, "committed") > latest);
    rec = latest_record(&s, &delta);
    assert_true(delta);
    cdc_checkpoint_free(rec);
    /* each term wrote its own base */
    snprintf(dir, sizeof(dir), "%s/_cdc/%s/offsets/", s.warehouse, s.job);
    assert_int_equal(cdc_storage_open(s.warehouse, NULL, &wh, &e), CDC_OK);
    assert_int_equal(cdc_storage_list(wh, dir, &locs, &nbases, &e), CDC_OK);
    fprintf(stderr, "offsets bases: %zu\n", nbases);
    assert_true(nbases >= 2);
    cdc_storage_list_free(locs, nbases);
    cdc_storage_close(wh);
    extra_opts[0] = NULL;
    quiesce_and_verify(&s);
    scenario_close(&s);
}

static void test_etcd_restart(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    (void)state;

    scenario_open(&s, "etcd");
    start_coordinator(&s, 0, NULL);
    start_workers(&s, 3);
    wait_more_commits(&s, 4, 30000);
    assert_true(cdc_test_harness("etcd-stop"));
    {
        /* commits pause (each needs its etcd record first) */
        int before = committed_snapshots(&s);
        long long until = cdc_test_now_ms() + 2500;
        while (cdc_test_now_ms() < until)
            usleep(100000);
        assert_true(committed_snapshots(&s) <= before + 1);
    }
    assert_true(cdc_test_harness("etcd-start"));
    wait_more_commits(&s, 5, 40000);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

static bool file_gone(void *arg)
{
    return access((const char *)arg, F_OK) != 0;
}

/* Orphan cleanup: an unreferenced file in <table>/data/ goes, committed files stay. */
static void test_orphans(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    char path[1300];
    FILE *f;
    (void)state;

    scenario_open(&s, "orphan");
    extra_opts[0] = "--orphan-age=1s";
    extra_opts[1] = "--orphan-interval=300ms";
    start_coordinator(&s, 0, NULL);
    memset(extra_opts, 0, sizeof(extra_opts));
    start_workers(&s, 3);
    wait_more_commits(&s, 3, 30000);
    snprintf(path, sizeof(path), "%s/fk/items/data/orphan-of-an-aborted-epoch.parquet",
             s.warehouse);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("PAR1 not really", f);
    fclose(f);
    assert_true(cdc_test_wait_for(file_gone, path, 15000));
    /* a worker killed mid-epoch leaves staged files behind; they go too */
    cdc_test_kill(s.workers[0], SIGKILL, 2000);
    s.workers[0] = 0;
    wait_more_commits(&s, 6, 30000);
    quiesce_and_verify(&s); /* every committed file is still readable */
    scenario_close(&s);
}

/* Snapshot expiry keeps the metadata small when committing often, and the table still
 * holds every record exactly once (the already-committed check survives expiry). */
static void test_snapshot_expiry(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    (void)state;

    scenario_open(&s, "expire");
    extra_opts[0] = "--snapshot-retention=1s";
    extra_opts[1] = "--snapshot-min-keep=3";
    extra_opts[2] = "--orphan-interval=300ms";
    start_coordinator(&s, 0, NULL);
    memset(extra_opts, 0, sizeof(extra_opts));
    start_workers(&s, 3);
    /* commits go on (counted in etcd, not in snapshots, which expiry removes) */
    wait_committed_t w = {&s, etcd_number(&s, "committed") + 12};
    assert_true(cdc_test_wait_for(committed_reached, &w, 60000));
    /* 12+ commits at 1 s intervals, retention 1 s: far fewer snapshots than commits remain */
    int n = committed_snapshots(&s);
    cdc_log_info("snapshots retained after %llu commits: %d", (unsigned long long)w.target, n);
    assert_true(n >= 1);
    assert_true(n <= 6);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

static uint64_t latest_at_break; /* etcd "latest" when the warehouse broke */

/* An epoch recorded after the warehouse broke is waiting for its commit. */
static bool recorded_ahead(void *arg)
{
    scenario_t *s = arg;
    uint64_t latest = etcd_number(s, "latest");
    return latest > latest_at_break && latest > etcd_number(s, "committed");
}

/* Warehouse write failure at commit time: recorded epochs are retried, none is lost. */
static void test_warehouse_failure(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    char md[1300], away[1400];
    FILE *f;
    int before;
    (void)state;

    scenario_open(&s, "whfail");
    start_coordinator(&s, 0, NULL);
    start_workers(&s, 3);
    wait_more_commits(&s, 3, 30000);
    snprintf(md, sizeof(md), "%s/fk/items/metadata", s.warehouse);
    snprintf(away, sizeof(away), "%s.away", md);
    before = committed_snapshots(&s);
    latest_at_break = etcd_number(&s, "latest");
    /* the metadata directory becomes a plain file: every commit attempt fails */
    assert_int_equal(rename(md, away), 0);
    f = fopen(md, "w");
    assert_non_null(f);
    fclose(f);
    /* the next epoch gets recorded in etcd but cannot be committed (slow under ASan) */
    assert_true(cdc_test_wait_for(recorded_ahead, &s, 20000));
    uint64_t recorded = etcd_number(&s, "latest"), committed = etcd_number(&s, "committed");
    fprintf(stderr, "warehouse down: latest %" PRIu64 " committed %" PRIu64 "\n", recorded,
            committed);
    assert_true(recorded > committed);
    assert_int_equal(unlink(md), 0);
    assert_int_equal(rename(away, md), 0);
    assert_int_equal(committed_snapshots(&s), before);
    wait_more_commits(&s, 5, 30000);
    quiesce_and_verify(&s);
    scenario_close(&s);
}

static char *status_json(scenario_t *s)
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

static bool state_is(void *arg)
{
    want_state_t *w = arg;
    char *js = status_json(w->s);
    json_t *o = js ? json_loads(js, 0, NULL) : NULL;
    bool ok = o && strcmp(json_string_value(json_object_get(o, "state")) ?: "", w->state) == 0;
    json_decref(o);
    free(js);
    return ok;
}

/* The leader's /status "coordinators" (through cdcctl), as "id role alive,...", equals
 * w->state. */
static bool coordinators_are(void *arg)
{
    want_state_t *w = arg;
    char *js = status_json(w->s), got[512] = "";
    json_t *o = js ? json_loads(js, 0, NULL) : NULL, *cs = json_object_get(o, "coordinators");
    size_t off = 0;

    for (size_t i = 0; i < json_array_size(cs) && off < sizeof(got); i++) {
        json_t *c = json_array_get(cs, i);
        off += (size_t)snprintf(got + off, sizeof(got) - off, "%s%s %s %d", i ? "," : "",
                                json_string_value(json_object_get(c, "id")) ?: "",
                                json_string_value(json_object_get(c, "role")) ?: "",
                                json_is_true(json_object_get(c, "alive")));
    }
    json_decref(o);
    free(js);
    return strcmp(got, w->state) == 0;
}

/* Restart strategy: more failures than allowed per interval -> FAILED, visible in /status. */
static void test_restart_strategy_failed(void **state)
{
    static scenario_t s; /* static: teardown() closes it after a failed assertion */
    (void)state;

    scenario_open(&s, "failed");
    extra_opts[0] = "--restart-max-failures=2";
    extra_opts[1] = "--restart-interval=10m";
    start_coordinator(&s, 0, NULL);
    memset(extra_opts, 0, sizeof(extra_opts));
    start_workers(&s, 4);
    wait_more_commits(&s, 2, 30000);
    want_state_t running = {&s, "RUNNING"}, failed = {&s, "FAILED"};
    assert_true(cdc_test_wait_for(state_is, &running, 10000));
    for (int i = 0; i < 3; i++) {
        cdc_test_kill(s.workers[i], SIGKILL, 2000);
        s.workers[i] = 0;
        if (i < 2)
            assert_true(cdc_test_wait_for(state_is, &running, 15000));
    }
    assert_true(cdc_test_wait_for(state_is, &failed, 15000));
    /* FAILED stays FAILED and stops barriers: no further snapshots */
    int before = committed_snapshots(&s);
    long long until = cdc_test_now_ms() + 1500;
    while (cdc_test_now_ms() < until)
        usleep(100000);
    assert_int_equal(committed_snapshots(&s), before);
    assert_true(state_is(&failed));
    verify(&s);
    scenario_close(&s);
}

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
    if (argc > 1 && strcmp(argv[1], "fake-worker") == 0)
        return fake_worker_main(argc, argv);
    static int one = 1, three = 3, twelve = 12;
    const struct CMUnitTest tests[] = {
        {"test_three_workers", test_n_workers, NULL, teardown, &three},
        {"test_one_worker", test_n_workers, NULL, teardown, &one},
        {"test_twelve_workers", test_n_workers, NULL, teardown, &twelve},
        cmocka_unit_test_teardown(test_kill_worker, teardown),
        cmocka_unit_test_teardown(test_pause_worker, teardown),
        cmocka_unit_test_teardown(test_leader_failover, teardown),
        cmocka_unit_test_teardown(test_deposed_leader_drops_workers, teardown),
        cmocka_unit_test_teardown(test_leader_survives_stall, teardown),
        cmocka_unit_test_teardown(test_crash_after_record, teardown),
        cmocka_unit_test_teardown(test_offsets_base, teardown),
        cmocka_unit_test_teardown(test_etcd_restart, teardown),
        cmocka_unit_test_teardown(test_orphans, teardown),
        cmocka_unit_test_teardown(test_snapshot_expiry, teardown),
        cmocka_unit_test_teardown(test_restart_strategy_failed, teardown),
        cmocka_unit_test_teardown(test_warehouse_failure, teardown),
        cmocka_unit_test_teardown(test_worker_auth, teardown),
        cmocka_unit_test_teardown(test_forged_acks, teardown),
    };
    if (argc > 1 && strcmp(argv[1], "--only") == 0 && argc > 2) {
        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
            if (strcmp(tests[i].name, argv[2]) == 0)
                return _cmocka_run_group_tests("coordinator", &tests[i], 1, NULL, NULL);
        return 2;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
