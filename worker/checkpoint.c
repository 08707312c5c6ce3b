/*
 * Incremental state checkpoints in the warehouse (see checkpoint.h for the layout).
 * Only this module moves state files between the local disk and the shared store.
 */
#include "worker/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/state.h"

static void rand_hex(char *out, size_t nhex)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t b[32];
    size_t n = (nhex + 1) / 2;
    if (getrandom(b, n, 0) != (ssize_t)n) {
        uint64_t x =
            (uint64_t)cdc_clock_wall_ms() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < n; i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
            b[i] = (uint8_t)(x >> 56);
    }
    for (size_t i = 0; i < nhex; i++)
        out[i] = hex[(b[i / 2] >> ((i % 2) ? 0 : 4)) & 15];
    out[nhex] = '\0';
}

static void files_free(cdc_ckpt_file_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(f[i].name);
        free(f[i].location);
    }
    free(f);
}

static void entry_free(cdc_ckpt_entry_t *en)
{
    free(en->handle);
    free(en->local_dir);
    files_free(en->files, en->nfiles);
    memset(en, 0, sizeof(*en));
}

cdc_err_t cdc_ckpt_init(cdc_ckpt_t *c, cdc_storage_t *storage, const char *warehouse,
                        const char *job, uint32_t partition, const char *local_root, cdc_error_t *e)
{
    size_t wl = strlen(warehouse);
    memset(c, 0, sizeof(*c));
    c->storage = storage;
    c->partition = partition;
    if (asprintf(&c->root, "%.*s/_checkpoints/%s/p%u",
                 (int)(wl && warehouse[wl - 1] == '/' ? wl - 1 : wl), warehouse, job,
                 partition) < 0 ||
        (c->local_root = strdup(local_root)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (mkdir(local_root, 0755) != 0 && errno != EEXIST)
        return cdc_error_set(e, CDC_ERR_IO, "could not create directory \"%s\": %s", local_root,
                             strerror(errno));
    cdc_ckpt_new_lineage(c);
    return CDC_OK;
}

void cdc_ckpt_free(cdc_ckpt_t *c)
{
    for (size_t i = 0; i < c->nentries; i++)
        entry_free(&c->entries[i]);
    free(c->entries);
    free(c->root);
    free(c->local_root);
    memset(c, 0, sizeof(*c));
}

void cdc_ckpt_new_lineage(cdc_ckpt_t *c)
{
    rand_hex(c->lineage, 16);
}

/* Location of an immutable file already in the store for the current lineage: the
 * latest entry lists every file the store had at its checkpoint. */
static const cdc_ckpt_file_t *known_file(const cdc_ckpt_t *c, const char *name, int64_t size)
{
    if (c->nentries == 0)
        return NULL;
    const cdc_ckpt_entry_t *en = &c->entries[c->nentries - 1];
    for (size_t i = 0; i < en->nfiles; i++)
        if (strcmp(en->files[i].name, name) == 0 && en->files[i].size == size)
            return &en->files[i];
    return NULL;
}

static cdc_ckpt_entry_t *add_entry(cdc_ckpt_t *c)
{
    if (cdc_array_resize(c->entries, c->nentries + 1) != CDC_OK)
        return NULL;
    memset(&c->entries[c->nentries], 0, sizeof(c->entries[0]));
    return &c->entries[c->nentries++];
}

static char *manifest_json(const cdc_ckpt_t *c, const cdc_ckpt_entry_t *en)
{
    json_t *root = json_object(), *files = json_array();
    char *out;
    for (size_t i = 0; i < en->nfiles; i++)
        json_array_append_new(files, json_pack("{s:s,s:s,s:I}", "name", en->files[i].name,
                                               "location", en->files[i].location, "size",
                                               (json_int_t)en->files[i].size));
    json_object_set_new(root, "format", json_integer(1));
    json_object_set_new(root, "partition", json_integer(c->partition));
    json_object_set_new(root, "epoch", json_integer((json_int_t)en->epoch));
    json_object_set_new(root, "lineage", json_string(c->lineage));
    json_object_set_new(root, "files", files);
    out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return out;
}

/* Directories whose new entries must be made durable before the manifest is written. */
typedef struct dir_set {
    char *v[8];
    size_t n;
} dir_set_t;

/* Adds the directory of path (false: out of memory or too many directories). */
static bool dir_set_add(dir_set_t *s, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) : 0;
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->v[i]) == len && strncmp(s->v[i], path, len) == 0)
            return true;
    if (len == 0 || s->n == sizeof(s->v) / sizeof(s->v[0]) ||
        (s->v[s->n] = strndup(path, len)) == NULL)
        return false;
    s->n++;
    return true;
}

