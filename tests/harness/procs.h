/*
 * Launching the pipeline's own processes (cdc-coordinator, cdc-worker, cdc-capture) from
 * component tests. The options every test passes the same way are filled in here: the
 * binary in $CDC_BUILD_DIR, the harness's etcd, Kafka and PostgreSQL, the job, warehouse
 * and topic prefix of the test, free ports for the listeners, and a log file in the
 * test's directory; each test adds the options it is about (timings, faults, tables).
 * Processes are started with cdc_test_spawn() (harness.h): stop them with cdc_test_kill().
 */
#ifndef CDC_TEST_PROCS_H
#define CDC_TEST_PROCS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/etcd.h"

/*
 * What the processes of one test share. The strings are borrowed: they must outlive the
 * processes' start (the launcher copies what it passes on). A field a launcher needs must
 * not be NULL (name and warehouse: coordinator and worker; topic_prefix: worker and
 * capture).
 */
typedef struct cdc_test_job {
    const char *dir;          /* logs <dir>/<program>-<id>.log, worker state <dir>/state-<id> */
    const char *name;         /* --job */
    const char *warehouse;    /* --warehouse */
    const char *topic_prefix; /* --topic-prefix */
} cdc_test_job_t;

/*
 * Path of the log of the process `id` of `program` ("coordinator", "worker", "capture"):
 * <dir>/<program>-<id>.log, written into path (truncated to size).
 */
void cdc_test_log_path(const cdc_test_job_t *job, const char *program, const char *id, char *path,
                       size_t size);

/*
 * Starts cdc-coordinator --id=<id> --job --etcd --warehouse --http=127.0.0.1:0
 * --listen=tcp://127.0.0.1:0, then the options in extra (NULL-terminated, may be NULL; a
 * later option wins over an earlier one). Returns the pid, or -1.
 */
pid_t cdc_test_start_coordinator(const cdc_test_job_t *job, const char *id,
                                 const char *const extra[]);

/*
 * Starts cdc-worker --id=<id> --job --etcd --warehouse --http=127.0.0.1:0 --kafka
 * --tables=<tables> --topic-prefix --state-dir=<dir>/state-<id> --heartbeat-interval=200ms
 * (the tests' coordinators declare a worker lost after 1.5 to 2 s), then extra. Returns
 * the pid, or -1.
 */
pid_t cdc_test_start_worker(const cdc_test_job_t *job, const char *id, const char *tables,
                            const char *const extra[]);

/*
 * Starts cdc-capture --pg-dsn --kafka-bootstrap --slot=<slot> --publication=<slot>
 * --topic-prefix --tables=<tables> --create-publication --http-addr= (no HTTP server)
 * --status-interval=100ms, then extra; its log is cdc_test_log_path(job, "capture", slot).
 * Returns the pid, or -1.
 */
pid_t cdc_test_start_capture(const cdc_test_job_t *job, const char *slot, const char *tables,
                             const char *const extra[]);

/*
 * The job's number /cdc/<job name>/<key> in etcd ("latest", "committed"), read through
 * ec (owned by the caller); 0 when it is not there or etcd does not answer.
 */
uint64_t cdc_test_job_number(const cdc_test_job_t *job, cdc_etcd_t *ec, const char *key);

#endif
