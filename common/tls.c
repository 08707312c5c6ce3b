/*
 * TLS configurations for NNG's listeners, dialers and HTTP server, from PEM files that
 * are reloaded when they change (see tls.h). Part of the NNG adapter: only this file,
 * common/msg.c and common/http.c include NNG.
 */
#include "common/tls.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"

/* PEM files larger than this are refused: a CA bundle is a few hundred KiB at most */
#define TLS_FILE_MAX (4u * 1024 * 1024)
#define CHECK_INTERVAL_MS 1000

enum { F_CA, F_CERT, F_KEY, NFILES };

static const char *const option_names[NFILES] = {"--tls-ca-file", "--tls-cert-file",
                                                 "--tls-key-file"};

typedef struct tls_file {
    char *path;
    struct stat st; /* as last read */
} tls_file_t;

typedef struct tls_sub {
    cdc_tls_reload_fn fn;
    void *arg;
    struct tls_sub *next;
} tls_sub_t;

struct cdc_tls {
    tls_file_t files[NFILES];
    pthread_mutex_t lock; /* guards pem and gen */
    char *pem[NFILES];    /* the files' contents in effect */
    _Atomic uint64_t gen;
    pthread_mutex_t subs_lock; /* guards subs; held while subscribers run */
    tls_sub_t *subs;
    int64_t last_check_ms;
    uint64_t seen_request;
    int64_t not_after; /* the certificate's expiry (seconds since the epoch) */
    char *server_name; /* NULL = the dialed host */
    cdc_counter_t *reloads_ok, *reloads_failed;
    cdc_gauge_t *expiry;
};

static volatile sig_atomic_t reload_requests;

void cdc_tls_request_reload(void)
{
    reload_requests++;
}

bool cdc_tls_url(const char *url)
{
    return url != NULL &&
           (strncmp(url, "tls+tcp://", 10) == 0 || strncmp(url, "tls+tcp4://", 11) == 0 ||
            strncmp(url, "tls+tcp6://", 11) == 0 || strncmp(url, "https://", 8) == 0);
}

/* Reads path into a NUL-terminated heap buffer; its stat into *st. */
static cdc_err_t read_pem(const char *path, const char *option, char **out, struct stat *st,
                          cdc_error_t *e)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n;

    if (f == NULL)
        return cdc_error_set(e, CDC_ERR_CONFIG, "option %s: could not read \"%s\": %s", option,
                             path, strerror(errno));
    if (fstat(fileno(f), st) != 0 || st->st_size <= 0 || st->st_size > (off_t)TLS_FILE_MAX) {
        fclose(f);
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "option %s: \"%s\" is empty or larger than %u bytes", option, path,
                             TLS_FILE_MAX);
    }
    if ((buf = malloc((size_t)st->st_size + 1)) == NULL) {
        fclose(f);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    n = fread(buf, 1, (size_t)st->st_size, f);
    fclose(f);
    buf[n] = '\0';
    if (n == 0 || strstr(buf, "-----BEGIN ") == NULL) {
        free(buf);
        return cdc_error_set(e, CDC_ERR_CONFIG, "option %s: \"%s\" is not a PEM file", option,
                             path);
    }
    *out = buf;
    return CDC_OK;
}

/* Builds a configuration from pem; on failure *bad is the index of the file at fault. */
static int build(char *const pem[NFILES], bool server, bool require_peer, const char *name,
                 nng_tls_config **out, int *bad)
{
    nng_tls_config *cfg = NULL;
    int rv;

    if ((rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT)) != 0)
        return rv;
    *bad = F_CA;
    if ((rv = nng_tls_config_ca_chain(cfg, pem[F_CA], NULL)) != 0)
        goto fail;
    *bad = F_CERT;
    if ((rv = nng_tls_config_own_cert(cfg, pem[F_CERT], pem[F_KEY], NULL)) != 0)
        goto fail;
    *bad = -1;
    if ((rv = nng_tls_config_auth_mode(cfg, require_peer || !server ? NNG_TLS_AUTH_MODE_REQUIRED
                                                                    : NNG_TLS_AUTH_MODE_NONE)) !=
            0 ||
        (name != NULL && name[0] != '\0' && (rv = nng_tls_config_server_name(cfg, name)) != 0))
        goto fail;
    *out = cfg;
    return 0;
