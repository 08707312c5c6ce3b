#!/usr/bin/env bash
# docs/configuration.md must be what the option tables generate (run `make docs`).
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
build=${CDC_BUILD_DIR:-build}
if ! diff -u docs/configuration.md <(tools/gen-config-docs.sh "$build"); then
    echo "docs/configuration.md is out of date: run 'make docs' and commit it" >&2
    exit 1
fi
