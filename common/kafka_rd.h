/*
 * Internal to the librdkafka adapter (kafka.c, kafka_admin.c): the only header besides
 * those two files that includes rdkafka.h, and only they include it. Not for other modules.
 */
#ifndef CDC_KAFKA_RD_H
#define CDC_KAFKA_RD_H

#include <stdbool.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "common/err.h"

/* Sets e from a librdkafka error (its name and string after the message), with the
 * cdc_err_t and retriable flag of the error's translation; returns the code. */
cdc_err_t cdc_kafka__kerr(cdc_error_t *e, rd_kafka_resp_err_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One client property; CDC_ERR_CONFIG naming it when librdkafka refuses it. */
cdc_err_t cdc_kafka__conf_set(rd_kafka_conf_t *conf, const char *name, const char *value,
                              cdc_error_t *e);

/* Applies "k=v" entries separated by ';' or newlines (blank entries ignored; a file with
 * CRLF line ends reads the same). */
cdc_err_t cdc_kafka__conf_apply_properties(rd_kafka_conf_t *conf, const char *props,
                                           cdc_error_t *e);

/* The configuration every client starts from (bootstrap, client id, logging through
 * common/log.h); NULL with e set on failure. */
rd_kafka_conf_t *cdc_kafka__conf_base(const char *bootstrap, const char *client_id, cdc_error_t *e);

/* The client of `type` made from conf (taken: destroyed when the client cannot be made),
 * with the error callback every client logs through; `what` names it in the error. */
rd_kafka_t *cdc_kafka__client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, const char *what,
                                  cdc_error_t *e);

/* Partition count of topic through handle rk (see kafka.c). */
cdc_err_t cdc_kafka__partitions_of(rd_kafka_t *rk, const char *topic, bool create, int32_t *count,
                                   int timeout_ms, cdc_error_t *e);

#endif
