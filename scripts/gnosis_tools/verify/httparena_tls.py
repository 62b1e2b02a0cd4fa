"""HttpArena's HTTP/1.1 profiles over TLS (port 8081): json-tls and 8gbit, and the TLS
checks every TLS port gets.

- json-tls follows validate.sh's "JSON TLS" section (MDA2AV/HttpArena, scripts/validate.sh):
  HTTP/1.1 negotiated over TLS (curl --http1.1 offers ALPN http/1.1), the pairs (7,2) (23,11)
  (50,1) with their count and totals, Content-Type application/json. Stricter: every item is
  compared with the dataset, as the json profile does.
- 8gbit: POST /echo as its validation is described (../shared/httparena-protocols.md, "H1
  over TLS"): random bodies of 1 B, 1 KB, 10 KB and 100 KB, chunked bodies of 10 KB and
  100 KB, an empty body; each answered 200 with the same bytes, application/octet-stream.
- The TLS checks (HttpArena PR #1292, run once when either profile is asked for): the leaf
  certificate served is the configured one (SHA-256 of its DER form), TLS 1.3 with one of
  the three AEAD suites, a client offering at most TLS 1.2 refused, and ALPN never naming a
  protocol the client did not offer: http/1.1 when offered, none when only h2 is.
"""

import hashlib
import os
import ssl

from .http1 import Connection, ExchangeError, exchange, request

PROFILES = ["json-tls", "8gbit"]
DEFAULT_PORT = 8081
JSON_TLS_PAIRS = [(7, 2), (23, 11), (50, 1)]
AEAD_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
               "TLS_CHACHA20_POLY1305_SHA256"}
ECHO_SIZES = [1, 1024, 10 * 1024, 100 * 1024]
ECHO_CHUNKED_SIZES = [10 * 1024, 100 * 1024]
ECHO_CHUNK = 16 * 1024


def default_certificate():
    """Where HttpArena mounts the certificate, unless TLS_CERT says otherwise."""
    return os.environ.get("TLS_CERT", "/certs/server.crt")


