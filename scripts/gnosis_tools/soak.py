"""Soak: mixed load on all seven tests for a while, sampling the server's RSS and descriptors.

    scripts/tool soak [SECONDS] [--faults] [--pause SECONDS]

Mixed load on all seven TFB tests for SECONDS (default 600), sampling the server's RSS and open
descriptors every 10 s; both must stay flat. Not part of CI.

--faults: a third of the way in, the database hangs (its postmaster and every backend stopped
with SIGSTOP) for --pause seconds (default 20), then resumes; two thirds of the way in, it is
restarted (pg_ctl restart -m fast). After each, the time until /db answers 200 again is
reported; the verdict compares the end with the last sample before the hang.

Uses a PostgreSQL cluster of its own (scripts/pg.sh with SOAK_PG_DIR, default
/tmp/gnosis-soak-pg, and SOAK_PG_PORT, default 55439), never the shared one, and stops it at
the end. SOAK_BINARY=gnosis-uring soaks the io_uring server (default: gnosis);
SOAK_PROFILE=debug soaks the debug build instead of building release; SOAK_PORT is the
server's port (default 8090).
"""

import http.client
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import ROOT
from .bench.proc import read_status_kib
from .bench.servers import probe
from .system import (LOOPBACK, SetupError, ensure_installed, exit_on_sigterm, free_port, local_sockets, log_tail, pg_sh,
                     socket_inodes_of)

LOAD_PATHS = ("/plaintext", "/json", "/db", "/queries?queries=20", "/updates?queries=20", "/fortunes",
              "/cached-queries?count=100")  # fmt: skip
SAMPLE_EVERY_S = 10
SERVER_LOG = Path("/tmp/gnosis-soak.log")
WRK_OUTPUT = "/tmp/gnosis-soak-wrk-{}.txt"
SHARED_PG_PORT, SHARED_PG_DIR = "55432", "/tmp/gnosis-pg"  # scripts/pg.sh's default cluster
# Flat: RSS may not grow by more than 10% nor descriptors by more than 16 from the base to the
# end; after the load, at most 4 more descriptors than before it.
FDS_GROWTH, FDS_LEFT = 16, 4


def add_arguments(parser):
    parser.add_argument("seconds", nargs="?", type=int, default=600,
                        help="how long the load lasts (default: %(default)s)")
    parser.add_argument("--faults", action="store_true", help="hang the database, then restart it, under the load")
    parser.add_argument("--pause", type=int, default=20, metavar="SECONDS",
                        help="how long the database hangs with --faults (default: %(default)s)")  # fmt: skip


@dataclass(frozen=True)
class Settings:
    """What the SOAK_* variables choose."""

    port: int
    profile: str
    binary: str
    pg_env: dict  # scripts/pg.sh's settings for the soak's own cluster

    @classmethod
    def from_environment(cls, environ):
        """ValueError for a binary or profile not offered, or for the shared cluster."""
        binary, profile = environ.get("SOAK_BINARY", "gnosis"), environ.get("SOAK_PROFILE", "release")
        if binary not in ("gnosis", "gnosis-uring"):
            raise ValueError("SOAK_BINARY is gnosis or gnosis-uring")
        if profile not in ("release", "debug"):
            raise ValueError("SOAK_PROFILE is release or debug")
        pg_dir, pg_port = environ.get("SOAK_PG_DIR", "/tmp/gnosis-soak-pg"), environ.get("SOAK_PG_PORT", "55439")
        if pg_port == SHARED_PG_PORT or pg_dir == SHARED_PG_DIR:
            raise ValueError(f"refusing to use the shared cluster (port {SHARED_PG_PORT}, {SHARED_PG_DIR})")
        pg_env = {"GNOSIS_PG_DIR": pg_dir, "GNOSIS_PG_PORT": pg_port, "GNOSIS_PG_SOCKET_DIRS": f"{pg_dir}/socket"}
        return cls(int(environ.get("SOAK_PORT", "8090")), profile, binary, pg_env)

    def postmaster_and_backends(self):
        """The database's processes: its postmaster (from postmaster.pid) and its children."""
        try:
            postmaster = Path(self.pg_env["GNOSIS_PG_DIR"], "data", "postmaster.pid").read_text().split("\n", 1)[0]
        except OSError:
            return []
        children = subprocess.run(["pgrep", "-P", postmaster], capture_output=True, text=True).stdout.split()
        return [int(pid) for pid in [postmaster, *children] if pid.isdigit()]


