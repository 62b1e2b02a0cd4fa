"""Follow gnosis's dockerfiles on this machine, where no Docker engine runs, and verify the result.

    scripts/tool dockerfile-check [gnosis.dockerfile gnosis-uring.dockerfile ...] [--keep]
    scripts/tool dockerfile-check --httparena [gnosis gnosis-uring] [--keep]

For each dockerfile (default: one per test in benchmark_config.json) of the folder that
`scripts/tool export tfb` writes for the TFB pull request:
  1. parse it; every stage gets its own empty directory standing for the image's filesystem;
  2. COPY copies from the exported folder (the build context) or, with --from, from the named
     stage's directory; WORKDIR and ENV are applied; RUN steps run in the mapped WORKDIR;
  3. start its ENTRYPOINT/CMD with the environment TFB gives: no PG* variables, the database as
     host tfb-database port 5432 (a private PostgreSQL from scripts/pg.sh, with no Unix socket
     a client could find, or `scripts/tool bench`'s, the same, when it runs there), nothing else;
  4. wait for :8080 (with --port N appended when 8080 is taken on this machine, by
     scripts/run.sh say) and run `verify tfb` with the tests that dockerfile's test lists.
With --httparena, the same for each folder `export httparena` writes (default: both):
its Dockerfile is followed with the folder as context, its command started as HttpArena's
validate.sh starts it (no arguments, the dataset it mounts at /data/dataset.json
given by DATASET_PATH instead; for async-db and fortunes DATABASE_URL of scripts/pg.sh's
HttpArena-like database and DATABASE_MAX_CONN=256), and `verify httparena` run with
the profiles its meta.json subscribes to.
The host's Rust toolchain and Debian stand in for the images; the check says which versions.
Exits 1 if any step or check fails.
"""

import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from . import ROOT, export
from .certificate import make_pair
from .system import LOOPBACK, SetupError, ensure_tfb_database_host, free_port, log_tail, port_in_use, port_open
from .system import stop_process_group as stop
from .verify import httparena, httparena_gateway, httparena_h2, httparena_static, httparena_tls

TOOL = str(ROOT / "scripts" / "tool")
DATASET = str(ROOT / "data" / "dataset.json")
PORT = 8080
PG_PORT = 5432
PG_DIR = "/tmp/gnosis-pg-tfb"
# `scripts/tool bench`'s cluster for the anchors: TFB's set-up on the same port.
BENCH_PG_DIR = "/tmp/gnosis-pg-5432"
# Where a libpq-style client looks for a socket when PGHOST is unset.
DEFAULT_SOCKET_DIRS = ["/var/run/postgresql", "/tmp"]
TFB_DB_ENV = {
    "PGHOST": "127.0.0.1",
    "PGPORT": str(PG_PORT),
    "PGUSER": "benchmarkdbuser",
    "PGPASSWORD": "benchmarkdbpass",
    "PGDATABASE": "hello_world",
}
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
START_TIMEOUT = 60
KNOWN_IGNORED = {"LABEL", "MAINTAINER"}


class CheckFailed(Exception):
    pass


def say(text):
    print("dockerfile-check: " + text, flush=True)


# ---------------------------------------------------------------------------------------------
# Parsing


def instructions(path):
    """(line number, INSTRUCTION, arguments) with continuations joined and comments dropped."""
    result = []
    pending, start = "", 0
    with open(path, encoding="utf-8") as dockerfile:
        for number, line in enumerate(dockerfile, 1):
            stripped = line.strip()
            if not pending and (not stripped or stripped.startswith("#")):
                continue
            if pending and stripped.startswith("#"):
                continue
            if not pending:
                start = number
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            pending += stripped
            keyword, _, arguments = pending.partition(" ")
            result.append((start, keyword.upper(), arguments.strip()))
            pending = ""
    if pending:
        raise CheckFailed("%s ends inside a continued line" % path)
    return result


