/*
 * The registration proof of workerauth.h: the fields are framed into one buffer and
 * MACed under the secret with common/crypto.c.
 */
#include "common/workerauth.h"

#include <stdlib.h>
#include <string.h>

#define DOMAIN "cdc-register-v1"

static uint8_t *put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static uint8_t *put_field(uint8_t *p, const void *data, size_t len)
{
    p = put_u32(p, (uint32_t)len);
    memcpy(p, data, len);
    return p + len;
}

cdc_err_t cdc_workerauth_proof(const char *secret, const uint8_t *nonce, size_t nonce_len,
                               const char *worker_id, uint64_t incarnation, const char *admin,
                               uint8_t out[CDC_WORKERAUTH_PROOF_LEN], cdc_error_t *e)
{
    const char *id = worker_id ? worker_id : "", *ad = admin ? admin : "";
    size_t id_len = strlen(id), ad_len = strlen(ad), n;
    uint8_t *msg, *p;
    cdc_err_t rc;

    if (nonce_len > UINT32_MAX || id_len > UINT32_MAX || ad_len > UINT32_MAX)
        return cdc_error_set(e, CDC_ERR_INVALID, "registration fields too long to prove");
    n = sizeof(DOMAIN) - 1 + 4 + nonce_len + 4 + id_len + 8 + 4 + ad_len;
    if ((msg = malloc(n)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory computing a registration proof");
    memcpy(msg, DOMAIN, sizeof(DOMAIN) - 1);
    p = put_field(msg + sizeof(DOMAIN) - 1, nonce, nonce_len);
    p = put_field(p, id, id_len);
    p = put_u32(put_u32(p, (uint32_t)(incarnation >> 32)), (uint32_t)incarnation);
    put_field(p, ad, ad_len);
    rc = cdc_crypto_hmac_sha256(secret, strlen(secret), msg, n, out, e);
    free(msg);
    return rc;
}

bool cdc_workerauth_verify(const char *secret, const uint8_t *nonce, size_t nonce_len,
                           const char *worker_id, uint64_t incarnation, const char *admin,
                           const uint8_t *proof, size_t proof_len)
{
    uint8_t want[CDC_WORKERAUTH_PROOF_LEN];
    cdc_error_t e;
    bool ok;

    if (proof_len != sizeof(want) || cdc_workerauth_proof(secret, nonce, nonce_len, worker_id,
                                                          incarnation, admin, want, &e) != CDC_OK)
        return false;
    ok = cdc_crypto_equal(proof, want, sizeof(want));
    memset(want, 0, sizeof(want));
    return ok;
}
