/*
 * OpenSSL libcrypto behind the project's types (see crypto.h): one-shot HMAC and digest
 * calls, RAND_bytes and CRYPTO_memcmp. No state is kept, so nothing needs initialising
 * or freeing (OpenSSL 3 initialises itself on first use). An HMAC object (cdc_hmac_t)
 * keeps one EVP_MAC context initialized with its key; each message re-initializes it
 * without a key (OpenSSL then reuses the key's prepared pads), which makes a message cheap.
 */
#include "common/crypto.h"

#include <stdlib.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

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

cdc_err_t cdc_crypto_check_cert_key(const char *cert_pem, const char *key_pem, int64_t *not_after,
                                    cdc_error_t *e)
{
    BIO *cb = BIO_new_mem_buf(cert_pem, -1), *kb = BIO_new_mem_buf(key_pem, -1);
    X509 *x = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    cdc_err_t rc = CDC_OK;
    struct tm tm;

    if (x == NULL)
        rc = cdc_error_set(e, CDC_ERR_CONFIG, "the certificate does not parse as PEM X.509");
    else if (k == NULL)
        rc = cdc_error_set(e, CDC_ERR_CONFIG, "the private key does not parse (PEM, unencrypted)");
    else if (X509_check_private_key(x, k) != 1)
        rc = cdc_error_set(e, CDC_ERR_CONFIG, "the private key is not the certificate's");
    else if (not_after != NULL) {
        *not_after = 0;
        if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1)
            *not_after = (int64_t)timegm(&tm);
    }
    ERR_clear_error();
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(cb);
    BIO_free(kb);
    return rc;
}
