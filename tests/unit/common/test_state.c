/*
 * Unit tests for common/state.c on real RocksDB stores: expiry of TTL families on read
 * and in the compaction filter (with an injected clock), one write time per batch, values
 * put from any number of parts,
 * MultiGet equal to single gets, the prefix probe, the format marker (an unknown format is refused
 * naming the directory), checkpoints that copy the WAL instead of flushing (exactly the writes
 * before them; a flush once the WAL outgrows its limit), and stores written through RocksDB's
 * DBWithTTL by earlier builds, which open and read unchanged. The last test creates such a store
 * with the RocksDB C API directly: it is a fixture of the old on-disk format, not a second adapter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <rocksdb/c.h>

#include "common/state.h"
#include "tests/harness/harness.h"

/* Seconds; the tests move it. Read by RocksDB's compaction threads too. */
static _Atomic int64_t fake_now;
static const int64_t T0 = 1700000000;

static int64_t fake_clock(void)
{
    return atomic_load(&fake_now);
}

typedef struct fx {
    char dir[256];
    char db[300];
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(f->dir, sizeof(f->dir), "%s/test_state.XXXXXX", tmp);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/db", f->dir);
    atomic_store(&fake_now, T0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    cdc_state_destroy(f->dir, &e);
    free(f);
    return 0;
}

/* Family 0 "ttl" expires after 100 s, family 1 "keep" never. */
static cdc_state_t *open_store(const char *dir, bool fake)
{
    cdc_state_options_t o = {.nfamilies = 2,
                             .families = {"ttl", "keep"},
                             .ttl_seconds = {100, 0},
                             .clock = fake ? fake_clock : NULL};
    cdc_state_t *st = NULL;
    cdc_error_t e;
    cdc_err_t rc = cdc_state_open(dir, &o, &st, &e);
    if (rc != CDC_OK)
        fail_msg("open: %s", e.msg);
    return st;
}

/* Whether key is readable in family; when it is, its value must be want. */
static bool has(cdc_state_t *st, int family, const char *key, const char *want)
{
    void *v = NULL;
    size_t n = 0;
    cdc_error_t e;
    cdc_err_t rc = cdc_state_get(st, family, key, strlen(key), &v, &n, &e);
    if (rc == CDC_ERR_NOT_FOUND)
        return false;
    assert_int_equal(rc, CDC_OK);
    if (want != NULL) {
        assert_int_equal(n, strlen(want));
        assert_memory_equal(v, want, n);
    }
    free(v);
    return true;
}

static void put(cdc_state_t *st, int family, const char *key, const char *val)
{
    cdc_error_t e;
    assert_int_equal(cdc_state_put(st, family, key, strlen(key), val, strlen(val), &e), CDC_OK);
}

static void test_expiry_on_read_and_compaction(void **state)
{
    fx_t *f = *state;
    cdc_state_t *st = open_store(f->db, true);

    put(st, 0, "a", "1");
    put(st, 1, "a", "1");
    put(st, 0, "empty", "");
    assert_true(has(st, 0, "a", "1"));
    assert_true(has(st, 0, "empty", ""));
    atomic_store(&fake_now, T0 + 100); /* expired only once write time + TTL < now */
    assert_true(has(st, 0, "a", "1"));
    atomic_store(&fake_now, T0 + 101);
    assert_false(has(st, 0, "a", NULL)); /* checked on read, before any compaction */
    assert_false(has(st, 0, "empty", NULL));
    assert_true(has(st, 1, "a", "1")); /* no TTL */
    put(st, 0, "b", "2");              /* written at T0 + 101 */

    /* The compaction filter drops the expired entries from the table files: with the
     * clock set back (never done outside tests), the read check would let them through. */
    cdc_state_compact(st);
    atomic_store(&fake_now, T0);
    assert_false(has(st, 0, "a", NULL));
    assert_false(has(st, 0, "empty", NULL));
    assert_true(has(st, 0, "b", "2"));
    assert_true(has(st, 1, "a", "1"));
    assert_int_equal(cdc_state_estimate_keys(st, 0), 1);
    cdc_state_close(st);

    /* Reopened: the same. */
    st = open_store(f->db, true);
    assert_false(has(st, 0, "a", NULL));
    assert_true(has(st, 0, "b", "2"));
    assert_true(has(st, 1, "a", "1"));
    cdc_state_close(st);
}

static void test_batch_write_time(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    cdc_state_t *st = open_store(f->db, true);
    cdc_state_batch_t *b = cdc_state_batch_new(st);

    cdc_state_batch_put(b, 0, "x", 1, "1", 1);
    atomic_store(&fake_now, T0 + 50);
    cdc_state_batch_put(b, 0, "y", 1, "2", 1); /* same batch: written "at" T0 */
    assert_int_equal(cdc_state_batch_count(b), 2);
    assert_int_equal(cdc_state_write(st, b, &e), CDC_OK);
    cdc_state_batch_clear(b);
    cdc_state_batch_put(b, 0, "z", 1, "3", 1); /* a new batch: T0 + 50 */
    assert_int_equal(cdc_state_write(st, b, &e), CDC_OK);
    atomic_store(&fake_now, T0 + 101);
    assert_false(has(st, 0, "x", NULL));
    assert_false(has(st, 0, "y", NULL));
    assert_true(has(st, 0, "z", "3"));
    cdc_state_batch_free(b);
    cdc_state_close(st);
}

/* A value put from parts reads back joined, whatever the number of parts (a row with many
 * large values is put as one part per value and one per gap between them). */
static void test_batch_putv_any_parts(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    cdc_state_t *st = open_store(f->db, false);
    cdc_state_batch_t *b = cdc_state_batch_new(st);
    const size_t counts[] = {3, 31, 32, 1000};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        const void **parts = calloc(n, sizeof(*parts));
        size_t *lens = calloc(n, sizeof(*lens));
        char *want = calloc(n * 8 + 1, 1), key[32];
        assert_non_null(parts);
        assert_non_null(lens);
        assert_non_null(want);
        for (size_t i = 0; i < n; i++) {
            snprintf(want + i * 8, 9, "%08zu", i);
            parts[i] = want + i * 8;
            lens[i] = 8;
        }
        snprintf(key, sizeof(key), "k%zu", n);
        assert_true(cdc_state_batch_putv(b, 1, key, strlen(key), n, parts, lens));
        assert_int_equal(cdc_state_write(st, b, &e), CDC_OK);
        cdc_state_batch_clear(b);
        assert_true(has(st, 1, key, want));
        free(parts);
        free(lens);
        free(want);
    }
    cdc_state_batch_free(b);
    cdc_state_close(st);
}

