/* Unit tests for coordinator/checkpoint.c: the record's JSON form round-trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/crypto.h"
#include "coordinator/checkpoint.h"
#include "coordinator/offsets_base.h"

static cdc_checkpoint_t *sample(void)
{
    cdc_checkpoint_t *c = cdc_checkpoint_new("job1", 42, 9, 3);
    cdc_staged_file_t f;
    cdc_ice_col_stats_t st[2];
    int32_t eq[1] = {1};

    assert_non_null(c);
    c->barrier_ms = 1000;
    c->completed_ms = 1100;
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.public.a", 10 + p), CDC_OK);
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.public.b", 20 + p), CDC_OK);
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.public.a", 30 + p), CDC_OK);
        assert_int_equal(cdc_checkpoint_set_state(c, p, p % 2 ? "s3://x/state/1" : ""), CDC_OK);
        snprintf(c->partitions[p].owner, sizeof(c->partitions[p].owner), "w%u", p % 3);
    }
    memset(&f, 0, sizeof(f));
    memset(st, 0, sizeof(st));
    st[0].field_id = 1;
    st[0].value_count = 5;
    st[0].nan_count = -1;
    st[0].has_bounds = true;
    st[0].lower[0] = 0x00;
    st[0].lower[1] = 0xff;
    st[0].lower_len = 2;
    st[0].upper[0] = 0xab;
    st[0].upper_len = 1;
    st[1].field_id = 2;
    st[1].null_count = 5;
    f.table = "ns.t";
    f.partition = 4;
    f.file.path = "/wh/ns/t/data/a.parquet";
    f.file.record_count = 5;
    f.file.file_size_in_bytes = 999;
    f.file.stats = st;
    f.file.nstats = 2;
    /* partitioned: a value and a null */
    static cdc_ice_part_value_t pv[2] = {{false, (uint8_t *)"eu", 2}, {true, NULL, 0}};
    f.file.spec_id = 2;
    f.file.sort_order_id = 1;
    f.file.partition = pv;
    f.file.npartition = 2;
    assert_int_equal(cdc_checkpoint_add_file(c, &f), CDC_OK);
    f.file.spec_id = 0;
    f.file.sort_order_id = 0;
    f.file.partition = NULL;
    f.file.npartition = 0;
    f.table = "ns.t";
    f.file.path = "/wh/ns/t/data/d.parquet";
    f.file.content = CDC_ICE_CONTENT_EQUALITY_DELETES;
    f.file.equality_ids = eq;
    f.file.nequality_ids = 1;
    f.file.record_count = 2;
    assert_int_equal(cdc_checkpoint_add_file(c, &f), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(c, "ns.t", "{\"type\":\"struct\"}", 0), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(c, "ns.t", "{\"type\":\"struct\"}", 0), CDC_OK);
    assert_int_equal(c->nschemas, 1);
    return c;
}

