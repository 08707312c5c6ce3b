/*
 * Decoding of change events into typed rows (see decode.h for the accepted forms).
 * Layout: the catalog (schema versions per topic, field ids per table), schema
 * parsing (registry JSON, Kafka Connect schemas), value conversion per Iceberg type,
 * envelope handling, and row image serialization for the state store.
 */
#include "worker/decode.h"

#include "common/base64.h"
#include "common/cdcschema.h"
#include "worker/decode_int.h"
#include "worker/jsonscan.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- catalog ------------------------------------------------------------------------ */

typedef struct table_ids {
    char *ns, *table;
    char **names;
    int32_t *ids;
    size_t n, cap;
    int32_t next_id;
    uint64_t *fps; /* fingerprints of distinct schemas, index = schema id */
    size_t nfps;
} table_ids_t;

typedef struct topic_schemas {
    char *topic;
    cdc_source_schema_t **versions; /* registered (capture) and inline (Debezium) */
    size_t n, cap;
    int64_t latest; /* highest registered version, -1 = none */
} topic_schemas_t;

struct cdc_catalog {
    table_ids_t *tables;
    size_t ntables;
    topic_schemas_t *topics;
    size_t ntopics;
    int64_t next_inline; /* versions for inline schemas: -2, -3, ... */
};

cdc_catalog_t *cdc_catalog_new(void)
{
    cdc_catalog_t *c = calloc(1, sizeof(*c));
    if (c != NULL)
        c->next_inline = -2;
    return c;
}

static void schema_free(cdc_source_schema_t *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->ncols; i++) {
        free(s->cols[i].name);
        free(s->cols[i].field_name);
    }
    free(s->cols);
    for (size_t i = 0; i < s->nretired; i++)
        free(s->retired[i].name);
    free(s->retired);
    free(s->key_cols);
    free(s->topic);
    free(s->ns);
    free(s->table);
    free(s);
}

void cdc_catalog_free(cdc_catalog_t *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->ntables; i++) {
        table_ids_t *t = &c->tables[i];
        for (size_t j = 0; j < t->n; j++)
            free(t->names[j]);
        free(t->names);
        free(t->ids);
        free(t->fps);
        free(t->ns);
        free(t->table);
    }
    free(c->tables);
    for (size_t i = 0; i < c->ntopics; i++) {
        for (size_t j = 0; j < c->topics[i].n; j++)
            schema_free(c->topics[i].versions[j]);
        free(c->topics[i].versions);
        free(c->topics[i].topic);
    }
    free(c->topics);
    free(c);
}

static table_ids_t *table_get(cdc_catalog_t *c, const char *ns, const char *table)
{
    table_ids_t *t;
    for (size_t i = 0; i < c->ntables; i++)
        if (strcmp(c->tables[i].ns, ns) == 0 && strcmp(c->tables[i].table, table) == 0)
            return &c->tables[i];
    t = realloc(c->tables, (c->ntables + 1) * sizeof(*t));
    if (t == NULL)
        return NULL;
    c->tables = t;
    t = &c->tables[c->ntables];
    memset(t, 0, sizeof(*t));
    t->ns = strdup(ns);
    t->table = strdup(table);
    t->next_id = 1;
    if (t->ns == NULL || t->table == NULL) {
        free(t->ns);
        free(t->table);
        return NULL;
    }
    c->ntables++;
    return t;
}

static int32_t table_field_id(table_ids_t *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->names[i], name) == 0)
            return t->ids[i];
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **nn = realloc(t->names, cap * sizeof(*nn));
        if (nn == NULL)
            return -1;
        t->names = nn;
        int32_t *ni = realloc(t->ids, cap * sizeof(*ni));
        if (ni == NULL)
            return -1;
        t->ids = ni;
        t->cap = cap;
    }
    t->names[t->n] = strdup(name);
    if (t->names[t->n] == NULL)
        return -1;
    t->ids[t->n] = t->next_id++;
    return t->ids[t->n++];
}

void cdc_catalog_seed_ids(cdc_catalog_t *c, const char *ns, const char *table,
                          const cdc_ice_schema_t *schema)
{
    table_ids_t *t = table_get(c, ns, table);
    if (t == NULL)
        return;
    for (size_t i = 0; i < schema->nfields; i++) {
        const cdc_ice_field_t *f = &schema->fields[i];
        bool have = false;
        for (size_t j = 0; j < t->n; j++)
            have |= strcmp(t->names[j], f->name) == 0;
        if (have || f->id >= CDC_CL_FIELD_OP)
            continue;
        int32_t save = t->next_id;
        t->next_id = f->id;
        table_field_id(t, f->name);
        t->next_id = save > f->id + 1 ? save : f->id + 1;
    }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t schema_fp(const cdc_source_schema_t *s)
{
    uint64_t h = 14695981039346656037ULL;
    h = fnv(h, s->ns, strlen(s->ns) + 1);
    h = fnv(h, s->table, strlen(s->table) + 1);
    for (size_t i = 0; i < s->ncols; i++) {
        const cdc_column_t *col = &s->cols[i];
        int32_t t[6] = {col->field_id, (int32_t)col->type, col->precision,
                        col->scale,    (int32_t)col->key,  (int32_t)col->optional};
        h = fnv(h, col->name, strlen(col->name) + 1);
        h = fnv(h, cdc_column_field_name(col), strlen(cdc_column_field_name(col)) + 1);
        h = fnv(h, t, sizeof(t));
        h = fnv(h, &col->enc, sizeof(col->enc));
    }
    for (size_t i = 0; i < s->nretired; i++) {
        const cdc_column_t *col = &s->retired[i];
        int32_t t[4] = {col->field_id, (int32_t)col->type, col->precision, col->scale};
        h = fnv(h, col->name, strlen(col->name) + 1);
        h = fnv(h, t, sizeof(t));
    }
    return h;
}

/* Gives columns field ids, the schema its id and fingerprint. */
static bool schema_finish(cdc_catalog_t *c, cdc_source_schema_t *s)
{
    table_ids_t *t = table_get(c, s->ns, s->table);
    size_t nkey = 0;
    uint64_t tablefp = 14695981039346656037ULL;

    if (t == NULL)
        return false;
    for (size_t i = 0; i < s->ncols; i++) {
        if (!s->ids_given)
            s->cols[i].field_id = table_field_id(t, s->cols[i].name);
        if (s->cols[i].field_id < 0)
            return false;
        nkey += s->cols[i].key;
    }
    free(s->key_cols);
    s->key_cols = calloc(nkey ? nkey : 1, sizeof(size_t));
    if (s->key_cols == NULL)
        return false;
    s->nkey = 0;
    for (size_t i = 0; i < s->ncols; i++)
        if (s->cols[i].key)
            s->key_cols[s->nkey++] = i;
    s->fingerprint = schema_fp(s);
    /* The Iceberg schema id depends on the table columns only (not on encodings). */
    for (size_t i = 0; i < s->ncols + s->nretired; i++) {
        const cdc_column_t *col = i < s->ncols ? &s->cols[i] : &s->retired[i - s->ncols];
        int32_t v[4] = {col->field_id, (int32_t)col->type, col->precision, col->scale};
        tablefp = fnv(tablefp, v, sizeof(v));
        tablefp = fnv(tablefp, cdc_column_field_name(col), strlen(cdc_column_field_name(col)) + 1);
    }
    for (size_t i = 0; i < t->nfps; i++)
        if (t->fps[i] == tablefp) {
            s->schema_id = (int32_t)i;
            return true;
        }
    uint64_t *nf = realloc(t->fps, (t->nfps + 1) * sizeof(*nf));
    if (nf == NULL)
        return false;
    t->fps = nf;
    t->fps[t->nfps] = tablefp;
    s->schema_id = (int32_t)t->nfps++;
    return true;
}

static topic_schemas_t *topic_get(cdc_catalog_t *c, const char *topic, bool create)
{
    topic_schemas_t *t;
    for (size_t i = 0; i < c->ntopics; i++)
        if (strcmp(c->topics[i].topic, topic) == 0)
            return &c->topics[i];
    if (!create)
        return NULL;
    t = realloc(c->topics, (c->ntopics + 1) * sizeof(*t));
    if (t == NULL)
        return NULL;
    c->topics = t;
    t = &c->topics[c->ntopics];
    memset(t, 0, sizeof(*t));
    t->latest = -1;
    if ((t->topic = strdup(topic)) == NULL)
        return NULL;
    c->ntopics++;
    return t;
}

static bool topic_add(topic_schemas_t *t, cdc_source_schema_t *s)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4;
        cdc_source_schema_t **v = realloc(t->versions, cap * sizeof(*v));
        if (v == NULL)
            return false;
        t->versions = v;
        t->cap = cap;
    }
    t->versions[t->n++] = s;
    if (s->version >= 0 && s->version > t->latest)
        t->latest = s->version;
    return true;
}

