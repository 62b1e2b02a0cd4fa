"""The committed data/dataset.json is `scripts/tool dataset`'s output, of HttpArena's shape."""

import json
import unittest

from gnosis_tools import dataset as gen_dataset


class CommittedDataset(unittest.TestCase):
    def test_committed_file_is_the_generators_output(self):
        self.assertEqual(gen_dataset.DEFAULT_PATH.read_text(encoding="utf-8"), gen_dataset.render(),
                         "data/dataset.json differs: run scripts/tool dataset")

    def test_the_generator_is_deterministic(self):
        self.assertEqual(gen_dataset.render(), gen_dataset.render())

    def test_shape_and_ranges_are_httparenas(self):
        items = json.loads(gen_dataset.render())
        self.assertEqual(len(items), 50)
        self.assertEqual([item["id"] for item in items], list(range(1, 51)))
        for item in items:
            self.assertEqual(list(item), ["id", "name", "category", "price", "quantity",
                                          "active", "tags", "rating"])
            self.assertEqual(list(item["rating"]), ["score", "count"])
            for number in (item["price"], item["quantity"], item["rating"]["score"],
                           item["rating"]["count"]):
                self.assertIs(type(number), int)
            self.assertTrue(1 <= item["price"] <= 500)
            self.assertTrue(1 <= item["quantity"] <= 100)
            self.assertTrue(1 <= item["rating"]["score"] <= 50)
            self.assertTrue(1 <= item["rating"]["count"] <= 500)
            self.assertIs(type(item["active"]), bool)
            self.assertTrue(1 <= len(item["tags"]) <= 4)
            self.assertEqual(len(set(item["tags"])), len(item["tags"]))
            self.assertTrue(item["name"] and item["category"])
        self.assertEqual({item["active"] for item in items}, {True, False})
