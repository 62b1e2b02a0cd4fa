"""Check a running server the way HttpArena's scripts/validate.sh checks an entry.

    scripts/tool verify httparena [--host 127.0.0.1] [--port 8080] [--wait SECONDS]
        [--profiles baseline,limited-conn,pipelined,json,async,async-db,fortunes,json-tls,8gbit,
                    echo-ws,echo-ws-pipeline,echo-ws-limited]
        [--dataset data/dataset.json] [--database-url URL [--psql psql]] [--allow-keep-open]
        [--tls-port 8081] [--certificate /certs/server.crt]
        [--profiles static --static-dir /data/static]

The same requests, the same assertions and the same counting as validate.sh for the HTTP/1.1
profiles gnosis serves, without Docker: start the server yourself and point this at its port.
Two versions of validate.sh are followed, cited below by line or by section:
  - "snapshot" = enghitalo/HttpArena at 080c8ee4 (June 2026), scripts/validate.sh, by line;
  - "later"    = MDA2AV/HttpArena at 01193b65 (autumn 2026), scripts/validate.sh, by
    section: it added the async profile, a lower-cased header check, a fragmentation sweep,
    and random json parameters compared with the dataset, and dropped the json profile.
Where this check is stricter than validate.sh it says so (it also wants status 200, answers
framed by Content-Length or chunked, a whole body equal to the answer rather than its last
line, and a close after Connection: close). async-db and fortunes follow the snapshot
(1066-1182); the later version has the same requests and checks for them (only a docs link
moved). Given --database-url (the server's database, read with psql), they also compare the
answers with its rows.

json-tls and 8gbit, over TLS on --tls-port, are in httparena_tls.py; the HTTP/2 profiles
(baseline-h2 and static-h2 on --h2-port, baseline-h2c on --h2c-port) and unary gRPC (h2c on
--port, TLS on --h2-port) in httparena_h2.py; the WebSocket profiles in httparena_ws.py; the static profile (reference only for engines, so not run unless named) in
httparena_static.py.

Prints PASS / FAIL per check and "=== Results: N passed, M failed ===" (snapshot 1702-1704);
exits 1 on any FAIL, 2 when nothing answers.
"""

import json
import os
import random
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser

from .. import ROOT
from ..system import served_by_alone
from .http1 import REQUEST_TIMEOUT, ExchangeError, exchange, request
from .httparena_h2 import DEFAULT_H2_PORT, DEFAULT_H2C_PORT, H2Checks
from .httparena_h2 import PROFILES as H2_PROFILES
from .httparena_tls import DEFAULT_PORT as TLS_PORT
from .httparena_tls import PROFILES as TLS_PROFILES
from .httparena_tls import TlsChecks, default_certificate
from .httparena_static import PROFILE as STATIC_PROFILE
from .httparena_static import StaticChecks, default_static_dir
from .httparena_ws import PROFILES as WS_PROFILES
from .httparena_ws import WsChecks

PROFILES = ["baseline", "limited-conn", "pipelined", "json", "async", "async-db", "fortunes",
            "latency-1m", "latency-10k"]
KNOWN_PROFILES = PROFILES + TLS_PROFILES + WS_PROFILES + [STATIC_PROFILE] + H2_PROFILES
# check_fragmented's socket timeout (snapshot 366) and its pause between writes (373).
FRAGMENT_TIMEOUT = 5.0
FRAGMENT_PAUSE = 0.03
JSON_FIXED = [(12, 3), (22, 7), (31, 2), (50, 5)]  # snapshot 581
ITEM_FIELDS = ["id", "name", "category", "price", "quantity", "total"]
ASYNC_DB_QUERIES = [(5, 80, 7), (20, 150, 18), (100, 400, 33), (10, 50, 50)]  # snapshot 1073
ASYNC_DB_EMPTY = "/async-db?min=9999&max=9999&limit=50"  # snapshot 1107
# An async-db item: these fields, rating holding score and count (httparena-spec.md).
ASYNC_DB_FIELDS = ["id", "name", "category", "price", "quantity", "active", "tags", "rating"]
ADDED_FORTUNE = "Additional fortune added at request time."  # snapshot 1154
FORTUNES_ROWS = (201, 210)  # <tr count band, snapshot 1145
FORTUNES_SIZE = (18432, 65536)  # body size band, snapshot 1176


