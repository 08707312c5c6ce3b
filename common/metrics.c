/*
 * Metrics registry and Prometheus text rendering (see metrics.h). Families form a list
 * in registration order, each with its series in creation order. Values are doubles
 * stored as their bit patterns in 64-bit atomics so updates need no lock; a histogram
 * keeps per-bucket (non-cumulative) counts and renders them cumulatively, deriving
 * _count from the buckets so that _count always equals the +Inf bucket.
 */
#include "common/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"

typedef enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM } metric_type_t;

struct family;

struct cdc_metric_series {
    struct family *family;
    size_t nlabels;
    char *label_names[CDC_METRICS_MAX_LABELS];
    char *label_values[CDC_METRICS_MAX_LABELS];
    _Atomic uint64_t value;    /* counter/gauge value, or histogram sum (double bits) */
    _Atomic uint64_t *buckets; /* histogram: nbuckets + 1 (+Inf) counts */
    struct cdc_metric_series *next;
};

struct family {
    char *name;
    char *help;
    metric_type_t type;
    double bounds[CDC_METRICS_MAX_BUCKETS];
    size_t nbounds;
    struct cdc_metric_series *series, *series_tail;
    struct family *next;
};

struct cdc_metrics {
    pthread_mutex_t lock;
    struct family *families, *families_tail;
};

const double cdc_metrics_latency_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                              0.25,  0.5,    1,     2.5,  5,     10};
const size_t cdc_metrics_latency_nbuckets =
    sizeof(cdc_metrics_latency_buckets) / sizeof(cdc_metrics_latency_buckets[0]);

static uint64_t dbits(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    return u;
}

static double bitsd(uint64_t u)
{
    double v;
    memcpy(&v, &u, sizeof(v));
    return v;
}

cdc_metrics_t *cdc_metrics_new(void)
{
    cdc_metrics_t *reg = calloc(1, sizeof(*reg));
    if (reg == NULL)
        return NULL;
    pthread_mutex_init(&reg->lock, NULL);
    return reg;
}

static void series_free(struct cdc_metric_series *s)
{
    for (size_t i = 0; i < s->nlabels; i++) {
        free(s->label_names[i]);
        free(s->label_values[i]);
    }
    free(s->buckets);
    free(s);
}

