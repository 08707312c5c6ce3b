/*
 * Internal to the Kafka module (kafka.c, kafka_dev.c): not for other modules.
 */
#ifndef CDC_KAFKA_INT_H
#define CDC_KAFKA_INT_H

#include "common/kafka.h"

/* Creates a topic through the development broker's control channel at control
 * (host:port). CDC_OK also when the topic already exists. */
cdc_err_t cdc_kafka__dev_create_topic(const char *control, const cdc_kafka_topic_spec_t *spec,
                                      cdc_error_t *e);

#endif
