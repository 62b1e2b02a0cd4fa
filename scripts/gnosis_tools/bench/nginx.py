"""The HTTP core against nginx (issue 19): TFB's plaintext with one request in flight per
connection, served by Debian's nginx (nginx-light) configured here, a worker per core or one;
and over TLS 1.3 the answers of HttpArena's json-tls, written to files beforehand (the bar of the
TLS and HTTP work without the JSON's; h2o.py serves the same files)."""

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
# What the bars (nginx, h2o) serve: the nginx tests, and json-tls from files.
BAR_TESTS = tuple(GROUPS["nginx"]) + ("json-tls",)
FIXED_ANSWERS_NOTE = (
    "answers json-tls from files written before the run (the same bytes as gnosis's answers): the "
    "cost of TLS and HTTP without the JSON's, a bar from below"
)
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


def nginx_config(port, workers, directory, tls_port, certificate):
    """The bar of issue 19: `return 200` of /plaintext's body, `workers` worker processes,
    sendfile, tcp_nodelay, no access log, keep-alive without a request limit (nginx closes a
    connection after 1,000 requests by default: gnosis does not); on `tls_port` TLS 1.3 only,
    /json/{count} from the files of write_json_answers."""
    cert, key = certificate
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp = "\n".join(f"    {kind}_temp_path {directory}/{kind};" for kind in kinds)
    return f"""# Written by scripts/tool bench for one run.
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
        ssl_protocols TLSv1.3;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_session_tickets off;
        location /json/ {{
            root {directory};
            default_type application/json;
        }}
        location / {{
            return 404;
        }}
    }}
}}
"""


def write_nginx_configs(directory, port, tls_port, certificate):
    """Both configurations (a worker per core, and one worker) in `directory`, each checked by
    `nginx -t`."""
    cores = len(os.sched_getaffinity(0))
    for name, workers in ((NGINX_CONF, cores), (NGINX_ONE_WORKER_CONF, 1)):
        path = Path(directory) / name
        path.write_text(nginx_config(port, workers, directory, tls_port, certificate))
        done = subprocess.run(["nginx", "-t", "-p", f"{directory}/", "-c", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"nginx -t rejects {path}:\n{done.stderr.strip()}")
