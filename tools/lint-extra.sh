#!/usr/bin/env bash
# Lints beyond C: shell scripts with shellcheck when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v shellcheck >/dev/null 2>&1; then
    mapfile -t scripts < <(git ls-files '*.sh' .ci/run 2>/dev/null)
    if [ "${#scripts[@]}" -gt 0 ]; then
        shellcheck -S warning "${scripts[@]}"
    fi
fi
