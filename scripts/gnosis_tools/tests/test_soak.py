"""Self-test of `scripts/tool soak`'s choices and verdict (the soak itself runs for minutes: not here)."""

import io
import unittest
from contextlib import redirect_stdout

from gnosis_tools import soak


class Settings(unittest.TestCase):
    def test_defaults_and_variables(self):
        s = soak.Settings.from_environment({})
        self.assertEqual((s.port, s.profile, s.binary), (8090, "release", "gnosis"))
        self.assertEqual(s.pg_env, {"GNOSIS_PG_DIR": "/tmp/gnosis-soak-pg", "GNOSIS_PG_PORT": "55439",
                                    "GNOSIS_PG_SOCKET_DIRS": "/tmp/gnosis-soak-pg/socket"})  # fmt: skip
        s = soak.Settings.from_environment({"SOAK_BINARY": "gnosis-uring", "SOAK_PROFILE": "debug", "SOAK_PORT": "9"})
        self.assertEqual((s.port, s.profile, s.binary), (9, "debug", "gnosis-uring"))

    def test_refuses_the_shared_cluster_and_unknown_choices(self):
        for environ in ({"SOAK_PG_PORT": "55432"}, {"SOAK_PG_DIR": "/tmp/gnosis-pg"}, {"SOAK_BINARY": "faf"},
                        {"SOAK_PROFILE": "bench"}):  # fmt: skip
            with self.assertRaises(ValueError, msg=environ):
                soak.Settings.from_environment(environ)


class Verdict(unittest.TestCase):
    # (seconds, rss_kib, fds) every 10 s; the base is the sample at 60 s, or the last before the faults.
    SAMPLES = [(t, 5000, 200) for t in range(0, 80, 10)]

    def verdict(self, samples, after_fds=10, faults_at=None):
        with redirect_stdout(io.StringIO()) as out:
            status = soak.verdict(samples, 9, after_fds, faults_at)
        return status, out.getvalue()

    def test_flat(self):
        status, said = self.verdict(self.SAMPLES[:-1] + [(70, 5500, 216)])
        self.assertEqual(status, 0)
        self.assertIn("soak: flat (rss_kib:fds at 60 s 5000:200, at the end 5500:216; 10 descriptors", said)

    def test_growth_and_leftovers(self):
        self.assertEqual(self.verdict(self.SAMPLES[:-1] + [(70, 5501, 200)])[0], 1)
        self.assertEqual(self.verdict(self.SAMPLES[:-1] + [(70, 5000, 217)])[0], 1)
        status, said = self.verdict(self.SAMPLES, after_fds=14)
        self.assertEqual(status, 1)
        self.assertIn("descriptors left behind: 9 before the load, 14 after it", said)

    def test_with_faults_the_base_is_before_the_hang(self):
        samples = [(0, 3000, 300), (10, 4000, 200), (20, 9000, 400), (30, 4300, 205)]
        status, said = self.verdict(samples, faults_at=15)
        self.assertEqual(status, 0)
        self.assertIn("at 10 s, before the faults 4000:200", said)
