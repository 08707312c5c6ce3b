/*
 * Unit tests for worker/mask.c, the column masking policy engine: parse errors name the
 * option and the line, column or rule; each action on decoded changes (schema and
 * values); hashed keys give the same entity for every change of a row and under every
 * worker with the same secret; the policy that does not fit a schema is a configuration
 * error naming the column; allow-list mode holds unnamed columns back and counts them;
 * dead letters' JSON and error messages are masked; table digests change with the
 * table's rules only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/crypto.h"
#include "common/hex.h"
#include "worker/decode.h"
#include "worker/mask.h"

#define SECRET "0123456789abcdef-unit-test-secret"
static const char *TOPIC = "cdc.public.people";

/* email is the key; every other action has a column. */
static const char *SCHEMA =
    "{\"namespace\":\"public\",\"table\":\"people\",\"columns\":["
    "{\"name\":\"email\",\"type\":\"text\",\"key\":true},"
    "{\"name\":\"name\",\"type\":\"text\"},{\"name\":\"ssn\",\"type\":\"text\"},"
    "{\"name\":\"phone\",\"type\":\"text\"},{\"name\":\"notes\",\"type\":\"text\"},"
    "{\"name\":\"age\",\"type\":\"int\"},{\"name\":\"city\",\"type\":\"text\"}]}";

static const char *POLICY =
    "{\"version\": 3, \"tables\": {\"public.people\": {"
    "\"email\": \"hash\", \"name\": {\"action\": \"truncate\", \"length\": 3},"
    "\"ssn\": \"drop\", \"phone\": {\"action\": \"redact\", \"value\": \"XXX\"},"
    "\"notes\": \"null\", \"age\": \"null\", \"city\": \"keep\"}}}";

static cdc_catalog_t *catalog(const char *schema)
{
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 1, schema, strlen(schema), &e), CDC_OK);
    return cat;
}

static cdc_mask_t *open_mask(const char *policy, const char *mode, const char *secret)
{
    cdc_mask_config_t cfg = {policy, mode, secret, NULL};
    cdc_mask_t *m = NULL;
    cdc_error_t e;
    if (cdc_mask_open(&cfg, NULL, &m, &e) != CDC_OK)
        fail_msg("cdc_mask_open: %s", e.msg);
    assert_non_null(m);
    return m;
}

/* The error of opening a policy that must not open (CDC_ERR_CONFIG). */
static const char *open_error(const cdc_mask_config_t *cfg)
{
    static cdc_error_t e;
    cdc_mask_t *m = NULL;
    assert_int_equal(cdc_mask_open(cfg, NULL, &m, &e), CDC_ERR_CONFIG);
    assert_null(m);
    return e.msg;
}

static void decode(cdc_catalog_t *cat, const char *key, const char *value, cdc_change_t *c)
{
    cdc_decode_input_t in = {TOPIC, 0, 7, key, strlen(key), value, strlen(value), -1};
    cdc_decode_error_t de;
    assert_int_equal(cdc_decode(cat, NULL, &in, c, &de), CDC_OK);
}

static int col(const cdc_source_schema_t *s, const char *name)
{
    for (size_t i = 0; i < s->ncols; i++)
        if (strcmp(s->cols[i].name, name) == 0)
            return (int)i;
    return -1;
}

static void hmac_hex(const char *secret, const char *text, char out[65])
{
    cdc_hmac_t *h;
    cdc_error_t e;
    uint8_t d[CDC_SHA256_LEN];
    assert_int_equal(cdc_hmac_new(secret, strlen(secret), &h, &e), CDC_OK);
    assert_true(cdc_hmac_sha256(h, text, strlen(text), d));
    cdc_hmac_free(h);
    cdc_hex_encode(d, sizeof(d), out);
}

static void assert_text(const cdc_val_t *v, const char *want)
{
    assert_int_equal(v->kind, CDC_VAL_SET);
    assert_int_equal(v->len, strlen(want));
    assert_memory_equal(v->bytes, want, v->len);
}

#define INSERT                                                                                     \
    "{\"before\":null,\"after\":{\"email\":\"ada@example.com\",\"name\":\"Ünïcødé Lovelace\"," \
    "\"ssn\":\"078-05-1120\",\"phone\":\"+44 20 7946 0958\",\"notes\":\"likes engines\","          \
    "\"age\":36,\"city\":\"London\"},\"source\":{\"schema_version\":1,\"lsn\":100},\"op\":\"c\"}"
