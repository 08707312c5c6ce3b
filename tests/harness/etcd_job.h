/*
 * A C test's own job in the harness's etcd, for the component tests of the modules that
 * keep a job's keys (tests/integration/coordinator/test_store.c, test_leader.c): a client of
 * CDC_TEST_ETCD, job names no other test uses (so every key under /cdc/<job>/ is the
 * test's own; docs/protocol.md, "etcd keys"), dropping those keys afterwards, and
 * CDC_TEST_OK, a cmocka assertion that a call returned CDC_OK.
 */
#ifndef CDC_TEST_ETCD_JOB_H
#define CDC_TEST_ETCD_JOB_H

/* cmocka.h needs these first */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/etcd.h"

/*
 * A client of the harness's etcd whose requests time out after timeout_ms. Exits like
 * cdc_test_require() when CDC_TEST_ETCD is missing. Close with cdc_etcd_close().
 */
cdc_etcd_t *cdc_test_etcd_open(int timeout_ms);

/* A job name no other test of any process uses: "<suite>-<pid>-<ms>-<n>". */
void cdc_test_job_name(char *buf, size_t size, const char *suite);

/* Deletes every key of the job (/cdc/<job>/...), best effort. */
void cdc_test_job_drop(const char *job);

static inline void cdc_test_ok_at(cdc_err_t rc, const char *call, const cdc_error_t *e,
                                  const char *file, int line)
{
    if (rc != CDC_OK) {
        print_error("%s: %s (%s)\n", call, e->msg, cdc_err_name(rc));
        _fail(file, line);
    }
}

/* Fails the test unless expr (a call filling the cdc_error_t e) returned CDC_OK. */
#define CDC_TEST_OK(expr, e) cdc_test_ok_at((expr), #expr, &(e), __FILE__, __LINE__)

#endif
