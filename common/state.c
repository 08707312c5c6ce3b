/*
 * RocksDB adapter behind common/state.h. Each store is a plain RocksDB database, WAL
 * disabled, small memtables and one block cache shared by every store in the process,
 * so 12 partition stores fit a worker's memory budget. RocksDB error strings are
 * translated to CDC_ERR_STATE at this boundary.
 *
 * Expiry: every value ends with its write time (4 bytes, little-endian int32 seconds:
 * the layout of RocksDB's DBWithTTL, which earlier builds used). The write time is
 * appended when a put enters a batch (no re-encoding of the batch at write, which
 * DBWithTTL does); a family with a TTL drops an entry older than the TTL on read and, in
 * a compaction filter, from the table files. Families without a TTL never look at it.
 */
#include "common/state.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/clock.h"

struct cdc_state {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    /* Index 0 is RocksDB's mandatory "default" family (unused); family i is cf[i + 1]. */
    rocksdb_options_t *cf_opts[CDC_STATE_MAX_FAMILIES + 1];
    rocksdb_column_family_handle_t *cf_all[CDC_STATE_MAX_FAMILIES + 1];
    rocksdb_column_family_handle_t **cf;
    size_t nfamilies;
    rocksdb_block_based_table_options_t *table_opts;
    rocksdb_filterpolicy_t *filter; /* owned by table_opts once set */
    rocksdb_readoptions_t *ropts;
    rocksdb_writeoptions_t *wopts;
    /* Per family (index as cf): TTL in seconds (<= 0: none) and its compaction filter. */
    int ttl[CDC_STATE_MAX_FAMILIES];
    rocksdb_compactionfilter_t *expire[CDC_STATE_MAX_FAMILIES];
    int64_t (*clock)(void);
    size_t wal_checkpoint_bytes; /* 0: no WAL (cdc_state_options_t) */
    char *dir;
    /* After a failed write the store takes no more writes (see store_failed): 0 healthy,
     * 1 failing (failed_msg being written), 2 failed (failed_msg set). */
    atomic_int failed;
    char failed_msg[400];
};

struct cdc_state_batch {
    cdc_state_t *st;
    rocksdb_writebatch_t *wb;
    uint8_t ts[4]; /* write time of the batch's entries, set by the first put */
    bool ts_set;
    char *buf; /* scratch: value + write time */
    size_t buf_cap;
};

/* Length of the write time that ends every value (DBWithTTL's layout). */
#define TS_LEN 4
/* A smaller write time is corrupt (DBWithTTL's check: its release date). */
#define TS_MIN 1368146402

/* Marker key of the store's format in RocksDB's default family (state.h). */
static const char FORMAT_KEY[] = "cdc.state.format";

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static rocksdb_cache_t *shared_cache;

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void env_init(void)
{
    /* Flushes of all stores share the default environment's high-priority pool (one
     * thread unless raised): let the stores of one worker flush side by side when a
     * barrier checkpoints them all at once. */
    rocksdb_env_t *env = rocksdb_create_default_env();
    if (env != NULL) {
        rocksdb_env_set_high_priority_background_threads(env, 4);
        rocksdb_env_set_background_threads(env, 1); /* compactions; starts it now too */
        rocksdb_env_destroy(env);                   /* the wrapper; the default environment stays */
    }
}

void cdc_state_env_init(void)
{
    pthread_once(&env_once, env_init);
}

static rocksdb_cache_t *get_cache(size_t bytes)
{
    cdc_state_env_init();
    pthread_mutex_lock(&cache_lock);
    if (shared_cache == NULL)
        shared_cache = rocksdb_cache_create_lru(bytes ? bytes : (size_t)8 << 20);
    pthread_mutex_unlock(&cache_lock);
    return shared_cache;
}

static int64_t wall_clock(void)
{
    return cdc_clock_wall_ms() / 1000;
}

