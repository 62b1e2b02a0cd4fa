"""h2load, three ways. Paced over HTTP/1.1: HttpArena's fixed-rate profiles (latency-1m, latency-10k,
8gbit), where a server is judged on CPU per request and latency at an offered rate, not on how many
requests it can take. wrk keeps every connection busy, so it cannot offer a rate; Debian's h2load
(nghttp2-client) can (`--rps`, per connection), over cleartext or TLS. Over HTTP/2 as fast as it
goes: HttpArena's H2 and gRPC profiles (`-m` streams per connection, h2c by prior knowledge or h2
over TLS by ALPN). Over HTTP/1.1 as fast as it goes on connections made before the measured window
(json-tls-kept): wrk opens its connections inside its window. And two at once over h2: HttpArena's
production-stack, its reads and its writes. Every way it logs every request's latency
(`--log-file`), from which the percentiles are taken here."""

import math
import tempfile

from .anchors import H2LOAD_H3
from .httparena import PRODUCTION_READ_STREAMS, PRODUCTION_WRITE_SHARE, PRODUCTION_WRITE_STREAMS
from .load import run_load

WARM_UP_S = 1
KEPT_WARM_UP_MS_PER_CONNECTION = 2
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
    counts = h2load_counts(stdout)
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
        # From the status codes: in a timed run (-D) `done` and the status counts can disagree.
        "non_2xx": sum(counts.get(f"{k}xx", 0) for k in (1, 3, 4, 5)),
        "closes": 0,
    }


def h2load_counts(stdout):
    """h2load's `requests:` and `status codes:` lines: {"succeeded": n, "2xx": n, ...}."""
    counts = {}
    for line in stdout.splitlines():
        if line.startswith(REQUEST_LINE) or line.startswith(STATUS_LINE):
            for part in line.split(":", 1)[1].split(","):
                number, _, name = part.strip().partition(" ")
                counts[name] = int(number)
    return counts


def percentiles(sorted_values):
    keys = {"p50": 0.50, "p75": 0.75, "p90": 0.90, "p99": 0.99}
    if not sorted_values:
        return dict.fromkeys(keys)
    return {k: sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] for k, q in keys.items()}


def h2_command(url, connections, threads, duration, streams, uri_file=None, grpc_body_file=None, h2c=False,
               requests=None, h3=False, h3_binary=False, headers=()):  # fmt: skip
    """HttpArena's H2 and gRPC load (its scripts/lib/tools/h2load.sh): `streams` in flight on each
    of `connections` HTTP/2 connections for `duration` seconds (or just `requests` in all); with
    `uri_file`, its URIs in turn (h2load -i, the scheme, host and port of the first for all); with
    `grpc_body_file`, each request a gRPC POST of it. `h3`: its H3 load (scripts/lib/tools/h2load-h3.sh),
    the same over QUIC with HttpArena's h2load-h3. `h3_binary`: over h2 still, by h2load-h3's h2load
    (nghttp2 1.69, Debian's is 1.52). `headers`: more header fields ("Name: value") on every request."""
    program = [str(H2LOAD_H3), "--alpn-list=h3"] if h3 else [str(H2LOAD_H3)] if h3_binary else ["h2load"]
    command = program + ["-c", str(connections), "-m", str(streams), "-t", str(threads)]
    if requests:
        command += ["-n", str(requests)]
    else:
        command += ["-D", str(duration), "--warm-up-time", str(WARM_UP_S)]
    if h2c:
        command += ["-p", "h2c"]
    if grpc_body_file:
        command += ["-d", str(grpc_body_file), "-H", "content-type: application/grpc", "-H", "te: trailers"]
    for header in headers:
        command += ["-H", header]
    if uri_file:
        # As HttpArena's static-h2 asks: compressed if the server has it so.
        return command + ["-H", "Accept-Encoding: br;q=1, gzip;q=0.8", "-i", str(uri_file)]
    return command + [url]


def run_h2(server, url, connections, threads, duration, streams, uri_file=None, grpc_body_file=None, h2c=False,
           h3=False, h3_binary=False):  # fmt: skip
    """One HTTP/2 (or `h3`: HTTP/3) run against `server` as fast as h2load goes, measured by
    load.run_load."""
    with tempfile.NamedTemporaryFile("r", prefix="h2load-", suffix=".log") as log:
        command = h2_command(url, connections, threads, duration, streams, uri_file, grpc_body_file, h2c, h3=h3,
                             h3_binary=h3_binary)  # fmt: skip
        command[1:1] = ["--log-file", log.name]
        return run_load(server, command, connections, threads, duration,
                        lambda stdout: parse_h2load_output(stdout, log.readlines(), duration))  # fmt: skip


