/*
 * The job's table set as the leader applies it (docs/protocol.md, "The job's table set"):
 * which live workers may own partition slots. The set itself (coordinator/tableset.c) is
 * read from etcd at leader start with the newest checkpoint's topics added (job.c), widened
 * at every assignment by what every live worker consumes, and written back to etcd by the
 * loop; a worker whose topics are not the set is refused (logged, counted, in /status and
 * in its empty Assign) and owns nothing, so no slot ever misses a table the others carry.
 * Main thread only, like the rest of the job.
 */
#include "coordinator/job_int.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"

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

/* Widens the job's table set by every topic each live worker that reports its topics
 * consumes; it never narrows. */
void cdc_job_widen_tables(cdc_coord_t *c)
{
    const cdc_tableset_t *sets[CDC_MEMBERS_MAX];
    char added[1024];
    int n = 0;

    for (int i = 0; i < c->members.n; i++)
        if (c->members.m[i].alive && c->members.m[i].topics_known)
            sets[n++] = &c->members.m[i].topics;
    if (cdc_tableset_widen(&c->tables, sets, n, added, sizeof(added)) == 0)
        return;
    cdc_log_info("job \"%s\" now carries %s: every live worker consumes each", c->cfg.job, added);
    c->tables_dirty = true;
}

/*
 * Judges member m against the job's table set: a worker whose topics are not the set may own
 * no partition, or a slot would miss a table (or carry one the others do not). A refusal is
 * logged naming the worker and the tables, and counted, when it starts or names other
 * tables; it is kept for /status and the worker's Assign. A member that reported no topics
 * is not judged.
 */
void cdc_job_judge(cdc_coord_t *c, cdc_member_t *m)
{
    char why[sizeof(m->refused)] = "";
    cdc_tableset_verdict_t v = CDC_TABLESET_FITS;

    if (m->topics_known)
        v = cdc_tableset_judge(&c->tables, &m->topics, why, sizeof(why));
    if (v != CDC_TABLESET_FITS && (v != m->verdict || strcmp(why, m->refused) != 0)) {
        cdc_log_error("worker \"%s\" gets no partitions of job \"%s\": %s (hint: give every "
                      "worker the same --tables or --topics; docs/operations.md, \"Changing the "
                      "tables\")",
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