#define DELETE                                                                                     \
    "{\"before\":{\"email\":\"ada@example.com\"},\"after\":null,"                                  \
    "\"source\":{\"schema_version\":1,\"lsn\":200},\"op\":\"d\"}"

/* ---- parsing ---------------------------------------------------------------------------- */

static void test_parse_errors(void **state)
{
    char path[] = "/tmp/cdc-mask-policy-XXXXXX";
    const char *msg;
    (void)state;

    /* a syntax error in a file names the option, the file, the line and the column */
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "{\"tables\": {\n  \"public.people\": {\n    \"email\": \"hash\"\n    "
                       "\"ssn\": \"drop\"}}}\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    msg = open_error(&(cdc_mask_config_t){path, NULL, SECRET, NULL});
    assert_non_null(strstr(msg, "option --mask-policy"));
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "line 4 column"));
    unlink(path);
    msg = open_error(&(cdc_mask_config_t){path, NULL, NULL, NULL}); /* now missing */
    assert_non_null(strstr(msg, "option --mask-policy"));
    assert_non_null(strstr(msg, path));

    /* rules name the table and the column */
    msg = open_error(&(cdc_mask_config_t){"{\"tables\":{\"public.p\":{\"email\":\"hsh\"}}}"});
    assert_non_null(strstr(msg, "tables.\"public.p\".\"email\": unknown action \"hsh\""));
    msg = open_error(&(cdc_mask_config_t){"{\"tables\":{\"public.p\":{\"n\":\"truncate\"}}}"});
    assert_non_null(strstr(msg, "\"truncate\" needs \"length\""));
    msg = open_error(&(cdc_mask_config_t){
        "{\"tables\":{\"public.p\":{\"n\":{\"action\":\"truncate\",\"length\":0}}}}"});
    assert_non_null(strstr(msg, "\"length\" must be an integer of at least 1"));
    msg = open_error(&(cdc_mask_config_t){
        "{\"tables\":{\"public.p\":{\"n\":{\"action\":\"hash\",\"length\":2}}}}"});
    assert_non_null(strstr(msg, "unknown member \"length\""));
    msg = open_error(&(cdc_mask_config_t){"{\"tables\":{\"people\":{\"n\":\"drop\"}}}"});
    assert_non_null(strstr(msg, "tables.\"people\": a table is named \"<schema>.<table>\""));
    msg = open_error(&(cdc_mask_config_t){"{\"tabels\":{}}"});
    assert_non_null(strstr(msg, "unknown member \"tabels\""));
    msg = open_error(&(cdc_mask_config_t){"{\"version\":-1}"});
    assert_non_null(strstr(msg, "\"version\""));
    /* a column named twice is refused, not silently the last one */
    msg = open_error(
        &(cdc_mask_config_t){"{\"tables\":{\"public.p\":{\"n\":\"drop\",\"n\":\"keep\"}}}"});
    assert_non_null(strstr(msg, "duplicate"));
    assert_non_null(strstr(msg, "line 1"));

    /* modes and secrets */
    msg = open_error(&(cdc_mask_config_t){NULL, "allowlist"});
    assert_non_null(strstr(msg, "--mask-mode=allowlist needs --mask-policy"));
    msg = open_error(&(cdc_mask_config_t){POLICY, "greylist", SECRET});
    assert_non_null(strstr(msg, "option --mask-mode"));
    msg = open_error(&(cdc_mask_config_t){POLICY, NULL, NULL, NULL});
    assert_non_null(strstr(msg, "column \"email\" of \"public.people\" is hashed, but no secret"));
    msg = open_error(&(cdc_mask_config_t){POLICY, NULL, "short", NULL});
    assert_non_null(strstr(msg, "option --mask-secret: the hashing secret has 5 bytes"));
    msg = open_error(&(cdc_mask_config_t){POLICY, NULL, SECRET, "/no/such/secret"});
    assert_non_null(strstr(msg, "both set"));
    msg = open_error(&(cdc_mask_config_t){POLICY, NULL, NULL, "/no/such/secret"});
    assert_non_null(strstr(msg, "option --mask-secret-file: could not open \"/no/such/secret\""));

    /* no policy in deny-list mode: nothing to mask */
    cdc_mask_t *m = (cdc_mask_t *)1;
    cdc_error_t e;
    assert_int_equal(cdc_mask_open(&(cdc_mask_config_t){NULL}, NULL, &m, &e), CDC_OK);
    assert_null(m);
}