const cdc_source_schema_t *cdc_catalog_get(cdc_catalog_t *c, const char *topic, int64_t version)
{
    topic_schemas_t *t = topic_get(c, topic, false);
    if (t == NULL)
        return NULL;
    for (size_t i = 0; i < t->n; i++)
        if (t->versions[i]->version == version)
            return t->versions[i];
    return NULL;
}

const cdc_source_schema_t *cdc_catalog_latest(cdc_catalog_t *c, const char *topic)
{
    topic_schemas_t *t = topic_get(c, topic, false);
    return t == NULL || t->latest < 0 ? NULL : cdc_catalog_get(c, topic, t->latest);
}

const cdc_source_schema_t *cdc_catalog_keyed(cdc_catalog_t *c, const char *table)
{
    const cdc_source_schema_t *best = NULL;
    for (size_t i = 0; i < c->ntopics; i++)
        for (size_t j = c->topics[i].n; j-- > 0;) {
            const cdc_source_schema_t *s = c->topics[i].versions[j];
            size_t nl = strlen(s->ns);
            if (s->nkey == 0 || strncmp(table, s->ns, nl) != 0 || table[nl] != '.' ||
                strcmp(table + nl + 1, s->table) != 0)
                continue;
            if (best == NULL || s->version > best->version ||
                (s->version < 0 && best->version < 0 && s->version < best->version))
                best = s; /* a newer registered version, or a newer embedded one */
            break;
        }
    return best;
}

/* ---- type names --------------------------------------------------------------------- */

/* Maps an Iceberg or PostgreSQL type name to an Iceberg type. */
static bool parse_type_name(const char *name, cdc_column_t *col)
{
    static const struct {
        const char *name;
        cdc_ice_type_t type;
    } map[] = {
        {"boolean", CDC_ICE_BOOLEAN},
        {"bool", CDC_ICE_BOOLEAN},
        {"int", CDC_ICE_INT},
        {"integer", CDC_ICE_INT},
        {"int2", CDC_ICE_INT},
        {"int4", CDC_ICE_INT},
        {"smallint", CDC_ICE_INT},
        {"long", CDC_ICE_LONG},
        {"int8", CDC_ICE_LONG},
        {"bigint", CDC_ICE_LONG},
        {"float", CDC_ICE_FLOAT},
        {"float4", CDC_ICE_FLOAT},
        {"real", CDC_ICE_FLOAT},
        {"double", CDC_ICE_DOUBLE},
        {"float8", CDC_ICE_DOUBLE},
        {"double precision", CDC_ICE_DOUBLE},
        {"string", CDC_ICE_STRING},
        {"text", CDC_ICE_STRING},
        {"varchar", CDC_ICE_STRING},
        {"character varying", CDC_ICE_STRING},
        {"bpchar", CDC_ICE_STRING},
        {"char", CDC_ICE_STRING},
        {"json", CDC_ICE_STRING},
        {"jsonb", CDC_ICE_STRING},
        {"binary", CDC_ICE_BINARY},
        {"bytea", CDC_ICE_BINARY},
        {"date", CDC_ICE_DATE},
        {"time", CDC_ICE_TIME},
        {"timestamp", CDC_ICE_TIMESTAMP},
        {"timestamp without time zone", CDC_ICE_TIMESTAMP},
        {"timestamptz", CDC_ICE_TIMESTAMPTZ},
        {"timestamp with time zone", CDC_ICE_TIMESTAMPTZ},
        {"uuid", CDC_ICE_UUID},
    };
    int p = 0, s = 0;
    if (sscanf(name, "decimal(%d,%d)", &p, &s) == 2 ||
        sscanf(name, "decimal(%d, %d)", &p, &s) == 2 ||
        sscanf(name, "numeric(%d,%d)", &p, &s) == 2) {
        col->type = CDC_ICE_DECIMAL;
        col->precision = p;
        col->scale = s;
        return true;
    }
    if (strcmp(name, "numeric") == 0 || strcmp(name, "decimal") == 0) {
        col->type = CDC_ICE_DECIMAL;
        if (col->precision == 0)
            col->precision = 38;
        return true;
    }
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i].name, name) == 0) {
            col->type = map[i].type;
            return true;
        }
    return false;
}

static const char *ice_type_name(const cdc_column_t *col, char *buf, size_t size)
{
    static const char *const names[CDC_ICE__TYPE_COUNT] = {
        "boolean", "int",  "long", "float",     "double",      "decimal", "string",
        "binary",  "date", "time", "timestamp", "timestamptz", "uuid"};
    if (col->type == CDC_ICE_DECIMAL) {
        snprintf(buf, size, "decimal(%d, %d)", col->precision, col->scale);
        return buf;
    }
    return names[col->type];
}

static cdc_err_t register_generic(cdc_catalog_t *c, const char *topic, int64_t version,
                                  const char *text, size_t len, cdc_error_t *e);

