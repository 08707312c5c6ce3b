/* Unit tests for coordinator/checkpoint.c: the record's JSON form round-trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/checkpoint.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),       cmocka_unit_test(test_pending_file_list),
        cmocka_unit_test(test_truncates),       cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_offsets_summary), cmocka_unit_test(test_floors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
