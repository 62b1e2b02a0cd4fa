"""HttpArena's HTTP/1.1 profiles as its load generator (gcannon) sends them: the raw requests of
each (its requests/*.raw), how often a connection closes, and the connection counts of
scripts/lib/profiles.sh (../shared/httparena-spec.md). A new profile is one more `Test` here,
its levels and its group; the anchors that serve it say so in anchors.py."""

from .tfb import ACCEPT_HTML, ACCEPT_JSON, ACCEPT_PLAIN  # the Accept headers sent here too
from .workload import Test, raw_request

# HttpArena's baseline and limited-conn mix (requests/get.raw, post_cl.raw, post_chunked.raw): 55, 75, 75.
BASELINE_PATH = "/baseline11?a=13&b=42"
BASELINE_MIX = (
    raw_request("GET", BASELINE_PATH),
    raw_request("POST", BASELINE_PATH, "20"),
    raw_request("POST", BASELINE_PATH, "20", chunked=True),
)
# HttpArena's json profile: these (count, m) pairs in turn (requests/json-{count}.raw).
JSON_PAIRS = ((1, 3), (5, 7), (10, 2), (15, 5), (25, 4), (40, 8), (50, 6))
JSON_URIS = tuple(f"/json/{count}?m={m}" for count, m in JSON_PAIRS)
JSON_MIX = tuple(raw_request("GET", uri) for uri in JSON_URIS)
# gcannon's -r of each profile (HttpArena's scripts/lib/tools/gcannon.sh): limited-conn 10, json 25.
LIMITED_CONN_REQUESTS = 10
JSON_REQUESTS_PER_CONNECTION = 25
ASYNC_DELAY_MS = 10  # their scored async profile: GET /delay/10 (requests/async-delay.raw)
# HttpArena's async-db load (scripts/lib/tools/gcannon.sh, requests/async-db-{5,10,20,35,50}.raw):
# these limits over prices 10..50 in turn, a new connection every 25 requests (gcannon -r 25).
ASYNC_DB_LIMITS = (5, 10, 20, 35, 50)
ASYNC_DB_MIX = tuple(raw_request("GET", f"/async-db?min=10&max=50&limit={limit}") for limit in ASYNC_DB_LIMITS)
ASYNC_DB_REQUESTS_PER_CONNECTION = 25
# The fixed-rate profiles (../shared/httparena-protocols.md), paced by h2load: HttpArena offers
# latency-1m 1,000,000 and latency-10k 10,000 requests/s of GET /baseline11 over 1,024 connections,
# 8gbit 50,000 POSTs of 10,240 bytes to /echo over TLS on 512. On two shared cores the first and
# the last are scaled down to rates one core answers with room to spare (a paced test measures
# CPU per request and latency below saturation, not the most it takes).
LATENCY_1M_RATE = 40_000
LATENCY_10K_RATE = 10_000
ECHO_RATE = 5_000
ECHO_BODY_BYTES = 10_240
# echo-ws-limited: gcannon -r 10, a new connection and handshake every 10 messages.
WS_MESSAGES_PER_CONNECTION = 10
# HttpArena's fortunes load: GET /fortunes alone on kept connections (requests/fortunes-get.raw).
ARENA_FORTUNES_MIX = (raw_request("GET", "/fortunes"),)

# HttpArena's H2 and gRPC profiles (scripts/lib/tools/h2load.sh): h2load -m 100 (static-h2: -m 32
# over requests/static-h2-uris.txt, these 20 files in turn), at 256 and 1,024 connections there;
# here 64 and 256 on two cores.
STATIC_H2_FILES = ("reset.css", "layout.css", "theme.css", "components.css", "utilities.css", "analytics.js",
                   "helpers.js", "app.js", "vendor.js", "router.js", "header.html", "footer.html", "regular.woff2",
                   "bold.woff2", "logo.svg", "icon-sprite.svg", "hero.webp", "thumb1.webp", "thumb2.webp",
                   "manifest.json")  # fmt: skip
