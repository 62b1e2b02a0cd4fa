"""The HTTP core against nginx (issue 19): TFB's plaintext with one request in flight per
connection, served by Debian's nginx (nginx-light) configured here, a worker per core or one;
over TLS 1.3 the answers of HttpArena's json-tls, written to files beforehand (the bar of the
TLS and HTTP work without the JSON's; h2o.py serves the same files); and HttpArena's H2 tests
(issue 30): /baseline2's answer over h2 (TLS, ALPN) and h2c (prior knowledge), fixed, and
static-h2's files from HttpArena's directory, opened and read on every request, their `.br` or
`.gz` sidecar when Accept-Encoding asks (gzip_static, and brotli_static from Debian's
libnginx-mod-http-brotli-static), as HttpArena's nginx entry and gnosis serve them."""

import json
import os
import subprocess
from pathlib import Path

from ..system import LOOPBACK, SetupError
from .httparena import JSON_PAIRS
from .tfb import ACCEPT_PLAIN
from .workload import Test

TESTS = [
    Test("plaintext-single", "/plaintext", "connections", ACCEPT_PLAIN),
    Test("plaintext-single-1worker", "/plaintext", "connections", ACCEPT_PLAIN, one_worker=True),
]
GROUPS = {"nginx": [t.name for t in TESTS]}
# What the bars (nginx, h2o) serve: the nginx tests, json-tls from files, and HttpArena's H2 tests
# (not gRPC: GetSum needs an application behind them).
BAR_TESTS = tuple(GROUPS["nginx"]) + ("json-tls", "json-tls-kept", "baseline-h2", "baseline-h2c", "static-h2")
FIXED_ANSWERS_NOTE = (
    "answers json-tls from files written before the run (the same bytes as gnosis's answers): the "
    "cost of TLS and HTTP without the JSON's, a bar from below"
)
BASELINE2_NOTE = (
    "answers /baseline2 with a fixed `2` (the sum of a=1 and b=1, nginx by `return 200`, h2o from a "
    "file): the cost of HTTP/2 without parsing the query, a bar from below"
)
# The tests where a bar's answer is fixed, not computed, and why its number is a bar from below.
FIXED_ANSWER_NOTES = {"json-tls": FIXED_ANSWERS_NOTE, "json-tls-kept": FIXED_ANSWERS_NOTE,
                      "baseline-h2": BASELINE2_NOTE, "baseline-h2c": BASELINE2_NOTE}
# /baseline2?a=1&b=1 of baseline-h2 and baseline-h2c, as gnosis answers it.
BASELINE2_BODY = "2"
# Where Debian's nginx and nginx-light keep the types of file names (nginx-common).
NGINX_MIME_TYPES = "/etc/nginx/mime.types"
# brotli_static, which Debian's nginx 1.22 has as a module of its own package.
NGINX_BROTLI_STATIC = "/usr/lib/nginx/modules/ngx_http_brotli_static_module.so"
NGINX_BROTLI_STATIC_PACKAGE = "libnginx-mod-http-brotli-static"
LEVELS = {"plaintext-single": [100, 500], "plaintext-single-1worker": [50]}

# The bars' command lines before the run has a directory for them (then BARS_DIR is replaced).
BARS_DIR = "{bars_dir}"
NGINX_CONF = "nginx.conf"
NGINX_ONE_WORKER_CONF = "nginx-1worker.conf"
PLAINTEXT_BODY = "Hello, World!"  # gnosis's /plaintext
NGINX_WORKER_CONNECTIONS = 8192


def nginx_command(conf):
    return f"exec nginx -p {BARS_DIR}/ -c {BARS_DIR}/{conf}"


def json_answers(dataset_path):
    """{count: the body of `/json/{count}?m={m}`} for json's pairs, as gnosis writes it."""
    dataset = json.loads(Path(dataset_path).read_text())
    return {
        count: json.dumps(
            {"items": [dict(item, total=item["price"] * item["quantity"] * m) for item in dataset[:count]],
             "count": count},
            separators=(",", ":"),
        ).encode()
        for count, m in JSON_PAIRS
    }  # fmt: skip


