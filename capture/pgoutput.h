/*
 * Decoder of the pgoutput logical replication protocol (version 1), the payload of
 * the XLogData ('w') messages a walsender streams for a slot created with the
 * `pgoutput` plugin. Decoding is zero-copy: strings and column values in a decoded
 * message point into the caller's buffer, which must outlive the message. Only the
 * per-message arrays (relation columns, tuple columns, truncated relids) are
 * allocated, from a caller-owned scratch area reused across messages.
 * Protocol reference: PostgreSQL docs, "Logical Replication Message Formats".
 */
#ifndef CDC_CAPTURE_PGOUTPUT_H
#define CDC_CAPTURE_PGOUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum cdc_pgo_kind {
    CDC_PGO_BEGIN = 'B',
    CDC_PGO_COMMIT = 'C',
    CDC_PGO_ORIGIN = 'O',
    CDC_PGO_RELATION = 'R',
    CDC_PGO_TYPE = 'Y',
    CDC_PGO_INSERT = 'I',
    CDC_PGO_UPDATE = 'U',
    CDC_PGO_DELETE = 'D',
    CDC_PGO_TRUNCATE = 'T',
    CDC_PGO_MESSAGE = 'M',
} cdc_pgo_kind_t;

/* Column value kinds as sent on the wire. */
#define CDC_PGO_VAL_NULL 'n'
#define CDC_PGO_VAL_UNCHANGED 'u' /* unchanged TOASTed value: not sent */
#define CDC_PGO_VAL_TEXT 't'
#define CDC_PGO_VAL_BINARY 'b'

typedef struct cdc_pgo_value {
    char kind;        /* CDC_PGO_VAL_* */
    const char *data; /* TEXT/BINARY: points into the message, NOT NUL-terminated */
    uint32_t len;
} cdc_pgo_value_t;

typedef struct cdc_pgo_tuple {
    uint16_t ncols;
    cdc_pgo_value_t *cols; /* scratch-owned */
} cdc_pgo_tuple_t;

typedef struct cdc_pgo_column {
    bool key;         /* part of the replica identity */
    const char *name; /* NUL-terminated, points into the message */
    uint32_t type_oid;
    int32_t typmod;
} cdc_pgo_column_t;

/* Scratch space for the arrays of decoded messages; grows, never shrinks. */
typedef struct cdc_pgo_scratch {
    cdc_pgo_value_t *vals;
    size_t vals_cap;
    cdc_pgo_column_t *cols;
    size_t cols_cap;
    uint32_t *relids;
    size_t relids_cap;
} cdc_pgo_scratch_t;

typedef struct cdc_pgo_msg {
    cdc_pgo_kind_t kind;
    union {
        struct {
            uint64_t final_lsn; /* LSN of the commit record */
            int64_t commit_ts;  /* microseconds since 2000-01-01 UTC */
            uint32_t xid;
        } begin;
        struct {
            uint8_t flags;
            uint64_t commit_lsn;
            uint64_t end_lsn; /* end of the commit record: what feedback confirms */
            int64_t commit_ts;
        } commit;
        struct {
            uint64_t commit_lsn;
            const char *name;
        } origin;
        struct {
            uint32_t relid;
            const char *nspname;
            const char *relname;
            char replident; /* 'd', 'n', 'f', 'i' */
            uint16_t ncols;
            cdc_pgo_column_t *cols;
        } relation;
        struct {
            uint32_t oid;
            const char *nspname;
            const char *typname;
        } type;
        struct {
            uint32_t relid;
            cdc_pgo_tuple_t newtup;
        } insert;
        struct {
            uint32_t relid;
            char old_kind; /* 0 (no old tuple), 'K' (old key) or 'O' (old full row) */
            cdc_pgo_tuple_t oldtup;
            cdc_pgo_tuple_t newtup;
        } update;
        struct {
            uint32_t relid;
            char old_kind; /* 'K' or 'O' */
            cdc_pgo_tuple_t oldtup;
        } del;
        struct {
            uint8_t options; /* bit 1 CASCADE, bit 2 RESTART IDENTITY */
            uint32_t nrelids;
            uint32_t *relids;
        } truncate;
        struct {
            uint8_t flags; /* bit 1: transactional */
            uint64_t lsn;
            const char *prefix;
            const char *content; /* not NUL-terminated */
            uint32_t len;
        } message;
    } u;
} cdc_pgo_msg_t;

/*
 * Decodes one pgoutput message of `len` bytes at `buf`. On success *msg points into
 * buf and into scratch (valid until the next decode with the same scratch). Errors are
 * CDC_ERR_PROTOCOL (truncated or malformed message, unknown type) or CDC_ERR_NOMEM.
 */
cdc_err_t cdc_pgo_decode(const uint8_t *buf, size_t len, cdc_pgo_scratch_t *scratch,
                         cdc_pgo_msg_t *msg, cdc_error_t *e);

void cdc_pgo_scratch_free(cdc_pgo_scratch_t *scratch);

/* Microseconds between 1970-01-01 and 2000-01-01 (PostgreSQL epoch). */
#define CDC_PG_EPOCH_OFFSET_US INT64_C(946684800000000)

#endif
