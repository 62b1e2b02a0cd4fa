"""A test's record in numbers: per server and level the medians over the rounds, the ratios
between servers, the totals, and what makes a run's numbers invalid or no bar."""

import statistics

from .anchors import ANCHORS
from .catalog import TESTS
from .httparena import KEPT_OPEN_NOTE
from .h2o import STATIC_NOTE
from .nginx import FIXED_ANSWER_NOTES

BARS = ("nginx", "h2o")  # the servers configured here (nginx.py, h2o.py)


def summarize(record):
    """Per server and level: medians over the rounds, error totals, CPU and memory."""
    rows = {}
    for name in record["servers"]:
        for level in record["levels"]:
            runs = level_runs(record, name, level)
            if not runs:
                continue
            rps = [rate(r) for r in runs]
            per_cpu = [rate_per_cpu(r) for r in runs if rate_per_cpu(r)]
            cpu_per_1k = [1000 * r["server_cpu_s"] / r["summary"]["requests"] for r in runs if r["summary"]["requests"]]
            postgres_per_1k = [1000 * r["postgres_cpu_s"] / r["summary"]["requests"] for r in runs
                               if r["summary"]["requests"] and "postgres_cpu_s" in r]  # fmt: skip
            rows[(name, level)] = {
                "runs": len(runs),
                "rps_median": statistics.median(rps),
                "rps_min": min(rps),
                "rps_max": max(rps),
                "rps_all": rps,
                "p50_us": median_known(r["summary"]["latency_us"]["p50"] for r in runs),
                "p99_us": median_known(r["summary"]["latency_us"]["p99"] for r in runs),
                # The paced tests': their mean latency and the share of the offered rate answered.
                "mean_us": median_known(r["summary"]["latency_us"].get("mean") for r in runs),
                "offered_share": median_known(offered_share(r) for r in runs),
                "socket_errors": sum(r["summary"]["socket_errors"] for r in runs),
                "non_2xx": sum(r["summary"]["non_2xx"] for r in runs),
                "cpu_percent": statistics.median(r["server_cpu_percent"] for r in runs),
                # Absent from records made before these were measured.
                "postgres_cpu_percent": median_known(r.get("postgres_cpu_percent") for r in runs),
                "wrk_cpu_percent": median_known(r.get("wrk_cpu_percent") for r in runs),
                "requests_per_cpu_s": statistics.median(per_cpu) if per_cpu else None,
                "cpu_s_per_1k_requests": statistics.median(cpu_per_1k) if cpu_per_1k else None,
                "postgres_cpu_s_per_1k_requests": statistics.median(postgres_per_1k) if postgres_per_1k else None,
                "peak_rss_kib": max(r["server_peak_rss_kib"] for r in runs),
                "connections": runs[0]["connections"],
                "rss_per_connection_bytes": median_known(map(rss_per_connection_bytes, runs)),
                "requests_per_connection": median_known(map(requests_per_connection, runs)),
                "closed_on_request": median_known(map(closed_on_request, runs)),
            }
    return rows


def has_numbers(record):
    """Whether the test ran: some server serves it, and it did not fail."""
    return "failed" not in record and not record.get("not_served")


def level_runs(record, name, level):
    if name not in record["servers"]:
        return []  # the server does not serve this test
    return [r for r in record["servers"][name]["runs"] if r["phase"] == "level" and r["level"] == level]


def rate(run):
    return run["summary"]["requests_per_s"]


def rate_per_cpu(run):
    return run["requests_per_cpu_s"]


def run_has_errors(run):
    """Errors, error statuses, or no answer at all (e.g. wrk still connecting when it stopped)."""
    summary = run["summary"]
    return bool(summary["socket_errors"] or summary["non_2xx"] or not summary["requests"])


