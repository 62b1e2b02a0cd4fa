#!/usr/bin/env bash
# Builds gnosis in release mode, starts the private PostgreSQL cluster set up like TFB's
# (scripts/pg.sh, installing PostgreSQL with apt where it is missing), and serves every TFB
# test on :8080, connecting as TFB does (TCP, SCRAM-SHA-256). Extra arguments go to the
# server, e.g. `scripts/run.sh --threads 4 --pg-conns 2`.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "run.sh: cargo is needed (https://rustup.rs)" >&2; exit 1; }
cargo build --release --locked
bash scripts/pg.sh start
eval "$(bash scripts/pg.sh env)"
exec target/release/gnosis "$@"