def write_json_answers(directory, dataset_path):
    """json_answers as the files DIRECTORY/json/{count}, which the bars serve as /json/{count}."""
    # nginx's workers read them as nobody: a temporary directory is its owner's alone.
    os.chmod(directory, 0o755)
    folder = Path(directory) / "json"
    folder.mkdir(mode=0o755, exist_ok=True)
    for count, body in json_answers(dataset_path).items():
        (folder / str(count)).write_bytes(body)


def nginx_config(port, workers, directory, tls_port, certificate, h2c_port, h2_tls_port, static_dir):
    """The bar of issue 19: `return 200` of /plaintext's body, `workers` worker processes,
    sendfile, tcp_nodelay, no access log, keep-alive without a request limit (nginx closes a
    connection after 1,000 requests by default: gnosis does not); on `tls_port` TLS 1.3 only,
    /json/{count} from the files of write_json_answers. HttpArena's H2 tests on `h2c_port` (h2c
    by prior knowledge: nginx < 1.25's `listen ... http2` without ssl) and `h2_tls_port` (h2 over
    TLS 1.3, ALPN): /baseline2's fixed answer, and /static/ from `static_dir` with no open-file
    cache (nginx's default, said outright), so each request opens and reads its file, or its
    `.br` or `.gz` sidecar as Accept-Encoding prefers (brotli_static, gzip_static, with Vary), as
    gnosis does."""
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp = "\n".join(f"    {kind}_temp_path {directory}/{kind};" for kind in kinds)
    return f"""# Written by scripts/tool bench for one run.
load_module {NGINX_BROTLI_STATIC};
daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile {2 * NGINX_WORKER_CONNECTIONS};
pid {directory}/nginx.pid;
error_log stderr warn;

events {{
    worker_connections {NGINX_WORKER_CONNECTIONS};
}}

http {{
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests {2**31 - 1};
{temp}

    server {{
        listen {LOOPBACK}:{port} reuseport backlog=4096;
        location = /plaintext {{
            default_type text/plain;
            return 200 "{PLAINTEXT_BODY}";
        }}
        location / {{
            return 404;
        }}
    }}

    server {{
        listen {LOOPBACK}:{tls_port} ssl reuseport backlog=4096;
{tls_settings(certificate)}        location /json/ {{
            root {directory};
            default_type application/json;
        }}
        location / {{
            return 404;
        }}
    }}
{h2_server(f"{h2c_port} http2", "", static_dir)}
{h2_server(f"{h2_tls_port} ssl http2", tls_settings(certificate), static_dir)}
}}
"""


def tls_settings(certificate):
    cert, key = certificate
    return f"""        ssl_protocols TLSv1.3;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_session_tickets off;
"""


def h2_server(listen, tls, static_dir):
    """A server block of HttpArena's H2 tests: /baseline2 fixed, /static/ from disk."""
    return f"""    server {{
        listen {LOOPBACK}:{listen} reuseport backlog=4096;
{tls}        location = /baseline2 {{
            default_type text/plain;
            return 200 "{BASELINE2_BODY}";
        }}
        location /static/ {{
            alias {static_dir}/;
            include {NGINX_MIME_TYPES};
            open_file_cache off;
            brotli_static on;
            gzip_static on;
            gzip_vary on;
        }}
        location / {{
            return 404;
        }}
    }}"""


def write_nginx_configs(directory, port, tls_port, certificate, h2c_port, h2_tls_port, static_dir):
    """Both configurations (a worker per core, and one worker) in `directory`, each checked by
    `nginx -t`."""
    cores = len(os.sched_getaffinity(0))
    for name, workers in ((NGINX_CONF, cores), (NGINX_ONE_WORKER_CONF, 1)):
        path = Path(directory) / name
        path.write_text(nginx_config(port, workers, directory, tls_port, certificate, h2c_port, h2_tls_port, static_dir))
        done = subprocess.run(["nginx", "-t", "-p", f"{directory}/", "-c", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"nginx -t rejects {path}:\n{done.stderr.strip()}")
