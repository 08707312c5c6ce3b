/* Unit tests for capture/txtrack.c: the confirmable flush LSN only covers fully acked transactions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "capture/txtrack.h"

static void test_prefix_rule(void **state)
{
    cdc_txtrack_t t;
    uint64_t a, b, c;
    (void)state;
    cdc_txtrack_init(&t, 100);
    assert_true(cdc_txtrack_confirmable(&t) == 100);
    a = cdc_txtrack_begin(&t);
    cdc_txtrack_add(&t, a);
    cdc_txtrack_add(&t, a);
    cdc_txtrack_commit(&t, a, 200);
    b = cdc_txtrack_begin(&t);
    cdc_txtrack_add(&t, b);
    cdc_txtrack_commit(&t, b, 300);
    c = cdc_txtrack_begin(&t); /* still open */
    cdc_txtrack_add(&t, c);
    /* b fully acked but a is not: nothing moves */
    cdc_txtrack_acked(&t, b, true);
    assert_true(cdc_txtrack_confirmable(&t) == 100);
    cdc_txtrack_acked(&t, a, true);
    assert_true(cdc_txtrack_confirmable(&t) == 100);
    cdc_txtrack_acked(&t, a, true);
    assert_true(cdc_txtrack_confirmable(&t) == 300);
    assert_int_equal(cdc_txtrack_live(&t), 1);
    /* acked but not committed yet: no move */
    cdc_txtrack_acked(&t, c, true);
    assert_true(cdc_txtrack_confirmable(&t) == 300);
    cdc_txtrack_commit(&t, c, 400);
    assert_true(cdc_txtrack_confirmable(&t) == 400);
    assert_true(t.inflight == 0);
    cdc_txtrack_free(&t);
}

static void test_empty_transactions_and_growth(void **state)
{
    cdc_txtrack_t t;
    uint64_t first = 0;
    (void)state;
    cdc_txtrack_init(&t, 0);
    /* 1000 transactions outstanding forces the ring to grow several times */
    for (uint64_t i = 1; i <= 1000; i++) {
        uint64_t id = cdc_txtrack_begin(&t);
        if (i == 1)
            first = id;
        if (i % 2 == 0)
            cdc_txtrack_add(&t, id);
        cdc_txtrack_commit(&t, id, i * 10);
    }
    assert_true(cdc_txtrack_confirmable(&t) == 10); /* tx 2 pending */
    for (uint64_t i = 2; i <= 1000; i += 2)
        cdc_txtrack_acked(&t, first + i - 1, true);
    assert_true(cdc_txtrack_confirmable(&t) == 10000);
    assert_int_equal(cdc_txtrack_live(&t), 0);
    cdc_txtrack_free(&t);
}

static void test_failure_poisons(void **state)
{
    cdc_txtrack_t t;
    uint64_t a, b;
    (void)state;
    cdc_txtrack_init(&t, 50);
    a = cdc_txtrack_begin(&t);
    cdc_txtrack_add(&t, a);
    cdc_txtrack_add(&t, a);
    cdc_txtrack_commit(&t, a, 60);
    b = cdc_txtrack_begin(&t);
    cdc_txtrack_commit(&t, b, 70);
    cdc_txtrack_acked(&t, a, true);
    cdc_txtrack_acked(&t, a, false);
    assert_true(cdc_txtrack_confirmable(&t) == 50);
    /* an ack for an unknown id is a bug and poisons too */
    cdc_txtrack_free(&t);
    cdc_txtrack_init(&t, 5);
    cdc_txtrack_acked(&t, 77, true);
    assert_true(t.failed);
    cdc_txtrack_free(&t);
}

static void test_never_backwards(void **state)
{
    cdc_txtrack_t t;
    uint64_t a;
    (void)state;
    cdc_txtrack_init(&t, 1000);
    a = cdc_txtrack_begin(&t);
    cdc_txtrack_commit(&t, a, 900); /* replayed transaction older than the slot position */
    assert_true(cdc_txtrack_confirmable(&t) == 1000);
    cdc_txtrack_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_rule),
        cmocka_unit_test(test_empty_transactions_and_growth),
        cmocka_unit_test(test_failure_poisons),
        cmocka_unit_test(test_never_backwards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
