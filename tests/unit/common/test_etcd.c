/* Unit tests for the pure helpers of common/etcd.c (prefix range ends) and for
 * the client's behaviour without any server: bad endpoints and fast retriable failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <unistd.h>

#include "common/etcd.h"
#include "tests/harness/harness.h"

static void test_prefix_end(void **state)
{
    (void)state;
    size_t n;
    char *end = cdc_etcd_prefix_end("/cdc/job/", &n);
    assert_int_equal(n, 9);
    assert_memory_equal(end, "/cdc/job0", 9);
    free(end);
    end = cdc_etcd_prefix_end("a\xff", &n);
    assert_int_equal(n, 1);
    assert_memory_equal(end, "b", 1);
    free(end);
    end = cdc_etcd_prefix_end("", &n);
    assert_int_equal(n, 1);
    assert_int_equal(end[0], '\0');
    free(end);
}

static void test_bad_endpoints(void **state)
{
    (void)state;
    cdc_etcd_t *c = NULL;
    cdc_error_t e;
    assert_int_equal(cdc_etcd_open(&c, "", 100, &e), CDC_ERR_CONFIG);
    assert_int_equal(cdc_etcd_open(&c, "127.0.0.1:2379", 100, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "http://"));
    assert_null(c);
}

static void test_unreachable_is_retriable_and_quick(void **state)
{
    (void)state;
    cdc_etcd_t *c = NULL;
    cdc_error_t e;
    cdc_etcd_kv_t kv;
    struct timespec a, b;
    /* port 1 on loopback: connection refused at once on both "members" */
    assert_int_equal(cdc_etcd_open(&c, "http://127.0.0.1:1, http://127.0.0.1:1/", 500, &e), CDC_OK);
    clock_gettime(CLOCK_MONOTONIC, &a);
    cdc_err_t err = cdc_etcd_get(c, "/k", &kv, NULL, &e);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_int_equal(err, CDC_ERR_UNAVAILABLE);
    assert_true(e.retriable);
    assert_non_null(strstr(e.msg, "127.0.0.1:1"));
    assert_true((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 2000);
    int64_t lease;
    assert_int_equal(cdc_etcd_lease_grant(c, 5, &lease, &e), CDC_ERR_UNAVAILABLE);
    cdc_etcd_events_t ev;
    assert_int_equal(cdc_etcd_watch_wait(c, "/k", false, 0, 200, &ev, &e), CDC_ERR_UNAVAILABLE);
    assert_true(e.retriable);
    cdc_etcd_close(c);
}

static void test_hanging_member_times_out(void **state)
{
    (void)state;
    int port;
    int fd = cdc_test_listen_loopback(&port); /* never answers */
    char eps[128];
    cdc_etcd_t *c = NULL;
    cdc_error_t e;
    int64_t rev;
    struct timespec a, b;

    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d", port);
    assert_int_equal(cdc_etcd_open(&c, eps, 300, &e), CDC_OK);
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(cdc_etcd_put(c, "/k", "v", 1, 0, &rev, &e), CDC_ERR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_true(e.retriable);
    long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    assert_true(ms >= 250 && ms < 2000);
    /* a watch on a hanging member is a timeout error, not an empty answer */
    cdc_etcd_events_t ev;
    assert_int_equal(cdc_etcd_watch_wait(c, "/k", false, 0, 300, &ev, &e), CDC_ERR_TIMEOUT);
    assert_true(e.retriable);
    cdc_etcd_close(c);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_end),
        cmocka_unit_test(test_bad_endpoints),
        cmocka_unit_test(test_unreachable_is_retriable_and_quick),
        cmocka_unit_test(test_hanging_member_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
