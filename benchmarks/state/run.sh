#!/usr/bin/env bash
# Worker state benchmark (make bench-state): dedup state size per million keys and the
# cost of one incremental RocksDB checkpoint (bytes uploaded, ms) at 1 M keys, on the
# real record path (decode -> dedup -> state) with a local warehouse. No servers needed.
# KEYS and UPDATES override the defaults (1000000 keys, 10000 updates in the epoch).
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
bin=$BUILD_DIR/benchmarks/state/bench_state
if [ ! -x "$bin" ]; then
    echo "bench-state: $bin not found; run make first" >&2
    exit 1
fi
"$bin" "${KEYS:-1000000}" "${UPDATES:-10000}"
