/*
 * Differential tests of the direct capture-event decoder (worker/decode_fast.c) against
 * the general tree decoder (cdc_decode_tree): a corpus of events written by the capture's
 * own encoder (capture/event.c) over every column type, hand-written edge cases
 * (escapes, numbers, duplicates, envelopes of other forms, malformed documents) and
 * mechanical mutations of all of them (every prefix, byte substitutions). For each input
 * cdc_decode (direct path first) must give exactly what the tree path gives: return code,
 * DLQ class and message, position, op, schema, row values and entity. The well-formed
 * corpus must also actually take the direct path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture/event.h"
#include "common/cdcschema.h"
#include "worker/decode.h"
#include "worker/decode_int.h"

static const char *TOPIC = "cdc.public.every";

/* Under ThreadSanitizer (make tsan, docs/development.md) the mechanical mutations take
 * every 7th cut and position: this test runs no threads, so TSan has nothing to find
 * in it, and the full quadratic set took over 20 minutes there. Every other build runs
 * them all. */
#if defined(__SANITIZE_THREAD__)
#define STEP 7
#else
#define STEP 1
#endif

/* Columns of the test table: every type the capture's schema mapping produces. */
static const struct {
    const char *name;
    uint32_t oid;
    int32_t typmod;
    int key;
    bool nullable;
    uint32_t elem;
} COLS[] = {
    {"id", CDC_PG_INT8, -1, 1, false, 0},
    {"region", CDC_PG_TEXT, -1, 2, false, 0},
    {"small", CDC_PG_INT2, -1, 0, true, 0},
    {"i4", CDC_PG_INT4, -1, 0, true, 0},
    {"flag", CDC_PG_BOOL, -1, 0, true, 0},
    {"f4", CDC_PG_FLOAT4, -1, 0, true, 0},
    {"f8", CDC_PG_FLOAT8, -1, 0, true, 0},
    {"amount", CDC_PG_NUMERIC, ((12 << 16) | 3) + 4, 0, true, 0},
    {"bignum", CDC_PG_NUMERIC, -1, 0, true, 0},
    {"txt", CDC_PG_TEXT, -1, 0, true, 0},
    {"vc", CDC_PG_VARCHAR, -1, 0, true, 0},
    {"bin", CDC_PG_BYTEA, -1, 0, true, 0},
    {"d", CDC_PG_DATE, -1, 0, true, 0},
    {"t", CDC_PG_TIME, -1, 0, true, 0},
    {"ts", CDC_PG_TIMESTAMP, -1, 0, true, 0},
    {"tstz", CDC_PG_TIMESTAMPTZ, -1, 0, true, 0},
    {"u", CDC_PG_UUID, -1, 0, true, 0},
    {"j", CDC_PG_JSONB, -1, 0, true, 0},
    {"ints", 1007, -1, 0, true, CDC_PG_INT4},
    {"texts", 1009, -1, 0, true, CDC_PG_TEXT},
    {"req", CDC_PG_INT4, -1, 0, false, 0},
};
enum { NCOLS = sizeof(COLS) / sizeof(COLS[0]) };

static cdc_schema_doc_t DOC;

static void build_doc(void)
{
    memset(&DOC, 0, sizeof(DOC));
    DOC.format = 1;
    DOC.topic = strdup(TOPIC);
    DOC.pg_schema = strdup("public");
    DOC.pg_table = strdup("every");
    DOC.version = 1;
    DOC.relid = 16400;
    DOC.replica_identity = 'd';
    DOC.ncols = NCOLS;
    DOC.cols = calloc(NCOLS, sizeof(cdc_schema_col_t));
    for (size_t i = 0; i < NCOLS; i++) {
        cdc_schema_col_t *c = &DOC.cols[i];
        c->name = strdup(COLS[i].name);
        c->pg_oid = COLS[i].oid;
        c->pg_type = strdup(
            cdc_schema_pg_type_name(COLS[i].oid) ? cdc_schema_pg_type_name(COLS[i].oid) : "_array");
        c->typmod = COLS[i].typmod;
        c->nullable = COLS[i].nullable;
        c->key = COLS[i].key;
        c->elem_oid = COLS[i].elem;
        cdc_schema_map_type(COLS[i].oid, COLS[i].typmod, &c->ice_type, &c->precision, &c->scale,
                            &c->enc);
        if (COLS[i].elem) {
            c->ice_type = CDC_ICE_STRING;
            c->enc = CDC_VENC_ARRAY;
        }
    }
}

static cdc_catalog_t *catalog(void)
{
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    char *json = NULL;
    build_doc();
    assert_int_equal(cdc_schema_doc_encode(&DOC, &json, &e), CDC_OK);
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 1, json, strlen(json), &e), CDC_OK);
    /* version 2 drops "vc" and adds "extra" (field ids stay by name) */
    DOC.version = 2;
    free(DOC.cols[10].name);
    DOC.cols[10].name = strdup("extra");
    free(json);
    assert_int_equal(cdc_schema_doc_encode(&DOC, &json, &e), CDC_OK);
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 2, json, strlen(json), &e), CDC_OK);
    free(DOC.cols[10].name);
    DOC.cols[10].name = strdup("vc");
    DOC.version = 1;
    free(json);
    return cat;
}

