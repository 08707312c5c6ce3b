/*
 * The committer's schema evolution (docs/iceberg.md, "Schema evolution"): a table's
 * Iceberg schema follows the newest source schema version and masking policy a
 * checkpoint carries, by field id and by name (added, renamed, widened, retired
 * columns), with the changes recorded for /status. Called by commit.c with the table's
 * lock held; it records changes under known_lock. It calls nothing else in coordinator/.
 */
#include "coordinator/commit_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/iceberg/schema.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"

/* Table property: the newest source schema version the table's schema follows. */
#define PROP_SOURCE_VERSION "cdc.source-schema-version"
/* Table property: the column masking policy of the table's schema ("<version>:<digest>",
 * SchemaUpdate.mask_policy; absent or "" = none). */
#define PROP_MASK_POLICY "cdc.mask-policy"

/* Field ids above this one, with names that start with '_', are the worker's metadata
 * columns (the changelog's `_op` ... from 100001, `_cdc_special` 100008: docs/worker.md),
 * never a source column's. */
#define METADATA_FIELD_IDS 100000

size_t cdc_committer_schema_changes(cdc_committer_t *c, cdc_schema_change_t *out, size_t max)
{
    size_t n, first;
    pthread_mutex_lock(&c->known_lock);
    n = c->nchanges < CDC_SCHEMA_CHANGES_KEPT ? c->nchanges : CDC_SCHEMA_CHANGES_KEPT;
    if (n > max)
        n = max;
    first = c->nchanges - n;
    for (size_t i = 0; i < n; i++)
        out[i] = c->changes[(first + i) % CDC_SCHEMA_CHANGES_KEPT];
    pthread_mutex_unlock(&c->known_lock);
    return n;
}