/* ---- registry schema JSON ----------------------------------------------------------- */

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool jbool(json_t *o, const char *k, bool dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static cdc_source_schema_t *schema_new(const char *topic, const char *ns, const char *table,
                                       size_t ncols)
{
    cdc_source_schema_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->topic = strdup(topic);
    s->ns = strdup(ns);
    s->table = strdup(table);
    s->cols = calloc(ncols ? ncols : 1, sizeof(cdc_column_t));
    if (!s->topic || !s->ns || !s->table || !s->cols) {
        schema_free(s);
        return NULL;
    }
    return s;
}

/* Splits "<prefix>.<schema>.<table>" into ns and table (the last two parts). */
/* snprintf(dst, size, "%.*s", n, src) for a src without NUL in its first n bytes, minus
 * the cost of the formatting machinery (it runs several times per event). */
static void copy_name(char *dst, size_t size, const char *src, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* snprintf(dst, size, "%s", src) */
static void copy_str(char *dst, size_t size, const char *src)
{
    copy_name(dst, size, src, strlen(src));
}

static void names_from_topic(const char *topic, char *ns, size_t nsz, char *table, size_t tsz)
{
    const char *last = strrchr(topic, '.');
    if (last == NULL) {
        copy_str(ns, nsz, "public");
        copy_str(table, tsz, topic);
        return;
    }
    copy_str(table, tsz, last + 1);
    const char *prev = last;
    while (prev > topic && prev[-1] != '.')
        prev--;
    copy_name(ns, nsz, prev, (size_t)(last - prev));
}

/* Registers a document of the capture's format (common/cdcschema.h, docs/events.md). */
static cdc_err_t register_doc(cdc_catalog_t *c, const char *topic, int64_t version,
                              const cdc_schema_doc_t *doc, cdc_error_t *e)
{
    cdc_source_schema_t *s;
    topic_schemas_t *t;
    s = schema_new(topic, doc->pg_schema ? doc->pg_schema : "public",
                   doc->pg_table ? doc->pg_table : topic, doc->ncols);
    if (s == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    s->version = version;
    for (size_t i = 0; i < doc->ncols; i++) {
        const cdc_schema_col_t *dc = &doc->cols[i];
        cdc_column_t *col = &s->cols[i];
        if ((col->name = strdup(dc->name)) == NULL) {
            schema_free(s);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        s->ncols++;
        col->type = dc->ice_type;
        col->precision = dc->precision;
        col->scale = dc->scale;
        col->key = dc->key > 0;
        col->optional = dc->nullable && dc->key == 0;
        /* Every capture encoding is this decoder's default for the Iceberg type:
         * temporal integers in micros (days for dates), decimals as text, bytes base64,
         * arrays and other types as strings. */
        col->enc = CDC_ENC_DEFAULT;
        col->field_id = dc->field_id;
        if (dc->field_name != NULL && (col->field_name = strdup(dc->field_name)) == NULL) {
            schema_free(s);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
    }
    /* documents of captures that track column identity carry the field ids */
    s->ids_given = doc->ncols > 0;
    for (size_t i = 0; i < doc->ncols; i++)
        s->ids_given = s->ids_given && doc->cols[i].field_id > 0;
    if (!s->ids_given)
        for (size_t i = 0; i < doc->ncols; i++)
            s->cols[i].field_id = 0;
    if (s->ids_given && doc->nretired > 0) {
        s->retired = calloc(doc->nretired, sizeof(*s->retired));
        for (size_t i = 0; s->retired != NULL && i < doc->nretired; i++) {
            const cdc_schema_col_t *dc = &doc->retired[i];
            cdc_column_t *col = &s->retired[s->nretired];
            if ((col->name = strdup(dc->name)) == NULL)
                break;
            s->nretired++;
            col->field_id = dc->field_id;
            col->type = dc->ice_type;
            col->precision = dc->precision;
            col->scale = dc->scale;
            col->optional = true;
        }
        if (s->nretired != doc->nretired) {
            schema_free(s);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
    }
    if (!schema_finish(c, s) || (t = topic_get(c, topic, true)) == NULL || !topic_add(t, s)) {
        schema_free(s);
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    return CDC_OK;
}

cdc_err_t cdc_catalog_register_json(cdc_catalog_t *c, const char *topic, int64_t version,
                                    const char *text, size_t len, cdc_error_t *e)
{
    cdc_schema_doc_t doc;
    if (cdc_catalog_get(c, topic, version) != NULL)
        return CDC_OK;
    if (cdc_schema_doc_decode(text, len, &doc, NULL) == CDC_OK) {
        cdc_err_t rc = register_doc(c, topic, version, &doc, e);
        cdc_schema_doc_free(&doc);
        return rc;
    }
    return register_generic(c, topic, version, text, len, e);
}

/* A simpler hand-written form ({"namespace","table","columns":[{"name","type","key",
 * "nullable"}]}) for tests and for operators describing Debezium tables. */
static cdc_err_t register_generic(cdc_catalog_t *c, const char *topic, int64_t version,
                                  const char *text, size_t len, cdc_error_t *e)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je), *cols;
    cdc_source_schema_t *s = NULL;
    char ns[128], table[128];
    cdc_err_t rc = CDC_OK;
    topic_schemas_t *t;

    if (root == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID, "schema %s/%" PRId64 " is not JSON: %s", topic,
                             version, je.text);
    if (cdc_catalog_get(c, topic, version) != NULL)
        goto done;
    names_from_topic(topic, ns, sizeof(ns), table, sizeof(table));
    if (jstr(root, "namespace"))
        snprintf(ns, sizeof(ns), "%s", jstr(root, "namespace"));
    else if (jstr(root, "schema"))
        snprintf(ns, sizeof(ns), "%s", jstr(root, "schema"));
    if (jstr(root, "table"))
        snprintf(table, sizeof(table), "%s", jstr(root, "table"));
    cols = json_object_get(root, "columns");
    if (!json_is_array(cols))
        cols = json_object_get(root, "fields");
    if (!json_is_array(cols)) {
        rc = cdc_error_set(e, CDC_ERR_INVALID, "schema %s/%" PRId64 " has no \"columns\" array",
                           topic, version);
        goto done;
    }
    s = schema_new(topic, ns, table, json_array_size(cols));
    if (s == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    s->version = version;
    for (size_t i = 0; i < json_array_size(cols); i++) {
        json_t *jc = json_array_get(cols, i);
        cdc_column_t *col = &s->cols[i];
        const char *name = jstr(jc, "name"), *type = jstr(jc, "type");
        json_t *jp = json_object_get(jc, "precision"), *js = json_object_get(jc, "scale");

        if (name == NULL || type == NULL) {
            rc = cdc_error_set(e, CDC_ERR_INVALID,
                               "schema %s/%" PRId64 ": column %zu lacks \"name\" or \"type\"",
                               topic, version, i);
            goto done;
        }
        col->name = strdup(name);
        s->ncols++;
        if (col->name == NULL) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            goto done;
        }
        col->precision = json_is_integer(jp) ? (int32_t)json_integer_value(jp) : 0;
        col->scale = json_is_integer(js) ? (int32_t)json_integer_value(js) : 0;
        if (!parse_type_name(type, col)) {
            rc = cdc_error_set(e, CDC_ERR_UNSUPPORTED,
                               "schema %s/%" PRId64 ": column \"%s\" has unsupported type \"%s\"",
                               topic, version, name, type);
            goto done;
        }
        col->key = jbool(jc, "key", jbool(jc, "primary_key", false));
        col->optional = jbool(jc, "nullable", jbool(jc, "optional", !col->key));
        if (jstr(jc, "encoding")) {
            const char *en = jstr(jc, "encoding");
            col->enc = strcmp(en, "millis") == 0   ? CDC_ENC_MILLIS
                       : strcmp(en, "micros") == 0 ? CDC_ENC_MICROS
                       : strcmp(en, "nanos") == 0  ? CDC_ENC_NANOS
                       : strcmp(en, "base64") == 0 ? CDC_ENC_BASE64
                                                   : CDC_ENC_DEFAULT;
        }
    }
    if (!schema_finish(c, s) || (t = topic_get(c, topic, true)) == NULL || !topic_add(t, s)) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    s = NULL;
done:
    schema_free(s);
    json_decref(root);
    return rc;
}

/* ---- Kafka Connect schemas (Debezium JsonConverter with schemas.enable=true) -------- */

/* Maps one Connect field schema to a column. */
static bool connect_column(json_t *f, cdc_column_t *col)
{
    const char *type = jstr(f, "type"), *name = jstr(f, "name");
    json_t *params = json_object_get(f, "parameters");

    col->optional = jbool(f, "optional", true);
    if (type == NULL)
        return false;
    if (name != NULL) {
        if (strcmp(name, "org.apache.kafka.connect.data.Decimal") == 0) {
            const char *sc = jstr(params, "scale");
            const char *pr = jstr(params, "connect.decimal.precision");
            col->type = CDC_ICE_DECIMAL;
            col->scale = sc ? atoi(sc) : 0;
            col->precision = pr ? atoi(pr) : 38;
            col->enc = strcmp(type, "bytes") == 0 ? CDC_ENC_BASE64 : CDC_ENC_DEFAULT;
            return true;
        }
        if (strcmp(name, "io.debezium.time.Date") == 0 ||
            strcmp(name, "org.apache.kafka.connect.data.Date") == 0) {
            col->type = CDC_ICE_DATE;
            return true;
        }
        if (strcmp(name, "io.debezium.time.Time") == 0 ||
            strcmp(name, "org.apache.kafka.connect.data.Time") == 0) {
            col->type = CDC_ICE_TIME;
            col->enc = CDC_ENC_MILLIS;
            return true;
        }
        if (strcmp(name, "io.debezium.time.MicroTime") == 0) {
            col->type = CDC_ICE_TIME;
            col->enc = CDC_ENC_MICROS;
            return true;
        }
        if (strcmp(name, "io.debezium.time.NanoTime") == 0) {
            col->type = CDC_ICE_TIME;
            col->enc = CDC_ENC_NANOS;
            return true;
        }
        if (strcmp(name, "io.debezium.time.Timestamp") == 0 ||
            strcmp(name, "org.apache.kafka.connect.data.Timestamp") == 0) {
            col->type = CDC_ICE_TIMESTAMP;
            col->enc = CDC_ENC_MILLIS;
            return true;
        }
        if (strcmp(name, "io.debezium.time.MicroTimestamp") == 0) {
            col->type = CDC_ICE_TIMESTAMP;
            col->enc = CDC_ENC_MICROS;
            return true;
        }
        if (strcmp(name, "io.debezium.time.NanoTimestamp") == 0) {
            col->type = CDC_ICE_TIMESTAMP;
            col->enc = CDC_ENC_NANOS;
            return true;
        }
        if (strcmp(name, "io.debezium.time.ZonedTimestamp") == 0) {
            col->type = CDC_ICE_TIMESTAMPTZ;
            return true;
        }
        if (strcmp(name, "io.debezium.data.Uuid") == 0) {
            col->type = CDC_ICE_UUID;
            return true;
        }
        /* Other semantic names (Json, Xml, Enum, ZonedTime, ...) keep the base type. */
    }
    static const struct {
        const char *t;
        cdc_ice_type_t it;
    } base[] = {
        {"boolean", CDC_ICE_BOOLEAN}, {"int8", CDC_ICE_INT},      {"int16", CDC_ICE_INT},
        {"int32", CDC_ICE_INT},       {"int64", CDC_ICE_LONG},    {"float32", CDC_ICE_FLOAT},
        {"float64", CDC_ICE_DOUBLE},  {"string", CDC_ICE_STRING}, {"bytes", CDC_ICE_BINARY}};
    for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
        if (strcmp(base[i].t, type) == 0) {
            col->type = base[i].it;
            return true;
        }
    return false;
}

/*
 * Builds (or finds) the schema of an event from a Connect struct schema (`fields` of
 * the row struct) and the key field names. Returns NULL with *de set on failure.
 */
static const cdc_source_schema_t *connect_schema(cdc_catalog_t *c, const char *topic,
                                                 const char *ns, const char *table, json_t *fields,
                                                 json_t *keynames, cdc_decode_error_t *de)
{
    cdc_source_schema_t *s;
    topic_schemas_t *t;
    size_t n = 0;

    for (size_t i = 0; i < json_array_size(fields); i++) {
        const char *fname = jstr(json_array_get(fields, i), "field");
        if (fname != NULL && strncmp(fname, "__", 2) != 0)
            n++;
    }
    s = schema_new(topic, ns, table, n);
    if (s == NULL)
        goto nomem;
    s->version = -1;
    for (size_t i = 0; i < json_array_size(fields); i++) {
        json_t *f = json_array_get(fields, i);
        const char *fname = jstr(f, "field");
        cdc_column_t *col = &s->cols[s->ncols];
        if (fname == NULL || strncmp(fname, "__", 2) == 0)
            continue;
        if ((col->name = strdup(fname)) == NULL)
            goto nomem;
        s->ncols++;
        if (!connect_column(f, col)) {
            de->cls = CDC_DLQ_UNKNOWN_SCHEMA;
            snprintf(de->msg, sizeof(de->msg),
                     "column \"%s\" has an unsupported Kafka Connect type \"%s\"", fname,
                     jstr(f, "type") ? jstr(f, "type") : "?");
            schema_free(s);
            return NULL;
        }
        for (size_t k = 0; k < json_array_size(keynames); k++)
            if (json_is_string(json_array_get(keynames, k)) &&
                strcmp(json_string_value(json_array_get(keynames, k)), fname) == 0)
                col->key = true;
    }
    if (!schema_finish(c, s))
        goto nomem;
    if ((t = topic_get(c, topic, true)) == NULL)
        goto nomem;
    for (size_t i = 0; i < t->n; i++)
        if (t->versions[i]->version < -1 && t->versions[i]->fingerprint == s->fingerprint) {
            schema_free(s);
            return t->versions[i];
        }
    s->version = c->next_inline--;
    if (!topic_add(t, s))
        goto nomem;
    return s;
nomem:
    schema_free(s);
    de->cls = CDC_DLQ_MALFORMED_JSON;
    snprintf(de->msg, sizeof(de->msg), "out of memory");
    return NULL;
}

/* ---- value conversion --------------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static bool parse_date(const char *s, int64_t *days, const char **rest)
{
    int y, m, d, n = 0;
    if (sscanf(s, "%d-%d-%d%n", &y, &m, &d, &n) != 3 || m < 1 || m > 12 || d < 1 || d > 31)
        return false;
    *days = days_from_civil(y, (unsigned)m, (unsigned)d);
    *rest = s + n;
    return true;
}

static bool parse_time(const char *s, int64_t *us, const char **rest)
{
    int h, mi, n = 0;
    double sec;
    if (sscanf(s, "%d:%d:%lf%n", &h, &mi, &sec, &n) != 3 || h < 0 || h > 24 || mi < 0 || mi > 59 ||
        sec < 0 || sec >= 61)
        return false;
    /* Integer part of seconds and fraction digits parsed exactly, not through double. */
    const char *p = s;
    while (*p && *p != ':')
        p++;
    p++;
    while (*p && *p != ':')
        p++;
    p++;
    int64_t whole = 0, frac = 0, scale = 1000000;
    while (isdigit((unsigned char)*p))
        whole = whole * 10 + (*p++ - '0');
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (scale > 1) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
            p++;
        }
    }
    *us = ((int64_t)h * 3600 + mi * 60 + whole) * 1000000 + frac;
    *rest = p;
    return true;
}

/* ISO timestamp; with_zone: accepts Z / +hh:mm / +hhmm / +hh and converts to UTC. */
static bool parse_timestamp(const char *s, bool with_zone, int64_t *us)
{
    int64_t days, t;
    const char *p;
    if (!parse_date(s, &days, &p))
        return false;
    if (*p == 'T' || *p == ' ') {
        if (!parse_time(p + 1, &t, &p))
            return false;
    } else {
        t = 0;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, hh = 0, mm = 0;
        p++;
        if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]))
            return false;
        hh = (p[0] - '0') * 10 + (p[1] - '0');
        p += 2;
        if (*p == ':')
            p++;
        if (isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1])) {
            mm = (p[0] - '0') * 10 + (p[1] - '0');
            p += 2;
        }
        off = sign * ((int64_t)hh * 3600 + mm * 60) * 1000000;
    }
    if (*p != '\0')
        return false;
    (void)with_zone;
    *us = days * 86400LL * 1000000 + t - off;
    return true;
}

