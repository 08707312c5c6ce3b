/*
 * The dashboard's memory (see history.h): rings of fixed capacity, allocated once, that
 * overwrite their oldest entry when full. A table's rings are allocated when the table
 * is first committed to, every table has them, and their capacities shrink with the
 * table count so that the whole history stays within the budgets of history.h.
 */
#include "coordinator/history.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/hash.h"

/* A ring of cap items of size bytes: the n newest, the oldest at head. */
typedef struct ring {
    unsigned char *items;
    size_t size, cap, head, n;
} ring_t;

static bool ring_init(ring_t *r, size_t size, size_t cap)
{
    r->items = calloc(cap, size);
    r->size = size;
    r->cap = cap;
    r->head = r->n = 0;
    return r->items != NULL;
}

/* The slot of a new newest item (the oldest is dropped when full), zeroed. */
/* Keeps the newest items of r in a ring of cap items (false: out of memory, r unchanged). */
static bool ring_resize(ring_t *r, size_t cap)
{
    unsigned char *items = calloc(cap, r->size);
    size_t keep = r->n < cap ? r->n : cap;
    if (items == NULL)
        return false;
    for (size_t i = 0; i < keep; i++)
        memcpy(items + i * r->size, r->items + ((r->head + r->n - keep + i) % r->cap) * r->size,
               r->size);
    free(r->items);
    r->items = items;
    r->cap = cap;
    r->head = 0;
    r->n = keep;
    return true;
}

static void *ring_push(ring_t *r)
{
    size_t at = (r->head + r->n) % r->cap;
    if (r->n == r->cap)
        r->head = (r->head + 1) % r->cap;
    else
        r->n++;
    memset(r->items + at * r->size, 0, r->size);
    return r->items + at * r->size;
}

/* The i-th oldest item (i < n). */
static void *ring_at(const ring_t *r, size_t i)
{
    return r->items + ((r->head + i) % r->cap) * r->size;
}

