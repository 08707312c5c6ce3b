/*
 * The job's table set as the leader applies it (docs/protocol.md, "The job's table set"):
 * which live workers may own partition slots, and which topics every Assign tells them to
 * consume. The set itself (coordinator/tableset.c) is read from etcd at leader start with the
 * newest checkpoint's topics added (job.c), widened by what every live worker offers (at
 * every assignment, and by a new assignment when a follower's offer grows) or by the
 * operator (POST /tables), and written back to etcd by the loop; a worker that cannot
 * consume a topic of the set is refused (logged, counted, in /status and in its empty
 * Assign) and owns nothing, so no slot ever misses a table the others carry. Main thread
 * only, like the rest of the job, but for the request mailbox of POST /tables. *
 * A call circle of three files (docs/development.md, "Call circles"): job.c, job_tables.c
 * and pipeline.c are one concept, the job, split by part. The loop (job.c) drives the
 * table set and the commit pipeline; both fall back on the loop's own moves: a send to
 * a worker, a recovery (Abort, new generation) or a step down to standby. The rest of
 * coordinator/ sits below them: admin.c, dashboard.c and lag.c only read the job.
 */
#include "coordinator/job_int.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"

/* How often the topics of the set are looked for in the brokers' answers (--kafka). */
#define TABLE_TOPICS_CHECK_MS 10000
/* How often the workers' offers are compared with the set (unconsumed.h). */
#define UNCONSUMED_CHECK_MS 5000

/* Adds the topics the newest checkpoint's slots carry: the job committed them. */
void cdc_job_note_base_tables(cdc_coord_t *c)
{
    if (c->base == NULL)
        return;
    for (int p = 0; p < CDC_PARTITIONS; p++)
        for (size_t j = 0; j < c->base->partitions[p].noffsets; j++) {
            const char *topic = c->base->partitions[p].offsets[j].topic;
            cdc_error_t e;
            if (topic == NULL || cdc_tableset_has(&c->tables, topic))
                continue;
            if (cdc_tableset_add(&c->tables, topic, &e) != CDC_OK)
                cdc_log_error("job \"%s\": %s", c->cfg.job, e.msg);
            else
                c->tables_dirty = true;
        }
}

/* Widens set by every topic each live worker that reports its topics offers; the names
 * added go to added (a bounded list, cdc_tableset_list). Returns how many. */
static int widen(const cdc_coord_t *c, cdc_tableset_t *set, char *added, size_t added_size)
{
    const cdc_tableset_t **sets;
    int n = 0, count;

    if (added_size > 0)
        added[0] = '\0';
    if (c->members.n == 0)
        return 0;
    if ((sets = calloc((size_t)c->members.n, sizeof(*sets))) == NULL) {
        cdc_log_error("job \"%s\": out of memory widening the table set", c->cfg.job);
        return 0;
    }
    for (int i = 0; i < c->members.n; i++)
        if (c->members.m[i].alive && c->members.m[i].topics_known)
            sets[n++] = &c->members.m[i].topics;
    count = cdc_tableset_widen(set, sets, n, added, added_size);
    free(sets);
    if (count < 0) {
        cdc_log_error("job \"%s\": out of memory widening the table set", c->cfg.job);
        return 0;
    }
    return count;
}

void cdc_job_widen_tables(cdc_coord_t *c)
{
    char added[1024];

    if (widen(c, &c->tables, added, sizeof(added)) == 0)
        return;
    cdc_log_info("job \"%s\" now carries %s: every live worker offers each", c->cfg.job, added);
    c->tables_dirty = true;
}

/* Whether the owner of every slot follows the job's tables: it then consumes whatever set
 * it is told, so a wider set needs no judging (and no recovery). */
static bool owners_follow(cdc_coord_t *c)
{
    for (int p = 0; p < CDC_PARTITIONS; p++) {
        cdc_member_t *m = c->owner[p][0] ? cdc_members_by_id(&c->members, c->owner[p]) : NULL;
        if (m == NULL || !m->alive || !m->follows)
            return false;
    }
    return true;
}

/* Tells every live owner of a slot the job's whole table set (Tables); a worker that owns
 * none (idle, or refused) gets the set with its next Assign. */
static void send_tables(cdc_coord_t *c)
{
    Cdc__Envelope env = CDC__ENVELOPE__INIT;
    Cdc__Tables t = CDC__TABLES__INIT;

    t.term = c->term;
    t.generation = c->generation;
    /* the set's own sorted array, however long: each message is packed as it is sent */
    t.n_tables = (size_t)c->tables.n;
    t.tables = c->tables.names;
    env.body_case = CDC__ENVELOPE__BODY_TABLES;
    env.tables = &t;
    for (int i = 0; i < c->members.n; i++) {
        const cdc_member_t *m = &c->members.m[i];
        if (m->alive && cdc_job_owns_any(c, m->id))
            cdc_job_send_env(c, m->pipe, &env);
    }
}

