#!/usr/bin/env bash
# Writes the folders an HttpArena pull request adds, and nothing else:
#
#   scripts/export-httparena.sh DIR  ->  DIR/frameworks/gnosis/  DIR/frameworks/gnosis-uring/
#       each: Dockerfile (httparena/Dockerfile building NAME), meta.json (httparena/NAME/),
#             Cargo.toml Cargo.lock src/ templates/ [build.rs]
#
# DIR is usually an HttpArena checkout; `docker build DIR/frameworks/NAME` needs nothing else.
# Existing folders of those names are replaced. The sources are the ones the TFB export ships
# (scripts/export-tfb.sh decides what they are: no tests, no editor litter).
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: scripts/export-httparena.sh DIR" >&2
    exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOURCES="$(mktemp -d)"
trap 'rm -rf "$SOURCES"' EXIT
TFB_ENTRY="$("$ROOT/scripts/export-tfb.sh" "$SOURCES")"

for name in gnosis gnosis-uring; do
    out="$1/frameworks/$name"
    rm -rf "$out"
    mkdir -p "$out"
    # HttpArena builds with no --build-arg: each folder's Dockerfile names its own binary.
    sed "s/^ARG BIN=.*/ARG BIN=$name/" "$ROOT/httparena/Dockerfile" >"$out/Dockerfile"
    cp "$ROOT/httparena/$name/meta.json" "$out/"
    for source in Cargo.toml Cargo.lock src templates build.rs; do
        if [ -e "$TFB_ENTRY/$source" ]; then
            cp -R "$TFB_ENTRY/$source" "$out/"
        fi
    done
    echo "$out"
done