def exec_form(arguments):
    """The JSON array of exec form, or None for shell form."""
    if arguments.startswith("["):
        try:
            value = json.loads(arguments)
        except ValueError:
            return None
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return value
    return None


def parse_env(arguments, env):
    """ENV K=V [K2="v 2" ...] or the old ENV K V; values may use $VAR / ${VAR}."""
    tokens = shlex.split(arguments, posix=True)
    if tokens and "=" not in tokens[0]:
        name, value = tokens[0], arguments[len(tokens[0]):].strip()
        return {name: expand(value, env)}
    pairs = {}
    for token in tokens:
        name, sep, value = token.partition("=")
        if not sep:
            raise CheckFailed("cannot read ENV %r" % arguments)
        pairs[name] = expand(value, {**env, **pairs})
    return pairs


def expand(value, env):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)


# ---------------------------------------------------------------------------------------------
# Building


class Stage:
    def __init__(self, index, image, name, work):
        self.image = image
        self.name = name
        self.root = os.path.join(work, "stage-%d" % index)
        os.makedirs(self.root)
        self.workdir = "/"
        self.env = image_env(image)
        self.args = {}  # ARG: seen by later instructions of the stage, not by the image's run
        self.cmd = None
        self.entrypoint = None
        self.exposed = set()

    def host_path(self, container_path):
        if not container_path.startswith("/"):
            container_path = os.path.join(self.workdir, container_path)
        return os.path.join(self.root, os.path.normpath(container_path).lstrip("/"))


def image_env(image):
    """The environment an image sets that matters here: the Rust images put cargo on PATH."""
    path = BASE_PATH
    if image.startswith("rust:"):
        cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
        path = os.path.dirname(cargo) + ":" + path
    return {"PATH": path, "HOME": os.environ.get("HOME", "/root")}


def check_image(image, line):
    name, _, tag = image.partition(":")
    if not tag or tag == "latest":
        raise CheckFailed("line %d: FROM %s is not pinned to a version tag" % (line, image))
    if name == "rust":
        wanted = re.match(r"(\d+\.\d+(?:\.\d+)?)", tag)
        host = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout
        have = re.search(r"(\d+\.\d+\.\d+)", host)
        if wanted and have and not have.group(1).startswith(wanted.group(1)):
            say("note: image %s, but this machine builds with rustc %s" % (image, have.group(1)))
        else:
            say("image %s: built with this machine's %s" % (image, host.strip()))
    codename = re.search(r"(bookworm|bullseye|trixie)", tag)
    if codename:
        with open("/etc/os-release", encoding="utf-8") as release:
            host_codename = re.search(r"VERSION_CODENAME=(\w+)", release.read())
        host_name = host_codename.group(1) if host_codename else "unknown"
        if host_name != codename.group(1):
            say("note: image %s is Debian %s, this machine is %s" % (image, codename.group(1),
                                                                     host_name))
        else:
            say("image %s: this machine is Debian %s too" % (image, host_name))


def copy_into(sources, destination, stage, source_root, line):
    """Docker's COPY: a directory's contents go into the destination; several sources or a
    destination ending in / mean a directory."""
    target = stage.host_path(destination)
    matches = []
    for source in sources:
        pattern = os.path.join(source_root, source.lstrip("/"))
        found = sorted(glob.glob(pattern))
        if not found:
            raise CheckFailed("line %d: COPY source %r does not exist (copies too little?)"
                              % (line, source))
        matches.extend(found)
    into_directory = destination.endswith("/") or len(matches) > 1 or os.path.isdir(target)
    for match in matches:
        if os.path.isdir(match):
            shutil.copytree(match, target, dirs_exist_ok=True, symlinks=True)
        else:
            goal = os.path.join(target, os.path.basename(match)) if into_directory else target
            os.makedirs(os.path.dirname(goal), exist_ok=True)
            shutil.copy2(match, goal)
    say("line %d: COPY %s -> %s" % (line, " ".join(sources), destination))


