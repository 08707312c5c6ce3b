/*
 * What the shared option sets of options.h do besides declaring their rows.
 */
#include "common/options.h"

#include <stdio.h>
#include <string.h>

#include "common/http.h"
#include "common/log.h"

void cdc_log_options_apply(const cdc_log_options_t *o, const char *process, const char *instance)
{
    cdc_log_level_t level;
    cdc_log_format_t format;

    cdc_log_init(process, instance);
    if (o->level != NULL && cdc_log_parse_level(o->level, &level))
        cdc_log_set_level(level);
    if (o->format != NULL && cdc_log_parse_format(o->format, &format))
        cdc_log_set_format(format);
}

static const char *unless_empty(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : NULL;
}

cdc_etcd_security_t cdc_etcd_options_security(const cdc_etcd_options_t *o)
{
    return (cdc_etcd_security_t){.ca_file = unless_empty(o->ca_file),
                                 .cert_file = unless_empty(o->cert_file),
                                 .key_file = unless_empty(o->key_file),
                                 .user = unless_empty(o->user),
                                 .password = unless_empty(o->password)};
}

cdc_storage_config_t cdc_s3_options_storage(const cdc_s3_options_t *o)
{
    cdc_storage_config_t sc;

    memset(&sc, 0, sizeof(sc));
    sc.endpoint = unless_empty(o->endpoint);
    sc.region = unless_empty(o->region);
    sc.access_key = unless_empty(o->access_key);
    sc.secret_key = unless_empty(o->secret_key);
    sc.path_style = o->path_style;
    return sc;
}

cdc_err_t cdc_auth_check(const cdc_auth_needs_t *n, cdc_metrics_t *metrics, cdc_error_t *e)
{
    bool no_secret = n->uses_worker_secret && unless_empty(n->worker_secret) == NULL;
    bool no_token = n->has_http && unless_empty(n->http_token) == NULL;
    char missing[160];
    cdc_gauge_t *g;

    cdc_http_token_t *tokens = NULL;
    size_t ntokens = 0;
    if (n->has_http && cdc_http_tokens_parse(n->http_token, &tokens, &ntokens, e) != CDC_OK)
        return cdc_error_prefix(e, "option --http-token (CDC_HTTP_TOKEN, or its file)");
    cdc_http_tokens_free(tokens, ntokens);
    no_token = no_token || (n->has_http && ntokens == 0);
    snprintf(missing, sizeof(missing), "%s%s%s", no_secret ? "--worker-secret-file" : "",
             no_secret && no_token ? " and " : "", no_token ? "--http-token-file" : "");
    if (!n->insecure && (no_secret || no_token))
        return cdc_error_set(
            e, CDC_ERR_CONFIG,
            "authentication is on by default and %s %s not set (CDC_%s_FILE%s) (hint: "
            "generate %s, e.g. openssl rand -base64 32 > <file>, and give %s to every "
            "process; or pass --insecure explicitly to run without, for development only; "
            "docs/security.md)",
            missing, no_secret && no_token ? "are" : "is",
            no_secret ? "WORKER_SECRET" : "HTTP_TOKEN",
            no_secret && no_token ? ", CDC_HTTP_TOKEN_FILE" : "",
            no_secret && no_token ? "them" : "it", no_secret && no_token ? "them" : "it");
    if (n->insecure)
        cdc_log_warn("%s runs with --insecure%s%s%s (docs/security.md)", n->program,
                     missing[0] ? ", without " : "", missing,
                     missing[0] ? ": whoever reaches its ports is not asked for them"
                                : "; all its secrets are set, so nothing runs open");
    g = cdc_metrics_gauge(metrics ? metrics : cdc_metrics_default(), "cdc_insecure",
                          "1 when the process was started with --insecure (authentication by "
                          "default waived; docs/security.md).",
                          NULL);
    cdc_metrics_gauge_set(g, n->insecure ? 1 : 0);
    return CDC_OK;
}

bool cdc_tls_options_http(const cdc_tls_options_t *o)
{
    return o->http != NULL && o->http[0] != '\0' && strcmp(o->http, "off") != 0;
}

const char *cdc_tls_options_scheme(const cdc_tls_options_t *o)
{
    return cdc_tls_options_http(o) ? "https" : "http";
}

cdc_err_t cdc_tls_options_open(const cdc_tls_options_t *o, cdc_metrics_t *metrics, cdc_tls_t **out,
                               cdc_error_t *e)
{
    *out = NULL;
    if (unless_empty(o->ca_file) == NULL && unless_empty(o->cert_file) == NULL &&
        unless_empty(o->key_file) == NULL) {
        if (cdc_tls_options_http(o))
            return cdc_error_set(e, CDC_ERR_CONFIG,
                                 "option --http-tls=%s needs --tls-ca-file, --tls-cert-file and "
                                 "--tls-key-file",
                                 o->http);
        return CDC_OK;
    }
    cdc_err_t rc = cdc_tls_open(out, o->ca_file, o->cert_file, o->key_file, metrics, e);
    if (rc == CDC_OK && (rc = cdc_tls_set_server_name(*out, o->server_name, e)) != CDC_OK) {
        cdc_tls_close(*out);
        *out = NULL;
    }
    return rc;
}
