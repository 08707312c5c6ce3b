/* Unit tests for capture/pgoutput.c: every message type from byte fixtures, plus malformed input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "capture/pgoutput.h"

typedef struct fx {
    uint8_t b[512];
    size_t n;
} fx_t;

static void p8(fx_t *f, uint8_t v)
{
    f->b[f->n++] = v;
}
static void p16(fx_t *f, uint16_t v)
{
    p8(f, (uint8_t)(v >> 8));
    p8(f, (uint8_t)v);
}
static void p32(fx_t *f, uint32_t v)
{
    p16(f, (uint16_t)(v >> 16));
    p16(f, (uint16_t)v);
}
static void p64(fx_t *f, uint64_t v)
{
    p32(f, (uint32_t)(v >> 32));
    p32(f, (uint32_t)v);
}
static void pstr(fx_t *f, const char *s)
{
    memcpy(f->b + f->n, s, strlen(s) + 1);
    f->n += strlen(s) + 1;
}
static void ptext(fx_t *f, const char *s)
{
    p8(f, 't');
    p32(f, (uint32_t)strlen(s));
    memcpy(f->b + f->n, s, strlen(s));
    f->n += strlen(s);
}

static cdc_pgo_scratch_t scratch;

static void decode_ok(const fx_t *f, cdc_pgo_msg_t *m)
{
    cdc_error_t e;
    cdc_err_t rc = cdc_pgo_decode(f->b, f->n, &scratch, m, &e);
    if (rc != CDC_OK)
        fail_msg("decode: %s", e.msg);
}

static void test_begin_literal_bytes(void **state)
{
    /* 'B', final_lsn 0/16B3748, commit ts 0x0002B0A5C9F1A2B3, xid 731 */
    static const uint8_t raw[] = {'B',  0x00, 0x00, 0x00, 0x00, 0x01, 0x6B, 0x37, 0x48, 0x00, 0x02,
                                  0xB0, 0xA5, 0xC9, 0xF1, 0xA2, 0xB3, 0x00, 0x00, 0x02, 0xDB};
    cdc_pgo_msg_t m;
    cdc_error_t e;
    (void)state;
    assert_int_equal(cdc_pgo_decode(raw, sizeof(raw), &scratch, &m, &e), CDC_OK);
    assert_int_equal(m.kind, CDC_PGO_BEGIN);
    assert_true(m.u.begin.final_lsn == 0x16B3748ULL);
    assert_true(m.u.begin.commit_ts == 0x0002B0A5C9F1A2B3LL);
    assert_int_equal(m.u.begin.xid, 731);
    /* every truncation of it is a protocol error, never a crash */
    for (size_t n = 0; n < sizeof(raw); n++)
        assert_int_equal(cdc_pgo_decode(raw, n, &scratch, &m, &e), CDC_ERR_PROTOCOL);
}

static void test_commit(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    (void)state;
    p8(&f, 'C');
    p8(&f, 0);
    p64(&f, 0x100);
    p64(&f, 0x130);
    p64(&f, 123456789);
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_COMMIT);
    assert_true(m.u.commit.commit_lsn == 0x100);
    assert_true(m.u.commit.end_lsn == 0x130);
    assert_true(m.u.commit.commit_ts == 123456789);
}

static void test_origin(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    (void)state;
    p8(&f, 'O');
    p64(&f, 0xABCDEF);
    pstr(&f, "node_a");
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_ORIGIN);
    assert_true(m.u.origin.commit_lsn == 0xABCDEF);
    assert_string_equal(m.u.origin.name, "node_a");
}

static void test_relation(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    (void)state;
    p8(&f, 'R');
    p32(&f, 16385);
    pstr(&f, "public");
    pstr(&f, "orders");
    p8(&f, 'd');
    p16(&f, 3);
    p8(&f, 1);
    pstr(&f, "id");
    p32(&f, 23);
    p32(&f, 0xffffffff);
    p8(&f, 0);
    pstr(&f, "amount");
    p32(&f, 1700);
    p32(&f, ((12 << 16) | 2) + 4);
    p8(&f, 0);
    pstr(&f, "note");
    p32(&f, 25);
    p32(&f, 0xffffffff);
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_RELATION);
    assert_int_equal(m.u.relation.relid, 16385);
    assert_string_equal(m.u.relation.nspname, "public");
    assert_string_equal(m.u.relation.relname, "orders");
    assert_int_equal(m.u.relation.replident, 'd');
    assert_int_equal(m.u.relation.ncols, 3);
    assert_true(m.u.relation.cols[0].key);
    assert_string_equal(m.u.relation.cols[0].name, "id");
    assert_int_equal(m.u.relation.cols[0].type_oid, 23);
    assert_int_equal(m.u.relation.cols[0].typmod, -1);
    assert_false(m.u.relation.cols[1].key);
    assert_int_equal(m.u.relation.cols[1].typmod, ((12 << 16) | 2) + 4);
    assert_string_equal(m.u.relation.cols[2].name, "note");
}

