#!/usr/bin/env bash
# Iceberg commit benchmark (make bench-iceberg): latency and rate of row-delta commits
# on a local warehouse with manifest merging and periodic snapshot expiry. No servers.
# COMMITS overrides the number of commits (default 1000).
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
bin=$BUILD_DIR/benchmarks/iceberg/bench_commit
if [ ! -x "$bin" ]; then
    echo "bench-iceberg: $bin not found; run make first" >&2
    exit 1
fi
"$bin" "${COMMITS:-1000}"
