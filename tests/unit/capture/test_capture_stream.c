/*
 * Unit tests for the capture's session logic (capture/stream.c), without PostgreSQL or
 * Kafka: what a session does with its slot (resume, create, adopt one without the
 * snapshot marker or, with --slot-recreate, drop and create it, a slot another process
 * streams, a lost slot failing or re-snapshotted),
 * when the loop confirms what Kafka acked, how a session's end is classified (stop,
 * fail, standby, retry with backoff), and the /status document.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "capture/stream_int.h"
#include "common/clock.h"

typedef struct fixture {
    cdc_capture_config_t cfg;
    cdc_capture_t cap;
    cdc_metrics_t *reg;
    volatile sig_atomic_t stop;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->cfg.slot = "cdc_slot";
    f->cfg.publication = "cdc_pub";
    f->cfg.topic_prefix = "pfx";
    f->cfg.snapshot_mode = "initial";
    f->cfg.slot_lost = "fail";
    f->cfg.slot_busy = "wait";
    f->cfg.status_interval_ms = 10000;
    f->cfg.reconnect_max_ms = 30000;
    f->reg = cdc_metrics_new();
    assert_non_null(f->reg);
    f->cap.cfg = &f->cfg;
    f->cap.stop = &f->stop;
    f->cap.m_standby = cdc_metrics_gauge(f->reg, "standby", "h", NULL);
    f->cap.m_slot_lost = cdc_metrics_gauge(f->reg, "slot_lost", "h", NULL);
    f->cap.m_reconnects = cdc_metrics_counter(f->reg, "reconnects", "h", NULL);
    cdc_capture_status_init(&f->cap);
    cdc_txtrack_init(&f->cap.track, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    cdc_capture_free(&f->cap);
    cdc_metrics_free(f->reg);
    free(f);
    return 0;
}

/* ---- the slot plan ----------------------------------------------------------------- */

static void test_plan_resume(void **state)
{
    fixture_t *f = *state;
    cdc_capture_slot_plan_t plan;
    cdc_error_t e;

    /* the snapshot of the slot completed: stream on from its confirmed position */
    f->cap.snapshot_marked = true;
    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, false, 0, &plan, &e), CDC_OK);
    assert_false(plan.drop);
    assert_false(plan.create);
    assert_false(f->cap.resnapshot);

    /* without a snapshot the marker does not matter */
    f->cfg.snapshot_mode = "never";
    f->cap.snapshot_marked = false;
    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, false, 0, &plan, &e), CDC_OK);
    assert_false(plan.drop);
    assert_false(plan.create);
}

static void test_plan_create(void **state)
{
    fixture_t *f = *state;
    cdc_capture_slot_plan_t plan;
    cdc_error_t e;

    assert_int_equal(cdc_capture_slot_plan(&f->cap, false, false, 0, &plan, &e), CDC_OK);
    assert_false(plan.drop);
    assert_true(plan.create);
    assert_true(plan.initial);

    f->cfg.snapshot_mode = "never";
    assert_int_equal(cdc_capture_slot_plan(&f->cap, false, false, 0, &plan, &e), CDC_OK);
    assert_false(plan.drop);
    assert_true(plan.create);
    assert_false(plan.initial);
    assert_false(f->cap.resnapshot);
    assert_false(f->cap.slot_lost);
}

