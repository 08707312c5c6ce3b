/*
 * The dead-letter record format (see dlq.h): headers written by the worker and read
 * back by cdcctl, record ids, replay marks, and the selection of dead letters.
 */
#include "common/dlq.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/buf.h"

static const char *const class_names[CDC_DLQ__COUNT] = {
    [CDC_DLQ_MALFORMED_JSON] = "malformed_json",
    [CDC_DLQ_MISSING_KEY] = "missing_key",
    [CDC_DLQ_UNKNOWN_OP] = "unknown_op",
    [CDC_DLQ_TYPE_MISMATCH] = "type_mismatch",
    [CDC_DLQ_UNKNOWN_SCHEMA] = "unknown_schema",
    [CDC_DLQ_OVERSIZED] = "oversized",
    [CDC_DLQ_UNRESOLVED_TOAST] = "unresolved_toast",
};

const char *cdc_dlq_class_name(cdc_dlq_class_t cls)
{
    if ((int)cls < 0 || cls >= CDC_DLQ__COUNT)
        return "unknown";
    return class_names[cls];
}

int cdc_dlq_class_parse(const char *name)
{
    for (int i = 0; i < CDC_DLQ__COUNT; i++)
        if (strcmp(class_names[i], name) == 0)
            return i;
    return -1;
}

void cdc_dlq_topic(const char *topic, char *buf, size_t size)
{
    snprintf(buf, size, "%s" CDC_DLQ_SUFFIX, topic);
}

void cdc_dlq_replays_topic(const char *prefix, char *buf, size_t size)
{
    snprintf(buf, size, "%s._dlq_replays", prefix);
}

/* RFC 3339 UTC with milliseconds. */
static void rfc3339(char *buf, size_t size, int64_t ms)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char ts[32];

    gmtime_r(&secs, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03dZ", ts, (int)(ms % 1000));
}

void cdc_dlq_headers(cdc_dlq_headers_t *h, cdc_dlq_class_t cls, const char *message,
                     const char *topic, int32_t partition, int64_t offset, int64_t now_ms,
                     int64_t replay_count)
{
    memset(h, 0, sizeof(*h));
    h->name[0] = CDC_DLQ_H_CLASS;
    snprintf(h->value[0], sizeof(h->value[0]), "%s", cdc_dlq_class_name(cls));
    h->name[1] = CDC_DLQ_H_MESSAGE;
    snprintf(h->value[1], sizeof(h->value[1]), "%s", message ? message : "");
    h->name[2] = CDC_DLQ_H_TOPIC;
    snprintf(h->value[2], sizeof(h->value[2]), "%s", topic);
    h->name[3] = CDC_DLQ_H_PARTITION;
    snprintf(h->value[3], sizeof(h->value[3]), "%" PRId32, partition);
    h->name[4] = CDC_DLQ_H_OFFSET;
    snprintf(h->value[4], sizeof(h->value[4]), "%" PRId64, offset);
    h->name[5] = CDC_DLQ_H_TIME;
    rfc3339(h->value[5], sizeof(h->value[5]), now_ms);
    h->name[6] = CDC_DLQ_H_REPLAY_COUNT;
    snprintf(h->value[6], sizeof(h->value[6]), "%" PRId64, replay_count);
}

/* A header's value as a C string into buf (truncated to fit). */
static void header_str(const cdc_kafka_header_t *h, char *buf, size_t size)
{
    size_t n = h->value != NULL ? h->value_len : 0;
    if (n >= size)
        n = size - 1;
    if (n > 0)
        memcpy(buf, h->value, n);
    buf[n] = '\0';
}

/* A header's value as a non-negative integer, or -1. */
static int64_t header_int(const cdc_kafka_header_t *h)
{
    char buf[32], *end;
    long long v;
    if (h->value == NULL || h->value_len == 0 || h->value_len >= sizeof(buf))
        return -1;
    header_str(h, buf, sizeof(buf));
    v = strtoll(buf, &end, 10);
    return *end == '\0' && v >= 0 ? (int64_t)v : -1;
}

int64_t cdc_dlq_replay_count(const cdc_kafka_header_t *h)
{
    int64_t v = h != NULL ? header_int(h) : -1;
    return v > 0 ? v : 0;
}

