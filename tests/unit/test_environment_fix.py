"""A package the assignment allows and mtxdiag's Python lacks: a student's own `check` tells them to install
it; only a grading run (`grade`, `gradescope`: grade_one) addresses the instructor. No process starts."""
from __future__ import annotations

from harness import allowed, engine
from harness.grading.results import grade_one
from harness.outcome import ChildOutcome

ABSENT = "mtxdiag_absent_pkg_for_tests"


def _lacking(monkeypatch) -> dict:
    monkeypatch.setitem(allowed.ALLOWED, "reversal", allowed.ALLOWED["reversal"] + (ABSENT,))
    payload = {"load": {"ok": False, "kind": "missing-module", "message": f"No module named '{ABSENT}'"},
               "checks": [{"id": "load", "status": "error", "measured": None, "expected": "", "detail": "",
                           "data": {"kind": "missing-module", "missing_module": ABSENT}, "location": None}]}
    return engine.build_result(ChildOutcome(payload, "ok"), "student.py", "reversal")


def test_a_students_check_is_addressed_to_them(monkeypatch):
    r = _lacking(monkeypatch)
    (d,) = [d for d in r["diagnoses"] if d["id"] == "grader-fault"]
    assert d["fix"].startswith("Install it") and f"pip install {ABSENT}" in d["fix"]
    assert "your code is not at fault" in d["fix"]
    said = " ".join([d["title"], d["fix"], r["error"]["reason"]] + d["evidence"]).lower()
    assert "instructor" not in said and "grade again" not in said and "grader" not in said


def test_a_grading_run_is_addressed_to_the_instructor(monkeypatch, tmp_path):
    checked = _lacking(monkeypatch)
    job = {"filename": "student.py", "data": b"x = 1\n", "assignment": "reversal", "seed": 0, "device": "cpu",
           "quick": True, "limits": {}, "display": "student.py"}
    out = grade_one(job, checker=lambda path, **kw: checked)
    (d,) = [d for d in out["result"]["diagnoses"] if d["id"] == "grader-fault"]
    assert d["fix"].startswith("Instructor: install it") and f"`pip install {ABSENT}`" in d["fix"]
    assert "student's code is not at fault" in d["fix"]


def test_other_results_are_left_alone():
    r = {"error": {"kind": "timeout"}, "diagnoses": [{"id": "grader-fault", "fix": "Install it in the Python that "
                                                      "runs mtxdiag (`x`)"}]}
    assert engine.for_instructor(r)["diagnoses"][0]["fix"].startswith("Install it")
