#!/usr/bin/env python3
"""Benchmark gnosis (or any TFB-style server) with wrk the way TFB's scripts do.

The command starts the server itself, waits for its port, runs a primer, a warm-up and
then each level of every selected test, and writes results/<timestamp>/ with table.md,
one SVG chart per test and results.json (every wrk run, raw). With --baseline a second
server runs alternately with the first, level by level, for several rounds, and the
table reports each server's median and the ratio. See docs/BENCHMARKS.md.

Python 3 standard library only, so that it runs on a fresh Debian machine.
"""

import argparse
import http.client
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LUA_DIR = Path(__file__).resolve().parent / "bench"
REPORT_LUA = LUA_DIR / "report.lua"
PIPELINE_LUA = LUA_DIR / "pipeline.lua"
JSON_MARKER = "BENCH_JSON "

# The Accept headers TFB's load generator sends, per response type.
ACCEPT_JSON = "application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
ACCEPT_HTML = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ACCEPT_PLAIN = "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"

# Load goes to loopback only: the servers run on this machine, and nothing leaves it.
LOOPBACK = "127.0.0.1"
PIPELINE_DEPTH = 16
WRK_TIMEOUT_S = 8
PRIMER_CONNECTIONS = 8
# TFB's query scripts prime and warm up with this N.
QUERY_WARMUP_N = 2


@dataclass(frozen=True)
class Test:
    """One TFB test type. `kind` says what a level is: connections, or N at fixed connections."""

    name: str
    path: str  # for query tests, the URL up to the N
    kind: str  # "connections", "pipelined" (connections, 16 requests per write) or "queries"
    accept: str

    def url_path(self, level):
        return f"{self.path}{level}" if self.kind == "queries" else self.path

    @property
    def level_name(self):
        return "N" if self.kind == "queries" else "connections"


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
    ]
}

TFB_CONNECTION_LEVELS = [16, 32, 64, 128, 256, 512]
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
        },
    },
}


class BenchError(Exception):
    """A setup problem that stops the run (exit status 2)."""