void cdc_metrics_free(cdc_metrics_t *reg)
{
    if (reg == NULL)
        return;
    struct family *f = reg->families;
    while (f != NULL) {
        struct family *fn = f->next;
        struct cdc_metric_series *s = f->series;
        while (s != NULL) {
            struct cdc_metric_series *sn = s->next;
            series_free(s);
            s = sn;
        }
        free(f->name);
        free(f->help);
        free(f);
        f = fn;
    }
    pthread_mutex_destroy(&reg->lock);
    free(reg);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static cdc_metrics_t *default_reg;

static void default_init(void)
{
    default_reg = cdc_metrics_new();
}

cdc_metrics_t *cdc_metrics_default(void)
{
    pthread_once(&default_once, default_init);
    return default_reg;
}

static bool valid_name(const char *s, bool colon)
{
    if (s == NULL || *s == '\0')
        return false;
    for (const char *p = s; *p != '\0'; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
                  (colon && ch == ':') || (p != s && ch >= '0' && ch <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static bool labels_match(const struct cdc_metric_series *s, const char *const *labels,
                         size_t nlabels)
{
    if (s->nlabels != nlabels)
        return false;
    for (size_t i = 0; i < nlabels; i++) {
        if (strcmp(s->label_names[i], labels[2 * i]) != 0 ||
            strcmp(s->label_values[i], labels[2 * i + 1]) != 0)
            return false;
    }
    return true;
}

static struct cdc_metric_series *lookup(cdc_metrics_t *reg, metric_type_t type, const char *name,
                                        const char *help, const double *bounds, size_t nbounds,
                                        const char *const *labels)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    size_t nlabels = 0;
    struct cdc_metric_series *s = NULL;

    if (reg == NULL)
        return NULL;
    if (!valid_name(name, true)) {
        cdc_log_error("invalid metric name \"%s\"", name ? name : "(null)");
        return NULL;
    }
    if (labels != NULL) {
        while (labels[2 * nlabels] != NULL) {
            const char *ln = labels[2 * nlabels];
            if (labels[2 * nlabels + 1] == NULL || !valid_name(ln, false) ||
                strncmp(ln, "__", 2) == 0 || (type == METRIC_HISTOGRAM && strcmp(ln, "le") == 0)) {
                cdc_log_error("invalid label \"%s\" for metric \"%s\"", ln, name);
                return NULL;
            }
            if (++nlabels > CDC_METRICS_MAX_LABELS) {
                cdc_log_error("too many labels for metric \"%s\" (at most %d)", name,
                              CDC_METRICS_MAX_LABELS);
                return NULL;
            }
        }
    }
    if (type == METRIC_HISTOGRAM) {
        if (nbounds > CDC_METRICS_MAX_BUCKETS || (nbounds > 0 && bounds == NULL)) {
            cdc_log_error("too many buckets for histogram \"%s\" (at most %d)", name,
                          CDC_METRICS_MAX_BUCKETS);
            return NULL;
        }
        for (size_t i = 0; i < nbounds; i++) {
            if (isnan(bounds[i]) || isinf(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
                cdc_log_error("buckets of histogram \"%s\" must be finite and increasing", name);
                return NULL;
            }
        }
    }

    pthread_mutex_lock(&reg->lock);
    struct family *f;
    for (f = reg->families; f != NULL; f = f->next) {
        if (strcmp(f->name, name) == 0)
            break;
    }
    if (f != NULL && f->type != type) {
        cdc_log_error("metric \"%s\" already registered as a %s", name, type_names[f->type]);
        goto done;
    }
    if (f == NULL) {
        f = calloc(1, sizeof(*f));
        if (f == NULL)
            goto done;
        f->name = strdup(name);
        f->help = strdup(help ? help : "");
        if (f->name == NULL || f->help == NULL) {
            free(f->name);
            free(f->help);
            free(f);
            goto done;
        }
        f->type = type;
        if (type == METRIC_HISTOGRAM && nbounds > 0) {
            memcpy(f->bounds, bounds, nbounds * sizeof(double));
            f->nbounds = nbounds;
        }
        if (reg->families_tail != NULL)
            reg->families_tail->next = f;
        else
            reg->families = f;
        reg->families_tail = f;
    }
    for (s = f->series; s != NULL; s = s->next) {
        if (labels_match(s, labels, nlabels))
            goto done;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        goto done;
    s->family = f;
    for (size_t i = 0; i < nlabels; i++) {
        s->label_names[i] = strdup(labels[2 * i]);
        s->label_values[i] = strdup(labels[2 * i + 1]);
        s->nlabels = i + 1;
        if (s->label_names[i] == NULL || s->label_values[i] == NULL) {
            series_free(s);
            s = NULL;
            goto done;
        }
    }
    if (type == METRIC_HISTOGRAM) {
        s->buckets = calloc(f->nbounds + 1, sizeof(*s->buckets));
        if (s->buckets == NULL) {
            series_free(s);
            s = NULL;
            goto done;
        }
    }
    atomic_store(&s->value, dbits(0.0));
    if (f->series_tail != NULL)
        f->series_tail->next = s;
    else
        f->series = s;
    f->series_tail = s;
done:
    pthread_mutex_unlock(&reg->lock);
    return s;
}

cdc_counter_t *cdc_metrics_counter(cdc_metrics_t *reg, const char *name, const char *help,
                                   const char *const *labels)
{
    return lookup(reg, METRIC_COUNTER, name, help, NULL, 0, labels);
}

cdc_gauge_t *cdc_metrics_gauge(cdc_metrics_t *reg, const char *name, const char *help,
                               const char *const *labels)
{
    return lookup(reg, METRIC_GAUGE, name, help, NULL, 0, labels);
}

cdc_histogram_t *cdc_metrics_histogram(cdc_metrics_t *reg, const char *name, const char *help,
                                       const double *buckets, size_t nbuckets,
                                       const char *const *labels)
{
    return lookup(reg, METRIC_HISTOGRAM, name, help, buckets, nbuckets, labels);
}

static void atomic_add_double(_Atomic uint64_t *a, double v)
{
    uint64_t old = atomic_load(a);
    while (!atomic_compare_exchange_weak(a, &old, dbits(bitsd(old) + v)))
        ;
}

void cdc_metrics_counter_inc(cdc_counter_t *c)
{
    cdc_metrics_counter_add(c, 1.0);
}

void cdc_metrics_counter_add(cdc_counter_t *c, double v)
{
    if (c == NULL || !(v >= 0))
        return;
    atomic_add_double(&c->value, v);
}

void cdc_metrics_gauge_set(cdc_gauge_t *g, double v)
{
    if (g == NULL)
        return;
    atomic_store(&g->value, dbits(v));
}

void cdc_metrics_gauge_add(cdc_gauge_t *g, double v)
{
    if (g == NULL)
        return;
    atomic_add_double(&g->value, v);
}

void cdc_metrics_histogram_observe(cdc_histogram_t *h, double v)
{
    if (h == NULL || h->buckets == NULL)
        return;
    const struct family *f = h->family;
    size_t i = 0;
    while (i < f->nbounds && !(v <= f->bounds[i]))
        i++;
    atomic_fetch_add(&h->buckets[i], 1);
    atomic_add_double(&h->value, v);
}

double cdc_metrics_value(const cdc_counter_t *c)
{
    if (c == NULL)
        return 0;
    return bitsd(atomic_load(&((cdc_counter_t *)c)->value));
}

/* ---- rendering ---------------------------------------------------------------------- */

/* Escapes \ and newline (HELP) and also " (label values). */
static void buf_escaped(cdc_buf_t *b, const char *s, bool quote)
{
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == '\\')
            cdc_buf_puts(b, "\\\\");
        else if (*p == '\n')
            cdc_buf_puts(b, "\\n");
        else if (quote && *p == '"')
            cdc_buf_puts(b, "\\\"");
        else
            cdc_buf_put(b, p, 1);
    }
}

/* Shortest representation that reads back to the same double; +Inf/-Inf/NaN. */
static void fmt_double(char *out, size_t size, double v)
{
    if (isnan(v)) {
        snprintf(out, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

static void render_labels(cdc_buf_t *b, const struct cdc_metric_series *s, const char *le)
{
    if (s->nlabels == 0 && le == NULL)
        return;
    cdc_buf_puts(b, "{");
    for (size_t i = 0; i < s->nlabels; i++) {
        if (i > 0)
            cdc_buf_puts(b, ",");
        cdc_buf_puts(b, s->label_names[i]);
        cdc_buf_puts(b, "=\"");
        buf_escaped(b, s->label_values[i], true);
        cdc_buf_puts(b, "\"");
    }
    if (le != NULL) {
        if (s->nlabels > 0)
            cdc_buf_puts(b, ",");
        cdc_buf_puts(b, "le=\"");
        cdc_buf_puts(b, le);
        cdc_buf_puts(b, "\"");
    }
    cdc_buf_puts(b, "}");
}

static void render_sample(cdc_buf_t *b, const char *name, const char *suffix,
                          const struct cdc_metric_series *s, const char *le, double v)
{
    char num[64];
    cdc_buf_puts(b, name);
    cdc_buf_puts(b, suffix);
    render_labels(b, s, le);
    fmt_double(num, sizeof(num), v);
    cdc_buf_puts(b, " ");
    cdc_buf_puts(b, num);
    cdc_buf_puts(b, "\n");
}

char *cdc_metrics_render(cdc_metrics_t *reg, size_t *len)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    cdc_buf_t b = {0};

    cdc_buf_put(&b, "", 0);
    if (reg != NULL) {
        pthread_mutex_lock(&reg->lock);
        for (const struct family *f = reg->families; f != NULL; f = f->next) {
            cdc_buf_printf(&b, "# HELP %s ", f->name);
            buf_escaped(&b, f->help, false);
            cdc_buf_printf(&b, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
            for (const struct cdc_metric_series *s = f->series; s != NULL; s = s->next) {
                double v = bitsd(atomic_load(&((struct cdc_metric_series *)s)->value));
                if (f->type != METRIC_HISTOGRAM) {
                    render_sample(&b, f->name, "", s, NULL, v);
                    continue;
                }
                uint64_t cum = 0;
                char le[64];
                for (size_t i = 0; i <= f->nbounds; i++) {
                    cum += atomic_load(&s->buckets[i]);
                    if (i < f->nbounds)
                        fmt_double(le, sizeof(le), f->bounds[i]);
                    else
                        snprintf(le, sizeof(le), "+Inf");
                    render_sample(&b, f->name, "_bucket", s, le, (double)cum);
                }
                render_sample(&b, f->name, "_sum", s, NULL, v);
                render_sample(&b, f->name, "_count", s, NULL, (double)cum);
            }
        }
        pthread_mutex_unlock(&reg->lock);
    }
    if (b.oom) {
        free(b.data);
        return NULL;
    }
    if (len != NULL)
        *len = b.len;
    return b.data;
}
