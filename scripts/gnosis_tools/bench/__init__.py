"""Benchmark gnosis (or any TFB-style server) with wrk the way TFB's scripts do.

The command starts the server itself, waits for its port, runs a primer, a warm-up and
then each level of every selected test, and writes results/<timestamp>/ with table.md,
one SVG chart per test and results.json (every wrk run, raw). With --baseline a second
server runs alternately with the first, level by level, for several rounds, and the
table reports each server's median and the ratio. See docs/BENCHMARKS.md.
"""

# The package, by role: workload (what a test sends) and a module per venue (tfb, httparena,
# nginx), put together in catalog; anchors (the other servers); gateway (the stacks of the gateway
# tests: an edge in front of an application server, and production-stack's auth service); options
# (the command line); servers, databases and proc (what runs and what it costs); load (wrk);
# schedule (the order of the runs); summary, report and chart (the results); session (one run
# from start to end).

from .options import add_arguments, parse_args
from .session import run

__all__ = ["add_arguments", "parse_args", "run"]