static void test_roundtrip(void **state)
{
    cdc_checkpoint_t *c = sample(), *d = NULL;
    cdc_error_t e;
    char *js, *js2;
    (void)state;

    js = cdc_checkpoint_to_json(c, true);
    assert_non_null(js);
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    assert_int_equal(d->epoch, 42);
    assert_int_equal(d->term, 9);
    assert_int_equal(d->generation, 3);
    assert_string_equal(d->job, "job1");
    assert_int_equal(d->partitions[3].noffsets, 2);
    assert_int_equal(d->partitions[3].offsets[0].next_offset, 33);
    assert_string_equal(d->partitions[3].state_handle, "s3://x/state/1");
    assert_string_equal(d->partitions[5].owner, "w2");
    assert_int_equal(d->nfiles, 2);
    assert_int_equal(d->files[0].file.stats[0].lower_len, 2);
    assert_int_equal(d->files[0].file.stats[0].lower[1], 0xff);
    assert_true(d->files[0].file.stats[0].has_bounds);
    assert_false(d->files[0].file.stats[1].has_bounds);
    assert_int_equal(d->files[1].file.content, CDC_ICE_CONTENT_EQUALITY_DELETES);
    assert_int_equal(d->files[1].file.equality_ids[0], 1);
    assert_int_equal(d->files[0].partition, 4);
    assert_int_equal(d->files[0].file.spec_id, 2);
    assert_int_equal(d->files[0].file.sort_order_id, 1);
    assert_int_equal(d->files[1].file.sort_order_id, 0);
    assert_int_equal(d->files[0].file.npartition, 2);
    assert_false(d->files[0].file.partition[0].null);
    assert_int_equal(d->files[0].file.partition[0].len, 2);
    assert_memory_equal(d->files[0].file.partition[0].bytes, "eu", 2);
    assert_true(d->files[0].file.partition[1].null);
    assert_int_equal(d->files[1].file.spec_id, 0);
    assert_int_equal(d->files[1].file.npartition, 0);
    assert_int_equal(d->ntruncates, 0);
    js2 = cdc_checkpoint_to_json(d, true);
    assert_string_equal(js, js2);
    free(js);
    free(js2);
    cdc_checkpoint_free(d);
    cdc_checkpoint_free(c);
}

/* Truncates are always inline (also when the file list is pending) and round-trip. */
static void test_truncates(void **state)
{
    cdc_checkpoint_t *c = sample(), *d = NULL;
    cdc_error_t e;
    char *js, *js2;
    (void)state;

    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.t", 3), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.t", 0), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.u", 11), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_truncate(c, "ns.u", 12), CDC_ERR_INVALID);
    assert_int_equal(cdc_checkpoint_truncated(c, "ns.t"), 0x9);
    assert_int_equal(cdc_checkpoint_truncated(c, "ns.u"), 0x800);
    assert_int_equal(cdc_checkpoint_truncated(c, "ns.v"), 0);
    js = cdc_checkpoint_to_json(c, true);
    assert_non_null(strstr(js, "\"truncates\":[{\"table\":\"ns.t\",\"p\":[0,3]}"));
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    assert_int_equal(d->ntruncates, 2);
    assert_int_equal(cdc_checkpoint_truncated(d, "ns.t"), 0x9);
    assert_int_equal(cdc_checkpoint_truncated(d, "ns.u"), 0x800);
    js2 = cdc_checkpoint_to_json(d, true);
    assert_string_equal(js, js2);
    free(js);
    free(js2);
    cdc_checkpoint_free(d);
    js = cdc_checkpoint_to_json(c, false); /* files pending: truncates stay inline */
    assert_non_null(strstr(js, "\"truncates\""));
    free(js);
    const char *bad = "{\"epoch\":1,\"truncates\":[{\"table\":\"ns.t\",\"p\":[12]}]}";
    assert_int_equal(cdc_checkpoint_from_json(bad, strlen(bad), &d, &e), CDC_ERR_CORRUPT);
    cdc_checkpoint_free(c);
}

static void test_pending_file_list(void **state)
{
    cdc_checkpoint_t *c = sample(), *d = NULL;
    cdc_error_t e;
    char *rec, *files;
    (void)state;

    c->files_path = strdup("/wh/_cdc/job1/pending/42.json");
    rec = cdc_checkpoint_to_json(c, false);
    files = cdc_checkpoint_files_to_json(c);
    assert_null(strstr(rec, "a.parquet"));
    assert_int_equal(cdc_checkpoint_from_json(rec, strlen(rec), &d, &e), CDC_OK);
    assert_int_equal(d->nfiles, 0);
    assert_string_equal(d->files_path, "/wh/_cdc/job1/pending/42.json");
    assert_int_equal(cdc_checkpoint_files_from_json(d, files, strlen(files), &e), CDC_OK);
    assert_int_equal(d->nfiles, 2);
    assert_string_equal(d->files[1].file.path, "/wh/ns/t/data/d.parquet");
    free(rec);
    free(files);
    cdc_checkpoint_free(d);
    cdc_checkpoint_free(c);
}

