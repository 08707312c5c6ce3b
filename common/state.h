/*
 * State store adapter: the only module that touches RocksDB (rocksdb/c.h). The worker
 * keeps one store per partition slot (dedup positions, last row images); other code
 * speaks this API in the project's own types. A store has named column families, each
 * with its own TTL: an entry older than its family's TTL is no longer returned by reads
 * and is dropped at compaction (0 = forever). Every value carries its write time
 * (format 1, the layout of RocksDB's DBWithTTL, so stores written through DBWithTTL by
 * earlier builds open unchanged); a store written in another format is refused.
 * Durability comes only from cdc_state_checkpoint(), which puts a consistent copy of the
 * database into a directory: table files hard-linked, and either the memtables flushed
 * into a new table file first (writes skip the WAL), or, with wal_checkpoint_bytes set,
 * the write-ahead log copied instead while it is small (writes go to an unsynced WAL
 * that RocksDB buffers in memory until a checkpoint writes it out: no flush, no new
 * table file, no compaction per checkpoint). The live store's own files are never
 * reopened after a crash: everything written after the last checkpoint is lost by
 * design, and the epoch protocol replays those records from Kafka.
 *
 * Threads: a store and its batches are used by one thread at a time.
 */
#ifndef CDC_STATE_H
#define CDC_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct cdc_state cdc_state_t;
typedef struct cdc_state_batch cdc_state_batch_t;

#define CDC_STATE_MAX_FAMILIES 8

typedef struct cdc_state_options {
    size_t nfamilies;                             /* 1..CDC_STATE_MAX_FAMILIES */
    const char *families[CDC_STATE_MAX_FAMILIES]; /* names; index = family number */
    int ttl_seconds[CDC_STATE_MAX_FAMILIES];      /* <= 0: never expires */
    size_t write_buffer_size;                     /* bytes per memtable, 0 = 4 MiB */
    size_t block_cache_size;                      /* bytes, 0 = 8 MiB (shared by all stores) */
    /* 0: writes skip the WAL and every checkpoint flushes the memtables. Otherwise writes
     * go to the WAL (buffered, never synced) and a checkpoint copies the WAL instead of
     * flushing as long as the live WAL files are smaller than this many bytes. */
    size_t wal_checkpoint_bytes;
    /* Seconds since the epoch used for write times and expiry; NULL = time(). Tests only:
     * it must never go backwards and is read from RocksDB's compaction threads too. */
    int64_t (*clock)(void);
} cdc_state_options_t;

/* On-disk format written and read by this build (a marker key in RocksDB's default
 * family; a store without one was written by a build that predates the marker, in the
 * same format). */
#define CDC_STATE_FORMAT 1

/*
 * Starts RocksDB's shared background threads (flushes, compactions) now, on the calling
 * thread. Threads inherit the scheduling priority of the thread that creates them: a
 * process that lowers the priority of some thread calls this first, from a thread at
 * normal priority. Idempotent; cdc_state_open() calls it too.
 */
void cdc_state_env_init(void);

/*
 * Opens (creating when missing) the store in directory dir. The options must name the
 * same families every time the store is opened. A store in another format than
 * CDC_STATE_FORMAT fails with CDC_ERR_STATE naming dir. On success *out is owned by the
 * caller (cdc_state_close()); on failure *out is untouched.
 */
cdc_err_t cdc_state_open(const char *dir, const cdc_state_options_t *opts, cdc_state_t **out,
                         cdc_error_t *e);

/* Closes the store (NULL is fine). Writes not in a checkpoint count as lost. */
void cdc_state_close(cdc_state_t *st);

/* Removes a closed store's directory and everything in it; a missing dir is fine. */
cdc_err_t cdc_state_destroy(const char *dir, cdc_error_t *e);

/*
 * Looks up key in family. On success *val is a malloc'd copy owned by the caller (free()),
 * *val_len its length. Returns CDC_ERR_NOT_FOUND (without touching e) when absent or
 * expired.
 */
cdc_err_t cdc_state_get(cdc_state_t *st, int family, const void *key, size_t key_len, void **val,
                        size_t *val_len, cdc_error_t *e);

/*
 * Looks up n keys of one family in one RocksDB MultiGet (cheaper per key than n gets).
 * For each i, rcs[i] is CDC_OK (vals[i] a malloc'd copy owned by the caller, val_lens[i]
 * its length), CDC_ERR_NOT_FOUND (vals[i] NULL) or CDC_ERR_STATE (vals[i] NULL; the
 * message of the last such key is in e). Returns CDC_OK unless a key failed.
 */
