"""The HTTP core against nginx (issue 19): TFB's plaintext with one request in flight per
connection, served by Debian's nginx (nginx-light) configured here, a worker per core or one."""

import os
import subprocess
from pathlib import Path

from ..system import LOOPBACK, SetupError
from .tfb import ACCEPT_PLAIN
from .workload import Test

TESTS = [
    Test("plaintext-single", "/plaintext", "connections", ACCEPT_PLAIN),
    Test("plaintext-single-1worker", "/plaintext", "connections", ACCEPT_PLAIN, one_worker=True),
]
GROUPS = {"nginx": [t.name for t in TESTS]}
LEVELS = {"plaintext-single": [100, 500], "plaintext-single-1worker": [50]}

# nginx's command lines before the run has a directory for it (then NGINX_DIR is replaced).
NGINX_DIR = "{nginx_dir}"
NGINX_CONF = "nginx.conf"
NGINX_ONE_WORKER_CONF = "nginx-1worker.conf"
PLAINTEXT_BODY = "Hello, World!"  # gnosis's /plaintext
NGINX_WORKER_CONNECTIONS = 8192


def nginx_command(conf):
    return f"exec nginx -p {NGINX_DIR}/ -c {NGINX_DIR}/{conf}"


def nginx_config(port, workers, directory):
    """The bar of issue 19: `return 200` of /plaintext's body, `workers` worker processes,
    sendfile, tcp_nodelay, no access log, keep-alive without a request limit (nginx closes a
    connection after 1,000 requests by default: gnosis does not)."""
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
}}
"""


def write_nginx_configs(directory, port):
    """Both configurations (a worker per core, and one worker) in `directory`, each checked by
    `nginx -t`."""
    cores = len(os.sched_getaffinity(0))
    for name, workers in ((NGINX_CONF, cores), (NGINX_ONE_WORKER_CONF, 1)):
        path = Path(directory) / name
        path.write_text(nginx_config(port, workers, directory))
        done = subprocess.run(["nginx", "-t", "-p", f"{directory}/", "-c", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"nginx -t rejects {path}:\n{done.stderr.strip()}")