static void dir_set_free(dir_set_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    s->n = 0;
}

/*
 * Puts one file of a local checkpoint directory at location. For a local warehouse on
 * the same file system a table file is hard-linked instead of copied: nothing ever
 * changes a table file in place, and it was fsynced when written, so only the new
 * directory entry needs an fsync: its directory goes into dirs, which the caller fsyncs
 * once per upload before the manifest refers to the file. The directory is created
 * (mkdir -p) only when the link says it is missing. The descriptor files and the WAL
 * (small) are copied: a link would share them with the worker's disk, and a write there
 * (a crash, a corrupting disk) would corrupt the checkpoint it must be restored from
 * (docs/operations.md, "Disk faults"). Anything else (S3, another file system) is copied
 * durably.
 */
static cdc_err_t put_state_file(cdc_ckpt_t *c, const char *location, const char *path,
                                dir_set_t *dirs, cdc_error_t *e)
{
    const char *base = strrchr(path, '/');
    char *local = cdc_state_file_is_immutable(base != NULL ? base + 1 : path)
                      ? cdc_storage_local_path(c->storage, location)
                      : NULL;
    if (local != NULL) {
        int rv = link(path, local);
        if (rv != 0 && errno == ENOENT) {
            char *slash = strrchr(local, '/');
            cdc_error_t me;
            if (slash != NULL && slash != local) {
                *slash = '\0';
                bool made = cdc_storage_local_mkdirs(local, &me) == CDC_OK;
                *slash = '/';
                if (made)
                    rv = link(path, local);
            }
        }
        /* (EEXIST: a retried upload; names carry the lineage or the epoch and a random
         * id, so it is this file) */
        if ((rv == 0 || errno == EEXIST) && dir_set_add(dirs, local)) {
            free(local);
            return CDC_OK;
        }
        if (rv == 0)
            unlink(local);
    }
    free(local);
    return cdc_storage_put_file(c->storage, location, path, e);
}

