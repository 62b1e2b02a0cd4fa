"""TFB's seven tests as its toolset runs them: their URLs, the Accept headers its load generator
sends, the levels of its concurrency, pipeline and query scripts, and run-tests.py's timings."""

from .workload import Test

# The Accept headers TFB's load generator sends, per response type.
ACCEPT_JSON = "application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
ACCEPT_HTML = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ACCEPT_PLAIN = "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"

TESTS = [
    Test("json", "/json", "connections", ACCEPT_JSON),
    Test("plaintext", "/plaintext", "pipelined", ACCEPT_PLAIN),
    Test("db", "/db", "connections", ACCEPT_JSON),
    Test("queries", "/queries?queries=", "queries", ACCEPT_JSON),
    Test("updates", "/updates?queries=", "queries", ACCEPT_JSON),
    Test("fortunes", "/fortunes", "connections", ACCEPT_HTML),
    Test("cached", "/cached-queries?count=", "queries", ACCEPT_JSON),
]
GROUPS = {"tfb": [t.name for t in TESTS]}
DB_TESTS = ("db", "queries", "updates", "fortunes")  # against TFB's database

CONNECTION_LEVELS = [16, 32, 64, 128, 256, 512]
QUERY_LEVELS = [1, 5, 10, 15, 20]
# run-tests.py's defaults and the sleeps of its concurrency/pipeline/query scripts.
TIMINGS = {"duration": 15, "warmup": 15, "primer": 5, "pause_after_warmup": 5, "pause_between_levels": 2}
LEVELS = {
    "json": CONNECTION_LEVELS,
    "db": CONNECTION_LEVELS,
    "fortunes": CONNECTION_LEVELS,
    "plaintext": [256, 1024, 4096, 16384],
    "queries": QUERY_LEVELS,
    "updates": QUERY_LEVELS,
    "cached": [1, 10, 20, 50, 100],
}
# A couple of minutes for all seven tests: a low and the top level of each.
QUICK_LEVELS = {
    "json": [64, 512],
    "db": [64, 512],
    "fortunes": [64, 512],
    "plaintext": [256, 1024],
    "queries": [1, 20],
    "updates": [1, 20],
    "cached": [1, 100],
}
