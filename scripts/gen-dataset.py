#!/usr/bin/env python3
"""Write the 50-item dataset HttpArena's json profile serves, deterministically.

    scripts/gen-dataset.py [PATH]     (default data/dataset.json)
    scripts/gen-dataset.py --check    exit 1 if data/dataset.json is not this script's output

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

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PATH = os.path.join(ROOT, "data", "dataset.json")
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default=DEFAULT_PATH)
    parser.add_argument("--check", action="store_true",
                        help="compare PATH with the generated dataset instead of writing it")
    args = parser.parse_args()
    text = render()
    if args.check:
        try:
            with open(args.path, encoding="utf-8") as existing:
                same = existing.read() == text
        except OSError:
            same = False
        if not same:
            sys.exit("gen-dataset: %s is not what scripts/gen-dataset.py writes; run it" % args.path)
        return
    os.makedirs(os.path.dirname(os.path.abspath(args.path)), exist_ok=True)
    with open(args.path, "w", encoding="utf-8") as out:
        out.write(text)


if __name__ == "__main__":
    main()