cdc_err_t cdc_ckpt_upload(cdc_ckpt_t *c, uint64_t epoch, const char *local_dir, const char **handle,
                          cdc_ckpt_stats_t *stats, cdc_error_t *e)
{
    DIR *d = opendir(local_dir);
    struct dirent *de;
    cdc_ckpt_file_t *files = NULL;
    size_t nfiles = 0, cap = 0;
    char rnd[9], path[1024];
    cdc_ckpt_stats_t st = {0};
    double t0 = (cdc_clock_mono_s() * 1e3);
    cdc_err_t rc = CDC_OK;
    char *json = NULL, *handle_loc = NULL;
    cdc_ckpt_entry_t *en;
    dir_set_t dirs = {0};

    if (d == NULL)
        return cdc_error_set(e, CDC_ERR_IO, "could not open checkpoint directory \"%s\": %s",
                             local_dir, strerror(errno));
    rand_hex(rnd, 8);
    while ((de = readdir(d)) != NULL) {
        struct stat sb;
        cdc_ckpt_file_t *f;
        const cdc_ckpt_file_t *known;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", local_dir, de->d_name);
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (cdc_array_reserve(files, cap, nfiles + 1, 32) != CDC_OK) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        f = &files[nfiles];
        memset(f, 0, sizeof(*f));
        f->size = (int64_t)sb.st_size;
        if ((f->name = strdup(de->d_name)) == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        nfiles++;
        st.files_total++;
        st.bytes_total += (uint64_t)sb.st_size;
        known = cdc_state_file_is_immutable(de->d_name) ? known_file(c, de->d_name, f->size) : NULL;
        if (known != NULL) {
            f->location = strdup(known->location);
            if (f->location == NULL) {
                rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                goto done;
            }
            continue;
        }
        if (cdc_state_file_is_immutable(de->d_name)) {
            if (asprintf(&f->location, "%s/sst/%s-%s", c->root, c->lineage, de->d_name) < 0)
                f->location = NULL;
        } else if (asprintf(&f->location, "%s/meta/%" PRIu64 "-%s-%s", c->root, epoch, rnd,
                            de->d_name) < 0) {
            f->location = NULL;
        }
        if (f->location == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        rc = put_state_file(c, f->location, path, &dirs, e);
        if (rc != CDC_OK) {
            cdc_error_prefix(e, "could not upload state file \"%s\" of partition %u", path,
                             c->partition);
            goto done;
        }
        st.files_uploaded++;
        st.bytes_uploaded += (uint64_t)sb.st_size;
    }
    /* The linked files' directory entries, durable before the manifest names them. */
    for (size_t i = 0; i < dirs.n; i++)
        if ((rc = cdc_storage_local_fsync_dir(dirs.v[i], e)) != CDC_OK) {
            e->retriable = true;
            goto done;
        }
    if (asprintf(&handle_loc, "%s/m-%020" PRIu64 "-%s.json", c->root, epoch, rnd) < 0) {
        handle_loc = NULL;
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    en = add_entry(c);
    if (en == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    en->epoch = epoch;
    en->files = files;
    en->nfiles = nfiles;
    en->handle = handle_loc;
    en->local_dir = strdup(local_dir);
    files = NULL;
    nfiles = 0;
    handle_loc = NULL;
    json = manifest_json(c, en);
    if (json == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    } else {
        rc = cdc_storage_put(c->storage, en->handle, json, strlen(json), e);
        st.bytes_uploaded += strlen(json);
    }
    if (rc != CDC_OK) {
        /* Forget the entry: its manifest is not durable, so it is no checkpoint. */
        entry_free(en);
        c->nentries--;
        goto done;
    }
    *handle = en->handle;
    c->bytes_uploaded += st.bytes_uploaded;
    c->files_uploaded += st.files_uploaded;
done:
    closedir(d);
    dir_set_free(&dirs);
    files_free(files, nfiles);
    free(handle_loc);
    free(json);
    st.ms = (cdc_clock_mono_s() * 1e3) - t0;
    if (stats != NULL)
        *stats = st;
    return rc;
}

static cdc_err_t copy_file(const char *from, const char *to, bool link_ok, cdc_error_t *e)
{
    char buf[65536];
    ssize_t n;
    int in, out;
    if (link_ok && link(from, to) == 0)
        return CDC_OK;
    in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return cdc_error_set(e, CDC_ERR_IO, "could not open \"%s\": %s", from, strerror(errno));
    out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        close(in);
        return cdc_error_set(e, CDC_ERR_IO, "could not create \"%s\": %s", to, strerror(errno));
    }
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    close(in);
    if (n < 0 || fsync(out) != 0) {
        close(out);
        return cdc_error_set(e, CDC_ERR_IO, "could not copy \"%s\" to \"%s\": %s", from, to,
                             strerror(errno));
    }
    close(out);
    return CDC_OK;
}

static cdc_err_t write_file(const char *path, const uint8_t *data, size_t len, cdc_error_t *e)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    size_t off = 0;
    if (fd < 0)
        return cdc_error_set(e, CDC_ERR_IO, "could not create \"%s\": %s", path, strerror(errno));
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n <= 0) {
            close(fd);
            return cdc_error_set(e, CDC_ERR_IO, "could not write \"%s\": %s", path,
                                 strerror(errno));
        }
        off += (size_t)n;
    }
    close(fd);
    return CDC_OK;
}

