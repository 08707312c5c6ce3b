/*
 * kafka-dev: a development Kafka broker for local runs and CI, built on librdkafka's
 * mock cluster (rdkafka_mock.h). It starts N mock brokers on loopback, creates topics
 * given by flags, prints "BOOTSTRAP <servers>", "CONTROL <host:port>" and "READY" on
 * stdout (and into --info-file), and serves a line protocol on the control port so
 * fault tests can take brokers down and up, inject request errors and add latency.
 * It is NOT Apache Kafka: real deployments use Apache Kafka (see tools/kafka-dev/README.md).
 * With --advertise-host the brokers listen on every interface and advertise that host
 * name, so that clients in other containers reach them (the local compose stack).
 *
 * Threads: the mock cluster runs its own thread; this file's main thread serves the
 * control connections with poll(2). Signal handlers only set a flag.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/options.h"
#include "common/config.h"
#include "common/log.h"

#define MAX_CLIENTS 64
#define LINE_MAX_LEN 4096

typedef struct kd_config {
    int64_t brokers;
    char *topic;
    int64_t default_partitions;
    char *control;
    char *info_file;
    char *advertise_host;
    int64_t broker_port;
    cdc_log_options_t log;
} kd_config_t;

static const cdc_opt_t options[] = {
    {"brokers", CDC_OPT_INT, offsetof(kd_config_t, brokers), "3", false, 1, 9, NULL,
     "Number of mock brokers (ids 1..N)."},
    {"topic", CDC_OPT_STRING, offsetof(kd_config_t, topic), "", false, 0, 0, NULL,
     "Topics to create at start, comma separated name:partitions (e.g. orders:12,dlq:1)."},
    {"default-partitions", CDC_OPT_INT, offsetof(kd_config_t, default_partitions), "12", false, 1,
     10000, NULL, "Partition count of topics created automatically on first use."},
    {"control", CDC_OPT_STRING, offsetof(kd_config_t, control), "127.0.0.1:0", false, 0, 0, NULL,
     "Control channel listen address host:port (port 0 = a free port)."},
    {"info-file", CDC_OPT_STRING, offsetof(kd_config_t, info_file), "", false, 0, 0, NULL,
     "File that receives the BOOTSTRAP, CONTROL and READY lines once the broker is up."},
    {"advertise-host", CDC_OPT_STRING, offsetof(kd_config_t, advertise_host), "", false, 0, 0, NULL,
     "Host name the brokers advertise; they then listen on every interface at --broker-port "
     "and the ports after it (containers). Empty: loopback, free ports."},
    {"broker-port", CDC_OPT_INT, offsetof(kd_config_t, broker_port), "9092", false, 1, 65526, NULL,
     "Port of broker 1 with --advertise-host; broker N listens on this port + N - 1."},
    CDC_OPTS_LOG(kd_config_t, log),
    CDC_OPT_END,
};

typedef struct client {
    int fd;
    size_t len;
    bool overflow; /* current line exceeded LINE_MAX_LEN: drop it up to the newline */
    char buf[LINE_MAX_LEN];
} client_t;

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

typedef struct kd {
    rd_kafka_t *rk;    /* owner of the mock cluster */
    rd_kafka_t *probe; /* client of the mock cluster for TOPICS */
    rd_kafka_mock_cluster_t *mc;
    int brokers;
    char bootstraps[1024]; /* what clients use: the mock's list, or the advertised one */
    char control_addr[64];
} kd_t;

/*
 * librdkafka 2.0.2 gives auto-created mock topics a fixed 4 partitions and has no API to
 * change that. The default sits in the (private) cluster struct 64 bytes after the
 * bootstraps pointer (rdkafka_mock_int.h of 2.0.2, x86_64/aarch64 LP64 layout). Find that
 * pointer, check that the two ints there hold the known defaults (4 partitions,
 * min(3, brokers) replicas), and only then overwrite the partition count. On any other
 * librdkafka build the check fails and we keep 4 (logged).
 */