static void test_multi_get(void **state)
{
    enum { N = 600 }; /* more than one RocksDB MultiGet call (chunks of 256) */
    fx_t *f = *state;
    cdc_error_t e;
    cdc_state_t *st = open_store(f->db, true);
    cdc_state_batch_t *b = cdc_state_batch_new(st);
    static char keys[N][16];
    const void *kp[N];
    size_t kl[N], vl[N];
    void *vals[N];
    cdc_err_t rcs[N];

    /* Even keys present: half of them written at T0 (expired below), half later, and
     * some in table files, some only in the memtable. */
    for (int i = 0; i < N; i++) {
        kl[i] = (size_t)snprintf(keys[i], sizeof(keys[i]), "k%05d", (i * 7919) % N);
        kp[i] = keys[i];
    }
    for (int i = 0; i < N; i += 2) {
        if (i == N / 2) {
            assert_int_equal(cdc_state_write(st, b, &e), CDC_OK);
            cdc_state_batch_clear(b);
            char cp[320];
            snprintf(cp, sizeof(cp), "%s/cp", f->dir); /* flushes to table files */
            assert_int_equal(cdc_state_checkpoint(st, cp, &e), CDC_OK);
            atomic_store(&fake_now, T0 + 60);
        }
        char v[32];
        int n = snprintf(v, sizeof(v), "value-%s", keys[i]);
        cdc_state_batch_put(b, 0, keys[i], kl[i], v, (size_t)n);
    }
    assert_int_equal(cdc_state_write(st, b, &e), CDC_OK);
    atomic_store(&fake_now, T0 + 101); /* the first half expired */

    assert_int_equal(cdc_state_multi_get(st, 0, N, kp, kl, vals, vl, rcs, &e), CDC_OK);
    int found = 0, expired_or_missing = 0;
    for (int i = 0; i < N; i++) {
        void *v = NULL;
        size_t n = 0;
        cdc_err_t rc = cdc_state_get(st, 0, kp[i], kl[i], &v, &n, &e);
        assert_int_equal(rcs[i], rc);
        if (rc == CDC_OK) {
            assert_int_equal(vl[i], n);
            assert_memory_equal(vals[i], v, n);
            found++;
        } else {
            assert_null(vals[i]);
            expired_or_missing++;
        }
        free(v);
        free(vals[i]);
    }
    assert_int_equal(found, N / 4);
    assert_int_equal(expired_or_missing, N - N / 4);
    assert_int_equal(cdc_state_multi_get(st, 0, 0, kp, kl, vals, vl, rcs, &e), CDC_OK);
    cdc_state_batch_free(b);
    cdc_state_close(st);
}

