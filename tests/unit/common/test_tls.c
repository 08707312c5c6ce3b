/* common/tls.h: bad certificate files are configuration errors naming the option; a reload
 * takes new files that parse (subscribers called) and keeps the old ones otherwise; a
 * tls+tcp:// message link carries envelopes with the certificates, and a TLS URL without
 * certificates is refused (common/msg.h). Certificates made by tools/certs.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/msg.h"
#include "common/tls.h"

static char dir[] = "/tmp/cdc-test-tls.XXXXXX";
static char ca[600], cert[600], key[600], other_cert[600], other_key[600];

static int setup(void **state)
{
    char cmd[1400];
    (void)state;
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(cmd, sizeof(cmd), "tools/certs.sh %s/a >/dev/null && tools/certs.sh %s/b >/dev/null",
             dir, dir);
    if (system(cmd) != 0)
        return -1;
    snprintf(ca, sizeof(ca), "%s/a/ca.crt", dir);
    snprintf(cert, sizeof(cert), "%s/a/node.crt", dir);
    snprintf(key, sizeof(key), "%s/a/node.key", dir);
    snprintf(other_cert, sizeof(other_cert), "%s/b/node.crt", dir);
    snprintf(other_key, sizeof(other_key), "%s/b/node.key", dir);
    return 0;
}

static int teardown(void **state)
{
    char cmd[700];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void copy(const char *from, const char *to)
{
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "cp %s %s.tmp && mv %s.tmp %s", from, to, to, to);
    assert_int_equal(system(cmd), 0);
}

static void test_bad_files_name_the_option(void **state)
{
    cdc_tls_t *t = NULL;
    cdc_error_t e;
    (void)state;
    assert_int_equal(cdc_tls_open(&t, ca, NULL, key, NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--tls-cert-file"));
    assert_int_equal(cdc_tls_open(&t, "/nonexistent/ca.crt", cert, key, NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--tls-ca-file"));
    assert_non_null(strstr(e.msg, "/nonexistent/ca.crt"));
    /* a key that is not the certificate's */
    assert_int_equal(cdc_tls_open(&t, ca, cert, other_key, NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--tls-cert-file/--tls-key-file"));
    /* not PEM */
    assert_int_equal(cdc_tls_open(&t, "/etc/hostname", cert, key, NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--tls-ca-file"));
    assert_null(t);
    assert_true(cdc_tls_url("tls+tcp://a:1"));
    assert_true(cdc_tls_url("https://a:1"));
    assert_false(cdc_tls_url("tcp://a:1"));
}

static int reloads;
static void on_reload(void *arg)
{
    (void)arg;
    reloads++;
}

static void test_reload(void **state)
{
    char c2[700], k2[700];
    cdc_tls_t *t = NULL;
    cdc_error_t e;
    (void)state;
    snprintf(c2, sizeof(c2), "%s/live.crt", dir);
    snprintf(k2, sizeof(k2), "%s/live.key", dir);
    copy(cert, c2);
    copy(key, k2);
    assert_int_equal(cdc_tls_open(&t, ca, c2, k2, NULL, &e), CDC_OK);
    assert_int_equal(cdc_tls_subscribe(t, on_reload, NULL, &e), CDC_OK);
    cdc_tls_request_reload(); /* unchanged files, asked for: reloaded all the same */
    assert_true(cdc_tls_check(t));
    assert_int_equal(reloads, 1);
    assert_false(cdc_tls_check(t)); /* nothing changed, nothing asked */

    /* a certificate that does not match the key: refused, the old files stay */
    copy(other_cert, c2);
    cdc_tls_request_reload();
    assert_false(cdc_tls_check(t));
    assert_int_equal(reloads, 1);
    assert_int_equal(cdc_tls_generation(t), 1);
    /* its key follows: a new pair, taken */
    copy(other_key, k2);
    cdc_tls_request_reload();
    assert_true(cdc_tls_check(t));
    assert_int_equal(reloads, 2);
    assert_int_equal(cdc_tls_generation(t), 2);
    cdc_tls_unsubscribe(t, on_reload, NULL);
    cdc_tls_close(t);
}

static void test_msg_over_tls(void **state)
{
    cdc_tls_t *t = NULL;
    cdc_msg_server_t *s = NULL;
    cdc_msg_client_t *c = NULL;
    cdc_error_t e;
    char url[64];
    (void)state;

    assert_int_equal(cdc_msg_server_open(&s, "tls+tcp://127.0.0.1:0", NULL, &e), CDC_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "--tls-ca-file"));
    assert_int_equal(cdc_tls_open(&t, ca, cert, key, NULL, &e), CDC_OK);
    cdc_msg_options_t o = {.tls = t};
    assert_int_equal(cdc_msg_server_open(&s, "tls+tcp://127.0.0.1:0", &o, &e), CDC_OK);
    snprintf(url, sizeof(url), "tls+tcp://127.0.0.1:%d", cdc_msg_server_port(s));
    assert_true(cdc_msg_server_port(s) > 0);
    assert_int_equal(cdc_msg_client_open(&c, url, &o, &e), CDC_OK);

    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Heartbeat hb = CDC__HEARTBEAT__INIT;
    hb.worker_id = "w";
    env.body_case = CDC__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    cdc_err_t rc = CDC_ERR_TIMEOUT;
    for (int i = 0; i < 100 && rc != CDC_OK; i++) {
        if (cdc_msg_client_connected(c))
            rc = cdc_msg_client_send(c, &env, &e);
        else
            usleep(50000);
    }
    assert_int_equal(rc, CDC_OK);
    Cdc__Envelope *got = NULL;
    uint32_t pipe = 0;
    assert_int_equal(cdc_msg_server_recv(s, 5000, &got, &pipe, &e), CDC_OK);
    assert_int_equal(got->body_case, CDC__ENVELOPE__BODY_HEARTBEAT);
    assert_string_equal(got->heartbeat->worker_id, "w");
    cdc_msg_free(got);
    cdc_msg_client_close(c);

    /* a client that expects another name in the server's certificate never connects */
    cdc_tls_t *t2 = NULL;
    assert_int_equal(cdc_tls_open(&t2, ca, cert, key, NULL, &e), CDC_OK);
    assert_int_equal(cdc_tls_set_server_name(t2, "not-the-coordinator.example", &e), CDC_OK);
    cdc_msg_options_t o2 = {.tls = t2};
    cdc_msg_event_t ev;
    while (cdc_msg_server_poll_event(s, &ev)) {
    }
    assert_int_equal(cdc_msg_client_open(&c, url, &o2, &e), CDC_OK);
    for (int i = 0; i < 20; i++) { /* a second: redials every 100 ms */
        assert_false(cdc_msg_client_connected(c));
        usleep(50000);
    }
    while (cdc_msg_server_poll_event(s, &ev))
        assert_int_not_equal(ev.type, CDC_MSG_PIPE_ADDED);
    cdc_msg_client_close(c);
    cdc_tls_close(t2);
    cdc_msg_server_close(s);
    cdc_tls_close(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_files_name_the_option),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_msg_over_tls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
