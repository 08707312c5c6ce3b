/*
 * Unit tests for worker/dedup.c and worker/toast.c on a real RocksDB store
 * (common/state.c): exact replay, out-of-order duplicate, replay after restoring the
 * store from a checkpoint copy, TOAST repair from the stored image, a checkpoint taken
 * at a barrier cut while later changes keep coming, truncate (rows of the table reset,
 * replays before it dropped, also after a restore), (entity, lsn, op) keys written only
 * by deletes, floors (a truncate met in another slot: rows swept by position, changes
 * from before it that come later checked per entity), replayed dead letters (never an
 * older state over a newer one, a late one in the changelog once), snapshot rows of a
 * chunk read again (dropped by the snapshot's tag), backfill rows that keep the stream's
 * TOAST values for the changes after them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/state.h"
#include "tests/unit/worker/worker_fixtures.h"
#include "worker/dedup.h"
#include "worker/toast.h"

static const char *TOPIC = "cdc.public.orders";

typedef struct fx {
    char dir[256];
    cdc_catalog_t *cat;
    cdc_dedup_t *d;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    cdc_error_t e;
    size_t n;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(f->dir, sizeof(f->dir), "%s/test_dedup.XXXXXX", tmp);
    assert_non_null(mkdtemp(f->dir));
    f->cat = cdc_catalog_new();
    char *v2 = fixture("capture_schema_v2.json", &n);
    assert_int_equal(cdc_catalog_register_json(f->cat, TOPIC, 2, v2, n, &e), CDC_OK);
    free(v2);
    char db[300];
    snprintf(db, sizeof(db), "%s/db", f->dir);
    assert_int_equal(cdc_dedup_open(db, 86400, &f->d, &e), CDC_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    cdc_dedup_close(f->d);
    cdc_catalog_free(f->cat);
    cdc_state_destroy(f->dir, &e);
    free(f);
    return 0;
}

/* Builds a change for id with the given op/position and optional fields. */
static void make(fx_t *f, cdc_change_t *c, char op, int id, uint64_t commit_lsn, uint64_t lsn,
                 const char *extra)
{
    char v[16384];
    cdc_decode_error_t de;
    if (op == 'd')
        snprintf(
            v, sizeof(v),
            "{\"op\":\"d\",\"before\":{\"id\":%d},\"source\":{\"lsn\":%llu,\"commit_lsn\":%llu}}",
            id, (unsigned long long)lsn, (unsigned long long)commit_lsn);
    else
        snprintf(v, sizeof(v),
                 "{\"op\":\"%c\",\"after\":{\"id\":%d%s},%s\"source\":{\"lsn\":%llu,"
                 "\"commit_lsn\":%llu}}",
                 op, id, extra && extra[0] != '!' && extra[0] ? extra : "",
                 extra && extra[0] == '!' ? extra + 1 : "", (unsigned long long)lsn,
                 (unsigned long long)commit_lsn);
    cdc_decode_input_t in = {TOPIC, 0, 0, NULL, 0, v, strlen(v), 2};
    assert_int_equal(cdc_decode(f->cat, NULL, &in, c, &de), CDC_OK);
}

/* Runs a change through dedup (+ TOAST repair) like the worker does; returns verdict. */
static cdc_dedup_verdict_t apply(fx_t *f, cdc_change_t *c, bool *live)
{
    cdc_error_t e;
    cdc_dedup_verdict_t v;
    uint8_t *img;
    size_t len;
    const char *colname = NULL;
    assert_int_equal(cdc_dedup_check(f->d, c, &v, &img, &len, &e), CDC_OK);
    if (live)
        *live = img != NULL;
    if (v == CDC_DEDUP_NEW || v == CDC_DEDUP_BEFORE_FLOOR) {
        cdc_dedup_carry_snapshot(f->d, c, img, len);
        unsigned unknown = 0;
        assert_int_equal(cdc_toast_repair(c, img, len, &colname, &unknown), CDC_OK);
        assert_int_equal(cdc_dedup_record(f->d, c, NULL, 0, img, len, &e), CDC_OK);
    } else if (v == CDC_DEDUP_LATE_REPLAY) {
        assert_null(img);
        assert_int_equal(cdc_dedup_record_replay(f->d, c, &e), CDC_OK);
    }
    free(img);
    return v;
}