static void test_may_have_prefix(void **state)
{
    fx_t *f = *state;
    cdc_state_t *st = open_store(f->db, true);
    assert_false(cdc_state_may_have_prefix(st, 0, "P", 1));
    put(st, 0, "O-before", "1");
    put(st, 0, "Q-after", "1");
    put(st, 1, "P-other-family", "1");
    assert_false(cdc_state_may_have_prefix(st, 0, "P", 1));
    put(st, 0, "P-key", "1");
    assert_true(cdc_state_may_have_prefix(st, 0, "P", 1));
    assert_true(cdc_state_may_have_prefix(st, 0, "P-k", 3));
    assert_false(cdc_state_may_have_prefix(st, 0, "P-x", 3));
    cdc_state_close(st);
}

typedef struct scanned {
    char keys[8][32];
    int n, stop_after; /* stop_after: the callback stops after that many (0 = never) */
} scanned_t;

static bool note_key(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    scanned_t *s = arg;
    assert_true(s->n < 8 && klen < 32);
    assert_int_equal(vlen, 1); /* the value without its write time */
    assert_memory_equal(val, "v", 1);
    memcpy(s->keys[s->n], key, klen);
    s->keys[s->n][klen] = '\0';
    s->n++;
    return s->stop_after == 0 || s->n < s->stop_after;
}

/* A scan: the keys in [begin, end) of the family, in order; expired ones skipped; the
 * callback can stop it. */
static void test_scan(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    cdc_state_t *st = open_store(f->db, true);
    put(st, 0, "a", "v");
    put(st, 0, "b1", "v");
    put(st, 0, "b2", "v");
    put(st, 0, "b", "v");
    put(st, 0, "c", "v");
    put(st, 1, "b3", "v"); /* the other family */
    scanned_t s = {0};
    assert_int_equal(cdc_state_scan(st, 0, "b", 1, "c", 1, note_key, &s, &e), CDC_OK);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.keys[0], "b");
    assert_string_equal(s.keys[1], "b1");
    assert_string_equal(s.keys[2], "b2");
    memset(&s, 0, sizeof(s));
    s.stop_after = 1;
    assert_int_equal(cdc_state_scan(st, 0, "b", 1, "c", 1, note_key, &s, &e), CDC_OK);
    assert_int_equal(s.n, 1);
    /* expired: family 0 keeps keys 100 s */
    atomic_store(&fake_now, T0 + 101);
    put(st, 0, "b9", "v");
    memset(&s, 0, sizeof(s));
    assert_int_equal(cdc_state_scan(st, 0, "b", 1, "c", 1, note_key, &s, &e), CDC_OK);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.keys[0], "b9");
    assert_int_equal(cdc_state_scan(st, 7, "b", 1, "c", 1, note_key, &s, &e), CDC_ERR_INVALID);
    cdc_state_close(st);
}

/* Opens dir with the RocksDB C API as the store's families (no TTL wrapper). */
static rocksdb_t *raw_open(const char *dir, rocksdb_column_family_handle_t **cfs,
                           rocksdb_options_t **opts)
{
    const char *names[3] = {"default", "ttl", "keep"};
    const rocksdb_options_t *co[3];
    char *err = NULL;
    *opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(*opts, 1);
    rocksdb_options_set_create_missing_column_families(*opts, 1);
    for (int i = 0; i < 3; i++)
        co[i] = *opts;
    rocksdb_t *db = rocksdb_open_column_families(*opts, dir, 3, names, co, cfs, &err);
    if (err != NULL)
        fail_msg("raw open: %s", err);
    return db;
}

