/*
 * The job's table set (see tableset.h): a sorted array of topic names that grows as needed
 * (common/buf.h), the widening by what every live worker offers, the verdict on one worker's
 * topics, and the JSON the coordinator keeps in etcd.
 */
#include "coordinator/tableset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/sorted.h"

const char *cdc_tableset_verdict_name(cdc_tableset_verdict_t v)
{
    static const char *const names[CDC_TABLESET_VERDICTS] = {
        [CDC_TABLESET_FITS] = "",
        [CDC_TABLESET_MISSING] = "missing_table",
    };
    return (unsigned)v < CDC_TABLESET_VERDICTS ? names[v] : "unknown";
}

void cdc_tableset_init(cdc_tableset_t *s)
{
    memset(s, 0, sizeof(*s));
}

void cdc_tableset_clear(cdc_tableset_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->names[i]);
    free(s->names);
    cdc_tableset_init(s);
}

cdc_err_t cdc_tableset_copy(cdc_tableset_t *dst, const cdc_tableset_t *src, cdc_error_t *e)
{
    cdc_tableset_clear(dst);
    if (src->n == 0)
        return CDC_OK;
    if (cdc_array_reserve(dst->names, dst->cap, (size_t)src->n, 16) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory copying a table set");
    for (int i = 0; i < src->n; i++) {
        if ((dst->names[i] = strdup(src->names[i])) == NULL) {
            cdc_tableset_clear(dst);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory copying a table set");
        }
        dst->n++;
    }
    return CDC_OK;
}

void cdc_tableset_move(cdc_tableset_t *dst, cdc_tableset_t *src)
{
    if (dst == src)
        return;
    cdc_tableset_clear(dst);
    *dst = *src; /* the names change owner: src forgets them */
    cdc_tableset_init(src);
}

const char *cdc_tableset_name(const cdc_tableset_t *s, int i)
{
    return s->names[i];
}

/* The index of topic, or -(insertion point) - 1 when absent. */
static int find(const cdc_tableset_t *s, const char *topic)
{
    return cdc_sorted_find(s->names, s->n, sizeof(s->names[0]), 0, topic);
}

bool cdc_tableset_has(const cdc_tableset_t *s, const char *topic)
{
    return topic != NULL && find(s, topic) >= 0;
}

int cdc_tableset_index(const cdc_tableset_t *s, const char *topic)
{
    int i = topic != NULL ? find(s, topic) : -1;
    return i >= 0 ? i : -1;
}

bool cdc_tableset_equal(const cdc_tableset_t *a, const cdc_tableset_t *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->names[i], b->names[i]) != 0)
            return false;
    return true;
}

