"""The command line of `scripts/tool bench`: its options, settled into the tests, levels and
servers of the run."""

import argparse
import dataclasses
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from .. import ROOT as REPO
from .anchors import (ANCHOR_PORT, ANCHOR_PREFIX, ANCHORS, DEFAULT_ANCHORS_DIR, DEFAULT_HTTPARENA_DIR, Anchor,
                      anchor_named, parse_anchor_list)
from .catalog import PROFILES, TEST_GROUPS, TESTS, expand_tests
from .gateway import DEFAULT_APP, EDGES, GATEWAY_PREFIX, HTTPARENA_GIT, Edge, edge_named, stack_command
from .httparena import PRODUCTION_TESTS
from .httparena import READS_ARENA_DB as ARENA_DB_TESTS
from .h2o import H2O_CONF, H2O_ONE_WORKER_CONF, h2o_command
from .nginx import BAR_TESTS, NGINX_CONF, NGINX_ONE_WORKER_CONF, nginx_command
from .tfb import DB_TESTS


def add_arguments(p):
    # fmt: off
    groups = "; ".join(f"{group}: {','.join(tests)}" for group, tests in TEST_GROUPS.items())
    p.add_argument("--server", default=f"{REPO}/target/release/gnosis --port {{port}} --tls-port {{tls_port}} "
                   "--h2c-port {h2c_port} --h2-tls-port {h2_tls_port}",
                   help="server command line, run by /bin/sh, {port} replaced by the port, {tls_port} by "
                   f"its TLS port (the port + {TLS_PORT_OFFSET}), {{h2c_port}} and {{h2_tls_port}} by its "
                   f"HTTP/2 ports (the port + {H2C_PORT_OFFSET}, + {H2_TLS_PORT_OFFSET}); or anchor:NAME "
                   f"for one of TFB's entries ({', '.join(ANCHORS)}); or gateway:EDGE for a stack of an edge "
                   f"({', '.join(EDGES)}) in front of --gateway-app (the gateway tests) (default: %(default)s)")
    p.add_argument("--name", help="label of --server in the tables (default: its program or anchor name)")
    p.add_argument("--baseline", help="a second server (command line, anchor:NAME or gateway:EDGE), run alternately "
                   "with --server")
    p.add_argument("--baseline-name", help="label of --baseline (default: the anchor's name, or 'baseline')")
    p.add_argument("--gateway-app", default=DEFAULT_APP, help="the application server behind a gateway:EDGE stack, "
                   "HTTP/1.1 on {port}, the edge's upstream (default: %(default)s)")
    p.add_argument("--authsvc", metavar="PATH", help="the binary of HttpArena's auth service (frameworks/_shared/"
                   f"authsvc) in production-stack's stacks, on the stack's port + {AUTH_PORT_OFFSET} (default: built "
                   f"in target/authsvc/ from HttpArena's repository, the git directory HTTPARENA_GIT, {HTTPARENA_GIT})")
    p.add_argument("--anchors", metavar="NAME,NAME|tfb|httparena|all",
                   help=f"more servers: these anchors ({', '.join(ANCHORS)}; tfb: TFB's, httparena: HttpArena's "
                   "engines), each run alternately with --server (and --baseline) on the tests it serves; "
                   "ratios are --server over each of them")
    p.add_argument("--anchors-dir", default=str(DEFAULT_ANCHORS_DIR),
                   help="where TFB's anchors' binaries are ($GNOSIS_SHARED_DIR/anchors/bin, default: %(default)s)")
    p.add_argument("--httparena-dir", default=str(DEFAULT_HTTPARENA_DIR), help="where HttpArena's engines are, "
                   "in bin/ ($GNOSIS_SHARED_DIR/anchors/httparena, default: %(default)s)")
    p.add_argument("--nginx", action="store_true", help="one more server: Debian's nginx (nginx-light), "
                   f"configured here, on the nginx tests, json-tls and the H2 tests ({', '.join(BAR_TESTS)})")
    p.add_argument("--h2o", action="store_true", help="one more server: Debian's h2o, configured here, on the "
                   "same tests as --nginx")
    p.add_argument("--port", type=int, help=f"port of --server (default: 8080, or the first port above "
                   f"{ANCHOR_PORT} that no anchor binds when an anchor, always on {ANCHOR_PORT}, is in the run)")
    p.add_argument("--baseline-port", type=int, help="port of --baseline (default: --port + 1)")
    p.add_argument("--nginx-port", type=int, help="port of --nginx (default: the next one after --baseline-port)")
    p.add_argument("--h2o-port", type=int, help="port of --h2o (default: the next one after --nginx-port)")
    p.add_argument("--tests", default="tfb", help=f"comma-separated tests or groups ({groups}) (default: %(default)s)")
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick", help="(default: %(default)s)")
    p.add_argument("--duration", type=int, help="seconds per level (profile default)")
    p.add_argument("--warmup", type=int, help="seconds of warm-up at the top level (profile default)")
    p.add_argument("--primer", type=int, help="seconds of primer at 8 connections (profile default)")
    p.add_argument("--levels", action="append", default=[], metavar="[TEST=]L1,L2,...",
                   help="levels (connections, or N for queries/updates/cached); repeatable; "
                   "without TEST= they apply to every selected test")
    p.add_argument("--max-concurrency", type=int, default=512,
                   help="connections of the warm-up and of every query-test level (default and TFB: %(default)s)")
    p.add_argument("--rounds", type=int, help="runs of each level per server (default 1, or 4 with --baseline: "
                   "an even number lets each server go first equally often)")
    p.add_argument("--threads", type=int,
                   help="wrk threads; a level uses min(threads, connections) (default: nproc, as TFB, or the "
                   "load's CPUs with --pin)")
    p.add_argument("--pin", metavar="SERVER_CPUS:LOAD_CPUS", type=parse_pin,
                   help="the servers on these CPUs, the load generators (and this script) on the others, "
                   "as on a venue's machine, e.g. 0:1 (one core each); --threads defaults to the load's CPUs")
    p.add_argument("--out", default=str(REPO / "results"),
                   help="a timestamped folder is made in it (default: %(default)s)")
    p.add_argument("--startup-timeout", type=float, default=60.0,
                   help="seconds to wait for a server's port (default: %(default)s)")
    # fmt: on


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
    if args.threads is None:
        args.threads = len(args.pin[1] if args.pin else os.sched_getaffinity(0))
    if min(args.duration, args.warmup, args.primer, args.rounds, args.threads, args.max_concurrency) < 1:
        raise ValueError("--duration, --warmup, --primer, --rounds, --threads and --max-concurrency must be >= 1")
    commands = [s for s in args.specs if s.anchor is None]
    if len({s.port for s in commands}) < len(commands):
        raise ValueError("--port, --baseline-port, --nginx-port and --h2o-port must differ")
    tls_ports = [s.tls_port for s in commands if s.tls_port]
    if set(tls_ports) & {s.port for s in commands}:
        raise ValueError(f"a TLS port (the port + {TLS_PORT_OFFSET}) is another server's port: choose other ports")
    return args


