/*
 * Worker membership: who is registered, on which NNG pipe, with which incarnation, and
 * when each was last heard from. A worker is identified by its stable id (--id); a new
 * incarnation (process restart) or a new pipe under the same id replaces the old entry.
 * A worker is lost when its pipe goes away, when it misses heartbeats for longer than
 * the timeout, or when the epoch logic declares it (missed ack deadline). Lost workers
 * are remembered (lost_ms) so the rebalance grace period can give their partitions back
 * when they return. Pure logic; the caller passes the clock.
 *
 * The table has no fixed size: it grows (common/buf.h) as workers register. It owns its
 * members and each member owns its topics: a member is never copied with `=` outside this
 * module, and a pointer to one is valid until the next cdc_members_register or
 * cdc_members_forget (either may move the array).
 */
#ifndef CDC_COORDINATOR_MEMBERSHIP_H
#define CDC_COORDINATOR_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coordinator/assign.h"
#include "coordinator/tableset.h"

#define CDC_MEMBER_DLQ_CLASSES 16

/* Dead letters of one error class a worker reported with its heartbeats. */
typedef struct cdc_member_dlq {
    char error_class[32];
    uint64_t records; /* since the worker process started */
} cdc_member_dlq_t;

typedef struct cdc_member {
    char id[CDC_WORKER_ID_MAX];
    uint64_t incarnation;
    uint32_t pipe; /* 0 = none */
    bool alive;
    int64_t registered_ms;
    int64_t last_heartbeat_ms;
    int64_t lost_ms; /* when it was declared lost, 0 while alive */
    char lost_reason[96];
    char admin[128]; /* worker's admin endpoint, may be "" */
    uint64_t heartbeats;
    cdc_member_dlq_t dlq[CDC_MEMBER_DLQ_CLASSES]; /* as last reported */
    uint64_t large_event_bytes; /* its last heartbeat's (a large event worked on; 0 = none) */
    int ndlq;
    /* The topics it can consume, from its Register (tableset.h), or, when it follows the
     * job's tables (Register.follows_tables), its offer, kept current by its heartbeats;
     * topics_known false when it reported none and does not follow (it is then not judged). */
    cdc_tableset_t topics;
    bool topics_known;
    bool follows; /* consumes whatever set its Assign gives: never refused for a table */
    /* Whether its topics are the job's table set, as last judged (job.c), and why not. */
    cdc_tableset_verdict_t verdict;
    char refused[640];
} cdc_member_t;

typedef struct cdc_members {
    cdc_member_t *m; /* n members, registration order (common/buf.h array) */
    int n;
    size_t cap;
} cdc_members_t;

typedef enum cdc_register_result {
    CDC_REGISTER_NEW = 0,  /* first time this id is seen, or it was lost */
    CDC_REGISTER_REPLACED, /* id was alive on another pipe or incarnation: old one dropped */
    CDC_REGISTER_SAME,     /* duplicate Register on the same pipe and incarnation */
    CDC_REGISTER_NOMEM,    /* out of memory for a new member */
    CDC_REGISTER_INVALID,  /* empty or too long id (CDC_WORKER_ID_MAX) */
} cdc_register_result_t;

/* An empty table (the same as a zeroed one). */
void cdc_members_init(cdc_members_t *ms);

/* Forgets every member, freeing what they own; the table stays usable. */
void cdc_members_clear(cdc_members_t *ms);

/* Frees the table and its members: it is empty again (cdc_members_init). */
void cdc_members_free(cdc_members_t *ms);

/* Registers id on pipe. *old_pipe (may be NULL) gets the replaced pipe (0 = none). */
cdc_register_result_t cdc_members_register(cdc_members_t *ms, const char *id, uint64_t incarnation,
                                           uint32_t pipe, const char *admin, int64_t now_ms,
                                           uint32_t *old_pipe);

/* Finds the alive member on pipe; NULL when none. */
cdc_member_t *cdc_members_by_pipe(cdc_members_t *ms, uint32_t pipe);

/* Finds a member by id (alive or lost); NULL when unknown. */
cdc_member_t *cdc_members_by_id(cdc_members_t *ms, const char *id);

/* Keeps the topics a Register reported (n names; 0 and !follows = none reported, not
 * judged) and whether the worker follows the job's tables. An empty name is dropped and
 * makes *e say so (CDC_ERR_INVALID), as does running out of memory (CDC_ERR_NOMEM). The
 * verdict of the member is reset: the caller judges it again. */
cdc_err_t cdc_members_note_topics(cdc_member_t *m, const char *const *topics, size_t n,
                                  bool follows, cdc_error_t *e);

/* Replaces the offer of a member that follows the job's tables with the n topics of its
 * heartbeat (0: unchanged). Returns whether the offer changed; an empty name is dropped,
 * and an offer that memory does not hold leaves the one before. No-op (false) for a member that
 * does not follow. */
bool cdc_members_note_offer(cdc_member_t *m, const char *const *topics, size_t n);

/* Records a heartbeat from pipe; false when no alive member has that pipe. */
bool cdc_members_heartbeat(cdc_members_t *ms, uint32_t pipe, int64_t now_ms);

/* Keeps the dead letters a heartbeat reported: n classes (the first
 * CDC_MEMBER_DLQ_CLASSES) with their counts; an incarnation that reports none keeps 0. */
void cdc_members_note_dlq(cdc_member_t *m, const char *const *classes, const uint64_t *records,
                          size_t n);

/* Marks the member lost (keeps it for the grace logic). */
void cdc_members_lose(cdc_member_t *m, int64_t now_ms, const char *reason);

/*
 * Marks every alive member silent for longer than timeout_ms as lost and returns how
 * many; their old pipes are written to pipes (room for ms->n, or NULL) for closing.
 */
int cdc_members_expire(cdc_members_t *ms, int64_t now_ms, int64_t timeout_ms, uint32_t *pipes);

/* Alive member ids in registration-table order; returns the count (<= cap). */
int cdc_members_alive_ids(const cdc_members_t *ms, const char **ids, int cap);

/* Number of alive members. */
int cdc_members_alive_count(const cdc_members_t *ms);

/* Whether a member with this id is alive. */
bool cdc_members_is_alive(const cdc_members_t *ms, const char *id);

/* Forgets members lost before now_ms - keep_ms, freeing what they own. */
void cdc_members_forget(cdc_members_t *ms, int64_t now_ms, int64_t keep_ms);

#endif