def body_text(response):
    return response.body.decode("latin-1").rstrip("\r\n")


class DatabaseError(Exception):
    pass


class Database:
    """The server's database, read with psql: the stricter async-db and fortunes checks
    compare the answers with its rows."""

    def __init__(self, url, psql="psql"):
        self.url = url
        self.psql = psql

    def json(self, sql):
        """The one JSON value `sql` selects."""
        try:
            completed = subprocess.run(
                [self.psql, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.url,
                 "-c", sql], capture_output=True, encoding="utf-8", timeout=REQUEST_TIMEOUT,
                env=dict(os.environ, PGCLIENTENCODING="UTF8"))
        except (OSError, subprocess.TimeoutExpired) as error:
            raise DatabaseError("psql: %s" % error) from error
        if completed.returncode:
            raise DatabaseError("psql: %s" % completed.stderr.strip())
        return json.loads(completed.stdout)

    def items(self, ids):
        """{id: item} for these ids, each as async-db answers it."""
        rows = self.json(
            "SELECT coalesce(json_agg(json_build_object('id', id, 'name', name, 'category', "
            "category, 'price', price, 'quantity', quantity, 'active', active, 'tags', tags, "
            "'rating', json_build_object('score', rating_score, 'count', rating_count))), "
            "'[]') FROM items WHERE id IN (%s)" % ",".join(str(int(id_)) for id_ in ids))
        return {row["id"]: row for row in rows}

    def fortunes(self):
        """[(id, message)] of the fortune table."""
        rows = self.json("SELECT coalesce(json_agg(json_build_array(id, message)), '[]') "
                         "FROM fortune")
        return [tuple(row) for row in rows]


