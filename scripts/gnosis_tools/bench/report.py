"""table.md: the run's set-up, a summary of every test, and per test each server's numbers and
its ratios to the first server."""

from .catalog import DB_TESTS, TESTS
from .summary import collect_failures, ratios, rate, rate_per_cpu, rule_breakers, summarize, test_totals
from .workload import PIPELINE_DEPTH, load_description


def render_markdown(meta, records, names):
    lines = [f"# gnosis benchmark, {meta['date']}", ""]
    machine = meta["machine"]
    lines += [
        f"- Command: `{meta['command']}`",
        f"- Machine: {machine['cpus']} CPUs ({machine['cpu_model']}), Linux {machine['kernel']}; "
        f"{machine['wrk']}; load generator and servers on the same machine{pinning(meta)}; load average "
        f"{meta['load_average']['start']:.2f} at the start, {meta['load_average']['end']:.2f} at the end",
    ]
    if meta["database"]:
        lines.append(f"- Database: {meta['database']}")
    for note in meta.get("setup", []):
        lines.append(f"- Set-up: {note}")
    if meta.get("peak_rss_note"):
        lines.append(f"- Note: {meta['peak_rss_note']}")
    for name in names:
        lines.append(f"- `{name}`: `{meta['servers'][name]}`")
        if name in meta.get("production_stacks", {}):
            lines.append(f"- `{name}` for production-stack: `{meta['production_stacks'][name]}`")
    if machine["git_commit"]:
        lines.append(f"- Checkout that `scripts/tool bench` ran from: {machine['git_commit']} (git describe)")
    cfg = meta["config"]
    lines += [
        f"- Profile `{cfg['profile']}`: {cfg['duration']} s per level, {cfg['rounds']} round(s) per level "
        f"and server, primer {cfg['primer']} s at 8 connections, warm-up {cfg['warmup']} s at "
        f"{cfg['max_concurrency']} connections, wrk threads min({cfg['threads']}, connections), "
        f"plaintext pipelined {PIPELINE_DEPTH} deep, query tests at {cfg['max_concurrency']} connections",
        "- requests/s, p50, p99 and CPU are medians over the rounds; errors are totals; CPU is the "
        "server's utime+stime over wall time (100% = one core), all its processes and threads; "
        "PostgreSQL CPU is the same for every `postgres` process on the machine, wrk CPU for wrk: "
        "on one machine the three share the cores; "
        "CPU-s per 1k req is the server's CPU seconds per 1,000 requests; peak RSS is VmHWM during the run",
    ]
    if len(names) > 1:
        others = ", ".join(f"`{n}`" for n in names[1:])
        lines.append(
            f"- ratio: median of `{names[0]}` over median of {others}; in parentheses, how many rounds "
            "agree on the direction, and the range of the rounds' own ratios. "
            "req per CPU-s (requests per second of server CPU time) is steadier than requests/s when "
            "other work shares the machine. – : a server does not serve that test"
        )
    lines.append("")
    failures = collect_failures(records)
    if failures:
        lines += ["> **WARNING: this run had errors; its numbers are not valid.**", ">"]
        lines += [f"> - {f}" for f in failures]
        lines.append("")
    if len(names) > 1:
        lines += summary_table(records, names, meta)

    for record in records:
        test = TESTS[record["test"]]
        lines.append(f"## {test.name}: `{test.url_path('N') if test.kind == 'queries' else test.path}`")
        lines.append("")
        lines += [f"{note}.", ""] if (note := load_description(test)) else []
        for reason in record.get("skipped", {}).values():
            lines += [f"Left out: {reason}.", ""]
        for name, data in record["servers"].items():
            for void in data.get("void_runs", []):
                lines += [f"Void run of {name} ({void['phase']}, level {void['level']}, round {void['round']}, left "
                          f"out of the medians): {void['why']}.", ""]  # fmt: skip
        for name, reason in rule_breakers(record, meta):
            lines += [f"Note: {name} {reason}.", ""]
        if record.get("not_served"):
            lines += ["**Not run: no server of this run serves it.**", ""]
            continue
        if "failed" in record:
            lines += [f"**FAILED, no ratio: {record['failed']}.**", ""]
            continue
        taking_part = [n for n in names if n in record["servers"]]
        rows = summarize(record)
        several_rounds = meta["config"]["rounds"] > 1
        header = [test.level_name]
        if test.kind == "queries":
            header.append("connections")
        header += ["server", "requests/s"]
        if several_rounds:
            header.append("runs (min–max)")
        header += ["p50", "p99", "socket errors", "non-2xx", "server CPU", "PostgreSQL CPU", "wrk CPU"]
        header += ["CPU-s per 1k req", "peak RSS"]
        database_test = test.name in DB_TESTS
        if database_test:
            header.append("PostgreSQL CPU-s per 1k req")
        if test.delay_ms:
            header += ["% of ceiling", "RSS per connection"]
        if test.close_every:
            header.append("requests per connection")
        if test.rate:
            header += ["mean latency", "share of the offered rate", "server CPU µs per request"]
        lines += table_header(header)
        for level in record["levels"]:
            for name in taking_part:
                row = rows.get((name, level))
                if row is None:
                    continue
                cells = [str(level)]
                if test.kind == "queries":
                    cells.append(str(row["connections"]))
                cells += [name, format_rps(row["rps_median"])]
                if several_rounds:
                    cells.append(f"{row['runs']} ({format_rps(row['rps_min'])}–{format_rps(row['rps_max'])})")
                cells += [
                    format_latency(row["p50_us"]),
                    format_latency(row["p99_us"]),
                    loud(row["socket_errors"]),
                    loud(row["non_2xx"]),
                    f"{row['cpu_percent']:.0f}%",
                    format_percent(row["postgres_cpu_percent"]),
                    format_percent(row["wrk_cpu_percent"]),
                    format_cpu_per_1k(row["cpu_s_per_1k_requests"]),
                    format_mib(row["peak_rss_kib"]),
                ]
                if database_test:
                    cells.append(format_cpu_per_1k(row["postgres_cpu_s_per_1k_requests"]))
                if test.delay_ms:
                    ceiling = test.ceiling_rps(row["connections"])
                    per_connection = row["rss_per_connection_bytes"]
                    cells += [
                        f"{100 * row['rps_median'] / ceiling:.1f}% of {format_rps(ceiling)}",
                        "–" if per_connection is None else f"{per_connection / 1024:.2f} KiB",
                    ]
                if test.close_every:
                    per_connection = row["requests_per_connection"]
                    cells.append("–" if per_connection is None else f"{per_connection:.1f}")
                if test.rate:
                    share, cpu = row["offered_share"], row["cpu_s_per_1k_requests"]
                    cells += [
                        format_latency(row["mean_us"]),
                        "–" if share is None else f"{100 * share:.1f}%",
                        "–" if cpu is None else f"{1000 * cpu:.1f}",
                    ]
                lines.append("| " + " | ".join(cells) + " |")
        for other in names[1:]:
            lines.append("")
            if len(names) > 2:
                lines += [f"`{names[0]}` against `{other}`:", ""]
            if names[0] not in record["servers"] or other not in record["servers"]:
                missing = names[0] if names[0] not in record["servers"] else other
                lines.append(f"ratio: – ({missing} does not serve {test.name})")
            else:
                lines += comparison_table(record, test, names[0], other, rows)
        lines.append("")
        totals = "; ".join(
            f"{name} {t['cpu_s']:.1f} s CPU, peak RSS {format_mib(t['peak_rss_kib'])}"
            for name in taking_part
            for t in [test_totals(record["servers"][name])]
        )
        lines += [f"Whole test (primer and warm-up included): {totals}.", ""]
        lines += [f"![{test.name}: requests/s]({chart_name(test.name)})", ""]
    return "\n".join(lines)


