/*
 * Unit tests for coordinator/admission.c and the proof of common/workerauth.c: without a
 * secret everything is admitted; with one, a Register without a proof is challenged, the
 * right proof of that nonce admitted once, and a wrong proof (other secret, other nonce,
 * other fields, a replay), a proof without a challenge and a challenge left unanswered
 * past the deadline are refused, counted and recorded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/admission.h"

static cdc_admission_verdict_t check(cdc_admission_t *a, uint32_t pipe, const char *id,
                                     const uint8_t *proof, size_t proof_len, int64_t now,
                                     uint8_t *nonce, cdc_admission_reason_t *reason)
{
    cdc_admission_verdict_t v;
    cdc_error_t e;

    assert_int_equal(cdc_admission_check(a, pipe, id, 7, "10.0.0.1:8080", proof, proof_len, now,
                                         nonce, &v, reason, &e),
                     CDC_OK);
    return v;
}

/* The proof a worker with secret gives for nonce. */
static void prove(const char *secret, const uint8_t *nonce, const char *id, uint8_t *out)
{
    cdc_error_t e;
    assert_int_equal(cdc_workerauth_proof(secret, nonce, CDC_WORKERAUTH_NONCE_LEN, id, 7,
                                          "10.0.0.1:8080", out, &e),
                     CDC_OK);
}

static void test_open_without_secret(void **state)
{
    cdc_admission_t a;
    uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN];
    cdc_admission_reason_t r;
    (void)state;

    cdc_admission_init(&a, "");
    assert_false(cdc_admission_required(&a));
    assert_int_equal(check(&a, 1, "w0", NULL, 0, 100, nonce, &r), CDC_ADMISSION_ADMIT);
    assert_int_equal(check(&a, 1, "w0", (const uint8_t *)"junk", 4, 100, nonce, &r),
                     CDC_ADMISSION_ADMIT);
    assert_int_equal(cdc_admission_refused_total(&a), 0);
}

static void test_challenge_and_proof(void **state)
{
    cdc_admission_t a;
    uint8_t n1[CDC_WORKERAUTH_NONCE_LEN], n2[CDC_WORKERAUTH_NONCE_LEN];
    uint8_t proof[CDC_WORKERAUTH_PROOF_LEN], old[CDC_WORKERAUTH_PROOF_LEN];
    cdc_admission_reason_t r;
    (void)state;

    cdc_admission_init(&a, "s3cret");
    assert_true(cdc_admission_required(&a));
    /* no proof: a challenge; asked again, the same nonce (a worker that registered twice
     * before it saw the first challenge answers both) */
    assert_int_equal(check(&a, 1, "w0", NULL, 0, 100, n1, &r), CDC_ADMISSION_CHALLENGE);
    assert_true(cdc_admission_pending(&a, 1));
    assert_int_equal(check(&a, 1, "w0", NULL, 0, 200, n2, &r), CDC_ADMISSION_CHALLENGE);
    assert_memory_equal(n1, n2, sizeof(n1));
    prove("s3cret", n1, "w0", proof);
    /* the right proof of the nonce: admitted, and the nonce is spent */
    assert_int_equal(check(&a, 1, "w0", proof, sizeof(proof), 300, n1, &r), CDC_ADMISSION_ADMIT);
    assert_false(cdc_admission_pending(&a, 1));
    /* a replay of it (same pipe, or another) answers no challenge (the coordinator admits a
     * Register again on a pipe whose worker is a member before it asks here: job.c) */
    assert_int_equal(check(&a, 1, "w0", proof, sizeof(proof), 400, n1, &r), CDC_ADMISSION_REFUSE);
    assert_int_equal(r, CDC_ADMISSION_UNCHALLENGED);
    assert_int_equal(check(&a, 2, "w0", proof, sizeof(proof), 400, n1, &r), CDC_ADMISSION_REFUSE);
    assert_int_equal(r, CDC_ADMISSION_UNCHALLENGED);
    /* a proof of another pipe's nonce is wrong; the nonces of two pipes differ */
    assert_int_equal(check(&a, 3, "w1", NULL, 0, 500, n1, &r), CDC_ADMISSION_CHALLENGE);
    assert_int_equal(check(&a, 4, "w1", NULL, 0, 500, n2, &r), CDC_ADMISSION_CHALLENGE);
    assert_memory_not_equal(n1, n2, sizeof(n1));
    prove("s3cret", n2, "w1", old);
    assert_int_equal(check(&a, 3, "w1", old, sizeof(old), 600, n1, &r), CDC_ADMISSION_REFUSE);
    assert_int_equal(r, CDC_ADMISSION_WRONG_PROOF);
    assert_int_equal(cdc_admission_refused_total(&a), 3);
    assert_string_equal(a.last.worker, "w1");
    assert_int_equal(a.last.pipe, 3);
    assert_int_equal(a.last.reason, CDC_ADMISSION_WRONG_PROOF);
}

