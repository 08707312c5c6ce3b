#!/usr/bin/env bash
# Runs the container image's build steps (docker/build-steps.sh, as the Dockerfile does)
# on this machine: build, install into a temporary prefix, and check that the shared
# libraries every installed binary needs come exactly from the runtime packages listed
# in tools/packages.txt. Also runs the entrypoint's program selection.
set -euo pipefail
cd "$(dirname "$0")/../../.."
build=${CDC_BUILD_DIR:-$PWD/build}
# The image ships the release build. A sanitizer build dir (make asan: build-asan, make
# tsan: build-tsan) holds objects compiled with -fsanitize that a plain link cannot use,
# and its binaries would need libasan/libtsan at run time: build the release binaries in
# their own directory instead.
case "$build" in
*-asan | *-asan/ | *-tsan | *-tsan/) build=$PWD/build ;;
esac
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
cdc-entrypoint help | grep -q 'capture|coordinator|worker' || {
    echo "deploy_build: entrypoint help" >&2
    exit 1
}
cdc-entrypoint loadgen --help | grep -q -- '--rate' || {
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
echo "deploy_build: ok"
