/*
 * What every process of a job agrees on (docs/design.md, "The epoch protocol";
 * docs/protocol.md, "etcd keys"): the partition count of the source topics, the etcd keys
 * of the job, the leader record the coordinator publishes under its leader key, and the
 * presence record every coordinator, leader or standby, keeps under coordinators/<id>.
 * The capture, the coordinator, the worker and cdcctl take them from here.
 */
#ifndef CDC_COMMON_CLUSTER_H
#define CDC_COMMON_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Partitions of every source topic: the partition slots 0..11 the coordinator assigns. */
#define CDC_CLUSTER_PARTITIONS 12

/* "/cdc/<job>/<name>" into buf (name: "leader", "latest", "committed", "tables", "checkpoints/",
 * ... or "" for the job's prefix). */
void cdc_cluster_key(char *buf, size_t size, const char *job, const char *name);

/* "/cdc/<job>/checkpoints/<epoch, 20 digits>" into buf. */
void cdc_cluster_checkpoint_key(char *buf, size_t size, const char *job, uint64_t epoch);

/* "/cdc/<job>/coordinators/<id>" into buf: the presence record of coordinator id (with id
 * "": the prefix of them all). */
void cdc_cluster_coordinator_key(char *buf, size_t size, const char *job, const char *id);

/* The value of /cdc/<job>/leader: who leads and where workers and operators reach it. */
typedef struct cdc_leader_record {
    char id[256];
    char endpoint[256]; /* NNG url the workers dial */
    char admin[256];    /* host:port of the admin HTTP API */
} cdc_leader_record_t;

/* The record as JSON {"id","endpoint","admin"} (strings escaped); caller frees. NULL when
 * memory ran out. */
char *cdc_leader_record_json(const cdc_leader_record_t *r);

/* Parses a leader record; a missing field is left empty. CDC_ERR_INVALID when the value
 * is not a JSON object. */
cdc_err_t cdc_leader_record_parse(const char *json, cdc_leader_record_t *r, cdc_error_t *e);

/* The value of /cdc/<job>/coordinators/<id>: a coordinator that runs, leader or standby,
 * and where operators reach it (docs/protocol.md, "etcd keys"). */
typedef struct cdc_coordinator_record {
    char id[256];
    char admin[256];  /* host:port of the admin HTTP API */
    char role[16];    /* "leader" or "standby" */
    int64_t term;     /* the term it leads in; 0 for a standby */
    int64_t since_ms; /* wall clock: when it took this role */
} cdc_coordinator_record_t;

/* The record as JSON {"id","admin","role","term","since_ms"} (strings escaped); caller
 * frees. NULL when memory ran out. */
char *cdc_coordinator_record_json(const cdc_coordinator_record_t *r);

/* Parses a presence record; a missing field is left empty (0). CDC_ERR_INVALID when the
 * value is not a JSON object. */
cdc_err_t cdc_coordinator_record_parse(const char *json, cdc_coordinator_record_t *r,
                                       cdc_error_t *e);

#endif
