"""Inputs as the course calls them (issue 25, item 3): a component right on the course's inputs but not on
others its signature allows (2-D input into Linear, SDPA without a mask) is a robustness note at info,
never `problems`; the same code wrong on the course's own inputs still fails. Repositories written for
this test from the project's reference, each run in the real child."""
from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from harness.cli.main import main

os.environ.setdefault("OMP_NUM_THREADS", "1")

LINEAR_3D_ONLY = ("        return x @ self.weight.T                                    # (..., d_in) -> (..., d_out)",
                  "        return torch.einsum('bsi,oi->bso', x, self.weight)")
SDPA_NEEDS_MASK = ("    if mask is not None:\n        scores = scores.masked_fill(~mask, float(\"-inf\"))",
                   "    if True:\n        scores = scores.masked_fill(mask.logical_not(), float(\"-inf\"))")


def _repo(root: Path, *edits) -> Path:
    from mutants.lm_export import reference_repo_files
    for rel, text in reference_repo_files().items():
        if rel.endswith("model.py"):
            for old, new in edits:
                assert text.count(old) == 1, old
                text = text.replace(old, new)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _check(path: Path, tmp_path: Path) -> dict:
    out = tmp_path / "out.json"
    CliRunner().invoke(main, ["check", str(path), "--quick", "--no-daemon", "--assignment", "lm",
                              "--json", str(out), "--html", str(tmp_path / "out.html")])
    return json.loads(out.read_text())


def test_failures_beyond_the_course_inputs_are_info_notes(tmp_path):
    r = _check(_repo(tmp_path / "repo", LINEAR_3D_ONLY, SDPA_NEEDS_MASK), tmp_path)
    assert r["verdict"] == "clean", r["diagnoses"]
    notes = {d["component"]: d for d in r["diagnoses"] if d["id"] == "robustness-note"}
    assert set(notes) >= {"linear", "sdpa"}, r["diagnoses"]
    assert all(d["severity"] == "info" for d in r["diagnoses"])
    assert "beyond the course" in " ".join(notes["sdpa"]["evidence"])
    assert notes["linear"]["location"]["file"].endswith("model.py") and notes["linear"]["location"]["line"]
    by = {c["id"]: c for c in r["checks"]}
    assert by["lm-linear"]["status"] == "pass" and by["lm-sdpa"]["status"] == "pass"


def test_the_same_component_wrong_on_the_course_inputs_still_fails(tmp_path):
    wrong = ("        return x @ self.weight.T                                    # (..., d_in) -> (..., d_out)",
             "        return torch.einsum('bsi,oi->bso', x, self.weight) * 1.01")
    r = _check(_repo(tmp_path / "repo", wrong), tmp_path)
    assert r["verdict"] == "problems"
    assert r["diagnoses"][0]["component"] == "linear" and r["diagnoses"][0]["severity"] == "problem"