/* Debezium's binary columns: base64 text of n characters (see common/base64.h). */
static bool base64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len)
{
    *out = (uint8_t *)cdc_base64_decode(s, n, out_len);
    return *out != NULL;
}

static bool hexval(int ch, int *v)
{
    if (ch >= '0' && ch <= '9')
        *v = ch - '0';
    else if (ch >= 'a' && ch <= 'f')
        *v = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'F')
        *v = ch - 'A' + 10;
    else
        return false;
    return true;
}

/* Decimal text ("-12.50", "1e3") to an unscaled integer at `scale`. */
static bool parse_decimal_text(const char *s, int32_t precision, int32_t scale, __int128 *out)
{
    __int128 v = 0;
    int digits = 0, frac = 0, exp = 0;
    bool neg = false, dot = false, any = false;
    const char *p = s;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    for (; *p; p++) {
        if (isdigit((unsigned char)*p)) {
            any = true;
            if (v != 0 || *p != '0')
                digits++;
            if (digits > 38)
                return false;
            v = v * 10 + (*p - '0');
            if (dot)
                frac++;
        } else if (*p == '.' && !dot) {
            dot = true;
        } else if (*p == 'e' || *p == 'E') {
            char *end;
            long x = strtol(p + 1, &end, 10);
            if (*end != '\0' || x > 38 || x < -38)
                return false;
            exp = (int)x;
            break;
        } else {
            return false;
        }
    }
    if (!any)
        return false;
    int shift = scale - frac + exp;
    for (; shift > 0; shift--) {
        v *= 10;
        digits++;
    }
    for (; shift < 0; shift++) {
        if (v % 10 != 0)
            return false; /* would lose digits: not representable at this scale */
        v /= 10;
        digits--;
    }
    if (precision > 0 && digits > precision)
        return false;
    *out = neg ? -v : v;
    return true;
}

static bool set_bytes(cdc_val_t *v, const void *p, size_t n)
{
    v->bytes = malloc(n ? n : 1);
    if (v->bytes == NULL)
        return false;
    memcpy(v->bytes, p, n);
    v->len = n;
    return true;
}