def check_run_paths(command, stage, line):
    """RUN steps run on this machine: an absolute path into the image cannot be followed."""
    for entry in os.listdir(stage.root):
        if re.search(r"(?<![\w.~-])/%s(?![\w.-])" % re.escape(entry), command):
            raise CheckFailed(
                "line %d: RUN uses the image path /%s, which this check cannot map; use paths "
                "relative to WORKDIR" % (line, entry))


def build(dockerfile, context, work):
    stages = []
    stage = None
    for line, keyword, arguments in instructions(dockerfile):
        if keyword == "FROM":
            words = arguments.split()
            image = words[0]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            if len(words) not in (1, 3) or (len(words) == 3 and not name):
                raise CheckFailed("line %d: cannot read FROM %r" % (line, arguments))
            check_image(image, line)
            stage = Stage(len(stages), image, name, work)
            stages.append(stage)
            continue
        if stage is None:
            raise CheckFailed("line %d: %s before FROM" % (line, keyword))
        if keyword == "WORKDIR":
            stage.workdir = os.path.normpath(os.path.join(stage.workdir, expand(arguments,
                                                                                stage.env)))
            os.makedirs(stage.host_path(stage.workdir), exist_ok=True)
        elif keyword == "ENV":
            stage.env.update(parse_env(arguments, stage.env))
        elif keyword == "ARG":
            name, _, default = arguments.partition("=")
            stage.args[name.strip()] = expand(default.strip().strip('"'), stage.env)
        elif keyword in ("COPY", "ADD"):
            words = [expand(word, {**stage.args, **stage.env})
                     for word in exec_form(arguments) or shlex.split(arguments)]
            source_root = context
            flags = [word for word in words if word.startswith("--")]
            words = [word for word in words if not word.startswith("--")]
            for flag in flags:
                if flag.startswith("--from="):
                    source_stage = find_stage(stages[:-1], flag[len("--from="):], line)
                    source_root = source_stage.root
                elif not flag.startswith(("--chown=", "--chmod=", "--link")):
                    raise CheckFailed("line %d: %s %s is not supported here" % (line, keyword,
                                                                                 flag))
            if len(words) < 2 or any("://" in word for word in words):
                raise CheckFailed("line %d: cannot follow %s %s" % (line, keyword, arguments))
            copy_into(words[:-1], words[-1], stage, source_root, line)
        elif keyword == "RUN":
            command = exec_form(arguments)
            text = " ".join(command) if command else arguments
            check_run_paths(text, stage, line)
            say("line %d: RUN %s   (in %s)" % (line, text, stage.workdir))
            started = time.monotonic()
            completed = subprocess.run(command or ["/bin/sh", "-c", arguments],
                                       cwd=stage.host_path(stage.workdir),
                                       env={**stage.args, **stage.env})
            if completed.returncode != 0:
                raise CheckFailed("line %d: RUN exited with %d" % (line, completed.returncode))
            say("line %d: RUN done in %.0f s" % (line, time.monotonic() - started))
        elif keyword == "EXPOSE":
            stage.exposed.update(word.split("/")[0] for word in arguments.split())
        elif keyword == "CMD":
            stage.cmd = arguments
        elif keyword == "ENTRYPOINT":
            stage.entrypoint = arguments
        elif keyword in KNOWN_IGNORED:
            say("line %d: %s has no effect on the run; not followed" % (line, keyword))
        else:
            raise CheckFailed("line %d: %s is not followed by this check; extend it or drop "
                              "the instruction" % (line, keyword))
    if not stages:
        raise CheckFailed("%s has no FROM" % dockerfile)
    return stages[-1]


def find_stage(stages, reference, line):
    for index, stage in enumerate(stages):
        if stage.name == reference or str(index) == reference:
            return stage
    raise CheckFailed("line %d: no earlier stage %r" % (line, reference))


