"""The order of a test's runs: primer, warm-up and levels of each server, the servers alternating
round by round, side by side or taking turns on a shared port."""

import atexit
import functools
import http.client
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .. import authsvc
from ..system import SetupError
from .httparena import GRPC_SUM_FRAME, PRODUCTION_WRITE_BODY
from .load import LoadFailed, run_gcannon, run_wrk
from .pace import h2_command, h2load_counts, production_commands, run_h2, run_h2load, run_kept, run_production
from .report import format_latency
from .servers import probe, probe_upgrade


PRIMER_CONNECTIONS = 8
# TFB's query scripts prime and warm up with this N.
QUERY_WARMUP_N = 2


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


H3_PROBE_ATTEMPTS = 10


def probe_server(test, server, path, record, log):
    """True if the server answers 200 to `path` (101 to a WebSocket upgrade); else marks the test
    failed (but not the run)."""
    expected = 101 if test.websocket else 200
    try:
        port, scheme = endpoint(test, server)
        if test.websocket:
            status, length = probe_upgrade(server.host, port, path)
        elif test.h2:
            status, length = probe_h2(test, f"{scheme}://{server.host}:{port}{path}")
        else:
            body = os.urandom(test.body_bytes) if test.body_bytes else None
            status, length = probe(server.host, port, path, test.accept, tls=test.tls, body=body)
    except (OSError, ValueError, http.client.HTTPException) as e:
        server.check_alive()
        status, length = f"no answer ({e})", 0
    record["servers"][server.name]["probe"] = {"status": status, "body_bytes": length}
    if status != expected:
        asked = f"the {len(test.uris)} URIs of its list, once each" if test.h2 and test.uris else path
        record["failed"] = f"{server.name} answered {status} to {asked}"
        log(f"!!! {test.name}: {record['failed']}; skipping this test")
        return False
    return True


def probe_h2(test, url):
    """(200 or what went wrong, 0): HTTP/2 (or HTTP/3) requests by h2load as the test sends them,
    one, or each of its URIs once if it has a list (a gateway's: its static files, its application's
    routes and database). Over HTTP/3, tried for a few seconds: a server's QUIC socket may open
    after its TCP port (Caddy's does)."""
    h3 = test.h2 == "h3"
    if test.production:
        return probe_production(test, url)
    uris = uri_file(test, "/".join(url.split("/", 3)[:3])) if test.uris else None  # at scheme://host:port
    requests = len(test.uris) if test.uris else 1
    command = h2_command(url, 1, 1, None, 1, uris, grpc_file(test), h2c=url.startswith("http:"), requests=requests,
                         h3=h3, h3_binary=test.h3_binary)  # fmt: skip
    for attempt in range(H3_PROBE_ATTEMPTS if h3 else 1):
        if attempt:
            time.sleep(0.5)
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
        counts = h2load_counts(result.stdout)
        if counts.get("2xx") == requests:
            return 200, 0
    return f"h2load: {counts or result.stderr.strip()[-200:]}", 0


def probe_production(test, url):
    """(200 or what went wrong, 0): production-stack's two h2load as the test runs them, the reads'
    first block of 20 (every kind of its URIs) and each of the writes once (their rows are put back
    after the test, session.py)."""
    base = "/".join(url.split("/", 3)[:3])
    block = len(test.writes)
    reads_file = uri_file(test, base, test.uris[:block], "probe-reads")
    writes_file = uri_file(test, base, test.writes, "writes")
    commands = production_commands(url, 1, 1, None, reads_file, writes_file, write_body_file(), bearer_token(),
                                   requests=block)  # fmt: skip
    for kind, command in zip(("reads", "writes"), commands):
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
        counts = h2load_counts(result.stdout)
        if counts.get("2xx") != block:
            return f"h2load ({kind}): {counts or result.stderr.strip()[-200:]}", 0
    return 200, 0


def bearer_token():
    """The token every production-stack request carries: HttpArena's data/jwt-token.txt as it is
    made, user 42 under the auth service's secret."""
    return authsvc.token(authsvc.SECRET, "42")


def write_body_file():
    """production-stack's writes' body, HttpArena's requests/production-stack-write-body.json."""
    return run_file("production-stack-write-body.json", lambda: PRODUCTION_WRITE_BODY)


def endpoint(test, server):
    """(port, scheme) of `server` that `test` goes to."""
    if test.h2:
        ports = {"tls": (server.h2_tls_port, "https"), "h3": (server.h2_tls_port, "https"),
                 "h2c": (server.h2c_port, "http")}  # fmt: skip
        return ports.get(test.h2, (server.port, "http"))
    return (server.tls_port, "https") if test.tls else (server.port, "http")


