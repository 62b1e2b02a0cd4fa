"""Self-test of `scripts/tool bench`: real wrk runs against small real servers, and the report
writers (about 10 s; needs wrk)."""

import argparse
import http.client
import io
import json
import os
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import unittest
import xml.etree.ElementTree as ET
from contextlib import redirect_stderr
from unittest import mock
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from gnosis_tools import ROOT, system
from gnosis_tools.bench import (anchors, catalog, chart, databases, gateway, h2o, httparena, load, nginx, options, pace,
                                proc, report, schedule, session, summary, tfb, workload)
from gnosis_tools.bench.servers import Lineup, Server, preflight

BENCH = [sys.executable, str(ROOT / "scripts" / "tool"), "bench"]

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
    """What run_wrk and run_test need of a Server, for a server living in this process
    (CPU/RSS not measured); it serves every test at TFB's URLs."""

    def __init__(self, name="in-process", port=None):
        self.name = name
        self.host = "127.0.0.1"
        self.port = port
        self.rss_at_start_kib = None

    def serves(self, test):
        return True

    def url_path(self, test, level):
        return test.url_path(level)

    def processes(self):
        return []

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
        # 3 s: on a busy machine this process's server threads may get little CPU, and a run
        # with no answer at all would fail these tests without a defect.
        run = load.run_wrk(FakeServer(), self.base + path, 2, 1, 3, tfb.ACCEPT_PLAIN, pipelined)
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
        """Two servers (the same handler on two ports), rounds, a level that fails, and the report."""
        args = argparse.Namespace(
            levels={"cached": [1, 13]}, threads=1, primer=1, warmup=1, duration=1, max_concurrency=2,
            rounds=2, pause_after_warmup=0, pause_between_levels=0,
        )  # fmt: skip
        second = QuietHTTPServer(("127.0.0.1", 0), CountingHandler)
        threading.Thread(target=second.serve_forever, daemon=True).start()
        self.addCleanup(second.server_close)
        self.addCleanup(second.shutdown)
        servers = [FakeServer("a", self.httpd.server_address[1]), FakeServer("b", second.server_address[1])]
        record = schedule.run_test(catalog.TESTS["cached"], servers, args, log=lambda message: None)

        for name in ("a", "b"):
            runs = record["servers"][name]["runs"]
            self.assertEqual([r["phase"] for r in runs], ["primer", "warmup"] + ["level"] * 4)
            self.assertEqual(runs[0]["path"], "/cached-queries?count=2")
            self.assertEqual([(r["level"], r["round"]) for r in runs[2:]], [(1, 1), (1, 2), (13, 1), (13, 2)])
        rows = summary.summarize(record)
        self.assertEqual(rows[("a", 1)]["non_2xx"], 0)
        failing = [r for r in record["servers"]["a"]["runs"] if r["level"] == 13]
        self.assertEqual(rows[("a", 13)]["non_2xx"], sum(r["summary"]["requests"] for r in failing))
        self.assertGreater(rows[("a", 13)]["non_2xx"], 0)
        failures = summary.collect_failures([record])
        self.assertEqual(len(failures), 2)
        self.assertIn("cached / a", failures[0])

        meta = {
            "date": "2026-11-22 00:00 UTC", "command": "scripts/tool bench --baseline x",
            "machine": {"cpus": 2, "cpu_model": "cpu", "kernel": "6", "wrk": "wrk", "git_commit": None},
            "servers": {"a": "cmd a", "b": "cmd b"}, "load_average": {"start": 1.0, "end": 2.0},
            "database": "", "config": {
                "profile": "quick", "duration": 1, "rounds": 2, "primer": 1, "warmup": 1,
                "max_concurrency": 2, "threads": 1,
            },
        }  # fmt: skip
        table = report.render_markdown(meta, [record], ["a", "b"])
        self.assertIn("WARNING: this run had errors", table)
        self.assertIn("| N | a requests/s | b requests/s | ratio |", table)
        self.assertRegex(table, r"\n\| 13 \| 2 \| a \| [\d,]+ \| 2 \(")
        svg = ET.fromstring(chart.chart_for(record, ["a", "b"]))
        self.assertEqual(len(svg.findall(f"{SVG}polyline")), 2)

    def test_pipelined_requests_all_answered(self):
        summary, served = self.wrk("/ok", pipelined=True)
        self.assertGreater(summary["requests"], 0)
        self.assertEqual(summary["socket_errors"], 0)
        # Each write carries 16 requests: the server sees whole batches.
        self.assertGreaterEqual(served, summary["requests"])
        self.assertLessEqual(served - summary["requests"], 2 * workload.PIPELINE_DEPTH)


class PostgresAccounting(unittest.TestCase):
    def test_counts_the_cpu_of_processes_named_postgres(self):
        # A stand-in backend: names itself postgres, burns 0.3 s of CPU, then waits to be killed
        # (an exited process's time leaves /proc with it).
        burner = (
            "import ctypes, sys, time\n"
            "ctypes.CDLL(None).prctl(15, b'postgres', 0, 0, 0)\n"
            "while time.process_time() < 0.3: pass\n"
            "print('done', flush=True); time.sleep(60)\n"
        )
        before = proc.postgres_cpu_ticks()
        child = subprocess.Popen([sys.executable, "-c", burner], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(child.stdout.readline().strip(), "done")
            burned = proc.ticks_since(before, proc.postgres_cpu_ticks())
        finally:
            child.kill()
            child.wait()
        self.assertGreaterEqual(burned, 0.25 * os.sysconf("SC_CLK_TCK"))


@unittest.skipUnless(shutil.which("wrk"), "wrk is not installed")
class ServerAccounting(unittest.TestCase):
    def test_cpu_time_and_peak_rss_of_a_real_server(self):
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp}"
            server = Server("http.server", command, "127.0.0.1", port, Path(tmp) / "log")
            try:
                server.start(timeout=20)
                run = load.run_wrk(server, f"http://127.0.0.1:{port}/", 4, 1, 1, tfb.ACCEPT_JSON, False)
            finally:
                server.stop()
            self.assertGreater(run["summary"]["requests"], 0)
            self.assertGreater(run["server_cpu_s"], 0)
            self.assertGreater(run["wrk_cpu_percent"], 0)
            self.assertGreaterEqual(run["postgres_cpu_percent"], 0)
            self.assertGreater(run["server_peak_rss_kib"], 1000)
            self.assertIsNotNone(server.process.poll())

    def test_a_pinned_server_runs_on_its_cpus_and_the_load_on_the_others(self):
        """--pin 0:1 on a machine of two CPUs or more: the server's process on CPU 0 alone."""
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("needs two CPUs")
        before = os.sched_getaffinity(0)
        self.addCleanup(os.sched_setaffinity, 0, before)
        self.addCleanup(setattr, proc, "SERVER_CPUS", None)
        with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ):
            proc.pin({cpus[0]}, {cpus[1]})
            self.assertEqual(os.sched_getaffinity(0), {cpus[1]})
            self.assertEqual(os.environ["VORTEX_WORKERS"], "1")
            port = free_port()
            command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp}"
            server = Server("http.server", command, "127.0.0.1", port, Path(tmp) / "log")
            try:
                server.start(timeout=20)
                self.assertEqual(os.sched_getaffinity(server.process.pid), {cpus[0]})
            finally:
                server.stop()

    def test_refuses_a_port_already_in_use(self):
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
        try:
            port = httpd.server_address[1]
            server = Server("x", "sleep 30", "127.0.0.1", port, Path(os.devnull))
            with self.assertRaises(system.SetupError):
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
            load.parse_wrk_output("Running 1s test @ http://127.0.0.1/\n  1 threads and 1 connections\n")

    def test_unknown_percentile_is_none(self):
        line = (
            'BENCH_JSON {"duration_us":2000000,"requests":1000,"bytes":9,"errors":{"connect":1,"read":2,'
            '"write":3,"status":4,"timeout":5},"latency_us":{"mean":1.0,"stdev":1.0,"max":9,'
            '"p50":7,"p75":8,"p90":9,"p99":0}}'
        )
        summary = load.parse_wrk_output("Running 2s test\n" + line + "\n")
        self.assertEqual(summary["latency_us"]["p50"], 7)
        self.assertIsNone(summary["latency_us"]["p99"])
        self.assertEqual(summary["socket_errors"], 11)
        self.assertEqual(summary["non_2xx"], 4)
        self.assertEqual(summary["requests_per_s"], 500)

    def test_level_overrides(self):
        profile = catalog.PROFILES["tfb"]["levels"]
        levels = options.resolve_levels(["json", "queries"], profile, ["64,512", "queries=1,20"])
        self.assertEqual(levels, {"json": [64, 512], "queries": [1, 20]})
        levels = options.resolve_levels(["json"], profile, ["queries=1"])
        self.assertEqual(levels, {"json": tfb.CONNECTION_LEVELS})
        for bad in (["json=0"], ["nope=1"], ["a,b"], ["json="]):
            with self.assertRaises(ValueError):
                options.resolve_levels(["json"], profile, bad)

    def test_pin_takes_two_disjoint_cpu_lists(self):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("needs two CPUs")
        self.assertEqual(options.parse_pin(f"{cpus[0]}:{cpus[-1]}"), ({cpus[0]}, {cpus[-1]}))
        # The load's one CPU: one wrk thread.
        self.assertEqual(bench_args("--pin", f"{cpus[0]}:{cpus[-1]}").threads, 1)
        self.assertEqual(bench_args().threads, len(cpus))
        self.assertEqual(options.cpu_list("0,2-4"), {0, 2, 3, 4})
        for bad in ("0", "0:0", "a:1", "0:", f"0:{max(cpus) + 1}"):
            with self.assertRaises(argparse.ArgumentTypeError):
                options.parse_pin(bad)

    def test_program_name(self):
        self.assertEqual(options.program_name("env PGHOST=x /opt/gnosis/bin/gnosis --port 1"), "gnosis")
        self.assertEqual(options.program_name("target/release/gnosis-uring --port {port}"), "gnosis-uring")


def bench_args(*argv):
    """parse_args with --out somewhere harmless (nothing is written by parsing)."""
    return options.parse_args(list(argv))


class AnchorsOnTheCommandLine(unittest.TestCase):
    def test_gnosis_against_anchors(self):
        args = bench_args("--anchors", "xitca-web,faf")
        self.assertEqual([s.name for s in args.specs], ["gnosis", "xitca-web", "faf"])
        # The anchors own 8080: gnosis moves to 8081 unless told otherwise.
        self.assertEqual([s.port for s in args.specs], [8081, 8080, 8080])
        self.assertTrue(args.specs[0].command.endswith("/target/release/gnosis --port 8081 --tls-port 9081 "
                                                    "--h2c-port 10081 --h2-tls-port 11081"))
        self.assertEqual(args.specs[0].tls_port, 9081)
        self.assertEqual(args.specs[1].command, str(anchors.DEFAULT_ANCHORS_DIR / "xitca-web"))
        self.assertIs(args.specs[2].anchor, anchors.ANCHORS["faf"])
        self.assertEqual(args.rounds, 4)

    def test_the_anchors_are_found_beside_the_checkout_or_where_told(self):
        beside = ROOT.parent / "shared" / "anchors" / "bin"
        self.assertEqual(anchors.shared_path("anchors", "bin", environ={}), beside)
        self.assertEqual(anchors.shared_path("anchors", "bin", environ={"GNOSIS_SHARED_DIR": ""}), beside)
        elsewhere = Path(tempfile.gettempdir()) / "shared"
        told = {"GNOSIS_SHARED_DIR": str(elsewhere)}
        self.assertEqual(anchors.shared_path("anchors", "bin", environ=told), elsewhere / "anchors" / "bin")
        # A fresh `scripts/tool bench` takes the variable too.
        shown = subprocess.run(
            [*BENCH, "--help"], capture_output=True, text=True,
            env=dict(os.environ, **told), timeout=60)
        self.assertIn(str(elsewhere), " ".join(shown.stdout.split()))
        args = bench_args("--anchors", "faf", "--anchors-dir", str(elsewhere))
        self.assertEqual(args.specs[1].command, str(elsewhere / "faf"))

    def test_anchor_as_main_server_and_baseline(self):
        args = bench_args("--server", "anchor:xitca-web", "--baseline", "anchor:vortex", "--anchors-dir", "/x")
        self.assertEqual([(s.name, s.command, s.port) for s in args.specs],
                         [("xitca-web", "/x/xitca-web", 8080), ("vortex", "/x/vortex", 8080)])  # fmt: skip
        args = bench_args("--baseline", "anchor:faf", "--port", "9000", "--rounds", "1")
        self.assertEqual([(s.name, s.port) for s in args.specs], [("gnosis", 9000), ("faf", 8080)])
        self.assertEqual(args.rounds, 1)
        args = bench_args("--server", "anchor:faf", "--anchors", "faf")
        self.assertEqual([s.name for s in args.specs], ["faf", "faf #2"])
        self.assertEqual([s.name for s in bench_args("--anchors", "all").specs[1:]], list(anchors.ANCHORS))
        # Without an anchor nothing changes: 8080, and the baseline on the next port.
        args = bench_args("--baseline", "/tmp/old --port {port}")
        self.assertEqual([(s.name, s.command, s.port) for s in args.specs],
                         [("gnosis", f"{ROOT}/target/release/gnosis --port 8080 --tls-port 9080 "
                                    "--h2c-port 10080 --h2-tls-port 11080", 8080),
                          ("baseline", "/tmp/old --port 8081", 8081)])  # fmt: skip
        # A command that names no TLS port has none: it serves no TLS test and gets no certificate.
        self.assertEqual([s.tls_port for s in args.specs], [9080, None])

    def test_unknown_anchor_is_a_usage_error(self):
        for argv in (["--anchors", "actix"], ["--baseline", "anchor:nope"], ["--anchors", ","]):
            with self.assertRaises(SystemExit), redirect_stderr(io.StringIO()):
                bench_args(*argv)

    def test_level_selection(self):
        args = bench_args("--anchors", "xitca-web", "--tests", "db,queries,plaintext",
                          "--levels", "db=512", "--levels", "queries=20", "--levels", "plaintext=256")  # fmt: skip
        self.assertEqual(args.levels, {"db": [512], "queries": [20], "plaintext": [256]})
        args = bench_args("--anchors", "faf", "--profile", "tfb", "--tests", "plaintext,updates,fortunes")
        self.assertEqual(args.levels, {"plaintext": [256, 1024, 4096, 16384], "updates": [1, 5, 10, 15, 20],
                                       "fortunes": tfb.CONNECTION_LEVELS})  # fmt: skip
        self.assertEqual((args.duration, args.warmup, args.primer), (15, 15, 5))


