#!/usr/bin/env bash
# Installs what the build, the tests and `make run` need on Debian 12, and nothing when
# it is all there already (a few dpkg queries and a lock-file hash check).
#   Debian packages: compilers' libraries, PostgreSQL 15, etcd 3.4, kcat, ...
#   npm packages (tests/js, pinned by package-lock.json): @duckdb/node-api, icebird, ...
set -euo pipefail
cd "$(dirname "$0")/.."

# The package list is written once in tools/packages.txt (also read by the Docker build).
mapfile -t PKGS < <(awk '$1 == "build" || $1 == "dev" { print $2 }' tools/packages.txt | sort -u)

missing=()
for p in "${PKGS[@]}"; do
    if ! grep -q "install ok installed" <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)"; then
        # node/npm may come from elsewhere (nodesource, nvm): accept a working binary
        case "$p" in
            nodejs) command -v node >/dev/null 2>&1 && continue ;;
            npm) command -v npm >/dev/null 2>&1 && continue ;;
        esac
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
    # The Debian postgresql package starts a cluster on 5432; the harness runs its own.
    if command -v pg_lsclusters >/dev/null 2>&1; then
        $SUDO pg_ctlcluster 15 main stop >/dev/null 2>&1 || true
    fi
fi

# npm test tools, pinned by tests/js/package-lock.json; reinstalled when the lock changes.
if [ -f tests/js/package-lock.json ]; then
    stamp=tests/js/node_modules/.lock-hash
    want=$(sha256sum tests/js/package-lock.json | cut -d' ' -f1)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "setup: installing npm test tools (tests/js)"
        (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
        echo "$want" > "$stamp"
    fi
fi