static void test_bad_input(void **state)
{
    cdc_checkpoint_t *d = NULL;
    cdc_error_t e;
    const char *bad[] = {"",
                         "[]",
                         "{\"job\":\"x\"}",
                         "{\"epoch\":1,\"partitions\":[{\"p\":12}]}",
                         "{\"epoch\":1,\"files\":[{\"table\":\"t\"}]}",
                         "{\"epoch\":1,\"files\":[{\"table\":\"t\",\"path\":\"p\",\"stats\":[{"
                         "\"lower\":\"zz\",\"upper\":\"00\"}]}]}"};
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_not_equal(cdc_checkpoint_from_json(bad[i], strlen(bad[i]), &d, &e), CDC_OK);
        assert_null(d);
        assert_int_equal(e.code, CDC_ERR_CORRUPT);
    }
}

static void test_offsets_summary(void **state)
{
    cdc_checkpoint_t *c = sample();
    char *s;
    (void)state;
    s = cdc_checkpoint_offsets_json(c, NULL);
    assert_string_equal(s, "{\"cdc.public.a\":[30,31,32,33,34,35,36,37,38,39,40,41],"
                           "\"cdc.public.b\":[20,21,22,23,24,25,26,27,28,29,30,31]}");
    free(s);
    /* a table's snapshot names its own topic only: mirror and changelog alike */
    s = cdc_checkpoint_offsets_json(c, "public.b");
    assert_string_equal(s, "{\"cdc.public.b\":[20,21,22,23,24,25,26,27,28,29,30,31]}");
    free(s);
    s = cdc_checkpoint_offsets_json(c, "public.a_changelog");
    assert_string_equal(s, "{\"cdc.public.a\":[30,31,32,33,34,35,36,37,38,39,40,41]}");
    free(s);
    /* "public.b" is not the topic of "ublic.b" nor of "x.a": every topic then */
    s = cdc_checkpoint_offsets_json(c, "ublic.b");
    assert_non_null(strstr(s, "cdc.public.a"));
    assert_non_null(strstr(s, "cdc.public.b"));
    free(s);
    int64_t bytes, records;
    size_t nd, ndel;
    cdc_checkpoint_totals(c, &bytes, &records, &nd, &ndel);
    assert_int_equal(bytes, 1998);
    assert_int_equal(records, 5);
    assert_int_equal(nd, 1);
    assert_int_equal(ndel, 1);
    cdc_checkpoint_free(c);
}

/* Floors: the latest per table, carried from record to record, in the record's JSON. */
static void test_floors(void **state)
{
    cdc_checkpoint_t *c = sample(), *d = NULL, *next = cdc_checkpoint_new("job", 8, 1, 1);
    cdc_error_t e;
    char *js;
    (void)state;

    assert_int_equal(cdc_checkpoint_add_floor(c, "ns.t", 10, 5, 3), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_floor(c, "ns.t", 9, 50, 4), CDC_OK); /* earlier */
    assert_int_equal(cdc_checkpoint_add_floor(c, "ns.u", 7, 7, 11), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_floor(c, "ns.u", 7, 7, 12), CDC_ERR_INVALID);
    assert_int_equal(c->nfloors, 2);
    assert_int_equal(c->floors[0].commit_lsn, 10);
    assert_int_equal(c->floors[0].partition, 3);
    js = cdc_checkpoint_to_json(c, false);
    assert_non_null(
        strstr(js, "\"floors\":[{\"table\":\"ns.t\",\"commit_lsn\":10,\"lsn\":5,\"p\":3}"));
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    free(js);
    /* the next record gets them, and keeps its own later one */
    assert_int_equal(cdc_checkpoint_add_floor(next, "ns.u", 8, 1, 2), CDC_OK);
    assert_int_equal(cdc_checkpoint_carry_floors(next, d), CDC_OK);
    assert_int_equal(cdc_checkpoint_carry_floors(next, NULL), CDC_OK);
    assert_int_equal(next->nfloors, 2);
    for (size_t i = 0; i < next->nfloors; i++) {
        const cdc_table_floor_t *f = &next->floors[i];
        if (strcmp(f->table, "ns.t") == 0) {
            assert_int_equal(f->commit_lsn, 10);
            assert_int_equal(f->lsn, 5);
            assert_int_equal(f->partition, 3);
        } else {
            assert_string_equal(f->table, "ns.u");
            assert_int_equal(f->commit_lsn, 8);
            assert_int_equal(f->partition, 2);
        }
    }
    cdc_checkpoint_free(d);
    const char *bad = "{\"epoch\":1,\"floors\":[{\"table\":\"ns.t\",\"lsn\":1,\"p\":0}]}";
    assert_int_equal(cdc_checkpoint_from_json(bad, strlen(bad), &d, &e), CDC_ERR_CORRUPT);
    assert_non_null(strstr(e.msg, "floor"));
    cdc_checkpoint_free(next);
    cdc_checkpoint_free(c);
}