static bool parse_uuid(const char *s, uint8_t out[16])
{
    int n = 0;
    for (const char *p = s; *p; p++) {
        int hi, lo;
        if (*p == '-')
            continue;
        if (n >= 16 || !hexval((unsigned char)p[0], &hi) || !hexval((unsigned char)p[1], &lo))
            return false;
        out[n++] = (uint8_t)(hi << 4 | lo);
        p++;
    }
    return n == 16;
}

static int64_t scale_temporal(int64_t x, cdc_enc_t enc)
{
    switch (enc) {
    case CDC_ENC_MILLIS:
        return x * 1000;
    case CDC_ENC_NANOS:
        return x / 1000;
    default:
        return x;
    }
}

/*
 * Converts one JSON value (j, see decode_int.h) to the column's type. Shared by the tree
 * path and the direct decoder, so both produce the same values. Returns 1 when converted,
 * 0 on a type mismatch (v zeroed), -1 when out of memory; placeholder marks Debezium's
 * unchanged-TOAST placeholder.
 */
int cdc_decode_convert(const cdc_column_t *col, const cdc_jv_t *j, const char *placeholder,
                       cdc_val_t *v)
{
    const char *str = j->t == CDC_JV_STRING ? j->s : NULL;
    size_t slen = str ? j->n : 0;

    memset(v, 0, sizeof(*v));
    if (j->t == CDC_JV_NULL) {
        v->kind = CDC_VAL_NULL;
        if (!col->optional)
            goto mismatch;
        return 1;
    }
    if (str != NULL && placeholder != NULL && strcmp(str, placeholder) == 0) {
        v->kind = CDC_VAL_TOAST;
        return 1;
    }
    v->kind = CDC_VAL_SET;
    switch (col->type) {
    case CDC_ICE_BOOLEAN:
        if (j->t != CDC_JV_TRUE && j->t != CDC_JV_FALSE)
            goto mismatch;
        v->u.b = j->t == CDC_JV_TRUE;
        return 1;
    case CDC_ICE_INT:
    case CDC_ICE_LONG:
        if (j->t != CDC_JV_INT)
            goto mismatch;
        v->u.i = j->i;
        if (col->type == CDC_ICE_INT && (v->u.i < INT32_MIN || v->u.i > INT32_MAX))
            goto mismatch;
        return 1;
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE:
        if (j->t == CDC_JV_INT || j->t == CDC_JV_REAL) {
            v->u.d = j->t == CDC_JV_INT ? (double)j->i : j->d;
            return 1;
        }
        if (str && strcmp(str, "NaN") == 0)
            v->u.d = NAN;
        else if (str && strcmp(str, "Infinity") == 0)
            v->u.d = INFINITY;
        else if (str && strcmp(str, "-Infinity") == 0)
            v->u.d = -INFINITY;
        else
            goto mismatch;
        return 1;
    case CDC_ICE_DECIMAL: {
        char buf[64];
        if (col->enc == CDC_ENC_BASE64) {
            uint8_t *raw;
            size_t rl;
            if (str == NULL || !base64_decode(str, slen, &raw, &rl))
                goto mismatch;
            if (rl == 0 || rl > 16) {
                free(raw);
                goto mismatch;
            }
            __int128 x = (raw[0] & 0x80) ? -1 : 0;
            for (size_t i = 0; i < rl; i++)
                x = (__int128)(((unsigned __int128)x << 8) | raw[i]);
            free(raw);
            v->u.dec = x;
            return 1;
        }
        if (j->t == CDC_JV_INT) {
            snprintf(buf, sizeof(buf), "%" PRId64, j->i);
            str = buf;
        } else if (j->t == CDC_JV_REAL) {
            snprintf(buf, sizeof(buf), "%.17g", j->d);
            str = buf;
        }
        if (str == NULL || !parse_decimal_text(str, col->precision, col->scale, &v->u.dec))
            goto mismatch;
        return 1;
    }
    case CDC_ICE_STRING:
        if (str != NULL)
            return set_bytes(v, str, slen) ? 1 : -1;
        goto mismatch; /* json/jsonb sent as structure: the tree path dumps it */
    case CDC_ICE_BINARY:
        if (str == NULL)
            goto mismatch;
        if (slen >= 2 && str[0] == '\\' && str[1] == 'x') { /* PostgreSQL hex format */
            if ((slen - 2) % 2 != 0 || !set_bytes(v, "", 0))
                goto mismatch;
            free(v->bytes);
            v->bytes = malloc((slen - 2) / 2 + 1);
            if (v->bytes == NULL)
                return -1;
            for (size_t i = 2; i < slen; i += 2) {
                int hi, lo;
                if (!hexval((unsigned char)str[i], &hi) ||
                    !hexval((unsigned char)str[i + 1], &lo)) {
                    free(v->bytes);
                    v->bytes = NULL;
                    goto mismatch;
                }
                v->bytes[(i - 2) / 2] = (uint8_t)(hi << 4 | lo);
            }
            v->len = (slen - 2) / 2;
            return 1;
        }
        if (!base64_decode(str, slen, &v->bytes, &v->len))
            goto mismatch;
        if (placeholder != NULL && v->len == strlen(placeholder) &&
            memcmp(v->bytes, placeholder, v->len) == 0) {
            free(v->bytes);
            memset(v, 0, sizeof(*v));
            v->kind = CDC_VAL_TOAST;
        }
        return 1;
    case CDC_ICE_DATE: {
        const char *rest;
        if (j->t == CDC_JV_INT) {
            v->u.i = j->i;
            return 1;
        }
        if (str == NULL || !parse_date(str, &v->u.i, &rest) || *rest != '\0')
            goto mismatch;
        return 1;
    }
    case CDC_ICE_TIME: {
        const char *rest;
        if (j->t == CDC_JV_INT) {
            v->u.i = scale_temporal(j->i, col->enc);
            return 1;
        }
        if (str == NULL || !parse_time(str, &v->u.i, &rest))
            goto mismatch;
        return 1;
    }
    case CDC_ICE_TIMESTAMP:
    case CDC_ICE_TIMESTAMPTZ:
        if (j->t == CDC_JV_INT) {
            v->u.i = scale_temporal(j->i, col->enc);
            return 1;
        }
        if (str == NULL || !parse_timestamp(str, col->type == CDC_ICE_TIMESTAMPTZ, &v->u.i))
            goto mismatch;
        return 1;
    case CDC_ICE_UUID: {
        uint8_t u[16];
        if (str == NULL || !parse_uuid(str, u))
            goto mismatch;
        return set_bytes(v, u, 16) ? 1 : -1;
    }
    default:
        break;
    }
mismatch:
    memset(v, 0, sizeof(*v));
    return 0;
}

/* The tree's value as the converter sees it (strings stay in the tree). */
static void jv_from_json(json_t *j, cdc_jv_t *jv)
{
    memset(jv, 0, sizeof(*jv));
    switch (j == NULL ? JSON_NULL : json_typeof(j)) {
    case JSON_TRUE:
        jv->t = CDC_JV_TRUE;
        break;
    case JSON_FALSE:
        jv->t = CDC_JV_FALSE;
        break;
    case JSON_INTEGER:
        jv->t = CDC_JV_INT;
        jv->i = json_integer_value(j);
        break;
    case JSON_REAL:
        jv->t = CDC_JV_REAL;
        jv->d = json_real_value(j);
        break;
    case JSON_STRING:
        jv->t = CDC_JV_STRING;
        jv->s = json_string_value(j);
        jv->n = json_string_length(j);
        break;
    case JSON_OBJECT:
    case JSON_ARRAY:
        jv->t = CDC_JV_OTHER;
        break;
    default:
        jv->t = CDC_JV_NULL;
        break;
    }
}

/*
 * Converts JSON j to the column's type. Returns false with de set on a type mismatch
 * (nothing set when out of memory).
 */