static void put_ts(uint8_t *p, int64_t t)
{
    uint32_t v = (uint32_t)(int32_t)t;
    for (int i = 0; i < TS_LEN; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int64_t get_ts(const char *p)
{
    const uint8_t *u = (const uint8_t *)p;
    return (int32_t)((uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                     (uint32_t)u[3] << 24);
}

/* DBWithTTL's rule: an entry written at ts is expired once ts + ttl < now. */
static bool expired(int64_t ts, int ttl, int64_t now)
{
    return ttl > 0 && ts + ttl < now;
}

/* Compaction filter of a family with a TTL; its state: the TTL and the store's clock. */
typedef struct expire_filter {
    int ttl;
    int64_t (*clock)(void);
} expire_filter_t;

static unsigned char expire_filter(void *state, int level, const char *key, size_t klen,
                                   const char *val, size_t vlen, char **new_val, size_t *new_len,
                                   unsigned char *changed)
{
    const expire_filter_t *f = state;
    (void)level;
    (void)key;
    (void)klen;
    (void)new_val;
    (void)new_len;
    *changed = 0;
    /* A value too short to hold a write time is left alone: reads report it. */
    return vlen >= TS_LEN && expired(get_ts(val + vlen - TS_LEN), f->ttl, f->clock());
}

static const char *expire_filter_name(void *state)
{
    (void)state;
    return "cdc.state.expire";
}

static void expire_filter_free(void *state)
{
    free(state);
}

static cdc_err_t rerr(cdc_error_t *e, char *errptr, const char *what, const char *dir)
{
    cdc_err_t rc = cdc_error_set(e, CDC_ERR_STATE, "could not %s state store \"%s\": %s", what, dir,
                                 errptr ? errptr : "unknown error");
    rocksdb_free(errptr);
    return rc;
}

/*
 * A write, WAL flush or checkpoint that failed (a full disk, an I/O error) fails every
 * later one at once, without RocksDB: RocksDB 7.8 asserts (aborts the process) when a
 * WAL write follows a failed one, and the worker reopens the store from its checkpoint
 * after any failure anyway (docs/operations.md, "Disk faults"). Reads go on.
 */
static cdc_err_t write_failed(cdc_state_t *st, cdc_error_t *e, char *errptr, const char *what)
{
    cdc_error_t mine;
    cdc_err_t rc = rerr(e != NULL ? e : &mine, errptr, what, st->dir);
    int expect = 0;
    if (atomic_compare_exchange_strong(&st->failed, &expect, 1)) {
        snprintf(st->failed_msg, sizeof(st->failed_msg), "%s", (e != NULL ? e : &mine)->msg);
        atomic_store(&st->failed, 2);
    }
    return rc;
}

static bool store_failed(cdc_state_t *st, cdc_error_t *e)
{
    int f = atomic_load(&st->failed);
    if (f == 0)
        return false;
    cdc_error_set(e, CDC_ERR_STATE,
                  "state store \"%s\" takes no more writes after a failed one: %s", st->dir,
                  f == 2 ? st->failed_msg : "(failing now)");
    return true;
}

/*
 * Reads the format marker; writes it into a store that has none (new, or written by a
 * build before the marker, whose values have the same layout). The marker reaches disk
 * with the store's next flush, like every write.
 */
static cdc_err_t check_format(cdc_state_t *st, cdc_error_t *e)
{
    char *err = NULL, want[16];
    size_t len = 0;
    char *v = rocksdb_get_cf(st->db, st->ropts, st->cf_all[0], FORMAT_KEY, sizeof(FORMAT_KEY) - 1,
                             &len, &err);
    int n = snprintf(want, sizeof(want), "%d", CDC_STATE_FORMAT);

    if (err != NULL)
        return rerr(e, err, "read the format of", st->dir);
    if (v == NULL) {
        rocksdb_put_cf(st->db, st->wopts, st->cf_all[0], FORMAT_KEY, sizeof(FORMAT_KEY) - 1, want,
                       (size_t)n, &err);
        return err ? rerr(e, err, "write the format of", st->dir) : CDC_OK;
    }
    if (len != (size_t)n || memcmp(v, want, len) != 0) {
        cdc_err_t rc =
            cdc_error_set(e, CDC_ERR_STATE,
                          "state store \"%s\" has format \"%.*s\", this build reads only format %d "
                          "(hint: run the build that wrote it, or remove the directory: a worker "
                          "restores its partitions from the latest checkpoint)",
                          st->dir, (int)(len < 32 ? len : 32), v, CDC_STATE_FORMAT);
        rocksdb_free(v);
        return rc;
    }
    rocksdb_free(v);
    return CDC_OK;
}

/*
 * Opening a store writes its info LOG's header lines first, and RocksDB 7.8 aborts on a
 * LOG write that follows a failed one: a store opens only where a probe file of 64 KiB
 * can be written and synced (a full disk fails here, with its error, instead).
 */
static cdc_err_t probe_space(const char *dir, cdc_error_t *e)
{
    static const char zeros[64 << 10];
    char path[4096];
    snprintf(path, sizeof(path), "%s/.space-probe", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return cdc_error_set(e, CDC_ERR_STATE, "could not open state store \"%s\": %s", dir,
                             strerror(errno));
    ssize_t n = write(fd, zeros, sizeof(zeros));
    int err = n == (ssize_t)sizeof(zeros) ? 0 : (n < 0 ? errno : ENOSPC);
    if (err == 0 && fsync(fd) != 0)
        err = errno;
    close(fd);
    unlink(path);
    if (err != 0)
        return cdc_error_set(e, CDC_ERR_STATE,
                             "could not open state store \"%s\": no room for its first files: %s",
                             dir, strerror(err));
    return CDC_OK;
}

cdc_err_t cdc_state_open(const char *dir, const cdc_state_options_t *o, cdc_state_t **out,
                         cdc_error_t *e)
{
    char *err = NULL;
    cdc_state_t *st;

    if (o->nfamilies < 1 || o->nfamilies > CDC_STATE_MAX_FAMILIES)
        return cdc_error_set(e, CDC_ERR_INVALID, "state store \"%s\": bad family count %zu", dir,
                             o->nfamilies);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return cdc_error_set(e, CDC_ERR_IO, "could not create directory \"%s\": %s", dir,
                             strerror(errno));
    cdc_err_t prc = probe_space(dir, e);
    if (prc != CDC_OK)
        return prc;
    st = calloc(1, sizeof(*st));
    if (st == NULL || (st->dir = strdup(dir)) == NULL) {
        free(st);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    st->nfamilies = o->nfamilies;
    st->clock = o->clock ? o->clock : wall_clock;
    st->table_opts = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(st->table_opts, get_cache(o->block_cache_size));
    st->filter = rocksdb_filterpolicy_create_bloom(10);
    rocksdb_block_based_options_set_filter_policy(st->table_opts, st->filter);

    st->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(st->opts, 1);
    rocksdb_options_set_create_missing_column_families(st->opts, 1);
    rocksdb_options_set_max_background_jobs(st->opts, 2);
    /* One flush job for all families: a checkpoint waits for one flush, not one per
     * family (and the families' table files always describe the same moment). */
    rocksdb_options_set_atomic_flush(st->opts, 1);
    rocksdb_options_set_max_open_files(st->opts, 256);
    rocksdb_options_set_keep_log_file_num(st->opts, 2);
    /* Fatal messages only in RocksDB's info LOG (in the store's directory): RocksDB 7.8
     * asserts (aborts) on a LOG write after a failed one, and on a full disk its error
     * handler logs the failure it handles (docs/operations.md, "Disk faults"). */
    rocksdb_options_set_info_log_level(st->opts, 4 /* FATAL */);
    /* With a WAL, RocksDB only appends to its buffer on a write; cdc_state_checkpoint()
     * writes the buffer out before it copies the WAL. */
    rocksdb_options_set_manual_wal_flush(st->opts, o->wal_checkpoint_bytes > 0);
    /* Caps all memtables of this store together (a worker may hold 12 stores). */
    rocksdb_options_set_db_write_buffer_size(
        st->opts, 2 * (o->write_buffer_size ? o->write_buffer_size : (size_t)4 << 20));
    st->cf = st->cf_all + 1;
    const char *names[CDC_STATE_MAX_FAMILIES + 1];
    int ttls[CDC_STATE_MAX_FAMILIES + 1];
    names[0] = "default";
    ttls[0] = 0;
    for (size_t i = 0; i < o->nfamilies; i++) {
        names[i + 1] = o->families[i];
        ttls[i + 1] = o->ttl_seconds[i];
    }
    for (size_t i = 0; i <= o->nfamilies; i++) {
        rocksdb_options_t *co = rocksdb_options_create();
        rocksdb_options_set_write_buffer_size(co, o->write_buffer_size ? o->write_buffer_size
                                                                       : (size_t)4 << 20);
        rocksdb_options_set_max_write_buffer_number(co, 2);
        /* Most lookups are for keys that do not exist (new rows, unseen replay keys):
         * a whole-key bloom filter in the memtable answers those without a skiplist
         * search. */
        rocksdb_options_set_memtable_prefix_bloom_size_ratio(co, 0.05);
        rocksdb_options_set_memtable_whole_key_filtering(co, 1);
        rocksdb_options_set_compression(co, rocksdb_lz4_compression);
        rocksdb_options_set_block_based_table_factory(co, st->table_opts);
        /* A large value (a large row's image) goes to a blob file when its memtable is
         * flushed, not into a table block, and uncompressed: the flush holds no second
         * copy of it (a block, a compressed copy), and compactions move a reference, not
         * the value (docs/worker.md, "Large rows"). */
        rocksdb_options_set_enable_blob_files(co, 1);
        rocksdb_options_set_min_blob_size(co, CDC_STATE_LARGE_VALUE);
        rocksdb_options_set_blob_compression_type(co, rocksdb_no_compression);
        /* no blob garbage collection: it would read a large value back and write it
         * again in compactions; a blob file goes once no table file refers to it */
        rocksdb_options_set_enable_blob_gc(co, 0);
        if (i > 0 && ttls[i] > 0) {
            expire_filter_t *f = malloc(sizeof(*f));
            if (f == NULL) {
                rocksdb_options_destroy(co);
                cdc_state_close(st);
                return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            }
            f->ttl = ttls[i];
            f->clock = st->clock;
            st->ttl[i - 1] = ttls[i];
            st->expire[i - 1] = rocksdb_compactionfilter_create(f, expire_filter_free,
                                                                expire_filter, expire_filter_name);
            rocksdb_options_set_compaction_filter(co, st->expire[i - 1]);
        }
        st->cf_opts[i] = co;
    }
    st->db = rocksdb_open_column_families(st->opts, dir, (int)o->nfamilies + 1, names,
                                          (const rocksdb_options_t *const *)st->cf_opts, st->cf_all,
                                          &err);
    if (err != NULL || st->db == NULL) {
        cdc_err_t rc = rerr(e, err, "open", dir);
        st->db = NULL;
        cdc_state_close(st);
        return rc;
    }
    st->ropts = rocksdb_readoptions_create();
    st->wopts = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(st->wopts, o->wal_checkpoint_bytes == 0);
    st->wal_checkpoint_bytes = o->wal_checkpoint_bytes;
    cdc_err_t rc = check_format(st, e);
    if (rc != CDC_OK) {
        cdc_state_close(st);
        return rc;
    }
    *out = st;
    return CDC_OK;
}

void cdc_state_close(cdc_state_t *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i <= st->nfamilies; i++)
        if (st->cf_all[i] != NULL)
            rocksdb_column_family_handle_destroy(st->cf_all[i]);
    if (st->db != NULL)
        rocksdb_close(st->db);
    for (size_t i = 0; i <= st->nfamilies; i++)
        if (st->cf_opts[i] != NULL)
            rocksdb_options_destroy(st->cf_opts[i]);
    for (size_t i = 0; i < st->nfamilies; i++)
        if (st->expire[i] != NULL)
            rocksdb_compactionfilter_destroy(st->expire[i]); /* frees its state */
    if (st->opts != NULL)
        rocksdb_options_destroy(st->opts);
    if (st->table_opts != NULL)
        rocksdb_block_based_options_destroy(st->table_opts); /* frees the filter policy */
    if (st->ropts != NULL)
        rocksdb_readoptions_destroy(st->ropts);
    if (st->wopts != NULL)
        rocksdb_writeoptions_destroy(st->wopts);
    free(st->dir);
    free(st);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

cdc_err_t cdc_state_destroy(const char *dir, cdc_error_t *e)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return errno == ENOENT ? CDC_OK
                               : cdc_error_set(e, CDC_ERR_IO, "could not stat \"%s\": %s", dir,
                                               strerror(errno));
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return cdc_error_set(e, CDC_ERR_IO, "could not remove \"%s\": %s", dir, strerror(errno));
    return CDC_OK;
}

static bool fam_ok(const cdc_state_t *st, int family)
{
    return family >= 0 && (size_t)family < st->nfamilies;
}

/*
 * Checks a stored value (write time at its end) and copies its payload into a malloc'd
 * buffer: CDC_OK, CDC_ERR_NOT_FOUND when expired, CDC_ERR_STATE when corrupt.
 */
static cdc_err_t take_value(cdc_state_t *st, int family, const char *v, size_t len, void **val,
                            size_t *val_len, cdc_error_t *e)
{
    int64_t ts;
    if (len < TS_LEN || (ts = get_ts(v + len - TS_LEN)) < TS_MIN)
        return cdc_error_set(e, CDC_ERR_STATE,
                             "state store \"%s\": corrupt value in family %d (no write time)",
                             st->dir, family);
    if (st->ttl[family] > 0 && expired(ts, st->ttl[family], st->clock()))
        return CDC_ERR_NOT_FOUND;
    len -= TS_LEN;
    if ((*val = malloc(len ? len : 1)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    memcpy(*val, v, len);
    *val_len = len;
    return CDC_OK;
}

cdc_err_t cdc_state_get(cdc_state_t *st, int family, const void *key, size_t key_len, void **val,
                        size_t *val_len, cdc_error_t *e)
{
    char *err = NULL;
    size_t len = 0;
    rocksdb_pinnableslice_t *ps;
    cdc_err_t rc;

    if (!fam_ok(st, family))
        return cdc_error_set(e, CDC_ERR_INVALID, "no state family %d", family);
    ps = rocksdb_get_pinned_cf(st->db, st->ropts, st->cf[family], key, key_len, &err);
    if (err != NULL)
        return rerr(e, err, "read", st->dir);
    if (ps == NULL)
        return CDC_ERR_NOT_FOUND;
    const char *v = rocksdb_pinnableslice_value(ps, &len);
    rc = take_value(st, family, v, len, val, val_len, e);
    rocksdb_pinnableslice_destroy(ps);
    return rc;
}

typedef struct key_sort {
    const void *const *keys;
    const size_t *lens;
} key_sort_t;

static int key_cmp(const void *a, const void *b, void *arg)
{
    const key_sort_t *ks = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    size_t li = ks->lens[i], lj = ks->lens[j];
    int c = memcmp(ks->keys[i], ks->keys[j], li < lj ? li : lj);
    return c != 0 ? c : (li > lj) - (li < lj);
}

cdc_err_t cdc_state_multi_get(cdc_state_t *st, int family, size_t n, const void *const *keys,
                              const size_t *key_lens, void **vals, size_t *val_lens, cdc_err_t *rcs,
                              cdc_error_t *e)
{
    enum { CHUNK = 256 };
    rocksdb_pinnableslice_t *ps[CHUNK];
    char *errs[CHUNK];
    const char *skeys[CHUNK];
    size_t slens[CHUNK], idx[CHUNK];
    cdc_err_t rc = CDC_OK;

    if (!fam_ok(st, family))
        return cdc_error_set(e, CDC_ERR_INVALID, "no state family %d", family);
    for (size_t base = 0; base < n; base += CHUNK) {
        size_t m = n - base < CHUNK ? n - base : CHUNK;
        /* RocksDB wants the keys in order; sorting them here (indexes, bytewise) is
         * cheaper than its own copy-and-sort. */
        key_sort_t ks = {keys + base, key_lens + base};
        for (size_t i = 0; i < m; i++)
            idx[i] = i;
        qsort_r(idx, m, sizeof(idx[0]), key_cmp, &ks);
        for (size_t i = 0; i < m; i++) {
            skeys[i] = keys[base + idx[i]];
            slens[i] = key_lens[base + idx[i]];
        }
        rocksdb_batched_multi_get_cf(st->db, st->ropts, st->cf[family], m, skeys, slens, ps, errs,
                                     true);
        for (size_t i = 0; i < m; i++) {
            size_t k = base + idx[i], len = 0;
            vals[k] = NULL;
            val_lens[k] = 0;
            if (errs[i] != NULL) {
                rc = rcs[k] = rerr(e, errs[i], "read", st->dir);
            } else if (ps[i] == NULL) {
                rcs[k] = CDC_ERR_NOT_FOUND;
            } else {
                const char *v = rocksdb_pinnableslice_value(ps[i], &len);
                if (v == NULL) {
                    rcs[k] = CDC_ERR_NOT_FOUND;
                } else {
                    rcs[k] = take_value(st, family, v, len, &vals[k], &val_lens[k], e);
                    if (rcs[k] != CDC_OK && rcs[k] != CDC_ERR_NOT_FOUND)
                        rc = rcs[k];
                }
            }
            if (ps[i] != NULL)
                rocksdb_pinnableslice_destroy(ps[i]);
        }
    }
    return rc;
}

bool cdc_state_may_have_prefix(cdc_state_t *st, int family, const void *prefix, size_t len)
{
    rocksdb_iterator_t *it;
    char *err = NULL;
    bool found = true;
    if (!fam_ok(st, family))
        return true;
    it = rocksdb_create_iterator_cf(st->db, st->ropts, st->cf[family]);
    if (it == NULL)
        return true;
    rocksdb_iter_seek(it, prefix, len);
    rocksdb_iter_get_error(it, &err);
    if (err != NULL) {
        rocksdb_free(err);
    } else if (!rocksdb_iter_valid(it)) {
        found = false;
    } else {
        size_t klen = 0;
        const char *k = rocksdb_iter_key(it, &klen);
        found = klen >= len && memcmp(k, prefix, len) == 0;
    }
    rocksdb_iter_destroy(it);
    return found;
}

/* Bytewise comparison of two keys (shorter first on a common prefix). */
static int key_compare(const void *a, size_t alen, const void *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c != 0 ? c : (alen > blen) - (alen < blen);
}

cdc_err_t cdc_state_scan(cdc_state_t *st, int family, const void *begin, size_t begin_len,
                         const void *end, size_t end_len, cdc_state_scan_fn fn, void *arg,
                         cdc_error_t *e)
{
    const rocksdb_snapshot_t *snap;
    rocksdb_readoptions_t *ro;
    rocksdb_iterator_t *it;
    char *err = NULL;
    cdc_err_t rc = CDC_OK;
    int64_t now;

    if (!fam_ok(st, family))
        return cdc_error_set(e, CDC_ERR_INVALID, "no state family %d", family);
    if ((ro = rocksdb_readoptions_create()) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    snap = rocksdb_create_snapshot(st->db);
    rocksdb_readoptions_set_snapshot(ro, snap);
    rocksdb_readoptions_set_iterate_upper_bound(ro, end, end_len);
    it = rocksdb_create_iterator_cf(st->db, ro, st->cf[family]);
    now = st->clock();
    for (rocksdb_iter_seek(it, begin, begin_len); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *k = rocksdb_iter_key(it, &klen), *v = rocksdb_iter_value(it, &vlen);
        int64_t ts;
        if (key_compare(k, klen, end, end_len) >= 0)
            break;
        if (vlen < TS_LEN || (ts = get_ts(v + vlen - TS_LEN)) < TS_MIN) {
            rc = cdc_error_set(e, CDC_ERR_STATE,
                               "state store \"%s\": corrupt value in family %d (no write time)",
                               st->dir, family);
            break;
        }
        if (st->ttl[family] > 0 && expired(ts, st->ttl[family], now))
            continue;
        if (!fn(k, klen, v, vlen - TS_LEN, arg))
            break;
    }
    rocksdb_iter_get_error(it, &err);
    if (err != NULL && rc == CDC_OK)
        rc = rerr(e, err, "scan", st->dir);
    else
        rocksdb_free(err);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    rocksdb_release_snapshot(st->db, snap);
    return rc;
}

/* The batch's write time, taken at its first put. */
static const char *batch_ts(cdc_state_batch_t *b)
{
    if (!b->ts_set) {
        put_ts(b->ts, b->st->clock());
        b->ts_set = true;
    }
    return (const char *)b->ts;
}

cdc_err_t cdc_state_put(cdc_state_t *st, int family, const void *key, size_t key_len,
                        const void *val, size_t val_len, cdc_error_t *e)
{
    char *err = NULL;
    uint8_t ts[TS_LEN];
    if (!fam_ok(st, family))
        return cdc_error_set(e, CDC_ERR_INVALID, "no state family %d", family);
    if (store_failed(st, e))
        return CDC_ERR_STATE;
    put_ts(ts, st->clock());
    const char *kl[1] = {key}, *vl[2] = {val, (const char *)ts};
    size_t kls[1] = {key_len}, vls[2] = {val_len, TS_LEN};
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_writebatch_putv_cf(wb, st->cf[family], 1, kl, kls, 2, vl, vls);
    rocksdb_write(st->db, st->wopts, wb, &err);
    rocksdb_writebatch_destroy(wb);
    return err ? write_failed(st, e, err, "write") : CDC_OK;
}

cdc_state_batch_t *cdc_state_batch_new(cdc_state_t *st)
{
    cdc_state_batch_t *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->st = st;
    b->wb = rocksdb_writebatch_create();
    return b;
}

void cdc_state_batch_put(cdc_state_batch_t *b, int family, const void *key, size_t key_len,
                         const void *val, size_t val_len)
{
    const char *ts = batch_ts(b);
    if (!fam_ok(b->st, family))
        return;
    /* A large value (a large row's, docs/worker.md "Large rows") is joined by RocksDB
     * itself, so that the batch's scratch buffer does not keep a copy of it. */
    if (val_len > CDC_STATE_LARGE_VALUE ||
        cdc_array_reserve(b->buf, b->buf_cap, val_len + TS_LEN, 256) != CDC_OK) {
        const char *kl[1] = {key}, *vl[2] = {val, ts};
        size_t kls[1] = {key_len}, vls[2] = {val_len, TS_LEN};
        rocksdb_writebatch_putv_cf(b->wb, b->st->cf[family], 1, kl, kls, 2, vl, vls);
        return;
    }
    if (val_len > 0)
        memcpy(b->buf, val, val_len);
    memcpy(b->buf + val_len, ts, TS_LEN);
    rocksdb_writebatch_put_cf(b->wb, b->st->cf[family], key, key_len, b->buf, val_len + TS_LEN);
}

bool cdc_state_batch_putv(cdc_state_batch_t *b, int family, const void *key, size_t key_len,
                          size_t nparts, const void *const *parts, const size_t *lens)
{
    enum { ON_STACK = 32 };
    const char *ts = batch_ts(b);
    const char *kl[1] = {key}, *stack_vl[ON_STACK], **vl = stack_vl;
    size_t kls[1] = {key_len}, stack_vls[ON_STACK], *vls = stack_vls;
    if (!fam_ok(b->st, family) || nparts >= (size_t)INT_MAX)
        return false;
    if (nparts + 1 > ON_STACK) {
        vl = malloc((nparts + 1) * sizeof(*vl));
        vls = malloc((nparts + 1) * sizeof(*vls));
        if (vl == NULL || vls == NULL) {
            free(vl);
            free(vls);
            return false;
        }
    }
    for (size_t i = 0; i < nparts; i++) {
        vl[i] = parts[i];
        vls[i] = lens[i];
    }
    vl[nparts] = ts;
    vls[nparts] = TS_LEN;
    rocksdb_writebatch_putv_cf(b->wb, b->st->cf[family], 1, kl, kls, (int)nparts + 1, vl, vls);
    if (vl != stack_vl) {
        free(vl);
        free(vls);
    }
    return true;
}

void cdc_state_batch_delete(cdc_state_batch_t *b, int family, const void *key, size_t key_len)
{
    if (fam_ok(b->st, family))
        rocksdb_writebatch_delete_cf(b->wb, b->st->cf[family], key, key_len);
}

void cdc_state_batch_delete_range(cdc_state_batch_t *b, int family, const void *begin,
                                  size_t begin_len, const void *end, size_t end_len)
{
    if (fam_ok(b->st, family))
        rocksdb_writebatch_delete_range_cf(b->wb, b->st->cf[family], begin, begin_len, end,
                                           end_len);
}

size_t cdc_state_batch_count(const cdc_state_batch_t *b)
{
    return (size_t)rocksdb_writebatch_count(b->wb);
}

void cdc_state_batch_clear(cdc_state_batch_t *b)
{
    size_t size = 0;
    rocksdb_writebatch_data(b->wb, &size);
    /* clearing keeps the batch's memory: one that held a large value is made anew */
    rocksdb_writebatch_t *fresh = size > CDC_STATE_LARGE_VALUE ? rocksdb_writebatch_create() : NULL;
    if (fresh != NULL) {
        rocksdb_writebatch_destroy(b->wb);
        b->wb = fresh;
    } else {
        rocksdb_writebatch_clear(b->wb);
    }
    b->ts_set = false;
}

void cdc_state_batch_free(cdc_state_batch_t *b)
{
    if (b == NULL)
        return;
    rocksdb_writebatch_destroy(b->wb);
    free(b->buf);
    free(b);
}

cdc_err_t cdc_state_write(cdc_state_t *st, cdc_state_batch_t *b, cdc_error_t *e)
{
    char *err = NULL;
    if (store_failed(st, e))
        return CDC_ERR_STATE;
    rocksdb_write(st->db, st->wopts, b->wb, &err);
    return err ? write_failed(st, e, err, "write") : CDC_OK;
}

/*
 * Waits (up to max_ms) until no flush of the store runs or is pending. RocksDB 7.8 (Debian
 * 12's) keeps a flush's reason per column family, and with atomic_flush a second flush
 * requested while one runs (a checkpoint's after a large value's, or after the memtable
 * filled) overwrites it: the running job then fails an assertion and aborts the process
 * (fixed upstream in RocksDB 8.0). So one flush at a time: only the record thread writes
 * to a store and only while no checkpoint holds it, so nothing schedules a flush between
 * this wait and the caller's own.
 */
static void flushes_settle(cdc_state_t *st, int max_ms)
{
    int64_t deadline = cdc_clock_mono_ms() + max_ms;
    for (;;) {
        uint64_t running = 0, pending = 0;
        if (rocksdb_property_int(st->db, "rocksdb.num-running-flushes", &running) != 0 ||
            rocksdb_property_int(st->db, "rocksdb.mem-table-flush-pending", &pending) != 0 ||
            (running == 0 && pending == 0))
            return;
        if (cdc_clock_mono_ms() >= deadline) {
            cdc_log_warn("state store \"%s\": a flush still runs after %d ms; going on", st->dir,
                         max_ms);
            return;
        }
        usleep(2000);
    }
}

void cdc_state_flush_start(cdc_state_t *st, int family)
{
    char *err = NULL;
    if (!fam_ok(st, family))
        return;
    /* one flush at a time (flushes_settle), and this one done before the next write can
     * fill the memtable and schedule another: a large value is rare, its flush short */
    flushes_settle(st, 10000);
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    rocksdb_flush_cf(st->db, fo, st->cf[family], &err);
    rocksdb_flushoptions_destroy(fo);
    if (err != NULL) /* (the next checkpoint flushes it, or fails loudly) */
        cdc_log_warn("could not start a flush of state store \"%s\": %s", st->dir, err);
    free(err);
}

cdc_err_t cdc_state_checkpoint(cdc_state_t *st, const char *dir, cdc_error_t *e)
{
    char *err = NULL;
    rocksdb_checkpoint_t *cp;

    /* log_size_for_flush 0 (no WAL): the memtables must reach table files before the
     * copy, so the checkpoint flushes first, all families in one atomic flush job
     * (atomic_flush), then links the files. With a WAL smaller than
     * wal_checkpoint_bytes it links the table files and copies the WAL files instead,
     * the last one trimmed to its size at this moment: the buffered WAL goes out first
     * (not synced: the copy is synced). */
    if (store_failed(st, e))
        return CDC_ERR_STATE;
    if (st->wal_checkpoint_bytes > 0) {
        rocksdb_flush_wal(st->db, 0, &err);
        if (err != NULL)
            return write_failed(st, e, err, "checkpoint");
    }
    flushes_settle(st, 30000); /* the checkpoint's own flush must be the only one */
    cp = rocksdb_checkpoint_object_create(st->db, &err);
    if (err != NULL)
        return write_failed(st, e, err, "checkpoint");
    rocksdb_checkpoint_create(cp, dir, (uint64_t)st->wal_checkpoint_bytes, &err);
    rocksdb_checkpoint_object_destroy(cp);
    if (err != NULL)
        return write_failed(st, e, err, "checkpoint");
    return CDC_OK;
}

void cdc_state_compact(cdc_state_t *st)
{
    for (size_t i = 0; i < st->nfamilies; i++)
        rocksdb_compact_range_cf(st->db, st->cf[i], NULL, 0, NULL, 0);
}

static uint64_t prop_u64(cdc_state_t *st, int family, const char *name)
{
    char *v = rocksdb_property_value_cf(st->db, st->cf[family], name);
    uint64_t n = v ? strtoull(v, NULL, 10) : 0;
    rocksdb_free(v);
    return n;
}

uint64_t cdc_state_size(cdc_state_t *st)
{
    uint64_t total = 0;
    for (size_t i = 0; i < st->nfamilies; i++) {
        total += prop_u64(st, (int)i, "rocksdb.live-sst-files-size");
        total += prop_u64(st, (int)i, "rocksdb.cur-size-all-mem-tables");
    }
    return total;
}

uint64_t cdc_state_estimate_keys(cdc_state_t *st, int family)
{
    return fam_ok(st, family) ? prop_u64(st, family, "rocksdb.estimate-num-keys") : 0;
}

bool cdc_state_file_is_immutable(const char *name)
{
    size_t n = strlen(name);
    return (n > 4 && strcmp(name + n - 4, ".sst") == 0) ||
           (n > 5 && strcmp(name + n - 5, ".blob") == 0);
}
