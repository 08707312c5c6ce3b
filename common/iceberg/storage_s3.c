/*
 * The S3 backend of warehouse storage (see storage.h): requests go through
 * common/httpc.h, which has libcurl sign them with AWS SigV4; 5xx, 429 and timeouts are
 * retried with exponential backoff, large files are uploaded in parts (multipart
 * upload), and listings follow ListObjectsV2's continuation tokens. Objects are named
 * "s3://bucket/key"; the bucket goes into the host name or, with path_style, into the
 * path.
 *
 * A call circle of two files (docs/development.md, "Call circles"): storage.c hands s3://
 * paths to the S3 backend (storage_s3.c), which uses storage.c's shared helpers (out-of-
 * memory errors, string lists).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/httpc.h"
#include "common/iceberg/storage_int.h"

cdc_err_t cdc_storage_s3_init(cdc_storage_t *s, const cdc_storage_config_t *cfg, cdc_error_t *e)
{
    s->region = strdup(cfg->region ? cfg->region : "us-east-1");
    if (cfg->endpoint) {
        s->endpoint = strdup(cfg->endpoint);
    } else if (s->region && asprintf(&s->endpoint, "https://s3.%s.amazonaws.com", s->region) < 0) {
        s->endpoint = NULL;
    }
    s->access_key = strdup(cfg->access_key ? cfg->access_key : "");
    s->secret_key = strdup(cfg->secret_key ? cfg->secret_key : "");
    if (!s->region || !s->endpoint || !s->access_key || !s->secret_key)
        return cdc_storage_oom(e);
    size_t el = strlen(s->endpoint);
    while (el > 0 && s->endpoint[el - 1] == '/')
        s->endpoint[--el] = '\0';
    return CDC_OK;
}

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

/* Percent-encodes s (keeping '/' when keep_slash) into a new string. */
static char *uri_encode(const char *s, bool keep_slash)
{
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (unreserved(*p) || (keep_slash && *p == '/'))
            *o++ = (char)*p;
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = '\0';
    return out;
}

/* Splits "s3://bucket/key" into bucket and key (both newly allocated). */
static cdc_err_t s3_split(const char *location, char **bucket, char **key, cdc_error_t *e)
{
    if (strncmp(location, "s3://", 5) != 0 && strncmp(location, "s3a://", 6) != 0)
        return cdc_error_set(e, CDC_ERR_INVALID, "location \"%s\" is not an s3:// location",
                             location);
    const char *b = strstr(location, "://") + 3;
    const char *slash = strchr(b, '/');
    *bucket = slash ? strndup(b, (size_t)(slash - b)) : strdup(b);
    *key = strdup(slash ? slash + 1 : "");
    if (!*bucket || !*key) {
        free(*bucket);
        free(*key);
        return cdc_storage_oom(e);
    }
    return CDC_OK;
}

