/*
 * Partitions whose changes arrive under their own relation (docs/capture.md,
 * "Partitioned tables"): a publication without publish_via_partition_root sends a
 * partition's Relation and changes under the partition's name. Such a partition of a
 * captured table is mapped to its root: the root's Relation is built from the
 * partition's columns, and each change is produced as the root's.
 *
 * Below changes.c (docs/development.md, "Call circles"): changes.c hands it a
 * partition's Relation, changes and truncates; it maps them to the partition's root and
 * gives the root's message back, which changes.c produces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/stream_int.h"
#include "common/buf.h"
#include "common/log.h"

cdc_capture_leaf_t *cdc_capture_leaf_by_relid(cdc_capture_t *cap, uint32_t relid)
{
    for (size_t i = 0; i < cap->leafmap.nleaves; i++)
        if (cap->leafmap.leaves[i].relid == relid)
            return &cap->leafmap.leaves[i];
    return NULL;
}

void cdc_capture_leaves_free(cdc_capture_t *cap)
{
    for (size_t i = 0; i < cap->leafmap.nleaves; i++) {
        free(cap->leafmap.leaves[i].name);
        free(cap->leafmap.leaves[i].root_name);
        free(cap->leafmap.leaves[i].map);
    }
    free(cap->leafmap.leaves);
    cap->leafmap.leaves = NULL;
    cap->leafmap.nleaves = 0;
    free(cap->leafmap.vals);
    cap->leafmap.vals = NULL;
    cap->leafmap.vals_cap = 0;
    free(cap->leafmap.rels);
    cap->leafmap.rels = NULL;
    cap->leafmap.rels_cap = 0;
}

bool cdc_capture_leaves_any(const cdc_capture_t *cap)
{
    return cap->leafmap.nleaves > 0;
}

/*
 * A Relation message for a relation that is not a captured table: when it is a
 * partition of a captured table (pgoutput sends a partition under its own name when
 * the publication does not publish through the root), its changes are mapped to the
 * root: the root's Relation is built from the partition's columns in the root's column
 * order and handled as if the root had sent it, and the partition's relid is mapped.
 * *handled = false: not such a partition (the caller goes on as for any relation).
 */
cdc_err_t cdc_capture_on_partition_relation(cdc_capture_t *cap, const cdc_pgo_msg_t *m,
                                            bool *handled, cdc_error_t *e)
{
    const char *nsp = m->u.relation.nspname, *rel = m->u.relation.relname;
    cdc_capture_table_t *t = cdc_capture_table_by_name(cap, nsp, rel), *root;
    cdc_capture_leaf_t *leaf;
    cdc_pgo_column_t *cols = NULL;
    cdc_pgo_msg_t synth;
    char *rs = NULL, *rn = NULL, **rcols = NULL;
    size_t nrcols = 0, k = 0;
    uint32_t root_oid = 0;
    int *map = NULL;
    bool key = false;
    cdc_err_t rc;

    *handled = false;
    if ((t != NULL && (t->captured || t->failed)) || cdc_capture_is_wanted(cap, nsp, rel))
        return CDC_OK;
    rc = cdc_source_partition_root(&cap->src, m->u.relation.relid, &root_oid, &rs, &rn, &rcols,
                                   &nrcols, e);
    if (rc != CDC_OK)
        return rc;
    root = root_oid ? cdc_capture_table_by_name(cap, rs, rn) : NULL;
    if (root == NULL || !root->captured)
        goto cleanup; /* not a partition of a captured table */
    *handled = true;
    leaf = cdc_capture_leaf_by_relid(cap, m->u.relation.relid);
    if (leaf == NULL) {
        if (cdc_array_resize(cap->leafmap.leaves, cap->leafmap.nleaves + 1) != CDC_OK) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto cleanup;
        }
        leaf = &cap->leafmap.leaves[cap->leafmap.nleaves++];
        memset(leaf, 0, sizeof(*leaf));
        leaf->relid = m->u.relation.relid;
        if (asprintf(&leaf->name, "%s.%s", nsp, rel) < 0)
            leaf->name = NULL;
        if (asprintf(&leaf->root_name, "%s.%s", rs, rn) < 0)
            leaf->root_name = NULL;
    }
    free(leaf->map);
    leaf->map = NULL;
    leaf->ncols = 0;
    leaf->root_relid = root_oid;
    leaf->m_skipped = root->m_skipped;
    cols = calloc(nrcols ? nrcols : 1, sizeof(*cols));
    map = calloc(nrcols ? nrcols : 1, sizeof(*map));
    if (cols == NULL || map == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    /* the root's columns, in its order, as the partition describes them */
    for (size_t i = 0; i < nrcols; i++) {
        for (uint16_t j = 0; j < m->u.relation.ncols; j++) {
            if (strcmp(m->u.relation.cols[j].name, rcols[i]) == 0) {
                cols[k] = m->u.relation.cols[j];
                key = key || cols[k].key;
                map[k++] = j;
                break;
            }
        }
    }
    if (k == 0 || !key) {
        cdc_log_error("partition %s.%s of %s.%s: its columns cannot be mapped to the root's "
                      "(no key column in common); its changes are skipped and counted",
                      nsp, rel, rs, rn);
        goto cleanup;
    }
    /* With publish_via_partition_root pgoutput sends the root's Relation and then the
     * partition's own (its changes then name the root): nothing to do for that one. */
    if (root->relid == root_oid && root->has_doc && root->doc.ncols == k) {
        bool same = true;
        for (size_t i = 0; i < k && same; i++)
            same = strcmp(root->doc.cols[i].name, cols[i].name) == 0;
        if (same)
            goto mapped;
    }
    memset(&synth, 0, sizeof(synth));
    synth.kind = CDC_PGO_RELATION;
    synth.u.relation.relid = root_oid;
    synth.u.relation.nspname = rs;
    synth.u.relation.relname = rn;
    synth.u.relation.replident = m->u.relation.replident;
    synth.u.relation.ncols = (uint16_t)k;
    synth.u.relation.cols = cols;
    rc = cdc_capture_on_relation(cap, &synth, e);
    if (rc != CDC_OK)
        goto cleanup;
mapped:
    leaf = cdc_capture_leaf_by_relid(cap, m->u.relation.relid);
    leaf->map = map;
    leaf->ncols = k;
    map = NULL;
cleanup:
    free(cols);
    free(map);
    for (size_t i = 0; i < nrcols; i++)
        free(rcols[i]);
    free(rcols);
    free(rs);
    free(rn);
    return rc;
}

