/*
 * The disk-fault shim of the test suite (docs/operations.md, "Disk faults"): an LD_PRELOAD
 * object that makes file operations on paths under a prefix fail or slow down while a
 * control file exists. Tests start a process with
 *
 *   LD_PRELOAD=build/tests/faults/libdiskfault.so DISKFAULT_CTL=/tmp/x/ctl
 *
 * and write one line to the control file to turn a fault on, delete it to turn it off:
 *
 *   ENOSPC <pattern>      writes, fsyncs, fallocates, renames, links and creating opens fail
 *   EIO <pattern>         the same with EIO
 *   DELAY <ms> <pattern>  every fsync, fdatasync, rename and link waits <ms> first
 *
 * on the files whose path contains the pattern (an absolute directory: the files under
 * it; "/metadata/": every table's metadata); an fd's path comes from /proc/self/fd.
 * The control file is read again when its modification time or size changes. Each fault
 * injected is counted; the first ones of an activation are logged to stderr as
 * "diskfault: ENOSPC write /path", so a test can prove that its fault was hit.
 * Calls that glibc makes internally (stdio, mkstemp's own open) are not seen; the ones
 * the programs and librocksdb make through the dynamic linker are.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum fault_kind { FAULT_NONE, FAULT_ERROR, FAULT_DELAY };

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct timespec ctl_mtime;
static off_t ctl_size = -1;
static enum fault_kind ctl_kind;
static int ctl_errno;
static long ctl_delay_ms;
static char ctl_prefix[PATH_MAX]; /* the pattern */
static unsigned long logged;