static bool convert(const cdc_column_t *col, json_t *j, const char *placeholder, cdc_val_t *v,
                    cdc_decode_error_t *de)
{
    cdc_jv_t jv;
    int r;

    jv_from_json(j, &jv);
    if (jv.t == CDC_JV_OTHER && col->type == CDC_ICE_STRING) { /* json/jsonb as structure */
        char *d = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        bool ok;
        memset(v, 0, sizeof(*v));
        v->kind = CDC_VAL_SET;
        ok = d != NULL && set_bytes(v, d, strlen(d));
        free(d);
        return ok;
    }
    r = cdc_decode_convert(col, &jv, placeholder, v);
    if (r > 0)
        return true;
    if (r < 0)
        return false;
    de->cls = CDC_DLQ_TYPE_MISMATCH;
    {
        char tb[32];
        char *shown = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        snprintf(de->msg, sizeof(de->msg), "column \"%s\" expects %s, got %.80s", col->name,
                 ice_type_name(col, tb, sizeof(tb)), shown ? shown : "null");
        free(shown);
    }
    memset(v, 0, sizeof(*v));
    return false;
}

/* ---- rows ----------------------------------------------------------------------------- */

void cdc_row_clear(cdc_row_t *r)
{
    if (r->vals != NULL && r->schema != NULL)
        for (size_t i = 0; i < r->schema->ncols; i++)
            free(r->vals[i].bytes);
    free(r->vals);
    r->vals = NULL;
}

void cdc_change_clear(cdc_change_t *c)
{
    cdc_row_clear(&c->before);
    cdc_row_clear(&c->after);
    free(c->entity);
    memset(c, 0, sizeof(*c));
}

/* Decodes a JSON object into a row of schema s. Missing columns read as null. */
static bool decode_row(const cdc_source_schema_t *s, json_t *obj, const char *placeholder,
                       cdc_row_t *r, cdc_decode_error_t *de)
{
    r->schema = s;
    r->vals = calloc(s->ncols ? s->ncols : 1, sizeof(cdc_val_t));
    if (r->vals == NULL) {
        de->cls = CDC_DLQ_MALFORMED_JSON;
        snprintf(de->msg, sizeof(de->msg), "out of memory");
        return false;
    }
    for (size_t i = 0; i < s->ncols; i++) {
        json_t *j = json_object_get(obj, s->cols[i].name);
        if (j == NULL) { /* column not in the event (e.g. before image): null, never guessed */
            r->vals[i].kind = CDC_VAL_NULL;
            continue;
        }
        if (!convert(&s->cols[i], j, placeholder, &r->vals[i], de)) {
            cdc_row_clear(r);
            return false;
        }
    }
    return true;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Fixed-width payload of a non-byte value. */
static size_t fixed_payload(const cdc_column_t *col, const cdc_val_t *v, uint8_t out[16])
{
    switch (col->type) {
    case CDC_ICE_BOOLEAN:
        out[0] = v->u.b;
        return 1;
    case CDC_ICE_FLOAT:
    case CDC_ICE_DOUBLE:
        memcpy(out, &v->u.d, 8);
        return 8;
    case CDC_ICE_DECIMAL:
        memcpy(out, &v->u.dec, 16);
        return 16;
    default: {
        uint64_t x = (uint64_t)v->u.i;
        for (int k = 0; k < 8; k++)
            out[k] = (uint8_t)(x >> (56 - 8 * k));
        return 8;
    }
    }
}

static bool is_bytes_type(cdc_ice_type_t t)
{
    return t == CDC_ICE_STRING || t == CDC_ICE_BINARY || t == CDC_ICE_UUID;
}

/* Entity key: "<ns>.<table>\0" then per key column: type, length, canonical bytes. */
bool cdc_decode_entity(const cdc_source_schema_t *s, const cdc_row_t *r, cdc_change_t *c,
                       cdc_decode_error_t *de)
{
    size_t nsl = strlen(s->ns), tl = strlen(s->table), cap = nsl + tl + 2, n;
    uint8_t fixed[16];

    if (s->nkey == 0) {
        de->cls = CDC_DLQ_MISSING_KEY;
        snprintf(de->msg, sizeof(de->msg), "table \"%s.%s\" has no primary key", s->ns, s->table);
        return false;
    }
    for (size_t k = 0; k < s->nkey; k++) {
        const cdc_val_t *v = &r->vals[s->key_cols[k]];
        if (v->kind != CDC_VAL_SET) {
            de->cls = CDC_DLQ_MISSING_KEY;
            snprintf(de->msg, sizeof(de->msg), "key column \"%s\" is missing or null",
                     s->cols[s->key_cols[k]].name);
            return false;
        }
        cap += 5 + (is_bytes_type(s->cols[s->key_cols[k]].type) ? v->len : 16);
    }
    c->entity = malloc(cap);
    if (c->entity == NULL)
        return false;
    memcpy(c->entity, s->ns, nsl); /* "<ns>.<table>\0" */
    c->entity[nsl] = '.';
    memcpy(c->entity + nsl + 1, s->table, tl + 1);
    n = nsl + tl + 2;
    for (size_t k = 0; k < s->nkey; k++) {
        const cdc_column_t *col = &s->cols[s->key_cols[k]];
        const cdc_val_t *v = &r->vals[s->key_cols[k]];
        const uint8_t *p = fixed;
        size_t len;
        if (is_bytes_type(col->type)) {
            p = v->bytes;
            len = v->len;
        } else {
            cdc_column_t as_long = *col;
            if (col->type == CDC_ICE_INT)
                as_long.type = CDC_ICE_LONG; /* int -> long promotion keeps the key */
            len = fixed_payload(&as_long, v, fixed);
        }
        c->entity[n++] = col->type == CDC_ICE_INT ? CDC_ICE_LONG : (uint8_t)col->type;
        put_u32(c->entity + n, (uint32_t)len);
        n += 4;
        memcpy(c->entity + n, p, len);
        n += len;
    }
    c->entity_len = n;
    return true;
}

bool cdc_decode_entity_row(const cdc_source_schema_t *s, const uint8_t *entity, size_t len,
                           cdc_row_t *row)
{
    const uint8_t *z = memchr(entity, 0, len), *p, *end = entity + len;

    row->schema = s;
    row->vals = NULL;
    if (z == NULL || s->nkey == 0 ||
        (row->vals = calloc(s->ncols ? s->ncols : 1, sizeof(cdc_val_t))) == NULL)
        return false;
    for (size_t i = 0; i < s->ncols; i++)
        row->vals[i].kind = CDC_VAL_NULL;
    p = z + 1;
    for (size_t k = 0; k < s->nkey; k++) {
        const cdc_column_t *col = &s->cols[s->key_cols[k]];
        cdc_val_t *v = &row->vals[s->key_cols[k]];
        uint8_t type = col->type == CDC_ICE_INT ? CDC_ICE_LONG : (uint8_t)col->type;
        uint32_t n;
        if (end - p < 5 || p[0] != type)
            goto bad;
        n = get_u32(p + 1);
        p += 5;
        if ((size_t)(end - p) < n)
            goto bad;
        if (is_bytes_type(col->type)) {
            if ((v->bytes = malloc(n ? n : 1)) == NULL)
                goto bad;
            memcpy(v->bytes, p, n);
            v->len = n;
        } else if (col->type == CDC_ICE_BOOLEAN && n == 1) {
            v->u.b = p[0] != 0;
        } else if ((col->type == CDC_ICE_FLOAT || col->type == CDC_ICE_DOUBLE) && n == 8) {
            memcpy(&v->u.d, p, 8);
        } else if (col->type == CDC_ICE_DECIMAL && n == 16) {
            memcpy(&v->u.dec, p, 16);
        } else if (n == 8) {
            uint64_t x = 0;
            for (int b = 0; b < 8; b++)
                x = x << 8 | p[b];
            v->u.i = (int64_t)x;
        } else {
            goto bad;
        }
        v->kind = CDC_VAL_SET;
        p += n;
    }
    if (p == end)
        return true;
bad:
    cdc_row_clear(row);
    return false;
}

bool cdc_row_serialize(const cdc_row_t *r, uint8_t **out, size_t *out_len)
{
    const cdc_source_schema_t *s = r->schema;
    size_t cap = 1, n = 0;
    uint8_t *buf;
    for (size_t i = 0; i < s->ncols; i++)
        cap += 10 + (r->vals[i].bytes ? r->vals[i].len + 4 : 16);
    buf = malloc(cap);
    if (buf == NULL)
        return false;
    buf[n++] = 1; /* format version */
    for (size_t i = 0; i < s->ncols; i++) {
        const cdc_val_t *v = &r->vals[i];
        if (v->kind == CDC_VAL_TOAST)
            continue; /* never store a placeholder: absent = unknown */
        put_u32(buf + n, (uint32_t)s->cols[i].field_id);
        n += 4;
        buf[n++] = (uint8_t)s->cols[i].type;
        buf[n++] = (uint8_t)v->kind;
        if (v->kind != CDC_VAL_SET)
            continue;
        if (is_bytes_type(s->cols[i].type)) {
            put_u32(buf + n, (uint32_t)v->len);
            n += 4;
            memcpy(buf + n, v->bytes, v->len);
            n += v->len;
        } else {
            n += fixed_payload(&s->cols[i], v, buf + n);
        }
    }
    *out = buf;
    *out_len = n;
    return true;
}

int cdc_row_image_lookup(const uint8_t *img, size_t len, int32_t field_id, cdc_val_t *v)
{
    size_t n = 1;
    if (len < 1 || img[0] != 1)
        return -1;
    while (n < len) {
        if (n + 6 > len)
            return -1;
        int32_t fid = (int32_t)get_u32(img + n);
        cdc_ice_type_t type = (cdc_ice_type_t)img[n + 4];
        cdc_val_kind_t kind = (cdc_val_kind_t)img[n + 5];
        size_t plen = 0, skip = 0;
        n += 6;
        if (kind == CDC_VAL_SET) {
            if (is_bytes_type(type)) {
                if (n + 4 > len)
                    return -1;
                plen = get_u32(img + n);
                skip = 4 + plen;
            } else {
                skip = type == CDC_ICE_BOOLEAN ? 1 : type == CDC_ICE_DECIMAL ? 16 : 8;
            }
            if (n + skip > len)
                return -1;
        }
        if (fid == field_id) {
            memset(v, 0, sizeof(*v));
            v->kind = kind;
            if (kind != CDC_VAL_SET)
                return 1;
            if (is_bytes_type(type)) {
                if (!set_bytes(v, img + n + 4, plen))
                    return -1;
            } else if (type == CDC_ICE_BOOLEAN) {
                v->u.b = img[n] != 0;
            } else if (type == CDC_ICE_FLOAT || type == CDC_ICE_DOUBLE) {
                memcpy(&v->u.d, img + n, 8);
            } else if (type == CDC_ICE_DECIMAL) {
                memcpy(&v->u.dec, img + n, 16);
            } else {
                uint64_t x = 0;
                for (int k = 0; k < 8; k++)
                    x = x << 8 | img[n + k];
                v->u.i = (int64_t)x;
            }
            return 1;
        }
        n += skip;
    }
    return 0;
}

/* ---- envelopes ------------------------------------------------------------------------ */

static uint64_t json_u64(json_t *j)
{
    if (json_is_integer(j))
        return (uint64_t)json_integer_value(j);
    if (json_is_string(j))
        return strtoull(json_string_value(j), NULL, 10);
    return 0;
}

/* Debezium's source.sequence: "[\"<lastCommitLsn>\",\"<lsn>\"]" (the capture writes
 * [commit_lsn, lsn]). Only the first element is needed; parsed by hand because this runs
 * for every record. */
bool cdc_decode_sequence_text(const char *p, uint64_t *commit_lsn)
{
    char *end;
    while (*p == ' ' || *p == '[')
        p++;
    if (*p == '"')
        p++;
    if (*p < '0' || *p > '9')
        return false; /* null or garbage: no commit position */
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p)
        return false;
    *commit_lsn = (uint64_t)v;
    return true;
}

