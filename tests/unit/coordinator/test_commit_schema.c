/*
 * Unit tests for schema changes by field id: cdc_ice_table_set_schema() and
 * cdc_ice_table_check_schema() (common/iceberg/table.c), and the committer
 * (coordinator/commit.c) making a newer source schema version the table's schema,
 * following a change of the workers' column masking policy at the same version (never
 * back to an older policy), and refusing an epoch whose files carry field ids the table
 * cannot read, on a local warehouse. Data files are descriptors only (the commit does
 * not read them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "common/iceberg/schema.h"
#include "common/iceberg/storage.h"
#include "common/iceberg/table.h"
#include "coordinator/commit.h"

/* A schema from its Iceberg JSON. */
static cdc_ice_schema_t schema_of(const char *json)
{
    cdc_ice_schema_t s;
    cdc_error_t e;
    assert_int_equal(cdc_ice_schema_from_json(json, &s, &e), CDC_OK);
    return s;
}

#define V1                                                                                         \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["                                            \
    "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"int\"},"                               \
    "{\"id\":2,\"name\":\"v\",\"required\":false,\"type\":\"string\"},"                            \
    "{\"id\":3,\"name\":\"n\",\"required\":false,\"type\":\"decimal(10,2)\"}],"                    \
    "\"identifier-field-ids\":[1]}"
/* rename v -> w, promote id int -> long, n -> a versioned field, a new column */
#define V2                                                                                         \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["                                            \
    "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"long\"},"                              \
    "{\"id\":2,\"name\":\"w\",\"required\":false,\"type\":\"string\"},"                            \
    "{\"id\":4,\"name\":\"n\",\"required\":false,\"type\":\"decimal(14,4)\"},"                     \
    "{\"id\":5,\"name\":\"x\",\"required\":true,\"type\":\"int\"},"                                \
    "{\"id\":3,\"name\":\"n__v1\",\"required\":false,\"type\":\"decimal(10,2)\"}],"                \
    "\"identifier-field-ids\":[1]}"
/* v2 with x dropped */
#define V3                                                                                         \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["                                            \
    "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"long\"},"                              \
    "{\"id\":2,\"name\":\"w\",\"required\":false,\"type\":\"string\"},"                            \
    "{\"id\":4,\"name\":\"n\",\"required\":false,\"type\":\"decimal(14,4)\"},"                     \
    "{\"id\":3,\"name\":\"n__v1\",\"required\":false,\"type\":\"decimal(10,2)\"}],"                \
    "\"identifier-field-ids\":[1]}"

static void tmp_warehouse(char *dir, size_t dsize, char *wh, size_t wsize)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, dsize, "%s/cdc-commit-schema-XXXXXX", tmp);
    assert_non_null(mkdtemp(dir));
    snprintf(wh, wsize, "file://%s", dir);
}