GRPC_PATH = "/benchmark.BenchmarkService/GetSum"
# requests/grpc-sum.bin: an uncompressed gRPC frame of 4 bytes, SumRequest{a: 1, b: 2}.
GRPC_SUM_FRAME = bytes.fromhex("000000000408011002")
H2_STREAMS = 100
STATIC_H2_STREAMS = 32
H3_STREAMS = 64
# HttpArena's gateway profiles (../shared/httparena-protocols.md, "Gateway"): a proxy in front of an
# application server, loaded as its scripts/lib/tools/h2load.sh (gateway-64, h2 over TLS) and
# h2load-h3.sh (gateway-h3, HTTP/3) load them: -m 32 over requests/gateway-64-uris.txt, these 20 in
# turn with static-h2's Accept-Encoding; the static files the proxy serves itself, the rest it
# forwards. At HttpArena's connection counts: 512 and 1,024, and 64 and 256 over HTTP/3.
GATEWAY_URIS = (
    "/static/reset.css", "/static/components.css", "/static/app.js", "/static/vendor.js", "/static/header.html",
    "/static/hero.webp",
    "/baseline2?a=1&b=1", "/baseline2?a=13&b=42", "/baseline2?a=100&b=7", "/baseline2?a=250&b=500",
    "/json/1", "/json/5", "/json/10", "/json/15", "/json/25", "/json/40", "/json/50",
    "/async-db?min=10&max=50&limit=10", "/async-db?min=10&max=50&limit=25", "/async-db?min=10&max=50&limit=50",
)  # fmt: skip
GATEWAY_STREAMS = 32
# HttpArena's production-stack (../shared/httparena-protocols.md; its scripts/lib/tools/h2load.sh and
# site/.../gateway/production-stack/implementation.md): a stack of edge, HttpArena's auth service and
# the application server, loaded by TWO h2load instances at once over h2 (TLS), both with the
# Authorization of its data/jwt-token.txt. The reads: -m 16 on the level's connections over
# requests/production-stack-reads.txt, 1,000 blocks of 20 (6 static files, 2 /public/baseline of 3
# queries in turn, 10 /api/items/{id} counting up to 10,000, 2 /api/me) with static-h2's
# Accept-Encoding. The writes: -m 8 on an eighth of the connections (at least 8), each request a
# POST of the same JSON body to /api/items/1..20 in turn (requests/production-stack-writes.txt).
# Requests/s: the 2xx of both over the run's duration. At 256 and 1,024 connections there.
PRODUCTION_STATIC = ("reset.css", "components.css", "app.js", "vendor.js", "header.html", "hero.webp")
PRODUCTION_PUBLIC = ("/public/baseline?a=1&b=1", "/public/baseline?a=13&b=42", "/public/baseline?a=100&b=7")
PRODUCTION_BLOCKS = 1000
PRODUCTION_READS = tuple(
    uri
    for block in range(PRODUCTION_BLOCKS)
    for uri in ([f"/static/{name}" for name in PRODUCTION_STATIC]
                + [PRODUCTION_PUBLIC[block % 3], PRODUCTION_PUBLIC[(block + 1) % 3]]
                + [f"/api/items/{10 * block + i}" for i in range(1, 11)] + ["/api/me"] * 2)
)  # fmt: skip
PRODUCTION_WRITES = tuple(f"/api/items/{id}" for id in range(1, 21))
PRODUCTION_WRITE_BODY = '{"name":"bench-updated","price":250,"quantity":10}\n'  # its write-body.json
PRODUCTION_READ_STREAMS = 16
PRODUCTION_WRITE_STREAMS = 8
PRODUCTION_WRITE_SHARE = 8  # the writes' connections: the level's over this, at least as many

