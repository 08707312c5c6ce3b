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

#define CDC_SHA256_LEN 32

/* SHA-256 of data[0..n) into out. */
void cdc_sha256(const void *data, size_t n, uint8_t out[CDC_SHA256_LEN]);

/* HMAC-SHA-256 (RFC 2104) of data[0..n) under key[0..key_len) into out. False only when
 * libcrypto fails (out of memory); out is then unspecified. */
bool cdc_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n,
                     uint8_t out[CDC_SHA256_LEN]);

#endif