/* Index of the first item whose time (the int64_t at its start) is after since_ms. */
static size_t ring_after(const ring_t *r, int64_t since_ms)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) { /* items are in time order */
        size_t mid = (lo + hi) / 2;
        if (*(const int64_t *)ring_at(r, mid) > since_ms)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* A table's value at one sample. */
typedef struct point {
    int64_t at_ms;   /* first: ring_after() reads it */
    int64_t changes; /* cumulative */
    int64_t rows;
    int64_t p50_ms, p99_ms;
    double rate;
} point_t;

typedef struct series {
    char name[256];
    int64_t changes;
    int64_t rows;
    ring_t points; /* point_t */
    ring_t spans;  /* cdc_history_span_t, at_ms first */
} series_t;

/* A sample as kept: the epoch ring's items start with their time too. */
typedef struct epoch_item {
    int64_t at_ms;
    cdc_history_epoch_t ep;
} epoch_item_t;

struct cdc_history {
    pthread_mutex_t lock;
    ring_t samples; /* cdc_history_sample_t, at_ms first */
    ring_t epochs;  /* epoch_item_t */
    /* Every source table committed to, no cap (each series allocated once, its name the
     * key of byname). Their rings share the budgets of history.h: each table's rings hold
     * points_cap points and spans_cap spans, halved for all as the tables grow. */
    series_t **tables;
    size_t ntables, cap;
    cdc_strmap_t byname; /* name -> its series */
    size_t points_cap, spans_cap;
};

cdc_history_t *cdc_history_new(void)
{
    cdc_history_t *h = calloc(1, sizeof(*h));

    if (h != NULL && ring_init(&h->samples, sizeof(cdc_history_sample_t), CDC_HISTORY_SAMPLES) &&
        ring_init(&h->epochs, sizeof(epoch_item_t), CDC_HISTORY_EPOCHS)) {
        pthread_mutex_init(&h->lock, NULL);
        h->points_cap = CDC_HISTORY_SAMPLES;
        h->spans_cap = CDC_HISTORY_SPANS;
        return h;
    }
    if (h != NULL) {
        free(h->samples.items);
        free(h->epochs.items);
    }
    free(h);
    return NULL;
}

static void series_free(series_t *s)
{
    if (s == NULL)
        return;
    free(s->points.items);
    free(s->spans.items);
    free(s);
}

void cdc_history_clear(cdc_history_t *h)
{
    pthread_mutex_lock(&h->lock);
    h->samples.head = h->samples.n = 0;
    h->epochs.head = h->epochs.n = 0;
    for (size_t i = 0; i < h->ntables; i++)
        series_free(h->tables[i]);
    h->ntables = 0;
    cdc_strmap_free(&h->byname);
    h->points_cap = CDC_HISTORY_SAMPLES;
    h->spans_cap = CDC_HISTORY_SPANS;
    pthread_mutex_unlock(&h->lock);
}

void cdc_history_free(cdc_history_t *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->ntables; i++)
        series_free(h->tables[i]);
    free(h->tables);
    cdc_strmap_free(&h->byname);
    free(h->samples.items);
    free(h->epochs.items);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

/* Halves the per-table ring capacity *cap (not below floor) until n tables fit in budget;
 * whether it changed. */
static bool shrink_cap(size_t *cap, size_t n, size_t budget, size_t floor)
{
    size_t was = *cap;
    while (*cap > floor && n * *cap > budget)
        *cap = *cap / 2 > floor ? *cap / 2 : floor;
    return *cap != was;
}

/* Keeps the rings of every table within the budgets as the tables grow (under the lock):
 * a few resizes over the job's life (each halves), keeping the newest items. A ring that
 * cannot be resized (out of memory) keeps its size. */
static void fit_budget(cdc_history_t *h)
{
    bool points =
        shrink_cap(&h->points_cap, h->ntables, CDC_HISTORY_POINTS_BUDGET, CDC_HISTORY_POINTS_MIN);
    bool spans =
        shrink_cap(&h->spans_cap, h->ntables, CDC_HISTORY_SPANS_BUDGET, CDC_HISTORY_SPANS_MIN);
    for (size_t i = 0; i < h->ntables && (points || spans); i++) {
        series_t *s = h->tables[i];
        if (points && s->points.cap > h->points_cap)
            (void)ring_resize(&s->points, h->points_cap);
        if (spans && s->spans.cap > h->spans_cap)
            (void)ring_resize(&s->spans, h->spans_cap);
    }
}

/* The series of table (under the lock), created when new; NULL when out of memory. */
static series_t *series_of(cdc_history_t *h, const char *table)
{
    series_t *s;
    if ((s = cdc_strmap_get(&h->byname, table)) != NULL)
        return s;
    if (cdc_array_reserve(h->tables, h->cap, h->ntables + 1, 64) != CDC_OK ||
        (s = calloc(1, sizeof(*s))) == NULL)
        return NULL;
    snprintf(s->name, sizeof(s->name), "%s", table);
    s->rows = -1;
    if (!ring_init(&s->points, sizeof(point_t), h->points_cap) ||
        !ring_init(&s->spans, sizeof(cdc_history_span_t), h->spans_cap) ||
        cdc_strmap_put(&h->byname, s->name, s) != CDC_OK) {
        series_free(s);
        return NULL;
    }
    h->tables[h->ntables++] = s;
    fit_budget(h);
    return s;
}

/* ---- freshness ---------------------------------------------------------------------- */

/* Weight of the spans at or below x (a span holds its values evenly). */
static double weight_below(const cdc_history_span_t *spans, size_t n, int64_t x)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const cdc_history_span_t *s = &spans[i];
        if (s->weight <= 0 || x < s->lo_ms)
            continue;
        if (x >= s->hi_ms)
            w += (double)s->weight;
        else
            w += (double)s->weight * (double)(x - s->lo_ms + 1) / (double)(s->hi_ms - s->lo_ms + 1);
    }
    return w;
}

int64_t cdc_history_quantile(const cdc_history_span_t *spans, size_t n, double q)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    double total = 0;

    for (size_t i = 0; i < n; i++) {
        if (spans[i].weight <= 0)
            continue;
        total += (double)spans[i].weight;
        if (spans[i].lo_ms < lo)
            lo = spans[i].lo_ms;
        if (spans[i].hi_ms > hi)
            hi = spans[i].hi_ms;
    }
    if (total <= 0)
        return -1;
    /* the smallest x with at least q of the weight at or below it */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (weight_below(spans, n, mid) >= q * total)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The table's spans committed after since_ms, copied to out (capacity CDC_HISTORY_SPANS). */
static size_t spans_since(const series_t *s, int64_t since_ms, cdc_history_span_t *out)
{
    size_t n = 0;
    for (size_t i = ring_after(&s->spans, since_ms); i < s->spans.n; i++)
        out[n++] = *(const cdc_history_span_t *)ring_at(&s->spans, i);
    return n;
}

