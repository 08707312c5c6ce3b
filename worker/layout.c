/*
 * Table partition specs from barriers (see layout.h).
 */
#include "worker/layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/msg.h"
#include "common/log.h"

static void layout_free(cdc_layout_t *l)
{
    free(l->table);
    cdc_ice_partition_spec_free(&l->spec);
    cdc_ice_sort_order_free(&l->order);
}

/* "<table>:<spec id>;..." of a barrier's layouts (caller frees), NULL when out of memory. */
static char *signature(Cdc__TableLayout *const *layouts, size_t n)
{
    size_t len = 1;
    char *sig, *p;
    for (size_t i = 0; i < n; i++)
        len += strlen(layouts[i]->table ? layouts[i]->table : "") + 28;
    if ((sig = p = malloc(len)) == NULL)
        return NULL;
    *p = '\0';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s:%d:%d;", layouts[i]->table ? layouts[i]->table : "",
                     (int)layouts[i]->spec_id, (int)layouts[i]->sort_order_id);
    return sig;
}

/* The spec and order of a barrier's layout (empty ones when their id is 0). */
static bool parse(const Cdc__TableLayout *tl, cdc_layout_t *out, cdc_error_t *e)
{
    json_t *j;
    bool ok = true;
    if (tl->spec_id != 0) {
        j = tl->spec_json ? json_loads(tl->spec_json, 0, NULL) : NULL;
        ok = j != NULL && cdc_ice_partition_spec_from_jansson(j, &out->spec, e) == CDC_OK &&
             out->spec.spec_id == tl->spec_id;
        json_decref(j);
    }
    if (ok && tl->sort_order_id != 0) {
        j = tl->sort_order_json ? json_loads(tl->sort_order_json, 0, NULL) : NULL;
        ok = j != NULL && cdc_ice_sort_order_from_jansson(j, &out->order, e) == CDC_OK &&
             out->order.order_id == tl->sort_order_id;
        json_decref(j);
    }
    if (!ok && e->msg[0] == '\0')
        cdc_error_set(e, CDC_ERR_INVALID, "not a spec or order");
    return ok;
}

void cdc_layouts_update(cdc_layouts_t *l, Cdc__TableLayout *const *layouts, size_t n)
{
    cdc_layout_t *v;
    size_t nv = 0;

    char *sig = signature(layouts, n);
    if (sig == NULL || (l->sig != NULL && strcmp(sig, l->sig) == 0) ||
        (v = calloc(n ? n : 1, sizeof(*v))) == NULL) {
        free(sig);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const Cdc__TableLayout *tl = layouts[i];
        cdc_error_t e;
        cdc_error_clear(&e);
        if (tl->table == NULL || !parse(tl, &v[nv], &e) ||
            (v[nv].table = strdup(tl->table)) == NULL) {
            cdc_log_error("table \"%s\": layout (spec %d, sort order %d) from the coordinator is "
                          "unusable (%s); its files are written unpartitioned and unsorted",
                          tl->table ? tl->table : "?", (int)tl->spec_id, (int)tl->sort_order_id,
                          e.msg[0] ? e.msg : "out of memory");
            layout_free(&v[nv]);
            memset(&v[nv], 0, sizeof(v[nv]));
        } else {
            cdc_log_info("table \"%s\": rows are staged under partition spec %d, sort order %d",
                         tl->table, (int)tl->spec_id, (int)tl->sort_order_id);
            nv++;
        }
    }
    cdc_layouts_free(l);
    l->v = v;
    l->n = nv;
    l->sig = sig;
    for (size_t i = 0; i < nv; i++) /* (the first of a name wins, as a scan would find it) */
        if (cdc_strmap_get(&l->by_table, v[i].table) == NULL &&
            cdc_strmap_put(&l->by_table, v[i].table, &v[i]) != CDC_OK) {
            /* out of memory: no layouts until the next barrier's (unpartitioned files are
             * always correct, see layout.h) */
            cdc_log_error("out of memory indexing the tables' layouts");
            cdc_layouts_free(l);
            return;
        }
}

static const cdc_layout_t *find(const cdc_layouts_t *l, const char *ns, const char *table,
                                bool changelog)
{
    char buf[256], *name = buf;
    const char *suffix = changelog ? "_changelog" : "";
    const cdc_layout_t *x;
    int len;

    if (l->n == 0)
        return NULL; /* (the record path asks for every change) */
    len = snprintf(buf, sizeof(buf), "%s.%s%s", ns, table, suffix);
    if (len < 0 ||
        ((size_t)len >= sizeof(buf) && asprintf(&name, "%s.%s%s", ns, table, suffix) < 0))
        return NULL;
    x = cdc_strmap_get(&l->by_table, name);
    if (name != buf)
        free(name);
    return x;
}

const cdc_ice_partition_spec_t *cdc_layouts_spec(const cdc_layouts_t *l, const char *ns,
                                                 const char *table, bool changelog)
{
    const cdc_layout_t *x = find(l, ns, table, changelog);
    return x != NULL && x->spec.nfields > 0 ? &x->spec : NULL;
}

const cdc_ice_sort_order_t *cdc_layouts_order(const cdc_layouts_t *l, const char *ns,
                                              const char *table, bool changelog)
{
    const cdc_layout_t *x = find(l, ns, table, changelog);
    return x != NULL && x->order.nfields > 0 ? &x->order : NULL;
}

void cdc_layouts_free(cdc_layouts_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        layout_free(&l->v[i]);
    free(l->v);
    free(l->sig);
    cdc_strmap_free(&l->by_table);
    l->v = NULL;
    l->n = 0;
    l->sig = NULL;
}
