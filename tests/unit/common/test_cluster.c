/* Unit tests for common/cluster.c: the job's etcd keys and the leader record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_leader_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