class FortunesTable(HTMLParser):
    """The rows of a fortunes page's table: (id text, message) for each <tr> of two <td>s,
    entities decoded."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.rows = []
        self._row = None
        self._cell = None
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = []
            self.rows.append(self._row)
        elif tag == "td" and self._row is not None:
            self._cell = []
            self._row.append(self._cell)

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def fortunes(self):
        return [("".join(row[0]).strip(), "".join(row[1]))
                for row in self.rows if len(row) == 2]


class Validator:
    def __init__(self, host, port, dataset, out=sys.stdout, rng=None, require_close=True,
                 fragment_timeout=FRAGMENT_TIMEOUT, database=None, tls_port=TLS_PORT,
                 certificate=None, static_dir=None, h2_port=DEFAULT_H2_PORT,
                 h2c_port=DEFAULT_H2C_PORT):
        self.host = host
        self.h2_port = h2_port
        self.h2c_port = h2c_port
        self.static_dir = static_dir or default_static_dir()
        self.tls_port = tls_port
        self.certificate = certificate or default_certificate()
        self.database = database  # a Database, for the stricter async-db and fortunes checks
        self.fragment_timeout = fragment_timeout
        self.port = port
        self.dataset = dataset
        self.require_close = require_close
        self.kept_open = 0  # answers to Connection: close after which the server did not close
        self.out = out
        self.rng = rng or random.Random()
        self.passed = 0
        self.failed = []  # labels, so that the tests can say which check caught a fault

    # -- counting (snapshot 273-281, 308-315: one PASS or FAIL per check) ---------------------

    def ok(self, label, detail=""):
        self.passed += 1
        print("  PASS [%s]%s" % (label, " (%s)" % detail if detail else ""), file=self.out)

    def fail(self, label, why):
        self.failed.append(label)
        print("  FAIL [%s]: %s" % (label, why), file=self.out)

    def get(self, target, **options):
        return exchange(self.host, self.port, [request("GET", target)], **options)

    def send(self, fragments):
        return exchange(self.host, self.port, fragments)

    def check(self, label, expected, fragments):
        """check() (snapshot 297-316): the body is the answer. Stricter: status 200, and the
        whole body rather than its last line."""
        try:
            response = exchange(self.host, self.port, fragments)
        except ExchangeError as error:
            self.fail(label, str(error))
            return None
        if response.status != 200:
            self.fail(label, "expected HTTP 200, got %d" % response.status)
        elif body_text(response) != expected:
            self.fail(label, "expected body %r, got %r" % (expected, body_text(response)))
        else:
            self.ok(label)
        return response

    def check_header(self, label, expected, fragments, send=None):
        """check_header() for Content-Type (snapshot 452-476): the value, bare or followed by
        ';' and parameters; text/javascript taken for application/javascript (MDA2AV at
        28606baf, RFC 9239). Stricter: exactly one Content-Type header. The fragments go out
        with `send` (by default over cleartext)."""
        try:
            response = (send or self.send)(fragments)
        except ExchangeError as error:
            self.fail(label, str(error))
            return
        found = [value for name, value in response.header_list if name.lower() == "content-type"]
        def normal(value):
            return value.replace("text/javascript", "application/javascript")
        if len(found) == 1 and (normal(found[0]) == normal(expected)
                                or normal(found[0]).startswith(normal(expected) + ";")):
            self.ok(label, "Content-Type: %s" % found[0])
        else:
            self.fail(label, "expected Content-Type %r, got %r" % (expected, found))

    def check_fragmented(self, label, expected, fragments):
        """check_fragmented() (snapshot 342-450): the writes 30 ms apart on one TCP_NODELAY
        connection, a 5 s timeout, the answer read. Every request carries Connection: close;
        validate.sh reads to EOF and only loses 5 s when the server does not close, this
        check fails it (unless --allow-keep-open)."""
        try:
            response = exchange(self.host, self.port, fragments, timeout=self.fragment_timeout,
                                pause=FRAGMENT_PAUSE, expect_close=True)
        except ExchangeError as error:
            self.fail(label, str(error))
            return
        if response.status != 200:
            self.fail(label, "expected HTTP 200, got %d" % response.status)
        elif body_text(response) != expected:
            self.fail(label, "expected body %r, got %r" % (expected, body_text(response)))
        elif not response.closed and self.require_close:
            self.fail(label, "answered, but did not close the connection after "
                             "Connection: close")
        else:
            self.kept_open += not response.closed
            self.ok(label)

    # -- baseline and limited-conn (snapshot 495-562; both run this one section) -------------

    def baseline(self):
        print("[test] baseline endpoints", file=self.out)
        target = "/baseline11?a=13&b=42"
        plain = ("Content-Type", "text/plain")

        def post(body, chunked=False):
            if chunked:  # curl -H "Transfer-Encoding: chunked" -d 20: one chunk, then the end
                framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
                return [request("POST", target, [plain, ("Transfer-Encoding", "chunked")],
                                framed)]
            return [request("POST", target, [plain, ("Content-Length", len(body))], body)]

        self.check("GET %s" % target, "55", [request("GET", target)])             # 498
        self.check("POST %s body=20" % target, "75", post(b"20"))                  # 501
        self.check("POST %s chunked body=20" % target, "75", post(b"20", True))    # 505
        self.check_header("GET /baseline11 Content-Type", "text/plain",            # 511
                          [request("GET", target)])
        self.check_header("POST /baseline11 Content-Type", "text/plain", post(b"20"))  # 513

        print("[test] baseline anti-cheat (randomized inputs)", file=self.out)     # 517-532
        a, b = self.rng.randint(100, 999), self.rng.randint(100, 999)
        self.check("GET /baseline11?a=%d&b=%d (random)" % (a, b), str(a + b),
                   [request("GET", "/baseline11?a=%d&b=%d" % (a, b))])
        first, second = self.rng.sample(range(100, 1000), 2)
        for number, body in enumerate((first, second), 1):
            self.check("POST body=%d (cache check %d)" % (body, number), str(55 + body),
                       post(str(body).encode()))

        self.fragmented()
        self.fragmentation_sweep()

    def fragmented(self):
        print("[test] baseline TCP fragmentation", file=self.out)                  # 538-561
        close_get = b"Host: localhost\r\nConnection: close\r\n\r\n"
        post_head = (b"POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n"
                     b"\r\n")
        self.check_fragmented("GET /baseline11 - split request line", "55",
                              [b"GET /baseli", b"ne11?a=13&b=42 HTTP/1.1\r\n", close_get])
        self.check_fragmented("GET /baseline11 - split before headers", "55",
                              [b"GET /baseline11?a=13&b=42 HTTP/1.1\r\n",
                               b"Host: localhost\r\n", b"User-Agent: arena-frag/1.0\r\n",
                               b"Connection: close\r\n\r\n"])
        self.check_fragmented("POST /baseline11 - split headers/body", "75", [post_head, b"20"])
        self.check_fragmented("POST /baseline11 - split body bytes", "75",
                              [post_head, b"2", b"0"])
        # later, baseline section: field names in lower case (RFC 9110 5.1).
        self.check_fragmented("POST /baseline11 - lower-cased content-length", "75",
                              [b"POST /baseline11?a=13&b=42 HTTP/1.1\r\n"
                               b"host: localhost\r\ncontent-type: text/plain\r\n"
                               b"content-length: 2\r\nconnection: close\r\n\r\n", b"20"])

    def fragmentation_sweep(self):
        """later, baseline section ("exhaustive fragmentation", its validate-frag.py, which no
        snapshot here holds): requests split at every byte offset, chunked bodies included.
        This sweep is ours: three shapes, each split in two at every offset with the 30 ms
        pause between, one count per request, 32 connections at a time."""
        chunked = request("POST", "/baseline11?a=13&b=42",
                          [("Transfer-Encoding", "chunked"), ("Connection", "close")],
                          b"1\r\n2\r\n1\r\n0\r\n0\r\n\r\n")
        shapes = [
            ("GET", "55", request("GET", "/baseline11?a=13&b=42", [("Connection", "close")])),
            ("POST Content-Length", "75",
             request("POST", "/baseline11?a=13&b=42",
                     [("Content-Length", 2), ("Connection", "close")], b"20")),
            ("POST chunked", "75", chunked),
        ]
        cases = [(name, expected, whole[:cut], whole[cut:])
                 for name, expected, whole in shapes for cut in range(1, len(whole))]

        def one(case):
            name, expected, head, tail = case
            try:
                response = exchange(self.host, self.port, [head, tail],
                                    timeout=self.fragment_timeout, pause=FRAGMENT_PAUSE,
                                    expect_close=True)
            except ExchangeError as error:
                return "%s split at %d: %s" % (name, len(head), error), False
            if (response.status != 200 or body_text(response) != expected
                    or (self.require_close and not response.closed)):
                return "%s split at %d: HTTP %d, body %r, closed %s" % (
                    name, len(head), response.status, body_text(response), response.closed), False
            return None, not response.closed

        with ThreadPoolExecutor(max_workers=32) as pool:
            results = list(pool.map(one, cases))
        self.kept_open += sum(kept_open for _, kept_open in results)
        bad = [problem for problem, _ in results if problem]
        self.passed += len(cases) - len(bad)
        self.failed += ["fragmentation sweep"] * len(bad)
        if bad:
            print("  FAIL [fragmentation sweep]: %d of %d, first: %s"
                  % (len(bad), len(cases), bad[0]), file=self.out)
        else:
            print("  PASS [fragmentation sweep] (%d requests, every split point)" % len(cases),
                  file=self.out)

    # -- pipelined (snapshot 566-573) ---------------------------------------------------------

    def pipelined(self):
        print("[test] pipelined endpoint", file=self.out)
        self.check("GET /pipeline", "ok", [request("GET", "/pipeline")])
        self.check_header("GET /pipeline Content-Type", "text/plain",
                          [request("GET", "/pipeline")])

    # -- json (snapshot 577-626; later: random pairs compared with the dataset) ---------------

    def json_items_problem(self, count, multiplier, faithful, get=None):
        """None, or what is wrong with /json/count?m=multiplier (snapshot 586-606: count,
        every field, each total; later: each item equal to the dataset's, in order; here every
        field of it, rating included, and integers for the numbers), asked with `get` (by
        default over cleartext)."""
        try:
            response = (get or self.get)("/json/%d?m=%d" % (count, multiplier))
            document = json.loads(response.body)
        except (ExchangeError, ValueError) as error:
            return "no JSON answer: %s" % error
        if response.status != 200 or not isinstance(document, dict):
            return "HTTP %d, %r" % (response.status, response.body[:80])
        items = document.get("items")
        if document.get("count") != count or not isinstance(items, list) or len(items) != count:
            return "count=%r with %s items" % (document.get("count"),
                                               len(items) if isinstance(items, list) else items)
        for item in items:
            rating = item.get("rating") if isinstance(item, dict) else None
            if (not isinstance(rating, dict) or any(field not in item for field in ITEM_FIELDS)
                    or not isinstance(item.get("tags"), list)
                    or not isinstance(item.get("active"), bool)
                    or "score" not in rating or "count" not in rating):
                return "item without the full schema: %r" % (item,)
            numbers = [item["price"], item["quantity"], item["total"]]
            if (not all(isinstance(number, int) for number in numbers)
                    or item["total"] != item["price"] * item["quantity"] * multiplier):
                return "item %r: total %r != price*quantity*m" % (item["id"], item["total"])
        if faithful:
            for got, source in zip(items, self.dataset):
                expected = dict(source, total=source["price"] * source["quantity"] * multiplier)
                if got != expected:
                    return "item %r differs from the dataset's: %r" % (source["id"], got)
        return None

    def json(self):
        print("[test] json endpoint", file=self.out)
        pairs = [(count, m, False) for count, m in JSON_FIXED]
        pairs += [(self.rng.randint(1, 50), self.rng.randint(2, 97), True) for _ in range(4)]
        failed = False
        for count, multiplier, faithful in pairs:
            problem = self.json_items_problem(count, multiplier, faithful)
            if problem:  # snapshot 614: one FAIL per pair; one PASS for all of them (619)
                self.fail("GET /json/%d?m=%d" % (count, multiplier), problem)
                failed = True
        if not failed:
            self.ok("GET /json/{count}?m=X",
                    "%s fixed and 4 random count x m, full item schema, matched against the "
                    "dataset" % len(JSON_FIXED))
        self.check_header("GET /json Content-Type", "application/json",              # 624
                          [request("GET", "/json/50?m=1")])

    # -- async (later: "Async delay (GET /delay/{ms})", check_delay, async_concurrent_probe)

    def timed_delay(self, ms):
        """(problem or None, seconds): one /delay/ms, the status, the echoed number, and the
        time from connect to the answer (curl's time_total). Not sooner than asked: the later
        validate.sh allows 0.9x the delay; a server that arms its timer when it reads the
        request can never answer a client sooner than the whole delay, so this wants that."""
        try:
            response = self.get("/delay/%d" % ms)
        except ExchangeError as error:
            return str(error), 0.0
        if response.status != 200:
            return "expected HTTP 200, got %d" % response.status, response.elapsed
        if body_text(response) != str(ms):
            return "expected body %r, got %r" % (str(ms), body_text(response)), response.elapsed
        if response.elapsed < ms / 1000.0:
            return ("answered in %.4fs, sooner than the %d ms it was asked to wait"
                    % (response.elapsed, ms), response.elapsed)
        return None, response.elapsed

    def check_delay(self, label, ms):
        problem, seconds = self.timed_delay(ms)
        if problem:
            self.fail(label, problem)
        else:
            self.ok(label, "%.3fs" % seconds)
        return seconds

    def async_(self):
        print("[test] async delay endpoint", file=self.out)
        ms = self.rng.randint(10, 90)
        self.check_delay("GET /delay/%d (random)" % ms, ms)
        self.check_header("GET /delay/%d Content-Type" % ms, "text/plain",
                          [request("GET", "/delay/%d" % ms)])
        self.check("GET /delay/0", "0", [request("GET", "/delay/0")])

        print("[test] async delay is driven by the parameter", file=self.out)
        short = self.check_delay("GET /delay/10", 10)
        long = self.check_delay("GET /delay/500", 500)
        if long - short >= 0.3:
            self.ok("/delay/500 waits ~490ms longer than /delay/10",
                    "%.3fs vs %.3fs" % (short, long))
        else:
            self.fail("/delay/500 vs /delay/10", "%.3fs vs %.3fs: the delay does not track "
                      "the parameter" % (short, long))
        if short <= 2.0:
            self.ok("/delay/10 is not a constant long sleep", "%.3fs" % short)
        else:
            self.fail("/delay/10", "took %.3fs for a 10ms delay" % short)

        print("[test] async concurrent delays", file=self.out)
        # 32 at once, 32 different delays (13 is coprime with 400), each its own answer.
        delays = [100 + (index * 13) % 400 for index in range(1, 33)]
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(delays)) as pool:
            results = list(pool.map(self.timed_delay, delays))
        wall = time.monotonic() - started
        bad = ["/delay/%d: %s" % (ms, problem)
               for ms, (problem, _) in zip(delays, results) if problem]
        label = "32 overlapping requests, 32 different delays"
        if bad:
            self.fail(label, bad[0])
        else:
            self.ok(label, "%d concurrent, %.2fs wall" % (len(delays), wall))

    # -- async-db (snapshot 1066-1115) ---------------------------------------------------------

    def async_db_problem(self, low, high, limit):
        """None, or what is wrong with /async-db?min=low&max=high&limit=limit. validate.sh
        (1077-1095): `count` equal to limit, every item with rating.score, a tags list and a
        boolean active. Stricter: HTTP 200, as many items as count, every field of the item,
        integers for the numbers, prices within [low, high], distinct ids, and, given the
        database, each item equal to its row."""
        try:
            response = self.get("/async-db?min=%d&max=%d&limit=%d" % (low, high, limit))
            document = json.loads(response.body)
        except (ExchangeError, ValueError) as error:
            return "no JSON answer: %s" % error
        if response.status != 200 or not isinstance(document, dict):
            return "HTTP %d, %r" % (response.status, response.body[:80])
        items, count = document.get("items"), document.get("count")
        if type(count) is not int or count != limit or not isinstance(items, list) \
                or len(items) != count:
            return "count=%r with %s items, expected %d" % (
                count, len(items) if isinstance(items, list) else repr(items), limit)
        for item in items:
            if not isinstance(item, dict):
                return "an item that is not an object: %r" % (item,)
            rating = item.get("rating")
            if not isinstance(rating, dict) or "score" not in rating:
                return "item without rating.score: %r" % (item,)
            if not isinstance(item.get("tags"), list):
                return "tags is not an array: %r" % (item,)
            if not isinstance(item.get("active"), bool):
                return "active is not a boolean: %r" % (item,)
            if any(field not in item for field in ASYNC_DB_FIELDS) or "count" not in rating:
                return "item without the full schema: %r" % (item,)
            numbers = [item["id"], item["price"], item["quantity"], rating["score"],
                       rating["count"]]
            if not all(type(number) is int for number in numbers):
                return "item with a number that is not an integer: %r" % (item,)
            if not low <= item["price"] <= high:
                return "item %r: price %r outside [%d, %d]" % (item["id"], item["price"],
                                                              low, high)
        ids = [item["id"] for item in items]
        if len(set(ids)) != len(ids):
            return "the same item twice: ids %r" % ids
        if self.database and items:
            try:
                rows = self.database.items(ids)
            except (DatabaseError, ValueError) as error:
                return "cannot read the database: %s" % error
            for item in items:
                row = rows.get(item["id"])
                if row is None:
                    return "item %r is not in the database" % item["id"]
                differ = [field for field in ASYNC_DB_FIELDS if item[field] != row[field]]
                if differ:
                    return "item %r differs from the database's in %s: %r, database %r" % (
                        item["id"], ", ".join(differ), item, row)
        return None

    def async_db(self):
        print("[test] async-db endpoint", file=self.out)
        failed = False
        for low, high, limit in ASYNC_DB_QUERIES:
            problem = self.async_db_problem(low, high, limit)
            if problem:  # snapshot 1094: one FAIL per query; one PASS for all of them (1099)
                self.fail("GET /async-db?limit=%d" % limit, problem)
                failed = True
        if not failed:
            self.ok("GET /async-db?limit=N", "%d limits verified, correct structure%s" % (
                len(ASYNC_DB_QUERIES), ", equal to the database's rows" if self.database else ""))
        self.check_header("GET /async-db Content-Type", "application/json",            # 1103
                          [request("GET", "/async-db?min=10&max=50&limit=50")])
        # 1106-1114: count 0 for a range no row has. Stricter: HTTP 200 and no items.
        label = "GET /async-db empty range"
        try:
            response = self.get(ASYNC_DB_EMPTY)
            document = json.loads(response.body)
        except (ExchangeError, ValueError) as error:
            self.fail(label, "no JSON answer: %s" % error)
            return
        if (response.status == 200 and isinstance(document, dict)
                and document.get("count") == 0 and document.get("items") == []):
            self.ok(label, "count=0")
        else:
            self.fail(label, "expected HTTP 200 with count=0 and no items, got HTTP %d, %r"
                      % (response.status, response.body[:120]))

    # -- fortunes (snapshot 1117-1182) ---------------------------------------------------------

    def fortunes(self):
        print("[test] fortunes endpoint", file=self.out)
        try:
            response = self.get("/fortunes")                                          # 1128
        except ExchangeError as error:
            response = None
            self.fail("GET /fortunes", str(error))
        self.check_header("GET /fortunes Content-Type", "text/html",                  # 1130
                          [request("GET", "/fortunes")])
        if response is None:
            return
        raw = response.body
        if b"<!doctype html>" in raw.lower():                                         # 1133
            self.ok("GET /fortunes <!DOCTYPE html>")
        else:
            self.fail("GET /fortunes <!DOCTYPE html>", "missing")
        rows = len(re.findall(b"<tr", raw, re.IGNORECASE))                            # 1143
        if FORTUNES_ROWS[0] <= rows <= FORTUNES_ROWS[1]:
            self.ok("GET /fortunes <tr> count=%d" % rows)
        else:
            self.fail("GET /fortunes <tr> count", "expected %d-%d, got %d" % (FORTUNES_ROWS
                                                                             + (rows,)))
        if ADDED_FORTUNE.encode() in raw:                                             # 1154
            self.ok("GET /fortunes runtime-injected row")
        else:
            self.fail("GET /fortunes runtime-injected row", "missing %r" % ADDED_FORTUNE)
        if b"&lt;script&gt;" in raw and b"<script>alert" not in raw:                   # 1163
            self.ok("GET /fortunes XSS escape")
        else:
            self.fail("GET /fortunes XSS escape", "<script> not HTML-escaped")
        # 1175: ${#body} of $(curl ...), trailing newlines cut: characters in a UTF-8 locale,
        # bytes in the C locale. Stricter: both within the band.
        text = raw.rstrip(b"\n")
        try:
            sizes = {len(text), len(text.decode("utf-8"))}
        except UnicodeDecodeError:
            sizes = {len(text), -1}
        if all(FORTUNES_SIZE[0] <= size <= FORTUNES_SIZE[1] for size in sizes):
            self.ok("GET /fortunes body size=%dB" % len(text))
        else:
            self.fail("GET /fortunes body size", "expected %d-%d bytes and characters, got %s"
                      % (FORTUNES_SIZE + (sorted(sizes),)))
        self.fortunes_rows(response)

    def fortunes_rows(self, response):
        """Ours, not validate.sh's (one more PASS): HTTP 200, UTF-8, one row of (id, message)
        per fortune and the added one as id 0, sorted by message (code point order, as bytes
        of UTF-8 sort), and given the database, exactly its rows and the added one."""
        label = "GET /fortunes rows"
        try:
            page = response.body.decode("utf-8")
        except UnicodeDecodeError as error:
            self.fail(label, "not UTF-8: %s" % error)
            return
        rows = FortunesTable(page).fortunes()
        messages = [message for _, message in rows]
        if response.status != 200:
            self.fail(label, "expected HTTP 200, got %d" % response.status)
        elif ("0", ADDED_FORTUNE) not in rows:
            self.fail(label, "no row (0, %r) among %d rows" % (ADDED_FORTUNE, len(rows)))
        elif messages != sorted(messages):
            self.fail(label, "rows not sorted by message")
        elif len({id_ for id_, _ in rows}) != len(rows):
            self.fail(label, "the same id twice")
        elif self.database:
            try:
                expected = {(str(id_), message) for id_, message in self.database.fortunes()}
            except (DatabaseError, ValueError) as error:
                self.fail(label, "cannot read the database: %s" % error)
                return
            expected.add(("0", ADDED_FORTUNE))
            if set(rows) == expected:
                self.ok(label, "%d rows, sorted, equal to the database's and the added one"
                        % len(rows))
            else:
                self.fail(label, "%d rows differ from the database's %d and the added one, "
                          "e.g. %r" % (len(rows), len(expected) - 1,
                                       sorted(set(rows) ^ expected)[:2]))
        else:
            self.ok(label, "%d rows, sorted by message, the added one as id 0" % len(rows))

    def run(self, profiles):
        # snapshot 495: baseline and limited-conn share one section, run once; the later
        # validate.sh runs it for latency-1m too (the same handler, paced), and nothing for
        # latency-10k.
        if {"baseline", "limited-conn", "latency-1m"} & set(profiles):
            self.baseline()
        if "pipelined" in profiles:
            self.pipelined()
        if "json" in profiles:
            self.json()
        if "async" in profiles:
            self.async_()
        if "async-db" in profiles:
            self.async_db()
        if "fortunes" in profiles:
            self.fortunes()
        if STATIC_PROFILE in profiles:
            StaticChecks(self, self.static_dir).run()
        if set(profiles) & set(TLS_PROFILES):
            TlsChecks(self, self.tls_port, self.certificate).run(profiles)
        if set(profiles) & set(H2_PROFILES):
            H2Checks(self, self.h2_port, self.h2c_port).run(profiles)
        WsChecks(self).run(profiles)
        if self.kept_open and not self.require_close:
            print("  NOTE: %d answers to Connection: close left the connection open (passed, "
                  "as validate.sh passes them)" % self.kept_open, file=self.out)
        print("\n=== Results: %d passed, %d failed ===" % (self.passed, len(self.failed)),
              file=self.out)
        return not self.failed


def wait_for_server(host, port, seconds):
    """The readiness probe (snapshot 247-264): any HTTP answer to /baseline11?a=1&b=1."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            exchange(host, port, [request("GET", "/baseline11?a=1&b=1")], timeout=2.0)
            return True
        except ExchangeError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)


