"""Tests of `scripts/tool verify tfb`: its expected fortune page, its count rule, and its HTTP
checks run over real sockets against a small server whose faults are chosen per test.

The counting tests run real statements on a real PostgreSQL with pg_stat_statements (the PG*
environment, else the private cluster of scripts/pg.sh, which must be running; they are skipped
when neither answers and PGHOST is unset), on tables of their own so that nothing else running
there is counted. The rest of the database checks run when it checks gnosis (docs/TFB.md).
"""

import os
import random
import shlex
import socket
import subprocess
import sys
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate

from gnosis_tools import ROOT
from gnosis_tools.verify import tfb as verify

SCRIPTS = os.path.join(ROOT, "scripts")
VERIFY = [sys.executable, os.path.join(SCRIPTS, "tool"), "verify", "tfb"]
VERIFY_SERVER = os.path.join(SCRIPTS, "verify-server.sh")


class FaultyServer:
    """json and plaintext over raw sockets, right unless told which fault to have."""

    def __init__(self, *faults):
        self.faults = set(faults)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.listener.close()

    def _accept(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection):
        buffer = b""
        with connection:
            while True:
                try:
                    chunk = connection.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buffer += chunk
                requests = []
                while b"\r\n\r\n" in buffer:
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    requests.append(head.decode("latin-1"))
                if "reverse_pipeline" in self.faults:
                    requests.reverse()
                closing = False
                for head in requests:
                    connection.sendall(self._answer(head))
                    wants_close = "connection: close" in head.lower() or " HTTP/1.0" in head
                    closing = closing or (wants_close and "ignore_close" not in self.faults)
                if closing:
                    return

    def _answer(self, head):
        path = head.split(" ")[1]
        if path == "/json":
            body = b'{"message":"Hello, World!"}'
            if "extra_key" in self.faults:
                body = b'{"message":"Hello, World!","extra":1}'
            content_type = "text/json" if "wrong_content_type" in self.faults else "application/json"
            status = "200 OK"
        elif path == "/plaintext":
            body, content_type, status = b"Hello, World!", "text/plain", "200 OK"
        else:
            body, content_type, status = b"", "text/plain", "404 Not Found"
        date = "Sun, 22 Nov 2026 10:00:00 GMT" if "static_date" in self.faults else formatdate(
            usegmt=True)
        return (
            "HTTP/1.1 %s\r\nServer: faulty\r\nDate: %s\r\nContent-Type: %s\r\n"
            "Content-Length: %d\r\n\r\n" % (status, date, content_type, len(body))
        ).encode("latin-1") + body


def run_verify(faults, *extra):
    server = FaultyServer(*faults)
    try:
        completed = subprocess.run(
            [*VERIFY, "--url", "http://127.0.0.1:%d" % server.port,
             "--tests", "json,plaintext", *extra],
            capture_output=True, text=True, timeout=120)
    finally:
        server.close()
    return completed.returncode, completed.stdout


class HttpChecks(unittest.TestCase):
    # (faults, extra arguments, expected exit code, a line the output must contain)
    CASES = [
        ((), (), 0, "PASS  mixed pipeline in order"),
        (("static_date",), (), 1, "FAIL  Date refresh"),
        (("wrong_content_type",), (), 1, "FAIL  headers /json: Content-Type 'text/json'"),
        (("extra_key",), (), 0, "WARN  body: extra keys ['extra']"),
        (("extra_key",), ("--strict",), 1, "WARN  body: extra keys ['extra']"),
        (("reverse_pipeline",), (), 1, "FAIL  mixed pipeline in order"),
        (("ignore_close",), (), 1, "FAIL  Connection: close: answered but left"),
    ]

    def test_each_fault_is_reported(self):
        # The runs are independent and mostly wait for the 3 s Date gap: run them together.
        with ThreadPoolExecutor(len(self.CASES)) as pool:
            outcomes = list(pool.map(lambda case: run_verify(case[0], *case[1]), self.CASES))
        for (faults, extra, code, line), (returncode, output) in zip(self.CASES, outcomes):
            with self.subTest(faults=faults, extra=extra):
                self.assertIn(line, output)
                self.assertEqual(returncode, code, output)


