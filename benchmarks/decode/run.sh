#!/usr/bin/env bash
# Decode benchmark (make bench-decode): thread CPU per capture-format event of the worker's
# decode step through the direct decoder (worker/decode_fast.c) vs. the general jansson-tree
# decoder alone, same events, same run, three row shapes. No servers needed. EVENTS
# overrides the number of events per shape (default 200000). For load-independent
# instruction counts see docs/worker.md (valgrind --tool=callgrind --toggle-collect=run).
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
bin=$BUILD_DIR/benchmarks/decode/bench_decode
if [ ! -x "$bin" ]; then
    echo "bench-decode: $bin not found; run make first" >&2
    exit 1
fi
"$bin" "${EVENTS:-200000}"
