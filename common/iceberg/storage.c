/*
 * Warehouse storage (see storage.h): the handle, the public entry points that pick a
 * backend by the location's scheme, and the local backend, which makes every write
 * atomic and durable with a temp file + fsync + rename/link + directory fsync. The S3
 * backend is in storage_s3.c (storage_int.h joins the two).
 *
 * A call circle of two files (docs/development.md, "Call circles"): storage.c hands s3://
 * paths to the S3 backend (storage_s3.c), which uses storage.c's shared helpers (out-of-
 * memory errors, string lists).
 */
#include "common/iceberg/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/iceberg/storage_int.h"

cdc_err_t cdc_storage_oom(cdc_error_t *e)
{
    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory in storage");
}

cdc_err_t cdc_storage_open(const char *warehouse, const cdc_storage_config_t *cfg,
                           cdc_storage_t **out, cdc_error_t *e)
{
    cdc_storage_t *s = calloc(1, sizeof(*s));
    if (!s)
        return cdc_storage_oom(e);
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
        cdc_err_t rc = cdc_storage_s3_init(s, cfg, e);
        if (rc != CDC_OK) {
            cdc_storage_close(s);
            return rc;
        }
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
        return cdc_storage_oom(e);
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
                return cdc_storage_oom(e);
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
        return cdc_storage_oom(e);
    char *slash = strrchr(*dir, '/');
    if (!slash || slash == *dir) {
        free(*dir);
        *dir = NULL;
        return cdc_error_set(e, CDC_ERR_INVALID, "location \"%s\" is not an absolute path", path);
    }
    *slash = '\0';
    if (asprintf(tmp, "%s.tmp.XXXXXX", path) < 0) {
        *tmp = NULL;
        rc = cdc_storage_oom(e);
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

/* sync_dir false leaves the directory fsync to a later put in the same directory
 * (cdc_storage_put_deferred). */
static cdc_err_t local_put(const char *path, const void *data, size_t len, bool if_absent,
                           bool sync_dir, cdc_error_t *e)
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
    rc = sync_dir ? fsync_dir(dir, e) : CDC_OK;
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
        return cdc_storage_oom(e);
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

bool cdc_storage_strlist_add(cdc_storage_strlist_t *l, char *s)
{
    if (!s)
        return false;
    if (cdc_array_reserve(l->v, l->cap, l->n + 1, 32) != CDC_OK) {
        free(s);
        return false;
    }
    l->v[l->n++] = s;
    return true;
}

static cdc_err_t walk(const char *dir, const char *prefix_path, const char *scheme,
                      cdc_storage_strlist_t *out, cdc_error_t *e)
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
            rc = cdc_storage_oom(e);
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
            if (asprintf(&loc, "%s%s", scheme, path) < 0 || !cdc_storage_strlist_add(out, loc)) {
                free(path);
                rc = cdc_storage_oom(e);
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
        return cdc_storage_oom(e);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    cdc_storage_strlist_t out = {0};
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

/* A put on the location's backend (its scheme already checked). */
static cdc_err_t put(cdc_storage_t *s, const char *location, const void *data, size_t len,
                     bool if_absent, bool sync_dir, cdc_error_t *e)
{
    if (s->s3)
        return cdc_storage_s3_put(s, location, data, len, if_absent, e);
    return local_put(local_strip(location), data, len, if_absent, sync_dir, e);
}

cdc_err_t cdc_storage_put(cdc_storage_t *s, const char *location, const void *data, size_t len,
                          cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    return rc != CDC_OK ? rc : put(s, location, data, len, false, true, e);
}

cdc_err_t cdc_storage_put_deferred(cdc_storage_t *s, const char *location, const void *data,
                                   size_t len, cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    return rc != CDC_OK ? rc : put(s, location, data, len, false, false, e);
}

cdc_err_t cdc_storage_put_if_absent(cdc_storage_t *s, const char *location, const void *data,
                                    size_t len, cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    return rc != CDC_OK ? rc : put(s, location, data, len, true, true, e);
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
            rc = cdc_storage_s3_multipart(s, location, fd, (size_t)st.st_size, e);
            close(fd);
            return rc;
        }
        close(fd);
    }
    uint8_t *data;
    size_t len;
    if ((rc = read_file(local_path, &data, &len, e)) != CDC_OK)
        return rc;
    rc = put(s, location, data, len, false, true, e);
    free(data);
    return rc;
}

cdc_err_t cdc_storage_get(cdc_storage_t *s, const char *location, uint8_t **data, size_t *len,
                          cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (s->s3)
        return cdc_storage_s3_get(s, location, data, len, e);
    return read_file(local_strip(location), data, len, e);
}

cdc_err_t cdc_storage_delete(cdc_storage_t *s, const char *location, cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (s->s3)
        return cdc_storage_s3_delete(s, location, e);
    if (unlink(local_strip(location)) != 0 && errno != ENOENT)
        return cdc_error_set(e, CDC_ERR_IO, "could not delete \"%s\": %s", location,
                             strerror(errno));
    return CDC_OK;
}

cdc_err_t cdc_storage_exists(cdc_storage_t *s, const char *location, bool *exists, cdc_error_t *e)
{
    cdc_err_t rc = check_scheme(s, location, e);
    if (rc != CDC_OK)
        return rc;
    if (s->s3)
        return cdc_storage_s3_head(s, location, exists, NULL, e);
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
        rc = cdc_storage_s3_head(s, location, &exists, size, e);
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
    return s->s3 ? cdc_storage_s3_list(s, prefix, locations, n, e)
                 : local_list(prefix, locations, n, e);
}

void cdc_storage_list_free(char **locations, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(locations[i]);
    free(locations);
}
