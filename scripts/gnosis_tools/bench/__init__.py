"""Benchmark gnosis (or any TFB-style server) with wrk the way TFB's scripts do.

The command starts the server itself, waits for its port, runs a primer, a warm-up and
then each level of every selected test, and writes results/<timestamp>/ with table.md,
one SVG chart per test and results.json (every wrk run, raw). With --baseline a second
server runs alternately with the first, level by level, for several rounds, and the
table reports each server's median and the ratio. See docs/BENCHMARKS.md.
"""

import argparse
import dataclasses
import http.client
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .. import ROOT as REPO
from ..system import (LOOPBACK, SetupError, ensure_tfb_database_host, log_tail, port_in_use,
                      port_open, port_owners, read_proc_stat)

LUA_DIR = Path(__file__).resolve().parent
REPORT_LUA = LUA_DIR / "report.lua"
PIPELINE_LUA = LUA_DIR / "pipeline.lua"
MIX_LUA = LUA_DIR / "mix.lua"
JSON_MARKER = "BENCH_JSON "

# The Accept headers TFB's load generator sends, per response type.
ACCEPT_JSON = "application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
ACCEPT_HTML = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ACCEPT_PLAIN = "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"

PIPELINE_DEPTH = 16
WRK_TIMEOUT_S = 8
PRIMER_CONNECTIONS = 8
# TFB's query scripts prime and warm up with this N.
QUERY_WARMUP_N = 2


@dataclass(frozen=True)
class Test:
    """One test type (TFB's, or one of HttpArena's profiles). `kind` says what a level is:
    connections, or N at fixed connections."""

    name: str
    path: str  # for query tests, the URL up to the N; for a mix, the path its probe asks for
    kind: str  # "connections", "pipelined" (connections, 16 requests per write) or "queries"
    accept: str
    # HttpArena's mixes: raw requests sent in turn, and every Nth request closes its connection.
    requests: tuple = ()
    close_every: int = 0
    delay_ms: int = 0  # each request waits this long: the level's ceiling is connections / delay
    one_worker: bool = False  # every server runs one worker thread or process

    def url_path(self, level):
        return f"{self.path}{level}" if self.kind == "queries" else self.path

    @property
    def level_name(self):
        return "N" if self.kind == "queries" else "connections"

    def ceiling_rps(self, connections):
        """What `connections` held requests of `delay_ms` each allow at most, per second."""
        return connections * 1000 / self.delay_ms if self.delay_ms else None


def raw_request(method, path, body=None, chunked=False):
    """An HTTP/1.1 request as HttpArena's load generator sends it (its requests/*.raw)."""
    head = [f"{method} {path} HTTP/1.1", "Host: localhost"]
    if body is None:
        return "\r\n".join(head) + "\r\n\r\n"
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}")
    payload = f"{len(body):x}\r\n{body}\r\n0\r\n\r\n" if chunked else body
    return "\r\n".join(head) + "\r\n\r\n" + payload


# HttpArena's baseline and limited-conn mix (requests/get.raw, post_cl.raw, post_chunked.raw): 55, 75, 75.
BASELINE_PATH = "/baseline11?a=13&b=42"
BASELINE_MIX = (
    raw_request("GET", BASELINE_PATH),
    raw_request("POST", BASELINE_PATH, "20"),
    raw_request("POST", BASELINE_PATH, "20", chunked=True),
)
# HttpArena's json profile: these (count, m) pairs in turn (requests/json-{count}.raw).
JSON_PAIRS = ((1, 3), (5, 7), (10, 2), (15, 5), (25, 4), (40, 8), (50, 6))
JSON_MIX = tuple(raw_request("GET", f"/json/{count}?m={m}") for count, m in JSON_PAIRS)
# gcannon's -r of each profile (HttpArena's scripts/lib/tools/gcannon.sh): limited-conn 10, json 25.
LIMITED_CONN_REQUESTS = 10
JSON_REQUESTS_PER_CONNECTION = 25
ASYNC_DELAY_MS = 10  # their scored async profile: GET /delay/10 (requests/async-delay.raw)
# HttpArena's async-db load (scripts/lib/tools/gcannon.sh, requests/async-db-{5,10,20,35,50}.raw):
# these limits over prices 10..50 in turn, a new connection every 25 requests (gcannon -r 25).
ASYNC_DB_LIMITS = (5, 10, 20, 35, 50)
ASYNC_DB_MIX = tuple(raw_request("GET", f"/async-db?min=10&max=50&limit={limit}") for limit in ASYNC_DB_LIMITS)
ASYNC_DB_REQUESTS_PER_CONNECTION = 25
# HttpArena's fortunes load: GET /fortunes alone on kept connections (requests/fortunes-get.raw).
ARENA_FORTUNES_MIX = (raw_request("GET", "/fortunes"),)

TESTS = {
    t.name: t
    for t in [
        Test("json", "/json", "connections", ACCEPT_JSON),
        Test("plaintext", "/plaintext", "pipelined", ACCEPT_PLAIN),
        Test("db", "/db", "connections", ACCEPT_JSON),
        Test("queries", "/queries?queries=", "queries", ACCEPT_JSON),
        Test("updates", "/updates?queries=", "queries", ACCEPT_JSON),
        Test("fortunes", "/fortunes", "connections", ACCEPT_HTML),
        Test("cached", "/cached-queries?count=", "queries", ACCEPT_JSON),
        # HttpArena's HTTP/1.1 profiles (../shared/httparena-spec.md).
        Test("baseline", BASELINE_PATH, "connections", ACCEPT_PLAIN, BASELINE_MIX),
        Test("pipelined", "/pipeline", "pipelined", ACCEPT_PLAIN),
        Test("limited-conn", BASELINE_PATH, "connections", ACCEPT_PLAIN, BASELINE_MIX, LIMITED_CONN_REQUESTS),
        Test("arena-json", "/json/1?m=3", "connections", ACCEPT_JSON, JSON_MIX, JSON_REQUESTS_PER_CONNECTION),
        Test("async", f"/delay/{ASYNC_DELAY_MS}", "connections", ACCEPT_PLAIN, delay_ms=ASYNC_DELAY_MS),
        # HttpArena's database profiles, against its database (DATABASE_URL); arena-fortunes is
        # their fortunes (200 rows), named apart from TFB's.
        Test("async-db", "/async-db?min=10&max=50&limit=50", "connections", ACCEPT_JSON, ASYNC_DB_MIX,
             ASYNC_DB_REQUESTS_PER_CONNECTION),  # fmt: skip
        Test("arena-fortunes", "/fortunes", "connections", ACCEPT_HTML, ARENA_FORTUNES_MIX),
        # The HTTP core against nginx: TFB's plaintext, one request in flight per connection.
        Test("plaintext-single", "/plaintext", "connections", ACCEPT_PLAIN),
        Test("plaintext-single-1worker", "/plaintext", "connections", ACCEPT_PLAIN, one_worker=True),
    ]
}
TEST_GROUPS = {
    "tfb": ["json", "plaintext", "db", "queries", "updates", "fortunes", "cached"],
    "httparena": ["baseline", "pipelined", "limited-conn", "arena-json", "async"],
    "arena-db": ["async-db", "arena-fortunes"],
    "nginx": ["plaintext-single", "plaintext-single-1worker"],
}

TFB_CONNECTION_LEVELS = [16, 32, 64, 128, 256, 512]
# HttpArena's connection counts (scripts/lib/profiles.sh), and the nginx bar's (issue 19). async:
# HttpArena holds 32,000; here one level the CPU can answer in time (512 / 10 ms = 51,200/s) and
# two far beyond it, the second near what Linux's default ephemeral ports allow (connection_capacity).
HTTPARENA_LEVELS = {
    "baseline": [512, 4096],
    "pipelined": [512, 4096],
    "limited-conn": [512, 4096],
    "arena-json": [4096],
    "async": [512, 10000, 14000],
    "async-db": [1024],
    "arena-fortunes": [1024],
    "plaintext-single": [100, 500],
    "plaintext-single-1worker": [50],
}
PROFILES = {
    # TFB's run-tests.py defaults and the sleeps of its concurrency/pipeline/query scripts.
    "tfb": {
        "duration": 15,
        "warmup": 15,
        "primer": 5,
        "pause_after_warmup": 5,
        "pause_between_levels": 2,
        "levels": {
            "json": TFB_CONNECTION_LEVELS,
            "db": TFB_CONNECTION_LEVELS,
            "fortunes": TFB_CONNECTION_LEVELS,
            "plaintext": [256, 1024, 4096, 16384],
            "queries": [1, 5, 10, 15, 20],
            "updates": [1, 5, 10, 15, 20],
            "cached": [1, 10, 20, 50, 100],
            **HTTPARENA_LEVELS,
        },
    },
    # A couple of minutes for all seven tests: a low and the top level of each.
    "quick": {
        "duration": 5,
        "warmup": 2,
        "primer": 1,
        "pause_after_warmup": 1,
        "pause_between_levels": 0.5,
        "levels": {
            "json": [64, 512],
            "db": [64, 512],
            "fortunes": [64, 512],
            "plaintext": [256, 1024],
            "queries": [1, 20],
            "updates": [1, 20],
            "cached": [1, 100],
            **HTTPARENA_LEVELS,
        },
    },
}


# ---------------------------------------------------------------- anchors


def shared_path(*parts, environ=os.environ):
    """A path in the project's shared directory: $GNOSIS_SHARED_DIR, else `shared` beside the
    checkout (../shared), where the competitors' binaries are."""
    return Path(environ.get("GNOSIS_SHARED_DIR") or REPO.parent / "shared").joinpath(*parts)