static void raw_close(rocksdb_t *db, rocksdb_column_family_handle_t **cfs, rocksdb_options_t *opts)
{
    for (int i = 0; i < 3; i++)
        rocksdb_column_family_handle_destroy(cfs[i]);
    rocksdb_close(db);
    rocksdb_options_destroy(opts);
}

static void test_format_marker(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    cdc_state_options_t o = {.nfamilies = 2, .families = {"ttl", "keep"}, .ttl_seconds = {100, 0}};
    cdc_state_t *st = open_store(f->db, false);
    char cp[320];
    put(st, 1, "row", "image");
    snprintf(cp, sizeof(cp), "%s/cp", f->dir); /* the marker reaches disk with the data */
    assert_int_equal(cdc_state_checkpoint(st, cp, &e), CDC_OK);
    cdc_state_close(st);

    /* The checkpoint copy carries the marker; a store of another format is refused. */
    rocksdb_column_family_handle_t *cfs[3];
    rocksdb_options_t *opts;
    rocksdb_t *db = raw_open(cp, cfs, &opts);
    size_t len = 0;
    char *err = NULL, *v;
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    v = rocksdb_get_cf(db, ro, cfs[0], "cdc.state.format", 16, &len, &err);
    assert_null(err);
    assert_non_null(v);
    assert_int_equal(len, 1);
    assert_memory_equal(v, "1", 1);
    rocksdb_free(v);
    rocksdb_readoptions_destroy(ro);
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_put_cf(db, wo, cfs[0], "cdc.state.format", 16, "2", 1, &err);
    assert_null(err);
    rocksdb_writeoptions_destroy(wo);
    raw_close(db, cfs, opts);

    st = NULL;
    assert_int_equal(cdc_state_open(cp, &o, &st, &e), CDC_ERR_STATE);
    assert_null(st);
    assert_non_null(strstr(e.msg, cp));
    assert_non_null(strstr(e.msg, "has format \"2\""));
    /* The store itself still opens. */
    st = open_store(f->db, false);
    assert_true(has(st, 1, "row", "image"));
    cdc_state_close(st);
}

static void test_store_written_by_dbwithttl(void **state)
{
    fx_t *f = *state;
    const char *names[3] = {"default", "ttl", "keep"};
    int ttls[3] = {0, 100, 0};
    const rocksdb_options_t *co[3];
    rocksdb_column_family_handle_t *cfs[3];
    rocksdb_options_t *opts = rocksdb_options_create();
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    char *err = NULL;

    /* What earlier builds wrote: DBWithTTL appends the write time to every value. */
    rocksdb_options_set_create_if_missing(opts, 1);
    rocksdb_options_set_create_missing_column_families(opts, 1);
    for (int i = 0; i < 3; i++)
        co[i] = opts;
    rocksdb_t *db =
        rocksdb_open_column_families_with_ttl(opts, f->db, 3, names, co, cfs, ttls, &err);
    assert_null(err);
    int64_t written = (int64_t)time(NULL);
    rocksdb_put_cf(db, wo, cfs[1], "seen", 4, "", 0, &err);
    rocksdb_put_cf(db, wo, cfs[1], "pos", 3, "0123456789abcdef", 16, &err);
    rocksdb_put_cf(db, wo, cfs[2], "row", 3, "position+image", 14, &err);
    assert_null(err);
    for (int i = 0; i < 3; i++)
        rocksdb_column_family_handle_destroy(cfs[i]);
    rocksdb_close(db);
    rocksdb_options_destroy(opts);
    rocksdb_writeoptions_destroy(wo);

    atomic_store(&fake_now, written);
    cdc_state_t *st = open_store(f->db, true);
    assert_true(has(st, 0, "seen", ""));
    assert_true(has(st, 0, "pos", "0123456789abcdef"));
    assert_true(has(st, 1, "row", "position+image"));
    put(st, 1, "new", "value");
    atomic_store(&fake_now, written + 102); /* the old entries' write times count */
    assert_false(has(st, 0, "seen", NULL));
    assert_false(has(st, 0, "pos", NULL));
    assert_true(has(st, 1, "row", "position+image"));
    cdc_state_close(st);
    st = open_store(f->db, true);
    assert_true(has(st, 1, "new", "value"));
    cdc_state_close(st);
}

