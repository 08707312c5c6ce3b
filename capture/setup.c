/*
 * The setup checks of a session (cdc_source_check_setup, see source.h): the server's
 * settings and limits, the role's REPLICATION privilege, each table on its own (exists,
 * readable, keyed, not a partition of a captured table), and the publication with its
 * members and publish_via_partition_root, created or completed with
 * --create-publication. A problem of one table leaves it out (docs/capture.md, "Table
 * errors"); a problem of the whole capture fails with the statement that fixes it.
 */
#include "capture/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/event.h"
#include "common/log.h"

static cdc_err_t show_int(cdc_pg_t *c, const char *name, long *out, cdc_error_t *e)
{
    char sql[128];
    int64_t v = 0;
    cdc_err_t rc;
    snprintf(sql, sizeof(sql), "SHOW %s", name);
    rc = cdc_pg_query_int(c, sql, 0, NULL, &v, e);
    *out = (long)v;
    return rc;
}

/* What the catalog says about one candidate table (see check_table). */
typedef struct table_info {
    uint32_t oid;
    bool partitioned;   /* relkind 'p': captured as one table through its root */
    bool partition;     /* relispartition: a partition of another table */
    bool usable;        /* passed every check so far */
    bool needs_viaroot; /* published partitioned table: needs publish_via_partition_root */
} table_info_t;

/*
 * Checks one table: exists, readable, has a key. A problem of this table alone is
 * CDC_ERR_CONFIG (the caller leaves the table out and captures the others); anything
 * else (a failed query) is an error of the whole session.
 */
static cdc_err_t check_table(cdc_pg_t *c, const cdc_source_table_t *t, table_info_t *info,
                             cdc_error_t *e)
{
    const char *params[2] = {t->schema, t->name};
    cdc_pg_result_t *r;
    cdc_err_t rc = CDC_OK;

    memset(info, 0, sizeof(*info));
    r = cdc_pg_query(
        c,
        "SELECT c.relreplident, "
        "  EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), "
        "  has_table_privilege(c.oid, 'SELECT'), c.relkind, c.oid, c.relispartition "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = $2",
        2, params, e);
    if (r == NULL)
        return e->code;
    if (cdc_pg_ntuples(r) == 0) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "table \"%s.%s\" does not exist (hint: create it, or remove it "
                           "from --tables)",
                           t->schema, t->name);
        goto cleanup;
    }
    info->oid = (uint32_t)strtoul(cdc_pg_value(r, 0, 4), NULL, 10);
    info->partitioned = cdc_pg_value(r, 0, 3)[0] == 'p';
    info->partition = cdc_pg_is_true(r, 0, 5);
    if (!cdc_pg_is_true(r, 0, 2)) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "permission denied for table \"%s.%s\" (hint: GRANT SELECT ON "
                           "\"%s\".\"%s\" TO <capture role>;)",
                           t->schema, t->name, t->schema, t->name);
        goto cleanup;
    }
    {
        char ident = cdc_pg_value(r, 0, 0)[0];
        bool pk = cdc_pg_is_true(r, 0, 1);
        if (ident == 'n' || (ident == 'd' && !pk)) {
            rc = cdc_error_set(e, CDC_ERR_CONFIG,
                               "table \"%s.%s\" has no primary key and no usable replica "
                               "identity, so its rows have no key (hint: add a primary key, "
                               "or ALTER TABLE \"%s\".\"%s\" REPLICA IDENTITY FULL; to key "
                               "events by all columns)",
                               t->schema, t->name, t->schema, t->name);
            goto cleanup;
        }
    }
    info->usable = true;
cleanup:
    cdc_pg_clear(r);
    return rc;
}

/* Per-table errors of one setup check: reported, and the first one kept. */
typedef struct table_errors {
    const cdc_source_setup_t *setup;
    cdc_error_t first;
    size_t n;
} table_errors_t;

static void table_error(table_errors_t *te, const cdc_source_table_t *t, table_info_t *info,
                        const cdc_error_t *err)
{
    info->usable = false;
    if (te->n++ == 0)
        te->first = *err;
    if (te->setup->table_error)
        te->setup->table_error(te->setup->table_error_arg, t->schema, t->name, err);
    else
        cdc_log_error("%s", err->msg);
}

/*
 * The publication's tables, as the capture captures them: a partition is replaced by
 * the top-most of its ancestors that the publication publishes (the relation pgoutput
 * sends its changes under with publish_via_partition_root), so a partitioned table
 * published without that option still counts once, as its root.
 */
