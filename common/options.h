/*
 * Option sets several programs share, declared once (docs/configuration.md is generated
 * from the tables that include them). A program's configuration struct embeds the set's
 * struct as a member m, and its option table lists CDC_OPTS_<SET>(T, m): the same flags,
 * environment variables, defaults and help in every program.
 */
#ifndef CDC_COMMON_OPTIONS_H
#define CDC_COMMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"
#include "common/err.h"
#include "common/etcd.h"
#include "common/iceberg/storage.h"
#include "common/metrics.h"
#include "common/tls.h"

/* A secret string option without a default, also read from --<name>-file (config.h). */
#define CDC_OPT_SECRET(T, name, field, help)                                                       \
    {                                                                                              \
        name, CDC_OPT_STRING, offsetof(T, field), NULL, false, 0, 0, NULL, help, .secret = true    \
    }

/* --log-level, --log-format */
typedef struct cdc_log_options {
    char *level;
    char *format;
} cdc_log_options_t;

#define CDC_OPTS_LOG(T, m)                                                                         \
    {                                                                                              \
        "log-level",                                                                               \
        CDC_OPT_ENUM,                                                                              \
        offsetof(T, m.level),                                                                      \
        "info",                                                                                    \
        false,                                                                                     \
        0,                                                                                         \
        0,                                                                                         \
        "debug|info|warn|error",                                                                   \
        "Log level."},                                                                             \
    {                                                                                              \
        "log-format", CDC_OPT_ENUM, offsetof(T, m.format), "logfmt", false, 0, 0, "logfmt|json",   \
            "Log line format: logfmt, or one JSON object per line."                                \
    }

/* Starts logging as process (instance: e.g. the id, or NULL) with the configured level and
 * format. */
void cdc_log_options_apply(const cdc_log_options_t *o, const char *process, const char *instance);

/* --s3-endpoint, --s3-region, --s3-access-key, --s3-secret-key, --s3-path-style: the
 * warehouse's object store when --warehouse is s3://bucket/prefix. */
typedef struct cdc_s3_options {
    char *endpoint;
    char *region;
    char *access_key;
    char *secret_key;
    bool path_style;
} cdc_s3_options_t;

#define CDC_OPTS_S3(T, m)                                                                          \
    {"s3-endpoint",                                                                                \
     CDC_OPT_STRING,                                                                               \
     offsetof(T, m.endpoint),                                                                      \
     NULL,                                                                                         \
     false,                                                                                        \
     0,                                                                                            \
     0,                                                                                            \
     NULL,                                                                                         \
     "S3 endpoint URL (MinIO, s3rver); empty = AWS (https://s3.<region>.amazonaws.com)."},         \
        {"s3-region", CDC_OPT_STRING, offsetof(T, m.region), "us-east-1", false, 0,                \
         0,           NULL,           "S3 region."},                                               \
        CDC_OPT_SECRET(T, "s3-access-key", m.access_key, "S3 access key id."),                     \
        CDC_OPT_SECRET(T, "s3-secret-key", m.secret_key, "S3 secret access key."),                 \
    {                                                                                              \
        "s3-path-style", CDC_OPT_BOOL, offsetof(T, m.path_style), "true", false, 0, 0, NULL,       \
            "Put the bucket in the URL path (MinIO) rather than the host name."                    \
    }

/* The storage configuration of the S3 options (empty strings as unset); the caller may
 * set the other fields (timeouts, retries). */
cdc_storage_config_t cdc_s3_options_storage(const cdc_s3_options_t *o);

/* --kafka (formerly --kafka-bootstrap), --kafka-properties */
typedef struct cdc_kafka_options {
    char *bootstrap;
    char *properties;
} cdc_kafka_options_t;

#define CDC_OPTS_KAFKA(T, m)                                                                       \
    {"kafka",                                                                                      \
     CDC_OPT_STRING,                                                                               \
     offsetof(T, m.bootstrap),                                                                     \
     NULL,                                                                                         \
     true,                                                                                         \
     0,                                                                                            \
     0,                                                                                            \
     NULL,                                                                                         \
     "Kafka bootstrap servers host:port[,host:port].",                                             \
     "kafka-bootstrap"},                                                                           \
    {                                                                                              \
        "kafka-properties", CDC_OPT_STRING, offsetof(T, m.properties), "", false, 0, 0, NULL,      \
            "Extra librdkafka properties, key=value separated by ';' or new lines (e.g. "          \
            "security settings: sasl.password in --kafka-properties-file).",                       \
            .secret = true                                                                         \
    }

/* --http-token: the bearer token of the admin HTTP server's /metrics and /status
 * (docs/security.md). */
