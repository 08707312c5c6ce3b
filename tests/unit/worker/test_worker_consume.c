/*
 * Unit tests for worker/consume.c, the worker's data path, on an in-process mock Kafka
 * cluster (worker_mock.h): the topics named by --tables or --topics, the options it
 * refuses, a worker without them that follows the job's tables (tables.c: the tables an
 * Assign names, its offer from the schema topic, a set widened while it runs), an Assign's slots
 * (owned, released, offsets per topic, a state that cannot be restored), and the decisions per
 * record: a change is staged and recorded, a replay or an older change is dropped, a record before
 * the slot's next offset (a stale fetch) is skipped, a tombstone is counted and passed, a malformed
 * record and one naming a schema version never registered go to the dead-letter topic, a version
 * registered after the worker read the schema topic is caught up with. Then backpressure (pause
 * past
 * --max-staged-bytes, resume after an Abort), the restart of a fetch that stopped, the
 * gauges' rate limit and the progress watchdog's verdicts (pure logic, no Kafka).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <stdatomic.h>

#include "common/buf.h"
#include "common/iceberg/parquet.h"
#include "tests/unit/worker/worker_mock.h"

static mock_worker_t M;

static int setup(void **state)
{
    (void)state;
    mock_up(&M);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mock_down(&M);
    return 0;
}

/* Opens the worker and assigns it slot 1 from offset (< 0: the beginning). */
static cdc_slot_t *open_with_slot1(int64_t offset)
{
    mock_assign_t b;
    cdc_error_t e;
    uint32_t slot = 1;
    mock_worker_open(&M);
    assert_int_equal(cdc_worker_assign(M.w, mock_assign(&b, M.topic, 1, 1, &slot, &offset, 1), &e),
                     CDC_OK);
    return &M.w->slots[1];
}

static const cdc_stage_table_t *staged_table(const cdc_slot_t *s)
{
    assert_int_equal(s->stage.ntables, 1);
    assert_string_equal(s->stage.tables[0].table, "orders");
    return &s->stage.tables[0];
}

/* The per-table series of public.orders. */
static cdc_table_metrics_t *orders_metrics(void)
{
    for (size_t i = 0; i < M.w->records.ntables; i++)
        if (strcmp(M.w->records.tables[i].name, "public.orders") == 0)
            return &M.w->records.tables[i];
    fail_msg("no series for public.orders");
    return NULL;
}

/* ---- small helpers and options ------------------------------------------------------------ */

static void test_join_and_codec(void **state)
{
    cdc_worker_t w;
    char *p = cdc_worker_join("a/b", "c");
    (void)state;
    assert_string_equal(p, "a/b/c");
    free(p);
    memset(&w, 0, sizeof(w));
    assert_int_equal(cdc_worker_stage_codec(&w), CDC_PQ_CODEC_ZSTD); /* the default */
    w.cfg.compression = "snappy";
    assert_int_equal(cdc_worker_stage_codec(&w), CDC_PQ_CODEC_SNAPPY);
    w.cfg.compression = "none";
    assert_int_equal(cdc_worker_stage_codec(&w), CDC_PQ_CODEC_NONE);
    w.cfg.compression = "lzo"; /* unknown: the default (the option table refuses it) */
    assert_int_equal(cdc_worker_stage_codec(&w), CDC_PQ_CODEC_ZSTD);
}

/* Without --tables and --topics the worker follows the job's tables: it opens with none and
 * consumes none until an Assign names them. */
static void test_open_without_tables_follows(void **state)
{
    size_t n = 9;
    (void)state;
    M.w->cfg.tables = "";
    M.w->cfg.topics = "";
    mock_worker_open(&M);
    assert_true(M.w->follows_tables);
    assert_int_equal(M.w->topics.n, 0);
    assert_false(cdc_worker_consumes(M.w, 0));
    assert_string_equal(M.w->schema_topic, M.schema_topic);
    assert_ptr_equal(cdc_worker_register_topics(M.w, &n), atomic_load(&M.w->offer.names));
    assert_int_equal(n, 0);
}

/* An Assign with the job's tables of term 1 and generation gen, slot 1 starting at the given
 * offsets of topics (offsets[i] < 0: none in its checkpoint). */
static Cdc__Assign *assign_tables(mock_assign_t *b, uint64_t gen, char **tables, size_t ntables,
                                  char **topics, const int64_t *offsets, size_t ntopics)
{
    static Cdc__TopicOffset to[4], *top[4];
    uint32_t slot = 1;
    mock_assign(b, "", 1, gen, &slot, NULL, 1);
    b->ps[0].n_offsets = 0;
    b->ps[0].offsets = top;
    for (size_t i = 0; i < ntopics; i++) {
        if (offsets[i] < 0)
            continue;
        cdc__topic_offset__init(&to[i]);
        to[i].topic = topics[i];
        to[i].next_offset = offsets[i];
        top[b->ps[0].n_offsets++] = &to[i];
    }
    b->a.n_tables = ntables;
    b->a.tables = tables;
    return &b->a;
}

/* A follower consumes exactly the tables its Assigns name: none without them (records of
 * the topic stay unread), then the topic from the beginning of each slot that has no offset
 * of it in its checkpoint, so nothing before the table joined is skipped; a later Assign
 * that adds a table appends it (indices of the earlier ones unchanged) and takes its offset
 * from the checkpoint when there is one. */
