"""One `scripts/tool bench` run from start to end: the machine prepared, the servers and
databases started, every test run, and results/<timestamp>/ written."""

import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from .. import ROOT as REPO
from ..system import LOOPBACK, SetupError, ensure_file_installed, ensure_installed, exit_on_sigterm
from .anchors import GCANNON, shared_path
from .catalog import TESTS
from .chart import chart_for
from .databases import (ANCHOR_DB_CLIENT_ENV, ANCHOR_DB_PORT, ANCHOR_PG_DIR, AnchorDatabase, give_arena_database,
                        items_put_back)
from .gateway import AUTHSVC_BINARY, EDGES, authsvc_binary, write_gateway_config
from .load import check_capacity, most_connections, raise_open_files_limit
from .h2o import H2O_CONF, write_h2o_configs
from .nginx import (BARS_DIR, NGINX_BROTLI_STATIC, NGINX_BROTLI_STATIC_PACKAGE, NGINX_CONF, write_json_answers,
                    write_nginx_configs)
from .options import settle
from .proc import cpu_model, pin
from .report import chart_name, render_markdown
from .schedule import run_test
from .servers import Lineup, Server, preflight
from .summary import collect_failures, has_numbers, ratios, rate, rate_per_cpu, summarize

DATASET = REPO / "data" / "dataset.json"
TEST_CERT = ("anchors", "httparena", "data", "certs")