/* ---- the delta form against an offsets base (docs/protocol.md, "Offsets base") ------ */

#define MANY_TOPICS 2000

static void topic_name(char *buf, size_t size, int t)
{
    snprintf(buf, size, "cdc.public.orders_of_the_region_%04d", t);
}

/* A record of a job of ntopics tables: every slot reads every topic. */
static cdc_checkpoint_t *many(uint64_t epoch, int ntopics, int64_t at)
{
    cdc_checkpoint_t *c = cdc_checkpoint_new("job1", epoch, 9, 3);
    char topic[64];

    assert_non_null(c);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        for (int t = 0; t < ntopics; t++) {
            topic_name(topic, sizeof(topic), t);
            assert_int_equal(cdc_checkpoint_set_offset(c, p, topic, at + 1000 * t + p), CDC_OK);
        }
        assert_int_equal(cdc_checkpoint_set_state(c, p, "s3://x/state/1"), CDC_OK);
        snprintf(c->partitions[p].owner, sizeof(c->partitions[p].owner), "w%u", p % 3);
    }
    return c;
}

/* a and b hold the same offsets, slot by slot, in the same order */
static void assert_same_offsets(const cdc_checkpoint_t *a, const cdc_checkpoint_t *b)
{
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        assert_int_equal(a->partitions[p].noffsets, b->partitions[p].noffsets);
        for (size_t i = 0; i < a->partitions[p].noffsets; i++) {
            assert_string_equal(a->partitions[p].offsets[i].topic,
                                b->partitions[p].offsets[i].topic);
            assert_int_equal(a->partitions[p].offsets[i].next_offset,
                             b->partitions[p].offsets[i].next_offset);
            assert_ptr_equal(cdc_checkpoint_find_offset(a, p, a->partitions[p].offsets[i].topic),
                             &a->partitions[p].offsets[i]);
        }
    }
}

/* set_offset keeps one entry per topic through growth (its index follows the array) */
static void test_set_offset_index(void **state)
{
    cdc_checkpoint_t *c = many(1, MANY_TOPICS, 0);
    char topic[64];
    (void)state;

    for (int t = 0; t < MANY_TOPICS; t += 7) { /* replaces, never appends */
        topic_name(topic, sizeof(topic), t);
        assert_int_equal(cdc_checkpoint_set_offset(c, 5, topic, -t), CDC_OK);
    }
    assert_int_equal(cdc_checkpoint_offset_count(c), (size_t)MANY_TOPICS * CDC_PARTITIONS);
    for (int t = 0; t < MANY_TOPICS; t++) {
        topic_name(topic, sizeof(topic), t);
        const cdc_topic_offset_t *to = cdc_checkpoint_find_offset(c, 5, topic);
        assert_non_null(to);
        assert_string_equal(to->topic, topic);
        assert_int_equal(to->next_offset, t % 7 == 0 ? -t : 1000 * t + 5);
        assert_ptr_equal(to, &c->partitions[5].offsets[t]);
    }
    assert_null(cdc_checkpoint_find_offset(c, 5, "cdc.public.none"));
    assert_null(cdc_checkpoint_find_offset(c, CDC_PARTITIONS, topic));
    cdc_checkpoint_free(c);
}

