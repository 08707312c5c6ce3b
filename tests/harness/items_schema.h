/*
 * Schema document of the `public.items` table (bigint key id, text v) that
 * tests/integration/pipeline/test_runtime.c and the drain and stage benchmarks produce or stage,
 * as cdc-capture registers it on <prefix>._schemas (docs/events.md): a printf format
 * whose one argument (%s) is the table's topic, e.g. "bench.public.items".
 */
#ifndef CDC_TEST_ITEMS_SCHEMA_H
#define CDC_TEST_ITEMS_SCHEMA_H

#define CDC_TEST_ITEMS_SCHEMA_FMT                                                                  \
    "{\"format\":1,\"topic\":\"%s\",\"schema\":\"public\",\"table\":\"items\","                    \
    "\"version\":1,\"relid\":1,\"replica_identity\":\"default\",\"key\":[\"id\"],"                 \
    "\"columns\":["                                                                                \
    "{\"name\":\"id\",\"pg_oid\":20,\"pg_type\":\"int8\",\"typmod\":-1,"                           \
    "\"nullable\":false,\"key\":1,\"iceberg\":\"long\",\"encoding\":\"int\"},"                     \
    "{\"name\":\"v\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,"                            \
    "\"nullable\":true,\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"}]}"

#endif
