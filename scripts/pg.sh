#!/usr/bin/env bash
# A private PostgreSQL cluster set up like TFB's database and HttpArena's, for gnosis's tests
# and benchmarks.
#
#   scripts/pg.sh start|stop|restart|status|env|arena-env|arena-setup|psql [args]|reset-stats
#
# env prints the PG* variables for TFB's database, arena-env the DATABASE_URL of HttpArena's;
# arena-setup runs HttpArena's set-up again (start runs it once).
#
# GNOSIS_PG_DIR (default /tmp/gnosis-pg) holds data/, socket/ and postgres.log;
# GNOSIS_PG_PORT (default 55432). Listens on 127.0.0.1 and on Unix sockets in <dir>/socket and
# /tmp (so libpq-style auto-detection of /tmp/.s.PGSQL.<port> finds it).
#
# Roles (all own nothing but benchmarkdbuser, which owns hello_world):
#   benchmarkdbuser / benchmarkdbpass  SCRAM-SHA-256 over TCP (TFB's set-up)
#   gnosis_md5      / gnosis_md5_pass  MD5 over TCP
#   gnosis_clear    / gnosis_clear_pass cleartext ("password") over TCP
#   gnosis_trust                       trust over the Unix socket (every local connection is trust)
#   gnosis_count                       like gnosis_trust, may update world: tests that count
#                                      statements in pg_stat_statements run as this role alone
#
# hello_world holds what TFB's toolset/databases/postgres/create-postgres.sql creates: world and
# fortune, and the quoted "World" and "Fortune" copies (same columns, 10,000 random rows and the
# same 12 fortunes), which TFB's verifier reads too ("World" first when it checks /updates).
#
# benchmark, owned by bench / bench (SCRAM-SHA-256 over TCP), is HttpArena's database: items
# (100,000 rows), fortune (200 rows) and users (4 rows), made by scripts/pg-arena.sql, which
# says what is in it.
#
# GNOSIS_PG_SOCKET_DIRS overrides the socket directories (comma-separated; the first is the
# one this script uses), e.g. to keep /tmp free of a socket that auto-detection would find.
set -euo pipefail

DIR="${GNOSIS_PG_DIR:-/tmp/gnosis-pg}"
PORT="${GNOSIS_PG_PORT:-55432}"
DATA="$DIR/data"
SOCKET_DIRS="${GNOSIS_PG_SOCKET_DIRS:-$DIR/socket,/tmp}"
SOCKET="${SOCKET_DIRS%%,*}"
LOG="$DIR/postgres.log"

find_bindir() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/pg_ctl" ] && BIN="$d"
    done
    [ -n "${BIN:-}" ]
}

install_postgres() {
    if ! find_bindir; then
        echo "pg.sh: installing PostgreSQL (apt-get)" >&2
        apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql postgresql-contrib >&2 \
            || DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
        find_bindir || { echo "pg.sh: no PostgreSQL binaries after install" >&2; exit 1; }
    fi
}

# postgres refuses to run as root: run the server tools as the postgres system user then.
if [ "$(id -u)" = 0 ]; then
    RUN_AS=(runuser -u postgres --)
    SUPERUSER=postgres
else
    RUN_AS=()
    SUPERUSER="$(id -un)"
fi

as_pg() { "${RUN_AS[@]}" "$@"; }

SCRIPTS="$(dirname "${BASH_SOURCE[0]}")"

# SQL (a file, or stdin) with scripts/tfb-fortunes.sql read in where a line says
# "-- TFB's fortunes": TFB's 12 fortunes are in both databases, written once. Piped to psql
# rather than named to it, so that the postgres user need not be able to read the checkout.
with_tfb_fortunes() {
    sed "/^-- TFB's fortunes\$/r $SCRIPTS/tfb-fortunes.sql" "$@"
}

superuser_psql() {
    as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCKET" -p "$PORT" -U "$SUPERUSER" "$@"
}

running_pid() {
    # Prints the postmaster's pid if the one recorded in postmaster.pid is really alive and a
    # postgres process; a stale file left by a crash (a dead pid, an unreaped zombie, or a
    # recycled pid) does not count.
    local pid state
    [ -f "$DATA/postmaster.pid" ] || return 1
    pid="$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)"
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    state="$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)"
    [ -n "$state" ] && [ "$state" != Z ] || return 1
    case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
        postgres|postmaster) echo "$pid" ;;
        *) return 1 ;;
    esac
}