/* 2,000 topics, 10 moved, one new in one slot: a small record that decodes, merged with
 * its base, to exactly the full offsets */
static void test_delta_roundtrip(void **state)
{
    cdc_checkpoint_t *base = many(100, MANY_TOPICS, 0), *c = many(130, MANY_TOPICS, 0), *b2,
                     *d = NULL;
    cdc_offsets_ref_t ref = {.epoch = 100, .path = "/wh/_cdc/job1/offsets/100.json"};
    char topic[64], *bjs, *js, *full;
    uint8_t digest[CDC_SHA256_LEN];
    cdc_error_t e;
    (void)state;

    for (int t = 0; t < 10; t++) {
        topic_name(topic, sizeof(topic), t * 150);
        for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
            assert_int_equal(cdc_checkpoint_set_offset(c, p, topic, 5000000 + t * 10 + p), CDC_OK);
    }
    assert_int_equal(cdc_checkpoint_set_offset(c, 7, "cdc.public.added", 3), CDC_OK);
    assert_int_equal(cdc_checkpoint_delta_count(c, base), 10 * CDC_PARTITIONS + 1);

    bjs = cdc_checkpoint_offsets_base_json(base);
    assert_non_null(bjs);
    cdc_sha256(bjs, strlen(bjs), digest);
    for (size_t i = 0; i < sizeof(digest); i++)
        snprintf(ref.sha256 + 2 * i, 3, "%02x", digest[i]);
    js = cdc_checkpoint_to_json_delta(c, true, base, &ref);
    full = cdc_checkpoint_to_json(c, true);
    assert_non_null(js);
    assert_non_null(full);
    printf("record of %d topics x %d slots, 10 moved: %zu bytes (inline form %zu, base %zu)\n",
           MANY_TOPICS, CDC_PARTITIONS, strlen(js), strlen(full), strlen(bjs));
    assert_true(strlen(js) <= 64 * 1024);
    assert_true(strlen(full) > 500 * 1024); /* what the delta saves */
    assert_null(strstr(full, "offsets_base"));

    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    assert_true(d->offsets_delta);
    assert_int_equal(d->offsets_base.epoch, 100);
    assert_string_equal(d->offsets_base.path, ref.path);
    assert_string_equal(d->offsets_base.sha256, ref.sha256);
    assert_int_equal(cdc_checkpoint_offset_count(d), 10 * CDC_PARTITIONS + 1);
    assert_int_equal(cdc_checkpoint_from_json(bjs, strlen(bjs), &b2, &e), CDC_OK);
    assert_int_equal(b2->epoch, 100);
    assert_same_offsets(b2, base);
    assert_int_equal(cdc_checkpoint_merge_base(d, b2, &e), CDC_OK);
    assert_false(d->offsets_delta);
    assert_same_offsets(d, c);
    assert_string_equal(d->partitions[3].state_handle, "s3://x/state/1");
    assert_string_equal(d->partitions[4].owner, "w1");
    assert_int_equal(cdc_checkpoint_merge_base(d, b2, &e), CDC_OK); /* complete: no-op */
    assert_same_offsets(d, c);

    /* a base of another epoch than the record names is refused */
    cdc_checkpoint_free(d);
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    b2->epoch = 99;
    assert_int_equal(cdc_checkpoint_merge_base(d, b2, &e), CDC_ERR_CORRUPT);
    assert_non_null(strstr(e.msg, ref.path));

    /* a slot that lost a topic of the base cannot be a delta */
    cdc_checkpoint_free(d);
    d = many(131, MANY_TOPICS - 1, 0);
    assert_int_equal(cdc_checkpoint_delta_count(d, base), -1);

    const char *bad[] = {
        "{\"epoch\":1,\"offsets_base\":{\"epoch\":1,\"path\":\"x\"}}",
        "{\"epoch\":1,\"offsets_base\":{\"epoch\":1,\"path\":\"x\",\"sha256\":\"zz\"}}",
        "{\"epoch\":1,\"offsets_base\":{\"path\":\"x\",\"sha256\":\"" /* no epoch */
        "0000000000000000000000000000000000000000000000000000000000000000\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cdc_checkpoint_t *x = NULL;
        assert_int_equal(cdc_checkpoint_from_json(bad[i], strlen(bad[i]), &x, &e), CDC_ERR_CORRUPT);
        assert_null(x);
    }
    free(js);
    free(full);
    free(bjs);
    cdc_checkpoint_free(d);
    cdc_checkpoint_free(b2);
    cdc_checkpoint_free(c);
    cdc_checkpoint_free(base);
}

