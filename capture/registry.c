/*
 * Schema registry and capture state on Kafka. `<prefix>._schemas` (compacted, one
 * partition) holds one schema document per (topic, version); `<prefix>._capture`
 * (compacted, one partition) holds the capture's own markers: "snapshot/<slot>", written
 * once the slot's initial snapshot is fully acked; "backfill/<topic>", a backfill after
 * DDL completed; "incremental/<topic>", an incremental snapshot's progress (its last
 * chunk produced and acked) and completion; "removed/<topic>", the table left the
 * publication (removed by a tombstone when it joins again). Both are read from the beginning at
 * start, which is how schema versions stay stable across restarts and how a capture killed
 * mid-snapshot knows to redo or resume it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "capture/capture.h"
#include "common/clock.h"
#include "common/log.h"

static void topic_name(const cdc_capture_t *cap, const char *suffix, char *buf, size_t size)
{
    snprintf(buf, size, "%s.%s", cap->cfg->topic_prefix, suffix);
}

/* Reads one single-partition topic to its high watermark, calling fn per message. */
static cdc_err_t read_topic(cdc_capture_t *cap, const char *topic,
                            void (*fn)(cdc_capture_t *, const cdc_kafka_msg_t *), cdc_error_t *e)
{
    cdc_kafka_consumer_config_t cc = {.bootstrap = cap->cfg->kafka.bootstrap,
                                      .client_id = "cdc-capture-registry",
                                      .properties = cap->cfg->kafka.properties};
    cdc_kafka_consumer_t *c = NULL;
    cdc_kafka_tp_t tp = {topic, 0, CDC_KAFKA_OFFSET_BEGINNING};
    cdc_kafka_msg_t msgs[256];
    int64_t low = 0, high = 0, next = 0;
    int64_t deadline = cdc_clock_wall_ms() + CDC_CAPTURE_ADMIN_TIMEOUT_MS;
    cdc_err_t rc;

    rc = cdc_kafka_consumer_new(&cc, &c, e);
    if (rc != CDC_OK)
        return rc;
    rc = cdc_kafka_consumer_watermarks(c, topic, 0, &low, &high, CDC_CAPTURE_ADMIN_TIMEOUT_MS, e);
    if (rc != CDC_OK)
        goto cleanup;
    if (high <= low)
        goto cleanup;
    rc = cdc_kafka_consumer_assign(c, &tp, 1, e);
    if (rc != CDC_OK)
        goto cleanup;
    next = low;
    while (next < high) {
        size_t n = 0;
        if (cdc_clock_wall_ms() > deadline) {
            rc = cdc_error_set(e, CDC_ERR_TIMEOUT, "timed out reading topic \"%s\"", topic);
            goto cleanup;
        }
        rc = cdc_kafka_consume_batch(c, msgs, 256, &n, 500, e);
        for (size_t i = 0; i < n; i++) {
            fn(cap, &msgs[i]);
            next = msgs[i].offset + 1;
        }
        cdc_kafka_msgs_release(msgs, n);
        if (rc != CDC_OK)
            goto cleanup;
    }
cleanup:
    cdc_kafka_consumer_free(c);
    if (rc != CDC_OK)
        cdc_error_prefix(e, "could not read \"%s\"", topic);
    return rc;
}

void cdc_registry_on_schema(cdc_capture_t *cap, const cdc_kafka_msg_t *m)
{
    cdc_schema_doc_t doc;
    cdc_error_t err;
    cdc_capture_table_t *t;

    if (m->value == NULL || m->key == NULL)
        return;
    if (cdc_schema_doc_decode(m->value, m->value_len, &doc, &err) != CDC_OK) {
        cdc_log_warn("ignoring schema record at offset %" PRId64 ": %s", m->offset, err.msg);
        return;
    }
    if (doc.pg_schema == NULL || doc.pg_table == NULL) {
        cdc_schema_doc_free(&doc);
        return;
    }
    t = cdc_capture_table_get(cap, doc.pg_schema, doc.pg_table);
    if (t == NULL || strcmp(t->topic, doc.topic) != 0 ||
        (t->has_latest && t->latest.version >= doc.version)) {
        cdc_schema_doc_free(&doc);
        return;
    }
    if (t->has_latest)
        cdc_schema_doc_free(&t->latest);
    t->latest = doc;
    t->has_latest = true;
}

