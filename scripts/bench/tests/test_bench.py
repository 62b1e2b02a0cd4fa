"""Self-test of scripts/bench.py: real wrk runs against small real servers, and the report writers.

Run: python3 -m unittest discover -s scripts/bench/tests -v   (takes about 10 s; needs wrk)
"""

import argparse
import importlib.util
import os
import shutil
import socket
import sys
import tempfile
import threading
import unittest
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BENCH_PY = Path(__file__).resolve().parents[2] / "bench.py"
spec = importlib.util.spec_from_file_location("bench", BENCH_PY)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

SVG = "{http://www.w3.org/2000/svg}"


class CountingHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive (so pipelining works); counts requests. 404 for /missing, 503 for
    /cached-queries?count=13 (an error in the middle of a test), 200 for anything else."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    seen = 0

    def do_GET(self):
        with CountingHandler.lock:
            CountingHandler.seen += 1
        body = b"Hello, World!"
        if self.path.startswith("/missing"):
            status = 404
        elif self.path == "/cached-queries?count=13":
            status = 503
        else:
            status = 200
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # wrk resets its connections when it stops: expected, not worth a traceback


class FakeServer:
    """What run_wrk needs of a Server, for a server living in this process (CPU/RSS not measured)."""

    def __init__(self, name="in-process", port=None):
        self.name = name
        self.host = "127.0.0.1"
        self.port = port

    def check_alive(self):
        pass

    def reset_peak_rss(self):
        pass

    def cpu_ticks(self):
        return 0

    def peak_rss_kib(self):
        return 0


@unittest.skipUnless(shutil.which("wrk"), "wrk is not installed")
class WrkRuns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.httpd = QuietHTTPServer(("127.0.0.1", 0), CountingHandler)
        cls.thread = threading.Thread(target=cls.httpd.serve_forever, daemon=True)
        cls.thread.start()
        cls.base = f"http://127.0.0.1:{cls.httpd.server_address[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.httpd.shutdown()
        cls.httpd.server_close()

    def wrk(self, path, pipelined=False):
        before = CountingHandler.seen
        run = bench.run_wrk(FakeServer(), self.base + path, 2, 1, 1, bench.ACCEPT_PLAIN, pipelined)
        return run["summary"], CountingHandler.seen - before

    def test_counts_answers_and_rate(self):
        summary, served = self.wrk("/ok")
        self.assertGreater(summary["requests"], 0)
        # wrk counts completed responses; the server may have seen a few more still in flight.
        self.assertLessEqual(summary["requests"], served)
        self.assertGreaterEqual(summary["requests"], served - 2)
        self.assertEqual(summary["non_2xx"], 0)
        self.assertEqual(summary["socket_errors"], 0)
        self.assertAlmostEqual(summary["requests_per_s"], summary["requests"] / (summary["duration_us"] / 1e6))
        latency = summary["latency_us"]
        self.assertLessEqual(latency["p50"], latency["p99"])
        self.assertLessEqual(latency["p99"], latency["max"])

    def test_error_answers_are_counted(self):
        summary, _ = self.wrk("/missing")
        self.assertGreater(summary["requests"], 0)
        self.assertEqual(summary["non_2xx"], summary["requests"])

    def test_baseline_run_tables_and_chart(self):
        """Two 'servers' (the same one), rounds, a level that fails, and what the report makes of it."""
        args = argparse.Namespace(
            levels={"cached": [1, 13]}, threads=1, primer=1, warmup=1, duration=1, max_concurrency=2,
            rounds=2, pause_after_warmup=0, pause_between_levels=0,
        )  # fmt: skip
        port = self.httpd.server_address[1]
        servers = [FakeServer("a", port), FakeServer("b", port)]
        record = bench.run_test(bench.TESTS["cached"], servers, args, log=lambda message: None)

        for name in ("a", "b"):
            runs = record["servers"][name]["runs"]
            self.assertEqual([r["phase"] for r in runs], ["primer", "warmup"] + ["level"] * 4)
            self.assertEqual(runs[0]["path"], "/cached-queries?count=2")
            self.assertEqual([(r["level"], r["round"]) for r in runs[2:]], [(1, 1), (1, 2), (13, 1), (13, 2)])
        rows = bench.summarize(record)
        self.assertEqual(rows[("a", 1)]["non_2xx"], 0)
        failing = [r for r in record["servers"]["a"]["runs"] if r["level"] == 13]
        self.assertEqual(rows[("a", 13)]["non_2xx"], sum(r["summary"]["requests"] for r in failing))
        self.assertGreater(rows[("a", 13)]["non_2xx"], 0)
        failures = bench.collect_failures([record])
        self.assertEqual(len(failures), 2)
        self.assertIn("cached / a", failures[0])

        meta = {
            "date": "2026-11-22 00:00 UTC", "command": "scripts/bench.py --baseline x",
            "machine": {"cpus": 2, "cpu_model": "cpu", "kernel": "6", "wrk": "wrk", "git_commit": None},
            "servers": {"a": "cmd a", "b": "cmd b"}, "load_average": {"start": 1.0, "end": 2.0},
            "database": "", "config": {
                "profile": "quick", "duration": 1, "rounds": 2, "primer": 1, "warmup": 1,
                "max_concurrency": 2, "threads": 1,
            },
        }  # fmt: skip
        table = bench.render_markdown(meta, [record], ["a", "b"])
        self.assertIn("WARNING: this run had errors", table)
        self.assertIn("| N | a requests/s | b requests/s | ratio |", table)
        self.assertRegex(table, r"\n\| 13 \| 2 \| a \| [\d,]+ \| 2 \(")
        chart = ET.fromstring(bench.chart_for(record, ["a", "b"]))
        self.assertEqual(len(chart.findall(f"{SVG}polyline")), 2)

    def test_pipelined_requests_all_answered(self):
        summary, served = self.wrk("/ok", pipelined=True)
        self.assertGreater(summary["requests"], 0)
        self.assertEqual(summary["socket_errors"], 0)
        # Each write carries 16 requests: the server sees whole batches.
        self.assertGreaterEqual(served, summary["requests"])
        self.assertLessEqual(served - summary["requests"], 2 * bench.PIPELINE_DEPTH)