# ---------------------------------------------------------------- command line


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="scripts/bench.py",
        description="Run TFB's wrk load against a server (and optionally a baseline, alternately). "
        "See docs/BENCHMARKS.md.",
    )
    p.add_argument(
        "--server",
        default=f"{REPO}/target/release/gnosis --port {{port}}",
        help="server command line, run by /bin/sh; {port} is replaced by the port (default: %(default)s)",
    )
    p.add_argument("--name", help="label of --server in the tables (default: its program name)")
    p.add_argument("--baseline", help="second server command line, run alternately with --server")
    p.add_argument("--baseline-name", default="baseline", help="label of --baseline (default: %(default)s)")
    p.add_argument("--port", type=int, default=8080, help="port of --server (default: %(default)s)")
    p.add_argument("--baseline-port", type=int, help="port of --baseline (default: --port + 1)")
    p.add_argument(
        "--tests",
        default=",".join(TESTS),
        help="comma-separated tests (default: all of %(default)s)",
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
    args = p.parse_args(argv)

    args.tests = [t.strip() for t in args.tests.split(",") if t.strip()]
    unknown = [t for t in args.tests if t not in TESTS]
    if unknown or not args.tests:
        p.error(f"unknown test(s) {unknown}; choose from {','.join(TESTS)}")
    profile = PROFILES[args.profile]
    for key in ("duration", "warmup", "primer"):
        if getattr(args, key) is None:
            setattr(args, key, profile[key])
    args.pause_after_warmup = profile["pause_after_warmup"]
    args.pause_between_levels = profile["pause_between_levels"]
    try:
        args.levels = resolve_levels(args.tests, profile["levels"], args.levels)
    except ValueError as e:
        p.error(str(e))
    if args.rounds is None:
        args.rounds = 4 if args.baseline else 1
    if args.baseline_port is None:
        args.baseline_port = args.port + 1
    if min(args.duration, args.warmup, args.primer, args.rounds, args.threads, args.max_concurrency) < 1:
        p.error("--duration, --warmup, --primer, --rounds, --threads and --max-concurrency must be >= 1")
    if args.baseline and args.baseline_port == args.port:
        p.error("--baseline-port must differ from --port")
    if args.name is None:
        args.name = program_name(args.server)
    return args


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


def ensure_wrk():
    if shutil.which("wrk"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise BenchError("wrk is missing: install it (Debian: apt-get install -y wrk)")
    print("wrk is missing: installing it with apt-get", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "wrk"], check=True, env=env)
    if not shutil.which("wrk"):
        raise BenchError("apt-get install wrk did not provide a wrk command")


def raise_open_files_limit():
    """wrk and the servers inherit this: 16,384 connections need more than the usual 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def machine_info():
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
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


def read_proc_stat(pid):
    """(name, state, session id, utime + stime in clock ticks) of a process, all its threads included."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    # The name may contain spaces and parentheses: the other fields start after the last ')'.
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return name, fields[0], int(fields[3]), int(fields[11]) + int(fields[12])


def read_peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class Server:
    """A server started in its own session; its CPU and memory are those of every process in it."""

    def __init__(self, name, command, host, port, log_path):
        self.name = name
        self.command = command.replace("{port}", str(port))
        self.host = host
        self.port = port
        self.log_path = log_path
        self.process = None
        self.peak_reset_works = True

    def start(self, timeout):
        if port_open(self.host, self.port):
            raise BenchError(f"port {self.port} is already in use: refusing to benchmark whatever listens there")
        log = open(self.log_path, "wb")
        print(f"starting {self.name}: {self.command}", flush=True)
        self.process = subprocess.Popen(
            self.command, shell=True, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not port_open(self.host, self.port):
            if self.process.poll() is not None:
                raise BenchError(f"{self.name} exited with status {self.process.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                raise BenchError(f"{self.name} did not open port {self.port} within {timeout:.0f} s")
            time.sleep(0.1)

    def check_alive(self):
        if self.process.poll() is not None:
            raise BenchError(f"{self.name} died (status {self.process.returncode}); see {self.log_path}")

    def stop(self):
        """Stop every process of the server's group, also when its first process already died."""
        if self.process is None:
            return
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
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                name, state, sid, _ = read_proc_stat(entry)
            except (OSError, ValueError, IndexError):
                continue  # the process ended while we looked
            if sid != session or state == "Z":
                continue
            if measured_only and int(entry) == session and name == "sh":
                continue
            found.append(entry)
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
        total = 0
        for pid in self.pids(measured_only=True):
            try:
                total += read_peak_rss_kib(pid)
            except (OSError, ValueError):
                continue
        return total


def port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


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


def wrk_command(url, connections, threads, duration, accept, pipelined):
    """The command line of TFB's concurrency/pipeline/query scripts, plus our reporting script."""
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
        "-s", str(PIPELINE_LUA if pipelined else REPORT_LUA),
        url,
    ]  # fmt: skip
    if pipelined:
        command += ["--", str(PIPELINE_DEPTH)]
    return command


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
    summary["socket_errors"] = errors["connect"] + errors["read"] + errors["write"] + errors["timeout"]
    summary["non_2xx"] = errors["status"]
    return summary


def run_wrk(server, url, connections, threads, duration, accept, pipelined):
    """One wrk run against `server`, with the server's CPU time, peak RSS and wrk's own CPU time."""
    command = wrk_command(url, connections, threads, duration, accept, pipelined)
    server.check_alive()
    server.reset_peak_rss()
    ticks_before = server.cpu_ticks()
    own_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        raise BenchError(f"wrk did not finish: {shlex.join(command)}") from None
    wall = time.monotonic() - started
    own_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (server.cpu_ticks() - ticks_before) / os.sysconf("SC_CLK_TCK")
    peak_rss_kib = server.peak_rss_kib()
    server.check_alive()
    if done.returncode != 0:
        raise BenchError(f"wrk failed ({done.returncode}): {shlex.join(command)}\n{done.stderr.strip()}")
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
        "wrk_cpu_s": round(
            (own_after.ru_utime - own_before.ru_utime) + (own_after.ru_stime - own_before.ru_stime), 2
        ),
        "wall_s": round(wall, 2),
        "wrk_output": done.stdout,
    }
    return run


# ---------------------------------------------------------------- running the tests


def run_test(test, servers, args, log):
    """Primer and warm-up per server, then each level: rounds x servers, alternating the order."""
    levels = args.levels[test.name]
    warm_path = test.url_path(QUERY_WARMUP_N) if test.kind == "queries" else test.path
    record = {"test": test.name, "level_name": test.level_name, "levels": levels, "servers": {}}

    for server in servers:
        record["servers"][server.name] = {"runs": [], "probe": None}
        path = test.url_path(levels[0])
        try:
            status, length = probe(server.host, server.port, path, test.accept)
        except (OSError, http.client.HTTPException) as e:
            server.check_alive()
            status, length = f"no answer ({e})", 0
        record["servers"][server.name]["probe"] = {"status": status, "body_bytes": length}
        if status != 200:
            record["failed"] = f"{server.name} answered {status} to {path}"
            log(f"!!! {test.name}: {record['failed']}; skipping this test")
            return record

    def url(server, path):
        return f"http://{server.host}:{server.port}{path}"

    def measure(server, phase, level, round_no, path, connections, threads, duration, pipelined):
        run = run_wrk(server, url(server, path), connections, threads, duration, test.accept, pipelined)
        run.update(phase=phase, level=level, round=round_no, path=path)
        record["servers"][server.name]["runs"].append(run)
        s = run["summary"]
        trouble = s["socket_errors"] or s["non_2xx"]
        log(
            f"{'!!! ' if trouble else ''}{test.name:9} {server.name:>12} {phase:7} "
            f"{test.level_name}={level if level is not None else '-':<5} c={connections:<5} "
            f"{s['requests_per_s']:>12,.0f} req/s  p99 {format_latency(s['latency_us']['p99']):>9}  "
            f"cpu {run['server_cpu_percent']:5.0f}%  errors {s['socket_errors']}  non-2xx {s['non_2xx']}"
        )

    for server in servers:
        primer_threads = min(PRIMER_CONNECTIONS, args.threads)
        measure(server, "primer", None, 0, warm_path, PRIMER_CONNECTIONS, primer_threads, args.primer, False)
        warmup_threads = min(args.max_concurrency, args.threads)
        measure(server, "warmup", None, 0, warm_path, args.max_concurrency, warmup_threads, args.warmup, False)
    time.sleep(args.pause_after_warmup)

    for level in levels:
        connections = args.max_concurrency if test.kind == "queries" else level
        threads = min(connections, args.threads)
        for round_no in range(1, args.rounds + 1):
            # Alternate who goes first (A B, B A, ...), so that drift of the machine hits both alike.
            order = servers if round_no % 2 == 1 else list(reversed(servers))
            for server in order:
                measure(
                    server, "level", level, round_no, test.url_path(level),
                    connections, threads, args.duration, test.kind == "pipelined",
                )  # fmt: skip
                time.sleep(args.pause_between_levels)
    return record


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
                "requests_per_cpu_s": statistics.median(per_cpu) if per_cpu else None,
                "peak_rss_kib": max(r["server_peak_rss_kib"] for r in runs),
                "connections": runs[0]["connections"],
            }
    return rows


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
    return [r for r in record["servers"][name]["runs"] if r["phase"] == "level" and r["level"] == level]


