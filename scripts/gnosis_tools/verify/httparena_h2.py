"""HttpArena's HTTP/2 profiles and unary gRPC, as validate.sh checks them, with curl as
validate.sh uses it (Python's standard library has no HTTP/2 client; scripts/test.sh installs
curl, whose Debian build speaks HTTP/2).

Followed: MDA2AV/HttpArena at 28606baf, scripts/validate.sh, sections "baseline-h2",
"Baseline H2c" and "Static Files H2" (the H2 port 8443, the h2c port 8082), counted as it
counts:
- baseline-h2 (4 checks): HTTP/2 negotiated over TLS (curl --http2 reports version 2),
  /baseline2?a=13&b=42 is 55, a random pair (100..999 each) is its sum, Content-Type
  text/plain;
- baseline-h2c (5 checks): HTTP/2 by prior knowledge, the h2c port does not answer HTTP/1.1
  with 200, 55, a random pair, Content-Type text/plain;
- static-h2 (5 checks): Content-Type of reset.css, app.js and manifest.json, a non-empty
  reset.css, 404 for /static/nonexistent.txt.
gRPC is not in that snapshot; its checks follow HttpArena's later validate.sh ("gRPC unary"):
- unary-grpc (2 checks), over h2c on the HTTP port, and unary-grpc-tls (2 checks), over TLS
  on the H2 port: a SumRequest of a random pair (100..999 each) POSTed with content-type
  application/grpc and te: trailers; the answer must be HTTP/2, its grpc-status (when curl
  shows one: Debian 12's curl does not write trailers with -D, so it is tolerated when absent,
  as there; tests/h2.rs checks the trailers with nghttp) 0, and the reply's result the sum.
  That validate.sh also runs its TLS posture and quality probes on unary-grpc-tls; those are
  not repeated here.
HTTP/3 is not in that snapshot either; its checks follow HttpArena's PR #1304 (2026-08-24,
shared/httparena-protocols.md, "H3"): readiness, Content-Type, sizes and 404 over h2 on the
TCP port, as baseline-h2 and static-h2 check them, and over QUIC on the same port number (UDP)
4 x GET with HttpArena's own h2load-h3 (`--alpn-list=h3`), which must give 4/4 2xx with ALPN h3:
- baseline-h3 (1 + baseline-h2's 4 checks): 4 x /baseline2?a=13&b=42 over QUIC;
- static-h3 (1 + static-h2's 5 checks): 4 x /static/reset.css over QUIC.
h2load-h3 is ../shared/anchors/tools/h2load-h3 beside the repository, or H2LOAD_H3.
Ours, beyond HttpArena's (static-h3, 5 checks): static-h2's checks over QUIC too, with aioquic
(`h3_client.py`; scripts/test.sh installs it): the three Content-Types, reset.css the size it
has over h2, and 404 for /static/nonexistent.txt.
"""

import asyncio
import os
import re
import struct
import subprocess
import tempfile

PROFILES = ["baseline-h2", "baseline-h2c", "static-h2", "unary-grpc", "unary-grpc-tls",
            "baseline-h3", "static-h3"]
H2LOAD_H3 = os.environ.get("H2LOAD_H3") or os.path.normpath(os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "..", "shared", "anchors", "tools", "h2load-h3"))
DEFAULT_H2_PORT = 8443
DEFAULT_H2C_PORT = 8082
GET_SUM = "/benchmark.BenchmarkService/GetSum"


def varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


def sum_request(a, b):
    """The length-prefixed SumRequest{a, b} (non-negative a and b)."""
    message = b"\x08" + varint(a) + b"\x10" + varint(b)
    return b"\x00" + struct.pack(">I", len(message)) + message


def sum_reply(frame):
    """SumReply.result of a length-prefixed reply, or why it cannot be read."""
    if len(frame) < 5:
        return "short frame (%d bytes)" % len(frame)
    if frame[0] != 0:
        return "compressed flag %d" % frame[0]
    length = struct.unpack(">I", frame[1:5])[0]
    message = frame[5:5 + length]
    if len(message) != length:
        return "truncated (length %d, %d bytes)" % (length, len(message))
    if not message:
        return 0  # proto3 leaves out a result of 0
    if message[0] != 0x08:
        return "tag 0x%02x" % message[0]
    value = shift = 0
    for byte in message[1:]:
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    return "bad varint"


def header_values(head, name):
    """The values of field `name` in curl's -D output (trailers included), in order."""
    values = []
    for line in head.decode("latin-1").splitlines():
        field, colon, value = line.partition(":")
        if colon and field.strip().lower() == name:
            values.append(value.strip())
    return values


