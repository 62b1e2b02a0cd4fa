"""System calls per HTTP request: counted on a server (perf, or strace) during one wrk run of each test.

Each server in turn (one at a time, on one port) gets an untraced warm-up of each test, then
the counter attaches to every thread of it, wrk runs, the counter detaches, and each system
call's count is divided by the requests wrk completed while it was attached. `perf stat` of the
syscalls tracepoints (the default) hardly slows the server; `--tracer strace` (`strace -c -f`)
stops it at every call, so each wake-up finds more work than it would untraced and the counts
per request differ from an untraced run's. The database servers use TFB's database where the
anchors look for it (tfb-database:5432, started if need be and left running).

    scripts/tool syscalls --server "target/release/gnosis --port {port}" --name gnosis \\
      --anchors xitca-web,sark --tests queries,db,json,plaintext,baseline
"""

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from .bench.anchors import DEFAULT_ANCHORS_DIR, DEFAULT_HTTPARENA_DIR, ANCHOR_PORT, parse_anchor_list
from .bench.catalog import TESTS, DB_TESTS, expand_tests
from .bench.databases import ANCHOR_DB_CLIENT_ENV, AnchorDatabase
from .bench.load import parse_wrk_output, raise_open_files_limit, wrk_command
from .bench.pace import h2load_command, h2load_counts
from .bench.servers import Server
from .system import ensure_installed

LOOPBACK = "127.0.0.1"
# The level of each test: TFB's top level (queries: N = 20 over 512 connections), plaintext at
# 256 connections and HttpArena's pipelined at its first count, 512, both 16 pipelined; the others
# at --connections (HttpArena's fixed-rate profiles at their 1,024).
LEVELS = {"queries": 20, "updates": 20, "cached": 100, "plaintext": 256, "pipelined": 512}
CONNECTIONS = 512
FIXED_RATE_CONNECTIONS = 1024
# The calls perf counts one by one (each event counted costs the server at every context switch:
# not all of syscalls:sys_enter_*); the others are counted together.
PERF_COUNTED = ("epoll_wait", "epoll_pwait", "epoll_pwait2", "io_uring_enter", "read", "recvfrom", "recvmsg", "write",
                "sendto", "sendmsg", "writev", "epoll_ctl", "accept4", "close", "shutdown", "futex", "setsockopt",
                "openat", "statx", "socket", "connect")  # fmt: skip
# The calls shown as columns, in this order; the rest are summed in "other".
COLUMNS = ("epoll_wait", "epoll_pwait", "io_uring_enter", "read", "recvfrom", "write", "sendto", "writev",
           "epoll_ctl", "accept4", "close")  # fmt: skip


def add_arguments(p):
    p.add_argument("--server", action="append", default=[], help="a command line with {port}; repeat for more")
    p.add_argument("--name", action="append", default=[], help="the name of each --server, in order")
    p.add_argument("--anchors", default="", help="anchors too (e.g. xitca-web,sark), each on the tests it serves")
    p.add_argument("--tests", default="queries,db,json,plaintext,baseline")
    p.add_argument("--duration", type=int, default=4, help="seconds of the traced wrk run (default %(default)s)")
    p.add_argument("--warmup", type=int, default=2, help="seconds of the untraced warm-up (default %(default)s)")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="wrk threads")
    p.add_argument("--tracer", choices=("perf", "strace"), default="perf",
                   help="perf: `perf stat` of the syscalls:sys_enter_* tracepoints (the default: it hardly slows the "
                   "server); strace: `strace -c -f` (stops the server at every call, so each wake-up finds more)")
    p.add_argument("--connections", type=int, default=CONNECTIONS,
                   help="wrk's connections but for plaintext (default %(default)s)")
    p.add_argument("--port", type=int, default=ANCHOR_PORT)
    p.add_argument("--out", default=None, help="directory for logs and strace's output (default: a new one in /tmp)")


def run(args):
    ensure_installed(*(("strace", "strace") if args.tracer == "strace" else ("perf", "linux-perf")))
    ensure_installed("wrk", "wrk")
    raise_open_files_limit(max(args.connections, FIXED_RATE_CONNECTIONS))
    if len(args.name) > len(args.server):
        raise SystemExit("more --name than --server")
    names = args.name + [f"server{i + 1}" for i in range(len(args.name), len(args.server))]
    tests = expand_tests(args.tests)
    out = Path(args.out or tempfile.mkdtemp(prefix="gnosis-syscalls-"))
    out.mkdir(parents=True, exist_ok=True)
    servers = [Server(name, command, LOOPBACK, args.port, out / f"{name}.log", env=ANCHOR_DB_CLIENT_ENV)
               for name, command in zip(names, args.server)]  # fmt: skip
    for anchor in parse_anchor_list(args.anchors) if args.anchors else []:
        path = anchor.path(DEFAULT_ANCHORS_DIR, DEFAULT_HTTPARENA_DIR)
        servers.append(Server(anchor.name, str(path), LOOPBACK, args.port, out / f"{anchor.name}.log", anchor=anchor))
    if any(t in DB_TESTS for t in tests):
        AnchorDatabase(lambda line: print(line, flush=True)).start()  # left running: others may use it
    rows = []
    for server in servers:
        served = [t for t in tests if server.serves(TESTS[t])]
        if not served:
            continue
        server.start(timeout=30)
        try:
            for name in served:
                rows.append((name, server.name, measure(server, TESTS[name], args, out)))
        finally:
            server.stop()
    print()
    print(table(rows))
    print(f"\nthe counts and the servers' logs: {out}")
    return 0