static char *s3_url(const cdc_storage_t *s, const char *bucket, const char *key, const char *query)
{
    char *ekey = uri_encode(key, true), *url = NULL;
    if (!ekey)
        return NULL;
    int rc;
    if (s->path_style) {
        rc = asprintf(&url, "%s/%s/%s%s%s", s->endpoint, bucket, ekey, query ? "?" : "",
                      query ? query : "");
    } else {
        const char *hs = strstr(s->endpoint, "://");
        size_t schemelen = hs ? (size_t)(hs - s->endpoint) + 3 : 0;
        rc = asprintf(&url, "%.*s%s.%s/%s%s%s", (int)schemelen, s->endpoint, bucket,
                      s->endpoint + schemelen, ekey, query ? "?" : "", query ? query : "");
    }
    free(ekey);
    return rc < 0 ? NULL : url;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/*
 * One S3 request with retries. method: GET, PUT, POST, DELETE, HEAD. Body may be
 * NULL. extra: additional header lines (NULL-terminated array, at most 8) or NULL.
 * *resp is always initialised; the caller frees it (cdc_httpc_response_free()).
 */
static cdc_err_t s3_request(cdc_storage_t *s, const char *method, const char *url, const void *body,
                            size_t len, const char *const *extra, cdc_httpc_response_t *resp,
                            cdc_error_t *e)
{
    char sigv4[128], userpwd[512];
    snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", s->region);
    snprintf(userpwd, sizeof(userpwd), "%s:%s", s->access_key, s->secret_key);
    /* curl < 8 does not add the payload hash S3 requires; SigV4 then signs this value */
    const char *hdrs[12] = {"Content-Type: application/octet-stream",
                            "Expect:", "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
    for (size_t i = 0, n = 3; extra && extra[i] && n < 11; i++)
        hdrs[n++] = extra[i];
    cdc_httpc_request_t req = {.method = method,
                               .url = url,
                               .headers = hdrs,
                               .body = body,
                               .body_len = len,
                               .timeout_ms = s->timeout_ms,
                               .connect_timeout_ms = s->timeout_ms < 10000 ? s->timeout_ms : 10000,
                               .aws_sigv4 = sigv4,
                               .userpwd = userpwd};
    cdc_err_t rc = CDC_OK;
    memset(resp, 0, sizeof(*resp));
    for (int attempt = 0;; attempt++) {
        cdc_httpc_t *h = cdc_httpc_open();
        if (!h)
            return cdc_storage_oom(e);
        cdc_err_t hrc = cdc_httpc_perform(h, &req, resp);
        cdc_httpc_close(h);
        if (hrc != CDC_OK) {
            rc = cdc_error_set_retriable(
                e, hrc == CDC_ERR_TIMEOUT ? CDC_ERR_TIMEOUT : CDC_ERR_UNAVAILABLE, true,
                "s3 %s %s failed: %s", method, url, resp->reason);
        } else if (resp->status >= 500 || resp->status == 429) {
            rc =
                cdc_error_set_retriable(e, CDC_ERR_UNAVAILABLE, true,
                                        "s3 %s %s failed with HTTP %ld", method, url, resp->status);
        } else {
            return CDC_OK;
        }
        if (attempt >= s->max_retries)
            return rc;
        cdc_httpc_response_free(resp);
        sleep_ms((100L << (attempt < 6 ? attempt : 6)) + (long)(rand() % 50));
    }
}

static cdc_err_t s3_status_err(const char *what, const char *location,
                               const cdc_httpc_response_t *r, cdc_error_t *e)
{
    if (r->status == 404)
        return cdc_error_set(e, CDC_ERR_NOT_FOUND, "\"%s\" does not exist", location);
    if (r->status == 403 || r->status == 401)
        return cdc_error_set(e, CDC_ERR_STORAGE,
                             "could not %s \"%s\": access denied (HTTP %ld): %.200s", what,
                             location, r->status, r->body ? r->body : "");
    return cdc_error_set(e, CDC_ERR_STORAGE, "could not %s \"%s\": HTTP %ld: %.200s", what,
                         location, r->status, r->body ? r->body : "");
}

/* Generic "request on one object" helper. *resp is initialised before anything can
 * fail, so the caller frees it on every path (also when the location is invalid). */
static cdc_err_t s3_object(cdc_storage_t *s, const char *method, const char *location,
                           const char *query, const void *body, size_t len,
                           const char *const *extra, cdc_httpc_response_t *resp, cdc_error_t *e)
{
    char *bucket, *key;
    memset(resp, 0, sizeof(*resp));
    cdc_err_t rc = s3_split(location, &bucket, &key, e);
    if (rc != CDC_OK)
        return rc;
    char *url = s3_url(s, bucket, key, query);
    free(bucket);
    free(key);
    if (!url)
        return cdc_storage_oom(e);
    rc = s3_request(s, method, url, body, len, extra, resp, e);
    free(url);
    return rc;
}

cdc_err_t cdc_storage_s3_head(cdc_storage_t *s, const char *location, bool *exists, int64_t *size,
                              cdc_error_t *e)
{
    cdc_httpc_response_t r;
    cdc_err_t rc = s3_object(s, "HEAD", location, NULL, NULL, 0, NULL, &r, e);
    if (rc == CDC_OK && r.status != 404 && r.status / 100 != 2)
        rc = s3_status_err("stat", location, &r, e);
    if (rc == CDC_OK) {
        *exists = r.status != 404;
        if (*exists && size)
            *size = r.content_length;
    }
    cdc_httpc_response_free(&r);
    return rc;
}

cdc_err_t cdc_storage_s3_put(cdc_storage_t *s, const char *location, const void *data, size_t len,
                             bool if_absent, cdc_error_t *e)
{
    cdc_httpc_response_t r;
    const char *extra[] = {"If-None-Match: *", NULL};
    cdc_err_t rc;
    if (if_absent) {
        bool exists = false;
        if ((rc = cdc_storage_s3_head(s, location, &exists, NULL, e)) != CDC_OK)
            return rc;
        if (exists)
            return cdc_error_set(e, CDC_ERR_EXISTS, "\"%s\" already exists", location);
    }
    rc = s3_object(s, "PUT", location, NULL, data, len, if_absent ? extra : NULL, &r, e);
    if (rc != CDC_OK) {
        cdc_httpc_response_free(&r);
        return rc;
    }
    if (r.status == 412 || (if_absent && r.status == 409)) {
        cdc_httpc_response_free(&r);
        return cdc_error_set(e, CDC_ERR_EXISTS, "\"%s\" already exists", location);
    }
    if (r.status / 100 != 2) {
        rc = s3_status_err("write", location, &r, e);
        cdc_httpc_response_free(&r);
        return rc;
    }
    cdc_httpc_response_free(&r);
    return CDC_OK;
}

/* Extracts the text of the first <tag>...</tag> after *pos; advances *pos. */
static char *xml_take(const char *xml, const char *tag, const char **pos)
{
    char open[64], close[64];
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = strstr(pos ? *pos : xml, open);
    if (!a)
        return NULL;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b)
        return NULL;
    if (pos)
        *pos = b + strlen(close);
    char *out = malloc((size_t)(b - a) + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = a; p < b;) {
        static const struct {
            const char *ent;
            char c;
        } ents[] = {
            {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        bool done = false;
        for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]) && *p == '&'; i++) {
            size_t l = strlen(ents[i].ent);
            if ((size_t)(b - p) >= l && strncmp(p, ents[i].ent, l) == 0) {
                *o++ = ents[i].c;
                p += l;
                done = true;
                break;
            }
        }
        if (!done)
            *o++ = *p++;
    }
    *o = '\0';
    return out;
}