fail:
    nng_tls_config_free(cfg);
    return rv;
}

/* Reads all files into pem/st and checks that they make a configuration; *not_after: the
 * certificate's expiry. */
static cdc_err_t load(cdc_tls_t *t, char *pem[NFILES], struct stat st[NFILES], int64_t *not_after,
                      cdc_error_t *e)
{
    cdc_err_t rc = CDC_OK;
    nng_tls_config *cfg = NULL;
    int bad = -1, rv;

    memset(pem, 0, sizeof(char *) * NFILES);
    for (int i = 0; i < NFILES && rc == CDC_OK; i++)
        rc = read_pem(t->files[i].path, option_names[i], &pem[i], &st[i], e);
    if (rc == CDC_OK && cdc_crypto_check_cert_key(pem[F_CERT], pem[F_KEY], not_after, e) != CDC_OK)
        rc = cdc_error_prefix(e, "option --tls-cert-file/--tls-key-file (\"%s\", \"%s\")",
                              t->files[F_CERT].path, t->files[F_KEY].path);
    if (rc == CDC_OK && (rv = build(pem, true, true, NULL, &cfg, &bad)) != 0)
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "option %s: \"%s\" does not make a TLS "
                           "configuration%s: %s",
                           bad == F_CERT ? "--tls-cert-file/--tls-key-file" : option_names[F_CA],
                           t->files[bad == F_CERT ? F_CERT : F_CA].path,
                           bad == F_CERT ? " (or the key does not match the certificate)" : "",
                           nng_strerror(rv));
    if (cfg != NULL)
        nng_tls_config_free(cfg);
    if (rc != CDC_OK)
        for (int i = 0; i < NFILES; i++) {
            free(pem[i]);
            pem[i] = NULL;
        }
    return rc;
}

cdc_err_t cdc_tls_open(cdc_tls_t **out, const char *ca_file, const char *cert_file,
                       const char *key_file, cdc_metrics_t *metrics, cdc_error_t *e)
{
    const char *paths[NFILES] = {ca_file, cert_file, key_file};
    struct stat st[NFILES];
    cdc_err_t rc;

    for (int i = 0; i < NFILES; i++)
        if (paths[i] == NULL || paths[i][0] == '\0')
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "option %s is required with TLS (--tls-ca-file, "
                                 "--tls-cert-file and --tls-key-file go together)",
                                 option_names[i]);
    cdc_tls_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->subs_lock, NULL);
    for (int i = 0; i < NFILES; i++)
        if ((t->files[i].path = strdup(paths[i])) == NULL) {
            cdc_tls_close(t);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
    if ((rc = load(t, t->pem, st, &t->not_after, e)) != CDC_OK) {
        cdc_tls_close(t);
        return rc;
    }
    for (int i = 0; i < NFILES; i++)
        t->files[i].st = st[i];
    if (metrics == NULL)
        metrics = cdc_metrics_default();
    static const char *const ok[] = {"result", "ok", NULL};
    static const char *const failed[] = {"result", "failed", NULL};
    const char *help = "Reloads of the TLS files (--tls-ca-file, --tls-cert-file, "
                       "--tls-key-file) after they changed or on SIGHUP; failed = the new files "
                       "did not parse and the old certificates stay in effect.";
    t->reloads_ok = cdc_metrics_counter(metrics, "cdc_tls_reloads_total", help, ok);
    t->reloads_failed = cdc_metrics_counter(metrics, "cdc_tls_reloads_total", help, failed);
    t->expiry = cdc_metrics_gauge(metrics, "cdc_tls_cert_expiry_timestamp_seconds",
                                  "When the certificate in effect (--tls-cert-file) expires, "
                                  "seconds since the epoch.",
                                  NULL);
    cdc_metrics_gauge_set(t->expiry, (double)t->not_after);
    t->seen_request = (uint64_t)reload_requests;
    t->last_check_ms = cdc_clock_mono_ms();
    *out = t;
    return CDC_OK;
}