static void test_type(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    (void)state;
    p8(&f, 'Y');
    p32(&f, 16390);
    pstr(&f, "public");
    pstr(&f, "mood");
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_TYPE);
    assert_int_equal(m.u.type.oid, 16390);
    assert_string_equal(m.u.type.nspname, "public");
    assert_string_equal(m.u.type.typname, "mood");
}

static void test_insert_all_value_kinds(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    (void)state;
    p8(&f, 'I');
    p32(&f, 16385);
    p8(&f, 'N');
    p16(&f, 4);
    ptext(&f, "42");
    p8(&f, 'n');
    p8(&f, 'u');
    p8(&f, 'b');
    p32(&f, 2);
    p8(&f, 0xde);
    p8(&f, 0xad);
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_INSERT);
    assert_int_equal(m.u.insert.relid, 16385);
    assert_int_equal(m.u.insert.newtup.ncols, 4);
    assert_int_equal(m.u.insert.newtup.cols[0].kind, 't');
    assert_int_equal(m.u.insert.newtup.cols[0].len, 2);
    assert_memory_equal(m.u.insert.newtup.cols[0].data, "42", 2);
    assert_int_equal(m.u.insert.newtup.cols[1].kind, 'n');
    assert_int_equal(m.u.insert.newtup.cols[2].kind, 'u');
    assert_int_equal(m.u.insert.newtup.cols[3].kind, 'b');
    assert_int_equal((uint8_t)m.u.insert.newtup.cols[3].data[1], 0xad);
}

/* A tuple of no columns from a scratch that has no value array yet (found by
 * tests/fuzz/pgoutput.c: the columns were an offset from its null pointer). */
static void test_tuple_without_columns(void **state)
{
    fx_t f = {0};
    cdc_pgo_scratch_t fresh = {0};
    cdc_pgo_msg_t m;
    cdc_error_t e;
    (void)state;
    p8(&f, 'U');
    p32(&f, 7);
    p8(&f, 'N');
    p16(&f, 0);
    assert_int_equal(cdc_pgo_decode(f.b, f.n, &fresh, &m, &e), CDC_OK);
    assert_int_equal(m.u.update.newtup.ncols, 0);
    assert_null(m.u.update.newtup.cols);
    cdc_pgo_scratch_free(&fresh);
    /* with an old key of no columns before it */
    memset(&f, 0, sizeof(f));
    memset(&fresh, 0, sizeof(fresh));
    p8(&f, 'U');
    p32(&f, 7);
    p8(&f, 'K');
    p16(&f, 0);
    p8(&f, 'N');
    p16(&f, 0);
    assert_int_equal(cdc_pgo_decode(f.b, f.n, &fresh, &m, &e), CDC_OK);
    assert_int_equal(m.u.update.old_kind, 'K');
    assert_null(m.u.update.oldtup.cols);
    assert_null(m.u.update.newtup.cols);
    cdc_pgo_scratch_free(&fresh);
}

static void test_update_variants(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    (void)state;
    /* without old tuple */
    p8(&f, 'U');
    p32(&f, 7);
    p8(&f, 'N');
    p16(&f, 1);
    ptext(&f, "new");
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_UPDATE);
    assert_int_equal(m.u.update.old_kind, 0);
    assert_int_equal(m.u.update.newtup.ncols, 1);
    assert_memory_equal(m.u.update.newtup.cols[0].data, "new", 3);

    /* with old full row, many columns so the scratch array has to grow between tuples */
    memset(&f, 0, sizeof(f));
    p8(&f, 'U');
    p32(&f, 7);
    p8(&f, 'O');
    p16(&f, 20);
    for (int i = 0; i < 20; i++)
        ptext(&f, "o");
    p8(&f, 'N');
    p16(&f, 20);
    for (int i = 0; i < 20; i++)
        ptext(&f, i == 19 ? "last" : "n");
    decode_ok(&f, &m);
    assert_int_equal(m.u.update.old_kind, 'O');
    assert_int_equal(m.u.update.oldtup.ncols, 20);
    assert_memory_equal(m.u.update.oldtup.cols[19].data, "o", 1);
    assert_int_equal(m.u.update.newtup.ncols, 20);
    assert_memory_equal(m.u.update.newtup.cols[19].data, "last", 4);

    /* with old key */
    memset(&f, 0, sizeof(f));
    p8(&f, 'U');
    p32(&f, 7);
    p8(&f, 'K');
    p16(&f, 2);
    ptext(&f, "1");
    p8(&f, 'n');
    p8(&f, 'N');
    p16(&f, 2);
    ptext(&f, "2");
    ptext(&f, "x");
    decode_ok(&f, &m);
    assert_int_equal(m.u.update.old_kind, 'K');
    assert_memory_equal(m.u.update.oldtup.cols[0].data, "1", 1);
    assert_memory_equal(m.u.update.newtup.cols[0].data, "2", 1);
}