# TFB's top Rust entries, prebuilt (see ../shared/anchors/README.md). Each listens on
# 0.0.0.0:8080 only, takes no arguments and, if it has database tests, connects at start-up to
# tfb-database:5432 as TFB's containers do.
DEFAULT_ANCHORS_DIR = shared_path("anchors", "bin")
# HttpArena's Rust engines, prebuilt (../shared/anchors/httparena/README.md): bin/NAME, 8080.
DEFAULT_HTTPARENA_DIR = shared_path("anchors", "httparena")
ANCHOR_PREFIX = "anchor:"
ANCHOR_PORT = 8080
DB_TESTS = ("db", "queries", "updates", "fortunes")
ARENA_DB_TESTS = ("async-db", "arena-fortunes")  # against HttpArena's database
# The anchors' N-query URLs differ from TFB's benchmark_config ones (?queries=N).
ANCHOR_PATHS = {"queries": "/queries?q=", "updates": "/updates?q="}
RULE_7_NOTE = (
    "puts all of a request's queries under one Sync, which TFB's rule 7 forbids: its numbers "
    "here are not a legal bar (../shared/anchors.md)"
)
KEPT_OPEN_NOTE = (
    "kept its connections open after `Connection: close` (wrk reconnected after {closed:.0%} of them; "
    "{per_connection:,.1f} requests per connection, not {close_every}): it skipped the reconnections "
    "this test measures, so its number here is no bar"
)
FIRST_REQUEST_NOTE = (
    "answers every request of a pipelined read with the response to the first one (a "
    "pipelined /plaintext then /db gets two Hello, World!): it does not parse each request, so "
    "its plaintext is no bar for a server that does (docs/BENCHMARKS.md)"
)


@dataclass(frozen=True)
class Anchor:
    name: str
    tests: tuple  # the tests it serves; cached queries: none of them
    # The tests it serves against TFB's rules, each with why: its numbers there are no bar.
    not_a_legal_bar: dict = field(default_factory=dict)
    venue: str = "tfb"  # whose entry: "tfb" (--anchors-dir) or "httparena" (--httparena-dir)
    binary: str = None  # its file name, if not its name
    ports: tuple = (ANCHOR_PORT,)  # every port it binds (the first serves the tests)

    def path(self, anchors_dir, httparena_dir):
        if self.venue == "httparena":
            return Path(httparena_dir) / "bin" / (self.binary or self.name)
        return Path(anchors_dir) / (self.binary or self.name)

    @property
    def needs_database(self):
        return any(t in DB_TESTS for t in self.tests)

    def url_path(self, test, level):
        if test.name in ANCHOR_PATHS:
            return f"{ANCHOR_PATHS[test.name]}{level}"
        return test.url_path(level)


HTTPARENA_H1 = ("baseline", "pipelined", "limited-conn")
ANCHORS = {
    a.name: a
    for a in [
        Anchor("may-minihttp", ("json", "plaintext") + DB_TESTS),
        Anchor("xitca-web", ("json", "plaintext") + DB_TESTS),
        Anchor(
            "vortex",
            ("json", "plaintext") + DB_TESTS,
            not_a_legal_bar={"queries": RULE_7_NOTE, "updates": RULE_7_NOTE, "plaintext": FIRST_REQUEST_NOTE},
        ),
        Anchor("faf", ("plaintext",)),
        # HttpArena's engines: the profiles of their meta.json `tests` that `scripts/tool bench` runs.
        Anchor("rust-epoll", HTTPARENA_H1, venue="httparena"),
        Anchor("tokio", HTTPARENA_H1, venue="httparena"),
        Anchor("hyper", HTTPARENA_H1, venue="httparena"),
        Anchor("may-minihttp-arena", HTTPARENA_H1, venue="httparena", binary="may-minihttp"),
        # sark (a wrapper script) also binds 8081 (json-tls), 8082 (h2c) and 8443 (h2).
        Anchor(
            "sark", HTTPARENA_H1 + ("arena-json",) + ARENA_DB_TESTS, venue="httparena",
            ports=(ANCHOR_PORT, 8081, 8082, 8443),
        ),  # fmt: skip
    ]
}
ANCHOR_GROUPS = {venue: [a for a in ANCHORS.values() if a.venue == venue] for venue in ("tfb", "httparena")}

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
PG_SH = REPO / "scripts" / "pg.sh"
DATASET = REPO / "data" / "dataset.json"


# ---------------------------------------------------------------- command line


