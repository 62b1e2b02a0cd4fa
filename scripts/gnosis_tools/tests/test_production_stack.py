"""`scripts/tool bench`'s production-stack (HttpArena's, MDA2AV/HttpArena at 28606baf): its URI
lists as requests/production-stack-*.txt are, its two h2load command lines as h2load.sh builds them
and their outputs summed, the stacks with HttpArena's auth service (gnosis's edge with --auth,
nginx's auth_request, Caddy's forward_auth, each configuration checked by the edge itself), the
auth service found or refused clearly, and items 1..20 put back after the writes."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from gnosis_tools import authsvc
from gnosis_tools.bench import anchors, catalog, databases, gateway, httparena, load, nginx, pace, workload
from gnosis_tools.bench.servers import Server
from gnosis_tools.system import SetupError
from gnosis_tools.tests.test_bench import bench_args

# sha256 of HttpArena's requests/production-stack-reads.txt (20,000 lines) with its
# https://localhost:8443 taken off each line.
READS_SHA256 = "0e01e772e96685faff0b93913f72cf6974867751bdaf64b152bc84ef1b2f66e2"
CERTIFICATE = (str(anchors.shared_path("anchors", "httparena", "data", "certs", "server.crt")),
               str(anchors.shared_path("anchors", "httparena", "data", "certs", "server.key")))  # fmt: skip


class Lists(unittest.TestCase):
    def test_the_reads_are_httparena_s_list(self):
        reads = httparena.PRODUCTION_READS
        self.assertEqual(hashlib.sha256("".join(f"{u}\n" for u in reads).encode()).hexdigest(), READS_SHA256)
        self.assertEqual(len(reads), 20_000)
        kinds = {kind: sum(1 for u in reads if u.startswith(kind)) for kind in ("/static/", "/public/baseline?",
                                                                                "/api/items/", "/api/me")}  # fmt: skip
        self.assertEqual(kinds, {"/static/": 6_000, "/public/baseline?": 2_000, "/api/items/": 10_000, "/api/me": 2_000})
        # Every item 1..10,000 once; the 3 queries of /public/baseline equally often.
        self.assertEqual(sorted(int(u.rsplit("/", 1)[1]) for u in reads if u.startswith("/api/items/")),
                         list(range(1, 10_001)))  # fmt: skip
        self.assertEqual({reads.count(q) for q in httparena.PRODUCTION_PUBLIC}, {666, 667})
        self.assertEqual(reads[:20], tuple(f"/static/{n}" for n in httparena.PRODUCTION_STATIC)
                         + ("/public/baseline?a=1&b=1", "/public/baseline?a=13&b=42")
                         + tuple(f"/api/items/{i}" for i in range(1, 11)) + ("/api/me", "/api/me"))  # fmt: skip
        self.assertEqual(reads[26:30], ("/public/baseline?a=13&b=42", "/public/baseline?a=100&b=7",
                                        "/api/items/11", "/api/items/12"))  # fmt: skip
        self.assertEqual(workload.uri_kinds(reads), "6000 `/static`, 2000 `/public`, 12000 `/api`")

    def test_the_writes_their_body_levels_and_groups(self):
        self.assertEqual(httparena.PRODUCTION_WRITES, tuple(f"/api/items/{i}" for i in range(1, 21)))
        self.assertEqual(httparena.PRODUCTION_WRITE_BODY, '{"name":"bench-updated","price":250,"quantity":10}\n')
        test = catalog.TESTS["production-stack"]
        self.assertEqual((test.h2, test.streams, test.h3_binary, test.production), ("tls", 16, True, True))
        self.assertEqual(catalog.expand_tests("arena-production"), ["production-stack"])
        self.assertNotIn("production-stack", catalog.TEST_GROUPS["httparena"])
        self.assertIn("production-stack", httparena.READS_ARENA_DB)
        self.assertEqual(bench_args("--tests", "production-stack").levels, {"production-stack": [256]})
        self.assertEqual(bench_args("--tests", "production-stack", "--levels", "256,1024").levels,
                         {"production-stack": [256, 1024]})  # fmt: skip
        self.assertIn("two h2load", workload.load_description(test))


class Load(unittest.TestCase):
    def test_the_two_command_lines_are_h2load_sh_s(self):
        reads, writes = pace.production_commands("https://h:1/", 256, 2, 5, "/r", "/w", "/b.json", "T")
        h2load = str(anchors.H2LOAD_H3)
        self.assertEqual(reads, [h2load, "-c", "256", "-m", "16", "-t", "2", "-D", "5", "--warm-up-time", "1",
                                 "-H", "Authorization: Bearer T", "-H", "Accept-Encoding: br;q=1, gzip;q=0.8",
                                 "-i", "/r"])  # fmt: skip
        self.assertEqual(writes, [h2load, "-c", "32", "-m", "8", "-t", "2", "-D", "5", "--warm-up-time", "1",
                                  "-d", "/b.json", "-H", "Content-Type: application/json",
                                  "-H", "Authorization: Bearer T", "-i", "/w"])  # fmt: skip
        # conns / 8, at least 8.
        self.assertEqual([pace.write_connections(c) for c in (8, 64, 256, 1024)], [8, 8, 32, 128])
        # The probe: `requests` of each on one connection.
        reads, writes = pace.production_commands("https://h:1/", 1, 1, None, "/r", "/w", "/b", "T", requests=20)
        self.assertEqual((reads[1:9], writes[1:9]), (["-c", "1", "-m", "16", "-t", "1", "-n", "20"],
                                                    ["-c", "1", "-m", "8", "-t", "1", "-n", "20"]))  # fmt: skip

    def test_the_token_is_user_42_s_under_the_secret(self):
        from gnosis_tools.bench import schedule

        self.assertEqual(authsvc.user_of(authsvc.SECRET, "Bearer " + schedule.bearer_token()), "42")
        self.assertEqual(schedule.write_body_file().read_text(), httparena.PRODUCTION_WRITE_BODY)

    def test_both_outputs_summed_as_h2load_parse_sums_them(self):
        reads = ("requests: 1000 total, 1000 started, 1000 done, 990 succeeded, 10 failed, 0 errored, 0 timeout\n"
                 "status codes: 990 2xx, 0 3xx, 0 4xx, 0 5xx\n")  # fmt: skip
        writes = ("requests: 100 total, 100 started, 100 done, 100 succeeded, 0 failed, 0 errored, 0 timeout\n"
                  "status codes: 97 2xx, 0 3xx, 0 4xx, 3 5xx\n")  # fmt: skip
        s = pace.parse_production_output(reads, writes, ["0\t200\t500\n", "0\t200\t700\n"], 2)
        self.assertEqual((s["requests"], s["requests_per_s"], s["reads_2xx"], s["writes_2xx"]), (1087, 543.5, 990, 97))
        self.assertEqual((s["non_2xx"], s["writes_non_2xx"], s["socket_errors"]), (3, 3, 10))
        self.assertEqual(s["latency_us"]["p99"], 700)

    def test_run_load_runs_both_at_once_and_measures_both(self):
        class Still:  # a server that costs nothing
            rss_at_start_kib = 0

            def check_alive(self):
                pass

            reset_peak_rss = check_alive

            def cpu_ticks(self):
                return 0

            peak_rss_kib = cpu_ticks

        first = [sys.executable, "-c", "import time; time.sleep(0.5); print('reads')"]
        second = [sys.executable, "-c", "import time; time.sleep(0.5); print('writes')"]
        seen = []
        run = load.run_load(Still(), first, 1, 1, 1, lambda out, also: seen.append((out, also)) or fake_summary(),
                            also=second)  # fmt: skip
        self.assertEqual(seen, [("reads\n", "writes\n")])
        self.assertLess(run["wall_s"], 0.95)  # at once, not one after the other
        self.assertEqual(run["wrk_output"], "=== h2load-reads ===\nreads\n=== h2load-writes ===\nwrites\n")
        self.assertIn(" & ", run["command"])
        failing = [sys.executable, "-c", "import sys; sys.exit(3)"]
        with self.assertRaisesRegex(load.LoadFailed, "failed \\(3\\)"):
            load.run_load(Still(), first, 1, 1, 1, lambda out, also: fake_summary(), also=failing)


def fake_summary():
    return {"requests": 1, "socket_errors": 0, "non_2xx": 0}


class Stacks(unittest.TestCase):
    def test_each_stack_starts_the_auth_service_then_the_application_then_its_edge(self):
        args = bench_args("--server", "gateway:gnosis", "--baseline", "gateway:nginx", "--tests", "production-stack")
        edge, nginx_stack = args.specs
        service = ("redis-server --bind 127.0.0.1 --port 13080 --save '' --appendonly no & "
                   f"env JWT_SECRET={authsvc.SECRET} AUTHSVC_LISTEN=127.0.0.1:12080 {gateway.AUTHSVC_BINARY} & "
                   f"env REDIS_URL=redis://127.0.0.1:13080 {gateway.DEFAULT_APP.replace('{port}', '8080')} & ")  # fmt: skip
        self.assertEqual(edge.production_command, service + f"exec {gateway.GNOSIS} --upstream 127.0.0.1:8080 "
                         "--auth 127.0.0.1:12080/_auth --auth-prefix /api/ --auth-fields X-User-Id --port 0 "
                         "--tls-port 0 --h2c-port 0 --h2-tls-port 11080 --h3-port 11080")  # fmt: skip
        self.assertEqual((edge.auth_port, nginx_stack.auth_port), (12080, 12081))
        self.assertNotIn("--auth", edge.command)  # gateway-64's stack stays as it was
        nginx_service = service.replace("13080", "13081").replace("12080", "12081").replace(" 8080", " 8081")
        self.assertTrue(nginx_stack.production_command.startswith(nginx_service), nginx_stack.production_command)
        self.assertTrue(nginx_stack.production_command.endswith("-c {bars_dir}/nginx-production-8081.conf"))
        caddy = bench_args("--server", "gateway:caddy", "--tests", "production-stack").specs[0]
        self.assertIn("--config {bars_dir}/caddy-production-8080.Caddyfile", caddy.production_command)

    def test_a_stack_serves_production_stack_with_its_production_command_only(self):
        test = catalog.TESTS["production-stack"]
        stack = Server("s", "x", "127.0.0.1", 8080, Path(os.devnull), tests=gateway.EDGES["gnosis"].tests,
                       h2_tls_port=11080, production_command="y", auth_port=12080)  # fmt: skip
        self.assertTrue(stack.serves(test))
        self.assertEqual(stack.tcp_ports(), [8080, 11080])
        stack.production = True
        self.assertEqual(stack.tcp_ports(), [8080, 12080, 11080])
        self.assertFalse(Server("s", "x", "127.0.0.1", 1, Path(os.devnull), h2_tls_port=2).serves(test))

    def config(self, edge_name):
        edge = gateway.EDGES[edge_name]
        if not shutil.which(edge_name):
            self.skipTest(f"{edge_name} is not installed (scripts/test.sh installs it)")
        if not Path(CERTIFICATE[0]).exists():
            self.skipTest("no HttpArena test certificate beside the checkout")
        with tempfile.TemporaryDirectory() as tmp:
            # write_gateway_config checks it with the edge itself (nginx -t, caddy validate).
            path = gateway.write_gateway_config(edge, tmp, 8080, 11080, CERTIFICATE, "/s/static", auth_port=12080)
            self.assertEqual(path.name, edge.conf_name(8080, production=True))
            text = path.read_text()
        self.assertNotRegex(text, "@[A-Z_]+@")
        return text

    def test_nginx_s_asks_the_auth_service_for_api_only(self):
        if shutil.which("nginx"):
            # Debian's nginx-light has it built in: no module to load.
            modules = subprocess.run(["nginx", "-V"], capture_output=True, text=True).stderr
            self.assertIn("--with-http_auth_request_module", modules)
        conf = self.config("nginx")
        for line in ("server 127.0.0.1:12080;", "keepalive 256;", "server 127.0.0.1:8080;", "keepalive 2048;",
                     "auth_request_set $auth_user_id $upstream_http_x_user_id;", "proxy_pass http://authsvc/_auth;",
                     "proxy_pass_request_body off;", "location /public/ {", "location /api/ {",
                     "auth_request /_auth;", "proxy_set_header X-User-Id $auth_user_id;",
                     "return 401 '{\"error\":\"unauthorized\"}';", "alias /s/static/;", "brotli_static on;",
                     "gzip_static on;", f"load_module {nginx.NGINX_BROTLI_STATIC};",
                     "listen 127.0.0.1:11080 ssl http2"):  # fmt: skip
            self.assertIn(line, conf)
        public = conf[conf.index("location /public/ {"):conf.index("location /api/ {")]
        self.assertNotIn("auth_request", public)

    def test_caddy_s_forward_auth_for_api_only(self):
        caddyfile = self.config("caddy")
        for line in ("handle /api/* {", "request_header -X-User-Id", "forward_auth 127.0.0.1:12080 {",
                     "uri /_auth", "copy_headers X-User-Id", "respond `{\"error\":\"unauthorized\"}` 401",
                     "reverse_proxy 127.0.0.1:8080 {", "root * /s/static", "precompressed br gzip"):  # fmt: skip
            self.assertIn(line, caddyfile)
        self.assertEqual(caddyfile.count("forward_auth 127.0.0.1"), 1)


class AuthService(unittest.TestCase):
    def test_given_or_built_or_refused_clearly(self):
        with tempfile.TemporaryDirectory() as tmp:
            program = Path(tmp) / "authsvc"
            program.write_text("#!/bin/sh\n")
            with self.assertRaisesRegex(SetupError, "not an executable"):
                gateway.authsvc_binary(str(program))
            program.chmod(0o755)
            self.assertEqual(gateway.authsvc_binary(str(program)), str(program.resolve()))
            with mock.patch.object(gateway, "HTTPARENA_GIT", str(Path(tmp) / "none")):
                with self.assertRaisesRegex(SetupError, "--authsvc PATH.*HTTPARENA_GIT"):
                    gateway.authsvc_binary()


class ItemsPutBack(unittest.TestCase):
    ROWS = '[{"id":1,"name":"Orbit Cable 1","price":208,"quantity":153}]'

    def test_the_rows_read_before_are_written_back_after_however_it_ended(self):
        sql = databases.put_back_sql(self.ROWS)
        self.assertEqual(sql, "UPDATE items i SET name = r.name, price = r.price, quantity = r.quantity FROM "
                         f"json_populate_recordset(NULL::items, $rows${self.ROWS}$rows$) r WHERE i.id = r.id")  # fmt: skip
        test = catalog.TESTS["production-stack"]
        server = Server("s", "x", "127.0.0.1", 1, Path(os.devnull), tests=("production-stack",), h2_tls_port=2,
                        production_command="y", env={"DATABASE_URL": "postgres://u@h/db"})  # fmt: skip
        calls, log = [], []
        stop = lambda: calls.append("stopped")  # noqa: E731
        with mock.patch.object(databases, "psql", lambda url, sql: calls.append((url, sql)) or self.ROWS):
            with self.assertRaises(KeyboardInterrupt):
                with databases.items_put_back(test, [server], log.append, stop):
                    self.assertEqual(len(calls), 1)
                    raise KeyboardInterrupt
        self.assertIn("BETWEEN 1 AND 20", calls[0][1])
        # The servers stopped first: an edge's POSTs still in flight would land after.
        self.assertEqual(calls[1:], ["stopped", ("postgres://u@h/db", sql)])
        # Another test, or no database: nothing read or written.
        with mock.patch.object(databases, "psql", lambda url, sql: self.fail(sql)):
            with databases.items_put_back(catalog.TESTS["gateway-64"], [server], log.append, self.fail):
                pass


if __name__ == "__main__":
    unittest.main()