static void test_follower_topics_grow(void **state)
{
    mock_assign_t b;
    cdc_error_t e;
    char items[64], *one[1], *two[2];
    int64_t none = -1, offsets[2] = {-1, 7};
    cdc_slot_t *s = &M.w->slots[1];
    (void)state;
    snprintf(items, sizeof(items), "%s.public.items", M.prefix);
    one[0] = M.topic;
    two[0] = items;
    two[1] = M.topic;
    M.w->cfg.tables = NULL;
    mock_worker_open(&M);
    mock_register_schema(&M);
    mock_produce_event(&M, 1, 'c', 1, "alice", 100);
    assert_int_equal(cdc_worker_assign(M.w, assign_tables(&b, 1, NULL, 0, NULL, NULL, 0), &e),
                     CDC_OK);
    assert_true(s->owned);
    for (int i = 0; i < 5; i++)
        assert_int_equal(cdc_worker_consume(M.w, 50, &e), CDC_OK);
    assert_int_equal(M.w->topics.n, 0); /* nothing consumed, nothing read */
    assert_int_equal(s->stage.ntables, 0);

    assert_int_equal(cdc_worker_assign(M.w, assign_tables(&b, 2, one, 1, one, &none, 1), &e),
                     CDC_OK);
    assert_int_equal(M.w->topics.n, 1);
    assert_string_equal(cdc_worker_topic(M.w, 0), M.topic);
    assert_true(cdc_worker_consumes(M.w, 0));
    assert_int_equal(s->next_offset[0], CDC_KAFKA_OFFSET_BEGINNING);
    mock_consume_to(&M, 1, 1); /* the change produced before the table joined */
    assert_int_equal(staged_table(s)->nchangelog, 1);

    char *topic0 = cdc_worker_topic(M.w, 0);
    offsets[0] = 1;
    assert_int_equal(
        cdc_worker_assign(M.w, assign_tables(&b, 3, two, 2, (char *[]){M.topic, items}, offsets, 2),
                          &e),
        CDC_OK);
    assert_int_equal(M.w->topics.n, 2);
    assert_ptr_equal(cdc_worker_topic(M.w, 0), topic0); /* append-only */
    assert_string_equal(cdc_worker_topic(M.w, 1), items);
    assert_true(cdc_worker_consumes(M.w, 0) && cdc_worker_consumes(M.w, 1));
    assert_int_equal(s->next_offset[0], 1);
    assert_int_equal(s->next_offset[1], 7);
    /* its offset missing from the checkpoint: the beginning */
    offsets[1] = -1;
    assert_int_equal(
        cdc_worker_assign(M.w, assign_tables(&b, 4, two, 2, (char *[]){M.topic, items}, offsets, 2),
                          &e),
        CDC_OK);
    assert_int_equal(M.w->topics.n, 2);
    assert_int_equal(s->next_offset[1], CDC_KAFKA_OFFSET_BEGINNING);
}

/* The set grows while the assignment runs (a Tables message, cdc_worker_widen): the new
 * topic is appended and read from the beginning, while the slot keeps what it staged and
 * its position in the topic it consumed; the same set again changes nothing, and a set
 * that lacks a topic the worker consumes is refused, naming it, the consumed set kept. */
static void test_follower_widens_running(void **state)
{
    mock_assign_t b;
    cdc_error_t e;
    char items[64], *one[1], *two[2], *narrow[1];
    int64_t none = -1;
    cdc_slot_t *s = &M.w->slots[1];
    (void)state;
    snprintf(items, sizeof(items), "%s.public.items", M.prefix);
    one[0] = M.topic;
    two[0] = items;
    two[1] = M.topic;
    narrow[0] = items;
    M.w->cfg.tables = NULL;
    mock_worker_open(&M);
    mock_register_schema(&M);
    mock_produce_event(&M, 1, 'c', 1, "alice", 100);
    assert_int_equal(cdc_worker_assign(M.w, assign_tables(&b, 1, one, 1, one, &none, 1), &e),
                     CDC_OK);
    mock_consume_to(&M, 1, 1);
    assert_int_equal(staged_table(s)->nchangelog, 1);

    assert_int_equal(cdc_worker_widen(M.w, two, 2, &e), CDC_OK);
    assert_int_equal(M.w->topics.n, 2);
    assert_string_equal(cdc_worker_topic(M.w, 1), items);
    assert_true(cdc_worker_consumes(M.w, 0) && cdc_worker_consumes(M.w, 1));
    assert_int_equal(s->next_offset[1], CDC_KAFKA_OFFSET_BEGINNING);
    assert_int_equal(s->next_offset[0], 1);           /* its position kept */
    assert_int_equal(staged_table(s)->nchangelog, 1); /* its stage kept */
    mock_produce_event(&M, 1, 'u', 1, "bob", 200);
    mock_consume_to(&M, 1, 2); /* the topic it had goes on from there */
    assert_int_equal(staged_table(s)->nchangelog, 2);

    assert_int_equal(cdc_worker_widen(M.w, two, 2, &e), CDC_OK);
    assert_int_equal(M.w->topics.n, 2);
    assert_int_equal(s->next_offset[0], 2);

    assert_int_equal(cdc_worker_widen(M.w, narrow, 1, &e), CDC_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, M.topic));
    assert_true(cdc_worker_consumes(M.w, 0) && cdc_worker_consumes(M.w, 1));
}

/* A worker with --tables consumes the job's set, not all it could: a table it has beyond the
 * set is not read, and a table of the set it lacks is never taken on (the coordinator
 * refuses it). An Assign without a set (an older coordinator) means all of --tables. */
static void test_explicit_consumes_the_set(void **state)
{
    mock_assign_t b;
    cdc_error_t e;
    char other[64], *set[2];
    (void)state;
    M.w->cfg.tables = "public.orders,public.items";
    mock_worker_open(&M);
    assert_false(M.w->follows_tables);
    assert_true(cdc_worker_consumes(M.w, 0) && cdc_worker_consumes(M.w, 1));
    set[0] = M.topic;
    assert_int_equal(cdc_worker_assign(M.w, assign_tables(&b, 1, set, 1, NULL, NULL, 0), &e),
                     CDC_OK);
    assert_true(cdc_worker_consumes(M.w, 0));
    assert_false(cdc_worker_consumes(M.w, 1));
    snprintf(other, sizeof(other), "%s.public.other", M.prefix);
    set[1] = other;
    assert_int_equal(cdc_worker_assign(M.w, assign_tables(&b, 2, set, 2, NULL, NULL, 0), &e),
                     CDC_OK);
    assert_int_equal(M.w->topics.n, 2);
    assert_int_equal(cdc_worker_topic_index(M.w, other), -1);
    assert_true(cdc_worker_consumes(M.w, 0));
    assert_false(cdc_worker_consumes(M.w, 1));
    assert_int_equal(cdc_worker_assign(M.w, assign_tables(&b, 3, NULL, 0, NULL, NULL, 0), &e),
                     CDC_OK);
    assert_true(cdc_worker_consumes(M.w, 0) && cdc_worker_consumes(M.w, 1));
}