remove_stale_lock() {
    local pid lock
    [ -f "$DATA/postmaster.pid" ] || return 0
    pid="$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)"
    echo "pg.sh: removing stale postmaster.pid (pid $pid is not running)" >&2
    rm -f "$DATA/postmaster.pid"
    for lock in "$SOCKET/.s.PGSQL.$PORT.lock" "/tmp/.s.PGSQL.$PORT.lock"; do
        if [ -f "$lock" ] && [ "$(head -n 1 "$lock" 2>/dev/null)" = "$pid" ]; then
            rm -f "$lock"
        fi
    done
}

init_cluster() {
    [ -f "$DATA/PG_VERSION" ] && return 0
    echo "pg.sh: initdb in $DATA" >&2
    mkdir -p "$DIR" "$SOCKET"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$DIR" "$SOCKET"; fi
    rm -rf "$DATA"
    as_pg "$BIN/initdb" -D "$DATA" -E UTF8 --locale=C -U "$SUPERUSER" --auth-local=trust \
        --auth-host=scram-sha-256 >/dev/null
    cat >>"$DATA/postgresql.conf" <<CONF

# --- gnosis benchmark cluster ---
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCKET_DIRS'
max_connections = 200
password_encryption = 'scram-sha-256'
shared_preload_libraries = 'pg_stat_statements'
# A throw-away benchmark cluster: durability is not wanted, speed and a quiet disk are.
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
    cat >"$DATA/pg_hba.conf" <<HBA
# TYPE  DATABASE USER          ADDRESS        METHOD
local   all      all                          trust
host    all      gnosis_md5    127.0.0.1/32   md5
host    all      gnosis_clear  127.0.0.1/32   password
host    all      all           127.0.0.1/32   scram-sha-256
host    all      all           ::1/128        scram-sha-256
HBA
}

setup_database() {
    [ -f "$DATA/gnosis-setup-done" ] && return 0
    echo "pg.sh: creating roles, hello_world and the TFB tables" >&2
    superuser_psql -d postgres <<'SQL'
SET client_min_messages = warning;
SET password_encryption = 'scram-sha-256';
DROP DATABASE IF EXISTS hello_world;
DROP ROLE IF EXISTS benchmarkdbuser;
DROP ROLE IF EXISTS gnosis_md5;
DROP ROLE IF EXISTS gnosis_clear;
DROP ROLE IF EXISTS gnosis_trust;
DROP ROLE IF EXISTS gnosis_count;
CREATE ROLE gnosis_count LOGIN;
CREATE ROLE benchmarkdbuser LOGIN PASSWORD 'benchmarkdbpass';
CREATE ROLE gnosis_clear LOGIN PASSWORD 'gnosis_clear_pass';
CREATE ROLE gnosis_trust LOGIN;
SET password_encryption = 'md5';
CREATE ROLE gnosis_md5 LOGIN PASSWORD 'gnosis_md5_pass';
RESET password_encryption;
CREATE DATABASE hello_world OWNER benchmarkdbuser ENCODING 'UTF8' TEMPLATE template0;
SQL
    with_tfb_fortunes <<'SQL' | superuser_psql -d hello_world
SET client_encoding = 'UTF8';
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE world (id integer NOT NULL PRIMARY KEY, randomnumber integer NOT NULL DEFAULT 0);
INSERT INTO world (id, randomnumber)
    SELECT i, 1 + floor(random() * 10000)::integer FROM generate_series(1, 10000) AS i;
CREATE TABLE fortune (id integer NOT NULL PRIMARY KEY, message varchar(2048) NOT NULL);
-- TFB's fortunes
ALTER TABLE world OWNER TO benchmarkdbuser;
ALTER TABLE fortune OWNER TO benchmarkdbuser;
GRANT ALL PRIVILEGES ON world, fortune TO benchmarkdbuser;
GRANT SELECT ON world, fortune TO gnosis_md5, gnosis_clear, gnosis_trust, gnosis_count;
GRANT UPDATE ON world TO gnosis_count;
GRANT pg_read_all_stats TO benchmarkdbuser;
ANALYZE world;
ANALYZE fortune;
SQL
    rm -f "$DATA/gnosis-setup-quoted-done"
    touch "$DATA/gnosis-setup-done"
}