class AnchorUrls(unittest.TestCase):
    def server(self, anchor=None):
        return Server(anchor.name if anchor else "gnosis", "x", "127.0.0.1", 8080, Path(os.devnull), anchor,
                      tls_port=None if anchor else 9080, h2c_port=None if anchor else 10080,
                      h2_tls_port=None if anchor else 11080)  # fmt: skip

    def test_url_mapping(self):
        t = catalog.TESTS
        for name in ("may-minihttp", "xitca-web", "vortex"):
            anchor = self.server(anchors.ANCHORS[name])
            self.assertEqual(anchor.url_path(t["queries"], 20), "/queries?q=20")
            self.assertEqual(anchor.url_path(t["updates"], 5), "/updates?q=5")
            for test, path in (("json", "/json"), ("db", "/db"), ("fortunes", "/fortunes"), ("plaintext", "/plaintext")):
                self.assertEqual(anchor.url_path(t[test], 512), path)
        gnosis = self.server()
        self.assertEqual(gnosis.url_path(t["queries"], 20), "/queries?queries=20")
        self.assertEqual(gnosis.url_path(t["updates"], 5), "/updates?queries=5")
        self.assertEqual(gnosis.url_path(t["cached"], 100), "/cached-queries?count=100")

    def test_what_each_serves(self):
        served = {name: {t for t in catalog.TESTS if self.server(a).serves(catalog.TESTS[t])}
                  for name, a in anchors.ANCHORS.items()}  # fmt: skip
        everything_but_cached = {"json", "plaintext", "db", "queries", "updates", "fortunes"}
        h1 = {"baseline", "pipelined", "limited-conn", "latency-1m", "latency-10k"}
        ws = {"echo-ws", "echo-ws-pipeline", "echo-ws-limited"}
        h2 = {"baseline-h2", "baseline-h2c", "static-h2", "unary-grpc", "unary-grpc-tls"}
        self.assertEqual(served, {"may-minihttp": everything_but_cached, "xitca-web": everything_but_cached,
                                  "vortex": everything_but_cached, "faf": {"plaintext"},
                                  "rust-epoll": h1, "tokio": h1, "hyper": h1 | {"baseline-h2"}, "may-minihttp-arena": h1,
                                  "sark": h1 | ws | h2 | {"arena-json", "json-tls", "json-tls-kept", "async-db", "arena-fortunes"},
                                  "tonic-grpc": {"unary-grpc"},
                                  "tokio-ws": ws, "tokio-uring-ws": ws, "wtx-ws": ws})  # fmt: skip
        # A command line serves everything but the one-worker tests, unless it can run with one, and
        # production-stack, which a stack with its auth service serves.
        self.assertEqual({t for t in catalog.TESTS if not self.server().serves(catalog.TESTS[t])},
                         {"plaintext-single-1worker", "production-stack"})  # fmt: skip
        one_worker = Server("gnosis", "x", "127.0.0.1", 1, Path(os.devnull), one_worker_command="x --threads 1",
                            tls_port=2, h2c_port=3, h2_tls_port=4, production_command="y", auth_port=5)  # fmt: skip
        self.assertTrue(all(one_worker.serves(t) for t in catalog.TESTS.values()))
        # Without a TLS port, the TLS tests are left out; without h2 ports, all but gRPC on the HTTP port.
        no_tls = Server("other", "x", "127.0.0.1", 1, Path(os.devnull))
        self.assertEqual({t for t in catalog.TESTS if catalog.TESTS[t].tls and no_tls.serves(catalog.TESTS[t])}, set())
        self.assertEqual({t for t in h2 if no_tls.serves(catalog.TESTS[t])}, {"unary-grpc"})
        self.assertFalse(anchors.ANCHORS["faf"].needs_database)
        self.assertTrue(anchors.ANCHORS["vortex"].needs_database)
        # sark's database is HttpArena's (DATABASE_URL), not TFB's tfb-database.
        self.assertFalse(anchors.ANCHORS["sark"].needs_database)


def fake_run(requests, cpu_s=1.0, non_2xx=0):
    """What run_wrk returns, for a 1 s run."""
    return {
        "connections": 0, "threads": 1, "command": "wrk ...", "wrk_output": "",
        "summary": {"requests": requests, "requests_per_s": float(requests), "duration_us": 1e6,
                    "socket_errors": 0, "non_2xx": non_2xx, "latency_us": {"p50": 100, "p99": 900}},
        "server_cpu_s": cpu_s, "server_cpu_percent": 100 * cpu_s, "server_peak_rss_kib": 2048,
        "requests_per_cpu_s": round(requests / cpu_s), "postgres_cpu_percent": 0.0, "wrk_cpu_s": 0.1,
        "wrk_cpu_percent": 10.0, "wall_s": 1.0,
    }  # fmt: skip


class RecordingLineup:
    def __init__(self):
        self.calls = []

    def bring_up(self, servers, one_worker=False, production=False):
        self.calls.append([s.name for s in servers] + (["(one worker)"] if one_worker else [])
                          + (["(production)"] if production else []))


class Scheduling(unittest.TestCase):
    """run_test's order of runs, skips and ratios, with wrk and the probe replaced (no servers run)."""

    RATES = {"gnosis": 1000, "xitca-web": 800, "faf": 500}

    def setUp(self):
        self.calls = []

        def run_wrk(server, url, connections, threads, duration, accept, pipelined, mix=None):
            self.calls.append((server.name, url, connections, duration, pipelined))
            return fake_run(self.RATES[server.name], non_2xx=self.non_2xx.get(server.name, 0))

        self.non_2xx = {}
        patches = [mock.patch.object(schedule, "run_wrk", run_wrk),
                   mock.patch.object(schedule, "probe", lambda host, port, path, accept, **_: (200, 13))]  # fmt: skip
        for patch in patches:
            patch.start()
            self.addCleanup(patch.stop)
        self.servers = [
            Server("gnosis", "gnosis --port {port}", "127.0.0.1", 8081, Path(os.devnull)),
            Server("xitca-web", "/bin/xitca-web", "127.0.0.1", 8080, Path(os.devnull), anchors.ANCHORS["xitca-web"]),
            Server("faf", "/bin/faf", "127.0.0.1", 8080, Path(os.devnull), anchors.ANCHORS["faf"]),
        ]  # fmt: skip

    def args(self, test, levels, rounds=2):
        return argparse.Namespace(
            levels={test: levels}, threads=2, primer=1, warmup=2, duration=3, max_concurrency=512, rounds=rounds,
            pause_after_warmup=0, pause_between_levels=0,
        )  # fmt: skip

    def test_side_by_side_with_an_anchor_that_is_left_out(self):
        lineup = RecordingLineup()
        record = schedule.run_test(catalog.TESTS["queries"], self.servers, self.args("queries", [1, 20]), lambda m: None, lineup)
        self.assertEqual(record["skipped"], {"faf": "faf does not serve queries"})
        self.assertEqual(lineup.calls, [["gnosis", "xitca-web"]])  # both up together, faf never started
        levels = [(name, url) for name, url, _, duration, _ in self.calls if duration == 3]
        self.assertEqual(levels, [
            ("gnosis", "http://127.0.0.1:8081/queries?queries=1"), ("xitca-web", "http://127.0.0.1:8080/queries?q=1"),
            ("xitca-web", "http://127.0.0.1:8080/queries?q=1"), ("gnosis", "http://127.0.0.1:8081/queries?queries=1"),
            ("gnosis", "http://127.0.0.1:8081/queries?queries=20"), ("xitca-web", "http://127.0.0.1:8080/queries?q=20"),
            ("xitca-web", "http://127.0.0.1:8080/queries?q=20"), ("gnosis", "http://127.0.0.1:8081/queries?queries=20"),
        ])  # fmt: skip
        # Primer and warm-up with N = 2 at 8 and 512 connections; every level at 512.
        self.assertEqual([c[1:4] for c in self.calls[:2]],
                         [("http://127.0.0.1:8081/queries?queries=2", 8, 1), ("http://127.0.0.1:8081/queries?queries=2", 512, 2)])  # fmt: skip
        self.assertEqual({c[2] for c in self.calls[4:]}, {512})

        rows = summary.summarize(record)
        self.assertEqual(rows[("gnosis", 20)]["cpu_s_per_1k_requests"], 1.0)
        self.assertNotIn(("faf", 20), rows)
        self.assertAlmostEqual(summary.ratios(record, "gnosis", "xitca-web", summary.rate)[20]["ratio"], 1.25)
        self.assertEqual(summary.ratios(record, "gnosis", "faf", summary.rate), {})
        table = report.render_markdown(meta_for(["gnosis", "xitca-web", "faf"], rounds=2), [record], ["gnosis", "xitca-web", "faf"])
        self.assertIn("| queries | N=20 | 1,000 | 800 | – | 1.250 (2/2 higher) | – |", table)
        self.assertIn("ratio: – (faf does not serve queries)", table)
        self.assertNotIn("WARNING", table)

    def test_a_hung_load_generator_voids_its_run_alone(self):
        seen = []

        def run_wrk(server, url, connections, threads, duration, accept, pipelined, mix=None):
            seen.append((server.name, url))
            # xitca-web's second run at N=20 (round 2) never ends.
            if url.endswith("q=20") and seen.count((server.name, url)) == 2:
                raise load.LoadFailed(f"wrk did not finish within 63 s: wrk {url}")
            return fake_run(self.RATES[server.name])

        with mock.patch.object(schedule, "run_wrk", run_wrk):
            record = schedule.run_test(catalog.TESTS["queries"], self.servers[:2], self.args("queries", [1, 20]),
                                       lambda m: None, RecordingLineup())  # fmt: skip
        voids = record["servers"]["xitca-web"]["void_runs"]
        self.assertEqual([(v["level"], v["round"]) for v in voids], [(20, 2)])
        rows = summary.summarize(record)
        self.assertEqual((rows[("xitca-web", 20)]["runs"], rows[("gnosis", 20)]["runs"]), (1, 2))
        table = report.render_markdown(meta_for(["gnosis", "xitca-web"], rounds=2), [record], ["gnosis", "xitca-web"])
        self.assertIn("Void run of xitca-web (level, level 20, round 2, left out of the medians): wrk did not finish", table)

    def test_servers_sharing_a_port_take_turns(self):
        lineup = RecordingLineup()
        record = schedule.run_test(catalog.TESTS["plaintext"], self.servers, self.args("plaintext", [256]), lambda m: None, lineup)
        # Round 1: gnosis, xitca-web, faf; round 2 starts one further on; each turn: primer, warm-up, levels.
        self.assertEqual(lineup.calls, [["gnosis"], ["xitca-web"], ["faf"], ["xitca-web"], ["faf"], ["gnosis"]])
        order = [(name, duration) for name, _, _, duration, _ in self.calls]
        turn = lambda name: [(name, 1), (name, 2), (name, 3)]  # noqa: E731
        self.assertEqual(order, turn("gnosis") + turn("xitca-web") + turn("faf") + turn("xitca-web") + turn("faf") + turn("gnosis"))
        self.assertEqual({c[4] for c in self.calls if c[3] == 3}, {True})  # levels pipelined, primer/warm-up not
        self.assertEqual({c[4] for c in self.calls if c[3] != 3}, {False})
        self.assertEqual([r["round"] for r in record["servers"]["faf"]["runs"]], [1, 1, 1, 2, 2, 2])
        self.assertAlmostEqual(summary.ratios(record, "gnosis", "faf", summary.rate)[256]["ratio"], 2.0)

    def test_errors_make_the_ratio_invalid(self):
        self.non_2xx = {"xitca-web": 7}
        record = schedule.run_test(catalog.TESTS["db"], self.servers[:2], self.args("db", [512]), lambda m: None, RecordingLineup())
        names = ["gnosis", "xitca-web"]
        table = report.render_markdown(meta_for(names, rounds=2), [record], names)
        self.assertIn("WARNING: this run had errors", table)
        self.assertIn("| db | c=512 | 1,000 | 800 | **invalid: errors** |", table)
        self.assertIn("**invalid: errors** (1.250)", table)
        self.assertNotIn("2/2 rounds higher", table)

    def test_vortex_updates_are_flagged_as_no_legal_bar(self):
        self.RATES = dict(self.RATES, vortex=2000)
        vortex = Server("vortex", "/bin/vortex", "127.0.0.1", 8080, Path(os.devnull), anchors.ANCHORS["vortex"])
        servers = [self.servers[0], vortex]
        record = schedule.run_test(catalog.TESTS["updates"], servers, self.args("updates", [5], rounds=1), lambda m: None, RecordingLineup())
        self.assertIn(("vortex", "http://127.0.0.1:8080/updates?q=5", 512, 3, False), self.calls)
        meta = dict(meta_for(["gnosis", "vortex"]), anchors={"vortex": "vortex"})
        table = report.render_markdown(meta, [record], ["gnosis", "vortex"])
        self.assertIn("| updates* | N=5 | 1,000 | 2,000 | 0.500 (1/1 lower) |", table)
        self.assertEqual(table.count("TFB's rule 7 forbids"), 2)  # under the summary and the test

    def test_vortex_plaintext_is_flagged_for_its_own_reason(self):
        self.RATES = dict(self.RATES, vortex=2000)
        vortex = Server("vortex", "/bin/vortex", "127.0.0.1", 8080, Path(os.devnull), anchors.ANCHORS["vortex"])
        servers = [self.servers[0], vortex]
        record = schedule.run_test(catalog.TESTS["plaintext"], servers, self.args("plaintext", [256], rounds=1), lambda m: None, RecordingLineup())
        meta = dict(meta_for(["gnosis", "vortex"]), anchors={"vortex": "vortex"})
        table = report.render_markdown(meta, [record], ["gnosis", "vortex"])
        self.assertIn("| plaintext* | c=256 | 1,000 | 2,000 | 0.500 (1/1 lower) |", table)
        self.assertEqual(table.count("the response to the first one"), 2)
        self.assertNotIn("rule 7", table)

    def test_a_test_no_server_serves(self):
        record = schedule.run_test(catalog.TESTS["cached"], self.servers[1:], self.args("cached", [1]), lambda m: None, RecordingLineup())
        self.assertTrue(record["not_served"])
        self.assertEqual(self.calls, [])
        table = report.render_markdown(meta_for(["xitca-web", "faf"]), [record], ["xitca-web", "faf"])
        self.assertIn("**Not run: no server of this run serves it.**", table)
        self.assertEqual(summary.collect_failures([record]), [])


