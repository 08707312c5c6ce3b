/*
 * Fuzz target: frames between coordinator and workers (common/msg.h, proto/cdc.proto),
 * as a peer that has not authenticated yet sends them and as an admitted one does: each
 * frame is decoded and encoded again (which must decode to the same body when it decodes:
 * protobuf-c keeps an unknown field numbered 0 it read from a two-byte tag, and then
 * writes it as a one-byte tag it refuses); a Register goes through the coordinator's
 * admission under a secret (coordinator/admission.h, common/workerauth.h), with its own
 * proof and with the right one, which must admit it.
 */
#include <stdio.h>

#include "common/msg.h"
#include "common/workerauth.h"
#include "coordinator/admission.h"
#include "tests/fuzz/fuzz.h"

static void admit(const Cdc__Register *r)
{
    cdc_admission_t a;
    uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN], proof[CDC_WORKERAUTH_PROOF_LEN];
    cdc_admission_verdict_t verdict;
    cdc_admission_reason_t reason;
    cdc_error_t e;

    cdc_admission_init(&a, "fuzz-secret");
    /* its proof before any challenge, then the challenge, then its proof, then the right one */
    (void)cdc_admission_check(&a, 7, r->worker_id, r->incarnation, r->admin_endpoint, r->proof.data,
                              r->proof.len, 1, nonce, &verdict, &reason, &e);
    for (int round = 0; round < 2; round++) {
        if (cdc_admission_check(&a, 7, r->worker_id, r->incarnation, r->admin_endpoint, NULL, 0, 2,
                                nonce, &verdict, &reason, &e) != CDC_OK ||
            verdict != CDC_ADMISSION_CHALLENGE)
            return; /* no randomness: nothing to fuzz */
        const uint8_t *p = r->proof.data;
        size_t plen = r->proof.len;
        if (round == 1) {
            if (cdc_workerauth_proof("fuzz-secret", nonce, sizeof(nonce), r->worker_id,
                                     r->incarnation, r->admin_endpoint, proof, &e) != CDC_OK)
                return;
            p = proof;
            plen = sizeof(proof);
        }
        if (cdc_admission_check(&a, 7, r->worker_id, r->incarnation, r->admin_endpoint, p, plen, 3,
                                nonce, &verdict, &reason, &e) != CDC_OK)
            return;
        if (round == 1 && verdict != CDC_ADMISSION_ADMIT) {
            fprintf(stderr, "msg: the right proof was refused\n");
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Cdc__Envelope *env = NULL, *again = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    cdc_error_t e;

    if (cdc_msg_decode(data, size, &env, &e) != CDC_OK)
        return 0;
    (void)cdc_msg_body_name(env);
    if (cdc_msg_encode(env, &buf, &len, &e) == CDC_OK) {
        if (cdc_msg_decode(buf, len, &again, &e) == CDC_OK &&
            strcmp(cdc_msg_body_name(env), cdc_msg_body_name(again)) != 0) {
            fprintf(stderr, "msg: a frame encoded again does not decode alike\n");
            abort();
        }
        cdc_msg_free(again);
        free(buf);
    }
    if (env->body_case == CDC__ENVELOPE__BODY_REGISTER && env->register_ != NULL)
        admit(env->register_);
    cdc_msg_free(env);
    return 0;
}
