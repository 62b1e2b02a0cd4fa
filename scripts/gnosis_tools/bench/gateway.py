"""HttpArena's gateway profiles (gateway-64, gateway-h3): the server of such a test is a stack, an
edge that terminates TLS (h2, and HTTP/3 on UDP), serves /static/* itself and forwards the rest to
an application server over HTTP/1.1. `gateway:EDGE` as --server or --baseline is one command line
that starts both in one session (the bench sums the CPU of its processes): the application
(--gateway-app, gnosis from this checkout by default) on the stack's port, the edge on its h2 TLS
port. The edges: Caddy and nginx (Debian's), configured from the templates in gateway/ as
HttpArena's aspnet-minimal_caddy and aspnet-minimal_nginx proxies are, and gnosis's own edge
(--upstream)."""

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import ROOT as REPO
from ..system import SetupError
from .httparena import GATEWAY_TESTS
from .nginx import BARS_DIR, NGINX_BROTLI_STATIC, NGINX_MIME_TYPES

GATEWAY_PREFIX = "gateway:"
TEMPLATES = Path(__file__).resolve().parent / "gateway"
GNOSIS = f"{REPO}/target/release/gnosis"
# The application server behind every edge: HTTP/1.1 on the stack's port alone (every other port
# 0, none), as HttpArena's compose.gateway.yml runs gnosis's `server` service.
DEFAULT_APP = f"{GNOSIS} --port {{port}} --tls-port 0 --h2c-port 0 --h2-tls-port 0 --h3-port 0"


@dataclass(frozen=True)
class Edge:
    name: str
    tests: tuple  # the gateway tests it serves
    command: str  # its command line, {conf} the configuration written for the stack
    template: str = None  # its configuration's template in gateway/, if it has one
    check: str = None  # the command line that checks a configuration ({conf}), exit 0 if good
    package: str = None  # Debian's package of its program

    def conf_name(self, port):
        """The file name of its configuration for the stack on `port` (two stacks, two files)."""
        return f"{self.name}-gateway-{port}.{'Caddyfile' if self.name == 'caddy' else 'conf'}"


EDGES = {
    e.name: e
    for e in [
        # Its autosave.json and storage in the run's folder, not the user's ~/.config and ~/.local.
        Edge("caddy", GATEWAY_TESTS, f"exec env XDG_CONFIG_HOME={BARS_DIR} XDG_DATA_HOME={BARS_DIR} caddy run "
             "--config {conf} --adapter caddyfile", "Caddyfile",
             f"env XDG_CONFIG_HOME={BARS_DIR} XDG_DATA_HOME={BARS_DIR} caddy validate --config {{conf}} "
             "--adapter caddyfile", "caddy"),  # fmt: skip
        # Debian 12's nginx has no HTTP/3: gateway-64 only.
        Edge("nginx", ("gateway-64",), f"exec nginx -p {BARS_DIR}/ -c {{conf}}", "nginx.conf",
             f"nginx -t -p {BARS_DIR}/ -c {{conf}}", "nginx-light"),  # fmt: skip
        # gnosis's edge mode, this checkout's binary: h2 and HTTP/1.1 on TCP, HTTP/3 on UDP, one port.
        Edge("gnosis", GATEWAY_TESTS, f"exec {GNOSIS} --upstream 127.0.0.1:{{port}} --port 0 --tls-port 0 "
             "--h2c-port 0 --h2-tls-port {h2_tls_port} --h3-port {h2_tls_port}"),  # fmt: skip
    ]
}


def edge_named(name):
    if name not in EDGES:
        raise ValueError(f"unknown gateway edge {name!r}; the edges are {', '.join(EDGES)}")
    return EDGES[name]


def stack_command(edge, app, port, h2_tls_port):
    """One command line for /bin/sh: the application in the background, then the edge in its
    place (exec), both in the session the bench starts and measures."""
    conf = f"{BARS_DIR}/{edge.conf_name(port)}"
    line = f"{app} & {edge.command}".replace("{conf}", conf)
    return line.replace("{port}", str(port)).replace("{h2_tls_port}", str(h2_tls_port))


def gateway_config(edge, directory, port, h2_tls_port, certificate, static_dir):
    """The edge's template with the stack's ports and the run's paths in place of its @NAME@ marks."""
    marks = {
        "UPSTREAM_PORT": port,
        "H2_TLS_PORT": h2_tls_port,
        "CERT": certificate[0],
        "KEY": certificate[1],
        "STATIC_DIR": static_dir,
        "DIR": directory,
        "MIME_TYPES": NGINX_MIME_TYPES,
        "BROTLI_STATIC": NGINX_BROTLI_STATIC,
    }
    text = (TEMPLATES / edge.template).read_text()
    for mark, value in marks.items():
        text = text.replace(f"@{mark}@", str(value))
    return f"# Written by scripts/tool bench for one run from {edge.template} in {TEMPLATES}.\n{text}"


def write_gateway_config(edge, directory, port, h2_tls_port, certificate, static_dir):
    """The edge's configuration for the stack on `port` in `directory`, checked by the edge itself;
    its path (None for an edge without one)."""
    if not edge.template:
        return None
    path = Path(directory) / edge.conf_name(port)
    path.write_text(gateway_config(edge, directory, port, h2_tls_port, certificate, static_dir))
    check = edge.check.replace("{conf}", str(path)).replace(BARS_DIR, str(directory))
    done = subprocess.run(check, shell=True, capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(f"{check} rejects {path}:\n{(done.stdout + done.stderr).strip()}")
    return path