/* Reads the control file when it changed; false when no fault is on. */
static bool fault_on(enum fault_kind *kind, int *err, long *delay_ms, char *prefix)
{
    const char *ctl = getenv("DISKFAULT_CTL");
    if (!ctl || !*ctl)
        return false;
    struct stat st;
    /* the raw system call: stat of the control file must not recurse into the shim */
    if (syscall(SYS_newfstatat, AT_FDCWD, ctl, &st, 0) != 0)
        return false;
    pthread_mutex_lock(&ctl_mu);
    if (st.st_size != ctl_size || st.st_mtim.tv_sec != ctl_mtime.tv_sec ||
        st.st_mtim.tv_nsec != ctl_mtime.tv_nsec) {
        char buf[PATH_MAX + 64] = {0};
        int fd = (int)syscall(SYS_openat, AT_FDCWD, ctl, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? syscall(SYS_read, fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            syscall(SYS_close, fd);
        ctl_kind = FAULT_NONE;
        if (n > 0) {
            char word[16] = {0};
            char path[PATH_MAX] = {0};
            long ms = 0;
            buf[n] = '\0';
            if (sscanf(buf, "DELAY %ld %4095s", &ms, path) == 2) {
                ctl_kind = FAULT_DELAY;
                ctl_delay_ms = ms;
            } else if (sscanf(buf, "%15s %4095s", word, path) == 2) {
                ctl_kind = FAULT_ERROR;
                ctl_errno = strcmp(word, "EIO") == 0 ? EIO : ENOSPC;
            }
            snprintf(ctl_prefix, sizeof(ctl_prefix), "%s", path);
        }
        ctl_size = st.st_size;
        ctl_mtime = st.st_mtim;
        logged = 0;
    }
    *kind = ctl_kind;
    *err = ctl_errno;
    *delay_ms = ctl_delay_ms;
    snprintf(prefix, PATH_MAX, "%s", ctl_prefix);
    pthread_mutex_unlock(&ctl_mu);
    return *kind != FAULT_NONE;
}

static void note(const char *what, const char *op, const char *path)
{
    pthread_mutex_lock(&ctl_mu);
    bool say = logged++ < 5;
    pthread_mutex_unlock(&ctl_mu);
    if (say) {
        char line[PATH_MAX + 64];
        int n = snprintf(line, sizeof(line), "diskfault: %s %s %s\n", what, op, path);
        if (n > 0)
            (void)syscall(SYS_write, 2, line,
                          (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
    }
}

/*
 * Whether an operation on path (or on fd when path is NULL) fails: returns the errno to
 * fail with, or 0 after any delay. delays: whether this operation is one that DELAY slows.
 */
static int fault_for(const char *path, int fd, const char *op, bool delays)
{
    enum fault_kind kind;
    int err;
    long ms;
    char prefix[PATH_MAX];
    if (!fault_on(&kind, &err, &ms, prefix))
        return 0;
    char fdpath[PATH_MAX];
    if (!path) {
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, link, fdpath, sizeof(fdpath) - 1);
        if (n <= 0)
            return 0;
        fdpath[n] = '\0';
        path = fdpath;
    }
    if (strstr(path, prefix) == NULL)
        return 0;
    if (kind == FAULT_DELAY) {
        if (delays && ms > 0) {
            note("DELAY", op, path);
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
        return 0;
    }
    note(err == EIO ? "EIO" : "ENOSPC", op, path);
    return err;
}

#define REAL(ret, name, ...)                                                                       \
    static ret (*real_##name)(__VA_ARGS__);                                                        \
    if (!real_##name)                                                                              \
        real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name);

#define FAIL_IF(path, fd, op, delays, failval)                                                     \
    do {                                                                                           \
        int fault_err_ = fault_for(path, fd, op, delays);                                          \
        if (fault_err_) {                                                                          \
            errno = fault_err_;                                                                    \
            return failval;                                                                        \
        }                                                                                          \
    } while (0)

ssize_t write(int fd, const void *buf, size_t n)
{
    REAL(ssize_t, write, int, const void *, size_t);
    if (fd > 2)
        FAIL_IF(NULL, fd, "write", false, -1);
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
    FAIL_IF(NULL, fd, "pwrite", false, -1);
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    REAL(ssize_t, pwrite64, int, const void *, size_t, off_t);
    FAIL_IF(NULL, fd, "pwrite", false, -1);
    return real_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    REAL(ssize_t, writev, int, const struct iovec *, int);
    if (fd > 2)
        FAIL_IF(NULL, fd, "writev", false, -1);
    return real_writev(fd, iov, cnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t);
    FAIL_IF(NULL, fd, "pwritev", false, -1);
    return real_pwritev(fd, iov, cnt, off);
}

int fsync(int fd)
{
    REAL(int, fsync, int);
    FAIL_IF(NULL, fd, "fsync", true, -1);
    return real_fsync(fd);
}

int fdatasync(int fd)
{
    REAL(int, fdatasync, int);
    FAIL_IF(NULL, fd, "fdatasync", true, -1);
    return real_fdatasync(fd);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    REAL(int, fallocate, int, int, off_t, off_t);
    FAIL_IF(NULL, fd, "fallocate", false, -1);
    return real_fallocate(fd, mode, off, len);
}

int fallocate64(int fd, int mode, off_t off, off_t len)
{
    REAL(int, fallocate64, int, int, off_t, off_t);
    FAIL_IF(NULL, fd, "fallocate", false, -1);
    return real_fallocate64(fd, mode, off, len);
}

int posix_fallocate(int fd, off_t off, off_t len)
{
    REAL(int, posix_fallocate, int, off_t, off_t);
    int err = fault_for(NULL, fd, "posix_fallocate", false);
    if (err)
        return err; /* posix_fallocate returns the error, errno untouched */
    return real_posix_fallocate(fd, off, len);
}

int rename(const char *from, const char *to)
{
    REAL(int, rename, const char *, const char *);
    FAIL_IF(to, -1, "rename", true, -1);
    return real_rename(from, to);
}

int renameat(int dfd, const char *from, int tdfd, const char *to)
{
    REAL(int, renameat, int, const char *, int, const char *);
    if (to && to[0] == '/')
        FAIL_IF(to, -1, "rename", true, -1);
    return real_renameat(dfd, from, tdfd, to);
}

int link(const char *from, const char *to)
{
    REAL(int, link, const char *, const char *);
    FAIL_IF(to, -1, "link", true, -1);
    return real_link(from, to);
}

/* Opening to create or write a file under the prefix fails (with the error faults). */
static int open_fault(const char *path, int flags)
{
    if (!path || path[0] != '/' || !(flags & (O_CREAT | O_WRONLY | O_RDWR)))
        return 0;
    return fault_for(path, -1, "open", false);
}

int open(const char *path, int flags, ...)
{
    REAL(int, open, const char *, int, ...);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    int err = open_fault(path, flags);
    if (err) {
        errno = err;
        return -1;
    }
    return real_open(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    REAL(int, open64, const char *, int, ...);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    int err = open_fault(path, flags);
    if (err) {
        errno = err;
        return -1;
    }
    return real_open64(path, flags, mode);
}

int openat(int dfd, const char *path, int flags, ...)
{
    REAL(int, openat, int, const char *, int, ...);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    int err = open_fault(path, flags);
    if (err) {
        errno = err;
        return -1;
    }
    return real_openat(dfd, path, flags, mode);
}