/* ---- comparison ------------------------------------------------------------------ */

static void assert_vals_equal(const cdc_row_t *a, const cdc_row_t *b, const char *what)
{
    if (a->vals == NULL || b->vals == NULL) {
        if (a->vals != b->vals)
            fail_msg("%s: row presence differs", what);
        return;
    }
    assert_ptr_equal(a->schema, b->schema);
    for (size_t i = 0; i < a->schema->ncols; i++) {
        const cdc_val_t *x = &a->vals[i], *y = &b->vals[i];
        if (x->kind != y->kind || memcmp(&x->u, &y->u, sizeof(x->u)) != 0 || x->len != y->len ||
            (x->bytes == NULL) != (y->bytes == NULL) ||
            (x->bytes && x->len && memcmp(x->bytes, y->bytes, x->len) != 0))
            fail_msg("%s: column %s differs", what, a->schema->cols[i].name);
    }
}

static void assert_changes_equal(const cdc_change_t *a, const cdc_change_t *b, const char *what)
{
    if (a->op != b->op || a->lsn != b->lsn || a->commit_lsn != b->commit_lsn ||
        a->tx_id != b->tx_id || a->source_ts_us != b->source_ts_us || a->schema != b->schema ||
        a->topic != b->topic || a->partition != b->partition || a->offset != b->offset ||
        a->tombstone != b->tombstone || a->backfill != b->backfill ||
        a->snapshot_tag != b->snapshot_tag || a->entity_len != b->entity_len ||
        (a->entity_len && memcmp(a->entity, b->entity, a->entity_len) != 0))
        fail_msg("%s: change header differs (op %c/%c lsn %llu/%llu commit %llu/%llu)", what, a->op,
                 b->op, (unsigned long long)a->lsn, (unsigned long long)b->lsn,
                 (unsigned long long)a->commit_lsn, (unsigned long long)b->commit_lsn);
    assert_ptr_equal(a->before.schema, b->before.schema);
    assert_ptr_equal(a->after.schema, b->after.schema);
    assert_vals_equal(&a->before, &b->before, what);
    assert_vals_equal(&a->after, &b->after, what);
}

static long n_fast, n_cases;
static int header_calls;

static int64_t header_cb(const void *arg)
{
    header_calls++;
    return *(const int64_t *)arg;
}

/*
 * Decodes value through cdc_decode and cdc_decode_tree and asserts identical outcomes,
 * with the header version passed as a value and then through the lookup callback (which
 * cdc_decode calls at most once). Returns whether the direct decoder took it.
 */
static bool differential(cdc_catalog_t *cat, const char *value, size_t len, int64_t version,
                         const char *what)
{
    cdc_decode_input_t in = {TOPIC, 4, 77, "{\"id\":1}", 8, value, len, version, NULL, NULL};
    cdc_decode_input_t lazy = {TOPIC, 4, 77, "{\"id\":1}", 8, value, len, -1, header_cb, &version};
    cdc_change_t a, b, f;
    cdc_decode_error_t da, db, df;
    cdc_err_t ra, rb;
    bool fast;

    n_cases++;
    memset(&f, 0, sizeof(f));
    for (int pass = 0; pass < 2; pass++) {
        header_calls = 0;
        ra = cdc_decode(cat, NULL, pass ? &lazy : &in, &a, &da);
        if (header_calls > 1)
            fail_msg("%s: %d header lookups", what, header_calls);
        rb = cdc_decode_tree(cat, NULL, &in, &b, &db);
        if (ra != rb)
            fail_msg("%s: rc %d (decode) vs %d (tree): %s", what, ra, rb, db.msg);
        if (ra == CDC_OK)
            assert_changes_equal(&a, &b, what);
        if (da.cls != db.cls || strcmp(da.msg, db.msg) != 0 ||
            da.schema_version != db.schema_version)
            fail_msg("%s: error differs: %d %s (v%lld) / %d %s (v%lld)", what, da.cls, da.msg,
                     (long long)da.schema_version, db.cls, db.msg, (long long)db.schema_version);
        if (ra == CDC_OK)
            cdc_change_clear(&a);
        if (rb == CDC_OK)
            cdc_change_clear(&b);
    }
    rb = cdc_decode_tree(cat, NULL, &in, &b, &db);
    /* The direct decoder on its own: success only where the tree succeeds, same result. */
    fast = value != NULL && cdc_decode_fast(cat, NULL, &in, &f, &df);
    if (fast) {
        if (df.cls != db.cls || df.schema_version != db.schema_version || df.msg[0] != '\0')
            fail_msg("%s: direct decoder's error record differs", what);
        if (rb != CDC_OK || b.tombstone)
            fail_msg("%s: direct decoder accepted what the tree path rejects (%s)", what, db.msg);
        assert_changes_equal(&f, &b, what);
        cdc_change_clear(&f);
        n_fast++;
    } else {
        assert_null(f.entity);
        assert_null(f.before.vals);
        assert_null(f.after.vals);
    }
    if (rb == CDC_OK)
        cdc_change_clear(&b);
    return fast;
}

