#!/usr/bin/env bash
# The coordinator's per-table Iceberg commit cost (make bench-commit; docs/benchmarks.md,
# "Commit cost"): TABLES tables (default 200) x EPOCHS epochs (default 30) of one data
# file and one equality-delete file each, through the committer. No servers.
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
bin=$BUILD_DIR/benchmarks/commit/bench_committer
if [ ! -x "$bin" ]; then
    echo "bench-commit: $bin not found; run make first" >&2
    exit 1
fi
"$bin" "${TABLES:-200}" "${EPOCHS:-30}"