/* ---- writing ------------------------------------------------------------------------- */

void cdc_history_table_commit(cdc_history_t *h, const char *table, int64_t at_ms, int64_t changes,
                              int64_t src_min_ms, int64_t src_max_ms, int64_t rows)
{
    series_t *s;

    pthread_mutex_lock(&h->lock);
    if ((s = series_of(h, table)) != NULL) {
        if (rows >= 0)
            s->rows = rows;
        if (changes > 0) {
            s->changes += changes;
            if (src_min_ms > 0 && src_max_ms >= src_min_ms) {
                cdc_history_span_t *sp = ring_push(&s->spans);
                sp->at_ms = at_ms;
                /* the newest change is the freshest: the span runs from it to the oldest */
                sp->lo_ms = at_ms - src_max_ms > 0 ? at_ms - src_max_ms : 0;
                sp->hi_ms = at_ms - src_min_ms > 0 ? at_ms - src_min_ms : 0;
                sp->weight = changes;
            }
        }
    }
    pthread_mutex_unlock(&h->lock);
}

void cdc_history_epoch(cdc_history_t *h, const cdc_history_epoch_t *ep)
{
    pthread_mutex_lock(&h->lock);
    epoch_item_t *it = ring_push(&h->epochs);
    it->at_ms = ep->at_ms;
    it->ep = *ep;
    pthread_mutex_unlock(&h->lock);
}

/* Closes one point of s at now_ms: rate over the rate window, freshness over its own. */
static void series_sample(series_t *s, int64_t now_ms, cdc_history_span_t *scratch)
{
    const point_t *then = NULL;
    point_t *p;
    size_t n;

    for (size_t i = s->points.n; i > 0; i--) {
        then = ring_at(&s->points, i - 1);
        if (then->at_ms <= now_ms - CDC_HISTORY_RATE_WINDOW_MS)
            break;
    }
    n = spans_since(s, now_ms - CDC_HISTORY_FRESH_WINDOW_MS, scratch);
    p = ring_push(&s->points);
    p->at_ms = now_ms;
    p->changes = s->changes;
    p->rows = s->rows;
    p->p50_ms = cdc_history_quantile(scratch, n, 0.50);
    p->p99_ms = cdc_history_quantile(scratch, n, 0.99);
    if (then != NULL && now_ms > then->at_ms)
        p->rate = (double)(s->changes - then->changes) * 1000.0 / (double)(now_ms - then->at_ms);
}

void cdc_history_sample(cdc_history_t *h, const cdc_history_sample_t *s)
{
    cdc_history_span_t *scratch = malloc(CDC_HISTORY_SPANS * sizeof(*scratch));

    pthread_mutex_lock(&h->lock);
    *(cdc_history_sample_t *)ring_push(&h->samples) = *s;
    for (size_t i = 0; i < h->ntables && scratch != NULL; i++)
        series_sample(h->tables[i], s->at_ms, scratch);
    pthread_mutex_unlock(&h->lock);
    free(scratch);
}

/* ---- reading ------------------------------------------------------------------------- */

size_t cdc_history_tables(cdc_history_t *h, cdc_history_table_t **outp)
{
    cdc_history_span_t *scratch = malloc(CDC_HISTORY_SPANS * sizeof(*scratch));
    cdc_history_table_t *out;
    size_t n = 0;

    pthread_mutex_lock(&h->lock);
    *outp = out = calloc(h->ntables ? h->ntables : 1, sizeof(*out));
    for (size_t i = 0; out != NULL && i < h->ntables; i++) {
        const series_t *s = h->tables[i];
        const point_t *last = s->points.n ? ring_at(&s->points, s->points.n - 1) : NULL;
        cdc_history_table_t *t = &out[n++];
        memset(t, 0, sizeof(*t));
        snprintf(t->table, sizeof(t->table), "%s", s->name);
        t->changes = s->changes;
        t->rows = s->rows;
        t->changes_per_s = last ? last->rate : 0;
        t->fresh_p50_ms = last ? last->p50_ms : -1;
        t->fresh_p99_ms = last ? last->p99_ms : -1;
        t->fresh_max_ms = -1;
        if (last != NULL && scratch != NULL) {
            size_t k = spans_since(s, last->at_ms - CDC_HISTORY_FRESH_WINDOW_MS, scratch);
            for (size_t j = 0; j < k; j++)
                if (scratch[j].hi_ms > t->fresh_max_ms)
                    t->fresh_max_ms = scratch[j].hi_ms;
        }
    }
    pthread_mutex_unlock(&h->lock);
    free(scratch);
    return n;
}