/* ---- corpus written by the capture's encoder -------------------------------------- */

typedef struct row_text {
    const char *v[NCOLS]; /* PostgreSQL text; NULL = SQL null; UNCH = unchanged TOAST */
} row_text_t;

static const char UNCH[] = "<unchanged>";

static void fill_tuple(cdc_pgo_tuple_t *t, cdc_pgo_value_t *vals, const row_text_t *r)
{
    t->ncols = NCOLS;
    t->cols = vals;
    for (size_t i = 0; i < NCOLS; i++) {
        if (r->v[i] == NULL) {
            vals[i].kind = CDC_PGO_VAL_NULL;
            vals[i].data = NULL;
            vals[i].len = 0;
        } else if (r->v[i] == UNCH) {
            vals[i].kind = CDC_PGO_VAL_UNCHANGED;
            vals[i].data = NULL;
            vals[i].len = 0;
        } else {
            vals[i].kind = CDC_PGO_VAL_TEXT;
            vals[i].data = r->v[i];
            vals[i].len = (uint32_t)strlen(r->v[i]);
        }
    }
}

/* Encodes an event with capture/event.c; caller frees. */
static char *encode(char op, const row_text_t *before, bool key_only, const row_text_t *after,
                    const char *snapshot, uint64_t lsn, int64_t envelope_version)
{
    cdc_pgo_tuple_t tb, ta;
    cdc_pgo_value_t vb[NCOLS], va[NCOLS];
    cdc_buf_t b = {0};
    cdc_event_t ev;
    memset(&ev, 0, sizeof(ev));
    if (before)
        fill_tuple(&tb, vb, before);
    if (after)
        fill_tuple(&ta, va, after);
    ev.op = op;
    ev.schema = &DOC;
    ev.before = before ? &tb : NULL;
    ev.before_key_only = key_only;
    ev.after = after ? &ta : NULL;
    ev.lsn = lsn;
    ev.commit_lsn = lsn + 100;
    ev.xid = 991;
    ev.source_ts_ms = 1709287200123;
    ev.ts_ms = 1709287200456;
    ev.snapshot = snapshot;
    /* snapshot rows with and without the snapshot's id (source.snapshot_id) */
    ev.snapshot_id = op == 'r' && (lsn & 1) == 0 ? "s1a2b3c" : NULL;
    ev.db = "app";
    ev.name = "cdc";
    DOC.version = envelope_version; /* 0: no source.schema_version (older captures) */
    cdc_event_encode_value(&b, &ev);
    DOC.version = 1;
    assert_false(b.oom);
    return b.data;
}

