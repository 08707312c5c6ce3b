/*
 * The development broker's control channel (tools/kafka-dev): a line protocol on
 * host:port that creates topics, since librdkafka's mock cluster has no CreateTopics.
 * Used by cdc_kafka_ensure_topic() when CDC_KAFKA_DEV_CONTROL is set (local runs and
 * CI only; real Kafka gets a CreateTopics request).
 */
#include "common/kafka_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/*
 * The development broker has no CreateTopics; its control channel (CDC_KAFKA_DEV_CONTROL,
 * host:port, set by the test harness and `make run`; a host name in the local compose
 * stack, docker/docker-compose.local.yml) creates topics with a given count.
 */
cdc_err_t cdc_kafka__dev_create_topic(const char *control, const cdc_kafka_topic_spec_t *spec,
                                      cdc_error_t *e)
{
    char host[64], line[512];
    const char *colon = strrchr(control, ':');
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct timeval tv = {.tv_sec = 10};
    ssize_t got = 0;
    int fd, n;

    if (colon == NULL || (size_t)(colon - control) >= sizeof(host))
        return cdc_error_set(e, CDC_ERR_CONFIG, "invalid CDC_KAFKA_DEV_CONTROL \"%s\"", control);
    memcpy(host, control, (size_t)(colon - control));
    host[colon - control] = '\0';
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        int gai = getaddrinfo(host, NULL, &hints, &ai);
        if (gai != 0 || ai == NULL) {
            if (ai)
                freeaddrinfo(ai);
            return cdc_error_set_retriable(e, CDC_ERR_UNAVAILABLE, true,
                                           "could not resolve the development broker's control "
                                           "channel %s: %s",
                                           control, gai_strerror(gai));
        }
        sa.sin_addr = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
        freeaddrinfo(ai);
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cdc_error_set(e, CDC_ERR_IO, "socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE,
                             "could not reach the development broker's control channel %s: %s",
                             control, strerror(errno));
    }
    n = snprintf(line, sizeof(line), "CREATE %s %d\n", spec->name, (int)spec->partitions);
    if (write(fd, line, (size_t)n) != n) {
        close(fd);
        return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "could not write to %s", control);
    }
    while ((size_t)got < sizeof(line) - 1) {
        ssize_t r = read(fd, line + got, sizeof(line) - 1 - (size_t)got);
        if (r <= 0)
            break;
        got += r;
        if (memchr(line, '\n', (size_t)got))
            break;
    }
    close(fd);
    line[got > 0 ? got : 0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "OK", 2) == 0 || strstr(line, "already exists"))
        return CDC_OK;
    return cdc_error_set(e, CDC_ERR_KAFKA,
                         "could not create topic \"%s\" on the development broker: %s", spec->name,
                         line[0] ? line : "no reply");
}
