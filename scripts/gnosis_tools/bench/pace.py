"""h2load paced over HTTP/1.1: HttpArena's fixed-rate profiles (latency-1m, latency-10k, 8gbit),
where a server is judged on CPU per request and latency at an offered rate, not on how many
requests it can take. wrk keeps every connection busy, so it cannot offer a rate; Debian's h2load
(nghttp2-client) can (`--rps`, per connection), over cleartext or TLS, and logs every request's
latency (`--log-file`), from which the percentiles are taken here."""

import tempfile

from .load import run_load

WARM_UP_S = 1
REQUEST_LINE = "requests:"
STATUS_LINE = "status codes:"


def offered_rate(rate, connections):
    """What h2load offers for `rate` over `connections`: a whole number of requests/s each."""
    return max(1, round(rate / connections)) * connections


def h2load_command(url, connections, threads, duration, rate, body_file=None, content_type=None, log_file=None):
    """About `rate` requests/s in all (offered_rate) over `connections` HTTP/1.1 connections
    (one request in flight each), for `duration` seconds; with `body_file`, each request a POST
    of that file."""
    command = [
        "h2load", "--h1",
        "-c", str(connections), "-t", str(threads),
        "--rps", str(offered_rate(rate, connections) // connections),
        "-D", str(duration),
        # Every connection is made (a TLS handshake each) before the measured window opens: h2load
        # does not finish when its window closes while clients are still connecting.
        "--warm-up-time", str(WARM_UP_S),
    ]  # fmt: skip
    if body_file:
        command += ["-d", str(body_file), "-H", f"content-type: {content_type}"]
    if log_file:
        command += ["--log-file", str(log_file)]
    return command + [url]


def parse_h2load_output(stdout, log_lines, duration):
    """The summary of one run as load.parse_wrk_output gives it: requests, requests/s, latency
    percentiles (from the per-request log), errors and non-2xx answers."""
    counts = {}
    for line in stdout.splitlines():
        if line.startswith(REQUEST_LINE) or line.startswith(STATUS_LINE):
            for part in line.split(":", 1)[1].split(","):
                number, _, name = part.strip().partition(" ")
                counts[name] = int(number)
    if "succeeded" not in counts:
        raise ValueError("h2load printed no request counts")
    latencies = sorted(int(fields[2]) for fields in (line.split("\t") for line in log_lines) if len(fields) == 3)
    done_2xx = counts.get("2xx", 0)
    return {
        "requests": done_2xx,
        "duration_us": duration * 1_000_000,
        "requests_per_s": done_2xx / duration,
        "latency_us": {**percentiles(latencies), "mean": round(sum(latencies) / len(latencies)) if latencies else None},
        "socket_errors": counts.get("failed", 0) + counts.get("errored", 0) + counts.get("timeout", 0),
        "non_2xx": counts.get("done", 0) - done_2xx,
        "closes": 0,
    }


def percentiles(sorted_values):
    keys = {"p50": 0.50, "p75": 0.75, "p90": 0.90, "p99": 0.99}
    if not sorted_values:
        return dict.fromkeys(keys)
    return {k: sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] for k, q in keys.items()}


def run_h2load(server, url, connections, threads, duration, rate, body_file=None, content_type=None):
    """One paced run against `server`, measured as load.run_load measures any load. Requests
    are counted in the measured window, the server's CPU over the whole run (the connections
    made and the warm-up's requests too): CPU per request reads a little high, alike for every
    server."""
    with tempfile.NamedTemporaryFile("r", prefix="h2load-", suffix=".log") as log:
        command = h2load_command(url, connections, threads, duration, rate, body_file, content_type, log.name)

        def parse(stdout):
            summary = parse_h2load_output(stdout, log.readlines(), duration)
            summary["offered_per_s"] = offered_rate(rate, connections)
            return summary

        return run_load(server, command, connections, threads, duration, parse)