/* ---- dead letters read back --------------------------------------------------------------- */

void cdc_dlq_id_format(char *buf, size_t size, const char *dlq_topic, int32_t partition,
                       int64_t offset)
{
    snprintf(buf, size, "%s:%" PRId32 ":%" PRId64, dlq_topic, partition, offset);
}

/* Parses "<partition>:<offset>" (both non-negative decimal integers). */
static bool parse_position(const char *s, int32_t *partition, int64_t *offset)
{
    char *end;
    long long p, o;
    if (*s < '0' || *s > '9')
        return false;
    p = strtoll(s, &end, 10);
    if (*end != ':' || p > INT32_MAX || end[1] < '0' || end[1] > '9')
        return false;
    o = strtoll(end + 1, &end, 10);
    if (*end != '\0')
        return false;
    *partition = (int32_t)p;
    *offset = (int64_t)o;
    return true;
}

bool cdc_dlq_id_parse(const char *s, const char *default_topic, char *topic, size_t topic_size,
                      int32_t *partition, int64_t *offset)
{
    const char *c = strchr(s, ':');
    size_t n;
    if (c == NULL)
        return false;
    if (strchr(c + 1, ':') == NULL) { /* short form */
        if (default_topic == NULL || !parse_position(s, partition, offset))
            return false;
        snprintf(topic, topic_size, "%s", default_topic);
        return true;
    }
    n = (size_t)(c - s);
    if (n == 0 || n >= topic_size || !parse_position(c + 1, partition, offset))
        return false;
    memcpy(topic, s, n);
    topic[n] = '\0';
    return true;
}

/* name less "<prefix>." when it starts so, into buf. */
static void strip_prefix(char *buf, size_t size, const char *name, size_t name_len,
                         const char *prefix)
{
    size_t pl = prefix != NULL ? strlen(prefix) : 0;
    if (pl > 0 && name_len > pl + 1 && strncmp(name, prefix, pl) == 0 && name[pl] == '.') {
        name += pl + 1;
        name_len -= pl + 1;
    }
    snprintf(buf, size, "%.*s", (int)name_len, name);
}

bool cdc_dlq_record_parse(cdc_dlq_record_t *r, const char *dlq_topic, int32_t partition,
                          int64_t offset, const cdc_kafka_header_t *hs, size_t n,
                          const char *prefix)
{
    bool have_class = false;
    size_t tl = strlen(dlq_topic);

    memset(r, 0, sizeof(*r));
    snprintf(r->dlq_topic, sizeof(r->dlq_topic), "%s", dlq_topic);
    r->partition = partition;
    r->offset = offset;
    r->origin_partition = -1;
    r->origin_offset = -1;
    cdc_dlq_id_format(r->id, sizeof(r->id), dlq_topic, partition, offset);
    /* the last header of a name wins, as cdc_kafka_msg_header() reads them */
    for (size_t i = 0; i < n; i++) {
        const cdc_kafka_header_t *h = &hs[i];
        if (strcmp(h->name, CDC_DLQ_H_CLASS) == 0) {
            header_str(h, r->cls, sizeof(r->cls));
            have_class = true;
        } else if (strcmp(h->name, CDC_DLQ_H_MESSAGE) == 0) {
            header_str(h, r->message, sizeof(r->message));
        } else if (strcmp(h->name, CDC_DLQ_H_TOPIC) == 0) {
            header_str(h, r->origin_topic, sizeof(r->origin_topic));
        } else if (strcmp(h->name, CDC_DLQ_H_PARTITION) == 0) {
            int64_t v = header_int(h);
            r->origin_partition = v >= 0 && v <= INT32_MAX ? (int32_t)v : -1;
        } else if (strcmp(h->name, CDC_DLQ_H_OFFSET) == 0) {
            r->origin_offset = header_int(h);
        } else if (strcmp(h->name, CDC_DLQ_H_TIME) == 0) {
            header_str(h, r->time, sizeof(r->time));
        } else if (strcmp(h->name, CDC_DLQ_H_REPLAY_COUNT) == 0) {
            r->replay_count = cdc_dlq_replay_count(h);
        }
    }
    if (r->origin_topic[0] != '\0')
        strip_prefix(r->table, sizeof(r->table), r->origin_topic, strlen(r->origin_topic), prefix);
    else
        strip_prefix(r->table, sizeof(r->table), dlq_topic,
                     tl > 4 && strcmp(dlq_topic + tl - 4, ".dlq") == 0 ? tl - 4 : tl, prefix);
    return have_class;
}