static const row_text_t ROWS[] = {
    {{"1",
      "eu",
      "-32768",
      "2147483647",
      "t",
      "1.5",
      "3.141592653589793",
      "12345.678",
      "123456789012345678901234567890.123456789",
      "plain text",
      "varchar",
      "\\xdeadbeef",
      "2024-02-29",
      "12:34:56.789",
      "2024-03-01 10:00:00.123456",
      "2024-03-01 10:00:00+05:30",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      "{\"a\": [1, \"x\\\"y\"], \"b\": null}",
      "{1,2,NULL}",
      "{{a,b},{\"c d\",e}}",
      "7"}},
    {{"2",  "us", NULL, NULL, "f",  "NaN", "Infinity", "-0.001", "NaN", NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL,  NULL,       NULL,     NULL,  "0"}},
    {{"3",
      "q\"uote\\back",
      "0",
      "-1",
      NULL,
      "-Infinity",
      "-0",
      "0",
      "1e5",
      "tab\there\nnew\rline\x01\x1f ctl \"q\" \\ /",
      "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80",
      "\\x",
      "0001-01-01 BC",
      "24:00:00",
      "1970-01-01 00:00:00",
      "2024-03-01 10:00:00-08",
      "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
      "[]",
      "{}",
      "{\"\\\\\",\"\\\"\"}",
      "-5"}},
    {{"999999999999999999",
      "",
      "32767",
      "-2147483648",
      "t",
      "3.4028235e+38",
      "1.7976931348623157e308",
      "999999999.999",
      "-0.000000000000000000001",
      "",
      "\xe2\x82\xac",
      "\\x00ff10",
      "9999-12-31",
      "00:00:00",
      "2262-04-11 23:47:16.854775",
      "1900-01-01 00:00:00+00",
      "00000000-0000-0000-0000-000000000000",
      "\"str\"",
      "{NULL}",
      "{NULL,\"NULL\"}",
      "1"}},
    {{"-999999999999999999",
      "x",
      "1",
      "1",
      "f",
      "1e-45",
      "2.2250738585072014e-308",
      "1e3",
      "1.0",
      "a",
      "b",
      "\\x41",
      "1970-01-01",
      "23:59:59.999999",
      "1969-12-31 23:59:59.999999",
      "2024-01-01 00:00:00.5+01:30:15",
      "ffffffff-ffff-ffff-ffff-ffffffffffff",
      "123",
      "{-1,0,1}",
      "{\"\"}",
      "2"}},
    /* PostgreSQL's infinities and a numeric NaN (docs/worker.md, "Values no Iceberg type
     * holds"): both decoders map them alike */
    {{"14",
      "inf",
      "1",
      "1",
      "t",
      "1",
      "1",
      "NaN",
      "NaN",
      "a",
      "b",
      "\\x00",
      "infinity",
      "00:00:00",
      "-infinity",
      "infinity",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      "{}",
      "{}",
      "{}",
      "1"}},
    {{"15",
      "inf",
      "1",
      "1",
      "t",
      "1",
      "1",
      "1",
      "1",
      "a",
      "b",
      "\\x00",
      "-infinity",
      "00:00:00",
      "infinity",
      "-infinity",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      "{}",
      "{}",
      "{}",
      "1"}},
    /* values the tree path rejects, or keeps with the column null (docs/worker.md, "Values
     * no Iceberg type holds"): both must agree on the result, class and message */
    {{"10",
      "bad",
      "1",
      "1",
      "t",
      "1",
      "1",
      "NaN",
      "1",
      "a",
      "b",
      "\\xzz",
      "2024-01-01",
      "00:00:00",
      "2024-01-01 00:00:00",
      "2024-01-01 00:00:00+00",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      "{}",
      "{}",
      "{}",
      "1"}},
    {{"11",
      "bad",
      "1",
      "1",
      "t",
      "1",
      "1",
      "1234567890.0",
      "1",
      "a",
      "b",
      "\\x00",
      "2024-01-01",
      "00:00:00",
      "2024-01-01 00:00:00",
      "2024-01-01 00:00:00+00",
      "not-a-uuid",
      "{}",
      "{}",
      "{}",
      "1"}},
    {{"12",
      "bad",
      "1",
      "1",
      "t",
      "1",
      "1",
      "1.0001",
      "1",
      "a",
      "b",
      "\\x00",
      "2024-01-01",
      "00:00:00",
      "2024-01-01 00:00:00",
      "2024-01-01 00:00:00+00",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      "{}",
      "{}",
      "{}",
      NULL}},
    {{NULL,
      "nullkey",
      "1",
      "1",
      "t",
      "1",
      "1",
      "1",
      "1",
      "a",
      "b",
      "\\x00",
      "2024-01-01",
      "00:00:00",
      "2024-01-01 00:00:00",
      "2024-01-01 00:00:00+00",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      "{}",
      "{}",
      "{}",
      "1"}},
    {{"13",
      "toast",
      "1",
      "1",
      "t",
      "1",
      "1",
      "1",
      "1",
      UNCH,
      UNCH,
      UNCH,
      "2024-01-01",
      "00:00:00",
      "2024-01-01 00:00:00",
      "2024-01-01 00:00:00+00",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      UNCH,
      "{}",
      UNCH,
      "1"}},
};
enum { NROWS = sizeof(ROWS) / sizeof(ROWS[0]), NGOOD = 5 };

/* The corpus: every row as c, r (snapshot), u (with full before), d (key-only before). */
static char **corpus(size_t *n)
{
    char **ev = calloc(NROWS * 5, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < NROWS; i++) {
        const row_text_t *prev = &ROWS[(i + 1) % NGOOD];
        ev[k++] = encode('c', NULL, false, &ROWS[i], "false", 1000 + i, 1);
        ev[k++] = encode('r', NULL, false, &ROWS[i], i == 0 ? "true" : "last", i % 2, 0);
        ev[k++] = encode('u', prev, false, &ROWS[i], "false", 2000 + i, i % 2 ? 2 : 0);
        ev[k++] = encode('d', &ROWS[i], true, NULL, "false", 3000 + i, 0);
        ev[k++] = encode('d', &ROWS[i], false, NULL, "false", 4000 + i, 1);
    }
    *n = k;
    return ev;
}

static void test_capture_corpus(void **state)
{
    (void)state;
    cdc_catalog_t *cat = catalog();
    size_t n;
    char **ev = corpus(&n);
    for (size_t i = 0; i < n; i++) {
        char what[64];
        size_t row = i / 5;
        snprintf(what, sizeof(what), "corpus event %zu", i);
        bool fast = differential(cat, ev[i], strlen(ev[i]), 1, what);
        /* The capture's well-formed events take the direct path. */
        if (row < NGOOD || row == NROWS - 1)
            if (!fast)
                fail_msg("%s did not take the direct path: %s", what, ev[i]);
        /* Header versions: version 2 of the schema (a renamed column), unknown, none. */
        differential(cat, ev[i], strlen(ev[i]), 2, what);
        /* Unknown version and no version (latest). */
        differential(cat, ev[i], strlen(ev[i]), 9, what);
        differential(cat, ev[i], strlen(ev[i]), -1, what);
        free(ev[i]);
    }
    free(ev);
    cdc_catalog_free(cat);
    cdc_schema_doc_free(&DOC);
}

