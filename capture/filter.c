/* Table include/exclude patterns (capture/filter.h). */
#include "capture/filter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

/* Compiles one comma-separated list into *out; patterns are anchored to the whole name. */
static cdc_err_t compile(const char *option, const char *list, regex_t **out, size_t *n,
                         cdc_error_t *e)
{
    char *copy, *save = NULL, *tok;
    size_t cap = 0;

    *out = NULL;
    *n = 0;
    if (list == NULL || *list == '\0')
        return CDC_OK;
    if ((copy = strdup(list)) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *anchored, msg[128];
        size_t len;
        int rc;

        while (*tok == ' ')
            tok++;
        len = strlen(tok);
        while (len > 0 && tok[len - 1] == ' ')
            tok[--len] = '\0';
        if (len == 0)
            continue;
        if (cdc_array_reserve(*out, cap, *n + 1, 4) != CDC_OK ||
            (anchored = malloc(len + 5)) == NULL) {
            free(copy);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        snprintf(anchored, len + 5, "^(%s)$", tok);
        rc = regcomp(&(*out)[*n], anchored, REG_EXTENDED | REG_NOSUB);
        free(anchored);
        if (rc != 0) {
            regerror(rc, NULL, msg, sizeof(msg));
            cdc_error_set(e, CDC_ERR_CONFIG,
                          "invalid pattern \"%s\" in --%s: %s (a POSIX extended regular "
                          "expression matched against schema.table, e.g. public\\.orders_.*)",
                          tok, option, msg);
            free(copy);
            return e->code;
        }
        (*n)++;
    }
    free(copy);
    return CDC_OK;
}

static void release(regex_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        regfree(&r[i]);
    free(r);
}

cdc_err_t cdc_table_filter_init(cdc_table_filter_t *f, const char *include, const char *exclude,
                                cdc_error_t *e)
{
    cdc_err_t rc;

    memset(f, 0, sizeof(*f));
    rc = compile("table-include", include, &f->include, &f->ninclude, e);
    if (rc == CDC_OK)
        rc = compile("table-exclude", exclude, &f->exclude, &f->nexclude, e);
    if (rc != CDC_OK)
        cdc_table_filter_free(f);
    return rc;
}

bool cdc_table_filter_active(const cdc_table_filter_t *f)
{
    return f->ninclude > 0 || f->nexclude > 0;
}

static bool any(const regex_t *r, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (regexec(&r[i], name, 0, NULL, 0) == 0)
            return true;
    return false;
}

bool cdc_table_filter_match(const cdc_table_filter_t *f, const char *schema, const char *name)
{
    char full[512];

    if (!cdc_table_filter_active(f))
        return true;
    snprintf(full, sizeof(full), "%s.%s", schema, name);
    if (f->ninclude > 0 && !any(f->include, f->ninclude, full))
        return false;
    return !any(f->exclude, f->nexclude, full);
}

void cdc_table_filter_free(cdc_table_filter_t *f)
{
    release(f->include, f->ninclude);
    release(f->exclude, f->nexclude);
    memset(f, 0, sizeof(*f));
}
