"""Tests of scripts/verify.py: its expected fortune page, its count rule, and its HTTP checks
run over real sockets against a small server whose faults are chosen per test.

    python3 -m unittest discover -s scripts/verify -v

(The database checks need a server with a database: they are exercised by running verify.py
against gnosis, see docs/TFB.md.)
"""

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERIFY = os.path.join(SCRIPTS, "verify.py")
SPEC = importlib.util.spec_from_file_location("verify", VERIFY)
verify = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(verify)


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
            [sys.executable, VERIFY, "--url", "http://127.0.0.1:%d" % server.port,
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
        self.assertEqual(verify.compare_count(10240, 10240, "x")[0], verify.PASS)
        self.assertEqual(verify.compare_count(10239, 10240, "x")[0], verify.FAIL)
        self.assertEqual(verify.compare_count(10753, 10240, "x")[0], verify.WARN)


if __name__ == "__main__":
    unittest.main()
