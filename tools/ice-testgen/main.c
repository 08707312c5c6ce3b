/*
 * ice-testgen: drives common/iceberg/table.c the way the pipeline does and writes
 * what an independent reader must see, for tests/js/iceberg_readback.test.mjs.
 *
 *   --mode random    a seeded random sequence of commits on one table: appends,
 *                    upserts (data + equality deletes on the identifier field in
 *                    one row delta), deletes (equality deletes only) and one
 *                    schema change (add column) half-way; an in-memory model
 *                    applies the same operations. With --compact-every N, every N
 *                    commits the whole table is rewritten (table maintenance). With --partition-by
 * the table is partitioned from the start: each commit writes one data file per partition of its
 * rows (values from partition.c's transforms), equality deletes go to the unpartitioned spec 0.
 *   --mode alltypes  one append of a few rows with a column of every type.
 *   --mode race      one of several committer processes: opens (or creates) the
 *                    table and commits --commits appends of one row each with
 *                    cdc.job = --job, retrying each lost race after a refresh and
 *                    skipping checkpoints already in the table; writes
 *                    {"conflicts": N, "rows": [...its rows...]}.
 *   --mode storage   exercises the storage backend (put, put-if-absent, multipart
 *                    upload of a 12 MiB file, get, size, list, delete); exits 1 on
 *                    the first failed check.
 *
 * Writes --out: {"table": "<location>", "rows": [...expected rows by id...],
 * "data_files": [...live data files with spec_id...], "delete_files": [...],
 * "snapshots": N}.
 * Data files are written with common/iceberg/parquet.c and stored through
 * common/iceberg/storage.c (local directory or S3).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/options.h"
#include "common/config.h"
#include "common/iceberg/parquet.h"
#include "common/iceberg/partition.h"
#include "common/iceberg/schema.h"
#include "common/iceberg/storage.h"
#include "common/iceberg/table.h"

typedef struct options {
    char *warehouse;
    char *ns;
    char *table;
    char *mode;
    int64_t seed;
    int64_t commits;
    char *out;
    char *job;
    cdc_s3_options_t s3;
    char *codec;
    char *partition_by;
    int64_t compact_every;
} options_t;

static const cdc_opt_t OPTS[] = {
    {"warehouse", CDC_OPT_STRING, offsetof(options_t, warehouse), NULL, true, 0, 0, NULL,
     "warehouse location: file:///abs/dir, /abs/dir or s3://bucket/prefix"},
    {"namespace", CDC_OPT_STRING, offsetof(options_t, ns), "db", false, 0, 0, NULL,
     "namespace of the table"},
    {"table", CDC_OPT_STRING, offsetof(options_t, table), "t", false, 0, 0, NULL, "table name"},
    {"mode", CDC_OPT_ENUM, offsetof(options_t, mode), "random", false, 0, 0,
     "random|alltypes|storage|race",
     "what to write (storage: exercise the storage backend and exit)"},
    {"seed", CDC_OPT_INT, offsetof(options_t, seed), "1", false, 0, 0, NULL,
     "seed of the random operation sequence"},
    {"commits", CDC_OPT_INT, offsetof(options_t, commits), "40", false, 1, 100000, NULL,
     "number of commits in random mode"},
    {"job", CDC_OPT_STRING, offsetof(options_t, job), "job", false, 0, 0, NULL,
     "cdc.job of the commits in race mode"},
    {"out", CDC_OPT_STRING, offsetof(options_t, out), NULL, true, 0, 0, NULL,
     "where to write the expected-state JSON"},
    CDC_OPTS_S3(options_t, s3),
    {"codec", CDC_OPT_STRING, offsetof(options_t, codec), "zstd", false, 0, 0, NULL,
     "parquet codec: zstd, snappy or none"},
    {"partition-by", CDC_OPT_STRING, offsetof(options_t, partition_by), "", false, 0, 0, NULL,
     "random mode: partition spec of the table, e.g. \"region, day(ts), bucket[4](id)\""},
    {"compact-every", CDC_OPT_INT, offsetof(options_t, compact_every), "0", false, 0, 100000, NULL,
     "random mode: every N commits, rewrite every live data file with the equality deletes "
     "applied (cdc_ice_table_rewrite) and commit that as a replace snapshot (0 = never)"},
    CDC_OPT_END,
};

static uint64_t rng;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static int64_t rand_below(int64_t n)
{
    return (int64_t)(next_rand() % (uint64_t)n);
}

static void die(const char *what, const cdc_error_t *e)
{
    fprintf(stderr, "ice-testgen: %s: %s\n", what, e ? e->msg : "");
    exit(1);
}

/* ---- random mode -------------------------------------------------------------------- */

