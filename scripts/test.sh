#!/usr/bin/env bash
# Runs every test of gnosis on this machine, installing what they need first (PostgreSQL
# through scripts/pg.sh): formatting and lints, unit tests, and the integration suites against
# the real binaries and a real private PostgreSQL cluster set up like TFB's.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

# Every runner's output is kept too, so that the totals can be added up at the end.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

command -v cargo >/dev/null || { echo "test.sh: cargo is needed (https://rustup.rs)" >&2; exit 1; }

step "system packages: wrk, nginx (with brotli_static) and h2o for the benchmark's own tests, perf and strace for the system-call counter's, openssl for test certificates, curl and nghttp2-client (nghttp, h2load) as HTTP/2 clients, ngtcp2-client (gtlsclient) as an HTTP/3 one, redis-server for tests/redis.rs (which starts its own)"
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || missing+=(nginx-light)
# static-h2's sidecars as HttpArena's nginx serves them (brotli_static, scripts/gnosis_tools/bench/nginx.py).
[ -e /usr/lib/nginx/modules/ngx_http_brotli_static_module.so ] || missing+=(libnginx-mod-http-brotli-static)
command -v h2o >/dev/null || missing+=(h2o)
command -v perf >/dev/null || missing+=(linux-perf)
command -v strace >/dev/null || missing+=(strace)
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
command -v nghttp >/dev/null || missing+=(nghttp2-client)
command -v gtlsclient >/dev/null || missing+=(ngtcp2-client)
command -v redis-server >/dev/null || missing+=(redis-server)
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
# Debian starts the packaged redis on 6379 at install: tests/redis.rs runs its own, and a
# system one left running would only be in the way. Without systemd (a container) there is
# none to stop.
if [[ " ${missing[*]} " == *" redis-server "* ]]; then
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
        systemctl disable --now redis-server >/dev/null 2>&1 || true
    elif command -v service >/dev/null; then
        service redis-server stop >/dev/null 2>&1 || true
    fi
fi

step "Python packages: aioquic, an HTTP/3 client independent of gnosis (tests/h3.rs, tests/h3_hostile.rs, tests/edge); PyYAML, which reads the gateway stacks' compose files (verify gateway)"
python3 -c 'import aioquic' 2>/dev/null || python3 -m pip install -q --root-user-action=ignore aioquic
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install -q --root-user-action=ignore pyyaml

step "PostgreSQL: the private cluster (scripts/pg.sh)"
bash scripts/pg.sh start

step "format and lints"
cargo fmt --all -- --check
if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --locked --all-targets -- -D warnings
else
    echo "clippy is not installed: skipping lints (rustup component add clippy)"
fi

step "unit and integration tests"
cargo test --locked 2>&1 | tee -a "$log"

step "TFB: scripts/tool verify tfb against both binaries"
cargo build --release --locked --bins
eval "$(bash scripts/pg.sh env)"
# Each on a free port, checked to be the process verified (not whatever serves 8080).
bash scripts/verify-server.sh target/release/gnosis
bash scripts/verify-server.sh target/release/gnosis-uring --entry uring

step "HttpArena: scripts/tool verify httparena against both binaries"
# Started as HttpArena starts them: its database (pg.sh's HttpArena-like one) in DATABASE_URL,
# DATABASE_MAX_CONN=256, nothing else; the PG* variables of TFB's step unset. Every profile the
# binaries serve (the WebSocket family on the cleartext port; json-tls and 8gbit over TLS on a
# second port, with a certificate made for the run; static from a folder of made-up files;
# baseline-h2, static-h2 and unary-grpc-tls over h2 on a TLS port, baseline-h2c on an h2c port,
# unary-grpc over h2c on the cleartext port, baseline-h3 and static-h3 over QUIC on the TLS
# port's number);
# async-db's and fortunes' answers are compared with that database's rows.
arena_profiles=baseline,limited-conn,pipelined,json,async,async-db,fortunes,latency-1m,latency-10k,json-tls,8gbit,static,echo-ws,echo-ws-pipeline,echo-ws-limited,baseline-h2,static-h2,baseline-h2c,unary-grpc,unary-grpc-tls,baseline-h3,static-h3
for binary in target/release/gnosis target/release/gnosis-uring; do
    (
        unset PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE
        eval "$(bash scripts/pg.sh arena-env)"
        export DATABASE_MAX_CONN=256
        bash scripts/verify-server.sh --httparena "$binary" --profiles "$arena_profiles"
    )
done

step "HttpArena: the gateway stacks (httparena/compose.gateway.yml, compose.production-stack.yml), run as compose would run them, checked as validate.sh checks them"
# Each service as its compose file says (the edge in front of the server), on free ports, with
# HttpArena's CERTS_DIR and DATA_DIR made for the run and its database in DATABASE_URL.
for binary in target/release/gnosis target/release/gnosis-uring; do
    (
        unset PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE
        eval "$(bash scripts/pg.sh arena-env)"
        bash scripts/verify-server.sh --gateway "$binary"
    )
done

step "the tools' own tests (scripts/gnosis_tools: verifiers, export, benchmark)"
python3 -m unittest discover -s scripts/gnosis_tools -t scripts 2>&1 | tee -a "$log"

step "TFB: both dockerfiles, followed without Docker"
python3 scripts/tool dockerfile-check

# One closing line for every test run above (cargo's "N passed; M failed" and unittest's
# "Ran N tests"); a failure has already stopped the script.
awk '/^test result:/ { passed += $4; failed += $6 } /^Ran [0-9]+ test/ { passed += $2 }
     END { printf "\ntests: %d passed, %d failed\n", passed, failed }' "$log"
