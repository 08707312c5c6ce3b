/*
 * The catalog (catalog.h): schema versions per topic and field ids per table, and the
 * parsing of schemas into it: the capture's registry documents (common/cdcschema.h,
 * docs/events.md), the simpler hand-written form, and the Kafka Connect schemas that
 * Debezium events embed (the decoder's, through decode_int.h).
 */
#include "worker/catalog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/cdcschema.h"
#include "common/hash.h"
#include "worker/decode_int.h"

/* ---- catalog ------------------------------------------------------------------------ */

typedef struct table_ids {
    char *key; /* table_key() of (ns, table): its key in by_table */
    char *ns, *table;
    char **names;
    int32_t *ids;
    size_t n, names_cap, ids_cap;
    int32_t next_id;
    uint64_t *fps; /* fingerprints of distinct schemas, index = schema id */
    size_t nfps;
} table_ids_t;

typedef struct topic_schemas {
    char *topic;
    cdc_source_schema_t **versions; /* registered (capture) and inline (Debezium) */
    size_t n, cap;
    int64_t latest;                    /* highest registered version, -1 = none */
    const cdc_source_schema_t *newest; /* the schema of version `latest`, NULL = none */
} topic_schemas_t;

/*
 * Every record looks its topic up (cdc_catalog_get/latest) and every embedded schema its
 * table, so both are found through a map, not a scan: with thousands of tables a scan
 * per record would cost more than the record. The maps hold index + 1 into the arrays
 * (which move when they grow) and are keyed by strings the entries own (which do not).
 * The catalog belongs to the record thread: registration and lookups run there; other
 * threads (the finalizer) only read the cdc_source_schema_t a stage points to, each
 * allocated on its own and never changed or freed before the catalog.
 */
struct cdc_catalog {
    table_ids_t *tables;
    size_t ntables, tables_cap;
    cdc_strmap_t by_table; /* table_key(ns, table) -> index + 1 in tables */
    topic_schemas_t *topics;
    size_t ntopics, topics_cap;
    cdc_strmap_t by_topic; /* topic -> index + 1 in topics */
    int64_t next_inline;   /* versions for inline schemas: -2, -3, ... */
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
        free(s->cols[i].nested);
        cdc_ice_node_free(s->cols[i].tree);
        free(s->cols[i].tree);
    }
    free(s->cols);
    for (size_t i = 0; i < s->nretired; i++) {
        free(s->retired[i].name);
        free(s->retired[i].field_name);
        free(s->retired[i].nested);
    }
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
        free(t->key);
        free(t->ns);
        free(t->table);
    }
    free(c->tables);
    cdc_strmap_free(&c->by_table);
    for (size_t i = 0; i < c->ntopics; i++) {
        for (size_t j = 0; j < c->topics[i].n; j++)
            schema_free(c->topics[i].versions[j]);
        free(c->topics[i].versions);
        free(c->topics[i].topic);
    }
    free(c->topics);
    cdc_strmap_free(&c->by_topic);
    free(c);
}

/* The key of a table in by_table, "<length of ns>:<ns>.<table>": distinct for distinct
 * pairs whatever characters the names hold (a dot may be part of either). Written to buf
 * when it fits, else allocated (*owned, which the caller frees); NULL when out of memory. */
static const char *table_key(const char *ns, const char *table, char *buf, size_t size,
                             char **owned)
{
    size_t nl = strlen(ns);
    int n = snprintf(buf, size, "%zu:%s.%s", nl, ns, table);
    *owned = NULL;
    if (n >= 0 && (size_t)n < size)
        return buf;
    return asprintf(owned, "%zu:%s.%s", nl, ns, table) < 0 ? (*owned = NULL) : *owned;
}