static bool set_default_partitions(rd_kafka_mock_cluster_t *mc, int brokers, int partitions)
{
    const char *bootstraps = rd_kafka_mock_cluster_bootstraps(mc);
    unsigned char *base = (unsigned char *)mc;
    int want_rf = brokers < 3 ? brokers : 3;

    if (strcmp(rd_kafka_version_str(), "2.0.2") != 0 || sizeof(void *) != 8)
        return false;
    for (size_t off = 0; off + 72 <= 1024; off += sizeof(void *)) {
        const char *p;
        int pc, rf;
        memcpy(&p, base + off, sizeof(p));
        if (p != bootstraps)
            continue;
        memcpy(&pc, base + off + 64, sizeof(pc));
        memcpy(&rf, base + off + 68, sizeof(rf));
        if (pc != 4 || rf != want_rf)
            return false;
        memcpy(base + off + 64, &partitions, sizeof(partitions));
        return true;
    }
    return false;
}

/*
 * The mock brokers listen on loopback and advertise 127.0.0.1, and librdkafka 2.0.2 has no
 * API to change either: a client in another container cannot reach them. advertise() moves
 * each broker to <every interface>:<port + id - 1> advertised as <host>:<that port>. It
 * reaches the (private) broker structs through the cluster's broker list, with mirrors of
 * the 2.0.2 layouts (rdkafka_mock_int.h), and checks every field it reads against what the
 * mock reported (the cluster's handle and id, broker ids 1..N in order, 127.0.0.1 and the
 * ports of the bootstrap list) before writing anything; BROKER DOWN then re-creates a
 * broker's listener on its (new) address, and BROKER UP starts it. On any other build the
 * check fails and --advertise-host is refused. Called before any client connects: the mock
 * thread reads these fields only to answer requests, and the address at BROKER DOWN, an op
 * handed over through its queue.
 */
typedef struct mock_broker_2_0_2 {
    struct mock_broker_2_0_2 *next; /* TAILQ_ENTRY(rd_kafka_mock_broker_s) link */
    void *prev;
    int32_t id;
    char advertised_listener[128];
    struct sockaddr_in sin; /* address the listener binds to (again after BROKER DOWN) */
    uint16_t port;          /* advertised port */
} mock_broker_2_0_2_t;

typedef struct mock_cluster_2_0_2 {
    char id[32];
    rd_kafka_t *rk;
    int32_t controller_id;
    struct {
        mock_broker_2_0_2_t *first;
        void *last;
    } brokers;
    int broker_cnt;
} mock_cluster_2_0_2_t;

/* Port of the index-th (0-based) entry of a "host:port,host:port" list, 0 if none. */
static int bootstrap_port(const char *list, int index)
{
    const char *p = list;
    for (int i = 0; i < index && p; i++) {
        p = strchr(p, ',');
        if (p)
            p++;
    }
    if (p == NULL)
        return 0;
    const char *colon = strchr(p, ':');
    return colon ? atoi(colon + 1) : 0;
}

/* 0 when a broker can listen on every interface at port, else the errno of bind(). */
static int port_in_use(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, err = 0;

    if (fd < 0)
        return errno;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        err = errno;
    close(fd);
    return err;
}

