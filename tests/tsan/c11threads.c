/*
 * C11 threads on top of pthreads, linked only into the ThreadSanitizer build (`make tsan`,
 * SAN=thread). librdkafka creates its threads and takes its locks with C11 threads
 * (thrd_create, mtx_lock, cnd_wait, call_once), and glibc implements those by calling its
 * pthread functions internally, past TSan's pthread interceptors: TSan then knows nothing
 * of librdkafka's threads (the first allocation on one crashes inside TSan's allocator,
 * e.g. in getaddrinfo on a broker thread) nor of its locks (false races in memory handed
 * between its threads). Defined in the executable, these take precedence over glibc's
 * and call the intercepted pthread functions. Not used by any other build.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

typedef struct c11_start {
    thrd_start_t fn;
    void *arg;
} c11_start_t;

static int status(int rc)
{
    if (rc == 0)
        return thrd_success;
    if (rc == ENOMEM)
        return thrd_nomem;
    if (rc == ETIMEDOUT)
        return thrd_timedout;
    if (rc == EBUSY)
        return thrd_busy;
    return thrd_error;
}

static void *c11_trampoline(void *arg)
{
    c11_start_t st = *(c11_start_t *)arg;
    free(arg);
    return (void *)(intptr_t)st.fn(st.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t fn, void *arg)
{
    c11_start_t *st = malloc(sizeof(*st));
    pthread_t th;
    int rc;

    if (st == NULL)
        return thrd_nomem;
    st->fn = fn;
    st->arg = arg;
    rc = pthread_create(&th, NULL, c11_trampoline, st);
    if (rc != 0) {
        free(st);
        return status(rc);
    }
    *thr = (thrd_t)th;
    return thrd_success;
}

int thrd_join(thrd_t thr, int *res)
{
    void *ret = NULL;
    int rc = pthread_join((pthread_t)thr, &ret);
    if (rc == 0 && res != NULL)
        *res = (int)(intptr_t)ret;
    return status(rc);
}

int thrd_detach(thrd_t thr)
{
    return status(pthread_detach((pthread_t)thr));
}

int mtx_init(mtx_t *m, int type)
{
    pthread_mutexattr_t attr;
    int rc;

    pthread_mutexattr_init(&attr);
    if (type & mtx_recursive)
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    rc = pthread_mutex_init((pthread_mutex_t *)m, &attr);
    pthread_mutexattr_destroy(&attr);
    return status(rc);
}

int mtx_lock(mtx_t *m)
{
    return status(pthread_mutex_lock((pthread_mutex_t *)m));
}

int mtx_trylock(mtx_t *m)
{
    return status(pthread_mutex_trylock((pthread_mutex_t *)m));
}

int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict ts)
{
    return status(pthread_mutex_timedlock((pthread_mutex_t *)m, ts));
}

int mtx_unlock(mtx_t *m)
{
    return status(pthread_mutex_unlock((pthread_mutex_t *)m));
}

void mtx_destroy(mtx_t *m)
{
    pthread_mutex_destroy((pthread_mutex_t *)m);
}

int cnd_init(cnd_t *c)
{
    return status(pthread_cond_init((pthread_cond_t *)c, NULL));
}

int cnd_signal(cnd_t *c)
{
    return status(pthread_cond_signal((pthread_cond_t *)c));
}

int cnd_broadcast(cnd_t *c)
{
    return status(pthread_cond_broadcast((pthread_cond_t *)c));
}

int cnd_wait(cnd_t *c, mtx_t *m)
{
    return status(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict ts)
{
    return status(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, ts));
}

void cnd_destroy(cnd_t *c)
{
    pthread_cond_destroy((pthread_cond_t *)c);
}

void call_once(once_flag *flag, void (*fn)(void))
{
    pthread_once((pthread_once_t *)flag, fn);
}
