#!/usr/bin/env python3
"""Check a running server the way HttpArena's scripts/validate.sh checks an entry.

    scripts/validate-httparena.py [--host 127.0.0.1] [--port 8080] [--wait SECONDS]
        [--profiles baseline,limited-conn,pipelined,json,async] [--dataset data/dataset.json]
        [--allow-keep-open]

The same requests, the same assertions and the same counting as validate.sh for the HTTP/1.1
profiles gnosis serves, without Docker: start the server yourself and point this at its port.
Two versions of validate.sh are followed, cited below by line or by section:
  - "snapshot" = enghitalo/HttpArena at 080c8ee4 (June 2026), scripts/validate.sh, by line;
  - "later"    = MDA2AV/HttpArena at 01193b65 (autumn 2026), scripts/validate.sh, by
    section: it added the async profile, a lower-cased header check, a fragmentation sweep,
    and random json parameters compared with the dataset, and dropped the json profile.
Where this check is stricter than validate.sh it says so (it also wants status 200, answers
framed by Content-Length or chunked, a whole body equal to the answer rather than its last
line, and a close after Connection: close).

Prints PASS / FAIL per check and "=== Results: N passed, M failed ===" (snapshot 1702-1704);
exits 1 on any FAIL, 2 when nothing answers. Python 3 standard library only.
"""

import argparse
import importlib.util
import json
import os
import random
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES = ["baseline", "limited-conn", "pipelined", "json", "async"]
# curl --max-time 30 in every check (snapshot 304, 326, 460).
REQUEST_TIMEOUT = 30.0
# check_fragmented's socket timeout (snapshot 366) and its pause between writes (373).
FRAGMENT_TIMEOUT = 5.0
FRAGMENT_PAUSE = 0.03
JSON_FIXED = [(12, 3), (22, 7), (31, 2), (50, 5)]  # snapshot 581
ITEM_FIELDS = ["id", "name", "category", "price", "quantity", "total"]


# The HTTP/1.1 client is verify.py's (one reader of responses for both verifiers).
_SPEC = importlib.util.spec_from_file_location(
    "verify", os.path.join(os.path.dirname(os.path.abspath(__file__)), "verify.py"))
verify = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(verify)


class ExchangeError(Exception):
    pass


def body_text(response):
    return response.body.decode("latin-1").rstrip("\r\n")


def request(method, target, headers=(), body=b""):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: localhost",
             "User-Agent: gnosis-validate-httparena", "Accept: */*"]
    lines += ["%s: %s" % pair for pair in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def exchange(host, port, fragments, timeout=REQUEST_TIMEOUT, pause=0.0, expect_close=False):
    """Sends the fragments (with a pause between them) on a new TCP_NODELAY connection
    (snapshot 367), reads one response, and, if asked, whether the server then closes. The
    response gains `elapsed` (seconds from connect to its last byte) and `closed`."""
    started = time.monotonic()
    try:
        connection = verify.Connection(host, port, timeout)
    except OSError as error:
        raise ExchangeError("cannot connect: %s" % error) from error
    try:
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for index, fragment in enumerate(fragments):
            if index:
                time.sleep(pause)
            connection.send(fragment)
        response = connection.read_response()
        response.elapsed = time.monotonic() - started
        response.closed = expect_close and connection.closed_by_peer(timeout)
        return response
    except socket.timeout as error:
        raise ExchangeError("timed out waiting for the server") from error
    except (OSError, verify.ProtocolError, ValueError) as error:
        raise ExchangeError("%s: %s" % (type(error).__name__, error)) from error
    finally:
        connection.close()


class Validator:
    def __init__(self, host, port, dataset, out=sys.stdout, rng=None, require_close=True,
                 fragment_timeout=FRAGMENT_TIMEOUT):
        self.host = host
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

    def check_header(self, label, expected, fragments):
        """check_header() for Content-Type (snapshot 452-476): the value, bare or followed by
        ';' and parameters. Stricter: exactly one Content-Type header."""
        try:
            response = exchange(self.host, self.port, fragments)
        except ExchangeError as error:
            self.fail(label, str(error))
            return
        found = [value for name, value in response.header_list if name.lower() == "content-type"]
        if len(found) == 1 and (found[0] == expected or found[0].startswith(expected + ";")):
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

    def json_items_problem(self, count, multiplier, faithful):
        """None, or what is wrong with /json/count?m=multiplier (snapshot 586-606: count,
        every field, each total; later: each item equal to the dataset's, in order; here every
        field of it, rating included, and integers for the numbers)."""
        try:
            response = self.get("/json/%d?m=%d" % (count, multiplier))
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

    def run(self, profiles):
        # snapshot 495: baseline and limited-conn share one section, run once.
        if "baseline" in profiles or "limited-conn" in profiles:
            self.baseline()
        if "pipelined" in profiles:
            self.pipelined()
        if "json" in profiles:
            self.json()
        if "async" in profiles:
            self.async_()
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--profiles", default=",".join(PROFILES),
                        help="comma-separated, of: %s" % ", ".join(PROFILES))
    parser.add_argument("--wait", type=float, default=0,
                        help="seconds to wait for the server to answer first")
    parser.add_argument("--allow-keep-open", action="store_true",
                        help="pass an answer to Connection: close after which the server keeps "
                             "the connection open, as validate.sh does (it only waits out its "
                             "5 s read timeout); HttpArena's rust-epoll needs this")
    parser.add_argument("--server-pid", type=int,
                        help="check first that this process alone listens on the port (Linux), "
                             "so that no other server is validated")
    parser.add_argument("--dataset", default=os.path.join(ROOT, "data", "dataset.json"),
                        help="the dataset the server serves (json: items compared with it)")
    args = parser.parse_args()
    profiles = [name.strip() for name in args.profiles.split(",") if name.strip()]
    unknown = sorted(set(profiles) - set(PROFILES))
    if unknown:
        parser.error("unknown profile(s) %s; known: %s" % (", ".join(unknown),
                                                          ", ".join(PROFILES)))
    with open(args.dataset, encoding="utf-8") as source:
        dataset = json.load(source)
    print("=== Validating: %s:%d (%s) ===" % (args.host, args.port, ", ".join(profiles)))
    if not wait_for_server(args.host, args.port, args.wait):
        print("FAIL: nothing answers on %s:%d" % (args.host, args.port))
        sys.exit(2)
    if args.server_pid:
        verify.check_server_pid(argparse.Namespace(port=args.port), args.server_pid)
    validator = Validator(args.host, args.port, dataset, require_close=not args.allow_keep_open)
    if not validator.run(profiles):
        sys.exit(1)


if __name__ == "__main__":
    main()
