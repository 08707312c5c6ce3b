#!/usr/bin/env bash
# The image's build steps, as one script that the Dockerfile runs and that CI runs on the
# development machine (tests/integration/pipeline/deploy_build.sh), so the container build is
# exercised without a container engine:
#   build-steps.sh packages <role>...     print the packages of roles in tools/packages.txt
#   build-steps.sh deps build|runtime     apt-get install the build (or runtime+image) packages
#   build-steps.sh build [build-dir]      make every binary (no tests) into build-dir, as
#                                         a release build (no test-only fault injection),
#                                         stamped with $CDC_VERSION when set (the image build's arg)
#   build-steps.sh install <prefix> [build-dir]
#                                         copy binaries, entrypoint and schema under prefix
#   build-steps.sh binaries               print the programs the image ships, one a line
#   build-steps.sh check-libs <prefix>    every shared library the installed binaries need
#                                         comes from a runtime package, and every runtime
#                                         package is needed by some binary
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKG_LIST=$ROOT/tools/packages.txt
# Programs the image ships, by entrypoint command (see docker/entrypoint.sh).
BINARIES=(cdc-capture cdc-coordinator cdc-worker cdcctl kafka-dev loadgen)

die() {
    echo "build-steps: $*" >&2
    exit 1
}

packages() {
    local roles=" $* "
    awk -v roles="$roles" '$0 !~ /^#/ && NF >= 2 && index(roles, " " $1 " ") { print $2 }' \
        "$PKG_LIST" | sort -u
}

deps() {
    local pk
    case "${1:-}" in
    build) mapfile -t pk < <(packages build) ;;
    runtime) mapfile -t pk < <(packages runtime image) ;;
    *) die "deps: expected build or runtime, got \"${1:-}\"" ;;
    esac
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${pk[@]}"
    rm -rf /var/lib/apt/lists/*
}

build() {
    local dir=${1:-build} version=()
    [ -n "${CDC_VERSION:-}" ] && version=(VERSION="$CDC_VERSION")
    make -C "$ROOT" -j"$(nproc)" BUILD="$dir" FAULT_INJECTION=0 "${version[@]}" bins
}

install_tree() {
    local prefix=${1:?install: prefix required} dir=${2:-build} n found=0
    case "$dir" in /*) ;; *) dir=$ROOT/$dir ;; esac
    mkdir -p "$prefix/bin" "$prefix/share/cdc"
    for n in "${BINARIES[@]}"; do
        if [ -x "$dir/$n" ]; then
            install -m 0755 "$dir/$n" "$prefix/bin/$n"
            found=$((found + 1))
        else
            echo "build-steps: note: $dir/$n not built (not on this branch yet)" >&2
        fi
    done
    [ "$found" -gt 0 ] || die "install: no binary found in $dir; run build first"
    install -m 0755 "$ROOT/docker/entrypoint.sh" "$prefix/bin/cdc-entrypoint"
    install -m 0644 "$ROOT/tools/loadgen/schema.sql" "$prefix/share/cdc/schema.sql"
}

# Maps a library path to the Debian package that owns it (multiarch suffix dropped).
owner() {
    local path=$1 real
    real=$(readlink -f "$path")
    { dpkg -S "$path" 2>/dev/null || dpkg -S "$real" 2>/dev/null || true; } |
        head -n1 | cut -d: -f1
}

check_libs() {
    local prefix=${1:?check-libs: prefix required} bin lib path pkg bad=0
    declare -A need=() allowed=()
    for pkg in $(packages runtime) libc6; do allowed[$pkg]=1; done
    for bin in "$prefix"/bin/*; do
        grep -q ELF <<<"$(file -b "$bin")" || continue
        while read -r lib; do
            path=$(ldd "$bin" | awk -v l="$lib" '$1 == l { print $3 }')
            if [ -z "$path" ] || [ "$path" = "not" ]; then
                echo "check-libs: $(basename "$bin"): $lib not found" >&2
                bad=1
                continue
            fi
            pkg=$(owner "$path")
            if [ -z "$pkg" ]; then
                echo "check-libs: $(basename "$bin"): $lib ($path) belongs to no package" >&2
                bad=1
            elif [ -z "${allowed[$pkg]:-}" ]; then
                echo "check-libs: $(basename "$bin") needs $lib from \"$pkg\", which is not a runtime package in tools/packages.txt" >&2
                bad=1
            fi
            [ -n "$pkg" ] && need[$pkg]=1
        done < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    done
    # An unused runtime package is only an error once every program is there to need it.
    local complete=1
    for bin in "${BINARIES[@]}"; do [ -x "$prefix/bin/$bin" ] || complete=0; done
    for pkg in $(packages runtime); do
        if [ -z "${need[$pkg]:-}" ]; then
            if [ "$complete" -eq 1 ]; then
                echo "check-libs: runtime package \"$pkg\" is needed by no binary; drop it from tools/packages.txt" >&2
                bad=1
            else
                echo "check-libs: note: runtime package \"$pkg\" is needed by none of the binaries built so far" >&2
            fi
        fi
    done
    [ "$bad" -eq 0 ] || return 1
    echo "check-libs: ok ($(printf '%s\n' "${!need[@]}" | sort | tr '\n' ' '))"
}

cmd=${1:-}
shift || true
case "$cmd" in
packages) packages "$@" ;;
deps) deps "$@" ;;
build) build "$@" ;;
install) install_tree "$@" ;;
binaries) printf '%s\n' "${BINARIES[@]}" ;;
check-libs) check_libs "$@" ;;
*) die "usage: build-steps.sh packages|deps|build|install|binaries|check-libs ..." ;;
esac