cdc_err_t cdc_storage_s3_list(cdc_storage_t *s, const char *prefix, char ***locations, size_t *n,
                              cdc_error_t *e)
{
    char *bucket, *key;
    cdc_err_t rc = s3_split(prefix, &bucket, &key, e);
    if (rc != CDC_OK)
        return rc;
    cdc_storage_strlist_t out = {0};
    char *token = NULL;
    for (;;) {
        char *ep = uri_encode(key, false), *et = token ? uri_encode(token, false) : NULL, *q = NULL,
             *url = NULL;
        if (!ep || (token && !et) ||
            asprintf(&q, "%s%s%slist-type=2&prefix=%s", token ? "continuation-token=" : "",
                     token ? et : "", token ? "&" : "", ep) < 0) {
            free(ep);
            free(et);
            rc = cdc_storage_oom(e);
            break;
        }
        free(ep);
        free(et);
        url = s3_url(s, bucket, "", q);
        free(q);
        if (!url) {
            rc = cdc_storage_oom(e);
            break;
        }
        cdc_httpc_response_t r;
        rc = s3_request(s, "GET", url, NULL, 0, NULL, &r, e);
        free(url);
        if (rc == CDC_OK && r.status / 100 != 2)
            rc = s3_status_err("list", prefix, &r, e);
        if (rc != CDC_OK) {
            cdc_httpc_response_free(&r);
            break;
        }
        const char *pos = r.body ? r.body : "";
        char *k;
        while ((k = xml_take(pos, "Key", &pos)) != NULL) {
            char *loc;
            int arc = asprintf(&loc, "s3://%s/%s", bucket, k);
            free(k);
            if (arc < 0 || !cdc_storage_strlist_add(&out, loc)) {
                rc = cdc_storage_oom(e);
                break;
            }
        }
        char *trunc = xml_take(r.body ? r.body : "", "IsTruncated", NULL);
        free(token);
        token = NULL;
        if (rc == CDC_OK && trunc && strcmp(trunc, "true") == 0)
            token = xml_take(r.body, "NextContinuationToken", NULL);
        free(trunc);
        cdc_httpc_response_free(&r);
        if (rc != CDC_OK || !token)
            break;
    }
    free(token);
    free(bucket);
    free(key);
    if (rc != CDC_OK) {
        cdc_storage_list_free(out.v, out.n);
        return rc;
    }
    *locations = out.v;
    *n = out.n;
    return CDC_OK;
}