def meta_for(names, rounds=1):
    return {
        "date": "2026-11-22 00:00 UTC", "command": "scripts/tool bench",
        "machine": {"cpus": 2, "cpu_model": "cpu", "kernel": "6", "wrk": "wrk", "git_commit": None},
        "servers": {n: f"cmd {n}" for n in names}, "load_average": {"start": 1.0, "end": 2.0}, "database": "",
        "config": {"profile": "quick", "duration": 1, "rounds": rounds, "primer": 1, "warmup": 1,
                   "max_concurrency": 512, "threads": 2},
    }  # fmt: skip


def executable(directory, name, text):
    path = Path(directory) / name
    path.write_text(text)
    path.chmod(0o755)
    return path


class ServerTrouble(unittest.TestCase):
    """Real processes that die: at start with SIGILL, and in the middle of a test."""

    def test_sigill_at_start_names_the_cpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            binary = executable(tmp, "faf", "#!/bin/sh\necho 'about to die'\nkill -ILL $$\n")
            server = Server("faf", str(binary), "127.0.0.1", free_port(), Path(tmp) / "log", anchors.ANCHORS["faf"])
            with self.assertRaises(system.SetupError) as caught:
                server.start(timeout=20)
        message = str(caught.exception)
        self.assertIn("killed by SIGILL", message)
        self.assertIn("CPU", message)
        self.assertIn("about to die", message)  # the end of its log

    def test_a_server_that_dies_mid_test_fails_the_test_loudly(self):
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp}"
            victim = Server("victim", command, "127.0.0.1", port, Path(tmp) / "log")
            other = FakeServer("other", 1)
            done = []

            def run_wrk(server, url, connections, threads, duration, accept, pipelined, mix=None):
                server.check_alive()
                done.append(server.name)
                if len(done) == 5:  # primer and warm-up of both, then the first level run: the crash
                    os.kill(victim.process.pid, signal.SIGSEGV)
                    victim.process.wait(timeout=20)
                    server.check_alive()
                return fake_run(100)

            args = argparse.Namespace(levels={"json": [16, 32]}, threads=1, primer=1, warmup=1, duration=1,
                                      max_concurrency=2, rounds=2, pause_after_warmup=0, pause_between_levels=0)  # fmt: skip
            try:
                victim.start(timeout=20)
                with mock.patch.object(schedule, "run_wrk", run_wrk), \
                        mock.patch.object(schedule, "probe", lambda host, port, path, accept, **_: (200, 27)), \
                        self.assertRaises(system.SetupError) as caught:  # fmt: skip
                    schedule.run_test(catalog.TESTS["json"], [victim, other], args, lambda m: None)
            finally:
                victim.stop()
        self.assertEqual(done, ["victim", "victim", "other", "other", "victim"])
        self.assertIn("victim died during the run", str(caught.exception))
        self.assertIn("SIGSEGV", str(caught.exception))
        record = caught.exception.record
        self.assertIn("SIGSEGV", record["failed"])
        names = ["victim", "other"]
        table = report.render_markdown(meta_for(names, rounds=2), [record], names)
        self.assertIn("**FAILED, no ratio: victim died during the run", table)
        self.assertNotIn("| ratio |", table)
        self.assertIn("| json | **FAILED** | – | – | – |", table)
        self.assertEqual(len(summary.collect_failures([record])), 1)

    @unittest.skipUnless(shutil.which("wrk"), "wrk is not installed")
    def test_a_wrapper_script_measures_the_real_server(self):
        """Like vortex's wrapper: a shell script that execs the server; its CPU is the server's."""
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            wrapper = executable(tmp, "vortex", f"#!/bin/sh\nexec {sys.executable} -m http.server {port} "
                                                f"--bind 127.0.0.1 --directory {tmp}\n")  # fmt: skip
            server = Server("vortex", str(wrapper), "127.0.0.1", port, Path(tmp) / "log", anchors.ANCHORS["vortex"])
            try:
                Lineup([server], 20, lambda m: None).bring_up([server])
                processes = server.processes()
                run = load.run_wrk(server, f"http://127.0.0.1:{port}/", 2, 1, 1, tfb.ACCEPT_JSON, False)
            finally:
                server.stop()
        self.assertEqual(len(processes), 1)
        self.assertRegex(processes[0], r"^python[\d.]*\[\d+\] \d+ threads$")
        self.assertGreater(run["server_cpu_s"], 0)


class PortsAndHosts(unittest.TestCase):
    def test_port_in_use_names_the_owner(self):
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
        try:
            owner = system.port_in_use(httpd.server_address[1])
        finally:
            httpd.server_close()
        self.assertIn(f"[{os.getpid()}]", owner)
        self.assertIsNone(system.port_in_use(free_port()))

    def test_preflight_wants_the_anchor_binaries(self):
        server = Server("faf", "/nonexistent/faf", "127.0.0.1", free_port(), Path(os.devnull), anchors.ANCHORS["faf"])
        with self.assertRaisesRegex(system.SetupError, "anchor faf: no executable /nonexistent/faf"):
            preflight([server])

    def test_hosts_file(self):
        messages = []
        with tempfile.TemporaryDirectory() as tmp:
            hosts = Path(tmp) / "hosts"
            hosts.write_text("127.0.0.1 localhost\n# 10.0.0.9 tfb-database\n127.0.0.1\tvm")
            if os.geteuid() == 0:
                system.ensure_tfb_database_host(messages.append, str(hosts))
                self.assertEqual(hosts.read_text(), "127.0.0.1 localhost\n# 10.0.0.9 tfb-database\n127.0.0.1\tvm\n"
                                                    "127.0.0.1 tfb-database\n")  # fmt: skip
                self.assertIn("added the line '127.0.0.1 tfb-database'", messages[0])
                system.ensure_tfb_database_host(messages.append, str(hosts))  # present: left alone
                self.assertEqual(hosts.read_text().count("tfb-database"), 2)
                self.assertEqual(len(messages), 1)
            else:
                with self.assertRaisesRegex(system.SetupError, "only root may add it"):
                    system.ensure_tfb_database_host(messages.append, str(hosts))
            hosts.write_text("10.1.2.3 db tfb-database  # elsewhere\n")
            with self.assertRaisesRegex(system.SetupError, "sends tfb-database to 10.1.2.3"):
                system.ensure_tfb_database_host(messages.append, str(hosts))
        self.assertEqual(system.hosts_entry("::1 a tfb-database b\n", "tfb-database"), "::1")
        self.assertIsNone(system.hosts_entry("127.0.0.1 tfb-databases\n", "tfb-database"))


GNOSIS = ROOT / "target" / "release" / "gnosis"
FAF = anchors.DEFAULT_ANCHORS_DIR / "faf"


@unittest.skipUnless(shutil.which("wrk"), "wrk is not installed")
@unittest.skipUnless(GNOSIS.exists(), "no target/release/gnosis (cargo build --release)")
@unittest.skipUnless(os.access(FAF, os.X_OK), f"no anchor binary {FAF}")
class EndToEnd(unittest.TestCase):
    def test_gnosis_against_faf(self):
        """The real command: gnosis and the real faf, plaintext, 1 s, 1 round; then nothing left running."""
        port = free_port()
        for needed in (anchors.ANCHOR_PORT, port):
            owner = system.port_in_use(needed)
            if owner:
                self.skipTest(f"port {needed} is in use ({owner}) on this shared machine")
        with tempfile.TemporaryDirectory() as tmp:
            argv = [*BENCH, "--baseline", "anchor:faf", "--port", str(port),
                    "--tests", "plaintext", "--levels", "256", "--duration", "1", "--warmup", "1",
                    "--primer", "1", "--rounds", "1", "--out", tmp]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])
            (result,) = Path(tmp).glob("*/results.json")
            data = json.loads(result.read_text())
            table = (result.parent / "table.md").read_text()
        (record,) = data["tests"]
        self.assertEqual(set(record["servers"]), {"gnosis", "faf"})
        # faf ran from ../shared/anchors/bin beside this clone (or $GNOSIS_SHARED_DIR), wherever it lies.
        self.assertIn(str(FAF), data["meta"]["servers"]["faf"])
        for name, server in record["servers"].items():
            runs = server["runs"]
            self.assertEqual([r["phase"] for r in runs], ["primer", "warmup", "level"], name)
            level = runs[-1]
            self.assertGreater(level["summary"]["requests"], 0, name)
            self.assertEqual(level["summary"]["socket_errors"] + level["summary"]["non_2xx"], 0, name)
            self.assertGreater(level["server_cpu_s"], 0, name)
            self.assertGreater(level["server_peak_rss_kib"], 0, name)
        faf_processes = record["servers"]["faf"]["runs"][-1]["processes"]
        self.assertRegex(faf_processes[0], r"^faf\[\d+\]")
        self.assertEqual(record["servers"]["faf"]["runs"][-1]["path"], "/plaintext")
        self.assertGreater(record["ratios"]["faf"]["rate"]["256"]["ratio"], 0)
        self.assertRegex(table, r"\| plaintext \| c=256 \| [\d,]+ \| [\d,]+ \| \d+\.\d{3} ")
        # faf was stopped: its process is gone (or its pid reused by something else).
        pid = faf_processes[0].split("[")[1].split("]")[0]
        try:
            self.assertNotEqual(system.read_proc_stat(pid)[0], "faf")
        except OSError:
            pass