/* A follower offers the tables registered on the schema topic, looking again every few
 * seconds; its Register reports the offer. */
static void test_offer_from_registry(void **state)
{
    size_t n = 0;
    char **topics;
    int64_t now = 1000000;
    (void)state;
    M.w->cfg.tables = NULL;
    mock_worker_open(&M);
    cdc_worker_offer_refresh(M.w, now);
    assert_int_equal(M.w->offer.n, 0);
    mock_register_schema(&M);
    cdc_worker_offer_refresh(M.w, now + 100); /* not yet: looked at now */
    assert_int_equal(M.w->offer.n, 0);
    cdc_worker_offer_refresh(M.w, now + 5000);
    assert_int_equal(M.w->offer.n, 1);
    assert_string_equal(cdc_topic_list_at(&M.w->offer, 0), M.topic);
    cdc_worker_offer_refresh(M.w, now + 10000); /* the same again: no change */
    assert_int_equal(M.w->offer.n, 1);
    topics = cdc_worker_register_topics(M.w, &n);
    assert_int_equal(n, 1);
    assert_string_equal(topics[0], M.topic);
    /* a worker with --tables reports those and offers nothing */
    assert_int_equal(M.w->topics.n, 0);
}

/* ---- no cap on the number of topics (worker.h, cdc_topic_list_t) ---------------------- */

#define MANY 300 /* well past the 64 topics a worker once stopped at */

/* "<prefix>.public.t<i>" for i in [0, n), except that entry at is the test topic (which has
 * a schema and records); the caller frees them with free_names. */
static char **many_names(size_t n, size_t at)
{
    char **names = calloc(n, sizeof(*names));
    assert_non_null(names);
    for (size_t i = 0; i < n; i++) {
        if (i == at)
            names[i] = strdup(M.topic);
        else
            assert_true(asprintf(&names[i], "%s.public.t%03zu", M.prefix, i) > 0);
        assert_non_null(names[i]);
    }
    return names;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The list grows without moving what a reader holds: a directory loaded before the list
 * grew keeps its entries (the old one is retired, not freed; ASan would catch a read of
 * freed memory), the names themselves never move, and every name is found at its index. */
static void test_topic_list_grows_in_place(void **state)
{
    cdc_topic_list_t l = {0};
    char **first, **now, *a;
    size_t n0, n;
    (void)state;
    assert_int_equal(cdc_topic_list_find(&l, "x"), -1);
    assert_int_equal(cdc_topic_list_append(&l, a = strdup("a")), CDC_OK);
    first = cdc_topic_list_names(&l, &n0);
    assert_int_equal(n0, 1);
    for (int i = 0; i < 5000; i++) {
        char *name = NULL;
        assert_true(asprintf(&name, "topic-%d", i) > 0);
        assert_int_equal(cdc_topic_list_append(&l, name), CDC_OK);
    }
    now = cdc_topic_list_names(&l, &n);
    assert_int_equal(n, 5001);
    assert_ptr_not_equal(now, first); /* grown into a new directory... */
    assert_ptr_equal(first[0], a);    /* ...the old one still readable, unchanged */
    assert_ptr_equal(now[0], a);      /* and the name did not move */
    assert_string_equal(first[0], "a");
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "topic-%d", i);
        assert_int_equal(cdc_topic_list_find(&l, name), i + 1);
        assert_string_equal(cdc_topic_list_at(&l, (size_t)i + 1), name);
    }
    assert_int_equal(cdc_topic_list_find(&l, "topic-5000"), -1);
    cdc_topic_list_free(&l);
    assert_int_equal(l.n, 0);
}

/* --tables with hundreds of tables: every one is a topic, consumed, at its own index. */
static void test_open_many_tables(void **state)
{
    char *list = NULL;
    cdc_buf_t b = {0};
    (void)state;
    for (int i = 0; i < MANY; i++)
        cdc_buf_printf(&b, "%st%03d", i ? "," : "", i);
    assert_false(b.oom);
    M.w->cfg.tables = list = b.data;
    mock_worker_open(&M);
    M.w->cfg.tables = NULL; /* read at the opening only */
    free(list);
    assert_int_equal(M.w->topics.n, MANY);
    for (size_t t = 0; t < MANY; t++) {
        char name[64];
        snprintf(name, sizeof(name), "%s.public.t%03zu", M.prefix, t);
        assert_string_equal(cdc_worker_topic(M.w, t), name);
        assert_int_equal(cdc_worker_topic_index(M.w, name), (int)t);
        assert_true(cdc_worker_consumes(M.w, t));
    }
    assert_false(cdc_worker_consumes(M.w, MANY)); /* past the list: not consumed */
    size_t n;
    assert_non_null(cdc_worker_register_topics(M.w, &n));
    assert_int_equal(n, MANY);
}

/* An Assign of generation gen for slot 1 of the job's tables (all MANY of them): its
 * checkpoint has offset 0 of every other topic, none of the rest nor of topic `at` (the
 * test's). */
static Cdc__Assign *assign_many(mock_assign_t *b, uint64_t gen, char **tables, size_t at,
                                Cdc__TopicOffset *to, Cdc__TopicOffset **top)
{
    uint32_t slot = 1;
    mock_assign(b, "", 1, gen, &slot, NULL, 1);
    for (size_t i = 0; i < MANY; i += 2) {
        if (i == at)
            continue;
        cdc__topic_offset__init(&to[i]);
        to[i].topic = tables[i];
        to[i].next_offset = 0;
        top[b->ps[0].n_offsets++] = &to[i];
    }
    b->ps[0].offsets = top;
    b->a.n_tables = MANY;
    b->a.tables = tables;
    return &b->a;
}

/* Slot s is at offset 0 of every other topic, at the beginning of the rest (but `at`). */
static void assert_offsets(const cdc_slot_t *s, size_t at)
{
    for (size_t t = 0; t < MANY; t++)
        if (t != at)
            assert_int_equal(s->next_offset[t], t % 2 != 0 ? CDC_KAFKA_OFFSET_BEGINNING : 0);
}

