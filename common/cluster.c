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

char *cdc_leader_record_json(const cdc_leader_record_t *r)
{
    json_t *o = json_pack("{s:s,s:s,s:s}", "id", r->id, "endpoint", r->endpoint, "admin", r->admin);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static void copy_field(json_t *o, const char *name, char *dst, size_t size)
{
    const char *v = json_string_value(json_object_get(o, name));
    snprintf(dst, size, "%s", v ? v : "");
}

cdc_err_t cdc_leader_record_parse(const char *json, cdc_leader_record_t *r, cdc_error_t *e)
{
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    memset(r, 0, sizeof(*r));
    if (!json_is_object(o)) {
        json_decref(o);
        return cdc_error_set(e, CDC_ERR_INVALID, "leader record is not a JSON object: %.200s",
                             json ? json : "(none)");
    }
    copy_field(o, "id", r->id, sizeof(r->id));
    copy_field(o, "endpoint", r->endpoint, sizeof(r->endpoint));
    copy_field(o, "admin", r->admin, sizeof(r->admin));
    json_decref(o);
    return CDC_OK;
}
