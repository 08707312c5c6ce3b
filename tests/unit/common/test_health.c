/*
 * Unit tests for common/health.h: the rule /healthz applies (a main loop that stopped
 * turning for longer than the timeout, a fatal state, the timeout switched off), the
 * reason it gives, and a live cdc_health_t whose loop beats, stops, and is declared
 * fatal and cleared.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/health.h"

static void test_judge_loop(void **state)
{
    char reason[256];
    (void)state;

    /* turned within the timeout, or exactly at it: healthy, no reason */
    reason[0] = '\0';
    assert_true(cdc_health_judge(1000, 1000, 5000, NULL, reason, sizeof(reason)));
    assert_true(cdc_health_judge(1000, 6000, 5000, NULL, reason, sizeof(reason)));
    assert_string_equal(reason, "");
    /* one millisecond past it: unhealthy, saying for how long and which option */
    assert_false(cdc_health_judge(1000, 6001, 5000, NULL, reason, sizeof(reason)));
    assert_non_null(strstr(reason, "main loop has not turned for 5001 ms"));
    assert_non_null(strstr(reason, "--liveness-timeout 5000 ms"));
    /* a timeout of 0 watches no loop, however long it stood still */
    assert_true(cdc_health_judge(0, INT64_C(1) << 40, 0, NULL, reason, sizeof(reason)));
}

static void test_judge_fatal(void **state)
{
    char reason[256];
    (void)state;

    /* fatal wins over a loop that turns, and over an unwatched one */
    assert_false(cdc_health_judge(1000, 1000, 5000, "job FAILED", reason, sizeof(reason)));
    assert_string_equal(reason, "job FAILED");
    assert_false(cdc_health_judge(1000, 1000, 0, "job FAILED", reason, sizeof(reason)));
    /* a reason longer than the buffer is cut, never overrun */
    char small[8];
    assert_false(cdc_health_judge(0, 10, 5, NULL, small, sizeof(small)));
    assert_int_equal(strlen(small), sizeof(small) - 1);
}

static void test_live_health(void **state)
{
    cdc_health_t h;
    char reason[256];
    (void)state;

    unsetenv("CDC_FAULT");
    cdc_health_init(&h, 60000);
    cdc_health_beat(&h);
    assert_true(cdc_health_check(&h, reason, sizeof(reason)));
    /* the loop last turned two minutes ago */
    atomic_store(&h.last_beat_ms, cdc_clock_mono_coarse_ms() - 120000);
    assert_false(cdc_health_check(&h, reason, sizeof(reason)));
    assert_non_null(strstr(reason, "main loop has not turned"));
    cdc_health_beat(&h);
    assert_true(cdc_health_check(&h, reason, sizeof(reason)));
    /* declared fatal (a FAILED leader), then cleared (it became a standby) */
    cdc_health_set_fatal(&h, "job FAILED: the restart strategy gave up");
    assert_false(cdc_health_check(&h, reason, sizeof(reason)));
    assert_string_equal(reason, "job FAILED: the restart strategy gave up");
    cdc_health_set_fatal(&h, NULL);
    assert_true(cdc_health_check(&h, reason, sizeof(reason)));
}

static void test_wedge_fault_parsed(void **state)
{
    cdc_health_t h;
    (void)state;

    /* only "wedge-loop:<file>" arms the hook; another fault or no file leaves it off */
    setenv("CDC_FAULT", "after-checkpoint-record", 1);
    cdc_health_init(&h, 1000);
    assert_null(h.wedge_file);
    setenv("CDC_FAULT", "wedge-loop:", 1);
    cdc_health_init(&h, 1000);
    assert_null(h.wedge_file);
    setenv("CDC_FAULT", "wedge-loop:/nonexistent/wedge", 1);
    cdc_health_init(&h, 1000);
    assert_string_equal(h.wedge_file, "/nonexistent/wedge");
    cdc_health_beat(&h); /* the file does not exist: the beat returns at once */
    unsetenv("CDC_FAULT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_judge_loop),
        cmocka_unit_test(test_judge_fatal),
        cmocka_unit_test(test_live_health),
        cmocka_unit_test(test_wedge_fault_parsed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
