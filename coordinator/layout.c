/*
 * Table layout declarations (see layout.h).
 */
#include "coordinator/layout.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/iceberg/partition.h"

/* Calls fn(table, tlen, terms, len, arg) for every "table=terms" of decl; stops at the
 * first that returns false and returns false then. */
typedef bool (*decl_fn)(const char *table, size_t tlen, const char *terms, size_t len, void *arg);

static bool each_decl(const char *decl, decl_fn fn, void *arg)
{
    const char *p = decl;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ';'), *eq;
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n > 0 && isspace((unsigned char)*p)) {
            p++;
            n--;
        }
        eq = memchr(p, '=', n);
        if (n > 0 && !fn(p, eq ? (size_t)(eq - p) : n, eq ? eq + 1 : p + n,
                         eq ? n - (size_t)(eq + 1 - p) : 0, arg))
            return false;
        p = end ? end + 1 : NULL;
    }
    return true;
}

typedef struct check {
    bool sort;
    cdc_error_t *e;
} check_t;

static bool is_word(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)p[i]) && p[i] != '_' && p[i] != '$')
            return false;
    return true;
}

/* One term: [transform(]column[)] and, for sort orders, [asc|desc] [nulls first|last]. */
static bool check_term(const char *p, size_t n, bool sort)
{
    const char *open = memchr(p, '(', n);
    size_t i = 0;
    if (open != NULL) {
        const char *close = memchr(open, ')', n - (size_t)(open - p));
        char name[32];
        cdc_ice_transform_t t;
        size_t tl = (size_t)(open - p);
        if (close == NULL || tl == 0 || tl >= sizeof(name))
            return false;
        memcpy(name, p, tl);
        name[tl] = '\0';
        if (cdc_ice_transform_parse(name, &t) != CDC_OK ||
            !is_word(open + 1, (size_t)(close - open - 1)))
            return false;
        i = (size_t)(close + 1 - p);
    } else {
        while (i < n && !isspace((unsigned char)p[i]))
            i++;
        if (!is_word(p, i))
            return false;
    }
    /* what follows the column: nothing for a spec; direction and null order for a sort */
    while (i < n) {
        size_t w;
        while (i < n && isspace((unsigned char)p[i]))
            i++;
        for (w = i; w < n && !isspace((unsigned char)p[w]);)
            w++;
        if (w == i)
            break;
        if (!sort)
            return false;
        if (!((w - i == 3 && strncmp(p + i, "asc", 3) == 0) ||
              (w - i == 4 && strncmp(p + i, "desc", 4) == 0) ||
              (w - i == 5 && strncmp(p + i, "nulls", 5) == 0) ||
              (w - i == 5 && strncmp(p + i, "first", 5) == 0) ||
              (w - i == 4 && strncmp(p + i, "last", 4) == 0)))
            return false;
        i = w;
    }
    return true;
}

static bool check_one(const char *table, size_t tlen, const char *terms, size_t len, void *arg)
{
    check_t *c = arg;
    const char *opt = c->sort ? "--sort-by" : "--partition-by";
    const char *dot = memchr(table, '.', tlen);
    const char *p = terms, *end = terms + len;

    if (dot == NULL || dot == table || dot + 1 == table + tlen || terms == table + tlen) {
        cdc_error_set(c->e, CDC_ERR_CONFIG,
                      "option %s: \"%.*s\" is not \"<namespace>.<table>=<terms>\"", opt,
                      (int)(tlen + (terms == table + tlen ? 0 : len + 1)), table);
        return false;
    }
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *q = comma ? comma : end;
        while (p < q && isspace((unsigned char)*p))
            p++;
        while (q > p && isspace((unsigned char)q[-1]))
            q--;
        if (!check_term(p, (size_t)(q - p), c->sort)) {
            cdc_error_set(c->e, CDC_ERR_CONFIG,
                          "option %s: table \"%.*s\": bad term \"%.*s\" (expected %s)", opt,
                          (int)tlen, table, (int)(q - p), p,
                          c->sort ? "[transform(]column[)] [asc|desc] [nulls first|nulls last]"
                                  : "column, or identity|bucket[N]|truncate[W]|year|month|day|"
                                    "hour(column)");
            return false;
        }
        p = comma ? comma + 1 : end;
    }
    return true;
}

cdc_err_t cdc_layout_check(const char *decl, bool sort, cdc_error_t *e)
{
    check_t c = {sort, e};
    return each_decl(decl, check_one, &c) ? CDC_OK : CDC_ERR_CONFIG;
}

typedef struct find {
    const char *table;
    char *terms;
} find_t;

static bool find_one(const char *table, size_t tlen, const char *terms, size_t len, void *arg)
{
    find_t *f = arg;
    if (strlen(f->table) != tlen || strncmp(f->table, table, tlen) != 0)
        return true;
    f->terms = strndup(terms, len);
    return false;
}

char *cdc_layout_lookup(const char *decl, const char *table)
{
    find_t f = {table, NULL};
    each_decl(decl, find_one, &f);
    return f.terms;
}