static void test_secret_file(void **state)
{
    char path[] = "/tmp/cdc-mask-secret-XXXXXX", want[65];
    (void)state;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, SECRET "\n", strlen(SECRET) + 1), (ssize_t)strlen(SECRET) + 1);
    close(fd);
    cdc_mask_t *m;
    cdc_error_t e;
    assert_int_equal(cdc_mask_open(&(cdc_mask_config_t){POLICY, NULL, NULL, path}, NULL, &m, &e),
                     CDC_OK);
    unlink(path);
    /* the trailing newline is not part of the secret: the same hashes as the variable */
    cdc_catalog_t *cat = catalog(SCHEMA);
    cdc_change_t c;
    decode(cat, "{\"email\":\"ada@example.com\"}", INSERT, &c);
    assert_int_equal(cdc_mask_change(m, &c, &e), CDC_OK);
    hmac_hex(SECRET, "ada@example.com", want);
    assert_text(&c.after.vals[col(c.schema, "email")], want);
    cdc_change_clear(&c);
    cdc_mask_free(m);
    cdc_catalog_free(cat);
}

/* ---- actions ---------------------------------------------------------------------------- */

static void test_each_action(void **state)
{
    cdc_catalog_t *cat = catalog(SCHEMA);
    cdc_mask_t *m = open_mask(POLICY, NULL, SECRET);
    cdc_change_t c;
    cdc_error_t e;
    char want[65];
    (void)state;

    decode(cat, "{\"email\":\"ada@example.com\"}", INSERT, &c);
    const cdc_source_schema_t *src = c.schema;
    assert_int_equal(cdc_mask_change(m, &c, &e), CDC_OK);
    const cdc_source_schema_t *s = c.schema;
    assert_ptr_not_equal(s, src);
    assert_ptr_equal(cdc_mask_schema(m, src, &e), s);
    assert_ptr_equal(c.after.schema, s);
    /* drop: no such column; the others keep their field ids and types */
    assert_int_equal(s->ncols, src->ncols - 1);
    assert_int_equal(col(s, "ssn"), -1);
    for (size_t i = 0; i < s->ncols; i++) {
        const cdc_column_t *sc = &src->cols[col(src, s->cols[i].name)];
        assert_int_equal(s->cols[i].field_id, sc->field_id);
        assert_int_equal(s->cols[i].type, sc->type);
    }
    assert_int_equal(s->nkey, 1);
    assert_string_equal(s->cols[s->key_cols[0]].name, "email");
    assert_true(s->cols[col(s, "age")].optional);
    /* hash: HMAC-SHA-256 of the text under the secret, lower-case hex */
    hmac_hex(SECRET, "ada@example.com", want);
    assert_text(&c.after.vals[col(s, "email")], want);
    /* truncate: three characters, not three bytes */
    assert_text(&c.after.vals[col(s, "name")], "Ünï");
    assert_text(&c.after.vals[col(s, "phone")], "XXX");
    assert_int_equal(c.after.vals[col(s, "notes")].kind, CDC_VAL_NULL);
    assert_int_equal(c.after.vals[col(s, "age")].kind, CDC_VAL_NULL);
    assert_text(&c.after.vals[col(s, "city")], "London");
    /* the entity holds the hashed key, never the clear one */
    assert_null(memmem(c.entity, c.entity_len, "ada@example.com", 15));
    assert_non_null(memmem(c.entity, c.entity_len, want, 64));
    cdc_change_clear(&c);

    /* redact without a value, a null stays null, a short text is not padded */
    cdc_mask_free(m);
    m = open_mask("{\"tables\":{\"public.people\":{\"phone\":\"redact\",\"name\":"
                  "{\"action\":\"truncate\",\"length\":40}}}}",
                  NULL, NULL);
    decode(cat, "{\"email\":\"b@example.com\"}",
           "{\"after\":{\"email\":\"b@example.com\",\"name\":\"Bo\",\"phone\":null},"
           "\"source\":{\"schema_version\":1,\"lsn\":5},\"op\":\"r\"}",
           &c);
    assert_int_equal(cdc_mask_change(m, &c, &e), CDC_OK);
    assert_int_equal(c.after.vals[col(c.schema, "phone")].kind, CDC_VAL_NULL);
    assert_text(&c.after.vals[col(c.schema, "name")], "Bo");
    assert_text(&c.after.vals[col(c.schema, "email")], "b@example.com"); /* kept */
    cdc_change_clear(&c);
    decode(cat, "{\"email\":\"b@example.com\"}",
           "{\"after\":{\"email\":\"b@example.com\",\"phone\":\"555\"},"
           "\"source\":{\"schema_version\":1,\"lsn\":6},\"op\":\"u\"}",
           &c);
    assert_int_equal(cdc_mask_change(m, &c, &e), CDC_OK);
    assert_text(&c.after.vals[col(c.schema, "phone")], "****");
    cdc_change_clear(&c);
    cdc_mask_free(m);
    cdc_catalog_free(cat);
}