static void rm_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_set_schema_by_id(void **state)
{
    char dir[256], wh[300];
    cdc_storage_t *st;
    cdc_ice_table_t *t;
    cdc_error_t e;
    bool changed;
    (void)state;

    tmp_warehouse(dir, sizeof(dir), wh, sizeof(wh));
    assert_int_equal(cdc_storage_open(wh, NULL, &st, &e), CDC_OK);
    char *loc = cdc_ice_table_location(wh, "ns", "t");
    cdc_ice_schema_t v1 = schema_of(V1), v2 = schema_of(V2), v3 = schema_of(V3);
    assert_int_equal(cdc_ice_table_open(st, loc, &v1, NULL, &t, &e), CDC_OK);
    int32_t first = cdc_ice_table_metadata(t)->current_schema_id;

    assert_int_equal(cdc_ice_table_set_schema(t, &v2, NULL, &changed, &e), CDC_OK);
    assert_true(changed);
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
    assert_int_equal(cur->nfields, 5);
    assert_string_equal(cur->fields[cdc_ice_schema_find(cur, 2)].name, "w");
    assert_int_equal(cur->fields[cdc_ice_schema_find(cur, 1)].type, CDC_ICE_LONG);
    assert_true(cur->fields[cdc_ice_schema_find(cur, 1)].required);
    /* a new field is optional even when the schema says required */
    assert_false(cur->fields[cdc_ice_schema_find(cur, 5)].required);
    assert_int_equal(cdc_ice_table_metadata(t)->last_column_id, 5);

    /* files of the old schema read in the new one; unknown ids and other types do not */
    assert_int_equal(cdc_ice_table_check_schema(t, &v1, &e), CDC_OK);
    cdc_ice_schema_t bad = schema_of(
        "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":100008,\"name\":\"added\","
        "\"required\":false,\"type\":\"string\"}]}");
    assert_int_equal(cdc_ice_table_check_schema(t, &bad, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "100008"));
    cdc_ice_schema_free(&bad);
    bad = schema_of("{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":3,\"name\":\"n\","
                    "\"required\":false,\"type\":\"decimal(10,4)\"}]}");
    assert_int_equal(cdc_ice_table_check_schema(t, &bad, &e), CDC_ERR_INVALID);
    /* a scale change under the same id is refused and changes nothing */
    int32_t before = cdc_ice_table_metadata(t)->current_schema_id;
    assert_int_equal(cdc_ice_table_set_schema(t, &bad, NULL, &changed, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "not an Iceberg type promotion"));
    assert_int_equal(cdc_ice_table_metadata(t)->current_schema_id, before);
    cdc_ice_schema_free(&bad);

    /* drop x: files that still carry it read (its field is in the history) */
    assert_int_equal(cdc_ice_table_set_schema(t, &v3, NULL, &changed, &e), CDC_OK);
    assert_true(changed);
    assert_int_equal(cdc_ice_table_check_schema(t, &v2, &e), CDC_OK);
    /* the same schema again: nothing to commit; v1's shape again would be a narrowing */
    assert_int_equal(cdc_ice_table_set_schema(t, &v3, NULL, &changed, &e), CDC_OK);
    assert_false(changed);
    assert_int_equal(cdc_ice_table_set_schema(t, &v1, NULL, &changed, &e), CDC_ERR_INVALID);
    assert_true(cdc_ice_table_metadata(t)->current_schema_id != first);

    /* a reader of the metadata sees the same */
    cdc_ice_table_close(t);
    assert_int_equal(cdc_ice_table_load(st, loc, &t, &e), CDC_OK);
    cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
    assert_int_equal(cur->nfields, 4);
    assert_int_equal(cdc_ice_schema_find(cur, 5), -1);
    cdc_ice_table_close(t);
    cdc_ice_schema_free(&v1);
    cdc_ice_schema_free(&v2);
    cdc_ice_schema_free(&v3);
    free(loc);
    cdc_storage_close(st);
    rm_tree(dir);
}

/* A committer and a storage handle on a new local warehouse; loc = table ns.t. */
typedef struct fx {
    char dir[256], wh[300];
    cdc_committer_t *cm;
    cdc_storage_t *st;
    char *loc;
} fx_t;

static void fx_open(fx_t *f)
{
    cdc_error_t e;
    tmp_warehouse(f->dir, sizeof(f->dir), f->wh, sizeof(f->wh));
    cdc_committer_options_t o = {.warehouse = f->wh, .job = "job"};
    assert_int_equal(cdc_committer_open(&f->cm, &o, &e), CDC_OK);
    cdc_committer_set_term(f->cm, 1);
    assert_int_equal(cdc_storage_open(f->wh, NULL, &f->st, &e), CDC_OK);
    f->loc = cdc_ice_table_location(f->wh, "ns", "t");
}

static void fx_close(fx_t *f)
{
    cdc_committer_close(f->cm);
    free(f->loc);
    cdc_storage_close(f->st);
    rm_tree(f->dir);
}

static cdc_checkpoint_t *record(uint64_t epoch, const char *schema, int64_t version)
{
    cdc_checkpoint_t *c = cdc_checkpoint_new("job", epoch, 1, 1);
    assert_non_null(c);
    for (uint32_t p = 0; p < CDC_PARTITIONS; p++)
        assert_int_equal(cdc_checkpoint_set_offset(c, p, "cdc.ns.t", (int64_t)epoch), CDC_OK);
    if (schema != NULL)
        assert_int_equal(cdc_checkpoint_add_schema(c, "ns.t", schema, version), CDC_OK);
    return c;
}

/* Commits c (then frees it) and checks the result. */
static void commit_expect(cdc_committer_t *cm, cdc_checkpoint_t *c, cdc_err_t want)
{
    cdc_commit_result_t res;
    cdc_error_t e;
    assert_int_equal(cdc_committer_commit(cm, c, &res, &e), want);
    cdc_checkpoint_free(c);
}

static const cdc_ice_schema_t *current(cdc_storage_t *st, const char *loc, cdc_ice_table_t **t)
{
    cdc_error_t e;
    assert_int_equal(cdc_ice_table_load(st, loc, t, &e), CDC_OK);
    return cdc_ice_metadata_current_schema(cdc_ice_table_metadata(*t));
}

