"""A repair's first re-check forked before its candidate exists (harness/repair/early.py), then told its run: the same
result as a run started as usual, its worker kept clean and reused, and a fork told nothing runs nothing."""
from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.repair import early
from harness.isolation import sandbox, warm
from harness.api import check_file
from harness.protocol import EXIT_CHANNEL, CheckSpec, Limits

from compare_results import comparable

ROOT = Path(__file__).resolve().parents[2]
BUG = ROOT / "tests" / "corpus" / "reversal" / "bugs" / "double_softmax.py"
# as a re-check's: two processes sharing the probes by the checked run's costs, the measured slowdown given
LIM = Limits(timeout_s=240, warm=True, cores=2, slowdown=1.0, costs="decode-consistency:0.13,causal-leak:0.05")
LATE = {"only_probes": "causal-leak,padding-invariance,shapes", "gate": "causal-leak"}


@pytest.fixture(autouse=True)
def _retire_workers():
    yield
    warm.close_all()


@pytest.fixture
def copy(tmp_path):
    f = tmp_path / "model.py"
    f.write_text(BUG.read_text(encoding="utf-8"), encoding="utf-8")
    return f


def _check(path, early_run=None, **kw):
    return check_file(path, assignment="reversal", quick=True, limits=replace(LIM, **LATE), early=early_run, **kw)


def _loaded(r) -> bool:
    return any(c["id"] == "contract" and c["status"] == "pass" for c in r["checks"])


def _idle() -> int:
    return warm.idle_count(sandbox.mode("auto"), LIM.threads)


def test_an_early_fork_told_its_run_gives_the_usual_result_and_keeps_its_worker(copy):
    usual = _check(copy)
    e = early.launch(CheckSpec(str(copy), assignment="reversal", quick=True, limits=LIM))
    assert e is not None and _idle() == 0          # the worker is the fork's until its run ends
    runs = e.worker.runs
    got = _check(copy, e)
    assert e.used and _loaded(got)
    assert comparable(got) == comparable(usual)
    assert {c["id"] for c in got["checks"]} <= {"contract", "causal-leak", "padding-invariance", "shapes"}, \
        "the fork ran other probes than the late limits named"
    assert got["timings"].get("gated") == 1                  # the gate it was told stopped it (the bug leaks)
    assert _idle() == 1 and e.worker.alive() and e.worker.runs == runs


def test_a_fork_given_up_ends_before_loading_and_its_worker_runs_the_next_check(copy):
    e = early.launch(CheckSpec(str(copy), assignment="reversal", quick=True, limits=LIM))
    worker = e.worker
    e.cancel()
    assert _idle() == 1 and worker.alive(), "the worker was retired: the next check would pay a new one"
    assert not any(worker.slot.iterdir()), "the fork's folder was left"
    r = _check(copy)
    assert _loaded(r) and worker.runs == 2 and worker.alive()


def test_a_run_the_fork_was_not_started_for_starts_as_usual(copy):
    e = early.launch(CheckSpec(str(copy), assignment="reversal", quick=True, limits=LIM))
    other = _check(copy, e, seed=3)          # another seed: not what the fork was started with
    assert e.used and _loaded(other)
    assert comparable(other) == comparable(_check(copy, seed=3))
    assert _idle() == 1


def test_a_fork_sent_no_valid_run_exits_without_a_result(copy):
    e = early.launch(CheckSpec(str(copy), assignment="reversal", quick=True, limits=LIM))
    run, r, out, err, key_w = e.handles
    e.used = True
    os.write(key_w, b"0123456789abcdef\n{\"timeout_s\": \"1\"}\n")     # a limit that is not LATE's
    os.close(key_w)
    try:
        assert run.wait(time.monotonic() + 60) is True and run.returncode == EXIT_CHANNEL
        assert os.read(r, 1 << 16) == b"", "the fork wrote on its result channel"
        run.kill()
    finally:
        for fd in (r, out, err):
            os.close(fd)
        warm.release(e.worker)
    assert e.worker.alive()