/* A follower takes a job of hundreds of tables: each is consumed, each slot keeps an offset
 * per topic (from its checkpoint, else the beginning), and a topic far past index 64 is
 * read, its position kept apart from the others'. */
static void test_follower_takes_hundreds(void **state)
{
    mock_assign_t b;
    cdc_error_t e;
    const size_t at = MANY - 7; /* the test topic, the one with records */
    char **tables = many_names(MANY, at);
    Cdc__TopicOffset *to = calloc(MANY, sizeof(*to)), **top = calloc(MANY, sizeof(*top));
    cdc_slot_t *s = &M.w->slots[1];
    (void)state;
    assert_non_null(to);
    assert_non_null(top);
    M.w->cfg.tables = NULL;
    mock_worker_open(&M);
    mock_register_schema(&M);
    mock_produce_event(&M, 1, 'c', 1, "alice", 100);
    /* the checkpoint's offsets of the empty topics are their end: nothing to read there (an
     * offset past the end would stop their fetching, which is another story) */
    assert_int_equal(cdc_worker_assign(M.w, assign_many(&b, 1, tables, at, to, top), &e), CDC_OK);
    assert_int_equal(M.w->topics.n, MANY);
    for (size_t t = 0; t < MANY; t++) {
        assert_string_equal(cdc_worker_topic(M.w, t), tables[t]);
        assert_int_equal(cdc_worker_topic_index(M.w, tables[t]), (int)t);
        assert_true(cdc_worker_consumes(M.w, t));
    }
    assert_offsets(s, at);
    assert_int_equal(s->next_offset[at], CDC_KAFKA_OFFSET_BEGINNING);
    mock_consume_to(&M, 1, 1);
    assert_int_equal(s->next_offset[at], 1);
    assert_int_equal(staged_table(s)->nchangelog, 1);
    assert_offsets(s, at); /* the others' positions untouched */
    free(to);
    free(top);
    free_names(tables, MANY);
}

/* A running follower's set widens from one table to hundreds (cdc_worker_widen): every new
 * topic is consumed from the beginning, the one it had keeps its position and stage. */
static void test_widen_to_hundreds(void **state)
{
    mock_assign_t b;
    cdc_error_t e;
    const size_t n = 2 * MANY;
    char **tables = many_names(n, 0), *one[1] = {M.topic};
    int64_t none = -1;
    cdc_slot_t *s = &M.w->slots[1];
    (void)state;
    M.w->cfg.tables = NULL;
    mock_worker_open(&M);
    mock_register_schema(&M);
    mock_produce_event(&M, 1, 'c', 1, "alice", 100);
    assert_int_equal(cdc_worker_assign(M.w, assign_tables(&b, 1, one, 1, one, &none, 1), &e),
                     CDC_OK);
    mock_consume_to(&M, 1, 1);
    assert_int_equal(cdc_worker_widen(M.w, tables, n, &e), CDC_OK);
    assert_int_equal(M.w->topics.n, n);
    assert_int_equal(s->next_offset[0], 1); /* its position kept */
    for (size_t t = 0; t < n; t++) {
        assert_string_equal(cdc_worker_topic(M.w, t), tables[t]);
        assert_true(cdc_worker_consumes(M.w, t));
        if (t > 0)
            assert_int_equal(s->next_offset[t], CDC_KAFKA_OFFSET_BEGINNING);
    }
    assert_int_equal(staged_table(s)->nchangelog, 1);
    mock_produce_event(&M, 1, 'u', 1, "bob", 200);
    mock_consume_to(&M, 1, 2);
    assert_int_equal(staged_table(s)->nchangelog, 2);
    /* the same set again: nothing new; without one of them: no widening */
    assert_int_equal(cdc_worker_widen(M.w, tables, n, &e), CDC_OK);
    assert_int_equal(M.w->topics.n, n);
    assert_int_equal(cdc_worker_widen(M.w, tables, n - 1, &e), CDC_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, tables[n - 1]));
    free_names(tables, n);
}

/* A follower offers every table registered on the schema topic, however many. */
static void test_offer_hundreds(void **state)
{
    char **tables = many_names(MANY, 0), **offered;
    size_t n;
    char *doc;
    size_t len;
    cdc_error_t e;
    (void)state;
    M.w->cfg.tables = NULL;
    mock_worker_open(&M);
    doc = fixture("capture_schema_v1.json", &len);
    for (size_t i = 0; i < MANY; i++)
        if (cdc_catalog_register_json(M.w->catalog, tables[i], 1, doc, len, &e) != CDC_OK)
            fail_msg("%s: %s", tables[i], e.msg);
    free(doc);
    assert_int_equal(cdc_catalog_topics(M.w->catalog, NULL, 0), MANY);
    cdc_worker_offer_refresh(M.w, 1000000);
    offered = cdc_worker_register_topics(M.w, &n);
    assert_int_equal(n, MANY);
    for (size_t i = 0; i < MANY; i++)
        assert_string_equal(offered[i], tables[i]);
    free_names(tables, MANY);
}

/* ---- thousands of tables ------------------------------------------------------------- */

#define THOUSANDS 2000

/* The capture's schema document of table public.<table> (capture_schema_v1.json renamed);
 * the caller frees it. */
static char *table_doc(const char *table, size_t *len)
{
    cdc_buf_t b = {0};
    char *fx = fixture("capture_schema_v1.json", NULL);
    const char *at = strstr(fx, "\"table\":\"orders\"");
    assert_non_null(at);
    cdc_buf_put(&b, fx, (size_t)(at - fx));
    cdc_buf_printf(&b, "\"table\":\"%s\"%s", table, at + strlen("\"table\":\"orders\""));
    free(fx);
    assert_false(b.oom);
    *len = b.len;
    return b.data;
}

/* Issue 35: a job of thousands of tables. Every table registered on the schema topic is
 * found by its topic, each table's series counts its own records only, and a name of 300
 * characters is kept whole: two of them alike in their first 296 characters were one
 * series (its name cut at 255 bytes) before the series were found by name in a map. */
