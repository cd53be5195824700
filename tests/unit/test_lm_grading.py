"""Assignment `lm` is graded per component: one bug costs its component (and what is built on it is
charged once, where the bug starts), and Gradescope gets one test per component with its diagnosis."""
from __future__ import annotations

from harness.grading import rubric
from harness.grading.gradescope import gradescope_results
from harness.checks import LM_COMPONENTS


def _result(failing=("rope",), missing=()):
    checks = []
    for c in LM_COMPONENTS:
        status = "fail" if c in failing else "skip" if c in missing else "pass"
        checks.append({"id": f"lm-{c}", "status": status, "measured": None, "expected": "", "detail": "",
                       "data": {}, "location": None})
    diags = [{"id": "rope-halves-not-pairs", "component": "rope", "confidence": 0.95, "title": "RoPE halves",
              "evidence": ["equals the reference with the halves edit"], "location": None}] if "rope" in failing else []
    return {"assignment": "lm", "verdict": "problems" if failing else "clean", "checks": checks, "diagnoses": diags}


def test_one_component_bug_does_not_zero_the_grade():
    clean = rubric.score(_result(failing=()), rubric.load())
    one = rubric.score(_result(), rubric.load())
    assert clean["score"] == clean["max_score"] == 100
    assert 50 < one["score"] < 100
    assert any(b["id"] == "rope" and "rope-halves-not-pairs" in b["title"] for b in one["breakdown"])
    half = rubric.score(_result(failing=(), missing=("adamw", "lr-schedule")), rubric.load())
    assert half["score"] < 100 and {b["id"].replace("_", "-") for b in half["breakdown"]} == {"adamw", "lr-schedule"}


def test_gradescope_has_one_markdown_test_per_component():
    r = _result()
    g = gradescope_results(r, rubric.score(r, rubric.load()))
    names = [t["name"] for t in g["tests"]]
    assert len(names) == len(LM_COMPONENTS) and all(t["output_format"] == "md" for t in g["tests"])
    rope = next(t for t in g["tests"] if " rope " in t["name"])
    assert rope["score"] < rope["max_score"] and "rope-halves-not-pairs" in rope["output"]
    assert abs(sum(t["score"] for t in g["tests"]) - g["score"]) < 1e-6
