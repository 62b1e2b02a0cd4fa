#!/usr/bin/env bash
# Measures gnosis (epoll) and gnosis-uring side by side on loopback, alternating A/B, and
# prints per test the median requests/s of each, their ratio (uring / epoll), and the
# median server CPU time per request (user + system, from /proc), for these tests:
#   plaintext pipelined 16 deep at 256 and 1,024 connections, json at 512.
# Usage: scripts/compare-uring.sh [runs per server (3)] [seconds per run (10)]
# Needs wrk (apt-get install wrk) and a release build (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
seconds=${2:-10}
threads=${THREADS:-2}
epoll_port=${EPOLL_PORT:-28470}
uring_port=${URING_PORT:-28471}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install -y wrk" >&2; exit 1; }
[ -x target/release/gnosis ] && [ -x target/release/gnosis-uring ] ||
  cargo build --release

target/release/gnosis --port "$epoll_port" --threads "$threads" 2>/dev/null &
epoll_pid=$!
target/release/gnosis-uring --port "$uring_port" --threads "$threads" 2>/dev/null &
uring_pid=$!
trap 'kill $epoll_pid $uring_pid 2>/dev/null' EXIT
sleep 0.5
for pid in $epoll_pid $uring_pid; do
  kill -0 "$pid" 2>/dev/null || { echo "a server did not start: is port $epoll_port or $uring_port taken?" >&2; exit 1; }
done
for port in $epoll_port $uring_port; do
  until curl -fs "http://127.0.0.1:$port/plaintext" >/dev/null; do sleep 0.1; done
done

headers=(-H 'Host: localhost'
  -H 'Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7'
  -H 'Connection: keep-alive')

# cpu_ticks PID -> user + system clock ticks the process has used so far
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# measure PID PORT PATH CONNECTIONS DEPTH -> "requests/s server-CPU-microseconds/request"
measure() {
  local before after out
  before=$(cpu_ticks "$1")
  out=$(wrk -t 2 -d "$seconds" -c "$4" --timeout 8 "${headers[@]}" -s scripts/pipeline.lua \
    "http://127.0.0.1:$2$3" -- "$5")
  after=$(cpu_ticks "$1")
  awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" '
    /requests in/ { requests = $1 }
    /^Requests\/sec:/ { rate = $2 }
    END { printf "%s %.3f\n", rate, ticks / hz * 1e6 / requests }' <<<"$out"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-28s %10s %10s %6s   %s\n' test gnosis uring ratio 'server CPU us/request (gnosis, uring)'
for test in "/plaintext 256 16" "/plaintext 1024 16" "/json 512 1"; do
  read -r path connections depth <<<"$test"
  epoll_runs=() uring_runs=()
  for _ in $(seq "$runs"); do
    epoll_runs+=("$(measure $epoll_pid $epoll_port "$path" "$connections" "$depth")")
    uring_runs+=("$(measure $uring_pid $uring_port "$path" "$connections" "$depth")")
  done
  printf '# %s c=%s depth=%s  gnosis: %s  gnosis-uring: %s\n' "$path" "$connections" "$depth" \
    "$(IFS=,; echo "${epoll_runs[*]}")" "$(IFS=,; echo "${uring_runs[*]}")" >&2
  epoll=$(printf '%s\n' "${epoll_runs[@]}" | cut -d' ' -f1 | median)
  uring=$(printf '%s\n' "${uring_runs[@]}" | cut -d' ' -f1 | median)
  epoll_cpu=$(printf '%s\n' "${epoll_runs[@]}" | cut -d' ' -f2 | median)
  uring_cpu=$(printf '%s\n' "${uring_runs[@]}" | cut -d' ' -f2 | median)
  printf '%-28s %10.0f %10.0f %6.2f   %.3f %.3f\n' "$path c=$connections depth=$depth" \
    "$epoll" "$uring" "$(awk -v a="$epoll" -v b="$uring" 'BEGIN { print b / a }')" \
    "$epoll_cpu" "$uring_cpu"
done
