/*
 * Unit tests for table layouts: the coordinator's --partition-by / --sort-by
 * declarations (coordinator/layout.c: form checks naming the declaration at fault,
 * lookup per table) and the worker's specs from barriers (worker/layout.c: parsed,
 * looked up for the mirror and the changelog, a bad spec left out).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/msg.h"
#include "coordinator/layout.h"
#include "worker/layout.h"

static void check_ok(const char *decl, bool sort)
{
    cdc_error_t e;
    cdc_error_clear(&e);
    if (cdc_layout_check(decl, sort, &e) != CDC_OK)
        fail_msg("\"%s\" rejected: %s", decl ? decl : "(null)", e.msg);
}

static void check_bad(const char *decl, bool sort, const char *in_msg)
{
    cdc_error_t e;
    cdc_error_clear(&e);
    assert_int_equal(cdc_layout_check(decl, sort, &e), CDC_ERR_CONFIG);
    if (strstr(e.msg, in_msg) == NULL)
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", decl, e.msg, in_msg);
}

static void test_declarations(void **state)
{
    (void)state;
    check_ok(NULL, false);
    check_ok("", false);
    check_ok("public.orders=bucket[16](id), day(created_at)", false);
    check_ok("public.orders=region;public.orders_changelog=day(_source_ts)", false);
    check_ok(" public.a=identity(x),truncate[4](name) ; public.b=hour(ts)", false);
    check_ok("public.orders=customer_id,id desc nulls last,day(ts) asc", true);

    check_bad("orders=id", false, "--partition-by");              /* no namespace */
    check_bad("public.orders", false, "public.orders");           /* no terms */
    check_bad("public.orders=buckit[4](id)", false, "buckit");    /* unknown transform */
    check_bad("public.orders=bucket[x](id)", false, "bucket[x]"); /* bad parameter */
    check_bad("public.orders=id desc", false, "id desc");         /* a direction in a spec */
    check_bad("public.orders=id sideways", true, "--sort-by");    /* unknown direction */
    check_bad("public.a=id;public.b=day(", false, "public.b");    /* names the bad one */
}

static void test_lookup(void **state)
{
    (void)state;
    const char *d = "public.orders=bucket[16](id);public.orders_changelog=day(_source_ts)";
    char *v = cdc_layout_lookup(d, "public.orders");
    assert_string_equal(v, "bucket[16](id)");
    free(v);
    v = cdc_layout_lookup(d, "public.orders_changelog");
    assert_string_equal(v, "day(_source_ts)");
    free(v);
    assert_null(cdc_layout_lookup(d, "public.order"));
    assert_null(cdc_layout_lookup(NULL, "public.orders"));
}

static void test_worker_layouts(void **state)
{
    (void)state;
    cdc_layouts_t l = {0};
    Cdc__TableLayout a = CDC__TABLE_LAYOUT__INIT, b = CDC__TABLE_LAYOUT__INIT,
                     bad = CDC__TABLE_LAYOUT__INIT;
    a.table = "public.orders";
    a.spec_id = 2;
    a.spec_json = "{\"spec-id\":2,\"fields\":[{\"name\":\"id_bucket\",\"transform\":"
                  "\"bucket[16]\",\"source-id\":1,\"field-id\":1000}]}";
    b.table = "public.orders_changelog";
    b.spec_id = 1;
    b.spec_json = "{\"spec-id\":1,\"fields\":[{\"name\":\"_source_ts_day\",\"transform\":"
                  "\"day\",\"source-id\":100005,\"field-id\":1000}]}";
    bad.table = "public.items";
    bad.spec_id = 4;
    bad.spec_json = "{\"spec-id\":4,\"fields\":[{\"name\":\"x\",\"transform\":\"nope\"}]}";
    Cdc__TableLayout *ls[] = {&a, &b, &bad};

    cdc_layouts_update(&l, ls, 3);
    assert_int_equal(l.n, 2); /* the bad spec is left out: its table stays unpartitioned */
    const cdc_ice_partition_spec_t *s = cdc_layouts_spec(&l, "public", "orders", false);
    assert_non_null(s);
    assert_int_equal(s->spec_id, 2);
    assert_int_equal(s->nfields, 1);
    assert_int_equal(s->fields[0].transform.kind, CDC_ICE_TRANSFORM_BUCKET);
    assert_int_equal(s->fields[0].transform.param, 16);
    s = cdc_layouts_spec(&l, "public", "orders", true);
    assert_non_null(s);
    assert_int_equal(s->fields[0].source_id, 100005);
    assert_null(cdc_layouts_spec(&l, "public", "items", false));
    assert_null(cdc_layouts_spec(&l, "public", "order", false));

    /* the same barrier again changes nothing; one without layouts clears them */
    const cdc_ice_partition_spec_t *before = cdc_layouts_spec(&l, "public", "orders", false);
    cdc_layouts_update(&l, ls, 3);
    assert_ptr_equal(cdc_layouts_spec(&l, "public", "orders", false), before);
    cdc_layouts_update(&l, NULL, 0);
    assert_int_equal(l.n, 0);
    assert_null(cdc_layouts_spec(&l, "public", "orders", false));
    cdc_layouts_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declarations),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_worker_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
