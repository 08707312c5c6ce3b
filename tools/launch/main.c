/*
 * launch: runs a command so that nothing it starts outlives it (docs/development.md,
 * "Nothing outlives its launcher"). `make run`, `make test`, the benchmarks and the chaos
 * suite run their scripts through it:
 *
 *   build/launch [--grace <seconds>] [--] <command> [<arg>...]
 *
 * - It is a child subreaper (PR_SET_CHILD_SUBREAPER): every process the command starts,
 *   however deep, in whatever session or process group (the harness starts its servers
 *   with setsid), is reparented to it when its own parent dies. So when the command ends
 *   (normally, by a signal, or killed with SIGKILL) the processes left over are exactly this
 *   process's children: it sends each SIGTERM (its process group too when it leads one),
 *   waits up to --grace seconds (default 15) for them, then sends SIGKILL, until none is
 *   left. It exits with the command's status (128 + signal when a signal ended it).
 * - It dies with its own parent (PR_SET_PDEATHSIG): when `make` is killed, even with
 *   SIGKILL, this process gets SIGTERM.
 * - SIGINT, SIGTERM and SIGHUP (terminal closed) are forwarded to the command, which stops
 *   what it started in its own way (tools/run.sh's trap); what it leaves is cleaned up as
 *   above. SIGPIPE is ignored here and restored for the command.
 * - The command runs with LAUNCH_PID=<this pid> in its environment: tools/run.sh,
 *   tests/run.sh, benchmarks/run.sh and chaos/run.sh run themselves through launch unless
 *   it is set.
 * - The command gets PR_SET_PDEATHSIG(SIGTERM) too: if this process is killed with
 *   SIGKILL, the command still learns it, and the harness's watchdog stops the servers.
 *
 * Threads: one. The signal handlers only record the signal; the main loop forwards it.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t pending_signal;

static void on_signal(int sig)
{
    pending_signal = sig;
}

static void usage(void)
{
    fprintf(stderr, "usage: launch [--grace <seconds>] [--] <command> [<arg>...]\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sends sig to every process whose parent is this one (and to its group when it leads
 * one); returns how many there were. */
static int signal_children(int sig)
{
    pid_t self = getpid();
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char path[64], buf[512];
        FILE *f;
        char *p;
        long pid = strtol(e->d_name, &p, 10);
        long ppid = 0, pgrp = 0;

        if (*p != '\0' || pid <= 0 || pid == self)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        p = fgets(buf, sizeof(buf), f);
        fclose(f);
        /* "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses */
        if (p == NULL || (p = strrchr(buf, ')')) == NULL ||
            sscanf(p + 1, " %*c %ld %ld", &ppid, &pgrp) != 2 || ppid != self)
            continue;
        n++;
        if (pgrp == pid)
            kill(-(pid_t)pid, sig);
        kill((pid_t)pid, sig);
    }
    closedir(d);
    return n;
}

/* Reaps every exited child without blocking; records the command's status. */
static void reap(pid_t cmd, int *cmd_status, bool *cmd_done)
{
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        if (p == cmd) {
            *cmd_status = st;
            *cmd_done = true;
        }
}

int main(int argc, char **argv)
{
    double grace = 15;
    int i = 1;
    pid_t parent = getppid(), cmd;
    int cmd_status = 0;
    bool cmd_done = false;
    sigset_t block, empty;
    struct sigaction sa;
    static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};

    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--version") == 0) {
            printf("launch %s\n", CDC_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: launch [--grace <seconds>] [--] <command> [<arg>...]\n"
                   "Runs command so that nothing it starts outlives it (docs/development.md,\n"
                   "\"Nothing outlives its launcher\").\n");
            return 0;
        } else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--grace") == 0 && i + 1 < argc) {
            char *end;
            grace = strtod(argv[i + 1], &end);
            if (*end != '\0' || grace < 0) {
                fprintf(stderr, "launch: --grace: not a number of seconds: %s\n", argv[i + 1]);
                return 2;
            }
            i += 2;
        } else {
            usage();
            return 2;
        }
    }
    if (i >= argc) {
        usage();
        return 2;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) {
        fprintf(stderr, "launch: prctl: %s\n", strerror(errno));
        return 2;
    }
    if (getppid() != parent) /* the parent died before PR_SET_PDEATHSIG */
        return 143;

    /* The signals are blocked except while waiting (sigsuspend), so none is lost between
     * a check and the wait. */
    sigemptyset(&block);
    for (size_t k = 0; k < sizeof(forwarded) / sizeof(forwarded[0]); k++)
        sigaddset(&block, forwarded[k]);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof(forwarded) / sizeof(forwarded[0]); k++)
        sigaction(forwarded[k], &sa, NULL);
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    cmd = fork();
    if (cmd < 0) {
        fprintf(stderr, "launch: fork: %s\n", strerror(errno));
        return 2;
    }
    if (cmd == 0) {
        pid_t me = getppid();
        signal(SIGPIPE, SIG_DFL);
        for (size_t k = 0; k < sizeof(forwarded) / sizeof(forwarded[0]); k++)
            signal(forwarded[k], SIG_DFL);
        signal(SIGCHLD, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &block, NULL);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != me)
            _exit(143);
        /* scripts that wrap themselves in launch see that they already are */
        char pid[24];
        snprintf(pid, sizeof(pid), "%ld", (long)me);
        setenv("LAUNCH_PID", pid, 1);
        execvp(argv[i], &argv[i]);
        fprintf(stderr, "launch: could not run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }

    sigemptyset(&empty);
    while (!cmd_done) {
        reap(cmd, &cmd_status, &cmd_done);
        if (cmd_done)
            break;
        if (pending_signal != 0 && pending_signal != SIGCHLD)
            kill(cmd, pending_signal);
        pending_signal = 0;
        sigsuspend(&empty);
    }

    /* The command ended: stop what it left behind, SIGTERM once, then SIGKILL after the
     * grace period; count again every 100 ms until none is left. */
    reap(cmd, &cmd_status, &cmd_done);
    int n = signal_children(SIGTERM);
    if (n > 0)
        fprintf(stderr, "launch: stopping %d process(es) %s left running\n", n, argv[i]);
    double deadline = now_s() + grace;
    bool killed = false;
    while (n > 0) {
        usleep(100 * 1000);
        reap(cmd, &cmd_status, &cmd_done);
        if (!killed && now_s() >= deadline) {
            n = signal_children(SIGKILL);
            if (n > 0)
                fprintf(stderr,
                        "launch: %d process(es) still running %.0f s after SIGTERM: "
                        "SIGKILL\n",
                        n, grace);
            killed = true;
        } else {
            n = signal_children(0);
        }
    }
    if (WIFSIGNALED(cmd_status))
        return 128 + WTERMSIG(cmd_status);
    return WEXITSTATUS(cmd_status);
}
