"""Every test `scripts/tool bench` runs, by name, with the groups --tests takes and the levels
of each --profile: the venues' modules put together."""

from . import httparena, nginx, tfb

VENUES = (tfb, httparena, nginx)
TESTS = {t.name: t for venue in VENUES for t in venue.TESTS}
TEST_GROUPS = {group: tests for venue in VENUES for group, tests in venue.GROUPS.items()}
DB_TESTS = tfb.DB_TESTS + httparena.READS_ARENA_DB  # the tests that read a database, TFB's or HttpArena's

OTHER_LEVELS = {**httparena.LEVELS, **nginx.LEVELS}  # the same in every profile
PROFILES = {
    "tfb": dict(tfb.TIMINGS, levels={**tfb.LEVELS, **OTHER_LEVELS}),
    "quick": dict(duration=5, warmup=2, primer=1, pause_after_warmup=1, pause_between_levels=0.5,
                  levels={**tfb.QUICK_LEVELS, **OTHER_LEVELS}),  # fmt: skip
}


def expand_tests(text):
    """The tests of a --tests list, each group replaced by its tests, each test once, in order."""
    tests = []
    for word in (w.strip() for w in text.split(",")):
        for test in TEST_GROUPS.get(word, [word] if word else []):
            if test not in tests:
                tests.append(test)
    return tests