def rate(run):
    return run["summary"]["requests_per_s"]


def rate_per_cpu(run):
    return run["requests_per_cpu_s"]


def ratios(record, candidate, baseline, metric):
    """Per level: the ratio of the two servers' medians of `metric`, and each round's own ratio."""
    out = {}
    for level in record["levels"]:
        mine = [r for r in level_runs(record, candidate, level) if metric(r)]
        theirs = [r for r in level_runs(record, baseline, level) if metric(r)]
        if not mine or not theirs:
            continue
        by_round = {r["round"]: metric(r) for r in theirs}
        paired = [metric(r) / by_round[r["round"]] for r in mine if r["round"] in by_round]
        out[level] = {
            "ratio": statistics.median(map(metric, mine)) / statistics.median(map(metric, theirs)),
            "paired": paired,
        }
    return out


def format_ratio(ratio):
    """`1.062 (3/3 rounds higher, 1.035–1.579)`: the ratio of medians, then the rounds' own ratios.

    Each round runs the two servers back to back, so a round's ratio is little affected by slow
    drift of the machine; when the rounds disagree on the direction, the difference is noise.
    """
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
        lines.append(f"- Database (from the environment): {meta['database']}")
    if meta.get("peak_rss_note"):
        lines.append(f"- Note: {meta['peak_rss_note']}")
    for name in names:
        lines.append(f"- `{name}`: `{meta['servers'][name]}`")
    if machine["git_commit"]:
        lines.append(f"- Checkout that bench.py ran from: {machine['git_commit']} (git describe)")
    cfg = meta["config"]
    lines += [
        f"- Profile `{cfg['profile']}`: {cfg['duration']} s per level, {cfg['rounds']} round(s) per level "
        f"and server, primer {cfg['primer']} s at 8 connections, warm-up {cfg['warmup']} s at "
        f"{cfg['max_concurrency']} connections, wrk threads min({cfg['threads']}, connections), "
        f"plaintext pipelined {PIPELINE_DEPTH} deep, query tests at {cfg['max_concurrency']} connections",
        "- requests/s, p50, p99 and CPU are medians over the rounds; errors are totals; CPU is the "
        "server's utime+stime over wall time (100% = one core); peak RSS is VmHWM during the run",
    ]
    if len(names) > 1:
        lines.append(
            f"- ratio: median of `{names[0]}` over median of `{names[1]}`; in parentheses, how many rounds "
            "(the two servers back to back) agree on the direction, and the range of the rounds' own ratios. "
            "req per CPU-s (requests per second of server CPU time) is steadier than requests/s when "
            "other work shares the machine"
        )
    lines.append("")
    failures = collect_failures(records)
    if failures:
        lines += ["> **WARNING: this run had errors; its numbers are not valid.**", ">"]
        lines += [f"> - {f}" for f in failures]
        lines.append("")

    baseline = names[1] if len(names) > 1 else None
    for record in records:
        test = TESTS[record["test"]]
        lines.append(f"## {test.name}: `{test.url_path('N') if test.kind == 'queries' else test.path}`")
        lines.append("")
        if "failed" in record:
            lines += [f"**Not run: {record['failed']}.**", ""]
            continue
        rows = summarize(record)
        several_rounds = meta["config"]["rounds"] > 1
        header = [test.level_name]
        if test.kind == "queries":
            header.append("connections")
        header += ["server", "requests/s"]
        if several_rounds:
            header.append("runs (min–max)")
        header += ["p50", "p99", "socket errors", "non-2xx", "server CPU", "req per CPU-s", "peak RSS"]
        lines += table_header(header)
        for level in record["levels"]:
            for name in names:
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
                    format_rps(row["requests_per_cpu_s"]) if row["requests_per_cpu_s"] else "–",
                    format_mib(row["peak_rss_kib"]),
                ]
                lines.append("| " + " | ".join(cells) + " |")
        if baseline:
            lines.append("")
            lines += comparison_table(record, test, names[0], baseline, rows)
        lines.append("")
        totals = "; ".join(
            f"{name} {t['cpu_s']:.1f} s CPU, peak RSS {format_mib(t['peak_rss_kib'])}"
            for name in names
            for t in [test_totals(record["servers"][name])]
        )
        lines += [f"Whole test (primer and warm-up included): {totals}.", ""]
        lines += [f"![{test.name}: requests/s]({chart_name(test.name)})", ""]
    return "\n".join(lines)


