"""The other servers of a run, prebuilt beside the checkout: TFB's top Rust entries and
HttpArena's Rust engines, what each serves, and where each breaks a venue's rules."""

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import ROOT as REPO
from .httparena import DB_TESTS as ARENA_DB_TESTS
from .httparena import GRPC_TESTS, H1_TESTS, H2_TESTS, LATENCY_TESTS, WS_TESTS
from .tfb import DB_TESTS


def shared_path(*parts, environ=os.environ):
    """A path in the project's shared directory: $GNOSIS_SHARED_DIR, else `shared` beside the
    checkout (../shared), where the competitors' binaries are."""
    return Path(environ.get("GNOSIS_SHARED_DIR") or REPO.parent / "shared").joinpath(*parts)


# TFB's top Rust entries, prebuilt (see ../shared/anchors/README.md). Each listens on
# 0.0.0.0:8080 only, takes no arguments and, if it has database tests, connects at start-up to
# tfb-database:5432 as TFB's containers do.
DEFAULT_ANCHORS_DIR = shared_path("anchors", "bin")
# HttpArena's Rust engines, prebuilt (../shared/anchors/httparena/README.md): bin/NAME, 8080.
DEFAULT_HTTPARENA_DIR = shared_path("anchors", "httparena")
# HttpArena's load generator, for the WebSocket tests (../shared/anchors/tools/README.md).
GCANNON = shared_path("anchors", "tools", "gcannon")
# HttpArena's HTTP/3 load generator: nghttp2's h2load built with ngtcp2 and nghttp3.
H2LOAD_H3 = shared_path("anchors", "tools", "h2load-h3")
ANCHOR_PREFIX = "anchor:"
ANCHOR_PORT = 8080
# The anchors' N-query URLs differ from TFB's benchmark_config ones (?queries=N).
ANCHOR_PATHS = {"queries": "/queries?q=", "updates": "/updates?q="}
RULE_7_NOTE = (
    "puts all of a request's queries under one Sync, which TFB's rule 7 forbids: its numbers "
    "here are not a legal bar (../shared/anchors.md)"
)
FIRST_REQUEST_NOTE = (
    "answers every request of a pipelined read with the response to the first one (a "
    "pipelined /plaintext then /db gets two Hello, World!): it does not parse each request, so "
    "its plaintext is no bar for a server that does (docs/BENCHMARKS.md)"
)


@dataclass(frozen=True)
class Anchor:
    name: str
    tests: tuple  # the tests it serves; cached queries: none of them
    # The tests it serves against TFB's rules, each with why: its numbers there are no bar.
    not_a_legal_bar: dict = field(default_factory=dict)
    venue: str = "tfb"  # whose entry: "tfb" (--anchors-dir) or "httparena" (--httparena-dir)
    binary: str = None  # its file name, if not its name
    ports: tuple = (ANCHOR_PORT,)  # every port it binds (the first serves the tests)
    tls_port: int = None  # where it serves HTTP/1.1 over TLS, if it does
    h2c_port: int = None  # where it serves h2c by prior knowledge, if it does
    h2_tls_port: int = None  # where it serves h2 over TLS (ALPN), if it does
    wants_certificate: bool = False  # it serves TLS only given the run's TLS_CERT and TLS_KEY

    def path(self, anchors_dir, httparena_dir):
        if self.venue == "httparena":
            return Path(httparena_dir) / "bin" / (self.binary or self.name)
        return Path(anchors_dir) / (self.binary or self.name)

    @property
    def needs_database(self):
        return any(t in DB_TESTS for t in self.tests)

    def url_path(self, test, level):
        if test.name in ANCHOR_PATHS:
            return f"{ANCHOR_PATHS[test.name]}{level}"
        return test.url_path(level)


ANCHORS = {
    a.name: a
    for a in [
        Anchor("may-minihttp", ("json", "plaintext") + DB_TESTS),
        Anchor("xitca-web", ("json", "plaintext") + DB_TESTS),
        Anchor(
            "vortex",
            ("json", "plaintext") + DB_TESTS,
            not_a_legal_bar={"queries": RULE_7_NOTE, "updates": RULE_7_NOTE, "plaintext": FIRST_REQUEST_NOTE},
        ),
        Anchor("faf", ("plaintext",)),
        # HttpArena's engines: the profiles of their meta.json `tests` that `scripts/tool bench` runs.
        Anchor("rust-epoll", H1_TESTS + LATENCY_TESTS, venue="httparena"),
        Anchor("tokio", H1_TESTS + LATENCY_TESTS, venue="httparena"),
        # hyper serves h2 on 8443 given TLS_CERT/TLS_KEY; its static files only from /data/static
        # (a fixed path, not this machine's), so static-h2 is left out.
        Anchor("hyper", H1_TESTS + LATENCY_TESTS + ("baseline-h2",), venue="httparena", ports=(ANCHOR_PORT, 8443),
               h2_tls_port=8443, wants_certificate=True),  # fmt: skip
        Anchor("may-minihttp-arena", H1_TESTS + LATENCY_TESTS, venue="httparena", binary="may-minihttp"),
        # sark (a wrapper script) also binds 8081 (json-tls, its own certificate), 8082 (h2c) and 8443 (h2).
        Anchor(
            "sark", H1_TESTS + LATENCY_TESTS + ("arena-json", "json-tls", "json-tls-kept") + ARENA_DB_TESTS + WS_TESTS + H2_TESTS
            + GRPC_TESTS, venue="httparena", ports=(ANCHOR_PORT, 8081, 8082, 8443), tls_port=8081, h2c_port=8082,
            h2_tls_port=8443,
        ),  # fmt: skip
        # gRPC over h2c on 8080; its TLS (8443) only with certificates at the fixed /certs: not here.
        Anchor("tonic-grpc", ("unary-grpc",), venue="httparena"),
        # HttpArena's Rust WebSocket engines. Their meta.json names echo-ws and echo-ws-pipeline;
        # echo-ws-limited is the same endpoint with a new connection every 10 messages.
        Anchor("tokio-ws", WS_TESTS, venue="httparena"),
        Anchor("tokio-uring-ws", WS_TESTS, venue="httparena"),
        Anchor("wtx-ws", WS_TESTS, venue="httparena"),
    ]
}
ANCHOR_GROUPS = {venue: [a for a in ANCHORS.values() if a.venue == venue] for venue in ("tfb", "httparena")}


def anchor_named(name):
    if name not in ANCHORS:
        raise ValueError(f"unknown anchor {name!r}; the anchors are {', '.join(ANCHORS)}")
    return ANCHORS[name]


def parse_anchor_list(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("--anchors: name at least one anchor, or tfb, httparena or all")
    anchors = []
    for name in names:
        group = list(ANCHORS.values()) if name == "all" else ANCHOR_GROUPS.get(name) or [anchor_named(name)]
        anchors += [a for a in group if a not in anchors]
    return anchors
