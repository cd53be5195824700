"""Correct files that lean on torch's own machinery come back clean (issue 11's two named cases).

LR schedulers wrap optimizer.step, autocast patches dispatch, clipping rescales .grad in place: none of
this is the student's tampering, and none of it is a bug. Driven through the CLI, as a student would.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main

CORPUS = Path(__file__).parent / "corpus" / "reversal" / "correct"


@pytest.mark.parametrize("name", ["adamw_lambdalr_clip.py", "onecycle_bf16_autocast.py"])
def test_scheduler_clipping_and_autocast_are_clean(tmp_path, name):
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["check", str(CORPUS / name), "--quick", "--json", str(out),
                                    "--html", str(tmp_path / "r.html")])
    result = json.loads(out.read_text())
    assert [d["id"] for d in result["diagnoses"] if d["confidence"] >= 0.5] == [], result["diagnoses"]
    assert not any(d["id"] == "tampering" for d in result["diagnoses"])
    assert result["verdict"] == "clean" and res.exit_code == 0
    # the training loop was really traced: the scheduler's lr and the clipped gradients were seen
    trace = {c["id"]: c for c in result["checks"]}
    assert trace["lr-schedule"]["status"] == "pass" and trace["train-zero-grad"]["status"] == "pass"
