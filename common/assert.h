/*
 * Debug invariants (docs/development.md, "Invariants"): CDC_ASSERT(cond) states what the
 * protocol relies on at the point where it must hold (an epoch recorded before it is
 * committed, one epoch in the worker's finalizer at a time, ...). In debug and test
 * builds (FAULT_INJECTION=1, the default of make) a false condition logs an error that
 * names it, its file, line and function, and aborts the process: a broken invariant is a
 * bug, and going on would write wrong data. The release build of the images
 * (FAULT_INJECTION=0) compiles the checks out; the condition is then not evaluated, so it
 * must have no side effects. CDC_UNEXPECTED(what) is the loud default branch of a switch
 * over the program's own values; it is active in every build.
 */
#ifndef CDC_ASSERT_H
#define CDC_ASSERT_H

/* Logs "invariant violated: <what>" with the place, then abort()s. */
void cdc_assert_fail(const char *what, const char *file, int line, const char *func)
    __attribute__((noreturn));

#if defined(CDC_FAULTS) && CDC_FAULTS
#define CDC_ASSERT(cond) ((cond) ? (void)0 : cdc_assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define CDC_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#define CDC_UNEXPECTED(what) cdc_assert_fail(what, __FILE__, __LINE__, __func__)

#endif