/* A table the policy does not name (deny-list mode) keeps its source schema. */
static void test_untouched_table(void **state)
{
    cdc_catalog_t *cat = catalog(SCHEMA);
    cdc_mask_t *m = open_mask("{\"tables\":{\"public.other\":{\"x\":\"drop\"}}}", NULL, NULL);
    cdc_change_t c;
    cdc_error_t e;
    (void)state;
    decode(cat, "{\"email\":\"ada@example.com\"}", INSERT, &c);
    const cdc_source_schema_t *src = c.schema;
    uint8_t *entity = c.entity;
    assert_int_equal(cdc_mask_change(m, &c, &e), CDC_OK);
    assert_ptr_equal(c.schema, src);
    assert_ptr_equal(c.entity, entity);
    assert_text(&c.after.vals[col(src, "ssn")], "078-05-1120");
    assert_string_equal(cdc_mask_table_policy(m, "public", "people"), "");
    assert_true(strncmp(cdc_mask_table_policy(m, "public", "other"), "0:", 2) == 0);
    cdc_change_clear(&c);
    cdc_mask_free(m);
    cdc_catalog_free(cat);
}

/* Every change of a row (insert, update, delete with a key-only before image) has one
 * entity, and two workers with the same secret agree; another secret does not. */
static void test_key_hash_stable(void **state)
{
    cdc_catalog_t *cat = catalog(SCHEMA);
    cdc_mask_t *m1 = open_mask(POLICY, NULL, SECRET), *m2 = open_mask(POLICY, NULL, SECRET);
    cdc_mask_t *other = open_mask(POLICY, NULL, SECRET "-rotated");
    cdc_change_t ins, del, again, rotated;
    cdc_error_t e;
    (void)state;

    decode(cat, "{\"email\":\"ada@example.com\"}", INSERT, &ins);
    decode(cat, "{\"email\":\"ada@example.com\"}", DELETE, &del);
    decode(cat, "{\"email\":\"ada@example.com\"}", INSERT, &again);
    decode(cat, "{\"email\":\"ada@example.com\"}", INSERT, &rotated);
    assert_int_equal(cdc_mask_change(m1, &ins, &e), CDC_OK);
    assert_int_equal(cdc_mask_change(m1, &del, &e), CDC_OK);
    assert_int_equal(cdc_mask_change(m2, &again, &e), CDC_OK);
    assert_int_equal(cdc_mask_change(other, &rotated, &e), CDC_OK);
    assert_int_equal(ins.entity_len, del.entity_len);
    assert_memory_equal(ins.entity, del.entity, ins.entity_len);
    assert_int_equal(ins.entity_len, again.entity_len);
    assert_memory_equal(ins.entity, again.entity, ins.entity_len);
    assert_int_equal(ins.entity_len, rotated.entity_len);
    assert_memory_not_equal(ins.entity, rotated.entity, ins.entity_len);
    /* the delete's before image (what equality deletes are written from) is hashed too */
    int k = col(del.schema, "email");
    assert_memory_equal(del.before.vals[k].bytes, ins.after.vals[k].bytes, 64);
    /* the masked key reads back from the entity (floors sweep rows by it) */
    cdc_row_t back;
    assert_true(cdc_decode_entity_row(del.schema, del.entity, del.entity_len, &back));
    assert_memory_equal(back.vals[k].bytes, ins.after.vals[k].bytes, 64);
    cdc_row_clear(&back);
    cdc_change_clear(&ins);
    cdc_change_clear(&del);
    cdc_change_clear(&again);
    cdc_change_clear(&rotated);
    cdc_mask_free(m1);
    cdc_mask_free(m2);
    cdc_mask_free(other);
    cdc_catalog_free(cat);
}

/* An unchanged TOAST value of a masked column stays a TOAST marker (repaired from state,
 * which holds the masked value); a nulled one is null. */
