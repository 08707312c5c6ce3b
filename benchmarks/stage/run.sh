#!/usr/bin/env bash
# Stage benchmark (make bench-stage): one partition's epoch in the drain benchmark's shape
# (ROWS inserts, default 17,500, about what a partition stages per 1 s epoch in the drain)
# staged and written into a local warehouse, with row groups encoded ahead while the
# epoch runs (the worker's setting) vs. everything encoded at the barrier, alternated
# RUNS times (default 3), medians over 9 epochs each. Figures: the barrier's write time
# (what the commit waits for) and the staging time (the data thread's share), both
# "ahead vs whole" (lower is better). Then a partitioned table (bucket[16](id) on the
# mirror and the changelog: 16 files of each kind, written at the barrier) against the
# same rows unpartitioned and encoded at the barrier: what partitioning costs. No
# servers needed.
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${CDC_BUILD_DIR:-$PWD/build}
ROWS=${ROWS:-17500}
RUNS=${RUNS:-3}
bin=$BUILD_DIR/benchmarks/stage/bench_stage
if [ ! -x "$bin" ]; then
    echo "bench-stage: $bin not found; run make first" >&2
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-stage.XXXXXX")
trap 'rm -rf "$work"' EXIT

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
ahead_w=() ahead_a=() whole_w=() whole_a=() part_w=() part_a=()
for _ in $(seq "$RUNS"); do
    rm -rf "${work:?}"/*
    a=$("$bin" "$ROWS" "$work" 9 | tail -1)
    rm -rf "${work:?}"/*
    w=$("$bin" "$ROWS" "$work" 9 0 | tail -1)
    rm -rf "${work:?}"/*
    pt=$("$bin" "$ROWS" "$work" 9 0 16 | tail -1)
    echo "ahead: $a"
    echo "whole: $w"
    echo "bucket16: $pt"
    ahead_w+=("$(field write_ms "$a")") ahead_a+=("$(field add_ms "$a")")
    whole_w+=("$(field write_ms "$w")") whole_a+=("$(field add_ms "$w")")
    part_w+=("$(field write_ms "$pt")") part_a+=("$(field add_ms "$pt")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
aw=$(median "${ahead_w[@]}") aa=$(median "${ahead_a[@]}")
ww=$(median "${whole_w[@]}") wa=$(median "${whole_a[@]}")
pw=$(median "${part_w[@]}") pa=$(median "${part_a[@]}")
awk -v o="$aw" -v b="$ww" 'BEGIN {
    printf "BENCH stage_barrier_write_ms_ahead_vs_whole %.1f ms baseline=%.1f ratio=%.3f\n", o, b, o / b }'
awk -v o="$aa" -v b="$wa" 'BEGIN {
    printf "BENCH stage_epoch_add_ms_ahead_vs_whole %.1f ms baseline=%.1f ratio=%.3f\n", o, b, o / b }'
awk -v o="$pw" -v b="$ww" 'BEGIN {
    printf "BENCH stage_barrier_write_ms_bucket16_vs_unpartitioned %.1f ms baseline=%.1f ratio=%.3f\n", o, b, o / b }'
awk -v o="$pa" -v b="$wa" 'BEGIN {
    printf "BENCH stage_epoch_add_ms_bucket16_vs_unpartitioned %.1f ms baseline=%.1f ratio=%.3f\n", o, b, o / b }'