static void test_delete(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    cdc_error_t e;
    (void)state;
    p8(&f, 'D');
    p32(&f, 9);
    p8(&f, 'K');
    p16(&f, 2);
    ptext(&f, "5");
    p8(&f, 'n');
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_DELETE);
    assert_int_equal(m.u.del.relid, 9);
    assert_int_equal(m.u.del.old_kind, 'K');
    assert_int_equal(m.u.del.oldtup.ncols, 2);
    /* delete needs an old tuple */
    f.b[5] = 'N';
    assert_int_equal(cdc_pgo_decode(f.b, f.n, &scratch, &m, &e), CDC_ERR_PROTOCOL);
}

static void test_truncate(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    cdc_error_t e;
    (void)state;
    p8(&f, 'T');
    p32(&f, 3);
    p8(&f, 3);
    p32(&f, 100);
    p32(&f, 200);
    p32(&f, 300);
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_TRUNCATE);
    assert_int_equal(m.u.truncate.options, 3);
    assert_int_equal(m.u.truncate.nrelids, 3);
    assert_int_equal(m.u.truncate.relids[2], 300);
    /* claims more relids than present */
    assert_int_equal(cdc_pgo_decode(f.b, f.n - 2, &scratch, &m, &e), CDC_ERR_PROTOCOL);
}

static void test_message(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    (void)state;
    p8(&f, 'M');
    p8(&f, 1);
    p64(&f, 0x5000);
    pstr(&f, "cdc.heartbeat");
    p32(&f, 3);
    memcpy(f.b + f.n, "abc", 3);
    f.n += 3;
    decode_ok(&f, &m);
    assert_int_equal(m.kind, CDC_PGO_MESSAGE);
    assert_int_equal(m.u.message.flags, 1);
    assert_true(m.u.message.lsn == 0x5000);
    assert_string_equal(m.u.message.prefix, "cdc.heartbeat");
    assert_int_equal(m.u.message.len, 3);
    assert_memory_equal(m.u.message.content, "abc", 3);
}

static void test_malformed(void **state)
{
    fx_t f = {0};
    cdc_pgo_msg_t m;
    cdc_error_t e;
    (void)state;
    assert_int_equal(cdc_pgo_decode(f.b, 0, &scratch, &m, &e), CDC_ERR_PROTOCOL);
    p8(&f, 'Z');
    assert_int_equal(cdc_pgo_decode(f.b, f.n, &scratch, &m, &e), CDC_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "unknown pgoutput message type"));
    /* unknown column kind */
    memset(&f, 0, sizeof(f));
    p8(&f, 'I');
    p32(&f, 1);
    p8(&f, 'N');
    p16(&f, 1);
    p8(&f, 'q');
    assert_int_equal(cdc_pgo_decode(f.b, f.n, &scratch, &m, &e), CDC_ERR_PROTOCOL);
    /* text length past the end */
    memset(&f, 0, sizeof(f));
    p8(&f, 'I');
    p32(&f, 1);
    p8(&f, 'N');
    p16(&f, 1);
    p8(&f, 't');
    p32(&f, 1000);
    assert_int_equal(cdc_pgo_decode(f.b, f.n, &scratch, &m, &e), CDC_ERR_PROTOCOL);
    /* unterminated string */
    memset(&f, 0, sizeof(f));
    p8(&f, 'Y');
    p32(&f, 1);
    p8(&f, 'x');
    assert_int_equal(cdc_pgo_decode(f.b, f.n, &scratch, &m, &e), CDC_ERR_PROTOCOL);
}

static int teardown(void **state)
{
    (void)state;
    cdc_pgo_scratch_free(&scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_begin_literal_bytes),
        cmocka_unit_test(test_commit),
        cmocka_unit_test(test_origin),
        cmocka_unit_test(test_relation),
        cmocka_unit_test(test_type),
        cmocka_unit_test(test_insert_all_value_kinds),
        cmocka_unit_test(test_update_variants),
        cmocka_unit_test(test_tuple_without_columns),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_message),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
