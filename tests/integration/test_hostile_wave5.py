"""Hostile submissions, fifth wave (issue 45): resources a run holds where the old limits did not look - memory as
memfd files (not address space) and disk as files unlinked while held open (not in any folder). Whatever limits
the run (a cgroup of its own where the machine delegates one, else rlimits and the parent's measurements from
outside), the instructor sees the run ended with the reason naming memory or disk, the result says which
mechanism was active, and the correct canary graded next in the same warm worker is clean at 100.

The files are in tests/hostile/wave5_*.py (a header says which base they are appended to)."""
from __future__ import annotations

import time

import pytest

from harness.isolation import cgroup, warm
from harness.limits import RUN_FOLDER_MB
from test_hostile_wave2 import MEMORY_MB, REFERENCE, assert_clean_canary, build, causes, run


@pytest.fixture
def fresh_workers():
    warm.close_all()
    yield
    warm.close_all()


def _limits_said(r):
    assert r["limits"]["enforced_by"] == cgroup.detect().enforced_by, r.get("limits")
    assert r["limits"]["memory_mb"] == MEMORY_MB and r["limits"]["disk_mb"] == RUN_FOLDER_MB, r["limits"]


def _canary_after(warm_run: bool):
    canary = run(REFERENCE, warm_run=warm_run)
    if warm_run:
        assert canary["timings"].get("torch_import_s", 1) < 0.05, "not the same warm worker"
    assert_clean_canary(canary)
    _limits_said(canary)


@pytest.mark.parametrize("warm_run", [False, True], ids=["cold", "warm"])
def test_memory_held_in_memfds_ends_the_run_as_memory(tmp_path, warm_run, fresh_workers):
    """36 memfds of 60 MB held open under a 2 GB limit: no address space, so RLIMIT_AS never fired; the run's
    cgroup or the parent's count of what it holds as files ends it, as `memory-limit`, long before its 60 s wait."""
    t = time.monotonic()
    r = run(build("wave5_memfd", tmp_path / "m"), warm_run=warm_run)
    assert r["verdict"] == "error" and causes(r) == ["memory-limit"], (causes(r), r.get("error"))
    reason = r["error"]["reason"]
    assert f"{MEMORY_MB} MB" in reason and ("memfd" in reason or "cgroup" in reason), reason
    assert r["error"]["student_fault"] is True
    assert time.monotonic() - t < 45, "ended by the timeout or the file's own wait, not by the memory limit"
    _limits_said(r)
    _canary_after(warm_run)


@pytest.mark.parametrize("warm_run", [False, True], ids=["cold", "warm"])
def test_disk_held_in_unlinked_open_files_ends_the_run_as_disk(tmp_path, warm_run, fresh_workers):
    """360 MB in files unlinked while held open (and, warm, a copy beside the run folder in the worker's): the
    folder's walk sees almost nothing; the parent counts the held files' blocks and ends the run past its limit."""
    t = time.monotonic()
    r = run(build("wave5_unlinked", tmp_path / "u"), warm_run=warm_run)
    assert r["verdict"] == "error" and causes(r) == ["crashed"], (causes(r), r.get("error"))
    reason = r["error"]["reason"]
    assert f"limit of {RUN_FOLDER_MB} MB" in reason and "unlinked while holding them open" in reason, reason
    assert time.monotonic() - t < 45, "ended by the timeout or the file's own wait, not by the disk limit"
    _limits_said(r)
    _canary_after(warm_run)