cdc_err_t cdc_state_multi_get(cdc_state_t *st, int family, size_t n, const void *const *keys,
                              const size_t *key_lens, void **vals, size_t *val_lens, cdc_err_t *rcs,
                              cdc_error_t *e);

/* Writes one key (durable only through a checkpoint; see the file comment). */
cdc_err_t cdc_state_put(cdc_state_t *st, int family, const void *key, size_t key_len,
                        const void *val, size_t val_len, cdc_error_t *e);

/*
 * Whether family may hold a key that starts with prefix: false only when it certainly
 * holds none (expired entries not yet compacted away count as held; so does a failed
 * read). Costs one iterator seek.
 */
bool cdc_state_may_have_prefix(cdc_state_t *st, int family, const void *prefix, size_t len);

/*
 * Calls fn(key, key_len, val, val_len, arg) for every live (unexpired) key k of family with
 * begin <= k < end (bytewise order), in order; the pointers are valid during the call
 * only. fn returns false to stop early. The scan reads one consistent view of the
 * store. CDC_ERR_STATE on a read failure or a corrupt value.
 */
typedef bool (*cdc_state_scan_fn)(const void *key, size_t key_len, const void *val, size_t val_len,
                                  void *arg);
cdc_err_t cdc_state_scan(cdc_state_t *st, int family, const void *begin, size_t begin_len,
                         const void *end, size_t end_len, cdc_state_scan_fn fn, void *arg,
                         cdc_error_t *e);

/* A write batch bound to st; applied atomically by cdc_state_write(). Every entry of a
 * batch gets the same write time: the clock's value at its first put since it was
 * created or cleared. */
/* A value above this many bytes is a large one: a batch holds it once, in RocksDB's own
 * buffer, and a cleared batch that held one gives its memory back. */
#define CDC_STATE_LARGE_VALUE ((size_t)1 << 20)

cdc_state_batch_t *cdc_state_batch_new(cdc_state_t *st);
void cdc_state_batch_put(cdc_state_batch_t *b, int family, const void *key, size_t key_len,
                         const void *val, size_t val_len);
/* A put of the value made of nparts parts (any number) joined, which RocksDB copies into
 * the batch once: a large value is never put together first. False when memory for the
 * part list ran out (nothing was put). */
bool cdc_state_batch_putv(cdc_state_batch_t *b, int family, const void *key, size_t key_len,
                          size_t nparts, const void *const *parts, const size_t *lens);
void cdc_state_batch_delete(cdc_state_batch_t *b, int family, const void *key, size_t key_len);
/* Deletes every key k of family with begin <= k < end (bytewise order). */
void cdc_state_batch_delete_range(cdc_state_batch_t *b, int family, const void *begin,
                                  size_t begin_len, const void *end, size_t end_len);
size_t cdc_state_batch_count(const cdc_state_batch_t *b);
void cdc_state_batch_clear(cdc_state_batch_t *b);
void cdc_state_batch_free(cdc_state_batch_t *b);
/* Applies the batch; the batch is not cleared. */
cdc_err_t cdc_state_write(cdc_state_t *st, cdc_state_batch_t *b, cdc_error_t *e);

/*
 * Creates a consistent, openable copy of the store in dir (which must not exist) holding
 * every write made before the call: immutable table files are hard-linked, the small
 * descriptor files copied. The memtables are flushed first, unless the store has
 * wal_checkpoint_bytes and its live WAL is smaller than that: then the WAL is written
 * out and copied (trimmed to what was written), and opening the copy replays it. The
 * copy is what gets uploaded by the worker's checkpoint module.
 */
/* Flushes family's memtable to files, after any flush already running: after a large
 * value was written, so that the memtable does not keep it until the next checkpoint.
 * A failure is logged (the next checkpoint flushes it, or fails loudly). */
void cdc_state_flush_start(cdc_state_t *st, int family);

cdc_err_t cdc_state_checkpoint(cdc_state_t *st, const char *dir, cdc_error_t *e);

/* Forces a full compaction (drops expired entries); used by tests and maintenance. */
void cdc_state_compact(cdc_state_t *st);

/* Bytes on disk (live table files) plus bytes in memtables, all families. */
uint64_t cdc_state_size(cdc_state_t *st);

/* Estimated number of keys in a family (RocksDB's estimate). */
uint64_t cdc_state_estimate_keys(cdc_state_t *st, int family);

/* Whether name (a file name inside a store or checkpoint directory) is an immutable
 * table file (content never changes under the same name within one database lineage). */
bool cdc_state_file_is_immutable(const char *name);

#endif