static cdc_err_t parse_manifest(const uint8_t *data, size_t len, const char *handle,
                                cdc_ckpt_entry_t *en, cdc_error_t *e)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)data, len, 0, &je), *files;
    if (root == NULL)
        return cdc_error_set(e, CDC_ERR_CORRUPT, "state checkpoint manifest \"%s\" is not JSON: %s",
                             handle, je.text);
    files = json_object_get(root, "files");
    en->epoch = (uint64_t)json_integer_value(json_object_get(root, "epoch"));
    en->nfiles = json_array_size(files);
    en->files = calloc(en->nfiles ? en->nfiles : 1, sizeof(cdc_ckpt_file_t));
    if (en->files == NULL) {
        json_decref(root);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < en->nfiles; i++) {
        json_t *f = json_array_get(files, i);
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *loc = json_string_value(json_object_get(f, "location"));
        if (name == NULL || loc == NULL || strchr(name, '/') != NULL) {
            json_decref(root);
            return cdc_error_set(e, CDC_ERR_CORRUPT,
                                 "state checkpoint manifest \"%s\" has a bad file entry %zu",
                                 handle, i);
        }
        en->files[i].name = strdup(name);
        en->files[i].location = strdup(loc);
        en->files[i].size = json_integer_value(json_object_get(f, "size"));
    }
    json_decref(root);
    return CDC_OK;
}

