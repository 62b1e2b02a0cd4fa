"""Self-test of `scripts/tool syscalls`: both counters on a small real server under wrk (about 20 s;
needs wrk, perf and strace, and root for perf's tracepoints)."""

import os
import re
import shutil
import subprocess
import sys
import unittest

from gnosis_tools import ROOT
from gnosis_tools.bench.catalog import TESTS
from gnosis_tools.syscalls import connections_of
from gnosis_tools.system import free_port

SYSCALLS = [sys.executable, str(ROOT / "scripts" / "tool"), "syscalls"]
# A one-thread HTTP/1.1 server that answers every request with a small body, keeping the connection.
TINY_SERVER = (
    "from http.server import BaseHTTPRequestHandler, HTTPServer\n"
    "class H(BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def do_GET(self):\n"
    "        self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers()\n"
    "        self.wfile.write(b'{}')\n"
    "    def log_message(self, *args): pass\n"
    "HTTPServer(('127.0.0.1', int(__import__('sys').argv[1])), H).serve_forever()\n"
)


class ConnectionsTest(unittest.TestCase):
    def test_every_http1_test_has_its_connections(self):
        for name, test in TESTS.items():
            if test.h2 or test.websocket:
                continue  # not counted here: h2load and gcannon load them
            with self.subTest(test=name):
                self.assertIsInstance(connections_of(test, 512), int)


@unittest.skipUnless(shutil.which("wrk") and shutil.which("perf") and shutil.which("strace") and os.geteuid() == 0,
                     "needs wrk, perf, strace and root")  # fmt: skip
class SyscallsTest(unittest.TestCase):
    def test_each_counter_finds_a_receive_and_a_send_per_request(self):
        port = free_port()
        server = f"{sys.executable} -c \"{TINY_SERVER}\" {{port}}"
        for tracer in ("perf", "strace"):
            with self.subTest(tracer=tracer):
                done = subprocess.run(SYSCALLS + ["--server", server, "--name", "tiny", "--tests", "json",
                                                  "--connections", "4", "--threads", "1", "--duration", "1",
                                                  "--warmup", "1", "--port", str(port), "--tracer", tracer],
                                      capture_output=True, text=True, timeout=120)  # fmt: skip
                self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
                header = next(line for line in done.stdout.splitlines() if line.startswith("| test |"))
                row = next(line for line in done.stdout.splitlines() if line.startswith("| json | tiny |"))
                cells = dict(zip(header.strip("|").split(" | "), row.strip("|").split(" | ")))
                per_request = {k.strip(): float(v) for k, v in cells.items() if re.fullmatch(r"\s*[\d.]+\s*", v)}
                # One request in flight per connection: at least one receive and one send each.
                self.assertGreaterEqual(per_request.get("recvfrom", 0) + per_request.get("read", 0), 0.9, row)
                self.assertGreaterEqual(per_request.get("sendto", 0) + per_request.get("write", 0), 0.9, row)
                self.assertGreaterEqual(per_request["all"], 2, row)


if __name__ == "__main__":
    unittest.main()