typedef struct row {
    bool present;
    bool name_null;
    char name[48];
    int32_t qty;
    double price;
    bool ts_null;
    int64_t ts;    /* microseconds, whole milliseconds; some before 1970 */
    int region;    /* -1 = null */
    bool has_note; /* the row was written after the schema change */
    bool note_null;
    char note[32];
} row_t;

static const char *const REGIONS[] = {"eu", "us", "ap"};

static cdc_ice_field_t BASE_FIELDS[] = {
    {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
    {.id = 2, .name = "name", .type = CDC_ICE_STRING},
    {.id = 3, .name = "qty", .type = CDC_ICE_INT, .required = true},
    {.id = 4, .name = "price", .type = CDC_ICE_DOUBLE},
    {.id = 5, .name = "ts", .type = CDC_ICE_TIMESTAMPTZ},
    {.id = 6, .name = "region", .type = CDC_ICE_STRING},
};
#define NBASE 6
static int32_t ID_FIELDS[] = {1};

typedef struct ctx {
    options_t *o;
    cdc_storage_t *st;
    cdc_ice_table_t *t;
    char *location;
    cdc_pq_options_t pq;
    row_t *rows;
    int64_t nrows; /* ids 1..nrows-1 were ever used */
    size_t cap;
    bool has_note;
} ctx_t;

static const cdc_ice_schema_t *current_schema(ctx_t *c)
{
    return cdc_ice_metadata_current_schema(cdc_ice_table_metadata(c->t));
}

/* The cells of row id in schema order (id, name, qty, price, ts, region, note). */
static void row_values(ctx_t *c, int64_t id, cdc_ice_value_t *v)
{
    const row_t *r = &c->rows[id];
    memset(v, 0, (NBASE + 1) * sizeof(*v));
    v[0].v.i64 = id;
    v[1].is_null = r->name_null;
    v[1].v.bytes.ptr = (const uint8_t *)r->name;
    v[1].v.bytes.len = strlen(r->name);
    v[2].v.i32 = r->qty;
    v[3].v.f64 = r->price;
    v[4].is_null = r->ts_null;
    v[4].v.i64 = r->ts;
    v[5].is_null = r->region < 0;
    v[5].v.bytes.ptr = (const uint8_t *)(r->region < 0 ? "" : REGIONS[r->region]);
    v[5].v.bytes.len = strlen((const char *)v[5].v.bytes.ptr);
    v[6].is_null = r->note_null;
    v[6].v.bytes.ptr = (const uint8_t *)r->note;
    v[6].v.bytes.len = strlen(r->note);
}

/*
 * Partition tuple of row id under spec (out: spec->nfields values, caller frees the
 * bytes): each source cell in single-value encoding through cdc_ice_transform_apply(),
 * as the worker computes it.
 */
static void row_partition(ctx_t *c, const cdc_ice_partition_spec_t *spec, int64_t id,
                          cdc_ice_part_value_t *out)
{
    const cdc_ice_schema_t *cur = current_schema(c);
    cdc_ice_value_t v[NBASE + 1];
    row_values(c, id, v);
    for (size_t i = 0; i < spec->nfields; i++) {
        int k = cdc_ice_schema_find(cur, spec->fields[i].source_id);
        const cdc_ice_field_t *src = &cur->fields[k];
        uint8_t buf[64];
        cdc_ice_part_value_t in = {.null = v[k].is_null, .bytes = buf};
        if (src->type == CDC_ICE_STRING) {
            in.bytes = (uint8_t *)v[k].v.bytes.ptr;
            in.len = v[k].v.bytes.len;
        } else if (!in.null && !cdc_ice_bound_encode(src, &v[k], buf, sizeof(buf), &in.len)) {
            die("encode partition source", NULL);
        }
        if (cdc_ice_transform_apply(spec->fields[i].transform, src, &in, &out[i]) != CDC_OK)
            die("partition transform", NULL);
    }
}

/* Closes writer w into *df and stores its file under location (name: the file name's
 * tag); df->path is then the stored file's. */
static void store_parquet(ctx_t *c, cdc_pq_writer_t *w, const char *location, const char *name,
                          cdc_ice_data_file_t *df)
{
    cdc_error_t e;
    uint8_t *buf;
    size_t len;

    if (cdc_pq_writer_close(w, df, &e) != CDC_OK)
        die("close parquet writer", &e);
    if (cdc_pq_writer_take_buffer(w, &buf, &len) != CDC_OK)
        die("take parquet buffer", NULL);
    cdc_pq_writer_free(w);
    free(df->path);
    if (cdc_ice_data_file_put(c->st, location, name, buf, len, &df->path, &e) != CDC_OK)
        die("store data file", &e);
    free(buf);
}

/* Writes a parquet file of rows (ids) with the current schema, or only ids (deletes). */
static void write_file(ctx_t *c, const int64_t *ids, size_t n, bool deletes,
                       cdc_ice_data_file_t *df)
{
    cdc_error_t e;
    const cdc_ice_schema_t *cur = current_schema(c);
    cdc_ice_schema_t del = {.schema_id = cur->schema_id,
                            .fields = BASE_FIELDS,
                            .nfields = 1,
                            .identifier_ids = ID_FIELDS,
                            .nidentifier = 1};
    const cdc_ice_schema_t *schema = deletes ? &del : cur;
    cdc_pq_writer_t *w;
    if (cdc_pq_writer_open_buffer(schema, &c->pq, &w, &e) != CDC_OK)
        die("open parquet writer", &e);
    for (size_t i = 0; i < n; i++) {
        cdc_ice_value_t v[NBASE + 1];
        row_values(c, ids[i], v);
        if (cdc_pq_writer_append(w, v, &e) != CDC_OK)
            die("append row", &e);
    }
    store_parquet(c, w, cdc_ice_table_get_location(c->t), deletes ? "eq" : "data", df);
    if (deletes) {
        df->content = CDC_ICE_CONTENT_EQUALITY_DELETES;
        df->equality_ids = malloc(sizeof(int32_t));
        df->equality_ids[0] = 1;
        df->nequality_ids = 1;
    }
}

static int64_t new_id(ctx_t *c)
{
    if (cdc_array_reserve(c->rows, c->cap, (size_t)c->nrows + 1, 1024) != CDC_OK)
        die("out of memory", NULL);
    memset(&c->rows[c->nrows], 0, sizeof(row_t));
    return c->nrows++;
}

static void fill_row(ctx_t *c, int64_t id, int64_t commit)
{
    row_t *r = &c->rows[id];
    r->present = true;
    r->name_null = rand_below(10) == 0;
    snprintf(r->name, sizeof(r->name), "n%" PRId64 "-c%" PRId64 "%s", id, commit,
             rand_below(4) == 0 ? "-ünï" : "");
    r->qty = (int32_t)(rand_below(2000001) - 1000000);
    r->price = (double)rand_below(10000000) / 100.0;
    r->ts_null = rand_below(10) == 0;
    r->ts = (rand_below(20000) - 2000) * 3600000000LL + rand_below(3600000) * 1000;
    r->region = (int)rand_below(4) - 1;
    r->has_note = c->has_note;
    r->note_null = rand_below(3) == 0;
    snprintf(r->note, sizeof(r->note), "note-%" PRId64, rand_below(5));
}

/* Picks up to k distinct present ids. */
static size_t pick_present(ctx_t *c, int64_t *out, size_t k)
{
    size_t n = 0;
    for (int tries = 0; n < k && tries < 200; tries++) {
        if (c->nrows <= 1)
            break;
        int64_t id = 1 + rand_below(c->nrows - 1);
        if (!c->rows[id].present)
            continue;
        bool dup = false;
        for (size_t i = 0; i < n; i++)
            dup |= out[i] == id;
        if (!dup)
            out[n++] = id;
    }
    return n;
}

static bool same_tuple(const cdc_ice_part_value_t *a, const cdc_ice_part_value_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].null != b[i].null ||
            (!a[i].null && (a[i].len != b[i].len || memcmp(a[i].bytes, b[i].bytes, a[i].len))))
            return false;
    return true;
}

