/*
 * RocksDB adapter behind common/state.h. Each store is a RocksDB database opened with
 * per-family TTLs (DBWithTTL), WAL disabled, small memtables and one block cache
 * shared by every store in the process, so 12 partition stores fit a worker's memory
 * budget. RocksDB error strings are translated to CDC_ERR_STATE at this boundary.
 */
#include "common/state.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rocksdb/c.h>

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
    char *dir;
};

struct cdc_state_batch {
    cdc_state_t *st;
    rocksdb_writebatch_t *wb;
};

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
        rocksdb_env_set_background_threads(env, 1);
        rocksdb_env_destroy(env); /* the wrapper; the default environment stays */
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

static cdc_err_t rerr(cdc_error_t *e, char *errptr, const char *what, const char *dir)
{
    cdc_err_t rc = cdc_error_set(e, CDC_ERR_STATE, "could not %s state store \"%s\": %s", what, dir,
                                 errptr ? errptr : "unknown error");
    rocksdb_free(errptr);
    return rc;
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
    st = calloc(1, sizeof(*st));
    if (st == NULL || (st->dir = strdup(dir)) == NULL) {
        free(st);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    st->nfamilies = o->nfamilies;
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
    rocksdb_options_set_info_log_level(st->opts, 2 /* WARN */);
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
        st->cf_opts[i] = co;
    }
    st->db = rocksdb_open_column_families_with_ttl(st->opts, dir, (int)o->nfamilies + 1, names,
                                                   (const rocksdb_options_t *const *)st->cf_opts,
                                                   st->cf_all, ttls, &err);
    if (err != NULL || st->db == NULL) {
        cdc_err_t rc = rerr(e, err, "open", dir);
        st->db = NULL;
        cdc_state_close(st);
        return rc;
    }
    st->ropts = rocksdb_readoptions_create();
    st->wopts = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(st->wopts, 1);
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

cdc_err_t cdc_state_get(cdc_state_t *st, int family, const void *key, size_t key_len, void **val,
                        size_t *val_len, cdc_error_t *e)
{
    char *err = NULL;
    size_t len = 0;
    char *v;

    if (!fam_ok(st, family))
        return cdc_error_set(e, CDC_ERR_INVALID, "no state family %d", family);
    v = rocksdb_get_cf(st->db, st->ropts, st->cf[family], key, key_len, &len, &err);
    if (err != NULL)
        return rerr(e, err, "read", st->dir);
    if (v == NULL)
        return CDC_ERR_NOT_FOUND;
    /* The C API returns a malloc()ed copy (rocksdb_free() is free()): hand it over. */
    if (len > 0) {
        *val = v;
        *val_len = len;
        return CDC_OK;
    }
    *val = malloc(1);
    if (*val == NULL) {
        rocksdb_free(v);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    memcpy(*val, v, len);
    rocksdb_free(v);
    *val_len = len;
    return CDC_OK;
}

cdc_err_t cdc_state_put(cdc_state_t *st, int family, const void *key, size_t key_len,
                        const void *val, size_t val_len, cdc_error_t *e)
{
    char *err = NULL;
    if (!fam_ok(st, family))
        return cdc_error_set(e, CDC_ERR_INVALID, "no state family %d", family);
    rocksdb_put_cf(st->db, st->wopts, st->cf[family], key, key_len, val, val_len, &err);
    return err ? rerr(e, err, "write", st->dir) : CDC_OK;
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
    if (fam_ok(b->st, family))
        rocksdb_writebatch_put_cf(b->wb, b->st->cf[family], key, key_len, val, val_len);
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
    rocksdb_writebatch_clear(b->wb);
}

void cdc_state_batch_free(cdc_state_batch_t *b)
{
    if (b == NULL)
        return;
    rocksdb_writebatch_destroy(b->wb);
    free(b);
}

cdc_err_t cdc_state_write(cdc_state_t *st, cdc_state_batch_t *b, cdc_error_t *e)
{
    char *err = NULL;
    rocksdb_write(st->db, st->wopts, b->wb, &err);
    return err ? rerr(e, err, "write", st->dir) : CDC_OK;
}

cdc_err_t cdc_state_checkpoint(cdc_state_t *st, const char *dir, cdc_error_t *e)
{
    char *err = NULL;
    rocksdb_checkpoint_t *cp;

    /* With the WAL off, the memtables must reach table files before the copy: a
     * checkpoint with log_size_for_flush 0 flushes first, all families in one atomic
     * flush job (atomic_flush), then links the files. */
    cp = rocksdb_checkpoint_object_create(st->db, &err);
    if (err != NULL)
        return rerr(e, err, "checkpoint", st->dir);
    rocksdb_checkpoint_create(cp, dir, 0, &err);
    rocksdb_checkpoint_object_destroy(cp);
    if (err != NULL)
        return rerr(e, err, "checkpoint", st->dir);
    return CDC_OK;
}

cdc_err_t cdc_state_compact(cdc_state_t *st, cdc_error_t *e)
{
    (void)e;
    for (size_t i = 0; i < st->nfamilies; i++)
        rocksdb_compact_range_cf(st->db, st->cf[i], NULL, 0, NULL, 0);
    return CDC_OK;
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
