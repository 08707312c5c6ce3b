/*
 * The offsets bases of checkpoint records in the warehouse (see offsets_base.h): when to
 * write a new one, and reading one back with its digest checked.
 */
#include "coordinator/offsets_base.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crypto.h"
#include "common/hex.h"
#include "common/log.h"

void cdc_offsets_base_clear(cdc_offsets_base_t *b)
{
    cdc_checkpoint_free(b->offsets);
    free(b->ref.path);
    memset(b, 0, sizeof(*b));
}

void cdc_offsets_base_location(const char *warehouse, const char *job, uint64_t epoch, char *buf,
                               size_t size)
{
    size_t n = strlen(warehouse);
    snprintf(buf, size, "%s%s_cdc/%s/offsets/%020" PRIu64 ".json", warehouse,
             n > 0 && warehouse[n - 1] == '/' ? "" : "/", job, epoch);
}

/* Writes rec's offsets as the new base b (replaced only on success). */
static cdc_err_t write_base(cdc_offsets_base_t *b, cdc_storage_t *s, const char *warehouse,
                            const cdc_checkpoint_t *rec, cdc_error_t *e)
{
    char loc[1024], *json = cdc_checkpoint_offsets_base_json(rec);
    uint8_t digest[CDC_SHA256_LEN];
    cdc_offsets_base_t nb;
    cdc_err_t rc;

    memset(&nb, 0, sizeof(nb));
    if (json == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    cdc_offsets_base_location(warehouse, rec->job, rec->epoch, loc, sizeof(loc));
    cdc_sha256(json, strlen(json), digest);
    rc = cdc_storage_put(s, loc, json, strlen(json), e);
    if (rc != CDC_OK) {
        cdc_error_prefix(e, "could not write offsets base \"%s\"", loc);
        goto done;
    }
    /* the copy kept is the file read back, so the next deltas are against what it holds */
    if ((rc = cdc_checkpoint_from_json(json, strlen(json), &nb.offsets, e)) != CDC_OK)
        goto done;
    if ((nb.ref.path = strdup(loc)) == NULL) {
        rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        goto done;
    }
    nb.ref.epoch = rec->epoch;
    cdc_hex_encode(digest, sizeof(digest), nb.ref.sha256);
    nb.term = rec->term;
    cdc_offsets_base_clear(b);
    *b = nb;
    memset(&nb, 0, sizeof(nb));
    cdc_log_info("checkpoint %" PRIu64 ": new offsets base \"%s\" (%zu offsets, sha256 %s)",
                 rec->epoch, loc, cdc_checkpoint_offset_count(rec), b->ref.sha256);
done:
    cdc_offsets_base_clear(&nb);
    free(json);
    return rc;
}

cdc_err_t cdc_offsets_base_record_json(cdc_offsets_base_t *b, cdc_storage_t *s,
                                       const char *warehouse, const cdc_checkpoint_t *rec,
                                       bool with_files, int64_t inline_max, char **out,
                                       cdc_error_t *e)
{
    long delta;
    cdc_err_t rc;

    *out = NULL;
    if ((int64_t)cdc_checkpoint_offset_count(rec) <= inline_max || s == NULL) {
        /* a later base is then newer than this record (pruning relies on it) */
        cdc_offsets_base_clear(b);
        *out = cdc_checkpoint_to_json(rec, with_files);
        return *out ? CDC_OK : cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    }
    delta = b->offsets != NULL && b->term == rec->term && b->ref.epoch <= rec->epoch
                ? cdc_checkpoint_delta_count(rec, b->offsets)
                : -1;
    if (delta < 0 || delta > inline_max) {
        if ((rc = write_base(b, s, warehouse, rec, e)) != CDC_OK)
            return rc;
    }
    *out = cdc_checkpoint_to_json_delta(rec, with_files, b->offsets, &b->ref);
    return *out ? CDC_OK : cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
}

cdc_err_t cdc_offsets_base_load(cdc_storage_t *s, cdc_checkpoint_t *rec, cdc_error_t *e)
{
    const cdc_offsets_ref_t *ref;
    uint8_t *data = NULL, digest[CDC_SHA256_LEN];
    char hex[2 * CDC_SHA256_LEN + 1];
    cdc_checkpoint_t *base = NULL;
    size_t len = 0;
    cdc_err_t rc;

    if (rec == NULL || !rec->offsets_delta)
        return CDC_OK;
    ref = &rec->offsets_base;
    rc = cdc_storage_get(s, ref->path, &data, &len, e);
    if (rc == CDC_ERR_NOT_FOUND) {
        rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                           "offsets base \"%s\" of checkpoint %" PRIu64 " is missing: the "
                           "record's offsets cannot be completed",
                           ref->path, rec->epoch);
        goto corrupt;
    }
    if (rc != CDC_OK)
        return cdc_error_prefix(e, "could not read offsets base of checkpoint %" PRIu64,
                                rec->epoch);
    cdc_sha256(data, len, digest);
    cdc_hex_encode(digest, sizeof(digest), hex);
    if (strcmp(hex, ref->sha256) != 0) {
        rc = cdc_error_set(e, CDC_ERR_CORRUPT,
                           "offsets base \"%s\" of checkpoint %" PRIu64 " has SHA-256 %s, the "
                           "record names %s",
                           ref->path, rec->epoch, hex, ref->sha256);
        goto corrupt;
    }
    if ((rc = cdc_checkpoint_from_json((const char *)data, len, &base, e)) != CDC_OK) {
        cdc_error_prefix(e, "offsets base \"%s\"", ref->path);
        if (rc == CDC_ERR_CORRUPT)
            goto corrupt;
        goto done;
    }
    if ((rc = cdc_checkpoint_merge_base(rec, base, e)) == CDC_ERR_CORRUPT)
        goto corrupt;
    goto done;
corrupt:
    cdc_log_error("%s", e ? e->msg : "offsets base corrupt");
done:
    cdc_checkpoint_free(base);
    free(data);
    return rc;
}

uint64_t cdc_offsets_base_floor(const cdc_checkpoint_t *oldest)
{
    return oldest->offsets_base.path != NULL ? oldest->offsets_base.epoch : oldest->epoch;
}

size_t cdc_offsets_base_prune(cdc_storage_t *s, const char *warehouse, const char *job,
                              uint64_t floor)
{
    char prefix[1024], **locs = NULL;
    size_t n = 0, deleted = 0;
    cdc_error_t e;

    cdc_offsets_base_location(warehouse, job, 0, prefix, sizeof(prefix));
    *(strrchr(prefix, '/') + 1) = '\0';
    if (cdc_storage_list(s, prefix, &locs, &n, &e) != CDC_OK)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = strrchr(locs[i], '/');
        char *end;
        uint64_t epoch = name ? strtoull(name + 1, &end, 10) : 0;
        if (name != NULL && end != name + 1 && strcmp(end, ".json") == 0 && epoch < floor &&
            cdc_storage_delete(s, locs[i], &e) == CDC_OK)
            deleted++;
    }
    cdc_storage_list_free(locs, n);
    return deleted;
}