/* Every prefix and a set of byte substitutions of every corpus event. */
static void test_mutations(void **state)
{
    (void)state;
    static const char subst[] = {'"', '\\', '{', '}', '[', ']', ',',  ':',    ' ',    '0',   '9',
                                 '-', '.',  'e', 'n', 't', 'x', '\0', '\x1f', '\x80', '\xff'};
    cdc_catalog_t *cat = catalog();
    size_t n;
    char **ev = corpus(&n);
    uint32_t rng = 12345;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(ev[i]);
        char *m = malloc(len + 1);
        if (i % 5 == 0 || i < 10) /* every prefix of a selection (quadratic) */
            for (size_t cut = 0; cut < len; cut += STEP)
                differential(cat, ev[i], cut, 1, "prefix");
        for (size_t pos = 0; pos < len; pos += STEP) {
            rng = rng * 1103515245u + 12345u;
            memcpy(m, ev[i], len + 1);
            m[pos] = subst[(rng >> 16) % sizeof(subst)];
            differential(cat, m, len, 1, "substitution");
        }
        free(m);
        free(ev[i]);
    }
    free(ev);
    cdc_catalog_free(cat);
    cdc_schema_doc_free(&DOC);
}

/* ---- hand-written edge cases ------------------------------------------------------- */

#define SRC                                                                                        \
    "\"source\":{\"version\":\"dev\",\"connector\":\"cdc-capture\",\"name\":\"cdc\",\"db\":"       \
    "\"app\",\"schema\":\"public\",\"table\":\"every\",\"lsn\":500,\"txId\":7,\"ts_ms\":"          \
    "1709287200000,\"sequence\":\"[\\\"600\\\",\\\"500\\\"]\",\"snapshot\":\"false\"}"
#define KEY "\"id\":5,\"region\":\"r\",\"req\":1"