static void test_thousands_of_tables(void **state)
{
    const size_t n = THOUSANDS + 2;
    char **names = calloc(n, sizeof(*names)), **topics = calloc(n, sizeof(*topics));
    const cdc_source_schema_t **schemas = calloc(n, sizeof(*schemas));
    cdc_error_t e;
    (void)state;
    assert_true(names != NULL && topics != NULL && schemas != NULL);
    mock_worker_open(&M);
    for (size_t i = 0; i < n; i++) {
        char *doc;
        size_t len;
        if (i < THOUSANDS) {
            assert_true(asprintf(&names[i], "t%04zu", i) > 0);
        } else { /* 300 characters, the same 296 first */
            assert_non_null(names[i] = malloc(301));
            memset(names[i], 'l', 296);
            snprintf(names[i] + 296, 5, "_%03zu", i - THOUSANDS);
            assert_int_equal(strlen(names[i]), 300);
        }
        assert_true(asprintf(&topics[i], "%s.public.%s", M.prefix, names[i]) > 0);
        doc = table_doc(names[i], &len);
        if (cdc_catalog_register_json(M.w->catalog, topics[i], 1, doc, len, &e) != CDC_OK)
            fail_msg("%s: %s", names[i], e.msg);
        free(doc);
    }
    assert_int_equal(cdc_catalog_topics(M.w->catalog, NULL, 0), n);
    for (size_t i = 0; i < n; i++) {
        schemas[i] = cdc_catalog_latest(M.w->catalog, topics[i]);
        assert_non_null(schemas[i]);
        assert_string_equal(schemas[i]->topic, topics[i]);
        assert_string_equal(schemas[i]->table, names[i]);
        assert_ptr_equal(cdc_catalog_get(M.w->catalog, topics[i], 1), schemas[i]);
        assert_null(cdc_catalog_get(M.w->catalog, topics[i], 2));
    }
    assert_null(cdc_catalog_latest(M.w->catalog, "cdc.public.t9999"));
    /* records of every table, interleaved (a stride through the tables, three rounds):
     * table i counts i % 5 + 1 per round */
    for (int round = 0; round < 3; round++)
        for (size_t k = 0; k < n; k++) {
            size_t i = (k * 7919) % n; /* 7919 is prime, n is not a multiple: a permutation */
            cdc_table_metrics_t *tm = cdc_worker_table_metrics(M.w, schemas[i]);
            assert_non_null(tm);
            cdc_metrics_counter_add(tm->in, (double)(i % 5 + 1));
        }
    assert_int_equal(M.w->records.ntables, n);
    for (size_t i = 0; i < n; i++) {
        char want[400];
        cdc_table_metrics_t *tm = cdc_worker_table_metrics(M.w, schemas[i]);
        snprintf(want, sizeof(want), "public.%s", names[i]);
        assert_string_equal(tm->name, want);
        assert_int_equal(cdc_metrics_value(tm->in), 3 * (i % 5 + 1));
    }
    char *text = cdc_metrics_render(M.w->metrics, NULL), want[400];
    assert_non_null(text);
    snprintf(want, sizeof(want), "cdc_worker_records_in_total{table=\"public.%s\"} 6",
             names[THOUSANDS + 1]);
    assert_non_null(strstr(text, want));
    free(text);
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
        free(topics[i]);
    }
    free(names);
    free(topics);
    free(schemas);
}

/* Tables become "<prefix>.<schema>.<table>" (schema public when none); --topics wins. */
static void test_topics_from_tables(void **state)
{
    (void)state;
    M.w->cfg.tables = "orders, inventory.items";
    mock_worker_open(&M);
    assert_int_equal(M.w->topics.n, 2);
    assert_string_equal(cdc_worker_topic(M.w, 0), M.topic);
    char items[64];
    snprintf(items, sizeof(items), "%s.inventory.items", M.prefix);
    assert_string_equal(cdc_worker_topic(M.w, 1), items);
    assert_string_equal(M.w->schema_topic, M.schema_topic);
}

static void test_explicit_topics(void **state)
{
    (void)state;
    M.w->cfg.topics = "dbz.public.orders,other";
    mock_worker_open(&M);
    assert_int_equal(M.w->topics.n, 2);
    assert_string_equal(cdc_worker_topic(M.w, 0), "dbz.public.orders");
    assert_string_equal(cdc_worker_topic(M.w, 1), "other");
}

/* ---- assignment ---------------------------------------------------------------------- */

/* An Assign makes the owned set exactly its slots: each starts at its topic's offset (the
 * beginning for a topic it does not name), slots beyond the job's are ignored, and slots
 * no longer named are released with their store. */
static void test_assign_owned_set(void **state)
{
    mock_assign_t b;
    cdc_error_t e;
    uint32_t slots[] = {1, 3, 40};
    int64_t offsets[] = {5, -1, 7};
    (void)state;
    M.w->cfg.tables = "public.orders,public.items";
    mock_worker_open(&M);
    assert_int_equal(cdc_worker_assign(M.w, mock_assign(&b, M.topic, 1, 1, slots, offsets, 3), &e),
                     CDC_OK);
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        assert_int_equal(M.w->slots[p].owned, p == 1 || p == 3);
    assert_int_equal(M.w->slots[1].next_offset[0], 5);
    assert_int_equal(M.w->slots[1].next_offset[1], CDC_KAFKA_OFFSET_BEGINNING);
    assert_int_equal(M.w->slots[3].next_offset[0], CDC_KAFKA_OFFSET_BEGINNING);
    assert_non_null(M.w->slots[1].dedup);
    assert_false(M.w->slots[1].dirty);

    uint32_t only3 = 3;
    int64_t at = 9;
    assert_int_equal(cdc_worker_assign(M.w, mock_assign(&b, M.topic, 1, 2, &only3, &at, 1), &e),
                     CDC_OK);
    assert_false(M.w->slots[1].owned);
    assert_null(M.w->slots[1].dedup);
    assert_null(M.w->slots[1].db_dir);
    assert_true(M.w->slots[3].owned);
    assert_int_equal(M.w->slots[3].next_offset[0], 9);
}