static void test_wrong_proofs(void **state)
{
    cdc_admission_t a;
    uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN], proof[CDC_WORKERAUTH_PROOF_LEN];
    cdc_admission_reason_t r;
    (void)state;

    cdc_admission_init(&a, "s3cret");
    /* another secret */
    assert_int_equal(check(&a, 1, "w0", NULL, 0, 100, nonce, &r), CDC_ADMISSION_CHALLENGE);
    prove("not-the-secret", nonce, "w0", proof);
    assert_int_equal(check(&a, 1, "w0", proof, sizeof(proof), 100, nonce, &r),
                     CDC_ADMISSION_REFUSE);
    assert_int_equal(r, CDC_ADMISSION_WRONG_PROOF);
    /* the right secret, but the proof was made for another worker id */
    assert_int_equal(check(&a, 2, "w0", NULL, 0, 100, nonce, &r), CDC_ADMISSION_CHALLENGE);
    prove("s3cret", nonce, "w9", proof);
    assert_int_equal(check(&a, 2, "w0", proof, sizeof(proof), 100, nonce, &r),
                     CDC_ADMISSION_REFUSE);
    /* a truncated proof */
    assert_int_equal(check(&a, 4, "w0", NULL, 0, 100, nonce, &r), CDC_ADMISSION_CHALLENGE);
    prove("s3cret", nonce, "w0", proof);
    assert_int_equal(check(&a, 4, "w0", proof, sizeof(proof) - 1, 100, nonce, &r),
                     CDC_ADMISSION_REFUSE);
    assert_int_equal(a.refused[CDC_ADMISSION_WRONG_PROOF], 3);
}

static void test_deadline(void **state)
{
    cdc_admission_t a;
    uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN];
    cdc_admission_pending_t late[4];
    cdc_admission_reason_t r;
    (void)state;

    cdc_admission_init(&a, "s3cret");
    assert_int_equal(check(&a, 1, "w0", NULL, 0, 1000, nonce, &r), CDC_ADMISSION_CHALLENGE);
    assert_int_equal(check(&a, 2, "w1", NULL, 0, 3000, nonce, &r), CDC_ADMISSION_CHALLENGE);
    /* asking again does not move the deadline */
    assert_int_equal(check(&a, 1, "w0", NULL, 0, 5000, nonce, &r), CDC_ADMISSION_CHALLENGE);
    assert_int_equal(cdc_admission_expire(&a, 1000 + CDC_ADMISSION_DEADLINE_MS, late, 4), 0);
    assert_int_equal(cdc_admission_expire(&a, 1001 + CDC_ADMISSION_DEADLINE_MS, late, 4), 1);
    assert_int_equal(late[0].pipe, 1);
    assert_string_equal(late[0].worker, "w0");
    assert_false(cdc_admission_pending(&a, 1));
    assert_true(cdc_admission_pending(&a, 2));
    assert_int_equal(a.refused[CDC_ADMISSION_NO_PROOF], 1);
    /* a pipe that went away is forgotten, not refused */
    cdc_admission_forget(&a, 2);
    assert_int_equal(cdc_admission_expire(&a, 60000, late, 4), 0);
    assert_int_equal(cdc_admission_refused_total(&a), 1);
}

static void test_flood(void **state)
{
    cdc_admission_t a;
    uint8_t nonce[CDC_WORKERAUTH_NONCE_LEN];
    cdc_admission_reason_t r;
    (void)state;

    cdc_admission_init(&a, "s3cret");
    for (uint32_t p = 1; p <= CDC_ADMISSION_PENDING_MAX + 10; p++)
        assert_int_equal(check(&a, p, "x", NULL, 0, (int64_t)p, nonce, &r),
                         CDC_ADMISSION_CHALLENGE);
    assert_int_equal(a.npending, CDC_ADMISSION_PENDING_MAX);
    assert_false(cdc_admission_pending(&a, 1)); /* the oldest went */
    assert_true(cdc_admission_pending(&a, CDC_ADMISSION_PENDING_MAX + 10));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_without_secret),
        cmocka_unit_test(test_challenge_and_proof),
        cmocka_unit_test(test_wrong_proofs),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_flood),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