/* ---- replay marks --------------------------------------------------------------------------- */

char *cdc_dlq_mark_encode(const cdc_dlq_mark_t *m)
{
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "id", m->id, "time", m->time, "topic",
                  m->topic, "partition", (json_int_t)m->partition, "offset", (json_int_t)m->offset,
                  "replay_count", (json_int_t)m->replay_count, "transform", m->transform);
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

static void copy_str(json_t *o, const char *k, char *buf, size_t size)
{
    const char *s = json_string_value(json_object_get(o, k));
    snprintf(buf, size, "%s", s != NULL ? s : "");
}

bool cdc_dlq_mark_parse(const void *json, size_t len, cdc_dlq_mark_t *m)
{
    json_t *o = json_loadb(json, len, 0, NULL);
    bool ok = json_is_object(o) && json_is_string(json_object_get(o, "id"));

    memset(m, 0, sizeof(*m));
    if (ok) {
        copy_str(o, "id", m->id, sizeof(m->id));
        copy_str(o, "time", m->time, sizeof(m->time));
        copy_str(o, "topic", m->topic, sizeof(m->topic));
        copy_str(o, "transform", m->transform, sizeof(m->transform));
        m->partition = (int32_t)json_integer_value(json_object_get(o, "partition"));
        m->offset = (int64_t)json_integer_value(json_object_get(o, "offset"));
        m->replay_count = (int64_t)json_integer_value(json_object_get(o, "replay_count"));
    }
    json_decref(o);
    return ok;
}

/* ---- selection --------------------------------------------------------------------------------
 */

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

