"""Check a running gnosis server against the TFB rules (docs/TFB.md, shared tfb-spec.md).

    scripts/tool verify tfb [--url http://127.0.0.1:8080 | --port N] [--server-pid PID]
                            [--entry default|uring] [--tests json,plaintext,...]
                            [--config benchmark_config.json] [--strict]

The URLs and the list of tests come from benchmark_config.json (the entry named by --entry);
--tests narrows the list. Checks what TFB's verifier checks (headers, Date refresh, bodies, the
N cases, the fortune page, that updates change rows, the statement counts in
pg_stat_statements under 512 concurrent requests) and a few things the spec adds (pipelining,
404, Connection: close, HTTP/1.0, the rows answered being the rows in the database).
--server-pid makes sure the server checked is that process (Linux): every socket listening on
the port must be one of its own, else nothing is checked (exit 2).

The database is read with psql using the PG* environment (TFB's defaults where unset: host
tfb-database, port 5432, benchmarkdbuser, hello_world). Prints PASS / WARN / FAIL per check,
a summary, and exits 1 on any FAIL (or WARN with --strict), 2 when it cannot run at all.
"""

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from .. import ROOT
from ..system import served_by_alone
from .http1 import Connection, ProtocolError

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
CONCURRENCY = 512  # TFB's highest concurrency level: the count checks send this many at once
QUERIES_FOR_COUNT = 20
MAX_QUERIES = 500
WORLD_ROWS = 10000
MAX_RANDOM = 10000
DATE_GAP = 3.0  # TFB fetches twice this far apart and needs two different Date values
LOAD_TIMEOUT = 120.0
STATS_SETTLE = 0.5  # pg_stat_statements is written as each statement ends; let the last ones land

# Canonical TFB test names, the benchmark_config.json key holding each URL, and the run order.
TEST_URL_KEYS = {
    "json": "json_url",
    "plaintext": "plaintext_url",
    "db": "db_url",
    "query": "query_url",
    "fortune": "fortune_url",
    "update": "update_url",
    "cached-query": "cached_query_url",
}
ALIASES = {
    "queries": "query",
    "updates": "update",
    "fortunes": "fortune",
    "cached-queries": "cached-query",
    "cached_query": "cached-query",
    "cached_queries": "cached-query",
}
DB_TESTS = {"db", "query", "fortune", "update", "cached-query"}

ACCEPT = {
    "json": "application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,"
    "application/xml;q=0.8,*/*;q=0.7",
    "html": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "plaintext": "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,"
    "application/xml;q=0.8,*/*;q=0.7",
}
CONTENT_TYPES = {
    "json": "application/json",
    "plaintext": "text/plain",
    "html": "text/html; charset=utf-8",
}
# What TFB's verifier still accepts (a WARN here: the spec asks for the exact value).
CONTENT_TYPES_TOLERATED = {
    "json": r"^application/json(; ?charset=(UTF|utf)-8)?$",
    "plaintext": r"^text/plain(; ?charset=(UTF|utf)-8)?$",
    "html": r"^text/html; ?charset=(UTF|utf)-8$",
}
IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d{2}:\d{2}:\d{2} GMT$"
)

FORTUNES = [
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af"),
]
ADDED_FORTUNE = (0, "Additional fortune added at request time.")
# Equivalent spellings of the two escapes that have more than one common form; the page is
# compared byte for byte after bringing these to one spelling.
ENTITY_SPELLINGS = [
    (b"&#x27;", b"&#39;"),
    (b"&#X27;", b"&#39;"),
    (b"&#039;", b"&#39;"),
    (b"&apos;", b"&#39;"),
    (b"&#34;", b"&quot;"),
    (b"&#034;", b"&quot;"),
    (b"&#x22;", b"&quot;"),
    (b"&#X22;", b"&quot;"),
]


def escape_html(text):
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


def expected_fortune_page():
    rows = sorted(FORTUNES + [ADDED_FORTUNE], key=lambda row: row[1].encode("utf-8"))
    parts = [
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
        "<tr><th>id</th><th>message</th></tr>"
    ]
    for fortune_id, message in rows:
        parts.append("<tr><td>%d</td><td>%s</td></tr>" % (fortune_id, escape_html(message)))
    parts.append("</table></body></html>")
    return "".join(parts).encode("utf-8")


def normalize_entities(page):
    for spelling, canonical in ENTITY_SPELLINGS:
        page = page.replace(spelling, canonical)
    return page


# ---------------------------------------------------------------------------------------------
# Reporting