cdc_err_t cdc_ckpt_restore(cdc_ckpt_t *c, const char *handle, const char *dest, bool *reused,
                           cdc_error_t *e)
{
    cdc_ckpt_entry_t tmp = {0}, *en;
    cdc_err_t rc;
    uint8_t *data = NULL;
    size_t len = 0;
    char from[1024], to[1024];

    *reused = false;
    if (mkdir(dest, 0755) != 0)
        return cdc_error_set(e, CDC_ERR_IO, "could not create directory \"%s\": %s", dest,
                             strerror(errno));
    for (size_t i = c->nentries; i-- > 0;) {
        struct stat sb;
        en = &c->entries[i];
        if (strcmp(en->handle, handle) != 0 || en->local_dir == NULL ||
            stat(en->local_dir, &sb) != 0)
            continue;
        /* Local copy of exactly this checkpoint: hard-link the immutable files. */
        for (size_t k = 0; k < en->nfiles; k++) {
            snprintf(from, sizeof(from), "%s/%s", en->local_dir, en->files[k].name);
            snprintf(to, sizeof(to), "%s/%s", dest, en->files[k].name);
            rc = copy_file(from, to, cdc_state_file_is_immutable(en->files[k].name), e);
            if (rc != CDC_OK)
                return rc;
        }
        *reused = true;
        /* Later entries belong to abandoned epochs of the old store. */
        cdc_ckpt_drop_after(c, en->epoch);
        cdc_ckpt_new_lineage(c);
        return CDC_OK;
    }

    rc = cdc_storage_get(c->storage, handle, &data, &len, e);
    if (rc != CDC_OK)
        return cdc_error_prefix(e, "could not read state checkpoint \"%s\"", handle);
    rc = parse_manifest(data, len, handle, &tmp, e);
    free(data);
    if (rc != CDC_OK)
        goto fail;
    for (size_t k = 0; k < tmp.nfiles; k++) {
        data = NULL;
        rc = cdc_storage_get(c->storage, tmp.files[k].location, &data, &len, e);
        if (rc != CDC_OK) {
            cdc_error_prefix(e, "could not restore state file \"%s\"", tmp.files[k].location);
            goto fail;
        }
        snprintf(to, sizeof(to), "%s/%s", dest, tmp.files[k].name);
        rc = write_file(to, data, len, e);
        free(data);
        if (rc != CDC_OK)
            goto fail;
    }
    /* The restored checkpoint replaces everything this worker knew for the partition
     * (their remote files belong to checkpoints that are no longer ours to collect). */
    for (size_t i = 0; i < c->nentries; i++) {
        if (c->entries[i].local_dir != NULL)
            cdc_state_destroy(c->entries[i].local_dir, e);
        entry_free(&c->entries[i]);
    }
    c->nentries = 0;
    en = add_entry(c);
    if (en == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    *en = tmp;
    en->handle = strdup(handle);
    cdc_ckpt_new_lineage(c);
    return en->handle ? CDC_OK : cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
fail:
    entry_free(&tmp);
    return rc;
}

/* Earlier versions put each checkpoint's descriptor files in a directory of its own,
 * meta/<epoch>-<rand>/: removes that directory once its last file is gone (local
 * warehouse; rmdir fails harmlessly while it is not empty). */
static void remove_legacy_dir(const cdc_ckpt_t *c, const char *location)
{
    char *local = cdc_storage_local_path(c->storage, location), *slash;
    char *rl = cdc_storage_local_path(c->storage, c->root);
    size_t n = rl ? strlen(rl) : 0;
    if (local != NULL && rl != NULL && strncmp(local, rl, n) == 0 &&
        strncmp(local + n, "/meta/", 6) == 0 && (slash = strrchr(local, '/')) > local + n + 5) {
        *slash = '\0';
        rmdir(local);
    }
    free(local);
    free(rl);
}

/* Deletes entry i's local copy, manifest and files no entry >= keep_from refers to. */
static void discard(cdc_ckpt_t *c, size_t i, size_t keep_from, size_t keep_to)
{
    cdc_ckpt_entry_t *en = &c->entries[i];
    cdc_error_t e;
    if (en->local_dir != NULL)
        cdc_state_destroy(en->local_dir, &e);
    if (en->handle != NULL && cdc_storage_delete(c->storage, en->handle, &e) != CDC_OK)
        cdc_log_warn("could not delete state checkpoint manifest \"%s\": %s", en->handle, e.msg);
    for (size_t k = 0; k < en->nfiles; k++) {
        bool ref = false;
        for (size_t j = keep_from; j < keep_to && !ref; j++)
            for (size_t f = 0; f < c->entries[j].nfiles && !ref; f++)
                ref = strcmp(c->entries[j].files[f].location, en->files[k].location) == 0;
        if (!ref && cdc_storage_delete(c->storage, en->files[k].location, &e) != CDC_OK)
            cdc_log_warn("could not delete state file \"%s\": %s", en->files[k].location, e.msg);
        else if (!ref)
            remove_legacy_dir(c, en->files[k].location);
    }
}

void cdc_ckpt_gc(cdc_ckpt_t *c, uint64_t committed_epoch)
{
    size_t keep = 0;

    /* Keep the newest checkpoint at or before the committed epoch, and all later. */
    for (size_t i = 0; i < c->nentries; i++)
        if (c->entries[i].epoch <= committed_epoch)
            keep = i;
    if (keep == 0)
        return;
    for (size_t i = 0; i < keep; i++) {
        discard(c, i, keep, c->nentries);
        entry_free(&c->entries[i]);
    }
    memmove(c->entries, c->entries + keep, (c->nentries - keep) * sizeof(*c->entries));
    c->nentries -= keep;
}

void cdc_ckpt_drop_after(cdc_ckpt_t *c, uint64_t epoch)
{
    size_t n = c->nentries;
    while (n > 0 && c->entries[n - 1].epoch > epoch)
        n--;
    for (size_t i = n; i < c->nentries; i++) {
        discard(c, i, 0, n);
        entry_free(&c->entries[i]);
    }
    c->nentries = n;
}
