#!/usr/bin/env bash
# scripts/test.sh's verify steps: starts BINARY on a free port, checks it with
# `scripts/tool verify tfb`, or `verify httparena` given --httparena (serving data/dataset.json,
# HTTP/1.1 over TLS, h2 over TLS and h2c on free ports, with a certificate made for the run as
# HttpArena mounts one, and HttpArena's 20 static file names, of made-up bytes, from STATIC_DIR,
# with gzip sidecars),
# further arguments going to the checker, and stops it.
#
#   scripts/verify-server.sh target/release/gnosis-uring --entry uring
#   scripts/verify-server.sh --httparena target/release/gnosis
#   scripts/verify-server.sh --gateway target/release/gnosis    # HttpArena's gateway stacks
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

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

venue=tfb
venue_args=()
# --gateway: the same files as --httparena, then `verify gateway`, which starts the stacks
# itself (each service as its compose file says, on free ports).
gateway=false
if [ "${1:-}" = --gateway ]; then
    gateway=true
    set -- --httparena "${@:2}"
fi
# Every listener on a free port, so that a server already running (scripts/run.sh) or a test
# beside this one never holds one of them.
tls_port="$(free_port)" h2_port="$(free_port)" h2c_port="$(free_port)"
# HTTP/3 on UDP at the h2 port's number, as HttpArena's 8443 serves both (TFB's run binds no
# certificate, so no QUIC socket).
server_args=(--tls-port "$tls_port" --h2-tls-port "$h2_port" --h2c-port "$h2c_port" --h3-port "$h2_port")
if [ "${1:-}" = --httparena ]; then
    venue=httparena
    export DATASET_PATH="$PWD/data/dataset.json"
    if [ -n "${DATABASE_URL:-}" ]; then
        venue_args+=(--database-url "$DATABASE_URL")
    fi
    certs="$(mktemp -d)"
    trap 'rm -rf "$certs"' EXIT
    python3 scripts/tool certificate "$certs" >/dev/null
    # The validator compares the answers with the files in $STATIC_DIR too.
    export STATIC_DIR="$certs/static"
    mkdir "$STATIC_DIR"
    python3 - "$STATIC_DIR" <<'FILES'
import gzip, os, sys
sys.path.insert(0, "scripts")
from gnosis_tools.verify.httparena_static import FILES
for index, name in enumerate(FILES):
    data = os.urandom(1000 + 15331 * index)
    with open(os.path.join(sys.argv[1], name), "wb") as out:
        out.write(data)
    # A gzip sidecar beside each file of a type that compresses, as HttpArena's directory
    # has (with .br ones too), so that the compression check has answers to check.
    if not name.endswith((".woff2", ".webp")):
        with open(os.path.join(sys.argv[1], name + ".gz"), "wb") as out:
            out.write(gzip.compress(data))
FILES
    export TLS_CERT="$certs/server.crt" TLS_KEY="$certs/server.key"
    venue_args+=(--tls-port "$tls_port" --certificate "$TLS_CERT")
    venue_args+=(--h2-port "$h2_port" --h2c-port "$h2c_port")
    shift
fi
if [ $# -lt 1 ]; then
    echo "usage: scripts/verify-server.sh [--httparena] BINARY [checker arguments]" >&2
    exit 2
fi
binary=$1
shift
if $gateway; then
    data="$certs/data"
    mkdir "$data"
    ln -s "$STATIC_DIR" "$data/static"
    ln -s "$DATASET_PATH" "$data/dataset.json"
    unset STATIC_DIR DATASET_PATH TLS_CERT TLS_KEY
    status=0
    python3 scripts/tool verify gateway "$binary" --certs-dir "$certs" --data-dir "$data" "$@" || status=$?
    exit "$status"
fi
port="$(free_port)"
"$binary" --port "$port" "${server_args[@]}" &
pid=$!
status=0
python3 scripts/tool verify "$venue" --wait 30 --port "$port" --server-pid "$pid" "${venue_args[@]}" "$@" || status=$?
# The server may have exited already (it could not start): nothing to stop then.
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
exit "$status"