def read_request(stream):
    """One HTTP/1.1 request from a binary stream: (method, path, headers, body), or None at EOF.
    Bodies by Content-Length or chunked (chunk extensions and trailers as the grammar has them)."""
    line = stream.readline()
    if not line:
        return None
    method, path, _ = line.decode().split(" ", 2)
    headers = {}
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, value = line.decode().split(":", 1)
        headers[name.strip().lower()] = value.strip()
    body = b""
    if headers.get("transfer-encoding") == "chunked":
        while (size := int(stream.readline().split(b";")[0], 16)) > 0:
            body += stream.read(size)
            stream.readline()
        while stream.readline() not in (b"\r\n", b""):
            pass
    elif "content-length" in headers:
        body = stream.read(int(headers["content-length"]))
    return method, path, headers, body


def parse_requests(raw):
    """Every request of a byte string."""
    stream, requests = io.BytesIO(raw), []
    while (request := read_request(stream)) is not None:
        requests.append(request)
    return requests


class RecordingHandler(socketserver.StreamRequestHandler):
    """Answers `ok` to every request, records each, and closes when a request says `Connection: close`."""

    seen = []
    lock = threading.Lock()

    def handle(self):
        while (request := read_request(self.rfile)) is not None:
            with RecordingHandler.lock:
                RecordingHandler.seen.append(request)
            close = request[2].get("connection") == "close"
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + (b"Connection: close\r\n" if close else b"") + b"\r\nok")
            if close:
                return


class RecordingServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # wrk resets its connections when it stops


KINDS = {"GET": "get", "POST": "post"}


def kind(request):
    method, _, headers, _ = request
    return "chunked" if headers.get("transfer-encoding") == "chunked" else KINDS[method]


class HttpArenaMixes(unittest.TestCase):
    def test_the_requests_are_httparenas(self):
        self.assertEqual(parse_requests("".join(httparena.BASELINE_MIX).encode()), [
            ("GET", "/baseline11?a=13&b=42", {"host": "localhost"}, b""),
            ("POST", "/baseline11?a=13&b=42", {"host": "localhost", "content-length": "2"}, b"20"),
            ("POST", "/baseline11?a=13&b=42", {"host": "localhost", "transfer-encoding": "chunked"}, b"20"),
        ])  # fmt: skip
        paths = [path for _, path, _, _ in parse_requests("".join(httparena.JSON_MIX).encode())]
        self.assertEqual(paths, ["/json/1?m=3", "/json/5?m=7", "/json/10?m=2", "/json/15?m=5", "/json/25?m=4",
                                 "/json/40?m=8", "/json/50?m=6"])  # fmt: skip
        t = catalog.TESTS
        self.assertEqual((t["baseline"].requests, t["baseline"].close_every), (httparena.BASELINE_MIX, 0))
        self.assertEqual((t["limited-conn"].requests, t["limited-conn"].close_every), (httparena.BASELINE_MIX, 10))
        self.assertEqual((t["arena-json"].requests, t["arena-json"].close_every), (httparena.JSON_MIX, 25))
        self.assertEqual((t["pipelined"].path, t["pipelined"].kind), ("/pipeline", "pipelined"))
        self.assertEqual((t["async"].path, t["async"].ceiling_rps(10000)), ("/delay/10", 1_000_000))

    def test_wrk_command_of_a_mix(self):
        command = load.wrk_command("http://127.0.0.1:1/", 512, 2, 5, tfb.ACCEPT_PLAIN, False, (httparena.BASELINE_MIX, 10))
        self.assertEqual(command[command.index("-s") + 1], str(load.MIX_LUA))
        tail = command[command.index("--") + 1 :]
        self.assertEqual(tail[0], "10")
        # Line ends written out, so that the printed command can be pasted into a shell.
        self.assertEqual([a.replace("\\r\\n", "\r\n") for a in tail[1:]], list(httparena.BASELINE_MIX))
        self.assertFalse(any("\r" in a for a in tail))

    @unittest.skipUnless(shutil.which("wrk"), "wrk is not installed")
    def test_mix_lua_sends_the_mix_and_closes_every_tenth(self):
        """Real wrk with mix.lua against a server that records every request it parses."""
        httpd = RecordingServer(("127.0.0.1", 0), RecordingHandler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)
        RecordingHandler.seen = []
        url = f"http://127.0.0.1:{httpd.server_address[1]}/"
        run = load.run_wrk(FakeServer(), url, 1, 1, 2, tfb.ACCEPT_PLAIN, False, mix=(httparena.BASELINE_MIX, 10))
        seen = list(RecordingHandler.seen)
        summary = run["summary"]
        self.assertGreater(len(seen), 30)
        self.assertEqual(summary["socket_errors"], 0)
        # One connection, one request in flight: the server saw what wrk sent, in order (wrk's check
        # of the script took the first request: the turn starts at the second).
        kinds = [kind(r) for r in seen]
        self.assertEqual(kinds, (["post", "chunked", "get"] * len(seen))[: len(seen)])
        self.assertEqual({body for _, _, _, body in seen if body}, {b"20"})
        closing = [i for i, r in enumerate(seen, start=2) if r[2].get("connection") == "close"]
        self.assertEqual(closing, list(range(10, len(seen) + 2, 10)))
        # wrk counted every close it sent; the server may not have read the last request yet.
        self.assertIn(summary["closes"] - len(closing), (0, 1))
        # Each close made wrk connect again (other processes' connections may add a few).
        self.assertGreaterEqual(run["connections_opened"], len(closing))


