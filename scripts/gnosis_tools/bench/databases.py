"""The PostgreSQL clusters a run needs, both made by scripts/pg.sh: TFB's database where the
anchors look for it (tfb-database:5432), and HttpArena's, which every server serving its database
profiles finds through DATABASE_URL."""

import contextlib
import os
import re
import shutil
import subprocess

from ..system import SetupError, ensure_tfb_database_host, pg_sh, port_in_use
from .catalog import TESTS
from .httparena import READS_ARENA_DB as ARENA_DB_TESTS


# The database the anchors expect, made with scripts/pg.sh: TFB's set-up on TCP port 5432. Its
# Unix socket lives in its own directory only: a /tmp/.s.PGSQL.5432 would be found by the
# socket auto-detection of any gnosis started without PGHOST on this machine (other people's
# tests too), which would then talk to this cluster over a trusted socket without knowing it.
ANCHOR_DB_PORT = 5432
ANCHOR_PG_DIR = "/tmp/gnosis-pg-5432"
ANCHOR_PG_SH_ENV = {
    "GNOSIS_PG_DIR": ANCHOR_PG_DIR,
    "GNOSIS_PG_PORT": str(ANCHOR_DB_PORT),
    "GNOSIS_PG_SOCKET_DIRS": f"{ANCHOR_PG_DIR}/socket",
}
# What every non-anchor server of such a run gets, so that it uses the anchors' database the
# anchors' way (TCP, SCRAM), whatever PG* variables the shell had.
ANCHOR_DB_CLIENT_ENV = {
    "PGHOST": "127.0.0.1",
    "PGPORT": str(ANCHOR_DB_PORT),
    "PGUSER": "benchmarkdbuser",
    "PGPASSWORD": "benchmarkdbpass",
    "PGDATABASE": "hello_world",
}


class AnchorDatabase:
    """TFB's database where the anchors look for it: a scripts/pg.sh cluster on 127.0.0.1:5432."""

    def __init__(self, log):
        self.log = log
        self.started = False

    def start(self):
        ensure_tfb_database_host(self.log)
        pg_env = " ".join(f"{k}={v}" for k, v in ANCHOR_PG_SH_ENV.items())
        if pg_sh("status", ANCHOR_PG_SH_ENV).returncode == 0:
            self.log(f"--- the anchors' PostgreSQL ({ANCHOR_PG_DIR}) is already running: using it, leaving it running")
        else:
            owner = port_in_use(ANCHOR_DB_PORT)
            if owner:
                raise SetupError(
                    f"port {ANCHOR_DB_PORT} is already in use ({owner}) by something other than this "
                    f"script's cluster in {ANCHOR_PG_DIR}: the anchors need it for tfb-database; stop that first"
                )
            self.log(f"--- starting the anchors' PostgreSQL: {pg_env} scripts/pg.sh start")
            done = pg_sh("start", ANCHOR_PG_SH_ENV)
            if done.returncode != 0:
                raise SetupError(f"scripts/pg.sh start failed ({pg_env}):\n{done.stderr.strip()}")
            self.started = True
        self.check_login()

    def check_login(self):
        """One query the anchors' way (TCP to tfb-database, SCRAM), before any server relies on it."""
        if not shutil.which("psql"):
            return
        env = dict(os.environ, PGPASSWORD="benchmarkdbpass", PGCONNECT_TIMEOUT="10")
        command = ["psql", "-X", "-A", "-t", "-h", "tfb-database", "-p", str(ANCHOR_DB_PORT),
                   "-U", "benchmarkdbuser", "-d", "hello_world", "-c", "SELECT count(*) FROM world"]  # fmt: skip
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0 or done.stdout.strip() != "10000":
            raise SetupError(
                f"the anchors' database does not answer as tfb-database:{ANCHOR_DB_PORT}: "
                f"{(done.stderr or done.stdout).strip()}"
            )

    def stop(self):
        if self.started:
            done = pg_sh("stop", ANCHOR_PG_SH_ENV)
            self.log(f"--- stopped the anchors' PostgreSQL ({ANCHOR_PG_DIR})"
                     + ("" if done.returncode == 0 else f": FAILED: {done.stderr.strip()}"))  # fmt: skip
            self.started = False


# HttpArena's database (async-db, arena-fortunes): made by scripts/pg.sh beside TFB's in its
# default cluster, whose `arena-env` prints the DATABASE_URL. HttpArena gives its one entry
# DATABASE_MAX_CONN=256 of a max_connections=256 server; here the servers of a run stay up side by
# side on a cluster others use too, so each gets an equal share of the connections free at the
# start (at most 256), the same for all.
ARENA_DB_MAX_CONN = 256
ARENA_DB_SPARE_CONNECTIONS = 10  # left free for psql and other clients
ARENA_DB_MIN_SHARE = 32  # sark keeps 16 of its budget back: below this a share measures little
ARENA_DB_ROWS = (100_000, 200)  # items, fortune (scripts/pg-arena.sql)


def arena_pg_sh(action):
    """`scripts/pg.sh ACTION` on the default cluster: what it prints, or SetupError."""
    done = pg_sh(action)
    if done.returncode != 0:
        raise SetupError(f"scripts/pg.sh {action} failed:\n{done.stderr.strip()}")
    return done.stdout