# A command's TLS port (json-tls, 8gbit): its port's twin, clear of the anchors' 8081-8443.
TLS_PORT_OFFSET = 1000
# Its HTTP/2 ports, so that two gnosis servers of a run (or an anchor on 8082 and 8443) never
# meet on the defaults.
H2C_PORT_OFFSET = 2000
H2_TLS_PORT_OFFSET = 3000
# production-stack's auth service in a gateway stack.
AUTH_PORT_OFFSET = 4000


@dataclass(frozen=True)
class ServerSpec:
    """One server of the run: a command line (with its port), or an anchor (always on 8080)."""

    name: str
    command: str  # the command line, or the anchor's binary
    port: int
    tls_port: int = None  # where it serves TLS, if it does
    h2c_port: int = None  # where it serves h2c by prior knowledge, if it does
    h2_tls_port: int = None  # where it serves h2 over TLS, if it does
    anchor: Anchor = None
    tests: tuple = None  # the tests it serves, if not all (an anchor: its own)
    one_worker_command: str = None  # the command line for the one-worker tests, if it has one
    gateway: str = None  # a gateway stack's edge (gateway.EDGES), whose configuration the run writes
    # A gateway stack's for production-stack: with the auth service on `auth_port` (gateway.py).
    production_command: str = None
    auth_port: int = None


