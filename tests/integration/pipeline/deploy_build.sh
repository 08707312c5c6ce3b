#!/usr/bin/env bash
# Runs the container image's build steps (docker/build-steps.sh, as the Dockerfile does)
# on this machine: build, install into a temporary prefix, and check that the shared
# libraries every installed binary needs come exactly from the runtime packages listed
# in tools/packages.txt. Also runs the entrypoint's program selection, and checks that
# the release build has no test-only fault injection.
set -euo pipefail
cd "$(dirname "$0")/../../.."
# The image ships the release build (FAULT_INJECTION=0), whose objects differ from the
# tests' build (FAULT_INJECTION=1, and make asan/tsan's -fsanitize objects): it has a
# directory of its own, kept between runs so that a second run only relinks.
build=$PWD/build-release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

docker/build-steps.sh build "$build" >"$tmp/build.log" 2>&1 || {
    tail -n 30 "$tmp/build.log" >&2
    echo "deploy_build: build-steps.sh build failed" >&2
    exit 1
}
docker/build-steps.sh install "$tmp/prefix" "$build"
[ -x "$tmp/prefix/bin/cdc-entrypoint" ] || {
    echo "deploy_build: entrypoint not installed" >&2
    exit 1
}
[ -s "$tmp/prefix/share/cdc/schema.sql" ] || {
    echo "deploy_build: schema not installed" >&2
    exit 1
}
docker/build-steps.sh check-libs "$tmp/prefix"

# the entrypoint picks programs by name and derives a worker id from the pod ordinal
export PATH="$tmp/prefix/bin:$PATH"
grep -q 'capture|coordinator|worker' <<<"$(cdc-entrypoint help)" || {
    echo "deploy_build: entrypoint help" >&2
    exit 1
}
grep -q -- '--rate' <<<"$(cdc-entrypoint loadgen --help)" || {
    echo "deploy_build: entrypoint does not run loadgen" >&2
    exit 1
}
mkdir -p "$tmp/fake"
# shellcheck disable=SC2016 # expanded by the fake program
printf '#!/bin/sh\necho "id=$CDC_ID"\n' >"$tmp/fake/cdc-worker"
chmod +x "$tmp/fake/cdc-worker"
got=$(PATH="$tmp/fake:$PATH" POD_NAME=cdc-worker-7 CDC_ID='' cdc-entrypoint worker)
[ "$got" = "id=7" ] || {
    echo "deploy_build: worker id from POD_NAME cdc-worker-7 gave \"$got\"" >&2
    exit 1
}
if PATH="$tmp/fake:$PATH" POD_NAME=cdc-worker CDC_ID='' cdc-entrypoint worker 2>/dev/null; then
    echo "deploy_build: entrypoint accepted a pod name without ordinal" >&2
    exit 1
fi

# The release build has no fault injection: the test-only settings are refused at start
# with status 2, naming them, and the code that acts on them is not in the binaries.
set +e
out=$(cdc-coordinator --fault=after-iceberg-commit --warehouse="$tmp/wh" 2>&1)
rc=$?
set -e
want='--fault (CDC_FAULT) is set to "after-iceberg-commit", but fault injection is for tests'
if [ "$rc" != 2 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "deploy_build: release cdc-coordinator --fault: expected status 2 and \"$want\"," \
        "got $rc: $out" >&2
    exit 1
fi
set +e
out=$(CDC_WORKER_FAULT=stall-fetch cdc-worker --id=w --kafka=127.0.0.1:1 --warehouse="$tmp/wh" 2>&1)
rc=$?
set -e
if [ "$rc" != 2 ] || ! grep -q 'CDC_WORKER_FAULT is set to "stall-fetch"' <<<"$out"; then
    echo "deploy_build: release cdc-worker with CDC_WORKER_FAULT: expected status 2 naming" \
        "it, got $rc: $out" >&2
    exit 1
fi
for pair in "cdc-coordinator:fault injection: exiting at" "cdc-worker:fault stall-fetch"; do
    if grep -qa "${pair#*:}" "$tmp/prefix/bin/${pair%%:*}"; then
        echo "deploy_build: the release ${pair%%:*} still holds its fault injection" \
            "(\"${pair#*:}\")" >&2
        exit 1
    fi
done
echo "deploy_build: ok"