static cdc_state_t *open_wal_store(const char *dir, size_t wal_bytes)
{
    cdc_state_options_t o = {.nfamilies = 2,
                             .families = {"ttl", "keep"},
                             .ttl_seconds = {100, 0},
                             .wal_checkpoint_bytes = wal_bytes};
    cdc_state_t *st = NULL;
    cdc_error_t e;
    if (cdc_state_open(dir, &o, &st, &e) != CDC_OK)
        fail_msg("open: %s", e.msg);
    return st;
}

/* With wal_checkpoint_bytes a checkpoint copies the WAL instead of flushing, holds
 * exactly the writes before it, and flushes once the WAL outgrows the limit. */
static void test_wal_checkpoint(void **state)
{
    fx_t *f = *state;
    cdc_error_t e;
    char cp1[320], cp2[320], cp3[320], k[32], v[128];
    size_t wal_bytes = 0;
    cdc_state_t *st = open_wal_store(f->db, 64 << 10), *c;

    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "k%03d", i);
        put(st, 0, k, "ttl-value");
        put(st, 1, k, "keep-value");
    }
    snprintf(cp1, sizeof(cp1), "%s/cp1", f->dir);
    assert_int_equal(cdc_state_checkpoint(st, cp1, &e), CDC_OK);
    /* Nothing was flushed: the copy has no table file, its WAL holds the writes. */
    assert_int_equal(cdc_test_count_files(cp1, ".sst", false, NULL), 0);
    assert_true(cdc_test_count_files(cp1, ".log", false, &wal_bytes) >= 1);
    assert_true(wal_bytes > 100 * 2 * 4);
    assert_int_equal(cdc_test_count_files(f->db, ".sst", false, NULL), 0);

    /* Writes after the checkpoint are not in it; a delete before the next one is. */
    put(st, 1, "late", "after-cp1");
    cdc_error_t de;
    cdc_state_batch_t *b = cdc_state_batch_new(st);
    cdc_state_batch_delete(b, 1, "k007", 4);
    assert_int_equal(cdc_state_write(st, b, &de), CDC_OK);
    cdc_state_batch_free(b);
    snprintf(cp2, sizeof(cp2), "%s/cp2", f->dir);
    assert_int_equal(cdc_state_checkpoint(st, cp2, &e), CDC_OK);
    assert_int_equal(cdc_test_count_files(cp2, ".sst", false, NULL), 0);

    c = open_wal_store(cp1, 64 << 10);
    assert_true(has(c, 0, "k000", "ttl-value"));
    assert_true(has(c, 1, "k099", "keep-value"));
    assert_true(has(c, 1, "k007", "keep-value"));
    assert_false(has(c, 1, "late", NULL));
    cdc_state_close(c);
    c = open_wal_store(cp2, 64 << 10);
    assert_true(has(c, 1, "late", "after-cp1"));
    assert_false(has(c, 1, "k007", NULL));
    assert_true(has(c, 0, "k007", "ttl-value"));
    cdc_state_close(c);

    /* Past the limit the checkpoint flushes: table files, and every key readable. */
    memset(v, 'x', sizeof(v) - 1);
    v[sizeof(v) - 1] = '\0';
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof(k), "big%04d", i);
        put(st, 1, k, v);
    }
    snprintf(cp3, sizeof(cp3), "%s/cp3", f->dir);
    assert_int_equal(cdc_state_checkpoint(st, cp3, &e), CDC_OK);
    assert_true(cdc_test_count_files(cp3, ".sst", false, NULL) >= 1);
    cdc_state_close(st);
    c = open_wal_store(cp3, 64 << 10);
    assert_true(has(c, 1, "big0999", v));
    assert_true(has(c, 1, "late", "after-cp1"));
    assert_true(has(c, 0, "k050", "ttl-value"));
    cdc_state_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_expiry_on_read_and_compaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_write_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_putv_any_parts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_may_have_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format_marker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_written_by_dbwithttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_checkpoint, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
