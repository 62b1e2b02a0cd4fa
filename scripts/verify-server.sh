#!/usr/bin/env bash
# scripts/test.sh's verify steps: starts BINARY on a free port, checks it with
# `scripts/tool verify tfb`, or `verify httparena` given --httparena (serving data/dataset.json),
# further arguments going to the checker, and stops it.
#
#   scripts/verify-server.sh target/release/gnosis-uring --entry uring
#   scripts/verify-server.sh --httparena target/release/gnosis
#   eval "$(bash scripts/pg.sh arena-env)"; DATABASE_MAX_CONN=256 \
#       scripts/verify-server.sh --httparena target/release/gnosis --profiles async-db,fortunes
#
# The server inherits the environment (DATABASE_URL, DATABASE_MAX_CONN, PG*). With --httparena
# and DATABASE_URL set, the validator reads that database too (--database-url), so that the
# async-db and fortunes answers are compared with its rows.
#
# The checker is given the server's pid and checks that this process alone listens on the
# port, so a server already running elsewhere (scripts/run.sh on 8080, say) is never the one
# checked. Exits with the checker's status.
set -euo pipefail
cd "$(dirname "$0")/.."

venue=tfb
database=()
if [ "${1:-}" = --httparena ]; then
    venue=httparena
    export DATASET_PATH="$PWD/data/dataset.json"
    if [ -n "${DATABASE_URL:-}" ]; then
        database=(--database-url "$DATABASE_URL")
    fi
    shift
fi
if [ $# -lt 1 ]; then
    echo "usage: scripts/verify-server.sh [--httparena] BINARY [checker arguments]" >&2
    exit 2
fi
binary=$1
shift
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$binary" --port "$port" &
pid=$!
status=0
python3 scripts/tool verify "$venue" --wait 30 --port "$port" --server-pid "$pid" "${database[@]}" "$@" || status=$?
# The server may have exited already (it could not start): nothing to stop then.
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
exit "$status"