static void test_plan_unfinished_snapshot(void **state)
{
    fixture_t *f = *state;
    cdc_capture_slot_plan_t plan;
    cdc_error_t e;

    /* a slot without the marker (pre-created by an operator, or left by a capture killed
     * during its snapshot) is adopted, never dropped: streamed from its position, the
     * tables read by incremental snapshots; in every mode */
    char *modes[] = {"initial", "incremental", "never"};
    for (size_t i = 0; i < 3; i++) {
        f->cfg.snapshot_mode = modes[i];
        assert_int_equal(cdc_capture_slot_plan(&f->cap, true, false, 0, &plan, &e), CDC_OK);
        assert_false(plan.drop);
        assert_false(plan.create);
        assert_true(plan.adopt);
        assert_false(f->cap.resnapshot); /* no mirror is truncated for that */
    }

    /* --slot-recreate: dropped and created again, with a whole initial snapshot (tables
     * an unfinished snapshot registered are read again) */
    f->cfg.slot_recreate = true;
    f->cfg.snapshot_mode = "incremental";
    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, false, 0, &plan, &e), CDC_OK);
    assert_true(plan.drop);
    assert_true(plan.create);
    assert_true(plan.initial);
    assert_false(plan.adopt);
    f->cfg.snapshot_mode = "never";
    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, false, 0, &plan, &e), CDC_OK);
    assert_true(plan.drop && plan.create);
    assert_false(plan.initial);

    /* a slot with its marker resumes (its snapshots resume after their last chunk),
     * --slot-recreate or not */
    f->cfg.snapshot_mode = "incremental";
    f->cap.snapshot_marked = true;
    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, false, 0, &plan, &e), CDC_OK);
    assert_false(plan.drop || plan.create || plan.adopt);
    f->cfg.slot_recreate = false;
    f->cap.snapshot_marked = false;
    /* a new slot: no exported snapshot, the tables are read by incremental snapshots */
    assert_int_equal(cdc_capture_slot_plan(&f->cap, false, false, 0, &plan, &e), CDC_OK);
    assert_false(plan.drop);
    assert_true(plan.create);
    assert_false(plan.initial);
    assert_false(plan.adopt);
}

static void test_plan_slot_in_use(void **state)
{
    fixture_t *f = *state;
    cdc_capture_slot_plan_t plan;
    cdc_error_t e;

    f->cap.registry_loaded = true;
    f->cap.snapshot_marked = true;
    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, false, 4242, &plan, &e),
                     CDC_ERR_CONFLICT);
    assert_true(e.retriable);
    assert_non_null(strstr(e.msg, "\"cdc_slot\""));
    assert_non_null(strstr(e.msg, "4242"));
    assert_false(plan.drop || plan.create);
    assert_true(f->cap.standby);
    assert_true(f->cap.slot_busy);
    assert_true(cdc_metrics_value(f->cap.m_standby) == 1);
    /* what the active capture registers meanwhile is read again at the takeover */
    assert_false(f->cap.registry_loaded);

    /* a walsender on a lost slot: still another process's */
    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, true, 7, &plan, &e), CDC_ERR_CONFLICT);
    assert_false(f->cap.slot_lost);
}

/* --slot-busy=fail exits (docs/configuration.md): the conflict must not be retried */
static void test_slot_busy_fail_exits(void **state)
{
    fixture_t *f = *state;
    cdc_capture_slot_plan_t plan;
    cdc_error_t e;
    int64_t backoff = CDC_CAPTURE_BACKOFF_MIN_MS, wait = 0;
    cdc_err_t rc;

    f->cfg.slot_busy = "fail";
    rc = cdc_capture_slot_plan(&f->cap, true, false, 4242, &plan, &e);
    assert_int_equal(rc, CDC_ERR_CONFLICT);
    assert_false(e.retriable);
    assert_non_null(strstr(e.msg, "--slot-busy=fail"));
    assert_false(f->cap.slot_busy);
    assert_int_equal(cdc_capture_session_ended(&f->cap, rc, &e, &backoff, &wait),
                     CDC_CAPTURE_NEXT_FAIL);

    /* --slot-busy=wait: a standby */
    f->cfg.slot_busy = "wait";
    rc = cdc_capture_slot_plan(&f->cap, true, false, 4242, &plan, &e);
    assert_int_equal(cdc_capture_session_ended(&f->cap, rc, &e, &backoff, &wait),
                     CDC_CAPTURE_NEXT_STANDBY);
}

