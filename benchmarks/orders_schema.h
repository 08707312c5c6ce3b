/*
 * Schema document of the benchmarks' `public.orders` table (bigint key, text customer,
 * numeric(10,2) amount, text note), as cdc-capture registers it on <prefix>._schemas for
 * the topic "bench.public.orders" (docs/events.md). Shared by bench_decode and bench_state.
 */
#ifndef CDC_BENCHMARKS_ORDERS_SCHEMA_H
#define CDC_BENCHMARKS_ORDERS_SCHEMA_H

#define BENCH_ORDERS_SCHEMA                                                                        \
    "{\"format\":1,\"topic\":\"bench.public.orders\",\"schema\":\"public\",\"table\":\"orders\","  \
    "\"version\":1,\"relid\":2,\"replica_identity\":\"default\",\"key\":[\"id\"],\"columns\":["    \
    "{\"name\":\"id\",\"pg_oid\":20,\"pg_type\":\"int8\",\"typmod\":-1,\"nullable\":false,"        \
    "\"key\":1,\"iceberg\":\"long\",\"encoding\":\"int\"},"                                        \
    "{\"name\":\"customer\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,\"nullable\":true,"   \
    "\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"},"                                   \
    "{\"name\":\"amount\",\"pg_oid\":1700,\"pg_type\":\"numeric\",\"typmod\":655366,"              \
    "\"nullable\":true,\"key\":0,\"iceberg\":\"decimal(10,2)\",\"encoding\":\"decimal\"},"         \
    "{\"name\":\"note\",\"pg_oid\":25,\"pg_type\":\"text\",\"typmod\":-1,\"nullable\":true,"       \
    "\"key\":0,\"iceberg\":\"string\",\"encoding\":\"string\"}]}"

#endif
