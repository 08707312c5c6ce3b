/* The job's shared layout: see cluster.h. */
#include "common/cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

void cdc_cluster_key(char *buf, size_t size, const char *job, const char *name)
{
    snprintf(buf, size, "/cdc/%s/%s", job, name ? name : "");
}

void cdc_cluster_checkpoint_key(char *buf, size_t size, const char *job, uint64_t epoch)
{
    snprintf(buf, size, "/cdc/%s/checkpoints/%020" PRIu64, job, epoch);
}

void cdc_cluster_coordinator_key(char *buf, size_t size, const char *job, const char *id)
{
    snprintf(buf, size, "/cdc/%s/coordinators/%s", job, id ? id : "");
}

/* json_dumps of o (compact), which it releases; NULL when o is NULL. */
static char *dump_compact(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

char *cdc_leader_record_json(const cdc_leader_record_t *r)
{
    return dump_compact(
        json_pack("{s:s,s:s,s:s}", "id", r->id, "endpoint", r->endpoint, "admin", r->admin));
}

char *cdc_coordinator_record_json(const cdc_coordinator_record_t *r)
{
    return dump_compact(json_pack("{s:s,s:s,s:s,s:I,s:I}", "id", r->id, "admin", r->admin, "role",
                                  r->role, "term", (json_int_t)r->term, "since_ms",
                                  (json_int_t)r->since_ms));
}

/* A string field of a record: its name in the JSON and where it goes. */
typedef struct str_field {
    const char *name;
    char *dst;
    size_t size;
} str_field_t;

/*
 * Parses the JSON object of a record (what, for the error) into its n string fields (a
 * missing one is left empty); *o (may be NULL) keeps the object for the other fields
 * (caller releases). CDC_ERR_INVALID when json is no JSON object.
 */
static cdc_err_t parse_record(const char *json, const char *what, const str_field_t *f, size_t n,
                              json_t **o, cdc_error_t *e)
{
    json_t *obj = json ? json_loads(json, 0, NULL) : NULL;

    if (!json_is_object(obj)) {
        json_decref(obj);
        return cdc_error_set(e, CDC_ERR_INVALID, "%s is not a JSON object: %.200s", what,
                             json ? json : "(none)");
    }
    for (size_t i = 0; i < n; i++) {
        const char *v = json_string_value(json_object_get(obj, f[i].name));
        snprintf(f[i].dst, f[i].size, "%s", v ? v : "");
    }
    if (o != NULL)
        *o = obj;
    else
        json_decref(obj);
    return CDC_OK;
}

cdc_err_t cdc_leader_record_parse(const char *json, cdc_leader_record_t *r, cdc_error_t *e)
{
    const str_field_t f[] = {{"id", r->id, sizeof(r->id)},
                             {"endpoint", r->endpoint, sizeof(r->endpoint)},
                             {"admin", r->admin, sizeof(r->admin)}};

    memset(r, 0, sizeof(*r));
    return parse_record(json, "leader record", f, sizeof(f) / sizeof(f[0]), NULL, e);
}

cdc_err_t cdc_coordinator_record_parse(const char *json, cdc_coordinator_record_t *r,
                                       cdc_error_t *e)
{
    const str_field_t f[] = {{"id", r->id, sizeof(r->id)},
                             {"admin", r->admin, sizeof(r->admin)},
                             {"role", r->role, sizeof(r->role)}};
    json_t *o;

    memset(r, 0, sizeof(*r));
    if (parse_record(json, "coordinator record", f, sizeof(f) / sizeof(f[0]), &o, e) != CDC_OK)
        return CDC_ERR_INVALID;
    r->term = (int64_t)json_integer_value(json_object_get(o, "term"));
    r->since_ms = (int64_t)json_integer_value(json_object_get(o, "since_ms"));
    json_decref(o);
    return CDC_OK;
}