cdc_err_t cdc_storage_s3_multipart(cdc_storage_t *s, const char *location, int fd, size_t size,
                                   cdc_error_t *e)
{
    cdc_httpc_response_t r;
    cdc_err_t rc = s3_object(s, "POST", location, "uploads=", NULL, 0, NULL, &r, e);
    if (rc == CDC_OK && r.status / 100 != 2)
        rc = s3_status_err("start multipart upload of", location, &r, e);
    char *upload = rc == CDC_OK ? xml_take(r.body ? r.body : "", "UploadId", NULL) : NULL;
    cdc_httpc_response_free(&r);
    if (rc != CDC_OK)
        return rc;
    if (!upload)
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "s3 returned no UploadId for \"%s\"", location);
    char *eu = uri_encode(upload, false);
    uint8_t *part = malloc(s->part_size);
    cdc_storage_strlist_t etags = {0};
    if (!eu || !part) {
        rc = cdc_storage_oom(e);
        goto abort;
    }
    for (size_t off = 0, no = 1; off < size; no++) {
        size_t want = size - off < s->part_size ? size - off : s->part_size, got = 0;
        while (got < want) {
            ssize_t rd = pread(fd, part + got, want - got, (off_t)(off + got));
            if (rd < 0 && errno == EINTR)
                continue;
            if (rd <= 0) {
                rc = cdc_error_set(e, CDC_ERR_IO, "could not read upload source: %s",
                                   rd < 0 ? strerror(errno) : "unexpected end of file");
                goto abort;
            }
            got += (size_t)rd;
        }
        char q[1024];
        snprintf(q, sizeof(q), "partNumber=%zu&uploadId=%s", no, eu);
        rc = s3_object(s, "PUT", location, q, part, want, NULL, &r, e);
        if (rc == CDC_OK && r.status / 100 != 2)
            rc = s3_status_err("upload part of", location, &r, e);
        if (rc == CDC_OK && !cdc_storage_strlist_add(&etags, strdup(r.etag)))
            rc = cdc_storage_oom(e);
        cdc_httpc_response_free(&r);
        if (rc != CDC_OK)
            goto abort;
        off += want;
    }
    {
        size_t cap = 128 + etags.n * 320, len = 0;
        char *xml = malloc(cap);
        if (!xml) {
            rc = cdc_storage_oom(e);
            goto abort;
        }
        len += (size_t)snprintf(xml + len, cap - len, "<CompleteMultipartUpload>");
        for (size_t i = 0; i < etags.n; i++)
            len += (size_t)snprintf(xml + len, cap - len,
                                    "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
                                    i + 1, etags.v[i]);
        len += (size_t)snprintf(xml + len, cap - len, "</CompleteMultipartUpload>");
        char q[1024];
        snprintf(q, sizeof(q), "uploadId=%s", eu);
        rc = s3_object(s, "POST", location, q, xml, len, NULL, &r, e);
        free(xml);
        if (rc == CDC_OK && (r.status / 100 != 2 || (r.body && strstr(r.body, "<Error>"))))
            rc = s3_status_err("complete multipart upload of", location, &r, e);
        cdc_httpc_response_free(&r);
        if (rc != CDC_OK)
            goto abort;
    }
    free(part);
    free(eu);
    free(upload);
    cdc_storage_list_free(etags.v, etags.n);
    return CDC_OK;
abort:
    if (eu) {
        char q[1024];
        snprintf(q, sizeof(q), "uploadId=%s", eu);
        (void)s3_object(s, "DELETE", location, q, NULL, 0, NULL, &r, NULL);
        cdc_httpc_response_free(&r);
    }
    free(part);
    free(eu);
    free(upload);
    cdc_storage_list_free(etags.v, etags.n);
    return rc;
}

cdc_err_t cdc_storage_s3_get(cdc_storage_t *s, const char *location, uint8_t **data, size_t *len,
                             cdc_error_t *e)
{
    cdc_httpc_response_t r;
    cdc_err_t rc = s3_object(s, "GET", location, NULL, NULL, 0, NULL, &r, e);
    if (rc == CDC_OK && r.status / 100 != 2)
        rc = s3_status_err("read", location, &r, e);
    if (rc != CDC_OK) {
        cdc_httpc_response_free(&r);
        return rc;
    }
    uint8_t *body = r.body ? (uint8_t *)r.body : calloc(1, 1);
    if (!body)
        return cdc_storage_oom(e);
    *data = body;
    *len = r.len;
    return CDC_OK;
}

cdc_err_t cdc_storage_s3_delete(cdc_storage_t *s, const char *location, cdc_error_t *e)
{
    cdc_httpc_response_t r;
    cdc_err_t rc = s3_object(s, "DELETE", location, NULL, NULL, 0, NULL, &r, e);
    if (rc == CDC_OK && r.status / 100 != 2 && r.status != 404)
        rc = s3_status_err("delete", location, &r, e);
    cdc_httpc_response_free(&r);
    return rc;
}