#define CDC_OPT_HTTP_TOKEN(T, field)                                                               \
    CDC_OPT_SECRET(T, "http-token", field,                                                         \
                   "Bearer tokens of the admin HTTP server, one a line: name:token, or a bare "    \
                   "token named admin. Every POST needs one (Authorization: Bearer <token>; 401 "  \
                   "without) and is audited under its name; see --http-token-reads. Required "     \
                   "unless --insecure (docs/security.md).")

/* --http-token-reads: whether /metrics, /status and the other GET endpoints need the token
 * too (the probes never do). */
#define CDC_OPT_HTTP_TOKEN_READS(T, field)                                                         \
    {                                                                                              \
        "http-token-reads", CDC_OPT_BOOL, offsetof(T, field), "false", false, 0, 0, NULL,          \
            "Require the --http-token on /metrics, /status and every other GET endpoint too "      \
            "(the scraper then needs the token); /healthz and /readyz always stay open."           \
    }

/* --insecure: run without the secrets that authentication by default requires. */
#define CDC_OPT_INSECURE(T, field)                                                                 \
    {                                                                                              \
        "insecure", CDC_OPT_BOOL, offsetof(T, field), "false", false, 0, 0, NULL,                  \
            "Start without --worker-secret / --http-token (each left unset turns its "             \
            "authentication off), for development only: logged as a warning, shown in /status "    \
            "(insecure) and as cdc_insecure 1. Without it a missing secret is a configuration "    \
            "error."                                                                               \
    }

/* What a program needs to authenticate its peers and admin clients (authentication is on by
 * default, docs/security.md). */
typedef struct cdc_auth_needs {
    const char *program;       /* "cdc-coordinator": the messages' prefix */
    bool insecure;             /* --insecure */
    bool uses_worker_secret;   /* coordinator, worker */
    const char *worker_secret; /* --worker-secret's value */
    bool has_http;             /* an admin HTTP server runs */
    const char *http_token;    /* --http-token's value */
} cdc_auth_needs_t;

/*
 * Without --insecure: CDC_ERR_CONFIG naming the options whose secret is missing (the
 * caller exits with CDC_CONFIG_EXIT). With it: a warning naming what runs open. Then sets
 * the gauge cdc_insecure of metrics (NULL = the default registry) to 1 or 0.
 */
cdc_err_t cdc_auth_check(const cdc_auth_needs_t *n, cdc_metrics_t *metrics, cdc_error_t *e);

/* --worker-secret: what workers prove to the coordinator when they register
 * (common/workerauth.h, docs/security.md); the same on coordinators and workers. */
#define CDC_OPT_WORKER_SECRET(T, field)                                                            \
    CDC_OPT_SECRET(T, "worker-secret", field,                                                      \
                   "Shared secret of coordinators and workers: a worker registers only with a "    \
                   "proof that it knows it (HMAC-SHA256 over a nonce the coordinator issues; "     \
                   "docs/security.md), so a process that merely reaches the coordinator's port "   \
                   "cannot pose as a worker. Required unless --insecure (then empty = workers "    \
                   "are not authenticated).")

/* --etcd and its security: the cluster the coordinators elect in and record epochs in,
 * which workers and cdcctl read. */
typedef struct cdc_etcd_options {
    char *endpoints;
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *user;
    char *password;
} cdc_etcd_options_t;

#define CDC_OPTS_ETCD(T, m)                                                                        \
    {"etcd",                                                                                       \
     CDC_OPT_STRING,                                                                               \
     offsetof(T, m.endpoints),                                                                     \
     "http://127.0.0.1:2379",                                                                      \
     false,                                                                                        \
     0,                                                                                            \
     0,                                                                                            \
     NULL,                                                                                         \
     "Comma-separated etcd endpoints (gRPC gateway URLs, http:// or https://)."},                  \
        {"etcd-ca-file",                                                                           \
         CDC_OPT_STRING,                                                                           \
         offsetof(T, m.ca_file),                                                                   \
         NULL,                                                                                     \
         false,                                                                                    \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "PEM file of the CAs that sign the etcd members' certificates (https:// endpoints; "      \
         "default: "                                                                               \
         "the system's CAs)."},                                                                    \
        {"etcd-cert-file",                                                                         \
         CDC_OPT_STRING,                                                                           \
         offsetof(T, m.cert_file),                                                                 \
         NULL,                                                                                     \
         false,                                                                                    \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "PEM client certificate for etcd members started with --client-cert-auth."},              \
        {"etcd-key-file",                                                                          \
         CDC_OPT_STRING,                                                                           \
         offsetof(T, m.key_file),                                                                  \
         NULL,                                                                                     \
         false,                                                                                    \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "PEM private key of --etcd-cert-file."},                                                  \
        {"etcd-user",                                                                              \
         CDC_OPT_STRING,                                                                           \
         offsetof(T, m.user),                                                                      \
         NULL,                                                                                     \
         false,                                                                                    \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "etcd user when etcd's authentication is enabled (a token from /v3/auth/authenticate, "   \
         "renewed when it expires); empty = none."},                                               \
        CDC_OPT_SECRET(T, "etcd-password", m.password, "Password of --etcd-user.")

