/*
 * Warehouse storage backends (see storage.h). The local backend makes every write
 * atomic and durable with a temp file + fsync + rename/link + directory fsync. The
 * S3 backend signs requests with libcurl's SigV4 support, retries 5xx/429/timeouts
 * with exponential backoff, and switches to multipart upload for large files.
 */
#include "common/iceberg/storage.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct cdc_storage {
    bool s3;
    char *endpoint;
    char *region;
    char *access_key;
    char *secret_key;
    bool path_style;
    size_t multipart_threshold;
    size_t part_size;
    int max_retries;
    long timeout_ms;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static cdc_err_t oom(cdc_error_t *e)
{
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory in storage");
}

cdc_err_t cdc_storage_open(const char *warehouse, const cdc_storage_config_t *cfg,
                           cdc_storage_t **out, cdc_error_t *e)
{
    cdc_storage_t *s = calloc(1, sizeof(*s));
    if (!s)
        return oom(e);
    s->s3 = warehouse && strncmp(warehouse, "s3://", 5) == 0;
    cdc_storage_config_t dflt = {0};
    if (!cfg)
        cfg = &dflt;
    s->path_style = cfg->path_style;
    s->multipart_threshold = cfg->multipart_threshold ? cfg->multipart_threshold : 16u << 20;
    s->part_size = cfg->part_size ? cfg->part_size : 8u << 20;
    if (s->part_size < (5u << 20))
        s->part_size = 5u << 20;
    s->max_retries = cfg->max_retries == 0 ? 5 : (cfg->max_retries < 0 ? 0 : cfg->max_retries);
    s->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 30000;
    if (s->s3) {
        pthread_once(&curl_once, curl_init_once);
        s->region = strdup(cfg->region ? cfg->region : "us-east-1");
        if (cfg->endpoint) {
            s->endpoint = strdup(cfg->endpoint);
        } else if (s->region &&
                   asprintf(&s->endpoint, "https://s3.%s.amazonaws.com", s->region) < 0) {
            s->endpoint = NULL;
        }
        s->access_key = strdup(cfg->access_key ? cfg->access_key : "");
        s->secret_key = strdup(cfg->secret_key ? cfg->secret_key : "");
        if (!s->region || !s->endpoint || !s->access_key || !s->secret_key) {
            cdc_storage_close(s);
            return oom(e);
        }
        size_t el = strlen(s->endpoint);
        while (el > 0 && s->endpoint[el - 1] == '/')
            s->endpoint[--el] = '\0';
    }
    *out = s;
    return CDC_OK;
}

void cdc_storage_close(cdc_storage_t *s)
{
    if (!s)
        return;
    free(s->endpoint);
    free(s->region);
    free(s->access_key);
    free(s->secret_key);
    free(s);
}

bool cdc_storage_is_local(const cdc_storage_t *s)
{
    return !s->s3;
}

/* ---- local backend --------------------------------------------------------------- */

static const char *local_strip(const char *location)
{
    if (strncmp(location, "file://", 7) == 0)
        return location + 7;
    return location;
}

char *cdc_storage_local_path(const cdc_storage_t *s, const char *location)
{
    if (s->s3 || (strstr(location, "://") != NULL && strncmp(location, "file://", 7) != 0))
        return NULL;
    return strdup(local_strip(location));
}

static cdc_err_t fsync_dir(const char *dir, cdc_error_t *e);

/* fsync of the directory that contains path (path has no trailing slash). */
static cdc_err_t fsync_parent(const char *path, cdc_error_t *e)
{
    const char *slash = strrchr(path, '/');
    char *parent;
    cdc_err_t rc;
    if (slash == NULL)
        return fsync_dir(".", e);
    if (slash == path)
        return fsync_dir("/", e);
    if ((parent = strndup(path, (size_t)(slash - path))) == NULL)
        return oom(e);
    rc = fsync_dir(parent, e);
    free(parent);
    return rc;
}

/*
 * mkdir -p, bottom-up: one mkdir() when the parent exists (the common case: the
 * ancestors are only probed when it does not), and the parent of every directory it
 * creates is fsynced, so that a file made durable in it later stays reachable.
 */