def command_line(stage):
    """ENTRYPOINT + CMD as Docker combines them, image paths mapped to the stage directory."""
    def words(text):
        if text is None:
            return [], False
        form = exec_form(text)
        return (form, True) if form is not None else (["/bin/sh", "-c", text], False)

    entry, _ = words(stage.entrypoint)
    cmd, _ = words(stage.cmd)
    argv = entry + cmd if entry else cmd
    if not argv:
        raise CheckFailed("the final stage has neither CMD nor ENTRYPOINT")
    mapped = []
    for word in argv:
        if word.startswith("/") and os.path.exists(stage.host_path(word)):
            mapped.append(stage.host_path(word))
        elif argv[:2] == ["/bin/sh", "-c"] and word is argv[-1]:
            mapped.append(re.sub(r"(?<![\w.-])(/[\w./-]+)",
                                 lambda m: stage.host_path(m.group(1))
                                 if os.path.exists(stage.host_path(m.group(1))) else m.group(1),
                                 word))
        else:
            mapped.append(word)
    return argv, mapped


# ---------------------------------------------------------------------------------------------
# Running like TFB


def visible_sockets(port):
    return [os.path.join(directory, ".s.PGSQL.%d" % port) for directory in DEFAULT_SOCKET_DIRS
            if os.path.exists(os.path.join(directory, ".s.PGSQL.%d" % port))]


def pg_sh(action, directory=PG_DIR, quiet=False):
    env = dict(os.environ, GNOSIS_PG_PORT=str(PG_PORT), GNOSIS_PG_DIR=directory,
               GNOSIS_PG_SOCKET_DIRS=directory + "/socket")
    completed = subprocess.run([os.path.join(ROOT, "scripts", "pg.sh"), action], env=env,
                               capture_output=quiet)
    if completed.returncode != 0 and not quiet:
        raise CheckFailed("scripts/pg.sh %s failed" % action)
    return completed.returncode == 0


def start_database():
    """Starts the check's own PostgreSQL and returns True; or returns False when the
    project's benchmark cluster (scripts/tool bench's, the same set-up on the same port, its
    socket out of the default directories) already runs there: it is used and left running."""
    sockets = visible_sockets(PG_PORT)
    if not sockets and pg_sh("status", BENCH_PG_DIR, quiet=True):
        ensure_tfb_database_host(say)
        say("using the PostgreSQL of `scripts/tool bench` already running in %s" % BENCH_PG_DIR)
        return False
    if port_in_use(PG_PORT) or sockets:
        raise CheckFailed("port %d or a socket %s is already in use: stop that PostgreSQL "
                          "first (the check needs its own, reachable only as tfb-database; a "
                          "Debian cluster: pg_lsclusters, then pg_ctlcluster VERSION main stop)"
                          % (PG_PORT, sockets or ""))
    ensure_tfb_database_host(say)
    pg_sh("start")
    sockets = visible_sockets(PG_PORT)
    if sockets:
        raise CheckFailed("the check's PostgreSQL left a socket a client could find (%s); the "
                          "binary must reach tfb-database over TCP" % ", ".join(sockets))
    return True


def psql_tfb(sql):
    completed = subprocess.run(["psql", "-X", "-A", "-t", "-c", sql], capture_output=True,
                               text=True, env=dict(os.environ, **TFB_DB_ENV), timeout=60)
    if completed.returncode != 0:
        raise CheckFailed("psql: %s" % completed.stderr.strip())
    return completed.stdout.strip()


def tfb_environment(stage):
    """What the container sees: the image's ENV, no PG* variables, nothing from this shell."""
    env = {name: value for name, value in stage.env.items() if not name.startswith("PG")}
    env.setdefault("PATH", BASE_PATH)
    return env


