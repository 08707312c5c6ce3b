/*
 * Topic admin of the librdkafka adapter (see kafka.h, docs/development.md "Kafka from
 * C"): a topic's partition count, and topics created with the partitions and settings
 * the job needs, through the brokers' admin API or the development broker's control
 * channel (kafka_dev.c). Shares the client setup and error translation of kafka.c
 * through kafka_rd.h.
 */
#include "common/kafka.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "common/clock.h"
#include "common/kafka_int.h"
#include "common/kafka_rd.h"
#include "common/log.h"

/* ---- admin -------------------------------------------------------------------------------- */

static rd_kafka_t *admin_handle(const char *bootstrap, const char *properties, bool auto_create,
                                cdc_error_t *e)
{
    rd_kafka_conf_t *conf = cdc_kafka__conf_base(bootstrap, "cdc-admin", e);

    if (conf == NULL)
        return NULL;
    if (cdc_kafka__conf_apply_properties(conf, properties, e) != CDC_OK ||
        cdc_kafka__conf_set(conf, "allow.auto.create.topics", auto_create ? "true" : "false", e) !=
            CDC_OK) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return cdc_kafka__client_new(RD_KAFKA_PRODUCER, conf, "admin client", e);
}

cdc_err_t cdc_kafka_topic_partitions(const char *bootstrap, const char *properties,
                                     const char *topic, int32_t *count, int timeout_ms,
                                     cdc_error_t *e)
{
    rd_kafka_t *rk = admin_handle(bootstrap, properties, false, e);
    cdc_err_t rc;

    if (rk == NULL)
        return e ? e->code : CDC_ERR_CONFIG;
    rc = cdc_kafka__partitions_of(rk, topic, false, count, timeout_ms, e);
    rd_kafka_destroy(rk);
    return rc;
}

/* CreateTopics for one topic; CDC_ERR_EXISTS when it is there already. */
static cdc_err_t create_topic(rd_kafka_t *rk, const cdc_kafka_topic_spec_t *spec, int timeout_ms,
                              cdc_error_t *e)
{
    char errstr[512];
    rd_kafka_NewTopic_t *nt;
    rd_kafka_AdminOptions_t *opts;
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev;
    cdc_err_t rc = CDC_OK;

    nt = rd_kafka_NewTopic_new(spec->name, spec->partitions,
                               spec->replication_factor > 0 ? spec->replication_factor : -1, errstr,
                               sizeof(errstr));
    if (nt == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID, "invalid topic \"%s\": %s", spec->name, errstr);
    if (spec->compact)
        rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
    opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr, sizeof(errstr));
    rd_kafka_AdminOptions_set_operation_timeout(opts, timeout_ms, errstr, sizeof(errstr));
    q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, opts, q);
    ev = rd_kafka_queue_poll(q, timeout_ms + 2000);
    if (ev == NULL) {
        rc = cdc_error_set(e, CDC_ERR_TIMEOUT, "could not create topic \"%s\": no answer in %d ms",
                           spec->name, timeout_ms);
    } else if (rd_kafka_event_error(ev)) {
        rc = cdc_kafka__kerr(e, rd_kafka_event_error(ev), "could not create topic \"%s\"",
                             spec->name);
    } else {
        size_t cnt = 0;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
        rd_kafka_resp_err_t err =
            cnt == 1 ? rd_kafka_topic_result_error(res[0]) : RD_KAFKA_RESP_ERR__BAD_MSG;
        if (err)
            rc = cdc_kafka__kerr(e, err, "could not create topic \"%s\"", spec->name);
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_NewTopic_destroy(nt);
    return rc;
}

/*
 * Whether the cluster names a controller among its brokers: CreateTopics goes to the
 * controller, and librdkafka waits for it until the request times out. librdkafka's
 * mock cluster (the development broker, tools/kafka-dev/README.md) reports ControllerId
 * 0 while its brokers are 1..N, so a CreateTopics to it stalled for the whole timeout
 * (30 s in the capture) before the metadata fallback created the topic. Real Kafka
 * (ZooKeeper or KRaft) always names a live broker.
 */
static cdc_err_t controller_known(rd_kafka_t *rk, int timeout_ms, bool *known, cdc_error_t *e)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, NULL, &md, timeout_ms);
    int32_t id;

    *known = false;
    if (err)
        return cdc_kafka__kerr(e, err, "could not read the cluster's brokers");
    id = rd_kafka_controllerid(rk, 0);
    for (int i = 0; i < md->broker_cnt && id >= 0; i++)
        if (md->brokers[i].id == id)
            *known = true;
    rd_kafka_metadata_destroy(md);
    return CDC_OK;
}

cdc_err_t cdc_kafka_ensure_topic(const char *bootstrap, const char *properties,
                                 const cdc_kafka_topic_spec_t *spec, int timeout_ms, cdc_error_t *e)
{
    rd_kafka_t *rk;
    int32_t have = 0;
    cdc_err_t rc;
    bool controller = false;
    const char *dev = getenv("CDC_KAFKA_DEV_CONTROL");

    if (spec->partitions <= 0)
        return cdc_error_set(e, CDC_ERR_INVALID, "topic \"%s\" needs a positive partition count",
                             spec->name);
    rk = admin_handle(bootstrap, properties, true, e);
    if (rk == NULL)
        return e ? e->code : CDC_ERR_CONFIG;
    /* An existing topic needs no CreateTopics (one metadata request, no auto-create). */
    rc = cdc_kafka__partitions_of(rk, spec->name, false, &have, timeout_ms, e);
    if (rc == CDC_OK)
        goto check;
    if (rc != CDC_ERR_NOT_FOUND)
        goto out;
    /* The development broker's mock cluster has no controller to answer CreateTopics:
     * use its control channel when we know it, else the metadata request below creates
     * the topic with the broker's default partition count. */
    if (dev && dev[0])
        rc = cdc_kafka__dev_create_topic(dev, spec, e);
    else if ((rc = controller_known(rk, timeout_ms, &controller, e)) == CDC_OK)
        rc = controller ? create_topic(rk, spec, timeout_ms, e)
                        : cdc_error_set(e, CDC_ERR_UNSUPPORTED, "no controller to create topics");
    if (rc != CDC_OK && rc != CDC_ERR_EXISTS && !controller && !(dev && dev[0]))
        cdc_log_debug("topic %s: %s; creating it through a metadata request", spec->name,
                      e ? e->msg : cdc_err_str(rc));
    if (rc == CDC_ERR_UNSUPPORTED || (rc == CDC_ERR_TIMEOUT && !(dev && dev[0])))
        rc = CDC_OK;
    if (rc == CDC_OK || rc == CDC_ERR_EXISTS) {
        /* Metadata may lag behind a fresh create: retry briefly until it shows up. */
        int64_t deadline = cdc_clock_mono_ms() + timeout_ms;
        do {
            rc = cdc_kafka__partitions_of(rk, spec->name, !(dev && dev[0]), &have, timeout_ms, e);
            if (rc == CDC_OK || cdc_clock_mono_ms() >= deadline)
                break;
            usleep(100 * 1000);
        } while (rc == CDC_ERR_NOT_FOUND || (e && e->retriable));
    }
check:
    if (rc == CDC_OK && have != spec->partitions)
        rc = cdc_error_set_retriable(e, CDC_ERR_CONFLICT, false,
                                     "topic \"%s\" has %d partitions, expected %d", spec->name,
                                     (int)have, (int)spec->partitions);
out:
    rd_kafka_destroy(rk);
    return rc;
}
