#!/usr/bin/env bash
# Lints beyond clang-format and cppcheck: shell scripts with shellcheck when it is
# installed, documents cited in the code, and the include boundaries of the external
# libraries. Run by `make lint` and first in `make test` (so CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t scripts < <(git ls-files '*.sh' .ci/run 2>/dev/null)
if command -v shellcheck >/dev/null 2>&1; then
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
boundary '<librdkafka/...>' 'librdkafka/[^>"]*' \
    'common/kafka.c, common/kafka_admin.c and their common/kafka_rd.h (and tools/kafka-dev/)' \
    common/kafka.c common/kafka_admin.c common/kafka_rd.h 'tools/kafka-dev/*'
boundary '<libpq-fe.h>' 'libpq-fe\.h' 'capture/pg.c (and tools/loadgen/)' \
    capture/pg.c 'tools/loadgen/*'
boundary '<curl/curl.h>' 'curl/[^>"]*' common/httpc.c common/httpc.c
boundary '<openssl/...>' 'openssl/[^>"]*' common/crypto.c common/crypto.c
boundary '<rocksdb/c.h>' 'rocksdb/[^>"]*' common/state.c common/state.c
boundary '<nng/...>' 'nng/[^>"]*' 'common/msg.c, common/http.c or common/tls.c' common/msg.c common/http.c \
    common/tls.c
boundary '<protobuf-c/...>' 'protobuf-c/[^>"]*' common/msg.c/.h 'common/msg.[ch]'
boundary 'proto/cdc.pb-c.h' '([^>"]*/)?cdc\.pb-c\.h' common/msg.c/.h 'common/msg.[ch]'
boundary '<jansson.h>' 'jansson\.h' 'a .c file (no header exposes json_t)' '*.c'

# The headers that promise to be "the one place" (docs/development.md, "Adapters"):
# memory grows through common/buf.h, and the time is read through common/clock.h. A rule
# names the promise, an ERE of the calls it forbids, and the paths allowed to make them.
promise() {
    local what=$1 re=$2 f line allowed
    shift 2
    while IFS=: read -r f line _; do
        for allowed in "$@"; do
            # shellcheck disable=SC2254 # the allowed paths are patterns
            case $f in $allowed) continue 2 ;; esac
        done
        echo "lint: $f:$line: $what" >&2
        bad=1
    done < <(grep -nE "$re" "${c_sources[@]}" 2>/dev/null | grep -vE '^[^:]+:[0-9]+:\s*(/?\*|//)')
}
# (decode_fast.c shrinks a decoded buffer in place; manifest_read.c is avro-c's allocator)
promise 'grows memory with realloc(): use common/buf.h (cdc_array_reserve, cdc_array_resize)' \
    '(^|[^_a-z])realloc\(' common/buf.c worker/decode_fast.c common/iceberg/manifest_read.c
promise 'reads the clock itself: use common/clock.h' \
    '(^|[^_a-z])((clock_gettime|gettimeofday|timespec_get)\(|time\((NULL|0)\))' common/clock.h \
    tools/launch/main.c

# Parts of a process's struct owned by one file (docs/design.md, "Owners of state"): a
# rule names the folder, the member (reached as `->member.` or `.member.`) and the files
# that may reach into it; the folder's other files call the owner's functions.
while read -r folder member owners; do
    [ -n "$folder" ] || continue
    while IFS= read -r hit; do
        file=${hit%%:*}
        case " $owners " in *" $file "*) continue ;; esac
        echo "$hit" >&2
        echo "lint: $file reaches into $member, which $owners owns (docs/design.md, \"Owners of state\")" >&2
        bad=1
    done < <(git ls-files "$folder/*.c" | xargs grep -nE "(->|\.)$member\.[a-z_]" /dev/null || true)
done <<'EOF_OWNED'
capture incremental capture/incremental.c
capture leafmap capture/partitions.c
capture report capture/status.c
worker fin worker/barrier.c
worker hb worker/session.c
worker schemapos worker/schemas.c
worker chunking worker/chunks.c
worker records worker/consume.c
worker values worker/values.c
capture request capture/request.c
capture tx capture/txn.c
coordinator round coordinator/pipeline.c
EOF_OWNED

# No `producer | grep -q`: grep -q exits at its first match, the producer then dies of
# SIGPIPE, and under pipefail the pipeline fails although the text was there (CI failed on
# `cdc-entrypoint help | grep -q`). Match on a here-string of the output instead. The
# `bash -c` strings are exempt: pipefail is not set in them.
if grep -nE '\|[[:space:]]*grep -[a-zA-Z]*q' "${scripts[@]}" | grep -vE 'bash -c|^[^:]*:[0-9]+:[[:space:]]*#'; then
    echo "lint: the lines above pipe into grep -q: write grep -q PATTERN <<<\"\$(producer)\"" >&2
    bad=1
fi

# Call circles between the files of a folder (docs/development.md, "Call circles"): none
# of more than three files, none new, none grown past the files tools/circles.txt records.
if ! command -v ctags >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "lint: the call-circle check needs universal-ctags and node (tools/setup.sh installs them)" >&2
    bad=1
elif ! node tools/circles.mjs --check tools/circles.txt --max 3 >/dev/null; then
    bad=1
fi
exit "$bad"
