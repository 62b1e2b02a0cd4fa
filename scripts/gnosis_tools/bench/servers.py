"""The servers measured: each started in its own session, watched, measured through /proc and
stopped with every process it made; a lineup takes turns on a shared port."""

import http.client
import os
import signal
import socket
import ssl
import subprocess
import time

from ..system import SetupError, log_tail, port_in_use, port_open, port_owners, read_proc_stat
from .proc import cpu_model, proc_stats, read_status_kib, server_preexec, thread_count


# How long a port held by no visible process may take to be released.
PORT_RELEASE_WAIT = 15


class Server:
    """A server started in its own session; its CPU and memory are those of every process in it.

    A command line runs under /bin/sh; an anchor's binary (or wrapper script) runs directly,
    without arguments. It can be stopped and started again (anchors sharing port 8080 take turns).
    """

    def __init__(self, name, command, host, port, log_path, anchor=None, env=None, tests=None, one_worker_command=None,
                 tls_port=None, h2c_port=None, h2_tls_port=None, production_command=None, auth_port=None):  # fmt: skip
        self.name = name
        self.command = command.replace("{port}", str(port))
        self.host = host
        self.port = port
        self.tls_port = tls_port or (anchor and anchor.tls_port)  # where it serves HTTP/1.1 over TLS, if it does
        # Where it serves h2c by prior knowledge and h2 over TLS (ALPN), if it does.
        self.h2c_port = h2c_port or (anchor and anchor.h2c_port)
        self.h2_tls_port = h2_tls_port or (anchor and anchor.h2_tls_port)
        self.log_path = log_path
        self.anchor = anchor
        self.env = env  # added to the inherited environment
        self.tests = anchor.tests if anchor and tests is None else tests  # None: every test
        self.one_worker_command = one_worker_command and one_worker_command.replace("{port}", str(port))
        self.one_worker = False  # whether it runs (or last ran) its one-worker command
        # A gateway stack's command line for production-stack (with the auth service on auth_port).
        self.production_command = production_command and production_command.replace("{port}", str(port))
        self.auth_port = auth_port
        self.production = False  # whether it runs (or last ran) its production command
        self.process = None
        self.stopped = True  # not started yet, or stopped on purpose
        self.starts = 0
        self.peak_reset_works = True
        self.rss_at_start_kib = None  # once it opened its port, before any load

    def serves(self, test):
        if test.one_worker and not self.one_worker_command or test.tls and not self.tls_port:
            return False
        if test.production and not self.production_command:
            return False
        if test.h2 in ("tls", "h3") and not self.h2_tls_port or test.h2 == "h2c" and not self.h2c_port:
            return False
        return self.tests is None or test.name in self.tests

    def url_path(self, test, level):
        return self.anchor.url_path(test, level) if self.anchor else test.url_path(level)

    def is_up(self):
        """Started and not stopped on purpose (it may have died since: check_alive says so)."""
        return self.process is not None and not self.stopped

    def start(self, timeout, one_worker=False, production=False):
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
        self.one_worker, self.production = one_worker, production
        command = self.production_command if production else self.one_worker_command if one_worker else self.command
        with open(self.log_path, "ab") as log:
            log.write(f"--- bench: start {self.starts} of {self.name}: {command}\n".encode())
            log.flush()
            print(f"starting {self.name}: {command}", flush=True)
            env = dict(os.environ, **self.env) if self.env else None
            argv, shell = (command, True) if self.anchor is None else ([command], False)
            try:
                self.process = subprocess.Popen(
                    argv, shell=shell, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                    preexec_fn=server_preexec(),
                )
            except OSError as e:
                raise SetupError(f"cannot start {self.name} ({command}): {e}") from None
        self.stopped = False
        deadline = time.monotonic() + timeout
        # Every TCP port it was given: a stack's edge (gateway.py) opens its own after the
        # application's, the one a test goes to.
        for port in self.tcp_ports():
            while not port_open(self.host, port):
                if self.process.poll() is not None:
                    self.stopped = True
                    raise SetupError(self.death_notice(f"exited before it opened port {port}"))
                if time.monotonic() > deadline:
                    raise SetupError(f"{self.name} did not open port {port} within {timeout:.0f} s; see {self.log_path}")
                time.sleep(0.1)
        self.rss_at_start_kib = self.rss_kib()

    def tcp_ports(self):
        """Its port, then each of its TLS and HTTP/2 ports it has, once each (with its production
        command, its auth service's after its port)."""
        ports = (self.port, self.production and self.auth_port, self.tls_port, self.h2c_port, self.h2_tls_port)
        return list(dict.fromkeys(p for p in ports if p))

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
                found.append(f"{read_proc_stat(pid)[0]}[{pid}] {thread_count(pid)} threads")
            except (OSError, ValueError, IndexError):
                continue
        return found

    def cpu_ticks(self):
        return self.sum_over_processes(lambda pid: read_proc_stat(pid)[3])

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
        return self.sum_over_processes(lambda pid: read_status_kib(pid, "VmHWM:"))

    def rss_kib(self):
        """Sum over the session's processes of their RSS now."""
        return self.sum_over_processes(lambda pid: read_status_kib(pid, "VmRSS:"))

    def sum_over_processes(self, measure):
        """`measure(pid)` summed over the measured processes, but those that end meanwhile."""
        total = 0
        for pid in self.pids(measured_only=True):
            try:
                total += measure(pid)
            except (OSError, ValueError, IndexError):
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