TESTS = [
    Test("baseline", BASELINE_PATH, "connections", ACCEPT_PLAIN, BASELINE_MIX),
    Test("pipelined", "/pipeline", "pipelined", ACCEPT_PLAIN),
    Test("limited-conn", BASELINE_PATH, "connections", ACCEPT_PLAIN, BASELINE_MIX, LIMITED_CONN_REQUESTS),
    Test("arena-json", "/json/1?m=3", "connections", ACCEPT_JSON, JSON_MIX, JSON_REQUESTS_PER_CONNECTION),
    Test("async", f"/delay/{ASYNC_DELAY_MS}", "connections", ACCEPT_PLAIN, delay_ms=ASYNC_DELAY_MS),
    # json's mix on kept connections over TLS (HttpArena: wrk over HTTPS, its Lua rotating the pairs).
    Test("json-tls", "/json/1?m=3", "connections", ACCEPT_JSON, JSON_MIX, tls=True),
    # json-tls as HttpArena's 64 CPUs see it: there its 4,096 RSA-2048 signatures take about 60 ms
    # of a 5 s run; here, made inside wrk's window, most of it. Not one of HttpArena's profiles.
    Test("json-tls-kept", "/json/1?m=3", "connections", ACCEPT_JSON, tls=True, uris=JSON_URIS, kept=True),
    Test("latency-1m", "/baseline11?a=1&b=2", "connections", ACCEPT_PLAIN, rate=LATENCY_1M_RATE),
    Test("latency-10k", "/baseline11?a=1&b=2", "connections", ACCEPT_PLAIN, rate=LATENCY_10K_RATE),
    Test("8gbit", "/echo", "connections", ACCEPT_PLAIN, tls=True, rate=ECHO_RATE, body_bytes=ECHO_BODY_BYTES),
    # The database profiles, against HttpArena's database (DATABASE_URL); arena-fortunes is their
    # fortunes (200 rows), named apart from TFB's.
    Test("async-db", "/async-db?min=10&max=50&limit=50", "connections", ACCEPT_JSON, ASYNC_DB_MIX,
         ASYNC_DB_REQUESTS_PER_CONNECTION),  # fmt: skip
    Test("arena-fortunes", "/fortunes", "connections", ACCEPT_HTML, ARENA_FORTUNES_MIX),
    # The WebSocket family (../shared/httparena-protocols.md), loaded by gcannon --ws.
    Test("echo-ws", "/ws", "connections", ACCEPT_PLAIN, websocket=True),
    Test("echo-ws-pipeline", "/ws", "pipelined", ACCEPT_PLAIN, websocket=True),
    Test("echo-ws-limited", "/ws", "connections", ACCEPT_PLAIN, close_every=WS_MESSAGES_PER_CONNECTION,
         websocket=True),  # fmt: skip
    Test("baseline-h2", "/baseline2?a=1&b=1", "connections", ACCEPT_PLAIN, h2="tls", streams=H2_STREAMS),
    Test("baseline-h2c", "/baseline2?a=1&b=1", "connections", ACCEPT_PLAIN, h2="h2c", streams=H2_STREAMS),
    Test("static-h2", "/static/" + STATIC_H2_FILES[0], "connections", ACCEPT_PLAIN, h2="tls",
         streams=STATIC_H2_STREAMS, uris=tuple("/static/" + f for f in STATIC_H2_FILES)),  # fmt: skip
    # HttpArena's H3 profiles (scripts/lib/tools/h2load-h3.sh): 64 streams on each connection.
    Test("baseline-h3", "/baseline2?a=1&b=1", "connections", ACCEPT_PLAIN, h2="h3", streams=H3_STREAMS),
    Test("static-h3", "/static/" + STATIC_H2_FILES[0], "connections", ACCEPT_PLAIN, h2="h3",
         streams=H3_STREAMS, uris=tuple("/static/" + f for f in STATIC_H2_FILES)),  # fmt: skip
    # HttpArena's gateway profiles: to an edge's TLS port (h2) or QUIC on its number (h3), a stack of
    # edge and application server in one command line (gateway.py).
    Test("gateway-64", GATEWAY_URIS[0], "connections", ACCEPT_PLAIN, h2="tls", streams=GATEWAY_STREAMS,
         uris=GATEWAY_URIS, h3_binary=True),  # fmt: skip
    Test("gateway-h3", GATEWAY_URIS[0], "connections", ACCEPT_PLAIN, h2="h3", streams=GATEWAY_STREAMS,
         uris=GATEWAY_URIS),  # fmt: skip
    # HttpArena's production-stack: the reads' and the writes' h2load at once (PRODUCTION_READS), to a
    # stack of edge, auth service and application server (gateway.py), the same h2load as gateway-64.
    Test("production-stack", PRODUCTION_READS[0], "connections", ACCEPT_PLAIN, h2="tls",
         streams=PRODUCTION_READ_STREAMS, uris=PRODUCTION_READS, h3_binary=True, writes=PRODUCTION_WRITES),  # fmt: skip
    Test("unary-grpc", GRPC_PATH, "connections", ACCEPT_PLAIN, h2="h2c-http", streams=H2_STREAMS, grpc=True),
    Test("unary-grpc-tls", GRPC_PATH, "connections", ACCEPT_PLAIN, h2="tls", streams=H2_STREAMS, grpc=True),
]
DB_TESTS = ("async-db", "arena-fortunes")  # against HttpArena's database
KEPT_TESTS = ("json-tls-kept",)  # ours, run when named
WS_TESTS = ("echo-ws", "echo-ws-pipeline", "echo-ws-limited")
H2_TESTS = ("baseline-h2", "baseline-h2c", "static-h2")
H3_TESTS = ("baseline-h3", "static-h3")
GRPC_TESTS = ("unary-grpc", "unary-grpc-tls")
GATEWAY_TESTS = ("gateway-64", "gateway-h3")
PRODUCTION_TESTS = ("production-stack",)
# Every test whose server reads HttpArena's database: its database profiles, and the gateway ones,
# whose application server answers /async-db (production-stack's /api/items and /api/me).
READS_ARENA_DB = DB_TESTS + GATEWAY_TESTS + PRODUCTION_TESTS
GROUPS = {
    "httparena": [t.name for t in TESTS if t.name not in DB_TESTS + WS_TESTS + H2_TESTS + H3_TESTS + GRPC_TESTS
                  + KEPT_TESTS + GATEWAY_TESTS + PRODUCTION_TESTS],
    "arena-h2": list(H2_TESTS + GRPC_TESTS),
    "arena-h3": list(H3_TESTS),
    "arena-db": list(DB_TESTS),
    "arena-ws": list(WS_TESTS),
    "arena-gateway": list(GATEWAY_TESTS),
    "arena-production": list(PRODUCTION_TESTS),
}
H1_TESTS = ("baseline", "pipelined", "limited-conn")  # what every HttpArena engine of anchors.py serves
# What they serve too, though their meta.json does not subscribe to it: the same GET /baseline11.
LATENCY_TESTS = ("latency-1m", "latency-10k")