/*
 * Data files of rows ids for the table's default spec: one file per partition (the rows
 * of a partitioned file share one tuple), split in two when `split` and unpartitioned.
 * Returns the file count; *out is malloc'ed.
 */
static size_t write_data(ctx_t *c, const int64_t *ids, size_t n, bool split,
                         cdc_ice_data_file_t **out)
{
    const cdc_ice_partition_spec_t *spec = cdc_ice_table_default_spec(c->t);
    size_t nf = spec->nfields, nfiles = 0;
    cdc_ice_data_file_t *files = calloc(n + 2, sizeof(*files));
    if (nf == 0) {
        size_t half = split ? n / 2 : n;
        write_file(c, ids, half, false, &files[nfiles++]);
        if (half < n)
            write_file(c, ids + half, n - half, false, &files[nfiles++]);
        *out = files;
        return nfiles;
    }
    cdc_ice_part_value_t *tuples = calloc(n * nf, sizeof(*tuples));
    int64_t *group = calloc(n, sizeof(*group));
    bool *done = calloc(n, sizeof(*done));
    for (size_t i = 0; i < n; i++)
        row_partition(c, spec, ids[i], &tuples[i * nf]);
    for (size_t i = 0; i < n; i++) {
        size_t g = 0;
        if (done[i])
            continue;
        for (size_t j = i; j < n; j++)
            if (!done[j] && same_tuple(&tuples[i * nf], &tuples[j * nf], nf)) {
                done[j] = true;
                group[g++] = ids[j];
            }
        cdc_ice_data_file_t *df = &files[nfiles++];
        write_file(c, group, g, false, df);
        df->spec_id = spec->spec_id;
        df->npartition = nf;
        if (cdc_ice_part_values_copy(&df->partition, &tuples[i * nf], nf) != CDC_OK)
            die("copy partition", NULL);
    }
    for (size_t i = 0; i < n * nf; i++)
        free(tuples[i].bytes);
    free(tuples);
    free(group);
    free(done);
    *out = files;
    return nfiles;
}