static void test_committer_follows_versions(void **state)
{
    fx_t f;
    cdc_commit_result_t res;
    cdc_ice_table_t *t;
    cdc_error_t e;
    (void)state;

    fx_open(&f);

    cdc_checkpoint_t *c = record(1, V1, 1);
    commit_expect(f.cm, c, CDC_OK);

    /* one epoch with an older version's files next to the newer version's: the newer is
     * the table's schema, the older files still read */
    c = record(2, V2, 2);
    assert_int_equal(cdc_checkpoint_add_schema(c, "ns.t", V1, 1), CDC_OK);
    commit_expect(f.cm, c, CDC_OK);
    const cdc_ice_schema_t *cur = current(f.st, f.loc, &t);
    assert_int_equal(cur->nfields, 5);
    assert_string_equal(cur->fields[cdc_ice_schema_find(cur, 2)].name, "w");
    cdc_ice_table_close(t);
    cdc_schema_change_t ch[4];
    size_t n = cdc_committer_schema_changes(f.cm, ch, 4);
    assert_true(n >= 1);
    assert_true(ch[n - 1].versioned);
    assert_non_null(strstr(ch[n - 1].summary, "renamed v -> w(2)"));
    assert_non_null(strstr(ch[n - 1].summary, "promoted id int -> long(1)"));
    assert_non_null(strstr(ch[n - 1].summary, "new version n decimal(14,4)(4): a type change "
                                              "Iceberg cannot promote, the earlier values stay "
                                              "in n__v1(3)"));
    assert_null(strstr(ch[n - 1].summary, "renamed n"));

    /* a later epoch of a lagging worker (version 1 again): no step back */
    c = record(3, V1, 1);
    commit_expect(f.cm, c, CDC_OK);
    cur = current(f.st, f.loc, &t);
    assert_int_equal(cur->nfields, 5);
    cdc_ice_table_close(t);

    /* files whose field ids the table does not know: the commit stops, with the id */
    c = record(4,
               "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\","
               "\"required\":true,\"type\":\"long\"},{\"id\":100008,\"name\":\"added\","
               "\"required\":false,\"type\":\"string\"}],\"identifier-field-ids\":[1]}",
               2);
    assert_int_equal(cdc_committer_commit(f.cm, c, &res, &e), CDC_ERR_INVALID);
    assert_non_null(strstr(e.msg, "100008"));
    assert_non_null(strstr(e.msg, "checkpoint 4"));
    cdc_checkpoint_free(c);

    /* the worker's metadata column _cdc_special (docs/worker.md, "Values no Iceberg type
     * holds") in files of the table's own source version: added with its id, once */
    for (uint64_t epoch = 5; epoch <= 6; epoch++) {
        c = record(epoch,
                   "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":"
                   "\"id\",\"required\":true,\"type\":\"long\"},{\"id\":100008,\"name\":"
                   "\"_cdc_special\",\"required\":false,\"type\":\"string\"}],"
                   "\"identifier-field-ids\":[1]}",
                   2);
        commit_expect(f.cm, c, CDC_OK);
        cur = current(f.st, f.loc, &t);
        assert_int_equal(cur->nfields, 6);
        int k = cdc_ice_schema_find(cur, 100008);
        assert_true(k >= 0);
        assert_string_equal(cur->fields[k].name, "_cdc_special");
        assert_int_equal(cur->fields[k].type, CDC_ICE_STRING);
        assert_non_null(strstr(cur->fields[cdc_ice_schema_find(cur, 2)].name, "w"));
        cdc_ice_table_close(t);
    }

    fx_close(&f);
}

/* V3, then a source column n__v1 added: the retired n__v1 yields its name (n__v1__f3):
 * an added column and a rename, no new version of a column */
#define V4                                                                                         \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["                                            \
    "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"long\"},"                              \
    "{\"id\":2,\"name\":\"w\",\"required\":false,\"type\":\"string\"},"                            \
    "{\"id\":4,\"name\":\"n\",\"required\":false,\"type\":\"decimal(14,4)\"},"                     \
    "{\"id\":6,\"name\":\"n__v1\",\"required\":false,\"type\":\"date\"},"                          \
    "{\"id\":3,\"name\":\"n__v1__f3\",\"required\":false,\"type\":\"decimal(10,2)\"}],"            \
    "\"identifier-field-ids\":[1]}"

