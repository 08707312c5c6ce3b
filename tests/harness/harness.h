/*
 * Helpers for component tests written in C (tests/integration/<module>/test_*.c). The servers
 * themselves are started by tests/harness/harness.sh (tests/run.sh integration does it);
 * this library reads their addresses from the CDC_TEST_* environment, waits on
 * conditions with a deadline, spawns and kills child processes (each in its own process
 * group, killed with the test if the test dies), talks to the development Kafka broker's
 * control channel, and restarts etcd or PostgreSQL through the harness script.
 *
 * A test that needs a server that is not there fails loudly (exit status 1 with a message
 * naming the variable); it never skips.
 */
#ifndef CDC_TEST_HARNESS_H
#define CDC_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct cdc_test_env {
    const char *pg_dsn;    /* CDC_TEST_PG_DSN: libpq conninfo of a superuser */
    int pg_port;           /* CDC_TEST_PG_PORT */
    const char *etcd;      /* CDC_TEST_ETCD: http://127.0.0.1:port */
    const char *kafka;     /* CDC_TEST_KAFKA: bootstrap servers */
    const char *kafka_ctl; /* CDC_TEST_KAFKA_CTL: host:port */
    const char *tmp;       /* CDC_TEST_TMP: scratch directory */
    const char *build_dir; /* CDC_BUILD_DIR: absolute build directory */
    const char *harness;   /* CDC_TEST_HARNESS: path of harness.sh */
} cdc_test_env_t;

/*
 * Value of an environment variable the test needs; when it is missing or empty prints
 * "test needs <var> (run through tests/run.sh integration)" and exits with status 1.
 */
const char *cdc_test_require(const char *var);

/*
 * The content of the file an environment variable names, its trailing new lines dropped
 * (at most 1 KiB; a "name:token" line gives the token): the harness's
 * CDC_WORKER_SECRET_FILE and CDC_HTTP_TOKEN_FILE (tools/auth-files.sh), which every process
 * a test starts reads, as authentication is on by default. NULL when unset or unreadable.
 * The string is the caller's (free()).
 */
char *cdc_test_secret(const char *var);

/* All harness variables; exits like cdc_test_require() when any is missing. */
const cdc_test_env_t *cdc_test_env(void);

/* Milliseconds of a monotonic clock. */
long long cdc_test_now_ms(void);

/*
 * Polls cond(arg) every few milliseconds until it returns true (returns true) or
 * timeout_ms passes (returns false). Use it instead of sleeping.
 */
bool cdc_test_wait_for(bool (*cond)(void *arg), void *arg, int timeout_ms);

/*
 * Starts argv[0] (a path) with argv in a new process group, stdout and stderr appended
 * to log_path (NULL = inherit). The child gets SIGKILL when the test process dies.
 * Returns the pid, or -1 (errno set).
 */
pid_t cdc_test_spawn(char *const argv[], const char *log_path);

/*
 * Waits up to timeout_ms for pid to exit. Returns true and stores the wait status in
 * *status (may be NULL) when it exited.
 */
bool cdc_test_wait_exit(pid_t pid, int timeout_ms, int *status);

/*
 * Sends sig to pid's process group, waits up to timeout_ms, then SIGKILLs the group and
 * reaps pid. Returns the wait status.
 */
int cdc_test_kill(pid_t pid, int sig, int timeout_ms);

/*
 * cdc_test_kill(pid, sig, timeout_ms) of every pid > 0 in pids[0..n), in order; each
 * slot is set to 0 (a test's array of coordinators or workers, on teardown).
 */
void cdc_test_kill_all(pid_t *pids, int n, int sig, int timeout_ms);

/* Path of the running test binary (to spawn itself in another mode). */
const char *cdc_test_self(void);

/*
 * Sends one command line to the development broker's control channel and stores the
 * reply line (without newline) in reply. Returns true when the reply starts with "OK".
 */
bool cdc_test_kafka_ctl(const char *cmd, char *reply, size_t size);

/*
 * Runs "$CDC_TEST_HARNESS <action>" (etcd-stop, etcd-start, pg-stop, pg-start) and
 * returns true when it succeeded. etcd-start/pg-start wait until the server is ready.
 */
bool cdc_test_harness(const char *action);

/*
 * Current pid (= process group) of a harness server: "pg", "etcd" or "kafka", read from
 * $CDC_TEST_TMP/<service>.pid, so it is right after a restart by cdc_test_harness()
 * (CDC_TEST_ETCD_PID in the environment is the pid at start). Returns -1 when unknown.
 */
pid_t cdc_test_server_pid(const char *service);

/* Creates a fresh directory $CDC_TEST_TMP/<name>-XXXXXX; returns a malloc'ed path. */
char *cdc_test_mkdtemp(const char *name);

/* ---- counting what a test left on disk (tests/harness/files.c; unit tests use it too) -- */

/*
 * Regular files in dir (and its subdirectories when recursive) whose names end with
 * suffix (NULL = any name); *bytes, when not NULL, gets their total size. Returns -1
 * when dir cannot be read.
 */
long cdc_test_count_files(const char *dir, const char *suffix, bool recursive, size_t *bytes);

/* Directories below dir, at any depth (dir itself not counted); -1 when unreadable. */
long cdc_test_count_dirs(const char *dir);

/* ---- loopback sockets (tests/harness/listen.c; unit tests use it too) ---------------- */

/*
 * A TCP socket listening on 127.0.0.1 at a free port (*port gets it). Nothing accepts
 * on it: a client connects (the backlog holds it) and then waits for an answer that
 * never comes, until its own timeout; or the test accepts and answers itself. Returns
 * the fd (the test closes it); a failure fails the test.
 */
int cdc_test_listen_loopback(int *port);

#endif