static bool advertise(kd_t *kd, const char *host, int first_port)
{
    mock_cluster_2_0_2_t *c = (mock_cluster_2_0_2_t *)kd->mc;
    const char *mock_list = rd_kafka_mock_cluster_bootstraps(kd->mc);
    mock_broker_2_0_2_t *b;
    size_t len = 0;
    int i;

    if (strlen(host) >= sizeof(b->advertised_listener)) {
        cdc_log_error("--advertise-host \"%s\" is too long", host);
        return false;
    }
    if (strcmp(rd_kafka_version_str(), "2.0.2") != 0 || sizeof(void *) != 8 || c->rk != kd->rk ||
        strncmp(c->id, "mockCluster", 11) != 0 || c->broker_cnt != kd->brokers) {
        cdc_log_error("--advertise-host needs librdkafka 2.0.2 (LP64), found %s",
                      rd_kafka_version_str());
        return false;
    }
    for (i = 1, b = c->brokers.first; i <= kd->brokers; i++, b = b->next) {
        if (b == NULL || b->id != i || strcmp(b->advertised_listener, "127.0.0.1") != 0 ||
            b->sin.sin_family != AF_INET || b->sin.sin_addr.s_addr != htonl(INADDR_LOOPBACK) ||
            ntohs(b->sin.sin_port) != b->port || b->port != bootstrap_port(mock_list, i - 1)) {
            cdc_log_error("--advertise-host: the mock cluster of librdkafka %s is not laid out "
                          "as expected (broker %d)",
                          rd_kafka_version_str(), i);
            return false;
        }
        int err = port_in_use(first_port + i - 1);
        if (err) {
            cdc_log_error("--advertise-host: broker %d cannot listen on port %d: %s", i,
                          first_port + i - 1, strerror(err));
            return false;
        }
    }
    if (b != NULL) {
        cdc_log_error("--advertise-host: the mock cluster has more brokers than %d", kd->brokers);
        return false;
    }
    kd->bootstraps[0] = '\0';
    for (i = 1, b = c->brokers.first; i <= kd->brokers; i++, b = b->next) {
        int port = first_port + i - 1;
        rd_kafka_resp_err_t err;

        snprintf(b->advertised_listener, sizeof(b->advertised_listener), "%s", host);
        b->sin.sin_addr.s_addr = htonl(INADDR_ANY);
        b->sin.sin_port = htons((uint16_t)port);
        b->port = (uint16_t)port;
        err = rd_kafka_mock_broker_set_down(kd->mc, i);
        if (!err)
            err = rd_kafka_mock_broker_set_up(kd->mc, i);
        if (err) {
            cdc_log_error("could not move broker %d to port %d: %s", i, port,
                          rd_kafka_err2str(err));
            return false;
        }
        len += (size_t)snprintf(kd->bootstraps + len, sizeof(kd->bootstraps) - len, "%s%s:%d",
                                i > 1 ? "," : "", host, port);
        if (len >= sizeof(kd->bootstraps)) {
            cdc_log_error("--advertise-host: bootstrap list too long");
            return false;
        }
    }
    return true;
}