static bool remove_all(const cdc_ice_data_file_t *f, void *arg)
{
    (void)f;
    (void)arg;
    return true;
}

static void commit(ctx_t *c, cdc_ice_data_file_t *data, size_t ndata, cdc_ice_data_file_t *del,
                   size_t ndel, int64_t checkpoint)
{
    cdc_error_t e;
    cdc_ice_props_t sum = {0};
    char cp[24];
    snprintf(cp, sizeof(cp), "%" PRId64, checkpoint);
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_JOB, "ice-testgen");
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_CHECKPOINT, cp);
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_OFFSETS, "{}");
    if (cdc_ice_table_row_delta(c->t, data, ndata, del, ndel, &sum, NULL, &e) != CDC_OK)
        die("commit", &e);
    cdc_ice_props_free(&sum);
    for (size_t i = 0; i < ndata; i++)
        cdc_ice_data_file_clear(&data[i]);
    for (size_t i = 0; i < ndel; i++)
        cdc_ice_data_file_clear(&del[i]);
}

/* A rewrite of the whole table (table maintenance): every live data file with every
 * equality delete applied, committed with the data sequence number of the snapshot read. */
static void compact_all(ctx_t *c, int64_t checkpoint)
{
    cdc_error_t e;
    cdc_ice_live_file_t *lf;
    size_t n, nd = 0, ne = 0, nout;
    if (cdc_ice_table_live_files(c->t, &lf, &n, &e) != CDC_OK)
        die("live files", &e);
    cdc_ice_live_file_t *data = calloc(n + 1, sizeof(*data)), *dels = calloc(n + 1, sizeof(*dels));
    if (data == NULL || dels == NULL)
        die("out of memory", NULL);
    for (size_t i = 0; i < n; i++) {
        if (lf[i].file.content == CDC_ICE_CONTENT_DATA)
            data[nd++] = lf[i];
        else
            dels[ne++] = lf[i];
    }
    cdc_ice_data_file_t *out;
    cdc_ice_rewrite_stats_t st;
    cdc_ice_rewrite_options_t ro = {.target_file_bytes = 1 << 20, .tag = "compact"};
    if (cdc_ice_table_rewrite(c->t, data, nd, dels, ne, &ro, &out, &nout, &st, &e) != CDC_OK)
        die("rewrite", &e);
    cdc_ice_props_t sum = {0};
    char cp[24];
    snprintf(cp, sizeof(cp), "%" PRId64, checkpoint);
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_JOB, "ice-testgen");
    cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_CHECKPOINT, cp);
    cdc_ice_commit_t ic = {
        .data_files = out,
        .ndata_files = nout,
        .summary = &sum,
        .remove = remove_all,
        .data_sequence_number =
            cdc_ice_metadata_current_snapshot(cdc_ice_table_metadata(c->t))->sequence_number,
        .expect_removed = n};
    if (cdc_ice_table_commit(c->t, &ic, NULL, &e) != CDC_OK)
        die("commit the rewrite", &e);
    cdc_ice_props_free(&sum);
    cdc_ice_data_files_free(out, nout);
    free(data);
    free(dels);
    cdc_ice_live_files_free(lf, n);
}