def add_arguments(p):
    groups = "; ".join(f"{group}: {','.join(tests)}" for group, tests in TEST_GROUPS.items())
    p.add_argument(
        "--server",
        default=f"{REPO}/target/release/gnosis --port {{port}}",
        help="server command line, run by /bin/sh, {port} replaced by the port; or anchor:NAME "
        f"for one of TFB's entries ({', '.join(ANCHORS)}) (default: %(default)s)",
    )
    p.add_argument("--name", help="label of --server in the tables (default: its program or anchor name)")
    p.add_argument("--baseline", help="a second server (command line or anchor:NAME), run alternately with --server")
    p.add_argument(
        "--baseline-name", help="label of --baseline (default: the anchor's name, or 'baseline')"
    )
    p.add_argument(
        "--anchors",
        metavar="NAME,NAME|tfb|httparena|all",
        help=f"more servers: these anchors ({', '.join(ANCHORS)}; tfb: TFB's, httparena: HttpArena's "
        "engines), each run alternately with --server (and --baseline) on the tests it serves; "
        "ratios are --server over each of them",
    )
    p.add_argument(
        "--anchors-dir",
        default=str(DEFAULT_ANCHORS_DIR),
        help="where TFB's anchors' binaries are ($GNOSIS_SHARED_DIR/anchors/bin, default: %(default)s)",
    )
    p.add_argument(
        "--httparena-dir",
        default=str(DEFAULT_HTTPARENA_DIR),
        help="where HttpArena's engines are, in bin/ ($GNOSIS_SHARED_DIR/anchors/httparena, default: %(default)s)",
    )
    p.add_argument(
        "--nginx",
        action="store_true",
        help="one more server: Debian's nginx (nginx-light), configured here, on the nginx tests "
        f"({', '.join(TEST_GROUPS['nginx'])})",
    )
    p.add_argument(
        "--port",
        type=int,
        help=f"port of --server (default: 8080, or the first port above {ANCHOR_PORT} that no anchor "
        f"binds when an anchor, always on {ANCHOR_PORT}, is in the run)",
    )
    p.add_argument("--baseline-port", type=int, help="port of --baseline (default: --port + 1)")
    p.add_argument("--nginx-port", type=int, help="port of --nginx (default: the next one after --baseline-port)")
    p.add_argument(
        "--tests",
        default="tfb",
        help=f"comma-separated tests or groups ({groups}) (default: %(default)s)",
    )
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick", help="(default: %(default)s)")
    p.add_argument("--duration", type=int, help="seconds per level (profile default)")
    p.add_argument("--warmup", type=int, help="seconds of warm-up at the top level (profile default)")
    p.add_argument("--primer", type=int, help="seconds of primer at 8 connections (profile default)")
    p.add_argument(
        "--levels",
        action="append",
        default=[],
        metavar="[TEST=]L1,L2,...",
        help="levels (connections, or N for queries/updates/cached); repeatable; "
        "without TEST= they apply to every selected test",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=512,
        help="connections of the warm-up and of every query-test level (default and TFB: %(default)s)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        help="runs of each level per server (default 1, or 4 with --baseline: an even number lets "
        "each server go first equally often)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="wrk threads; a level uses min(threads, connections) (default: nproc, %(default)s, as TFB)",
    )
    p.add_argument(
        "--out", default=str(REPO / "results"), help="a timestamped folder is made in it (default: %(default)s)"
    )
    p.add_argument(
        "--startup-timeout", type=float, default=60.0, help="seconds to wait for a server's port (default: %(default)s)"
    )


def parse_args(argv):
    """The options of `scripts/tool bench ARGV`, settled."""
    parser = argparse.ArgumentParser(prog="scripts/tool bench")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return settle(args)
    except ValueError as e:
        parser.error(str(e))


def settle(args):
    """Groups expanded, the profile's values where no option was given, the servers of the run;
    ValueError for options that do not go together."""
    args.tests = expand_tests(args.tests)
    unknown = [t for t in args.tests if t not in TESTS]
    if unknown or not args.tests:
        raise ValueError(f"unknown test(s) {unknown}; choose from {','.join(TESTS)} or the groups {','.join(TEST_GROUPS)}")
    if set(args.tests) & set(ARENA_DB_TESTS) and set(args.tests) & set(DB_TESTS):
        # A server started with DATABASE_URL finds HttpArena's database, not TFB's.
        raise ValueError(f"{','.join(ARENA_DB_TESTS)} (HttpArena's database) and {','.join(DB_TESTS)} (TFB's) need "
                "different databases: run them in separate runs")  # fmt: skip
    profile = PROFILES[args.profile]
    for key in ("duration", "warmup", "primer"):
        if getattr(args, key) is None:
            setattr(args, key, profile[key])
    args.pause_after_warmup = profile["pause_after_warmup"]
    args.pause_between_levels = profile["pause_between_levels"]
    args.levels = resolve_levels(args.tests, profile["levels"], args.levels)
    args.specs = server_specs(args)
    if args.rounds is None:
        args.rounds = 4 if len(args.specs) > 1 else 1
    if min(args.duration, args.warmup, args.primer, args.rounds, args.threads, args.max_concurrency) < 1:
        raise ValueError("--duration, --warmup, --primer, --rounds, --threads and --max-concurrency must be >= 1")
    commands = [s for s in args.specs if s.anchor is None]
    if len({s.port for s in commands}) < len(commands):
        raise ValueError("--port, --baseline-port and --nginx-port must differ")
    return args


def expand_tests(text):
    """The tests of a --tests list, each group replaced by its tests, each test once, in order."""
    tests = []
    for word in (w.strip() for w in text.split(",")):
        for test in TEST_GROUPS.get(word, [word] if word else []):
            if test not in tests:
                tests.append(test)
    return tests


@dataclass(frozen=True)
class ServerSpec:
    """One server of the run: a command line (with its port), or an anchor (always on 8080)."""

    name: str
    command: str  # the command line, or the anchor's binary
    port: int
    anchor: Anchor = None
    tests: tuple = None  # the tests it serves, if not all (an anchor: its own)
    one_worker_command: str = None  # the command line for the one-worker tests, if it has one


def anchor_named(name):
    if name not in ANCHORS:
        raise ValueError(f"unknown anchor {name!r}; the anchors are {', '.join(ANCHORS)}")
    return ANCHORS[name]


def parse_anchor_list(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("--anchors: name at least one anchor, or tfb, httparena or all")
    anchors = []
    for name in names:
        group = list(ANCHORS.values()) if name == "all" else ANCHOR_GROUPS.get(name) or [anchor_named(name)]
        anchors += [a for a in group if a not in anchors]
    return anchors


def server_specs(args):
    """The servers in run order: --server, --baseline, then each of --anchors."""
    wanted = [(args.server, args.name, "server"), (args.baseline, args.baseline_name, "baseline")]
    anchors_dir = Path(args.anchors_dir)
    chosen = []  # (name or None, command or None, anchor or None, role)
    for text, name, role in wanted:
        if text is None:
            continue
        if text.startswith(ANCHOR_PREFIX):
            chosen.append((name, None, anchor_named(text[len(ANCHOR_PREFIX):].strip()), role))
        else:
            chosen.append((name, text, None, role))
    for anchor in parse_anchor_list(args.anchors) if args.anchors else []:
        chosen.append((None, None, anchor, "anchor"))

    anchor_ports = {port for _, _, anchor, _ in chosen if anchor for port in anchor.ports}
    if args.port is None:
        args.port = next(p for p in range(ANCHOR_PORT + 1, 65536) if p not in anchor_ports) if anchor_ports else 8080
    if args.baseline_port is None:
        args.baseline_port = args.port + 1
    if args.nginx_port is None:
        args.nginx_port = next(p for p in range(args.baseline_port + 1, 65536) if p not in anchor_ports | {args.port})
    specs, taken = [], set()
    for name, command, anchor, role in chosen:
        if anchor:
            name = name or anchor.name
            spec = ServerSpec(name, str(anchor.path(anchors_dir, args.httparena_dir)), ANCHOR_PORT, anchor, anchor.tests)
        else:
            name = name or (program_name(command) if role == "server" else "baseline")
            port = args.port if role == "server" else args.baseline_port
            # The one-worker tests run it with --threads 1, as gnosis takes it.
            spec = ServerSpec(name, command.replace("{port}", str(port)), port,
                              one_worker_command=f"{command.replace('{port}', str(port))} --threads 1")  # fmt: skip
        if spec.name in taken:  # the same program twice: keep the labels apart
            number = 2
            while f"{spec.name} #{number}" in taken:
                number += 1
            spec = dataclasses.replace(spec, name=f"{spec.name} #{number}")
        taken.add(spec.name)
        specs.append(spec)
    if args.nginx:
        specs.append(ServerSpec("nginx", nginx_command(NGINX_CONF), args.nginx_port, tests=tuple(TEST_GROUPS["nginx"]),
                                one_worker_command=nginx_command(NGINX_ONE_WORKER_CONF)))  # fmt: skip
    return specs


def resolve_levels(tests, profile_levels, overrides):
    """Profile levels per test, replaced by `--levels [TEST=]L1,L2` overrides (later wins)."""
    levels = {t: list(profile_levels[t]) for t in tests}
    for spec in overrides:
        target, _, values = spec.rpartition("=")
        try:
            parsed = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"--levels {spec!r}: levels must be integers") from None
        if not parsed or min(parsed) < 1:
            raise ValueError(f"--levels {spec!r}: need at least one level, each >= 1")
        if target and target not in TESTS:
            raise ValueError(f"--levels {spec!r}: unknown test {target!r}")
        for t in [target] if target else tests:
            if t in levels:
                levels[t] = parsed
    return levels


def program_name(command):
    """The label for a server: the basename of the first word that is not an env assignment."""
    for word in shlex.split(command):
        if word == "env" or ("=" in word and not word.startswith("-")):
            continue
        return os.path.basename(word)
    return "server"


# ---------------------------------------------------------------- environment


def ensure_installed(command, package):
    """The command, installed from Debian's package if missing and this runs as root."""
    if shutil.which(command):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SetupError(f"{command} is missing: install it (Debian: apt-get install -y {package})")
    print(f"{command} is missing: installing {package} with apt-get", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", package], check=True, env=env)
    if not shutil.which(command):
        raise SetupError(f"apt-get install {package} did not provide a {command} command")


# What wrk and a server need beyond their connections: listeners, logs, rings, epoll, pipes.
SPARE_FILES = 256


def raise_open_files_limit(connections=0):
    """wrk and the servers inherit this: 16,384 connections need more than the usual 1,024.
    Up to the hard limit, or, where allowed (root), beyond it to what `connections` need."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + SPARE_FILES
    if hard != resource.RLIM_INFINITY and hard < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))
            soft, hard = wanted, wanted
        except (ValueError, OSError):
            pass  # not allowed: the hard limit stays, and connection_capacity says so
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def ephemeral_ports():
    """How many local ports connect() may pick from (net.ipv4.ip_local_port_range)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return None
    return high - low + 1


def connection_capacity(open_files):
    """(the most connections wrk can hold open to one server here, and what sets it)."""
    limits = [(open_files - SPARE_FILES, f"the open-files limit ({open_files}, less {SPARE_FILES} spare)")]
    ports = ephemeral_ports()
    if ports:
        # connect() takes ports of one parity first (Linux >= 4.6): beyond that half, each
        # connect scans the whole half first, and wrk needs tens of seconds to connect.
        limits.append((ports // 2, f"half the ephemeral ports (net.ipv4.ip_local_port_range: {ports}), "
                                   "those connect() picks first"))  # fmt: skip
    return min(limits)


def machine_info():
    model = cpu_model()
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "kernel": platform.release(),
        "wrk": wrk_version[0].split(" Copyright")[0].strip() if wrk_version else "unknown",
        "git_commit": git_commit(),
    }


def database_settings():
    """The PG* variables the servers inherit, password left out."""
    names = ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE")
    return " ".join(f"{n}={os.environ[n]}" for n in names if os.environ.get(n))


def git_commit():
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


# ---------------------------------------------------------------- server process


def postgres_cpu_ticks():
    """utime + stime of each PostgreSQL process on the machine (comm `postgres`), by pid: the
    backends the servers' queries run in, whichever cluster they use."""
    return {pid: ticks for pid, (name, _, _, ticks) in proc_stats() if name == "postgres"}


def proc_stats():
    """(pid, read_proc_stat) of every process on the machine, but those that end meanwhile."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            yield int(entry), read_proc_stat(entry)
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked


def ticks_since(before, after):
    """CPU ticks spent between two snapshots by the processes of the second: one that started
    in between counts whole; one that ended in between is lost (its time left /proc with it)."""
    return sum(max(0, ticks - before.get(pid, 0)) for pid, ticks in after.items())


def read_status_kib(pid, field):
    """A size field of /proc/PID/status, e.g. VmHWM: (peak RSS) or VmRSS:, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


# How long a port held by no visible process may take to be released.
PORT_RELEASE_WAIT = 15


class Server:
    """A server started in its own session; its CPU and memory are those of every process in it.

    A command line runs under /bin/sh; an anchor's binary (or wrapper script) runs directly,
    without arguments. It can be stopped and started again (anchors sharing port 8080 take turns).
    """

    def __init__(self, name, command, host, port, log_path, anchor=None, env=None, tests=None, one_worker_command=None):
        self.name = name
        self.command = command.replace("{port}", str(port))
        self.host = host
        self.port = port
        self.log_path = log_path
        self.anchor = anchor
        self.env = env  # added to the inherited environment
        self.tests = anchor.tests if anchor and tests is None else tests  # None: every test
        self.one_worker_command = one_worker_command and one_worker_command.replace("{port}", str(port))
        self.one_worker = False  # whether it runs (or last ran) its one-worker command
        self.process = None
        self.stopped = True  # not started yet, or stopped on purpose
        self.starts = 0
        self.peak_reset_works = True
        self.rss_at_start_kib = None  # once it opened its port, before any load

    def serves(self, test):
        if test.one_worker and not self.one_worker_command:
            return False
        return self.tests is None or test.name in self.tests

    def url_path(self, test, level):
        return self.anchor.url_path(test, level) if self.anchor else test.url_path(level)

    def is_up(self):
        """Started and not stopped on purpose (it may have died since: check_alive says so)."""
        return self.process is not None and not self.stopped

    def start(self, timeout, one_worker=False):
        owner = port_in_use(self.port)
        # A server that just exited may hold its port a little longer: an io_uring server's
        # sockets live until the kernel has torn its rings down, after the process is gone.
        deadline = time.monotonic() + PORT_RELEASE_WAIT
        while owner and not port_owners(self.port) and time.monotonic() < deadline:
            time.sleep(0.2)
            owner = port_in_use(self.port)
        if owner:
            raise SetupError(
                f"port {self.port} is already in use ({owner}): refusing to start {self.name} "
                "or to benchmark whatever listens there"
            )
        self.starts += 1
        self.one_worker = one_worker
        command = self.one_worker_command if one_worker else self.command
        with open(self.log_path, "ab") as log:
            log.write(f"--- bench: start {self.starts} of {self.name}: {command}\n".encode())
            log.flush()
            print(f"starting {self.name}: {command}", flush=True)
            env = dict(os.environ, **self.env) if self.env else None
            argv, shell = (command, True) if self.anchor is None else ([command], False)
            try:
                self.process = subprocess.Popen(
                    argv, shell=shell, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            except OSError as e:
                raise SetupError(f"cannot start {self.name} ({command}): {e}") from None
        self.stopped = False
        deadline = time.monotonic() + timeout
        while not port_open(self.host, self.port):
            if self.process.poll() is not None:
                self.stopped = True
                raise SetupError(self.death_notice("exited before it opened its port"))
            if time.monotonic() > deadline:
                raise SetupError(f"{self.name} did not open port {self.port} within {timeout:.0f} s; see {self.log_path}")
            time.sleep(0.1)
        self.rss_at_start_kib = self.rss_kib()

    def check_alive(self):
        if self.process is not None and not self.stopped and self.process.poll() is not None:
            self.stopped = True
            raise SetupError(self.death_notice("died during the run; its numbers for this test are void"))

    def death_notice(self, what):
        """What to tell about a server that exited on its own: how, and why SIGILL matters."""
        notice = f"{self.name} {what} ({exit_description(self.process.returncode, self.anchor is None)})"
        if exit_signal(self.process.returncode, self.anchor is None) == signal.SIGILL:
            notice += (
                f". SIGILL is an illegal instruction: this machine's CPU ({cpu_model()}) lacks one that "
                "the binary was compiled for (the anchors are built with -C target-cpu=native on "
                "another machine): rebuild it on this CPU"
            )
        tail = log_tail(self.log_path)
        return notice + (f"; the end of {self.log_path}:\n{tail}" if tail else f"; see {self.log_path}")

    def stop(self):
        """Stop every process of the server's group, also when its first process already died."""
        if self.process is None:
            return
        self.stopped = True
        if self.process.poll() is not None and not self.pids():
            return  # already gone, every process of it
        group = self.process.pid
        self.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:
            self.process.poll()  # reap the first process, so that it stops counting
            time.sleep(0.1)
        if self.pids():
            print(f"{self.name} ignored SIGTERM for 10 s: killing process group {group}", flush=True)
            self.signal_group(signal.SIGKILL)
        self.process.wait()

    def signal_group(self, signum):
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass  # every process of the group has exited

    def pids(self, measured_only=False):
        """The live processes of the server's session; `measured_only` leaves out the /bin/sh
        that runs the command line while it waits for the server (its memory is not the server's)."""
        session = self.process.pid
        found = []
        for pid, (name, state, sid, _) in proc_stats():
            if sid != session or state == "Z":
                continue
            if measured_only and pid == session and name == "sh":
                continue
            found.append(pid)
        return found

    def processes(self):
        """`name[pid] N threads` of each measured process: what the CPU and RSS figures cover."""
        found = []
        if self.process is None:
            return found
        for pid in self.pids(measured_only=True):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    text = f.read()
                threads = text[text.rindex(")") + 2 :].split()[17]
                found.append(f"{read_proc_stat(pid)[0]}[{pid}] {threads} threads")
            except (OSError, ValueError, IndexError):
                continue
        return found

    def cpu_ticks(self):
        total = 0
        for pid in self.pids(measured_only=True):
            try:
                total += read_proc_stat(pid)[3]
            except (OSError, ValueError, IndexError):
                continue
        return total

    def reset_peak_rss(self):
        """Restart VmHWM from the current RSS (Linux >= 4.0), so that a peak belongs to one run."""
        for pid in self.pids(measured_only=True):
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                self.peak_reset_works = False

    def peak_rss_kib(self):
        """Sum over the session's processes of their peak RSS (one process for gnosis)."""
        return self.sum_status_field("VmHWM:")

    def rss_kib(self):
        """Sum over the session's processes of their RSS now."""
        return self.sum_status_field("VmRSS:")

    def sum_status_field(self, field):
        total = 0
        for pid in self.pids(measured_only=True):
            try:
                total += read_status_kib(pid, field)
            except (OSError, ValueError):
                continue
        return total


def exit_signal(returncode, via_shell):
    """The signal that ended a process, from Popen's returncode (a shell reports 128 + N)."""
    if returncode is None:
        return None
    number = -returncode if returncode < 0 else returncode - 128 if via_shell and 128 < returncode < 160 else None
    try:
        return signal.Signals(number) if number else None
    except ValueError:
        return None


def exit_description(returncode, via_shell):
    sig = exit_signal(returncode, via_shell)
    return f"killed by {sig.name}" if sig else f"exit status {returncode}"


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def probe(host, port, path, accept):
    """One plain request before the load: a test the server lacks fails here, clearly."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": "localhost", "Accept": accept})
        response = conn.getresponse()
        body = response.read()
        return response.status, len(body)
    finally:
        conn.close()


# ---------------------------------------------------------------- wrk


def wrk_command(url, connections, threads, duration, accept, pipelined, mix=None):
    """The command line of TFB's concurrency/pipeline/query scripts, plus our reporting script;
    with a `mix` (raw requests, close every N), mix.lua sends those requests in turn instead."""
    script = MIX_LUA if mix else PIPELINE_LUA if pipelined else REPORT_LUA
    command = [
        "wrk",
        "-H", "Host: localhost",
        "-H", f"Accept: {accept}",
        "-H", "Connection: keep-alive",
        "--latency",
        "-d", str(duration),
        "-c", str(connections),
        "--timeout", str(WRK_TIMEOUT_S),
        "-t", str(threads),
        "-s", str(script),
        url,
    ]  # fmt: skip
    if mix:
        requests, close_every = mix
        command += ["--", str(close_every)] + [r.replace("\r\n", "\\r\\n") for r in requests]
    elif pipelined:
        command += ["--", str(PIPELINE_DEPTH)]
    return command


def tcp_active_opens():
    """The TCP connections opened so far by this network namespace (Tcp ActiveOpens)."""
    lines = [line.split() for line in Path("/proc/net/snmp").read_text().splitlines() if line.startswith("Tcp:")]
    return int(lines[1][lines[0].index("ActiveOpens")])


def parse_wrk_output(stdout):
    """The summary that report.lua prints after the run, with requests/s and error totals added."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(JSON_MARKER):
            summary = json.loads(line[len(JSON_MARKER) :])
            break
    else:
        raise ValueError("wrk printed no summary line (did report.lua run?)")
    latency = summary["latency_us"]
    for key in ("p50", "p75", "p90", "p99"):
        # wrk's percentile() returns 0 when its coordinated-omission correction put samples below
        # the minimum it scans from (seen with pipelining at high connection counts): unknown.
        if latency[key] == 0 and summary["requests"] > 0:
            latency[key] = None
    seconds = summary["duration_us"] / 1e6
    summary["requests_per_s"] = summary["requests"] / seconds if seconds > 0 else 0.0
    errors = summary["errors"]
    # A server may close a connection after answering its `Connection: close` request without
    # saying so in the answer (RFC 9112 allows it); wrk counts each such close as a read error.
    summary["closes"] = summary.get("closes", 0)
    read_errors = max(0, errors["read"] - summary["closes"])
    summary["socket_errors"] = errors["connect"] + read_errors + errors["write"] + errors["timeout"]
    summary["non_2xx"] = errors["status"]
    return summary


def run_wrk(server, url, connections, threads, duration, accept, pipelined, mix=None):
    """One wrk run against `server`, with the server's CPU time, peak RSS, and the CPU time of
    PostgreSQL and of wrk itself: on one machine the three share the cores."""
    command = wrk_command(url, connections, threads, duration, accept, pipelined, mix)
    server.check_alive()
    server.reset_peak_rss()
    opened_before = tcp_active_opens()
    ticks_before = server.cpu_ticks()
    postgres_before = postgres_cpu_ticks()
    own_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        raise SetupError(f"wrk did not finish: {shlex.join(command)}") from None
    wall = time.monotonic() - started
    own_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (server.cpu_ticks() - ticks_before) / os.sysconf("SC_CLK_TCK")
    postgres_cpu_s = ticks_since(postgres_before, postgres_cpu_ticks()) / os.sysconf("SC_CLK_TCK")
    wrk_cpu_s = (own_after.ru_utime - own_before.ru_utime) + (own_after.ru_stime - own_before.ru_stime)
    peak_rss_kib = server.peak_rss_kib()
    opened = tcp_active_opens() - opened_before
    server.check_alive()
    if done.returncode != 0:
        raise SetupError(f"wrk failed ({done.returncode}): {shlex.join(command)}\n{done.stderr.strip()}")
    summary = parse_wrk_output(done.stdout)
    run = {
        "command": shlex.join(command),
        "connections": connections,
        "threads": threads,
        "summary": summary,
        "server_cpu_s": round(cpu_s, 2),
        "server_cpu_percent": round(100 * cpu_s / wall, 1),
        # Requests per second of server CPU: on a shared machine much steadier than requests/s.
        "requests_per_cpu_s": round(summary["requests"] / cpu_s) if cpu_s > 0 else None,
        "server_peak_rss_kib": peak_rss_kib,
        "server_rss_at_start_kib": server.rss_at_start_kib,
        # TCP connections this network namespace opened meanwhile: wrk's, and a few of others'.
        "connections_opened": opened,
        "postgres_cpu_percent": round(100 * postgres_cpu_s / wall, 1),
        "postgres_cpu_s": round(postgres_cpu_s, 2),
        "wrk_cpu_s": round(wrk_cpu_s, 2),
        "wrk_cpu_percent": round(100 * wrk_cpu_s / wall, 1),
        "wall_s": round(wall, 2),
        "wrk_output": done.stdout,
    }
    return run


# ---------------------------------------------------------------- running the tests


def rotated(servers, round_no):
    """Round 1: A B C, round 2: B C A, round 3: C A B ...: each server goes first equally often
    (with two servers: A B, B A), so that slow drift of the machine hits all alike."""
    k = (round_no - 1) % len(servers)
    return servers[k:] + servers[:k]


def run_test(test, servers, args, log, lineup=None):
    """One test, alternating the servers that serve it; the record of every wrk run.

    Servers with ports of their own run side by side: primer and warm-up of each, then each
    level, round by round, one run per server. Servers that share a port (the anchors' 8080)
    take turns instead: per round, each in turn is started if need be, primed, warmed up and
    run at every level. `lineup` starts and stops them (None: they are up already). A server
    that dies raises SetupError with the test's record, marked failed, as `error.record`.
    """
    levels = args.levels[test.name]
    record = {"test": test.name, "level_name": test.level_name, "levels": levels, "servers": {}, "skipped": {}}
    taking_part = []
    for server in servers:
        if server.serves(test):
            taking_part.append(server)
            record["servers"][server.name] = {"runs": [], "probe": None}
        else:
            record["skipped"][server.name] = f"{server.name} does not serve {test.name}"
            log(f"--- {test.name}: {server.name} does not serve it: left out, its ratio is –")
    if not taking_part:
        record["not_served"] = True
        log(f"--- {test.name}: no server of this run serves it")
        return record
    try:
        if len({s.port for s in taking_part}) == len(taking_part):
            run_side_by_side(test, taking_part, levels, record, args, log, lineup)
        else:
            if lineup is None:
                raise SetupError("servers sharing a port need a lineup to take turns")
            run_in_turns(test, taking_part, levels, record, args, log, lineup)
    except SetupError as e:
        record["failed"] = str(e)
        e.record = record
        raise
    return record


def probe_server(test, server, path, record, log):
    """True if the server answers 200 to `path`; else marks the test failed (but not the run)."""
    try:
        status, length = probe(server.host, server.port, path, test.accept)
    except (OSError, http.client.HTTPException) as e:
        server.check_alive()
        status, length = f"no answer ({e})", 0
    record["servers"][server.name]["probe"] = {"status": status, "body_bytes": length}
    if status != 200:
        record["failed"] = f"{server.name} answered {status} to {path}"
        log(f"!!! {test.name}: {record['failed']}; skipping this test")
        return False
    return True


def measure(test, server, record, args, log, phase, level, round_no):
    """One wrk run: primer (8 connections), warm-up (the top concurrency) or a level."""
    if phase == "level":
        path = server.url_path(test, level)
        connections = args.max_concurrency if test.kind == "queries" else level
        duration, pipelined = args.duration, test.kind == "pipelined"
    else:
        # TFB primes and warms up the query tests with N = 2, and plaintext without pipelining.
        path = server.url_path(test, QUERY_WARMUP_N) if test.kind == "queries" else test.path
        connections = PRIMER_CONNECTIONS if phase == "primer" else args.max_concurrency
        duration, pipelined = (args.primer if phase == "primer" else args.warmup), False
    threads = min(connections, args.threads)
    url = f"http://{server.host}:{server.port}{path}"
    # A mix primes and warms up with itself: its requests are the test.
    mix = (test.requests, test.close_every) if test.requests else None
    run = run_wrk(server, url, connections, threads, duration, test.accept, pipelined, mix=mix)
    run.update(phase=phase, level=level, round=round_no, path=path, processes=server.processes())
    record["servers"][server.name]["runs"].append(run)
    s = run["summary"]
    trouble = s["socket_errors"] or s["non_2xx"]
    log(
        f"{'!!! ' if trouble else ''}{test.name:9} {server.name:>12} {phase:7} "
        f"{test.level_name}={level if level is not None else '-':<5} c={connections:<5} "
        f"{s['requests_per_s']:>12,.0f} req/s  p99 {format_latency(s['latency_us']['p99']):>9}  "
        f"cpu {run['server_cpu_percent']:5.0f}%  errors {s['socket_errors']}  non-2xx {s['non_2xx']}"
    )


def run_side_by_side(test, servers, levels, record, args, log, lineup):
    if lineup:
        lineup.bring_up(servers, test.one_worker)
    for server in servers:
        if not probe_server(test, server, server.url_path(test, levels[0]), record, log):
            return
    for server in servers:
        measure(test, server, record, args, log, "primer", None, 0)
        measure(test, server, record, args, log, "warmup", None, 0)
    time.sleep(args.pause_after_warmup)
    for level in levels:
        for round_no in range(1, args.rounds + 1):
            for server in rotated(servers, round_no):
                measure(test, server, record, args, log, "level", level, round_no)
                time.sleep(args.pause_between_levels)


def run_in_turns(test, servers, levels, record, args, log, lineup):
    for round_no in range(1, args.rounds + 1):
        for server in rotated(servers, round_no):
            lineup.bring_up([server], test.one_worker)
            if not probe_server(test, server, server.url_path(test, levels[0]), record, log):
                return
            measure(test, server, record, args, log, "primer", None, round_no)
            measure(test, server, record, args, log, "warmup", None, round_no)
            time.sleep(args.pause_after_warmup)
            for level in levels:
                measure(test, server, record, args, log, "level", level, round_no)
                time.sleep(args.pause_between_levels)


class Lineup:
    """Starts the servers a test needs; a server whose port another one holds waits for it to stop."""

    def __init__(self, servers, timeout, log):
        self.servers = servers
        self.timeout = timeout
        self.log = log

    def bring_up(self, wanted, one_worker=False):
        """Each wanted server up, with one worker or its usual number (restarted to change)."""
        for server in wanted:
            for other in self.servers:
                if other is not server and other.port == server.port and other.is_up():
                    other.check_alive()
                    self.log(f"--- stopping {other.name}: {server.name} needs port {server.port}")
                    other.stop()
            if server.is_up():
                server.check_alive()
                if server.one_worker == one_worker:
                    continue
                self.log(f"--- restarting {server.name} with {'one worker' if one_worker else 'its usual workers'}")
                server.stop()
            server.start(self.timeout, one_worker)
            self.log(f"--- {server.name} is up on port {server.port}: {', '.join(server.processes())}")

    def stop_all(self):
        for server in self.servers:
            server.stop()


# ---------------------------------------------------------------- nginx

# nginx's command lines before the run has a directory for it (then NGINX_DIR is replaced).
NGINX_DIR = "{nginx_dir}"
NGINX_CONF = "nginx.conf"
NGINX_ONE_WORKER_CONF = "nginx-1worker.conf"
PLAINTEXT_BODY = "Hello, World!"  # gnosis's /plaintext
NGINX_WORKER_CONNECTIONS = 8192


def nginx_command(conf):
    return f"exec nginx -p {NGINX_DIR}/ -c {NGINX_DIR}/{conf}"


def nginx_config(port, workers, directory):
    """The bar of issue 19: `return 200` of /plaintext's body, `workers` worker processes,
    sendfile, tcp_nodelay, no access log, keep-alive without a request limit (nginx closes a
    connection after 1,000 requests by default: gnosis does not)."""
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp = "\n".join(f"    {kind}_temp_path {directory}/{kind};" for kind in kinds)
    return f"""# Written by scripts/tool bench for one run.
daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile {2 * NGINX_WORKER_CONNECTIONS};
pid {directory}/nginx.pid;
error_log stderr warn;

events {{
    worker_connections {NGINX_WORKER_CONNECTIONS};
}}

http {{
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests {2**31 - 1};
{temp}

    server {{
        listen {LOOPBACK}:{port} reuseport backlog=4096;
        location = /plaintext {{
            default_type text/plain;
            return 200 "{PLAINTEXT_BODY}";
        }}
        location / {{
            return 404;
        }}
    }}
}}
"""


def write_nginx_configs(directory, port):
    """Both configurations (a worker per core, and one worker) in `directory`, each checked by
    `nginx -t`."""
    cores = len(os.sched_getaffinity(0))
    for name, workers in ((NGINX_CONF, cores), (NGINX_ONE_WORKER_CONF, 1)):
        path = Path(directory) / name
        path.write_text(nginx_config(port, workers, directory))
        done = subprocess.run(["nginx", "-t", "-p", f"{directory}/", "-c", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"nginx -t rejects {path}:\n{done.stderr.strip()}")


# ---------------------------------------------------------------- the anchors' database


class AnchorDatabase:
    """TFB's database where the anchors look for it: a scripts/pg.sh cluster on 127.0.0.1:5432."""

    def __init__(self, log):
        self.log = log
        self.started = False

    def pg_sh(self, action):
        try:
            return subprocess.run(
                ["bash", str(PG_SH), action], env=dict(os.environ, **ANCHOR_PG_SH_ENV),
                capture_output=True, text=True, timeout=900,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise SetupError(f"scripts/pg.sh {action} did not finish in 15 minutes") from None

    def start(self):
        ensure_tfb_database_host(self.log)
        pg_env = " ".join(f"{k}={v}" for k, v in ANCHOR_PG_SH_ENV.items())
        if self.pg_sh("status").returncode == 0:
            self.log(f"--- the anchors' PostgreSQL ({ANCHOR_PG_DIR}) is already running: using it, leaving it running")
        else:
            owner = port_in_use(ANCHOR_DB_PORT)
            if owner:
                raise SetupError(
                    f"port {ANCHOR_DB_PORT} is already in use ({owner}) by something other than this "
                    f"script's cluster in {ANCHOR_PG_DIR}: the anchors need it for tfb-database; stop that first"
                )
            self.log(f"--- starting the anchors' PostgreSQL: {pg_env} scripts/pg.sh start")
            done = self.pg_sh("start")
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
            done = self.pg_sh("stop")
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


class ArenaDatabase:
    """HttpArena's database where every server of the run finds it: DATABASE_URL and
    DATABASE_MAX_CONN in its environment."""

    def __init__(self, log):
        self.log = log

    def pg_sh(self, action):
        try:
            done = subprocess.run(["bash", str(PG_SH), action], capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            raise SetupError(f"scripts/pg.sh {action} did not finish in 15 minutes") from None
        if done.returncode != 0:
            raise SetupError(f"scripts/pg.sh {action} failed:\n{done.stderr.strip()}")
        return done.stdout

    def start(self, sharing):
        """Starts the cluster if need be (and leaves it running); the environment of each of the
        `sharing` servers."""
        self.pg_sh("start")
        words = self.pg_sh("arena-env").split()
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
        self.log(f"--- HttpArena's database: {without_password(url)}, DATABASE_MAX_CONN={share} for each of "
                 f"{sharing} server(s)")  # fmt: skip
        return {"DATABASE_URL": url, "DATABASE_MAX_CONN": str(share)}


def give_arena_database(servers, tests, log):
    """For a run with tests of HttpArena's database: starts it, and adds DATABASE_URL and
    DATABASE_MAX_CONN to the environment of each server that serves one of them (the others
    keep theirs). Returns the report's line about it, or None."""
    sharing = [s for s in servers if any(s.serves(TESTS[t]) for t in tests if t in ARENA_DB_TESTS)]
    if not sharing:
        return None
    env = ArenaDatabase(log).start(len(sharing))
    for server in sharing:
        server.env = dict(server.env or {}, **env)
    return (
        f"HttpArena's, from scripts/pg.sh (arena-env): {', '.join(s.name for s in sharing)} started with "
        f"DATABASE_URL={without_password(env['DATABASE_URL'])} DATABASE_MAX_CONN={env['DATABASE_MAX_CONN']}"
    )


def without_password(url):
    """A connection URL as the report shows it: user@host, no password."""
    return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1@", url)


def summarize(record):
    """Per server and level: medians over the rounds, error totals, CPU and memory."""
    rows = {}
    for name in record["servers"]:
        for level in record["levels"]:
            runs = level_runs(record, name, level)
            if not runs:
                continue
            rps = [rate(r) for r in runs]
            per_cpu = [rate_per_cpu(r) for r in runs if rate_per_cpu(r)]
            cpu_per_1k = [1000 * r["server_cpu_s"] / r["summary"]["requests"] for r in runs if r["summary"]["requests"]]
            postgres_per_1k = [1000 * r["postgres_cpu_s"] / r["summary"]["requests"] for r in runs
                               if r["summary"]["requests"] and "postgres_cpu_s" in r]  # fmt: skip
            rows[(name, level)] = {
                "runs": len(runs),
                "rps_median": statistics.median(rps),
                "rps_min": min(rps),
                "rps_max": max(rps),
                "rps_all": rps,
                "p50_us": median_known(r["summary"]["latency_us"]["p50"] for r in runs),
                "p99_us": median_known(r["summary"]["latency_us"]["p99"] for r in runs),
                "socket_errors": sum(r["summary"]["socket_errors"] for r in runs),
                "non_2xx": sum(r["summary"]["non_2xx"] for r in runs),
                "cpu_percent": statistics.median(r["server_cpu_percent"] for r in runs),
                # Absent from records made before these were measured.
                "postgres_cpu_percent": median_known(r.get("postgres_cpu_percent") for r in runs),
                "wrk_cpu_percent": median_known(r.get("wrk_cpu_percent") for r in runs),
                "requests_per_cpu_s": statistics.median(per_cpu) if per_cpu else None,
                "cpu_s_per_1k_requests": statistics.median(cpu_per_1k) if cpu_per_1k else None,
                "postgres_cpu_s_per_1k_requests": statistics.median(postgres_per_1k) if postgres_per_1k else None,
                "peak_rss_kib": max(r["server_peak_rss_kib"] for r in runs),
                "connections": runs[0]["connections"],
                "rss_per_connection_bytes": median_known(map(rss_per_connection_bytes, runs)),
                "requests_per_connection": median_known(map(requests_per_connection, runs)),
                "closed_on_request": median_known(map(closed_on_request, runs)),
            }
    return rows


def requests_per_connection(run):
    opened = run.get("connections_opened")
    return run["summary"]["requests"] / opened if opened else None


def closed_on_request(run):
    """The share of the run's `Connection: close` requests after which wrk had to connect again
    (connections opened beyond the first ones): about 1 for a server that closes, 0 for one
    that ignores them."""
    closes, opened = run["summary"].get("closes"), run.get("connections_opened")
    return max(0, opened - run["connections"]) / closes if closes and opened is not None else None


def rss_per_connection_bytes(run):
    """What the run's connections added to the server's memory, each: its peak RSS during the
    run less its RSS once started, over the connections (an upper bound: what earlier load left
    allocated counts too)."""
    start = run.get("server_rss_at_start_kib")
    if not start or not run["connections"]:
        return None
    return max(0, run["server_peak_rss_kib"] - start) * 1024 / run["connections"]


def median_known(values):
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def test_totals(data):
    """A server's CPU seconds and peak RSS over a whole test, primer and warm-up included."""
    runs = data["runs"]
    return {
        "cpu_s": round(sum(r["server_cpu_s"] for r in runs), 2),
        "peak_rss_kib": max((r["server_peak_rss_kib"] for r in runs), default=0),
        "socket_errors": sum(r["summary"]["socket_errors"] for r in runs),
        "non_2xx": sum(r["summary"]["non_2xx"] for r in runs),
        "unanswered_runs": sum(not r["summary"]["requests"] for r in runs),
    }


# ---------------------------------------------------------------- reports


def format_latency(us):
    if us is None:
        return "n/a"
    if us >= 1_000_000:
        return f"{us / 1e6:.2f} s"
    if us >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.0f} µs"


def format_rps(value):
    return f"{value:,.0f}"


def format_mib(kib):
    return f"{kib / 1024:.1f} MiB"


def level_runs(record, name, level):
    if name not in record["servers"]:
        return []  # the server does not serve this test
    return [r for r in record["servers"][name]["runs"] if r["phase"] == "level" and r["level"] == level]


def run_has_errors(run):
    """Errors, error statuses, or no answer at all (e.g. wrk still connecting when it stopped)."""
    summary = run["summary"]
    return bool(summary["socket_errors"] or summary["non_2xx"] or not summary["requests"])


def rate(run):
    return run["summary"]["requests_per_s"]


def rate_per_cpu(run):
    return run["requests_per_cpu_s"]


def ratios(record, candidate, baseline, metric):
    """Per level: the ratio of the two servers' medians of `metric`, and each round's own ratio.

    A level where either server had socket errors or error statuses gets `errors` set: its
    ratio compares a failing server and means nothing. A test that either server does not
    serve, or that failed, has no ratios at all.
    """
    out = {}
    if "failed" in record:
        return out
    for level in record["levels"]:
        mine_all, theirs_all = level_runs(record, candidate, level), level_runs(record, baseline, level)
        mine = [r for r in mine_all if metric(r)]
        theirs = [r for r in theirs_all if metric(r)]
        if not mine or not theirs:
            continue
        by_round = {r["round"]: metric(r) for r in theirs}
        paired = [metric(r) / by_round[r["round"]] for r in mine if r["round"] in by_round]
        out[level] = {
            "ratio": statistics.median(map(metric, mine)) / statistics.median(map(metric, theirs)),
            "paired": paired,
            "errors": any(map(run_has_errors, mine_all + theirs_all)),
        }
    return out


def format_ratio(ratio):
    """`1.062 (3/3 rounds higher, 1.035–1.579)`: the ratio of medians, then the rounds' own ratios.

    Each round runs the two servers back to back, so a round's ratio is little affected by slow
    drift of the machine; when the rounds disagree on the direction, the difference is noise.
    """
    if ratio.get("errors"):
        return f"**invalid: errors** ({ratio['ratio']:.3f})"
    paired = ratio["paired"]
    if not paired:
        return f"**{ratio['ratio']:.3f}**"
    faster = sum(r > 1 for r in paired)
    slower = sum(r < 1 for r in paired)
    if faster == len(paired):
        verdict = f"{faster}/{len(paired)} rounds higher"
    elif slower == len(paired):
        verdict = f"{slower}/{len(paired)} rounds lower"
    else:
        verdict = f"rounds disagree, {faster} of {len(paired)} higher"
    return f"**{ratio['ratio']:.3f}** ({verdict}, {min(paired):.3f}–{max(paired):.3f})"


def render_markdown(meta, records, names):
    lines = [f"# gnosis benchmark, {meta['date']}", ""]
    machine = meta["machine"]
    lines += [
        f"- Command: `{meta['command']}`",
        f"- Machine: {machine['cpus']} CPUs ({machine['cpu_model']}), Linux {machine['kernel']}; "
        f"{machine['wrk']}; load generator and servers on the same machine; load average "
        f"{meta['load_average']['start']:.2f} at the start, {meta['load_average']['end']:.2f} at the end",
    ]
    if meta["database"]:
        lines.append(f"- Database: {meta['database']}")
    for note in meta.get("setup", []):
        lines.append(f"- Set-up: {note}")
    if meta.get("peak_rss_note"):
        lines.append(f"- Note: {meta['peak_rss_note']}")
    for name in names:
        lines.append(f"- `{name}`: `{meta['servers'][name]}`")
    if machine["git_commit"]:
        lines.append(f"- Checkout that `scripts/tool bench` ran from: {machine['git_commit']} (git describe)")
    cfg = meta["config"]
    lines += [
        f"- Profile `{cfg['profile']}`: {cfg['duration']} s per level, {cfg['rounds']} round(s) per level "
        f"and server, primer {cfg['primer']} s at 8 connections, warm-up {cfg['warmup']} s at "
        f"{cfg['max_concurrency']} connections, wrk threads min({cfg['threads']}, connections), "
        f"plaintext pipelined {PIPELINE_DEPTH} deep, query tests at {cfg['max_concurrency']} connections",
        "- requests/s, p50, p99 and CPU are medians over the rounds; errors are totals; CPU is the "
        "server's utime+stime over wall time (100% = one core), all its processes and threads; "
        "PostgreSQL CPU is the same for every `postgres` process on the machine, wrk CPU for wrk: "
        "on one machine the three share the cores; "
        "CPU-s per 1k req is the server's CPU seconds per 1,000 requests; peak RSS is VmHWM during the run",
    ]
    if len(names) > 1:
        others = ", ".join(f"`{n}`" for n in names[1:])
        lines.append(
            f"- ratio: median of `{names[0]}` over median of {others}; in parentheses, how many rounds "
            "agree on the direction, and the range of the rounds' own ratios. "
            "req per CPU-s (requests per second of server CPU time) is steadier than requests/s when "
            "other work shares the machine. – : a server does not serve that test"
        )
    lines.append("")
    failures = collect_failures(records)
    if failures:
        lines += ["> **WARNING: this run had errors; its numbers are not valid.**", ">"]
        lines += [f"> - {f}" for f in failures]
        lines.append("")
    if len(names) > 1:
        lines += summary_table(records, names, meta)

    for record in records:
        test = TESTS[record["test"]]
        lines.append(f"## {test.name}: `{test.url_path('N') if test.kind == 'queries' else test.path}`")
        lines.append("")
        lines += [f"{note}.", ""] if (note := load_description(test)) else []
        for reason in record.get("skipped", {}).values():
            lines += [f"Left out: {reason}.", ""]
        for name, reason in rule_breakers(record, meta):
            lines += [f"Note: {name} {reason}.", ""]
        if record.get("not_served"):
            lines += ["**Not run: no server of this run serves it.**", ""]
            continue
        if "failed" in record:
            lines += [f"**FAILED, no ratio: {record['failed']}.**", ""]
            continue
        taking_part = [n for n in names if n in record["servers"]]
        rows = summarize(record)
        several_rounds = meta["config"]["rounds"] > 1
        header = [test.level_name]
        if test.kind == "queries":
            header.append("connections")
        header += ["server", "requests/s"]
        if several_rounds:
            header.append("runs (min–max)")
        header += ["p50", "p99", "socket errors", "non-2xx", "server CPU", "PostgreSQL CPU", "wrk CPU"]
        header += ["CPU-s per 1k req", "peak RSS"]
        database_test = test.name in DB_TESTS + ARENA_DB_TESTS
        if database_test:
            header.append("PostgreSQL CPU-s per 1k req")
        if test.delay_ms:
            header += ["% of ceiling", "RSS per connection"]
        if test.close_every:
            header.append("requests per connection")
        lines += table_header(header)
        for level in record["levels"]:
            for name in taking_part:
                row = rows.get((name, level))
                if row is None:
                    continue
                cells = [str(level)]
                if test.kind == "queries":
                    cells.append(str(row["connections"]))
                cells += [name, format_rps(row["rps_median"])]
                if several_rounds:
                    cells.append(f"{row['runs']} ({format_rps(row['rps_min'])}–{format_rps(row['rps_max'])})")
                cells += [
                    format_latency(row["p50_us"]),
                    format_latency(row["p99_us"]),
                    loud(row["socket_errors"]),
                    loud(row["non_2xx"]),
                    f"{row['cpu_percent']:.0f}%",
                    format_percent(row["postgres_cpu_percent"]),
                    format_percent(row["wrk_cpu_percent"]),
                    format_cpu_per_1k(row["cpu_s_per_1k_requests"]),
                    format_mib(row["peak_rss_kib"]),
                ]
                if database_test:
                    cells.append(format_cpu_per_1k(row["postgres_cpu_s_per_1k_requests"]))
                if test.delay_ms:
                    ceiling = test.ceiling_rps(row["connections"])
                    per_connection = row["rss_per_connection_bytes"]
                    cells += [
                        f"{100 * row['rps_median'] / ceiling:.1f}% of {format_rps(ceiling)}",
                        "–" if per_connection is None else f"{per_connection / 1024:.2f} KiB",
                    ]
                if test.close_every:
                    per_connection = row["requests_per_connection"]
                    cells.append("–" if per_connection is None else f"{per_connection:.1f}")
                lines.append("| " + " | ".join(cells) + " |")
        for other in names[1:]:
            lines.append("")
            if len(names) > 2:
                lines += [f"`{names[0]}` against `{other}`:", ""]
            if names[0] not in record["servers"] or other not in record["servers"]:
                missing = names[0] if names[0] not in record["servers"] else other
                lines.append(f"ratio: – ({missing} does not serve {test.name})")
            else:
                lines += comparison_table(record, test, names[0], other, rows)
        lines.append("")
        totals = "; ".join(
            f"{name} {t['cpu_s']:.1f} s CPU, peak RSS {format_mib(t['peak_rss_kib'])}"
            for name in taking_part
            for t in [test_totals(record["servers"][name])]
        )
        lines += [f"Whole test (primer and warm-up included): {totals}.", ""]
        lines += [f"![{test.name}: requests/s]({chart_name(test.name)})", ""]
    return "\n".join(lines)


def load_description(test):
    """What a HttpArena or nginx test sends, in words (TFB's tests say it in the header)."""
    notes = []
    if test.requests:
        notes.append(f"Requests in turn, one in flight per connection: {', '.join(map(request_label, test.requests))}")
    if test.close_every:
        notes.append(f"every {test.close_every}th request of a wrk thread says `Connection: close`: a new connection "
                     f"per {test.close_every} requests on average")  # fmt: skip
    if test.delay_ms:
        notes.append(f"each request waits {test.delay_ms} ms: the ceiling is connections / {test.delay_ms} ms; RSS per "
                     "connection is the peak RSS less the RSS at start, over the connections")  # fmt: skip
    if test.one_worker:
        notes.append("every server runs one worker (gnosis --threads 1, nginx worker_processes 1)")
    text = "; ".join(notes)
    return text[:1].upper() + text[1:]


def request_label(raw):
    """`POST /path HTTP/1.1` + body: a raw request in a few words."""
    body = " (chunked)" if "Transfer-Encoding: chunked" in raw else " + body" if "Content-Length" in raw else ""
    line = raw.split("\r\n", 1)[0]
    return f"`{line}`{body}"


def rule_breakers(record, meta):
    """The anchors of the run that serve this test against TFB's rules, each with why."""
    anchors = meta.get("anchors", {})
    breakers = []
    for name in record["servers"]:
        reason = ANCHORS.get(anchors.get(name), Anchor("", ())).not_a_legal_bar.get(record["test"])
        if reason:
            breakers.append((name, reason))
    close_every = TESTS[record["test"]].close_every
    if close_every and "failed" not in record and not record.get("not_served"):
        for (name, level), row in summarize(record).items():
            closed = row["closed_on_request"]
            if closed is not None and closed < 0.5 and name not in dict(breakers):
                breakers.append((name, KEPT_OPEN_NOTE.format(closed=closed, per_connection=row["requests_per_connection"],
                                                             close_every=close_every)))  # fmt: skip
    return breakers


def summary_table(records, names, meta):
    """Every test and level on one table: each server's requests/s, then the ratios to the first."""
    first, others = names[0], names[1:]
    header = ["test", "level"] + names + [f"{first} / {o}" for o in others]
    lines = ["## Summary (requests/s, medians)", ""] + table_header(header)
    for record in records:
        test = TESTS[record["test"]]
        if record.get("not_served") or "failed" in record:
            status = "not served" if record.get("not_served") else "**FAILED**"
            lines.append("| " + " | ".join([test.name, status] + ["–"] * (len(header) - 2)) + " |")
            continue
        rows = summarize(record)
        by_other = {o: ratios(record, first, o, rate) for o in others}
        for level in record["levels"]:
            label = f"N={level}" if test.kind == "queries" else f"c={level}"
            cells = [test.name + ("*" if rule_breakers(record, meta) else ""), label]
            cells += [format_rps(rows[(n, level)]["rps_median"]) if (n, level) in rows else "–" for n in names]
            cells += [short_ratio(by_other[o].get(level)) for o in others]
            lines.append("| " + " | ".join(cells) + " |")
    breakers = sorted({b for record in records if "servers" in record for b in rule_breakers(record, meta)})
    if breakers:
        lines.append("")
        lines += [f"\\* {name} {reason}." for name, reason in breakers]
    return lines + [""]


def short_ratio(ratio):
    if ratio is None:
        return "–"
    if ratio.get("errors"):
        return "**invalid: errors**"
    paired = ratio["paired"]
    higher = sum(r > 1 for r in paired)
    if paired and higher in (0, len(paired)):
        agree = f" ({len(paired)}/{len(paired)} {'higher' if higher else 'lower'})"
    else:
        agree = " (rounds disagree)" if paired else ""
    return f"{ratio['ratio']:.3f}{agree}"


def format_percent(value):
    return "–" if value is None else f"{value:.0f}%"


def format_cpu_per_1k(value):
    return "–" if value is None else f"{value:.3g}"


def table_header(header):
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" if h in ("server", "test", "level") else "---:" for h in header) + "|"]


def comparison_table(record, test, candidate, baseline, rows):
    by_rate = ratios(record, candidate, baseline, rate)
    by_rate_per_cpu = ratios(record, candidate, baseline, rate_per_cpu)
    lines = table_header(
        [test.level_name, f"{candidate} requests/s", f"{baseline} requests/s", "ratio", "ratio of req per CPU-s"]
    )
    for level in record["levels"]:
        if level not in by_rate:
            continue
        per_cpu = by_rate_per_cpu.get(level)
        cells = [
            str(level),
            format_rps(rows[(candidate, level)]["rps_median"]),
            format_rps(rows[(baseline, level)]["rps_median"]),
            format_ratio(by_rate[level]),
            format_ratio(per_cpu) if per_cpu else "–",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def loud(count):
    return f"**{count}**" if count else "0"


def collect_failures(records):
    failures = []
    for record in records:
        if "failed" in record:
            failures.append(f"{record['test']}: {record['failed']}")
            continue
        for name, data in record["servers"].items():
            t = test_totals(data)
            if t["socket_errors"] or t["non_2xx"] or t["unanswered_runs"]:
                failures.append(
                    f"{record['test']} / {name}: {t['socket_errors']} socket errors, "
                    f"{t['non_2xx']} non-2xx/3xx responses, {t['unanswered_runs']} runs without an answer"
                )
    return failures


def chart_name(test_name):
    return f"chart-{test_name}.svg"


# ---------------------------------------------------------------- SVG chart

SERIES_COLOURS = ["#1f6fb4", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#495057"]


def nice_ceiling(value):
    """The smallest 1, 2, 2.5 or 5 times a power of ten that is >= value (and > 0)."""
    if value <= 0:
        return 1
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 1
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def short_number(value):
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= limit:
            text = f"{value / limit:.2f}".rstrip("0").rstrip(".")
            return f"{text}{suffix}"
    return f"{value:g}"


def xml_escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def render_svg(title, x_label, levels, series):
    """A line chart: levels evenly spaced on x, requests/s on y from 0, one line per series.

    `series` is a list of (name, [value or None per level]).
    """
    width, height = 640, 380
    left, right, top, bottom = 80, 20, 50, 60
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _, vs in series for v in vs if v is not None]
    y_max = nice_ceiling(max(values, default=1) * 1.05)

    def x_at(i):
        return left + (plot_w * (i + 0.5) / len(levels))

    def y_at(v):
        return top + plot_h * (1 - v / y_max)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{xml_escape(title)}</text>',
    ]
    ticks = 5
    for k in range(ticks + 1):
        v = y_max * k / ticks
        y = y_at(v)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{short_number(v)}</text>')
    out.append(
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>'
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#444"/>'
    )
    for i, level in enumerate(levels):
        out.append(f'<text x="{x_at(i):.1f}" y="{top + plot_h + 18}" text-anchor="middle">{xml_escape(level)}</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 15}" text-anchor="middle">{xml_escape(x_label)}</text>')
    out.append(
        f'<text x="18" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 18 {top + plot_h / 2})">requests/s</text>'
    )
    for n, (name, vs) in enumerate(series):
        colour = SERIES_COLOURS[n % len(SERIES_COLOURS)]
        points = [(x_at(i), y_at(v)) for i, v in enumerate(vs) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
        # Legend in a row between the title and the plot, where no line can hide it.
        legend_x = left + min(200, plot_w // max(len(series), 1)) * n
        out.append(
            f'<rect x="{legend_x}" y="30" width="12" height="12" fill="{colour}"/>'
            f'<text x="{legend_x + 18}" y="40">{xml_escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def chart_for(record, names):
    test = TESTS[record["test"]]
    rows = summarize(record)
    series = [(name, [rows[(name, lv)]["rps_median"] if (name, lv) in rows else None for lv in record["levels"]])
              for name in names if name in record["servers"]]  # fmt: skip
    if test.kind == "queries":
        connections = next(row["connections"] for row in rows.values())
        x_label = f"queries per request (N), {connections} connections"
    elif test.kind == "pipelined":
        x_label = f"connections ({PIPELINE_DEPTH} requests pipelined)"
    else:
        x_label = "connections"
    return render_svg(f"{test.name}: requests/s", x_label, record["levels"], series)


# ---------------------------------------------------------------- main


def preflight(servers):
    """Before anything starts: the anchors' binaries exist, and no port of the run is taken."""
    for server in servers:
        if server.anchor and not os.access(server.command, os.X_OK):
            raise SetupError(
                f"anchor {server.name}: no executable {server.command} (see ../shared/anchors/README.md beside "
                "the checkout, or --anchors-dir, --httparena-dir, GNOSIS_SHARED_DIR)"
            )
    ports = {s: s.anchor.ports if s.anchor else (s.port,) for s in servers}
    for port in sorted({p for used in ports.values() for p in used}):
        owner = port_in_use(port)
        if owner:
            users = ", ".join(s.name for s in servers if port in ports[s])
            raise SetupError(f"port {port}, needed by {users}, is already in use ({owner}): stop that first")


def most_connections(args):
    """The most connections one wrk run of this command opens."""
    return max([args.max_concurrency] + [max(args.levels[t]) for t in args.tests if TESTS[t].kind != "queries"])


def check_capacity(args, open_files):
    """Every level fits in what this machine lets wrk hold open, or the run stops before it starts."""
    capacity, limit = connection_capacity(open_files)
    too_many = [f"{t} at {level}" for t in args.tests if TESTS[t].kind != "queries" for level in args.levels[t]
                if level > capacity]  # fmt: skip
    if too_many:
        raise SetupError(f"{', '.join(too_many)} connections: this machine allows {capacity}, set by {limit}; "
                         "choose lower --levels")  # fmt: skip


def run(args):
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        settle(args)
    except ValueError as e:
        print(f"scripts/tool bench: error: {e}", file=sys.stderr)
        return 2
    try:
        return measure_all(args)
    except SetupError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def measure_all(args):
    ensure_installed("wrk", "wrk")
    if args.nginx:
        ensure_installed("nginx", "nginx-light")
    open_files = raise_open_files_limit(most_connections(args))
    check_capacity(args, open_files)
    now = datetime.now(timezone.utc)
    out_dir = Path(args.out) / now.strftime("%Y%m%dT%H%M%SZ")
    out_dir.mkdir(parents=True, exist_ok=False)
    command_line = shlex.join(sys.argv)
    meta = {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "command": command_line,
        "machine": machine_info(),
        "open_files_limit": open_files,
        "load_average": {"start": os.getloadavg()[0]},
        "database": database_settings(),
        "servers": {},
        "config": {
            k: getattr(args, k)
            for k in ("profile", "tests", "levels", "duration", "warmup", "primer", "rounds", "threads",
                      "max_concurrency", "pause_after_warmup", "pause_between_levels")
        },  # fmt: skip
    }
    # A database anchor cannot even start without tfb-database: then every server of the run
    # uses that database, gnosis included, over TCP as the anchors do.
    anchor_db = any(spec.anchor and spec.anchor.needs_database for spec in args.specs)
    client_env = ANCHOR_DB_CLIENT_ENV if anchor_db else None
    if anchor_db:
        meta["database"] = (
            f"tfb-database:{ANCHOR_DB_PORT} (127.0.0.1), SCRAM over TCP, for every server: the anchors by "
            f"name, the others with {' '.join(f'{k}={v}' for k, v in ANCHOR_DB_CLIENT_ENV.items() if k != 'PGPASSWORD')}; "
            f"PostgreSQL from scripts/pg.sh in {ANCHOR_PG_DIR}"
        )
    # gnosis's /json/{count} reads HttpArena's dataset: the repository's copy, unless DATASET_PATH says.
    command_env = dict(client_env or {}, DATASET_PATH=os.environ.get("DATASET_PATH") or str(DATASET))
    nginx_dir = tempfile.mkdtemp(prefix="bench-nginx-") if args.nginx else None
    servers = []
    for i, spec in enumerate(args.specs):
        if spec.anchor:
            log_name = f"anchor-{spec.name}.log"
        else:
            log_name = "server.log" if i == 0 else "baseline.log" if i == 1 and args.baseline else f"{spec.name}.log"
        command, one_worker_command = spec.command, spec.one_worker_command
        if nginx_dir and NGINX_DIR in command:
            write_nginx_configs(nginx_dir, spec.port)
            command, one_worker_command = (c.replace(NGINX_DIR, nginx_dir) for c in (command, one_worker_command))
            meta["nginx_config"] = (Path(nginx_dir) / NGINX_CONF).read_text()
        servers.append(
            Server(spec.name, command, LOOPBACK, spec.port, out_dir / log_name.replace(" ", "_").replace("/", "_"),
                   anchor=spec.anchor, env=None if spec.anchor else command_env, tests=spec.tests,
                   one_worker_command=one_worker_command)
        )  # fmt: skip
    names = [s.name for s in servers]
    for s in servers:
        meta["servers"][s.name] = s.command + (f" (anchor, port {s.port})" if s.anchor else "")
    meta["anchors"] = {s.name: s.anchor.name for s in servers if s.anchor}

    log_file = open(out_dir / "bench.log", "w")

    def log(message):
        print(message, flush=True)
        log_file.write(message + "\n")
        log_file.flush()

    log(f"results in {out_dir}")
    records = []
    database = AnchorDatabase(log) if anchor_db else None
    lineup = Lineup(servers, args.startup_timeout, log)
    try:
        preflight(servers)
        if database:
            database.start()
            meta["setup"] = [
                f"PostgreSQL on 127.0.0.1:{ANCHOR_DB_PORT} ({ANCHOR_PG_DIR}) "
                + ("started for this run and stopped after it" if database.started else "already running, left running")
            ]
        meta["database"] = give_arena_database(servers, args.tests, log) or meta["database"]
        for name in args.tests:
            records.append(run_test(TESTS[name], servers, args, log, lineup))
    except SetupError as e:
        if getattr(e, "record", None) is not None:
            records.append(e.record)
        log(f"!!! {e}")
        meta["aborted"] = str(e)
    finally:
        lineup.stop_all()
        if nginx_dir:
            shutil.rmtree(nginx_dir, ignore_errors=True)
        if database:
            database.stop()
        if any(not s.peak_reset_works for s in servers):
            meta["peak_rss_note"] = "clear_refs not writable: peak RSS is since the server started"
        meta["load_average"]["end"] = os.getloadavg()[0]

    for record in records:
        if "failed" not in record and not record.get("not_served"):
            record["summary"] = [{"server": name, "level": level, **row} for (name, level), row in summarize(record).items()]
            # Per other server: the first server's ratio to it, per metric and level.
            record["ratios"] = {
                other: {
                    metric.__name__: {str(level): r for level, r in ratios(record, names[0], other, metric).items()}
                    for metric in (rate, rate_per_cpu)
                }
                for other in names[1:]
            }
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "tests": records}, indent=1) + "\n")
    for record in records:
        if "failed" not in record and not record.get("not_served"):
            (out_dir / chart_name(record["test"])).write_text(chart_for(record, names))
    table = render_markdown(meta, records, names)
    if "aborted" in meta:
        table += f"\n**ABORTED: {meta['aborted']}**\n"
    (out_dir / "table.md").write_text(table)
    log_file.close()
    print()
    print(table)

    failures = collect_failures(records)
    if failures or "aborted" in meta:
        banner = "!" * 72
        print(f"\n{banner}\nTHIS RUN HAD ERRORS; its numbers are not valid:", file=sys.stderr)
        for f in failures + ([meta["aborted"]] if "aborted" in meta else []):
            print(f"  - {f}", file=sys.stderr)
        print(f"{banner}\nresults: {out_dir}", file=sys.stderr)
        return 1
    print(f"\nresults: {out_dir}")
    return 0


def stop_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)  # unwinds like Ctrl-C: the servers and the database are stopped
