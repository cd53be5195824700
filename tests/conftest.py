"""Test-wide settings.

The per-user check daemon (harness/isolation/daemon.py) is off for every test but the ones that test it
(tests/integration/test_daemon.py turns it on with a private runtime folder): a `check` driven through the CLI must not
leave a background process behind on the machine that runs the tests, nor find one a user started."""
import os

import pytest

os.environ["MTXDIAG_DAEMON"] = "0"
if os.environ.get("PYTEST_XDIST_WORKER"):
    # an xdist worker is handed the controller's terminal width as COLUMNS; the tests read output as a pipe gives it
    os.environ.pop("COLUMNS", None)


# ---------------------------------------------------------------- running the tiers on several cores (pytest-xdist)
# README's test command runs the suite with `-n auto --dist loadgroup`: each worker takes whole groups. A group is
# one test file (its module fixtures are built once), except where files share a session fixture that must be built
# once: the journey tier's installed wheel (test_hostile.py's pool of hostile runs is one file's already).
# Groups start longest first (the measured cost below, seconds of one file alone on a 2-core machine), so that the
# last group to start is a short one; a file not listed is short and starts after them in collection order.
SHARED_GROUPS = {"tests/journeys/": "journeys", "tests/integration/test_hostile.py": "hostile"}
COST_S: dict[str, float] = {       # from one -n 2 run of the whole suite here (2026-12-07), rounded
    "hostile": 1600, "journeys": 650, "tests/integration/test_check_cli.py": 480,
    "tests/integration/test_pack_split.py": 420, "tests/quality/test_selftest_lm.py": 360,
    "tests/integration/test_warm.py": 300, "tests/integration/test_hostile_wave2.py": 300,
    "tests/integration/test_child_side.py": 300, "tests/quality/test_lmdiag_bars.py": 300,
    "tests/quality/test_selftest.py": 200}


def _group(item) -> str:
    path = item.nodeid.split("::", 1)[0]
    return next((g for prefix, g in SHARED_GROUPS.items() if path.startswith(prefix)), path)


def pytest_configure(config):
    # keep the order set below (xdist would otherwise start the groups with the most tests first)
    if getattr(config.option, "numprocesses", None):
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)      # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):      # collected by an xdist worker (the controller collects nothing)
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    first_seen = {g: n for n, g in enumerate(dict.fromkeys(_group(i) for i in items))}
    items.sort(key=lambda i: (-COST_S.get(_group(i), 0.0), first_seen[_group(i)]))