static table_ids_t *table_get(cdc_catalog_t *c, const char *ns, const char *table)
{
    char buf[256], *owned;
    const char *key = table_key(ns, table, buf, sizeof(buf), &owned);
    table_ids_t *t = NULL;
    size_t i;

    if (key == NULL)
        return NULL;
    if ((i = (size_t)(uintptr_t)cdc_strmap_get(&c->by_table, key)) > 0) {
        free(owned);
        return &c->tables[i - 1];
    }
    if (cdc_array_reserve(c->tables, c->tables_cap, c->ntables + 1, 16) != CDC_OK)
        goto done;
    t = memset(&c->tables[c->ntables], 0, sizeof(*t));
    t->next_id = 1;
    if ((t->key = strdup(key)) == NULL || (t->ns = strdup(ns)) == NULL ||
        (t->table = strdup(table)) == NULL ||
        cdc_strmap_put(&c->by_table, t->key, (void *)(uintptr_t)(c->ntables + 1)) != CDC_OK) {
        free(t->key);
        free(t->ns);
        free(t->table);
        t = NULL;
        goto done;
    }
    c->ntables++;
done:
    free(owned);
    return t;
}

static int32_t table_field_id(table_ids_t *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->names[i], name) == 0)
            return t->ids[i];
    if (cdc_array_reserve(t->names, t->names_cap, t->n + 1, 16) != CDC_OK ||
        cdc_array_reserve(t->ids, t->ids_cap, t->n + 1, 16) != CDC_OK)
        return -1;
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
        if (col->nested != NULL)
            h = fnv(h, col->nested, strlen(col->nested) + 1);
    }
    for (size_t i = 0; i < s->nretired; i++) {
        const cdc_column_t *col = &s->retired[i];
        int32_t t[4] = {col->field_id, (int32_t)col->type, col->precision, col->scale};
        h = fnv(h, col->name, strlen(col->name) + 1);
        h = fnv(h, cdc_column_field_name(col), strlen(cdc_column_field_name(col)) + 1);
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
        if (col->nested != NULL)
            tablefp = fnv(tablefp, col->nested, strlen(col->nested) + 1);
        tablefp = fnv(tablefp, cdc_column_field_name(col), strlen(cdc_column_field_name(col)) + 1);
    }
    for (size_t i = 0; i < t->nfps; i++)
        if (t->fps[i] == tablefp) {
            s->schema_id = (int32_t)i;
            return true;
        }
    if (cdc_array_resize(t->fps, t->nfps + 1) != CDC_OK)
        return false;
    t->fps[t->nfps] = tablefp;
    s->schema_id = (int32_t)t->nfps++;
    return true;
}

static topic_schemas_t *topic_get(cdc_catalog_t *c, const char *topic, bool create)
{
    topic_schemas_t *t;
    size_t i = (size_t)(uintptr_t)cdc_strmap_get(&c->by_topic, topic);
    if (i > 0)
        return &c->topics[i - 1];
    if (!create)
        return NULL;
    if (cdc_array_reserve(c->topics, c->topics_cap, c->ntopics + 1, 16) != CDC_OK)
        return NULL;
    t = memset(&c->topics[c->ntopics], 0, sizeof(*t));
    t->latest = -1;
    if ((t->topic = strdup(topic)) == NULL ||
        cdc_strmap_put(&c->by_topic, t->topic, (void *)(uintptr_t)(c->ntopics + 1)) != CDC_OK) {
        free(t->topic);
        return NULL;
    }
    c->ntopics++;
    return t;
}

size_t cdc_catalog_topics(const cdc_catalog_t *cat, const char **topics, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < cat->ntopics; i++)
        if (cat->topics[i].n > 0) {
            if (n < cap)
                topics[n] = cat->topics[i].topic;
            n++;
        }
    return n;
}

static bool topic_add(topic_schemas_t *t, cdc_source_schema_t *s)
{
    if (cdc_array_reserve(t->versions, t->cap, t->n + 1, 4) != CDC_OK)
        return false;
    t->versions[t->n++] = s;
    if (s->version >= 0 && s->version > t->latest) {
        t->latest = s->version;
        t->newest = s;
    }
    return true;
}