def summary_table(records, names, meta):
    """Every test and level on one table: each server's requests/s, then the ratios to the first."""
    first, others = names[0], names[1:]
    header = ["test", "level"] + names + [f"{first} / {o}" for o in others]
    lines = ["## Summary (requests/s, medians)", ""] + table_header(header)
    for record in records:
        test = TESTS[record["test"]]
        if record.get("not_served") or "failed" in record:
            status = "not served" if record.get("not_served") else "**FAILED**"
            lines.append("| " + " | ".join([test.name, status] + ["–"] * (len(header) - 2)) + " |")
            continue
        rows = summarize(record)
        by_other = {o: ratios(record, first, o, rate) for o in others}
        for level in record["levels"]:
            label = f"N={level}" if test.kind == "queries" else f"c={level}"
            cells = [test.name + ("*" if rule_breakers(record, meta) else ""), label]
            cells += [format_rps(rows[(n, level)]["rps_median"]) if (n, level) in rows else "–" for n in names]
            cells += [short_ratio(by_other[o].get(level)) for o in others]
            lines.append("| " + " | ".join(cells) + " |")
    breakers = sorted({b for record in records if "servers" in record for b in rule_breakers(record, meta)})
    if breakers:
        lines.append("")
        lines += [f"\\* {name} {reason}." for name, reason in breakers]
    return lines + [""]