def run(args):
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    try:
        settings = Settings.from_environment(os.environ)
    except ValueError as e:
        print(f"soak: {e}", file=sys.stderr)
        return 2
    try:
        return soak(settings, args.seconds, args.faults, args.pause)
    except (SetupError, subprocess.CalledProcessError) as e:
        print(f"soak: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def soak(settings, duration, faults, pause_for):
    ensure_installed("wrk", "wrk")
    release = ["--release"] if settings.profile == "release" else []
    subprocess.run(["cargo", "build", *release, "--locked", "--bin", settings.binary], cwd=ROOT, check=True)
    if pg_sh("start", settings.pg_env, capture=False).returncode != 0:
        raise SetupError("scripts/pg.sh start failed")
    client_env = dict(w.split("=", 1) for w in shlex.split(pg_sh("env", settings.pg_env).stdout) if "=" in w)
    port = settings.port
    started = time.monotonic()

    def elapsed():
        return int(time.monotonic() - started)

    with open(SERVER_LOG, "wb") as log:
        # Its other listeners on free ports: 8081, 8082 and 8443 may be another server's.
        others = [arg for flag in ("--tls-port", "--h2c-port", "--h2-tls-port") for arg in (flag, str(free_port()))]
        binary = ROOT / "target" / settings.profile / settings.binary
        server = subprocess.Popen([str(binary), "--port", str(port), *others],
                                  stderr=log, env=dict(os.environ, **settings.pg_env, **client_env))  # fmt: skip
    loads, stop_faults = [], threading.Event()
    injector = threading.Thread(target=inject_faults, daemon=True,
                                args=(settings, duration, pause_for, elapsed, stop_faults))  # fmt: skip
    try:
        for _ in range(50):
            if (status_of(port, "/cached-queries") or 0) // 100 == 2:
                break
            time.sleep(0.2)
        idle_fds = held_descriptors(server.pid, port)
        if faults:
            injector.start()
        for i, path in enumerate(LOAD_PATHS):
            # A little longer than the sampling, so that the last sample is still under load.
            with open(WRK_OUTPUT.format(i), "w") as out:
                loads.append(subprocess.Popen(
                    ["wrk", "-t", "1", "-c", "32", "-d", f"{duration + 5}s", "--timeout", "8",
                     "-H", "Connection: keep-alive", f"http://{LOOPBACK}:{port}{path}"],
                    stdout=out, stderr=subprocess.STDOUT))  # fmt: skip

        print(f"{'seconds':>8} {'rss_kib':>10} {'fds':>6}", flush=True)
        samples = []  # (seconds, rss_kib, fds)
        for tick in range(0, duration + 1, SAMPLE_EVERY_S):
            # Sample on the 10 s grid, whatever the fault injector's output took.
            time.sleep(max(0, started + tick - time.monotonic()))
            if server.poll() is not None:
                print(f"soak: {settings.binary} died; its log:\n{log_tail(SERVER_LOG, 20)}")
                return 1
            samples.append((tick, read_status_kib(server.pid, "VmRSS:"), held_descriptors(server.pid, port)))
            print("%8d %10d %6d" % samples[-1], flush=True)
        for load in loads:
            load.wait()
        if injector.is_alive():
            injector.join()
        # Once the clients are gone, lingering closes (2 s) and the sweep (1 s) end their connections.
        time.sleep(4)
        after_fds = held_descriptors(server.pid, port)
        print(f"descriptors: {idle_fds} before the load, {after_fds} after it")
        print_wrk_totals()
        print(f"server log: {len(SERVER_LOG.read_bytes().splitlines())} lines ({SERVER_LOG})")
        return verdict(samples, idle_fds, after_fds, duration // 3 if faults else None)
    finally:
        stop_faults.set()
        for process in [*loads, server]:
            if process.poll() is None:
                process.terminate()
        resume(settings)  # never leave the database stopped
        for process in [*loads, server]:
            process.wait()
        pg_sh("stop", settings.pg_env, capture=False)


def verdict(samples, idle_fds, after_fds, faults_at):
    """Flat or not, said; the exit status. The base: after the first minute (warm-up), or with
    faults the last sample before the database hung."""
    base = samples[min(6, len(samples) - 1)]
    if faults_at is not None:
        base = next((s for s in reversed(samples) if s[0] < faults_at), base)
    (when, base_rss, base_fds), (_, rss, fds) = base, samples[-1]
    what = f"at {when} s" + (", before the faults" if faults_at is not None else "")
    if rss > base_rss * 11 // 10 or fds > base_fds + FDS_GROWTH:
        print(f"soak: NOT flat: {what} {base_rss}:{base_fds}, at the end {rss}:{fds} (rss_kib:fds)")
        return 1
    if after_fds > idle_fds + FDS_LEFT:
        print(f"soak: descriptors left behind: {idle_fds} before the load, {after_fds} after it")
        return 1
    print(f"soak: flat (rss_kib:fds {what} {base_rss}:{base_fds}, at the end {rss}:{fds}; "
          f"{after_fds} descriptors after the load)")  # fmt: skip
    return 0


def inject_faults(settings, duration, pause_for, elapsed, stop):
    """The faults, on their own schedule beside the sampling; events printed as they happen.
    Returns early once `stop` is set (the database is resumed by whoever set it)."""
    if stop.wait(duration // 3):
        return
    hung = settings.postmaster_and_backends()
    print(f"fault at {elapsed()} s: database hangs for {pause_for} s (SIGSTOP {' '.join(map(str, hung))})", flush=True)
    signal_all(hung, signal.SIGSTOP)
    if stop.wait(pause_for):
        return
    signal_all(hung, signal.SIGCONT)
    print(f"fault at {elapsed()} s: database resumed; /db answers 200 after {time_to_db(settings.port)}", flush=True)
    if stop.wait(max(0, duration * 2 // 3 - elapsed())):
        return
    print(f"fault at {elapsed()} s: database restart (pg_ctl restart -m fast)", flush=True)
    pg_sh("restart", settings.pg_env)
    print(f"fault at {elapsed()} s: database accepting again; /db answers 200 after {time_to_db(settings.port)}",
          flush=True)  # fmt: skip


def resume(settings):
    signal_all(settings.postmaster_and_backends(), signal.SIGCONT)


def signal_all(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def status_of(port, path, timeout=10):
    """The status the server answers to `path`, or None."""
    try:
        return probe(LOOPBACK, port, path, "*/*", timeout)[0]
    except (OSError, http.client.HTTPException):
        return None


def time_to_db(port):
    """How long until /db answers 200 again, polled every 50 ms for up to two minutes."""
    since = time.monotonic()
    for _ in range(2400):
        if status_of(port, "/db", timeout=2) == 200:
            return f"{int((time.monotonic() - since) * 1000)} ms"
        time.sleep(0.05)
    return "never (2 minutes)"


def held_descriptors(pid, port):
    """The descriptors the server holds, plus the connections on its port that gnosis-uring holds
    as direct descriptors in its rings' file tables, which /proc/PID/fd does not list (a socket
    that nobody holds any more has inode 0 in /proc/net/tcp)."""
    held = socket_inodes_of(pid)
    direct = sum(1 for _, inode in local_sockets(port) if inode != "0" and inode not in held)
    return len(os.listdir(f"/proc/{pid}/fd")) + direct


def print_wrk_totals():
    """wrk's rate and error lines of every load, each distinct line once with its count."""
    lines = Counter()
    for i in range(len(LOAD_PATHS)):
        text = Path(WRK_OUTPUT.format(i)).read_text(errors="replace")
        lines.update(line for line in text.splitlines() if re.search("Requests/sec|Non-2xx|Socket errors", line))
    for line, count in sorted(lines.items()):
        print(f"{count:7d} {line}")