class HttpArenaRuns(unittest.TestCase):
    def test_anchors_and_ports_of_an_httparena_run(self):
        args = bench_args("--tests", "httparena,nginx", "--anchors", "httparena", "--nginx", "--httparena-dir", "/h")
        self.assertEqual(args.tests, catalog.TEST_GROUPS["httparena"] + catalog.TEST_GROUPS["nginx"])
        names = [s.name for s in args.specs]
        self.assertEqual(names, ["gnosis", "rust-epoll", "tokio", "hyper", "may-minihttp-arena", "sark", "tonic-grpc",
                                 "tokio-ws", "tokio-uring-ws", "wtx-ws", "nginx"])  # fmt: skip
        by_name = {s.name: s for s in args.specs}
        self.assertEqual(by_name["may-minihttp-arena"].command, "/h/bin/may-minihttp")
        self.assertEqual(by_name["sark"].command, "/h/bin/sark")
        # sark binds 8080 to 8082 and 8443: gnosis goes to the next port, nginx after --baseline-port.
        self.assertEqual((by_name["gnosis"].port, by_name["nginx"].port), (8083, 8085))
        self.assertTrue(by_name["gnosis"].one_worker_command.endswith(
            "--port 8083 --tls-port 9083 --h2c-port 10083 --h2-tls-port 11083 --threads 1"))
        self.assertEqual((by_name["gnosis"].tls_port, by_name["sark"].tls_port), (9083, 8081))
        self.assertEqual((by_name["gnosis"].h2c_port, by_name["gnosis"].h2_tls_port), (10083, 11083))
        self.assertEqual((by_name["sark"].h2c_port, by_name["sark"].h2_tls_port, by_name["hyper"].h2_tls_port),
                         (8082, 8443, 8443))  # fmt: skip
        self.assertIn("nginx-1worker.conf", by_name["nginx"].one_worker_command)
        # nginx's h2 ports are its port's twins, as a command's are.
        self.assertEqual((by_name["nginx"].tls_port, by_name["nginx"].h2c_port, by_name["nginx"].h2_tls_port),
                         (9085, 10085, 11085))  # fmt: skip
        self.assertEqual(catalog.expand_tests("baseline,tfb,json"), ["baseline"] + catalog.TEST_GROUPS["tfb"])
        self.assertEqual([a.name for a in anchors.parse_anchor_list("tfb,faf")], ["may-minihttp", "xitca-web", "vortex", "faf"])

    def test_each_test_runs_only_against_the_servers_that_serve_it(self):
        calls = []

        def run_wrk(server, url, connections, threads, duration, accept, pipelined, mix=None):
            calls.append((server.name, url, connections, mix))
            return dict(fake_run(1000), connections=connections)

        def run_h2load(server, url, connections, threads, duration, rate, body=None, content_type=None):
            calls.append((server.name, url, connections, rate, body and body.stat().st_size))
            return dict(fake_run(1000), connections=connections)

        known = anchors.ANCHORS
        servers = [
            Server("gnosis", "gnosis --port {port}", "127.0.0.1", 8083, Path(os.devnull), one_worker_command="g1",
                   tls_port=9083),
            Server("rust-epoll", "/b/rust-epoll", "127.0.0.1", 8080, Path(os.devnull), known["rust-epoll"]),
            Server("sark", "/b/sark", "127.0.0.1", 8080, Path(os.devnull), known["sark"]),
            Server("nginx", "nginx", "127.0.0.1", 8085, Path(os.devnull), tests=tuple(catalog.TEST_GROUPS["nginx"]),
                         one_worker_command="nginx 1"),
        ]  # fmt: skip
        args = argparse.Namespace(levels=catalog.PROFILES["quick"]["levels"], threads=2, primer=1, warmup=1, duration=3,
                                  max_concurrency=512, rounds=1, pause_after_warmup=0, pause_between_levels=0)  # fmt: skip
        taking_part, lineups = {}, {}
        with mock.patch.object(schedule, "run_wrk", run_wrk), mock.patch.object(schedule, "run_h2load", run_h2load), \
                mock.patch.object(schedule, "probe", lambda host, port, path, accept, **_: (200, 2)):  # fmt: skip
            for name in catalog.TEST_GROUPS["httparena"] + catalog.TEST_GROUPS["nginx"]:
                lineup = RecordingLineup()
                record = schedule.run_test(catalog.TESTS[name], servers, args, lambda m: None, lineup)
                taking_part[name], lineups[name] = sorted(record["servers"]), lineup.calls
        self.assertEqual(taking_part, {
            "baseline": ["gnosis", "rust-epoll", "sark"], "pipelined": ["gnosis", "rust-epoll", "sark"],
            "limited-conn": ["gnosis", "rust-epoll", "sark"], "arena-json": ["gnosis", "sark"], "async": ["gnosis"],
            "json-tls": ["gnosis", "sark"], "latency-1m": ["gnosis", "rust-epoll", "sark"],
            "latency-10k": ["gnosis", "rust-epoll", "sark"], "8gbit": ["gnosis"],
            "plaintext-single": ["gnosis", "nginx"], "plaintext-single-1worker": ["gnosis", "nginx"],
        })  # fmt: skip
        self.assertEqual(lineups["plaintext-single-1worker"], [["gnosis", "nginx", "(one worker)"]])
        self.assertEqual(lineups["plaintext-single"], [["gnosis", "nginx"]])
        levels = [(name, connections, mix) for name, url, connections, mix, *_ in calls if connections >= 4096]
        self.assertIn(("sark", 4096, (httparena.JSON_MIX, 25)), levels)
        self.assertIn(("gnosis", 4096, (httparena.BASELINE_MIX, 10)), levels)
        self.assertIn(("gnosis", 14000, None), levels)
        self.assertIn(("gnosis", "http://127.0.0.1:8083/delay/10", 10000, None), calls)
        # The TLS tests go to each server's TLS port; the paced ones through h2load at their rate, every
        # phase at the test's connections.
        self.assertIn(("gnosis", "https://127.0.0.1:9083/json/1?m=3", 4096, (httparena.JSON_MIX, 0)), calls)
        self.assertIn(("sark", "https://127.0.0.1:8081/json/1?m=3", 4096, (httparena.JSON_MIX, 0)), calls)
        paced = {c for c in calls if len(c) == 5}
        self.assertEqual(paced, {
            ("gnosis", "https://127.0.0.1:9083/echo", 512, httparena.ECHO_RATE, httparena.ECHO_BODY_BYTES),
            *((name, f"http://127.0.0.1:{port}/baseline11?a=1&b=2", 1024, rate, None)
              for name, port in (("gnosis", 8083), ("rust-epoll", 8080), ("sark", 8080))
              for rate in (httparena.LATENCY_1M_RATE, httparena.LATENCY_10K_RATE)),
        })  # fmt: skip

    def test_async_table_has_the_ceiling_and_memory_per_connection(self):
        run = dict(fake_run(40_000), connections=10_000, phase="level", level=10_000, round=1)
        run.update(server_peak_rss_kib=60_000, server_rss_at_start_kib=20_000)
        record = {"test": "async", "level_name": "connections", "levels": [10_000], "skipped": {},
                  "servers": {"gnosis": {"runs": [run], "probe": None}}}  # fmt: skip
        row = summary.summarize(record)[("gnosis", 10_000)]
        self.assertAlmostEqual(row["rss_per_connection_bytes"], 40_000 * 1024 / 10_000)
        table = report.render_markdown(meta_for(["gnosis"]), [record], ["gnosis"])
        self.assertIn("| 4.0% of 1,000,000 | 4.00 KiB |", table)

    def test_a_run_without_an_answer_is_a_failure(self):
        """wrk still connecting 14,000 connections when its time is up answers nothing, and says no error."""
        empty = dict(fake_run(0), connections=14_000, phase="level", level=14_000, round=1)
        full = dict(fake_run(900), connections=14_000, phase="level", level=14_000, round=1)
        record = {"test": "async", "level_name": "connections", "levels": [14_000], "skipped": {},
                  "servers": {"gnosis": {"runs": [full], "probe": None}, "old": {"runs": [empty], "probe": None}}}  # fmt: skip
        self.assertEqual(summary.collect_failures([record]),
                         ["async / old: 0 socket errors, 0 non-2xx/3xx responses, 1 runs without an answer"])  # fmt: skip
        self.assertEqual(summary.ratios(record, "gnosis", "old", summary.rate), {})
        self.assertTrue(summary.run_has_errors(empty))

    def test_the_bars_fixed_answers_and_h2o_s_file_cache_are_said(self):
        def record(test):
            servers = {name: {"runs": [dict(fake_run(10_000), phase="level", level=64, round=1)], "probe": None}
                       for name in ("gnosis", "nginx", "h2o")}  # fmt: skip
            return {"test": test, "level_name": "connections", "levels": [64], "skipped": {}, "servers": servers}

        notes = {test: dict(summary.rule_breakers(record(test), {"anchors": {}}))
                 for test in ("json-tls", "baseline-h2", "baseline-h2c", "static-h2")}  # fmt: skip
        for test in ("baseline-h2", "baseline-h2c"):
            self.assertEqual(notes[test], {"nginx": nginx.BASELINE2_NOTE, "h2o": nginx.BASELINE2_NOTE})
        self.assertEqual(notes["json-tls"], {"nginx": nginx.FIXED_ANSWERS_NOTE, "h2o": nginx.FIXED_ANSWERS_NOTE})
        # nginx opens a file for every request (no open_file_cache); h2o 2.2.5 cannot be made to.
        self.assertEqual(notes["static-h2"], {"h2o": h2o.STATIC_NOTE})

    def test_a_server_that_ignores_connection_close_is_no_bar(self):
        def run(name, opened):
            r = dict(fake_run(10_000), connections=512, phase="level", level=512, round=1, connections_opened=opened)
            r["summary"] = dict(r["summary"], closes=1000)
            return r

        record = {"test": "limited-conn", "level_name": "connections", "levels": [512], "skipped": {},
                  "servers": {"gnosis": {"runs": [run("gnosis", 1512)], "probe": None},
                              "rust-epoll": {"runs": [run("rust-epoll", 512)], "probe": None}}}  # fmt: skip
        breakers = summary.rule_breakers(record, {"anchors": {"rust-epoll": "rust-epoll"}})
        self.assertEqual([name for name, _ in breakers], ["rust-epoll"])
        self.assertIn("reconnected after 0% of them; 19.5 requests per connection, not 10", breakers[0][1])
        table = report.render_markdown(meta_for(["gnosis", "rust-epoll"]), [record], ["gnosis", "rust-epoll"])
        self.assertIn("| limited-conn* | c=512 |", table)
        self.assertIn("| 6.6 |", table)  # gnosis: 10,000 requests over 1,512 connections
        self.assertIn("Requests in turn, one in flight per connection: `GET /baseline11?a=13&b=42 HTTP/1.1`, "
                      "`POST /baseline11?a=13&b=42 HTTP/1.1` + body, `POST /baseline11?a=13&b=42 HTTP/1.1` (chunked); "
                      "every 10th request", table)  # fmt: skip

    def test_a_level_beyond_the_machine_stops_the_run(self):
        args = argparse.Namespace(tests=["async", "queries"], levels={"async": [512, 25_000], "queries": [20]},
                                  max_concurrency=512)  # fmt: skip
        self.assertEqual(load.most_connections(args), 25_000)
        with self.assertRaisesRegex(system.SetupError, r"async at 25000 connections: this machine allows 1792, set by the open-files limit"):
            load.check_capacity(args, 2048)
        load.check_capacity(argparse.Namespace(tests=["async"], levels={"async": [512]}, max_concurrency=512), 2048)


class HttpArenaDatabase(unittest.TestCase):
    """async-db and arena-fortunes: HttpArena's requests, its database, and who serves them."""

    def test_the_requests_are_httparenas(self):
        requests = parse_requests("".join(httparena.ASYNC_DB_MIX).encode())
        self.assertEqual([path for _, path, _, _ in requests],
                         [f"/async-db?min=10&max=50&limit={n}" for n in (5, 10, 20, 35, 50)])  # fmt: skip
        self.assertEqual({(method, tuple(headers.items())) for method, _, headers, _ in requests},
                         {("GET", (("host", "localhost"),))})  # fmt: skip
        self.assertEqual(parse_requests(httparena.ARENA_FORTUNES_MIX[0].encode()),
                         [("GET", "/fortunes", {"host": "localhost"}, b"")])  # fmt: skip
        t = catalog.TESTS
        self.assertEqual((t["async-db"].requests, t["async-db"].close_every), (httparena.ASYNC_DB_MIX, 25))
        self.assertEqual((t["arena-fortunes"].requests, t["arena-fortunes"].close_every), (httparena.ARENA_FORTUNES_MIX, 0))
        self.assertEqual(catalog.expand_tests("arena-db"), ["async-db", "arena-fortunes"])
        args = bench_args("--tests", "arena-db", "--anchors", "sark")
        self.assertEqual(args.levels, {"async-db": [1024], "arena-fortunes": [1024]})

    def test_tfb_s_database_tests_and_httparena_s_run_apart(self):
        with redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
            bench_args("--tests", "fortunes,arena-fortunes")
        self.assertIn("need different databases", err.getvalue())
        bench_args("--tests", "json,async-db")

    def servers(self):
        known = anchors.ANCHORS
        return [
            Server("gnosis", "gnosis --port {port}", "127.0.0.1", 8083, Path(os.devnull), env={"DATASET_PATH": "/d"}),
            Server("rust-epoll", "/b/rust-epoll", "127.0.0.1", 8080, Path(os.devnull), known["rust-epoll"]),
            Server("sark", "/b/sark", "127.0.0.1", 8080, Path(os.devnull), known["sark"]),
        ]  # fmt: skip

    def test_each_runs_against_gnosis_and_sark(self):
        calls = []

        def run_wrk(server, url, connections, threads, duration, accept, pipelined, mix=None):
            calls.append((server.name, url, connections, mix))
            return dict(fake_run(1000), connections=connections)

        args = argparse.Namespace(levels=catalog.PROFILES["quick"]["levels"], threads=2, primer=1, warmup=1, duration=3,
                                  max_concurrency=512, rounds=1, pause_after_warmup=0, pause_between_levels=0)  # fmt: skip
        servers = self.servers()
        with mock.patch.object(schedule, "run_wrk", run_wrk), \
                mock.patch.object(schedule, "probe", lambda host, port, path, accept, **_: (200, 2)):  # fmt: skip
            for name in httparena.DB_TESTS:
                record = schedule.run_test(catalog.TESTS[name], servers, args, lambda m: None, RecordingLineup())
                self.assertEqual(sorted(record["servers"]), ["gnosis", "sark"])
        at_1024 = {(name, url, mix) for name, url, connections, mix in calls if connections == 1024}
        self.assertEqual(at_1024, {
            ("gnosis", "http://127.0.0.1:8083/async-db?min=10&max=50&limit=50", (httparena.ASYNC_DB_MIX, 25)),
            ("sark", "http://127.0.0.1:8080/async-db?min=10&max=50&limit=50", (httparena.ASYNC_DB_MIX, 25)),
            ("gnosis", "http://127.0.0.1:8083/fortunes", (httparena.ARENA_FORTUNES_MIX, 0)),
            ("sark", "http://127.0.0.1:8080/fortunes", (httparena.ARENA_FORTUNES_MIX, 0)),
        })  # fmt: skip

    def test_a_run_without_them_needs_no_database(self):
        servers = self.servers()
        self.assertIsNone(databases.give_arena_database(servers, ["baseline", "arena-json"], print))
        self.assertEqual([s.env for s in servers], [{"DATASET_PATH": "/d"}, None, None])

    @unittest.skipUnless(shutil.which("psql") and subprocess.run(
        ["bash", str(system.PG_SH), "status"], capture_output=True).returncode == 0,
        "scripts/pg.sh's cluster is not running")  # fmt: skip
    def test_the_servers_that_serve_them_get_httparena_s_database(self):
        servers = self.servers()
        line = databases.give_arena_database(servers, ["baseline", "async-db"], lambda m: None)
        url = subprocess.run(["bash", str(system.PG_SH), "arena-env"], capture_output=True, text=True).stdout
        url = url.split("DATABASE_URL=", 1)[1].strip()
        gnosis, rust_epoll, sark = servers
        share = gnosis.env["DATABASE_MAX_CONN"]
        self.assertEqual(gnosis.env, {"DATASET_PATH": "/d", "DATABASE_URL": url, "DATABASE_MAX_CONN": share})
        self.assertEqual(sark.env, {"DATABASE_URL": url, "DATABASE_MAX_CONN": share})
        self.assertIsNone(rust_epoll.env)
        self.assertTrue(databases.ARENA_DB_MIN_SHARE <= int(share) <= 256, share)
        self.assertIn("gnosis, sark started with DATABASE_URL=postgres://bench@localhost:", line)
        self.assertNotIn(":bench@", line)

    def test_the_table_has_postgresql_cpu_per_request(self):
        run = dict(fake_run(40_000), connections=1024, phase="level", level=1024, round=1, postgres_cpu_s=2.0)
        record = {"test": "async-db", "level_name": "connections", "levels": [1024], "skipped": {},
                  "servers": {"gnosis": {"runs": [run], "probe": None}}}  # fmt: skip
        table = report.render_markdown(meta_for(["gnosis"]), [record], ["gnosis"])
        self.assertIn("| PostgreSQL CPU-s per 1k req |", table)
        self.assertIn("| 0.05 |", table)  # 2 s of PostgreSQL CPU over 40,000 requests


