"""HttpArena's HTTP/1.1 profiles over TLS (port 8081): json-tls and 8gbit, and the TLS
checks of every TLS port.

Followed: MDA2AV/HttpArena's later scripts/validate.sh ("JSON TLS", tls_posture_probe,
tls_quality_probe), counted as it counts:
- posture, for each TLS profile (4 checks): the leaf certificate served is the configured one
  (SHA-256 of its DER form), TLS 1.3 negotiated, one of the three TLS 1.3 AEAD suites, and
  ALPN, the client offering only http/1.1, answered http/1.1 or nothing;
- quality, for json-tls (1 check): no handshake completes with SSLv3, TLS 1.0 or 1.1 (any
  cipher, security level 0), nor with TLS 1.2 and a NULL, anonymous, export, RC4, DES or 3DES
  cipher (a protocol this Python's OpenSSL cannot offer is not probed, as validate.sh notes);
- json-tls (3 checks): HTTP/1.1 negotiated over TLS (curl --http1.1 offers ALPN http/1.1),
  three random (count, m) pairs, count 5..50 and m 2..89, with the full item schema and each
  total as one check, Content-Type application/json;
- 8gbit, as its validation is described (../shared/httparena-protocols.md, "H1 over TLS"):
  random bodies of 1 B, 1 KB, 10 KB and 100 KB, chunked bodies of 10 KB and 100 KB, an empty
  body, each POSTed to /echo and answered 200 with the same bytes.
Stricter (two checks of ours, once): a TLS 1.2 client with its default ciphers is refused
too (gnosis speaks TLS 1.3 only), and ALPN never names h2 on this port (offered h2 alone:
nothing; h2 and http/1.1: http/1.1); json-tls's items are compared with the dataset, as the
json profile's are, Content-Type must be one header (as every check_header asks), and
/echo's answer must be application/octet-stream.
"""

import hashlib
import os
import ssl
import warnings

from .http1 import Connection, ExchangeError, exchange, request

PROFILES = ["json-tls", "8gbit"]
DEFAULT_PORT = 8081
JSON_TLS_PAIRS = 3
JSON_TLS_COUNTS = (5, 50)
JSON_TLS_MULTIPLIERS = (2, 89)
AEAD_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
               "TLS_CHACHA20_POLY1305_SHA256"}
ECHO_SIZES = [1, 1024, 10 * 1024, 100 * 1024]
ECHO_CHUNKED_SIZES = [10 * 1024, 100 * 1024]
ECHO_CHUNK = 16 * 1024
OLD_PROTOCOLS = [("TLSv1", ssl.TLSVersion.TLSv1), ("TLSv1.1", ssl.TLSVersion.TLSv1_1)]
WEAK_CIPHERS = ["NULL", "aNULL", "EXPORT", "RC4", "DES", "3DES"]


def default_certificate():
    """Where HttpArena mounts the certificate, unless TLS_CERT says otherwise."""
    return os.environ.get("TLS_CERT", "/certs/server.crt")


