/*
 * Admission of workers (see admission.h): a small table of the pipes being challenged,
 * each with its nonce and the time of its first challenge. A proof-less Register on a
 * pipe already challenged gets the same nonce again (the worker may have registered again
 * before it saw the first challenge, and then answers both: a new nonce would make its
 * first answer a wrong proof) and keeps the deadline, so asking again and again buys no
 * time. A nonce still serves one proof only.
 */
#include "coordinator/admission.h"

#include <stdio.h>
#include <string.h>

#include "common/crypto.h"

const char *cdc_admission_reason_name(cdc_admission_reason_t r)
{
    static const char *const names[CDC_ADMISSION_REASONS] = {
        [CDC_ADMISSION_NO_PROOF] = "no_proof",
        [CDC_ADMISSION_WRONG_PROOF] = "wrong_proof",
        [CDC_ADMISSION_UNCHALLENGED] = "unchallenged",
    };
    return (unsigned)r < CDC_ADMISSION_REASONS ? names[r] : "unknown";
}

void cdc_admission_init(cdc_admission_t *a, const char *secret)
{
    memset(a, 0, sizeof(*a));
    a->secret = secret != NULL && secret[0] != '\0' ? secret : NULL;
}

bool cdc_admission_required(const cdc_admission_t *a)
{
    return a->secret != NULL;
}

static int find(const cdc_admission_t *a, uint32_t pipe)
{
    for (int i = 0; i < a->npending; i++)
        if (a->pending[i].pipe == pipe)
            return i;
    return -1;
}

static void drop(cdc_admission_t *a, int i)
{
    memset(a->pending[i].nonce, 0, sizeof(a->pending[i].nonce));
    a->pending[i] = a->pending[--a->npending];
}

static void refuse(cdc_admission_t *a, uint32_t pipe, const char *worker_id,
                   cdc_admission_reason_t reason, int64_t now_ms)
{
    a->refused[reason]++;
    snprintf(a->last.worker, sizeof(a->last.worker), "%s", worker_id ? worker_id : "");
    a->last.pipe = pipe;
    a->last.reason = reason;
    a->last.at_ms = now_ms > 0 ? now_ms : 1;
}

cdc_err_t cdc_admission_check(cdc_admission_t *a, uint32_t pipe, const char *worker_id,
                              uint64_t incarnation, const char *admin, const uint8_t *proof,
                              size_t proof_len, int64_t now_ms,
                              uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN],
                              cdc_admission_verdict_t *verdict, cdc_admission_reason_t *reason,
                              cdc_error_t *e)
{
    int i = find(a, pipe);

    *verdict = CDC_ADMISSION_ADMIT;
    if (a->secret == NULL)
        return CDC_OK;
    if (proof_len == 0) {
        if (i >= 0) { /* challenged again: the same nonce */
            snprintf(a->pending[i].worker, sizeof(a->pending[i].worker), "%s",
                     worker_id ? worker_id : "");
            memcpy(nonce, a->pending[i].nonce, CDC_WORKERAUTH_NONCE_LEN);
            *verdict = CDC_ADMISSION_CHALLENGE;
            return CDC_OK;
        }
        {
            if (a->npending == CDC_ADMISSION_PENDING_MAX) { /* a flood: the oldest goes */
                int oldest = 0;
                for (int k = 1; k < a->npending; k++)
                    if (a->pending[k].first_ms < a->pending[oldest].first_ms)
                        oldest = k;
                drop(a, oldest);
            }
            i = a->npending++;
            a->pending[i].pipe = pipe;
            a->pending[i].first_ms = now_ms;
        }
        snprintf(a->pending[i].worker, sizeof(a->pending[i].worker), "%s",
                 worker_id ? worker_id : "");
        if (cdc_crypto_random(a->pending[i].nonce, CDC_WORKERAUTH_NONCE_LEN, e) != CDC_OK) {
            drop(a, i);
            return e->code;
        }
        memcpy(nonce, a->pending[i].nonce, CDC_WORKERAUTH_NONCE_LEN);
        *verdict = CDC_ADMISSION_CHALLENGE;
        return CDC_OK;
    }
    if (i < 0) {
        *reason = CDC_ADMISSION_UNCHALLENGED;
    } else {
        bool ok = cdc_workerauth_verify(a->secret, a->pending[i].nonce, CDC_WORKERAUTH_NONCE_LEN,
                                        worker_id, incarnation, admin, proof, proof_len);
        drop(a, i); /* a nonce is good for one proof */
        if (ok)
            return CDC_OK;
        *reason = CDC_ADMISSION_WRONG_PROOF;
    }
    refuse(a, pipe, worker_id, *reason, now_ms);
    *verdict = CDC_ADMISSION_REFUSE;
    return CDC_OK;
}

bool cdc_admission_pending(const cdc_admission_t *a, uint32_t pipe)
{
    return find(a, pipe) >= 0;
}

void cdc_admission_forget(cdc_admission_t *a, uint32_t pipe)
{
    int i = find(a, pipe);
    if (i >= 0)
        drop(a, i);
}

int cdc_admission_expire(cdc_admission_t *a, int64_t now_ms, cdc_admission_pending_t *out, int cap)
{
    int n = 0;

    for (int i = 0; i < a->npending && n < cap;) {
        if (now_ms - a->pending[i].first_ms > CDC_ADMISSION_DEADLINE_MS) {
            refuse(a, a->pending[i].pipe, a->pending[i].worker, CDC_ADMISSION_NO_PROOF, now_ms);
            out[n] = a->pending[i];
            memset(out[n].nonce, 0, sizeof(out[n].nonce));
            n++;
            drop(a, i);
        } else {
            i++;
        }
    }
    return n;
}

uint64_t cdc_admission_refused_total(const cdc_admission_t *a)
{
    uint64_t n = 0;
    for (int i = 0; i < CDC_ADMISSION_REASONS; i++)
        n += a->refused[i];
    return n;
}