class MemoryOfAServer(unittest.TestCase):
    def test_peak_and_current_rss_of_a_stand_in_server(self):
        """A stand-in that writes 64 MiB and frees it when a client connects: its peak stays, its RSS falls."""
        stand_in = (
            "import socket, sys\n"
            "listener = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
            "while True:\n"
            "    client, _ = listener.accept()\n"
            "    if client.recv(1) == b'x':\n"
            "        block = b'x' * (64 << 20); del block\n"
            "        client.sendall(b'done')\n"
            "    client.close()\n"
        )
        with tempfile.TemporaryDirectory() as tmp:
            script = Path(tmp) / "stand_in.py"
            script.write_text(stand_in)
            port = free_port()
            server = Server("stand-in", f"{sys.executable} {script} {{port}}", "127.0.0.1", port, Path(tmp) / "log")
            try:
                server.start(timeout=20)
                server.reset_peak_rss()
                with socket.create_connection(("127.0.0.1", port)) as client:
                    client.sendall(b"x")
                    self.assertEqual(client.recv(4), b"done")
                peak, now, start = server.peak_rss_kib(), server.rss_kib(), server.rss_at_start_kib
            finally:
                server.stop()
        self.assertGreater(start, 1000)
        self.assertGreaterEqual(peak, start + 60 * 1024)
        self.assertLess(now, peak - 32 * 1024)
        self.assertEqual(summary.rss_per_connection_bytes(
            {"server_peak_rss_kib": peak, "server_rss_at_start_kib": start, "connections": 2}), (peak - start) * 512)  # fmt: skip


class Bars(unittest.TestCase):
    """nginx and h2o as configured here: each configuration checked by the server itself, /plaintext
    in the clear, json-tls's answers over TLS 1.3, the same bytes as gnosis writes, and HttpArena's
    H2 tests over h2c by prior knowledge and h2 over TLS (curl): /baseline2's sum and static-h2's
    files, the bytes on disk (the .br sidecar's, asked with static-h2's Accept-Encoding)."""

    CERTIFICATE = (str(anchors.shared_path("anchors", "httparena", "data", "certs", "server.crt")),
                   str(anchors.shared_path("anchors", "httparena", "data", "certs", "server.key")))  # fmt: skip
    STATIC_DIR = anchors.shared_path("anchors", "httparena", "data", "static")

    def serve(self, name, write_configs, command, conf, one_worker_conf, workers_line, sidecars):
        if not shutil.which(name):
            self.skipTest(f"{name} is not installed")
        if not Path(self.CERTIFICATE[0]).exists() or not self.STATIC_DIR.is_dir():
            self.skipTest("no HttpArena test certificate or static files beside the checkout")
        if not shutil.which("curl"):
            self.skipTest("curl is not installed")
        with tempfile.TemporaryDirectory() as tmp:
            port, tls_port, h2c_port, h2_tls_port = (free_port() for _ in range(4))
            nginx.write_json_answers(tmp, session.DATASET)
            # raises if the server rejects one
            write_configs(tmp, port, tls_port, self.CERTIFICATE, h2c_port, h2_tls_port, str(self.STATIC_DIR))
            config = (Path(tmp) / conf).read_text()
            self.assertIn(workers_line.format(len(os.sched_getaffinity(0))), config)
            self.assertIn(workers_line.format(1), (Path(tmp) / one_worker_conf).read_text())
            server = Server(name, command.replace(nginx.BARS_DIR, tmp), "127.0.0.1", port, Path(tmp) / "log",
                            tests=nginx.BAR_TESTS, tls_port=tls_port, h2c_port=h2c_port,
                            h2_tls_port=h2_tls_port)  # fmt: skip
            static = [f"/static/{f}" for f in ("vendor.js", "reset.css", "hero.webp")]
            try:
                server.start(timeout=20)
                plaintext = probe_body(port, "/plaintext")
                answers = {count: probe_body(tls_port, f"/json/{count}?m={m}", tls=True) for count, m in httparena.JSON_PAIRS}
                h2 = {(scheme, path): h2_get(f"{scheme}://127.0.0.1:{h2_port}{path}")
                      for scheme, h2_port in (("http", h2c_port), ("https", h2_tls_port))
                      for path in ["/baseline2?a=1&b=1"] + static}  # fmt: skip
                processes = server.processes()
            finally:
                server.stop()
        for scheme in ("http", "https"):
            self.assertEqual(h2[scheme, "/baseline2?a=1&b=1"], ("2", 200, "text/plain", b"2"))
            for path in static:
                version, status, _, body = h2[scheme, path]
                self.assertEqual((version, status), ("2", 200))
                # br preferred: the .br sidecar's bytes where there is one (as gnosis sends), else
                # the file's; all files as they are from a server that does not read the header.
                name = path.rsplit("/", 1)[1]
                sidecar = self.STATIC_DIR / (name + ".br")
                served = sidecar if sidecars and sidecar.exists() else self.STATIC_DIR / name
                self.assertEqual(body, served.read_bytes(), path)
        self.assertEqual(h2["https", "/static/vendor.js"][2], "application/javascript")
        self.assertEqual(h2["https", "/static/reset.css"][2], "text/css")
        for test in ("baseline-h2", "baseline-h2c", "static-h2"):
            self.assertTrue(server.serves(catalog.TESTS[test]))
        self.assertFalse(server.serves(catalog.TESTS["unary-grpc"]))
        self.assertEqual(plaintext[:2], (200, "text/plain"))
        self.assertEqual(plaintext[2], b"Hello, World!")
        expected = nginx.json_answers(session.DATASET)
        for count, (status, content_type, body, version) in answers.items():
            self.assertEqual((status, content_type, body, version), (200, "application/json", expected[count], "TLSv1.3"))
        self.assertTrue(server.serves(catalog.TESTS["json-tls"]))
        self.assertFalse(server.serves(catalog.TESTS["plaintext"]))
        return config, processes

    def test_nginx(self):
        config, processes = self.serve("nginx", nginx.write_nginx_configs, nginx.nginx_command(nginx.NGINX_CONF),
                                       nginx.NGINX_CONF, nginx.NGINX_ONE_WORKER_CONF, "worker_processes {};", sidecars=True)  # fmt: skip
        for directive in ("sendfile on;", "tcp_nodelay on;", "access_log off;", "ssl_protocols TLSv1.3;"):
            self.assertIn(directive, config)
        self.assertEqual(len(processes), 1 + len(os.sched_getaffinity(0)))  # master and workers, no shell

    def test_h2o(self):
        config, _ = self.serve("h2o", h2o.write_h2o_configs, h2o.h2o_command(h2o.H2O_CONF), h2o.H2O_CONF,
                               h2o.H2O_ONE_WORKER_CONF, "num-threads: {}", sidecars=False)  # fmt: skip
        # It has them on, and serves them to a bare coding (h2o 2.2.5 reads no q-value).
        self.assertIn("file.send-compressed: ON", config)
        self.assertIn("min-version: TLSv1.3", config)

    def test_the_json_answers_are_gnosis_s_shape(self):
        answers = nginx.json_answers(session.DATASET)
        self.assertEqual(sorted(answers), sorted(count for count, _ in httparena.JSON_PAIRS))
        first = json.loads(answers[1])
        self.assertEqual(first["count"], 1)
        item = first["items"][0]
        self.assertEqual(item["total"], item["price"] * item["quantity"] * 3)
        self.assertEqual(list(item)[-1], "total")


def h2_get(url):
    """(HTTP version, status, Content-Type, body) of one GET by curl over HTTP/2: h2c by prior
    knowledge for http://, ALPN h2 for https:// (any certificate); as static-h2 asks, with
    Accept-Encoding br and gzip."""
    h2 = "--http2-prior-knowledge" if url.startswith("http:") else "--http2"
    with tempfile.NamedTemporaryFile() as body:
        done = subprocess.run(["curl", "-sk", h2, "-H", "Accept-Encoding: br;q=1, gzip;q=0.8", "-o", body.name,
                               "-w", "%{http_version} %{http_code} %{content_type}", url],
                              capture_output=True, text=True, timeout=20, check=True)  # fmt: skip
        version, status, content_type = (done.stdout.split(" ", 2) + [""])[:3]
        return version, int(status), content_type.split(";")[0], Path(body.name).read_bytes()


def probe_body(port, path, tls=False):
    """(status, Content-Type, body), and the TLS version with `tls`."""
    if tls:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        answer = response.status, response.getheader("Content-Type"), response.read()
        return answer + (conn.sock.version(),) if tls else answer
    finally:
        conn.close()