def client_context(alpn=("http/1.1",), versions=None, ciphers=None):
    """A client that does not verify the chain (curl -k): the fingerprint is checked instead.
    `versions` pins (minimum, maximum); `ciphers` is an OpenSSL cipher list for TLS 1.2 and
    older."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if alpn:
        context.set_alpn_protocols(list(alpn))
    if versions is not None:
        context.minimum_version, context.maximum_version = versions
    if ciphers is not None:
        context.set_ciphers(ciphers)
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
        for profile in ("json-tls", "8gbit"):
            if profile in profiles:
                print("[test] %s TLS on port %d" % (profile, self.port), file=self.validator.out)
                self.posture(profile)
                if profile == "json-tls":
                    self.quality(profile)
                    self.json_tls()
                else:
                    self.echo()
        self.ours()

    def posture(self, profile):
        v = self.validator
        try:
            version, suite, alpn, leaf = self.handshake(self.context)
        except OSError as error:
            v.fail("%s TLS posture" % profile, "no TLS handshake completed: %s" % error)
            return
        label = "%s serves the mounted certificate" % profile
        try:
            expected = certificate_fingerprint(self.certificate)
        except (OSError, ValueError) as error:
            v.fail(label, "cannot read %s: %s" % (self.certificate, error))
        else:
            if hashlib.sha256(leaf).hexdigest() == expected:
                v.ok(label)
            else:
                v.fail(label, "the server's is not %s" % self.certificate)
        label = "%s negotiates TLS 1.3" % profile
        if version == "TLSv1.3":
            v.ok(label, "cipher %s" % suite)
        else:
            v.fail(label, "settled on %s against a client offering 1.3" % version)
        label = "%s uses a TLS 1.3 AEAD cipher" % profile
        if suite in AEAD_SUITES:
            v.ok(label, suite)
        else:
            v.fail(label, "negotiated %r" % suite)
        if alpn in (None, "http/1.1"):
            v.ok("%s ALPN" % profile, alpn or "none negotiated, client falls back")
        else:
            v.fail("%s ALPN" % profile, "the client offered only http/1.1 and the server "
                   "selected %r" % alpn)

    def accepts(self, versions, ciphers):
        """Whether a handshake completes with a client of these versions and ciphers; None
        when this Python's OpenSSL cannot offer them at all."""
        try:
            with warnings.catch_warnings():  # asking for TLS 1.0 and 1.1 is the point
                warnings.simplefilter("ignore", DeprecationWarning)
                context = client_context(alpn=(), versions=versions, ciphers=ciphers)
        except (ssl.SSLError, ValueError):
            return None
        try:
            self.handshake(context)
        except ssl.SSLError as error:
            # The client refusing to offer what it was asked to is not the server's answer.
            return None if "NO_PROTOCOLS_AVAILABLE" in str(error) or "NO_CIPHERS" in str(
                error) else False
        except OSError:
            return False
        return True

    def quality(self, profile):
        v = self.validator
        accepted, untestable = [], []
        for name, version in OLD_PROTOCOLS:
            verdict = self.accepts((version, version), "ALL:@SECLEVEL=0")
            (untestable if verdict is None else accepted if verdict else []).append(name)
        for family in WEAK_CIPHERS:
            tls12 = (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
            if self.accepts(tls12, family + ":@SECLEVEL=0"):
                accepted.append("TLS 1.2 " + family)
        label = "%s TLS quality" % profile
        if accepted:
            v.fail(label, "the server completes a handshake using %s" % ", ".join(accepted))
        else:
            v.ok(label, "refuses every obsolete protocol and weak cipher probed")
        if untestable:
            print("  NOTE [%s]: this OpenSSL cannot offer %s, so those were not probed"
                  % (label, ", ".join(untestable)), file=v.out)

    def ours(self):
        """The two stricter checks: TLS 1.2 refused whatever its ciphers, and h2 never chosen."""
        v = self.validator
        tls12 = (ssl.TLSVersion.MINIMUM_SUPPORTED, ssl.TLSVersion.TLSv1_2)
        if self.accepts(tls12, None):
            v.fail("TLS 1.2 refused", "a TLS 1.2 client with default ciphers was served")
        else:
            v.ok("TLS 1.2 refused")
        try:
            answers = {offer: self.handshake(client_context(alpn=offer))[2]
                       for offer in (("h2",), ("h2", "http/1.1"), ())}
        except OSError as error:
            v.fail("ALPN never h2", str(error))
            return
        wanted = {("h2",): None, ("h2", "http/1.1"): "http/1.1", (): None}
        if answers == wanted:
            v.ok("ALPN never h2", "h2 alone: none; h2 and http/1.1: http/1.1")
        else:
            v.fail("ALPN never h2", "offered -> selected: %r" % answers)

    def json_tls(self):
        v = self.validator
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
        for _ in range(JSON_TLS_PAIRS):
            count, multiplier = (v.rng.randint(*JSON_TLS_COUNTS),
                                 v.rng.randint(*JSON_TLS_MULTIPLIERS))
            problem = v.json_items_problem(count, multiplier, True, get=self.get)
            if problem:  # one FAIL per pair, one PASS for all of them, as validate.sh counts
                v.fail("json-tls /json/%d?m=%d" % (count, multiplier), problem)
                failed = True
        if not failed:
            v.ok("json-tls response", "%d random (count, m) pairs over TLS, full item schema, "
                 "matched against the dataset" % JSON_TLS_PAIRS)
        v.check_header("json-tls Content-Type", "application/json",
                       [request("GET", "/json/1?m=1")], send=self.send)

    def echo(self):
        v = self.validator
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