static cdc_pg_result_t *publication_tables(cdc_pg_t *c, const char *publication, cdc_error_t *e)
{
    const char *p[1] = {publication};
    return cdc_pg_query(
        c,
        "SELECT DISTINCT coalesce(tn.nspname, pt.schemaname), coalesce(tc.relname, pt.tablename), "
        "  coalesce((SELECT pr.oid FROM pg_publication_rel pr WHERE pr.prpubid = p.oid "
        "            AND pr.prrelid = coalesce(tc.oid, c.oid)), 0) "
        "FROM pg_publication_tables pt "
        "JOIN pg_publication p ON p.pubname = pt.pubname "
        "JOIN pg_namespace n ON n.nspname = pt.schemaname "
        "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
        "LEFT JOIN LATERAL (SELECT a.relid FROM pg_partition_ancestors(c.oid) WITH ORDINALITY "
        "    AS a(relid, ord) JOIN pg_class ac ON ac.oid = a.relid "
        "  WHERE c.relispartition AND a.relid <> c.oid AND (p.puballtables "
        "    OR EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prpubid = p.oid "
        "               AND pr.prrelid = a.relid) "
        "    OR EXISTS (SELECT 1 FROM pg_publication_namespace pn WHERE pn.pnpubid = p.oid "
        "               AND pn.pnnspid = ac.relnamespace)) "
        "  ORDER BY a.ord DESC LIMIT 1) top ON true "
        "LEFT JOIN pg_class tc ON tc.oid = top.relid "
        "LEFT JOIN pg_namespace tn ON tn.oid = tc.relnamespace "
        "WHERE pt.pubname = $1 ORDER BY 1, 2",
        1, p, e);
}

