#!/usr/bin/env bash
# --version and --help of every program need no configuration: each binary of the build
# directory, run with an empty environment, exits 0, prints "<program> <version>" (one
# version for all) or its usage; through the image's entrypoint too (docker/entrypoint.sh,
# as installed by docker/build-steps.sh), where a worker without CDC_ID and without a pod
# ordinal in its host name once failed asking for CDC_ID. Needs CDC_BUILD_DIR (tests/run.sh).
set -uo pipefail
: "${CDC_BUILD_DIR:?run through tests/run.sh integration}"
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() {
    echo "cli_version_help: $*" >&2
    fail=1
}

versions=()
n=0
while IFS= read -r bin; do
    name=$(basename "$bin")
    n=$((n + 1))
    out=$(cd "$tmp" && env -i PATH=/usr/bin:/bin "$bin" --version 2>"$tmp/err")
    rc=$?
    if [ "$rc" -ne 0 ]; then
        bad "$name --version exited $rc: $(head -c 300 "$tmp/err")"
    elif ! [[ "$out" =~ ^"$name "[^[:space:]]+$ ]]; then
        bad "$name --version printed \"$out\", want \"$name <version>\""
    else
        versions+=("${out#"$name "}")
    fi
    out=$(cd "$tmp" && env -i PATH=/usr/bin:/bin "$bin" --help 2>"$tmp/err")
    rc=$?
    [ "$rc" -eq 0 ] || bad "$name --help exited $rc: $(head -c 300 "$tmp/err")"
    [ -n "$out" ] || bad "$name --help printed nothing on standard output"
done < <(find "$CDC_BUILD_DIR" -maxdepth 1 -type f -perm -u+x | sort)
[ "$n" -ge 6 ] || bad "only $n programs in $CDC_BUILD_DIR (make bins)"
if [ "${#versions[@]}" -gt 0 ] && [ "$(printf '%s\n' "${versions[@]}" | sort -u | wc -l)" -ne 1 ]; then
    bad "the programs report different versions: $(printf '%s ' "${versions[@]}")"
fi

# through the entrypoint, as in the image: no CDC_ID, a pod or host name without an ordinal
docker/build-steps.sh install "$tmp/prefix" "$CDC_BUILD_DIR" 2>/dev/null ||
    bad "build-steps.sh install failed"
while IFS= read -r prog; do
    cmd=${prog#cdc-}
    for flag in --version --help; do
        out=$(cd "$tmp" && env -i PATH="$tmp/prefix/bin:/usr/bin:/bin" POD_NAME=compose-host \
            cdc-entrypoint "$cmd" "$flag" 2>"$tmp/err")
        rc=$?
        [ "$rc" -eq 0 ] || bad "entrypoint $cmd $flag exited $rc: $(head -c 300 "$tmp/err")"
        [ -n "$out" ] || bad "entrypoint $cmd $flag printed nothing"
    done
done < <(docker/build-steps.sh binaries)
# --id on the command line is the worker's id: no ordinal needed either
mkdir -p "$tmp/fake"
printf '#!/bin/sh\necho "args=$*"\n' >"$tmp/fake/cdc-worker"
chmod +x "$tmp/fake/cdc-worker"
out=$(env -i PATH="$tmp/fake:$tmp/prefix/bin:/usr/bin:/bin" POD_NAME=compose-host \
    cdc-entrypoint worker --id=4 2>&1) || bad "entrypoint worker --id=4 failed: $out"
[ "$out" = "args=--id=4" ] || bad "entrypoint worker --id=4 ran \"$out\""
if env -i PATH="$tmp/fake:$tmp/prefix/bin:/usr/bin:/bin" POD_NAME=compose-host \
    cdc-entrypoint worker >/dev/null 2>&1; then
    bad "entrypoint started a worker with no id at all"
fi

[ "$fail" -eq 0 ] || exit 1
echo "cli_version_help: ok ($n programs, version ${versions[0]:-?})"
