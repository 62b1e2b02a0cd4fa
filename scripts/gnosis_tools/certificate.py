"""Make a TLS certificate and key to serve HTTP/1.1 over TLS with, as HttpArena mounts them.

    scripts/tool certificate DIR     writes DIR/server.crt and DIR/server.key

A self-signed RSA-2048 pair for localhost as `openssl req -x509` makes it, like HttpArena's
test pair (basic constraints CA:TRUE: clients must pin it, or not verify it, as curl -k does).
Then, for example:

    TLS_CERT=DIR/server.crt TLS_KEY=DIR/server.key target/release/gnosis
    scripts/tool verify httparena --profiles json-tls,8gbit --certificate DIR/server.crt
"""

import subprocess
from pathlib import Path


def make_pair(folder, name="server"):
    """Writes folder/NAME.crt and folder/NAME.key; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    certificate, key = folder / (name + ".crt"), folder / (name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
                    "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(certificate)],
                   check=True, capture_output=True)
    return certificate, key


def add_arguments(parser):
    parser.add_argument("folder", help="where server.crt and server.key are written")


def run(args):
    certificate, key = make_pair(args.folder)
    print("%s\n%s" % (certificate, key))
    return 0