static void reply(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply(int fd, const char *fmt, ...)
{
    char line[LINE_MAX_LEN + 64];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* Replies are short; a client that does not read gets its reply dropped, not a hang. */
    (void)send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t v;
    if (s == NULL || !cdc_parse_int(s, &v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Error code from a number or a librdkafka error name such as NOT_LEADER_FOR_PARTITION. */
static bool parse_errcode(const char *s, rd_kafka_resp_err_t *out)
{
    const struct rd_kafka_err_desc *descs;
    size_t n;
    int64_t v;

    if (cdc_parse_int(s, &v)) {
        *out = (rd_kafka_resp_err_t)v;
        return true;
    }
    rd_kafka_get_err_descs(&descs, &n);
    for (size_t i = 0; i < n; i++) {
        if (descs[i].name && strcasecmp(descs[i].name, s) == 0) {
            *out = descs[i].code;
            return true;
        }
    }
    return false;
}

static bool valid_topic(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > 249)
        return false;
    for (const char *p = t; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return false;
    return true;
}

static rd_kafka_resp_err_t create_topic(kd_t *kd, const char *topic, int partitions)
{
    return rd_kafka_mock_topic_create(kd->mc, topic, partitions, kd->brokers < 3 ? kd->brokers : 3);
}

static void cmd_topics(kd_t *kd, int fd)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;
    char out[LINE_MAX_LEN];
    size_t len = 0;

    err = rd_kafka_metadata(kd->probe, 1, NULL, &md, 5000);
    if (err) {
        reply(fd, "ERR could not read metadata: %s", rd_kafka_err2str(err));
        return;
    }
    out[0] = '\0';
    for (int i = 0; i < md->topic_cnt && len + 1 < sizeof(out); i++) {
        int n = snprintf(out + len, sizeof(out) - len, " %s:%d", md->topics[i].topic,
                         md->topics[i].partition_cnt);
        if (n < 0 || (size_t)n >= sizeof(out) - len)
            break;
        len += (size_t)n;
    }
    rd_kafka_metadata_destroy(md);
    reply(fd, "OK%s", out);
}

#define HELP_TEXT                                                                                  \
    "OK commands: PING | BOOTSTRAP | TOPICS | CREATE <topic> <partitions> | "                      \
    "BROKER DOWN|UP <id> | RTT <broker> <ms> | ERRORS <apikey> <count> <errcode...> | "            \
    "ERRORS CLEAR <apikey> | TOPIC-ERROR <topic> <errcode> | "                                     \
    "LEADER <topic> <partition> <broker> | QUIT"

/* Runs one command line; returns false when the client asked to close. */
static bool run_command(kd_t *kd, int fd, char *line)
{
    char *argv[64];
    int argc = 0;
    char *save = NULL;
    rd_kafka_resp_err_t err;
    int64_t a, b;

    for (char *tok = strtok_r(line, " \t\r", &save); tok && argc < 64;
         tok = strtok_r(NULL, " \t\r", &save))
        argv[argc++] = tok;
    if (argc == 0) {
        reply(fd, "ERR empty command (try HELP)");
        return true;
    }
    for (char *p = argv[0]; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');

    if (strcmp(argv[0], "PING") == 0) {
        reply(fd, "OK PONG");
    } else if (strcmp(argv[0], "HELP") == 0) {
        reply(fd, HELP_TEXT);
    } else if (strcmp(argv[0], "QUIT") == 0) {
        reply(fd, "OK bye");
        return false;
    } else if (strcmp(argv[0], "BOOTSTRAP") == 0) {
        reply(fd, "OK %s", kd->bootstraps);
    } else if (strcmp(argv[0], "TOPICS") == 0) {
        cmd_topics(kd, fd);
    } else if (strcmp(argv[0], "CREATE") == 0) {
        if (argc != 3 || !valid_topic(argv[1]) || !parse_i64(argv[2], 1, 10000, &a)) {
            reply(fd, "ERR usage: CREATE <topic> <partitions 1..10000>");
            return true;
        }
        err = create_topic(kd, argv[1], (int)a);
        if (err)
            reply(fd, "ERR could not create topic \"%s\": %s", argv[1], rd_kafka_err2str(err));
        else
            reply(fd, "OK created %s %d", argv[1], (int)a);
    } else if (strcmp(argv[0], "BROKER") == 0) {
        bool down = argc == 3 && strcasecmp(argv[1], "DOWN") == 0;
        bool up = argc == 3 && strcasecmp(argv[1], "UP") == 0;
        if ((!down && !up) || !parse_i64(argv[2], 1, kd->brokers, &a)) {
            reply(fd, "ERR usage: BROKER DOWN|UP <id 1..%d>", kd->brokers);
            return true;
        }
        err = down ? rd_kafka_mock_broker_set_down(kd->mc, (int32_t)a)
                   : rd_kafka_mock_broker_set_up(kd->mc, (int32_t)a);
        if (err)
            reply(fd, "ERR broker %d: %s", (int)a, rd_kafka_err2str(err));
        else
            reply(fd, "OK broker %d %s", (int)a, down ? "down" : "up");
    } else if (strcmp(argv[0], "RTT") == 0) {
        if (argc != 3 || !parse_i64(argv[1], 1, kd->brokers, &a) ||
            !parse_i64(argv[2], 0, 600000, &b)) {
            reply(fd, "ERR usage: RTT <broker 1..%d> <ms>", kd->brokers);
            return true;
        }
        err = rd_kafka_mock_broker_set_rtt(kd->mc, (int32_t)a, (int)b);
        if (err)
            reply(fd, "ERR broker %d: %s", (int)a, rd_kafka_err2str(err));
        else
            reply(fd, "OK rtt %d %d", (int)a, (int)b);
    } else if (strcmp(argv[0], "ERRORS") == 0) {
        rd_kafka_resp_err_t errs[256];
        int ncodes = argc - 3;
        if (argc == 3 && strcasecmp(argv[1], "CLEAR") == 0 && parse_i64(argv[2], 0, 1000, &a)) {
            rd_kafka_mock_clear_request_errors(kd->mc, (int16_t)a);
            reply(fd, "OK cleared %d", (int)a);
            return true;
        }
        if (argc < 4 || !parse_i64(argv[1], 0, 1000, &a) || !parse_i64(argv[2], 1, 256, &b) ||
            (ncodes != 1 && ncodes != b)) {
            reply(fd, "ERR usage: ERRORS <apikey> <count 1..256> <errcode> (repeated count times)"
                      " or <count> errcodes; ERRORS CLEAR <apikey>");
            return true;
        }
        for (int i = 0; i < b; i++) {
            const char *code = argv[3 + (ncodes == 1 ? 0 : i)];
            if (!parse_errcode(code, &errs[i])) {
                reply(fd,
                      "ERR unknown error code \"%s\" (a number or a name such as "
                      "NOT_LEADER_FOR_PARTITION)",
                      code);
                return true;
            }
        }
        rd_kafka_mock_push_request_errors_array(kd->mc, (int16_t)a, (size_t)b, errs);
        reply(fd, "OK pushed %d errors for apikey %d", (int)b, (int)a);
    } else if (strcmp(argv[0], "TOPIC-ERROR") == 0) {
        rd_kafka_resp_err_t code;
        if (argc != 3 || !valid_topic(argv[1]) || !parse_errcode(argv[2], &code)) {
            reply(fd, "ERR usage: TOPIC-ERROR <topic> <errcode> (0 clears)");
            return true;
        }
        rd_kafka_mock_topic_set_error(kd->mc, argv[1], code);
        reply(fd, "OK topic %s error %d", argv[1], (int)code);
    } else if (strcmp(argv[0], "LEADER") == 0) {
        int64_t p;
        if (argc != 4 || !valid_topic(argv[1]) || !parse_i64(argv[2], 0, 9999, &p) ||
            !parse_i64(argv[3], -1, kd->brokers, &b)) {
            reply(fd, "ERR usage: LEADER <topic> <partition> <broker|-1>");
            return true;
        }
        err = rd_kafka_mock_partition_set_leader(kd->mc, argv[1], (int32_t)p, (int32_t)b);
        if (err)
            reply(fd, "ERR could not set leader of \"%s\" [%d]: %s", argv[1], (int)p,
                  rd_kafka_err2str(err));
        else
            reply(fd, "OK leader %s %d %d", argv[1], (int)p, (int)b);
    } else {
        reply(fd, "ERR unknown command \"%.64s\" (try HELP)", argv[0]);
    }
    return true;
}

/* Reads what a client sent and runs each complete line; returns false to close it. */
static bool client_read(kd_t *kd, client_t *c)
{
    char tmp[1024];
    ssize_t n = recv(c->fd, tmp, sizeof(tmp), 0);

    if (n == 0)
        return false;
    if (n < 0)
        return errno == EINTR || errno == EAGAIN;
    for (ssize_t i = 0; i < n; i++) {
        char ch = tmp[i];
        if (ch == '\n') {
            bool keep = true;
            if (c->overflow)
                reply(c->fd, "ERR line too long (max %d bytes)", LINE_MAX_LEN - 1);
            else {
                c->buf[c->len] = '\0';
                keep = run_command(kd, c->fd, c->buf);
            }
            c->len = 0;
            c->overflow = false;
            if (!keep)
                return false;
        } else if (c->len + 1 >= sizeof(c->buf)) {
            c->overflow = true;
        } else if (!c->overflow) {
            c->buf[c->len++] = (ch == '\0') ? ' ' : ch;
        }
    }
    return true;
}

static int listen_control(const char *addr, char *bound, size_t bound_size)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    struct sockaddr_in sa;
    socklen_t salen = sizeof(sa);
    int64_t port;
    int fd, one = 1;

    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host) ||
        !parse_i64(colon + 1, 0, 65535, &port)) {
        cdc_log_error("invalid --control address \"%s\": expected host:port", addr);
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        cdc_log_error("invalid --control host \"%s\": expected an IPv4 address", host);
        return -1;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &salen) != 0) {
        cdc_log_error("could not listen on control address \"%s\": %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    snprintf(bound, bound_size, "%s:%d", host, ntohs(sa.sin_port));
    return fd;
}

static bool write_info(const char *path, const char *text)
{
    char tmp[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL)
        return false;
    if (fputs(text, f) < 0 || fclose(f) != 0)
        return false;
    return rename(tmp, path) == 0;
}

static bool create_flag_topics(kd_t *kd, const char *spec, int default_partitions)
{
    char *copy = strdup(spec), *save = NULL;
    bool ok = copy != NULL;

    for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; t && ok;
         t = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(t, ':');
        int64_t n = 0;
        rd_kafka_resp_err_t err;
        if (colon)
            *colon = '\0';
        if (!valid_topic(t) || (colon && !parse_i64(colon + 1, 1, 10000, &n))) {
            fprintf(stderr, "kafka-dev: invalid --topic entry \"%s\": expected name:partitions\n",
                    t);
            ok = false;
            break;
        }
        err = create_topic(kd, t, colon ? (int)n : default_partitions);
        if (err) {
            cdc_log_error("could not create topic \"%s\": %s", t, rd_kafka_err2str(err));
            ok = false;
        }
    }
    free(copy);
    return ok;
}

static void serve(kd_t *kd, int lfd)
{
    client_t *clients[MAX_CLIENTS] = {0};
    struct pollfd pfd[MAX_CLIENTS + 1];

    while (!stop_requested) {
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (clients[i])
                pfd[n++] = (struct pollfd){.fd = clients[i]->fd, .events = POLLIN};
        if (poll(pfd, (nfds_t)n, 200) < 0) {
            if (errno == EINTR)
                continue;
            cdc_log_error("poll failed: %s", strerror(errno));
            break;
        }
        if (pfd[0].revents & POLLIN) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            int slot = -1;
            for (int i = 0; i < MAX_CLIENTS && cfd >= 0; i++)
                if (!clients[i]) {
                    slot = i;
                    break;
                }
            if (cfd >= 0 && slot < 0) {
                reply(cfd, "ERR too many control connections");
                close(cfd);
            } else if (cfd >= 0) {
                clients[slot] = calloc(1, sizeof(client_t));
                if (clients[slot] == NULL)
                    close(cfd);
                else
                    clients[slot]->fd = cfd;
            }
        }
        for (int k = 1; k < n; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            for (int i = 0; i < MAX_CLIENTS; i++) {
                if (clients[i] && clients[i]->fd == pfd[k].fd) {
                    if (!client_read(kd, clients[i])) {
                        close(clients[i]->fd);
                        free(clients[i]);
                        clients[i] = NULL;
                    }
                    break;
                }
            }
        }
    }
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (clients[i]) {
            close(clients[i]->fd);
            free(clients[i]);
        }
}

