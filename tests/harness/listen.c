/*
 * Loopback listening sockets for tests (harness.h): a port that accepts connections but
 * never answers (a hanging server), or the listener of a small server a test runs in a
 * thread of its own (tests/unit/common/test_httpc.c).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tests/harness/harness.h"

int cdc_test_listen_loopback(int *port)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("cdc_test_listen_loopback");
        exit(1);
    }
    *port = ntohs(sa.sin_port);
    return fd;
}