static cdc_err_t mkdirs(const char *dir, cdc_error_t *e)
{
    cdc_err_t rc;
    if (mkdir(dir, 0755) == 0)
        return fsync_parent(dir, e);
    if (errno == EEXIST)
        return CDC_OK;
    if (errno == ENOENT) {
        const char *slash = strrchr(dir, '/');
        char *parent;
        if (slash != NULL && slash != dir) {
            if ((parent = strndup(dir, (size_t)(slash - dir))) == NULL)
                return oom(e);
            rc = mkdirs(parent, e);
            free(parent);
            if (rc != CDC_OK)
                return rc;
            if (mkdir(dir, 0755) == 0)
                return fsync_parent(dir, e);
            if (errno == EEXIST)
                return CDC_OK;
        }
    }
    return cdc_error_set(e, CDC_ERR_IO, "could not create directory \"%s\": %s", dir,
                         strerror(errno));
}

cdc_err_t cdc_storage_local_mkdirs(const char *dir, cdc_error_t *e)
{
    return mkdirs(dir, e);
}

cdc_err_t cdc_storage_local_fsync_dir(const char *dir, cdc_error_t *e)
{
    return fsync_dir(dir, e);
}

static cdc_err_t fsync_dir(const char *dir, cdc_error_t *e)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return cdc_error_set(e, CDC_ERR_IO, "could not open directory \"%s\": %s", dir,
                             strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0)
        return cdc_error_set(e, CDC_ERR_IO, "could not fsync directory \"%s\": %s", dir,
                             strerror(errno));
    return CDC_OK;
}

/* Writes data to a fresh temp file next to path; *tmp (caller frees) names it. */
static cdc_err_t write_temp(const char *path, const void *data, size_t len, char **tmp, char **dir,
                            cdc_error_t *e)
{
    cdc_err_t rc;
    *tmp = NULL;
    *dir = strdup(path);
    if (!*dir)
        return oom(e);
    char *slash = strrchr(*dir, '/');
    if (!slash || slash == *dir) {
        free(*dir);
        *dir = NULL;
        return cdc_error_set(e, CDC_ERR_INVALID, "location \"%s\" is not an absolute path", path);
    }
    *slash = '\0';
    if (asprintf(tmp, "%s.tmp.XXXXXX", path) < 0) {
        *tmp = NULL;
        rc = oom(e);
        goto fail;
    }
    /* The directory usually exists: create it (mkdir -p) only when mkstemp says not. */
    int fd = mkstemp(*tmp);
    if (fd < 0 && errno == ENOENT) {
        if ((rc = mkdirs(*dir, e)) != CDC_OK)
            goto fail;
        memcpy(*tmp + strlen(*tmp) - 6, "XXXXXX", 6);
        fd = mkstemp(*tmp);
    }
    if (fd < 0) {
        rc = cdc_error_set(e, CDC_ERR_IO, "could not create \"%s\": %s", *tmp, strerror(errno));
        goto fail;
    }
    /* mkstemp creates 0600; table files are read by other users' engines (Spark, Trino) */
    (void)fchmod(fd, 0644);
    const uint8_t *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = cdc_error_set(e, CDC_ERR_IO, "could not write \"%s\": %s", *tmp, strerror(errno));
            close(fd);
            unlink(*tmp);
            goto fail;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        rc = cdc_error_set(e, CDC_ERR_IO, "could not fsync \"%s\": %s", *tmp, strerror(errno));
        close(fd);
        unlink(*tmp);
        goto fail;
    }
    close(fd);
    return CDC_OK;
fail:
    free(*tmp);
    free(*dir);
    *tmp = *dir = NULL;
    return rc;
}

static cdc_err_t local_put(const char *path, const void *data, size_t len, bool if_absent,
                           cdc_error_t *e)
{
    char *tmp, *dir;
    cdc_err_t rc = write_temp(path, data, len, &tmp, &dir, e);
    if (rc != CDC_OK)
        return rc;
    if (if_absent) {
        /* link() never replaces an existing name: the atomic create-if-absent */
        if (link(tmp, path) != 0) {
            int err = errno;
            unlink(tmp);
            if (err == EEXIST)
                rc = cdc_error_set(e, CDC_ERR_EXISTS, "\"%s\" already exists", path);
            else
                rc = cdc_error_set(e, CDC_ERR_IO, "could not create \"%s\": %s", path,
                                   strerror(err));
            goto done;
        }
        unlink(tmp);
    } else if (rename(tmp, path) != 0) {
        rc = cdc_error_set(e, CDC_ERR_IO, "could not rename \"%s\" to \"%s\": %s", tmp, path,
                           strerror(errno));
        unlink(tmp);
        goto done;
    }
    rc = fsync_dir(dir, e);
done:
    free(tmp);
    free(dir);
    return rc;
}

