"""Write the folders a venue's pull request adds, and nothing else.

    scripts/tool export tfb DIR        ->  DIR/frameworks/Rust/gnosis/
        benchmark_config.json config.toml README.md (from tfb/README.md)
        Cargo.toml Cargo.lock src/ templates/ [build.rs] gnosis.dockerfile gnosis-uring.dockerfile
    scripts/tool export httparena DIR  ->  DIR/frameworks/gnosis/  DIR/frameworks/gnosis-uring/
        each: Dockerfile (httparena/Dockerfile building NAME), meta.json (httparena/NAME/),
              compose.gateway.yml and compose.gateway-h3.yml (the gateway profiles' stacks, one
              image as proxy and server: one file, httparena/compose.gateway-h3.yml links to it),
              compose.production-stack.yml (edge, HttpArena's authsvc, server),
              Cargo.toml Cargo.lock src/ templates/ [build.rs]

DIR is usually the venue's checkout; existing folders of those names are replaced. Each folder
builds with `docker build` and nothing else. Prints the folders written, one a line.
"""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import ROOT

TFB_FILES = ("benchmark_config.json", "config.toml", "Cargo.lock", "gnosis.dockerfile", "gnosis-uring.dockerfile")
HTTPARENA_ENTRIES = ("gnosis", "gnosis-uring")
# HttpArena's gateway profiles' stacks (scripts/lib/gateway.sh names them), the same for both.
GATEWAY_COMPOSE = ("compose.gateway.yml", "compose.gateway-h3.yml", "compose.production-stack.yml")
# What an HttpArena folder takes from the TFB export: the sources, nothing of TFB's.
SOURCES = ("Cargo.toml", "Cargo.lock", "src", "templates", "build.rs")


def fresh(folder):
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def manifest_without_targets(text):
    """Cargo.toml without its [[test]], [[bench]] and [[example]] tables: they name files the
    export does not ship."""
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        if re.match(r"\[\[(test|bench|example)\]\]", line):
            skipping = True
        elif line.startswith("["):
            skipping = False
        if not skipping:
            kept.append(line)
    return "".join(kept)


def source_files():
    """src/ and templates/ (the fortunes page, compiled in by sailfish): the files git knows
    (tracked, or new and not ignored), so that editor litter stays out."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "src", "templates"],
        capture_output=True,
    )
    if listed.returncode != 0:  # not a git checkout: every file
        return [p.relative_to(ROOT) for d in ("src", "templates") for p in (ROOT / d).rglob("*") if p.is_file()]
    return [Path(name) for name in listed.stdout.decode().split("\0") if name and (ROOT / name).is_file()]


def export_tfb(directory):
    out = fresh(Path(directory) / "frameworks" / "Rust" / "gnosis")
    for name in TFB_FILES:
        shutil.copy(ROOT / name, out)
    shutil.copy(ROOT / "tfb" / "README.md", out / "README.md")
    if (ROOT / "build.rs").is_file():
        shutil.copy(ROOT / "build.rs", out)
    (out / "Cargo.toml").write_text(manifest_without_targets((ROOT / "Cargo.toml").read_text()))
    for relative in source_files():
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, out / relative)
    return [out]


def export_httparena(directory):
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        (entry,) = export_tfb(scratch)
        dockerfile = (ROOT / "httparena" / "Dockerfile").read_text()
        for name in HTTPARENA_ENTRIES:
            out = fresh(Path(directory) / "frameworks" / name)
            # HttpArena builds with no --build-arg: each folder's Dockerfile names its own binary.
            (out / "Dockerfile").write_text(re.sub(r"(?m)^ARG BIN=.*$", f"ARG BIN={name}", dockerfile))
            shutil.copy(ROOT / "httparena" / name / "meta.json", out)
            for compose in GATEWAY_COMPOSE:
                shutil.copy(ROOT / "httparena" / compose, out / compose)  # the file a link names
            for source in SOURCES:
                if (entry / source).is_dir():
                    shutil.copytree(entry / source, out / source)
                elif (entry / source).exists():
                    shutil.copy(entry / source, out)
            written.append(out)
    return written


VENUES = {"tfb": export_tfb, "httparena": export_httparena}


def add_venues(subparsers):
    for venue, export in VENUES.items():
        parser = subparsers.add_parser(venue, help=f"write {venue}'s entry folders into DIR")
        parser.add_argument("directory", metavar="DIR")
        parser.set_defaults(run=lambda args, export=export: print(*export(args.directory), sep="\n"))