void cdc_tls_close(cdc_tls_t *t)
{
    if (t == NULL)
        return;
    for (int i = 0; i < NFILES; i++) {
        free(t->files[i].path);
        free(t->pem[i]);
    }
    free(t->server_name);
    while (t->subs != NULL) {
        tls_sub_t *n = t->subs->next;
        free(t->subs);
        t->subs = n;
    }
    pthread_mutex_destroy(&t->lock);
    pthread_mutex_destroy(&t->subs_lock);
    free(t);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

bool cdc_tls_check(cdc_tls_t *t)
{
    if (t == NULL)
        return false;
    int64_t now = cdc_clock_mono_ms();
    uint64_t requests = (uint64_t)reload_requests;
    bool requested = requests != t->seen_request, changed = false;
    struct stat st[NFILES];
    char *pem[NFILES];
    int64_t not_after = 0;
    cdc_error_t e = {0};

    if (!requested && now - t->last_check_ms < CHECK_INTERVAL_MS)
        return false;
    t->last_check_ms = now;
    t->seen_request = requests;
    for (int i = 0; i < NFILES && !changed; i++) {
        struct stat cur;
        changed = stat(t->files[i].path, &cur) != 0 || !same_file(&cur, &t->files[i].st);
    }
    if (!changed && !requested)
        return false;
    if (load(t, pem, st, &not_after, &e) != CDC_OK) {
        /* remember what was seen: the same broken files are reported once, not every second */
        for (int i = 0; i < NFILES; i++)
            if (stat(t->files[i].path, &t->files[i].st) != 0)
                memset(&t->files[i].st, 0, sizeof(t->files[i].st));
        cdc_metrics_counter_inc(t->reloads_failed);
        cdc_log_error("tls: the new certificate files were refused, the previous ones stay in "
                      "effect: %s (hint: fix the files; they are read again when they change or "
                      "on SIGHUP)",
                      e.msg);
        return false;
    }
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < NFILES; i++) {
        free(t->pem[i]);
        t->pem[i] = pem[i];
        t->files[i].st = st[i];
    }
    t->gen++;
    t->not_after = not_after;
    pthread_mutex_unlock(&t->lock);
    cdc_metrics_counter_inc(t->reloads_ok);
    cdc_metrics_gauge_set(t->expiry, (double)not_after);
    cdc_log_info("tls: reloaded %s, %s and %s (%s); new connections use them", t->files[F_CA].path,
                 t->files[F_CERT].path, t->files[F_KEY].path,
                 requested ? "a reload was asked for: SIGHUP" : "the files changed");
    pthread_mutex_lock(&t->subs_lock);
    for (tls_sub_t *s = t->subs; s != NULL; s = s->next)
        s->fn(s->arg);
    pthread_mutex_unlock(&t->subs_lock);
    return true;
}

cdc_err_t cdc_tls_set_server_name(cdc_tls_t *t, const char *name, cdc_error_t *e)
{
    free(t->server_name);
    t->server_name = NULL;
    if (name != NULL && name[0] != '\0' && (t->server_name = strdup(name)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    return CDC_OK;
}

const char *cdc_tls_server_name(const cdc_tls_t *t)
{
    return t ? t->server_name : NULL;
}

uint64_t cdc_tls_generation(const cdc_tls_t *t)
{
    return t ? t->gen : 0;
}

int cdc_tls_nng_config(cdc_tls_t *t, bool server, bool require_peer, const char *server_name,
                       struct nng_tls_config **out)
{
    int bad, rv;
    pthread_mutex_lock(&t->lock);
    rv = build(t->pem, server, require_peer, server_name, out, &bad);
    pthread_mutex_unlock(&t->lock);
    return rv;
}

cdc_err_t cdc_tls_subscribe(cdc_tls_t *t, cdc_tls_reload_fn fn, void *arg, cdc_error_t *e)
{
    tls_sub_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    s->fn = fn;
    s->arg = arg;
    pthread_mutex_lock(&t->subs_lock);
    s->next = t->subs;
    t->subs = s;
    pthread_mutex_unlock(&t->subs_lock);
    return CDC_OK;
}

void cdc_tls_unsubscribe(cdc_tls_t *t, cdc_tls_reload_fn fn, void *arg)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->subs_lock);
    for (tls_sub_t **p = &t->subs; *p != NULL; p = &(*p)->next)
        if ((*p)->fn == fn && (*p)->arg == arg) {
            tls_sub_t *s = *p;
            *p = s->next;
            free(s);
            break;
        }
    pthread_mutex_unlock(&t->subs_lock);
}