def grpc_file(test):
    """The gRPC request frame every gRPC test sends, as a file for h2load -d; None for others."""
    return run_file("grpc-sum.bin", lambda: GRPC_SUM_FRAME) if test.grpc else None


def body_file(size):
    """A file of `size` random bytes, the body of a test's POSTs, made once per run of the tool."""
    return run_file(f"body-{size}.bin", lambda: os.urandom(size))


@functools.cache
def run_dir():
    """This run's folder for its files, removed when the tool exits."""
    path = Path(tempfile.mkdtemp(prefix="bench-files-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def run_file(name, content):
    """A file of this run of the tool, written once from `content()`."""
    path = run_dir() / name
    if not path.exists():
        data = content()
        path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)
    return path


def uri_file(test, base, uris=None, kind="uris"):
    """h2load -i's list: `test`'s URIs (or `uris`, its list of `kind`) at `base` (scheme, host and
    port of one server)."""
    port = base.rsplit(":", 1)[1]
    listed = test.uris if uris is None else uris
    return run_file(f"{test.name}-{port}-{kind}.txt", lambda: "".join(f"{base}{uri}\n" for uri in listed))


def measure(test, server, record, args, log, phase, level, round_no):
    """One wrk run: primer (8 connections), warm-up (the top concurrency) or a level. A paced
    test's primer and warm-up are shorter runs of its first level: its rate is the test."""
    if test.rate:
        path, connections, pipelined = test.path, args.levels[test.name][0] if level is None else level, False
        duration = {"level": args.duration, "primer": args.primer}.get(phase, args.warmup)
    elif phase == "level":
        path = server.url_path(test, level)
        connections = args.max_concurrency if test.kind == "queries" else level
        duration, pipelined = args.duration, test.kind == "pipelined"
    else:
        # TFB primes and warms up the query tests with N = 2, and plaintext without pipelining.
        path = server.url_path(test, QUERY_WARMUP_N) if test.kind == "queries" else test.path
        connections = PRIMER_CONNECTIONS if phase == "primer" else args.max_concurrency
        duration, pipelined = (args.primer if phase == "primer" else args.warmup), False
    threads = min(connections, args.threads)
    port, scheme = endpoint(test, server)
    url = f"{scheme}://{server.host}:{port}{path}"
    try:
        run = start_run(test, server, url, connections, threads, duration, pipelined, scheme, port)
    except LoadFailed as failed:
        log(f"!!! {test.name:9} {server.name:>12} {phase:7} c={connections:<5} void: {failed}")
        record["servers"][server.name].setdefault("void_runs", []).append(
            {"phase": phase, "level": level, "round": round_no, "why": str(failed)})
        return
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


def start_run(test, server, url, connections, threads, duration, pipelined, scheme, port):
    """One run of the load generator `test` uses, measured."""
    uris = uri_file(test, f"{scheme}://{server.host}:{port}") if test.uris else None
    if test.production:
        writes = uri_file(test, f"{scheme}://{server.host}:{port}", test.writes, "writes")
        return run_production(server, url, connections, threads, duration, uris, writes, write_body_file(),
                              bearer_token())  # fmt: skip
    if test.h2:
        return run_h2(server, url, connections, threads, duration, test.streams, uris, grpc_file(test),
                      h2c=scheme == "http", h3=test.h2 == "h3", h3_binary=test.h3_binary)  # fmt: skip
    if test.kept:
        return run_kept(server, uris, connections, threads, duration, test.accept)
    if test.websocket:
        return run_gcannon(server, url, connections, duration, pipelined, test.close_every)
    if test.rate:
        body = body_file(test.body_bytes) if test.body_bytes else None
        return run_h2load(server, url, connections, threads, duration, test.rate, body, "application/octet-stream")
    # A mix primes and warms up with itself: its requests are the test.
    mix = (test.requests, test.close_every) if test.requests else None
    return run_wrk(server, url, connections, threads, duration, test.accept, pipelined, mix=mix)


def run_side_by_side(test, servers, levels, record, args, log, lineup):
    if lineup:
        lineup.bring_up(servers, test.one_worker, production=test.production)
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
            lineup.bring_up([server], test.one_worker, production=test.production)
            if not probe_server(test, server, server.url_path(test, levels[0]), record, log):
                return
            measure(test, server, record, args, log, "primer", None, round_no)
            measure(test, server, record, args, log, "warmup", None, round_no)
            time.sleep(args.pause_after_warmup)
            for level in levels:
                measure(test, server, record, args, log, "level", level, round_no)
                time.sleep(args.pause_between_levels)
