/* Unit tests for coordinator/assign.c: balance, stickiness and determinism for 1..12 workers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/assign.h"

static char names[CDC_PARTITIONS + 2][16];
static const char *ids[CDC_PARTITIONS + 2];

static void make_ids(int from, int n)
{
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "w%02d", from + i);
        ids[i] = names[i];
    }
}

static void check_balanced(const int owner[CDC_PARTITIONS], int n)
{
    int load[CDC_PARTITIONS] = {0};
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        assert_true(owner[p] >= 0 && owner[p] < n);
        load[owner[p]]++;
    }
    for (int k = 0; k < n; k++) {
        assert_true(load[k] >= CDC_PARTITIONS / n);
        assert_true(load[k] <= (CDC_PARTITIONS + n - 1) / n);
    }
}

static void test_balanced_1_to_12(void **state)
{
    int owner[CDC_PARTITIONS];
    (void)state;
    for (int n = 1; n <= CDC_PARTITIONS; n++) {
        make_ids(0, n);
        assert_int_equal(cdc_assign_compute(ids, (size_t)n, NULL, owner), CDC_OK);
        check_balanced(owner, n);
    }
}

static void test_invalid(void **state)
{
    int owner[CDC_PARTITIONS];
    const char *dup[2] = {"a", "a"};
    (void)state;
    make_ids(0, 13);
    assert_int_equal(cdc_assign_compute(ids, 0, NULL, owner), CDC_ERR_INVALID);
    assert_int_equal(cdc_assign_compute(ids, 13, NULL, owner), CDC_ERR_INVALID);
    assert_int_equal(cdc_assign_compute(dup, 2, NULL, owner), CDC_ERR_INVALID);
}

/* previous owner ids for slots from an owner index array */
static void to_names(const int owner[CDC_PARTITIONS], const char *prev[CDC_PARTITIONS])
{
    for (int p = 0; p < CDC_PARTITIONS; p++)
        prev[p] = ids[owner[p]];
}

static void test_sticky_same_workers(void **state)
{
    int a[CDC_PARTITIONS], b[CDC_PARTITIONS];
    const char *prev[CDC_PARTITIONS];
    (void)state;
    for (int n = 1; n <= CDC_PARTITIONS; n++) {
        make_ids(0, n);
        assert_int_equal(cdc_assign_compute(ids, (size_t)n, NULL, a), CDC_OK);
        to_names(a, prev);
        assert_int_equal(cdc_assign_compute(ids, (size_t)n, prev, b), CDC_OK);
        assert_memory_equal(a, b, sizeof(a));
    }
}

static void test_leave_moves_only_lost_slots(void **state)
{
    int a[CDC_PARTITIONS], b[CDC_PARTITIONS];
    const char *prev[CDC_PARTITIONS], *after[CDC_PARTITIONS];
    (void)state;
    /* 3 workers -> w01 leaves: only w01's 4 slots move */
    make_ids(0, 3);
    assert_int_equal(cdc_assign_compute(ids, 3, NULL, a), CDC_OK);
    to_names(a, prev);
    const char *survivors[2] = {"w00", "w02"};
    assert_int_equal(cdc_assign_compute(survivors, 2, prev, b), CDC_OK);
    for (int p = 0; p < CDC_PARTITIONS; p++)
        after[p] = survivors[b[p]];
    assert_int_equal(cdc_assign_moves(prev, after), 4);
    for (int p = 0; p < CDC_PARTITIONS; p++)
        if (strcmp(prev[p], "w01") != 0)
            assert_string_equal(prev[p], after[p]);
}

static void test_rejoin_gets_slots_back(void **state)
{
    int a[CDC_PARTITIONS], b[CDC_PARTITIONS];
    const char *prev[CDC_PARTITIONS];
    (void)state;
    /* the caller keeps a restarting worker's slots in "previous" during the grace period */
    make_ids(0, 4);
    assert_int_equal(cdc_assign_compute(ids, 4, NULL, a), CDC_OK);
    to_names(a, prev);
    /* worker order given differently must not matter */
    const char *shuffled[4] = {ids[2], ids[0], ids[3], ids[1]};
    assert_int_equal(cdc_assign_compute(shuffled, 4, prev, b), CDC_OK);
    for (int p = 0; p < CDC_PARTITIONS; p++)
        assert_string_equal(shuffled[b[p]], prev[p]);
}

static void test_join_moves_minimum(void **state)
{
    int a[CDC_PARTITIONS], b[CDC_PARTITIONS];
    const char *prev[CDC_PARTITIONS], *after[CDC_PARTITIONS];
    (void)state;
    for (int n = 1; n < CDC_PARTITIONS; n++) {
        make_ids(0, n + 1);
        assert_int_equal(cdc_assign_compute(ids, (size_t)n, NULL, a), CDC_OK);
        to_names(a, prev);
        assert_int_equal(cdc_assign_compute(ids, (size_t)n + 1, prev, b), CDC_OK);
        check_balanced(b, n + 1);
        for (int p = 0; p < CDC_PARTITIONS; p++)
            after[p] = ids[b[p]];
        /* the newcomer gets floor(12/(n+1)) or one more; nothing else moves */
        assert_true(cdc_assign_moves(prev, after) <= (CDC_PARTITIONS + n) / (n + 1));
    }
}

static void test_unknown_previous_ignored(void **state)
{
    int a[CDC_PARTITIONS];
    const char *prev[CDC_PARTITIONS];
    (void)state;
    make_ids(0, 2);
    for (int p = 0; p < CDC_PARTITIONS; p++)
        prev[p] = (p % 3 == 0) ? "gone" : (p % 3 == 1 ? "" : NULL);
    assert_int_equal(cdc_assign_compute(ids, 2, prev, a), CDC_OK);
    check_balanced(a, 2);
    assert_int_equal(cdc_pset_count(CDC_PSET_ALL), 12);
    assert_int_equal(cdc_pset_count(0x0101), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balanced_1_to_12),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_sticky_same_workers),
        cmocka_unit_test(test_leave_moves_only_lost_slots),
        cmocka_unit_test(test_rejoin_gets_slots_back),
        cmocka_unit_test(test_join_moves_minimum),
        cmocka_unit_test(test_unknown_previous_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