static void test_toast(void **state)
{
    cdc_catalog_t *cat = catalog(SCHEMA);
    cdc_mask_t *m = open_mask(POLICY, NULL, SECRET);
    cdc_change_t c;
    cdc_error_t e;
    (void)state;
    decode(cat, "{\"email\":\"ada@example.com\"}",
           "{\"before\":null,\"after\":{\"email\":\"ada@example.com\",\"city\":\"Paris\"},"
           "\"unchanged_toast\":[\"name\",\"notes\"],\"source\":{\"schema_version\":1,\"lsn\":300},"
           "\"op\":\"u\"}",
           &c);
    assert_int_equal(cdc_mask_change(m, &c, &e), CDC_OK);
    assert_int_equal(c.after.vals[col(c.schema, "name")].kind, CDC_VAL_TOAST);
    assert_int_equal(c.after.vals[col(c.schema, "notes")].kind, CDC_VAL_NULL);
    cdc_change_clear(&c);
    cdc_mask_free(m);
    cdc_catalog_free(cat);
}

/* A policy that cannot apply to a schema is a configuration error naming the column. */
static void test_policy_does_not_fit(void **state)
{
    static const struct {
        const char *policy, *mode, *error;
    } cases[] = {
        {"{\"tables\":{\"public.people\":{\"email\":\"drop\"}}}", NULL,
         "column \"email\" of table \"public.people\" (schema version 1): \"drop\" cannot apply "
         "to a key column"},
        {"{\"tables\":{\"public.people\":{\"email\":\"null\"}}}", NULL, "\"null\" cannot apply"},
        {"{\"tables\":{\"public.people\":{\"email\":{\"action\":\"truncate\",\"length\":3}}}}",
         NULL, "\"truncate\" cannot apply to a key column"},
        {"{\"tables\":{\"public.people\":{\"age\":\"hash\"}}}", NULL,
         "column \"age\" of table \"public.people\" (schema version 1): \"hash\" applies to "
         "string columns only, this one is int"},
        {"{\"tables\":{\"public.people\":{\"age\":\"redact\"}}}", NULL, "\"redact\" applies to"},
        {"{\"tables\":{\"public.people\":{\"city\":\"keep\"}}}", "allowlist",
         "column \"email\" of table \"public.people\" (schema version 1): a key column the "
         "policy does not name (allow-list mode)"},
    };
    cdc_catalog_t *cat = catalog(SCHEMA);
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cdc_mask_t *m = open_mask(cases[i].policy, cases[i].mode, SECRET);
        cdc_change_t c;
        cdc_error_t e;
        decode(cat, "{\"email\":\"ada@example.com\"}", INSERT, &c);
        const cdc_source_schema_t *src = c.schema;
        assert_int_equal(cdc_mask_change(m, &c, &e), CDC_ERR_CONFIG);
        if (strstr(e.msg, cases[i].error) == NULL || strstr(e.msg, "option --mask-policy") == NULL)
            fail_msg("case %zu: %s", i, e.msg);
        assert_ptr_equal(c.schema, src); /* untouched */
        assert_null(cdc_mask_schema(m, src, &e));
        assert_int_equal(e.code, CDC_ERR_CONFIG);
        cdc_change_clear(&c);
        cdc_mask_free(m);
    }
    cdc_catalog_free(cat);
}

/* Allow-list mode: a column the policy does not name is absent and counted, per table and
 * column, until the policy names it. */