/* Appends a copy of the n bytes of item to the list l of *cnt strings. */
static cdc_err_t push(char ***l, size_t *cnt, const char *item, size_t n, cdc_error_t *e)
{
    char *copy = strndup(item, n);
    if (copy == NULL || cdc_array_resize(*l, *cnt + 1) != CDC_OK) {
        free(copy);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    (*l)[(*cnt)++] = copy;
    return CDC_OK;
}

/* Splits a comma-separated list into *out (empty items skipped). */
static cdc_err_t split(const char *s, char ***out, size_t *n, cdc_error_t *e)
{
    char **l = NULL;
    size_t cnt = 0;
    while (s != NULL && *s != '\0') {
        const char *c = strchr(s, ',');
        size_t len = c != NULL ? (size_t)(c - s) : strlen(s);
        if (len > 0 && push(&l, &cnt, s, len, e) != CDC_OK) {
            free_list(l, cnt);
            return CDC_ERR_NOMEM;
        }
        s += len + (c != NULL ? 1 : 0);
    }
    *out = l;
    *n = cnt;
    return CDC_OK;
}

cdc_err_t cdc_dlq_select_init(cdc_dlq_select_t *sel, const char *tables, const char *classes,
                              int64_t partition, int64_t from_offset, int64_t to_offset,
                              bool skip_replayed, cdc_error_t *e)
{
    char **cl = NULL;
    size_t ncl = 0;
    cdc_err_t rc;

    memset(sel, 0, sizeof(*sel));
    sel->partition = partition >= 0 && partition <= INT32_MAX ? (int32_t)partition : -1;
    sel->from_offset = from_offset;
    sel->to_offset = to_offset;
    sel->skip_replayed = skip_replayed;
    if (from_offset >= 0 && to_offset >= 0 && to_offset < from_offset)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "--to-offset %" PRId64 " is before --from-offset %" PRId64, to_offset,
                             from_offset);
    if ((rc = split(classes, &cl, &ncl, e)) != CDC_OK)
        return rc;
    sel->any_class = ncl == 0;
    for (size_t i = 0; i < ncl; i++) {
        int c = cdc_dlq_class_parse(cl[i]);
        if (c < 0) {
            rc = cdc_error_set(e, CDC_ERR_CONFIG,
                               "--class: no class \"%s\" (malformed_json, missing_key, "
                               "unknown_op, type_mismatch, unknown_schema, oversized, "
                               "unresolved_toast)",
                               cl[i]);
            free_list(cl, ncl);
            return rc;
        }
        sel->classes[c] = true;
    }
    free_list(cl, ncl);
    return split(tables, &sel->tables, &sel->ntables, e);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

cdc_err_t cdc_dlq_select_ids(cdc_dlq_select_t *sel, const char *text, const char *prefix,
                             cdc_error_t *e)
{
    char single[256], *dflt = NULL;
    int line = 0;

    if (sel->ntables == 1) { /* the short form names a record of this table */
        snprintf(single, sizeof(single), "%s%s%s.dlq", prefix ? prefix : "",
                 prefix && prefix[0] ? "." : "", sel->tables[0]);
        dflt = single;
    }
    while (text != NULL && *text != '\0') {
        const char *nl = strchr(text, '\n');
        size_t len = nl != NULL ? (size_t)(nl - text) : strlen(text);
        char buf[CDC_DLQ_ID_MAX], topic[256], id[CDC_DLQ_ID_MAX];
        int32_t p;
        int64_t o;

        line++;
        while (len > 0 && (*text == ' ' || *text == '\t')) {
            text++;
            len--;
        }
        while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\r'))
            len--;
        if (len > 0 && text[0] != '#') {
            if (len >= sizeof(buf))
                return cdc_error_set(e, CDC_ERR_CONFIG, "--ids-file: line %d is too long", line);
            memcpy(buf, text, len);
            buf[len] = '\0';
            if (!cdc_dlq_id_parse(buf, dflt, topic, sizeof(topic), &p, &o)) {
                bool short_form = strchr(buf, ':') != NULL && strchr(buf, ':') == strrchr(buf, ':');
                return cdc_error_set(e, CDC_ERR_CONFIG,
                                     "--ids-file: line %d is not a record id: \"%s\"%s", line, buf,
                                     short_form && dflt == NULL
                                         ? "\nhint: <partition>:<offset> needs exactly one --table"
                                         : "");
            }
            cdc_dlq_id_format(id, sizeof(id), topic, p, o);
            if (push(&sel->ids, &sel->nids, id, strlen(id), e) != CDC_OK)
                return CDC_ERR_NOMEM;
        }
        text += (nl != NULL ? (size_t)(nl - text) + 1 : len);
        if (nl == NULL)
            break;
    }
    /* an ids file given, even an empty one, selects by id */
    if (sel->ids == NULL && cdc_array_resize(sel->ids, 0) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    qsort(sel->ids, sel->nids, sizeof(*sel->ids), cmp_str);
    return CDC_OK;
}

bool cdc_dlq_select_match(const cdc_dlq_select_t *sel, const cdc_dlq_record_t *r, bool replayed)
{
    if (sel->skip_replayed && replayed)
        return false;
    if (sel->partition >= 0 && r->partition != sel->partition)
        return false;
    if ((sel->from_offset >= 0 && r->offset < sel->from_offset) ||
        (sel->to_offset >= 0 && r->offset > sel->to_offset))
        return false;
    if (!sel->any_class) {
        int c = cdc_dlq_class_parse(r->cls);
        if (c < 0 || !sel->classes[c])
            return false;
    }
    if (sel->ntables > 0) {
        size_t i;
        for (i = 0; i < sel->ntables; i++)
            if (strcmp(sel->tables[i], r->table) == 0 ||
                strcmp(sel->tables[i], r->origin_topic) == 0)
                break;
        if (i == sel->ntables)
            return false;
    }
    if (sel->ids != NULL) {
        const char *key = r->id;
        if (bsearch(&key, sel->ids, sel->nids, sizeof(*sel->ids), cmp_str) == NULL)
            return false;
    }
    return true;
}

void cdc_dlq_select_free(cdc_dlq_select_t *sel)
{
    free_list(sel->tables, sel->ntables);
    free_list(sel->ids, sel->nids);
    memset(sel, 0, sizeof(*sel));
}
