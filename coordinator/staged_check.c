/* Staged-file checks: coordinator/staged_check.h. */
#include "coordinator/staged_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "coordinator/table_stats.h"

static const char *const reason_names[CDC_STAGED_REASONS] = {
    "", "table_name", "table_unknown", "path", "missing", "size",
};

const char *cdc_staged_reason_name(cdc_staged_reason_t r)
{
    return r < CDC_STAGED_REASONS ? reason_names[r] : "";
}

void cdc_staged_index_clear(cdc_staged_index_t *x)
{
    for (size_t i = 0; i < x->nkeys; i++)
        free(x->keys[i]);
    free(x->keys);
    cdc_strmap_free(&x->names);
    memset(x, 0, sizeof(*x));
}

static bool index_put(cdc_staged_index_t *x, const char *suffix)
{
    char *k;
    if (cdc_strmap_get(&x->names, suffix) != NULL)
        return true;
    if (cdc_array_reserve(x->keys, x->cap, x->nkeys + 1, 64) != CDC_OK ||
        (k = strdup(suffix)) == NULL)
        return false;
    if (cdc_strmap_put(&x->names, k, (void *)1) != CDC_OK) {
        free(k);
        return false;
    }
    x->keys[x->nkeys++] = k;
    return true;
}

static bool index_build(cdc_staged_index_t *x, const cdc_tableset_t *set)
{
    if (x->indexed == set->n && (set->n == 0 || x->nkeys > 0))
        return true;
    cdc_staged_index_clear(x);
    for (int i = 0; i < set->n; i++) {
        /* "<prefix>.<ns>.<name>": every suffix after a dot that still holds a dot */
        for (const char *p = strchr(set->names[i], '.'); p != NULL; p = strchr(p + 1, '.'))
            if (strchr(p + 1, '.') != NULL && !index_put(x, p + 1)) {
                cdc_staged_index_clear(x);
                return false;
            }
    }
    x->indexed = set->n;
    return true;
}

/* A path segment of n bytes the warehouse may hold: not empty, ".", ".." and no '/', '\\'
 * or control character. */
static bool safe_segment(const char *s, size_t n)
{
    if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '/' || ch == '\\' || ch < 0x20 || ch == 0x7f)
            return false;
    }
    return true;
}

static bool table_in_set(cdc_staged_index_t *x, const cdc_tableset_t *set, const char *table)
{
    size_t n = strlen(table), sl = strlen(CDC_CHANGELOG_SUFFIX);
    char mirror[1024];

    if (!index_build(x, set))
        return false;
    if (cdc_strmap_get(&x->names, table) != NULL)
        return true;
    if (n > sl && n - sl < sizeof(mirror) && strcmp(table + n - sl, CDC_CHANGELOG_SUFFIX) == 0) {
        memcpy(mirror, table, n - sl);
        mirror[n - sl] = '\0';
        return cdc_strmap_get(&x->names, mirror) != NULL;
    }
    return false;
}

cdc_staged_reason_t cdc_staged_check(cdc_staged_index_t *x, const cdc_tableset_t *set,
                                     const char *warehouse, const char *table, const char *path,
                                     char *why, size_t size)
{
    const char *dot = table != NULL ? strchr(table, '.') : NULL;
    size_t wl = strlen(warehouse), nl, tl;

    if (path == NULL)
        path = "";
    if (dot == NULL || !safe_segment(table, (size_t)(dot - table)) ||
        !safe_segment(dot + 1, strlen(dot + 1))) {
        snprintf(why, size,
                 "table name \"%.200s\" (file %.300s) is not \"<namespace>.<table>\" of safe "
                 "names",
                 table != NULL ? table : "", path);
        return CDC_STAGED_TABLE_NAME;
    }
    if (!table_in_set(x, set, table)) {
        snprintf(why, size, "table \"%.200s\" is not one of the job's tables (file %.300s)", table,
                 path);
        return CDC_STAGED_TABLE_UNKNOWN;
    }
    /* "<warehouse>/<ns>/<name>/data/" as cdc_ice_table_location joins it */
    while (wl > 1 && warehouse[wl - 1] == '/')
        wl--;
    nl = (size_t)(dot - table);
    tl = strlen(dot + 1);
    const char *p = path;
    bool under = strncmp(p, warehouse, wl) == 0 && p[wl] == '/' &&
                 strncmp(p + wl + 1, table, nl) == 0 && p[wl + 1 + nl] == '/' &&
                 strncmp(p + wl + 2 + nl, dot + 1, tl) == 0 &&
                 strncmp(p + wl + 2 + nl + tl, "/data/", 6) == 0;
    if (under) {
        /* every segment after data/ safe, the last one a file name */
        const char *s = p + wl + 2 + nl + tl + 6;
        for (;;) {
            const char *slash = strchr(s, '/');
            size_t len = slash != NULL ? (size_t)(slash - s) : strlen(s);
            if (!safe_segment(s, len)) {
                under = false;
                break;
            }
            if (slash == NULL)
                break;
            s = slash + 1;
        }
    }
    if (!under) {
        snprintf(why, size, "file %.300s is not under the data directory of table \"%.200s\"", path,
                 table);
        return CDC_STAGED_PATH;
    }
    return CDC_STAGED_OK;
}
