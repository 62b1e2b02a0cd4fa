"""What one test sends: its URL, headers and requests, in one `Test` each venue's module fills in."""

from dataclasses import dataclass

PIPELINE_DEPTH = 16  # requests per write in a pipelined test (TFB's pipeline.sh, HttpArena's pipelined)


@dataclass(frozen=True)
class Test:
    """One test type (TFB's, or one of HttpArena's profiles). `kind` says what a level is:
    connections, or N at fixed connections."""

    name: str
    path: str  # for query tests, the URL up to the N; for a mix, the path its probe asks for
    kind: str  # "connections", "pipelined" (connections, 16 requests per write) or "queries"
    accept: str
    # HttpArena's mixes: raw requests sent in turn, and every Nth request closes its connection.
    requests: tuple = ()
    close_every: int = 0
    delay_ms: int = 0  # each request waits this long: the level's ceiling is connections / delay
    one_worker: bool = False  # every server runs one worker thread or process
    tls: bool = False  # over TLS, to the server's TLS port
    # A fixed-rate test: this many requests/s offered in all over the level's connections (h2load),
    # the server judged on CPU per request and latency.
    rate: int = 0
    body_bytes: int = 0  # each request a POST of this many random bytes (application/octet-stream)
    # Loaded by gcannon --ws (HttpArena's WebSocket profiles): every message echoed; a level is
    # connections, "pipelined" sends 16 at once, `close_every` is messages per connection.
    websocket: bool = False
    # Loaded by h2load over HTTP/2 (HttpArena's H2 and gRPC profiles): to the server's h2 TLS port
    # ("tls", ALPN h2), its h2c port ("h2c", prior knowledge) or h2c on its HTTP port ("h2c-http");
    # or by HttpArena's h2load-h3 over HTTP/3 (its H3 profiles) to QUIC on the h2 TLS port's number
    # ("h3": the server's command must put HTTP/3 there, gnosis's `--h3-port {h2_tls_port}`);
    # `streams` in flight per connection (h2load -m), the URIs in turn if `uris`, gRPC's framed body.
    h2: str = ""
    # Over h2 by the h2load of HttpArena's h2load-h3 build (nghttp2 1.69), not Debian's (1.52), which
    # never ends a timed run against Caddy at 512 connections of 32 streams (gateway-64).
    h3_binary: bool = False
    streams: int = 0
    uris: tuple = ()
    grpc: bool = False
    # Loaded by h2load over HTTP/1.1 as fast as it goes, `uris` in turn, on connections made (and
    # their TLS handshakes done) in h2load's warm-up, which the CPU figures leave out.
    kept: bool = False
    # HttpArena's production-stack: `uris` read by one h2load while a second one POSTs the body of
    # httparena.PRODUCTION_WRITE_BODY to these in turn, both with its token (pace.run_production);
    # a stack with its auth service serves it (gateway.py).
    writes: tuple = ()

    @property
    def production(self):
        return bool(self.writes)

    def url_path(self, level):
        return f"{self.path}{level}" if self.kind == "queries" else self.path

    @property
    def level_name(self):
        return "N" if self.kind == "queries" else "connections"

    def ceiling_rps(self, connections):
        """What `connections` held requests of `delay_ms` each allow at most, per second."""
        return connections * 1000 / self.delay_ms if self.delay_ms else None


def raw_request(method, path, body=None, chunked=False):
    """An HTTP/1.1 request as HttpArena's load generator sends it (its requests/*.raw)."""
    head = [f"{method} {path} HTTP/1.1", "Host: localhost"]
    if body is None:
        return "\r\n".join(head) + "\r\n\r\n"
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}")
    payload = f"{len(body):x}\r\n{body}\r\n0\r\n\r\n" if chunked else body
    return "\r\n".join(head) + "\r\n\r\n" + payload


