#!/usr/bin/env bash
# Soak: mixed load on all seven tests for a while (default 10 minutes), sampling the server's
# RSS and open descriptors every 10 s; both must stay flat. Not part of CI.
#
#   scripts/soak.sh [SECONDS]        (builds release, starts the private PostgreSQL)
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${1:-600}"
port="${SOAK_PORT:-8090}"
command -v wrk >/dev/null || { apt-get update && apt-get install -y wrk; }
cargo build --release --locked
bash scripts/pg.sh start
eval "$(bash scripts/pg.sh env)"

target/release/gnosis --port "$port" 2>/tmp/gnosis-soak.log &
server=$!
loads=()
cleanup() {
    kill "${loads[@]}" "$server" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 50); do
    curl -fs "http://127.0.0.1:$port/cached-queries" >/dev/null && break
    sleep 0.2
done

for path in /plaintext /json /db "/queries?queries=20" "/updates?queries=20" /fortunes "/cached-queries?count=100"; do
    wrk -t 1 -c 32 -d "${duration}s" --timeout 8 -H 'Connection: keep-alive' \
        "http://127.0.0.1:$port$path" >"/tmp/gnosis-soak-wrk-${#loads[@]}.txt" 2>&1 &
    loads+=("$!")
done

printf '%8s %10s %6s\n' seconds rss_kib fds
samples=()
for ((elapsed = 0; elapsed <= duration; elapsed += 10)); do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status")
    fds=$(ls "/proc/$server/fd" | wc -l)
    printf '%8d %10d %6d\n' "$elapsed" "$rss" "$fds"
    samples+=("$rss:$fds")
    [ "$elapsed" -lt "$duration" ] && sleep 10
done
wait "${loads[@]}" || true

grep -h -E 'Requests/sec|Non-2xx|Socket errors' /tmp/gnosis-soak-wrk-*.txt | sort | uniq -c
# Flat: after the first minute (warm-up), RSS may not grow by more than 10% nor fds by more than 16.
base="${samples[6]:-${samples[-1]}}"
last="${samples[-1]}"
if (( ${last%%:*} > ${base%%:*} * 11 / 10 || ${last##*:} > ${base##*:} + 16 )); then
    echo "soak: NOT flat: at 60 s $base, at the end $last (rss_kib:fds)"
    exit 1
fi
echo "soak: flat (rss_kib:fds at 60 s $base, at the end $last)"
