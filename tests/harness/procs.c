/*
 * Process launcher of the component tests (see procs.h): builds the command line of a
 * coordinator, worker or capture from the test's job and the harness environment, and
 * spawns it with its log in the test's directory.
 */
#include "tests/harness/procs.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness/harness.h"

#define MAX_ARGS 64

/* A command line under construction; every argument is malloc'ed. */
typedef struct args {
    char *v[MAX_ARGS + 1];
    int n;
    bool failed; /* out of memory or too many arguments */
} args_t;

static void add(args_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(args_t *a, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    if (a->n >= MAX_ARGS) {
        a->failed = true;
        return;
    }
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) {
        s = NULL;
        a->failed = true;
    }
    va_end(ap);
    if (s != NULL)
        a->v[a->n++] = s;
}

/*
 * Appends extra, spawns the command line with its log at <dir>/<program>-<id>.log and
 * frees the arguments (the child has its own copy after the fork).
 */
static pid_t launch(args_t *a, const char *const extra[], const cdc_test_job_t *job,
                    const char *program, const char *id)
{
    char log[4096];
    pid_t pid = -1;

    for (int i = 0; extra != NULL && extra[i] != NULL; i++)
        add(a, "%s", extra[i]);
    a->v[a->n] = NULL;
    cdc_test_log_path(job, program, id, log, sizeof(log));
    if (!a->failed)
        pid = cdc_test_spawn(a->v, log);
    else
        fprintf(stderr, "could not build the command line of %s %s\n", program, id);
    for (int i = 0; i < a->n; i++)
        free(a->v[i]);
    return pid;
}

void cdc_test_log_path(const cdc_test_job_t *job, const char *program, const char *id, char *path,
                       size_t size)
{
    snprintf(path, size, "%s/%s-%s.log", job->dir, program, id);
}

/* What coordinators and workers share: the binary, id, job, etcd, warehouse, a free HTTP port. */
static void add_member(args_t *a, const char *program, const cdc_test_job_t *job, const char *id)
{
    const cdc_test_env_t *env = cdc_test_env();

    add(a, "%s/cdc-%s", env->build_dir, program);
    add(a, "--id=%s", id);
    add(a, "--job=%s", job->name);
    add(a, "--etcd=%s", env->etcd);
    add(a, "--warehouse=%s", job->warehouse);
    add(a, "--http=127.0.0.1:0");
}

pid_t cdc_test_start_coordinator(const cdc_test_job_t *job, const char *id,
                                 const char *const extra[])
{
    args_t a = {.n = 0};

    add_member(&a, "coordinator", job, id);
    add(&a, "--listen=tcp://127.0.0.1:0");
    return launch(&a, extra, job, "coordinator", id);
}

pid_t cdc_test_start_worker(const cdc_test_job_t *job, const char *id, const char *tables,
                            const char *const extra[])
{
    args_t a = {.n = 0};

    add_member(&a, "worker", job, id);
    add(&a, "--kafka=%s", cdc_test_env()->kafka);
    add(&a, "--tables=%s", tables);
    add(&a, "--topic-prefix=%s", job->topic_prefix);
    add(&a, "--state-dir=%s/state-%s", job->dir, id);
    add(&a, "--heartbeat-interval=200ms");
    return launch(&a, extra, job, "worker", id);
}

pid_t cdc_test_start_capture(const cdc_test_job_t *job, const char *slot, const char *tables,
                             const char *const extra[])
{
    const cdc_test_env_t *env = cdc_test_env();
    args_t a = {.n = 0};

    add(&a, "%s/cdc-capture", env->build_dir);
    add(&a, "--pg-dsn=%s", env->pg_dsn);
    add(&a, "--kafka-bootstrap=%s", env->kafka);
    add(&a, "--slot=%s", slot);
    add(&a, "--publication=%s", slot);
    add(&a, "--topic-prefix=%s", job->topic_prefix);
    add(&a, "--tables=%s", tables);
    add(&a, "--create-publication");
    /* the tests of the initial snapshot's consistency read it in the slot's snapshot; the
     * ones of incremental snapshots pass --snapshot-mode=incremental (the last one wins) */
    add(&a, "--snapshot-mode=initial");
    add(&a, "--http-addr="); /* no HTTP server */
    add(&a, "--status-interval=100ms");
    return launch(&a, extra, job, "capture", slot);
}

uint64_t cdc_test_job_number(const cdc_test_job_t *job, cdc_etcd_t *ec, const char *key)
{
    char path[512];
    cdc_etcd_kv_t kv;
    cdc_error_t e;
    uint64_t v = 0;

    snprintf(path, sizeof(path), "/cdc/%s/%s", job->name, key);
    memset(&kv, 0, sizeof(kv));
    if (cdc_etcd_get(ec, path, &kv, NULL, &e) == CDC_OK) {
        v = strtoull(kv.value, NULL, 10);
        cdc_etcd_kv_clear(&kv);
    }
    return v;
}