# TFB's quoted copies, in their own step so that a cluster set up before they were added gets
# them on its next start; every statement is idempotent.
setup_quoted_tables() {
    [ -f "$DATA/gnosis-setup-quoted-done" ] && return 0
    echo "pg.sh: creating TFB's quoted \"World\" and \"Fortune\" tables" >&2
    superuser_psql -d hello_world <<'SQL'
SET client_min_messages = warning;
BEGIN;
CREATE TABLE IF NOT EXISTS "World" (id integer NOT NULL PRIMARY KEY, randomnumber integer NOT NULL DEFAULT 0);
INSERT INTO "World" (id, randomnumber)
    SELECT i, least(floor(random() * 10000 + 1), 10000)::integer FROM generate_series(1, 10000) AS i
    ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS "Fortune" (id integer NOT NULL PRIMARY KEY, message varchar(2048) NOT NULL);
INSERT INTO "Fortune" (id, message) SELECT id, message FROM fortune ON CONFLICT (id) DO NOTHING;
ALTER TABLE "World" OWNER TO benchmarkdbuser;
ALTER TABLE "Fortune" OWNER TO benchmarkdbuser;
GRANT ALL PRIVILEGES ON "World", "Fortune" TO benchmarkdbuser;
GRANT SELECT ON "World", "Fortune" TO gnosis_md5, gnosis_clear, gnosis_trust, gnosis_count;
COMMIT;
ANALYZE "World";
ANALYZE "Fortune";
SQL
    touch "$DATA/gnosis-setup-quoted-done"
}

# HttpArena's database, in its own step like the quoted tables. The marker's number goes up
# whenever scripts/pg-arena.sql gains a table (2: users), so that a cluster made before runs
# the script again; it is idempotent.
setup_arena_database() {
    [ -f "$DATA/gnosis-setup-arena-2-done" ] && return 0
    echo "pg.sh: creating HttpArena's benchmark database (items, fortune, users)" >&2
    run_arena_sql
    touch "$DATA/gnosis-setup-arena-2-done"
}

# scripts/pg-arena.sql, idempotent: a re-run adds and changes nothing.
run_arena_sql() {
    with_tfb_fortunes "$SCRIPTS/pg-arena.sql" | superuser_psql -d postgres
}

wait_ready() {
    local i
    for i in $(seq 1 100); do
        if "$BIN/pg_isready" -q -h "$SOCKET" -p "$PORT" -U "$SUPERUSER" -d postgres; then return 0; fi
        sleep 0.1
    done
    echo "pg.sh: server did not become ready; see $LOG" >&2
    tail -n 20 "$LOG" >&2 || true
    exit 1
}

start() {
    install_postgres
    init_cluster
    if ! running_pid >/dev/null; then
        remove_stale_lock
        mkdir -p "$SOCKET"
        if [ "$(id -u)" = 0 ]; then chown postgres: "$DIR" "$SOCKET"; touch "$LOG"; chown postgres: "$LOG"; fi
        # A cluster stopped a moment ago (another clone's) may still hold the port: retry a while.
        local attempt
        for attempt in 1 2 3 4 5 6; do
            if as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 30 start >/dev/null; then break; fi
            if [ "$attempt" = 6 ] || ! tail -n 5 "$LOG" | grep -q "Address already in use"; then
                echo "pg.sh: pg_ctl start failed; the end of $LOG:" >&2
                tail -n 20 "$LOG" >&2 || true
                exit 1
            fi
            echo "pg.sh: port $PORT is still in use; retrying" >&2
            sleep 2
        done
    fi
    wait_ready
    setup_database
    setup_quoted_tables
    setup_arena_database
    echo "pg.sh: running on 127.0.0.1:$PORT and $SOCKET (data $DATA)" >&2
}

stop() {
    find_bindir || exit 0
    if running_pid >/dev/null; then
        as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
        echo "pg.sh: stopped" >&2
    else
        echo "pg.sh: not running" >&2
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    restart)
        install_postgres
        if running_pid >/dev/null; then
            as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -m fast -w restart >/dev/null
            wait_ready
        else
            start
        fi
        ;;
    status)
        if pid="$(running_pid)"; then
            echo "running (pid $pid) on 127.0.0.1:$PORT, sockets in $SOCKET and /tmp"
        else
            echo "not running"
            exit 3
        fi
        ;;
    env)
        echo "export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=benchmarkdbuser PGPASSWORD=benchmarkdbpass PGDATABASE=hello_world"
        ;;
    arena-env)
        echo "export DATABASE_URL=postgres://bench:bench@localhost:$PORT/benchmark"
        ;;
    arena-setup)
        find_bindir || { echo "pg.sh: PostgreSQL is not installed; run start" >&2; exit 1; }
        run_arena_sql
        ;;
    psql)
        shift
        find_bindir || { echo "pg.sh: PostgreSQL is not installed; run start" >&2; exit 1; }
        superuser_psql -d hello_world "$@"
        ;;
    reset-stats)
        find_bindir || exit 1
        superuser_psql -d hello_world -c 'SELECT pg_stat_statements_reset()' >/dev/null
        ;;
    *)
        echo "usage: $0 start|stop|restart|status|env|arena-env|arena-setup|psql [args]|reset-stats" >&2
        exit 2
        ;;
esac