static void test_exact_replay(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    bool live;
    make(f, &c, 'c', 1, 100, 90, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_false(live);
    cdc_change_clear(&c);
    make(f, &c, 'c', 1, 100, 90, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    make(f, &c, 'u', 1, 200, 190, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_true(live);
    cdc_change_clear(&c);
    /* Another entity at the same position is not a duplicate. */
    make(f, &c, 'c', 2, 100, 90, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
}

/* The partition key recorded with a row comes back with the row's next change (its old
 * partition, for the equality delete), survives a flush to the store, is replaced by the
 * next change's key, and is absent for a row recorded without one. */
static void test_partition_key_in_state(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    cdc_error_t e;
    cdc_dedup_verdict_t v;
    uint8_t *img, *part;
    size_t len, plen;
    static const uint8_t k1[] = {3, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 'a'};
    static const uint8_t k2[] = {3, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 'b'};

    make(f, &c, 'c', 1, 100, 90, NULL);
    assert_int_equal(cdc_dedup_check(f->d, &c, &v, &img, &len, &e), CDC_OK);
    assert_null(img);
    assert_int_equal(cdc_dedup_record(f->d, &c, k1, sizeof(k1), NULL, 0, &e), CDC_OK);
    cdc_change_clear(&c);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);

    make(f, &c, 'u', 1, 200, 190, NULL);
    assert_int_equal(cdc_dedup_check(f->d, &c, &v, &img, &len, &e), CDC_OK);
    assert_non_null(img);
    assert_true(cdc_dedup_image_part(img, len, &part, &plen));
    assert_int_equal(plen, sizeof(k1));
    assert_memory_equal(part, k1, sizeof(k1));
    free(part);
    free(img);
    assert_int_equal(cdc_dedup_record(f->d, &c, k2, sizeof(k2), NULL, 0, &e), CDC_OK);
    cdc_change_clear(&c);

    make(f, &c, 'u', 1, 300, 290, NULL);
    assert_int_equal(cdc_dedup_check(f->d, &c, &v, &img, &len, &e), CDC_OK);
    assert_true(cdc_dedup_image_part(img, len, &part, &plen));
    assert_memory_equal(part, k2, sizeof(k2));
    free(part);
    free(img);
    assert_int_equal(cdc_dedup_record(f->d, &c, NULL, 0, NULL, 0, &e),
                     CDC_OK); /* unpartitioned now */
    cdc_change_clear(&c);

    make(f, &c, 'u', 1, 400, 390, NULL);
    assert_int_equal(cdc_dedup_check(f->d, &c, &v, &img, &len, &e), CDC_OK);
    assert_true(cdc_dedup_image_part(img, len, &part, &plen));
    assert_null(part);
    free(img);
    cdc_change_clear(&c);
}

static void test_out_of_order_duplicate(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    make(f, &c, 'c', 5, 100, 90, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'u', 5, 300, 250, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    /* A change at (200, 150) arriving after (300, 250): older, dropped as stale. */
    make(f, &c, 'u', 5, 200, 150, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    /* Same commit, earlier lsn within it. */
    make(f, &c, 'u', 5, 300, 240, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    /* After a delete the position is kept: an old insert replay is dropped. */
    make(f, &c, 'd', 5, 400, 390, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    /* An exact replay of a change before the delete: its position decides (stale). */
    make(f, &c, 'u', 5, 300, 250, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    /* An exact replay of the delete itself: equal position, its key says replay. */
    make(f, &c, 'd', 5, 400, 390, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    make(f, &c, 'c', 5, 100, 80, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    /* A real re-insert after the delete is new, and the entity is not live. */
    bool live = true;
    make(f, &c, 'c', 5, 500, 490, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_false(live);
    cdc_change_clear(&c);
}

/*
 * Every replay of a row's whole history (insert, updates, delete, re-insert, delete) is
 * dropped, in the same write batch (overlay), after a flush, and from a restored copy of
 * a checkpoint; and the lookups a change costs: a new key reads the row and the
 * deleted-row position only, never its (entity, lsn, op) key.
 */
static void test_history_replays(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    cdc_error_t e;
    char cp[300], db2[300], cmd[700];
    static const struct {
        char op;
        uint64_t commit_lsn, lsn;
    } h[] = {{'c', 100, 90},  {'u', 200, 190}, {'u', 200, 195}, {'d', 300, 290},
             {'c', 400, 390}, {'u', 500, 490}, {'d', 600, 590}};
    const size_t n = sizeof(h) / sizeof(h[0]);

    /* Lookup cost of a new key: the table's truncate marker once, then one per key (the
     * row) while the partition has no deleted-row position at all. */
    make(f, &c, 'c', 1000, 10, 10, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    uint64_t before = f->d->store_lookups;
    for (int id = 1001; id <= 1100; id++) {
        make(f, &c, 'c', id, 20, 20, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
        cdc_change_clear(&c);
    }
    assert_int_equal(f->d->store_lookups - before, 100);
    /* Once a delete is recorded (still pending): two, the row and its position. */
    make(f, &c, 'd', 1001, 30, 30, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    before = f->d->store_lookups;
    for (int id = 1101; id <= 1200; id++) {
        make(f, &c, 'c', id, 40, 40, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
        cdc_change_clear(&c);
    }
    assert_int_equal(f->d->store_lookups - before, 200);
    make(f, &c, 'c', 1001, 30, 30, NULL); /* the delete's position still decides */
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);

    for (int round = 0; round < 3; round++) {
        int id = 7 + round;
        for (size_t i = 0; i < n; i++) {
            make(f, &c, h[i].op, id, h[i].commit_lsn, h[i].lsn, NULL);
            assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
            cdc_change_clear(&c);
            /* replay everything so far (overlay in round 0, store after a flush) */
            if (round == 1)
                assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
            for (size_t j = 0; j <= i; j++) {
                make(f, &c, h[j].op, id, h[j].commit_lsn, h[j].lsn, NULL);
                assert_int_not_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
                cdc_change_clear(&c);
            }
        }
    }
    /* From a restored checkpoint copy: the whole history of ids 7..9 again. */
    snprintf(cp, sizeof(cp), "%s/cph", f->dir);
    assert_int_equal(cdc_dedup_checkpoint(f->d, cp, &e), CDC_OK);
    cdc_dedup_close(f->d);
    f->d = NULL;
    snprintf(db2, sizeof(db2), "%s/dbh", f->dir);
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", cp, db2);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(cdc_dedup_open(db2, 86400, &f->d, &e), CDC_OK);
    assert_false(f->d->no_positions); /* the copy holds positions: they are looked up */
    for (int id = 7; id <= 9; id++)
        for (size_t j = 0; j < n; j++) {
            make(f, &c, h[j].op, id, h[j].commit_lsn, h[j].lsn, NULL);
            assert_int_not_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
            cdc_change_clear(&c);
        }
    /* ... while a later change of the deleted row is new. */
    make(f, &c, 'c', 7, 700, 690, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
}

static void test_replay_after_restore(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    cdc_error_t e;
    char cp[300], db2[300];
    for (int id = 1; id <= 100; id++) {
        make(f, &c, 'c', id, 1000 + (uint64_t)id, 1000 + (uint64_t)id, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
        cdc_change_clear(&c);
    }
    snprintf(cp, sizeof(cp), "%s/cp1", f->dir);
    assert_int_equal(cdc_dedup_checkpoint(f->d, cp, &e), CDC_OK);
    /* Changes after the checkpoint are lost with the store (as in a crash). */
    make(f, &c, 'u', 1, 5000, 5000, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    cdc_dedup_close(f->d);
    f->d = NULL;

    /* Another "worker" opens a copy of the checkpoint. */
    snprintf(db2, sizeof(db2), "%s/db2", f->dir);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", cp, db2);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(cdc_dedup_open(db2, 86400, &f->d, &e), CDC_OK);
    for (int id = 1; id <= 100; id++) { /* Kafka replays the epoch: all duplicates */
        make(f, &c, 'c', id, 1000 + (uint64_t)id, 1000 + (uint64_t)id, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
        cdc_change_clear(&c);
    }
    /* The change after the checkpoint is replayed too and is new again. */
    make(f, &c, 'u', 1, 5000, 5000, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_true(cdc_state_size(f->d->st) > 0);
}

static void test_toast_repair(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    char big[9001 + 32];
    memset(big, 'x', 9000);
    big[0] = 'A';
    big[9000] = '\0';
    char extra[9100];
    snprintf(extra, sizeof(extra), ",\"note\":\"%s\",\"customer\":\"ann\"", big);
    make(f, &c, 'c', 9, 10, 10, extra);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    /* Update through another column: note is unchanged TOAST. */
    make(f, &c, 'u', 9, 20, 20, "!\"unchanged_toast\":[\"note\"],");
    assert_true(cdc_toast_needed(&c));
    int note = -1;
    for (size_t i = 0; i < c.schema->ncols; i++)
        if (strcmp(c.schema->cols[i].name, "note") == 0)
            note = (int)i;
    assert_int_equal(c.after.vals[note].kind, CDC_VAL_TOAST);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_int_equal(c.after.vals[note].kind, CDC_VAL_SET);
    assert_int_equal(c.after.vals[note].len, 9000);
    assert_memory_equal(c.after.vals[note].bytes, big, 9000);
    cdc_change_clear(&c);
    /* The repaired value was stored again: a second TOAST update also repairs. */
    make(f, &c, 'u', 9, 30, 30, "!\"unchanged_toast\":[\"note\"],");
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_int_equal(c.after.vals[note].len, 9000);
    cdc_change_clear(&c);
    /* Unknown entity: cannot be repaired. */
    cdc_error_t e;
    cdc_dedup_verdict_t v;
    uint8_t *img;
    size_t len;
    const char *colname = NULL;
    make(f, &c, 'u', 77, 40, 40, "!\"unchanged_toast\":[\"note\"],");
    assert_int_equal(cdc_dedup_check(f->d, &c, &v, &img, &len, &e), CDC_OK);
    assert_null(img);
    unsigned unknown = 0;
    assert_int_equal(cdc_toast_repair(&c, img, len, &colname, &unknown), CDC_ERR_NOT_FOUND);
    assert_string_equal(colname, "note");
    assert_int_equal(unknown, 0);
    cdc_change_clear(&c);
    /* The same key while its table's first snapshot runs (a row older than the capture,
     * docs/worker.md, "Unchanged TOAST values"): the value is unknown, not lost. */
    make(f, &c, 'u', 77, 40, 40, "!\"unchanged_toast\":[\"note\"],\"snapshot_pending\":true,");
    assert_true(c.snapshot_pending);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_int_equal(c.after.vals[note].kind, CDC_VAL_TOAST_UNKNOWN);
    cdc_change_clear(&c);
    /* ... and stays unknown through the next update that leaves it out, mark or not ... */
    make(f, &c, 'u', 77, 50, 50, "!\"unchanged_toast\":[\"note\"],");
    assert_false(c.snapshot_pending);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_int_equal(c.after.vals[note].kind, CDC_VAL_TOAST_UNKNOWN);
    cdc_change_clear(&c);
    /* ... until a change (the snapshot's read) carries the value */
    make(f, &c, 'r', 77, 60, 60, ",\"note\":\"read\"");
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'u', 77, 70, 70, "!\"unchanged_toast\":[\"note\"],\"snapshot_pending\":true,");
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_int_equal(c.after.vals[note].kind, CDC_VAL_SET);
    assert_memory_equal(c.after.vals[note].bytes, "read", 4);
    cdc_change_clear(&c);
}

/* The same history answered from pending writes (before a flush) and from the store
 * (after it): a delete and re-insert inside one batch, then replays of all of it. */
static void test_pending_and_flushed(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    cdc_error_t e;
    bool live;
    for (int round = 0; round < 2; round++) {
        /* Round 1 replays everything: older than the live position, so stale. */
        make(f, &c, 'c', 7, 100, 90, NULL);
        assert_int_equal(apply(f, &c, &live), round == 0 ? CDC_DEDUP_NEW : CDC_DEDUP_STALE);
        cdc_change_clear(&c);
        make(f, &c, 'd', 7, 200, 190, NULL);
        assert_int_equal(apply(f, &c, &live), round == 0 ? CDC_DEDUP_NEW : CDC_DEDUP_STALE);
        assert_true(live || round == 1);
        cdc_change_clear(&c);
        if (round == 0) {
            /* Replay of the insert after the delete: older than the delete's position. */
            make(f, &c, 'c', 7, 100, 90, NULL);
            assert_int_not_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
            assert_false(live);
            cdc_change_clear(&c);
        }
        make(f, &c, 'c', 7, 300, 290, NULL);
        assert_int_equal(apply(f, &c, &live), round == 0 ? CDC_DEDUP_NEW : CDC_DEDUP_REPLAY);
        cdc_change_clear(&c);
        assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    }
}

/* One flush of many keys in descending order, some written several times in the window
 * (update twice; delete; delete then insert again): the store holds each key's last
 * write. */
static void test_flush_last_write_per_key(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    cdc_error_t e;
    uint64_t before;
    bool live;
    for (int id = 60; id >= 1; id--) {
        make(f, &c, 'c', id, 1000 + (uint64_t)id, 1000 + (uint64_t)id, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
        cdc_change_clear(&c);
    }
    make(f, &c, 'u', 10, 2000, 2000, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'u', 10, 2001, 2001, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'd', 20, 2002, 2002, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'c', 20, 2003, 2003, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'd', 30, 2004, 2004, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    assert_int_equal(f->d->pending.nentries, 0);

    /* Everything below is answered by the store. */
    before = f->d->store_lookups;
    for (int id = 1; id <= 60; id++) {
        if (id == 10 || id == 20 || id == 30)
            continue;
        make(f, &c, 'c', id, 1000 + (uint64_t)id, 1000 + (uint64_t)id, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
        cdc_change_clear(&c);
    }
    make(f, &c, 'u', 10, 2000, 2000, NULL); /* before the last update */
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    make(f, &c, 'u', 10, 2001, 2001, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    make(f, &c, 'd', 20, 2002, 2002, NULL); /* the row is live again: its insert is later */
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    make(f, &c, 'u', 20, 2006, 2006, NULL); /* and it has the re-insert's image */
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_true(live);
    cdc_change_clear(&c);
    make(f, &c, 'd', 30, 2004, 2004, NULL); /* deleted: its exact replay is recognized */
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    make(f, &c, 'c', 30, 2005, 2005, NULL); /* after the delete: new */
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_false(live);
    cdc_change_clear(&c);
    assert_true(f->d->store_lookups > before + 60);
}

/* Copies the checkpoint at cp to a fresh store and opens it in place of f->d's store. */
static cdc_dedup_t *open_copy(fx_t *f, const char *cp, const char *name)
{
    char db[300], cmd[700];
    cdc_error_t e;
    cdc_dedup_t *d;
    snprintf(db, sizeof(db), "%s/%s", f->dir, name);
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", cp, db);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(cdc_dedup_open(db, 86400, &d, &e), CDC_OK);
    return d;
}

/* A barrier cut: changes accepted after cdc_dedup_cut (while another thread copies the
 * store) are seen by the record path but are not in that checkpoint; the next flush
 * writes them to the store. */
static void test_checkpoint_at_cut(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    cdc_error_t e;
    char cp[300];
    for (int id = 1; id <= 50; id++) { /* epoch E: ids 1..50, the last batch unflushed */
        make(f, &c, 'c', id, 1000 + (uint64_t)id, 1000 + (uint64_t)id, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
        cdc_change_clear(&c);
        if (id == 30)
            assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    }
    assert_int_equal(cdc_dedup_cut(f->d, &e), CDC_OK);
    /* a second cut before the checkpoint is a bug, not a silent no-op */
    assert_int_not_equal(cdc_dedup_cut(f->d, &e), CDC_OK);
    /* epoch E+1 while the store is held: ids 51..60 and an update of id 1 */
    for (int id = 51; id <= 60; id++) {
        make(f, &c, 'c', id, 2000 + (uint64_t)id, 2000 + (uint64_t)id, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
        cdc_change_clear(&c);
    }
    make(f, &c, 'u', 1, 3000, 3000, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK); /* held: stays pending */
    make(f, &c, 'u', 1, 3000, 3000, NULL);               /* seen through the overlay */
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    snprintf(cp, sizeof(cp), "%s/cp-cut", f->dir);
    assert_int_equal(cdc_dedup_checkpoint_cut(f->d, cp, &e), CDC_OK);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK); /* released: written now */

    /* The checkpoint is epoch E exactly: E's changes are replays, E+1's are new. */
    cdc_dedup_t *live = f->d;
    f->d = open_copy(f, cp, "db-cut");
    for (int id = 1; id <= 50; id++) {
        make(f, &c, 'c', id, 1000 + (uint64_t)id, 1000 + (uint64_t)id, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
        cdc_change_clear(&c);
    }
    make(f, &c, 'c', 55, 2055, 2055, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'u', 1, 3000, 3000, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    cdc_dedup_close(f->d);

    /* The live store has everything, through the store (nothing pending). */
    f->d = live;
    assert_int_equal(f->d->pending.nentries, 0);
    make(f, &c, 'c', 55, 2055, 2055, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    make(f, &c, 'u', 1, 3000, 3000, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
}

/* A change of id with a note of n bytes (its last byte tag), or (n == 0) with note an
 * unchanged TOAST value. */
static void make_note(fx_t *f, cdc_change_t *c, char op, int id, uint64_t lsn, size_t n, char tag)
{
    size_t cap = n + 512;
    char *v = malloc(cap);
    int k;
    cdc_decode_error_t de;
    assert_non_null(v);
    if (n == 0) {
        k = snprintf(v, cap,
                     "{\"op\":\"%c\",\"after\":{\"id\":%d},\"unchanged_toast\":[\"note\"],"
                     "\"source\":{\"lsn\":%llu,\"commit_lsn\":%llu}}",
                     op, id, (unsigned long long)lsn, (unsigned long long)lsn);
    } else {
        k = snprintf(v, cap, "{\"op\":\"%c\",\"after\":{\"id\":%d,\"note\":\"", op, id);
        memset(v + k, 'n', n - 1);
        v[k + (int)n - 1] = tag;
        k += (int)n;
        k += snprintf(v + k, cap - (size_t)k, "\"},\"source\":{\"lsn\":%llu,\"commit_lsn\":%llu}}",
                      (unsigned long long)lsn, (unsigned long long)lsn);
    }
    cdc_decode_input_t in = {TOPIC, 0, 0, NULL, 0, v, (size_t)k, 2};
    assert_int_equal(cdc_decode(f->cat, NULL, &in, c, &de), CDC_OK);
    free(v);
}

/* The note of c after its TOAST repair: n bytes ending in tag. */
static void assert_note(const cdc_change_t *c, size_t n, char tag)
{
    for (size_t i = 0; i < c->schema->ncols; i++)
        if (strcmp(c->schema->cols[i].name, "note") == 0) {
            assert_int_equal(c->after.vals[i].kind, CDC_VAL_SET);
            assert_int_equal(c->after.vals[i].len, n);
            assert_int_equal(c->after.vals[i].bytes[n - 1], tag);
            assert_int_equal(c->after.vals[i].bytes[0], 'n');
            return;
        }
    fail_msg("no note column");
}

/* A row image above CDC_STATE_LARGE_VALUE (docs/worker.md, "Large rows") goes from the
 * row into the store at once, so nothing of it stays pending; a TOAST repair reads it
 * back, from the store, from a checkpoint (its blob file) and, while a cut holds the
 * store, from the overlay, where it then stays until the next flush. */
static void test_large_images(void **state)
{
    fx_t *f = *state;
    const size_t n = (size_t)3 << 20;
    cdc_change_t c;
    cdc_error_t e;
    char cp[300], cmd[700];

    make_note(f, &c, 'c', 5, 100, n, 'A');
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_int_equal(f->d->pending.nentries, 0); /* written already */
    assert_true(f->d->pending.arena_cap <= CDC_STATE_LARGE_VALUE);
    make_note(f, &c, 'u', 5, 200, 0, 0);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_note(&c, n, 'A');
    cdc_change_clear(&c);

    /* a checkpoint keeps it in a blob file, and a store restored from it repairs */
    snprintf(cp, sizeof(cp), "%s/cp-large", f->dir);
    assert_int_equal(cdc_dedup_checkpoint(f->d, cp, &e), CDC_OK);
    snprintf(cmd, sizeof(cmd), "ls '%s' | grep -q '[.]blob$'", cp);
    assert_int_equal(system(cmd), 0);
    cdc_dedup_t *live = f->d;
    f->d = open_copy(f, cp, "db-large");
    make_note(f, &c, 'u', 5, 300, 0, 0);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_note(&c, n, 'A');
    cdc_change_clear(&c);
    cdc_dedup_close(f->d);
    f->d = live;

    /* while a cut holds the store: pending, read through the overlay, written later */
    assert_int_equal(cdc_dedup_cut(f->d, &e), CDC_OK);
    make_note(f, &c, 'c', 6, 400, n + 7, 'B');
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_true(f->d->pending.nentries > 0);
    make_note(f, &c, 'u', 6, 500, 0, 0);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_note(&c, n + 7, 'B');
    cdc_change_clear(&c);
    snprintf(cp, sizeof(cp), "%s/cp-large-cut", f->dir);
    assert_int_equal(cdc_dedup_checkpoint_cut(f->d, cp, &e), CDC_OK);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    assert_int_equal(f->d->pending.nentries, 0);
    assert_true(f->d->pending.arena_cap <= CDC_STATE_LARGE_VALUE);
    make_note(f, &c, 'u', 6, 600, 0, 0);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_note(&c, n + 7, 'B');
    cdc_change_clear(&c);
    make_note(f, &c, 'u', 6, 600, 0, 0); /* and its replay is one */
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
}

/* A truncate event of the test table (capture format: no key, no rows). */
static void make_truncate(fx_t *f, cdc_change_t *c, const char *topic, uint64_t commit_lsn,
                          uint64_t lsn)
{
    char v[512];
    cdc_decode_error_t de;
    snprintf(v, sizeof(v),
             "{\"op\":\"t\",\"before\":null,\"after\":null,\"source\":{\"lsn\":%llu,"
             "\"commit_lsn\":%llu}}",
             (unsigned long long)lsn, (unsigned long long)commit_lsn);
    cdc_decode_input_t in = {topic, 0, 0, NULL, 0, v, strlen(v), 2};
    assert_int_equal(cdc_decode(f->cat, NULL, &in, c, &de), CDC_OK);
    assert_int_equal(c->op, CDC_OP_TRUNCATE);
}

/* Truncate: the table's rows are gone from state (keys are new again), the other table
 * keeps its rows, and replays of the truncate and of anything before it are dropped,
 * also after restoring the store from a checkpoint. */
static void test_truncate(void **state)
{
    fx_t *f = *state;
    cdc_change_t c;
    cdc_error_t e;
    bool live;
    size_t n;
    const char *other = "cdc.public.orders2";
    char *v2 = fixture("capture_schema_v2.json", &n), *pos = strstr(v2, "\"orders\"");
    assert_non_null(pos);
    char doc[8192];
    snprintf(doc, sizeof(doc), "%.*s\"orders2\"%s", (int)(pos - v2), v2, pos + 8);
    free(v2);
    assert_int_equal(cdc_catalog_register_json(f->cat, other, 2, doc, strlen(doc), &e), CDC_OK);

    for (int id = 1; id <= 5; id++) {
        make(f, &c, 'c', id, 100 + (uint64_t)id, 100 + (uint64_t)id, NULL);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
        cdc_change_clear(&c);
        if (id == 3)
            assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK); /* 4, 5 stay pending */
    }
    {
        cdc_decode_error_t de;
        const char *v = "{\"op\":\"c\",\"after\":{\"id\":1},\"source\":{\"lsn\":50,"
                        "\"commit_lsn\":50}}";
        cdc_decode_input_t in = {other, 0, 0, NULL, 0, v, strlen(v), 2};
        assert_int_equal(cdc_decode(f->cat, NULL, &in, &c, &de), CDC_OK);
        assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
        cdc_change_clear(&c);
    }

    make_truncate(f, &c, TOPIC, 200, 200);
    assert_int_equal(c.entity_len, strlen("public.orders") + 1);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    /* after the next flush the rows are gone from the store itself (range delete) */
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    for (int id = 1; id <= 5; id++) {
        void *val = NULL;
        size_t vlen = 0;
        make(f, &c, 'c', id, 1, 1, NULL);
        assert_int_equal(
            cdc_state_get(f->d->st, CDC_ROWS_FAMILY, c.entity, c.entity_len, &val, &vlen, &e),
            CDC_ERR_NOT_FOUND);
        cdc_change_clear(&c);
    }
    make_truncate(f, &c, TOPIC, 200, 200); /* the truncate replayed */
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    /* replays of changes before it (also earlier in its transaction) */
    make(f, &c, 'c', 1, 101, 101, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    make(f, &c, 'c', 5, 105, 105, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    make(f, &c, 'c', 9, 200, 190, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    /* after it (same transaction, later statement; then a later one): keys are new */
    make(f, &c, 'c', 2, 200, 210, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_false(live);
    cdc_change_clear(&c);
    make(f, &c, 'c', 5, 300, 300, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_false(live);
    cdc_change_clear(&c);
    /* the other table is untouched */
    {
        cdc_decode_error_t de;
        const char *v = "{\"op\":\"u\",\"after\":{\"id\":1},\"source\":{\"lsn\":400,"
                        "\"commit_lsn\":400}}";
        cdc_decode_input_t in = {other, 0, 0, NULL, 0, v, strlen(v), 2};
        assert_int_equal(cdc_decode(f->cat, NULL, &in, &c, &de), CDC_OK);
        assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
        assert_true(live);
        cdc_change_clear(&c);
    }

    /* checkpoint, restore elsewhere: the marker comes back from the store */
    char cp[300], db2[300], cmd[700];
    snprintf(cp, sizeof(cp), "%s/cpt", f->dir);
    assert_int_equal(cdc_dedup_checkpoint(f->d, cp, &e), CDC_OK);
    cdc_dedup_close(f->d);
    f->d = NULL;
    snprintf(db2, sizeof(db2), "%s/dbt", f->dir);
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", cp, db2);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(cdc_dedup_open(db2, 86400, &f->d, &e), CDC_OK);
    make(f, &c, 'c', 3, 103, 103, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    make_truncate(f, &c, TOPIC, 200, 200);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    make(f, &c, 'u', 5, 350, 350, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_true(live);
    cdc_change_clear(&c);
    make(f, &c, 'c', 4, 104, 104, NULL); /* was pending at the truncate */
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    /* a second truncate moves the mark */
    make_truncate(f, &c, TOPIC, 500, 500);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'u', 5, 350, 350, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    make(f, &c, 'c', 5, 600, 600, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_false(live);
    cdc_change_clear(&c);
    assert_int_equal(cdc_state_estimate_keys(f->d->st, CDC_ROWS_FAMILY) < 100, true);

    /* a truncate after a barrier cut stays out of that checkpoint */
    assert_int_equal(cdc_dedup_cut(f->d, &e), CDC_OK);
    make_truncate(f, &c, TOPIC, 700, 700);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    make(f, &c, 'u', 5, 650, 650, NULL); /* before it: dropped while still pending */
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    make(f, &c, 'c', 5, 800, 800, NULL);
    assert_int_equal(apply(f, &c, &live), CDC_DEDUP_NEW);
    assert_false(live); /* the row from before is ignored, though still in the store */
    cdc_change_clear(&c);
    snprintf(cp, sizeof(cp), "%s/cpt2", f->dir);
    assert_int_equal(cdc_dedup_checkpoint_cut(f->d, cp, &e), CDC_OK);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    make_truncate(f, &c, TOPIC, 700, 700);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    cdc_dedup_close(f->d);
    f->d = open_copy(f, cp, "dbt2");
    make_truncate(f, &c, TOPIC, 700, 700); /* the checkpoint predates it */
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
}

/* Whether the store (after a flush) holds c's (entity, lsn, op) key. */
static bool seen_key_stored(fx_t *f, const cdc_change_t *c)
{
    uint8_t k[512];
    cdc_error_t e;
    void *v = NULL;
    size_t n = 0;
    assert_true(c->entity_len + 10 <= sizeof(k));
    k[0] = 'S';
    memcpy(k + 1, c->entity, c->entity_len);
    for (int i = 0; i < 8; i++)
        k[1 + c->entity_len + i] = (uint8_t)(c->lsn >> (56 - 8 * i));
    k[9 + c->entity_len] = (uint8_t)c->op;
    cdc_err_t rc = cdc_state_get(f->d->st, CDC_DEDUP_FAMILY, k, c->entity_len + 10, &v, &n, &e);
    assert_true(rc == CDC_OK || rc == CDC_ERR_NOT_FOUND);
    free(v);
    return rc == CDC_OK;
}

/*
 * Only deletes write their (entity, lsn, op) key: it is read only for a change at a
 * deleted row's position. Inserts and updates write one entry ("rows"); the verdicts
 * of their replays come from the positions alone (REPLAY for the equal position of a
 * live row, STALE before it), also from the store after a flush.
 */
static void test_seen_keys_only_for_deletes(void **state)
{
    fx_t *f = *state;
    cdc_change_t c, ins, upd, del;
    cdc_error_t e;
    make(f, &ins, 'c', 9, 100, 90, NULL);
    assert_int_equal(apply(f, &ins, NULL), CDC_DEDUP_NEW);
    make(f, &upd, 'u', 9, 200, 190, NULL);
    assert_int_equal(apply(f, &upd, NULL), CDC_DEDUP_NEW);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    assert_false(seen_key_stored(f, &ins));
    assert_false(seen_key_stored(f, &upd));
    assert_int_equal(cdc_state_estimate_keys(f->d->st, CDC_DEDUP_FAMILY), 0);
    assert_true(f->d->no_positions);
    make(f, &c, 'u', 9, 200, 190, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    make(f, &c, 'c', 9, 100, 90, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    make(f, &del, 'd', 9, 300, 290, NULL);
    assert_int_equal(apply(f, &del, NULL), CDC_DEDUP_NEW);
    assert_false(f->d->no_positions);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    assert_true(seen_key_stored(f, &del));
    /* Reopened, the store's positions are found again. */
    char db[300];
    snprintf(db, sizeof(db), "%s/db", f->dir);
    cdc_dedup_close(f->d);
    assert_int_equal(cdc_dedup_open(db, 86400, &f->d, &e), CDC_OK);
    assert_false(f->d->no_positions);
    make(f, &c, 'd', 9, 300, 290, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_REPLAY);
    cdc_change_clear(&c);
    make(f, &c, 'u', 9, 200, 190, NULL);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_STALE);
    cdc_change_clear(&c);
    cdc_change_clear(&ins);
    cdc_change_clear(&upd);
    cdc_change_clear(&del);
}

typedef struct swept {
    int n;
    int ids[16];
} swept_t;

/* cdc_dedup_floor callback: notes the id (last key byte: ids < 256) of each row swept. */
static cdc_err_t note_row(const uint8_t *entity, size_t len, const uint8_t *val, size_t vlen,
                          void *arg, cdc_error_t *e)
{
    swept_t *sw = arg;
    (void)val;
    (void)e;
    assert_true(vlen >= 16);
    assert_true(len > strlen("public.orders") + 1);
    assert_memory_equal(entity, "public.orders", strlen("public.orders") + 1);
    assert_true(sw->n < 16);
    sw->ids[sw->n++] = entity[len - 1];
    return CDC_OK;
}

static bool swept_has(const swept_t *sw, int id)
{
    for (int i = 0; i < sw->n; i++)
        if (sw->ids[i] == id)
            return true;
    return false;
}

/* Applies change (op, id, position) and returns its verdict (a NEW one says whether the
 * entity was live before). */
static cdc_dedup_verdict_t step(fx_t *f, char op, int id, uint64_t pos, bool *live)
{
    cdc_change_t c;
    make(f, &c, op, id, pos, pos, NULL);
    cdc_dedup_verdict_t v = apply(f, &c, live);
    cdc_change_clear(&c);
    return v;
}

/*
 * A floor (truncate at 200 met in another slot): the rows not after it are passed to the
 * callback, from the store and from the pending overlay alike, and are gone afterwards;
 * a row after it stays; the floor applies once; changes from before it are
 * BEFORE_FLOOR when new to their entity and duplicates when not; the floor survives a
 * reopen; a later truncate in the slot's own stream replaces it.
 */
static void test_floor(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    swept_t sw = {0};
    bool applied, live;
    const uint8_t *table = (const uint8_t *)"public.orders";
    size_t tlen = strlen("public.orders") + 1;

    assert_int_equal(step(f, 'c', 1, 101, NULL), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'c', 2, 102, NULL), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'c', 4, 300, NULL), CDC_DEDUP_NEW); /* after the floor */
    assert_int_equal(step(f, 'c', 5, 105, NULL), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'd', 5, 106, NULL), CDC_DEDUP_NEW); /* not live */
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    assert_int_equal(step(f, 'c', 3, 103, NULL), CDC_DEDUP_NEW); /* pending */
    assert_int_equal(step(f, 'u', 2, 110, NULL), CDC_DEDUP_NEW); /* pending over the store */

    assert_int_equal(cdc_dedup_floor(f->d, table, tlen, 200, 200, note_row, &sw, &applied, &e),
                     CDC_OK);
    assert_true(applied);
    assert_int_equal(sw.n, 3);
    assert_true(swept_has(&sw, 1) && swept_has(&sw, 2) && swept_has(&sw, 3));
    /* once: the same floor, or an earlier one, does nothing */
    sw.n = 0;
    assert_int_equal(cdc_dedup_floor(f->d, table, tlen, 200, 200, note_row, &sw, &applied, &e),
                     CDC_OK);
    assert_false(applied);
    assert_int_equal(cdc_dedup_floor(f->d, table, tlen, 150, 150, note_row, &sw, &applied, &e),
                     CDC_OK);
    assert_false(applied);
    assert_int_equal(sw.n, 0);

    /* after the floor: a swept row is gone, the row after it is live */
    assert_int_equal(step(f, 'u', 1, 250, &live), CDC_DEDUP_NEW);
    assert_false(live);
    assert_int_equal(step(f, 'u', 4, 350, &live), CDC_DEDUP_NEW);
    assert_true(live);
    /* before the floor: new to the entity, or a duplicate */
    assert_int_equal(step(f, 'u', 2, 150, NULL), CDC_DEDUP_BEFORE_FLOOR);
    assert_int_equal(step(f, 'u', 2, 150, NULL), CDC_DEDUP_REPLAY);
    assert_int_equal(step(f, 'u', 2, 102, NULL), CDC_DEDUP_STALE);
    assert_int_equal(step(f, 'c', 6, 180, NULL), CDC_DEDUP_BEFORE_FLOOR);
    assert_int_equal(step(f, 'c', 6, 180, NULL), CDC_DEDUP_REPLAY);
    assert_int_equal(step(f, 'u', 4, 190, NULL), CDC_DEDUP_STALE); /* its row is after it */
    assert_int_equal(step(f, 'c', 5, 105, NULL), CDC_DEDUP_STALE); /* before its delete */
    assert_int_equal(step(f, 'c', 5, 150, NULL), CDC_DEDUP_BEFORE_FLOOR);
    /* and a change before the floor never makes a row live after it */
    assert_int_equal(step(f, 'u', 6, 260, &live), CDC_DEDUP_NEW);
    assert_false(live);

    /* the floor is kept in the store */
    char db[300];
    snprintf(db, sizeof(db), "%s/db", f->dir);
    cdc_dedup_close(f->d);
    assert_int_equal(cdc_dedup_open(db, 86400, &f->d, &e), CDC_OK);
    assert_int_equal(step(f, 'c', 7, 150, NULL), CDC_DEDUP_BEFORE_FLOOR);
    assert_int_equal(cdc_dedup_floor(f->d, table, tlen, 200, 200, note_row, &sw, &applied, &e),
                     CDC_OK);
    assert_false(applied);

    /* a truncate in the slot's own stream: everything before it is a duplicate again */
    cdc_change_t c;
    make_truncate(f, &c, TOPIC, 400, 400);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_int_equal(step(f, 'c', 8, 390, NULL), CDC_DEDUP_STALE);
    assert_int_equal(step(f, 'c', 8, 410, NULL), CDC_DEDUP_NEW);
}

/* Applies a change that cdcctl dlq replay put back; returns its verdict. */
static cdc_dedup_verdict_t replay(fx_t *f, char op, int id, uint64_t pos)
{
    cdc_change_t c;
    make(f, &c, op, id, pos, pos, NULL);
    c.replayed = true;
    cdc_dedup_verdict_t v = apply(f, &c, NULL);
    cdc_change_clear(&c);
    return v;
}

/* The position of id's row in state (0 when it is not live). */
static uint64_t row_position(fx_t *f, int id)
{
    cdc_change_t c;
    cdc_error_t e;
    void *val = NULL;
    size_t vlen = 0;
    uint64_t pos = 0;
    make(f, &c, 'u', id, 1, 1, NULL);
    cdc_dedup_flush(f->d, &e);
    if (cdc_state_get(f->d->st, CDC_ROWS_FAMILY, c.entity, c.entity_len, &val, &vlen, &e) ==
            CDC_OK &&
        vlen >= 16)
        for (int i = 8; i < 16; i++)
            pos = pos << 8 | ((uint8_t *)val)[i];
    free(val);
    cdc_change_clear(&c);
    return pos;
}

/*
 * Replayed dead letters (dedup.h, "Replayed dead letters"): one after its row's position
 * is applied; one not after it leaves the row's newer state alone and is taken for the
 * changelog once (LATE_REPLAY); any later replay of either is a duplicate, also after
 * newer changes, a flush and a reopen, for a deleted row and after a truncate. A change
 * that is not a replay keeps the usual verdicts.
 */
static void test_replayed_dead_letters(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    bool live;

    /* row 1: an update at 200 failed; the row moved on to 300 */
    assert_int_equal(step(f, 'c', 1, 100, NULL), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'u', 1, 300, NULL), CDC_DEDUP_NEW);
    assert_int_equal(replay(f, 'u', 1, 200), CDC_DEDUP_LATE_REPLAY);
    assert_int_equal(row_position(f, 1), 300); /* never an older state over a newer one */
    assert_int_equal(replay(f, 'u', 1, 200), CDC_DEDUP_REPLAY);
    assert_int_equal(step(f, 'u', 1, 200, NULL), CDC_DEDUP_STALE); /* not a replay */

    /* row 2: its insert failed; replayed, it is applied; again, and after a newer change,
     * it is a duplicate */
    assert_int_equal(replay(f, 'c', 2, 100), CDC_DEDUP_NEW);
    assert_int_equal(row_position(f, 2), 100);
    assert_int_equal(replay(f, 'c', 2, 100), CDC_DEDUP_REPLAY);
    assert_int_equal(step(f, 'u', 2, 400, &live), CDC_DEDUP_NEW);
    assert_true(live);
    assert_int_equal(replay(f, 'c', 2, 100), CDC_DEDUP_REPLAY);
    assert_int_equal(row_position(f, 2), 400);

    /* row 3: deleted since its update failed */
    assert_int_equal(step(f, 'c', 3, 100, NULL), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'd', 3, 300, NULL), CDC_DEDUP_NEW);
    assert_int_equal(replay(f, 'u', 3, 200), CDC_DEDUP_LATE_REPLAY);
    assert_int_equal(row_position(f, 3), 0);
    assert_int_equal(replay(f, 'u', 3, 200), CDC_DEDUP_REPLAY);
    assert_int_equal(replay(f, 'd', 3, 300), CDC_DEDUP_REPLAY);

    /* the table truncated since row 4's insert failed */
    cdc_change_t t;
    make_truncate(f, &t, TOPIC, 500, 500);
    assert_int_equal(apply(f, &t, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&t);
    assert_int_equal(replay(f, 'c', 4, 450), CDC_DEDUP_LATE_REPLAY);
    assert_int_equal(row_position(f, 4), 0);
    assert_int_equal(replay(f, 'c', 4, 450), CDC_DEDUP_REPLAY);
    assert_int_equal(step(f, 'c', 4, 440, NULL), CDC_DEDUP_STALE); /* not a replay */

    /* the keys are in the store: a reopened store still knows every replay */
    char db[300];
    snprintf(db, sizeof(db), "%s/db", f->dir);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    cdc_dedup_close(f->d);
    assert_int_equal(cdc_dedup_open(db, 86400, &f->d, &e), CDC_OK);
    assert_int_equal(replay(f, 'u', 1, 200), CDC_DEDUP_REPLAY);
    assert_int_equal(replay(f, 'c', 2, 100), CDC_DEDUP_REPLAY);
    assert_int_equal(replay(f, 'u', 3, 200), CDC_DEDUP_REPLAY);
    assert_int_equal(replay(f, 'c', 4, 450), CDC_DEDUP_REPLAY);
    /* a replayed change after its row's position is applied as any new change */
    assert_int_equal(replay(f, 'u', 1, 600), CDC_DEDUP_NEW);
    assert_int_equal(row_position(f, 1), 600);

    /* row 5: an update applied with a column made null, its record dead-lettered too
     * (docs/worker.md, "Values no Iceberg type holds"): the dead letter replayed, before
     * or after a newer change of the row, is a duplicate, never a second change */
    cdc_change_t c;
    assert_int_equal(step(f, 'c', 5, 700, NULL), CDC_DEDUP_NEW);
    make(f, &c, 'u', 5, 800, 800, NULL);
    c.nulled = 1;
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_int_equal(replay(f, 'u', 5, 800), CDC_DEDUP_REPLAY);
    assert_int_equal(step(f, 'u', 5, 900, NULL), CDC_DEDUP_NEW);
    assert_int_equal(replay(f, 'u', 5, 800), CDC_DEDUP_REPLAY);
    assert_int_equal(row_position(f, 5), 900);
}

/* A snapshot row of id at pos, as the capture writes it (source.snapshot_id; id NULL:
 * none, as a backfill after DDL), through dedup; returns its verdict. */
static cdc_dedup_verdict_t read_row(fx_t *f, int id, const char *snap, uint64_t pos)
{
    char v[512];
    cdc_change_t c;
    cdc_decode_error_t de;
    snprintf(v, sizeof(v),
             "{\"op\":\"r\",\"after\":{\"id\":%d},\"source\":{\"lsn\":%llu,"
             "\"commit_lsn\":%llu,\"snapshot\":\"%s\"%s%s%s}}",
             id, (unsigned long long)pos, (unsigned long long)pos,
             snap ? "incremental" : "backfill", snap ? ",\"snapshot_id\":\"" : "", snap ? snap : "",
             snap ? "\"" : "");
    cdc_decode_input_t in = {TOPIC, 0, 0, NULL, 0, v, strlen(v), 2};
    assert_int_equal(cdc_decode(f->cat, NULL, &in, &c, &de), CDC_OK);
    assert_int_equal(c.op, CDC_OP_READ);
    assert_true(snap == NULL ? c.snapshot_tag == 0 : c.snapshot_tag != 0);
    cdc_dedup_verdict_t r = apply(f, &c, NULL);
    cdc_change_clear(&c);
    return r;
}

/*
 * Snapshot reads exactly once (dedup.h, "Snapshot reads"): a snapshot row of a snapshot
 * that read its live row already is a duplicate, whether the row changed since (its
 * changes carry the tag over) or not, across a flush and a reopen; another snapshot's
 * row lands (a re-snapshot on request), a row with no snapshot id (a backfill after DDL)
 * lands and keeps the row's tag; a row first seen by the stream takes the snapshot's
 * first read; a row deleted and inserted again since keeps its tag through the delete's
 * position (which still tells replays); a truncate forgets the tags with the rows.
 */
static void test_snapshot_reads(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;

    /* row 1: read by snapshot s1, its chunk read again after a capture crash */
    assert_int_equal(read_row(f, 1, "s1", 100), CDC_DEDUP_NEW);
    assert_int_equal(read_row(f, 1, "s1", 200), CDC_DEDUP_SNAPSHOT_REREAD);
    assert_int_equal(read_row(f, 1, "s1", 100), CDC_DEDUP_REPLAY); /* a Kafka replay */
    /* changed between the two reads: still the same snapshot's row */
    assert_int_equal(step(f, 'u', 1, 300, NULL), CDC_DEDUP_NEW);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    assert_int_equal(read_row(f, 1, "s1", 400), CDC_DEDUP_SNAPSHOT_REREAD);
    assert_int_equal(row_position(f, 1), 300);
    /* a re-snapshot on request: a new snapshot, its rows land once */
    assert_int_equal(read_row(f, 1, "s2", 500), CDC_DEDUP_NEW);
    assert_int_equal(read_row(f, 1, "s2", 600), CDC_DEDUP_SNAPSHOT_REREAD);
    assert_int_equal(read_row(f, 1, "s1", 650), CDC_DEDUP_NEW); /* not s2's */
    assert_int_equal(read_row(f, 1, "s2", 660), CDC_DEDUP_NEW);
    /* a backfill after DDL (no id) always lands, and the row keeps s2 */
    assert_int_equal(read_row(f, 1, NULL, 700), CDC_DEDUP_NEW);
    assert_int_equal(read_row(f, 1, NULL, 710), CDC_DEDUP_NEW);
    assert_int_equal(read_row(f, 1, "s2", 800), CDC_DEDUP_SNAPSHOT_REREAD);

    /* row 2: inserted by the stream before its chunk was read; read twice */
    assert_int_equal(step(f, 'c', 2, 100, NULL), CDC_DEDUP_NEW);
    assert_int_equal(read_row(f, 2, "s1", 200), CDC_DEDUP_NEW);
    assert_int_equal(read_row(f, 2, "s1", 300), CDC_DEDUP_SNAPSHOT_REREAD);

    /* row 3: deleted and inserted again between the two reads: the delete keeps the
     * tag, the insert takes it back */
    assert_int_equal(read_row(f, 3, "s1", 100), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'd', 3, 200, NULL), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'c', 3, 300, NULL), CDC_DEDUP_NEW);
    assert_int_equal(read_row(f, 3, "s1", 400), CDC_DEDUP_SNAPSHOT_REREAD);
    assert_int_equal(read_row(f, 3, "s2", 450), CDC_DEDUP_NEW);
    /* row 4: never read by a snapshot, deleted and inserted again: no tag */
    assert_int_equal(step(f, 'c', 4, 100, NULL), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'd', 4, 200, NULL), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'd', 4, 200, NULL), CDC_DEDUP_REPLAY); /* 16-byte position */
    assert_int_equal(step(f, 'c', 4, 300, NULL), CDC_DEDUP_NEW);
    assert_int_equal(read_row(f, 4, "s1", 400), CDC_DEDUP_NEW);
    /* row 5: deleted after its read, the delete replayed: a replay, by its position */
    assert_int_equal(read_row(f, 5, "s1", 100), CDC_DEDUP_NEW);
    assert_int_equal(step(f, 'd', 5, 200, NULL), CDC_DEDUP_NEW);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    assert_int_equal(step(f, 'd', 5, 200, NULL), CDC_DEDUP_REPLAY);
    assert_int_equal(step(f, 'u', 5, 150, NULL), CDC_DEDUP_STALE);

    /* the tags are in the store */
    char db[300];
    snprintf(db, sizeof(db), "%s/db", f->dir);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    cdc_dedup_close(f->d);
    assert_int_equal(cdc_dedup_open(db, 86400, &f->d, &e), CDC_OK);
    assert_int_equal(read_row(f, 1, "s2", 900), CDC_DEDUP_SNAPSHOT_REREAD);
    assert_int_equal(read_row(f, 2, "s1", 900), CDC_DEDUP_SNAPSHOT_REREAD);

    /* a truncate (a table that rejoined the publication) forgets them with the rows */
    cdc_change_t t;
    make_truncate(f, &t, TOPIC, 1000, 1000);
    assert_int_equal(apply(f, &t, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&t);
    assert_int_equal(read_row(f, 1, "s2", 1100), CDC_DEDUP_NEW);
}

/* A backfill row (op r, source.snapshot "backfill") of id at (commit_lsn, lsn) whose note
 * is the read's value, through dedup like the worker takes it. */
static cdc_dedup_verdict_t backfill_row(fx_t *f, int id, uint64_t commit_lsn, uint64_t lsn,
                                        const char *note)
{
    char v[512];
    cdc_change_t c;
    cdc_decode_error_t de;
    snprintf(v, sizeof(v),
             "{\"op\":\"r\",\"after\":{\"id\":%d,\"note\":\"%s\"},\"source\":{\"lsn\":%llu,"
             "\"commit_lsn\":%llu,\"snapshot\":\"backfill\"}}",
             id, note, (unsigned long long)lsn, (unsigned long long)commit_lsn);
    cdc_decode_input_t in = {TOPIC, 0, 0, NULL, 0, v, strlen(v), 2};
    assert_int_equal(cdc_decode(f->cat, NULL, &in, &c, &de), CDC_OK);
    assert_true(c.backfill);
    cdc_dedup_verdict_t r = apply(f, &c, NULL);
    cdc_change_clear(&c);
    return r;
}

/* An update of id at (commit_lsn, lsn) that leaves note unchanged (TOAST): the note the
 * worker repairs it with, into buf (NUL-terminated, cut to size). */
static void toast_update(fx_t *f, int id, uint64_t commit_lsn, uint64_t lsn, char *buf, size_t size)
{
    cdc_change_t c;
    int note = -1;
    make(f, &c, 'u', id, commit_lsn, lsn, "!\"unchanged_toast\":[\"note\"],");
    for (size_t i = 0; i < c.schema->ncols; i++)
        if (strcmp(c.schema->cols[i].name, "note") == 0)
            note = (int)i;
    assert_true(note >= 0);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    assert_int_equal(c.after.vals[note].kind, CDC_VAL_SET);
    size_t n = c.after.vals[note].len < size - 1 ? c.after.vals[note].len : size - 1;
    memcpy(buf, c.after.vals[note].bytes, n);
    buf[n] = '\0';
    cdc_change_clear(&c);
}

/*
 * A backfill after DDL reads the table at the database's current state, ahead of its
 * position in the stream (dedup.h, "Backfill rows"): a row updated twice in the
 * transaction the backfill comes before (first leaving its TOASTed note alone, then
 * setting it) is read with the second update's note. The first update must still be
 * repaired with the note the stream left (the chaos schema-change scenario's changelog
 * row with a wrong note), the second sets it, and later updates repair with that. A row
 * the state has no image of takes the read's value.
 */
static void test_backfill_keeps_stream_toast(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    cdc_change_t c;
    char big[9001], extra[9100], got[64];

    memset(big, 'x', 9000);
    big[0] = 'B';
    big[9000] = '\0';
    snprintf(extra, sizeof(extra), ",\"note\":\"%s\",\"customer\":\"ann\"", big);
    make(f, &c, 'c', 9, 10, 10, extra);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);

    /* the backfill, just before the transaction at commit 30 (lsn 20, 21) */
    assert_int_equal(backfill_row(f, 9, 30, 19, "later"), CDC_DEDUP_NEW);
    toast_update(f, 9, 30, 20, got, sizeof(got));
    assert_int_equal(strlen(got), sizeof(got) - 1); /* the 9000-byte note, not "later" */
    assert_memory_equal(got, big, sizeof(got) - 1);
    make(f, &c, 'u', 9, 30, 21, ",\"note\":\"later\"");
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    toast_update(f, 9, 40, 40, got, sizeof(got));
    assert_string_equal(got, "later");

    /* also from the store, after a flush */
    make(f, &c, 'u', 9, 50, 50, extra);
    assert_int_equal(apply(f, &c, NULL), CDC_DEDUP_NEW);
    cdc_change_clear(&c);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    assert_int_equal(backfill_row(f, 9, 60, 59, "read"), CDC_DEDUP_NEW);
    assert_int_equal(cdc_dedup_flush(f->d, &e), CDC_OK);
    toast_update(f, 9, 60, 60, got, sizeof(got));
    assert_memory_equal(got, big, sizeof(got) - 1);

    /* no image in state: the read's value is the only one */
    assert_int_equal(backfill_row(f, 10, 30, 19, "read"), CDC_DEDUP_NEW);
    toast_update(f, 10, 30, 20, got, sizeof(got));
    assert_string_equal(got, "read");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exact_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partition_key_in_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_order_duplicate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_history_replays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_after_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_toast_repair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_and_flushed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_last_write_per_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_at_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_floor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seen_keys_only_for_deletes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replayed_dead_letters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_images, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backfill_keeps_stream_toast, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
