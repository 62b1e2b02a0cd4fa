"""wrk (gcannon for the WebSocket tests): its command line with our Lua scripts, one measured run,
its output parsed, and how many connections this machine lets it hold open."""

import json
import os
import resource
import shlex
import subprocess
import time
from pathlib import Path

from ..system import SetupError, read_proc_stat
from .anchors import GCANNON
from .catalog import TESTS
from .proc import postgres_cpu_ticks, tcp_active_opens, ticks_since
from .workload import PIPELINE_DEPTH


LUA_DIR = Path(__file__).resolve().parent
REPORT_LUA = LUA_DIR / "report.lua"
PIPELINE_LUA = LUA_DIR / "pipeline.lua"
MIX_LUA = LUA_DIR / "mix.lua"
JSON_MARKER = "BENCH_JSON "
WRK_TIMEOUT_S = 8
READS_MARK, WRITES_MARK = "=== h2load-reads ===", "=== h2load-writes ==="


class LoadFailed(Exception):
    """The load generator did not finish its run (Debian's h2load now and then never ends a run
    against nginx over TLS), or failed while the server lived on (gcannon now and then exits 1
    in a warm-up against sark): that run is void, not the whole session."""


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


def gcannon_command(url, connections, duration, pipelined, per_connection):
    """HttpArena's WebSocket load (its scripts/lib/tools/gcannon.sh): one gcannon thread, which
    leaves the server a core on two; 16 messages in flight when pipelined; a new connection
    every `per_connection` messages when set."""
    command = [str(GCANNON), url, "--ws", "-c", str(connections), "-t", "1", "-d", f"{duration}s", "--json"]
    if pipelined:
        command += ["-p", str(PIPELINE_DEPTH)]
    if per_connection:
        command += ["-r", str(per_connection)]
    return command


def parse_gcannon_output(stdout):
    """gcannon's --json result as wrk's summary: a request is a message echoed."""
    result = json.loads(stdout[stdout.index("{") :])
    latency = result["latency_us"]
    errors = result["errors"]
    status = result["status"]
    seconds = result["elapsed_sec"]
    return {
        "requests": result["responses"],
        "requests_per_s": result["responses"] / seconds if seconds > 0 else 0.0,
        "duration_us": seconds * 1e6,
        "latency_us": {"p50": latency["p50"], "p75": None, "p90": latency["p90"], "p99": latency["p99"]},
        "errors": errors,
        "socket_errors": errors["connect"] + errors["read"] + errors["timeout"],
        "non_2xx": status["4xx"] + status["5xx"] + status["other"],
        "closes": 0,  # gcannon closes its own connections (-r): none asks the server to
        "ws_upgrades": result.get("ws_upgrades"),
    }


def run_wrk(server, url, connections, threads, duration, accept, pipelined, mix=None):
    """One wrk run against `server`, measured (see `run_load`)."""
    command = wrk_command(url, connections, threads, duration, accept, pipelined, mix)
    return run_load(server, command, connections, threads, duration, parse_wrk_output)


def run_gcannon(server, url, connections, duration, pipelined, per_connection):
    """One gcannon --ws run against `server`, measured (see `run_load`)."""
    command = gcannon_command(url, connections, duration, pipelined, per_connection)
    return run_load(server, command, connections, 1, duration, parse_gcannon_output)


def run_load(server, command, connections, threads, duration, parse, measured_after=0, also=None):
    """One load generator's run against `server`, with the server's CPU time, peak RSS, and the
    CPU time of PostgreSQL and of the load generator itself: on one machine the three share the
    cores. `parse` reads its output into wrk's summary. With `measured_after`, the CPU figures
    leave out the run's first seconds (a generator's warm-up: its connections made, their TLS
    handshakes): they count from that many seconds into the run. With `also`, a second generator's
    command line run at the same time (production-stack's writes): `parse` reads both outputs, the
    generators' CPU is both's."""
    server.check_alive()
    server.reset_peak_rss()
    opened_before = tcp_active_opens()
    own_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    generator = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = also and subprocess.Popen(also, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(measured_after)
        # Until reaped, a generator that ended in its warm-up still has its /proc entry.
        generator_before = read_proc_stat(generator.pid)[3] if measured_after else 0
        ticks_before = server.cpu_ticks()
        postgres_before = postgres_cpu_ticks()
        window_opened = time.monotonic()
        stdout, stderr = generator.communicate(timeout=duration + 60)
        also_stdout, also_stderr = second.communicate(timeout=duration + 60) if second else ("", "")
    except subprocess.TimeoutExpired:
        for process in (generator, second):
            if process and process.poll() is None:
                process.kill()
                process.communicate()
        late = " and ".join(shlex.join(c) for c in (command, also) if c)
        raise LoadFailed(f"{command[0]} did not finish within {duration + 60} s: {late}") from None
    wall = time.monotonic() - window_opened
    own_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (server.cpu_ticks() - ticks_before) / os.sysconf("SC_CLK_TCK")
    postgres_cpu_s = ticks_since(postgres_before, postgres_cpu_ticks()) / os.sysconf("SC_CLK_TCK")
    wrk_cpu_s = (own_after.ru_utime - own_before.ru_utime) + (own_after.ru_stime - own_before.ru_stime)
    wrk_cpu_s -= generator_before / os.sysconf("SC_CLK_TCK")
    peak_rss_kib = server.peak_rss_kib()
    opened = tcp_active_opens() - opened_before
    server.check_alive()
    if generator.returncode != 0:
        raise LoadFailed(f"{command[0]} failed ({generator.returncode}): {shlex.join(command)} {stderr.strip()}".strip())
    if second and second.returncode != 0:
        raise LoadFailed(f"{also[0]} failed ({second.returncode}): {shlex.join(also)} {also_stderr.strip()}".strip())
    summary = parse(stdout, also_stdout) if second else parse(stdout)
    if second:  # both outputs, marked as HttpArena's h2load_run marks them
        stdout = f"{READS_MARK}\n{stdout}{WRITES_MARK}\n{also_stdout}"
    run = {
        "command": shlex.join(command) + (f" & {shlex.join(also)}" if second else ""),
        "connections": connections,
        "threads": threads,
        "summary": summary,
        "server_cpu_s": round(cpu_s, 2),
        "server_cpu_percent": round(100 * cpu_s / wall, 1),
        # Requests per second of server CPU: on a shared machine much steadier than requests/s.
        "requests_per_cpu_s": round(summary["requests"] / cpu_s) if cpu_s > 0 else None,
        "server_peak_rss_kib": peak_rss_kib,
        "server_rss_at_start_kib": server.rss_at_start_kib,
        # TCP connections this network namespace opened meanwhile: the load's, and a few of others'.
        "connections_opened": opened,
        "postgres_cpu_percent": round(100 * postgres_cpu_s / wall, 1),
        "postgres_cpu_s": round(postgres_cpu_s, 2),
        "wrk_cpu_s": round(wrk_cpu_s, 2),
        "wrk_cpu_percent": round(100 * wrk_cpu_s / wall, 1),
        "wall_s": round(wall, 2),
        "wrk_output": stdout,
    }
    return run


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