static void rm_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* the leader's choices (inline, a new base, a delta) and the loader's checks, against a
 * local warehouse */
static void test_offsets_base_store(void **state)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[256], wh[300], loc[1024], topic[64], *js = NULL;
    cdc_offsets_base_t b;
    cdc_storage_t *st;
    cdc_checkpoint_t *rec, *d = NULL, *full;
    cdc_error_t e;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/cdc-offsets-base-XXXXXX", tmp);
    assert_non_null(mkdtemp(dir));
    snprintf(wh, sizeof(wh), "file://%s", dir);
    assert_int_equal(cdc_storage_open(wh, NULL, &st, &e), CDC_OK);
    memset(&b, 0, sizeof(b));

    /* under the threshold: today's inline form, no base */
    rec = many(10, 20, 0);
    assert_int_equal(cdc_offsets_base_record_json(&b, st, wh, rec, true, 1000, &js, &e), CDC_OK);
    assert_null(strstr(js, "offsets_base"));
    assert_null(b.offsets);
    free(js);
    cdc_checkpoint_free(rec);

    /* the first large record writes a base at its epoch; its own delta is empty */
    rec = many(11, MANY_TOPICS, 0);
    assert_int_equal(cdc_offsets_base_record_json(&b, st, wh, rec, true, 1000, &js, &e), CDC_OK);
    assert_non_null(b.offsets);
    assert_int_equal(b.ref.epoch, 11);
    cdc_offsets_base_location(wh, "job1", 11, loc, sizeof(loc));
    assert_string_equal(b.ref.path, loc);
    assert_non_null(strstr(js, "\"offsets_base\""));
    assert_true(strlen(js) < 4096);
    free(js);
    cdc_checkpoint_free(rec);

    /* the next ones are deltas against it; they load back complete */
    full = many(12, MANY_TOPICS, 0);
    for (int t = 0; t < 10; t++) {
        topic_name(topic, sizeof(topic), t * 3);
        for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
            assert_int_equal(cdc_checkpoint_set_offset(full, p, topic, 777 + t), CDC_OK);
    }
    assert_int_equal(cdc_offsets_base_record_json(&b, st, wh, full, false, 1000, &js, &e), CDC_OK);
    assert_int_equal(b.ref.epoch, 11);
    assert_true(strlen(js) <= 64 * 1024);
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    assert_int_equal(cdc_checkpoint_offset_count(d), 10 * CDC_PARTITIONS);
    assert_int_equal(cdc_offsets_base_load(st, d, &e), CDC_OK);
    assert_same_offsets(d, full);
    cdc_checkpoint_free(d);

    /* an altered base is CORRUPT, naming the file */
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    {
        uint8_t *data;
        size_t len;
        assert_int_equal(cdc_storage_get(st, loc, &data, &len, &e), CDC_OK);
        char *p = strstr((char *)data, ":1000");
        assert_non_null(p);
        p[1] = '2'; /* one offset of the file changed */
        assert_int_equal(cdc_storage_put(st, loc, data, len, &e), CDC_OK);
        assert_int_equal(cdc_offsets_base_load(st, d, &e), CDC_ERR_CORRUPT);
        assert_non_null(strstr(e.msg, loc));
        assert_non_null(strstr(e.msg, "SHA-256"));
        p[1] = '1';
        assert_int_equal(cdc_storage_put(st, loc, data, len, &e), CDC_OK);
        free(data);
    }
    assert_int_equal(cdc_offsets_base_load(st, d, &e), CDC_OK); /* restored: fine again */
    assert_same_offsets(d, full);
    cdc_checkpoint_free(d);

    /* a topic gone from a slot (a table removed) takes a new base, never a resurrection */
    cdc_checkpoint_free(full);
    full = many(13, MANY_TOPICS - 1, 0);
    free(js);
    assert_int_equal(cdc_offsets_base_record_json(&b, st, wh, full, true, 1000, &js, &e), CDC_OK);
    assert_int_equal(b.ref.epoch, 13);
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    assert_int_equal(cdc_offsets_base_load(st, d, &e), CDC_OK);
    assert_same_offsets(d, full);
    cdc_checkpoint_free(d);
    free(js);

    /* a record of a new term writes its own base */
    full->epoch = 14;
    full->term = 10;
    assert_int_equal(cdc_offsets_base_record_json(&b, st, wh, full, true, 1000, &js, &e), CDC_OK);
    assert_int_equal(b.ref.epoch, 14);
    assert_int_equal(b.term, 10);

    /* pruning below the oldest kept record's base; then a missing base is CORRUPT */
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    assert_int_equal(cdc_offsets_base_floor(d), 14);
    assert_int_equal(cdc_offsets_base_prune(st, wh, "job1", 14), 2); /* 11 and 13 */
    assert_int_equal(cdc_offsets_base_load(st, d, &e), CDC_OK);
    cdc_checkpoint_free(d);
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    cdc_offsets_base_location(wh, "job1", 14, loc, sizeof(loc));
    assert_int_equal(cdc_storage_delete(st, loc, &e), CDC_OK);
    assert_int_equal(cdc_offsets_base_load(st, d, &e), CDC_ERR_CORRUPT);
    assert_non_null(strstr(e.msg, loc));
    assert_non_null(strstr(e.msg, "missing"));
    cdc_checkpoint_free(d);
    free(js);

    /* back under the threshold: inline again, the base dropped */
    rec = many(15, 20, 0);
    assert_int_equal(cdc_offsets_base_record_json(&b, st, wh, rec, true, 1000, &js, &e), CDC_OK);
    assert_null(strstr(js, "offsets_base"));
    assert_null(b.offsets);
    assert_int_equal(cdc_checkpoint_from_json(js, strlen(js), &d, &e), CDC_OK);
    assert_int_equal(cdc_offsets_base_floor(d), 15);
    assert_int_equal(cdc_offsets_base_load(st, d, &e), CDC_OK); /* inline: nothing to load */
    assert_same_offsets(d, rec);
    cdc_checkpoint_free(d);
    free(js);
    cdc_checkpoint_free(rec);
    cdc_checkpoint_free(full);
    cdc_offsets_base_clear(&b);
    cdc_storage_close(st);
    rm_tree(dir);
}

