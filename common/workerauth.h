/*
 * How a worker proves to the coordinator that it knows the shared secret (--worker-secret,
 * docs/security.md), defined once for both sides. The coordinator answers a Register
 * without a proof with a Challenge carrying a fresh nonce; the worker registers again with
 *
 *     proof = HMAC-SHA256(secret, "cdc-register-v1" || len(nonce) || nonce
 *                                 || len(worker_id) || worker_id || incarnation
 *                                 || len(admin_endpoint) || admin_endpoint)
 *
 * (lengths as 4-byte and the incarnation as 8-byte big-endian integers, so that no two
 * field lists encode alike). The nonce is the coordinator's, used once and valid on the
 * connection it was sent on only: a recorded proof is worth nothing on another
 * connection, and the secret itself never crosses the network.
 */
#ifndef CDC_COMMON_WORKERAUTH_H
#define CDC_COMMON_WORKERAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/crypto.h"
#include "common/err.h"

#define CDC_WORKERAUTH_NONCE_LEN 32
#define CDC_WORKERAUTH_PROOF_LEN CDC_CRYPTO_SHA256_LEN

/* The proof of a registration (fields as sent in the Register; NULL strings as "").
 * CDC_ERR_NOMEM or CDC_ERR_INTERNAL when it cannot be computed. */
cdc_err_t cdc_workerauth_proof(const char *secret, const uint8_t *nonce, size_t nonce_len,
                               const char *worker_id, uint64_t incarnation, const char *admin,
                               uint8_t out[CDC_WORKERAUTH_PROOF_LEN], cdc_error_t *e);

/* Whether proof (proof_len bytes) is the proof of that registration under secret,
 * compared in constant time. False also when it cannot be computed. */
bool cdc_workerauth_verify(const char *secret, const uint8_t *nonce, size_t nonce_len,
                           const char *worker_id, uint64_t incarnation, const char *admin,
                           const uint8_t *proof, size_t proof_len);

#endif