/* The schema every mode starts with: BASE_FIELDS, keyed by id. */
static cdc_ice_schema_t base_schema(void)
{
    return (cdc_ice_schema_t){.schema_id = 0,
                              .fields = BASE_FIELDS,
                              .nfields = NBASE,
                              .identifier_ids = ID_FIELDS,
                              .nidentifier = 1};
}

static json_t *run_random(ctx_t *c)
{
    cdc_error_t e;
    cdc_ice_schema_t schema = base_schema();
    if (cdc_ice_table_create(c->st, c->location, &schema, NULL, &c->t, &e) != CDC_OK)
        die("create table", &e);
    if (cdc_ice_table_set_layout(c->t, c->o->partition_by, NULL, NULL, &e) != CDC_OK)
        die("set partition spec", &e);
    c->cap = 1024;
    c->rows = calloc(c->cap, sizeof(row_t));
    c->nrows = 1; /* ids start at 1 */
    for (int64_t k = 0; k < c->o->commits; k++) {
        if (k == c->o->commits / 2) {
            cdc_ice_field_t note = {.name = "note", .type = CDC_ICE_STRING};
            if (cdc_ice_table_add_column(c->t, &note, NULL, &e) != CDC_OK)
                die("add column", &e);
            c->has_note = true;
        }
        int64_t r = rand_below(100);
        int64_t ids[64];
        size_t n = 0, ndata;
        cdc_ice_data_file_t *data, del;
        memset(&del, 0, sizeof(del));
        if (r < 35 || c->nrows < 5) { /* append */
            n = (size_t)(1 + rand_below(20));
            for (size_t i = 0; i < n; i++) {
                ids[i] = new_id(c);
                fill_row(c, ids[i], k);
            }
            /* unpartitioned: sometimes two data files in one commit */
            ndata = write_data(c, ids, n, n >= 4 && rand_below(2) == 0, &data);
            commit(c, data, ndata, NULL, 0, k);
            free(data);
        } else if (r < 80) { /* upsert: new images + equality deletes of the keys */
            n = pick_present(c, ids, (size_t)(1 + rand_below(10)));
            size_t extra = (size_t)rand_below(5);
            for (size_t i = 0; i < extra; i++)
                ids[n++] = new_id(c);
            for (size_t i = 0; i < n; i++)
                fill_row(c, ids[i], k);
            ndata = write_data(c, ids, n, false, &data);
            /* spec 0: the deletes apply to the keys' older rows in every partition */
            write_file(c, ids, n, true, &del);
            commit(c, data, ndata, &del, 1, k);
            free(data);
        } else { /* delete */
            n = pick_present(c, ids, (size_t)(1 + rand_below(5)));
            if (n == 0)
                continue;
            for (size_t i = 0; i < n; i++)
                c->rows[ids[i]].present = false;
            write_file(c, ids, n, true, &del);
            commit(c, NULL, 0, &del, 1, k);
        }
        if (c->o->compact_every > 0 && (k + 1) % c->o->compact_every == 0)
            compact_all(c, k);
    }
    json_t *rows = json_array();
    for (int64_t id = 1; id < c->nrows; id++) {
        const row_t *r = &c->rows[id];
        if (!r->present)
            continue;
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(id));
        json_object_set_new(o, "name", r->name_null ? json_null() : json_string(r->name));
        json_object_set_new(o, "qty", json_integer(r->qty));
        json_object_set_new(o, "price", json_real(r->price));
        json_object_set_new(o, "ts", r->ts_null ? json_null() : json_integer(r->ts / 1000));
        json_object_set_new(o, "region",
                            r->region < 0 ? json_null() : json_string(REGIONS[r->region]));
        json_object_set_new(o, "note",
                            !r->has_note || r->note_null ? json_null() : json_string(r->note));
        json_array_append_new(rows, o);
    }
    free(c->rows);
    return rows;
}

/* ---- race mode ------------------------------------------------------------------------ */

