/*
 * The epoch state machine of one assignment generation (docs/design.md, "The epoch
 * protocol", steps 1-3 and 5). It hands out epoch ids for barriers, collects acks, and declares an
 * epoch complete only when the acked partition ids form the SET of all 12 slots, each acked by the
 * worker that owns it in this generation. Acks from another term or generation, for unknown epochs,
 * for slots the sender does not own, or repeating a slot are rejected whole, so a zombie worker's
 * files never enter a checkpoint. Completed epochs leave in epoch order. Pure logic over the
 * protocol types; the caller passes the clock.
 *
 * Epoch ids come from a reserved range [next, limit) that the caller obtains from etcd
 * (see leader.c): ids are never reused, also across terms and after aborts.
 */
#ifndef CDC_COORDINATOR_EPOCH_H
#define CDC_COORDINATOR_EPOCH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "coordinator/assign.h"
#include "coordinator/checkpoint.h"

#define CDC_EPOCH_MAX_INFLIGHT 64

typedef enum cdc_ack_result {
    CDC_ACK_ACCEPTED = 0,  /* recorded, epoch still incomplete */
    CDC_ACK_COMPLETE,      /* recorded, epoch now covers all slots */
    CDC_ACK_STALE,         /* other term or generation */
    CDC_ACK_UNKNOWN_EPOCH, /* no barrier of this generation with that id is open */
    CDC_ACK_NOT_OWNER,     /* names a slot the sender does not own in this generation */
    CDC_ACK_DUPLICATE,     /* a slot was already acked for this epoch */
    CDC_ACK_INVALID,       /* malformed (slot out of range, file of a foreign slot) */
} cdc_ack_result_t;

const char *cdc_ack_result_str(cdc_ack_result_t r);

typedef struct cdc_epoch_open {
    uint64_t epoch;
    int64_t barrier_ms;    /* monotonic time the barrier was sent */
    int64_t barrier_wall;  /* wall clock, for the record */
    cdc_pset_t acked;      /* slots acked so far */
    cdc_checkpoint_t *rec; /* record being assembled, owned */
} cdc_epoch_open_t;

typedef struct cdc_epochs {
    char job[128];
    uint64_t term;
    uint64_t generation;
    char owner[CDC_PARTITIONS][CDC_WORKER_ID_MAX]; /* owner of each slot in this generation */
    uint64_t next_epoch;                           /* next id to hand out */
    uint64_t limit;                                /* first id not reserved */
    uint64_t last_completed;                       /* highest epoch that left via take */
    cdc_epoch_open_t open[CDC_EPOCH_MAX_INFLIGHT]; /* ascending epoch order */
    int nopen;
    /* when each slot last acked in this generation (monotonic ms, 0 = not yet): a slot
     * acks its epochs in order, so it starts on an epoch when it acked the one before */
    int64_t slot_acked_ms[CDC_PARTITIONS];
} cdc_epochs_t;

void cdc_epochs_init(cdc_epochs_t *t, const char *job);

/* Frees every open epoch. */
void cdc_epochs_clear(cdc_epochs_t *t);

/*
 * Starts a new generation: drops every open epoch (they are aborted) and records the
 * term, generation and owners (owner[p] = worker id of slot p).
 */
void cdc_epochs_reset(cdc_epochs_t *t, uint64_t term, uint64_t generation,
                      const char *const owner[CDC_PARTITIONS]);

/* Adds reserved epoch ids [from, limit); from must not go below next_epoch. */
void cdc_epochs_reserve(cdc_epochs_t *t, uint64_t from, uint64_t limit);

/* Ids left in the reserved range. */
uint64_t cdc_epochs_remaining(const cdc_epochs_t *t);

/*
 * Opens the next epoch at now_ms / wall_ms and returns its id in *epoch.
 * CDC_ERR_UNAVAILABLE when no reserved id is left, CDC_ERR_CONFLICT when too many
 * epochs are open (commits are behind: the caller should wait).
 */
cdc_err_t cdc_epochs_begin(cdc_epochs_t *t, int64_t now_ms, int64_t wall_ms, uint64_t *epoch);

/* Applies an ack received at wall_ms. Never takes ownership of ack. */
/* The protocol's Ack (proto/cdc.proto; common/msg.h decodes it). */
struct Cdc__Ack;

cdc_ack_result_t cdc_epochs_ack(cdc_epochs_t *t, const struct Cdc__Ack *ack, int64_t wall_ms,
                                cdc_error_t *e);

/*
 * Removes the oldest open epoch if it is complete and returns its record (caller owns),
 * else NULL. Call until NULL after each COMPLETE ack.
 */
cdc_checkpoint_t *cdc_epochs_take_complete(cdc_epochs_t *t);

/* Notes that the slots acked at now_ms (monotonic), for cdc_epochs_overdue. */
void cdc_epochs_note_acked(cdc_epochs_t *t, cdc_pset_t slots, int64_t now_ms);

/*
 * True when a slot has worked on the oldest open epoch for longer than deadline_ms
 * without acking it: since the epoch's barrier, or since the slot acked the epoch
 * before when that came later (epochs queue at a slow worker; docs/protocol.md, "Ack
 * deadline"). Sets *epoch and *missing (the slots past their deadline).
 */
bool cdc_epochs_overdue(const cdc_epochs_t *t, int64_t now_ms, int64_t deadline_ms, uint64_t *epoch,
                        cdc_pset_t *missing);

/* Lowest open epoch id, or 0 when none is open. */
uint64_t cdc_epochs_oldest_open(const cdc_epochs_t *t);

#endif
