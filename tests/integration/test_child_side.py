"""The training probes in a second process (harness/child/side.py): the same result as one process, and a
side process that dies or runs out of memory is reported, never lost or mistaken for a pass."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import mutants
from harness.api import check_file
from harness.runner import Limits
from mutants.lm_export import mutant_repo_files, reference_repo_files
from mutants.lm_registry import lm_get

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "submissions" / "reversal_lesson.py"
two_cores = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the side process is used with 2 cores or more")


def _same(r: dict) -> dict:
    """What must not depend on how many processes ran the probes: every check, every diagnosis, the pictures."""
    checks = [(c["id"], c["status"], json.dumps(c.get("measured"), sort_keys=True), json.dumps(c.get("location")))
              for c in r["checks"]]
    diags = [(d["id"], d["confidence"], json.dumps(d.get("location"))) for d in r["diagnoses"]]
    return {"verdict": r["verdict"], "checks": checks, "diagnoses": diags, "artifacts": sorted(r.get("artifacts")
                                                                                                 or {})}


def write_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _lesson_with(tmp_path, name: str, fragment: str, **limits) -> dict:
    """A quick check, on two cores, of the lesson's code with `fragment` appended."""
    p = tmp_path / f"{name}.py"
    p.write_text(LESSON.read_text() + fragment)
    return check_file(p, quick=True, limits=Limits(**{"timeout_s": 240, "cores": 2, **limits}))


def _both(path, **kw):
    one = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=1), **kw)
    two = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=2), **kw)
    return one, two


def _mutant_file(tmp_path, mid: str) -> Path:
    m = mutants.get(mid)
    p = tmp_path / f"{mid}.py"
    p.write_text(mutants.source(m))
    return p


@two_cores
@pytest.mark.parametrize("mid", [None, "reversal-target-not-shifted", "reversal-no-warmup",
                                 "reversal-softmax-wrong-dim"])
def test_reversal_side_process_gives_the_same_result(tmp_path, mid):
    path = LESSON if mid is None else _mutant_file(tmp_path, mid)
    one, two = _both(path)
    assert two["timings"].get("side_process") == 1 and "side_process" not in one["timings"]
    assert _same(one) == _same(two)
    assert {"trace", "overfit"} <= set(two["artifacts"])        # the side's pictures came back


@two_cores
@pytest.mark.parametrize("mid", [None, "lm-adamw-no-bias-correction", "lm-schedule-no-floor"])
def test_lm_side_process_gives_the_same_result(tmp_path, mid):
    repo = tmp_path / "repo"
    write_repo(repo, reference_repo_files() if mid is None else mutant_repo_files(lm_get(mid)))
    one, two = _both(repo, assignment="lm")
    assert two["timings"].get("side_process") == 1
    assert _same(one) == _same(two)
    if mid is not None:
        assert two["diagnoses"][0]["location"] is not None


CRASH = '''

import os as _os
_train = train


def train(*a, **k):                      # the training check's process dies mid-way
    _os.kill(_os.getpid(), 9)
'''


@two_cores
def test_a_side_process_that_dies_is_reported_on_its_checks(tmp_path):
    r = _lesson_with(tmp_path, "crash", CRASH)
    by = {c["id"]: c for c in r["checks"]}
    assert by["train-trace"]["status"] == "error" and "signal 9" in by["train-trace"]["detail"], by["train-trace"]
    assert by["overfit"]["status"] == "error"
    assert by["causal-leak"]["status"] == "pass"            # the other checks' results are kept
    assert r["verdict"] != "clean"


HOG = '''

import torch as _torch


def train(*a, **k):                      # the training check's process runs out of memory
    keep = []
    while True:
        keep.append(_torch.ones(256, 1024, 1024))
'''


@two_cores
def test_running_out_of_memory_in_the_side_process_ends_the_check_as_out_of_memory(tmp_path):
    r = _lesson_with(tmp_path, "hog", HOG, memory_mb=3072)
    assert (r.get("error") or {}).get("kind") == "memory", (r.get("error"), [d["id"] for d in r["diagnoses"]])


HANG = '''

def train(model, steps=3000, **kw):
    while True:                          # the training check's process never ends
        pass
'''


@two_cores
def test_a_training_check_that_hangs_is_located_at_the_students_line(tmp_path):
    """The parent asks the first process for its stack; it only waits, so the fork's stack is the answer."""
    text = LESSON.read_text() + HANG
    p = tmp_path / "hang.py"
    p.write_text(text)
    line = text.splitlines().index("    while True:                          # the training check's process never ends") + 1
    r = check_file(p, quick=True, limits=Limits(timeout_s=25, cores=2))
    assert (r.get("error") or {}).get("kind") == "timeout", r.get("error")
    assert r["error"]["phase"] == "train-trace", r["error"]          # the fork's probe, passed on as the phase
    top = r["diagnoses"][0]
    assert top["id"] == "timeout" and (top.get("location") or {}).get("line") in (line, line + 1), top


SNEAKY = '''

import os as _os
import torch as _torch
_real_train = train


def train(model, *a, **k):               # outside its lane, from inside the training check
    print("PRINTED-BY-TRAIN")
    _os.listdir("/")
    _torch.tanh = lambda x: x
    return _real_train(model, *a, **k)
'''


@two_cores
def test_what_the_fork_saw_the_student_do_is_reported(tmp_path):
    p = tmp_path / "sneaky.py"
    p.write_text(LESSON.read_text() + SNEAKY)
    one, two = _both(p)
    for r in (one, two):
        by = {c["id"]: c for c in r["checks"]}
        assert "forbidden-ops" in by and "list /" in by["forbidden-ops"]["detail"], by.get("forbidden-ops")
        assert "tamper" in by and "torch.tanh" in by["tamper"]["detail"], by.get("tamper")
        assert "PRINTED-BY-TRAIN" in r["stdout"]
    assert {d["id"] for d in one["diagnoses"]} == {d["id"] for d in two["diagnoses"]}