static json_t *run_race(ctx_t *c, int64_t *conflicts)
{
    cdc_error_t e;
    cdc_ice_schema_t schema = base_schema();
    if (cdc_ice_table_open(c->st, c->location, &schema, NULL, &c->t, &e) != CDC_OK)
        die("open table", &e);
    json_t *rows = json_array();
    /* ids unique across racers: a hash of the job name in the high bits */
    int64_t base = 0;
    for (const char *p = c->o->job; *p; p++)
        base = (base * 31 + (unsigned char)*p) % 1000003;
    base *= 1000000;
    for (int64_t k = 0; k < c->o->commits; k++) {
        int64_t id = base + k;
        cdc_ice_data_file_t df;
        memset(&df, 0, sizeof(df));
        cdc_ice_value_t v[NBASE];
        memset(v, 0, sizeof(v));
        v[4].is_null = v[5].is_null = true;
        v[0].v.i64 = id;
        v[1].v.bytes.ptr = (const uint8_t *)c->o->job;
        v[1].v.bytes.len = strlen(c->o->job);
        v[2].v.i32 = (int32_t)k;
        v[3].v.f64 = (double)k / 2.0;
        cdc_pq_writer_t *w;
        if (cdc_pq_writer_open_buffer(&schema, &c->pq, &w, &e) != CDC_OK ||
            cdc_pq_writer_append(w, v, &e) != CDC_OK)
            die("write parquet", &e);
        store_parquet(c, w, c->location, c->o->job, &df);
        cdc_ice_props_t sum = {0};
        char cp[24];
        snprintf(cp, sizeof(cp), "%" PRId64, k);
        cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_JOB, c->o->job);
        cdc_ice_props_set(&sum, CDC_ICE_SUMMARY_CHECKPOINT, cp);
        for (;;) {
            if (cdc_ice_table_find_checkpoint(c->t, c->o->job, k) >= 0)
                break; /* committed by an earlier attempt whose answer was lost */
            cdc_err_t rc = cdc_ice_table_append(c->t, &df, 1, &sum, NULL, &e);
            if (rc == CDC_OK)
                break;
            if (rc != CDC_ERR_CONFLICT || !e.retriable)
                die("commit", &e);
            (*conflicts)++;
            if (cdc_ice_table_refresh(c->t, &e) != CDC_OK)
                die("refresh", &e);
        }
        cdc_ice_props_free(&sum);
        cdc_ice_data_file_clear(&df);
        json_array_append_new(rows,
                              json_pack("{s:I, s:s, s:I, s:f, s:n, s:n, s:n}", "id", (json_int_t)id,
                                        "name", c->o->job, "qty", (json_int_t)k, "price",
                                        (double)k / 2.0, "note", "ts", "region"));
    }
    return rows;
}

/* ---- alltypes mode -------------------------------------------------------------------- */