/* The base kept for later assignments: every slot's offsets, state and owner, and the
 * floors, equal to the record's; nothing else. */
static void test_copy_base(void **state)
{
    cdc_checkpoint_t *c = sample(), *d;
    (void)state;
    assert_int_equal(cdc_checkpoint_add_floor(c, "ns.t", 77, 78, 5), CDC_OK);
    d = cdc_checkpoint_copy_base(c);
    assert_non_null(d);
    assert_int_equal(d->epoch, 42);
    assert_int_equal(d->term, 9);
    assert_int_equal(d->generation, 3);
    assert_int_equal(d->completed_ms, 1100);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++) {
        assert_int_equal(d->partitions[p].noffsets, 2);
        assert_int_equal(cdc_checkpoint_find_offset(d, p, "cdc.public.a")->next_offset, 30 + p);
        assert_int_equal(cdc_checkpoint_find_offset(d, p, "cdc.public.b")->next_offset, 20 + p);
        assert_string_equal(d->partitions[p].state_handle ? d->partitions[p].state_handle : "",
                            c->partitions[p].state_handle ? c->partitions[p].state_handle : "");
        assert_string_equal(d->partitions[p].owner, c->partitions[p].owner);
    }
    assert_int_equal(d->nfloors, 1);
    assert_string_equal(d->floors[0].table, "ns.t");
    assert_int_equal(d->floors[0].lsn, 78);
    assert_int_equal(d->nfiles, 0);
    assert_int_equal(d->nschemas, 0);
    cdc_checkpoint_free(c);
    cdc_checkpoint_free(d);
}

