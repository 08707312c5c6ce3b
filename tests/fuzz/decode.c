/*
 * Fuzz target: change events as the worker consumes them (worker/decode.h): the capture's
 * events (its schemas registered as on the schema topic) and Debezium's forms, through
 * cdc_decode (the direct decoder of worker/decode_fast.c first) and through the general
 * decoder alone, which must agree (worker/decode_int.h).
 *
 * Input: one flags byte, the record key, a NUL byte, the value (no NUL: no value, a
 * tombstone). Flags bit 0: the capture's topic (cdc.public.orders, schema versions 1 and
 * 2 of tests/unit/fixtures/worker registered) or a Debezium one without registered
 * schema; bits 1-2: the `cdc.schema` header (none, 1, 2, 3); bit 3: a 64-byte record limit.
 */
#include <stdio.h>

#include "tests/fuzz/fuzz.h"
#include "worker/decode.h"
#include "worker/decode_int.h"

#define CAPTURE_TOPIC "cdc.public.orders"

static char *schemas[2];
static size_t schema_lens[2];

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 || (buf = malloc((size_t)n + 1)) == NULL ||
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr,
                "decode: cannot read %s (run from the repository root or set "
                "CDC_SOURCE_DIR)\n",
                path);
        abort();
    }
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *root = getenv("CDC_SOURCE_DIR");
    (void)argc;
    (void)argv;
    for (int v = 1; v <= 2; v++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/tests/unit/fixtures/worker/capture_schema_v%d.json",
                 root ? root : ".", v);
        schemas[v - 1] = slurp(path, &schema_lens[v - 1]);
    }
    return 0;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "decode: cdc_decode and cdc_decode_tree differ: %s %s\n", what, detail);
    abort();
}

static void same_row(const cdc_row_t *a, const cdc_row_t *b)
{
    if ((a->vals == NULL) != (b->vals == NULL) || a->schema != b->schema)
        die("row", "presence or schema");
    if (a->vals == NULL)
        return;
    for (size_t i = 0; i < a->schema->ncols; i++) {
        const cdc_val_t *x = &a->vals[i], *y = &b->vals[i];
        if (x->kind != y->kind || memcmp(&x->u, &y->u, sizeof(x->u)) != 0 || x->len != y->len ||
            (x->bytes == NULL) != (y->bytes == NULL) ||
            (x->bytes && x->len && memcmp(x->bytes, y->bytes, x->len) != 0))
            die("column", a->schema->cols[i].name);
    }
}

static void same_change(const cdc_change_t *a, const cdc_change_t *b)
{
    if (a->op != b->op || a->lsn != b->lsn || a->commit_lsn != b->commit_lsn ||
        a->tx_id != b->tx_id || a->source_ts_us != b->source_ts_us || a->schema != b->schema ||
        a->tombstone != b->tombstone || a->backfill != b->backfill || a->floor != b->floor ||
        a->entity_len != b->entity_len ||
        (a->entity_len && memcmp(a->entity, b->entity, a->entity_len) != 0))
        die("header", "");
    same_row(&a->before, &b->before);
    same_row(&a->after, &b->after);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t headers[4] = {-1, 1, 2, 3};
    cdc_decode_options_t opts = {0};
    cdc_decode_input_t in = {0};
    cdc_change_t a, b;
    cdc_decode_error_t da, db;
    cdc_error_t e;
    const uint8_t *value;
    size_t key_len, value_len;

    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    fuzz_split(data + 1, size - 1, 0, &key_len, &value, &value_len);
    bool has_value = key_len < size - 1;

    cdc_catalog_t *cat = cdc_catalog_new();
    if (cat == NULL)
        return 0;
    for (int v = 0; v < 2; v++)
        if (cdc_catalog_register_json(cat, CAPTURE_TOPIC, v + 1, schemas[v], schema_lens[v], &e) !=
            CDC_OK)
            die("fixture schema", e.msg);
    in.topic = flags & 1 ? "dbserver1.inventory.customers" : CAPTURE_TOPIC;
    in.partition = 3;
    in.offset = 77;
    in.key = key_len ? data + 1 : NULL;
    in.key_len = key_len;
    in.value = has_value ? value : NULL;
    in.value_len = value_len;
    in.schema_version = headers[(flags >> 1) & 3];
    if (flags & 8)
        opts.max_record_bytes = 64;

    cdc_err_t ra = cdc_decode(cat, &opts, &in, &a, &da);
    cdc_err_t rb = cdc_decode_tree(cat, &opts, &in, &b, &db);
    if (ra != rb)
        die("result", db.msg);
    if (ra == CDC_OK) {
        same_change(&a, &b);
        cdc_change_clear(&a);
        cdc_change_clear(&b);
    } else if (ra == CDC_ERR_INVALID && (da.cls != db.cls || strcmp(da.msg, db.msg) != 0 ||
                                         da.schema_version != db.schema_version)) {
        die("error", da.msg);
    }
    cdc_catalog_free(cat);
    return 0;
}