static void test_plan_slot_lost_fails(void **state)
{
    fixture_t *f = *state;
    cdc_capture_slot_plan_t plan;
    cdc_error_t e;

    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, true, 0, &plan, &e), CDC_ERR_STATE);
    assert_false(e.retriable);
    assert_non_null(strstr(e.msg, "was invalidated"));
    assert_non_null(strstr(e.msg, "--slot-lost=resnapshot"));
    assert_true(f->cap.slot_lost);
    assert_true(cdc_metrics_value(f->cap.m_slot_lost) == 1);
    assert_false(plan.drop || plan.create);

    /* gone without a trace, though the marker says this capture streamed from it: never
     * silently a new slot at a new position */
    f->cap.slot_lost = false;
    f->cap.snapshot_marked = true;
    assert_int_equal(cdc_capture_slot_plan(&f->cap, false, false, 0, &plan, &e), CDC_ERR_STATE);
    assert_non_null(strstr(e.msg, "no longer exists"));
    assert_true(f->cap.slot_lost);
    assert_false(plan.create);

    /* the same under --snapshot-mode=never (its marker says "never", it is one all the same) */
    f->cfg.snapshot_mode = "never";
    assert_int_equal(cdc_capture_slot_plan(&f->cap, false, false, 0, &plan, &e), CDC_ERR_STATE);
}

static void test_plan_slot_lost_resnapshot(void **state)
{
    fixture_t *f = *state;
    cdc_capture_slot_plan_t plan;
    cdc_error_t e;

    f->cfg.slot_lost = "resnapshot";
    f->cfg.snapshot_mode = "never"; /* a re-snapshot reads every table whatever the mode */
    f->cap.snapshot_marked = true;
    /* invalidated: dropped, created again, every table read again into fresh mirrors */
    assert_int_equal(cdc_capture_slot_plan(&f->cap, true, true, 0, &plan, &e), CDC_OK);
    assert_true(plan.drop);
    assert_true(plan.create);
    assert_true(plan.initial);
    assert_true(f->cap.resnapshot);
    assert_false(f->cap.slot_lost);
    assert_true(cdc_metrics_value(f->cap.m_slot_lost) == 1);

    /* dropped by someone: nothing to drop */
    f->cap.resnapshot = false;
    assert_int_equal(cdc_capture_slot_plan(&f->cap, false, false, 0, &plan, &e), CDC_OK);
    assert_false(plan.drop);
    assert_true(plan.create);
    assert_true(plan.initial);
    assert_true(f->cap.resnapshot);
}

/* ---- status updates ---------------------------------------------------------------- */

/* One transaction of one event at end_lsn, committed; acked when ack. */
static void tx(cdc_txtrack_t *track, uint64_t end_lsn, bool ack)
{
    uint64_t id = cdc_txtrack_begin(track);
    assert_true(id != 0);
    cdc_txtrack_add(track, id);
    cdc_txtrack_commit(track, id, end_lsn);
    if (ack)
        cdc_txtrack_acked(track, id, true);
}

static void test_status_due(void **state)
{
    fixture_t *f = *state;
    cdc_capture_t *cap = &f->cap;

    cdc_txtrack_free(&cap->track);
    cdc_txtrack_init(&cap->track, 100);
    cap->confirmed = 100;
    cap->last_status_ms = 1000;

    /* nothing acked beyond the confirmed LSN: only a request or the interval */
    assert_false(cdc_capture_status_due(cap, false, false, 1000));
    assert_false(cdc_capture_status_due(cap, false, false, 5000));
    assert_true(cdc_capture_status_due(cap, false, true, 1000));
    assert_true(cdc_capture_status_due(cap, true, true, 1000));
    assert_false(cdc_capture_status_due(cap, true, false, 10999));
    assert_true(cdc_capture_status_due(cap, true, false, 11000));

    /* committed, not yet acked: confirming it would cover an event Kafka may lose */
    tx(&cap->track, 200, false);
    assert_false(cdc_capture_status_due(cap, false, false, 5000));

    /* acked: due between messages once 50 ms passed, while data flows only at the
     * interval */
    cdc_txtrack_acked(&cap->track, cap->track.head_id, true);
    assert_false(cdc_capture_status_due(cap, false, false, 1049));
    assert_true(cdc_capture_status_due(cap, false, false, 1050));
    assert_false(cdc_capture_status_due(cap, true, false, 1050));
    assert_false(cdc_capture_status_due(cap, true, false, 10999));

    /* once confirmed (cdc_capture_send_status moves cap->confirmed) it is not due again */
    cap->confirmed = cdc_txtrack_confirmable(&cap->track);
    assert_true(cap->confirmed == 200);
    assert_false(cdc_capture_status_due(cap, false, false, 5000));

    /* a failed delivery: the tracker confirms nothing more */
    tx(&cap->track, 300, false);
    cdc_txtrack_acked(&cap->track, cap->track.head_id, false);
    assert_false(cdc_capture_status_due(cap, false, false, 5000));
}

