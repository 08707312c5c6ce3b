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
exit "$bad"
