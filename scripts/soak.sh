#!/usr/bin/env bash
# Soak: mixed load on all seven tests for a while (default 10 minutes), sampling the server's
# RSS and open descriptors every 10 s; both must stay flat. Not part of CI.
#
#   scripts/soak.sh [SECONDS] [--faults] [--pause SECONDS]
#
# --faults: a third of the way in, the database hangs (its postmaster and every backend
# stopped with SIGSTOP) for --pause seconds (default 20), then resumes; two thirds of the way
# in, it is restarted (pg_ctl restart -m fast). After each, the time until /db answers 200
# again is reported; the verdict compares the end with the last sample before the hang.
#
# Uses a PostgreSQL cluster of its own (scripts/pg.sh with SOAK_PG_DIR, default
# /tmp/gnosis-soak-pg, and SOAK_PG_PORT, default 55439), never the shared one, and stops it
# at the end. SOAK_BINARY=gnosis-uring soaks the io_uring server (default: gnosis);
# SOAK_PROFILE=debug soaks the debug build instead of building release.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 [SECONDS] [--faults] [--pause SECONDS]" >&2; exit 2; }
duration=600
faults=0
pause_for=20
while [ $# -gt 0 ]; do
    case "$1" in
        --faults) faults=1 ;;
        --pause) [ $# -ge 2 ] || usage; pause_for=$2; shift ;;
        [0-9]*) duration=$1 ;;
        *) usage ;;
    esac
    shift
done
port="${SOAK_PORT:-8090}"
profile="${SOAK_PROFILE:-release}"
binary="${SOAK_BINARY:-gnosis}"
case "$binary" in
    gnosis | gnosis-uring) ;;
    *) echo "soak: SOAK_BINARY is gnosis or gnosis-uring" >&2; exit 2 ;;
esac

export GNOSIS_PG_DIR="${SOAK_PG_DIR:-/tmp/gnosis-soak-pg}"
export GNOSIS_PG_PORT="${SOAK_PG_PORT:-55439}"
export GNOSIS_PG_SOCKET_DIRS="$GNOSIS_PG_DIR/socket"
if [ "$GNOSIS_PG_PORT" = 55432 ] || [ "$GNOSIS_PG_DIR" = /tmp/gnosis-pg ]; then
    echo "soak: refusing to use the shared cluster (port 55432, /tmp/gnosis-pg)" >&2
    exit 2
fi

command -v wrk >/dev/null || { apt-get update && apt-get install -y wrk; }
case "$profile" in
    release) cargo build --release --locked --bin "$binary" ;;
    debug) cargo build --locked --bin "$binary" ;;
    *) echo "soak: SOAK_PROFILE is release or debug" >&2; exit 2 ;;
esac
bash scripts/pg.sh start
eval "$(bash scripts/pg.sh env)"

started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }

"target/$profile/$binary" --port "$port" 2>/tmp/gnosis-soak.log &
server=$!
loads=()
injector=
cleanup() {
    kill ${injector:+"$injector"} "${loads[@]}" "$server" 2>/dev/null || true
    # Never leave the database stopped.
    local pm
    pm=$(head -n 1 "$GNOSIS_PG_DIR/data/postmaster.pid" 2>/dev/null || true)
    if [ -n "$pm" ]; then
        # shellcheck disable=SC2046 # one pid per word
        kill -CONT "$pm" $(pgrep -P "$pm") 2>/dev/null || true
    fi
    wait 2>/dev/null || true
    bash scripts/pg.sh stop || true
}
trap cleanup EXIT
for _ in $(seq 50); do
    curl -fs "http://127.0.0.1:$port/cached-queries" >/dev/null && break
    sleep 0.2