def add_arguments(parser):
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--profiles", default=",".join(PROFILES),
                        help="comma-separated, of: %s" % ", ".join(KNOWN_PROFILES))
    parser.add_argument("--tls-port", type=int, default=TLS_PORT,
                        help="the TLS listener of json-tls and 8gbit (default %d)" % TLS_PORT)
    parser.add_argument("--h2-port", type=int, default=DEFAULT_H2_PORT,
                        help="the TLS listener with ALPN h2 of baseline-h2, static-h2 and "
                             "unary-grpc-tls (default %d)" % DEFAULT_H2_PORT)
    parser.add_argument("--h2c-port", type=int, default=DEFAULT_H2C_PORT,
                        help="the h2c listener of baseline-h2c (default %d)" % DEFAULT_H2C_PORT)
    parser.add_argument("--certificate",
                        help="the certificate the TLS listener must serve (default: $TLS_CERT, "
                             "else /certs/server.crt)")
    parser.add_argument("--static-dir",
                        help="the files the server serves under /static/ (static: sizes "
                             "compared with them; default: $STATIC_DIR, else /data/static)")
    parser.add_argument("--wait", type=float, default=0,
                        help="seconds to wait for the server to answer first")
    parser.add_argument("--allow-keep-open", action="store_true",
                        help="pass an answer to Connection: close after which the server keeps "
                             "the connection open, as validate.sh does (it only waits out its "
                             "5 s read timeout); HttpArena's rust-epoll needs this")
    parser.add_argument("--server-pid", type=int,
                        help="check first that this process alone listens on the port (Linux), "
                             "so that no other server is validated")
    parser.add_argument("--dataset", default=ROOT / "data" / "dataset.json",
                        help="the dataset the server serves (json: items compared with it)")
    parser.add_argument("--database-url",
                        help="the server's database (async-db, fortunes: answers compared with "
                             "its rows, read with psql)")
    parser.add_argument("--psql", default="psql", help="the psql to read it with")