cdc_err_t cdc_source_publication_tables(cdc_source_t *src, const char *publication,
                                        cdc_source_table_t **out, size_t *nout, cdc_error_t *e)
{
    cdc_pg_result_t *r = publication_tables(src->sql, publication, e);
    size_t n;

    *out = NULL;
    *nout = 0;
    if (r == NULL)
        return e->code;
    n = (size_t)cdc_pg_ntuples(r);
    *out = calloc(n ? n : 1, sizeof(**out));
    if (*out == NULL) {
        cdc_pg_clear(r);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        (*out)[i].schema = strdup(cdc_pg_value(r, (int)i, 0));
        (*out)[i].name = strdup(cdc_pg_value(r, (int)i, 1));
        (*out)[i].membership = (uint32_t)strtoul(cdc_pg_value(r, (int)i, 2), NULL, 10);
        *nout = i + 1;
        if ((*out)[i].schema == NULL || (*out)[i].name == NULL) {
            cdc_pg_clear(r);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
    }
    cdc_pg_clear(r);
    return CDC_OK;
}

/*
 * A partition whose ancestor is captured too is left out: its rows are the ancestor's
 * (the snapshot reads them through it, the stream sends them under it). Returns the
 * ancestor's index or -1.
 */
static cdc_err_t captured_ancestor(cdc_pg_t *c, const table_info_t *info, size_t n, uint32_t oid,
                                   long *found, cdc_error_t *e)
{
    char o[16];
    const char *p[1] = {o};
    cdc_pg_result_t *r;

    *found = -1;
    snprintf(o, sizeof(o), "%u", oid);
    r = cdc_pg_query(
        c, "SELECT a.relid FROM pg_partition_ancestors($1::oid) a WHERE a.relid <> $1::oid", 1, p,
        e);
    if (r == NULL)
        return e->code;
    for (int row = 0; row < cdc_pg_ntuples(r) && *found < 0; row++) {
        uint32_t anc = (uint32_t)strtoul(cdc_pg_value(r, row, 0), NULL, 10);
        for (size_t i = 0; i < n; i++)
            if (info[i].usable && info[i].oid == anc) {
                *found = (long)i;
                break;
            }
    }
    cdc_pg_clear(r);
    return CDC_OK;
}

/*
 * Membership of one table in the publication (see cdc_source_check_setup): *direct = the
 * publication names it (ADD TABLE would say "already member"); *published = it names it,
 * its schema or all tables; *member = published, or pgoutput sends its rows (itself or,
 * for a partitioned table, its partitions are in pg_publication_tables).
 */
static cdc_err_t membership(cdc_pg_t *c, const char *publication, uint32_t oid, bool *direct,
                            bool *published, bool *member, cdc_error_t *e)
{
    char o[16];
    const char *p[2] = {publication, o};
    cdc_pg_result_t *r;

    snprintf(o, sizeof(o), "%u", oid);
    r = cdc_pg_query(c,
                     "SELECT EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prpubid = p.oid "
                     "         AND pr.prrelid = $2::oid), "
                     "  p.puballtables OR EXISTS (SELECT 1 FROM pg_publication_namespace pn "
                     "    JOIN pg_class c ON c.relnamespace = pn.pnnspid "
                     "    WHERE pn.pnpubid = p.oid AND c.oid = $2::oid), "
                     "  EXISTS (SELECT 1 FROM pg_publication_tables pt "
                     "    JOIN pg_namespace n ON n.nspname = pt.schemaname "
                     "    JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
                     "    WHERE pt.pubname = p.pubname AND (c.oid = $2::oid OR c.oid IN "
                     "      (SELECT tr.relid FROM pg_partition_tree($2::oid) tr WHERE tr.isleaf))) "
                     "FROM pg_publication p WHERE p.pubname = $1",
                     2, p, e);
    if (r == NULL)
        return e->code;
    *direct = cdc_pg_ntuples(r) == 1 && cdc_pg_is_true(r, 0, 0);
    *published = *direct || (cdc_pg_ntuples(r) == 1 && cdc_pg_is_true(r, 0, 1));
    *member = *published || (cdc_pg_ntuples(r) == 1 && cdc_pg_is_true(r, 0, 2));
    cdc_pg_clear(r);
    return CDC_OK;
}

/* The publication (exists, FOR ALL TABLES, publish_via_partition_root). */
static cdc_err_t publication_info(cdc_pg_t *c, const char *publication, bool *exists, bool *viaroot,
                                  cdc_error_t *e)
{
    const char *p[1] = {publication};
    cdc_pg_result_t *r =
        cdc_pg_query(c, "SELECT pubviaroot FROM pg_publication WHERE pubname = $1", 1, p, e);
    if (r == NULL)
        return e->code;
    *exists = cdc_pg_ntuples(r) == 1;
    *viaroot = *exists && cdc_pg_is_true(r, 0, 0);
    cdc_pg_clear(r);
    return CDC_OK;
}

cdc_err_t cdc_source_check_setup(cdc_source_t *src, const cdc_source_setup_t *setup,
                                 cdc_source_table_t **out, size_t *nout, cdc_error_t *e)
{
    cdc_pg_t *c = src->sql;
    cdc_pg_result_t *r = NULL;
    cdc_source_table_t *tables = NULL;
    table_info_t *info = NULL;
    table_errors_t te = {.setup = setup};
    size_t ntables = 0, nusable = 0, npartitioned = 0;
    long slots, senders;
    bool pub_exists = false, viaroot = false;
    cdc_err_t rc;
    const char *slotparam[1] = {setup->slot};
    char *pub = NULL;

    *out = NULL;
    *nout = 0;
    /* wal_level */
    r = cdc_pg_query(c, "SHOW wal_level", 0, NULL, e);
    if (r == NULL)
        return e->code;
    if (strcmp(cdc_pg_value(r, 0, 0), "logical") != 0) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "logical decoding requires wal_level \"logical\", the server has "
                           "\"%s\" (hint: ALTER SYSTEM SET wal_level = logical; then restart "
                           "PostgreSQL)",
                           cdc_pg_value(r, 0, 0));
        cdc_pg_clear(r);
        return rc;
    }
    cdc_pg_clear(r);
    /* slot and sender limits */
    if ((rc = show_int(c, "max_replication_slots", &slots, e)) != CDC_OK ||
        (rc = show_int(c, "max_wal_senders", &senders, e)) != CDC_OK)
        return rc;
    if (slots < 1 || senders < 1)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "max_replication_slots is %ld and max_wal_senders is %ld, both "
                             "must be at least 1 (hint: ALTER SYSTEM SET max_replication_slots "
                             "= 10; ALTER SYSTEM SET max_wal_senders = 10; then restart "
                             "PostgreSQL)",
                             slots, senders);
    r = cdc_pg_query(
        c, "SELECT count(*), count(*) FILTER (WHERE slot_name = $1) FROM pg_replication_slots", 1,
        slotparam, e);
    if (r == NULL)
        return e->code;
    if (atol(cdc_pg_value(r, 0, 1)) == 0 && atol(cdc_pg_value(r, 0, 0)) >= slots) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "all %ld replication slots are in use, cannot create slot \"%s\" "
                           "(hint: drop an unused slot with SELECT pg_drop_replication_slot("
                           "'<name>'); or raise max_replication_slots and restart)",
                           slots, setup->slot);
        cdc_pg_clear(r);
        return rc;
    }
    cdc_pg_clear(r);
    /* REPLICATION privilege */
    r = cdc_pg_query(c,
                     "SELECT rolreplication OR rolsuper, current_user FROM pg_roles "
                     "WHERE rolname = current_user",
                     0, NULL, e);
    if (r == NULL)
        return e->code;
    if (cdc_pg_ntuples(r) != 1 || !cdc_pg_is_true(r, 0, 0)) {
        rc = cdc_error_set(e, CDC_ERR_CONFIG,
                           "role \"%s\" lacks the REPLICATION attribute needed for logical "
                           "replication (hint: ALTER ROLE \"%s\" WITH REPLICATION;)",
                           cdc_pg_ntuples(r) ? cdc_pg_value(r, 0, 1) : "?",
                           cdc_pg_ntuples(r) ? cdc_pg_value(r, 0, 1) : "?");
        cdc_pg_clear(r);
        return rc;
    }
    cdc_pg_clear(r);
    r = NULL;
    /* the publication: without --tables its tables are the capture set */
    if ((rc = publication_info(c, setup->publication, &pub_exists, &viaroot, e)) != CDC_OK)
        return rc;
    if (!pub_exists && (!setup->create_publication || setup->ntables == 0))
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "publication \"%s\" does not exist (hint: CREATE PUBLICATION \"%s\" "
                             "FOR TABLE <tables> WITH (publish_via_partition_root = true); or "
                             "run with --create-publication and --tables)",
                             setup->publication, setup->publication);
    pub = cdc_pg_ident(c, setup->publication);
    if (pub == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (setup->ntables > 0) {
        ntables = setup->ntables;
        tables = calloc(ntables, sizeof(*tables));
        if (tables == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < ntables; i++) {
            tables[i].schema = strdup(setup->tables[i].schema);
            tables[i].name = strdup(setup->tables[i].name);
        }
    } else {
        r = publication_tables(c, setup->publication, e);
        if (r == NULL) {
            rc = e->code;
            goto done;
        }
        tables = calloc(cdc_pg_ntuples(r) ? (size_t)cdc_pg_ntuples(r) : 1, sizeof(*tables));
        if (tables == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < cdc_pg_ntuples(r); i++) {
            const char *s = cdc_pg_value(r, i, 0), *t = cdc_pg_value(r, i, 1);
            if (setup->filter != NULL && !cdc_table_filter_match(setup->filter, s, t)) {
                cdc_log_info("table %s.%s of publication \"%s\" is left out by "
                             "--table-include/--table-exclude",
                             s, t, setup->publication);
                continue;
            }
            tables[ntables].schema = strdup(s);
            tables[ntables].name = strdup(t);
            ntables++;
        }
        cdc_pg_clear(r);
        r = NULL;
    }
    info = calloc(ntables ? ntables : 1, sizeof(*info));
    if (info == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ntables; i++) {
        if (tables[i].schema == NULL || tables[i].name == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    /* each table on its own: a problem of one table leaves it out, the others go on */
    for (size_t i = 0; i < ntables; i++) {
        cdc_error_t te_err;
        rc = check_table(c, &tables[i], &info[i], &te_err);
        if (rc == CDC_ERR_CONFIG)
            table_error(&te, &tables[i], &info[i], &te_err);
        else if (rc != CDC_OK) {
            *e = te_err;
            goto done;
        }
    }
    for (size_t i = 0; i < ntables; i++) {
        long anc;
        if (!info[i].usable || !info[i].partition)
            continue;
        rc = captured_ancestor(c, info, ntables, info[i].oid, &anc, e);
        if (rc != CDC_OK)
            goto done;
        if (anc >= 0) {
            cdc_log_warn("table %s.%s is a partition of %s.%s, which is captured too: its rows "
                         "are captured as %s.%s's, not as a table of their own",
                         tables[i].schema, tables[i].name, tables[anc].schema, tables[anc].name,
                         tables[anc].schema, tables[anc].name);
            info[i].usable = false;
            info[i].oid = 0;
        }
    }
    for (size_t i = 0; i < ntables; i++)
        nusable += info[i].usable;
    if (nusable == 0 && te.n > 0) {
        /* nothing left to capture: the whole capture is misconfigured */
        *e = te.first;
        rc = e->code;
        goto done;
    }
    if (!pub_exists) {
        cdc_buf_t sql = {0};
        size_t k = 0;
        /* through the root: a partitioned table's changes arrive as the table's own */
        cdc_buf_printf(&sql, "CREATE PUBLICATION %s FOR TABLE ", pub);
        for (size_t i = 0; i < ntables; i++) {
            char *q;
            if (!info[i].usable)
                continue;
            q = cdc_pg_qualified(c, tables[i].schema, tables[i].name);
            cdc_buf_printf(&sql, "%s%s", k++ ? ", " : "", q ? q : "?");
            free(q);
        }
        cdc_buf_printf(&sql, " WITH (publish_via_partition_root = true)");
        r = cdc_pg_query(c, sql.data, 0, NULL, e);
        if (r == NULL) {
            bool now_exists = false, via;
            cdc_error_t e2;
            /* another capture created it first (two started together): next session */
            if (publication_info(c, setup->publication, &now_exists, &via, &e2) == CDC_OK &&
                now_exists) {
                cdc_buf_free(&sql);
                rc = cdc_error_set_retriable(e, CDC_ERR_CONFLICT, true,
                                             "publication \"%s\" was created meanwhile",
                                             setup->publication);
                goto done;
            }
            cdc_error_prefix(e,
                             "could not create publication \"%s\" (hint: the role must "
                             "own the tables, or an administrator runs: %s)",
                             setup->publication, sql.data);
            e->code = CDC_ERR_CONFIG;
            e->retriable = false;
            cdc_buf_free(&sql);
            rc = CDC_ERR_CONFIG;
            goto done;
        }
        cdc_pg_clear(r);
        r = NULL;
        cdc_log_info("created publication %s", setup->publication);
        cdc_buf_free(&sql);
        viaroot = true;
    }
    /*
     * Membership: a table is a member when the publication names it (or its schema, or
     * all tables), and a partitioned table also when its partitions are published. ADD
     * TABLE only for a table that is not a member; "already member" is no error.
     */
    for (size_t i = 0; i < ntables; i++) {
        bool direct = false, published = false, member = false;
        char *q;
        char sql[600];
        cdc_error_t add_err;
        if (!info[i].usable)
            continue;
        rc = membership(c, setup->publication, info[i].oid, &direct, &published, &member, e);
        if (rc != CDC_OK)
            goto done;
        /* only a published partitioned table depends on publish_via_partition_root: one
         * published through its partitions alone arrives as they do (mapped to it) */
        info[i].needs_viaroot = info[i].partitioned && published;
        if (member)
            continue;
        info[i].needs_viaroot = info[i].partitioned;
        q = cdc_pg_qualified(c, tables[i].schema, tables[i].name);
        snprintf(sql, sizeof(sql), "ALTER PUBLICATION %s ADD TABLE %s", pub, q ? q : "?");
        free(q);
        if (!setup->create_publication) {
            cdc_error_set(&add_err, CDC_ERR_CONFIG,
                          "table \"%s.%s\" is not in publication \"%s\" (hint: %s;)",
                          tables[i].schema, tables[i].name, setup->publication, sql);
            table_error(&te, &tables[i], &info[i], &add_err);
            continue;
        }
        r = cdc_pg_query(c, sql, 0, NULL, &add_err);
        if (r == NULL) {
            if (strstr(add_err.msg, "already member of publication") != NULL) {
                cdc_log_info("table %s.%s is already a member of publication %s", tables[i].schema,
                             tables[i].name, setup->publication);
                continue;
            }
            if (add_err.code == CDC_ERR_UNAVAILABLE) {
                *e = add_err;
                rc = e->code;
                goto done;
            }
            cdc_error_prefix(&add_err,
                             "could not add \"%s.%s\" to publication \"%s\" (hint: the role "
                             "must own the table, or an administrator runs: %s;)",
                             tables[i].schema, tables[i].name, setup->publication, sql);
            add_err.code = CDC_ERR_CONFIG;
            add_err.retriable = false;
            table_error(&te, &tables[i], &info[i], &add_err);
            continue;
        }
        cdc_pg_clear(r);
        r = NULL;
        cdc_log_info("added %s.%s to publication %s", tables[i].schema, tables[i].name,
                     setup->publication);
    }
    /*
     * A partitioned table needs publish_via_partition_root: without it pgoutput sends
     * its changes under each partition's name and relation id. With
     * --create-publication the capture manages the publication and sets the option;
     * otherwise each partitioned table fails with the statement that fixes it.
     */
    for (size_t i = 0; i < ntables; i++)
        npartitioned += info[i].usable && info[i].needs_viaroot;
    if (npartitioned > 0 && !viaroot) {
        char sql[300];
        cdc_error_t set_err;
        bool set = false;
        snprintf(sql, sizeof(sql), "ALTER PUBLICATION %s SET (publish_via_partition_root = true)",
                 pub);
        if (setup->create_publication) {
            r = cdc_pg_query(c, sql, 0, NULL, &set_err);
            if (r != NULL) {
                cdc_pg_clear(r);
                r = NULL;
                set = true;
                cdc_log_warn("publication %s did not set publish_via_partition_root, which "
                             "partitioned tables need: set it (%s)",
                             setup->publication, sql);
            } else if (set_err.code == CDC_ERR_UNAVAILABLE) {
                *e = set_err;
                rc = e->code;
                goto done;
            }
        }
        for (size_t i = 0; !set && i < ntables; i++) {
            cdc_error_t pe;
            if (!info[i].usable || !info[i].needs_viaroot)
                continue;
            if (setup->create_publication)
                cdc_error_set(&pe, CDC_ERR_CONFIG,
                              "table \"%s.%s\" is partitioned and publication \"%s\" does not "
                              "set publish_via_partition_root, which could not be set: %s "
                              "(hint: an administrator runs: %s;)",
                              tables[i].schema, tables[i].name, setup->publication, set_err.msg,
                              sql);
            else
                cdc_error_set(&pe, CDC_ERR_CONFIG,
                              "table \"%s.%s\" is partitioned and publication \"%s\" does not "
                              "set publish_via_partition_root, so its changes would arrive "
                              "under its partitions' names (hint: %s; or run with "
                              "--create-publication)",
                              tables[i].schema, tables[i].name, setup->publication, sql);
            table_error(&te, &tables[i], &info[i], &pe);
        }
    }
    nusable = 0;
    for (size_t i = 0; i < ntables; i++)
        nusable += info[i].usable;
    if (nusable == 0 && te.n > 0) {
        *e = te.first;
        rc = e->code;
        goto done;
    }
    /* the capture set: the usable tables, in their order */
    {
        size_t k = 0;
        for (size_t i = 0; i < ntables; i++) {
            if (info[i].usable) {
                tables[k++] = tables[i];
            } else {
                free(tables[i].schema);
                free(tables[i].name);
            }
        }
        *out = tables;
        *nout = k;
        tables = NULL;
        ntables = 0;
    }
    rc = CDC_OK;
done:
    cdc_pg_clear(r);
    free(pub);
    free(info);
    cdc_source_tables_free(tables, ntables);
    return rc;
}

cdc_err_t cdc_source_publication_alter(cdc_source_t *src, const char *publication, bool add,
                                       const char *schema, const char *name, bool *changed,
                                       cdc_error_t *e)
{
    char *pub = cdc_pg_ident(src->sql, publication),
         *rel = cdc_pg_qualified(src->sql, schema, name);
    cdc_buf_t sql = {0};
    cdc_pg_result_t *r;
    const char *state;
    cdc_err_t rc = CDC_OK;

    *changed = false;
    if (pub == NULL || rel == NULL) {
        free(pub);
        free(rel);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    cdc_buf_printf(&sql, "ALTER PUBLICATION %s %s TABLE %s", pub, add ? "ADD" : "DROP", rel);
    r = cdc_pg_exec(src->sql, sql.data);
    state = cdc_pg_sqlstate(r);
    if (cdc_pg_status(r) == CDC_PG_COMMAND)
        *changed = true;
    else if (state != NULL && strcmp(state, add ? "42710" : "42704") == 0 &&
             cdc_pg_connected(src->sql))
        ; /* already a member, or not one: nothing to do */
    else
        rc = cdc_pg_error(src->sql, r, CDC_ERR_CONFIG, e, "%s", sql.data);
    cdc_pg_clear(r);
    cdc_buf_free(&sql);
    free(pub);
    free(rel);
    return rc;
}
