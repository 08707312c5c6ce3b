/*
 * What a commit left in a table, for /status and the dashboard (docs/operations.md,
 * "Dashboard"): the totals of its current snapshot (records, equality deletes, data and
 * delete files, bytes), how many snapshots it keeps, and what the committed epoch added:
 * its data rows and, in a changelog, the range of their source commit times (the files'
 * _source_ts bounds), from which the freshness of the epoch's changes follows. Read
 * from the table the committer holds right after its commit: nothing is read back.
 */
#ifndef CDC_COORDINATOR_TABLE_STATS_H
#define CDC_COORDINATOR_TABLE_STATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/hash.h"
#include "common/iceberg/table.h"

/* Name of the changelog's source commit time column (docs/worker.md, "Staging"). */
#define CDC_CHANGELOG_SOURCE_TS "_source_ts"
/* Suffix of a changelog table's name: "<ns>.<table>_changelog". */
#define CDC_CHANGELOG_SUFFIX "_changelog"

typedef struct cdc_table_stats {
    char table[256];         /* "<ns>.<table>" in the warehouse */
    uint64_t epoch;          /* the checkpoint last committed to it */
    int64_t committed_at_ms; /* wall clock when that snapshot became visible */
    int64_t added_records;   /* data rows the epoch added */
    int64_t source_min_ms;   /* their _source_ts bounds, ms (0 = none: not a changelog) */
    int64_t source_max_ms;
    /* totals of the current snapshot */
    int64_t records;
    int64_t equality_deletes;
    int64_t data_files;
    int64_t delete_files;
    int64_t files_bytes;
    int64_t snapshots; /* kept in the metadata */
    /* maintenance (maintenance.h), since this process leads */
    int64_t compactions;        /* rewrites committed */
    int64_t last_compaction_ms; /* wall clock of the last one (0 = none) */
    int64_t bytes_rewritten;    /* input bytes the committed rewrites read */
    int64_t files_rewritten;    /* input files they removed */
    int64_t committed_bytes;    /* bytes of the files the epoch commits added */
} cdc_table_stats_t;

/* The statistics of every table a committer committed to, however many (tables commit on
 * threads of their own: every function takes the set's lock). Entries are allocated one
 * by one, so that the index by name can borrow each entry's own name as its key. */
typedef struct cdc_table_stats_set {
    pthread_mutex_t lock;
    cdc_table_stats_t **tables; /* in the order first noted */
    size_t n, cap;
    cdc_strmap_t by_name; /* table -> its entry */
} cdc_table_stats_set_t;

void cdc_table_stats_init(cdc_table_stats_set_t *set);
void cdc_table_stats_destroy(cdc_table_stats_set_t *set);

/* Replaces table's entry (added when new) with what epoch's commit left: t holds the new version,
 * data[0..ndata) are the epoch's data files of the table (only read), added_bytes the size of every
 * file the commit added (data and delete files; summed into committed_bytes). */
void cdc_table_stats_note(cdc_table_stats_set_t *set, const char *table, const cdc_ice_table_t *t,
                          uint64_t epoch, const cdc_ice_data_file_t *data, size_t ndata,
                          int64_t added_bytes);

/* Notes a committed compaction of table (t holds the new version): the totals of its
 * current snapshot and the maintenance counters; the epoch fields stay. */
void cdc_table_stats_note_compaction(cdc_table_stats_set_t *set, const char *table,
                                     const cdc_ice_table_t *t, int64_t bytes_rewritten,
                                     int64_t files_rewritten);

/* Copies all the entries, in the order first noted, into *out[0..*n), an array the caller
 * frees (free()); CDC_ERR_NOMEM with *out NULL and *n 0 when memory ran out. */
cdc_err_t cdc_table_stats_copy(cdc_table_stats_set_t *set, cdc_table_stats_t **out, size_t *n);

/*
 * Fills s for table (just committed by epoch at at_ms, t holding the new version) from t
 * and the epoch's data files data[0..ndata) of the table (only read).
 */
void cdc_table_stats_fill(cdc_table_stats_t *s, const char *table, const cdc_ice_table_t *t,
                          uint64_t epoch, int64_t at_ms, const cdc_ice_data_file_t *data,
                          size_t ndata);

/* Rows a mirror holds: its records less its equality deletes, each of which removes one
 * earlier row (worker/stage.h: a key gets a delete only when it was live before). */
int64_t cdc_table_stats_rows(const cdc_table_stats_t *s);

#endif
