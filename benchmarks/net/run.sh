#!/usr/bin/env bash
# Network adapter benchmark (make bench-net): NNG Barrier->Ack round-trip latency and
# one-way message rate over loopback TCP, then etcd put and fenced checkpoint-txn
# latency through the gateway client against the harness's real etcd. Prints BENCH
# lines (docs/design.md, "Contracts"). Runnable directly after make.
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
bin=$BUILD_DIR/benchmarks/net/bench_net
if [ ! -x "$bin" ]; then
    echo "bench-net: $bin not found; run make first" >&2
    exit 1
fi
"$bin" nng "${ROUND_TRIPS:-20000}"
if [ -z "${CDC_TEST_ETCD:-}" ]; then
    # shellcheck source=tests/harness/harness.sh
    . tests/harness/harness.sh
    harness_up >/dev/null || { echo "bench-net: harness did not start" >&2; exit 1; }
    trap 'harness_down' EXIT
fi
"$bin" etcd "$CDC_TEST_ETCD" "${ETCD_OPS:-2000}"
