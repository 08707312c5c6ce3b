/*
 * Unit tests for the capture's table state (capture/tables.c) and the partitions mapped
 * to their root (capture/partitions.c), without PostgreSQL or Kafka: the --tables list,
 * lookups by topic, name and relation id, table errors, column types and Type messages,
 * the changes of partitions that cannot be mapped, and changes of published tables outside
 * the capture set (never dropped).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture/stream_int.h"

static cdc_capture_config_t cfg = {.topic_prefix = "pfx"};

static void capture_init(cdc_capture_t *cap, const char *tables)
{
    cdc_error_t e;
    memset(cap, 0, sizeof(*cap));
    cap->cfg = &cfg;
    assert_int_equal(cdc_capture_parse_tables(tables, &cap->wanted, &cap->nwanted, &e), CDC_OK);
}

static void capture_clear(cdc_capture_t *cap)
{
    cdc_source_tables_free(cap->wanted, cap->nwanted);
    for (size_t i = 0; i < cap->ntables; i++) {
        free(cap->tables[i].topic);
        free(cap->tables[i].schema);
        free(cap->tables[i].name);
    }
    free(cap->tables);
    for (size_t i = 0; i < cap->ntypes; i++)
        free(cap->types[i].name);
    free(cap->types);
    cdc_capture_leaves_free(cap);
}

static void test_parse_tables(void **state)
{
    cdc_source_table_t *t = NULL;
    size_t n = 0;
    cdc_error_t e;
    (void)state;

    assert_int_equal(cdc_capture_parse_tables("public.orders, items,sales.eu", &t, &n, &e), CDC_OK);
    assert_int_equal(n, 3);
    assert_string_equal(t[0].schema, "public");
    assert_string_equal(t[0].name, "orders");
    assert_string_equal(t[1].schema, "public"); /* the default schema */
    assert_string_equal(t[1].name, "items");
    assert_string_equal(t[2].schema, "sales");
    assert_string_equal(t[2].name, "eu");
    cdc_source_tables_free(t, n);

    assert_int_equal(cdc_capture_parse_tables("", &t, &n, &e), CDC_OK);
    assert_int_equal(n, 0);
    assert_null(t);

    assert_int_equal(cdc_capture_parse_tables("public.", &t, &n, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--tables"));
    cdc_source_tables_free(t, n);
}

static void test_lookups(void **state)
{
    cdc_capture_t cap;
    cdc_capture_table_t *t;
    (void)state;

    capture_init(&cap, "public.orders");
    t = cdc_capture_table_get(&cap, "public", "orders");
    assert_non_null(t);
    assert_string_equal(t->topic, "pfx.public.orders");
    assert_true(t->captured);
    t->relid = 4711;
    t = cdc_capture_table_get(&cap, "public", "other");
    assert_non_null(t);
    assert_false(t->captured);
    assert_int_equal(cap.ntables, 2);
    /* the same topic again: no new table */
    assert_ptr_equal(cdc_capture_table_get(&cap, "public", "orders"), &cap.tables[0]);
    assert_int_equal(cap.ntables, 2);

    assert_ptr_equal(cdc_capture_table_by_name(&cap, "public", "other"), &cap.tables[1]);
    assert_null(cdc_capture_table_by_name(&cap, "public", "missing"));
    assert_ptr_equal(cdc_capture_table_by_relid(&cap, 4711), &cap.tables[0]);
    assert_null(cdc_capture_table_by_relid(&cap, 4712));
    assert_true(cdc_capture_is_wanted(&cap, "public", "orders"));
    assert_false(cdc_capture_is_wanted(&cap, "public", "other"));
    capture_clear(&cap);
}

static void test_table_errors(void **state)
{
    cdc_capture_t cap;
    cdc_capture_table_t *t;
    cdc_error_t err;
    (void)state;

    capture_init(&cap, "public.orders,public.items");
    t = cdc_capture_table_get(&cap, "public", "orders");
    assert_int_equal(cdc_capture_table_fail(&cap, t, "table %s has no key", "orders"), CDC_OK);
    assert_true(t->failed);
    assert_false(t->captured);

    /* the setup check's callback creates the table's state when it has none */
    cdc_error_set(&err, CDC_ERR_CONFIG, "permission denied for table \"public.items\"");
    cdc_capture_on_table_error(&cap, "public", "items", &err);
    t = cdc_capture_table_by_name(&cap, "public", "items");
    assert_non_null(t);
    assert_true(t->failed);
    assert_false(t->captured);
    capture_clear(&cap);
}

static void test_types(void **state)
{
    cdc_capture_t cap;
    cdc_schema_col_t col;
    cdc_pgo_msg_t m;
    cdc_error_t e;
    (void)state;

    capture_init(&cap, "");
    memset(&col, 0, sizeof(col));
    cdc_capture_fill_col(&cap, &col, 23, -1, 0, NULL);
    assert_string_equal(col.pg_type, "int4");
    assert_int_equal(col.pg_oid, 23);

    /* a user-defined type is named by its Type message */
    memset(&m, 0, sizeof(m));
    m.kind = CDC_PGO_TYPE;
    m.u.type.oid = 90001;
    m.u.type.nspname = "public";
    m.u.type.typname = "mood";
    assert_int_equal(cdc_capture_on_type(&cap, &m, &e), CDC_OK);
    m.u.type.oid = 90002;
    m.u.type.typname = "_mood";
    assert_int_equal(cdc_capture_on_type(&cap, &m, &e), CDC_OK);
    assert_int_equal(cap.ntypes, 2);
    assert_true(cap.types[1].is_array);
    cdc_capture_fill_col(&cap, &col, 90001, -1, 0, NULL);
    assert_string_equal(col.pg_type, "public.mood");
    cdc_capture_fill_col(&cap, &col, 90002, -1, 0, NULL);
    assert_string_equal(col.pg_type, "public._mood");
    assert_int_equal(col.enc, CDC_VENC_ARRAY); /* elements as strings */

    /* a second Type message of the same oid renames it */
    m.u.type.oid = 90001;
    m.u.type.typname = "feeling";
    assert_int_equal(cdc_capture_on_type(&cap, &m, &e), CDC_OK);
    assert_int_equal(cap.ntypes, 2);
    assert_string_equal(cap.types[0].name, "public.feeling");

    cdc_capture_fill_col(&cap, &col, 90009, -1, 0, NULL);
    assert_string_equal(col.pg_type, "unknown");
    free(col.pg_type);
    capture_clear(&cap);
}

static void test_unmapped_partition(void **state)
{
    cdc_capture_t cap;
    cdc_capture_leaf_t *leaf;
    cdc_pgo_msg_t m;
    uint32_t relids[2] = {501, 777};
    cdc_error_t e;
    (void)state;

    capture_init(&cap, "public.measures");
    cap.leafmap.leaves = calloc(1, sizeof(*cap.leafmap.leaves));
    assert_non_null(cap.leafmap.leaves);
    cap.leafmap.nleaves = 1;
    leaf = &cap.leafmap.leaves[0];
    leaf->relid = 501;
    leaf->root_relid = 500;
    leaf->name = strdup("public.measures_2024");
    leaf->root_name = strdup("public.measures");
    assert_ptr_equal(cdc_capture_leaf_by_relid(&cap, 501), leaf);
    assert_null(cdc_capture_leaf_by_relid(&cap, 500));

    /* no column map (no key in common): the change is skipped, not an error */
    memset(&m, 0, sizeof(m));
    m.kind = CDC_PGO_INSERT;
    m.u.insert.relid = 501;
    {
        cdc_pgo_msg_t root;
        bool produce = true;
        assert_int_equal(cdc_capture_leaf_map(&cap, leaf, &m, 0x1000, &root, &produce, &e), CDC_OK);
        assert_false(produce);
    }
    assert_true(leaf->warned);

    /* a truncate that names only mapped partitions keeps no relation; the others stay */
    memset(&m, 0, sizeof(m));
    m.kind = CDC_PGO_TRUNCATE;
    m.u.truncate.nrelids = 2;
    m.u.truncate.relids = relids;
    {
        cdc_pgo_msg_t kept;
        m.u.truncate.nrelids = 1;
        assert_int_equal(cdc_capture_truncate_unmapped(&cap, &m, 0x1000, &kept, &e), CDC_OK);
        assert_int_equal(kept.u.truncate.nrelids, 0);
        m.u.truncate.nrelids = 2;
        assert_int_equal(cdc_capture_truncate_unmapped(&cap, &m, 0x1000, &kept, &e), CDC_OK);
        assert_int_equal(kept.u.truncate.nrelids, 1);
        assert_int_equal(kept.u.truncate.relids[0], 777);
    }

    cdc_capture_leaves_free(&cap);
    assert_int_equal(cap.leafmap.nleaves, 0);
    assert_null(cap.leafmap.leaves);
    capture_clear(&cap);
}

/* A Relation message of schema.name (no columns: an uncaptured table is not read further). */
static void relation(cdc_capture_t *cap, uint32_t relid, const char *schema, const char *name)
{
    cdc_pgo_msg_t m;
    cdc_error_t e;

    memset(&m, 0, sizeof(m));
    m.kind = CDC_PGO_RELATION;
    m.u.relation.relid = relid;
    m.u.relation.nspname = schema;
    m.u.relation.relname = name;
    m.u.relation.replident = 'd';
    assert_int_equal(cdc_capture_on_relation(cap, &m, &e), CDC_OK);
}

/*
 * A change of a table the publication streams but --tables leaves out ends the session
 * with an error naming the table (before, it was dropped and its LSN confirmed); with
 * the publication as the capture set the error is retriable (a new session reads it).
 */
static void test_uncaptured_change_stops(void **state)
{
    cdc_capture_config_t fixed = {
        .topic_prefix = "pfx", .publication = "cdc_pub", .tables = "public.orders"};
    cdc_capture_config_t published = {
        .topic_prefix = "pfx", .publication = "cdc_pub", .tables = ""};
    cdc_capture_t cap;
    cdc_pgo_msg_t m;
    uint32_t relids[1] = {700};
    cdc_error_t e;
    (void)state;

    capture_init(&cap, "public.orders");
    cap.cfg = &fixed;
    relation(&cap, 700, "public", "audit");
    cap.tx.pos.id = 1;

    memset(&m, 0, sizeof(m));
    m.kind = CDC_PGO_INSERT;
    m.u.insert.relid = 700;
    cdc_error_clear(&e);
    assert_int_equal(cdc_capture_on_change(&cap, &m, 0x2000, &e), CDC_ERR_CONFIG);
    assert_false(e.retriable);
    assert_non_null(strstr(e.msg, "\"public.audit\""));
    assert_non_null(strstr(e.msg, "add public.audit to --tables"));

    memset(&m, 0, sizeof(m));
    m.kind = CDC_PGO_DELETE;
    m.u.del.relid = 700;
    assert_int_equal(cdc_capture_on_change(&cap, &m, 0x2100, &e), CDC_ERR_CONFIG);

    memset(&m, 0, sizeof(m));
    m.kind = CDC_PGO_TRUNCATE;
    m.u.truncate.nrelids = 1;
    m.u.truncate.relids = relids;
    assert_int_equal(cdc_capture_on_change(&cap, &m, 0x2200, &e), CDC_ERR_CONFIG);

    /* the capture set is the publication: the table joined it after the session read it */
    cap.cfg = &published;
    memset(&m, 0, sizeof(m));
    m.kind = CDC_PGO_INSERT;
    m.u.insert.relid = 700;
    cdc_error_clear(&e);
    assert_int_equal(cdc_capture_on_change(&cap, &m, 0x2300, &e), CDC_ERR_CONFIG);
    assert_true(e.retriable);
    assert_non_null(strstr(e.msg, "\"public.audit\""));

    /* a relation id no Relation message named is no table to drop changes of either */
    m.u.insert.relid = 701;
    assert_int_equal(cdc_capture_on_change(&cap, &m, 0x2400, &e), CDC_ERR_PROTOCOL);
    assert_true(e.retriable);

    /* a table in error keeps its documented behaviour: skipped and counted */
    cap.cfg = &fixed;
    assert_int_equal(
        cdc_capture_table_fail(&cap, cdc_capture_table_by_name(&cap, "public", "audit"), "x"),
        CDC_OK);
    m.u.insert.relid = 700;
    assert_int_equal(cdc_capture_on_change(&cap, &m, 0x2500, &e), CDC_OK);
    capture_clear(&cap);
}

/*
 * Which tables joining the capture set get an incremental snapshot: one never captured
 * (no registered schema, no snapshot recorded), not under --snapshot-mode=never.
 */
static void test_incremental_needed(void **state)
{
    cdc_capture_config_t initial = {.topic_prefix = "pfx", .snapshot_mode = "initial"};
    cdc_capture_config_t incremental = {.topic_prefix = "pfx", .snapshot_mode = "incremental"};
    cdc_capture_config_t never = {.topic_prefix = "pfx", .snapshot_mode = "never"};
    cdc_capture_t cap;
    cdc_capture_table_t *t;
    (void)state;

    capture_init(&cap, "");
    cap.cfg = &initial;
    t = cdc_capture_table_get(&cap, "public", "audit");
    assert_non_null(t);
    assert_true(cdc_incremental_needed(&cap, t));
    cap.cfg = &incremental;
    assert_true(cdc_incremental_needed(&cap, t));
    cap.cfg = &never;
    assert_false(cdc_incremental_needed(&cap, t));
    cap.cfg = &initial;
    t->isnap.marked = true; /* a snapshot of it was recorded (done or to resume) */
    assert_false(cdc_incremental_needed(&cap, t));
    t->isnap.marked = false;
    t->has_latest = true; /* captured before: a schema of it is registered */
    assert_false(cdc_incremental_needed(&cap, t));
    t->has_latest = false;
    capture_clear(&cap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_tables),       cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_table_errors),       cmocka_unit_test(test_types),
        cmocka_unit_test(test_unmapped_partition), cmocka_unit_test(test_uncaptured_change_stops),
        cmocka_unit_test(test_incremental_needed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