# HttpArena's connection counts, in every profile of `scripts/tool bench`. async: HttpArena holds
# 32,000; here one level the CPU can answer in time (512 / 10 ms = 51,200/s) and two far beyond
# it, the second near what Linux's default ephemeral ports allow (load.connection_capacity).
LEVELS = {
    "baseline": [512, 4096],
    "pipelined": [512, 4096],
    "limited-conn": [512, 4096],
    "arena-json": [4096],
    "async": [512, 10000, 14000],
    "json-tls": [4096],
    "json-tls-kept": [4096],
    "latency-1m": [1024],
    "latency-10k": [1024],
    "8gbit": [512],
    "async-db": [1024],
    "arena-fortunes": [1024],
    "echo-ws": [512, 4096],
    "echo-ws-pipeline": [512, 4096],
    "echo-ws-limited": [512, 4096],
    **dict.fromkeys(H2_TESTS + GRPC_TESTS, [64, 256]),
    **dict.fromkeys(H3_TESTS, [64]),  # HttpArena's one level
    "gateway-64": [512, 1024],
    "gateway-h3": [64, 256],
    "production-stack": [256],  # HttpArena's 256 and 1,024; here 256 on two cores (--levels for 1024)
}

KEPT_OPEN_NOTE = (
    "kept its connections open after `Connection: close` (wrk reconnected after {closed:.0%} of them; "
    "{per_connection:,.1f} requests per connection, not {close_every}): it skipped the reconnections "
    "this test measures, so its number here is no bar"
)
