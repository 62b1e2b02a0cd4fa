#!/usr/bin/env bash
# Writes the folder a TechEmpower pull request adds, and nothing else:
#
#   scripts/export-tfb.sh DIR    ->  DIR/frameworks/Rust/gnosis/
#       benchmark_config.json config.toml README.md (from tfb/README.md)
#       Cargo.toml Cargo.lock src/ templates/ [build.rs] gnosis.dockerfile gnosis-uring.dockerfile
#
# DIR is usually a TFB checkout. An existing DIR/frameworks/Rust/gnosis is replaced.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: scripts/export-tfb.sh DIR" >&2
    exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$1/frameworks/Rust/gnosis"

rm -rf "$OUT"
mkdir -p "$OUT"
cp "$ROOT/benchmark_config.json" "$ROOT/config.toml" "$ROOT/Cargo.lock" \
    "$ROOT/gnosis.dockerfile" "$ROOT/gnosis-uring.dockerfile" "$OUT/"
cp "$ROOT/tfb/README.md" "$OUT/README.md"
if [ -f "$ROOT/build.rs" ]; then
    cp "$ROOT/build.rs" "$OUT/"
fi

# Explicit [[test]], [[bench]] and [[example]] targets name files the folder does not ship.
awk '
    /^\[\[(test|bench|example)\]\]/ { skip = 1; next }
    /^\[/ { skip = 0 }
    !skip { print }
' "$ROOT/Cargo.toml" >"$OUT/Cargo.toml"

# src/ and templates/ (the fortunes page, compiled in by sailfish): the files git knows
# (tracked, or new and not ignored), so editor litter stays out.
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard -- src templates |
        while IFS= read -r -d '' file; do
            if [ -f "$ROOT/$file" ]; then
                mkdir -p "$OUT/$(dirname "$file")"
                cp "$ROOT/$file" "$OUT/$file"
            fi
        done
else
    cp -R "$ROOT/src" "$ROOT/templates" "$OUT/"
fi

echo "$OUT"