static bool sequence_commit_lsn(json_t *seq, uint64_t *commit_lsn)
{
    return json_is_string(seq) && cdc_decode_sequence_text(json_string_value(seq), commit_lsn);
}

static void fail(cdc_decode_error_t *de, cdc_dlq_class_t cls, const char *fmt, const char *arg)
{
    de->cls = cls;
    snprintf(de->msg, sizeof(de->msg), fmt, arg);
}

/* Key column names from the Kafka key (JSON object, or {"schema","payload"}). */
static json_t *key_names(const cdc_decode_input_t *in)
{
    json_t *k, *payload, *names;
    const char *name;
    json_t *v;
    if (in->key == NULL || in->key_len == 0)
        return NULL;
    k = cdc_json_load(in->key, in->key_len, NULL);
    if (k == NULL)
        return NULL;
    payload = json_object_get(k, "payload");
    if (json_is_object(payload) && json_object_get(k, "schema") != NULL)
        v = payload;
    else
        v = k;
    if (!json_is_object(v)) {
        json_decref(k);
        return NULL;
    }
    names = json_array();
    for (void *it = json_object_iter(v); it != NULL; it = json_object_iter_next(v, it)) {
        name = json_object_iter_key(it);
        json_array_append_new(names, json_string(name));
    }
    json_decref(k);
    return names;
}

const char *cdc_decode_placeholder(const cdc_decode_options_t *opts)
{
    return opts && opts->toast_placeholder ? opts->toast_placeholder
                                           : "__debezium_unavailable_value";
}

static size_t max_record_bytes(const cdc_decode_options_t *opts)
{
    return opts && opts->max_record_bytes ? opts->max_record_bytes : (size_t)16 << 20;
}

cdc_err_t cdc_decode(cdc_catalog_t *cat, const cdc_decode_options_t *opts,
                     const cdc_decode_input_t *in, cdc_change_t *c, cdc_decode_error_t *de)
{
    /* The capture's own events take the direct decoder; everything else, and every
     * event it is not sure about, the general one (which defines the behaviour). */
    cdc_decode_input_t copy = *in;
    if (in->value != NULL && in->value_len <= max_record_bytes(opts) &&
        cdc_decode_fast(cat, opts, &copy, c, de))
        return CDC_OK;
    return cdc_decode_tree(cat, opts, &copy, c, de);
}