def run(args):
    profiles = [name.strip() for name in args.profiles.split(",") if name.strip()]
    unknown = sorted(set(profiles) - set(KNOWN_PROFILES))
    if unknown:
        print("verify httparena: unknown profile(s) %s; known: %s"
              % (", ".join(unknown), ", ".join(KNOWN_PROFILES)), file=sys.stderr)
        return 2
    with open(args.dataset, encoding="utf-8") as source:
        dataset = json.load(source)
    print("=== Validating: %s:%d (%s) ===" % (args.host, args.port, ", ".join(profiles)))
    if not wait_for_server(args.host, args.port, args.wait):
        print("FAIL: nothing answers on %s:%d" % (args.host, args.port))
        return 2
    if args.server_pid:
        elsewhere = served_by_alone(args.port, args.server_pid)
        if elsewhere:
            print("verify httparena: " + elsewhere, file=sys.stderr)
            return 2
    database = Database(args.database_url, args.psql) if args.database_url else None
    validator = Validator(args.host, args.port, dataset, require_close=not args.allow_keep_open,
                          database=database, tls_port=args.tls_port,
                          certificate=args.certificate, static_dir=args.static_dir,
                          h2_port=args.h2_port, h2c_port=args.h2c_port)
    return 0 if validator.run(profiles) else 1