def client_context(alpn=("http/1.1",), maximum=None):
    """A client that does not verify the chain (curl -k): the fingerprint is checked instead."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if alpn:
        context.set_alpn_protocols(list(alpn))
    if maximum is not None:
        context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        context.maximum_version = maximum
    return context


def certificate_fingerprint(path):
    """SHA-256 of the first certificate of a PEM file."""
    with open(path, encoding="ascii") as source:
        return hashlib.sha256(ssl.PEM_cert_to_DER_cert(source.read())).hexdigest()


class TlsChecks:
    def __init__(self, validator, port, certificate):
        self.validator = validator
        self.port = port
        self.certificate = certificate
        self.context = client_context()

    def send(self, fragments):
        return exchange(self.validator.host, self.port, fragments, tls=self.context)

    def get(self, target):
        return self.send([request("GET", target)])

    def handshake(self, context):
        """(version, suite, ALPN, leaf certificate) of a handshake with `context`."""
        connection = Connection(self.validator.host, self.port, 10.0, context)
        try:
            sock = connection.sock
            return (sock.version(), sock.cipher()[0], sock.selected_alpn_protocol(),
                    sock.getpeercert(binary_form=True))
        finally:
            connection.close()

    def run(self, profiles):
        self.tls()
        if "json-tls" in profiles:
            self.json_tls()
        if "8gbit" in profiles:
            self.echo()

    def tls(self):
        v = self.validator
        print("[test] TLS on port %d" % self.port, file=v.out)
        try:
            version, suite, alpn, leaf = self.handshake(self.context)
        except OSError as error:
            v.fail("TLS handshake", str(error))
            return
        try:
            expected = certificate_fingerprint(self.certificate)
        except (OSError, ValueError) as error:
            v.fail("TLS certificate", "cannot read the configured certificate %s: %s"
                   % (self.certificate, error))
        else:
            if hashlib.sha256(leaf).hexdigest() == expected:
                v.ok("TLS certificate", "the configured one, SHA-256 %s..." % expected[:16])
            else:
                v.fail("TLS certificate", "the server's is not %s" % self.certificate)
        if version == "TLSv1.3" and suite in AEAD_SUITES:
            v.ok("TLS version and suite", "%s %s" % (version, suite))
        else:
            v.fail("TLS version and suite", "%s %s: TLS 1.3 with an AEAD suite wanted"
                   % (version, suite))
        try:
            old = self.handshake(client_context(maximum=ssl.TLSVersion.TLSv1_2))
        except (ssl.SSLError, OSError):
            v.ok("TLS 1.2 and older refused")
        else:
            v.fail("TLS 1.2 and older refused", "a TLS 1.2 client got %s" % old[0])
        self.alpn(alpn)

    def alpn(self, offered_http11):
        v = self.validator
        try:
            only_h2 = self.handshake(client_context(alpn=("h2",)))[2]
            both = self.handshake(client_context(alpn=("h2", "http/1.1")))[2]
            none = self.handshake(client_context(alpn=()))[2]
        except OSError as error:
            v.fail("TLS ALPN", str(error))
            return
        answers = {"http/1.1": offered_http11, "h2 only": only_h2, "h2, http/1.1": both,
                   "nothing": none}
        wanted = {"http/1.1": "http/1.1", "h2 only": None, "h2, http/1.1": "http/1.1",
                  "nothing": None}
        if answers == wanted:
            v.ok("TLS ALPN", "http/1.1 when offered, none otherwise")
        else:
            v.fail("TLS ALPN", "offered -> selected: %r, wanted %r" % (answers, wanted))

    def json_tls(self):
        v = self.validator
        print("[test] json-tls endpoint", file=v.out)
        try:
            response = self.get("/json/1?m=1")
        except ExchangeError as error:
            v.fail("json-tls protocol negotiation", str(error))
        else:
            if response.version == "HTTP/1.1":
                v.ok("json-tls protocol negotiation", "HTTP/1.1 over TLS")
            else:
                v.fail("json-tls protocol negotiation", "expected HTTP/1.1, got %s"
                       % response.version)
        failed = False
        for count, multiplier in JSON_TLS_PAIRS:
            problem = v.json_items_problem(count, multiplier, True, get=self.get)
            if problem:  # one FAIL per pair, one PASS for all of them, as validate.sh counts
                v.fail("json-tls /json/%d?m=%d" % (count, multiplier), problem)
                failed = True
        if not failed:
            v.ok("json-tls response", "%d (count, m) pairs over TLS, matched against the "
                 "dataset" % len(JSON_TLS_PAIRS))
        self.content_type("json-tls Content-Type", "application/json",
                          [request("GET", "/json/1?m=1")])

    def content_type(self, label, expected, fragments):
        v = self.validator
        try:
            response = self.send(fragments)
        except ExchangeError as error:
            v.fail(label, str(error))
            return
        found = response.header("content-type") or ""
        if found == expected or found.startswith(expected + ";"):
            v.ok(label, "Content-Type: %s" % found)
        else:
            v.fail(label, "expected %r, got %r" % (expected, found))

    def echo(self):
        v = self.validator
        print("[test] 8gbit: POST /echo over TLS", file=v.out)
        octets = ("Content-Type", "application/octet-stream")
        cases = [("%d bytes" % size, v.rng.randbytes(size), False) for size in ECHO_SIZES]
        cases += [("%d bytes chunked" % size, v.rng.randbytes(size), True)
                  for size in ECHO_CHUNKED_SIZES]
        cases.append(("an empty body", b"", False))
        for name, body, chunked in cases:
            if chunked:
                framed = b"".join(b"%x\r\n%s\r\n" % (len(body[at:at + ECHO_CHUNK]),
                                                      body[at:at + ECHO_CHUNK])
                                  for at in range(0, len(body), ECHO_CHUNK)) + b"0\r\n\r\n"
                headers = [octets, ("Transfer-Encoding", "chunked")]
            else:
                framed, headers = body, [octets, ("Content-Length", len(body))]
            label = "POST /echo %s" % name
            try:
                response = self.send([request("POST", "/echo", headers, framed)])
            except ExchangeError as error:
                v.fail(label, str(error))
                continue
            kind = response.header("content-type") or ""
            if response.status != 200:
                v.fail(label, "expected HTTP 200, got %d" % response.status)
            elif response.body != body:
                v.fail(label, "%d bytes back, not the %d sent" % (len(response.body), len(body)))
            elif not kind.startswith("application/octet-stream"):
                v.fail(label, "Content-Type %r, not application/octet-stream" % kind)
            else:
                v.ok(label, "byte for byte")