class TheServerChecked(unittest.TestCase):
    """`verify tfb` --server-pid, and scripts/test.sh's verify step (scripts/verify-server.sh),
    which must check the server it started, not whatever holds port 8080."""

    def test_a_port_served_by_another_process_is_not_checked(self):
        server = FaultyServer()
        other = subprocess.Popen(["sleep", "60"])
        try:
            def verify_as(pid):
                return subprocess.run(
                    [*VERIFY, "--port", str(server.port), "--server-pid",
                     str(pid), "--tests", "json"],
                    capture_output=True, text=True, timeout=120)
            refused = verify_as(other.pid)
            self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
            self.assertIn("is not served by process %d alone" % other.pid, refused.stderr)
            self.assertNotIn("PASS", refused.stdout)
            # This process holds the fake's listener: checked, and it passes.
            checked = verify_as(os.getpid())
            self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
            self.assertIn("verify: http://127.0.0.1:%d" % server.port, checked.stdout)
        finally:
            other.kill()
            other.wait()
            server.close()

    def test_the_verify_step_checks_its_own_server_while_8080_is_taken(self):
        binary = os.environ.get("GNOSIS_BINARY") or next(
            (path for path in (os.path.join(ROOT, "target", build, "gnosis")
                               for build in ("release", "debug")) if os.path.exists(path)),
            None)
        if binary is None:
            self.skipTest("no gnosis binary built (cargo build), and GNOSIS_BINARY unset")
        # What a new user has: something else on 8080 (scripts/run.sh), answering wrongly.
        try:
            holder = socket.create_server(("0.0.0.0", 8080))
        except OSError:
            holder = None  # 8080 is taken already, which is the case under test too
        accepted = []

        def hold():
            while True:
                try:
                    connection, _ = holder.accept()
                except OSError:
                    return
                accepted.append(connection)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nwrong")

        if holder is not None:
            threading.Thread(target=hold, daemon=True).start()
        try:
            completed = subprocess.run(
                ["bash", VERIFY_SERVER, binary, "--tests", "json,plaintext"],
                capture_output=True, text=True, timeout=180)
        finally:
            if holder is not None:
                holder.close()
        output = completed.stdout + completed.stderr
        self.assertEqual(completed.returncode, 0, output)
        self.assertIn("verify: http://127.0.0.1:", completed.stdout)
        self.assertNotIn("127.0.0.1:8080", completed.stdout)
        self.assertNotIn("No such process", output)
        self.assertEqual(accepted, [], "the verify step connected to port 8080")


class ExpectedValues(unittest.TestCase):
    def test_fortune_page_is_sorted_by_bytes_and_escaped(self):
        page = verify.expected_fortune_page().decode("utf-8")
        rows = page.split("<tr>")[2:]
        self.assertEqual(len(rows), 13)
        self.assertTrue(rows[0].startswith("<td>11</td><td>&lt;script&gt;alert(&quot;This"))
        self.assertIn("<td>0</td><td>Additional fortune added at request time.</td>", page)
        self.assertIn("aren&#39;t broken.", page)
        self.assertTrue(rows[-1].startswith(
            "<td>12</td><td>\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af"))
        self.assertTrue(page.endswith("</table></body></html>"))

    def test_other_spellings_of_quotes_are_the_same_page(self):
        page = verify.expected_fortune_page()
        self.assertEqual(verify.normalize_entities(page.replace(b"&#39;", b"&apos;")), page)
        self.assertEqual(verify.normalize_entities(page.replace(b"&quot;", b"&#34;")), page)
        self.assertNotEqual(verify.normalize_entities(page.replace(b"&quot;", b'"')), page)

    def test_n_cases(self):
        for case, length in [("2", 2), ("0", 1), ("foo", 1), ("501", 500), ("", 1), ("-3", 1)]:
            self.assertEqual(verify.expected_length(case), length, case)

    def test_count_rule(self):
        self.assertEqual(verify.count_result(10240, 10240, 10240, "x")[0], verify.PASS)
        self.assertEqual(verify.count_result(10239, 10240, 10239, "x")[0], verify.FAIL)
        self.assertEqual(verify.count_result(10752, 10240, 10752, "x")[0], verify.PASS)
        self.assertEqual(verify.count_result(10753, 10240, 10753, "x")[0], verify.WARN)


def pg_environment():
    """The PG* environment, or the private cluster's (scripts/pg.sh env) when PGHOST is unset."""
    env = dict(os.environ)
    if "PGHOST" not in env:
        completed = subprocess.run(["bash", os.path.join(SCRIPTS, "pg.sh"), "env"],
                                   capture_output=True, text=True, check=True)
        for word in shlex.split(completed.stdout.replace("export ", "", 1)):
            name, _, value = word.partition("=")
            env[name] = value
    return env


