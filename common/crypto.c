/*
 * OpenSSL libcrypto behind the project's types (see crypto.h): one-shot HMAC and digest
 * calls, RAND_bytes and CRYPTO_memcmp. No state is kept, so nothing needs initialising
 * or freeing (OpenSSL 3 initialises itself on first use).
 */
#include "common/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

cdc_err_t cdc_crypto_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                                 uint8_t out[CDC_CRYPTO_SHA256_LEN], cdc_error_t *e)
{
    unsigned int len = 0;

    if (key_len > (size_t)INT32_MAX ||
        HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &len) == NULL ||
        len != CDC_CRYPTO_SHA256_LEN)
        return cdc_error_set(e, CDC_ERR_INTERNAL, "could not compute an HMAC-SHA256 (libcrypto)");
    return CDC_OK;
}

cdc_err_t cdc_crypto_random(void *buf, size_t n, cdc_error_t *e)
{
    if (n > (size_t)INT32_MAX || RAND_bytes(buf, (int)n) != 1)
        return cdc_error_set(e, CDC_ERR_INTERNAL,
                             "could not read %zu random bytes (libcrypto's generator failed)", n);
    return CDC_OK;
}

bool cdc_crypto_equal(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

bool cdc_crypto_secret_equal(const char *a, size_t a_len, const char *b, size_t b_len)
{
    unsigned char da[EVP_MAX_MD_SIZE], db[EVP_MAX_MD_SIZE];
    unsigned int la = 0, lb = 0;

    if (EVP_Digest(a, a_len, da, &la, EVP_sha256(), NULL) != 1 ||
        EVP_Digest(b, b_len, db, &lb, EVP_sha256(), NULL) != 1 || la != lb)
        return false;
    return CRYPTO_memcmp(da, db, la) == 0;
}
