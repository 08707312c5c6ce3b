/*
 * The source's replication stream (see source.h): START_REPLICATION, reading the
 * CopyBoth messages (XLogData, primary keepalives) with read coalescing, standby status
 * updates, and the polite stop (docs/capture.md, "Shutdown"). The handling follows
 * pg_recvlogical: a non-blocking read, a wait on the socket with a timeout, replies to
 * keepalives that request one.
 */
#include "capture/source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "capture/pgoutput.h"
#include "common/clock.h"
#include "common/log.h"

/* publication_names takes a string literal of comma-separated identifiers: the name as a
 * quoted identifier ("" for "), inside a literal ('' for '). */
static void publication_literal(const char *name, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = name; *p && n + 5 < size; p++) {
        if (*p == '"')
            out[n++] = '"';
        else if (*p == '\'')
            out[n++] = '\'';
        out[n++] = *p;
    }
    out[n] = '\0';
}

cdc_err_t cdc_source_start(cdc_source_t *src, const char *slot, const char *publication,
                           uint64_t start_lsn, cdc_error_t *e)
{
    char sql[1024], pub[600];
    cdc_pg_result_t *r;

    publication_literal(publication, pub, sizeof(pub));
    snprintf(sql, sizeof(sql),
             "START_REPLICATION SLOT \"%s\" LOGICAL %X/%X (proto_version '1', "
             "publication_names '\"%s\"', messages 'true')",
             slot, (unsigned)(start_lsn >> 32), (unsigned)start_lsn, pub);
    r = cdc_pg_exec(src->repl, sql);
    if (cdc_pg_status(r) != CDC_PG_COPY_BOTH) {
        /* another capture (or a dying one) holds the slot: retry later */
        bool held = strstr(cdc_pg_message(r), "is active for PID") != NULL;
        cdc_err_t code = cdc_pg_error(src->repl, r, held ? CDC_ERR_UNAVAILABLE : CDC_ERR_SOURCE, e,
                                      "could not start replication from slot \"%s\"", slot);
        e->retriable = code == CDC_ERR_UNAVAILABLE;
        cdc_pg_clear(r);
        return code;
    }
    cdc_pg_clear(r);
    return CDC_OK;
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static int64_t pg_now_us(void)
{
    return cdc_clock_wall_us() - CDC_PG_EPOCH_OFFSET_US;
}

/*
 * The received data is used up. After a wakeup that brought a trickle of messages, waits
 * until coalesce_ms have passed since that wakeup and returns true: the caller then
 * takes whatever arrived meanwhile without waiting in select(). Otherwise (coalescing
 * off, a backlog, nothing since the last wakeup, or a burst that should be read at full
 * speed) returns false at once.
 */
static bool coalesce_wait(cdc_source_t *src)
{
    int64_t now, until;
    if (src->coalesce_ms <= 0 || !src->caught_up || src->cycle_bytes == 0 ||
        src->cycle_bytes >= CDC_SOURCE_COALESCE_MAX_BYTES)
        return false;
    now = cdc_clock_mono_us();
    until = src->wake_us + (int64_t)src->coalesce_ms * 1000;
    if (until > now) {
        struct timespec ts = {(until - now) / 1000000, ((until - now) % 1000000) * 1000};
        nanosleep(&ts, NULL);
        now = cdc_clock_mono_us();
    }
    src->wake_us = now;
    src->cycle_bytes = 0;
    return true;
}

static cdc_err_t connection_lost(cdc_source_t *src, cdc_error_t *e)
{
    return cdc_pg_error(src->repl, NULL, CDC_ERR_UNAVAILABLE, e, "replication connection lost");
}

cdc_err_t cdc_source_read(cdc_source_t *src, int timeout_ms, cdc_source_event_t *ev,
                          const uint8_t **data, size_t *len, uint64_t *lsn, bool *reply_requested,
                          cdc_error_t *e)
{
    char *buf = NULL;
    int n;

    *ev = CDC_SRC_NONE;
    *reply_requested = false;
    cdc_pg_copy_free(src->copybuf);
    src->copybuf = NULL;
    n = cdc_pg_copy_read(src->repl, &buf);
    if (n == 0 && src->coalesce_ms > 0) {
        /* libpq's buffer is used up: first take what the socket already holds (under a
         * backlog it always holds more, and no read may wait), then coalesce. */
        if (!cdc_pg_consume(src->repl))
            return connection_lost(src, e);
        n = cdc_pg_copy_read(src->repl, &buf);
        if (n == 0 && coalesce_wait(src)) {
            if (!cdc_pg_consume(src->repl))
                return connection_lost(src, e);
            n = cdc_pg_copy_read(src->repl, &buf);
        }
    }
    if (n == 0) {
        int w = cdc_pg_wait(src->repl, (int64_t)timeout_ms * 1000);
        if (w == -1)
            return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "replication connection lost");
        if (w < 0)
            return cdc_error_set(e, CDC_ERR_UNAVAILABLE, "select failed: %s", strerror(errno));
        if (!cdc_pg_consume(src->repl))
            return connection_lost(src, e);
        n = cdc_pg_copy_read(src->repl, &buf);
        src->wake_us = cdc_clock_mono_us();
        src->cycle_bytes = 0;
        if (n == 0)
            return CDC_OK;
    }
    if (n > 0)
        src->cycle_bytes += (size_t)n;
    if (n == -1) {
        cdc_pg_result_t *r = cdc_pg_next_result(src->repl);
        cdc_pg_error(src->repl, r, CDC_ERR_UNAVAILABLE, e, "replication stream ended");
        cdc_pg_clear(r);
        return CDC_ERR_UNAVAILABLE;
    }
    if (n < 0)
        return cdc_pg_error(src->repl, NULL, CDC_ERR_UNAVAILABLE, e,
                            "could not read replication stream");
    src->copybuf = buf;
    if (buf[0] == 'k') {
        if (n < 18)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "short keepalive message");
        src->server_wal_end = be64((const uint8_t *)buf + 1);
        if (src->server_wal_end > src->last_received)
            src->last_received = src->server_wal_end;
        *reply_requested = buf[17] != 0;
        *ev = CDC_SRC_KEEPALIVE;
        return CDC_OK;
    }
    if (buf[0] == 'w') {
        uint64_t start, end;
        if (n < 25)
            return cdc_error_set(e, CDC_ERR_PROTOCOL, "short XLogData message");
        start = be64((const uint8_t *)buf + 1);
        end = be64((const uint8_t *)buf + 9);
        if (end > src->server_wal_end)
            src->server_wal_end = end;
        if (start > src->last_received)
            src->last_received = start;
        *lsn = start;
        *data = (const uint8_t *)buf + 25;
        *len = (size_t)n - 25;
        *ev = CDC_SRC_DATA;
        return CDC_OK;
    }
    return cdc_error_set(e, CDC_ERR_PROTOCOL, "unexpected replication message type 0x%02x",
                         (unsigned)(uint8_t)buf[0]);
}