class Curl:
    """One curl request: the HTTP version it spoke, the status, the head (with trailers) and
    the body; version "0" when curl failed."""

    def __init__(self, args):
        with tempfile.TemporaryDirectory() as folder:
            head, body = os.path.join(folder, "head"), os.path.join(folder, "body")
            try:
                completed = subprocess.run(
                    ["curl", "-s", "--max-time", "30", "-D", head, "-o", body,
                     "-w", "%{http_version} %{http_code}"] + list(args),
                    capture_output=True, timeout=60)
                version, _, code = completed.stdout.decode().partition(" ")
            except (OSError, subprocess.TimeoutExpired):
                version, code = "0", "000"
            self.version = version if version not in ("", "0") else "0"
            self.status = code or "000"
            self.head = self.read(head)
            self.body = self.read(body)

    @staticmethod
    def read(path):
        try:
            with open(path, "rb") as source:
                return source.read()
        except OSError:
            return b""


class H2Checks:
    def __init__(self, validator, h2_port, h2c_port):
        self.validator = validator
        self.h2 = "https://%s:%d" % (validator.host, h2_port)
        self.h2_port = h2_port
        self.h2c = "http://%s:%d" % (validator.host, h2c_port)
        self.grpc_h2c = "http://%s:%d" % (validator.host, validator.port)

    def run(self, profiles):
        out = self.validator.out
        if "baseline-h2" in profiles:
            print("[test] baseline-h2 endpoint", file=out)
            self.baseline(self.h2, ["-k", "--http2"], "over HTTP/2", "")
        if "baseline-h2c" in profiles:
            print("[test] baseline-h2c endpoint", file=out)
            self.baseline(self.h2c, ["--http2-prior-knowledge"], "over h2c", " (h2c)")
        if "static-h2" in profiles:
            print("[test] static-h2 endpoint", file=out)
            self.static()
        if "baseline-h3" in profiles:
            print("[test] baseline-h3 endpoint", file=out)
            self.over_quic("/baseline2?a=13&b=42")
            self.baseline(self.h2, ["-k", "--http2"], "over HTTP/2", "")
        if "static-h3" in profiles:
            print("[test] static-h3 endpoint", file=out)
            self.over_quic("/static/reset.css")
            self.static()
            self.static_over_quic()
        if "unary-grpc" in profiles:
            print("[test] unary-grpc endpoint (h2c on :%d)" % self.validator.port, file=out)
            for label in ("GetSum over h2c", "GetSum over h2c (second random pair)"):
                self.get_sum(label, self.grpc_h2c, ["--http2-prior-knowledge"])
        if "unary-grpc-tls" in profiles:
            print("[test] unary-grpc-tls endpoint (h2+TLS)", file=out)
            for label in ("GetSum over h2+TLS", "GetSum over h2+TLS (second random pair)"):
                self.get_sum(label, self.h2, ["-k", "--http2"])

    def expect(self, label, ok, detail, why):
        if ok:
            self.validator.ok(label, detail)
        else:
            self.validator.fail(label, why)

    def content_type(self, label, url, options, expected):
        got = header_values(Curl(options + [url]).head, "content-type")
        value = got[0] if len(got) == 1 else None
        self.expect(label, value is not None and value.startswith(expected), value,
                    "expected one Content-Type %s, got %r" % (expected, got))

    def baseline(self, base, options, over, suffix):
        v = self.validator
        answer = Curl(options + [base + "/baseline2?a=1&b=1"])
        if base == self.h2c:
            self.expect("HTTP/2 cleartext (prior-knowledge)", answer.version == "2",
                        "HTTP/%s" % answer.version,
                        "answered over HTTP/%s, expected HTTP/2" % answer.version)
            h1 = Curl(["--max-time", "5", "--http1.1", base + "/baseline2?a=1&b=1"])
            self.expect("h2c-only: the h2c port rejects plain HTTP/1.1", h1.status != "200",
                        "got %s" % h1.status, "the h2c port also answered HTTP/1.1 with 200")
        else:
            self.expect("HTTP/2 protocol negotiation", answer.version == "2",
                        "HTTP/%s" % answer.version,
                        "server responded with HTTP/%s" % answer.version)
        a, b = v.rng.randint(100, 999), v.rng.randint(100, 999)
        for x, y, label in [(13, 42, "GET /baseline2?a=13&b=42 %s" % over),
                            (a, b, "GET /baseline2?a=%d&b=%d %s (random)" % (a, b, over))]:
            body = Curl(options + ["%s/baseline2?a=%d&b=%d" % (base, x, y)]).body
            self.expect(label, body.strip() == str(x + y).encode(), x + y,
                        "expected %d, got %r" % (x + y, body[:40]))
        self.content_type("GET /baseline2 Content-Type%s" % suffix,
                          base + "/baseline2?a=1&b=1", options, "text/plain")

    def static(self):
        options = ["-k", "--http2"]
        for name, expected in [("reset.css", "text/css"), ("app.js", "application/javascript"),
                               ("manifest.json", "application/json")]:
            self.content_type("GET /static/%s Content-Type" % name,
                              "%s/static/%s" % (self.h2, name), options, expected)
        answer = Curl(options + [self.h2 + "/static/reset.css"])
        self.expect("static-h2 response size", answer.body and answer.version == "2",
                    "%d bytes" % len(answer.body),
                    "empty response (over HTTP/%s)" % answer.version)
        missing = Curl(options + [self.h2 + "/static/nonexistent.txt"])
        self.expect("GET /static/nonexistent.txt", missing.status == "404", missing.status,
                    "expected 404, got %s" % missing.status)

    def over_quic(self, path):
        """4 x GET `path` over QUIC with h2load-h3: 4/4 2xx, ALPN h3."""
        label = "4 x GET %s over HTTP/3 (QUIC)" % path
        try:
            completed = subprocess.run(
                [H2LOAD_H3, "--alpn-list=h3", "-n", "4", "-c", "1", "-t", "1",
                 self.h2 + path], capture_output=True, timeout=60)
            report = completed.stdout.decode("latin-1")
        except (OSError, subprocess.TimeoutExpired) as error:
            return self.validator.fail(label, "h2load-h3 (%s) did not run: %s" % (H2LOAD_H3, error))
        ok = re.search(r"status codes: (\d+) 2xx", report)
        alpn = re.search(r"Application protocol: (\S+)", report)
        twos, protocol = (int(ok.group(1)) if ok else 0), (alpn.group(1) if alpn else None)
        self.expect(label, twos == 4 and protocol == "h3", "4/4 2xx, ALPN h3",
                    "%d/4 2xx, ALPN %s" % (twos, protocol))

    def static_over_quic(self):
        """static-h2's checks, over HTTP/3 with aioquic (ours)."""
        names = [("reset.css", "text/css"), ("app.js", "application/javascript"),
                 ("manifest.json", "application/json")]
        paths = ["/static/%s" % name for name, _ in names] + ["/static/nonexistent.txt"]
        try:
            from .. import h3_client  # here: aioquic is needed by these checks only
            got = asyncio.run(h3_client.exchange(self.h2_port, [("GET", p, None) for p in paths],
                                                 host=self.validator.host))
        except Exception as error:  # aioquic missing, or the exchange failed: say which
            for path in paths:
                self.validator.fail("GET %s over HTTP/3 (ours)" % path,
                                    "aioquic's exchange failed: %r" % (error,))
            return
        answers = got["answers"]
        for (name, expected), answer in zip(names, answers):
            value = h3_client.header(answer, "content-type")
            self.expect("GET /static/%s Content-Type over HTTP/3 (ours)" % name,
                        value is not None and value.startswith(expected), value,
                        "expected Content-Type %s, got %r" % (expected, value))
        over_h2 = Curl(["-k", "--http2", self.h2 + "/static/reset.css"]).body
        size = len(answers[0]["body"])
        self.expect("static-h3 response size over HTTP/3 (ours)",
                    size > 0 and size == len(over_h2), "%d bytes" % size,
                    "%d bytes, %d over HTTP/2" % (size, len(over_h2)))
        status = h3_client.header(answers[3], ":status")
        self.expect("GET /static/nonexistent.txt over HTTP/3 (ours)", status == "404", status,
                    "expected 404, got %s" % status)

    def get_sum(self, label, base, options):
        v = self.validator
        a, b = v.rng.randint(100, 999), v.rng.randint(100, 999)
        with tempfile.NamedTemporaryFile(suffix=".bin") as request:
            request.write(sum_request(a, b))
            request.flush()
            answer = Curl(options + ["-X", "POST", "--data-binary", "@" + request.name,
                                     "-H", "content-type: application/grpc",
                                     "-H", "te: trailers", base + GET_SUM])
        statuses = header_values(answer.head, "grpc-status")
        result = sum_reply(answer.body)
        if answer.version != "2":
            v.fail(label, "responded over HTTP/%s, expected HTTP/2" % answer.version)
        elif statuses and statuses[-1] != "0":
            message = header_values(answer.head, "grpc-message")
            v.fail(label, "grpc-status %s%s, expected 0"
                   % (statuses[-1], " (%s)" % message[-1] if message else ""))
        elif result == a + b:
            v.ok(label, "a=%d b=%d -> %d" % (a, b, result))
        else:
            v.fail(label, "GetSum(a=%d, b=%d) returned %r, expected %d" % (a, b, result, a + b))
