"""`mtxdiag gradescope run` on the block and lm zips (the reversal zip: test_gradescope_run.py): each gives a
valid results.json for a correct submission (full marks), a buggy one (an exported mutant: fewer points), one
that does not load (0, with the reason) and an empty upload (0, with the reason). --quick zips, --no-setup."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.grading import gradescope_schema

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, MTXDIAG_DAEMON="0")


def _harness(*args, cwd=ROOT, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=ENV, timeout=timeout)


def _graded(zip_path: Path, submission: Path, keep: Path) -> dict:
    r = _harness("gradescope", "run", zip_path, submission, "--keep", keep, "--no-setup")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    raw = (keep / "results" / "results.json").read_bytes()
    assert gradescope_schema.violations(raw) == [], gradescope_schema.violations(raw)
    return json.loads(raw)


def _mutant(export: Path, mutant_id: str) -> Path:
    manifest = json.loads((export / "manifest.json").read_text())
    return export / next(n for n, m in manifest.items() if m["id"] == mutant_id).rstrip("/")


CASES = {
    "block": {"correct": "block_lesson.py", "mutant": "block-causal-mask-missing", "cause": "causal-mask-missing"},
    "lm": {"correct": "lm_example", "mutant": "lm-rope-sin-cos-swapped", "cause": "rope"},
}


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(CASES))
def test_each_assignments_zip_grades_correct_buggy_broken_and_empty(assignment, tmp_path):
    case = CASES[assignment]
    z = tmp_path / "autograder.zip"
    r = _harness("gradescope", "build", "--assignment", assignment, "--quick", "--out", z)
    assert r.returncode == 0, r.stdout + r.stderr
    export = tmp_path / "export"
    assert _harness("mutants", "export", export, "--assignment", assignment).returncode == 0

    # correct: the bundled example, full marks
    full = _graded(z, ROOT / "submissions" / case["correct"], tmp_path / "ok")
    top = gradescope_schema.max_score(full)
    assert full["score"] == top > 0 and full["extra_data"]["verdict"] == "clean", full["output"]

    # buggy: an exported mutant loses points, and the output names what is wrong
    buggy = _graded(z, _mutant(export, case["mutant"]), tmp_path / "bug")
    assert 0 <= buggy["score"] < top and case["cause"] in json.dumps(buggy), buggy["output"]

    # broken: it does not load (a syntax error where the course's entry point is)
    if assignment == "lm":
        broken = tmp_path / "broken"
        shutil.copytree(ROOT / "submissions" / "lm_example", broken, ignore=shutil.ignore_patterns("__pycache__"))
        (broken / "tests" / "adapters.py").write_text("def run_linear(:\n")
    else:
        broken = tmp_path / "broken.py"
        broken.write_text("import torch\nclass MultiHeadAttention(torch.nn.Module)\n    pass\n")
    res = _graded(z, broken, tmp_path / "broken-ag")
    assert res["score"] == 0 and ("syntax" in json.dumps(res).lower()), res["output"]

    # empty: nothing uploaded
    (tmp_path / "empty").mkdir()
    res = _graded(z, tmp_path / "empty", tmp_path / "empty-ag")
    assert res["score"] == 0 and res["output"].strip(), res