static cdc_err_t read_file(const char *path, uint8_t **data, size_t *len, cdc_error_t *e)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT)
            return cdc_error_set(e, CDC_ERR_NOT_FOUND, "\"%s\" does not exist", path);
        return cdc_error_set(e, CDC_ERR_IO, "could not open \"%s\": %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return cdc_error_set(e, CDC_ERR_IO, "could not stat \"%s\": %s", path, strerror(errno));
    }
    size_t n = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return oom(e);
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            cdc_err_t rc = cdc_error_set(e, CDC_ERR_IO, "could not read \"%s\": %s", path,
                                         r < 0 ? strerror(errno) : "unexpected end of file");
            free(buf);
            close(fd);
            return rc;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return CDC_OK;
}

typedef struct strlist {
    char **v;
    size_t n, cap;
} strlist_t;

static bool strlist_add(strlist_t *l, char *s)
{
    if (!s)
        return false;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char **v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            free(s);
            return false;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return true;
}

static cdc_err_t walk(const char *dir, const char *prefix_path, const char *scheme, strlist_t *out,
                      cdc_error_t *e)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT || errno == ENOTDIR)
            return CDC_OK;
        return cdc_error_set(e, CDC_ERR_IO, "could not open directory \"%s\": %s", dir,
                             strerror(errno));
    }
    cdc_err_t rc = CDC_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *path;
        if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
            rc = oom(e);
            break;
        }
        struct stat st;
        if (lstat(path, &st) != 0) {
            free(path);
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            /* descend only where the prefix can still match */
            size_t pl = strlen(path), ql = strlen(prefix_path);
            if (strncmp(path, prefix_path, pl < ql ? pl : ql) == 0)
                rc = walk(path, prefix_path, scheme, out, e);
            free(path);
            if (rc != CDC_OK)
                break;
        } else if (S_ISREG(st.st_mode) && strncmp(path, prefix_path, strlen(prefix_path)) == 0) {
            char *loc;
            if (asprintf(&loc, "%s%s", scheme, path) < 0 || !strlist_add(out, loc)) {
                free(path);
                rc = oom(e);
                break;
            }
            free(path);
        } else {
            free(path);
        }
    }
    closedir(d);
    return rc;
}

static cdc_err_t local_list(const char *prefix, char ***locations, size_t *n, cdc_error_t *e)
{
    const char *scheme = strncmp(prefix, "file://", 7) == 0 ? "file://" : "";
    const char *pp = local_strip(prefix);
    char *dir = strdup(pp);
    if (!dir)
        return oom(e);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    strlist_t out = {0};
    cdc_err_t rc = walk(dir, pp, scheme, &out, e);
    free(dir);
    if (rc != CDC_OK) {
        cdc_storage_list_free(out.v, out.n);
        return rc;
    }
    *locations = out.v;
    *n = out.n;
    return CDC_OK;
}

/* ---- S3 backend ------------------------------------------------------------------- */

typedef struct s3_resp {
    long status;
    char *body;
    size_t len, cap;
    char etag[256];
    int64_t content_length;
    bool oom;
} s3_resp_t;

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    s3_resp_t *r = ud;
    size_t n = sz * nm;
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b) {
            r->oom = true;
            return 0;
        }
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, p, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    s3_resp_t *r = ud;
    size_t n = sz * nm;
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
        return oom(e);
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
 * NULL. extra: additional header lines (NULL-terminated array) or NULL.
 */