cdc_err_t cdc_tableset_add(cdc_tableset_t *s, const char *topic, cdc_error_t *e)
{
    char *copy;
    int i;

    if (topic == NULL || topic[0] == '\0')
        return cdc_error_set(e, CDC_ERR_INVALID, "empty topic name in a table set");
    if ((i = find(s, topic)) >= 0)
        return CDC_OK;
    i = -i - 1;
    if (cdc_array_reserve(s->names, s->cap, (size_t)s->n + 1, 16) != CDC_OK ||
        (copy = strdup(topic)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory adding topic \"%s\" to a table set",
                             topic);
    memmove(&s->names[i + 1], &s->names[i], (size_t)(s->n - i) * sizeof(s->names[0]));
    s->names[i] = copy;
    s->n++;
    return CDC_OK;
}

/* n with a comma every three digits: 1998 -> "1,998". */
static void thousands(char *out, size_t size, int n)
{
    char digits[16];
    int len = snprintf(digits, sizeof(digits), "%d", n), o = 0;

    for (int i = 0; i < len && (size_t)o + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

/* Room kept at the end of a list for " and 2,147,483,647 more". */
#define LIST_TAIL 32

void cdc_tableset_list(const char *const *names, int n, char *buf, size_t size)
{
    size_t used = 0;
    int listed = 0;
    char count[16];

    if (size == 0)
        return;
    buf[0] = '\0';
    for (; listed < n && listed < CDC_TABLESET_LIST_NAMES; listed++) {
        size_t len = strlen(names[listed]) + 2 + (listed > 0 ? 2 : 0);
        size_t tail = listed + 1 < n ? LIST_TAIL : 0;
        if (used + len + tail >= size)
            break;
        used += (size_t)snprintf(buf + used, size - used, "%s\"%s\"", listed > 0 ? ", " : "",
                                 names[listed]);
    }
    if (listed == n)
        return;
    thousands(count, sizeof(count), n - listed);
    if (listed == 0)
        snprintf(buf, size, "%s topics", count);
    else
        snprintf(buf + used, size - used, " and %s more", count);
}

int cdc_tableset_widen(cdc_tableset_t *job, const cdc_tableset_t *const *workers, int n,
                       char *added, size_t added_size)
{
    char **common = NULL, **merged = NULL;
    size_t cap = 0;
    int count = 0, i = 0, j = 0, k = 0;

    if (added != NULL && added_size > 0)
        added[0] = '\0';
    if (n <= 0 || workers[0]->n == 0)
        return 0;
    /* what every worker offers and the job lacks, in sorted order (workers[0]'s order) */
    if ((common = calloc((size_t)workers[0]->n, sizeof(*common))) == NULL)
        return -1;
    for (int t = 0; t < workers[0]->n; t++) {
        const char *topic = workers[0]->names[t];
        bool everyone = !cdc_tableset_has(job, topic);
        for (int w = 1; w < n && everyone; w++)
            everyone = cdc_tableset_has(workers[w], topic);
        if (everyone)
            common[count++] = (char *)topic; /* borrowed until copied below */
    }
    if (count == 0) {
        free(common);
        return 0;
    }
    if (cdc_array_reserve(merged, cap, (size_t)job->n + (size_t)count, 16) != CDC_OK)
        goto nomem;
    for (j = 0; j < count; j++)
        if ((common[j] = strdup(common[j])) == NULL) {
            while (j-- > 0)
                free(common[j]);
            goto nomem;
        }
    /* one merge of two sorted lists: thousands of new topics cost no insertion each */
    for (j = 0; i < job->n || j < count;)
        merged[k++] = j == count || (i < job->n && strcmp(job->names[i], common[j]) < 0)
                          ? job->names[i++]
                          : common[j++];
    if (added != NULL && added_size > 0)
        cdc_tableset_list((const char *const *)common, count, added, added_size);
    free(job->names);
    job->names = merged;
    job->cap = cap;
    job->n = k;
    free(common);
    return count;
nomem:
    free(merged);
    free(common);
    return -1;
}

cdc_tableset_verdict_t cdc_tableset_judge(const cdc_tableset_t *job, const cdc_tableset_t *worker,
                                          char *why, size_t why_size)
{
    static const char before[] = "it does not consume ", after[] = " of the job's tables";
    const char *first[CDC_TABLESET_LIST_NAMES]; /* the list shows these, and counts the rest */
    char missing[1024];
    size_t room = why_size > sizeof(before) + sizeof(after)
                      ? why_size - sizeof(before) - sizeof(after) + 2
                      : 1;
    int nmissing = 0;

    for (int i = 0; i < job->n; i++)
        if (!cdc_tableset_has(worker, job->names[i])) {
            if (nmissing < CDC_TABLESET_LIST_NAMES)
                first[nmissing] = job->names[i];
            nmissing++;
        }
    if (why_size > 0)
        why[0] = '\0';
    if (nmissing == 0)
        return CDC_TABLESET_FITS;
    cdc_tableset_list(first, nmissing, missing, room < sizeof(missing) ? room : sizeof(missing));
    snprintf(why, why_size, "%s%s%s", before, missing, after);
    return CDC_TABLESET_MISSING;
}

char *cdc_tableset_json(const cdc_tableset_t *s)
{
    json_t *a = json_array();
    char *out;

    if (a == NULL)
        return NULL;
    for (int i = 0; i < s->n; i++)
        json_array_append_new(a, json_string(cdc_tableset_name(s, i)));
    out = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return out;
}

cdc_err_t cdc_tableset_parse(cdc_tableset_t *s, const char *json, size_t len, cdc_error_t *e)
{
    json_error_t je;
    json_t *a = json_loadb(json, len, 0, &je);
    cdc_err_t rc = CDC_OK;

    cdc_tableset_clear(s);
    if (a == NULL || !json_is_array(a)) {
        json_decref(a);
        return cdc_error_set(e, CDC_ERR_CORRUPT, "table set is not a JSON array of topics%s%s",
                             a == NULL ? ": " : "", a == NULL ? je.text : "");
    }
    for (size_t i = 0; i < json_array_size(a) && rc == CDC_OK; i++) {
        const char *name = json_string_value(json_array_get(a, i));
        if (name == NULL)
            rc = cdc_error_set(e, CDC_ERR_CORRUPT, "table set: element %zu is not a string", i);
        else
            rc = cdc_tableset_add(s, name, e);
    }
    json_decref(a);
    if (rc == CDC_OK)
        return CDC_OK;
    cdc_tableset_clear(s);
    if (rc == CDC_ERR_NOMEM)
        return rc;
    if (e != NULL)
        e->code = CDC_ERR_CORRUPT; /* an empty name is a bad record too */
    return CDC_ERR_CORRUPT;
}