/* What the committer reports: a type change Iceberg cannot promote (the source name on
 * the new field, the old one renamed n__v1) apart from a source column that takes the
 * name of a retired field (an added column, the retired field renamed). */
static void test_committer_reports_versions(void **state)
{
    fx_t f;
    cdc_schema_change_t ch[4];
    (void)state;

    fx_open(&f);
    commit_expect(f.cm, record(1, V1, 1), CDC_OK);
    commit_expect(f.cm, record(2, V3, 2), CDC_OK);
    size_t n = cdc_committer_schema_changes(f.cm, ch, 4);
    assert_int_equal(n, 1);
    assert_true(ch[0].versioned);
    assert_non_null(strstr(ch[0].summary, "earlier values stay in n__v1(3)"));
    assert_null(strstr(ch[0].summary, "renamed n "));

    commit_expect(f.cm, record(3, V4, 3), CDC_OK);
    n = cdc_committer_schema_changes(f.cm, ch, 4);
    assert_int_equal(n, 2);
    assert_false(ch[1].versioned);
    assert_non_null(strstr(ch[1].summary, "added n__v1 date(6)"));
    assert_non_null(strstr(ch[1].summary, "renamed n__v1 -> n__v1__f3(3)"));
    fx_close(&f);
}

/* The spec of the layout the committer applied to ns.t (copied), "" when none. */
static void layout_spec(cdc_committer_t *cm, char *out, size_t size)
{
    cdc_table_layout_t *ls;
    size_t n;
    out[0] = '\0';
    assert_int_equal(cdc_committer_layouts(cm, &ls, &n), CDC_OK);
    for (size_t i = 0; i < n; i++)
        if (strcmp(ls[i].table, "ns.t") == 0 && ls[i].spec_json != NULL)
            snprintf(out, size, "%s", ls[i].spec_json);
    free(ls);
}

/* --partition-by names a column: after a type change Iceberg cannot promote the name
 * is the new field, and the table is partitioned by it from that commit on (a new
 * spec), not by the retired field that new rows leave null. */
static void test_committer_layout_follows_name(void **state)
{
    fx_t f;
    cdc_error_t e;
    char spec[512];
    (void)state;

    tmp_warehouse(f.dir, sizeof(f.dir), f.wh, sizeof(f.wh));
    cdc_committer_options_t o = {.warehouse = f.wh, .job = "job", .partition_by = "ns.t=n"};
    assert_int_equal(cdc_committer_open(&f.cm, &o, &e), CDC_OK);
    cdc_committer_set_term(f.cm, 1);
    assert_int_equal(cdc_storage_open(f.wh, NULL, &f.st, &e), CDC_OK);
    f.loc = cdc_ice_table_location(f.wh, "ns", "t");

    commit_expect(f.cm, record(1, V1, 1), CDC_OK);
    layout_spec(f.cm, spec, sizeof(spec));
    assert_non_null(strstr(spec, "\"source-id\":3"));
    commit_expect(f.cm, record(2, V3, 2), CDC_OK);
    layout_spec(f.cm, spec, sizeof(spec));
    assert_non_null(strstr(spec, "\"source-id\":4"));
    assert_non_null(strstr(spec, "\"spec-id\":2"));
    /* a later commit of the same version keeps it */
    commit_expect(f.cm, record(3, V3, 2), CDC_OK);
    layout_spec(f.cm, spec, sizeof(spec));
    assert_non_null(strstr(spec, "\"source-id\":4"));
    fx_close(&f);
}

/* A worker still on version 2 (a column added, then dropped in version 3) acks after
 * the table took version 3: version 2's schema joins the history, the current stays. */
static void test_committer_skipped_version(void **state)
{
    fx_t f;
    cdc_ice_table_t *t;
    (void)state;

    fx_open(&f);

    cdc_checkpoint_t *c = record(1, V1, 1);
    commit_expect(f.cm, c, CDC_OK);
    c = record(2, V3, 3);
    commit_expect(f.cm, c, CDC_OK);
    c = record(3, V2, 2);
    commit_expect(f.cm, c, CDC_OK);

    const cdc_ice_schema_t *cur = current(f.st, f.loc, &t);
    const cdc_ice_metadata_t *md = cdc_ice_table_metadata(t);
    bool has_x = false;
    assert_int_equal(cur->nfields, 4);
    assert_int_equal(cdc_ice_schema_find(cur, 5), -1);
    for (size_t i = 0; i < md->nschemas; i++)
        has_x |= cdc_ice_schema_find(&md->schemas[i], 5) >= 0;
    assert_true(has_x);
    assert_int_equal(md->last_column_id, 5);
    cdc_ice_table_close(t);

    /* an older version whose type does not fit is still refused */
    c = record(4,
               "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\","
               "\"required\":true,\"type\":\"string\"}],\"identifier-field-ids\":[1]}",
               2);
    commit_expect(f.cm, c, CDC_ERR_INVALID);

    fx_close(&f);
}

