#!/usr/bin/env bash
# Runs one test suite: `tests/run.sh unit|integration [build-dir]`.
#   unit:        every build/tests/unit/<module>/test_* binary (cmocka), no servers.
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

case "$suite" in
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
            *) run_one "$name" "$t" ;;
            esac
        done
    else
        # (lists read before any test runs: a test reading stdin must not eat the list)
        mapfile -t tests < <(find "$BUILD/tests/integration" -type f -name 'test_*' -perm -u+x | sort)
        mapfile -t scripts < <(find tests/integration -type f -name '*.sh' | sort)
        for t in "${tests[@]}"; do
            run_one "$(basename "$t")" "$t"
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