/* A state handle that is not in the warehouse fails the assignment, naming the slot. */
static void test_assign_unknown_state(void **state)
{
    mock_assign_t b;
    cdc_error_t e;
    uint32_t slot = 2;
    (void)state;
    mock_worker_open(&M);
    Cdc__Assign *a = mock_assign(&b, M.topic, 1, 1, &slot, NULL, 1);
    b.ps[0].state_handle = "checkpoints/p2/no-such-checkpoint";
    assert_int_not_equal(cdc_worker_assign(M.w, a, &e), CDC_OK);
    assert_non_null(strstr(e.msg, "could not restore partition 2"));
}

/* ---- the record path ------------------------------------------------------------------ */

/* New changes are recorded in state and staged, in offset order. */
static void test_changes_staged(void **state)
{
    cdc_error_t e;
    cdc_slot_t *s;
    (void)state;
    mock_register_schema(&M);
    for (int i = 1; i <= 3; i++)
        mock_produce_event(&M, 1, 'c', i, "ada", 100 + (uint64_t)i);
    s = open_with_slot1(-1);
    assert_int_equal(cdc_worker_schemas_poll(M.w, &e), CDC_OK);
    mock_consume_to(&M, 1, 3);
    const cdc_stage_table_t *t = staged_table(s);
    assert_int_equal(t->nentries, 3);
    assert_int_equal(t->nchangelog, 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(t->changelog[i].offset, (int64_t)i);
    assert_true(s->dirty);
    assert_int_equal(cdc_metrics_value(orders_metrics()->in), 3);
    assert_int_equal(cdc_metrics_value(orders_metrics()->out), 3);
    assert_int_equal(cdc_metrics_value(orders_metrics()->dups), 0);
}

/* A replay (same position) and an older change of the key are dropped but passed. */
static void test_duplicates_dropped(void **state)
{
    cdc_slot_t *s;
    (void)state;
    mock_register_schema(&M);
    mock_produce_event(&M, 1, 'c', 1, "ada", 200);
    mock_produce_event(&M, 1, 'c', 1, "ada", 200); /* the capture sent it again */
    mock_produce_event(&M, 1, 'u', 1, "old", 150); /* before the key's position */
    mock_produce_event(&M, 1, 'u', 1, "new", 250);
    s = open_with_slot1(-1);
    mock_consume_to(&M, 1, 4);
    const cdc_stage_table_t *t = staged_table(s);
    assert_int_equal(t->nchangelog, 2);
    assert_int_equal(t->changelog[0].offset, 0);
    assert_int_equal(t->changelog[1].offset, 3);
    assert_int_equal(t->nentries, 1);
    assert_int_equal(cdc_metrics_value(orders_metrics()->dups), 2);
    assert_int_equal(cdc_metrics_value(orders_metrics()->out), 2);
}

/* Records below the slot's next offset (fetched before a seek) are skipped unread. */
static void test_stale_fetch_skipped(void **state)
{
    cdc_slot_t *s;
    (void)state;
    mock_register_schema(&M);
    for (int i = 1; i <= 4; i++)
        mock_produce_event(&M, 1, 'c', i, "ada", 100 + (uint64_t)i);
    s = open_with_slot1(0); /* the consumer reads from 0 */
    s->next_offset[0] = 2;  /* as after a seek the fetched records did not see yet */
    mock_consume_to(&M, 1, 4);
    const cdc_stage_table_t *t = staged_table(s);
    assert_int_equal(t->nchangelog, 2);
    assert_int_equal(t->changelog[0].offset, 2);
    assert_int_equal(t->changelog[1].offset, 3);
    assert_int_equal(cdc_metrics_value(orders_metrics()->in), 2);
}

/* A partition read from the beginning whose fetch began past records still in Kafka (the
 * log starts at 0, the first record fetched is at 2) is fetched again from the log start:
 * nothing is skipped, and no missing offsets are counted (a log that really starts past
 * 0: test_missing_start_logged in tests/integration/worker/test_worker.c). */
static void test_fetch_past_log_start_refetched(void **state)
{
    cdc_slot_t *s;
    (void)state;
    mock_register_schema(&M);
    for (int i = 1; i <= 4; i++)
        mock_produce_event(&M, 1, 'c', i, "ada", 100 + (uint64_t)i);
    s = open_with_slot1(2);                         /* the consumer reads from 2 */
    s->next_offset[0] = CDC_KAFKA_OFFSET_BEGINNING; /* the worker asked for the beginning */
    mock_consume_to(&M, 1, 4);
    const cdc_stage_table_t *t = staged_table(s);
    assert_int_equal(t->nchangelog, 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(t->changelog[i].offset, (int64_t)i);
    assert_int_equal(cdc_metrics_value(M.w->m_missing), 0);
    assert_int_equal(cdc_metrics_value(M.w->m_fetch_restarts), 1);
}

/* A Kafka tombstone is counted and passed, nothing staged. */
static void test_tombstone_passed(void **state)
{
    cdc_slot_t *s;
    (void)state;
    mock_register_schema(&M);
    mock_produce(&M, 1, NULL, 0);
    mock_produce_event(&M, 1, 'c', 7, "ada", 100);
    s = open_with_slot1(-1);
    mock_consume_to(&M, 1, 2);
    assert_int_equal(cdc_metrics_value(M.w->m_tombstones), 1);
    const cdc_stage_table_t *t = staged_table(s);
    assert_int_equal(t->nchangelog, 1);
    assert_int_equal(t->changelog[0].offset, 1);
}

typedef struct dlq_read {
    cdc_kafka_consumer_t *c;
    char cls[64][32];
    int64_t origin[64];
    int n;
} dlq_read_t;

static bool dlq_got(void *arg)
{
    dlq_read_t *d = arg;
    int want = 2;
    cdc_kafka_msg_t msgs[16];
    size_t n = 0;
    cdc_error_t e;
    cdc_kafka_consume_batch(d->c, msgs, 16, &n, 50, &e);
    for (size_t i = 0; i < n && d->n < 64; i++) {
        cdc_kafka_header_t h;
        char off[32] = "";
        assert_true(cdc_kafka_msg_header(&msgs[i], "cdc.error.class", &h));
        snprintf(d->cls[d->n], sizeof(d->cls[0]), "%.*s", (int)h.value_len, (const char *)h.value);
        assert_true(cdc_kafka_msg_header(&msgs[i], "cdc.origin.offset", &h));
        snprintf(off, sizeof(off), "%.*s", (int)h.value_len, (const char *)h.value);
        d->origin[d->n++] = atoll(off);
    }
    cdc_kafka_msgs_release(msgs, n);
    return d->n >= want;
}

/* A record that does not decode, and one naming a schema version nobody registered, go to
 * <topic>.dlq with their class; the good record after them is staged. */
static void test_poison_to_dead_letters(void **state)
{
    cdc_slot_t *s;
    cdc_error_t e;
    dlq_read_t d = {0};
    cdc_kafka_tp_t tps[CDC_WORKER_PARTITIONS];
    (void)state;
    mock_register_schema(&M);
    mock_produce(&M, 1, "{not json", 1);
    char *v9 = mock_event('c', 5, "ada", 100);
    mock_produce(&M, 1, v9, 9);
    free(v9);
    mock_produce_event(&M, 1, 'c', 6, "bob", 101);
    s = open_with_slot1(-1);
    mock_consume_to(&M, 1, 3);
    const cdc_stage_table_t *t = staged_table(s);
    assert_int_equal(t->nchangelog, 1);
    assert_int_equal(t->changelog[0].offset, 2);
    assert_int_equal(cdc_metrics_value(M.w->m_dlq[CDC_DLQ_MALFORMED_JSON]), 1);
    assert_int_equal(cdc_metrics_value(M.w->m_dlq[CDC_DLQ_UNKNOWN_SCHEMA]), 1);

    cdc_kafka_consumer_config_t cc = {.bootstrap = M.w->cfg.kafka.bootstrap};
    assert_int_equal(cdc_kafka_consumer_new(&cc, &d.c, &e), CDC_OK);
    char dlq[80];
    snprintf(dlq, sizeof(dlq), "%s.dlq", M.topic);
    for (int p = 0; p < CDC_WORKER_PARTITIONS; p++)
        tps[p] = (cdc_kafka_tp_t){dlq, p, CDC_KAFKA_OFFSET_BEGINNING};
    assert_int_equal(cdc_kafka_consumer_assign(d.c, tps, CDC_WORKER_PARTITIONS, &e), CDC_OK);
    assert_true(cdc_test_wait_for(dlq_got, &d, MOCK_WAIT_MS));
    cdc_kafka_consumer_free(d.c);
    assert_int_equal(d.n, 2);
    for (int i = 0; i < 2; i++) {
        if (d.origin[i] == 0)
            assert_string_equal(d.cls[i], "malformed_json");
        else if (d.origin[i] == 1)
            assert_string_equal(d.cls[i], "unknown_schema");
        else
            fail_msg("dead letter of offset %lld", (long long)d.origin[i]);
    }
}

/* A version registered after the worker read the schema topic: the record makes it read
 * the topic again and decodes (the capture registers before it produces). */
static void test_new_schema_version_caught_up(void **state)
{
    cdc_slot_t *s;
    cdc_error_t e;
    (void)state;
    s = open_with_slot1(-1);
    assert_int_equal(cdc_worker_schemas_poll(M.w, &e), CDC_OK); /* nothing registered yet */
    assert_null(cdc_catalog_get(M.w->catalog, M.topic, 1));
    mock_register_schema(&M);
    mock_produce_event(&M, 1, 'c', 1, "ada", 100);
    mock_consume_to(&M, 1, 1);
    assert_int_equal(staged_table(s)->nchangelog, 1);
    /* (the dead-letter counters exist from the start, at 0) */
    assert_true(M.w->m_dlq[CDC_DLQ_UNKNOWN_SCHEMA] == NULL ||
                cdc_metrics_value(M.w->m_dlq[CDC_DLQ_UNKNOWN_SCHEMA]) == 0);
}

/* ---- backpressure, restarts, gauges ------------------------------------------------------- */

/* Past --max-staged-bytes fetching pauses; an Abort drops the stages and resumes. */
static void test_pause_past_max_staged_bytes(void **state)
{
    cdc_slot_t *s;
    (void)state;
    M.w->cfg.max_staged_bytes = 1;
    mock_register_schema(&M);
    mock_produce_event(&M, 1, 'c', 1, "ada", 100);
    s = open_with_slot1(-1);
    assert_false(M.w->paused);
    mock_consume_to(&M, 1, 1);
    assert_true(M.w->paused);
    assert_true(s->stage.bytes > 0);
    cdc_worker_suspend(M.w);
    assert_false(M.w->paused);
    assert_int_equal(s->stage.changes, 0);
    assert_true(s->owned); /* suspended, not released */
}

/* A partition whose fetching stopped (or the watchdog gave it up) is assigned again from
 * its next offset when its restart time came, and records flow again. */
static void test_stopped_fetch_restarted(void **state)
{
    cdc_slot_t *s;
    (void)state;
    mock_register_schema(&M);
    mock_produce_event(&M, 1, 'c', 1, "ada", 100);
    s = open_with_slot1(-1);
    mock_consume_to(&M, 1, 1);
    s->restart_at[0] = cdc_clock_mono_ms() + 60000; /* not yet */
    mock_consume_to(&M, 1, 1);
    assert_int_equal(cdc_metrics_value(M.w->m_fetch_restarts), 0);
    s->restart_at[0] = 1; /* due */
    mock_consume_to(&M, 1, 1);
    assert_int_equal(s->restart_at[0], 0);
    assert_int_equal(cdc_metrics_value(M.w->m_fetch_restarts), 1);
    mock_produce_event(&M, 1, 'c', 2, "bob", 101);
    mock_consume_to(&M, 1, 2);
    assert_int_equal(staged_table(s)->nchangelog, 2);
}

static bool high_known(void *arg)
{
    cdc_slot_t *s = arg;
    M.w->next_lag_ms = 0;
    cdc_worker_update_gauges(M.w, cdc_clock_mono_ms());
    return s->high[0] == 3;
}

/* The gauges learn each partition's high watermark, at most every 2 s. */
static void test_gauges_rate_limited(void **state)
{
    cdc_slot_t *s;
    int64_t now;
    (void)state;
    mock_register_schema(&M);
    for (int i = 1; i <= 3; i++)
        mock_produce_event(&M, 1, 'c', i, "ada", 100 + (uint64_t)i);
    s = open_with_slot1(-1);
    mock_consume_to(&M, 1, 3);
    assert_true(cdc_test_wait_for(high_known, s, MOCK_WAIT_MS));
    assert_int_equal(cdc_metrics_value((const cdc_counter_t *)s->lag), 0);
    now = cdc_clock_mono_ms();
    M.w->next_lag_ms = 0;
    cdc_worker_update_gauges(M.w, now);
    s->high[0] = 0;
    cdc_worker_update_gauges(M.w, now + 1999);
    assert_int_equal(s->high[0], 0);
    cdc_worker_update_gauges(M.w, now + 2000);
    assert_int_equal(s->high[0], 3);
}

/* ---- the progress watchdog (no Kafka) ----------------------------------------------------- */

typedef struct dog {
    cdc_worker_t w;
    cdc_metrics_t *reg;
} dog_t;

static dog_t *dog_new(void)
{
    dog_t *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    d->reg = cdc_metrics_new();
    d->w.m_stalls = cdc_metrics_counter(d->reg, "stalls", "", NULL);
    d->w.cfg.progress_timeout_ms = 1000;
    cdc_error_t e;
    assert_int_equal(cdc_worker_add_topic(&d->w, strdup("t"), &e), CDC_OK);
    d->w.slots[0].next_offset[0] = 10;
    d->w.slots[0].high[0] = 15; /* 5 records behind */
    return d;
}

static void dog_free(dog_t *d)
{
    cdc_worker_tables_close(&d->w);
    cdc_metrics_free(d->reg);
    free(d);
}

/* Stuck behind the high watermark for the timeout: a stall, fetched again once; still
 * stuck after that: reported, not fetched again (a transactional producer's last control
 * record looks like this). */
static void test_watchdog_stall_then_give_up(void **state)
{
    dog_t *d = dog_new();
    cdc_slot_t *s = &d->w.slots[0];
    (void)state;
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 1000), 0); /* the clock starts */
    assert_int_equal(s->progress_ms[0], 1000);
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 1999), 0);
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 2000), 1);
    assert_int_equal(s->stalled_since[0], 1000);
    assert_int_equal(s->restart_at[0], 2000);
    assert_int_equal(cdc_metrics_value(d->w.m_stalls), 1);
    /* while the restart is pending: stalled, nothing new */
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 5000), 1);
    assert_int_equal(cdc_metrics_value(d->w.m_stalls), 1);
    s->restart_at[0] = 0; /* restart_failed() assigned it again, no progress since */
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 2999), 1);
    assert_false(s->watchdog_gave_up[0]);
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 3000), 1);
    assert_true(s->watchdog_gave_up[0]);
    assert_int_equal(s->restart_at[0], 0); /* not fetched again */
    assert_int_equal(cdc_metrics_value(d->w.m_stalls), 1);
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 9000), 1);
    assert_int_equal(s->restart_at[0], 0);
    /* it moves: progressing again, every verdict forgotten */
    s->next_offset[0] = 12;
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 9100), 0);
    assert_int_equal(s->stalled_since[0], 0);
    assert_false(s->watchdog_gave_up[0]);
    assert_int_equal(s->progress_ms[0], 9100);
    assert_int_equal(s->progress_offset[0], 12);
    dog_free(d);
}