static const cdc_source_schema_t *version_get(const topic_schemas_t *t, int64_t version)
{
    if (version >= 0 && version == t->latest)
        return t->newest; /* the common case: records of the latest version */
    for (size_t i = 0; i < t->n; i++)
        if (t->versions[i]->version == version)
            return t->versions[i];
    return NULL;
}

const cdc_source_schema_t *cdc_catalog_get(cdc_catalog_t *c, const char *topic, int64_t version)
{
    topic_schemas_t *t = topic_get(c, topic, false);
    return t == NULL ? NULL : version_get(t, version);
}

const cdc_source_schema_t *cdc_catalog_latest(cdc_catalog_t *c, const char *topic)
{
    topic_schemas_t *t = topic_get(c, topic, false);
    return t == NULL ? NULL : t->newest;
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

static cdc_err_t register_generic(cdc_catalog_t *c, const char *topic, int64_t version,
                                  const char *text, size_t len, cdc_error_t *e);

/* ---- registry schema JSON ----------------------------------------------------------- */

const char *cdc_json_str(json_t *o, const char *k)
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
void cdc_catalog_names_from_topic(const char *topic, char *ns, size_t nsz, char *table, size_t tsz)
{
    const char *last = strrchr(topic, '.');
    if (last == NULL) {
        cdc_copy_str(ns, nsz, "public");
        cdc_copy_str(table, tsz, topic);
        return;
    }
    cdc_copy_str(table, tsz, last + 1);
    const char *prev = last;
    while (prev > topic && prev[-1] != '.')
        prev--;
    cdc_copy_name(ns, nsz, prev, (size_t)(last - prev));
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
        col->enc = dc->enc == CDC_VENC_RECORD ? CDC_ENC_RECORD : CDC_ENC_DEFAULT;
        col->field_id = dc->field_id;
        if (dc->field_name != NULL && (col->field_name = strdup(dc->field_name)) == NULL) {
            schema_free(s);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        if (dc->ice_nested != NULL) {
            cdc_ice_field_t f = {.id = dc->field_id > 0 ? dc->field_id : 1,
                                 .name = col->name,
                                 .type = col->type,
                                 .required = !col->optional,
                                 .nested = dc->ice_nested};
            cdc_err_t rc;
            if ((col->nested = strdup(dc->ice_nested)) == NULL ||
                (col->tree = calloc(1, sizeof(*col->tree))) == NULL) {
                schema_free(s);
                return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            }
            if ((rc = cdc_ice_node_build(&f, col->tree, e)) != CDC_OK) {
                schema_free(s);
                return cdc_error_prefix(e, "schema %s/%lld column \"%s\"", topic,
                                        (long long)version, dc->name);
            }
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
            /* named by its source column (a masking rule on "n" covers "n__v1" too),
             * its Iceberg name as field_name */
            const char *src = dc->name;
            for (size_t k = 0; dc->attnum > 0 && k < doc->ncols; k++)
                if (doc->cols[k].attnum == dc->attnum)
                    src = doc->cols[k].name;
            col->name = strdup(src);
            if (col->name != NULL && strcmp(src, dc->name) != 0)
                col->field_name = strdup(dc->name);
            if (col->name == NULL || (strcmp(src, dc->name) != 0 && col->field_name == NULL)) {
                free(col->name);
                break;
            }
            s->nretired++;
            col->field_id = dc->field_id;
            col->type = dc->ice_type;
            col->precision = dc->precision;
            col->scale = dc->scale;
            col->optional = true;
            if (dc->ice_nested != NULL && (col->nested = strdup(dc->ice_nested)) == NULL)
                break;
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
    cdc_catalog_names_from_topic(topic, ns, sizeof(ns), table, sizeof(table));
    if (cdc_json_str(root, "namespace"))
        snprintf(ns, sizeof(ns), "%s", cdc_json_str(root, "namespace"));
    else if (cdc_json_str(root, "schema"))
        snprintf(ns, sizeof(ns), "%s", cdc_json_str(root, "schema"));
    if (cdc_json_str(root, "table"))
        snprintf(table, sizeof(table), "%s", cdc_json_str(root, "table"));
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
        const char *name = cdc_json_str(jc, "name"), *type = cdc_json_str(jc, "type");
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
        if (cdc_json_str(jc, "encoding")) {
            const char *en = cdc_json_str(jc, "encoding");
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

/* Debezium's and Kafka Connect's semantic types (besides Decimal), by name or alias: the
 * Iceberg type and how the value is encoded. */
static const struct {
    const char *name, *alias;
    cdc_ice_type_t type;
    cdc_enc_t enc;
} semantic[] = {
    {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date", CDC_ICE_DATE, CDC_ENC_DEFAULT},
    {"io.debezium.time.Time", "org.apache.kafka.connect.data.Time", CDC_ICE_TIME, CDC_ENC_MILLIS},
    {"io.debezium.time.MicroTime", NULL, CDC_ICE_TIME, CDC_ENC_MICROS},
    {"io.debezium.time.NanoTime", NULL, CDC_ICE_TIME, CDC_ENC_NANOS},
    {"io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp", CDC_ICE_TIMESTAMP,
     CDC_ENC_MILLIS},
    {"io.debezium.time.MicroTimestamp", NULL, CDC_ICE_TIMESTAMP, CDC_ENC_MICROS},
    {"io.debezium.time.NanoTimestamp", NULL, CDC_ICE_TIMESTAMP, CDC_ENC_NANOS},
    {"io.debezium.time.ZonedTimestamp", NULL, CDC_ICE_TIMESTAMPTZ, CDC_ENC_DEFAULT},
    {"io.debezium.data.Uuid", NULL, CDC_ICE_UUID, CDC_ENC_DEFAULT},
};

/* Maps one Connect field schema to a column. */
static bool connect_column(json_t *f, cdc_column_t *col)
{
    const char *type = cdc_json_str(f, "type"), *name = cdc_json_str(f, "name");
    json_t *params = json_object_get(f, "parameters");

    col->optional = jbool(f, "optional", true);
    if (type == NULL)
        return false;
    if (name != NULL) {
        if (strcmp(name, "org.apache.kafka.connect.data.Decimal") == 0) {
            const char *sc = cdc_json_str(params, "scale");
            const char *pr = cdc_json_str(params, "connect.decimal.precision");
            col->type = CDC_ICE_DECIMAL;
            col->scale = sc ? atoi(sc) : 0;
            col->precision = pr ? atoi(pr) : 38;
            col->enc = strcmp(type, "bytes") == 0 ? CDC_ENC_BASE64 : CDC_ENC_DEFAULT;
            return true;
        }
        for (size_t i = 0; i < sizeof(semantic) / sizeof(semantic[0]); i++)
            if (strcmp(semantic[i].name, name) == 0 ||
                (semantic[i].alias != NULL && strcmp(semantic[i].alias, name) == 0)) {
                col->type = semantic[i].type;
                col->enc = semantic[i].enc;
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
const cdc_source_schema_t *cdc_catalog_connect_schema(cdc_catalog_t *c, const char *topic,
                                                      const char *ns, const char *table,
                                                      json_t *fields, json_t *keynames,
                                                      cdc_decode_error_t *de)
{
    cdc_source_schema_t *s;
    topic_schemas_t *t;
    size_t n = 0;

    for (size_t i = 0; i < json_array_size(fields); i++) {
        const char *fname = cdc_json_str(json_array_get(fields, i), "field");
        if (fname != NULL && strncmp(fname, "__", 2) != 0)
            n++;
    }
    s = schema_new(topic, ns, table, n);
    if (s == NULL)
        goto nomem;
    s->version = -1;
    for (size_t i = 0; i < json_array_size(fields); i++) {
        json_t *f = json_array_get(fields, i);
        const char *fname = cdc_json_str(f, "field");
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
                     cdc_json_str(f, "type") ? cdc_json_str(f, "type") : "?");
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
