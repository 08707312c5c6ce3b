/*
 * C side of the test harness (see harness.h): environment, waiting with deadlines,
 * child processes and the development broker's control channel.
 */
#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *cdc_test_secret(const char *var)
{
    const char *path = getenv(var);
    char buf[1025], *colon, *nl;
    FILE *f = path != NULL && path[0] != '\0' ? fopen(path, "r") : NULL;
    size_t n;
    if (f == NULL)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if ((nl = strchr(buf, '\n')) != NULL)
        *nl = '\0';
    n = strlen(buf);
    while (n > 0 && buf[n - 1] == '\r')
        buf[--n] = '\0';
    colon = strchr(buf, ':');
    return n > 0 ? strdup(colon ? colon + 1 : buf) : NULL;
}

const char *cdc_test_require(const char *var)
{
    const char *v = getenv(var);
    if (v == NULL || v[0] == '\0') {
        fprintf(stderr,
                "FATAL: test needs %s (run it through tests/run.sh integration, or source "
                "the output of tests/harness/harness.sh env <dir>)\n",
                var);
        exit(1);
    }
    return v;
}

const cdc_test_env_t *cdc_test_env(void)
{
    static cdc_test_env_t env;
    static bool loaded;

    if (!loaded) {
        env.pg_dsn = cdc_test_require("CDC_TEST_PG_DSN");
        env.pg_port = atoi(cdc_test_require("CDC_TEST_PG_PORT"));
        env.etcd = cdc_test_require("CDC_TEST_ETCD");
        env.kafka = cdc_test_require("CDC_TEST_KAFKA");
        env.kafka_ctl = cdc_test_require("CDC_TEST_KAFKA_CTL");
        env.tmp = cdc_test_require("CDC_TEST_TMP");
        env.build_dir = cdc_test_require("CDC_BUILD_DIR");
        env.harness = cdc_test_require("CDC_TEST_HARNESS");
        loaded = true;
    }
    return &env;
}

long long cdc_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool cdc_test_wait_for(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
    long long deadline = cdc_test_now_ms() + timeout_ms;
    for (;;) {
        if (cond(arg))
            return true;
        if (cdc_test_now_ms() >= deadline)
            return false;
        usleep(5000);
    }
}

pid_t cdc_test_spawn(char *const argv[], const char *log_path)
{
    pid_t parent = getpid();
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    /* child */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127); /* the parent died before prctl */
    if (log_path) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
    }
    execv(argv[0], argv);
    fprintf(stderr, "could not run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

bool cdc_test_wait_exit(pid_t pid, int timeout_ms, int *status)
{
    long long deadline = cdc_test_now_ms() + timeout_ms;
    int st;

    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (status)
                *status = st;
            return true;
        }
        if (r < 0 || cdc_test_now_ms() >= deadline)
            return false;
        usleep(5000);
    }
}

int cdc_test_kill(pid_t pid, int sig, int timeout_ms)
{
    int st = -1;

    if (pid <= 0)
        return -1;
    if (kill(-pid, sig) != 0)
        kill(pid, sig);
    if (!cdc_test_wait_exit(pid, timeout_ms, &st)) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    kill(-pid, SIGKILL); /* whatever else was left in the group */
    return st;
}

void cdc_test_kill_all(pid_t *pids, int n, int sig, int timeout_ms)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) {
            cdc_test_kill(pids[i], sig, timeout_ms);
            pids[i] = 0;
        }
}

const char *cdc_test_self(void)
{
    static char path[4096];
    if (path[0] == '\0') {
        ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
        if (n <= 0) {
            fprintf(stderr, "FATAL: cannot read /proc/self/exe\n");
            exit(1);
        }
        path[n] = '\0';
    }
    return path;
}

bool cdc_test_kafka_ctl(const char *cmd, char *reply, size_t size)
{
    const char *ctl = cdc_test_require("CDC_TEST_KAFKA_CTL");
    const char *colon = strrchr(ctl, ':');
    char host[64], buf[4096];
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct timeval tv = {.tv_sec = 30};
    size_t got = 0;
    int fd;

    if (reply && size)
        reply[0] = '\0';
    if (colon == NULL || (size_t)(colon - ctl) >= sizeof(host))
        return false;
    memcpy(host, ctl, (size_t)(colon - ctl));
    host[colon - ctl] = '\0';
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return false;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return false;
    }
    snprintf(buf, sizeof(buf), "%s\n", cmd);
    if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf)) {
        close(fd);
        return false;
    }
    while (got < sizeof(buf) - 1) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (memchr(buf, '\n', got))
            break;
    }
    close(fd);
    buf[got] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (reply && size)
        snprintf(reply, size, "%s", buf);
    return strncmp(buf, "OK", 2) == 0;
}

bool cdc_test_harness(const char *action)
{
    const char *script = cdc_test_require("CDC_TEST_HARNESS");
    char *argv[] = {"/bin/bash", (char *)script, (char *)action, NULL};
    pid_t pid = cdc_test_spawn(argv, NULL);
    int st;

    if (pid < 0 || !cdc_test_wait_exit(pid, 120000, &st))
        return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

char *cdc_test_mkdtemp(const char *name)
{
    const char *tmp = cdc_test_require("CDC_TEST_TMP");
    size_t n = strlen(tmp) + strlen(name) + 16;
    char *path = malloc(n);

    if (path == NULL)
        return NULL;
    snprintf(path, n, "%s/%s-XXXXXX", tmp, name);
    if (mkdtemp(path) == NULL) {
        free(path);
        return NULL;
    }
    return path;
}

pid_t cdc_test_server_pid(const char *service)
{
    const char *tmp = cdc_test_require("CDC_TEST_TMP");
    char path[4096];
    FILE *f;
    int pid = -1;

    snprintf(path, sizeof(path), "%s/%s.pid", tmp, service);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%d", &pid) != 1)
        pid = -1;
    fclose(f);
    return pid > 0 ? (pid_t)pid : -1;
}