static const struct {
    const char *json;
    bool fast; /* expected to take the direct path */
} EDGE[] = {
    {"{\"before\":null,\"after\":{" KEY "}," SRC ",\"op\":\"c\",\"ts_ms\":1}", true},
    /* whitespace everywhere, members reordered, source after the rows or before them */
    {" \n{ \"op\" : \"c\" ,\t\"after\" :{ " KEY " } , " SRC " }\r\n", true},
    {"{" SRC ",\"after\":{\"req\":1,\"region\":\"r\",\"id\":5},\"op\":\"u\"}", true},
    /* escapes in keys and strings, \u escapes incl. surrogate pairs */
    {"{\"after\":{\"i\\u0064\":5,\"region\":\"\\u00e9\\u20ac\\ud83d\\ude00\\/\\b\\f\",\"req\":1,"
     "\"txt\":\"\\u0041\\n\"}," SRC ",\"op\":\"c\"}",
     true},
    /* unknown members at every level, nested values in them */
    {"{\"after\":{" KEY ",\"gone\":{\"x\":[1,2,{\"y\":null}]},\"g2\":[true,false,-1.5e-3]},"
     "\"transaction\":null,\"ts_us\":5," SRC ",\"op\":\"c\",\"extra\":[[[]]]}",
     true},
    /* source variants: ts_us wins, commit_lsn given, lsn as string, txId null, no sequence */
    {"{\"after\":{" KEY "},\"source\":{\"lsn\":\"123\",\"txId\":null,\"ts_ms\":1,\"ts_us\":"
     "777,\"commit_lsn\":456},\"op\":\"c\"}",
     true},
    {"{\"after\":{" KEY "},\"source\":{\"lsn\":9,\"commit_lsn\":null,\"ts_ms\":\"x\"},\"op\":"
     "\"c\"}",
     true},
    {"{\"after\":{" KEY "},\"source\":{\"lsn\":9,\"sequence\":null},\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "},\"source\":{\"lsn\":9,\"sequence\":\"[null,\\\"9\\\"]\"},\"op\":\"c\"}",
     true},
    {"{\"after\":{" KEY "},\"source\":[1],\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "},\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "},\"source\":{},\"op\":\"r\"}", true},
    /* the envelope's version: wins over the header; 0, negative or not an integer: header */
    {"{\"after\":{" KEY "},\"source\":{\"schema_version\":2},\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "},\"op\":\"c\",\"source\":{\"lsn\":3,\"schema_version\":1}}", true},
    {"{\"after\":{" KEY "},\"source\":{\"schema_version\":0},\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "},\"source\":{\"schema_version\":-3},\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "},\"source\":{\"schema_version\":\"2\"},\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "},\"source\":{\"schema_version\":1.0},\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "},\"source\":{\"schema_version\":8},\"op\":\"c\"}", false},
    {"{\"after\":{" KEY "},\"source\":{\"schema_version\":1,\"schema_version\":2},\"op\":"
     "\"c\"}",
     false},
    {"{\"after\":null,\"before\":null,\"source\":{\"schema_version\":1},\"op\":\"t\"}", false},
    /* unchanged_toast: null, empty, names not in the schema */
    {"{\"after\":{" KEY "}," SRC ",\"op\":\"u\",\"unchanged_toast\":null}", true},
    {"{\"after\":{" KEY "}," SRC ",\"op\":\"u\",\"unchanged_toast\":[]}", true},
    {"{\"after\":{" KEY "}," SRC
     ",\"op\":\"u\",\"unchanged_toast\":[\"txt\",\"nope\",\"t\\u0078t\"]}",
     true},
    /* Debezium's placeholder for an unavailable value */
    {"{\"after\":{" KEY ",\"txt\":\"__debezium_unavailable_value\",\"bin\":"
     "\"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==\"}," SRC ",\"op\":\"u\"}",
     true},
    /* other encodings the converter accepts for the same types */
    {"{\"after\":{" KEY ",\"f8\":5,\"f4\":-7,\"amount\":12,\"bin\":\"\\\\x0a0B\",\"d\":"
     "\"2024-02-03\",\"ts\":\"2024-02-03T04:05:06.7Z\",\"t\":\"01:02:03\"}," SRC ",\"op\":\"c\"}",
     true},
    {"{\"after\":{" KEY ",\"f8\":1e400}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"f8\":1e-400}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"f8\":0.1e1,\"f4\":-0.0}," SRC ",\"op\":\"c\"}", true},
    /* integers: 18 digits fast, more through the tree (ok or out of range) */
    {"{\"after\":{" KEY ",\"i4\":123456789012345678}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{\"id\":999999999999999999,\"region\":\"r\",\"req\":1}," SRC ",\"op\":\"c\"}",
     true},
    {"{\"after\":{\"id\":9223372036854775807,\"region\":\"r\",\"req\":1}," SRC ",\"op\":\"c\"}",
     false},
    {"{\"after\":{\"id\":9223372036854775808,\"region\":\"r\",\"req\":1}," SRC ",\"op\":\"c\"}",
     false},
    {"{\"after\":{\"id\":-0,\"region\":\"r\",\"req\":1}," SRC ",\"op\":\"c\"}", true},
    {"{\"after\":{\"id\":05,\"region\":\"r\",\"req\":1}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"i4\":2147483648}," SRC ",\"op\":\"c\"}", false},
    /* duplicates: jansson keeps the last one */
    {"{\"after\":{" KEY ",\"i4\":1,\"i4\":2}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"zz\":1,\"zz\":2}," SRC ",\"op\":\"c\"}", true},
    {"{\"after\":{" KEY "}," SRC ",\"op\":\"c\",\"op\":\"d\"}", false},
    {"{\"after\":{\"id\":1},\"after\":{" KEY "}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY "},\"source\":{\"lsn\":1,\"lsn\":2},\"op\":\"c\"}", false},
    {"{\"after\":{" KEY "},\"source\":1,\"source\":{\"lsn\":2},\"op\":\"c\"}", false},
    /* rows of other shapes */
    {"{\"before\":[1],\"after\":{" KEY "}," SRC ",\"op\":\"c\"}", true},
    {"{\"before\":{" KEY "},\"after\":5," SRC ",\"op\":\"d\"}", true},
    {"{\"before\":null,\"after\":null," SRC ",\"op\":\"c\"}", false},
    {"{\"before\":null,\"after\":null," SRC ",\"op\":\"d\"}", false},
    {"{\"before\":{\"region\":\"r\"},\"after\":null," SRC ",\"op\":\"d\"}", false},
    {"{\"after\":{" KEY ",\"j\":{\"a\":1}}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"i4\":[1]}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"req\":null}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{\"id\":5,\"region\":\"r\"}," SRC ",\"op\":\"c\"}", true},
    {"{\"after\":{}," SRC ",\"op\":\"c\"}", false},
    /* ops */
    {"{\"after\":{" KEY "}," SRC "}", false},
    {"{\"after\":{" KEY "}," SRC ",\"op\":\"x\"}", false},
    {"{\"after\":{" KEY "}," SRC ",\"op\":\"cc\"}", false},
    {"{\"after\":{" KEY "}," SRC ",\"op\":1}", false},
    {"{\"after\":null,\"before\":null," SRC ",\"op\":\"t\"}", false},
    /* other envelopes */
    {"{\"schema\":{\"type\":\"struct\"},\"payload\":null}", false},
    {"{\"schema\":null,\"after\":{" KEY "}," SRC ",\"op\":\"c\"}", false},
    {"{\"payload\":{\"after\":{" KEY "},\"op\":\"c\"}}", false},
    {"{\"id\":5,\"region\":\"r\",\"req\":1,\"__op\":\"c\",\"__lsn\":5}", false},
    /* strings jansson rejects or that need its checks */
    {"{\"after\":{" KEY ",\"txt\":\"a\\u0000b\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\\ud800\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\\udc00\\ud800\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\\ud800\\u0041\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\\x41\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\\u12\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\xc0\xaf\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\xed\xa0\x80\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\xf4\x90\x80\x80\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\xe2\x82\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\xe0\x80\xaf\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\xf0\x80\x80\xaf\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\xf5\x80\x80\x80\"}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"txt\":\"\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xf4\x8f\xbf\xbf\"}," SRC
     ",\"op\":\"c\"}",
     true},
    {"{\"after\":{" KEY ",\"txt\":\"\xf0\x90\x80\x80\xef\xbf\xbf\"}," SRC ",\"op\":\"c\"}", true},
    {"{\"after\":{" KEY ",\"txt\":\"tab\there\"}," SRC ",\"op\":\"c\"}", false},
    /* malformed documents */
    {"", false},
    {"[]", false},
    {"{}", false},
    {"null", false},
    {"{\"after\":{" KEY "}," SRC ",\"op\":\"c\",}", false},
    {"{\"after\":{" KEY ",}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY "}," SRC ",\"op\":\"c\"} x", false},
    {"{\"after\":{" KEY "}," SRC ",\"op\":\"c\"}{}", false},
    {"{\"after\":{" KEY ",\"flag\":tru}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"flag\":truex}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"f8\":1.}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"f8\":.5}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"f8\":1e}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"f8\":+1}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"f8\":-}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"f8\":NaN}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY " \"i4\":1}," SRC ",\"op\":\"c\"}", false},
    {"{\"after\":{" KEY ",\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]"
     "]]]]]]]]]]]]]]}," SRC ",\"op\":\"c\"}",
     false},
};