class Chart(unittest.TestCase):
    def test_lines_points_and_scale(self):
        svg = chart.render_svg("json: requests/s", "connections", [16, 32, 64],
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
        root = ET.fromstring(chart.render_svg("t", "x", [1], [("<a&b>", [1.0])]))
        self.assertIn("<a&b>", [t.text for t in root.iter(f"{SVG}text")])

    def test_nice_ceiling(self):
        for value, ceiling in ((0, 1), (0.5, 1), (7, 10), (1234, 2000), (2100, 2500), (2600, 5000), (5000, 5000)):
            self.assertEqual(chart.nice_ceiling(value), ceiling, value)


class PacedRuns(unittest.TestCase):
    H2LOAD_OUTPUT = """finished in 2.01s, 800.00 req/s, 7.92MB/s
requests: 1600 total, 1600 started, 1600 done, 1590 succeeded, 10 failed, 2 errored, 1 timeout
status codes: 1590 2xx, 0 3xx, 8 4xx, 0 5xx
"""

    def test_the_command_offers_the_rate_over_the_connections(self):
        command = pace.h2load_command("https://127.0.0.1:1/echo", 512, 2, 10, 5_000, Path("/b"), "application/x", "/l")
        at = command.index("--rps")
        self.assertEqual(command[at + 1], "10")  # 5,000 over 512 is 9.8 a connection: 10, 5,120 in all
        self.assertEqual(pace.offered_rate(5_000, 512), 5_120)
        self.assertEqual(command[:2], ["h2load", "--h1"])
        for flag, value in (("-c", "512"), ("-t", "2"), ("-D", "10"), ("-d", "/b"), ("--log-file", "/l")):
            self.assertEqual(command[command.index(flag) + 1], value)
        self.assertIn("content-type: application/x", command)
        self.assertEqual(command[-1], "https://127.0.0.1:1/echo")
        self.assertNotIn("-d", pace.h2load_command("http://h/", 8, 1, 1, 80))

    def test_the_output_and_the_log_make_a_summary(self):
        log = [f"{1795641743451079 + i}\t200\t{latency}\n" for i, latency in enumerate(range(100, 200))]
        summary = pace.parse_h2load_output(self.H2LOAD_OUTPUT, log, 2)
        self.assertEqual(summary["requests"], 1590)
        self.assertEqual(summary["requests_per_s"], 795)
        self.assertEqual(summary["socket_errors"], 13)
        self.assertEqual(summary["non_2xx"], 8)  # the 4xx; `done` less 2xx would be 10
        self.assertEqual(summary["latency_us"], {"p50": 150, "p75": 175, "p90": 190, "p99": 199, "mean": 150})
        with self.assertRaises(ValueError):
            pace.parse_h2load_output("h2load: connection refused\n", [], 2)

    def test_a_paced_table_has_the_mean_the_share_of_the_rate_and_cpu_per_request(self):
        run = dict(fake_run(5_000, cpu_s=0.2), connections=512, phase="level", level=512, round=1)
        run["summary"]["latency_us"]["mean"] = 1_500
        run["summary"]["offered_per_s"] = 5_120
        record = {"test": "8gbit", "level_name": "connections", "levels": [512], "skipped": {},
                  "servers": {"gnosis": {"runs": [run], "probe": None}}}  # fmt: skip
        table = report.render_markdown(meta_for(["gnosis"]), [record], ["gnosis"])
        self.assertIn("| mean latency | share of the offered rate | server CPU µs per request |", table)
        self.assertIn("| 1.50 ms | 97.7% | 40.0 |", table)


class KeptRuns(unittest.TestCase):
    """json-tls-kept: json-tls's pairs over TLS on connections made before the measured window."""

    def test_the_command_makes_every_connection_in_its_warm_up(self):
        command = pace.kept_command(Path("/u"), 4096, 2, 8, tfb.ACCEPT_JSON, "/l")
        self.assertEqual(command[:2], ["h2load", "--h1"])
        for flag, value in (("-c", "4096"), ("-t", "2"), ("-D", "8"), ("--warm-up-time", "9"), ("-i", "/u"),
                            ("--log-file", "/l"), ("-H", f"Accept: {tfb.ACCEPT_JSON}")):  # fmt: skip
            self.assertEqual(command[command.index(flag) + 1], value)
        self.assertEqual([pace.kept_warm_up(n) for n in (1, 8, 512, 4096)], [1, 1, 2, 9])

    def test_it_goes_to_the_tls_ports_of_the_servers_that_serve_it_with_json_tls_s_pairs(self):
        calls = []

        def run_kept(server, uris, connections, threads, duration, accept):
            calls.append((server.name, uris.read_text().split(), connections, accept))
            return dict(fake_run(1000), connections=connections)

        known = anchors.ANCHORS
        servers = [
            Server("gnosis", "gnosis --port {port}", "127.0.0.1", 8083, Path(os.devnull), tls_port=9083),
            Server("rust-epoll", "/b/rust-epoll", "127.0.0.1", 8080, Path(os.devnull), known["rust-epoll"]),
            Server("sark", "/b/sark", "127.0.0.1", 8080, Path(os.devnull), known["sark"]),
        ]  # fmt: skip
        args = argparse.Namespace(levels=catalog.PROFILES["quick"]["levels"], threads=2, primer=1, warmup=1, duration=3,
                                  max_concurrency=512, rounds=1, pause_after_warmup=0, pause_between_levels=0)  # fmt: skip
        with mock.patch.object(schedule, "run_kept", run_kept), \
                mock.patch.object(schedule, "probe", lambda host, port, path, accept, **_: (200, 2)):  # fmt: skip
            record = schedule.run_test(catalog.TESTS["json-tls-kept"], servers, args, lambda m: None, RecordingLineup())
        self.assertEqual(sorted(record["servers"]), ["gnosis", "sark"])
        pairs = [f"/json/{count}?m={m}" for count, m in httparena.JSON_PAIRS]
        self.assertIn(("gnosis", [f"https://127.0.0.1:9083{uri}" for uri in pairs], 4096, tfb.ACCEPT_JSON), calls)
        self.assertIn(("sark", [f"https://127.0.0.1:8081{uri}" for uri in pairs], 4096, tfb.ACCEPT_JSON), calls)
        # Ours, not HttpArena's: run when named.
        self.assertNotIn("json-tls-kept", catalog.TEST_GROUPS["httparena"])

    def test_the_cpu_figures_leave_the_warm_up_out(self):
        # A generator that burns 0.5 s of CPU at once, then idles until 4 s after its start: with
        # the window opening at 3 s, its burn is left out, all of it counted without a window.
        # What the window may still hold is its exit and /proc's rounding to clock ticks (0.06 s
        # seen on a loaded machine): far below the burn it must leave out.
        burn_then_idle = (
            "import time\n"
            "started = time.monotonic()\n"
            "while time.process_time() < 0.5: pass\n"
            "time.sleep(max(0, 4 - (time.monotonic() - started)))\n"
            "print('ok')\n"
        )
        generator = [sys.executable, "-c", burn_then_idle]
        whole = load.run_load(FakeServer(), generator, 1, 1, 4, lambda stdout: {"requests": 1, "out": stdout})
        windowed = load.run_load(FakeServer(), generator, 1, 1, 1, lambda stdout: {"requests": 1, "out": stdout},
                                 measured_after=3)  # fmt: skip
        self.assertEqual((whole["summary"]["out"], windowed["summary"]["out"]), ("ok\n", "ok\n"))
        self.assertGreaterEqual(whole["wrk_cpu_s"], 0.45)
        self.assertLess(windowed["wrk_cpu_s"], 0.2)
        self.assertLess(windowed["wall_s"], 2.5)


class H2Runs(unittest.TestCase):
    """HttpArena's H2 and gRPC profiles: h2load's command line as its scripts/lib/tools/h2load.sh
    builds it, to the port of each server that serves the test."""

    def gnosis(self):
        return Server("gnosis", "x", "127.0.0.1", 8083, Path(os.devnull), tls_port=9083, h2c_port=10083,
                      h2_tls_port=11083)  # fmt: skip

    def test_the_command_of_each_h2_test(self):
        base = ["h2load", "-c", "64", "-m", "100", "-t", "2", "-D", "4", "--warm-up-time", "1"]
        url = "https://127.0.0.1:11083/baseline2?a=1&b=1"
        self.assertEqual(pace.h2_command(url, 64, 2, 4, 100), base + [url])
        h2c = "http://127.0.0.1:10083/baseline2?a=1&b=1"
        self.assertEqual(pace.h2_command(h2c, 64, 2, 4, 100, h2c=True), base + ["-p", "h2c", h2c])
        grpc = pace.h2_command("http://h:1/g", 64, 2, 4, 100, grpc_body_file="/f", h2c=True)
        self.assertEqual(grpc[len(base):], ["-p", "h2c", "-d", "/f", "-H", "content-type: application/grpc",
                                            "-H", "te: trailers", "http://h:1/g"])  # fmt: skip
        static = pace.h2_command(None, 64, 2, 4, 32, uri_file="/u")
        self.assertEqual(static[-4:], ["-H", "Accept-Encoding: br;q=1, gzip;q=0.8", "-i", "/u"])
        self.assertEqual(pace.h2_command(url, 1, 1, None, 1, requests=1), ["h2load", "-c", "1", "-m", "1", "-t", "1",
                                                                           "-n", "1", url])  # fmt: skip
        self.assertEqual(httparena.GRPC_SUM_FRAME, bytes([0, 0, 0, 0, 4, 8, 1, 16, 2]))
        self.assertEqual(len(httparena.STATIC_H2_FILES), 20)
        t = catalog.TESTS
        self.assertEqual([t[n].streams for n in catalog.TEST_GROUPS["arena-h2"]], [100, 100, 32, 100, 100])

    def test_each_test_goes_to_its_port(self):
        t, gnosis = catalog.TESTS, self.gnosis()
        ports = {n: schedule.endpoint(t[n], gnosis) for n in catalog.TEST_GROUPS["arena-h2"]}
        self.assertEqual(ports, {"baseline-h2": (11083, "https"), "baseline-h2c": (10083, "http"),
                                 "static-h2": (11083, "https"), "unary-grpc": (8083, "http"),
                                 "unary-grpc-tls": (11083, "https")})  # fmt: skip
        sark = Server("sark", "x", "127.0.0.1", 8080, Path(os.devnull), anchors.ANCHORS["sark"])
        self.assertEqual(schedule.endpoint(t["baseline-h2c"], sark), (8082, "http"))
        self.assertEqual(schedule.endpoint(t["static-h2"], sark), (8443, "https"))
        uris = schedule.uri_file(t["static-h2"], "https://127.0.0.1:11083").read_text().splitlines()
        self.assertEqual(uris[:2], ["https://127.0.0.1:11083/static/reset.css", "https://127.0.0.1:11083/static/layout.css"])
        self.assertEqual(len(uris), 20)

    def test_http2_output_makes_the_same_summary(self):
        output = """finished in 4.00s, 50000.00 req/s, 3.00MB/s
requests: 200000 total, 200100 started, 200000 done, 200000 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 200000 2xx, 0 3xx, 0 4xx, 0 5xx
"""
        summary = pace.parse_h2load_output(output, [f"1\t200\t{us}\n" for us in range(1, 101)], 4)
        self.assertEqual((summary["requests"], summary["requests_per_s"], summary["non_2xx"]), (200000, 50000, 0))
        self.assertEqual(pace.h2load_counts(output)["2xx"], 200000)


class GatewayRuns(unittest.TestCase):
    """HttpArena's gateway profiles: h2load's command line as its h2load.sh and h2load-h3.sh build it
    for gateway-64 and gateway-h3, its URI list rewritten to each stack's h2 TLS port, and the
    stacks of --server and --baseline gateway:EDGE, Caddy's and nginx's configured from the
    templates in bench/gateway/."""

    CERTIFICATE = Bars.CERTIFICATE
    STATIC_DIR = Bars.STATIC_DIR
    # HttpArena's requests/gateway-64-uris.txt (MDA2AV/HttpArena at 28606baf), as it is.
    GATEWAY_64_URIS_TXT = """https://localhost:8443/static/reset.css
https://localhost:8443/static/components.css
https://localhost:8443/static/app.js
https://localhost:8443/static/vendor.js
https://localhost:8443/static/header.html
https://localhost:8443/static/hero.webp
https://localhost:8443/baseline2?a=1&b=1
https://localhost:8443/baseline2?a=13&b=42
https://localhost:8443/baseline2?a=100&b=7
https://localhost:8443/baseline2?a=250&b=500
https://localhost:8443/json/1
https://localhost:8443/json/5
https://localhost:8443/json/10
https://localhost:8443/json/15
https://localhost:8443/json/25
https://localhost:8443/json/40
https://localhost:8443/json/50
https://localhost:8443/async-db?min=10&max=50&limit=10
https://localhost:8443/async-db?min=10&max=50&limit=25
https://localhost:8443/async-db?min=10&max=50&limit=50
"""

    def test_the_uris_and_levels_are_httparenas(self):
        uris = httparena.GATEWAY_URIS
        self.assertEqual(uris, tuple(u.replace("https://localhost:8443", "") for u in self.GATEWAY_64_URIS_TXT.split()))
        self.assertEqual(workload.uri_kinds(uris), "6 `/static`, 4 `/baseline2`, 7 `/json`, 3 `/async-db`")
        self.assertEqual(uris[2:4], ("/static/app.js", "/static/vendor.js"))
        self.assertIn("/json/50", uris)  # no m: HttpArena's gateway takes m = 1
        t = catalog.TESTS
        self.assertEqual([(t[n].h2, t[n].streams, t[n].uris) for n in httparena.GATEWAY_TESTS],
                         [("tls", 32, uris), ("h3", 32, uris)])  # fmt: skip
        self.assertEqual(catalog.expand_tests("arena-gateway"), ["gateway-64", "gateway-h3"])
        self.assertNotIn("gateway-64", catalog.TEST_GROUPS["httparena"])
        args = bench_args("--tests", "arena-gateway")
        self.assertEqual(args.levels, {"gateway-64": [512, 1024], "gateway-h3": [64, 256]})
        # Their application answers /async-db: HttpArena's database, not TFB's, and its CPU column.
        self.assertTrue(set(httparena.GATEWAY_TESTS) <= set(catalog.DB_TESTS))
        with redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
            bench_args("--tests", "fortunes,gateway-64")
        self.assertIn("need different databases", err.getvalue())
        # Not sark's: its meta.json names no gateway profile.
        self.assertFalse(set(httparena.GATEWAY_TESTS) & set(anchors.ANCHORS["sark"].tests))

    def test_the_commands_are_h2load_sh_s_and_h2load_h3_sh_s(self):
        accept = ["-H", "Accept-Encoding: br;q=1, gzip;q=0.8", "-i", "/u"]
        timed = ["-D", "3", "--warm-up-time", "1"]
        # h2load.sh: -i gateway-64-uris.txt -H ... -c C -m 32 -t T -D D; by h2load-h3's h2load (nghttp2 1.69).
        self.assertEqual(pace.h2_command(None, 512, 2, 3, 32, uri_file="/u", h3_binary=True),
                         [str(anchors.H2LOAD_H3), "-c", "512", "-m", "32", "-t", "2"] + timed + accept)  # fmt: skip
        # h2load-h3.sh: the same after --alpn-list=h3.
        self.assertEqual(pace.h2_command(None, 64, 2, 3, 32, uri_file="/u", h3=True),
                         [str(anchors.H2LOAD_H3), "--alpn-list=h3", "-c", "64", "-m", "32", "-t", "2"] + timed + accept)  # fmt: skip
        self.assertEqual(catalog.TESTS["gateway-64"].h3_binary, True)
        self.assertIn("h2load-h3's h2load", workload.load_description(catalog.TESTS["gateway-64"]))

    def test_each_goes_to_the_stack_s_h2_tls_port_with_the_list_rewritten_to_it(self):
        t = catalog.TESTS
        caddy = Server("caddy+gnosis", "x", "127.0.0.1", 8080, Path(os.devnull), tests=httparena.GATEWAY_TESTS,
                       h2_tls_port=11080)  # fmt: skip
        nginx_stack = Server("nginx+gnosis", "x", "127.0.0.1", 8081, Path(os.devnull), tests=("gateway-64",),
                             h2_tls_port=11081)  # fmt: skip
        self.assertEqual([schedule.endpoint(t[n], caddy) for n in httparena.GATEWAY_TESTS],
                         [(11080, "https"), (11080, "https")])  # fmt: skip
        self.assertEqual([nginx_stack.serves(t[n]) for n in httparena.GATEWAY_TESTS], [True, False])
        calls = []

        def run_h2(server, url, connections, threads, duration, streams, uri_file=None, grpc_body_file=None,
                   h2c=False, h3=False, h3_binary=False):  # fmt: skip
            calls.append((server.name, connections, streams, h3, h3_binary, uri_file.read_text().splitlines()))
            return dict(fake_run(1000), connections=connections)

        args = argparse.Namespace(levels={"gateway-64": [512], "gateway-h3": [64]}, threads=2, primer=1, warmup=1,
                                  duration=3, max_concurrency=512, rounds=1, pause_after_warmup=0,
                                  pause_between_levels=0)  # fmt: skip
        with mock.patch.object(schedule, "run_h2", run_h2), \
                mock.patch.object(schedule, "probe_h2", lambda test, url: (200, 0)):  # fmt: skip
            for name in httparena.GATEWAY_TESTS:
                record = schedule.run_test(t[name], [caddy, nginx_stack], args, lambda m: None, RecordingLineup())
                self.assertNotIn("failed", record)
        # Primer (8 connections), warm-up (512) and the level, each stack that serves the test.
        self.assertEqual({(name, c, m, h3, binary) for name, c, m, h3, binary, _ in calls},
                         {(name, c, 32, False, True) for name in ("caddy+gnosis", "nginx+gnosis") for c in (8, 512)}
                         | {("caddy+gnosis", c, 32, True, False) for c in (8, 512, 64)})  # fmt: skip
        lists = {(name, h3): uris for name, _, _, h3, _, uris in calls}
        self.assertEqual(lists["caddy+gnosis", False], [f"https://127.0.0.1:11080{u}" for u in httparena.GATEWAY_URIS])
        self.assertEqual(lists["nginx+gnosis", False][6], "https://127.0.0.1:11081/baseline2?a=1&b=1")
        self.assertEqual(lists["caddy+gnosis", True][-1], "https://127.0.0.1:11080/async-db?min=10&max=50&limit=50")

    def test_the_probe_asks_for_every_uri_of_the_list_once(self):
        commands = []

        def run(command, **_):
            commands.append(command)
            return subprocess.CompletedProcess(command, 0, "requests: 20 total, 20 started, 20 done, 13 succeeded\n"
                                               "status codes: 13 2xx, 0 3xx, 7 4xx, 0 5xx\n", "")  # fmt: skip

        with mock.patch.object(schedule.subprocess, "run", run):
            status, _ = schedule.probe_h2(catalog.TESTS["gateway-64"], "https://127.0.0.1:11090/static/reset.css")
        self.assertTrue(status.startswith("h2load: {"), status)
        self.assertIn("'4xx': 7", status)
        command = commands[0]
        self.assertEqual(command[:10], [str(anchors.H2LOAD_H3), "-c", "1", "-m", "1", "-t", "1", "-n", "20", "-H"])
        uris = Path(command[command.index("-i") + 1]).read_text().splitlines()
        self.assertEqual(uris, [f"https://127.0.0.1:11090{u}" for u in httparena.GATEWAY_URIS])

    def test_the_stacks_on_the_command_line(self):
        args = bench_args("--server", "gateway:caddy", "--baseline", "gateway:nginx", "--tests", "arena-gateway")
        caddy, nginx_stack = args.specs
        app = gateway.DEFAULT_APP
        self.assertEqual((caddy.name, caddy.port, caddy.h2_tls_port, caddy.tls_port, caddy.h2c_port),
                         ("caddy+gnosis", 8080, 11080, None, None))  # fmt: skip
        self.assertEqual(caddy.command, app.replace("{port}", "8080") + " & exec env XDG_CONFIG_HOME={bars_dir} "
                         "XDG_DATA_HOME={bars_dir} caddy run --config {bars_dir}/caddy-gateway-8080.Caddyfile "
                         "--adapter caddyfile")  # fmt: skip
        self.assertTrue(app.endswith("/target/release/gnosis --port {port} --tls-port 0 --h2c-port 0 --h2-tls-port 0 "
                                     "--h3-port 0"))  # fmt: skip
        self.assertEqual((nginx_stack.name, nginx_stack.port, nginx_stack.h2_tls_port), ("nginx+gnosis", 8081, 11081))
        self.assertEqual(nginx_stack.command, app.replace("{port}", "8081") + " & exec nginx -p {bars_dir}/ "
                         "-c {bars_dir}/nginx-gateway-8081.conf")  # fmt: skip
        self.assertEqual((caddy.tests, nginx_stack.tests),
                         (("gateway-64", "gateway-h3", "production-stack"), ("gateway-64", "production-stack")))
        self.assertEqual((caddy.gateway, nginx_stack.gateway, caddy.one_worker_command), ("caddy", "nginx", None))
        args = bench_args("--server", "gateway:gnosis", "--baseline", "gateway:caddy", "--gateway-app",
                          "/opt/app --listen {port}", "--tests", "gateway-h3", "--port", "9000")  # fmt: skip
        edge, caddy = args.specs
        self.assertEqual(edge.command, f"/opt/app --listen 9000 & exec {gateway.GNOSIS} --upstream 127.0.0.1:9000 "
                         "--port 0 --tls-port 0 --h2c-port 0 --h2-tls-port 12000 --h3-port 12000")  # fmt: skip
        self.assertEqual((edge.name, caddy.name, caddy.port), ("gnosis+app", "caddy+app", 9001))
        with redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
            bench_args("--baseline", "gateway:haproxy")
        self.assertIn("unknown gateway edge 'haproxy'", err.getvalue())

    def test_the_configurations_are_httparena_s_with_the_run_s_ports_and_paths(self):
        certificate, static = ("/c/server.crt", "/c/server.key"), "/s/static"
        caddyfile = gateway.gateway_config(gateway.EDGES["caddy"], "/run", 8080, 11080, certificate, static)
        conf = gateway.gateway_config(gateway.EDGES["nginx"], "/run", 8081, 11081, certificate, static)
        for text in (caddyfile, conf):
            self.assertNotRegex(text, "@[A-Z_]+@")
        for line in ("https://:11080 {", "tls /c/server.crt /c/server.key {", "protocols h1 h2 h3",
                     "handle_path /static/* {", "root * /s/static", "precompressed br gzip",
                     "reverse_proxy 127.0.0.1:8080 {", "keepalive 5m", "keepalive_idle_conns 2048",
                     "keepalive_idle_conns_per_host 2048", "versions 1.1", "admin off"):  # fmt: skip
            self.assertIn(line, caddyfile)
        for line in ("listen 127.0.0.1:11081 ssl http2", "ssl_certificate /c/server.crt;", "ssl_protocols TLSv1.3;",
                     "server 127.0.0.1:8081;", "keepalive 2048;", "proxy_pass http://backend;",
                     "proxy_http_version 1.1;", 'proxy_set_header Connection "";', "alias /s/static/;",
                     "gzip_static on;", "brotli_static on;", f"load_module {nginx.NGINX_BROTLI_STATIC};",
                     "pid /run/nginx-gateway-11081.pid;", "worker_processes auto;"):  # fmt: skip
            self.assertIn(line, conf)
        self.assertIsNone(gateway.write_gateway_config(gateway.EDGES["gnosis"], "/run", 1, 2, certificate, static))

    def serve(self, edge_name):
        """A stack of `edge_name` in front of a stand-in application (Python's http.server, files
        named as the dynamic routes): its configuration checked by the edge, started as the bench
        starts a server, asked for each kind of URI over h2 (curl) and by the bench's probe."""
        if not shutil.which(edge_name) or not shutil.which("curl"):
            self.skipTest(f"{edge_name} or curl is not installed")
        if not Path(self.CERTIFICATE[0]).exists() or not self.STATIC_DIR.is_dir():
            self.skipTest("no HttpArena test certificate or static files beside the checkout")
        edge = gateway.EDGES[edge_name]
        with tempfile.TemporaryDirectory() as tmp:
            app_dir = Path(tmp) / "app"
            (app_dir / "json").mkdir(parents=True)
            (app_dir / "baseline2").write_text("from the application")
            (app_dir / "async-db").write_text("{}")
            for count in (1, 5, 10, 15, 25, 40, 50):
                (app_dir / "json" / str(count)).write_text("{}")
            port, h2_tls_port = free_port(), free_port()
            gateway.write_gateway_config(edge, tmp, port, h2_tls_port, self.CERTIFICATE, str(self.STATIC_DIR))
            app = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {app_dir}"
            command = gateway.stack_command(edge, app, port, h2_tls_port).replace(nginx.BARS_DIR, tmp)
            server = Server(edge_name, command, "127.0.0.1", port, Path(tmp) / "log", tests=edge.tests,
                            h2_tls_port=h2_tls_port)  # fmt: skip
            try:
                server.start(timeout=20)
                processes = server.processes()
                answers = {path: h2_get(f"https://127.0.0.1:{h2_tls_port}{path}")
                           for path in ("/static/reset.css", "/static/hero.webp", "/baseline2?a=1&b=1")}  # fmt: skip
                gateway_tests = [name for name in edge.tests if not catalog.TESTS[name].production]
                probed = {name: schedule.probe_h2(catalog.TESTS[name], f"https://127.0.0.1:{h2_tls_port}/")
                          for name in gateway_tests}  # fmt: skip
                cpu_ticks = server.cpu_ticks()
            finally:
                server.stop()
        self.assertEqual(answers["/static/reset.css"], ("2", 200, "text/css", (self.STATIC_DIR / "reset.css.br").read_bytes()))
        self.assertEqual(answers["/static/hero.webp"][3], (self.STATIC_DIR / "hero.webp").read_bytes())
        self.assertEqual(answers["/baseline2?a=1&b=1"][:2], ("2", 200))
        self.assertEqual(answers["/baseline2?a=1&b=1"][3], b"from the application")
        if anchors.H2LOAD_H3.exists():  # every URI answered 2xx, over h2 and (Caddy) HTTP/3
            self.assertEqual(probed, dict.fromkeys(gateway_tests, (200, 0)))
        # The edge and the application in one session, measured together.
        self.assertIn(f"{edge_name}[", " ".join(processes))
        self.assertTrue(any(p.startswith("python3") or p.startswith("python") for p in processes), processes)
        self.assertGreaterEqual(cpu_ticks, 0)
        return processes

    def test_caddy_in_front_of_an_application(self):
        self.assertEqual(len(self.serve("caddy")), 2)

    def test_nginx_in_front_of_an_application(self):
        processes = self.serve("nginx")
        self.assertEqual(len(processes), 2 + len(os.sched_getaffinity(0)))  # master, workers and the application


class Gcannon(unittest.TestCase):
    """The WebSocket tests' load: gcannon's command line as HttpArena's, its --json read as wrk's
    summary."""

    def test_the_command_of_each_websocket_test(self):
        url = "http://127.0.0.1:8081/ws"
        base = [str(anchors.GCANNON), url, "--ws", "-c", "512", "-t", "1", "-d", "10s", "--json"]
        self.assertEqual(load.gcannon_command(url, 512, 10, False, 0), base)
        self.assertEqual(load.gcannon_command(url, 512, 10, True, 0), base + ["-p", "16"])
        limited = catalog.TESTS["echo-ws-limited"]
        self.assertEqual(load.gcannon_command(url, 512, 10, False, limited.close_every), base + ["-r", "10"])
        self.assertEqual(catalog.TEST_GROUPS["arena-ws"], ["echo-ws", "echo-ws-pipeline", "echo-ws-limited"])

    def test_its_json_is_read_as_a_summary(self):
        output = json.dumps({"elapsed_sec": 2.0, "responses": 1000, "latency_us": {"p50": 5, "p90": 9, "p99": 20},
                             "status": {"2xx": 990, "4xx": 4, "5xx": 0, "other": 6}, "ws_upgrades": 64,
                             "errors": {"connect": 1, "read": 2, "timeout": 3}})  # fmt: skip
        summary = load.parse_gcannon_output("gcannon v0.5.3\n" + output)
        self.assertEqual((summary["requests"], summary["requests_per_s"]), (1000, 500.0))
        self.assertEqual((summary["socket_errors"], summary["non_2xx"]), (6, 10))
        self.assertEqual(summary["latency_us"], {"p50": 5, "p75": None, "p90": 9, "p99": 20})

    def test_a_load_generator_that_fails_voids_its_run_while_the_server_lives(self):
        command = [sys.executable, "-c", "import sys; sys.exit('gcannon: no answer')"]
        with self.assertRaisesRegex(load.LoadFailed, r"failed \(1\).*gcannon: no answer"):
            load.run_load(FakeServer(), command, 8, 1, 1, load.parse_gcannon_output)
