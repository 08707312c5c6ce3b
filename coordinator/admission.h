/*
 * Admission of workers: with --worker-secret, a Register counts only with a proof that the
 * worker knows the secret (common/workerauth.h, docs/security.md). A Register without a
 * proof gets a Challenge (a nonce for its connection, i.e. its pipe); the pipe must
 * register with the proof of that nonce within CDC_ADMISSION_DEADLINE_MS of its first
 * challenge. A wrong proof, a proof for no challenge of its pipe, or no proof in time is a
 * refusal: the caller logs it, counts it, shows it in /status and drops the pipe. Heartbeats
 * of a pipe being challenged are ignored rather than rejected (the worker sends them from
 * its own thread while it answers). Without a secret every Register is admitted, as before.
 *
 * Pure logic over pipe ids and the registration's fields; the caller passes the clock. One
 * thread (the coordinator's loop).
 */
#ifndef CDC_COORDINATOR_ADMISSION_H
#define CDC_COORDINATOR_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/workerauth.h"

#define CDC_ADMISSION_PENDING_MAX 256  /* pipes being challenged at once; the oldest go */
#define CDC_ADMISSION_DEADLINE_MS 5000 /* from a pipe's first challenge to its proof */

typedef enum cdc_admission_verdict {
    CDC_ADMISSION_ADMIT,     /* register it */
    CDC_ADMISSION_CHALLENGE, /* send Challenge{nonce} and wait for the proof */
    CDC_ADMISSION_REFUSE,    /* refuse and drop the pipe (reason set) */
} cdc_admission_verdict_t;

typedef enum cdc_admission_reason {
    CDC_ADMISSION_NO_PROOF = 0, /* challenged, no valid proof within the deadline */
    CDC_ADMISSION_WRONG_PROOF,  /* a proof that does not match the pipe's nonce */
    CDC_ADMISSION_UNCHALLENGED, /* a proof for a nonce never sent on the pipe (or expired) */
    CDC_ADMISSION_REASONS,
} cdc_admission_reason_t;

/* Metric label and /status key of a reason: "no_proof", "wrong_proof", "unchallenged". */
const char *cdc_admission_reason_name(cdc_admission_reason_t r);

typedef struct cdc_admission_pending {
    uint32_t pipe;
    char worker[128]; /* the id its Register claimed, for the refusal's log line */
    uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN];
    int64_t first_ms; /* first challenge of the pipe: the deadline runs from here */
} cdc_admission_pending_t;

/* The last refusal, for /status. */
typedef struct cdc_admission_refusal {
    char worker[128]; /* the id it claimed ("" when none) */
    uint32_t pipe;
    cdc_admission_reason_t reason;
    int64_t at_ms; /* monotonic; 0 = never */
} cdc_admission_refusal_t;

typedef struct cdc_admission {
    const char *secret; /* borrowed; NULL = admission is open */
    cdc_admission_pending_t pending[CDC_ADMISSION_PENDING_MAX];
    int npending;
    uint64_t refused[CDC_ADMISSION_REASONS];
    cdc_admission_refusal_t last;
} cdc_admission_t;

/* secret NULL or "" = no authentication. The secret is borrowed (the configuration's). */
void cdc_admission_init(cdc_admission_t *a, const char *secret);

/* Whether workers must prove the secret. */
bool cdc_admission_required(const cdc_admission_t *a);

/*
 * Judges a Register received on pipe into *verdict. CHALLENGE: nonce
 * (CDC_WORKERAUTH_NONCE_LEN bytes) is to be sent in a Challenge. REFUSE: *reason says why,
 * the refusal is counted and recorded. CDC_ERR_INTERNAL when no nonce could be drawn
 * (nothing is admitted; the caller drops the pipe).
 */
cdc_err_t cdc_admission_check(cdc_admission_t *a, uint32_t pipe, const char *worker_id,
                              uint64_t incarnation, const char *admin, const uint8_t *proof,
                              size_t proof_len, int64_t now_ms,
                              uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN],
                              cdc_admission_verdict_t *verdict, cdc_admission_reason_t *reason,
                              cdc_error_t *e);

/* Whether pipe is being challenged (its heartbeats are ignored, not rejected). */
bool cdc_admission_pending(const cdc_admission_t *a, uint32_t pipe);

/* Forgets a pipe that went away. */
void cdc_admission_forget(cdc_admission_t *a, uint32_t pipe);

/* The pipes whose deadline passed: refused (NO_PROOF, counted and recorded), forgotten and
 * written to out (capacity cap, with the worker id each claimed); returns how many. */
int cdc_admission_expire(cdc_admission_t *a, int64_t now_ms, cdc_admission_pending_t *out, int cap);

/* Refusals so far, all reasons. */
uint64_t cdc_admission_refused_total(const cdc_admission_t *a);

#endif