FORGER = '''

import os as _os
import stat as _stat


def train(*a, **k):                      # writes a report of its own to the pipes it can see, then ends
    forged = b'R{"checks": {"train-trace": [], "overfit": []}, "timings": {}}\\n'
    for fd in range(3, 20):
        try:
            if _stat.S_ISFIFO(_os.fstat(fd).st_mode):
                _os.write(fd, forged)
        except OSError:
            pass
    _os._exit(0)
'''


@two_cores
def test_a_report_forged_by_the_fork_is_not_taken(tmp_path):
    """Without the key the first process holds, a report written to the pipe is no report."""
    r = _lesson_with(tmp_path, "forger", FORGER)
    by = {c["id"]: c for c in r["checks"]}
    assert by["train-trace"]["status"] == "error" and "could not be read" in by["train-trace"]["detail"], \
        by.get("train-trace")
    assert by["overfit"]["status"] == "error"


@two_cores
@pytest.mark.parametrize("mid", [None, "reversal-softmax-wrong-dim", "reversal-stale-mask", "block-causal-mask-missing"])
def test_a_recheck_balanced_by_timings_gives_the_same_result(tmp_path, mid, monkeypatch):
    """A repair's re-check shares the forward probes too (Limits.costs, child_side.shares: both processes draw
    from one queue): the same checks. A block file runs split by default (its probes in a prober, which has no
    side fork: one server connection); in one process (a block notebook, MTXDIAG_PACK_SPLIT=0) it shares."""
    from harness.isolation import split
    monkeypatch.setenv(split.SWITCH, "0")
    path = LESSON if mid is None else _mutant_file(tmp_path, mid)
    one = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=1))
    costs = ",".join(f"{k}:{v}" for k, v in one["timings"].items() if isinstance(v, float) and not k.endswith("_s"))
    two = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=2, costs=costs))
    assert two["timings"].get("side_process") == 1
    assert _same(one) == _same(two)


@two_cores
def test_a_shared_recheck_whose_fork_dies_reports_what_it_drew_and_runs_the_rest_here(tmp_path):
    """Shared (a re-check with timings): the fork draws the longest probe (train-trace) while the first process
    runs its gate probe; the fork dies in the student's train(). Its probe is an error that says so; what it
    never drew is drawn by the first process and measured (overfit passes), so nothing is lost or made up."""
    p = tmp_path / "crash.py"
    p.write_text(LESSON.read_text() + CRASH)
    one = check_file(LESSON, quick=True, limits=Limits(timeout_s=240, cores=1))
    from harness.checks import DECLARED, PROBE_OF
    took = {k: v for k, v in one["timings"].items() if k in DECLARED}
    costs = ",".join(f"{k}:{v}" for k, v in took.items())
    assert max(took, key=took.get) == "train-trace", took
    r = check_file(p, quick=True, limits=Limits(timeout_s=240, cores=2, costs=costs, gate="causal-leak"))
    by = {c["id"]: c for c in r["checks"]}
    assert by["train-trace"]["status"] == "error" and "signal 9" in by["train-trace"]["detail"], by["train-trace"]
    assert by["overfit"]["status"] == "pass" and by["causal-leak"]["status"] == "pass"
    after = {c["id"]: c["status"] for c in r["checks"]}
    for c in one["checks"]:         # a fixed split would have lost every probe given to the fork with it
        if PROBE_OF.get(c["id"], c["id"]) != "train-trace":
            assert after.get(c["id"]) == c["status"], (c["id"], after.get(c["id"]), c["status"])


@two_cores
def test_a_gated_recheck_stops_at_the_first_gate_check_that_fails_and_keeps_what_ran(tmp_path):
    """Limits.gate (a repair's re-check): a failing gate check stops the run; what ran measured what it does in
    a full run; a passing gate changes nothing."""
    path = _mutant_file(tmp_path, "reversal-softmax-wrong-dim")
    full = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=1))
    costs = ",".join(f"{k}:{v}" for k, v in full["timings"].items() if isinstance(v, float) and not k.endswith("_s"))
    by = {c["id"]: c for c in full["checks"]}
    assert by["attn-rows-sum"]["status"] == "fail" and by["shapes"]["status"] == "pass"
    gated = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=2, costs=costs, gate="attn-rows-sum"))
    assert gated["timings"].get("gated") == 1
    ids = [c["id"] for c in gated["checks"]]
    assert "attn-rows-sum" in ids and len(ids) < len(full["checks"]) and "overfit" not in ids
    for c in gated["checks"]:
        assert (c["status"], c.get("measured")) == (by[c["id"]]["status"], by[c["id"]].get("measured")), c["id"]
    open_gate = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=2, costs=costs, gate="shapes,overfit"))
    assert "gated" not in open_gate["timings"]
    two = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=2, costs=costs))
    assert _same(open_gate) == _same(two)


@two_cores
def test_a_gate_that_fails_in_the_fork_stops_the_first_process_too(tmp_path):
    """Without timings the training probes run in the fork: its gate failure comes back on the pipe (`G`), the
    fork reports what it ran, and its later probes do not run."""
    path = _mutant_file(tmp_path, "reversal-target-not-shifted")
    gated = check_file(path, quick=True, limits=Limits(timeout_s=240, cores=2, gate="train-shift"))
    by = {c["id"]: c for c in gated["checks"]}
    assert gated["timings"].get("gated") == 1 and gated["timings"].get("side_process") == 1
    assert by["train-shift"]["status"] == "fail" and "overfit" not in by
