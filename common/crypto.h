/*
 * The cryptography the control plane needs, as the project's one adapter of OpenSSL's
 * libcrypto (only common/crypto.c includes <openssl/...>): HMAC-SHA256 for the proofs
 * workers give at registration (common/workerauth.h), random bytes for the nonces the
 * coordinator issues, and comparisons whose time does not depend on where the inputs
 * differ, so that a secret cannot be found byte by byte from response times
 * (docs/security.md). Every function is thread-safe.
 */
#ifndef CDC_CRYPTO_H
#define CDC_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CDC_CRYPTO_SHA256_LEN 32

/* HMAC-SHA256 of msg under key, into out. CDC_ERR_INTERNAL when libcrypto fails. */
cdc_err_t cdc_crypto_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                                 uint8_t out[CDC_CRYPTO_SHA256_LEN], cdc_error_t *e);

/* Fills buf with n bytes from the system's cryptographic random generator.
 * CDC_ERR_INTERNAL when it fails. */
cdc_err_t cdc_crypto_random(void *buf, size_t n, cdc_error_t *e);

/* Whether the n bytes at a and b are equal, in a time that depends on n only. */
bool cdc_crypto_equal(const void *a, const void *b, size_t n);

/*
 * Whether the strings a (a_len bytes) and b (b_len bytes) are equal, in a time that does
 * not depend on where they differ nor reveal b's length: their SHA-256 digests are
 * compared. For a secret (b) and what a client sent (a). False when libcrypto fails.
 */
bool cdc_crypto_secret_equal(const char *a, size_t a_len, const char *b, size_t b_len);

#endif