def run(args):
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    try:
        settle(args)
    except ValueError as e:
        print(f"scripts/tool bench: error: {e}", file=sys.stderr)
        return 2
    try:
        return measure_all(args)
    except SetupError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def measure_all(args):
    ensure_installed("wrk", "wrk")
    if any(TESTS[t].rate or TESTS[t].h2 for t in args.tests):
        ensure_installed("h2load", "nghttp2-client")
    if any(TESTS[t].websocket for t in args.tests) and not GCANNON.exists():
        raise SetupError(f"the WebSocket tests need gcannon, HttpArena's load generator: not at {GCANNON}")
    if args.nginx:
        ensure_installed("nginx", "nginx-light")
        ensure_file_installed(NGINX_BROTLI_STATIC, NGINX_BROTLI_STATIC_PACKAGE)
    if args.h2o:
        ensure_installed("h2o", "h2o")
    for edge in {EDGES[spec.gateway] for spec in args.specs if spec.gateway}:
        if edge.package:
            ensure_installed(edge.name, edge.package)
        if edge.name == "nginx":
            ensure_file_installed(NGINX_BROTLI_STATIC, NGINX_BROTLI_STATIC_PACKAGE)
    open_files = raise_open_files_limit(most_connections(args))
    check_capacity(args, open_files)
    now = datetime.now(timezone.utc)
    out_dir = Path(args.out) / now.strftime("%Y%m%dT%H%M%SZ")
    out_dir.mkdir(parents=True, exist_ok=False)
    meta = {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(sys.argv),
        "machine": machine_info(),
        "open_files_limit": open_files,
        "pinned": args.pin and {"servers": sorted(args.pin[0]), "load": sorted(args.pin[1])},
        "load_average": {"start": os.getloadavg()[0]},
        "database": database_settings(),
        "config": {
            k: getattr(args, k)
            for k in ("profile", "tests", "levels", "duration", "warmup", "primer", "rounds", "threads",
                      "max_concurrency", "pause_after_warmup", "pause_between_levels")
        },  # fmt: skip
    }
    if args.pin:
        pin(*args.pin)
    # A database anchor cannot even start without tfb-database: then every server of the run
    # uses that database, gnosis included, over TCP as the anchors do.
    anchor_db = any(spec.anchor and spec.anchor.needs_database for spec in args.specs)
    if anchor_db:
        meta["database"] = (
            f"tfb-database:{ANCHOR_DB_PORT} (127.0.0.1), SCRAM over TCP, for every server: the anchors by "
            f"name, the others with {' '.join(f'{k}={v}' for k, v in ANCHOR_DB_CLIENT_ENV.items() if k != 'PGPASSWORD')}; "
            f"PostgreSQL from scripts/pg.sh in {ANCHOR_PG_DIR}"
        )
    wants_dir = args.nginx or args.h2o or any(spec.gateway for spec in args.specs)
    # production-stack's stacks: HttpArena's auth service, given or built before anything starts.
    if any(TESTS[t].production for t in args.tests) and any(spec.production_command for spec in args.specs):
        args.authsvc_binary = authsvc_binary(args.authsvc)
        meta["authsvc"] = args.authsvc_binary
    bars_dir = tempfile.mkdtemp(prefix="bench-bars-") if wants_dir else None
    servers = make_servers(args, out_dir, ANCHOR_DB_CLIENT_ENV if anchor_db else {}, bars_dir, meta)
    names = [s.name for s in servers]
    meta["servers"] = {s.name: s.command + (f" (anchor, port {s.port})" if s.anchor else "") for s in servers}
    # A stack's command line for production-stack, when the run has it: with the auth service.
    production = [s for s in servers if s.production_command and any(s.serves(TESTS[t]) and TESTS[t].production
                                                                      for t in args.tests)]  # fmt: skip
    if production:
        meta["production_stacks"] = {s.name: s.production_command for s in production}
    meta["anchors"] = {s.name: s.anchor.name for s in servers if s.anchor}

    with open(out_dir / "bench.log", "w") as log_file:

        def log(message):
            print(message, flush=True)
            log_file.write(message + "\n")
            log_file.flush()

        log(f"results in {out_dir}")
        records = []
        database = AnchorDatabase(log) if anchor_db else None
        lineup = Lineup(servers, args.startup_timeout, log)
        try:
            preflight(servers)
            if database:
                database.start()
                meta["setup"] = [
                    f"PostgreSQL on 127.0.0.1:{ANCHOR_DB_PORT} ({ANCHOR_PG_DIR}) "
                    + ("started for this run and stopped after it" if database.started else "already running, left running")
                ]
            meta["database"] = give_arena_database(servers, args.tests, log) or meta["database"]
            for name in args.tests:
                # production-stack's POSTs change items 1..20: put back as they were before it.
                with items_put_back(TESTS[name], servers, log, lineup.stop_all):
                    records.append(run_test(TESTS[name], servers, args, log, lineup))
        except SetupError as e:
            if getattr(e, "record", None) is not None:
                records.append(e.record)
            log(f"!!! {e}")
            meta["aborted"] = str(e)
        finally:
            lineup.stop_all()
            if bars_dir:
                shutil.rmtree(bars_dir, ignore_errors=True)
            if database:
                database.stop()
            if any(not s.peak_reset_works for s in servers):
                meta["peak_rss_note"] = "clear_refs not writable: peak RSS is since the server started"
            meta["load_average"]["end"] = os.getloadavg()[0]

    table = write_results(out_dir, meta, records, names)
    print()
    print(table)
    failures = collect_failures(records) + ([meta["aborted"]] if "aborted" in meta else [])
    if failures:
        banner = "!" * 72
        print(f"\n{banner}\nTHIS RUN HAD ERRORS; its numbers are not valid:", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        print(f"{banner}\nresults: {out_dir}", file=sys.stderr)
        return 1
    print(f"\nresults: {out_dir}")
    return 0


def make_servers(args, out_dir, client_env, bars_dir, meta):
    """The servers of the run, not started yet, each logging to its file in `out_dir`; the bars'
    configurations and files written to `bars_dir` (and their configurations into `meta`)."""
    # gnosis's /json/{count} reads HttpArena's dataset: the repository's copy, unless DATASET_PATH says.
    dataset = os.environ.get("DATASET_PATH") or str(DATASET)
    # The TLS tests: HttpArena's test certificate (its copy beside the anchors), unless TLS_CERT says.
    certificate = (os.environ.get("TLS_CERT") or str(shared_path(*TEST_CERT, "server.crt")),
                   os.environ.get("TLS_KEY") or str(shared_path(*TEST_CERT, "server.key")))  # fmt: skip
    # The static files of HttpArena's static-h2, which gnosis serves from STATIC_DIR.
    static_dir = str(shared_path("anchors", "httparena", "data", "static"))
    command_env = dict(client_env, DATASET_PATH=dataset, STATIC_DIR=static_dir)
    # Only to a server whose command names its TLS port: another would open its default one.
    tls_env = dict(command_env, TLS_CERT=certificate[0], TLS_KEY=certificate[1])
    if bars_dir:
        write_json_answers(bars_dir, dataset)
    bar_configs = {"nginx": (write_nginx_configs, NGINX_CONF), "h2o": (write_h2o_configs, H2O_CONF)}
    servers = []
    for i, spec in enumerate(args.specs):
        if spec.anchor:
            log_name = f"anchor-{spec.name}.log"
        else:
            log_name = "server.log" if i == 0 else "baseline.log" if i == 1 and args.baseline else f"{spec.name}.log"
        command, one_worker_command, production_command = spec.command, spec.one_worker_command, None
        if spec.gateway:
            conf = write_gateway_config(EDGES[spec.gateway], bars_dir, spec.port, spec.h2_tls_port, certificate,
                                        static_dir)  # fmt: skip
            command = command.replace(BARS_DIR, bars_dir)
            if conf:
                meta[f"{spec.name}_config"] = conf.read_text()
            if spec.production_command and getattr(args, "authsvc_binary", None):
                conf = write_gateway_config(EDGES[spec.gateway], bars_dir, spec.port, spec.h2_tls_port, certificate,
                                            static_dir, spec.auth_port)  # fmt: skip
                production_command = spec.production_command.replace(BARS_DIR, bars_dir)
                production_command = production_command.replace(AUTHSVC_BINARY, args.authsvc_binary)
                if conf:
                    meta[f"{spec.name}_production_config"] = conf.read_text()
        elif bars_dir and BARS_DIR in command:
            write_configs, conf = bar_configs[spec.name]
            write_configs(bars_dir, spec.port, spec.tls_port, certificate, spec.h2c_port, spec.h2_tls_port, static_dir)
            command, one_worker_command = (c.replace(BARS_DIR, bars_dir) for c in (command, one_worker_command))
            meta[f"{spec.name}_config"] = (Path(bars_dir) / conf).read_text()
        servers.append(
            Server(spec.name, command, LOOPBACK, spec.port, out_dir / log_name.replace(" ", "_").replace("/", "_"),
                   anchor=spec.anchor, env=anchor_env(spec.anchor, certificate) if spec.anchor else
                   tls_env if spec.tls_port or spec.h2_tls_port else command_env,
                   tests=spec.tests, one_worker_command=one_worker_command, tls_port=spec.tls_port,
                   h2c_port=spec.h2c_port, h2_tls_port=spec.h2_tls_port, production_command=production_command,
                   auth_port=spec.auth_port if production_command else None)
        )  # fmt: skip
    return servers


def anchor_env(anchor, certificate):
    """An anchor runs in the tool's environment, with the run's certificate if it serves TLS only given one."""
    return dict(TLS_CERT=certificate[0], TLS_KEY=certificate[1]) if anchor.wants_certificate else None


def write_results(out_dir, meta, records, names):
    """results.json (with each test's summary and ratios added), a chart per test that ran, and
    table.md, which it returns."""
    measured = [r for r in records if has_numbers(r)]
    for record in measured:
        record["summary"] = [{"server": name, "level": level, **row} for (name, level), row in summarize(record).items()]
        # Per other server: the first server's ratio to it, per metric and level.
        record["ratios"] = {
            other: {
                metric.__name__: {str(level): r for level, r in ratios(record, names[0], other, metric).items()}
                for metric in (rate, rate_per_cpu)
            }
            for other in names[1:]
        }
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "tests": records}, indent=1) + "\n")
    for record in measured:
        (out_dir / chart_name(record["test"])).write_text(chart_for(record, names))
    table = render_markdown(meta, records, names)
    if "aborted" in meta:
        table += f"\n**ABORTED: {meta['aborted']}**\n"
    (out_dir / "table.md").write_text(table)
    return table


def machine_info():
    model = cpu_model()
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "kernel": platform.release(),
        "wrk": wrk_version[0].split(" Copyright")[0].strip() if wrk_version else "unknown",
        "git_commit": git_commit(),
    }


def database_settings():
    """The PG* variables the servers inherit, password left out."""
    names = ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE")
    return " ".join(f"{n}={os.environ[n]}" for n in names if os.environ.get(n))


def git_commit():
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None
