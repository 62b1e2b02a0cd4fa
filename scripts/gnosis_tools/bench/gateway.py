"""HttpArena's gateway profiles (gateway-64, gateway-h3): the server of such a test is a stack, an
edge that terminates TLS (h2, and HTTP/3 on UDP), serves /static/* itself and forwards the rest to
an application server over HTTP/1.1. `gateway:EDGE` as --server or --baseline is one command line
that starts both in one session (the bench sums the CPU of its processes): the application
(--gateway-app, gnosis from this checkout by default) on the stack's port, the edge on its h2 TLS
port. The edges: Caddy and nginx (Debian's), configured from the templates in gateway/ as
HttpArena's aspnet-minimal_caddy and aspnet-minimal_nginx proxies are, and gnosis's own edge
(--upstream).

production-stack's stack has two more processes, as HttpArena's compose files have them: Redis
(Debian's redis-server, no persistence) on the auth port + 1,000, the application's L2 (REDIS_URL), and
HttpArena's auth service (frameworks/_shared/authsvc, Rust, built here from a snapshot of its
repository or given by --authsvc) on the stack's auth port, both started first; each edge asks the
auth service about every /api/ request (gnosis --auth, nginx auth_request, Caddy forward_auth) and
passes its X-User-Id on. Its edges' configurations are the -production templates."""

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import ROOT as REPO
from ..authsvc import SECRET as JWT_SECRET
from ..system import SetupError
from .httparena import GATEWAY_TESTS, PRODUCTION_TESTS
from .nginx import BARS_DIR, NGINX_BROTLI_STATIC, NGINX_MIME_TYPES

GATEWAY_PREFIX = "gateway:"
TEMPLATES = Path(__file__).resolve().parent / "gateway"
GNOSIS = f"{REPO}/target/release/gnosis"
# The application server behind every edge: HTTP/1.1 on the stack's port alone (every other port
# 0, none), as HttpArena's compose.gateway.yml runs gnosis's `server` service.
DEFAULT_APP = f"{GNOSIS} --port {{port}} --tls-port 0 --h2c-port 0 --h2-tls-port 0 --h3-port 0"
# production-stack's auth service, as HttpArena's compose files start it (its secret, its listen
# address on the stack's auth port); AUTHSVC_BINARY stands for its binary until the run has one.
AUTHSVC_BINARY = "@AUTHSVC@"
AUTHSVC_COMMAND = f"env JWT_SECRET={JWT_SECRET} AUTHSVC_LISTEN=127.0.0.1:{{auth_port}} {AUTHSVC_BINARY}"
# production-stack's cache service, HttpArena's Redis (its compose files' redis:7-alpine), on the
# auth service's port + 1,000; the application finds it in REDIS_URL.
REDIS_COMMAND = "redis-server --bind 127.0.0.1 --port {redis_port} --save '' --appendonly no"
REDIS_URL = "redis://127.0.0.1:{redis_port}"
# HttpArena's repository at the commit followed (28606baf): its authsvc is exported from there and
# built in target/authsvc/ of this checkout. HTTPARENA_GIT names another git directory of it.
HTTPARENA_COMMIT = "28606bafd5526c28b8438f630d7dca73b2869e28"
HTTPARENA_GIT = os.environ.get("HTTPARENA_GIT", "/work/.mirror/MDA2AV+HttpArena/repo")
AUTHSVC_SOURCE = "frameworks/_shared/authsvc"
AUTHSVC_BUILD_DIR = REPO / "target" / "authsvc"


@dataclass(frozen=True)
class Edge:
    name: str
    tests: tuple  # the gateway tests it serves
    command: str  # its command line, {conf} the configuration written for the stack
    template: str = None  # its configuration's template in gateway/, if it has one
    check: str = None  # the command line that checks a configuration ({conf}), exit 0 if good
    package: str = None  # Debian's package of its program
    # production-stack's: its configuration's template, and its command line if not `command`.
    production_template: str = None
    production_command: str = None

    def conf_name(self, port, production=False):
        """The file name of its configuration for the stack on `port` (two stacks, two files)."""
        kind = "production" if production else "gateway"
        return f"{self.name}-{kind}-{port}.{'Caddyfile' if self.name == 'caddy' else 'conf'}"


EDGES = {
    e.name: e
    for e in [
        # Its autosave.json and storage in the run's folder, not the user's ~/.config and ~/.local.
        Edge("caddy", GATEWAY_TESTS + PRODUCTION_TESTS, f"exec env XDG_CONFIG_HOME={BARS_DIR} XDG_DATA_HOME={BARS_DIR} caddy run "
             "--config {conf} --adapter caddyfile", "Caddyfile",
             f"env XDG_CONFIG_HOME={BARS_DIR} XDG_DATA_HOME={BARS_DIR} caddy validate --config {{conf}} "
             "--adapter caddyfile", "caddy", "Caddyfile-production"),  # fmt: skip
        # Debian 12's nginx has no HTTP/3: gateway-64 only.
        # Debian's nginx-light has auth_request (--with-http_auth_request_module) for production-stack.
        Edge("nginx", ("gateway-64",) + PRODUCTION_TESTS, f"exec nginx -p {BARS_DIR}/ -c {{conf}}", "nginx.conf",
             f"nginx -t -p {BARS_DIR}/ -c {{conf}}", "nginx-light", "nginx-production.conf"),  # fmt: skip
        # gnosis's edge mode, this checkout's binary: h2 and HTTP/1.1 on TCP, HTTP/3 on UDP, one port.
        # production-stack's: /api/ asked about at the auth service first, its X-User-Id passed on.
        Edge("gnosis", GATEWAY_TESTS + PRODUCTION_TESTS, f"exec {GNOSIS} --upstream 127.0.0.1:{{port}} --port 0 "
             "--tls-port 0 --h2c-port 0 --h2-tls-port {h2_tls_port} --h3-port {h2_tls_port}",
             production_command=f"exec {GNOSIS} --upstream 127.0.0.1:{{port}} --auth 127.0.0.1:{{auth_port}}/_auth "
             "--auth-prefix /api/ --auth-fields X-User-Id --port 0 --tls-port 0 --h2c-port 0 "
             "--h2-tls-port {h2_tls_port} --h3-port {h2_tls_port}"),  # fmt: skip
    ]
}