static json_t *run_alltypes(ctx_t *c)
{
    cdc_error_t e;
    cdc_ice_field_t f[] = {
        {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
        {.id = 2, .name = "c_boolean", .type = CDC_ICE_BOOLEAN},
        {.id = 3, .name = "c_int", .type = CDC_ICE_INT},
        {.id = 4, .name = "c_long", .type = CDC_ICE_LONG},
        {.id = 5, .name = "c_float", .type = CDC_ICE_FLOAT},
        {.id = 6, .name = "c_double", .type = CDC_ICE_DOUBLE},
        {.id = 7, .name = "c_decimal", .type = CDC_ICE_DECIMAL, .precision = 10, .scale = 2},
        {.id = 8, .name = "c_string", .type = CDC_ICE_STRING},
        {.id = 9, .name = "c_binary", .type = CDC_ICE_BINARY},
        {.id = 10, .name = "c_date", .type = CDC_ICE_DATE},
        {.id = 11, .name = "c_time", .type = CDC_ICE_TIME},
        {.id = 12, .name = "c_timestamp", .type = CDC_ICE_TIMESTAMP},
        {.id = 13, .name = "c_timestamptz", .type = CDC_ICE_TIMESTAMPTZ},
        {.id = 14, .name = "c_uuid", .type = CDC_ICE_UUID},
    };
    cdc_ice_schema_t schema = {
        .schema_id = 0, .fields = f, .nfields = 14, .identifier_ids = ID_FIELDS, .nidentifier = 1};
    if (cdc_ice_table_create(c->st, c->location, &schema, NULL, &c->t, &e) != CDC_OK)
        die("create table", &e);
    cdc_pq_writer_t *w;
    if (cdc_pq_writer_open_buffer(&schema, &c->pq, &w, &e) != CDC_OK)
        die("open parquet writer", &e);
    json_t *rows = json_array();
    for (int i = 0; i < 4; i++) {
        cdc_ice_value_t v[14];
        memset(v, 0, sizeof(v));
        json_t *o = json_object();
        char s[32], hex[64];
        uint8_t bin[3] = {(uint8_t)i, 0xab, 0xff};
        v[0].v.i64 = i + 1;
        json_object_set_new(o, "id", json_integer(i + 1));
        bool null = i == 3; /* last row: every optional column null */
        for (int k = 1; k < 14; k++)
            v[k].is_null = null;
        v[1].v.b = i % 2;
        v[2].v.i32 = -100000 * i + 7;
        v[3].v.i64 = 1234567890123LL * (i - 1);
        v[4].v.f32 = 1.5f * (float)i;
        v[5].v.f64 = -2.25 * i;
        v[6].v.dec = 12345 * (i + 1) * (i % 2 ? -1 : 1); /* 123.45 * ... */
        snprintf(s, sizeof(s), "str-%d-ä", i);
        v[7].v.bytes.ptr = (const uint8_t *)s;
        v[7].v.bytes.len = strlen(s);
        v[8].v.bytes.ptr = bin;
        v[8].v.bytes.len = 3;
        v[9].v.i32 = 19000 + i;
        v[10].v.i64 = (int64_t)(3600 + i) * 1000000;
        v[11].v.i64 = (1700000000000LL + i * 1000LL) * 1000;
        v[12].v.i64 = (1700000000000LL + i * 2000LL) * 1000;
        for (int b = 0; b < 16; b++)
            v[13].v.uuid[b] = (uint8_t)(b * 16 + i);
        if (null) {
            for (int k = 1; k < 14; k++)
                json_object_set_new(o, f[k].name, json_null());
        } else {
            json_object_set_new(o, "c_boolean", json_boolean(v[1].v.b));
            json_object_set_new(o, "c_int", json_integer(v[2].v.i32));
            json_object_set_new(o, "c_long", json_integer(v[3].v.i64));
            json_object_set_new(o, "c_float", json_real(v[4].v.f32));
            json_object_set_new(o, "c_double", json_real(v[5].v.f64));
            json_object_set_new(o, "c_decimal", json_real((double)v[6].v.dec / 100.0));
            json_object_set_new(o, "c_string", json_string(s));
            snprintf(hex, sizeof(hex), "%02xabff", i);
            json_object_set_new(o, "c_binary", json_string(hex));
            json_object_set_new(o, "c_date_days", json_integer(v[9].v.i32));
            json_object_set_new(o, "c_time_us", json_integer(v[10].v.i64));
            json_object_set_new(o, "c_timestamp_ms", json_integer(v[11].v.i64 / 1000));
            json_object_set_new(o, "c_timestamptz_ms", json_integer(v[12].v.i64 / 1000));
            char u[40];
            int p = 0;
            for (int b = 0; b < 16; b++) {
                p += snprintf(u + p, sizeof(u) - (size_t)p, "%02x", v[13].v.uuid[b]);
                if (b == 3 || b == 5 || b == 7 || b == 9)
                    u[p++] = '-';
            }
            u[p] = 0;
            json_object_set_new(o, "c_uuid", json_string(u));
        }
        json_array_append_new(rows, o);
        if (cdc_pq_writer_append(w, v, &e) != CDC_OK)
            die("append row", &e);
    }
    cdc_ice_data_file_t df;
    store_parquet(c, w, cdc_ice_table_get_location(c->t), "alltypes", &df);
    commit(c, &df, 1, NULL, 0, 1);
    return rows;
}

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "ice-testgen: storage check failed: %s: %s\n", what, e.msg);           \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int run_storage(cdc_storage_t *st, const char *warehouse, const char *tmpdir)
{
    cdc_error_t e = {0};
    char a[512], b[512], local[512], prefix[512];
    snprintf(prefix, sizeof(prefix), "%s/storage-check/", warehouse);
    snprintf(a, sizeof(a), "%sa.bin", prefix);
    snprintf(b, sizeof(b), "%ssub/big.bin", prefix);
    CHECK(cdc_storage_put(st, a, "hello", 5, &e) == CDC_OK, "put");
    CHECK(cdc_storage_put_if_absent(st, a, "other", 5, &e) == CDC_ERR_EXISTS, "put-if-absent");
    uint8_t *buf;
    size_t len;
    CHECK(cdc_storage_get(st, a, &buf, &len, &e) == CDC_OK && len == 5 &&
              memcmp(buf, "hello", 5) == 0,
          "get");
    free(buf);
    /* 12 MiB with a 5 MiB part size: three parts */
    size_t big = 12u << 20;
    uint8_t *data = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (uint8_t)(i * 7 + (i >> 20));
    snprintf(local, sizeof(local), "%s/ice-testgen-big-%d.bin", tmpdir, (int)getpid());
    FILE *f = fopen(local, "wb");
    CHECK(f && fwrite(data, 1, big, f) == big && fclose(f) == 0, "write local file");
    CHECK(cdc_storage_put_file(st, b, local, &e) == CDC_OK, "multipart put_file");
    unlink(local);
    int64_t size = 0;
    CHECK(cdc_storage_size(st, b, &size, &e) == CDC_OK && size == (int64_t)big, "size");
    CHECK(cdc_storage_get(st, b, &buf, &len, &e) == CDC_OK && len == big &&
              memcmp(buf, data, big) == 0,
          "get multipart object");
    free(buf);
    free(data);
    char **locs;
    size_t n;
    CHECK(cdc_storage_list(st, prefix, &locs, &n, &e) == CDC_OK && n == 2, "list");
    cdc_storage_list_free(locs, n);
    CHECK(cdc_storage_delete(st, a, &e) == CDC_OK, "delete");
    CHECK(cdc_storage_delete(st, a, &e) == CDC_OK, "delete missing");
    bool exists = true;
    CHECK(cdc_storage_exists(st, a, &exists, &e) == CDC_OK && !exists, "exists after delete");
    CHECK(cdc_storage_get(st, a, &buf, &len, &e) == CDC_ERR_NOT_FOUND, "get missing");
    CHECK(cdc_storage_delete(st, b, &e) == CDC_OK, "delete big");
    printf("storage checks passed\n");
    return 0;
}