int main(int argc, char **argv)
{
    kd_config_t cfg = {0};
    kd_t kd = {0};
    rd_kafka_conf_t *conf;
    char errstr[512], info[1024];
    struct sigaction sa;
    int lfd = -1, rc = 1;

    cdc_config_load(options, "kafka-dev",
                    "Development Kafka broker on librdkafka's mock cluster, for local runs and CI "
                    "only (real deployments use Apache Kafka).",
                    argc, argv, &cfg);
    cdc_log_options_apply(&cfg.log, "kafka-dev", NULL);
    kd.brokers = (int)cfg.brokers;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log.connection.close", "false", NULL, 0);
    /* This handle only owns the mock cluster: it has no bootstrap servers by design. */
    rd_kafka_conf_set(conf, "log_level", "4", NULL, 0);
    kd.rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (kd.rk == NULL) {
        cdc_log_error("could not create librdkafka handle: %s", errstr);
        goto cleanup;
    }
    kd.mc = rd_kafka_mock_cluster_new(kd.rk, kd.brokers);
    if (kd.mc == NULL) {
        cdc_log_error("could not create the mock cluster");
        goto cleanup;
    }
    if (!set_default_partitions(kd.mc, kd.brokers, (int)cfg.default_partitions))
        cdc_log_warn("could not set the default partition count on librdkafka %s: topics "
                     "created automatically get 4 partitions; create topics explicitly",
                     rd_kafka_version_str());
    if (cfg.advertise_host[0]) {
        if (cfg.broker_port + kd.brokers - 1 > 65535) {
            cdc_log_error("--broker-port %d leaves no room for %d brokers", (int)cfg.broker_port,
                          kd.brokers);
            goto cleanup;
        }
        if (!advertise(&kd, cfg.advertise_host, (int)cfg.broker_port))
            goto cleanup;
    } else {
        snprintf(kd.bootstraps, sizeof(kd.bootstraps), "%s",
                 rd_kafka_mock_cluster_bootstraps(kd.mc));
    }
    if (cfg.topic[0] && !create_flag_topics(&kd, cfg.topic, (int)cfg.default_partitions))
        goto cleanup;

    conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", kd.bootstraps, errstr, sizeof(errstr)) !=
            RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "allow.auto.create.topics", "false", errstr, sizeof(errstr)) !=
            RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        cdc_log_error("could not configure the probe client: %s", errstr);
        goto cleanup;
    }
    rd_kafka_conf_set(conf, "log.connection.close", "false", NULL, 0);
    kd.probe = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (kd.probe == NULL) {
        cdc_log_error("could not create the probe client: %s", errstr);
        goto cleanup;
    }

    lfd = listen_control(cfg.control, kd.control_addr, sizeof(kd.control_addr));
    if (lfd < 0)
        goto cleanup;

    snprintf(info, sizeof(info), "BOOTSTRAP %s\nCONTROL %s\nREADY\n", kd.bootstraps,
             kd.control_addr);
    if (cfg.info_file[0] && !write_info(cfg.info_file, info)) {
        cdc_log_error("could not write info file \"%s\": %s", cfg.info_file, strerror(errno));
        goto cleanup;
    }
    fputs(info, stdout);
    fflush(stdout);
    cdc_log_info("kafka-dev up bootstrap=%s control=%s brokers=%d default_partitions=%d",
                 kd.bootstraps, kd.control_addr, kd.brokers, (int)cfg.default_partitions);

    serve(&kd, lfd);
    cdc_log_info("kafka-dev stopping");
    rc = 0;

cleanup:
    if (lfd >= 0)
        close(lfd);
    if (kd.probe)
        rd_kafka_destroy(kd.probe);
    if (kd.mc)
        rd_kafka_mock_cluster_destroy(kd.mc);
    if (kd.rk)
        rd_kafka_destroy(kd.rk);
    if (cfg.info_file && cfg.info_file[0])
        unlink(cfg.info_file);
    cdc_config_free(options, &cfg);
    return rc;
}
