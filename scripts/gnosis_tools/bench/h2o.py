"""h2o, the field's leader in HttpArena's HTTP/2 family, as a bar (Debian's h2o, configured here):
the nginx tests' /plaintext and, over TLS 1.3, json-tls's answers from the files nginx.py writes."""

import os
import subprocess
from pathlib import Path

from ..system import LOOPBACK, SetupError
from .nginx import BARS_DIR, PLAINTEXT_BODY

H2O_CONF = "h2o.conf"
H2O_ONE_WORKER_CONF = "h2o-1worker.conf"


def h2o_command(conf):
    return f"exec h2o -c {BARS_DIR}/{conf}"


def h2o_config(port, threads, directory, tls_port, certificate):
    """`threads` event loops, no access log, no OCSP stapling (the test certificate has no
    responder), as root (h2o would switch to nobody, who cannot read the certificate)."""
    cert, key = certificate
    return f"""# Written by scripts/tool bench for one run.
user: root
num-threads: {threads}
pid-file: {directory}/h2o-{threads}.pid
access-log: /dev/null
listen:
  host: {LOOPBACK}
  port: {port}
listen:
  host: {LOOPBACK}
  port: {tls_port}
  ssl:
    certificate-file: {cert}
    key-file: {key}
    min-version: TLSv1.3
    ocsp-update-interval: 0
hosts:
  default:
    paths:
      /plaintext:
        file.file: {directory}/plaintext
        file.mime.setdefaulttype: text/plain
      /json:
        file.dir: {directory}/json
        file.mime.setdefaulttype: application/json
"""


def write_h2o_configs(directory, port, tls_port, certificate):
    """Both configurations (a thread per core, and one) in `directory`, each checked by `h2o -t`;
    /plaintext's body beside them."""
    (Path(directory) / "plaintext").write_text(PLAINTEXT_BODY)
    cores = len(os.sched_getaffinity(0))
    for name, threads in ((H2O_CONF, cores), (H2O_ONE_WORKER_CONF, 1)):
        path = Path(directory) / name
        path.write_text(h2o_config(port, threads, directory, tls_port, certificate))
        done = subprocess.run(["h2o", "-t", "-c", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"h2o -t rejects {path}:\n{(done.stdout + done.stderr).strip()}")
