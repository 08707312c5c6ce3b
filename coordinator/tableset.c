/*
 * The job's table set (see tableset.h): a small sorted set of topic names in one fixed
 * buffer, the widening by what every live worker offers, the verdict on one worker's
 * topics, and the JSON the coordinator keeps in etcd.
 */
#include "coordinator/tableset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

const char *cdc_tableset_verdict_name(cdc_tableset_verdict_t v)
{
    static const char *const names[CDC_TABLESET_VERDICTS] = {
        [CDC_TABLESET_FITS] = "",
        [CDC_TABLESET_MISSING] = "missing_table",
    };
    return (unsigned)v < CDC_TABLESET_VERDICTS ? names[v] : "unknown";
}

void cdc_tableset_clear(cdc_tableset_t *s)
{
    s->n = 0;
    s->used = 0;
    s->names[0] = '\0';
}

const char *cdc_tableset_name(const cdc_tableset_t *s, int i)
{
    return &s->names[s->at[i]];
}

/* The index of topic, or -(insertion point) - 1 when absent. */
static int find(const cdc_tableset_t *s, const char *topic)
{
    int lo = 0, hi = s->n;

    while (lo < hi) {
        int mid = (lo + hi) / 2, c = strcmp(cdc_tableset_name(s, mid), topic);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

bool cdc_tableset_has(const cdc_tableset_t *s, const char *topic)
{
    return topic != NULL && find(s, topic) >= 0;
}

bool cdc_tableset_equal(const cdc_tableset_t *a, const cdc_tableset_t *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (strcmp(cdc_tableset_name(a, i), cdc_tableset_name(b, i)) != 0)
            return false;
    return true;
}

cdc_err_t cdc_tableset_add(cdc_tableset_t *s, const char *topic, cdc_error_t *e)
{
    size_t len = topic != NULL ? strlen(topic) : 0;
    int i;

    if (len == 0)
        return cdc_error_set(e, CDC_ERR_INVALID, "empty topic name in a table set");
    if ((i = find(s, topic)) >= 0)
        return CDC_OK;
    i = -i - 1;
    if (s->n == CDC_TABLESET_MAX || s->used + len + 1 > CDC_TABLESET_BYTES)
        return cdc_error_set(e, CDC_ERR_INVALID,
                             "topic \"%s\" does not fit in a table set (at most %d topics, %d "
                             "bytes of names)",
                             topic, CDC_TABLESET_MAX, CDC_TABLESET_BYTES);
    memmove(&s->at[i + 1], &s->at[i], (size_t)(s->n - i) * sizeof(s->at[0]));
    s->at[i] = (uint16_t)s->used;
    memcpy(&s->names[s->used], topic, len + 1);
    s->used += len + 1;
    s->n++;
    return CDC_OK;
}

/* Appends `"name"` to a list in buf, comma-separated, truncating quietly. */
static void list_append(char *buf, size_t size, const char *name)
{
    size_t used = strlen(buf);

    if (used < size)
        snprintf(buf + used, size - used, "%s\"%s\"", used > 0 ? ", " : "", name);
}

int cdc_tableset_widen(cdc_tableset_t *job, const cdc_tableset_t *const *workers, int n,
                       char *added, size_t added_size)
{
    int count = 0;

    if (added != NULL && added_size > 0)
        added[0] = '\0';
    if (n <= 0)
        return 0;
    for (int i = 0; i < workers[0]->n; i++) {
        const char *topic = cdc_tableset_name(workers[0], i);
        bool everyone = true;
        cdc_error_t e;
        for (int k = 1; k < n && everyone; k++)
            everyone = cdc_tableset_has(workers[k], topic);
        if (!everyone || cdc_tableset_has(job, topic) || cdc_tableset_add(job, topic, &e) != CDC_OK)
            continue;
        if (added != NULL && added_size > 0)
            list_append(added, added_size, topic);
        count++;
    }
    return count;
}

cdc_tableset_verdict_t cdc_tableset_judge(const cdc_tableset_t *job, const cdc_tableset_t *worker,
                                          char *why, size_t why_size)
{
    char missing[1024] = "";
    int nmissing = 0;

    for (int i = 0; i < job->n; i++)
        if (!cdc_tableset_has(worker, cdc_tableset_name(job, i))) {
            list_append(missing, sizeof(missing), cdc_tableset_name(job, i));
            nmissing++;
        }
    if (why_size > 0)
        why[0] = '\0';
    if (nmissing > 0)
        snprintf(why, why_size, "it does not consume %s of the job's tables", missing);
    return nmissing > 0 ? CDC_TABLESET_MISSING : CDC_TABLESET_FITS;
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
    if (e != NULL)
        e->code = CDC_ERR_CORRUPT; /* a name that does not fit is a bad record too */
    return CDC_ERR_CORRUPT;
}
