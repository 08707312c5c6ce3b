/*
 * The cryptography the control plane needs, as the project's one adapter of OpenSSL's
 * libcrypto (only common/crypto.c includes <openssl/...>): HMAC-SHA256 for the proofs
 * workers give at registration (common/workerauth.h), random bytes for the nonces the
 * coordinator issues, and comparisons whose time does not depend on where the inputs
 * differ, so that a secret cannot be found byte by byte from response times
 * (docs/security.md); SHA-256 and keyed HMAC-SHA-256 objects for the worker's column
 * masking (docs/worker.md, "Column masking": hashed columns and the policy's digest).
 * Every function is thread-safe, except that one cdc_hmac_t is used by one thread at a
 * time.
 */
#ifndef CDC_CRYPTO_H
#define CDC_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CDC_CRYPTO_SHA256_LEN 32
#define CDC_SHA256_LEN CDC_CRYPTO_SHA256_LEN

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

/* SHA-256 of data[0..n) into out. */
void cdc_sha256(const void *data, size_t n, uint8_t out[CDC_SHA256_LEN]);

/* HMAC-SHA-256 (RFC 2104) under one key, for many messages: the key is set up once (a
 * message then costs about a fifth of a one-shot call). One thread at a time. */
typedef struct cdc_hmac cdc_hmac_t;

/* A keyed HMAC for key[0..key_len) (copied). *out is the caller's (cdc_hmac_free). */
cdc_err_t cdc_hmac_new(const void *key, size_t key_len, cdc_hmac_t **out, cdc_error_t *e);
void cdc_hmac_free(cdc_hmac_t *h);

/* HMAC-SHA-256 of data[0..n) into out. False only when libcrypto fails (out of memory);
 * out is then unspecified. */
bool cdc_hmac_sha256(cdc_hmac_t *h, const void *data, size_t n, uint8_t out[CDC_SHA256_LEN]);

/*
 * Checks a PEM certificate (the first of cert_pem) against its PEM private key: both parse
 * and the key is the certificate's (common/tls.c, whose TLS library checks neither before
 * a handshake). *not_after: the certificate's expiry, seconds since the epoch. CDC_ERR_CONFIG
 * saying which part is wrong.
 */
cdc_err_t cdc_crypto_check_cert_key(const char *cert_pem, const char *key_pem, int64_t *not_after,
                                    cdc_error_t *e);

#endif