/* ---- the end of a session ---------------------------------------------------------- */

static cdc_capture_next_t ended(fixture_t *f, cdc_err_t rc, bool retriable, int64_t *backoff,
                                int64_t *wait)
{
    cdc_error_t e;
    cdc_error_clear(&e);
    if (rc != CDC_OK)
        cdc_error_set_retriable(&e, rc, retriable, "session failed");
    return cdc_capture_session_ended(&f->cap, rc, &e, backoff, wait);
}

static void test_session_end_classes(void **state)
{
    fixture_t *f = *state;
    int64_t backoff = CDC_CAPTURE_BACKOFF_MIN_MS, wait = -1;

    assert_int_equal(ended(f, CDC_OK, false, &backoff, &wait), CDC_CAPTURE_NEXT_STOP);
    assert_int_equal(wait, 0);

    /* a setup problem: no new session mends it */
    f->cap.streamed = true;
    assert_int_equal(ended(f, CDC_ERR_CONFIG, false, &backoff, &wait), CDC_CAPTURE_NEXT_FAIL);
    assert_false(f->cap.streamed);
    assert_int_equal(ended(f, CDC_ERR_STATE, false, &backoff, &wait), CDC_CAPTURE_NEXT_FAIL);
    assert_true(cdc_metrics_value(f->cap.m_reconnects) == 0);

    /* a lost server or Kafka is retried however the error was flagged */
    assert_int_equal(ended(f, CDC_ERR_UNAVAILABLE, false, &backoff, &wait), CDC_CAPTURE_NEXT_RETRY);
    assert_int_equal(ended(f, CDC_ERR_TIMEOUT, false, &backoff, &wait), CDC_CAPTURE_NEXT_RETRY);
    assert_int_equal(ended(f, CDC_ERR_KAFKA, false, &backoff, &wait), CDC_CAPTURE_NEXT_RETRY);
    /* any other error only when retriable */
    assert_int_equal(ended(f, CDC_ERR_PROTOCOL, true, &backoff, &wait), CDC_CAPTURE_NEXT_RETRY);
    assert_int_equal(ended(f, CDC_ERR_PROTOCOL, false, &backoff, &wait), CDC_CAPTURE_NEXT_FAIL);
    assert_true(cdc_metrics_value(f->cap.m_reconnects) == 4);
}

static void test_session_end_backoff(void **state)
{
    fixture_t *f = *state;
    static const int64_t waits[] = {500, 1000, 2000, 3000, 3000};
    int64_t backoff = CDC_CAPTURE_BACKOFF_MIN_MS, wait = 0;

    f->cfg.reconnect_max_ms = 3000;
    for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
        assert_int_equal(ended(f, CDC_ERR_UNAVAILABLE, true, &backoff, &wait),
                         CDC_CAPTURE_NEXT_RETRY);
        assert_int_equal(wait, waits[i]);
    }
    /* a session that reached streaming starts the backoff over */
    f->cap.streamed = true;
    assert_int_equal(ended(f, CDC_ERR_UNAVAILABLE, true, &backoff, &wait), CDC_CAPTURE_NEXT_RETRY);
    assert_int_equal(wait, 500);
    assert_false(f->cap.streamed);
    assert_int_equal(ended(f, CDC_ERR_UNAVAILABLE, true, &backoff, &wait), CDC_CAPTURE_NEXT_RETRY);
    assert_int_equal(wait, 1000);
}

