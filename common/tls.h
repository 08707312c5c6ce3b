/*
 * TLS of the channels the project owns (docs/security.md, "TLS"): the NNG link between
 * coordinators and workers (tls+tcp:// URLs, mutual TLS) and the admin HTTP servers
 * (https://). A process has one cdc_tls_t made from --tls-ca-file, --tls-cert-file and
 * --tls-key-file: the files are read into memory, and every NNG TLS configuration the
 * adapters (common/msg.c, common/http.c) need is built from those bytes, so a listener
 * and a dialer never see half-written files.
 *
 * Reload: cdc_tls_check(), called from the owner's loop, rereads the files when one of
 * them changed (its inode, size or modification time; a Kubernetes Secret volume swaps a
 * symlink) or when cdc_tls_request_reload() asked for it (SIGHUP). New files that do not
 * parse are refused: the old certificates stay in effect, the reload is logged and
 * counted (cdc_tls_reloads_total{result="failed"}). On success every subscriber is called
 * and sets the new configuration on its listener, dialer or HTTP server: connections made
 * from then on use the new certificates; established ones keep theirs.
 *
 * Threads: cdc_tls_check() on one thread; cdc_tls_nng_config(), subscribe and
 * unsubscribe from any.
 */
#ifndef CDC_TLS_H
#define CDC_TLS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/metrics.h"

typedef struct cdc_tls cdc_tls_t;

/* NNG's TLS configuration, declared so that callers need not include NNG. */
struct nng_tls_config;

/*
 * Reads and checks the three files (each required). CDC_ERR_CONFIG naming the option
 * when one cannot be read or does not parse (e.g. a key that does not match the
 * certificate). metrics: the registry of cdc_tls_reloads_total (NULL = the default).
 */
cdc_err_t cdc_tls_open(cdc_tls_t **out, const char *ca_file, const char *cert_file,
                       const char *key_file, cdc_metrics_t *metrics, cdc_error_t *e);

/* Frees t; NULL is a no-op. Every subscriber must be gone. */
void cdc_tls_close(cdc_tls_t *t);

/* Async-signal-safe: every cdc_tls_t of the process rereads its files at its next
 * cdc_tls_check(), changed or not (the SIGHUP handlers call it). */
void cdc_tls_request_reload(void);

/*
 * Rereads the files when they changed or a reload was requested; looks at the files at
 * most once a second. True when new certificates took effect (subscribers were called).
 */
bool cdc_tls_check(cdc_tls_t *t);

/* The name a client expects in a server's certificate instead of the dialed host
 * (--tls-server-name; copied; NULL or "" = the dialed host). */
cdc_err_t cdc_tls_set_server_name(cdc_tls_t *t, const char *name, cdc_error_t *e);
/* That name, or NULL. */
const char *cdc_tls_server_name(const cdc_tls_t *t);

/* Reloads that took effect so far (tests, /status). */
uint64_t cdc_tls_generation(const cdc_tls_t *t);

/*
 * A new NNG TLS configuration from the current files, owned by the caller
 * (nng_tls_config_free() in the adapter). server: our certificate for a listener; the
 * peer's certificate is verified against the CA when require_peer. A client (server =
 * false) always verifies the server's, and its name against server_name (NULL = none).
 * Returns an NNG error number (0 = success).
 */
int cdc_tls_nng_config(cdc_tls_t *t, bool server, bool require_peer, const char *server_name,
                       struct nng_tls_config **out);

typedef void (*cdc_tls_reload_fn)(void *arg);

/* Calls fn(arg) after every reload that took effect, on the thread of cdc_tls_check(). */
cdc_err_t cdc_tls_subscribe(cdc_tls_t *t, cdc_tls_reload_fn fn, void *arg, cdc_error_t *e);
/* Removes the subscription; on return fn is not running and will not run for arg. */
void cdc_tls_unsubscribe(cdc_tls_t *t, cdc_tls_reload_fn fn, void *arg);

/* Whether url's scheme asks for TLS: tls+tcp://, tls+tcp4://, tls+tcp6://, https://. */
bool cdc_tls_url(const char *url);

#endif
