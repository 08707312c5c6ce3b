/*
 * Fuzz target: HTTP requests to an admin endpoint (common/http.h). An endpoint on loopback
 * with a bearer token, a GET and a POST route that read query parameters, /metrics,
 * /healthz and /readyz; each input is sent as the bytes of one connection (then its write
 * side is shut) and the answer read to its end. The input is also parsed as a query string
 * (cdc_http_query_param) directly.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/http.h"
#include "tests/fuzz/fuzz.h"

static cdc_http_server_t *server;
static int port;

static void handler(void *arg, const char *path, const char *query, cdc_http_response_t *resp)
{
    char v[64];
    (void)arg;
    bool found = cdc_http_query_param(query, "table", v, sizeof(v));
    resp->body = strdup(found ? v : path);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    cdc_error_t e;
    (void)argc;
    (void)argv;
    if (cdc_http_server_open(&server, "127.0.0.1:0", cdc_metrics_new(), &e) != CDC_OK ||
        cdc_http_server_set_token(server, "fuzz-token", &e) != CDC_OK ||
        cdc_http_server_add(server, "/status", handler, NULL, &e) != CDC_OK ||
        cdc_http_server_add_post(server, "/action", handler, NULL, &e) != CDC_OK ||
        cdc_http_server_start(server, &e) != CDC_OK) {
        fprintf(stderr, "http: cannot start the endpoint: %s\n", e.msg);
        abort();
    }
    port = cdc_http_server_port(server);
    return 0;
}

/* Sends data on a new connection and reads the answer until the server closes it or
 * stays silent for a second (it keeps a connection for the next request). */
static void exchange(const uint8_t *data, size_t size)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char buf[4096];

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return;
    }
    for (size_t off = 0; off < size;) {
        ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 1000) <= 0 || recv(fd, buf, sizeof(buf), 0) <= 0)
            break;
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *query = fuzz_cstr(data, size);
    char out[32];

    if (query != NULL) {
        (void)cdc_http_query_param(query, "table", out, sizeof(out));
        (void)cdc_http_query_param(query, "", out, 1);
        free(query);
    }
    exchange(data, size);
    return 0;
}