/* --reconnect-max is the longest wait (100 ms is allowed), the first one included */
static void test_session_end_short_max(void **state)
{
    fixture_t *f = *state;
    int64_t backoff = CDC_CAPTURE_BACKOFF_MIN_MS, wait = 0;

    f->cfg.reconnect_max_ms = 100;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ended(f, CDC_ERR_UNAVAILABLE, true, &backoff, &wait),
                         CDC_CAPTURE_NEXT_RETRY);
        assert_int_equal(wait, 100);
    }
    f->cap.streamed = true;
    assert_int_equal(ended(f, CDC_ERR_UNAVAILABLE, true, &backoff, &wait), CDC_CAPTURE_NEXT_RETRY);
    assert_int_equal(wait, 100);
}

static void test_session_end_standby(void **state)
{
    fixture_t *f = *state;
    int64_t backoff = 4000, wait = 0, logged;

    /* a standby looks at the slot every second; its backoff is left as it was */
    f->cap.slot_busy = true;
    f->cap.standby_logged_ms = cdc_clock_mono_coarse_ms() - 60001;
    assert_int_equal(ended(f, CDC_ERR_CONFLICT, true, &backoff, &wait), CDC_CAPTURE_NEXT_STANDBY);
    assert_int_equal(wait, 1000);
    assert_int_equal(backoff, 4000);
    assert_false(f->cap.slot_busy);
    assert_true(cdc_metrics_value(f->cap.m_reconnects) == 0);
    /* it said so (once a minute) */
    logged = f->cap.standby_logged_ms;
    assert_true(cdc_clock_mono_coarse_ms() - logged < 60000);
    f->cap.slot_busy = true;
    assert_int_equal(ended(f, CDC_ERR_CONFLICT, true, &backoff, &wait), CDC_CAPTURE_NEXT_STANDBY);
    assert_int_equal(f->cap.standby_logged_ms, logged);

    /* --slot-busy=fail: the conflict is not retriable, and fails the capture */
    f->cap.slot_busy = false;
    assert_int_equal(ended(f, CDC_ERR_CONFLICT, false, &backoff, &wait), CDC_CAPTURE_NEXT_FAIL);
}

/* ---- /status ------------------------------------------------------------------------ */

static json_t *status(fixture_t *f)
{
    json_error_t jerr;
    json_t *j;
    assert_non_null(f->cap.report.doc.json);
    j = json_loads(f->cap.report.doc.json, 0, &jerr);
    assert_non_null(j);
    return j;
}

static const char *str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    assert_non_null(s);
    return s;
}

