/*
 * The committer's private state (commit.c, commit_schema.c): one struct, owned by
 * commit.c, whose tables and changes are guarded by known_lock (see below). Only the
 * committer's own files include this header; everyone else uses commit.h.
 */
#ifndef CDC_COORDINATOR_COMMIT_INT_H
#define CDC_COORDINATOR_COMMIT_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/hash.h"
#include "common/iceberg/table.h"
#include "coordinator/commit.h"
#include "coordinator/layout.h"

/* Attempts at a table's commit (or schema change) that lost a race to another writer. */
#define COMMIT_ATTEMPTS 8

/* A file that looked orphaned, and since when (orphan age without object mtimes). */
typedef struct suspect {
    char *location;
    int64_t first_seen_ms;
} suspect_t;

/*
 * A table this process met, by location. There is no limit on their number (a job of
 * thousands of source tables commits to twice as many Iceberg tables), so the index
 * grows, and that is why every entry is allocated on its own and never moved or freed
 * before the committer closes: a commit thread holds `mu` of its table, and the
 * maintenance thread another's, while a third table's first use grows the index under
 * known_lock. Growing an array of mutexes would move a mutex that a thread holds (and
 * that another waits on); growing an array of pointers to them moves nothing they use.
 */
typedef struct table {
    char *location;
    /* One lock per table, held over a commit's refresh and swap: the epoch commits and
     * the maintenance thread's (maintenance.h) take turns instead of losing races. */
    pthread_mutex_t mu;
    char *name; /* "<ns>.<table>" once committed to or discovered, else NULL (known_lock) */
    /* Kept loaded between commits (under known_lock; a commit takes it out while it
     * works on the table, NULL meanwhile): the next commit only checks that the table's
     * latest version is still the loaded one instead of parsing its metadata again. */
    cdc_ice_table_t *open;
} table_t;

struct cdc_committer {
    cdc_storage_t *storage;
    char *warehouse;
    char *job;
    _Atomic uint64_t term;      /* read by the maintenance thread too */
    pthread_mutex_t known_lock; /* tables commit in parallel (cdc_committer_commit) */
    /* every table met (under known_lock): by location, and in the order met */
    cdc_strmap_t by_location;
    table_t **tables;
    size_t ntables, tables_cap;
    table_t **known; /* those committed to or discovered (name set), in that order */
    size_t nknown, known_cap;
    suspect_t *suspects;
    size_t nsuspects;
    cdc_schema_change_t changes[CDC_SCHEMA_CHANGES_KEPT]; /* ring, under known_lock */
    size_t nchanges;                                      /* ever recorded */
    char *partition_by, *sort_by;                         /* declarations (layout.h) */
    /* Layouts applied (under known_lock), by table name and in the order applied. Each is
     * allocated on its own like the tables: apply_layout fills its table's entry in two
     * steps around the table's commit, with known_lock released in between. */
    cdc_strmap_t layout_by_name;
    cdc_table_layout_t **layouts;
    size_t nlayouts, layouts_cap;
    cdc_table_stats_set_t stats; /* after each table's last commit */
    /* Strings of layouts applied again (a source name moved to another field): callers
     * of cdc_committer_layouts may still hold them, so they live until close. */
    char **stale;
    size_t nstale, stale_cap;
};

/* ---- commit_schema.c ---- */

/* The schema update of the newest source version the record carries for a table, of
 * the newest masking policy among those (workers restarting with a new policy), the last
 * one among equals; parsed, with its policy (borrowed from rec); *found false when none. */
cdc_err_t cdc_commit_schema_for(const cdc_checkpoint_t *rec, const char *table,
                                cdc_ice_schema_t *out, int64_t *version, const char **policy,
                                bool *found, cdc_error_t *e);

/*
 * Source schemas (field ids given by column identity, common/cdcschema.h): the schema
 * of a newer source version becomes the table's schema, by field id (renames, drops,
 * promotions, new fields); the field ids are never the table's to choose. Every
 * schema the epoch's files were written with must then read correctly in the table
 * (cdc_ice_table_check_schema): a mismatch stops this table's commit.
 */
cdc_err_t cdc_commit_evolve(cdc_committer_t *c, cdc_ice_table_t *t, const cdc_checkpoint_t *rec,
                            const char *table, const cdc_ice_schema_t *want, int64_t version,
                            const char *policy, int *changes, cdc_error_t *e);

#endif