/* The partition's row in the root's column order (vals: leaf->ncols values). */
static bool leaf_row(const cdc_capture_leaf_t *leaf, const cdc_pgo_tuple_t *in,
                     cdc_pgo_value_t *vals, cdc_pgo_tuple_t *out)
{
    for (size_t i = 0; i < leaf->ncols; i++) {
        if (leaf->map[i] >= in->ncols)
            return false;
        vals[i] = in->cols[leaf->map[i]];
    }
    out->ncols = (uint16_t)leaf->ncols;
    out->cols = vals;
    return true;
}

cdc_err_t cdc_capture_leaf_map(cdc_capture_t *cap, cdc_capture_leaf_t *leaf, const cdc_pgo_msg_t *m,
                               uint64_t lsn, cdc_pgo_msg_t *out, bool *produce, cdc_error_t *e)
{
    cdc_pgo_msg_t m2 = *m;
    cdc_pgo_value_t *v0, *v1;
    bool ok = leaf->map != NULL;

    *produce = false;
    if (ok &&
        cdc_array_reserve(cap->leafmap.vals, cap->leafmap.vals_cap, 2 * leaf->ncols, 16) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    v0 = cap->leafmap.vals;
    v1 = ok ? cap->leafmap.vals + leaf->ncols : NULL;
    switch (m->kind) {
    case CDC_PGO_INSERT:
        m2.u.insert.relid = leaf->root_relid;
        ok = ok && leaf_row(leaf, &m->u.insert.newtup, v0, &m2.u.insert.newtup);
        break;
    case CDC_PGO_UPDATE:
        m2.u.update.relid = leaf->root_relid;
        ok = ok && leaf_row(leaf, &m->u.update.newtup, v0, &m2.u.update.newtup);
        if (m->u.update.old_kind)
            ok = ok && leaf_row(leaf, &m->u.update.oldtup, v1, &m2.u.update.oldtup);
        break;
    case CDC_PGO_DELETE:
        m2.u.del.relid = leaf->root_relid;
        ok = ok && leaf_row(leaf, &m->u.del.oldtup, v0, &m2.u.del.oldtup);
        break;
    default:
        return CDC_OK;
    }
    if (!leaf->warned) {
        leaf->warned = true;
        cdc_log_warn("changes of partition %s arrive under its own name (the publication "
                     "does not publish through the root, or did not when they were written): "
                     "producing them as %s's",
                     leaf->name ? leaf->name : "?", leaf->root_name ? leaf->root_name : "?");
    }
    if (!ok) {
        cdc_metrics_counter_inc(leaf->m_skipped);
        cdc_log_warn("change at %X/%X of partition %s could not be mapped to its root: skipped",
                     (unsigned)(lsn >> 32), (unsigned)lsn, leaf->name ? leaf->name : "?");
        return CDC_OK;
    }
    *out = m2;
    *produce = true;
    return CDC_OK;
}

/*
 * A TRUNCATE naming mapped partitions: a partition's truncate cannot be expressed as
 * the root's (that would empty the whole table), so it is skipped, logged and counted;
 * the other relations are handled as usual.
 */
cdc_err_t cdc_capture_truncate_unmapped(cdc_capture_t *cap, const cdc_pgo_msg_t *m, uint64_t lsn,
                                        cdc_pgo_msg_t *out, cdc_error_t *e)
{
    uint32_t n = 0, want = m->u.truncate.nrelids ? m->u.truncate.nrelids : 1;

    if (cdc_array_reserve(cap->leafmap.rels, cap->leafmap.rels_cap, want, 16) != CDC_OK)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < m->u.truncate.nrelids; i++) {
        const cdc_capture_leaf_t *leaf = cdc_capture_leaf_by_relid(cap, m->u.truncate.relids[i]);
        if (leaf == NULL) {
            cap->leafmap.rels[n++] = m->u.truncate.relids[i];
            continue;
        }
        cdc_metrics_counter_inc(leaf->m_skipped);
        cdc_log_warn("truncate of partition %s at %X/%X skipped: it arrived under the "
                     "partition's name, and a truncate of the root would remove every "
                     "partition's rows",
                     leaf->name ? leaf->name : "?", (unsigned)(lsn >> 32), (unsigned)lsn);
    }
    *out = *m;
    out->u.truncate.nrelids = n;
    out->u.truncate.relids = cap->leafmap.rels;
    return CDC_OK;
}
