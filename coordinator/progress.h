/*
 * The coordinator's progress check (docs/protocol.md, "Progress check"): from what it
 * already has, the completed checkpoints' offsets and the high watermarks the owners
 * report with their acks, it finds the two ways a partition slot can stop moving while
 * the job looks healthy:
 *   - no progress: a topic partition with records behind its checkpointed offset whose
 *     offset stays the same over at least `min_epochs` completed checkpoints spanning at
 *     least `timeout_ms` (a consumer that silently stopped fetching, found also by the
 *     worker's own watchdog; this one also covers a worker that cannot see it);
 *   - missing topic: a topic that other slots carry but the slot's owner does not
 *     consume at all (a worker started with a different table set than its peers).
 * Checkpoints that do not complete are not progress the check can judge (a job-wide halt
 * shows in /status.epochs instead): it only looks at completed ones. Pure logic; the
 * caller passes the clock and reacts to the findings (log, metric, recovery).
 *
 * Every topic a slot carries is watched, however many: a slot's topics are a sorted array
 * that grows as needed (common/buf.h), and the findings of a checkpoint are kept in an
 * array of the cdc_progress_t that grows too. cdc_progress_free releases both.
 */
#ifndef CDC_COORDINATOR_PROGRESS_H
#define CDC_COORDINATOR_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coordinator/assign.h"
#include "coordinator/checkpoint.h"

/* One source topic partition of a slot. */
typedef struct cdc_progress_topic {
    char *topic;        /* owned; its address does not change while the entry lives */
    int64_t high;       /* end of the topic partition, as the owner last reported (0 = unknown) */
    int64_t stalled_ms; /* the owner's own watchdog: stalled this long (0 = not) */
    int64_t offset;     /* checkpointed next offset (-1 = not in a checkpoint yet) */
    int64_t since_ms;   /* when the offset last moved, or had nothing behind it */
    uint64_t epochs;    /* checkpoints completed since then */
    bool no_progress;   /* flagged by the check */
    /* the offset a recovery for no progress was made at (-1 = none): kept by
     * cdc_progress_reset, so a slot that a recovery did not move is not recovered again
     * at the same offset (a topic of a transactional producer ends in a control record:
     * its checkpointed offset stays one below the high watermark for good) */
    int64_t recovered_at;
} cdc_progress_topic_t;

typedef struct cdc_progress_slot {
    cdc_progress_topic_t *t; /* n topics sorted by name (common/buf.h array) */
    int n;
    size_t cap;
    char missing[256]; /* a topic the owner does not consume ("" = none) */
} cdc_progress_slot_t;

/* A finding, new in this checkpoint. */
typedef enum cdc_progress_kind {
    CDC_PROGRESS_NO_PROGRESS = 1,
    CDC_PROGRESS_MISSING_TOPIC,
} cdc_progress_kind_t;

typedef struct cdc_progress_finding {
    cdc_progress_kind_t kind;
    uint32_t partition;
    const char *topic; /* points into the cdc_progress_t */
    int64_t offset;    /* no progress: the offset it stays at */
    int64_t behind;    /* no progress: records behind it */
    int64_t for_ms;    /* no progress: since how long */
    bool again;        /* no progress: at the offset a recovery was already made at */
} cdc_progress_finding_t;

typedef struct cdc_progress {
    int64_t timeout_ms; /* 0 = the no-progress check is off */
    int min_epochs;
    cdc_progress_slot_t slot[CDC_PARTITIONS];
    cdc_progress_finding_t *found; /* the last checkpoint's findings (common/buf.h array) */
    size_t found_cap;
} cdc_progress_t;

void cdc_progress_init(cdc_progress_t *p, int64_t timeout_ms, int min_epochs);

/* Frees every topic entry and the findings; p is empty (init it again to use it). */
void cdc_progress_free(cdc_progress_t *p);

/* Starts every clock afresh (a new assignment: new owners), forgetting what the owners
 * reported; keeps the offsets recoveries were made at. */
void cdc_progress_reset(cdc_progress_t *p);

/* Notes that the job recovers because of finding f (the next finding at the same offset
 * has `again` set). */
void cdc_progress_recovering(cdc_progress_t *p, const cdc_progress_finding_t *f);

/* Notes what slot `partition`'s owner reported for topic with an ack. True when the
 * owner's watchdog reports the topic partition stalled and did not before. (Only running
 * out of memory leaves a topic unwatched; it is tried again with the next report.) */
bool cdc_progress_note_high(cdc_progress_t *p, uint32_t partition, const char *topic, int64_t high,
                            int64_t stalled_ms);

/*
 * Judges a completed checkpoint at now_ms. *out gets the new findings (a slot already
 * flagged is not reported again until it recovered), owned by p and valid until the next
 * call; returns how many. A finding that memory cannot hold is not flagged either, so the
 * next checkpoint finds it again.
 */
int cdc_progress_checkpoint(cdc_progress_t *p, const cdc_checkpoint_t *ck, int64_t now_ms,
                            const cdc_progress_finding_t **out);

/* The slot's entry for topic, NULL when it has none (a binary search). */
const cdc_progress_topic_t *cdc_progress_find(const cdc_progress_slot_t *s, const char *topic);

/* Slots flagged now, either way (for a gauge). */
int cdc_progress_flagged(const cdc_progress_t *p);

#endif
