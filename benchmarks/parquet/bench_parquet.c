/*
 * Parquet write benchmark (benchmarks/parquet/run.sh drives it).
 *   bench_parquet gen <rows> <csv>          writes the deterministic input rows
 *   bench_parquet write <csv> <dir> [runs]  loads the CSV into memory (not timed),
 *       then writes it with common/iceberg/parquet.c (zstd, defaults) `runs` times
 *       and prints "rows=<n> best_seconds=<s> bytes=<file size>"
 * The same CSV is loaded into DuckDB, which writes it with COPY ... TO, so both
 * writers see identical data. Columns: id long, status string (5 values),
 * account string (50,000 values), amount decimal(12,2), ts timestamptz,
 * score double, flag boolean, note optional string (70% nulls).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/iceberg/parquet.h"
#include "common/iceberg/schema.h"

#define NCOLS 8

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int gen(long rows, const char *csv)
{
    static const char *const statuses[] = {"active", "pending", "closed", "suspended", "review"};
    FILE *f = fopen(csv, "w");
    uint64_t seed = 42;

    if (f == NULL) {
        perror(csv);
        return 1;
    }
    fprintf(f, "id,status,account,amount,ts,score,flag,note\n");
    for (long i = 0; i < rows; i++) {
        uint64_t r1 = splitmix(&seed), r2 = splitmix(&seed), r3 = splitmix(&seed);
        int64_t cents = (int64_t)(r1 % 10000000) - 100000;
        int64_t ts = 1700000000000000LL + i * 1000 + (int64_t)(r2 % 1000);
        double score = (double)(r3 >> 11) / 9007199254740992.0 * 1000.0;
        fprintf(f, "%ld,%s,acct-%05" PRIu64 ",%s%" PRId64 ".%02" PRId64 ",%" PRId64 ",%.17g,%s,",
                i + 1, statuses[(r1 >> 32) % 5 == 4 && (r2 & 7) ? 0 : (r1 >> 32) % 5],
                (r2 >> 20) % 50000, cents < 0 ? "-" : "", (int64_t)(llabs(cents) / 100),
                (int64_t)(llabs(cents) % 100), ts, score, (r3 & 1) ? "true" : "false");
        if (r3 % 10 < 3)
            fprintf(f, "note %" PRIu64, (r3 >> 8) % 1000);
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : 1;
}

typedef struct table {
    long rows;
    int64_t *id, *amount, *ts;
    double *score;
    uint8_t *flag, *note_null;
    char *strings; /* status, account, note per row, each NUL-terminated */
    size_t *status_off, *account_off, *note_off;
} table_t;

static int load(const char *csv, table_t *t)
{
    FILE *f = fopen(csv, "r");
    char line[512];
    size_t cap = 0, len = 0, rcap = 0;

    if (f == NULL) {
        perror(csv);
        return 1;
    }
    memset(t, 0, sizeof(*t));
    if (fgets(line, sizeof(line), f) == NULL) {
        fclose(f);
        return 1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *fld[NCOLS], *p = line;
        size_t n = strcspn(line, "\r\n");
        line[n] = '\0';
        for (int i = 0; i < NCOLS; i++) {
            fld[i] = p;
            p = strchr(p, ',');
            if (p != NULL)
                *p++ = '\0';
            else
                p = line + n;
        }
        if (t->rows == (long)rcap) {
            rcap = rcap ? rcap * 2 : 1 << 16;
            t->id = realloc(t->id, rcap * 8);
            t->amount = realloc(t->amount, rcap * 8);
            t->ts = realloc(t->ts, rcap * 8);
            t->score = realloc(t->score, rcap * 8);
            t->flag = realloc(t->flag, rcap);
            t->note_null = realloc(t->note_null, rcap);
            t->status_off = realloc(t->status_off, rcap * sizeof(size_t));
            t->account_off = realloc(t->account_off, rcap * sizeof(size_t));
            t->note_off = realloc(t->note_off, rcap * sizeof(size_t));
            if (!t->id || !t->amount || !t->ts || !t->score || !t->flag || !t->note_null ||
                !t->status_off || !t->account_off || !t->note_off) {
                fclose(f);
                return 1;
            }
        }
        long r = t->rows++;
        t->id[r] = strtoll(fld[0], NULL, 10);
        __int128 dec = 0;
        cdc_ice_decimal_parse(fld[3], strlen(fld[3]), 12, 2, &dec);
        t->amount[r] = (int64_t)dec;
        t->ts[r] = strtoll(fld[4], NULL, 10);
        t->score[r] = strtod(fld[5], NULL);
        t->flag[r] = strcmp(fld[6], "true") == 0;
        t->note_null[r] = fld[7][0] == '\0';
        size_t need = strlen(fld[1]) + strlen(fld[2]) + strlen(fld[7]) + 3;
        if (len + need > cap) {
            cap = cap ? cap * 2 : 1 << 20;
            t->strings = realloc(t->strings, cap);
            if (t->strings == NULL) {
                fclose(f);
                return 1;
            }
        }
        t->status_off[r] = len;
        len += (size_t)sprintf(t->strings + len, "%s", fld[1]) + 1;
        t->account_off[r] = len;
        len += (size_t)sprintf(t->strings + len, "%s", fld[2]) + 1;
        t->note_off[r] = len;
        len += (size_t)sprintf(t->strings + len, "%s", fld[7]) + 1;
    }
    fclose(f);
    return 0;
}

