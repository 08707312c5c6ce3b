/*
 * Component tests of cdc-coordinator against real etcd and the real Iceberg library, with
 * fake workers (coordinator_fixture.h): epochs committed exactly once, by 1, 3 and 12
 * workers and through failures, with the warehouse kept small.
 *
 * Failures exercised: kill -9 of a worker mid-epoch, SIGSTOP past the heartbeat timeout
 * then SIGCONT (its late acks are rejected), kill -9 of the leader with a standby (which
 * the leader's /status lists, from its record in etcd, until it leads and lists the dead
 * one as gone), a leader deposed while frozen, a leader whose loop stalls past its lease,
 * a crash between the etcd record and the Iceberg commit (also with offsets bases), etcd
 * stopped and restarted, a warehouse that fails commits, and more worker failures than the
 * restart strategy allows (FAILED). Orphan cleanup and snapshot expiry keep every
 * committed record.
 */
#include "tests/integration/coordinator/coordinator_fixture.h"

typedef struct want_state {
    scenario_t *s;
    const char *state;
} want_state_t;
static bool coordinators_are(void *arg);

static pid_t start_worker(scenario_t *s, int idx)
{
    return start_worker_mode(s, idx, NULL);
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

int main(int argc, char **argv)
{
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
    };
    return coordinator_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