def comparison_table(record, test, candidate, baseline, rows):
    by_rate = ratios(record, candidate, baseline, rate)
    by_rate_per_cpu = ratios(record, candidate, baseline, rate_per_cpu)
    lines = table_header(
        [test.level_name, f"{candidate} requests/s", f"{baseline} requests/s", "ratio", "ratio of req per CPU-s"]
    )
    for level in record["levels"]:
        if level not in by_rate:
            continue
        per_cpu = by_rate_per_cpu.get(level)
        cells = [
            str(level),
            format_rps(rows[(candidate, level)]["rps_median"]),
            format_rps(rows[(baseline, level)]["rps_median"]),
            format_ratio(by_rate[level]),
            format_ratio(per_cpu) if per_cpu else "–",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def table_header(header):
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" if h in ("server", "test", "level") else "---:" for h in header) + "|"]


def format_ratio(ratio):
    """`1.062 (3/3 rounds higher, 1.035–1.579)`: the ratio of medians, then the rounds' own ratios.

    Each round runs the two servers back to back, so a round's ratio is little affected by slow
    drift of the machine; when the rounds disagree on the direction, the difference is noise.
    """
    if ratio.get("errors"):
        return f"**invalid: errors** ({ratio['ratio']:.3f})"
    paired = ratio["paired"]
    if not paired:
        return f"**{ratio['ratio']:.3f}**"
    faster = sum(r > 1 for r in paired)
    slower = sum(r < 1 for r in paired)
    if faster == len(paired):
        verdict = f"{faster}/{len(paired)} rounds higher"
    elif slower == len(paired):
        verdict = f"{slower}/{len(paired)} rounds lower"
    else:
        verdict = f"rounds disagree, {faster} of {len(paired)} higher"
    return f"**{ratio['ratio']:.3f}** ({verdict}, {min(paired):.3f}–{max(paired):.3f})"


def short_ratio(ratio):
    if ratio is None:
        return "–"
    if ratio.get("errors"):
        return "**invalid: errors**"
    paired = ratio["paired"]
    higher = sum(r > 1 for r in paired)
    if paired and higher in (0, len(paired)):
        agree = f" ({len(paired)}/{len(paired)} {'higher' if higher else 'lower'})"
    else:
        agree = " (rounds disagree)" if paired else ""
    return f"{ratio['ratio']:.3f}{agree}"


def format_latency(us):
    if us is None:
        return "n/a"
    if us >= 1_000_000:
        return f"{us / 1e6:.2f} s"
    if us >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.0f} µs"


def format_rps(value):
    return f"{value:,.0f}"


def format_mib(kib):
    return f"{kib / 1024:.1f} MiB"


def format_percent(value):
    return "–" if value is None else f"{value:.0f}%"


def format_cpu_per_1k(value):
    return "–" if value is None else f"{value:.3g}"


def loud(count):
    return f"**{count}**" if count else "0"


def chart_name(test_name):
    return f"chart-{test_name}.svg"


def pinning(meta):
    pinned = meta.get("pinned")
    if not pinned:
        return ""
    return f", the servers pinned to CPUs {pinned['servers']} and the load generator to {pinned['load']}"