static void table_free(table_t *t)
{
    free(t->id);
    free(t->amount);
    free(t->ts);
    free(t->score);
    free(t->flag);
    free(t->note_null);
    free(t->strings);
    free(t->status_off);
    free(t->account_off);
    free(t->note_off);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_str(cdc_ice_value_t *v, const char *s)
{
    v->is_null = false;
    v->v.bytes.ptr = (const uint8_t *)s;
    v->v.bytes.len = strlen(s);
}

static int write_once(const table_t *t, const char *path, double *secs, int64_t *bytes)
{
    cdc_ice_field_t fields[NCOLS] = {
        {.id = 1, .name = "id", .type = CDC_ICE_LONG, .required = true},
        {.id = 2, .name = "status", .type = CDC_ICE_STRING, .required = true},
        {.id = 3, .name = "account", .type = CDC_ICE_STRING, .required = true},
        {.id = 4,
         .name = "amount",
         .type = CDC_ICE_DECIMAL,
         .precision = 12,
         .scale = 2,
         .required = true},
        {.id = 5, .name = "ts", .type = CDC_ICE_TIMESTAMPTZ, .required = true},
        {.id = 6, .name = "score", .type = CDC_ICE_DOUBLE, .required = true},
        {.id = 7, .name = "flag", .type = CDC_ICE_BOOLEAN, .required = true},
        {.id = 8, .name = "note", .type = CDC_ICE_STRING, .required = false},
    };
    int32_t ident[] = {1};
    cdc_ice_schema_t schema = {.schema_id = 0,
                               .fields = fields,
                               .nfields = NCOLS,
                               .identifier_ids = ident,
                               .nidentifier = 1};
    cdc_pq_writer_t *w = NULL;
    cdc_ice_data_file_t df;
    cdc_error_t err;
    cdc_ice_value_t vals[NCOLS];
    double start;

    unlink(path);
    start = now();
    if (cdc_pq_writer_open_file(&schema, path, NULL, &w, &err) != CDC_OK)
        goto fail;
    memset(vals, 0, sizeof(vals));
    for (long r = 0; r < t->rows; r++) {
        vals[0].v.i64 = t->id[r];
        set_str(&vals[1], t->strings + t->status_off[r]);
        set_str(&vals[2], t->strings + t->account_off[r]);
        vals[3].v.dec = t->amount[r];
        vals[4].v.i64 = t->ts[r];
        vals[5].v.f64 = t->score[r];
        vals[6].v.b = t->flag[r];
        if (t->note_null[r])
            vals[7].is_null = true;
        else
            set_str(&vals[7], t->strings + t->note_off[r]);
        if (cdc_pq_writer_append(w, vals, &err) != CDC_OK)
            goto fail;
    }
    if (cdc_pq_writer_close(w, &df, &err) != CDC_OK)
        goto fail;
    *secs = now() - start;
    *bytes = df.file_size_in_bytes;
    cdc_ice_data_file_clear(&df);
    cdc_pq_writer_free(w);
    return 0;
fail:
    fprintf(stderr, "bench_parquet: %s\n", err.msg);
    cdc_pq_writer_free(w);
    return 1;
}

int main(int argc, char **argv)
{
    table_t t;
    char path[1024];
    double best = 1e30;
    int64_t bytes = 0;
    int runs;

    if (argc == 4 && strcmp(argv[1], "gen") == 0)
        return gen(atol(argv[2]), argv[3]);
    if (argc < 4 || strcmp(argv[1], "write") != 0) {
        fprintf(stderr, "usage: bench_parquet gen <rows> <csv> | write <csv> <dir> [runs]\n");
        return 2;
    }
    runs = argc > 4 ? atoi(argv[4]) : 3;
    if (load(argv[2], &t) != 0) {
        fprintf(stderr, "bench_parquet: could not load \"%s\"\n", argv[2]);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/cdc.parquet", argv[3]);
    for (int i = 0; i < runs; i++) {
        double s;
        if (write_once(&t, path, &s, &bytes) != 0) {
            table_free(&t);
            return 1;
        }
        if (s < best)
            best = s;
    }
    table_free(&t);
    printf("rows=%ld best_seconds=%.6f bytes=%" PRId64 "\n", t.rows, best, bytes);
    return 0;
}
