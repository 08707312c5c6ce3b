#!/usr/bin/env bash
# docs/configuration.md must be what the option tables generate (run `make docs`); bad
# options that the tables alone cannot reject are refused with status 2.
set -euo pipefail
cd "$(dirname "$0")/../../.." || exit 1
build=${CDC_BUILD_DIR:-build}
if ! diff -u docs/configuration.md <(tools/gen-config-docs.sh "$build"); then
    echo "docs/configuration.md is out of date: run 'make docs' and commit it" >&2
    exit 1
fi

# A capture that would create topics with another partition count than the job's slots
# is refused before it connects anywhere, naming the option (exit status 2).
set +e
out=$("$build/cdc-capture" --pg-dsn "host=127.0.0.1 port=1" --kafka 127.0.0.1:1 --tables public.t \
    --partitions 16 2>&1)
rc=$?
set -e
if [ "$rc" != 2 ] || ! grep -q -- "--partitions (CDC_PARTITIONS) 16" <<<"$out"; then
    echo "cdc-capture --partitions 16: expected exit status 2 naming the option, got $rc: $out" >&2
    exit 1
fi

# A secret's file that cannot be read stops the program before it connects anywhere, with
# status 2 and a message naming the option (docs/security.md, "Secrets in files").
check_bad_file() {
    local want=$1 out rc
    shift
    set +e
    out=$("$@" 2>&1)
    rc=$?
    set -e
    if [ "$rc" != 2 ] || ! grep -qF -- "$want" <<<"$out"; then
        echo "$*: expected exit status 2 and \"$want\", got $rc: $out" >&2
        exit 1
    fi
}
check_bad_file 'could not read file "/nonexistent/dsn" of option --pg-dsn-file (CDC_PG_DSN_FILE' \
    "$build/cdc-capture" --pg-dsn-file=/nonexistent/dsn --kafka 127.0.0.1:1
check_bad_file 'of option --worker-secret-file (CDC_WORKER_SECRET_FILE, from environment)' \
    env CDC_WORKER_SECRET_FILE=/nonexistent/secret "$build/cdc-coordinator" --warehouse=/tmp/x
empty=$(mktemp)
trap 'rm -f "$empty"' EXIT
check_bad_file "of option --http-token-file (CDC_HTTP_TOKEN_FILE, from command line) is empty" \
    "$build/cdc-worker" --id=w --kafka=127.0.0.1:1 --warehouse=/tmp/x --http-token-file="$empty"