/* The client security of the etcd options (empty strings as unset). */
cdc_etcd_security_t cdc_etcd_options_security(const cdc_etcd_options_t *o);

/* --tls-ca-file, --tls-cert-file, --tls-key-file, --http-tls: the certificates of the
 * channels a process owns (common/tls.h, docs/security.md, "TLS"): the NNG link when its
 * URL is tls+tcp://, and the admin HTTP server (and the HTTP clients of other processes'
 * admin servers) with --http-tls. */
typedef struct cdc_tls_options {
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *server_name;
    char *http; /* off|on|mutual */
} cdc_tls_options_t;

#define CDC_OPTS_TLS(T, m)                                                                         \
    {"tls-ca-file",                                                                                \
     CDC_OPT_STRING,                                                                               \
     offsetof(T, m.ca_file),                                                                       \
     NULL,                                                                                         \
     false,                                                                                        \
     0,                                                                                            \
     0,                                                                                            \
     NULL,                                                                                         \
     "PEM file of the CA that signs the pipeline's own certificates: the peer of a tls+tcp:// "    \
     "link and of the admin HTTP server (--http-tls) must chain to it. Reloaded when it "          \
     "changes or on SIGHUP."},                                                                     \
        {"tls-cert-file",                                                                          \
         CDC_OPT_STRING,                                                                           \
         offsetof(T, m.cert_file),                                                                 \
         NULL,                                                                                     \
         false,                                                                                    \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "PEM certificate (and chain) of this process, for serving and as a client "               \
         "(extendedKeyUsage serverAuth and clientAuth). Reloaded like --tls-ca-file."},            \
        {"tls-key-file",                                                                           \
         CDC_OPT_STRING,                                                                           \
         offsetof(T, m.key_file),                                                                  \
         NULL,                                                                                     \
         false,                                                                                    \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "PEM private key of --tls-cert-file (unencrypted). Reloaded like --tls-ca-file."},        \
        {"tls-server-name",                                                                        \
         CDC_OPT_STRING,                                                                           \
         offsetof(T, m.server_name),                                                               \
         NULL,                                                                                     \
         false,                                                                                    \
         0,                                                                                        \
         0,                                                                                        \
         NULL,                                                                                     \
         "Name a server's certificate must carry when this process connects to a pipeline "        \
         "server it reaches by IP address (the leader's NNG endpoint and admin API), e.g. "        \
         "cdc-coordinator.cdc.svc; empty = the host dialed."},                                     \
    {                                                                                              \
        "http-tls", CDC_OPT_ENUM, offsetof(T, m.http), "off", false, 0, 0, "off|on|mutual",        \
            "TLS of the admin HTTP server and of the admin requests this process sends (a "        \
            "standby's forwarding, cdcctl): off = plain http; on = https with --tls-cert-file; "   \
            "mutual = https, and clients must present a certificate of --tls-ca-file."             \
    }

/* The process's certificates: *out = NULL when none of the files is given (plain tcp://
 * and http), otherwise all three must be (CDC_ERR_CONFIG naming the option). --http-tls
 * other than off needs them too. */
cdc_err_t cdc_tls_options_open(const cdc_tls_options_t *o, cdc_metrics_t *metrics, cdc_tls_t **out,
                               cdc_error_t *e);

/* Whether --http-tls is on or mutual. */
bool cdc_tls_options_http(const cdc_tls_options_t *o);

/* The scheme of admin URLs under these options: "https" or "http". */
const char *cdc_tls_options_scheme(const cdc_tls_options_t *o);

/* --liveness-timeout: how long a main loop may stand still before /healthz fails
 * (common/health.h). */
#define CDC_OPT_LIVENESS_TIMEOUT(T, field)                                                         \
    {                                                                                              \
        "liveness-timeout", CDC_OPT_DURATION, offsetof(T, field), "60s", false, 0, 3600000, NULL,  \
            "/healthz answers 503 when the main loop has not turned for this long, so that a "     \
            "liveness probe restarts a wedged process (0 = the loop is not watched)."              \
    }

#endif
