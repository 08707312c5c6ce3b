/*
 * Cryptographic digests: SHA-256 and keyed HMAC-SHA-256, for the worker's column masking
 * (docs/worker.md, "Column masking": hashed columns and the policy's digest). The adapter
 * of OpenSSL's libcrypto (common/crypto.c is the only file that includes it); the rest of
 * the code sees byte arrays.
 */
#ifndef CDC_COMMON_CRYPTO_H
#define CDC_COMMON_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CDC_SHA256_LEN 32

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

#endif
