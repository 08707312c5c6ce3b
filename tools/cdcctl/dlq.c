/*
 * `cdcctl dlq list | show | replay` (docs/operations.md, "Dead letters: inspection and
 * replay"): reads the dead-letter topics (`<topic>.dlq`, found by their suffix) and the
 * replay marks (`<prefix>._dlq_replays`) from the start of each partition to its high
 * watermark, selects records (common/dlq.h), and
 *   list    counts them per table and class, with the first and last error time;
 *   show    prints each with its headers, key and payload (--json: one object a line);
 *   replay  transforms each payload (--transform / --transform-cmd, transform.c) and
 *           produces it back to its origin topic and partition with its key and the
 *           headers cdc.replay.count (the dead letter's count + 1) and cdc.replay.of
 *           (its id); once Kafka acknowledged it, a mark keyed by the id goes to the
 *           replay topic, which list and show consult (replayed=true).
 * Records of one DLQ partition are read, and replayed, in offset order, so the dead
 * letters of one key go back in the order they failed. The worker's dedup makes a replay
 * of a record already applied change nothing (docs/worker.md, "Replayed dead letters").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/evchunk.h"
#include "common/kafka.h"
#include "tools/cdcctl/cdcctl.h"

/* A replay mark and its place in the replay topic (the newest of an id wins). */
typedef struct mark_entry {
    cdc_dlq_mark_t mark;
    size_t seq;
} mark_entry_t;

/* Replay marks, sorted by id, the newest of each id kept. */
typedef struct marks {
    mark_entry_t *v;
    size_t n, cap;
} marks_t;

typedef struct reader reader_t;

/* Called for each message of a scanned partition, in offset order: 0 goes on, 1 stops
 * the scan (a limit reached), -1 stops it with an error (said on stderr). */
typedef int (*msg_fn)(reader_t *rd, const cdc_kafka_msg_t *m, void *arg);

struct reader {
    const ctl_config_t *cfg;
    cdc_kafka_consumer_t *consumer;
    cdc_dlq_select_t sel;
    marks_t marks;
    int64_t selected; /* records that matched so far (--limit) */
};

/* ---- reading partitions ------------------------------------------------------------------ */

/* Reads topic/partition from its start (or from) to its high watermark (or to), calling
 * fn for each message. Returns 0, 1 (fn stopped it) or -1. */
