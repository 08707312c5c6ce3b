/* coordinator/unconsumed.h: a topic offered outside the set keeps its first-seen time across
 * looks, is late after the threshold, counts its offering workers, and is forgotten once no
 * worker offers it outside the set; thousands of topics at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/unconsumed.h"

static const cdc_unconsumed_topic_t *find(const cdc_unconsumed_t *u, const char *topic, size_t *at)
{
    for (size_t i = 0; i < u->n; i++)
        if (strcmp(u->t[i].topic, topic) == 0) {
            *at = i;
            return &u->t[i];
        }
    return NULL;
}

static void test_since_and_late(void **state)
{
    cdc_unconsumed_t u = {0};
    const char *look1[] = {"cdc.public.a", "cdc.public.b", "cdc.public.a"};
    const char *look2[] = {"cdc.public.a", "cdc.public.c"};
    const char *look3[] = {"cdc.public.c"};
    const cdc_unconsumed_topic_t *t;
    size_t i;
    (void)state;

    assert_int_equal(cdc_unconsumed_look(&u, look1, 3, 1000), CDC_OK);
    assert_int_equal(u.n, 2);
    assert_non_null(t = find(&u, "cdc.public.a", &i));
    assert_int_equal(t->offered, 2);
    assert_int_equal(t->since_ms, 1000);
    assert_false(cdc_unconsumed_late(&u, i, 60999, 60000));
    assert_true(cdc_unconsumed_late(&u, i, 61000, 60000));
    u.t[i].reported = true;

    /* a stays (its time and report kept), b left the offers (joined the set), c is new */
    assert_int_equal(cdc_unconsumed_look(&u, look2, 2, 30000), CDC_OK);
    assert_int_equal(u.n, 2);
    assert_non_null(t = find(&u, "cdc.public.a", &i));
    assert_int_equal(t->since_ms, 1000);
    assert_int_equal(t->offered, 1);
    assert_true(t->reported);
    assert_null(find(&u, "cdc.public.b", &i));
    assert_non_null(t = find(&u, "cdc.public.c", &i));
    assert_int_equal(t->since_ms, 30000);
    assert_false(t->reported);

    /* a comes back after it was gone: a new first-seen time, reported again when late */
    assert_int_equal(cdc_unconsumed_look(&u, look3, 1, 40000), CDC_OK);
    assert_int_equal(cdc_unconsumed_look(&u, look2, 2, 50000), CDC_OK);
    assert_non_null(t = find(&u, "cdc.public.a", &i));
    assert_int_equal(t->since_ms, 50000);
    assert_false(t->reported);

    assert_int_equal(cdc_unconsumed_look(&u, NULL, 0, 60000), CDC_OK);
    assert_int_equal(u.n, 0);
    cdc_unconsumed_free(&u);
}

/* 5,000 topics offered by three workers each: one entry each, no cap. */
static void test_thousands(void **state)
{
    enum { N = 5000, W = 3 };
    cdc_unconsumed_t u = {0};
    char(*names)[40] = calloc(N, sizeof(*names));
    const char **offers = calloc(N * W, sizeof(*offers));
    (void)state;
    assert_non_null(names);
    assert_non_null(offers);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "cdc.public.t%05d", i);
        for (int w = 0; w < W; w++)
            offers[w * N + i] = names[i];
    }
    assert_int_equal(cdc_unconsumed_look(&u, offers, N * W, 1), CDC_OK);
    assert_int_equal(u.n, N);
    for (size_t i = 0; i < u.n; i++)
        assert_int_equal(u.t[i].offered, W);
    assert_int_equal(cdc_unconsumed_look(&u, offers, N, 2), CDC_OK);
    assert_int_equal(u.n, N);
    assert_int_equal(u.t[N - 1].since_ms, 1);
    cdc_unconsumed_free(&u);
    free(offers);
    free(names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_since_and_late),
        cmocka_unit_test(test_thousands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
