"""Gradescope honours the instructor's hint level (issue 30): the cause only, also its line, also the verified
patch; the rubric's hint_level is validated; the terminal shows the diff and the numbers."""
from __future__ import annotations

import pytest

from harness.grading import rubric as rubric_mod
from harness.grading.gradescope import gradescope_results
from harness.report import terminal

DIFF = "--- a/m.py\n+++ b/m.py\n@@ -3 +3 @@\n-    causal = torch.triu(x)\n+    causal = torch.tril(x)\n"


def _result():
    d = {"id": "causal-mask-inverted", "title": "Causal mask inverted", "confidence": 0.95,
         "evidence": ["causal-leak: measured 1.6, expected 0"], "fix": "Use torch.tril.",
         "location": {"file": "m.py", "line": 3}, "severity": "problem",
         "repair": {"verified": True, "found_by": "catalogue", "kind": "triangle", "line": 3,
                    "label": "torch.tril instead of torch.triu", "diff": DIFF, "before": {"causal-leak": 1.6},
                    "after": {"causal-leak": 0.0}, "changes": ["causal-leak: 1.6 -> 0"], "tried": 1}}
    return {"assignment": "reversal", "verdict": "problems", "diagnoses": [d], "checks": []}


def _grade():
    return {"score": 80.0, "max_score": 100.0, "breakdown": [
        {"id": "causal-mask-inverted", "kind": "cause", "points": -20.0, "title": "Causal mask inverted"}]}


def _test_output(hint):
    out = gradescope_results(_result(), _grade(), hint=hint)
    return next(t for t in out["tests"] if t["name"].endswith("[causal-mask-inverted]"))["output"]


def test_cause_level_hides_the_line_and_the_patch():
    text = _test_output("cause")
    assert "Use torch.tril." in text and "line 3" not in text and "Patch" not in text


def test_line_level_is_the_old_output():
    text = _test_output("line")
    assert "Where: m.py line 3" in text and "Patch" not in text and "+    causal" not in text


def test_patch_level_shows_the_verified_diff_and_numbers():
    text = _test_output("patch")
    assert "Where: m.py line 3" in text and "causal-leak: 1.6 -> 0" in text
    assert "    -    causal = torch.triu(x)" in text and "    +    causal = torch.tril(x)" in text
    assert "+++ b/m.py" not in text


def test_patch_level_without_a_verified_repair_shows_no_patch():
    r = _result()
    r["diagnoses"][0]["repair"] = {"verified": False, "tried": 4, "diff": None}
    out = gradescope_results(r, _grade(), hint="patch")
    assert "Patch" not in out["tests"][0]["output"]


def test_rubric_hint_level_is_validated():
    base = 'max_score = 100\n'
    assert rubric_mod.parse(base + 'hint_level = "patch"\n').hint_level == "patch"
    assert rubric_mod.parse(base).hint_level == ""
    with pytest.raises(rubric_mod.RubricError, match="hint_level"):
        rubric_mod.parse(base + 'hint_level = "everything"\n')


def test_terminal_repairs_section():
    text = terminal.repairs(_result(), color=False)
    assert "repair verified (the usual fix): torch.tril instead of torch.triu at line 3" in text
    assert "causal-leak: 1.6 -> 0" in text and "-    causal = torch.triu(x)" in text
    assert terminal.repairs({"diagnoses": [{"id": "x"}]}, color=False) == ""


def test_cause_level_redacts_lines_named_in_evidence():
    r = _result()
    r["diagnoses"][0]["evidence"].append("mechanism: the weights multiplied with V at line 76 give 84%")
    r["checks"] = [{"id": "causal-leak", "status": "fail", "measured": 1.6, "expected": "0",
                    "detail": "first divergence at line 76"}]
    out = gradescope_results(r, _grade(), hint="cause")
    text = "\n".join(t["output"] for t in out["tests"])
    assert "76" not in text and "84%" in text and "a line of your code" in text
    assert "line 76" in "\n".join(t["output"] for t in gradescope_results(r, _grade(), hint="line")["tests"])