static cdc_err_t s3_request(cdc_storage_t *s, const char *method, const char *url, const void *body,
                            size_t len, const char *const *extra, s3_resp_t *resp, cdc_error_t *e)
{
    char sigv4[128], userpwd[512];
    snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", s->region);
    snprintf(userpwd, sizeof(userpwd), "%s:%s", s->access_key, s->secret_key);
    cdc_err_t rc = CDC_OK;
    for (int attempt = 0;; attempt++) {
        memset(resp, 0, sizeof(*resp));
        CURL *c = curl_easy_init();
        if (!c)
            return oom(e);
        struct curl_slist *hdrs = NULL;
        hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
        hdrs = curl_slist_append(hdrs, "Expect:");
        /* curl < 8 does not add the payload hash S3 requires; SigV4 then signs this value */
        hdrs = curl_slist_append(hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        for (size_t i = 0; extra && extra[i]; i++)
            hdrs = curl_slist_append(hdrs, extra[i]);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
        curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, s->timeout_ms);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                         s->timeout_ms < 10000 ? s->timeout_ms : 10000);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
        if (strcmp(method, "HEAD") == 0) {
            curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        } else if (strcmp(method, "GET") != 0) {
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
            if (strcmp(method, "DELETE") != 0) {
                /* POSTFIELDS lets SigV4 hash the payload */
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
            }
        }
        CURLcode cc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(c);
        bool retry;
        if (cc != CURLE_OK) {
            retry = true;
            rc = cdc_error_set_retriable(
                e, cc == CURLE_OPERATION_TIMEDOUT ? CDC_ERR_TIMEOUT : CDC_ERR_UNAVAILABLE, true,
                "s3 %s %s failed: %s", method, url, curl_easy_strerror(cc));
        } else if (resp->status >= 500 || resp->status == 429) {
            retry = true;
            rc =
                cdc_error_set_retriable(e, CDC_ERR_UNAVAILABLE, true,
                                        "s3 %s %s failed with HTTP %ld", method, url, resp->status);
        } else {
            return resp->oom ? oom(e) : CDC_OK;
        }
        if (!retry || attempt >= s->max_retries)
            return rc;
        free(resp->body);
        sleep_ms((100L << (attempt < 6 ? attempt : 6)) + (long)(rand() % 50));
    }
}

static cdc_err_t s3_status_err(const char *what, const char *location, const s3_resp_t *r,
                               cdc_error_t *e)
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

/* Generic "request on one object" helper. */
static cdc_err_t s3_object(cdc_storage_t *s, const char *method, const char *location,
                           const char *query, const void *body, size_t len,
                           const char *const *extra, s3_resp_t *resp, cdc_error_t *e)
{
    char *bucket, *key;
    cdc_err_t rc = s3_split(location, &bucket, &key, e);
    if (rc != CDC_OK)
        return rc;
    char *url = s3_url(s, bucket, key, query);
    free(bucket);
    free(key);
    if (!url)
        return oom(e);
    rc = s3_request(s, method, url, body, len, extra, resp, e);
    free(url);
    return rc;
}

static cdc_err_t s3_head(cdc_storage_t *s, const char *location, bool *exists, int64_t *size,
                         cdc_error_t *e)
{
    s3_resp_t r;
    cdc_err_t rc = s3_object(s, "HEAD", location, NULL, NULL, 0, NULL, &r, e);
    free(r.body);
    if (rc != CDC_OK)
        return rc;
    if (r.status == 404) {
        *exists = false;
        return CDC_OK;
    }
    if (r.status / 100 != 2)
        return s3_status_err("stat", location, &r, e);
    *exists = true;
    if (size)
        *size = r.content_length;
    return CDC_OK;
}

