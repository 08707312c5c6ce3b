/*
 * Worker membership table (see membership.h). An array that grows with the workers,
 * looked up by pipe on every message (a linear scan: a few hundred workers at most cost
 * less than the message they answer).
 */
#include "coordinator/membership.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

void cdc_members_init(cdc_members_t *ms)
{
    memset(ms, 0, sizeof(*ms));
}

void cdc_members_clear(cdc_members_t *ms)
{
    for (int i = 0; i < ms->n; i++)
        cdc_tableset_clear(&ms->m[i].topics);
    ms->n = 0;
}

void cdc_members_free(cdc_members_t *ms)
{
    cdc_members_clear(ms);
    free(ms->m);
    cdc_members_init(ms);
}

cdc_member_t *cdc_members_by_id(cdc_members_t *ms, const char *id)
{
    for (int i = 0; i < ms->n; i++)
        if (strcmp(ms->m[i].id, id) == 0)
            return &ms->m[i];
    return NULL;
}

cdc_member_t *cdc_members_by_pipe(cdc_members_t *ms, uint32_t pipe)
{
    if (pipe == 0)
        return NULL;
    for (int i = 0; i < ms->n; i++)
        if (ms->m[i].alive && ms->m[i].pipe == pipe)
            return &ms->m[i];
    return NULL;
}

cdc_register_result_t cdc_members_register(cdc_members_t *ms, const char *id, uint64_t incarnation,
                                           uint32_t pipe, const char *admin, int64_t now_ms,
                                           uint32_t *old_pipe)
{
    cdc_member_t *m;
    cdc_register_result_t r = CDC_REGISTER_NEW;

    if (old_pipe)
        *old_pipe = 0;
    if (id == NULL || id[0] == '\0' || strlen(id) >= CDC_WORKER_ID_MAX)
        return CDC_REGISTER_INVALID;
    /* another id on the same pipe is a protocol error of that worker; drop the other */
    for (int i = 0; i < ms->n; i++)
        if (ms->m[i].alive && ms->m[i].pipe == pipe && strcmp(ms->m[i].id, id) != 0)
            cdc_members_lose(&ms->m[i], now_ms, "another worker registered on its pipe");
    m = cdc_members_by_id(ms, id);
    if (m != NULL && m->alive) {
        if (m->pipe == pipe && m->incarnation == incarnation) {
            m->last_heartbeat_ms = now_ms;
            return CDC_REGISTER_SAME;
        }
        if (old_pipe && m->pipe != pipe)
            *old_pipe = m->pipe;
        r = CDC_REGISTER_REPLACED;
    }
    if (m == NULL) {
        if (cdc_array_reserve(ms->m, ms->cap, (size_t)ms->n + 1, 16) != CDC_OK)
            return CDC_REGISTER_NOMEM;
        m = &ms->m[ms->n++];
        memset(m, 0, sizeof(*m));
        snprintf(m->id, sizeof(m->id), "%s", id);
    }
    if (m->incarnation != incarnation)
        m->ndlq = 0; /* a new process counts from 0 */
    m->incarnation = incarnation;
    m->pipe = pipe;
    m->alive = true;
    m->registered_ms = now_ms;
    m->last_heartbeat_ms = now_ms;
    m->lost_ms = 0;
    m->lost_reason[0] = '\0';
    snprintf(m->admin, sizeof(m->admin), "%s", admin ? admin : "");
    return r;
}

bool cdc_members_heartbeat(cdc_members_t *ms, uint32_t pipe, int64_t now_ms)
{
    cdc_member_t *m = cdc_members_by_pipe(ms, pipe);

    if (m == NULL)
        return false;
    m->last_heartbeat_ms = now_ms;
    m->heartbeats++;
    return true;
}

cdc_err_t cdc_members_note_topics(cdc_member_t *m, const char *const *topics, size_t n,
                                  bool follows, cdc_error_t *e)
{
    cdc_err_t rc = CDC_OK;

    cdc_tableset_clear(&m->topics);
    m->topics_known = n > 0 || follows;
    m->follows = follows;
    m->verdict = CDC_TABLESET_FITS;
    m->refused[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        cdc_error_t one;
        if (cdc_tableset_add(&m->topics, topics[i], &one) != CDC_OK && rc == CDC_OK)
            rc = cdc_error_set(e, one.code, "%s", one.msg);
    }
    return rc;
}

bool cdc_members_note_offer(cdc_member_t *m, const char *const *topics, size_t n)
{
    cdc_tableset_t offer;

    if (!m->follows || n == 0)
        return false;
    cdc_tableset_init(&offer);
    for (size_t i = 0; i < n; i++) {
        cdc_error_t e;
        if (cdc_tableset_add(&offer, topics[i], &e) == CDC_ERR_NOMEM) {
            cdc_tableset_clear(&offer); /* a part of the offer would narrow it */
            return false;
        }
    }
    if (cdc_tableset_equal(&offer, &m->topics)) {
        cdc_tableset_clear(&offer);
        return false;
    }
    cdc_tableset_move(&m->topics, &offer);
    return true;
}

void cdc_members_note_dlq(cdc_member_t *m, const char *const *classes, const uint64_t *records,
                          size_t n)
{
    m->ndlq = 0;
    for (size_t i = 0; i < n && m->ndlq < CDC_MEMBER_DLQ_CLASSES; i++) {
        cdc_member_dlq_t *d = &m->dlq[m->ndlq++];
        snprintf(d->error_class, sizeof(d->error_class), "%s", classes[i] ? classes[i] : "");
        d->records = records[i];
    }
}

void cdc_members_lose(cdc_member_t *m, int64_t now_ms, const char *reason)
{
    if (!m->alive)
        return;
    m->alive = false;
    m->lost_ms = now_ms;
    snprintf(m->lost_reason, sizeof(m->lost_reason), "%s", reason ? reason : "");
}

int cdc_members_expire(cdc_members_t *ms, int64_t now_ms, int64_t timeout_ms, uint32_t *pipes)
{
    int n = 0;

    for (int i = 0; i < ms->n; i++) {
        cdc_member_t *m = &ms->m[i];
        if (m->alive && now_ms - m->last_heartbeat_ms > timeout_ms) {
            if (pipes != NULL)
                pipes[n] = m->pipe;
            n++;
            cdc_members_lose(m, now_ms, "missed heartbeats");
        }
    }
    return n;
}

int cdc_members_alive_ids(const cdc_members_t *ms, const char **ids, int cap)
{
    int n = 0;

    for (int i = 0; i < ms->n && n < cap; i++)
        if (ms->m[i].alive)
            ids[n++] = ms->m[i].id;
    return n;
}

int cdc_members_alive_count(const cdc_members_t *ms)
{
    int n = 0;

    for (int i = 0; i < ms->n; i++)
        if (ms->m[i].alive)
            n++;
    return n;
}

bool cdc_members_is_alive(const cdc_members_t *ms, const char *id)
{
    for (int i = 0; i < ms->n; i++)
        if (ms->m[i].alive && strcmp(ms->m[i].id, id) == 0)
            return true;
    return false;
}

void cdc_members_forget(cdc_members_t *ms, int64_t now_ms, int64_t keep_ms)
{
    int keep = 0;

    for (int i = 0; i < ms->n; i++) {
        if (!ms->m[i].alive && now_ms - ms->m[i].lost_ms > keep_ms) {
            cdc_tableset_clear(&ms->m[i].topics);
            continue;
        }
        if (keep != i)
            ms->m[keep] = ms->m[i]; /* moves its topics: slot i is not read again */
        keep++;
    }
    ms->n = keep;
}
