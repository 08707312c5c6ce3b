/*
 * Transaction tracking for the flush LSN the capture confirms to PostgreSQL. Every
 * decoded transaction gets an entry in arrival (commit) order; each event produced for
 * it counts as pending until Kafka acknowledges it. The confirmable LSN is the commit
 * end LSN of the longest prefix of transactions that are committed (their Commit
 * message arrived) and have no pending events, so a confirmed LSN never covers an
 * event Kafka has not acknowledged. A delivery failure poisons the tracker: nothing
 * more is ever confirmed by it, and the capture restarts from the last confirmed LSN.
 * Single-threaded: delivery reports are served by the thread that produces.
 */
#ifndef CDC_CAPTURE_TXTRACK_H
#define CDC_CAPTURE_TXTRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cdc_txtrack_entry {
    uint64_t end_lsn;
    uint64_t pending;
    bool committed;
} cdc_txtrack_entry_t;

typedef struct cdc_txtrack {
    cdc_txtrack_entry_t *ring;
    size_t cap;         /* power of two */
    uint64_t head_id;   /* id of the oldest live entry */
    uint64_t next_id;   /* id the next cdc_txtrack_begin() returns */
    uint64_t confirmed; /* highest confirmable LSN so far (0 = none yet) */
    uint64_t inflight;  /* events produced and not yet acknowledged, all entries */
    bool failed;
} cdc_txtrack_t;

/* Starts with `confirmed` = the slot's confirmed_flush_lsn (never goes backwards). */
void cdc_txtrack_init(cdc_txtrack_t *t, uint64_t confirmed);
void cdc_txtrack_free(cdc_txtrack_t *t);

/* Opens a transaction entry; returns its id (opaque for delivery reports). 0 on OOM. */
uint64_t cdc_txtrack_begin(cdc_txtrack_t *t);
/* One more event of transaction `id` handed to the producer. */
void cdc_txtrack_add(cdc_txtrack_t *t, uint64_t id);
/* Kafka acknowledged one event of `id` (ok=true) or failed it for good (ok=false). */
void cdc_txtrack_acked(cdc_txtrack_t *t, uint64_t id, bool ok);
/* The transaction's Commit arrived; `end_lsn` is what confirming it means. */
void cdc_txtrack_commit(cdc_txtrack_t *t, uint64_t id, uint64_t end_lsn);
/* Drops acknowledged committed transactions from the head; returns the confirmable LSN. */
uint64_t cdc_txtrack_confirmable(cdc_txtrack_t *t);
/* Number of live entries (open or waiting for acks). */
size_t cdc_txtrack_live(const cdc_txtrack_t *t);

#endif