def table_header(header):
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" if h == "server" else "---:" for h in header) + "|"]


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
            if t["socket_errors"] or t["non_2xx"]:
                failures.append(
                    f"{record['test']} / {name}: {t['socket_errors']} socket errors, "
                    f"{t['non_2xx']} non-2xx/3xx responses"
                )
    return failures


def chart_name(test_name):
    return f"chart-{test_name}.svg"


# ---------------------------------------------------------------- SVG chart

SERIES_COLOURS = ["#1f6fb4", "#d9480f", "#2b8a3e", "#862e9c"]


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
        legend_x = left + 200 * n
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
              for name in names]  # fmt: skip
    if test.kind == "queries":
        connections = next(row["connections"] for row in rows.values())
        x_label = f"queries per request (N), {connections} connections"
    elif test.kind == "pipelined":
        x_label = f"connections ({PIPELINE_DEPTH} requests pipelined)"
    else:
        x_label = "connections"
    return render_svg(f"{test.name}: requests/s", x_label, record["levels"], series)


# ---------------------------------------------------------------- main


def main(argv):
    args = parse_args(argv)
    ensure_wrk()
    open_files = raise_open_files_limit()
    now = datetime.now(timezone.utc)
    out_dir = Path(args.out) / now.strftime("%Y%m%dT%H%M%SZ")
    out_dir.mkdir(parents=True, exist_ok=False)
    command_line = shlex.join(["python3", sys.argv[0], *argv])
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
    if args.baseline and args.baseline_name == args.name:
        args.baseline_name = f"{args.baseline_name} (baseline)"
    servers = [Server(args.name, args.server, LOOPBACK, args.port, out_dir / "server.log")]
    if args.baseline:
        servers.append(
            Server(args.baseline_name, args.baseline, LOOPBACK, args.baseline_port, out_dir / "baseline.log")
        )
    names = [s.name for s in servers]
    for s in servers:
        meta["servers"][s.name] = s.command

    log_file = open(out_dir / "bench.log", "w")

    def log(message):
        print(message, flush=True)
        log_file.write(message + "\n")
        log_file.flush()

    log(f"results in {out_dir}")
    records = []
    try:
        for server in servers:
            server.start(args.startup_timeout)
        for name in args.tests:
            records.append(run_test(TESTS[name], servers, args, log))
    except BenchError as e:
        log(f"!!! {e}")
        meta["aborted"] = str(e)
    finally:
        for server in servers:
            server.stop()
        if any(not s.peak_reset_works for s in servers):
            meta["peak_rss_note"] = "clear_refs not writable: peak RSS is since the server started"
        meta["load_average"]["end"] = os.getloadavg()[0]

    for record in records:
        if "failed" not in record:
            record["summary"] = [{"server": name, "level": level, **row} for (name, level), row in summarize(record).items()]
            if len(names) > 1:
                record["ratios"] = {
                    metric.__name__: {str(level): r for level, r in ratios(record, *names, metric).items()}
                    for metric in (rate, rate_per_cpu)
                }
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "tests": records}, indent=1) + "\n")
    for record in records:
        if "failed" not in record:
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


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