def ratios(record, candidate, baseline, metric):
    """Per level: the ratio of the two servers' medians of `metric`, and each round's own ratio.

    A level where either server had socket errors or error statuses gets `errors` set: its
    ratio compares a failing server and means nothing. A test that either server does not
    serve, or that failed, has no ratios at all.
    """
    out = {}
    if "failed" in record:
        return out
    for level in record["levels"]:
        mine_all, theirs_all = level_runs(record, candidate, level), level_runs(record, baseline, level)
        mine = [r for r in mine_all if metric(r)]
        theirs = [r for r in theirs_all if metric(r)]
        if not mine or not theirs:
            continue
        by_round = {r["round"]: metric(r) for r in theirs}
        paired = [metric(r) / by_round[r["round"]] for r in mine if r["round"] in by_round]
        out[level] = {
            "ratio": statistics.median(map(metric, mine)) / statistics.median(map(metric, theirs)),
            "paired": paired,
            "errors": any(map(run_has_errors, mine_all + theirs_all)),
        }
    return out


def offered_share(run):
    offered = run["summary"].get("offered_per_s")
    return run["summary"]["requests_per_s"] / offered if offered else None


def requests_per_connection(run):
    opened = run.get("connections_opened")
    return run["summary"]["requests"] / opened if opened else None


def closed_on_request(run):
    """The share of the run's `Connection: close` requests after which wrk had to connect again
    (connections opened beyond the first ones): about 1 for a server that closes, 0 for one
    that ignores them."""
    closes, opened = run["summary"].get("closes"), run.get("connections_opened")
    return max(0, opened - run["connections"]) / closes if closes and opened is not None else None


def rss_per_connection_bytes(run):
    """What the run's connections added to the server's memory, each: its peak RSS during the
    run less its RSS once started, over the connections (an upper bound: what earlier load left
    allocated counts too)."""
    start = run.get("server_rss_at_start_kib")
    if not start or not run["connections"]:
        return None
    return max(0, run["server_peak_rss_kib"] - start) * 1024 / run["connections"]


def median_known(values):
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def test_totals(data):
    """A server's CPU seconds and peak RSS over a whole test, primer and warm-up included."""
    runs = data["runs"]
    return {
        "cpu_s": round(sum(r["server_cpu_s"] for r in runs), 2),
        "peak_rss_kib": max((r["server_peak_rss_kib"] for r in runs), default=0),
        "socket_errors": sum(r["summary"]["socket_errors"] for r in runs),
        "non_2xx": sum(r["summary"]["non_2xx"] for r in runs),
        "unanswered_runs": sum(not r["summary"]["requests"] for r in runs),
    }


def collect_failures(records):
    failures = []
    for record in records:
        if "failed" in record:
            failures.append(f"{record['test']}: {record['failed']}")
            continue
        for name, data in record["servers"].items():
            t = test_totals(data)
            if t["socket_errors"] or t["non_2xx"] or t["unanswered_runs"]:
                failures.append(
                    f"{record['test']} / {name}: {t['socket_errors']} socket errors, "
                    f"{t['non_2xx']} non-2xx/3xx responses, {t['unanswered_runs']} runs without an answer"
                )
    return failures


def rule_breakers(record, meta):
    """The anchors of the run that serve this test against TFB's rules, each with why."""
    anchors = meta.get("anchors", {})
    breakers = []
    for name in record["servers"]:
        anchor = ANCHORS.get(anchors.get(name))
        reason = anchor and anchor.not_a_legal_bar.get(record["test"])
        if reason:
            breakers.append((name, reason))
        elif name in BARS and record["test"] in FIXED_ANSWER_NOTES:
            breakers.append((name, FIXED_ANSWER_NOTES[record["test"]]))
        elif name == "h2o" and record["test"] == "static-h2":
            breakers.append((name, STATIC_NOTE))
    close_every = TESTS[record["test"]].close_every
    if close_every and has_numbers(record):
        for (name, level), row in summarize(record).items():
            closed = row["closed_on_request"]
            if closed is not None and closed < 0.5 and name not in dict(breakers):
                breakers.append((name, KEPT_OPEN_NOTE.format(closed=closed, per_connection=row["requests_per_connection"],
                                                             close_every=close_every)))  # fmt: skip
    return breakers