class Report:
    def __init__(self):
        self.results = {}  # test name -> list of (level, check, detail)
        self.current = None

    def start(self, test, url):
        self.current = test
        self.results.setdefault(test, [])
        print("\n== %s (%s)" % (test, url), flush=True)

    def add(self, level, check, detail=""):
        self.results[self.current].append((level, check, detail))
        print("  %s  %s%s" % (level, check, (": " + detail) if detail else ""), flush=True)

    def level_of(self, test):
        levels = [level for level, _, _ in self.results[test]]
        if FAIL in levels:
            return FAIL
        if WARN in levels:
            return WARN
        return PASS

    def summary(self):
        print("\nSummary")
        for test, results in self.results.items():
            fails = sum(1 for level, _, _ in results if level == FAIL)
            warns = sum(1 for level, _, _ in results if level == WARN)
            print(
                "  %-13s %s  (%d checks, %d FAIL, %d WARN)"
                % (test, self.level_of(test), len(results), fails, warns)
            )

    def worst(self):
        levels = {self.level_of(test) for test in self.results}
        for level in (FAIL, WARN):
            if level in levels:
                return level
        return PASS


# ---------------------------------------------------------------------------------------------
# HTTP over plain sockets, so that the exact bytes, pipelining and closing can be observed.


def build_request(path, host_header, accept, version="HTTP/1.1", connection="keep-alive"):
    lines = [
        "GET %s %s" % (path, version),
        "Host: %s" % host_header,
        "User-Agent: gnosis-verify",
        "Accept: %s" % accept,
    ]
    if connection:
        lines.append("Connection: %s" % connection)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Server:
    def __init__(self, url):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            die("verify: --url must look like http://127.0.0.1:8080")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.host_header = "%s:%d" % (self.host, self.port)

    def get(self, path, kind):
        connection = Connection(self.host, self.port)
        try:
            connection.send(build_request(path, self.host_header, ACCEPT[kind]))
            return connection.read_response()
        finally:
            connection.close()

    def connect(self):
        return Connection(self.host, self.port)

    def request(self, path, kind, **options):
        return build_request(path, self.host_header, ACCEPT[kind], **options)


async def _one_request(server, request):
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        match = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
        if not match:
            return status, "no Content-Length"
        await reader.readexactly(int(match.group(1)))
        return status, None
    finally:
        writer.close()


async def _burst(server, path, kind, concurrency):
    request = server.request(path, kind)
    tasks = [_one_request(server, request) for _ in range(concurrency)]
    return await asyncio.wait_for(
        asyncio.gather(*tasks, return_exceptions=True), timeout=LOAD_TIMEOUT
    )


def burst(server, path, kind, concurrency=CONCURRENCY):
    """Sends `concurrency` requests at once, one per connection (like siege -c 512 -r 1).
    Returns the number of failed transactions and one example of a failure."""
    try:
        outcomes = asyncio.run(_burst(server, path, kind, concurrency))
    except asyncio.TimeoutError:
        return concurrency, "no answer to all requests within %ds" % LOAD_TIMEOUT
    failures = 0
    example = None
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            failures += 1
            example = example or "%s: %s" % (type(outcome).__name__, outcome)
        else:
            status, problem = outcome
            if status != 200 or problem:
                failures += 1
                example = example or "status %d %s" % (status, problem or "")
    return failures, example


# ---------------------------------------------------------------------------------------------
# The database, through psql and the PG* environment


