/* Unit tests for common/cluster.c: the job's etcd keys, the leader record and the
 * coordinators' presence records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>

#include <jansson.h>

#include "common/cluster.h"

static void test_keys(void **state)
{
    char k[256];
    (void)state;
    cdc_cluster_key(k, sizeof(k), "orders", "leader");
    assert_string_equal(k, "/cdc/orders/leader");
    cdc_cluster_key(k, sizeof(k), "orders", "");
    assert_string_equal(k, "/cdc/orders/");
    cdc_cluster_key(k, sizeof(k), "orders", "checkpoints/");
    assert_string_equal(k, "/cdc/orders/checkpoints/");
    cdc_cluster_checkpoint_key(k, sizeof(k), "orders", 42);
    assert_string_equal(k, "/cdc/orders/checkpoints/00000000000000000042");
    /* keys sort by epoch as strings, as etcd ranges them */
    char k2[256];
    cdc_cluster_checkpoint_key(k2, sizeof(k2), "orders", 1000);
    assert_true(strcmp(k, k2) < 0);
    assert_int_equal(CDC_CLUSTER_PARTITIONS, 12);
    cdc_cluster_coordinator_key(k, sizeof(k), "orders", "coord-1");
    assert_string_equal(k, "/cdc/orders/coordinators/coord-1");
    cdc_cluster_coordinator_key(k, sizeof(k), "orders", "");
    assert_string_equal(k, "/cdc/orders/coordinators/");
}

/* The record is JSON with its strings escaped: an id with quotes and backslashes reads
 * back the same (it was built with snprintf before, which produced invalid JSON). */
static void test_leader_record(void **state)
{
    cdc_leader_record_t r = {"coord \"a\\b\"", "tcp://10.0.0.1:7100", "10.0.0.1:7180"}, back;
    cdc_error_t e;
    char *js;
    (void)state;
    js = cdc_leader_record_json(&r);
    assert_non_null(js);
    assert_int_equal(cdc_leader_record_parse(js, &back, &e), CDC_OK);
    assert_string_equal(back.id, r.id);
    assert_string_equal(back.endpoint, r.endpoint);
    assert_string_equal(back.admin, r.admin);
    free(js);
    /* a missing field stays empty; a value that is not an object is an error */
    assert_int_equal(cdc_leader_record_parse("{\"endpoint\":\"tcp://h:1\"}", &back, &e), CDC_OK);
    assert_string_equal(back.endpoint, "tcp://h:1");
    assert_string_equal(back.id, "");
    assert_int_equal(cdc_leader_record_parse("tcp://h:1", &back, &e), CDC_ERR_INVALID);
    assert_int_equal(cdc_leader_record_parse(NULL, &back, &e), CDC_ERR_INVALID);
}

/* The presence record: escaped strings read back the same, numbers as numbers. */
static void test_coordinator_record(void **state)
{
    cdc_coordinator_record_t r = {"coord \"b\"\\\n", "10.0.0.2:7180", "standby", 0, 1795992237589},
                             back;
    cdc_error_t e;
    char *js;
    json_t *o;
    (void)state;
    js = cdc_coordinator_record_json(&r);
    assert_non_null(js);
    o = json_loads(js, 0, NULL);
    assert_non_null(o); /* valid JSON whatever the id holds */
    assert_string_equal(json_string_value(json_object_get(o, "id")), r.id);
    assert_string_equal(json_string_value(json_object_get(o, "role")), "standby");
    assert_int_equal(json_integer_value(json_object_get(o, "term")), 0);
    assert_int_equal(json_integer_value(json_object_get(o, "since_ms")), 1795992237589LL);
    json_decref(o);
    assert_int_equal(cdc_coordinator_record_parse(js, &back, &e), CDC_OK);
    assert_memory_equal(&back, &r, sizeof(r));
    free(js);
    r.term = 170;
    snprintf(r.role, sizeof(r.role), "leader");
    js = cdc_coordinator_record_json(&r);
    assert_int_equal(cdc_coordinator_record_parse(js, &back, &e), CDC_OK);
    assert_string_equal(back.role, "leader");
    assert_int_equal(back.term, 170);
    free(js);
    assert_int_equal(cdc_coordinator_record_parse("{\"id\":\"c\"}", &back, &e), CDC_OK);
    assert_string_equal(back.id, "c");
    assert_string_equal(back.role, "");
    assert_int_equal(back.term, 0);
    assert_int_equal(cdc_coordinator_record_parse("[1]", &back, &e), CDC_ERR_INVALID);
    assert_int_equal(cdc_coordinator_record_parse(NULL, &back, &e), CDC_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_leader_record),
        cmocka_unit_test(test_coordinator_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