/* Appends "<sep><text>" to a summary, keeping it terminated when it is full. */
static void summary_add(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void summary_add(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    va_list ap;
    if (len + 3 >= size)
        return;
    if (len > 0) {
        memcpy(buf + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* True when a field named `was` is now `now` = "<was>__v<k>[...]": retired for a new
 * version of its column (common/cdcschema.h), not renamed by the source. */
static bool retired_name(const char *was, const char *now)
{
    size_t n = strlen(was);
    return strncmp(now, was, n) == 0 && strncmp(now + n, "__v", 3) == 0;
}

/* The field of `old` that had f's name and was retired for f (a type change Iceberg
 * cannot promote: the source name moved to the new field f), or NULL. */
static const cdc_ice_field_t *versioned_from(const cdc_ice_schema_t *old,
                                             const cdc_ice_schema_t *cur, const cdc_ice_field_t *f)
{
    int j = cdc_ice_schema_find_name(old, f->name);
    int r = j >= 0 && old->fields[j].id != f->id ? cdc_ice_schema_find(cur, old->fields[j].id) : -1;
    return r >= 0 && retired_name(f->name, cur->fields[r].name) ? &old->fields[j] : NULL;
}

/* Records (and logs) what changed from schema `old` to the table's current one. */
static void record_schema_change(cdc_committer_t *c, const char *table, int64_t version,
                                 const cdc_ice_schema_t *old, const cdc_ice_table_t *t)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
    cdc_schema_change_t ch;
    char a[48], b[48];

    memset(&ch, 0, sizeof(ch));
    snprintf(ch.table, sizeof(ch.table), "%s", table);
    ch.source_version = version;
    ch.schema_id = cdc_ice_table_metadata(t)->current_schema_id;
    ch.at_ms = cdc_clock_wall_ms();
    for (size_t i = 0; cur != NULL && i < cur->nfields; i++) {
        const cdc_ice_field_t *f = &cur->fields[i];
        int k = cdc_ice_schema_find(old, f->id);
        const char *v = strstr(f->name, "__v");
        const cdc_ice_field_t *was = versioned_from(old, cur, f);
        cdc_ice_type_string(f, b, sizeof(b));
        if (k < 0 && was != NULL) {
            /* the source name takes the new field, the old one is renamed (cdcschema.h) */
            int r = cdc_ice_schema_find(cur, was->id);
            ch.versioned = true;
            summary_add(ch.summary, sizeof(ch.summary),
                        "new version %s %s(%d): a type change Iceberg cannot promote, the "
                        "earlier values stay in %s(%d)",
                        f->name, b, (int)f->id, cur->fields[r].name, (int)was->id);
        } else if (k < 0 && v != NULL && v[3] >= '2' && v[3] <= '9') {
            /* named by a capture from before the source name held the current values */
            ch.versioned = true;
            summary_add(ch.summary, sizeof(ch.summary),
                        "new version %s %s(%d): a type change Iceberg cannot promote, the "
                        "earlier values stay in %.*s",
                        f->name, b, (int)f->id, (int)(v - f->name), f->name);
        } else if (k < 0) {
            summary_add(ch.summary, sizeof(ch.summary), "added %s %s(%d)", f->name, b, (int)f->id);
        } else {
            int took = cdc_ice_schema_find_name(cur, old->fields[k].name);
            /* (a field retired for a new version of its column is in that one's line) */
            bool moved = took >= 0 && cdc_ice_schema_find(old, cur->fields[took].id) < 0 &&
                         retired_name(old->fields[k].name, f->name);
            if (strcmp(old->fields[k].name, f->name) != 0 && !moved)
                summary_add(ch.summary, sizeof(ch.summary), "renamed %s -> %s(%d)",
                            old->fields[k].name, f->name, (int)f->id);
            cdc_ice_type_string(&old->fields[k], a, sizeof(a));
            if (strcmp(a, b) != 0)
                summary_add(ch.summary, sizeof(ch.summary), "promoted %s %s -> %s(%d)", f->name, a,
                            b, (int)f->id);
        }
    }
    for (size_t i = 0; old != NULL && i < old->nfields; i++)
        if (cur == NULL || cdc_ice_schema_find(cur, old->fields[i].id) < 0)
            summary_add(ch.summary, sizeof(ch.summary), "dropped %s(%d)", old->fields[i].name,
                        (int)old->fields[i].id);
    if (ch.summary[0] == '\0')
        return; /* only properties or requiredness */
    if (ch.versioned)
        cdc_log_warn("table \"%s\" follows source schema version %" PRId64 ": %s", table, version,
                     ch.summary);
    else
        cdc_log_info("table \"%s\" follows source schema version %" PRId64 ": %s", table, version,
                     ch.summary);
    pthread_mutex_lock(&c->known_lock);
    c->changes[c->nchanges++ % CDC_SCHEMA_CHANGES_KEPT] = ch;
    if (ch.versioned) {
        /* --partition-by/--sort-by name columns: a name that moved to a new field is
         * bound again at this commit (apply_layout) */
        cdc_table_layout_t *l = cdc_strmap_get(&c->layout_by_name, table);
        if (l != NULL)
            l->applied = false;
    }
    pthread_mutex_unlock(&c->known_lock);
}

/* The version of a masking policy "<version>:<digest>", -1 for none. */
static int64_t mask_policy_version(const char *policy)
{
    return policy != NULL && policy[0] != '\0' ? strtoll(policy, NULL, 10) : -1;
}

static const char *table_mask_policy(const cdc_ice_table_t *t)
{
    const char *v = cdc_ice_props_get(&cdc_ice_table_metadata(t)->properties, PROP_MASK_POLICY);
    return v != NULL ? v : "";
}

/* Whether files written under policy `want` change the table's (an explicit change of the
 * policy, docs/worker.md "Column masking"): another one, unless both are policies and
 * want's version is older (a worker not restarted yet with the new one). */
static bool mask_policy_replaces(const char *want, const char *has)
{
    return strcmp(want, has) != 0 && !(want[0] != '\0' && has[0] != '\0' &&
                                       mask_policy_version(want) < mask_policy_version(has));
}

/* Logs a change of a table's masking policy (the property was just written). */
static void log_mask_policy(const char *table, const char *was, const char *now, uint64_t epoch)
{
    if (now[0] == '\0')
        cdc_log_warn("table \"%s\": column masking turned off with checkpoint %" PRIu64
                     " (was policy %s): files from now on hold the columns as the source has them",
                     table, epoch, was);
    else if (was[0] != '\0' && mask_policy_version(now) == mask_policy_version(was))
        cdc_log_warn("table \"%s\": column masking policy %s replaces %s with checkpoint %" PRIu64
                     " without a new policy version (give each change its own \"version\"); "
                     "files written before keep the values they were written with",
                     table, now, was[0] ? was : "(none)", epoch);
    else
        cdc_log_info("table \"%s\": column masking policy %s replaces %s with checkpoint %" PRIu64
                     "; files written before keep the values they were written with",
                     table, now, was[0] ? was : "(none)", epoch);
}

/*
 * Adds field f to the table's current schema with f's own id (*changed: whether it
 * did). The worker gives a Debezium column its id by name (worker/catalog.c: the next
 * after the table's source columns, never one of the metadata ids); the table's
 * last-column-id counts the metadata columns (100001 and up), so an id the table chose
 * would not be the one in the files.
 */
static cdc_err_t add_field_with_id(cdc_ice_table_t *t, const cdc_ice_field_t *f, bool *changed,
                                   cdc_error_t *e)
{
    const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
    cdc_ice_schema_t want, one, src = {.fields = (cdc_ice_field_t *)f, .nfields = 1};
    cdc_err_t rc;

    if (cdc_ice_schema_copy(&want, cur) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (cdc_ice_schema_copy(&one, &src) != CDC_OK) {
        cdc_ice_schema_free(&want);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    if (cdc_array_resize(want.fields, want.nfields + 1) != CDC_OK) {
        cdc_ice_schema_free(&one);
        cdc_ice_schema_free(&want);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    want.fields[want.nfields++] = one.fields[0]; /* moved: one keeps only its array */
    one.nfields = 0;
    cdc_ice_schema_free(&one);
    rc = cdc_ice_table_set_schema(t, &want, NULL, changed, e);
    cdc_ice_schema_free(&want);
    return rc;
}

/*
 * Debezium schemas (no source version): adds the columns of `want` missing from the
 * table, by name, in field order. Their ids are the worker's, by name (worker/decode.h);
 * a column without one, or whose id the table already holds, gets the table's next id.
 */
static cdc_err_t evolve_by_name(cdc_ice_table_t *t, const cdc_ice_schema_t *want, int *changes,
                                cdc_error_t *e)
{
    for (int attempt = 0; attempt < COMMIT_ATTEMPTS; attempt++) {
        const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
        cdc_err_t rc = CDC_OK;
        bool conflict = false;

        for (size_t i = 0; cur != NULL && i < want->nfields; i++) {
            bool have = false;
            int32_t id = 0;
            cdc_ice_field_t f;
            for (size_t j = 0; j < cur->nfields; j++)
                if (strcmp(cur->fields[j].name, want->fields[i].name) == 0)
                    have = true;
            if (have)
                continue;
            f = want->fields[i];
            f.required = false;
            if (f.id > 0 && f.id < METADATA_FIELD_IDS && cdc_ice_schema_find(cur, f.id) < 0) {
                bool changed = false;
                id = f.id;
                rc = add_field_with_id(t, &f, &changed, e);
                if (rc == CDC_OK && !changed)
                    continue;
            } else {
                rc = cdc_ice_table_add_column(t, &f, &id, e);
            }
            if (rc == CDC_ERR_CONFLICT) {
                conflict = true;
                break;
            }
            if (rc == CDC_ERR_EXISTS)
                continue;
            if (rc != CDC_OK)
                return rc;
            (*changes)++;
            cdc_log_info("added column \"%s\" (field id %d) to table \"%s\"", f.name, id,
                         cdc_ice_table_get_location(t));
            cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
        }
        if (!conflict)
            return CDC_OK;
        if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
            return rc;
    }
    return cdc_error_set(e, CDC_ERR_CONFLICT, "schema change of table \"%s\" kept conflicting",
                         cdc_ice_table_get_location(t));
}

/* The table's source schema version (PROP_SOURCE_VERSION), 0 when none. */
static int64_t table_source_version(const cdc_ice_table_t *t)
{
    const char *v = cdc_ice_props_get(&cdc_ice_table_metadata(t)->properties, PROP_SOURCE_VERSION);
    return v != NULL ? strtoll(v, NULL, 10) : 0;
}

/*
 * The metadata columns the epoch's files of a table carry and the table's schema lacks
 * are added to it, with their ids, whatever the source version (`_cdc_special` appears
 * in an existing table's files when a worker that writes it first meets the table;
 * docs/worker.md, "Values no Iceberg type holds"). Existing rows read them as null.
 */
static cdc_err_t add_metadata_fields(cdc_ice_table_t *t, const cdc_checkpoint_t *rec,
                                     const char *table, int *changes, cdc_error_t *e)
{
    for (size_t i = 0; i < rec->nschemas; i++) {
        cdc_ice_schema_t fs;
        cdc_err_t rc;
        if (strcmp(rec->schemas[i].table, table) != 0)
            continue;
        if ((rc = cdc_ice_schema_from_json(rec->schemas[i].schema_json, &fs, e)) != CDC_OK)
            return rc;
        for (size_t f = 0; f < fs.nfields && rc == CDC_OK; f++) {
            const cdc_ice_field_t *field = &fs.fields[f];
            for (int attempt = 0;
                 field->id > METADATA_FIELD_IDS && field->name[0] == '_' && !field->required;
                 attempt++) {
                const cdc_ice_schema_t *cur =
                    cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
                cdc_ice_schema_t want;
                bool changed = false;
                if (cur == NULL || cdc_ice_schema_find(cur, field->id) >= 0)
                    break;
                if (attempt >= COMMIT_ATTEMPTS) {
                    rc = cdc_error_set(e, CDC_ERR_CONFLICT,
                                       "adding column \"%s\" to table \"%s\" kept conflicting",
                                       field->name, table);
                    break;
                }
                if (cdc_ice_schema_copy(&want, cur) != CDC_OK)
                    return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                if (cdc_array_resize(want.fields, want.nfields + 1) != CDC_OK) {
                    cdc_ice_schema_free(&want);
                    rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                    break;
                }
                /* (a metadata column is of a primitive type) */
                want.fields[want.nfields] = (cdc_ice_field_t){field->id,    strdup(field->name),
                                                              field->type,  field->precision,
                                                              field->scale, false,
                                                              NULL};
                if (want.fields[want.nfields++].name == NULL) {
                    cdc_ice_schema_free(&want);
                    rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
                    break;
                }
                rc = cdc_ice_table_set_schema(t, &want, NULL, &changed, e);
                cdc_ice_schema_free(&want);
                if (rc == CDC_ERR_CONFLICT) {
                    cdc_error_clear(e);
                    if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
                        break;
                    continue;
                }
                if (rc == CDC_OK && changed) {
                    (*changes)++;
                    cdc_log_info("table \"%s\": added metadata column \"%s\" (field id %d) with "
                                 "checkpoint %" PRIu64,
                                 table, field->name, (int)field->id, rec->epoch);
                }
                break;
            }
        }
        cdc_ice_schema_free(&fs);
        if (rc != CDC_OK)
            return rc;
    }
    return CDC_OK;
}

/*
 * Source schemas (field ids given by column identity, common/cdcschema.h): the schema
 * of a newer source version becomes the table's schema, by field id (renames, drops,
 * promotions, new fields); the field ids are never the table's to choose. Every
 * schema the epoch's files were written with must then read correctly in the table
 * (cdc_ice_table_check_schema): a mismatch stops this table's commit.
 */
cdc_err_t cdc_commit_evolve(cdc_committer_t *c, cdc_ice_table_t *t, const cdc_checkpoint_t *rec,
                            const char *table, const cdc_ice_schema_t *want, int64_t version,
                            const char *policy, int *changes, cdc_error_t *e)
{
    cdc_err_t rc = add_metadata_fields(t, rec, table, changes, e);

    if (rc != CDC_OK)
        return rc;
    if (version <= 0) {
        rc = evolve_by_name(t, want, changes, e);
        for (int attempt = 0; rc == CDC_OK && mask_policy_replaces(policy, table_mask_policy(t));
             attempt++) {
            cdc_ice_props_t props = {0};
            char *was = strdup(table_mask_policy(t));
            if (attempt >= COMMIT_ATTEMPTS || was == NULL ||
                cdc_ice_props_set(&props, PROP_MASK_POLICY, policy) != CDC_OK) {
                free(was);
                cdc_ice_props_free(&props);
                return cdc_error_set(e,
                                     attempt >= COMMIT_ATTEMPTS ? CDC_ERR_CONFLICT : CDC_ERR_NOMEM,
                                     "could not record the masking policy of table \"%s\"", table);
            }
            rc = cdc_ice_table_set_properties(t, &props, e);
            cdc_ice_props_free(&props);
            if (rc == CDC_OK)
                log_mask_policy(table, was, policy, rec->epoch);
            free(was);
            if (rc == CDC_ERR_CONFLICT) {
                cdc_error_clear(e);
                rc = cdc_ice_table_refresh(t, e);
            }
        }
        return rc;
    }
    /* a newer source version, or the same one under another masking policy (its schema
     * may lack a dropped column or have one the policy now names) */
    for (int attempt = 0;
         table_source_version(t) < version ||
         (table_source_version(t) == version && mask_policy_replaces(policy, table_mask_policy(t)));
         attempt++) {
        cdc_ice_props_t props = {0};
        char num[32];
        bool changed = false;
        char *was = strdup(table_mask_policy(t));
        if (attempt >= COMMIT_ATTEMPTS) {
            free(was);
            return cdc_error_set(e, CDC_ERR_CONFLICT,
                                 "schema change of table \"%s\" kept conflicting", table);
        }
        snprintf(num, sizeof(num), "%" PRId64, version);
        if (was == NULL || cdc_ice_props_set(&props, PROP_SOURCE_VERSION, num) != CDC_OK ||
            ((policy[0] != '\0' || was[0] != '\0') &&
             cdc_ice_props_set(&props, PROP_MASK_POLICY, policy) != CDC_OK)) {
            free(was);
            cdc_ice_props_free(&props);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        cdc_ice_schema_t old;
        const cdc_ice_schema_t *cur = cdc_ice_metadata_current_schema(cdc_ice_table_metadata(t));
        if (cur == NULL || cdc_ice_schema_copy(&old, cur) != CDC_OK) {
            cdc_ice_props_free(&props);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        rc = cdc_ice_table_set_schema(t, want, &props, &changed, e);
        cdc_ice_props_free(&props);
        if (rc == CDC_OK && strcmp(was, policy) != 0)
            log_mask_policy(table, was, policy, rec->epoch);
        free(was);
        if (rc == CDC_OK && changed)
            record_schema_change(c, table, version, &old, t);
        cdc_ice_schema_free(&old);
        if (rc == CDC_ERR_CONFLICT) {
            cdc_error_clear(e);
            if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
                return rc;
            continue;
        }
        if (rc != CDC_OK)
            return cdc_error_prefix(e, "schema version %" PRId64 " of table \"%s\"", version,
                                    table);
        if (changed)
            (*changes)++;
    }
    for (size_t i = 0; i < rec->nschemas; i++) {
        cdc_ice_schema_t fs;
        bool added = false;
        if (strcmp(rec->schemas[i].table, table) != 0)
            continue;
        if ((rc = cdc_ice_schema_from_json(rec->schemas[i].schema_json, &fs, e)) != CDC_OK)
            return rc;
        rc = cdc_ice_table_check_schema(t, &fs, e);
        if (rc == CDC_ERR_INVALID && rec->schemas[i].version > 0 &&
            rec->schemas[i].version < table_source_version(t)) {
            /* An older version the table skipped (a column added and dropped between two
             * versions it took): its schema joins the history, so the files' fields are
             * the table's (readable through that schema), then they must read. */
            cdc_error_clear(e);
            for (int attempt = 0; attempt < COMMIT_ATTEMPTS; attempt++) {
                rc = cdc_ice_table_add_past_schema(t, &fs, &added, e);
                if (rc != CDC_ERR_CONFLICT)
                    break;
                cdc_error_clear(e);
                if ((rc = cdc_ice_table_refresh(t, e)) != CDC_OK)
                    break;
            }
            if (rc == CDC_OK && added)
                cdc_log_info("table \"%s\": schema of source version %" PRId64
                             " added to its history (files of checkpoint %" PRIu64
                             " were written with it)",
                             table, rec->schemas[i].version, rec->epoch);
            if (rc == CDC_OK)
                rc = cdc_ice_table_check_schema(t, &fs, e);
        }
        cdc_ice_schema_free(&fs);
        if (rc != CDC_OK)
            return cdc_error_prefix(
                e, "files of checkpoint %" PRIu64 " (source schema version %" PRId64 ")",
                rec->epoch, rec->schemas[i].version);
    }
    return CDC_OK;
}

/* The schema update of the newest source version the record carries for a table, of
 * the newest masking policy among those (workers restarting with a new policy), the last
 * one among equals; parsed, with its policy (borrowed from rec); *found false when none. */
cdc_err_t cdc_commit_schema_for(const cdc_checkpoint_t *rec, const char *table,
                                cdc_ice_schema_t *out, int64_t *version, const char **policy,
                                bool *found, cdc_error_t *e)
{
    size_t best = 0;
    *found = false;
    *version = 0;
    *policy = "";
    for (size_t i = 0; i < rec->nschemas; i++) {
        const cdc_schema_update_t *u = &rec->schemas[i];
        if (strcmp(u->table, table) != 0)
            continue;
        if (!*found || u->version > *version ||
            (u->version == *version &&
             mask_policy_version(u->mask_policy) >= mask_policy_version(*policy))) {
            best = i;
            *version = u->version;
            *policy = u->mask_policy != NULL ? u->mask_policy : "";
        }
        *found = true;
    }
    if (*found && cdc_ice_schema_from_json(rec->schemas[best].schema_json, out, e) != CDC_OK)
        return cdc_error_prefix(e, "schema update for table \"%s\" in checkpoint %" PRIu64, table,
                                rec->epoch);
    return CDC_OK;
}