class Database:
    DEFAULTS = {
        "PGHOST": "tfb-database",
        "PGPORT": "5432",
        "PGUSER": "benchmarkdbuser",
        "PGPASSWORD": "benchmarkdbpass",
        "PGDATABASE": "hello_world",
    }

    def __init__(self):
        self.env = dict(os.environ)
        for name, value in self.DEFAULTS.items():
            self.env.setdefault(name, value)
        self.psql = find_or_install_psql()

    def describe(self):
        env = self.env
        return "%s@%s:%s/%s" % (env["PGUSER"], env["PGHOST"], env["PGPORT"], env["PGDATABASE"])

    def query(self, sql):
        completed = subprocess.run(
            [self.psql, "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if completed.returncode != 0:
            raise RuntimeError("psql: %s" % completed.stderr.strip()[:300])
        return [line.split("\t") for line in completed.stdout.splitlines() if line]

    def world_tables(self, names=('"World"', '"world"')):
        """The whole table, as TFB's get_current_world_table reads it for the update check
        (toolset/databases/postgres/postgres.py): the quoted "World" first, then world, each
        as {id: randomnumber}. Like TFB, a failure to read either gives no tables at all."""
        try:
            return [
                {int(row[0]): int(row[1]) for row in self.query("SELECT * FROM %s" % name)}
                for name in names
            ]
        except RuntimeError as error:
            print("verify: unable to load the World tables: %s" % error, flush=True)
            return []

    def world_rows(self, ids):
        if not ids:
            return {}
        id_list = ",".join(str(int(i)) for i in set(ids))
        rows = self.query("SELECT id, randomnumber FROM world WHERE id IN (%s)" % id_list)
        return {int(i): int(n) for i, n in rows}

    def statement_totals(self, table):
        """(queries, rows read, rows updated) of `table` so far, counted exactly as TFB's
        get_queries, get_rows and get_rows_updated do (toolset/databases/postgres/postgres.py):
        every pg_stat_statements row whose text names the table as a whole word, case
        insensitive; its calls are queries; its rows are rows read if the text contains
        'select' anywhere, rows updated if it contains 'update' (so an UPDATE whose text has a
        SELECT in it counts its rows twice). No filter on database or user, as in TFB; the
        verifier's own statements name no table once pg_stat_statements has replaced their
        constants with $n."""
        word = "[[:<:]]%s[[:>:]]" % table
        sql = (
            "SELECT coalesce(sum(calls), 0),"
            " coalesce(sum(rows) FILTER (WHERE query ~* 'select'), 0),"
            " coalesce(sum(rows) FILTER (WHERE query ~* 'update'), 0)"
            " FROM pg_stat_statements WHERE query ~* '%s'" % word
        )
        return tuple(int(value) for value in self.query(sql)[0])

    def check_statistics_available(self):
        rows = self.query("SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'")
        if rows[0][0] != "1":
            raise RuntimeError(
                "the pg_stat_statements extension is not installed in %s" % self.describe()
            )
        self.query("SELECT count(*) FROM pg_stat_statements")


def find_or_install_psql():
    path = shutil.which("psql")
    if path:
        return path
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("verify: psql not found, installing postgresql-client (apt-get)", flush=True)
        quiet = {"stdout": subprocess.DEVNULL}
        subprocess.run(["apt-get", "update"], check=False, **quiet)
        subprocess.run(
            ["apt-get", "install", "-y", "postgresql-client"],
            check=False,
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
            **quiet,
        )
        path = shutil.which("psql")
        if path:
            return path
    raise RuntimeError("psql is needed for the database checks: apt-get install postgresql-client")


# ---------------------------------------------------------------------------------------------
# Checks shared by the tests


def check_headers(report, response, kind, label):
    """Server, Date, Content-Type and length headers of one response."""
    problems = []
    level = PASS
    for name in ("Server", "Date", "Content-Type"):
        if response.header(name) is None:
            problems.append("missing %s" % name)
            level = FAIL
    transfer_encoding = response.header("transfer-encoding")
    length = response.header("content-length")
    if length is None and transfer_encoding is None:
        problems.append("neither Content-Length nor Transfer-Encoding")
        level = FAIL
    if length is not None and int(length) != len(response.body):
        problems.append("Content-Length %s but %d body bytes" % (length, len(response.body)))
        level = FAIL
    if response.header("content-encoding"):
        problems.append("Content-Encoding %s (no compression allowed)" % response.header(
            "content-encoding"))
        level = FAIL
    date = response.header("date")
    if date is not None:
        if not IMF_FIXDATE.match(date):
            problems.append("Date %r is not an IMF-fixdate" % date)
            level = FAIL
        else:
            skew = abs(parsedate_to_datetime(date).timestamp() - time.time())
            if skew > 5:
                problems.append("Date %r is %.0f s away from this machine's clock" % (date, skew))
                level = level if level == FAIL else WARN
    content_type = response.header("content-type")
    if content_type is not None and content_type != CONTENT_TYPES[kind]:
        if re.match(CONTENT_TYPES_TOLERATED[kind], content_type):
            problems.append(
                "Content-Type %r: TFB accepts it, the spec asks for %r"
                % (content_type, CONTENT_TYPES[kind])
            )
            level = level if level == FAIL else WARN
        else:
            problems.append("Content-Type %r, expected %r" % (content_type, CONTENT_TYPES[kind]))
            level = FAIL
    if problems:
        report.add(level, "headers " + label, "; ".join(problems))
    else:
        report.add(
            PASS,
            "headers " + label,
            "Server %r, Date %r, Content-Type %r, Content-Length %s"
            % (response.header("server"), date, content_type, length),
        )


def fetch(report, server, path, kind, label=None):
    """GET path; reports a FAIL and returns None when there is no usable 200 answer."""
    label = label or path
    try:
        response = server.get(path, kind)
    except (OSError, ProtocolError) as error:
        report.add(FAIL, "request " + label, "%s: %s" % (type(error).__name__, error))
        return None
    if response.status != 200:
        report.add(FAIL, "status " + label, "got %d, expected 200" % response.status)
        return None
    return response


def check_date_refresh(report, server, path, kind, first, first_time):
    """TFB's cached-Date check: a second fetch 3 s after the first must carry another Date."""
    time.sleep(max(0.0, DATE_GAP - (time.monotonic() - first_time)))
    try:
        second = server.get(path, kind)
    except (OSError, ProtocolError) as error:
        report.add(FAIL, "Date refresh", "second request failed: %s" % error)
        return
    before, after = first.header("date"), second.header("date")
    if before is None or after is None or before == after:
        report.add(FAIL, "Date refresh", "same Date %r on requests %.0f s apart" % (
            before, DATE_GAP))
    else:
        report.add(PASS, "Date refresh", "%r then %r" % (before, after))


def parse_json(report, response, label):
    try:
        return json.loads(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        report.add(FAIL, "body " + label, "not JSON: %s (%r)" % (error, response.body[:80]))
        return None


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def world_object_problems(item):
    """(level, text) problems of one {"id", "randomNumber"} object, [] if it is right."""
    if not isinstance(item, dict):
        return [(FAIL, "expected an object, got %r" % (item,))]
    problems = []
    keys = set(item)
    if keys != {"id", "randomNumber"}:
        lowered = {key.lower() for key in keys}
        if not {"id", "randomnumber"} <= lowered:
            return [(FAIL, "keys %s, expected id and randomNumber" % sorted(keys))]
        if "id" not in keys or "randomNumber" not in keys:
            problems.append((WARN, "keys %s differ in case from id, randomNumber" % sorted(keys)))
        if len(keys) > 2:
            problems.append((WARN, "extra keys %s" % sorted(keys - {"id", "randomNumber"})))
    values = {key.lower(): value for key, value in item.items()}
    world_id, number = values["id"], values["randomnumber"]
    if not is_int(world_id) or not 1 <= world_id <= WORLD_ROWS:
        problems.append((FAIL, "id %r is not an integer in 1..%d" % (world_id, WORLD_ROWS)))
    if not is_int(number) or not 1 <= number <= MAX_RANDOM:
        problems.append(
            (FAIL, "randomNumber %r is not an integer in 1..%d" % (number, MAX_RANDOM))
        )
    return problems


def world_pairs(items):
    """(id, randomNumber) of each World object; key case was already judged."""
    pairs = []
    for item in items:
        values = {key.lower(): value for key, value in item.items()}
        pairs.append((values["id"], values["randomnumber"]))
    return pairs


def check_world_list(report, body, expected_length, label):
    """An array of `expected_length` World objects; returns it, or None after a FAIL."""
    if not isinstance(body, list):
        report.add(FAIL, "body " + label, "top-level JSON is %s, not an array" % type(
            body).__name__)
        return None
    problems = []
    if len(body) != expected_length:
        problems.append((FAIL, "array length %d, expected %d" % (len(body), expected_length)))
    for index, item in enumerate(body):
        for level, text in world_object_problems(item):
            problems.append((level, "item %d: %s" % (index, text)))
    report_problems(report, "body " + label, problems, "%d World objects" % len(body))
    return None if any(level == FAIL for level, _ in problems) else body


def report_problems(report, check, problems, success_detail):
    if not problems:
        report.add(PASS, check, success_detail)
        return
    level = FAIL if any(level == FAIL for level, _ in problems) else WARN
    shown = "; ".join(text for _, text in problems[:5])
    if len(problems) > 5:
        shown += "; and %d more" % (len(problems) - 5)
    report.add(level, check, shown)


def check_matches_database(report, database, pairs, label, allowed=None):
    """The rows answered are the rows in the table: catches invented or stale data.
    `allowed` maps id -> set of acceptable values (duplicates in one update request)."""
    rows = database.world_rows([world_id for world_id, _ in pairs])
    wrong = []
    for world_id, number in pairs:
        acceptable = allowed[world_id] if allowed else {number}
        if rows.get(world_id) not in acceptable:
            wrong.append("id %s answered %s, table has %s" % (world_id, number, rows.get(world_id)))
    if wrong:
        report.add(FAIL, "rows match the table " + label, "; ".join(wrong[:5]))
    else:
        report.add(PASS, "rows match the table " + label, "%d rows" % len(pairs))


# The statement counts and the update check, as TFB's toolset/test_types/verifications.py
# judges them (verify_queries_count, display_queries_count_result, verify_updates), with the
# Postgres margin of toolset/databases/postgres/postgres.py.
ROWS_MARGIN = 1.011  # TFB divides the rows it shows by this; the verdict uses the raw count
BULK_MARGIN = 1.05  # rows updated are multiplied by this when bulk UPDATEs are detected
# TFB multiplies the queries by 1.015 on a machine of 2 cores or fewer (its CI) and by 1 on
# its benchmark machines, which also fail any failed transaction; this verifier predicts the
# benchmark machines' verdict, so: 1 (and failed requests always fail, see measure_burst).
QUERIES_MARGIN = 1


def count_result(result, expected, shown, caption):
    """TFB's display_queries_count_result: more than 5% above expected warns, fewer fails."""
    if result > expected * 1.05:
        return WARN, "%s %s in the database instead of %s expected. This number is excessively " \
            "high." % (shown, caption, expected)
    if result < expected:
        return FAIL, "Only %s %s in the database out of roughly %s expected." % (
            shown, caption, expected)
    return PASS, "%s: %s/%s" % (caption.capitalize(), shown, expected)


def count_results(measured, expected_queries, expected_rows, check_updates=False,
                  concurrency=CONCURRENCY, repetitions=1):
    """TFB's verify_queries_count on measured = (queries, rows read, rows updated).
    For updates, expected_queries includes one bulk UPDATE per request; when the queries are
    not within 0.1% of that, single-row UPDATEs are assumed and twice the SELECTs expected.
    Returns [(level, check, detail)]."""
    queries, rows, rows_updated = measured
    is_bulk = check_updates and 0.999 * expected_queries < queries < 1.001 * expected_queries
    if check_updates and not is_bulk:
        expected_queries = (expected_queries - repetitions * concurrency) * 2
    results = [("executed queries",) + count_result(
        queries * QUERIES_MARGIN, expected_queries, queries, "executed queries")]
    results.append(("rows read",) + count_result(
        rows, expected_rows, int(rows / ROWS_MARGIN), "rows read"))
    if check_updates:
        margin = BULK_MARGIN if is_bulk else 1
        results.append(("rows updated",) + count_result(
            rows_updated * margin, expected_rows, int(rows_updated / ROWS_MARGIN),
            "rows updated"))
    return [(level, check, detail) for check, level, detail in results]


def update_result(before, after, expected):
    """TFB's verify_updates: `before` and `after` are world_tables() snapshots ("World", then
    world); the changed rows of the first table with any change are counted."""
    changed = 0
    for old, new in zip(before, after):
        if changed:
            break
        changed = sum(1 for i in range(1, WORLD_ROWS + 1)
                      if i in old and i in new and old[i] != new[i])
    if changed == 0:
        return FAIL, "No items were updated in the database."
    if changed <= expected * 0.90:
        return FAIL, "Only %s items were updated in the database out of roughly %s expected." % (
            changed, expected)
    if changed <= expected * 0.95:
        return WARN, "There may have been an error updating the database. Only %s items were " \
            "updated in the database out of the roughly %s expected." % (changed, expected)
    return PASS, "%s items updated in the database (%s expected)" % (changed, expected)


def measure_burst(report, server, database, path, kind, table):
    """(queries, rows read, rows updated) on `table` during 512 concurrent requests of `path`
    (TFB: siege -c 512 -r 1). Any failed request fails."""
    before = database.statement_totals(table)
    started = time.monotonic()
    failures, example = burst(server, path, kind)
    elapsed = time.monotonic() - started
    time.sleep(STATS_SETTLE)
    after = database.statement_totals(table)
    if failures:
        report.add(FAIL, "%d concurrent %s" % (CONCURRENCY, path),
                   "%d failed transactions (e.g. %s)" % (failures, example))
    else:
        report.add(PASS, "%d concurrent %s" % (CONCURRENCY, path), "all 200 in %.1f s" % elapsed)
    return tuple(a - b for a, b in zip(after, before))


def check_counts(report, server, database, path, kind, table, expected_queries, expected_rows,
                 check_updates=False):
    measured = measure_burst(report, server, database, path, kind, table)
    counted = dict(zip(("executed queries", "rows read", "rows updated"), measured))
    for level, check, detail in count_results(measured, expected_queries, expected_rows,
                                              check_updates):
        if check != "executed queries":  # TFB's message shows rows divided by ROWS_MARGIN
            detail += " [%d counted]" % counted[check]
        report.add(level, check, detail)


def check_one_answer(report, server, path, kind, on_answer):
    """Fetches path once, checks the answer's headers, hands it to on_answer(response), then
    checks that Date changes. False when there was no usable answer (nothing else is checked)."""
    started = time.monotonic()
    response = fetch(report, server, path, kind)
    if response is None:
        return False
    check_headers(report, response, kind, path)
    on_answer(response)
    check_date_refresh(report, server, path, kind, response, started)
    return True


# ---------------------------------------------------------------------------------------------
# The tests


def test_json(report, server, path, _database):
    def on_answer(response):
        body = parse_json(report, response, path)
        if body is None:
            return
        if not isinstance(body, dict) or "message" not in body:
            report.add(FAIL, "body", "expected an object with key message, got %r" % (body,))
        elif body["message"] != "Hello, World!":
            level = WARN if str(body["message"]).lower() == "hello, world!" else FAIL
            report.add(level, "body", "message %r, expected 'Hello, World!'" % body["message"])
        else:
            problems = []
            if len(body) > 1:
                problems.append((WARN, "extra keys %s" % sorted(set(body) - {"message"})))
            if len(response.body) > 27:
                problems.append((WARN, "%d bytes, 27 needed" % len(response.body)))
            report_problems(report, "body", problems, response.body.decode())
    check_one_answer(report, server, path, "json", on_answer)


def test_plaintext(report, server, path, _database):
    def on_answer(response):
        if response.body == b"Hello, World!":
            report.add(PASS, "body", "'Hello, World!'")
        elif b"hello, world!" in response.body.lower():
            report.add(WARN, "body", "%r: more bytes than 'Hello, World!'" % response.body[:60])
        else:
            report.add(FAIL, "body", "%r, expected 'Hello, World!'" % response.body[:60])
        # Before the Date check, which waits out the rest of its 3 s anyway.
        check_pipelined_plaintext(report, server, path)
    check_one_answer(report, server, path, "plaintext", on_answer)


def check_pipelined_plaintext(report, server, path, depth=16):
    """The benchmark's load: 16 requests in one write, 16 answers back."""
    try:
        connection = server.connect()
        try:
            connection.send(server.request(path, "plaintext") * depth)
            responses = [connection.read_response() for _ in range(depth)]
        finally:
            connection.close()
    except (OSError, ProtocolError) as error:
        report.add(FAIL, "pipelined x%d" % depth, "%s: %s" % (type(error).__name__, error))
        return
    wrong = [i for i, r in enumerate(responses) if r.status != 200 or r.body != b"Hello, World!"]
    if wrong:
        report.add(FAIL, "pipelined x%d" % depth, "answers %s are not 200 'Hello, World!'" % wrong)
    else:
        report.add(PASS, "pipelined x%d" % depth, "%d answers in one connection" % depth)


def test_db(report, server, path, database):
    def on_answer(response):
        body = parse_json(report, response, path)
        if body is None:
            return
        if isinstance(body, list):
            report.add(WARN, "body", "a JSON array; a single object is expected")
            body = body[0] if body else None
        problems = world_object_problems(body)
        report_problems(report, "body", problems, response.body.decode())
        if not problems:
            check_matches_database(report, database, world_pairs([body]), path)
    if check_one_answer(report, server, path, "json", on_answer):
        # TFB's db test counts on "World"; the match is case-insensitive.
        check_counts(report, server, database, path, "json", "World", CONCURRENCY, CONCURRENCY)


def expected_length(case):
    try:
        number = int(case)
    except ValueError:
        return 1
    return min(max(number, 1), MAX_QUERIES)


QUERY_CASES = ["2", "0", "foo", "501", ""]


def each_query_case(report, server, path, on_answer):
    """Fetches the five N cases, checks each answer's headers and list of worlds, and hands
    the valid ones to on_answer(case, url, items); then checks that Date changes."""
    started = time.monotonic()
    first = None
    for case in QUERY_CASES:
        url = path + case
        response = fetch(report, server, url, "json")
        if response is None:
            continue
        first = first or response
        check_headers(report, response, "json", url)
        body = parse_json(report, response, url)
        if body is None:
            continue
        items = check_world_list(report, body, expected_length(case), url)
        if items is not None:
            on_answer(case, url, items)
    if first is not None:
        check_date_refresh(report, server, path + "2", "json", first, started)


def check_query_cases(report, server, path, database, check_rows):
    """The five N cases of /queries and /cached-queries."""
    def on_answer(case, url, items):
        if case == "2" and check_rows:
            check_matches_database(report, database, world_pairs(items), url)
        if case == "501":
            distinct = len({world_id for world_id, _ in world_pairs(items)})
            # 500 uniform draws from 10,000 give about 488 distinct ids.
            level = PASS if distinct >= 450 else WARN
            report.add(level, "ids look random " + url, "%d distinct ids of 500" % distinct)
    each_query_case(report, server, path, on_answer)


def test_query(report, server, path, database):
    check_query_cases(report, server, path, database, check_rows=True)
    expected = CONCURRENCY * QUERIES_FOR_COUNT
    check_counts(report, server, database, path + str(QUERIES_FOR_COUNT), "json", "world",
                 expected, expected)


def test_update(report, server, path, database):
    check_query_cases_for_update(report, server, path, database)
    expected = CONCURRENCY * QUERIES_FOR_COUNT
    # As TFB: the SELECTs plus one bulk UPDATE per request (or twice the SELECTs, see
    # count_results).
    check_counts(report, server, database, path + str(QUERIES_FOR_COUNT), "json", "world",
                 expected + CONCURRENCY, expected, check_updates=True)


def check_query_cases_for_update(report, server, path, database):
    """The N cases, plus TFB's proof that the updates change rows: both World tables read
    before the cases and again after /updates?queries=501, at least 95% of 500 rows changed."""
    before = database.world_tables()

    def on_answer(case, url, items):
        if case in ("2", "501"):
            answered = {}
            for world_id, number in world_pairs(items):
                answered.setdefault(world_id, set()).add(number)
            check_matches_database(report, database, world_pairs(items), url, allowed=answered)
        if case == "501":
            level, detail = update_result(before, database.world_tables(), MAX_QUERIES)
            report.add(level, "rows changed by " + url, detail)

    each_query_case(report, server, path, on_answer)


def test_fortune(report, server, path, database):
    def on_answer(response):
        expected = expected_fortune_page()
        got = normalize_entities(response.body)
        if got == expected:
            report.add(PASS, "page", "byte-exact, %d bytes" % len(response.body))
        else:
            at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                      min(len(got), len(expected)))
            report.add(FAIL, "page", "differs at byte %d: got %r, expected %r" % (
                at, got[max(0, at - 30):at + 50], expected[max(0, at - 30):at + 50]))
    if check_one_answer(report, server, path, "html", on_answer):
        check_counts(report, server, database, path, "html", "fortune", CONCURRENCY,
                     CONCURRENCY * len(FORTUNES))


def test_cached_query(report, server, path, database):
    check_query_cases(report, server, path, database, check_rows=False)
    url = path + str(QUERIES_FOR_COUNT)
    statements, _, _ = measure_burst(report, server, database, url, "json", "world")
    # Not a TFB check (its cached-query test counts nothing). Loading the cache (at start or
    # lazily per thread) may run a few statements; answering from the database would run 20
    # per request.
    level = PASS if statements < CONCURRENCY else FAIL
    report.add(level, "no database reads per request",
               "%d statements on world during %d requests" % (statements, CONCURRENCY))


TEST_FUNCTIONS = {
    "json": test_json,
    "plaintext": test_plaintext,
    "db": test_db,
    "query": test_query,
    "fortune": test_fortune,
    "update": test_update,
    "cached-query": test_cached_query,
}
KIND_OF_TEST = {
    "json": "json",
    "plaintext": "plaintext",
    "db": "json",
    "query": "json",
    "fortune": "html",
    "update": "json",
    "cached-query": "json",
}


# ---------------------------------------------------------------------------------------------
# Checks that hold for every test: 404, Connection: close, HTTP/1.0, ordered pipelining


def test_general(report, server, urls):
    kind_path = [(KIND_OF_TEST[test], path + ("2" if path.endswith("=") else ""))
                 for test, path in urls.items()]
    check_not_found(report, server)
    kind, path = kind_path[0]
    check_closes(report, server, path, kind, "HTTP/1.1", "close", "Connection: close")
    check_closes(report, server, path, kind, "HTTP/1.0", None, "HTTP/1.0")
    check_ordered_pipeline(report, server, kind_path)


def check_not_found(report, server):
    path = "/gnosis-verify-no-such-path"
    try:
        response = server.get(path, "plaintext")
    except (OSError, ProtocolError) as error:
        report.add(FAIL, "404 on unknown path", "%s: %s" % (type(error).__name__, error))
        return
    missing = [name for name in ("Server", "Date", "Content-Type") if response.header(name) is None]
    if response.header("content-length") is None and response.header("transfer-encoding") is None:
        missing.append("Content-Length")
    if response.status != 404:
        report.add(FAIL, "404 on unknown path", "status %d" % response.status)
    elif missing:
        report.add(FAIL, "404 on unknown path", "404 without %s" % ", ".join(missing))
    else:
        report.add(PASS, "404 on unknown path", "404 with Server, Date, Content-Type, length")


def check_closes(report, server, path, kind, version, connection_header, label):
    try:
        connection = server.connect()
        try:
            connection.send(server.request(path, kind, version=version,
                                           connection=connection_header))
            response = connection.read_response()
            closed = connection.closed_by_peer(wait=3.0)
        finally:
            connection.close()
    except (OSError, ProtocolError) as error:
        report.add(FAIL, label, "%s: %s" % (type(error).__name__, error))
        return
    if response.status != 200:
        report.add(FAIL, label, "status %d" % response.status)
    elif not closed:
        report.add(FAIL, label, "answered but left the connection open")
    else:
        report.add(PASS, label, "answered %s %d, then closed" % (response.version, response.status))


def response_signature(response):
    """What tells the answers of different URLs apart: the JSON shape, else the length."""
    shape = len(response.body)
    if (response.header("content-type") or "").startswith("application/json"):
        try:
            body = json.loads(response.body)
            first = body[0] if isinstance(body, list) and body else body
            keys = sorted(first) if isinstance(first, dict) else None
            shape = (type(body).__name__, len(body) if isinstance(body, list) else 0, keys)
        except ValueError:
            shape = "invalid JSON"
    return (response.status, response.header("content-type"), shape)


def check_ordered_pipeline(report, server, kind_path):
    """16 requests of different kinds in one write; each answer must match its request."""
    sequence = [kind_path[i % len(kind_path)] for i in range(16)]
    sequence[5] = ("plaintext", "/gnosis-verify-no-such-path")
    try:
        expected = []
        for kind, path in sequence:
            expected.append(response_signature(server.get(path, kind)))
        connection = server.connect()
        try:
            connection.send(b"".join(server.request(path, kind) for kind, path in sequence))
            got = [response_signature(connection.read_response()) for _ in sequence]
        finally:
            connection.close()
    except (OSError, ProtocolError) as error:
        report.add(FAIL, "mixed pipeline in order", "%s: %s" % (type(error).__name__, error))
        return
    wrong = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    paths = sorted({path for _, path in sequence})
    if wrong:
        report.add(FAIL, "mixed pipeline in order",
                   "answers %s do not match their requests (%s)" % (wrong, ", ".join(paths)))
    else:
        report.add(PASS, "mixed pipeline in order",
                   "16 answers in request order over %s" % ", ".join(paths))


# ---------------------------------------------------------------------------------------------


def die(message):
    """Cannot run at all: exit 2, distinct from a check's FAIL."""
    print(message, file=sys.stderr)
    sys.exit(2)


def load_entry(config_path, entry):
    with open(config_path, encoding="utf-8") as config_file:
        config = json.load(config_file)
    tests = {}
    for group in config["tests"]:
        tests.update(group)
    if entry not in tests:
        die("verify: no test %r in %s (has %s)" % (entry, config_path, sorted(tests)))
    settings = tests[entry]
    return {test: settings[key] for test, key in TEST_URL_KEYS.items() if key in settings}


def parse_tests(text, available):
    chosen = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        name = ALIASES.get(name, name)
        if name not in TEST_URL_KEYS:
            die("verify: unknown test %r (known: %s)" % (name, ", ".join(
                TEST_URL_KEYS)))
        if name not in available:
            die("verify: the entry has no %s URL" % name)
        chosen.append(name)
    return chosen


def wait_for_server(server, seconds):
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((server.host, server.port), timeout=1).close()
            return
        except OSError as error:
            if time.monotonic() >= deadline:
                die("verify: nothing answers on %s:%d (%s)" % (
                    server.host, server.port, error))
            time.sleep(0.2)


def add_arguments(parser):
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--port", type=int,
                        help="the server's port on 127.0.0.1 (instead of --url)")
    parser.add_argument("--server-pid", type=int,
                        help="the server's process: it must be the one listening on the port")
    parser.add_argument("--config", default=os.path.join(ROOT, "benchmark_config.json"))
    parser.add_argument("--entry", default="default",
                        help="the benchmark_config.json test whose URLs and tests to check")
    parser.add_argument("--tests", help="comma-separated subset, e.g. json,plaintext")
    parser.add_argument("--wait", type=float, default=0,
                        help="seconds to wait for the server to accept connections")
    parser.add_argument("--strict", action="store_true", help="exit non-zero on WARN too")


def run(args):

    urls = load_entry(args.config, args.entry)
    tests = parse_tests(args.tests, urls) if args.tests else list(urls)
    urls = {test: urls[test] for test in TEST_URL_KEYS if test in tests}
    url = "http://127.0.0.1:%d" % args.port if args.port else args.url
    server = Server(url)
    wait_for_server(server, args.wait)
    if args.server_pid:
        elsewhere = served_by_alone(server.port, args.server_pid)
        if elsewhere:
            die("verify: " + elsewhere)
    print("verify: %s, entry %r, tests %s" % (url, args.entry, ", ".join(urls)))

    database = None
    report = Report()
    if DB_TESTS & set(urls):
        report.start("database", "pg_stat_statements")
        try:
            database = Database()
            database.check_statistics_available()
            report.add(PASS, "database reachable", database.describe())
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            report.add(FAIL, "database reachable", "%s" % error)

    report.start("general", ", ".join(urls.values()))
    test_general(report, server, urls)
    for test, path in urls.items():
        report.start(test, path)
        if test in DB_TESTS and database is None:
            report.add(FAIL, "database checks", "no database to check against")
            continue
        try:
            TEST_FUNCTIONS[test](report, server, path, database)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            report.add(FAIL, "database", str(error))

    report.summary()
    worst = report.worst()
    print("\nverify: %s" % worst)
    return 1 if worst == FAIL or (worst == WARN and args.strict) else 0