/* Not a stall: caught up with the high watermark, paused on purpose, or the watchdog off. */
static void test_watchdog_no_stall(void **state)
{
    dog_t *d = dog_new();
    cdc_slot_t *s = &d->w.slots[0];
    (void)state;
    s->high[0] = 10; /* nothing behind */
    cdc_worker_watchdog(&d->w, s, 0, 1000);
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 60000), 0);
    assert_int_equal(s->progress_ms[0], 60000); /* its clock restarts while caught up */
    s->high[0] = 15;
    d->w.paused = true; /* --max-staged-bytes */
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 120000), 0);
    d->w.paused = false;
    d->w.cfg.progress_timeout_ms = 0;
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 240000), 0);
    assert_int_equal(cdc_metrics_value(d->w.m_stalls), 0);
    assert_int_equal(s->restart_at[0], 0);
    dog_free(d);
}

/* A partition read from the beginning counts from offset 0. */
static void test_watchdog_from_beginning(void **state)
{
    dog_t *d = dog_new();
    cdc_slot_t *s = &d->w.slots[0];
    (void)state;
    s->next_offset[0] = CDC_KAFKA_OFFSET_BEGINNING;
    s->high[0] = 3;
    cdc_worker_watchdog(&d->w, s, 0, 1000);
    assert_int_equal(s->progress_offset[0], 0);
    assert_int_equal(cdc_worker_watchdog(&d->w, s, 0, 2000), 1);
    dog_free(d);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_and_codec),
        T(test_open_without_tables_follows),
        T(test_follower_widens_running),
        T(test_follower_topics_grow),
        T(test_explicit_consumes_the_set),
        T(test_offer_from_registry),
        cmocka_unit_test(test_topic_list_grows_in_place),
        T(test_open_many_tables),
        T(test_follower_takes_hundreds),
        T(test_widen_to_hundreds),
        T(test_offer_hundreds),
        T(test_thousands_of_tables),
        T(test_topics_from_tables),
        T(test_explicit_topics),
        T(test_assign_owned_set),
        T(test_assign_unknown_state),
        T(test_changes_staged),
        T(test_duplicates_dropped),
        T(test_stale_fetch_skipped),
        T(test_fetch_past_log_start_refetched),
        T(test_tombstone_passed),
        T(test_poison_to_dead_letters),
        T(test_new_schema_version_caught_up),
        T(test_pause_past_max_staged_bytes),
        T(test_stopped_fetch_restarted),
        T(test_gauges_rate_limited),
        cmocka_unit_test(test_watchdog_stall_then_give_up),
        cmocka_unit_test(test_watchdog_no_stall),
        cmocka_unit_test(test_watchdog_from_beginning),
    };
#undef T
    return cmocka_run_group_tests(tests, mock_cluster_up, mock_cluster_down);
}
