/*
 * CDC_ASSERT and CDC_UNEXPECTED (common/assert.h): a true invariant goes on; a false one
 * logs an error naming the condition and its place, and aborts the process (checked in a
 * child process, whose exit status and stderr the test reads). Test builds have
 * FAULT_INJECTION=1, so the check is active here.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/assert.h"
#include "common/log.h"

/* Runs fn in a child with stderr on a pipe: its stderr (at most size - 1 bytes) in out,
 * the wait status returned. */
static int in_child(void (*fn)(int), int arg, char *out, size_t size)
{
    int fds[2], st = 0;
    size_t n = 0;
    pid_t pid;
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        signal(SIGABRT, SIG_DFL);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    for (;;) {
        ssize_t r = read(fds[0], out + n, size - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    out[n] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static void check(int value)
{
    cdc_log_init("test", NULL);
    CDC_ASSERT(value > 1);
}

static void unexpected(int value)
{
    cdc_log_init("test", NULL);
    switch (value) {
    case 1:
        return;
    default:
        CDC_UNEXPECTED("unexpected value");
    }
}

static void test_true_goes_on(void **state)
{
    char err[4096];
    (void)state;
    int st = in_child(check, 2, err, sizeof(err));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_null(strstr(err, "invariant violated"));
}

static void test_false_aborts_loudly(void **state)
{
    char err[4096];
    (void)state;
    int st = in_child(check, 1, err, sizeof(err));
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    if (strstr(err, "invariant violated: value > 1") == NULL ||
        strstr(err, "test_assert.c") == NULL || strstr(err, "check") == NULL)
        fail_msg("the log does not name the condition and its place: %s", err);
}

static void test_unexpected_branch(void **state)
{
    char err[4096];
    (void)state;
    assert_true(WIFEXITED(in_child(unexpected, 1, err, sizeof(err))));
    int st = in_child(unexpected, 7, err, sizeof(err));
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    assert_non_null(strstr(err, "invariant violated: unexpected value"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_true_goes_on),
        cmocka_unit_test(test_false_aborts_loudly),
        cmocka_unit_test(test_unexpected_branch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