static cdc_err_t produce_acked(cdc_capture_t *cap, const char *topic, const char *key,
                               const char *value, cdc_error_t *e);

/*
 * Waits until Kafka acked every event produced so far. A marker vouches for the events
 * before it (an incremental snapshot's chunk, a backfill): they go to other partitions,
 * maybe other brokers, so the marker's own ack says nothing of theirs, and a marker sent
 * with them still in flight could be stored while they are lost to a kill -9; the resume
 * would then skip them. So they are acked before the marker is sent.
 */
static cdc_err_t flush_before(cdc_capture_t *cap, const char *key, cdc_error_t *e)
{
    int waited = 0;

    while (cap->producer != NULL && cdc_kafka_producer_outstanding(cap->producer) > 0) {
        cdc_err_t rc = cdc_kafka_producer_flush(cap->producer, 1000, e);
        if (rc != CDC_OK && rc != CDC_ERR_TIMEOUT)
            return rc;
        if (*cap->stop)
            return cdc_error_set(e, CDC_ERR_CLOSED, "stopping before \"%s\" was written", key);
        /* the stream waits meanwhile: say so every 10 s */
        if (rc == CDC_ERR_TIMEOUT && ++waited % 10 == 0)
            cdc_log_warn("marker \"%s\" waits for Kafka to acknowledge %d events produced "
                         "before it (%d s so far; the stream waits too)",
                         key, cdc_kafka_producer_outstanding(cap->producer), waited);
    }
    if (cap->track.failed)
        return cdc_error_set_retriable(e, CDC_ERR_KAFKA, true,
                                       "a Kafka delivery failed before \"%s\" was written", key);
    return CDC_OK;
}

/* Writes marker j (taken; "ts_ms" added) under key on `<prefix>._capture`, acked, once
 * every event produced before is acked. */