/*
 * The running job takes a set just widened: when every owner follows the job, the owners
 * add the new topics as they run (Tables): the open epochs go on, each slot reads the new
 * topics from their beginning from its next record on, and the next barrier's acks carry
 * their offsets (docs/protocol.md, "The job's table set"). Otherwise an owner with --tables
 * or --topics must be judged: a new assignment (which refuses whoever cannot consume the
 * set) because of why.
 */
static void take_wider_set(cdc_coord_t *c, const char *why)
{
    if (c->state != CDC_JOB_RUNNING)
        return; /* the coming assignment hands it out */
    if (!owners_follow(c)) {
        cdc_job_recover(c, why, false);
        return;
    }
    cdc_metrics_counter_inc(c->m_tables_widened);
    cdc_log_info("job \"%s\": the owners add the wider table set to their slots without a "
                 "recovery (%s)",
                 c->cfg.job, why);
    send_tables(c);
}

void cdc_job_offers_changed(cdc_coord_t *c)
{
    char added[1024], why[1200];

    if (c->state != CDC_JOB_RUNNING || widen(c, &c->tables, added, sizeof(added)) == 0)
        return;
    c->tables_dirty = true;
    cdc_log_info("job \"%s\" now carries %s: every live worker offers each", c->cfg.job, added);
    snprintf(why, sizeof(why), "every live worker offers %s", added);
    take_wider_set(c, why);
}

cdc_err_t cdc_job_add_table(cdc_coord_t *c, const char *topic, bool *added, cdc_error_t *e)
{
    cdc_err_t rc;
    char why[400];

    *added = false;
    if (cdc_tableset_has(&c->tables, topic))
        return CDC_OK;
    if ((rc = cdc_tableset_add(&c->tables, topic, e)) != CDC_OK)
        return rc;
    *added = true;
    c->tables_dirty = true;
    cdc_log_info("job \"%s\" now carries \"%s\": added by the operator (POST /tables)", c->cfg.job,
                 topic);
    snprintf(why, sizeof(why), "table \"%s\" added to the job's tables", topic);
    take_wider_set(c, why);
    return CDC_OK;
}

void cdc_job_check_table_topics(cdc_coord_t *c, int64_t now)
{
    cdc_tableset_t missing = {0};

    if (c->watermarks == NULL || now < c->tables_check_ms)
        return;
    c->tables_check_ms = now + TABLE_TOPICS_CHECK_MS;
    for (int i = 0; i < c->tables.n; i++) {
        const char *topic = cdc_tableset_name(&c->tables, i);
        cdc_error_t e;
        if (cdc_watermarks_end(c->watermarks, topic, 0) >= 0)
            continue;
        (void)cdc_tableset_add(&missing, topic, &e);
        if (cdc_tableset_has(&c->tables_missing, topic)) /* not just added: missing */
            cdc_log_warn("topic \"%s\" of the tables of job \"%s\" is not in Kafka: the workers "
                         "read it once it exists (hint: is the table captured? cdcctl tables "
                         "shows it starting)",
                         topic, c->cfg.job);
    }
    cdc_tableset_move(&c->tables_missing, &missing);
}

/* The live workers that do not offer topic, as a quoted list (for the error line). */
static void lacking_workers(const cdc_coord_t *c, const char *topic, cdc_buf_t *b)
{
    int listed = 0;
    for (int i = 0; i < c->members.n; i++) {
        const cdc_member_t *m = &c->members.m[i];
        if (!m->alive || (m->topics_known && cdc_tableset_has(&m->topics, topic)))
            continue;
        if (listed++ < 8)
            cdc_buf_printf(b, "%s\"%s\"%s", listed > 1 ? ", " : "", m->id,
                           m->topics_known ? "" : " (reports no topics)");
    }
    if (listed > 8)
        cdc_buf_printf(b, " and %d more", listed - 8);
    if (listed == 0)
        cdc_buf_puts(b, "none");
}