static void test_edge_cases(void **state)
{
    (void)state;
    cdc_catalog_t *cat = catalog();
    for (size_t i = 0; i < sizeof(EDGE) / sizeof(EDGE[0]); i++) {
        char what[32];
        snprintf(what, sizeof(what), "edge case %zu", i);
        bool fast = differential(cat, EDGE[i].json, strlen(EDGE[i].json), 1, what);
        if (fast != EDGE[i].fast)
            fail_msg("%s: direct path %s, expected %s: %s", what, fast ? "taken" : "not taken",
                     EDGE[i].fast ? "taken" : "not taken", EDGE[i].json);
        /* and every prefix */
        for (size_t cut = 0; cut < strlen(EDGE[i].json); cut++)
            differential(cat, EDGE[i].json, cut, 1, what);
    }
    /* tombstones and oversized records never reach either decoder's body */
    differential(cat, NULL, 0, 1, "tombstone");
    cdc_catalog_free(cat);
    cdc_schema_doc_free(&DOC);
}

/* Events beyond the decoder's stack buffers: a long text (heap scratch), a row with more
 * members than the stack holds, a schema with more columns than the stack flags. */
static void test_large(void **state)
{
    (void)state;
    cdc_catalog_t *cat = catalog();
    size_t cap = 200000, n = 0;
    char *v = malloc(cap);
    n += (size_t)snprintf(v + n, cap - n, "{\"after\":{" KEY ",\"txt\":\"");
    for (int i = 0; i < 5000; i++)
        n += (size_t)snprintf(v + n, cap - n, "caf\xc3\xa9 \\\"%d\\n ", i);
    n += (size_t)snprintf(v + n, cap - n, "\"");
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(v + n, cap - n, ",\"extra%d\":[%d,\"x\"]", i, i);
    n += (size_t)snprintf(v + n, cap - n, "}," SRC ",\"op\":\"c\"}");
    assert_true(n > 16384);
    assert_true(differential(cat, v, n, 1, "large event"));
    for (size_t cut = n - 200; cut < n; cut++)
        differential(cat, v, cut, 1, "large event prefix");
    free(v);
    cdc_catalog_free(cat);
    cdc_schema_doc_free(&DOC);

    /* 300 columns */
    cat = cdc_catalog_new();
    cdc_error_t e;
    const char *topic = "cdc.public.wide";
    size_t sn = 0;
    char *sj = malloc(cap);
    sn += (size_t)snprintf(sj + sn, cap - sn,
                           "{\"namespace\":\"public\",\"table\":\"wide\","
                           "\"columns\":[{\"name\":\"id\",\"type\":\"long\","
                           "\"key\":true}");
    for (int i = 1; i < 300; i++)
        sn += (size_t)snprintf(sj + sn, cap - sn, ",{\"name\":\"c%d\",\"type\":\"int\"}", i);
    sn += (size_t)snprintf(sj + sn, cap - sn, "]}");
    assert_int_equal(cdc_catalog_register_json(cat, topic, 1, sj, sn, &e), CDC_OK);
    n = 0;
    v = malloc(cap);
    n += (size_t)snprintf(v + n, cap - n, "{\"after\":{\"id\":1");
    for (int i = 299; i > 0; i--)
        n += (size_t)snprintf(v + n, cap - n, ",\"c%d\":%d", i, i * 7);
    n += (size_t)snprintf(v + n, cap - n, "},\"op\":\"c\",\"source\":{\"lsn\":4}}");
    cdc_decode_input_t in = {topic, 0, 1, NULL, 0, v, n, 1, NULL, NULL};
    cdc_change_t a, b;
    cdc_decode_error_t da, db;
    assert_true(cdc_decode_fast(cat, NULL, &in, &a, &da));
    assert_int_equal(cdc_decode_tree(cat, NULL, &in, &b, &db), CDC_OK);
    assert_changes_equal(&a, &b, "300 columns");
    assert_int_equal(a.after.vals[299].u.i, 299 * 7);
    cdc_change_clear(&a);
    cdc_change_clear(&b);
    free(v);
    free(sj);
    cdc_catalog_free(cat);
}

/* Strings of a MiB and more: unescaped into buffers of their own, which string columns
 * take (docs/worker.md, "Large rows"): escapes everywhere, a run of escaped backslashes
 * before the closing quote, a large value in a bytea column and in an ignored member,
 * cut short and mutated, all as the tree path decodes them. */