static void test_allowlist(void **state)
{
    static const char *added =
        "{\"namespace\":\"public\",\"table\":\"people\",\"columns\":["
        "{\"name\":\"email\",\"type\":\"text\",\"key\":true},{\"name\":\"city\",\"type\":\"text\"},"
        "{\"name\":\"ssn\",\"type\":\"text\"}]}";
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_metrics_t *metrics = cdc_metrics_new();
    cdc_mask_t *m;
    cdc_change_t c;
    cdc_error_t e;
    char *status, *text;
    size_t n;
    (void)state;

    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 1, added, strlen(added), &e), CDC_OK);
    assert_int_equal(cdc_mask_open(&(cdc_mask_config_t){"{\"tables\":{\"public.people\":"
                                                        "{\"email\":\"hash\",\"city\":\"keep\"}}}",
                                                        "allowlist", SECRET},
                                   metrics, &m, &e),
                     CDC_OK);
    for (int i = 0; i < 3; i++) {
        decode(cat, "{\"email\":\"ada@example.com\"}",
               i < 2 ? "{\"after\":{\"email\":\"ada@example.com\",\"city\":\"Oslo\","
                       "\"ssn\":\"078-05-1120\"},\"source\":{\"schema_version\":1,\"lsn\":9},"
                       "\"op\":\"c\"}"
                     : "{\"after\":{\"email\":\"ada@example.com\",\"city\":\"Oslo\",\"ssn\":null},"
                       "\"source\":{\"schema_version\":1,\"lsn\":10},\"op\":\"u\"}",
               &c);
        assert_int_equal(cdc_mask_change(m, &c, &e), CDC_OK);
        assert_int_equal(col(c.schema, "ssn"), -1);
        assert_int_equal(c.schema->ncols, 2);
        cdc_change_clear(&c);
    }
    /* two values held back (the null is no value) */
    status = cdc_mask_status_json(m);
    assert_non_null(strstr(status, "\"mode\":\"allowlist\""));
    assert_non_null(strstr(status, "{\"table\":\"public.people\",\"column\":\"ssn\",\"values\":2"));
    free(status);
    text = cdc_metrics_render(metrics, &n);
    assert_non_null(strstr(
        text,
        "cdc_worker_mask_unclassified_values_total{table=\"public.people\",column=\"ssn\"} 2"));
    free(text);
    /* named by the policy, it is in */
    cdc_mask_free(m);
    m = open_mask("{\"tables\":{\"public.people\":{\"email\":\"hash\",\"city\":\"keep\","
                  "\"ssn\":\"hash\"}}}",
                  "allowlist", SECRET);
    decode(cat, "{\"email\":\"ada@example.com\"}",
           "{\"after\":{\"email\":\"ada@example.com\",\"city\":\"Oslo\",\"ssn\":\"078-05-1120\"},"
           "\"source\":{\"schema_version\":1,\"lsn\":11},\"op\":\"u\"}",
           &c);
    assert_int_equal(cdc_mask_change(m, &c, &e), CDC_OK);
    assert_int_equal(c.schema->ncols, 3);
    assert_int_equal(c.after.vals[col(c.schema, "ssn")].len, 64);
    status = cdc_mask_status_json(m);
    assert_non_null(strstr(status, "\"unclassified\":[]"));
    free(status);
    cdc_change_clear(&c);
    cdc_mask_free(m);
    cdc_metrics_free(metrics);
    cdc_catalog_free(cat);
}

/* A column whose type changed beyond an Iceberg promotion: its earlier type is the
 * retired field "ssn__v1" (docs/worker.md, "Schema changes"), which the rule on the source
 * column "ssn" covers too: dropped with it; a kept column's retired field stays. */
static void test_retired_field_follows_its_column(void **state)
{
    static const char *doc =
        "{\"format\":1,\"topic\":\"cdc.public.people\",\"schema\":\"public\",\"table\":\"people\","
        "\"version\":2,\"relid\":1,\"replica_identity\":\"default\",\"key\":[\"email\"],"
        "\"last_field_id\":5,\"columns\":["
        "{\"name\":\"email\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,\"nullable\":false,"
        "\"key\":1,\"iceberg\":\"string\",\"encoding\":\"string\",\"attnum\":1,\"field_id\":1},"
        "{\"name\":\"ssn\",\"pg_oid\":23,\"pg_type\":\"int4\",\"typmod\":-1,\"nullable\":true,"
        "\"key\":0,\"iceberg\":\"int\",\"encoding\":\"int\",\"attnum\":2,\"field_id\":4,"
        "\"type_version\":2},"
        "{\"name\":\"city\",\"pg_oid\":23,\"pg_type\":\"int4\",\"typmod\":-1,\"nullable\":true,"
        "\"key\":0,\"iceberg\":\"int\",\"encoding\":\"int\",\"attnum\":3,\"field_id\":5,"
        "\"type_version\":2}],"
        "\"retired\":[{\"name\":\"ssn__v1\",\"iceberg\":\"string\",\"attnum\":2,\"field_id\":2},"
        "{\"name\":\"city__v1\",\"iceberg\":\"string\",\"attnum\":3,\"field_id\":3}]}";
    cdc_catalog_t *cat = cdc_catalog_new();
    cdc_error_t e;
    (void)state;
    assert_int_equal(cdc_catalog_register_json(cat, TOPIC, 2, doc, strlen(doc), &e), CDC_OK);
    const cdc_source_schema_t *src = cdc_catalog_get(cat, TOPIC, 2);
    assert_non_null(src);
    assert_int_equal(src->nretired, 2);
    cdc_mask_t *m = open_mask(POLICY, NULL, SECRET);
    const cdc_source_schema_t *s = cdc_mask_schema(m, src, &e);
    assert_non_null(s);
    assert_int_equal(col(s, "ssn"), -1);
    assert_int_equal(s->nretired, 1);
    assert_string_equal(s->retired[0].name, "city");
    assert_string_equal(cdc_column_field_name(&s->retired[0]), "city__v1");
    assert_int_equal(s->retired[0].field_id, 3);
    cdc_mask_free(m);
    cdc_catalog_free(cat);
}

/* ---- digests ---------------------------------------------------------------------------- */

