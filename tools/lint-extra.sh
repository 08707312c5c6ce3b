#!/usr/bin/env bash
# Lints beyond clang-format and cppcheck: shell scripts with shellcheck when it is
# installed, documents cited in the code, and the include boundaries of the external
# libraries. Run by `make lint` and first in `make test` (so CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v shellcheck >/dev/null 2>&1; then
    mapfile -t scripts < <(git ls-files '*.sh' .ci/run 2>/dev/null)
    if [ "${#scripts[@]}" -gt 0 ]; then
        shellcheck -S warning "${scripts[@]}"
    fi
fi

# Documents cited in the code and docs exist in the repository, and a citation of
# docs/design.md by section ('docs/design.md, "<section>"') names one of its headings.
mapfile -t sources < <(git ls-files '*.c' '*.h' '*.sh' '*.mjs' '*.md' 'Makefile' 2>/dev/null)
bad=0
if grep -n 'DESIGN\.md\|shared/brief' "${sources[@]}" | grep -v '^tools/lint-extra.sh:'; then
    echo "lint: the lines above cite a document outside the repository" >&2
    bad=1
fi
while IFS= read -r doc; do
    [ -f "$doc" ] || {
        echo "lint: $doc is cited but does not exist" >&2
        bad=1
    }
done < <(grep -oh 'docs/[a-z0-9-]*\.md' "${sources[@]}" | sort -u)
while IFS= read -r section; do
    grep -qx "##* $section" docs/design.md || {
        echo "lint: docs/design.md has no section \"$section\"" >&2
        bad=1
    }
done < <(perl -0777 -ne 'while (/docs\/design\.md,((?:\s|[*#])*)"([^"]+)"/g) {
        my $s = $2; $s =~ s/\s*\n\s*(?:[*#]\s*)?/ /g; print "$s\n" unless $s eq "<section>" }' \
    "${sources[@]}" | sort -u)

# Include boundaries (docs/development.md, "Adapters"): each external library is included
# by its adapter only. Tests and benchmarks are exempt. A rule names the header, an ERE
# for the include's target, the adapter a message names, and the paths allowed to
# include it (shell patterns). Lines marked "until ..." are temporary exceptions for
# work in progress elsewhere: delete them when it lands.
mapfile -t c_sources < <(git ls-files --cached --others --exclude-standard '*.c' '*.h' \
    2>/dev/null | grep -v '^tests/\|^benchmarks/')
boundary() {
    local header=$1 re=$2 adapter=$3 f allowed
    shift 3
    while IFS= read -r f; do
        for allowed in "$@"; do
            # shellcheck disable=SC2254 # the allowed paths are patterns
            case $f in $allowed) continue 2 ;; esac
        done
        echo "lint: $f includes $header: only $adapter may include it" >&2
        bad=1
    done < <(grep -lE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($re)[>\"]" \
        "${c_sources[@]}" 2>/dev/null)
}
boundary '<librdkafka/...>' 'librdkafka/[^>"]*' 'common/kafka.c (and tools/kafka-dev/)' \
    common/kafka.c 'tools/kafka-dev/*'
boundary '<libpq-fe.h>' 'libpq-fe\.h' 'capture/pg.c (and tools/loadgen/, tools/pq-fixtures/)' \
    capture/pg.c 'tools/loadgen/*' 'tools/pq-fixtures/*'
boundary '<curl/curl.h>' 'curl/[^>"]*' common/httpc.c common/httpc.c
boundary '<openssl/...>' 'openssl/[^>"]*' common/crypto.c common/crypto.c
boundary '<rocksdb/c.h>' 'rocksdb/[^>"]*' common/state.c common/state.c
boundary '<nng/...>' 'nng/[^>"]*' 'common/msg.c, common/http.c or common/tls.c' common/msg.c common/http.c \
    common/tls.c
boundary '<protobuf-c/...>' 'protobuf-c/[^>"]*' common/msg.c/.h 'common/msg.[ch]'
boundary 'proto/cdc.pb-c.h' '([^>"]*/)?cdc\.pb-c\.h' common/msg.c/.h 'common/msg.[ch]'
boundary '<openssl/...>' 'openssl/[^>"]*' common/crypto.c common/crypto.c
boundary '<jansson.h>' 'jansson\.h' 'a .c file (no header exposes json_t)' '*.c'
exit "$bad"