static void test_status_document(void **state)
{
    fixture_t *f = *state;
    cdc_capture_t *cap = &f->cap;
    cdc_capture_table_t *t;
    json_t *j, *tables;

    cdc_capture_status_publish(cap, true);
    j = status(f);
    assert_string_equal(str(j, "slot"), "cdc_slot");
    assert_string_equal(str(j, "publication"), "cdc_pub");
    assert_string_equal(str(j, "state"), "starting");
    assert_string_equal(str(j, "confirmed_lsn"), "0/0");
    assert_int_equal(json_integer_value(json_object_get(j, "lag_bytes")), 0);
    assert_true(json_is_null(json_object_get(j, "safe_wal_bytes")));
    assert_int_equal(json_integer_value(json_object_get(j, "inflight_events")), 0);
    assert_int_equal(json_array_size(json_object_get(j, "tables")), 0);
    json_decref(j);

    cap->confirmed = 0x16B374D848ULL;
    cap->src.server_wal_end = cap->confirmed + 4096;
    cap->report.safe_wal = 1 << 20;
    cap->report.retained_wal = 12345;
    /* listed: the captured tables and the failed ones */
    t = cdc_capture_table_get(cap, "public", "orders");
    t->captured = true;
    t->has_doc = true;
    t->doc.version = 3;
    t->topic_ready = true;
    t = cdc_capture_table_get(cap, "public", "broken");
    t->failed = true;
    t->topic_error = strdup("could not create topic \"pfx.public.broken\": no broker");
    cdc_capture_table_get(cap, "public", "other");
    cdc_capture_status_publish(cap, true);
    j = status(f);
    assert_string_equal(str(j, "confirmed_lsn"), "16/B374D848");
    assert_string_equal(str(j, "server_wal_end"), "16/B374E848");
    assert_int_equal(json_integer_value(json_object_get(j, "lag_bytes")), 4096);
    assert_int_equal(json_integer_value(json_object_get(j, "safe_wal_bytes")), 1 << 20);
    assert_int_equal(json_integer_value(json_object_get(j, "retained_wal_bytes")), 12345);
    tables = json_object_get(j, "tables");
    assert_int_equal(json_array_size(tables), 2);
    assert_string_equal(str(json_array_get(tables, 0), "table"), "public.orders");
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(tables, 0), "schema_version")), 3);
    assert_false(json_is_true(json_object_get(json_array_get(tables, 0), "error")));
    assert_string_equal(str(json_array_get(tables, 1), "table"), "public.broken");
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(tables, 1), "schema_version")), 0);
    assert_true(json_is_true(json_object_get(json_array_get(tables, 1), "error")));
    /* the topic's state, and the last failure to create it (docs/capture.md, "Topics") */
    assert_string_equal(str(json_array_get(tables, 0), "topic"), "ready");
    assert_true(json_is_null(json_object_get(json_array_get(tables, 0), "topic_error")));
    assert_string_equal(str(json_array_get(tables, 1), "topic"), "pending");
    assert_non_null(strstr(str(json_array_get(tables, 1), "topic_error"), "no broker"));
    json_decref(j);

    /* the server behind what was confirmed (a keepalive not yet seen): no negative lag */
    cap->src.server_wal_end = cap->confirmed - 1;
    cdc_capture_status_publish(cap, true);
    j = status(f);
    assert_int_equal(json_integer_value(json_object_get(j, "lag_bytes")), 0);
    json_decref(j);
}

static void test_status_states(void **state)
{
    fixture_t *f = *state;
    cdc_capture_t *cap = &f->cap;
    json_t *j;

    cap->standby = true;
    cdc_capture_status_publish(cap, true);
    j = status(f);
    assert_string_equal(str(j, "state"), "standby");
    json_decref(j);

    cap->ready = true; /* took the slot over */
    cdc_capture_status_publish(cap, true);
    j = status(f);
    assert_string_equal(str(j, "state"), "streaming");
    json_decref(j);

    cap->slot_lost = true; /* above everything: the process is about to exit with 3 */
    cdc_capture_status_publish(cap, true);
    j = status(f);
    assert_string_equal(str(j, "state"), "slot_lost");
    json_decref(j);
}

static void test_status_rate(void **state)
{
    fixture_t *f = *state;
    cdc_capture_t *cap = &f->cap;
    int64_t before = cdc_clock_mono_coarse_ms();
    json_t *j;

    cdc_capture_status_publish(cap, false);
    assert_true(cap->report.next_ms >= before + 1000);
    j = status(f);
    assert_string_equal(str(j, "state"), "starting");
    json_decref(j);

    /* within the second: kept as it was, unless forced */
    cap->ready = true;
    cap->report.next_ms = INT64_MAX;
    cdc_capture_status_publish(cap, false);
    j = status(f);
    assert_string_equal(str(j, "state"), "starting");
    json_decref(j);
    cdc_capture_status_publish(cap, true);
    j = status(f);
    assert_string_equal(str(j, "state"), "streaming");
    json_decref(j);

    cap->ready = false;
    cap->report.next_ms = 0;
    cdc_capture_status_publish(cap, false);
    j = status(f);
    assert_string_equal(str(j, "state"), "starting");
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_plan_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_create, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_unfinished_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_slot_in_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slot_busy_fail_exits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_slot_lost_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_slot_lost_resnapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_due, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_end_classes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_end_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_end_short_max, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_end_standby, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_document, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_states, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_rate, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