def arena_database_env(sharing, log):
    """HttpArena's database where each of `sharing` servers finds it: the DATABASE_URL and
    DATABASE_MAX_CONN of its environment. Starts the cluster if need be (and leaves it running)."""
    arena_pg_sh("start")
    words = arena_pg_sh("arena-env").split()
    url = next((w.split("=", 1)[1] for w in words if w.startswith("DATABASE_URL=")), None)
    if not url:
        raise SetupError(f"scripts/pg.sh arena-env printed no DATABASE_URL: {' '.join(words)}")
    query = ("SELECT (SELECT count(*) FROM items), (SELECT count(*) FROM fortune), "
             "current_setting('max_connections')::int - (SELECT count(*) FROM pg_stat_activity)")  # fmt: skip
    done = subprocess.run(["psql", "-X", "-A", "-t", "-F", " ", "-d", url, "-c", query],
                          env=dict(os.environ, PGCONNECT_TIMEOUT="10"), capture_output=True, text=True, timeout=60)  # fmt: skip
    try:
        items, fortunes, free = map(int, done.stdout.split())
    except ValueError:
        raise SetupError(f"HttpArena's database does not answer at {url}: {(done.stderr or done.stdout).strip()}") from None
    if (items, fortunes) != ARENA_DB_ROWS:
        raise SetupError(f"HttpArena's database at {url} has {items} items and {fortunes} fortunes, "
                         f"not {ARENA_DB_ROWS[0]} and {ARENA_DB_ROWS[1]}: scripts/pg.sh arena-setup")  # fmt: skip
    share = min(ARENA_DB_MAX_CONN, (free - ARENA_DB_SPARE_CONNECTIONS) // max(sharing, 1))
    if share < ARENA_DB_MIN_SHARE:
        raise SetupError(f"HttpArena's database has {free} connections free: {sharing} servers would get "
                         f"{share} each (at least {ARENA_DB_MIN_SHARE} wanted)")  # fmt: skip
    log(f"--- HttpArena's database: {without_password(url)}, DATABASE_MAX_CONN={share} for each of "
        f"{sharing} server(s)")  # fmt: skip
    return {"DATABASE_URL": url, "DATABASE_MAX_CONN": str(share)}


def give_arena_database(servers, tests, log):
    """For a run with tests of HttpArena's database: starts it, and adds DATABASE_URL and
    DATABASE_MAX_CONN to the environment of each server that serves one of them (the others
    keep theirs). Returns the report's line about it, or None."""
    sharing = [s for s in servers if any(s.serves(TESTS[t]) for t in tests if t in ARENA_DB_TESTS)]
    if not sharing:
        return None
    env = arena_database_env(len(sharing), log)
    for server in sharing:
        server.env = dict(server.env or {}, **env)
    return (
        f"HttpArena's, from scripts/pg.sh (arena-env): {', '.join(s.name for s in sharing)} started with "
        f"DATABASE_URL={without_password(env['DATABASE_URL'])} DATABASE_MAX_CONN={env['DATABASE_MAX_CONN']}"
    )


def without_password(url):
    """A connection URL as the report shows it: user@host, no password."""
    return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1@", url)


# production-stack's writes: UPDATE items 1..20 (name, price, quantity), which the repository's
# tests pin; each test that writes puts them back as it found them.
PUT_BACK_ITEMS = range(1, 21)
PUT_BACK_COLUMNS = ("name", "price", "quantity")


def psql(url, sql):
    """One psql -c against `url`: its output, or SetupError."""
    done = subprocess.run(["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                          env=dict(os.environ, PGCONNECT_TIMEOUT="10"), capture_output=True, text=True, timeout=60)  # fmt: skip
    if done.returncode != 0:
        raise SetupError(f"psql at {without_password(url)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def items_rows(url, ids=PUT_BACK_ITEMS):
    """The rows `ids` of items, their PUT_BACK_COLUMNS and id, as JSON text."""
    columns = ", ".join(("id",) + PUT_BACK_COLUMNS)
    return psql(url, f"SELECT json_agg(row_to_json(r) ORDER BY r.id) FROM (SELECT {columns} FROM items "
                     f"WHERE id BETWEEN {ids[0]} AND {ids[-1]}) r")  # fmt: skip


def put_back_sql(rows):
    """The UPDATE that gives items the rows of `rows` (items_rows's JSON) again."""
    if "$rows$" in rows:
        raise ValueError("rows holding $rows$ cannot be quoted here")
    sets = ", ".join(f"{c} = r.{c}" for c in PUT_BACK_COLUMNS)
    return (f"UPDATE items i SET {sets} FROM json_populate_recordset(NULL::items, $rows${rows}$rows$) r "
            "WHERE i.id = r.id")  # fmt: skip


@contextlib.contextmanager
def items_put_back(test, servers, log, stop):
    """For a test that writes (production-stack): items 1..20 read through psql at the DATABASE_URL
    its servers were given, and put back after it however it ended, once `stop` stopped the
    servers: an edge may still hold POSTs the load generator gave up on, which would land after."""
    urls = {s.env.get("DATABASE_URL") for s in servers if test.production and s.serves(test) and s.env}
    url = next((u for u in urls if u), None)
    if not url:
        yield
        return
    rows = items_rows(url)
    if "bench-updated" in rows:
        log(f"!!! items {PUT_BACK_ITEMS[0]}..{PUT_BACK_ITEMS[-1]} already hold a write of {test.name} (an earlier "
            "run's, not put back): put back as they are; deleting them (name = 'bench-updated') and running "
            "scripts/pg.sh arena-setup makes them anew")  # fmt: skip
    try:
        yield
    finally:
        stop()
        psql(url, put_back_sql(rows))
        log(f"--- {test.name}: items {PUT_BACK_ITEMS[0]}..{PUT_BACK_ITEMS[-1]} put back as they were before it")