class CountingAgainstPostgres(unittest.TestCase):
    """`verify tfb`'s statement counting and update check on real pg_stat_statements figures.

    Each scenario plays REQUESTS requests of /updates?queries=20 the way a server would send
    their statements, on a probe table named for this run, and hands the counts to the
    verifier's own rules."""

    REQUESTS = 8
    QUERIES = 20
    ROWS = 1000

    @classmethod
    def setUpClass(cls):
        cls.database = verify.Database()
        cls.database.env = pg_environment()
        try:
            cls.database.check_statistics_available()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            if "PGHOST" in os.environ:
                raise
            raise unittest.SkipTest("no PostgreSQL with pg_stat_statements: %s" % error)
        cls.table = "verify_probe_%d_%d" % (os.getpid(), random.randrange(10**9))
        cls.quoted = cls.table.capitalize()
        for name in (cls.table, '"%s"' % cls.quoted):
            cls.run_sql(
                "CREATE TABLE %s (id integer PRIMARY KEY, randomnumber integer NOT NULL);"
                "INSERT INTO %s SELECT i, i FROM generate_series(1, %d) AS i;"
                % (name, name, cls.ROWS))

    @classmethod
    def tearDownClass(cls):
        cls.run_sql('DROP TABLE IF EXISTS %s, "%s"' % (cls.table, cls.quoted))

    @classmethod
    def run_sql(cls, script):
        subprocess.run([cls.database.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1"], input=script,
                       env=cls.database.env, text=True, capture_output=True, check=True,
                       timeout=120)

    def play(self, update_style, selects=QUERIES):
        """The statements of REQUESTS update requests; returns the verifier's verdicts."""
        rng = random.Random()
        lines = []
        for _ in range(self.REQUESTS):
            ids = sorted(rng.sample(range(1, self.ROWS + 1), self.QUERIES))
            numbers = [rng.randrange(1, 10001) for _ in ids]
            for world_id in ids[:selects]:
                lines.append("SELECT id, randomnumber FROM %s WHERE id = %d;" % (self.table, world_id))
            id_array = "'{%s}'" % ",".join(map(str, ids))
            number_array = "'{%s}'" % ",".join(map(str, numbers))
            if update_style == "unnest":  # gnosis's statement
                lines.append(
                    "UPDATE %s SET randomnumber = v.r FROM unnest(%s::int4[], %s::int4[]) "
                    "AS v(id, r) WHERE %s.id = v.id;"
                    % (self.table, id_array, number_array, self.table))
            elif update_style == "subselect":  # gnosis's statement before issue #14
                lines.append(
                    "UPDATE %s SET randomnumber = v.r FROM (SELECT unnest(%s::int[]) AS id, "
                    "unnest(%s::int[]) AS r) AS v WHERE %s.id = v.id;"
                    % (self.table, id_array, number_array, self.table))
            else:
                for world_id, number in zip(ids, numbers):
                    lines.append("UPDATE %s SET randomnumber = %d WHERE id = %d;"
                                 % (self.table, number, world_id))
        before = self.database.statement_totals(self.table)
        self.run_sql("\n".join(lines))
        after = self.database.statement_totals(self.table)
        measured = tuple(a - b for a, b in zip(after, before))
        expected = self.REQUESTS * self.QUERIES
        verdicts = verify.count_results(measured, expected + self.REQUESTS, expected,
                                        check_updates=True, concurrency=self.REQUESTS)
        return {check: (level, detail) for level, check, detail in verdicts}

    def test_bulk_update_without_select_passes(self):
        verdicts = self.play("unnest")
        for check in ("executed queries", "rows read", "rows updated"):
            self.assertEqual(verdicts[check][0], verify.PASS, verdicts)
        self.assertEqual(verdicts["rows read"][1], "Rows read: %d/%d" % (
            int(160 / verify.ROWS_MARGIN), 160))

    def test_bulk_update_with_select_in_its_text_warns(self):
        verdicts = self.play("subselect")
        self.assertEqual(verdicts["executed queries"][0], verify.PASS, verdicts)
        self.assertEqual(verdicts["rows updated"][0], verify.PASS, verdicts)
        level, detail = verdicts["rows read"]
        self.assertEqual(level, verify.WARN, verdicts)
        self.assertIn("This number is excessively high", detail)

    def test_single_row_updates_pass(self):
        verdicts = self.play("single")
        for check in ("executed queries", "rows read", "rows updated"):
            self.assertEqual(verdicts[check][0], verify.PASS, verdicts)
        self.assertIn("/320", verdicts["executed queries"][1])

    def test_a_missing_select_fails(self):
        verdicts = self.play("unnest", selects=self.QUERIES - 1)
        self.assertEqual(verdicts["executed queries"][0], verify.FAIL, verdicts)
        self.assertEqual(verdicts["rows read"][0], verify.FAIL, verdicts)

    def test_update_check_reads_the_quoted_table_first(self):
        names = ('"%s"' % self.quoted, self.table)
        snapshot = lambda: self.database.world_tables(names)  # noqa: E731
        before = snapshot()
        self.assertEqual([len(table) for table in before], [self.ROWS, self.ROWS])
        self.assertEqual(verify.update_result(before, snapshot(), 500)[0], verify.FAIL)
        # Changes in the lower-case table count once the quoted one shows none (as in TFB).
        self.run_sql("UPDATE %s SET randomnumber = -id WHERE id <= 470" % self.table)
        level, detail = verify.update_result(before, snapshot(), 500)
        self.assertEqual((level, detail[:36]), (verify.WARN, "There may have been an error updatin"))
        self.run_sql('UPDATE "%s" SET randomnumber = -id WHERE id <= 480' % self.quoted)
        self.assertEqual(verify.update_result(before, snapshot(), 500)[0], verify.PASS)

    def test_the_cluster_has_both_world_tables(self):
        tables = self.database.world_tables()
        self.assertEqual([len(table) for table in tables], [verify.WORLD_ROWS, verify.WORLD_ROWS])