static void test_big_strings(void **state)
{
    (void)state;
    cdc_catalog_t *cat = catalog();
    size_t cap = (size_t)8 << 20, n = 0;
    char *v = malloc(cap);
    assert_non_null(v);
    n += (size_t)snprintf(v + n, cap - n, "{\"after\":{" KEY ",\"txt\":\"");
    for (int i = 0; n < ((size_t)3 << 19); i++) /* 1.5 MiB */
        n += (size_t)snprintf(v + n, cap - n, "caf\xc3\xa9 \\\"%d\\n \\u00e9 ", i);
    n += (size_t)snprintf(v + n, cap - n, "ends in \\\\\\\\\",\"j\":\"");
    for (int i = 0; n < ((size_t)3 << 20); i++)
        n += (size_t)snprintf(v + n, cap - n, "{\\\"k\\\": %d}", i);
    n += (size_t)snprintf(v + n, cap - n, "\",\"bin\":\"");
    for (int i = 0; n < ((size_t)9 << 19); i++)
        n += (size_t)snprintf(v + n, cap - n, "QUJD");
    n += (size_t)snprintf(v + n, cap - n, "\",\"ignored\":\"");
    memset(v + n, 'x', (size_t)1 << 20);
    n += (size_t)1 << 20;
    n += (size_t)snprintf(v + n, cap - n, "\"}," SRC ",\"op\":\"c\"}");
    assert_true(differential(cat, v, n, 1, "big strings"));

    cdc_decode_input_t in = {TOPIC, 0, 1, NULL, 0, v, n, 1, NULL, NULL};
    cdc_change_t a;
    cdc_decode_error_t da;
    assert_true(cdc_decode_fast(cat, NULL, &in, &a, &da));
    const cdc_val_t *t = &a.after.vals[9]; /* txt */
    assert_true(t->len > ((size_t)1 << 20));
    assert_memory_equal(t->bytes, "caf\xc3\xa9 \"0\n \xc3\xa9 ", 13);
    assert_memory_equal(t->bytes + t->len - 10, "ends in \\\\", 10);
    cdc_change_clear(&a);

    /* cut inside and right after each large string; a quote made a backslash */
    for (size_t cut = ((size_t)3 << 19) - 4; cut < ((size_t)3 << 19) + 40; cut += STEP)
        differential(cat, v, cut, 1, "big strings prefix");
    for (size_t k = ((size_t)3 << 19); k < ((size_t)3 << 19) + 40; k++)
        if (v[k] == '"') {
            v[k] = '\\';
            differential(cat, v, n, 1, "big strings mutated");
            v[k] = '"';
        }
    /* the bytea decoded in place; then not base64 (a mismatch on both paths) */
    char *bin = memmem(v, n, "\"bin\":\"", 7);
    assert_non_null(bin);
    assert_true(differential(cat, v, n, 1, "big bytea"));
    bin[7 + ((size_t)1 << 20)] = '!';
    differential(cat, v, n, 1, "big bytea not base64");
    bin[7 + ((size_t)1 << 20)] = 'Q';
    bin[7 + ((size_t)3 << 19) + 1] = '=';
    differential(cat, v, n, 1, "big bytea padded inside");
    free(v);
    cdc_catalog_free(cat);
    cdc_schema_doc_free(&DOC);
}

/* Options: placeholder and size limit behave the same on both paths. */
static void test_options(void **state)
{
    (void)state;
    cdc_catalog_t *cat = catalog();
    const char *v = "{\"after\":{" KEY ",\"txt\":\"??\",\"bin\":\"Pz8=\"}," SRC ",\"op\":\"u\"}";
    cdc_decode_options_t o = {16, "??", NULL};
    cdc_decode_input_t in = {TOPIC, 0, 1, NULL, 0, v, strlen(v), 1};
    cdc_change_t c;
    cdc_decode_error_t de;
    assert_int_equal(cdc_decode(cat, &o, &in, &c, &de), CDC_ERR_INVALID);
    assert_int_equal(de.cls, CDC_DLQ_OVERSIZED);
    o.max_record_bytes = 0;
    assert_true(cdc_decode_fast(cat, &o, &in, &c, &de));
    assert_int_equal(c.after.vals[9].kind, CDC_VAL_TOAST);
    assert_int_equal(c.after.vals[11].kind, CDC_VAL_TOAST);
    cdc_change_clear(&c);
    assert_int_equal(cdc_decode(cat, &o, &in, &c, &de), CDC_OK);
    assert_int_equal(c.after.vals[9].kind, CDC_VAL_TOAST);
    cdc_change_clear(&c);
    cdc_catalog_free(cat);
    cdc_schema_doc_free(&DOC);
}

static int report(void **state)
{
    (void)state;
    printf("decode_fast: %ld cases, %ld took the direct path\n", n_cases, n_fast);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_corpus), cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_options),        cmocka_unit_test(test_large),
        cmocka_unit_test(test_mutations),      cmocka_unit_test(test_big_strings),
    };
    return cmocka_run_group_tests(tests, NULL, report);
}