/* The schema memo: an update equal to the table's last recorded one is left out of the
 * next record; a changed one, a new table's and a table with several updates are kept. */
static void test_schema_memo(void **state)
{
    cdc_schema_memo_t m = {0};
    cdc_checkpoint_t *a = cdc_checkpoint_new("j", 1, 1, 1), *b = cdc_checkpoint_new("j", 2, 1, 1);
    (void)state;
    assert_int_equal(cdc_checkpoint_add_schema(a, "ns.t", "{\"s\":1}", 3), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_masked_schema(a, "ns.u", "{\"s\":2}", 1, "1:ab"), CDC_OK);
    assert_int_equal(cdc_schema_memo_strip(&m, a), 0); /* nothing recorded yet */
    assert_int_equal(cdc_schema_memo_note(&m, a), CDC_OK);
    /* b: t the same, u with another policy, v new, w twice */
    assert_int_equal(cdc_checkpoint_add_schema(b, "ns.t", "{\"s\":1}", 3), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_masked_schema(b, "ns.u", "{\"s\":2}", 1, "2:cd"), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(b, "ns.v", "{\"s\":3}", 1), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(b, "ns.w", "{\"s\":4}", 1), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(b, "ns.w", "{\"s\":5}", 2), CDC_OK);
    assert_int_equal(cdc_schema_memo_strip(&m, b), 1);
    assert_int_equal(b->nschemas, 4);
    for (size_t i = 0; i < b->nschemas; i++)
        assert_string_not_equal(b->schemas[i].table, "ns.t");
    assert_int_equal(cdc_schema_memo_note(&m, b), CDC_OK);
    cdc_checkpoint_free(a);
    /* a: w's second update alone again is kept (several in one record are not memoized),
     * u's newest policy is left out, t (no longer in the memo's view) is left out too */
    a = cdc_checkpoint_new("j", 3, 1, 1);
    assert_int_equal(cdc_checkpoint_add_schema(a, "ns.w", "{\"s\":5}", 2), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_masked_schema(a, "ns.u", "{\"s\":2}", 1, "2:cd"), CDC_OK);
    assert_int_equal(cdc_checkpoint_add_schema(a, "ns.t", "{\"s\":1}", 3), CDC_OK);
    assert_int_equal(cdc_schema_memo_strip(&m, a), 2);
    assert_int_equal(a->nschemas, 1);
    assert_string_equal(a->schemas[0].table, "ns.w");
    cdc_schema_memo_clear(&m);
    assert_int_equal(cdc_schema_memo_strip(&m, b), 0); /* a new term: every schema */
    cdc_checkpoint_free(a);
    cdc_checkpoint_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),          cmocka_unit_test(test_pending_file_list),
        cmocka_unit_test(test_truncates),          cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_offsets_summary),    cmocka_unit_test(test_floors),
        cmocka_unit_test(test_set_offset_index),   cmocka_unit_test(test_delta_roundtrip),
        cmocka_unit_test(test_offsets_base_store), cmocka_unit_test(test_copy_base),
        cmocka_unit_test(test_schema_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