def load_description(test):
    """What a HttpArena or nginx test sends, in words (TFB's tests say it in the header)."""
    notes = []
    if test.websocket:
        depth = PIPELINE_DEPTH if test.kind == "pipelined" else 1
        notes.append(f"HttpArena's load, `gcannon --ws -t 1`: text messages echoed, {depth} in flight per "
                     "connection; a request is a message echoed, and the wrk CPU column is gcannon's")  # fmt: skip
        if test.close_every:
            notes.append(f"a new connection and handshake every {test.close_every} messages")
        return "; ".join(notes)[:1].upper() + "; ".join(notes)[1:]
    if test.h2:
        over = {"tls": "h2 over TLS (ALPN), the server's h2 TLS port", "h2c": "h2c by prior knowledge, the server's "
                "h2c port", "h2c-http": "h2c by prior knowledge on the server's HTTP port",
                "h3": "HTTP/3 over QUIC (h2load-h3), UDP on the server's h2 TLS port's number"}[test.h2]  # fmt: skip
        what = f"the {len(test.uris)} files of HttpArena's static-h2 list in turn" if test.uris else f"`{test.path}`"
        if test.writes:
            return (f"two h2load (h2load-h3's, nghttp2 1.69) at once, {over}, both with `Authorization: Bearer` "
                    f"HttpArena's token: the reads, the {len(test.uris):,} URIs of HttpArena's production-stack "
                    f"list in turn ({uri_kinds(test.uris)}), {test.streams} streams in flight per connection; the "
                    f"writes, a JSON POST to each of the {len(test.writes)} `/api/items/1..{len(test.writes)}` in turn "
                    "on an eighth of the connections (at least 8), 8 streams each; requests/s the 2xx of both, "
                    "latency the reads'; the stack's CPU its edge's, auth service's and application's")  # fmt: skip
        if test.uris and not all(uri.startswith("/static/") for uri in test.uris):
            what = (f"the {len(test.uris)} URIs of HttpArena's gateway-64 list in turn ({uri_kinds(test.uris)}), "
                    "the static files served by the edge, the rest forwarded to the application server")  # fmt: skip
        grpc = " (a gRPC GetSum, 9-byte frame, `te: trailers`)" if test.grpc else ""
        program = " (h2load-h3's h2load, nghttp2 1.69)" if test.h3_binary else ""
        return f"h2load{program}, {over}: {what}{grpc}, {test.streams} streams in flight per connection"
    if test.kept:
        notes.append(f"h2load --h1 as fast as it goes, these {len(test.uris)} in turn: "
                     f"{', '.join(f'`{uri}`' for uri in test.uris)}; its connections made, and their handshakes "
                     "done, in its warm-up (2 ms per connection), which the CPU figures leave out")  # fmt: skip
    if test.requests:
        notes.append(f"Requests in turn, one in flight per connection: {', '.join(map(request_label, test.requests))}")
    if test.close_every:
        notes.append(f"every {test.close_every}th request of a wrk thread says `Connection: close`: a new connection "
                     f"per {test.close_every} requests on average")  # fmt: skip
    if test.delay_ms:
        notes.append(f"each request waits {test.delay_ms} ms: the ceiling is connections / {test.delay_ms} ms; RSS per "
                     "connection is the peak RSS less the RSS at start, over the connections")  # fmt: skip
    if test.rate:
        body = f"a POST of {test.body_bytes:,} random bytes" if test.body_bytes else "`GET " + test.path + "`"
        notes.append(f"paced: {test.rate:,} requests/s offered in all (h2load --rps), {body}, one in flight per "
                     "connection; judged on server CPU per request and latency")  # fmt: skip
    if test.tls:
        notes.append("over TLS 1.3 (the server's TLS port)")
    if test.one_worker:
        notes.append("every server runs one worker (gnosis --threads 1, nginx worker_processes 1)")
    text = "; ".join(notes)
    return text[:1].upper() + text[1:]


def uri_kinds(uris):
    """`6 /static, 4 /baseline2, ...`: how many URIs of a list go to each first path segment."""
    counts = {}
    for uri in uris:
        kind = "/" + uri.split("?", 1)[0].split("/")[1]
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} `{kind}`" for kind, n in counts.items())


def request_label(raw):
    """`POST /path HTTP/1.1` + body: a raw request in a few words."""
    body = " (chunked)" if "Transfer-Encoding: chunked" in raw else " + body" if "Content-Length" in raw else ""
    line = raw.split("\r\n", 1)[0]
    return f"`{line}`{body}"
