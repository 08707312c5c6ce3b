/* Unit tests for common/diskfull.c: a disk that filled up, reported and cleared
 * (docs/operations.md, "Disk faults"). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/diskfull.h"

static bool has_line(cdc_metrics_t *r, const char *line)
{
    char *text = cdc_metrics_render(r, NULL);
    bool found = text != NULL && strstr(text, line) != NULL;
    free(text);
    return found;
}

static void test_full_then_space(void **state)
{
    (void)state;
    cdc_metrics_t *r = cdc_metrics_new();
    cdc_diskfull_t d, *ds[] = {&d};
    cdc_error_t e;
    cdc_diskfull_init(&d, r, "cdc_test", "state", "nothing is acked");
    assert_true(has_line(r, "cdc_test_disk_full{disk=\"state\"} 0\n"));

    /* another failure is no full disk */
    cdc_error_set(&e, CDC_ERR_IO, "could not write: %s", strerror(EIO));
    assert_false(cdc_diskfull_failed(&d, &e));
    assert_true(has_line(r, "cdc_test_disk_full{disk=\"state\"} 0\n"));

    cdc_error_set(&e, CDC_ERR_STATE, "could not write \"/s/p1\": %s", strerror(ENOSPC));
    assert_true(cdc_diskfull_failed(&d, &e));
    assert_true(cdc_diskfull_failed(&d, &e));
    assert_true(has_line(r, "cdc_test_disk_full{disk=\"state\"} 1\n"));
    assert_true(has_line(r, "cdc_test_disk_full_errors_total{disk=\"state\"} 2\n"));
    char *js = cdc_diskfull_status_json(ds, 1);
    assert_non_null(js);
    assert_non_null(strstr(js, "\"state\":{\"full\":true"));
    assert_non_null(strstr(js, "\"full_errors\":2"));
    assert_non_null(strstr(js, "/s/p1"));
    free(js);

    cdc_diskfull_ok(&d);
    assert_true(has_line(r, "cdc_test_disk_full{disk=\"state\"} 0\n"));
    js = cdc_diskfull_status_json(ds, 1);
    assert_non_null(strstr(js, "\"full\":false"));
    assert_non_null(strstr(js, "\"full_since_ms\":0"));
    free(js);
    cdc_diskfull_destroy(&d);
    cdc_metrics_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_then_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