done
# The descriptors the server holds, plus the connections on its port that gnosis-uring holds
# as direct descriptors in its rings' file tables, which /proc/PID/fd does not list (a socket
# that nobody holds any more has inode 0 in /proc/net/tcp).
held_fds() {
    local fds direct
    fds=$(ls "/proc/$server/fd" | wc -l)
    direct=$(awk -v port="$(printf '%04X' "$port")" \
        -v held=" $(find "/proc/$server/fd" -type l -printf '%l ')" '
        FNR > 1 && split($2, addr, ":") && addr[2] == port && $10 != 0 &&
            index(held, " socket:[" $10 "] ") == 0 { n++ }
        END { print n + 0 }' /proc/net/tcp /proc/net/tcp6)
    echo $((fds + direct))
}
idle_fds=$(held_fds)

# Seconds until /db answers 200 again, polled every 50 ms for up to two minutes.
wait_for_db() {
    local from=$(date +%s%N) i
    for i in $(seq 2400); do
        if [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port/db")" = 200 ]; then
            echo "$(( ($(date +%s%N) - from) / 1000000 )) ms"
            return
        fi
        sleep 0.05
    done
    echo "never (2 minutes)"
}

# The faults, on their own schedule beside the sampling; events go to stdout as they happen.
pause_at=$((duration / 3))
restart_at=$((duration * 2 / 3))
if [ "$faults" = 1 ]; then
    (
        sleep "$pause_at"
        pm=$(head -n 1 "$GNOSIS_PG_DIR/data/postmaster.pid")
        stopped="$pm $(pgrep -P "$pm" | tr '\n' ' ')"
        echo "fault at $(elapsed) s: database hangs for $pause_for s (SIGSTOP $stopped)"
        # shellcheck disable=SC2086 # one pid per word
        kill -STOP $stopped
        sleep "$pause_for"
        # shellcheck disable=SC2086
        kill -CONT $stopped
        echo "fault at $(elapsed) s: database resumed; /db answers 200 after $(wait_for_db)"
        sleep $((restart_at > $(elapsed) ? restart_at - $(elapsed) : 0))
        echo "fault at $(elapsed) s: database restart (pg_ctl restart -m fast)"
        bash scripts/pg.sh restart 2>/dev/null
        echo "fault at $(elapsed) s: database accepting again; /db answers 200 after $(wait_for_db)"
    ) &
    injector=$!
fi

for path in /plaintext /json /db "/queries?queries=20" "/updates?queries=20" /fortunes "/cached-queries?count=100"; do
    # A little longer than the sampling, so that the last sample is still under load.
    wrk -t 1 -c 32 -d "$((duration + 5))s" --timeout 8 -H 'Connection: keep-alive' \
        "http://127.0.0.1:$port$path" >"/tmp/gnosis-soak-wrk-${#loads[@]}.txt" 2>&1 &
    loads+=("$!")
done

printf '%8s %10s %6s\n' seconds rss_kib fds
samples=()
times=()
for ((tick = 0; tick <= duration; tick += 10)); do
    # Sample on the 10 s grid, whatever the fault injector's output took.
    sleep $((started + tick > $(date +%s) ? started + tick - $(date +%s) : 0))
    kill -0 "$server" 2>/dev/null || { echo "soak: $binary died; its log:"; tail -n 20 /tmp/gnosis-soak.log; exit 1; }
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status")
    fds=$(held_fds)
    printf '%8d %10d %6d\n' "$tick" "$rss" "$fds"
    samples+=("$rss:$fds")
    times+=("$tick")
done
wait "${loads[@]}" || true
[ -z "$injector" ] || wait "$injector" || true
# Once the clients are gone, lingering closes (2 s) and the sweep (1 s) end their connections.
sleep 4
after_fds=$(held_fds)
echo "descriptors: $idle_fds before the load, $after_fds after it"

grep -h -E 'Requests/sec|Non-2xx|Socket errors' /tmp/gnosis-soak-wrk-*.txt | sort | uniq -c
echo "server log: $(wc -l </tmp/gnosis-soak.log) lines (/tmp/gnosis-soak.log)"
# Flat: RSS may not grow by more than 10% nor fds by more than 16 between the base and the
# end. The base: after the first minute (warm-up), or with faults the last sample before the
# database hung.
base_index=$((${#samples[@]} > 6 ? 6 : ${#samples[@]} - 1))
if [ "$faults" = 1 ]; then
    for i in "${!times[@]}"; do
        [ "${times[$i]}" -lt "$pause_at" ] && base_index=$i
    done
fi
base="${samples[$base_index]}"
last="${samples[-1]}"
what="at ${times[$base_index]} s"
[ "$faults" = 0 ] || what+=", before the faults"
if (( ${last%%:*} > ${base%%:*} * 11 / 10 || ${last##*:} > ${base##*:} + 16 )); then
    echo "soak: NOT flat: $what $base, at the end $last (rss_kib:fds)"
    exit 1
fi
if (( after_fds > idle_fds + 4 )); then
    echo "soak: descriptors left behind: $idle_fds before the load, $after_fds after it"
    exit 1
fi
echo "soak: flat (rss_kib:fds $what $base, at the end $last; $after_fds descriptors after the load)"