def connections_of(test, connections):
    """wrk's connections for `test`: a pipelined test's level, a paced one's 1,024, or `connections`."""
    if test.kind == "pipelined":
        return LEVELS[test.name]
    return FIXED_RATE_CONNECTIONS if test.rate else connections


def measure(server, test, args, out):
    """The calls per request of one traced wrk run of `test` against `server`."""
    level = LEVELS.get(test.name)
    path = server.url_path(test, level)
    connections = connections_of(test, args.connections)
    url = f"http://{server.host}:{server.port}{path}"
    mix = (test.requests, test.close_every) if test.requests else None
    pipelined = test.kind == "pipelined"

    def wrk(duration):
        threads = min(args.threads, connections)
        if test.rate:  # paced by h2load, without its warm-up: the counter sees every request it counts
            command = h2load_command(url, connections, threads, duration, test.rate)
            cut = command.index("--warm-up-time")
            command = command[:cut] + command[cut + 2 :]
        else:
            command = wrk_command(url, connections, threads, duration, test.accept, pipelined, mix)
        done = subprocess.run(command, capture_output=True, text=True, timeout=duration + 60)
        return {"requests": h2load_counts(done.stdout).get("2xx", 0)} if test.rate else parse_wrk_output(done.stdout)

    wrk(args.warmup)
    # Untraced: the server's CPU per request and its rate, as they are without a counter.
    ticks = server.cpu_ticks()
    untraced = wrk(args.duration)["requests"]
    cpu_us = (server.cpu_ticks() - ticks) / os.sysconf("SC_CLK_TCK") * 1e6 / max(untraced, 1)
    pids = [str(pid) for pid in server.pids(measured_only=True)]
    trace_file = out / f"{args.tracer}-{server.name}-{test.name}.txt"
    if args.tracer == "strace":
        tasks = [tid for pid in pids for tid in os.listdir(f"/proc/{pid}/task")]
        command = ["strace", "-c", "-f", "-o", str(trace_file)] + [a for t in tasks for a in ("-p", t)]
    else:
        events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{name}" for name in PERF_COUNTED]
        command = ["perf", "stat", "-x,", "-o", str(trace_file), "-e", ",".join(events), "-p", ",".join(pids)]
    tracer = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    time.sleep(1)  # attached to every thread before the load starts
    requests = wrk(args.duration)["requests"]
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=30)
    text = trace_file.read_text()
    calls = parse_strace_summary(text) if args.tracer == "strace" else parse_perf_stat(text)
    print(f"{test.name:10} {server.name:14} {requests:>9,} requests traced ({untraced / args.duration:,.0f}/s untraced), "
          f"{sum(calls.values()):>10,} calls", flush=True)  # fmt: skip
    per_request = {name: count / requests for name, count in calls.items()} if requests else {}
    return per_request, untraced / args.duration, cpu_us


def parse_strace_summary(text):
    """{syscall: calls} from `strace -c`'s table (errors counted among the calls)."""
    calls = {}
    for line in text.splitlines():
        words = line.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(words) >= 5 and words[-1] != "total" and words[3].isdigit():
            calls[words[-1]] = int(words[3])
    return calls


def parse_perf_stat(text):
    """{syscall: calls} from `perf stat -x,` of raw_syscalls:sys_enter and the PERF_COUNTED
    tracepoints: the calls of none of them as "other"."""
    calls, total = {}, 0
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        if fields[2] == "raw_syscalls:sys_enter":
            total = int(fields[0])
        elif fields[2].startswith("syscalls:sys_enter_") and int(fields[0]):
            calls[fields[2].removeprefix("syscalls:sys_enter_")] = int(fields[0])
    calls["other"] = max(0, total - sum(calls.values()))
    return calls


def table(rows):
    """A Markdown table: one row per test and server, calls per request."""
    shown = [c for c in COLUMNS if any(per.get(c) for _, _, (per, _, _) in rows)]
    lines = ["| test | server | " + " | ".join(shown) + " | other | all | untraced: requests/s | server CPU µs |",
             "|---|---|" + "---:|" * (len(shown) + 4)]  # fmt: skip
    for test, server, (per, rate, cpu_us) in rows:
        other = sum(v for k, v in per.items() if k not in shown)
        cells = [f"{per.get(c, 0):.2f}" for c in shown] + [f"{other:.2f}", f"{sum(per.values()):.2f}", f"{rate:,.0f}",
                                                             f"{cpu_us:.1f}"]  # fmt: skip
        lines.append(f"| {test} | {server} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