/* V1 as a masking policy that drops (or holds back) column v writes it */
#define V1_MASKED                                                                                  \
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["                                            \
    "{\"id\":1,\"name\":\"id\",\"required\":true,\"type\":\"int\"},"                               \
    "{\"id\":3,\"name\":\"n\",\"required\":false,\"type\":\"decimal(10,2)\"}],"                    \
    "\"identifier-field-ids\":[1]}"

static void masked(cdc_checkpoint_t *c, const char *schema, int64_t version, const char *policy)
{
    assert_int_equal(cdc_checkpoint_add_masked_schema(c, "ns.t", schema, version, policy), CDC_OK);
}

/* The table's current schema has field id (or not) and its cdc.mask-policy property. */
static void expect_table(fx_t *f, int32_t id, bool has, const char *policy)
{
    cdc_ice_table_t *t;
    const cdc_ice_schema_t *cur = current(f->st, f->loc, &t);
    const char *p = cdc_ice_props_get(&cdc_ice_table_metadata(t)->properties, "cdc.mask-policy");
    assert_int_equal(cdc_ice_schema_find(cur, id) >= 0, has);
    assert_string_equal(p != NULL ? p : "", policy);
    cdc_ice_table_close(t);
}

/* A change of the masking policy at the same source version is a schema change of its
 * own: the newer policy's schema (a column the policy now names, or drops) becomes the
 * table's and the policy is recorded; a worker still on the older policy takes nothing
 * back; masking turned off is a change too. */
static void test_committer_mask_policy(void **state)
{
    fx_t f;
    cdc_checkpoint_t *c;
    (void)state;

    fx_open(&f);
    c = record(1, NULL, 0);
    masked(c, V1_MASKED, 1, "1:aaaa");
    commit_expect(f.cm, c, CDC_OK);
    expect_table(&f, 2, false, "1:aaaa");

    /* policy 2 names v: the same source version, the column joins */
    c = record(2, NULL, 0);
    masked(c, V1, 1, "2:bbbb");
    commit_expect(f.cm, c, CDC_OK);
    expect_table(&f, 2, true, "2:bbbb");

    /* a worker not restarted yet, alone or next to a restarted one: no step back */
    c = record(3, NULL, 0);
    masked(c, V1_MASKED, 1, "1:aaaa");
    commit_expect(f.cm, c, CDC_OK);
    expect_table(&f, 2, true, "2:bbbb");
    c = record(4, NULL, 0);
    masked(c, V1_MASKED, 1, "1:aaaa");
    masked(c, V1, 1, "2:bbbb");
    commit_expect(f.cm, c, CDC_OK);
    expect_table(&f, 2, true, "2:bbbb");

    /* policy 3 drops it again; then masking is turned off */
    c = record(5, NULL, 0);
    masked(c, V1_MASKED, 1, "3:cccc");
    commit_expect(f.cm, c, CDC_OK);
    expect_table(&f, 2, false, "3:cccc");
    c = record(6, V1, 1);
    commit_expect(f.cm, c, CDC_OK);
    expect_table(&f, 2, true, "");

    /* the policy survives the checkpoint record's JSON */
    c = record(7, NULL, 0);
    masked(c, V1_MASKED, 1, "4:dddd");
    char *json = cdc_checkpoint_to_json(c, true);
    cdc_checkpoint_t *back = NULL;
    cdc_error_t e;
    assert_non_null(json);
    assert_int_equal(cdc_checkpoint_from_json(json, strlen(json), &back, &e), CDC_OK);
    assert_string_equal(back->schemas[0].mask_policy, "4:dddd");
    free(json);
    cdc_checkpoint_free(c);
    commit_expect(f.cm, back, CDC_OK);
    expect_table(&f, 2, false, "4:dddd");
    fx_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_schema_by_id),
        cmocka_unit_test(test_committer_follows_versions),
        cmocka_unit_test(test_committer_reports_versions),
        cmocka_unit_test(test_committer_layout_follows_name),
        cmocka_unit_test(test_committer_skipped_version),
        cmocka_unit_test(test_committer_mask_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
