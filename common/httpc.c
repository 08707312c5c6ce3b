/*
 * HTTP client over libcurl's easy interface (see httpc.h). A handle is one CURL easy
 * handle, reset before each request so no option of an earlier request leaks into the
 * next, while its connection cache survives the reset. The body grows in one buffer;
 * the header callback keeps the two headers callers read (Content-Length, ETag).
 */
#include "common/httpc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "common/buf.h"

struct cdc_httpc {
    CURL *curl;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

cdc_httpc_t *cdc_httpc_open(void)
{
    cdc_httpc_t *h;

    pthread_once(&curl_once, curl_init_once);
    if ((h = calloc(1, sizeof(*h))) == NULL)
        return NULL;
    if ((h->curl = curl_easy_init()) == NULL) {
        free(h);
        return NULL;
    }
    return h;
}

void cdc_httpc_close(cdc_httpc_t *h)
{
    if (h == NULL)
        return;
    curl_easy_cleanup(h->curl);
    free(h);
}

void cdc_httpc_response_free(cdc_httpc_response_t *resp)
{
    if (resp == NULL)
        return;
    free(resp->body);
    memset(resp, 0, sizeof(*resp));
}

/* What one transfer needs in libcurl's callbacks. */
typedef struct transfer {
    const cdc_httpc_request_t *req;
    cdc_httpc_response_t *resp;
    bool oom;
} transfer_t;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
    transfer_t *t = arg;
    cdc_httpc_response_t *r = t->resp;
    size_t n = size * nmemb;

    if (cdc_array_reserve(r->body, r->cap, r->len + n + 1, 4096) != CDC_OK) {
        t->oom = true;
        return 0;
    }
    memcpy(r->body + r->len, ptr, n);
    r->len += n;
    r->body[r->len] = '\0';
    if (t->req->on_data != NULL && !t->req->on_data(r, t->req->on_data_arg)) {
        r->stopped = true;
        return 0; /* cut the transfer: the caller has what it waited for */
    }
    return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
    cdc_httpc_response_t *r = ((transfer_t *)arg)->resp;
    size_t n = size * nmemb;

    if (n > 15 && strncasecmp(p, "content-length:", 15) == 0)
        r->content_length = strtoll(p + 15, NULL, 10);
    if (n > 5 && strncasecmp(p, "etag:", 5) == 0) {
        size_t i = 5;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        size_t j = n;
        while (j > i && (p[j - 1] == '\r' || p[j - 1] == '\n' || p[j - 1] == ' '))
            j--;
        size_t l = j - i < sizeof(r->etag) - 1 ? j - i : sizeof(r->etag) - 1;
        memcpy(r->etag, p + i, l);
        r->etag[l] = '\0';
    }
    return n;
}

/* The method's options: GET is libcurl's default, HEAD asks for no body, DELETE sends
 * none, and every other method sends the request body (POSTFIELDS, which also lets
 * SigV4 hash the payload). */
static void set_method(CURL *c, const cdc_httpc_request_t *req)
{
    const char *m = req->method != NULL ? req->method : "GET";

    if (strcmp(m, "GET") == 0)
        return;
    if (strcmp(m, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        return;
    }
    if (strcmp(m, "POST") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m);
    if (strcmp(m, "DELETE") != 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body != NULL ? req->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(req->body != NULL ? req->body_len : 0));
    }
}

/* For req->tls_server_name: url with that name as its host into out, and the libcurl
 * CONNECT_TO entry "name:port:host:port" that still connects to the URL's host. False when
 * url is not https://host:port/... or does not fit. */
static bool server_name_url(const char *url, const char *name, char *out, size_t size,
                            char *connect_to, size_t csize)
{
    const char *h = url + 8, *colon, *slash;
    if (strncmp(url, "https://", 8) != 0 || (slash = strchr(h, '/')) == NULL)
        slash = h + strlen(h);
    colon = memchr(h, ':', (size_t)(slash - h));
    if (strncmp(url, "https://", 8) != 0 || colon == NULL || colon == h)
        return false;
    int port = atoi(colon + 1);
    int n = snprintf(out, size, "https://%s:%d%s", name, port, slash);
    int m = snprintf(connect_to, csize, "%s:%d:%.*s:%d", name, port, (int)(colon - h), h, port);
    return n > 0 && (size_t)n < size && m > 0 && (size_t)m < csize;
}

cdc_err_t cdc_httpc_perform(cdc_httpc_t *h, const cdc_httpc_request_t *req,
                            cdc_httpc_response_t *resp)
{
    char named_url[2048], connect_to[600];
    struct curl_slist *connect = NULL;
    transfer_t t = {.req = req, .resp = resp};
    struct curl_slist *hdrs = NULL;
    CURL *c = h->curl;

    memset(resp, 0, sizeof(*resp));
    for (size_t i = 0; req->headers != NULL && req->headers[i] != NULL; i++) {
        struct curl_slist *more = curl_slist_append(hdrs, req->headers[i]);
        if (more == NULL) {
            curl_slist_free_all(hdrs);
            resp->reason = curl_easy_strerror(CURLE_OUT_OF_MEMORY);
            return CDC_ERR_NOMEM;
        }
        hdrs = more;
    }
    curl_easy_reset(c);
    if (req->tls_server_name != NULL && req->tls_server_name[0] != '\0' &&
        server_name_url(req->url, req->tls_server_name, named_url, sizeof(named_url), connect_to,
                        sizeof(connect_to)) &&
        (connect = curl_slist_append(NULL, connect_to)) != NULL) {
        curl_easy_setopt(c, CURLOPT_URL, named_url);
        curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect);
    } else {
        curl_easy_setopt(c, CURLOPT_URL, req->url);
    }
    set_method(c, req);
    if (hdrs != NULL)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (req->aws_sigv4 != NULL)
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, req->aws_sigv4);
    if (req->userpwd != NULL)
        curl_easy_setopt(c, CURLOPT_USERPWD, req->userpwd);
    if (req->ca_file != NULL)
        curl_easy_setopt(c, CURLOPT_CAINFO, req->ca_file);
    if (req->cert_file != NULL)
        curl_easy_setopt(c, CURLOPT_SSLCERT, req->cert_file);
    if (req->key_file != NULL)
        curl_easy_setopt(c, CURLOPT_SSLKEY, req->key_file);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, resp->detail);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (req->timeout_ms > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, req->timeout_ms);
    if (req->connect_timeout_ms > 0)
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, req->connect_timeout_ms);

    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    /* the error buffer must not outlive this call: resp may move */
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(hdrs);
    curl_slist_free_all(connect);
    if (t.oom) {
        resp->reason = curl_easy_strerror(rc);
        return CDC_ERR_NOMEM;
    }
    if (resp->stopped || rc == CURLE_OK)
        return CDC_OK;
    resp->reason = curl_easy_strerror(rc);
    return rc == CURLE_OPERATION_TIMEDOUT ? CDC_ERR_TIMEOUT : CDC_ERR_UNAVAILABLE;
}
