/*
 * Column masking (docs/worker.md, "Column masking"): a policy, per table and column, of
 * what reaches the lake, applied on the record path right after decoding, so that nothing
 * downstream (dedup state and its checkpoints, the stage, Parquet pages, dictionaries and
 * statistics, manifests' bounds, the Ack's schemas) ever holds a clear value of a masked
 * column. Actions: keep, drop (the column leaves the Iceberg schema), hash (keyed
 * HMAC-SHA-256, lower-case hex), redact (a constant), truncate (the first N characters),
 * null. hash, redact and truncate apply to string columns only, and a key column may only
 * be kept or hashed: the policy is checked against each schema version when the worker
 * first meets it, and a policy that does not fit is a configuration error naming the
 * table and column (the worker stops with exit status 2). In allow-list mode a column the
 * policy does not name is held back (absent, counted per table and column) until it does.
 *
 * A masked change is a cdc_change_t on a *masked schema*: a cdc_source_schema_t with the
 * dropped and held columns left out and the others' values replaced, same field ids, key
 * hashed consistently (one secret, one function), so upserts and deletes of a hashed key
 * still meet in state and in equality deletes. Dead letters are masked from their JSON
 * (cdc_mask_record), and error messages lose the values they quote (cdc_mask_error).
 *
 * Threads: cdc_mask_change, cdc_mask_schema and cdc_mask_status_json run on the record
 * thread (they keep the masked schemas and the counts); everything else reads what
 * cdc_mask_open set up and may run on any thread.
 */
#ifndef CDC_WORKER_MASK_H
#define CDC_WORKER_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/metrics.h"
#include "worker/decode.h"

typedef enum cdc_mask_action {
    CDC_MASK_KEEP = 0,
    CDC_MASK_DROP,
    CDC_MASK_HASH,
    CDC_MASK_REDACT,
    CDC_MASK_TRUNCATE,
    CDC_MASK_NULL,
    CDC_MASK_HOLD, /* allow-list mode: a column the policy does not name */
} cdc_mask_action_t;

typedef struct cdc_mask cdc_mask_t;

typedef struct cdc_mask_config {
    const char *policy;      /* --mask-policy: a file, or the policy itself when it starts
                              * with '{'; NULL or "" = none */
    const char *mode;        /* --mask-mode: "denylist" (NULL) or "allowlist" */
    const char *secret;      /* --mask-secret (CDC_MASK_SECRET) */
    const char *secret_file; /* --mask-secret-file */
} cdc_mask_config_t;

/*
 * Loads the policy and the secret. With no policy in deny-list mode *out is NULL (nothing
 * is masked) and CDC_OK. A bad policy or secret is CDC_ERR_CONFIG whose message names the
 * option and, for a syntax error, the line and column. metrics (may be NULL) receives the
 * per-column series of held columns. On success *out is the caller's (cdc_mask_free).
 */
cdc_err_t cdc_mask_open(const cdc_mask_config_t *cfg, cdc_metrics_t *metrics, cdc_mask_t **out,
                        cdc_error_t *e);
void cdc_mask_free(cdc_mask_t *m);

/* One line for the start log: source, version, mode, tables, rules and the digest. */
void cdc_mask_describe(const cdc_mask_t *m, char *buf, size_t size);

/*
 * The policy of table "<ns>.<table>" as the Ack reports it with the table's schema
 * (SchemaUpdate.mask_policy): "<version>:<sha-256 hex>" of the rules that apply to it, the
 * mode and the secret's identity (not the secret); "" when the policy leaves the table
 * alone. Owned by m. Any thread.
 */
const char *cdc_mask_table_policy(const cdc_mask_t *m, const char *ns, const char *table);

/*
 * The masked schema of source schema s (s itself when the policy leaves its table alone).
 * Owned by m; it borrows s's names, so it lives as long as s (the catalog). NULL with
 * CDC_ERR_CONFIG in *e when the policy does not fit s (the message names the table and
 * column), or CDC_ERR_NOMEM.
 */
const cdc_source_schema_t *cdc_mask_schema(cdc_mask_t *m, const cdc_source_schema_t *s,
                                           cdc_error_t *e);

/*
 * Masks a decoded change in place: c->schema becomes its masked schema, its rows are
 * rebuilt on it (values masked; TOAST markers kept, to be repaired from state, which
 * holds masked values only) and its entity rebuilt from the masked key. Errors as
 * cdc_mask_schema; c is unchanged then. A tombstone passes.
 */
cdc_err_t cdc_mask_change(cdc_mask_t *m, cdc_change_t *c, cdc_error_t *e);

/*
 * A dead letter's key and value with the policy applied to their JSON: row images
 * (`before`, `after`, Connect's `payload`, flattened rows) and key objects lose dropped
 * and held members, and the others are masked as in the lake (a hashed string hashes
 * alike). A value the policy cannot be applied to (not a JSON object) is replaced by a
 * note that it was withheld. *out_key / *out_value are malloc'd (the caller frees) when
 * they differ from the input, else NULL (send the original). CDC_ERR_NOMEM only.
 */
cdc_err_t cdc_mask_record(const cdc_mask_t *m, const char *topic, const void *key, size_t key_len,
                          const void *value, size_t value_len, char **out_key, size_t *out_key_len,
                          char **out_value, size_t *out_value_len);

/* Removes the part of a decode error's message that quotes the record (de->quote_at):
 * with a policy in force a value in a message could be a clear value of a masked
 * column. NULL m: nothing. */
void cdc_mask_error(const cdc_mask_t *m, cdc_decode_error_t *de);

/* The "masking" member of the worker's /status (malloc'd JSON text): the policy, its
 * digests, and the held columns with their counts. */
char *cdc_mask_status_json(const cdc_mask_t *m);

/* Name of an action as the policy writes it ("hash"); "held" for CDC_MASK_HOLD. */
const char *cdc_mask_action_name(cdc_mask_action_t a);

#endif