static cdc_err_t s3_put(cdc_storage_t *s, const char *location, const void *data, size_t len,
                        bool if_absent, cdc_error_t *e)
{
    s3_resp_t r;
    const char *extra[] = {"If-None-Match: *", NULL};
    cdc_err_t rc;
    if (if_absent) {
        bool exists = false;
        if ((rc = s3_head(s, location, &exists, NULL, e)) != CDC_OK)
            return rc;
        if (exists)
            return cdc_error_set(e, CDC_ERR_EXISTS, "\"%s\" already exists", location);
    }
    rc = s3_object(s, "PUT", location, NULL, data, len, if_absent ? extra : NULL, &r, e);
    if (rc != CDC_OK) {
        free(r.body);
        return rc;
    }
    if (r.status == 412 || (if_absent && r.status == 409)) {
        free(r.body);
        return cdc_error_set(e, CDC_ERR_EXISTS, "\"%s\" already exists", location);
    }
    if (r.status / 100 != 2) {
        rc = s3_status_err("write", location, &r, e);
        free(r.body);
        return rc;
    }
    free(r.body);
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

static cdc_err_t s3_list(cdc_storage_t *s, const char *prefix, char ***locations, size_t *n,
                         cdc_error_t *e)
{
    char *bucket, *key;
    cdc_err_t rc = s3_split(prefix, &bucket, &key, e);
    if (rc != CDC_OK)
        return rc;
    strlist_t out = {0};
    char *token = NULL;
    for (;;) {
        char *ep = uri_encode(key, false), *et = token ? uri_encode(token, false) : NULL, *q = NULL,
             *url = NULL;
        if (!ep || (token && !et) ||
            asprintf(&q, "%s%s%slist-type=2&prefix=%s", token ? "continuation-token=" : "",
                     token ? et : "", token ? "&" : "", ep) < 0) {
            free(ep);
            free(et);
            rc = oom(e);
            break;
        }
        free(ep);
        free(et);
        url = s3_url(s, bucket, "", q);
        free(q);
        if (!url) {
            rc = oom(e);
            break;
        }
        s3_resp_t r;
        rc = s3_request(s, "GET", url, NULL, 0, NULL, &r, e);
        free(url);
        if (rc == CDC_OK && r.status / 100 != 2)
            rc = s3_status_err("list", prefix, &r, e);
        if (rc != CDC_OK) {
            free(r.body);
            break;
        }
        const char *pos = r.body ? r.body : "";
        char *k;
        while ((k = xml_take(pos, "Key", &pos)) != NULL) {
            char *loc;
            int arc = asprintf(&loc, "s3://%s/%s", bucket, k);
            free(k);
            if (arc < 0 || !strlist_add(&out, loc)) {
                rc = oom(e);
                break;
            }
        }
        char *trunc = xml_take(r.body ? r.body : "", "IsTruncated", NULL);
        free(token);
        token = NULL;
        if (rc == CDC_OK && trunc && strcmp(trunc, "true") == 0)
            token = xml_take(r.body, "NextContinuationToken", NULL);
        free(trunc);
        free(r.body);
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

static cdc_err_t s3_multipart(cdc_storage_t *s, const char *location, int fd, size_t size,
                              cdc_error_t *e)
{
    s3_resp_t r;
    cdc_err_t rc = s3_object(s, "POST", location, "uploads=", NULL, 0, NULL, &r, e);
    if (rc == CDC_OK && r.status / 100 != 2)
        rc = s3_status_err("start multipart upload of", location, &r, e);
    char *upload = rc == CDC_OK ? xml_take(r.body ? r.body : "", "UploadId", NULL) : NULL;
    free(r.body);
    if (rc != CDC_OK)
        return rc;
    if (!upload)
        return cdc_error_set(e, CDC_ERR_PROTOCOL, "s3 returned no UploadId for \"%s\"", location);
    char *eu = uri_encode(upload, false);
    uint8_t *part = malloc(s->part_size);
    strlist_t etags = {0};
    if (!eu || !part) {
        rc = oom(e);
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
        if (rc == CDC_OK && !strlist_add(&etags, strdup(r.etag)))
            rc = oom(e);
        free(r.body);
        if (rc != CDC_OK)
            goto abort;
        off += want;
    }
    {
        size_t cap = 128 + etags.n * 320, len = 0;
        char *xml = malloc(cap);
        if (!xml) {
            rc = oom(e);
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
        free(r.body);
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
        if (s3_object(s, "DELETE", location, q, NULL, 0, NULL, &r, NULL) == CDC_OK)
            free(r.body);
    }
    free(part);
    free(eu);
    free(upload);
    cdc_storage_list_free(etags.v, etags.n);
    return rc;
}

/* ---- public entry points ------------------------------------------------------------ */

static bool is_local_location(const char *location)
{
    return strstr(location, "://") == NULL || strncmp(location, "file://", 7) == 0;
}

static cdc_err_t check_scheme(const cdc_storage_t *s, const char *location, cdc_error_t *e)
{
    if (!location || !*location)
        return cdc_error_set(e, CDC_ERR_INVALID, "empty storage location");
    if (s->s3 == is_local_location(location))
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "location \"%s\" does not belong to this %s warehouse", location,
                             s->s3 ? "s3" : "local");
    return CDC_OK;
}

cdc_err_t cdc_storage_put(cdc_storage_t *s, const char *location, const void *data, size_t len,
                          cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (s->s3)
        return s3_put(s, location, data, len, false, e);
    return local_put(local_strip(location), data, len, false, e);
}

cdc_err_t cdc_storage_put_if_absent(cdc_storage_t *s, const char *location, const void *data,
                                    size_t len, cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (s->s3)
        return s3_put(s, location, data, len, true, e);
    return local_put(local_strip(location), data, len, true, e);
}

cdc_err_t cdc_storage_put_file(cdc_storage_t *s, const char *location, const char *local_path,
                               cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (s->s3) {
        int fd = open(local_path, O_RDONLY);
        if (fd < 0)
            return cdc_error_set(e, CDC_ERR_IO, "could not open \"%s\": %s", local_path,
                                 strerror(errno));
        struct stat st;
        if (fstat(fd, &st) != 0) {
            close(fd);
            return cdc_error_set(e, CDC_ERR_IO, "could not stat \"%s\": %s", local_path,
                                 strerror(errno));
        }
        if ((size_t)st.st_size >= s->multipart_threshold) {
            rc = s3_multipart(s, location, fd, (size_t)st.st_size, e);
            close(fd);
            return rc;
        }
        close(fd);
    }
    uint8_t *data;
    size_t len;
    if ((rc = read_file(local_path, &data, &len, e)) != CDC_OK)
        return rc;
    rc = s->s3 ? s3_put(s, location, data, len, false, e)
               : local_put(local_strip(location), data, len, false, e);
    free(data);
    return rc;
}

cdc_err_t cdc_storage_get(cdc_storage_t *s, const char *location, uint8_t **data, size_t *len,
                          cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (!s->s3)
        return read_file(local_strip(location), data, len, e);
    s3_resp_t r;
    rc = s3_object(s, "GET", location, NULL, NULL, 0, NULL, &r, e);
    if (rc == CDC_OK && r.status / 100 != 2)
        rc = s3_status_err("read", location, &r, e);
    if (rc != CDC_OK) {
        free(r.body);
        return rc;
    }
    uint8_t *body = r.body ? (uint8_t *)r.body : calloc(1, 1);
    if (!body)
        return oom(e);
    *data = body;
    *len = r.len;
    return CDC_OK;
}

cdc_err_t cdc_storage_delete(cdc_storage_t *s, const char *location, cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (!s->s3) {
        if (unlink(local_strip(location)) != 0 && errno != ENOENT)
            return cdc_error_set(e, CDC_ERR_IO, "could not delete \"%s\": %s", location,
                                 strerror(errno));
        return CDC_OK;
    }
    s3_resp_t r;
    rc = s3_object(s, "DELETE", location, NULL, NULL, 0, NULL, &r, e);
    if (rc == CDC_OK && r.status / 100 != 2 && r.status != 404)
        rc = s3_status_err("delete", location, &r, e);
    free(r.body);
    return rc;
}

cdc_err_t cdc_storage_exists(cdc_storage_t *s, const char *location, bool *exists, cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (s->s3)
        return s3_head(s, location, exists, NULL, e);
    struct stat st;
    if (stat(local_strip(location), &st) != 0) {
        if (errno != ENOENT)
            return cdc_error_set(e, CDC_ERR_IO, "could not stat \"%s\": %s", location,
                                 strerror(errno));
        *exists = false;
    } else {
        *exists = true;
    }
    return CDC_OK;
}

cdc_err_t cdc_storage_size(cdc_storage_t *s, const char *location, int64_t *size, cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (s->s3) {
        bool exists = false;
        rc = s3_head(s, location, &exists, size, e);
        if (rc == CDC_OK && !exists)
            rc = cdc_error_set(e, CDC_ERR_NOT_FOUND, "\"%s\" does not exist", location);
        return rc;
    }
    struct stat st;
    if (stat(local_strip(location), &st) != 0)
        return cdc_error_set(e, errno == ENOENT ? CDC_ERR_NOT_FOUND : CDC_ERR_IO,
                             "could not stat \"%s\": %s", location, strerror(errno));
    *size = (int64_t)st.st_size;
    return CDC_OK;
}

cdc_err_t cdc_storage_list(cdc_storage_t *s, const char *prefix, char ***locations, size_t *n,
                           cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, prefix, e);
    if (rc != CDC_OK)
        return rc;
    *locations = NULL;
    *n = 0;
    return s->s3 ? s3_list(s, prefix, locations, n, e) : local_list(prefix, locations, n, e);
}

void cdc_storage_list_free(char **locations, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(locations[i]);
    free(locations);
}