cdc_err_t cdc_source_feedback(cdc_source_t *src, uint64_t confirmed, cdc_error_t *e)
{
    uint8_t msg[34];
    msg[0] = 'r';
    put64(msg + 1, src->last_received > confirmed ? src->last_received : confirmed);
    put64(msg + 9, confirmed);
    put64(msg + 17, confirmed);
    put64(msg + 25, (uint64_t)pg_now_us());
    msg[33] = 0;
    if (!cdc_pg_copy_write(src->repl, msg, sizeof(msg)))
        return cdc_pg_error(src->repl, NULL, CDC_ERR_UNAVAILABLE, e, "could not send feedback");
    return CDC_OK;
}

/* How long a stop reads what the walsender still sends before it gives up on a polite end
 * (docs/capture.md, "Shutdown"). */
#define CDC_SOURCE_STOP_MS 2000

void cdc_source_stop(cdc_source_t *src)
{
    cdc_pg_result_t *r;
    int64_t deadline;
    if (!cdc_pg_connected(src->repl))
        return;
    if (!cdc_pg_copy_end(src->repl))
        return;
    /* The walsender ends COPY only after the transaction it is sending, which may hold
     * millions of rows: read and drop what still comes, for CDC_SOURCE_STOP_MS at most.
     * Past that the caller just closes the connection: nothing is lost, the slot moved
     * only as far as we confirmed. */
    deadline = cdc_clock_mono_us() + (int64_t)CDC_SOURCE_STOP_MS * 1000;
    for (;;) {
        char *buf = NULL;
        int n = cdc_pg_copy_read(src->repl, &buf);
        int64_t left = deadline - cdc_clock_mono_us();
        cdc_pg_copy_free(buf);
        if (n == -1)
            break; /* the server ended COPY */
        if (n < -1 || left <= 0) {
            cdc_log_info("the server was still sending when the stream stopped: connection "
                         "closed (the slot keeps its confirmed position)");
            return;
        }
        if (n == 0 && (cdc_pg_wait(src->repl, left) < 0 || !cdc_pg_consume(src->repl)))
            return;
    }
    /* COPY ended: the results of the command (a COPY state again means it did not) */
    for (int i = 0; i < 16 && (r = cdc_pg_next_result(src->repl)) != NULL; i++) {
        cdc_pg_status_t st = cdc_pg_status(r);
        cdc_pg_clear(r);
        if (st == CDC_PG_COPY || st == CDC_PG_COPY_BOTH)
            return;
    }
}