def server_specs(args):
    """The servers in run order: --server, --baseline, then each of --anchors."""
    wanted = [(args.server, args.name, "server"), (args.baseline, args.baseline_name, "baseline")]
    anchors_dir = Path(args.anchors_dir)
    chosen = []  # (name or None, command or None, anchor or None, role)
    for text, name, role in wanted:
        if text is None:
            continue
        if text.startswith(GATEWAY_PREFIX):
            chosen.append((name, edge_named(text[len(GATEWAY_PREFIX):].strip()), None, role))
        elif text.startswith(ANCHOR_PREFIX):
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
    if args.h2o_port is None:
        args.h2o_port = next(p for p in range(args.nginx_port + 1, 65536) if p not in anchor_ports | {args.port})
    specs, taken = [], set()
    for name, command, anchor, role in chosen:
        if anchor:
            name = name or anchor.name
            spec = ServerSpec(name, str(anchor.path(anchors_dir, args.httparena_dir)), ANCHOR_PORT, anchor.tls_port,
                              anchor.h2c_port, anchor.h2_tls_port, anchor, anchor.tests)  # fmt: skip
        elif isinstance(command, Edge):
            # A gateway stack: the application on the port, the edge on the h2 TLS port (and QUIC).
            edge, port = command, args.port if role == "server" else args.baseline_port
            h2_tls_port = port + H2_TLS_PORT_OFFSET
            auth_port = port + AUTH_PORT_OFFSET if set(edge.tests) & set(PRODUCTION_TESTS) else None
            production = stack_command(edge, args.gateway_app, port, h2_tls_port, auth_port) if auth_port else None
            spec = ServerSpec(name or f"{edge.name}+{program_name(args.gateway_app)}",
                              stack_command(edge, args.gateway_app, port, h2_tls_port), port,
                              h2_tls_port=h2_tls_port, tests=edge.tests, gateway=edge.name,
                              production_command=production, auth_port=auth_port)  # fmt: skip
        else:
            name = name or (program_name(command) if role == "server" else "baseline")
            port = args.port if role == "server" else args.baseline_port
            # A command that names no TLS port serves no TLS test (and gets no certificate).
            tls_port = port + TLS_PORT_OFFSET if "{tls_port}" in command else None
            command = command.replace("{port}", str(port)).replace("{tls_port}", str(tls_port))
            h2c_port = port + H2C_PORT_OFFSET if "{h2c_port}" in command else None
            h2_tls_port = port + H2_TLS_PORT_OFFSET if "{h2_tls_port}" in command else None
            command = command.replace("{h2c_port}", str(h2c_port)).replace("{h2_tls_port}", str(h2_tls_port))
            # The one-worker tests run it with --threads 1, as gnosis takes it.
            spec = ServerSpec(name, command, port, tls_port, h2c_port, h2_tls_port,
                              one_worker_command=f"{command} --threads 1")  # fmt: skip
        if spec.name in taken:  # the same program twice: keep the labels apart
            number = 2
            while f"{spec.name} #{number}" in taken:
                number += 1
            spec = dataclasses.replace(spec, name=f"{spec.name} #{number}")
        taken.add(spec.name)
        specs.append(spec)
    bars = [("nginx", args.nginx, args.nginx_port, nginx_command, NGINX_CONF, NGINX_ONE_WORKER_CONF),
            ("h2o", args.h2o, args.h2o_port, h2o_command, H2O_CONF, H2O_ONE_WORKER_CONF)]  # fmt: skip
    for name, wanted, port, command, conf, one_worker_conf in bars:
        if wanted:
            specs.append(ServerSpec(name, command(conf), port, port + TLS_PORT_OFFSET, port + H2C_PORT_OFFSET,
                                    port + H2_TLS_PORT_OFFSET, tests=BAR_TESTS,
                                    one_worker_command=command(one_worker_conf)))  # fmt: skip
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


def parse_pin(text):
    """`SERVER_CPUS:LOAD_CPUS`, each a list as taskset takes it (0,2-3): two disjoint sets."""
    try:
        server, load = (cpu_list(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--pin takes SERVER_CPUS:LOAD_CPUS, e.g. 0:1, not {text!r}") from None
    if server & load:
        raise argparse.ArgumentTypeError(f"--pin {text}: the servers' and the load's CPUs overlap")
    if not (server | load) <= os.sched_getaffinity(0):
        raise argparse.ArgumentTypeError(f"--pin {text}: CPUs beyond this machine's {sorted(os.sched_getaffinity(0))}")
    return server, load


def cpu_list(text):
    cpus = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    if not cpus:
        raise ValueError(text)
    return cpus