static int scan_partition(reader_t *rd, const char *topic, int32_t partition, int64_t from,
                          int64_t to, msg_fn fn, void *arg)
{
    cdc_kafka_msg_t msgs[256];
    cdc_kafka_tp_t tp;
    cdc_error_t e;
    int64_t low = 0, high = 0, next, idle_ms = rd->cfg->timeout_ms * 5 + 5000;
    int64_t last_progress = cdc_clock_mono_ms();
    int status = 0;

    if (cdc_kafka_consumer_watermarks(rd->consumer, topic, partition, &low, &high,
                                      (int)rd->cfg->timeout_ms, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        return -1;
    }
    if (to >= 0 && to + 1 < high)
        high = to + 1;
    next = from > low ? from : low;
    if (next >= high)
        return 0;
    tp = (cdc_kafka_tp_t){topic, partition, next};
    if (cdc_kafka_consumer_assign(rd->consumer, &tp, 1, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        return -1;
    }
    while (status == 0 && next < high) {
        size_t n = 0;
        cdc_err_t rc = cdc_kafka_consume_batch(rd->consumer, msgs, 256, &n, 500, &e);
        for (size_t i = 0; i < n; i++) {
            if (status == 0 && msgs[i].offset < high)
                status = fn(rd, &msgs[i], arg);
            next = msgs[i].offset + 1;
        }
        cdc_kafka_msgs_release(msgs, n);
        if (rc != CDC_OK) {
            fprintf(stderr, "cdcctl: could not read \"%s\" partition %d: %s\n", topic,
                    (int)partition, e.msg);
            status = -1;
        } else if (n > 0) {
            last_progress = cdc_clock_mono_ms();
        } else if (cdc_clock_mono_ms() - last_progress > idle_ms) {
            fprintf(stderr,
                    "cdcctl: could not read \"%s\" partition %d to its end: at offset %" PRId64
                    " of %" PRId64 " after %" PRId64 " ms without a record\n",
                    topic, (int)partition, next, high, idle_ms);
            status = -1;
        }
    }
    cdc_kafka_consumer_assign(rd->consumer, NULL, 0, &e);
    return status;
}

/* Every partition of topic (or only --partition), as scan_partition. */
static int scan_topic(reader_t *rd, const char *topic, bool filtered, msg_fn fn, void *arg)
{
    int32_t count = 0;
    cdc_error_t e;
    int status = 0;
    const cdc_dlq_select_t *s = &rd->sel;

    if (cdc_kafka_consumer_partitions(rd->consumer, topic, &count, (int)rd->cfg->timeout_ms, &e) !=
        CDC_OK) {
        if (e.code == CDC_ERR_NOT_FOUND)
            return 0;
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        return -1;
    }
    for (int32_t p = 0; p < count && status == 0; p++) {
        if (filtered && s->partition >= 0 && p != s->partition)
            continue;
        status = scan_partition(rd, topic, p, filtered ? s->from_offset : -1,
                                filtered ? s->to_offset : -1, fn, arg);
    }
    return status;
}

/* ---- replay marks ------------------------------------------------------------------------- */

static int cmp_mark(const void *a, const void *b)
{
    const mark_entry_t *x = a, *y = b;
    int c = strcmp(x->mark.id, y->mark.id);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_mark_id(const void *key, const void *b)
{
    return strcmp(key, ((const mark_entry_t *)b)->mark.id);
}

static int add_mark(reader_t *rd, const cdc_kafka_msg_t *m, void *arg)
{
    marks_t *ms = &rd->marks;
    (void)arg;
    if (m->value == NULL)
        return 0;
    if (cdc_array_reserve(ms->v, ms->cap, ms->n + 1, 64) != CDC_OK) {
        fprintf(stderr, "cdcctl: out of memory\n");
        return -1;
    }
    if (cdc_dlq_mark_parse(m->value, m->value_len, &ms->v[ms->n].mark))
        ms->v[ms->n].seq = ms->n, ms->n++;
    return 0;
}

/* Loads the replay marks: sorted by id, the newest of each id kept. */
static int load_marks(reader_t *rd)
{
    char topic[300];
    marks_t *ms = &rd->marks;
    size_t out = 0;

    cdc_dlq_replays_topic(rd->cfg->topic_prefix, topic, sizeof(topic));
    if (scan_topic(rd, topic, false, add_mark, NULL) < 0)
        return -1;
    qsort(ms->v, ms->n, sizeof(*ms->v), cmp_mark);
    for (size_t i = 0; i < ms->n; i++) {
        if (out > 0 && strcmp(ms->v[out - 1].mark.id, ms->v[i].mark.id) == 0)
            out--; /* a newer mark of the same id */
        ms->v[out++] = ms->v[i];
    }
    ms->n = out;
    return 0;
}

static const cdc_dlq_mark_t *find_mark(const reader_t *rd, const char *id)
{
    const mark_entry_t *m =
        rd->marks.n ? bsearch(id, rd->marks.v, rd->marks.n, sizeof(*rd->marks.v), cmp_mark_id)
                    : NULL;
    return m != NULL ? &m->mark : NULL;
}

/* ---- selecting dead letters ------------------------------------------------------------------ */

typedef int (*record_fn)(reader_t *rd, const cdc_dlq_record_t *r, const cdc_kafka_msg_t *m,
                         const cdc_dlq_mark_t *mark, void *arg);

typedef struct visit {
    record_fn fn;
    void *arg;
} visit_t;

static int visit_msg(reader_t *rd, const cdc_kafka_msg_t *m, void *arg)
{
    visit_t *v = arg;
    cdc_kafka_header_t hs[64];
    size_t n = cdc_kafka_msg_header_count(m), k = 0;
    cdc_dlq_record_t r;
    const cdc_dlq_mark_t *mark;

    for (size_t i = 0; i < n && k < 64; i++)
        if (cdc_kafka_msg_header_at(m, i, &hs[k]))
            k++;
    if (!cdc_dlq_record_parse(&r, m->topic, m->partition, m->offset, hs, k, rd->cfg->topic_prefix))
        return 0; /* not a dead letter */
    mark = find_mark(rd, r.id);
    if (!cdc_dlq_select_match(&rd->sel, &r, mark != NULL))
        return 0;
    if (rd->cfg->limit > 0 && rd->selected >= rd->cfg->limit)
        return 1;
    rd->selected++;
    return v->fn(rd, &r, m, mark, v->arg);
}

/* Whether a DLQ topic can hold records of the selected tables. */
static bool topic_wanted(const reader_t *rd, const char *topic)
{
    cdc_dlq_record_t r;
    size_t tl = strlen(topic);
    if (rd->sel.ntables == 0)
        return true;
    cdc_dlq_record_parse(&r, topic, 0, 0, NULL, 0, rd->cfg->topic_prefix);
    for (size_t i = 0; i < rd->sel.ntables; i++) {
        const char *t = rd->sel.tables[i];
        if (strcmp(t, r.table) == 0 || (strlen(t) + 4 == tl && strncmp(t, topic, tl - 4) == 0))
            return true;
    }
    return false;
}

/* Calls fn for every selected dead letter, topic by topic (sorted), partition by
 * partition, in offset order. Returns 0 or -1. */
static int each_record(reader_t *rd, record_fn fn, void *arg)
{
    char **topics = NULL;
    size_t ntopics = 0;
    cdc_error_t e;
    visit_t v = {fn, arg};
    int status = 0;

    if (cdc_kafka_consumer_topics(rd->consumer, CDC_DLQ_SUFFIX, &topics, &ntopics,
                                  (int)rd->cfg->timeout_ms, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        return -1;
    }
    for (size_t i = 0; i < ntopics && status == 0; i++)
        if (topic_wanted(rd, topics[i]))
            status = scan_topic(rd, topics[i], true, visit_msg, &v);
    cdc_kafka_topics_free(topics, ntopics);
    return status < 0 ? -1 : 0;
}

/* ---- list -------------------------------------------------------------------------------------
 */

typedef struct group {
    char dlq_topic[256], table[256], cls[64];
    int64_t records, replayed;
    char first[40], last[40];
} group_t;

typedef struct groups {
    group_t *v;
    size_t n, cap;
} groups_t;

static int count_record(reader_t *rd, const cdc_dlq_record_t *r, const cdc_kafka_msg_t *m,
                        const cdc_dlq_mark_t *mark, void *arg)
{
    groups_t *gs = arg;
    group_t *g = NULL;
    (void)rd;
    (void)m;
    for (size_t i = 0; i < gs->n && g == NULL; i++)
        if (strcmp(gs->v[i].dlq_topic, r->dlq_topic) == 0 && strcmp(gs->v[i].cls, r->cls) == 0)
            g = &gs->v[i];
    if (g == NULL) {
        if (cdc_array_reserve(gs->v, gs->cap, gs->n + 1, 16) != CDC_OK) {
            fprintf(stderr, "cdcctl: out of memory\n");
            return -1;
        }
        g = &gs->v[gs->n++];
        memset(g, 0, sizeof(*g));
        snprintf(g->dlq_topic, sizeof(g->dlq_topic), "%s", r->dlq_topic);
        snprintf(g->table, sizeof(g->table), "%s", r->table);
        snprintf(g->cls, sizeof(g->cls), "%s", r->cls);
    }
    g->records++;
    g->replayed += mark != NULL;
    /* RFC 3339 UTC times of one format order as strings */
    if (r->time[0] && (g->first[0] == '\0' || strcmp(r->time, g->first) < 0))
        snprintf(g->first, sizeof(g->first), "%s", r->time);
    if (r->time[0] && strcmp(r->time, g->last) > 0)
        snprintf(g->last, sizeof(g->last), "%s", r->time);
    return 0;
}

static int cmp_group(const void *a, const void *b)
{
    const group_t *x = a, *y = b;
    int c = strcmp(x->table, y->table);
    return c != 0 ? c : strcmp(x->cls, y->cls);
}

static int cmd_list(reader_t *rd)
{
    groups_t gs = {0};
    int64_t total = 0;

    if (each_record(rd, count_record, &gs) < 0) {
        free(gs.v);
        return 1;
    }
    qsort(gs.v, gs.n, sizeof(*gs.v), cmp_group);
    if (!rd->cfg->json)
        printf("%-28s %-17s %8s %9s  %-24s  %s\n", "TABLE", "CLASS", "RECORDS", "REPLAYED", "FIRST",
               "LAST");
    for (size_t i = 0; i < gs.n; i++) {
        const group_t *g = &gs.v[i];
        total += g->records;
        if (rd->cfg->json) {
            json_t *o =
                json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "table", g->table, "dlq_topic",
                          g->dlq_topic, "class", g->cls, "records", (json_int_t)g->records,
                          "replayed", (json_int_t)g->replayed, "first", g->first, "last", g->last);
            json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
            putchar('\n');
            json_decref(o);
        } else {
            printf("%-28s %-17s %8" PRId64 " %9" PRId64 "  %-24s  %s\n", g->table, g->cls,
                   g->records, g->replayed, g->first, g->last);
        }
    }
    if (!rd->cfg->json)
        printf("%" PRId64 " record%s\n", total, total == 1 ? "" : "s");
    free(gs.v);
    return 0;
}

/* ---- show -------------------------------------------------------------------------------------
 */

/* A JSON string of bytes when they are UTF-8, else NULL. */
static json_t *text_or_null(const void *p, size_t n)
{
    return p != NULL ? json_stringn(p, n) : NULL;
}

static json_t *mark_json(const cdc_dlq_mark_t *mark)
{
    if (mark == NULL)
        return json_null();
    return json_pack("{s:s, s:s, s:i, s:I, s:I, s:s}", "time", mark->time, "topic", mark->topic,
                     "partition", (int)mark->partition, "offset", (json_int_t)mark->offset,
                     "replay_count", (json_int_t)mark->replay_count, "transform", mark->transform);
}

/* One record as the JSON object of `show --json` (docs/operations.md). */
static json_t *record_json(const cdc_dlq_record_t *r, const cdc_kafka_msg_t *m,
                           const cdc_dlq_mark_t *mark)
{
    json_t *o = json_object(), *hs = json_object(), *v;
    size_t n = cdc_kafka_msg_header_count(m);

    json_object_set_new(o, "id", json_string(r->id));
    json_object_set_new(o, "dlq_topic", json_string(r->dlq_topic));
    json_object_set_new(o, "partition", json_integer(r->partition));
    json_object_set_new(o, "offset", json_integer(r->offset));
    json_object_set_new(o, "table", json_string(r->table));
    json_object_set_new(o, "class", json_string(r->cls));
    json_object_set_new(o, "message", json_string(r->message));
    json_object_set_new(o, "origin",
                        json_pack("{s:s, s:i, s:I}", "topic", r->origin_topic, "partition",
                                  (int)r->origin_partition, "offset",
                                  (json_int_t)r->origin_offset));
    json_object_set_new(o, "time", json_string(r->time));
    json_object_set_new(o, "replay_count", json_integer(r->replay_count));
    json_object_set_new(o, "replayed", json_boolean(mark != NULL));
    json_object_set_new(o, "replay", mark_json(mark));
    for (size_t i = 0; i < n; i++) {
        cdc_kafka_header_t h;
        if (cdc_kafka_msg_header_at(m, i, &h))
            json_object_set_new(hs, h.name,
                                (v = text_or_null(h.value, h.value_len)) ? v : json_null());
    }
    json_object_set_new(o, "headers", hs);
    v = text_or_null(m->key, m->key_len);
    json_object_set_new(o, "key", v ? v : json_null());
    if (m->value != NULL && (v = text_or_null(m->value, m->value_len)) == NULL) {
        /* not UTF-8: the bytes in base64 instead */
        char *b64 = cdc_base64_encode(m->value, m->value_len);
        json_object_set_new(o, "payload", json_null());
        json_object_set_new(o, "payload_base64", b64 ? json_string(b64) : json_null());
        free(b64);
    } else {
        json_object_set_new(o, "payload", v ? v : json_null());
    }
    return o;
}

static int show_record(reader_t *rd, const cdc_dlq_record_t *r, const cdc_kafka_msg_t *m,
                       const cdc_dlq_mark_t *mark, void *arg)
{
    (void)arg;
    if (rd->cfg->json) {
        json_t *o = record_json(r, m, mark);
        json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(o);
        return 0;
    }
    printf("%s  %s  %s  %s  replay_count=%" PRId64 "  replayed=%s\n", r->id, r->table, r->cls,
           r->time, r->replay_count, mark != NULL ? "true" : "false");
    printf("  origin   %s[%d]@%" PRId64 "\n", r->origin_topic, (int)r->origin_partition,
           r->origin_offset);
    printf("  message  %s\n", r->message);
    if (mark != NULL)
        printf("  replay   %s -> %s[%d]@%" PRId64 " (replay_count=%" PRId64 "%s%s)\n", mark->time,
               mark->topic, (int)mark->partition, mark->offset, mark->replay_count,
               mark->transform[0] ? ", " : "", mark->transform);
    printf("  key      %.*s\n", m->key ? (int)m->key_len : 4,
           m->key ? (const char *)m->key : "null");
    printf("  payload  %.*s\n\n", m->value ? (int)m->value_len : 4,
           m->value ? (const char *)m->value : "null");
    return 0;
}

/* ---- replay ------------------------------------------------------------------------------------
 */

/* A record produced back, waiting for its delivery report. */
typedef struct sent {
    char id[CDC_DLQ_ID_MAX];
    int64_t replay_count;
    bool done;
    cdc_err_t err;
    char error[300];
    char topic[256];
    int32_t partition;
    int64_t offset;
} sent_t;

typedef struct replay {
    ctl_transform_t *transform;
    cdc_kafka_producer_t *producer;
    sent_t *sent;
    size_t nsent, capsent;
    int64_t failed, skipped;
} replay_t;

/* Delivery report (on the thread that polls: this one). opaque = index + 1 in sent. */
static void delivered(void *opaque, cdc_err_t err, const cdc_error_t *detail, int32_t partition,
                      int64_t offset, void *cb_arg)
{
    replay_t *rp = cb_arg;
    size_t i = (size_t)(uintptr_t)opaque;
    sent_t *s;
    if (i == 0 || i > rp->nsent)
        return; /* a mark */
    s = &rp->sent[i - 1];
    s->done = true;
    s->err = err;
    s->partition = partition;
    s->offset = offset;
    if (err != CDC_OK)
        snprintf(s->error, sizeof(s->error), "%s", detail ? detail->msg : cdc_err_str(err));
}

/* One line (or JSON object) per record: result "replayed" (to: where), "dry_run" (to:
 * where it would go), "failed" or "skipped" (why). */
static void report(const reader_t *rd, const char *id, const char *result, const char *to,
                   const char *why)
{
    if (rd->cfg->json) {
        json_t *o = json_pack("{s:s, s:s}", "id", id, "result", result);
        json_object_set_new(o, "to", to ? json_string(to) : json_null());
        json_object_set_new(o, "error", why ? json_string(why) : json_null());
        json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(o);
    } else {
        printf("%-8s  %s%s%s\n", result, id, to ? " -> " : ": ", to ? to : why);
    }
}

static int replay_record(reader_t *rd, const cdc_dlq_record_t *r, const cdc_kafka_msg_t *m,
                         const cdc_dlq_mark_t *mark, void *arg)
{
    replay_t *rp = arg;
    char *payload = NULL, count[32];
    size_t len = 0;
    cdc_error_t e;
    cdc_err_t rc = CDC_OK;
    sent_t *s;
    (void)mark;

    if (r->origin_topic[0] == '\0') {
        report(rd, r->id, "failed", NULL, "the record has no cdc.origin.topic header");
        rp->failed++;
        return 0;
    }
    if (rp->transform != NULL)
        rc = ctl_transform_apply(rp->transform, r, m->value, m->value_len, &payload, &len, &e);
    if (rc == CDC_ERR_CONFLICT) { /* a test of the patch: not a record the patch is for */
        report(rd, r->id, "skipped", NULL, e.msg);
        rp->skipped++;
        return 0;
    }
    if (rc != CDC_OK) {
        report(rd, r->id, "failed", NULL, e.msg);
        rp->failed++;
        return 0;
    }
    /* the record goes back with the transformed payload, or its own */
    const char *value = payload != NULL ? payload : m->value;
    size_t value_len = payload != NULL ? len : m->value_len;
    if (rd->cfg->dry_run) {
        char to[300];
        snprintf(to, sizeof(to), "%s[%d]", r->origin_topic, (int)r->origin_partition);
        report(rd, r->id, "dry_run", to, NULL);
        if (!rd->cfg->json)
            printf("          %.*s\n", value ? (int)value_len : 4, value ? value : "null");
        free(payload);
        return 0;
    }
    if (cdc_array_reserve(rp->sent, rp->capsent, rp->nsent + 1, 64) != CDC_OK) {
        free(payload);
        fprintf(stderr, "cdcctl: out of memory\n");
        return -1;
    }
    s = &rp->sent[rp->nsent];
    memset(s, 0, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", r->id);
    snprintf(s->topic, sizeof(s->topic), "%s", r->origin_topic);
    s->replay_count = r->replay_count + 1;
    snprintf(count, sizeof(count), "%" PRId64, s->replay_count);
    cdc_kafka_header_t hs[3] = {{CDC_DLQ_H_REPLAY_COUNT, count, strlen(count)},
                                {CDC_DLQ_H_REPLAY_OF, r->id, strlen(r->id)}};
    /* a chunk of a chunked event goes back as one (docs/worker.md, "Large rows") */
    size_t nhs = cdc_kafka_msg_header(m, CDC_EVCHUNK_HEADER, &hs[2]) ? 3 : 2;
    cdc_kafka_record_t rec = {r->origin_topic,
                              r->origin_partition >= 0 ? r->origin_partition
                                                       : CDC_KAFKA_PARTITION_ANY,
                              m->key,
                              m->key_len,
                              value,
                              value_len,
                              hs,
                              nhs,
                              0,
                              (void *)(uintptr_t)(rp->nsent + 1)};
    rp->nsent++;
    rc = cdc_kafka_produce(rp->producer, &rec, &e);
    free(payload);
    if (rc != CDC_OK) {
        rp->nsent--;
        report(rd, r->id, "failed", NULL, e.msg);
        rp->failed++;
    }
    cdc_kafka_producer_poll(rp->producer, 0);
    return 0;
}

/* Produces the marks of the records Kafka acknowledged and reports each record. */
static int finish_replay(reader_t *rd, replay_t *rp)
{
    char topic[300], now[40];
    cdc_error_t e;
    cdc_kafka_topic_spec_t spec = {topic, 1, -1, true};
    int64_t replayed = 0;
    int status = 0;
    cdc_dlq_headers_t h;

    if (cdc_kafka_producer_flush(rp->producer, (int)rd->cfg->timeout_ms * 10, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        status = 1;
    }
    /* the time format of the dead letters' headers */
    cdc_dlq_headers(&h, CDC_DLQ_MALFORMED_JSON, "", "", 0, 0, cdc_clock_wall_ms(), 0);
    snprintf(now, sizeof(now), "%s", h.value[5]);
    cdc_dlq_replays_topic(rd->cfg->topic_prefix, topic, sizeof(topic));
    if (rp->nsent > 0 &&
        cdc_kafka_ensure_topic(rd->cfg->kafka, rd->cfg->kafka_properties, &spec,
                               (int)rd->cfg->timeout_ms, &e) != CDC_OK &&
        e.code != CDC_ERR_CONFLICT)
        fprintf(stderr, "cdcctl: warning: %s\n", e.msg);
    for (size_t i = 0; i < rp->nsent; i++) {
        sent_t *s = &rp->sent[i];
        cdc_dlq_mark_t mk = {
            .partition = s->partition, .offset = s->offset, .replay_count = s->replay_count};
        char to[300], *value;
        if (!s->done || s->err != CDC_OK) {
            report(rd, s->id, "failed", NULL, s->done ? s->error : "no delivery report");
            rp->failed++;
            continue;
        }
        snprintf(mk.id, sizeof(mk.id), "%s", s->id);
        snprintf(mk.time, sizeof(mk.time), "%s", now);
        snprintf(mk.topic, sizeof(mk.topic), "%s", s->topic);
        snprintf(mk.transform, sizeof(mk.transform), "%s", ctl_transform_describe(rp->transform));
        value = cdc_dlq_mark_encode(&mk);
        cdc_kafka_record_t rec = {topic, 0, s->id, strlen(s->id), value, value ? strlen(value) : 0,
                                  NULL,  0, 0,     NULL};
        if (value == NULL || cdc_kafka_produce(rp->producer, &rec, &e) != CDC_OK)
            fprintf(stderr, "cdcctl: could not mark %s as replayed: %s\n", s->id,
                    value ? e.msg : "out of memory");
        free(value);
        snprintf(to, sizeof(to), "%s[%d]@%" PRId64, s->topic, (int)s->partition, s->offset);
        report(rd, s->id, "replayed", to, NULL);
        replayed++;
    }
    if (cdc_kafka_producer_flush(rp->producer, (int)rd->cfg->timeout_ms * 10, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: the replay marks may be missing: %s\n", e.msg);
        status = 1;
    }
    if (!rd->cfg->json)
        printf("replayed %" PRId64 " of %" PRId64 " selected record%s (%" PRId64 " failed, %" PRId64
               " skipped by a test of the patch)\n",
               replayed, rd->selected, rd->selected == 1 ? "" : "s", rp->failed, rp->skipped);
    return status != 0 || rp->failed > 0 ? 1 : 0;
}

static int cmd_replay(reader_t *rd)
{
    replay_t rp = {0};
    cdc_error_t e;
    cdc_kafka_producer_config_t pc = {.bootstrap = rd->cfg->kafka,
                                      .client_id = "cdcctl",
                                      .linger_ms = 5,
                                      .properties = rd->cfg->kafka_properties,
                                      .on_delivery = delivered,
                                      .cb_arg = &rp};
    int status;

    if (ctl_transform_open(rd->cfg->transform, rd->cfg->transform_cmd, &rp.transform, &e) !=
        CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        return CDC_CONFIG_EXIT;
    }
    if (!rd->cfg->dry_run && cdc_kafka_producer_new(&pc, &rp.producer, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        ctl_transform_free(rp.transform);
        return 1;
    }
    status = each_record(rd, replay_record, &rp) < 0 ? 1 : 0;
    if (rd->cfg->dry_run) {
        if (!rd->cfg->json)
            printf("dry run: %" PRId64 " selected record%s, nothing replayed (%" PRId64
                   " failed, %" PRId64 " skipped by a test of the patch)\n",
                   rd->selected, rd->selected == 1 ? "" : "s", rp.failed, rp.skipped);
        status = status || rp.failed > 0;
    } else {
        status = finish_replay(rd, &rp) || status;
    }
    cdc_kafka_producer_free(rp.producer);
    ctl_transform_free(rp.transform);
    free(rp.sent);
    return status;
}

/* ---- entry ----------------------------------------------------------------------------------- */

int cdcctl_dlq(const ctl_config_t *cfg, const char *sub)
{
    reader_t rd = {.cfg = cfg};
    cdc_kafka_consumer_config_t cc = {.bootstrap = cfg->kafka,
                                      .client_id = "cdcctl",
                                      .group_id = "cdcctl",
                                      .properties = cfg->kafka_properties};
    cdc_error_t e;
    int status;

    if (strcmp(sub, "list") != 0 && strcmp(sub, "show") != 0 && strcmp(sub, "replay") != 0) {
        fprintf(stderr,
                "cdcctl: unknown command \"dlq %s\"\nhint: dlq list, dlq show, dlq replay\n", sub);
        return CDC_CONFIG_EXIT;
    }
    if (cfg->kafka == NULL || cfg->kafka[0] == '\0') {
        fprintf(stderr, "cdcctl: dlq %s needs --kafka (or CDC_KAFKA): the bootstrap servers\n",
                sub);
        return CDC_CONFIG_EXIT;
    }
    if (cdc_dlq_select_init(&rd.sel, cfg->table, cfg->cls, cfg->partition, cfg->from_offset,
                            cfg->to_offset, cfg->skip_replayed, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        return CDC_CONFIG_EXIT;
    }
    if (cfg->ids_file != NULL && cfg->ids_file[0] != '\0') {
        char *text = NULL;
        size_t len;
        cdc_err_t rc = ctl_read_file(cfg->ids_file, &text, &len, &e);
        if (rc == CDC_OK)
            rc = cdc_dlq_select_ids(&rd.sel, text, cfg->topic_prefix, &e);
        free(text);
        if (rc != CDC_OK) {
            fprintf(stderr, "cdcctl: %s\n", e.msg);
            cdc_dlq_select_free(&rd.sel);
            return CDC_CONFIG_EXIT;
        }
    }
    if (cdc_kafka_consumer_new(&cc, &rd.consumer, &e) != CDC_OK) {
        fprintf(stderr, "cdcctl: %s\n", e.msg);
        cdc_dlq_select_free(&rd.sel);
        return 1;
    }
    if (load_marks(&rd) < 0)
        status = 1;
    else if (strcmp(sub, "list") == 0)
        status = cmd_list(&rd);
    else if (strcmp(sub, "show") == 0)
        status = each_record(&rd, show_record, NULL) < 0 ? 1 : 0;
    else
        status = cmd_replay(&rd);
    cdc_kafka_consumer_free(rd.consumer);
    cdc_dlq_select_free(&rd.sel);
    free(rd.marks.v);
    return status;
}
