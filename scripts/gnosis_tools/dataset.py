"""Write the 50-item dataset HttpArena's json profile serves, deterministically.

    scripts/tool dataset [PATH]     (default data/dataset.json)
    scripts/tool dataset --check    exit 1 if data/dataset.json is not this command's output

HttpArena mounts its own data/dataset.json at /data/dataset.json; it is not in this
repository, so gnosis serves and tests with this one. The shape follows HttpArena's
json-processing docs (site/content/docs/test-profiles/h1/isolated/json-processing/
implementation.md): a JSON array of 50 objects
  {"id", "name", "category", "price", "quantity", "active", "tags": [...],
   "rating": {"score", "count"}}
with integers for every number (so `total = price * quantity * m` needs no rounding), ids
1..50 in order, and value ranges like theirs: price 1..500, quantity 1..100, 1..4 distinct
tags, rating score 1..50 and count 1..500. The words and the values are our own, drawn from a
fixed-seed splitmix64 so that every Python gives the same bytes.
"""

import json
import sys
from pathlib import Path

from . import ROOT

DEFAULT_PATH = ROOT / "data" / "dataset.json"
ITEMS = 50
SEED = 0x6E6F7369  # "nosi"

CATEGORIES = ["garden", "kitchen", "office", "outdoor", "audio", "lighting", "storage", "travel"]
MAKERS = ["Amber", "Birch", "Cobalt", "Dune", "Ember", "Fjord", "Granite", "Harbor", "Indigo",
          "Juniper", "Kestrel", "Lumen"]
THINGS = ["Lantern", "Kettle", "Bracket", "Speaker", "Satchel", "Planter", "Clamp", "Shelf",
          "Thermos", "Compass", "Hinge", "Ladder"]
TAGS = ["bestseller", "clearance", "durable", "handmade", "imported", "lightweight", "recycled",
        "refurbished", "seasonal", "waterproof"]


class SplitMix64:
    """A tiny generator with a published definition, so the output never depends on Python's."""

    MASK = (1 << 64) - 1

    def __init__(self, seed):
        self.state = seed & self.MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & self.MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.MASK
        return z ^ (z >> 31)

    def between(self, low, high):
        """An integer in low..=high (the modulo bias is irrelevant here)."""
        return low + self.next() % (high - low + 1)

    def pick(self, choices):
        return choices[self.next() % len(choices)]


def dataset():
    rng = SplitMix64(SEED)
    items = []
    for number in range(1, ITEMS + 1):
        tag_count = rng.between(1, 4)
        tags = []
        while len(tags) < tag_count:
            tag = rng.pick(TAGS)
            if tag not in tags:
                tags.append(tag)
        items.append({
            "id": number,
            "name": "%s %s" % (rng.pick(MAKERS), rng.pick(THINGS)),
            "category": rng.pick(CATEGORIES),
            "price": rng.between(1, 500),
            "quantity": rng.between(1, 100),
            "active": rng.between(0, 2) != 0,
            "tags": tags,
            "rating": {"score": rng.between(1, 50), "count": rng.between(1, 500)},
        })
    return items


def render():
    return json.dumps(dataset(), indent=2) + "\n"


def add_arguments(parser):
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--check", action="store_true",
                        help="compare PATH with the generated dataset instead of writing it")


def run(args):
    text = render()
    if args.check:
        try:
            same = args.path.read_text(encoding="utf-8") == text
        except OSError:
            same = False
        if not same:
            print("dataset: %s is not what scripts/tool dataset writes; run it" % args.path, file=sys.stderr)
            return 1
        return 0
    args.path.parent.mkdir(parents=True, exist_ok=True)
    args.path.write_text(text, encoding="utf-8")
    return 0