static void test_digests(void **state)
{
    const char *a = "{\"version\":1,\"tables\":{\"public.t\":{\"x\":\"hash\"},\"public.u\":{\"y\":"
                    "\"drop\"}}}";
    const char *b = "{\"version\":1,\"tables\":{\"public.t\":{\"x\":\"hash\"},\"public.u\":{\"y\":"
                    "\"null\"}}}";
    const char *c = "{\"version\":2,\"tables\":{\"public.u\":{\"y\":\"drop\"},\"public.t\":{\"x\":"
                    "\"hash\"}}}";
    cdc_mask_t *ma = open_mask(a, NULL, SECRET), *mb = open_mask(b, NULL, SECRET);
    cdc_mask_t *mc = open_mask(c, NULL, SECRET), *md = open_mask(a, NULL, SECRET "2");
    cdc_mask_t *me = open_mask(a, "allowlist", SECRET);
    char line[512];
    (void)state;
    /* another table's rule changed: t's identity did not, u's did */
    assert_string_equal(cdc_mask_table_policy(ma, "public", "t"),
                        cdc_mask_table_policy(mb, "public", "t"));
    assert_string_not_equal(cdc_mask_table_policy(ma, "public", "u"),
                            cdc_mask_table_policy(mb, "public", "u"));
    /* the version prefixes the digest; member order does not matter */
    const char *ta = cdc_mask_table_policy(ma, "public", "t");
    const char *tc = cdc_mask_table_policy(mc, "public", "t");
    assert_true(strncmp(ta, "1:", 2) == 0 && strncmp(tc, "2:", 2) == 0);
    assert_int_equal(strlen(ta), 2 + 64);
    assert_string_equal(ta + 2, tc + 2);
    /* another secret changes the tables that hash, and only those */
    assert_string_not_equal(ta, cdc_mask_table_policy(md, "public", "t"));
    assert_string_equal(cdc_mask_table_policy(ma, "public", "u"),
                        cdc_mask_table_policy(md, "public", "u"));
    /* the mode is part of it; allow-list mode covers tables it does not name */
    assert_string_not_equal(ta, cdc_mask_table_policy(me, "public", "t"));
    assert_string_equal(cdc_mask_table_policy(ma, "public", "v"), "");
    assert_true(strncmp(cdc_mask_table_policy(me, "public", "v"), "1:", 2) == 0);
    /* the start log names it all, never the secret */
    cdc_mask_describe(ma, line, sizeof(line));
    assert_non_null(strstr(line, "version 1: mode denylist, 2 tables, 2 rules, digest "));
    assert_null(strstr(line, SECRET));
    cdc_mask_free(ma);
    cdc_mask_free(mb);
    cdc_mask_free(mc);
    cdc_mask_free(md);
    cdc_mask_free(me);
}

/* ---- dead letters ----------------------------------------------------------------------- */