void cdc_job_check_unconsumed(cdc_coord_t *c, int64_t now)
{
    const char **offered = NULL;
    size_t n = 0, cap = 0, late = 0;
    bool ok = true;

    if (c->state != CDC_JOB_RUNNING || now < c->unconsumed_check_ms)
        return;
    c->unconsumed_check_ms = now + UNCONSUMED_CHECK_MS;
    for (int i = 0; i < c->members.n && ok; i++) {
        const cdc_member_t *m = &c->members.m[i];
        if (!m->alive || !m->topics_known)
            continue;
        for (int j = 0; j < m->topics.n && ok; j++) {
            const char *topic = cdc_tableset_name(&m->topics, j);
            if (cdc_tableset_has(&c->tables, topic))
                continue;
            ok = cdc_array_reserve(offered, cap, n + 1, 16) == CDC_OK;
            if (ok)
                offered[n++] = topic;
        }
    }
    if (!ok || cdc_unconsumed_look(&c->unconsumed, offered, n, now) != CDC_OK) {
        free(offered);
        cdc_log_warn("job \"%s\": out of memory comparing the workers' offers with the job's "
                     "tables: looked again in %d s",
                     c->cfg.job, UNCONSUMED_CHECK_MS / 1000);
        return;
    }
    free(offered);
    for (size_t i = 0; i < c->unconsumed.n; i++) {
        cdc_unconsumed_topic_t *u = &c->unconsumed.t[i];
        cdc_buf_t lacking = {0};
        if (!cdc_unconsumed_late(&c->unconsumed, i, now, c->cfg.unconsumed_after_ms))
            continue;
        late++;
        if (u->reported)
            continue;
        u->reported = true;
        lacking_workers(c, u->topic, &lacking);
        cdc_log_error("table topic \"%s\" is not consumed: %d live worker(s) offer it (the "
                      "capture registered it), but it has stayed outside job \"%s\"'s table "
                      "set for %" PRId64 " s, so its changes wait in Kafka and reach no table. "
                      "Live workers that do not offer it: %s (hint: a worker with --tables or "
                      "--topics must name it, or run without them; or add it: cdcctl tables add)",
                      u->topic, u->offered, c->cfg.job, (now - u->since_ms) / 1000,
                      lacking.oom ? "?" : lacking.data);
        cdc_buf_free(&lacking);
    }
    cdc_metrics_gauge_set(c->m_unconsumed, (double)late);
}

void cdc_job_take_table_requests(cdc_coord_t *c)
{
    bool leading = c->state == CDC_JOB_RUNNING || c->state == CDC_JOB_RECOVERING;

    if (atomic_load(&c->table_requests_asked) == 0)
        return;
    pthread_mutex_lock(&c->tables_lock);
    for (int i = 0; i < CDC_TABLE_REQUESTS_MAX; i++) {
        cdc_table_request_t *r = &c->table_requests[i];
        cdc_error_t e;
        if (r->state != CDC_TABLE_REQUEST_ASKED)
            continue;
        cdc_error_clear(&e);
        if (!leading)
            r->rc = cdc_error_set(&e, CDC_ERR_UNAVAILABLE,
                                  "coordinator \"%s\" does not lead the job (%s)", c->cfg.id,
                                  cdc_job_state_name(c->state));
        else
            r->rc = cdc_job_add_table(c, r->topic, &r->added, &e);
        snprintf(r->msg, sizeof(r->msg), "%s", r->rc != CDC_OK ? e.msg : "");
        r->state = r->abandoned ? CDC_TABLE_REQUEST_FREE : CDC_TABLE_REQUEST_DONE;
        atomic_fetch_sub(&c->table_requests_asked, 1);
    }
    pthread_cond_broadcast(&c->tables_cond);
    pthread_mutex_unlock(&c->tables_lock);
}

/*
 * Judges member m against the job's table set: a worker that cannot consume a topic of the
 * set may own no partition, or a slot would miss a table the others carry. A refusal is
 * logged naming the worker and the tables, and counted, when it starts or names other
 * tables; it is kept for /status and the worker's Assign. A member that reported no topics,
 * or that follows the job's tables (it consumes whatever its Assign gives), is not judged.
 */
void cdc_job_judge(cdc_coord_t *c, cdc_member_t *m)
{
    char why[sizeof(m->refused)] = "";
    cdc_tableset_verdict_t v = CDC_TABLESET_FITS;

    if (m->topics_known && !m->follows)
        v = cdc_tableset_judge(&c->tables, &m->topics, why, sizeof(why));
    if (v != CDC_TABLESET_FITS && (v != m->verdict || strcmp(why, m->refused) != 0)) {
        cdc_log_error("worker \"%s\" gets no partitions of job \"%s\": %s (hint: give every "
                      "worker the job's tables in --tables or --topics, or neither; "
                      "docs/operations.md, \"Changing the tables\")",
                      m->id, c->cfg.job, why);
        cdc_metrics_counter_inc(c->m_table_refused[v]);
    } else if (v == CDC_TABLESET_FITS && m->verdict != CDC_TABLESET_FITS) {
        cdc_log_info("worker \"%s\" consumes the tables of job \"%s\" now: it may own partitions",
                     m->id, c->cfg.job);
    }
    m->verdict = v;
    snprintf(m->refused, sizeof(m->refused), "%s", why);
}

/* Writes the job's table set to etcd when it changed; retried later when etcd fails. A set
 * not recorded yet is not lost with the leader: the next one widens it again from its
 * workers and its newest checkpoint. */
void cdc_job_persist_tables(cdc_coord_t *c, int64_t now)
{
    cdc_error_t e;

    if (!c->tables_dirty || now < c->tables_retry_ms)
        return;
    if (cdc_store_put_tables(&c->store, &c->tables, &e) != CDC_OK) {
        cdc_metrics_counter_inc(c->m_etcd_errors);
        cdc_log_warn("could not record the tables of job \"%s\": %s", c->cfg.job, e.msg);
        c->tables_retry_ms = now + ETCD_RETRY_MS;
        return;
    }
    c->tables_dirty = false;
}