def edge_named(name):
    if name not in EDGES:
        raise ValueError(f"unknown gateway edge {name!r}; the edges are {', '.join(EDGES)}")
    return EDGES[name]


def stack_command(edge, app, port, h2_tls_port, auth_port=None):
    """One command line for /bin/sh: the application in the background, then the edge in its
    place (exec), both in the session the bench starts and measures. With `auth_port`,
    production-stack's: Redis and the auth service first, in the background too, the application
    with REDIS_URL, and the edge's production command and configuration."""
    production = auth_port is not None
    conf = f"{BARS_DIR}/{edge.conf_name(port, production)}"
    if production:
        line = (f"{REDIS_COMMAND} & {AUTHSVC_COMMAND} & env REDIS_URL={REDIS_URL} {app} & "
                f"{edge.production_command or edge.command}")
        line = line.replace("{redis_port}", str(auth_port + 1000))
    else:
        line = f"{app} & {edge.command}"
    line = line.replace("{conf}", conf).replace("{auth_port}", str(auth_port))
    return line.replace("{port}", str(port)).replace("{h2_tls_port}", str(h2_tls_port))


def gateway_config(edge, directory, port, h2_tls_port, certificate, static_dir, auth_port=None):
    """The edge's template (production-stack's with `auth_port`) with the stack's ports and the
    run's paths in place of its @NAME@ marks."""
    marks = {
        "UPSTREAM_PORT": port,
        "AUTH_PORT": auth_port,
        "H2_TLS_PORT": h2_tls_port,
        "CERT": certificate[0],
        "KEY": certificate[1],
        "STATIC_DIR": static_dir,
        "DIR": directory,
        "MIME_TYPES": NGINX_MIME_TYPES,
        "BROTLI_STATIC": NGINX_BROTLI_STATIC,
    }
    template = edge.production_template if auth_port is not None else edge.template
    text = (TEMPLATES / template).read_text()
    for mark, value in marks.items():
        text = text.replace(f"@{mark}@", str(value))
    return f"# Written by scripts/tool bench for one run from {template} in {TEMPLATES}.\n{text}"


def write_gateway_config(edge, directory, port, h2_tls_port, certificate, static_dir, auth_port=None):
    """The edge's configuration for the stack on `port` in `directory` (production-stack's with
    `auth_port`), checked by the edge itself; its path (None for an edge without one)."""
    if not (edge.production_template if auth_port is not None else edge.template):
        return None
    path = Path(directory) / edge.conf_name(port, auth_port is not None)
    path.write_text(gateway_config(edge, directory, port, h2_tls_port, certificate, static_dir, auth_port))
    check = edge.check.replace("{conf}", str(path)).replace(BARS_DIR, str(directory))
    done = subprocess.run(check, shell=True, capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(f"{check} rejects {path}:\n{(done.stdout + done.stderr).strip()}")
    return path


def authsvc_binary(given=None, log=print):
    """HttpArena's auth service for production-stack: `given` (--authsvc), else built once from
    HttpArena's repository at HTTPARENA_COMMIT (HTTPARENA_GIT), exported to target/authsvc/src and
    built there with cargo (crates from crates.io), its target/ kept for the next run."""
    if given:
        if not os.access(given, os.X_OK):
            raise SetupError(f"--authsvc {given}: not an executable file")
        return str(Path(given).resolve())
    git = Path(HTTPARENA_GIT)
    have = subprocess.run(["git", "-C", str(git), "cat-file", "-e", f"{HTTPARENA_COMMIT}:{AUTHSVC_SOURCE}/Cargo.toml"],
                          capture_output=True) if git.exists() else None  # fmt: skip
    if have is None or have.returncode != 0:
        raise SetupError(
            f"production-stack needs HttpArena's auth service ({AUTHSVC_SOURCE}): give its binary with --authsvc "
            f"PATH, or a git directory of MDA2AV/HttpArena holding {HTTPARENA_COMMIT[:8]} with HTTPARENA_GIT=DIR "
            f"(not found: {git}), e.g. `git clone https://github.com/MDA2AV/HttpArena` and HTTPARENA_GIT=HttpArena/.git"
        )  # fmt: skip
    if not shutil.which("cargo"):
        raise SetupError("building HttpArena's auth service needs cargo; or give its binary with --authsvc PATH")
    source = AUTHSVC_BUILD_DIR / "src"
    archive = subprocess.run(["git", "-C", str(git), "archive", HTTPARENA_COMMIT, AUTHSVC_SOURCE],
                             capture_output=True, check=True).stdout  # fmt: skip
    source.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    crate = source / AUTHSVC_SOURCE
    binary = AUTHSVC_BUILD_DIR / "target" / "release" / "authsvc"
    log(f"--- building HttpArena's auth service ({HTTPARENA_COMMIT[:8]}:{AUTHSVC_SOURCE}) in {AUTHSVC_BUILD_DIR}")
    done = subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(crate / "Cargo.toml")],
                          env=dict(os.environ, CARGO_TARGET_DIR=str(AUTHSVC_BUILD_DIR / "target")),
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0 or not binary.exists():
        raise SetupError(f"cargo could not build HttpArena's auth service in {crate}:\n{done.stderr.strip()[-2000:]}")
    return str(binary)
