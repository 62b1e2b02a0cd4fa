"""h2o, the field's leader in HttpArena's HTTP/2 family, as a bar (Debian's h2o, configured here):
the nginx tests' /plaintext and, over TLS 1.3, json-tls's answers from the files nginx.py writes;
HttpArena's H2 tests: /baseline2's fixed answer from a file over h2c and h2 (TLS, ALPN), and
static-h2's files from HttpArena's directory."""

import os
import subprocess
from pathlib import Path

from ..system import LOOPBACK, SetupError
from .nginx import BARS_DIR, BASELINE2_BODY, PLAINTEXT_BODY

H2O_CONF = "h2o.conf"
H2O_ONE_WORKER_CONF = "h2o-1worker.conf"
STATIC_NOTE = (
    "keeps a file it opened open until its event loop's turn ends (h2o 2.2.5's open-file cache, "
    "which no setting turns off): requests of one turn for one file share one open, so it reads "
    "the disk less often than once per request; and it sends every file as it is (3.9 times the "
    "bytes of the .br sidecars gnosis and nginx send, over the 20 files): h2o 2.2.5 reads no "
    "q-value, so `br;q=1, gzip;q=0.8` names no coding it knows (file.send-compressed is on, and "
    "serves a bare `br` or `gzip`)"
)


def h2o_command(conf):
    return f"exec h2o -c {BARS_DIR}/{conf}"


def h2o_config(port, threads, directory, tls_port, certificate, h2c_port, h2_tls_port, static_dir):
    """`threads` event loops, no access log, no OCSP stapling (the test certificate has no
    responder), as root (h2o would switch to nobody, who cannot read the certificate). h2o takes
    h2c by prior knowledge on any port in the clear, and h2 by ALPN on a TLS one: `h2c_port` and
    `h2_tls_port` serve /baseline2's fixed answer and /static/ from `static_dir`, each file or its
    `.br` or `.gz` sidecar as Accept-Encoding asks (file.send-compressed, as HttpArena's h2o
    entry has it; but see STATIC_NOTE)."""
    tls = tls_listen(certificate)
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
{tls}
listen:
  host: {LOOPBACK}
  port: {h2c_port}
listen:
  host: {LOOPBACK}
  port: {h2_tls_port}
{tls}
hosts:
  default:
    paths:
      /plaintext:
        file.file: {directory}/plaintext
        file.mime.setdefaulttype: text/plain
      /json:
        file.dir: {directory}/json
        file.mime.setdefaulttype: application/json
      /baseline2:
        file.file: {directory}/baseline2
        file.mime.setdefaulttype: text/plain
      /static:
        file.dir: {static_dir}
        file.send-compressed: ON
"""


def tls_listen(certificate):
    cert, key = certificate
    return f"""  ssl:
    certificate-file: {cert}
    key-file: {key}
    min-version: TLSv1.3
    ocsp-update-interval: 0"""


def write_h2o_configs(directory, port, tls_port, certificate, h2c_port, h2_tls_port, static_dir):
    """Both configurations (a thread per core, and one) in `directory`, each checked by `h2o -t`;
    the bodies of /plaintext and /baseline2 beside them."""
    (Path(directory) / "plaintext").write_text(PLAINTEXT_BODY)
    (Path(directory) / "baseline2").write_text(BASELINE2_BODY)
    cores = len(os.sched_getaffinity(0))
    for name, threads in ((H2O_CONF, cores), (H2O_ONE_WORKER_CONF, 1)):
        path = Path(directory) / name
        path.write_text(h2o_config(port, threads, directory, tls_port, certificate, h2c_port, h2_tls_port, static_dir))
        done = subprocess.run(["h2o", "-t", "-c", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"h2o -t rejects {path}:\n{(done.stdout + done.stderr).strip()}")
