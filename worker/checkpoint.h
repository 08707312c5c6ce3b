/*
 * State checkpoints of one partition slot (docs/design.md, "The epoch protocol", step 2).
 * At a barrier the partition's RocksDB store is flushed and hard-linked into a local
 * checkpoint directory (common/state.h); the files RocksDB never rewrites (*.sst) are
 * uploaded to the warehouse checkpoint area only when that checkpoint is the first to
 * contain them (incremental, like Flink's RocksDB incremental checkpoints); the small
 * descriptor files (MANIFEST, CURRENT, OPTIONS) are uploaded every time. A JSON
 * manifest lists every file of the checkpoint with its location; the manifest's
 * location is the partition's state handle in the Ack and in the checkpoint record.
 *
 * Layout: <warehouse>/_checkpoints/<job>/p<P>/
 *   sst/<lineage>-<name>        shared immutable files (lineage = random id of the
 *                               local store that produced them, so two stores restored
 *                               from one checkpoint never collide on file numbers)
 *   meta/<epoch>-<rand>-<name>  descriptor files of one checkpoint (flat: no directory
 *                               per checkpoint to create, fsync and remove; earlier
 *                               versions used meta/<epoch>-<rand>/<name>, still read)
 *   m-<epoch>-<rand>.json       the manifest = state handle
 *
 * Restore downloads a manifest's files into a fresh directory (any worker can do it,
 * nobody needs the old owner's disk) unless this worker still holds the local copy of
 * exactly that checkpoint, which it then copies (hard links) instead.
 * Garbage collection after Committed{E}: manifests and files that no retained
 * checkpoint (the one acked for E, or later pending ones) refers to are deleted.
 */
#ifndef CDC_WORKER_CHECKPOINT_H
#define CDC_WORKER_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/iceberg/storage.h"

typedef struct cdc_ckpt_file {
    char *name;     /* file name inside the store directory */
    char *location; /* fully qualified location in the warehouse */
    int64_t size;
} cdc_ckpt_file_t;

/* One checkpoint this worker produced or restored (kept until GC drops it). */
typedef struct cdc_ckpt_entry {
    uint64_t epoch;
    char *handle;    /* manifest location */
    char *local_dir; /* local hard-linked copy, NULL when none */
    cdc_ckpt_file_t *files;
    size_t nfiles;
} cdc_ckpt_entry_t;

typedef struct cdc_ckpt {
    cdc_storage_t *storage; /* borrowed */
    char *root;             /* <warehouse>/_checkpoints/<job>/p<P> */
    char *local_root;       /* <state-dir>/p<P> */
    uint32_t partition;
    char lineage[17];
    cdc_ckpt_entry_t *entries; /* ascending epoch */
    size_t nentries;
    uint64_t bytes_uploaded; /* totals, for metrics */
    uint64_t files_uploaded;
} cdc_ckpt_t;

/* Statistics of one checkpoint. */
typedef struct cdc_ckpt_stats {
    uint64_t bytes_uploaded;
    uint64_t files_uploaded;
    uint64_t files_total;
    uint64_t bytes_total;
    double ms;
} cdc_ckpt_stats_t;

/*
 * Prepares checkpointing of partition p: warehouse/job name the remote area, local_root
 * the partition's local directory (created). storage is borrowed.
 */
cdc_err_t cdc_ckpt_init(cdc_ckpt_t *c, cdc_storage_t *storage, const char *warehouse,
                        const char *job, uint32_t partition, const char *local_root,
                        cdc_error_t *e);
void cdc_ckpt_free(cdc_ckpt_t *c);

/* New lineage id: call whenever a store is opened from a restored directory. */
void cdc_ckpt_new_lineage(cdc_ckpt_t *c);

/*
 * Takes checkpoint `epoch` of the store whose local checkpoint directory was just
 * created at local_dir (cdc_state_checkpoint()), uploads what is new and writes the
 * manifest. On success *handle points into the entry (owned by c).
 */
cdc_err_t cdc_ckpt_upload(cdc_ckpt_t *c, uint64_t epoch, const char *local_dir, const char **handle,
                          cdc_ckpt_stats_t *stats, cdc_error_t *e);

/*
 * Materializes checkpoint `handle` as an openable store directory at dest (which must
 * not exist): from the local copy when this worker has it, otherwise downloaded.
 * *reused tells which. Afterwards uploads from the restored store reuse the files the
 * manifest lists.
 */
cdc_err_t cdc_ckpt_restore(cdc_ckpt_t *c, const char *handle, const char *dest, bool *reused,
                           cdc_error_t *e);

/*
 * Drops checkpoints older than the one of committed epoch `epoch` (kept: that one and
 * newer), deleting their local copies, their manifests and every remote file that no
 * kept checkpoint lists.
 */
void cdc_ckpt_gc(cdc_ckpt_t *c, uint64_t committed_epoch);

/* Drops (forgets, deletes local copies and manifests of) checkpoints newer than epoch:
 * used when their epochs were abandoned. */
void cdc_ckpt_drop_after(cdc_ckpt_t *c, uint64_t epoch);

#endif
