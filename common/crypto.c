/*
 * SHA-256 and HMAC-SHA-256 through OpenSSL's libcrypto (see crypto.h): one-shot calls,
 * no state kept between them, so any thread may call them.
 */
#include "common/crypto.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

void cdc_sha256(const void *data, size_t n, uint8_t out[CDC_SHA256_LEN])
{
    SHA256(data, n, out);
}

bool cdc_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n,
                     uint8_t out[CDC_SHA256_LEN])
{
    unsigned int len = 0;
    static const uint8_t empty[1];
    /* HMAC() takes NULL data as "no input", but a NULL key as "reuse the last one" */
    if (HMAC(EVP_sha256(), key_len > 0 ? key : empty, (int)key_len, n > 0 ? data : empty, n, out,
             &len) == NULL)
        return false;
    return len == CDC_SHA256_LEN;
}
