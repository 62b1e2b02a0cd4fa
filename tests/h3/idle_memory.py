"""Memory per idle HTTP/3 connection: a server's resident set before and after N idle ones.

    python3 tests/h3/idle_memory.py [--connections N] BINARY...
    python3 tests/h3/idle_memory.py [--connections N] --pid PID --port UDP_PORT   (one JSON line)

Each BINARY (target/release/gnosis, target/release/gnosis-uring) is started in turn with one
worker (--threads 1) on free ports, with a certificate made for the run. aioquic, in this one
process, opens one connection that makes a request (the worker's buffers, TLS and the first
connection's allocations are then in place), the server's VmRSS is read, then N more
connections each make one request and stay open, idle; after two settling seconds VmRSS is
read again. Prints per binary the growth and the KiB per connection: (after - before) / N.
The server's idle timeout is raised past the run's length, so that no connection closes
before the second reading. With --pid and --port it measures a server already running
(tests/h3_hostile.rs does, and asserts); its idle timeout must outlast the run.
"""

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration

# Handshakes under way at once: under the server's 64 past which it asks for a Retry.
AT_ONCE = 32


class Client(QuicConnectionProtocol):
    """One request, its status and body, then nothing."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.done = asyncio.get_running_loop().create_future()
        self.status, self.body = None, b""

    def quic_event_received(self, event):
        for h3_event in self.h3.handle_event(event):
            if isinstance(h3_event, HeadersReceived):
                self.status = self.status or dict(h3_event.headers).get(b":status")
            elif isinstance(h3_event, DataReceived):
                self.body += h3_event.data
            if getattr(h3_event, "stream_ended", False) and not self.done.done():
                self.done.set_result(None)

    async def get(self, path, port):
        stream = self._quic.get_next_available_stream_id()
        self.h3.send_headers(stream, [(b":method", b"GET"), (b":scheme", b"https"),
                                      (b":authority", f"localhost:{port}".encode()), (b":path", path.encode())],
                             end_stream=True)
        self.transmit()
        await asyncio.wait_for(self.done, 30)
        return self.status, self.body


def free_port(kind):
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def make_certificate(folder):
    cert, key = Path(folder) / "server.crt", Path(folder) / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)  # fmt: skip
    return cert, key


@contextlib.contextmanager
def server(binary, cert, key, log):
    """The server running with one worker; its pid and UDP port."""
    port, h3 = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_DGRAM)
    others = [free_port(socket.SOCK_STREAM) for _ in range(3)]
    env = dict(os.environ, TLS_CERT=str(cert), TLS_KEY=str(key), PGHOST="/nonexistent-gnosis-database")
    args = [binary, "--threads", "1", "--port", str(port), "--h2c-port", str(others[0]), "--tls-port",
            str(others[1]), "--h2-tls-port", str(others[2]), "--h3-port", str(h3), "--idle-timeout", "900000"]
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{binary} did not start (see {log.name})")
            time.sleep(0.05)
        yield process.pid, h3
    finally:
        process.terminate()
        process.wait(10)


async def open_idle(port, count, stack, clients):
    """`count` connections, each with one request answered 200, left open (in `clients`)."""
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, idle_timeout=900)
    config.verify_mode = ssl.CERT_NONE

    async def one():
        client = await stack.enter_async_context(connect("127.0.0.1", port, configuration=config,
                                                         create_protocol=Client))
        clients.append(client)
        status, body = await client.get("/baseline2?a=1&b=1", port)
        if status != b"200" or body != b"2":
            raise RuntimeError(f"unexpected answer {status} {body!r}")

    for start in range(0, count, AT_ONCE):
        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(min(AT_ONCE, count - start)))), 60)


async def close_all(clients):
    """Closes them at once: one at a time, each would wait its closing period (3 PTOs)."""
    for client in clients:
        client.close()
    await asyncio.wait_for(asyncio.gather(*(client.wait_closed() for client in clients)), 60)


async def measure(pid, port, connections):
    """The server `pid`'s VmRSS before and after `connections` idle ones on UDP `port`."""
    clients = []
    async with contextlib.AsyncExitStack() as stack:
        try:
            await open_idle(port, 1, stack, clients)
            await asyncio.sleep(1)
            before = vm_rss_kib(pid)
            started = time.monotonic()
            await open_idle(port, connections, stack, clients)
            opened = time.monotonic() - started
            await asyncio.sleep(2)
            after = vm_rss_kib(pid)
        finally:
            await close_all(clients)
    return {"connections": connections, "opened_s": round(opened, 1), "before_kib": before, "after_kib": after,
            "kib_per_connection": round((after - before) / connections, 1)}  # fmt: skip


def report(name, m):
    print(f"{name}: {m['connections']} idle connections (opened in {m['opened_s']} s): VmRSS {m['before_kib']} KiB "
          f"-> {m['after_kib']} KiB, +{m['after_kib'] - m['before_kib']} KiB, {m['kib_per_connection']} KiB per "
          "connection", flush=True)  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binaries", nargs="*", metavar="BINARY")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--pid", type=int, help="measure this running server instead (with --port)")
    parser.add_argument("--port", type=int, help="its HTTP/3 port")
    args = parser.parse_args()
    if bool(args.binaries) == (args.pid is not None):
        parser.error("either BINARY... or --pid and --port")
    # A socket per connection, and aioquic's event loop's own.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.connections + 256)), hard))
    if args.pid is not None:
        print(json.dumps(asyncio.run(measure(args.pid, args.port, args.connections))))
        return
    with tempfile.TemporaryDirectory(prefix="gnosis-idle-memory-") as folder:
        cert, key = make_certificate(folder)
        for binary in args.binaries:
            with tempfile.NamedTemporaryFile("w+", prefix="gnosis-idle-memory-", suffix=".log") as log:
                with server(binary, cert, key, log) as (pid, port):
                    report(Path(binary).name, asyncio.run(measure(pid, port, args.connections)))


if __name__ == "__main__":
    sys.exit(main())