def write_connections(connections):
    """production-stack's writes: an eighth of the reads' connections, at least 8 (h2load.sh)."""
    return max(connections // PRODUCTION_WRITE_SHARE, PRODUCTION_WRITE_SHARE)


def production_commands(url, connections, threads, duration, reads_file, writes_file, body_file, token,
                        requests=None):  # fmt: skip
    """HttpArena's production-stack load (its scripts/lib/tools/h2load.sh), two h2load command lines
    run at once, both with `Authorization: Bearer <token>`: the reads, `streams` of the test in
    flight on each of `connections` over `reads_file` in turn with static-h2's Accept-Encoding; the
    writes, 8 in flight on each of write_connections(connections), each a POST of `body_file`
    (application/json) to the URIs of `writes_file` in turn. For `duration` seconds each (after
    the warm-up of every h2 test here), or `requests` in all each (a probe)."""
    authorization = f"Authorization: Bearer {token}"
    reads = h2_command(url, connections, threads, duration, PRODUCTION_READ_STREAMS, reads_file, requests=requests,
                       h3_binary=True, headers=[authorization])  # fmt: skip
    writers = write_connections(connections) if requests is None else connections
    writes = [str(H2LOAD_H3), "-c", str(writers), "-m", str(PRODUCTION_WRITE_STREAMS), "-t", str(min(threads, writers))]
    writes += ["-n", str(requests)] if requests else ["-D", str(duration), "--warm-up-time", str(WARM_UP_S)]
    writes += ["-d", str(body_file), "-H", "Content-Type: application/json", "-H", authorization, "-i", str(writes_file)]
    return reads, writes


def parse_production_output(reads_stdout, writes_stdout, log_lines, duration):
    """Both h2load's counts as one summary, as HttpArena's h2load_parse sums them: requests the 2xx
    of both, non-2xx and errors of both, latency the reads' (their log); each one's 2xx apart too."""
    summary = parse_h2load_output(reads_stdout, log_lines, duration)
    writes = parse_h2load_output(writes_stdout, [], duration)
    for key in ("requests", "socket_errors", "non_2xx"):
        summary[key] += writes[key]
    summary["requests_per_s"] = summary["requests"] / duration
    summary["reads_2xx"], summary["writes_2xx"] = summary["requests"] - writes["requests"], writes["requests"]
    summary["writes_non_2xx"] = writes["non_2xx"]
    return summary


def run_production(server, url, connections, threads, duration, reads_file, writes_file, body_file, token):
    """One production-stack run against `server` (production_commands), measured by load.run_load
    over both h2load instances."""
    with tempfile.NamedTemporaryFile("r", prefix="h2load-", suffix=".log") as log:
        reads, writes = production_commands(url, connections, threads, duration, reads_file, writes_file, body_file,
                                            token)  # fmt: skip
        reads[1:1] = ["--log-file", log.name]
        return run_load(server, reads, connections, threads, duration,
                        lambda out, also: parse_production_output(out, also, log.readlines(), duration), also=writes)  # fmt: skip


def kept_warm_up(connections):
    """The seconds of h2load's warm-up before a kept test's window, in which every connection is
    made and its TLS handshake done: an RSA-2048 signature is about 0.9 ms of one core here, and
    h2load takes its share, so 2 ms per connection (9 s for 4,096)."""
    return max(1, math.ceil(connections * KEPT_WARM_UP_MS_PER_CONNECTION / 1000))


def kept_command(uri_file, connections, threads, duration, accept, log_file):
    """HTTP/1.1 as fast as h2load goes, one request in flight per connection, the URIs of
    `uri_file` in turn, after a warm-up in which every connection is made (kept_warm_up)."""
    return [
        "h2load", "--h1",
        "-c", str(connections), "-t", str(threads),
        "-D", str(duration), "--warm-up-time", str(kept_warm_up(connections)),
        "-H", f"Accept: {accept}", "--log-file", str(log_file), "-i", str(uri_file),
    ]  # fmt: skip


def run_kept(server, uri_file, connections, threads, duration, accept):
    """One kept run against `server` (kept_command), its CPU figures from the end of the warm-up."""
    with tempfile.NamedTemporaryFile("r", prefix="h2load-", suffix=".log") as log:
        command = kept_command(uri_file, connections, threads, duration, accept, log.name)
        return run_load(server, command, connections, threads, duration,
                        lambda stdout: parse_h2load_output(stdout, log.readlines(), duration),
                        measured_after=kept_warm_up(connections))  # fmt: skip


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