static void test_dead_letters(void **state)
{
    cdc_mask_t *m = open_mask(POLICY, NULL, SECRET);
    char *k, *v, want[65];
    size_t kl, vl;
    (void)state;
    hmac_hex(SECRET, "ada@example.com", want);

    /* the capture's envelope with a type mismatch (age) */
    const char *rec = "{\"before\":null,\"after\":{\"email\":\"ada@example.com\",\"ssn\":\"078-05-"
                      "1120\",\"name\":\"Lovelace\",\"age\":\"thirty\",\"city\":\"London\"},"
                      "\"source\":{\"schema\":\"public\",\"table\":\"people\"},\"op\":\"c\"}";
    const char *key = "{\"email\":\"ada@example.com\"}";
    assert_int_equal(
        cdc_mask_record(m, TOPIC, key, strlen(key), rec, strlen(rec), &k, &kl, &v, &vl), CDC_OK);
    assert_non_null(k);
    assert_non_null(v);
    assert_int_equal(vl, strlen(v));
    assert_null(strstr(v, "ada@example.com"));
    assert_null(strstr(v, "078-05-1120"));
    assert_null(strstr(v, "ssn"));
    assert_null(strstr(v, "thirty"));
    assert_non_null(strstr(v, want)); /* the key hashes as in the lake */
    assert_non_null(strstr(v, "\"name\":\"Lov\""));
    assert_non_null(strstr(v, "\"age\":null"));
    assert_non_null(strstr(v, "\"city\":\"London\""));
    assert_non_null(strstr(v, "\"op\":\"c\""));
    assert_null(strstr(k, "ada@example.com"));
    assert_non_null(strstr(k, want));
    free(k);
    free(v);

    /* Connect's envelope and key; the table named only by the topic */
    rec = "{\"schema\":{},\"payload\":{\"before\":{\"email\":\"ada@example.com\",\"ssn\":\"1\"},"
          "\"after\":null,\"op\":\"d\"}}";
    key = "{\"schema\":{},\"payload\":{\"email\":\"ada@example.com\"}}";
    assert_int_equal(
        cdc_mask_record(m, TOPIC, key, strlen(key), rec, strlen(rec), &k, &kl, &v, &vl), CDC_OK);
    assert_null(strstr(v, "ada@example.com"));
    assert_null(strstr(v, "ssn"));
    assert_null(strstr(k, "ada@example.com"));
    free(k);
    free(v);

    /* flattened: columns at the top, metadata kept */
    rec = "{\"email\":\"ada@example.com\",\"ssn\":\"078-05-1120\",\"__op\":\"c\",\"__lsn\":5}";
    assert_int_equal(cdc_mask_record(m, TOPIC, NULL, 0, rec, strlen(rec), &k, &kl, &v, &vl),
                     CDC_OK);
    assert_null(k);
    assert_null(strstr(v, "ada@example.com"));
    assert_null(strstr(v, "078-05-1120"));
    assert_non_null(strstr(v, "\"__op\":\"c\""));
    free(v);

    /* not JSON: withheld, key and value */
    rec = "{\"after\":{\"email\":\"ada@example.com\",";
    key = "ada@example.com";
    assert_int_equal(
        cdc_mask_record(m, TOPIC, key, strlen(key), rec, strlen(rec), &k, &kl, &v, &vl), CDC_OK);
    assert_null(strstr(v, "ada@example.com"));
    assert_null(strstr(k, "ada@example.com"));
    assert_non_null(strstr(v, "withheld"));
    free(k);
    free(v);

    /* a table the policy leaves alone: sent as it is */
    rec = "{\"after\":{\"email\":\"ada@example.com\"},\"op\":\"c\"}";
    assert_int_equal(cdc_mask_record(m, "cdc.public.other", key, strlen(key), rec, strlen(rec), &k,
                                     &kl, &v, &vl),
                     CDC_OK);
    assert_null(k);
    assert_null(v);
    cdc_mask_free(m);
}

/* Error messages that quote the record lose the quote. */
static void test_error_messages(void **state)
{
    cdc_catalog_t *cat = catalog(SCHEMA);
    cdc_mask_t *m = open_mask(POLICY, NULL, SECRET);
    const char *bad_type = "{\"after\":{\"email\":\"ada@example.com\",\"age\":\"078-05-1120\"},"
                           "\"source\":{\"schema_version\":1,\"lsn\":9},\"op\":\"c\"}";
    const char *bad_json = "{\"after\":{\"email\":\"ada@example.com\" \"ssn\":\"078-05-1120\"}}";
    const char *values[] = {bad_type, bad_json};
    (void)state;
    for (int i = 0; i < 2; i++) {
        cdc_decode_input_t in = {TOPIC, 0, 7, NULL, 0, values[i], strlen(values[i]), -1};
        cdc_decode_error_t de;
        cdc_change_t c;
        /* a value its column cannot hold: the row is kept with the column null, and the
         * message (for the dead letter) quotes it */
        assert_int_equal(cdc_decode(cat, NULL, &in, &c, &de), i == 0 ? CDC_OK : CDC_ERR_INVALID);
        if (i == 0) {
            assert_int_equal(c.nulled, 1);
            cdc_change_clear(&c);
        }
        assert_true(de.quote_at > 0);
        cdc_decode_error_t clear = de;
        cdc_mask_error(m, &de);
        cdc_mask_error(NULL, &clear); /* no policy: unchanged */
        assert_null(strstr(de.msg, "078-05-1120"));
        assert_null(strstr(de.msg, "ada@example.com"));
        assert_non_null(strstr(de.msg, "withheld"));
        assert_memory_equal(de.msg, clear.msg, de.quote_at);
    }
    cdc_mask_free(m);
    cdc_catalog_free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_secret_file),
        cmocka_unit_test(test_each_action),
        cmocka_unit_test(test_untouched_table),
        cmocka_unit_test(test_key_hash_stable),
        cmocka_unit_test(test_toast),
        cmocka_unit_test(test_policy_does_not_fit),
        cmocka_unit_test(test_allowlist),
        cmocka_unit_test(test_retired_field_follows_its_column),
        cmocka_unit_test(test_digests),
        cmocka_unit_test(test_dead_letters),
        cmocka_unit_test(test_error_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
