/*
 * HTTP client: the project's one libcurl adapter. Every outgoing HTTP request (etcd's
 * JSON gateway, the S3 object store, cdcctl's calls to a coordinator's admin API) goes
 * through cdc_httpc_perform(); only common/httpc.c includes <curl/curl.h>, and it runs
 * curl_global_init() once per process (thread-safe) before the first handle is made.
 *
 * A request is a method, a URL, header lines, a body and timeouts, TLS files (a CA bundle,
 * a client certificate and key), plus two optional extras: AWS SigV4 signing (libcurl signs the
 * request with the given credentials) and a data callback that sees the body while it streams in
 * and may end the transfer (a streaming answer such as etcd's watch is read until the object a
 * caller waits for). A response is the status, the whole body and the headers callers need
 * (Content-Length and ETag); a transport failure says why in libcurl's words.
 *
 * Threads: a cdc_httpc_t is NOT thread-safe; use one per thread. It keeps its
 * connection open between requests, so a client that talks to one server often (etcd)
 * reuses it; one-shot callers open and close one per request.
 */
#ifndef CDC_HTTPC_H
#define CDC_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct cdc_httpc cdc_httpc_t;

/* libcurl's detailed error messages fit in this many bytes (CURL_ERROR_SIZE). */
#define CDC_HTTPC_DETAIL_SIZE 256

typedef struct cdc_httpc_response {
    long status;            /* HTTP status; 0 when no answer arrived */
    char *body;             /* heap, NUL-terminated; NULL when no body arrived */
    size_t len;             /* body bytes (without the NUL) */
    size_t cap;             /* allocated size of body */
    int64_t content_length; /* the Content-Length header; 0 when absent */
    char etag[256];         /* the ETag header as sent (quotes kept); "" when absent */
    bool stopped;           /* the data callback ended the transfer */
    /* transport failures (cdc_httpc_perform() did not return CDC_OK): */
    const char *reason;                 /* libcurl's short text for its error code */
    char detail[CDC_HTTPC_DETAIL_SIZE]; /* libcurl's detailed message; "" when none */
} cdc_httpc_response_t;

typedef struct cdc_httpc_request {
    const char *method;         /* "GET" (also when NULL), "HEAD", "POST", "PUT", "DELETE", ... */
    const char *url;            /* absolute http:// or https:// URL */
    const char *const *headers; /* "Name: value" lines, NULL-terminated; NULL = none */
    const void *body;           /* sent by every method but GET, HEAD and DELETE; NULL = "" */
    size_t body_len;
    long timeout_ms;         /* the whole transfer; 0 = no limit */
    long connect_timeout_ms; /* connection set-up; 0 = libcurl's default */
    const char *aws_sigv4;   /* "aws:amz:<region>:<service>": sign with AWS SigV4; NULL = no */
    const char *userpwd;     /* "user:password" (SigV4: "access key:secret key"); NULL = none */
    /* TLS of https:// URLs (each NULL = libcurl's default: the system's CAs, no client
     * certificate); the server's certificate and host name are always verified */
    const char *ca_file;   /* PEM file of the CAs that may sign the server's certificate */
    const char *cert_file; /* PEM client certificate, for servers that require one */
    const char *key_file;  /* its PEM private key */
    /* the name the server's certificate must carry when it is not the URL's host (a pod
     * dialed by its IP address presents a certificate for a Service name); NULL = the
     * URL's host */
    const char *tls_server_name;
    /*
     * Streaming (optional): called each time more of the body arrived, with resp->body
     * holding all of it so far. Returning false ends the transfer at once: the request
     * then counts as done (CDC_OK) with resp->stopped set.
     */
    bool (*on_data)(const cdc_httpc_response_t *resp, void *arg);
    void *on_data_arg;
} cdc_httpc_request_t;

/* Creates a handle (and initialises libcurl on the first call); NULL when out of memory. */
cdc_httpc_t *cdc_httpc_open(void);
void cdc_httpc_close(cdc_httpc_t *h);

/*
 * Sends req and reads the answer into *resp, which is always initialised first (so the
 * caller may always cdc_httpc_response_free() it). CDC_OK: an answer arrived, of any
 * HTTP status (or the data callback ended it). Otherwise the transport failed:
 * CDC_ERR_TIMEOUT when a timeout passed, CDC_ERR_NOMEM when the body could not be
 * stored, CDC_ERR_UNAVAILABLE for anything else (refused, reset, bad URL); resp->reason
 * and resp->detail say why, and resp keeps what arrived before the failure.
 */
cdc_err_t cdc_httpc_perform(cdc_httpc_t *h, const cdc_httpc_request_t *req,
                            cdc_httpc_response_t *resp);

/* Frees the body and resets *resp to empty; NULL is a no-op. */
void cdc_httpc_response_free(cdc_httpc_response_t *resp);

#endif