class Lineup:
    """Starts the servers a test needs; a server whose port another one holds waits for it to stop."""

    def __init__(self, servers, timeout, log):
        self.servers = servers
        self.timeout = timeout
        self.log = log

    def bring_up(self, wanted, one_worker=False, production=False):
        """Each wanted server up, with one worker or its usual number, with its production command
        or its usual one (restarted to change)."""
        for server in wanted:
            for other in self.servers:
                if other is not server and other.port == server.port and other.is_up():
                    other.check_alive()
                    self.log(f"--- stopping {other.name}: {server.name} needs port {server.port}")
                    other.stop()
            if server.is_up():
                server.check_alive()
                if (server.one_worker, server.production) == (one_worker, production):
                    continue
                how = "its production stack" if production else "one worker" if one_worker else "its usual command"
                self.log(f"--- restarting {server.name} with {how}")
                server.stop()
            server.start(self.timeout, one_worker, production)
            self.log(f"--- {server.name} is up on port {server.port}: {', '.join(server.processes())}")

    def stop_all(self):
        for server in self.servers:
            server.stop()


def preflight(servers):
    """Before anything starts: the anchors' binaries exist, and no port of the run is taken."""
    for server in servers:
        if server.anchor and not os.access(server.command, os.X_OK):
            raise SetupError(
                f"anchor {server.name}: no executable {server.command} (see ../shared/anchors/README.md beside "
                "the checkout, or --anchors-dir, --httparena-dir, GNOSIS_SHARED_DIR)"
            )
    ports = {s: s.anchor.ports if s.anchor else
             tuple(p for p in (s.port, s.tls_port, s.h2c_port, s.h2_tls_port, s.auth_port) if p)
             for s in servers}  # fmt: skip
    for port in sorted({p for used in ports.values() for p in used}):
        owner = port_in_use(port)
        if owner:
            users = ", ".join(s.name for s in servers if port in ports[s])
            raise SetupError(f"port {port}, needed by {users}, is already in use ({owner}): stop that first")


def probe(host, port, path, accept, timeout=10, tls=False, body=None):
    """One request before the load (a GET, or a POST of `body`), over TLS if `tls` (any
    certificate): a test the server lacks fails here, clearly."""
    if tls:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Host": "localhost", "Accept": accept}
        if body is not None:
            headers["Content-Type"] = "application/octet-stream"
        conn.request("POST" if body is not None else "GET", path, body=body, headers=headers)
        response = conn.getresponse()
        body = response.read()
        return response.status, len(body)
    finally:
        conn.close()


def probe_upgrade(host, port, path, timeout=10):
    """A WebSocket handshake before the load (RFC 6455's example key): its status, 101 if it
    switches; what follows a 101 is not read."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n".encode())  # fmt: skip
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed before answering the handshake")
            head += chunk
        return int(head.split(b" ", 2)[1]), 0
