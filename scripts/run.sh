#!/usr/bin/env bash
# Builds gnosis in release mode, starts the private PostgreSQL cluster (scripts/pg.sh) and
# serves every TFB test on :8080. Extra arguments go to the server (e.g. --threads 4).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "run.sh: cargo is needed (https://rustup.rs)" >&2; exit 1; }
cargo build --release --locked
exec target/release/gnosis "$@"
