"""gnosis's tools, one command with subcommands (scripts/tool --help):

    verify tfb          check a running server as TFB's verifier does
    verify httparena    check a running server as HttpArena's validate.sh does
    export tfb DIR      write the folder a TFB pull request adds
    export httparena DIR  write the folders an HttpArena pull request adds
    dockerfile-check    follow the TFB (or HttpArena) dockerfiles without Docker
    bench               wrk runs as TFB and HttpArena run them, side by side with other servers
    soak                a long mixed load (with faults), the server's memory and descriptors flat
    dataset             write HttpArena's json dataset (data/dataset.json)

Python 3's standard library only.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository
