#!/usr/bin/env bash
# Parquet write benchmark: the same 1,000,000 rows (8 mixed columns) written by
# our writer (common/iceberg/parquet.c, zstd) and by DuckDB's
# COPY ... TO (FORMAT parquet, COMPRESSION zstd), in the same run, best of RUNS.
# Data: bench_parquet gen writes a deterministic CSV once; both writers load it
# into memory untimed and only the writing is timed. Prints BENCH lines
# (docs/design.md, "Contracts"); benchmarks/run.sh merges them into results/latest.json.
# Runnable directly: benchmarks/parquet/run.sh (after make).
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
ROWS=${ROWS:-1000000}
RUNS=${RUNS:-3}
bin=$BUILD_DIR/benchmarks/parquet/bench_parquet
if [ ! -x "$bin" ]; then
    echo "bench-parquet: $bin not found; run make first" >&2
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-parquet.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$bin" gen "$ROWS" "$work/data.csv"
ours=$("$bin" write "$work/data.csv" "$work" "$RUNS")
theirs=$(node benchmarks/parquet/duckdb_copy.mjs "$work/data.csv" "$work" "$RUNS")
echo "ours:   $ours"
echo "duckdb: $theirs"

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
rows=$(field rows "$ours")
our_s=$(field best_seconds "$ours")
our_b=$(field bytes "$ours")
duck_s=$(field best_seconds "$theirs")
duck_b=$(field bytes "$theirs")
awk -v r="$rows" -v os="$our_s" -v ds="$duck_s" -v ob="$our_b" -v db="$duck_b" 'BEGIN {
    ours = r / os; duck = r / ds
    printf "BENCH parquet_write_rows_per_s %.0f rows/s baseline=%.0f ratio=%.3f\n", ours, duck, ours / duck
    printf "BENCH parquet_file_size_bytes_lower_is_better %d bytes baseline=%d ratio=%.3f\n", ob, db, ob / db
}'
