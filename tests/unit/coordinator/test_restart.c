/* Unit tests for coordinator/restart.c: the failure-rate restart strategy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "coordinator/restart.h"

static void test_within_rate(void **state)
{
    cdc_restart_t r;
    int64_t at = 0;
    (void)state;
    cdc_restart_init(&r, 3, 60000, 500);
    assert_true(cdc_restart_on_failure(&r, 1000, &at));
    assert_int_equal(at, 1500);
    assert_true(cdc_restart_on_failure(&r, 2000, &at));
    assert_true(cdc_restart_on_failure(&r, 3000, &at));
    assert_int_equal(cdc_restart_recent(&r, 3000), 3);
    /* the fourth within a minute fails the job */
    assert_false(cdc_restart_on_failure(&r, 4000, &at));
    assert_true(r.failed);
    /* stays failed even after the window passed */
    assert_false(cdc_restart_on_failure(&r, 500000, &at));
    cdc_restart_reset(&r);
    assert_false(r.failed);
    assert_true(cdc_restart_on_failure(&r, 600000, &at));
}

static void test_window_slides(void **state)
{
    cdc_restart_t r;
    int64_t at;
    (void)state;
    cdc_restart_init(&r, 2, 10000, 0);
    for (int i = 0; i < 100; i++)
        assert_true(cdc_restart_on_failure(&r, (int64_t)i * 6000, &at));
    assert_int_equal(r.total, 100);
    assert_int_equal(cdc_restart_recent(&r, 99 * 6000 + 20000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_within_rate),
        cmocka_unit_test(test_window_slides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