def start_server(stage, env, log_path):
    """Runs the final stage's command as the container would, and waits for it; returns the
    server and its port: PORT, or, when something else (scripts/run.sh, say) holds PORT on
    this machine, a free one given with --port (in a container PORT would be its own)."""
    if str(PORT) not in stage.exposed:
        raise CheckFailed("the final stage does not EXPOSE %d" % PORT)
    argv, mapped = command_line(stage)
    port = PORT
    if port_in_use(PORT):
        port = free_port()
        mapped = mapped + ["--port", str(port)]
        say("port %d is in use on this machine: the server gets --port %d" % (PORT, port))
    say("CMD %s   (runs as %s)" % (json.dumps(argv), " ".join(shlex.quote(w) for w in mapped)))
    with open(log_path, "wb") as log:
        try:
            server = subprocess.Popen(mapped, cwd=stage.host_path(stage.workdir), env=env,
                                      stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        except OSError as error:
            raise CheckFailed("cannot start %s: %s" % (json.dumps(argv), error)) from error
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not port_open(LOOPBACK, port):
            if server.poll() is not None:
                raise CheckFailed("the server exited with %d before listening on %d:\n%s"
                                  % (server.returncode, port, log_tail(log_path, 20)))
            if time.monotonic() > deadline:
                raise CheckFailed("nothing listens on %d after %d s:\n%s"
                                  % (port, START_TIMEOUT, log_tail(log_path, 20)))
            time.sleep(0.2)
    except BaseException:
        stop(server)
        raise
    say("the server listens on %d (pid %d)" % (port, server.pid))
    return server, port


def check_server(stage, env, log_path, checker, after_checks=lambda: None):
    """Starts the stage's command with env and runs `scripts/tool verify CHECKER...` against it
    (checker: the port -> its arguments); the server must survive the checks, and they pass."""
    server, port = start_server(stage, env, log_path)
    try:
        completed = subprocess.run([sys.executable, TOOL, "verify", *checker(port)],
                                   env=dict(os.environ, **TFB_DB_ENV))
        after_checks()
        if server.poll() is not None:
            raise CheckFailed("the server died during the checks:\n%s" % log_tail(log_path, 20))
        if completed.returncode != 0:
            raise CheckFailed("scripts/tool verify %s failed" % " ".join(checker(port)))
    finally:
        stop(server)


def check_tcp_only():
    """The server reached tfb-database over TCP, as in TFB's network, not a local socket."""
    tcp = psql_tfb("SELECT count(*) FROM pg_stat_activity WHERE usename = "
                   "'benchmarkdbuser' AND client_addr IS NOT NULL "
                   "AND pid <> pg_backend_pid()")
    local = psql_tfb("SELECT count(*) FROM pg_stat_activity WHERE usename = "
                     "'benchmarkdbuser' AND client_addr IS NULL AND backend_type = "
                     "'client backend'")
    say("the server holds %s TCP and %s Unix-socket connections to the database" % (tcp, local))
    if tcp == "0" or local != "0":
        raise CheckFailed("the server should reach tfb-database:%d over TCP" % PG_PORT)


def run_and_verify(stage, test, settings, config_path, work):
    check_server(
        stage, tfb_environment(stage), os.path.join(work, "server-%s.log" % test),
        lambda port: ["tfb", "--port", str(port), "--config", config_path, "--entry", test],
        check_tcp_only if settings.get("database", "None") != "None" else lambda: None)


def test_of(dockerfile, framework):
    name = os.path.basename(dockerfile)
    if name == framework + ".dockerfile":
        return "default"
    match = re.fullmatch(re.escape(framework) + r"-(.+)\.dockerfile", name)
    if not match:
        raise CheckFailed("%s is not named %s.dockerfile or %s-TEST.dockerfile"
                          % (name, framework, framework))
    return match.group(1)


def check_tfb(names, work):
    """Each TFB dockerfile (default: one per test in benchmark_config.json): PASS or FAIL."""
    context, = (str(folder) for folder in export.export_tfb(os.path.join(work, "pr")))
    config_path = os.path.join(context, "benchmark_config.json")
    with open(config_path, encoding="utf-8") as config_file:
        config = json.load(config_file)
    tests = {}
    for group in config["tests"]:
        tests.update(group)
    framework = config["framework"]
    names = names or [
        "%s.dockerfile" % framework if test == "default" else "%s-%s.dockerfile" % (framework, test)
        for test in tests]

    results = {}
    database_checked = database_started = False
    try:
        for name in names:
            say("==== %s (context %s)" % (name, context))
            try:
                test = test_of(name, framework)
                if test not in tests:
                    raise CheckFailed("benchmark_config.json has no test %r for %s" % (test, name))
                settings = tests[test]
                stage = build(os.path.join(context, name), context,
                              os.path.join(work, name.replace(".", "-")))
                if settings.get("database", "None") != "None" and not database_checked:
                    database_started = start_database()
                    database_checked = True
                run_and_verify(stage, test, settings, config_path, work)
                results[name] = "PASS"
            except (CheckFailed, SetupError) as error:
                say("FAIL: %s" % error)
                results[name] = "FAIL"
    finally:
        if database_started:
            pg_sh("stop")
    return results


# ---------------------------------------------------------------------------------------------
# Running like HttpArena


def httparena_environment(stage, database_url=None, certificate=None, static_dir=None):
    """What HttpArena's container sees: the image's ENV and nothing else but the dataset it
    mounts at /data/dataset.json, given here by DATASET_PATH (this check cannot write /data on
    this machine), the static files it mounts at /data/static, given by STATIC_DIR, for the
    database profiles DATABASE_URL and DATABASE_MAX_CONN=256, and for the TLS profiles the
    pair it mounts at /certs, given by TLS_CERT and TLS_KEY."""
    env = {name: value for name, value in stage.env.items() if not name.startswith("PG")}
    env.setdefault("PATH", BASE_PATH)
    env["DATASET_PATH"] = DATASET
    if static_dir:
        env["STATIC_DIR"] = static_dir
    if database_url:
        env.update(DATABASE_URL=database_url, DATABASE_MAX_CONN="256")
    if certificate:
        env.update(TLS_CERT=str(certificate[0]), TLS_KEY=str(certificate[1]))
    return env


def arena_database_url():
    """HttpArena's database as scripts/pg.sh makes it in its own cluster (started if need be,
    left running): its DATABASE_URL, which names port 55432 where HttpArena's names 5432."""
    pg_sh = os.path.join(ROOT, "scripts", "pg.sh")
    if subprocess.run([pg_sh, "start"]).returncode != 0:
        raise CheckFailed("scripts/pg.sh start failed")
    printed = subprocess.run([pg_sh, "arena-env"], capture_output=True, text=True).stdout
    return printed.split("DATABASE_URL=", 1)[-1].strip()


def static_files(folder):
    """HttpArena's static file names, each with some bytes of its own, in `folder`."""
    os.makedirs(folder, exist_ok=True)
    for name in httparena_static.FILES:
        with open(os.path.join(folder, name), "w", encoding="utf-8") as out:
            out.write("/* %s */\n" % name * 40)
    return folder


def run_and_validate(stage, name, meta, work, folder):
    """Starts the entry as HttpArena's validate.sh does (no arguments, port 8080) and runs
    `verify httparena` with the profiles its meta.json subscribes to; then, for the gateway
    profiles, runs the folder's compose files with the stage's binary (`verify gateway`)."""
    known = httparena.KNOWN_PROFILES
    gateway = [test for test in meta["tests"] if test in httparena_gateway.PROFILES]
    meta = dict(meta, tests=[test for test in meta["tests"] if test not in gateway])
    unknown = [test for test in meta["tests"] if test not in known]
    if unknown:
        raise CheckFailed("meta.json subscribes to %s, which `verify httparena` does not check"
                          % ", ".join(unknown))
    # validate.sh starts a PostgreSQL beside an entry that subscribes to these.
    database_url = (arena_database_url() if {"async-db", "fortunes"} & set(meta["tests"])
                    else None)
    # ... and mounts its certificate beside one that subscribes to a TLS profile.
    over_tls = set(httparena_tls.PROFILES) | set(httparena_h2.PROFILES) - {"baseline-h2c",
                                                                           "unary-grpc"}
    certificate = (make_pair(os.path.join(work, "certs-%s" % name))
                   if over_tls & set(meta["tests"]) else None)
    # ... and its static files beside one that subscribes to a static profile.
    static_dir = (static_files(os.path.join(work, "static-%s" % name))
                  if {"static-h2", "static-h3"} & set(meta["tests"]) else None)
    check_server(
        stage, httparena_environment(stage, database_url, certificate, static_dir),
        os.path.join(work, "server-%s.log" % name),
        lambda port: ["httparena", "--port", str(port), "--profiles", ",".join(meta["tests"])]
        + (["--database-url", database_url] if database_url else [])
        + (["--certificate", str(certificate[0])] if certificate else []))
    if gateway:
        check_gateway(stage, gateway, folder, os.path.join(work, "gateway-%s" % name))


def check_gateway(stage, profiles, folder, work):
    """The gateway stacks of the exported `folder`, each service the final stage's /server,
    with HttpArena's CERTS_DIR, DATA_DIR (static files, the dataset) and database."""
    certs, data = os.path.join(work, "certs"), os.path.join(work, "data")
    make_pair(certs)
    static_files(os.path.join(data, "static"))
    shutil.copy(ROOT / "data" / "dataset.json", os.path.join(data, "dataset.json"))
    args = argparse.Namespace(binary=stage.host_path("/server"), folder=folder, certs_dir=certs,
                              data_dir=data, database_url=arena_database_url(), seed=None)
    failed = [profile for profile in profiles if not httparena_gateway.check_profile(profile, args)]
    if failed:
        raise CheckFailed("the gateway stacks of %s failed their checks" % ", ".join(failed))


def check_httparena(names, work):
    """Each HttpArena entry folder (default: both) built from its Dockerfile: PASS or FAIL."""
    folders = {folder.name: str(folder) for folder in export.export_httparena(os.path.join(work, "pr"))}
    results = {}
    for name in names or sorted(folders):
        say("==== %s/Dockerfile (context %s)" % (name, folders.get(name)))
        try:
            if name not in folders:
                raise CheckFailed("the export has no folder %s (it has %s)"
                                  % (name, ", ".join(sorted(folders))))
            with open(os.path.join(folders[name], "meta.json"), encoding="utf-8") as meta_file:
                meta = json.load(meta_file)
            stage = build(os.path.join(folders[name], "Dockerfile"), folders[name],
                          os.path.join(work, name))
            run_and_validate(stage, name, meta, work, folders[name])
            results[name] = "PASS"
        except CheckFailed as error:
            say("FAIL: %s" % error)
            results[name] = "FAIL"
    return results


def add_arguments(parser):
    parser.add_argument("dockerfiles", nargs="*",
                        help="names in the exported folder (default: one per test), or with "
                             "--httparena the entry folders (default: both)")
    parser.add_argument("--httparena", action="store_true",
                        help="follow the HttpArena entry's Dockerfiles instead of TFB's")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")


def run(args):

    work = tempfile.mkdtemp(prefix="gnosis-dockerfile-check-")
    try:
        check = check_httparena if args.httparena else check_tfb
        results = check(args.dockerfiles, work)
    finally:
        if args.keep:
            say("work directory kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)

    print()
    for name, result in results.items():
        print("dockerfile-check: %-28s %s" % (name, result))
    return 1 if any(result != "PASS" for result in results.values()) else 0
