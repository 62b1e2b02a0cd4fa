#!/usr/bin/env bash
# Builds gnosis in release mode, starts the private PostgreSQL cluster set up like TFB's and
# HttpArena's (scripts/pg.sh, installing PostgreSQL with apt where it is missing), and serves
# on :8080: every TFB test, connecting as TFB does (TCP, SCRAM-SHA-256), and HttpArena's HTTP
# routes with the repository's json dataset. Extra arguments go to the server, e.g.
# `scripts/run.sh --threads 4 --pg-conns 2`; `scripts/run.sh --arena` connects to HttpArena's
# database instead (DATABASE_URL), for /async-db and its /fortunes.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "run.sh: cargo is needed (https://rustup.rs)" >&2; exit 1; }
cargo build --release --locked
bash scripts/pg.sh start
if [ "${1:-}" = --arena ]; then
    shift
    eval "$(bash scripts/pg.sh arena-env)"
else
    eval "$(bash scripts/pg.sh env)"
fi
export DATASET_PATH="${DATASET_PATH:-$PWD/data/dataset.json}"
exec target/release/gnosis "$@"
