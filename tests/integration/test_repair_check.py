"""End-to-end repairs (issue 30): a mutant's diagnosis is proven by an edit re-checked in the sandbox, `check
--fix` writes the patched copy beside the file, and correct code gets no repair at all."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.api import check_file
from harness.repair.run import repair_check
from harness.runner import Limits
from mutants.registry import MUTANTS

ROOT = Path(__file__).resolve().parents[2]
LIM = Limits(warm=True)


def _mutant(tmp_path, mid) -> Path:
    m = next(m for m in MUTANTS if m.id == mid)
    f = tmp_path / "model.py"
    f.write_text(m.source())
    return f


def test_softmax_axis_repair_is_verified_with_numbers(tmp_path):
    f = _mutant(tmp_path, "block-softmax-wrong-dim")
    r = check_file(f, quick=True, limits=LIM)
    assert r["diagnoses"][0]["id"] == "softmax-wrong-dim"
    repair_check(r, f, limits=LIM)
    rep = r["diagnoses"][0]["repair"]
    assert rep["verified"] and rep["found_by"] == "catalogue"
    assert "-        weights = F.softmax(scores, dim=-2)" in rep["diff"] and "dim=-1)" in rep["diff"]
    assert rep["changes"] and all(" -> " in c for c in rep["changes"])
    assert f.read_text() == next(m for m in MUTANTS if m.id == "block-softmax-wrong-dim").source()   # untouched


def test_correct_file_gets_no_repair(tmp_path):
    f = tmp_path / "block.py"
    f.write_text((ROOT / "reference_model" / "block.py").read_text())
    r = check_file(f, quick=True, limits=LIM)
    assert r["verdict"] == "clean"
    assert repair_check(r, f, limits=LIM) is None
    assert not any("repair" in d for d in r["diagnoses"])


def test_check_fix_writes_a_patched_copy_beside_the_file(tmp_path):
    f = _mutant(tmp_path, "block-missing-sqrt-dk")
    before = f.read_text()
    env = dict(os.environ, MTXDIAG_DAEMON="0", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "harness", "check", str(f), "--quick", "--no-daemon", "--fix",
                        "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert p.returncode == 1, p.stderr[-2000:]
    assert f.read_text() == before
    fixed = tmp_path / "model.fixed.py"
    assert fixed.exists() and "repair verified" in p.stdout
    assert fixed.read_text() != before and len(fixed.read_text().splitlines()) == len(before.splitlines())
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["schema"] == 1 and res["diagnoses"][0]["repair"]["verified"]
    assert "the edit, re-checked in the sandbox" in (tmp_path / "r.html").read_text()


def test_the_record_of_reached_functions_narrows_the_recheck_and_changes_no_check(tmp_path):
    """With the record (check --repair), the same checks are measured as without it, and the repair of a
    training-loop bug re-runs only the probe that ran train(): the model's probes are carried over."""
    from dataclasses import replace
    f = _mutant(tmp_path, "reversal-target-not-shifted")
    plain = check_file(f, quick=True, limits=LIM)
    r = check_file(f, quick=True, limits=replace(LIM, coverage=True))
    assert [(c["id"], c["status"], c["measured"]) for c in r["checks"]] == \
        [(c["id"], c["status"], c["measured"]) for c in plain["checks"]]
    assert set(r["coverage"]["probes"]) >= {"train-trace", "overfit", "causal-leak", "(load)"}
    repair_check(r, f, limits=LIM, max_diagnoses=1)
    assert "coverage" not in r                          # read by the repair, never reported
    rep = next(d["repair"] for d in r["diagnoses"] if d["id"] == "target-not-shifted")
    assert rep["verified"] and "train-trace" not in rep["carried"]
    assert {"overfit", "causal-leak", "decode"} <= set(rep["carried"])
    repair_check(plain, f, limits=LIM, max_diagnoses=1)  # the whole quick suite: the same repair
    again = next(d["repair"] for d in plain["diagnoses"] if d["id"] == "target-not-shifted")
    assert again["diff"] == rep["diff"] and again["carried"] == []
