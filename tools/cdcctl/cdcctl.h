/*
 * cdcctl, the operator CLI: what its commands share. main.c parses the options (one
 * table for every command, common/config.h) and runs the status commands over the
 * coordinator's admin API and etcd; dlq.c lists, shows and replays dead letters over
 * Kafka; transform.c is the payload transformation of `dlq replay`.
 */
#ifndef CDC_CDCCTL_H
#define CDC_CDCCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dlq.h"
#include "common/err.h"
#include "common/options.h"

typedef struct ctl_config {
    char *coordinator;
    char *http_token;
    cdc_tls_options_t tls; /* --http-tls: https to the admin APIs */
    cdc_etcd_options_t etcd;
    char *job;
    bool json;
    char *command;
    int64_t timeout_ms;
    int64_t wait_ms; /* compact, snapshot */
    bool wait;       /* --wait was given (a bare --wait is its default) */
    char *capture;   /* snapshot: the capture's HTTP address */
    /* dlq commands */
    char *kafka;
    char *kafka_properties;
    char *topic_prefix;
    char *table;
    char *cls;
    int64_t partition;
    int64_t from_offset, to_offset;
    char *ids_file;
    int64_t limit;
    bool skip_replayed;
    char *transform;
    char *transform_cmd;
    bool dry_run;
} ctl_config_t;

/* `cdcctl dlq <sub>` (list, show, replay); returns the exit status (0, 1, or 2 for bad
 * configuration). */
int cdcctl_dlq(const ctl_config_t *cfg, const char *sub);

/* ---- transform.c -------------------------------------------------------------------------- */

typedef struct ctl_transform ctl_transform_t;

/*
 * The transformation of --transform (a JSON Patch file, common/jsonpatch.h) or
 * --transform-cmd (a shell command fed the payload on its standard input), at most one
 * of them. *out = NULL when neither is given. On success *out is owned by the caller
 * (ctl_transform_free()). CDC_ERR_CONFIG when both are given or the patch is bad.
 */
cdc_err_t ctl_transform_open(const char *patch_file, const char *cmd, ctl_transform_t **out,
                             cdc_error_t *e);

/*
 * Transforms the payload of dead letter r (payload may be NULL: a tombstone). On success
 * *out (malloc'd, the caller frees) holds the new payload. CDC_ERR_CONFLICT (not
 * retriable): a "test" of the patch failed, the record is not one the patch is for;
 * any other error: the transformation failed on this record. The message says why.
 */
cdc_err_t ctl_transform_apply(ctl_transform_t *t, const cdc_dlq_record_t *r, const void *payload,
                              size_t len, char **out, size_t *out_len, cdc_error_t *e);

/* "patch <file>" or "cmd <command>", as recorded in the replay mark. */
const char *ctl_transform_describe(const ctl_transform_t *t);

void ctl_transform_free(ctl_transform_t *t);

/* The contents of the file at path, NUL-terminated, into *out (malloc'd, the caller
 * frees it) and its length into *len. */
cdc_err_t ctl_read_file(const char *path, char **out, size_t *len, cdc_error_t *e);

#endif
