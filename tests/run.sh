#!/usr/bin/env bash
# Runs one test suite: `tests/run.sh unit|integration|fuzz-replay|fuzz [build-dir]`.
#   unit:        every build/tests/unit/<module>/test_* binary (cmocka), no servers.
#   fuzz-replay: every fuzz corpus (tests/fuzz/corpus/<target>/) through its replay driver
#                <build-dir>/tests/fuzz/<target> (docs/development.md, "Fuzzing").
#   fuzz:        every libFuzzer target <build-dir>/tests/fuzz/<target> (make fuzz-build) for
#                FUZZ_SECONDS (default 60) from its corpus; new inputs go to
#                <build-dir>/corpus/<target>/, crashes to <build-dir>/crashes/<target>/.
#   integration: starts the harness (PostgreSQL, etcd, development Kafka broker) once,
#                runs build/tests/integration/<module>/test_*, tests/integration/<module>/*.sh and the
#                Node tests in tests/js, and always tears the harness down.
# TESTS="test_a schema_evolution.sh" (integration only) runs just those tests, binaries
# or scripts, by name; not the Node tests (`make tsan` uses it).
# Exits non-zero when any test fails; prints a summary of failures.
set -uo pipefail
# shellcheck source=tools/launched.sh
. "$(dirname "$0")/../tools/launched.sh"
cd "$(dirname "$0")/.." || exit 1
suite=${1:?usage: tests/run.sh unit|integration [build-dir]}
BUILD=${2:-build}
export CDC_BUILD_DIR=$PWD/$BUILD
failed=()
passed=0

run_one() {
    local name=$1
    shift
    local start=$SECONDS
    # A test may have restarted a server (harness.sh etcd-start): take its new pid.
    if [ -n "${CDC_TEST_TMP:-}" ] && [ -f "$CDC_TEST_TMP/env" ]; then
        # shellcheck disable=SC1091
        . "$CDC_TEST_TMP/env"
    fi
    if "$@" </dev/null; then
        passed=$((passed + 1))
        echo "PASS $name ($((SECONDS - start))s)"
    else
        failed+=("$name")
        echo "FAIL $name ($((SECONDS - start))s)"
    fi
}

# An integration binary left in BUILD whose source tests/<path>.c is gone (a test file
# renamed or split, e.g. test_capture into test_capture_*): not run.
stale() {
    [ ! -f "tests/${1#"$BUILD"/tests/}.c" ]
}

# The fuzz targets: one per tests/fuzz/<target>.c (driver.c is the replay driver); each
# must have its corpus and its binary in BUILD, or the suite fails.
fuzz_targets() {
    local src
    for src in tests/fuzz/*.c; do
        [ "$src" = tests/fuzz/driver.c ] || basename "$src" .c
    done
}

# One fuzz target under libFuzzer for FUZZ_SECONDS; its log is BUILD/fuzz-logs/<target>.log.
fuzz_one() {
    local t=$1 bin=$BUILD/tests/fuzz/$1 log=$BUILD/fuzz-logs/$1.log
    mkdir -p "$BUILD/corpus/$t" "$BUILD/crashes/$t" "$BUILD/fuzz-logs"
    if ! "$bin" -max_total_time="${FUZZ_SECONDS:-60}" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$t/" \
        "$BUILD/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
        grep -m1 -A30 -E 'ERROR: |runtime error: |^==[0-9]+==' "$log" || tail -n 30 "$log"
        return 1
    fi
    grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec' "$log" | tr '\n' ' '
    echo
}

case "$suite" in
fuzz-replay | fuzz)
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
    mapfile -t targets < <(fuzz_targets)
    for t in "${targets[@]}"; do
        if [ ! -d "tests/fuzz/corpus/$t" ]; then
            failed+=("$t (no corpus tests/fuzz/corpus/$t)")
        elif [ ! -x "$BUILD/tests/fuzz/$t" ]; then
            failed+=("$t (no binary $BUILD/tests/fuzz/$t: make fuzz-build or make $BUILD/tests/fuzz/$t)")
        elif [ "$suite" = fuzz-replay ]; then
            run_one "replay $t" "$BUILD/tests/fuzz/$t" "tests/fuzz/corpus/$t"
        elif [[ " ${FUZZ_SKIP:-} " == *" $t "* ]]; then
            echo "SKIP fuzz $t (FUZZ_SKIP: a known open finding, docs/development.md \"Fuzzing\")"
        else
            run_one "fuzz $t" fuzz_one "$t"
        fi
    done
    ;;
unit)
    mapfile -t tests < <(find "$BUILD/tests/unit" -type f -name 'test_*' -perm -u+x | sort)
    for t in "${tests[@]}"; do
        run_one "$(basename "$t")" "$t"
    done
    ;;
integration)
    # shellcheck source=tests/harness/harness.sh
    . tests/harness/harness.sh
    harness_up || { echo "FAIL harness did not start"; exit 1; }
    # Interrupted: stop the servers and stop running tests (EXIT runs harness_down).
    trap 'harness_down' EXIT
    trap 'echo "interrupted"; exit 130' INT
    trap 'echo "terminated"; exit 143' TERM
    if [ -n "${TESTS:-}" ]; then
        for name in $TESTS; do
            t=$(find "$BUILD/tests/integration" tests/integration -type f -name "$name" | head -n1)
            case "$t" in
            "") failed+=("$name (no such test)") ;;
            *.sh) run_one "$name" bash "$t" ;;
            "$BUILD"/*)
                if stale "$t"; then
                    failed+=("$name (no such test: $t is stale, its source is gone)")
                else
                    run_one "$name" "$t"
                fi
                ;;
            *) run_one "$name" "$t" ;;
            esac
        done
    else
        # (lists read before any test runs: a test reading stdin must not eat the list)
        mapfile -t tests < <(find "$BUILD/tests/integration" -type f -name 'test_*' -perm -u+x | sort)
        mapfile -t scripts < <(find tests/integration -type f -name '*.sh' | sort)
        for t in "${tests[@]}"; do
            if stale "$t"; then
                echo "SKIP $(basename "$t") (stale: no tests/${t#"$BUILD"/tests/}.c)"
            else
                run_one "$(basename "$t")" "$t"
            fi
        done
        for t in "${scripts[@]}"; do
            run_one "$(basename "$t")" bash "$t"
        done
        if compgen -G "tests/js/*.test.mjs" >/dev/null; then
            for t in tests/js/*.test.mjs; do
                run_one "$(basename "$t")" node --test "$t"
            done
        fi
    fi
    # Processes the tests spawn (coordinators, workers, ...) log into the harness dir;
    # under `make asan` / `make tsan` a sanitizer report there is a failure even when the
    # test passed.
    san_re='ERROR: (Address|Leak)Sanitizer|runtime error: |WARNING: ThreadSanitizer'
    if [ -n "${CDC_TEST_TMP:-}" ] && [ -d "$CDC_TEST_TMP" ]; then
        reports=$(grep -rlE "$san_re" \
            --include='*.log' "$CDC_TEST_TMP" 2>/dev/null)
        if [ -n "$reports" ]; then
            failed+=("sanitizer reports in spawned processes' logs")
            while read -r f; do
                echo "sanitizer report in $f:"
                grep -m1 -A24 -E "$san_re" "$f"
            done <<<"$reports"
        fi
    fi
    ;;
*)
    echo "unknown suite $suite" >&2
    exit 2
    ;;
esac

echo "== $suite: $passed passed, ${#failed[@]} failed"
if [ "${#failed[@]}" -gt 0 ]; then
    printf '   failed: %s\n' "${failed[@]}"
    exit 1
fi
