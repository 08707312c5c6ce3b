/*
 * Internals shared by the pieces of the stage (stage.h): worker/stage.c (the per-epoch
 * staging), worker/stage_encode.c (the encoders of the epoch's files, encoding ahead,
 * partition keys) and worker/stage_write.c (the files written at the barrier). Not for
 * use outside them.
 */
#ifndef CDC_WORKER_STAGE_INT_H
#define CDC_WORKER_STAGE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/iceberg/parquet.h"
#include "worker/stage.h"

/* One table's file of one kind being encoded into memory (see stage.h). */
typedef struct cdc_stage_enc {
    const cdc_source_schema_t *src; /* the source schema the file is written with */
    cdc_stage_kind_t kind;
    int codec;
    cdc_ice_schema_t schema;
    int *colmap; /* per field: its column index in src, -1 for changelog metadata */
    cdc_ice_value_t *cells;
    cdc_pq_writer_t *w; /* buffer writer */
    size_t done;        /* changelog rows / entries [0, done) appended */
    size_t bytes;       /* counted in the stage's bytes */
    char *special;      /* the last row's _cdc_special text (its cell points here) */
} cdc_stage_enc_t;

/* Opens an encoder of kind for the rows of source schema src, compressed with codec. */
cdc_err_t cdc_stage_enc_open(const cdc_source_schema_t *src, cdc_stage_kind_t kind, int codec,
                             cdc_stage_enc_t **out, cdc_error_t *e);
void cdc_stage_enc_free(cdc_stage_enc_t *en);

/* Appends changelog row / entry i of t when it belongs in en's kind of file. */
cdc_err_t cdc_stage_enc_row(cdc_stage_enc_t *en, const cdc_stage_table_t *t, size_t i,
                            cdc_error_t *e);

/* Appends changelog rows / entries [en->done, end) of t. */
cdc_err_t cdc_stage_enc_append(cdc_stage_enc_t *en, const cdc_stage_table_t *t, size_t end,
                               cdc_error_t *e);

/* Drops a table's encoder of the changelog or the mirror data (NULL is fine). */
void cdc_stage_enc_drop(cdc_stage_t *s, cdc_stage_enc_t **slot);

/* After a change was added to t: encodes the row groups that are due. */
void cdc_stage_encode_ahead(cdc_stage_t *s, cdc_stage_table_t *t);

/* Whether entry en has a row in a file of kind (mirror data or deletes). */
static inline bool cdc_stage_entry_in(const cdc_stage_entry_t *en, cdc_stage_kind_t kind)
{
    return kind == CDC_STAGE_MIRROR_DATA ? !en->deleted : en->needs_delete;
}

/* The source value of partition field source id `id` as a field and its single-value
 * encoding in *in (bytes malloc'ed; null when the row lacks it). */
bool cdc_stage_part_source(const cdc_row_t *r, const cdc_changelog_row_t *cl, int32_t id,
                           cdc_ice_field_t *f, cdc_ice_part_value_t *in);

#endif
