/* A test's own job in the harness's etcd (see etcd_job.h). */
#include "tests/harness/etcd_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/cluster.h"
#include "tests/harness/harness.h"

cdc_etcd_t *cdc_test_etcd_open(int timeout_ms)
{
    const char *endpoints = cdc_test_require("CDC_TEST_ETCD");
    cdc_etcd_t *c = NULL;
    cdc_error_t e;

    if (cdc_etcd_open(&c, endpoints, timeout_ms, &e) != CDC_OK) {
        fprintf(stderr, "FATAL: etcd client for %s: %s\n", endpoints, e.msg);
        exit(1);
    }
    return c;
}

void cdc_test_job_name(char *buf, size_t size, const char *suite)
{
    static unsigned n;

    snprintf(buf, size, "%s-%d-%lld-%u", suite, (int)getpid(), cdc_test_now_ms(), ++n);
}

void cdc_test_job_drop(const char *job)
{
    char prefix[512];
    cdc_etcd_t *c = cdc_test_etcd_open(2000);
    cdc_error_t e;

    cdc_cluster_key(prefix, sizeof(prefix), job, "");
    cdc_etcd_delete(c, prefix, true, NULL, &e);
    cdc_etcd_close(c);
}