int main(int argc, char **argv)
{
    options_t o;
    memset(&o, 0, sizeof(o));
    cdc_config_load(OPTS, "ice-testgen", "writes an Iceberg test table and its expected rows", argc,
                    argv, &o);
    cdc_error_t e;
    cdc_storage_config_t sc = cdc_s3_options_storage(&o.s3);
    sc.multipart_threshold = 5u << 20;
    sc.part_size = 5u << 20;
    sc.max_retries = 3;
    ctx_t c;
    memset(&c, 0, sizeof(c));
    c.o = &o;
    rng = (uint64_t)o.seed * 2654435761u + 0x9e3779b97f4a7c15ull;
    if (cdc_storage_open(o.warehouse, &sc, &c.st, &e) != CDC_OK)
        die("open storage", &e);
    cdc_pq_options_init(&c.pq);
    if (cdc_pq_codec_parse(o.codec, &c.pq.codec) != CDC_OK)
        die("bad --codec", NULL);
    if (strcmp(o.mode, "storage") == 0) {
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        int rc = run_storage(c.st, o.warehouse, tmp);
        cdc_storage_close(c.st);
        cdc_config_free(OPTS, &o);
        return rc;
    }
    c.location = cdc_ice_table_location(o.warehouse, o.ns, o.table);
    json_t *rows;
    int64_t conflicts = 0;
    if (strcmp(o.mode, "race") == 0)
        rows = run_race(&c, &conflicts);
    else
        rows = strcmp(o.mode, "alltypes") == 0 ? run_alltypes(&c) : run_random(&c);

    cdc_ice_live_file_t *lf;
    size_t nlf;
    if (cdc_ice_table_live_files(c.t, &lf, &nlf, &e) != CDC_OK)
        die("list live files", &e);
    json_t *data = json_array(), *dels = json_array();
    int64_t data_records = 0;
    for (size_t i = 0; i < nlf; i++) {
        json_t *o2 =
            json_pack("{s:s, s:I, s:I, s:I, s:i}", "path", lf[i].file.path, "records",
                      (json_int_t)lf[i].file.record_count, "size",
                      (json_int_t)lf[i].file.file_size_in_bytes, "sequence_number",
                      (json_int_t)lf[i].sequence_number, "spec_id", (int)lf[i].file.spec_id);
        if (lf[i].file.content == CDC_ICE_CONTENT_DATA) {
            json_array_append_new(data, o2);
            data_records += lf[i].file.record_count;
        } else {
            json_array_append_new(dels, o2);
        }
    }
    cdc_ice_live_files_free(lf, nlf);
    const cdc_ice_metadata_t *md = cdc_ice_table_metadata(c.t);
    json_t *out =
        json_pack("{s:s, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:I}", "table",
                  cdc_ice_table_get_location(c.t), "rows", rows, "data_files", data, "delete_files",
                  dels, "data_records", (json_int_t)data_records, "snapshots",
                  (json_int_t)md->nsnapshots, "version", (json_int_t)cdc_ice_table_version(c.t),
                  "seed", (json_int_t)o.seed, "conflicts", (json_int_t)conflicts);
    if (json_dump_file(out, o.out, JSON_INDENT(1)) != 0) {
        fprintf(stderr, "ice-testgen: could not write \"%s\"\n", o.out);
        return 1;
    }
    json_decref(out);
    cdc_ice_table_close(c.t);
    free(c.location);
    cdc_storage_close(c.st);
    cdc_config_free(OPTS, &o);
    return 0;
}