static cdc_err_t put_marker(cdc_capture_t *cap, const char *key, json_t *j, cdc_error_t *e)
{
    char topic[256], *value;
    cdc_err_t rc;

    if ((rc = flush_before(cap, key, e)) != CDC_OK) {
        json_decref(j);
        return rc;
    }
    topic_name(cap, "_capture", topic, sizeof(topic));
    json_object_set_new(j, "ts_ms", json_integer(cdc_clock_wall_ms()));
    value = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (value == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    rc = produce_acked(cap, topic, key, value, e);
    free(value);
    return rc;
}

/* "backfill/<topic>" = {"schema","table","version"}: the table's backfill of that
 * schema version completed. */
static void on_backfill_marker(cdc_capture_t *cap, const cdc_kafka_msg_t *m)
{
    json_error_t jerr;
    json_t *j = m->value ? json_loadb(m->value, m->value_len, 0, &jerr) : NULL;
    const char *schema = json_string_value(json_object_get(j, "schema"));
    const char *table = json_string_value(json_object_get(j, "table"));
    cdc_capture_table_t *t;

    if (schema != NULL && table != NULL && (t = cdc_capture_table_get(cap, schema, table)) != NULL)
        t->backfilled_version = json_integer_value(json_object_get(j, "version"));
    json_decref(j);
}

cdc_err_t cdc_registry_mark_backfill(cdc_capture_t *cap, cdc_capture_table_t *t, int64_t version,
                                     cdc_error_t *e)
{
    char key[512];
    json_t *j = json_object();
    cdc_err_t rc;

    snprintf(key, sizeof(key), "backfill/%s", t->topic);
    json_object_set_new(j, "schema", json_string(t->schema));
    json_object_set_new(j, "table", json_string(t->name));
    json_object_set_new(j, "version", json_integer(version));
    rc = put_marker(cap, key, j, e);
    if (rc == CDC_OK) {
        t->backfilled_version = version;
        t->backfill_pending = false;
    }
    return rc;
}

/* "incremental/<topic>" = {"schema","table","id","label","after","rows","done",
 * "truncate","abandoned"}: the table's incremental snapshot produced and acked every row
 * up to key "after" (a JSON array of the key columns' text values; null: none yet), or
 * completed ("done"), or was stopped when the table left the publication ("abandoned");
 * "truncate": its first chunk truncates the mirror (the table joined again). */
static void on_incremental_marker(cdc_capture_t *cap, const cdc_kafka_msg_t *m)
{
    json_error_t jerr;
    json_t *j = m->value ? json_loadb(m->value, m->value_len, 0, &jerr) : NULL;
    const char *schema = json_string_value(json_object_get(j, "schema"));
    const char *table = json_string_value(json_object_get(j, "table"));
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *label = json_string_value(json_object_get(j, "label"));
    json_t *after = json_object_get(j, "after");
    cdc_capture_table_t *t;

    if (schema == NULL || table == NULL || id == NULL ||
        (t = cdc_capture_table_get(cap, schema, table)) == NULL) {
        json_decref(j);
        return;
    }
    t->isnap.marked = true;
    t->isnap.abandoned = json_is_true(json_object_get(j, "abandoned"));
    t->isnap.truncate = json_is_true(json_object_get(j, "truncate"));
    t->isnap.due = !json_is_true(json_object_get(j, "done")) && !t->isnap.abandoned;
    snprintf(t->isnap.id, sizeof(t->isnap.id), "%s", id);
    snprintf(t->isnap.label, sizeof(t->isnap.label), "%s", label ? label : "incremental");
    free(t->isnap.after);
    t->isnap.after = json_is_array(after) ? json_dumps(after, JSON_COMPACT) : NULL;
    t->isnap.rows = json_integer_value(json_object_get(j, "rows"));
    free(t->isnap.marked_after);
    t->isnap.marked_after = t->isnap.after ? strdup(t->isnap.after) : NULL;
    t->isnap.marked_rows = t->isnap.rows;
    t->isnap.marked_due = t->isnap.due;
    t->isnap.estimate = json_is_integer(json_object_get(j, "estimate"))
                            ? json_integer_value(json_object_get(j, "estimate"))
                            : -1;
    json_decref(j);
}

/* The marker of t's snapshot at position after with rows done (due: more chunks to
 * read), under *key; NULL for a position that is no JSON array. Records it as t's last
 * marker (isnap.marked_*). */
static json_t *incremental_marker(cdc_capture_table_t *t, const char *after_text, int64_t rows,
                                  bool due, char *key, size_t key_size)
{
    json_t *j, *after = NULL;
    json_error_t jerr;

    if (after_text != NULL && (after = json_loads(after_text, 0, &jerr)) == NULL)
        return NULL;
    snprintf(key, key_size, "incremental/%s", t->topic);
    j = json_object();
    json_object_set_new(j, "schema", json_string(t->schema));
    json_object_set_new(j, "table", json_string(t->name));
    json_object_set_new(j, "id", json_string(t->isnap.id));
    json_object_set_new(j, "label", json_string(t->isnap.label));
    json_object_set_new(j, "after", after ? after : json_null());
    json_object_set_new(j, "rows", json_integer(rows));
    json_object_set_new(j, "estimate", json_integer(t->isnap.estimate));
    json_object_set_new(j, "done", json_boolean(!due && !t->isnap.abandoned));
    json_object_set_new(j, "truncate", json_boolean(t->isnap.truncate));
    json_object_set_new(j, "abandoned", json_boolean(t->isnap.abandoned));
    json_object_set_new(j, "ts_ms", json_integer(cdc_clock_wall_ms()));
    t->isnap.marked = true;
    free(t->isnap.marked_after);
    t->isnap.marked_after = after_text ? strdup(after_text) : NULL;
    t->isnap.marked_rows = rows;
    t->isnap.marked_due = due;
    return j;
}

cdc_err_t cdc_registry_mark_incremental(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    char key[512];
    json_t *j =
        incremental_marker(t, t->isnap.after, t->isnap.rows, t->isnap.due, key, sizeof(key));
    if (j == NULL)
        return cdc_error_set(e, CDC_ERR_INTERNAL, "bad snapshot position of %s.%s", t->schema,
                             t->name);
    return put_marker(cap, key, j, e);
}

cdc_err_t cdc_registry_mark_chunk(cdc_capture_t *cap, cdc_capture_table_t *t, const char *after,
                                  int64_t rows, bool done, cdc_error_t *e)
{
    char key[512], topic[256], *value;
    json_t *j = incremental_marker(t, after, rows, !done, key, sizeof(key));
    cdc_kafka_record_t rec = {.partition = 0, .opaque = CDC_CAPTURE_MARKER_OPAQUE};
    cdc_err_t rc;

    if (j == NULL)
        return cdc_error_set(e, CDC_ERR_INTERNAL, "bad snapshot position of %s.%s", t->schema,
                             t->name);
    value = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (value == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    topic_name(cap, "_capture", topic, sizeof(topic));
    rec.topic = topic;
    rec.key = key;
    rec.key_len = strlen(key);
    rec.value = value;
    rec.value_len = strlen(value);
    /* a full queue: the producer serves delivery reports meanwhile */
    while ((rc = cdc_kafka_produce(cap->producer, &rec, e)) == CDC_ERR_TIMEOUT && !*cap->stop)
        ;
    free(value);
    return rc;
}

/* "removed/<topic>" = {"schema","table","lsn","ts_ms"}: the table left the publication;
 * a tombstone: it joined again. */
static void on_removed_marker(cdc_capture_t *cap, const cdc_kafka_msg_t *m)
{
    json_error_t jerr;
    json_t *j = m->value ? json_loadb(m->value, m->value_len, 0, &jerr) : NULL;
    const char *schema = json_string_value(json_object_get(j, "schema"));
    const char *table = json_string_value(json_object_get(j, "table"));
    cdc_capture_table_t *t = NULL;
    uint64_t lsn = 0;

    if (m->value == NULL) {
        for (size_t i = 0; i < cap->ntables; i++)
            if (m->key_len == 8 + strlen(cap->tables[i].topic) &&
                memcmp((const char *)m->key + 8, cap->tables[i].topic, m->key_len - 8) == 0)
                cap->tables[i].removed = false;
        return;
    }
    if (schema != NULL && table != NULL &&
        (t = cdc_capture_table_get(cap, schema, table)) != NULL) {
        t->removed = true;
        t->removed_ms = json_integer_value(json_object_get(j, "ts_ms"));
        t->removed_lsn =
            cdc_lsn_parse(json_string_value(json_object_get(j, "lsn")), &lsn) ? lsn : 0;
    }
    json_decref(j);
}

cdc_err_t cdc_registry_mark_removed(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    char key[512], lsn[32];
    json_t *j = json_object();
    cdc_err_t rc;

    snprintf(key, sizeof(key), "removed/%s", t->topic);
    json_object_set_new(j, "schema", json_string(t->schema));
    json_object_set_new(j, "table", json_string(t->name));
    json_object_set_new(j, "lsn", json_string(cdc_lsn_str(t->removed_lsn, lsn, sizeof(lsn))));
    rc = put_marker(cap, key, j, e);
    if (rc == CDC_OK)
        t->removed = true;
    return rc;
}

cdc_err_t cdc_registry_clear_removed(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_error_t *e)
{
    char topic[256], key[512];
    cdc_err_t rc;

    topic_name(cap, "_capture", topic, sizeof(topic));
    snprintf(key, sizeof(key), "removed/%s", t->topic);
    rc = produce_acked(cap, topic, key, NULL, e);
    if (rc == CDC_OK)
        t->removed = false;
    return rc;
}

void cdc_registry_on_marker(cdc_capture_t *cap, const cdc_kafka_msg_t *m)
{
    char key[256];
    json_t *j;
    json_error_t jerr;
    uint64_t lsn = 0;

    if (m->key != NULL && m->key_len > 9 && memcmp(m->key, "backfill/", 9) == 0) {
        on_backfill_marker(cap, m);
        return;
    }
    if (m->key != NULL && m->key_len > 12 && memcmp(m->key, "incremental/", 12) == 0) {
        on_incremental_marker(cap, m);
        return;
    }
    if (m->key != NULL && m->key_len > 8 && memcmp(m->key, "removed/", 8) == 0) {
        on_removed_marker(cap, m);
        return;
    }
    snprintf(key, sizeof(key), "snapshot/%s", cap->cfg->slot);
    if (m->key == NULL || m->key_len != strlen(key) || memcmp(m->key, key, m->key_len) != 0)
        return;
    if (m->value == NULL) { /* tombstone: marker removed */
        cap->snapshot_marked = false;
        return;
    }
    j = json_loadb(m->value, m->value_len, 0, &jerr);
    if (j == NULL)
        return;
    if (cdc_lsn_parse(json_string_value(json_object_get(j, "consistent_lsn")), &lsn)) {
        cap->snapshot_marked = true;
        cap->marker_lsn = lsn;
    }
    json_decref(j);
}

cdc_err_t cdc_registry_load(cdc_capture_t *cap, cdc_error_t *e)
{
    char schemas[256], state[256];
    cdc_kafka_topic_spec_t spec = {.partitions = 1, .compact = true};
    cdc_err_t rc;

    topic_name(cap, "_schemas", schemas, sizeof(schemas));
    topic_name(cap, "_capture", state, sizeof(state));
    /* an existing topic with more partitions is fine: the capture uses partition 0 only */
    spec.name = schemas;
    rc = cdc_kafka_ensure_topic(cap->cfg->kafka.bootstrap, cap->cfg->kafka.properties, &spec,
                                CDC_CAPTURE_ADMIN_TIMEOUT_MS, e);
    if (rc != CDC_OK && rc != CDC_ERR_CONFLICT)
        return rc;
    spec.name = state;
    rc = cdc_kafka_ensure_topic(cap->cfg->kafka.bootstrap, cap->cfg->kafka.properties, &spec,
                                CDC_CAPTURE_ADMIN_TIMEOUT_MS, e);
    if (rc != CDC_OK && rc != CDC_ERR_CONFLICT)
        return rc;
    cap->snapshot_marked = false;
    rc = read_topic(cap, schemas, cdc_registry_on_schema, e);
    if (rc != CDC_OK)
        return rc;
    rc = read_topic(cap, state, cdc_registry_on_marker, e);
    if (rc != CDC_OK)
        return rc;
    cap->registry_loaded = true;
    return CDC_OK;
}

/* Produces one record on an internal topic and waits until Kafka acked it; value NULL:
 * a tombstone. */
static cdc_err_t produce_acked(cdc_capture_t *cap, const char *topic, const char *key,
                               const char *value, cdc_error_t *e)
{
    cdc_kafka_record_t rec = {.topic = topic,
                              .partition = 0,
                              .key = key,
                              .key_len = strlen(key),
                              .value = value,
                              .value_len = value ? strlen(value) : 0,
                              .opaque = CDC_CAPTURE_SCHEMA_OPAQUE};
    cdc_err_t rc;

    cap->schema_ack_pending = true;
    cap->schema_ack_err = CDC_OK;
    for (;;) {
        rc = cdc_kafka_produce(cap->producer, &rec, e);
        if (rc != CDC_ERR_TIMEOUT)
            break;
        if (*cap->stop)
            return rc;
    }
    if (rc != CDC_OK) {
        cap->schema_ack_pending = false;
        return rc;
    }
    /* everything produced before is acked too: events never overtake their schema */
    while (cap->schema_ack_pending) {
        rc = cdc_kafka_producer_flush(cap->producer, 1000, e);
        if (rc != CDC_OK && rc != CDC_ERR_TIMEOUT)
            return rc;
        if (cap->schema_ack_pending && *cap->stop)
            return cdc_error_set(e, CDC_ERR_CLOSED, "stopping before \"%s\" was acked", key);
    }
    if (cap->schema_ack_err != CDC_OK)
        return cdc_error_set_retriable(e, cap->schema_ack_err, true,
                                       "could not publish \"%s\" to \"%s\": %s", key, topic,
                                       cdc_err_str(cap->schema_ack_err));
    return CDC_OK;
}

cdc_err_t cdc_registry_mark_snapshot(cdc_capture_t *cap, uint64_t lsn, const char *mode,
                                     cdc_error_t *e)
{
    char key[256], lsnbuf[32];
    json_t *j = json_object();
    cdc_err_t rc;

    snprintf(key, sizeof(key), "snapshot/%s", cap->cfg->slot);
    json_object_set_new(j, "slot", json_string(cap->cfg->slot));
    json_object_set_new(j, "consistent_lsn", json_string(cdc_lsn_str(lsn, lsnbuf, 32)));
    json_object_set_new(j, "mode", json_string(mode));
    rc = put_marker(cap, key, j, e);
    if (rc == CDC_OK) {
        cap->snapshot_marked = true;
        cap->marker_lsn = lsn;
    }
    return rc;
}

void cdc_capture_table_free_names(cdc_capture_table_t *t)
{
    for (size_t i = 0; t->col_names && i < t->doc.ncols; i++)
        free(t->col_names[i]);
    free(t->col_names);
    free(t->col_name_lens);
    t->col_names = NULL;
    t->col_name_lens = NULL;
}

/* One log line per column whose Iceberg identity changed (docs/worker.md, "Schema changes"). */
static void log_changes(const cdc_schema_doc_t *prev, const cdc_schema_doc_t *doc)
{
    char a[64], b[64];
    for (size_t i = 0; prev != NULL && i < doc->ncols; i++) {
        const cdc_schema_col_t *c = &doc->cols[i], *p = NULL;
        for (size_t k = 0; k < prev->ncols && p == NULL; k++)
            if (prev->cols[k].field_id == c->field_id)
                p = &prev->cols[k];
        cdc_schema_ice_type_str(c->ice_type, c->precision, c->scale, b, sizeof(b));
        if (p == NULL && c->type_version > 1) {
            const char *old = "";
            for (size_t k = 0; k < doc->nretired; k++)
                if (doc->retired[k].attnum == c->attnum &&
                    doc->retired[k].type_version == c->type_version - 1)
                    old = doc->retired[k].name;
            cdc_log_warn("%s: column \"%s\" changed to type %s, which Iceberg cannot promote: "
                         "new field \"%s\" (id %d); the earlier values stay in the retired "
                         "field \"%s\" of the old type",
                         doc->topic, c->name, b, cdc_schema_col_field_name(c), (int)c->field_id,
                         old);
        } else if (p == NULL) {
            cdc_log_info("%s: new column \"%s\" %s (field id %d)", doc->topic, c->name, b,
                         (int)c->field_id);
        } else {
            cdc_schema_ice_type_str(p->ice_type, p->precision, p->scale, a, sizeof(a));
            if (strcmp(p->name, c->name) != 0)
                cdc_log_info("%s: column \"%s\" renamed to \"%s\" (field id %d)", doc->topic,
                             p->name, c->name, (int)c->field_id);
            if (strcmp(a, b) != 0)
                cdc_log_info("%s: column \"%s\" promoted from %s to %s (field id %d)", doc->topic,
                             c->name, a, b, (int)c->field_id);
        }
    }
    for (size_t k = 0; prev != NULL && k < prev->ncols; k++) {
        bool live = false;
        for (size_t i = 0; i < doc->ncols && !live; i++)
            live = doc->cols[i].field_id == prev->cols[k].field_id ||
                   (prev->cols[k].attnum > 0 && doc->cols[i].attnum == prev->cols[k].attnum);
        if (!live)
            cdc_log_info("%s: column \"%s\" dropped (field id %d)", doc->topic, prev->cols[k].name,
                         (int)prev->cols[k].field_id);
    }
}

bool cdc_registry_number(cdc_capture_table_t *t, cdc_schema_doc_t *doc)
{
    /* a backfill an earlier version needed and never finished is still due */
    bool due = t->has_latest && t->latest.backfill && t->backfilled_version < t->latest.version;
    if (t->has_latest && cdc_schema_doc_same_shape(&t->latest, doc)) {
        doc->version = t->latest.version;
        doc->resync = due && t->latest.resync;
        t->backfill_pending = due;
        return false;
    }
    doc->version = t->has_latest ? t->latest.version + 1 : 1;
    doc->resync =
        (due && t->latest.resync) || (t->has_latest && cdc_schema_doc_drops_rows(&t->latest, doc));
    doc->backfill =
        due || doc->resync || (t->has_latest && cdc_schema_doc_rewrites_rows(&t->latest, doc));
    t->backfill_pending = doc->backfill;
    return true;
}

cdc_err_t cdc_capture_set_schema(cdc_capture_t *cap, cdc_capture_table_t *t, cdc_schema_doc_t *doc,
                                 cdc_error_t *e)
{
    char topic[256], key[512];
    char *json = NULL;
    cdc_err_t rc;

    free(doc->topic);
    doc->topic = strdup(t->topic);
    if (doc->topic == NULL) {
        cdc_schema_doc_free(doc);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    rc = cdc_capture_topic_ensure(cap, t, e);
    if (rc == CDC_OK)
        rc = cdc_schema_doc_assign_ids(t->has_latest ? &t->latest : NULL, doc, e);
    if (rc != CDC_OK) {
        cdc_schema_doc_free(doc);
        return rc;
    }
    if (cdc_registry_number(t, doc)) {
        /* The copy that becomes t->latest is made first: a version registered but not
         * remembered would be numbered again. */
        cdc_schema_doc_t latest;
        if (cdc_schema_doc_copy(&latest, doc) != CDC_OK) {
            cdc_schema_doc_free(doc);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        rc = cdc_schema_doc_encode(doc, &json, e);
        if (rc == CDC_OK) {
            topic_name(cap, "_schemas", topic, sizeof(topic));
            cdc_schema_record_key(t->topic, doc->version, key, sizeof(key));
            rc = produce_acked(cap, topic, key, json, e);
            free(json);
        }
        if (rc != CDC_OK) {
            cdc_schema_doc_free(&latest);
            cdc_schema_doc_free(doc);
            return rc;
        }
        cdc_log_info("registered schema %s version %" PRId64 " (%zu columns)", t->topic,
                     doc->version, doc->ncols);
        log_changes(t->has_latest ? &t->latest : NULL, doc);
        if (t->has_latest)
            cdc_schema_doc_free(&t->latest);
        t->latest = latest;
        t->has_latest = true;
    }
    cdc_capture_table_free_names(t);
    if (t->has_doc)
        cdc_schema_doc_free(&t->doc);
    t->doc = *doc;
    t->has_doc = true;
    memset(doc, 0, sizeof(*doc));
    /* caches for the encoder's hot path */
    cdc_buf_reset(&t->source_head);
    cdc_event_source_head(&t->source_head, cap->cfg->topic_prefix, cap->src.db, t->schema, t->name,
                          t->doc.version);
    cdc_capture_table_free_names(t);
    t->col_names = calloc(t->doc.ncols ? t->doc.ncols : 1, sizeof(*t->col_names));
    t->col_name_lens = calloc(t->doc.ncols ? t->doc.ncols : 1, sizeof(*t->col_name_lens));
    if (t->col_names == NULL || t->col_name_lens == NULL || t->source_head.oom) {
        cdc_capture_table_free_names(t);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->doc.ncols; i++) {
        cdc_buf_t nb = {0};
        cdc_buf_json_str(&nb, t->doc.cols[i].name, strlen(t->doc.cols[i].name));
        cdc_buf_putc(&nb, ':');
        if (nb.oom) {
            cdc_buf_free(&nb);
            cdc_capture_table_free_names(t);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        t->col_names[i] = nb.data;
        t->col_name_lens[i] = nb.len;
    }
    return CDC_OK;
}