/* An integer, or null when negative (unknown). */
static json_t *known(int64_t v)
{
    return v >= 0 ? json_integer((json_int_t)v) : json_null();
}

/* Columns: an object of arrays named names[0..n), one value appended to each per row. */
static json_t *columns(json_t **cols, size_t n)
{
    for (size_t k = 0; k < n; k++)
        cols[k] = json_array();
    return json_object();
}

static json_t *columns_done(json_t *o, json_t **cols, const char *const *names, size_t n)
{
    for (size_t k = 0; k < n; k++)
        json_object_set_new(o, names[k], cols[k]);
    return o;
}

static json_t *samples_json(const ring_t *r, int64_t since_ms)
{
    static const char *const names[] = {"t", "lag", "workers", "state", "dlq"};
    json_t *cols[5], *o = columns(cols, 5);
    for (size_t i = ring_after(r, since_ms); i < r->n; i++) {
        const cdc_history_sample_t *s = ring_at(r, i);
        json_t *l = json_array();
        for (int p = 0; p < CDC_PARTITIONS; p++)
            json_array_append_new(l, known(s->lag[p]));
        json_array_append_new(cols[0], json_integer(s->at_ms));
        json_array_append_new(cols[1], l);
        json_array_append_new(cols[2], json_integer(s->workers_alive));
        json_array_append_new(cols[3], json_integer(s->state));
        json_array_append_new(cols[4], json_integer(s->dlq));
    }
    return columns_done(o, cols, names, 5);
}

static json_t *epochs_json(const ring_t *r, int64_t since_ms)
{
    static const char *const names[] = {"epoch",   "t",     "duration_ms", "commit_ms",
                                        "records", "bytes", "files"};
    json_t *a = json_array();
    for (size_t i = ring_after(r, since_ms); i < r->n; i++) {
        const cdc_history_epoch_t *ep = &((const epoch_item_t *)ring_at(r, i))->ep;
        const int64_t values[] = {(int64_t)ep->epoch, ep->at_ms, ep->duration_ms, ep->commit_ms,
                                  ep->records,        ep->bytes, ep->files};
        json_t *o = json_object();
        for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++)
            json_object_set_new(o, names[k], json_integer(values[k]));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *series_json(const series_t *s, int64_t since_ms)
{
    static const char *const names[] = {"t", "changes_per_s", "rows", "fresh_p50_ms",
                                        "fresh_p99_ms"};
    json_t *cols[5], *o = columns(cols, 5);
    for (size_t i = ring_after(&s->points, since_ms); i < s->points.n; i++) {
        const point_t *p = ring_at(&s->points, i);
        json_array_append_new(cols[0], json_integer(p->at_ms));
        json_array_append_new(cols[1], json_real((double)(int64_t)(p->rate * 100) / 100));
        json_array_append_new(cols[2], known(p->rows));
        json_array_append_new(cols[3], known(p->p50_ms));
        json_array_append_new(cols[4], known(p->p99_ms));
    }
    json_object_set_new(o, "table", json_string(s->name));
    return columns_done(o, cols, names, 5);
}

char *cdc_history_json(cdc_history_t *h, int64_t since_ms, int64_t interval_ms)
{
    json_t *o = json_object(), *tables = json_array();
    int64_t now = 0;
    char *out;

    pthread_mutex_lock(&h->lock);
    if (h->samples.n > 0)
        now = ((const cdc_history_sample_t *)ring_at(&h->samples, h->samples.n - 1))->at_ms;
    json_object_set_new(o, "samples", samples_json(&h->samples, since_ms));
    json_object_set_new(o, "epochs", epochs_json(&h->epochs, since_ms));
    for (size_t i = 0; i < h->ntables; i++)
        json_array_append_new(tables, series_json(h->tables[i], since_ms));
    pthread_mutex_unlock(&h->lock);
    json_object_set_new(o, "now_ms", json_integer(now));
    json_object_set_new(o, "interval_ms", json_integer(interval_ms));
    json_object_set_new(o, "tables", tables);
    out = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return out;
}