cdc_err_t cdc_decode_tree(cdc_catalog_t *cat, const cdc_decode_options_t *opts,
                          const cdc_decode_input_t *in, cdc_change_t *c, cdc_decode_error_t *de)
{
    size_t max = max_record_bytes(opts);
    const char *placeholder = cdc_decode_placeholder(opts);
    json_error_t je;
    json_t *root = NULL, *payload, *schema, *source, *before, *after, *knames = NULL;
    const cdc_source_schema_t *s = NULL;
    const char *op;
    bool flattened;
    int64_t version;
    char ns[128], table[128];
    cdc_err_t rc = CDC_ERR_INVALID;

    memset(c, 0, sizeof(*c));
    memset(de, 0, sizeof(*de));
    de->schema_version = -1;
    c->topic = in->topic;
    c->partition = in->partition;
    c->offset = in->offset;
    c->tx_id = -1;
    if (in->value == NULL) {
        c->tombstone = true;
        return CDC_OK;
    }
    if (in->value_len > max) {
        de->cls = CDC_DLQ_OVERSIZED;
        snprintf(de->msg, sizeof(de->msg), "record of %zu bytes exceeds the limit of %zu bytes",
                 in->value_len, max);
        return CDC_ERR_INVALID;
    }
    memset(&je, 0, sizeof(je)); /* the fast path leaves it alone */
    root = cdc_json_load_scoped(in->value, in->value_len, &je);
    if (root == NULL || !json_is_object(root)) {
        de->cls = CDC_DLQ_MALFORMED_JSON;
        snprintf(de->msg, sizeof(de->msg), "invalid JSON at line %d column %d: %s", je.line,
                 je.column, root ? "value is not an object" : je.text);
        goto done;
    }
    schema = json_object_get(root, "schema");
    payload = json_object_get(root, "payload");
    if (json_is_object(schema) && json_object_get(root, "payload") != NULL) {
        if (json_is_null(payload)) { /* tombstone-like payload */
            c->tombstone = true;
            rc = CDC_OK;
            goto done;
        }
        if (!json_is_object(payload)) {
            fail(de, CDC_DLQ_MALFORMED_JSON, "%s", "\"payload\" is not an object");
            goto done;
        }
    } else {
        schema = NULL;
        payload = root;
    }
    op = jstr(payload, "op");
    flattened = op == NULL && json_object_get(payload, "before") == NULL &&
                json_object_get(payload, "after") == NULL;
    if (flattened)
        op = jstr(payload, "__op");
    source = json_object_get(payload, "source");
    version = json_integer_value(json_object_get(source, "schema_version"));
    if (version <= 0)
        version = in->schema_version >= 0 || in->header_version == NULL
                      ? in->schema_version
                      : in->header_version(in->header_arg);
    de->schema_version = version;
    names_from_topic(in->topic, ns, sizeof(ns), table, sizeof(table));
    if (opts && opts->default_ns && strchr(in->topic, '.') == NULL)
        copy_str(ns, sizeof(ns), opts->default_ns);
    if (jstr(source, "schema"))
        copy_str(ns, sizeof(ns), jstr(source, "schema"));
    if (jstr(source, "table"))
        copy_str(table, sizeof(table), jstr(source, "table"));
    if (flattened && jstr(payload, "__table"))
        copy_str(table, sizeof(table), jstr(payload, "__table"));

    if (op == NULL) {
        if (flattened && json_object_get(payload, "__op") == NULL) {
            /* Flattened without add.fields=op: read as upsert, deletes via __deleted. */
            op = "u";
        } else {
            fail(de, CDC_DLQ_UNKNOWN_OP, "%s", "event has no \"op\"");
            goto done;
        }
    }
    /* cdc-capture writes a truncate to every partition (docs/events.md), in order with
     * each partition's rows. Debezium writes one event, without a key, to one partition:
     * the other partitions apply it by its position (docs/worker.md, "Debezium's
     * truncate"). */
    c->floor = strcmp(op, "t") == 0 && (flattened || version < 0);
    if (strlen(op) != 1 || strchr("curdt", op[0]) == NULL) {
        fail(de, CDC_DLQ_UNKNOWN_OP, "unknown op \"%.20s\"", op);
        goto done;
    }
    c->op = (cdc_op_t)op[0];
    if (flattened) {
        json_t *del = json_object_get(payload, "__deleted");
        if ((json_is_string(del) && strcmp(json_string_value(del), "true") == 0) ||
            json_is_true(del))
            c->op = CDC_OP_DELETE;
    }

    /* Schema: registered version (capture), embedded Connect schema, or the topic's latest. */
    if (version >= 0) {
        s = cdc_catalog_get(cat, in->topic, version);
        if (s == NULL) {
            de->cls = CDC_DLQ_UNKNOWN_SCHEMA;
            snprintf(de->msg, sizeof(de->msg),
                     "schema version %" PRId64 " of topic \"%s\" is unknown", version, in->topic);
            goto done;
        }
    } else if (schema != NULL) {
        json_t *fields = json_object_get(schema, "fields"), *rowfields = NULL;
        if (flattened) {
            rowfields = fields;
        } else {
            for (size_t i = 0; i < json_array_size(fields); i++) {
                json_t *f = json_array_get(fields, i);
                const char *fn = jstr(f, "field");
                if (fn && (strcmp(fn, "after") == 0 || strcmp(fn, "before") == 0) &&
                    json_is_array(json_object_get(f, "fields"))) {
                    rowfields = json_object_get(f, "fields");
                    if (strcmp(fn, "after") == 0)
                        break;
                }
            }
        }
        if (!json_is_array(rowfields)) {
            fail(de, CDC_DLQ_UNKNOWN_SCHEMA, "%s", "embedded schema has no row fields");
            goto done;
        }
        knames = key_names(in);
        s = connect_schema(cat, in->topic, ns, table, rowfields, knames, de);
        if (s == NULL)
            goto done;
    } else {
        s = cdc_catalog_latest(cat, in->topic);
        if (s == NULL) {
            fail(de, CDC_DLQ_UNKNOWN_SCHEMA,
                 "no schema is registered for topic \"%s\" and the event carries none", in->topic);
            goto done;
        }
    }
    c->schema = s;

    /* Position and transaction. */
    if (flattened) {
        c->lsn = json_u64(json_object_get(payload, "__lsn"));
        c->tx_id = json_is_integer(json_object_get(payload, "__txId"))
                       ? json_integer_value(json_object_get(payload, "__txId"))
                       : -1;
        c->source_ts_us = json_integer_value(json_object_get(payload, "__source_ts_ms")) * 1000;
        if (!sequence_commit_lsn(json_object_get(payload, "__sequence"), &c->commit_lsn) &&
            !sequence_commit_lsn(json_object_get(payload, "__source_sequence"), &c->commit_lsn))
            c->commit_lsn = json_u64(json_object_get(payload, "__commit_lsn"));
    } else {
        json_t *tx = json_object_get(source, "txId");
        c->lsn = json_u64(json_object_get(source, "lsn"));
        c->tx_id = json_is_integer(tx) ? json_integer_value(tx) : -1;
        if (json_is_integer(json_object_get(source, "ts_us")))
            c->source_ts_us = json_integer_value(json_object_get(source, "ts_us"));
        else
            c->source_ts_us = json_integer_value(json_object_get(source, "ts_ms")) * 1000;
        if (json_object_get(source, "commit_lsn") != NULL)
            c->commit_lsn = json_u64(json_object_get(source, "commit_lsn"));
        else if (!sequence_commit_lsn(json_object_get(source, "sequence"), &c->commit_lsn))
            c->commit_lsn = 0;
        c->backfill = (c->op == CDC_OP_READ || c->op == CDC_OP_TRUNCATE) &&
                      jstr(source, "snapshot") != NULL &&
                      strcmp(jstr(source, "snapshot"), "backfill") == 0;
    }
    if (c->commit_lsn == 0)
        c->commit_lsn = c->lsn;

    if (c->op == CDC_OP_TRUNCATE) {
        /* No rows: the entity is the table identity "<ns>.<table>\0" (a prefix of every
         * entity of the table). */
        size_t n = strlen(s->ns) + strlen(s->table) + 2;
        c->entity = malloc(n);
        if (c->entity == NULL) {
            rc = CDC_ERR_NOMEM;
            goto done;
        }
        c->entity_len = (size_t)snprintf((char *)c->entity, n, "%s.%s", s->ns, s->table) + 1;
        rc = CDC_OK;
        goto done;
    }

    /* Row images. */
    if (flattened) {
        cdc_row_t *img = c->op == CDC_OP_DELETE ? &c->before : &c->after;
        if (!decode_row(s, payload, placeholder, img, de))
            goto done;
    } else {
        before = json_object_get(payload, "before");
        after = json_object_get(payload, "after");
        if (json_is_object(before) && !decode_row(s, before, placeholder, &c->before, de))
            goto done;
        if (c->op != CDC_OP_DELETE) {
            if (!json_is_object(after)) {
                fail(de, CDC_DLQ_MALFORMED_JSON, "op \"%s\" event has no \"after\" image", op);
                goto done;
            }
            if (!decode_row(s, after, placeholder, &c->after, de))
                goto done;
        } else if (c->before.vals == NULL) {
            fail(de, CDC_DLQ_MISSING_KEY, "%s", "delete event has no \"before\" image");
            goto done;
        }
        /* The capture lists unchanged TOAST columns explicitly. */
        json_t *ut = json_object_get(payload, "unchanged_toast");
        for (size_t i = 0; c->after.vals && i < json_array_size(ut); i++) {
            const char *col = json_string_value(json_array_get(ut, i));
            for (size_t k = 0; col && k < s->ncols; k++)
                if (strcmp(s->cols[k].name, col) == 0) {
                    free(c->after.vals[k].bytes);
                    memset(&c->after.vals[k], 0, sizeof(cdc_val_t));
                    c->after.vals[k].kind = CDC_VAL_TOAST;
                }
        }
    }
    if (!cdc_decode_entity(s, c->after.vals ? &c->after : &c->before, c, de))
        goto done;
    rc = CDC_OK;
done:
    json_decref(knames);
    json_decref(root);
    cdc_json_scope_end(); /* nothing of root is used past this point */
    if (rc != CDC_OK) {
        const char *t = c->topic;
        cdc_change_clear(c);
        c->topic = t;
    }
    return rc;
}