@unittest.skipUnless(shutil.which("wrk"), "wrk is not installed")
class ServerAccounting(unittest.TestCase):
    def test_cpu_time_and_peak_rss_of_a_real_server(self):
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp}"
            server = bench.Server("http.server", command, "127.0.0.1", port, Path(tmp) / "log")
            try:
                server.start(timeout=20)
                run = bench.run_wrk(server, f"http://127.0.0.1:{port}/", 4, 1, 1, bench.ACCEPT_JSON, False)
            finally:
                server.stop()
            self.assertGreater(run["summary"]["requests"], 0)
            self.assertGreater(run["server_cpu_s"], 0)
            self.assertGreater(run["server_peak_rss_kib"], 1000)
            self.assertIsNotNone(server.process.poll())

    def test_refuses_a_port_already_in_use(self):
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
        try:
            port = httpd.server_address[1]
            server = bench.Server("x", "sleep 30", "127.0.0.1", port, Path(os.devnull))
            with self.assertRaises(bench.BenchError):
                server.start(timeout=5)
            self.assertIsNone(server.process)
        finally:
            httpd.server_close()


def free_port():
    """A port on loopback that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ParsingAndLevels(unittest.TestCase):
    def test_missing_summary_line_is_an_error(self):
        with self.assertRaises(ValueError):
            bench.parse_wrk_output("Running 1s test @ http://127.0.0.1/\n  1 threads and 1 connections\n")

    def test_unknown_percentile_is_none(self):
        line = (
            'BENCH_JSON {"duration_us":2000000,"requests":1000,"bytes":9,"errors":{"connect":1,"read":2,'
            '"write":3,"status":4,"timeout":5},"latency_us":{"mean":1.0,"stdev":1.0,"max":9,'
            '"p50":7,"p75":8,"p90":9,"p99":0}}'
        )
        summary = bench.parse_wrk_output("Running 2s test\n" + line + "\n")
        self.assertEqual(summary["latency_us"]["p50"], 7)
        self.assertIsNone(summary["latency_us"]["p99"])
        self.assertEqual(summary["socket_errors"], 11)
        self.assertEqual(summary["non_2xx"], 4)
        self.assertEqual(summary["requests_per_s"], 500)

    def test_level_overrides(self):
        profile = bench.PROFILES["tfb"]["levels"]
        levels = bench.resolve_levels(["json", "queries"], profile, ["64,512", "queries=1,20"])
        self.assertEqual(levels, {"json": [64, 512], "queries": [1, 20]})
        levels = bench.resolve_levels(["json"], profile, ["queries=1"])
        self.assertEqual(levels, {"json": bench.TFB_CONNECTION_LEVELS})
        for bad in (["json=0"], ["nope=1"], ["a,b"], ["json="]):
            with self.assertRaises(ValueError):
                bench.resolve_levels(["json"], profile, bad)

    def test_program_name(self):
        self.assertEqual(bench.program_name("env PGHOST=x /opt/gnosis/bin/gnosis --port 1"), "gnosis")
        self.assertEqual(bench.program_name("target/release/gnosis-uring --port {port}"), "gnosis-uring")


class Chart(unittest.TestCase):
    def test_lines_points_and_scale(self):
        svg = bench.render_svg("json: requests/s", "connections", [16, 32, 64],
                               [("a", [100.0, 200.0, 300.0]), ("b", [50.0, None, 250.0])])  # fmt: skip
        root = ET.fromstring(svg)
        lines = root.findall(f"{SVG}polyline")
        self.assertEqual(len(lines), 2)
        self.assertEqual(len(root.findall(f"{SVG}circle")), 5)
        texts = [t.text for t in root.iter(f"{SVG}text")]
        for label in ("16", "32", "64", "a", "b", "connections"):
            self.assertIn(label, texts)
        ys = [float(point.split(",")[1]) for point in lines[0].get("points").split()]
        self.assertGreater(ys[0], ys[1])  # more requests/s is higher up
        self.assertGreater(ys[1], ys[2])
        self.assertGreater(min(ys), 0)

    def test_names_are_escaped(self):
        root = ET.fromstring(bench.render_svg("t", "x", [1], [("<a&b>", [1.0])]))
        self.assertIn("<a&b>", [t.text for t in root.iter(f"{SVG}text")])

    def test_nice_ceiling(self):
        for value, ceiling in ((0, 1), (0.5, 1), (7, 10), (1234, 2000), (2100, 2500), (2600, 5000), (5000, 5000)):
            self.assertEqual(bench.nice_ceiling(value), ceiling, value)


if __name__ == "__main__":
    unittest.main()
