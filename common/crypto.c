/*
 * SHA-256 and HMAC-SHA-256 through OpenSSL's libcrypto (see crypto.h). An HMAC keeps one
 * EVP_MAC context initialized with its key; each message re-initializes it without a key
 * (OpenSSL then reuses the key's prepared pads), which is what makes a message cheap.
 */
#include "common/crypto.h"

#include <stdlib.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/sha.h>

struct cdc_hmac {
    EVP_MAC *mac;
    EVP_MAC_CTX *ctx;
};

void cdc_sha256(const void *data, size_t n, uint8_t out[CDC_SHA256_LEN])
{
    SHA256(data, n, out);
}

cdc_err_t cdc_hmac_new(const void *key, size_t key_len, cdc_hmac_t **out, cdc_error_t *e)
{
    static const uint8_t empty[1];
    cdc_hmac_t *h = calloc(1, sizeof(*h));
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end(),
    };

    if (h == NULL || (h->mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL ||
        (h->ctx = EVP_MAC_CTX_new(h->mac)) == NULL ||
        /* an empty key is a valid HMAC key; a NULL one would mean "keep the last" */
        !EVP_MAC_init(h->ctx, key_len > 0 ? key : empty, key_len, params)) {
        cdc_hmac_free(h);
        return cdc_error_set(e, CDC_ERR_NOMEM, "could not set up HMAC-SHA-256 (libcrypto)");
    }
    *out = h;
    return CDC_OK;
}

void cdc_hmac_free(cdc_hmac_t *h)
{
    if (h == NULL)
        return;
    EVP_MAC_CTX_free(h->ctx);
    EVP_MAC_free(h->mac);
    free(h);
}

bool cdc_hmac_sha256(cdc_hmac_t *h, const void *data, size_t n, uint8_t out[CDC_SHA256_LEN])
{
    static const uint8_t empty[1];
    size_t len = 0;
    return EVP_MAC_init(h->ctx, NULL, 0, NULL) && EVP_MAC_update(h->ctx, n > 0 ? data : empty, n) &&
           EVP_MAC_final(h->ctx, out, &len, CDC_SHA256_LEN) && len == CDC_SHA256_LEN;
}
