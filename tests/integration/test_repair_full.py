"""Repairs of a full (default, non-quick) check: the re-check is quick, so the full check's training checks
(brief-training, decode-accuracy, cross-attn-pattern) are not re-run; that is no change and never a pass. Three
bugs planted in the lesson a student pastes (submissions/reversal_lesson.py) are repaired with and without
--quick, through this process and through the check daemon, and `check --fix` writes a file that checks clean."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.api import check_file
from harness.isolation import daemon
from harness.protocol import CheckSpec
from harness.repair.run import repair_check
from harness.runner import Limits
from test_daemon import _ready, _repairs, rt  # noqa: F401 - rt: the daemon's private runtime folder (a fixture)

ROOT = Path(__file__).resolve().parents[2]
LESSON = (ROOT / "submissions" / "reversal_lesson.py").read_text()
LIM = Limits(timeout_s=240, cores=2)
TRAINING = ["brief-training", "cross-attn-pattern", "decode-accuracy"]     # what the quick re-check leaves out
# bug -> (the lesson's line, its planted copy, the diagnosis, the repair's label)
BUGS = {
    "no-sqrt-dk": ("scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)", "scores = Q @ K.transpose(-2, -1)",
                   "missing-sqrt-dk", "the scores divided by sqrt(d_k)"),
    "triu-mask": ("causal = torch.tril(torch.ones(T, T", "causal = torch.triu(torch.ones(T, T",
                  "causal-mask-inverted", "torch.tril instead of torch.triu"),
    "target-not-shifted": ("tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]", "tgt_in, tgt_out = tgt[:, :-1], tgt[:, :-1]",
                           "target-not-shifted", "[1:] instead of [:-1]"),
}


def _planted(tmp_path: Path, bug: str) -> Path:
    good, bad, _, _ = BUGS[bug]
    assert LESSON.count(good) == 1
    f = tmp_path / "lesson.py"
    f.write_text(LESSON.replace(good, bad))
    return f


def _repair_of(result: dict, cause: str) -> dict:
    return next(d["repair"] for d in result["diagnoses"] if d["id"] == cause)


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_check_fix_of_a_full_check_verifies_and_writes_a_file_that_checks_clean(tmp_path, bug):
    f = _planted(tmp_path, bug)
    _, _, cause, label = BUGS[bug]
    env = dict(os.environ, MTXDIAG_DAEMON="0", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "harness", "check", str(f), "--no-daemon", "--fix",
                        "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert p.returncode == 1, p.stderr[-2000:]
    said = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith(f"repair   {cause}:"))
    assert f"repair verified (the usual fix): {label}" in said, said
    assert "not re-run by the quick re-check, not compared: " + ", ".join(TRAINING) in said, said
    res = json.loads((tmp_path / "r.json").read_text())
    assert not res["quick"] and {c["id"] for c in res["checks"]} >= set(TRAINING)     # the full suite ran
    rep = _repair_of(res, cause)
    assert rep["verified"] and rep["label"] == label and rep["not_rerun"] == TRAINING
    fixed = tmp_path / "lesson.fixed.py"
    assert fixed.exists() and "1 of 1 verified repairs applied" in p.stdout
    again = check_file(fixed, limits=LIM)                       # the written file, through a full check
    assert again["verdict"] == "clean", [(d["id"], d["title"]) for d in again["diagnoses"]]
    assert {c["id"] for c in again["checks"]} >= set(TRAINING)


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_the_same_repair_verifies_under_quick(tmp_path, bug):
    f = _planted(tmp_path, bug)
    _, _, cause, label = BUGS[bug]
    r = check_file(f, quick=True, limits=replace(LIM, coverage=True))
    repair_check(r, f, limits=LIM)
    rep = _repair_of(r, cause)
    assert rep["verified"] and rep["label"] == label and rep["not_rerun"] == []   # the quick suite: all compared


def test_the_daemon_verifies_a_full_checks_repair_as_this_process_does(rt, tmp_path):  # noqa: F811
    """`check --repair` with a daemon running: its repair of a full check is verified, the same as here."""
    f = _planted(tmp_path, "triu-mask")
    checked = check_file(f, limits=replace(LIM, coverage=True))
    spec = CheckSpec(str(f), assignment="reversal", quick=False, limits=LIM)
    daemon.start()
    _ready()
    there, here = copy.deepcopy(checked), copy.deepcopy(checked)
    assert daemon.repair(there, spec)
    repair_check(here, f, limits=LIM)
    rep = _repair_of(there, "causal-mask-inverted")
    assert rep["verified"] and rep["not_rerun"] == TRAINING
    assert _repairs(there) == _repairs(here)
