/*
 * The include/exclude patterns that narrow the publication's tables to the capture set
 * (--table-include, --table-exclude; docs/capture.md, "Choosing the tables"). Pure: no
 * PostgreSQL. A pattern is a POSIX extended regular expression matched against the whole
 * "schema.table" name; a list is comma separated. A table is in the set when the include
 * list is empty or one of its patterns matches, and no exclude pattern matches.
 */
#ifndef CDC_CAPTURE_FILTER_H
#define CDC_CAPTURE_FILTER_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

typedef struct cdc_table_filter {
    regex_t *include;
    size_t ninclude;
    regex_t *exclude;
    size_t nexclude;
} cdc_table_filter_t;

/* Compiles the two lists (NULL or "" = none). A bad pattern is a CDC_ERR_CONFIG naming its
 * option and the pattern; f is then empty. */
cdc_err_t cdc_table_filter_init(cdc_table_filter_t *f, const char *include, const char *exclude,
                                cdc_error_t *e);

/* Whether the filter has any pattern. */
bool cdc_table_filter_active(const cdc_table_filter_t *f);

/* Whether schema.name is in the set the patterns leave (true for an empty filter). */
bool cdc_table_filter_match(const cdc_table_filter_t *f, const char *schema, const char *name);

void cdc_table_filter_free(cdc_table_filter_t *f);

#endif
